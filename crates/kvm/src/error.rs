//! The one error type of the KVM benchmarks: every variant renders as one line.

/// Everything that can go wrong; every variant renders as one line meant for a human.
#[derive(Debug, thiserror::Error)]
pub enum KvmError {
    /// `/dev/kvm` cannot be opened (missing, permission, not x86 …): the benchmarks cannot run here.
    #[error("{0}")]
    Unavailable(String),
    /// A KVM ioctl failed; `what` names it so the message says which step broke.
    #[error("{what} failed: {error}")]
    Ioctl {
        /// The ioctl or step that failed, e.g. `KVM_CREATE_IRQCHIP`.
        what: &'static str,
        /// The errno the kernel returned. Not marked as the source: it is in the message,
        /// and the CLI prints the chain (`{:#}`), which would say it twice.
        error: std::io::Error,
    },
    /// The guest did something the benchmark did not expect (unexpected exit, exception, timeout).
    #[error("guest: {0}")]
    Guest(String),
    /// The binary statistics from `KVM_GET_STATS_FD` could not be read or parsed.
    #[error("KVM stats: {0}")]
    Stats(String),
    /// `/sys/kernel/debug/kvm` could not be read.
    #[error("{0}")]
    Debugfs(String),
    /// The options make no sense (zero wake-ups, min delay > max delay, CPU out of range …).
    #[error("invalid options: {0}")]
    Options(String),
    /// A plain system call (affinity, clock, mmap) failed.
    #[error("{what} failed: {error}")]
    Os {
        /// The call that failed.
        what: &'static str,
        /// The errno it returned (in the message, not the chain, as for `Ioctl`).
        error: std::io::Error,
    },
    /// The run was stopped (watchdog or the other thread failed) before it finished.
    #[error("aborted: {0}")]
    Aborted(String),
}

impl KvmError {
    /// Wraps a `kvm-ioctls` error (an errno) with the name of the step that produced it.
    pub(crate) fn ioctl(what: &'static str, e: kvm_ioctls::Error) -> Self {
        KvmError::Ioctl {
            what,
            error: std::io::Error::from_raw_os_error(e.errno()),
        }
    }

    /// Wraps the current `errno` after a failed libc call.
    pub(crate) fn os(what: &'static str) -> Self {
        KvmError::Os {
            what,
            error: std::io::Error::last_os_error(),
        }
    }
}
