// consumer.cpp: a C++ program built against an installed flare through
// find_package(flare) (tests/install/consumer/CMakeLists.txt), which proves
// the public headers compile as C++ and link from C++.
//
// Starts a session from the environment (FLARE_OUTPUT_DIR), records one
// scope, prints the session directory on stdout and exits 0; on any failure
// it says which call failed on stderr and exits 1.
#include <flare/flare.h>
#include <flare/replay.h>
#include <flare/sim.h>

#include <cstdio>
#include <cstring>

namespace
{

bool ok(const char *what, int status)
{
    if (status != FLARE_OK)
        std::fprintf(stderr, "consumer_cxx: %s: %s\n", what, flare_strerror(status));
    return status == FLARE_OK;
}

} // namespace

int main()
{
    if (std::strcmp(flare_version(), FLARE_VERSION_STRING) != 0) {
        std::fprintf(stderr, "consumer_cxx: library %s, headers %s\n", flare_version(),
                     FLARE_VERSION_STRING);
        return 1;
    }
    if (!ok("flare_init", flare_init(nullptr)))
        return 1;
    char directory[4096];
    bool good = ok("flare_session_dir", flare_session_dir(directory, sizeof(directory)));
    good = ok("flare_scope_begin", flare_scope_begin("install_check_cxx")) && good;
    good = ok("flare_scope_end", flare_scope_end()) && good;
    good = ok("flare_shutdown", flare_shutdown()) && good;
    if (good)
        std::printf("%s\n", directory);
    return good ? 0 : 1;
}
