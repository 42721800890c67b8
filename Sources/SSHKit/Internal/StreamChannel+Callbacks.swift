internal import SSHCore

/// The core's callbacks of a streamed channel (on the worker thread, or a cancelling
/// thread for the completion), each handing the event to the retained StreamChannel.
extension StreamChannel {
    // MARK: callbacks from C

    /// The core callbacks of a streamed channel whose context is a retained StreamChannel.
    static func callbacks(_ ctx: UnsafeMutableRawPointer) -> sshcore_stream_callbacks {
        sshcore_stream_callbacks(ctx: ctx, started: coreStreamStarted, data: coreStreamData, released: coreStreamReleased,
                                 eof: coreStreamEOF, flush: coreStreamFlush)
    }

    static func from(_ ctx: UnsafeMutableRawPointer?) -> StreamChannel {
        Unmanaged<StreamChannel>.fromOpaque(ctx!).takeUnretainedValue()
    }
}

private let coreStreamStarted: @convention(c) (UnsafeMutableRawPointer?, Int32) -> Void = { ctx, fallback in
    StreamChannel.from(ctx).started(fallback: fallback != 0)
}

/// Each packet as libssh has it: gathered into the channel's pending chunk (its one copy).
private let coreStreamData: @convention(c) (UnsafeMutableRawPointer?, Int32, UnsafePointer<UInt8>, Int) -> Void = {
    ctx, stream, bytes, len in
    guard len > 0 else { return }
    StreamChannel.from(ctx).received(stream: Int(stream), bytes: UnsafeBufferPointer(start: bytes, count: len))
}

/// The end of an I/O pass: the pending chunk goes to the reader.
private let coreStreamFlush: @convention(c) (UnsafeMutableRawPointer?) -> Void = { ctx in
    StreamChannel.from(ctx).flushed()
}

private let coreStreamEOF: @convention(c) (UnsafeMutableRawPointer?) -> Void = { ctx in
    StreamChannel.from(ctx).receivedEOF()
}

private let coreStreamReleased: @convention(c) (UnsafeMutableRawPointer?) -> Void = { ctx in
    // the core's reference, taken in start(); the core never calls back after this
    Unmanaged<StreamChannel>.fromOpaque(ctx!).release()
}

let coreStreamDone: @convention(c) (UnsafeMutableRawPointer?, OpaquePointer) -> Void = { ctx, op in
    let channel = StreamChannel.from(ctx)
    let err = sshcore_op_error(op).pointee
    guard err.code == Int32(sshcore_code.SSHCORE_E_OK.rawValue) else {
        channel.finished(.failure(SSHError(core: err)))
        return
    }
    channel.finished(.success(CoreExit.status(of: op)))
}

/// How a session channel's command ended, as the core recorded it.
enum CoreExit {
    static func status(of op: OpaquePointer) -> SSHExitStatus {
        var info = sshcore_exit_info()
        sshcore_stream_get_exit(op, &info)
        switch info.kind {
        case SSHCORE_EXIT_STATUS: return .exited(info.status)
        case SSHCORE_EXIT_SIGNAL: return .signaled(CoreStrings.string(info.signal), coreDumped: info.core_dumped != 0)
        default: return .unknown
        }
    }
}
