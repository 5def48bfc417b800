/*
 * replay_internal.h: what the replay module's files share. Nothing outside
 * src/replay/ may include it; the rest of flare uses replay.h.
 */
#ifndef FLARE_REPLAY_REPLAY_INTERNAL_H
#define FLARE_REPLAY_REPLAY_INTERNAL_H

#include "replay/replay.h"

#include <stdatomic.h>
#include <stdbool.h>

/* Process-wide: how many things make replay "configured" (tools, a
 * selection). The gate's fast path reads it with one relaxed load. */
extern atomic_int replay_configured_count;

/* Tells the backend that replay is (about to be) configured (replay_registry.c). */
void replay_notify_configured(void);

/* Settings (replay_settings.c). */
void replay_settings_current(replay_settings *settings);

/* Inventory (replay_inventory.c). */
typedef struct replay_allocation {
    uintptr_t address;
    size_t bytes;
    replay_allocation_kind kind;
} replay_allocation;
/* Copies the device's allocations into a new array (*out, free()); returns
 * the count, or -1 when out of memory. untracked_reason (size bytes) gets
 * the device's untracked reason, "" when none. */
long replay_inventory_copy(int device, replay_allocation **out, char *untracked_reason,
                           size_t untracked_reason_size);

/* Snapshot (replay_snapshot.c): shadows of every tracked allocation of a
 * device, and the copies that restore them. */
typedef struct replay_snapshot {
    const replay_device_ops *ops;
    int device;
    replay_allocation *allocations;
    long count;
    void **shadows;
    replay_copy *copies; /* shadow -> allocation, once taken */
    bool on_device;
    uint64_t bytes;
    uint64_t copy_ns; /* time of the snapshot copy */
} replay_snapshot;
/* NULL on success, else the decline reason (written to reason); either way
 * replay_snapshot_free must follow. */
const char *replay_snapshot_take(replay_snapshot *snapshot, const replay_device_ops *ops,
                                 const replay_settings *settings, int device, char *reason,
                                 size_t reason_size);
/* Writes every shadow back and counts it in record (restore time, bytes)
 * and the stats; 0, or a failure with detail filled ("restore failed
 * part-way: ..."). */
int replay_snapshot_restore(replay_snapshot *snapshot, uint64_t timeout_ns, replay_record *record,
                            char *detail, size_t detail_size);
/* Keeps a finished pass's times in record (the first REPLAY_RECORD_PASS_MAX)
 * and counts it. */
void replay_record_pass(replay_record *record, uint32_t pass, uint64_t start_ns, uint64_t end_ns);
void replay_snapshot_free(replay_snapshot *snapshot);

/* Gate (replay_gate.c). The writer side waits at most timeout_ns. */
int replay_gate_writer_enter(int device, uint64_t timeout_ns);
void replay_gate_writer_exit(int device);
/* The writer's sign of life (after entering, and at every pass): what it is
 * doing (for a stuck reader's message, e.g. "replay of kernel k (launch 4),
 * pass 2") and how long it may go without another sign (replay_gate_stall_ns).
 * A reader waiting longer than that past the last sign calls the abort
 * handler: the replay is stuck where no timeout of its own can end it
 * (inside CUPTI or the driver), and letting the launch through would let a
 * later restore revert it. */
void replay_gate_writer_progress(int device, const char *what, uint64_t stall_ns);
/* The stall bound for settings: two pass timeouts (a pass's wait and the
 * restore before it) and two drain timeouts (the drains before a snapshot). */
uint64_t replay_gate_stall_ns(const replay_settings *settings);
int replay_gate_reader_enter_always(int device);
/* Tests: the writers and readers waiting at device's gate now, so a test
 * waits for a thread to be queued there instead of sleeping. */
void replay_gate_waiting(int device, int *writers, int *readers);

/* Thread state (replay_registry.c): depth of replay loops this thread runs,
 * whether it is inside a pass_enter callback, and its context toggles. */
typedef struct replay_thread_state {
    int loop_depth;
    int in_pass_enter;
    uint32_t active_contexts; /* bit i: context i active (inside a loop) */
} replay_thread_state;
replay_thread_state *replay_thread(void);

/* Tools and contexts (replay_registry.c). */
typedef struct replay_tool_snapshot {
    int count;
    int ids[FLARE_REPLAY_TOOL_MAX];
    flare_replay_tool tools[FLARE_REPLAY_TOOL_MAX];
} replay_tool_snapshot;
void replay_registry_snapshot(replay_tool_snapshot *snapshot);
/* Whether any tool is registered (one relaxed load). */
bool replay_registry_has_tools(void);
/* Context ids: 0 is the built-in metric collection. */
#define REPLAY_CONTEXT_METRICS 0
uint32_t replay_contexts_all_mask(void);

/* Selection (replay_selection.c): whether the built-in metric collection
 * wants this launch, and its metric list (valid until the next apply). */
/* Whether kernel_name's launch is to be replayed; *trigger_id receives the
 * triggered replay it takes (0: none). */
bool replay_selection_matches(const char *kernel_name, uint64_t *trigger_id);
/* Whether a selection is installed (flare replay's, or the triggers'). */
bool replay_selection_installed(void);
/* The armed trigger's id when kernel_name is its kernel (it is then taken);
 * else 0. One atomic load when none is armed. */
uint64_t replay_trigger_take(const char *kernel_name);
/* The armed range trigger's id when range_name is its range (it is then
 * taken); else 0. Called when an occurrence of the selected range starts. */
uint64_t replay_trigger_take_range(const char *range_name);
/* A record of a triggered launch is being queued: finishes its trigger. */
void replay_trigger_finished(const replay_record *record);
/* A taken trigger whose launch got no record (out of memory): finished as
 * declined, with reason. */
void replay_trigger_lost(uint64_t id, const char *reason);
const replay_metric_collector *replay_metric_collector_current(void);

/* Method (replay_method.c): checks a selection's method fields (0, or -1
 * with error), then installs them with the selection. */
int replay_method_check(const replay_selection *selection, char *error, size_t error_size);
void replay_method_install(const replay_selection *selection);
/* The PM collector when the installed method is PM, else NULL. */
const replay_metric_collector *replay_method_collector(void);
/* Reads FLARE_REPLAY_METHOD, FLARE_REPLAY_PM_INTERVAL and
 * FLARE_REPLAY_PM_MIN_KERNEL into selection; *any set when one is there.
 * 0, or -1 with error naming the variable. */
int replay_method_from_environment(replay_selection *selection, bool *any, char *error,
                                   size_t error_size);

/* Per-kernel launch index (replay_selection.c). */
uint64_t replay_next_launch_index(const char *kernel_name);

/* Spans (replay_range.c). */
void replay_range_record_launch(const replay_launch_request *request, uint64_t launch_id,
                                uint64_t launch_index);
void replay_range_select_range(const char *name, uint64_t occurrence);
void replay_range_reset_for_tests(void);
/* Launch and span ids share one counter (replay_loop.c), so a span's pass
 * rows never collide with a launch's. */
uint64_t replay_next_id(void);
/* The abort path shared by kernel and range replay (replay_loop.c). */
void replay_call_abort_handler(const char *message);

/* Records (replay_records.c). */
void replay_record_queue(replay_record *record);

/* Stats (replay_loop.c). */
void replay_stats_add(uint64_t replays, uint64_t passes, uint64_t declines, uint64_t gate_waits,
                      uint64_t bytes_restored);
void replay_loop_reset_for_tests(void);
void replay_inventory_reset_for_tests(void);
void replay_selection_reset_for_tests(void);
void replay_registry_reset_for_tests(void);
void replay_records_reset_for_tests(void);

#endif /* FLARE_REPLAY_REPLAY_INTERNAL_H */
