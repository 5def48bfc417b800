/*
 * recorder.c: the flight recorder's passes and the batches that do their
 * work (recorder.h).
 *
 * A pass, at most once a second, decides; it evicts nothing itself:
 *   1. a mark: the newest rowid of each detail table, and now;
 *   2. the protected intervals: deep windows and replays from the database,
 *      and the window open now (or just closed) as the collector saw it;
 *   3. the target: for --keep, the newest mark at or before now - DURATION;
 *      for --max-size, while the used size is over the target size, a later
 *      mark (the excess's share of the time since the cursor, more each
 *      pass it stays over). Rows at or below a mark's rowids were written,
 *      so ended, before its time.
 * Every batch (each commit of the collector) then evicts a share of the way
 * from the cursor to the target, spread over the batches until the next
 * pass (recorder_chunk_rows), so the collector never stops for a whole
 * second's rows: the store evicts the rows of the range that ended before
 * the target's time and overlap no protected interval, their totals kept.
 * A window that opens joins the target's protected intervals at once.
 * What a batch changes (cursor, target, counts) stands only once it
 * commits (recorder_committed); a lost batch takes its share with it, and
 * the next starts from the committed state. All state is static and
 * bounded: no per-row memory. Must never evict without knowing the
 * protected intervals.
 */
#include "recorder/recorder.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/capability.h"
#include "core/log.h"
#include "flare/flare.h"
#include "store/store_evict.h"

_Static_assert(RECORDER_TABLES == STORE_EVICT_TABLE_COUNT, "one mark column per detail table");
_Static_assert(RECORDER_PASS_INTERVALS == STORE_EVICT_INTERVALS_MAX, "intervals per pass");

#define RECORDER_FEATURE "flight_recorder"

/* Why rows went: their age (--keep) or the database's size (--max-size).
 * Rows older than --keep go first, under their own count. */
enum { REASON_KEEP = 0, REASON_SIZE = 1, REASON_COUNT = 2 };
static const char *const reason_text[REASON_COUNT] = {"older than --keep", "over --max-size"};

/* Where eviction is going: a mark per reason (time 0: none; the size mark
 * is later than the keep mark), and the protected intervals below them. */
typedef struct recorder_target {
    recorder_mark marks[REASON_COUNT];
    size_t count;
    recorder_interval intervals[RECORDER_PASS_INTERVALS];
} recorder_target;

/* What committed batches leave, and what the open batch has changed of it. */
typedef struct recorder_progress {
    recorder_mark cursor;       /* evicted up to: the rowids, and the last target's time */
    int64_t counter_samples_lo; /* the range's start before, for counter_samples */
    /* The cursor's time when that range began: the protection a pass loads
     * reaches back to it, since counter_samples looks at that range again. */
    uint64_t counter_samples_lo_ns;
    recorder_target target;
    uint64_t evicted[REASON_COUNT][RECORDER_TABLES];
    uint64_t stored[REASON_COUNT][RECORDER_TABLES]; /* what the drops rows say */
    uint64_t used;                                  /* used bytes at the last pass */
    uint64_t used_ns;                               /* and that pass's time */
    uint64_t freed;        /* bytes eviction freed since (--max-size only) */
    unsigned size_attempt; /* passes in a row that found the database over */
    /* The open window is among target's intervals (or below its marks):
     * rolled back with the batch that put it there, so the next batch puts
     * it back (a window that opened in a batch that did not commit). */
    bool window_in_target;
} recorder_progress;

/* Collector thread only between begin and end; begin and end run while no
 * collector does. */
static struct {
    bool on;
    bool capability_set; /* a row of an earlier session may stand */
    recorder_settings settings;
    uint64_t session_start_ns;
    bool have_start;
    bool wal_limited;
    bool prepared;
    bool window_active;
    uint64_t window_since_ns;
    bool have_last_window;
    recorder_interval last_window;
    uint64_t last_batch_ns;
    uint64_t batch_gap_ns;
    uint64_t last_pass_ns;
    bool work_in_batch;
    bool pass_in_batch;
    bool urgent_pass;  /* the batch's pass came early (recorder_size_urgent) */
    bool room_ran_out; /* recorder_room ended this batch: a pass may come at once */
    uint64_t pass_ns;
    bool over_cap_said;
    recorder_marks marks;
    recorder_protection protection;
    recorder_progress committed;
    recorder_progress pending;
} state;

static _Atomic uint64_t stat_passes, stat_until_ns, stat_rows, stat_kernels, stat_used, stat_urgent;
static _Atomic int64_t stat_kernel_rowid;

/* ---- begin and end ---- */

void recorder_begin_with(const recorder_settings *settings, uint64_t now_ns)
{
    bool was_set = state.capability_set;
    memset(&state, 0, sizeof(state));
    state.capability_set = was_set;
    atomic_store(&stat_passes, 0);
    atomic_store(&stat_urgent, 0);
    atomic_store(&stat_until_ns, 0);
    atomic_store(&stat_rows, 0);
    atomic_store(&stat_kernels, 0);
    atomic_store(&stat_used, 0);
    atomic_store(&stat_kernel_rowid, 0);
    if (!recorder_settings_on(settings)) {
        if (state.capability_set)
            core_capability_set(RECORDER_FEATURE, 0, CORE_CAPABILITY_OFF,
                                "not asked for in this session (FLARE_KEEP and FLARE_MAX_SIZE "
                                "unset)");
        return;
    }
    state.on = true;
    state.settings = *settings;
    /* Marks are taken after this, so the first target starts from here. */
    state.committed.cursor.time_ns = now_ns;
    state.committed.counter_samples_lo_ns = UINT64_MAX; /* no range looked at again yet */
    state.pending = state.committed;
    char described[160];
    recorder_settings_describe(settings, described, sizeof(described));
    core_capability_set(RECORDER_FEATURE, 1, CORE_CAPABILITY_ACTIVE,
                        "%s; older detail evicted, its per-second totals kept (v_kernel_seconds, "
                        "v_copy_seconds, v_api_call_seconds, v_metric_seconds)",
                        described);
    state.capability_set = true;
    core_log(CORE_LOG_INFO, "flight recorder: %s", described);
}

void recorder_begin(uint64_t now_ns)
{
    recorder_settings settings = {0, 0};
    char error[320];
    if (recorder_settings_parse(getenv("FLARE_KEEP"), getenv("FLARE_MAX_SIZE"), &settings, error,
                                sizeof(error)) != 0) {
        recorder_begin_with(&settings, now_ns);
        core_log(CORE_LOG_WARNING, "%s; recording without the flight recorder", error);
        core_capability_set(RECORDER_FEATURE, 1, CORE_CAPABILITY_UNAVAILABLE, "%s", error);
        state.capability_set = true;
        return;
    }
    recorder_begin_with(&settings, now_ns);
}

void recorder_end(void)
{
    state.on = false;
    state.work_in_batch = false;
}

int recorder_check_environment(char *error, size_t error_size)
{
    recorder_settings settings;
    return recorder_settings_parse(getenv("FLARE_KEEP"), getenv("FLARE_MAX_SIZE"), &settings, error,
                                   error_size);
}

void recorder_stats_get(recorder_stats *stats)
{
    stats->passes = atomic_load(&stat_passes);
    stats->urgent_passes = atomic_load(&stat_urgent);
    stats->evicted_until_ns = atomic_load(&stat_until_ns);
    stats->evicted_rows = atomic_load(&stat_rows);
    stats->evicted_kernels = atomic_load(&stat_kernels);
    stats->used_bytes = atomic_load(&stat_used);
    stats->evicted_kernel_rowid = atomic_load(&stat_kernel_rowid);
}

/* ---- protection ---- */

static int add_protected(uint64_t lo_ns, uint64_t hi_ns, void *user)
{
    recorder_protection_add(user, lo_ns, hi_ns, RECORDER_MARGIN_NS);
    return 0;
}

/* What must stay in detail: windows and replays the database holds (those
 * that end late enough to matter to rows not yet evicted, late ones
 * included), and the window the collector saw open. */
static int read_protection(store *database)
{
    recorder_protection_clear(&state.protection);
    uint64_t cursor = state.pending.cursor.time_ns;
    if (state.pending.counter_samples_lo_ns < cursor)
        cursor = state.pending.counter_samples_lo_ns;
    uint64_t since = cursor > RECORDER_LATE_NS + RECORDER_MARGIN_NS
                         ? cursor - RECORDER_LATE_NS - RECORDER_MARGIN_NS
                         : 0;
    int status = store_evict_protected(database, since, add_protected, &state.protection);
    if (status != FLARE_OK)
        return status;
    if (state.window_active)
        recorder_protection_add(&state.protection, state.window_since_ns, UINT64_MAX,
                                RECORDER_MARGIN_NS);
    if (state.have_last_window)
        recorder_protection_add(&state.protection, state.last_window.lo_ns, state.last_window.hi_ns,
                                RECORDER_MARGIN_NS);
    return FLARE_OK;
}

/* A window seen active began after the batch before (when it was not):
 * its start is taken from there, so it is never later than the truth.
 * Returns whether it has just been seen to open. */
static bool track_window(uint64_t now_ns, bool active)
{
    bool opened = active && !state.window_active;
    if (opened)
        state.window_since_ns = state.last_batch_ns != 0 ? state.last_batch_ns : now_ns;
    if (state.last_batch_ns != 0 && now_ns > state.last_batch_ns)
        state.batch_gap_ns = now_ns - state.last_batch_ns;
    state.last_batch_ns = now_ns;
    if (!active && state.window_active) {
        state.last_window = (recorder_interval){state.window_since_ns, now_ns};
        state.have_last_window = true;
    }
    state.window_active = active;
    return opened;
}

/* ---- the target ---- */

/* The newest mark a cutoff reaches past the cursor, lowered below what the
 * protection cannot hand one pass; with at_least_one, the next mark after
 * the cursor when the cutoff reaches none. NULL: none. */
static const recorder_mark *choose_mark(uint64_t cutoff_ns, bool at_least_one)
{
    recorder_interval intervals[RECORDER_PASS_INTERVALS];
    size_t count = 0;
    uint64_t after = state.pending.cursor.time_ns;
    uint64_t cutoff = recorder_protection_cutoff(&state.protection, cutoff_ns, intervals,
                                                 RECORDER_PASS_INTERVALS, &count);
    const recorder_mark *mark = recorder_marks_at(&state.marks, cutoff, after);
    if (mark != NULL || !at_least_one)
        return mark;
    const recorder_mark *next = recorder_marks_next(&state.marks, after);
    if (next == NULL)
        return NULL;
    cutoff = recorder_protection_cutoff(&state.protection, next->time_ns, intervals,
                                        RECORDER_PASS_INTERVALS, &count);
    return recorder_marks_at(&state.marks, cutoff, after);
}

/* Pulls the target back to marks at or before limit_ns (a window that
 * opened, or protection that a pass cannot hand the store whole). */
static void target_limit(recorder_target *target, uint64_t limit_ns)
{
    for (int reason = 0; reason < REASON_COUNT; reason++) {
        recorder_mark *mark = &target->marks[reason];
        if (mark->time_ns == 0 || mark->time_ns <= limit_ns)
            continue;
        const recorder_mark *earlier =
            recorder_marks_at(&state.marks, limit_ns, state.pending.cursor.time_ns);
        if (earlier != NULL)
            *mark = *earlier;
        else
            mark->time_ns = 0;
    }
}

/* The target's protected intervals, for its latest mark. */
static void target_protect(recorder_target *target)
{
    uint64_t latest = target->marks[REASON_KEEP].time_ns;
    if (target->marks[REASON_SIZE].time_ns > latest)
        latest = target->marks[REASON_SIZE].time_ns;
    if (latest == 0) {
        target->count = 0;
        return;
    }
    uint64_t cutoff = recorder_protection_cutoff(&state.protection, latest, target->intervals,
                                                 RECORDER_PASS_INTERVALS, &target->count);
    if (cutoff < latest)
        target_limit(target, cutoff);
}

/* A window that opens is protected at once, margin included, from the
 * batches' shares of a target chosen before it: among the target's
 * intervals, or, when they are full, by pulling the target back below it. */
static void target_protect_window(recorder_target *target)
{
    uint64_t lo =
        state.window_since_ns > RECORDER_MARGIN_NS ? state.window_since_ns - RECORDER_MARGIN_NS : 0;
    if (target->count < RECORDER_PASS_INTERVALS)
        target->intervals[target->count++] = (recorder_interval){lo, UINT64_MAX};
    else
        target_limit(target, lo);
}

/* Moves the target of reason on to mark when that is later than where it
 * stands (and, for size, than the keep mark). */
static void target_advance(int reason, const recorder_mark *mark)
{
    recorder_target *target = &state.pending.target;
    if (mark == NULL || mark->time_ns <= target->marks[reason].time_ns)
        return;
    if (reason == REASON_SIZE && mark->time_ns <= target->marks[REASON_KEEP].time_ns)
        return;
    target->marks[reason] = *mark;
}

/* --max-size: while the database is over its target size, a later mark,
 * further each pass it stays over; says once when nothing is left. */
static void plan_size(store *database, uint64_t now_ns)
{
    recorder_progress *pending = &state.pending;
    uint64_t used = 0, file = 0;
    if (store_evict_used_bytes(database, &used, &file) != FLARE_OK)
        return;
    /* What a period brings, whatever eviction took away meanwhile; after an
     * urgent pass, a shorter period's growth counts as a whole period's. */
    uint64_t growth = pending->used != 0 && used + pending->freed > pending->used
                          ? used + pending->freed - pending->used
                          : 0;
    uint64_t period_ns = now_ns > pending->used_ns ? now_ns - pending->used_ns : 0;
    if (pending->used_ns != 0 && period_ns != 0 && period_ns < RECORDER_PERIOD_NS)
        growth = growth > UINT64_MAX / RECORDER_PERIOD_NS ? UINT64_MAX
                                                          : growth * RECORDER_PERIOD_NS / period_ns;
    uint64_t target = recorder_size_target(state.settings.max_bytes, growth);
    pending->used = used;
    pending->used_ns = now_ns;
    pending->freed = 0;
    if (used <= target) {
        pending->size_attempt = 0;
        return;
    }
    const recorder_mark *mark = choose_mark(
        recorder_size_cutoff(pending->cursor.time_ns, now_ns, used, target, pending->size_attempt),
        true);
    /* Only a regular pass presses harder: urgent ones come ten a second,
     * before the last target could be reached. */
    if (pending->size_attempt < 3 && !state.urgent_pass)
        pending->size_attempt++;
    target_advance(REASON_SIZE, mark);
    if (mark == NULL && used > state.settings.max_bytes && !state.over_cap_said) {
        state.over_cap_said = true;
        char cap[32];
        recorder_format_size(state.settings.max_bytes, cap, sizeof(cap));
        core_log(CORE_LOG_WARNING,
                 "flight recorder: the database uses %llu bytes, over --max-size %s, and nothing "
                 "older is left to evict (detail around deep windows and replays, the per-second "
                 "totals and the session's other tables stay)",
                 (unsigned long long)used, cap);
    }
}

/* Once-per-session facts: second 0 of the totals, deletes that do not
 * rewrite what they free, and a small log beside a capped database. */
static void prepare(store *database, uint64_t now_ns)
{
    if (!state.have_start) {
        uint64_t start = now_ns;
        if (store_evict_session_start(database, &start) == FLARE_OK)
            state.have_start = true;
        state.session_start_ns = start;
    }
    if (!state.prepared)
        state.prepared = store_evict_prepare(database) == FLARE_OK;
    if (state.settings.max_bytes != 0 && !state.wal_limited)
        state.wal_limited = store_evict_limit_wal(database, state.settings.max_bytes) == FLARE_OK;
}

/* The pass: a mark, the protection, and where eviction goes from here.
 * false when the database could not be read (no eviction this batch). */
static bool run_pass(store *database, uint64_t now_ns)
{
    prepare(database, now_ns);
    recorder_mark mark = {.time_ns = now_ns};
    if (store_evict_newest_rowids(database, mark.rowid) != FLARE_OK ||
        read_protection(database) != FLARE_OK) {
        CORE_LOG_ONCE("recorder.read", CORE_LOG_WARNING, "flight recorder: a pass was skipped: %s",
                      store_last_error(database));
        return false;
    }
    recorder_marks_add(&state.marks, &mark);
    state.pass_in_batch = true;
    state.pass_ns = now_ns;
    uint64_t keep_cutoff = recorder_keep_cutoff(now_ns, state.settings.keep_ns);
    if (keep_cutoff != 0)
        target_advance(REASON_KEEP, choose_mark(keep_cutoff, false));
    if (state.settings.max_bytes != 0)
        plan_size(database, now_ns);
    target_protect(&state.pending.target);
    state.pending.window_in_target = state.window_active; /* in the protection just loaded */
    return true;
}

/* ---- the batches' share ---- */

/* Evicts toward one reason's mark, at most budget[t] rowids of each table.
 * Returns whether the mark is reached; a store failure is logged (once),
 * undone, and leaves everything as it was. */
static bool evict_share(store *database, int64_t pid, int reason, uint64_t *budget, bool *failed)
{
    recorder_progress *pending = &state.pending;
    const recorder_mark *mark = &pending->target.marks[reason];
    uint64_t cursor_ns_before = pending->cursor.time_ns;
    store_evict_pass pass = {.pid = pid,
                             .session_start_ns = state.session_start_ns,
                             .cutoff_ns = mark->time_ns,
                             .counter_samples_lo = pending->counter_samples_lo,
                             .protect_count = pending->target.count};
    bool work = false;
    for (int t = 0; t < RECORDER_TABLES; t++) {
        int64_t lo = pending->cursor.rowid[t], hi = mark->rowid[t];
        if (t != STORE_EVICT_COUNTER_SAMPLES && hi > lo && (uint64_t)(hi - lo) > budget[t])
            hi = lo + (int64_t)budget[t];
        pass.lo[t] = lo;
        pass.hi[t] = hi > lo ? hi : lo;
        work = work || hi > lo;
    }
    for (size_t i = 0; i < pass.protect_count; i++)
        pass.protect[i] = (store_evict_interval){pending->target.intervals[i].lo_ns,
                                                 pending->target.intervals[i].hi_ns};
    uint64_t evicted[RECORDER_TABLES], before = 0, after = 0, file = 0;
    bool sized = work && state.settings.max_bytes != 0 &&
                 store_evict_used_bytes(database, &before, &file) == FLARE_OK;
    if (work && store_evict_run(database, &pass, evicted) != FLARE_OK) {
        CORE_LOG_ONCE("recorder.evict", CORE_LOG_WARNING,
                      "flight recorder: an eviction failed and was undone (tried again at the next "
                      "batch): %s",
                      store_last_error(database));
        *failed = true;
        return false;
    }
    bool reached = true;
    for (int t = 0; t < RECORDER_TABLES; t++) {
        if (work) {
            pending->evicted[reason][t] += evicted[t];
            budget[t] -= budget[t] < (uint64_t)(pass.hi[t] - pass.lo[t])
                             ? budget[t]
                             : (uint64_t)(pass.hi[t] - pass.lo[t]);
            pending->cursor.rowid[t] = pass.hi[t];
        }
        /* The store never evicts a table's newest row: one short counts. */
        reached = reached && pending->cursor.rowid[t] >= mark->rowid[t] - 1;
    }
    /* The next range of counter_samples starts where this one did, so the
     * sample kept as a counter's newest is looked at again. */
    if (pass.hi[STORE_EVICT_COUNTER_SAMPLES] > pass.lo[STORE_EVICT_COUNTER_SAMPLES] &&
        pending->counter_samples_lo != pass.lo[STORE_EVICT_COUNTER_SAMPLES]) {
        pending->counter_samples_lo = pass.lo[STORE_EVICT_COUNTER_SAMPLES];
        pending->counter_samples_lo_ns = cursor_ns_before;
    }
    if (sized && store_evict_used_bytes(database, &after, &file) == FLARE_OK && before > after)
        pending->freed += before - after;
    return reached;
}

/* This batch's share of the way to the target: the keep mark first; all
 * of it (up to RECORDER_CHUNK_MAX rows a table) when urgent. */
static void evict_batch_share(store *database, int64_t pid, uint64_t now_ns, bool urgent)
{
    recorder_progress *pending = &state.pending;
    uint64_t budget[RECORDER_TABLES];
    const recorder_mark *last =
        pending->target.marks[REASON_SIZE].time_ns > pending->target.marks[REASON_KEEP].time_ns
            ? &pending->target.marks[REASON_SIZE]
            : &pending->target.marks[REASON_KEEP];
    for (int t = 0; t < RECORDER_TABLES; t++) {
        int64_t behind = last->rowid[t] - pending->cursor.rowid[t];
        uint64_t next_pass_ns = urgent ? now_ns : state.last_pass_ns + RECORDER_PERIOD_NS;
        budget[t] = recorder_chunk_rows(behind > 0 ? (uint64_t)behind : 0, now_ns, next_pass_ns,
                                        state.batch_gap_ns);
    }
    bool failed = false;
    for (int reason = 0; reason < REASON_COUNT && !failed; reason++) {
        recorder_mark *mark = &pending->target.marks[reason];
        if (mark->time_ns == 0 || !evict_share(database, pid, reason, budget, &failed))
            continue;
        /* Reached: everything that ended before it went, bar protection. */
        if (mark->time_ns > pending->cursor.time_ns)
            pending->cursor.time_ns = mark->time_ns;
        mark->time_ns = 0;
        recorder_marks_forget_before(&state.marks, pending->cursor.time_ns);
    }
}

static void write_drops(store *database, int64_t pid)
{
    recorder_progress *pending = &state.pending;
    for (int reason = 0; reason < REASON_COUNT; reason++) {
        for (int t = 0; t < RECORDER_TABLES; t++) {
            if (pending->evicted[reason][t] == pending->stored[reason][t])
                continue;
            char detail[96];
            snprintf(detail, sizeof(detail), "%s evicted (%s)",
                     store_evict_table_label((store_evict_table)t), reason_text[reason]);
            if (store_set_drops(database, pid, "flight_recorder", detail,
                                pending->evicted[reason][t]) == FLARE_OK)
                pending->stored[reason][t] = pending->evicted[reason][t];
        }
    }
}

/* --max-size, between passes: whether the database is so near its cap that
 * this batch must not wait (recorder_size_urgent). */
static bool size_urgent(store *database)
{
    uint64_t used = 0, file = 0;
    return state.settings.max_bytes != 0 &&
           store_evict_used_bytes(database, &used, &file) == FLARE_OK &&
           recorder_size_urgent(used, state.settings.max_bytes);
}

void recorder_batch(store *database, int64_t pid, uint64_t now_ns, bool window_active)
{
    if (!state.on || state.work_in_batch)
        return;
    bool opened = track_window(now_ns, window_active);
    state.pending = state.committed;
    state.work_in_batch = true;
    if (opened)
        state.pending.window_in_target = false;
    if (state.window_active && !state.pending.window_in_target) {
        target_protect_window(&state.pending.target);
        state.pending.window_in_target = true;
    }
    bool due = recorder_pass_due(state.last_pass_ns, now_ns);
    bool urgent = size_urgent(database);
    /* A batch that ran out of room plans again when its target is reached:
     * until then the collector can only take a little at a time. */
    bool target_left = state.pending.target.marks[REASON_SIZE].time_ns != 0 ||
                       state.pending.target.marks[REASON_KEEP].time_ns != 0;
    bool early_ok = now_ns - state.last_pass_ns >= RECORDER_URGENT_GAP_NS ||
                    (state.room_ran_out && !target_left);
    state.room_ran_out = false;
    state.urgent_pass = !due && urgent && early_ok;
    due = due || state.urgent_pass;
    if (due) {
        state.last_pass_ns = now_ns;
        if (!run_pass(database, now_ns))
            return;
    }
    evict_batch_share(database, pid, now_ns, urgent);
    write_drops(database, pid);
}

uint64_t recorder_room(store *database)
{
    uint64_t used = 0, file = 0;
    if (!state.on || state.settings.max_bytes == 0 ||
        store_evict_used_bytes(database, &used, &file) != FLARE_OK)
        return UINT64_MAX;
    uint64_t room = recorder_size_room(used, state.settings.max_bytes);
    if (room == 0)
        state.room_ran_out = true;
    return room;
}

static uint64_t sum_evicted(const recorder_progress *progress, int table)
{
    uint64_t sum = 0;
    for (int reason = 0; reason < REASON_COUNT; reason++)
        for (int t = 0; t < RECORDER_TABLES; t++)
            if (table < 0 || t == table)
                sum += progress->evicted[reason][t];
    return sum;
}

void recorder_committed(int committed)
{
    if (!state.on || !state.work_in_batch)
        return;
    state.work_in_batch = false;
    bool pass = state.pass_in_batch;
    state.pass_in_batch = false;
    if (!committed) {
        /* The batch's share went with it; so does its pass's mark, which
         * names rowids the next batch will hand out again. */
        state.pending = state.committed;
        if (pass)
            recorder_marks_forget_from(&state.marks, state.pass_ns);
        return;
    }
    state.committed = state.pending;
    if (pass)
        atomic_fetch_add(&stat_passes, 1);
    if (pass && state.urgent_pass)
        atomic_fetch_add(&stat_urgent, 1);
    atomic_store(&stat_until_ns, state.committed.cursor.time_ns);
    atomic_store(&stat_rows, sum_evicted(&state.committed, -1));
    atomic_store(&stat_kernels, sum_evicted(&state.committed, STORE_EVICT_KERNELS));
    atomic_store(&stat_used, state.committed.used);
    atomic_store(&stat_kernel_rowid, state.committed.cursor.rowid[STORE_EVICT_KERNELS]);
}
