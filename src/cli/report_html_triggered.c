/*
 * report_html_triggered.c: the triggered replays section of `flare report
 * --html` (report_html.h, docs/rules.md "What a triggered replay's record
 * says"): per replay a rule asked for, the rule firing (its reading against
 * its threshold, the kernel or range chosen and why, what became of it and
 * how long it took), the replayed launch's speed-of-light bars, and the PM
 * window open at the firing or during the replay, drawn side by side; the
 * page draws that window's samples from the PM section's data.
 *
 * Reads what report_triggered_collect gathered; must never present a value
 * other than the stored one (labels and units only, as the text report's)
 * and never list more than REPORT_TRIGGERED_MAX replays (it says how many
 * more there are).
 */
#include <math.h>
#include <string.h>

#include "cli/metric_labels.h"
#include "cli/report_html.h"
#include "cli/report_triggered.h"
#include "flare/flare.h"

static void write_bars(html_page *page, const report_triggered_item *item)
{
    html_json_array(page, "bars");
    for (size_t i = 0; i < item->metric_count; i++) {
        const char *metric = item->metric_names[i];
        cli_metric_label label = cli_metric_label_of(metric);
        double value = item->metric_has_value[i] ? item->metric_values[i] : NAN;
        char text[64];
        html_json_object(page, NULL);
        html_json_string(page, "metric", metric);
        html_json_string(page, "label", label.name);
        html_json_string(page, "side",
                         label.side == 1   ? "compute"
                         : label.side == 2 ? "memory"
                                           : "other");
        html_json_double(page, "pct", value);
        html_json_string(page, "text", cli_metric_format(metric, value, text, sizeof text));
        html_json_end(page);
    }
    html_json_end(page);
}

static void write_window(html_report *report, const report_triggered_item *item)
{
    html_page *page = report->page;
    const report_triggered_window *window = &item->window;
    if (!window->found) {
        html_json_null(page, "window");
        return;
    }
    html_json_object(page, "window");
    html_json_i64(page, "pid", item->row.pid);
    html_json_u64(page, "id", window->id);
    html_json_string(page, "opened_by", window->opened_by);
    html_json_double(page, "open_s", html_report_seconds(report, window->opened_ns));
    if (window->closed_ns >= window->opened_ns)
        html_json_double(page, "length_ms", (double)(window->closed_ns - window->opened_ns) * 1e-6);
    else
        html_json_null(page, "length_ms");
    html_json_u64(page, "samples", window->samples);
    html_json_string(page, "engine_status", window->engine_status);
    /* The firing and the replay's end on the window's own time axis. */
    html_json_double(page, "fired_ms",
                     ((double)item->row.fired_ns - (double)window->opened_ns) * 1e-6);
    html_json_double(page, "done_ms",
                     ((double)item->row.done_ns - (double)window->opened_ns) * 1e-6);
    html_json_end(page);
}

static void write_item(html_report *report, const report_triggered_item *item)
{
    html_page *page = report->page;
    const store_triggered_row *row = &item->row;
    html_json_object(page, NULL);
    html_json_i64(page, "pid", row->pid);
    html_json_u64(page, "id", row->id);
    html_json_u64(page, "rule_id", row->rule_id);
    html_json_string(page, "rule_text", row->rule_text);
    html_json_string(page, "metric", item->metric);
    html_json_string(page, "reading", item->reading);
    html_json_string(page, "comparison", row->comparison);
    html_json_string(page, "threshold", item->threshold);
    html_json_string(page, "action", row->action);
    html_json_string(page, "target", row->target);
    html_json_string(page, "why", row->why);
    html_json_string(page, "status", row->status);
    html_json_string(page, "reason", row->reason);
    html_json_double(page, "fired_s", html_report_seconds(report, row->fired_ns));
    if (strcmp(row->status, "replayed") == 0 && row->done_ns >= row->fired_ns)
        html_json_double(page, "stored_ms", (double)(row->done_ns - row->fired_ns) * 1e-6);
    else
        html_json_null(page, "stored_ms");
    html_json_u64(page, "launch_id", row->launch_id);
    html_json_bool(page, "launch_found", item->launch_found || item->span_found);
    html_json_u64(page, "span_kernels", item->span_kernels);
    write_bars(page, item);
    write_window(report, item);
    html_json_end(page);
}

void html_section_triggered(html_report *report)
{
    report_triggered triggered;
    int status = report_triggered_collect(report->database, REPORT_TRIGGERED_MAX, &triggered);
    if (status == FLARE_ERR_NO_MEMORY)
        html_report_failed(report, "out of memory");
    else
        html_report_check(report, status);
    html_page *page = report->page;
    html_json_array(page, "replays");
    for (size_t i = 0; status == 0 && i < triggered.count; i++)
        write_item(report, &triggered.items[i]);
    html_json_end(page);
    html_json_u64(page, "left_out", triggered.left_out);
    report_triggered_free(&triggered);
}
