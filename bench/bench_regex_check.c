/*
 * bench_regex_check.c: how long glibc's regcomp takes on the kernel regular
 * expressions that replay_regex_check (replay.h) lets through. The check
 * exists because regcomp took gigabytes or a minute on some short
 * expressions; this program generates expressions from a grammar of groups,
 * alternations, anchors and stacked repetitions (the shapes that hurt),
 * compiles each one the check accepts, and prints how many there were and
 * the slowest compile with its expression. A result in the seconds means
 * the check misses a shape.
 *
 * Usage: bench_regex_check [COUNT [SEED]]   (default 300000, 1)
 * It never runs flare; it only calls the check and regcomp.
 */
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "replay/replay.h"

#define PATTERN_MAX 200

typedef struct generator {
    uint64_t state;
    char out[4096];
    size_t used;
} generator;

static uint32_t next_random(generator *g)
{
    g->state = g->state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g->state >> 33);
}

static unsigned pick(generator *g, unsigned count)
{
    return next_random(g) % count;
}

static void put(generator *g, const char *text)
{
    size_t length = strlen(text);
    if (g->used + length < sizeof g->out) {
        memcpy(g->out + g->used, text, length + 1);
        g->used += length;
    }
}

static void expression(generator *g, int depth);

/* A group of one or two branches, or a single character, class or anchor. */
static void atom(generator *g, int depth)
{
    static const char *const simple[] = {"a", "b", ".", "^", "$", "[ab]", "\\<"};
    if (depth < 8 && pick(g, 100) < 35) {
        unsigned branches = pick(g, 4) == 0 ? 2 : 1;
        put(g, "(");
        for (unsigned i = 0; i < branches; i++) {
            if (i > 0) {
                put(g, "|");
            }
            expression(g, depth + 1);
        }
        put(g, ")");
        return;
    }
    put(g, simple[pick(g, sizeof simple / sizeof simple[0])]);
}

/* Up to four atoms, each with up to three stacked repetitions. */
static void expression(generator *g, int depth)
{
    static const char *const repetitions[] = {"+",     "+",     "*",    "?",   "?",    "*",   "{2}",
                                              "{1,3}", "{0,2}", "{2,}", "{3}", "{1,}", "{,2}"};
    static const unsigned stacked[] = {0, 0, 1, 1, 2, 3};
    unsigned atoms = pick(g, depth < 3 ? 5 : 3);
    for (unsigned i = 0; i < atoms; i++) {
        atom(g, depth);
        unsigned count = stacked[pick(g, sizeof stacked / sizeof stacked[0])];
        for (unsigned r = 0; r < count; r++) {
            put(g, repetitions[pick(g, sizeof repetitions / sizeof repetitions[0])]);
        }
    }
}

int main(int argc, char **argv)
{
    long count = argc > 1 ? atol(argv[1]) : 300000;
    generator g = {.state = argc > 2 ? strtoull(argv[2], NULL, 10) : 1};
    long generated = 0, accepted = 0;
    double worst = 0.0, total = 0.0;
    char worst_pattern[PATTERN_MAX + 1] = "";
    while (generated < count) {
        g.used = 0;
        g.out[0] = '\0';
        /* Anchored at the top, a third of the time. */
        int anchored = pick(&g, 3) == 0;
        if (anchored) {
            put(&g, "^");
        }
        expression(&g, 0);
        if (anchored) {
            put(&g, "$");
        }
        if (g.used == 0 || g.used > PATTERN_MAX) {
            continue;
        }
        generated++;
        char error[512];
        if (replay_regex_check(g.out, error, sizeof error) != 0) {
            continue;
        }
        accepted++;
        regex_t compiled;
        uint64_t start = bench_now_ns();
        int failed = regcomp(&compiled, g.out, REG_EXTENDED | REG_NOSUB);
        double took = (double)(bench_now_ns() - start) * 1e-9;
        if (!failed) {
            regfree(&compiled);
        }
        total += took;
        if (took > worst) {
            worst = took;
            memcpy(worst_pattern, g.out, g.used + 1);
        }
    }
    printf("bench_regex_check: %ld expressions, %ld accepted by the check\n", generated, accepted);
    printf("  regcomp on the accepted: mean %.1f us, slowest %.2f ms: %s\n",
           accepted > 0 ? total / (double)accepted * 1e6 : 0.0, worst * 1e3, worst_pattern);
    return 0;
}
