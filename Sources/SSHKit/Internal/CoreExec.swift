import Logging
internal import SSHCore

struct ExecRequest: Sendable {
    var command: String
    var fallback: String?
    var stdin: [UInt8]
    var environment: [(key: String, value: String)]
    var outputLimit: Int
}

final class ExecContinuation: Sendable {
    let continuation: CheckedContinuation<Result<SSHCommandResult, SSHError>, Never>
    init(_ c: CheckedContinuation<Result<SSHCommandResult, SSHError>, Never>) { continuation = c }
}

extension CoreConnection {
    func execute(_ request: ExecRequest, logger: Logger) async throws(SSHError) -> SSHCommandResult {
        let handle = CoreOpHandle()
        let result: Result<SSHCommandResult, SSHError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let box = Unmanaged.passRetained(ExecContinuation(continuation)).toOpaque()
                var err = sshcore_error()
                let op = start(request, ctx: box, err: &err)
                guard let op else {
                    Unmanaged<ExecContinuation>.fromOpaque(box).release()
                    continuation.resume(returning: .failure(SSHMisuse.check(SSHError(core: err), call: "execute")))
                    return
                }
                handle.attach(op)
            }
        } onCancel: {
            handle.cancel()
        }
        withExtendedLifetime(handle) {} // its deinit releases the op, after the result
        switch result {
        case .success(let r):
            logger.trace("exec finished", metadata: ["status": "\(r.exitStatus)"])
            return r
        case .failure(let e):
            throw e
        }
    }

    private func start(_ r: ExecRequest, ctx: UnsafeMutableRawPointer, err: inout sshcore_error) -> OpaquePointer? {
        let arena = CStringArena()
        defer { arena.wipeAndFree() }
        let env = r.environment.map { sshcore_env_var(name: arena.dup($0.key)!, value: arena.dup($0.value)!) }
        return env.withUnsafeBufferPointer { envBuf in
            r.stdin.withUnsafeBufferPointer { stdinBuf in
                var spec = sshcore_exec_spec(
                    command: arena.dup(r.command)!, fallback_command: arena.dup(r.fallback),
                    stdin_data: stdinBuf.baseAddress, stdin_len: stdinBuf.count,
                    env: envBuf.baseAddress, env_count: envBuf.count, output_limit: r.outputLimit)
                return sshcore_exec_start(pointer.raw, &spec, coreExecDone, ctx, &err)
            }
        }
    }
}

private let coreExecDone: @convention(c) (UnsafeMutableRawPointer?, OpaquePointer) -> Void = { ctx, op in
    let box = Unmanaged<ExecContinuation>.fromOpaque(ctx!).takeRetainedValue()
    let err = sshcore_op_error(op).pointee
    guard err.code == Int32(sshcore_code.SSHCORE_E_OK.rawValue) else {
        box.continuation.resume(returning: .failure(SSHError(core: err)))
        return
    }
    var r = sshcore_exec_result()
    sshcore_exec_get_result(op, &r)
    let stdout = r.out_len > 0 ? Array(UnsafeBufferPointer(start: r.out, count: r.out_len)) : []
    let stderr = r.err_len > 0 ? Array(UnsafeBufferPointer(start: r.err, count: r.err_len)) : []
    let status: SSHExitStatus
    switch r.exit_kind {
    case SSHCORE_EXIT_STATUS: status = .exited(r.exit_status)
    case SSHCORE_EXIT_SIGNAL: status = .signaled(CoreStrings.string(r.exit_signal), coreDumped: r.core_dumped != 0)
    default: status = .unknown
    }
    box.continuation.resume(returning: .success(
        SSHCommandResult(stdout: stdout, stderr: stderr, exitStatus: status,
                         usedEnvironmentFallback: r.env_fallback_used != 0)))
}
