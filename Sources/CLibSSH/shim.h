#ifndef CLIBSSH_SHIM_H
#define CLIBSSH_SHIM_H
/* libssh as installed by the system (pkg-config libssh). Only SSHCore includes this. */
#include <libssh/libssh.h>
#include <libssh/callbacks.h>
#include <libssh/sftp.h>
#endif
