/*
 * cuda_crash_trace.c: FLARE_CRASH_TRACE=1's crash backtrace
 * (cuda_crash_trace.h). The handler uses only what is safe in one after
 * backtrace() was called once at install (its first call may load libgcc):
 * write, backtrace_symbols_fd, sigaction, raise.
 *
 * Must never: run without FLARE_CRASH_TRACE=1, or return to the crashed
 * instruction with the handler still in place (SA_RESETHAND: the re-raised
 * signal takes the default action).
 */
#include "backend/cuda/cuda_crash_trace.h"

#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CRASH_FRAMES 64

static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

static void say(const char *text)
{
    ssize_t ignored = write(STDERR_FILENO, text, strlen(text));
    (void)ignored;
}

static void on_crash(int signal_number)
{
    char name[16] = "?";
    pthread_getname_np(pthread_self(), name, sizeof(name));
    char number[12];
    int at = (int)sizeof(number) - 1;
    number[at] = '\0';
    int value = signal_number;
    do {
        number[--at] = (char)('0' + value % 10);
        value /= 10;
    } while (value > 0 && at > 0);
    say("flare: FLARE_CRASH_TRACE: signal ");
    say(number + at);
    say(" in thread ");
    say(name);
    say("; backtrace:\n");
    void *frames[CRASH_FRAMES];
    int count = backtrace(frames, CRASH_FRAMES);
    backtrace_symbols_fd(frames, count, STDERR_FILENO);
    raise(signal_number); /* SA_RESETHAND: the default action now */
}

void cuda_crash_trace_install(void)
{
    const char *wanted = getenv("FLARE_CRASH_TRACE");
    if (wanted == NULL || strcmp(wanted, "1") != 0)
        return;
    void *warm[1];
    backtrace(warm, 1);
    for (size_t i = 0; i < sizeof(crash_signals) / sizeof(crash_signals[0]); i++) {
        struct sigaction current;
        if (sigaction(crash_signals[i], NULL, &current) != 0 || current.sa_handler != SIG_DFL)
            continue;
        struct sigaction handler;
        memset(&handler, 0, sizeof(handler));
        handler.sa_handler = on_crash;
        sigemptyset(&handler.sa_mask);
        handler.sa_flags = SA_RESETHAND | SA_NODEFER;
        sigaction(crash_signals[i], &handler, NULL);
    }
}
