/*
 * report_emit.h: the writer behind `flare report --format json|csv`: a
 * document of named sections, each either one record (an object) or a
 * table of records (rows), every record a flat list of key and scalar
 * value. The sections (report_data.c) say what to write; a format (a const
 * report_emit_format, one per --format word) says how, through cli_output
 * (output.h), which does every escaping.
 *
 *   json: {"flare_version":...,"schema_version":N,
 *         "session":{...},
 *         "kernels":[
 *         {...},
 *         {...}
 *         ],...}                          one record a line
 *   csv:  section,row,key,value            the header, then one line a field
 *         report,0,flare_version,0.1.0     (tidy long form: every section
 *         kernels,0,name,saxpy              in one table; row counts from 0
 *         ...                               within its section)
 *
 * It must never write a string unescaped (cli_output_json_string,
 * cli_output_csv_field), a number that is not valid in its format (a NaN
 * or an infinity is written as null), nor a raw control character other
 * than a newline: `flare report`'s standard output goes through the
 * terminal filter (untrusted.c), which would turn a carriage return into
 * '?' (so CSV lines end with LF, not CRLF). It holds one record's state,
 * never a table. Keys and section names are the caller's plain ASCII words,
 * written as they are.
 */
#ifndef FLARE_CLI_REPORT_EMIT_H
#define FLARE_CLI_REPORT_EMIT_H

#include <stdint.h>

#include "cli/output.h"

typedef struct report_emit report_emit;

/* One output format: its --format word and how it writes each piece. */
typedef struct report_emit_format report_emit_format;

extern const report_emit_format report_emit_json;
extern const report_emit_format report_emit_csv;

/* The format called name ("json", "csv"), or NULL. */
const report_emit_format *report_emit_find(const char *name);

/*
 * Starts a document in format on output (which the caller owns and closes)
 * with its two top-level members: flare_version (this flare's) and
 * schema_version (of the document's layout). Returns the emitter, or NULL
 * out of memory (nothing written).
 */
report_emit *report_emit_begin(const report_emit_format *format, cli_output *output,
                               const char *flare_version, unsigned schema_version);
/* Closes the document and frees emit (output stays open). */
void report_emit_end(report_emit *emit);

/* A section that is one record: its fields follow, then object_end. */
void report_emit_object_begin(report_emit *emit, const char *section);
void report_emit_object_end(report_emit *emit);
/* A section whose record could not be read: null in JSON, no line in CSV. */
void report_emit_object_null(report_emit *emit, const char *section);

/* A section that is a table: rows (row_begin, fields, row_end) follow,
 * then table_end. A table without rows is [] in JSON, no line in CSV. */
void report_emit_table_begin(report_emit *emit, const char *section);
void report_emit_row_begin(report_emit *emit);
void report_emit_row_end(report_emit *emit);
void report_emit_table_end(report_emit *emit);

/* Fields of the record being written. */
void report_emit_u64(report_emit *emit, const char *key, uint64_t value);
void report_emit_i64(report_emit *emit, const char *key, int64_t value);
/* NaN and the infinities are written as null. */
void report_emit_double(report_emit *emit, const char *key, double value);
/* A NULL text is written as null. */
void report_emit_string(report_emit *emit, const char *key, const char *text);
void report_emit_bool(report_emit *emit, const char *key, int value);
void report_emit_null(report_emit *emit, const char *key);
/* value under key when present, else null. */
void report_emit_u64_if(report_emit *emit, const char *key, uint64_t value, int present);

#endif /* FLARE_CLI_REPORT_EMIT_H */
