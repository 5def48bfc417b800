/*
 * index.c: `flare index [DIR]`: builds the indexes a session's views need
 * (docs/schema.md, "Views and name tables"), for a session that ended
 * without them (its launcher was killed; it is still running), and brings
 * a session of the previous schema version up to this one. Sessions made
 * by `flare trace` get them when the command ends. It must never change a
 * row of the session: it adds indexes, views, name tables and meta keys.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/session.h"
#include "core/clock.h"
#include "flare/flare.h"
#include "store/store.h"
#include "store/store_views.h"

static const char index_help[] =
    "usage: flare index [DIR]\n"
    "\n"
    "Builds the indexes the session's views use (docs/schema.md), so that queries\n"
    "such as GPU time per scope run in a second instead of minutes. flare trace\n"
    "builds them when the command ends; this is for a session that ended without\n"
    "them, and it brings a session of an older flare (schema versions 6 to 9) up\n"
    "to version 10 (the views, name tables and empty tables it lacks added). No row\n"
    "is changed; running it again does nothing new.\n"
    "\n"
    "DIR is chosen as for flare report (default: the newest session under\n"
    "./flare-out, or $FLARE_OUTPUT_DIR). It needs write permission on DIR.\n"
    "\n"
    "Exit status: 0 on success, 1 if the session cannot be opened or indexed,\n"
    "2 for a usage error.\n";

static long long file_size(const char *dir)
{
    char path[4200];
    struct stat info;
    snprintf(path, sizeof(path), "%s/%s", dir, STORE_DATABASE_NAME);
    return stat(path, &info) == 0 ? (long long)info.st_size : -1;
}

int cli_index(int argc, char **argv)
{
    const char *directory = NULL;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            fputs(index_help, stdout);
            return CLI_EXIT_OK;
        }
        if (argv[i][0] == '-' && argv[i][1] != '\0')
            return cli_usage_error("index", "unknown option '%s'", argv[i]);
        if (directory != NULL)
            return cli_usage_error("index", "unexpected argument '%s' (one DIR at most)", argv[i]);
        directory = argv[i];
    }
    char dir[4096], error[4096];
    if (cli_find_session(directory, dir, sizeof(dir), error, sizeof(error)) != 0)
        return cli_failure("index", "%s", error);
    long long before = file_size(dir);
    store *database;
    if (store_open_upgrading(dir, &database, error, sizeof(error)) != FLARE_OK)
        return cli_failure("index", "%s", error);
    store_index_result result;
    uint64_t started = core_now_ns();
    int status = store_build_indexes(database, &result);
    uint64_t took_ns = core_now_ns() - started;
    if (status != FLARE_OK) {
        cli_failure("index", "%s", store_last_error(database));
        store_close(database);
        return CLI_EXIT_FAILURE;
    }
    store_close(database);
    char took[32], size_before[32], size_after[32];
    cli_format_duration(took_ns, took, sizeof(took));
    cli_format_bytes(before > 0 ? (uint64_t)before : 0, size_before, sizeof(size_before));
    long long after = file_size(dir);
    cli_format_bytes(after > 0 ? (uint64_t)after : 0, size_after, sizeof(size_after));
    printf("indexed %s: %d index%s in %s (session.db %s, was %s)\n", dir, result.indexes,
           result.indexes == 1 ? "" : "es", took, size_after, size_before);
    return CLI_EXIT_OK;
}
