/*
 * store_graphs.c: the CUDA graphs of a session, read back for `flare
 * report` (store.h, docs/schema.md "graph_launches").
 *
 * A graph is identified by (pid, graph_id) from the kernels its launches
 * ran; its launches are the distinct correlation ids of that work, and who
 * launched it comes from graph_launches rows joined on those ids. Read-only;
 * never called while a session writes.
 */
#include <sqlite3.h>
#include <stdint.h>
#include <string.h>

#include "flare/flare.h"
#include "store/store_internal.h"

/* One row per graph and kernel name, graphs by GPU time, names within by
 * GPU time; each row also carries its graph's totals and who launched it. */
static const char graph_select_sql[] =
    "WITH g AS (SELECT pid, graph_id, COUNT(DISTINCT correlation_id) AS launches, "
    "  COUNT(*) AS kernels, COUNT(DISTINCT graph_node_id) AS kernel_nodes, "
    "  SUM(MAX(end_ns - start_ns, 0)) AS gpu_ns FROM kernels WHERE graph_id != 0 "
    "  GROUP BY pid, graph_id), "
    "c AS (SELECT pid, graph_id, COUNT(*) AS copies FROM copies WHERE graph_id != 0 "
    "  GROUP BY pid, graph_id), "
    "l AS (SELECT k.pid, k.graph_id, COALESCE(NULLIF(gl.scope_name, ''), '(no range)') AS scope, "
    "  COUNT(DISTINCT gl.correlation_id) AS launches FROM (SELECT DISTINCT pid, graph_id, "
    "  correlation_id FROM kernels WHERE graph_id != 0) k JOIN graph_launches gl "
    "  ON gl.pid = k.pid AND gl.correlation_id = k.correlation_id GROUP BY 1, 2, 3), "
    "f AS (SELECT pid, graph_id, GROUP_CONCAT(scope || ' x' || launches, ', ') AS launched_from "
    "  FROM (SELECT * FROM l ORDER BY launches DESC, scope) GROUP BY pid, graph_id) "
    "SELECT g.pid, g.graph_id, g.launches, g.kernels, g.kernel_nodes, COALESCE(c.copies, 0), "
    "  g.gpu_ns, COALESCE(f.launched_from, ''), n.name, COUNT(*), SUM(MAX(k.end_ns - "
    "  k.start_ns, 0)) AS name_ns "
    "FROM g JOIN kernels k ON k.pid = g.pid AND k.graph_id = g.graph_id "
    "JOIN names n ON n.id = k.name_id "
    "LEFT JOIN c ON c.pid = g.pid AND c.graph_id = g.graph_id "
    "LEFT JOIN f ON f.pid = g.pid AND f.graph_id = g.graph_id "
    "GROUP BY g.pid, g.graph_id, n.name ORDER BY g.gpu_ns DESC, g.pid, g.graph_id, name_ns DESC, "
    "n.name";

static int store_graph_row_handler(sqlite3_stmt *statement, void *user)
{
    store_graph_row row;
    memset(&row, 0, sizeof(row));
    row.pid = sqlite3_column_int64(statement, 0);
    row.graph_id = (uint32_t)sqlite3_column_int64(statement, 1);
    row.launches = (uint64_t)sqlite3_column_int64(statement, 2);
    row.kernels = (uint64_t)sqlite3_column_int64(statement, 3);
    row.kernel_nodes = (uint64_t)sqlite3_column_int64(statement, 4);
    row.copies = (uint64_t)sqlite3_column_int64(statement, 5);
    row.gpu_ns = (uint64_t)sqlite3_column_int64(statement, 6);
    row.launched_from = store_column_text_or_empty(statement, 7);
    row.kernel_name = store_column_text_or_empty(statement, 8);
    row.name_count = (uint64_t)sqlite3_column_int64(statement, 9);
    row.name_gpu_ns = (uint64_t)sqlite3_column_int64(statement, 10);
    return STORE_READER_CALL(store_graph_callback, &row, user);
}

int store_read_graphs(store *handle, store_graph_callback callback, void *user)
{
    if (handle == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    return store_query_each(handle, graph_select_sql, NULL, store_graph_row_handler,
                            &(store_reader_call){&callback, user}, "cannot read the CUDA graphs");
}
