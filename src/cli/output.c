/*
 * output.c: the buffered writer behind `flare export` (output.h): one
 * buffer, JSON and CSV escaping, an optional gzip stream, and -o FILE
 * written as a temporary FILE.tmp-XXXXXX beside it and renamed only once
 * complete.
 *
 * Everything is formatted into one buffer and written in large blocks:
 * hundreds of megabytes of small pieces through printf would dominate the
 * export time. With gzip on, each full buffer goes through zlib's deflate
 * (one gzip member, RFC 1952) before it reaches the file. The first write
 * error is kept and stops further writes. It must never write past its
 * buffers, never pass a byte that breaks JSON or CSV, and never leave FILE
 * half-written or FILE.tmp behind.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "cli/output.h"

#define OUTPUT_BUFFER_SIZE (256 * 1024)
/* What deflate writes into before the file: a quarter of the input buffer
 * is plenty for text that compresses 8 to 15 times. */
#define OUTPUT_GZIP_BUFFER_SIZE (64 * 1024)
/*
 * zlib's level 1..9. Measured on a 1,000,000-kernel trace (614 MB; docs/
 * PERFORMANCE.md, "Perfetto export"): level 2 compresses it 13 times for
 * the CPU time of level 1 (11.7 times); zlib's default, 6, 17.6 times but
 * for more than twice the time, which would take the gzipped export well
 * under a million events a second.
 */
#define OUTPUT_GZIP_LEVEL 2
/* windowBits 15 + 16: the largest window, with a gzip header and trailer
 * (what gunzip, Python's gzip and the Perfetto UI read) instead of zlib's. */
#define OUTPUT_GZIP_WINDOW_BITS (15 + 16)

struct cli_output {
    FILE *file;
    const char *path;              /* as given to open: NULL or "-" for standard output */
    char temporary[PATH_MAX + 16]; /* path + ".tmp-XXXXXX", or "" when writing straight to it */
    int error_number;              /* errno of the first failed write; 0 while all is well */
    int gzip;                      /* deflate is set up: bytes go through it */
    z_stream deflate;
    unsigned char *compressed; /* OUTPUT_GZIP_BUFFER_SIZE bytes, with gzip only */
    size_t used;
    char buffer[OUTPUT_BUFFER_SIZE];
};

/* ---- the file ---- */

/* An export interrupted by SIGINT, SIGTERM or SIGHUP removes its
 * temporary file before dying of the signal: a large half-written file is
 * never left behind. Only unlink, signal and raise run in the handler. */
static char cleanup_path[PATH_MAX + 16];
static volatile sig_atomic_t cleanup_armed;
static const int cleanup_signals[] = {SIGINT, SIGTERM, SIGHUP};

static void remove_temporary_and_die(int signal_number)
{
    if (cleanup_armed)
        unlink(cleanup_path);
    signal(signal_number, SIG_DFL);
    raise(signal_number);
}

static void arm_cleanup(const char *temporary)
{
    snprintf(cleanup_path, sizeof cleanup_path, "%s", temporary);
    cleanup_armed = 1;
    for (size_t i = 0; i < sizeof cleanup_signals / sizeof cleanup_signals[0]; i++)
        signal(cleanup_signals[i], remove_temporary_and_die);
}

/* After the temporary file was renamed or removed (a signal in between
 * unlinks a name that is gone: harmless). */
static void disarm_cleanup(void)
{
    for (size_t i = 0; i < sizeof cleanup_signals / sizeof cleanup_signals[0]; i++)
        signal(cleanup_signals[i], SIG_DFL);
    cleanup_armed = 0;
}

/* Opens output->file as cli_output_open describes; output->temporary is
 * left empty unless a temporary file was created. Returns 0, or -1 with a
 * message in error. */
static int output_open_file(cli_output *output, const char *path, char *error, size_t error_size)
{
    output->temporary[0] = '\0';
    if (path == NULL || strcmp(path, "-") == 0) {
        output->file = stdout;
        return 0;
    }
    struct stat info;
    if (stat(path, &info) == 0 && S_ISDIR(info.st_mode)) {
        snprintf(error, error_size, "cannot write %s: it is a directory", path);
        return -1;
    }
    if (stat(path, &info) == 0 && !S_ISREG(info.st_mode)) {
        /* A device or a pipe (/dev/stdout, a FIFO): there is no file to
         * replace whole, and a rename would put a regular file in place of
         * the device node. Write to it directly. */
        output->file = fopen(path, "w");
        if (output->file == NULL) {
            snprintf(error, error_size, "cannot write %s: %s", path, strerror(errno));
            return -1;
        }
        return 0;
    }
    char directory[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        snprintf(directory, sizeof directory, ".");
    else if (slash == path)
        snprintf(directory, sizeof directory, "/");
    else
        snprintf(directory, sizeof directory, "%.*s", (int)(slash - path), path);
    if (stat(directory, &info) != 0) {
        snprintf(error, error_size, "cannot write %s: directory %s %s", path, directory,
                 errno == ENOENT ? "does not exist" : strerror(errno));
        return -1;
    }
    if (!S_ISDIR(info.st_mode)) {
        snprintf(error, error_size, "cannot write %s: %s is not a directory", path, directory);
        return -1;
    }
    /* A fresh name made with O_EXCL (mkostemp): a file or link planted
     * under a predictable name is never written through. */
    int length = snprintf(output->temporary, sizeof output->temporary, "%s.tmp-XXXXXX", path);
    if (length < 0 || (size_t)length >= sizeof output->temporary) {
        output->temporary[0] = '\0';
        snprintf(error, error_size, "cannot write %s: path too long", path);
        return -1;
    }
    /* The cleanup signals wait until the handler knows the file's name: one
     * arriving between its creation and arm_cleanup would leave it behind. */
    sigset_t cleanup_set, previous;
    sigemptyset(&cleanup_set);
    for (size_t i = 0; i < sizeof cleanup_signals / sizeof cleanup_signals[0]; i++)
        sigaddset(&cleanup_set, cleanup_signals[i]);
    sigprocmask(SIG_BLOCK, &cleanup_set, &previous);
    int fd = mkostemp(output->temporary, O_CLOEXEC);
    if (fd < 0) {
        int error_number = errno;
        sigprocmask(SIG_SETMASK, &previous, NULL);
        snprintf(error, error_size, "cannot create a temporary file beside %s: %s", path,
                 strerror(error_number));
        output->temporary[0] = '\0';
        return -1;
    }
    /* mkostemp makes it 0600; the finished file gets what fopen would give. */
    mode_t mask = umask(0);
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0 || (output->file = fdopen(fd, "w")) == NULL) {
        snprintf(error, error_size, "cannot create %s: %s", output->temporary, strerror(errno));
        close(fd);
        unlink(output->temporary);
        output->temporary[0] = '\0';
        sigprocmask(SIG_SETMASK, &previous, NULL);
        return -1;
    }
    arm_cleanup(output->temporary);
    sigprocmask(SIG_SETMASK, &previous, NULL);
    return 0;
}

int cli_output_open(const char *path, cli_output **output, char *error, size_t error_size)
{
    *output = NULL;
    cli_output *opened = malloc(sizeof *opened);
    if (opened == NULL) {
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    if (output_open_file(opened, path, error, error_size) != 0) {
        free(opened);
        return -1;
    }
    opened->path = path;
    opened->error_number = 0;
    opened->gzip = 0;
    opened->compressed = NULL;
    opened->used = 0;
    *output = opened;
    return 0;
}

int cli_output_set_gzip(cli_output *output, char *error, size_t error_size)
{
    if (output->gzip)
        return 0;
    output->compressed = malloc(OUTPUT_GZIP_BUFFER_SIZE);
    output->deflate = (z_stream){0};
    if (output->compressed == NULL ||
        deflateInit2(&output->deflate, OUTPUT_GZIP_LEVEL, Z_DEFLATED, OUTPUT_GZIP_WINDOW_BITS, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK) {
        free(output->compressed);
        output->compressed = NULL;
        snprintf(error, error_size, "out of memory (gzip)");
        return -1;
    }
    output->gzip = 1;
    return 0;
}

int cli_output_replaces_file(const cli_output *output)
{
    return output->temporary[0] != '\0';
}

int cli_output_failed(const cli_output *output)
{
    return output->error_number != 0;
}

int cli_output_reader_gone(const cli_output *output)
{
    return output->error_number == EPIPE && output->temporary[0] == '\0';
}

/* Writes length bytes to the file as they are, keeping the first error. */
static void output_write_file(cli_output *output, const void *bytes, size_t length)
{
    if (length > 0 && output->error_number == 0 && fwrite(bytes, 1, length, output->file) != length)
        output->error_number = errno != 0 ? errno : EIO;
}

/*
 * Passes length bytes through deflate to the file; flush is Z_NO_FLUSH,
 * or Z_FINISH for the gzip trailer at the end. deflate cannot fail here
 * (its stream is set up and its buffers valid): Z_BUF_ERROR only says that
 * it needs no more room, and anything else is kept as EIO.
 */
static void output_deflate(cli_output *output, const void *bytes, size_t length, int flush)
{
    z_stream *stream = &output->deflate;
    stream->next_in = (Bytef *)(uintptr_t)bytes;
    stream->avail_in = (uInt)length;
    for (;;) {
        stream->next_out = output->compressed;
        stream->avail_out = OUTPUT_GZIP_BUFFER_SIZE;
        int status = deflate(stream, flush);
        output_write_file(output, output->compressed,
                          OUTPUT_GZIP_BUFFER_SIZE - (size_t)stream->avail_out);
        if (status == Z_STREAM_END)
            return;
        if (status != Z_OK && status != Z_BUF_ERROR) {
            if (output->error_number == 0)
                output->error_number = EIO;
            return;
        }
        /* Done when deflate had room left over and took all the input. */
        if (stream->avail_out != 0 && stream->avail_in == 0 && flush != Z_FINISH)
            return;
    }
}

/* Writes bytes on their way to the file: through deflate with gzip on. */
static void output_write(cli_output *output, const char *bytes, size_t length)
{
    if (output->error_number != 0)
        return;
    if (output->gzip)
        output_deflate(output, bytes, length, Z_NO_FLUSH);
    else
        output_write_file(output, bytes, length);
}

static void output_flush(cli_output *output)
{
    output_write(output, output->buffer, output->used);
    output->used = 0;
}

/* Flushes and closes the file and, for a temporary file, renames or removes
 * it, as cli_output_close describes; frees nothing. */
static int output_finish(cli_output *output, int succeeded, char *error, size_t error_size)
{
    const char *path = output->path;
    const char *temporary = output->temporary;
    output_flush(output);
    if (output->gzip) {
        /* The gzip trailer (length and CRC), which makes the file whole. */
        if (output->error_number == 0)
            output_deflate(output, "", 0, Z_FINISH);
        deflateEnd(&output->deflate);
        free(output->compressed);
        output->compressed = NULL;
        output->gzip = 0;
    }
    int error_number = output->error_number;
    if (error_number == 0 && fflush(output->file) != 0)
        error_number = errno;
    if (error_number == 0 && ferror(output->file))
        error_number = EIO;
    if (output->file != stdout && fclose(output->file) != 0 && error_number == 0)
        error_number = errno;
    output->file = NULL;
    if (temporary[0] == '\0') {
        if (error_number != 0)
            snprintf(error, error_size, "cannot write %s: %s",
                     path != NULL && strcmp(path, "-") != 0 ? path : "to standard output",
                     strerror(error_number));
        return error_number != 0 ? -1 : 0;
    }
    if (error_number != 0)
        snprintf(error, error_size, "cannot write %s: %s", temporary, strerror(error_number));
    if (error_number == 0 && succeeded && rename(temporary, path) != 0) {
        error_number = errno;
        snprintf(error, error_size, "cannot rename %s to %s: %s", temporary, path,
                 strerror(error_number));
    }
    if (error_number != 0 || !succeeded)
        unlink(temporary);
    disarm_cleanup();
    return error_number != 0 ? -1 : 0;
}

int cli_output_close(cli_output *output, int succeeded, char *error, size_t error_size)
{
    int result = output_finish(output, succeeded, error, error_size);
    free(output);
    return result;
}

/* ---- bytes and numbers ---- */

void cli_output_bytes(cli_output *output, const char *bytes, size_t length)
{
    if (output->used + length > sizeof output->buffer) {
        output_flush(output);
        if (length > sizeof output->buffer) {
            output_write(output, bytes, length);
            return;
        }
    }
    memcpy(output->buffer + output->used, bytes, length);
    output->used += length;
}

void cli_output_char(cli_output *output, char character)
{
    if (output->used == sizeof output->buffer)
        output_flush(output);
    output->buffer[output->used++] = character;
}

void cli_output_text(cli_output *output, const char *text)
{
    cli_output_bytes(output, text, strlen(text));
}

void cli_output_u64(cli_output *output, uint64_t value)
{
    char digits[24];
    size_t at = sizeof digits;
    do {
        digits[--at] = (char)('0' + value % 10);
        value /= 10;
    } while (value != 0);
    cli_output_bytes(output, digits + at, sizeof digits - at);
}

void cli_output_i64(cli_output *output, int64_t value)
{
    if (value < 0) {
        cli_output_char(output, '-');
        /* Negating through uint64 is defined even for INT64_MIN. */
        cli_output_u64(output, 0 - (uint64_t)value);
    } else {
        cli_output_u64(output, (uint64_t)value);
    }
}

void cli_output_number(cli_output *output, int64_t value, int is_unsigned)
{
    if (is_unsigned)
        cli_output_u64(output, (uint64_t)value);
    else
        cli_output_i64(output, value);
}

void cli_output_microseconds(cli_output *output, int64_t nanoseconds)
{
    uint64_t magnitude = nanoseconds < 0 ? 0 - (uint64_t)nanoseconds : (uint64_t)nanoseconds;
    if (nanoseconds < 0)
        cli_output_char(output, '-');
    cli_output_u64(output, magnitude / 1000);
    uint64_t fraction = magnitude % 1000;
    char decimals[4] = {'.', (char)('0' + fraction / 100), (char)('0' + fraction / 10 % 10),
                        (char)('0' + fraction % 10)};
    cli_output_bytes(output, decimals, sizeof decimals);
}

void cli_output_json_double(cli_output *output, double value)
{
    if (isnan(value) || isinf(value)) {
        cli_output_bytes(output, "null", 4);
        return;
    }
    char text[40];
    int length = 0;
    for (int precision = 15; precision <= 17; precision++) {
        length = snprintf(text, sizeof text, "%.*g", precision, value);
        if (strtod(text, NULL) == value)
            break;
    }
    cli_output_bytes(output, text, (size_t)length);
}

/* ---- text: UTF-8, JSON and CSV ---- */

/*
 * Length of the well-formed UTF-8 sequence at text (Unicode's table 3-7:
 * no overlong forms, no surrogates, nothing above U+10FFFF), or 0 if the
 * bytes there do not form one. text is NUL-terminated, and NUL is never a
 * continuation byte, so this never reads past the end.
 */
static size_t utf8_sequence_length(const unsigned char *text)
{
    unsigned char lead = text[0];
    if (lead < 0x80)
        return 1;
    /* The second byte's range depends on the lead; every later byte is a
     * plain continuation byte (0x80..0xBF). */
    size_t length;
    unsigned char low = 0x80, high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        low = lead == 0xE0 ? 0xA0 : 0x80;
        high = lead == 0xED ? 0x9F : 0xBF;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        low = lead == 0xF0 ? 0x90 : 0x80;
        high = lead == 0xF4 ? 0x8F : 0xBF;
    } else {
        return 0;
    }
    if (text[1] < low || text[1] > high)
        return 0;
    for (size_t at = 2; at < length; at++)
        if (text[at] < 0x80 || text[at] > 0xBF)
            return 0;
    return length;
}

/* Writes the character sequence at *at (a byte of 0x80 or more) if it is
 * well-formed UTF-8, else '?' for its first byte; moves *at past what it
 * used. */
static void output_utf8(cli_output *output, const unsigned char **at)
{
    size_t length = utf8_sequence_length(*at);
    if (length == 0) {
        cli_output_char(output, '?');
        (*at)++;
    } else {
        cli_output_bytes(output, (const char *)*at, length);
        *at += length;
    }
}

/* The escape of a control character (below 0x20) in a JSON string. */
static void output_json_control(cli_output *output, unsigned char byte)
{
    static const char hex[] = "0123456789abcdef";
    switch (byte) {
    case '\n':
        cli_output_bytes(output, "\\n", 2);
        break;
    case '\r':
        cli_output_bytes(output, "\\r", 2);
        break;
    case '\t':
        cli_output_bytes(output, "\\t", 2);
        break;
    default: {
        char escaped[6] = {'\\', 'u', '0', '0', hex[byte >> 4], hex[byte & 0xF]};
        cli_output_bytes(output, escaped, sizeof escaped);
        break;
    }
    }
}

void cli_output_json_string(cli_output *output, const char *text)
{
    cli_output_char(output, '"');
    cli_output_json_text(output, text);
    cli_output_char(output, '"');
}

/* Whether byte goes into a JSON string as it is; in_html also escapes the
 * characters that could end a <script> element or start markup. */
static int output_json_plain(unsigned char byte, int in_html)
{
    if (byte < 0x20 || byte >= 0x80 || byte == '"' || byte == '\\')
        return 0;
    return !in_html || (byte != '<' && byte != '>' && byte != '&');
}

static void output_json_text(cli_output *output, const char *text, int in_html)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *at = (const unsigned char *)text;
    while (*at != '\0') {
        /* Copy the longest run that needs no escaping in one go. */
        const unsigned char *run = at;
        while (output_json_plain(*at, in_html))
            at++;
        if (at > run)
            cli_output_bytes(output, (const char *)run, (size_t)(at - run));
        unsigned char byte = *at;
        if (byte == '\0')
            break;
        if (byte == '"' || byte == '\\') {
            char escaped[2] = {'\\', (char)byte};
            cli_output_bytes(output, escaped, 2);
            at++;
        } else if (byte < 0x20) {
            output_json_control(output, byte);
            at++;
        } else if (byte < 0x80) { /* <, > or & in HTML */
            char escaped[6] = {'\\', 'u', '0', '0', hex[byte >> 4], hex[byte & 0xF]};
            cli_output_bytes(output, escaped, sizeof escaped);
            at++;
        } else {
            output_utf8(output, &at);
        }
    }
}

void cli_output_json_text(cli_output *output, const char *text)
{
    output_json_text(output, text, 0);
}

void cli_output_json_text_html(cli_output *output, const char *text)
{
    output_json_text(output, text, 1);
}

/* ,"name": */
static void output_member_name(cli_output *output, const char *name)
{
    cli_output_bytes(output, ",\"", 2);
    cli_output_text(output, name);
    cli_output_bytes(output, "\":", 2);
}

void cli_output_json_member_u64(cli_output *output, const char *name, uint64_t value)
{
    output_member_name(output, name);
    cli_output_u64(output, value);
}

void cli_output_json_member_i64(cli_output *output, const char *name, int64_t value)
{
    output_member_name(output, name);
    cli_output_i64(output, value);
}

void cli_output_json_member_string(cli_output *output, const char *name, const char *text)
{
    output_member_name(output, name);
    cli_output_json_string(output, text);
}

void cli_output_csv_field(cli_output *output, const char *text)
{
    int quote = strpbrk(text, ",\"\r\n") != NULL;
    if (quote)
        cli_output_char(output, '"');
    const unsigned char *at = (const unsigned char *)text;
    while (*at != '\0') {
        if (*at == '"') {
            cli_output_bytes(output, "\"\"", 2);
            at++;
        } else if (*at < 0x80) {
            cli_output_char(output, (char)*at++);
        } else {
            output_utf8(output, &at);
        }
    }
    if (quote)
        cli_output_char(output, '"');
}
