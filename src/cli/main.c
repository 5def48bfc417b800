/*
 * main.c: the flare command: dispatches to a subcommand, prints help.
 *
 * Help text here must tell the truth about what each subcommand does; each
 * subcommand prints its own detailed help for `flare CMD --help`. It must
 * never do a subcommand's work itself: it only picks the subcommand and
 * returns its exit code.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "flare/flare.h"

static const char usage_text[] =
    "usage: flare [--version] [--help] COMMAND [ARGS...]\n"
    "\n"
    "flare is a GPU profiler for CUDA applications.\n"
    "\n"
    "Commands:\n"
    "  trace    run a command under the profiler and save a session\n"
    "  replay   run a command as trace does, replaying chosen kernel launches to\n"
    "           collect their hardware metrics (flare replay --list-sets)\n"
    "  report   summarise a saved session (the newest one by default)\n"
    "  diff     compare two sessions kernel by kernel, with a test for noise\n"
    "  export   write a session as a Perfetto trace, or its kernels as CSV or JSON\n"
    "  index    build a session's indexes for its SQL views (flare trace does it)\n"
    "  disasm   give sampled instructions without a source line their SASS text\n"
    "           (flare trace does it when it finds cuobjdump or nvdisasm)\n"
    "  merge    merge sessions of several ranks or hosts into one, on one timeline\n"
    "  info     show the GPUs, driver and CUPTI this machine offers flare\n"
    "  rules    check deep-profiling rules: flare rules check RULE...\n"
    "  window   open a deep-profiling window in every process of a running\n"
    "           session, now or at a given time: flare window open DIR --for D\n"
    "\n"
    "Run 'flare COMMAND --help' for a command's options.\n"
    "Sessions are saved under ./flare-out/ (or $FLARE_OUTPUT_DIR) unless -o is given.\n"
    "Documentation: README.md and docs/ in the flare source tree.\n";

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_text, stderr);
        return CLI_EXIT_USAGE;
    }
    const char *command = argv[1];
    if (cli_is_help(command)) {
        fputs(usage_text, stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(command, "--version") == 0) {
        printf("flare %s\n", flare_version());
        return CLI_EXIT_OK;
    }
    if (strcmp(command, "trace") == 0)
        return cli_trace(argc - 1, argv + 1);
    /* These print a session's names, which the traced program chose. */
    if (strcmp(command, "replay") == 0 || strcmp(command, "report") == 0) {
        cli_untrusted_stdout_begin();
        int status = strcmp(command, "replay") == 0 ? cli_replay(argc - 1, argv + 1)
                                                    : cli_report(argc - 1, argv + 1);
        cli_untrusted_stdout_end();
        return status;
    }
    if (strcmp(command, "diff") == 0) {
        cli_untrusted_stdout_begin();
        int status = cli_diff(argc - 1, argv + 1);
        cli_untrusted_stdout_end();
        return status;
    }
    if (strcmp(command, "export") == 0)
        return cli_export(argc - 1, argv + 1);
    if (strcmp(command, "info") == 0)
        return cli_info(argc - 1, argv + 1);
    if (strcmp(command, "index") == 0)
        return cli_index(argc - 1, argv + 1);
    if (strcmp(command, "disasm") == 0)
        return cli_disasm(argc - 1, argv + 1);
    if (strcmp(command, "merge") == 0)
        return cli_merge(argc - 1, argv + 1);
    if (strcmp(command, "rules") == 0)
        return cli_rules(argc - 1, argv + 1);
    if (strcmp(command, "window") == 0)
        return cli_window(argc - 1, argv + 1);
    if (command[0] == '-')
        return cli_usage_error(NULL, "unknown option '%s'", command);
    return cli_usage_error(NULL,
                           "unknown command '%s' (commands: trace, replay, report, diff, export, "
                           "index, disasm, merge, info, "
                           "rules, window)",
                           command);
}
