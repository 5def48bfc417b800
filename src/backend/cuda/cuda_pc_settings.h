/*
 * cuda_pc_settings.h: the CUDA instruction engines' settings from the
 * environment: whether this process's windows may ask for PC sampling at
 * all (FLARE_CUDA_PC, FLARE_DEEP_ENGINE, FLARE_DEEP_WHEN's engines, engine
 * auto's FLARE_DEEP_BUDGET) or for SASS metrics (FLARE_CUDA_SASS, the same
 * engine settings), decided once before the first context; and the
 * bring-up call log both engines write (FLARE_CUDA_PC_LOG).
 *
 * Must never: call CUPTI, enable anything, or write a file that existed
 * before (the call log is created new, never through a link).
 */
#ifndef FLARE_BACKEND_CUDA_PC_SETTINGS_H
#define FLARE_BACKEND_CUDA_PC_SETTINGS_H

/* Why this process's windows may ask for pc, or NULL when none can, with
 * *off saying why not. */
const char *cuda_pc_wanted_by(const char **off);
/* The same for sass (FLARE_CUDA_SASS=0 turns it off). */
const char *cuda_sass_wanted_by(const char **off);

/* FLARE_CUDA_PC_LOG=PATH (a new file: never an existing one or a link)
 * gets a line before and after every CUPTI PC sampling call that can
 * wait, with the time, the calling thread's name and CUPTI's answer: where
 * a window that never ends is stuck, read after the fact. Opened once, at
 * install. */
void cuda_pc_log_open(void);
/* Whether the log is open. */
int cuda_pc_log_on(void);
/* One line: "TIME_NS THREAD CALL begin" or "... end RESULT" (result NULL:
 * none). Nothing when the log is not open. */
void cuda_pc_log_call(const char *call, const char *phase, const char *result);

#endif /* FLARE_BACKEND_CUDA_PC_SETTINGS_H */
