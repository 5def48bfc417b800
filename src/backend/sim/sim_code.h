/*
 * sim_code.h: the simulated device's machine code, for the instructions
 * its binary has no line information for (offsets from SIM_PC_LINES_END
 * on, sim_pc.h): per kernel, a "cubin" that is the listing a disassembler
 * would print for it (cuobjdump -sass's format), so the session's end can
 * give such instructions their SASS text with any program that prints a
 * file (the tests' stand-in disassembler does).
 *
 * Must never: allocate or lock on a kernel thread (only the samplers and
 * the SASS reader, flare's threads, ask), or free what it handed out while
 * the process runs (rows point at it).
 */
#ifndef FLARE_BACKEND_SIM_CODE_H
#define FLARE_BACKEND_SIM_CODE_H

#include <stdint.h>

#include "store/store_pc_code.h"

/* Instructions each kernel's listing holds, 16 bytes apart from
 * SIM_PC_LINES_END; an offset past them has no text. */
#define SIM_CODE_INSTRUCTIONS 256u
/* Kernels given code; later ones get none (NULL). */
#define SIM_CODE_KERNELS_MAX 256u

/* The code of kernel (the registry's kept name), made at its first call;
 * NULL for NULL, or once SIM_CODE_KERNELS_MAX kernels have code, or with
 * no memory. Any flare thread. */
const store_pc_code *sim_code_of(const char *kernel);

/* The text the listing gives the instruction at pc_offset (for tests):
 * writes it into out and returns 1, or 0 where the listing has none. */
int sim_code_text(uint64_t pc_offset, char *out, size_t out_size);

#endif /* FLARE_BACKEND_SIM_CODE_H */
