/*
 * cuda_untimed.h: kernel launches the GPU does not time, as the launching
 * thread sees them.
 *
 * While a SASS metrics window is open its quiet (cuda_storm.h) keeps every
 * activity kind off, so the window's kernels have no GPU times and the
 * split of its SASS values over scopes has nothing to weigh by. This
 * records each launch made while the window counts instead: its correlation id, time,
 * device, kernel name and the innermost scope or NVTX push range open on
 * the launching thread (table untimed_launches, docs/schema.md). Graph
 * launches (no symbol) are left out. Runs inside the driver's launch call:
 * must never block on the program or touch the launch; a name not seen
 * before on the thread is demangled and interned once (a lock taken only
 * during a SASS window, whose patched kernels run 6 to 500 times slower).
 */
#ifndef FLARE_BACKEND_CUDA_UNTIMED_H
#define FLARE_BACKEND_CUDA_UNTIMED_H

#include <cupti_callbacks.h>

#include <stdbool.h>

/* At a kernel launch's API entry, while cuda_untimed_counting(). */
void cuda_untimed_launch(const CUpti_CallbackData *call);

/* Whether a SASS window counts now: from its enable's success to its
 * disable (made at the program's launch after the window's close), the
 * launches whose kernels its values hold. Set by cuda_sass.c; any thread. */
void cuda_untimed_set_counting(int on);
bool cuda_untimed_counting(void);
/* A context ends (the resource callback): threads look their contexts'
 * devices up again. */
void cuda_untimed_context_destroyed(void);

#endif /* FLARE_BACKEND_CUDA_UNTIMED_H */
