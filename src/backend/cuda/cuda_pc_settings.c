/*
 * cuda_pc_settings.c: the CUDA instruction engines' settings from the
 * environment (cuda_pc_settings.h): whether PC sampling and SASS metrics
 * are wanted in this process, and the bring-up call log both write.
 *
 * Must never call CUPTI, or open the log through a link or onto a file
 * that exists.
 */
#include "backend/cuda/cuda_pc_settings.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_engine_costs.h"
#include "core/clock.h"
#include "core/log.h"
#include "deepwin/deepwin_auto.h"
#include "rules/rule.h"

const char *cuda_pc_wanted_by(const char **off)
{
    /* The switch for a program where PC sampling misbehaves: its windows
     * then fall back to PM sampling. */
    const char *setting = getenv("FLARE_CUDA_PC");
    *off = "switched off (FLARE_CUDA_PC=0): pc windows use PM sampling";
    if (setting != NULL && strcmp(setting, "0") == 0)
        return NULL;
    if (setting != NULL && setting[0] != '\0' && strcmp(setting, "1") != 0)
        core_log(CORE_LOG_WARNING,
                 "FLARE_CUDA_PC=%.40s: not 0 or 1; PC sampling stays on where a window asks "
                 "for it (FLARE_CUDA_PC=0 turns it off)",
                 setting);
    *off = "no window asks for engine pc (--deep-engine pc, or a rule's engine pc)";
    const char *engine_variable = getenv("FLARE_DEEP_ENGINE");
    if (engine_variable != NULL && strcmp(engine_variable, "pc") == 0)
        return "FLARE_DEEP_ENGINE=pc";
    unsigned rule_engines = rules_list_engines(getenv("FLARE_DEEP_WHEN"));
    if ((rule_engines & RULES_ENGINES_PC) != 0)
        return "a rule with engine pc";
    /* Engine auto (FLARE_DEEP_ENGINE=auto, or a rule with engine auto) can
     * choose pc only if PC sampling is enabled here, before any window and
     * any launch rate: so it is when PC sampling's estimated cost at a
     * nominal 10,000 launches/s fits the deep budget (FLARE_DEEP_BUDGET,
     * default 5%). Otherwise PC stays off, and auto windows can use PM
     * sampling (which enabled PC sampling would keep from being set up). */
    int auto_asked = (engine_variable != NULL && strcmp(engine_variable, "auto") == 0) ||
                     (rule_engines & RULES_ENGINES_AUTO) != 0;
    if (auto_asked && deepwin_auto_fits_nominal(CUDA_PC_COST_LAUNCH_NS, CUDA_PC_COST_GPU,
                                                getenv("FLARE_DEEP_BUDGET")))
        return "engine auto: PC sampling fits the deep budget at 10,000 launches/s";
    if (auto_asked)
        *off = "engine auto: PC sampling is over the deep budget at 10,000 launches/s, or "
               "FLARE_DEEP_BUDGET is malformed; auto windows use PM sampling";
    return NULL;
}

const char *cuda_sass_wanted_by(const char **off)
{
    /* The switch for a program where SASS metrics misbehave. */
    const char *setting = getenv("FLARE_CUDA_SASS");
    *off = "switched off (FLARE_CUDA_SASS=0): sass windows use PM sampling";
    if (setting != NULL && strcmp(setting, "0") == 0)
        return NULL;
    *off = "no window asks for engine sass (--deep-engine sass, or a rule's engine sass)";
    const char *engine_variable = getenv("FLARE_DEEP_ENGINE");
    if (engine_variable != NULL && strcmp(engine_variable, "sass") == 0)
        return "FLARE_DEEP_ENGINE=sass";
    if ((rules_list_engines(getenv("FLARE_DEEP_WHEN")) & RULES_ENGINES_SASS) != 0)
        return "a rule with engine sass";
    return NULL;
}

/* ---- the call log ---- */

static int call_log_fd = -1;

void cuda_pc_log_open(void)
{
    if (call_log_fd >= 0)
        return; /* PC sampling's and SASS metrics' installs both ask */
    const char *path = getenv("FLARE_CUDA_PC_LOG");
    if (path == NULL || path[0] == '\0')
        return;
    call_log_fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (call_log_fd < 0)
        core_log(CORE_LOG_WARNING,
                 "FLARE_CUDA_PC_LOG=%.200s: cannot create it (it must not "
                 "exist yet)",
                 path);
}

int cuda_pc_log_on(void)
{
    return call_log_fd >= 0;
}

void cuda_pc_log_call(const char *call, const char *phase, const char *result)
{
    if (call_log_fd < 0)
        return;
    char thread[32] = "?";
    pthread_getname_np(pthread_self(), thread, sizeof(thread));
    dprintf(call_log_fd, "%llu %s %s %s%s%s\n", (unsigned long long)core_now_ns(), thread, call,
            phase, result != NULL ? " " : "", result != NULL ? result : "");
}
