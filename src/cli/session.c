/*
 * session.c: finding and opening a saved session for the commands that
 * read one (report, export): a session directory, or the newest session in
 * a directory of sessions, opened read-only with its summary read.
 *
 * It must never create or change anything: a missing, empty or corrupt
 * session is a clear message and exit 1, never a new database.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/session.h"
#include "core/config.h"

static int has_database(const char *dir)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/%s", dir, STORE_DATABASE_NAME);
    return access(path, F_OK) == 0;
}

/* When dir's session was last written (its database's modification time),
 * or 0 when it has none. */
static struct timespec written_at(const char *dir)
{
    char path[PATH_MAX + 32];
    struct stat info;
    snprintf(path, sizeof(path), "%s/%s", dir, STORE_DATABASE_NAME);
    if (stat(path, &info) != 0) {
        struct timespec none = {0, 0};
        return none;
    }
    return info.st_mtim;
}

static int later(struct timespec a, struct timespec b)
{
    return a.tv_sec != b.tv_sec ? a.tv_sec > b.tv_sec : a.tv_nsec > b.tv_nsec;
}

int cli_find_session(const char *argument, char *session_dir, unsigned long size, char *error,
                     unsigned long error_size)
{
    const char *dir = argument;
    if (dir == NULL) {
        dir = getenv("FLARE_OUTPUT_DIR");
        if (dir == NULL || dir[0] == '\0')
            dir = CORE_DEFAULT_OUTPUT_BASE;
    }
    struct stat status;
    if (stat(dir, &status) != 0) {
        snprintf(error, error_size, "%s: %s%s", dir, strerror(errno),
                 argument == NULL ? " (no sessions yet? run 'flare trace -- CMD' first)" : "");
        return 1;
    }
    if (!S_ISDIR(status.st_mode)) {
        snprintf(error, error_size, "%s is not a directory", dir);
        return 1;
    }
    if (has_database(dir)) {
        snprintf(session_dir, size, "%s", dir);
        return 0;
    }
    /* The newest session is the one written to last (its database's
     * modification time), whatever its name (-o names are the user's); a
     * tie goes to the greater name (default names start with the time). */
    DIR *listing = opendir(dir);
    if (listing == NULL) {
        snprintf(error, error_size, "cannot read %s: %s", dir, strerror(errno));
        return 1;
    }
    char newest[NAME_MAX + 1] = "";
    struct timespec newest_time = {0, 0};
    struct dirent *entry;
    while ((entry = readdir(listing)) != NULL) {
        if (entry->d_name[0] == '.')
            continue;
        char candidate[PATH_MAX];
        if (snprintf(candidate, sizeof(candidate), "%s/%s", dir, entry->d_name) >=
            (int)sizeof(candidate))
            continue;
        if (!has_database(candidate))
            continue;
        struct timespec written = written_at(candidate);
        if (newest[0] == '\0' || later(written, newest_time) ||
            (!later(newest_time, written) && strcmp(entry->d_name, newest) > 0)) {
            snprintf(newest, sizeof(newest), "%s", entry->d_name);
            newest_time = written;
        }
    }
    closedir(listing);
    if (newest[0] == '\0') {
        snprintf(error, error_size, "no flare session in %s (no %s in it or its subdirectories)",
                 dir, STORE_DATABASE_NAME);
        return 1;
    }
    snprintf(session_dir, size, "%s/%s", dir, newest);
    return 0;
}

int cli_session_open(cli_session *session, const char *command, const char *argument, int snapshot,
                     char *error, size_t error_size)
{
    session->database = NULL;
    session->snapshot = snapshot;
    if (cli_find_session(argument, session->directory, sizeof(session->directory), error,
                         error_size) != 0)
        return cli_failure(command, "%s", error);
    if (store_open(session->directory, STORE_OPEN_READ, &session->database, error, error_size) != 0)
        return cli_failure(command, "%s", error);
    const char *notice = store_read_notice(session->database);
    if (notice != NULL)
        fprintf(stderr, "flare %s: note: %s\n", command, notice);
    memset(&session->summary, 0, sizeof(session->summary));
    if ((snapshot && store_export_begin(session->database) != 0) ||
        store_read_session(session->database, &session->summary) != 0) {
        cli_failure(command, "cannot read the session in %s: %s", session->directory,
                    store_last_error(session->database));
        store_close(session->database);
        session->database = NULL;
        return CLI_EXIT_FAILURE;
    }
    return CLI_EXIT_OK;
}

void cli_session_close(cli_session *session)
{
    if (session->snapshot)
        store_export_end(session->database);
    store_close(session->database);
    session->database = NULL;
}
