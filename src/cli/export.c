/*
 * export.c: `flare export [DIR] --format perfetto|csv|json [-o FILE]`, a
 * session in formats other tools read.
 *
 * perfetto: Chrome trace-event JSON, which the Perfetto UI and
 * chrome://tracing open. Kernels, copies and memsets are complete ("X")
 * events on a track per device and stream; scopes (and NVTX ranges, stored
 * as scopes) on a track per thread of their process; NVML metrics are
 * counter ("C") events on the device's process. csv and json: the kernel
 * table, one row per kernel.
 *
 * It must never change the session (the store is opened read-only), never
 * hold a table in memory (rows stream from SQLite straight to the output;
 * only the set of named tracks grows, with tracks, not rows), never emit
 * text that breaks its format (every string is escaped, and bytes that are
 * not valid UTF-8 become '?'), and never leave a half-written FILE: -o
 * writes FILE.tmp and renames it over FILE only when everything was
 * written. Exit codes as everywhere (cli.h): 0, 1 failure, 2 usage.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "flare/flare.h"
#include "store/store.h"
#include "store/store_export.h"

static const char export_help[] =
    "usage: flare export [DIR] --format perfetto|csv|json [-o FILE]\n"
    "\n"
    "Writes a saved session in a format other tools read.\n"
    "\n"
    "Formats:\n"
    "  perfetto   Chrome trace-event JSON for https://ui.perfetto.dev or\n"
    "             chrome://tracing: a track per device and stream for kernels,\n"
    "             copies and memsets, a track per thread for scopes and NVTX\n"
    "             ranges, and counter tracks for the GPU metrics (power, clocks...).\n"
    "             Times are microseconds from the start of the session.\n"
    "  csv        the kernel table, one row per kernel, with a header row\n"
    "             (RFC 4180: names with commas, quotes or newlines are quoted)\n"
    "  json       {\"session\": {...}, \"kernels\": [...]}, the same kernel fields\n"
    "\n"
    "DIR is a session directory, or a directory of sessions, in which case the\n"
    "newest is exported. Default: ./flare-out ($FLARE_OUTPUT_DIR if set).\n"
    "Names are written as UTF-8; bytes that are not valid UTF-8 become '?'.\n"
    "\n"
    "Options:\n"
    "  -f, --format FORMAT   perfetto, csv or json (required)\n"
    "  -o, --output FILE     write to FILE ('-': standard output, the default);\n"
    "                        FILE appears only once the export is complete (it is\n"
    "                        written as FILE.tmp, then renamed); its directory must exist\n"
    "  -h, --help            this help\n"
    "\n"
    "Exit status: 0 on success, 1 if the session cannot be read or the output\n"
    "cannot be written, 2 for a usage error.\n";

#define EXPORT_FORMAT_LIST "perfetto, csv, json"

typedef enum export_format {
    EXPORT_FORMAT_NONE = 0,
    EXPORT_FORMAT_PERFETTO,
    EXPORT_FORMAT_CSV,
    EXPORT_FORMAT_JSON,
} export_format;

/* Metrics with this prefix pair CUPTI correlation ids with a framework's own
 * ids: they are joins, not gauges, so they make no sense as counter tracks. */
#define EXPORT_CORRELATION_PREFIX "external_correlation."

/*
 * Synthetic trace pids for the GPU tracks of (process, device) pairs start
 * here. Linux pids stay below 2^22 (the kernel's largest pid_max), so these
 * can never collide with a real process; trace viewers read pids as 32-bit
 * unsigned numbers, which these fit comfortably.
 */
#define EXPORT_GPU_PID_BASE 1000000000LL
/* Stream ids above INT32_MAX (never seen from CUPTI, which uses 32 bits) get
 * thread ids counted up from here, for the same 32-bit reason. */
#define EXPORT_LARGE_STREAM_TID_BASE 0x80000000LL

/* ---- buffered output ---- */

#define EXPORT_BUFFER_SIZE (256 * 1024)

/*
 * Everything is formatted into one buffer and written in large blocks:
 * hundreds of megabytes of small pieces through printf would dominate the
 * export time. The first write error is kept and stops further writes.
 */
typedef struct export_output {
    FILE *file;
    int error_number; /* errno of the first failed write; 0 while all is well */
    size_t used;
    char buffer[EXPORT_BUFFER_SIZE];
} export_output;

static void output_flush(export_output *output)
{
    if (output->used > 0 && output->error_number == 0) {
        if (fwrite(output->buffer, 1, output->used, output->file) != output->used)
            output->error_number = errno != 0 ? errno : EIO;
    }
    output->used = 0;
}

static void output_bytes(export_output *output, const char *bytes, size_t length)
{
    if (output->used + length > sizeof output->buffer) {
        output_flush(output);
        if (length > sizeof output->buffer) {
            if (output->error_number == 0 && fwrite(bytes, 1, length, output->file) != length)
                output->error_number = errno != 0 ? errno : EIO;
            return;
        }
    }
    memcpy(output->buffer + output->used, bytes, length);
    output->used += length;
}

static void output_char(export_output *output, char character)
{
    if (output->used == sizeof output->buffer)
        output_flush(output);
    output->buffer[output->used++] = character;
}

static void output_text(export_output *output, const char *text)
{
    output_bytes(output, text, strlen(text));
}

static void output_u64(export_output *output, uint64_t value)
{
    char digits[24];
    size_t at = sizeof digits;
    do {
        digits[--at] = (char)('0' + value % 10);
        value /= 10;
    } while (value != 0);
    output_bytes(output, digits + at, sizeof digits - at);
}

static void output_i64(export_output *output, int64_t value)
{
    if (value < 0) {
        output_char(output, '-');
        /* Negating through uint64 is defined even for INT64_MIN. */
        output_u64(output, 0 - (uint64_t)value);
    } else {
        output_u64(output, (uint64_t)value);
    }
}

/* Nanoseconds as microseconds with exactly three decimals, the unit of the
 * trace-event format: 1234567 -> 1234.567, -5 -> -0.005. Exact, unlike a
 * division in floating point. */
static void output_microseconds(export_output *output, int64_t nanoseconds)
{
    uint64_t magnitude = nanoseconds < 0 ? 0 - (uint64_t)nanoseconds : (uint64_t)nanoseconds;
    if (nanoseconds < 0)
        output_char(output, '-');
    output_u64(output, magnitude / 1000);
    uint64_t fraction = magnitude % 1000;
    char decimals[4] = {'.', (char)('0' + fraction / 100), (char)('0' + fraction / 10 % 10),
                        (char)('0' + fraction % 10)};
    output_bytes(output, decimals, sizeof decimals);
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
#define CONTINUATION(byte) ((byte) >= 0x80 && (byte) <= 0xBF)
    if (lead >= 0xC2 && lead <= 0xDF)
        return CONTINUATION(text[1]) ? 2 : 0;
    if (lead >= 0xE0 && lead <= 0xEF) {
        unsigned char low = lead == 0xE0 ? 0xA0 : 0x80;
        unsigned char high = lead == 0xED ? 0x9F : 0xBF;
        if (text[1] < low || text[1] > high)
            return 0;
        return CONTINUATION(text[2]) ? 3 : 0;
    }
    if (lead >= 0xF0 && lead <= 0xF4) {
        unsigned char low = lead == 0xF0 ? 0x90 : 0x80;
        unsigned char high = lead == 0xF4 ? 0x8F : 0xBF;
        if (text[1] < low || text[1] > high)
            return 0;
        if (!CONTINUATION(text[2]))
            return 0;
        return CONTINUATION(text[3]) ? 4 : 0;
    }
#undef CONTINUATION
    return 0;
}

/* A JSON string literal, quotes included. */
static void output_json_string(export_output *output, const char *text)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *at = (const unsigned char *)text;
    output_char(output, '"');
    while (*at != '\0') {
        /* Copy the longest run that needs no escaping in one go. */
        const unsigned char *run = at;
        while (*at >= 0x20 && *at < 0x80 && *at != '"' && *at != '\\')
            at++;
        if (at > run)
            output_bytes(output, (const char *)run, (size_t)(at - run));
        unsigned char byte = *at;
        if (byte == '\0')
            break;
        if (byte == '"' || byte == '\\') {
            char escaped[2] = {'\\', (char)byte};
            output_bytes(output, escaped, 2);
            at++;
        } else if (byte < 0x20) {
            switch (byte) {
            case '\n':
                output_bytes(output, "\\n", 2);
                break;
            case '\r':
                output_bytes(output, "\\r", 2);
                break;
            case '\t':
                output_bytes(output, "\\t", 2);
                break;
            default: {
                char escaped[6] = {'\\', 'u', '0', '0', hex[byte >> 4], hex[byte & 0xF]};
                output_bytes(output, escaped, sizeof escaped);
                break;
            }
            }
            at++;
        } else {
            size_t length = utf8_sequence_length(at);
            if (length == 0) {
                output_char(output, '?');
                at++;
            } else {
                output_bytes(output, (const char *)at, length);
                at += length;
            }
        }
    }
    output_char(output, '"');
}

/* The session's identity, shared by the perfetto and json formats:
 * ,"command":...,"host":...,"flare_version":... */
static void output_session_identity(export_output *output, const store_session_summary *summary)
{
    output_text(output, ",\"command\":");
    output_json_string(output, summary->command);
    output_text(output, ",\"host\":");
    output_json_string(output, summary->host);
    output_text(output, ",\"flare_version\":");
    output_json_string(output, summary->flare_version);
}

/* A CSV field (RFC 4180): quoted, with quotes doubled, when it holds a
 * comma, a quote or a line break; as is otherwise. Invalid UTF-8 becomes
 * '?' here too, so that the file is valid UTF-8 text for every reader. */
static void output_csv_field(export_output *output, const char *text)
{
    int quote = strpbrk(text, ",\"\r\n") != NULL;
    if (quote)
        output_char(output, '"');
    const unsigned char *at = (const unsigned char *)text;
    while (*at != '\0') {
        if (*at == '"') {
            output_bytes(output, "\"\"", 2);
            at++;
        } else if (*at < 0x80) {
            output_char(output, (char)*at++);
        } else {
            size_t length = utf8_sequence_length(at);
            if (length == 0) {
                output_char(output, '?');
                at++;
            } else {
                output_bytes(output, (const char *)at, length);
                at += length;
            }
        }
    }
    if (quote)
        output_char(output, '"');
}

/* ---- a small map from (number, number) to number ---- */

/*
 * Remembers which tracks already have names and which synthetic pid a
 * (process, device) pair got. Tracks number in the tens or thousands, not
 * in the millions like the rows, so this is the only memory that grows, and
 * only with the number of tracks. Open addressing, linear probing.
 */
typedef struct export_map_slot {
    int64_t first;
    int64_t second;
    int64_t value;
    int used;
} export_map_slot;

typedef struct export_map {
    export_map_slot *slots;
    size_t capacity; /* a power of two, or 0 before the first insert */
    size_t count;
} export_map;

static size_t export_map_hash(int64_t first, int64_t second)
{
    uint64_t hash = (uint64_t)first * 0x9E3779B97F4A7C15ull ^ (uint64_t)second;
    hash ^= hash >> 31;
    hash *= 0xBF58476D1CE4E5B9ull;
    hash ^= hash >> 29;
    return (size_t)hash;
}

/* The value stored for (first, second), or NULL when there is none. */
static int64_t *export_map_find(export_map *map, int64_t first, int64_t second)
{
    if (map->capacity == 0)
        return NULL;
    size_t mask = map->capacity - 1;
    for (size_t at = export_map_hash(first, second) & mask;; at = (at + 1) & mask) {
        export_map_slot *slot = &map->slots[at];
        if (!slot->used)
            return NULL;
        if (slot->first == first && slot->second == second)
            return &slot->value;
    }
}

/* Adds a key that is not in the map yet. Returns 0, or -1 out of memory. */
static int export_map_insert(export_map *map, int64_t first, int64_t second, int64_t value)
{
    if ((map->count + 1) * 2 > map->capacity) {
        size_t capacity = map->capacity == 0 ? 64 : map->capacity * 2;
        export_map_slot *slots = calloc(capacity, sizeof *slots);
        if (slots == NULL)
            return -1;
        for (size_t i = 0; i < map->capacity; i++) {
            if (!map->slots[i].used)
                continue;
            size_t at = export_map_hash(map->slots[i].first, map->slots[i].second);
            while (slots[at & (capacity - 1)].used)
                at++;
            slots[at & (capacity - 1)] = map->slots[i];
        }
        free(map->slots);
        map->slots = slots;
        map->capacity = capacity;
    }
    size_t mask = map->capacity - 1;
    size_t at = export_map_hash(first, second) & mask;
    while (map->slots[at].used)
        at = (at + 1) & mask;
    map->slots[at] = (export_map_slot){.first = first, .second = second, .value = value, .used = 1};
    map->count++;
    return 0;
}

static void export_map_free(export_map *map)
{
    free(map->slots);
    *map = (export_map){0};
}

/* ---- perfetto ---- */

typedef struct perfetto_context {
    export_output *output;
    uint64_t origin_ns; /* the session's start: ts 0 */
    int any_event;      /* an event was written: the next needs a comma */
    int out_of_memory;
    export_map gpu_processes;   /* (pid, device) -> synthetic trace pid */
    export_map named_processes; /* (trace pid, 0) -> 1: process_name written */
    export_map threads;         /* (trace pid, stream or thread id) -> trace tid */
    int64_t next_gpu_pid;
    int64_t next_large_stream_tid;
} perfetto_context;

/* Non-zero when the walk must stop: the output failed or memory ran out. */
static int perfetto_stopped(const perfetto_context *context)
{
    return context->output->error_number != 0 || context->out_of_memory;
}

/* Starts an event object; one event a line keeps the file greppable. */
static void perfetto_event_start(perfetto_context *context, const char *phase)
{
    output_text(context->output, context->any_event ? ",\n{\"ph\":\"" : "\n{\"ph\":\"");
    output_text(context->output, phase);
    output_text(context->output, "\"");
    context->any_event = 1;
}

/* ,"ts":T,"dur":D for a complete event. An end before its start (clock
 * trouble in a damaged row) becomes a zero duration, which viewers accept,
 * rather than a negative one, which they reject. */
static void perfetto_time_span(perfetto_context *context, uint64_t start_ns, uint64_t end_ns)
{
    output_text(context->output, ",\"ts\":");
    output_microseconds(context->output, (int64_t)(start_ns - context->origin_ns));
    output_text(context->output, ",\"dur\":");
    output_microseconds(context->output, end_ns > start_ns ? (int64_t)(end_ns - start_ns) : 0);
}

static void perfetto_process_name(perfetto_context *context, int64_t trace_pid, const char *name)
{
    perfetto_event_start(context, "M");
    output_text(context->output, ",\"name\":\"process_name\",\"pid\":");
    output_i64(context->output, trace_pid);
    output_text(context->output, ",\"tid\":0,\"args\":{\"name\":");
    output_json_string(context->output, name);
    output_text(context->output, "}}");
}

static void perfetto_thread_name(perfetto_context *context, int64_t trace_pid, int64_t tid,
                                 const char *name)
{
    perfetto_event_start(context, "M");
    output_text(context->output, ",\"name\":\"thread_name\",\"pid\":");
    output_i64(context->output, trace_pid);
    output_text(context->output, ",\"tid\":");
    output_i64(context->output, tid);
    output_text(context->output, ",\"args\":{\"name\":");
    output_json_string(context->output, name);
    output_text(context->output, "}}");
}

static const char *executable_base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash != NULL && slash[1] != '\0' ? slash + 1 : path;
}

/* Names an operating-system process's track group once: from the processes
 * table up front, or, for a pid that table lacks, when first met. */
static void perfetto_name_os_process(perfetto_context *context, int64_t pid, const char *executable)
{
    if (export_map_find(&context->named_processes, pid, 0) != NULL)
        return;
    if (export_map_insert(&context->named_processes, pid, 0, 1) != 0) {
        context->out_of_memory = 1;
        return;
    }
    char name[PATH_MAX + 64];
    if (executable != NULL && executable[0] != '\0')
        snprintf(name, sizeof name, "process %lld (%s)", (long long)pid,
                 executable_base_name(executable));
    else
        snprintf(name, sizeof name, "process %lld", (long long)pid);
    perfetto_process_name(context, pid, name);
}

/* The synthetic trace pid of a device of a process, named the first time
 * the pair is met. device_name may be NULL (no devices row). Returns -1 out
 * of memory. */
static int64_t perfetto_gpu_pid(perfetto_context *context, int64_t pid, int device,
                                const char *device_name)
{
    int64_t *found = export_map_find(&context->gpu_processes, pid, device);
    if (found != NULL)
        return *found;
    int64_t trace_pid = context->next_gpu_pid++;
    if (export_map_insert(&context->gpu_processes, pid, device, trace_pid) != 0) {
        context->out_of_memory = 1;
        return -1;
    }
    char name[512];
    if (device_name != NULL && device_name[0] != '\0')
        snprintf(name, sizeof name, "GPU %d (%s) [pid %lld]", device, device_name, (long long)pid);
    else
        snprintf(name, sizeof name, "GPU %d [pid %lld]", device, (long long)pid);
    perfetto_process_name(context, trace_pid, name);
    return trace_pid;
}

/* The trace tid of a stream of a GPU track group, named "stream N" the first
 * time it is met. Returns -1 out of memory. */
static int64_t perfetto_stream_tid(perfetto_context *context, int64_t trace_pid, uint64_t stream_id)
{
    int64_t key = (int64_t)stream_id;
    int64_t *found = export_map_find(&context->threads, trace_pid, key);
    if (found != NULL)
        return *found;
    int64_t tid = stream_id <= INT32_MAX ? (int64_t)stream_id : context->next_large_stream_tid++;
    if (export_map_insert(&context->threads, trace_pid, key, tid) != 0) {
        context->out_of_memory = 1;
        return -1;
    }
    char name[64];
    snprintf(name, sizeof name, "stream %llu", (unsigned long long)stream_id);
    perfetto_thread_name(context, trace_pid, tid, name);
    return tid;
}

/* Names a thread of an operating-system process the first time it is met. */
static void perfetto_name_os_thread(perfetto_context *context, int64_t pid, int64_t thread_id)
{
    if (export_map_find(&context->threads, pid, thread_id) != NULL)
        return;
    if (export_map_insert(&context->threads, pid, thread_id, thread_id) != 0) {
        context->out_of_memory = 1;
        return;
    }
    char name[64];
    /* On Linux the main thread's id is the process id. */
    snprintf(name, sizeof name, "thread %lld%s", (long long)thread_id,
             thread_id == pid ? " (main)" : "");
    perfetto_thread_name(context, pid, thread_id, name);
}

static int perfetto_process_row(const store_export_process_row *row, void *user)
{
    perfetto_context *context = user;
    perfetto_name_os_process(context, row->pid, row->executable);
    return perfetto_stopped(context);
}

static int perfetto_device_row(const store_export_device_row *row, void *user)
{
    perfetto_context *context = user;
    perfetto_gpu_pid(context, row->pid, row->device, row->name);
    return perfetto_stopped(context);
}

/* The common start of a kernel's or copy's event: the track, then the time. */
static int perfetto_device_event(perfetto_context *context, const char *category, int64_t pid,
                                 int device, uint64_t stream_id, uint64_t start_ns, uint64_t end_ns)
{
    int64_t trace_pid = perfetto_gpu_pid(context, pid, device, NULL);
    if (trace_pid < 0)
        return -1;
    int64_t tid = perfetto_stream_tid(context, trace_pid, stream_id);
    if (tid < 0)
        return -1;
    perfetto_event_start(context, "X");
    output_text(context->output, ",\"cat\":\"");
    output_text(context->output, category);
    output_text(context->output, "\",\"pid\":");
    output_i64(context->output, trace_pid);
    output_text(context->output, ",\"tid\":");
    output_i64(context->output, tid);
    perfetto_time_span(context, start_ns, end_ns);
    return 0;
}

static int perfetto_kernel_row(const store_kernel_row *row, void *user)
{
    perfetto_context *context = user;
    export_output *output = context->output;
    if (perfetto_device_event(context, "kernel", row->pid, row->device, row->stream_id,
                              row->start_ns, row->end_ns) != 0)
        return 1;
    output_text(output, ",\"name\":");
    output_json_string(output, row->name);
    output_text(output, ",\"args\":{\"correlation_id\":");
    output_u64(output, row->correlation_id);
    output_text(output, ",\"stream\":");
    output_u64(output, row->stream_id);
    output_text(output, ",\"grid\":[");
    for (int axis = 0; axis < 3; axis++) {
        if (axis > 0)
            output_char(output, ',');
        output_u64(output, row->grid[axis]);
    }
    output_text(output, "],\"block\":[");
    for (int axis = 0; axis < 3; axis++) {
        if (axis > 0)
            output_char(output, ',');
        output_u64(output, row->block[axis]);
    }
    output_text(output, "],\"registers_per_thread\":");
    output_u64(output, row->registers_per_thread);
    output_text(output, ",\"shared_memory_bytes\":");
    output_u64(output, row->shared_memory_bytes);
    output_text(output, ",\"context_id\":");
    output_u64(output, row->context_id);
    output_text(output, "}}");
    return perfetto_stopped(context);
}

static int perfetto_copy_row(const store_copy_row *row, void *user)
{
    perfetto_context *context = user;
    export_output *output = context->output;
    if (perfetto_device_event(context, row->is_memset ? "memset" : "copy", row->pid, row->device,
                              row->stream_id, row->start_ns, row->end_ns) != 0)
        return 1;
    output_text(output, ",\"name\":\"");
    if (row->is_memset) {
        output_text(output, "memset");
    } else {
        output_text(output, "copy ");
        output_text(output, cli_copy_kind_name(row->copy_kind, "unknown"));
    }
    output_text(output, "\",\"args\":{\"bytes\":");
    output_u64(output, row->bytes);
    if (!row->is_memset) {
        output_text(output, ",\"copy_kind\":\"");
        output_text(output, cli_copy_kind_name(row->copy_kind, "unknown"));
        output_char(output, '"');
    }
    output_text(output, ",\"correlation_id\":");
    output_u64(output, row->correlation_id);
    output_text(output, ",\"stream\":");
    output_u64(output, row->stream_id);
    if (row->status != 0) {
        /* A failed copy still took device time; say so rather than hide it. */
        output_text(output, ",\"failed\":");
        output_json_string(output, flare_status_name(row->status));
    }
    output_text(output, "}}");
    return perfetto_stopped(context);
}

static int perfetto_scope_row(const store_scope_row *row, void *user)
{
    perfetto_context *context = user;
    export_output *output = context->output;
    perfetto_name_os_process(context, row->pid, NULL);
    perfetto_name_os_thread(context, row->pid, row->thread_id);
    if (perfetto_stopped(context))
        return 1;
    perfetto_event_start(context, "X");
    output_text(output, ",\"cat\":\"scope\",\"pid\":");
    output_i64(output, row->pid);
    output_text(output, ",\"tid\":");
    output_i64(output, row->thread_id);
    perfetto_time_span(context, row->start_ns, row->end_ns);
    output_text(output, ",\"name\":");
    output_json_string(output, row->name);
    output_text(output, ",\"args\":{\"depth\":");
    output_u64(output, row->depth);
    output_text(output, ",\"instance_id\":");
    output_u64(output, row->instance_id);
    output_text(output, ",\"still_open\":");
    output_text(output, row->still_open ? "true" : "false");
    output_text(output, "}}");
    return perfetto_stopped(context);
}

static int perfetto_metric_row(const store_metric_row *row, void *user)
{
    perfetto_context *context = user;
    export_output *output = context->output;
    if (strncmp(row->name, EXPORT_CORRELATION_PREFIX, sizeof EXPORT_CORRELATION_PREFIX - 1) == 0)
        return 0;
    /* Device -1 is a metric of the process itself (launch counts...). */
    int64_t trace_pid = row->pid;
    if (row->device < 0)
        perfetto_name_os_process(context, row->pid, NULL);
    else
        trace_pid = perfetto_gpu_pid(context, row->pid, row->device, NULL);
    if (perfetto_stopped(context) || trace_pid < 0)
        return 1;
    perfetto_event_start(context, "C");
    output_text(output, ",\"name\":");
    output_json_string(output, row->name);
    output_text(output, ",\"pid\":");
    output_i64(output, trace_pid);
    output_text(output, ",\"ts\":");
    output_microseconds(output, (int64_t)(row->time_ns - context->origin_ns));
    output_text(output, ",\"args\":{\"value\":");
    output_i64(output, row->value);
    output_text(output, "}}");
    return perfetto_stopped(context);
}

/* Why an export failed, when the reason is not a write error (the caller
 * reports those, as it knows the output's name). */
typedef struct export_failure {
    char message[1024];
} export_failure;

/* Non-zero when the walk of one table failed: the reader's error, memory,
 * or a write error (left in the output for the caller to report). */
static int perfetto_walk_failed(perfetto_context *context, store *database, int status,
                                const char *what, export_failure *failure)
{
    if (status != 0) {
        snprintf(failure->message, sizeof failure->message, "reading %s: %s", what,
                 store_last_error(database));
        return 1;
    }
    if (context->out_of_memory) {
        snprintf(failure->message, sizeof failure->message, "out of memory exporting %s", what);
        return 1;
    }
    return context->output->error_number != 0;
}

/* Writes the whole trace. Returns 0, or -1 with failure filled in (or a
 * write error in output). */
static int export_perfetto(store *database, const store_session_summary *summary,
                           const char *session_dir, export_output *output, export_failure *failure)
{
    perfetto_context context = {
        .output = output,
        .origin_ns = summary->start_ns,
        .next_gpu_pid = EXPORT_GPU_PID_BASE,
        .next_large_stream_tid = EXPORT_LARGE_STREAM_TID_BASE,
    };
    /* otherData is the format's place for facts about the whole trace. */
    output_text(output, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"session\":");
    output_json_string(output, session_dir);
    output_session_identity(output, summary);
    output_text(output, ",\"start_unix_ns\":");
    output_i64(output, summary->start_unix_ns);
    output_text(output, ",\"start_ns\":");
    output_u64(output, summary->start_ns);
    output_text(output, "},\"traceEvents\":[");

    /* Processes and devices first, so that every track that has a name gets
     * it before its first event, and GPU pids number in a stable order. */
    int result = -1;
    int status = store_export_processes(database, perfetto_process_row, &context);
    if (perfetto_walk_failed(&context, database, status, "processes", failure))
        goto done;
    status = store_export_devices(database, perfetto_device_row, &context);
    if (perfetto_walk_failed(&context, database, status, "devices", failure))
        goto done;
    status = store_export_kernels(database, perfetto_kernel_row, &context);
    if (perfetto_walk_failed(&context, database, status, "kernels", failure))
        goto done;
    status = store_export_copies(database, perfetto_copy_row, &context);
    if (perfetto_walk_failed(&context, database, status, "copies", failure))
        goto done;
    status = store_export_scopes(database, perfetto_scope_row, &context);
    if (perfetto_walk_failed(&context, database, status, "scopes", failure))
        goto done;
    status = store_export_metrics(database, perfetto_metric_row, &context);
    if (perfetto_walk_failed(&context, database, status, "metrics", failure))
        goto done;
    output_text(output, "\n]}\n");
    result = 0;
done:
    export_map_free(&context.threads);
    export_map_free(&context.named_processes);
    export_map_free(&context.gpu_processes);
    return result;
}

/* ---- csv and json: the kernel table ---- */

typedef struct kernel_table_context {
    export_output *output;
    export_format format;
    int any_row; /* a row was written: json needs a comma before the next */
} kernel_table_context;

static const char *const kernel_table_columns[] = {
    "pid",
    "device",
    "stream",
    "correlation_id",
    "name",
    "start_ns",
    "end_ns",
    "duration_ns",
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
    "shared_memory_bytes",
    "registers_per_thread",
};
#define KERNEL_TABLE_COLUMN_COUNT (sizeof kernel_table_columns / sizeof kernel_table_columns[0])

/* One kernel's values in kernel_table_columns order; the name (column 4)
 * is written apart, as it is the only text. */
static void kernel_table_numbers(const store_kernel_row *row, int64_t values[],
                                 int value_is_unsigned[])
{
    uint64_t duration = row->end_ns > row->start_ns ? row->end_ns - row->start_ns : 0;
    /* uint64 columns travel as int64 bit patterns and are printed unsigned. */
    const struct {
        int64_t value;
        int is_unsigned;
    } fields[KERNEL_TABLE_COLUMN_COUNT] = {
        {row->pid, 0},
        {row->device, 0},
        {(int64_t)row->stream_id, 1},
        {(int64_t)row->correlation_id, 1},
        {0, 0}, /* name */
        {(int64_t)row->start_ns, 1},
        {(int64_t)row->end_ns, 1},
        {(int64_t)duration, 1},
        {row->grid[0], 1},
        {row->grid[1], 1},
        {row->grid[2], 1},
        {row->block[0], 1},
        {row->block[1], 1},
        {row->block[2], 1},
        {row->shared_memory_bytes, 1},
        {row->registers_per_thread, 1},
    };
    for (size_t i = 0; i < KERNEL_TABLE_COLUMN_COUNT; i++) {
        values[i] = fields[i].value;
        value_is_unsigned[i] = fields[i].is_unsigned;
    }
}

static void output_number(export_output *output, int64_t value, int is_unsigned)
{
    if (is_unsigned)
        output_u64(output, (uint64_t)value);
    else
        output_i64(output, value);
}

static int kernel_table_row(const store_kernel_row *row, void *user)
{
    kernel_table_context *context = user;
    export_output *output = context->output;
    int64_t values[KERNEL_TABLE_COLUMN_COUNT];
    int value_is_unsigned[KERNEL_TABLE_COLUMN_COUNT];
    kernel_table_numbers(row, values, value_is_unsigned);
    if (context->format == EXPORT_FORMAT_CSV) {
        for (size_t i = 0; i < KERNEL_TABLE_COLUMN_COUNT; i++) {
            if (i > 0)
                output_char(output, ',');
            if (i == 4)
                output_csv_field(output, row->name);
            else
                output_number(output, values[i], value_is_unsigned[i]);
        }
        /* RFC 4180 ends records with CRLF; every CSV reader accepts it. */
        output_text(output, "\r\n");
    } else {
        output_text(output, context->any_row ? ",\n{" : "\n{");
        for (size_t i = 0; i < KERNEL_TABLE_COLUMN_COUNT; i++) {
            if (i > 0)
                output_char(output, ',');
            output_char(output, '"');
            output_text(output, kernel_table_columns[i]);
            output_text(output, "\":");
            if (i == 4)
                output_json_string(output, row->name);
            else
                output_number(output, values[i], value_is_unsigned[i]);
        }
        output_char(output, '}');
    }
    context->any_row = 1;
    return output->error_number != 0;
}

/* Writes the kernel table as csv or json. Returns 0, or -1 with failure
 * filled in (or a write error in output). */
static int export_kernel_table(store *database, const store_session_summary *summary,
                               const char *session_dir, export_format format, export_output *output,
                               export_failure *failure)
{
    kernel_table_context context = {.output = output, .format = format};
    if (format == EXPORT_FORMAT_CSV) {
        for (size_t i = 0; i < KERNEL_TABLE_COLUMN_COUNT; i++) {
            if (i > 0)
                output_char(output, ',');
            output_text(output, kernel_table_columns[i]);
        }
        output_text(output, "\r\n");
    } else {
        output_text(output, "{\"session\":{\"directory\":");
        output_json_string(output, session_dir);
        output_session_identity(output, summary);
        output_text(output, ",\"start_ns\":");
        output_u64(output, summary->start_ns);
        output_text(output, ",\"end_ns\":");
        /* end_ns 0 means the session never ended (killed): unknown. */
        if (summary->end_ns != 0)
            output_u64(output, summary->end_ns);
        else
            output_text(output, "null");
        output_text(output, ",\"start_unix_ns\":");
        output_i64(output, summary->start_unix_ns);
        output_text(output, ",\"exit_status\":");
        if (summary->has_exit_status)
            output_i64(output, summary->exit_status);
        else
            output_text(output, "null");
        output_text(output, ",\"kernel_count\":");
        output_i64(output, summary->kernel_count);
        output_text(output, "},\"kernels\":[");
    }
    int status = store_export_kernels(database, kernel_table_row, &context);
    if (status != 0) {
        snprintf(failure->message, sizeof failure->message, "reading kernels: %s",
                 store_last_error(database));
        return -1;
    }
    if (output->error_number != 0)
        return -1;
    if (format == EXPORT_FORMAT_JSON)
        output_text(output, "\n]}\n");
    return 0;
}

/* ---- output file ---- */

/*
 * Prepares where the export goes: standard output when path is NULL or "-";
 * path itself when it is a device or a pipe (temporary is left empty then);
 * otherwise temporary (path + ".tmp"), opened for writing, after checking
 * that path's directory exists (it is never created: a typo in -o should
 * fail, not make directories) and that path is not a directory. Returns 0,
 * or -1 with a message in error; nothing is created on failure.
 */
static int output_open(const char *path, char *temporary, size_t temporary_size, FILE **file,
                       char *error, size_t error_size)
{
    temporary[0] = '\0';
    if (path == NULL || strcmp(path, "-") == 0) {
        *file = stdout;
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
        *file = fopen(path, "w");
        if (*file == NULL) {
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
    int length = snprintf(temporary, temporary_size, "%s.tmp", path);
    if (length < 0 || (size_t)length >= temporary_size) {
        temporary[0] = '\0';
        snprintf(error, error_size, "cannot write %s: path too long", path);
        return -1;
    }
    *file = fopen(temporary, "w");
    if (*file == NULL) {
        snprintf(error, error_size, "cannot create %s: %s", temporary, strerror(errno));
        temporary[0] = '\0';
        return -1;
    }
    return 0;
}

/*
 * Finishes the output: writes what is buffered, closes the file (not
 * standard output) and, when the export succeeded and there is a temporary
 * file, renames temporary over path. On any failure the
 * temporary file is removed, so path is either the whole export or
 * untouched. Returns 0, or -1 with a message in error.
 */
static int output_close(export_output *output, int succeeded, const char *path,
                        const char *temporary, char *error, size_t error_size)
{
    output_flush(output);
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
    return error_number != 0 ? -1 : 0;
}

/* ---- the command ---- */

/*
 * Matches argv[*index] against a short and a long option that take a value
 * ("-o FILE", "--output FILE", "--output=FILE"). Returns 0 when it is not
 * this option, 1 with *value set, or -1 when the value is missing.
 */
static int option_value(int argc, char **argv, int *index, const char *short_name,
                        const char *long_name, const char **value)
{
    const char *argument = argv[*index];
    size_t long_length = strlen(long_name);
    if (strncmp(argument, long_name, long_length) == 0 && argument[long_length] == '=') {
        *value = argument + long_length + 1;
        return 1;
    }
    if (strcmp(argument, short_name) != 0 && strcmp(argument, long_name) != 0)
        return 0;
    if (*index + 1 >= argc)
        return -1;
    *value = argv[++*index];
    return 1;
}

static export_format parse_format(const char *name)
{
    if (strcmp(name, "perfetto") == 0)
        return EXPORT_FORMAT_PERFETTO;
    if (strcmp(name, "csv") == 0)
        return EXPORT_FORMAT_CSV;
    if (strcmp(name, "json") == 0)
        return EXPORT_FORMAT_JSON;
    return EXPORT_FORMAT_NONE;
}

int cli_export(int argc, char **argv)
{
    const char *directory = NULL;
    const char *format_name = NULL;
    const char *output_path = NULL;
    for (int index = 1; index < argc; index++) {
        const char *argument = argv[index];
        if (cli_is_help(argument)) {
            fputs(export_help, stdout);
            return CLI_EXIT_OK;
        }
        int found = option_value(argc, argv, &index, "-f", "--format", &format_name);
        if (found < 0)
            return cli_usage_error("export", "option '%s' needs a format (%s)", argument,
                                   EXPORT_FORMAT_LIST);
        if (found > 0)
            continue;
        found = option_value(argc, argv, &index, "-o", "--output", &output_path);
        if (found < 0)
            return cli_usage_error("export", "option '%s' needs a file name", argument);
        if (found > 0)
            continue;
        if (argument[0] == '-' && argument[1] != '\0')
            return cli_usage_error("export", "unknown option '%s'", argument);
        if (directory != NULL)
            return cli_usage_error("export", "unexpected argument '%s' (one DIR at most)",
                                   argument);
        directory = argument;
    }
    if (format_name == NULL)
        return cli_usage_error("export", "which format? give --format (%s)", EXPORT_FORMAT_LIST);
    export_format format = parse_format(format_name);
    if (format == EXPORT_FORMAT_NONE)
        return cli_usage_error("export", "unknown format '%s' (formats: %s)", format_name,
                               EXPORT_FORMAT_LIST);
    if (output_path != NULL && output_path[0] == '\0')
        return cli_usage_error("export", "option '--output' needs a file name");

    /* The session first: a missing session must not leave an output file. */
    char session_dir[PATH_MAX];
    char error[3 * PATH_MAX];
    if (cli_find_session(directory, session_dir, sizeof session_dir, error, sizeof error) != 0)
        return cli_failure("export", "%s", error);
    store *database;
    if (store_open(session_dir, STORE_OPEN_READ, &database, error, sizeof error) != 0)
        return cli_failure("export", "%s", error);

    /* One snapshot for the whole export, so that a session still being
     * written exports consistently: the counts match the rows. */
    store_session_summary summary;
    if (store_export_begin(database) != 0 || store_read_session(database, &summary) != 0) {
        cli_failure("export", "cannot read the session in %s: %s", session_dir,
                    store_last_error(database));
        store_close(database);
        return CLI_EXIT_FAILURE;
    }

    export_output *output = malloc(sizeof *output);
    char temporary[PATH_MAX + 8];
    FILE *file = NULL;
    if (output == NULL) {
        store_export_end(database);
        store_close(database);
        return cli_failure("export", "out of memory");
    }
    if (output_open(output_path, temporary, sizeof temporary, &file, error, sizeof error) != 0) {
        free(output);
        store_export_end(database);
        store_close(database);
        return cli_failure("export", "%s", error);
    }
    output->file = file;
    output->error_number = 0;
    output->used = 0;

    export_failure failure = {{0}};
    int status;
    if (format == EXPORT_FORMAT_PERFETTO)
        status = export_perfetto(database, &summary, session_dir, output, &failure);
    else
        status = export_kernel_table(database, &summary, session_dir, format, output, &failure);
    store_export_end(database);
    store_close(database);

    int to_file = temporary[0] != '\0';
    int closed = output_close(output, status == 0, output_path, temporary, error, sizeof error);
    free(output);
    if (failure.message[0] != '\0')
        return cli_failure("export", "%s: %s (%s)", session_dir, failure.message,
                           to_file ? "no file written" : "the output is incomplete");
    if (closed != 0)
        return cli_failure("export", "%s", error);
    return status == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}
