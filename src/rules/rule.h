/*
 * rule.h: deep-profiling rules: what a rule says, how its text is parsed and
 * checked as a whole, and the canonical text it is written back as.
 *
 * A rule watches one live metric and asks for a short deep-profiling window
 * (or, with `action`, a replay) when a comparison has held long enough, for
 * example
 *
 *     kernel_launch_rate < 500/s for 2s
 *     gpu0.utilization < 20% for 5s over 2s cooldown 1min
 *     kernel_duration_p99 > 5ms for 1s action replay replay_budget 30s
 *
 * docs/rules.md is the user's reference: grammar, metrics, options, defaults,
 * ranges, and the refusals with their messages. This module only turns text
 * into a rules_rule (or a precise reason why not); reading metrics and
 * opening windows belong to the evaluator, which is built on it.
 *
 * Every quantity is stored as an integer in its kind's base unit (a rate in
 * thousandths of an event per second, a duration in nanoseconds...), so a
 * rule compares exactly and its canonical text parses back to the same
 * struct: rules_parse(rules_format_canonical(r)) == r.
 *
 * Must never: round, clamp or guess a value (anything finer than a base unit,
 * larger than a field holds, or without its unit is refused, naming it);
 * read past its input or write past a caller's buffer; allocate, log, or
 * keep state between calls (the CLI, the library and the fuzzer call it from
 * any thread).
 */
#ifndef FLARE_RULES_RULE_H
#define FLARE_RULES_RULE_H

#include <stddef.h>
#include <stdint.h>

#include "flare/flare.h"

/* Bytes in one rule's text; a longer rule is refused. */
#define RULES_TEXT_MAX 1024
/* Rules in one ';'-separated list (FLARE_DEEP_WHEN). */
#define RULES_LIST_MAX 32
/* An error message always fits in this many bytes (it is truncated, never
 * overrun, in a smaller buffer). */
#define RULES_ERROR_MAX 512
/* A canonical form always fits in this many bytes. */
#define RULES_FORMAT_MAX 512
/* GPU metrics name devices gpu0 .. gpu63 (as many as the simulated device
 * allows); whether the device exists is known only at run time. */
#define RULES_DEVICE_COUNT 64
/* Readings are made of buckets; a window of more than this many buckets is
 * refused, which bounds the evaluator's memory per rule. */
#define RULES_BUCKETS_MAX 10000

/* What a rule watches. GPU gauges come from NVML, per device. */
typedef enum rules_metric {
    RULES_METRIC_KERNEL_LAUNCH_RATE,  /* host launches per second */
    RULES_METRIC_KERNEL_DURATION_P50, /* completed kernels' durations */
    RULES_METRIC_KERNEL_DURATION_P90,
    RULES_METRIC_KERNEL_DURATION_P99,
    RULES_METRIC_GPU_UTILIZATION, /* percent */
    RULES_METRIC_GPU_POWER,       /* milliwatts */
    RULES_METRIC_GPU_SM_CLOCK,    /* MHz */
    RULES_METRIC_GPU_MEMORY_USED, /* bytes */
    RULES_METRIC_CUSTOM_RATE,     /* an application counter's increase per second */
    RULES_METRIC_COUNT
} rules_metric;

/* The kind of a quantity, and the integer base unit it is stored in. */
typedef enum rules_unit_kind {
    RULES_UNIT_RATE,     /* thousandths of an event per second (0.001/s) */
    RULES_UNIT_DURATION, /* nanoseconds */
    RULES_UNIT_PERCENT,  /* hundredths of a percent (0.01%) */
    RULES_UNIT_POWER,    /* milliwatts */
    RULES_UNIT_CLOCK,    /* megahertz */
    RULES_UNIT_BYTES,    /* bytes */
    RULES_UNIT_KIND_COUNT
} rules_unit_kind;

typedef enum rules_comparison {
    RULES_LESS,          /* <  */
    RULES_LESS_EQUAL,    /* <= */
    RULES_GREATER,       /* >  */
    RULES_GREATER_EQUAL, /* >= */
    RULES_COMPARISON_COUNT
} rules_comparison;

/* What a rule does when it fires (`action`). The evaluator decides when;
 * the rule's owner does it, and declines a replay once the process's
 * replay_budget is spent. */
typedef enum rules_action {
    RULES_ACTION_WINDOW = 0,
    RULES_ACTION_REPLAY = 1,
    RULES_ACTION_RANGE = 2
} rules_action;
/* The deep engine a window rule's window asks for (`engine`): PM sampling
 * (the default: how busy the GPU was), PC sampling (where in its kernels
 * warps stalled), SASS metrics (how often each instruction ran), or auto
 * (the deepest whose estimated cost is within the deep budget,
 * --deep-budget). A window whose engine the device
 * cannot run falls back to PM sampling and says why; an auto window that no
 * engine fits is refused, saying why (docs/windows.md). */
typedef enum rules_engine {
    RULES_ENGINE_PM = 0,
    RULES_ENGINE_PC = 1,
    RULES_ENGINE_AUTO = 2,
    RULES_ENGINE_SASS =
        3 /* SASS metrics: per-instruction counts, kernels run several times slower */
} rules_engine;
/* Bytes in a range name with its terminating NUL: names are 1..127 bytes. */
#define RULES_RANGE_NAME_MAX 128

typedef struct rules_quantity {
    rules_unit_kind kind;
    uint64_t value; /* in the kind's base unit */
} rules_quantity;

/*
 * A parsed rule. Every field has a value: options left out of the text hold
 * their defaults (docs/rules.md), so two rules are equal exactly when they
 * would behave the same. Build one with rules_parse; compare with
 * rules_rule_equal (not memcmp: padding).
 */
typedef struct rules_rule {
    rules_metric metric;
    uint32_t device; /* GPU metrics: the device index; 0 otherwise */
    /* RULES_METRIC_CUSTOM_RATE: the counter's name (1..FLARE_COUNTER_NAME_MAX
     * characters of A-Z a-z 0-9 . _ -); all zero otherwise. */
    char counter[FLARE_COUNTER_NAME_MAX + 1];
    rules_comparison comparison;
    rules_quantity threshold; /* the metric's unit kind */
    /* After a window, the rule fires again only once a reading has gone
     * back past this value (the negation of the comparison, against rearm
     * instead of threshold). Same kind as threshold; equal to it by default. */
    rules_quantity rearm;
    uint64_t sustained_ns;   /* `for`: how long the comparison must keep holding */
    uint64_t window_ns;      /* `over`: each reading covers this much time */
    uint64_t bucket_ns;      /* `bucket`: readings are made of buckets this wide */
    uint64_t stale_after_ns; /* `stale_after`: a reading older than this is no evidence */
    uint64_t cooldown_ns;    /* `cooldown`: quiet time after a window closes */
    uint32_t max_windows;    /* `max_windows`: windows this rule may open per session */
    uint64_t deep_ns;        /* `deep_for`: a window lasts at most this long */
    uint32_t deep_launches;  /* `deep_launches`: ... or this many kernel launches */
    /* `action`: a deep window (the default), a replay of the next launch of
     * the kernel that made the reading, with the full counter set, or a
     * range replay of the next occurrence of the scope or NVTX range named
     * in range_name. max_windows and cooldown bound replays as they bound
     * windows. */
    rules_action action;
    /* RULES_ACTION_RANGE: the scope or NVTX range's name, 1..127 bytes of one
     * word (no blanks, ';' or < > = !, and not an option's key); all zero
     * otherwise. */
    char range_name[RULES_RANGE_NAME_MAX];
    /* `replay_budget`: the process's total time in triggered replays, all
     * rules together; a replay that would start once it is spent is declined
     * by the rule's owner. Only given with action replay or range; 5s (the
     * default) otherwise. */
    uint64_t replay_budget_ns;
    /* `engine`: the window's deep engine; only with action window (a
     * replay's counters come from the range profiler). */
    rules_engine engine;
} rules_rule;

/*
 * Parses one rule. On success returns FLARE_OK and fills *out. On refusal
 * returns FLARE_ERR_INVALID_ARGUMENT, leaves *out zeroed, and writes a
 * message to error (if error_size > 0; RULES_ERROR_MAX always suffices)
 * that names the offending token and its 1-based byte column, e.g.
 * "at column 22: '500' needs a unit: write 500/s", or the whole-rule reason
 * (rules_validate). A NULL text or out is FLARE_ERR_INVALID_ARGUMENT too.
 */
int rules_parse(const char *text, rules_rule *out, char *error, size_t error_size);

/*
 * Checks a rule as a whole: each field in its range, the threshold and rearm
 * of the metric's kind, the rearm on the reachable side, a comparison that
 * can both hold and fail, windows made of whole buckets, and a stale_after
 * longer than over + for + bucket. FLARE_OK, or FLARE_ERR_INVALID_ARGUMENT
 * with the reason in error. rules_parse calls it; the evaluator calls it on
 * rules built in code.
 */
int rules_validate(const rules_rule *rule, char *error, size_t error_size);

/*
 * Writes the canonical text of a valid rule: every option spelled out, in a
 * fixed order, each quantity in the largest unit that holds it exactly;
 * action and replay_budget come last, and only when the action is not
 * window (so a window rule's text is the one it had before actions).
 * Parsing it gives back an equal rule. Returns FLARE_OK, or
 * FLARE_ERR_INVALID_ARGUMENT when size is too small (RULES_FORMAT_MAX
 * always suffices) or the rule holds an unknown metric, comparison, kind or
 * action; buffer then holds an empty string (when size > 0).
 */
int rules_format_canonical(const rules_rule *rule, char *buffer, size_t size);

/* Whether two rules are the same, field by field. */
int rules_rule_equal(const rules_rule *a, const rules_rule *b);

/*
 * One quantity as text in its canonical unit ("500/s", "1500ms", "12.5%",
 * "300W", "1200MHz", "60GiB"). Returns FLARE_OK, or
 * FLARE_ERR_INVALID_ARGUMENT when it does not fit (64 bytes always do).
 */
int rules_format_quantity(rules_quantity quantity, char *buffer, size_t size);

/* A metric's name without device or counter ("kernel_launch_rate",
 * "gpu<N>.utilization", "custom.<counter>"); "?" when unknown. */
const char *rules_metric_name(rules_metric metric);
/* The unit kind a metric's threshold is written in. */
rules_unit_kind rules_metric_unit(rules_metric metric);
/* "<", "<=", ">", ">="; "?" when unknown. */
const char *rules_comparison_text(rules_comparison comparison);
/* "window", "replay", "range"; "?" when unknown. */
const char *rules_action_name(rules_action action);
/* "pm", "pc", "auto", "sass"; "?" when unknown. */
const char *rules_engine_name(rules_engine engine);

/* One rule of a list: parsed, or refused with its reason. */
typedef struct rules_list_entry {
    int status;      /* FLARE_OK: rule holds it; else why in error */
    size_t offset;   /* the rule's text: bytes [offset, offset + length) */
    size_t length;   /* of the list, leading and trailing blanks left out */
    rules_rule rule; /* zeroed when refused */
    char error[RULES_ERROR_MAX];
} rules_list_entry;

/*
 * Parses a list of rules separated by ';' (the FLARE_DEEP_WHEN format). A
 * refused rule never stops the others: each entry is parsed or refused on
 * its own, and columns in an entry's error count from the start of that
 * entry's text. An empty item (";;", a leading or trailing ';') is a refused
 * entry whose error gives the list column of its ';'. A text that is empty
 * or only blanks holds no rules.
 *
 * *count receives the number of items in the text; the first
 * min(*count, capacity) are written to entries. Returns FLARE_OK (even when
 * entries are refused: look at each status), FLARE_ERR_FULL when the text
 * holds more than capacity items (those past it are not parsed), or
 * FLARE_ERR_INVALID_ARGUMENT for a NULL text or count, or NULL entries with
 * a non-zero capacity.
 */
int rules_parse_list(const char *text, rules_list_entry *entries, size_t capacity, size_t *count);

/* The actions the rules of text (the FLARE_DEEP_WHEN list) that parse
 * ask for, as bits 1 << rules_action (RULES_ACTIONS_WINDOW...): what a
 * backend sets up before any rule fires. 0 for NULL or bad text. Pure.
 * It reads the items rules_parse_list would with RULES_LIST_MAX entries (the
 * first RULES_LIST_MAX), one at a time: no list of entries on the stack. */
#define RULES_ACTIONS_WINDOW (1u << RULES_ACTION_WINDOW)
#define RULES_ACTIONS_REPLAY (1u << RULES_ACTION_REPLAY)
#define RULES_ACTIONS_RANGE  (1u << RULES_ACTION_RANGE)
unsigned rules_list_actions(const char *text);
/* The deep engines the window rules of text ask for, as bits
 * 1 << rules_engine (RULES_ENGINES_PC...): PC sampling must be enabled on a
 * context before its modules load, so a backend asks before any rule fires.
 * 0 for NULL or bad text. Pure; reads the items as rules_list_actions does. */
#define RULES_ENGINES_PM   (1u << RULES_ENGINE_PM)
#define RULES_ENGINES_PC   (1u << RULES_ENGINE_PC)
#define RULES_ENGINES_AUTO (1u << RULES_ENGINE_AUTO)
#define RULES_ENGINES_SASS (1u << RULES_ENGINE_SASS)
unsigned rules_list_engines(const char *text);
/* Whether any of them replays (action replay or range). */
int rules_list_wants_replay(const char *text);

#endif /* FLARE_RULES_RULE_H */
