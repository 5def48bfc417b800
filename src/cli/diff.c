/*
 * diff.c: `flare diff BASE NEW`, two sessions compared kernel by kernel and
 * scope by scope: launches, total and mean time on each side, the change,
 * and whether it is beyond run-to-run noise (diff_stats.h says how that is
 * decided), with --fail-if-slower to gate a CI pipeline on it.
 *
 * This file parses the command line, finds and opens both sessions (read
 * only, each in one read snapshot), refuses what cannot be compared (the
 * same session twice, a session that has not ended), collects the tables
 * (diff_collect.h), applies the gate and picks the exit code; diff_print.c
 * prints. It must never write to a session, never exit on its own (it
 * returns its code to main), and never let a bad session crash it: every
 * problem is a message naming the directory and exit 1 or 2.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/diff.h"
#include "core/config.h"
#include "store/store_export.h"

static const char diff_help[] =
    "usage: flare diff [OPTIONS] BASE NEW\n"
    "\n"
    "Compares two sessions: for each kernel name and each scope name, the launches,\n"
    "total and mean time in BASE and in NEW, the change of the mean, and whether it\n"
    "is beyond run-to-run noise (a Mann-Whitney U test on the launches' durations,\n"
    "with its p-value); names found in one session only are listed as such, and the\n"
    "total GPU time is compared too. Sessions from different hosts or devices are\n"
    "compared all the same, and the header says so.\n"
    "\n"
    "BASE and NEW are session directories, or directories of sessions (the newest\n"
    "in each is compared, as by 'flare report'). They must be two sessions; one\n"
    "that has not ended (still being written, or killed) is refused unless\n"
    "--allow-unfinished is given.\n"
    "\n"
    "Verdicts: 'slower' when the test gives p < ALPHA and the mean grew by at least\n"
    "the minimum change, the launches' ranks agreeing; 'faster' the same way down;\n"
    "'mixed' when the mean and the ranks moved opposite ways (a few outliers against\n"
    "the bulk); 'same' otherwise; 'only in BASE', 'only in NEW'.\n"
    "\n"
    "Options:\n"
    "  -f, --format FORMAT       text (default) or json\n"
    "      --top N               rows per table, 1..100000 (default: 10 in text, all in json)\n"
    "      --alpha A             the test's significance level, 0.000001..0.5 (default 0.01)\n"
    "      --min-change PCT      the smallest change of a mean that counts, 0..1000 (default 2)\n"
    "      --fail-if-slower PCT  exit 3 when a kernel, or the total GPU time, is slower by\n"
    "                            more than PCT percent beyond noise (0..100000)\n"
    "      --allow-unfinished    compare a session that has not ended, as it is now\n"
    "  -h, --help                this help\n"
    "\n"
    "Exit status: 0 compared (whatever changed); 1 a session could not be read;\n"
    "2 usage error (also BASE and NEW being one session); 3 --fail-if-slower\n"
    "found a slowdown (the output says which).\n";

/* ---- options ---- */

/* Parses text as a plain decimal (digits, optionally a point and more
 * digits; a trailing '%' when percent is set) within [minimum, maximum].
 * 0, or -1 for anything else (exponents, signs, inf, nan, hex). */
static int parse_decimal(const char *text, int percent, double minimum, double maximum, double *out)
{
    char digits[64];
    size_t length = strlen(text);
    if (percent && length > 0 && text[length - 1] == '%')
        length--;
    if (length == 0 || length >= sizeof digits)
        return -1;
    int points = 0, seen_digit = 0;
    for (size_t i = 0; i < length; i++) {
        if (text[i] == '.') {
            if (++points > 1 || i == 0 || i + 1 == length)
                return -1;
        } else if (text[i] >= '0' && text[i] <= '9') {
            seen_digit = 1;
        } else {
            return -1;
        }
    }
    memcpy(digits, text, length);
    digits[length] = '\0';
    errno = 0;
    double value = strtod(digits, NULL);
    if (!seen_digit || errno != 0 || !(value >= minimum && value <= maximum))
        return -1;
    *out = value;
    return 0;
}

enum {
    OPTION_TOP = 256,
    OPTION_ALPHA,
    OPTION_MIN_CHANGE,
    OPTION_FAIL_IF_SLOWER,
    OPTION_ALLOW_UNFINISHED,
};

static const struct option diff_long_options[] = {
    {"format", required_argument, NULL, 'f'},
    {"top", required_argument, NULL, OPTION_TOP},
    {"alpha", required_argument, NULL, OPTION_ALPHA},
    {"min-change", required_argument, NULL, OPTION_MIN_CHANGE},
    {"fail-if-slower", required_argument, NULL, OPTION_FAIL_IF_SLOWER},
    {"allow-unfinished", no_argument, NULL, OPTION_ALLOW_UNFINISHED},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* One option's value into options; CLI_EXIT_USAGE (printed) when bad. */
static int diff_option(int option, const char *value, diff_options *options)
{
    double number;
    switch (option) {
    case 'f':
        if (strcmp(value, "text") != 0 && strcmp(value, "json") != 0)
            return cli_usage_error("diff", "unknown format '%s' (formats: text, json)", value);
        options->json = strcmp(value, "json") == 0;
        return CLI_EXIT_OK;
    case OPTION_TOP:
        if (core_parse_u32(value, 1, 100000, &options->top) != 0)
            return cli_usage_error("diff", "'--top %s': expected a whole number in 1..100000",
                                   value);
        return CLI_EXIT_OK;
    case OPTION_ALPHA:
        if (parse_decimal(value, 0, 0.000001, 0.5, &options->rule.alpha) != 0)
            return cli_usage_error("diff",
                                   "'--alpha %s': expected a decimal in 0.000001..0.5, "
                                   "e.g. 0.01",
                                   value);
        return CLI_EXIT_OK;
    case OPTION_MIN_CHANGE:
        if (parse_decimal(value, 1, 0, 1000, &options->rule.min_change_pct) != 0)
            return cli_usage_error("diff",
                                   "'--min-change %s': expected a percentage in 0..1000, "
                                   "e.g. 2 or 2.5",
                                   value);
        return CLI_EXIT_OK;
    case OPTION_FAIL_IF_SLOWER:
        if (parse_decimal(value, 1, 0, 100000, &number) != 0)
            return cli_usage_error("diff",
                                   "'--fail-if-slower %s': expected a percentage in "
                                   "0..100000, e.g. 10",
                                   value);
        options->gate = 1;
        options->fail_pct = number;
        return CLI_EXIT_OK;
    case OPTION_ALLOW_UNFINISHED:
        options->allow_unfinished = 1;
        return CLI_EXIT_OK;
    default:
        return cli_usage_error("diff", "unexpected option");
    }
}

/*
 * Parses argv into options. Returns -1 when the diff should go ahead, or
 * the exit code to return now: CLI_EXIT_OK after --help, CLI_EXIT_USAGE
 * after a usage error (printed, naming the word).
 */
static int diff_parse(int argc, char **argv, diff_options *options)
{
    *options = (diff_options){
        .rule = {.alpha = DIFF_DEFAULT_ALPHA, .min_change_pct = DIFF_DEFAULT_MIN_CHANGE_PCT},
    };
    /* 0: a full reset of getopt's state (glibc and musl), in case a
     * process parses more than one command line. ':' first: a missing
     * value is reported as ':', and getopt prints nothing itself. */
    optind = 0;
    opterr = 0;
    int option;
    while ((option = getopt_long(argc, argv, ":f:h", diff_long_options, NULL)) != -1) {
        const char *word = argv[optind - 1];
        if (option == 'h') {
            fputs(diff_help, stdout);
            return CLI_EXIT_OK;
        }
        if (option == '?') {
            if (optopt != 0 && strncmp(word, "--", 2) != 0)
                return cli_usage_error("diff", "unknown option '-%c'", optopt);
            return cli_usage_error("diff", "unknown option '%s'", word);
        }
        if (option == ':')
            return cli_usage_error("diff", "option '%s' needs a value", word);
        int status = diff_option(option, optarg, options);
        if (status != CLI_EXIT_OK)
            return status;
    }
    int operands = argc - optind;
    if (operands < 2)
        return cli_usage_error("diff", "needs two sessions: flare diff BASE NEW (%s)",
                               operands == 0 ? "none given" : "only one given");
    if (operands > 2)
        return cli_usage_error("diff", "unexpected argument '%s' (two sessions: BASE NEW)",
                               argv[optind + 2]);
    options->paths[0] = argv[optind];
    options->paths[1] = argv[optind + 1];
    if (!options->json && options->top == 0)
        options->top = 10;
    return -1;
}

/* ---- the sessions ---- */

static int add_device(const store_export_device_row *row, void *user)
{
    diff_side_info *side = user;
    char name[sizeof side->device_names[0]];
    snprintf(name, sizeof name, "%s",
             row->name != NULL && row->name[0] != '\0' ? row->name : "(unnamed)");
    for (size_t i = 0; i < side->device_count; i++)
        if (strcmp(side->device_names[i], name) == 0)
            return 0;
    if (side->device_count == DIFF_DEVICE_NAMES) {
        side->more_devices = 1;
        return 0;
    }
    memcpy(side->device_names[side->device_count++], name, sizeof name);
    return 0;
}

static int compare_names(const void *left, const void *right)
{
    return strcmp(left, right);
}

/* The session's distinct device names, sorted (so that two sessions on
 * the same devices say the same), and joined by ", " into side->devices.
 * 0, or -1 when the devices cannot be read. */
static int read_devices(diff_side_info *side)
{
    if (store_export_devices(side->session.database, add_device, side) != 0)
        return -1;
    qsort(side->device_names, side->device_count, sizeof side->device_names[0], compare_names);
    size_t used = 0;
    side->devices[0] = '\0';
    for (size_t i = 0; i < side->device_count && used < sizeof side->devices; i++) {
        int length = snprintf(side->devices + used, sizeof side->devices - used, "%s%s",
                              i > 0 ? ", " : "", side->device_names[i]);
        used += length > 0 ? (size_t)length : 0;
    }
    if (side->more_devices && used < sizeof side->devices)
        snprintf(side->devices + used, sizeof side->devices - used, ", ...");
    return 0;
}

/*
 * Resolves both arguments to session directories and refuses one session
 * given twice (whatever the paths: the same session.db file). Returns -1
 * to go ahead with dirs filled, or the exit code (printed).
 */
static int diff_resolve(const diff_options *options, char dirs[2][PATH_MAX])
{
    char error[PATH_MAX + 256];
    struct stat files[2];
    for (int side = 0; side < 2; side++) {
        if (cli_find_session(options->paths[side], dirs[side], PATH_MAX, error, sizeof error) != 0)
            return cli_failure("diff", "%s: %s", side == 0 ? "BASE" : "NEW", error);
        char database[PATH_MAX + 32];
        snprintf(database, sizeof database, "%s/%s", dirs[side], STORE_DATABASE_NAME);
        if (stat(database, &files[side]) != 0)
            return cli_failure("diff", "%s: %s", database, strerror(errno));
    }
    if (files[0].st_dev == files[1].st_dev && files[0].st_ino == files[1].st_ino) {
        if (strcmp(dirs[0], dirs[1]) == 0)
            return cli_usage_error("diff",
                                   "BASE and NEW are the same session (%s): give two "
                                   "sessions to compare",
                                   dirs[0]);
        return cli_usage_error("diff",
                               "BASE and NEW are the same session (%s and %s are one "
                               "session.db): give two sessions to compare",
                               dirs[0], dirs[1]);
    }
    return -1;
}

/* Opens one side, read-only in one snapshot, and reads its devices.
 * CLI_EXIT_OK, or CLI_EXIT_FAILURE (printed). */
static int diff_open_side(diff_side_info *side, const char *dir, const diff_options *options)
{
    char error[PATH_MAX + 512];
    if (cli_session_open(&side->session, "diff", dir, 1, error, sizeof error) != CLI_EXIT_OK)
        return CLI_EXIT_FAILURE;
    side->open = 1;
    if (side->session.summary.end_ns == 0 && !options->allow_unfinished)
        return cli_failure("diff",
                           "%s session %s has no recorded end: it is still being "
                           "written, or it was killed before it could end; diff compares "
                           "finished sessions (--allow-unfinished compares what it holds now)",
                           side->label, side->session.directory);
    if (read_devices(side) != 0)
        return cli_failure("diff", "%s", store_last_error(side->session.database));
    return CLI_EXIT_OK;
}

/* ---- the gate ---- */

int diff_row_fails(const diff_result *result, const diff_row *row)
{
    return result->options->gate && row->verdict == DIFF_SLOWER &&
           row->change_pct > result->options->fail_pct;
}

/* Says on stderr what failed the gate (the output says it too), so that
 * a CI log shows it whatever became of stdout. */
static void diff_report_failures(const diff_result *result)
{
    fprintf(stderr,
            "flare diff: slower by more than %g%% beyond noise:", result->options->fail_pct);
    const char *separator = " ";
    if (diff_row_fails(result, &result->kernels.total)) {
        fprintf(stderr, "%stotal GPU time (%+.1f%%)", separator, result->kernels.total.change_pct);
        separator = ", ";
    }
    size_t listed = 0;
    for (size_t i = 0; i < result->kernels.count; i++) {
        const diff_row *row = &result->kernels.rows[i];
        if (!diff_row_fails(result, row))
            continue;
        if (listed++ == 5) {
            fprintf(stderr, "%sand more", separator);
            break;
        }
        char name[128];
        cli_format_untrusted(name, sizeof name, row->name);
        fprintf(stderr, "%s%s (%+.1f%%)", separator, name, row->change_pct);
        separator = ", ";
    }
    fprintf(stderr, "\n");
}

/* ---- the command ---- */

static int diff_compare(diff_result *result)
{
    diff_sessions sessions = {
        .base = result->sides[0].session.database,
        .new_store = result->sides[1].session.database,
        .base_label = result->sides[0].session.directory,
        .new_label = result->sides[1].session.directory,
    };
    char error[PATH_MAX + 1024];
    if (diff_collect(&sessions, STORE_DIFF_KERNELS, &result->options->rule, 0, &result->kernels,
                     error, sizeof error) != 0 ||
        diff_collect(&sessions, STORE_DIFF_SCOPES, &result->options->rule, 0, &result->scopes,
                     error, sizeof error) != 0)
        return cli_failure("diff", "%s", error);
    const store_session_summary *base = &result->sides[0].session.summary;
    const store_session_summary *new_summary = &result->sides[1].session.summary;
    result->different_hosts = strcmp(base->host, new_summary->host) != 0;
    result->different_devices = strcmp(result->sides[0].devices, result->sides[1].devices) != 0;
    result->different_versions = strcmp(base->flare_version, new_summary->flare_version) != 0;
    result->failures = diff_row_fails(result, &result->kernels.total) ? 1 : 0;
    for (size_t i = 0; i < result->kernels.count; i++)
        result->failures += (size_t)diff_row_fails(result, &result->kernels.rows[i]);
    return CLI_EXIT_OK;
}

int cli_diff(int argc, char **argv)
{
    diff_options options;
    int parsed = diff_parse(argc, argv, &options);
    if (parsed >= 0)
        return parsed;
    char dirs[2][PATH_MAX];
    int status = diff_resolve(&options, dirs);
    if (status >= 0)
        return status;

    diff_result result = {.options = &options};
    result.sides[0].label = "BASE";
    result.sides[1].label = "NEW";
    status = CLI_EXIT_OK;
    for (int side = 0; side < 2 && status == CLI_EXIT_OK; side++)
        status = diff_open_side(&result.sides[side], dirs[side], &options);
    if (status == CLI_EXIT_OK)
        status = diff_compare(&result);
    if (status == CLI_EXIT_OK) {
        if (options.json)
            diff_print_json(&result);
        else
            diff_print_text(&result);
        fflush(stdout);
        if (result.failures > 0) {
            diff_report_failures(&result);
            status = CLI_DIFF_EXIT_SLOWER;
        }
    }
    diff_table_free(&result.kernels);
    diff_table_free(&result.scopes);
    for (int side = 0; side < 2; side++)
        if (result.sides[side].open)
            cli_session_close(&result.sides[side].session);
    return status;
}
