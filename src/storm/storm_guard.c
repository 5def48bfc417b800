/*
 * storm_guard.c: the launch-storm guard's state machine (storm_guard.h).
 *
 * The rate is measured between consecutive steps from the launch count the
 * caller passes in, so the guard sees exactly what the launch callback
 * counted. Launches are charged to the decision that was in force while
 * they happened (the previous step's), which is what the caller applied to
 * CUPTI. Must never read a clock, lock or allocate in a step.
 */
#include "storm/storm_guard.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/flare.h"

#define STORM_RATE_MIN 1000ull
#define STORM_RATE_MAX 100000000ull
#define MS             1000000ull

struct storm_guard {
    storm_guard_config config;
    uint64_t last_ns;
    uint64_t rate_launches;    /* the count the next rate is measured from */
    uint64_t charged_launches; /* launches charged to timed or untimed so far */
    bool timed;                /* the previous step's answer */
    bool in_storm;
    bool above; /* rate at or over enter_rate since above_since */
    uint64_t above_since_ns;
    bool calm; /* rate under half of enter_rate since calm_since */
    uint64_t calm_since_ns;
    uint64_t storm_started_ns;
    uint64_t finished_storms_ns;
    bool slice_active;
    uint64_t slice_started_ns;
    uint64_t next_slice_ns;
    uint64_t storms;
    uint64_t untimed_launches;
    uint64_t sample_slices;
    uint64_t untimed_at_storm_start; /* untimed_launches when the running storm began */
    bool finished_pending;           /* a storm ended and was not taken yet */
    storm_guard_period finished;
};

void storm_guard_default_config(storm_guard_config *config)
{
    config->enter_rate = STORM_GUARD_DEFAULT_RATE;
    config->confirm_ns = 50 * MS;
    config->calm_ns = 500 * MS;
    config->sample_every_ns = 1000 * MS;
    config->sample_for_ns = 20 * MS;
}

int storm_guard_parse_rate(const char *text, uint64_t *rate, char *error, size_t error_size)
{
    if (text == NULL || *text == '\0') {
        snprintf(error, error_size, "empty; expected launches per second (e.g. 50000/s) or 0");
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    if (strcmp(text, "off") == 0 || strcmp(text, "0") == 0 || strcmp(text, "0/s") == 0) {
        *rate = 0;
        return FLARE_OK;
    }
    if (*text < '0' || *text > '9') {
        snprintf(error, error_size,
                 "'%.40s' is not a number; expected launches per second (e.g. 50000/s) or 0", text);
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    errno = 0;
    char *end = NULL;
    unsigned long long value = strtoull(text, &end, 10);
    if (strcmp(end, "/s") != 0 && *end != '\0') {
        snprintf(error, error_size,
                 "'%.40s': unexpected '%.16s' after the number; expected launches per second, "
                 "optionally followed by /s",
                 text, end);
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    if (errno == ERANGE || value < STORM_RATE_MIN || value > STORM_RATE_MAX) {
        snprintf(error, error_size, "'%.40s' is outside %llu..%llu launches per second (0: off)",
                 text, STORM_RATE_MIN, STORM_RATE_MAX);
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    *rate = value;
    return FLARE_OK;
}

int storm_guard_create(const storm_guard_config *config, uint64_t now_ns, uint64_t launches,
                       storm_guard **out)
{
    if (config == NULL || out == NULL || config->confirm_ns == 0 || config->calm_ns == 0 ||
        config->sample_for_ns == 0 || config->sample_for_ns >= config->sample_every_ns)
        return FLARE_ERR_INVALID_ARGUMENT;
    storm_guard *guard = calloc(1, sizeof(*guard));
    if (guard == NULL)
        return FLARE_ERR_NO_MEMORY;
    guard->config = *config;
    guard->last_ns = now_ns;
    guard->rate_launches = launches;
    guard->charged_launches = launches;
    guard->timed = true;
    *out = guard;
    return FLARE_OK;
}

void storm_guard_destroy(storm_guard *guard)
{
    free(guard);
}

static void begin_storm(storm_guard *guard, uint64_t now_ns)
{
    guard->in_storm = true;
    guard->storms++;
    guard->storm_started_ns = now_ns;
    guard->untimed_at_storm_start = guard->untimed_launches;
    guard->calm = false;
    guard->slice_active = false;
    /* The first slice comes a period in: the storm's first moments are
     * what the guard just saw timed. */
    guard->next_slice_ns = now_ns + guard->config.sample_every_ns;
}

static void end_storm(storm_guard *guard, uint64_t now_ns)
{
    guard->finished_storms_ns += now_ns - guard->storm_started_ns;
    /* A storm that ended before the last one was taken replaces it: the
     * caller takes after every step, so that only happens to a caller
     * that does not record periods at all. */
    guard->finished = (storm_guard_period){
        .start_ns = guard->storm_started_ns,
        .end_ns = now_ns,
        .untimed_launches = guard->untimed_launches - guard->untimed_at_storm_start,
    };
    guard->finished_pending = true;
    guard->in_storm = false;
    guard->above = false;
    guard->slice_active = false;
}

/* Watches the rate for a storm's start or end. */
static void follow_rate(storm_guard *guard, uint64_t now_ns, uint64_t launches_between)
{
    uint64_t elapsed_ns = now_ns - guard->last_ns;
    /* In double: launches * 1e9 overflows 64 bits past 1.8e10 launches. */
    double rate = (double)launches_between * 1e9 / (double)elapsed_ns;
    double enter = (double)guard->config.enter_rate;
    if (!guard->in_storm) {
        if (rate < enter) {
            guard->above = false;
            return;
        }
        if (!guard->above) {
            guard->above = true;
            guard->above_since_ns = guard->last_ns;
        }
        if (now_ns - guard->above_since_ns >= guard->config.confirm_ns)
            begin_storm(guard, now_ns);
        return;
    }
    if (rate * 2 >= enter) {
        guard->calm = false;
        return;
    }
    if (!guard->calm) {
        guard->calm = true;
        guard->calm_since_ns = guard->last_ns;
    }
    if (now_ns - guard->calm_since_ns >= guard->config.calm_ns)
        end_storm(guard, now_ns);
}

/* Opens and closes the storm's sample slices. */
static void follow_slices(storm_guard *guard, uint64_t now_ns)
{
    if (guard->slice_active && now_ns - guard->slice_started_ns >= guard->config.sample_for_ns)
        guard->slice_active = false;
    if (!guard->slice_active && now_ns >= guard->next_slice_ns) {
        guard->slice_active = true;
        guard->slice_started_ns = now_ns;
        guard->next_slice_ns = now_ns + guard->config.sample_every_ns;
        guard->sample_slices++;
    }
}

/* Charges the launches since the last charge to the answer they ran under. */
static void charge(storm_guard *guard, uint64_t launches, bool timed)
{
    if (launches <= guard->charged_launches)
        return;
    if (!timed)
        guard->untimed_launches += launches - guard->charged_launches;
    guard->charged_launches = launches;
}

bool storm_guard_step(storm_guard *guard, uint64_t now_ns, uint64_t launches, bool hold)
{
    charge(guard, launches, guard->timed);
    if (now_ns <= guard->last_ns) {
        /* No time passed: no rate to judge, but a hold still times. */
        guard->timed = guard->timed || hold;
        return guard->timed;
    }
    uint64_t between = launches > guard->rate_launches ? launches - guard->rate_launches : 0;
    if (guard->config.enter_rate != 0)
        follow_rate(guard, now_ns, between);
    if (guard->in_storm)
        follow_slices(guard, now_ns);
    guard->last_ns = now_ns;
    if (launches > guard->rate_launches)
        guard->rate_launches = launches;
    guard->timed = !guard->in_storm || guard->slice_active || hold;
    return guard->timed;
}

void storm_guard_settle(storm_guard *guard, uint64_t launches)
{
    charge(guard, launches, false);
}

void storm_guard_charge(storm_guard *guard, uint64_t launches)
{
    charge(guard, launches, guard->timed);
}

void storm_guard_skip(storm_guard *guard, uint64_t launches)
{
    if (launches > guard->charged_launches)
        guard->charged_launches = launches;
}

bool storm_guard_in_storm(const storm_guard *guard)
{
    return guard->in_storm;
}

uint64_t storm_guard_storms(const storm_guard *guard)
{
    return guard->storms;
}

uint64_t storm_guard_storm_ns(const storm_guard *guard)
{
    return guard->finished_storms_ns +
           (guard->in_storm ? guard->last_ns - guard->storm_started_ns : 0);
}

uint64_t storm_guard_untimed_launches(const storm_guard *guard)
{
    return guard->untimed_launches;
}

bool storm_guard_take_finished(storm_guard *guard, storm_guard_period *out)
{
    if (!guard->finished_pending)
        return false;
    guard->finished_pending = false;
    *out = guard->finished;
    return true;
}

bool storm_guard_running(const storm_guard *guard, storm_guard_period *out)
{
    if (!guard->in_storm)
        return false;
    *out = (storm_guard_period){
        .start_ns = guard->storm_started_ns,
        .end_ns = guard->last_ns,
        .untimed_launches = guard->untimed_launches - guard->untimed_at_storm_start,
    };
    return true;
}

uint64_t storm_guard_sample_slices(const storm_guard *guard)
{
    return guard->sample_slices;
}

void storm_guard_describe(const storm_guard *guard, uint64_t untimed_launches,
                          uint64_t untimed_copies, char *buffer, size_t size)
{
    snprintf(buffer, size,
             "over %llu launches/s: %llu storm(s), %.2f s; %llu launches and %llu copies/memsets "
             "counted but not timed; %llu sample slice(s) of %llu ms every %llu ms",
             (unsigned long long)guard->config.enter_rate, (unsigned long long)guard->storms,
             (double)storm_guard_storm_ns(guard) / 1e9, (unsigned long long)untimed_launches,
             (unsigned long long)untimed_copies, (unsigned long long)guard->sample_slices,
             (unsigned long long)(guard->config.sample_for_ns / 1000000),
             (unsigned long long)(guard->config.sample_every_ns / 1000000));
}
