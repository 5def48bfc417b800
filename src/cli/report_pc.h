/*
 * report_pc.h: the PC samples of a session's windows in `flare report`
 * (report_pc.c): the text section and the JSON/CSV section's rows. Must
 * never change a value or hide that rows were left out.
 */
#ifndef FLARE_CLI_REPORT_PC_H
#define FLARE_CLI_REPORT_PC_H

#include <stddef.h>
#include <stdint.h>

#include "cli/report.h"
#include "cli/report_emit.h"
#include "store/store.h"

#define REPORT_PC_TOP     10 /* instructions kept per window, most samples first */
#define REPORT_PC_REASONS 24 /* stall reasons kept per window; the rest sum as other */

typedef struct report_pc_line {
    char function[96]; /* cut to fit */
    uint64_t pc_offset;
    char stall_reason[32];
    uint64_t samples;
    /* The instruction's source line where the row says it (file empty when
     * not): shown beside function+offset. */
    char file[96]; /* a longer path keeps its end */
    uint32_t source_line;
    /* Where no line is: the instruction's SASS text (pc_instructions, made
     * at the session's end), cut to fit; empty when none. */
    char sass[80];
} report_pc_line;

/* One window's PC samples on one device, as the report shows them. */
typedef struct report_pc_window {
    int64_t pid;
    uint64_t window_id;
    int32_t device;
    int have;
    uint64_t total;
    size_t rows;  /* pc_samples rows of the window */
    size_t lines; /* of them in top */
    report_pc_line top[REPORT_PC_TOP];
    size_t reasons; /* sorted, most samples first */
    char reason_names[REPORT_PC_REASONS][32];
    uint64_t reason_samples[REPORT_PC_REASONS];
    uint64_t other_reasons; /* samples of reasons past REPORT_PC_REASONS */
} report_pc_window;

/* Calls done for each window with PC samples, in (pid, window, device)
 * order. FLARE_OK, FLARE_ERR_NO_MEMORY or the store's status. */
int report_pc_windows(store *database, void (*done)(report_pc_window *window, void *user),
                      void *user);
/* part as a percentage of total (0 when total is 0). */
double report_pc_share(uint64_t part, uint64_t total);

/* The text section (titled by itself, only when a window ran PC sampling). */
int cli_report_pc(cli_report_run *run);
/* Every pc_samples row as a record of the open table. FLARE_OK or the store's status. */
int report_pc_emit(store *database, report_emit *emit);

#endif /* FLARE_CLI_REPORT_PC_H */
