/*
 * store_files.h: the files of a session directory, made safely.
 *
 * Claiming a directory creates session.db (empty) and flare.log with
 * O_EXCL and O_NOFOLLOW, so that of several launchers given one directory
 * exactly one wins (a check for an existing session and its creation apart
 * would let two in), and a link planted in the directory can never send the
 * database or the log somewhere else.
 *
 * A disk reserve is a small file each writer of a session holds from its
 * start and deletes just before its last transaction, so that on a full
 * disk the session's end and its drop counts (how much was lost) can still
 * be written: lost data must never be hidden by the disk that lost it.
 */
#ifndef FLARE_STORE_STORE_FILES_H
#define FLARE_STORE_STORE_FILES_H

#include <stddef.h>
#include <stdint.h>

#define STORE_LOG_NAME "flare.log"
/* A process's reserve: big enough for its last transaction (its drops,
 * capabilities, open scopes and end: some tens of 4 KiB pages of
 * write-ahead log), small beside any real disk. The launcher's is for the
 * session's end alone (a page or two). */
#define STORE_RESERVE_PROCESS_BYTES  (128u * 1024u)
#define STORE_RESERVE_LAUNCHER_BYTES (32u * 1024u)
#define STORE_RESERVE_PREFIX         ".flare-reserve-"

/* Claims dir (which must exist) for a new session: creates session.db and
 * flare.log there exclusively, without following links. 0, or
 * FLARE_ERR_STATE when dir already holds a session (or any of its files,
 * links included), FLARE_ERR_IO otherwise, with error naming the file. */
int store_claim_directory(const char *dir, char *error, size_t error_size);

/* Opens flare.log in dir for appending, never through a link. An fd or -1
 * (errno set). */
int store_open_log(const char *dir);

/* Creates this process's reserve in dir (STORE_RESERVE_PREFIX<pid>, bytes
 * allocated). 0, or -1 with error saying why (a disk already full): the
 * session runs without one. */
int store_reserve_create(const char *dir, int64_t pid, uint32_t bytes, char *error,
                         size_t error_size);
/* Deletes this process's reserve (none: nothing). */
void store_reserve_release(const char *dir, int64_t pid);
/* Deletes every reserve left in dir (by killed processes): the launcher,
 * once the session is over. */
void store_reserve_release_all(const char *dir);

#endif /* FLARE_STORE_STORE_FILES_H */
