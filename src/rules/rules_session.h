/*
 * rules_session.h: deep-profiling rules within a session: FLARE_DEEP_WHEN is
 * parsed at session start, metric sources are fed by the collector, and on
 * each collector beat every rule is stepped (src/rules/evaluator.h) and, when
 * it fires, asks the session's window coordinator for a window with its
 * token and cause. Rule summaries are written to the `rules` table when a
 * rule reaches a terminal state and again at shutdown.
 *
 * Threads: begin runs in flare_init before the collector starts; the feeds
 * and the beat run on the collector thread; end runs in flare_shutdown after
 * the collector has stopped. Nothing here is locked or on a hot path.
 */
#ifndef FLARE_RULES_RULES_SESSION_H
#define FLARE_RULES_RULES_SESSION_H

#include <stdint.h>

#include "store/store.h"

/* Parses FLARE_DEEP_WHEN (a refused rule is kept as refused, with its reason,
 * and never stops the session) and sets up each rule's source. */
void rules_session_begin(uint64_t start_ns);
/* Undoes rules_session_begin when the session could not start: the rules
 * are dropped unwritten. */
void rules_session_cancel(void);
/* A completed kernel, stamped with its end (percentile sources), and its
 * name (what a rule with action replay replays). */
void rules_session_kernel(const char *name, uint64_t end_ns, uint64_t duration_ns);
/* A metric sample: gpu_utilization_pct, power_mw, sm_clock_mhz and
 * memory_used_bytes of device feed the gpuN.* rules; others are ignored. */
void rules_session_metric(int device, const char *name, uint64_t time_ns, int64_t value);
/* The collector's beat, inside its open batch: steps every rule, requests
 * windows, writes the summaries of rules that reached a terminal state. */
void rules_session_beat(store *database, int64_t pid, uint64_t now_ns);
/* At shutdown, inside the last batch: writes every rule's summary. */
void rules_session_end(store *database, int64_t pid, uint64_t end_ns);

#endif /* FLARE_RULES_RULES_SESSION_H */
