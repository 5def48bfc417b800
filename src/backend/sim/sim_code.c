/*
 * sim_code.c: the simulated device's listings (sim_code.h).
 *
 * Must never: hand out a listing that changes (made once, under the lock,
 * then only read), or grow past SIM_CODE_KERNELS_MAX kernels.
 */
#include "backend/sim/sim_code.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/sim/sim_pc.h"

typedef struct sim_kernel_code {
    const char *kernel; /* the registry's pointer: the key */
    store_pc_code code;
} sim_kernel_code;

static pthread_mutex_t code_lock = PTHREAD_MUTEX_INITIALIZER;
static sim_kernel_code codes[SIM_CODE_KERNELS_MAX];
static size_t code_count;

int sim_code_text(uint64_t pc_offset, char *out, size_t out_size)
{
    if (pc_offset < SIM_PC_LINES_END || (pc_offset - SIM_PC_LINES_END) % 16u != 0 ||
        (pc_offset - SIM_PC_LINES_END) / 16u >= SIM_CODE_INSTRUCTIONS)
        return 0;
    unsigned index = (unsigned)((pc_offset - SIM_PC_LINES_END) / 16u);
    unsigned reg = 2u + index % 20u;
    switch (index % 4u) {
    case 0:
        snprintf(out, out_size, "LDG.E R%u, desc[UR4][R%u.64]", reg, reg + 2u);
        break;
    case 1:
        snprintf(out, out_size, "IMAD.WIDE R%u, R%u, 0x4, R%u", reg, reg + 1u, reg + 2u);
        break;
    case 2:
        snprintf(out, out_size, "ISETP.GE.AND P0, PT, R%u, 0x%x, PT", reg, index);
        break;
    default:
        snprintf(out, out_size, "@!P0 BRA 0x%llx", (unsigned long long)pc_offset - 48u);
        break;
    }
    return 1;
}

/* kernel's listing in cuobjdump -sass's layout: a header, then one line
 * per instruction with its offset in a comment and an encoding comment. */
static char *listing_of(const char *kernel, size_t *size)
{
    size_t capacity = 256u + strlen(kernel) + (size_t)SIM_CODE_INSTRUCTIONS * 128u;
    char *text = malloc(capacity);
    if (text == NULL)
        return NULL;
    size_t used =
        (size_t)snprintf(text, capacity, "\n\tcode for sm_90\n\t\tFunction : %s\n", kernel);
    for (unsigned i = 0; i < SIM_CODE_INSTRUCTIONS && used < capacity; i++) {
        uint64_t offset = SIM_PC_LINES_END + 16u * (uint64_t)i;
        char instruction[96];
        sim_code_text(offset, instruction, sizeof(instruction));
        used += (size_t)snprintf(text + used, capacity - used,
                                 "        /*%04llx*/                   %s ;  /* 0x%016llx */\n",
                                 (unsigned long long)offset, instruction,
                                 (unsigned long long)(offset * 2654435761u));
    }
    *size = used < capacity ? used : capacity - 1;
    return text;
}

/* FNV-1a of the name: the listing's "CRC", stable across runs. */
static uint64_t name_crc(const char *kernel)
{
    uint64_t hash = 1469598103934665603ull;
    for (const unsigned char *p = (const unsigned char *)kernel; *p != '\0'; p++)
        hash = (hash ^ *p) * 1099511628211ull;
    return hash;
}

const store_pc_code *sim_code_of(const char *kernel)
{
    if (kernel == NULL)
        return NULL;
    const store_pc_code *found = NULL;
    pthread_mutex_lock(&code_lock);
    for (size_t i = 0; i < code_count && found == NULL; i++)
        if (codes[i].kernel == kernel)
            found = &codes[i].code;
    if (found == NULL && code_count < SIM_CODE_KERNELS_MAX) {
        size_t size = 0;
        char *listing = listing_of(kernel, &size);
        if (listing != NULL) {
            codes[code_count] = (sim_kernel_code){.kernel = kernel,
                                                  .code = {.cubin_crc = name_crc(kernel),
                                                           .symbol = kernel,
                                                           .cubin = listing,
                                                           .cubin_size = size}};
            found = &codes[code_count++].code;
        }
    }
    pthread_mutex_unlock(&code_lock);
    return found;
}
