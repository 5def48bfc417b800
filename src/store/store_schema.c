/*
 * store_schema.c: the session database's tables, as the DDL that makes
 * them (docs/schema.md describes each). store.c runs these statements, in
 * order, when it creates a session or brings an older one up to date, so
 * every statement must be idempotent (IF NOT EXISTS, INSERT OR IGNORE) and
 * a version may only add: a table, a column with a default, an index. No
 * code here, only the statements.
 */
#include <stddef.h>

#include "store/store.h"
#include "store/store_internal.h"

/* The columns replay_launches and replay_spans share, in the order of
 * STORE_REPLAY_RUN_MEMBERS (store_replay.h). */
#define STORE_REPLAY_RUN_DDL                                                                       \
    " passes_planned INTEGER NOT NULL,"                                                            \
    " passes_run INTEGER NOT NULL,"                                                                \
    " declined INTEGER NOT NULL,"                                                                  \
    " reason TEXT NOT NULL,"                                                                       \
    " begin_ns INTEGER NOT NULL,"                                                                  \
    " end_ns INTEGER NOT NULL,"                                                                    \
    " drain_ns INTEGER NOT NULL,"                                                                  \
    " snapshot_bytes INTEGER NOT NULL,"                                                            \
    " shadow_on_device INTEGER NOT NULL,"                                                          \
    " snapshot_ns INTEGER NOT NULL,"                                                               \
    " restore_ns INTEGER NOT NULL,"                                                                \
    " bytes_restored INTEGER NOT NULL,"                                                            \
    " collector TEXT NOT NULL,"

/*
 * Version 3. Every uint64 is stored as INTEGER through a cast to int64 (a
 * value above INT64_MAX reads back negative in SQL and exact in C). Only
 * the tables the collector appends to at high rate (kernels, copies, scopes,
 * log) have no secondary index: each index would cost the writer a B-tree
 * insert per row, and `flare report` scans them whole anyway.
 */
const char *const store_schema_ddl[] = {
    "CREATE TABLE IF NOT EXISTS meta ("
    " key TEXT PRIMARY KEY NOT NULL,"
    " value NOT NULL)",

    "CREATE TABLE IF NOT EXISTS session ("
    " id INTEGER PRIMARY KEY CHECK (id = 1),"
    " command TEXT,"
    " start_ns INTEGER NOT NULL,"
    " end_ns INTEGER,"
    " start_unix_ns INTEGER NOT NULL,"
    " has_exit_status INTEGER NOT NULL DEFAULT 0,"
    " exit_status INTEGER,"
    " host TEXT,"
    " flare_version TEXT)",

    "CREATE TABLE IF NOT EXISTS processes ("
    " pid INTEGER PRIMARY KEY,"
    " parent_pid INTEGER NOT NULL,"
    " start_ns INTEGER NOT NULL,"
    " end_ns INTEGER,"
    " backend TEXT,"
    " executable TEXT)",

    "CREATE TABLE IF NOT EXISTS devices ("
    " pid INTEGER NOT NULL,"
    " device INTEGER NOT NULL,"
    " name TEXT,"
    " backend TEXT,"
    " PRIMARY KEY (pid, device))",

    "CREATE TABLE IF NOT EXISTS names ("
    " id INTEGER PRIMARY KEY,"
    " name TEXT NOT NULL UNIQUE)",

    "CREATE TABLE IF NOT EXISTS kernels ("
    " pid INTEGER NOT NULL,"
    " device INTEGER NOT NULL,"
    " stream_id INTEGER NOT NULL,"
    " correlation_id INTEGER NOT NULL,"
    " name_id INTEGER NOT NULL REFERENCES names(id),"
    " start_ns INTEGER NOT NULL,"
    " end_ns INTEGER NOT NULL,"
    " grid_x INTEGER NOT NULL,"
    " grid_y INTEGER NOT NULL,"
    " grid_z INTEGER NOT NULL,"
    " block_x INTEGER NOT NULL,"
    " block_y INTEGER NOT NULL,"
    " block_z INTEGER NOT NULL,"
    " shared_memory_bytes INTEGER NOT NULL,"
    " registers_per_thread INTEGER NOT NULL,"
    " context_id INTEGER NOT NULL DEFAULT 0,"
    " graph_id INTEGER NOT NULL DEFAULT 0,"
    " graph_node_id INTEGER NOT NULL DEFAULT 0)",

    "CREATE TABLE IF NOT EXISTS metrics ("
    " pid INTEGER NOT NULL,"
    " device INTEGER NOT NULL,"
    " name_id INTEGER NOT NULL REFERENCES names(id),"
    " time_ns INTEGER NOT NULL,"
    " value INTEGER NOT NULL)",

    "CREATE TABLE IF NOT EXISTS external_correlations ("
    " pid INTEGER NOT NULL,"
    " correlation_id INTEGER NOT NULL,"
    " external_kind INTEGER NOT NULL,"
    " external_id INTEGER NOT NULL)",

    "CREATE TABLE IF NOT EXISTS capabilities ("
    " pid INTEGER NOT NULL,"
    " feature TEXT NOT NULL,"
    " requested INTEGER NOT NULL,"
    " status TEXT NOT NULL,"
    " reason TEXT NOT NULL,"
    " PRIMARY KEY(pid, feature))",

    "CREATE TABLE IF NOT EXISTS copies ("
    " pid INTEGER NOT NULL,"
    " device INTEGER NOT NULL,"
    " stream_id INTEGER NOT NULL,"
    " correlation_id INTEGER NOT NULL,"
    " is_memset INTEGER NOT NULL,"
    " copy_kind INTEGER NOT NULL,"
    " bytes INTEGER NOT NULL,"
    " start_ns INTEGER NOT NULL,"
    " end_ns INTEGER NOT NULL,"
    " status INTEGER NOT NULL,"
    " graph_id INTEGER NOT NULL DEFAULT 0,"
    " graph_node_id INTEGER NOT NULL DEFAULT 0)",

    "CREATE TABLE IF NOT EXISTS graph_launches ("
    " pid INTEGER NOT NULL,"
    " correlation_id INTEGER NOT NULL,"
    " thread_id INTEGER NOT NULL,"
    " time_ns INTEGER NOT NULL,"
    " stream_id INTEGER NOT NULL,"
    " graph_exec INTEGER NOT NULL,"
    " scope_instance_id INTEGER,"
    " scope_name TEXT)",

    "CREATE TABLE IF NOT EXISTS scopes ("
    " pid INTEGER NOT NULL,"
    " thread_id INTEGER NOT NULL,"
    " instance_id INTEGER NOT NULL,"
    " name_id INTEGER NOT NULL REFERENCES names(id),"
    " depth INTEGER NOT NULL,"
    " start_ns INTEGER NOT NULL,"
    " end_ns INTEGER NOT NULL,"
    " still_open INTEGER NOT NULL)",

    "CREATE TABLE IF NOT EXISTS drops ("
    " pid INTEGER NOT NULL,"
    " source TEXT NOT NULL,"
    " detail TEXT NOT NULL,"
    " count INTEGER NOT NULL,"
    " PRIMARY KEY (pid, source, detail))",

    "CREATE TABLE IF NOT EXISTS log ("
    " pid INTEGER NOT NULL,"
    " time_ns INTEGER NOT NULL,"
    " level TEXT NOT NULL,"
    " message TEXT NOT NULL)",

    /* Version 2: application counters. */
    "CREATE TABLE IF NOT EXISTS counters ("
    " pid INTEGER NOT NULL,"
    " counter INTEGER NOT NULL,"
    " name TEXT NOT NULL,"
    " PRIMARY KEY (pid, counter))",

    "CREATE TABLE IF NOT EXISTS counter_samples ("
    " pid INTEGER NOT NULL,"
    " counter INTEGER NOT NULL,"
    " time_ns INTEGER NOT NULL,"
    " value INTEGER NOT NULL)",

    /* Version 3: deep-profiling windows (docs/windows.md). */
    "CREATE TABLE IF NOT EXISTS windows ("
    " pid INTEGER NOT NULL,"
    " id INTEGER NOT NULL,"
    " token_kind TEXT NOT NULL,"
    " label TEXT NOT NULL,"
    " rule_id INTEGER,"
    " rule_text TEXT,"
    " comparison TEXT,"
    " threshold REAL,"
    " rate_window_ns INTEGER,"
    " sustained_ns INTEGER,"
    " first_true_ns INTEGER,"
    " observed_value REAL,"
    " observed_partial INTEGER NOT NULL DEFAULT 0,"
    " max_duration_ns INTEGER NOT NULL,"
    " max_launches INTEGER NOT NULL,"
    " requested_ns INTEGER NOT NULL,"
    " opened_ns INTEGER,"
    " closed_ns INTEGER,"
    " close_reason TEXT NOT NULL,"
    " launches INTEGER NOT NULL,"
    " engine TEXT NOT NULL,"
    " engine_status TEXT NOT NULL,"
    " engine_reason TEXT NOT NULL,"
    " engine_samples INTEGER NOT NULL,"
    " PRIMARY KEY (pid, id))",

    /* Version 4: deep-profiling rule summaries (docs/rules.md). */
    "CREATE TABLE IF NOT EXISTS rules ("
    " pid INTEGER NOT NULL,"
    " rule_id INTEGER NOT NULL,"
    " text TEXT NOT NULL,"
    " canonical TEXT NOT NULL,"
    " status TEXT NOT NULL,"
    " reason TEXT NOT NULL,"
    " times_true INTEGER NOT NULL,"
    " windows_fired INTEGER NOT NULL,"
    " busy_refusals INTEGER NOT NULL,"
    " stale_readings INTEGER NOT NULL,"
    " missing_readings INTEGER NOT NULL,"
    " last_value REAL,"
    " sequence INTEGER NOT NULL,"
    " PRIMARY KEY (pid, rule_id))",

    /* Version 5: PM samples (docs/pm-sampling.md), kernel and range replay (docs/replay.md). */
    "CREATE TABLE IF NOT EXISTS pm_samples ("
    " pid INTEGER NOT NULL,"
    " window_id INTEGER NOT NULL,"
    " device INTEGER NOT NULL,"
    " sample_index INTEGER NOT NULL,"
    " start_ns INTEGER NOT NULL,"
    " end_ns INTEGER NOT NULL,"
    " scope_instance_id INTEGER,"
    " scope_name TEXT,"
    " overflow INTEGER NOT NULL DEFAULT 0,"
    " metric TEXT NOT NULL,"
    " value REAL)",

    "CREATE TABLE IF NOT EXISTS replay_launches ("
    " pid INTEGER NOT NULL,"
    " launch_id INTEGER NOT NULL,"
    " device INTEGER NOT NULL,"
    " stream_id INTEGER NOT NULL,"
    " kernel TEXT NOT NULL,"
    " launch_index INTEGER NOT NULL," STORE_REPLAY_RUN_DDL " span_id INTEGER,"
    " PRIMARY KEY (pid, launch_id))",

    /* Range replay: one row per span; its kernels are replay_launches rows
     * carrying its span_id, its pass times replay_passes rows under
     * launch_id = span_id (span and launch ids share one counter). */
    "CREATE TABLE IF NOT EXISTS replay_spans ("
    " pid INTEGER NOT NULL,"
    " span_id INTEGER NOT NULL,"
    " name TEXT NOT NULL,"
    " occurrence INTEGER NOT NULL,"
    " device INTEGER NOT NULL,"
    " kernels INTEGER NOT NULL,"
    " copies INTEGER NOT NULL," STORE_REPLAY_RUN_DDL " PRIMARY KEY (pid, span_id))",
    /* A span's kernels are read per span; a step holds hundreds. */
    "CREATE INDEX IF NOT EXISTS replay_launches_by_span ON replay_launches(pid, span_id)",

    "CREATE TABLE IF NOT EXISTS replay_passes ("
    " pid INTEGER NOT NULL,"
    " launch_id INTEGER NOT NULL,"
    " pass INTEGER NOT NULL,"
    " start_ns INTEGER NOT NULL,"
    " end_ns INTEGER NOT NULL,"
    " PRIMARY KEY (pid, launch_id, pass))",

    "CREATE TABLE IF NOT EXISTS replay_metrics ("
    " pid INTEGER NOT NULL,"
    " launch_id INTEGER NOT NULL,"
    " metric TEXT NOT NULL,"
    " value REAL,"
    " PRIMARY KEY (pid, launch_id, metric))",

    /* Version 7 adds name tables and views (store_views.c) and indexes
     * built after collection; no table changed. */

    /* Version 8: the host side of launches, copies and memsets, and
     * launch storms (docs/schema.md). */
    "CREATE TABLE IF NOT EXISTS api_calls ("
    " pid INTEGER NOT NULL,"
    " thread_id INTEGER NOT NULL,"
    " correlation_id INTEGER NOT NULL,"
    " name_id INTEGER NOT NULL REFERENCES names(id),"
    " start_ns INTEGER NOT NULL,"
    " end_ns INTEGER NOT NULL)",

    "CREATE TABLE IF NOT EXISTS storms ("
    " pid INTEGER NOT NULL,"
    " device INTEGER NOT NULL,"
    " start_ns INTEGER NOT NULL,"
    " end_ns INTEGER NOT NULL,"
    " untimed_launches INTEGER NOT NULL,"
    " still_open INTEGER NOT NULL)",

    /* The flight recorder's per-second totals of evicted detail rows
     * (store_evict.c): second counts whole seconds from session.start_ns.
     * Small (a row per second per name), so keyed for the additions each
     * eviction makes to a second it already began. */
    "CREATE TABLE IF NOT EXISTS kernel_seconds ("
    " pid INTEGER NOT NULL,"
    " second INTEGER NOT NULL,"
    " name_id INTEGER NOT NULL REFERENCES names(id),"
    " count INTEGER NOT NULL,"
    " gpu_ns INTEGER NOT NULL,"
    " PRIMARY KEY (pid, second, name_id)) WITHOUT ROWID",

    "CREATE TABLE IF NOT EXISTS copy_seconds ("
    " pid INTEGER NOT NULL,"
    " second INTEGER NOT NULL,"
    " is_memset INTEGER NOT NULL,"
    " copy_kind INTEGER NOT NULL,"
    " count INTEGER NOT NULL,"
    " bytes INTEGER NOT NULL,"
    " gpu_ns INTEGER NOT NULL,"
    " PRIMARY KEY (pid, second, is_memset, copy_kind)) WITHOUT ROWID",

    "CREATE TABLE IF NOT EXISTS api_call_seconds ("
    " pid INTEGER NOT NULL,"
    " second INTEGER NOT NULL,"
    " name_id INTEGER NOT NULL REFERENCES names(id),"
    " count INTEGER NOT NULL,"
    " host_ns INTEGER NOT NULL,"
    " PRIMARY KEY (pid, second, name_id)) WITHOUT ROWID",

    "CREATE TABLE IF NOT EXISTS metric_seconds ("
    " pid INTEGER NOT NULL,"
    " device INTEGER NOT NULL,"
    " name_id INTEGER NOT NULL REFERENCES names(id),"
    " second INTEGER NOT NULL,"
    " samples INTEGER NOT NULL,"
    " min_value INTEGER NOT NULL,"
    " max_value INTEGER NOT NULL,"
    " sum_value INTEGER NOT NULL,"
    " PRIMARY KEY (pid, device, name_id, second)) WITHOUT ROWID",

    /* Version 9: where each process ran (a rank of a distributed job) and
     * pairs of its clock with wall-clock time, to align sessions of
     * several hosts (docs/fleet.md). */
    "CREATE TABLE IF NOT EXISTS process_ranks ("
    " pid INTEGER PRIMARY KEY,"
    " host TEXT NOT NULL,"
    " rank INTEGER,"
    " local_rank INTEGER,"
    " world_size INTEGER,"
    " job_id TEXT)",

    "CREATE TABLE IF NOT EXISTS clock_pairs ("
    " pid INTEGER NOT NULL,"
    " clock_ns INTEGER NOT NULL,"
    " unix_ns INTEGER NOT NULL,"
    " PRIMARY KEY (pid, clock_ns))",

    /* Version 10: replays that rules asked for (action replay / range),
     * each naming its rule, reading, kernel and why (docs/rules.md). */
    "CREATE TABLE IF NOT EXISTS triggered_replays ("
    " pid INTEGER NOT NULL,"
    " id INTEGER NOT NULL,"
    " rule_id INTEGER NOT NULL,"
    " rule_text TEXT NOT NULL,"
    " comparison TEXT NOT NULL,"
    " threshold REAL,"
    " observed_value REAL,"
    " action TEXT NOT NULL,"
    " target TEXT NOT NULL,"
    " why TEXT NOT NULL,"
    " fired_ns INTEGER NOT NULL,"
    " taken_ns INTEGER,"
    " done_ns INTEGER NOT NULL,"
    " status TEXT NOT NULL,"
    " reason TEXT NOT NULL,"
    " launch_id INTEGER,"
    " PRIMARY KEY (pid, id))",

    /* Version 11: PC samples of deep windows (docs/schema.md), one row
     * per (window, device, function, pc offset, stall reason) aggregate.
     * Few rows per window (the engine's table is bounded), written once per
     * window, read per window: the key is the index. */
    "CREATE TABLE IF NOT EXISTS pc_samples ("
    " pid INTEGER NOT NULL,"
    " window_id INTEGER NOT NULL,"
    " device INTEGER NOT NULL,"
    " name_id INTEGER NOT NULL REFERENCES names(id),"
    " pc_offset INTEGER NOT NULL,"
    " stall_reason TEXT NOT NULL,"
    " samples INTEGER NOT NULL,"
    " first_ns INTEGER NOT NULL,"
    " last_ns INTEGER NOT NULL,"
    " PRIMARY KEY (pid, window_id, device, name_id, pc_offset, stall_reason))",

    /* Version 12: the source line of each sampled instruction, where its
     * binary carries line information (docs/schema.md). A property of the
     * instruction, not of a window: one row per (process, function, pc
     * offset), however many windows sampled it. */
    "CREATE TABLE IF NOT EXISTS pc_lines ("
    " pid INTEGER NOT NULL,"
    " name_id INTEGER NOT NULL REFERENCES names(id),"
    " pc_offset INTEGER NOT NULL,"
    " file_name_id INTEGER NOT NULL REFERENCES names(id),"
    " line INTEGER NOT NULL,"
    " PRIMARY KEY (pid, name_id, pc_offset))",

    /* Version 13: SASS metrics of deep windows (store_sass.h,
     * docs/schema.md), one row per (window, device, function, pc offset,
     * metric) aggregate; the instruction's line is in pc_lines, shared
     * with PC samples. Written once per window, read per window: the key
     * is the index. */
    "CREATE TABLE IF NOT EXISTS sass_metrics ("
    " pid INTEGER NOT NULL,"
    " window_id INTEGER NOT NULL,"
    " device INTEGER NOT NULL,"
    " name_id INTEGER NOT NULL REFERENCES names(id),"
    " pc_offset INTEGER NOT NULL,"
    " metric TEXT NOT NULL,"
    " value INTEGER NOT NULL,"
    " PRIMARY KEY (pid, window_id, device, name_id, pc_offset, metric))",

    /* Version 14: kernel launches the GPU did not time (a SASS metrics
     * window's quiet), by which the window's SASS values are split over
     * scopes (store_pc_scope.c); read per (pid, function) over a window's
     * time. */
    "CREATE TABLE IF NOT EXISTS untimed_launches ("
    " pid INTEGER NOT NULL,"
    " correlation_id INTEGER NOT NULL,"
    " thread_id INTEGER NOT NULL,"
    " time_ns INTEGER NOT NULL,"
    " device INTEGER NOT NULL,"
    " name_id INTEGER NOT NULL REFERENCES names(id),"
    " scope_instance_id INTEGER)",
    ("CREATE INDEX IF NOT EXISTS untimed_launches_by_name ON untimed_launches(pid, name_id, "
     "time_ns)"),

    /* Version 15: the machine code of sampled functions built without line
     * information (store_pc_code.h): which cubin holds a function and the
     * symbol it names it by (pc_code), the cubin's bytes until the session's
     * end disassembles them (pc_cubins), and the SASS text of the sampled
     * instructions (pc_instructions), shown where no source line is. */
    "CREATE TABLE IF NOT EXISTS pc_code ("
    " pid INTEGER NOT NULL,"
    " name_id INTEGER NOT NULL REFERENCES names(id),"
    " cubin_crc INTEGER NOT NULL,"
    " symbol TEXT NOT NULL,"
    " PRIMARY KEY (pid, name_id))",
    "CREATE TABLE IF NOT EXISTS pc_cubins ("
    " pid INTEGER NOT NULL,"
    " cubin_crc INTEGER NOT NULL,"
    " bytes BLOB NOT NULL,"
    " PRIMARY KEY (pid, cubin_crc))",
    "CREATE TABLE IF NOT EXISTS pc_instructions ("
    " pid INTEGER NOT NULL,"
    " name_id INTEGER NOT NULL REFERENCES names(id),"
    " pc_offset INTEGER NOT NULL,"
    " sass TEXT NOT NULL,"
    " PRIMARY KEY (pid, name_id, pc_offset))",

    /* Version 16: how each value of a replayed kernel was produced, where
     * the collector said (range replay by PM sampling: the method, the
     * value's status, its error bound in the value's unit, and how many
     * samples overlapped the kernel); no row: the launch's collector
     * measured it exactly. */
    "CREATE TABLE IF NOT EXISTS replay_value_methods ("
    " pid INTEGER NOT NULL,"
    " launch_id INTEGER NOT NULL,"
    " metric TEXT NOT NULL,"
    " method TEXT NOT NULL,"
    " status TEXT NOT NULL,"
    " error_bound REAL,"
    " samples INTEGER NOT NULL,"
    " PRIMARY KEY (pid, launch_id, metric))",

    "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', 16), ('created_by', 'flare')",
};

/* The INSERT above hard-codes the version so the DDL stays one literal
 * table; this keeps the two from drifting apart. */
_Static_assert(STORE_SCHEMA_VERSION == 16, "update the meta row in store_schema_ddl");

const size_t store_schema_ddl_count = sizeof store_schema_ddl / sizeof store_schema_ddl[0];
