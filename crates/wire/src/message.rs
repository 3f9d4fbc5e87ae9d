//! Control-protocol messages.
//!
//! A test is one control connection:
//! ```text
//! client                         agent
//! Hello{version,token}  ───▶
//!                       ◀───  Welcome{version,agent}     (or Error, then close)
//! Fingerprint           ───▶
//!                       ◀───  Env{env}
//! Prepare{workload,..}  ───▶
//!                       ◀───  Waiting{holder}  …         (while another measurement holds
//!                                                         the agent's machine; every 3 s)
//!                       ◀───  Ready{data_port, key}      (agent listens for data connections)
//!   … client opens data connections …
//! Start                 ───▶
//!                       ◀───  Started                    (agent took its CPU snapshot)
//!   … data flows for the test's duration …
//! Stop                  ───▶
//!                       ◀───  Report{side}               (agent's measurement of its half)
//! ```
//!
//! An agent started with `--allow-drive` (the guest agent virtperf boots) also runs the
//! *client* half of a test against another agent, so a guest can be the sending end:
//! ```text
//! Drive{to,plan}        ───▶     (agent runs the test against `to` as its client)
//!                       ◀───  Outcome{result}
//! ```
//! A client that runs two tests at once on one agent (`rr --under-load`) first holds the
//! agent's machine on a connection of its own, and presents the hold's id in the hello of
//! each test's connection, so neither test waits for the other:
//! ```text
//! Hold                  ───▶
//!                       ◀───  Waiting{holder}  …         (while another measurement holds it)
//!                       ◀───  Held{lock}                 (held until this connection closes)
//! ```
//! Such an agent also runs `virtperf explain`'s battery on its own machine (a guest's
//! wake-ups and idle exits can only be measured from inside it):
//! ```text
//! Explain{battery}      ───▶     (agent runs the battery, changing and restoring its knobs)
//!                       ◀───  Explained{battery}     (its environment and every trial)
//! ```
//! Any request may be answered with `Error{message}`, after which the agent closes the
//! connection. Unknown message types are malformed: the agent answers `Error` and closes.

use serde::{Deserialize, Serialize};

use crate::model::{Env, SideReport, SockOpts, TestResult, Workload};

/// Where a driving agent sends its test.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DriveTarget {
    /// Host or address of the other agent.
    pub host: String,
    /// Its control port.
    pub port: u16,
    /// Its token, if it has one.
    #[serde(default)]
    pub token: Option<String>,
    /// The id of a hold the client has on that agent's machine (`Held.lock`), presented in
    /// the driven test's hello.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<String>,
}

/// The address family of a test's connections (`-4`, `-6`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// IPv4 only.
    V4,
    /// IPv6 only.
    V6,
}

impl Family {
    /// Whether `a` is of this family.
    pub fn has(self, a: &std::net::SocketAddr) -> bool {
        matches!(
            (self, a),
            (Family::V4, std::net::SocketAddr::V4(_)) | (Family::V6, std::net::SocketAddr::V6(_))
        )
    }
}

/// A test's plan as it travels to an agent that drives it (`Drive`): every field of the
/// client's plan that is data. What calls back into the client's own process (live
/// interval output, the measured interval's hooks, a signal's cut) stays with it; a capture
/// file is never written where a peer names it (the client refuses `capture` on a driven
/// test), and the host's KVM counters are read by the client around the drive, on the host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DrivePlan {
    /// What to run.
    pub workload: Workload,
    /// Planned duration in milliseconds (0 for byte-count workloads).
    pub duration_ms: u64,
    /// CPU for the driving agent's data threads.
    #[serde(default)]
    pub client_cpu: Option<u32>,
    /// CPU for the other agent's data threads.
    #[serde(default)]
    pub server_cpu: Option<u32>,
    /// Downloads for `http`.
    #[serde(default)]
    pub count: u32,
    /// Socket options for both ends.
    #[serde(default)]
    pub sock: SockOpts,
    /// Record a time series with intervals this long, in milliseconds (`--interval`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_ms: Option<u64>,
    /// Count tracepoints on the driving machine's test CPUs (`--trace`): inside a guest,
    /// the guest's own view.
    #[serde(default)]
    pub trace: bool,
    /// With `trace`, every tracepoint virtperf knows (`--trace-all`).
    #[serde(default)]
    pub trace_all: bool,
    /// The critical-path trial after the test (`--timeline`).
    #[serde(default)]
    pub timeline: bool,
    /// Only this address family for the other agent's address (`-4`/`-6`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<Family>,
    /// Run this long before the measured interval, unmeasured (`--omit`), milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omit_ms: Option<u64>,
}

impl DrivePlan {
    /// `workload` for `duration_ms`, every other field at its default.
    pub fn new(workload: Workload, duration_ms: u64) -> DrivePlan {
        DrivePlan {
            workload,
            duration_ms,
            client_cpu: None,
            server_cpu: None,
            count: 0,
            sock: SockOpts::default(),
            interval_ms: None,
            trace: false,
            trace_all: false,
            timeline: false,
            family: None,
            omit_ms: None,
        }
    }
}

/// Version of this protocol. Peers refuse each other unless the numbers are equal.
/// 3: `Stream.recv_wait`, and the receiver's default loop changed from blocking to polling;
/// an older agent would ignore the field and measure with its own loop.
/// 4: `Hello.lock` and `Waiting`: an agent runs one measurement at a time on its machine.
/// 5: `Explain` and `Explained`.
/// 6: workloads' `threads` (flows multiplexed on epoll) and `protocol` (UDP), with their
/// results (`flow_spread`, `udp`); the side's virtio-net counters (`nic`). A v5 agent would
/// refuse such a workload as an unknown field, or run a UDP test over TCP had it ignored it.
/// 7: `Ready.key`: every data connection presents the test's key first, so a stranger who
/// connects to the data port first cannot take a flow's place.
/// 8: `Hold` and `Held` (one client's tests share an agent's machine), `DriveTarget.lock`.
/// 9: `End` (both sides count over the same measured interval), `SideReport.window_cpu_s`.
/// 10: workloads' parameters as one struct per kind (the JSON is unchanged), `Drive.plan`:
/// the whole plan (trace, timeline, family, …) instead of seven of its fields.
/// 11: `Prepare.omit_ms` and `Measure` (`--omit`: a warm-up before the measured interval);
/// a v10 agent would count the warm-up into the agent's half.
pub const PROTOCOL_VERSION: u32 = 11;

/// Length of a test's data-connection key, bytes.
pub const DATA_KEY_LEN: usize = 16;

/// One control message. Serialized as JSON with a `type` tag in snake case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Message {
    /// First message of a client: protocol version and the shared secret, if any.
    Hello {
        /// The client's [`PROTOCOL_VERSION`].
        version: u32,
        /// Token the agent was started with (`serve --token`), if any.
        #[serde(default)]
        token: Option<String>,
        /// The id of the machine lock the client holds for this measurement, if any: an
        /// agent on the same machine then knows the lock is held for this very test and
        /// does not wait for it.
        #[serde(default)]
        lock: Option<String>,
    },
    /// The agent accepts the client.
    Welcome {
        /// The agent's [`PROTOCOL_VERSION`].
        version: u32,
        /// Agent software name and version, for the record.
        agent: String,
    },
    /// Ask for the agent machine's environment fingerprint.
    Fingerprint,
    /// The agent's environment fingerprint.
    Env {
        /// The fingerprint.
        env: Box<Env>,
    },
    /// Set up the server half of a workload.
    Prepare {
        /// What to run.
        workload: Workload,
        /// Planned duration in milliseconds (0 for workloads bounded by a byte count); the
        /// agent uses it to bound the test even if the client vanishes.
        duration_ms: u64,
        /// CPU to pin the agent's data threads to.
        #[serde(default)]
        server_cpu: Option<u32>,
        /// Socket options for the agent's end of the data connections.
        #[serde(default)]
        sock: SockOpts,
        /// The warm-up before the measured interval (`--omit`), milliseconds: the agent's
        /// engines that count a window themselves (flows multiplexed on threads) start
        /// counting this long after `Start`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        omit_ms: Option<u64>,
    },
    /// Another measurement holds the agent's machine: the agent waits for it before it
    /// answers `Ready` (sent again every few seconds while it waits).
    Waiting {
        /// Who holds the machine (command, pid, run, since when).
        holder: String,
    },
    /// The server half listens for data connections on this port.
    Ready {
        /// TCP port on the agent's address.
        data_port: u16,
        /// The test's key, hex: the first bytes of every data connection (its
        /// [`DATA_KEY_LEN`] raw bytes). A connection that does not present it is closed
        /// and takes no flow's place. Sent only on the authenticated control connection.
        key: String,
    },
    /// Hold the agent's machine for this client until this connection closes (at most the
    /// agent's `--max-duration`): its other connections present the hold's id in their
    /// hello and run beside each other instead of one after the other.
    Hold,
    /// The agent holds its machine for the client (after any `Waiting`).
    Held {
        /// The hold's id, for the hello of the client's other connections; absent when the
        /// agent takes no lock (`serve --concurrent`, or no lock file on its machine), so
        /// there is nothing to wait for.
        #[serde(default)]
        lock: Option<String>,
    },
    /// Begin the measured interval.
    Start,
    /// The agent has started its measurement.
    Started,
    /// The warm-up (`--omit`) is over (sent by the client as it ends): the agent opens its
    /// measured interval now, so both sides count over the same one.
    Measure,
    /// The measured interval is over (sent by the client as it ends): the agent reads its
    /// counters now, so both sides count over the same interval, and keeps serving the
    /// transactions in flight until `Stop`.
    End,
    /// Stop serving and ask for the agent's half of the measurement.
    Stop,
    /// The agent's measurement of its half.
    Report {
        /// What the agent measured.
        side: Box<SideReport>,
    },
    /// Run the client half of a test against another agent (needs `serve --allow-drive`).
    Drive {
        /// The agent to run the test against.
        to: DriveTarget,
        /// The whole plan, as the driving agent's client half runs it.
        plan: DrivePlan,
    },
    /// The driven test's result, as its client assembled it.
    Outcome {
        /// The result.
        result: Box<TestResult>,
    },
    /// Run `virtperf explain`'s battery on the agent's machine (needs `serve --allow-drive`).
    /// The options and the answer are shaped by `virtperf_explain`; the protocol
    /// carries them as JSON objects so it does not depend on the results store's types.
    Explain {
        /// The battery's options.
        battery: serde_json::Value,
    },
    /// The battery's environment and trials, to be stored by the client.
    Explained {
        /// What was measured.
        battery: serde_json::Value,
    },
    /// The request failed; the connection closes after this.
    Error {
        /// One line saying what went wrong.
        message: String,
    },
}
