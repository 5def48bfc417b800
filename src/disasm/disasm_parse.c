/*
 * disasm_parse.c: the SASS listing reader (disasm_parse.h). One pass over
 * the bytes, one line at a time; the current function's symbol and the
 * instruction's text are copied into fixed buffers in the parser's state, so
 * the walk allocates nothing whatever the listing holds.
 *
 * Must never: read a byte at or past listing + size (every scan is bounded
 * by the line's end, and a line's end by the listing's), allocate, or hand
 * the callback an instruction under a function it cannot name.
 */
#include "disasm/disasm_parse.h"

#include <string.h>

#include "flare/flare.h"

typedef struct parser {
    disasm_instruction_callback callback;
    void *user;
    disasm_parse_stats stats;
    int have_function; /* symbol names the function the next instruction belongs to */
    char symbol[DISASM_SYMBOL_MAX + 1];
    char text[DISASM_TEXT_MAX + 1];
} parser;

/* ---- bounded scanning: [p, end) is always a part of one line ---- */

/* '\r' counts as a blank so a listing with CRLF line ends reads the same. */
static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static const char *skip_blanks(const char *p, const char *end)
{
    while (p < end && is_blank(*p))
        p++;
    return p;
}

static const char *skip_token(const char *p, const char *end)
{
    while (p < end && !is_blank(*p))
        p++;
    return p;
}

/* Whether [p, end) begins with the NUL-terminated word. */
static int starts_with(const char *p, const char *end, const char *word)
{
    size_t length = strlen(word);
    return (size_t)(end - p) >= length && memcmp(p, word, length) == 0;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Reads an offset comment, 1 to 16 hex digits between the comment's marks,
 * at p. Returns the first byte after it, or NULL when p holds none (an
 * encoding-only comment has a blank and "0x" where the digits would be). */
static const char *read_offset(const char *p, const char *end, uint64_t *offset)
{
    if (!starts_with(p, end, "/*"))
        return NULL;
    p += 2;
    uint64_t value = 0;
    int digits = 0;
    for (; p < end && hex_value(*p) >= 0; p++, digits++) {
        if (digits == 16)
            return NULL;
        value = value << 4 | (uint64_t)hex_value(*p);
    }
    if (digits == 0 || !starts_with(p, end, "*/"))
        return NULL;
    *offset = value;
    return p + 2;
}

/* ---- function headers ---- */

/* Makes [name, name + length) the current function. A header that names the
 * current function again (nvdisasm's `.text.X:` label under its `.section
 * .text.X` line) starts nothing new. A symbol that does not fit leaves no
 * current function, so its instructions are skipped and counted. */
static void enter_function(parser *state, const char *name, size_t length)
{
    if (length == 0 || length > DISASM_SYMBOL_MAX) {
        state->have_function = 0;
        state->stats.lines_skipped++;
        return;
    }
    if (state->have_function && strlen(state->symbol) == length &&
        memcmp(state->symbol, name, length) == 0)
        return;
    memcpy(state->symbol, name, length);
    state->symbol[length] = '\0';
    state->have_function = 1;
    state->stats.functions++;
}

/* cuobjdump: `Function : SYMBOL`. */
static int cuobjdump_header(parser *state, const char *p, const char *end)
{
    if (!starts_with(p, end, "Function"))
        return 0;
    p = skip_blanks(p + strlen("Function"), end);
    if (p == end || *p != ':')
        return 0;
    p = skip_blanks(p + 1, end);
    enter_function(state, p, (size_t)(skip_token(p, end) - p));
    return 1;
}

/* nvdisasm: `.section .text.SYMBOL,"ax",@progbits` or the label
 * `.text.SYMBOL:`. Another section ends the current function: no
 * instruction of it can follow. */
static int nvdisasm_header(parser *state, const char *p, const char *end)
{
    if (starts_with(p, end, ".section") && p + 8 < end && is_blank(p[8])) {
        const char *name = skip_blanks(p + 8, end);
        const char *name_end = name;
        while (name_end < end && *name_end != ',' && !is_blank(*name_end))
            name_end++;
        if (starts_with(name, name_end, ".text."))
            enter_function(state, name + 6, (size_t)(name_end - name - 6));
        else
            state->have_function = 0;
        return 1;
    }
    if (starts_with(p, end, ".text.") && end[-1] == ':' && skip_token(p, end) == end) {
        enter_function(state, p + 6, (size_t)(end - 1 - p - 6));
        return 1;
    }
    return 0;
}

/* ---- lines known to hold neither ---- */

/* cuobjdump's banners: `Fatbin elf code:`, its `=====` underline, `code
 * for sm_90` (which starts a new block of functions) and the `arch =
 * sm_90`-style fields under the banner. */
static int cuobjdump_banner(parser *state, const char *p, const char *end)
{
    if (starts_with(p, end, "Fatbin") || starts_with(p, end, "code for")) {
        state->have_function = 0;
        return 1;
    }
    if (*p == '=' || starts_with(p, end, "compressed"))
        return 1;
    /* A field: words of letters, digits and '_', then '='. */
    for (; p < end && *p != '='; p++) {
        if (!is_blank(*p) && *p != '_' && !(*p >= 'a' && *p <= 'z') && !(*p >= 'A' && *p <= 'Z') &&
            !(*p >= '0' && *p <= '9'))
            return 0;
    }
    return p < end;
}

/* Directives and cuobjdump's `......` closer (a '.'), whole-line comments
 * (the encoding-only lines; a line that opens a comment and goes on past
 * it, such as an offset of 17 digits, is not one) and labels such as
 * `.L_x_1:` or `SYMBOL:`. */
static int known_other(const char *p, const char *end)
{
    if (*p == '.' || starts_with(p, end, "//"))
        return 1;
    if (starts_with(p, end, "/*"))
        return end - p >= 4 && end[-2] == '*' && end[-1] == '/';
    return end[-1] == ':' && skip_token(p, end) == end;
}

/* ---- instructions ---- */

/* Copies [p, end) into text trimmed, each run of blanks made one space, at
 * most DISASM_TEXT_MAX bytes; a cut goes back to the start of a UTF-8
 * character it would split. Returns 1 when it cut. */
static int copy_text(char *text, const char *p, const char *end)
{
    size_t n = 0;
    int space = 0;
    for (; p < end; p++) {
        if (is_blank(*p)) {
            space = n > 0;
            continue;
        }
        if (n + (size_t)space + 1 > DISASM_TEXT_MAX)
            break;
        if (space)
            text[n++] = ' ';
        space = 0;
        text[n++] = *p;
    }
    int cut = p < end;
    if (cut && ((unsigned char)*p & 0xC0) == 0x80) {
        while (n > 0 && ((unsigned char)text[n - 1] & 0xC0) == 0x80)
            n--;
        if (n > 0 && ((unsigned char)text[n - 1] & 0xC0) == 0xC0)
            n--;
        while (n > 0 && text[n - 1] == ' ')
            n--;
    }
    text[n] = '\0';
    return cut;
}

/* [p, end) follows the offset comment. Returns the callback's value. */
static int instruction(parser *state, uint64_t offset, const char *p, const char *end)
{
    const char *semicolon = memchr(p, ';', (size_t)(end - p));
    if (semicolon == NULL || !state->have_function) {
        state->stats.lines_skipped++;
        return 0;
    }
    int cut = copy_text(state->text, p, semicolon);
    if (state->text[0] == '\0') {
        state->stats.lines_skipped++;
        return 0;
    }
    state->stats.texts_cut += (uint64_t)cut;
    state->stats.instructions++;
    return state->callback(state->symbol, offset, state->text, state->user);
}

/* One line, [p, end) without its '\n'. Returns the callback's value. */
static int parse_line(parser *state, const char *p, const char *end)
{
    p = skip_blanks(p, end);
    while (end > p && is_blank(end[-1]))
        end--;
    if (p == end)
        return 0;
    uint64_t offset;
    const char *after = read_offset(p, end, &offset);
    if (after != NULL)
        return instruction(state, offset, after, end);
    if (cuobjdump_header(state, p, end) || nvdisasm_header(state, p, end) ||
        cuobjdump_banner(state, p, end) || known_other(p, end))
        return 0;
    state->stats.lines_skipped++;
    return 0;
}

int disasm_parse(const char *listing, size_t size, disasm_instruction_callback callback, void *user,
                 disasm_parse_stats *stats)
{
    if (stats != NULL)
        memset(stats, 0, sizeof(*stats));
    if (callback == NULL || (listing == NULL && size > 0))
        return FLARE_ERR_INVALID_ARGUMENT;
    if (size == 0) /* listing may be NULL: no pointer arithmetic on it */
        return 0;
    parser state = {.callback = callback, .user = user};
    int result = 0;
    const char *p = listing, *stop = listing + size;
    while (p < stop && result == 0) {
        const char *newline = memchr(p, '\n', (size_t)(stop - p));
        const char *line_end = newline != NULL ? newline : stop;
        result = parse_line(&state, p, line_end);
        p = line_end + (newline != NULL);
    }
    if (stats != NULL)
        *stats = state.stats;
    return result;
}
