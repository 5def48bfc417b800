/*
 * capability.c: the capability matrix table (capability.h).
 */
#include "core/capability.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct capability_row {
    char feature[32];
    int requested;
    char status[16];
    char reason[256];
    int changed;
} capability_row;

static pthread_mutex_t capability_lock = PTHREAD_MUTEX_INITIALIZER;
static capability_row rows[CORE_CAPABILITY_MAX];
static int row_count;

void core_capability_set(const char *feature, int requested, const char *status,
                         const char *reason_format, ...)
{
    char reason[256] = "";
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
    pthread_mutex_unlock(&capability_lock);
}

void core_capabilities_mark_all_changed(void)
{
    pthread_mutex_lock(&capability_lock);
    for (int i = 0; i < row_count; i++)
        rows[i].changed = 1;
    pthread_mutex_unlock(&capability_lock);
}
