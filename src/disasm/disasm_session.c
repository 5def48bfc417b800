/*
 * disasm_session.c: the SASS text of a session's instructions without a
 * source line (disasm_session.h).
 *
 * One cubin at a time: its bytes to a file in a private folder (mkdtemp,
 * O_EXCL|O_NOFOLLOW), the wanted instructions read into a sorted array, the
 * listing walked once and each of its instructions looked up there, the
 * texts written in one batch with the cubin's drop. Must never keep a
 * cubin's file or its listing beyond its own turn.
 */
#include "disasm/disasm_session.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "disasm/disasm_parse.h"
#include "disasm/disasm_run.h"
#include "flare/flare.h"
#include "store/store_pc_code.h"

/* The kept cubins, as the walk found them (pid, CRC, the file written). */
typedef struct kept_cubin {
    int64_t pid;
    uint64_t crc;
    char path[600];
    int written;
} kept_cubin;

typedef struct cubin_list {
    kept_cubin *items;
    size_t count, capacity;
    const char *folder;
    uint64_t bytes;
    char problem[256];
} cubin_list;

/* One wanted instruction, and its text once the listing gave one. */
typedef struct wanted {
    int64_t name_id;
    char *symbol;
    uint64_t offset;
    char *text;
} wanted;

typedef struct wanted_list {
    wanted *items;
    size_t count, capacity;
    int no_memory;
} wanted_list;

static void note(disasm_session_result *result, const char *format, const char *a, const char *b)
{
    if (result->problem[0] == '\0')
        snprintf(result->problem, sizeof(result->problem), format, a, b);
}

/* bytes into a new file of the folder, never through a link. */
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

static int collect_cubin(int64_t pid, uint64_t crc, const void *bytes, size_t size, void *user)
{
    cubin_list *list = user;
    if (list->count == list->capacity) {
        size_t capacity = list->capacity ? list->capacity * 2 : 16;
        kept_cubin *grown = realloc(list->items, capacity * sizeof(*grown));
        if (grown == NULL) {
            snprintf(list->problem, sizeof(list->problem), "no memory for the cubins' list");
            return 1;
        }
        list->items = grown;
        list->capacity = capacity;
    }
    kept_cubin *cubin = &list->items[list->count++];
    *cubin = (kept_cubin){.pid = pid, .crc = crc};
    snprintf(cubin->path, sizeof(cubin->path), "%s/%lld-%016llx.cubin", list->folder,
             (long long)pid, (unsigned long long)crc);
    cubin->written = write_file(cubin->path, bytes, size) == 0;
    list->bytes += size;
    if (!cubin->written && list->problem[0] == '\0')
        snprintf(list->problem, sizeof(list->problem), "cannot write a cubin to disassemble: %s",
                 strerror(errno));
    return 0;
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
    list->items[list->count++] =
        (wanted){.name_id = row->name_id, .symbol = symbol, .offset = row->pc_offset};
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

/* The store gives them by symbol (byte order), then offset: a binary
 * search over that order. */
static int compare_key(const char *symbol, uint64_t offset, const wanted *item)
{
    int by_name = strcmp(symbol, item->symbol);
    if (by_name != 0)
        return by_name;
    return offset < item->offset ? -1 : offset > item->offset;
}

static int take_instruction(const char *symbol, uint64_t offset, const char *text, void *user)
{
    wanted_list *list = user;
    size_t low = 0, high = list->count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        int order = compare_key(symbol, offset, &list->items[middle]);
        if (order == 0) {
            wanted *item = &list->items[middle];
            if (item->text == NULL && text[0] != '\0')
                item->text = strdup(text);
            return 0;
        }
        if (order < 0)
            high = middle;
        else
            low = middle + 1;
    }
    return 0;
}

/* The texts found, and the cubin's drop, in one batch. */
static int write_texts(store *database, const kept_cubin *cubin, const wanted_list *list,
                       uint64_t *given)
{
    int status = store_begin(database);
    uint64_t written = 0;
    for (size_t i = 0; status == FLARE_OK && i < list->count; i++) {
        if (list->items[i].text == NULL)
            continue;
        status = store_put_pc_instruction(database, cubin->pid, list->items[i].name_id,
                                          list->items[i].offset, list->items[i].text);
        written += status == FLARE_OK;
    }
    if (status == FLARE_OK)
        status = store_drop_pc_cubin(database, cubin->pid, cubin->crc);
    if (status == FLARE_OK)
        status = store_commit(database);
    if (status != FLARE_OK)
        store_rollback(database); /* a failed commit's batch too (store.h) */
    if (status == FLARE_OK)
        *given += written;
    return status;
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

/* The listing of the wanted functions parsed into list: first asked for
 * those functions alone (cuobjdump's -fun), then, if that failed or gave
 * none of them, for the whole cubin. */
static int disassemble(const kept_cubin *cubin, wanted_list *list, disasm_session_result *result,
                       char *error, size_t error_size)
{
    char *functions = function_list(list);
    int status = FLARE_OK;
    for (int whole = functions == NULL; whole <= 1; whole++) {
        char *listing = NULL;
        size_t size = 0;
        status = disasm_run_functions(result->program, cubin->path, whole ? NULL : functions,
                                      DISASM_TIMEOUT_MS, DISASM_LISTING_MAX_BYTES, &listing, &size,
                                      error, error_size);
        if (status == FLARE_OK)
            disasm_parse(listing, size, take_instruction, list, NULL);
        free(listing);
        if (status == FLARE_OK && texts_found(list) > 0)
            break;
    }
    free(functions);
    return status;
}

/* One cubin: what is wanted of it, its listing, the texts. */
static int do_cubin(store *database, const kept_cubin *cubin, disasm_session_result *result)
{
    wanted_list list = {0};
    int status = store_read_pc_wanted(database, cubin->pid, cubin->crc, collect_wanted, &list);
    if (status != FLARE_OK || list.no_memory) {
        note(result, "%s%s", "cannot read the instructions to disassemble: ",
             list.no_memory ? "no memory" : store_last_error(database));
        wanted_free(&list);
        return status != FLARE_OK ? status : FLARE_ERR_NO_MEMORY;
    }
    result->wanted += list.count;
    char error[512] = "";
    if (list.count > 0)
        status = disassemble(cubin, &list, result, error, sizeof(error));
    if (status != FLARE_OK) {
        note(result, "%s: %s", result->program, error);
        wanted_free(&list);
        return status;
    }
    status = write_texts(database, cubin, &list, &result->given);
    if (status != FLARE_OK)
        note(result, "%s%s", "cannot write the SASS texts: ", store_last_error(database));
    else
        result->cubins_done++;
    wanted_free(&list);
    return status;
}

/* The sass_text capability of each process that kept a cubin. */
static void say(store *database, const cubin_list *list, const disasm_session_result *result,
                int found)
{
    for (size_t i = 0; i < list->count; i++) {
        if (i > 0 && list->items[i - 1].pid == list->items[i].pid)
            continue; /* the walk gives them by pid */
        store_pc_code_counts counts;
        if (store_read_pc_code_counts(database, list->items[i].pid, &counts) != FLARE_OK)
            continue;
        char reason[1536];
        const char *status = "active";
        if (!found) {
            status = "unavailable";
            snprintf(reason, sizeof(reason),
                     "%llu sampled instructions without a source line have no SASS text: %s; "
                     "their %llu cubins stay in the session for 'flare disasm' (with the CUDA "
                     "toolkit's cuobjdump or nvdisasm, or FLARE_DISASSEMBLER)",
                     (unsigned long long)counts.without_line, result->problem,
                     (unsigned long long)counts.cubins_kept);
        } else {
            status = counts.cubins_kept > 0 ? "degraded" : "active";
            snprintf(reason, sizeof(reason),
                     "%llu of %llu sampled instructions without a source line have their SASS "
                     "text, disassembled by %s in %.1f ms%s%s%s",
                     (unsigned long long)counts.with_text, (unsigned long long)counts.without_line,
                     result->program, (double)result->took_ns / 1e6,
                     counts.cubins_kept > 0 ? "; cubins left for 'flare disasm': " : "",
                     counts.cubins_kept > 0 ? result->problem : "", "");
        }
        if (store_begin(database) != FLARE_OK)
            return;
        if (store_set_capability(database, list->items[i].pid, "sass_text", 0, status, reason) !=
                FLARE_OK ||
            store_commit(database) != FLARE_OK)
            store_rollback(database);
    }
}

static void remove_files(cubin_list *list, const char *folder)
{
    for (size_t i = 0; i < list->count; i++)
        if (list->items[i].written)
            unlink(list->items[i].path);
    rmdir(folder);
    free(list->items);
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
    char folder[512];
    snprintf(folder, sizeof(folder), "%s/.flare-disasm-XXXXXX", session_dir);
    if (mkdtemp(folder) == NULL) {
        note(result, "%s%s", "cannot make a work folder in the session: ", strerror(errno));
        return FLARE_ERR_IO;
    }
    cubin_list list = {.folder = folder};
    int status = store_read_pc_cubins(database, collect_cubin, &list);
    result->cubins = list.count;
    if (list.count == 0 || status != FLARE_OK) {
        if (status != FLARE_OK)
            note(result, "%s%s", "cannot read the kept cubins: ", store_last_error(database));
        remove_files(&list, folder);
        return status;
    }
    char why[512];
    int found = disasm_find(result->program, sizeof(result->program), why, sizeof(why)) == FLARE_OK;
    if (!found) {
        result->program[0] = '\0';
        note(result, "%s%s", "no disassembler: ", why);
        status = FLARE_ERR_UNSUPPORTED;
    }
    if (found && announce != NULL)
        announce(list.count, list.bytes, user);
    for (size_t i = 0; found && i < list.count; i++) {
        int one = list.items[i].written ? do_cubin(database, &list.items[i], result) : FLARE_ERR_IO;
        if (one != FLARE_OK && status == FLARE_OK)
            status = one;
    }
    if (list.problem[0] != '\0')
        note(result, "%s%s", list.problem, "");
    result->took_ns = core_now_ns() - began;
    say(database, &list, result, found);
    remove_files(&list, folder);
    return status;
}
