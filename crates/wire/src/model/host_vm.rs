//! The hypervisor's view of a VM over a test's measured window (`--vm pid:N|qemu:NAME|
//! libvirt:DOMAIN|firecracker:PID`): what the guest cost the host, which the guest itself
//! cannot see.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A VM's host-side figures over the measured window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostVm {
    /// The VM as the user named it (`pid:1234`, `qemu:web1`, …).
    pub spec: String,
    /// The VM process's PID.
    pub pid: u32,
    /// What runs the VM: `qemu`, `firecracker` or the process's own name.
    pub vmm: String,
    /// `kvm` where the process holds a KVM VM, `tcg` where its vCPU threads say so, null
    /// where neither could be told.
    pub accel: Option<String>,
    /// Seconds between the two samples (the measured window, or `vm watch`'s duration);
    /// null where no sample was taken at the window (`missing.window` says why).
    pub window_s: Option<f64>,
    /// The unit per-unit figures divide by (`transaction` or `MB`), null without a test.
    pub unit: Option<String>,
    /// Per thread class (`vcpu`, `vhost`, `io`, `main`, `other`), those present.
    pub classes: Vec<ThreadClass>,
    /// KVM's counters for this VM over the window (its vCPUs' binary statistics, else
    /// debugfs `/sys/kernel/debug/kvm/PID-FD/`): exits by kind and halt polling; null
    /// where neither is readable (`missing` says why).
    pub kvm: Option<VmKvmCounters>,
    /// What could not be measured, with why (`exits`, `run_delay`, `kvm`, `threads`, …).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub missing: BTreeMap<String, String>,
}

impl HostVm {
    /// The figures `show` and `compare` judge, per unit of work: each thread class's CPU
    /// and its vCPUs' run-queue wait, and KVM's exits and halts. None without a unit.
    pub fn metrics(&self) -> Vec<crate::Metric> {
        let Some(unit) = self.unit.as_deref() else {
            return Vec::new();
        };
        let per_tr = crate::Unit::is_transactions(unit);
        let (us, count) = if per_tr {
            ("µs/tr", "/tr")
        } else {
            ("µs/MB", "/MB")
        };
        let m = |name, unit, value| crate::Metric {
            name,
            unit,
            value,
            higher_is_better: false,
        };
        let mut v = Vec::new();
        for c in &self.classes {
            let name = match c.class.as_str() {
                "vcpu" => "host_vcpu_us",
                "vhost" => "host_vhost_us",
                "io" => "host_io_us",
                "main" => "host_main_us",
                _ => continue,
            };
            if let Some(cpu) = c.per_unit.get("cpu_us") {
                v.push(m(name, us, *cpu));
            }
            if c.class == "vcpu" {
                if let Some(w) = c.per_unit.get("run_delay_us") {
                    v.push(m("host_vcpu_wait_us", us, *w));
                }
            }
        }
        if let Some(k) = &self.kvm {
            for (key, name) in [
                ("exits", "host_kvm_exits"),
                ("halt_exits", "host_halt_exits"),
            ] {
                if let Some(x) = k.per_unit.get(key) {
                    v.push(m(name, count, *x));
                }
            }
        }
        v
    }
}

/// One class of a VM's threads over the window, summed over its threads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadClass {
    /// `vcpu`, `vhost`, `io`, `main` or `other`.
    pub class: String,
    /// Threads in the class (at the window's end).
    pub threads: u32,
    /// Their thread names, one each (e.g. `CPU 0/KVM`).
    pub names: Vec<String>,
    /// CPU seconds on-CPU (the scheduler's exact runtime, `/proc/PID/task/TID/schedstat`).
    pub cpu_s: f64,
    /// User and system seconds (`/proc/PID/task/TID/stat`, clock ticks).
    pub user_s: f64,
    /// See `user_s`.
    pub sys_s: f64,
    /// Seconds runnable but waiting for a CPU (schedstat's run delay); null without
    /// schedstat.
    pub run_delay_s: Option<f64>,
    /// Voluntary context switches (the thread blocked: a halted vCPU, an idle vhost).
    pub voluntary_switches: u64,
    /// Involuntary ones (preempted while it could run).
    pub involuntary_switches: u64,
    /// Moves to another CPU (`/proc/…/sched`); null where the kernel does not show them.
    pub migrations: Option<u64>,
    /// Per unit of work: `cpu_us`, `run_delay_us`, `switches`; empty without a test.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub per_unit: BTreeMap<String, f64>,
}

/// KVM's own per-VM counters over the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VmKvmCounters {
    /// Where they were read: the vCPUs' binary statistics (`KVM_GET_STATS_FD` on
    /// descriptors duplicated with `pidfd_getfd`; works where debugfs is refused), or
    /// `debugfs`.
    pub source: String,
    /// With debugfs, the directories read (`/sys/kernel/debug/kvm/1234-11`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dirs: Vec<String>,
    /// Each counter's increase over the window, by file name (`exits`, `halt_exits`,
    /// `io_exits`, `halt_successful_poll`, `halt_wait_ns`, …).
    pub counts: BTreeMap<String, u64>,
    /// The same per unit of work; empty without a test.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub per_unit: BTreeMap<String, f64>,
    /// Files that could not be read, with why.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub refused: BTreeMap<String, String>,
}
