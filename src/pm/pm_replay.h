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
 * windows' engine). A span of one configuration keeps it enabled and
 * configured after its pass, for the next span (the "spare"), and the
 * backend may set that up before the first span (pm_replay_prepare_early):
 * CUPTI's enable and configure cost 0.3-0.5 s a time on the H200. With
 * more configurations each pass enables and disables its own: CUPTI
 * decodes nothing after a configuration switch on an enabled sampler
 * (docs/PERFORMANCE.md "Switching PM sampling's configuration").
 * A pass is decoded once, at its stop, into one image: samples a lagging
 * decoder did not take were lost without a word (session 22). One span at
 * a time in the process; a second is declined with a reason.
 *
 * Must never: sum a flagged sample, report a value without its note, grow
 * past its bounds (one image of samples per pass; what the interval should
 * have given beyond it is counted as missing in the span's note), keep
 * more than one engine alive, or leave the PM hardware enabled after a
 * span except as the spare of one configuration.
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

/* The early set-up, on a thread of the backend's (CUDA: at the first
 * context, in a process whose spans are measured by PM sampling): plans the
 * selection's metrics and enables and configures the first configuration
 * on device, kept for the first span's first pass. Spans wait for it (60 s
 * at most). 0, or a status when there is nothing to do (another method, no
 * metrics, a span or set-up already there) or it failed (logged; the first
 * span sets up instead). Blocks for CUPTI's set-up (0.3-0.8 s on the H200). */
int pm_replay_prepare_early(int device);

/* Forgets the kept plan and destroys the kept engine (tests). */
void pm_replay_reset_for_tests(void);

#endif /* FLARE_PM_PM_REPLAY_H */
