/*
 * report_ranks.c: the ranks of a distributed job in `flare report`'s
 * header: which process was which rank, on which host (process_ranks,
 * schema 9). Printed only when a launcher gave a rank; a session of one
 * plain process reads as before.
 *
 * Must never fail the report: a session that cannot say prints nothing
 * here (its other sections say what is wrong).
 */
#include <stdio.h>

#include "cli/report_ranks.h"
#include "store/store_ranks.h"

/* Lines printed at most; the rest are counted. */
#define RANK_LINES_MAX 16

typedef struct rank_lines {
    size_t ranked;  /* rows with a rank */
    size_t printed; /* lines printed */
    int64_t world_size;
    char job_id[128];
} rank_lines;

static int count_ranked(const store_rank_row *row, void *user)
{
    rank_lines *lines = user;
    if (row->has_rank)
        lines->ranked++;
    if (row->has_world_size)
        lines->world_size = row->world_size;
    if (row->job_id != NULL && lines->job_id[0] == '\0')
        snprintf(lines->job_id, sizeof(lines->job_id), "%s", row->job_id);
    return 0;
}

static int print_rank(const store_rank_row *row, void *user)
{
    rank_lines *lines = user;
    if (lines->printed++ >= RANK_LINES_MAX)
        return 0;
    char rank[32] = "no rank", local[48] = "";
    if (row->has_rank)
        snprintf(rank, sizeof(rank), "rank %lld", (long long)row->rank);
    if (row->has_local_rank)
        snprintf(local, sizeof(local), " (local %lld)", (long long)row->local_rank);
    printf("             %s%s: pid %lld on %s\n", rank, local, (long long)row->pid, row->host);
    return 0;
}

void cli_report_ranks_note(store *database)
{
    rank_lines lines = {0};
    if (store_read_process_ranks(database, count_ranked, &lines) != 0 || lines.ranked == 0)
        return;
    printf("  ranks      %zu process(es) with a rank", lines.ranked);
    if (lines.world_size > 0)
        printf(", world size %lld", (long long)lines.world_size);
    if (lines.job_id[0] != '\0')
        printf(", job %s", lines.job_id);
    printf("\n");
    store_read_process_ranks(database, print_rank, &lines);
    if (lines.printed > RANK_LINES_MAX)
        printf("             ... and %zu more (flare report --format json: section ranks)\n",
               lines.printed - RANK_LINES_MAX);
}
