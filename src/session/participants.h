/*
 * participants.h: the features a session runs, each a table of hooks.
 *
 * The session layer (session.c, collector.c) never calls a feature by name:
 * it runs these tables in the orders participants.c fixes, and unwinds
 * exactly the participants whose begin ran when a later step fails. A
 * feature's hooks are thin adapters in participants.c over the feature's
 * own *_session_* functions. Nothing here may block the collector beyond
 * what the feature's own beat does, or run a hook of a participant whose
 * begin did not succeed.
 */
#ifndef FLARE_SESSION_PARTICIPANTS_H
#define FLARE_SESSION_PARTICIPANTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/scope.h"
#include "store/store.h"

/* What every begin is told. */
typedef struct session_start {
    const backend_descriptor *backend; /* the session's backend, never NULL */
    uint64_t now_ns;
} session_start;

/* One poll of the collector, inside its open batch. */
typedef struct session_beat {
    store *store;
    int64_t pid;
    uint64_t now_ns;
    int rings_drained; /* the poll's drain emptied every ring */
} session_beat;

/* A closed scope, as the collector drained it. */
typedef struct session_scope {
    uint64_t start_ns;
    uint64_t end_ns;
    uint64_t instance_id;
    uint32_t depth;
    int64_t thread_id;
    const char *name;
} session_scope;

typedef struct session_participant {
    const char *name;
    /* Before the collector starts. 0 or a negative flare_status. */
    int (*begin)(const session_start *start);
    /* Undoes begin when a later participant or the session's own start
     * failed: nothing is written, nothing is left running. */
    void (*cancel)(void);
    /* The backend's start() ran (CUDA: CUPTI is up): take its tables. */
    void (*backend_started)(const backend_descriptor *backend);
    /* Collector thread, every poll, inside the open batch. */
    void (*beat)(const session_beat *beat);
    /* Collector thread, before each commit, inside the batch; committed
     * follows with whether that batch committed. */
    void (*batch)(store *database, int64_t pid, uint64_t now_ns);
    void (*committed)(int committed);
    /* Collector thread, inside the open batch, as it drains the rings: how
     * many more events the batch may take before the participant is asked
     * again (SESSION_ROOM_ANY: no limit); 0: none, the batch commits first
     * (so that its batch hook can make room: the flight recorder under
     * --max-size). Asked at each batch's start and whenever the room given
     * is used up; a batch takes at least SESSION_ROOM_MIN events whatever
     * the answer, so collection never stops. */
    uint64_t (*room)(store *database);
    /* After the collector stopped, before the last batch. */
    void (*stop)(void);
    /* Inside the session's last batch. */
    void (*end)(store *database, int64_t pid, uint32_t generation, uint64_t end_ns);
    /* Observers on the collector thread, for every record it writes. */
    void (*kernel)(const char *name, uint64_t end_ns, uint64_t duration_ns);
    void (*metric)(int device, const char *name, uint64_t time_ns, int64_t value);
    void (*scope_closed)(const session_scope *scope);
} session_participant;

/* A list of participants in one phase's order. */
typedef struct session_order {
    const session_participant *const *items;
    size_t count;
} session_order;

/* The process's participants, in each phase's order (participants.c). */
const session_order *session_begin_order(void);
const session_order *session_beat_order(void);
const session_order *session_end_order(void);

/* The scope observer the features need (range replay by scope name). */
const core_scope_observer *session_scope_observer(void);
/* What the session hands a backend's start() (features.c). */
const backend_host *session_backend_host(void);
/* One finished piece of work on a device flare drives: counted for the
 * window launch bounds and the storm guard; false when the guard counts
 * it untimed instead of recording it. Any thread; never blocks. */
bool session_device_work_recorded(bool kernel);

/*
 * Runs begin of each participant in order. On the first failure, runs
 * cancel of every participant whose begin ran, in reverse, and returns that
 * status with its name in *failed (may be NULL). *begun is how many began.
 */
int session_participants_begin(const session_order *order, const session_start *start,
                               size_t *begun, const char **failed);
/* Cancels the first begun participants of order, in reverse. */
void session_participants_cancel(const session_order *order, size_t begun);

/* The hooks of one phase, in order; a participant without it is skipped. */
void session_participants_backend_started(const session_order *order,
                                          const backend_descriptor *backend);
void session_participants_beat(const session_order *order, const session_beat *beat);
void session_participants_batch(const session_order *order, store *database, int64_t pid,
                                uint64_t now_ns);
void session_participants_committed(const session_order *order, int committed);
/* The least room of the participants that have the hook (SESSION_ROOM_ANY
 * when none has); stops asking at 0. */
#define SESSION_ROOM_ANY UINT64_MAX
#define SESSION_ROOM_MIN 256u
uint64_t session_participants_room(const session_order *order, store *database);
void session_participants_stop(const session_order *order);
void session_participants_end(const session_order *order, store *database, int64_t pid,
                              uint32_t generation, uint64_t end_ns);
void session_participants_kernel(const session_order *order, const char *name, uint64_t end_ns,
                                 uint64_t duration_ns);
void session_participants_metric(const session_order *order, int device, const char *name,
                                 uint64_t time_ns, int64_t value);
void session_participants_scope_closed(const session_order *order, const session_scope *scope);

#endif /* FLARE_SESSION_PARTICIPANTS_H */
