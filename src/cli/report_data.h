/*
 * report_data.h: `flare report --format json|csv` (report_data.c), every
 * section of the text report as tables of raw values with stable keys
 * (docs/cli.md, "flare report"), and what the text report shares with it:
 * the top kernels with every kernel's GPU time, for the "% GPU" column.
 *
 * It must never change the session (it is opened read-only), never stop
 * at a section that cannot be read (the section is named in "errors", on
 * stderr, and the report exits 1 with every other section written), and
 * never hold more than the --top kernels in memory: the other tables
 * stream from the store readers to the output.
 */
#ifndef FLARE_CLI_REPORT_DATA_H
#define FLARE_CLI_REPORT_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "cli/report_emit.h"
#include "cli/session.h"
#include "store/store.h"

/* The layout of the JSON and CSV documents: raised only when a key is
 * removed or changes meaning (new keys may come at any time). */
#define CLI_REPORT_SCHEMA_VERSION 1

/* The top kernels by total GPU time, and the GPU time of every kernel. */
typedef struct cli_report_kernels {
    store_duration_stats *rows; /* count rows; each name is malloc'd */
    size_t count;
    uint64_t all_ns; /* the GPU time of all kernels, listed or not */
} cli_report_kernels;

/*
 * Reads the top kernels (at most top of them) and the GPU time of all of
 * them into *kernels, for cli_report_kernels_free to free. Returns NULL, or
 * why the read failed: the store's message (valid until the next store
 * call) or "out of memory"; *kernels is then empty (no half table).
 */
const char *cli_report_kernels_read(store *database, uint32_t top, cli_report_kernels *kernels);
void cli_report_kernels_free(cli_report_kernels *kernels);

/* part as a percentage of all (0..100 when part <= all); NaN when all is 0. */
double cli_report_share_pct(uint64_t part, uint64_t all);

/*
 * Writes the report of the open session to standard output in format, with
 * at most top kernels, scopes and PM ranges per window. Returns the exit
 * code: CLI_EXIT_OK, or CLI_EXIT_FAILURE when a section could not be read
 * (each printed as "flare report: reading SECTION: ..." and listed in the
 * document's errors) or the output could not be written.
 */
int cli_report_data(const cli_session *session, uint32_t top, const report_emit_format *format);

#endif /* FLARE_CLI_REPORT_DATA_H */
