/*
 * report_html_page.h: the page of `flare report --html` (report_html_page.c):
 * one self-contained HTML file, written front to back through the export
 * writer (output.h): the style and the chart library inline, one <section>
 * per part of the report, each with its data as JSON in a
 * <script type="application/json"> block, and the page's script last,
 * which draws every section from its data.
 *
 * The page holds no markup made from the session: every name from it
 * (kernels, scopes, commands, messages) travels as a JSON string in which
 * '<', '>' and '&' are written as \u003c, \u003e and \u0026 (so no "</"
 * can close the block, and no "<!--" can open a comment in it), and the
 * script puts it into the page as text, never as markup. It must never
 * write a byte that points outside the file (no URL, no font, no fetch),
 * and never emit invalid JSON: every string goes through
 * html_json_string, whose invalid UTF-8 becomes '?'.
 */
#ifndef FLARE_CLI_REPORT_HTML_PAGE_H
#define FLARE_CLI_REPORT_HTML_PAGE_H

#include <stddef.h>
#include <stdint.h>

typedef struct html_page html_page;

/*
 * Opens where the page goes (path: a file, written as a temporary file
 * renamed at the end; "-" or NULL: standard output; see cli_output_open)
 * and writes the page's head: title, style, the chart library. Returns 0
 * with *page set, or -1 with a message in error; nothing is created then.
 */
int html_page_open(const char *path, html_page **page, char *error, size_t error_size);

/* Starts <section id="id"> with its heading title and its data block; the
 * data is one JSON object, open after this call for the html_json_*
 * calls (keys of the object). id is a plain word the caller vouches for. */
void html_page_section_begin(html_page *page, const char *id, const char *title);
/* Closes whatever the section left open inside its JSON object, adds the
 * member "error" (error, or null when it is NULL: the section was read
 * whole), and closes the object, its data block and the section. */
void html_page_section_end(html_page *page, const char *error);

/*
 * Writes the page's script and closes the document, then closes the
 * output: when succeeded is set the file is renamed into place; otherwise,
 * or when a write failed, the temporary file is removed and path left as
 * it was. Frees page. Returns 0, or -1 with a message in error.
 */
int html_page_close(html_page *page, int succeeded, char *error, size_t error_size);

/* ---- JSON inside the open section ----
 *
 * key is the member's name inside an object, NULL inside an array. Keys
 * are plain words the caller vouches for. Containers nest at most 16
 * deep; commas are the writer's business. */

void html_json_object(html_page *page, const char *key);
void html_json_array(html_page *page, const char *key);
/* Closes the innermost object or array. */
void html_json_end(html_page *page);

/* text as a JSON string (NULL: null), escaped for an HTML script block. */
void html_json_string(html_page *page, const char *key, const char *text);
void html_json_u64(html_page *page, const char *key, uint64_t value);
void html_json_i64(html_page *page, const char *key, int64_t value);
/* A number with up to 10 significant digits; NaN and infinities as null. */
void html_json_double(html_page *page, const char *key, double value);
void html_json_bool(html_page *page, const char *key, int value);
void html_json_null(html_page *page, const char *key);

#endif /* FLARE_CLI_REPORT_HTML_PAGE_H */
