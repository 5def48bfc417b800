/*
 * store_views.h: schema version 7's name tables and views, and the indexes
 * built once a session's collection is over (docs/schema.md, "Views and
 * name tables"). Must never change a row of the session.
 */
#ifndef FLARE_STORE_STORE_VIEWS_H
#define FLARE_STORE_STORE_VIEWS_H

#include <stdint.h>

#include "store/store.h"

/* Inside the schema's creation (store.c) or an upgrade: the name tables
 * (enum_*) with their rows, and the views (v_*). 0 or FLARE_ERR_STORE. */
int store_views_create(store *handle);

/* What a build made (callers time it on their own clock). */
typedef struct store_index_result {
    int indexes; /* indexes the views use, now present */
} store_index_result;

/* Builds the indexes (CREATE INDEX IF NOT EXISTS: a second call is cheap),
 * records the longest kernel in meta for v_scope_gpu_time, marks the
 * session indexed and refreshes the planner's statistics. A handle opened
 * for WRITE; 0 or a negative status with the error recorded. */
int store_build_indexes(store *handle, store_index_result *result);

/* Whether the session's indexes were built. */
int store_is_indexed(store *handle);

#endif /* FLARE_STORE_STORE_VIEWS_H */
