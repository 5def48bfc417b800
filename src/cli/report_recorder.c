/*
 * report_recorder.c: the flight recorder's line in `flare report`
 * (report_recorder.h). The counts are the flight_recorder drop rows of
 * every process (one per table and reason, store_evict.h names them), what
 * was kept is the flight_recorder capability row's reason up to its ';'.
 * Must never print anything for a session without evictions.
 */
#include "cli/report_recorder.h"

#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "store/store_evict.h"

typedef struct recorder_note {
    uint64_t evicted[STORE_EVICT_TABLE_COUNT];
    char kept[160];
} recorder_note;

static int sum_evictions(const store_drop_row *row, void *user)
{
    recorder_note *note = user;
    if (strcmp(row->source, "flight_recorder") != 0)
        return 0;
    for (int t = 0; t < STORE_EVICT_TABLE_COUNT; t++) {
        const char *label = store_evict_table_label((store_evict_table)t);
        size_t length = strlen(label);
        if (strncmp(row->detail, label, length) == 0 &&
            strncmp(row->detail + length, " evicted", 8) == 0)
            note->evicted[t] += row->count;
    }
    return 0;
}

static int find_kept(const store_capability_row *row, void *user)
{
    recorder_note *note = user;
    if (strcmp(row->feature, "flight_recorder") != 0 || row->reason == NULL ||
        note->kept[0] != '\0')
        return 0;
    char text[sizeof(note->kept)];
    cli_format_untrusted(text, sizeof(text), row->reason);
    char *end = strchr(text, ';');
    if (end != NULL)
        *end = '\0';
    snprintf(note->kept, sizeof(note->kept), "%s", text);
    return 0;
}

/* 1234567 as "1,234,567". */
static void format_count(uint64_t value, char *buffer, size_t size)
{
    char digits[32];
    int length = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)value);
    size_t used = 0;
    for (int i = 0; i < length && used + 2 < size; i++) {
        if (i > 0 && (length - i) % 3 == 0)
            buffer[used++] = ',';
        buffer[used++] = digits[i];
    }
    buffer[used] = '\0';
}

/* Prints text after "  detail     ", wrapped at spaces to 100 columns,
 * continued under its first word. */
static void print_wrapped(const char *text)
{
    const int indent = 13, width = 100;
    int column = indent;
    printf("  detail     ");
    while (*text != '\0') {
        const char *space = strchr(text, ' ');
        int word = space != NULL ? (int)(space - text) : (int)strlen(text);
        if (column > indent && column + 1 + word > width) {
            printf("\n%*s", indent, "");
            column = indent;
        } else if (column > indent) {
            putchar(' ');
            column++;
        }
        printf("%.*s", word, text);
        column += word;
        text += word;
        while (*text == ' ')
            text++;
    }
    putchar('\n');
}

void cli_report_recorder_note(store *database)
{
    recorder_note note;
    memset(&note, 0, sizeof(note));
    if (store_read_drops(database, sum_evictions, &note) != 0)
        return;
    int tables = 0;
    for (int t = 0; t < STORE_EVICT_TABLE_COUNT; t++)
        tables += note.evicted[t] != 0;
    if (tables == 0)
        return;
    store_read_capabilities(database, find_kept, &note);
    char text[1024];
    size_t used = (size_t)snprintf(text, sizeof(text), "%s (flight recorder):",
                                   note.kept[0] != '\0' ? note.kept : "kept the newest detail");
    for (int t = 0, listed = 0; t < STORE_EVICT_TABLE_COUNT && used < sizeof(text); t++) {
        if (note.evicted[t] == 0)
            continue;
        char count[40];
        format_count(note.evicted[t], count, sizeof(count));
        listed++;
        used += (size_t)snprintf(text + used, sizeof(text) - used, "%s %s %s",
                                 listed == 1        ? ""
                                 : listed == tables ? " and"
                                                    : ",",
                                 count, store_evict_table_label((store_evict_table)t));
    }
    if (used < sizeof(text))
        snprintf(text + used, sizeof(text) - used,
                 " evicted, as asked; the per-second totals of evicted kernels, copies, API "
                 "calls and metric samples are kept (v_kernel_seconds, v_copy_seconds, "
                 "v_api_call_seconds, v_metric_seconds); the tables below cover the rows kept "
                 "in detail");
    print_wrapped(text);
}
