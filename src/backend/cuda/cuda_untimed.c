/*
 * cuda_untimed.c: one event per kernel launch a SASS window's quiet leaves
 * untimed (cuda_untimed.h).
 *
 * Per thread, two small caches keep the launch path short: the last
 * context's device (cuptiGetDeviceId only when the context changes) and,
 * by CUPTI's symbol pointer, the kernel's interned mangled and demangled
 * names (a hit checks the symbol's text against the interned copy, so a
 * pointer the driver reused for another name is not believed). A full ring
 * drops the record, counted like every ring drop.
 */
#include "backend/cuda/cuda_untimed.h"

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
    const char *name;
} untimed_name;

static _Thread_local untimed_name names[UNTIMED_NAMES];
static _Thread_local CUcontext last_context;
static _Thread_local int32_t last_device = -1;

/* The kernel's demangled name, interned; NULL when interning failed. */
static const char *kernel_name(const char *symbol)
{
    untimed_name *slot = &names[((uintptr_t)symbol >> 4) & (UNTIMED_NAMES - 1)];
    if (slot->symbol == symbol && slot->mangled != NULL && strcmp(slot->mangled, symbol) == 0)
        return slot->name;
    const char *mangled = core_intern(symbol);
    const char *name = core_intern(cuda_demangle(symbol));
    if (mangled == NULL || name == NULL)
        return NULL;
    *slot = (untimed_name){.symbol = symbol, .mangled = mangled, .name = name};
    return name;
}

static int32_t context_device(CUcontext context)
{
    if (context != last_context || last_device < 0) {
        uint32_t device = 0;
        last_context = context;
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
    /* A name that could not be interned keeps its inline start, as a
     * kernel's does. */
    const char *whole = name != NULL ? name : call->symbolName;
    core_copy_name(event->name, whole);
    event->long_name = name != NULL && strlen(name) >= FLARE_NAME_MAX ? name : NULL;
    core_emit_commit(thread);
}
