/*
 * cli.h: the flare command's subcommands and the helpers they share.
 *
 * Exit codes, everywhere: 0 success; 1 the work failed (unreadable session,
 * I/O error); 2 a usage error, with a message naming the offending word;
 * `flare trace` returns the traced command's own status instead. A
 * subcommand must never exit or abort on its own: it returns its code to
 * main, and prints its messages as "flare COMMAND: ..." on stderr.
 */
#ifndef FLARE_CLI_CLI_H
#define FLARE_CLI_CLI_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define CLI_EXIT_OK      0
#define CLI_EXIT_FAILURE 1
#define CLI_EXIT_USAGE   2

int cli_trace(int argc, char **argv);
int cli_report(int argc, char **argv);
int cli_info(int argc, char **argv);
int cli_index(int argc, char **argv);
int cli_disasm(int argc, char **argv);
/* `flare merge`: several sessions made one (merge.c). */
int cli_merge(int argc, char **argv);
/* `flare export`: a session as Perfetto trace JSON, or its kernels as CSV or JSON. */
int cli_export(int argc, char **argv);
/* `flare rules check RULE...`: each rule's canonical form, or why it is refused. */
int cli_rules(int argc, char **argv);
/* `flare replay [SELECTION] -- CMD`: CMD run as by trace, chosen launches replayed. */
int cli_replay(int argc, char **argv);
/* `flare diff BASE NEW`: two sessions compared kernel by kernel (diff.c). */
int cli_diff(int argc, char **argv);
/* `flare window open DIR --for DURATION [--at TIME]`: a deep-profiling window
 * in every running process of a session, asked for from outside (window.c). */
int cli_window(int argc, char **argv);

/*
 * Running a command under the profiler (launch.c), shared by trace and
 * replay. The caller fills the options, sets any FLARE_* variables of its
 * own in this process's environment (the command inherits them), then calls
 * prepare and, if that succeeded, run.
 */
typedef struct cli_launch {
    /* Options. */
    const char *command_name; /* "trace", "replay": names the command in messages */
    const char *activity;     /* "tracing": the first line says "flare: tracing 'CMD'..." */
    const char *output;       /* -o DIR, or NULL for a fresh directory under $FLARE_OUTPUT_DIR */
    uint32_t flush_ms;        /* --flush-ms; 0 leaves FLARE_FLUSH_MS alone */
    int quiet;
    /* Filled by prepare. */
    char command_line[1024];
    char session_dir[PATH_MAX];
    char injection_library[PATH_MAX];
    int claimed;           /* this launcher made session.db and flare.log */
    int created_directory; /* and the session directory itself */
    int reserved;          /* holds its disk reserve (store_files.h) */
    /* Filled by run: processes that started a session. */
    long long process_count;
} cli_launch;

/* Checks the FLARE_* start-time variables and that the command can be run,
 * claims the session directory and creates the database, and says where
 * the session goes. CLI_EXIT_OK, or the exit code to return (printed;
 * nothing ran and nothing is left behind): CLI_EXIT_USAGE for a bad
 * variable, 127/126 for a command that cannot run, CLI_EXIT_FAILURE. */
int cli_launch_prepare(cli_launch *launch, char **command, int command_count);
/* Runs command (NULL-terminated) with the session and libflare's injection
 * in its environment, forwarding SIGINT/SIGTERM/SIGHUP/SIGQUIT; records the
 * exit status; warns when no process started a session or a requested
 * feature was degraded. Returns the command's status (128+N for signal N,
 * 127 not found, 126 not runnable). */
int cli_launch_run(cli_launch *launch, char **command);

/* `flare trace --deep-when RULE`: adds RULE (NULL when the option has no
 * value) to the rules for the command; a missing or blank value is a usage
 * error, printed. Returns CLI_EXIT_OK, CLI_EXIT_USAGE or CLI_EXIT_FAILURE. */
int cli_deep_when_add(const char *rule);
/* Checks the --deep-when rules before the command starts: the first refused
 * one (or more than RULES_LIST_MAX rules) is a usage error, printed, with
 * the rule and the way out (CLI_EXIT_USAGE; nothing is set). Otherwise
 * prints each accepted rule unless quiet, sets FLARE_DEEP_WHEN for the
 * command and returns CLI_EXIT_OK. Does nothing when no --deep-when was
 * given (a FLARE_DEEP_WHEN the user set is passed on as it is: its refused
 * rules are installed as refused and reported). */
int cli_deep_when_export(int quiet);
/* Whether an accepted --deep-when rule reads kernel_launch_rate, which
 * needs the launch callbacks (not in --mode light). */
int cli_deep_when_needs_launch_counts(void);

/* Forgets and frees the --deep-when rules added so far, for a process that
 * parses more than one command line (the fuzz targets in fuzz/). */
void cli_deep_when_reset(void);

/* Prints "flare COMMAND: MESSAGE" and a hint to stderr; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *command, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* Prints "flare COMMAND: MESSAGE" to stderr; returns CLI_EXIT_FAILURE. */
int cli_failure(const char *command, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* Whether argument is -h or --help. */
int cli_is_help(const char *argument);

/* Human-readable sizes and durations for reports and summaries: "12.3 MiB",
 * "4.2 ms" (three significant digits or whole units below 10,240). */
/* text from a session database with every control character made '?'
 * (untrusted.c), truncated to the buffer like snprintf. */
void cli_format_untrusted(char *buffer, size_t size, const char *text);
/* Sends stdout through the same filter (newline and tab kept) until
 * cli_untrusted_stdout_end, which flushes and returns fclose's status:
 * for commands that print a session's names to a terminal. */
void cli_untrusted_stdout_begin(void);
int cli_untrusted_stdout_end(void);
void cli_format_bytes(uint64_t bytes, char *buffer, size_t size);
void cli_format_duration(uint64_t ns, char *buffer, size_t size);

/* The name of a copy's kind (a backend_copy_kind): "host to device",
 * "device to host", "device to device", "host to host"; unknown for any
 * other value, as each output words it ("unknown" in exports, "copy
 * (unknown kind)" in the report). Never NULL unless unknown is. */
const char *cli_copy_kind_name(int kind, const char *unknown);

#endif /* FLARE_CLI_CLI_H */
