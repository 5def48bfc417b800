/*
 * cupti_bare_inject.c: a bare-CUPTI injection library, so that any CUDA
 * program (Python and PyTorch ones too) can run under the CUPTI features
 * flare turns on with nothing of flare in the process. It separates the
 * per-launch cost of CUPTI itself from flare's own.
 *
 * The CUDA driver loads it from CUDA_INJECTION64_PATH and calls
 * InitializeInjection() when the program initialises CUDA. BARE_CUPTI, a
 * comma list, picks the features (empty or unset: CUPTI loaded, idle):
 *   kernel          CONCURRENT_KERNEL activity
 *   copies          MEMCPY and MEMSET activity
 *   extcorr         EXTERNAL_CORRELATION activity
 *   clock           a CLOCK_MONOTONIC timestamp callback (as flare's)
 *   subscribe       cuptiSubscribe, nothing enabled
 *   callbacks       driver launch callbacks, one relaxed add per launch
 *   copy_callbacks  driver copy and memset callbacks, one relaxed add each
 *   nvtx            the NVTX callback domain (NVTX_INJECTION64_PATH must
 *                   name this library, which forwards NVTX to its CUPTI)
 *   noflush         no thread flushing the activity buffers every 100 ms
 *   alternate       CUPTI states in turn in one process (below); takes no
 *                   other word but noflush
 * BARE_CUPTI_BUFFER_KB (64..262144, default 8192) sizes activity buffers.
 * An unknown word, a word beside alternate, or a bad size or period
 * enables nothing (and prints no report).
 * At exit it prints one line on stderr, parsed by bench/gpu_launch_costs.py:
 *   bare_cupti features=F kernels=N memcpys=N memsets=N other=N dropped=N
 *   launch_callbacks=N copy_callbacks=N nvtx_callbacks=N
 * (one line, in that order; wrapped here only).
 *
 * alternate (bench/gpu_cupti_alternate.py) pairs CUPTI's states in time
 * inside one process, as bench/cupti_launch_cost.cu's alternate mode does
 * for a C launch storm: set-up at init is everything any state needs (the
 * clock callback, activity buffers and the flush period, cuptiSubscribe),
 * all off; then a thread, bare-alternate, holds each state for
 * BARE_CUPTI_ALTERNATE_MS (20..5000, default 250) milliseconds in turn:
 *   none      everything off (CUPTI loaded, subscribed, buffers registered)
 *   kernel    CONCURRENT_KERNEL activity
 *   light     kernel + MEMCPY, MEMSET, EXTERNAL_CORRELATION activity and
 *             the NVTX callback domain (flare's light mode)
 *   standard  light + driver launch, copy and memset callbacks (standard)
 * in that order, rotated by one every cycle. A switch changes only what
 * differs; a failed one stops the alternation where it stands. Each switch
 * is one line "SWITCH_NS STATE" (CLOCK_MONOTONIC ns right after it) in
 * BARE_CUPTI_LOG (needed; no alternation when it cannot be opened), kept in
 * memory (the first 65536) and written at exit, after the thread is joined
 * and the final flush; the report line is then followed by a second one:
 *   bare_cupti alternate switches=N unlogged=N
 *
 * This is a bench of bare CUPTI: it must never include, link or call flare
 * code (the callback id lists below are copied by hand from
 * src/backend/cuda/cuda_callback_ids.h and must be kept in step with it),
 * must never exit or crash the host program, and must keep its one-line
 * stderr report format.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>

#define BUFFER_KIB_DEFAULT   8192u
#define FLUSH_PERIOD_MS      100
#define ALTERNATE_MS_DEFAULT 250u
#define SWITCHES_MAX         65536

enum {
    F_KERNEL = 1 << 0,
    F_COPIES = 1 << 1,
    F_EXTCORR = 1 << 2,
    F_CLOCK = 1 << 3,
    F_SUBSCRIBE = 1 << 4,
    F_CALLBACKS = 1 << 5,
    F_COPY_CALLBACKS = 1 << 6,
    F_NVTX = 1 << 7,
    F_NOFLUSH = 1 << 8,
    F_ALTERNATE = 1 << 9,
};
#define F_ACTIVITY   (F_KERNEL | F_COPIES | F_EXTCORR)
#define F_SUBSCRIBED (F_SUBSCRIBE | F_CALLBACKS | F_COPY_CALLBACKS | F_NVTX)
#define F_SWITCHED   (F_ACTIVITY | F_CALLBACKS | F_COPY_CALLBACKS | F_NVTX) /* mid-run too */

static const struct {
    const char *word;
    int flag;
} words[] = {
    {"kernel", F_KERNEL},
    {"copies", F_COPIES},
    {"extcorr", F_EXTCORR},
    {"clock", F_CLOCK},
    {"subscribe", F_SUBSCRIBE},
    {"callbacks", F_CALLBACKS},
    {"copy_callbacks", F_COPY_CALLBACKS},
    {"nvtx", F_NVTX},
    {"noflush", F_NOFLUSH},
    {"alternate", F_ALTERNATE},
};

#define ID(name) CUPTI_DRIVER_TRACE_CBID_##name,
/* flare's CUDA_LAUNCH_IDS and CUDA_COPY_IDS, by hand. */
/* clang-format off */
static const CUpti_CallbackId launch_ids[] = {
    ID(cuLaunchKernel) ID(cuLaunchKernel_ptsz) ID(cuLaunchKernelEx) ID(cuLaunchKernelEx_ptsz)
    ID(cuLaunchCooperativeKernel) ID(cuLaunchCooperativeKernel_ptsz) ID(cuGraphLaunch)
    ID(cuGraphLaunch_ptsz)
};
static const CUpti_CallbackId copy_ids[] = {
    ID(cuMemcpyHtoD_v2) ID(cuMemcpyDtoH_v2) ID(cuMemcpyDtoD_v2) ID(cuMemcpyDtoA_v2)
    ID(cuMemcpyAtoD_v2) ID(cuMemcpyHtoA_v2) ID(cuMemcpyAtoH_v2) ID(cuMemcpyAtoA_v2)
    ID(cuMemcpy2D_v2) ID(cuMemcpy2DUnaligned_v2) ID(cuMemcpy3D_v2) ID(cuMemcpy) ID(cuMemcpyPeer)
    ID(cuMemcpy3DPeer) ID(cuMemcpyHtoDAsync_v2) ID(cuMemcpyDtoHAsync_v2) ID(cuMemcpyDtoDAsync_v2)
    ID(cuMemcpyHtoAAsync_v2) ID(cuMemcpyAtoHAsync_v2) ID(cuMemcpy2DAsync_v2) ID(cuMemcpy3DAsync_v2)
    ID(cuMemcpyAsync) ID(cuMemcpyPeerAsync) ID(cuMemcpy3DPeerAsync) ID(cuMemsetD8_v2)
    ID(cuMemsetD16_v2) ID(cuMemsetD32_v2) ID(cuMemsetD2D8_v2) ID(cuMemsetD2D16_v2)
    ID(cuMemsetD2D32_v2) ID(cuMemsetD8Async) ID(cuMemsetD16Async) ID(cuMemsetD32Async)
    ID(cuMemsetD2D8Async) ID(cuMemsetD2D16Async) ID(cuMemsetD2D32Async) ID(cuMemcpyHtoD_v2_ptds)
    ID(cuMemcpyDtoH_v2_ptds) ID(cuMemcpyDtoD_v2_ptds) ID(cuMemcpyDtoA_v2_ptds)
    ID(cuMemcpyAtoD_v2_ptds) ID(cuMemcpyHtoA_v2_ptds) ID(cuMemcpyAtoH_v2_ptds)
    ID(cuMemcpyAtoA_v2_ptds) ID(cuMemcpy2D_v2_ptds) ID(cuMemcpy2DUnaligned_v2_ptds)
    ID(cuMemcpy3D_v2_ptds) ID(cuMemcpy_ptds) ID(cuMemcpyPeer_ptds) ID(cuMemcpy3DPeer_ptds)
    ID(cuMemsetD8_v2_ptds) ID(cuMemsetD16_v2_ptds) ID(cuMemsetD32_v2_ptds) ID(cuMemsetD2D8_v2_ptds)
    ID(cuMemsetD2D16_v2_ptds) ID(cuMemsetD2D32_v2_ptds) ID(cuMemcpyAsync_ptsz)
    ID(cuMemcpyHtoAAsync_v2_ptsz) ID(cuMemcpyAtoHAsync_v2_ptsz) ID(cuMemcpyHtoDAsync_v2_ptsz)
    ID(cuMemcpyDtoHAsync_v2_ptsz) ID(cuMemcpyDtoDAsync_v2_ptsz) ID(cuMemcpy2DAsync_v2_ptsz)
    ID(cuMemcpy3DAsync_v2_ptsz) ID(cuMemcpyPeerAsync_ptsz) ID(cuMemcpy3DPeerAsync_ptsz)
    ID(cuMemsetD8Async_ptsz) ID(cuMemsetD16Async_ptsz) ID(cuMemsetD32Async_ptsz)
    ID(cuMemsetD2D8Async_ptsz) ID(cuMemsetD2D16Async_ptsz) ID(cuMemsetD2D32Async_ptsz)
    ID(cuMemcpyBatchAsync) ID(cuMemcpyBatchAsync_ptsz) ID(cuMemcpy3DBatchAsync)
    ID(cuMemcpy3DBatchAsync_ptsz) ID(cuMemcpyBatchAsync_v2) ID(cuMemcpyBatchAsync_v2_ptsz)
    ID(cuMemcpy3DBatchAsync_v2) ID(cuMemcpy3DBatchAsync_v2_ptsz)
};
/* clang-format on */
#define COUNT(array) (sizeof(array) / sizeof((array)[0]))

static char features[512]; /* BARE_CUPTI, for the report */
static pid_t init_pid;     /* the process that was set up */
static size_t buffer_bytes = (size_t)BUFFER_KIB_DEFAULT << 10;
static long alternate_ms = ALTERNATE_MS_DEFAULT;
static _Atomic int activity_registered;                 /* buffers may be flushed */
static uint8_t is_launch[CUPTI_DRIVER_TRACE_CBID_SIZE]; /* launch_ids, by id */
static CUpti_SubscriberHandle subscriber;
static int subscribed; /* subscriber is one */

enum { REC_KERNEL, REC_MEMCPY, REC_MEMSET, REC_OTHER, REC_KINDS };
static _Atomic uint64_t records[REC_KINDS], dropped;
static _Atomic uint64_t launch_callbacks, copy_callbacks, nvtx_callbacks;

/* Prints a failed CUPTI call; says whether it succeeded. */
static int cupti_ok(CUptiResult result, const char *call)
{
    if (result == CUPTI_SUCCESS)
        return 1;
    const char *text = "?";
    if (cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == NULL)
        text = "?";
    fprintf(stderr, "bare_cupti: %s failed: %s\n", call, text);
    return 0;
}
#define CUPTI_OK(call) cupti_ok((call), #call)

static void add(_Atomic uint64_t *counter, uint64_t n)
{
    atomic_fetch_add_explicit(counter, n, memory_order_relaxed);
}

static uint64_t CUPTIAPI monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- Activity buffers: mapped and unmapped whole, as flare's are ---- */

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    void *mapping =
        mmap(NULL, buffer_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    *buffer = mapping != MAP_FAILED ? mapping : NULL;
    *size = *buffer != NULL ? buffer_bytes : 0;
    *max_records = 0;
}

static int record_kind(CUpti_ActivityKind kind)
{
    switch (kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL:
        return REC_KERNEL;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
        return REC_MEMCPY;
    case CUPTI_ACTIVITY_KIND_MEMSET:
        return REC_MEMSET;
    default:
        return REC_OTHER;
    }
}

/* Counts the records and drops them: a consumer that does nothing else. */
static void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t *buffer,
                                      size_t size, size_t valid)
{
    if (buffer == NULL)
        return;
    uint64_t counts[REC_KINDS] = {0};
    CUpti_Activity *record = NULL;
    CUptiResult result;
    while ((result = cuptiActivityGetNextRecord(buffer, valid, &record)) == CUPTI_SUCCESS)
        counts[record_kind(record->kind)]++;
    if (result != CUPTI_ERROR_MAX_LIMIT_REACHED)
        cupti_ok(result, "cuptiActivityGetNextRecord");
    for (int i = 0; i < REC_KINDS; i++)
        if (counts[i] != 0)
            add(&records[i], counts[i]);
    size_t lost = 0;
    if (CUPTI_OK(cuptiActivityGetNumDroppedRecords(context, stream, &lost)) && lost != 0)
        add(&dropped, lost);
    munmap(buffer, size);
}

/* Registers the buffers and sets the flush period; no kind enabled yet. */
static void start_activity(void)
{
    if (!CUPTI_OK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed)))
        return;
    atomic_store(&activity_registered, 1);
    cupti_ok(cuptiActivityFlushPeriod(FLUSH_PERIOD_MS), "cuptiActivityFlushPeriod(100)");
}

/* ---- Callbacks ---- */

static void CUPTIAPI on_callback(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                                 const void *data)
{
    (void)userdata;
    if (domain == CUPTI_CB_DOMAIN_NVTX)
        add(&nvtx_callbacks, 1);
    else if (domain == CUPTI_CB_DOMAIN_DRIVER_API &&
             ((const CUpti_CallbackData *)data)->callbackSite == CUPTI_API_ENTER)
        add(id < CUPTI_DRIVER_TRACE_CBID_SIZE && is_launch[id] ? &launch_callbacks
                                                               : &copy_callbacks,
            1);
}

/* Subscribes, with nothing enabled yet. */
static void subscribe(void)
{
    for (size_t i = 0; i < COUNT(launch_ids); i++)
        if (launch_ids[i] < CUPTI_DRIVER_TRACE_CBID_SIZE)
            is_launch[launch_ids[i]] = 1;
    subscribed = cupti_ok(cuptiSubscribe(&subscriber, on_callback, NULL), "cuptiSubscribe");
}

/* ---- Switching features on and off: at init, and mid-run by alternate ---- */

static int switch_kinds(int changed, int on)
{
    static const struct {
        int flag;
        CUpti_ActivityKind kind;
        const char *name;
    } kinds[] = {
        {F_KERNEL, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL"},
        {F_COPIES, CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY"},
        {F_COPIES, CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET"},
        {F_EXTCORR, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, "EXTERNAL_CORRELATION"},
    };
    int ok = 1;
    for (size_t i = 0; i < COUNT(kinds); i++) {
        if (!(changed & kinds[i].flag))
            continue;
        int enable = (on & kinds[i].flag) != 0;
        char call[64];
        snprintf(call, sizeof(call), "cuptiActivity%s(%s)", enable ? "Enable" : "Disable",
                 kinds[i].name);
        ok &= cupti_ok(enable ? cuptiActivityEnable(kinds[i].kind)
                              : cuptiActivityDisable(kinds[i].kind),
                       call);
    }
    return ok;
}

static int switch_driver_ids(const CUpti_CallbackId *ids, size_t count, int enable)
{
    int ok = 1;
    for (size_t i = 0; i < count; i++) {
        char call[64];
        snprintf(call, sizeof(call), "cuptiEnableCallback(%d, driver id %u)", enable,
                 (unsigned)ids[i]);
        ok &= cupti_ok(
            cuptiEnableCallback((uint32_t)enable, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, ids[i]),
            call);
    }
    return ok;
}

/* From the F_SWITCHED features in `from` to those in `to`, switching only
 * what differs; says whether every call succeeded. */
static int switch_features(int from, int to)
{
    int changed = from ^ to, ok = 1;
    if (changed & F_ACTIVITY)
        ok &= switch_kinds(changed, to);
    if (changed & F_CALLBACKS)
        ok &= switch_driver_ids(launch_ids, COUNT(launch_ids), (to & F_CALLBACKS) != 0);
    if (changed & F_COPY_CALLBACKS)
        ok &= switch_driver_ids(copy_ids, COUNT(copy_ids), (to & F_COPY_CALLBACKS) != 0);
    if (changed & F_NVTX)
        ok &= cupti_ok(cuptiEnableDomain((to & F_NVTX) != 0, subscriber, CUPTI_CB_DOMAIN_NVTX),
                       (to & F_NVTX) ? "cuptiEnableDomain(1, NVTX)" : "cuptiEnableDomain(0, NVTX)");
    return ok;
}

/* ---- This library's threads: signals blocked, told to stop at exit ---- */

struct worker {
    pthread_mutex_t lock;
    pthread_cond_t wake; /* on CLOCK_MONOTONIC, from worker_start */
    int stop, running;   /* stop: under lock; running: init and exit only */
    pthread_t thread;
};
static struct worker flusher = {.lock = PTHREAD_MUTEX_INITIALIZER};
static struct worker alternator = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Waits ms milliseconds: 1 then, 0 as soon as the thread is told to stop. */
static int worker_wait(struct worker *worker, long ms)
{
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += ms / 1000;
    deadline.tv_nsec += (ms % 1000) * 1000000L;
    deadline.tv_sec += deadline.tv_nsec / 1000000000L;
    deadline.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&worker->lock);
    while (!worker->stop && pthread_cond_timedwait(&worker->wake, &worker->lock, &deadline) == 0) {
    }
    int go_on = !worker->stop;
    pthread_mutex_unlock(&worker->lock);
    return go_on;
}

static void worker_start(struct worker *worker, void *(*body)(void *), const char *what)
{
    pthread_condattr_t attributes;
    pthread_condattr_init(&attributes);
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
    pthread_cond_init(&worker->wake, &attributes);
    pthread_condattr_destroy(&attributes);
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous); /* the program's signals stay its own */
    worker->running = pthread_create(&worker->thread, NULL, body, worker) == 0;
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    if (!worker->running)
        fprintf(stderr, "bare_cupti: cannot start the %s thread\n", what);
}

static void worker_stop(struct worker *worker)
{
    if (!worker->running)
        return;
    pthread_mutex_lock(&worker->lock);
    worker->stop = 1;
    pthread_cond_signal(&worker->wake);
    pthread_mutex_unlock(&worker->lock);
    pthread_join(worker->thread, NULL);
    worker->running = 0;
}

/* The flush thread: flare's delivery thread, flushing only. */
static void *flush_main(void *argument)
{
    struct worker *worker = argument;
    pthread_setname_np(pthread_self(), "bare-flush");
    int flushing = 1; /* until a flush fails */
    while (worker_wait(worker, FLUSH_PERIOD_MS))
        if (flushing && atomic_load(&activity_registered))
            flushing = CUPTI_OK(cuptiActivityFlushAll(0));
    return NULL;
}

/* ---- alternate: the states in turn, each switch logged in memory ---- */

enum { S_NONE, S_KERNEL, S_LIGHT, S_STANDARD, STATES };
static const char *const state_names[STATES] = {"none", "kernel", "light", "standard"};
#define F_LIGHT (F_KERNEL | F_COPIES | F_EXTCORR | F_NVTX)
static const int state_features[STATES] = {
    [S_NONE] = 0,
    [S_KERNEL] = F_KERNEL,
    [S_LIGHT] = F_LIGHT,
    [S_STANDARD] = F_LIGHT | F_CALLBACKS | F_COPY_CALLBACKS,
};

static struct {
    uint64_t ns;
    int state;
} switch_log[SWITCHES_MAX]; /* the alternation thread's, then finish's (after the join) */
static size_t switches;     /* made, logged or not */
static int log_fd = -1;     /* BARE_CUPTI_LOG, open while alternating */

static void *alternate_main(void *argument)
{
    struct worker *worker = argument;
    pthread_setname_np(pthread_self(), "bare-alternate");
    int on = 0; /* the features on now */
    for (unsigned cycle = 0;; cycle++)
        for (unsigned turn = 0; turn < STATES; turn++) {
            int state = (int)((cycle + turn) % STATES);
            if (!switch_features(on, state_features[state])) {
                fprintf(stderr, "bare_cupti: switching to %s failed: alternation stopped\n",
                        state_names[state]);
                return NULL;
            }
            on = state_features[state];
            if (switches < SWITCHES_MAX) {
                switch_log[switches].ns = monotonic_ns();
                switch_log[switches].state = state;
            }
            switches++;
            if (!worker_wait(worker, alternate_ms))
                return NULL;
        }
}

static void start_alternation(void)
{
    const char *path = getenv("BARE_CUPTI_LOG");
    if (!subscribed || !atomic_load(&activity_registered)) {
        fprintf(stderr, "bare_cupti: alternate: CUPTI set-up failed, not alternating\n");
        return;
    }
    if (path == NULL || *path == '\0') {
        fprintf(stderr, "bare_cupti: alternate needs BARE_CUPTI_LOG, not alternating\n");
        return;
    }
    log_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (log_fd < 0) {
        fprintf(stderr, "bare_cupti: cannot open BARE_CUPTI_LOG '%s': %s, not alternating\n", path,
                strerror(errno));
        return;
    }
    worker_start(&alternator, alternate_main, "alternation");
}

/* Writes the switches kept in memory to BARE_CUPTI_LOG and closes it. */
static void write_switch_log(void)
{
    FILE *file = fdopen(log_fd, "w");
    if (file == NULL)
        close(log_fd);
    log_fd = -1;
    size_t logged = switches < SWITCHES_MAX ? switches : SWITCHES_MAX;
    for (size_t i = 0; file != NULL && i < logged; i++)
        fprintf(file, "%" PRIu64 " %s\n", switch_log[i].ns, state_names[switch_log[i].state]);
    int failed = file == NULL || ferror(file);
    if ((file != NULL && fclose(file) != 0) || failed)
        fprintf(stderr, "bare_cupti: cannot write BARE_CUPTI_LOG\n");
    fprintf(stderr, "bare_cupti alternate switches=%zu unlogged=%zu\n", switches,
            switches - logged);
}

/* ---- Set-up and report ---- */

static void finish(void)
{
    if (getpid() != init_pid) /* a forked child: neither the threads nor the buffers */
        return;
    worker_stop(&alternator); /* no switch during or after the final flush */
    worker_stop(&flusher);
    if (atomic_load(&activity_registered))
        CUPTI_OK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    fprintf(stderr,
            "bare_cupti features=%s kernels=%" PRIu64 " memcpys=%" PRIu64 " memsets=%" PRIu64
            " other=%" PRIu64 " dropped=%" PRIu64 " launch_callbacks=%" PRIu64
            " copy_callbacks=%" PRIu64 " nvtx_callbacks=%" PRIu64 "\n",
            features, atomic_load(&records[REC_KERNEL]), atomic_load(&records[REC_MEMCPY]),
            atomic_load(&records[REC_MEMSET]), atomic_load(&records[REC_OTHER]),
            atomic_load(&dropped), atomic_load(&launch_callbacks), atomic_load(&copy_callbacks),
            atomic_load(&nvtx_callbacks));
    if (log_fd >= 0)
        write_switch_log();
}

/* BARE_CUPTI's words as flags; -1 on an unknown word. Empty words pass. */
static int parse_features(const char *list)
{
    int flags = 0;
    for (const char *word = list; *word != '\0';) {
        size_t length = strcspn(word, ",");
        int flag = length == 0 ? 0 : -1;
        for (size_t i = 0; flag < 0 && i < COUNT(words); i++)
            if (strlen(words[i].word) == length && strncmp(word, words[i].word, length) == 0)
                flag = words[i].flag;
        if (flag < 0) {
            fprintf(stderr, "bare_cupti: unknown BARE_CUPTI word '%.*s'\n", (int)length, word);
            return -1;
        }
        flags |= flag;
        word += length + (word[length] == ',');
    }
    if ((flags & F_ALTERNATE) && (flags & ~(F_ALTERNATE | F_NOFLUSH))) {
        fprintf(stderr, "bare_cupti: alternate takes no other BARE_CUPTI word but noflush\n");
        return -1;
    }
    return flags;
}

/* The decimal in environment variable name, in low..high, into *value when
 * set; -1 (with a message) when set to anything else. */
static int parse_number(const char *name, unsigned long low, unsigned long high,
                        unsigned long *value)
{
    const char *text = getenv(name);
    if (text == NULL || *text == '\0')
        return 0;
    char *end = NULL;
    unsigned long number = strtoul(text, &end, 10);
    if (*text < '0' || *text > '9' || *end != '\0' || number < low || number > high) {
        fprintf(stderr, "bare_cupti: %s='%.32s' is not %lu..%lu\n", name, text, low, high);
        return -1;
    }
    *value = number;
    return 0;
}

static int parse_settings(int flags)
{
    unsigned long kib = BUFFER_KIB_DEFAULT, ms = ALTERNATE_MS_DEFAULT;
    if (parse_number("BARE_CUPTI_BUFFER_KB", 64, 262144, &kib) != 0 ||
        ((flags & F_ALTERNATE) && parse_number("BARE_CUPTI_ALTERNATE_MS", 20, 5000, &ms) != 0))
        return -1;
    buffer_bytes = (size_t)kib << 10;
    alternate_ms = (long)ms;
    return 0;
}

__attribute__((visibility("default"))) int InitializeInjection(void);
__attribute__((visibility("default"))) int InitializeInjectionNvtx2(void *get_export_table);

/* NVTX calls this when NVTX_INJECTION64_PATH names this library: forwarded
 * to the CUPTI this library is bound to, as flare forwards it. Naming a
 * libcupti.so there instead can load a second CUPTI beside the one bound
 * here (PyTorch ships its own), and this library's subscriber never sees
 * that one's NVTX callbacks. */
int InitializeInjectionNvtx2(void *get_export_table)
{
    Dl_info info;
    void *cupti = NULL;
    int (*forward)(void *) = NULL;
    if (dladdr((void *)cuptiSubscribe, &info) && info.dli_fname != NULL)
        cupti = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    if (cupti != NULL)
        forward = (int (*)(void *))dlsym(cupti, "InitializeInjectionNvtx2");
    if (forward == NULL) {
        fprintf(stderr, "bare_cupti: cannot forward NVTX: no InitializeInjectionNvtx2 in CUPTI\n");
        return 0;
    }
    return forward(get_export_table);
}

int InitializeInjection(void)
{
    if (init_pid == getpid()) /* set up already */
        return 1;
    const char *list = getenv("BARE_CUPTI");
    snprintf(features, sizeof(features), "%s", list != NULL ? list : "");
    int flags = parse_features(list != NULL ? list : "");
    if (flags < 0 || parse_settings(flags) != 0)
        return 0; /* nothing enabled, no report */
    init_pid = getpid();
    if (flags & F_ALTERNATE) /* everything a state needs, nothing on */
        flags |= F_CLOCK | F_SUBSCRIBE;
    if (flags & F_CLOCK)
        cupti_ok(cuptiActivityRegisterTimestampCallback(monotonic_ns),
                 "cuptiActivityRegisterTimestampCallback");
    if (flags & (F_ACTIVITY | F_ALTERNATE))
        start_activity();
    if (flags & F_SUBSCRIBED)
        subscribe();
    int usable = (atomic_load(&activity_registered) ? F_ACTIVITY : 0) |
                 (subscribed ? F_SUBSCRIBED & F_SWITCHED : 0);
    switch_features(0, flags & F_SWITCHED & usable);
    if (!(flags & F_NOFLUSH))
        worker_start(&flusher, flush_main, "flush");
    if (flags & F_ALTERNATE)
        start_alternation();
    atexit(finish);
    return 1;
}
