//! What the store's tests share: a temporary directory, and a run and trials as an
//! experiment would store them (an rr result with its HDR histogram).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::json;
use virtperf_store::{now_rfc3339, NewRun, NewTrial, TrialStatus};
use virtperf_wire::{Env, IdleState, TestResult, RESULT_SCHEMA};

/// A directory under the system temp dir, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "virtperf-store-{}-{}-{}",
            std::process::id(),
            name,
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    pub fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

pub fn this_host() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}

pub fn env() -> Env {
    Env {
        tool_version: "0.1.0".into(),
        git_commit: Some("abc123".into()),
        hostname: this_host(),
        boot_id: "b00t".into(),
        kernel: "6.1.0".into(),
        arch: "x86_64".into(),
        cpu_model: "Test CPU".into(),
        cpus: 2,
        hypervisor: Some("KVMKVMKVM".into()),
        clocksource: "tsc".into(),
        clock_read_ns: 18.5,
        nohz: "idle (CONFIG_NO_HZ_IDLE)".into(),
        idle_states: vec![IdleState {
            name: "POLL".into(),
            latency_us: Some(0),
            disabled: false,
        }],
        halt_poll: BTreeMap::from([("kvm.halt_poll_ns".into(), "200000".into())]),
        sysctls: BTreeMap::from([("net.core.busy_poll".into(), "0".into())]),
        ..Env::default()
    }
}

pub fn new_run(name: &str) -> NewRun {
    NewRun {
        name: name.into(),
        spec_text: "name = \"sweep\"\n[[config]]\nname = \"base\"\n".into(),
        env: env(),
        tool_version: "0.1.0".into(),
        git_commit: Some("abc123".into()),
        host: this_host(),
        pid: std::process::id(),
        planned_trials: 2,
        tags: Default::default(),
    }
}

/// A TestResult as `rr --json` prints it, parsed from JSON so that fields the wire crate
/// adds later (always with defaults, see docs/json.md) do not break this test.
pub fn test_result() -> TestResult {
    let side = json!({
        "system": {
            "user_pct": 10.0, "system_pct": 20.5, "irq_pct": 0.0, "softirq_pct": 0.5,
            "steal_pct": 0.0, "guest_pct": 0.0, "idle_pct": 69.0, "busy_pct": 31.0,
            "per_cpu_busy_pct": [50.0, 12.0]
        },
        "process_user_s": 0.1,
        "process_system_s": 0.4,
        "service_demand_us": 12.5,
        "system_service_demand_us": 25.0
    });
    let env = serde_json::to_value(env()).unwrap();
    serde_json::from_value(json!({
        "schema": RESULT_SCHEMA,
        "workload": {"kind": "rr", "request": 64, "response": 64},
        "duration_s": 1.0,
        "client_cpu": 0,
        "server_cpu": 1,
        "target": "127.0.0.1:40000",
        "outcome": {
            "kind": "rr",
            "transactions": 40000,
            "server_transactions": 40000,
            "elapsed_s": 1.0001,
            "rate_per_s": 39996.0,
            "latency": {
                "count": 40000, "mean_us": 24.9, "stdev_us": 3.1, "min_us": 20.0,
                "p50_us": 24.0, "p90_us": 28.0, "p99_us": 40.0, "p999_us": 90.0,
                "max_us": 300.0
            },
            "histogram": "HISTFAAAACR4nJNpmSzMwMDAwgABzFCaEUrzMEAEmZQAAKdpBZE="
        },
        "cpu": {"unit": "transaction", "same_host": true, "client": side, "server": side},
        "env": {"client": env, "server": env},
        "warnings": ["both sides share one machine"]
    }))
    .unwrap()
}

pub fn ok_trial(seq: u32) -> NewTrial {
    NewTrial {
        seq,
        config: "base".into(),
        workload: "rr".into(),
        point: json!({"request": 64, "response": 64}),
        point_label: "request=64 response=64".into(),
        repetition: 1,
        status: TrialStatus::Ok,
        error: None,
        result: Some(test_result()),
        detail: None,
        metric: Some(39_996.0),
        metric_name: "rate_per_s".into(),
        started_at: now_rfc3339(),
        duration_s: 1.25,
    }
}

pub fn failed_trial(seq: u32) -> NewTrial {
    NewTrial {
        seq,
        config: "tuned".into(),
        workload: "rr".into(),
        point: json!({"request": 1024, "response": 1}),
        point_label: "request=1024 response=1".into(),
        repetition: 2,
        status: TrialStatus::Failed,
        error: Some("agent 10.0.0.2:12865: connection refused".into()),
        result: None,
        detail: None,
        metric: None,
        metric_name: "rate_per_s".into(),
        started_at: now_rfc3339(),
        duration_s: 0.01,
    }
}
