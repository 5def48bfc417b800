/*
 * test_cuda_cubin.c: reading a cubin's __device__ variables (the names and
 * sizes kernel replay restores). A real sm_90 cubin made by nvcc from
 * fixtures/cubin_globals.cu gives exactly its four variables (not its
 * __constant__ array); anything else, truncated or corrupted, is refused or
 * read partially, never read out of bounds (the suite runs under ASan).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_cubin.h"

static unsigned char *fixture;
static size_t fixture_size;

static int load_fixture(void **state)
{
    (void)state;
    const char *path = FLARE_TEST_FIXTURES "/cubin_globals_sm90.cubin";
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        fprintf(stderr, "cannot open %s\n", path);
        return -1;
    }
    fseek(file, 0, SEEK_END);
    long size = ftell(file);
    fseek(file, 0, SEEK_SET);
    fixture = malloc((size_t)size);
    fixture_size = fread(fixture, 1, (size_t)size, file);
    fclose(file);
    return fixture_size == (size_t)size ? 0 : -1;
}

static int free_fixture(void **state)
{
    (void)state;
    free(fixture);
    return 0;
}

/* The i-th name of a scan. */
static const char *name_at(const cuda_cubin_globals *globals, size_t index)
{
    const char *name = globals->names;
    for (size_t i = 0; i < index; i++)
        name += strlen(name) + 1;
    return name;
}

static void test_real_cubin_variables(void **state)
{
    (void)state;
    cuda_cubin_globals globals;
    assert_int_equal(cuda_cubin_scan_globals(fixture, fixture_size, &globals), 4);
    assert_int_equal(globals.count, 4);
    /* Symbol-table order; the __constant__ array and the undefined
     * reserved-shared-memory symbol are not variables kernels write. */
    const char *expected[] = {"launch_count", "table", "matrix", "internal_state"};
    const size_t sizes[] = {8, 4000, 128, 8};
    for (size_t i = 0; i < 4; i++) {
        assert_string_equal(name_at(&globals, i), expected[i]);
        assert_int_equal(globals.sizes[i], sizes[i]);
    }
    cuda_cubin_globals_free(&globals);
    assert_null(globals.names);
    assert_int_equal(globals.count, 0);
}

/* A misaligned copy reads the same (the scanner copies it to aligned
 * memory rather than read ELF structures from odd addresses). */
static void test_misaligned_image(void **state)
{
    (void)state;
    unsigned char *buffer = malloc(fixture_size + 1);
    memcpy(buffer + 1, fixture, fixture_size);
    cuda_cubin_globals globals;
    assert_int_equal(cuda_cubin_scan_globals(buffer + 1, fixture_size, &globals), 4);
    assert_string_equal(name_at(&globals, 1), "table");
    cuda_cubin_globals_free(&globals);
    free(buffer);
}

static void test_not_an_elf(void **state)
{
    (void)state;
    cuda_cubin_globals globals;
    assert_int_equal(cuda_cubin_scan_globals(NULL, 100, &globals), -1);
    assert_int_equal(cuda_cubin_scan_globals(fixture, 10, &globals), -1);
    unsigned char *copy = malloc(fixture_size);
    memcpy(copy, fixture, fixture_size);
    copy[1] = 'X'; /* magic */
    assert_int_equal(cuda_cubin_scan_globals(copy, fixture_size, &globals), -1);
    memcpy(copy, fixture, fixture_size);
    copy[EI_CLASS] = ELFCLASS32;
    assert_int_equal(cuda_cubin_scan_globals(copy, fixture_size, &globals), -1);
    /* PTX text, which a fatbin may also carry. */
    const char ptx[] = "//\n.version 8.0\n.target sm_90\n.global .u64 launch_count;\n";
    assert_int_equal(cuda_cubin_scan_globals(ptx, sizeof(ptx), &globals), -1);
    assert_string_equal(globals.why, "not a 64-bit ELF image");
    free(copy);
    assert_null(globals.names);
}

/* Section headers at an offset no Elf64_Shdr may be read from in place
 * (a cuBLAS cubin on the H200 had them at 22825 of 23337 bytes, session
 * 22): read from a copy, the same variables come back. */
static void test_section_headers_at_an_odd_offset(void **state)
{
    (void)state;
    unsigned char *copy = calloc(1, fixture_size + 8);
    memcpy(copy, fixture, fixture_size);
    Elf64_Ehdr *header = (Elf64_Ehdr *)(void *)copy;
    size_t table_bytes = (size_t)header->e_shnum * sizeof(Elf64_Shdr);
    assert_true(header->e_shoff + table_bytes <= fixture_size);
    memmove(copy + header->e_shoff + 1, copy + header->e_shoff, table_bytes);
    header->e_shoff += 1;
    cuda_cubin_globals globals;
    assert_int_equal(cuda_cubin_scan_globals(copy, fixture_size + 1, &globals), 4);
    assert_string_equal(name_at(&globals, 1), "table");
    cuda_cubin_globals_free(&globals);
    free(copy);
}

/* ELF's extended section numbering, which cubins with more sections than
 * the header's 16-bit fields hold use (cuBLAS's largest: a PyTorch span
 * on the H200 was declined for one, session 22): the count and the name
 * table's index move to section 0. The same variables come back. */
static void test_extended_section_numbering(void **state)
{
    (void)state;
    unsigned char *copy = malloc(fixture_size);
    memcpy(copy, fixture, fixture_size);
    Elf64_Ehdr *header = (Elf64_Ehdr *)(void *)copy;
    Elf64_Shdr *sections = (Elf64_Shdr *)(void *)(copy + header->e_shoff);
    sections[0].sh_size = header->e_shnum;
    sections[0].sh_link = header->e_shstrndx;
    header->e_shnum = 0;
    header->e_shstrndx = SHN_XINDEX;
    cuda_cubin_globals globals;
    assert_int_equal(cuda_cubin_scan_globals(copy, fixture_size, &globals), 4);
    assert_string_equal(name_at(&globals, 1), "table");
    cuda_cubin_globals_free(&globals);
    /* A count in section 0 past the image is refused, saying so. */
    sections[0].sh_size = fixture_size;
    assert_int_equal(cuda_cubin_scan_globals(copy, fixture_size, &globals), -1);
    assert_string_equal(globals.why, "section count or name table out of the image");
    free(copy);
}

/* Every truncation: refused or fewer variables, never a read past the end. */
static void test_truncated_images(void **state)
{
    (void)state;
    for (size_t size = 0; size < fixture_size; size++) {
        unsigned char *copy = malloc(size > 0 ? size : 1);
        memcpy(copy, fixture, size);
        cuda_cubin_globals globals;
        long found = cuda_cubin_scan_globals(copy, size, &globals);
        assert_true(found >= -1 && found <= 4);
        cuda_cubin_globals_free(&globals);
        free(copy);
    }
}

/* Random byte damage (a fixed seed): any answer, but no crash and no read
 * outside the buffer; the names returned are terminated strings. */
static void test_corrupted_images(void **state)
{
    (void)state;
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    unsigned char *copy = malloc(fixture_size);
    for (int round = 0; round < 3000; round++) {
        memcpy(copy, fixture, fixture_size);
        int damage = 1 + round % 8;
        for (int i = 0; i < damage; i++) {
            seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
            /* Aim most damage at the headers, where offsets live. */
            size_t at = (round % 2 == 0) ? (size_t)(seed % 64) : (size_t)(seed % fixture_size);
            copy[at] = (unsigned char)(seed >> 32);
        }
        cuda_cubin_globals globals;
        long found = cuda_cubin_scan_globals(copy, fixture_size, &globals);
        assert_true(found >= -1);
        if (found > 0) {
            size_t total = 0;
            for (size_t k = 0; k < globals.count; k++)
                total += strlen(name_at(&globals, k)) + 1;
            assert_true(total > 0);
        }
        cuda_cubin_globals_free(&globals);
    }
    free(copy);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_cubin_variables),
        cmocka_unit_test(test_misaligned_image),
        cmocka_unit_test(test_not_an_elf),
        cmocka_unit_test(test_extended_section_numbering),
        cmocka_unit_test(test_section_headers_at_an_odd_offset),
        cmocka_unit_test(test_truncated_images),
        cmocka_unit_test(test_corrupted_images),
    };
    return cmocka_run_group_tests(tests, load_fixture, free_fixture);
}
