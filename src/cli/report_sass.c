/*
 * report_sass.c: the SASS metrics of a session's windows in `flare report`
 * (report_sass.h, issue 26 item 2): the walk that gathers one window and
 * device at a time (each metric's total, the instructions executed most
 * with what the other metrics counted for them, what had no source line),
 * the text section "SASS metrics" (with report_sass_lines.c's lines and
 * report_sass_scopes.c's split by scope), and the JSON/CSV section
 * sass_metrics, every row as read (store_read_sass_metrics).
 *
 * Reads the rows in the store's order (pid, window, device, metric, largest
 * value first) and holds one window at a time: at most REPORT_SASS_TOP
 * instructions and REPORT_SASS_METRICS metric totals (more metrics are
 * counted and said), plus a record per window whose engine counted SASS
 * metrics, so that one which stored none is said too. Must never change a
 * value, show a derived column whose two metrics were not both counted, or
 * hide that rows were left out.
 */
#include "cli/report_sass.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/report_pc_lines.h"
#include "flare/flare.h"
#include "store/store_sass.h"

/* ---- the derived columns ---- */

report_sass_part report_sass_part_of(const char *metric)
{
    if (strcmp(metric, REPORT_SASS_THREAD) == 0)
        return REPORT_SASS_PART_THREAD;
    if (strcmp(metric, REPORT_SASS_SECTORS) == 0)
        return REPORT_SASS_PART_SECTORS;
    if (strcmp(metric, REPORT_SASS_IDEAL) == 0)
        return REPORT_SASS_PART_IDEAL;
    return REPORT_SASS_PARTS;
}

double report_sass_threads(const report_sass_counts *counts, int *known)
{
    *known = (counts->has & (1u << REPORT_SASS_PART_THREAD)) != 0 && counts->executed != 0;
    return *known ? (double)counts->value[REPORT_SASS_PART_THREAD] / (double)counts->executed : 0;
}

double report_sass_sectors(const report_sass_counts *counts, int *known)
{
    unsigned both = (1u << REPORT_SASS_PART_SECTORS) | (1u << REPORT_SASS_PART_IDEAL);
    uint64_t ideal = counts->value[REPORT_SASS_PART_IDEAL];
    *known = (counts->has & both) == both && ideal != 0;
    return *known ? (double)counts->value[REPORT_SASS_PART_SECTORS] / (double)ideal : 0;
}

uint64_t report_sass_hash(const char *text)
{
    uint64_t hash = 14695981039346656037ull;
    for (const unsigned char *at = (const unsigned char *)text; *at != '\0'; at++)
        hash = (hash ^ *at) * 1099511628211ull;
    return hash;
}

/* ---- the walk ---- */

/* A window whose engine counts SASS metrics (windows.engine names sass),
 * from the windows table. */
typedef struct sass_record {
    int64_t pid;
    uint64_t id;
    char engine[32];
    char engine_status[32];
    char engine_reason[256];
    uint64_t launches;
    int seen; /* a window of the walk had rows */
} sass_record;

typedef struct sass_walk {
    report_sass_window window;
    void (*done)(report_sass_window *window, void *user);
    void *user;
    sass_record *records; /* by pid, then id */
    size_t record_count, record_capacity;
    size_t cursor; /* the first record not passed by the walk */
    int out_of_memory;
} sass_walk;

static int hold_record(const store_window_row *row, void *user)
{
    sass_walk *walk = user;
    if (row->engine == NULL || strstr(row->engine, "sass") == NULL)
        return 0;
    if (walk->record_count == walk->record_capacity) {
        size_t capacity = walk->record_capacity == 0 ? 16 : walk->record_capacity * 2;
        sass_record *grown = realloc(walk->records, capacity * sizeof(*grown));
        if (grown == NULL) {
            walk->out_of_memory = 1;
            return 1;
        }
        walk->records = grown;
        walk->record_capacity = capacity;
    }
    sass_record *record = &walk->records[walk->record_count++];
    *record = (sass_record){.pid = row->pid, .id = row->id, .launches = row->launches};
    snprintf(record->engine, sizeof(record->engine), "%s", row->engine);
    snprintf(record->engine_status, sizeof(record->engine_status), "%s",
             row->engine_status != NULL ? row->engine_status : "");
    snprintf(record->engine_reason, sizeof(record->engine_reason), "%s",
             row->engine_reason != NULL ? row->engine_reason : "");
    return 0;
}

/* (pid, id) order: the walk's. */
static int compare_records(const void *left, const void *right)
{
    const sass_record *a = left, *b = right;
    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

static void copy_record(report_sass_window *window, const sass_record *record)
{
    memcpy(window->engine, record->engine, sizeof(window->engine));
    memcpy(window->engine_status, record->engine_status, sizeof(window->engine_status));
    memcpy(window->engine_reason, record->engine_reason, sizeof(window->engine_reason));
    window->launches = record->launches;
}

/* Hands over, as windows without rows, the records before (pid, id) (all
 * that are left when all is set) that no window of the walk matched. */
static void pass_records(sass_walk *walk, int64_t pid, uint64_t id, int all)
{
    for (; walk->cursor < walk->record_count; walk->cursor++) {
        const sass_record *record = &walk->records[walk->cursor];
        if (!all && (record->pid > pid || (record->pid == pid && record->id >= id)))
            return;
        if (record->seen)
            continue;
        report_sass_window *window = &walk->window;
        memset(window, 0, sizeof(*window));
        window->pid = record->pid;
        window->window_id = record->id;
        window->device = -1;
        copy_record(window, record);
        walk->done(window, walk->user);
        memset(window, 0, sizeof(*window));
    }
}

/* A window is finished: handed over, cleared. */
static void finish_window(sass_walk *walk)
{
    report_sass_window *window = &walk->window;
    if (!window->have)
        return;
    walk->done(window, walk->user);
    memset(window, 0, sizeof(*window));
}

/* The walk reaches (pid, window, device): records before it are handed
 * over, and its own (if any) attached. */
static void start_window(sass_walk *walk, const store_sass_row *row)
{
    pass_records(walk, row->pid, row->window_id, 0);
    report_sass_window *window = &walk->window;
    window->have = 1;
    window->pid = row->pid;
    window->window_id = row->window_id;
    window->device = row->device;
    if (walk->cursor < walk->record_count) {
        sass_record *record = &walk->records[walk->cursor];
        if (record->pid == row->pid && record->id == row->window_id) {
            record->seen = 1;
            copy_record(window, record);
        }
    }
}

static void add_total(report_sass_window *window, const char *metric, uint64_t value)
{
    /* A metric's rows come together: the last one first. */
    uint64_t hash = report_sass_hash(metric);
    for (size_t i = window->metrics; i-- > 0;)
        if (window->totals[i].metric_hash == hash) {
            window->totals[i].value += value;
            window->totals[i].instructions++;
            return;
        }
    if (window->metrics == REPORT_SASS_METRICS) {
        if (window->other_metric_hash != hash) {
            window->other_metric_hash = hash;
            window->other_metrics++;
        }
        return;
    }
    report_sass_total *total = &window->totals[window->metrics++];
    snprintf(total->metric, sizeof(total->metric), "%s", metric);
    total->metric_hash = hash;
    total->value = value;
    total->instructions = 1;
}

/* A row of smsp__sass_inst_executed: one instruction. */
static void add_instruction(report_sass_window *window, const store_sass_row *row)
{
    int has_line = row->file != NULL && row->file[0] != '\0';
    window->instructions++;
    window->counts.executed += row->value;
    if (!has_line) {
        window->no_line_instructions++;
        window->no_line_executed += row->value;
    }
    /* Rows come largest first; one not executed is no hot instruction. */
    if (window->top_count == REPORT_SASS_TOP || row->value == 0)
        return;
    report_sass_instruction *held = &window->top[window->top_count++];
    snprintf(held->function, sizeof(held->function), "%s", row->function);
    held->function_hash = report_sass_hash(row->function);
    held->pc_offset = row->pc_offset;
    if (has_line) {
        report_pc_path_tail(held->file, sizeof(held->file), row->file);
        held->source_line = row->line;
    } else if (row->sass != NULL) {
        report_pc_fit_text(held->sass, sizeof(held->sass), row->sass);
    }
    held->counts.executed = row->value;
}

/* A row of a derived column's metric: the window's sum, and the held
 * instruction's value. The store orders a window's rows by metric name, and
 * smsp__sass_inst_executed sorts before the three others (they go on
 * "_s..." and "_t..." where it goes on "_i..."), so the instructions are
 * held by the time these come. */
static void add_part(report_sass_window *window, const store_sass_row *row, report_sass_part part)
{
    window->counts.value[part] += row->value;
    window->counts.has |= 1u << part;
    uint64_t hash = report_sass_hash(row->function);
    for (size_t i = 0; i < window->top_count; i++) {
        report_sass_instruction *held = &window->top[i];
        if (held->function_hash == hash && held->pc_offset == row->pc_offset) {
            held->counts.value[part] += row->value;
            held->counts.has |= 1u << part;
            return;
        }
    }
}

static int walk_row(const store_sass_row *row, void *user)
{
    sass_walk *walk = user;
    report_sass_window *window = &walk->window;
    if (window->have && (window->pid != row->pid || window->window_id != row->window_id ||
                         window->device != row->device))
        finish_window(walk);
    if (!window->have)
        start_window(walk, row);
    window->rows++;
    add_total(window, row->metric, row->value);
    report_sass_part part = report_sass_part_of(row->metric);
    if (strcmp(row->metric, REPORT_SASS_INST) == 0)
        add_instruction(window, row);
    else if (part != REPORT_SASS_PARTS)
        add_part(window, row, part);
    return 0;
}

int report_sass_windows(store *database, void (*done)(report_sass_window *window, void *user),
                        void *user)
{
    sass_walk *walk = calloc(1, sizeof(*walk)); /* about 8 KiB: off the stack */
    if (walk == NULL)
        return FLARE_ERR_NO_MEMORY;
    walk->done = done;
    walk->user = user;
    /* The rows are shown even when the windows cannot be read (a damaged
     * session): without their engines, and that failure reported after
     * them. */
    int records_status = store_read_windows(database, hold_record, walk);
    if (records_status == FLARE_OK && walk->out_of_memory)
        records_status = FLARE_ERR_NO_MEMORY;
    if (records_status != FLARE_OK)
        walk->record_count = 0;
    else if (walk->record_count > 1)
        qsort(walk->records, walk->record_count, sizeof(*walk->records), compare_records);
    int status = store_read_sass_metrics(database, walk_row, walk);
    if (status == FLARE_OK) {
        finish_window(walk);
        pass_records(walk, 0, 0, 1);
    }
    free(walk->records);
    free(walk);
    return status != FLARE_OK ? status : records_status;
}

/* ---- the text section ---- */

/* Whether the window's tables have a threads column (and a sectors one):
 * where the window's own value is known, as on the HTML page. */
static int shows_threads(const report_sass_window *window)
{
    int known;
    report_sass_threads(&window->counts, &known);
    return known;
}

void report_sass_print_derived_heading(const report_sass_window *window)
{
    int known;
    if (shows_threads(window))
        printf(" %7s", "threads");
    report_sass_sectors(&window->counts, &known);
    if (known)
        printf(" %7s", "sectors");
}

void report_sass_print_derived(const report_sass_window *window, const report_sass_counts *counts)
{
    int known;
    if (shows_threads(window)) {
        double threads = report_sass_threads(counts, &known);
        if (known)
            printf(" %7.1f", threads);
        else
            printf(" %7s", "-");
    }
    report_sass_sectors(&window->counts, &known);
    if (known) {
        double sectors = report_sass_sectors(counts, &known);
        if (known)
            printf(" %6.1fx", sectors);
        else
            printf(" %7s", "-");
    }
}

void report_sass_print_legend(const report_sass_window *window, report_sass_legend *legend)
{
    int known;
    if (shows_threads(window) && !legend->threads_said) {
        legend->threads_said = 1;
        printf("    threads: threads per warp instruction, " REPORT_SASS_THREAD
               " / " REPORT_SASS_INST " (32.0: full warps; fewer: divergence)\n");
    }
    report_sass_sectors(&window->counts, &known);
    if (known && !legend->sectors_said) {
        legend->sectors_said = 1;
        printf("    sectors: global memory sectors per ideal, " REPORT_SASS_SECTORS
               " / " REPORT_SASS_IDEAL " (1.0x: coalesced; more: uncoalesced)\n");
    }
}

/* The text section's walk: the run, the lines, what was explained. */
typedef struct sass_print {
    cli_report_run *run;
    report_sass_lines lines;
    report_sass_scopes scopes;
    report_sass_legend legend;
} sass_print;

/* The window's line for a window that ran the engine and stored nothing. */
static void print_empty_window(const report_sass_window *window)
{
    printf("  window %" PRIu64 " (pid %" PRId64 "): no SASS metrics stored (engine %s, %s",
           window->window_id, window->pid, window->engine,
           window->engine_status[0] != '\0' ? window->engine_status : "no status");
    if (window->engine_reason[0] != '\0')
        printf(": %s", window->engine_reason);
    printf("; %" PRIu64 " launches while open)\n", window->launches);
}

/* The metrics' totals, and the whole window's derived columns. */
static void print_totals(const report_sass_window *window)
{
    printf("    %-44s %16s %12s\n", "metric", "total", "instructions");
    for (size_t i = 0; i < window->metrics; i++)
        printf("    %-44s %16" PRIu64 " %12zu\n", window->totals[i].metric, window->totals[i].value,
               window->totals[i].instructions);
    if (window->other_metrics != 0)
        printf("    %zu more metrics (flare report --format json: section sass_metrics)\n",
               window->other_metrics);
    int threads_known, sectors_known;
    double threads = report_sass_threads(&window->counts, &threads_known);
    double sectors = report_sass_sectors(&window->counts, &sectors_known);
    if (threads_known)
        printf("    %.1f threads per warp instruction over the window\n", threads);
    if (sectors_known)
        printf("    global memory sectors %.1fx the ideal over the window\n", sectors);
}

static void print_instructions(const report_sass_window *window, report_sass_legend *legend)
{
    if (window->instructions == 0) {
        printf("    hottest instructions: none (" REPORT_SASS_INST " was not counted)\n");
        return;
    }
    printf("    hottest instructions by " REPORT_SASS_INST ":\n");
    printf("    %10s %7s", "executed", "share");
    report_sass_print_derived_heading(window);
    printf("  %s\n", "function+offset");
    for (size_t i = 0; i < window->top_count; i++) {
        const report_sass_instruction *held = &window->top[i];
        printf("    %10" PRIu64 " %6.1f%%", held->counts.executed,
               report_pc_share(held->counts.executed, window->counts.executed));
        report_sass_print_derived(window, &held->counts);
        printf("  %s+0x%" PRIx64, held->function, held->pc_offset);
        if (held->file[0] != '\0')
            printf(" (%s:%" PRIu32 ")", held->file, held->source_line);
        else if (held->sass[0] != '\0')
            printf(" [%s]", held->sass);
        printf("\n");
    }
    if (window->instructions > window->top_count)
        printf("    %zu more instructions (flare report --format json: section sass_metrics)\n",
               window->instructions - window->top_count);
    report_sass_print_legend(window, legend);
}

/* The most instructions any metric counted: the window's. */
static size_t counted_instructions(const report_sass_window *window)
{
    size_t most = window->instructions;
    for (size_t i = 0; i < window->metrics; i++)
        if (window->totals[i].instructions > most)
            most = window->totals[i].instructions;
    return most;
}

static void print_window(report_sass_window *window, void *user)
{
    sass_print *print = user;
    cli_report_run *run = print->run;
    if (run->rows == 0)
        printf("\nSASS metrics (windows with engine sass: what each instruction executed, "
               "exact counts)\n");
    run->rows++;
    if (window->rows == 0) {
        print_empty_window(window);
        return;
    }
    size_t instructions = counted_instructions(window);
    printf("  window %" PRIu64 " (pid %" PRId64 ", device %d): %zu instruction%s counted\n",
           window->window_id, window->pid, window->device, instructions,
           instructions == 1 ? "" : "s");
    print_totals(window);
    report_sass_scopes_print(&print->scopes, window);
    print_instructions(window, &print->legend);
    if (window->instructions != 0)
        report_sass_lines_print(&print->lines, window);
}

int cli_report_sass(cli_report_run *run)
{
    /* A session older than SASS metrics has none, and no window that ran
     * them: nothing is said, as for PC samples. */
    if (run->summary->schema_version < REPORT_SASS_SINCE)
        return 0;
    /* The instructions are shown even when the lines or the scopes cannot
     * be read (a damaged session); that failure is reported after them. */
    sass_print print = {.run = run};
    int lines_status = report_sass_lines_load(run->database, &print.lines);
    int scopes_status = report_sass_scopes_load(run->database, &print.scopes);
    int status = report_sass_windows(run->database, print_window, &print);
    report_sass_lines_free(&print.lines);
    report_sass_scopes_free(&print.scopes);
    if (status == FLARE_OK)
        status = lines_status != FLARE_OK ? lines_status : scopes_status;
    return status;
}

/* ---- JSON and CSV ---- */

static int emit_row(const store_sass_row *row, void *user)
{
    report_emit *emit = user;
    int has_line = row->file != NULL && row->file[0] != '\0';
    report_emit_row_begin(emit);
    report_emit_i64(emit, "pid", row->pid);
    report_emit_u64(emit, "window_id", row->window_id);
    report_emit_i64(emit, "device", row->device);
    report_emit_string(emit, "function", row->function);
    report_emit_u64(emit, "pc_offset", row->pc_offset);
    report_emit_string(emit, "metric", row->metric);
    report_emit_u64(emit, "value", row->value);
    report_emit_string(emit, "file", has_line ? row->file : NULL);
    report_emit_u64_if(emit, "line", row->line, has_line);
    report_emit_string(emit, "sass", row->sass);
    report_emit_row_end(emit);
    return 0;
}

int report_sass_emit(store *database, report_emit *emit)
{
    return store_read_sass_metrics(database, emit_row, emit);
}
