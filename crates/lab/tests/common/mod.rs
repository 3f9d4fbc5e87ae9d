//! What the in-process tests share: an agent on a thread.

use std::time::Duration;

use virtperf_lab::agent::{self, AgentConfig};
use virtperf_lab::plan::Target;

/// Starts an agent on a thread on 127.0.0.1:0 (it serves until the test process ends) and
/// returns where it is. Concurrent, so the tests neither take nor wait for the machine lock.
pub fn agent(token: &str, allow_drive: bool) -> Target {
    let cfg = AgentConfig {
        bind: [127, 0, 0, 1].into(),
        port: 0,
        token: Some(token.to_string()),
        max_clients: 16,
        max_duration: Duration::from_secs(60),
        verbose: false,
        allow_drive,
        concurrent: Some(16),
        max_flows: agent::DEFAULT_MAX_FLOWS,
        max_threads: agent::DEFAULT_MAX_THREADS,
        data_ports: None,
    };
    let listener = agent::bind(&cfg).expect("bind");
    let addr = listener.local_addr().expect("address");
    std::thread::spawn(move || agent::serve(listener, cfg));
    Target::at(addr, token)
}
