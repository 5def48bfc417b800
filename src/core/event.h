/*
 * event.h: the fixed-size record that travels through the per-thread rings.
 *
 * Producers (application threads, backend completion threads) fill one of
 * these in place in their ring; the collector turns it into a database row.
 * It is a plain value: no pointers into memory that may die before the
 * collector reads it, which is why names are copied inline (truncated).
 */
#ifndef FLARE_CORE_EVENT_H
#define FLARE_CORE_EVENT_H

#include <stdint.h>

#include "flare/flare.h"

/* X-macro of event kinds: enum value, name. Add at the end only. */
#define CORE_EVENT_KIND_MAP(X)                                                                     \
    X(KERNEL, 1, "kernel")                                                                         \
    X(COPY, 2, "copy")                                                                             \
    X(MEMSET, 3, "memset")                                                                         \
    X(SCOPE, 4, "scope")                                                                           \
    X(METRIC, 5, "metric")                                                                         \
    X(EXTERNAL_CORRELATION, 6, "external_correlation")                                             \
    X(GRAPH_LAUNCH, 7, "graph_launch")                                                             \
    X(API_CALL, 8, "api_call")                                                                     \
    X(STORM, 9, "storm")                                                                           \
    X(UNTIMED_LAUNCH, 10, "untimed_launch")

typedef enum core_event_kind {
#define CORE_EVENT_KIND_ENUM_(name, value, text) CORE_EVENT_##name = value,
    CORE_EVENT_KIND_MAP(CORE_EVENT_KIND_ENUM_)
#undef CORE_EVENT_KIND_ENUM_
} core_event_kind;

const char *core_event_kind_name(int kind);

/* Flag bits. */
#define CORE_EVENT_FLAG_STILL_OPEN 0x1u /* scope, storm: session ended while it was open */

typedef struct core_event {
    uint16_t kind;
    uint16_t flags;
    uint32_t generation; /* the session that was active at push; stale ones are skipped */
    uint64_t start_ns;
    uint64_t end_ns;
    uint64_t id; /* kernel/copy: correlation id; scope: instance id */
    uint64_t stream_id;
    int32_t device;
    uint32_t depth; /* scope nesting depth, 0 = outermost */
    union {
        struct {
            uint32_t grid[3];
            uint32_t block[3];
            uint32_t shared_memory_bytes;
            uint32_t registers_per_thread;
        } kernel;
        struct {
            uint64_t bytes;
            int32_t copy_kind;
            int32_t status;
        } copy;
        struct {
            int64_t value; /* at start_ns */
        } metric;
        struct {
            uint64_t external_id; /* the framework's id; id holds the correlation id */
            uint32_t external_kind;
        } external;
        struct {
            /* id holds the launch's correlation id, stream_id its stream,
             * start_ns its time; name the innermost scope or NVTX push
             * range open on the launching thread ("" for none). */
            uint64_t graph_exec;        /* the CUgraphExec handle launched */
            uint64_t scope_instance_id; /* that scope's instance id; 0 for none */
        } graph_launch;
        /* API_CALL: a launch, copy or memset call on the application's
         * thread, start_ns to end_ns; id its correlation id, name the
         * driver entry point. */
        struct {
            /* STORM: start_ns to end_ns, device (-1: the process). */
            uint64_t untimed_launches;
        } storm;
        /* UNTIMED_LAUNCH: a kernel launch made while a SASS metrics window
         * counts, which the GPU does not time (cuda_untimed.h): id its correlation id,
         * start_ns its time on the launching thread, device, name the
         * kernel's. */
        struct {
            uint64_t scope_instance_id; /* the innermost open scope; 0 for none */
        } untimed_launch;
    } detail;
    uint64_t context_id; /* kernels: the CUDA context; 0 elsewhere */
    /* Kernels, copies and memsets run by a CUDA graph: CUPTI's graph id and
     * node id; 0 and 0 for work launched on its own (and elsewhere). */
    uint64_t graph_node_id;
    uint32_t graph_id;
    /* A name longer than the inline copy, interned for the process's life
     * (core_intern); NULL means the inline name is the whole name. */
    const char *long_name;
    char name[FLARE_NAME_MAX];
} core_event;

/* Copies at most FLARE_NAME_MAX - 1 bytes of source and terminates; NULL gives "". */
static inline void core_copy_name(char destination[FLARE_NAME_MAX], const char *source)
{
    int i = 0;
    if (source != NULL) {
        for (; i < FLARE_NAME_MAX - 1 && source[i] != '\0'; i++)
            destination[i] = source[i];
    }
    destination[i] = '\0';
}

#endif /* FLARE_CORE_EVENT_H */
