/*
 * replay.c: `flare replay [SELECTION] -- CMD [ARGS...]` and
 * `flare replay --list-sets`.
 *
 * Runs CMD exactly as `flare trace` does (launch.c), with the chosen
 * launches, or the chosen spans of work (--range, --range-api), replayed to
 * collect a metric set (docs/replay.md). Every option
 * is validated here, before anything is prepared or run, with the engine's
 * own parsers and its own selection check, so that what passes here is what
 * the engine accepts on the device side from the FLARE_REPLAY_* variables.
 * Only metric names cannot be checked here: the device's collector alone
 * knows them, and a wrong one declines the launch with its reason.
 *
 * Must never: run the command after a usage error; leave a FLARE_REPLAY_*
 * variable from the caller's environment in force beside the options given
 * (the selection is exactly what was typed); swallow the command's status.
 */
#include <limits.h>
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/output_path.h"
#include "core/duration.h"
#include "flare/flare.h"
#include "replay/replay.h"
#include "storm/storm_guard.h"
#include "store/store.h"
#include "store/store_replay.h"

static const char replay_help[] =
    "usage: flare replay [-o DIR] [--kernel REGEX] [--launch N | --every N]\n"
    "                    [--range NAME [--occurrence N] | --range-api]\n"
    "                    [--method profiler|pm [--pm-interval DURATION]\n"
    "                    [--pm-min-kernel DURATION]]\n"
    "                    [--metrics A,B,C | --set NAME] [--drain-timeout DURATION]\n"
    "                    [--pass-timeout DURATION] [--footprint-budget BYTES] [-q]\n"
    "                    -- CMD [ARGS...]\n"
    "       flare replay --list-sets\n"
    "\n"
    "Runs CMD under the profiler exactly as 'flare trace' does, and replays the\n"
    "chosen kernel launches: each is run once by the program, then again for as many\n"
    "passes as the metric set needs, with the device memory it can change restored\n"
    "before every pass, so the program sees one launch and its usual results. Other\n"
    "launches, copies and memsets on that device wait while a launch replays; other\n"
    "devices keep working. The metric values of every replayed launch, and the\n"
    "reason for every launch that was chosen but declined (it then ran once,\n"
    "normally), are saved in the session; 'flare report DIR' shows them per kernel\n"
    "(and per span for range replay).\n"
    "\n"
    "Which launches (counted in each process, in submission order):\n"
    "  --kernel REGEX     kernels whose name matches REGEX (POSIX extended, anywhere\n"
    "                     in the name unless anchored: '^saxpy$'); default: every\n"
    "                     kernel\n"
    "  --launch N         only the Nth launch that matches (1 = the first)\n"
    "  --every N          every Nth launch that matches (N, 2N, 3N...)\n"
    "                     Without --launch or --every, every matching launch is\n"
    "                     replayed.\n"
    "Or whole spans of work (range replay; excludes --kernel, --launch, --every):\n"
    "  --range NAME       the span is a flare scope or NVTX push/pop range named\n"
    "                     NAME (a training step, a request): all its kernels,\n"
    "                     copies and memsets are recorded on its first run and\n"
    "                     replayed together, and every kernel in it gets the\n"
    "                     metrics\n"
    "  --occurrence N     which occurrence of NAME, counted over the process's\n"
    "                     threads (1 = the first, the default)\n"
    "  --range-api        only spans the program marks with\n"
    "                     flare_replay_range_begin/end (C) or flare.replay_range\n"
    "                     (Python); no launch is replayed on its own\n"
    "                     A span that allocates or frees memory, copies device\n"
    "                     memory to the host, launches a graph or a cooperative\n"
    "                     kernel, or uses two devices is declined: it runs once\n"
    "                     and the report says why.\n"
    "How spans are measured:\n"
    "  --method profiler  the device's range profiler, a range per kernel per pass:\n"
    "                     exact counts, about 1 ms a kernel a pass (the default)\n"
    "  --method pm        PM sampling: one pass per sampling configuration, each\n"
    "                     sample spread over the kernels it overlaps by their times\n"
    "                     in that pass; no per-kernel cost. Values carry their\n"
    "                     method, status and error bound; kernels shorter than\n"
    "                     --pm-min-kernel get none. Needs --range or --range-api.\n"
    "  --pm-interval DURATION      the sampling interval, 10us to 1s (default 10us)\n"
    "  --pm-min-kernel DURATION    kernels shorter than this get no value (default\n"
    "                     100us: at 10us, longer ones were within 5%% of the range\n"
    "                     profiler on the H200)\n"
    "What to collect:\n"
    "  --metrics A,B,C    these metrics (names as the device's profiler spells them,\n"
    "                     e.g. dram__bytes_read.sum); checked on the device: an\n"
    "                     unknown name declines the launch, with the reason\n"
    "  --set NAME         a named set (default: speed-of-light; overview with\n"
    "                     --method pm)\n"
    "  --list-sets        print the sets and their metrics, run nothing\n"
    "Bounds (units: ns, us, ms, s, min, h; B, KiB, MiB, GiB, TiB):\n"
    "  --drain-timeout DURATION    how long to wait for the device to go idle\n"
    "                     before a replay; on expiry the launch is declined and runs\n"
    "                     once (default 10s)\n"
    "  --pass-timeout DURATION     how long one pass may take; on expiry flare\n"
    "                     stops the program, naming the kernel and pass, because its\n"
    "                     memory can no longer be trusted (default 60s)\n"
    "  --footprint-budget BYTES    the most device memory one replay may snapshot;\n"
    "                     a launch whose device holds more is declined (default 32GiB)\n"
    "Other:\n"
    "  -o, --output DIR   session directory, as for 'flare trace' (%h, %p, %r, %q{VAR}\n"
    "                     and %% placeholders too)\n"
    "  -q, --quiet        print nothing but errors and warnings\n"
    "  -h, --help         this help\n"
    "\n"
    "The options reach CMD as FLARE_REPLAY_KERNEL, _LAUNCH, _EVERY, _RANGE,\n"
    "_OCCURRENCE, _RANGE_API, _METHOD, _PM_INTERVAL, _PM_MIN_KERNEL, _METRICS, _SET,\n"
    "_DRAIN_TIMEOUT, _PASS_TIMEOUT and _FOOTPRINT_BUDGET (any such variable already\n"
    "in the environment is replaced or removed). FLARE_REPLAY_HOST_SHADOW=1 (shadows in host "
    "memory only),\n"
    "FLARE_REPLAY_COUNTER_AVAILABILITY=1 (fetch CUPTI's counter availability image\n"
    "first) and FLARE_REPLAY_SERIAL_DEVICES=1 (one device's metric collection at a\n"
    "time) pass through to CMD. Kernels launched from CUDA graphs are\n"
    "never replayed. Each pass costs a run of the kernel plus the restore of the\n"
    "device's tracked memory: replaying every launch of a busy program is slow.\n"
    "\n"
    "Exit status: the command's own (128+N if signal N ended it); 2 for a usage\n"
    "error (nothing is run); 1 if the session could not be prepared.\n"
    "Guide: docs/replay.md. Then: flare report DIR\n";

/* Every variable `flare replay` owns; cleared before the given ones are set. */
static const char *const replay_variables[] = {
    "FLARE_REPLAY_KERNEL",        "FLARE_REPLAY_LAUNCH",
    "FLARE_REPLAY_EVERY",         "FLARE_REPLAY_RANGE",
    "FLARE_REPLAY_OCCURRENCE",    "FLARE_REPLAY_RANGE_API",
    "FLARE_REPLAY_METHOD",        "FLARE_REPLAY_PM_INTERVAL",
    "FLARE_REPLAY_PM_MIN_KERNEL", "FLARE_REPLAY_METRICS",
    "FLARE_REPLAY_SET",           "FLARE_REPLAY_DRAIN_TIMEOUT",
    "FLARE_REPLAY_PASS_TIMEOUT",  "FLARE_REPLAY_FOOTPRINT_BUDGET",
};

#define REPLAY_DEFAULT_SET    "speed-of-light"
#define REPLAY_PM_DEFAULT_SET "overview"

static void print_sets(FILE *out, int with_metrics)
{
    size_t count = 0;
    const replay_metric_set *sets = replay_metric_sets(&count);
    for (size_t index = 0; index < count; index++) {
        fprintf(out, "  %-16s %s%s\n", sets[index].name, sets[index].description,
                strcmp(sets[index].name, REPLAY_DEFAULT_SET) == 0 ? " (the default)" : "");
        if (!with_metrics)
            continue;
        /* One metric a line: the names are long and are what a user copies
         * into --metrics. */
        const char *cursor = sets[index].metrics;
        while (*cursor != '\0') {
            size_t length = strcspn(cursor, ",");
            fprintf(out, "  %-16s   %.*s\n", "", (int)length, cursor);
            cursor += length;
            if (*cursor == ',')
                cursor++;
        }
    }
}

static int list_sets(void)
{
    printf("Metric sets for 'flare replay --set NAME':\n\n");
    print_sets(stdout, 1);
    printf("\nAny other metric the device's profiler knows can be named with --metrics A,B,C.\n"
           "Names are checked on the device when a chosen launch is prepared: an unknown\n"
           "name declines that launch, and 'flare report' shows the reason. The\n"
           "simulated device accepts the sets' metrics but measures only a few (kernel\n"
           "time, launch geometry); the others are stored without a value.\n");
    return CLI_EXIT_OK;
}

/* A whole number of at least 1 (launches and occurrences are counted from
 * 1); what names the things counted, for the message about 0. */
static int parse_count(const char *option, const char *value, const char *what, uint64_t *out)
{
    uint64_t result = 0;
    int digits = 0;
    for (const char *cursor = value; *cursor != '\0'; cursor++, digits++) {
        if (*cursor < '0' || *cursor > '9' || result > (UINT64_MAX - 9) / 10)
            return cli_usage_error("replay", "'%s %s': expected a whole number of at least 1",
                                   option, value);
        result = result * 10 + (uint64_t)(*cursor - '0');
    }
    if (digits == 0)
        return cli_usage_error("replay", "'%s' needs a whole number of at least 1", option);
    if (result == 0)
        return cli_usage_error("replay",
                               "'%s 0': %s are counted from 1; expected a whole number of "
                               "at least 1",
                               option, what);
    *out = result;
    return CLI_EXIT_OK;
}

static int is_all_digits(const char *text)
{
    if (*text == '\0')
        return 0;
    for (; *text != '\0'; text++)
        if (*text < '0' || *text > '9')
            return 0;
    return 1;
}

/* A duration or a size, through the engine's parser so that the command
 * accepts exactly what the engine will (FLARE_REPLAY_*_TIMEOUT, _BUDGET). */
static int check_scaled(const char *option, const char *value, int is_bytes)
{
    const char *units = is_bytes ? "B, KiB, MiB, GiB, TiB" : "ns, us, ms, s, min, h";
    if (is_all_digits(value) && strspn(value, "0") == strlen(value))
        return cli_usage_error("replay", "'%s %s': must be more than zero, with a unit (%s)",
                               option, value, units);
    if (is_all_digits(value))
        return cli_usage_error("replay", "'%s %s' needs a unit: write %s%s (units: %s)", option,
                               value, value, is_bytes ? "MiB" : "s", units);
    char error[256];
    uint64_t parsed = 0;
    if (!is_bytes) {
        if (core_duration_parse(value, strlen(value), 1, UINT64_MAX, &parsed, error,
                                sizeof(error)) != FLARE_OK)
            return cli_usage_error("replay", "'%s %s': %s", option, value, error);
        return CLI_EXIT_OK;
    }
    if (replay_parse_bytes(option, value, &parsed, error, sizeof(error)) != 0) {
        /* The engine's message starts with VARIABLE="VALUE": ; say it the
         * way the other options' messages do. */
        char prefix[256];
        snprintf(prefix, sizeof(prefix), "%s=\"%s\": ", option, value);
        const char *reason = error;
        if (strncmp(error, prefix, strlen(prefix)) == 0)
            reason += strlen(prefix);
        return cli_usage_error("replay", "'%s %s': %s", option, value, reason);
    }
    /* "0.1B" parses as a positive number that rounds to nothing: a zero
     * budget would decline every replay. */
    if (parsed == 0)
        return cli_usage_error("replay", "'%s %s': rounds to zero; expected at least 1 byte",
                               option, value);
    return CLI_EXIT_OK;
}

/* The value of the option at argv[*index], which must be there and not be
 * '--'. */
static int take_value(int argc, char **argv, int *index, const char *what, const char **out)
{
    const char *option = argv[*index];
    if (*index + 1 >= argc || strcmp(argv[*index + 1], "--") == 0)
        return cli_usage_error("replay", "option '%s' needs %s", option, what);
    *out = argv[++*index];
    if ((*out)[0] == '\0')
        return cli_usage_error("replay", "option '%s' needs %s, not an empty string", option, what);
    return CLI_EXIT_OK;
}

typedef struct replay_options {
    const char *output;
    const char *kernel;
    const char *launch;
    const char *every;
    const char *range;
    const char *occurrence;
    const char *metrics;
    const char *set;
    const char *drain_timeout;
    const char *pass_timeout;
    const char *footprint_budget;
    const char *method;
    const char *pm_interval;
    const char *pm_min_kernel;
    int method_number;
    uint64_t pm_interval_ns;
    uint64_t pm_min_kernel_ns;
    uint64_t launch_number;
    uint64_t every_number;
    uint64_t occurrence_number;
    int range_api;
    int quiet;
    int list_sets;
} replay_options;

/* Reads --method and the PM durations into their numbers (usage errors
 * for values that are not one; their ranges are the engine's check). */
static int parse_method(replay_options *options)
{
    if (options->method != NULL) {
        options->method_number = replay_method_parse(options->method);
        if (options->method_number < 0)
            return cli_usage_error("replay", "'--method %s': expected profiler or pm",
                                   options->method);
    }
    const char *durations[] = {options->pm_interval, options->pm_min_kernel};
    const char *names[] = {"--pm-interval", "--pm-min-kernel"};
    uint64_t *outs[] = {&options->pm_interval_ns, &options->pm_min_kernel_ns};
    for (size_t index = 0; index < 2; index++) {
        char why[192];
        if (durations[index] != NULL && !is_all_digits(durations[index]) &&
            core_duration_parse(durations[index], strlen(durations[index]), 1, UINT64_MAX,
                                outs[index], why, sizeof(why)) != FLARE_OK)
            return cli_usage_error("replay", "'%s %s': %s", names[index], durations[index], why);
    }
    return CLI_EXIT_OK;
}

/* Checks everything that can be checked without the device; prints the
 * first problem. */
static int validate(const replay_options *options)
{
    if (options->kernel != NULL) {
        if (strlen(options->kernel) >= sizeof(((replay_selection *)0)->kernel_regex))
            return cli_usage_error("replay",
                                   "'--kernel': the expression is longer than %zu "
                                   "characters",
                                   sizeof(((replay_selection *)0)->kernel_regex) - 1);
        /* One too costly to compile is refused before regcomp tries. */
        char why[512];
        if (replay_regex_check(options->kernel, why, sizeof(why)) != FLARE_OK)
            return cli_usage_error("replay", "'--kernel': %s", why);
        /* The same flags as the engine's matcher, so an expression that
         * compiles here compiles there. */
        regex_t compiled;
        int status = regcomp(&compiled, options->kernel, REG_EXTENDED | REG_NOSUB);
        if (status != 0) {
            char message[256];
            regerror(status, &compiled, message, sizeof(message));
            return cli_usage_error("replay", "'--kernel %s': bad regular expression: %s",
                                   options->kernel, message);
        }
        regfree(&compiled);
    }
    if (options->launch != NULL && options->every != NULL)
        return cli_usage_error("replay",
                               "'--launch %s' and '--every %s' exclude each other: --launch N "
                               "replays only the Nth matching launch, --every N every Nth one",
                               options->launch, options->every);
    if (options->metrics != NULL && options->set != NULL)
        return cli_usage_error("replay",
                               "'--metrics %s' and '--set %s' exclude each other: name the "
                               "metrics, or a set",
                               options->metrics, options->set);
    if (options->set != NULL && replay_metric_set_find(options->set) == NULL) {
        fprintf(stderr, "flare replay: unknown metric set '%s'; the sets are:\n", options->set);
        print_sets(stderr, 0);
        fprintf(stderr, "Run 'flare replay --list-sets' for their metrics.\n"
                        "Run 'flare replay --help' for usage.\n");
        return CLI_EXIT_USAGE;
    }
    int status = CLI_EXIT_OK;
    if (options->pm_interval != NULL)
        status = check_scaled("--pm-interval", options->pm_interval, 0);
    if (status == CLI_EXIT_OK && options->pm_min_kernel != NULL)
        status = check_scaled("--pm-min-kernel", options->pm_min_kernel, 0);
    if (status == CLI_EXIT_OK && options->drain_timeout != NULL)
        status = check_scaled("--drain-timeout", options->drain_timeout, 0);
    if (status == CLI_EXIT_OK && options->pass_timeout != NULL)
        status = check_scaled("--pass-timeout", options->pass_timeout, 0);
    if (status == CLI_EXIT_OK && options->footprint_budget != NULL)
        status = check_scaled("--footprint-budget", options->footprint_budget, 1);
    if (status != CLI_EXIT_OK)
        return status;
    /* The switches that pass through to CMD: a bad one would only be
     * logged in CMD's processes, with nothing replayed. */
    static const char *const switches[] = {"FLARE_REPLAY_HOST_SHADOW",
                                           "FLARE_REPLAY_COUNTER_AVAILABILITY",
                                           "FLARE_REPLAY_SERIAL_DEVICES"};
    for (size_t index = 0; index < sizeof(switches) / sizeof(switches[0]); index++) {
        const char *value = getenv(switches[index]);
        if (value != NULL && strcmp(value, "0") != 0 && strcmp(value, "1") != 0)
            return cli_usage_error("replay", "%s=\"%.40s\" in the environment: expected 0 or 1",
                                   switches[index], value);
    }
    /* The launch-storm guard's rate passes through too (flare trace
     * --storm-rate sets it). */
    const char *storm_rate = getenv("FLARE_STORM_RATE");
    char why[192];
    uint64_t rate;
    if (storm_rate != NULL &&
        storm_guard_parse_rate(storm_rate, &rate, why, sizeof(why)) != FLARE_OK)
        return cli_usage_error("replay", "FLARE_STORM_RATE in the environment: %s", why);

    /* Last, the engine's own check of the whole selection (metric list
     * syntax, lengths, counts): what it refuses here it would refuse in
     * every process of CMD, where nobody would see why. */
    replay_selection selection;
    memset(&selection, 0, sizeof(selection));
    if (options->kernel != NULL)
        snprintf(selection.kernel_regex, sizeof(selection.kernel_regex), "%s", options->kernel);
    selection.launch = options->launch_number;
    selection.every = options->every_number;
    if (options->metrics != NULL) {
        if (strlen(options->metrics) >= sizeof(selection.metrics))
            return cli_usage_error("replay", "'--metrics': the list is longer than %zu characters",
                                   sizeof(selection.metrics) - 1);
        snprintf(selection.metrics, sizeof(selection.metrics), "%s", options->metrics);
    }
    if (options->set != NULL)
        snprintf(selection.set_name, sizeof(selection.set_name), "%s", options->set);
    if (options->range != NULL) {
        if (strlen(options->range) >= sizeof(selection.range_name))
            return cli_usage_error("replay", "'--range': the name is longer than %zu characters",
                                   sizeof(selection.range_name) - 1);
        snprintf(selection.range_name, sizeof(selection.range_name), "%s", options->range);
    }
    selection.occurrence = options->occurrence_number;
    selection.api_spans_only = options->range_api;
    selection.method = options->method_number;
    selection.pm_interval_ns = options->pm_interval_ns;
    selection.pm_min_kernel_ns = options->pm_min_kernel_ns;
    char error[512];
    if (replay_selection_apply(&selection, error, sizeof(error)) != FLARE_OK) {
        if (options->metrics != NULL)
            return cli_usage_error("replay", "'--metrics %s': %s", options->metrics, error);
        return cli_usage_error("replay", "%s", error);
    }
    return CLI_EXIT_OK;
}

static void export_selection(const replay_options *options)
{
    for (size_t index = 0; index < sizeof(replay_variables) / sizeof(replay_variables[0]); index++)
        unsetenv(replay_variables[index]);
    if (options->kernel != NULL)
        setenv("FLARE_REPLAY_KERNEL", options->kernel, 1);
    if (options->launch != NULL)
        setenv("FLARE_REPLAY_LAUNCH", options->launch, 1);
    if (options->every != NULL)
        setenv("FLARE_REPLAY_EVERY", options->every, 1);
    if (options->range != NULL)
        setenv("FLARE_REPLAY_RANGE", options->range, 1);
    if (options->occurrence != NULL)
        setenv("FLARE_REPLAY_OCCURRENCE", options->occurrence, 1);
    if (options->range_api)
        setenv("FLARE_REPLAY_RANGE_API", "1", 1);
    if (options->metrics != NULL)
        setenv("FLARE_REPLAY_METRICS", options->metrics, 1);
    /* Always a selection, even with no option at all: without one the
     * engine replays nothing. */
    if (options->metrics == NULL)
        setenv("FLARE_REPLAY_SET",
               options->set != NULL                         ? options->set
               : options->method_number == REPLAY_METHOD_PM ? REPLAY_PM_DEFAULT_SET
                                                            : REPLAY_DEFAULT_SET,
               1);
    if (options->method != NULL)
        setenv("FLARE_REPLAY_METHOD", options->method, 1);
    if (options->pm_interval != NULL)
        setenv("FLARE_REPLAY_PM_INTERVAL", options->pm_interval, 1);
    if (options->pm_min_kernel != NULL)
        setenv("FLARE_REPLAY_PM_MIN_KERNEL", options->pm_min_kernel, 1);
    if (options->drain_timeout != NULL)
        setenv("FLARE_REPLAY_DRAIN_TIMEOUT", options->drain_timeout, 1);
    if (options->pass_timeout != NULL)
        setenv("FLARE_REPLAY_PASS_TIMEOUT", options->pass_timeout, 1);
    if (options->footprint_budget != NULL)
        setenv("FLARE_REPLAY_FOOTPRINT_BUDGET", options->footprint_budget, 1);
}

/* The closing lines: what was replayed, from the session database. */
static void print_summary(const cli_launch *launch, const replay_options *options)
{
    char error[1024];
    store *database;
    if (store_open(launch->session_dir, STORE_OPEN_READ, &database, error, sizeof(error)) != 0) {
        cli_failure("replay", "cannot read the replay results: %s", error);
        return;
    }
    store_replay_summary summary;
    int status = store_read_replay_summary(database, &summary);
    if (status != 0) {
        cli_failure("replay", "cannot read the replay results: %s", store_last_error(database));
        store_close(database);
        return;
    }
    store_close(database);
    if (summary.launches == 0 && summary.spans == 0) {
        char selection[768] = "";
        size_t used = 0;
        if (options->kernel != NULL)
            used += (size_t)snprintf(selection + used, sizeof(selection) - used, " --kernel '%s'",
                                     options->kernel);
        if (options->launch != NULL && used < sizeof(selection))
            snprintf(selection + used, sizeof(selection) - used, " --launch %s", options->launch);
        else if (options->every != NULL && used < sizeof(selection))
            snprintf(selection + used, sizeof(selection) - used, " --every %s", options->every);
        if (options->range != NULL)
            fprintf(
                stderr,
                "flare: WARNING: no span was replayed: no flare scope or NVTX range named "
                "'%s' reached occurrence %llu, or replay could not start (see the replay "
                "capability in 'flare report %s', and %s/flare.log)\n",
                options->range,
                (unsigned long long)(options->occurrence_number ? options->occurrence_number : 1),
                launch->session_dir, launch->session_dir);
        else if (options->range_api)
            fprintf(stderr,
                    "flare: WARNING: no span was replayed: the program marked none with "
                    "flare_replay_range_begin/end, or replay could not start (see the replay "
                    "capability in 'flare report %s', and %s/flare.log)\n",
                    launch->session_dir, launch->session_dir);
        else
            fprintf(stderr,
                    "flare: WARNING: no launch was replayed: no kernel launch matched%s, or "
                    "replay could not start (see the replay capability in 'flare report %s', "
                    "and %s/flare.log)\n",
                    selection[0] != '\0' ? selection : " (every launch was selected)",
                    launch->session_dir, launch->session_dir);
        return;
    }
    if (!options->quiet && summary.launches > 0) {
        char snapshot[32], restored[32], took[32];
        cli_format_bytes(summary.snapshot_bytes, snapshot, sizeof(snapshot));
        cli_format_bytes(summary.bytes_restored, restored, sizeof(restored));
        cli_format_duration(summary.collection_ns, took, sizeof(took));
        fprintf(stderr,
                "flare: replay: %lld launch(es) of %lld kernel(s) replayed, %lld declined; "
                "%llu passes, %s snapshotted, %s restored, %lld metric values, %s in all\n",
                (long long)summary.replayed, (long long)summary.kernels,
                (long long)summary.declined, (unsigned long long)summary.passes, snapshot, restored,
                (long long)summary.metric_values, took);
    }
    /* Spans apart: a span is many kernels in one replay, and its kernels
     * are not launches replayed on their own. */
    if (!options->quiet && summary.spans > 0) {
        char snapshot[32], restored[32], took[32];
        cli_format_bytes(summary.span_snapshot_bytes, snapshot, sizeof(snapshot));
        cli_format_bytes(summary.span_bytes_restored, restored, sizeof(restored));
        cli_format_duration(summary.span_collection_ns, took, sizeof(took));
        fprintf(stderr,
                "flare: replay: %lld span(s) replayed, %lld declined; %lld kernel(s) in them, "
                "%llu passes, %s snapshotted, %s restored, %lld metric values, %s in all\n",
                (long long)summary.spans_replayed, (long long)summary.spans_declined,
                (long long)summary.span_kernels, (unsigned long long)summary.span_passes, snapshot,
                restored, (long long)summary.span_metric_values, took);
    }
    if (summary.declined > 0)
        fprintf(stderr, "flare: replay: %lld launch(es) declined (they ran once); the first: %s\n",
                (long long)summary.declined, summary.first_decline);
    if (summary.spans_declined > 0)
        fprintf(stderr, "flare: replay: %lld span(s) declined (they ran once); the first: %s\n",
                (long long)summary.spans_declined, summary.first_span_decline);
}

int cli_replay(int argc, char **argv)
{
    replay_options options;
    memset(&options, 0, sizeof(options));
    int index = 1;
    for (; index < argc; index++) {
        const char *argument = argv[index];
        if (strcmp(argument, "--") == 0)
            break;
        if (cli_is_help(argument)) {
            fputs(replay_help, stdout);
            return CLI_EXIT_OK;
        }
        const char **slot = NULL;
        const char *what = NULL;
        if (strcmp(argument, "-o") == 0 || strcmp(argument, "--output") == 0) {
            slot = &options.output, what = "a directory";
        } else if (strcmp(argument, "--kernel") == 0) {
            slot = &options.kernel, what = "a regular expression, e.g. '^saxpy$'";
        } else if (strcmp(argument, "--launch") == 0) {
            slot = &options.launch, what = "a whole number of at least 1";
        } else if (strcmp(argument, "--every") == 0) {
            slot = &options.every, what = "a whole number of at least 1";
        } else if (strcmp(argument, "--range") == 0) {
            slot = &options.range, what = "a scope or NVTX range name";
        } else if (strcmp(argument, "--occurrence") == 0) {
            slot = &options.occurrence, what = "a whole number of at least 1";
        } else if (strcmp(argument, "--range-api") == 0) {
            options.range_api = 1;
            continue;
        } else if (strcmp(argument, "--method") == 0) {
            slot = &options.method, what = "a method: profiler or pm";
        } else if (strcmp(argument, "--pm-interval") == 0) {
            slot = &options.pm_interval, what = "a duration, e.g. 10us";
        } else if (strcmp(argument, "--pm-min-kernel") == 0) {
            slot = &options.pm_min_kernel, what = "a duration, e.g. 100us";
        } else if (strcmp(argument, "--metrics") == 0) {
            slot = &options.metrics, what = "a comma-separated list of metric names";
        } else if (strcmp(argument, "--set") == 0) {
            slot = &options.set, what = "a metric set name (flare replay --list-sets)";
        } else if (strcmp(argument, "--drain-timeout") == 0) {
            slot = &options.drain_timeout, what = "a duration, e.g. 10s";
        } else if (strcmp(argument, "--pass-timeout") == 0) {
            slot = &options.pass_timeout, what = "a duration, e.g. 60s";
        } else if (strcmp(argument, "--footprint-budget") == 0) {
            slot = &options.footprint_budget, what = "a size, e.g. 16GiB";
        } else if (strcmp(argument, "--list-sets") == 0) {
            options.list_sets = 1;
            continue;
        } else if (strcmp(argument, "-q") == 0 || strcmp(argument, "--quiet") == 0) {
            options.quiet = 1;
            continue;
        } else if (argument[0] == '-') {
            return cli_usage_error("replay", "unknown option '%s'", argument);
        } else {
            return cli_usage_error("replay",
                                   "expected '--' before the command, found '%s' "
                                   "(flare replay [OPTIONS] -- CMD [ARGS...])",
                                   argument);
        }
        /* A repeated option is refused rather than silently overridden:
         * "--launch 2 ... --launch 3" is a mistake either way. */
        if (*slot != NULL)
            return cli_usage_error("replay", "option '%s' given twice", argument);
        int status = take_value(argc, argv, &index, what, slot);
        if (status != CLI_EXIT_OK)
            return status;
    }
    if (options.list_sets)
        return list_sets();
    if (options.launch != NULL &&
        parse_count("--launch", options.launch, "launches", &options.launch_number) != CLI_EXIT_OK)
        return CLI_EXIT_USAGE;
    if (options.every != NULL &&
        parse_count("--every", options.every, "launches", &options.every_number) != CLI_EXIT_OK)
        return CLI_EXIT_USAGE;
    if (options.occurrence != NULL && parse_count("--occurrence", options.occurrence, "occurrences",
                                                  &options.occurrence_number) != CLI_EXIT_OK)
        return CLI_EXIT_USAGE;
    int status = parse_method(&options);
    if (status == CLI_EXIT_OK)
        status = validate(&options);
    if (status != CLI_EXIT_OK)
        return status;
    static char expanded[PATH_MAX];
    char why[320];
    if (options.output != NULL &&
        cli_output_expand(options.output, expanded, sizeof(expanded), why, sizeof(why)) != 0)
        return cli_usage_error("replay", "'-o %s': %s", options.output, why);
    if (options.output != NULL)
        options.output = expanded;
    if (index >= argc)
        return cli_usage_error("replay", "missing '--' and the command to run "
                                         "(flare replay [OPTIONS] -- CMD [ARGS...])");
    char **command = argv + index + 1;
    int command_count = argc - index - 1;
    if (command_count == 0)
        return cli_usage_error("replay", "missing the command after '--'");

    export_selection(&options);
    cli_launch launch = {.command_name = "replay",
                         .activity = options.range != NULL || options.range_api
                                         ? "replaying chosen spans of"
                                         : "replaying chosen kernel launches of",
                         .output = options.output,
                         .quiet = options.quiet};
    int prepared = cli_launch_prepare(&launch, command, command_count);
    if (prepared != CLI_EXIT_OK)
        return prepared;
    int exit_status = cli_launch_run(&launch, command);
    if (launch.process_count > 0)
        print_summary(&launch, &options);
    return exit_status;
}
