/*
 * cuda_alternate.h: a benchmark's switch, written once for its users
 * (cuda_trace_alternate.c, cuda_ready_alternate.c): a thread that turns one
 * thing off and on in blocks of VARIABLE_MS milliseconds (20 to 5000) and
 * logs each switch as "NS WORD" (CLOCK_MONOTONIC ns) to the file
 * VARIABLE_LOG, which it creates (never an existing file, never through a
 * link), so that blocks of one process can be paired
 * (bench/gpu_cupti_alternate.py). Must never run unless both variables are
 * set and valid (a bad value is logged and nothing alternates), nor leave
 * the thing off when a switch fails.
 */
#ifndef FLARE_BACKEND_CUDA_ALTERNATE_H
#define FLARE_BACKEND_CUDA_ALTERNATE_H

typedef struct cuda_alternation {
    const char *variable;    /* "FLARE_TRACE_ALTERNATE": reads _MS and _LOG */
    const char *thread_name; /* "flare-trace-alt" */
    const char *on_word;     /* logged for the on state: "flare" */
    /* Switches on (1) or off (0): 0, or -1 when it failed (the thread then
     * switches on once more, logs why and stops). */
    int (*switch_to)(int on);
} cuda_alternation;

/* Whether either variable is set: the caller's cue to get ready. */
int cuda_alternation_asked(const cuda_alternation *alternation);
/* Checks both variables, creates the log, starts the thread (first switch:
 * off). 0, or -1 with the reason logged. */
int cuda_alternation_start(const cuda_alternation *alternation);

#endif /* FLARE_BACKEND_CUDA_ALTERNATE_H */
