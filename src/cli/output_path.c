/*
 * output_path.c: expanding `-o` templates (output_path.h).
 *
 * Must never: write past out[size), accept an expansion that could step
 * out of the directory (empty, '/', ".", ".."), or read anything but the
 * environment and the host name.
 */
#include "cli/output_path.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "session/placement.h"

/* Whether an expansion may stand in a path component. */
static int safe_part(const char *value)
{
    return value != NULL && value[0] != '\0' && strchr(value, '/') == NULL &&
           strcmp(value, ".") != 0 && strcmp(value, "..") != 0;
}

/* The value of the placeholder at *cursor (just after the '%'), which it
 * moves past. NULL with why on a refusal; value points into buffer or the
 * environment. */
static const char *placeholder(const char **cursor, char *buffer, size_t buffer_size, char *why,
                               size_t why_size)
{
    const char *at = *cursor;
    char kind = *at;
    *cursor = at + (kind != '\0');
    switch (kind) {
    case '%':
        return "%";
    case 'h':
        if (gethostname(buffer, buffer_size - 1) != 0 || buffer[0] == '\0') {
            snprintf(why, why_size, "%%h: the host name is unknown");
            return NULL;
        }
        buffer[buffer_size - 1] = '\0';
        return buffer;
    case 'p':
        snprintf(buffer, buffer_size, "%ld", (long)getpid());
        return buffer;
    case 'r': {
        const char *rank = session_rank_text();
        if (rank == NULL)
            snprintf(why, why_size,
                     "%%r: no rank in the environment (" SESSION_RANK_VARIABLES " is not set); "
                     "run flare trace once per rank (srun, mpirun) or use %%p");
        return rank;
    }
    case 'q': {
        const char *close = at[1] == '{' ? strchr(at + 2, '}') : NULL;
        if (close == NULL || close == at + 2 || (size_t)(close - at - 2) >= buffer_size) {
            snprintf(why, why_size, "%%q needs a variable name in braces, e.g. %%q{SLURM_JOB_ID}");
            return NULL;
        }
        snprintf(buffer, buffer_size, "%.*s", (int)(close - at - 2), at + 2);
        *cursor = close + 1;
        const char *value = getenv(buffer);
        if (value == NULL || value[0] == '\0')
            snprintf(why, why_size, "%%q{%s}: %s is not set or empty", buffer, buffer);
        return value != NULL && value[0] != '\0' ? value : NULL;
    }
    default:
        snprintf(why, why_size,
                 "unknown placeholder '%%%c': use %%h (host), %%p (pid), %%r (rank), %%q{VAR} or "
                 "%%%% (a percent sign)",
                 kind != '\0' ? kind : ' ');
        return NULL;
    }
}

int cli_output_expand(const char *template_text, char *out, size_t size, char *why, size_t why_size)
{
    size_t used = 0;
    for (const char *cursor = template_text; *cursor != '\0';) {
        char buffer[256];
        const char *piece = cursor;
        size_t length = 1;
        if (*cursor == '%') {
            const char *name = ++cursor;
            piece = placeholder(&cursor, buffer, sizeof(buffer), why, why_size);
            if (piece == NULL)
                return -1;
            if (*name != '%' && !safe_part(piece)) {
                snprintf(why, why_size,
                         "%%%c expands to '%.64s', which cannot stand in a path (a '/', '.' or "
                         "'..' would leave the directory)",
                         *name, piece);
                return -1;
            }
            length = strlen(piece);
        } else {
            cursor++;
        }
        if (used + length >= size) {
            snprintf(why, why_size, "the expanded path is longer than %zu bytes", size - 1);
            return -1;
        }
        memcpy(out + used, piece, length);
        used += length;
    }
    out[used] = '\0';
    return 0;
}
