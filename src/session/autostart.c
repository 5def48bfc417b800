/*
 * autostart.c: starts a session when libflare is loaded into a process that
 * `flare trace` launched (FLARE_SESSION_DIR is set), and ends it at exit.
 *
 * Linked into libflare.so only: the flare command and the tests link the
 * internal library without it, so they never profile themselves. It must
 * never abort or print unless FLARE_DEBUG is set; a failure to start is
 * left in flare.log and noticed by the launcher (no process row).
 */
#include <stdio.h>
#include <stdlib.h>

#include "core/log.h"
#include "session/session.h"
#include "flare/flare.h"

static void end_session_at_exit(void)
{
    flare_shutdown();
}

__attribute__((constructor)) static void start_session_if_launched(void)
{
    if (getenv("FLARE_SESSION_DIR") == NULL)
        return;
    int status = flare_init(NULL);
    if (status == FLARE_OK)
        atexit(end_session_at_exit);
}
