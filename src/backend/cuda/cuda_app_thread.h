/*
 * cuda_app_thread.h: runs a function on the application's own thread, at
 * the entry of its next kernel launch (CUPTI's launch callback), for the
 * CUPTI calls that must not be made from another thread while the
 * application is inside CUDA: cuptiPCSamplingStop made from flare's
 * collector never returned on the H200 and held the program with it
 * (session 15, docs/PERFORMANCE.md); NVIDIA's PC sampling samples and
 * Triton's Proton make start and stop on the launching thread.
 *
 * One request at a time. The caller waits a bounded time for a launch; when
 * none comes, the request is withdrawn (it never runs) or, if the caller
 * asks, left posted to run at a later launch (detached: its result is
 * dropped). A caller that is itself an application thread (not one of
 * flare's, whose names begin "flare-") runs the function at once.
 *
 * Must never: run a request anywhere but on an application thread, cost a
 * launch more than one relaxed atomic load while nothing is posted, block
 * a launch on a lock (a busy lock waits for the next launch), or leave a
 * caller waiting past its bound for a launch that does not come.
 */
#ifndef FLARE_BACKEND_CUDA_APP_THREAD_H
#define FLARE_BACKEND_CUDA_APP_THREAD_H

#include <stdatomic.h>
#include <stdint.h>

typedef int (*cuda_app_thread_fn)(void *argument);

typedef enum cuda_app_thread_outcome {
    CUDA_APP_THREAD_RAN = 0,       /* ran; *result is its return */
    CUDA_APP_THREAD_WITHDRAWN = 1, /* no launch in time; it never runs */
    CUDA_APP_THREAD_DETACHED = 2,  /* no launch in time; runs at a later one */
} cuda_app_thread_outcome;

/* Posts fn(argument) for the next launch and waits up to wait_ns for it to
 * run. An earlier detached request still posted runs first: the wait for it
 * comes out of the same bound (WITHDRAWN if it does not run in time). With
 * detach, argument must outlive the request (a static). */
cuda_app_thread_outcome cuda_app_thread_call(cuda_app_thread_fn fn, void *argument,
                                             uint64_t wait_ns, int detach, int *result);

/* Withdraws fn(argument) if it was posted detached and no launch has
 * taken it yet: 1 when it was, and it never runs; 0 when no such request
 * waits (it ran, runs now, or another is posted). */
int cuda_app_thread_withdraw(cuda_app_thread_fn fn, void *argument);

/* 1 while a request (a detached one included) is posted or running. */
int cuda_app_thread_pending(void);

/* 1 when the calling thread is one of flare's (its name begins "flare-"). */
int cuda_app_thread_is_flare(void);

/* Runs the request posted for the program's next launch on the calling
 * thread, unless it is one of flare's (CUPTI's stop made there never
 * returned): the engines' serve hook (backend_engine_ops.serve), called by
 * flare_window_open/close and the session's end while they wait. */
void cuda_app_thread_serve(void);

/* The launch hook, from the entry of every application kernel launch. */
extern _Atomic int cuda_app_thread_posted;
void cuda_app_thread_run_posted(void);

static inline void cuda_app_thread_at_launch(void)
{
    if (atomic_load_explicit(&cuda_app_thread_posted, memory_order_relaxed))
        cuda_app_thread_run_posted();
}

#endif /* FLARE_BACKEND_CUDA_APP_THREAD_H */
