/*
 * window.c: `flare window open DIR --for DURATION [--at TIME]`: a
 * deep-profiling window in every process of a running session, asked for
 * from outside it through the session's control directory
 * (deepwin_control.h; docs/cli.md, "flare window").
 *
 * Checks everything before writing anything: the options (usage errors,
 * exit 2: a bad duration or time, a time in the past, an unknown option),
 * then the session (exit 1: no session in DIR, a session that has ended or
 * has no running process). Only then is the request written, atomically.
 * It must never write a request after refusing, write through a link
 * planted in the session directory, or change the session's database
 * (it is opened read-only).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/session.h"
#include "core/clock.h"
#include "core/duration.h"
#include "deepwin/deepwin.h"
#include "deepwin/deepwin_control.h"
#include "deepwin/deepwin_session.h"
#include "flare/flare.h"
#include "store/store_export.h"

#define COMMAND "window open"

static const char window_help[] =
    "usage: flare window open DIR --for DURATION [--at TIME] [--quiet]\n"
    "\n"
    "Opens a deep-profiling window (docs/windows.md) in every running process of\n"
    "the session in DIR, a 'flare trace -o DIR' (or flare replay) still going,\n"
    "from outside it. The request is a file in DIR/control/, which each process\n"
    "of the session looks at every 5 ms; each opens its window at TIME on its\n"
    "own clock, so the windows of all the processes open together.\n"
    "\n"
    "Options:\n"
    "  --for DURATION  how long each window stays open (ns, us, ms, s, min or h;\n"
    "                  at most 10min), e.g. --for 300ms. Required.\n"
    "  --at TIME       when the windows open, wall clock: an RFC 3339 time,\n"
    "                  2026-12-02T04:30:00.250Z (Z for UTC, or an offset such as\n"
    "                  +01:00; the fraction is optional, up to 9 digits), or\n"
    "                  +DURATION from now, e.g. +2s; at most 24h ahead.\n"
    "                  Default: now.\n"
    "  -q, --quiet     print nothing but errors\n"
    "  -h, --help      this help\n"
    "\n"
    "A process that sees the request late, or has another window open at TIME,\n"
    "opens its window as soon as it can, up to 10 s after TIME; a process that\n"
    "started after the request was made ignores it. Each window is recorded as\n"
    "'scheduled', labelled 'flare window open HH:MM:SS.mmmZ' (flare report).\n"
    "On a GPU, ask a second or more ahead (--at +2s): PM sampling is set up when\n"
    "the request is read (about 0.8 s) and a window opened before that runs\n"
    "without samples.\n"
    "Processes started by flare trace or flare replay watch DIR/control; a\n"
    "program that starts its own session with flare_init elsewhere does not.\n"
    "\n"
    "Exit status: 0 when the request was written; 2 for a usage error (a bad\n"
    "duration or time, a time in the past, an unknown option); 1 when DIR holds\n"
    "no session, its session has ended or has no running process, or the\n"
    "request cannot be written. Nothing is written unless the status is 0.\n";

/* ---- TIME ---- */

/* Days from 1970-01-01 to year-month-day (proleptic Gregorian). */
static int64_t days_from_civil(int64_t year, int month, int day)
{
    year -= month <= 2;
    int64_t era = (year >= 0 ? year : year - 399) / 400;
    int64_t year_of_era = year - era * 400;
    int64_t day_of_year = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
    int64_t day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    return era * 146097 + day_of_era - 719468;
}

static int days_in_month(int year, int month)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    return month == 2 && leap ? 29 : days[month - 1];
}

/* count digits at text + *at into *value, moving *at past them. 0, or -1. */
static int take_digits(const char *text, size_t *at, int count, int *value)
{
    int result = 0;
    for (int i = 0; i < count; i++) {
        char c = text[*at + (size_t)i];
        if (c < '0' || c > '9')
            return -1;
        result = result * 10 + (c - '0');
    }
    *at += (size_t)count;
    *value = result;
    return 0;
}

/* The character at text + *at is one of expected (moving past it). */
static int take_char(const char *text, size_t *at, const char *expected)
{
    if (text[*at] == '\0' || strchr(expected, text[*at]) == NULL)
        return -1;
    (*at)++;
    return 0;
}

/* Reads ".F" (1..9 digits) and the zone, Z or +-HH:MM, after the seconds.
 * 0 with *fraction_ns and *offset_s set, or -1 with why. */
static int take_fraction_and_zone(const char *text, size_t at, int64_t *fraction_ns,
                                  int64_t *offset_s, char *why, size_t why_size)
{
    *fraction_ns = 0;
    *offset_s = 0;
    if (text[at] == '.') {
        size_t digits = 0;
        at++;
        while (text[at + digits] >= '0' && text[at + digits] <= '9')
            digits++;
        if (digits == 0 || digits > 9) {
            snprintf(why, why_size, "%s",
                     digits == 0 ? "a decimal point needs digits after it"
                                 : "at most 9 digits after the decimal "
                                   "point (nanoseconds)");
            return -1;
        }
        for (size_t i = 0; i < 9; i++)
            *fraction_ns = *fraction_ns * 10 + (i < digits ? text[at + i] - '0' : 0);
        at += digits;
    }
    if (text[at] == '\0') {
        snprintf(why, why_size, "no time zone: add Z for UTC (%.40sZ) or an offset such as +01:00",
                 text);
        return -1;
    }
    if ((text[at] == 'Z' || text[at] == 'z') && text[at + 1] == '\0')
        return 0;
    int hours = 0, minutes = 0;
    int sign = text[at] == '-' ? -1 : 1;
    if (take_char(text, &at, "+-") != 0 || take_digits(text, &at, 2, &hours) != 0 ||
        take_char(text, &at, ":") != 0 || take_digits(text, &at, 2, &minutes) != 0 ||
        text[at] != '\0') {
        snprintf(why, why_size,
                 "the time zone must be Z or an offset such as +01:00, and end "
                 "the time");
        return -1;
    }
    if (hours > 23 || minutes > 59) {
        snprintf(why, why_size, "the offset %c%02d:%02d is out of range", sign < 0 ? '-' : '+',
                 hours, minutes);
        return -1;
    }
    *offset_s = sign * (hours * 3600 + minutes * 60);
    return 0;
}

/* An RFC 3339 date-time into Unix nanoseconds. 0, or -1 with why. */
static int parse_rfc3339(const char *text, int64_t *unix_ns, char *why, size_t why_size)
{
    int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
    size_t at = 0;
    if (take_digits(text, &at, 4, &year) != 0 || take_char(text, &at, "-") != 0 ||
        take_digits(text, &at, 2, &month) != 0 || take_char(text, &at, "-") != 0 ||
        take_digits(text, &at, 2, &day) != 0 || take_char(text, &at, "Tt") != 0 ||
        take_digits(text, &at, 2, &hour) != 0 || take_char(text, &at, ":") != 0 ||
        take_digits(text, &at, 2, &minute) != 0 || take_char(text, &at, ":") != 0 ||
        take_digits(text, &at, 2, &second) != 0) {
        snprintf(why, why_size,
                 "not a time: write an RFC 3339 time such as 2026-12-02T04:30:00.250Z (UTC; or "
                 "an offset such as +01:00 instead of Z), or +DURATION such as +2s");
        return -1;
    }
    if (month < 1 || month > 12) {
        snprintf(why, why_size, "month %02d does not exist", month);
        return -1;
    }
    if (day < 1 || day > days_in_month(year, month)) {
        snprintf(why, why_size, "day %02d does not exist in %04d-%02d", day, year, month);
        return -1;
    }
    if (hour > 23 || minute > 59 || second > 59) {
        snprintf(why, why_size, "%s",
                 second == 60 && hour <= 23 && minute <= 59
                     ? "second 60: a leap second cannot be asked for"
                     : "hours run 00..23, minutes and seconds 00..59");
        return -1;
    }
    int64_t fraction_ns, offset_s;
    if (take_fraction_and_zone(text, at, &fraction_ns, &offset_s, why, why_size) != 0)
        return -1;
    int64_t seconds =
        days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset_s;
    *unix_ns = seconds * 1000000000ll + fraction_ns;
    return 0;
}

/* --at TIME against now_unix_ns into *at_unix_ns. CLI_EXIT_OK or the usage
 * error, printed: a bad time, one in the past, or over 24h ahead. */
static int parse_at(const char *text, int64_t now_unix_ns, int64_t *at_unix_ns)
{
    char why[256];
    if (text[0] == '+') {
        uint64_t ahead_ns;
        if (core_duration_parse(text + 1, strlen(text + 1), 0, DEEPWIN_SCHEDULE_MAX_NS, &ahead_ns,
                                why, sizeof(why)) != FLARE_OK)
            return cli_usage_error(COMMAND, "'--at %s': %s", text, why);
        *at_unix_ns = now_unix_ns + (int64_t)ahead_ns;
        return CLI_EXIT_OK;
    }
    if (parse_rfc3339(text, at_unix_ns, why, sizeof(why)) != 0)
        return cli_usage_error(COMMAND, "'--at %s': %s", text, why);
    char now[DEEPWIN_CONTROL_TIME_MAX], distance[32];
    deepwin_control_format_time(now_unix_ns, 0, now, sizeof(now));
    if (*at_unix_ns < now_unix_ns) {
        cli_format_duration((uint64_t)(now_unix_ns - *at_unix_ns), distance, sizeof(distance));
        return cli_usage_error(COMMAND, "'--at %s' is %s in the past (now: %s)", text, distance,
                               now);
    }
    if (*at_unix_ns - now_unix_ns > (int64_t)DEEPWIN_SCHEDULE_MAX_NS)
        return cli_usage_error(COMMAND, "'--at %s' is more than 24h from now (now: %s)", text, now);
    return CLI_EXIT_OK;
}

/* ---- the session ---- */

static int count_running(const store_export_process_row *row, void *user)
{
    long long *counts = user;
    counts[row->end_ns == 0 ? 0 : 1]++;
    return 0;
}

/* Checks that dir holds a session that is still running, with *running
 * processes. CLI_EXIT_OK, or CLI_EXIT_FAILURE, printed. */
static int check_session(const char *dir, long long *running)
{
    struct stat info;
    if (stat(dir, &info) != 0)
        return cli_failure(COMMAND, "%s: %s", dir, strerror(errno));
    if (!S_ISDIR(info.st_mode))
        return cli_failure(COMMAND, "%s is not a directory", dir);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/%s", dir, STORE_DATABASE_NAME);
    if (access(path, F_OK) != 0)
        return cli_failure(COMMAND, "%s holds no flare session (no %s in it)", dir,
                           STORE_DATABASE_NAME);
    cli_session session;
    char error[1024];
    if (cli_session_open(&session, COMMAND, dir, 1, error, sizeof(error)) != CLI_EXIT_OK)
        return CLI_EXIT_FAILURE;
    const store_session_summary *summary = &session.summary;
    long long counts[2] = {0, 0};
    int status = CLI_EXIT_OK;
    if (summary->end_ns != 0) {
        int64_t ended = summary->start_unix_ns + (int64_t)(summary->end_ns - summary->start_ns);
        char when[DEEPWIN_CONTROL_TIME_MAX], ago[32];
        deepwin_control_format_time(ended, 0, when, sizeof(when));
        int64_t since = core_unix_now_ns() - ended;
        cli_format_duration(since > 0 ? (uint64_t)since : 0, ago, sizeof(ago));
        status = cli_failure(COMMAND,
                             "the session in %s ended at %s (%s ago): no process is left to "
                             "open a window",
                             dir, when, ago);
    } else if (store_export_processes(session.database, count_running, counts) != 0) {
        status = cli_failure(COMMAND, "cannot read the processes of the session in %s: %s", dir,
                             store_last_error(session.database));
    } else if (counts[0] == 0) {
        status = cli_failure(COMMAND,
                             "no process of the session in %s is running (%lld ended): none "
                             "would see the request",
                             dir, counts[1]);
    }
    cli_session_close(&session);
    *running = counts[0];
    return status;
}

/* ---- the command ---- */

typedef struct window_options {
    const char *dir;
    const char *for_text;
    const char *at_text;
    int quiet;
} window_options;

/* The value of option argv[*index] into *value. CLI_EXIT_OK or the error. */
static int option_value(int argc, char **argv, int *index, const char **value, const char *needs)
{
    const char *option = argv[*index];
    if (*index + 1 >= argc || strncmp(argv[*index + 1], "--", 2) == 0)
        return cli_usage_error(COMMAND, "option '%s' needs %s", option, needs);
    if (*value != NULL)
        return cli_usage_error(COMMAND, "option '%s' given twice", option);
    *value = argv[++*index];
    return CLI_EXIT_OK;
}

/* The arguments after "open". CLI_EXIT_OK, a usage error, or -1 after
 * printing the help (exit 0). */
static int parse_options(int argc, char **argv, window_options *options)
{
    int positional_only = 0;
    for (int index = 2; index < argc; index++) {
        const char *argument = argv[index];
        int status = CLI_EXIT_OK;
        if (!positional_only && cli_is_help(argument)) {
            fputs(window_help, stdout);
            return -1;
        } else if (!positional_only && strcmp(argument, "--for") == 0) {
            status = option_value(argc, argv, &index, &options->for_text,
                                  "a duration, e.g. --for 300ms");
        } else if (!positional_only && strcmp(argument, "--at") == 0) {
            status = option_value(argc, argv, &index, &options->at_text,
                                  "a time, e.g. --at 2026-12-02T04:30:00.250Z or --at +2s");
        } else if (!positional_only &&
                   (strcmp(argument, "-q") == 0 || strcmp(argument, "--quiet") == 0)) {
            options->quiet = 1;
        } else if (!positional_only && strcmp(argument, "--") == 0) {
            positional_only = 1;
        } else if (!positional_only && argument[0] == '-' && argument[1] != '\0') {
            status = cli_usage_error(COMMAND, "unknown option '%s'", argument);
        } else if (options->dir != NULL) {
            status = cli_usage_error(COMMAND,
                                     "unexpected '%s': one session directory only (DIR is '%s')",
                                     argument, options->dir);
        } else if (argument[0] == '\0') {
            status = cli_usage_error(COMMAND, "DIR must not be empty");
        } else {
            options->dir = argument;
        }
        if (status != CLI_EXIT_OK)
            return status;
    }
    if (options->dir == NULL)
        return cli_usage_error(COMMAND, "missing the session directory: flare window open DIR "
                                        "--for DURATION [--at TIME]");
    if (options->for_text == NULL)
        return cli_usage_error(COMMAND, "missing --for DURATION: how long each window stays "
                                        "open, e.g. --for 300ms");
    return CLI_EXIT_OK;
}

/* --for DURATION into *for_ns. CLI_EXIT_OK or the usage error. */
static int parse_for(const char *text, uint64_t *for_ns)
{
    char why[192];
    if (core_duration_parse(text, strlen(text), 1, DEEPWIN_SCHEDULE_MAX_NS, for_ns, why,
                            sizeof(why)) != FLARE_OK)
        return cli_usage_error(COMMAND, "'--for %s': %s", text, why);
    if (*for_ns > DEEPWIN_DURATION_MAX_NS)
        return cli_usage_error(COMMAND, "'--for %s': a window lasts at most %llu s", text,
                               DEEPWIN_DURATION_MAX_NS / 1000000000ull);
    return CLI_EXIT_OK;
}

static int window_open(int argc, char **argv)
{
    window_options options = {0};
    int status = parse_options(argc, argv, &options);
    if (status != CLI_EXIT_OK)
        return status < 0 ? CLI_EXIT_OK : status;
    deepwin_control_request request = {.requested_by = (int64_t)getpid()};
    status = parse_for(options.for_text, &request.for_ns);
    if (status != CLI_EXIT_OK)
        return status;
    if (options.at_text != NULL && (status = parse_at(options.at_text, core_unix_now_ns(),
                                                      &request.at_unix_ns)) != CLI_EXIT_OK)
        return status;
    long long running = 0;
    status = check_session(options.dir, &running);
    if (status != CLI_EXIT_OK)
        return status;
    request.requested_unix_ns = core_unix_now_ns();
    if (options.at_text == NULL)
        request.at_unix_ns = request.requested_unix_ns; /* now: when it is made */
    char name[DEEPWIN_CONTROL_NAME_MAX], error[PATH_MAX + 256];
    if (deepwin_control_write(options.dir, &request, name, sizeof(name), error, sizeof(error)) !=
        FLARE_OK)
        return cli_failure(COMMAND, "cannot write the request: %s", error);
    if (!options.quiet) {
        char when[DEEPWIN_CONTROL_TIME_MAX], length[32];
        deepwin_control_format_time(request.at_unix_ns, 0, when, sizeof(when));
        core_duration_format(request.for_ns, length, sizeof(length));
        printf("flare: window requested in %s: opens at %s for %s, in each of its %lld running "
               "process(es)\n",
               options.dir, when, length, running);
    }
    return CLI_EXIT_OK;
}

int cli_window(int argc, char **argv)
{
    if (argc < 2)
        return cli_usage_error("window", "missing the action: flare window open DIR --for "
                                         "DURATION [--at TIME]");
    const char *action = argv[1];
    if (cli_is_help(action)) {
        fputs(window_help, stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(action, "open") == 0)
        return window_open(argc, argv);
    if (action[0] == '-')
        return cli_usage_error("window", "unknown option '%s'", action);
    return cli_usage_error("window",
                           "unknown action '%s' (the one action is open: flare window "
                           "open DIR --for DURATION [--at TIME])",
                           action);
}
