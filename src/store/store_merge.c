/*
 * store_merge.c: several sessions made one (store_merge.h).
 *
 * Two passes over the inputs, one open at a time: the first reads each
 * input's clock offsets and its first rank's NCCL kernel ends, from which
 * every input's shift is decided; the second copies every table, row by
 * row, turning each column by its role (pid, parent pid, name id, point in
 * time, second of the session) and passing the rest through as SQLite
 * values. Must never write to an input, nor copy a column the output does
 * not have.
 */
#include "store/store_merge.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/flare.h"
#include "store/store_internal.h"

#define PROCESSES_MAX 4096
#define COLUMNS_MAX   64

typedef struct merge_process {
    int64_t pid, new_pid;
    int64_t shift_ns; /* added to its times */
    int64_t drift_ns;
} merge_process;

typedef struct merge_input {
    int64_t start_ns, end_ns, offset_ns; /* session pair: offset = unix - clock */
    int ended;
    size_t process_count;
    merge_process processes[PROCESSES_MAX];
    size_t collective_count;
    int64_t *collective_ends; /* aligned by wall-clock only */
    int64_t shift_ns;         /* the session's: wall + collectives */
    int64_t second_shift;
} merge_input;

typedef struct merge_run {
    store *out;
    const char *const *dirs;
    size_t count;
    merge_input *inputs;
    store_merge_result *result;
    char *error;
    size_t error_size;
    int64_t merged_start_ns;
} merge_run;

static int fail(merge_run *run, int status, const char *format, const char *dir, const char *what)
{
    snprintf(run->error, run->error_size, format, dir, what);
    return status;
}

/* One integer of a one-row query on db (0 when no row). */
static int query_i64(sqlite3 *db, const char *sql, int64_t bind, int64_t *out)
{
    sqlite3_stmt *statement = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &statement, NULL) != SQLITE_OK)
        return -1;
    if (sqlite3_bind_parameter_count(statement) > 0)
        sqlite3_bind_int64(statement, 1, bind);
    int rc = sqlite3_step(statement);
    *out = rc == SQLITE_ROW ? sqlite3_column_int64(statement, 0) : 0;
    sqlite3_finalize(statement);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -1;
}

/* ---- pass 1: clocks and collectives ---- */

static int read_processes(store *in, merge_input *input)
{
    int pairs = store_has_table(in, "clock_pairs") > 0;
    sqlite3_stmt *statement = NULL;
    const char *sql =
        pairs ? "SELECT p.pid, (SELECT unix_ns - clock_ns FROM clock_pairs c WHERE c.pid = p.pid"
                " ORDER BY clock_ns LIMIT 1), (SELECT unix_ns - clock_ns FROM clock_pairs c WHERE"
                " c.pid = p.pid ORDER BY clock_ns DESC LIMIT 1) FROM processes p ORDER BY p.pid"
              : "SELECT pid, NULL, NULL FROM processes ORDER BY pid";
    if (sqlite3_prepare_v2(in->db, sql, -1, &statement, NULL) != SQLITE_OK)
        return -1;
    input->process_count = 0;
    while (sqlite3_step(statement) == SQLITE_ROW && input->process_count < PROCESSES_MAX) {
        merge_process *process = &input->processes[input->process_count++];
        process->pid = sqlite3_column_int64(statement, 0);
        int has_pair = sqlite3_column_type(statement, 1) != SQLITE_NULL;
        int64_t first = has_pair ? sqlite3_column_int64(statement, 1) : input->offset_ns;
        int64_t last = has_pair ? sqlite3_column_int64(statement, 2) : first;
        process->shift_ns = first; /* the offset for now; made a shift once the base is known */
        process->drift_ns = last > first ? last - first : first - last;
    }
    sqlite3_finalize(statement);
    return 0;
}

/* The end times of the NCCL kernels of the input's first process that has
 * any, in launch order (at most STORE_MERGE_COLLECTIVES_MAX). */
static int read_collectives(store *in, merge_input *input, int64_t *pid)
{
    if (query_i64(in->db,
                  "SELECT k.pid FROM kernels k JOIN names n ON n.id = k.name_id WHERE n.name LIKE"
                  " '%nccl%' ORDER BY k.pid LIMIT 1",
                  0, pid) != 0)
        return -1;
    input->collective_ends = calloc(STORE_MERGE_COLLECTIVES_MAX, sizeof(int64_t));
    if (input->collective_ends == NULL)
        return -1;
    sqlite3_stmt *statement = NULL;
    if (sqlite3_prepare_v2(in->db,
                           "SELECT k.end_ns FROM kernels k JOIN names n ON n.id = k.name_id WHERE"
                           " k.pid = ?1 AND n.name LIKE '%nccl%' ORDER BY k.start_ns LIMIT 4096",
                           -1, &statement, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_int64(statement, 1, *pid);
    input->collective_count = 0;
    while (sqlite3_step(statement) == SQLITE_ROW &&
           input->collective_count < STORE_MERGE_COLLECTIVES_MAX)
        input->collective_ends[input->collective_count++] = sqlite3_column_int64(statement, 0);
    sqlite3_finalize(statement);
    return 0;
}

static int read_input(merge_run *run, size_t index)
{
    merge_input *input = &run->inputs[index];
    char why[512];
    store *in = NULL;
    if (store_open(run->dirs[index], STORE_OPEN_READ, &in, why, sizeof(why)) != 0)
        return fail(run, FLARE_ERR_STORE, "%s: %s", run->dirs[index], why);
    run->result->inputs[index].schema_version = in->schema_version;
    int64_t collective_pid = 0;
    store_session_summary summary = {0};
    int status = store_read_session(in, &summary) == 0 ? 0 : -1;
    input->start_ns = (int64_t)summary.start_ns;
    input->end_ns = (int64_t)summary.end_ns; /* 0: the session never ended */
    input->ended = summary.end_ns != 0;
    input->offset_ns = summary.start_unix_ns - input->start_ns;
    if (status == 0)
        status = read_processes(in, input);
    if (status == 0)
        status = read_collectives(in, input, &collective_pid);
    if (status == 0 && input->collective_count > 0)
        for (size_t p = 0; p < input->process_count; p++)
            if (input->processes[p].pid == collective_pid) /* their own process's offset */
                for (size_t k = 0; k < input->collective_count; k++)
                    input->collective_ends[k] += input->processes[p].shift_ns;
    if (status != 0)
        snprintf(why, sizeof(why), "%s", sqlite3_errmsg(in->db));
    store_close(in);
    if (status != 0)
        return fail(run, FLARE_ERR_STORE, "%s: cannot read its clocks: %s", run->dirs[index], why);
    return 0;
}

static int compare_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Median of values[0..count) (reorders them). */
static int64_t median(int64_t *values, size_t count)
{
    qsort(values, count, sizeof(int64_t), compare_i64);
    return values[count / 2];
}

/* Input index's refinement from its collectives against input 0's: the
 * median of the differences of their ends, and what is left over. */
static void refine(merge_run *run, size_t index, int64_t *scratch)
{
    const merge_input *reference = &run->inputs[0];
    merge_input *input = &run->inputs[index];
    store_merge_input_result *said = &run->result->inputs[index];
    size_t count = input->collective_count < reference->collective_count
                       ? input->collective_count
                       : reference->collective_count;
    if (count < 3)
        return;
    /* Both ends carry their own process's offset to wall-clock time. */
    for (size_t k = 0; k < count; k++)
        scratch[k] = reference->collective_ends[k] - input->collective_ends[k];
    int64_t correction = median(scratch, count);
    for (size_t k = 0; k < count; k++) {
        int64_t left = reference->collective_ends[k] - input->collective_ends[k] - correction;
        scratch[k] = left < 0 ? -left : left;
    }
    said->collectives = count;
    said->collective_shift_ns = correction;
    said->residual_ns = median(scratch, count);
}

/* Decides every process's shift and each input's second shift. */
static int decide_shifts(merge_run *run, store_merge_align align)
{
    int all_have = 1;
    for (size_t i = 0; i < run->count; i++)
        all_have &= run->inputs[i].collective_count >= 3;
    if (align == STORE_MERGE_ALIGN_COLLECTIVES && !all_have) {
        for (size_t i = 0; i < run->count; i++)
            if (run->inputs[i].collective_count < 3)
                return fail(run, FLARE_ERR_INVALID_ARGUMENT,
                            "%s: %s: fewer than 3 NCCL kernels to align on (use --align wall)",
                            run->dirs[i], "cannot align on collectives");
    }
    run->result->used = align == STORE_MERGE_ALIGN_WALL || !all_have
                            ? STORE_MERGE_ALIGN_WALL
                            : STORE_MERGE_ALIGN_COLLECTIVES;
    int64_t *scratch = calloc(STORE_MERGE_COLLECTIVES_MAX, sizeof(int64_t));
    if (scratch == NULL)
        return fail(run, FLARE_ERR_NO_MEMORY, "%s%s", "out of memory", "");
    int64_t base = run->inputs[0].offset_ns;
    run->merged_start_ns = INT64_MAX;
    for (size_t i = 0; i < run->count; i++) {
        merge_input *input = &run->inputs[i];
        store_merge_input_result *said = &run->result->inputs[i];
        if (run->result->used == STORE_MERGE_ALIGN_COLLECTIVES && i > 0)
            refine(run, i, scratch);
        said->wall_shift_ns = input->offset_ns - base;
        input->shift_ns = said->wall_shift_ns + said->collective_shift_ns;
        for (size_t p = 0; p < input->process_count; p++) {
            merge_process *process = &input->processes[p];
            process->shift_ns = process->shift_ns - base + said->collective_shift_ns;
            if (process->drift_ns > said->drift_ns)
                said->drift_ns = process->drift_ns;
        }
        if (input->start_ns + input->shift_ns < run->merged_start_ns)
            run->merged_start_ns = input->start_ns + input->shift_ns;
    }
    for (size_t i = 0; i < run->count; i++) {
        merge_input *input = &run->inputs[i];
        int64_t ahead = input->start_ns + input->shift_ns - run->merged_start_ns;
        input->second_shift = (ahead + 500000000) / 1000000000;
    }
    free(scratch);
    return 0;
}

/* ---- pass 2: the rows ---- */

typedef enum column_role {
    ROLE_VALUE,      /* passed through */
    ROLE_PID,        /* the process: moved when another input had it */
    ROLE_PARENT_PID, /* moved like a pid when it is one of this input's */
    ROLE_NAME_ID,    /* interned again in the output's names (columns *name_id) */
    ROLE_TIME,       /* a point in time: shifted by its process's shift */
    ROLE_SECOND,     /* a second of the session: shifted by the input's seconds */
} column_role;

/* Points in time, by column name; every other *_ns column is a duration. */
static column_role role_of(const char *column)
{
    static const char *const times[] = {"start_ns",      "end_ns",    "time_ns",   "begin_ns",
                                        "clock_ns",      "opened_ns", "closed_ns", "requested_ns",
                                        "first_true_ns", "fired_ns",  "taken_ns",  "done_ns",
                                        "first_ns",      "last_ns"};
    if (strcmp(column, "pid") == 0)
        return ROLE_PID;
    if (strcmp(column, "parent_pid") == 0)
        return ROLE_PARENT_PID;
    size_t length = strlen(column);
    if (length >= 7 && strcmp(column + length - 7, "name_id") == 0)
        return ROLE_NAME_ID; /* name_id, file_name_id: ids into names */
    if (strcmp(column, "second") == 0)
        return ROLE_SECOND;
    for (size_t i = 0; i < sizeof(times) / sizeof(times[0]); i++)
        if (strcmp(column, times[i]) == 0)
            return ROLE_TIME;
    return ROLE_VALUE;
}

typedef struct copy_state {
    merge_run *run;
    merge_input *input;
    store *in;
    int64_t *name_map; /* input name id -> output name id, -1 unknown */
    int64_t name_map_size;
    int64_t next_free_pid; /* past every pid of every input */
    int64_t rows;
} copy_state;

static const merge_process *process_of(const merge_input *input, int64_t pid)
{
    for (size_t p = 0; p < input->process_count; p++)
        if (input->processes[p].pid == pid)
            return &input->processes[p];
    return NULL;
}

/* Interns every name of the input into the output: name_map. */
static int map_names(copy_state *copy)
{
    sqlite3 *out = copy->run->out->db;
    if (query_i64(copy->in->db, "SELECT COALESCE(MAX(id), 0) FROM names", 0,
                  &copy->name_map_size) != 0)
        return -1;
    copy->name_map = malloc((size_t)(copy->name_map_size + 1) * sizeof(int64_t));
    if (copy->name_map == NULL)
        return -1;
    for (int64_t i = 0; i <= copy->name_map_size; i++)
        copy->name_map[i] = -1;
    sqlite3_stmt *names = NULL, *insert = NULL, *find = NULL;
    int status = -1;
    if (sqlite3_prepare_v2(copy->in->db, "SELECT id, name FROM names", -1, &names, NULL) ==
            SQLITE_OK &&
        sqlite3_prepare_v2(out, "INSERT OR IGNORE INTO names(name) VALUES (?1)", -1, &insert,
                           NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(out, "SELECT id FROM names WHERE name = ?1", -1, &find, NULL) ==
            SQLITE_OK) {
        status = 0;
        while (status == 0 && sqlite3_step(names) == SQLITE_ROW) {
            int64_t id = sqlite3_column_int64(names, 0);
            sqlite3_bind_value(insert, 1, sqlite3_column_value(names, 1));
            sqlite3_bind_value(find, 1, sqlite3_column_value(names, 1));
            if (sqlite3_step(insert) != SQLITE_DONE || sqlite3_step(find) != SQLITE_ROW)
                status = -1;
            else if (id >= 0 && id <= copy->name_map_size)
                copy->name_map[id] = sqlite3_column_int64(find, 0);
            sqlite3_reset(insert);
            sqlite3_reset(find);
        }
    }
    sqlite3_finalize(names);
    sqlite3_finalize(insert);
    sqlite3_finalize(find);
    return status;
}

/* Gives every process of the input its pid in the output: its own, unless
 * an earlier input's process has it. */
static int map_pids(copy_state *copy)
{
    sqlite3_stmt *taken = NULL;
    if (sqlite3_prepare_v2(copy->run->out->db, "SELECT 1 FROM processes WHERE pid = ?1", -1, &taken,
                           NULL) != SQLITE_OK)
        return -1;
    for (size_t p = 0; p < copy->input->process_count; p++) {
        merge_process *process = &copy->input->processes[p];
        sqlite3_bind_int64(taken, 1, process->pid);
        int clash = sqlite3_step(taken) == SQLITE_ROW;
        sqlite3_reset(taken);
        process->new_pid = clash ? copy->next_free_pid++ : process->pid;
    }
    sqlite3_finalize(taken);
    return 0;
}

/* The columns table has in both the input and the output, with roles. */
static size_t common_columns(copy_state *copy, const char *table, char names[][64],
                             column_role *roles)
{
    char sql[256];
    sqlite3_stmt *in_columns = NULL, *out_column = NULL;
    size_t count = 0;
    snprintf(sql, sizeof(sql), "SELECT name FROM pragma_table_info('%s')", table);
    if (sqlite3_prepare_v2(copy->in->db, sql, -1, &in_columns, NULL) != SQLITE_OK)
        return 0;
    snprintf(sql, sizeof(sql), "SELECT 1 FROM pragma_table_info('%s') WHERE name = ?1", table);
    if (sqlite3_prepare_v2(copy->run->out->db, sql, -1, &out_column, NULL) == SQLITE_OK) {
        while (count < COLUMNS_MAX && sqlite3_step(in_columns) == SQLITE_ROW) {
            const char *name = (const char *)sqlite3_column_text(in_columns, 0);
            sqlite3_bind_text(out_column, 1, name, -1, SQLITE_TRANSIENT);
            if (name != NULL && strlen(name) < 64 && sqlite3_step(out_column) == SQLITE_ROW) {
                snprintf(names[count], 64, "%s", name);
                roles[count++] = role_of(name);
            }
            sqlite3_reset(out_column);
        }
    }
    sqlite3_finalize(in_columns);
    sqlite3_finalize(out_column);
    return count;
}

/* Binds column k of row (from select) into insert, turned by its role. */
static int bind_column(copy_state *copy, sqlite3_stmt *select, sqlite3_stmt *insert, int k,
                       column_role role, const merge_process *process)
{
    sqlite3_value *value = sqlite3_column_value(select, k);
    if (sqlite3_column_type(select, k) == SQLITE_NULL || role == ROLE_VALUE)
        return sqlite3_bind_value(insert, k + 1, value);
    int64_t number = sqlite3_column_int64(select, k);
    switch (role) {
    case ROLE_PID:
        number = process != NULL ? process->new_pid : number;
        break;
    case ROLE_PARENT_PID: {
        const merge_process *parent = process_of(copy->input, number);
        number = parent != NULL ? parent->new_pid : number;
        break;
    }
    case ROLE_NAME_ID:
        if (number < 0 || number > copy->name_map_size || copy->name_map[number] < 0)
            return SQLITE_MISMATCH; /* a name id the input's names table lacks */
        number = copy->name_map[number];
        break;
    case ROLE_TIME:
        number += process != NULL ? process->shift_ns : copy->input->shift_ns;
        break;
    default: /* ROLE_SECOND */
        number += copy->input->second_shift;
        break;
    }
    return sqlite3_bind_int64(insert, k + 1, number);
}

static int copy_table(copy_state *copy, const char *table)
{
    char names[COLUMNS_MAX][64];
    column_role roles[COLUMNS_MAX];
    size_t count = common_columns(copy, table, names, roles);
    if (count == 0)
        return 0;
    char columns[COLUMNS_MAX * 68] = "", marks[COLUMNS_MAX * 3] = "";
    char select_sql[sizeof(columns) + 256], insert_sql[sizeof(columns) + sizeof(marks) + 256];
    int pid_column = -1;
    size_t used = 0;
    for (size_t k = 0; k < count; k++) {
        used += (size_t)snprintf(columns + used, sizeof(columns) - used, "%s\"%s\"",
                                 k > 0 ? ", " : "", names[k]);
        strcat(marks, k > 0 ? ",?" : "?");
        if (roles[k] == ROLE_PID)
            pid_column = (int)k;
    }
    snprintf(select_sql, sizeof(select_sql), "SELECT %s FROM \"%s\"", columns, table);
    snprintf(insert_sql, sizeof(insert_sql), "INSERT OR IGNORE INTO \"%s\" (%s) VALUES (%s)", table,
             columns, marks);
    sqlite3_stmt *select = NULL, *insert = NULL;
    int status = -1;
    if (sqlite3_prepare_v2(copy->in->db, select_sql, -1, &select, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(copy->run->out->db, insert_sql, -1, &insert, NULL) == SQLITE_OK) {
        status = 0;
        while (status == 0 && sqlite3_step(select) == SQLITE_ROW) {
            const merge_process *process =
                pid_column >= 0 ? process_of(copy->input, sqlite3_column_int64(select, pid_column))
                                : NULL;
            for (size_t k = 0; status == 0 && k < count; k++)
                status = bind_column(copy, select, insert, (int)k, roles[k], process) == SQLITE_OK
                             ? 0
                             : -1;
            if (status == 0 && sqlite3_step(insert) != SQLITE_DONE)
                status = -1;
            sqlite3_reset(insert);
            copy->rows += status == 0;
        }
    }
    sqlite3_finalize(select);
    sqlite3_finalize(insert);
    return status;
}

/* Tables every output has of its own (schema, views, the index build). */
static int skipped(const char *table)
{
    return strcmp(table, "meta") == 0 || strcmp(table, "session") == 0 ||
           strcmp(table, "names") == 0 || strcmp(table, "kernel_name_stats") == 0 ||
           strncmp(table, "enum_", 5) == 0 || strncmp(table, "sqlite_", 7) == 0;
}

static int copy_tables(copy_state *copy)
{
    sqlite3_stmt *tables = NULL;
    if (sqlite3_prepare_v2(copy->in->db,
                           "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name", -1,
                           &tables, NULL) != SQLITE_OK)
        return -1;
    int status = 0;
    while (status == 0 && sqlite3_step(tables) == SQLITE_ROW) {
        char table[128];
        snprintf(table, sizeof(table), "%s", (const char *)sqlite3_column_text(tables, 0));
        if (!skipped(table) && store_has_table(copy->run->out, table) > 0)
            status = copy_table(copy, table);
    }
    sqlite3_finalize(tables);
    return status;
}

static int copy_input(merge_run *run, size_t index, int64_t *next_free_pid)
{
    char why[512];
    copy_state copy = {.run = run, .input = &run->inputs[index], .next_free_pid = *next_free_pid};
    if (store_open(run->dirs[index], STORE_OPEN_READ, &copy.in, why, sizeof(why)) != 0)
        return fail(run, FLARE_ERR_STORE, "%s: %s", run->dirs[index], why);
    int status = store_begin(run->out);
    if (status == 0)
        status = map_names(&copy) | map_pids(&copy);
    if (status == 0)
        status = copy_tables(&copy);
    if (status != 0)
        snprintf(why, sizeof(why), "%s (output: %s)", sqlite3_errmsg(copy.in->db),
                 sqlite3_errmsg(run->out->db));
    if (status == 0)
        status = store_commit(run->out);
    else
        store_rollback(run->out);
    store_merge_input_result *said = &run->result->inputs[index];
    said->rows = copy.rows;
    said->ended = copy.input->ended;
    said->processes = (int64_t)copy.input->process_count;
    said->pids_moved = copy.next_free_pid - *next_free_pid;
    *next_free_pid = copy.next_free_pid;
    free(copy.name_map);
    store_close(copy.in);
    if (status != 0)
        return fail(run, FLARE_ERR_STORE, "%s: cannot copy its rows: %s", run->dirs[index], why);
    return 0;
}

/* The merged session's row: from the earliest aligned start to the latest
 * aligned end of the inputs that ended. */
static int write_session(merge_run *run, const char *command, const char *host)
{
    int64_t end = run->merged_start_ns;
    for (size_t i = 0; i < run->count; i++) {
        const merge_input *input = &run->inputs[i];
        if (input->ended && input->end_ns + input->shift_ns > end)
            end = input->end_ns + input->shift_ns;
    }
    store_session_info info = {.command = command,
                               .start_ns = (uint64_t)run->merged_start_ns,
                               .start_unix_ns = run->merged_start_ns + run->inputs[0].offset_ns,
                               .host = host,
                               .flare_version = FLARE_VERSION_STRING};
    int status = store_begin(run->out);
    if (status == 0)
        status = store_session_begin(run->out, &info);
    if (status == 0)
        status = store_session_end(run->out, (uint64_t)end, 0, 0);
    if (status == 0)
        return store_commit(run->out);
    store_rollback(run->out);
    return status;
}

int store_merge(store *out, const char *const *input_dirs, size_t input_count,
                store_merge_align align, const char *command, store_merge_result *result,
                char *error, size_t error_size)
{
    if (out == NULL || input_dirs == NULL || input_count == 0 ||
        input_count > STORE_MERGE_INPUTS_MAX || result == NULL) {
        snprintf(error, error_size, "merge: between 1 and %d sessions", STORE_MERGE_INPUTS_MAX);
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    memset(result, 0, sizeof(*result));
    result->input_count = input_count;
    merge_run run = {.out = out,
                     .dirs = input_dirs,
                     .count = input_count,
                     .inputs = calloc(input_count, sizeof(merge_input)),
                     .result = result,
                     .error = error,
                     .error_size = error_size};
    if (run.inputs == NULL) {
        snprintf(error, error_size, "out of memory");
        return FLARE_ERR_NO_MEMORY;
    }
    int status = 0;
    int64_t next_free_pid = 1;
    for (size_t i = 0; status == 0 && i < input_count; i++) {
        status = read_input(&run, i);
        for (size_t p = 0; status == 0 && p < run.inputs[i].process_count; p++)
            if (run.inputs[i].processes[p].pid >= next_free_pid)
                next_free_pid = run.inputs[i].processes[p].pid + 1;
    }
    if (status == 0)
        status = decide_shifts(&run, align);
    for (size_t i = 0; status == 0 && i < input_count; i++)
        status = copy_input(&run, i, &next_free_pid);
    if (status == 0 && write_session(&run, command, "") != 0)
        status = fail(&run, FLARE_ERR_STORE, "%s: cannot write the session row: %s", "merge",
                      store_last_error(out));
    for (size_t i = 0; i < input_count; i++)
        free(run.inputs[i].collective_ends);
    free(run.inputs);
    return status;
}
