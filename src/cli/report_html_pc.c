/*
 * report_html_pc.c: the PC samples section of `flare report --html`
 * (report_html.h, docs/windows.md): per window that ran PC sampling, its
 * stall reasons by share and its hottest instructions (function+offset,
 * stall reason, samples), gathered by report_pc_windows as the text report
 * shows them; the page draws the reasons as bars and the instructions as a
 * table.
 *
 * Must never present a value other than the stored one, nor hide that rows
 * were left out (each window says how many rows it has; past 256 windows
 * the page says how many more there are).
 */
#include <stdio.h>

#include "cli/report_html.h"
#include "cli/report_pc.h"
#include "flare/flare.h"

/* Windows a page lists, as for PM samples; the rest are counted. */
#define HTML_PC_WINDOWS_MAX 256

typedef struct pc_section {
    html_report *report;
    uint64_t written, left_out;
} pc_section;

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
        html_json_end(page);
    }
    html_json_end(page);
    html_json_end(page);
}

void html_section_pc(html_report *report)
{
    pc_section section = {.report = report};
    html_json_array(report->page, "windows");
    int status = report_pc_windows(report->database, write_window, &section);
    html_json_end(report->page);
    html_json_u64(report->page, "left_out", section.left_out);
    if (status == FLARE_ERR_NO_MEMORY)
        html_report_failed(report, "out of memory");
    else
        html_report_check(report, status);
}
