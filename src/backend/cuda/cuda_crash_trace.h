/*
 * cuda_crash_trace.h: a bring-up aid. With FLARE_CRASH_TRACE=1, a crash of
 * the traced program (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) first
 * writes the crashing thread's name and a raw backtrace (library and
 * offset per frame: CUPTI and the driver are stripped) to stderr, then
 * dies of the same signal as it would have. Where a crash inside CUPTI
 * happens on the H200 is otherwise unknowable from outside the process.
 *
 * Must never: install anything unless asked, swallow the signal (the
 * program's exit status stays the crash's), or replace a handler the
 * program installed before (only default dispositions are taken).
 */
#ifndef FLARE_BACKEND_CUDA_CRASH_TRACE_H
#define FLARE_BACKEND_CUDA_CRASH_TRACE_H

/* Installs the handlers when FLARE_CRASH_TRACE=1; otherwise nothing. */
void cuda_crash_trace_install(void);

#endif /* FLARE_BACKEND_CUDA_CRASH_TRACE_H */
