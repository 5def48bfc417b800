/*
 * deepwin_auto.h: engine auto's arithmetic: the slowdown an engine's window
 * is estimated to cost, the choice of the deepest engine within the deep
 * budget, the process's recent kernel launch rate, and the deep budget's
 * text ("5%").
 *
 * An engine's cost is measured, not guessed (backend_engine_ops:
 * cost_launch_ns, cost_gpu, cost_source); a window of it is estimated to slow
 * the program by
 *
 *     slowdown = cost_gpu + cost_launch_ns * launch_rate_per_s / 1e9
 *
 * and engine auto takes the deepest engine (pc, then pm) whose estimate is
 * within the deep budget (docs/windows.md, "Engine auto").
 *
 * Pure: nothing here locks, allocates, reads a clock or the environment, or
 * logs. The window coordinator (deepwin.c) owns a deepwin_rate and calls the
 * rest under its own locks; a backend may call deepwin_auto_slowdown and
 * deepwin_budget_parse to decide, at install, whether an engine could ever be
 * chosen. It must never pick an engine whose cost was not measured.
 */
#ifndef FLARE_DEEPWIN_DEEPWIN_AUTO_H
#define FLARE_DEEPWIN_DEEPWIN_AUTO_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

/* The deep budget when none is given (--deep-budget, FLARE_DEEP_BUDGET): 5%. */
#define DEEPWIN_BUDGET_DEFAULT 0.05
/* The launch rate a backend assumes when it must decide at install, before
 * any launch, whether engine auto could pick an engine (CUDA PC sampling is
 * enabled at the first context or never): 10,000 launches per second. */
#define DEEPWIN_AUTO_NOMINAL_RATE 10000.0

/* The estimated fractional slowdown of a window (0.013: 1.3%). Pure. */
double deepwin_auto_slowdown(uint64_t cost_launch_ns, double cost_gpu, double launch_rate_per_s);

/* The same for engine's measured costs; -1 when engine is NULL or its cost
 * was not measured (cost_source NULL). */
double deepwin_auto_estimate(const backend_engine_ops *engine, double launch_rate_per_s);

/* Whether an engine of these costs fits the deep budget budget_text
 * (FLARE_DEEP_BUDGET's text; NULL or empty: DEEPWIN_BUDGET_DEFAULT) at
 * DEEPWIN_AUTO_NOMINAL_RATE: 1 or 0, and 0 for a malformed budget (auto
 * windows are refused then). For a backend that must set an engine up at
 * install or never. Pure. */
int deepwin_auto_fits_nominal(uint64_t cost_launch_ns, double cost_gpu, const char *budget_text);

/* One engine engine auto may choose, deepest first. */
typedef struct deepwin_auto_candidate {
    const backend_engine_ops *engine; /* NULL: none on this device */
    const char *kind;                 /* "pc", "pm" */
    /* NULL, or why engine cannot arm in this process (its unusable()):
     * passed over, whatever its cost. */
    const char *unusable;
} deepwin_auto_candidate;

typedef struct deepwin_auto_choice {
    /* The engine chosen, or NULL: refused (engines exist, none fits) or
     * none at all (no candidate has an engine: the window runs without). */
    const backend_engine_ops *engine;
    int refused; /* engines exist and none is within the budget */
    /* Refused because a usable, measured engine's estimate is over the
     * budget (a passing launch rate: worth asking again later), not for
     * want of a usable, measured engine. */
    int over_budget;
    /* Why the last candidate (pm) cannot arm in this process, or NULL. */
    const char *fallback_unusable;
    double estimate; /* the chosen engine's estimated slowdown */
    /* Whether the last candidate (pm) is measured and within the budget: a
     * busy pc window may then give way to it. And its estimate (-1: none). */
    int fallback_fits;
    double fallback_estimate;
} deepwin_auto_choice;

/*
 * Chooses among candidates[0..count) (deepest first) at launch_rate_per_s
 * within budget (a fraction: 0.05 is 5%; <= 0 refuses every engine, for a
 * malformed FLARE_DEEP_BUDGET). The first candidate with a measured engine
 * whose estimate is <= budget is chosen. reason (reason_size bytes, may be
 * cut) says what was chosen and why deeper ones were passed over, e.g.
 * "auto: pm, about 0.9% at 250,000 launches/s (budget 5%); pc about 31% is
 * over the budget", or, refused, "auto: no engine fits the 1% budget at
 * 250,000 launches/s: pc about 31%, pm about 15%". Pure; can't fail.
 */
void deepwin_auto_choose(const deepwin_auto_candidate *candidates, size_t count,
                         double launch_rate_per_s, double budget, deepwin_auto_choice *choice,
                         char *reason, size_t reason_size);

/* Writes an estimate (a fraction) as a percentage without the sign, two
 * significant figures ("0.06", "1.3", "31"; whole from 99.5 up). */
void deepwin_auto_format_percent(double fraction, char *buffer, size_t size);

/*
 * The deep budget's text: a number over 0 and at most 100 followed by %
 * ("5%", "0.5%", "12.5%"; a digit on both sides of a decimal point). 0 with
 * *fraction set (0.05 for "5%"); otherwise -1 and why (e.g. "'5' needs a
 * percent sign: write 5%") in why[0..why_size). NULL text is -1.
 */
int deepwin_budget_parse(const char *text, double *fraction, char *why, size_t why_size);

/* The process's recent kernel launch rate, from the beat's cumulative
 * launch counts: a point is kept at most every DEEPWIN_RATE_STEP_NS, the
 * rate taken over about the last second (0 until a second beat). Owned by one thread at a time
 * (the coordinator's beat); zero it to start. */
#define DEEPWIN_RATE_POINTS  8
#define DEEPWIN_RATE_STEP_NS 250000000ull  /* 250 ms */
#define DEEPWIN_RATE_SPAN_NS 1000000000ull /* 1 s */
typedef struct deepwin_rate {
    uint64_t ns[DEEPWIN_RATE_POINTS];
    uint64_t launches[DEEPWIN_RATE_POINTS];
    uint32_t newest; /* index of the newest point */
    uint32_t count;  /* points held */
} deepwin_rate;

/*
 * Takes one beat's (now_ns, cumulative launches) and returns the launch rate
 * per second: over the newest kept point and the newest one at least
 * DEEPWIN_RATE_SPAN_NS older than it (the oldest while none is that old); 0
 * until the second beat. A beat earlier than the newest point (a timer thread's
 * tick read its clock first) is ignored and returns -1; a count that goes
 * back starts afresh. Pure on rate; can't fail.
 */
double deepwin_rate_note(deepwin_rate *rate, uint64_t now_ns, uint64_t launches);

#endif /* FLARE_DEEPWIN_DEEPWIN_AUTO_H */
