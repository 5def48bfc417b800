/*
 * cuda_cubin.h: the module-scope __device__ variables a cubin declares,
 * read from its ELF image (names and sizes), so kernel and range replay can
 * restore them.
 *
 * Owns nothing beyond what it returns. Pure parsing: no driver or CUPTI
 * call, so it is tested on machines without a GPU. Must never read outside
 * the image it is given, whatever the image holds: CUPTI hands over the
 * bytes of every module the program loads.
 */
#ifndef FLARE_BACKEND_CUDA_CUBIN_H
#define FLARE_BACKEND_CUDA_CUBIN_H

#include <stddef.h>

typedef struct cuda_cubin_globals {
    size_t count;
    char *names;   /* count NUL-terminated names back to back */
    size_t *sizes; /* bytes of each, from the symbol table */
    char why[96];  /* after -1: what could not be read ("not an ELF image", ...) */
} cuda_cubin_globals;

/* Fills out with the variables in the image's .nv.global* sections
 * (.nv.global: zero-initialised; .nv.global.init: initialised; not
 * __constant__ memory, which kernels cannot write). Returns the count (0:
 * none, out left empty), or -1 when the image is not a 64-bit ELF flare
 * can read, or memory ran out (out->why says which). Images with more
 * sections than ELF's header fields hold (extended numbering: cuBLAS's
 * largest cubins) are read through section 0 and SHT_SYMTAB_SHNDX. Free
 * with cuda_cubin_globals_free. */
long cuda_cubin_scan_globals(const void *image, size_t size, cuda_cubin_globals *out);
void cuda_cubin_globals_free(cuda_cubin_globals *globals);

#endif /* FLARE_BACKEND_CUDA_CUBIN_H */
