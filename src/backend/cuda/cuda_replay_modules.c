/*
 * cuda_replay_modules.c: module-scope __device__ variables for replay.
 * Each loaded module's variables are read from its cubin, resolved to
 * addresses once a launch (or an address query) names the module's handle,
 * and added to the allocation inventory, so a replay restores them like
 * any allocation; a module whose variables cannot all be resolved declines
 * replays on its device, with a reason naming the variable.
 *
 * Must never call the driver with modules_lock held (module loads take it
 * from inside the driver), guess a module's identity when the driver can
 * name it, or let its own lookups be seen as the program's calls.
 */
#include "backend/cuda/cuda_replay_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_cubin.h"
#include "core/log.h"
#include "replay/replay.h"

#define CUDA_REPLAY_MODULES_MAX 1024

/* ---- Module-scope __device__ variables ----
 *
 * A loaded module's cubin (an ELF image) lists its variables as symbols in
 * the .nv.global (zero-initialised) and .nv.global.init sections. The
 * resource callback gives the cubin but no module handle, so the names are
 * kept as pending until a launch from that module gives a handle
 * (cuFuncGetModule, or cuKernelGetLibrary for library kernels) under which
 * the names resolve with the ELF's sizes. A function not loaded yet (lazy
 * loading) is loaded first, so its module is known before its first launch.
 *
 * Only kernels of a module, or code handed one of its variables' addresses
 * (which goes through cuModuleGetGlobal / cuLibraryGetGlobal, watched too),
 * can write its variables. So a pending module none of whose kernels has
 * launched does not stop a replay (PyTorch loads modules whose kernels it
 * never runs, e.g. curand's tables behind torch.randn); a module whose
 * kernel launched but whose variables did not all resolve does, with a
 * reason naming the variable. A module loaded while a span records
 * declines the span: its memory is not in the span's snapshot. */

typedef struct cuda_module_globals {
    uint32_t module_id;
    int device;
    CUcontext context; /* the context it was loaded into */
    int resolved;
    /* A launch (or an address query) came from this module, but not every
     * variable resolved: replay on the device must decline. */
    int matched;
    char failure[160];
    size_t tracked_count; /* inventory entries added (addresses[0..tracked_count)) */
    void *handle;         /* CUmodule or CUlibrary once resolved */
    size_t count;
    char *names;   /* count NUL-terminated names back to back */
    size_t *sizes; /* from the symbol table */
    uintptr_t *addresses;
} cuda_module_globals;

static pthread_mutex_t modules_lock = PTHREAD_MUTEX_INITIALIZER;
static cuda_module_globals *modules[CUDA_REPLAY_MODULES_MAX];
static size_t module_count;
static _Atomic int pending_modules[REPLAY_DEVICE_MAX];

/* Re-derives the device's untracked reason from the pending modules
 * (modules_lock held). */
/* Reasons that never clear (a cubin that could not be read, the module
 * table full): modules_lock held to read or write. */
static char sticky_untracked[REPLAY_DEVICE_MAX][200];

static void update_untracked(int device)
{
    if (sticky_untracked[device][0] != '\0') {
        replay_inventory_set_untracked(device, sticky_untracked[device]);
        return;
    }
    const cuda_module_globals *first = NULL;
    size_t pending = 0, blocking = 0;
    for (size_t i = 0; i < module_count; i++)
        if (modules[i]->device == device && !modules[i]->resolved) {
            pending++;
            if (modules[i]->matched && blocking++ == 0)
                first = modules[i];
        }
    atomic_store(&pending_modules[device], (int)pending);
    if (first == NULL) {
        replay_inventory_set_untracked(device, NULL);
        return;
    }
    char reason[256];
    snprintf(reason, sizeof(reason),
             "%zu module(s) with __device__ variables flare could not resolve (%s)", blocking,
             first->failure);
    replay_inventory_set_untracked(device, reason);
}

static void free_module(cuda_module_globals *module)
{
    free(module->names);
    free(module->sizes);
    free(module->addresses);
    free(module);
}

/* Module (or library) handles already settled on a device: resolved,
 * matched with a failure, or matching none of the pending modules (their
 * module has no __device__ variables); and functions already loaded and
 * settled. They are not tried again: PyTorch launches thousands of kernels,
 * and each try costs driver calls and a lock, where a settled function
 * costs one relaxed load per launch. Only for the device's first context:
 * a library handle and a CUkernel are shared by every context, and each
 * context loads the module on its own, so other contexts always take the
 * full path. Direct-mapped (a collision only costs a retry); cleared when
 * a module unloads or a context goes (a handle may then be reused), and a
 * store that raced with such a clear is not made (settle_generation). */
#define SETTLED_SLOTS 256
static void *_Atomic settled_handles[REPLAY_DEVICE_MAX][SETTLED_SLOTS];
static void *_Atomic settled_functions[REPLAY_DEVICE_MAX][SETTLED_SLOTS];
static _Atomic(CUcontext) cached_contexts[REPLAY_DEVICE_MAX];
static _Atomic uint64_t settle_generation;

/* Whether context is the one the device's caches serve (the first seen). */
static bool cache_serves(int device, CUcontext context)
{
    if (context == NULL)
        return false;
    CUcontext served = atomic_load_explicit(&cached_contexts[device], memory_order_acquire);
    if (served == NULL) {
        atomic_compare_exchange_strong(&cached_contexts[device], &served, context);
        served = atomic_load(&cached_contexts[device]);
    }
    return served == context;
}

static size_t handle_slot(const void *handle);

/* Stores key unless a clear came after generation was read; a clear that
 * lands between the check and the store takes the entry back out. */
static void settle(void *_Atomic *table, const void *key, uint64_t generation)
{
    if (atomic_load(&settle_generation) != generation)
        return;
    void *_Atomic *slot = &table[handle_slot(key)];
    atomic_store(slot, (void *)key);
    void *expected = (void *)key;
    if (atomic_load(&settle_generation) != generation)
        atomic_compare_exchange_strong(slot, &expected, NULL);
}

/* modules_lock held, or at context teardown. */
static void clear_settled(void)
{
    atomic_fetch_add(&settle_generation, 1);
    for (size_t device = 0; device < REPLAY_DEVICE_MAX; device++)
        for (size_t slot = 0; slot < SETTLED_SLOTS; slot++) {
            atomic_store_explicit(&settled_handles[device][slot], NULL, memory_order_relaxed);
            atomic_store_explicit(&settled_functions[device][slot], NULL, memory_order_relaxed);
        }
}

/* A context goes: its handles may come back for another context. */
void cuda_replay_forget_cached_context(CUcontext context)
{
    bool served = false;
    for (size_t device = 0; device < REPLAY_DEVICE_MAX; device++)
        served |= atomic_load(&cached_contexts[device]) == context;
    if (!served)
        return;
    /* Cleared before the context is let go, so no other context can become
     * the cached one and read what this one settled. */
    pthread_mutex_lock(&modules_lock);
    clear_settled();
    for (size_t device = 0; device < REPLAY_DEVICE_MAX; device++) {
        CUcontext expected = context;
        atomic_compare_exchange_strong(&cached_contexts[device], &expected, NULL);
    }
    pthread_mutex_unlock(&modules_lock);
}

/* While flare loads a function itself (cuFuncLoad), the module the driver
 * loads for it on this thread is that function's module: its identity,
 * with no guessing from variable names (static variables of a header, such
 * as curand's tables, carry the same names in many modules). */
static _Thread_local int watching_module_loads;
static _Thread_local int64_t module_loaded_while_watching; /* -1: none */

static size_t handle_slot(const void *handle)
{
    uintptr_t bits = (uintptr_t)handle;
    bits ^= bits >> 17;
    bits *= (uintptr_t)0x9E3779B97F4A7C15ull;
    return (size_t)(bits >> 7) % SETTLED_SLOTS;
}

void cuda_replay_module_loaded(CUcontext context, const CUpti_ModuleResourceData *data)
{
    int device = cuda_replay_device_of(context);
    if (device < 0 || data == NULL)
        return;
    cuda_module_globals *module = calloc(1, sizeof(*module));
    if (module == NULL)
        return;
    module->module_id = data->moduleId;
    module->device = device;
    module->context = context;
    cuda_cubin_globals found;
    long count = cuda_cubin_scan_globals(data->pCubin, data->cubinSize, &found);
    if (count == 0) {
        free_module(module);
        return;
    }
    if (count > 0) {
        module->count = found.count;
        module->names = found.names;
        module->sizes = found.sizes;
        module->addresses = calloc(found.count, sizeof(uintptr_t));
        if (module->addresses == NULL)
            count = -1;
    }
    pthread_mutex_lock(&modules_lock);
    if (count < 0 || module_count >= CUDA_REPLAY_MODULES_MAX) {
        char reason[200];
        if (count < 0)
            snprintf(reason, sizeof(reason),
                     "module %u: its cubin could not be read for __device__ variables (%s)",
                     data->moduleId, found.why);
        else
            snprintf(reason, sizeof(reason),
                     "module %u: more than 1024 modules with __device__ variables", data->moduleId);
        snprintf(sticky_untracked[device], sizeof(sticky_untracked[device]), "%s", reason);
        replay_inventory_set_untracked(device, reason);
        atomic_store(&pending_modules[device], INT32_MAX / 2); /* never cleared */
        pthread_mutex_unlock(&modules_lock);
        free_module(module);
        return;
    }
    modules[module_count++] = module;
    update_untracked(device);
    pthread_mutex_unlock(&modules_lock);
    if (watching_module_loads)
        module_loaded_while_watching = data->moduleId;
    if (replay_configured() && replay_range_active_on(device))
        replay_range_decline(device,
                             "a module with __device__ variables was loaded inside the span "
                             "(its memory is not in the span's snapshot)");
}

void cuda_replay_module_unloading(const CUpti_ModuleResourceData *data)
{
    if (data == NULL)
        return;
    pthread_mutex_lock(&modules_lock);
    for (size_t i = 0; i < module_count; i++) {
        cuda_module_globals *module = modules[i];
        if (module->module_id != data->moduleId)
            continue;
        if (module->resolved)
            for (size_t k = 0; k < module->tracked_count; k++)
                replay_inventory_remove(module->addresses[k]);
        modules[i] = modules[--module_count];
        int device = module->device;
        free_module(module);
        update_untracked(device);
        break;
    }
    clear_settled(); /* a handle may be reused by a module loaded later */
    pthread_mutex_unlock(&modules_lock);
}

/* Tries the module (or library) a launched function belongs to against the
 * pending modules of its device. Cheap when nothing is pending. */
/* One unresolved module's variables, copied out from under modules_lock. */
typedef struct globals_attempt {
    uint32_t module_id;
    size_t count;
    char *names;
    size_t *sizes;
    uintptr_t *addresses;
} globals_attempt;

static void attempts_free(globals_attempt *attempts, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        free(attempts[i].names);
        free(attempts[i].sizes);
        free(attempts[i].addresses);
    }
    free(attempts);
}

/* Copies out, under modules_lock, the pending modules of context that
 * handle may belong to (only only_id's when has_only). *known_out: the
 * handle is already resolved or matched in context; *candidates_out: how
 * many pending modules qualify. Returns the copies, *attempt_count_out of
 * them (NULL when known, when none qualifies, or out of memory); a copy
 * that ran out of memory has count 0, and its module stays pending. */
static globals_attempt *copy_out_candidates(const void *handle, CUcontext context, bool has_only,
                                            uint32_t only_id, int *known_out,
                                            size_t *candidates_out, size_t *attempt_count_out)
{
    pthread_mutex_lock(&modules_lock);
    int known = 0;
    size_t candidates = 0;
    for (size_t i = 0; i < module_count && !known; i++) {
        const cuda_module_globals *m = modules[i];
        known = m->handle == handle && m->context == context && (m->resolved || m->matched);
        candidates += !m->resolved && !m->matched && m->context == context &&
                      (!has_only || m->module_id == only_id);
    }
    globals_attempt *attempts =
        known || candidates == 0 ? NULL : calloc(candidates, sizeof(*attempts));
    size_t attempt_count = 0;
    for (size_t i = 0; attempts != NULL && i < module_count && attempt_count < candidates; i++) {
        const cuda_module_globals *candidate = modules[i];
        if (candidate->resolved || candidate->matched || candidate->context != context ||
            (has_only && candidate->module_id != only_id))
            continue;
        size_t names_bytes = 0;
        const char *name = candidate->names;
        for (size_t k = 0; k < candidate->count; k++, name += strlen(name) + 1)
            names_bytes += strlen(name) + 1;
        globals_attempt *attempt = &attempts[attempt_count++];
        attempt->module_id = candidate->module_id;
        attempt->count = candidate->count;
        attempt->names = malloc(names_bytes > 0 ? names_bytes : 1);
        attempt->sizes = malloc((candidate->count + 1) * sizeof(size_t));
        attempt->addresses = calloc(candidate->count + 1, sizeof(uintptr_t));
        if (attempt->names == NULL || attempt->sizes == NULL || attempt->addresses == NULL) {
            attempt->count = 0; /* skipped: it stays pending */
            continue;
        }
        memcpy(attempt->names, candidate->names, names_bytes);
        memcpy(attempt->sizes, candidate->sizes, candidate->count * sizeof(size_t));
    }
    pthread_mutex_unlock(&modules_lock);
    *known_out = known;
    *candidates_out = candidates;
    *attempt_count_out = attempt_count;
    return attempts;
}

/* Looks every candidate's names up under the module or library handle,
 * inside flare's internal bracket: resolved_counts[a] of attempt a's
 * variables resolve with their cubin sizes, identified[a] are found at
 * all, and failures[a] says what went wrong first. Returns whether an
 * attempt was skipped (out of memory: not tried). */
static int look_up_candidates(CUmodule module, CUlibrary library, globals_attempt *attempts,
                              size_t attempt_count, size_t *resolved_counts, char (*failures)[160],
                              size_t *identified)
{
    int skipped_any = 0;
    cuda_replay_internal_begin(); /* flare's own queries are not the program's */
    for (size_t a = 0; a < attempt_count; a++) {
        globals_attempt *attempt = &attempts[a];
        skipped_any |= attempt->count == 0; /* out of memory: not tried */
        const char *name = attempt->names;
        for (size_t k = 0; k < attempt->count; k++, name += strlen(name) + 1) {
            CUdeviceptr pointer = 0;
            size_t bytes = 0;
            CUresult result =
                module != NULL
                    ? cuda_replay_driver.cuModuleGetGlobal(&pointer, &bytes, module, name)
                    : cuda_replay_driver.cuLibraryGetGlobal(&pointer, &bytes, library, name);
            identified[a] += result == CUDA_SUCCESS;
            if (result == CUDA_SUCCESS && bytes == attempt->sizes[k]) {
                attempt->addresses[k] = (uintptr_t)pointer;
                resolved_counts[a]++;
            } else if (failures[a][0] == '\0') {
                if (result == CUDA_SUCCESS)
                    snprintf(failures[a], sizeof(failures[a]),
                             "module %u: '%.64s' is %zu bytes, its cubin says %zu",
                             attempt->module_id, name, bytes, attempt->sizes[k]);
                else
                    snprintf(failures[a], sizeof(failures[a]), "module %u: '%.64s': %.48s",
                             attempt->module_id, name,
                             cuda_driver_error_text(&cuda_replay_driver, result));
            }
        }
    }
    cuda_replay_internal_end();
    return skipped_any;
}

/* The attempt that is the handle's own module: its index, or -1 when none
 * is. */
static long choose_candidate(const globals_attempt *attempts, size_t attempt_count,
                             const size_t *resolved_counts, const size_t *identified)
{
    /* The handle's own module is the one the most of whose names were
     * found under it: every name of its own is found (with the wrong size
     * at worst), while a module holding only a shared header's statics
     * (curand's tables) finds only those, a subset. Equal counts prefer a
     * complete resolution; two complete ones with equal counts are
     * identical name sets, which names cannot tell apart. None found: not
     * this handle's module (a module flare saw load for the function, but
     * none of whose names resolve, is not taken on that alone; the next
     * launch tries again without that hint). */
    long chosen = -1;
    size_t ties = 0;
    for (size_t a = 0; a < attempt_count; a++) {
        if (attempts[a].count == 0 || identified[a] == 0)
            continue;
        bool whole = resolved_counts[a] == attempts[a].count;
        bool chosen_whole = chosen >= 0 && resolved_counts[chosen] == attempts[chosen].count;
        if (chosen < 0 || identified[a] > identified[chosen] ||
            (identified[a] == identified[chosen] && whole && !chosen_whole)) {
            chosen = (long)a;
            ties = 1;
        } else if (identified[a] == identified[chosen] && whole == chosen_whole) {
            ties++;
        }
    }
    if (ties > 1)
        CORE_LOG_ONCE("cuda.replay.ambiguous_module", CORE_LOG_INFO,
                      "replay: %zu loaded modules declare the same __device__ variables; the "
                      "first is taken for a launch whose module flare did not load itself",
                      ties);
    return chosen;
}

/* Tries a module (or library) handle against the pending modules of its
 * context (only module_id's when has_only: the module the driver loaded
 * for the function flare just loaded). The driver is never called with
 * modules_lock held: cuda_replay_module_loaded takes that lock from inside the driver
 * (which holds its own locks then), so calling cuModuleGetGlobal under it
 * deadlocked PyTorch at its first launches on the H200. Candidates are
 * copied out, tried without the lock, and the result is published under
 * it again, by module id.
 *
 * Without a known identity, a candidate whose every variable resolves
 * under the handle is taken (the first, if several do: modules declaring
 * the same names); failing that, one whose lookup found any of its names
 * (even with the wrong size) is this handle's module with a failure, and
 * blocks replay. Returns whether the handle is settled. */
static bool resolve_handle(int device, CUcontext context, CUmodule module, CUlibrary library,
                           bool loaded, bool has_only, uint32_t only_id)
{
    void *handle = module != NULL ? (void *)module : (void *)library;
    if (handle == NULL)
        return false;
    bool cached = cache_serves(device, context);
    if (cached && atomic_load_explicit(&settled_handles[device][handle_slot(handle)],
                                       memory_order_relaxed) == handle)
        return true;
    uint64_t generation = atomic_load(&settle_generation);
    int known = 0;
    size_t candidates = 0, attempt_count = 0;
    globals_attempt *attempts = copy_out_candidates(handle, context, has_only, only_id, &known,
                                                    &candidates, &attempt_count);
    if (known || candidates == 0 || attempts == NULL) {
        free(attempts);
        if ((known || candidates == 0) && cached)
            settle(settled_handles[device], handle, generation);
        return known || candidates == 0;
    }

    /* Look every candidate up: which resolve completely, which at all. */
    size_t *resolved_counts = calloc(attempt_count, sizeof(size_t));
    char(*failures)[160] = calloc(attempt_count, sizeof(*failures));
    size_t *identified = calloc(attempt_count, sizeof(size_t));
    if (resolved_counts == NULL || failures == NULL || identified == NULL) {
        free(resolved_counts);
        free(failures);
        free(identified);
        attempts_free(attempts, attempt_count);
        return false;
    }
    int skipped_any = look_up_candidates(module, library, attempts, attempt_count, resolved_counts,
                                         failures, identified);
    long chosen = choose_candidate(attempts, attempt_count, resolved_counts, identified);
    bool published = false;
    if (chosen >= 0) {
        globals_attempt *attempt = &attempts[chosen];
        bool whole = resolved_counts[chosen] == attempt->count;
        if (!whole) {
            if (failures[chosen][0] == '\0')
                snprintf(failures[chosen], sizeof(failures[chosen]),
                         "module %u: none of its %zu variables found", attempt->module_id,
                         attempt->count);
            core_log(CORE_LOG_WARNING,
                     "replay: %zu of %zu __device__ variables of %s resolved; replays on "
                     "device %d are declined while the module is loaded",
                     resolved_counts[chosen], attempt->count, failures[chosen], device);
        }
        /* Publish, if the module is still loaded. */
        pthread_mutex_lock(&modules_lock);
        for (size_t i = 0; i < module_count; i++) {
            cuda_module_globals *candidate = modules[i];
            if (candidate->module_id != attempt->module_id || candidate->resolved)
                continue;
            candidate->handle = handle;
            published = true;
            if (!whole) {
                candidate->matched = 1;
                snprintf(candidate->failure, sizeof(candidate->failure), "%s", failures[chosen]);
                break;
            }
            /* One inventory entry (and one copy per restore, about 9 us on
             * the H200) per variable: PyTorch's steps carried 776. */
            for (size_t k = 0; k < candidate->count; k++) {
                candidate->addresses[k] = attempt->addresses[k];
                replay_inventory_add(device, candidate->addresses[k], candidate->sizes[k],
                                     REPLAY_ALLOCATION_GLOBAL);
            }
            candidate->tracked_count = candidate->count;
            candidate->resolved = 1;
            break;
        }
        update_untracked(device);
        pthread_mutex_unlock(&modules_lock);
    }
    free(resolved_counts);
    free(failures);
    free(identified);
    attempts_free(attempts, attempt_count);
    /* A module settled while a span records: its variables joined the
     * inventory after the span's snapshot, or cannot be restored at all. */
    if (published && replay_configured() && replay_range_active_on(device))
        replay_range_decline(device, "a module's __device__ variables were first used inside the "
                                     "span (they are not in the span's snapshot)");
    /* No match only settles a handle whose module is known to be loaded
     * (else its module may not have registered its names yet) and whose
     * candidates were all tried. */
    bool settled = chosen >= 0 || (loaded && !skipped_any && !has_only);
    if (settled && cached)
        settle(settled_handles[device], handle, generation);
    return settled;
}

/* Resolves the launched function's module's __device__ variables, loading
 * the function first when it is not (lazy loading would otherwise load its
 * module inside the launch, after the snapshot). */
void cuda_replay_resolve_globals(int device, CUcontext context, CUfunction function)
{
    bool cached = cache_serves(device, context);
    if (function == NULL ||
        (cached && atomic_load_explicit(&settled_functions[device][handle_slot(function)],
                                        memory_order_relaxed) == (void *)function))
        return;
    uint64_t generation = atomic_load(&settle_generation);
    CUmodule module = NULL;
    CUlibrary library = NULL;
    if (cuda_replay_driver.cuFuncGetModule == NULL ||
        cuda_replay_driver.cuFuncGetModule(&module, function) != CUDA_SUCCESS)
        module = NULL;
    if (module == NULL &&
        (cuda_replay_driver.cuKernelGetLibrary == NULL ||
         cuda_replay_driver.cuKernelGetLibrary(&library, (CUkernel)function) != CUDA_SUCCESS))
        return;
    /* Loading happens once per function; the module-loaded callback it
     * triggers registers the module's names, and on this thread names the
     * module, before its variables are looked up. */
    watching_module_loads = 1;
    module_loaded_while_watching = -1;
    CUfunction loadable = function;
    if (module == NULL && cuda_replay_driver.cuKernelGetFunction != NULL &&
        cuda_replay_driver.cuKernelGetFunction(&loadable, (CUkernel)function) != CUDA_SUCCESS)
        loadable = NULL;
    CUfunctionLoadingState state = CU_FUNCTION_LOADING_STATE_UNLOADED;
    bool loaded = false;
    if (loadable != NULL && cuda_replay_driver.cuFuncIsLoaded != NULL &&
        cuda_replay_driver.cuFuncLoad != NULL &&
        cuda_replay_driver.cuFuncIsLoaded(&state, loadable) == CUDA_SUCCESS)
        loaded = state == CU_FUNCTION_LOADING_STATE_LOADED ||
                 cuda_replay_driver.cuFuncLoad(loadable) == CUDA_SUCCESS;
    watching_module_loads = 0;
    bool has_only = module_loaded_while_watching >= 0;
    uint32_t only_id = has_only ? (uint32_t)module_loaded_while_watching : 0;
    bool settled = atomic_load_explicit(&pending_modules[device], memory_order_relaxed) == 0 ||
                   resolve_handle(device, context, module, library, loaded, has_only, only_id);
    /* Loaded, and its module settled or without variables: nothing more
     * to do for this function until a module unloads. Unknown loading
     * state (a driver before 12.4): tried at every launch, as before. */
    if (loaded && settled && cached)
        settle(settled_functions[device], function, generation);
}

/* The program asking for a __device__ variable's address (global_query_ids
 * in cuda_replay.c): its module is resolved now, whether or not one of its
 * kernels has launched. At API_EXIT of a successful call; one relaxed load
 * when nothing is pending on the device. */
void cuda_replay_global_queried(CUpti_CallbackId id, const CUpti_CallbackData *call)
{
    if (call->callbackSite == CUPTI_API_EXIT && cuda_replay_result_of(call) == CUDA_SUCCESS) {
        int device = cuda_replay_device_of(call->context);
        if (device >= 0 && atomic_load_explicit(&pending_modules[device], memory_order_relaxed))
            resolve_handle(device, call->context,
                           id == CUPTI_DRIVER_TRACE_CBID_cuModuleGetGlobal_v2
                               ? ((const cuModuleGetGlobal_v2_params *)call->functionParams)->hmod
                               : NULL,
                           id == CUPTI_DRIVER_TRACE_CBID_cuLibraryGetGlobal
                               ? ((const cuLibraryGetGlobal_params *)call->functionParams)->library
                               : NULL,
                           true, false, 0);
    }
}
