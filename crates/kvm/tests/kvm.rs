//! Tests against the real /dev/kvm. Each one first asks `available()` and, where KVM cannot be
//! used, prints "skipped: <reason>" and passes: CI runners and containers often lack /dev/kvm.
//! They share one lock because they measure: two guests competing for 2 CPUs would distort
//! each other (and the assertions are on wide ranges or on KVM's own counters, not on timing).

use std::sync::Mutex;

use virtperf_kvm::{available, exits, halt, ExitOpts, HaltOpts};

static SERIAL: Mutex<()> = Mutex::new(());

fn kvm_or_skip() -> bool {
    match available() {
        Ok(_) => true,
        Err(e) => {
            virtperf_testkit::skip("kvm", &e.to_string());
            false
        }
    }
}

#[test]
fn pio_exit_round_trip_is_plausible() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !kvm_or_skip() {
        return;
    }
    let r = exits(&ExitOpts {
        iterations: 200,
        warmup: 20,
        cpu: None,
    })
    .expect("exits");
    assert!(r.tsc_khz > 100_000, "tsc_khz {}", r.tsc_khz);
    let pio = r.cases.iter().find(|c| c.name == "pio").expect("pio case");
    assert_eq!(pio.iterations, 200);
    let (ns, cycles) = (
        pio.ns.as_ref().expect("pio timed"),
        pio.cycles.as_ref().expect("pio counted in cycles"),
    );
    assert!(
        (200.0..1_000_000.0).contains(&ns.p50),
        "pio p50 {} ns",
        ns.p50
    );
    // ns and cycles describe the same samples: they must agree through tsc_khz (both are
    // 3-significant-digit histogram values, so allow a little more than 0.2 %).
    let khz = r.tsc_khz as f64;
    for (ns, cyc) in [
        (ns.p50, cycles.p50),
        (ns.mean, cycles.mean),
        (ns.max, cycles.max),
    ] {
        let expect = ns * khz / 1e6;
        assert!(
            (expect - cyc).abs() <= cyc * 0.005 + khz / 1e6,
            "{ns} ns × {khz} kHz = {expect} cycles, measured {cyc}"
        );
    }
    assert!(ns.min <= ns.p50 && ns.p50 <= ns.p99 && ns.p99 <= ns.max);
    let mmio = r
        .cases
        .iter()
        .find(|c| c.name == "mmio")
        .expect("mmio case");
    assert_eq!(mmio.iterations, 200);
    for c in &r.cases {
        println!("{} {:?} {:?}", c.name, c.ns, c.note);
    }
}

#[test]
fn halt_wakeup_latency_is_plausible() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !kvm_or_skip() {
        return;
    }
    let r = halt(&HaltOpts {
        wakeups: 50,
        delay_min_us: 50,
        delay_max_us: 500,
        halt_poll_ns: None,
        vcpu_cpu: None,
        injector_cpu: None,
    })
    .expect("halt");
    println!("{r:?}");
    assert_eq!(r.wakeups, 50);
    assert!(r.latency_ns.min > 0.0, "latency min {}", r.latency_ns.min);
    assert!(
        r.latency_ns.max < 100e6,
        "latency max {} ns",
        r.latency_ns.max
    );
    assert!(r.vcpu_cpu_ns_per_wakeup > 0.0);
    match r.stats.get("halt_exits") {
        Some(&h) => {
            assert!(h > 0, "halt_exits = 0 with 50–500 µs idle gaps");
            assert!(r.exits_per_wakeup >= Some(1.0), "{:?}", r.exits_per_wakeup);
        }
        None => {
            // Not read is not 0 exits per wake-up.
            assert_eq!(r.exits_per_wakeup, None, "{:?}", r.stats);
            println!(
                "no halt_exits counter: this kernel has no KVM binary stats, so only latency is checked"
            )
        }
    }
}

#[test]
fn per_vm_halt_polling_shows_in_the_counters() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Ok(info) = available().map_err(|e| {
        virtperf_testkit::skip("kvm", &e.to_string());
    }) else {
        return;
    };
    if !info.halt_poll_cap || !info.stats_fd {
        virtperf_testkit::skip(
            "kvm",
            "no KVM_CAP_HALT_POLL or no binary stats on this kernel",
        );
        return;
    }
    // Short idle gaps: KVM's adaptive window only grows while halts end within it.
    let run = |poll: Option<u64>| {
        halt(&HaltOpts {
            wakeups: 100,
            delay_min_us: 5,
            delay_max_us: 40,
            halt_poll_ns: poll,
            vcpu_cpu: None,
            injector_cpu: None,
        })
        .expect("halt")
    };
    let count = |r: &virtperf_kvm::HaltReport| r.stats.get("halt_successful_poll").copied();
    // KVM polls only while the vCPU thread is alone on its CPU; on a machine busy with other
    // work (other test binaries, other tenants) a whole run can go by without a poll, so
    // give it a few tries before concluding polling does nothing.
    let mut polled = run(Some(200_000));
    for _ in 0..9 {
        if count(&polled).unwrap_or(0) > 0 {
            break;
        }
        // Give a burst of other work (a parallel build, a benchmark) time to pass.
        std::thread::sleep(std::time::Duration::from_millis(300));
        polled = run(Some(200_000));
    }
    let off = run(Some(0));
    // None = the kvm module's default (kvm.halt_poll_ns), whatever this host set it to.
    let default = run(None);
    println!(
        "halt_successful_poll: 200 µs {:?}, 0 {:?}, module default {:?}",
        count(&polled),
        count(&off),
        count(&default)
    );
    assert!(
        count(&polled).unwrap_or(0) > 0,
        "no successful polls with a 200 µs window: {:?}",
        polled.stats
    );
    assert_eq!(count(&off), Some(0), "polling disabled but polls counted");
}
