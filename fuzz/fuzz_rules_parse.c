/*
 * fuzz_rules_parse.c: a libFuzzer target for the rule parser (src/rules).
 *
 * For any bytes, as one rule and as a ';'-separated list:
 *  - rules_parse returns; a refusal is FLARE_ERR_INVALID_ARGUMENT with a
 *    non-empty, terminated message that fits RULES_ERROR_MAX, and a zeroed
 *    rule; the same refusal comes back through a 6-byte error buffer without
 *    writing past it (the buffers are heap blocks of the exact size, so
 *    AddressSanitizer sees a single byte too many);
 *  - an accepted rule validates, its canonical form parses back to an equal
 *    rule, and writing that rule again gives the same text;
 *  - every entry of the list agrees with rules_parse of its own text.
 * Any violation aborts, which libFuzzer reports as a crash with its input.
 *
 * Built only with clang (-DFLARE_FUZZ=ON); `ctest -L fuzz` runs it for a
 * bounded time on fuzz/corpus/rules with fuzz/rules.dict.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules/rule.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(condition)                                                                           \
    do {                                                                                           \
        if (!(condition)) {                                                                        \
            fprintf(stderr, "fuzz_rules_parse: %s:%d: check failed: %s\n", __FILE__, __LINE__,     \
                    #condition);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static int is_zero(const void *memory, size_t size)
{
    const unsigned char *bytes = memory;
    for (size_t i = 0; i < size; i++) {
        if (bytes[i] != 0)
            return 0;
    }
    return 1;
}

/* The round-trip property of one accepted rule. */
static void check_accepted(const rules_rule *rule)
{
    char error[RULES_ERROR_MAX];
    CHECK(rules_validate(rule, error, sizeof(error)) == FLARE_OK);
    char *canonical = malloc(RULES_FORMAT_MAX);
    char *again = malloc(RULES_FORMAT_MAX);
    CHECK(canonical != NULL && again != NULL);
    CHECK(rules_format_canonical(rule, canonical, RULES_FORMAT_MAX) == FLARE_OK);
    CHECK(strlen(canonical) < RULES_FORMAT_MAX);
    rules_rule reparsed;
    if (rules_parse(canonical, &reparsed, error, sizeof(error)) != FLARE_OK) {
        fprintf(stderr, "canonical form refused: %s\n  %s\n", canonical, error);
        abort();
    }
    if (!rules_rule_equal(rule, &reparsed)) {
        fprintf(stderr, "canonical form parses to another rule: %s\n", canonical);
        abort();
    }
    CHECK(rules_format_canonical(&reparsed, again, RULES_FORMAT_MAX) == FLARE_OK);
    CHECK(strcmp(canonical, again) == 0);
    free(canonical);
    free(again);
}

/* Parses text as one rule; returns its status after checking it. */
static int check_rule(const char *text)
{
    char *error = malloc(RULES_ERROR_MAX);
    char *small = malloc(6);
    CHECK(error != NULL && small != NULL);
    rules_rule rule;
    int status = rules_parse(text, &rule, error, RULES_ERROR_MAX);
    if (status == FLARE_OK) {
        CHECK(error[0] == '\0');
        check_accepted(&rule);
    } else {
        CHECK(status == FLARE_ERR_INVALID_ARGUMENT);
        CHECK(error[0] != '\0');
        CHECK(strnlen(error, RULES_ERROR_MAX) < RULES_ERROR_MAX);
        CHECK(is_zero(&rule, sizeof(rule)));
    }
    rules_rule again;
    CHECK(rules_parse(text, &again, small, 6) == status);
    CHECK(strnlen(small, 6) < 6);
    if (status == FLARE_ERR_INVALID_ARGUMENT)
        CHECK(strncmp(small, error, 5) == 0);
    free(error);
    free(small);
    return status;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Past RULES_TEXT_MAX a rule is refused whole; a little more than that
     * covers the bound without slowing the fuzzer down. */
    if (size > 2 * RULES_TEXT_MAX)
        return 0;
    char *text = malloc(size + 1);
    CHECK(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0';
    check_rule(text);

    static rules_list_entry entries[RULES_LIST_MAX];
    size_t count = 0;
    int status = rules_parse_list(text, entries, RULES_LIST_MAX, &count);
    CHECK(status == (count > RULES_LIST_MAX ? FLARE_ERR_FULL : FLARE_OK));
    size_t stored = count < RULES_LIST_MAX ? count : RULES_LIST_MAX;
    size_t length = strlen(text);
    for (size_t i = 0; i < stored; i++) {
        const rules_list_entry *entry = &entries[i];
        CHECK(entry->offset + entry->length <= length);
        CHECK(entry->error[0] != '\0' || entry->status == FLARE_OK);
        if (entry->length == 0) {
            CHECK(entry->status == FLARE_ERR_INVALID_ARGUMENT);
            continue;
        }
        char *item = malloc(entry->length + 1);
        CHECK(item != NULL);
        memcpy(item, text + entry->offset, entry->length);
        item[entry->length] = '\0';
        CHECK(memchr(item, ';', entry->length) == NULL);
        CHECK(check_rule(item) == entry->status);
        if (entry->status == FLARE_OK)
            check_accepted(&entry->rule);
        free(item);
    }
    free(text);
    return 0;
}
