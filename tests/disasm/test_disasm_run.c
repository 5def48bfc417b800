/*
 * test_disasm_run.c: finding and running the disassembler
 * (src/disasm/disasm_run.h) with fake ones: shell scripts the test writes
 * into a fresh temporary directory. `cuobjdump` checks that it got exactly
 * `-sass FILE`, an empty stdin and the caller's environment, then prints a
 * listing; `nvdisasm` checks that it got `FILE`. Others exit 3 with a
 * message, flood stderr, kill themselves, sleep past the timeout (one with
 * a child of its own, one with its pipes closed), or print more than the
 * cap. disasm_find is tried with FLARE_DISASSEMBLER set, set empty, and
 * with PATH and CUDA_HOME pointed at the temporary directory.
 *
 * After every run: no child left unreaped, no descriptor left open. Times
 * are only bounded generously (the suite runs on small, busy machines).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "disasm/disasm_parse.h"
#include "disasm/disasm_run.h"
#include "flare/flare.h"
#include "test_util.h"

/* Long enough for any run that should succeed, on a loaded machine. */
#define GENEROUS_TIMEOUT_MS 60000u
#define MAX_BYTES           (1u << 20)

static char dir[256];
static char cubin[512];
static char *saved_path, *saved_cuda_home, *saved_disassembler;
static int fds_at_start;

static const char listing[] =
    "\tcode for sm_90\n"
    "\t\tFunction : _Z9hot_chainPKjPjii\n"
    "\t.headerflags\t@\"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90 "
    "EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)\"\n"
    "        /*0000*/                   LDC R1, c[0x0][0x28] ;                       /* "
    "0x00000a00ff017b82 */\n"
    "                                                                                 /* "
    "0x000fe20000000800 */\n"
    "        /*0010*/                   S2R R0, SR_TID.X ;                           /* "
    "0x0000000000007919 */\n"
    "        /*00f0*/              @!P0 BRA 0x120 ;                                  /* 0x... */\n"
    "        /*0100*/                   LDG.E R5, desc[UR4][R2.64] ;                 /* 0x... */\n"
    "\t\t..........\n";

/* ---- helpers ---- */

static void path_in_dir(char *out, size_t size, const char *name)
{
    int n = snprintf(out, size, "%s/%s", dir, name);
    assert_true(n > 0 && (size_t)n < size);
}

static void write_file(const char *name, const char *content, mode_t mode)
{
    char path[512];
    path_in_dir(path, sizeof(path), name);
    FILE *file = fopen(path, "w");
    assert_non_null(file);
    assert_int_equal(fputs(content, file) >= 0, 1);
    assert_int_equal(fclose(file), 0);
    assert_int_equal(chmod(path, mode), 0);
}

/* A script named name whose body follows "#!/bin/sh\n". */
static void write_script(const char *name, const char *body)
{
    char content[4096];
    int n = snprintf(content, sizeof(content), "#!/bin/sh\n%s", body);
    assert_true(n > 0 && (size_t)n < sizeof(content));
    write_file(name, content, 0755);
}

static int count_open_fds(void)
{
    DIR *fds = opendir("/proc/self/fd");
    assert_non_null(fds);
    int count = 0;
    while (readdir(fds) != NULL)
        count++;
    closedir(fds);
    return count;
}

/* No child of ours left, running or unreaped; no descriptor left open. */
static void expect_clean(void)
{
    errno = 0;
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    assert_int_equal(errno, ECHILD);
    assert_int_equal(count_open_fds(), fds_at_start);
}

static int contains(const char *text, const char *part)
{
    return strstr(text, part) != NULL;
}

typedef struct run_result {
    int rc;
    char *out;
    size_t size;
    char error[1024];
    double seconds;
} run_result;

static run_result run(const char *name, uint32_t timeout_ms, size_t max_bytes)
{
    char program[512];
    path_in_dir(program, sizeof(program), name);
    run_result r = {0};
    uint64_t start = test_now_ns();
    r.rc = disasm_run(program, cubin, timeout_ms, max_bytes, &r.out, &r.size, r.error,
                      sizeof(r.error));
    r.seconds = (double)(test_now_ns() - start) / 1e9;
    if (r.rc != FLARE_OK) {
        assert_null(r.out);
        assert_int_equal(r.size, 0);
    }
    expect_clean();
    return r;
}

static char *saved(const char *name)
{
    const char *value = getenv(name);
    return value != NULL ? strdup(value) : NULL;
}

static void put_back(const char *name, const char *value)
{
    if (value != NULL)
        setenv(name, value, 1);
    else
        unsetenv(name);
}

static int restore_environment(void **state)
{
    (void)state;
    put_back("PATH", saved_path);
    put_back("CUDA_HOME", saved_cuda_home);
    put_back("FLARE_DISASSEMBLER", saved_disassembler);
    return 0;
}

/* ---- setup ---- */

static void write_scripts(void)
{
    char body[4096];
    snprintf(body, sizeof(body),
             "if [ \"$#\" -ne 2 ] || [ \"$1\" != \"-sass\" ] || [ \"$2\" != \"%s\" ]; then\n"
             "  echo \"bad arguments: $*\" >&2; exit 9\nfi\n"
             "if read -r line; then echo 'stdin is not empty' >&2; exit 8; fi\n"
             "if [ \"$FLARE_TEST_DISASM_MARK\" != kept ]; then echo 'no mark' >&2; exit 7; fi\n"
             "cat <<'LISTING'\n%sLISTING\n",
             cubin, listing);
    write_script("bin/cuobjdump", body);
    write_script("home/bin/cuobjdump", body);
    snprintf(body, sizeof(body),
             "if [ \"$#\" -ne 1 ] || [ \"$1\" != \"%s\" ]; then\n"
             "  echo \"bad arguments: $*\" >&2; exit 9\nfi\n"
             "echo '        /*0000*/                   EXIT ;'\n",
             cubin);
    write_script("bin/nvdisasm", body);
    write_script("nvonly/nvdisasm", body);
    write_file("noexec/cuobjdump", "#!/bin/sh\nexit 0\n", 0644);
    write_script("bin/fail3", "echo 'nvdisasm fatal : Could not open input file' >&2\nexit 3\n");
    write_script("bin/flood_stderr",
                 "i=0\nwhile [ $i -lt 200 ]; do echo \"filler $i of the stderr flood\" >&2;"
                 " i=$((i+1)); done\necho 'the last words' >&2\nexit 4\n");
    write_script("bin/killed", "kill -TERM $$\nsleep 5\n");
    write_script("bin/silent", "exit 0\n");
    snprintf(body, sizeof(body), "sleep 120 &\necho $! > '%s/sleep_pid'\nwait\n", dir);
    write_script("bin/sleeper", body);
    write_script("bin/closes_and_lingers", "exec >/dev/null 2>&1\nsleep 30\n");
    write_script("bin/flood", "exec yes 0123456789abcdef0123456789abcdef\n");
    write_script("bin/exact1000", "head -c 1000 /dev/zero | tr '\\0' a\n");
}

static int group_setup(void **state)
{
    (void)state;
    test_make_temp_dir(dir, sizeof(dir), "disasm");
    static const char *const subdirs[] = {"bin", "home", "home/bin", "nvonly", "noexec", "empty"};
    for (size_t i = 0; i < sizeof(subdirs) / sizeof(subdirs[0]); i++) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", dir, subdirs[i]);
        if (mkdir(path, 0755) != 0)
            return -1;
    }
    snprintf(cubin, sizeof(cubin), "%s/kernel.cubin", dir);
    FILE *file = fopen(cubin, "w");
    if (file == NULL)
        return -1;
    fputs("not really ELF\n", file);
    fclose(file);
    write_scripts();
    saved_path = saved("PATH");
    saved_cuda_home = saved("CUDA_HOME");
    saved_disassembler = saved("FLARE_DISASSEMBLER");
    setenv("FLARE_TEST_DISASM_MARK", "kept", 1);
    fds_at_start = count_open_fds();
    return 0;
}

static int group_teardown(void **state)
{
    restore_environment(state);
    free(saved_path);
    free(saved_cuda_home);
    free(saved_disassembler);
    test_remove_dir(dir);
    return 0;
}

/* ---- running ---- */

static int count_instruction(const char *symbol, uint64_t offset, const char *text, void *user)
{
    (void)symbol;
    (void)offset;
    (void)text;
    (*(int *)user)++;
    return 0;
}

static void test_cuobjdump_gets_sass_and_file(void **state)
{
    (void)state;
    run_result r = run("bin/cuobjdump", GENEROUS_TIMEOUT_MS, MAX_BYTES);
    assert_int_equal(r.rc, FLARE_OK);
    assert_string_equal(r.error, "");
    assert_int_equal(r.size, strlen(listing));
    assert_memory_equal(r.out, listing, r.size);
    assert_int_equal(r.out[r.size], '\0');
    int instructions = 0;
    assert_int_equal(disasm_parse(r.out, r.size, count_instruction, &instructions, NULL), 0);
    assert_int_equal(instructions, 4);
    free(r.out);
}

static void test_nvdisasm_gets_file(void **state)
{
    (void)state;
    run_result r = run("bin/nvdisasm", GENEROUS_TIMEOUT_MS, MAX_BYTES);
    assert_int_equal(r.rc, FLARE_OK);
    assert_string_equal(r.out, "        /*0000*/                   EXIT ;\n");
    free(r.out);
}

static void test_empty_output(void **state)
{
    (void)state;
    run_result r = run("bin/silent", GENEROUS_TIMEOUT_MS, MAX_BYTES);
    assert_int_equal(r.rc, FLARE_OK);
    assert_non_null(r.out);
    assert_int_equal(r.size, 0);
    assert_string_equal(r.out, "");
    free(r.out);
}

static void test_exit_status_and_stderr(void **state)
{
    (void)state;
    run_result r = run("bin/fail3", GENEROUS_TIMEOUT_MS, MAX_BYTES);
    assert_int_equal(r.rc, FLARE_ERR_IO);
    assert_true(contains(r.error, "status 3"));
    assert_true(contains(r.error, "nvdisasm fatal : Could not open input file"));
}

/* Only stderr's last bytes are kept, on one line. */
static void test_stderr_tail(void **state)
{
    (void)state;
    run_result r = run("bin/flood_stderr", GENEROUS_TIMEOUT_MS, MAX_BYTES);
    assert_int_equal(r.rc, FLARE_ERR_IO);
    assert_true(contains(r.error, "status 4"));
    assert_true(contains(r.error, "the last words"));
    assert_false(contains(r.error, "filler 0 "));
    assert_false(contains(r.error, "\n"));
    assert_true(strlen(r.error) < 200 + DISASM_STDERR_TAIL);
}

static void test_killed_by_signal(void **state)
{
    (void)state;
    run_result r = run("bin/killed", GENEROUS_TIMEOUT_MS, MAX_BYTES);
    assert_int_equal(r.rc, FLARE_ERR_IO);
    assert_true(contains(r.error, "signal 15"));
}

/* Whether a process is gone: no such process, or a zombie its new parent
 * has yet to reap. */
static int process_gone(pid_t pid)
{
    char path[64], stat_line[256];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *file = fopen(path, "r");
    if (file == NULL)
        return 1;
    size_t n = fread(stat_line, 1, sizeof(stat_line) - 1, file);
    fclose(file);
    stat_line[n] = '\0';
    const char *state = strrchr(stat_line, ')');
    return state != NULL && (state[2] == 'Z' || state[2] == 'X');
}

/* Killed with its own child (the script's `sleep 30`), fast. */
static void test_timeout(void **state)
{
    (void)state;
    run_result r = run("bin/sleeper", 300, MAX_BYTES);
    assert_int_equal(r.rc, FLARE_ERR_TIMEOUT);
    assert_true(contains(r.error, "timed out"));
    assert_true(r.seconds < 10.0);
    char path[512];
    path_in_dir(path, sizeof(path), "sleep_pid");
    FILE *file = fopen(path, "r");
    int pid = 0;
    if (file != NULL) { /* the script may not have got that far on a busy machine */
        if (fscanf(file, "%d", &pid) != 1)
            pid = 0;
        fclose(file);
    }
    if (pid > 0)
        TEST_WAIT_UNTIL(process_gone((pid_t)pid));
}

/* A child that closes its pipes and lingers is timed out all the same. */
static void test_timeout_with_pipes_closed(void **state)
{
    (void)state;
    run_result r = run("bin/closes_and_lingers", 300, MAX_BYTES);
    assert_int_equal(r.rc, FLARE_ERR_TIMEOUT);
    assert_true(contains(r.error, "timed out"));
    assert_true(r.seconds < 10.0);
}

/* Endless output: stopped at the cap, the child killed; SIGPIPE (the child
 * may yet write) must not reach this process. */
static void test_output_over_the_cap(void **state)
{
    (void)state;
    run_result r = run("bin/flood", GENEROUS_TIMEOUT_MS, 100000);
    assert_int_equal(r.rc, FLARE_ERR_FULL);
    assert_true(contains(r.error, "output over 100000 bytes"));
    assert_true(r.seconds < 10.0);
}

static void test_output_at_the_cap(void **state)
{
    (void)state;
    run_result r = run("bin/exact1000", GENEROUS_TIMEOUT_MS, 1000);
    assert_int_equal(r.rc, FLARE_OK);
    assert_int_equal(r.size, 1000);
    assert_int_equal(strspn(r.out, "a"), 1000);
    assert_int_equal(r.out[1000], '\0');
    free(r.out);
    r = run("bin/exact1000", GENEROUS_TIMEOUT_MS, 999);
    assert_int_equal(r.rc, FLARE_ERR_FULL);
    assert_true(contains(r.error, "output over 999 bytes"));
}

static void test_cannot_start(void **state)
{
    (void)state;
    run_result r = run("bin/no_such_program", GENEROUS_TIMEOUT_MS, MAX_BYTES);
    assert_int_equal(r.rc, FLARE_ERR_IO);
    assert_true(contains(r.error, "could not start"));
    r = run("noexec/cuobjdump", GENEROUS_TIMEOUT_MS, MAX_BYTES);
    assert_int_equal(r.rc, FLARE_ERR_IO);
}

static void test_run_bad_arguments(void **state)
{
    (void)state;
    char *out = (char *)1;
    size_t size = 5;
    char error[128];
    assert_int_equal(disasm_run(NULL, cubin, 1000, 10, &out, &size, error, sizeof(error)),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_null(out);
    assert_int_equal(size, 0);
    assert_int_equal(disasm_run("/bin/true", NULL, 1000, 10, &out, &size, NULL, 0),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(disasm_run("/bin/true", cubin, 0, 10, &out, &size, NULL, 0),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(disasm_run("/bin/true", cubin, 1000, 0, &out, &size, NULL, 0),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(disasm_run("/bin/true", cubin, 1000, SIZE_MAX, &out, &size, NULL, 0),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(disasm_run("/bin/true", cubin, 1000, 10, NULL, &size, NULL, 0),
                     FLARE_ERR_INVALID_ARGUMENT);
    expect_clean();
}

/* ---- finding ---- */

static void test_find_from_the_variable(void **state)
{
    (void)state;
    char path[512], why[512], expected[512];
    path_in_dir(expected, sizeof(expected), "bin/nvdisasm");
    setenv("FLARE_DISASSEMBLER", expected, 1);
    assert_int_equal(disasm_find(path, sizeof(path), why, sizeof(why)), FLARE_OK);
    assert_string_equal(path, expected);
    assert_int_equal(disasm_find(path, 4, why, sizeof(why)), FLARE_ERR_INVALID_ARGUMENT);

    setenv("FLARE_DISASSEMBLER", "", 1);
    assert_int_equal(disasm_find(path, sizeof(path), why, sizeof(why)), FLARE_ERR_UNSUPPORTED);
    assert_true(contains(why, "FLARE_DISASSEMBLER"));
    assert_string_equal(path, "");

    setenv("FLARE_DISASSEMBLER", cubin, 1); /* not executable */
    assert_int_equal(disasm_find(path, sizeof(path), why, sizeof(why)), FLARE_ERR_UNSUPPORTED);
    assert_true(contains(why, cubin));
    assert_int_equal(disasm_find(NULL, 0, NULL, 0), FLARE_ERR_INVALID_ARGUMENT);
}

/* An empty entry and a directory whose cuobjdump is not executable are
 * passed over. */
static void test_find_on_path(void **state)
{
    (void)state;
    char path[512], why[512], search[2048], expected[512];
    unsetenv("FLARE_DISASSEMBLER");
    snprintf(search, sizeof(search), "%s/empty::%s/noexec:%s/bin:/usr/bin", dir, dir, dir);
    setenv("PATH", search, 1);
    path_in_dir(expected, sizeof(expected), "bin/cuobjdump");
    assert_int_equal(disasm_find(path, sizeof(path), why, sizeof(why)), FLARE_OK);
    assert_string_equal(path, expected);
}

static int toolkit_has(const char *name)
{
    char path[128];
    snprintf(path, sizeof(path), "/usr/local/cuda/bin/%s", name);
    return access(path, X_OK) == 0;
}

/* cuobjdump anywhere comes before nvdisasm anywhere: nvdisasm on PATH is
 * found only where /usr/local/cuda/bin has no cuobjdump. */
static void test_find_nvdisasm_on_path(void **state)
{
    (void)state;
    char path[512], why[512], search[512], expected[512];
    unsetenv("FLARE_DISASSEMBLER");
    unsetenv("CUDA_HOME");
    path_in_dir(search, sizeof(search), "nvonly");
    setenv("PATH", search, 1);
    path_in_dir(expected, sizeof(expected), "nvonly/nvdisasm");
    assert_int_equal(disasm_find(path, sizeof(path), why, sizeof(why)), FLARE_OK);
    if (toolkit_has("cuobjdump"))
        assert_string_equal(path, "/usr/local/cuda/bin/cuobjdump");
    else
        assert_string_equal(path, expected);
}

static void test_find_in_cuda_home(void **state)
{
    (void)state;
    char path[512], why[512], value[512], expected[512];
    unsetenv("FLARE_DISASSEMBLER");
    path_in_dir(value, sizeof(value), "empty");
    setenv("PATH", value, 1);
    path_in_dir(value, sizeof(value), "home");
    setenv("CUDA_HOME", value, 1);
    path_in_dir(expected, sizeof(expected), "home/bin/cuobjdump");
    assert_int_equal(disasm_find(path, sizeof(path), why, sizeof(why)), FLARE_OK);
    assert_string_equal(path, expected);
}

/* Nothing anywhere (where this machine's toolkit has neither). */
static void test_find_none(void **state)
{
    (void)state;
    char path[512], why[1024], value[512];
    unsetenv("FLARE_DISASSEMBLER");
    path_in_dir(value, sizeof(value), "empty");
    setenv("PATH", value, 1);
    setenv("CUDA_HOME", value, 1);
    int rc = disasm_find(path, sizeof(path), why, sizeof(why));
    if (toolkit_has("cuobjdump") || toolkit_has("nvdisasm")) {
        assert_int_equal(rc, FLARE_OK);
        return;
    }
    assert_int_equal(rc, FLARE_ERR_UNSUPPORTED);
    assert_true(contains(why, "cuobjdump"));
    assert_true(contains(why, "nvdisasm"));
    assert_true(contains(why, "PATH"));
    assert_true(contains(why, value));
    assert_true(contains(why, "/usr/local/cuda/bin"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuobjdump_gets_sass_and_file),
        cmocka_unit_test(test_nvdisasm_gets_file),
        cmocka_unit_test(test_empty_output),
        cmocka_unit_test(test_exit_status_and_stderr),
        cmocka_unit_test(test_stderr_tail),
        cmocka_unit_test(test_killed_by_signal),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_timeout_with_pipes_closed),
        cmocka_unit_test(test_output_over_the_cap),
        cmocka_unit_test(test_output_at_the_cap),
        cmocka_unit_test(test_cannot_start),
        cmocka_unit_test(test_run_bad_arguments),
        cmocka_unit_test_teardown(test_find_from_the_variable, restore_environment),
        cmocka_unit_test_teardown(test_find_on_path, restore_environment),
        cmocka_unit_test_teardown(test_find_nvdisasm_on_path, restore_environment),
        cmocka_unit_test_teardown(test_find_in_cuda_home, restore_environment),
        cmocka_unit_test_teardown(test_find_none, restore_environment),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
