//! `virtperf pcap` on captures the tests make themselves with `--capture` (tcpdump), checked
//! against tshark where installed.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use common::{assert_one_line_error, run_fail, vp};

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("vp-pcap-{}-{name}", std::process::id()))
}

#[test]
fn captured_test_traffic_matches_tshark_per_connection() {
    if !have("tcpdump") {
        eprintln!("skipped: tcpdump not installed (apt-get install tcpdump)");
        return;
    }
    let cap = tmp("http.pcap");
    let out = vp()
        .args(["http", "--bytes", "300KB", "--count", "3", "--capture"])
        .arg(&cap)
        .output()
        .unwrap();
    common::assert_ok(&out);
    let out = vp().arg("pcap").arg(&cap).arg("--json").output().unwrap();
    common::assert_ok(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let conns = v["connections"].as_array().unwrap();
    // Three downloads, each its own connection with the whole body from the server.
    let downloads: Vec<&serde_json::Value> = conns
        .iter()
        .filter(|c| c["from_b"]["payload_bytes"].as_u64().unwrap_or(0) >= 300_000)
        .collect();
    assert_eq!(
        downloads.len(),
        3,
        "{}",
        serde_json::to_string_pretty(conns).unwrap()
    );
    for c in &downloads {
        assert_eq!(c["partial"], false);
        assert!(c["from_a"]["response"]["count"].as_u64().unwrap() > 0);
        assert!(c["handshake"]["rtt_s"].as_f64().is_some());
    }
    // The seed's shape by default.
    let text = vp().arg("pcap").arg(&cap).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("duration=") && text.contains("bytes_transferred=") && text.contains("avg="),
        "{text}"
    );

    if !have("tshark") {
        eprintln!("skipped tshark cross-check: tshark not installed");
        let _ = std::fs::remove_file(&cap);
        return;
    }
    // tshark's view: packets per connection (conv,tcp) and payload bytes per direction.
    let fields = Command::new("tshark")
        .args(["-r"])
        .arg(&cap)
        .args([
            "-T",
            "fields",
            "-e",
            "tcp.srcport",
            "-e",
            "tcp.dstport",
            "-e",
            "tcp.len",
        ])
        .output()
        .unwrap();
    assert!(fields.status.success());
    let mut t: BTreeMap<(u64, u64), (u64, u64)> = BTreeMap::new(); // (src,dst) -> (packets, payload)
    for line in String::from_utf8_lossy(&fields.stdout).lines() {
        let f: Vec<u64> = line
            .split('\t')
            .filter_map(|x| x.trim().parse().ok())
            .collect();
        if f.len() == 3 {
            let e = t.entry((f[0], f[1])).or_default();
            e.0 += 1;
            e.1 += f[2];
        }
    }
    for c in conns {
        let (pa, pb) = (
            c["a"]["port"].as_u64().unwrap(),
            c["b"]["port"].as_u64().unwrap(),
        );
        let ab = t.get(&(pa, pb)).copied().unwrap_or_default();
        let ba = t.get(&(pb, pa)).copied().unwrap_or_default();
        assert_eq!(
            c["from_a"]["packets"].as_u64().unwrap(),
            ab.0,
            "packets a→b of {pa}-{pb}"
        );
        assert_eq!(
            c["from_b"]["packets"].as_u64().unwrap(),
            ba.0,
            "packets b→a of {pa}-{pb}"
        );
        assert_eq!(
            c["from_a"]["payload_bytes"].as_u64().unwrap(),
            ab.1,
            "bytes a→b of {pa}-{pb}"
        );
        assert_eq!(
            c["from_b"]["payload_bytes"].as_u64().unwrap(),
            ba.1,
            "bytes b→a of {pa}-{pb}"
        );
    }
    let _ = std::fs::remove_file(&cap);
}

#[test]
fn bad_captures_give_one_line_with_the_offset() {
    let junk = tmp("junk.pcap");
    std::fs::write(&junk, b"this is not a capture file at all, just text").unwrap();
    let (code, err) = run_fail(&["pcap", junk.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert_one_line_error(&err, "byte");
    let (code, err) = run_fail(&["pcap", junk.to_str().unwrap(), "--compare"]);
    assert_eq!(code, 1);
    assert_one_line_error(&err, "two capture files");
    let _ = std::fs::remove_file(&junk);
    let (_, err) = run_fail(&["pcap", "/nonexistent/x.pcap"]);
    assert_one_line_error(&err, "x.pcap");
}
