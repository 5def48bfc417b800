/*
 * merge.c: `flare merge [-o OUT] [--align auto|wall|collectives] DIR...`:
 * several sessions (one per rank or host) made one, on one timeline, that
 * `flare report`, `flare export` and the HTML report read as one run
 * (store_merge.h does the work; docs/fleet.md tells the user).
 *
 * Checks every input and the output before writing anything; a directory
 * holding no session.db but session directories (runs/ of `-o runs/%r`)
 * stands for them. Must never write to an input, and never leave a
 * half-written output: on failure the output's files are removed.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/config.h"
#include "flare/flare.h"
#include "store/store.h"
#include "store/store_files.h"
#include "store/store_merge.h"
#include "store/store_views.h"

static const char merge_help[] =
    "usage: flare merge [-o OUT] [--align auto|wall|collectives] [-q] DIR...\n"
    "\n"
    "Merges sessions (one per rank or host, e.g. from flare trace -o 'runs/%r')\n"
    "into one session in OUT, on one timeline, for flare report, flare export\n"
    "and flare report --html. A DIR without a session.db stands for the session\n"
    "directories in it. Inputs are only read.\n"
    "\n"
    "Options:\n"
    "  -o, --output OUT  the merged session's directory (must not hold a session);\n"
    "                    default ./flare-out/<UTC time>-<pid>/\n"
    "  --align MODE      how times of different hosts are lined up:\n"
    "                    wall         each process's clock against wall-clock\n"
    "                                 time, as recorded at its start (as good as\n"
    "                                 the hosts' clocks agree)\n"
    "                    collectives  then refined from NCCL kernels (the k-th\n"
    "                                 collective ends at the same moment on every\n"
    "                                 rank); needs 3 or more in every input\n"
    "                    auto         collectives when every input has them,\n"
    "                                 else wall (default)\n"
    "  -q, --quiet       print nothing but errors\n"
    "  -h, --help        this help\n"
    "\n"
    "Exit status: 0 merged; 2 usage error; 1 an input or the output could not be\n"
    "used (nothing is left in OUT then).\n";

#define INPUTS_MAX STORE_MERGE_INPUTS_MAX

typedef struct merge_options {
    const char *output;
    store_merge_align align;
    int quiet;
    char *inputs[INPUTS_MAX];
    size_t input_count;
} merge_options;

static int is_session(const char *dir)
{
    char path[PATH_MAX + 16];
    struct stat info;
    snprintf(path, sizeof(path), "%s/session.db", dir);
    return stat(path, &info) == 0 && S_ISREG(info.st_mode);
}

static int compare_text(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Adds dir (its real path), or the session directories in it. */
static int add_input(merge_options *options, const char *dir)
{
    char real[PATH_MAX];
    if (realpath(dir, real) == NULL)
        return cli_usage_error("merge", "'%s': %s", dir, strerror(errno));
    size_t first = options->input_count;
    if (is_session(real)) {
        if (options->input_count == INPUTS_MAX)
            return cli_usage_error("merge", "at most %d sessions", INPUTS_MAX);
        options->inputs[options->input_count++] = strdup(real);
    } else {
        DIR *listing = opendir(real);
        if (listing == NULL)
            return cli_usage_error("merge", "'%s' holds no session (no session.db)", dir);
        for (struct dirent *entry; (entry = readdir(listing)) != NULL;) {
            char child[PATH_MAX];
            if (entry->d_name[0] == '.' ||
                snprintf(child, sizeof(child), "%s/%s", real, entry->d_name) >= (int)sizeof(child))
                continue;
            if (is_session(child) && options->input_count < INPUTS_MAX)
                options->inputs[options->input_count++] = strdup(child);
        }
        closedir(listing);
        if (options->input_count == first)
            return cli_usage_error("merge",
                                   "'%s' holds no session (no session.db in it or in the "
                                   "directories in it)",
                                   dir);
        qsort(options->inputs + first, options->input_count - first, sizeof(char *), compare_text);
    }
    for (size_t i = first; i < options->input_count; i++)
        if (options->inputs[i] == NULL)
            return cli_failure("merge", "out of memory");
    return CLI_EXIT_OK;
}

static int parse_align(const char *text, store_merge_align *align)
{
    if (strcmp(text, "auto") == 0)
        *align = STORE_MERGE_ALIGN_AUTO;
    else if (strcmp(text, "wall") == 0)
        *align = STORE_MERGE_ALIGN_WALL;
    else if (strcmp(text, "collectives") == 0)
        *align = STORE_MERGE_ALIGN_COLLECTIVES;
    else
        return cli_usage_error("merge", "'--align %s': expected auto, wall or collectives", text);
    return CLI_EXIT_OK;
}

static int parse(int argc, char **argv, merge_options *options)
{
    for (int index = 1; index < argc; index++) {
        const char *argument = argv[index];
        int status = CLI_EXIT_OK;
        if (cli_is_help(argument)) {
            fputs(merge_help, stdout);
            return -1;
        } else if (strcmp(argument, "-o") == 0 || strcmp(argument, "--output") == 0 ||
                   strcmp(argument, "--align") == 0) {
            if (index + 1 >= argc || argv[index + 1][0] == '\0')
                return cli_usage_error("merge", "option '%s' needs a value", argument);
            const char *value = argv[++index];
            if (argument[1] == '-' && argument[2] == 'a')
                status = parse_align(value, &options->align);
            else
                options->output = value;
        } else if (strcmp(argument, "-q") == 0 || strcmp(argument, "--quiet") == 0) {
            options->quiet = 1;
        } else if (argument[0] == '-') {
            return cli_usage_error("merge", "unknown option '%s'", argument);
        } else {
            status = add_input(options, argument);
        }
        if (status != CLI_EXIT_OK)
            return status;
    }
    if (options->input_count == 0)
        return cli_usage_error("merge", "no session to merge (flare merge DIR...)");
    for (size_t i = 0; i < options->input_count; i++)
        for (size_t j = i + 1; j < options->input_count; j++)
            if (strcmp(options->inputs[i], options->inputs[j]) == 0)
                return cli_usage_error("merge", "'%s' is given twice", options->inputs[i]);
    return CLI_EXIT_OK;
}

/* Makes the output directory and claims it; its path in out_dir. */
static int prepare_output(const merge_options *options, char *out_dir, size_t size)
{
    char error[1024];
    if (options->output != NULL) {
        if (core_make_directories(options->output, error, sizeof(error)) != FLARE_OK)
            return cli_failure("merge", "%s", error);
        if (realpath(options->output, out_dir) == NULL)
            return cli_failure("merge", "%s: %s", options->output, strerror(errno));
    } else {
        const char *base = getenv("FLARE_OUTPUT_DIR");
        if (core_make_session_directory(base != NULL && base[0] ? base : CORE_DEFAULT_OUTPUT_BASE,
                                        out_dir, size, error, sizeof(error)) != FLARE_OK)
            return cli_failure("merge", "%s", error);
    }
    for (size_t i = 0; i < options->input_count; i++)
        if (strcmp(options->inputs[i], out_dir) == 0)
            return cli_usage_error("merge", "the output '%s' is one of the inputs", out_dir);
    if (store_claim_directory(out_dir, error, sizeof(error)) != FLARE_OK)
        return cli_failure("merge", "%s", error);
    return CLI_EXIT_OK;
}

static void remove_output(const char *out_dir)
{
    static const char *const files[] = {"session.db", "session.db-wal", "session.db-shm",
                                        "session.db-journal"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof(path), "%s/%s", out_dir, files[i]);
        unlink(path);
    }
}

static void print_result(const merge_options *options, const char *out_dir,
                         const store_merge_result *result)
{
    printf("flare: merged %zu session(s) into %s, aligned on %s\n", result->input_count, out_dir,
           result->used == STORE_MERGE_ALIGN_COLLECTIVES ? "collectives (NCCL kernels)"
                                                         : "wall-clock time");
    for (size_t i = 0; i < result->input_count; i++) {
        const store_merge_input_result *input = &result->inputs[i];
        printf("  %s: %lld process(es), %lld rows, shifted %+.3f ms", options->inputs[i],
               (long long)input->processes, (long long)input->rows,
               (double)(input->wall_shift_ns + input->collective_shift_ns) / 1e6);
        if (input->collectives > 0)
            printf(" (%+.3f ms from %zu collectives, residual %.1f us)",
                   (double)input->collective_shift_ns / 1e6, input->collectives,
                   (double)input->residual_ns / 1e3);
        if (input->drift_ns > 0)
            printf(", clock drift %.3f ms", (double)input->drift_ns / 1e6);
        if (input->pids_moved > 0)
            printf(", %lld pid(s) renumbered (another session had them)",
                   (long long)input->pids_moved);
        if (!input->ended)
            printf(", never ended (a crashed or killed run: merged as far as it got)");
        if (input->schema_version < STORE_SCHEMA_VERSION)
            printf(", schema %d (an older flare: its missing tables merged as empty)",
                   input->schema_version);
        printf("\n");
    }
}

int cli_merge(int argc, char **argv)
{
    merge_options options = {.align = STORE_MERGE_ALIGN_AUTO};
    int status = parse(argc, argv, &options);
    char out_dir[PATH_MAX] = "";
    if (status == CLI_EXIT_OK)
        status = prepare_output(&options, out_dir, sizeof(out_dir));
    store *out = NULL;
    char error[2048];
    if (status == CLI_EXIT_OK &&
        store_open(out_dir, STORE_OPEN_WRITE, &out, error, sizeof(error)) != FLARE_OK)
        status = cli_failure("merge", "%s", error);
    static store_merge_result result;
    if (status == CLI_EXIT_OK) {
        char command[512];
        snprintf(command, sizeof(command), "flare merge of %zu sessions", options.input_count);
        if (store_merge(out, (const char *const *)options.inputs, options.input_count,
                        options.align, command, &result, error, sizeof(error)) != FLARE_OK)
            status = cli_failure("merge", "%s", error);
    }
    store_index_result indexed;
    if (status == CLI_EXIT_OK && store_build_indexes(out, &indexed) != FLARE_OK)
        status = cli_failure("merge", "cannot build the indexes: %s", store_last_error(out));
    if (out != NULL)
        store_close(out);
    if (status != CLI_EXIT_OK && out != NULL)
        remove_output(out_dir);
    if (status == CLI_EXIT_OK && !options.quiet)
        print_result(&options, out_dir, &result);
    for (size_t i = 0; i < options.input_count; i++)
        free(options.inputs[i]);
    return status < 0 ? CLI_EXIT_OK : status;
}
