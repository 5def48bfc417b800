/*
 * output_path.h: `-o` templates of `flare trace` and `flare replay`, for one
 * session per rank or host: %h host, %p the launcher's pid, %r the rank,
 * %q{VAR} any environment variable, %% a percent sign.
 *
 * Must never let a placeholder reach outside the directory the template
 * names: an expansion that is empty, holds a '/', or is "." or ".." is
 * refused, as is an unknown placeholder. The template's own text (what the
 * user typed) is kept as written.
 */
#ifndef FLARE_CLI_OUTPUT_PATH_H
#define FLARE_CLI_OUTPUT_PATH_H

#include <stddef.h>

/* Expands template into out. 0, or -1 with why (the placeholder named, at
 * most why_size bytes). */
int cli_output_expand(const char *template_text, char *out, size_t size, char *why,
                      size_t why_size);

#endif /* FLARE_CLI_OUTPUT_PATH_H */
