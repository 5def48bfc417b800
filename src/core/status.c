/*
 * status.c: names and texts of flare_status codes, generated from the one
 * X-macro list in flare.h so they cannot drift apart.
 */
#include "flare/flare.h"

FLARE_API const char *flare_strerror(int status)
{
    switch (status) {
#define FLARE_STATUS_TEXT_(name, value, text)                                                      \
    case value:                                                                                    \
        return text;
        FLARE_STATUS_MAP(FLARE_STATUS_TEXT_)
#undef FLARE_STATUS_TEXT_
    }
    return "unknown flare status";
}

FLARE_API const char *flare_status_name(int status)
{
    switch (status) {
#define FLARE_STATUS_NAME_(name, value, text)                                                      \
    case value:                                                                                    \
        return #name;
        FLARE_STATUS_MAP(FLARE_STATUS_NAME_)
#undef FLARE_STATUS_NAME_
    }
    return "UNKNOWN";
}

FLARE_API const char *flare_version(void)
{
    return FLARE_VERSION_STRING;
}
