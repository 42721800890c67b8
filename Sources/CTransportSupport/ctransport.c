#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "ctransport.h"

int ctransport_pipe2(int fds[2], int flags)
{
    return pipe2(fds, flags);
}

int ctransport_mkostemp(char *pattern, int flags)
{
    return mkostemp(pattern, flags);
}
