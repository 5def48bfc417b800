/*
 * evaluator.h: the deep-profiling rule evaluator, a pure state machine per
 * rule (docs/rules.md, "How rules are evaluated").
 *
 * The evaluator reads no clock, does no I/O and never talks to the window
 * coordinator itself: every call takes now_ns, a reading (src/rules/
 * readings.h) and a view of the coordinator (is any window pending, open or
 * closing; what became of this rule's last request). rules_evaluator_step
 * answers whether the rule wants a window now; the caller asks the
 * coordinator, with the rule's token, and tells the outcome back through the
 * next step's view. Tests drive it with a fake clock.
 *
 * States:
 *   WARMING_UP       until the rate window has filled once (now - start >= over)
 *   ARMED            evaluating readings
 *   PENDING          the comparison holds; first_true_ns is the observation
 *                    it started holding at. Fires once a later observation is
 *                    `for` after it (a span between two observations, not a
 *                    sum); a false, missing or stale reading resets it
 *   REQUESTED        a window was asked for and is queued
 *   BLACKOUT         a window is pending, open or closing, whoever opened it:
 *                    readings are discarded (the deep engine perturbs them)
 *   RECOVERY         after a close, one clean rate window (`over`) refills
 *                    before readings count again
 *   COOLDOWN         after its own window, quiet until close + cooldown
 *   WAITING_TO_REARM after its own window, until a reading passes the rearm side
 *   EXHAUSTED        max_windows of its own windows opened (terminal)
 *   REFUSED          invalid rule, or an engine that cannot arm (terminal)
 *
 * Budget: only windows that actually OPENED with this rule's token spend it.
 * A busy refusal, a cancelled request or a manual or scheduled window costs
 * nothing.
 *
 * Threads: none of its own; one thread steps an evaluator (the collector's).
 */
#ifndef FLARE_RULES_EVALUATOR_H
#define FLARE_RULES_EVALUATOR_H

#include <stddef.h>
#include <stdint.h>

#include "rules/readings.h"
#include "rules/rule.h"

#define RULES_EVALUATOR_MAX        RULES_LIST_MAX
#define RULES_EVALUATOR_REASON_MAX 256

typedef enum rules_evaluator_state {
    RULES_EVAL_WARMING_UP = 0,
    RULES_EVAL_ARMED,
    RULES_EVAL_PENDING,
    RULES_EVAL_REQUESTED,
    RULES_EVAL_BLACKOUT,
    RULES_EVAL_RECOVERY,
    RULES_EVAL_COOLDOWN,
    RULES_EVAL_WAITING_TO_REARM,
    RULES_EVAL_EXHAUSTED,
    RULES_EVAL_REFUSED,
} rules_evaluator_state;

/* What became of this rule's last request (its own token only). */
typedef enum rules_request_outcome {
    RULES_OUTCOME_NONE = 0,       /* no request outstanding, or nothing new */
    RULES_OUTCOME_QUEUED,         /* accepted, waiting for the beat to arm */
    RULES_OUTCOME_OPENED,         /* the engine armed: the window is open */
    RULES_OUTCOME_CLOSED,         /* it opened and has closed since */
    RULES_OUTCOME_REFUSED_BUSY,   /* another window was in the way: costs nothing */
    RULES_OUTCOME_CANCELLED,      /* closed while still queued: costs nothing */
    RULES_OUTCOME_REFUSED_ENGINE, /* the engine could not be armed: costs nothing */
    RULES_OUTCOME_BUDGET_SPENT,   /* action replay: the process's replay budget is spent */
    /* engine auto: no engine fitted the deep budget at the launch rate of
     * the moment (the window's record says why): spends none of
     * max_windows; the rule recovers, cools down and rearms as after a
     * window, then may ask again (at a lower rate, perhaps). */
    RULES_OUTCOME_OVER_BUDGET,
} rules_request_outcome;

typedef struct rules_coordinator_view {
    int blackout;                  /* any window pending, open or closing */
    rules_request_outcome outcome; /* this rule's last request */
    uint64_t closed_ns;            /* CLOSED: when it closed (0: now) */
    const char *reason;            /* REFUSED_ENGINE: the engine's reason (may be NULL) */
} rules_coordinator_view;

/* One rule's state and counters. */
typedef struct rules_evaluator_rule {
    int valid;
    rules_rule rule; /* zeroed when refused at parse time */
    char text[RULES_TEXT_MAX + 1];
    char canonical[RULES_FORMAT_MAX];
    rules_evaluator_state state;
    char reason[RULES_EVALUATOR_REASON_MAX]; /* REFUSED: why */
    uint64_t start_ns;                       /* warm-up started */
    uint64_t first_true_ns;                  /* PENDING: the observation it began holding at */
    uint64_t last_first_true_ns;             /* first_true of the last request */
    uint64_t recovery_from_ns;               /* RECOVERY: the close that started it */
    uint64_t cooldown_until_ns;
    int outstanding; /* its own request is queued, open, or not yet known closed */
    int after_own;   /* its own window closed: cooldown and rearm come next */
    int spent;       /* the current request's window already spent budget */
    int summary_due; /* a terminal state was reached and not yet taken */
    int had_reading; /* any valid (not missing, not stale) reading */
    double last_value;
    int last_partial; /* the last value came from a truncated window */
    double request_value;
    int request_partial;
    /* counters */
    uint64_t times_true; /* times the comparison started holding */
    uint64_t windows_fired;
    uint64_t busy_refusals;
    uint64_t over_budget_refusals; /* engine auto: no engine within the deep budget */
    uint64_t stale_readings;
    uint64_t missing_readings;
    uint64_t discarded_readings; /* during blackout */
} rules_evaluator_rule;

typedef struct rules_evaluator {
    size_t count;
    rules_evaluator_rule rules[RULES_EVALUATOR_MAX];
} rules_evaluator;

/* What rules_evaluator_step asks of its caller. */
#define RULES_STEP_NONE    0
#define RULES_STEP_REQUEST 1 /* ask the coordinator for a window for this rule now */

void rules_evaluator_init(rules_evaluator *evaluator);
/*
 * Adds a rule, warming up from now_ns. A NULL rule (or one rules_validate
 * refuses) is added as REFUSED with reason (or the validation's message).
 * text is the rule as written (may be NULL). *index receives its index.
 * FLARE_OK (even for a refused rule), FLARE_ERR_FULL past
 * RULES_EVALUATOR_MAX, FLARE_ERR_INVALID_ARGUMENT for a NULL evaluator.
 */
int rules_evaluator_add(rules_evaluator *evaluator, const rules_rule *rule, const char *text,
                        const char *reason, uint64_t now_ns, size_t *index);
/* Moves a rule to REFUSED with reason (an engine that cannot arm per probe). */
void rules_evaluator_refuse(rules_evaluator *evaluator, size_t index, const char *reason);
/*
 * One beat for one rule: applies the view (its last request's outcome,
 * blackout), then the reading (NULL: missing). Returns RULES_STEP_REQUEST
 * when the rule fires: it is then REQUESTED and the caller asks for a window
 * (a busy answer goes back as REFUSED_BUSY in the next view).
 */
int rules_evaluator_step(rules_evaluator *evaluator, size_t index, const rules_reading *reading,
                         uint64_t now_ns, const rules_coordinator_view *view);
const rules_evaluator_rule *rules_evaluator_get(const rules_evaluator *evaluator, size_t index);
/* Whether a rule reached a terminal state since the last call (clears it). */
int rules_evaluator_take_summary_due(rules_evaluator *evaluator, size_t index);
/* The rule's threshold or rearm in the reading's unit (rates per second,
 * percentages in percent, others in their base unit). */
double rules_evaluator_quantity_value(rules_quantity quantity);
/* Whether value, in the rule's metric unit (a single kernel's duration in
 * ns, say), holds against the rule's comparison and threshold. */
int rules_evaluator_holds(const rules_rule *rule, double value);
/*
 * The rule's outcome for its summary: status is one of "refused",
 * "exhausted", "fired", "stale source", "metric missing", "never true",
 * "held, not sustained", "never fired" (held, turned down busy or, for
 * engine auto, over the deep budget); reason says more in words.
 */
void rules_evaluator_summary(const rules_evaluator *evaluator, size_t index, char *status,
                             size_t status_size, char *reason, size_t reason_size);
/* "warming up", "armed", ... */
const char *rules_evaluator_state_name(rules_evaluator_state state);

#endif /* FLARE_RULES_EVALUATOR_H */
