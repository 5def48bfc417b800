/*
 * cli_run.h: running a program the way a user would, for the CLI tests:
 * in a given directory, with stdout and stderr captured. Test-only; include
 * after cmocka.h.
 */
#ifndef FLARE_TESTS_CLI_RUN_H
#define FLARE_TESTS_CLI_RUN_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* Reads at most size - 1 bytes of path into buffer ("" when unreadable). */
static inline void cli_read_file(const char *path, char *buffer, size_t size)
{
    buffer[0] = '\0';
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return;
    ssize_t got = read(fd, buffer, size - 1);
    close(fd);
    buffer[got > 0 ? got : 0] = '\0';
}

/*
 * Runs program (a path; a name looked up in PATH when search is set) with the
 * NULL-terminated arguments, in directory, with stdout and stderr going to
 * files there that are then read into out and err. Returns the exit status
 * as a shell reports it (128+N for signal N), or -1 when fork failed.
 */
static inline int cli_run_program(const char *program, int search, const char *const *arguments,
                                  const char *directory, char *out, size_t out_size, char *err,
                                  size_t err_size)
{
    char out_path[4200], err_path[4200];
    snprintf(out_path, sizeof(out_path), "%s/stdout.txt", directory);
    snprintf(err_path, sizeof(err_path), "%s/stderr.txt", directory);
    const char *argv[64] = {program};
    int count = 1;
    for (; arguments != NULL && arguments[count - 1] != NULL && count < 63; count++)
        argv[count] = arguments[count - 1];
    argv[count] = NULL;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int out_fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int err_fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(out_fd, 1);
        dup2(err_fd, 2);
        if (chdir(directory) != 0)
            _exit(99);
        if (search)
            execvp(program, (char *const *)argv);
        else
            execv(program, (char *const *)argv);
        _exit(98);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0) {
    }
    cli_read_file(out_path, out, out_size);
    cli_read_file(err_path, err, err_size);
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}

/*
 * The set-up every CLI test shares: the directory of the built binaries
 * from FLARE_TEST_BIN_DIR (ctest sets it) into bin_dir, and no
 * FLARE_OUTPUT_DIR, FLARE_SESSION_DIR or COLUMNS of the caller's leaking
 * into the programs run. Returns 0, or -1 with a message when the variable is unset.
 */
static inline int cli_test_environment(char *bin_dir, size_t size)
{
    const char *dir = getenv("FLARE_TEST_BIN_DIR");
    if (dir == NULL) {
        fprintf(stderr, "FLARE_TEST_BIN_DIR is not set (run through ctest)\n");
        return -1;
    }
    snprintf(bin_dir, size, "%s", dir);
    unsetenv("FLARE_OUTPUT_DIR");
    unsetenv("FLARE_SESSION_DIR");
    unsetenv("COLUMNS"); /* the report's replay tables fit it: 100 columns when unset */
    return 0;
}

#endif /* FLARE_TESTS_CLI_RUN_H */
