/*
 * cli_flare.h: the scaffolding the CLI tests share to run the built flare
 * as a user would: the bin directory, a scratch directory to run in, the
 * captured stdout and stderr, FLARE(...) and expect_contains. Test-only;
 * include after cmocka.h, once per test program (it defines the program's
 * file-scope buffers).
 */
#ifndef FLARE_TESTS_CLI_FLARE_H
#define FLARE_TESTS_CLI_FLARE_H

#include <stdio.h>
#include <string.h>

#include "cli_run.h"

static char bin_dir[1024];
static char scratch[256];
static char out_text[65536];
static char err_text[65536];

/* Runs bin_dir/flare with the NULL-terminated arguments in scratch, keeps
 * its stdout and stderr, and returns its exit status as a shell reports it. */
static inline int run_flare(const char *const *arguments)
{
    char path[1200];
    snprintf(path, sizeof(path), "%s/flare", bin_dir);
    int status = cli_run_program(path, 0, arguments, scratch, out_text, sizeof(out_text), err_text,
                                 sizeof(err_text));
    assert_true(status >= 0);
    return status;
}

#define FLARE(...) run_flare((const char *const[]){__VA_ARGS__, NULL})

static inline void expect_contains(const char *text, const char *part)
{
    if (strstr(text, part) == NULL)
        fail_msg("'%s' not found in:\n%s", part, text);
}

#endif /* FLARE_TESTS_CLI_FLARE_H */
