/*
 * cuda_activity_buffers.c: CUPTI's activity buffers (cuda_activity_buffers.h):
 * mapped on request, parsed and unmapped on completion, CUPTI's dropped
 * records counted.
 *
 * Must never: keep a completed buffer mapped (its pages would stay
 * resident), or parse a buffer CUPTI gave as NULL.
 */
#include "backend/cuda/cuda_activity_buffers.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "core/config.h"
#include "core/log.h"

#define BUFFER_DEFAULT_KIB 8192u

static const cuda_cupti_api *cupti;
static cuda_activity_parse_fn parse;
static size_t buffer_bytes = (size_t)BUFFER_DEFAULT_KIB << 10;
static _Atomic uint64_t cupti_dropped, buffers_lost;

/* Buffers are mapped and unmapped whole rather than taken from malloc:
 * freed 8 MiB chunks stayed resident in glibc's per-thread arenas once the
 * delivery thread made CUPTI hand buffers over part-filled ten times a
 * second (measured on the H200: +43 MiB peak RSS on the training loop).
 * A mapping holds only the pages CUPTI wrote, and unmapping returns them. */
static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    void *mapping =
        mmap(NULL, buffer_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    *buffer = mapping != MAP_FAILED ? mapping : NULL;
    *size = *buffer != NULL ? buffer_bytes : 0;
    *max_records = 0;
    if (*buffer == NULL)
        atomic_fetch_add(&buffers_lost, 1);
}

static void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream_id, uint8_t *buffer,
                                      size_t size, size_t valid_size)
{
    if (buffer != NULL && valid_size > 0)
        parse(buffer, valid_size);
    size_t dropped = 0;
    if (cupti->cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS &&
        dropped > 0) {
        atomic_fetch_add(&cupti_dropped, dropped);
        CORE_LOG_ONCE("cuda.cupti_dropped", CORE_LOG_WARNING,
                      "CUPTI dropped %zu activity records (buffers full)", dropped);
    }
    if (buffer != NULL)
        munmap(buffer, size);
}

CUptiResult cuda_activity_buffers_register(const cuda_cupti_api *api,
                                           cuda_activity_parse_fn parse_records)
{
    cupti = api;
    parse = parse_records;
    const char *kib_text = getenv("FLARE_CUPTI_BUFFER_KB");
    uint32_t kib = BUFFER_DEFAULT_KIB;
    if (kib_text != NULL && core_parse_u32(kib_text, 64, 262144, &kib) != 0) {
        core_log(CORE_LOG_WARNING, "FLARE_CUPTI_BUFFER_KB='%.16s' is not 64..262144; using %u",
                 kib_text, BUFFER_DEFAULT_KIB);
        kib = BUFFER_DEFAULT_KIB;
    }
    buffer_bytes = (size_t)kib << 10;
    return cupti->cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
}

void cuda_activity_buffers_counts(cuda_activity_counts *counts)
{
    counts->cupti_dropped = atomic_load(&cupti_dropped);
    counts->buffers_lost = atomic_load(&buffers_lost);
}
