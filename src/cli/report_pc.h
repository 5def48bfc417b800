/*
 * report_pc.h: the PC samples of a session's windows in `flare report`
 * (report_pc.c): the text section and the JSON/CSV section's rows. Must
 * never change a value or hide that rows were left out.
 */
#ifndef FLARE_CLI_REPORT_PC_H
#define FLARE_CLI_REPORT_PC_H

#include "cli/report.h"
#include "cli/report_emit.h"
#include "store/store.h"

/* The text section (titled by itself, only when a window ran PC sampling). */
int cli_report_pc(cli_report_run *run);
/* Every pc_samples row as a record of the open table. FLARE_OK or the store's status. */
int report_pc_emit(store *database, report_emit *emit);

#endif /* FLARE_CLI_REPORT_PC_H */
