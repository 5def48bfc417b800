/*
 * deepwin_control.h: the control directory of a session, through which
 * `flare window open` asks every process of a running session for a
 * deep-profiling window, without any network listener.
 *
 * The protocol, written once here for both sides (docs/cli.md, "flare
 * window"): a request is one small file DIR/control/window-<ns>-<pid>.req,
 * where <ns> is the wall-clock time (Unix nanoseconds) it was made and <pid>
 * the process that made it. It holds key=value lines:
 *
 *     version=1
 *     at_unix_ns=1796185800250000000   (when the window opens, wall clock)
 *     for_ns=300000000                 (how long it stays open)
 *     requested_by=4242                (the pid of flare window)
 *
 * The writer (the CLI) makes DIR/control (0700) if it is missing, writes a
 * temporary .window-<ns>-<pid>.tmp with O_CREAT|O_EXCL|O_NOFOLLOW and renames
 * it to its final name, so a reader sees a whole request or none. Neither
 * side ever follows a link planted in the session directory: the control
 * directory and every file in it are opened relative to a directory
 * descriptor with O_NOFOLLOW. Requests are never deleted: every process of
 * the session reads the same files, and they stay as a record.
 *
 * Must never: read past a span or a buffer, follow a link inside the session
 * directory, leave a temporary file behind on a failure it can see, allocate,
 * or keep state. Nothing here reads a clock (times come in).
 */
#ifndef FLARE_DEEPWIN_DEEPWIN_CONTROL_H
#define FLARE_DEEPWIN_DEEPWIN_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#define DEEPWIN_CONTROL_DIR "control"
/* The longest request file anyone reads; a longer one is malformed. */
#define DEEPWIN_CONTROL_REQUEST_MAX 1024
/* Room for a request's file name, "window-<20 digits>-<20 digits>.req". */
#define DEEPWIN_CONTROL_NAME_MAX 64
/* Room for a time written by deepwin_control_format_time. */
#define DEEPWIN_CONTROL_TIME_MAX 40

/* One request, as written in its file and its name. */
typedef struct deepwin_control_request {
    int64_t requested_unix_ns; /* when it was made (its name) */
    int64_t requested_by;      /* the pid that made it (its name and its text) */
    int64_t at_unix_ns;        /* when the window opens, Unix nanoseconds */
    uint64_t for_ns;           /* how long it stays open, 1 ns..DEEPWIN_DURATION_MAX_NS */
} deepwin_control_request;

/*
 * Reads a request's file name, "window-<ns>-<pid>.req" (decimal, no sign, no
 * leading zero, ns > 0, pid in 1..2^31-1), into its two numbers. 0, or -1 for
 * any other name (temporary files, stray files): those are not requests.
 */
int deepwin_control_parse_name(const char *name, int64_t *requested_unix_ns, int64_t *pid);

/* Writes request's file name into name (DEEPWIN_CONTROL_NAME_MAX bytes do). */
void deepwin_control_format_name(const deepwin_control_request *request, char *name, size_t size);

/*
 * Parses a request file's text[0..length) into out: lines "key=value" (the
 * last one may lack its newline; empty lines are skipped), values plain
 * decimal numbers. version must be 1; at_unix_ns, for_ns and requested_by
 * are required, each at most once; unknown keys are ignored, so a later
 * version can add some. out->requested_unix_ns is left as it was (it comes
 * from the name). FLARE_OK, or FLARE_ERR_INVALID_ARGUMENT with why in error
 * ("line 3: for_ns=0: must be 1ns..600s") and *out untouched.
 */
int deepwin_control_parse_request(const char *text, size_t length, deepwin_control_request *out,
                                  char *error, size_t error_size);

/* Writes request's text into buffer; returns its length (as snprintf). */
int deepwin_control_format_request(const deepwin_control_request *request, char *buffer,
                                   size_t size);

/*
 * The writer's side: makes session_dir/control (0700) if missing and writes
 * request into it atomically, as described above, under the name
 * deepwin_control_format_name gives (copied into name, name_size bytes, may
 * be NULL). FLARE_OK; FLARE_ERR_STATE when control is a link or not a
 * directory, or the final name exists already; FLARE_ERR_IO otherwise
 * (session_dir unreadable, a full disk, no permission). error says which
 * file and why. Nothing is left behind on a failure.
 */
int deepwin_control_write(const char *session_dir, const deepwin_control_request *request,
                          char *name, size_t name_size, char *error, size_t error_size);

/*
 * The reader's side: opens the control directory of the session directory
 * open as session_fd, never through a link. A descriptor (O_CLOEXEC), or -1
 * with errno set (ENOENT: no request was ever made; ELOOP or ENOTDIR: a link
 * or a file stands there).
 */
int deepwin_control_open_dir(int session_fd);

/*
 * Reads the request file name in the control directory control_fd into
 * buffer (size bytes; at most DEEPWIN_CONTROL_REQUEST_MAX are ever read),
 * never through a link, never blocking on a FIFO. Its length in *length.
 * FLARE_OK, or FLARE_ERR_IO / FLARE_ERR_INVALID_ARGUMENT (not a regular
 * file, too long) with why in error.
 */
int deepwin_control_read(int control_fd, const char *name, char *buffer, size_t size,
                         size_t *length, char *error, size_t error_size);

/*
 * Writes unix_ns as an RFC 3339 time in UTC with milliseconds,
 * "2026-12-02T04:30:00.250Z" (truncated, never rounded up). With
 * time_of_day set, only "04:30:00.250Z". Can't fail; truncates like
 * snprintf.
 */
void deepwin_control_format_time(int64_t unix_ns, int time_of_day, char *buffer, size_t size);

#endif /* FLARE_DEEPWIN_DEEPWIN_CONTROL_H */
