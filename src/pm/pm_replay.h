/*
 * pm_replay.h: range replay measured by PM sampling (`flare replay --range
 * NAME --method pm`, replay.h's REPLAY_METHOD_PM; docs/replay.md).
 *
 * A replay_metric_collector for spans: the metrics are grouped into the
 * fewest PM sampling configurations the device samples in one pass each
 * (pm_hardware_ops.plan), and each replay pass samples one configuration
 * at the chosen interval while the span's work re-runs, its kernels timed
 * by the backend (replay_device_ops.kernel_times_*). At the pass's end each
 * kernel's value of each metric is integrated from the samples that
 * overlap it (attrib/integrate.h): pro rata at its edges, flagged samples
 * never summed, with an error bound. gpu__time_duration.sum is the
 * kernel's own time in the passes (method "kernel-activity"). Every value
 * carries a note: its method, its status ("measured", "flagged",
 * "uncovered", "below-minimum" for kernels shorter than the minimum the
 * method serves, "untimed", "not-sampled" for a metric PM sampling does
 * not have, "failed" for a pass whose sampling could not start), its error
 * bound and the samples behind it.
 *
 * The PM hardware is the backend's replay instance (never the deep
 * windows' engine), enabled per pass and disabled after it: CUPTI decodes
 * nothing after a configuration switch on an enabled sampler (measured on
 * the H200, docs/PERFORMANCE.md "Switching PM sampling's configuration").
 * A pass is decoded once, at its stop, into one image: samples a lagging
 * decoder did not take were lost without a word (session 22). One span at
 * a time in the process; a second is declined with a reason.
 *
 * Must never: sum a flagged sample, report a value without its note, grow
 * past its bounds (one image of samples per pass; what the interval should
 * have given beyond it is counted as missing in the span's note), or leave
 * the PM hardware enabled after the collection's end.
 */
#ifndef FLARE_PM_PM_REPLAY_H
#define FLARE_PM_PM_REPLAY_H

#include "replay/replay.h"

/* The most PM configurations (passes) one span's metrics may need. */
#define PM_REPLAY_PASSES_MAX 16
/* The collector (always the same table; its calls check the backend's
 * operations and answer with reasons where they are missing). */
const replay_metric_collector *pm_replay_collector(void);

/* Whether metric adds up over time (counts, bytes, cycles) rather than
 * being a rate or share (".pct", "ratio", "per_second", "per_cycle"). */
int pm_replay_metric_additive(const char *metric);

/* Forgets the cached configuration plan (tests). */
void pm_replay_reset_for_tests(void);

#endif /* FLARE_PM_PM_REPLAY_H */
