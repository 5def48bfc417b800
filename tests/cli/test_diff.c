/*
 * test_diff.c: `flare diff` from the statistics up.
 *
 * The statistics (src/cli/diff_stats.c, compiled in): the Mann-Whitney U
 * test against answers computed independently (exact p by enumerating
 * every arrangement, and the normal approximation from mid-ranks, both in
 * python3 by hand: tests/cli/test_diff.c's comments give the values), the
 * radix sort against qsort, summaries, and every branch of the verdict
 * rule. The comparison (diff_collect.c) on two sessions crafted through
 * the store's writer: one kernel 30% slower over 2,000 launches, one
 * unchanged under noise, one only in each session, a slower scope; read
 * whole and one name at a time, with the same rows. The command, run as a
 * user would: verdicts in text, JSON parsed back by python3, the
 * --fail-if-slower exit codes, different hosts and devices said, control
 * characters in names made harmless, and the bad inputs: a session with
 * itself, a directory that is not a session, a newer schema, a truncated
 * database, an unfinished session, usage errors. Every session is checked
 * to be byte for byte what it was before diff read it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <dirent.h>
#include <math.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/diff_collect.h"
#include "cli/diff_stats.h"
#include "flare/flare.h"
#include "store/store.h"
#include "cli_run.h"
#include "test_util.h"

static char bin_dir[1024];
static char scratch[256];
static char base_dir[512];       /* crafted BASE */
static char new_dir[512];        /* crafted NEW */
static char unfinished_dir[512]; /* crafted, never ended */
static char out_text[262144];
static char err_text[65536];

/* ---- the statistics ---- */

static void test_exact_known_answers(void **state)
{
    (void)state;
    /* python3: every C(6,3) arrangement counted; U of NEW 9, p = 2/20. */
    const uint64_t base1[] = {1, 2, 3}, new1[] = {4, 5, 6};
    diff_test test;
    assert_int_equal(diff_mann_whitney(base1, 3, new1, 3, &test), 0);
    assert_true(test.exact);
    assert_true(test.u_new == 9.0);
    assert_true(fabs(test.p_value - 0.1) < 1e-12);
    assert_true(test.prob_new_longer == 1.0);
    /* Mirror: NEW all shorter, same p. */
    assert_int_equal(diff_mann_whitney(new1, 3, base1, 3, &test), 0);
    assert_true(test.u_new == 0.0);
    assert_true(fabs(test.p_value - 0.1) < 1e-12);

    /* python3 enumeration of C(11,6): U 20, p = 198/462. */
    const uint64_t base2[] = {10, 20, 30, 40, 50}, new2[] = {15, 25, 35, 45, 55, 65};
    assert_int_equal(diff_mann_whitney(base2, 5, new2, 6, &test), 0);
    assert_true(test.exact && test.u_new == 20.0);
    assert_true(fabs(test.p_value - 0.42857142857142855) < 1e-12);

    /* C(15,8): U 23, p 0.6125874125874126. */
    const uint64_t base3[] = {10, 20, 30, 40, 50, 60, 70};
    const uint64_t new3[] = {5, 15, 25, 26, 27, 28, 80, 90};
    assert_int_equal(diff_mann_whitney(base3, 7, new3, 8, &test), 0);
    assert_true(test.exact && test.u_new == 23.0);
    assert_true(fabs(test.p_value - 0.6125874125874126) < 1e-12);

    /* One launch each: nothing can be shown. */
    const uint64_t one[] = {5}, two[] = {9};
    assert_int_equal(diff_mann_whitney(one, 1, two, 1, &test), 0);
    assert_true(test.p_value == 1.0);
    /* An empty side: p 1, no test. */
    assert_int_equal(diff_mann_whitney(one, 1, two, 0, &test), 0);
    assert_true(test.p_value == 1.0 && !test.exact);
}

static void test_normal_approximation_known_answers(void **state)
{
    (void)state;
    /* Ties, so the normal approximation: python3 from mid-ranks, tie and
     * continuity corrections: U 61, z 2.402083018393564, p 0.01630200829707018. */
    const uint64_t base[] = {1, 2, 2, 3, 3, 3, 4, 5}, new_values[] = {3, 3, 4, 4, 5, 5, 6, 6, 7};
    diff_test test;
    assert_int_equal(diff_mann_whitney(base, 8, new_values, 9, &test), 0);
    assert_false(test.exact);
    assert_true(test.u_new == 61.0);
    assert_true(fabs(test.z - 2.402083018393564) < 1e-12);
    assert_true(fabs(test.p_value - 0.01630200829707018) < 1e-12);

    /* 1,000 against 1,000 from the LCG x = 1664525 x + 1013904223 (mod
     * 2^32), value base + (x >> 20) % spread, seeds 1 and 2, NEW 30 ns
     * longer. python3: U 550133.5, z 3.8823200224504464, p 0.00010346458919440027. */
    uint64_t *a = malloc(1200 * sizeof *a), *b = malloc(1200 * sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    uint32_t x = 1, y = 2;
    for (int i = 0; i < 1000; i++) {
        x = x * 1664525u + 1013904223u;
        y = y * 1664525u + 1013904223u;
        a[i] = 10000 + (x >> 20) % 1000;
        b[i] = 10030 + (y >> 20) % 1000;
    }
    assert_int_equal(diff_sort_durations(a, 1000), 0);
    assert_int_equal(diff_sort_durations(b, 1000), 0);
    assert_int_equal(diff_mann_whitney(a, 1000, b, 1000, &test), 0);
    assert_true(test.u_new == 550133.5);
    assert_true(fabs(test.z - 3.8823200224504464) < 1e-9);
    assert_true(fabs(test.p_value - 0.00010346458919440027) / 0.00010346458919440027 < 1e-7);

    /* Heavy ties (50 distinct values), 1,200 against 900, seeds 3 and 4:
     * U 537353, z -0.19249975114166862, p 0.8473507628255067. */
    x = 3, y = 4;
    for (int i = 0; i < 1200; i++) {
        x = x * 1664525u + 1013904223u;
        a[i] = 10000 + (x >> 20) % 50;
    }
    for (int i = 0; i < 900; i++) {
        y = y * 1664525u + 1013904223u;
        b[i] = 10000 + (y >> 20) % 50;
    }
    assert_int_equal(diff_sort_durations(a, 1200), 0);
    assert_int_equal(diff_sort_durations(b, 900), 0);
    assert_int_equal(diff_mann_whitney(a, 1200, b, 900, &test), 0);
    assert_true(test.u_new == 537353.0);
    assert_true(fabs(test.z - -0.19249975114166862) < 1e-9);
    assert_true(fabs(test.p_value - 0.8473507628255067) < 1e-9);

    /* Everything equal: no spread, p 1. */
    for (int i = 0; i < 100; i++)
        a[i] = b[i] = 777;
    assert_int_equal(diff_mann_whitney(a, 100, b, 100, &test), 0);
    assert_true(test.p_value == 1.0 && test.prob_new_longer == 0.5);
    free(a);
    free(b);
}

static int compare_u64(const void *left, const void *right)
{
    uint64_t a = *(const uint64_t *)left, b = *(const uint64_t *)right;
    return (a > b) - (a < b);
}

static void test_sort_matches_qsort(void **state)
{
    (void)state;
    const size_t counts[] = {0, 1, 2, 63, 64, 65, 1000, 100003};
    uint64_t seed = 88172645463325252ull;
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        size_t count = counts[c];
        uint64_t *values = malloc((count + 1) * sizeof *values);
        uint64_t *expected = malloc((count + 1) * sizeof *expected);
        assert_non_null(values);
        assert_non_null(expected);
        for (size_t i = 0; i < count; i++) {
            seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
            /* Mixed widths: small durations, huge values, duplicates. */
            values[i] = i % 3 == 0 ? seed : i % 3 == 1 ? seed % 5000 : UINT64_MAX - seed % 3;
            expected[i] = values[i];
        }
        qsort(expected, count, sizeof *expected, compare_u64);
        assert_int_equal(diff_sort_durations(values, count), 0);
        if (count > 0)
            assert_memory_equal(values, expected, count * sizeof *values);
        free(values);
        free(expected);
    }
}

static void test_summaries(void **state)
{
    (void)state;
    const uint64_t sorted[] = {10, 20, 30, 40};
    diff_side side;
    diff_side_summarize(sorted, 4, &side);
    assert_int_equal(side.count, 4);
    assert_int_equal(side.total_ns, 100);
    assert_true(side.mean_ns == 25.0);
    assert_int_equal(side.median_ns, 20); /* nearest rank: the 2nd of 4 */
    assert_true(fabs(side.variance - 500.0 / 3.0) < 1e-9);
    diff_side_summarize(sorted, 0, &side);
    assert_int_equal(side.count, 0);
    assert_true(side.mean_ns == 0 && side.variance == 0);
    const uint64_t huge[] = {UINT64_MAX - 1, UINT64_MAX};
    diff_side_summarize(huge, 2, &side);
    assert_true(side.total_ns == UINT64_MAX); /* saturates */
    assert_true(diff_change_pct(0, 0) == 0);
    assert_true(isinf(diff_change_pct(0, 5)));
    assert_true(fabs(diff_change_pct(200, 260) - 30.0) < 1e-12);
}

static void test_verdict_rule(void **state)
{
    (void)state;
    diff_rule rule = {.alpha = 0.01, .min_change_pct = 2.0};
    diff_side base = {.count = 1000, .mean_ns = 1000};
    diff_side slower = {.count = 1000, .mean_ns = 1300};
    diff_side barely = {.count = 1000, .mean_ns = 1010}; /* +1%: under the minimum */
    diff_side faster = {.count = 1000, .mean_ns = 700};
    diff_side none = {.count = 0};
    diff_test significant_longer = {.p_value = 1e-9, .prob_new_longer = 0.8};
    diff_test significant_shorter = {.p_value = 1e-9, .prob_new_longer = 0.2};
    diff_test noise = {.p_value = 0.2, .prob_new_longer = 0.55};

    assert_int_equal(diff_verdict_of(&base, &slower, &significant_longer, &rule), DIFF_SLOWER);
    assert_int_equal(diff_verdict_of(&base, &faster, &significant_shorter, &rule), DIFF_FASTER);
    assert_int_equal(diff_verdict_of(&base, &slower, &noise, &rule), DIFF_SAME);
    assert_int_equal(diff_verdict_of(&base, &barely, &significant_longer, &rule), DIFF_SAME);
    /* The mean up, the bulk of the launches down: outliers. */
    assert_int_equal(diff_verdict_of(&base, &slower, &significant_shorter, &rule), DIFF_MIXED);
    assert_int_equal(diff_verdict_of(&base, &faster, &significant_longer, &rule), DIFF_MIXED);
    assert_int_equal(diff_verdict_of(&base, &none, NULL, &rule), DIFF_ONLY_BASE);
    assert_int_equal(diff_verdict_of(&none, &base, NULL, &rule), DIFF_ONLY_NEW);
    /* A stricter alpha turns the same evidence into "same". */
    diff_rule strict = {.alpha = 1e-10, .min_change_pct = 2.0};
    assert_int_equal(diff_verdict_of(&base, &slower, &significant_longer, &strict), DIFF_SAME);
    assert_string_equal(diff_verdict_name(DIFF_ONLY_NEW), "only in NEW");
    assert_string_equal(diff_verdict_name(DIFF_VERDICT_COUNT), "?");

    /* The total: z = 300 / sqrt(2 x 2500) = 4.24..., p = erfc(z / sqrt 2). */
    diff_test test;
    assert_int_equal(diff_total_verdict(10000, 2500, 10300, 2500, &rule, &test), DIFF_SLOWER);
    assert_true(fabs(test.z - 300.0 / sqrt(5000.0)) < 1e-12);
    assert_true(fabs(test.p_value - erfc(300.0 / sqrt(5000.0) / sqrt(2.0))) < 1e-15);
    assert_int_equal(diff_total_verdict(10000, 1e8, 10300, 1e8, &rule, &test), DIFF_SAME);
    assert_int_equal(diff_total_verdict(10000, 0, 9000, 0, &rule, &test), DIFF_FASTER);
    assert_true(test.p_value == 0);
    assert_int_equal(diff_total_verdict(0, 0, 0, 0, &rule, &test), DIFF_SAME);
}

/* ---- the crafted sessions ---- */

#define SLOW_LAUNCHES   2000
#define STEADY_LAUNCHES 3000
#define ONLY_LAUNCHES   100
/* An OSC sequence, a bell, a C1 CSI and a byte that is not UTF-8. */
#define ESCAPE_NAME "esc\x1b]0;pwned\x07name\xc2\x9b\xff"

typedef struct crafted {
    const char *host;
    const char *device;
    uint32_t seed;
    int is_new;
    int ended;
} crafted;

/* gemm_slow: 10,000 + 0..999 ns (x 1.3 in NEW); steady and ESCAPE_NAME:
 * 5,000 + 0..499 ns on both sides; only_base 2,000 ns, only_new 3,000 ns;
 * scope "step" 100,000 + 0..9,999 ns (x 1.3 in NEW), one scope left open. */
static void write_crafted(const char *dir, const crafted *how)
{
    assert_int_equal(mkdir(dir, 0755), 0);
    char error[1024];
    store *handle = NULL;
    if (store_open(dir, STORE_OPEN_WRITE, &handle, error, sizeof error) != 0)
        fail_msg("store_open %s: %s", dir, error);
    store_session_info info = {.command = how->is_new ? "app --new" : "app --base",
                               .start_ns = 1000,
                               .start_unix_ns = 1790000000000000000ll,
                               .host = how->host,
                               .flare_version = "0.1.0"};
    assert_int_equal(store_begin(handle), 0);
    assert_int_equal(store_session_begin(handle, &info), 0);
    assert_int_equal(store_process_begin(handle, 77, 1, 1000, "cuda", "/bin/app"), 0);
    assert_int_equal(store_put_device(handle, 77, 0, how->device, "cuda"), 0);
    uint32_t x = how->seed;
    uint64_t clock_ns = 1000000;
    store_kernel_row row = {.pid = 77, .grid = {1, 1, 1}, .block = {32, 1, 1}};
    for (int i = 0; i < SLOW_LAUNCHES + 2 * STEADY_LAUNCHES + ONLY_LAUNCHES; i++) {
        x = x * 1664525u + 1013904223u;
        uint64_t noise = x >> 20; /* 0..4095 */
        uint64_t duration;
        if (i < SLOW_LAUNCHES) {
            row.name = "gemm_slow";
            duration = 10000 + noise % 1000;
            if (how->is_new)
                duration = duration * 13 / 10;
        } else if (i < SLOW_LAUNCHES + STEADY_LAUNCHES) {
            row.name = "steady";
            duration = 5000 + noise % 500;
        } else if (i < SLOW_LAUNCHES + 2 * STEADY_LAUNCHES) {
            row.name = ESCAPE_NAME;
            duration = 5000 + noise % 500;
        } else {
            row.name = how->is_new ? "only_new" : "only_base";
            duration = how->is_new ? 3000 : 2000;
        }
        row.correlation_id = (uint64_t)i;
        row.start_ns = clock_ns;
        row.end_ns = clock_ns + duration;
        clock_ns += duration + 10;
        assert_int_equal(store_put_kernel(handle, &row), 0);
    }
    for (int i = 0; i < 201; i++) {
        x = x * 1664525u + 1013904223u;
        uint64_t duration = 100000 + (x >> 20) % 10000;
        if (how->is_new)
            duration = duration * 13 / 10;
        store_scope_row scope = {.pid = 77,
                                 .thread_id = 77,
                                 .instance_id = (uint64_t)i + 1,
                                 .name = "step",
                                 .start_ns = clock_ns,
                                 .end_ns = clock_ns + duration,
                                 .still_open = i == 200}; /* left out of the comparison */
        clock_ns += duration;
        assert_int_equal(store_put_scope(handle, &scope), 0);
    }
    assert_int_equal(store_commit(handle), 0);
    if (how->ended)
        assert_int_equal(store_session_end(handle, clock_ns, 1, 0), 0);
    store_close(handle);
}

/* ---- sessions must not change ---- */

/* FNV-1a of dir/session.db's bytes, and the names in dir, "|"-joined. */
static uint64_t session_fingerprint(const char *dir, char *listing, size_t listing_size)
{
    char path[700];
    snprintf(path, sizeof path, "%s/session.db", dir);
    uint64_t hash = 1469598103934665603ull;
    FILE *file = fopen(path, "rb");
    if (file != NULL) {
        int byte;
        while ((byte = fgetc(file)) != EOF)
            hash = (hash ^ (uint64_t)byte) * 1099511628211ull;
        fclose(file);
    }
    /* A read-only SQLite connection to a WAL database may leave an empty
     * -wal and a -shm index beside it (flare report does too; SQLite's
     * files, not the session's): listed only if the -wal holds anything. */
    listing[0] = '\0';
    DIR *entries = opendir(dir);
    if (entries != NULL) {
        struct dirent *entry;
        while ((entry = readdir(entries)) != NULL) {
            struct stat info;
            char entry_path[1000];
            snprintf(entry_path, sizeof entry_path, "%s/%s", dir, entry->d_name);
            if (strcmp(entry->d_name, "session.db-shm") == 0 ||
                (strcmp(entry->d_name, "session.db-wal") == 0 && stat(entry_path, &info) == 0 &&
                 info.st_size == 0))
                continue;
            size_t used = strlen(listing);
            snprintf(listing + used, listing_size - used, "%s|", entry->d_name);
        }
        closedir(entries);
    }
    return hash;
}

/* Runs flare with arguments (NULL-terminated) in scratch and checks that
 * neither crafted session changed. Returns the exit status. */
static int run_flare(const char *const *arguments)
{
    char listings[2][2048], after[2][2048];
    const char *dirs[2] = {base_dir, new_dir};
    uint64_t before[2];
    for (int i = 0; i < 2; i++)
        before[i] = session_fingerprint(dirs[i], listings[i], sizeof listings[i]);
    char path[1200];
    snprintf(path, sizeof path, "%s/flare", bin_dir);
    int status = cli_run_program(path, 0, arguments, scratch, out_text, sizeof out_text, err_text,
                                 sizeof err_text);
    assert_true(status >= 0);
    for (int i = 0; i < 2; i++) {
        if (session_fingerprint(dirs[i], after[i], sizeof after[i]) != before[i])
            fail_msg("flare diff changed %s/session.db", dirs[i]);
        if (strcmp(after[i], listings[i]) != 0)
            fail_msg("flare diff left files in %s: %s (before: %s)", dirs[i], after[i],
                     listings[i]);
    }
    return status;
}

#define FLARE(...) run_flare((const char *const[]){__VA_ARGS__, NULL})

static void expect_in(const char *text, const char *needle)
{
    if (strstr(text, needle) == NULL)
        fail_msg("expected '%s' in:\n%s", needle, text);
}

/* The text line of the table whose name column is name. */
static void row_line(const char *name, char *line, size_t size)
{
    char suffix[128];
    snprintf(suffix, sizeof suffix, "  %s\n", name);
    const char *end = strstr(out_text, suffix);
    if (end == NULL)
        fail_msg("no row for %s in:\n%s", name, out_text);
    const char *start = end;
    while (start > out_text && start[-1] != '\n')
        start--;
    snprintf(line, size, "%.*s", (int)(end - start + strlen(suffix)), start);
}

static void expect_row_verdict(const char *name, const char *verdict)
{
    char line[512];
    row_line(name, line, sizeof line);
    char word[64];
    snprintf(word, sizeof word, "  %s ", verdict);
    if (strstr(line, word) == NULL)
        fail_msg("%s: expected verdict '%s' in: %s", name, verdict, line);
}

/* ---- the comparison, in process ---- */

static void collect(store *stores[2], store_diff_table table, uint64_t chunk, diff_table *out)
{
    diff_rule rule = {.alpha = DIFF_DEFAULT_ALPHA, .min_change_pct = DIFF_DEFAULT_MIN_CHANGE_PCT};
    diff_sessions sessions = {stores[0], stores[1], base_dir, new_dir};
    char error[1024];
    if (diff_collect(&sessions, table, &rule, chunk, out, error, sizeof error) != 0)
        fail_msg("diff_collect: %s", error);
}

static const diff_row *find_row(const diff_table *table, const char *name)
{
    for (size_t i = 0; i < table->count; i++)
        if (strcmp(table->rows[i].name, name) == 0)
            return &table->rows[i];
    fail_msg("no row %s", name);
    return NULL;
}

static void test_collect_crafted(void **state)
{
    (void)state;
    store *stores[2];
    char error[1024];
    assert_int_equal(store_open(base_dir, STORE_OPEN_READ, &stores[0], error, sizeof error), 0);
    assert_int_equal(store_open(new_dir, STORE_OPEN_READ, &stores[1], error, sizeof error), 0);
    diff_table whole, one_by_one, scopes;
    collect(stores, STORE_DIFF_KERNELS, 0, &whole);
    collect(stores, STORE_DIFF_KERNELS, 1, &one_by_one); /* a chunk per name */
    collect(stores, STORE_DIFF_SCOPES, 0, &scopes);

    assert_int_equal(whole.count, 5);
    const diff_row *slow = find_row(&whole, "gemm_slow");
    assert_int_equal(slow->verdict, DIFF_SLOWER);
    assert_int_equal(slow->base.count, SLOW_LAUNCHES);
    assert_true(slow->test.p_value < 1e-100);
    assert_true(fabs(slow->change_pct - 30.0) < 0.5);
    assert_int_equal(find_row(&whole, "steady")->verdict, DIFF_SAME);
    assert_int_equal(find_row(&whole, ESCAPE_NAME)->verdict, DIFF_SAME);
    assert_int_equal(find_row(&whole, "only_base")->verdict, DIFF_ONLY_BASE);
    assert_int_equal(find_row(&whole, "only_new")->verdict, DIFF_ONLY_NEW);
    assert_int_equal(find_row(&whole, "only_new")->new_side.total_ns, ONLY_LAUNCHES * 3000);
    /* Largest change of the total first: gemm_slow's +~6.3 ms. */
    assert_string_equal(whole.rows[0].name, "gemm_slow");
    assert_int_equal(whole.verdicts[DIFF_SAME], 2);
    assert_int_equal(whole.total.base.count, SLOW_LAUNCHES + 2 * STEADY_LAUNCHES + ONLY_LAUNCHES);
    assert_int_equal(whole.total.verdict, DIFF_SLOWER);

    /* Read a name at a time: the same table. */
    assert_int_equal(one_by_one.count, whole.count);
    for (size_t i = 0; i < whole.count; i++) {
        const diff_row *a = &whole.rows[i], *b = &one_by_one.rows[i];
        assert_string_equal(a->name, b->name);
        assert_memory_equal(&a->base, &b->base, sizeof a->base);
        assert_memory_equal(&a->new_side, &b->new_side, sizeof a->new_side);
        assert_true(a->test.p_value == b->test.p_value && a->verdict == b->verdict);
    }
    assert_true(whole.total.test.p_value == one_by_one.total.test.p_value);

    /* Scopes: the one left open is not compared. */
    assert_int_equal(scopes.count, 1);
    assert_int_equal(scopes.rows[0].base.count, 200);
    assert_int_equal(scopes.rows[0].verdict, DIFF_SLOWER);

    diff_table_free(&whole);
    diff_table_free(&one_by_one);
    diff_table_free(&scopes);
    store_close(stores[0]);
    store_close(stores[1]);
}

/* ---- the command ---- */

static void test_text_output(void **state)
{
    (void)state;
    assert_int_equal(FLARE("diff", base_dir, new_dir), 0);
    expect_in(out_text, "BASE  ");
    expect_in(out_text, "note: different hosts: base-host vs new-host");
    expect_in(out_text, "note: different devices: NVIDIA H100 vs NVIDIA H200");
    expect_row_verdict("gemm_slow", "slower");
    expect_row_verdict("steady", "same");
    expect_row_verdict("only_base", "only in BASE");
    expect_row_verdict("only_new", "only in NEW");
    expect_row_verdict("step", "slower");
    /* The escape sequence reached the terminal as '?'s. */
    expect_row_verdict("esc?]0;pwned?name?\xff", "same");
    assert_null(strchr(out_text, '\x1b'));
    assert_null(strchr(out_text, '\x07'));
    expect_in(out_text, "Kernels: 5 name(s) (2 same, 1 slower, 1 only in BASE, 1 only in NEW)");
    assert_null(strstr(out_text, "--fail-if-slower"));

    /* --top 2: two rows, and how many more. */
    assert_int_equal(FLARE("diff", "--top", "2", base_dir, new_dir), 0);
    expect_in(out_text, "... 3 more (--top N lists more)");
}

static void test_fail_if_slower(void **state)
{
    (void)state;
    /* gemm_slow +30.1% (the seeds' noise), the total +12.2%: both fail at 10. */
    assert_int_equal(FLARE("diff", "--fail-if-slower", "10", base_dir, new_dir), 3);
    expect_in(out_text, "--fail-if-slower 10%: FAILED (exit 3)");
    expect_in(out_text, "  total GPU time  +12.2%");
    expect_in(out_text, "  kernel  +30.1%  gemm_slow");
    expect_in(err_text,
              "flare diff: slower by more than 10% beyond noise: total GPU time (+12.2%)");
    expect_in(err_text, "gemm_slow (+30.1%)");
    /* At 20 only the kernel. */
    assert_int_equal(FLARE("diff", base_dir, new_dir, "--fail-if-slower=20%"), 3);
    assert_null(strstr(out_text, "  total GPU time  +"));
    expect_in(out_text, "  kernel  +30.1%  gemm_slow");
    /* At 40 nothing; the scope's +30% never gates. */
    assert_int_equal(FLARE("diff", "--fail-if-slower", "40", base_dir, new_dir), 0);
    expect_in(out_text, "--fail-if-slower 40%: passed");
    /* NEW against BASE: everything faster, nothing fails. */
    assert_int_equal(FLARE("diff", "--fail-if-slower", "0", new_dir, base_dir), 0);
    expect_row_verdict("gemm_slow", "faster");
    /* A 50% minimum change makes 30% too small to count. */
    assert_int_equal(
        FLARE("diff", "--min-change", "50", "--fail-if-slower", "10", base_dir, new_dir), 0);
    expect_row_verdict("gemm_slow", "same");
}

/* python3 reads the JSON back and checks it; prints what failed. */
static const char json_checker[] =
    "import json, sys\n"
    "d = json.load(open(sys.argv[1], encoding='utf-8'))\n"
    "def same(a, b, what):\n"
    "    if a != b:\n"
    "        print('%s: got %r, expected %r' % (what, a, b)); sys.exit(1)\n"
    "same(d['flare_diff'], 1, 'flare_diff')\n"
    "same(d['base']['host'], 'base-host', 'base host')\n"
    "same(d['new']['devices'], ['NVIDIA H200'], 'new devices')\n"
    "same(d['different_hosts'], True, 'different_hosts')\n"
    "same(d['different_devices'], True, 'different_devices')\n"
    "same(d['rule'], {'test': 'mann-whitney-u', 'measure': 'mean', 'alpha': 0.01,\n"
    "                 'min_change_pct': 2}, 'rule')\n"
    "g = d['gpu_time']\n"
    "same(g['verdict'], 'slower', 'gpu_time verdict')\n"
    "same(g['base_launches'], 8100, 'base launches')\n"
    "same(abs(g['change_pct'] - 100.0 * (g['new_ns'] - g['base_ns']) / g['base_ns']) < 1e-3,\n"
    "     True, 'gpu change')\n"
    "k = d['kernels']\n"
    "same(k['names'], 5, 'kernel names')\n"
    "same(k['listed'], 5, 'listed (json lists all)')\n"
    "same(k['verdicts']['slower'], 1, 'slower count')\n"
    "rows = {r['name']: r for r in k['rows']}\n"
    "same(set(rows), {'gemm_slow', 'steady', 'only_base', 'only_new',\n"
    "                 'esc\\x1b]0;pwned\\x07name\\x9b?'}, 'names: exact, invalid UTF-8 as ?')\n"
    "s = rows['gemm_slow']\n"
    "same(s['verdict'], 'slower', 'gemm_slow')\n"
    "same(s['base']['count'], 2000, 'gemm_slow count')\n"
    "same(round(s['change_pct']), 30, 'gemm_slow change')\n"
    "same(s['p_value'] < 1e-100, True, 'gemm_slow p')\n"
    "same(s['fails_gate'], True, 'gemm_slow fails')\n"
    "same(rows['only_base']['new'], None, 'only_base new')\n"
    "same(rows['only_base']['p_value'], None, 'only_base p')\n"
    "same(rows['only_new']['verdict'], 'only in NEW', 'only_new')\n"
    "same(rows['steady']['verdict'], 'same', 'steady')\n"
    "same(rows['steady']['fails_gate'], False, 'steady gate')\n"
    "same(d['scopes']['rows'][0]['name'], 'step', 'scope')\n"
    "same(d['scopes']['rows'][0]['base']['count'], 200, 'open scope left out')\n"
    "same(d['scopes']['rows'][0]['fails_gate'], False, 'scopes never gate')\n"
    "same(d['gate']['failed'], True, 'gate')\n"
    "same(d['gate']['exit_status'], 3, 'gate exit')\n"
    "same([f['what'] for f in d['gate']['failures']], ['gpu_time', 'kernel'], 'failures')\n"
    "same(d['gate']['failures'][1]['name'], 'gemm_slow', 'failure name')\n";

static void test_json_output(void **state)
{
    (void)state;
    assert_int_equal(FLARE("diff", "--format", "json", "--fail-if-slower", "10", base_dir, new_dir),
                     3);
    char json_path[400], checker_path[400];
    snprintf(json_path, sizeof json_path, "%s/diff.json", scratch);
    snprintf(checker_path, sizeof checker_path, "%s/check_diff.py", scratch);
    FILE *file = fopen(json_path, "w");
    assert_non_null(file);
    fputs(out_text, file);
    assert_int_equal(fclose(file), 0);
    file = fopen(checker_path, "w");
    assert_non_null(file);
    fputs(json_checker, file);
    assert_int_equal(fclose(file), 0);
    /* No raw control character in the JSON: safe on a terminal as well. */
    for (const char *at = out_text; *at != '\0'; at++)
        assert_true(*at == '\n' || (unsigned char)*at >= 0x20);
    char out[4096], err[4096];
    const char *arguments[] = {checker_path, json_path, NULL};
    int code = cli_run_program("python3", 1, arguments, scratch, out, sizeof out, err, sizeof err);
    if (code == 98)
        fail_msg("python3 was not found: it is needed to check the JSON");
    if (code != 0)
        fail_msg("JSON check failed (exit %d): %s%s\n%s", code, out, err, out_text);

    /* Without the gate: "gate": null, exit 0; --top limits JSON too. */
    assert_int_equal(FLARE("diff", "-f", "json", "--top", "1", base_dir, new_dir), 0);
    expect_in(out_text, "\"gate\":null");
    expect_in(out_text, "\"names\":5,\"listed\":1");
}

static void test_same_session_is_a_usage_error(void **state)
{
    (void)state;
    assert_int_equal(FLARE("diff", base_dir, base_dir), 2);
    expect_in(err_text, "BASE and NEW are the same session");
    char other_path[600];
    snprintf(other_path, sizeof other_path, "%s/.", base_dir);
    assert_int_equal(FLARE("diff", base_dir, other_path), 2);
    expect_in(err_text, "are one session.db");
    /* A directory of sessions whose newest is BASE itself. */
    char parent[600], link[600];
    snprintf(parent, sizeof parent, "%s/only-one", scratch);
    snprintf(link, sizeof link, "%s/only-one/the-session", scratch);
    assert_int_equal(mkdir(parent, 0755), 0);
    assert_int_equal(symlink(base_dir, link), 0);
    assert_int_equal(FLARE("diff", parent, base_dir), 2);
    expect_in(err_text, "same session");
}

/* Runs flare diff with a damaged session among arguments and checks that
 * the damaged one was left as it was too. */
static int run_on_damaged(const char *damaged, const char *const *arguments)
{
    char before_listing[2048], after_listing[2048];
    uint64_t before = session_fingerprint(damaged, before_listing, sizeof before_listing);
    int code = run_flare(arguments);
    if (session_fingerprint(damaged, after_listing, sizeof after_listing) != before ||
        strcmp(before_listing, after_listing) != 0)
        fail_msg("flare diff changed %s (files before: %s, after: %s)", damaged, before_listing,
                 after_listing);
    return code;
}

#define FLARE_DAMAGED(damaged, ...)                                                                \
    run_on_damaged(damaged, (const char *const[]){__VA_ARGS__, NULL})

/* A copy of BASE in scratch/name, for damaging. */
static void copy_base(const char *name, char *dir, size_t size)
{
    snprintf(dir, size, "%s/%s", scratch, name);
    char command[2000];
    snprintf(command, sizeof command, "cp -r '%s' '%s'", base_dir, dir);
    assert_int_equal(system(command), 0);
}

static void test_bad_sessions(void **state)
{
    (void)state;
    /* Not a session. */
    char empty[600];
    snprintf(empty, sizeof empty, "%s/empty", scratch);
    assert_int_equal(mkdir(empty, 0755), 0);
    assert_int_equal(FLARE("diff", empty, new_dir), 1);
    expect_in(err_text, "no flare session in");
    expect_in(err_text, "BASE");
    assert_int_equal(FLARE("diff", base_dir, "/nonexistent/flare-dir"), 1);
    expect_in(err_text, "/nonexistent/flare-dir");

    /* A newer schema. */
    char newer[600], database[700];
    copy_base("newer", newer, sizeof newer);
    snprintf(database, sizeof database, "%s/session.db", newer);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(database, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "UPDATE meta SET value = 99 WHERE key = 'schema_version'",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(FLARE_DAMAGED(newer, "diff", base_dir, newer), 1);
    expect_in(err_text, "schema version 99");

    /* Truncated: cut to a third, then to its first page. */
    char truncated[600];
    copy_base("truncated", truncated, sizeof truncated);
    snprintf(database, sizeof database, "%s/session.db", truncated);
    struct stat info;
    assert_int_equal(stat(database, &info), 0);
    assert_int_equal(truncate(database, info.st_size / 3), 0);
    assert_int_equal(FLARE_DAMAGED(truncated, "diff", truncated, new_dir), 1);
    expect_in(err_text, "flare diff: ");
    expect_in(err_text, truncated);
    assert_int_equal(truncate(database, 4096), 0);
    assert_int_equal(FLARE_DAMAGED(truncated, "diff", new_dir, truncated), 1);
    expect_in(err_text, truncated);

    /* Not a database at all. */
    char garbage[600];
    copy_base("garbage", garbage, sizeof garbage);
    snprintf(database, sizeof database, "%s/session.db", garbage);
    FILE *file = fopen(database, "w");
    assert_non_null(file);
    fputs("this is not SQLite\n", file);
    fclose(file);
    assert_int_equal(FLARE_DAMAGED(garbage, "diff", garbage, new_dir), 1);
    expect_in(err_text, "not");

    /* Unfinished: refused, unless asked for. */
    assert_int_equal(FLARE_DAMAGED(unfinished_dir, "diff", base_dir, unfinished_dir), 1);
    expect_in(err_text, "NEW session");
    expect_in(err_text, "has no recorded end");
    assert_int_equal(
        FLARE_DAMAGED(unfinished_dir, "diff", "--allow-unfinished", base_dir, unfinished_dir), 0);
    expect_in(out_text, "has not ended (compared as it is now)");
}

static void test_usage_errors(void **state)
{
    (void)state;
    static const struct {
        const char *arguments[5];
        const char *word;
    } cases[] = {
        {{"diff", NULL}, "none given"},
        {{"diff", "a", NULL}, "only one given"},
        {{"diff", "a", "b", "c", NULL}, "unexpected argument 'c'"},
        {{"diff", "--bogus", "a", "b", NULL}, "unknown option '--bogus'"},
        {{"diff", "-z", "a", "b", NULL}, "unknown option '-z'"},
        {{"diff", "--format", "xml", "a", NULL}, "unknown format 'xml'"},
        {{"diff", "a", "b", "--top", NULL}, "option '--top' needs a value"},
        {{"diff", "--top", "0", "a", NULL}, "'--top 0'"},
        {{"diff", "--alpha", "2", "a", NULL}, "'--alpha 2'"},
        {{"diff", "--alpha", "1e-3", "a", NULL}, "'--alpha 1e-3'"},
        {{"diff", "--alpha", "1%", "a", NULL}, "'--alpha 1%'"},
        {{"diff", "--min-change", "-1", "a", NULL}, "'--min-change -1'"},
        {{"diff", "--fail-if-slower", "ten", "a", NULL}, "'--fail-if-slower ten'"},
        {{"diff", "--fail-if-slower", ".5", "a", NULL}, "'--fail-if-slower .5'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int code = run_flare(cases[i].arguments);
        if (code != 2 || strstr(err_text, cases[i].word) == NULL)
            fail_msg("case %zu: exit %d, stderr: %s (expected 2 and '%s')", i, code, err_text,
                     cases[i].word);
    }
    assert_int_equal(FLARE("diff", "--help"), 0);
    expect_in(out_text, "usage: flare diff [OPTIONS] BASE NEW");
    expect_in(out_text, "--fail-if-slower PCT");
    expect_in(out_text, "3 --fail-if-slower");
    assert_int_equal(FLARE("--help"), 0);
    expect_in(out_text, "  diff ");
}

static void test_recorded_sessions(void **state)
{
    (void)state;
    char first[600], second[600], demo[1200];
    snprintf(first, sizeof first, "%s/demo-1", scratch);
    snprintf(second, sizeof second, "%s/demo-2", scratch);
    snprintf(demo, sizeof demo, "%s/flare-demo", bin_dir);
    assert_int_equal(FLARE("trace", "-q", "-o", first, "--", demo, "3"), 0);
    assert_int_equal(FLARE("trace", "-q", "-o", second, "--", demo, "4"), 0);
    assert_int_equal(FLARE("diff", first, second), 0);
    expect_in(out_text, "stencil_3pt");
    expect_in(out_text, "flare simulated device 0");
    assert_null(strstr(out_text, "different hosts"));
}

static int setup(void **state)
{
    (void)state;
    if (cli_test_environment(bin_dir, sizeof(bin_dir)) != 0)
        return -1;
    test_make_temp_dir(scratch, sizeof(scratch), "diff");
    snprintf(base_dir, sizeof base_dir, "%s/base", scratch);
    snprintf(new_dir, sizeof new_dir, "%s/new", scratch);
    snprintf(unfinished_dir, sizeof unfinished_dir, "%s/unfinished", scratch);
    crafted base = {"base-host", "NVIDIA H100", 11, 0, 1};
    crafted new_session = {"new-host", "NVIDIA H200", 29, 1, 1};
    crafted unfinished = {"new-host", "NVIDIA H200", 31, 1, 0};
    write_crafted(base_dir, &base);
    write_crafted(new_dir, &new_session);
    write_crafted(unfinished_dir, &unfinished);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_remove_dir(scratch);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_known_answers),
        cmocka_unit_test(test_normal_approximation_known_answers),
        cmocka_unit_test(test_sort_matches_qsort),
        cmocka_unit_test(test_summaries),
        cmocka_unit_test(test_verdict_rule),
        cmocka_unit_test(test_collect_crafted),
        cmocka_unit_test(test_text_output),
        cmocka_unit_test(test_fail_if_slower),
        cmocka_unit_test(test_json_output),
        cmocka_unit_test(test_same_session_is_a_usage_error),
        cmocka_unit_test(test_bad_sessions),
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_recorded_sessions),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
