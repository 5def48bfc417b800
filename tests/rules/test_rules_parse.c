/*
 * test_rules_parse.c: the rule parser, validator and canonical form
 * (src/rules/rule.h), table by table: accepted rules with their canonical
 * text, refused rules with their exact messages, the round-trip property
 * parse(format(parse(x))) == parse(x), actions (window, replay, range NAME)
 * and replay_budget, whole-rule validation of rules built in code, and
 * small or missing buffers. ';'-separated lists: test_rules_list.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "rules/rule.h"

/* 127 and 128 bytes: the longest range name, and one byte too many. */
#define RANGE_NAME_127                                                                             \
    "rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr"   \
    "rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr"
#define RANGE_NAME_128 RANGE_NAME_127 "r"

typedef struct accepted_row {
    const char *text;
    const char *canonical;
} accepted_row;

typedef struct refused_row {
    const char *text;
    const char *message;
} refused_row;

/* Every metric, unit, comparison and option, edges of each range included,
 * with the canonical text `flare rules check` prints for it. */
static const accepted_row accepted[] = {
    {"kernel_launch_rate < 500/s for 2s",
     "kernel_launch_rate < 500/s for 2s over 1s bucket 100ms rearm 500/s stale_after 4100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate <= 500/s",
     "kernel_launch_rate <= 500/s for 0s over 1s bucket 100ms rearm 500/s stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate > 100000/s for 1s",
     "kernel_launch_rate > 100000/s for 1s over 1s bucket 100ms rearm 100000/s stale_after 3100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate >= 1/s",
     "kernel_launch_rate >= 1/s for 0s over 1s bucket 100ms rearm 1/s stale_after 2100ms cooldown "
     "10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate<500/s for 2s",
     "kernel_launch_rate < 500/s for 2s over 1s bucket 100ms rearm 500/s stale_after 4100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate < 0.5/s",
     "kernel_launch_rate < 0.5/s for 0s over 1s bucket 100ms rearm 0.5/s stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate < 0.001/s",
     "kernel_launch_rate < 0.001/s for 0s over 1s bucket 100ms rearm 0.001/s stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate < 12.340/s",
     "kernel_launch_rate < 12.34/s for 0s over 1s bucket 100ms rearm 12.34/s stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate > 1000000000000/s",
     "kernel_launch_rate > 1000000000000/s for 0s over 1s bucket 100ms rearm 1000000000000/s "
     "stale_after 2100ms cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate < 0500/s",
     "kernel_launch_rate < 500/s for 0s over 1s bucket 100ms rearm 500/s stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate > 0/s",
     "kernel_launch_rate > 0/s for 0s over 1s bucket 100ms rearm 0/s stale_after 2100ms cooldown "
     "10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate <= 0/s",
     "kernel_launch_rate <= 0/s for 0s over 1s bucket 100ms rearm 0/s stale_after 2100ms cooldown "
     "10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_duration_p50 > 1.5us",
     "kernel_duration_p50 > 1500ns for 0s over 1s bucket 100ms rearm 1500ns stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_duration_p90 > 250us for 500ms",
     "kernel_duration_p90 > 250us for 500ms over 1s bucket 100ms rearm 250us stale_after 2600ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_duration_p99 > 5ms for 1s over 10s",
     "kernel_duration_p99 > 5ms for 1s over 10s bucket 100ms rearm 5ms stale_after 12100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_duration_p99 >= 60min",
     "kernel_duration_p99 >= 1h for 0s over 1s bucket 100ms rearm 1h stale_after 2100ms cooldown "
     "10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_duration_p99 < 1ns",
     "kernel_duration_p99 < 1ns for 0s over 1s bucket 100ms rearm 1ns stale_after 2100ms cooldown "
     "10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_duration_p99 > 0.5s",
     "kernel_duration_p99 > 500ms for 0s over 1s bucket 100ms rearm 500ms stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_duration_p99 > 1000us",
     "kernel_duration_p99 > 1ms for 0s over 1s bucket 100ms rearm 1ms stale_after 2100ms cooldown "
     "10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_duration_p99 > 1.5min",
     "kernel_duration_p99 > 90s for 0s over 1s bucket 100ms rearm 90s stale_after 2100ms cooldown "
     "10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_duration_p99 > 120s",
     "kernel_duration_p99 > 2min for 0s over 1s bucket 100ms rearm 2min stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_duration_p50 > 2.000s",
     "kernel_duration_p50 > 2s for 0s over 1s bucket 100ms rearm 2s stale_after 2100ms cooldown "
     "10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"gpu0.utilization < 20% for 5s",
     "gpu0.utilization < 20% for 5s over 1s bucket 100ms rearm 20% stale_after 7100ms cooldown 10s "
     "max_windows 3 deep_for 2s deep_launches 100000"},
    {"gpu0.utilization < 100%",
     "gpu0.utilization < 100% for 0s over 1s bucket 100ms rearm 100% stale_after 2100ms cooldown "
     "10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"gpu0.utilization > 99.99%",
     "gpu0.utilization > 99.99% for 0s over 1s bucket 100ms rearm 99.99% stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"gpu0.utilization < 12.5% over 2s",
     "gpu0.utilization < 12.5% for 0s over 2s bucket 100ms rearm 12.5% stale_after 3100ms cooldown "
     "10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"gpu3.utilization >= 100%",
     "gpu3.utilization >= 100% for 0s over 1s bucket 100ms rearm 100% stale_after 2100ms cooldown "
     "10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"gpu0.utilization <= 0%",
     "gpu0.utilization <= 0% for 0s over 1s bucket 100ms rearm 0% stale_after 2100ms cooldown 10s "
     "max_windows 3 deep_for 2s deep_launches 100000"},
    {"gpu1.power > 300W", "gpu1.power > 300W for 0s over 1s bucket 100ms rearm 300W stale_after "
                          "2100ms cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"gpu1.power > 0.5W", "gpu1.power > 500mW for 0s over 1s bucket 100ms rearm 500mW stale_after "
                          "2100ms cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"gpu1.power < 1500mW",
     "gpu1.power < 1500mW for 0s over 1s bucket 100ms rearm 1500mW stale_after 2100ms cooldown 10s "
     "max_windows 3 deep_for 2s deep_launches 100000"},
    {"gpu1.power > 10000W",
     "gpu1.power > 10000W for 0s over 1s bucket 100ms rearm 10000W stale_after 2100ms cooldown 10s "
     "max_windows 3 deep_for 2s deep_launches 100000"},
    {"gpu63.power > 700W", "gpu63.power > 700W for 0s over 1s bucket 100ms rearm 700W stale_after "
                           "2100ms cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"gpu0.sm_clock < 1200MHz for 3s",
     "gpu0.sm_clock < 1200MHz for 3s over 1s bucket 100ms rearm 1200MHz stale_after 5100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"gpu0.sm_clock < 1.41GHz",
     "gpu0.sm_clock < 1410MHz for 0s over 1s bucket 100ms rearm 1410MHz stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"gpu0.sm_clock > 10000MHz",
     "gpu0.sm_clock > 10000MHz for 0s over 1s bucket 100ms rearm 10000MHz stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"gpu0.memory_used > 60GiB",
     "gpu0.memory_used > 60GiB for 0s over 1s bucket 100ms rearm 60GiB stale_after 2100ms cooldown "
     "10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"gpu0.memory_used > 1.5GiB",
     "gpu0.memory_used > 1536MiB for 0s over 1s bucket 100ms rearm 1536MiB stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"gpu0.memory_used > 0.5KiB",
     "gpu0.memory_used > 512B for 0s over 1s bucket 100ms rearm 512B stale_after 2100ms cooldown "
     "10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"gpu0.memory_used > 64TiB",
     "gpu0.memory_used > 64TiB for 0s over 1s bucket 100ms rearm 64TiB stale_after 2100ms cooldown "
     "10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"gpu0.memory_used > 1000B",
     "gpu0.memory_used > 1000B for 0s over 1s bucket 100ms rearm 1000B stale_after 2100ms cooldown "
     "10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"gpu0.memory_used < 1024MiB",
     "gpu0.memory_used < 1GiB for 0s over 1s bucket 100ms rearm 1GiB stale_after 2100ms cooldown "
     "10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"custom.tokens < 50/s for 5s over 2s",
     "custom.tokens < 50/s for 5s over 2s bucket 100ms rearm 50/s stale_after 8100ms cooldown 10s "
     "max_windows 3 deep_for 2s deep_launches 100000"},
    {"custom.requests.served-total_2 > 1000/s",
     "custom.requests.served-total_2 > 1000/s for 0s over 1s bucket 100ms rearm 1000/s stale_after "
     "2100ms cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"custom.A < 1/s", "custom.A < 1/s for 0s over 1s bucket 100ms rearm 1/s stale_after 2100ms "
                       "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"custom.a.b.c < 0.25/s",
     "custom.a.b.c < 0.25/s for 0s over 1s bucket 100ms rearm 0.25/s stale_after 2100ms cooldown "
     "10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate < 500/s rearm 800/s",
     "kernel_launch_rate < 500/s for 0s over 1s bucket 100ms rearm 800/s stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate <= 500/s rearm 500/s",
     "kernel_launch_rate <= 500/s for 0s over 1s bucket 100ms rearm 500/s stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate > 500/s rearm 100/s",
     "kernel_launch_rate > 500/s for 0s over 1s bucket 100ms rearm 100/s stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate >= 500/s rearm 0.001/s",
     "kernel_launch_rate >= 500/s for 0s over 1s bucket 100ms rearm 0.001/s stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"gpu0.utilization < 20% rearm 100%",
     "gpu0.utilization < 20% for 0s over 1s bucket 100ms rearm 100% stale_after 2100ms cooldown "
     "10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"gpu0.utilization > 90% rearm 0%",
     "gpu0.utilization > 90% for 0s over 1s bucket 100ms rearm 0% stale_after 2100ms cooldown 10s "
     "max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate < 500/s max_windows 1",
     "kernel_launch_rate < 500/s for 0s over 1s bucket 100ms rearm 500/s stale_after 2100ms "
     "cooldown 10s max_windows 1 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate < 500/s max_windows 64",
     "kernel_launch_rate < 500/s for 0s over 1s bucket 100ms rearm 500/s stale_after 2100ms "
     "cooldown 10s max_windows 64 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate < 500/s deep_launches 1",
     "kernel_launch_rate < 500/s for 0s over 1s bucket 100ms rearm 500/s stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 1"},
    {"kernel_launch_rate < 500/s deep_launches 1000000000",
     "kernel_launch_rate < 500/s for 0s over 1s bucket 100ms rearm 500/s stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 1000000000"},
    {"kernel_launch_rate < 500/s deep_for 10ms",
     "kernel_launch_rate < 500/s for 0s over 1s bucket 100ms rearm 500/s stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 10ms deep_launches 100000"},
    {"kernel_launch_rate < 500/s deep_for 10min",
     "kernel_launch_rate < 500/s for 0s over 1s bucket 100ms rearm 500/s stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 10min deep_launches 100000"},
    {"kernel_launch_rate < 500/s cooldown 0s",
     "kernel_launch_rate < 500/s for 0s over 1s bucket 100ms rearm 500/s stale_after 2100ms "
     "cooldown 0s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate < 500/s cooldown 60min",
     "kernel_launch_rate < 500/s for 0s over 1s bucket 100ms rearm 500/s stale_after 2100ms "
     "cooldown 1h max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate < 500/s for 60min",
     "kernel_launch_rate < 500/s for 1h over 1s bucket 100ms rearm 500/s stale_after 3602100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate < 500/s over 10min",
     "kernel_launch_rate < 500/s for 0s over 10min bucket 100ms rearm 500/s stale_after 601100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate < 500/s over 10min bucket 10s",
     "kernel_launch_rate < 500/s for 0s over 10min bucket 10s rearm 500/s stale_after 611s "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate < 500/s over 100ms bucket 10ms",
     "kernel_launch_rate < 500/s for 0s over 100ms bucket 10ms rearm 500/s stale_after 1110ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate < 500/s over 10ms bucket 10ms",
     "kernel_launch_rate < 500/s for 0s over 10ms bucket 10ms rearm 500/s stale_after 1020ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate < 500/s stale_after 3h",
     "kernel_launch_rate < 500/s for 0s over 1s bucket 100ms rearm 500/s stale_after 3h cooldown "
     "10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate < 500/s stale_after 180min",
     "kernel_launch_rate < 500/s for 0s over 1s bucket 100ms rearm 500/s stale_after 3h cooldown "
     "10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate < 500/s for 2s stale_after 3101ms",
     "kernel_launch_rate < 500/s for 2s over 1s bucket 100ms rearm 500/s stale_after 3101ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate < 500/s rearm 800/s max_windows 5 cooldown 30s stale_after 10s deep_for "
     "2s deep_launches 10000",
     "kernel_launch_rate < 500/s for 0s over 1s bucket 100ms rearm 800/s stale_after 10s cooldown "
     "30s max_windows 5 deep_for 2s deep_launches 10000"},
    {"kernel_launch_rate < 500/s deep_launches 10000 deep_for 2s stale_after 10s cooldown 30s "
     "max_windows 5 rearm 800/s for 2s",
     "kernel_launch_rate < 500/s for 2s over 1s bucket 100ms rearm 800/s stale_after 10s cooldown "
     "30s max_windows 5 deep_for 2s deep_launches 10000"},
    /* Blanks of every kind separate tokens; none is needed around a comparison. */
    {"\tkernel_launch_rate\n<\r500/s  for\v2s\f ",
     "kernel_launch_rate < 500/s for 2s over 1s bucket 100ms rearm 500/s stale_after 4100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"gpu0.utilization>=50%",
     "gpu0.utilization >= 50% for 0s over 1s bucket 100ms rearm 50% stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    /* The longest counter name. */
    {"custom."
     "ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
     "ccc < 5/s",
     "custom."
     "ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
     "ccc < 5/s for 0s over 1s bucket 100ms rearm 5/s stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"gpu0.power > 300W rearm 0W",
     "gpu0.power > 300W for 0s over 1s bucket 100ms rearm 0W stale_after 2100ms cooldown 10s "
     "max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate > 0/s rearm 0/s",
     "kernel_launch_rate > 0/s for 0s over 1s bucket 100ms rearm 0/s stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    /* Actions: window (the default) keeps the text it always had; replay and
     * range come last, always with their replay_budget. */
    {"kernel_launch_rate < 500/s action window",
     "kernel_launch_rate < 500/s for 0s over 1s bucket 100ms rearm 500/s stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000"},
    {"kernel_launch_rate < 500/s action replay",
     "kernel_launch_rate < 500/s for 0s over 1s bucket 100ms rearm 500/s stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000 action replay replay_budget 5s"},
    {"kernel_duration_p99 > 5ms for 1s action range train_step replay_budget 30s",
     "kernel_duration_p99 > 5ms for 1s over 1s bucket 100ms rearm 5ms stale_after 3100ms cooldown "
     "10s max_windows 3 deep_for 2s deep_launches 100000 action range train_step replay_budget "
     "30s"},
    /* Options in any order: the budget before the action that allows it. */
    {"kernel_launch_rate < 500/s replay_budget 10ms max_windows 1 action replay",
     "kernel_launch_rate < 500/s for 0s over 1s bucket 100ms rearm 500/s stale_after 2100ms "
     "cooldown 10s max_windows 1 deep_for 2s deep_launches 100000 action replay replay_budget "
     "10ms"},
    {"kernel_launch_rate < 500/s action replay replay_budget 1h",
     "kernel_launch_rate < 500/s for 0s over 1s bucket 100ms rearm 500/s stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000 action replay replay_budget 1h"},
    {"kernel_launch_rate < 500/s action replay replay_budget 1.5s",
     "kernel_launch_rate < 500/s for 0s over 1s bucket 100ms rearm 500/s stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000 action replay replay_budget "
     "1500ms"},
    {"kernel_launch_rate < 500/s action replay replay_budget 120000ms",
     "kernel_launch_rate < 500/s for 0s over 1s bucket 100ms rearm 500/s stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000 action replay replay_budget "
     "2min"},
    /* A range name is one word as the tokenizer gives it: any bytes but
     * blanks, ';' and < > = !, so dots, colons, slashes and UTF-8 too. A
     * name that is an action word is a name here. */
    {"gpu0.utilization < 20% action range nccl:AllReduce/step.3",
     "gpu0.utilization < 20% for 0s over 1s bucket 100ms rearm 20% stale_after 2100ms cooldown 10s "
     "max_windows 3 deep_for 2s deep_launches 100000 action range nccl:AllReduce/step.3 "
     "replay_budget 5s"},
    {"custom.tokens < 5/s action range \xc3\xa9tape",
     "custom.tokens < 5/s for 0s over 1s bucket 100ms rearm 5/s stale_after 2100ms cooldown 10s "
     "max_windows 3 deep_for 2s deep_launches 100000 action range \xc3\xa9tape replay_budget 5s"},
    {"kernel_launch_rate < 500/s action range window",
     "kernel_launch_rate < 500/s for 0s over 1s bucket 100ms rearm 500/s stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000 action range window "
     "replay_budget 5s"},
    /* The longest range name. */
    {"kernel_launch_rate < 500/s action range " RANGE_NAME_127,
     "kernel_launch_rate < 500/s for 0s over 1s bucket 100ms rearm 500/s stale_after 2100ms "
     "cooldown 10s max_windows 3 deep_for 2s deep_launches 100000 action range " RANGE_NAME_127
     " replay_budget 5s"},
};

/* Each refusal with its exact message: a change of wording is a change the
 * user sees, so it must be deliberate. */
static const refused_row refused[] = {
    {"", "the rule is empty"},
    {"   ", "the rule is empty"},
    {"kernel_launch_rate < 500 for 2s", "at column 22: '500' needs a unit: write 500/s"},
    {"kernel_launch_rate < 500", "at column 22: '500' needs a unit: write 500/s"},
    {"kernel_launch_rate < 500 /s",
     "at column 22: '500' needs its unit right after it, without a space: write 500/s"},
    {"kernel_duration_p99 > 5",
     "at column 23: '5' needs a unit: write 5s (a duration is written in ns, us, ms, s, min or h)"},
    {"kernel_duration_p99 > 5 ms",
     "at column 23: '5' needs its unit right after it, without a space: write 5ms"},
    {"gpu0.utilization < 20", "at column 20: '20' needs a unit: write 20%"},
    {"gpu1.power > 300",
     "at column 14: '300' needs a unit: write 300W (a power is written in mW or W)"},
    {"gpu0.sm_clock < 1200", "at column 17: '1200' needs a unit: write 1200MHz (a clock frequency "
                             "is written in MHz or GHz)"},
    {"gpu0.memory_used > 60",
     "at column 20: '60' needs a unit: write 60GiB (a size is written in B, KiB, MiB, GiB or TiB)"},
    {"kernel_launch_rate < 500/s for 2",
     "at column 32: '2' needs a unit: write 2s (a duration is written in ns, us, ms, s, min or h)"},
    {"kernel_launch_rate < 500/s rearm 800", "at column 34: '800' needs a unit: write 800/s"},
    {"kernel_launch_rate < 500ms", "at column 22: '500ms' is a duration, but kernel_launch_rate is "
                                   "compared with a rate, e.g. 500/s"},
    {"kernel_launch_rate < 20%", "at column 22: '20%' is a percentage, but kernel_launch_rate is "
                                 "compared with a rate, e.g. 500/s"},
    {"kernel_duration_p99 > 5/s", "at column 23: '5/s' is a rate, but kernel_duration_p99 is "
                                  "compared with a duration, e.g. 5ms"},
    {"gpu0.utilization < 20W", "at column 20: '20W' is a power, but gpu0.utilization is compared "
                               "with a percentage, e.g. 20%"},
    {"gpu1.power > 300MHz", "at column 14: '300MHz' is a clock frequency, but gpu1.power is "
                            "compared with a power, e.g. 300W"},
    {"gpu0.sm_clock < 1200W", "at column 17: '1200W' is a power, but gpu0.sm_clock is compared "
                              "with a clock frequency, e.g. 1200MHz"},
    {"gpu0.memory_used > 60ms", "at column 20: '60ms' is a duration, but gpu0.memory_used is "
                                "compared with a size, e.g. 60GiB"},
    {"kernel_launch_rate < 500/s for 2/s",
     "at column 32: '2/s' is a rate, but for takes a duration, e.g. 2s"},
    {"kernel_launch_rate < 500/s rearm 800ms",
     "at column 34: '800ms' is a duration, but rearm takes a rate, like the threshold, e.g. 500/s"},
    {"kernel_launch_rate < 500/min",
     "at column 22: unknown unit '/min' in '500/min': a rate is written in /s"},
    {"kernel_duration_p99 > 5sec", "at column 23: unknown unit 'sec' in '5sec': a duration is "
                                   "written in ns, us, ms, s, min or h"},
    {"gpu0.sm_clock < 1200mhz",
     "at column 17: unknown unit 'mhz' in '1200mhz': a clock frequency is written in MHz or GHz"},
    {"gpu0.memory_used > 60GB",
     "at column 20: unknown unit 'GB' in '60GB': a size is written in B, KiB, MiB, GiB or TiB"},
    {"gpu1.power > 300w",
     "at column 14: unknown unit 'w' in '300w': a power is written in mW or W"},
    {"kernel_rate < 500/s",
     "at column 1: unknown metric 'kernel_rate'; known metrics: kernel_launch_rate, "
     "kernel_duration_p50, kernel_duration_p90, kernel_duration_p99, gpu<N>.utilization, "
     "gpu<N>.power, gpu<N>.sm_clock, gpu<N>.memory_used, custom.<counter>"},
    {"costum.tokens < 50/s",
     "at column 1: unknown metric 'costum.tokens'; known metrics: kernel_launch_rate, "
     "kernel_duration_p50, kernel_duration_p90, kernel_duration_p99, gpu<N>.utilization, "
     "gpu<N>.power, gpu<N>.sm_clock, gpu<N>.memory_used, custom.<counter>"},
    {"Custom.tokens < 50/s",
     "at column 1: unknown metric 'Custom.tokens'; known metrics: kernel_launch_rate, "
     "kernel_duration_p50, kernel_duration_p90, kernel_duration_p99, gpu<N>.utilization, "
     "gpu<N>.power, gpu<N>.sm_clock, gpu<N>.memory_used, custom.<counter>"},
    {"custom < 50/s",
     "at column 1: 'custom' needs a counter name: custom.<counter>, e.g. custom.tokens"},
    {"custom. < 50/s", "at column 1: 'custom.' needs a counter name, e.g. custom.tokens"},
    {"custom.tok$ens < 50/s", "at column 11: '$' is not allowed in a counter name: names are 1-96 "
                              "characters of A-Z a-z 0-9 . _ -"},
    {"custom.tok/ens < 50/s", "at column 11: '/' is not allowed in a counter name: names are 1-96 "
                              "characters of A-Z a-z 0-9 . _ -"},
    {"custom.tokens rate < 50/s", "at column 15: custom metrics are rates already: write "
                                  "'custom.tokens < 50/s', without 'rate'"},
    {"gpu.utilization < 20%",
     "at column 4: 'gpu.utilization' needs a device index after 'gpu', e.g. gpu0.utilization"},
    {"gpu64.utilization < 20%", "at column 4: device index 64 in 'gpu64.utilization' is out of "
                                "range: devices are gpu0 to gpu63"},
    {"gpu01.utilization < 20%", "at column 4: device index '01' in 'gpu01.utilization' has a "
                                "leading zero: write gpu1.utilization"},
    {"gpu0 < 20%", "at column 5: expected '.' and a GPU metric after 'gpu0' (gpu0.utilization, "
                   "gpu0.power, gpu0.sm_clock or gpu0.memory_used)"},
    {"gpu0.temperature > 80%",
     "at column 6: unknown GPU metric 'temperature' in 'gpu0.temperature'; GPU metrics: "
     "utilization, power, sm_clock, memory_used"},
    {"gpu0.utilisation < 20%",
     "at column 6: unknown GPU metric 'utilisation' in 'gpu0.utilisation'; GPU metrics: "
     "utilization, power, sm_clock, memory_used"},
    {"< 500/s", "at column 1: expected a metric before '<', e.g. kernel_launch_rate < 500/s"},
    {"kernel_launch_rate", "at column 19: 'kernel_launch_rate' needs a comparison and a threshold "
                           "after it, e.g. kernel_launch_rate < 500/s"},
    {"kernel_launch_rate <", "at column 21: '<' needs a threshold after it, e.g. 500/s"},
    {"kernel_launch_rate 500/s",
     "at column 20: expected a comparison (<, <=, >, >=) after the metric, found '500/s'"},
    {"kernel_launch_rate == 500/s", "at column 20: unknown comparison '=='; use <, <=, > or >="},
    {"kernel_launch_rate = 500/s", "at column 20: unknown comparison '='; use <, <=, > or >="},
    {"kernel_launch_rate => 500/s", "at column 20: unknown comparison '=>'; use <, <=, > or >="},
    {"kernel_launch_rate != 500/s", "at column 20: unknown comparison '!='; use <, <=, > or >="},
    {"kernel_launch_rate below 500/s",
     "at column 20: expected a comparison (<, <=, >, >=) after the metric, found 'below'"},
    {"kernel_launch_rate < 1e3/s",
     "at column 22: '1e3/s': exponents are not accepted: write the number in full"},
    {"kernel_launch_rate < 1E3/s",
     "at column 22: '1E3/s': exponents are not accepted: write the number in full"},
    {"kernel_launch_rate < nan",
     "at column 22: 'nan' is not a number: expected a rate such as 500/s"},
    {"kernel_launch_rate < inf/s",
     "at column 22: 'inf/s' is not a number: expected a rate such as 500/s"},
    {"kernel_launch_rate < Infinity",
     "at column 22: 'Infinity' is not a number: expected a rate such as 500/s"},
    {"kernel_launch_rate < -5/s",
     "at column 22: '-5/s' is negative: kernel_launch_rate takes 0/s to 1000000000000/s"},
    {"kernel_launch_rate < +5/s", "at column 22: '+5/s': write the number without a sign"},
    {"kernel_launch_rate < .5/s",
     "at column 22: '.5/s' needs a digit before the decimal point: write 0.5/s"},
    {"kernel_launch_rate < 5./s", "at column 22: '5./s' needs a digit after the decimal point"},
    {"kernel_launch_rate < 0x10/s",
     "at column 22: unknown unit 'x10/s' in '0x10/s': a rate is written in /s"},
    {"kernel_launch_rate < 1,000/s",
     "at column 22: unknown unit ',000/s' in '1,000/s': a rate is written in /s"},
    {"kernel_launch_rate < 0.0001/s",
     "at column 22: '0.0001/s' is finer than a rate can be: the smallest step is 0.001/s"},
    {"kernel_duration_p99 > 0.5ns",
     "at column 23: '0.5ns' is finer than a duration can be: the smallest step is 1ns"},
    {"gpu0.utilization < 12.345%",
     "at column 20: '12.345%' is finer than a percentage can be: the smallest step is 0.01%"},
    {"gpu0.memory_used > 0.1KiB",
     "at column 20: '0.1KiB' is finer than a size can be: the smallest step is 1B"},
    {"gpu1.power > 0.0001W",
     "at column 14: '0.0001W' is finer than a power can be: the smallest step is 1mW"},
    {"gpu0.sm_clock < 1.0005GHz",
     "at column 17: '1.0005GHz' is finer than a clock frequency can be: the smallest step is 1MHz"},
    {"kernel_launch_rate < 99999999999999999999/s",
     "at column 22: '99999999999999999999/s' is too large: kernel_launch_rate takes 0/s to "
     "1000000000000/s"},
    {"kernel_launch_rate < 500/s for 99999999999999999999ms",
     "at column 32: '99999999999999999999ms' is too large: for takes 0s to 1h"},
    {"kernel_launch_rate < 1000000000001/s", "at column 22: 1000000000001/s is out of range: "
                                             "kernel_launch_rate takes 0/s to 1000000000000/s"},
    {"gpu0.utilization < 100.01%",
     "at column 20: 100.01% is out of range: gpu0.utilization takes 0% to 100%"},
    {"gpu0.utilization > 150%",
     "at column 20: 150% is out of range: gpu0.utilization takes 0% to 100%"},
    {"gpu1.power > 10001W", "at column 14: 10001W is out of range: gpu1.power takes 0W to 10000W"},
    {"gpu0.sm_clock > 10001MHz",
     "at column 17: 10001MHz is out of range: gpu0.sm_clock takes 0MHz to 10000MHz"},
    {"gpu0.memory_used > 65TiB",
     "at column 20: 65TiB is out of range: gpu0.memory_used takes 0B to 64TiB"},
    {"kernel_duration_p99 > 61min",
     "at column 23: 61min is out of range: kernel_duration_p99 takes 0s to 1h"},
    {"kernel_launch_rate < 500/s max_windows 0",
     "at column 40: max_windows 0 is out of range: max_windows takes 1 to 64"},
    {"kernel_launch_rate < 500/s max_windows 65",
     "at column 40: max_windows 65 is out of range: max_windows takes 1 to 64"},
    {"kernel_launch_rate < 500/s max_windows 4294967297",
     "at column 40: max_windows 4294967297 is out of range: max_windows takes 1 to 64"},
    {"kernel_launch_rate < 500/s max_windows 99999999999999999999",
     "at column 40: '99999999999999999999' is too large: max_windows takes 1 to 64"},
    {"kernel_launch_rate < 500/s max_windows 5.0",
     "at column 40: max_windows takes a whole number with no unit, found '5.0'"},
    {"kernel_launch_rate < 500/s max_windows 5s",
     "at column 40: max_windows takes a whole number with no unit, found '5s'"},
    {"kernel_launch_rate < 500/s max_windows -1",
     "at column 40: '-1' is negative: max_windows takes 1 to 64"},
    {"kernel_launch_rate < 500/s deep_launches 0",
     "at column 42: deep_launches 0 is out of range: deep_launches takes 1 to 1000000000"},
    {"kernel_launch_rate < 500/s deep_launches 1000000001",
     "at column 42: deep_launches 1000000001 is out of range: deep_launches takes 1 to 1000000000"},
    {"kernel_launch_rate < 500/s deep_launches 4294967296",
     "at column 42: deep_launches 4294967296 is out of range: deep_launches takes 1 to 1000000000"},
    {"kernel_launch_rate < 500/s deep_for 0s",
     "at column 37: deep_for 0s is out of range: deep_for takes 10ms to 10min"},
    {"kernel_launch_rate < 500/s deep_for 9ms",
     "at column 37: deep_for 9ms is out of range: deep_for takes 10ms to 10min"},
    {"kernel_launch_rate < 500/s deep_for 11min",
     "at column 37: deep_for 11min is out of range: deep_for takes 10ms to 10min"},
    {"kernel_launch_rate < 500/s for 61min",
     "at column 32: for 61min is out of range: for takes 0s to 1h"},
    {"kernel_launch_rate < 500/s over 9ms",
     "at column 33: over 9ms is out of range: over takes 10ms to 10min"},
    {"kernel_launch_rate < 500/s over 11min",
     "at column 33: over 11min is out of range: over takes 10ms to 10min"},
    {"kernel_launch_rate < 500/s bucket 5ms",
     "at column 35: bucket 5ms is out of range: bucket takes 10ms to 10s"},
    {"kernel_launch_rate < 500/s bucket 11s",
     "at column 35: bucket 11s is out of range: bucket takes 10ms to 10s"},
    {"kernel_launch_rate < 500/s cooldown 2h",
     "at column 37: cooldown 2h is out of range: cooldown takes 0s to 1h"},
    {"kernel_launch_rate < 500/s stale_after 4h",
     "at column 40: stale_after 4h is out of range: stale_after takes 0s to 3h"},
    {"kernel_launch_rate < 500/s for 2s stale_after 3s",
     "stale_after 3s is too short: it must be longer than over + for + bucket = 1s + 2s + 100ms = "
     "3100ms, or the rule would go stale before it could gather the evidence to fire"},
    {"kernel_launch_rate < 500/s for 2s stale_after 3100ms",
     "stale_after 3100ms is too short: it must be longer than over + for + bucket = 1s + 2s + "
     "100ms = 3100ms, or the rule would go stale before it could gather the evidence to fire"},
    {"kernel_launch_rate < 500/s stale_after 0s",
     "stale_after 0s is too short: it must be longer than over + for + bucket = 1s + 0s + 100ms = "
     "1100ms, or the rule would go stale before it could gather the evidence to fire"},
    {"kernel_launch_rate < 500/s over 250ms",
     "over 250ms is not a whole number of buckets of 100ms: write over 200ms or over 300ms, or "
     "change bucket"},
    {"kernel_launch_rate < 500/s over 50ms",
     "over 50ms is shorter than one bucket of 100ms: write over 100ms, or a narrower bucket"},
    {"kernel_launch_rate < 500/s over 2s bucket 300ms",
     "over 2s is not a whole number of buckets of 300ms: write over 1800ms or over 2100ms, or "
     "change bucket"},
    {"kernel_launch_rate < 500/s over 10min bucket 10ms",
     "over 10min is 60000 buckets of 10ms, more than 10000: use a wider bucket"},
    {"kernel_launch_rate < 500/s for 150ms", "for 150ms is not a whole number of buckets of 100ms: "
                                             "write for 100ms or for 200ms, or change bucket"},
    {"kernel_launch_rate < 500/s rearm 400/s",
     "rearm 400/s is on the wrong side of the threshold: kernel_launch_rate < 500/s rearms once a "
     "reading is at least the rearm value, so rearm must be at least 500/s (equal: rearm as soon "
     "as the comparison stops holding)"},
    {"kernel_launch_rate <= 500/s rearm 499.999/s",
     "rearm 499.999/s is on the wrong side of the threshold: kernel_launch_rate <= 500/s rearms "
     "once a reading is above the rearm value, so rearm must be at least 500/s (equal: rearm as "
     "soon as the comparison stops holding)"},
    {"kernel_launch_rate > 500/s rearm 600/s",
     "rearm 600/s is on the wrong side of the threshold: kernel_launch_rate > 500/s rearms once a "
     "reading is at most the rearm value, so rearm must be at most 500/s (equal: rearm as soon as "
     "the comparison stops holding)"},
    {"kernel_launch_rate >= 500/s rearm 501/s",
     "rearm 501/s is on the wrong side of the threshold: kernel_launch_rate >= 500/s rearms once a "
     "reading is below the rearm value, so rearm must be at most 500/s (equal: rearm as soon as "
     "the comparison stops holding)"},
    {"kernel_launch_rate >= 500/s rearm 0/s",
     "rearm 0/s can never be reached: kernel_launch_rate >= 500/s rearms once a reading is below "
     "0/s, and kernel_launch_rate is never below 0/s"},
    {"gpu0.utilization <= 50% rearm 100%",
     "rearm 100% can never be reached: gpu0.utilization <= 50% rearms once a reading is above "
     "100%, and gpu0.utilization is never above 100%"},
    {"gpu0.utilization < 50% rearm 101%",
     "at column 30: rearm 101% is out of range: gpu0.utilization takes 0% to 100%"},
    {"kernel_launch_rate < 0/s",
     "kernel_launch_rate < 0/s can never hold: kernel_launch_rate is never below 0/s"},
    {"kernel_launch_rate >= 0/s",
     "kernel_launch_rate >= 0/s always holds: kernel_launch_rate is never below 0/s"},
    {"gpu0.utilization > 100%",
     "gpu0.utilization > 100% can never hold: gpu0.utilization is never above 100%"},
    {"gpu0.utilization <= 100%",
     "gpu0.utilization <= 100% always holds: gpu0.utilization is never above 100%"},
    {"kernel_duration_p99 < 0s",
     "kernel_duration_p99 < 0s can never hold: kernel_duration_p99 is never below 0s"},
    {"kernel_launch_rate < 500/s for 2s for 3s",
     "at column 35: option 'for' is given twice (first at column 28)"},
    {"kernel_launch_rate < 500/s rearm 800/s rearm 900/s",
     "at column 40: option 'rearm' is given twice (first at column 28)"},
    {"kernel_launch_rate < 500/s 2s",
     "at column 28: expected an option (for, over, bucket, rearm, stale_after, cooldown, "
     "max_windows, deep_for, deep_launches, engine, action, replay_budget), found '2s'"},
    {"kernel_launch_rate < 500/s for 2s )",
     "at column 35: expected an option (for, over, bucket, rearm, stale_after, cooldown, "
     "max_windows, deep_for, deep_launches, engine, action, replay_budget), found ')'"},
    {"kernel_launch_rate < 500/s < 3/s",
     "at column 28: expected an option (for, over, bucket, rearm, stale_after, cooldown, "
     "max_windows, deep_for, deep_launches, engine, action, replay_budget), found '<'"},
    {"kernel_launch_rate < 500/s cooldwn 30s",
     "at column 28: unknown option 'cooldwn'; options: for, over, bucket, rearm, stale_after, "
     "cooldown, max_windows, deep_for, deep_launches, engine, action, replay_budget"},
    {"kernel_launch_rate < 500/s engine sas",
     "at column 35: unknown engine 'sas'; use pm (PM sampling, the default), pc (PC sampling), "
     "sass (SASS metrics) or auto (the deepest within the deep budget)"},
    {"kernel_launch_rate < 500/s window 2s",
     "at column 28: unknown option 'window': the time a reading covers is 'over' (e.g. over 1s); a "
     "deep-profiling window is what 'action window' (the default) opens, bounded by deep_for and "
     "deep_launches"},
    {"kernel_launch_rate < 500/s Cooldown 30s",
     "at column 28: unknown option 'Cooldown'; options: for, over, bucket, rearm, stale_after, "
     "cooldown, max_windows, deep_for, deep_launches, engine, action, replay_budget"},
    {"kernel_launch_rate < 500/s cooldown=30s",
     "at column 36: write options as 'cooldown 30s', without '='"},
    {"kernel_launch_rate < 500/s for",
     "at column 31: option 'for' needs a value after it, e.g. for 2s"},
    {"kernel_launch_rate < 500/s max_windows",
     "at column 39: option 'max_windows' needs a value after it, e.g. max_windows 5"},
    {"kernel_launch_rate < 500/s; gpu0.utilization < 20%",
     "at column 27: ';' separates rules in a list; one rule cannot contain it"},
    {"kernel_launch_rate < 500/s for 2s;",
     "at column 34: ';' separates rules in a list; one rule cannot contain it"},
    {"kernel_launch_rate < 500/s for cooldown",
     "at column 32: expected a duration such as 2s, found 'cooldown'"},
    {"; kernel_launch_rate < 5/s",
     "at column 1: ';' separates rules in a list; one rule cannot contain it"},
    {"kernel_launch_rate ; < 5/s",
     "at column 20: ';' separates rules in a list; one rule cannot contain it"},
    {"kernel_launch_rate < ;",
     "at column 22: ';' separates rules in a list; one rule cannot contain it"},
    {"kernel_launch_rate < < 5/s", "at column 22: expected a rate such as 500/s, found '<'"},
    {"kernel_launch_rate < 500/s cooldown=",
     "at column 36: write options as 'cooldown 30s', without '='"},
    /* 21 digits can never fit; 64 fraction digits can never be exact. */
    {"kernel_launch_rate < 100000000000000000000/s",
     "at column 22: '100000000000000000000/s' is too large: kernel_launch_rate takes 0/s to "
     "1000000000000/s"},
    {"kernel_launch_rate < 0.1111111111111111111111111111111111111111111111111111111111111111/s",
     "at column 22: '0.1111111111111111111111111111111111111111111111...' is finer than a rate can "
     "be: the smallest step is 0.001/s"},
    /* The largest value a rate's 64 bits hold, and one step past it. */
    {"kernel_launch_rate < 18446744073709551.615/s",
     "at column 22: 18446744073709551.615/s is out of range: kernel_launch_rate takes 0/s to "
     "1000000000000/s"},
    {"kernel_launch_rate < 18446744073709551.616/s",
     "at column 22: '18446744073709551.616/s' is too large: kernel_launch_rate takes 0/s to "
     "1000000000000/s"},
    {"custom."
     "ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
     "cccc < 5/s",
     "at column 8: the counter name is 97 characters long: names are 1-96 characters of A-Z "
     "a-z 0-9 . _ -"},
    {"custom.tok\xc3\xa9ns < 5/s",
     "at column 11: byte 0xc3 is not allowed in a counter name: names are 1-96 characters of "
     "A-Z a-z 0-9 . _ -"},
    {"kernel_launch_rate\x01 < 5/s",
     "at column 1: unknown metric 'kernel_launch_rate\\x01'; known metrics: kernel_launch_rate, "
     "kernel_duration_p50, kernel_duration_p90, kernel_duration_p99, gpu<N>.utilization, "
     "gpu<N>.power, gpu<N>.sm_clock, gpu<N>.memory_used, custom.<counter>"},
    {"gpu0.power >= 300W rearm 0W",
     "rearm 0W can never be reached: gpu0.power >= 300W rearms once a reading is below 0W, and "
     "gpu0.power is never below 0W"},
    /* action and replay_budget. */
    {"kernel_launch_rate < 500/s replay",
     "at column 28: unknown option 'replay': write 'action replay'"},
    {"kernel_launch_rate < 500/s range step",
     "at column 28: unknown option 'range': write 'action range NAME'"},
    {"kernel_launch_rate < 500/s action rerun",
     "at column 35: expected window, replay or range NAME after 'action', not 'rerun'"},
    {"kernel_launch_rate < 500/s action Replay",
     "at column 35: expected window, replay or range NAME after 'action', not 'Replay'"},
    {"kernel_launch_rate < 500/s action 2s",
     "at column 35: expected window, replay or range NAME after 'action', not '2s'"},
    {"kernel_launch_rate < 500/s action",
     "at column 34: option 'action' needs a value after it, e.g. action replay"},
    {"kernel_launch_rate < 500/s action < 5/s",
     "at column 35: option 'action' needs a value after it, e.g. action replay"},
    {"kernel_launch_rate < 500/s action=replay",
     "at column 34: write options as 'action replay', without '='"},
    {"kernel_launch_rate < 500/s action range",
     "at column 40: 'action range' needs the name of a scope or NVTX range"},
    {"kernel_launch_rate < 500/s action range   ",
     "at column 43: 'action range' needs the name of a scope or NVTX range"},
    {"kernel_launch_rate < 500/s action range;",
     "at column 40: 'action range' needs the name of a scope or NVTX range"},
    {"kernel_launch_rate < 500/s action range =step",
     "at column 41: 'action range' needs the name of a scope or NVTX range"},
    {"kernel_launch_rate < 500/s action range replay_budget 30s",
     "at column 41: 'action range' needs the name of a scope or NVTX range before the option "
     "'replay_budget'"},
    {"kernel_launch_rate < 500/s action range " RANGE_NAME_128,
     "at column 41: the range name is 128 bytes long: names are 1-127 bytes"},
    {"kernel_launch_rate < 500/s action replay action range step",
     "at column 42: option 'action' is given twice (first at column 28)"},
    {"kernel_launch_rate < 500/s action window action window",
     "at column 42: option 'action' is given twice (first at column 28)"},
    {"kernel_launch_rate < 500/s action replay replay_budget 1s replay_budget 2s",
     "at column 59: option 'replay_budget' is given twice (first at column 42)"},
    {"kernel_launch_rate < 500/s replay_budget 30s",
     "at column 28: replay_budget applies to action replay or range; this rule's action is window"},
    {"kernel_launch_rate < 500/s action window replay_budget 30s",
     "at column 42: replay_budget applies to action replay or range; this rule's action is window"},
    {"kernel_launch_rate < 500/s replay_budget 5s action window",
     "at column 28: replay_budget applies to action replay or range; this rule's action is window"},
    {"kernel_launch_rate < 500/s action replay replay_budget 9ms",
     "at column 56: replay_budget 9ms is out of range: replay_budget takes 10ms to 1h"},
    {"kernel_launch_rate < 500/s action replay replay_budget 61min",
     "at column 56: replay_budget 61min is out of range: replay_budget takes 10ms to 1h"},
    {"kernel_launch_rate < 500/s action replay replay_budget 30",
     "at column 56: '30' needs a unit: write 30s (a duration is written in ns, us, ms, s, min or "
     "h)"},
    {"kernel_launch_rate < 500/s action replay replay_budget 30/s",
     "at column 56: '30/s' is a rate, but replay_budget takes a duration, e.g. 30s"},
    {"kernel_launch_rate < 500/s action replay replay_budget",
     "at column 55: option 'replay_budget' needs a value after it, e.g. replay_budget 30s"},
    {"kernel_launch_rate < 500/s action replay replay_budget=1s",
     "at column 55: write options as 'replay_budget 1s', without '='"},
};

#define COUNT(array) (sizeof(array) / sizeof((array)[0]))

static void test_accepted_rules(void **state)
{
    (void)state;
    for (size_t i = 0; i < COUNT(accepted); i++) {
        rules_rule rule;
        char error[RULES_ERROR_MAX] = "unchanged";
        char canonical[RULES_FORMAT_MAX];
        int status = rules_parse(accepted[i].text, &rule, error, sizeof(error));
        if (status != FLARE_OK)
            fail_msg("row %zu '%s' was refused: %s", i, accepted[i].text, error);
        assert_string_equal(error, "");
        assert_int_equal(rules_format_canonical(&rule, canonical, sizeof(canonical)), FLARE_OK);
        if (strcmp(canonical, accepted[i].canonical) != 0)
            fail_msg("row %zu '%s':\n  canonical %s\n  expected  %s", i, accepted[i].text,
                     canonical, accepted[i].canonical);
        assert_int_equal(rules_validate(&rule, error, sizeof(error)), FLARE_OK);
    }
}

/* The property the fuzzer also checks: the canonical text parses back to an
 * equal rule, and writing that rule again gives the same text. */
static void test_round_trip(void **state)
{
    (void)state;
    for (size_t i = 0; i < COUNT(accepted); i++) {
        rules_rule first, second;
        char error[RULES_ERROR_MAX];
        char canonical[RULES_FORMAT_MAX], again[RULES_FORMAT_MAX];
        assert_int_equal(rules_parse(accepted[i].text, &first, error, sizeof(error)), FLARE_OK);
        assert_int_equal(rules_format_canonical(&first, canonical, sizeof(canonical)), FLARE_OK);
        if (rules_parse(canonical, &second, error, sizeof(error)) != FLARE_OK)
            fail_msg("row %zu: canonical '%s' was refused: %s", i, canonical, error);
        if (!rules_rule_equal(&first, &second))
            fail_msg("row %zu: '%s' parses back to a different rule", i, canonical);
        assert_int_equal(rules_format_canonical(&second, again, sizeof(again)), FLARE_OK);
        assert_string_equal(canonical, again);
    }
}

static void test_refused_rules(void **state)
{
    (void)state;
    rules_rule zero;
    memset(&zero, 0, sizeof(zero));
    for (size_t i = 0; i < COUNT(refused); i++) {
        rules_rule rule;
        memset(&rule, 0x5a, sizeof(rule));
        char error[RULES_ERROR_MAX] = "";
        int status = rules_parse(refused[i].text, &rule, error, sizeof(error));
        if (status != FLARE_ERR_INVALID_ARGUMENT)
            fail_msg("row %zu '%s' was not refused (status %d)", i, refused[i].text, status);
        if (strcmp(error, refused[i].message) != 0)
            fail_msg("row %zu '%s':\n  message  %s\n  expected %s", i, refused[i].text, error,
                     refused[i].message);
        /* A refusal leaves nothing half-filled. */
        assert_memory_equal(&rule, &zero, sizeof(rule));
    }
}

/* Values land in their base units, and options left out take the defaults
 * docs/rules.md gives. */
static void test_values_and_defaults(void **state)
{
    (void)state;
    rules_rule rule;
    char error[RULES_ERROR_MAX];
    assert_int_equal(rules_parse("kernel_launch_rate < 0.5/s", &rule, error, sizeof(error)), 0);
    assert_int_equal(rule.metric, RULES_METRIC_KERNEL_LAUNCH_RATE);
    assert_int_equal(rule.comparison, RULES_LESS);
    assert_int_equal(rule.threshold.kind, RULES_UNIT_RATE);
    assert_int_equal(rule.threshold.value, 500);
    assert_int_equal(rule.rearm.kind, RULES_UNIT_RATE);
    assert_int_equal(rule.rearm.value, 500);
    assert_int_equal(rule.sustained_ns, 0);
    assert_int_equal(rule.window_ns, 1000000000ull);
    assert_int_equal(rule.bucket_ns, 100000000ull);
    assert_int_equal(rule.stale_after_ns, 2100000000ull);
    assert_int_equal(rule.cooldown_ns, 10000000000ull);
    assert_int_equal(rule.max_windows, 3);
    assert_int_equal(rule.deep_ns, 2000000000ull);
    assert_int_equal(rule.deep_launches, 100000);
    assert_int_equal(rule.device, 0);
    assert_string_equal(rule.counter, "");
    assert_int_equal(rule.action, RULES_ACTION_WINDOW);
    assert_string_equal(rule.range_name, "");
    assert_int_equal(rule.replay_budget_ns, 5000000000ull);

    assert_int_equal(rules_parse("gpu7.memory_used > 1.5GiB for 2s", &rule, error, sizeof(error)),
                     0);
    assert_int_equal(rule.metric, RULES_METRIC_GPU_MEMORY_USED);
    assert_int_equal(rule.device, 7);
    assert_int_equal(rule.threshold.value, 1610612736ull);
    assert_int_equal(rule.stale_after_ns, 4100000000ull);

    assert_int_equal(rules_parse("gpu0.sm_clock < 1.41GHz", &rule, error, sizeof(error)), 0);
    assert_int_equal(rule.threshold.kind, RULES_UNIT_CLOCK);
    assert_int_equal(rule.threshold.value, 1410);
    assert_int_equal(rules_parse("gpu0.utilization < 12.5%", &rule, error, sizeof(error)), 0);
    assert_int_equal(rule.threshold.value, 1250);
    assert_int_equal(rules_parse("gpu0.power > 0.3W", &rule, error, sizeof(error)), 0);
    assert_int_equal(rule.threshold.value, 300);
    assert_int_equal(rules_parse("kernel_duration_p99 > 1.5min", &rule, error, sizeof(error)), 0);
    assert_int_equal(rule.metric, RULES_METRIC_KERNEL_DURATION_P99);
    assert_int_equal(rule.threshold.value, 90000000000ull);
    assert_int_equal(rules_parse("custom.tokens.out >= 2/s", &rule, error, sizeof(error)), 0);
    assert_int_equal(rule.metric, RULES_METRIC_CUSTOM_RATE);
    assert_string_equal(rule.counter, "tokens.out");
    assert_int_equal(rule.comparison, RULES_GREATER_EQUAL);
}

/* Each action lands in its field, the range name with it, and a budget in
 * nanoseconds whatever its unit. */
static void test_actions(void **state)
{
    (void)state;
    rules_rule rule;
    char error[RULES_ERROR_MAX];
    assert_int_equal(
        rules_parse("kernel_launch_rate < 500/s action window", &rule, error, sizeof(error)),
        FLARE_OK);
    assert_int_equal(rule.action, RULES_ACTION_WINDOW);
    assert_string_equal(rule.range_name, "");
    assert_int_equal(rule.replay_budget_ns, 5000000000ull);
    assert_int_equal(
        rules_parse("kernel_launch_rate < 500/s action replay", &rule, error, sizeof(error)),
        FLARE_OK);
    assert_int_equal(rule.action, RULES_ACTION_REPLAY);
    assert_string_equal(rule.range_name, "");
    assert_int_equal(rule.replay_budget_ns, 5000000000ull);
    assert_int_equal(rules_parse("kernel_launch_rate < 500/s action range train_step", &rule, error,
                                 sizeof(error)),
                     FLARE_OK);
    assert_int_equal(rule.action, RULES_ACTION_RANGE);
    assert_string_equal(rule.range_name, "train_step");
    assert_int_equal(rule.replay_budget_ns, 5000000000ull);
    /* The name ends where the tokenizer ends a word: at ';' too, so in a
     * single rule the ';' is refused after it. */
    assert_int_equal(
        rules_parse("kernel_launch_rate < 500/s action range step;", &rule, error, sizeof(error)),
        FLARE_ERR_INVALID_ARGUMENT);
    assert_string_equal(error,
                        "at column 45: ';' separates rules in a list; one rule cannot contain it");

    static const struct {
        const char *budget;
        uint64_t ns;
    } budgets[] = {
        {"10ms", 10000000ull},    {"10000us", 10000000ull},   {"250ms", 250000000ull},
        {"1.5s", 1500000000ull},  {"30s", 30000000000ull},    {"2min", 120000000000ull},
        {"1h", 3600000000000ull}, {"0.5h", 1800000000000ull}, {"3600000000000ns", 3600000000000ull},
    };
    for (size_t i = 0; i < sizeof(budgets) / sizeof(budgets[0]); i++) {
        char text[128];
        snprintf(text, sizeof(text), "kernel_launch_rate < 500/s action replay replay_budget %s",
                 budgets[i].budget);
        if (rules_parse(text, &rule, error, sizeof(error)) != FLARE_OK)
            fail_msg("'%s' was refused: %s", text, error);
        assert_int_equal(rule.replay_budget_ns, budgets[i].ns);
        assert_int_equal(rule.action, RULES_ACTION_REPLAY);
    }
    assert_string_equal(rules_action_name(RULES_ACTION_WINDOW), "window");
    assert_string_equal(rules_action_name(RULES_ACTION_REPLAY), "replay");
    assert_string_equal(rules_action_name(RULES_ACTION_RANGE), "range");
    assert_string_equal(rules_action_name((rules_action)3), "?");
}

/* Replay and range rules read back from their canonical text as the same
 * rule, field by field, and write the same text again. */
static void test_action_round_trip(void **state)
{
    (void)state;
    static const char *const texts[] = {
        "kernel_launch_rate < 500/s action replay",
        "kernel_duration_p99 > 5ms for 1s over 10s cooldown 1min max_windows 2 action replay "
        "replay_budget 90s",
        "gpu1.power > 300W action range forward replay_budget 10ms",
        "custom.tokens < 5/s replay_budget 1h action range decode.step",
    };
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        rules_rule first, second;
        char error[RULES_ERROR_MAX];
        char canonical[RULES_FORMAT_MAX], again[RULES_FORMAT_MAX];
        assert_int_equal(rules_parse(texts[i], &first, error, sizeof(error)), FLARE_OK);
        assert_int_not_equal(first.action, RULES_ACTION_WINDOW);
        assert_int_equal(rules_format_canonical(&first, canonical, sizeof(canonical)), FLARE_OK);
        if (rules_parse(canonical, &second, error, sizeof(error)) != FLARE_OK)
            fail_msg("'%s' was refused: %s", canonical, error);
        assert_true(rules_rule_equal(&first, &second));
        assert_int_equal(second.action, first.action);
        assert_string_equal(second.range_name, first.range_name);
        assert_int_equal(second.replay_budget_ns, first.replay_budget_ns);
        assert_int_equal(rules_format_canonical(&second, again, sizeof(again)), FLARE_OK);
        assert_string_equal(canonical, again);
    }
}

/* The longest canonical text there can be, every field at its widest (a
 * 96-byte counter, durations in nanoseconds, a 127-byte range name), still
 * fits RULES_FORMAT_MAX. */
static void test_longest_canonical(void **state)
{
    (void)state;
    const char *text = "custom."
                       "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
                       "cccccccccccccccccccccc < 999999999999.999/s for 359999999964ns over "
                       "59999999994ns bucket 9999999999ns rearm 999999999999.999/s stale_after "
                       "10799999999999ns cooldown 3599999999999ns max_windows 64 deep_for "
                       "599999999999ns deep_launches 999999999 action range " RANGE_NAME_127
                       " replay_budget 3599999999999ns";
    rules_rule rule;
    char error[RULES_ERROR_MAX];
    if (rules_parse(text, &rule, error, sizeof(error)) != FLARE_OK)
        fail_msg("refused: %s", error);
    char canonical[RULES_FORMAT_MAX];
    assert_int_equal(rules_format_canonical(&rule, canonical, sizeof(canonical)), FLARE_OK);
    assert_string_equal(canonical, text);
    assert_true(strlen(canonical) < RULES_FORMAT_MAX);
}

/* A rule may be RULES_TEXT_MAX bytes long, and not one more. */
static void test_length_bound(void **state)
{
    (void)state;
    char text[RULES_TEXT_MAX + 2];
    const char *rule_text = "kernel_launch_rate < 500/s";
    memset(text, ' ', sizeof(text));
    memcpy(text, rule_text, strlen(rule_text));
    text[RULES_TEXT_MAX] = '\0';
    rules_rule rule;
    char error[RULES_ERROR_MAX];
    assert_int_equal(rules_parse(text, &rule, error, sizeof(error)), FLARE_OK);
    text[RULES_TEXT_MAX] = ' ';
    text[RULES_TEXT_MAX + 1] = '\0';
    assert_int_equal(rules_parse(text, &rule, error, sizeof(error)), FLARE_ERR_INVALID_ARGUMENT);
    assert_string_equal(error, "the rule is longer than 1024 characters");
}

/* Small, missing and exact-size buffers: never overrun, always terminated. */
static void test_buffers(void **state)
{
    (void)state;
    rules_rule rule;
    char small[9];
    memset(small, 'x', sizeof(small));
    assert_int_equal(rules_parse("kernel_launch_rate < 500", &rule, small, 8),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_string_equal(small, "at colu");
    assert_int_equal(small[8], 'x');
    char one[2] = {'x', 'x'};
    assert_int_equal(rules_parse("kernel_launch_rate < 500/s rearm 1/s", &rule, one, 1),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(one[0], '\0');
    assert_int_equal(one[1], 'x');
    assert_int_equal(rules_parse("bogus", &rule, NULL, 0), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(rules_parse("kernel_launch_rate < 5/s", &rule, NULL, 0), FLARE_OK);
    char error[RULES_ERROR_MAX];
    assert_int_equal(rules_parse(NULL, &rule, error, sizeof(error)), FLARE_ERR_INVALID_ARGUMENT);
    assert_string_equal(error, "no rule text");
    assert_int_equal(rules_parse("kernel_launch_rate < 5/s", NULL, error, sizeof(error)),
                     FLARE_ERR_INVALID_ARGUMENT);

    char canonical[RULES_FORMAT_MAX];
    assert_int_equal(rules_format_canonical(&rule, canonical, sizeof(canonical)), FLARE_OK);
    size_t length = strlen(canonical);
    char exact[RULES_FORMAT_MAX];
    assert_int_equal(rules_format_canonical(&rule, exact, length + 1), FLARE_OK);
    assert_string_equal(exact, canonical);
    assert_int_equal(rules_format_canonical(&rule, exact, length), FLARE_ERR_INVALID_ARGUMENT);
    assert_string_equal(exact, "");
    assert_int_equal(rules_format_canonical(NULL, exact, sizeof(exact)),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(rules_format_canonical(&rule, NULL, 0), FLARE_ERR_INVALID_ARGUMENT);

    char quantity[8];
    assert_int_equal(
        rules_format_quantity((rules_quantity){RULES_UNIT_RATE, 500}, quantity, sizeof(quantity)),
        FLARE_OK);
    assert_string_equal(quantity, "0.5/s");
    assert_int_equal(rules_format_quantity((rules_quantity){RULES_UNIT_RATE, 123456789}, quantity,
                                           sizeof(quantity)),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_string_equal(quantity, "");
    assert_int_equal(rules_format_quantity((rules_quantity){RULES_UNIT_KIND_COUNT, 1}, quantity,
                                           sizeof(quantity)),
                     FLARE_ERR_INVALID_ARGUMENT);
}

/* Rules built in code go through the same whole-rule checks. */
static void expect_invalid(const rules_rule *rule, const char *message)
{
    char error[RULES_ERROR_MAX];
    assert_int_equal(rules_validate(rule, error, sizeof(error)), FLARE_ERR_INVALID_ARGUMENT);
    if (strcmp(error, message) != 0)
        fail_msg("message  %s\nexpected %s", error, message);
    char canonical[RULES_FORMAT_MAX];
    (void)rules_format_canonical(rule, canonical, sizeof(canonical));
}

static void test_validate_built_rules(void **state)
{
    (void)state;
    rules_rule base, rule;
    char error[RULES_ERROR_MAX];
    assert_int_equal(rules_parse("gpu0.utilization < 20% for 1s", &base, error, sizeof(error)), 0);

    rule = base;
    rule.device = 64;
    expect_invalid(&rule, "device gpu64 is out of range: devices are gpu0 to gpu63");
    rule = base;
    rule.threshold.kind = RULES_UNIT_RATE;
    expect_invalid(&rule, "the threshold is a rate, but gpu0.utilization is compared with a "
                          "percentage, e.g. 20%");
    rule = base;
    rule.threshold.value = 10001;
    expect_invalid(&rule, "threshold 100.01% is out of range: gpu0.utilization takes 0% to 100%");
    rule = base;
    rule.rearm.kind = RULES_UNIT_BYTES;
    expect_invalid(&rule,
                   "rearm is a size, but the threshold of gpu0.utilization is a percentage, e.g. "
                   "20%");
    rule = base;
    rule.max_windows = 0;
    expect_invalid(&rule, "max_windows 0 is out of range: max_windows takes 1 to 64");
    rule = base;
    rule.deep_launches = 0;
    expect_invalid(&rule, "deep_launches 0 is out of range: deep_launches takes 1 to 1000000000");
    rule = base;
    rule.bucket_ns = 0;
    expect_invalid(&rule, "bucket 0s is out of range: bucket takes 10ms to 10s");
    rule = base;
    rule.metric = RULES_METRIC_COUNT;
    expect_invalid(&rule, "unknown metric number 9; known metrics: kernel_launch_rate, "
                          "kernel_duration_p50, kernel_duration_p90, kernel_duration_p99, "
                          "gpu<N>.utilization, gpu<N>.power, gpu<N>.sm_clock, "
                          "gpu<N>.memory_used, custom.<counter>");
    rule = base;
    rule.comparison = RULES_COMPARISON_COUNT;
    expect_invalid(&rule, "unknown comparison number 4; use <, <=, > or >=");
    rule = base;
    snprintf(rule.counter, sizeof(rule.counter), "tokens");
    expect_invalid(&rule, "a counter name is given for gpu0.utilization, which watches no counter");
    assert_int_equal(rules_validate(NULL, error, sizeof(error)), FLARE_ERR_INVALID_ARGUMENT);
    assert_string_equal(error, "no rule");

    assert_int_equal(rules_parse("custom.tokens < 5/s", &base, error, sizeof(error)), 0);
    rule = base;
    memset(rule.counter, 0, sizeof(rule.counter));
    expect_invalid(&rule, "custom.<counter> needs a counter name, e.g. custom.tokens");
    rule = base;
    rule.counter[2] = ' ';
    expect_invalid(&rule, "byte 0x20 at offset 2 of the counter name is not allowed: names are "
                          "1-96 characters of A-Z a-z 0-9 . _ -");
    rule = base;
    memset(rule.counter, 'a', sizeof(rule.counter));
    expect_invalid(&rule, "the counter name is not terminated within 96 characters");
    rule = base;
    rule.device = 1;
    expect_invalid(&rule, "device 1 is given for custom.tokens, which is not per device");

    /* Actions: what the canonical form would leave out must hold its default,
     * and a range name must be one the parser reads back as the name. */
    rule = base;
    rule.action = (rules_action)3;
    expect_invalid(&rule, "unknown action number 3; use window, replay or range NAME");
    rule = base;
    rule.replay_budget_ns = 30000000000ull;
    expect_invalid(&rule,
                   "replay_budget applies to action replay or range; this rule's action is window");
    rule = base;
    snprintf(rule.range_name, sizeof(rule.range_name), "step");
    expect_invalid(&rule, "a range name is given, but this rule's action is window");
    rule = base;
    rule.action = RULES_ACTION_REPLAY;
    snprintf(rule.range_name, sizeof(rule.range_name), "step");
    expect_invalid(&rule, "a range name is given, but this rule's action is replay");
    rule = base;
    rule.action = RULES_ACTION_REPLAY;
    rule.replay_budget_ns = 0;
    expect_invalid(&rule, "replay_budget 0s is out of range: replay_budget takes 10ms to 1h");
    rule = base;
    rule.action = RULES_ACTION_RANGE;
    expect_invalid(&rule, "'action range' needs the name of a scope or NVTX range");
    memset(rule.range_name, 'r', sizeof(rule.range_name));
    expect_invalid(&rule, "the range name is not terminated within 127 bytes");
    rule = base;
    rule.action = RULES_ACTION_RANGE;
    snprintf(rule.range_name, sizeof(rule.range_name), "train step");
    expect_invalid(&rule, "byte 0x20 at offset 5 of the range name is not allowed: a name is one "
                          "word, without blanks, ';' or < > = !");
    snprintf(rule.range_name, sizeof(rule.range_name), "a;b");
    expect_invalid(&rule, "byte 0x3b at offset 1 of the range name is not allowed: a name is one "
                          "word, without blanks, ';' or < > = !");
    snprintf(rule.range_name, sizeof(rule.range_name), "cooldown");
    expect_invalid(&rule, "range name 'cooldown' is an option's key: the parser would read it as "
                          "the option, not as the name");
    snprintf(rule.range_name, sizeof(rule.range_name), "step");
    assert_int_equal(rules_validate(&rule, error, sizeof(error)), FLARE_OK);
}

static void test_equality(void **state)
{
    (void)state;
    rules_rule a, b;
    char error[RULES_ERROR_MAX];
    assert_int_equal(rules_parse("custom.tokens < 5/s", &a, error, sizeof(error)), 0);
    assert_int_equal(rules_parse("custom.tokens < 5/s", &b, error, sizeof(error)), 0);
    assert_true(rules_rule_equal(&a, &b));
    assert_int_equal(rules_parse("custom.tokenz < 5/s", &b, error, sizeof(error)), 0);
    assert_false(rules_rule_equal(&a, &b));
    assert_int_equal(rules_parse("custom.tokens < 5/s cooldown 11s", &b, error, sizeof(error)), 0);
    assert_false(rules_rule_equal(&a, &b));
    assert_int_equal(rules_parse("custom.tokens < 5/s rearm 6/s", &b, error, sizeof(error)), 0);
    assert_false(rules_rule_equal(&a, &b));
    assert_int_equal(rules_parse("custom.tokens < 5/s action window", &b, error, sizeof(error)), 0);
    assert_true(rules_rule_equal(&a, &b));
    assert_int_equal(rules_parse("custom.tokens < 5/s action replay", &a, error, sizeof(error)), 0);
    assert_false(rules_rule_equal(&a, &b));
    assert_int_equal(
        rules_parse("custom.tokens < 5/s action replay replay_budget 6s", &b, error, sizeof(error)),
        0);
    assert_false(rules_rule_equal(&a, &b));
    assert_int_equal(rules_parse("custom.tokens < 5/s action range a", &a, error, sizeof(error)),
                     0);
    assert_int_equal(rules_parse("custom.tokens < 5/s action range b", &b, error, sizeof(error)),
                     0);
    assert_false(rules_rule_equal(&a, &b));
    assert_int_equal(rules_parse("custom.tokens < 5/s action range a", &b, error, sizeof(error)),
                     0);
    assert_true(rules_rule_equal(&a, &b));
    assert_string_equal(rules_metric_name(RULES_METRIC_GPU_POWER), "gpu<N>.power");
    assert_string_equal(rules_metric_name(RULES_METRIC_COUNT), "?");
    assert_int_equal(rules_metric_unit(RULES_METRIC_KERNEL_DURATION_P90), RULES_UNIT_DURATION);
    assert_string_equal(rules_comparison_text(RULES_GREATER_EQUAL), ">=");
    assert_string_equal(rules_comparison_text(RULES_COMPARISON_COUNT), "?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepted_rules),    cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_refused_rules),     cmocka_unit_test(test_values_and_defaults),
        cmocka_unit_test(test_actions),           cmocka_unit_test(test_action_round_trip),
        cmocka_unit_test(test_longest_canonical), cmocka_unit_test(test_length_bound),
        cmocka_unit_test(test_buffers),           cmocka_unit_test(test_validate_built_rules),
        cmocka_unit_test(test_equality),
    };
    printf("rule tables: %zu accepted, %zu refused\n", COUNT(accepted), COUNT(refused));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
