/*
 * cuda_ready_alternate.c: a benchmark's switch for what a range-ready trace
 * costs on the launch path (issue 23, bench/gpu_cupti_alternate.py
 * --flare-ready). In the default mode the one thing a trace whose rules may
 * range-replay does at a launch that a plain trace does not is resolving
 * the launched function's module variables early (cuda_replay_launch.c,
 * cuda_replay_globals_early). With FLARE_REPLAY_READY_ALTERNATE_MS=N (20 to
 * 5000) and FLARE_REPLAY_READY_ALTERNATE_LOG=PATH both set in such a
 * process, a thread (flare-ready-alt) turns that off and on again every N
 * ms and writes each switch as "NS none" or "NS ready" (CLOCK_MONOTONIC
 * ns) to PATH, so blocks of one process, a few hundred ms apart, can be
 * paired: separate processes on the H200 host differ by 15-30% run to run.
 *
 * Must never: run unless both variables are set and valid (a bad value is
 * logged and nothing alternates), follow a planted link or write into an
 * existing file (the log is created with O_EXCL | O_NOFOLLOW), or block a
 * launch (the switch is one relaxed store).
 */
#include "backend/cuda/cuda_replay_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"

#define ALTERNATE_MS_MIN   20u
#define ALTERNATE_MS_MAX   5000u
#define ALTERNATE_SWITCHES 100000u /* then it stays as it is */

static int log_fd = -1;
static uint32_t block_ms;

static void log_switch(int ready)
{
    char line[48];
    int length = snprintf(line, sizeof(line), "%llu %s\n", (unsigned long long)core_now_ns(),
                          ready ? "ready" : "none");
    if (write(log_fd, line, (size_t)length) != length)
        CORE_LOG_ONCE("cuda.ready_alternate.write", CORE_LOG_WARNING,
                      "FLARE_REPLAY_READY_ALTERNATE_LOG: a switch was not logged");
}

static void *alternate_main(void *unused)
{
    (void)unused;
    pthread_setname_np(pthread_self(), "flare-ready-alt");
    struct timespec pause = {block_ms / 1000, (long)(block_ms % 1000) * 1000000L};
    int ready = 1;
    for (uint32_t switches = 0; switches < ALTERNATE_SWITCHES; switches++) {
        ready = !ready;
        atomic_store_explicit(&cuda_replay_globals_early, ready, memory_order_relaxed);
        log_switch(ready);
        nanosleep(&pause, NULL);
    }
    return NULL;
}

void cuda_ready_alternate_start(void)
{
    const char *period = getenv("FLARE_REPLAY_READY_ALTERNATE_MS");
    const char *path = getenv("FLARE_REPLAY_READY_ALTERNATE_LOG");
    if (period == NULL && path == NULL)
        return;
    if (period == NULL || path == NULL || path[0] == '\0' ||
        core_parse_u32(period, ALTERNATE_MS_MIN, ALTERNATE_MS_MAX, &block_ms) != 0) {
        core_log(CORE_LOG_ERROR,
                 "FLARE_REPLAY_READY_ALTERNATE_MS (%u..%u) and FLARE_REPLAY_READY_ALTERNATE_LOG "
                 "must both be set: not alternating",
                 ALTERNATE_MS_MIN, ALTERNATE_MS_MAX);
        return;
    }
    log_fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (log_fd < 0) {
        core_log(CORE_LOG_ERROR, "FLARE_REPLAY_READY_ALTERNATE_LOG=%s: %s: not alternating", path,
                 strerror(errno));
        return;
    }
    pthread_t thread;
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&thread, &attributes, alternate_main, NULL) != 0) {
        core_log(CORE_LOG_ERROR, "FLARE_REPLAY_READY_ALTERNATE_MS: no thread: not alternating");
        close(log_fd);
        log_fd = -1;
    } else {
        core_log(CORE_LOG_INFO, "replay-ready alternation: every %u ms, logged to %s", block_ms,
                 path);
    }
    pthread_attr_destroy(&attributes);
}
