/*
 * capability.c: the capability matrix table (capability.h).
 */
#include "core/capability.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* A reason holds a sentence or three (the PC source lines' counts are the
 * longest, about 500 bytes); a longer one is cut. */
#define CAPABILITY_REASON_MAX 640

typedef struct capability_row {
    char feature[32];
    int requested;
    char status[16];
    char reason[CAPABILITY_REASON_MAX];
    int changed;
} capability_row;

typedef struct external_drop {
    char source[32];
    char detail[96];
    uint64_t count;
    int changed;
} external_drop;

typedef struct described_device {
    int device;
    char name[128];
    char backend[16];
} described_device;

#define EXTERNAL_DROPS_MAX    32
#define DESCRIBED_DEVICES_MAX 64

static pthread_mutex_t capability_lock = PTHREAD_MUTEX_INITIALIZER;
static capability_row rows[CORE_CAPABILITY_MAX];
static int row_count;
static external_drop drops[EXTERNAL_DROPS_MAX];
static int drop_count;
static described_device devices[DESCRIBED_DEVICES_MAX];
static int device_count;

void core_capability_set(const char *feature, int requested, const char *status,
                         const char *reason_format, ...)
{
    char reason[CAPABILITY_REASON_MAX] = "";
    if (reason_format != NULL) {
        va_list arguments;
        va_start(arguments, reason_format);
        vsnprintf(reason, sizeof(reason), reason_format, arguments);
        va_end(arguments);
    }
    pthread_mutex_lock(&capability_lock);
    capability_row *row = NULL;
    for (int i = 0; i < row_count; i++)
        if (strcmp(rows[i].feature, feature) == 0)
            row = &rows[i];
    if (row == NULL && row_count < CORE_CAPABILITY_MAX) {
        row = &rows[row_count++];
        snprintf(row->feature, sizeof(row->feature), "%s", feature);
    }
    if (row != NULL) {
        row->requested = requested;
        snprintf(row->status, sizeof(row->status), "%s", status);
        snprintf(row->reason, sizeof(row->reason), "%s", reason);
        row->changed = 1;
    }
    pthread_mutex_unlock(&capability_lock);
}

void core_capabilities_write(store *database, int64_t pid, int everything)
{
    pthread_mutex_lock(&capability_lock);
    for (int i = 0; i < row_count; i++) {
        if (!rows[i].changed && !everything)
            continue;
        if (store_set_capability(database, pid, rows[i].feature, rows[i].requested, rows[i].status,
                                 rows[i].reason) == 0)
            rows[i].changed = 0;
    }
    for (int i = 0; i < drop_count; i++) {
        if (!drops[i].changed && !everything)
            continue;
        if (store_set_drops(database, pid, drops[i].source, drops[i].detail, drops[i].count) == 0)
            drops[i].changed = 0;
    }
    pthread_mutex_unlock(&capability_lock);
}

void core_drops_set(const char *source, const char *detail, uint64_t count)
{
    pthread_mutex_lock(&capability_lock);
    external_drop *row = NULL;
    for (int i = 0; i < drop_count; i++)
        if (strcmp(drops[i].source, source) == 0 && strcmp(drops[i].detail, detail) == 0)
            row = &drops[i];
    if (row == NULL && drop_count < EXTERNAL_DROPS_MAX) {
        row = &drops[drop_count++];
        snprintf(row->source, sizeof(row->source), "%s", source);
        snprintf(row->detail, sizeof(row->detail), "%s", detail);
    }
    if (row != NULL && row->count != count) {
        row->count = count;
        row->changed = 1;
    }
    pthread_mutex_unlock(&capability_lock);
}

void core_device_describe(int device, const char *name, const char *backend)
{
    pthread_mutex_lock(&capability_lock);
    described_device *row = NULL;
    for (int i = 0; i < device_count; i++)
        if (devices[i].device == device)
            row = &devices[i];
    if (row == NULL && device_count < DESCRIBED_DEVICES_MAX)
        row = &devices[device_count++];
    if (row != NULL) {
        row->device = device;
        snprintf(row->name, sizeof(row->name), "%s", name);
        snprintf(row->backend, sizeof(row->backend), "%s", backend);
    }
    pthread_mutex_unlock(&capability_lock);
}

int core_device_lookup(int device, char *name, size_t name_size, char *backend, size_t backend_size)
{
    int found = -1;
    pthread_mutex_lock(&capability_lock);
    for (int i = 0; i < device_count; i++) {
        if (devices[i].device == device) {
            snprintf(name, name_size, "%s", devices[i].name);
            snprintf(backend, backend_size, "%s", devices[i].backend);
            found = 0;
        }
    }
    pthread_mutex_unlock(&capability_lock);
    return found;
}

void core_capabilities_mark_all_changed(void)
{
    pthread_mutex_lock(&capability_lock);
    for (int i = 0; i < row_count; i++)
        rows[i].changed = 1;
    for (int i = 0; i < drop_count; i++)
        drops[i].changed = 1;
    pthread_mutex_unlock(&capability_lock);
}
