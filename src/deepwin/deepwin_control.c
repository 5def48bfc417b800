/*
 * deepwin_control.c: the control directory's protocol (deepwin_control.h):
 * request names, the request text, the writer's atomic write and the
 * reader's safe opens.
 *
 * Shared by `flare window open` (which writes) and every process of a
 * session (deepwin_watch.c, which reads), so the two sides cannot drift
 * apart. It must never follow a link inside the session directory, read past
 * its spans or buffers, allocate, or keep state.
 */
#include "deepwin/deepwin_control.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "deepwin/deepwin.h"
#include "flare/flare.h"

#define NAME_PREFIX     "window-"
#define NAME_SUFFIX     ".req"
#define TEMPORARY_FIRST ".window-"
#define PID_MAX         2147483647ll

/* Plain decimal text[0..length) into *out, at most maximum: digits only, no
 * sign, no leading zero (but "0"). 0, or -1. */
static int parse_decimal(const char *text, size_t length, uint64_t maximum, uint64_t *out)
{
    if (length == 0 || length > 20 || (length > 1 && text[0] == '0'))
        return -1;
    uint64_t value = 0;
    for (size_t i = 0; i < length; i++) {
        if (text[i] < '0' || text[i] > '9')
            return -1;
        uint64_t digit = (uint64_t)(text[i] - '0');
        if (value > (maximum - digit) / 10)
            return -1;
        value = value * 10 + digit;
    }
    *out = value;
    return 0;
}

int deepwin_control_parse_name(const char *name, int64_t *requested_unix_ns, int64_t *pid)
{
    size_t length = strlen(name);
    size_t prefix = sizeof(NAME_PREFIX) - 1, suffix = sizeof(NAME_SUFFIX) - 1;
    if (length <= prefix + suffix || strncmp(name, NAME_PREFIX, prefix) != 0 ||
        strcmp(name + length - suffix, NAME_SUFFIX) != 0)
        return -1;
    const char *numbers = name + prefix;
    size_t numbers_length = length - prefix - suffix;
    const char *dash = memchr(numbers, '-', numbers_length);
    if (dash == NULL)
        return -1;
    uint64_t time_value, pid_value;
    size_t time_length = (size_t)(dash - numbers);
    if (parse_decimal(numbers, time_length, INT64_MAX, &time_value) != 0 || time_value == 0 ||
        parse_decimal(dash + 1, numbers_length - time_length - 1, PID_MAX, &pid_value) != 0 ||
        pid_value == 0)
        return -1;
    *requested_unix_ns = (int64_t)time_value;
    *pid = (int64_t)pid_value;
    return 0;
}

void deepwin_control_format_name(const deepwin_control_request *request, char *name, size_t size)
{
    snprintf(name, size, NAME_PREFIX "%lld-%lld" NAME_SUFFIX, (long long)request->requested_unix_ns,
             (long long)request->requested_by);
}

int deepwin_control_format_request(const deepwin_control_request *request, char *buffer,
                                   size_t size)
{
    return snprintf(buffer, size, "version=1\nat_unix_ns=%lld\nfor_ns=%llu\nrequested_by=%lld\n",
                    (long long)request->at_unix_ns, (unsigned long long)request->for_ns,
                    (long long)request->requested_by);
}

/* The keys a request must have, with their bounds. */
enum { KEY_VERSION, KEY_AT, KEY_FOR, KEY_BY, KEY_COUNT };
static const struct request_key {
    const char *name;
    uint64_t minimum, maximum;
    const char *range; /* for messages */
} request_keys[KEY_COUNT] = {
    [KEY_VERSION] = {"version", 1, 1, "1 (the only version)"},
    [KEY_AT] = {"at_unix_ns", 1, INT64_MAX, "Unix nanoseconds, more than 0"},
    [KEY_FOR] = {"for_ns", 1, DEEPWIN_DURATION_MAX_NS, "1..600000000000 (1ns..600s)"},
    [KEY_BY] = {"requested_by", 1, PID_MAX, "a pid, 1..2147483647"},
};

/* One "key=value" line (without its newline) into values[]/seen[]. 0, or -1
 * with why in error. Unknown keys are skipped. */
static int parse_line(const char *line, size_t length, unsigned number, uint64_t *values, int *seen,
                      char *error, size_t error_size)
{
    const char *equals = memchr(line, '=', length);
    if (equals == NULL) {
        snprintf(error, error_size, "line %u: '%.40s' is not key=value", number, line);
        return -1;
    }
    size_t key_length = (size_t)(equals - line);
    for (int key = 0; key < KEY_COUNT; key++) {
        const struct request_key *spec = &request_keys[key];
        if (strlen(spec->name) != key_length || strncmp(line, spec->name, key_length) != 0)
            continue;
        if (seen[key]) {
            snprintf(error, error_size, "line %u: %s given twice", number, spec->name);
            return -1;
        }
        uint64_t value;
        if (parse_decimal(equals + 1, length - key_length - 1, UINT64_MAX, &value) != 0 ||
            value < spec->minimum || value > spec->maximum) {
            snprintf(error, error_size, "line %u: %.*s: expected %s", number,
                     (int)(length < 60 ? length : 60), line, spec->range);
            return -1;
        }
        values[key] = value;
        seen[key] = 1;
        return 0;
    }
    return 0; /* a key of a later version */
}

int deepwin_control_parse_request(const char *text, size_t length, deepwin_control_request *out,
                                  char *error, size_t error_size)
{
    if (error_size > 0)
        error[0] = '\0';
    if (length > DEEPWIN_CONTROL_REQUEST_MAX) {
        snprintf(error, error_size, "%zu bytes: a request is at most %d", length,
                 DEEPWIN_CONTROL_REQUEST_MAX);
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    uint64_t values[KEY_COUNT] = {0};
    int seen[KEY_COUNT] = {0};
    char line[DEEPWIN_CONTROL_REQUEST_MAX + 1];
    unsigned number = 0;
    size_t start = 0;
    while (start < length) {
        const char *newline = memchr(text + start, '\n', length - start);
        size_t end = newline != NULL ? (size_t)(newline - text) : length;
        size_t line_length = end - start;
        number++;
        memcpy(line, text + start, line_length);
        line[line_length] = '\0';
        if (memchr(line, '\0', line_length) != NULL || memchr(line, '\r', line_length) != NULL) {
            snprintf(error, error_size, "line %u holds a NUL or a carriage return", number);
            return FLARE_ERR_INVALID_ARGUMENT;
        }
        if (line_length > 0 &&
            parse_line(line, line_length, number, values, seen, error, error_size) != 0)
            return FLARE_ERR_INVALID_ARGUMENT;
        start = end + 1;
    }
    for (int key = 0; key < KEY_COUNT; key++) {
        if (!seen[key]) {
            snprintf(error, error_size, "no %s line", request_keys[key].name);
            return FLARE_ERR_INVALID_ARGUMENT;
        }
    }
    out->at_unix_ns = (int64_t)values[KEY_AT];
    out->for_ns = values[KEY_FOR];
    out->requested_by = (int64_t)values[KEY_BY];
    return FLARE_OK;
}

/* ---- the writer ---- */

/* Writes all of text to fd. 0, or -1 with errno set. */
static int write_all(int fd, const char *text, size_t length)
{
    while (length > 0) {
        ssize_t written = write(fd, text, length);
        if (written < 0 && errno == EINTR)
            continue;
        if (written <= 0) {
            if (written == 0)
                errno = EIO;
            return -1;
        }
        text += written;
        length -= (size_t)written;
    }
    return 0;
}

/* Opens session_dir/control, making it (0700) if missing; never through a
 * link. A descriptor, or -1 with the status in *status and why in error. */
static int open_control_for_writing(const char *session_dir, int *status, char *error,
                                    size_t error_size)
{
    int session_fd = open(session_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (session_fd < 0) {
        snprintf(error, error_size, "cannot open %s: %s", session_dir, strerror(errno));
        *status = FLARE_ERR_IO;
        return -1;
    }
    if (mkdirat(session_fd, DEEPWIN_CONTROL_DIR, 0700) != 0 && errno != EEXIST) {
        snprintf(error, error_size, "cannot make %s/%s: %s", session_dir, DEEPWIN_CONTROL_DIR,
                 strerror(errno));
        close(session_fd);
        *status = FLARE_ERR_IO;
        return -1;
    }
    int control_fd = deepwin_control_open_dir(session_fd);
    int saved = errno;
    close(session_fd);
    if (control_fd < 0) {
        int planted = saved == ELOOP || saved == ENOTDIR;
        snprintf(error, error_size, "%s/%s: %s", session_dir, DEEPWIN_CONTROL_DIR,
                 planted ? "a link or a file stands there, not a directory: refusing to write "
                           "through it"
                         : strerror(saved));
        *status = planted ? FLARE_ERR_STATE : FLARE_ERR_IO;
        return -1;
    }
    return control_fd;
}

/* Writes text into a fresh temporary file named temporary in control_fd.
 * 0, or -1 with why in error (the file is removed). */
static int write_temporary(int control_fd, const char *temporary, const char *text, size_t length,
                           const char *where, char *error, size_t error_size)
{
    int fd =
        openat(control_fd, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(error, error_size, "cannot create %s/%s: %s", where, temporary, strerror(errno));
        return -1;
    }
    int failed = write_all(fd, text, length) != 0;
    int saved = errno;
    if (close(fd) != 0 && !failed) {
        failed = 1;
        saved = errno;
    }
    if (failed) {
        unlinkat(control_fd, temporary, 0);
        snprintf(error, error_size, "cannot write %s/%s: %s", where, temporary, strerror(saved));
        return -1;
    }
    return 0;
}

int deepwin_control_write(const char *session_dir, const deepwin_control_request *request,
                          char *name, size_t name_size, char *error, size_t error_size)
{
    int status = FLARE_OK;
    int control_fd = open_control_for_writing(session_dir, &status, error, error_size);
    if (control_fd < 0)
        return status;
    char final_name[DEEPWIN_CONTROL_NAME_MAX], temporary[DEEPWIN_CONTROL_NAME_MAX + 8];
    char text[256], where[4200];
    deepwin_control_format_name(request, final_name, sizeof(final_name));
    snprintf(temporary, sizeof(temporary), TEMPORARY_FIRST "%lld-%lld.tmp",
             (long long)request->requested_unix_ns, (long long)request->requested_by);
    snprintf(where, sizeof(where), "%s/%s", session_dir, DEEPWIN_CONTROL_DIR);
    int length = deepwin_control_format_request(request, text, sizeof(text));
    if (write_temporary(control_fd, temporary, text, (size_t)length, where, error, error_size) !=
        0) {
        close(control_fd);
        return FLARE_ERR_IO;
    }
    /* Never over an existing request: two requests of one name would be
     * one too many to lose silently. */
    int renamed = renameat2(control_fd, temporary, control_fd, final_name, RENAME_NOREPLACE);
    if (renamed != 0 && (errno == EINVAL || errno == ENOSYS)) {
        /* A file system without RENAME_NOREPLACE: a link fails on an
         * existing name just the same. */
        renamed = linkat(control_fd, temporary, control_fd, final_name, 0);
    }
    int saved = errno;
    unlinkat(control_fd, temporary, 0); /* gone once renamed; the link's source otherwise */
    close(control_fd);
    if (renamed != 0) {
        snprintf(error, error_size, "cannot place %s/%s: %s", where, final_name,
                 saved == EEXIST ? "a request of that name exists already" : strerror(saved));
        return saved == EEXIST ? FLARE_ERR_STATE : FLARE_ERR_IO;
    }
    if (name != NULL)
        snprintf(name, name_size, "%s", final_name);
    return FLARE_OK;
}

/* ---- the reader ---- */

int deepwin_control_open_dir(int session_fd)
{
    return openat(session_fd, DEEPWIN_CONTROL_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

int deepwin_control_read(int control_fd, const char *name, char *buffer, size_t size,
                         size_t *length, char *error, size_t error_size)
{
    *length = 0;
    int fd = openat(control_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(error, error_size, "cannot open it: %s",
                 errno == ELOOP ? "it is a link" : strerror(errno));
        return FLARE_ERR_IO;
    }
    struct stat info;
    const char *why = NULL;
    if (fstat(fd, &info) != 0)
        why = strerror(errno);
    else if (!S_ISREG(info.st_mode))
        why = "not a regular file";
    else if (info.st_size > DEEPWIN_CONTROL_REQUEST_MAX)
        why = "longer than a request can be";
    if (why != NULL) {
        snprintf(error, error_size, "%s", why);
        close(fd);
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    size_t wanted = size - 1 < DEEPWIN_CONTROL_REQUEST_MAX ? size - 1 : DEEPWIN_CONTROL_REQUEST_MAX;
    size_t got = 0;
    while (got < wanted) {
        ssize_t count = read(fd, buffer + got, wanted - got);
        if (count < 0 && errno == EINTR)
            continue;
        if (count < 0) {
            snprintf(error, error_size, "cannot read it: %s", strerror(errno));
            close(fd);
            return FLARE_ERR_IO;
        }
        if (count == 0)
            break;
        got += (size_t)count;
    }
    close(fd);
    buffer[got] = '\0';
    *length = got;
    return FLARE_OK;
}

void deepwin_control_format_time(int64_t unix_ns, int time_of_day, char *buffer, size_t size)
{
    int64_t seconds = unix_ns / 1000000000ll;
    int64_t rest = unix_ns % 1000000000ll;
    if (rest < 0) {
        rest += 1000000000ll;
        seconds--;
    }
    time_t whole = (time_t)seconds;
    struct tm parts;
    if (gmtime_r(&whole, &parts) == NULL) {
        snprintf(buffer, size, "%lld ns", (long long)unix_ns);
        return;
    }
    if (time_of_day)
        snprintf(buffer, size, "%02d:%02d:%02d.%03dZ", parts.tm_hour, parts.tm_min, parts.tm_sec,
                 (int)(rest / 1000000));
    else
        snprintf(buffer, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900,
                 parts.tm_mon + 1, parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec,
                 (int)(rest / 1000000));
}
