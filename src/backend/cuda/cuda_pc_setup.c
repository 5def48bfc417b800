/*
 * cuda_pc_setup.c: the CUDA PC sampling engine's set-up at the first
 * context's enable (cuda_pc.c): the read and configuration buffers, the
 * stall-reason table in flare's names, the period and CUPTI's
 * configuration attributes; and CUPTI's result texts for both files.
 *
 * Must never: start, stop or read sampling (cuda_pc.c's steps), or keep a
 * partial table after a failure (all freed, the reason said).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_pc_hw.h"
#include "flare/flare.h"

const char *cuda_pc_result_text(const pc_api *api, CUptiResult result)
{
    const char *text = NULL;
    if (api->cuptiGetResultString == NULL ||
        api->cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == NULL)
        return "unknown CUPTI error";
    return text;
}

int cuda_pc_failed(const pc_api *api, CUptiResult result, const char *what, char *reason,
                   size_t reason_size)
{
    snprintf(reason, reason_size, "%s: %s", what, cuda_pc_result_text(api, result));
    return FLARE_ERR_BACKEND;
}

CUptiResult cuda_pc_logged_end(const pc_api *api, const char *call, CUptiResult result)
{
    if (cuda_pc_log_on())
        cuda_pc_log_call(call, "end", cuda_pc_result_text(api, result));
    return result;
}

/* ---- buffers and stall reasons ---- */

void cuda_pc_buffer_reset(pc_buffer *buffer)
{
    memset(&buffer->data, 0, sizeof(buffer->data));
    /* No *_STRUCT_SIZE macro exists for these two; CUPTI's samples use sizeof. */
    buffer->data.size = sizeof(CUpti_PCSamplingData);
    buffer->data.collectNumPcs = buffer->pcs_capacity;
    buffer->data.pPcData = buffer->pcs;
    for (size_t i = 0; i < buffer->pcs_capacity; i++) {
        memset(&buffer->pcs[i], 0, sizeof(buffer->pcs[i]));
        buffer->pcs[i].size = sizeof(CUpti_PCSamplingPCData);
        buffer->pcs[i].stallReason = &buffer->stalls[i * buffer->per_pc];
    }
}

int cuda_pc_buffer_make(pc_buffer *buffer, size_t pcs, size_t per_pc)
{
    buffer->pcs = calloc(pcs, sizeof(*buffer->pcs));
    buffer->stalls = calloc(pcs * per_pc, sizeof(*buffer->stalls));
    if (buffer->pcs == NULL || buffer->stalls == NULL) {
        free(buffer->pcs);
        free(buffer->stalls);
        buffer->pcs = NULL;
        buffer->stalls = NULL;
        return FLARE_ERR_NO_MEMORY;
    }
    buffer->pcs_capacity = pcs;
    buffer->per_pc = per_pc;
    cuda_pc_buffer_reset(buffer);
    return FLARE_OK;
}

/* "smsp__pcsamp_warps_issue_stalled_long_scoreboard" -> "long_scoreboard":
 * the names the simulated device and the report use. */
static void stall_name_of(const char *cupti_name, char out[PC_STALL_NAME_MAX])
{
    static const char *const prefixes[] = {"smsp__pcsamp_warps_issue_stalled_",
                                           "smsp__pcsamp_warps_issue_", "smsp__pcsamp_"};
    const char *name = cupti_name;
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
        size_t length = strlen(prefixes[i]);
        if (strncmp(name, prefixes[i], length) == 0) {
            name += length;
            break;
        }
    }
    snprintf(out, PC_STALL_NAME_MAX, "%s", name[0] != '\0' ? name : "unknown");
}

int cuda_pc_stall_table_read(cuda_pc_hardware *hw, CUcontext context, char *reason,
                             size_t reason_size)
{
    size_t count = 0;
    CUpti_PCSamplingGetNumStallReasonsParams number = {
        .size = CUpti_PCSamplingGetNumStallReasonsParamsSize,
        .ctx = context,
        .numStallReasons = &count};
    CUptiResult result = hw->api.cuptiPCSamplingGetNumStallReasons(&number);
    if (result != CUPTI_SUCCESS)
        return cuda_pc_failed(&hw->api, result, "cuptiPCSamplingGetNumStallReasons", reason,
                              reason_size);
    if (count == 0 || count > 4096) {
        snprintf(reason, reason_size, "cuptiPCSamplingGetNumStallReasons: %zu reasons", count);
        return FLARE_ERR_BACKEND;
    }
    hw->stall_index = calloc(count, sizeof(*hw->stall_index));
    hw->stall_name = calloc(count, sizeof(*hw->stall_name));
    char *text = calloc(count, CUPTI_STALL_REASON_STRING_SIZE);
    char **names = calloc(count, sizeof(*names));
    int status = FLARE_OK;
    if (hw->stall_index == NULL || hw->stall_name == NULL || text == NULL || names == NULL) {
        snprintf(reason, reason_size, "no memory for %zu stall reasons", count);
        status = FLARE_ERR_NO_MEMORY;
    } else {
        for (size_t i = 0; i < count; i++)
            names[i] = text + i * CUPTI_STALL_REASON_STRING_SIZE;
        CUpti_PCSamplingGetStallReasonsParams reasons = {
            .size = CUpti_PCSamplingGetStallReasonsParamsSize,
            .ctx = context,
            .numStallReasons = count,
            .stallReasonIndex = hw->stall_index,
            .stallReasons = names};
        result = hw->api.cuptiPCSamplingGetStallReasons(&reasons);
        if (result != CUPTI_SUCCESS)
            status = cuda_pc_failed(&hw->api, result, "cuptiPCSamplingGetStallReasons", reason,
                                    reason_size);
        for (size_t i = 0; status == FLARE_OK && i < count; i++) {
            names[i][CUPTI_STALL_REASON_STRING_SIZE - 1] = '\0';
            stall_name_of(names[i], hw->stall_name[i]);
        }
    }
    free(text);
    free(names);
    if (status == FLARE_OK) {
        hw->stall_count = count;
    } else {
        free(hw->stall_index);
        free(hw->stall_name);
        hw->stall_index = NULL;
        hw->stall_name = NULL;
    }
    return status;
}

/* ---- configuration ---- */

/* The exponent N of the 2^N-cycle period nearest period_ns at the SM clock,
 * within what CUPTI accepts and the H200 delivered samples at. */
uint32_t cuda_pc_period_exp_of(const cuda_pc_hardware *hw, uint64_t period_ns)
{
    double cycles = (double)period_ns * hw->sm_mhz / 1e3;
    double exponent = cycles > 1.0 ? floor(log2(cycles) + 0.5) : 0.0;
    if (exponent < CUDA_PC_PERIOD_EXP_MIN)
        return CUDA_PC_PERIOD_EXP_MIN;
    if (exponent > CUDA_PC_PERIOD_EXP_MAX)
        return CUDA_PC_PERIOD_EXP_MAX;
    return (uint32_t)exponent;
}

CUptiResult cuda_pc_set_attributes(cuda_pc_hardware *hw, CUcontext context,
                                   CUpti_PCSamplingConfigurationInfo *infos, size_t count)
{
    CUpti_PCSamplingConfigurationInfoParams params = {
        .size = CUpti_PCSamplingConfigurationInfoParamsSize,
        .ctx = context,
        .numAttributes = count,
        .pPCSamplingConfigurationInfo = infos};
    return PC_LOGGED(hw, cuptiPCSamplingSetConfigurationAttribute, &params);
}

/* Continuous collection, started and stopped by windows, every stall
 * reason, the data buffer CUPTI fills at disable, and the period. */
int cuda_pc_configure(cuda_pc_hardware *hw, CUcontext context, uint32_t period_exp, char *reason,
                      size_t reason_size)
{
    CUpti_PCSamplingConfigurationInfo infos[5];
    memset(infos, 0, sizeof(infos));
    infos[0].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE;
    infos[0].attributeData.collectionModeData.collectionMode =
        CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS;
    infos[1].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL;
    infos[1].attributeData.enableStartStopControlData.enableStartStopControl = 1;
    infos[2].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON;
    infos[2].attributeData.stallReasonData.stallReasonCount = hw->stall_count;
    infos[2].attributeData.stallReasonData.pStallReasonIndex = hw->stall_index;
    infos[3].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER;
    infos[3].attributeData.samplingDataBufferData.samplingDataBuffer = &hw->config_buffer.data;
    infos[4].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD;
    infos[4].attributeData.samplingPeriodData.samplingPeriod = period_exp;
    CUptiResult result = cuda_pc_set_attributes(hw, context, infos, 5);
    if (result != CUPTI_SUCCESS) {
        size_t length =
            (size_t)snprintf(reason, reason_size, "cuptiPCSamplingSetConfigurationAttribute: %s",
                             cuda_pc_result_text(&hw->api, result));
        for (size_t i = 0; i < 5 && length < reason_size; i++)
            if (infos[i].attributeStatus != CUPTI_SUCCESS)
                length += (size_t)snprintf(reason + length, reason_size - length,
                                           "; attribute %d: %s", (int)infos[i].attributeType,
                                           cuda_pc_result_text(&hw->api, infos[i].attributeStatus));
        return FLARE_ERR_BACKEND;
    }
    hw->period_exp = period_exp;
    return FLARE_OK;
}
