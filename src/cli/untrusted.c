/*
 * untrusted.c: text from a session database, made safe for a terminal.
 *
 * A session database may come from anyone, and its kernel, scope and rule
 * names are the program's: an escape sequence in one could drive the
 * terminal `flare report` prints to (move the cursor, rewrite the title,
 * hide lines). Every control character (C0 but newline and tab, DEL, and
 * the C1 range as UTF-8 encodes it) becomes '?', as ls -q does; column
 * widths stay as they were. Must never change anything else: valid UTF-8
 * text passes byte for byte.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

/* Whether text[at] starts a control character, and how many bytes it
 * spans (C1 is two bytes in UTF-8: 0xC2 0x80..0x9F). */
static size_t control_length(const unsigned char *text, size_t at, size_t length, int keep_newline)
{
    unsigned char byte = text[at];
    if ((byte < 0x20 && !(keep_newline && (byte == '\n' || byte == '\t'))) || byte == 0x7f)
        return 1;
    if (byte == 0xc2 && at + 1 < length && text[at + 1] >= 0x80 && text[at + 1] <= 0x9f)
        return 2;
    return 0;
}

void cli_format_untrusted(char *buffer, size_t size, const char *text)
{
    if (size == 0)
        return;
    const unsigned char *bytes = (const unsigned char *)(text != NULL ? text : "");
    size_t length = strlen((const char *)bytes), used = 0;
    for (size_t at = 0; at < length && used + 1 < size;) {
        size_t control = control_length(bytes, at, length, 0);
        buffer[used++] = control != 0 ? '?' : (char)bytes[at];
        at += control != 0 ? control : 1;
    }
    buffer[used] = '\0';
}

/* ---- stdout through the filter ---- */

static FILE *real_stdout;
static int pending_c2; /* a 0xC2 ended the last write: its next byte decides */

/* Writes data[start, end) as it is: runs of clean bytes go out whole. */
static void pass_run(const char *data, size_t start, size_t end)
{
    if (end > start)
        fwrite(data + start, 1, end - start, real_stdout);
}

static ssize_t filter_write(void *cookie, const char *data, size_t size)
{
    (void)cookie;
    const unsigned char *bytes = (const unsigned char *)data;
    size_t run = 0; /* start of the clean run not yet written */
    for (size_t at = 0; at < size; at++) {
        unsigned char byte = bytes[at];
        if (pending_c2) {
            /* A 0xC2 ended the previous write: this byte decides. */
            pending_c2 = 0;
            fputc(byte >= 0x80 && byte <= 0x9f ? '?' : 0xc2, real_stdout);
            if (byte >= 0x80 && byte <= 0x9f) {
                run = at + 1;
                continue;
            }
        }
        if (byte == 0xc2 && at + 1 == size) {
            pass_run(data, run, at);
            pending_c2 = 1;
            run = size;
            break;
        }
        size_t control = control_length(bytes, at, size, 1);
        if (control != 0) {
            pass_run(data, run, at);
            fputc('?', real_stdout);
            at += control - 1;
            run = at + 1;
        }
    }
    pass_run(data, run, size);
    if (ferror(real_stdout))
        return -1;
    return (ssize_t)size;
}

static int filter_close(void *cookie)
{
    (void)cookie;
    if (pending_c2)
        fputc(0xc2, real_stdout);
    pending_c2 = 0;
    return fflush(real_stdout);
}

void cli_untrusted_stdout_begin(void)
{
    if (real_stdout != NULL)
        return;
    cookie_io_functions_t functions = {.write = filter_write, .close = filter_close};
    FILE *filtered = fopencookie(NULL, "w", functions);
    if (filtered == NULL)
        return; /* unfiltered rather than silent */
    /* Line by line, as a terminal's stdout is, so nothing printed here
     * waits behind the output of a program run meanwhile. */
    setvbuf(filtered, NULL, _IOLBF, 0);
    fflush(stdout);
    real_stdout = stdout;
    stdout = filtered;
}

int cli_untrusted_stdout_end(void)
{
    if (real_stdout == NULL)
        return 0;
    FILE *filtered = stdout;
    stdout = real_stdout;
    real_stdout = NULL;
    return fclose(filtered);
}
