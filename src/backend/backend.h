/*
 * backend.h: the seam between flare's device-independent code and a device.
 *
 * Every backend (the simulated device in sim/, CUDA in cuda/) fills one const
 * descriptor (backend_descriptor, at the end) holding its tables. Features
 * talk to a device only through the tables the session layer hands them;
 * no feature and no core file names a backend. A backend owns its devices, streams and memory; it
 * reports finished work through one completion handler, called on a backend thread, which must not
 * block for long (the sim backend's slow-handler fault tests exactly that). Backend functions
 * return 0 or a negative flare_status and never abort.
 */
#ifndef FLARE_BACKEND_BACKEND_H
#define FLARE_BACKEND_BACKEND_H

#include <stddef.h>
#include <stdint.h>

typedef struct backend_stream backend_stream;

typedef enum backend_work_kind {
    BACKEND_WORK_KERNEL = 1,
    BACKEND_WORK_COPY = 2,
    BACKEND_WORK_MEMSET = 3,
} backend_work_kind;

typedef enum backend_copy_kind {
    BACKEND_COPY_UNKNOWN = 0,
    BACKEND_COPY_HOST_TO_DEVICE = 1,
    BACKEND_COPY_DEVICE_TO_HOST = 2,
    BACKEND_COPY_DEVICE_TO_DEVICE = 3,
    BACKEND_COPY_HOST_TO_HOST = 4,
} backend_copy_kind;

/* One finished piece of device work, as the completion handler sees it. The
 * pointers are valid only during the handler call. */
typedef struct backend_completion {
    backend_work_kind kind;
    int device;
    uint64_t stream_id;
    uint64_t correlation_id; /* unique per process, assigned at submission */
    const char *name;        /* kernel name; NULL for copies and memsets */
    uint64_t start_ns;       /* flare clock */
    uint64_t end_ns;
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t shared_memory_bytes;
    uint32_t registers_per_thread;
    uint64_t bytes; /* copies and memsets */
    backend_copy_kind copy_kind;
    int status; /* 0, or the negative flare_status the work failed with */
} backend_completion;

typedef void (*backend_completion_handler)(const backend_completion *completion, void *user);

/* A kernel launch request. args points to args_size bytes, copied at submission. */
typedef struct backend_launch {
    int kernel_id;
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t shared_memory_bytes;
    const void *args;
    size_t args_size;
} backend_launch;

typedef struct backend_ops {
    const char *name;
    int (*device_count)(void);
    int (*device_name)(int device, char *buffer, size_t size);
    int (*stream_create)(int device, backend_stream **out);
    /* Waits for the stream's work (bounded by the backend's own limit), then frees it. */
    int (*stream_destroy)(backend_stream *stream);
    uint64_t (*stream_id)(const backend_stream *stream);
    int (*stream_device)(const backend_stream *stream);
    /* Work submitted to the stream and not yet completed (handler included). */
    uint64_t (*stream_in_flight)(const backend_stream *stream);
    uint64_t (*device_in_flight)(int device);
    /* Wait until the stream / every stream of the device is idle, at most
     * timeout_ns. FLARE_ERR_TIMEOUT when it is not. */
    int (*stream_drain)(backend_stream *stream, uint64_t timeout_ns);
    int (*device_drain)(int device, uint64_t timeout_ns);
    int (*memory_alloc)(int device, size_t bytes, void **out);
    int (*memory_free)(void *pointer);
    int (*copy_async)(backend_stream *stream, void *destination, const void *source, size_t bytes,
                      backend_copy_kind kind);
    int (*memset_async)(backend_stream *stream, void *destination, int value, size_t bytes);
    int (*launch)(backend_stream *stream, const backend_launch *launch);
    /* Installs the process's one completion handler (NULL removes it). A
     * handler call in progress finishes before this returns. */
    void (*set_completion_handler)(backend_completion_handler handler, void *user);
} backend_ops;

/* ---- Deep engines ----
 *
 * A deep engine is the expensive kind of collection (PM sampling, PC
 * sampling, SASS metrics) that runs only inside a bounded deep-profiling window
 * (src/deepwin). A backend that has one exposes this table beside
 * backend_ops; the window coordinator arms it when a window opens and disarms
 * it when the window closes, from one thread at a time. Time is passed in so
 * the engine never reads a clock of its own and tests can fake it.
 */
typedef struct backend_engine_config {
    uint64_t sample_interval_ns; /* 0: the engine's default */
    const char *label;           /* what opened the window, for the engine's log */
    uint64_t window_id;          /* the window being armed, so samples name it */
} backend_engine_config;

/* arm's answer when another profiling context holds the device (the lease,
 * src/tracebuf/lease.h): the window opens and runs WITHOUT the engine, and
 * keeps arm's reason ("PM sampling busy, held by ...") as its engine_reason.
 * Positive, so it is never mistaken for a flare_status error. */
#define BACKEND_ENGINE_BUSY 1
/* arm's answer while the engine is still being set up (CUDA PM sampling
 * takes about 0.8 s after the program's first context): the window opens
 * WITHOUT the engine, as for BUSY, with engine_status "preparing" and arm's
 * reason. A rule firing early must not lose its window. */
#define BACKEND_ENGINE_NOT_READY 2

typedef struct backend_engine_result {
    uint64_t armed_ns;    /* the now_ns arm was given */
    uint64_t disarmed_ns; /* the now_ns disarm was given */
    uint64_t samples;     /* what the engine collected while armed */
    /* Why a disarm failed, when the engine says (empty otherwise): the
     * window record keeps it beside "disarm failed". */
    char reason[192];
} backend_engine_result;

typedef struct backend_engine_ops {
    const char *name; /* "sim-pm", "cuda-pm", ... */
    /* Starts collecting on device (-1: every device the process uses).
     * 0, BACKEND_ENGINE_BUSY or BACKEND_ENGINE_NOT_READY (nothing armed; the window runs
     * without), or FLARE_ERR_UNSUPPORTED /
     * FLARE_ERR_BACKEND / FLARE_ERR_STATE with a reason in reason[0..reason_size) that the window
     * record keeps. A failed arm leaves nothing armed. */
    int (*arm)(int device, const backend_engine_config *config, uint64_t now_ns, char *reason,
               size_t reason_size);
    /* Stops collecting; fills result (may be NULL). FLARE_ERR_STATE when not armed. */
    int (*disarm)(int device, uint64_t now_ns, backend_engine_result *result);
    /* 0 when arm could succeed now; else the status arm would fail with and
     * its reason. Lets a rule be refused up front, never fired into nothing. */
    int (*probe)(int device, char *reason, size_t reason_size);
    /* Optional (NULL: nothing to do). Starts, in the background, whatever
     * set-up arm will need on device (-1: any), so a window known to be
     * coming (a request for a later time) finds the engine ready instead of
     * running without it ("preparing"). Returns at once, arms nothing;
     * calling it again, or while set-up runs, does nothing more. */
    void (*prepare)(int device);
    /* Optional (NULL: nothing to do). Called over and over by an
     * application thread that waits on a window (flare_window_open/close):
     * runs the engine's work that must be made on an application thread
     * (CUDA's PC start and stop, cuda_app_thread.h), which that thread's
     * next launch would otherwise make, and which may never come while it
     * waits; and by deepwin_close_now's caller while another thread's close
     * holds the coordinator (the program's thread at its end). Returns at
     * once when there is none, or when called on one of flare's threads. */
    void (*serve)(void);
    /* What the engine costs the program while a window of it is open, as
     * measured, for engine auto (docs/windows.md): the extra host time per
     * kernel launch, in ns, and the fractional slowdown of GPU-bound work
     * (0.0006: 0.06%). The window coordinator estimates a window's slowdown
     * as cost_gpu + cost_launch_ns * launches per second / 1e9. */
    uint64_t cost_launch_ns;
    double cost_gpu;
    /* Where those two numbers come from ("H200 (bench/gpu_engine_cost.py),
     * docs/PERFORMANCE.md, Session 16"). NULL: not measured; engine auto
     * never picks the engine then, and its windows' engine_reason says so. */
    const char *cost_source;
    /* Optional (NULL: always usable). Why this engine cannot arm in this
     * process at all, or NULL when it can (CUDA: PM sampling is never set
     * up beside PC sampling). Cheap and never blocks: engine auto calls it
     * under the coordinator's state lock, to pass over such an engine. */
    const char *(*unusable)(void);
} backend_engine_ops;

/* ---- The backend descriptor ----
 *
 * What the session layer (src/session) knows of a backend: one const table
 * per backend, chosen once when a session starts (backend_choice.c) and
 * handed to the features by the session layer, never pushed into them by
 * the backend. The getters may be called at any time and answer for now:
 * a CUDA table appears only once its start() has loaded CUPTI, and stays
 * NULL when that part is unavailable (the capability rows say why).
 */
struct pm_engine;
struct pc_engine;
struct pm_open_scope;
struct replay_device_ops;
struct replay_metric_collector;

enum {
    /* flare drives the device itself (streams, launches): device != NULL. */
    BACKEND_CAP_DEVICE_OPS = 1u << 0,
    /* Records the device work the program does on its own (CUPTI). */
    BACKEND_CAP_TRACE = 1u << 1,
    /* A deep engine for windows (PM sampling). */
    BACKEND_CAP_DEEP_ENGINE = 1u << 2,
    /* Kernel and range replay: device ops and a metric collector. */
    BACKEND_CAP_REPLAY = 1u << 3,
    /* NVTX ranges, offered to attribution as open scopes. */
    BACKEND_CAP_NVTX = 1u << 4,
};

/* What a backend may ask of the session that started it: upcalls the
 * session layer hands to start(), so a backend never includes a feature
 * to reach one. Each may be called from any thread and must not block. */
typedef struct backend_host {
    /* One host kernel launch (the window launch bounds count them). */
    void (*count_launch)(void);
    /* Host kernel launches counted so far, every session's. */
    uint64_t (*launch_count)(void);
    /* Whether a deep window is pending, open or closing: it wants every
     * kernel timed (the launch-storm guard holds off). */
    int (*deep_window_active)(void);
} backend_host;

typedef struct backend_descriptor {
    const char *name; /* what processes.backend records: "sim", "cuda" */
    uint32_t caps;    /* BACKEND_CAP_* */
    /* The device flare drives (the simulated device); NULL for CUDA, where
     * the program drives the device and CUPTI reports its work. */
    const backend_ops *device;
    /* Starts the backend once its session is live (CUDA: CUPTI activity,
     * callbacks, NVML). Never fails the session: every failure degrades a
     * capability with its reason. NULL: nothing to start. */
    void (*start)(const backend_host *host);
    /* Forwards NVTX's initialisation to the backend (CUDA: CUPTI's). 1 when
     * the backend took it. NULL: NVTX is not the backend's. */
    int (*forward_nvtx)(void *get_export_table);
    /* The deep engine windows arm, or NULL when there is none (yet). */
    const backend_engine_ops *(*deep_engine)(void);
    /* The PM engine whose samples the session collects, or NULL (the
     * simulated device registers its own, created at its first arm). */
    struct pm_engine *(*pm_engine)(void);
    /* The PC sampling engine of windows that ask for pc, and the engine
     * whose aggregates the session collects; NULL: none (such windows fall
     * back to the deep engine above, src/deepwin). */
    const backend_engine_ops *(*pc_deep_engine)(void);
    struct pc_engine *(*pc_engine)(void);
    /* The same for SASS metrics (windows that ask for sass): an engine of
     * pcsamp/pc_engine.h's kind PC_ENGINE_SASS; NULL: none. */
    const backend_engine_ops *(*sass_deep_engine)(void);
    struct pc_engine *(*sass_engine)(void);
    /* Replay's device operations and metric collector, or NULL. */
    const struct replay_device_ops *(*replay_ops)(void);
    const struct replay_metric_collector *(*metric_collector)(void);
    /* Open ranges the backend tracks besides flare's scopes (CUDA: NVTX),
     * for attribution; writes up to capacity, returns how many. NULL: none. */
    size_t (*open_scopes)(struct pm_open_scope *out, size_t capacity, void *user);
    /* Hands over now every finished record the backend still holds back
     * (CUDA: CUPTI keeps kernel records in its buffers until one is full,
     * seconds at a low launch rate; a default cuptiActivityFlushAll returns
     * them). Called by the session's delivery thread (session/delivery.c)
     * every FLARE_DELIVERY_MS, never by the collector: the records it hands
     * over go into the calling thread's ring. NULL: nothing is held back. */
    void (*deliver)(void);
} backend_descriptor;

#endif /* FLARE_BACKEND_BACKEND_H */
