/*
 * cuda_cubin.c: the __device__ variables of a cubin (cuda_cubin.h).
 *
 * Every offset and size read from the image is checked against the image
 * before it is followed; an image that is not 8-byte aligned is copied
 * first, so no ELF structure is read from a misaligned address.
 */
#include "backend/cuda/cuda_cubin.h"

#include <elf.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The most sections an image may declare (cuBLAS's largest cubins hold
 * tens of thousands, past the 16-bit header fields). */
#define CUBIN_SECTIONS_MAX (1u << 22)

void cuda_cubin_globals_free(cuda_cubin_globals *globals)
{
    if (globals == NULL)
        return;
    free(globals->names);
    free(globals->sizes);
    memset(globals, 0, sizeof(*globals));
}

static long refuse(cuda_cubin_globals *out, const char *why)
{
    cuda_cubin_globals_free(out);
    snprintf(out->why, sizeof(out->why), "%s", why);
    return -1;
}

/* A section header's data lies inside the image. */
static int inside(const Elf64_Shdr *section, size_t size)
{
    return section->sh_offset <= size && section->sh_size <= size - section->sh_offset;
}

/* The section index of symbol k of table (in a table of symbol_count), read
 * through its SHT_SYMTAB_SHNDX section when the symbol says SHN_XINDEX;
 * SHN_UNDEF where that cannot be read. */
static size_t symbol_section(const Elf64_Sym *symbol, size_t k, const uint32_t *extended,
                             size_t extended_count)
{
    if (symbol->st_shndx >= SHN_LORESERVE && symbol->st_shndx != SHN_XINDEX)
        return SHN_UNDEF; /* SHN_ABS, SHN_COMMON...: no section */
    if (symbol->st_shndx != SHN_XINDEX)
        return symbol->st_shndx;
    return extended != NULL && k < extended_count ? extended[k] : SHN_UNDEF;
}

typedef struct image_view {
    const unsigned char *image;
    size_t size;
    const Elf64_Shdr *sections;
    size_t section_count;
    const unsigned char *is_global;
} image_view;

/* bytes of the image from offset, where an array of elements aligned to
 * align can be read: in place, or copied into *owned (the caller frees it;
 * cubins place tables at any offset: one of cuBLAS's had its section
 * headers at an odd one). NULL when out of memory. */
static const void *readable(const unsigned char *image, size_t offset, size_t bytes, size_t align,
                            void **owned)
{
    *owned = NULL;
    if ((uintptr_t)(image + offset) % align == 0)
        return image + offset;
    *owned = malloc(bytes > 0 ? bytes : 1);
    if (*owned != NULL)
        memcpy(*owned, image + offset, bytes);
    return *owned;
}

/* The SHT_SYMTAB_SHNDX entries of symbol table index table, or NULL (*owned
 * as readable's). */
static const uint32_t *extended_indexes(const image_view *view, size_t table, size_t *count,
                                        void **owned)
{
    *owned = NULL;
    for (size_t s = 0; s < view->section_count; s++) {
        const Elf64_Shdr *section = &view->sections[s];
        if (section->sh_type == SHT_SYMTAB_SHNDX && section->sh_link == table &&
            inside(section, view->size)) {
            *count = section->sh_size / sizeof(uint32_t);
            return readable(view->image, section->sh_offset, section->sh_size, _Alignof(uint32_t),
                            owned);
        }
    }
    *count = 0;
    return NULL;
}

/* One symbol table's global variables: counted (out NULL) or copied. 0,
 * or -1 when memory ran out. */
static int scan_table(const image_view *view, size_t table_index, cuda_cubin_globals *out,
                      long *found, size_t *name_bytes)
{
    const Elf64_Shdr *table = &view->sections[table_index];
    if (table->sh_type != SHT_SYMTAB || table->sh_entsize != sizeof(Elf64_Sym) ||
        !inside(table, view->size) || table->sh_link >= view->section_count)
        return 0;
    const Elf64_Shdr *strings = &view->sections[table->sh_link];
    if (!inside(strings, view->size))
        return 0;
    void *symbols_owned = NULL, *extended_owned = NULL;
    const Elf64_Sym *symbols = readable(view->image, table->sh_offset, table->sh_size,
                                        _Alignof(Elf64_Sym), &symbols_owned);
    size_t symbol_count = table->sh_size / sizeof(Elf64_Sym);
    size_t extended_count = 0;
    const uint32_t *extended =
        extended_indexes(view, table_index, &extended_count, &extended_owned);
    int failed = symbols == NULL || (extended_count > 0 && extended == NULL);
    if (failed)
        symbol_count = 0;
    for (size_t k = 0; k < symbol_count; k++) {
        const Elf64_Sym *symbol = &symbols[k];
        size_t section = symbol_section(symbol, k, extended, extended_count);
        if (ELF64_ST_TYPE(symbol->st_info) != STT_OBJECT || symbol->st_size == 0 ||
            section >= view->section_count || !view->is_global[section] ||
            symbol->st_name >= strings->sh_size)
            continue;
        const char *name = (const char *)view->image + strings->sh_offset + symbol->st_name;
        size_t length = strnlen(name, strings->sh_size - symbol->st_name);
        if (length == strings->sh_size - symbol->st_name || length == 0)
            continue; /* not terminated inside the table, or empty */
        if (out != NULL) {
            memcpy(out->names + *name_bytes, name, length + 1);
            out->sizes[*found] = symbol->st_size;
        }
        *name_bytes += length + 1;
        (*found)++;
    }
    free(symbols_owned);
    free(extended_owned);
    return failed ? -1 : 0;
}

/* The section count and the section-name table's index, with ELF's
 * extended numbering (both in section 0 when the header's fields cannot
 * hold them). 0, or -1. */
static int section_numbers(const Elf64_Ehdr *header, const Elf64_Shdr *sections, size_t size,
                           size_t *count, size_t *names_index)
{
    size_t room = (size - header->e_shoff) / sizeof(Elf64_Shdr);
    if (room == 0)
        return -1;
    *count = header->e_shnum != 0 ? header->e_shnum : (size_t)sections[0].sh_size;
    *names_index =
        header->e_shstrndx != SHN_XINDEX ? header->e_shstrndx : (size_t)sections[0].sh_link;
    return *count <= room && *count <= CUBIN_SECTIONS_MAX && *names_index < *count ? 0 : -1;
}

static long scan_sections(const unsigned char *image, size_t size, const Elf64_Ehdr *header,
                          const Elf64_Shdr *sections, cuda_cubin_globals *out);

static long scan_aligned(const unsigned char *image, size_t size, cuda_cubin_globals *out)
{
    if (size < sizeof(Elf64_Ehdr) || memcmp(image, ELFMAG, SELFMAG) != 0 ||
        image[EI_CLASS] != ELFCLASS64)
        return refuse(out, "not a 64-bit ELF image");
    const Elf64_Ehdr *header = (const Elf64_Ehdr *)(const void *)image;
    if (header->e_shoff == 0 || header->e_shentsize != sizeof(Elf64_Shdr) ||
        header->e_shoff > size) {
        char why[96];
        snprintf(why, sizeof(why), "section headers at %llu of a %zu-byte image, entries of %u",
                 (unsigned long long)header->e_shoff, size, (unsigned)header->e_shentsize);
        return refuse(out, why);
    }
    void *sections_owned = NULL;
    size_t header_bytes = (size - header->e_shoff) / sizeof(Elf64_Shdr) * sizeof(Elf64_Shdr);
    const Elf64_Shdr *sections =
        readable(image, header->e_shoff, header_bytes, _Alignof(Elf64_Shdr), &sections_owned);
    long found = scan_sections(image, size, header, sections, out);
    free(sections_owned);
    return found;
}

/* The rest of scan_aligned, over readable section headers. */
static long scan_sections(const unsigned char *image, size_t size, const Elf64_Ehdr *header,
                          const Elf64_Shdr *sections, cuda_cubin_globals *out)
{
    if (sections == NULL)
        return refuse(out, "out of memory");
    size_t section_count = 0, names_index = 0;
    if (section_numbers(header, sections, size, &section_count, &names_index) != 0)
        return refuse(out, "section count or name table out of the image");
    const Elf64_Shdr *names = &sections[names_index];
    if (!inside(names, size))
        return refuse(out, "section name table out of the image");
    const char *section_names = (const char *)image + names->sh_offset;
    unsigned char *is_global = calloc(section_count, 1);
    if (is_global == NULL)
        return refuse(out, "out of memory");
    int any = 0;
    for (size_t i = 0; i < section_count; i++) {
        size_t at = sections[i].sh_name;
        if (at < names->sh_size && names->sh_size - at >= 10 &&
            memcmp(section_names + at, ".nv.global", 10) == 0)
            is_global[i] = 1, any = 1;
    }
    image_view view = {image, size, sections, section_count, is_global};
    long found = 0;
    size_t name_bytes = 0;
    int failed = 0;
    /* Two passes over the symbol tables: count, then copy. */
    for (size_t s = 0; any && s < section_count; s++)
        failed |= scan_table(&view, s, NULL, &found, &name_bytes);
    if (failed) {
        free(is_global);
        return refuse(out, "out of memory");
    }
    if (found > 0) {
        out->names = malloc(name_bytes);
        out->sizes = calloc((size_t)found, sizeof(size_t));
        if (out->names == NULL || out->sizes == NULL) {
            free(is_global);
            return refuse(out, "out of memory");
        }
        out->count = (size_t)found;
        found = 0;
        name_bytes = 0;
        for (size_t s = 0; s < section_count; s++)
            failed |= scan_table(&view, s, out, &found, &name_bytes);
        if (failed) {
            free(is_global);
            return refuse(out, "out of memory");
        }
    }
    free(is_global);
    return found;
}

long cuda_cubin_scan_globals(const void *image, size_t size, cuda_cubin_globals *out)
{
    memset(out, 0, sizeof(*out));
    if (image == NULL)
        return refuse(out, "no image (a module loaded from PTX, or CUPTI gave none)");
    if ((uintptr_t)image % _Alignof(Elf64_Shdr) == 0)
        return scan_aligned(image, size, out);
    unsigned char *copy = malloc(size > 0 ? size : 1);
    if (copy == NULL)
        return refuse(out, "out of memory");
    memcpy(copy, image, size);
    long found = scan_aligned(copy, size, out);
    free(copy);
    return found;
}
