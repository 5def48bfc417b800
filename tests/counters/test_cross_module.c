/*
 * test_cross_module.c: one registry across real modules. This program links
 * libflare.so; it dlopens a plugin that does not link libflare (it resolves
 * the runtime ABI at run time) and a second copy of libflare.so from another
 * path. All three must read the same counters, and the session must record
 * what the plugin ticked.
 *
 * Run with --expect-split (and FLARE_RUNTIME_DISABLE_SHARING=1), the same
 * checks must find the modules disagreeing: that proves the comparison can
 * fail, so its passing means the registry really is shared.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <dlfcn.h>
#include <limits.h>
#include <sqlite3.h>
#include <string.h>

#include "flare/flare.h"
#include "test_util.h"

static int expect_split;

/* ---- the plugin ---- */

typedef int (*plugin_bind_function)(char *description, size_t size);
typedef int (*plugin_tick_function)(const char *name, int64_t n);
typedef int (*plugin_value_function)(const char *name, uint64_t *value);

typedef struct plugin {
    void *handle;
    plugin_bind_function bind;
    plugin_tick_function tick;
    plugin_value_function value;
} plugin;

static void load_plugin(plugin *out)
{
    const char *path = getenv("FLARE_TEST_PLUGIN");
    assert_non_null(path);
    out->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (out->handle == NULL)
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    assert_non_null(out->handle);
    out->bind = (plugin_bind_function)dlsym(out->handle, "plugin_bind");
    out->tick = (plugin_tick_function)dlsym(out->handle, "plugin_tick");
    out->value = (plugin_value_function)dlsym(out->handle, "plugin_value");
    assert_non_null(out->bind);
    assert_non_null(out->tick);
    assert_non_null(out->value);
}

/* ---- a second copy of libflare.so, mapped from another path ---- */

typedef struct library_copy {
    void *handle;
    char dir[256];
    int (*tick)(const char *name, int64_t n);
    int (*get)(const char *name, flare_counter **counter);
    int (*value)(const flare_counter *counter, uint64_t *value);
    int (*find)(const char *name, flare_counter **counter);
    int (*shared)(void);
    int (*describe)(char *buffer, size_t size);
    const flare_runtime_abi *(*runtime_get)(uint32_t abi_version);
} library_copy;

static void load_copy(library_copy *out)
{
    const char *library = getenv("FLARE_TEST_LIBRARY");
    assert_non_null(library);
    test_make_temp_dir(out->dir, sizeof(out->dir), "libcopy");
    char command[1024], path[512];
    snprintf(path, sizeof(path), "%s/libflare.so", out->dir);
    snprintf(command, sizeof(command), "cp '%s' '%s'", library, path);
    assert_int_equal(system(command), 0);
    out->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (out->handle == NULL)
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    assert_non_null(out->handle);
    /* dlsym on the copy's handle finds the copy's own definitions. */
    *(void **)&out->tick = dlsym(out->handle, "flare_counter_tick");
    *(void **)&out->get = dlsym(out->handle, "flare_counter_get");
    *(void **)&out->value = dlsym(out->handle, "flare_counter_value");
    *(void **)&out->find = dlsym(out->handle, "flare_counter_find");
    *(void **)&out->shared = dlsym(out->handle, "flare_runtime_shared");
    *(void **)&out->describe = dlsym(out->handle, "flare_runtime_describe");
    *(void **)&out->runtime_get = dlsym(out->handle, "flare_runtime_get");
    assert_non_null(out->tick);
    assert_non_null(out->runtime_get);
    assert_true((void *)out->tick != (void *)flare_counter_tick); /* really another copy */
}

/* ---- reading ---- */

/* What this program (libflare, linked) reads for name; 0 if never registered. */
static uint64_t main_value(const char *name)
{
    flare_counter *counter = NULL;
    if (flare_counter_find(name, &counter) != FLARE_OK)
        return 0;
    uint64_t value = 0;
    assert_int_equal(flare_counter_value(counter, &value), FLARE_OK);
    return value;
}

/* The check both modes share: do two modules read the same value? */
static void check_same(const char *what, uint64_t here, uint64_t there)
{
    if (expect_split) {
        if (here == there)
            fprintf(stderr, "%s: both modules read %llu although sharing is disabled\n", what,
                    (unsigned long long)here);
        assert_true(here != there);
    } else {
        if (here != there)
            fprintf(stderr, "%s: this program reads %llu, the other module %llu\n", what,
                    (unsigned long long)here, (unsigned long long)there);
        assert_true(here == there);
    }
}

static int64_t session_value(const char *dir, const char *name)
{
    char path[512], query[256];
    snprintf(path, sizeof(path), "%s/session.db", dir);
    snprintf(query, sizeof(query),
             "SELECT s.value FROM counter_samples s JOIN counters c ON c.pid = s.pid AND "
             "c.counter = s.counter WHERE c.name = '%s' ORDER BY s.time_ns DESC LIMIT 1",
             name);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *statement = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, query, -1, &statement, NULL), SQLITE_OK);
    int64_t value = -1;
    if (sqlite3_step(statement) == SQLITE_ROW)
        value = sqlite3_column_int64(statement, 0);
    sqlite3_finalize(statement);
    sqlite3_close(db);
    return value;
}

/* ---- tests ---- */

static void test_this_program_holds_the_registry(void **state)
{
    (void)state;
    char description[PATH_MAX + 256];
    assert_int_equal(flare_runtime_describe(description, sizeof(description)), FLARE_OK);
    if (expect_split) {
        assert_false(flare_runtime_shared());
        assert_non_null(strstr(description, "FLARE_RUNTIME_DISABLE_SHARING"));
    } else {
        assert_true(flare_runtime_shared());
        assert_non_null(strstr(description, "own registry"));
        assert_non_null(strstr(description, "libflare.so"));
    }
}

static void test_plugin_ticks_what_this_program_reads(void **state)
{
    (void)state;
    flare_counter *mine = NULL;
    assert_int_equal(flare_counter_get("cross.main", &mine), FLARE_OK);
    assert_int_equal(flare_counter_add(mine, 5), FLARE_OK);

    plugin loaded;
    load_plugin(&loaded);
    char description[PATH_MAX + 1200];
    int shared = loaded.bind(description, sizeof(description));
    printf("plugin: %s\n", description);
    if (expect_split) {
        assert_false(shared);
        assert_non_null(strstr(description, "FLARE_RUNTIME_DISABLE_SHARING"));
    } else {
        assert_true(shared);
        assert_non_null(strstr(description, "shared: mapped"));
    }

    for (int i = 0; i < 10; i++)
        assert_int_equal(loaded.tick("cross.main", 1), FLARE_OK);
    uint64_t plugin_reads = 0;
    assert_int_equal(loaded.value("cross.main", &plugin_reads), FLARE_OK);
    check_same("cross.main", main_value("cross.main"), plugin_reads);

    /* A name only the plugin registered. */
    assert_int_equal(loaded.tick("cross.plugin", 7), FLARE_OK);
    assert_int_equal(loaded.value("cross.plugin", &plugin_reads), FLARE_OK);
    check_same("cross.plugin", main_value("cross.plugin"), plugin_reads);
}

static void test_second_copy_forwards_to_the_first(void **state)
{
    (void)state;
    library_copy copy;
    load_copy(&copy);
    char description[PATH_MAX + 256];
    assert_int_equal(copy.describe(description, sizeof(description)), FLARE_OK);
    printf("copy: %s\n", description);
    if (expect_split) {
        assert_false(copy.shared());
        assert_non_null(strstr(description, "private registry"));
    } else {
        assert_true(copy.shared());
        assert_non_null(strstr(description, "forwarding"));
        assert_ptr_equal(copy.runtime_get(FLARE_RUNTIME_ABI_VERSION),
                         flare_runtime_get(FLARE_RUNTIME_ABI_VERSION));
        flare_counter *through_copy = NULL, *here = NULL;
        assert_int_equal(copy.get("cross.main", &through_copy), FLARE_OK);
        assert_int_equal(flare_counter_get("cross.main", &here), FLARE_OK);
        assert_ptr_equal(through_copy, here);
    }

    /* Ticks through the copy, read here; ticks here, read through the copy. */
    assert_int_equal(copy.tick("cross.copy", 3), FLARE_OK);
    assert_int_equal(flare_counter_tick("cross.copy", 4), FLARE_OK);
    flare_counter *counter = NULL;
    assert_int_equal(copy.find("cross.copy", &counter), FLARE_OK);
    uint64_t copy_reads = 0;
    assert_int_equal(copy.value(counter, &copy_reads), FLARE_OK);
    check_same("cross.copy", main_value("cross.copy"), copy_reads);
    test_remove_dir(copy.dir);
}

/* The profiler (this program's session) records what the plugin ticked. */
static void test_session_records_plugin_ticks(void **state)
{
    (void)state;
    plugin loaded;
    load_plugin(&loaded); /* the same module again: already bound */
    char dir[256];
    test_make_temp_dir(dir, sizeof(dir), "cross-session");
    flare_options options;
    flare_options_init(&options);
    options.session_dir = dir;
    assert_int_equal(flare_init(&options), FLARE_OK);
    for (int i = 0; i < 9; i++)
        assert_int_equal(loaded.tick("cross.session", 2), FLARE_OK);
    assert_int_equal(flare_shutdown(), FLARE_OK);
    uint64_t plugin_reads = 0;
    assert_int_equal(loaded.value("cross.session", &plugin_reads), FLARE_OK);
    int64_t recorded = session_value(dir, "cross.session");
    check_same("cross.session recorded", recorded < 0 ? 0 : (uint64_t)recorded, plugin_reads);
    test_remove_dir(dir);
}

int main(int argc, char **argv)
{
    expect_split = argc > 1 && strcmp(argv[1], "--expect-split") == 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_this_program_holds_the_registry),
        cmocka_unit_test(test_plugin_ticks_what_this_program_reads),
        cmocka_unit_test(test_second_copy_forwards_to_the_first),
        cmocka_unit_test(test_session_records_plugin_ticks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
