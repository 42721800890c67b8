/*
 * sshcore.h - the public interface of SSHCore: an umbrella over one header per
 * object (errors, state machines, connections, session channels, bridges,
 * remote forwards, helpers).
 *
 * SSHCore is the only code in this package that calls libssh. This header
 * deliberately does not include libssh: it exposes opaque handles, plain
 * structs and completion callbacks only, so `import SSHCore` in Swift exposes
 * no ssh_* symbol.
 *
 * Threading: every connection owns one worker thread. All libssh calls for a
 * connection run on that thread. Every function in this header may be called
 * from any thread and never blocks on the network. Completion callbacks run on
 * the worker thread, or, for a cancelled operation, on the thread that called
 * the cancel function. Each completion is called exactly once.
 */
#ifndef SSHCORE_H
#define SSHCORE_H

#include "sshcore_error.h"
#include "sshcore_fsm.h"
#include "sshcore_conn.h"
#include "sshcore_exec.h"
#include "sshcore_bridge.h"
#include "sshcore_rforward.h"
#include "sshcore_support.h"

#endif /* SSHCORE_H */
