/*
 * clock.h: flare's one clock.
 *
 * Every record carries nanoseconds of CLOCK_MONOTONIC, read here and nowhere
 * else, so records from every thread and module compare directly. Reading it
 * must stay cheap (vDSO, no syscall, no lock): it sits on every hot path.
 */
#ifndef FLARE_CORE_CLOCK_H
#define FLARE_CORE_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

static inline uint64_t core_now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

/* Wall-clock nanoseconds since the Unix epoch, for converting flare times. */
static inline int64_t core_unix_now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (int64_t)now.tv_sec * 1000000000ll + (int64_t)now.tv_nsec;
}

/* An absolute CLOCK_MONOTONIC deadline timeout_ns from now, for timed waits
 * on condition variables set to CLOCK_MONOTONIC. */
static inline struct timespec core_deadline_after_ns(uint64_t timeout_ns)
{
    uint64_t deadline = core_now_ns() + timeout_ns;
    struct timespec result = {.tv_sec = (time_t)(deadline / 1000000000ull),
                              .tv_nsec = (long)(deadline % 1000000000ull)};
    return result;
}

/* Initialises a condition variable whose timed waits take deadlines of this
 * clock (core_deadline_after_ns), so a wall-clock step never stretches or
 * cuts a bounded wait. */
static inline void core_cond_init_monotonic(pthread_cond_t *condition)
{
    pthread_condattr_t attributes;
    pthread_condattr_init(&attributes);
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
    pthread_cond_init(condition, &attributes);
    pthread_condattr_destroy(&attributes);
}

#endif /* FLARE_CORE_CLOCK_H */
