/*
 * export_kernels.c: the kernel table that `flare export --format csv` and
 * `--format json` both write: its columns, one kernel's values in column
 * order, and the walk over the kernels.
 *
 * One table for both formats, so their columns cannot drift apart. It must
 * never hold more than one row: rows stream from SQLite to the format.
 */
#include "cli/export.h"

/* The kernel's name, the only text column. */
#define KERNEL_NAME_COLUMN 4

const char *const cli_export_kernel_columns[] = {
    "pid",
    "device",
    "stream",
    "correlation_id",
    "name",
    "start_ns",
    "end_ns",
    "duration_ns",
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
    "shared_memory_bytes",
    "registers_per_thread",
    "graph_id",
    "graph_node_id",
};
_Static_assert(sizeof cli_export_kernel_columns / sizeof cli_export_kernel_columns[0] ==
                   CLI_EXPORT_KERNEL_COLUMN_COUNT,
               "CLI_EXPORT_KERNEL_COLUMN_COUNT counts cli_export_kernel_columns");

/* One kernel's values in column order (the name column's is 0): uint64
 * columns travel as int64 bit patterns, with is_unsigned set. */
typedef struct kernel_value {
    int64_t value;
    int is_unsigned;
} kernel_value;

static void kernel_values(const store_kernel_row *row,
                          kernel_value values[CLI_EXPORT_KERNEL_COLUMN_COUNT])
{
    uint64_t duration = row->end_ns > row->start_ns ? row->end_ns - row->start_ns : 0;
    const kernel_value fields[CLI_EXPORT_KERNEL_COLUMN_COUNT] = {
        {row->pid, 0},
        {row->device, 0},
        {(int64_t)row->stream_id, 1},
        {(int64_t)row->correlation_id, 1},
        {0, 0}, /* name */
        {(int64_t)row->start_ns, 1},
        {(int64_t)row->end_ns, 1},
        {(int64_t)duration, 1},
        {row->grid[0], 1},
        {row->grid[1], 1},
        {row->grid[2], 1},
        {row->block[0], 1},
        {row->block[1], 1},
        {row->block[2], 1},
        {row->shared_memory_bytes, 1},
        {row->registers_per_thread, 1},
        {row->graph_id, 1},
        {(int64_t)row->graph_node_id, 1},
    };
    for (size_t i = 0; i < CLI_EXPORT_KERNEL_COLUMN_COUNT; i++)
        values[i] = fields[i];
}

void cli_export_kernel_fields(cli_output *output, const store_kernel_row *row, int named,
                              void (*text)(cli_output *output, const char *text))
{
    kernel_value values[CLI_EXPORT_KERNEL_COLUMN_COUNT];
    kernel_values(row, values);
    for (size_t i = 0; i < CLI_EXPORT_KERNEL_COLUMN_COUNT; i++) {
        if (i > 0)
            cli_output_char(output, ',');
        if (named) {
            cli_output_char(output, '"');
            cli_output_text(output, cli_export_kernel_columns[i]);
            cli_output_text(output, "\":");
        }
        if (i == KERNEL_NAME_COLUMN)
            text(output, row->name);
        else
            cli_output_number(output, values[i].value, values[i].is_unsigned);
    }
}

int cli_export_kernel_rows(const cli_session *session, cli_output *output,
                           store_export_kernel_callback callback, void *user,
                           cli_export_failure *failure)
{
    int status = store_export_kernels(session->database, callback, user);
    if (cli_export_read_failed(session, status, "kernels", failure) || cli_output_failed(output))
        return -1;
    return 0;
}
