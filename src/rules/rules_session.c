/*
 * rules_session.c: FLARE_DEEP_WHEN rules evaluated on the collector's beat
 * (rules_session.h, docs/rules.md "How rules are evaluated").
 *
 * Each rule owns its source, sized by its own over, bucket and stale_after:
 * a launch rate fed with the process's cumulative launch count at each beat,
 * a window of completed-kernel durations, an NVML gauge of one device, or the
 * rate of an application counter found with flare_counter_find (never
 * created: a counter that was never registered reads as missing). The state
 * machine is the pure evaluator; this file only feeds it and talks to the
 * window coordinator, or, for a rule whose action is `replay`, to the
 * triggered replays (replay_trigger.c): the kernel that made the reading is
 * chosen here (a duration rule's kernel furthest past the threshold in its
 * over; otherwise the kernel with the most GPU time in the rule's
 * over), its next launch is armed (for `action range NAME`, the range's next
 * occurrence), and the trigger's state stands in for
 * the window's (armed: queued; replaying: open; recorded: closed). A
 * trigger not taken within deep_for is cancelled, costing nothing.
 */
#include "rules/rules_session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "flare/flare.h"
#include "rules/evaluator.h"
#include "rules/readings.h"
#include "rules/rule.h"
#include "deepwin/deepwin.h"
#include "deepwin/deepwin_session.h"
#include "core/duration.h"
#include "replay/replay.h"
#include "rules/kernel_time.h"
#include "store/store_triggered.h"

/* triggered_replays rows one process writes at most; later ones are
 * counted in drops (source triggered_replays). A rule fires at most once
 * per deep_for + cooldown, so only hours of cancelled replays reach it. */
#define TRIGGERED_ROWS_MAX 1024

typedef struct rule_source {
    int ready; /* the source was set up */
    rules_rate launches;
    rules_percentiles durations;
    int have_durations;
    rules_gauge gauge;
    rules_counter_rate counter;
    int have_counter;   /* the counter was found and its rate set up */
    uint64_t window_id; /* its outstanding request; 0: none */
    int seen_open;      /* that window was seen open */
    int turned_down;    /* its last request was turned down (told at the next step) */
    /* Percentiles sort their window; the result is kept for the rest of the
     * bucket it was computed in (see read_source). */
    int percentile_cached;
    uint64_t percentile_bucket;
    rules_reading percentile_reading;
    /* action replay: the duration rule's longest kernel over the threshold
     * in its over (its duration and end), the outstanding trigger, and news
     * for the next step. */
    char crossing[RULES_KERNEL_NAME_MAX];
    uint64_t crossing_ns, crossing_end_ns;
    uint64_t trigger_id;
    int trigger_cancelled; /* nothing to replay, or not launched in time */
    /* The outstanding trigger's firing, for its triggered_replays row. */
    uint64_t fired_ns;
    double fired_value;
    char target[REPLAY_TRIGGER_NAME_MAX];
    char why[192];
    int replay_ended;       /* no more replays: budget spent, or one cannot be armed */
    char ended_reason[160]; /* why (the rule ends saying so) */
} rule_source;

/* Collector-thread state of the current session. */
static rules_evaluator evaluator;
static rule_source sources[RULES_EVALUATOR_MAX];
static uint64_t summary_sequence;
static uint64_t triggered_rows, triggered_dropped; /* this process's triggered_replays rows */
/* Per-kernel GPU time, when a replay rule's metric names no kernel. */
static rules_kernel_time *kernel_times;

static int is_duration(rules_metric metric)
{
    return rules_metric_unit(metric) == RULES_UNIT_DURATION; /* the kernel_duration_pNN */
}

static void free_sources(void)
{
    rules_kernel_time_free(kernel_times);
    kernel_times = NULL;
    for (size_t i = 0; i < RULES_EVALUATOR_MAX; i++) {
        if (sources[i].have_durations)
            rules_percentiles_free(&sources[i].durations);
        sources[i].have_durations = 0;
    }
}

/* Sets up rule index's source; refuses the rule when it cannot be. */
static void set_up_source(size_t index)
{
    const rules_evaluator_rule *entry = rules_evaluator_get(&evaluator, index);
    rule_source *source = &sources[index];
    memset(source, 0, sizeof(*source));
    if (entry == NULL || !entry->valid)
        return;
    const rules_rule *rule = &entry->rule;
    char reason[RULES_EVALUATOR_REASON_MAX];
    if (rule->action == RULES_ACTION_REPLAY && !is_duration(rule->metric) && kernel_times == NULL &&
        rules_kernel_time_create(&kernel_times) != FLARE_OK) {
        rules_evaluator_refuse(&evaluator, index, "out of memory for the kernels' GPU time");
        return;
    }
    switch (rule->metric) {
    case RULES_METRIC_KERNEL_LAUNCH_RATE: {
        rules_rate_config config = {.window_ns = rule->window_ns,
                                    .bucket_ns = rule->bucket_ns,
                                    .stale_after_ns = rule->stale_after_ns};
        if (rules_rate_init(&source->launches, &config) != FLARE_OK) {
            snprintf(reason, sizeof(reason),
                     "a rate reading holds at most %d buckets: use a wider bucket or a "
                     "shorter over",
                     RULES_RATE_BUCKETS_MAX);
            rules_evaluator_refuse(&evaluator, index, reason);
            return;
        }
        rules_rate_add_cumulative(&source->launches, entry->start_ns, deepwin_session_launches());
        break;
    }
    case RULES_METRIC_KERNEL_DURATION_P50:
    case RULES_METRIC_KERNEL_DURATION_P90:
    case RULES_METRIC_KERNEL_DURATION_P99: {
        rules_percentile_config config = {
            .window_ns = rule->window_ns, .capacity = 0, .stale_after_ns = rule->stale_after_ns};
        if (rules_percentiles_init(&source->durations, &config) != FLARE_OK) {
            rules_evaluator_refuse(&evaluator, index,
                                   "out of memory for the kernel duration window");
            return;
        }
        source->have_durations = 1;
        break;
    }
    case RULES_METRIC_GPU_UTILIZATION:
    case RULES_METRIC_GPU_POWER:
    case RULES_METRIC_GPU_SM_CLOCK:
    case RULES_METRIC_GPU_MEMORY_USED:
        rules_gauge_init(&source->gauge, rule->stale_after_ns);
        break;
    case RULES_METRIC_CUSTOM_RATE:
        if (rule->bucket_ns != 0 && rule->window_ns / rule->bucket_ns > RULES_RATE_BUCKETS_MAX) {
            snprintf(reason, sizeof(reason),
                     "a rate reading holds at most %d buckets: use a wider bucket or a "
                     "shorter over",
                     RULES_RATE_BUCKETS_MAX);
            rules_evaluator_refuse(&evaluator, index, reason);
            return;
        }
        break; /* found at the beats, once registered */
    default:
        rules_evaluator_refuse(&evaluator, index, "unknown metric");
        return;
    }
    source->ready = 1;
}

void rules_session_begin(uint64_t start_ns)
{
    free_sources();
    rules_evaluator_init(&evaluator);
    summary_sequence = 0;
    triggered_rows = triggered_dropped = 0;
    const char *text = getenv("FLARE_DEEP_WHEN");
    if (text == NULL || text[0] == '\0')
        return;
    static rules_list_entry entries[RULES_LIST_MAX];
    size_t count = 0;
    int status = rules_parse_list(text, entries, RULES_LIST_MAX, &count);
    if (status == FLARE_ERR_INVALID_ARGUMENT)
        return;
    if (status == FLARE_ERR_FULL)
        core_log(CORE_LOG_WARNING,
                 "FLARE_DEEP_WHEN holds %zu rules; only the first %d are evaluated", count,
                 RULES_LIST_MAX);
    if (count > RULES_LIST_MAX)
        count = RULES_LIST_MAX;
    for (size_t i = 0; i < count; i++) {
        const rules_list_entry *entry = &entries[i];
        char rule_text[RULES_TEXT_MAX + 1];
        size_t length = entry->length < RULES_TEXT_MAX ? entry->length : RULES_TEXT_MAX;
        memcpy(rule_text, text + entry->offset, length);
        rule_text[length] = '\0';
        size_t index = 0;
        if (rules_evaluator_add(&evaluator, entry->status == FLARE_OK ? &entry->rule : NULL,
                                rule_text, entry->error, start_ns, &index) != FLARE_OK)
            break;
        const rules_evaluator_rule *added = rules_evaluator_get(&evaluator, index);
        if (added->state == RULES_EVAL_REFUSED)
            core_log(CORE_LOG_WARNING, "deep-profiling rule %zu refused: %s", index + 1,
                     added->reason);
        else
            core_log(CORE_LOG_INFO, "deep-profiling rule %zu: %s", index + 1, added->canonical);
        set_up_source(index);
    }
}

void rules_session_kernel(const char *name, uint64_t end_ns, uint64_t duration_ns)
{
    for (size_t i = 0; i < evaluator.count; i++) {
        if (!sources[i].have_durations)
            continue;
        rules_percentiles_add(&sources[i].durations, end_ns, duration_ns);
        const rules_rule *rule = &evaluator.rules[i].rule;
        rule_source *source = &sources[i];
        if (rule->action != RULES_ACTION_REPLAY || name == NULL ||
            !rules_evaluator_holds(rule, (double)duration_ns))
            continue;
        /* The one furthest past the threshold in the rule's over (the
         * longest for > and >=, the shortest for < and <=); an older one has
         * left the window the reading is about. */
        int below = rule->comparison == RULES_LESS || rule->comparison == RULES_LESS_EQUAL;
        int further =
            below ? duration_ns <= source->crossing_ns : duration_ns >= source->crossing_ns;
        if (source->crossing[0] == '\0' || further ||
            source->crossing_end_ns + rule->window_ns < end_ns) {
            snprintf(source->crossing, sizeof(source->crossing), "%s", name);
            source->crossing_ns = duration_ns;
            source->crossing_end_ns = end_ns;
        }
    }
    if (kernel_times != NULL)
        rules_kernel_time_add(kernel_times, name, end_ns, duration_ns);
}

static rules_metric metric_of(const char *name)
{
    if (strcmp(name, "gpu_utilization_pct") == 0)
        return RULES_METRIC_GPU_UTILIZATION;
    if (strcmp(name, "power_mw") == 0)
        return RULES_METRIC_GPU_POWER;
    if (strcmp(name, "sm_clock_mhz") == 0)
        return RULES_METRIC_GPU_SM_CLOCK;
    if (strcmp(name, "memory_used_bytes") == 0)
        return RULES_METRIC_GPU_MEMORY_USED;
    return RULES_METRIC_COUNT;
}

void rules_session_metric(int device, const char *name, uint64_t time_ns, int64_t value)
{
    if (evaluator.count == 0 || name == NULL || device < 0)
        return;
    rules_metric metric = metric_of(name);
    if (metric == RULES_METRIC_COUNT)
        return;
    for (size_t i = 0; i < evaluator.count; i++) {
        const rules_evaluator_rule *entry = &evaluator.rules[i];
        if (sources[i].ready && entry->rule.metric == metric &&
            entry->rule.device == (uint32_t)device)
            rules_gauge_set(&sources[i].gauge, time_ns, (double)value);
    }
}

/* Polls and reads rule index's source at now_ns. Returns 0 when there is no
 * reading at all (a custom counter that was never registered). */
static int read_source(size_t index, uint64_t now_ns, rules_reading *reading)
{
    const rules_rule *rule = &evaluator.rules[index].rule;
    rule_source *source = &sources[index];
    switch (rule->metric) {
    case RULES_METRIC_KERNEL_LAUNCH_RATE:
        rules_rate_add_cumulative(&source->launches, now_ns, deepwin_session_launches());
        rules_rate_read(&source->launches, now_ns, reading);
        return 1;
    case RULES_METRIC_KERNEL_DURATION_P50:
    case RULES_METRIC_KERNEL_DURATION_P90:
    case RULES_METRIC_KERNEL_DURATION_P99: {
        double percentile = rule->metric == RULES_METRIC_KERNEL_DURATION_P50   ? 50.0
                            : rule->metric == RULES_METRIC_KERNEL_DURATION_P90 ? 90.0
                                                                               : 99.0;
        /* A percentile sorts its window, which at a 1 kHz beat and thousands
         * of kernels per second is most of the evaluator's cost. The window
         * only moves by whole buckets, so the reading is computed once per
         * bucket and reused within it, its staleness judged anew each beat. */
        uint64_t bucket = now_ns / (rule->bucket_ns != 0 ? rule->bucket_ns : 1);
        if (!source->percentile_cached || bucket != source->percentile_bucket) {
            rules_percentiles_read(&source->durations, now_ns, &percentile, 1,
                                   &source->percentile_reading);
            source->percentile_bucket = bucket;
            source->percentile_cached = 1;
        }
        *reading = source->percentile_reading;
        reading->publish_time_ns = now_ns;
        if (!reading->missing && reading->source_time_ns != 0)
            reading->stale = now_ns - reading->source_time_ns > rule->stale_after_ns;
        return 1;
    }
    case RULES_METRIC_CUSTOM_RATE:
        if (!source->have_counter) {
            flare_counter *counter = NULL;
            if (flare_counter_find(rule->counter, &counter) != FLARE_OK || counter == NULL)
                return 0;
            rules_rate_config config = {.window_ns = rule->window_ns,
                                        .bucket_ns = rule->bucket_ns,
                                        .stale_after_ns = rule->stale_after_ns};
            if (rules_counter_rate_init(&source->counter, &config, rules_flare_counter_reader,
                                        counter) != FLARE_OK)
                return 0;
            source->have_counter = 1;
        }
        rules_counter_rate_poll(&source->counter, now_ns);
        rules_counter_rate_read(&source->counter, now_ns, reading);
        return 1;
    default:
        rules_gauge_read(&source->gauge, now_ns, reading);
        return 1;
    }
}

/* What became of rule index's outstanding request. */
static void view_of(deepwin_coordinator *coordinator, size_t index, rules_coordinator_view *view,
                    deepwin_record *record)
{
    rule_source *source = &sources[index];
    view->blackout = deepwin_blackout_active(coordinator);
    view->outcome = RULES_OUTCOME_NONE;
    if (source->turned_down) {
        view->outcome = RULES_OUTCOME_REFUSED_BUSY;
        source->turned_down = 0;
        return;
    }
    if (source->window_id == 0)
        return;
    deepwin_state state;
    if (deepwin_lookup(coordinator, source->window_id, &state, record) != FLARE_OK) {
        /* Another window finished after it: it finished too. */
        view->outcome = source->seen_open ? RULES_OUTCOME_CLOSED : RULES_OUTCOME_CANCELLED;
        source->window_id = 0;
        return;
    }
    if (state == DEEPWIN_PENDING) {
        view->outcome = RULES_OUTCOME_QUEUED;
    } else if (state == DEEPWIN_OPEN || state == DEEPWIN_CLOSING) {
        view->outcome = RULES_OUTCOME_OPENED;
        source->seen_open = 1;
    } else {
        if (record->opened_ns != 0) {
            view->outcome = RULES_OUTCOME_CLOSED;
            view->closed_ns = record->closed_ns;
        } else if (record->over_budget) {
            view->outcome = RULES_OUTCOME_OVER_BUDGET;
        } else if (strcmp(record->close_reason, DEEPWIN_CLOSE_REFUSED) == 0) {
            view->outcome = RULES_OUTCOME_REFUSED_ENGINE;
            view->reason = record->engine_reason;
        } else {
            view->outcome = RULES_OUTCOME_CANCELLED;
        }
        source->window_id = 0;
    }
}

/* The coordinator's name for a rule's `engine`. */
static deepwin_engine_kind engine_kind_of(rules_engine engine)
{
    switch (engine) {
    case RULES_ENGINE_PC:
        return DEEPWIN_ENGINE_PC;
    case RULES_ENGINE_AUTO:
        return DEEPWIN_ENGINE_AUTO;
    case RULES_ENGINE_SASS:
        return DEEPWIN_ENGINE_SASS;
    default:
        return DEEPWIN_ENGINE_PM;
    }
}

static void request_window(deepwin_coordinator *coordinator, size_t index, uint64_t now_ns)
{
    const rules_evaluator_rule *entry = rules_evaluator_get(&evaluator, index);
    const rules_rule *rule = &entry->rule;
    deepwin_token token = {.kind = DEEPWIN_TOKEN_RULE,
                           .rule_id = (uint32_t)index + 1,
                           .engine = engine_kind_of(rule->engine)};
    snprintf(token.label, sizeof(token.label), "rule %zu", index + 1);
    deepwin_bounds bounds = {.max_duration_ns = rule->deep_ns, .max_launches = rule->deep_launches};
    deepwin_cause cause;
    memset(&cause, 0, sizeof(cause));
    /* The rule's text, cut to the record's field (the rules table keeps it whole). */
    size_t length = strnlen(entry->text, sizeof(cause.rule_text) - 1);
    memcpy(cause.rule_text, entry->text, length);
    cause.rule_text[length] = '\0';
    snprintf(cause.comparison, sizeof(cause.comparison), "%s",
             rules_comparison_text(rule->comparison));
    cause.threshold = rules_evaluator_quantity_value(rule->threshold);
    cause.rate_window_ns = rule->window_ns;
    cause.sustained_ns = rule->sustained_ns;
    cause.first_true_ns = entry->last_first_true_ns;
    cause.observed_value = entry->request_value;
    cause.observed_partial = entry->request_partial;
    deepwin_request_result result;
    if (deepwin_request_open(coordinator, &token, &bounds, &cause, now_ns, &result) == FLARE_OK) {
        sources[index].window_id = result.window_id;
        sources[index].seen_open = 0;
        core_log(CORE_LOG_INFO, "deep-profiling rule %zu fired: window %llu queued", index + 1,
                 (unsigned long long)result.window_id);
        return;
    }
    /* Busy (or refused outright): costs nothing; told at the next step. */
    sources[index].turned_down = 1;
    CORE_LOG_ONCE("rules.busy", CORE_LOG_INFO, "deep-profiling rule %zu turned down: %s", index + 1,
                  result.message);
}

/* Writes rule index's triggered_replays row: status "replayed", "declined",
 * "cancelled" or "unfinished", with the trigger's outcome when it has one
 * (taken, finished) and done_ns when it ended. */
static void record_triggered(store *database, int64_t pid, size_t index, const char *status,
                             const char *reason, const replay_trigger_result *result,
                             uint64_t done_ns)
{
    const rules_evaluator_rule *entry = rules_evaluator_get(&evaluator, index);
    const rule_source *source = &sources[index];
    if (triggered_rows >= TRIGGERED_ROWS_MAX) {
        triggered_dropped++;
        char detail[64];
        snprintf(detail, sizeof(detail), "rows past %d", TRIGGERED_ROWS_MAX);
        store_set_drops(database, pid, "triggered_replays", detail, triggered_dropped);
        return;
    }
    store_triggered_row row = {
        .pid = pid,
        .id = ++triggered_rows,
        .rule_id = (uint32_t)index + 1,
        .rule_text = entry->text,
        .comparison = rules_comparison_text(entry->rule.comparison),
        .threshold = rules_evaluator_quantity_value(entry->rule.threshold),
        .observed_value = source->fired_value,
        .action = entry->rule.action == RULES_ACTION_RANGE ? "range" : "replay",
        .target = source->target,
        .why = source->why,
        .fired_ns = source->fired_ns,
        .taken_ns = result != NULL ? result->taken_ns : 0,
        .done_ns = done_ns,
        .status = status,
        .reason = reason,
        .launch_id = result != NULL && result->state == REPLAY_TRIGGER_DONE ? result->launch_id : 0,
    };
    if (store_put_triggered_replay(database, &row) != FLARE_OK)
        CORE_LOG_ONCE("rules.store_triggered", CORE_LOG_ERROR,
                      "cannot store rule %zu's triggered replay: %s", index + 1,
                      store_last_error(database));
}

/* Cancels rule index's armed trigger and records why; 0 when it had been
 * taken meanwhile (it will finish). */
static int cancel_trigger(store *database, int64_t pid, size_t index, const char *reason,
                          uint64_t now_ns)
{
    rule_source *source = &sources[index];
    if (replay_trigger_cancel(source->trigger_id) != FLARE_OK)
        return 0;
    replay_trigger_result result;
    int known = replay_trigger_status(source->trigger_id, &result) == FLARE_OK;
    record_triggered(database, pid, index, "cancelled", reason, known ? &result : NULL,
                     known && result.done_ns != 0 ? result.done_ns : now_ns);
    source->trigger_id = 0;
    return 1;
}

/* What became of rule index's triggered replay (action replay). */
static void trigger_view(store *database, int64_t pid, size_t index, uint64_t now_ns,
                         rules_coordinator_view *view)
{
    rule_source *source = &sources[index];
    const rules_rule *rule = &evaluator.rules[index].rule;
    if (source->replay_ended) {
        view->outcome = RULES_OUTCOME_BUDGET_SPENT;
        view->reason = source->ended_reason;
        return;
    }
    if (source->trigger_cancelled) {
        view->outcome = RULES_OUTCOME_CANCELLED;
        source->trigger_cancelled = 0;
        return;
    }
    replay_trigger_result result;
    if (source->trigger_id == 0 || replay_trigger_status(source->trigger_id, &result) != FLARE_OK)
        return;
    switch (result.state) {
    case REPLAY_TRIGGER_ARMED: {
        view->outcome = RULES_OUTCOME_QUEUED;
        if (now_ns <= result.armed_ns || now_ns - result.armed_ns <= rule->deep_ns)
            return;
        char reason[96], deep_for[32];
        core_duration_format(rule->deep_ns, deep_for, sizeof(deep_for));
        snprintf(reason, sizeof(reason), "%s within deep_for (%s)",
                 rule->action == RULES_ACTION_RANGE ? "the range did not begin again"
                                                    : "the kernel was not launched again",
                 deep_for);
        if (cancel_trigger(database, pid, index, reason, now_ns)) {
            core_log(CORE_LOG_INFO, "deep-profiling rule %zu: replay of %s cancelled: %s",
                     index + 1, result.kernel_name, reason);
            view->outcome = RULES_OUTCOME_CANCELLED;
        }
        return;
    }
    case REPLAY_TRIGGER_TAKEN:
        view->outcome = RULES_OUTCOME_OPENED;
        view->blackout = 1;
        return;
    case REPLAY_TRIGGER_DONE:
        view->outcome = RULES_OUTCOME_CLOSED;
        view->closed_ns = result.done_ns;
        core_log(CORE_LOG_INFO, "deep-profiling rule %zu: launch %llu of %s %s%s", index + 1,
                 (unsigned long long)result.launch_id, result.kernel_name,
                 result.declined ? "was not replayed: " : "replayed",
                 result.declined ? result.reason : "");
        record_triggered(database, pid, index, result.declined ? "declined" : "replayed",
                         result.declined ? result.reason : "", &result, result.done_ns);
        source->trigger_id = 0;
        return;
    default:
        view->outcome = RULES_OUTCOME_CANCELLED;
        record_triggered(database, pid, index, "cancelled", "cancelled while armed", &result,
                         result.done_ns != 0 ? result.done_ns : now_ns);
        source->trigger_id = 0;
        return;
    }
}

/* The kernel rule index replays, in target; 0 when there is none. */
static int replay_target(size_t index, uint64_t now_ns, char *target, size_t size, char *why,
                         size_t why_size)
{
    const rules_rule *rule = &evaluator.rules[index].rule;
    rule_source *source = &sources[index];
    if (is_duration(rule->metric)) {
        if (source->crossing[0] == '\0')
            return 0;
        snprintf(target, size, "%s", source->crossing);
        snprintf(why, why_size,
                 "its longest kernel over the threshold in the last %.1f ms: %.3f ms",
                 (double)rule->window_ns / 1e6, (double)source->crossing_ns / 1e6);
        return 1;
    }
    rules_kernel_top top;
    uint64_t from = now_ns > rule->window_ns ? now_ns - rule->window_ns : 0;
    if (kernel_times == NULL || !rules_kernel_time_top(kernel_times, from, now_ns, &top))
        return 0;
    snprintf(target, size, "%s", top.name);
    snprintf(why, why_size, "the most GPU time in the last %.1f ms: %.3f ms of %llu kernels",
             (double)(now_ns - top.covered_from_ns) / 1e6, (double)top.total_ns / 1e6,
             (unsigned long long)top.kernels);
    return 1;
}

static void request_replay(store *database, int64_t pid, size_t index, uint64_t now_ns)
{
    const rules_rule *rule = &evaluator.rules[index].rule;
    rule_source *source = &sources[index];
    source->fired_ns = now_ns;
    source->fired_value = evaluator.rules[index].request_value;
    source->target[0] = source->why[0] = '\0';
    uint64_t spent = replay_trigger_spent_ns();
    if (spent >= rule->replay_budget_ns) {
        char budget[32];
        core_duration_format(rule->replay_budget_ns, budget, sizeof(budget));
        snprintf(source->ended_reason, sizeof(source->ended_reason),
                 "replay budget %s spent (%.1f ms in triggered replays)", budget,
                 (double)spent / 1e6);
        core_log(CORE_LOG_INFO, "deep-profiling rule %zu: replay declined: %s", index + 1,
                 source->ended_reason);
        source->replay_ended = 1;
        if (rule->action == RULES_ACTION_RANGE) {
            snprintf(source->target, sizeof(source->target), "%s", rule->range_name);
            snprintf(source->why, sizeof(source->why), "the rule's range");
        } else
            replay_target(index, now_ns, source->target, sizeof(source->target), source->why,
                          sizeof(source->why));
        record_triggered(database, pid, index, "declined", source->ended_reason, NULL, now_ns);
        return;
    }
    /* One replay at a time: while another rule's trigger is held (armed,
     * replaying, or finished but not yet read by its rule at this beat),
     * this one is turned down, so no rule's outcome is overwritten unread. */
    for (size_t other = 0; other < evaluator.count; other++) {
        if (other != index && sources[other].trigger_id != 0) {
            source->turned_down = 1;
            return;
        }
    }
    char *target = source->target, *why = source->why, error[256];
    int status;
    if (rule->action == RULES_ACTION_RANGE) {
        status =
            replay_trigger_arm_range(rule->range_name, &source->trigger_id, error, sizeof(error));
        snprintf(target, sizeof(source->target), "%s", rule->range_name);
        snprintf(why, sizeof(source->why), "the rule's range");
    } else if (!replay_target(index, now_ns, target, sizeof(source->target), why,
                              sizeof(source->why))) {
        CORE_LOG_ONCE("rules.no_target", CORE_LOG_INFO,
                      "deep-profiling rule %zu fired with no kernel to replay; it rearms",
                      index + 1);
        source->trigger_cancelled = 1;
        return;
    } else {
        status = replay_trigger_arm_kernel(target, &source->trigger_id, error, sizeof(error));
    }
    if (status == FLARE_ERR_STATE) {
        sources[index].turned_down = 1; /* another replay is outstanding: costs nothing */
        return;
    }
    if (status != FLARE_OK) {
        source->trigger_id = 0;
        source->replay_ended = 1;
        snprintf(source->ended_reason, sizeof(source->ended_reason), "cannot replay: %.140s",
                 error);
        record_triggered(database, pid, index, "declined", source->ended_reason, NULL, now_ns);
        return;
    }
    core_log(CORE_LOG_INFO, "deep-profiling rule %zu fired (%g): replaying the next %s %s (%s)",
             index + 1, evaluator.rules[index].request_value,
             rule->action == RULES_ACTION_RANGE ? "occurrence of" : "launch of", target, why);
}

static void write_summary(store *database, int64_t pid, size_t index)
{
    const rules_evaluator_rule *entry = rules_evaluator_get(&evaluator, index);
    char status[64];
    char reason[RULES_EVALUATOR_REASON_MAX];
    rules_evaluator_summary(&evaluator, index, status, sizeof(status), reason, sizeof(reason));
    store_rule_row row = {
        .pid = pid,
        .rule_id = (uint32_t)index + 1,
        .text = entry->text,
        .canonical = entry->canonical,
        .status = status,
        .reason = reason,
        .times_true = entry->times_true,
        .windows_fired = entry->windows_fired,
        .busy_refusals = entry->busy_refusals,
        .stale_readings = entry->stale_readings,
        .missing_readings = entry->missing_readings,
        .has_last_value = entry->had_reading,
        .last_value = entry->last_value,
        .sequence = ++summary_sequence,
    };
    if (store_put_rule(database, &row) != FLARE_OK)
        CORE_LOG_ONCE("rules.store", CORE_LOG_ERROR, "cannot store rule %zu: %s", index + 1,
                      store_last_error(database));
}

void rules_session_beat(store *database, int64_t pid, uint64_t now_ns)
{
    deepwin_coordinator *coordinator = deepwin_session_coordinator();
    if (evaluator.count == 0 || coordinator == NULL)
        return;
    for (size_t i = 0; i < evaluator.count; i++) {
        const rules_evaluator_rule *entry = rules_evaluator_get(&evaluator, i);
        if (sources[i].ready && entry->state != RULES_EVAL_REFUSED &&
            entry->state != RULES_EVAL_EXHAUSTED) {
            deepwin_record record;
            rules_coordinator_view view = {0};
            int replays = entry->rule.action != RULES_ACTION_WINDOW;
            view_of(coordinator, i, &view, &record);
            if (replays && view.outcome == RULES_OUTCOME_NONE)
                trigger_view(database, pid, i, now_ns, &view);
            rules_reading reading;
            int have = read_source(i, now_ns, &reading);
            if (rules_evaluator_step(&evaluator, i, have ? &reading : NULL, now_ns, &view) ==
                RULES_STEP_REQUEST) {
                if (replays)
                    request_replay(database, pid, i, now_ns);
                else
                    request_window(coordinator, i, now_ns);
            }
        }
        if (rules_evaluator_take_summary_due(&evaluator, i))
            write_summary(database, pid, i);
    }
}

void rules_session_cancel(void)
{
    free_sources();
    evaluator.count = 0;
}

/* At session end, after trigger_view and a cancel that may have come too
 * late: a trigger still held was taken meanwhile. What it is now decides
 * its row: finished (replayed or declined, as trigger_view records it) or
 * still replaying (unfinished). */
static void end_trigger(store *database, int64_t pid, size_t index, uint64_t end_ns,
                        rules_coordinator_view *view)
{
    replay_trigger_result result;
    if (sources[index].trigger_id == 0 ||
        replay_trigger_status(sources[index].trigger_id, &result) != FLARE_OK)
        return;
    if (result.state == REPLAY_TRIGGER_DONE) {
        trigger_view(database, pid, index, end_ns, view);
        return;
    }
    record_triggered(database, pid, index, "unfinished", "the session ended while it replayed",
                     &result, end_ns);
    sources[index].trigger_id = 0;
    view->outcome = RULES_OUTCOME_OPENED;
}

void rules_session_end(store *database, int64_t pid, uint64_t end_ns)
{
    if (evaluator.count == 0)
        return;
    /* The window closed at session end may have been a rule's: let it count. */
    deepwin_coordinator *coordinator = deepwin_session_coordinator();
    for (size_t i = 0; i < evaluator.count; i++) {
        if (sources[i].trigger_id != 0) {
            /* A replay still armed at the end will not run; one that ran counts. */
            rules_coordinator_view view = {0};
            trigger_view(database, pid, i, end_ns, &view);
            if (view.outcome == RULES_OUTCOME_QUEUED &&
                cancel_trigger(database, pid, i, "the session ended first", end_ns))
                view.outcome = RULES_OUTCOME_CANCELLED;
            end_trigger(database, pid, i, end_ns, &view);
            view.blackout = 1;
            rules_evaluator_step(&evaluator, i, NULL, end_ns, &view);
        }
        if (coordinator != NULL && sources[i].window_id != 0) {
            deepwin_record record;
            rules_coordinator_view view = {0};
            view_of(coordinator, i, &view, &record);
            view.blackout = 1;
            rules_evaluator_step(&evaluator, i, NULL, end_ns, &view);
        }
        rules_evaluator_take_summary_due(&evaluator, i);
        write_summary(database, pid, i);
    }
    free_sources();
    evaluator.count = 0;
}
