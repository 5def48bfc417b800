/*
 * report_html_sass.c: the SASS metrics section of `flare report --html`
 * (report_html.h, report_sass.h): per window and device that ran a SASS
 * metrics engine, each metric's total, its hottest instructions and its
 * hottest source lines by smsp__sass_inst_executed with the two derived
 * columns (threads per warp instruction, global sectors over the ideal)
 * where both of their metrics were counted, and what had no line; a window
 * that ran the engine and stored nothing, with its engine's status and
 * reason. Gathered as the text report shows them (report_sass.c); the page
 * draws them as tables (report.js, renderSass).
 *
 * Must never present a value other than the stored one (the derived
 * columns are the stored counts divided, null where either is missing),
 * nor hide that rows were left out (each window says how many more
 * instructions, lines and metrics it has; past 256 windows the page says
 * how many more there are).
 */
#include <stdint.h>
#include <stdio.h>

#include "cli/report_html.h"
#include "cli/report_sass.h"
#include "flare/flare.h"

/* Windows a page lists, as for PC samples; the rest are counted. */
#define HTML_SASS_WINDOWS_MAX 256

/* Scopes a window lists, largest share first; the rest are counted. */
#define HTML_SASS_SCOPES_MAX 24

typedef struct sass_section {
    html_report *report;
    report_sass_lines lines;
    report_sass_scopes scopes;
    uint64_t written, left_out;
} sass_section;

/* counts' executed count and derived columns: threads and sectors (null
 * where not known). */
static void write_counts(html_page *page, const report_sass_counts *counts)
{
    int known;
    html_json_u64(page, "executed", counts->executed);
    double threads = report_sass_threads(counts, &known);
    if (known)
        html_json_double(page, "threads", threads);
    else
        html_json_null(page, "threads");
    double sectors = report_sass_sectors(counts, &known);
    if (known)
        html_json_double(page, "sectors", sectors);
    else
        html_json_null(page, "sectors");
}

static void write_totals(html_page *page, const report_sass_window *window)
{
    html_json_array(page, "metrics");
    for (size_t i = 0; i < window->metrics; i++) {
        html_json_object(page, NULL);
        html_json_string(page, "name", window->totals[i].metric);
        html_json_u64(page, "total", window->totals[i].value);
        html_json_u64(page, "instructions", window->totals[i].instructions);
        html_json_end(page);
    }
    html_json_end(page);
    html_json_u64(page, "metrics_left_out", window->other_metrics);
}

static void write_top(html_page *page, const report_sass_window *window)
{
    html_json_array(page, "top");
    for (size_t i = 0; i < window->top_count; i++) {
        const report_sass_instruction *held = &window->top[i];
        char offset[32];
        snprintf(offset, sizeof offset, "0x%llx", (unsigned long long)held->pc_offset);
        html_json_object(page, NULL);
        html_json_string(page, "function", held->function);
        html_json_string(page, "offset", offset);
        if (held->file[0] != '\0') {
            html_json_string(page, "file", held->file);
            html_json_u64(page, "line", held->source_line);
        } else if (held->sass[0] != '\0') {
            html_json_string(page, "sass", held->sass);
        }
        write_counts(page, &held->counts);
        html_json_end(page);
    }
    html_json_end(page);
    html_json_u64(page, "top_left_out", window->instructions - window->top_count);
}

/* lines_readable, lines (the top ones), lines_left_out. */
static void write_lines(sass_section *section, const report_sass_window *window)
{
    html_page *page = section->report->page;
    report_sass_lines *lines = &section->lines;
    const report_sass_lines_window *own =
        report_sass_lines_of_window(lines, window->pid, window->window_id, window->device);
    html_json_bool(page, "lines_readable", !lines->unreadable);
    html_json_array(page, "lines");
    for (size_t i = 0; own != NULL && i < own->shown; i++) {
        const report_sass_line *line = &lines->rows[own->first + i];
        html_json_object(page, NULL);
        html_json_string(page, "file", line->file);
        html_json_u64(page, "line", line->line);
        html_json_string(page, "function", line->function);
        html_json_u64(page, "instructions", line->instructions);
        write_counts(page, &line->counts);
        html_json_end(page);
    }
    html_json_end(page);
    html_json_u64(page, "lines_left_out", own != NULL ? own->count - own->shown : 0);
}

/* The window's split by scope (report_sass_scopes.c): scope_metric (the
 * metric split, or null when none), scopes (name, value; largest first),
 * scopes_left_out and scope_total (the metric's total in the window). */
static void write_scopes(sass_section *section, const report_sass_window *window)
{
    html_page *page = section->report->page;
    report_sass_scope_split split = {0};
    if (!section->scopes.unreadable)
        report_sass_scopes_of_window(&section->scopes, window->pid, window->window_id,
                                     window->device, &split);
    if (split.metric != NULL)
        html_json_string(page, "scope_metric", split.metric);
    else
        html_json_null(page, "scope_metric");
    size_t shown = split.count < HTML_SASS_SCOPES_MAX ? split.count : HTML_SASS_SCOPES_MAX;
    html_json_array(page, "scopes");
    for (size_t i = 0; i < shown; i++) {
        html_json_object(page, NULL);
        html_json_string(page, "name", split.rows[i].scope_name);
        html_json_double(page, "value", split.rows[i].value);
        html_json_end(page);
    }
    html_json_end(page);
    html_json_u64(page, "scopes_left_out", split.count - shown);
    html_json_double(page, "scope_total", split.total);
}

static void write_window(report_sass_window *window, void *user)
{
    sass_section *section = user;
    if (section->written == HTML_SASS_WINDOWS_MAX) {
        section->left_out++;
        return;
    }
    section->written++;
    html_page *page = section->report->page;
    html_json_object(page, NULL);
    html_json_i64(page, "pid", window->pid);
    html_json_u64(page, "id", window->window_id);
    if (window->device >= 0)
        html_json_i64(page, "device", window->device);
    else
        html_json_null(page, "device");
    html_json_string(page, "engine", window->engine);
    html_json_string(page, "engine_status", window->engine_status);
    html_json_string(page, "engine_reason", window->engine_reason);
    html_json_u64(page, "launches", window->launches);
    html_json_u64(page, "rows", window->rows);
    html_json_u64(page, "instructions", window->instructions);
    html_json_object(page, "whole");
    write_counts(page, &window->counts);
    html_json_end(page);
    write_totals(page, window);
    write_top(page, window);
    write_lines(section, window);
    write_scopes(section, window);
    html_json_u64(page, "no_line_instructions", window->no_line_instructions);
    html_json_u64(page, "no_line_executed", window->no_line_executed);
    html_json_end(page);
}

void html_section_sass(html_report *report)
{
    sass_section section = {.report = report};
    /* The windows are drawn even when their lines cannot be read. */
    int lines_status = report_sass_lines_load(report->database, &section.lines);
    int scopes_status = report_sass_scopes_load(report->database, &section.scopes);
    html_json_array(report->page, "windows");
    int status = report_sass_windows(report->database, write_window, &section);
    html_json_end(report->page);
    html_json_u64(report->page, "left_out", section.left_out);
    report_sass_lines_free(&section.lines);
    report_sass_scopes_free(&section.scopes);
    if (status == FLARE_OK)
        status = lines_status;
    if (status == FLARE_OK)
        status = scopes_status;
    if (status == FLARE_ERR_NO_MEMORY)
        html_report_failed(report, "out of memory");
    else
        html_report_check(report, status);
}
