/*
 * disasm_run.h: finds the CUDA toolkit's disassembler and runs it on a
 * cubin, returning its SASS listing (read with disasm_parse.h). Where a
 * kernel was built without line information, flare shows the instructions'
 * text instead, got this way at the end of the session from the kept cubin.
 *
 * The disassembler is a child process: started with posix_spawn (no shell,
 * stdin from /dev/null, the caller's environment unchanged, in a process
 * group of its own), its stdout read up to a cap and the tail of its stderr
 * kept for the error message, all within a deadline on CLOCK_MONOTONIC.
 *
 * Must never: wait without a bound, leave a zombie or a descriptor behind on
 * any path, write to the child (so SIGPIPE cannot reach the caller), change
 * the caller's signal dispositions, or hold more than the cap in memory.
 * Not for the application's threads: it forks and waits.
 */
#ifndef FLARE_DISASM_DISASM_RUN_H
#define FLARE_DISASM_DISASM_RUN_H

#include <stddef.h>
#include <stdint.h>

/* How many bytes of the child's stderr the error message keeps (its end). */
#define DISASM_STDERR_TAIL 500

/* The disassembler to use: FLARE_DISASSEMBLER (a path; an empty value means
 * none), else cuobjdump, then nvdisasm, each looked for on PATH, in
 * $CUDA_HOME/bin, then in /usr/local/cuda/bin (cuobjdump anywhere is taken
 * before nvdisasm anywhere). A candidate must be an executable regular file;
 * empty PATH entries are not searched. Returns FLARE_OK with its path in
 * path; FLARE_ERR_UNSUPPORTED with why (what was looked for and where, or
 * why FLARE_DISASSEMBLER cannot be used) when there is none;
 * FLARE_ERR_INVALID_ARGUMENT for a NULL or empty buffer, or a path that does
 * not fit in path_size (why says so). why may be NULL. Reads the
 * environment: call it where nothing else may be calling setenv. */
int disasm_find(char *path, size_t path_size, char *why, size_t why_size);

/* Runs program on a cubin file: `PROGRAM -sass FILE` when program's base
 * name begins with "cuobjdump", `PROGRAM FILE` otherwise (nvdisasm's default
 * output). On FLARE_OK, *out is the child's stdout, malloc'd (the caller
 * frees it), NUL-terminated after its *out_size bytes. On any error *out is
 * NULL, *out_size 0, and error (when not NULL) says what happened:
 *   FLARE_ERR_INVALID_ARGUMENT  a NULL argument, timeout_ms 0, max_bytes 0
 *                               or over SIZE_MAX / 2;
 *   FLARE_ERR_NO_MEMORY         the output buffer could not grow;
 *   FLARE_ERR_IO                a pipe or the spawn failed, or the child
 *                               exited non-zero or was killed by a signal
 *                               (the status or signal, then stderr's last
 *                               DISASM_STDERR_TAIL bytes);
 *   FLARE_ERR_FULL              stdout went over max_bytes ("output over N
 *                               bytes"); the child was killed and reaped;
 *   FLARE_ERR_TIMEOUT           the child had not finished within
 *                               timeout_ms ("timed out after N ms"); it was
 *                               killed (SIGKILL, with its process group) and
 *                               reaped.
 * Blocks the calling thread for up to timeout_ms (plus the reaping of a
 * killed child). */
int disasm_run(const char *program, const char *cubin_path, uint32_t timeout_ms, size_t max_bytes,
               char **out, size_t *out_size, char *error, size_t error_size);

/* Kills the running disassembler's process group, if one runs: for a
 * signal handler that must not leave it behind (async-signal-safe). */
void disasm_run_kill(void);

/* The longest -fun list passed (one argument: the kernel takes at most
 * 128 KiB in one); a longer one disassembles the whole cubin. */
#define DISASM_FUNCTIONS_MAX (96u * 1024u)

/* disasm_run restricted to some functions: functions (NULL or empty: all)
 * is a comma-separated list of symbols, given to cuobjdump as `-sass -fun
 * LIST FILE` (a large cubin's listing takes tens of seconds, one kernel's
 * a fraction of one); another disassembler ignores it. */
int disasm_run_functions(const char *program, const char *cubin_path, const char *functions,
                         uint32_t timeout_ms, size_t max_bytes, char **out, size_t *out_size,
                         char *error, size_t error_size);

#endif /* FLARE_DISASM_DISASM_RUN_H */
