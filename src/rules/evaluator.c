/*
 * evaluator.c: the per-rule state machine of deep-profiling rules
 * (evaluator.h). Pure: time, readings and the coordinator's answers come in
 * as arguments.
 */
#include "rules/evaluator.h"

#include <stdio.h>
#include <string.h>

#include "flare/flare.h"

void rules_evaluator_init(rules_evaluator *evaluator)
{
    if (evaluator != NULL)
        memset(evaluator, 0, sizeof(*evaluator));
}

/* A bounded copy that tolerates overlap (callers copy between fields of the
 * same evaluator, which snprintf may not be given). */
static void copy_text(char *destination, size_t size, const char *source)
{
    if (size == 0)
        return;
    size_t length = source != NULL ? strnlen(source, size - 1) : 0;
    if (length > 0)
        memmove(destination, source, length);
    destination[length] = '\0';
}

static void enter_terminal(rules_evaluator_rule *rule, rules_evaluator_state state)
{
    rule->state = state;
    rule->first_true_ns = 0;
    rule->outstanding = 0;
    rule->summary_due = 1;
}

int rules_evaluator_add(rules_evaluator *evaluator, const rules_rule *rule, const char *text,
                        const char *reason, uint64_t now_ns, size_t *index)
{
    if (evaluator == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    if (evaluator->count >= RULES_EVALUATOR_MAX)
        return FLARE_ERR_FULL;
    rules_evaluator_rule *entry = &evaluator->rules[evaluator->count];
    memset(entry, 0, sizeof(*entry));
    copy_text(entry->text, sizeof(entry->text), text);
    entry->start_ns = now_ns;
    entry->state = RULES_EVAL_WARMING_UP;
    char error[RULES_ERROR_MAX] = "";
    if (rule == NULL) {
        copy_text(entry->reason, sizeof(entry->reason),
                  reason != NULL ? reason : "the rule was refused");
        enter_terminal(entry, RULES_EVAL_REFUSED);
    } else if (rules_validate(rule, error, sizeof(error)) != FLARE_OK) {
        copy_text(entry->reason, sizeof(entry->reason), error);
        enter_terminal(entry, RULES_EVAL_REFUSED);
    } else {
        entry->valid = 1;
        entry->rule = *rule;
        if (rules_format_canonical(rule, entry->canonical, sizeof(entry->canonical)) != FLARE_OK)
            entry->canonical[0] = '\0';
        if (entry->text[0] == '\0')
            copy_text(entry->text, sizeof(entry->text), entry->canonical);
    }
    if (index != NULL)
        *index = evaluator->count;
    evaluator->count++;
    return FLARE_OK;
}

static rules_evaluator_rule *rule_at(rules_evaluator *evaluator, size_t index)
{
    if (evaluator == NULL || index >= evaluator->count)
        return NULL;
    return &evaluator->rules[index];
}

const rules_evaluator_rule *rules_evaluator_get(const rules_evaluator *evaluator, size_t index)
{
    if (evaluator == NULL || index >= evaluator->count)
        return NULL;
    return &evaluator->rules[index];
}

static int is_terminal(rules_evaluator_state state)
{
    return state == RULES_EVAL_EXHAUSTED || state == RULES_EVAL_REFUSED;
}

void rules_evaluator_refuse(rules_evaluator *evaluator, size_t index, const char *reason)
{
    rules_evaluator_rule *rule = rule_at(evaluator, index);
    if (rule == NULL || is_terminal(rule->state))
        return;
    copy_text(rule->reason, sizeof(rule->reason), reason != NULL ? reason : "refused");
    enter_terminal(rule, RULES_EVAL_REFUSED);
}

int rules_evaluator_take_summary_due(rules_evaluator *evaluator, size_t index)
{
    rules_evaluator_rule *rule = rule_at(evaluator, index);
    if (rule == NULL || !rule->summary_due)
        return 0;
    rule->summary_due = 0;
    return 1;
}

double rules_evaluator_quantity_value(rules_quantity quantity)
{
    switch (quantity.kind) {
    case RULES_UNIT_RATE:
        return (double)quantity.value / 1000.0;
    case RULES_UNIT_PERCENT:
        return (double)quantity.value / 100.0;
    default:
        return (double)quantity.value;
    }
}

static int compare(rules_comparison comparison, double value, double limit)
{
    switch (comparison) {
    case RULES_LESS:
        return value < limit;
    case RULES_LESS_EQUAL:
        return value <= limit;
    case RULES_GREATER:
        return value > limit;
    case RULES_GREATER_EQUAL:
        return value >= limit;
    default:
        return 0;
    }
}

int rules_evaluator_holds(const rules_rule *rule, double value)
{
    return compare(rule->comparison, value, rules_evaluator_quantity_value(rule->threshold));
}

/* Once the window it fired has opened, the rule has spent one of max_windows. */
static void spend(rules_evaluator_rule *rule)
{
    if (!rule->spent) {
        rule->spent = 1;
        rule->windows_fired++;
    }
}

/* Applies what became of this rule's own request. Returns 1 when the rule
 * reached a terminal state. */
static int apply_outcome(rules_evaluator_rule *rule, const rules_coordinator_view *view,
                         uint64_t now_ns)
{
    if (!rule->outstanding)
        return 0; /* an outcome that is not about a request of ours changes nothing */
    switch (view->outcome) {
    case RULES_OUTCOME_NONE:
    case RULES_OUTCOME_QUEUED:
        return 0;
    case RULES_OUTCOME_OPENED:
        spend(rule);
        rule->state = RULES_EVAL_BLACKOUT;
        return 0;
    case RULES_OUTCOME_CLOSED: {
        spend(rule);
        rule->outstanding = 0;
        uint64_t closed = view->closed_ns != 0 ? view->closed_ns : now_ns;
        if (rule->windows_fired >= rule->rule.max_windows) {
            enter_terminal(rule, RULES_EVAL_EXHAUSTED);
            return 1;
        }
        rule->after_own = 1;
        rule->recovery_from_ns = closed;
        rule->cooldown_until_ns = closed + rule->rule.cooldown_ns;
        rule->state = RULES_EVAL_RECOVERY;
        return 0;
    }
    case RULES_OUTCOME_OVER_BUDGET:
        /* Engine auto had no engine within the deep budget: as if a window
         * had closed at once, but none of max_windows is spent. The rule
         * asks again after its recovery, cooldown and rearm, never at every
         * beat while the launch rate stays high (each refusal is a record). */
        rule->outstanding = 0;
        rule->over_budget_refusals++;
        rule->after_own = 1;
        rule->recovery_from_ns = now_ns;
        rule->cooldown_until_ns = now_ns + rule->rule.cooldown_ns;
        rule->state = RULES_EVAL_RECOVERY;
        return 0;
    case RULES_OUTCOME_REFUSED_BUSY:
    case RULES_OUTCOME_CANCELLED:
        /* A turned-down or cancelled request costs nothing. */
        if (view->outcome == RULES_OUTCOME_REFUSED_BUSY)
            rule->busy_refusals++;
        rule->outstanding = 0;
        rule->first_true_ns = 0;
        rule->state = RULES_EVAL_ARMED;
        return 0;
    case RULES_OUTCOME_BUDGET_SPENT:
        /* Nothing more may be replayed: the rule is done, saying why. */
        snprintf(rule->reason, sizeof(rule->reason), "%s",
                 view->reason != NULL ? view->reason : "replay budget spent");
        enter_terminal(rule, RULES_EVAL_EXHAUSTED);
        return 1;
    case RULES_OUTCOME_REFUSED_ENGINE:
        snprintf(rule->reason, sizeof(rule->reason), "the deep engine could not be armed: %s",
                 view->reason != NULL && view->reason[0] != '\0' ? view->reason
                                                                 : "no reason given");
        enter_terminal(rule, RULES_EVAL_REFUSED);
        return 1;
    }
    return 0;
}

static void reset_pending(rules_evaluator_rule *rule)
{
    rule->first_true_ns = 0;
    if (rule->state == RULES_EVAL_PENDING)
        rule->state = RULES_EVAL_ARMED;
}

int rules_evaluator_step(rules_evaluator *evaluator, size_t index, const rules_reading *reading,
                         uint64_t now_ns, const rules_coordinator_view *view)
{
    rules_evaluator_rule *rule = rule_at(evaluator, index);
    if (rule == NULL || is_terminal(rule->state))
        return RULES_STEP_NONE;
    rules_coordinator_view nothing = {0};
    if (view == NULL)
        view = &nothing;
    if (apply_outcome(rule, view, now_ns))
        return RULES_STEP_NONE;

    /* Blackout: whoever opened the window, its readings are no evidence. */
    if (view->blackout || rule->state == RULES_EVAL_REQUESTED) {
        rule->discarded_readings++;
        rule->first_true_ns = 0;
        if (rule->state != RULES_EVAL_REQUESTED)
            rule->state = RULES_EVAL_BLACKOUT;
        return RULES_STEP_NONE;
    }
    if (rule->state == RULES_EVAL_BLACKOUT) {
        if (rule->outstanding) {
            /* Its own window is gone but the close is not known yet: wait for it. */
            rule->discarded_readings++;
            return RULES_STEP_NONE;
        }
        rule->state = RULES_EVAL_RECOVERY;
        rule->recovery_from_ns = now_ns;
    }
    if (rule->state == RULES_EVAL_RECOVERY) {
        if (now_ns - rule->recovery_from_ns < rule->rule.window_ns) {
            rule->discarded_readings++;
            return RULES_STEP_NONE;
        }
        rule->state = rule->after_own ? RULES_EVAL_COOLDOWN : RULES_EVAL_ARMED;
    }
    if (rule->state == RULES_EVAL_WARMING_UP) {
        if (now_ns - rule->start_ns < rule->rule.window_ns)
            return RULES_STEP_NONE;
        rule->state = RULES_EVAL_ARMED;
    }
    if (rule->state == RULES_EVAL_COOLDOWN && now_ns >= rule->cooldown_until_ns)
        rule->state = RULES_EVAL_WAITING_TO_REARM;

    if (reading == NULL || reading->missing) {
        rule->missing_readings++;
        reset_pending(rule);
        return RULES_STEP_NONE;
    }
    if (reading->stale) {
        rule->stale_readings++;
        reset_pending(rule);
        return RULES_STEP_NONE;
    }
    rule->had_reading = 1;
    rule->last_value = reading->value;
    rule->last_partial = reading->truncated;
    if (rule->state == RULES_EVAL_COOLDOWN)
        return RULES_STEP_NONE;
    if (rule->state == RULES_EVAL_WAITING_TO_REARM) {
        /* Rearmed once a reading fails the comparison against rearm. */
        double rearm = rules_evaluator_quantity_value(rule->rule.rearm);
        if (!compare(rule->rule.comparison, reading->value, rearm)) {
            rule->state = RULES_EVAL_ARMED;
            rule->after_own = 0;
        }
        return RULES_STEP_NONE;
    }
    double threshold = rules_evaluator_quantity_value(rule->rule.threshold);
    if (!compare(rule->rule.comparison, reading->value, threshold)) {
        reset_pending(rule);
        return RULES_STEP_NONE;
    }
    if (rule->state == RULES_EVAL_ARMED) {
        rule->times_true++;
        rule->first_true_ns = now_ns;
        rule->state = RULES_EVAL_PENDING;
    }
    if (now_ns - rule->first_true_ns < rule->rule.sustained_ns)
        return RULES_STEP_NONE;
    rule->last_first_true_ns = rule->first_true_ns;
    rule->request_value = reading->value;
    rule->request_partial = reading->truncated;
    rule->first_true_ns = 0;
    rule->outstanding = 1;
    rule->spent = 0;
    rule->state = RULES_EVAL_REQUESTED;
    return RULES_STEP_REQUEST;
}

void rules_evaluator_summary(const rules_evaluator *evaluator, size_t index, char *status,
                             size_t status_size, char *reason, size_t reason_size)
{
    const rules_evaluator_rule *rule = rules_evaluator_get(evaluator, index);
    if (rule == NULL) {
        copy_text(status, status_size, "unknown");
        copy_text(reason, reason_size, "");
        return;
    }
    unsigned long long fired = (unsigned long long)rule->windows_fired;
    if (rule->state == RULES_EVAL_REFUSED) {
        copy_text(status, status_size, "refused");
        copy_text(reason, reason_size, rule->reason);
    } else if (rule->state == RULES_EVAL_EXHAUSTED && rule->reason[0] != '\0') {
        copy_text(status, status_size, "exhausted");
        snprintf(reason, reason_size, "fired %llu time%s: %s", fired, fired == 1 ? "" : "s",
                 rule->reason);
    } else if (rule->state == RULES_EVAL_EXHAUSTED) {
        copy_text(status, status_size, "exhausted");
        snprintf(reason, reason_size, "fired %llu time%s: max_windows %u spent", fired,
                 fired == 1 ? "" : "s", rule->rule.max_windows);
    } else if (rule->windows_fired > 0) {
        copy_text(status, status_size, "fired");
        snprintf(reason, reason_size, "fired %llu time%s of max_windows %u", fired,
                 fired == 1 ? "" : "s", rule->rule.max_windows);
    } else if (!rule->had_reading && rule->stale_readings > 0) {
        copy_text(status, status_size, "stale source");
        snprintf(reason, reason_size, "no fresh reading: %llu stale",
                 (unsigned long long)rule->stale_readings);
    } else if (!rule->had_reading && rule->missing_readings > 0) {
        copy_text(status, status_size, "metric missing");
        snprintf(reason, reason_size, "no reading of the metric: %llu missing",
                 (unsigned long long)rule->missing_readings);
    } else if (rule->times_true == 0) {
        copy_text(status, status_size, "never true");
        if (rule->had_reading)
            snprintf(reason, reason_size, "never true; last value %g", rule->last_value);
        else
            copy_text(reason, reason_size, "never true; no reading yet");
    } else if (rule->busy_refusals > 0 || rule->over_budget_refusals > 0) {
        uint64_t turned_down = rule->busy_refusals + rule->over_budget_refusals;
        copy_text(status, status_size, "never fired");
        snprintf(reason, reason_size, "held %llu time%s; turned down %llu time%s (%s)",
                 (unsigned long long)rule->times_true, rule->times_true == 1 ? "" : "s",
                 (unsigned long long)turned_down, turned_down == 1 ? "" : "s",
                 rule->over_budget_refusals == 0 ? "busy"
                 : rule->busy_refusals == 0      ? "engine auto: over the deep budget"
                                                 : "busy, or engine auto over the deep budget");
    } else {
        copy_text(status, status_size, "held, not sustained");
        snprintf(reason, reason_size, "held %llu time%s, never for the `for` time",
                 (unsigned long long)rule->times_true, rule->times_true == 1 ? "" : "s");
    }
}

const char *rules_evaluator_state_name(rules_evaluator_state state)
{
    switch (state) {
    case RULES_EVAL_WARMING_UP:
        return "warming up";
    case RULES_EVAL_ARMED:
        return "armed";
    case RULES_EVAL_PENDING:
        return "pending";
    case RULES_EVAL_REQUESTED:
        return "requested";
    case RULES_EVAL_BLACKOUT:
        return "blackout";
    case RULES_EVAL_RECOVERY:
        return "recovery";
    case RULES_EVAL_COOLDOWN:
        return "cooldown";
    case RULES_EVAL_WAITING_TO_REARM:
        return "waiting to rearm";
    case RULES_EVAL_EXHAUSTED:
        return "exhausted";
    case RULES_EVAL_REFUSED:
        return "refused";
    }
    return "?";
}
