/*
 * test_tls_budget.c: libflare.so's thread-local storage stays small.
 *
 * libflare uses initial-exec TLS on its hot paths, which marks the whole
 * library STATIC_TLS: when it is dlopen'ed (CUDA_INJECTION64_PATH, Python
 * ctypes) its entire TLS block must fit in glibc's static TLS surplus, a few
 * hundred bytes to spare. One large _Thread_local array made every dlopen
 * fail with "cannot allocate memory in static TLS block". This reads the
 * PT_TLS segment of the built library and holds it to a budget, and dlopens
 * the library for real.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>

/* Bytes of TLS the library may declare in all. */
#define TLS_BUDGET_BYTES 1024

static void library_path(char *buffer, size_t size)
{
    const char *directory = getenv("FLARE_TEST_LIB_DIR");
    assert_non_null(directory);
    snprintf(buffer, size, "%s/libflare.so", directory);
}

static void test_tls_segment_within_budget(void **state)
{
    (void)state;
    char path[4096];
    library_path(path, sizeof path);
    FILE *file = fopen(path, "rb");
    assert_non_null(file);
    Elf64_Ehdr header;
    assert_int_equal(fread(&header, sizeof header, 1, file), 1);
    uint64_t tls_bytes = 0;
    for (int index = 0; index < header.e_phnum; index++) {
        Elf64_Phdr program;
        assert_int_equal(
            fseek(file, (long)(header.e_phoff + (uint64_t)index * header.e_phentsize), SEEK_SET),
            0);
        assert_int_equal(fread(&program, sizeof program, 1, file), 1);
        if (program.p_type == PT_TLS) {
            tls_bytes = program.p_memsz;
        }
    }
    fclose(file);
    printf("libflare.so TLS: %llu bytes (budget %d)\n", (unsigned long long)tls_bytes,
           TLS_BUDGET_BYTES);
    assert_true(tls_bytes <= TLS_BUDGET_BYTES);
}

static void test_library_dlopens(void **state)
{
    (void)state;
    char path[4096];
    library_path(path, sizeof path);
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
    }
    assert_non_null(handle);
    dlclose(handle);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tls_segment_within_budget),
        cmocka_unit_test(test_library_dlopens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
