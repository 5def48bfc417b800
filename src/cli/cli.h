/*
 * cli.h: the flare command's subcommands and the helpers they share.
 *
 * Exit codes, everywhere: 0 success; 1 the work failed (unreadable session,
 * I/O error); 2 a usage error, with a message naming the offending word;
 * `flare trace` returns the traced command's own status instead.
 */
#ifndef FLARE_CLI_CLI_H
#define FLARE_CLI_CLI_H

#define CLI_EXIT_OK      0
#define CLI_EXIT_FAILURE 1
#define CLI_EXIT_USAGE   2

int cli_trace(int argc, char **argv);
int cli_report(int argc, char **argv);
int cli_info(int argc, char **argv);
/* `flare export`: a session as Perfetto trace JSON, or its kernels as CSV or JSON. */
int cli_export(int argc, char **argv);

/* Prints "flare COMMAND: MESSAGE" and a hint to stderr; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *command, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* Prints "flare COMMAND: MESSAGE" to stderr; returns CLI_EXIT_FAILURE. */
int cli_failure(const char *command, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* Whether argument is -h or --help. */
int cli_is_help(const char *argument);

/* Resolves a report/export argument (NULL: the default output directory) to
 * one session directory holding session.db: the directory itself, or the
 * newest session inside it. Returns 0, or 1 with a message in error. */
int cli_find_session(const char *argument, char *session_dir, unsigned long size, char *error,
                     unsigned long error_size);

#endif /* FLARE_CLI_CLI_H */
