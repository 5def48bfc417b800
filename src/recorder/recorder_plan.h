/*
 * recorder_plan.h: the flight recorder's decisions, as pure logic on the
 * caller's clock and numbers (recorder.h runs them against the store).
 *
 * The flight recorder keeps a long run's database bounded: full detail for
 * the last --keep DURATION and around deep windows and replays, older rows
 * evicted with their per-second totals kept, and the database held under
 * --max-size BYTES. What is decided here:
 *   - the settings: FLARE_KEEP / --keep (a duration) and FLARE_MAX_SIZE /
 *     --max-size (bytes: "512M", "2G", "1.5G", "1048576"), with messages
 *     that say precisely what is wrong;
 *   - the marks: once a pass, the newest rowid of every detail table and
 *     the time it was read. A row at or below a mark was written before the
 *     mark's time, so it ended before it: evicting "up to the mark taken at
 *     or before the cutoff" evicts only rows older than the cutoff, without
 *     an index on time. Marks are bounded (RECORDER_MARKS_MAX; when full,
 *     every other one is dropped and later ones are kept further apart);
 *   - the protected intervals (deep windows, replays) with their margin,
 *     merged, at most RECORDER_PROTECT_MAX kept: one that does not fit
 *     lowers the cutoff below it instead of being forgotten;
 *   - under --max-size: the size to aim for and how far to move the cutoff.
 * Must never read a clock, allocate, lock, block or touch SQLite.
 */
#ifndef FLARE_RECORDER_RECORDER_PLAN_H
#define FLARE_RECORDER_RECORDER_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- settings ---- */

#define RECORDER_NS_PER_S 1000000000ull
/* --keep: 1 s to 30 days. */
#define RECORDER_KEEP_MIN_NS RECORDER_NS_PER_S
#define RECORDER_KEEP_MAX_NS (720ull * 3600ull * RECORDER_NS_PER_S)
/* --max-size: at least 1 MiB (an empty session is about 200 KiB). */
#define RECORDER_MAX_SIZE_MIN (1ull << 20)
/* Detail kept each side of a deep window or a replay. */
#define RECORDER_MARGIN_NS RECORDER_NS_PER_S
/* How often a pass runs, at most. */
#define RECORDER_PERIOD_NS RECORDER_NS_PER_S
/* How late a row may reach the database after it ended and still be
 * protected by an interval the cursor has passed (delivery delays). */
#define RECORDER_LATE_NS (60ull * RECORDER_NS_PER_S)

typedef struct recorder_settings {
    uint64_t keep_ns;   /* 0: no time limit */
    uint64_t max_bytes; /* 0: no size limit */
} recorder_settings;

/* Whether the recorder runs at all (either limit set). */
bool recorder_settings_on(const recorder_settings *settings);

/*
 * Parses a size: digits with an optional fraction (digits on both sides of
 * the point), then an optional unit: none or B (bytes), K, M, G, T or KiB,
 * MiB, GiB, TiB (binary: 1K = 1024 bytes). Exact integer arithmetic: a size
 * that is not a whole number of bytes ("0.1K") or does not fit in 64 bits
 * is refused. Returns 0 with *out set, or -1 with a message in error (the
 * text quoted, never where it came from) and *out untouched.
 */
int recorder_parse_size(const char *text, uint64_t *out, char *error, size_t error_size);

/*
 * FLARE_KEEP and FLARE_MAX_SIZE as given (NULL or "": not set) into
 * *settings: the duration grammar (docs/rules.md), 1 s to 720 h, and a size
 * of at least 1 MiB. 0, or -1 with "FLARE_KEEP='...': why" in error.
 */
int recorder_settings_parse(const char *keep, const char *max_size, recorder_settings *settings,
                            char *error, size_t error_size);

/* "kept the last 10min in detail, the database under 2GiB": what the
 * capability row and the report say (truncated like snprintf). */
void recorder_settings_describe(const recorder_settings *settings, char *buffer, size_t size);

/* Bytes as the shortest exact binary unit: "2GiB", "1536MiB", "1000B". */
void recorder_format_size(uint64_t bytes, char *buffer, size_t size);

/* ---- marks ---- */

#define RECORDER_TABLES    8 /* STORE_EVICT_TABLE_COUNT; recorder.c asserts it */
#define RECORDER_MARKS_MAX 512

typedef struct recorder_mark {
    uint64_t time_ns;
    int64_t rowid[RECORDER_TABLES];
} recorder_mark;

/* Oldest first; times never decrease. The newest mark is always the last
 * one added; the others are kept at least spacing_ns apart. */
typedef struct recorder_marks {
    size_t count;
    uint64_t spacing_ns; /* 0 until the table first fills */
    recorder_mark items[RECORDER_MARKS_MAX];
} recorder_marks;

void recorder_marks_clear(recorder_marks *marks);
/* Adds mark (its time at or after the newest's) as the newest. The mark it
 * follows stays only when it is spacing_ns or more after the one before
 * it, else the new mark takes its place. When full, every other mark is
 * dropped (the oldest and the newest stay) and the spacing becomes the
 * average gap left, so the marks stay evenly spread over any length of
 * time at twice the spacing at most. */
void recorder_marks_add(recorder_marks *marks, const recorder_mark *mark);
/* The newest mark taken at or before cutoff_ns, and after after_ns; NULL
 * when there is none. */
const recorder_mark *recorder_marks_at(const recorder_marks *marks, uint64_t cutoff_ns,
                                       uint64_t after_ns);
/* The oldest mark taken after after_ns; NULL when there is none. */
const recorder_mark *recorder_marks_next(const recorder_marks *marks, uint64_t after_ns);
/* Forgets marks taken before time_ns (below the cursor: never used again). */
void recorder_marks_forget_before(recorder_marks *marks, uint64_t time_ns);
/* Forgets marks taken at or after time_ns (a pass whose batch was lost). */
void recorder_marks_forget_from(recorder_marks *marks, uint64_t time_ns);

/* ---- protected intervals ---- */

#define RECORDER_PROTECT_MAX 64
/* At most this many go into one pass (STORE_EVICT_INTERVALS_MAX). */
#define RECORDER_PASS_INTERVALS 8

typedef struct recorder_interval {
    uint64_t lo_ns;
    uint64_t hi_ns; /* inclusive; UINT64_MAX: still open */
} recorder_interval;

/* Sorted by lo, merged (no two overlap or touch). */
typedef struct recorder_protection {
    size_t count;
    recorder_interval items[RECORDER_PROTECT_MAX];
    /* Below the first interval that did not fit: no cutoff may pass it.
     * UINT64_MAX when every interval fitted. */
    uint64_t ceiling_ns;
} recorder_protection;

void recorder_protection_clear(recorder_protection *protection);
/* Adds [lo, hi] widened by margin_ns each side (saturating), merged with
 * what it touches. When full, the interval that starts last is dropped and
 * the ceiling lowered to its start. */
void recorder_protection_add(recorder_protection *protection, uint64_t lo_ns, uint64_t hi_ns,
                             uint64_t margin_ns);
/*
 * The cutoff one pass can use, at most cutoff_ns: lowered to the ceiling,
 * and, when more than max intervals start before it, to the start of the
 * first one left out (a row that ended before that start cannot overlap
 * it). The intervals starting before the result go into out (at most max);
 * *out_count says how many.
 */
uint64_t recorder_protection_cutoff(const recorder_protection *protection, uint64_t cutoff_ns,
                                    recorder_interval *out, size_t max, size_t *out_count);

/* ---- size ---- */

/* What a pass aims for under cap: 90% of it, less twice the growth of one
 * period (so the next period's rows still fit), and never under half. */
uint64_t recorder_size_target(uint64_t cap_bytes, uint64_t growth_bytes);
/*
 * A cutoff between oldest_ns (the cursor) and newest_ns (now) that should
 * bring used_bytes down to target_bytes, assuming detail is spread evenly
 * over that time: the excess's share of the span, a quarter more for each
 * earlier attempt that fell short; newest_ns from the fourth attempt on.
 */
uint64_t recorder_size_cutoff(uint64_t oldest_ns, uint64_t newest_ns, uint64_t used_bytes,
                              uint64_t target_bytes, unsigned attempt);

/* ---- spreading the work ---- */

/* The fewest rowids of a table one batch evicts, so a tail always ends,
 * and the most, so one batch never holds the collector long (about 15 ms
 * for a table of kernels on our 2-core VM): 327,680 rows a second and
 * table at the default 100 ms flush. */
#define RECORDER_CHUNK_MIN 2048
#define RECORDER_CHUNK_MAX 32768

/*
 * How many rowids of a table one batch evicts, of behind still to go: the
 * work spread evenly over the batches left before the next pass (the time
 * to it over the gap between batches, at least one), at least
 * RECORDER_CHUNK_MIN and at most RECORDER_CHUNK_MAX. A pass decides once a second; the batches in
 * between do the work, so the collector never stops for a whole second's rows.
 */
uint64_t recorder_chunk_rows(uint64_t behind, uint64_t now_ns, uint64_t next_pass_ns,
                             uint64_t batch_gap_ns);

/* The share of --max-size past which a batch does not wait for the next
 * pass, and the least time between two such early passes. */
#define RECORDER_URGENT_PERCENT 90
#define RECORDER_URGENT_GAP_NS  (RECORDER_NS_PER_S / 10)

/*
 * Whether a batch, between passes, must act at once: the database uses
 * more than RECORDER_URGENT_PERCENT of cap_bytes. The pass's target leaves
 * room for about two seconds of growth, but when the collector runs late
 * (a starved machine) the batches that spread the work arrive late too, and
 * the database can pass the cap before the next pass: an urgent batch evicts
 * its whole way at once (up to RECORDER_CHUNK_MAX rows a table) and, once
 * RECORDER_URGENT_GAP_NS after the last pass, runs a pass first so the
 * target moves on. false when cap_bytes is 0 (no --max-size).
 */
bool recorder_size_urgent(uint64_t used_bytes, uint64_t cap_bytes);

/* What one event the collector drains is taken to add to the database,
 * at most, when the room a batch has left is counted in events: its detail
 * row (the widest, a kernel, 18 integers, about 100 bytes with its cell;
 * the rows measured on the simulated device average about 40) and a share
 * of a new name. */
#define RECORDER_EVENT_BYTES 256
/* A batch asks again at least every cap/RECORDER_ROOM_SHARE bytes of
 * room, so rows of up to twice RECORDER_EVENT_BYTES pass the urgent share
 * by a twentieth of the cap at most. */
#define RECORDER_ROOM_SHARE 20

/*
 * --max-size, inside an open batch: how many more events the collector may
 * write before asking again, the database using used_bytes of cap_bytes.
 * 0 once over RECORDER_URGENT_PERCENT of the cap (recorder_size_urgent: the
 * batch commits first, and its recorder batch evicts at once); else the
 * bytes left below that share, at most cap/RECORDER_ROOM_SHARE, at
 * RECORDER_EVENT_BYTES an event, and at least 1. UINT64_MAX when cap_bytes
 * is 0 (no --max-size). Without it, a collector held up for a second (a
 * starved machine, another process holding the database) wrote its whole
 * backlog in one batch, before the recorder could evict: past the cap.
 */
uint64_t recorder_size_room(uint64_t used_bytes, uint64_t cap_bytes);

/* The --keep cutoff at now_ns: now - keep (0 before keep has passed). */
uint64_t recorder_keep_cutoff(uint64_t now_ns, uint64_t keep_ns);
/* Whether a pass is due: none yet, or RECORDER_PERIOD_NS since the last. */
bool recorder_pass_due(uint64_t last_pass_ns, uint64_t now_ns);

#endif /* FLARE_RECORDER_RECORDER_PLAN_H */
