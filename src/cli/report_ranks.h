/*
 * report_ranks.h: what `flare report` says about the ranks of a
 * distributed job (report_ranks.c).
 */
#ifndef FLARE_CLI_REPORT_RANKS_H
#define FLARE_CLI_REPORT_RANKS_H

#include "store/store.h"

/* Prints the header's "ranks" lines (which process was which rank, on
 * which host) when a process of the session had a rank; nothing else. */
void cli_report_ranks_note(store *database);

#endif /* FLARE_CLI_REPORT_RANKS_H */
