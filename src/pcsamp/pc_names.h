/*
 * pc_names.h: a bounded table of function names for PC sampling's hardware
 * side: each name a hardware read hands over (CUPTI's, per PC) is looked up
 * by its key (CUPTI's mangled name) and kept once, whole, with its value
 * (flare's name for it: demangled as kernel records are), at an address that
 * stays valid until the table is destroyed. PC samples then carry a pointer,
 * not a copy: C++ kernels' names run to thousands of bytes, and a name cut
 * at a fixed length no longer matches its kernel records (PyTorch's
 * element-wise kernels on the H200, session 16).
 *
 * Bounded in names and in bytes; a name that does not fit is refused (NULL)
 * and counted, never kept in part.
 *
 * Must never: move or free a kept name before destroy, keep a name cut
 * short, or grow past its bounds. Not thread-safe: one reader (the engine's
 * drain, which serialises reads) calls it.
 */
#ifndef FLARE_PCSAMP_PC_NAMES_H
#define FLARE_PCSAMP_PC_NAMES_H

#include <stddef.h>
#include <stdint.h>

/* Default bounds: distinct functions a process samples, and their bytes. */
#define PC_NAMES_MAX_DEFAULT       65536u
#define PC_NAMES_MAX_BYTES_DEFAULT (64u << 20)

typedef struct pc_names pc_names;

/* FLARE_OK with *out, FLARE_ERR_INVALID_ARGUMENT (a zero bound) or
 * FLARE_ERR_NO_MEMORY. */
int pc_names_create(size_t max_names, size_t max_bytes, pc_names **out);
void pc_names_destroy(pc_names *names);

/* The value kept for key, or NULL when key was never added. */
const char *pc_names_find(const pc_names *names, const char *key);

/* Keeps key with value (copies of both) and returns the kept value; when
 * key is already there, its kept value (value is not compared). NULL, with
 * the refusal counted, when either bound would be passed or memory ran out. */
const char *pc_names_add(pc_names *names, const char *key, const char *value);

/* Names kept, and adds refused. */
size_t pc_names_count(const pc_names *names);
uint64_t pc_names_refused(const pc_names *names);

#endif /* FLARE_PCSAMP_PC_NAMES_H */
