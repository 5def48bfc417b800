/*
 * diff_print.c: how `flare diff` shows its comparison (diff.h): a text
 * page (the sessions, notes on different hosts or devices, the total GPU
 * time, then a table of kernels and one of scopes, and the gate's outcome)
 * or one JSON object with the keys docs/cli.md documents.
 *
 * It only formats: it must never read a session, judge, or choose an exit
 * code. Text goes to stdout as it is (main.c filters control characters);
 * JSON strings are escaped here, control characters (C0, DEL, C1) as
 * \u00XX and invalid UTF-8 as '?', so the object is valid JSON, exact, and
 * harmless on a terminal.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/diff.h"

/* ---- values as text ---- */

static void format_p(const diff_row *row, char *buffer, size_t size)
{
    if (row->base.count == 0 || row->new_side.count == 0)
        snprintf(buffer, size, "-");
    else if (row->test.p_value < 1e-300)
        snprintf(buffer, size, "<1e-300");
    else if (row->test.p_value >= 0.001)
        snprintf(buffer, size, "%.3f", row->test.p_value);
    else
        snprintf(buffer, size, "%.1e", row->test.p_value);
}

static void format_change(double change_pct, char *buffer, size_t size)
{
    if (isnan(change_pct))
        snprintf(buffer, size, "-");
    else if (isinf(change_pct))
        snprintf(buffer, size, "%s", change_pct > 0 ? "+inf%" : "-inf%");
    else
        snprintf(buffer, size, "%+.1f%%", change_pct);
}

/* A side's total or mean: "-" when it has no launches. */
static void format_time(const diff_side *side, double ns, char *buffer, size_t size)
{
    if (side->count == 0) {
        snprintf(buffer, size, "-");
        return;
    }
    cli_format_duration(ns >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)(ns + 0.5), buffer,
                        size);
}

/* ---- text ---- */

static void print_side(const diff_side_info *side)
{
    const store_session_summary *summary = &side->session.summary;
    printf("  %-4s  %s\n", side->label, side->session.directory);
    printf("        command  %s\n", summary->command[0] != '\0' ? summary->command : "(unknown)");
    char when[64] = "an unknown time";
    if (summary->start_unix_ns > 0) {
        time_t seconds = (time_t)(summary->start_unix_ns / 1000000000ll);
        struct tm utc;
        gmtime_r(&seconds, &utc);
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &utc);
    }
    printf("        host     %s, started %s, flare %s%s\n",
           summary->host[0] != '\0' ? summary->host : "(unknown)", when,
           summary->flare_version[0] != '\0' ? summary->flare_version : "(unknown)",
           summary->end_ns == 0 ? "; has not ended (compared as it is now)" : "");
    printf("        devices  %s\n", side->devices[0] != '\0' ? side->devices : "(none recorded)");
}

static void print_notes(const diff_result *result)
{
    const store_session_summary *base = &result->sides[0].session.summary;
    const store_session_summary *new_summary = &result->sides[1].session.summary;
    if (result->different_hosts)
        printf("  note: different hosts: %s vs %s; times also differ for reasons outside the "
               "program\n",
               base->host, new_summary->host);
    if (result->different_devices)
        printf("  note: different devices: %s vs %s\n",
               result->sides[0].devices[0] != '\0' ? result->sides[0].devices : "(none recorded)",
               result->sides[1].devices[0] != '\0' ? result->sides[1].devices : "(none recorded)");
    if (result->different_versions)
        printf("  note: different flare versions: %s vs %s\n", base->flare_version,
               new_summary->flare_version);
}

static void print_total(const diff_result *result)
{
    const diff_row *total = &result->kernels.total;
    char base[32], new_time[32], change[32], p[32];
    format_time(&total->base, (double)total->base.total_ns, base, sizeof base);
    format_time(&total->new_side, (double)total->new_side.total_ns, new_time, sizeof new_time);
    format_change(total->change_pct, change, sizeof change);
    format_p(total, p, sizeof p);
    printf("\nGPU time, all kernels\n");
    printf("  BASE    %s in %llu launches\n", base, (unsigned long long)total->base.count);
    printf("  NEW     %s in %llu launches\n", new_time, (unsigned long long)total->new_side.count);
    printf("  change  %s, p-value %s: %s\n", change, p, diff_verdict_name(total->verdict));
}

/* "3 slower, 10 same": the verdicts that occur, in the table's order. */
static void format_verdicts(const diff_table *table, char *buffer, size_t size)
{
    size_t used = 0;
    buffer[0] = '\0';
    for (int verdict = 0; verdict < DIFF_VERDICT_COUNT && used < size; verdict++) {
        if (table->verdicts[verdict] == 0)
            continue;
        int length = snprintf(buffer + used, size - used, "%s%zu %s", used > 0 ? ", " : "",
                              table->verdicts[verdict], diff_verdict_name((diff_verdict)verdict));
        used += length > 0 ? (size_t)length : 0;
    }
}

static void print_row(const diff_row *row)
{
    char total_base[32], total_new[32], mean_base[32], mean_new[32], change[32], p[32];
    format_time(&row->base, (double)row->base.total_ns, total_base, sizeof total_base);
    format_time(&row->new_side, (double)row->new_side.total_ns, total_new, sizeof total_new);
    format_time(&row->base, row->base.mean_ns, mean_base, sizeof mean_base);
    format_time(&row->new_side, row->new_side.mean_ns, mean_new, sizeof mean_new);
    format_change(row->change_pct, change, sizeof change);
    format_p(row, p, sizeof p);
    printf("  %10llu %10llu %11s %11s %10s %10s %8s %8s  %-12s  %s\n",
           (unsigned long long)row->base.count, (unsigned long long)row->new_side.count, total_base,
           total_new, mean_base, mean_new, change, p, diff_verdict_name(row->verdict), row->name);
}

/* One table: what it holds, its rows (the first --top), what was left out. */
static void print_table(const diff_result *result, const diff_table *table, const char *title,
                        const char *column)
{
    char verdicts[256];
    format_verdicts(table, verdicts, sizeof verdicts);
    printf("\n%s: %zu name(s)%s%s%s\n", title, table->count, table->count > 0 ? " (" : "", verdicts,
           table->count > 0 ? "), by the change of their total time" : "");
    if (table->count == 0)
        return;
    printf("  %10s %10s %11s %11s %10s %10s %8s %8s  %-12s  %s\n", "count BASE", "count NEW",
           "total BASE", "total NEW", "mean BASE", "mean NEW", "change", "p-value", "verdict",
           column);
    size_t shown = result->options->top > 0 && result->options->top < table->count
                       ? result->options->top
                       : table->count;
    for (size_t i = 0; i < shown; i++)
        print_row(&table->rows[i]);
    if (shown < table->count)
        printf("  ... %zu more (--top N lists more)\n", table->count - shown);
}

static void print_gate(const diff_result *result)
{
    const diff_options *options = result->options;
    if (!options->gate)
        return;
    printf("\n--fail-if-slower %g%%: ", options->fail_pct);
    if (result->failures == 0) {
        printf("passed: neither a kernel nor the total GPU time is slower by more than %g%% "
               "beyond noise\n",
               options->fail_pct);
        return;
    }
    printf("FAILED (exit %d): slower by more than %g%% beyond noise:\n", CLI_DIFF_EXIT_SLOWER,
           options->fail_pct);
    if (diff_row_fails(result, &result->kernels.total))
        printf("  total GPU time  %+.1f%%\n", result->kernels.total.change_pct);
    for (size_t i = 0; i < result->kernels.count; i++) {
        const diff_row *row = &result->kernels.rows[i];
        if (diff_row_fails(result, row))
            printf("  kernel  %+.1f%%  %s\n", row->change_pct, row->name);
    }
}

void diff_print_text(const diff_result *result)
{
    printf("flare diff\n");
    print_side(&result->sides[0]);
    print_side(&result->sides[1]);
    print_notes(result);
    printf("  beyond noise: Mann-Whitney U test p < %g and a change of the mean of at least %g%%\n",
           result->options->rule.alpha, result->options->rule.min_change_pct);
    print_total(result);
    print_table(result, &result->kernels, "Kernels", "kernel");
    print_table(result, &result->scopes,
                "Scopes (flare scopes and NVTX ranges that ended; host time, never gated)",
                "scope");
    print_gate(result);
}

/* ---- JSON ---- */

/* The length of the valid UTF-8 sequence at text (1..4), or 0 when the
 * bytes there are not one (overlong, surrogate, past U+10FFFF, cut). */
static size_t utf8_length(const unsigned char *text)
{
    unsigned char lead = text[0];
    if (lead < 0x80)
        return 1;
    size_t length;
    unsigned char low = 0x80, high = 0xbf;
    if (lead >= 0xc2 && lead <= 0xdf)
        length = 2;
    else if (lead >= 0xe0 && lead <= 0xef)
        length = 3, low = lead == 0xe0 ? 0xa0 : 0x80, high = lead == 0xed ? 0x9f : 0xbf;
    else if (lead >= 0xf0 && lead <= 0xf4)
        length = 4, low = lead == 0xf0 ? 0x90 : 0x80, high = lead == 0xf4 ? 0x8f : 0xbf;
    else
        return 0;
    if (text[1] < low || text[1] > high)
        return 0;
    for (size_t i = 2; i < length; i++)
        if (text[i] < 0x80 || text[i] > 0xbf)
            return 0;
    return length;
}

/* A JSON string literal, quotes included. Runs of bytes that need no
 * escape are written at once. */
static void json_string(const char *text)
{
    const unsigned char *at = (const unsigned char *)(text != NULL ? text : "");
    putchar('"');
    while (*at != '\0') {
        const unsigned char *run = at;
        size_t length;
        while (*at != '\0' && *at >= 0x20 && *at != '"' && *at != '\\' && *at != 0x7f &&
               (length = utf8_length(at)) != 0 && !(length == 2 && at[0] == 0xc2 && at[1] <= 0x9f))
            at += length;
        if (at > run)
            fwrite(run, 1, (size_t)(at - run), stdout);
        if (*at == '\0')
            break;
        unsigned char byte = *at;
        length = utf8_length(at);
        if (byte == '"' || byte == '\\')
            printf("\\%c", byte);
        else if (byte == '\n')
            fputs("\\n", stdout);
        else if (byte == '\t')
            fputs("\\t", stdout);
        else if (byte == '\r')
            fputs("\\r", stdout);
        else if (byte < 0x20 || byte == 0x7f)
            printf("\\u%04x", byte);
        else if (length == 2) /* C1: U+0080..U+009F */
            printf("\\u%04x", at[1]);
        else
            putchar('?'); /* not UTF-8 */
        at += length == 2 ? 2 : 1;
    }
    putchar('"');
}

/* A finite number, or null. */
static void json_number(const char *format, double value)
{
    if (isfinite(value))
        printf(format, value);
    else
        fputs("null", stdout);
}

static void json_side_summary(const char *key, const diff_side *side)
{
    printf(",\"%s\":", key);
    if (side->count == 0) {
        fputs("null", stdout);
        return;
    }
    printf("{\"count\":%llu,\"total_ns\":%llu,\"mean_ns\":", (unsigned long long)side->count,
           (unsigned long long)side->total_ns);
    json_number("%.1f", side->mean_ns);
    printf(",\"median_ns\":%llu}", (unsigned long long)side->median_ns);
}

static void json_row(const diff_result *result, const diff_row *row, int gated)
{
    int both = row->base.count > 0 && row->new_side.count > 0;
    fputs("{\"name\":", stdout);
    json_string(row->name);
    fputs(",\"verdict\":", stdout);
    json_string(diff_verdict_name(row->verdict));
    json_side_summary("base", &row->base);
    json_side_summary("new", &row->new_side);
    fputs(",\"change_pct\":", stdout);
    json_number("%.6g", both ? row->change_pct : NAN);
    fputs(",\"p_value\":", stdout);
    json_number("%.6g", both ? row->test.p_value : NAN);
    fputs(",\"prob_new_longer\":", stdout);
    json_number("%.6g", both ? row->test.prob_new_longer : NAN);
    printf(",\"exact\":%s,\"fails_gate\":%s}", both && row->test.exact ? "true" : "false",
           gated && diff_row_fails(result, row) ? "true" : "false");
}

static void json_table(const diff_result *result, const char *key, const diff_table *table,
                       int gated)
{
    size_t shown = result->options->top > 0 && result->options->top < table->count
                       ? result->options->top
                       : table->count;
    printf(",\"%s\":{\"names\":%zu,\"listed\":%zu,\"verdicts\":{", key, table->count, shown);
    for (int verdict = 0; verdict < DIFF_VERDICT_COUNT; verdict++) {
        printf("%s", verdict > 0 ? "," : "");
        json_string(diff_verdict_name((diff_verdict)verdict));
        printf(":%zu", table->verdicts[verdict]);
    }
    fputs("},\"rows\":[", stdout);
    for (size_t i = 0; i < shown; i++) {
        fputs(i > 0 ? ",\n" : "\n", stdout);
        json_row(result, &table->rows[i], gated);
    }
    fputs("]}", stdout);
}

static void json_session(const char *key, const diff_side_info *side)
{
    const store_session_summary *summary = &side->session.summary;
    printf(",\"%s\":{\"directory\":", key);
    json_string(side->session.directory);
    fputs(",\"command\":", stdout);
    json_string(summary->command);
    fputs(",\"host\":", stdout);
    json_string(summary->host);
    fputs(",\"flare_version\":", stdout);
    json_string(summary->flare_version);
    printf(",\"start_unix_ns\":%lld,\"ended\":%s,\"devices\":[", (long long)summary->start_unix_ns,
           summary->end_ns != 0 ? "true" : "false");
    for (size_t i = 0; i < side->device_count; i++) {
        fputs(i > 0 ? "," : "", stdout);
        json_string(side->device_names[i]);
    }
    printf("],\"kernels\":%lld,\"scopes\":%lld}", (long long)summary->kernel_count,
           (long long)summary->scope_count);
}

static void json_gate(const diff_result *result)
{
    const diff_options *options = result->options;
    fputs(",\"gate\":", stdout);
    if (!options->gate) {
        fputs("null", stdout);
        return;
    }
    fputs("{\"fail_if_slower_pct\":", stdout);
    json_number("%.6g", options->fail_pct);
    printf(",\"failed\":%s,\"exit_status\":%d,\"failures\":[",
           result->failures > 0 ? "true" : "false",
           result->failures > 0 ? CLI_DIFF_EXIT_SLOWER : 0);
    const char *separator = "";
    if (diff_row_fails(result, &result->kernels.total)) {
        fputs("{\"what\":\"gpu_time\",\"name\":null,\"change_pct\":", stdout);
        json_number("%.6g", result->kernels.total.change_pct);
        fputs("}", stdout);
        separator = ",";
    }
    for (size_t i = 0; i < result->kernels.count; i++) {
        const diff_row *row = &result->kernels.rows[i];
        if (!diff_row_fails(result, row))
            continue;
        printf("%s{\"what\":\"kernel\",\"name\":", separator);
        json_string(row->name);
        fputs(",\"change_pct\":", stdout);
        json_number("%.6g", row->change_pct);
        fputs("}", stdout);
        separator = ",";
    }
    fputs("]}", stdout);
}

void diff_print_json(const diff_result *result)
{
    const diff_row *total = &result->kernels.total;
    printf("{\"flare_diff\":1");
    json_session("base", &result->sides[0]);
    json_session("new", &result->sides[1]);
    printf(",\"different_hosts\":%s,\"different_devices\":%s,\"different_flare_versions\":%s",
           result->different_hosts ? "true" : "false", result->different_devices ? "true" : "false",
           result->different_versions ? "true" : "false");
    fputs(",\"rule\":{\"test\":\"mann-whitney-u\",\"measure\":\"mean\",\"alpha\":", stdout);
    json_number("%.6g", result->options->rule.alpha);
    fputs(",\"min_change_pct\":", stdout);
    json_number("%.6g", result->options->rule.min_change_pct);
    printf("}\n,\"gpu_time\":{\"base_ns\":%llu,\"new_ns\":%llu,\"base_launches\":%llu,"
           "\"new_launches\":%llu,\"change_pct\":",
           (unsigned long long)total->base.total_ns, (unsigned long long)total->new_side.total_ns,
           (unsigned long long)total->base.count, (unsigned long long)total->new_side.count);
    json_number("%.6g", total->change_pct);
    fputs(",\"p_value\":", stdout);
    json_number("%.6g", total->test.p_value);
    fputs(",\"verdict\":", stdout);
    json_string(diff_verdict_name(total->verdict));
    printf(",\"fails_gate\":%s}\n", diff_row_fails(result, total) ? "true" : "false");
    json_table(result, "kernels", &result->kernels, 1);
    fputs("\n", stdout);
    json_table(result, "scopes", &result->scopes, 0);
    fputs("\n", stdout);
    json_gate(result);
    fputs("}\n", stdout);
}
