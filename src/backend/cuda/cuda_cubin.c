/*
 * cuda_cubin.c: the __device__ variables of a cubin (cuda_cubin.h).
 *
 * Every offset and size read from the image is checked against the image
 * before it is followed; an image that is not 8-byte aligned is copied
 * first, so no ELF structure is read from a misaligned address.
 */
#include "backend/cuda/cuda_cubin.h"

#include <elf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Section indexes beyond this are not looked at (cubins hold a few dozen). */
#define CUBIN_SECTIONS_MAX 4096

void cuda_cubin_globals_free(cuda_cubin_globals *globals)
{
    if (globals == NULL)
        return;
    free(globals->names);
    free(globals->sizes);
    memset(globals, 0, sizeof(*globals));
}

static long scan_aligned(const unsigned char *image, size_t size, cuda_cubin_globals *out)
{
    if (size < sizeof(Elf64_Ehdr) || memcmp(image, ELFMAG, SELFMAG) != 0 ||
        image[EI_CLASS] != ELFCLASS64)
        return -1;
    const Elf64_Ehdr *header = (const Elf64_Ehdr *)(const void *)image;
    if (header->e_shoff == 0 || header->e_shoff % _Alignof(Elf64_Shdr) != 0 ||
        header->e_shentsize != sizeof(Elf64_Shdr) || header->e_shoff > size ||
        (size - header->e_shoff) / sizeof(Elf64_Shdr) < header->e_shnum ||
        header->e_shstrndx >= header->e_shnum)
        return -1;
    const Elf64_Shdr *sections = (const Elf64_Shdr *)(const void *)(image + header->e_shoff);
    const Elf64_Shdr *names = &sections[header->e_shstrndx];
    if (names->sh_offset > size || names->sh_size > size - names->sh_offset)
        return -1;
    const char *section_names = (const char *)image + names->sh_offset;
    unsigned char is_global[CUBIN_SECTIONS_MAX] = {0};
    int any = 0;
    for (size_t i = 0; i < header->e_shnum && i < CUBIN_SECTIONS_MAX; i++) {
        size_t at = sections[i].sh_name;
        if (at < names->sh_size && names->sh_size - at >= 10 &&
            memcmp(section_names + at, ".nv.global", 10) == 0)
            is_global[i] = 1, any = 1;
    }
    if (!any)
        return 0;
    long found = 0;
    size_t name_bytes = 0;
    /* Two passes over the symbol tables: count, then copy. */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t s = 0; s < header->e_shnum; s++) {
            const Elf64_Shdr *table = &sections[s];
            if (table->sh_type != SHT_SYMTAB || table->sh_entsize != sizeof(Elf64_Sym) ||
                table->sh_offset % _Alignof(Elf64_Sym) != 0 || table->sh_offset > size ||
                table->sh_size > size - table->sh_offset || table->sh_link >= header->e_shnum)
                continue;
            const Elf64_Shdr *strings = &sections[table->sh_link];
            if (strings->sh_offset > size || strings->sh_size > size - strings->sh_offset)
                continue;
            const Elf64_Sym *symbols = (const Elf64_Sym *)(const void *)(image + table->sh_offset);
            size_t symbol_count = table->sh_size / sizeof(Elf64_Sym);
            for (size_t k = 0; k < symbol_count; k++) {
                const Elf64_Sym *symbol = &symbols[k];
                if (ELF64_ST_TYPE(symbol->st_info) != STT_OBJECT || symbol->st_size == 0 ||
                    symbol->st_shndx >= CUBIN_SECTIONS_MAX || !is_global[symbol->st_shndx] ||
                    symbol->st_name >= strings->sh_size)
                    continue;
                const char *name = (const char *)image + strings->sh_offset + symbol->st_name;
                size_t length = strnlen(name, strings->sh_size - symbol->st_name);
                if (length == strings->sh_size - symbol->st_name || length == 0)
                    continue; /* not terminated inside the table, or empty */
                if (pass == 1) {
                    memcpy(out->names + name_bytes, name, length + 1);
                    out->sizes[found] = symbol->st_size;
                }
                name_bytes += length + 1;
                found++;
            }
        }
        if (pass == 0) {
            if (found == 0)
                return 0;
            out->names = malloc(name_bytes);
            out->sizes = calloc((size_t)found, sizeof(size_t));
            if (out->names == NULL || out->sizes == NULL) {
                cuda_cubin_globals_free(out);
                return -1;
            }
            out->count = (size_t)found;
            found = 0;
            name_bytes = 0;
        }
    }
    return found;
}

long cuda_cubin_scan_globals(const void *image, size_t size, cuda_cubin_globals *out)
{
    memset(out, 0, sizeof(*out));
    if (image == NULL)
        return -1;
    if ((uintptr_t)image % _Alignof(Elf64_Shdr) == 0)
        return scan_aligned(image, size, out);
    unsigned char *copy = malloc(size > 0 ? size : 1);
    if (copy == NULL)
        return -1;
    memcpy(copy, image, size);
    long found = scan_aligned(copy, size, out);
    free(copy);
    return found;
}
