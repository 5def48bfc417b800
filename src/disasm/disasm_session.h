/*
 * disasm_session.h: the SASS text of a session's sampled instructions that
 * have no source line (their kernels were built without -lineinfo), made
 * once every process of the session has ended: each cubin the engines kept
 * (pc_cubins, store_pc_code.h) is written to a private file, disassembled
 * (disasm_run.h: cuobjdump or nvdisasm) once whichever processes kept it,
 * its listing parsed, and the text of every wanted instruction written to
 * pc_instructions; the cubin is then dropped. Run by `flare trace` at the
 * session's end and by `flare disasm`.
 *
 * Must never: run while a process of the session may still write, leave a
 * file behind, follow a planted link, drop a cubin whose disassembly failed
 * or gave none of what was wanted (it stays for a later `flare disasm`),
 * take longer than DISASM_PASS_TIMEOUT_MS, or fail silently: what it did or
 * why it could not is the sass_text capability of each process concerned.
 */
#ifndef FLARE_DISASM_DISASM_SESSION_H
#define FLARE_DISASM_DISASM_SESSION_H

#include <stdint.h>

#include "store/store.h"

/* Bounds on one disassembly (the listing of a large cubin runs to tens of
 * MiB; a hung tool must not hold `flare trace` at the end). */
#define DISASM_TIMEOUT_MS        120000u
#define DISASM_LISTING_MAX_BYTES ((size_t)1 << 30)
/* The whole pass, unless FLARE_DISASM_SECONDS (1 to 3600) says otherwise:
 * what is not done by then is left for `flare disasm` (PyTorch's 2,442
 * sampled instructions took 1.7 s on the H200). */
#define DISASM_PASS_TIMEOUT_MS 180000u

typedef struct disasm_session_result {
    uint64_t cubins;      /* kept cubins found */
    uint64_t cubins_done; /* disassembled and dropped */
    uint64_t wanted;      /* instructions wanting a text */
    uint64_t given;       /* texts written */
    uint64_t took_ns;
    char program[512]; /* the disassembler used, or "" */
    char problem[768]; /* the first failure, or "" */
} disasm_session_result;

/* Gives the session's wanted instructions their text. session_dir is where
 * the private work folder is made. FLARE_OK when nothing was kept or every
 * cubin was done; FLARE_ERR_UNSUPPORTED when no disassembler was found;
 * another negative status when a cubin failed (result->problem says why;
 * the others were still done; FLARE_ERR_TIMEOUT when the pass's time was
 * spent); FLARE_ERR_INVALID_ARGUMENT, nothing done, for a bad
 * FLARE_DISASM_SECONDS. */
int disasm_session(store *database, const char *session_dir, disasm_session_result *result);

/* The same, calling announce (when not NULL) once before the first cubin
 * with how many were kept and their bytes: a large one takes seconds, and
 * the caller may say so first. */
int disasm_session_announced(store *database, const char *session_dir,
                             void (*announce)(uint64_t cubins, uint64_t bytes, void *user),
                             void *user, disasm_session_result *result);

#endif /* FLARE_DISASM_DISASM_SESSION_H */
