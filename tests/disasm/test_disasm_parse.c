/*
 * test_disasm_parse.c: the SASS listing reader (src/disasm/disasm_parse.h).
 * Listings of both disassemblers as they print them (cuobjdump -sass on a
 * cubin and on an executable with several `code for sm_XX` blocks; nvdisasm
 * with its directives and labels), then the rules one at a time: predicates,
 * blanks collapsed, encoding-only lines, the 255-byte cut at a character
 * boundary, instructions with no function, a last line without its newline
 * or cut short, unknown lines counted, a callback that stops the walk, an
 * empty listing, a symbol too long to keep and bad arguments.
 *
 * Every listing is copied into a heap block of exactly its size, with no NUL
 * after it, so AddressSanitizer catches a read past the end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "disasm/disasm_parse.h"
#include "flare/flare.h"

#define RECORDS_MAX 32

typedef struct record {
    char symbol[64];
    uint64_t offset;
    char text[DISASM_TEXT_MAX + 1];
} record;

typedef struct collected {
    record records[RECORDS_MAX];
    size_t count;
    size_t stop_after; /* 0: never stop */
} collected;

static int collect(const char *symbol, uint64_t offset, const char *text, void *user)
{
    collected *c = user;
    assert_true(c->count < RECORDS_MAX);
    assert_true(strlen(text) <= DISASM_TEXT_MAX);
    record *r = &c->records[c->count++];
    snprintf(r->symbol, sizeof(r->symbol), "%s", symbol);
    r->offset = offset;
    memcpy(r->text, text, strlen(text) + 1);
    return c->stop_after != 0 && c->count == c->stop_after ? 7 : 0;
}

/* Parses the first size bytes of listing from an exact-size copy. */
static int parse_sized(const char *listing, size_t size, collected *c, disasm_parse_stats *stats)
{
    char *copy = malloc(size > 0 ? size : 1);
    assert_non_null(copy);
    memcpy(copy, listing, size);
    int result = disasm_parse(copy, size, collect, c, stats);
    free(copy);
    return result;
}

static int parse(const char *listing, collected *c, disasm_parse_stats *stats)
{
    return parse_sized(listing, strlen(listing), c, stats);
}

static void expect_record(const collected *c, size_t i, const char *symbol, uint64_t offset,
                          const char *text)
{
    assert_true(i < c->count);
    assert_string_equal(c->records[i].symbol, symbol);
    assert_int_equal(c->records[i].offset, offset);
    assert_string_equal(c->records[i].text, text);
}

static void expect_stats(const disasm_parse_stats *s, uint64_t functions, uint64_t instructions,
                         uint64_t skipped, uint64_t cut)
{
    assert_int_equal(s->functions, functions);
    assert_int_equal(s->instructions, instructions);
    assert_int_equal(s->lines_skipped, skipped);
    assert_int_equal(s->texts_cut, cut);
}

/* ---- whole listings ---- */

/* As in the brief, verbatim: cuobjdump -sass on a cubin. */
static const char cuobjdump_listing[] =
    "\tcode for sm_90\n"
    "\t\tFunction : _Z9hot_chainPKjPjii\n"
    "\t.headerflags\t@\"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90 "
    "EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)\"\n"
    "        /*0000*/                   LDC R1, c[0x0][0x28] ;                       /* "
    "0x00000a00ff017b82 */\n"
    "                                                                                 /* "
    "0x000fe20000000800 */\n"
    "        /*0010*/                   S2R R0, SR_TID.X ;                           /* "
    "0x0000000000007919 */\n"
    "        /*00f0*/              @!P0 BRA 0x120 ;                                  /* 0x... */\n"
    "        /*0100*/                   LDG.E R5, desc[UR4][R2.64] ;                 /* 0x... */\n"
    "\t\t..........\n";

static void test_cuobjdump_cubin(void **state)
{
    (void)state;
    collected c = {0};
    disasm_parse_stats s;
    assert_int_equal(parse(cuobjdump_listing, &c, &s), 0);
    assert_int_equal(c.count, 4);
    expect_record(&c, 0, "_Z9hot_chainPKjPjii", 0x0, "LDC R1, c[0x0][0x28]");
    expect_record(&c, 1, "_Z9hot_chainPKjPjii", 0x10, "S2R R0, SR_TID.X");
    expect_record(&c, 2, "_Z9hot_chainPKjPjii", 0xf0, "@!P0 BRA 0x120");
    expect_record(&c, 3, "_Z9hot_chainPKjPjii", 0x100, "LDG.E R5, desc[UR4][R2.64]");
    expect_stats(&s, 1, 4, 0, 0);
}

/* cuobjdump -sass on an executable: banners, two blocks, two functions in
 * each, blank lines, a ';' with no blank before it, a PTX banner. */
static const char cuobjdump_executable[] =
    "\n"
    "Fatbin elf code:\n"
    "================\n"
    "arch = sm_80\n"
    "code version = [1,7]\n"
    "host = linux\n"
    "compile_size = 64bit\n"
    "\n"
    "\tcode for sm_80\n"
    "\t\tFunction : _Z4tailPf\n"
    "\t.headerflags\t@\"EF_CUDA_SM80 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM80)\"\n"
    "        /*0000*/                   MOV R1, c[0x0][0x28] ;  /* 0x00000a0000017a02 */\n"
    "                                                           /* 0x000fc40000000f00 */\n"
    "        /*0010*/                   EXIT;                   /* 0x000000000000794d */\n"
    "\t\t..........\n"
    "\n"
    "\n"
    "\t\tFunction : _Z4headPfi\n"
    "\t.headerflags\t@\"EF_CUDA_SM80 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM80)\"\n"
    "        /*0000*/               @P0 IADD3 R2, R2, 0x1, RZ ;  /* 0x0000000102020810 */\n"
    "        /*0010*/              @!PT LDS RZ, [RZ] ;          /* 0x00000000ff00798c */\n"
    "\t\t..........\n"
    "\n"
    "\n"
    "\n"
    "Fatbin elf code:\n"
    "================\n"
    "arch = sm_90\n"
    "code version = [1,7]\n"
    "host = linux\n"
    "compile_size = 64bit\n"
    "\n"
    "\tcode for sm_90\n"
    "\t\tFunction : _Z4tailPf\n"
    "        /*0000*/                   LDC R1, c[0x0][0x28] ;  /* 0x00000a00ff017b82 */\n"
    "\t\t..........\n"
    "\n"
    "Fatbin ptx code:\n"
    "================\n"
    "arch = sm_90\n"
    "code version = [8,1]\n"
    "host = linux\n"
    "compile_size = 64bit\n"
    "compressed\n";

static void test_cuobjdump_executable(void **state)
{
    (void)state;
    collected c = {0};
    disasm_parse_stats s;
    assert_int_equal(parse(cuobjdump_executable, &c, &s), 0);
    assert_int_equal(c.count, 5);
    expect_record(&c, 0, "_Z4tailPf", 0x0, "MOV R1, c[0x0][0x28]");
    expect_record(&c, 1, "_Z4tailPf", 0x10, "EXIT");
    expect_record(&c, 2, "_Z4headPfi", 0x0, "@P0 IADD3 R2, R2, 0x1, RZ");
    expect_record(&c, 3, "_Z4headPfi", 0x10, "@!PT LDS RZ, [RZ]");
    expect_record(&c, 4, "_Z4tailPf", 0x0, "LDC R1, c[0x0][0x28]");
    expect_stats(&s, 3, 5, 0, 0);
}

/* As in the brief, verbatim: nvdisasm's default output. */
static const char nvdisasm_listing[] =
    "\t.section\t.text._Z9hot_chainPKjPjii,\"ax\",@progbits\n"
    "\t...\n"
    ".text._Z9hot_chainPKjPjii:\n"
    "        /*0000*/                   LDC R1, c[0x0][0x28] ;\n"
    "        /*0010*/                   S2R R0, SR_TID.X ;\n"
    ".L_x_1:\n"
    "        /*0100*/                   LDG.E R5, desc[UR4][R2.64] ;\n";

static void test_nvdisasm(void **state)
{
    (void)state;
    collected c = {0};
    disasm_parse_stats s;
    assert_int_equal(parse(nvdisasm_listing, &c, &s), 0);
    assert_int_equal(c.count, 3);
    expect_record(&c, 0, "_Z9hot_chainPKjPjii", 0x0, "LDC R1, c[0x0][0x28]");
    expect_record(&c, 1, "_Z9hot_chainPKjPjii", 0x10, "S2R R0, SR_TID.X");
    expect_record(&c, 2, "_Z9hot_chainPKjPjii", 0x100, "LDG.E R5, desc[UR4][R2.64]");
    expect_stats(&s, 1, 3, 0, 0); /* the .section line and the label name one function */
}

/* nvdisasm on a cubin of two kernels, with its directives, comments, the
 * symbol's own label, back-quoted branch targets and a data section between
 * (which ends the function before it). */
static const char nvdisasm_two_functions[] =
    "\t.headerflags\t@\"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90\"\n"
    "\t.elftype\t@\"ET_EXEC\"\n"
    "\n"
    "//--------------------- .text._Z4headPfi          --------------------------\n"
    "\t.section\t.text._Z4headPfi,\"ax\",@progbits\n"
    "\t.sectioninfo\t@\"SHI_REGISTERS=12\"\n"
    "\t.align\t128\n"
    "        .global         _Z4headPfi\n"
    "        .type           _Z4headPfi,@function\n"
    "        .size           _Z4headPfi,(.L_x_3 - _Z4headPfi)\n"
    "        .other          _Z4headPfi,@\"STO_CUDA_ENTRY STV_DEFAULT\"\n"
    "_Z4headPfi:\n"
    ".text._Z4headPfi:\n"
    "        /*0000*/                   LDC R1, c[0x0][0x28] ;\n"
    "        /*0010*/               @P0 BRA `(.L_x_1) ;\n"
    ".L_x_1:\n"
    "        /*0020*/                   EXIT ;\n"
    ".L_x_3:\n"
    "\t.section\t.nv.shared._Z4headPfi,\"aw\",@nobits\n"
    "        /*0030*/                   NOP ;\n"
    "//--------------------- .text._Z4tailPf           --------------------------\n"
    "\t.section\t.text._Z4tailPf,\"ax\",@progbits\n"
    ".text._Z4tailPf:\n"
    "        /*0000*/                   RET.REL.NODEC R20 0x0 ;\n";

static void test_nvdisasm_two_functions(void **state)
{
    (void)state;
    collected c = {0};
    disasm_parse_stats s;
    assert_int_equal(parse(nvdisasm_two_functions, &c, &s), 0);
    assert_int_equal(c.count, 4);
    expect_record(&c, 0, "_Z4headPfi", 0x0, "LDC R1, c[0x0][0x28]");
    expect_record(&c, 1, "_Z4headPfi", 0x10, "@P0 BRA `(.L_x_1)");
    expect_record(&c, 2, "_Z4headPfi", 0x20, "EXIT");
    expect_record(&c, 3, "_Z4tailPf", 0x0, "RET.REL.NODEC R20 0x0");
    expect_stats(&s, 2, 4, 1, 0); /* the NOP under the data section */
}

/* ---- the rules ---- */

static void test_blanks_collapsed_and_crlf(void **state)
{
    (void)state;
    collected c = {0};
    disasm_parse_stats s;
    const char *listing = "\t\tFunction :   _Z1fv   \r\n"
                          "  /*0A0*/ \t IADD3   R2,  P0,\tR0, 0x4 ,  RZ \t ;   /* 0x1 */\r\n"
                          "\t/*FFFFFFFFFFFFFFF0*/ NOP ;\r\n";
    assert_int_equal(parse(listing, &c, &s), 0);
    expect_record(&c, 0, "_Z1fv", 0xa0, "IADD3 R2, P0, R0, 0x4 , RZ");
    expect_record(&c, 1, "_Z1fv", 0xfffffffffffffff0ull, "NOP");
    expect_stats(&s, 1, 2, 0, 0);
}

/* Lines that hold neither a header nor an instruction: counted. An offset
 * of 17 digits, an empty text and an offset line with no ';' are among
 * them; an encoding-only comment is not. */
static void test_unknown_lines_counted(void **state)
{
    (void)state;
    collected c = {0};
    disasm_parse_stats s;
    const char *listing = "\t\tFunction : _Z1fv\n"
                          "something the parser has never seen\n"
                          "        /*00000000000000010*/ NOP ;\n"
                          "        /*0010*/ ;\n"
                          "        /*0020*/ NOP\n"
                          "        /*0030*/ /* 0x000fe20000000800 */\n"
                          "              /* 0x000fe20000000800 */\n"
                          "Function _Z1gv\n"
                          "        /*0040*/ EXIT ;\n";
    assert_int_equal(parse(listing, &c, &s), 0);
    assert_int_equal(c.count, 1);
    expect_record(&c, 0, "_Z1fv", 0x40, "EXIT");
    expect_stats(&s, 1, 1, 6, 0);
}

static void test_text_cut_at_255_bytes(void **state)
{
    (void)state;
    char listing[1024], operand[400];
    memset(operand, 'R', 300);
    operand[300] = '\0';
    snprintf(listing, sizeof(listing), "Function : _Z1fv\n/*0000*/ MOV %s ;\n", operand);
    collected c = {0};
    disasm_parse_stats s;
    assert_int_equal(parse(listing, &c, &s), 0);
    assert_int_equal(c.count, 1);
    assert_int_equal(strlen(c.records[0].text), 255);
    assert_memory_equal(c.records[0].text, "MOV RRR", 7);
    expect_stats(&s, 1, 1, 0, 1);

    /* Exactly 255 bytes: not cut, even with blanks after them. */
    memset(operand, 'R', 251);
    operand[251] = '\0';
    snprintf(listing, sizeof(listing), "Function : _Z1fv\n/*0000*/ MOV %s      ;\n", operand);
    memset(&c, 0, sizeof(c));
    assert_int_equal(parse(listing, &c, &s), 0);
    assert_int_equal(strlen(c.records[0].text), 255);
    expect_stats(&s, 1, 1, 0, 0);
}

/* A cut that would split a UTF-8 character goes back to its start. */
static void test_text_cut_at_a_character_boundary(void **state)
{
    (void)state;
    char listing[1024], operand[400];
    /* "MOV " + 250 'A' = 254 bytes, then a 2-byte character over 255. */
    memset(operand, 'A', 250);
    snprintf(operand + 250, sizeof(operand) - 250,
             "\xc3\xa9"
             "BBBB");
    snprintf(listing, sizeof(listing), "Function : _Z1fv\n/*0000*/ MOV %s ;\n", operand);
    collected c = {0};
    disasm_parse_stats s;
    assert_int_equal(parse(listing, &c, &s), 0);
    assert_int_equal(strlen(c.records[0].text), 254);
    assert_int_equal(c.records[0].text[253], 'A');
    assert_int_equal(s.texts_cut, 1);

    /* "MOV " + 249 'A' = 253 bytes, then a 3-byte character over 255. */
    memset(operand, 'A', 249);
    snprintf(operand + 249, sizeof(operand) - 249,
             "\xe2\x82\xac"
             "CCCC");
    snprintf(listing, sizeof(listing), "Function : _Z1fv\n/*0000*/ MOV %s ;\n", operand);
    memset(&c, 0, sizeof(c));
    assert_int_equal(parse(listing, &c, &s), 0);
    assert_int_equal(strlen(c.records[0].text), 253);

    /* A 2-byte character that fits whole at 254-255 is kept. */
    memset(operand, 'A', 249);
    snprintf(operand + 249, sizeof(operand) - 249,
             "\xc3\xa9"
             "DDDD");
    snprintf(listing, sizeof(listing), "Function : _Z1fv\n/*0000*/ MOV %s ;\n", operand);
    memset(&c, 0, sizeof(c));
    assert_int_equal(parse(listing, &c, &s), 0);
    assert_int_equal(strlen(c.records[0].text), 255);
    assert_memory_equal(c.records[0].text + 253, "\xc3\xa9", 2);
}

static void test_instructions_before_a_header(void **state)
{
    (void)state;
    collected c = {0};
    disasm_parse_stats s;
    const char *listing = "        /*0000*/ NOP ;\n"
                          "        /*0010*/ NOP ;\n"
                          "\tcode for sm_90\n"
                          "\t\tFunction : _Z1fv\n"
                          "        /*0000*/ EXIT ;\n"
                          "\tcode for sm_80\n"
                          "        /*0000*/ NOP ;\n";
    assert_int_equal(parse(listing, &c, &s), 0);
    assert_int_equal(c.count, 1);
    expect_record(&c, 0, "_Z1fv", 0x0, "EXIT");
    expect_stats(&s, 1, 1, 3, 0); /* a new `code for` block has no function yet */
}

/* The last line with no newline is read; one cut short before its ';' is
 * skipped and counted. */
static void test_truncated_last_line(void **state)
{
    (void)state;
    collected c = {0};
    disasm_parse_stats s;
    const char *listing = "Function : _Z1fv\n"
                          "        /*0000*/ LDG.E R5, desc[UR4][R2.64] ;\n"
                          "        /*0010*/ EXIT ;";
    assert_int_equal(parse(listing, &c, &s), 0);
    expect_record(&c, 1, "_Z1fv", 0x10, "EXIT");
    expect_stats(&s, 1, 2, 0, 0);

    memset(&c, 0, sizeof(c));
    size_t cut = strstr(listing, "desc[") - listing; /* ends inside the first instruction */
    assert_int_equal(parse_sized(listing, cut, &c, &s), 0);
    expect_stats(&s, 1, 0, 1, 0);

    memset(&c, 0, sizeof(c));
    assert_int_equal(parse_sized(listing, 12, &c, &s), 0); /* "Function : _" */
    expect_stats(&s, 1, 0, 0, 0);
}

static void test_callback_stops(void **state)
{
    (void)state;
    collected c = {.stop_after = 2};
    disasm_parse_stats s;
    assert_int_equal(parse(cuobjdump_listing, &c, &s), 7);
    assert_int_equal(c.count, 2);
    expect_record(&c, 1, "_Z9hot_chainPKjPjii", 0x10, "S2R R0, SR_TID.X");
    expect_stats(&s, 1, 2, 0, 0);
}

static void test_empty_listing(void **state)
{
    (void)state;
    collected c = {0};
    disasm_parse_stats s;
    memset(&s, 0xff, sizeof(s));
    assert_int_equal(disasm_parse(NULL, 0, collect, &c, &s), 0);
    expect_stats(&s, 0, 0, 0, 0);
    assert_int_equal(parse("", &c, &s), 0);
    assert_int_equal(parse("\n\n  \t\n\r\n", &c, &s), 0);
    expect_stats(&s, 0, 0, 0, 0);
    assert_int_equal(c.count, 0);
    assert_int_equal(disasm_parse("x", 1, collect, &c, NULL), 0); /* stats optional */
}

/* A symbol longer than DISASM_SYMBOL_MAX cannot be kept: its instructions
 * are skipped, not put under another function. */
static void test_symbol_too_long(void **state)
{
    (void)state;
    size_t name_length = DISASM_SYMBOL_MAX + 1;
    char *listing = malloc(name_length + 256);
    assert_non_null(listing);
    int n = sprintf(listing, "Function : _Z1fv\n/*0000*/ NOP ;\nFunction : ");
    memset(listing + n, 'x', name_length);
    sprintf(listing + n + name_length, "\n/*0000*/ EXIT ;\n");
    collected c = {0};
    disasm_parse_stats s;
    assert_int_equal(parse(listing, &c, &s), 0);
    assert_int_equal(c.count, 1);
    expect_record(&c, 0, "_Z1fv", 0x0, "NOP");
    expect_stats(&s, 1, 1, 2, 0);

    /* DISASM_SYMBOL_MAX bytes exactly is kept. */
    memset(listing + n, 'y', DISASM_SYMBOL_MAX);
    sprintf(listing + n + DISASM_SYMBOL_MAX, "\n/*0000*/ EXIT ;\n");
    memset(&c, 0, sizeof(c));
    assert_int_equal(parse(listing, &c, &s), 0);
    expect_stats(&s, 2, 2, 0, 0);
    free(listing);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    disasm_parse_stats s;
    assert_int_equal(disasm_parse("x", 1, NULL, NULL, &s), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(disasm_parse(NULL, 5, collect, NULL, &s), FLARE_ERR_INVALID_ARGUMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuobjdump_cubin),
        cmocka_unit_test(test_cuobjdump_executable),
        cmocka_unit_test(test_nvdisasm),
        cmocka_unit_test(test_nvdisasm_two_functions),
        cmocka_unit_test(test_blanks_collapsed_and_crlf),
        cmocka_unit_test(test_unknown_lines_counted),
        cmocka_unit_test(test_text_cut_at_255_bytes),
        cmocka_unit_test(test_text_cut_at_a_character_boundary),
        cmocka_unit_test(test_instructions_before_a_header),
        cmocka_unit_test(test_truncated_last_line),
        cmocka_unit_test(test_callback_stops),
        cmocka_unit_test(test_empty_listing),
        cmocka_unit_test(test_symbol_too_long),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
