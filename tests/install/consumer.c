/*
 * consumer.c: a program built against an installed flare through
 * pkg-config (tests/install/install_test.sh), as a user's would be.
 *
 * Includes every installed public header, checks that the library it runs
 * against is the version its headers describe, and records one session with
 * one scope into the directory given as its argument. Exits 0 on success,
 * 1 with a message on stderr otherwise.
 */
#include <flare/flare.h>
#include <flare/replay.h>
#include <flare/sim.h>

#include <stdio.h>
#include <string.h>

static int check(const char *what, int status)
{
    if (status != FLARE_OK)
        fprintf(stderr, "consumer: %s: %s (%s)\n", what, flare_strerror(status),
                flare_status_name(status));
    return status != FLARE_OK;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: consumer SESSION_DIR\n");
        return 2;
    }
    if (strcmp(flare_version(), FLARE_VERSION_STRING) != 0) {
        fprintf(stderr, "consumer: library %s, headers %s\n", flare_version(),
                FLARE_VERSION_STRING);
        return 1;
    }
    flare_options options;
    flare_options_init(&options);
    options.session_dir = argv[1];
    if (check("flare_init", flare_init(&options)))
        return 1;
    int failed = check("flare_scope_begin", flare_scope_begin("install_check_c"));
    failed |= check("flare_scope_end", flare_scope_end());
    failed |= check("flare_shutdown", flare_shutdown());
    if (!failed)
        printf("consumer: flare %s, session in %s\n", flare_version(), argv[1]);
    return failed;
}
