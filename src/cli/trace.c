/*
 * trace.c: `flare trace [-o DIR] -- CMD [ARGS...]`: its options.
 *
 * Validates every option before anything is prepared or run (usage errors
 * are exit 2 and run nothing), passes the deep-profiling options to the
 * command through FLARE_* variables, and hands the run itself to the shared
 * launcher (launch.c): session prepared first, signals forwarded, exit
 * status recorded and returned (128+N if a signal N ended it), and a loud
 * warning when no process started a session. It must never run CMD before
 * every option has been checked and the session prepared.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/output_path.h"
#include "core/config.h"
#include "core/duration.h"
#include "core/mode.h"
#include "flare/flare.h"
#include "recorder/recorder_plan.h"
#include "storm/storm_guard.h"
#include "deepwin/deepwin.h"
#include "deepwin/deepwin_auto.h"
#include "deepwin/deepwin_session.h"
#include "rules/rule.h"

static const char trace_help[] =
    "usage: flare trace [-o DIR] [--mode MODE] [--flush-ms N] [--deep-when RULE]...\n"
    "                   [--deep-after DURATION --deep-for DURATION\n"
    "                    [--deep-engine pm|pc|sass|auto]] [--deep-budget PCT]\n"
    "                   [--storm-rate RATE]\n"
    "                   [--keep DURATION] [--max-size BYTES] [--quiet] -- CMD [ARGS...]\n"
    "\n"
    "Runs CMD under the profiler and saves a session in DIR/session.db: kernels,\n"
    "copies, memsets, NVTX ranges, scopes, counters and GPU metrics of every\n"
    "process of CMD that initialises CUDA (flare is injected through\n"
    "CUDA_INJECTION64_PATH) or links libflare (as flare-demo does).\n"
    "\n"
    "Options:\n"
    "  -o, --output DIR   session directory (must not already hold a session);\n"
    "                     default ./flare-out/<UTC time>-<pid>/ ($FLARE_OUTPUT_DIR\n"
    "                     replaces ./flare-out). For one session per rank or host,\n"
    "                     DIR may hold %h (host), %p (pid), %r (rank: RANK,\n"
    "                     OMPI_COMM_WORLD_RANK, SLURM_PROCID or PMI_RANK), %q{VAR}\n"
    "                     and %% (docs/fleet.md), e.g. -o 'runs/%h-%r'\n"
    "  --mode MODE        how much to record (docs/cli.md has what each costs):\n"
    "                     light     every kernel, copy and memset with GPU times,\n"
    "                               NVTX ranges, GPU metrics each second; no launch\n"
    "                               callbacks: no host launch counts, launch-storm\n"
    "                               guard, kernel_launch_rate rules or API calls\n"
    "                     standard  light, plus launch counts, the launch-storm\n"
    "                               guard, launch/copy/memset calls on the CPU\n"
    "                               timeline, GPU metrics every 100 ms (default)\n"
    "                     full      standard, timing every kernel in launch storms\n"
    "                               too (no guard unless --storm-rate asks)\n"
    "                     Default standard, or $FLARE_MODE.\n"
    "  --flush-ms N       how often collected events are written, 1..250 ms\n"
    "                     (default 100); a killed program keeps all but the last N ms\n"
    "  --deep-when RULE   a deep-profiling rule, e.g. 'kernel_launch_rate < 500/s\n"
    "                     for 2s' (docs/rules.md); repeatable, or rules separated by\n"
    "                     ';'. Rules are parsed and validated before CMD starts and\n"
    "                     passed to it in FLARE_DEEP_WHEN; a refused rule is a usage\n"
    "                     error (exit 2, nothing runs). A rule that fires opens a\n"
    "                     deep-profiling window in its process, or with 'action\n"
    "                     replay' or 'action range NAME' replays what made it fire.\n"
    "                     'flare rules check RULE' tries a rule without running CMD.\n"
    "  --deep-after DURATION --deep-for DURATION\n"
    "                     one scheduled deep-profiling window in each process: it\n"
    "                     opens DURATION after the process's session starts and\n"
    "                     lasts the --deep-for DURATION (ns, us, ms, s, min, h; e.g.\n"
    "                     --deep-after 30s --deep-for 2s). Both or neither.\n"
    "  --deep-engine ENGINE\n"
    "                     the scheduled window's deep engine: pm (PM sampling, the\n"
    "                     default: how busy the GPU was), pc (PC sampling: where in\n"
    "                     its kernels warps waited), sass (SASS metrics: how often\n"
    "                     each instruction ran; its kernels run 6-500x slower while\n"
    "                     the window is open) or auto (the deepest of sass, pc and\n"
    "                     pm whose estimated cost at the process's launch rate is\n"
    "                     within the deep budget; when none is, the window is\n"
    "                     refused and its record says why). A device without the\n"
    "                     engine falls back to pm and the window's record says so.\n"
    "                     Rules take 'engine pc', 'engine sass' or 'engine auto'.\n"
    "  --deep-budget PCT  the deep budget of engine auto: the slowdown its windows\n"
    "                     may cost the program, a percentage over 0 and at most 100,\n"
    "                     e.g. 0.5%; default 5%. Only beside engine auto\n"
    "                     (--deep-engine auto, or a rule's 'engine auto'); reaches\n"
    "                     the command as FLARE_DEEP_BUDGET.\n"
    "  --storm-rate RATE  the launch-storm guard (CUDA): over RATE kernel launches\n"
    "                     per second for 50 ms, kernels, copies and memsets are\n"
    "                     timed only in 20 ms slices each second and in deep\n"
    "                     windows, until the rate stays under RATE/2 for 500 ms;\n"
    "                     every launch, copy and memset is still counted and the\n"
    "                     untimed ones are reported. RATE: 1000..100000000 (a\n"
    "                     trailing /s is fine), or 0 to time every kernel.\n"
    "                     Default 50000/s, or $FLARE_STORM_RATE.\n"
    "  --keep DURATION    flight recorder, for long runs: keep full detail (kernels,\n"
    "                     copies, API calls, scopes, metrics...) only for the last\n"
    "                     DURATION (1s..720h, e.g. 10min) and around deep windows\n"
    "                     and replays; older rows are evicted, their per-second\n"
    "                     totals kept for the whole run (v_kernel_seconds, ...)\n"
    "                     and counted in the report. Default: keep everything,\n"
    "                     or $FLARE_KEEP.\n"
    "  --max-size BYTES   flight recorder: keep the database under BYTES (512M,\n"
    "                     2G, 1.5G or plain bytes; at least 1M) by evicting the\n"
    "                     oldest detail the same way. Default: no cap, or\n"
    "                     $FLARE_MAX_SIZE.\n"
    "  -q, --quiet        print nothing but errors and warnings\n"
    "  -h, --help         this help\n"
    "\n"
    "The '--' is required: everything after it is the command.\n"
    "Exit status: the command's own (128+N if signal N ended it); 2 for a usage\n"
    "error; 1 if the session could not be prepared (nothing is run then).\n"
    "Then: flare report DIR\n";

/* --keep DURATION or --max-size BYTES at argv[*index]: checked as each
 * process will read it (recorder_settings_parse), kept in *keep or
 * *max_size. CLI_EXIT_OK, or the usage error, printed. */
static int trace_recorder_option(int argc, char **argv, int *index, const char **keep,
                                 const char **max_size)
{
    const char *option = argv[*index];
    int is_keep = strcmp(option, "--keep") == 0;
    if (*index + 1 >= argc || strcmp(argv[*index + 1], "--") == 0)
        return cli_usage_error("trace", "option '%s' needs %s", option,
                               is_keep ? "a duration, e.g. --keep 10min"
                                       : "a size, e.g. --max-size 2G");
    const char *value = argv[++*index];
    if ((is_keep ? *keep : *max_size) != NULL)
        return cli_usage_error("trace", "option '%s' given twice", option);
    if (value[0] == '\0')
        return cli_usage_error("trace", "option '%s' needs a non-empty value", option);
    recorder_settings settings;
    char why[320];
    if (recorder_settings_parse(is_keep ? value : NULL, is_keep ? NULL : value, &settings, why,
                                sizeof(why)) != 0) {
        /* "FLARE_KEEP: why" from the parser: the option is named instead. */
        const char *reason = strchr(why, ':');
        return cli_usage_error("trace", "'%s %s':%s", option, value,
                               reason != NULL ? reason + 1 : why);
    }
    *(is_keep ? keep : max_size) = value;
    return CLI_EXIT_OK;
}

/* --keep and --max-size for the command. The launcher checks FLARE_KEEP
 * and FLARE_MAX_SIZE (these, or inherited ones) with the other start-time
 * variables, before anything runs. */
static void trace_recorder_export(const char *keep, const char *max_size)
{
    if (keep != NULL)
        setenv("FLARE_KEEP", keep, 1);
    if (max_size != NULL)
        setenv("FLARE_MAX_SIZE", max_size, 1);
}

/* A bad FLARE_STORM_RATE from the environment would only be logged in each
 * process of CMD: refused here instead, before anything runs. */
static int trace_check_inherited_rate(void)
{
    const char *inherited_rate = getenv("FLARE_STORM_RATE");
    char why[192];
    uint64_t rate;
    if (inherited_rate != NULL &&
        storm_guard_parse_rate(inherited_rate, &rate, why, sizeof(why)) != FLARE_OK)
        return cli_usage_error("trace", "FLARE_STORM_RATE in the environment: %s", why);
    return CLI_EXIT_OK;
}

/* The scheduled window's options and the deep budget, as given (NULL:
 * not given). */
typedef struct trace_schedule {
    const char *after, *length, *engine, *budget;
} trace_schedule;

/* --deep-engine ENGINE at argv[*index]: pm, pc, sass or auto. */
static int trace_engine_option(int argc, char **argv, int *index, trace_schedule *schedule)
{
    if (*index + 1 >= argc || strcmp(argv[*index + 1], "--") == 0)
        return cli_usage_error("trace", "option '--deep-engine' needs pm, pc, sass or auto");
    const char *value = argv[++*index];
    deepwin_engine_kind kind;
    if (deepwin_engine_kind_parse(value, &kind) != 0)
        return cli_usage_error("trace",
                               "'--deep-engine %s': use pm (PM sampling, the default), pc (PC "
                               "sampling), sass (SASS metrics) or auto (the deepest within the "
                               "deep budget)",
                               value);
    schedule->engine = value;
    return CLI_EXIT_OK;
}

/* --deep-budget PCT at argv[*index]: a percentage over 0 and at most 100. */
static int trace_budget_option(int argc, char **argv, int *index, trace_schedule *schedule)
{
    if (*index + 1 >= argc || strcmp(argv[*index + 1], "--") == 0)
        return cli_usage_error("trace", "option '--deep-budget' needs a percentage, e.g. "
                                        "--deep-budget 5%%");
    const char *value = argv[++*index];
    if (schedule->budget != NULL)
        return cli_usage_error("trace", "option '--deep-budget' given twice");
    double budget;
    char why[160];
    if (deepwin_budget_parse(value, &budget, why, sizeof(why)) != 0)
        return cli_usage_error("trace", "'--deep-budget %s': %s", value, why);
    schedule->budget = value;
    return CLI_EXIT_OK;
}

/* --deep-budget is engine auto's: refused (a usage error) when neither the
 * scheduled window (--deep-engine auto) nor a rule the command will have
 * (FLARE_DEEP_WHEN, after the --deep-when rules are exported) asks for it. */
static int trace_budget_check(const trace_schedule *schedule)
{
    if (schedule->budget == NULL ||
        (schedule->engine != NULL && strcmp(schedule->engine, "auto") == 0) ||
        (rules_list_engines(getenv("FLARE_DEEP_WHEN")) & RULES_ENGINES_AUTO) != 0)
        return CLI_EXIT_OK;
    return cli_usage_error("trace",
                           "'--deep-budget %s' applies only to engine auto: add --deep-engine "
                           "auto (with --deep-after and --deep-for) or a --deep-when rule with "
                           "'engine auto'",
                           schedule->budget);
}

/* --deep-after, --deep-for DURATION, --deep-engine ENGINE or --deep-budget
 * PCT at argv[*index]: checked, the text kept in schedule. CLI_EXIT_OK, or
 * the usage error. */
static int trace_schedule_option(int argc, char **argv, int *index, trace_schedule *schedule)
{
    const char *argument = argv[*index];
    if (strcmp(argument, "--deep-engine") == 0)
        return trace_engine_option(argc, argv, index, schedule);
    if (strcmp(argument, "--deep-budget") == 0)
        return trace_budget_option(argc, argv, index, schedule);
    int is_after = strcmp(argument, "--deep-after") == 0;
    if (*index + 1 >= argc || strcmp(argv[*index + 1], "--") == 0)
        return cli_usage_error("trace", "option '%s' needs a duration, e.g. %s %s", argument,
                               argument, is_after ? "30s" : "2s");
    const char *value = argv[++*index];
    char why[192];
    uint64_t duration_ns;
    if (core_duration_parse(value, strlen(value), 1, DEEPWIN_SCHEDULE_MAX_NS, &duration_ns, why,
                            sizeof(why)) != FLARE_OK)
        return cli_usage_error("trace", "'%s %s': %s", argument, value, why);
    if (!is_after && duration_ns > DEEPWIN_DURATION_MAX_NS)
        return cli_usage_error("trace", "'--deep-for %s': a window lasts at most %llu s", value,
                               DEEPWIN_DURATION_MAX_NS / 1000000000ull);
    *(is_after ? &schedule->after : &schedule->length) = value;
    return CLI_EXIT_OK;
}

/* A scheduled window needs both when and how long, and an engine only with
 * them; checked after every option, so the answer is the same whichever
 * came first. */
static int trace_schedule_check(const trace_schedule *schedule)
{
    if ((schedule->after != NULL) != (schedule->length != NULL)) {
        int after = schedule->after != NULL;
        return cli_usage_error(
            "trace",
            "'%s %s' needs '%s' too: add %s DURATION (e.g. --deep-after 30s --deep-for 2s)",
            after ? "--deep-after" : "--deep-for", after ? schedule->after : schedule->length,
            after ? "--deep-for" : "--deep-after", after ? "--deep-for" : "--deep-after");
    }
    if (schedule->engine != NULL && schedule->after == NULL)
        return cli_usage_error("trace",
                               "'--deep-engine %s' is the scheduled window's engine: "
                               "add --deep-after DURATION --deep-for DURATION (a "
                               "rule's window takes 'engine' in the rule)",
                               schedule->engine);
    return CLI_EXIT_OK;
}

static void trace_schedule_export(const trace_schedule *schedule)
{
    if (schedule->budget != NULL)
        setenv("FLARE_DEEP_BUDGET", schedule->budget, 1);
    if (schedule->after == NULL)
        return;
    setenv("FLARE_DEEP_AFTER", schedule->after, 1);
    setenv("FLARE_DEEP_FOR", schedule->length, 1);
    if (schedule->engine != NULL)
        setenv("FLARE_DEEP_ENGINE", schedule->engine, 1);
}

/* --mode MODE at argv[*index]: parsed into *mode, the text kept in
 * *mode_text. CLI_EXIT_OK, or the usage error, printed. */
static int trace_mode_option(int argc, char **argv, int *index, const char **mode_text,
                             core_mode *mode)
{
    if (*index + 1 >= argc || strcmp(argv[*index + 1], "--") == 0)
        return cli_usage_error("trace", "option '--mode' needs light, standard or full");
    if (*mode_text != NULL)
        return cli_usage_error("trace", "option '--mode' given twice");
    *mode_text = argv[++*index];
    char why[128];
    if (core_mode_parse(*mode_text, mode, why, sizeof(why)) != FLARE_OK)
        return cli_usage_error("trace", "'--mode %s': %s", *mode_text, why);
    return CLI_EXIT_OK;
}

/* --mode (or an inherited FLARE_MODE) against what it leaves out: the
 * light mode has no launch counts for kernel_launch_rate rules or the
 * launch-storm guard to read. */
static int trace_check_mode(const char *mode_text, core_mode *mode, const char *storm_rate)
{
    char why[160];
    if (mode_text == NULL && core_mode_from_environment(mode, why, sizeof(why)) != FLARE_OK)
        return cli_usage_error("trace", "%s (the environment)", why);
    if (core_mode_spec_of(*mode)->launch_callbacks)
        return CLI_EXIT_OK;
    const char *name = core_mode_spec_of(*mode)->name;
    if (cli_deep_when_needs_launch_counts())
        return cli_usage_error("trace",
                               "a kernel_launch_rate rule needs host launch counts, which the "
                               "%s mode does not record: use --mode standard",
                               name);
    uint64_t rate = 0;
    if (storm_rate != NULL &&
        storm_guard_parse_rate(storm_rate, &rate, why, sizeof(why)) == FLARE_OK && rate != 0)
        return cli_usage_error("trace",
                               "'--storm-rate %s': the launch-storm guard needs host launch "
                               "counts, which the %s mode does not record: use --mode standard",
                               storm_rate, name);
    return CLI_EXIT_OK;
}

int cli_trace(int argc, char **argv)
{
    const char *output = NULL;
    uint32_t flush_ms = 0;
    int quiet = 0;
    const char *storm_rate = NULL, *keep = NULL, *max_size = NULL, *mode_text = NULL;
    trace_schedule schedule = {NULL, NULL, NULL, NULL};
    core_mode mode = CORE_MODE_DEFAULT;
    int index = 1;
    for (; index < argc; index++) {
        const char *argument = argv[index];
        if (strcmp(argument, "--") == 0)
            break;
        if (cli_is_help(argument)) {
            fputs(trace_help, stdout);
            return CLI_EXIT_OK;
        }
        if (strcmp(argument, "-o") == 0 || strcmp(argument, "--output") == 0) {
            if (index + 1 >= argc || strcmp(argv[index + 1], "--") == 0)
                return cli_usage_error("trace", "option '%s' needs a directory", argument);
            output = argv[++index];
            if (output[0] == '\0')
                return cli_usage_error("trace", "option '%s' needs a non-empty directory",
                                       argument);
            static char expanded[PATH_MAX];
            char why[320];
            if (cli_output_expand(output, expanded, sizeof(expanded), why, sizeof(why)) != 0)
                return cli_usage_error("trace", "'%s %s': %s", argument, output, why);
            output = expanded;
        } else if (strcmp(argument, "--mode") == 0) {
            int status = trace_mode_option(argc, argv, &index, &mode_text, &mode);
            if (status != CLI_EXIT_OK)
                return status;
        } else if (strcmp(argument, "--flush-ms") == 0) {
            if (index + 1 >= argc)
                return cli_usage_error("trace", "option '--flush-ms' needs a value");
            const char *value = argv[++index];
            if (core_parse_u32(value, 1, CORE_FLUSH_INTERVAL_MAX_MS, &flush_ms) != 0)
                return cli_usage_error("trace",
                                       "'--flush-ms %s': expected whole milliseconds in 1..%u",
                                       value, CORE_FLUSH_INTERVAL_MAX_MS);
        } else if (strcmp(argument, "--deep-when") == 0) {
            int status = cli_deep_when_add(index + 1 < argc ? argv[index + 1] : NULL);
            if (status != CLI_EXIT_OK)
                return status;
            index++;
        } else if (strcmp(argument, "--deep-after") == 0 || strcmp(argument, "--deep-for") == 0 ||
                   strcmp(argument, "--deep-engine") == 0 ||
                   strcmp(argument, "--deep-budget") == 0) {
            int status = trace_schedule_option(argc, argv, &index, &schedule);
            if (status != CLI_EXIT_OK)
                return status;
        } else if (strcmp(argument, "--storm-rate") == 0) {
            if (index + 1 >= argc || strcmp(argv[index + 1], "--") == 0)
                return cli_usage_error("trace",
                                       "option '--storm-rate' needs launches per second, e.g. "
                                       "--storm-rate 50000/s (0: off)");
            storm_rate = argv[++index];
            char why[192];
            uint64_t rate;
            if (storm_guard_parse_rate(storm_rate, &rate, why, sizeof(why)) != FLARE_OK)
                return cli_usage_error("trace", "'--storm-rate %s': %s", storm_rate, why);
        } else if (strcmp(argument, "--keep") == 0 || strcmp(argument, "--max-size") == 0) {
            int status = trace_recorder_option(argc, argv, &index, &keep, &max_size);
            if (status != CLI_EXIT_OK)
                return status;
        } else if (strcmp(argument, "-q") == 0 || strcmp(argument, "--quiet") == 0) {
            quiet = 1;
        } else if (argument[0] == '-') {
            return cli_usage_error("trace", "unknown option '%s'", argument);
        } else {
            return cli_usage_error("trace",
                                   "expected '--' before the command, found '%s' "
                                   "(flare trace [OPTIONS] -- CMD [ARGS...])",
                                   argument);
        }
    }
    if (index >= argc)
        return cli_usage_error("trace", "missing '--' and the command to run "
                                        "(flare trace [OPTIONS] -- CMD [ARGS...])");
    char **command = argv + index + 1;
    int command_count = argc - index - 1;
    if (command_count == 0)
        return cli_usage_error("trace", "missing the command after '--'");
    int scheduled = trace_schedule_check(&schedule);
    if (scheduled != CLI_EXIT_OK)
        return scheduled;
    /* Before anything is set: a refused rule stops here, as a bad option does. */
    int rules = cli_deep_when_export(quiet);
    if (rules != CLI_EXIT_OK)
        return rules;
    int budget = trace_budget_check(&schedule);
    if (budget != CLI_EXIT_OK)
        return budget;
    int inherited = storm_rate == NULL ? trace_check_inherited_rate() : CLI_EXIT_OK;
    if (inherited != CLI_EXIT_OK)
        return inherited;
    int checked = trace_check_mode(mode_text, &mode, storm_rate);
    if (checked != CLI_EXIT_OK)
        return checked;
    if (mode_text != NULL)
        setenv("FLARE_MODE", mode_text, 1);
    trace_schedule_export(&schedule);
    if (storm_rate != NULL)
        setenv("FLARE_STORM_RATE", storm_rate, 1);
    trace_recorder_export(keep, max_size);

    cli_launch launch = {.command_name = "trace",
                         .activity = "tracing",
                         .output = output,
                         .flush_ms = flush_ms,
                         .quiet = quiet};
    int prepared = cli_launch_prepare(&launch, command, command_count);
    if (prepared != CLI_EXIT_OK)
        return prepared;
    return cli_launch_run(&launch, command);
}
