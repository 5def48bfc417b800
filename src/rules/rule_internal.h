/*
 * rule_internal.h: the tables the rule parser, validator and formatter share:
 * units and their kinds, metrics, options with their ranges and defaults, and
 * small text helpers for messages. Internal to src/rules/.
 *
 * One table per concept, so that the parser, the checks, the canonical form
 * and docs/rules.md cannot disagree about a unit's spelling or an option's
 * range. Must never: hold state; write past a buffer.
 */
#ifndef FLARE_RULES_RULE_INTERNAL_H
#define FLARE_RULES_RULE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "rules/rule.h"

#define RULES_NS_PER_US     UINT64_C(1000)
#define RULES_NS_PER_MS     UINT64_C(1000000)
#define RULES_NS_PER_SECOND UINT64_C(1000000000)
#define RULES_NS_PER_MINUTE (60 * RULES_NS_PER_SECOND)
#define RULES_NS_PER_HOUR   (60 * RULES_NS_PER_MINUTE)

/* A unit as written after a number: "ms" is a duration of 10^6 base units. */
typedef struct rules_unit {
    const char *name;
    rules_unit_kind kind;
    uint64_t scale; /* base units in one of this unit; at most 10^15 */
} rules_unit;

/* The unit spelled exactly text[0..length), or NULL. */
const rules_unit *rules_unit_find(const char *text, size_t length);

/* What the messages and checks need to know about a unit kind. */
typedef struct rules_kind_info {
    const char *noun;       /* "a rate" */
    const char *example;    /* "500/s" */
    const char *hint_unit;  /* suggested for a bare number: "/s" */
    const char *unit_list;  /* "ns, us, ms, s or min"; NULL when only hint_unit exists */
    uint64_t maximum;       /* the largest threshold accepted, in base units */
    int maximum_is_natural; /* readings can never exceed maximum (100%) */
} rules_kind_info;

/* The info of a valid kind; NULL otherwise. */
const rules_kind_info *rules_kind(rules_unit_kind kind);

/* Options after the condition, in canonical order. */
typedef enum rules_option {
    RULES_OPTION_FOR,
    RULES_OPTION_OVER,
    RULES_OPTION_BUCKET,
    RULES_OPTION_REARM,
    RULES_OPTION_STALE_AFTER,
    RULES_OPTION_COOLDOWN,
    RULES_OPTION_MAX_WINDOWS,
    RULES_OPTION_DEEP_FOR,
    RULES_OPTION_DEEP_LAUNCHES,
    RULES_OPTION_ENGINE,
    RULES_OPTION_ACTION,
    RULES_OPTION_REPLAY_BUDGET,
    RULES_OPTION_COUNT
} rules_option;

typedef enum rules_option_type {
    RULES_OPTION_TYPE_DURATION,  /* a duration with its unit */
    RULES_OPTION_TYPE_COUNT,     /* a whole number, no unit */
    RULES_OPTION_TYPE_THRESHOLD, /* a quantity of the threshold's kind (rearm) */
    RULES_OPTION_TYPE_ACTION,    /* window, replay or range NAME (rules_action) */
    RULES_OPTION_TYPE_ENGINE,    /* pm or pc (rules_engine) */
} rules_option_type;

typedef struct rules_option_info {
    const char *key;
    rules_option_type type;
    uint64_t minimum; /* durations in ns; counts as themselves; unused for rearm, action */
    uint64_t maximum;
    uint64_t fallback;   /* the default; stale_after's is derived instead */
    const char *example; /* a typical value, for messages; rearm's is the threshold's */
    /* Given only with action replay or range (refused on a window rule, which
     * must hold the default), and written in the canonical form only then. */
    int replay_only;
} rules_option_info;

/* Whether the option's value is a number that rules_option_get and
 * rules_option_set reach (a duration or a count), with a range to check. */
int rules_option_is_number(const rules_option_info *info);

const rules_option_info *rules_option_at(rules_option option);
/* The option named exactly text[0..length); RULES_OPTION_COUNT if none. */
rules_option rules_option_find(const char *text, size_t length);
/* A duration or count option's value in rule (not rearm or action). */
uint64_t rules_option_get(const rules_rule *rule, rules_option option);
void rules_option_set(rules_rule *rule, rules_option option, uint64_t value);
/* "for, over, bucket, ..., action, replay_budget" */
extern const char rules_option_list[];

/* stale_after when the rule does not give one: over + for + bucket + 1s. */
#define RULES_STALE_MARGIN_NS RULES_NS_PER_SECOND

/* "kernel_launch_rate, ..., custom.<counter>" */
extern const char rules_metric_list[];
/* The GPU gauges' names after "gpuN.", indexed from RULES_METRIC_GPU_UTILIZATION. */
extern const char *const rules_gpu_metric_names[4];

/* Whether metric is a per-device NVML gauge. */
int rules_metric_is_gpu(rules_metric metric);

/*
 * Writes "what takes LOW to HIGH" for a duration or count option (e.g.
 * "for takes 0s to 1h") into buffer. Always NUL-terminates when size > 0.
 */
void rules_describe_option_range(rules_option option, char *buffer, size_t size);

/*
 * Range checks shared by the parser, which puts the column in front, and
 * rules_validate. Each returns FLARE_OK, or FLARE_ERR_INVALID_ARGUMENT with
 * "VALUE is out of range: ..." in error. role names the value in the message
 * ("rearm", "threshold") or is NULL for the bare value; metric_text is the
 * metric as written ("gpu0.utilization").
 */
int rules_check_option_range(rules_option option, uint64_t value, char *error, size_t size);
int rules_check_quantity_range(const char *metric_text, rules_quantity quantity, const char *role,
                               char *error, size_t size);
/* "METRIC takes LOW to HIGH" for a threshold of the kind. */
void rules_describe_quantity_range(const char *metric_text, rules_unit_kind kind, char *buffer,
                                   size_t size);

/* The metric as written in a rule: "gpu0.power", "custom.tokens". */
void rules_format_metric(const rules_rule *rule, char *buffer, size_t size);

/* A duration in its canonical unit ("1500ms", "2min", "0s"). */
void rules_format_duration(uint64_t ns, char *buffer, size_t size);

/*
 * A printable, bounded copy of text[0..length) for a message: bytes outside
 * printable ASCII become \xNN, and past 48 characters it ends with "...".
 */
void rules_quote(const char *text, size_t length, char *buffer, size_t size);

/* snprintf that appends to buffer at *used and never overruns; a message that
 * does not fit is truncated. */
void rules_append(char *buffer, size_t size, size_t *used, const char *format, ...)
    __attribute__((format(printf, 4, 5)));

/* Whether c is allowed in a counter name (A-Z a-z 0-9 . _ -, as flare.h). */
int rules_is_counter_character(unsigned char c);

#endif /* FLARE_RULES_RULE_INTERNAL_H */
