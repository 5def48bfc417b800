/*
 * report_triggered.c: the triggered replays of a session for `flare report`
 * (report_triggered.h): gathered once from triggered_replays, the replayed
 * launches' metrics and the windows, then printed as the text report's
 * section; the JSON/CSV and HTML forms read the same gathering.
 *
 * Three walks, each over rows the store already orders: the triggered
 * rows (copied, at most the caller's limit), the replayed launches and
 * spans (only the ones a triggered row names are kept) and the windows
 * (the one open at the firing, or opened while the replay ran). It must
 * never print half a section when memory runs out (the report fails), nor
 * present a value other than the one stored: units are the rule's own.
 */
#include "cli/report_triggered.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/metric_labels.h"
#include "cli/report.h"
#include "cli/report_emit.h"
#include "flare/flare.h"
#include "rules/rule.h"
#include "store/store_replay.h"

/* ---- gathering ---- */

typedef struct gather {
    report_triggered *out;
    size_t limit;
    size_t capacity;
    int out_of_memory;
} gather;

/* Copies the row's strings into one allocation the item owns. */
static int copy_row(report_triggered_item *item, const store_triggered_row *row)
{
    const char *texts[] = {row->rule_text, row->comparison, row->action, row->target,
                           row->why,       row->status,     row->reason};
    size_t count = sizeof texts / sizeof texts[0], total = 0;
    for (size_t i = 0; i < count; i++)
        total += strlen(texts[i]) + 1;
    char *strings = malloc(total);
    if (strings == NULL)
        return FLARE_ERR_NO_MEMORY;
    const char *copies[sizeof texts / sizeof texts[0]];
    char *next = strings;
    for (size_t i = 0; i < count; i++) {
        size_t length = strlen(texts[i]) + 1;
        memcpy(next, texts[i], length);
        copies[i] = next;
        next += length;
    }
    item->row = *row;
    item->strings = strings;
    item->row.rule_text = copies[0];
    item->row.comparison = copies[1];
    item->row.action = copies[2];
    item->row.target = copies[3];
    item->row.why = copies[4];
    item->row.status = copies[5];
    item->row.reason = copies[6];
    return FLARE_OK;
}

/* The reading and threshold in the rule's own unit, from its text. */
static void format_reading(report_triggered_item *item)
{
    rules_rule rule;
    char error[RULES_ERROR_MAX];
    if (rules_parse(item->row.rule_text, &rule, error, sizeof error) != FLARE_OK) {
        snprintf(item->metric, sizeof item->metric, "?");
        snprintf(item->reading, sizeof item->reading, "%g", item->row.observed_value);
        snprintf(item->threshold, sizeof item->threshold, "%g", item->row.threshold);
        return;
    }
    /* The metric as the rule writes it ("gpu0.utilization"): its first word. */
    const char *start = item->row.rule_text + strspn(item->row.rule_text, " \t");
    int length = (int)strcspn(start, " \t<>=");
    snprintf(item->metric, sizeof item->metric, "%.*s", length, start);
    /* The stored values are in the metric's unit; quantities count in the
     * kind's base unit (thousandths per second, hundredths of a percent). */
    double scale = rule.threshold.kind == RULES_UNIT_RATE      ? 1000.0
                   : rule.threshold.kind == RULES_UNIT_PERCENT ? 100.0
                                                               : 1.0;
    double values[2] = {item->row.observed_value, item->row.threshold};
    char *texts[2] = {item->reading, item->threshold};
    for (int i = 0; i < 2; i++) {
        if (rule.threshold.kind == RULES_UNIT_DURATION && values[i] >= 0 && values[i] < 1.8e19) {
            cli_format_duration((uint64_t)llround(values[i]), texts[i], sizeof item->reading);
            continue; /* "21.6 ms", as the report's other durations */
        }
        double base = values[i] * scale;
        rules_quantity quantity = {.kind = rule.threshold.kind,
                                   .value =
                                       base > 0 && base < 1.8e19 ? (uint64_t)llround(base) : 0};
        if (rules_format_quantity(quantity, texts[i], sizeof item->reading) != FLARE_OK)
            snprintf(texts[i], sizeof item->reading, "%g", values[i]);
    }
}

static int take_row(const store_triggered_row *row, void *user)
{
    gather *state = user;
    report_triggered *out = state->out;
    if (out->count == state->limit) {
        out->left_out++;
        return 0;
    }
    if (out->count == state->capacity) {
        size_t capacity = state->capacity != 0 ? 2 * state->capacity : 8;
        report_triggered_item *items = realloc(out->items, capacity * sizeof *items);
        if (items == NULL) {
            state->out_of_memory = 1;
            return 1;
        }
        out->items = items;
        state->capacity = capacity;
    }
    report_triggered_item *item = &out->items[out->count];
    memset(item, 0, sizeof *item);
    if (copy_row(item, row) != FLARE_OK) {
        state->out_of_memory = 1;
        return 1;
    }
    out->count++;
    format_reading(item);
    return 0;
}

/* The item whose action replay replayed launch (pid, launch_id), or NULL. */
static report_triggered_item *item_of_launch(report_triggered *out, int64_t pid, uint64_t launch_id,
                                             int range)
{
    for (size_t i = 0; i < out->count; i++) {
        report_triggered_item *item = &out->items[i];
        int is_range = strcmp(item->row.action, "range") == 0;
        if (item->row.pid == pid && item->row.launch_id == launch_id && launch_id != 0 &&
            is_range == range)
            return item;
    }
    return NULL;
}

/* Keeps a launch's of-peak throughputs, compute side first, then memory. */
static int take_launch(const store_replay_launch_row *row, void *user)
{
    report_triggered_item *item = item_of_launch(user, row->pid, row->launch_id, 0);
    if (item == NULL)
        return 0;
    item->launch_found = 1;
    item->launch_declined = row->declined;
    for (int side = 1; side <= 3; side++) {
        for (size_t i = 0; i < row->metric_count; i++) {
            cli_metric_label label = cli_metric_label_of(row->metric_names[i]);
            int label_side = label.side == 1 || label.side == 2 ? label.side : 3;
            if (!label.of_peak || label_side != side ||
                item->metric_count == REPORT_TRIGGERED_METRICS)
                continue;
            size_t k = item->metric_count++;
            snprintf(item->metric_names[k], sizeof item->metric_names[k], "%s",
                     row->metric_names[i]);
            item->metric_has_value[k] = row->metric_has_value[i] && !isnan(row->metric_values[i]);
            item->metric_values[k] = row->metric_values[i];
        }
    }
    return 0;
}

static int take_span(const store_replay_span_row *row, void *user)
{
    report_triggered_item *item = item_of_launch(user, row->pid, row->span_id, 1);
    if (item != NULL) {
        item->span_found = 1;
        item->span_kernels = row->kernels;
        item->launch_declined = row->declined;
    }
    return 0;
}

/* The window beside each replay: of its process, open at the firing, or
 * opened between the firing and the replay's end; the first such. */
static int take_window(const store_window_row *row, void *user)
{
    report_triggered *out = user;
    if (row->opened_ns == 0)
        return 0; /* never opened: nothing was sampled */
    for (size_t i = 0; i < out->count; i++) {
        report_triggered_item *item = &out->items[i];
        uint64_t fired = item->row.fired_ns, done = item->row.done_ns;
        uint64_t closed = row->closed_ns != 0 ? row->closed_ns : UINT64_MAX;
        int open_at_firing = row->opened_ns <= fired && closed >= fired;
        int opened_during = row->opened_ns >= fired && row->opened_ns <= done;
        if (item->window.found || row->pid != item->row.pid || !(open_at_firing || opened_during))
            continue;
        report_triggered_window *window = &item->window;
        window->found = 1;
        window->id = row->id;
        const char *kind = row->token_kind != NULL ? row->token_kind : "";
        if (strcmp(kind, "rule") == 0)
            snprintf(window->opened_by, sizeof window->opened_by, "rule %u", row->rule_id);
        else if (row->label != NULL && row->label[0] != '\0')
            snprintf(window->opened_by, sizeof window->opened_by, "%s '%s'", kind, row->label);
        else
            snprintf(window->opened_by, sizeof window->opened_by, "%s", kind);
        window->opened_ns = row->opened_ns;
        window->closed_ns = row->closed_ns;
        window->samples = row->engine_samples;
        snprintf(window->engine_status, sizeof window->engine_status, "%s",
                 row->engine_status != NULL ? row->engine_status : "");
    }
    return 0;
}

void report_triggered_free(report_triggered *triggered)
{
    for (size_t i = 0; i < triggered->count; i++)
        free(triggered->items[i].strings);
    free(triggered->items);
    memset(triggered, 0, sizeof *triggered);
}

int report_triggered_collect(store *database, size_t limit, report_triggered *out)
{
    memset(out, 0, sizeof *out);
    gather state = {.out = out, .limit = limit};
    int status = store_read_triggered_replays(database, take_row, &state);
    if (status == 0 && state.out_of_memory)
        status = FLARE_ERR_NO_MEMORY;
    if (status == 0 && out->count != 0)
        status = store_read_replay_launches(database, take_launch, out);
    if (status == 0 && out->count != 0)
        status = store_read_replay_spans(database, take_span, out);
    if (status == 0 && out->count != 0)
        status = store_read_windows(database, take_window, out);
    if (status != 0)
        report_triggered_free(out);
    return status;
}

/* ---- the text section ---- */

static void print_time(const char *what, uint64_t time_ns, uint64_t start_ns)
{
    char text[32];
    if (time_ns < start_ns) {
        printf("%s before the session's start", what);
        return;
    }
    cli_format_duration(time_ns - start_ns, text, sizeof text);
    printf("%s +%s", what, text);
}

/* "SM throughput 36.0%, DRAM throughput 80.2%" into text. */
static void format_throughputs(const report_triggered_item *item, char *text, size_t size)
{
    size_t used = 0;
    text[0] = '\0';
    for (size_t i = 0; i < item->metric_count && used < size; i++) {
        char value[32];
        cli_metric_format(item->metric_names[i],
                          item->metric_has_value[i] ? item->metric_values[i] : NAN, value,
                          sizeof value);
        used += (size_t)snprintf(text + used, size - used, "%s%s %s", i ? ", " : "",
                                 cli_metric_label_of(item->metric_names[i]).name, value);
    }
}

static void print_outcome(const report_triggered_item *item)
{
    const store_triggered_row *row = &item->row;
    int range = strcmp(row->action, "range") == 0;
    if (strcmp(row->status, "replayed") != 0) {
        printf("     %s: %s\n", row->status, row->reason);
        return;
    }
    char took[32];
    cli_format_duration(row->done_ns - row->fired_ns, took, sizeof took);
    printf("     replayed %s %llu, stored %s after the firing", range ? "span" : "launch",
           (unsigned long long)row->launch_id, took);
    if (range) {
        printf(item->span_found ? ": %u kernels measured (Range replay below)\n"
                                : ": its span row is missing\n",
               item->span_kernels);
        return;
    }
    char throughputs[512];
    format_throughputs(item, throughputs, sizeof throughputs);
    if (!item->launch_found)
        printf(": its launch row is missing\n");
    else if (throughputs[0] != '\0')
        printf("\n     speed of light: %s\n", throughputs);
    else
        printf(" (no throughput among its metrics: Kernel replay below)\n");
}

static void print_item(const report_triggered_item *item, uint64_t start_ns)
{
    const store_triggered_row *row = &item->row;
    printf("  %3llu  rule %u (pid %lld)", (unsigned long long)row->id, row->rule_id,
           (long long)row->pid);
    print_time(" fired at", row->fired_ns, start_ns);
    printf(": %s was %s (%s %s)\n", item->metric, item->reading, row->comparison, item->threshold);
    printf("     rule: %s\n", row->rule_text);
    if (strcmp(row->action, "range") == 0)
        printf("     chose the next occurrence of range %s\n", row->target);
    else
        printf("     chose %s: %s\n", row->target[0] != '\0' ? row->target : "(no kernel)",
               row->why);
    print_outcome(item);
    const report_triggered_window *window = &item->window;
    if (window->found) {
        printf("     PM window %llu (%s)", (unsigned long long)window->id, window->opened_by);
        print_time(" opened", window->opened_ns, start_ns);
        printf(", %llu samples, engine %s\n", (unsigned long long)window->samples,
               window->engine_status[0] != '\0' ? window->engine_status : "-");
    } else {
        printf("     no PM window was open at the firing or during the replay\n");
    }
}

int cli_report_triggered(cli_report_run *run)
{
    report_triggered triggered;
    int status = report_triggered_collect(run->database, REPORT_TRIGGERED_MAX, &triggered);
    if (status == FLARE_ERR_NO_MEMORY) {
        cli_report_failed(run, "out of memory");
        return 0;
    }
    if (status != 0 || triggered.count == 0)
        return status;
    printf("\nTriggered replays (rules with action replay or range; times from the session's "
           "start)\n");
    for (size_t i = 0; i < triggered.count; i++, run->rows++)
        print_item(&triggered.items[i], run->summary->start_ns);
    if (triggered.left_out != 0)
        printf("  %llu more are not listed (flare report --format json has them all)\n",
               (unsigned long long)triggered.left_out);
    report_triggered_free(&triggered);
    return 0;
}

/* ---- the JSON/CSV section's records ---- */

void report_triggered_emit(report_emit *emit, const report_triggered *triggered)
{
    for (size_t i = 0; i < triggered->count; i++) {
        const report_triggered_item *item = &triggered->items[i];
        const store_triggered_row *row = &item->row;
        int replayed = strcmp(row->status, "replayed") == 0;
        report_emit_row_begin(emit);
        report_emit_i64(emit, "pid", row->pid);
        report_emit_u64(emit, "id", row->id);
        report_emit_u64(emit, "rule_id", row->rule_id);
        report_emit_string(emit, "rule_text", row->rule_text);
        report_emit_string(emit, "metric", item->metric);
        report_emit_string(emit, "comparison", row->comparison);
        report_emit_double(emit, "threshold", row->threshold);
        report_emit_double(emit, "observed_value", row->observed_value);
        report_emit_string(emit, "action", row->action);
        report_emit_string(emit, "target", row->target);
        report_emit_string(emit, "why", row->why);
        report_emit_u64(emit, "fired_ns", row->fired_ns);
        report_emit_u64_if(emit, "taken_ns", row->taken_ns, row->taken_ns != 0);
        report_emit_u64(emit, "done_ns", row->done_ns);
        report_emit_string(emit, "status", row->status);
        report_emit_string(emit, "reason", row->reason);
        report_emit_u64_if(emit, "launch_id", row->launch_id, row->launch_id != 0);
        report_emit_u64_if(emit, "stored_after_ns", row->done_ns - row->fired_ns,
                           replayed && row->done_ns >= row->fired_ns);
        char throughputs[512];
        format_throughputs(item, throughputs, sizeof throughputs);
        report_emit_string(emit, "speed_of_light", throughputs);
        report_emit_u64_if(emit, "window_id", item->window.id, item->window.found);
        report_emit_u64_if(emit, "window_samples", item->window.samples, item->window.found);
        report_emit_row_end(emit);
    }
}
