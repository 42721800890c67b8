#include "sshkit_build.h"

#ifndef SSHKIT_BUILD_COMMIT
#define SSHKIT_BUILD_COMMIT "a checkout"
#endif

const char *
sshkit_build_version_line(void)
{
    return SSHKIT_VERSION " (" SSHKIT_BUILD_COMMIT ")";
}
