/*
 * test_log.c: the log-once facility: one line however often and from however
 * many threads an error repeats, every repeat counted; and lines reach the
 * session's flare.log and database.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "flare/flare.h"
#include "test_util.h"

#define THREADS 4
#define REPEATS 1000

static void repeat_error(void)
{
    CORE_LOG_ONCE("test.repeated_error", CORE_LOG_ERROR, "repeated error %d", 42);
}

static void *hammer(void *argument)
{
    (void)argument;
    for (int i = 0; i < REPEATS; i++)
        repeat_error();
    return NULL;
}

static uint64_t found_hits;

static void find_site(const char *key, uint64_t hits, void *user)
{
    (void)user;
    if (strcmp(key, "test.repeated_error") == 0)
        found_hits = hits;
}

static int count_occurrences(const char *path, const char *needle)
{
    static char text[1 << 16];
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t length = read(fd, text, sizeof(text) - 1);
    close(fd);
    text[length > 0 ? length : 0] = '\0';
    int count = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
        count++;
    return count;
}

static void test_log_once_from_many_threads(void **state)
{
    (void)state;
    char dir[256];
    test_make_temp_dir(dir, sizeof(dir), "logonce");
    flare_options options;
    flare_options_init(&options);
    options.session_dir = dir;
    assert_int_equal(flare_init(&options), FLARE_OK);
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, hammer, NULL), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);
    core_log_once_for_each(find_site, NULL);
    assert_int_equal(found_hits, THREADS * REPEATS);
    assert_int_equal(flare_shutdown(), FLARE_OK);

    char log_path[400];
    snprintf(log_path, sizeof(log_path), "%s/flare.log", dir);
    /* One line for the error itself; the total comes at shutdown. */
    assert_int_equal(count_occurrences(log_path, "repeated error 42"), 1);
    assert_int_equal(count_occurrences(log_path, "'test.repeated_error' happened 4000 times"), 1);
    test_remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_once_from_many_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
