/*
 * cuda_alternate.c: the benchmark switch's thread and log (cuda_alternate.h
 * says what and for whom). One alternation per process at most: each user
 * starts its own only when its variables ask, and a benchmark asks for one.
 * Must never follow a planted link or write into an existing file
 * (O_EXCL | O_NOFOLLOW), block a launch, or leave the thing off when a
 * switch fails.
 */
#include "backend/cuda/cuda_alternate.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
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

typedef struct alternation_run {
    const cuda_alternation *what;
    int log_fd;
    uint32_t block_ms;
} alternation_run;

static alternation_run run;

static const char *variable(const cuda_alternation *what, const char *suffix, char *name,
                            size_t size)
{
    snprintf(name, size, "%s%s", what->variable, suffix);
    return getenv(name);
}

int cuda_alternation_asked(const cuda_alternation *what)
{
    char name[64];
    return variable(what, "_MS", name, sizeof(name)) != NULL ||
           variable(what, "_LOG", name, sizeof(name)) != NULL;
}

static void log_switch(int on)
{
    char line[48];
    int length = snprintf(line, sizeof(line), "%llu %s\n", (unsigned long long)core_now_ns(),
                          on ? run.what->on_word : "none");
    if (write(run.log_fd, line, (size_t)length) != length)
        CORE_LOG_ONCE("cuda.alternate.write", CORE_LOG_WARNING, "%s_LOG: a switch was not logged",
                      run.what->variable);
}

static void *alternate_main(void *unused)
{
    (void)unused;
    pthread_setname_np(pthread_self(), run.what->thread_name);
    struct timespec pause = {run.block_ms / 1000, (long)(run.block_ms % 1000) * 1000000L};
    int on = 1;
    for (uint32_t switches = 0; switches < ALTERNATE_SWITCHES; switches++) {
        on = !on;
        if (run.what->switch_to(on) != 0) {
            run.what->switch_to(1);
            core_log(CORE_LOG_ERROR, "%s_MS: switching %s failed: stopped", run.what->variable,
                     on ? "on" : "off");
            return NULL;
        }
        log_switch(on);
        nanosleep(&pause, NULL);
    }
    return NULL;
}

int cuda_alternation_start(const cuda_alternation *what)
{
    char ms_name[64], log_name[64];
    const char *period = variable(what, "_MS", ms_name, sizeof(ms_name));
    const char *path = variable(what, "_LOG", log_name, sizeof(log_name));
    uint32_t block_ms = 0;
    if (period == NULL || path == NULL || path[0] == '\0' ||
        core_parse_u32(period, ALTERNATE_MS_MIN, ALTERNATE_MS_MAX, &block_ms) != 0) {
        core_log(CORE_LOG_ERROR, "%s (%u..%u) and %s must both be set: not alternating", ms_name,
                 ALTERNATE_MS_MIN, ALTERNATE_MS_MAX, log_name);
        return -1;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        core_log(CORE_LOG_ERROR, "%s=%s: %s: not alternating", log_name, path, strerror(errno));
        return -1;
    }
    run = (alternation_run){.what = what, .log_fd = fd, .block_ms = block_ms};
    pthread_t thread;
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    int started = pthread_create(&thread, &attributes, alternate_main, NULL) == 0;
    pthread_attr_destroy(&attributes);
    if (!started) {
        core_log(CORE_LOG_ERROR, "%s: no thread: not alternating", ms_name);
        close(fd);
        return -1;
    }
    core_log(CORE_LOG_INFO, "%s: every %u ms, logged to %s", what->thread_name, block_ms, path);
    return 0;
}
