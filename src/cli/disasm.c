/*
 * disasm.c: `flare disasm [DIR]`: gives a session's sampled instructions
 * that have no source line their SASS text (src/disasm/disasm_session.h),
 * for a session whose end found no disassembler (or a launcher that was
 * killed). `flare trace` does this itself when the command ends. It must
 * never run on a session a process still writes to, nor change a row
 * other than pc_instructions, pc_cubins (dropped once disassembled) and
 * the sass_text capability.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/session.h"
#include "disasm/disasm_session.h"
#include "flare/flare.h"
#include "store/store.h"
#include "store/store_pc_code.h"

static const char disasm_help[] =
    "usage: flare disasm [DIR]\n"
    "\n"
    "Gives the PC samples and SASS metrics of instructions without a source line\n"
    "(kernels built without nvcc -lineinfo) their SASS text, shown by flare report\n"
    "beside function+offset. The session keeps the cubins of such kernels until\n"
    "they are disassembled; flare trace does it when the command ends, if it finds\n"
    "a disassembler. This is for a session whose end found none.\n"
    "\n"
    "The disassembler is $FLARE_DISASSEMBLER (a path; cuobjdump is run with -sass,\n"
    "anything else with the cubin's path alone), else cuobjdump, then nvdisasm, on\n"
    "PATH, in $CUDA_HOME/bin or in /usr/local/cuda/bin (the CUDA toolkit has both).\n"
    "\n"
    "DIR is chosen as for flare report (default: the newest session under\n"
    "./flare-out, or $FLARE_OUTPUT_DIR). It needs write permission on DIR, and\n"
    "every process of the session must have ended.\n"
    "\n"
    "Exit status: 0 on success (or nothing to do), 1 if the session cannot be\n"
    "opened, no disassembler is found or a cubin fails, 2 for a usage error.\n";

/* A process of the session that recorded no end and still runs here (a
 * killed one recorded no end either, and is gone). */
static int still_running(int64_t pid, void *user)
{
    if (pid <= 0 || (kill((pid_t)pid, 0) != 0 && errno != EPERM))
        return 0;
    *(int64_t *)user = pid;
    return 1;
}

int cli_disasm(int argc, char **argv)
{
    const char *directory = NULL;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            fputs(disasm_help, stdout);
            return CLI_EXIT_OK;
        }
        if (argv[i][0] == '-' && argv[i][1] != '\0')
            return cli_usage_error("disasm", "unknown option '%s'", argv[i]);
        if (directory != NULL)
            return cli_usage_error("disasm", "unexpected argument '%s' (one DIR at most)", argv[i]);
        directory = argv[i];
    }
    char dir[4096], error[4096];
    if (cli_find_session(directory, dir, sizeof(dir), error, sizeof(error)) != 0)
        return cli_failure("disasm", "%s", error);
    store *database;
    if (store_open_upgrading(dir, &database, error, sizeof(error)) != FLARE_OK)
        return cli_failure("disasm", "%s", error);
    int64_t running = 0;
    store_read_unended_pids(database, still_running, &running);
    if (running != 0) {
        store_close(database);
        return cli_failure("disasm",
                           "process %lld of %s is still running: flare disasm runs once every "
                           "process of the session has ended",
                           (long long)running, dir);
    }
    disasm_session_result result;
    int status = disasm_session(database, dir, &result);
    store_close(database);
    if (status != FLARE_OK && result.cubins_done == 0 && result.wanted == 0)
        return cli_failure("disasm", "%s", result.problem);
    if (result.cubins == 0) {
        printf("%s: no cubin left to disassemble\n", dir);
        return CLI_EXIT_OK;
    }
    if (status != FLARE_OK)
        return cli_failure("disasm", "%s (%llu of %llu cubins done)", result.problem,
                           (unsigned long long)result.cubins_done,
                           (unsigned long long)result.cubins);
    printf("%s: %llu of %llu instructions given their SASS text by %s (%llu cubins, %.1f s)\n", dir,
           (unsigned long long)result.given, (unsigned long long)result.wanted, result.program,
           (unsigned long long)result.cubins_done, (double)result.took_ns / 1e9);
    return CLI_EXIT_OK;
}
