/*
 * report_html_pc.c: the PC samples section of `flare report --html`
 * (report_html.h, docs/windows.md): per window that ran PC sampling, its
 * stall reasons by share, the scopes its samples ran in (report_pc_scopes.h:
 * split by kernel time), its hottest instructions (function+offset, stall
 * reason, samples) and its hottest source lines (report_pc_lines.h: file,
 * line, function, samples, top stall reason; with the samples that had a
 * line, so the page can say what share had none), gathered as the text
 * report shows them; the page draws the reasons and the scopes as bars and
 * the instructions and lines as tables.
 *
 * Must never present a value other than the stored one, nor hide that rows
 * were left out (each window says how many rows it has; past 256 windows
 * the page says how many more there are).
 */
#include <stdint.h>
#include <stdio.h>

#include "cli/report_html.h"
#include "cli/report_pc.h"
#include "cli/report_pc_lines.h"
#include "cli/report_pc_scopes.h"
#include "flare/flare.h"

/* Windows a page lists, as for PM samples; the rest are counted. */
#define HTML_PC_WINDOWS_MAX 256

/* Scopes a window lists, most samples first; the rest are counted. */
#define HTML_PC_SCOPES_MAX 24

typedef struct pc_section {
    html_report *report;
    report_pc_scopes scopes;
    report_pc_lines lines;
    uint64_t written, left_out;
} pc_section;

static void write_scopes(pc_section *section, const report_pc_window *window)
{
    html_page *page = section->report->page;
    report_pc_scope_sum sums[HTML_PC_SCOPES_MAX];
    size_t more = 0;
    size_t count = report_pc_scopes_of_window(&section->scopes, window->pid, window->window_id,
                                              window->device, sums, HTML_PC_SCOPES_MAX, &more);
    if (more == SIZE_MAX)
        html_report_failed(section->report, "out of memory");
    html_json_array(page, "scopes");
    for (size_t i = 0; i < count; i++) {
        html_json_object(page, NULL);
        html_json_string(page, "name", sums[i].name);
        html_json_double(page, "samples", sums[i].samples);
        html_json_string(page, "stall", sums[i].top_reason);
        html_json_end(page);
    }
    html_json_end(page);
    html_json_u64(page, "scopes_left_out", more == SIZE_MAX ? 0 : more);
}

/* The window's lines: lines_recorded (false for a session older than
 * lines, or when they could not be read), lines (the top ones, most
 * samples first), lines_left_out and lines_samples (the window's samples
 * that had a line). */
static void write_lines(pc_section *section, const report_pc_window *window)
{
    html_page *page = section->report->page;
    report_pc_lines *lines = &section->lines;
    const report_pc_lines_window *own =
        report_pc_lines_of_window(lines, window->pid, window->window_id, window->device);
    html_json_bool(page, "lines_recorded", lines->recorded && !lines->unreadable);
    html_json_array(page, "lines");
    for (size_t i = 0; own != NULL && i < own->shown; i++) {
        const report_pc_source_line *line = &lines->rows[own->first + i];
        html_json_object(page, NULL);
        html_json_string(page, "file", line->file);
        html_json_u64(page, "line", line->line);
        html_json_string(page, "function", line->function);
        html_json_u64(page, "samples", line->samples);
        html_json_string(page, "stall", line->top_stall);
        html_json_u64(page, "stall_samples", line->top_stall_samples);
        html_json_end(page);
    }
    html_json_end(page);
    html_json_u64(page, "lines_left_out", own != NULL ? own->count - own->shown : 0);
    html_json_u64(page, "lines_samples", own != NULL ? own->samples : 0);
}

static void write_window(report_pc_window *window, void *user)
{
    pc_section *section = user;
    if (section->written == HTML_PC_WINDOWS_MAX) {
        section->left_out++;
        return;
    }
    section->written++;
    html_page *page = section->report->page;
    html_json_object(page, NULL);
    html_json_i64(page, "pid", window->pid);
    html_json_u64(page, "id", window->window_id);
    html_json_i64(page, "device", window->device);
    html_json_u64(page, "samples", window->total);
    html_json_u64(page, "rows", window->rows);
    html_json_array(page, "reasons");
    for (size_t i = 0; i < window->reasons; i++) {
        html_json_object(page, NULL);
        html_json_string(page, "name", window->reason_names[i]);
        html_json_u64(page, "samples", window->reason_samples[i]);
        html_json_end(page);
    }
    if (window->other_reasons != 0) {
        html_json_object(page, NULL);
        html_json_string(page, "name", "other");
        html_json_u64(page, "samples", window->other_reasons);
        html_json_end(page);
    }
    html_json_end(page);
    write_scopes(section, window);
    html_json_array(page, "top");
    for (size_t i = 0; i < window->lines; i++) {
        const report_pc_line *line = &window->top[i];
        char offset[32];
        snprintf(offset, sizeof offset, "0x%llx", (unsigned long long)line->pc_offset);
        html_json_object(page, NULL);
        html_json_string(page, "function", line->function);
        html_json_string(page, "offset", offset);
        html_json_string(page, "stall", line->stall_reason);
        html_json_u64(page, "samples", line->samples);
        if (line->file[0] != '\0') {
            html_json_string(page, "file", line->file);
            html_json_u64(page, "line", line->source_line);
        } else if (line->sass[0] != '\0') {
            html_json_string(page, "sass", line->sass);
        }
        html_json_end(page);
    }
    html_json_end(page);
    write_lines(section, window);
    html_json_end(page);
}

void html_section_pc(html_report *report)
{
    pc_section section = {.report = report};
    /* The windows are drawn even when their scopes cannot be read. */
    int scopes_status = report_pc_scopes_load(report->database, &section.scopes);
    int lines_status = report_pc_lines_load(
        report->database, report->session->summary.schema_version, &section.lines);
    html_json_array(report->page, "windows");
    int status = report_pc_windows(report->database, write_window, &section);
    html_json_end(report->page);
    html_json_u64(report->page, "left_out", section.left_out);
    report_pc_scopes_free(&section.scopes);
    report_pc_lines_free(&section.lines);
    if (status == FLARE_OK)
        status = scopes_status;
    if (status == FLARE_OK)
        status = lines_status;
    if (status == FLARE_ERR_NO_MEMORY)
        html_report_failed(report, "out of memory");
    else
        html_report_check(report, status);
}
