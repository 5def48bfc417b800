/*
 * messages.c: the words every subcommand shares: whether an argument asks
 * for help, and the two shapes of a complaint (cli.h): a usage error
 * ("flare COMMAND: ..." and a hint, exit 2) and a failure ("flare COMMAND:
 * ...", exit 1).
 *
 * Kept apart from main.c so that the subcommands can be called without the
 * flare command's main (the fuzz targets in fuzz/ call them in-process).
 * It must never exit or abort: it prints to stderr and returns the code.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

int cli_is_help(const char *argument)
{
    return strcmp(argument, "-h") == 0 || strcmp(argument, "--help") == 0;
}

int cli_usage_error(const char *command, const char *format, ...)
{
    va_list arguments;
    va_start(arguments, format);
    fprintf(stderr, "flare%s%s: ", command ? " " : "", command ? command : "");
    vfprintf(stderr, format, arguments);
    va_end(arguments);
    if (command != NULL)
        fprintf(stderr, "\nRun 'flare %s --help' for usage.\n", command);
    else
        fprintf(stderr, "\nRun 'flare --help' for usage.\n");
    return CLI_EXIT_USAGE;
}

int cli_failure(const char *command, const char *format, ...)
{
    va_list arguments;
    va_start(arguments, format);
    fprintf(stderr, "flare %s: ", command);
    vfprintf(stderr, format, arguments);
    va_end(arguments);
    fputc('\n', stderr);
    return CLI_EXIT_FAILURE;
}
