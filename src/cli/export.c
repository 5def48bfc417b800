/*
 * export.c: `flare export [DIR] --format perfetto|csv|json [-o FILE]
 * [--gzip]`, a session in formats other tools read: the options, the
 * session, the output (gzip for a FILE ending in .gz, or with --gzip), and
 * the format called from the table of formats. Each format is a file of
 * its own (export.h); the writer they share is output.c.
 *
 * It must never change the session (the store is opened read-only), never
 * create an output before the session has been found and opened (a
 * missing session leaves no file), and never leave a half-written FILE
 * (cli_output writes a fresh FILE.tmp-XXXXXX and renames it only when the
 * format succeeded). A session without an end (still being written, or
 * cut short) is exported as it stands, with one line on stderr saying so.
 * Exit codes as everywhere (cli.h): 0, 1 failure, 2 usage.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/export.h"
#include "store/store.h"
#include "store/store_export.h"

static const char export_help[] =
    "usage: flare export [DIR] --format perfetto|csv|json [-o FILE] [--gzip]\n"
    "\n"
    "Writes a saved session in a format other tools read.\n"
    "\n"
    "Formats:\n"
    "  perfetto   Chrome trace-event JSON for https://ui.perfetto.dev or\n"
    "             chrome://tracing: a track per device and stream for kernels,\n"
    "             copies and memsets; a track per thread for scopes, NVTX ranges\n"
    "             and the launch, copy and memset calls, with an arrow from each\n"
    "             call to its GPU work; counter tracks for the GPU metrics, the\n"
    "             application's counters and the PM samples of deep windows; and\n"
    "             flare's own tracks: deep windows, rule firings, launch storms,\n"
    "             kernel and range replay (a replayed kernel's metrics are in its\n"
    "             slice's args). Times are microseconds from the session's start.\n"
    "  csv        the kernel table, one row per kernel, with a header row\n"
    "             (RFC 4180: names with commas, quotes or newlines are quoted)\n"
    "  json       {\"session\": {...}, \"kernels\": [...]}, the same kernel fields\n"
    "\n"
    "DIR is a session directory, or a directory of sessions, in which case the\n"
    "newest is exported. Default: ./flare-out ($FLARE_OUTPUT_DIR if set).\n"
    "A session that has not ended (still being written, or cut short by a crash)\n"
    "is exported as it stands, and a line on stderr says so.\n"
    "Names are written as UTF-8; bytes that are not valid UTF-8 become '?'.\n"
    "\n"
    "Options:\n"
    "  -f, --format FORMAT   perfetto, csv or json (required)\n"
    "  -o, --output FILE     write to FILE ('-': standard output, the default);\n"
    "                        FILE appears only once the export is complete (it is\n"
    "                        written as FILE.tmp-XXXXXX, then renamed; an interrupted\n"
    "                        export removes it); its directory must exist. A FILE\n"
    "                        ending in .gz is written gzip-compressed\n"
    "  -z, --gzip            gzip the output whatever its name (standard output too)\n"
    "  -h, --help            this help\n"
    "\n"
    "Exit status: 0 on success (also when the reader of a pipe stops early, as\n"
    "head does, and for a session that has not ended), 1 if the session cannot be\n"
    "read or the output cannot be written (no FILE is left), 2 for a usage error.\n";

/* The formats, in the order usage messages list them. */
static const cli_export_format *const export_formats[] = {
    &cli_export_perfetto,
    &cli_export_csv,
    &cli_export_json,
};
#define EXPORT_FORMAT_COUNT (sizeof export_formats / sizeof export_formats[0])

/* ---- shared by the formats ---- */

void cli_export_session_identity(cli_output *output, const store_session_summary *summary)
{
    cli_output_json_member_string(output, "command", summary->command);
    cli_output_json_member_string(output, "host", summary->host);
    cli_output_json_member_string(output, "flare_version", summary->flare_version);
}

int cli_export_read_failed(const cli_session *session, int status, const char *what,
                           cli_export_failure *failure)
{
    if (status == 0)
        return 0;
    snprintf(failure->message, sizeof failure->message, "reading %s: %s", what,
             store_last_error(session->database));
    return 1;
}

/* ---- the command ---- */

/* The format called name, or NULL. */
static const cli_export_format *export_find_format(const char *name)
{
    for (size_t i = 0; i < EXPORT_FORMAT_COUNT; i++)
        if (strcmp(export_formats[i]->name, name) == 0)
            return export_formats[i];
    return NULL;
}

/* "perfetto, csv, json", for usage messages. */
static void export_format_list(char *list, size_t size)
{
    size_t used = 0;
    list[0] = '\0';
    for (size_t i = 0; i < EXPORT_FORMAT_COUNT && used < size; i++) {
        int length =
            snprintf(list + used, size - used, "%s%s", i > 0 ? ", " : "", export_formats[i]->name);
        if (length < 0)
            break;
        used += (size_t)length;
    }
}

/*
 * Matches argv[*index] against a short and a long option that take a value
 * ("-o FILE", "--output FILE", "--output=FILE"). Returns 0 when it is not
 * this option, 1 with *value set, or -1 when the value is missing.
 */
static int option_value(int argc, char **argv, int *index, const char *short_name,
                        const char *long_name, const char **value)
{
    const char *argument = argv[*index];
    size_t long_length = strlen(long_name);
    if (strncmp(argument, long_name, long_length) == 0 && argument[long_length] == '=') {
        *value = argument + long_length + 1;
        return 1;
    }
    if (strcmp(argument, short_name) != 0 && strcmp(argument, long_name) != 0)
        return 0;
    if (*index + 1 >= argc)
        return -1;
    *value = argv[++*index];
    return 1;
}

/* The command line, parsed. */
typedef struct export_options {
    const char *directory;
    const cli_export_format *format;
    const char *output_path; /* NULL: standard output */
    int gzip;                /* --gzip, or an output name ending in .gz */
} export_options;

/* Whether path names a gzip file: it ends in ".gz". */
static int export_gzip_name(const char *path)
{
    size_t length = path != NULL ? strlen(path) : 0;
    return length > 3 && strcmp(path + length - 3, ".gz") == 0;
}

/*
 * Parses argv into options. Returns -1 when it is done and the export
 * should go ahead, or the exit code to return now: CLI_EXIT_OK after
 * --help, CLI_EXIT_USAGE after a usage error (printed).
 */
static int export_parse(int argc, char **argv, export_options *options)
{
    char formats[128];
    export_format_list(formats, sizeof formats);
    const char *format_name = NULL;
    *options = (export_options){0};
    for (int index = 1; index < argc; index++) {
        const char *argument = argv[index];
        if (cli_is_help(argument)) {
            fputs(export_help, stdout);
            return CLI_EXIT_OK;
        }
        if (strcmp(argument, "-z") == 0 || strcmp(argument, "--gzip") == 0) {
            options->gzip = 1;
            continue;
        }
        int found = option_value(argc, argv, &index, "-f", "--format", &format_name);
        if (found < 0)
            return cli_usage_error("export", "option '%s' needs a format (%s)", argument, formats);
        if (found > 0)
            continue;
        found = option_value(argc, argv, &index, "-o", "--output", &options->output_path);
        if (found < 0)
            return cli_usage_error("export", "option '%s' needs a file name", argument);
        if (found > 0)
            continue;
        if (argument[0] == '-' && argument[1] != '\0')
            return cli_usage_error("export", "unknown option '%s'", argument);
        if (options->directory != NULL)
            return cli_usage_error("export", "unexpected argument '%s' (one DIR at most)",
                                   argument);
        options->directory = argument;
    }
    if (format_name == NULL)
        return cli_usage_error("export", "which format? give --format (%s)", formats);
    options->format = export_find_format(format_name);
    if (options->format == NULL)
        return cli_usage_error("export", "unknown format '%s' (formats: %s)", format_name, formats);
    if (options->output_path != NULL && options->output_path[0] == '\0')
        return cli_usage_error("export", "option '--output' needs a file name");
    if (export_gzip_name(options->output_path))
        options->gzip = 1;
    return -1;
}

/* Writes the open session in the chosen format to the output. Returns the
 * exit code, with any failure printed. */
static int export_write(const export_options *options, const cli_session *session)
{
    char error[3 * PATH_MAX];
    cli_output *output;
    if (cli_output_open(options->output_path, &output, error, sizeof error) != 0)
        return cli_failure("export", "%s", error);
    if (options->gzip && cli_output_set_gzip(output, error, sizeof error) != 0) {
        char ignored[64];
        cli_output_close(output, 0, ignored, sizeof ignored);
        return cli_failure("export", "%s", error);
    }
    cli_export_failure failure = {{0}};
    int status = options->format->write(session, output, &failure);
    int to_file = cli_output_replaces_file(output);
    if (cli_output_reader_gone(output)) {
        /* `flare export | head`: the reader has what it wanted. */
        cli_output_close(output, 0, error, sizeof error);
        return CLI_EXIT_OK;
    }
    int closed = cli_output_close(output, status == 0, error, sizeof error);
    if (failure.message[0] != '\0')
        return cli_failure("export", "%s: %s (%s)", session->directory, failure.message,
                           to_file ? "no file written" : "the output is incomplete");
    if (closed != 0)
        return cli_failure("export", "%s", error);
    return status == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}

/* A process of the session still running: its first pid whose processes
 * row has no end and that is alive on this host, or 0. */
typedef struct export_live_search {
    int64_t live_pid;
} export_live_search;

static int export_live_process(const store_export_process_row *row, void *user)
{
    export_live_search *search = user;
    if (row->end_ns != 0 || row->pid <= 0 || row->pid > INT32_MAX)
        return 0;
    /* EPERM: it exists, under another user. */
    if (kill((pid_t)row->pid, 0) == 0 || errno == EPERM) {
        search->live_pid = row->pid;
        return 1;
    }
    return 0;
}

/*
 * One line on stderr for a session without an end: still being written
 * (one of its processes runs on this host), or cut short. Either way the
 * export goes ahead with what was committed when its snapshot began; what
 * the session ended inside is marked (scopes, storms and windows
 * still_open; otherData.end_ns null).
 */
static void export_note_unfinished(const cli_session *session, const cli_export_format *format)
{
    if (session->summary.end_ns != 0)
        return;
    char host[256] = "";
    export_live_search search = {0};
    if (gethostname(host, sizeof host - 1) == 0 && strcmp(host, session->summary.host) == 0)
        store_export_processes(session->database, export_live_process, &search);
    if (search.live_pid != 0)
        fprintf(stderr,
                "flare export: note: %s is still being written (process %lld runs): exporting "
                "what it had committed when the export began\n",
                session->directory, (long long)search.live_pid);
    else
        fprintf(stderr,
                "flare export: note: %s never ended (killed or crashed): exporting what it "
                "committed%s\n",
                session->directory,
                format == &cli_export_perfetto ? "; what was open at its end is marked still_open"
                                               : "");
}

int cli_export(int argc, char **argv)
{
    export_options options;
    int parsed = export_parse(argc, argv, &options);
    if (parsed >= 0)
        return parsed;
    /* A closed pipe is a failed write (EPIPE), handled, not a death. */
    signal(SIGPIPE, SIG_IGN);

    /* The session first: a missing session must not leave an output file.
     * One snapshot for the whole export, so that a session still being
     * written exports consistently: the counts match the rows. */
    char error[3 * PATH_MAX];
    cli_session session;
    if (cli_session_open(&session, "export", options.directory, 1, error, sizeof error) !=
        CLI_EXIT_OK)
        return CLI_EXIT_FAILURE;
    export_note_unfinished(&session, options.format);
    int status = export_write(&options, &session);
    cli_session_close(&session);
    return status;
}
