/*
 * disasm_session.c: the SASS text of a session's instructions without a
 * source line (disasm_session.h).
 *
 * One cubin at a time, each CRC once whichever processes kept it: its
 * bytes to a file in a private folder (mkdtemp, O_EXCL|O_NOFOLLOW), the
 * instructions every process wants of it read into one sorted array, the
 * listing walked once and each of its instructions looked up there, the
 * file removed, the texts written in one batch with the cubin's drops. The
 * whole pass has one deadline; SIGINT, SIGTERM and SIGHUP during it kill
 * the disassembler and remove the folder before the process dies of them.
 * Must never keep a cubin's file or its listing beyond its own turn, drop a
 * cubin whose listing gave none of what was wanted, or leave a folder
 * behind (one left by a killed pass is swept at the next).
 */
#include "disasm/disasm_session.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/config.h"
#include "disasm/disasm_parse.h"
#include "disasm/disasm_run.h"
#include "flare/flare.h"
#include "store/store_pc_code.h"

#define WORK_PREFIX ".flare-disasm-"

/* A kept cubin, as the walk found it. */
typedef struct kept_cubin {
    int64_t pid;
    uint64_t crc;
    size_t size;
} kept_cubin;

typedef struct cubin_list {
    kept_cubin *items;
    size_t count, capacity;
    uint64_t bytes;
    int no_memory;
} cubin_list;

/* One wanted instruction of one process, and its text once found. */
typedef struct wanted {
    int64_t pid, name_id;
    char *symbol;
    uint64_t offset;
    char *text;
} wanted;

typedef struct wanted_list {
    wanted *items;
    size_t count, capacity;
    int64_t pid; /* the process whose rows collect_wanted is adding */
    int no_memory;
} wanted_list;

/* What a pass works in: its folder and the file of the cubin in turn. */
typedef struct pass {
    store *database;
    char folder[PATH_MAX];
    char file[PATH_MAX + 32];
    int file_error;         /* errno of a failed write, or 0 */
    uint64_t dropped_bytes; /* of the cubins dropped so far */
    uint64_t deadline_ns;
    disasm_parse_stats parsed;
    disasm_session_result *result;
} pass;

static void note(disasm_session_result *result, const char *format, const char *a, const char *b)
{
    if (result->problem[0] == '\0')
        snprintf(result->problem, sizeof(result->problem), format, a, b);
}

/* ---- signals: the folder is removed before the process dies ---- */

static const int pass_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define PASS_SIGNALS (sizeof pass_signals / sizeof pass_signals[0])
static char signal_folder[PATH_MAX], signal_file[PATH_MAX + 32];
static volatile sig_atomic_t signal_armed;

static void clean_and_die(int signal_number)
{
    if (signal_armed) {
        disasm_run_kill();
        unlink(signal_file);
        rmdir(signal_folder);
    }
    signal(signal_number, SIG_DFL);
    raise(signal_number);
}

static void arm_signals(const pass *work, struct sigaction *saved)
{
    memcpy(signal_folder, work->folder, sizeof(signal_folder));
    signal_file[0] = '\0';
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_handler = clean_and_die;
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < PASS_SIGNALS; i++)
        sigaction(pass_signals[i], &action, &saved[i]);
    signal_armed = 1;
}

static void disarm_signals(const struct sigaction *saved)
{
    signal_armed = 0;
    for (size_t i = 0; i < PASS_SIGNALS; i++)
        sigaction(pass_signals[i], &saved[i], NULL);
}

/* ---- files ---- */

/* bytes into a new file, never through a link. */
static int write_file(const char *path, const void *bytes, size_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    const char *cursor = bytes;
    while (size > 0) {
        ssize_t wrote = write(fd, cursor, size);
        if (wrote < 0 && errno == EINTR)
            continue;
        if (wrote <= 0) {
            close(fd);
            unlink(path);
            return -1;
        }
        cursor += wrote;
        size -= (size_t)wrote;
    }
    return close(fd);
}

/* A folder an earlier pass left (its launcher was killed): its files and
 * itself, never following a link. */
static void sweep_one(int session_fd, const char *name)
{
    int fd = openat(session_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    DIR *dir = fdopendir(fd);
    if (dir == NULL) {
        close(fd);
        return;
    }
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL)
        if (strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0)
            unlinkat(dirfd(dir), entry->d_name, 0);
    closedir(dir);
    unlinkat(session_fd, name, AT_REMOVEDIR);
}

static void sweep_stale_folders(const char *session_dir)
{
    int session_fd = open(session_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (session_fd < 0)
        return;
    DIR *dir = fdopendir(dup(session_fd));
    struct dirent *entry;
    while (dir != NULL && (entry = readdir(dir)) != NULL)
        if (strncmp(entry->d_name, WORK_PREFIX, strlen(WORK_PREFIX)) == 0)
            sweep_one(session_fd, entry->d_name);
    if (dir != NULL)
        closedir(dir);
    close(session_fd);
}

/* ---- what is kept and wanted ---- */

static int collect_cubin(int64_t pid, uint64_t crc, const void *bytes, size_t size, void *user)
{
    (void)bytes;
    cubin_list *list = user;
    if (list->count == list->capacity) {
        size_t capacity = list->capacity ? list->capacity * 2 : 16;
        kept_cubin *grown = realloc(list->items, capacity * sizeof(*grown));
        if (grown == NULL) {
            list->no_memory = 1;
            return 1;
        }
        list->items = grown;
        list->capacity = capacity;
    }
    list->items[list->count++] = (kept_cubin){.pid = pid, .crc = crc, .size = size};
    list->bytes += size;
    return 0;
}

/* By CRC, then pid: a CRC's processes next to each other. */
static int by_crc(const void *a, const void *b)
{
    const kept_cubin *x = a, *y = b;
    if (x->crc != y->crc)
        return x->crc < y->crc ? -1 : 1;
    return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static int collect_wanted(const store_pc_wanted_row *row, void *user)
{
    wanted_list *list = user;
    if (list->count == list->capacity) {
        size_t capacity = list->capacity ? list->capacity * 2 : 256;
        wanted *grown = realloc(list->items, capacity * sizeof(*grown));
        if (grown == NULL) {
            list->no_memory = 1;
            return 1;
        }
        list->items = grown;
        list->capacity = capacity;
    }
    char *symbol = strdup(row->symbol);
    if (symbol == NULL) {
        list->no_memory = 1;
        return 1;
    }
    list->items[list->count++] = (wanted){
        .pid = list->pid, .name_id = row->name_id, .symbol = symbol, .offset = row->pc_offset};
    return 0;
}

static void wanted_free(wanted_list *list)
{
    for (size_t i = 0; i < list->count; i++) {
        free(list->items[i].symbol);
        free(list->items[i].text);
    }
    free(list->items);
    memset(list, 0, sizeof(*list));
}

static int by_symbol_offset(const void *a, const void *b)
{
    const wanted *x = a, *y = b;
    int by_name = strcmp(x->symbol, y->symbol);
    if (by_name != 0)
        return by_name;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* ---- the listing ---- */

static int compare_key(const char *symbol, uint64_t offset, const wanted *item)
{
    int by_name = strcmp(symbol, item->symbol);
    if (by_name != 0)
        return by_name;
    return offset < item->offset ? -1 : offset > item->offset;
}

/* Every wanted item of (symbol, offset) gets text: several processes may
 * want one instruction of a cubin they share. */
static int take_instruction(const char *symbol, uint64_t offset, const char *text, void *user)
{
    wanted_list *list = user;
    size_t low = 0, high = list->count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (compare_key(symbol, offset, &list->items[middle]) <= 0)
            high = middle;
        else
            low = middle + 1;
    }
    for (size_t i = low; i < list->count && compare_key(symbol, offset, &list->items[i]) == 0; i++)
        if (list->items[i].text == NULL && text[0] != '\0')
            list->items[i].text = strdup(text);
    return 0;
}

/* The wanted functions' symbols, comma-separated, for cuobjdump's -fun;
 * NULL (the whole cubin) when one holds a comma, the list would be too long
 * for one argument, or without memory. */
static char *function_list(const wanted_list *list)
{
    size_t length = 0;
    for (size_t i = 0; i < list->count; i++) {
        if (strchr(list->items[i].symbol, ',') != NULL)
            return NULL;
        if (i == 0 || strcmp(list->items[i].symbol, list->items[i - 1].symbol) != 0)
            length += strlen(list->items[i].symbol) + 1;
    }
    if (length == 0 || length > DISASM_FUNCTIONS_MAX)
        return NULL;
    char *joined = malloc(length);
    if (joined == NULL)
        return NULL;
    size_t used = 0;
    for (size_t i = 0; i < list->count; i++) {
        if (i > 0 && strcmp(list->items[i].symbol, list->items[i - 1].symbol) == 0)
            continue;
        size_t n = strlen(list->items[i].symbol);
        if (used > 0)
            joined[used++] = ',';
        memcpy(joined + used, list->items[i].symbol, n);
        used += n;
    }
    joined[used] = '\0';
    return joined;
}

static size_t texts_found(const wanted_list *list)
{
    size_t found = 0;
    for (size_t i = 0; i < list->count; i++)
        found += list->items[i].text != NULL;
    return found;
}

/* The time the pass has left for one run, within the per-run bound; 0 when
 * its deadline has passed. */
static uint32_t time_left_ms(const pass *work)
{
    uint64_t now = core_now_ns();
    if (now >= work->deadline_ns)
        return 0;
    uint64_t left = (work->deadline_ns - now) / 1000000ull;
    return left < DISASM_TIMEOUT_MS ? (uint32_t)(left > 0 ? left : 1) : DISASM_TIMEOUT_MS;
}

/* The listing of the wanted functions parsed into list: first for those
 * functions alone (cuobjdump's -fun), then, if that failed other than by
 * time or gave none of them, for the whole cubin. */
static int disassemble(pass *work, wanted_list *list, char *error, size_t error_size)
{
    char *functions = function_list(list);
    int status = FLARE_OK;
    for (int whole = functions == NULL; whole <= 1; whole++) {
        uint32_t timeout_ms = time_left_ms(work);
        if (timeout_ms == 0) {
            snprintf(error, error_size, "the pass's time (FLARE_DISASM_SECONDS) was spent");
            status = FLARE_ERR_TIMEOUT;
            break;
        }
        char *listing = NULL;
        size_t size = 0;
        status = disasm_run_functions(work->result->program, work->file, whole ? NULL : functions,
                                      timeout_ms, DISASM_LISTING_MAX_BYTES, &listing, &size, error,
                                      error_size);
        if (status == FLARE_OK) {
            disasm_parse_stats parsed = {0};
            disasm_parse(listing, size, take_instruction, list, &parsed);
            work->parsed.texts_cut += parsed.texts_cut;
            work->parsed.lines_skipped += parsed.lines_skipped;
        }
        free(listing);
        if ((status == FLARE_OK && texts_found(list) > 0) || status == FLARE_ERR_TIMEOUT)
            break;
    }
    free(functions);
    return status;
}

/* ---- one CRC ---- */

/* The texts found, and the drop of the CRC's cubins, in one batch. */
static int write_texts(store *database, const kept_cubin *group, size_t members,
                       const wanted_list *list, uint64_t *given)
{
    int status = store_begin(database);
    uint64_t written = 0;
    for (size_t i = 0; status == FLARE_OK && i < list->count; i++) {
        if (list->items[i].text == NULL)
            continue;
        status = store_put_pc_instruction(database, list->items[i].pid, list->items[i].name_id,
                                          list->items[i].offset, list->items[i].text);
        written += status == FLARE_OK;
    }
    for (size_t m = 0; status == FLARE_OK && m < members; m++)
        status = store_drop_pc_cubin(database, group[m].pid, group[m].crc);
    if (status == FLARE_OK)
        status = store_commit(database);
    if (status != FLARE_OK)
        store_rollback(database); /* a failed commit's batch too (store.h) */
    if (status == FLARE_OK)
        *given += written;
    return status;
}

static int write_cubin(const int64_t pid, uint64_t crc, const void *bytes, size_t size, void *user)
{
    (void)pid;
    (void)crc;
    pass *work = user;
    work->file_error = write_file(work->file, bytes, size) == 0 ? 0 : errno;
    return 1; /* the one row: a failure is file_error, not the store's */
}

/* What every process of the group wants of the cubin, sorted. */
static int read_wanted(pass *work, const kept_cubin *group, size_t members, wanted_list *list)
{
    for (size_t m = 0; m < members; m++) {
        list->pid = group[m].pid;
        int status =
            store_read_pc_wanted(work->database, group[m].pid, group[m].crc, collect_wanted, list);
        if (status != FLARE_OK || list->no_memory) {
            note(work->result, "%s%s", "cannot read the instructions to disassemble: ",
                 list->no_memory ? "no memory" : store_last_error(work->database));
            return status != FLARE_OK ? status : FLARE_ERR_NO_MEMORY;
        }
    }
    if (list->count > 1)
        qsort(list->items, list->count, sizeof(list->items[0]), by_symbol_offset);
    return FLARE_OK;
}

/* The cubin's file, written from the first process's copy. */
static int place_file(pass *work, const kept_cubin *cubin)
{
    snprintf(work->file, sizeof(work->file), "%s/%016llx.cubin", work->folder,
             (unsigned long long)cubin->crc);
    memcpy(signal_file, work->file, sizeof(signal_file));
    work->file_error = ENOENT; /* stays when the row is gone */
    int read = store_read_pc_cubin(work->database, cubin->pid, cubin->crc, write_cubin, work);
    if (read == FLARE_OK && work->file_error == 0)
        return FLARE_OK;
    note(work->result, "%s%s", "cannot write a cubin to disassemble: ",
         read != FLARE_OK ? store_last_error(work->database) : strerror(work->file_error));
    return FLARE_ERR_IO;
}

/* One CRC and the processes that kept it (group[0 .. members)). */
static int do_group(pass *work, const kept_cubin *group, size_t members)
{
    disasm_session_result *result = work->result;
    wanted_list list = {0};
    int status = read_wanted(work, group, members, &list);
    result->wanted += list.count;
    if (status == FLARE_OK && list.count > 0) {
        char error[512] = "";
        status = place_file(work, &group[0]);
        if (status == FLARE_OK)
            status = disassemble(work, &list, error, sizeof(error));
        unlink(work->file);
        signal_file[0] = '\0';
        if (status != FLARE_OK && error[0] != '\0')
            note(result, "%s: %s", result->program, error);
        if (status == FLARE_OK && texts_found(&list) == 0) {
            /* A listing that gives nothing wanted (another format, other
             * offsets): the cubin stays for a later try. */
            note(result, "%s: its listing had none of the instructions wanted (not its format?)",
                 result->program, "");
            status = FLARE_ERR_BACKEND; /* not "no disassembler": the launcher says which */
        }
    }
    if (status == FLARE_OK) {
        status = write_texts(work->database, group, members, &list, &result->given);
        if (status != FLARE_OK)
            note(result, "%s%s", "cannot write the SASS texts: ", store_last_error(work->database));
        else
            result->cubins_done += members;
        for (size_t m = 0; status == FLARE_OK && m < members; m++)
            work->dropped_bytes += group[m].size;
    }
    wanted_free(&list);
    return status;
}

/* ---- the pass ---- */

/* The sass_text capability of each process that kept a cubin. */
static void say(const pass *work, const cubin_list *list, int found)
{
    const disasm_session_result *result = work->result;
    for (size_t i = 0; i < list->count; i++) {
        int64_t pid = list->items[i].pid;
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = list->items[j].pid == pid;
        store_pc_code_counts counts;
        if (seen || store_read_pc_code_counts(work->database, pid, &counts) != FLARE_OK)
            continue;
        char reason[1536];
        const char *status = "unavailable";
        if (!found)
            snprintf(reason, sizeof(reason),
                     "%llu sampled instructions without a source line have no SASS text: %s; "
                     "their %llu cubins stay in the session for 'flare disasm' (with the CUDA "
                     "toolkit's cuobjdump or nvdisasm, or FLARE_DISASSEMBLER)",
                     (unsigned long long)counts.without_line, result->problem,
                     (unsigned long long)counts.cubins_kept);
        else {
            status = counts.with_text == counts.without_line ? "active" : "degraded";
            int used = snprintf(
                reason, sizeof(reason),
                "%llu of %llu sampled instructions without a source line have their SASS text, "
                "disassembled by %s in %.1f ms; %llu texts cut at %u bytes, %llu listing lines "
                "not understood; %llu functions whose name two cubins hold (no text)",
                (unsigned long long)counts.with_text, (unsigned long long)counts.without_line,
                result->program, (double)result->took_ns / 1e6,
                (unsigned long long)work->parsed.texts_cut, DISASM_TEXT_MAX,
                (unsigned long long)work->parsed.lines_skipped,
                (unsigned long long)counts.shared_names);
            if (counts.cubins_kept > 0 && used > 0 && (size_t)used < sizeof(reason))
                snprintf(reason + used, sizeof(reason) - (size_t)used,
                         "; %llu cubins left for 'flare disasm': %s",
                         (unsigned long long)counts.cubins_kept, result->problem);
        }
        if (store_begin(work->database) != FLARE_OK)
            return;
        if (store_set_capability(work->database, pid, "sass_text", 0, status, reason) != FLARE_OK ||
            store_commit(work->database) != FLARE_OK)
            store_rollback(work->database);
    }
}

/* Each CRC in turn until the pass's time is spent. */
static int do_all(pass *work, cubin_list *list)
{
    int status = FLARE_OK;
    qsort(list->items, list->count, sizeof(list->items[0]), by_crc);
    for (size_t first = 0; first < list->count;) {
        size_t members = 1;
        while (first + members < list->count &&
               list->items[first + members].crc == list->items[first].crc)
            members++;
        int one = time_left_ms(work) > 0 ? do_group(work, &list->items[first], members)
                                         : FLARE_ERR_TIMEOUT;
        if (one == FLARE_ERR_TIMEOUT)
            note(work->result, "%s%s", "the pass's time was spent; the rest is left for ",
                 "'flare disasm'");
        if (one != FLARE_OK && status == FLARE_OK)
            status = one;
        if (one == FLARE_ERR_TIMEOUT)
            break;
        first += members;
    }
    return status;
}

int disasm_session(store *database, const char *session_dir, disasm_session_result *result)
{
    return disasm_session_announced(database, session_dir, NULL, NULL, result);
}

int disasm_session_announced(store *database, const char *session_dir,
                             void (*announce)(uint64_t cubins, uint64_t bytes, void *user),
                             void *user, disasm_session_result *result)
{
    memset(result, 0, sizeof(*result));
    if (database == NULL || session_dir == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    uint64_t began = core_now_ns();
    cubin_list list = {0};
    int status = store_read_pc_cubins(database, collect_cubin, &list);
    result->cubins = list.count;
    if (status != FLARE_OK || list.no_memory) {
        note(result, "%s%s", "cannot read the kept cubins: ",
             list.no_memory ? "no memory" : store_last_error(database));
        free(list.items);
        return status != FLARE_OK ? status : FLARE_ERR_NO_MEMORY;
    }
    if (list.count == 0) {
        free(list.items);
        return FLARE_OK;
    }
    /* A folder a killed pass left comes with its cubins, still kept. */
    sweep_stale_folders(session_dir);
    uint32_t seconds = DISASM_PASS_TIMEOUT_MS / 1000u;
    const char *text = getenv("FLARE_DISASM_SECONDS");
    if (text != NULL && core_parse_u32(text, 1, 3600, &seconds) != FLARE_OK) {
        note(result, "FLARE_DISASM_SECONDS=%.40s is not a number of seconds (1 to 3600)%s", text,
             "");
        free(list.items);
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    pass work = {.database = database, .result = result};
    char why[512];
    int found = disasm_find(result->program, sizeof(result->program), why, sizeof(why)) == FLARE_OK;
    int length =
        snprintf(work.folder, sizeof(work.folder), "%s/" WORK_PREFIX "XXXXXX", session_dir);
    if (!found) {
        result->program[0] = '\0';
        note(result, "%s%s", "no disassembler: ", why);
        status = FLARE_ERR_UNSUPPORTED;
    } else if (length < 0 || (size_t)length >= sizeof(work.folder) ||
               mkdtemp(work.folder) == NULL) {
        note(result, "%s%s", "cannot make a work folder in the session: ",
             length >= 0 && (size_t)length >= sizeof(work.folder) ? "its path is too long"
                                                                  : strerror(errno));
        found = 0;
        status = FLARE_ERR_IO;
    } else {
        if (announce != NULL)
            announce(list.count, list.bytes, user);
        work.deadline_ns = began + (uint64_t)seconds * 1000000000ull;
        struct sigaction saved[PASS_SIGNALS];
        arm_signals(&work, saved);
        status = do_all(&work, &list);
        rmdir(work.folder);
        disarm_signals(saved);
        /* The session need not keep the dropped cubins' size; a failure
         * leaves it as it is, and larger. */
        (void)store_pc_cubins_compact(database, work.dropped_bytes);
    }
    result->took_ns = core_now_ns() - began;
    say(&work, &list, found);
    free(list.items);
    return status;
}
