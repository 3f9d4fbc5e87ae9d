//! The trial labels of a stream explain run: what the battery measures, and the names
//! `show` finds them by.

/// The run name a stream explanation is stored under.
pub const RUN_NAME: &str = "explain-stream";
/// The stream explained, under the machine's own settings.
pub const AS_IS: &str = "stream as-is";
/// The as-is stream counting tracepoints (`--trace`): IPIs and idle entries per MB.
pub const TRACED: &str = "stream traced";
/// The same stream paced to half its as-is rate: each side's cost per MB off its limit.
pub const PACED: &str = "stream paced to half";
/// Remedy: 1 MiB sends (fewer system calls and larger writes per MB).
pub const LARGER_SENDS: &str = "stream larger sends";
/// Remedy: one flow more, on the same CPUs.
pub const SECOND_FLOW: &str = "stream second flow";
/// Remedy: `send(MSG_ZEROCOPY)`.
pub const ZEROCOPY: &str = "stream MSG_ZEROCOPY";
/// Remedy: 4 MiB socket buffers on both ends.
pub const BIG_BUFFERS: &str = "stream 4 MiB socket buffers";
/// Remedy: the loopback device's receive processing steered (RPS) to the receiving end's
/// CPU, off the sender's (where a loopback send's softirq runs it by default).
pub const RPS: &str = "stream RPS to the receiver's CPU";
/// Remedy: this machine's guest halt polling (`haltpoll.guest_halt_poll_ns`) at 200 µs, where
/// it can be written: an idle CPU polls before it halts, so a wake-up needs no IPI and no
/// halt exit (both VM exits in a guest without posted interrupts).
pub const HALT_POLL: &str = "stream guest halt polling 200 µs";
/// Remedy between namespaces: GRO on on the path's veth ends (a veth is made with it off:
/// on, its receive side runs NAPI and merges segments before the stack sees them).
pub const GRO_ON: &str = "stream GRO on on the veth";
/// The opposite toggle between namespaces: TSO off on the path's veth ends (made on), so
/// TCP's large sends are cut into MTU-sized packets before the veth: what TSO saves.
pub const TSO_OFF: &str = "stream TSO off on the veth";
/// Every remedy the battery measures, in the order reported (the veth's only between
/// namespaces: elsewhere not planned, and not listed).
pub const REMEDIES: [&str; 8] = [
    LARGER_SENDS,
    SECOND_FLOW,
    ZEROCOPY,
    BIG_BUFFERS,
    RPS,
    HALT_POLL,
    GRO_ON,
    TSO_OFF,
];
