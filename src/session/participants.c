/*
 * participants.c: runs the session's participants phase by phase
 * (participants.h).
 *
 * Generic over any order of tables, so the unwinding is tested with fake
 * participants (tests/session/test_participants.c). It must never call a
 * hook a participant does not have, nor cancel one whose begin did not run.
 */
#include "session/participants.h"

#include "flare/flare.h"

int session_participants_begin(const session_order *order, const session_start *start,
                               size_t *begun, const char **failed)
{
    size_t count = 0;
    if (failed != NULL)
        *failed = NULL;
    for (; count < order->count; count++) {
        const session_participant *participant = order->items[count];
        int status = participant->begin != NULL ? participant->begin(start) : FLARE_OK;
        if (status != FLARE_OK) {
            if (failed != NULL)
                *failed = participant->name;
            session_participants_cancel(order, count);
            if (begun != NULL)
                *begun = 0;
            return status;
        }
    }
    if (begun != NULL)
        *begun = count;
    return FLARE_OK;
}

void session_participants_cancel(const session_order *order, size_t begun)
{
    if (begun > order->count)
        begun = order->count;
    while (begun > 0) {
        const session_participant *participant = order->items[--begun];
        if (participant->cancel != NULL)
            participant->cancel();
    }
}

/* Runs one optional hook of every participant of order, in order. */
#define FOR_EACH_HOOK(order, hook, ...)                                                            \
    for (size_t index_ = 0; index_ < (order)->count; index_++) {                                   \
        const session_participant *participant_ = (order)->items[index_];                          \
        if (participant_->hook != NULL)                                                            \
            participant_->hook(__VA_ARGS__);                                                       \
    }

void session_participants_backend_started(const session_order *order,
                                          const backend_descriptor *backend)
{
    FOR_EACH_HOOK(order, backend_started, backend);
}

void session_participants_beat(const session_order *order, const session_beat *beat)
{
    FOR_EACH_HOOK(order, beat, beat);
}

void session_participants_batch(const session_order *order, store *database, int64_t pid,
                                uint64_t now_ns)
{
    FOR_EACH_HOOK(order, batch, database, pid, now_ns);
}

void session_participants_committed(const session_order *order, int committed)
{
    FOR_EACH_HOOK(order, committed, committed);
}

uint64_t session_participants_room(const session_order *order, store *database)
{
    uint64_t room = SESSION_ROOM_ANY;
    for (size_t index = 0; index < order->count && room > 0; index++) {
        const session_participant *participant = order->items[index];
        if (participant->room == NULL)
            continue;
        uint64_t asked = participant->room(database);
        room = asked < room ? asked : room;
    }
    return room;
}

void session_participants_stop(const session_order *order)
{
    for (size_t index = 0; index < order->count; index++) {
        const session_participant *participant = order->items[index];
        if (participant->stop != NULL)
            participant->stop();
    }
}

void session_participants_end(const session_order *order, store *database, int64_t pid,
                              uint32_t generation, uint64_t end_ns)
{
    FOR_EACH_HOOK(order, end, database, pid, generation, end_ns);
}

void session_participants_kernel(const session_order *order, const char *name, uint64_t end_ns,
                                 uint64_t duration_ns)
{
    FOR_EACH_HOOK(order, kernel, name, end_ns, duration_ns);
}

void session_participants_metric(const session_order *order, int device, const char *name,
                                 uint64_t time_ns, int64_t value)
{
    FOR_EACH_HOOK(order, metric, device, name, time_ns, value);
}

void session_participants_scope_closed(const session_order *order, const session_scope *scope)
{
    FOR_EACH_HOOK(order, scope_closed, scope);
}
