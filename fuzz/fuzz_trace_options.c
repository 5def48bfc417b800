/*
 * fuzz_trace_options.c: a libFuzzer target for the flare command's option
 * parsing: the options of `flare trace` and of every other subcommand
 * (replay, report, export, info, rules), called in-process with an argv,
 * and the parsers they share (core_parse_u32, core_duration_scan and
 * core_duration_parse, storm_guard_parse_rate, replay_parse_bytes).
 *
 * Input: byte 0 picks the subcommand (or the shared parsers); the rest is
 * split into arguments at each NUL or newline (at most FUZZ_ARGS_MAX).
 * Every argument is a heap block of its exact size, so AddressSanitizer
 * sees a read one byte too far.
 *
 * Nothing may run or be written: trace and replay get no command (the
 * arguments after the first "--" are cut, so the command is always
 * missing and they stop at a usage error after checking every option);
 * report and export can find no session ('/' in their arguments becomes
 * '_', an argument naming anything that exists here becomes a name that
 * does not, and $FLARE_OUTPUT_DIR names nothing), so export never writes its
 * -o FILE; info is called only with arguments it refuses, so it never
 * loads the GPU stack. For every input:
 *  - the subcommand returns 0, 1 or 2, and only what its command line can
 *    give: 0 only after --help (or `replay --list-sets`, or a rule list that
 *    `rules check` accepts), 1 never for trace and replay;
 *  - a usage error (2) prints "flare CMD: ..." and the hint "Run 'flare
 *    CMD --help' for usage." on stderr; a failure (1) prints "flare CMD:
 *    ..." (rules: a refused rule, on stdout);
 *  - a shared parser accepts only what its contract allows (the value in
 *    bounds, digits only for core_parse_u32, a duration that its canonical
 *    form reads back to), leaves its output alone on a refusal, and
 *    writes a terminated message within the error buffer, whatever its size;
 *  - nothing crashes, leaks or trips ASan/UBSan.
 * Any violation aborts, which libFuzzer reports as a crash with its input.
 *
 * Built only with clang (-DFLARE_FUZZ=ON); `ctest -L fuzz` runs it for a
 * bounded time on fuzz/corpus/trace_options with fuzz/options.dict. flare's
 * own output is captured, never shown, unless FLARE_FUZZ_VERBOSE is set.
 * It must never launch a command, load a GPU library or write a file.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "core/config.h"
#include "core/duration.h"
#include "flare/flare.h"
#include "replay/replay.h"
#include "storm/storm_guard.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_ARGS_MAX 48
/* What storm_guard.c accepts (storm_guard.h: "1000 to 100000000"). */
#define FUZZ_STORM_RATE_MIN 1000u
#define FUZZ_STORM_RATE_MAX 100000000u

#define CHECK(condition)                                                                           \
    do {                                                                                           \
        if (!(condition)) {                                                                        \
            fprintf(stderr, "fuzz_trace_options: %s:%d: check failed: %s\n", __FILE__, __LINE__,   \
                    #condition);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static int verbose;

/* ---- the subcommands ---- */

typedef struct subcommand {
    const char *name;
    int (*run)(int argc, char **argv);
} subcommand;

static const subcommand subcommands[] = {
    {"trace", cli_trace},   {"replay", cli_replay}, {"report", cli_report},
    {"export", cli_export}, {"info", cli_info},     {"rules", cli_rules},
};
#define SUBCOMMAND_COUNT (sizeof subcommands / sizeof subcommands[0])

/* What a call printed. */
typedef struct captured {
    char *out;
    size_t out_size;
    char *err;
    size_t err_size;
} captured;

/* Calls run with argv, stdout and stderr captured in memory. */
static int call_captured(const subcommand *command, int argc, char **argv, captured *what)
{
    FILE *out = open_memstream(&what->out, &what->out_size);
    FILE *err = open_memstream(&what->err, &what->err_size);
    CHECK(out != NULL && err != NULL);
    FILE *saved_stdout = stdout, *saved_stderr = stderr;
    stdout = out;
    stderr = err;
    int status = command->run(argc, argv);
    stdout = saved_stdout;
    stderr = saved_stderr;
    CHECK(fclose(out) == 0 && fclose(err) == 0);
    if (verbose)
        fprintf(stderr, "flare %s: %d\n--- stdout\n%s--- stderr\n%s", command->name, status,
                what->out, what->err);
    return status;
}

static int starts_with(const char *text, const char *prefix)
{
    return strncmp(text, prefix, strlen(prefix)) == 0;
}

static int ends_with(const char *text, size_t length, const char *suffix)
{
    size_t suffix_length = strlen(suffix);
    return length >= suffix_length &&
           memcmp(text + length - suffix_length, suffix, suffix_length) == 0;
}

static int any_argument(int argc, char **argv, const char *a, const char *b)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], a) == 0 || (b != NULL && strcmp(argv[i], b) == 0))
            return 1;
    return 0;
}

/* Makes an argument harmless as a path: no '/', and nothing that exists
 * (".", "..", a file or directory of the current directory). */
static void defuse_path(char **argument)
{
    for (char *p = *argument; *p != '\0'; p++)
        if (*p == '/')
            *p = '_';
    struct stat status;
    if ((*argument)[0] != '\0' && stat(*argument, &status) == 0) {
        free(*argument);
        *argument = strdup("fuzz-no-such-path");
        CHECK(*argument != NULL);
    }
}

static void check_subcommand(const subcommand *command, int argc, char **argv)
{
    char usage_prefix[64], hint[96];
    snprintf(usage_prefix, sizeof usage_prefix, "flare %s: ", command->name);
    snprintf(hint, sizeof hint, "Run 'flare %s --help' for usage.\n", command->name);
    int is_trace = command->run == cli_trace, is_replay = command->run == cli_replay;
    int is_info = command->run == cli_info, is_rules = command->run == cli_rules;

    /* info with arguments it accepts would load the GPU stack: only the
     * refusals and --help are its parsing. */
    if (is_info) {
        int refused = 0;
        for (int i = 1; i < argc; i++)
            refused |= strcmp(argv[i], "--json") != 0;
        if (!refused)
            return;
    }

    captured what = {0};
    int status = call_captured(command, argc, argv, &what);
    if (is_trace)
        cli_deep_when_reset();
    int help = any_argument(argc, argv, "-h", "--help");
    const char *problem = NULL;
    switch (status) {
    case CLI_EXIT_OK:
        if (is_replay)
            help |= any_argument(argc, argv, "--list-sets", NULL);
        if (!help && !is_rules)
            problem = "succeeded though nothing could run";
        else if (what.out_size == 0)
            problem = "succeeded and printed nothing";
        break;
    case CLI_EXIT_FAILURE:
        if (is_trace || is_replay)
            problem = "failed though nothing was prepared";
        else if (is_rules ? what.out_size == 0 : !starts_with(what.err, usage_prefix))
            problem = "failed without saying why";
        break;
    case CLI_EXIT_USAGE:
        if (!starts_with(what.err, usage_prefix) || !ends_with(what.err, what.err_size, hint))
            problem = "a usage error without its message and hint";
        break;
    default:
        problem = "an exit code other than 0, 1 and 2";
        break;
    }
    if (problem != NULL) {
        fprintf(stderr,
                "fuzz_trace_options: flare %s returned %d: %s\n--- stdout\n%s--- stderr\n%s",
                command->name, status, problem, what.out, what.err);
        abort();
    }
    free(what.out);
    free(what.err);
}

/* ---- the shared parsers ---- */

/* An error buffer of exactly size bytes (heap, so a byte too far is seen),
 * filled with a marker. */
static char *error_buffer(size_t size)
{
    char *buffer = malloc(size > 0 ? size : 1);
    CHECK(buffer != NULL);
    memset(buffer, '#', size > 0 ? size : 1);
    return buffer;
}

static void check_message(const char *buffer, size_t size)
{
    if (size == 0)
        return;
    CHECK(memchr(buffer, '\0', size) != NULL);
    CHECK(size == 1 || buffer[0] != '\0');
}

static void check_u32(const char *text)
{
    static const uint32_t bounds[][2] = {
        {0, UINT32_MAX}, {1, CORE_FLUSH_INTERVAL_MAX_MS}, {1, 100000}, {7, 7}};
    for (size_t i = 0; i < sizeof bounds / sizeof bounds[0]; i++) {
        uint32_t value = 0xdeadbeef;
        int status = core_parse_u32(text, bounds[i][0], bounds[i][1], &value);
        int digits = text[0] != '\0' && strspn(text, "0123456789") == strlen(text);
        /* strtoull saturates past its range, which is past UINT32_MAX too. */
        unsigned long long expected = digits ? strtoull(text, NULL, 10) : 0;
        int should = digits && expected <= UINT32_MAX && expected >= bounds[i][0] &&
                     expected <= bounds[i][1];
        CHECK(status == (should ? 0 : -1));
        CHECK(status == 0 ? value == expected : value == 0xdeadbeef);
    }
}

static void check_duration(const char *text, size_t length, uint8_t error_size)
{
    char *error = error_buffer(error_size);
    uint64_t value = 12345;
    core_duration_fault fault = core_duration_scan(text, length, &value, error, error_size);
    if (fault == CORE_DURATION_FAULT_NONE) {
        /* The canonical form reads back to the same value. */
        char canonical[64];
        core_duration_format(value, canonical, sizeof canonical);
        uint64_t again = 0;
        CHECK(core_duration_scan(canonical, strlen(canonical), &again, NULL, 0) ==
              CORE_DURATION_FAULT_NONE);
        CHECK(again == value);
    } else {
        CHECK(value == 12345);
        check_message(error, error_size);
    }
    static const uint64_t bounds[][2] = {
        {0, UINT64_MAX}, {1, UINT64_MAX}, {1, 24ull * 3600 * 1000000000}, {1000000, 1000000000}};
    for (size_t i = 0; i < sizeof bounds / sizeof bounds[0]; i++) {
        uint64_t bounded = 54321;
        memset(error, '#', error_size > 0 ? error_size : 1);
        int status = core_duration_parse(text, length, bounds[i][0], bounds[i][1], &bounded, error,
                                         error_size);
        int should =
            fault == CORE_DURATION_FAULT_NONE && value >= bounds[i][0] && value <= bounds[i][1];
        CHECK(status == (should ? FLARE_OK : FLARE_ERR_INVALID_ARGUMENT));
        if (should) {
            CHECK(bounded == value);
        } else {
            CHECK(bounded == 54321);
            check_message(error, error_size);
        }
    }
    free(error);
}

static void check_storm_rate(const char *text, uint8_t error_size)
{
    char *error = error_buffer(error_size);
    uint64_t rate = 777;
    int status = storm_guard_parse_rate(text, &rate, error, error_size);
    if (status == FLARE_OK) {
        CHECK(rate == 0 || (rate >= FUZZ_STORM_RATE_MIN && rate <= FUZZ_STORM_RATE_MAX));
        CHECK(text[0] >= '0' && text[0] <= '9' ? 1 : strcmp(text, "off") == 0);
    } else {
        CHECK(status == FLARE_ERR_INVALID_ARGUMENT);
        CHECK(rate == 777);
        check_message(error, error_size);
    }
    free(error);
}

static void check_bytes(const char *text, uint8_t error_size)
{
    char *error = error_buffer(error_size);
    uint64_t bytes = 999;
    int status = replay_parse_bytes("--footprint-budget", text, &bytes, error, error_size);
    if (status != 0) {
        CHECK(status == -1);
        CHECK(bytes == 999);
        check_message(error, error_size);
    }
    free(error);
}

/* ---- the input ---- */

int LLVMFuzzerInitialize(int *argc, char **argv[])
{
    (void)argc;
    (void)argv;
    const char *setting = getenv("FLARE_FUZZ_VERBOSE");
    verbose = setting != NULL && setting[0] != '\0' && strcmp(setting, "0") != 0;
    /* The default session directory names nothing, and nothing the parsers
     * read from the environment is set. */
    setenv("FLARE_OUTPUT_DIR", "fuzz-no-such-sessions", 1);
    static const char *const variables[] = {
        "FLARE_STORM_RATE",           "FLARE_DEEP_WHEN",
        "FLARE_DEEP_AFTER",           "FLARE_DEEP_FOR",
        "FLARE_REPLAY_HOST_SHADOW",   "FLARE_REPLAY_COUNTER_AVAILABILITY",
        "FLARE_REPLAY_SERIAL_DEVICES"};
    for (size_t i = 0; i < sizeof variables / sizeof variables[0]; i++)
        unsetenv(variables[i]);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    uint8_t selector = data[0];
    int parsers = selector % (SUBCOMMAND_COUNT + 2) >= SUBCOMMAND_COUNT + 1;
    /* trace, the subject of the issue, twice as often as each other. */
    const subcommand *command = &subcommands[selector % (SUBCOMMAND_COUNT + 2) % SUBCOMMAND_COUNT];

    /* argv[0] is the subcommand's name, as main passes it. */
    char *argv[FUZZ_ARGS_MAX + 2];
    int argc = 0;
    argv[argc] = strdup(command->name);
    CHECK(argv[argc] != NULL);
    argc++;
    uint8_t error_sizes[FUZZ_ARGS_MAX + 2] = {0};
    size_t lengths[FUZZ_ARGS_MAX + 2] = {0};
    size_t start = 1;
    for (size_t at = 1; at <= size && argc < FUZZ_ARGS_MAX + 1; at++) {
        if (at < size && data[at] != '\0' && data[at] != '\n')
            continue;
        size_t length = at - start;
        char *argument = malloc(length + 1);
        CHECK(argument != NULL);
        memcpy(argument, data + start, length);
        argument[length] = '\0';
        /* A shared parser also gets a few sizes of error buffer. */
        error_sizes[argc] = (uint8_t)(length > 0 ? data[start] % 9 : 0);
        if (error_sizes[argc] == 8)
            error_sizes[argc] = 192;
        lengths[argc] = length;
        argv[argc++] = argument;
        start = at + 1;
    }
    argv[argc] = NULL;

    if (parsers) {
        for (int i = 1; i < argc; i++) {
            check_u32(argv[i]);
            check_duration(argv[i], lengths[i], error_sizes[i]);
            check_storm_rate(argv[i], error_sizes[i]);
            check_bytes(argv[i], error_sizes[i]);
        }
    } else {
        /* Nothing after "--": no command ever runs. */
        int used = argc;
        for (int i = 1; i < argc; i++)
            if (strcmp(argv[i], "--") == 0) {
                used = i + 1;
                break;
            }
        /* Only report and export read a path before failing on something
         * else; trace's and replay's -o is never reached. */
        if (command->run == cli_report || command->run == cli_export)
            for (int i = 1; i < used; i++)
                defuse_path(&argv[i]);
        char *call[FUZZ_ARGS_MAX + 2];
        memcpy(call, argv, sizeof(char *) * (size_t)used);
        call[used] = NULL;
        check_subcommand(command, used, call);
    }
    for (int i = 0; i < argc; i++)
        free(argv[i]);
    return 0;
}
