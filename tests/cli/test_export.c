/*
 * test_export.c: `flare export` as a user meets it: usage errors and their
 * exit codes, a missing or corrupt session, -o into a missing directory, no
 * half-written file after a failure, and the three formats checked by real
 * parsers (python3's json and csv modules) against exact expectations.
 *
 * Two sessions: one crafted through the store API with hostile names
 * (commas, quotes, backslashes, control characters, invalid UTF-8, 300
 * characters), uint64 ids above INT64_MAX and a stream id above INT32_MAX,
 * so every exported value can be asserted exactly; and one recorded by
 * `flare trace -- flare-demo 3`, checked against its own database. Runs the
 * built binaries (FLARE_TEST_BIN_DIR) in child processes; needs python3.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "flare/flare.h"
#include "store/store.h"
#include "cli_run.h"
#include "test_util.h"

static char bin_dir[1024];
static char scratch[256];
static char crafted_dir[512];   /* the crafted session, newest under scratch/flare-out */
static char expected_path[600]; /* what the crafted session must export as */
static char checker_path[600];  /* the python3 checker, written at setup */
static char out_text[65536];
static char err_text[65536];

/* ---- running programs ---- */

/* Runs program (a path, or a name looked up in PATH when search is set)
 * with arguments (NULL-terminated) in scratch; captures the start of its
 * output; returns the exit code as a shell reports it. */
static int run_program(const char *program, int search, const char *const *arguments)
{
    int status = cli_run_program(program, search, arguments, scratch, out_text, sizeof(out_text),
                                 err_text, sizeof(err_text));
    assert_true(status >= 0);
    return status;
}

static int run_flare_program(const char *name, const char *const *arguments)
{
    char path[1200];
    snprintf(path, sizeof(path), "%s/%s", bin_dir, name);
    return run_program(path, 0, arguments);
}

#define FLARE(...) run_flare_program("flare", (const char *const[]){__VA_ARGS__, NULL})

/* Runs the python3 checker in one of its modes; fails the test with the
 * checker's own message unless every assertion in it held. */
static void check_with_python(const char *mode, const char *path, const char *reference)
{
    const char *arguments[] = {checker_path, mode, path, reference, NULL};
    int code = run_program("python3", 1, arguments);
    if (code == 98)
        fail_msg("python3 was not found: it is needed to validate export output");
    if (code != 0)
        fail_msg("checker %s %s failed (exit %d):\n%s%s", mode, path, code, out_text, err_text);
}

static void expect_usage_error(int code, const char *word)
{
    assert_int_equal(code, 2);
    if (strstr(err_text, word) == NULL)
        fail_msg("stderr does not name '%s': %s", word, err_text);
}

static void expect_failure_naming(int code, const char *word)
{
    assert_int_equal(code, 1);
    if (strstr(err_text, word) == NULL)
        fail_msg("stderr does not name '%s': %s", word, err_text);
}

static int file_exists(const char *path)
{
    return access(path, F_OK) == 0;
}

/* Whether a temporary file of an export to file (file.tmp-XXXXXX) is left. */
static int temporary_left(const char *file)
{
    char directory[700], prefix[300];
    const char *slash = strrchr(file, '/');
    snprintf(directory, sizeof(directory), "%.*s", (int)(slash - file), file);
    snprintf(prefix, sizeof(prefix), "%s.tmp", slash + 1);
    DIR *listing = opendir(directory);
    if (listing == NULL)
        return 0;
    int found = 0;
    struct dirent *entry;
    while ((entry = readdir(listing)) != NULL)
        found |= strncmp(entry->d_name, prefix, strlen(prefix)) == 0;
    closedir(listing);
    return found;
}

/* ---- the crafted session ---- */

#define CRAFTED_PID     4242
#define CRAFTED_ORIGIN  1000000000000ull
#define LARGE_STREAM_ID 0x100000005ull /* above INT32_MAX: needs a mapped tid */

typedef struct crafted_name {
    const char *stored;   /* the bytes written to the database (NULL: no name) */
    const char *exported; /* the UTF-8 text every format must give back */
} crafted_name;

static char long_name[301];

static crafted_name kernel_names[] = {
    {"void add<float, 2>(float*, int)", "void add<float, 2>(float*, int)"},
    {"say \"hi\", twice", "say \"hi\", twice"},
    {"back\\slash\\", "back\\slash\\"},
    {"line1\nline2\r\nline3", "line1\nline2\r\nline3"},
    {"tab\there", "tab\there"},
    {"bad \xC3\x28 utf8", "bad ?( utf8"},
    {"x\x80\xC0\xAF\xED\xA0\x80\xF4\x90\x80\x80y\xE2\x82", "x??????????y??"},
    {"\x01\x1f control", "\x01\x1f control"},
    {"caf\xC3\xA9 \xE6\x97\xA5 \xF0\x9F\x94\xA5", "caf\xC3\xA9 \xE6\x97\xA5 \xF0\x9F\x94\xA5"},
    {NULL, ""},
    {long_name, long_name},
    {"void add<float, 2>(float*, int)", "void add<float, 2>(float*, int)"},
};
#define KERNEL_COUNT (sizeof(kernel_names) / sizeof(kernel_names[0]))

static const char *const scope_names[] = {"outer, \"scope\"", "inner\\n", "worker\tscope",
                                          "left open", "elsewhere"};
#define SCOPE_COUNT (sizeof(scope_names) / sizeof(scope_names[0]))

/* Writes text hex-encoded, prefixed with 'h' so that '' is a token too:
 * the expectations file then cannot be confused by any byte of a name. */
static void write_hex(FILE *file, const char *text)
{
    fputs(" h", file);
    for (const unsigned char *at = (const unsigned char *)text; *at != '\0'; at++)
        fprintf(file, "%02x", *at);
}

static void make_crafted_session(void)
{
    memset(long_name, 'k', 300);
    memcpy(long_name + 290, "_end_12345", 10);
    long_name[300] = '\0';

    char base[400];
    snprintf(base, sizeof(base), "%s/flare-out", scratch);
    assert_int_equal(mkdir(base, 0755), 0);
    snprintf(crafted_dir, sizeof(crafted_dir), "%s/20990101T000000Z-1", base);
    assert_int_equal(mkdir(crafted_dir, 0755), 0);

    char error[1024];
    store *database = NULL;
    if (store_open(crafted_dir, STORE_OPEN_WRITE, &database, error, sizeof(error)) != 0)
        fail_msg("store_open: %s", error);
    FILE *expected = fopen(expected_path, "w");
    assert_non_null(expected);
    fprintf(expected, "origin %llu\n", (unsigned long long)CRAFTED_ORIGIN);

    store_session_info info = {
        .command = "crafted \"session\", with\ttabs",
        .start_ns = CRAFTED_ORIGIN,
        .start_unix_ns = 1700000000000000000ll,
        .host = "test-host",
        .flare_version = "0.1.0",
    };
    assert_int_equal(store_session_begin(database, &info), 0);
    assert_int_equal(store_process_begin(database, CRAFTED_PID, 1, CRAFTED_ORIGIN, "cuda",
                                         "/opt/my tools/train,v2"),
                     0);
    fprintf(expected, "process %d", CRAFTED_PID);
    write_hex(expected, "process 4242 (train,v2)");
    fputc('\n', expected);
    const char *device_names[] = {"NVIDIA \"Test\" GPU", "Second\\GPU"};
    for (int device = 0; device < 2; device++) {
        assert_int_equal(
            store_put_device(database, CRAFTED_PID, device, device_names[device], "cuda"), 0);
        char label[128];
        snprintf(label, sizeof(label), "GPU %d (%s) [pid %d]", device, device_names[device],
                 CRAFTED_PID);
        fprintf(expected, "device %d %d", CRAFTED_PID, device);
        write_hex(expected, label);
        fputc('\n', expected);
    }

    for (size_t i = 0; i < KERNEL_COUNT; i++) {
        store_kernel_row row = {
            .pid = CRAFTED_PID,
            .device = (int)(i % 2),
            .stream_id = i % 3 == 0 ? LARGE_STREAM_ID : 7,
            /* uint64 ids above INT64_MAX must come back exact, unsigned. */
            .correlation_id = i == 1 ? UINT64_MAX - 4 : 100 + i,
            .name = kernel_names[i].stored,
            .start_ns = CRAFTED_ORIGIN + 1000 * i + 1,
            .end_ns = CRAFTED_ORIGIN + 1000 * i + 1 + 1234 + i,
            .grid = {(uint32_t)(i + 1), 2, 3},
            .block = {128, (uint32_t)i, 1},
            .shared_memory_bytes = (uint32_t)(48 * i),
            .registers_per_thread = (uint32_t)(16 + i),
            /* Every other kernel ran in a CUDA graph; node ids past 2^32. */
            .graph_id = i % 2 ? (uint32_t)(3 + i) : 0,
            .graph_node_id = i % 2 ? (1ull << 33) + i : 0,
        };
        if (i == 4)
            row.end_ns = row.start_ns; /* zero length */
        assert_int_equal(store_put_kernel(database, &row), 0);
        fprintf(expected, "kernel");
        write_hex(expected, kernel_names[i].exported);
        fprintf(expected, " %lld %d %llu %llu %llu %llu %u %u %u %u %u %u %u %u %u %llu\n",
                (long long)row.pid, row.device, (unsigned long long)row.stream_id,
                (unsigned long long)row.correlation_id, (unsigned long long)row.start_ns,
                (unsigned long long)row.end_ns, row.grid[0], row.grid[1], row.grid[2], row.block[0],
                row.block[1], row.block[2], row.shared_memory_bytes, row.registers_per_thread,
                row.graph_id, (unsigned long long)row.graph_node_id);
    }

    store_copy_row copies[] = {
        {CRAFTED_PID, 0, 7, 500, 0, 1, 4096, CRAFTED_ORIGIN + 50, CRAFTED_ORIGIN + 950, 0, 0, 0},
        {CRAFTED_PID, 1, 7, 501, 1, 0, 1 << 20, CRAFTED_ORIGIN + 60, CRAFTED_ORIGIN + 70, 0, 0, 0},
        {CRAFTED_PID, 0, LARGE_STREAM_ID, 502, 0, 2, 8, CRAFTED_ORIGIN + 80, CRAFTED_ORIGIN + 90,
         FLARE_ERR_IO, 0, 0},
    };
    for (size_t i = 0; i < sizeof(copies) / sizeof(copies[0]); i++) {
        assert_int_equal(store_put_copy(database, &copies[i]), 0);
        fprintf(expected, "copy %lld %d %llu %llu %d %d %llu %llu %llu", (long long)copies[i].pid,
                copies[i].device, (unsigned long long)copies[i].stream_id,
                (unsigned long long)copies[i].correlation_id, copies[i].is_memset,
                copies[i].copy_kind, (unsigned long long)copies[i].bytes,
                (unsigned long long)copies[i].start_ns, (unsigned long long)copies[i].end_ns);
        write_hex(expected, copies[i].status != 0 ? flare_status_name(copies[i].status) : "");
        fputc('\n', expected);
    }

    /* Scopes on two threads of the process, one left open, and one of a
     * process with no processes row (it must still get a named track). */
    const int64_t scope_pids[] = {CRAFTED_PID, CRAFTED_PID, CRAFTED_PID, CRAFTED_PID, 5555};
    const int64_t scope_threads[] = {CRAFTED_PID, CRAFTED_PID, 4243, 4243, 5556};
    const uint32_t scope_depths[] = {0, 1, 0, 0, 0};
    for (size_t i = 0; i < SCOPE_COUNT; i++) {
        store_scope_row row = {
            .pid = scope_pids[i],
            .thread_id = scope_threads[i],
            .instance_id = i == 0 ? UINT64_MAX : 7000 + i,
            .name = scope_names[i],
            .depth = scope_depths[i],
            .start_ns = CRAFTED_ORIGIN + 10 + 100 * i,
            .end_ns = CRAFTED_ORIGIN + 10 + 100 * i + 77777,
            .still_open = i == 3,
        };
        assert_int_equal(store_put_scope(database, &row), 0);
        fprintf(expected, "scope");
        write_hex(expected, row.name);
        fprintf(expected, " %lld %lld %llu %u %llu %llu %d\n", (long long)row.pid,
                (long long)row.thread_id, (unsigned long long)row.instance_id, row.depth,
                (unsigned long long)row.start_ns, (unsigned long long)row.end_ns, row.still_open);
    }

    /* Metrics: two gauges of two devices, one of the process itself, and a
     * correlation pair that the export must leave out. */
    const struct {
        int device;
        const char *name;
        uint64_t time_ns;
        int64_t value;
        int exported;
    } metrics[] = {
        {0, "power_mw", CRAFTED_ORIGIN + 100, 250000, 1},
        {0, "power_mw", CRAFTED_ORIGIN + 200, 310000, 1},
        {0, "power_mw", CRAFTED_ORIGIN + 300, 305500, 1},
        {1, "temperature_c", CRAFTED_ORIGIN + 150, 61, 1},
        {1, "temperature_c", CRAFTED_ORIGIN + 250, 63, 1},
        {-1, "launches", CRAFTED_ORIGIN + 400, 12, 1},
        {-1, "launches", CRAFTED_ORIGIN - 1500, -3, 1}, /* before the session: negative ts */
        {-1, "external_correlation.1.101", 0, 99, 0},
    };
    for (size_t i = 0; i < sizeof(metrics) / sizeof(metrics[0]); i++) {
        store_metric_row row = {CRAFTED_PID, metrics[i].device, metrics[i].name, metrics[i].time_ns,
                                metrics[i].value};
        assert_int_equal(store_put_metric(database, &row), 0);
        if (!metrics[i].exported)
            continue;
        fprintf(expected, "metric");
        write_hex(expected, row.name);
        fprintf(expected, " %lld %d %llu %lld\n", (long long)row.pid, row.device,
                (unsigned long long)row.time_ns, (long long)row.value);
    }
    assert_int_equal(store_session_end(database, CRAFTED_ORIGIN + 99999, 1, 3), 0);
    store_close(database);
    assert_int_equal(fclose(expected), 0);
}

/* ---- the python3 checker ---- */

/*
 * Modes: perfetto|csv|json against the crafted session's expectations file,
 * or perfetto-db|csv-db|json-db against a session database (read with
 * python's sqlite3). Every file is read as strict UTF-8 and parsed by the
 * standard json or csv module; json numbers are read as Decimal so that
 * microsecond times compare exactly. Exits non-zero on the first mismatch.
 */
static const char checker_script[] =
    "import csv, json, sqlite3, sys\n"
    "from decimal import Decimal\n"
    "mode, path, reference = sys.argv[1:4]\n"
    "COLUMNS = ['pid', 'device', 'stream', 'correlation_id', 'name', 'start_ns', 'end_ns',\n"
    "           'duration_ns', 'grid_x', 'grid_y', 'grid_z', 'block_x', 'block_y', 'block_z',\n"
    "           'shared_memory_bytes', 'registers_per_thread', 'graph_id', 'graph_node_id']\n"
    "def fail(message):\n"
    "    print('export check failed:', message)\n"
    "    sys.exit(1)\n"
    "def expect(condition, message):\n"
    "    if not condition:\n"
    "        fail(message)\n"
    "def same(actual, wanted, what):\n"
    "    expect(actual == wanted, '%s: got %r, expected %r' % (what, actual, wanted))\n"
    "def us(ns):\n"
    "    return Decimal(ns) / 1000\n"
    "def text(token):\n"
    "    return bytes.fromhex(token[1:]).decode('utf-8')\n"
    "def load_json():\n"
    "    with open(path, encoding='utf-8', errors='strict') as f:\n"
    "        return json.load(f, parse_float=Decimal)\n"
    "def load_expected():\n"
    "    e = {'process': {}, 'device': {}, 'kernel': [], 'copy': [], 'scope': [], 'metric': []}\n"
    "    for line in open(reference, encoding='ascii'):\n"
    "        f = line.split()\n"
    "        if f[0] == 'origin':\n"
    "            e['origin'] = int(f[1])\n"
    "        elif f[0] == 'process':\n"
    "            e['process'][int(f[1])] = text(f[2])\n"
    "        elif f[0] == 'device':\n"
    "            e['device'][(int(f[1]), int(f[2]))] = text(f[3])\n"
    "        elif f[0] == 'kernel':\n"
    "            n = [int(x) for x in f[2:]]\n"
    "            e['kernel'].append({'name': text(f[1]), 'pid': n[0], 'device': n[1],\n"
    "                'stream': n[2], 'correlation_id': n[3], 'start_ns': n[4], 'end_ns': n[5],\n"
    "                'duration_ns': n[5] - n[4], 'grid': n[6:9], 'block': n[9:12],\n"
    "                'shared_memory_bytes': n[12], 'registers_per_thread': n[13],\n"
    "                'graph_id': n[14], 'graph_node_id': n[15]})\n"
    "        elif f[0] == 'copy':\n"
    "            n = [int(x) for x in f[1:10]]\n"
    "            e['copy'].append({'pid': n[0], 'device': n[1], 'stream': n[2],\n"
    "                'correlation_id': n[3], 'is_memset': n[4], 'copy_kind': n[5], 'bytes': n[6],\n"
    "                'start_ns': n[7], 'end_ns': n[8], 'failed': text(f[10])})\n"
    "        elif f[0] == 'scope':\n"
    "            n = [int(x) for x in f[2:]]\n"
    "            e['scope'].append({'name': text(f[1]), 'pid': n[0], 'tid': n[1],\n"
    "                'instance_id': n[2], 'depth': n[3], 'start_ns': n[4], 'end_ns': n[5],\n"
    "                'still_open': bool(n[6])})\n"
    "        elif f[0] == 'metric':\n"
    "            n = [int(x) for x in f[2:]]\n"
    "            e['metric'].append({'name': text(f[1]), 'pid': n[0], 'device': n[1],\n"
    "                'time_ns': n[2], 'value': n[3]})\n"
    "    return e\n"
    "def table_row(k):\n"
    "    return {'pid': k['pid'], 'device': k['device'], 'stream': k['stream'],\n"
    "        'correlation_id': k['correlation_id'], 'name': k['name'], 'start_ns': k['start_ns'],\n"
    "        'end_ns': k['end_ns'], 'duration_ns': max(k['end_ns'] - k['start_ns'], 0),\n"
    "        'grid_x': k['grid'][0], 'grid_y': k['grid'][1], 'grid_z': k['grid'][2],\n"
    "        'block_x': k['block'][0], 'block_y': k['block'][1], 'block_z': k['block'][2],\n"
    "        'shared_memory_bytes': k['shared_memory_bytes'],\n"
    "        'registers_per_thread': k['registers_per_thread'], 'graph_id': k['graph_id'],\n"
    "        'graph_node_id': k['graph_node_id']}\n"
    "def database():\n"
    "    db = sqlite3.connect(reference)\n"
    "    db.text_factory = lambda b: b.decode('utf-8', 'strict')\n"
    "    origin = db.execute('SELECT start_ns FROM session').fetchone()[0]\n"
    "    kernels = [{'pid': r[0], 'device': r[1], 'stream': r[2], 'correlation_id': r[3],\n"
    "        'name': r[4], 'start_ns': r[5], 'end_ns': r[6], 'grid': list(r[7:10]),\n"
    "        'block': list(r[10:13]), 'shared_memory_bytes': r[13],\n"
    "        'registers_per_thread': r[14], 'graph_id': r[15], 'graph_node_id': r[16]}\n"
    "        for r in db.execute(\n"
    "        'SELECT k.pid, k.device, k.stream_id, k.correlation_id, n.name, k.start_ns,'\n"
    "        ' k.end_ns, grid_x, grid_y, grid_z, block_x, block_y, block_z,'\n"
    "        ' shared_memory_bytes, registers_per_thread, graph_id, graph_node_id FROM kernels k'\n"
    "        ' JOIN names n ON n.id = k.name_id ORDER BY k.rowid')]\n"
    "    copies = db.execute('SELECT count(*) FROM copies').fetchone()[0]\n"
    "    scopes = [{'name': r[0], 'pid': r[1], 'tid': r[2], 'start_ns': r[3], 'end_ns': r[4]}\n"
    "        for r in db.execute('SELECT n.name, s.pid, s.thread_id, s.start_ns, s.end_ns'\n"
    "        ' FROM scopes s JOIN names n ON n.id = s.name_id ORDER BY s.rowid')]\n"
    "    return origin, kernels, copies, scopes\n"
    "def check_trace_structure(d):\n"
    "    expect('displayTimeUnit' not in d, 'displayTimeUnit (old Perfetto reads ns as ts unit)')\n"
    "    same(d['otherData'].get('time_unit'), 'us', 'otherData.time_unit')\n"
    "    events = d['traceEvents']\n"
    "    expect(isinstance(events, list) and events, 'traceEvents is an empty or no list')\n"
    "    processes, threads = {}, {}\n"
    "    for e in events:\n"
    "        expect(e.get('ph') in ('M', 'X', 'C', 's', 'f', 'i'), 'unexpected phase in %r' % e)\n"
    "        expect(isinstance(e.get('name'), str), 'event without a name: %r' % e)\n"
    "        expect(isinstance(e.get('pid'), int) and 0 <= e['pid'] < 2**32, 'pid in %r' % e)\n"
    "        if e['ph'] == 'M':\n"
    "            same(e.get('cat'), '__metadata', 'metadata category')\n"
    "            if e['name'] in ('process_sort_index', 'thread_sort_index'):\n"
    "                expect(isinstance(e['args']['sort_index'], int), 'sort index %r' % e)\n"
    "                continue\n"
    "            expect(e['name'] in ('process_name', 'thread_name'), 'metadata %r' % e)\n"
    "            expect(isinstance(e['args']['name'], str), 'metadata without a name %r' % e)\n"
    "            key = e['pid'] if e['name'] == 'process_name' else (e['pid'], e['tid'])\n"
    "            table = processes if e['name'] == 'process_name' else threads\n"
    "            expect(key not in table, 'track named twice: %r' % e)\n"
    "            table[key] = e['args']['name']\n"
    "        elif e['ph'] == 'X':\n"
    "            for field in ('ts', 'dur', 'pid', 'tid', 'cat', 'args'):\n"
    "                expect(field in e, 'X event without %s: %r' % (field, e))\n"
    "            expect(isinstance(e['tid'], int) and 0 <= e['tid'] < 2**32, 'tid in %r' % e)\n"
    "            expect(isinstance(e['ts'], Decimal) and isinstance(e['dur'], Decimal),\n"
    "                   'ts and dur must be decimals: %r' % e)\n"
    "            expect(e['dur'] >= 0, 'negative duration: %r' % e)\n"
    "            expect((e['pid'], e['tid']) in threads, 'X event on an unnamed thread %r' % e)\n"
    "        elif e['ph'] == 'C':\n"
    "            expect(isinstance(e.get('ts'), Decimal), 'C event without ts: %r' % e)\n"
    "            expect(isinstance(e['args'].get('value'), int), 'C event value: %r' % e)\n"
    "        if e['ph'] != 'M':\n"
    "            expect(e['pid'] in processes, 'event in an unnamed process: %r' % e)\n"
    "        expect(not e['name'].startswith('external_correlation.'), 'correlation %r' % e)\n"
    "    def of(phase, *categories):\n"
    "        return [e for e in events if e['ph'] == phase and\n"
    "                (not categories or e.get('cat') in categories)]\n"
    "    return of, processes, threads\n"
    "def check_perfetto():\n"
    "    x = load_expected()\n"
    "    origin = x['origin']\n"
    "    of, processes, threads = check_trace_structure(load_json())\n"
    "    same(len(of('X')), len(x['kernel']) + len(x['copy']) + len(x['scope']), 'X events')\n"
    "    same(len(of('M')), 2 * (len(processes) + len(threads)), 'M events (name, sort index)')\n"
    "    same(sorted(n for n in processes.values() if n.startswith('process ')),\n"
    "         sorted(list(x['process'].values()) + ['process 5555']), 'process names')\n"
    "    kernels = of('X', 'kernel')\n"
    "    same(len(kernels), len(x['kernel']), 'kernel events')\n"
    "    for i, (e, k) in enumerate(zip(kernels, x['kernel'])):\n"
    "        what = 'kernel %d' % i\n"
    "        same(e['name'], k['name'], what + ' name')\n"
    "        same(e['ts'], us(k['start_ns'] - origin), what + ' ts')\n"
    "        same(e['dur'], us(k['end_ns'] - k['start_ns']), what + ' dur')\n"
    "        same(processes[e['pid']], x['device'][(k['pid'], k['device'])], what + ' process')\n"
    "        same(threads[(e['pid'], e['tid'])], 'stream %d' % k['stream'], what + ' thread')\n"
    "        if k['stream'] < 2**31:\n"
    "            same(e['tid'], k['stream'], what + ' tid')\n"
    "        a = e['args']\n"
    "        for key, column in (('correlation', 'correlation_id'), ('grid', 'grid'),\n"
    "                ('block', 'block'), ('shared memory', 'shared_memory_bytes'),\n"
    "                ('registers per thread', 'registers_per_thread'), ('stream', 'stream'),\n"
    "                ('device', 'device')):\n"
    "            same(a[key], k[column], what + ' ' + key)\n"
    "        same(a.get('graph_id', 0), k['graph_id'], what + ' graph_id')\n"
    "        same(a.get('graph_node_id', 0), k['graph_node_id'], what + ' graph_node_id')\n"
    "    kinds = {0: 'unknown', 1: 'host to device', 2: 'device to host'}\n"
    "    copies = of('X', 'gpu_memcpy', 'gpu_memset')\n"
    "    same(len(copies), len(x['copy']), 'copy events')\n"
    "    for i, (e, c) in enumerate(zip(copies, x['copy'])):\n"
    "        what = 'copy %d' % i\n"
    "        same(e['cat'], 'gpu_memset' if c['is_memset'] else 'gpu_memcpy', what + ' category')\n"
    "        same(e['name'], 'memset' if c['is_memset'] else 'copy ' + kinds[c['copy_kind']],\n"
    "             what + ' name')\n"
    "        same(e['ts'], us(c['start_ns'] - origin), what + ' ts')\n"
    "        same(e['dur'], us(c['end_ns'] - c['start_ns']), what + ' dur')\n"
    "        same(processes[e['pid']], x['device'][(c['pid'], c['device'])], what + ' process')\n"
    "        same(threads[(e['pid'], e['tid'])], 'stream %d' % c['stream'], what + ' thread')\n"
    "        same(e['args']['bytes'], c['bytes'], what + ' bytes')\n"
    "        same(e['args']['correlation'], c['correlation_id'], what + ' correlation')\n"
    "        if c['end_ns'] > c['start_ns']:\n"
    "            bandwidth = e['args']['memory bandwidth (GB/s)']\n"
    "            wanted = Decimal(c['bytes']) / (c['end_ns'] - c['start_ns'])\n"
    "            expect(abs(bandwidth - wanted) <= wanted * Decimal('1e-12'), what + ' "
    "bandwidth')\n"
    "        same(e['args'].get('failed', ''), c['failed'], what + ' failure')\n"
    "        if not c['is_memset']:\n"
    "            same(e['args']['copy_kind'], kinds[c['copy_kind']], what + ' kind')\n"
    "    scopes = of('X', 'scope')\n"
    "    same(len(scopes), len(x['scope']), 'scope events')\n"
    "    for i, (e, s) in enumerate(zip(scopes, x['scope'])):\n"
    "        what = 'scope %d' % i\n"
    "        same(e['name'], s['name'], what + ' name')\n"
    "        same((e['pid'], e['tid']), (s['pid'], s['tid']), what + ' track')\n"
    "        same(e['ts'], us(s['start_ns'] - origin), what + ' ts')\n"
    "        same(e['dur'], us(s['end_ns'] - s['start_ns']), what + ' dur')\n"
    "        for key in ('depth', 'instance_id', 'still_open'):\n"
    "            same(e['args'][key], s[key], what + ' ' + key)\n"
    "        main = ' (main)' if s['tid'] == s['pid'] else ''\n"
    "        same(threads[(e['pid'], e['tid'])], 'thread %d%s' % (s['tid'], main), what)\n"
    "    counters = of('C')\n"
    "    same(len(counters), len(x['metric']), 'counter events')\n"
    "    for i, (e, m) in enumerate(zip(counters, x['metric'])):\n"
    "        what = 'counter %d' % i\n"
    "        same(e['name'], m['name'], what + ' name')\n"
    "        same(e['ts'], us(m['time_ns'] - origin), what + ' ts')\n"
    "        same(e['args']['value'], m['value'], what + ' value')\n"
    "        if m['device'] < 0:\n"
    "            same(e['pid'], m['pid'], what + ' pid')\n"
    "        else:\n"
    "            same(processes[e['pid']], x['device'][(m['pid'], m['device'])], what)\n"
    "def check_csv(kernels):\n"
    "    with open(path, newline='', encoding='utf-8', errors='strict') as f:\n"
    "        rows = list(csv.reader(f, strict=True))\n"
    "    same(rows[0], COLUMNS, 'header')\n"
    "    same(len(rows) - 1, len(kernels), 'rows')\n"
    "    for i, (row, k) in enumerate(zip(rows[1:], kernels)):\n"
    "        t = table_row(k)\n"
    "        same(row, [t[c] if c == 'name' else str(t[c]) for c in COLUMNS], 'row %d' % i)\n"
    "    raw = open(path, 'rb').read()\n"
    "    expect(raw.endswith(b'\\r\\n'), 'records end with CRLF')\n"
    "def check_json(kernels, origin):\n"
    "    d = load_json()\n"
    "    same(d['session']['start_ns'], origin, 'session start')\n"
    "    same(d['session']['kernel_count'], len(kernels), 'kernel_count')\n"
    "    same(d['kernels'], [table_row(k) for k in kernels], 'kernels')\n"
    "def check_perfetto_against_database():\n"
    "    origin, kernels, copies, scopes = database()\n"
    "    of, processes, threads = check_trace_structure(load_json())\n"
    "    events = of('X', 'kernel')\n"
    "    same(len(events), len(kernels), 'kernel events')\n"
    "    for i, (e, k) in enumerate(zip(events, kernels)):\n"
    "        what = 'kernel %d' % i\n"
    "        same(e['name'], k['name'], what + ' name')\n"
    "        same(e['ts'], us(k['start_ns'] - origin), what + ' ts')\n"
    "        same(e['dur'], us(k['end_ns'] - k['start_ns']), what + ' dur')\n"
    "        same(e['args']['correlation'], k['correlation_id'], what + ' correlation')\n"
    "        same(threads[(e['pid'], e['tid'])], 'stream %d' % k['stream'], what + ' thread')\n"
    "        expect(processes[e['pid']].startswith('GPU %d (' % k['device']) and\n"
    "               processes[e['pid']].endswith('[pid %d]' % k['pid']), what + ' process')\n"
    "    same(len(of('X', 'gpu_memcpy', 'gpu_memset')), copies, 'copy events')\n"
    "    events = of('X', 'scope')\n"
    "    same(len(events), len(scopes), 'scope events')\n"
    "    for i, (e, s) in enumerate(zip(events, scopes)):\n"
    "        same((e['name'], e['pid'], e['tid']), (s['name'], s['pid'], s['tid']), 'scope')\n"
    "        same(e['dur'], us(s['end_ns'] - s['start_ns']), 'scope %d dur' % i)\n"
    "if mode == 'perfetto':\n"
    "    check_perfetto()\n"
    "elif mode == 'csv':\n"
    "    check_csv(load_expected()['kernel'])\n"
    "elif mode == 'json':\n"
    "    x = load_expected()\n"
    "    check_json(x['kernel'], x['origin'])\n"
    "elif mode == 'perfetto-db':\n"
    "    check_perfetto_against_database()\n"
    "elif mode == 'csv-db':\n"
    "    check_csv(database()[1])\n"
    "elif mode == 'json-db':\n"
    "    origin, kernels = database()[0:2]\n"
    "    check_json(kernels, origin)\n"
    "else:\n"
    "    fail('unknown mode ' + mode)\n";

/* ---- tests ---- */

static void test_usage_errors(void **state)
{
    (void)state;
    expect_usage_error(FLARE("export", crafted_dir, "--format", "xml"), "xml");
    assert_non_null(strstr(err_text, "perfetto, csv, json"));
    expect_usage_error(FLARE("export", crafted_dir, "--format=yaml"), "perfetto, csv, json");
    expect_usage_error(FLARE("export", crafted_dir, "--format"), "--format");
    assert_non_null(strstr(err_text, "perfetto, csv, json"));
    expect_usage_error(FLARE("export", crafted_dir, "-f"), "-f");
    expect_usage_error(FLARE("export", crafted_dir), "--format");
    expect_usage_error(FLARE("export", crafted_dir, "--format", "csv", "--bogus"), "--bogus");
    expect_usage_error(FLARE("export", crafted_dir, "--format", "csv", "-o"), "-o");
    expect_usage_error(FLARE("export", "a", "b", "--format", "csv"), "'b'");
    /* Usage errors write nothing. */
    assert_string_equal(out_text, "");
}

static void test_help_tells_the_truth(void **state)
{
    (void)state;
    assert_int_equal(FLARE("export", "--help"), 0);
    assert_non_null(strstr(out_text, "--format"));
    assert_non_null(strstr(out_text, "perfetto"));
    assert_non_null(strstr(out_text, "csv"));
    assert_non_null(strstr(out_text, "json"));
    assert_non_null(strstr(out_text, "-o, --output FILE"));
    assert_non_null(strstr(out_text, "FILE.tmp"));
    assert_int_equal(FLARE("--help"), 0);
    assert_non_null(strstr(out_text, "export"));
}

static void test_output_into_missing_directory(void **state)
{
    (void)state;
    char missing[600], file[700];
    snprintf(missing, sizeof(missing), "%s/no-such-dir", scratch);
    snprintf(file, sizeof(file), "%s/trace.json", missing);
    expect_failure_naming(FLARE("export", crafted_dir, "--format", "perfetto", "-o", file),
                          missing);
    assert_non_null(strstr(err_text, "does not exist"));
    assert_false(file_exists(missing));
    assert_false(file_exists(file));
    assert_false(temporary_left(file));
    /* A directory as FILE is refused too, and left alone. */
    expect_failure_naming(FLARE("export", crafted_dir, "--format", "csv", "-o", scratch),
                          "directory");
}

static void test_missing_and_corrupt_database(void **state)
{
    (void)state;
    char dir[600], path[700], output[700];
    snprintf(output, sizeof(output), "%s/never.json", scratch);

    snprintf(dir, sizeof(dir), "%s/missing", scratch);
    expect_failure_naming(FLARE("export", dir, "--format", "perfetto", "-o", output), dir);

    snprintf(dir, sizeof(dir), "%s/empty", scratch);
    mkdir(dir, 0755);
    expect_failure_naming(FLARE("export", dir, "--format", "csv", "-o", output),
                          "no flare session");

    snprintf(dir, sizeof(dir), "%s/zero", scratch);
    mkdir(dir, 0755);
    snprintf(path, sizeof(path), "%s/session.db", dir);
    close(open(path, O_WRONLY | O_CREAT, 0644));
    expect_failure_naming(FLARE("export", dir, "--format", "json", "-o", output), path);

    snprintf(dir, sizeof(dir), "%s/garbage", scratch);
    mkdir(dir, 0755);
    snprintf(path, sizeof(path), "%s/session.db", dir);
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    char junk[8192];
    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (char)(i * 131 + 7);
    assert_int_equal(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
    close(fd);
    expect_failure_naming(FLARE("export", dir, "--format", "perfetto", "-o", output), path);
    expect_failure_naming(FLARE("export", dir, "--format", "perfetto"), path);
    assert_string_equal(out_text, "");

    assert_false(file_exists(output));
}

static void test_crafted_perfetto(void **state)
{
    (void)state;
    char file[600];
    snprintf(file, sizeof(file), "%s/crafted.json", scratch);
    assert_int_equal(FLARE("export", crafted_dir, "--format", "perfetto", "-o", file), 0);
    assert_string_equal(out_text, "");
    check_with_python("perfetto", file, expected_path);
}

static void test_crafted_csv(void **state)
{
    (void)state;
    char file[600];
    snprintf(file, sizeof(file), "%s/crafted.csv", scratch);
    assert_int_equal(FLARE("export", crafted_dir, "--format=csv", "--output", file), 0);
    check_with_python("csv", file, expected_path);
}

static void test_crafted_json(void **state)
{
    (void)state;
    char file[600];
    snprintf(file, sizeof(file), "%s/crafted-kernels.json", scratch);
    /* No DIR: the newest session under ./flare-out, which is the crafted one. */
    assert_int_equal(FLARE("export", "-f", "json", "-o", file), 0);
    check_with_python("json", file, expected_path);
}

static void test_standard_output_is_the_default(void **state)
{
    (void)state;
    assert_int_equal(FLARE("export", crafted_dir, "--format", "csv"), 0);
    assert_true(strncmp(out_text, "pid,device,stream,correlation_id,name,", 38) == 0);
    /* The quoted C++ name, its inner quotes doubled (RFC 4180). */
    assert_non_null(strstr(out_text, ",\"say \"\"hi\"\", twice\","));
    assert_non_null(strstr(out_text, ",bad ?( utf8,"));
    assert_int_equal(FLARE("export", crafted_dir, "--format", "perfetto", "-o", "-"), 0);
    assert_true(strncmp(out_text, "{\"traceEvents\":[", 16) == 0);
    assert_non_null(strstr(out_text, "\"time_unit\":\"us\""));
    assert_null(strstr(out_text, "displayTimeUnit"));
    assert_non_null(strstr(out_text, "\"name\":\"say \\\"hi\\\", twice\""));
    assert_non_null(strstr(out_text, "\"name\":\"line1\\nline2\\r\\nline3\""));
    assert_non_null(strstr(out_text, "\"name\":\"\\u0001\\u001f control\""));
}

/* An export that fails half-way leaves FILE as it was and no FILE.tmp. */
static void test_failure_leaves_no_half_file(void **state)
{
    (void)state;
    char broken[600], source[700], target[700], file[600];
    snprintf(broken, sizeof(broken), "%s/broken", scratch);
    assert_int_equal(mkdir(broken, 0755), 0);
    snprintf(source, sizeof(source), "%s/session.db", crafted_dir);
    snprintf(target, sizeof(target), "%s/session.db", broken);
    char command[2000];
    snprintf(command, sizeof(command), "cp '%s' '%s'", source, target);
    assert_int_equal(system(command), 0);
    /* Metrics export last, and only the export reads them: without their
     * table the export fails after writing nearly the whole trace. */
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(target, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "DROP TABLE metrics", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);

    snprintf(file, sizeof(file), "%s/existing.json", scratch);
    FILE *old = fopen(file, "w");
    assert_non_null(old);
    fputs("old content\n", old);
    fclose(old);
    expect_failure_naming(FLARE("export", broken, "--format", "perfetto", "-o", file), "metrics");
    assert_non_null(strstr(err_text, "no file written"));
    char content[64];
    cli_read_file(file, content, sizeof(content));
    assert_string_equal(content, "old content\n");
    assert_false(temporary_left(file));

    /* A good export replaces the file whole. */
    assert_int_equal(FLARE("export", crafted_dir, "--format", "csv", "-o", file), 0);
    cli_read_file(file, content, sizeof(content));
    assert_true(strncmp(content, "pid,device,", 11) == 0);
    assert_false(temporary_left(file));
}

/* -o to a pipe (or a device: /dev/stdout) writes into it: a rename there
 * would put a regular file in place of the pipe. */
static void test_output_to_a_pipe(void **state)
{
    (void)state;
    char pipe_path[600], copy[600];
    snprintf(pipe_path, sizeof(pipe_path), "%s/pipe", scratch);
    snprintf(copy, sizeof(copy), "%s/pipe-copy.csv", scratch);
    assert_int_equal(mkfifo(pipe_path, 0600), 0);
    pid_t reader = fork();
    assert_true(reader >= 0);
    if (reader == 0) {
        int in = open(pipe_path, O_RDONLY);
        int out = open(copy, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        char buffer[4096];
        ssize_t got;
        while (in >= 0 && (got = read(in, buffer, sizeof(buffer))) > 0)
            if (write(out, buffer, (size_t)got) != got)
                _exit(1);
        _exit(0);
    }
    int code = FLARE("export", crafted_dir, "--format", "csv", "-o", pipe_path);
    struct stat info;
    int still_a_pipe = lstat(pipe_path, &info) == 0 && S_ISFIFO(info.st_mode);
    if (!still_a_pipe)
        kill(reader, SIGKILL); /* it would wait for a writer forever */
    int status;
    assert_int_equal(waitpid(reader, &status, 0), reader);
    assert_true(still_a_pipe);
    assert_int_equal(code, 0);
    char content[64];
    cli_read_file(copy, content, sizeof(content));
    assert_true(strncmp(content, "pid,device,", 11) == 0);
}

static void test_traced_demo_session(void **state)
{
    (void)state;
    char dir[600], demo[1200], database[700], file[700];
    snprintf(dir, sizeof(dir), "%s/demo", scratch);
    snprintf(demo, sizeof(demo), "%s/flare-demo", bin_dir);
    snprintf(database, sizeof(database), "%s/session.db", dir);
    assert_int_equal(FLARE("trace", "-q", "-o", dir, "--", demo, "3"), 0);

    snprintf(file, sizeof(file), "%s/demo.json", scratch);
    assert_int_equal(FLARE("export", dir, "--format", "perfetto", "-o", file), 0);
    check_with_python("perfetto-db", file, database);
    snprintf(file, sizeof(file), "%s/demo.csv", scratch);
    assert_int_equal(FLARE("export", dir, "--format", "csv", "-o", file), 0);
    check_with_python("csv-db", file, database);
    snprintf(file, sizeof(file), "%s/demo-kernels.json", scratch);
    assert_int_equal(FLARE("export", dir, "--format", "json", "-o", file), 0);
    check_with_python("json-db", file, database);
}

static int setup(void **state)
{
    (void)state;
    if (cli_test_environment(bin_dir, sizeof(bin_dir)) != 0)
        return -1;
    test_make_temp_dir(scratch, sizeof(scratch), "export");
    snprintf(expected_path, sizeof(expected_path), "%s/expected.txt", scratch);
    snprintf(checker_path, sizeof(checker_path), "%s/check_export.py", scratch);
    FILE *checker = fopen(checker_path, "w");
    if (checker == NULL || fputs(checker_script, checker) < 0 || fclose(checker) != 0) {
        perror(checker_path);
        return -1;
    }
    make_crafted_session();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_remove_dir(scratch);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_help_tells_the_truth),
        cmocka_unit_test(test_output_into_missing_directory),
        cmocka_unit_test(test_missing_and_corrupt_database),
        cmocka_unit_test(test_crafted_perfetto),
        cmocka_unit_test(test_crafted_csv),
        cmocka_unit_test(test_crafted_json),
        cmocka_unit_test(test_standard_output_is_the_default),
        cmocka_unit_test(test_failure_leaves_no_half_file),
        cmocka_unit_test(test_output_to_a_pipe),
        cmocka_unit_test(test_traced_demo_session),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
