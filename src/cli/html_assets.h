/*
 * html_assets.h: the files `flare report --html` puts inside every page,
 * embedded in the flare command when it is built (cmake/flare_embed.cmake
 * writes them into generated/html_assets.c from the top CMakeLists.txt):
 * the chart library uPlot (third_party/uplot: script, style, licence) and
 * the page's own scripts and style (src/cli/html/): report_lib.js (the
 * elements, formatters and charts, handed over on one frozen object),
 * report.js (the sections, drawn with them) and report.css. The page
 * writes each in a block of its own, the scripts in that order.
 *
 * Each is NUL-terminated (so it can be written as a string) and its size
 * excludes the NUL. They are read-only data: nothing must ever change
 * them, and the page must never refer to them by a path or URL instead.
 */
#ifndef FLARE_CLI_HTML_ASSETS_H
#define FLARE_CLI_HTML_ASSETS_H

#include <stddef.h>

extern const unsigned char cli_html_uplot_js[];
extern const size_t cli_html_uplot_js_size;
extern const unsigned char cli_html_uplot_css[];
extern const size_t cli_html_uplot_css_size;
extern const unsigned char cli_html_uplot_license[];
extern const size_t cli_html_uplot_license_size;
extern const unsigned char cli_html_report_lib_js[];
extern const size_t cli_html_report_lib_js_size;
extern const unsigned char cli_html_report_js[];
extern const size_t cli_html_report_js_size;
extern const unsigned char cli_html_report_css[];
extern const size_t cli_html_report_css_size;

#endif /* FLARE_CLI_HTML_ASSETS_H */
