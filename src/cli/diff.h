/*
 * diff.h: what `flare diff` (diff.c: options, sessions, the gate) and its
 * printers (diff_print.c: text and JSON) share: the parsed command line
 * and the comparison, ready to print.
 *
 * The printers only format what diff.c computed: they must never read a
 * session, decide a verdict or an exit code, or print a session's text
 * without escaping it (JSON) or through anything but stdout (text: main.c
 * sends it through the control-character filter).
 */
#ifndef FLARE_CLI_DIFF_H
#define FLARE_CLI_DIFF_H

#include <stddef.h>
#include <stdint.h>

#include "cli/diff_collect.h"
#include "cli/diff_stats.h"
#include "cli/session.h"

/* `flare diff --fail-if-slower`: a kernel, or the total GPU time, slower
 * by more than the limit beyond noise (docs/cli.md). */
#define CLI_DIFF_EXIT_SLOWER 3

typedef struct diff_options {
    const char *paths[2]; /* BASE, NEW as given */
    int json;             /* --format json */
    uint32_t top;         /* rows per table; 0: all */
    diff_rule rule;       /* --alpha, --min-change */
    int gate;             /* --fail-if-slower given */
    double fail_pct;      /* its PCT */
    int allow_unfinished; /* --allow-unfinished */
} diff_options;

/* One side: the session, open, and the distinct names of its devices. */
#define DIFF_DEVICE_NAMES 32
typedef struct diff_side_info {
    const char *label; /* "BASE", "NEW" */
    cli_session session;
    int open;
    char device_names[DIFF_DEVICE_NAMES][256]; /* distinct, sorted */
    size_t device_count;
    int more_devices;   /* names past DIFF_DEVICE_NAMES, left out */
    char devices[1024]; /* the names joined by ", " (", ..." when more); "" when none */
} diff_side_info;

typedef struct diff_result {
    const diff_options *options;
    diff_side_info sides[2];
    int different_hosts;
    int different_devices;
    int different_versions;
    diff_table kernels;
    diff_table scopes;
    size_t failures; /* rows (and the total) that fail --fail-if-slower */
} diff_result;

/* Whether row (a kernel row, or the kernels' total) fails the gate:
 * --fail-if-slower given, verdict slower, and its mean (the total's sum)
 * grew by more than PCT. */
int diff_row_fails(const diff_result *result, const diff_row *row);

/* The comparison on stdout, as text or as one JSON object (docs/cli.md). */
void diff_print_text(const diff_result *result);
void diff_print_json(const diff_result *result);

#endif /* FLARE_CLI_DIFF_H */
