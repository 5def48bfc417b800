/*
 * replay_selection.c: which launches flare's own metric collection replays
 * (`flare replay --kernel/--launch/--every/--metrics/--set`, or the
 * FLARE_REPLAY_* variables), the named metric sets, and per-kernel launch
 * indexes.
 *
 * A selection is validated whole before anything is installed: a bad regex,
 * an unknown set or conflicting options leave the previous selection as it
 * was. Metric names themselves are checked by the device's collector, which
 * alone knows them. Matching takes a mutex; it runs only when replay is
 * configured, never on the plain tracing path.
 */
#include "replay/replay_internal.h"

#include "core/capability.h"
#include "core/duration.h"
#include "core/log.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const replay_metric_set metric_sets[] = {
    {"speed-of-light", "throughput of compute and memory units against their peaks, and time",
     "gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,"
     "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,"
     "dram__bytes_read.sum,dram__bytes_write.sum,"
     "l1tex__throughput.avg.pct_of_peak_sustained_active,"
     "lts__throughput.avg.pct_of_peak_sustained_elapsed,"
     "sm__cycles_active.avg,smsp__inst_executed.sum,"
     "sm__warps_active.avg.pct_of_peak_sustained_active"},
    {"memory", "DRAM and L2 traffic and hit rates",
     "gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,"
     "lts__t_sector_hit_rate.pct,lts__t_bytes.sum,l1tex__t_bytes.sum"},
    {"time", "kernel duration only (one pass)", "gpu__time_duration.sum"},
    {"overview",
     "DRAM bytes, SM and tensor-pipe activity, elapsed cycles and time (the default of "
     "--method pm, one PM sampling pass on GH100)",
     "gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_active.avg,"
     "gr__cycles_elapsed.max,sm__pipe_tensor_cycles_active.avg"},
};

const replay_metric_set *replay_metric_sets(size_t *count)
{
    *count = sizeof metric_sets / sizeof metric_sets[0];
    return metric_sets;
}

const replay_metric_set *replay_metric_set_find(const char *name)
{
    size_t count = 0;
    const replay_metric_set *sets = replay_metric_sets(&count);
    for (size_t index = 0; name != NULL && index < count; index++) {
        if (strcmp(sets[index].name, name) == 0) {
            return &sets[index];
        }
    }
    return NULL;
}

/* ---- The installed selection ---- */

static pthread_mutex_t selection_lock = PTHREAD_MUTEX_INITIALIZER;
static bool selection_installed;
static bool selection_has_regex;
static regex_t selection_regex;
static uint64_t selection_launch;
static uint64_t selection_every;
static uint64_t selection_matches_seen;
static bool selection_spans_only;    /* --range: no launch is replayed on its own */
static bool selection_triggers_only; /* only triggered launches (replay_trigger.c) */
static char selection_metric_storage[2048];
static const char *selection_metric_names[REPLAY_RECORD_METRIC_MAX];
static size_t selection_metric_count;
static const replay_metric_collector *_Atomic metric_collector;

void replay_set_metric_collector(const replay_metric_collector *collector)
{
    atomic_store(&metric_collector, collector);
}

void replay_set_metric_collector_default(const replay_metric_collector *collector)
{
    const replay_metric_collector *expected = NULL;
    atomic_compare_exchange_strong(&metric_collector, &expected, collector);
}

void replay_session_begin(void)
{
    char error[512] = "";
    if (replay_selection_from_environment(error, sizeof error) != FLARE_OK) {
        core_log(CORE_LOG_ERROR, "replay: %s; no launch will be replayed", error);
        core_capability_set("replay", 1, CORE_CAPABILITY_UNAVAILABLE, "%s", error);
        return;
    }
    if (!replay_configured()) {
        return;
    }
    const replay_device_ops *ops = replay_device_operations();
    const replay_metric_collector *collector = replay_metric_collector_current();
    core_capability_set("replay", 1,
                        ops != NULL ? CORE_CAPABILITY_ACTIVE : CORE_CAPABILITY_UNAVAILABLE,
                        "device %s, metric collector %s", ops != NULL ? ops->name : "none",
                        collector != NULL ? collector->name : "none");
}

const replay_metric_collector *replay_metric_collector_current(void)
{
    const replay_metric_collector *pm = replay_method_collector();
    return pm != NULL ? pm : atomic_load(&metric_collector);
}

/* Splits a comma list into storage/names; 0 or -1 with error. */
static int split_metrics(const char *list, char *storage, size_t storage_size, const char **names,
                         size_t *count, char *error, size_t error_size)
{
    if (strlen(list) >= storage_size) {
        snprintf(error, error_size, "metric list longer than %zu characters", storage_size - 1);
        return -1;
    }
    snprintf(storage, storage_size, "%s", list);
    *count = 0;
    char *cursor = storage;
    while (cursor != NULL) {
        char *comma = strchr(cursor, ',');
        if (comma != NULL) {
            *comma = '\0';
        }
        if (cursor[0] == '\0') {
            snprintf(error, error_size, "empty metric name in \"%s\"", list);
            return -1;
        }
        if (strlen(cursor) >= REPLAY_METRIC_NAME_MAX) {
            snprintf(error, error_size, "metric name \"%.40s...\" longer than %d characters",
                     cursor, REPLAY_METRIC_NAME_MAX - 1);
            return -1;
        }
        for (const char *character = cursor; *character != '\0'; character++) {
            if (!((*character >= 'a' && *character <= 'z') ||
                  (*character >= 'A' && *character <= 'Z') ||
                  (*character >= '0' && *character <= '9') || *character == '_' ||
                  *character == '.')) {
                snprintf(error, error_size,
                         "metric name \"%s\" has '%c'; names use letters, digits, '_' and '.'",
                         cursor, *character);
                return -1;
            }
        }
        if (*count == REPLAY_RECORD_METRIC_MAX) {
            snprintf(error, error_size, "more than %d metrics", REPLAY_RECORD_METRIC_MAX);
            return -1;
        }
        names[(*count)++] = cursor;
        cursor = comma != NULL ? comma + 1 : NULL;
    }
    return 0;
}

/* The last character of the bracket expression that opens at p ("[...]",
 * classes such as "[:alpha:]" inside), or the last character of the text
 * when it is never closed. */
static const char *regex_bracket_end(const char *p)
{
    const char *start = p++;
    if (*p == '^') {
        p++;
    }
    if (*p == ']') {
        p++;
    }
    while (*p != '\0' && *p != ']') {
        if (*p == '[' && (p[1] == ':' || p[1] == '.' || p[1] == '=')) {
            char kind = p[1];
            p += 2;
            while (*p != '\0' && !(p[0] == kind && p[1] == ']')) {
                p++;
            }
            if (*p == '\0') {
                break;
            }
            p += 2;
            continue;
        }
        p++;
    }
    if (*p == ']') {
        return p;
    }
    return p > start ? p - 1 : start;
}

/* An interval "{m}", "{m,}", "{m,n}" or "{,n}" at p: how many copies it makes (at
 * least 1) in *copies, its m in *low, and its last character in *end. 0
 * when p does not start one (regcomp then takes '{' as it will). */
static int regex_interval(const char *p, uint64_t *copies, uint64_t *low_out, const char **end)
{
    uint64_t low = 0, high = 0;
    int low_digits = 0, comma = 0, high_digits = 0;
    for (p++; *p >= '0' && *p <= '9'; p++, low_digits++) {
        low = low < 1000000 ? low * 10 + (uint64_t)(*p - '0') : low;
    }
    if (*p == ',') {
        comma = 1;
        for (p++; *p >= '0' && *p <= '9'; p++, high_digits++) {
            high = high < 1000000 ? high * 10 + (uint64_t)(*p - '0') : high;
        }
    }
    /* glibc reads "{,n}" as "{0,n}" (and "{,}" as "*"). */
    if ((low_digits == 0 && !comma) || *p != '}') {
        return 0;
    }
    uint64_t count = high_digits > 0 ? high : comma ? low + 1 : low;
    *copies = count > 0 ? count : 1;
    *low_out = low;
    *end = p;
    return 1;
}

/* a + b, saturating just past REPLAY_REGEX_COST_MAX. */
static uint64_t regex_cost_add(uint64_t a, uint64_t b)
{
    return a + b > REPLAY_REGEX_COST_MAX + 1ull ? REPLAY_REGEX_COST_MAX + 1ull : a + b;
}

/* One open group while replay_regex_check walks a pattern (the pattern
 * itself is the outermost). */
typedef struct regex_frame {
    uint64_t total;   /* nodes of its branches so far */
    uint64_t last;    /* nodes of its last atom, repetitions included */
    int has_last;     /* the current branch has an atom */
    int last_empty;   /* that atom, as repeated so far, can match nothing */
    int before_empty; /* the branch before that atom can match nothing */
    int any_empty;    /* a finished branch can match nothing */
    int last_anchor;  /* that atom holds an anchor or a word edge */
    int any_anchor;   /* the frame holds one */
} regex_frame;

static void regex_frame_open(regex_frame *frame)
{
    memset(frame, 0, sizeof *frame);
    frame->before_empty = 1;
}

/* Whether the frame's current branch can match nothing (an empty one can). */
static int regex_branch_empty(const regex_frame *frame)
{
    return frame->has_last ? frame->before_empty && frame->last_empty : 1;
}

/* A new atom of nodes nodes, which can match nothing when empty is set and
 * holds an anchor or a word edge when anchor is. */
static void regex_frame_atom(regex_frame *frame, uint64_t nodes, int empty, int anchor)
{
    frame->before_empty = regex_branch_empty(frame);
    frame->has_last = 1;
    frame->last_empty = empty;
    frame->last_anchor = anchor;
    frame->any_anchor = frame->any_anchor || anchor;
    frame->total = regex_cost_add(frame->total, nodes);
    frame->last = nodes;
}

/* The last atom copied copies times (it is there once already). */
static void regex_frame_copy(regex_frame *frame, uint64_t copies)
{
    uint64_t copied = frame->last > (REPLAY_REGEX_COST_MAX + 1ull) / copies
                          ? REPLAY_REGEX_COST_MAX + 1ull
                          : frame->last * copies;
    frame->total = regex_cost_add(frame->total, copied - frame->last);
    frame->last = copied;
}

/* Zero-width escapes of glibc's extended syntax: word edges and buffer ends. */
static int regex_escape_empty(char c)
{
    return c != '\0' && strchr("bB<>`'", c) != NULL;
}

/* Refuses the repetition at p: what it repeats, then what to do instead. */
static int regex_refuse_repetition(const char *pattern, const char *p, const char *what,
                                   const char *instead, char *error, size_t error_size)
{
    snprintf(error, error_size, "kernel regex \"%s\" repeats %s ('%c' at character %zu%s", pattern,
             what, *p, (size_t)(p - pattern) + 1, instead);
    return FLARE_ERR_INVALID_ARGUMENT;
}

#define REGEX_ANCHOR "an anchor or a word edge"
#define REGEX_ANCHOR_INSTEAD                                                                       \
    " applies to '^', '$' or '\\<'...): glibc's regcomp can take seconds on that and it "          \
    "matches in one place only; move the anchor out of the repetition"
#define REGEX_EMPTY "what can match nothing"
#define REGEX_EMPTY_INSTEAD                                                                        \
    "): glibc's regcomp can take minutes on that; repeat what matches something (\"a*\" or "       \
    "\"a{0,3}\", not \"(a?)+\" or \"(a?){3}\")"

int replay_regex_check(const char *pattern, char *error, size_t error_size)
{
    /* The pattern is shorter than the selection's 256 bytes, so it cannot
     * nest deeper; a longer one only adds up its deepest groups at the top. */
    enum { FRAMES = 256 };
    regex_frame frames[FRAMES];
    size_t depth = 0;
    regex_frame_open(&frames[0]);
    for (const char *p = pattern; *p != '\0'; p++) {
        regex_frame *frame = &frames[depth];
        uint64_t copies = 0, low = 0;
        const char *end = NULL;
        if (*p == '(' && depth + 1 < FRAMES) {
            regex_frame_open(&frames[++depth]);
        } else if (*p == ')' && depth > 0) {
            int empty = frame->any_empty || regex_branch_empty(frame);
            uint64_t nodes = regex_cost_add(frame->total, 1);
            regex_frame_atom(&frames[depth - 1], nodes, empty, frame->any_anchor);
            depth--;
        } else if (*p == '|') {
            frame->any_empty = frame->any_empty || regex_branch_empty(frame);
            frame->total = regex_cost_add(frame->total, 1);
            frame->has_last = 0;
            frame->before_empty = 1;
            frame->last = 0;
        } else if (frame->has_last && frame->last_anchor &&
                   (*p == '*' || *p == '?' || *p == '+' ||
                    (*p == '{' && regex_interval(p, &copies, &low, &end)))) {
            return regex_refuse_repetition(pattern, p, REGEX_ANCHOR, REGEX_ANCHOR_INSTEAD, error,
                                           error_size);
        } else if (frame->has_last && frame->last_empty &&
                   (*p == '*' || *p == '?' || *p == '+' ||
                    (*p == '{' && regex_interval(p, &copies, &low, &end)))) {
            return regex_refuse_repetition(pattern, p, REGEX_EMPTY, REGEX_EMPTY_INSTEAD, error,
                                           error_size);
        } else if (*p == '*' || *p == '?') {
            /* One node around the last atom; a later repetition copies it too. */
            frame->total = regex_cost_add(frame->total, 1);
            frame->last = regex_cost_add(frame->last, 1);
            frame->last_empty = 1;
        } else if (*p == '+' || (*p == '{' && regex_interval(p, &copies, &low, &end))) {
            if (*p == '+') {
                copies = 2;
            } else {
                p = end;
                frame->last_empty = frame->last_empty || low == 0;
            }
            regex_frame_copy(frame, copies);
        } else if (*p == '\\') {
            int empty = regex_escape_empty(p[1]);
            p += p[1] != '\0';
            regex_frame_atom(frame, 1, empty, empty);
        } else if (*p == '[') {
            p = regex_bracket_end(p);
            regex_frame_atom(frame, 1, 0, 0);
        } else {
            int anchor = *p == '^' || *p == '$';
            regex_frame_atom(frame, 1, anchor, anchor);
        }
    }
    /* Groups never closed count where they stand. */
    for (; depth > 0; depth--) {
        frames[depth - 1].total =
            regex_cost_add(frames[depth - 1].total, regex_cost_add(frames[depth].total, 1));
    }
    if (frames[0].total > REPLAY_REGEX_COST_MAX) {
        snprintf(error, error_size,
                 "kernel regex \"%s\" repeats too much to compile: its repetitions ('+', '*', "
                 "'{n}') stacked or nested multiply past %d nodes; write it with fewer",
                 pattern, REPLAY_REGEX_COST_MAX);
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    return 0;
}

int replay_selection_apply(const replay_selection *selection, char *error, size_t error_size)
{
    if (selection == NULL) {
        snprintf(error, error_size, "no selection");
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    if (selection->launch != 0 && selection->every != 0) {
        snprintf(error, error_size, "--launch and --every exclude each other");
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    if (selection->metrics[0] != '\0' && selection->set_name[0] != '\0') {
        snprintf(error, error_size, "--metrics and --set exclude each other");
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    const char *list = selection->metrics;
    if (selection->set_name[0] != '\0') {
        const replay_metric_set *set = replay_metric_set_find(selection->set_name);
        if (set == NULL) {
            size_t count = 0;
            const replay_metric_set *sets = replay_metric_sets(&count);
            int written = snprintf(error, error_size,
                                   "unknown metric set \"%s\"; sets:", selection->set_name);
            for (size_t index = 0; index < count && written >= 0 && (size_t)written < error_size;
                 index++) {
                written += snprintf(error + written, error_size - (size_t)written, " %s",
                                    sets[index].name);
            }
            return FLARE_ERR_INVALID_ARGUMENT;
        }
        list = set->metrics;
    }
    if (list[0] == '\0') {
        list = replay_metric_set_find(selection->method == REPLAY_METHOD_PM ? "overview"
                                                                            : "speed-of-light")
                   ->metrics;
    }
    char storage[sizeof selection_metric_storage];
    const char *names[REPLAY_RECORD_METRIC_MAX];
    size_t count = 0;
    if (split_metrics(list, storage, sizeof storage, names, &count, error, error_size) != 0) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    if ((selection->range_name[0] != '\0' || selection->api_spans_only) &&
        (selection->kernel_regex[0] != '\0' || selection->launch != 0 || selection->every != 0)) {
        snprintf(error, error_size,
                 "--range and --range-api replay whole spans; they exclude --kernel, --launch "
                 "and --every");
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    if (selection->occurrence != 0 && selection->range_name[0] == '\0') {
        snprintf(error, error_size, "--occurrence needs --range");
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    if (replay_method_check(selection, error, error_size) != 0) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    regex_t compiled;
    bool has_regex = selection->kernel_regex[0] != '\0';
    if (has_regex && replay_regex_check(selection->kernel_regex, error, error_size) != FLARE_OK) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    if (has_regex) {
        int status = regcomp(&compiled, selection->kernel_regex, REG_EXTENDED | REG_NOSUB);
        if (status != 0) {
            char message[128];
            regerror(status, &compiled, message, sizeof message);
            snprintf(error, error_size, "bad kernel regex \"%s\": %s", selection->kernel_regex,
                     message);
            return FLARE_ERR_INVALID_ARGUMENT;
        }
    }

    pthread_mutex_lock(&selection_lock);
    if (selection_has_regex) {
        regfree(&selection_regex);
    }
    selection_has_regex = has_regex;
    if (has_regex) {
        selection_regex = compiled;
    }
    selection_launch = selection->launch;
    selection_every = selection->every;
    selection_spans_only = selection->range_name[0] != '\0' || selection->api_spans_only;
    selection_triggers_only = selection->triggers_only != 0;
    replay_range_select_range(selection->range_name, selection->occurrence);
    replay_method_install(selection);
    selection_matches_seen = 0;
    memcpy(selection_metric_storage, storage, sizeof storage);
    for (size_t index = 0; index < count; index++) {
        selection_metric_names[index] = selection_metric_storage + (names[index] - storage);
    }
    selection_metric_count = count;
    bool newly_installed = !selection_installed;
    selection_installed = true;
    pthread_mutex_unlock(&selection_lock);
    if (newly_installed) {
        replay_notify_configured();
        atomic_fetch_add(&replay_configured_count, 1);
    }
    return FLARE_OK;
}

bool replay_selection_installed(void)
{
    pthread_mutex_lock(&selection_lock);
    bool installed = selection_installed;
    pthread_mutex_unlock(&selection_lock);
    return installed;
}

bool replay_selection_matches(const char *kernel_name, uint64_t *trigger_id)
{
    /* A triggered replay first: it wants this one launch whatever the
     * selection says, and does not count as one of its matches. */
    *trigger_id = replay_trigger_take(kernel_name);
    if (*trigger_id != 0)
        return true;
    pthread_mutex_lock(&selection_lock);
    bool wanted = false;
    if (selection_installed && !selection_spans_only && !selection_triggers_only &&
        (!selection_has_regex || regexec(&selection_regex, kernel_name, 0, NULL, 0) == 0)) {
        uint64_t ordinal = ++selection_matches_seen;
        if (selection_launch != 0) {
            wanted = ordinal == selection_launch;
        } else if (selection_every != 0) {
            wanted = ordinal % selection_every == 0;
        } else {
            wanted = true;
        }
    }
    pthread_mutex_unlock(&selection_lock);
    return wanted;
}

size_t replay_selection_metrics(const char *const **names)
{
    *names = selection_metric_names;
    return selection_metric_count;
}

/* Parses a positive count; 0 or -1 with error. */
static int parse_count(const char *variable, const char *text, uint64_t *out, char *error,
                       size_t error_size)
{
    char *end = NULL;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (text[0] < '0' || text[0] > '9' || errno != 0 || *end != '\0' || value == 0) {
        snprintf(error, error_size, "%s=\"%s\": expected a whole number of at least 1", variable,
                 text);
        return -1;
    }
    *out = value;
    return 0;
}

/* Parses a byte size with unit (B, KiB, MiB, GiB, TiB); 0 or -1 with
 * error. */
static int parse_scaled(const char *variable, const char *text, const char *const *units,
                        const uint64_t *scales, size_t unit_count, uint64_t *out, char *error,
                        size_t error_size)
{
    char *end = NULL;
    errno = 0;
    /* Plain decimal only: strtod would also take spaces, hex and "inf". */
    bool decimal =
        ((text[0] >= '0' && text[0] <= '9') || text[0] == '.') && strpbrk(text, "xX") == NULL;
    double value = decimal ? strtod(text, &end) : 0;
    if (!decimal || end == text || errno != 0 || !(value > 0)) {
        snprintf(error, error_size, "%s=\"%s\": expected a positive number with a unit", variable,
                 text);
        return -1;
    }
    for (size_t index = 0; index < unit_count; index++) {
        if (strcmp(end, units[index]) == 0) {
            double scaled = value * (double)scales[index];
            if (scaled < 1) {
                snprintf(error, error_size, "%s=\"%s\": rounds to zero", variable, text);
                return -1;
            }
            if (scaled >= 1.8e19) {
                snprintf(error, error_size, "%s=\"%s\": too large", variable, text);
                return -1;
            }
            *out = (uint64_t)scaled;
            return 0;
        }
    }
    int written =
        snprintf(error, error_size, "%s=\"%s\": unknown unit \"%s\"; units:", variable, text, end);
    for (size_t index = 0; index < unit_count && written >= 0 && (size_t)written < error_size;
         index++) {
        written += snprintf(error + written, error_size - (size_t)written, " %s", units[index]);
    }
    return -1;
}

/* A FLARE_REPLAY_*_TIMEOUT value through the duration parser, from 1 ns
 * up; 0, or -1 with error as VARIABLE="TEXT": why. */
static int parse_timeout(const char *variable, const char *text, uint64_t *out_ns, char *error,
                         size_t error_size)
{
    char why[192];
    if (core_duration_parse(text, strlen(text), 1, UINT64_MAX, out_ns, why, sizeof why) ==
        FLARE_OK) {
        return 0;
    }
    snprintf(error, error_size, "%s=\"%s\": %s", variable, text, why);
    return -1;
}

int replay_parse_bytes(const char *variable, const char *text, uint64_t *out_bytes, char *error,
                       size_t error_size)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    static const uint64_t scales[] = {1ull, 1ull << 10, 1ull << 20, 1ull << 30, 1ull << 40};
    return parse_scaled(variable, text, units, scales, 5, out_bytes, error, error_size);
}

/* A 0/1 switch variable: unset leaves *out as it is; anything but "0" or
 * "1" is refused naming the variable. */
static int parse_switch(const char *variable, const char *value, bool *out, char *error,
                        size_t error_size)
{
    if (value == NULL) {
        return 0;
    }
    if (strcmp(value, "1") != 0 && strcmp(value, "0") != 0) {
        snprintf(error, error_size, "%s=\"%s\": expected 0 or 1", variable, value);
        return -1;
    }
    *out = strcmp(value, "1") == 0;
    return 0;
}

int replay_selection_from_environment(char *error, size_t error_size)
{
    const char *kernel = getenv("FLARE_REPLAY_KERNEL");
    const char *launch = getenv("FLARE_REPLAY_LAUNCH");
    const char *every = getenv("FLARE_REPLAY_EVERY");
    const char *metrics = getenv("FLARE_REPLAY_METRICS");
    const char *set = getenv("FLARE_REPLAY_SET");
    const char *drain = getenv("FLARE_REPLAY_DRAIN_TIMEOUT");
    const char *pass = getenv("FLARE_REPLAY_PASS_TIMEOUT");
    const char *budget = getenv("FLARE_REPLAY_FOOTPRINT_BUDGET");
    const char *host_only = getenv("FLARE_REPLAY_HOST_SHADOW");
    const char *availability = getenv("FLARE_REPLAY_COUNTER_AVAILABILITY");
    const char *serial_devices = getenv("FLARE_REPLAY_SERIAL_DEVICES");
    const char *range = getenv("FLARE_REPLAY_RANGE");
    const char *occurrence = getenv("FLARE_REPLAY_OCCURRENCE");
    const char *api_spans = getenv("FLARE_REPLAY_RANGE_API");

    replay_settings settings;
    replay_settings_default(&settings);
    if ((drain != NULL && parse_timeout("FLARE_REPLAY_DRAIN_TIMEOUT", drain,
                                        &settings.drain_timeout_ns, error, error_size) != 0) ||
        (pass != NULL && parse_timeout("FLARE_REPLAY_PASS_TIMEOUT", pass, &settings.pass_timeout_ns,
                                       error, error_size) != 0) ||
        (budget != NULL &&
         replay_parse_bytes("FLARE_REPLAY_FOOTPRINT_BUDGET", budget, &settings.footprint_budget,
                            error, error_size) != 0)) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    bool host_shadow_only = false;
    if (parse_switch("FLARE_REPLAY_HOST_SHADOW", host_only, &host_shadow_only, error, error_size) !=
            0 ||
        parse_switch("FLARE_REPLAY_COUNTER_AVAILABILITY", availability,
                     &settings.counter_availability, error, error_size) != 0 ||
        parse_switch("FLARE_REPLAY_SERIAL_DEVICES", serial_devices, &settings.serial_devices, error,
                     error_size) != 0) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    settings.allow_device_shadow = !host_shadow_only;
    replay_selection selection;
    memset(&selection, 0, sizeof selection);
    bool method_set = false;
    if (replay_method_from_environment(&selection, &method_set, error, error_size) != 0) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    /* The method's variables are checked above but choose nothing alone. */
    (void)method_set;
    if (kernel == NULL && launch == NULL && every == NULL && metrics == NULL && set == NULL &&
        range == NULL && occurrence == NULL && api_spans == NULL) {
        replay_settings_apply(&settings);
        return FLARE_OK;
    }
    if (kernel != NULL) {
        if (strlen(kernel) >= sizeof selection.kernel_regex) {
            snprintf(error, error_size, "FLARE_REPLAY_KERNEL longer than %zu characters",
                     sizeof selection.kernel_regex - 1);
            return FLARE_ERR_INVALID_ARGUMENT;
        }
        snprintf(selection.kernel_regex, sizeof selection.kernel_regex, "%s", kernel);
    }
    if ((launch != NULL &&
         parse_count("FLARE_REPLAY_LAUNCH", launch, &selection.launch, error, error_size) != 0) ||
        (every != NULL &&
         parse_count("FLARE_REPLAY_EVERY", every, &selection.every, error, error_size) != 0)) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    if (range != NULL) {
        if (range[0] == '\0' || strlen(range) >= sizeof selection.range_name) {
            snprintf(error, error_size, "FLARE_REPLAY_RANGE must be 1 to %zu characters",
                     sizeof selection.range_name - 1);
            return FLARE_ERR_INVALID_ARGUMENT;
        }
        snprintf(selection.range_name, sizeof selection.range_name, "%s", range);
    }
    if (api_spans != NULL) {
        if (strcmp(api_spans, "1") != 0) {
            snprintf(error, error_size, "FLARE_REPLAY_RANGE_API=\"%s\": expected 1", api_spans);
            return FLARE_ERR_INVALID_ARGUMENT;
        }
        selection.api_spans_only = 1;
    }
    if (occurrence != NULL && parse_count("FLARE_REPLAY_OCCURRENCE", occurrence,
                                          &selection.occurrence, error, error_size) != 0) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    if (metrics != NULL) {
        if (strlen(metrics) >= sizeof selection.metrics) {
            snprintf(error, error_size, "FLARE_REPLAY_METRICS longer than %zu characters",
                     sizeof selection.metrics - 1);
            return FLARE_ERR_INVALID_ARGUMENT;
        }
        snprintf(selection.metrics, sizeof selection.metrics, "%s", metrics);
    }
    if (set != NULL) {
        if (strlen(set) >= sizeof selection.set_name) {
            snprintf(error, error_size, "FLARE_REPLAY_SET longer than %zu characters",
                     sizeof selection.set_name - 1);
            return FLARE_ERR_INVALID_ARGUMENT;
        }
        snprintf(selection.set_name, sizeof selection.set_name, "%s", set);
    }
    int status = replay_selection_apply(&selection, error, error_size);
    if (status == FLARE_OK) {
        replay_settings_apply(&settings);
    }
    return status;
}

/* ---- Launch indexes per kernel name ---- */

#define LAUNCH_INDEX_SLOTS 1024
typedef struct launch_index_slot {
    uint64_t hash;
    uint64_t count;
} launch_index_slot;
static launch_index_slot launch_index_slots[LAUNCH_INDEX_SLOTS];

static uint64_t name_hash(const char *name)
{
    uint64_t hash = 1469598103934665603ull; /* FNV-1a */
    for (const unsigned char *character = (const unsigned char *)name; *character != '\0';
         character++) {
        hash = (hash ^ *character) * 1099511628211ull;
    }
    return hash != 0 ? hash : 1;
}

uint64_t replay_next_launch_index(const char *kernel_name)
{
    uint64_t hash = name_hash(kernel_name);
    uint64_t result = 0;
    pthread_mutex_lock(&selection_lock);
    for (size_t probe = 0; probe < LAUNCH_INDEX_SLOTS; probe++) {
        launch_index_slot *slot = &launch_index_slots[(hash + probe) % LAUNCH_INDEX_SLOTS];
        if (slot->hash == hash || slot->hash == 0) {
            slot->hash = hash;
            result = slot->count++;
            break;
        }
    }
    /* A full table (over 1024 distinct kernels) answers 0: the index is
     * informational and never decides anything. */
    pthread_mutex_unlock(&selection_lock);
    return result;
}

void replay_selection_reset_for_tests(void)
{
    pthread_mutex_lock(&selection_lock);
    if (selection_has_regex) {
        regfree(&selection_regex);
    }
    selection_has_regex = false;
    if (selection_installed) {
        selection_installed = false;
        atomic_fetch_sub(&replay_configured_count, 1);
    }
    selection_launch = selection_every = selection_matches_seen = 0;
    selection_spans_only = false;
    selection_triggers_only = false;
    selection_metric_count = 0;
    memset(launch_index_slots, 0, sizeof launch_index_slots);
    replay_selection plain = {0};
    replay_method_install(&plain);
    pthread_mutex_unlock(&selection_lock);
    atomic_store(&metric_collector, NULL);
    replay_set_pm_collector(NULL);
}
