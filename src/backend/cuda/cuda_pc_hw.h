/*
 * cuda_pc_hw.h: what cuda_pc.c (the steps windows drive) and
 * cuda_pc_setup.c (the enable's buffers, stall table and configuration)
 * share: CUPTI's PC sampling functions as loaded, the hardware's state,
 * and the call-log wrapper. Private to the CUDA PC sampling engine.
 *
 * Must never: be included outside src/backend/cuda/cuda_pc*.c.
 */
#ifndef FLARE_BACKEND_CUDA_PC_HW_H
#define FLARE_BACKEND_CUDA_PC_HW_H

#include <cupti_pcsampling.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/cuda/cuda_pc_settings.h"
#include "pcsamp/pc_engine.h"
#include "pcsamp/pc_names.h"

/* 2^10 cycles (about 0.5 us at 1.98 GHz) is the shortest period the H200
 * gave samples at; 2^5 and 2^8 overflowed the hardware buffer. */
#define CUDA_PC_PERIOD_EXP_MIN 10u
#define CUDA_PC_PERIOD_EXP_MAX 31u
/* PCs one cuptiPCSamplingGetData call moves (each with room for every
 * stall reason: about 40 on Hopper, 16 bytes each). */
#define CUDA_PC_READ_PCS 1024u
/* GetData calls one read may make while CUPTI says more PCs remain. */
#define CUDA_PC_FETCHES_MAX 16

#define PC_FUNCTIONS(X)                                                                            \
    X(cuptiGetResultString, CUptiResult, (CUptiResult, const char **))                             \
    X(cuptiGetDeviceId, CUptiResult, (CUcontext, uint32_t *))                                      \
    X(cuptiPCSamplingEnable, CUptiResult, (CUpti_PCSamplingEnableParams *))                        \
    X(cuptiPCSamplingDisable, CUptiResult, (CUpti_PCSamplingDisableParams *))                      \
    X(cuptiPCSamplingSetConfigurationAttribute, CUptiResult,                                       \
      (CUpti_PCSamplingConfigurationInfoParams *))                                                 \
    X(cuptiPCSamplingStart, CUptiResult, (CUpti_PCSamplingStartParams *))                          \
    X(cuptiPCSamplingStop, CUptiResult, (CUpti_PCSamplingStopParams *))                            \
    X(cuptiPCSamplingGetData, CUptiResult, (CUpti_PCSamplingGetDataParams *))                      \
    X(cuptiPCSamplingGetNumStallReasons, CUptiResult,                                              \
      (CUpti_PCSamplingGetNumStallReasonsParams *))                                                \
    X(cuptiPCSamplingGetStallReasons, CUptiResult, (CUpti_PCSamplingGetStallReasonsParams *))

#define PC_FUNCTION_FIELD_(name, result, arguments) result(*name) arguments;
typedef struct pc_api {
    PC_FUNCTIONS(PC_FUNCTION_FIELD_)
} pc_api;
#undef PC_FUNCTION_FIELD_

/* Room for CUPTI to write PC records into, and where a read stands in it. */
typedef struct pc_buffer {
    CUpti_PCSamplingData data;
    CUpti_PCSamplingPCData *pcs;
    CUpti_PCSamplingStallReason *stalls;
    size_t pcs_capacity, per_pc;
} pc_buffer;

typedef struct cuda_pc_hardware {
    pc_api api;
    _Atomic(CUcontext) context; /* enabled and not destroyed; NULL otherwise */
    int device;
    uint32_t period_exp; /* configured */
    double sm_mhz;
    size_t stall_count;
    uint32_t *stall_index;                 /* CUPTI's indexes */
    char (*stall_name)[PC_STALL_NAME_MAX]; /* flare's names, aligned with them */
    pc_buffer read_buffer;
    pc_buffer config_buffer; /* CUPTI's SAMPLING_DATA_BUFFER (filled at disable) */
    /* The read buffer's records not yet handed over. */
    size_t pending_pcs, cursor_pc, cursor_stall;
    /* The cursor's PC named and placed once, for all its stall reasons
     * (set at its first, cursor_stall 0). */
    const char *pc_function, *pc_file;
    uint32_t pc_line;
    const store_pc_code *pc_code; /* where pc_file is NULL (cuda_pc_lines_find) */
    size_t remaining;             /* CUPTI's remainingNumPcs after the last GetData */
    uint64_t hardware_full_reads;
    /* Start and stop on the application's thread (cuda_app_thread.h). */
    uint32_t wanted_exp;   /* the period the next start sets */
    char call_reason[192]; /* why the last start or stop failed there */
    /* Start made and no Stop since: what stop_here stops (a start refused
     * while an old stop still waited must not leave CUPTI started). Only
     * on the application's thread. */
    int cupti_started;
    _Atomic int stop_deferred; /* a stop waits for a launch: its leftovers are dropped */
    /* Where the window's start stands (CUDA_PC_START_*): set by hw_start,
     * then by start_here on the application's thread (release; read with
     * acquire, call_reason and the read buffer after it). */
    _Atomic int start_state;
    _Atomic uint64_t stale_lost; /* samples dropped so, not yet reported by a read */
    /* Functions named so far (function_name): CUPTI's name -> flare's,
     * whole; the last one looked up, for the records that follow it. */
    pc_names *names;
    const char *last_key, *last_name;
    uint64_t names_refused_reported;
} cuda_pc_hardware;

/* CUPTI's text for a result ("unknown CUPTI error" without one). */
const char *cuda_pc_result_text(const pc_api *api, CUptiResult result);
/* reason = "what: CUPTI's text"; returns FLARE_ERR_BACKEND. */
int cuda_pc_failed(const pc_api *api, CUptiResult result, const char *what, char *reason,
                   size_t reason_size);
CUptiResult cuda_pc_logged_end(const pc_api *api, const char *call, CUptiResult result);

/* Calls CUPTI's name(params) between two lines of the call log
 * (cuda_pc_settings.h); evaluates to its result. */
#define PC_LOGGED(hw, name, params)                                                                \
    (cuda_pc_log_call(#name, "begin", NULL),                                                       \
     cuda_pc_logged_end(&(hw)->api, #name, (hw)->api.name(params)))

/* ---- the enable's set-up (cuda_pc_setup.c) ---- */

/* Points the buffer's records at its stall arrays again, before a read. */
void cuda_pc_buffer_reset(pc_buffer *buffer);
int cuda_pc_buffer_make(pc_buffer *buffer, size_t pcs, size_t per_pc);
/* The context's stall reasons into hw->stall_index/stall_name/stall_count. */
int cuda_pc_stall_table_read(cuda_pc_hardware *hw, CUcontext context, char *reason,
                             size_t reason_size);
/* The exponent N of the 2^N-cycle period nearest period_ns at the SM clock,
 * within what CUPTI accepts and the H200 delivered samples at. */
uint32_t cuda_pc_period_exp_of(const cuda_pc_hardware *hw, uint64_t period_ns);
CUptiResult cuda_pc_set_attributes(cuda_pc_hardware *hw, CUcontext context,
                                   CUpti_PCSamplingConfigurationInfo *infos, size_t count);
/* Continuous collection, started and stopped by windows, every stall
 * reason, the data buffer CUPTI fills at disable, and the period. */
int cuda_pc_configure(cuda_pc_hardware *hw, CUcontext context, uint32_t period_exp, char *reason,
                      size_t reason_size);

#endif /* FLARE_BACKEND_CUDA_PC_HW_H */
