/*
 * session.h: a saved session opened for reading, by the commands that read
 * one (report, export). cli_find_session says which directory;
 * cli_session_open opens it read-only and reads its summary.
 *
 * It must never create or change a session: the store is opened read-only.
 */
#ifndef FLARE_CLI_SESSION_H
#define FLARE_CLI_SESSION_H

#include <limits.h>
#include <stddef.h>

#include "store/store.h"
#include "store/store_export.h"

/* Resolves a report/export argument (NULL: the default output directory) to
 * one session directory holding session.db: the directory itself, or the
 * newest session inside it. Returns 0, or 1 with a message in error. */
int cli_find_session(const char *argument, char *session_dir, unsigned long size, char *error,
                     unsigned long error_size);

typedef struct cli_session {
    char directory[PATH_MAX]; /* as found by cli_find_session */
    store *database;          /* open read-only */
    store_session_summary summary;
    int snapshot; /* one read transaction from open to close (store_export_begin) */
} cli_session;

/*
 * Finds the session argument names (NULL: the default output directory;
 * cli_find_session), opens it read-only and reads its summary, inside one
 * read snapshot that lasts until cli_session_close when snapshot is set,
 * so that a session still being written reads consistently (its counts
 * match its rows). error (error_size bytes) is room for the messages.
 * Returns CLI_EXIT_OK, or CLI_EXIT_FAILURE with the reason printed as
 * "flare COMMAND: ..." and nothing left open.
 */
int cli_session_open(cli_session *session, const char *command, const char *argument, int snapshot,
                     char *error, size_t error_size);

/* Ends the snapshot, if any, and closes the store. */
void cli_session_close(cli_session *session);

#endif /* FLARE_CLI_SESSION_H */
