/*
 * report_emit.c: the two formats of `flare report --format` (report_emit.h):
 * JSON, one object of sections, and CSV in tidy long form (section, row,
 * key, value). A format is a const table of the few things that differ:
 * how a section, a row and a field's key are framed, how a string is
 * escaped, and how null is spelled; numbers are written the same in both.
 *
 * It knows nothing of sessions. It must never write a string other than
 * through cli_output_json_string or cli_output_csv_field, never write a
 * number that JSON cannot read (NaN and the infinities become null), and
 * never write a carriage return (CSV lines end with LF: the report's
 * standard output goes through the terminal filter, which keeps only
 * newlines and tabs).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/report_emit.h"

struct report_emit_format {
    const char *name;
    /* The top-level members, written by begin. */
    void (*begin)(report_emit *emit, const char *flare_version, unsigned schema_version);
    void (*end)(report_emit *emit);
    /* emit->section is set before these are called. */
    void (*section_begin)(report_emit *emit, int is_table);
    void (*section_end)(report_emit *emit, int is_table);
    void (*section_null)(report_emit *emit);
    void (*row_begin)(report_emit *emit);
    void (*row_end)(report_emit *emit);
    /* What goes before and after each field's value. */
    void (*key)(report_emit *emit, const char *key);
    void (*field_end)(report_emit *emit);
    void (*string)(cli_output *output, const char *text);
    const char *null;
};

struct report_emit {
    const report_emit_format *format;
    cli_output *output;
    const char *section; /* the section being written */
    uint64_t rows;       /* rows of the table so far */
    unsigned fields;     /* fields of the record so far */
};

/* ---- the document ---- */

const report_emit_format *report_emit_find(const char *name)
{
    static const report_emit_format *const formats[] = {&report_emit_json, &report_emit_csv};
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        if (strcmp(formats[i]->name, name) == 0)
            return formats[i];
    return NULL;
}

report_emit *report_emit_begin(const report_emit_format *format, cli_output *output,
                               const char *flare_version, unsigned schema_version)
{
    report_emit *emit = calloc(1, sizeof *emit);
    if (emit == NULL)
        return NULL;
    emit->format = format;
    emit->output = output;
    format->begin(emit, flare_version, schema_version);
    return emit;
}

void report_emit_end(report_emit *emit)
{
    emit->format->end(emit);
    free(emit);
}

void report_emit_object_begin(report_emit *emit, const char *section)
{
    emit->section = section;
    emit->rows = 0;
    emit->fields = 0;
    emit->format->section_begin(emit, 0);
}

void report_emit_object_end(report_emit *emit)
{
    emit->format->section_end(emit, 0);
}

void report_emit_object_null(report_emit *emit, const char *section)
{
    emit->section = section;
    emit->format->section_null(emit);
}

void report_emit_table_begin(report_emit *emit, const char *section)
{
    emit->section = section;
    emit->rows = 0;
    emit->format->section_begin(emit, 1);
}

void report_emit_row_begin(report_emit *emit)
{
    emit->fields = 0;
    emit->format->row_begin(emit);
}

void report_emit_row_end(report_emit *emit)
{
    emit->format->row_end(emit);
    emit->rows++;
}

void report_emit_table_end(report_emit *emit)
{
    emit->format->section_end(emit, 1);
}

/* ---- fields ---- */

void report_emit_u64(report_emit *emit, const char *key, uint64_t value)
{
    emit->format->key(emit, key);
    cli_output_u64(emit->output, value);
    emit->format->field_end(emit);
}

void report_emit_i64(report_emit *emit, const char *key, int64_t value)
{
    emit->format->key(emit, key);
    cli_output_i64(emit->output, value);
    emit->format->field_end(emit);
}

/* The shortest of %.15g, %.16g and %.17g that reads back as value, so 0.1
 * is written 0.1 and every double survives the trip exactly. */
static void format_double(double value, char *text, size_t size)
{
    for (int precision = 15; precision <= 17; precision++) {
        snprintf(text, size, "%.*g", precision, value);
        if (strtod(text, NULL) == value)
            return;
    }
}

void report_emit_double(report_emit *emit, const char *key, double value)
{
    if (!isfinite(value)) {
        report_emit_null(emit, key);
        return;
    }
    char text[40];
    format_double(value, text, sizeof text);
    emit->format->key(emit, key);
    cli_output_text(emit->output, text);
    emit->format->field_end(emit);
}

void report_emit_string(report_emit *emit, const char *key, const char *text)
{
    if (text == NULL) {
        report_emit_null(emit, key);
        return;
    }
    emit->format->key(emit, key);
    emit->format->string(emit->output, text);
    emit->format->field_end(emit);
}

void report_emit_bool(report_emit *emit, const char *key, int value)
{
    emit->format->key(emit, key);
    cli_output_text(emit->output, value ? "true" : "false");
    emit->format->field_end(emit);
}

void report_emit_null(report_emit *emit, const char *key)
{
    emit->format->key(emit, key);
    cli_output_text(emit->output, emit->format->null);
    emit->format->field_end(emit);
}

void report_emit_u64_if(report_emit *emit, const char *key, uint64_t value, int present)
{
    if (present)
        report_emit_u64(emit, key, value);
    else
        report_emit_null(emit, key);
}

/* ---- json ---- */

static void json_begin(report_emit *emit, const char *flare_version, unsigned schema_version)
{
    cli_output_text(emit->output, "{\"flare_version\":");
    cli_output_json_string(emit->output, flare_version);
    cli_output_json_member_u64(emit->output, "schema_version", schema_version);
}

static void json_end(report_emit *emit)
{
    cli_output_text(emit->output, "}\n");
}

/* ,\n"section": */
static void json_section_name(report_emit *emit)
{
    cli_output_text(emit->output, ",\n\"");
    cli_output_text(emit->output, emit->section);
    cli_output_text(emit->output, "\":");
}

static void json_section_begin(report_emit *emit, int is_table)
{
    json_section_name(emit);
    cli_output_char(emit->output, is_table ? '[' : '{');
}

static void json_section_end(report_emit *emit, int is_table)
{
    if (is_table)
        cli_output_text(emit->output, emit->rows > 0 ? "\n]" : "]");
    else
        cli_output_char(emit->output, '}');
}

static void json_section_null(report_emit *emit)
{
    json_section_name(emit);
    cli_output_text(emit->output, "null");
}

static void json_row_begin(report_emit *emit)
{
    cli_output_text(emit->output, emit->rows > 0 ? ",\n{" : "\n{");
}

static void json_row_end(report_emit *emit)
{
    cli_output_char(emit->output, '}');
}

static void json_key(report_emit *emit, const char *key)
{
    cli_output_text(emit->output, emit->fields++ > 0 ? ",\"" : "\"");
    cli_output_text(emit->output, key);
    cli_output_text(emit->output, "\":");
}

static void json_field_end(report_emit *emit)
{
    (void)emit;
}

const report_emit_format report_emit_json = {
    .name = "json",
    .begin = json_begin,
    .end = json_end,
    .section_begin = json_section_begin,
    .section_end = json_section_end,
    .section_null = json_section_null,
    .row_begin = json_row_begin,
    .row_end = json_row_end,
    .key = json_key,
    .field_end = json_field_end,
    .string = cli_output_json_string,
    .null = "null",
};

/* ---- csv ---- */

/* The top-level members are the fields of a section called "report". */
static void csv_begin(report_emit *emit, const char *flare_version, unsigned schema_version)
{
    cli_output_text(emit->output, "section,row,key,value\n");
    emit->section = "report";
    report_emit_string(emit, "flare_version", flare_version);
    report_emit_u64(emit, "schema_version", schema_version);
}

static void csv_nothing(report_emit *emit)
{
    (void)emit;
}

static void csv_section(report_emit *emit, int is_table)
{
    (void)emit;
    (void)is_table;
}

/* section,row,key, */
static void csv_key(report_emit *emit, const char *key)
{
    cli_output_text(emit->output, emit->section);
    cli_output_char(emit->output, ',');
    cli_output_u64(emit->output, emit->rows);
    cli_output_char(emit->output, ',');
    cli_output_text(emit->output, key);
    cli_output_char(emit->output, ',');
}

static void csv_field_end(report_emit *emit)
{
    cli_output_char(emit->output, '\n');
}

const report_emit_format report_emit_csv = {
    .name = "csv",
    .begin = csv_begin,
    .end = csv_nothing,
    .section_begin = csv_section,
    .section_end = csv_section,
    .section_null = csv_nothing,
    .row_begin = csv_nothing,
    .row_end = csv_nothing,
    .key = csv_key,
    .field_end = csv_field_end,
    .string = cli_output_csv_field,
    .null = "",
};
