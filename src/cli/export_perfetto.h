/*
 * export_perfetto.h: what the files of `flare export --format perfetto`
 * share: the context of one export, the writing of events, and the tracks
 * (track groups and tracks, each named and given its place once, before its
 * first event).
 *
 * The trace is Chrome's trace-event JSON, which the Perfetto UI and
 * chrome://tracing open. One file per idea: export_perfetto.c the walk, the
 * header and the tracks; export_perfetto_host.c scopes and API calls on the
 * threads of a process; export_perfetto_gpu.c kernels, copies and memsets
 * on the streams of a device, with the flow arrows from their API calls;
 * export_perfetto_counters.c the counter tracks (NVML metrics, application
 * counters, PM samples); export_perfetto_flare.c flare's own tracks (deep
 * windows, rule firings, launch storms, replay), with export_perfetto_pc.c
 * and export_perfetto_sass.c summing a window's PC samples and SASS
 * metrics for its slice's args.
 *
 * None of them may hold a table in memory: rows stream from the store's
 * readers to the output. What grows is bounded by tracks (the maps below),
 * by PM counter tracks (metrics x devices), and by replayed launches (the
 * replay match), never by kernels, calls or samples.
 */
#ifndef FLARE_CLI_EXPORT_PERFETTO_H
#define FLARE_CLI_EXPORT_PERFETTO_H

#include <stddef.h>
#include <stdint.h>

#include "cli/export.h"
#include "cli/output.h"
#include "cli/pair_map.h"

/*
 * Synthetic trace pids for the GPU track groups of (process, device) pairs
 * start here. Linux pids stay below 2^22 (the kernel's largest pid_max), so
 * these can never collide with a real process; trace viewers read pids as
 * 32-bit unsigned numbers, which these fit comfortably.
 */
#define PERFETTO_GPU_PID_BASE 1000000000LL
/* Stream ids above INT32_MAX (never seen from CUPTI, which uses 32 bits) get
 * thread ids counted up from here, for the same 32-bit reason. */
#define PERFETTO_LARGE_STREAM_TID_BASE 0x80000000LL

/*
 * flare's own tracks in a process's track group: synthetic thread ids above
 * any Linux thread id (below 2^22), one track per kind (and per device for
 * storms and replay, whose events on two devices may overlap in time:
 * slices on one track must nest). Rule firings have a track of their own so
 * that an instant never falls across a window's edge.
 */
typedef enum perfetto_flare_track {
    PERFETTO_FLARE_WINDOWS = 0,
    PERFETTO_FLARE_RULES = 1,
    PERFETTO_FLARE_STORMS = 2,
    PERFETTO_FLARE_REPLAY = 3,
    PERFETTO_FLARE_RANGE_REPLAY = 4,
} perfetto_flare_track;
#define PERFETTO_FLARE_TID_BASE 0x7F000000LL
/* Devices per kind: -1 (the process) .. PERFETTO_FLARE_DEVICES - 2. */
#define PERFETTO_FLARE_DEVICES 0x1000LL

/* One PM counter track (a metric of a device of a process): the sample
 * that set its value last, so that it is closed with a 0 when its window
 * ends or a hole follows (export_perfetto_counters.c). */
typedef struct perfetto_pm_track {
    int64_t trace_pid;
    char *metric;
    uint64_t window_id;
    uint64_t last_start_ns;
    uint64_t last_end_ns;
    int open; /* its last value still stands: a 0 is owed at last_end_ns */
} perfetto_pm_track;

typedef struct perfetto_context {
    const cli_session *session;
    cli_export_failure *failure;
    cli_output *output;
    uint64_t origin_ns; /* the session's start: ts 0 */
    int any_event;      /* an event was written: the next needs a comma */
    int out_of_memory;
    uint64_t events;              /* events written so far (otherData.events) */
    uint64_t flows;               /* flow arrows written (pairs); the last flow id */
    uint64_t flows_before;        /* GPU work that began before its call: no arrow */
    cli_pair_map gpu_processes;   /* (pid, device) -> synthetic trace pid */
    cli_pair_map named_processes; /* (trace pid, 0) -> 1: process_name written */
    cli_pair_map ranks;           /* (pid, 0) -> rank: the process was that rank */
    cli_pair_map threads;         /* (trace pid, stream, thread or track key) -> trace tid */
    int64_t next_gpu_pid;
    int64_t next_large_stream_tid;
    /* Replay (export_perfetto_flare.c). */
    cli_pair_map storm_processes;  /* (pid, 0) -> 1: had a launch storm */
    cli_pair_map replay_by_kernel; /* (pid, correlation id) -> launch id */
    cli_pair_map replay_matched;   /* (pid, launch id) -> 1: its args are on a kernel */
    store_export_replay_window_row *replay_windows; /* by pid, device, start */
    size_t replay_window_count;
    size_t replay_window_capacity;
    /* PC sampling windows' summaries (export_perfetto_pc.c). */
    struct perfetto_pc_window *pc_windows; /* by pid, window */
    size_t pc_window_count;
    size_t pc_window_capacity;
    /* SASS metrics windows' summaries (export_perfetto_sass.c). */
    struct perfetto_sass_window *sass_windows; /* by pid, window */
    size_t sass_window_count;
    size_t sass_window_capacity;
    /* PM counter tracks (export_perfetto_counters.c). */
    cli_pair_map pm_track_index; /* (trace pid, hash of metric) -> index + 1 */
    perfetto_pm_track *pm_tracks;
    size_t pm_track_count;
    size_t pm_track_capacity;
} perfetto_context;

/* ---- events (export_perfetto.c) ---- */

/* Non-zero when the walk must stop: the output failed or memory ran out. */
int perfetto_stopped(const perfetto_context *context);
/* Starts an event object ({"ph":"PHASE"), one event a line. */
void perfetto_event_start(perfetto_context *context, const char *phase);
/* ,"ts":T with T in microseconds from the session's start (negative
 * before it), three decimals: exact nanoseconds. */
void perfetto_timestamp(perfetto_context *context, uint64_t time_ns);
/* ,"ts":T,"dur":D; an end before its start becomes a zero duration, which
 * viewers accept, rather than a negative one, which they reject. */
void perfetto_time_span(perfetto_context *context, uint64_t start_ns, uint64_t end_ns);
/* ,"pid":P,"tid":T */
void perfetto_track(perfetto_context *context, int64_t trace_pid, int64_t tid);
/* ,"KEY":true or false */
void perfetto_member_bool(cli_output *output, const char *key, int value);
/* Appends printf(format) to the NUL-terminated text (size bytes), cut at
 * the end: how a window's summary args are built. Can't fail. */
void perfetto_append(char *text, size_t size, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- tracks (export_perfetto.c) ---- */

/* Names an operating-system process's track group once (executable may be
 * NULL), with its sort index: processes first, by pid. */
void perfetto_name_os_process(perfetto_context *context, int64_t pid, const char *executable);
/* Names a thread of an operating-system process (and the process) the
 * first time it is met: "thread N", "(main)" for the main thread. */
void perfetto_name_os_thread(perfetto_context *context, int64_t pid, int64_t thread_id);
/* The synthetic trace pid of a device of a process, named the first time
 * the pair is met (device_name may be NULL). -1 out of memory. */
int64_t perfetto_gpu_pid(perfetto_context *context, int64_t pid, int device,
                         const char *device_name);
/* The trace tid of a stream of a GPU track group, named "stream N" the
 * first time it is met. -1 out of memory. */
int64_t perfetto_stream_tid(perfetto_context *context, int64_t trace_pid, uint64_t stream_id);
/* The trace tid of one of flare's tracks in a process's track group, for
 * device (-1: the process), named ("flare windows", "flare storms (GPU
 * 0)"...) the first time it is met, the process too. -1 out of memory. */
int64_t perfetto_flare_tid(perfetto_context *context, int64_t pid, perfetto_flare_track kind,
                           int device);

/* ---- the tables, in the order the walk writes them ---- */

/* export_perfetto_host.c */
int perfetto_write_scopes(perfetto_context *context);
int perfetto_write_api_calls(perfetto_context *context);
/* export_perfetto_gpu.c */
int perfetto_write_kernels(perfetto_context *context);
int perfetto_write_copies(perfetto_context *context);
/* export_perfetto_counters.c */
int perfetto_write_metrics(perfetto_context *context);
int perfetto_write_counters(perfetto_context *context);
int perfetto_write_pm_samples(perfetto_context *context);
void perfetto_pm_tracks_free(perfetto_context *context);
/* export_perfetto_flare.c */
int perfetto_replay_prepare(perfetto_context *context);
/* ,"replay":{...} in a kernel's args when a replayed launch is its. */
int perfetto_replay_kernel_args(perfetto_context *context, int64_t pid, uint64_t correlation_id);
/* Whether GPU work of (pid, device) that began at start_ns is a replay's
 * re-run (a restore or a pass after the first), not the program's. */
int perfetto_replay_rerun(const perfetto_context *context, int64_t pid, int device,
                          uint64_t start_ns);
void perfetto_replay_free(perfetto_context *context);
int perfetto_write_windows(perfetto_context *context);
/* export_perfetto_pc.c: the PC samples of each window, summed for its
 * slice's args (pc_samples, pc_stalls, pc_hottest, pc_by_scope). load
 * returns FLARE_OK or the store's status (the samples' failure leaves none
 * loaded; the scopes' alone leaves the rest); args writes nothing for a
 * window without PC samples. */
int perfetto_pc_load(perfetto_context *context);
void perfetto_pc_window_args(perfetto_context *context, int64_t pid, uint64_t window_id);
void perfetto_pc_free(perfetto_context *context);
/* export_perfetto_sass.c: the SASS metrics of each window, summed for its
 * slice's args (sass_totals, sass_hottest, sass_lines, sass_by_scope,
 * sass_rows), as export_perfetto_pc.c does for PC samples: load returns
 * FLARE_OK or the store's status (the metrics' failure leaves none loaded;
 * the lines' or scopes' alone leaves the rest); args writes nothing for a
 * window without SASS metrics. */
int perfetto_sass_load(perfetto_context *context);
void perfetto_sass_window_args(perfetto_context *context, int64_t pid, uint64_t window_id);
void perfetto_sass_free(perfetto_context *context);
int perfetto_write_storms(perfetto_context *context);
int perfetto_write_replay(perfetto_context *context);

/* Each perfetto_write_* returns 0, or non-zero when the walk must stop:
 * context->failure says why (a reader's error or memory), or the output
 * holds a write error. perfetto_failed makes that answer from a reader's
 * status; table names the table in the message. */
int perfetto_failed(perfetto_context *context, const char *table, int status);

#endif /* FLARE_CLI_EXPORT_PERFETTO_H */
