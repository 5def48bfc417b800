/*
 * runtime_resolve.c: finding the process's flare runtime (runtime_resolve.h).
 *
 * A copy already mapped always wins over loading one by path: several
 * copies of libflare.so may sit on disk (beside the injection, inside a
 * wheel, in the build tree), and loading two of them by path would map two
 * registries, the very split this exists to prevent. Mapped copies are taken
 * in load order, never through dlsym(RTLD_DEFAULT): that misses copies
 * loaded RTLD_LOCAL (Python's ctypes, the CUDA injection) and its order is
 * not load order, so two copies asking at different times could elect
 * different registries. The first-loaded copy stays first for the life of
 * the process, and is pinned so it cannot go away.
 */
#include "counters/runtime_resolve.h"

#include <dlfcn.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef const flare_runtime_abi *(*runtime_get_function)(uint32_t abi_version);

const char *counters_runtime_source_name(int source)
{
    switch (source) {
#define COUNTERS_RUNTIME_SOURCE_TEXT_(name, value, text)                                           \
    case value:                                                                                    \
        return text;
        COUNTERS_RUNTIME_SOURCE_MAP(COUNTERS_RUNTIME_SOURCE_TEXT_)
#undef COUNTERS_RUNTIME_SOURCE_TEXT_
    }
    return "unknown";
}

int counters_runtime_sharing_disabled(void)
{
    const char *value = getenv("FLARE_RUNTIME_DISABLE_SHARING");
    return value != NULL && value[0] != '\0' && strcmp(value, "0") != 0;
}

static void add_reason(counters_runtime_resolution *out, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

static void add_reason(counters_runtime_resolution *out, const char *format, ...)
{
    size_t used = strlen(out->reason);
    if (used + 3 >= sizeof(out->reason))
        return;
    if (used > 0) {
        memcpy(out->reason + used, "; ", 3);
        used += 2;
    }
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(out->reason + used, sizeof(out->reason) - used, format, arguments);
    va_end(arguments);
}

int counters_runtime_check_table(const flare_runtime_abi *table, char *reason, size_t reason_size)
{
    char unused[8];
    if (reason == NULL || reason_size == 0) {
        reason = unused;
        reason_size = sizeof(unused);
    }
    if (table == NULL) {
        snprintf(reason, reason_size, "it serves no ABI version %u", FLARE_RUNTIME_ABI_VERSION);
        return FLARE_ERR_UNSUPPORTED;
    }
    if (table->abi_version != FLARE_RUNTIME_ABI_VERSION) {
        snprintf(reason, reason_size, "it serves ABI version %u, not %u", table->abi_version,
                 FLARE_RUNTIME_ABI_VERSION);
        return FLARE_ERR_UNSUPPORTED;
    }
    /* A newer runtime's table only grows; an older, smaller one lacks entries we call. */
    if (table->struct_size < sizeof(flare_runtime_abi)) {
        snprintf(reason, reason_size, "its table has %u bytes, fewer than the %zu this module uses",
                 table->struct_size, sizeof(flare_runtime_abi));
        return FLARE_ERR_UNSUPPORTED;
    }
    if (table->counter_get == NULL || table->counter_find == NULL || table->counter_add == NULL ||
        table->counter_tick == NULL || table->counter_value == NULL ||
        table->counter_name == NULL || table->counter_rejected == NULL ||
        table->counter_count == NULL || table->counter_at == NULL ||
        table->counter_registry_rejections == NULL || table->scope_begin == NULL ||
        table->scope_end == NULL || table->scope_open == NULL || table->scope_close == NULL ||
        table->is_active == NULL || table->version == NULL) {
        snprintf(reason, reason_size, "its table has empty entries");
        return FLARE_ERR_UNSUPPORTED;
    }
    reason[0] = '\0';
    return FLARE_OK;
}

/* ---- copies already mapped ---- */

typedef struct loaded_module {
    char *name;
    ElfW(Addr) base;
} loaded_module;

typedef struct module_list {
    loaded_module *items;
    size_t count;
    size_t capacity;
} module_list;

/* Only gathers: dlopen inside dl_iterate_phdr's callback would run under
 * the loader's lock. Names are copied, since a module may be unloaded
 * between the walk and the look-up. */
static int collect_module(struct dl_phdr_info *info, size_t size, void *user)
{
    (void)size;
    module_list *list = user;
    if (info->dlpi_name == NULL || info->dlpi_name[0] == '\0')
        return 0; /* the main program: it exports nothing unless built -rdynamic */
    if (list->count == list->capacity) {
        size_t capacity = list->capacity ? list->capacity * 2 : 64;
        loaded_module *items = realloc(list->items, capacity * sizeof(*items));
        if (items == NULL)
            return 1;
        list->items = items;
        list->capacity = capacity;
    }
    char *name = strdup(info->dlpi_name);
    if (name == NULL)
        return 1;
    list->items[list->count].name = name;
    list->items[list->count].base = info->dlpi_addr;
    list->count++;
    return 0;
}

/* The runtime entry point of one loaded module, if it defines it itself
 * (dlsym on a handle also searches the module's dependencies, which would
 * find some other module's copy). The handle is returned for the caller to
 * close. */
static runtime_get_function module_entry(const loaded_module *module, void **handle_out,
                                         struct link_map **map_out)
{
    *handle_out = NULL;
    void *handle = dlopen(module->name, RTLD_LAZY | RTLD_NOLOAD);
    if (handle == NULL)
        return NULL;
    struct link_map *map = NULL;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == NULL || map->l_addr != module->base) {
        dlclose(handle);
        return NULL;
    }
    void *symbol = dlsym(handle, RUNTIME_SYMBOL);
    Dl_info info;
    struct link_map *owner = NULL;
    if (symbol == NULL || dladdr1(symbol, &info, (void **)&owner, RTLD_DL_LINKMAP) == 0 ||
        owner != map) {
        dlclose(handle);
        return NULL;
    }
    *handle_out = handle;
    *map_out = map;
    return (runtime_get_function)symbol;
}

/* Keeps a module mapped for the rest of the process. */
static void pin_module(const char *path)
{
    /* The handle is kept on purpose: it is the pin. */
    (void)dlopen(path, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
}

int counters_runtime_resolve_mapped(const void *self_address, counters_runtime_resolution *out)
{
    memset(out, 0, sizeof(*out));
    struct link_map *self_map = NULL;
    Dl_info self_info;
    if (self_address == NULL ||
        dladdr1(self_address, &self_info, (void **)&self_map, RTLD_DL_LINKMAP) == 0)
        self_map = NULL;

    module_list list = {0};
    dl_iterate_phdr(collect_module, &list);
    int status = FLARE_ERR_NOT_FOUND;
    for (size_t i = 0; i < list.count && status != FLARE_OK; i++) {
        void *handle;
        struct link_map *map;
        runtime_get_function get = module_entry(&list.items[i], &handle, &map);
        if (get == NULL)
            continue;
        if (map == self_map) {
            out->is_self = 1;
            out->source = COUNTERS_RUNTIME_SOURCE_MAPPED;
            snprintf(out->path, sizeof(out->path), "%s", list.items[i].name);
            status = FLARE_OK;
        } else {
            const flare_runtime_abi *table = get(FLARE_RUNTIME_ABI_VERSION);
            char why[160];
            if (counters_runtime_check_table(table, why, sizeof(why)) == FLARE_OK) {
                pin_module(list.items[i].name);
                out->table = table;
                out->source = COUNTERS_RUNTIME_SOURCE_MAPPED;
                snprintf(out->path, sizeof(out->path), "%s", list.items[i].name);
                status = FLARE_OK;
            } else {
                add_reason(out, "mapped %s skipped: %s", list.items[i].name, why);
            }
        }
        dlclose(handle);
    }
    for (size_t i = 0; i < list.count; i++)
        free(list.items[i].name);
    free(list.items);
    if (status != FLARE_OK)
        add_reason(out, "no flare runtime is mapped in the process");
    return status;
}

/* ---- loading one by path ---- */

static int load_runtime(const char *path, counters_runtime_source source,
                        counters_runtime_resolution *out)
{
    if (access(path, F_OK) != 0) {
        add_reason(out, "%s: no such file", path);
        return FLARE_ERR_NOT_FOUND;
    }
    /* GLOBAL so that modules loaded later that link libflare bind to this
     * copy instead of mapping another; NODELETE because handles into it
     * outlive us. Its constructor may start a session (under `flare trace`). */
    void *handle = dlopen(path, RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE);
    if (handle == NULL) {
        const char *error = dlerror();
        add_reason(out, "%s: cannot load: %s", path, error != NULL ? error : "unknown error");
        return FLARE_ERR_NOT_FOUND;
    }
    struct link_map *map = NULL;
    void *symbol = dlsym(handle, RUNTIME_SYMBOL);
    Dl_info info;
    struct link_map *owner = NULL;
    if (symbol == NULL || dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 ||
        dladdr1(symbol, &info, (void **)&owner, RTLD_DL_LINKMAP) == 0 || owner != map) {
        add_reason(out, "%s: does not define %s", path, RUNTIME_SYMBOL);
        dlclose(handle);
        return FLARE_ERR_NOT_FOUND;
    }
    const flare_runtime_abi *table = ((runtime_get_function)symbol)(FLARE_RUNTIME_ABI_VERSION);
    char why[160];
    if (counters_runtime_check_table(table, why, sizeof(why)) != FLARE_OK) {
        add_reason(out, "%s: %s", path, why);
        dlclose(handle);
        return FLARE_ERR_NOT_FOUND;
    }
    out->table = table;
    out->source = source;
    snprintf(out->path, sizeof(out->path), "%s", path);
    return FLARE_OK;
}

/* libflare.so in the directory of file (an absolute path to a file).
 * A relative one is refused: it would name whatever directory the process
 * runs in, and load (RTLD_GLOBAL) a libflare.so someone left there. */
static int load_beside(const char *file, counters_runtime_source source,
                       counters_runtime_resolution *out)
{
    if (file[0] != '/') {
        add_reason(out, "%s is not an absolute path: not searched beside it", file);
        return FLARE_ERR_NOT_FOUND;
    }
    const char *slash = strrchr(file, '/');
    char path[PATH_MAX];
    int length =
        snprintf(path, sizeof(path), "%.*s/%s", (int)(slash - file), file, RUNTIME_LIBRARY_NAME);
    if (length < 0 || (size_t)length >= sizeof(path)) {
        add_reason(out, "the directory of %s: path too long", file);
        return FLARE_ERR_NOT_FOUND;
    }
    return load_runtime(path, source, out);
}

int counters_runtime_resolve(const void *self_address, counters_runtime_resolution *out)
{
    if (counters_runtime_sharing_disabled()) {
        memset(out, 0, sizeof(*out));
        add_reason(out, "sharing disabled by FLARE_RUNTIME_DISABLE_SHARING");
        return FLARE_ERR_UNSUPPORTED;
    }
    if (counters_runtime_resolve_mapped(self_address, out) == FLARE_OK && out->table != NULL)
        return FLARE_OK;
    out->is_self = 0;

    Dl_info self;
    if (self_address != NULL && dladdr(self_address, &self) != 0 && self.dli_fname != NULL &&
        self.dli_fname[0] != '\0') {
        if (load_beside(self.dli_fname, COUNTERS_RUNTIME_SOURCE_BESIDE_MODULE, out) == FLARE_OK)
            return FLARE_OK;
    }
    const char *injection = getenv("CUDA_INJECTION64_PATH");
    if (injection != NULL && injection[0] != '\0') {
        if (load_beside(injection, COUNTERS_RUNTIME_SOURCE_BESIDE_INJECTION, out) == FLARE_OK)
            return FLARE_OK;
    } else {
        add_reason(out, "CUDA_INJECTION64_PATH is not set");
    }
    const char *explicit_path = getenv("FLARE_RUNTIME_PATH");
    if (explicit_path != NULL && explicit_path[0] != '\0') {
        char path[PATH_MAX];
        size_t length = strlen(explicit_path);
        int is_directory = length > 0 && explicit_path[length - 1] == '/';
        if (!is_directory) {
            char probe[PATH_MAX];
            if (snprintf(probe, sizeof(probe), "%s/.", explicit_path) < (int)sizeof(probe) &&
                access(probe, F_OK) == 0)
                is_directory = 1;
        }
        if (is_directory)
            snprintf(path, sizeof(path), "%s/%s", explicit_path, RUNTIME_LIBRARY_NAME);
        else
            snprintf(path, sizeof(path), "%s", explicit_path);
        if (load_runtime(path, COUNTERS_RUNTIME_SOURCE_ENVIRONMENT, out) == FLARE_OK)
            return FLARE_OK;
    } else {
        add_reason(out, "FLARE_RUNTIME_PATH is not set");
    }
    return FLARE_ERR_NOT_FOUND;
}
