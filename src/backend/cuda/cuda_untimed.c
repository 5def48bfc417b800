/*
 * cuda_untimed.c: one event per kernel launch made while a SASS window
 * counts, which its quiet leaves untimed (cuda_untimed.h).
 *
 * Per thread, two small caches keep the launch path short: the last
 * context's device (cuptiGetDeviceId only when the context or the
 * process's context generation changed, failures remembered too) and, by
 * CUPTI's symbol pointer, the kernel's interned mangled and demangled names
 * (a hit checks the symbol's text against the interned copy, so a pointer
 * the driver reused for another name is not believed; a name the full
 * intern table refused is remembered as refused, so it is not demangled and
 * looked up again at every launch). A full ring drops the record, counted
 * like every ring drop.
 *
 * Must never: block on the program, touch the launch, take the intern lock
 * more than once per new name and thread, or record a launch outside a
 * window's counting (its kernel would not be in the window's values).
 */
#include "backend/cuda/cuda_untimed.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "backend/cuda/cuda_replay_internal.h"
#include "backend/cuda/cuda_trace.h"
#include "core/clock.h"
#include "core/event.h"
#include "core/runtime.h"

#define UNTIMED_NAMES 32 /* per thread; a power of two */

typedef struct untimed_name {
    const char *symbol;  /* CUPTI's pointer, the key */
    const char *mangled; /* interned copies, valid for the process's life */
    const char *name;    /* NULL with a mangled copy: the intern table refused it */
} untimed_name;

static _Thread_local untimed_name names[UNTIMED_NAMES];
static _Thread_local CUcontext last_context;
static _Thread_local int32_t last_device;
static _Thread_local uint64_t last_generation; /* 0: nothing cached */

static _Atomic int counting;
/* Bumped at each context's end: a context made again at the same address,
 * maybe on another device, is looked up again. Starts at 1. */
static _Atomic uint64_t context_generation = 1;

void cuda_untimed_set_counting(int on)
{
    atomic_store(&counting, on);
}

bool cuda_untimed_counting(void)
{
    return atomic_load_explicit(&counting, memory_order_relaxed) != 0;
}

void cuda_untimed_context_destroyed(void)
{
    atomic_fetch_add(&context_generation, 1);
}

/* The kernel's demangled name, interned; NULL when the intern table is full
 * (then the caller names it from the demangled text, inline). */
static const char *kernel_name(const char *symbol)
{
    untimed_name *slot = &names[((uintptr_t)symbol >> 4) & (UNTIMED_NAMES - 1)];
    if (slot->symbol == symbol && slot->mangled != NULL && strcmp(slot->mangled, symbol) == 0)
        return slot->name;
    const char *mangled = core_intern(symbol);
    const char *name = mangled != NULL ? core_intern(cuda_demangle(symbol)) : NULL;
    /* Without a mangled copy nothing can be checked: the slot stays empty
     * (the table is full, and stays so: every later miss fails as fast). */
    if (mangled != NULL)
        *slot = (untimed_name){.symbol = symbol, .mangled = mangled, .name = name};
    return name;
}

static int32_t context_device(CUcontext context)
{
    uint64_t generation = atomic_load_explicit(&context_generation, memory_order_relaxed);
    if (context != last_context || generation != last_generation) {
        uint32_t device = 0;
        last_context = context;
        last_generation = generation;
        last_device = context != NULL && cuda_replay_get_device_id != NULL &&
                              cuda_replay_get_device_id(context, &device) == CUPTI_SUCCESS
                          ? (int32_t)device
                          : -1;
    }
    return last_device;
}

void cuda_untimed_launch(const CUpti_CallbackData *call)
{
    if (call->symbolName == NULL || call->symbolName[0] == '\0')
        return; /* a graph launch: its kernels have no symbol here */
    const char *name = kernel_name(call->symbolName);
    core_thread *thread;
    core_event *event = core_emit_reserve(&thread);
    if (event == NULL)
        return;
    event->kind = CORE_EVENT_UNTIMED_LAUNCH;
    event->start_ns = event->end_ns = core_now_ns();
    event->id = call->correlationId;
    event->stream_id = 0;
    event->device = context_device(call->context);
    event->depth = 0;
    const core_scope_frame *scope = core_thread_innermost_scope(thread);
    event->detail.untimed_launch.scope_instance_id = scope != NULL ? scope->instance_id : 0;
    /* A name the table refused keeps its demangled start inline, as a
     * kernel's does (the demangler's buffer is the thread's, no lock). */
    core_copy_name(event->name, name != NULL ? name : cuda_demangle(call->symbolName));
    event->long_name = name != NULL && strlen(name) >= FLARE_NAME_MAX ? name : NULL;
    core_emit_commit(thread);
}
