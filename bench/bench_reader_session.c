/*
 * bench_reader_session.c: writes a big finished session for the Python
 * reader's benchmark (bench/bench_python_reader.py): N kernels (one every
 * 1.5 us on one of 8 streams of 2 devices, 50 names), a scope and a copy
 * every 10 kernels, through the store's writer as a session would, then the
 * indexes `flare trace` builds at the end. The session stays in DIR; the
 * caller removes it.
 *
 * Usage: bench_reader_session DIR [kernels]   (default 1000000)
 * Exits 0, or 1 with a message on stderr.
 */
#include <stdio.h>
#include <stdlib.h>

#include "store/store.h"
#include "store/store_views.h"

#define SESSION_NAMES 50
#define SESSION_BATCH 10000
#define SESSION_PID   4242

/* One batch of kernels [first, first + count), with a scope and a copy
 * after every 10th. 0, or nonzero with the store's error recorded. */
static int put_batch(store *handle, long first, long count, uint64_t *clock_ns, uint32_t *random,
                     char names[][32])
{
    store_kernel_row row = {
        .pid = SESSION_PID, .grid = {128, 1, 1}, .block = {256, 1, 1}, .registers_per_thread = 32};
    for (long j = first; j < first + count; j++) {
        *random = *random * 1664525u + 1013904223u;
        row.device = (int)(j & 1);
        row.stream_id = (uint64_t)(j & 7);
        row.correlation_id = (uint64_t)j;
        row.name = names[(*random >> 8) % SESSION_NAMES];
        row.start_ns = *clock_ns;
        row.end_ns = *clock_ns + 2000 + (*random >> 20);
        *clock_ns += 1500;
        if (store_put_kernel(handle, &row) != 0)
            return 1;
        if ((j + 1) % 10 != 0)
            continue;
        store_scope_row scope = {.pid = SESSION_PID,
                                 .thread_id = SESSION_PID,
                                 .instance_id = (uint64_t)j,
                                 .name = "step",
                                 .start_ns = *clock_ns - 15000,
                                 .end_ns = *clock_ns};
        store_copy_row copy = {.pid = SESSION_PID,
                               .stream_id = 9,
                               .correlation_id = (uint64_t)j,
                               .copy_kind = 1 + (int)(j % 3),
                               .bytes = 1u << 20,
                               .start_ns = *clock_ns - 15000,
                               .end_ns = *clock_ns - 5000};
        if (store_put_scope(handle, &scope) != 0 || store_put_copy(handle, &copy) != 0)
            return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    long kernels = argc > 2 ? strtol(argv[2], NULL, 10) : 1000000;
    if (argc < 2 || argc > 3 || kernels <= 0) {
        fprintf(stderr, "usage: bench_reader_session DIR [kernels > 0]\n");
        return 1;
    }
    char error[512];
    store *handle;
    if (store_open(argv[1], STORE_OPEN_WRITE, &handle, error, sizeof(error)) != 0) {
        fprintf(stderr, "bench_reader_session: %s\n", error);
        return 1;
    }
    char names[SESSION_NAMES][32];
    for (int i = 0; i < SESSION_NAMES; i++)
        snprintf(names[i], sizeof(names[i]), "kernel_%02d_with_a_longer_name", i);
    uint64_t clock_ns = 1000000000000ull;
    uint32_t random = 12345;
    store_session_info info = {
        .command = "bench_reader_session", .start_ns = clock_ns, .start_unix_ns = 1};
    int failed = store_begin(handle) != 0 || store_session_begin(handle, &info) != 0 ||
                 store_process_begin(handle, SESSION_PID, 1, clock_ns, "sim", "bench") != 0 ||
                 store_commit(handle) != 0;
    for (long i = 0; i < kernels && !failed; i += SESSION_BATCH) {
        long count = kernels - i < SESSION_BATCH ? kernels - i : SESSION_BATCH;
        failed = store_begin(handle) != 0 ||
                 put_batch(handle, i, count, &clock_ns, &random, names) != 0 ||
                 store_commit(handle) != 0;
    }
    store_index_result indexed;
    failed = failed || store_begin(handle) != 0 ||
             store_process_end(handle, SESSION_PID, clock_ns) != 0 ||
             store_session_end(handle, clock_ns, 1, 0) != 0 || store_commit(handle) != 0 ||
             store_build_indexes(handle, &indexed) != 0;
    if (failed)
        fprintf(stderr, "bench_reader_session: %s\n", store_last_error(handle));
    store_close(handle);
    return failed ? 1 : 0;
}
