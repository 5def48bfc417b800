/*
 * output.h: the writer `flare export` streams every format through: one
 * large buffer in front of a FILE (optionally through gzip), the escaping
 * of JSON strings and CSV fields, exact decimal numbers, and the
 * all-or-nothing write of -o FILE
 * (written as a fresh FILE.tmp-XXXXXX, renamed over FILE only when the export
 * succeeded; removed on failure or SIGINT/SIGTERM/SIGHUP).
 *
 * It knows nothing of sessions or formats. It must never emit text that
 * breaks JSON or CSV (every string goes through cli_output_json_string or
 * cli_output_csv_field, and bytes that are not valid UTF-8 become '?'),
 * never grow past its one fixed buffer, and never leave a half-written
 * FILE: a failed or unfinished export removes its temporary file and leaves FILE as
 * it was.
 *
 * Writing never fails on the spot: the first write error is kept, every
 * later write is skipped, and cli_output_failed and cli_output_close say
 * so. The writers therefore return nothing; a long walk checks
 * cli_output_failed now and then to stop early.
 */
#ifndef FLARE_CLI_OUTPUT_H
#define FLARE_CLI_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

typedef struct cli_output cli_output;

/*
 * Opens where an export goes: standard output when path is NULL or "-";
 * path itself when it is a device or a pipe (nothing to replace whole
 * there); otherwise path + ".tmp", after checking that path's directory
 * exists (it is never created: a typo in -o should fail, not make
 * directories) and that path is not a directory. path must stay valid
 * until cli_output_close. Returns 0 with *output set, or -1 with a message
 * in error ("out of memory", "cannot write PATH: ..."); nothing is created
 * on failure.
 */
int cli_output_open(const char *path, cli_output **output, char *error, size_t error_size);

/*
 * Compresses everything written from now on as one gzip stream (zlib's
 * deflate with a gzip header, RFC 1952; gunzip and Python's gzip read it),
 * finished by cli_output_close. Call it right after cli_output_open, before
 * the first write. Returns 0, or -1 with "out of memory (gzip)" in error
 * (the output is then unchanged and still usable uncompressed).
 */
int cli_output_set_gzip(cli_output *output, char *error, size_t error_size);

/* Whether the output goes to a temporary file renamed over path at the end
 * (so a failed export writes no file at all). */
int cli_output_replaces_file(const cli_output *output);

/* Whether a write has failed; nothing more is written once one has. */
int cli_output_failed(const cli_output *output);
/* Whether the failure is only that the pipe's reader went away (`flare
 * export | head`): the caller stops quietly. SIGPIPE must be ignored for
 * the write to fail with EPIPE instead of killing the process. */
int cli_output_reader_gone(const cli_output *output);

/*
 * Finishes and frees output: writes what is buffered, closes the file (not
 * standard output) and, when succeeded is set and there is a temporary
 * file, renames it over path. On any failure, or when succeeded is 0, the
 * temporary file is removed, so path is either the whole export or
 * untouched. Returns 0, or -1 with a message in error (a write, close or
 * rename error, naming the file).
 */
int cli_output_close(cli_output *output, int succeeded, char *error, size_t error_size);

/* Raw bytes and text, written as they are: the caller vouches that they
 * are valid in the format (punctuation, keys, numbers). */
void cli_output_bytes(cli_output *output, const char *bytes, size_t length);
void cli_output_char(cli_output *output, char character);
void cli_output_text(cli_output *output, const char *text);
/* A string literal, its length known at compile time (no strlen): for the
 * punctuation and keys of hot paths. */
#define CLI_OUTPUT_LITERAL(output, literal)                                                        \
    cli_output_bytes((output), "" literal, sizeof(literal) - 1)

/* Numbers in decimal: value as unsigned or signed, or value (an int64
 * holding a uint64 bit pattern when is_unsigned is set) as either. */
void cli_output_u64(cli_output *output, uint64_t value);
void cli_output_i64(cli_output *output, int64_t value);
void cli_output_number(cli_output *output, int64_t value, int is_unsigned);

/* Nanoseconds as microseconds with exactly three decimals, the unit of the
 * trace-event format: 1234567 -> 1234.567, -5 -> -0.005. Exact, unlike a
 * division in floating point. */
void cli_output_microseconds(cli_output *output, int64_t nanoseconds);

/* A double as a JSON number that reads back as the same double (the
 * shortest of %.15g, %.16g, %.17g that does), or null for a NaN or an
 * infinity, which JSON cannot write. */
void cli_output_json_double(cli_output *output, double value);

/* A JSON string literal, quotes included: '"' and '\' escaped, control
 * characters as \n, \r, \t or \u00XX, invalid UTF-8 as '?'. */
void cli_output_json_string(cli_output *output, const char *text);
/* The same without the quotes: text's characters escaped, for a string
 * written in pieces ("pm " then a metric's name). */
void cli_output_json_text(cli_output *output, const char *text);
/* As cli_output_json_text, for JSON inside an HTML <script> element: '<',
 * '>' and '&' are written as \u003c, \u003e and \u0026 too, so no name can
 * close the element or open a comment. */
void cli_output_json_text_html(cli_output *output, const char *text);

/* A member of a JSON object after its first: ,"name":value. name is
 * written as it is: a plain key, which the caller vouches for. */
void cli_output_json_member_u64(cli_output *output, const char *name, uint64_t value);
void cli_output_json_member_i64(cli_output *output, const char *name, int64_t value);
void cli_output_json_member_string(cli_output *output, const char *name, const char *text);

/* A CSV field (RFC 4180): quoted, with quotes doubled, when it holds a
 * comma, a quote or a line break; as is otherwise. Invalid UTF-8 becomes
 * '?' here too, so that the file is valid UTF-8 text for every reader. */
void cli_output_csv_field(cli_output *output, const char *text);

#endif /* FLARE_CLI_OUTPUT_H */
