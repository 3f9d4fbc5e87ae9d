//! The machine-wide service demand (`system_service_demand_us`: the machine's busy CPU time
//! per transaction) with `--omit`: the warm-up's CPU is out of its window too. It counts
//! every process's work, so it runs alone ([`crate::alone`]): beside the `together` tests a
//! neighbour's burst moved it by half (1.5× once with three test threads).

use crate::common;

use common::{f, run_json};

/// With the warm-up in its window and not in its transactions, the machine-wide service
/// demand would double; it stays within the tries' noise of a run without one.
///
/// Both runs are pinned to the same CPUs: unpinned, the scheduler starts client and server
/// on one CPU and spreads them within about 250 ms, and on an Intel PVM guest a round
/// trip on one CPU is 10 times as fast (130 000 against 10 000 a second), so a first
/// second holds a fast quarter that a second after a warm-up does not (30 against 50 µs
/// of busy CPU per transaction: the warm-up doing its job, not leaking into the window).
#[test]
fn system_service_demand_leaves_the_warm_up_out() {
    let _alone = crate::alone();
    let cpus = match std::thread::available_parallelism() {
        Ok(n) if n.get() >= 2 => "0,1",
        _ => "0,0",
    };
    let plain = run_json(&["rr", "--cpus", cpus, "-l", "1s"]);
    let omitted = run_json(&["rr", "--cpus", cpus, "-l", "1s", "--omit", "1s"]);
    let key = "system_service_demand_us";
    let a = f(&plain, &format!("/cpu/client/{key}"));
    let b = f(&omitted, &format!("/cpu/client/{key}"));
    assert!(
        (0.6..1.5).contains(&(b / a)),
        "{key}: {b:.2} with a warm-up vs {a:.2} without"
    );
}
