//! The machine-wide service demand (`system_service_demand_us`: the machine's busy CPU time
//! per transaction) with `--omit`: the warm-up's CPU is out of its window too. It counts
//! every process's work, so it runs alone ([`crate::alone`]): beside the `together` tests a
//! neighbour's burst moved it by half (1.5× once with three test threads).

use crate::common;

use common::{f, run_json};

/// With the warm-up in its window and not in its transactions, the machine-wide service
/// demand would double; it stays within the tries' noise of a run without one.
#[test]
fn system_service_demand_leaves_the_warm_up_out() {
    let _alone = crate::alone();
    let plain = run_json(&["rr", "-l", "1s"]);
    let omitted = run_json(&["rr", "-l", "1s", "--omit", "1s"]);
    let key = "system_service_demand_us";
    let a = f(&plain, &format!("/cpu/client/{key}"));
    let b = f(&omitted, &format!("/cpu/client/{key}"));
    assert!(
        (0.6..1.5).contains(&(b / a)),
        "{key}: {b:.2} with a warm-up vs {a:.2} without"
    );
}
