/*
 * rules.c: `flare rules check RULE...`, and the --deep-when rules of
 * `flare trace`.
 *
 * `flare rules check` prints, for each rule, its canonical form or the
 * precise reason it is refused, so a rule can be tried before a long run.
 * `flare trace --deep-when RULE` checks its rules the same way before the
 * command starts and hands them to the command in FLARE_DEEP_WHEN. A refused
 * rule is reported loudly but never stops the trace: it is passed on as
 * written, and the evaluator installs it as refused.
 *
 * Must never: refuse to run a traced command because of a rule; claim that
 * rules open deep-profiling windows (the evaluator that does is not built
 * yet: rules are parsed and validated only).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "rules/rule.h"

static const char rules_help[] =
    "usage: flare rules check RULE...\n"
    "\n"
    "Parses and validates deep-profiling rules, exactly as 'flare trace --deep-when'\n"
    "and FLARE_DEEP_WHEN do. For each rule prints 'ok: ' and its canonical form\n"
    "(every option spelled out with its value or default), or 'refused: ', the rule,\n"
    "and the precise reason on the next line. An argument may hold several rules\n"
    "separated by ';'.\n"
    "\n"
    "Example:\n"
    "  flare rules check 'kernel_launch_rate < 500/s for 2s' 'gpu0.utilization < 20%'\n"
    "\n"
    "Rules are parsed and validated here; under 'flare trace --deep-when RULE'\n"
    "each process's evaluator opens a deep-profiling window when a rule fires.\n"
    "Exit status: 0 if every rule is accepted, 1 if any is refused, 2 for a usage\n"
    "error. Grammar, metrics, options, defaults and ranges: docs/rules.md.\n";

/* Prints one list's entries; returns how many were refused. */
static int print_entries(const char *list, const rules_list_entry *entries, size_t stored,
                         size_t count)
{
    int refused = 0;
    for (size_t i = 0; i < stored; i++) {
        const rules_list_entry *entry = &entries[i];
        if (entry->status == FLARE_OK) {
            char canonical[RULES_FORMAT_MAX];
            if (rules_format_canonical(&entry->rule, canonical, sizeof(canonical)) == FLARE_OK) {
                printf("ok: %s\n", canonical);
                continue;
            }
            printf("refused: %.*s\n  the rule cannot be written back (a bug in flare)\n",
                   (int)entry->length, list + entry->offset);
            refused++;
            continue;
        }
        /* An empty rule's columns count in the whole argument: show that. */
        if (entry->length == 0)
            printf("refused: %s\n  %s\n", list, entry->error);
        else
            printf("refused: %.*s\n  %s\n", (int)entry->length, list + entry->offset, entry->error);
        refused++;
    }
    if (count > stored) {
        printf("refused: %zu more rules\n  at most %d rules are accepted in one list\n",
               count - stored, RULES_LIST_MAX);
        refused += (int)(count - stored);
    }
    return refused;
}

static int rules_check(int argc, char **argv)
{
    int first_rule = argc;
    for (int index = 1; index < argc; index++) {
        const char *argument = argv[index];
        if (strcmp(argument, "--") == 0) {
            first_rule = index + 1;
            break;
        }
        if (cli_is_help(argument)) {
            fputs(rules_help, stdout);
            return CLI_EXIT_OK;
        }
        if (argument[0] == '-')
            return cli_usage_error("rules", "unknown option '%s'", argument);
        first_rule = index;
        break;
    }
    if (first_rule >= argc)
        return cli_usage_error("rules", "no rules given (flare rules check RULE...)");

    static rules_list_entry entries[RULES_LIST_MAX];
    int refused = 0;
    for (int index = first_rule; index < argc; index++) {
        size_t count = 0;
        rules_parse_list(argv[index], entries, RULES_LIST_MAX, &count);
        if (count == 0) {
            printf("refused: %s\n  the rule is empty\n", argv[index]);
            refused++;
            continue;
        }
        size_t stored = count < RULES_LIST_MAX ? count : RULES_LIST_MAX;
        refused += print_entries(argv[index], entries, stored, count);
    }
    return refused == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}

int cli_rules(int argc, char **argv)
{
    if (argc < 2)
        return cli_usage_error("rules", "missing the subcommand (flare rules check RULE...)");
    const char *subcommand = argv[1];
    if (cli_is_help(subcommand)) {
        fputs(rules_help, stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(subcommand, "check") == 0)
        return rules_check(argc - 1, argv + 1);
    if (subcommand[0] == '-')
        return cli_usage_error("rules", "unknown option '%s'", subcommand);
    return cli_usage_error("rules", "unknown subcommand '%s' (subcommands: check)", subcommand);
}

/* ---- flare trace --deep-when ---- */

/* The --deep-when values joined with "; ", as FLARE_DEEP_WHEN holds them;
 * NULL until the first one. Lives until the process exits. */
static char *deep_when;

int cli_deep_when_add(const char *rule)
{
    if (rule == NULL || strcmp(rule, "--") == 0 || rule[strspn(rule, " \t\n\r\v\f")] == '\0')
        return cli_usage_error("trace", "option '--deep-when' needs a rule, e.g. --deep-when "
                                        "'kernel_launch_rate < 500/s for 2s'");
    /* No rule starts with '-': this is a forgotten value before an option. */
    if (rule[0] == '-')
        return cli_usage_error("trace", "option '--deep-when' needs a rule, found '%s'", rule);
    size_t old_length = deep_when != NULL ? strlen(deep_when) : 0;
    size_t length = old_length + 2 + strlen(rule) + 1;
    char *joined = realloc(deep_when, length);
    if (joined == NULL)
        return cli_failure("trace", "out of memory for the --deep-when rules");
    snprintf(joined + old_length, length - old_length, "%s%s", old_length > 0 ? "; " : "", rule);
    deep_when = joined;
    return CLI_EXIT_OK;
}

int cli_deep_when_needs_launch_counts(void)
{
    if (deep_when == NULL)
        return 0;
    static rules_list_entry entries[RULES_LIST_MAX];
    size_t count = 0;
    rules_parse_list(deep_when, entries, RULES_LIST_MAX, &count);
    for (size_t i = 0; i < count && i < RULES_LIST_MAX; i++)
        if (entries[i].status == FLARE_OK &&
            entries[i].rule.metric == RULES_METRIC_KERNEL_LAUNCH_RATE)
            return 1;
    return 0;
}

int cli_deep_when_export(int quiet)
{
    if (deep_when == NULL)
        return CLI_EXIT_OK;
    static rules_list_entry entries[RULES_LIST_MAX];
    size_t count = 0;
    rules_parse_list(deep_when, entries, RULES_LIST_MAX, &count);
    if (count > RULES_LIST_MAX)
        return cli_usage_error("trace",
                               "%zu --deep-when rules: at most %d per run; nothing was run", count,
                               RULES_LIST_MAX);
    /* Every rule is checked before the command starts: a refused one is a
     * usage error, as a mistyped option is, so a typo is found before the
     * run, not after it (docs/rules.md, "Several rules"). */
    for (size_t i = 0; i < count; i++) {
        const rules_list_entry *entry = &entries[i];
        char canonical[RULES_FORMAT_MAX] = "";
        if (entry->status == FLARE_OK &&
            rules_format_canonical(&entry->rule, canonical, sizeof(canonical)) == FLARE_OK)
            continue;
        return cli_usage_error(
            "trace",
            "--deep-when rule %zu is refused: %s\n"
            "flare trace:   %.*s\n"
            "flare trace: nothing was run: correct the rule or leave it out ('flare rules "
            "check RULE' checks one without running anything)",
            i + 1,
            entry->status == FLARE_OK ? "the rule cannot be written back (a bug in flare)"
                                      : entry->error,
            entry->length > 0 ? (int)entry->length : (int)strlen(deep_when),
            entry->length > 0 ? deep_when + entry->offset : deep_when);
    }
    for (size_t i = 0; i < count && !quiet; i++) {
        char canonical[RULES_FORMAT_MAX] = "";
        rules_format_canonical(&entries[i].rule, canonical, sizeof(canonical));
        fprintf(stderr, "flare: rule %zu accepted: %s\n", i + 1, canonical);
    }
    setenv("FLARE_DEEP_WHEN", deep_when, 1);
    return CLI_EXIT_OK;
}

void cli_deep_when_reset(void)
{
    free(deep_when);
    deep_when = NULL;
}
