/*
 * flare/replay.h: the kernel-replay tool API.
 *
 * A tool decides, per kernel launch, how many times flare runs it: 1 (no
 * replay), N (a fixed number of passes) or 0 with a continue callback (until
 * the callback says stop). Between passes flare restores every tracked
 * allocation of the launch's device, so each pass sees the memory the first
 * one saw and the last pass leaves memory as the program expects. While a
 * launch replays, every other launch, copy and memset on that device waits
 * at a gate; other devices keep working.
 *
 * Callbacks run on the launching thread, inside the launch call. They may
 * launch kernels themselves (those run once, never replayed, never blocked
 * by the gate). They must not wait for work another thread will submit to
 * the same device: that thread is held at the gate until the loop ends.
 * Functions return 0 (FLARE_OK) or a negative flare_status and never abort;
 * the one exception is a restore that fails part-way or a pass that never
 * finishes, after which the program's memory is no longer what it expects:
 * flare then prints which kernel, pass and wait failed, and aborts.
 */
#ifndef FLARE_REPLAY_H
#define FLARE_REPLAY_H

#include "flare.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a tool sees of a launch. Valid only during the callback. */
typedef struct flare_replay_launch {
    uint64_t launch_id; /* one id for every pass of this launch, unique per process */
    int device;
    uint64_t stream_id;
    const char *kernel_name;
    uint32_t grid[3];
    uint32_t block[3];
    uint64_t launch_index; /* how many launches of this kernel name came before (0-based) */
} flare_replay_launch;

/* What a tool sees of one pass. pass_data is a slot private to (launch,
 * pass): pass_enter may set it, pass_exit receives the same value. */
typedef struct flare_replay_pass {
    uint64_t launch_id;
    uint32_t pass;     /* 0-based; pass 0 is the program's own launch */
    uint32_t planned;  /* passes planned (0: until the continue callback stops) */
    uint64_t start_ns; /* flare clock; pass_exit only */
    uint64_t end_ns;   /* flare clock; pass_exit only */
    void **pass_data;
} flare_replay_pass;

typedef struct flare_replay_tool {
    size_t struct_size;
    /* Pass count for this launch: 1 = no replay, N = N passes, 0 = until
     * should_continue returns 0 (then should_continue is required). A tool
     * that does not want the launch returns 1. Required. */
    uint32_t (*decide)(const flare_replay_launch *launch, void *user);
    /* Before each pass's work is submitted. Context toggles are legal here only. */
    void (*pass_enter)(const flare_replay_launch *launch, const flare_replay_pass *pass,
                       void *user);
    /* After each pass's work finished on the device. */
    void (*pass_exit)(const flare_replay_launch *launch, const flare_replay_pass *pass, void *user);
    /* After each pass: non-zero to run another. It can only shorten the
     * loop: with a fixed count, returning non-zero past the count changes
     * nothing. */
    int (*should_continue)(const flare_replay_launch *launch, const flare_replay_pass *pass,
                           void *user);
    /* After the last pass, or when the replay was declined (reason non-NULL;
     * the launch then ran once, normally). */
    void (*finished)(const flare_replay_launch *launch, uint32_t passes_run, const char *reason,
                     void *user);
    void *user;
} flare_replay_tool;

/* At most this many tools; their decisions combine as the largest count. */
#define FLARE_REPLAY_TOOL_MAX 8

/* Registers a tool. FLARE_ERR_INVALID_ARGUMENT (no decide, bad struct_size),
 * FLARE_ERR_FULL. The tool takes effect from the next launch. */
FLARE_API int flare_replay_tool_register(const flare_replay_tool *tool, int *tool_id);
FLARE_API int flare_replay_tool_unregister(int tool_id);

/*
 * Profiling contexts: named collectors (flare's metric collection is one,
 * tools may register their own) that a pass may switch on or off. A toggle
 * is legal only inside pass_enter (FLARE_ERR_STATE elsewhere), lasts for
 * the following passes of the same launch until toggled again, lives in the
 * launching thread's state, and is undone when the loop ends.
 */
#define FLARE_REPLAY_CONTEXT_MAX 16
FLARE_API int flare_replay_context_register(const char *name, int *context_id);
FLARE_API int flare_replay_context_set_active(int context_id, int active);
/* 1 when the context is active for the calling thread now, else 0. */
FLARE_API int flare_replay_context_active(int context_id);

/*
 * Range replay: marks a span (one training step, one request) whose kernels
 * all get the configured metric set (FLARE_REPLAY_METRICS / FLARE_REPLAY_SET,
 * default speed-of-light) in one replay of the whole span. The span is on
 * the calling thread's current device and holds everything any thread
 * submits to that device between begin and end; work of this thread on
 * another device declines it. end replays the span before it returns.
 * FLARE_ERR_STATE: begin inside a span or replay loop, end without begin;
 * FLARE_ERR_INVALID_ARGUMENT: NULL or empty name.
 */
FLARE_API int flare_replay_range_begin(const char *name);
FLARE_API int flare_replay_range_end(void);

#ifdef __cplusplus
}
#endif

#endif /* FLARE_REPLAY_H */
