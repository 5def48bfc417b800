/*
 * report_recorder.h: what `flare report` says about the flight recorder
 * (flare trace --keep / --max-size): one line in the session part, saying
 * what detail was kept and how many rows were evicted as asked, their
 * per-second totals kept. Must never call an eviction lost data.
 */
#ifndef FLARE_CLI_REPORT_RECORDER_H
#define FLARE_CLI_REPORT_RECORDER_H

#include "store/store.h"

/* Prints the line ("  detail     kept the last 10min in detail (flight
 * recorder): 1,234,567 kernels, ... evicted, their per-second totals kept
 * ...") when the session's flight recorder evicted anything; nothing
 * otherwise, or when the session cannot be read. */
void cli_report_recorder_note(store *database);

#endif /* FLARE_CLI_REPORT_RECORDER_H */
