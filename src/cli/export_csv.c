/*
 * export_csv.c: `flare export --format csv`, the kernel table as CSV
 * (RFC 4180): a header row, then one row per kernel, each record ended by
 * CRLF, which every CSV reader accepts.
 *
 * It must never write a name unquoted that holds a comma, a quote or a line
 * break (cli_output_csv_field quotes it), nor hold more than one row.
 */
#include "cli/export.h"

static int csv_row(const store_kernel_row *row, void *user)
{
    cli_output *output = user;
    cli_export_kernel_fields(output, row, 0, cli_output_csv_field);
    cli_output_text(output, "\r\n");
    return cli_output_failed(output);
}

static int csv_write(const cli_session *session, cli_output *output, cli_export_failure *failure)
{
    for (size_t i = 0; i < CLI_EXPORT_KERNEL_COLUMN_COUNT; i++) {
        if (i > 0)
            cli_output_char(output, ',');
        cli_output_text(output, cli_export_kernel_columns[i]);
    }
    cli_output_text(output, "\r\n");
    return cli_export_kernel_rows(session, output, csv_row, output, failure);
}

const cli_export_format cli_export_csv = {
    .name = "csv",
    .write = csv_write,
};
