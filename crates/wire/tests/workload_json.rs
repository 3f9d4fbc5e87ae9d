//! A workload's JSON is the same with typed parameter structs as it was with struct
//! variants: `kind` beside the parameters, defaults left out, unknown keys refused.

use virtperf_wire::{CrrParams, Unit, Wait, Workload};

#[test]
fn parameters_sit_beside_kind_and_defaults_stay_out() {
    let w = Workload::crr(64, 128);
    let v = serde_json::to_value(&w).expect("serializes");
    assert_eq!(
        v,
        serde_json::json!({"kind": "crr", "request": 64, "response": 128})
    );
    let back: Workload = serde_json::from_value(v).expect("reads back");
    assert_eq!(back, w);
    let spin: Workload = serde_json::from_str(
        r#"{"kind":"crr","request":1,"response":1,"client_wait":{"mode":"spin"},"flows":4,"threads":2}"#,
    )
    .expect("reads");
    let Workload::Crr(CrrParams {
        client_wait, flows, ..
    }) = spin
    else {
        panic!("not crr: {spin:?}");
    };
    assert_eq!((client_wait, flows), (Wait::Spin, 4));
}

#[test]
fn an_unknown_key_is_refused_with_its_name() {
    let e = serde_json::from_str::<Workload>(r#"{"kind":"rr","request":1,"response":1,"bogus":3}"#)
        .expect_err("refused");
    assert!(e.to_string().contains("bogus"), "{e}");
    let e =
        serde_json::from_str::<Workload>(r#"{"kind":"nosuch","bytes":1}"#).expect_err("refused");
    assert!(e.to_string().contains("nosuch"), "{e}");
}

#[test]
fn each_workload_answers_its_unit_and_capabilities() {
    let rr = Workload::rr(1, 1);
    assert_eq!(rr.kind().unit(), Unit::Transactions);
    assert!(rr.kind().timed() && rr.kind().ticks() && rr.kind().takes_mptcp());
    let crr = Workload::crr(1, 1);
    assert!(!crr.kind().takes_mptcp(), "crr opens its own connections");
    let http: Workload = serde_json::from_str(r#"{"kind":"http","bytes":10}"#).expect("reads");
    assert_eq!(http.kind().unit(), Unit::Bytes);
    assert!(!http.is_timed() && !http.kind().takes_interval() && http.kind().counted());
    assert_eq!(Unit::Bytes.in_demand_units(2048.0), 2.0);
    assert_eq!(Unit::Bytes.in_events_units(2e6), 2.0);
    assert_eq!(Unit::of_name(Unit::Bytes.demand_name()), Some(Unit::Bytes));
    assert_eq!(Unit::of_name(Unit::Bytes.events_name()), Some(Unit::Bytes));
    assert_eq!(
        Unit::of_name(Unit::Transactions.events_name()),
        Some(Unit::Transactions)
    );
}
