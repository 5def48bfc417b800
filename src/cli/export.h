/*
 * export.h: what `flare export` (export.c) and its formats share. Each
 * format is a file of its own (export_perfetto.c, export_csv.c,
 * export_json.c) that fills a const cli_export_format; export.c parses the
 * options, opens the session and the output, and calls the format chosen
 * from its table.
 *
 * A format reads the session (a cli_session opened with its snapshot, so
 * its counts match its rows) through the store's export walks and writes
 * through cli_output (output.h). It must never change the session (it is
 * opened read-only), never hold a table in memory (rows stream from SQLite
 * straight to the output), and never write text that breaks its format
 * (every string through cli_output's escaping).
 */
#ifndef FLARE_CLI_EXPORT_H
#define FLARE_CLI_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#include "cli/output.h"
#include "cli/session.h"
#include "store/store.h"
#include "store/store_export.h"

/* Why an export failed, when the reason is not a write error (the command
 * reports those, as it knows the output's name). */
typedef struct cli_export_failure {
    char message[1024];
} cli_export_failure;

/* One format: its name for --format, and the function that writes the
 * whole export. write returns 0, or -1 with failure filled in or a write
 * error left in output. */
typedef struct cli_export_format {
    const char *name;
    int (*write)(const cli_session *session, cli_output *output, cli_export_failure *failure);
} cli_export_format;

extern const cli_export_format cli_export_perfetto;
extern const cli_export_format cli_export_csv;
extern const cli_export_format cli_export_json;

/* ---- shared by the formats (export.c) ---- */

/* The session's identity, shared by the perfetto and json formats:
 * ,"command":...,"host":...,"flare_version":... */
void cli_export_session_identity(cli_output *output, const store_session_summary *summary);

/* Non-zero, with "reading WHAT: <the store's error>" in failure, when
 * status (a store export walk's) is not 0; 0 otherwise. */
int cli_export_read_failed(const cli_session *session, int status, const char *what,
                           cli_export_failure *failure);

/* ---- the kernel table, written by csv and json (export_kernels.c) ---- */

/* Column names, in order (csv's header row). */
extern const char *const cli_export_kernel_columns[];
#define CLI_EXPORT_KERNEL_COLUMN_COUNT 18

/* One kernel's fields in column order, separated by commas: the name
 * through text (the format's escaping), the numbers in decimal; each
 * preceded by "COLUMN": when named is set (json). */
void cli_export_kernel_fields(cli_output *output, const store_kernel_row *row, int named,
                              void (*text)(cli_output *output, const char *text));

/* Walks the kernels in order, row by row, into callback (which returns
 * non-zero to stop, after a write error). Returns 0, or -1 with failure
 * filled in or a write error in output. */
int cli_export_kernel_rows(const cli_session *session, cli_output *output,
                           store_export_kernel_callback callback, void *user,
                           cli_export_failure *failure);

#endif /* FLARE_CLI_EXPORT_H */
