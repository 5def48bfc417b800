/*
 * report_html_page.c: the page of `flare report --html` (report_html_page.h):
 * its head (style and chart library inline), its sections with their data
 * as JSON in script blocks, and its scripts, written through the export
 * writer (output.h) so that a file is written whole or not at all.
 *
 * It knows nothing of sessions: report_html.c decides what the sections
 * hold. It must never write a session's text anywhere but inside a JSON
 * string escaped for a script block, never write anything that makes the
 * browser fetch (the Content-Security-Policy of the head forbids every
 * fetch besides), and never write an embedded asset that could end its
 * own <script> or <style> block early.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/html_assets.h"
#include "cli/output.h"
#include "cli/report_html_page.h"

#define HTML_JSON_DEPTH_MAX 16

struct html_page {
    cli_output *output;
    int depth;                             /* open JSON containers */
    char closer[HTML_JSON_DEPTH_MAX];      /* '}' or ']' of each */
    unsigned members[HTML_JSON_DEPTH_MAX]; /* written in each so far */
    int broken;                            /* an asset would have broken the page */
};

/* ---- the document ---- */

/* default-src 'none': the page may fetch nothing at all, not even by
 * mistake; its scripts and styles are inline, its images data: only. */
static const char page_head[] =
    "<!DOCTYPE html>\n"
    "<html lang=\"en\">\n"
    "<head>\n"
    "<meta charset=\"utf-8\">\n"
    "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
    "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    "<meta name=\"generator\" content=\"flare report --html\">\n"
    "<title>flare report</title>\n";

static const char page_body[] =
    "</head>\n"
    "<body data-rendered=\"pending\">\n"
    "<header class=\"page-header\"><h1>flare report</h1>"
    "<nav id=\"page-nav\" aria-label=\"sections\"></nav></header>\n"
    "<div id=\"page-status\" class=\"page-status\" role=\"status\">"
    "This report draws its charts with JavaScript; it is still loading, or "
    "JavaScript is off.</div>\n"
    "<main>\n";

/* Whether asset holds "</" followed by name (any case): it would end the
 * block it is written into. */
static int closes_block(const unsigned char *asset, const char *name)
{
    char pattern[32];
    snprintf(pattern, sizeof pattern, "</%s", name);
    return strcasestr((const char *)asset, pattern) != NULL;
}

/* Writes asset inside <tag>...</tag>, or marks the page broken (and
 * writes nothing) when it could end the block early. */
static void write_block(html_page *page, const char *tag, const unsigned char *asset, size_t size)
{
    if (closes_block(asset, tag)) {
        page->broken = 1;
        return;
    }
    cli_output_char(page->output, '<');
    cli_output_text(page->output, tag);
    cli_output_text(page->output, ">\n");
    cli_output_bytes(page->output, (const char *)asset, size);
    cli_output_text(page->output, "\n</");
    cli_output_text(page->output, tag);
    cli_output_text(page->output, ">\n");
}

/* The chart library's licence, in a comment: a "--" in it is written
 * "- -", so the comment cannot end early. */
static void write_license(html_page *page)
{
    cli_output_text(page->output, "<!-- uPlot (third_party/uplot), included in this page:\n");
    const unsigned char *text = cli_html_uplot_license;
    for (size_t i = 0; i < cli_html_uplot_license_size; i++) {
        cli_output_char(page->output, (char)text[i]);
        if (text[i] == '-' && i + 1 < cli_html_uplot_license_size && text[i + 1] == '-')
            cli_output_char(page->output, ' ');
    }
    cli_output_text(page->output, "\n-->\n");
}

int html_page_open(const char *path, html_page **page, char *error, size_t error_size)
{
    *page = NULL;
    html_page *opened = calloc(1, sizeof *opened);
    if (opened == NULL) {
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    if (cli_output_open(path, &opened->output, error, error_size) != 0) {
        free(opened);
        return -1;
    }
    cli_output_text(opened->output, page_head);
    write_block(opened, "style", cli_html_uplot_css, cli_html_uplot_css_size);
    write_block(opened, "style", cli_html_report_css, cli_html_report_css_size);
    cli_output_text(opened->output, page_body);
    write_license(opened);
    *page = opened;
    return 0;
}

void html_page_section_begin(html_page *page, const char *id, const char *title)
{
    cli_output *output = page->output;
    cli_output_text(output, "<section id=\"");
    cli_output_text(output, id);
    cli_output_text(output, "\" class=\"report-section\">\n<h2>");
    cli_output_text(output, title);
    cli_output_text(output, "</h2>\n<div class=\"section-body\"></div>\n"
                            "<script type=\"application/json\" class=\"section-data\" id=\"data-");
    cli_output_text(output, id);
    cli_output_text(output, "\">");
    page->depth = 0;
    html_json_object(page, NULL);
}

void html_page_section_end(html_page *page, const char *error)
{
    while (page->depth > 1)
        html_json_end(page);
    html_json_string(page, "error", error);
    while (page->depth > 0)
        html_json_end(page);
    cli_output_text(page->output, "</script>\n</section>\n");
}

int html_page_close(html_page *page, int succeeded, char *error, size_t error_size)
{
    cli_output_text(page->output, "</main>\n");
    write_block(page, "script", cli_html_uplot_js, cli_html_uplot_js_size);
    /* report.js takes its helpers from report_lib.js: the library first. */
    write_block(page, "script", cli_html_report_lib_js, cli_html_report_lib_js_size);
    write_block(page, "script", cli_html_report_js, cli_html_report_js_size);
    cli_output_text(page->output, "</body>\n</html>\n");
    int broken = page->broken;
    int status = cli_output_close(page->output, succeeded && !broken, error, error_size);
    free(page);
    if (broken && status == 0) {
        snprintf(error, error_size,
                 "an embedded asset of the page would end its own block "
                 "(a '</script' or '</style' inside it): rebuild flare");
        return -1;
    }
    return status;
}

/* ---- JSON ---- */

/* The separator before a new member or element, then its key. */
static void json_member(html_page *page, const char *key)
{
    if (page->depth > 0) {
        if (page->members[page->depth - 1]++ > 0)
            cli_output_char(page->output, ',');
    }
    if (key != NULL) {
        cli_output_char(page->output, '"');
        cli_output_text(page->output, key);
        cli_output_text(page->output, "\":");
    }
}

static void json_open(html_page *page, const char *key, char opener, char closer)
{
    json_member(page, key);
    cli_output_char(page->output, opener);
    if (page->depth < HTML_JSON_DEPTH_MAX) {
        page->closer[page->depth] = closer;
        page->members[page->depth] = 0;
    }
    page->depth++;
}

void html_json_object(html_page *page, const char *key)
{
    json_open(page, key, '{', '}');
}

void html_json_array(html_page *page, const char *key)
{
    json_open(page, key, '[', ']');
}

void html_json_end(html_page *page)
{
    if (page->depth == 0)
        return;
    page->depth--;
    cli_output_char(page->output,
                    page->depth < HTML_JSON_DEPTH_MAX ? page->closer[page->depth] : '}');
}

void html_json_string(html_page *page, const char *key, const char *text)
{
    json_member(page, key);
    if (text == NULL) {
        cli_output_text(page->output, "null");
        return;
    }
    cli_output_char(page->output, '"');
    cli_output_json_text_html(page->output, text);
    cli_output_char(page->output, '"');
}

void html_json_u64(html_page *page, const char *key, uint64_t value)
{
    json_member(page, key);
    cli_output_u64(page->output, value);
}

void html_json_i64(html_page *page, const char *key, int64_t value)
{
    json_member(page, key);
    cli_output_i64(page->output, value);
}

void html_json_double(html_page *page, const char *key, double value)
{
    json_member(page, key);
    if (!isfinite(value)) {
        cli_output_text(page->output, "null");
        return;
    }
    char text[32];
    snprintf(text, sizeof text, "%.10g", value);
    cli_output_text(page->output, text);
}

void html_json_bool(html_page *page, const char *key, int value)
{
    json_member(page, key);
    cli_output_text(page->output, value ? "true" : "false");
}

void html_json_null(html_page *page, const char *key)
{
    json_member(page, key);
    cli_output_text(page->output, "null");
}
