/*
 * test_counters.c: application counters and scopes across threads, through
 * the public API and read back from the session database: validation edge
 * cases, logging once, exact sums under many threads, registration racing
 * with adds, per-session baselines, the runtime table, the report.
 *
 * Counters are never unregistered, so every test uses names of its own, and
 * the test that fills the registry runs in a child process.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sqlite3.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "flare/flare.h"
#include "store/store.h"
#include "test_util.h"

/* ---- helpers ---- */

static void start_session(const char *dir)
{
    flare_options options;
    flare_options_init(&options);
    options.session_dir = dir;
    options.flush_interval_ms = 10;
    assert_int_equal(flare_init(&options), FLARE_OK);
}

static flare_counter *get(const char *name)
{
    flare_counter *counter = NULL;
    assert_int_equal(flare_counter_get(name, &counter), FLARE_OK);
    assert_non_null(counter);
    return counter;
}

static uint64_t value_of(const flare_counter *counter)
{
    uint64_t value = 0;
    assert_int_equal(flare_counter_value(counter, &value), FLARE_OK);
    return value;
}

static uint64_t rejected_of(const flare_counter *counter)
{
    uint64_t count = 0;
    assert_int_equal(flare_counter_rejected(counter, &count), FLARE_OK);
    return count;
}

static uint64_t invalid_names(void)
{
    uint64_t invalid = 0;
    assert_int_equal(flare_counter_registry_rejections(&invalid, NULL), FLARE_OK);
    return invalid;
}

/* One integer from a query on the session database; -1 when no row. */
static int64_t sql_int(const char *dir, const char *query)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/session.db", dir);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *statement = NULL;
    if (sqlite3_prepare_v2(db, query, -1, &statement, NULL) != SQLITE_OK) {
        fprintf(stderr, "bad query %s: %s\n", query, sqlite3_errmsg(db));
        fail();
    }
    int64_t result = -1;
    if (sqlite3_step(statement) == SQLITE_ROW)
        result = sqlite3_column_int64(statement, 0);
    sqlite3_finalize(statement);
    sqlite3_close(db);
    return result;
}

typedef struct final_values {
    const char *name;
    int found;
    uint64_t value;
} final_values;

static int on_counter(const store_counter_row *row, void *user)
{
    final_values *wanted = user;
    if (strcmp(row->name, wanted->name) == 0) {
        wanted->found++;
        wanted->value = row->value;
    }
    return 0;
}

/* The session's final value of a counter, through the store's reader (the
 * one `flare report` uses). -1 when the session has no row for it. */
static int64_t session_value(const char *dir, const char *name)
{
    store *database = NULL;
    char error[512];
    assert_int_equal(store_open(dir, STORE_OPEN_READ, &database, error, sizeof(error)), 0);
    final_values wanted = {.name = name};
    assert_int_equal(store_read_counters(database, on_counter, &wanted), 0);
    store_close(database);
    assert_true(wanted.found <= 1);
    return wanted.found ? (int64_t)wanted.value : -1;
}

static int64_t drop_count(const char *dir, const char *source, const char *detail)
{
    char query[512];
    snprintf(query, sizeof(query), "SELECT count FROM drops WHERE source = '%s' AND detail = '%s'",
             source, detail);
    return sql_int(dir, query);
}

/* Lines of flare.log containing both needles. */
static int log_lines_with(const char *dir, const char *needle, const char *other, size_t *longest)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/flare.log", dir);
    FILE *file = fopen(path, "r");
    assert_non_null(file);
    char line[4096];
    int count = 0;
    while (fgets(line, sizeof(line), file) != NULL) {
        if (strstr(line, needle) != NULL && strstr(line, other) != NULL) {
            count++;
            if (longest != NULL && strlen(line) > *longest)
                *longest = strlen(line);
        }
    }
    fclose(file);
    return count;
}

/* ---- logging once (first: the "once" is per process) ---- */

static void test_rejections_are_logged_once(void **state)
{
    (void)state;
    char dir[256];
    test_make_temp_dir(dir, sizeof(dir), "counters-log");
    start_session(dir);
    flare_counter *counter = get("log.once");
    for (int i = 0; i < 1000; i++)
        assert_int_equal(flare_counter_add(counter, 0), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_counter_add(counter, -7), FLARE_ERR_INVALID_ARGUMENT);

    /* A huge bad name: refused, logged once, truncated in the log. */
    size_t length = 100000;
    char *long_name = malloc(length + 1);
    assert_non_null(long_name);
    memset(long_name, 'q', length);
    long_name[length / 2] = '/';
    long_name[length] = '\0';
    flare_counter *refused = NULL;
    for (int i = 0; i < 100; i++)
        assert_int_equal(flare_counter_get(long_name, &refused), FLARE_ERR_INVALID_ARGUMENT);
    assert_null(refused);
    free(long_name);
    assert_int_equal(flare_shutdown(), FLARE_OK);

    assert_int_equal(log_lines_with(dir, "log.once", "rejected", NULL), 1);
    size_t longest = 0;
    assert_int_equal(log_lines_with(dir, "qqqq", "rejected", &longest), 1);
    assert_true(longest < 600);
    assert_int_equal(drop_count(dir, "counter_value", "log.once"), 1001);
    assert_int_equal(drop_count(dir, "counter_name", "invalid counter names"), 100);
    test_remove_dir(dir);
}

/* ---- validation ---- */

static void test_names(void **state)
{
    (void)state;
    const char *valid[] = {"a",
                           "Z",
                           "0",
                           ".",
                           "_",
                           "-",
                           "tokens.generated_total-v2",
                           "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-"};
    for (size_t i = 0; i < sizeof(valid) / sizeof(valid[0]); i++) {
        flare_counter *counter = get(valid[i]);
        char name[FLARE_COUNTER_NAME_MAX + 1];
        assert_int_equal(flare_counter_name(counter, name, sizeof(name)), FLARE_OK);
        assert_string_equal(name, valid[i]);
    }

    char name96[FLARE_COUNTER_NAME_MAX + 2];
    memset(name96, 'n', FLARE_COUNTER_NAME_MAX);
    name96[FLARE_COUNTER_NAME_MAX] = '\0';
    flare_counter *at_limit = get(name96);
    char too_small[FLARE_COUNTER_NAME_MAX];
    assert_int_equal(flare_counter_name(at_limit, too_small, sizeof(too_small)),
                     FLARE_ERR_INVALID_ARGUMENT);

    /* One from each class of refused character, and the length bounds. */
    char name97[FLARE_COUNTER_NAME_MAX + 2];
    memset(name97, 'n', FLARE_COUNTER_NAME_MAX + 1);
    name97[FLARE_COUNTER_NAME_MAX + 1] = '\0';
    const char *invalid[] = {
        "",           name97,       "has space",   "slash/name", "colon:name", "at@name",
        "plus+name",  "star*name",  "comma,name",  "quote'name", "bang!",      "semi;colon",
        "tab\tname",  "newline\n",  "del\x7f",     "bell\x07",   "e\xc3\xa9",  "high\x80",
        "latin1\xe9", "brace{name", "back\\slash", "tilde~",     "hash#",      "percent%",
    };
    uint64_t before = invalid_names();
    for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
        flare_counter *counter = (flare_counter *)&before; /* must be cleared */
        assert_int_equal(flare_counter_get(invalid[i], &counter), FLARE_ERR_INVALID_ARGUMENT);
        assert_null(counter);
        assert_int_equal(flare_counter_find(invalid[i], &counter), FLARE_ERR_INVALID_ARGUMENT);
        assert_int_equal(flare_counter_tick(invalid[i], 1), FLARE_ERR_INVALID_ARGUMENT);
    }
    flare_counter *counter = NULL;
    assert_int_equal(flare_counter_get(NULL, &counter), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_counter_get("fine", NULL), FLARE_ERR_INVALID_ARGUMENT);
    /* Each refused get and tick is counted (find never registers, so it is not). */
    size_t refused = 2 * (sizeof(invalid) / sizeof(invalid[0])) + 1;
    assert_int_equal(invalid_names() - before, refused);
}

static void test_values(void **state)
{
    (void)state;
    flare_counter *counter = get("values.edge");
    assert_int_equal(flare_counter_add(counter, 1), FLARE_OK);
    assert_int_equal(flare_counter_add(counter, FLARE_COUNTER_ADD_MAX), FLARE_OK);
    int64_t refused[] = {0, -1, INT64_MIN, FLARE_COUNTER_ADD_MAX + 1, INT64_MAX};
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
        assert_int_equal(flare_counter_add(counter, refused[i]), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_counter_tick("values.edge", 0), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_counter_tick("values.edge", 2), FLARE_OK);
    assert_int_equal(value_of(counter), 1 + (uint64_t)FLARE_COUNTER_ADD_MAX + 2);
    assert_int_equal(rejected_of(counter), 6);
    assert_int_equal(flare_counter_add(NULL, 1), FLARE_ERR_INVALID_ARGUMENT);
    uint64_t value;
    assert_int_equal(flare_counter_value(NULL, &value), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_counter_value(counter, NULL), FLARE_ERR_INVALID_ARGUMENT);
}

static void test_get_find_and_enumerate(void **state)
{
    (void)state;
    flare_counter *found = NULL;
    assert_int_equal(flare_counter_find("lookup.never", &found), FLARE_ERR_NOT_FOUND);
    assert_null(found);
    /* find must not have registered it */
    assert_int_equal(flare_counter_find("lookup.never", &found), FLARE_ERR_NOT_FOUND);
    flare_counter *counter = get("lookup.made");
    assert_ptr_equal(get("lookup.made"), counter);
    assert_int_equal(flare_counter_find("lookup.made", &found), FLARE_OK);
    assert_ptr_equal(found, counter);
    assert_int_equal(value_of(counter), 0); /* registered and idle, not missing */

    uint32_t count = 0;
    assert_int_equal(flare_counter_count(&count), FLARE_OK);
    int seen = 0;
    for (uint32_t i = 0; i < count; i++) {
        flare_counter *at = NULL;
        assert_int_equal(flare_counter_at(i, &at), FLARE_OK);
        seen += at == counter;
    }
    assert_int_equal(seen, 1);
    flare_counter *past = NULL;
    assert_int_equal(flare_counter_at(count, &past), FLARE_ERR_NOT_FOUND);
}

static void test_errno_is_preserved(void **state)
{
    (void)state;
    flare_counter *counter = get("errno.kept");
    errno = 4242;
    flare_counter_add(counter, 3);
    assert_int_equal(errno, 4242);
    flare_counter_add(counter, -3);
    assert_int_equal(errno, 4242);
    flare_counter_tick("errno.kept", 1);
    assert_int_equal(errno, 4242);
    flare_counter *refused;
    flare_counter_get("bad name", &refused);
    assert_int_equal(errno, 4242);
}

/* ---- threads ---- */

#define ADDER_THREADS 16
#define ADDS_EACH     200000

typedef struct adder {
    flare_counter *counter;
    int64_t n;
    _Atomic int *go;
} adder;

static void *add_many(void *argument)
{
    adder *self = argument;
    while (!atomic_load(self->go)) {
    }
    for (int i = 0; i < ADDS_EACH; i++)
        flare_counter_add(self->counter, self->n);
    return NULL;
}

typedef struct watcher {
    flare_counter *counter;
    _Atomic int *stop;
    int went_backwards;
} watcher;

static void *watch(void *argument)
{
    watcher *self = argument;
    uint64_t last = 0;
    while (!atomic_load(self->stop)) {
        uint64_t now;
        flare_counter_value(self->counter, &now);
        if (now < last)
            self->went_backwards = 1;
        last = now;
    }
    return NULL;
}

static void test_concurrent_adds_sum_exactly(void **state)
{
    (void)state;
    flare_counter *counter = get("threads.sum");
    _Atomic int go = 0, stop = 0;
    pthread_t threads[ADDER_THREADS];
    adder adders[ADDER_THREADS];
    uint64_t expected = 0;
    for (int i = 0; i < ADDER_THREADS; i++) {
        adders[i] = (adder){.counter = counter, .n = 1 + i % 3, .go = &go};
        expected += (uint64_t)ADDS_EACH * (uint64_t)adders[i].n;
        assert_int_equal(pthread_create(&threads[i], NULL, add_many, &adders[i]), 0);
    }
    watcher watching = {.counter = counter, .stop = &stop};
    pthread_t watcher_thread;
    assert_int_equal(pthread_create(&watcher_thread, NULL, watch, &watching), 0);
    atomic_store(&go, 1);
    for (int i = 0; i < ADDER_THREADS; i++)
        pthread_join(threads[i], NULL);
    atomic_store(&stop, 1);
    pthread_join(watcher_thread, NULL);
    assert_int_equal(value_of(counter), expected);
    assert_false(watching.went_backwards);
}

/* Threads that add and exit, many more than run at once: exited threads'
 * cells are handed to new threads with their values, never lost. */
static void *add_and_exit(void *argument)
{
    flare_counter *counter = argument;
    for (int i = 0; i < 1000; i++)
        flare_counter_add(counter, 1);
    return NULL;
}

static void test_short_lived_threads(void **state)
{
    (void)state;
    flare_counter *counter = get("threads.short");
    for (int round = 0; round < 50; round++) {
        pthread_t threads[4];
        for (int i = 0; i < 4; i++)
            assert_int_equal(pthread_create(&threads[i], NULL, add_and_exit, counter), 0);
        for (int i = 0; i < 4; i++)
            pthread_join(threads[i], NULL);
    }
    assert_int_equal(value_of(counter), 50 * 4 * 1000);
}

#define RACERS          8
#define NAMES_PER_RACER 48
#define SHARED_NAMES    8

typedef struct racer {
    int id;
    _Atomic int *go;
    flare_counter *shared_handles[SHARED_NAMES];
} racer;

/* Registers new names of its own and shared names every racer registers at
 * the same moment, adding to all of them while others register. */
static void *register_and_add(void *argument)
{
    racer *self = argument;
    while (!atomic_load(self->go)) {
    }
    char name[64];
    for (int k = 0; k < NAMES_PER_RACER; k++) {
        snprintf(name, sizeof(name), "race.shared.%d", k % SHARED_NAMES);
        flare_counter *shared = NULL;
        if (flare_counter_get(name, &shared) != FLARE_OK)
            return (void *)1;
        if (self->shared_handles[k % SHARED_NAMES] == NULL)
            self->shared_handles[k % SHARED_NAMES] = shared;
        else if (self->shared_handles[k % SHARED_NAMES] != shared)
            return (void *)2;
        snprintf(name, sizeof(name), "race.own.%d.%d", self->id, k);
        if (flare_counter_tick(name, k + 1) != FLARE_OK)
            return (void *)3;
        for (int i = 0; i < 100; i++)
            flare_counter_add(shared, 1);
    }
    return NULL;
}

static void test_registration_races_adds(void **state)
{
    (void)state;
    _Atomic int go = 0;
    pthread_t threads[RACERS];
    racer racers[RACERS];
    memset(racers, 0, sizeof(racers));
    for (int i = 0; i < RACERS; i++) {
        racers[i].id = i;
        racers[i].go = &go;
        assert_int_equal(pthread_create(&threads[i], NULL, register_and_add, &racers[i]), 0);
    }
    atomic_store(&go, 1);
    for (int i = 0; i < RACERS; i++) {
        void *result = NULL;
        pthread_join(threads[i], &result);
        assert_null(result);
    }
    for (int s = 0; s < SHARED_NAMES; s++) {
        for (int i = 1; i < RACERS; i++)
            assert_ptr_equal(racers[i].shared_handles[s], racers[0].shared_handles[s]);
        /* each racer added 100 per visit, NAMES_PER_RACER / SHARED_NAMES visits */
        assert_int_equal(value_of(racers[0].shared_handles[s]),
                         (uint64_t)RACERS * 100 * (NAMES_PER_RACER / SHARED_NAMES));
    }
    char name[64];
    for (int i = 0; i < RACERS; i++) {
        for (int k = 0; k < NAMES_PER_RACER; k++) {
            snprintf(name, sizeof(name), "race.own.%d.%d", i, k);
            flare_counter *counter = NULL;
            assert_int_equal(flare_counter_find(name, &counter), FLARE_OK);
            assert_int_equal(value_of(counter), (uint64_t)k + 1);
        }
    }
}

/* ---- sessions ---- */

static void test_baseline_across_sessions(void **state)
{
    (void)state;
    char first[256], second[256];
    test_make_temp_dir(first, sizeof(first), "counters-s1");
    test_make_temp_dir(second, sizeof(second), "counters-s2");
    flare_counter *steps = get("session.steps");
    flare_counter *idle = get("session.idle");
    flare_counter_add(steps, 3); /* before any session: counted by none */

    start_session(first);
    flare_counter_add(steps, 5);
    flare_counter_add(steps, 0); /* rejected: a counter_value drop of this session */
    flare_counter_add(steps, -2);
    assert_int_equal(flare_flush(5000), FLARE_OK);
    assert_int_equal(session_value(first, "session.steps"), 5);
    assert_int_equal(flare_shutdown(), FLARE_OK);

    flare_counter_add(steps, 7); /* between sessions: counted by none */

    start_session(second);
    flare_counter_add(steps, 11); /* the same handle, still valid */
    flare_counter_add(steps, -1);
    flare_counter *late = get("session.late");
    flare_counter_add(late, 2);
    assert_int_equal(flare_shutdown(), FLARE_OK);

    assert_int_equal(session_value(first, "session.steps"), 5);
    assert_int_equal(session_value(second, "session.steps"), 11);
    assert_int_equal(session_value(second, "session.late"), 2);
    assert_int_equal(session_value(first, "session.late"), -1);
    assert_int_equal(session_value(first, "session.idle"), 0); /* registered, idle */
    assert_int_equal(value_of(steps), 3 + 5 + 7 + 11);
    assert_int_equal(value_of(idle), 0);
    assert_int_equal(drop_count(first, "counter_value", "session.steps"), 2);
    assert_int_equal(drop_count(second, "counter_value", "session.steps"), 1);

    /* The report prints the session's final values. */
    const char *bin = getenv("FLARE_TEST_BIN_DIR");
    if (bin != NULL) {
        char command[1024];
        snprintf(command, sizeof(command), "%s/flare report '%s'", bin, second);
        FILE *report = popen(command, "r");
        assert_non_null(report);
        char line[512];
        int in_section = 0, steps_line = 0, late_line = 0;
        while (fgets(line, sizeof(line), report) != NULL) {
            if (strncmp(line, "Counters", 8) == 0)
                in_section = 1;
            else if (line[0] != ' ')
                in_section = 0;
            long long value = -1;
            char name[128];
            if (in_section && sscanf(line, " %127s %lld", name, &value) == 2) {
                steps_line += strcmp(name, "session.steps") == 0 && value == 11;
                late_line += strcmp(name, "session.late") == 0 && value == 2;
            }
        }
        assert_int_equal(pclose(report), 0);
        assert_int_equal(steps_line, 1);
        assert_int_equal(late_line, 1);
    }
    test_remove_dir(first);
    test_remove_dir(second);
}

/* ---- scopes across threads ---- */

typedef struct closer {
    flare_scope_handle handle;
    int status;
    int64_t thread_id;
} closer;

static void *close_elsewhere(void *argument)
{
    closer *self = argument;
    self->thread_id = (int64_t)syscall(SYS_gettid);
    self->status = flare_scope_close(self->handle);
    return NULL;
}

static void *open_close_many(void *argument)
{
    flare_scope_handle *handles = argument;
    /* Closes what another thread opened, and opens for the next. */
    for (int i = 0; i < 500; i++) {
        flare_scope_handle handle;
        if (flare_scope_open("many", &handle) != FLARE_OK)
            return (void *)1;
        if (flare_scope_close(handle) != FLARE_OK)
            return (void *)2;
    }
    (void)handles;
    return NULL;
}

static void test_scopes_across_threads(void **state)
{
    (void)state;
    flare_scope_handle handle = 99;
    assert_int_equal(flare_scope_open("no.session", &handle), FLARE_ERR_NOT_ACTIVE);
    assert_int_equal(handle, 0);
    assert_int_equal(flare_scope_close(handle), FLARE_ERR_STATE);

    char dir[256];
    test_make_temp_dir(dir, sizeof(dir), "counters-scopes");
    start_session(dir);
    assert_int_equal(flare_scope_open("handoff", &handle), FLARE_OK);
    assert_true(handle != 0);
    closer other = {.handle = handle};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, close_elsewhere, &other), 0);
    pthread_join(thread, NULL);
    assert_int_equal(other.status, FLARE_OK);
    assert_int_equal(flare_scope_close(handle), FLARE_ERR_STATE); /* twice */
    assert_int_equal(flare_scope_close(((uint64_t)123456 << 12) | 7), FLARE_ERR_STATE);
    assert_int_equal(flare_scope_open("x", NULL), FLARE_ERR_INVALID_ARGUMENT);

    flare_scope_handle left_open, late;
    assert_int_equal(flare_scope_open("left.open", &left_open), FLARE_OK);
    assert_int_equal(flare_scope_open("closed.late", &late), FLARE_OK);

    /* Fill the table: the next open is refused and counted. */
    static flare_scope_handle all[FLARE_SCOPE_OPEN_MAX];
    int opened = 0;
    while (opened < FLARE_SCOPE_OPEN_MAX && flare_scope_open("fill", &all[opened]) == FLARE_OK)
        opened++;
    assert_int_equal(opened, FLARE_SCOPE_OPEN_MAX - 2);
    flare_scope_handle refused;
    assert_int_equal(flare_scope_open("refused", &refused), FLARE_ERR_FULL);
    for (int i = 0; i < opened; i++)
        assert_int_equal(flare_scope_close(all[i]), FLARE_OK);

    /* Nested per-thread scopes through the runtime table. */
    const flare_runtime_abi *table = flare_runtime_get(FLARE_RUNTIME_ABI_VERSION);
    assert_non_null(table);
    assert_int_equal(table->scope_begin("abi.outer"), FLARE_OK);
    assert_int_equal(table->scope_begin("abi.inner"), FLARE_OK);
    assert_int_equal(table->scope_end(), FLARE_OK);
    assert_int_equal(table->scope_end(), FLARE_OK);

    pthread_t workers[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&workers[i], NULL, open_close_many, NULL), 0);
    for (int i = 0; i < 4; i++) {
        void *result = NULL;
        pthread_join(workers[i], &result);
        assert_null(result);
    }
    assert_int_equal(flare_shutdown(), FLARE_OK);
    assert_int_equal(flare_scope_close(late), FLARE_ERR_NOT_ACTIVE);

    char query[256];
    snprintf(query, sizeof(query),
             "SELECT thread_id FROM scopes JOIN names ON names.id = name_id WHERE name = "
             "'handoff' AND depth = 0 AND still_open = 0");
    assert_int_equal(sql_int(dir, query), other.thread_id);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM scopes JOIN names ON names.id = name_id "
                                  "WHERE name = 'left.open' AND still_open = 1"),
                     1);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM scopes JOIN names ON names.id = name_id "
                                  "WHERE name = 'fill'"),
                     opened);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM scopes JOIN names ON names.id = name_id "
                                  "WHERE name = 'many'"),
                     4 * 500);
    assert_int_equal(sql_int(dir, "SELECT depth FROM scopes JOIN names ON names.id = name_id "
                                  "WHERE name = 'abi.inner'"),
                     1);
    /* the open that ended the fill loop, and the one after */
    assert_int_equal(drop_count(dir, "scope_handles", "open-scope table full"), 2);
    test_remove_dir(dir);
}

/* ---- the runtime table ---- */

static void test_runtime_table(void **state)
{
    (void)state;
    const flare_runtime_abi *table = flare_runtime_get(FLARE_RUNTIME_ABI_VERSION);
    assert_non_null(table);
    assert_int_equal(table->abi_version, FLARE_RUNTIME_ABI_VERSION);
    assert_int_equal(table->struct_size, sizeof(flare_runtime_abi));
    assert_null(flare_runtime_get(FLARE_RUNTIME_ABI_VERSION + 1));
    assert_null(flare_runtime_get(0));
    flare_counter *through_table = NULL;
    assert_int_equal(table->counter_get("table.same", &through_table), FLARE_OK);
    assert_ptr_equal(through_table, get("table.same"));
    assert_int_equal(table->counter_add(through_table, 4), FLARE_OK);
    assert_int_equal(table->counter_tick("table.same", 1), FLARE_OK);
    assert_int_equal(value_of(through_table), 5);
    assert_string_equal(table->version(), FLARE_VERSION_STRING);

    /* A test program links flare statically: its registry exports nothing,
     * so it must say that it is not shared, and why. */
    char description[PATH_MAX + 256];
    assert_int_equal(flare_runtime_describe(description, sizeof(description)), FLARE_OK);
    assert_false(flare_runtime_shared());
    assert_non_null(strstr(description, "does not export flare_runtime_get"));
    assert_int_equal(flare_runtime_describe(description, 4), FLARE_ERR_INVALID_ARGUMENT);
}

/* ---- a full registry (in a child: slots are never freed) ---- */

static void test_registry_full(void **state)
{
    (void)state;
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        uint32_t count = 0;
        flare_counter_count(&count);
        char name[64];
        for (uint32_t i = count; i < FLARE_COUNTER_CAPACITY; i++) {
            snprintf(name, sizeof(name), "fill.%u", i);
            flare_counter *counter;
            if (flare_counter_get(name, &counter) != FLARE_OK)
                _exit(10);
            if (flare_counter_add(counter, 1) != FLARE_OK)
                _exit(11);
        }
        flare_counter *counter = NULL;
        if (flare_counter_get("one.too.many", &counter) != FLARE_ERR_FULL || counter != NULL)
            _exit(12);
        uint64_t full = 0;
        flare_counter_registry_rejections(NULL, &full);
        if (full != 1)
            _exit(13);
        /* Existing names still resolve, and still count. */
        if (flare_counter_tick("fill.4095", 2) != FLARE_OK)
            _exit(14);
        if (flare_counter_find("fill.4095", &counter) != FLARE_OK)
            _exit(15);
        uint64_t value = 0;
        flare_counter_value(counter, &value);
        _exit(value == 3 ? 0 : 16);
    }
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rejections_are_logged_once),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_get_find_and_enumerate),
        cmocka_unit_test(test_errno_is_preserved),
        cmocka_unit_test(test_concurrent_adds_sum_exactly),
        cmocka_unit_test(test_short_lived_threads),
        cmocka_unit_test(test_registration_races_adds),
        cmocka_unit_test(test_baseline_across_sessions),
        cmocka_unit_test(test_scopes_across_threads),
        cmocka_unit_test(test_runtime_table),
        cmocka_unit_test(test_registry_full),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
