/*
 * cuda_pc_lines.c: source lines of PC samples (cuda_pc_lines.h): the
 * cubins kept at their load, CUPTI's cubin CRC to match a record to its
 * cubin, and a bounded cache of cuptiGetSassToSourceCorrelation's answers.
 *
 * Must never: call CUPTI on an application thread (a module load only
 * copies), hold modules_lock across a CUPTI call or a copy, free what a
 * sample may point at, or grow past its bounds uncounted.
 */
#include "backend/cuda/cuda_pc_lines.h"

#include <cupti_pcsampling.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/capability.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "flare/flare.h"
#include "pcsamp/pc_names.h"

/* Distinct source files, and their bytes (paths). */
#define LINES_FILES_MAX       4096u
#define LINES_FILES_BYTES_MAX (1u << 20)
/* An offset no instruction has: the key of a function's own entry. */
#define FUNCTION_ENTRY UINT64_MAX
/* The longest source path kept (bytes): longer ones are refused, counted. */
#define LINES_PATH_MAX 4096u

typedef struct kept_module {
    void *bytes;
    size_t size;
    uint64_t crc;  /* drain thread only, once crc_state is set */
    int crc_state; /* drain thread only: 0 not computed, 1 computed, -1 failed */
} kept_module;

/* A function's own entry (offset FUNCTION_ENTRY) says what its lookups
 * found so far; an instruction's says its answer. */
enum { FUNCTION_UNKNOWN, FUNCTION_HAS_LINES, FUNCTION_NO_LINES, FUNCTION_NO_MODULE };

typedef struct line_entry {
    uint64_t crc, offset;
    const char *function; /* NULL: a free slot */
    const char *file;     /* the instruction's; NULL for none */
    uint32_t line;        /* or, in a function's own entry, FUNCTION_* */
    /* A function's own entry, FUNCTION_NO_LINES: its code (kept), or NULL. */
    const store_pc_code *code;
} line_entry;

typedef struct line_stats {
    uint64_t instructions, with_line; /* instructions looked up (or known) */
    uint64_t functions_without, functions_no_module;
    uint64_t cache_full, lookup_ns;
    uint64_t files_refused; /* a line found, its file's path not kept */
    uint64_t put_off;       /* lookups left to a later call (time budget) */
    uint64_t codes_refused; /* functions without lines whose code was not kept */
    size_t modules_kept, bytes_kept;
    uint64_t modules_refused;
} line_stats;

static CUptiResult (*get_crc)(CUpti_GetCubinCrcParams *);
static CUptiResult (*correlate)(CUpti_GetSassToSourceCorrelationParams *);
static _Atomic int installed;
static size_t budget_bytes;

/* Module loads append under modules_lock; the drain reads the published
 * count under it and the slots below it without. */
static pthread_mutex_t modules_lock = PTHREAD_MUTEX_INITIALIZER;
static kept_module modules[CUDA_PC_LINES_MODULES_MAX];
static size_t module_count, bytes_kept;
static uint64_t modules_refused;

/* Drain thread only. */
static size_t crc_done;
static line_entry *cache;
static size_t cache_used;
static int cache_failed;
static pc_names *files;
static line_stats stats, reported;
static uint64_t budget_ns = CUDA_PC_LINES_BUDGET_NS;
static uint64_t window_began_ns, window_spent_ns;

void cuda_pc_lines_set_budget(uint64_t budget)
{
    budget_ns = budget;
    window_spent_ns = 0;
}

/* Whether a lookup may be made now (within the budget of this window). */
static int budget_allows(void)
{
    if (budget_ns == 0)
        return 1;
    uint64_t now = core_now_ns();
    if (now - window_began_ns >= CUDA_PC_LINES_BUDGET_WINDOW_NS) {
        window_began_ns = now;
        window_spent_ns = 0;
    }
    return window_spent_ns < budget_ns;
}

void cuda_pc_lines_off(const char *reason)
{
    atomic_store(&installed, 0);
    core_capability_set("pc_source_lines", 1, CORE_CAPABILITY_UNAVAILABLE, "%s", reason);
}

int cuda_pc_lines_install(const cuda_cupti_api *cupti, char *reason, size_t reason_size)
{
    if (atomic_load(&installed))
        return FLARE_OK; /* PC sampling's and SASS metrics' installs both ask */
    *(void **)(&get_crc) = dlsym(cupti->library, "cuptiGetCubinCrc");
    *(void **)(&correlate) = dlsym(cupti->library, "cuptiGetSassToSourceCorrelation");
    if (get_crc == NULL || correlate == NULL) {
        snprintf(reason, reason_size,
                 "cuptiGetCubinCrc or cuptiGetSassToSourceCorrelation missing in %.200s: PC "
                 "samples name their function and offset only",
                 cupti->path);
        return FLARE_ERR_BACKEND;
    }
    uint32_t mib = CUDA_PC_CUBIN_MIB_DEFAULT;
    const char *text = getenv("FLARE_PC_CUBIN_MIB");
    if (text != NULL && core_parse_u32(text, 0, 1u << 20, &mib) != FLARE_OK) {
        core_log(CORE_LOG_WARNING,
                 "FLARE_PC_CUBIN_MIB=%.40s is not a number of MiB (0 to 1048576): %u kept", text,
                 CUDA_PC_CUBIN_MIB_DEFAULT);
        mib = CUDA_PC_CUBIN_MIB_DEFAULT;
    }
    budget_bytes = (size_t)mib << 20;
    if (pc_names_create(LINES_FILES_MAX, LINES_FILES_BYTES_MAX, &files) != FLARE_OK) {
        snprintf(reason, reason_size, "no memory for the source files' names");
        return FLARE_ERR_NO_MEMORY;
    }
    atomic_store(&installed, 1);
    core_capability_set("pc_source_lines", 1, CORE_CAPABILITY_ACTIVE,
                        "cubins kept at their load (up to %u MiB, FLARE_PC_CUBIN_MIB) for "
                        "CUPTI's SASS-to-source correlation; no PC looked up yet",
                        mib);
    return FLARE_OK;
}

void cuda_pc_lines_module_loaded(const void *cubin, size_t size)
{
    if (!atomic_load(&installed) || cubin == NULL || size == 0)
        return;
    int saved_errno = errno; /* the program's, inside its launch or load */
    /* Checked before the copy (made outside the lock) and again after. */
    pthread_mutex_lock(&modules_lock);
    int fits = module_count < CUDA_PC_LINES_MODULES_MAX && size <= budget_bytes - bytes_kept;
    if (!fits)
        modules_refused++;
    pthread_mutex_unlock(&modules_lock);
    if (!fits) {
        errno = saved_errno;
        return;
    }
    void *copy = malloc(size);
    if (copy != NULL)
        memcpy(copy, cubin, size);
    pthread_mutex_lock(&modules_lock);
    if (copy != NULL && module_count < CUDA_PC_LINES_MODULES_MAX &&
        size <= budget_bytes - bytes_kept) {
        modules[module_count++] = (kept_module){.bytes = copy, .size = size};
        bytes_kept += size;
        copy = NULL;
    } else {
        modules_refused++;
    }
    pthread_mutex_unlock(&modules_lock);
    free(copy);
    errno = saved_errno;
}

/* The kept module whose CRC is crc, computing the CRCs of those loaded
 * since the last call (on this thread, outside the lock). */
static const kept_module *module_of(uint64_t crc)
{
    pthread_mutex_lock(&modules_lock);
    size_t count = module_count;
    stats.modules_kept = module_count;
    stats.bytes_kept = bytes_kept;
    stats.modules_refused = modules_refused;
    pthread_mutex_unlock(&modules_lock);
    for (; crc_done < count; crc_done++) {
        kept_module *module = &modules[crc_done];
        CUpti_GetCubinCrcParams params = {
            .size = CUpti_GetCubinCrcParamsSize, .cubinSize = module->size, .cubin = module->bytes};
        uint64_t began = core_now_ns();
        module->crc_state = get_crc(&params) == CUPTI_SUCCESS ? 1 : -1;
        window_spent_ns += core_now_ns() - began;
        module->crc = params.cubinCrc;
    }
    for (size_t i = 0; i < count; i++)
        if (modules[i].crc_state == 1 && modules[i].crc == crc)
            return &modules[i];
    return NULL;
}

static uint64_t key_hash(uint64_t crc, const char *function, uint64_t offset)
{
    uint64_t hash = crc * 0x9e3779b97f4a7c15ull;
    hash ^= (uint64_t)(uintptr_t)function * 0xc2b2ae3d27d4eb4full;
    hash ^= offset * 0x165667b19e3779f9ull;
    return hash ^ (hash >> 29);
}

/* The entry of the key, or the free slot it would take (function NULL). */
static line_entry *slot_of(uint64_t crc, const char *function, uint64_t offset)
{
    size_t mask = CUDA_PC_LINES_CACHE_MAX - 1;
    for (size_t i = key_hash(crc, function, offset) & mask;; i = (i + 1) & mask) {
        line_entry *entry = &cache[i];
        if (entry->function == NULL ||
            (entry->function == function && entry->crc == crc && entry->offset == offset))
            return entry;
    }
}

/* Room for two more entries (an instruction's and its function's), the
 * table kept under three quarters full so that probes stay short. */
static int cache_has_room(void)
{
    if (cache == NULL && !cache_failed) {
        cache = calloc(CUDA_PC_LINES_CACHE_MAX, sizeof(*cache));
        cache_failed = cache == NULL;
    }
    return cache != NULL && cache_used + 2 <= CUDA_PC_LINES_CACHE_MAX / 4 * 3;
}

/* CUPTI's answer for one instruction: the kept path of "dir/file". */
static const char *ask_cupti(const kept_module *module, const char *function, uint64_t offset,
                             uint32_t *line, int *refused)
{
    CUpti_GetSassToSourceCorrelationParams params = {.size =
                                                         CUpti_GetSassToSourceCorrelationParamsSize,
                                                     .cubin = module->bytes,
                                                     .functionName = function,
                                                     .cubinSize = module->size,
                                                     .pcOffset = offset};
    uint64_t began = core_now_ns();
    CUptiResult result = correlate(&params);
    uint64_t took = core_now_ns() - began;
    stats.lookup_ns += took;
    window_spent_ns += took;
    const char *kept = NULL;
    *refused = 0;
    if (result == CUPTI_SUCCESS && params.fileName != NULL && params.fileName[0] != '\0' &&
        params.lineNumber > 0) {
        int joined =
            params.fileName[0] != '/' && params.dirName != NULL && params.dirName[0] != '\0';
        size_t length = strlen(params.fileName) + (joined ? strlen(params.dirName) + 1 : 0);
        /* Whole or not at all: a path cut short would name another file. */
        char *path = length <= LINES_PATH_MAX ? malloc(length + 1) : NULL;
        if (path != NULL) {
            snprintf(path, length + 1, joined ? "%s/%s" : "%s%s", joined ? params.dirName : "",
                     params.fileName);
            kept = pc_names_find(files, path);
            if (kept == NULL)
                kept = pc_names_add(files, path, path);
            free(path);
        }
        *refused = kept == NULL;
        *line = kept != NULL ? params.lineNumber : 0;
    }
    /* CUPTI's header leaves both strings to the caller. */
    free(params.fileName);
    free(params.dirName);
    return kept;
}

/* Lookups and reports, one thread at a time: the PC engine's drain and
 * the SASS engine's stop each hold their own engine's lock, not one lock
 * for both. Never contended in practice (one window at a time). */
static pthread_mutex_t lookup_lock = PTHREAD_MUTEX_INITIALIZER;

static const line_entry *find_locked(uint64_t crc, const char *cupti_name, const char *function,
                                     uint64_t offset, const char **file, uint32_t *line);

void cuda_pc_lines_find(uint64_t crc, const char *cupti_name, const char *function, uint64_t offset,
                        const char **file, uint32_t *line, const store_pc_code **code)
{
    pthread_mutex_lock(&lookup_lock);
    const line_entry *own = find_locked(crc, cupti_name, function, offset, file, line);
    if (code != NULL)
        *code = *file == NULL && own != NULL && own->line == FUNCTION_NO_LINES ? own->code : NULL;
    pthread_mutex_unlock(&lookup_lock);
}

/* A function without line information: its code, kept for the process
 * (CUPTI's name copied: the record's is freed after the read). NULL, and
 * counted, without memory. */
static const store_pc_code *keep_code(const kept_module *module, const char *cupti_name)
{
    store_pc_code *code = malloc(sizeof(*code));
    char *symbol = strdup(cupti_name);
    if (code == NULL || symbol == NULL) {
        free(code);
        free(symbol);
        stats.codes_refused++;
        return NULL;
    }
    *code = (store_pc_code){.cubin_crc = module->crc,
                            .symbol = symbol,
                            .cubin = module->bytes,
                            .cubin_size = module->size};
    return code;
}

/* The answer for one instruction into *file and *line; returns the
 * function's own entry (NULL where none was made). */
static const line_entry *find_locked(uint64_t crc, const char *cupti_name, const char *function,
                                     uint64_t offset, const char **file, uint32_t *line)
{
    *file = NULL;
    *line = 0;
    if (!atomic_load(&installed) || function == NULL || cupti_name == NULL)
        return NULL;
    if (!cache_has_room()) {
        line_entry *known = cache != NULL ? slot_of(crc, function, offset) : NULL;
        line_entry *own = cache != NULL ? slot_of(crc, function, FUNCTION_ENTRY) : NULL;
        if (known != NULL && known->function != NULL) {
            *file = known->file;
            *line = known->file != NULL ? known->line : 0;
        } else if (own == NULL || own->function == NULL ||
                   (own->line != FUNCTION_NO_LINES && own->line != FUNCTION_NO_MODULE)) {
            stats.cache_full++; /* one that would have been asked */
        }
        return own != NULL && own->function != NULL ? own : NULL;
    }
    line_entry *entry = slot_of(crc, function, offset);
    if (entry->function != NULL) {
        *file = entry->file;
        *line = entry->file != NULL ? entry->line : 0;
        if (entry->file != NULL)
            return NULL; /* a line: the caller wants no code (one probe less) */
        line_entry *known_own = slot_of(crc, function, FUNCTION_ENTRY);
        return known_own->function != NULL ? known_own : NULL;
    }
    line_entry *own = slot_of(crc, function, FUNCTION_ENTRY);
    if (own->function == NULL) {
        *own = (line_entry){
            .crc = crc, .offset = FUNCTION_ENTRY, .function = function, .line = FUNCTION_UNKNOWN};
        cache_used++;
        entry = slot_of(crc, function, offset); /* own may have taken its slot */
    }
    if (own->line == FUNCTION_NO_LINES || own->line == FUNCTION_NO_MODULE)
        return own; /* said once, in the counts; not asked again */
    if (!budget_allows()) {
        stats.put_off++; /* not cached: asked again at a later call */
        return own;
    }
    const kept_module *module = module_of(crc);
    if (module == NULL) {
        own->line = FUNCTION_NO_MODULE;
        stats.functions_no_module++;
        return own;
    }
    uint32_t found_line = 0;
    int refused = 0;
    const char *found = ask_cupti(module, cupti_name, offset, &found_line, &refused);
    *entry = (line_entry){
        .crc = crc, .offset = offset, .function = function, .file = found, .line = found_line};
    cache_used++;
    stats.instructions++;
    if (found != NULL) {
        stats.with_line++;
        own->line = FUNCTION_HAS_LINES;
    } else if (refused) {
        /* A line, its path not kept: the function has lines all the same. */
        stats.files_refused++;
        own->line = FUNCTION_HAS_LINES;
    } else if (own->line == FUNCTION_UNKNOWN) {
        /* Its first instruction had none: built without line information. */
        own->line = FUNCTION_NO_LINES;
        own->code = keep_code(module, cupti_name);
        stats.functions_without++;
    }
    *file = found;
    *line = found_line;
    return own;
}

static void report_locked(void);

void cuda_pc_lines_report(void)
{
    if (!atomic_load(&installed))
        return;
    pthread_mutex_lock(&lookup_lock);
    report_locked();
    pthread_mutex_unlock(&lookup_lock);
}

static void report_locked(void)
{
    /* The cubins' counts as they stand, lookups or not. */
    pthread_mutex_lock(&modules_lock);
    stats.modules_kept = module_count;
    stats.bytes_kept = bytes_kept;
    stats.modules_refused = modules_refused;
    pthread_mutex_unlock(&modules_lock);
    if (memcmp(&stats, &reported, sizeof(stats)) == 0)
        return;
    reported = stats;
    /* Put off is not lost (asked again at a later read): said, not degraded
     * (a PyTorch window put off 521 records, all asked again, session 17). */
    int degraded = stats.modules_refused > 0 || stats.cache_full > 0 ||
                   stats.functions_no_module > 0 || stats.files_refused > 0 ||
                   stats.codes_refused > 0 || cache_failed;
    core_capability_set(
        "pc_source_lines", 1, degraded ? CORE_CAPABILITY_DEGRADED : CORE_CAPABILITY_ACTIVE,
        "%llu of %llu sampled instructions on a source line; %llu functions without line "
        "information (nvcc -lineinfo adds it; their SASS text is disassembled at the "
        "session's end), %llu in no kept cubin, %llu whose code was not kept (no memory); "
        "%zu cubins kept "
        "(%.1f MiB), %llu not kept (FLARE_PC_CUBIN_MIB); %llu instructions not looked up "
        "(line cache full), %llu whose file's path was not kept (too long, or the table of "
        "%u files full); lookups took %.1f ms, %llu put off to a later read (at most %.0f ms "
        "of lookups every %.0f ms)",
        (unsigned long long)stats.with_line, (unsigned long long)stats.instructions,
        (unsigned long long)stats.functions_without, (unsigned long long)stats.functions_no_module,
        (unsigned long long)stats.codes_refused, stats.modules_kept,
        (double)stats.bytes_kept / (1024.0 * 1024.0), (unsigned long long)stats.modules_refused,
        (unsigned long long)stats.cache_full, (unsigned long long)stats.files_refused,
        LINES_FILES_MAX, (double)stats.lookup_ns / 1e6, (unsigned long long)stats.put_off,
        (double)budget_ns / 1e6, (double)CUDA_PC_LINES_BUDGET_WINDOW_NS / 1e6);
}
