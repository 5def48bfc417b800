/*
 * disasm_parse.h: reads the SASS listing of the CUDA toolkit's disassemblers
 * (`cuobjdump -sass` and `nvdisasm`'s default output) into instructions:
 * the function's symbol, the instruction's byte offset and its text. Where a
 * kernel was built without line information, this text is what flare shows
 * for a PC sample or a SASS metric attributed to (function, offset).
 *
 * The grammar is read line by line. A function header is cuobjdump's
 * `Function : SYMBOL`, or nvdisasm's `.section .text.SYMBOL,...` and
 * `.text.SYMBOL:`. An instruction line opens (after blanks) with its byte
 * offset in hex inside a C comment, then holds its text, then ';'; anything
 * after the ';' (cuobjdump's encoding comment) is ignored.
 * Lines that are known not to hold either (blank lines, directives, labels,
 * comments such as the encoding-only lines, cuobjdump's banners) are passed
 * over silently; any other line is skipped and counted, so a caller can tell
 * a listing whose format drifted from one with nothing in it.
 *
 * Must never: read past the size it is given, allocate, or attribute an
 * instruction to a function it does not know (an instruction before any
 * header, or under a header whose symbol does not fit, is skipped and
 * counted). It does no I/O and takes no locks.
 */
#ifndef FLARE_DISASM_DISASM_PARSE_H
#define FLARE_DISASM_DISASM_PARSE_H

#include <stddef.h>
#include <stdint.h>

/* Longest instruction text handed to the callback, in bytes (without the
 * NUL); a longer one is cut at a UTF-8 character boundary and counted. */
#define DISASM_TEXT_MAX 255
/* Longest symbol kept, in bytes (without the NUL). Mangled C++ template
 * names run to a few kilobytes; a longer one cannot be cut without
 * misattributing, so its function's instructions are skipped and counted. */
#define DISASM_SYMBOL_MAX 8191

/* Called once per instruction, in listing order. symbol is the function's
 * name as the listing spells it (mangled); text is the predicate, opcode and
 * operands, trimmed, runs of blanks collapsed to one space, without the ';'.
 * Both are NUL-terminated and valid only during the call. Returning non-zero
 * stops the walk. */
typedef int (*disasm_instruction_callback)(const char *symbol, uint64_t offset, const char *text,
                                           void *user);

typedef struct disasm_parse_stats {
    uint64_t functions;     /* function headers that started a function */
    uint64_t instructions;  /* instructions handed to the callback */
    uint64_t lines_skipped; /* unknown lines and instructions with no function */
    uint64_t texts_cut;     /* texts cut to DISASM_TEXT_MAX bytes */
} disasm_parse_stats;

/* Walks size bytes of listing (it need not be NUL-terminated; a last line
 * without a newline is read like any other) and calls callback once per
 * instruction. stats, when not NULL, is zeroed first and counts what was
 * seen, up to the stop when the callback stops the walk. Returns 0 when
 * the whole listing was read, the callback's non-zero value as is when it
 * stopped the walk, or FLARE_ERR_INVALID_ARGUMENT for a NULL callback or a
 * NULL listing with a non-zero size. An empty listing calls nothing and
 * returns 0. Can't fail otherwise. */
int disasm_parse(const char *listing, size_t size, disasm_instruction_callback callback, void *user,
                 disasm_parse_stats *stats);

#endif /* FLARE_DISASM_DISASM_PARSE_H */
