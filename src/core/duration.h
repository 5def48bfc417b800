/*
 * duration.h: durations as users write them ("500ms", "2s", "1.5min") and as
 * flare writes them back: the one parser and the one canonical formatter.
 *
 * The grammar is the rule grammar's (docs/rules.md): decimal digits with an
 * optional fraction that has digits on both sides of the point, followed at
 * once by a unit, ns, us, ms, s, min or h (case-sensitive). No blanks, sign,
 * exponent, hex or digit separators. The value is converted exactly, with
 * integer arithmetic (no floating point, so no locale and no rounding): a
 * value that is not a whole number of nanoseconds, or does not fit in 64
 * bits of them, is refused, never rounded or clamped. Rules (for, over,
 * cooldown, deep_for...), FLARE_DEEP_AFTER/FLARE_DEEP_FOR and --deep-after/
 * --deep-for, FLARE_REPLAY_*_TIMEOUT and --drain-timeout/--pass-timeout all
 * read durations through here, so each accepts exactly what the others do.
 *
 * Texts are spans (text, length), so the rule parser can hand over a token
 * in place; a NUL inside the span is just a byte that is not allowed.
 * Messages quote the text (at most 48 characters, bytes outside printable
 * ASCII as \xNN) and never name where it came from: callers put the
 * variable, option or column in front.
 * Must never: read past text[length), write past error[error_size), touch
 * *out_ns on a refusal, allocate, or keep state.
 */
#ifndef FLARE_CORE_DURATION_H
#define FLARE_CORE_DURATION_H

#include <stddef.h>
#include <stdint.h>

/* The units, for messages: "a duration is written in " CORE_DURATION_UNITS. */
#define CORE_DURATION_UNITS "ns, us, ms, s, min or h"

/* How core_duration_scan refused a text. */
typedef enum core_duration_fault {
    CORE_DURATION_FAULT_NONE,      /* a duration: *out_ns is set */
    CORE_DURATION_FAULT_FORM,      /* not digits [. digits] and a unit: empty, blanks, a sign,
                                      ".5s", "5.s", an exponent, no unit or an unknown one */
    CORE_DURATION_FAULT_TOO_FINE,  /* not a whole number of nanoseconds: "0.5ns" */
    CORE_DURATION_FAULT_TOO_LARGE, /* more than 18446744073709551615ns (about 584 years) */
} core_duration_fault;

/*
 * Parses text[0..length) as a duration of any size, 0 included, into
 * *out_ns. Returns CORE_DURATION_FAULT_NONE, or the fault with a message in
 * error (when error_size > 0) and *out_ns untouched. A value that is both
 * too fine and too large is called too large when its whole part has more
 * than 20 significant digits, else too fine (as the rule grammar's other
 * quantities). For callers that word some refusals themselves: the rule
 * parser, which names the option's range. Others want core_duration_parse.
 */
core_duration_fault core_duration_scan(const char *text, size_t length, uint64_t *out_ns,
                                       char *error, size_t error_size);

/*
 * core_duration_scan, then the bounds: a value below minimum_ns or above
 * maximum_ns is refused ("'0s' must be more than zero" when minimum_ns is 1,
 * "'25h' is more than the maximum, 24h"). Returns FLARE_OK with *out_ns set,
 * or FLARE_ERR_INVALID_ARGUMENT with a message in error and *out_ns
 * untouched.
 */
int core_duration_parse(const char *text, size_t length, uint64_t minimum_ns, uint64_t maximum_ns,
                        uint64_t *out_ns, char *error, size_t error_size);

/*
 * Writes ns in the largest unit that holds it as a whole number ("1500ms",
 * "2min", "1h", "0s"): the rules' canonical form, which core_duration_scan
 * reads back to the same value. Truncates like snprintf; can't fail.
 */
void core_duration_format(uint64_t ns, char *buffer, size_t size);

#endif /* FLARE_CORE_DURATION_H */
