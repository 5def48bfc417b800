/*
 * test_cuda_pc_lines.c: source lines of CUDA PC samples
 * (backend/cuda/cuda_pc_lines.c) against a fake CUPTI defined here: the
 * program is linked with ENABLE_EXPORTS (-rdynamic) and hands
 * cuda_pc_lines_install dlopen(NULL) as libcupti, so its dlsym finds
 * cuptiGetCubinCrc and cuptiGetSassToSourceCorrelation below. The fake CRC
 * is a hash of the cubin's bytes; the fake correlation answers from the
 * cubin's tag and the function's name (fake_answer), returns its strings
 * malloc'd as CUPTI does (the caller frees them: ASan sees a leak or a wrong
 * free), and counts its calls, and any made off the drain (this program's
 * main thread) or with arguments CUPTI would refuse.
 *
 * The module is process-global and installs once, so the cases run in
 * order in one process and check counts as differences from their own
 * start. The budget comes from FLARE_TEST_PC_CUBIN_MIB, set in
 * FLARE_PC_CUBIN_MIB before the install: "1" (test_cuda_pc_lines, every
 * case; the cache bound is last, as it fills the cache), "0"
 * (test_cuda_pc_lines_keep_none) and "lots" (test_cuda_pc_lines_bad_budget:
 * a warning, and the default). core/capability.h has no reader, so the
 * pc_source_lines row is read back through a store in a temporary directory.
 *
 * Must never: load the real libcupti or reach a GPU, free a file name the
 * module handed out, or let a fixed sleep be an assertion (threads are
 * joined; the drain's wait for them is bounded polling).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <cupti.h>
#include <cupti_pcsampling.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_loader.h"
#include "backend/cuda/cuda_pc_lines.h"
#include "core/capability.h"
#include "core/log.h"
#include "flare/flare.h"
#include "store/store.h"
#include "test_util.h"

#ifndef FLARE_TEST_PC_CUBIN_MIB
#define FLARE_TEST_PC_CUBIN_MIB "1"
#endif

#define MIB           ((size_t)1 << 20)
#define CUBIN_BYTES   64
#define LOADERS       4
#define LOADER_CUBINS 128

/* ---- the fake CUPTI ---- */

static pthread_t drain_thread; /* the main thread: the PC engine's drain */

static struct {
    _Atomic int crcs, correlations;
    _Atomic int off_drain; /* CUPTI calls on another thread (a module load's) */
    _Atomic int misuse;    /* calls CUPTI would refuse */
} fake;

/* FNV-1a: CUPTI's CRC is a function of the bytes only, and so is this. */
static uint64_t fake_hash(const void *bytes, size_t size)
{
    uint64_t hash = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < size; i++)
        hash = (hash ^ ((const unsigned char *)bytes)[i]) * 0x100000001b3ull;
    return hash;
}

/* A fake cubin: "cubin:<tag>", NUL, then filler. */
static void make_cubin(void *bytes, size_t size, const char *tag)
{
    memset(bytes, 0xab, size);
    snprintf(bytes, size, "cubin:%s", tag);
}

static void on_call(void)
{
    if (!pthread_equal(pthread_self(), drain_thread))
        atomic_fetch_add(&fake.off_drain, 1);
}

CUptiResult CUPTIAPI cuptiGetCubinCrc(CUpti_GetCubinCrcParams *pParams)
{
    atomic_fetch_add(&fake.crcs, 1);
    on_call();
    if (pParams->size != CUpti_GetCubinCrcParamsSize || pParams->cubin == NULL ||
        pParams->cubinSize == 0) {
        atomic_fetch_add(&fake.misuse, 1);
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    pParams->cubinCrc = fake_hash(pParams->cubin, pParams->cubinSize);
    return CUPTI_SUCCESS;
}

static char *fake_string(const char *format, ...) __attribute__((format(printf, 1, 2)));
static char *fake_string(const char *format, ...)
{
    char *text = NULL;
    va_list arguments;
    va_start(arguments, format);
    if (vasprintf(&text, format, arguments) < 0) /* malloc'd, as CUPTI's */
        text = NULL;
    va_end(arguments);
    return text;
}

/* Fills lineNumber, fileName and dirName (malloc'd, the caller's to free)
 * for function+offset of the cubin tagged tag. */
static CUptiResult fake_answer(const char *tag, const char *function, uint64_t offset,
                               CUpti_GetSassToSourceCorrelationParams *p)
{
    if (strcmp(tag, "nolines") == 0) /* a cubin built without -lineinfo */
        return CUPTI_SUCCESS;
    if (strcmp(function, "k_lines") == 0 || strcmp(function, "k_fill") == 0) {
        p->dirName = fake_string("/src/%s", tag);
        p->fileName = fake_string("k.cu");
        p->lineNumber = 100 + (uint32_t)(offset / 16);
    } else if (strcmp(function, "k_files") == 0) { /* a file per instruction */
        p->dirName = fake_string("/src/%s", tag);
        p->fileName = fake_string("f%llu.cu", (unsigned long long)(offset / 16));
        p->lineNumber = 1 + (uint32_t)(offset / 16);
    } else if (strcmp(function, "k_abs") == 0) {
        p->dirName = fake_string("/ignored");
        p->fileName = fake_string("/abs/%s.cu", tag);
        p->lineNumber = 7;
    } else if (strcmp(function, "k_nodir") == 0) { /* no dir at 0, "" after */
        p->dirName = offset == 0 ? NULL : fake_string("%s", "");
        p->fileName = fake_string("%s.cu", tag);
        p->lineNumber = 5 + (uint32_t)(offset / 16);
    } else if (strcmp(function, "k_mixed") == 0) { /* a line at 0 only */
        if (offset == 0) {
            p->dirName = fake_string("/src/%s", tag);
            p->fileName = fake_string("m.cu");
            p->lineNumber = 1;
        }
    } else if (strcmp(function, "k_long") == 0) { /* a path too long at 0 */
        p->dirName = offset == 0 ? fake_string("/%05000d", 0) : fake_string("/src/%s", tag);
        p->fileName = fake_string("k.cu");
        p->lineNumber = 200 + (uint32_t)(offset / 16);
    } else if (strcmp(function, "k_named0") == 0) { /* names, but line 0 */
        p->dirName = fake_string("/src/%s", tag);
        p->fileName = fake_string("n.cu");
    } else if (strcmp(function, "k_zero") != 0) {
        /* k_error, or any function not in the cubin: what CUPTI says. */
        return CUPTI_ERROR_UNKNOWN;
    }
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI
cuptiGetSassToSourceCorrelation(CUpti_GetSassToSourceCorrelationParams *pParams)
{
    atomic_fetch_add(&fake.correlations, 1);
    on_call();
    const char *bytes = pParams->cubin;
    if (pParams->size != CUpti_GetSassToSourceCorrelationParamsSize || bytes == NULL ||
        pParams->functionName == NULL || pParams->cubinSize <= 6 ||
        memchr(bytes, '\0', pParams->cubinSize) == NULL || strncmp(bytes, "cubin:", 6) != 0) {
        atomic_fetch_add(&fake.misuse, 1); /* not a cubin this test made */
        return CUPTI_ERROR_INVALID_MODULE;
    }
    return fake_answer(bytes + 6, pParams->functionName, pParams->pcOffset, pParams);
}

/* ---- helpers ---- */

/* Function names as CUPTI hands them: one pointer per function, kept. */
static char fn_lines[] = "k_lines", fn_abs[] = "k_abs", fn_nodir[] = "k_nodir";
static char fn_mixed[] = "k_mixed", fn_zero[] = "k_zero", fn_named0[] = "k_named0";
static char fn_error[] = "k_error", fn_fill[] = "k_fill", fn_probe[] = "k_probe";
static char fn_files[] = "k_files", fn_long[] = "k_long";

static unsigned char early[CUBIN_BYTES]; /* loaded before the install */
static uint64_t crc_alpha;               /* the test_kept_cubin cubin */
static size_t kept_bytes;                /* what the cases expect kept */
static const char *alpha_file;           /* "/src/alpha/k.cu" as handed out */

/* Looks function+offset of the cubin crc up, on the drain; fails unless the
 * answer is want_file:want_line (NULL: none, line 0) after want_asks calls
 * of the fake correlation. Returns the file pointer. */
static const char *expect(uint64_t crc, const char *function, uint64_t offset,
                          const char *want_file, uint32_t want_line, int want_asks)
{
    int before = atomic_load(&fake.correlations);
    const char *file = "(not set)";
    uint32_t line = 12345;
    cuda_pc_lines_find(crc, function, function, offset, &file, &line, NULL);
    int asks = atomic_load(&fake.correlations) - before;
    int right = want_file == NULL
                    ? file == NULL && line == 0
                    : file != NULL && strcmp(file, want_file) == 0 && line == want_line;
    if (!right || asks != want_asks)
        fail_msg("%s+0x%llx: %s:%u after %d CUPTI calls; want %s:%u after %d", function,
                 (unsigned long long)offset, file != NULL ? file : "(null)", line, asks,
                 want_file != NULL ? want_file : "(null)", want_line, want_asks);
    return file;
}

/* 1 when a lookup of function+offset asks CUPTI and gets a line. */
static int expect_quietly(uint64_t crc, const char *function, uint64_t offset)
{
    int before = atomic_load(&fake.correlations);
    const char *file = NULL;
    uint32_t line = 0;
    cuda_pc_lines_find(crc, function, function, offset, &file, &line, NULL);
    return atomic_load(&fake.correlations) == before + 1 && file != NULL && line > 0;
}

/* 1 when one of flare's queued log lines contains text (the queue is taken). */
static int log_says(const char *text)
{
    static core_log_line lines[32];
    int found = 0, count;
    while ((count = core_log_take(lines, 32)) > 0)
        for (int i = 0; i < count; i++)
            found |= strstr(lines[i].text, text) != NULL;
    return found;
}

/* The pc_source_lines row, with its counts when it has them. */
typedef struct lines_row {
    char status[16];
    char reason[1024];
    int counted; /* the counts below were read from the reason */
    unsigned long long with_line, instructions, without, no_module, codes_refused, refused,
        cache_full;
    size_t kept;
} lines_row;

static store *database;
static char database_dir[256];

static int take_row(const store_capability_row *row, void *user)
{
    lines_row *out = user;
    if (strcmp(row->feature, "pc_source_lines") == 0) {
        snprintf(out->status, sizeof(out->status), "%s", row->status);
        snprintf(out->reason, sizeof(out->reason), "%s", row->reason);
    }
    return 0;
}

/* The row after a report; fails without one, or without counts if counts. */
static lines_row capability_now(int counts)
{
    lines_row row = {0};
    cuda_pc_lines_report();
    core_capabilities_write(database, 1, 1);
    assert_int_equal(store_read_capabilities(database, take_row, &row), FLARE_OK);
    row.counted =
        sscanf(row.reason,
               "%llu of %llu sampled instructions on a source line; %llu functions without line "
               "information (nvcc -lineinfo adds it; their SASS text is disassembled at the "
               "session's end), %llu in no kept cubin, %llu whose code was not kept (no memory); "
               "%zu cubins kept (%*f MiB), %llu not kept (FLARE_PC_CUBIN_MIB); %llu instructions "
               "not looked up",
               &row.with_line, &row.instructions, &row.without, &row.no_module, &row.codes_refused,
               &row.kept, &row.refused, &row.cache_full) == 8;
    if (row.status[0] == '\0' || (counts && !row.counted))
        fail_msg("pc_source_lines: \"%s\" (want counts: %d)", row.reason, counts);
    return row;
}

static void assert_fake_clean(void)
{
    assert_int_equal(atomic_load(&fake.off_drain), 0);
    assert_int_equal(atomic_load(&fake.misuse), 0);
}

static int setup(void **state)
{
    (void)state;
    drain_thread = pthread_self();
    unsetenv("FLARE_DEBUG");
    core_log_configure_from_environment();
    test_make_temp_dir(database_dir, sizeof(database_dir), "pc-lines");
    char error[256];
    return store_open(database_dir, STORE_OPEN_WRITE, &database, error, sizeof(error));
}

static int teardown(void **state)
{
    (void)state;
    store_close(database);
    test_remove_dir(database_dir);
    return 0;
}

/* ---- before and at the install (every program) ---- */

static void test_nothing_before_install(void **state)
{
    (void)state;
    make_cubin(early, sizeof(early), "early");
    cuda_pc_lines_module_loaded(early, sizeof(early));
    expect(fake_hash(early, sizeof(early)), fn_abs, 0, NULL, 0, 0);
    assert_int_equal(atomic_load(&fake.crcs), 0);
}

static void test_install_without_the_functions(void **state)
{
    (void)state;
    cuda_cupti_api libc = {.library = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD)};
    assert_non_null(libc.library);
    snprintf(libc.path, sizeof(libc.path), "libc.so.6 (no CUPTI in it)");
    char reason[512] = "";
    assert_int_equal(cuda_pc_lines_install(&libc, reason, sizeof(reason)), FLARE_ERR_BACKEND);
    dlclose(libc.library);
    assert_non_null(strstr(reason, "cuptiGetCubinCrc"));
    assert_non_null(strstr(reason, "libc.so.6 (no CUPTI in it)"));
    /* Still not installed. */
    cuda_pc_lines_module_loaded(early, sizeof(early));
    expect(fake_hash(early, sizeof(early)), fn_abs, 0, NULL, 0, 0);
    assert_int_equal(atomic_load(&fake.crcs), 0);
}

static void test_install(void **state)
{
    (void)state;
    static cuda_cupti_api cupti;
    cupti.library = dlopen(NULL, RTLD_NOW);
    snprintf(cupti.path, sizeof(cupti.path), "(the test program's fake CUPTI)");
    setenv("FLARE_PC_CUBIN_MIB", FLARE_TEST_PC_CUBIN_MIB, 1);
    log_says("");
    char reason[512] = "";
    if (cuda_pc_lines_install(&cupti, reason, sizeof(reason)) != FLARE_OK)
        fail_msg("install: %s (ENABLE_EXPORTS off?)", reason);
    /* The cases count CUPTI's calls: no time budget but in test_time_budget. */
    cuda_pc_lines_set_budget(0);
    int bad = strcmp(FLARE_TEST_PC_CUBIN_MIB, "lots") == 0;
    /* A bad value is said, and the default kept; a good one is not said. */
    assert_int_equal(log_says("FLARE_PC_CUBIN_MIB=lots is not a number"), bad);
    char want[64];
    snprintf(want, sizeof(want), "up to %u MiB",
             bad ? CUDA_PC_CUBIN_MIB_DEFAULT : (unsigned)atoi(FLARE_TEST_PC_CUBIN_MIB));
    lines_row row = capability_now(0);
    assert_string_equal(row.status, CORE_CAPABILITY_ACTIVE);
    if (strstr(row.reason, want) == NULL)
        fail_msg("pc_source_lines: \"%s\", want \"%s\"", row.reason, want);
}

/* ---- FLARE_PC_CUBIN_MIB=1 (test_cuda_pc_lines) ---- */

static void test_kept_cubin_lines(void **state)
{
    (void)state;
    unsigned char alpha[CUBIN_BYTES];
    make_cubin(alpha, sizeof(alpha), "alpha");
    crc_alpha = fake_hash(alpha, sizeof(alpha));
    /* No cubin, or none of it: ignored, neither kept nor refused (and a
     * function's first lookup brings the counts up to date). */
    cuda_pc_lines_module_loaded(NULL, sizeof(alpha));
    cuda_pc_lines_module_loaded(alpha, 0);
    expect(crc_alpha, fn_probe, 0, NULL, 0, 0);
    lines_row before = capability_now(1);
    assert_int_equal(before.kept + before.refused, 0);
    assert_int_equal(atomic_load(&fake.crcs), 0);

    cuda_pc_lines_module_loaded(alpha, sizeof(alpha));
    kept_bytes += sizeof(alpha);
    /* A load only copies: no CUPTI call until the drain needs the CRC. */
    assert_int_equal(atomic_load(&fake.crcs), 0);
    memset(alpha, 0, sizeof(alpha)); /* the program's copy goes away */

    alpha_file = expect(crc_alpha, fn_lines, 0x20, "/src/alpha/k.cu", 102, 1);
    assert_true(atomic_load(&fake.crcs) >= 1);
    /* Cached, and one pointer per path. */
    assert_ptr_equal(expect(crc_alpha, fn_lines, 0x20, "/src/alpha/k.cu", 102, 0), alpha_file);
    assert_ptr_equal(expect(crc_alpha, fn_lines, 0x30, "/src/alpha/k.cu", 103, 1), alpha_file);
    /* An absolute file name is kept as it is; no dir, or "", gives the file. */
    expect(crc_alpha, fn_abs, 0, "/abs/alpha.cu", 7, 1);
    const char *bare = expect(crc_alpha, fn_nodir, 0, "alpha.cu", 5, 1);
    assert_ptr_equal(expect(crc_alpha, fn_nodir, 0x10, "alpha.cu", 6, 1), bare);
    /* A function with lines keeps asking; an instruction without is cached. */
    expect(crc_alpha, fn_mixed, 0, "/src/alpha/m.cu", 1, 1);
    expect(crc_alpha, fn_mixed, 0x10, NULL, 0, 1);
    expect(crc_alpha, fn_mixed, 0x10, NULL, 0, 0);

    lines_row after = capability_now(1);
    assert_int_equal(after.instructions - before.instructions, 7);
    assert_int_equal(after.with_line - before.with_line, 6);
    assert_int_equal(after.without, before.without);
    assert_fake_clean();
}

static void test_function_without_lines(void **state)
{
    (void)state;
    lines_row before = capability_now(1);
    /* Success with line 0 (names or none), and an error: asked once each. */
    char *functions[] = {fn_zero, fn_named0, fn_error};
    for (size_t f = 0; f < sizeof(functions) / sizeof(functions[0]); f++) {
        expect(crc_alpha, functions[f], 0x40, NULL, 0, 1);
        expect(crc_alpha, functions[f], 0x50, NULL, 0, 0);
        expect(crc_alpha, functions[f], 0x40, NULL, 0, 0);
        expect(crc_alpha, functions[f], 0, NULL, 0, 0);
    }
    /* A cubin without line information: the same, per (cubin, function). */
    unsigned char nolines[CUBIN_BYTES];
    make_cubin(nolines, sizeof(nolines), "nolines");
    cuda_pc_lines_module_loaded(nolines, sizeof(nolines));
    kept_bytes += sizeof(nolines);
    uint64_t crc = fake_hash(nolines, sizeof(nolines));
    expect(crc, fn_lines, 0x10, NULL, 0, 1);
    expect(crc, fn_lines, 0x20, NULL, 0, 0);
    expect(crc_alpha, fn_lines, 0x40, "/src/alpha/k.cu", 104, 1);
    /* Without lines, the function's code for its SASS text: the kept copy of
     * its cubin and CUPTI's name; with lines, none. */
    const char *file = NULL;
    uint32_t line = 0;
    const store_pc_code *code = NULL;
    cuda_pc_lines_find(crc, fn_lines, fn_lines, 0x20, &file, &line, &code);
    assert_non_null(code);
    assert_true(code->cubin_crc == crc && code->cubin_size == sizeof(nolines));
    assert_string_equal(code->symbol, fn_lines);
    assert_ptr_not_equal(code->symbol, fn_lines); /* a copy: CUPTI frees its name */
    assert_memory_equal(code->cubin, nolines, sizeof(nolines));
    const store_pc_code *again = NULL;
    cuda_pc_lines_find(crc, fn_lines, fn_lines, 0x30, &file, &line, &again);
    assert_ptr_equal(again, code); /* one per function */
    cuda_pc_lines_find(crc_alpha, fn_lines, fn_lines, 0x40, &file, &line, &code);
    assert_null(code);
    assert_non_null(file);

    lines_row after = capability_now(1);
    assert_int_equal(after.without - before.without, 4);
    assert_int_equal(after.instructions - before.instructions, 5);
    assert_int_equal(after.with_line - before.with_line, 1);
    assert_int_equal(after.codes_refused - before.codes_refused, 0);
    assert_fake_clean();
}

static void test_crc_of_no_kept_cubin(void **state)
{
    (void)state;
    lines_row before = capability_now(1);
    uint64_t crc_early = fake_hash(early, sizeof(early)); /* loaded before install */
    uint64_t crc_none = 0xdeadbeefull;
    for (int pass = 0; pass < 2; pass++) {
        expect(crc_early, fn_lines, 0x10 * (uint64_t)pass, NULL, 0, 0);
        expect(crc_none, fn_lines, 0x10 * (uint64_t)pass, NULL, 0, 0);
    }
    /* Loaded now: kept, but the function already found in none is not
     * asked again; another of its functions is. */
    cuda_pc_lines_module_loaded(early, sizeof(early));
    kept_bytes += sizeof(early);
    expect(crc_early, fn_lines, 0x20, NULL, 0, 0);
    expect(crc_early, fn_abs, 0, "/abs/early.cu", 7, 1);

    lines_row after = capability_now(1);
    assert_int_equal(after.no_module - before.no_module, 2);
    assert_int_equal(after.instructions - before.instructions, 1);
    assert_string_equal(after.status, CORE_CAPABILITY_DEGRADED);
    assert_fake_clean();
}

/* Module loads on LOADERS threads while the drain looks their cubins up. */
static unsigned char loader_cubins[LOADERS][LOADER_CUBINS][CUBIN_BYTES];
static uint64_t loader_crcs[LOADERS][LOADER_CUBINS];
static _Atomic int loaded[LOADERS]; /* cubins whose load has returned */
static _Atomic int go;

static void *loader_main(void *argument)
{
    int t = (int)(intptr_t)argument;
    for (int i = 0; i < 60000 && !atomic_load(&go); i++)
        test_pause_ms(1);
    for (int i = 0; i < LOADER_CUBINS; i++) {
        cuda_pc_lines_module_loaded(loader_cubins[t][i], CUBIN_BYTES);
        atomic_store(&loaded[t], i + 1);
    }
    return NULL;
}

static void test_concurrent_loads_beside_the_drain(void **state)
{
    (void)state;
    lines_row before = capability_now(1);
    for (int t = 0; t < LOADERS; t++)
        for (int i = 0; i < LOADER_CUBINS; i++) {
            char tag[32];
            snprintf(tag, sizeof(tag), "t%d-%d", t, i);
            make_cubin(loader_cubins[t][i], CUBIN_BYTES, tag);
            loader_crcs[t][i] = fake_hash(loader_cubins[t][i], CUBIN_BYTES);
        }
    pthread_t threads[LOADERS];
    for (int t = 0; t < LOADERS; t++)
        assert_int_equal(pthread_create(&threads[t], NULL, loader_main, (void *)(intptr_t)t), 0);
    atomic_store(&go, 1);
    /* A cubin whose load returned is found; one still loading is found or
     * not (a different function, so as not to mark k_lines), never wrong. */
    int asked[LOADERS] = {0}, done = 0, found_loading = 0;
    uint64_t deadline = test_now_ns() + TEST_WAIT_SECONDS * 1000000000ull;
    while (done < LOADERS * LOADER_CUBINS) {
        if (test_now_ns() >= deadline)
            fail_msg("loaders still running after %d s", TEST_WAIT_SECONDS);
        for (int t = 0; t < LOADERS; t++) {
            int now = atomic_load(&loaded[t]);
            for (; asked[t] < now; asked[t]++, done++) {
                char want[64];
                snprintf(want, sizeof(want), "/src/t%d-%d/k.cu", t, asked[t]);
                expect(loader_crcs[t][asked[t]], fn_lines, 0x10, want, 101, 1);
            }
            if (now < LOADER_CUBINS) {
                const char *file;
                uint32_t line;
                cuda_pc_lines_find(loader_crcs[t][now], fn_abs, fn_abs, 0, &file, &line, NULL);
                char want[64];
                snprintf(want, sizeof(want), "/abs/t%d-%d.cu", t, now);
                if (file != NULL ? strcmp(file, want) != 0 || line != 7 : line != 0)
                    fail_msg("%s: %s:%u while loading", want, file ? file : "(null)", line);
                found_loading += file != NULL;
            }
        }
    }
    for (int t = 0; t < LOADERS; t++)
        assert_int_equal(pthread_join(threads[t], NULL), 0);
    kept_bytes += (size_t)LOADERS * LOADER_CUBINS * CUBIN_BYTES;
    lines_row after = capability_now(1);
    assert_int_equal(after.kept - before.kept, LOADERS * LOADER_CUBINS);
    assert_int_equal(after.refused, before.refused);
    print_message("%d of the cubins still loading were found\n", found_loading);
    assert_fake_clean();
}

/* The kept and refused counts are the report's own, lookups or not (they
 * were taken at a function's first lookup only: a refusal after the last
 * new function went unsaid). */
static void test_budget(void **state)
{
    (void)state;
    lines_row before = capability_now(1);
    /* Over the budget on its own: not kept, counted, never asked. */
    size_t big_size = MIB + 1;
    unsigned char *big = malloc(big_size);
    assert_non_null(big);
    make_cubin(big, big_size, "big");
    cuda_pc_lines_module_loaded(big, big_size);
    int crcs = atomic_load(&fake.crcs);
    expect(fake_hash(big, big_size), fn_lines, 0, NULL, 0, 0);
    free(big);
    /* What is left fits exactly; then nothing does. */
    assert_true(kept_bytes < MIB);
    size_t rest = MIB - kept_bytes;
    unsigned char *exact = malloc(rest);
    assert_non_null(exact);
    make_cubin(exact, rest, "exact");
    cuda_pc_lines_module_loaded(exact, rest);
    expect(fake_hash(exact, rest), fn_abs, 0, "/abs/exact.cu", 7, 1);
    assert_int_equal(atomic_load(&fake.crcs) - crcs, 1); /* the exact one's only */
    free(exact);
    unsigned char late[CUBIN_BYTES];
    make_cubin(late, sizeof(late), "late");
    cuda_pc_lines_module_loaded(late, sizeof(late));
    expect(fake_hash(late, sizeof(late)), fn_abs, 0, NULL, 0, 0);

    lines_row after = capability_now(1);
    assert_int_equal(after.refused - before.refused, 2);
    assert_int_equal(after.kept - before.kept, 1);
    assert_string_equal(after.status, CORE_CAPABILITY_DEGRADED);
    assert_non_null(strstr(after.reason, "MiB), 2 not kept (FLARE_PC_CUBIN_MIB)"));
    /* One more refused, nothing looked up after it: said all the same. */
    cuda_pc_lines_module_loaded(late, sizeof(late));
    assert_int_equal(capability_now(1).refused - before.refused, 3);
    assert_fake_clean();
}

/* A line whose path is too long to keep is refused whole, never cut to
 * another file's name, counted, and its function still has lines. */
static void test_path_too_long(void **state)
{
    (void)state;
    expect(crc_alpha, fn_long, 0, NULL, 0, 1);
    expect(crc_alpha, fn_long, 0, NULL, 0, 0);
    assert_ptr_equal(expect(crc_alpha, fn_long, 0x10, "/src/alpha/k.cu", 201, 1), alpha_file);
    lines_row after = capability_now(1);
    assert_string_equal(after.status, CORE_CAPABILITY_DEGRADED);
    assert_non_null(strstr(after.reason, "1 whose file's path was not kept"));
    assert_fake_clean();
}

/* Lookups are bounded in time: past the budget, a new instruction gets no
 * line now, is not cached, and is asked again once the window has passed. */
static void test_time_budget(void **state)
{
    (void)state;
    cuda_pc_lines_set_budget(1); /* 1 ns: one lookup spends it */
    uint64_t offset = 0x4000;
    int put_off = 0;
    for (int i = 0; i < 1000 && !put_off; i++, offset += 16) {
        int before = atomic_load(&fake.correlations);
        const char *file = "(not set)";
        uint32_t line = 1;
        cuda_pc_lines_find(crc_alpha, fn_lines, fn_lines, offset, &file, &line, NULL);
        put_off = atomic_load(&fake.correlations) == before;
        if (put_off) {
            assert_null(file);
            assert_int_equal(line, 0);
        }
    }
    assert_true(put_off);
    lines_row row = capability_now(1);
    assert_non_null(strstr(row.reason, "put off to a later read"));
    /* Not cached: asked, and answered, once the window has passed. */
    TEST_WAIT_UNTIL(expect_quietly(crc_alpha, fn_lines, offset - 16));
    cuda_pc_lines_set_budget(0);
    assert_fake_clean();
}

/* The source files' names are bounded too (4096 in cuda_pc_lines.c): past
 * that an instruction on a new file gets none, never a wrong line, the
 * refusals are counted, and the names kept still serve. */
static void test_file_names_bound(void **state)
{
    (void)state;
    lines_row before = capability_now(1);
    uint32_t kept = 0;
    for (;; kept++) {
        if (kept == 100000)
            fail_msg("%u source files kept: the names are not bounded", kept);
        const char *file;
        uint32_t line;
        cuda_pc_lines_find(crc_alpha, fn_files, fn_files, 16ull * kept, &file, &line, NULL);
        if (file == NULL) {
            assert_int_equal(line, 0);
            break;
        }
        char want[64];
        snprintf(want, sizeof(want), "/src/alpha/f%u.cu", kept);
        if (strcmp(file, want) != 0 || line != 1 + kept)
            fail_msg("k_files+0x%x: %s:%u", 16 * kept, file, line);
    }
    assert_true(kept > 1000);
    expect(crc_alpha, fn_files, 16ull * kept + 16, NULL, 0, 1);
    expect(crc_alpha, fn_files, 16, "/src/alpha/f1.cu", 2, 0);
    assert_ptr_equal(expect(crc_alpha, fn_lines, 0x50, "/src/alpha/k.cu", 105, 1), alpha_file);

    lines_row after = capability_now(1);
    assert_int_equal(after.instructions - before.instructions, kept + 3);
    assert_int_equal(after.with_line - before.with_line, kept + 1);
    assert_non_null(strstr(after.reason, "3 whose file's path was not kept"));
    assert_fake_clean();
}

/* Last: it fills the cache. Cheap (about 200,000 fake calls), so not skipped. */
static void test_cache_bound(void **state)
{
    (void)state;
    lines_row before = capability_now(1);
    uint32_t filled = 0;
    for (;; filled++) {
        if (filled == CUDA_PC_LINES_CACHE_MAX)
            fail_msg("%u lookups cached: the cache is not bounded", filled);
        int asks = atomic_load(&fake.correlations);
        const char *file;
        uint32_t line;
        cuda_pc_lines_find(crc_alpha, fn_fill, fn_fill, 16ull * filled, &file, &line, NULL);
        if (atomic_load(&fake.correlations) == asks)
            break; /* full: not asked */
        if (file != alpha_file || line != 100 + filled)
            fail_msg("k_fill+0x%x: %s:%u", 16 * filled, file ? file : "(null)", line);
    }
    /* Three quarters of the table, less what earlier cases took. */
    assert_true(filled <= CUDA_PC_LINES_CACHE_MAX / 4 * 3);
    assert_true(filled >= CUDA_PC_LINES_CACHE_MAX / 2);
    /* Past the bound: cached answers still right; anything new is none. */
    expect(crc_alpha, fn_fill, 16ull * filled, NULL, 0, 0);
    expect(crc_alpha, fn_fill, 16ull * filled + 16, NULL, 0, 0);
    expect(crc_alpha, fn_abs, 0x10, NULL, 0, 0);
    assert_ptr_equal(expect(crc_alpha, fn_lines, 0x20, "/src/alpha/k.cu", 102, 0), alpha_file);
    expect(crc_alpha, fn_fill, 0, "/src/alpha/k.cu", 100, 0);
    expect(crc_alpha, fn_mixed, 0x10, NULL, 0, 0);
    /* A function known to have no lines would not be asked: not counted. */
    expect(crc_alpha, fn_zero, 0x990, NULL, 0, 0);

    lines_row after = capability_now(1);
    assert_int_equal(after.cache_full - before.cache_full, 4);
    assert_int_equal(after.instructions - before.instructions, filled);
    assert_string_equal(after.status, CORE_CAPABILITY_DEGRADED);
    assert_non_null(strstr(after.reason, "4 instructions not looked up (line cache full)"));
    assert_fake_clean();
}

/* ---- FLARE_PC_CUBIN_MIB=0 and =lots (the other two programs) ---- */

/* FLARE_PC_CUBIN_MIB=0 keeps no cubin; "lots" keeps the default (256 MiB),
 * so 2 MiB fits: more than a misread 0 or 1 would keep. */
static void test_other_budget(void **state)
{
    (void)state;
    int none = strcmp(FLARE_TEST_PC_CUBIN_MIB, "0") == 0;
    size_t size = 2 * MIB;
    unsigned char *bytes = malloc(size);
    assert_non_null(bytes);
    make_cubin(bytes, size, "two");
    cuda_pc_lines_module_loaded(bytes, size);
    expect(fake_hash(bytes, size), fn_lines, 0x30, none ? NULL : "/src/two/k.cu", none ? 0 : 103,
           !none);
    free(bytes);
    assert_int_equal(atomic_load(&fake.crcs), !none);
    lines_row row = capability_now(1);
    assert_int_equal(row.kept, !none);
    assert_int_equal(row.refused, none);
    assert_string_equal(row.status, none ? CORE_CAPABILITY_DEGRADED : CORE_CAPABILITY_ACTIVE);
    assert_fake_clean();
}

/* Every program begins with these, in this order. */
#define INSTALL_CASES                                                                              \
    cmocka_unit_test(test_nothing_before_install),                                                 \
        cmocka_unit_test(test_install_without_the_functions), cmocka_unit_test(test_install)

int main(void)
{
    const struct CMUnitTest one_mib[] = {
        INSTALL_CASES,
        cmocka_unit_test(test_kept_cubin_lines),
        cmocka_unit_test(test_function_without_lines),
        cmocka_unit_test(test_crc_of_no_kept_cubin),
        cmocka_unit_test(test_concurrent_loads_beside_the_drain),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_path_too_long),
        cmocka_unit_test(test_time_budget),
        cmocka_unit_test(test_file_names_bound),
        cmocka_unit_test(test_cache_bound),
    };
    const struct CMUnitTest other_budget[] = {INSTALL_CASES, cmocka_unit_test(test_other_budget)};
    if (strcmp(FLARE_TEST_PC_CUBIN_MIB, "1") != 0)
        return cmocka_run_group_tests(other_budget, setup, teardown);
    return cmocka_run_group_tests(one_mib, setup, teardown);
}
