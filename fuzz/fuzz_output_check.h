/*
 * fuzz_output_check.h: strict checks of what `flare export` and `flare
 * report --format` wrote, for the fuzz targets: a JSON document (RFC 8259,
 * valid UTF-8, nothing after the value) and a CSV file (RFC 4180 quoting,
 * CRLF or LF line ends, valid UTF-8, every record as wide as the header).
 *
 * Fuzz-only. Each check reads its bytes and nothing else; it must never
 * accept what a strict reader would refuse, never recurse without bound
 * (nesting deeper than FUZZ_JSON_DEPTH_MAX is refused), and never write.
 */
#ifndef FLARE_FUZZ_OUTPUT_CHECK_H
#define FLARE_FUZZ_OUTPUT_CHECK_H

#include <stddef.h>

#define FUZZ_JSON_DEPTH_MAX 64

/* Whether bytes[0..length) is one JSON value with optional white space
 * around it. Returns 0, or -1 with the offset of the first bad byte in
 * *where and a few words in *why. */
int fuzz_check_json(const char *bytes, size_t length, size_t *where, const char **why);

/* Whether bytes[0..length) is CSV whose every record has columns fields
 * and ends (the last one too) with CRLF when crlf is set, else with LF and
 * no carriage return outside a quoted field. Returns 0, or -1 as above. */
int fuzz_check_csv(const char *bytes, size_t length, size_t columns, int crlf, size_t *where,
                   const char **why);

#endif /* FLARE_FUZZ_OUTPUT_CHECK_H */
