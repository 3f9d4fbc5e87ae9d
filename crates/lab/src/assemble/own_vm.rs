//! The test's own VM is not other work. Where the far end ran in a VM on the host that
//! watched it (`--vm`, guest placements), that VM's threads ran the test: a side on this
//! host counted them in its `other_cpu_pct` and warned "expect noise" on every such run
//! (a TCG guest's QEMU: 95% of a CPU). Their CPU over the measured window comes out of it
//! here, and the warning is judged again on what is left.

use virtperf_wire::{HostVm, TestResult};

use super::{other_work_warning, OTHER_LOAD_WARN_PCT};

/// Attaches the host's view of the VM the test's far end ran in, and takes the VM's
/// threads' CPU out of the other work of each side that ran on this host (its boot id).
pub fn attach_vm(r: &mut TestResult, h: HostVm) {
    let vm_pct = vm_cpu_pct(&h);
    r.host_vm = Some(h);
    let (Some(vm_pct), Ok(here)) = (
        vm_pct,
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id"),
    ) else {
        return;
    };
    discount(r, vm_pct, here.trim());
}

/// The VM's threads' CPU over its window, in % of one CPU; None where no window was read.
fn vm_cpu_pct(h: &HostVm) -> Option<f64> {
    let w = h.window_s.filter(|w| *w > 0.0)?;
    Some(100.0 * h.classes.iter().map(|c| c.cpu_s).sum::<f64>() / w)
}

/// Takes `vm_pct` out of the other work of each side whose machine has boot id `here`,
/// and re-judges its warning.
fn discount(r: &mut TestResult, vm_pct: f64, here: &str) {
    // An unread boot id (empty) matches nothing.
    let on_host = |env: Option<&virtperf_wire::Env>| {
        !here.is_empty() && env.is_some_and(|e| e.boot_id == here)
    };
    let (client, server) = (on_host(Some(&r.env.client)), on_host(r.env.server.as_ref()));
    let sides = [
        ("client", Some(&mut r.cpu.client).filter(|_| client)),
        ("server", r.cpu.server.as_mut().filter(|_| server)),
    ];
    for (side, cpu) in sides {
        let Some(cpu) = cpu else { continue };
        let before = other_work_warning(side, cpu.other_cpu_pct, cpu.loadavg_1m);
        cpu.other_cpu_pct = (cpu.other_cpu_pct - vm_pct).max(0.0);
        let Some(at) = r.warnings.iter().position(|w| *w == before) else {
            continue;
        };
        if cpu.other_cpu_pct > OTHER_LOAD_WARN_PCT {
            r.warnings[at] = other_work_warning(side, cpu.other_cpu_pct, cpu.loadavg_1m);
        } else {
            r.warnings.remove(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::assemble::{assemble, Collected};
    use crate::plan::Plan;
    use virtperf_wire::{Env, FlowStats, SideReport, ThreadClass, Workload};

    fn vm(cpu_s: &[f64], window_s: Option<f64>) -> HostVm {
        HostVm {
            window_s,
            classes: cpu_s
                .iter()
                .map(|c| ThreadClass {
                    class: "vcpu".into(),
                    cpu_s: *c,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    /// An rr result whose client ran on a machine of boot id `client`, its server on one
    /// of boot id `server`.
    fn result(client: &str, server: &str) -> TestResult {
        let plan = Plan::new(Workload::rr(1, 1), Duration::from_secs(2));
        let side = SideReport {
            elapsed_s: 2.0,
            transactions: 1000,
            flows: vec![FlowStats {
                active_s: 2.0,
                transactions: 1000,
                ..Default::default()
            }],
            ..Default::default()
        };
        let env = |b: &str| Env {
            boot_id: b.into(),
            ..Default::default()
        };
        assemble(Collected {
            plan: &plan,
            target: "127.0.0.1:1".into(),
            client: side.clone(),
            client_hist: None,
            server: Some(side),
            client_env: env(client),
            server_env: Some(env(server)),
            downloads: vec![],
            url: String::new(),
        })
        .expect("assembled")
    }

    /// A client on this host beside its VM's 95% of a CPU: the VM's share is not other
    /// work, what is left (5%) warns of nothing; a server in another kernel keeps its own.
    #[test]
    fn the_vms_threads_come_out_of_the_hosts_other_work() {
        let mut r = result("host", "guest");
        r.cpu.client.other_cpu_pct = 100.0;
        let server = r.cpu.server.as_mut().expect("a server side");
        server.other_cpu_pct = 30.0;
        let loadavg = server.loadavg_1m;
        r.warnings = vec![
            other_work_warning("client", 100.0, r.cpu.client.loadavg_1m),
            other_work_warning("server", 30.0, loadavg),
            "another warning".into(),
        ];
        discount(
            &mut r,
            vm_cpu_pct(&vm(&[1.5, 0.4], Some(2.0))).unwrap(),
            "host",
        );
        assert!((r.cpu.client.other_cpu_pct - 5.0).abs() < 1e-9);
        assert_eq!(r.cpu.server.as_ref().unwrap().other_cpu_pct, 30.0);
        assert_eq!(
            r.warnings,
            vec![
                other_work_warning("server", 30.0, loadavg),
                "another warning".to_string()
            ]
        );
    }

    /// Where other work is left above the threshold, the warning says what is left; a VM
    /// whose window was not read takes nothing out.
    #[test]
    fn what_is_left_is_warned_of_and_an_unread_window_takes_nothing() {
        let mut r = result("host", "guest");
        r.cpu.client.other_cpu_pct = 60.0;
        r.cpu.client.loadavg_1m = Some(1.5);
        r.warnings = vec![other_work_warning("client", 60.0, Some(1.5))];
        discount(&mut r, vm_cpu_pct(&vm(&[0.2], Some(1.0))).unwrap(), "host");
        assert!((r.cpu.client.other_cpu_pct - 40.0).abs() < 1e-9);
        assert_eq!(
            r.warnings,
            vec![other_work_warning("client", 40.0, Some(1.5))]
        );
        assert_eq!(vm_cpu_pct(&vm(&[0.2], None)), None);
    }
}
