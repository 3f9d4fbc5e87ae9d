//! `virtperf pcap` on captures the tests make themselves with `--capture` (tcpdump), checked
//! against tshark where installed.

/// The capture writer of the analyzer's own tests: real headers, checksums and file formats.
#[path = "../../pcap/tests/common/mod.rs"]
mod capture;
use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use capture::{pcap_of, standard_conv, Conv, ACK, FIN, PSH};
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

/// The tcpdump `--capture` starts is the test's own tool: its CPU is counted apart from
/// other work (which read 24% of a CPU and "expect noise" from it alone on a quiet
/// machine), named beside it, and absent without a capture.
#[test]
fn the_capture_recorders_cpu_is_its_own_not_other_work() {
    if !have("tcpdump") {
        virtperf_testkit::skip("tcpdump", "tcpdump not installed (apt-get install tcpdump)");
        return;
    }
    let cap = tmp("crr.pcap");
    let cpu = |capture: bool| {
        let mut cmd = vp();
        cmd.args(["crr", "-l", "1s", "--json"]);
        if capture {
            cmd.arg("--capture").arg(&cap);
        }
        let out = cmd.output().expect("run");
        common::assert_ok(&out);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        v["cpu"]["client"].clone()
    };
    let with = cpu(true);
    // Thousands of connections' packets, each written at once (-U, immediate mode): far
    // more than one 10 ms tick of tcpdump's CPU.
    let pct = with["capture_cpu_pct"]
        .as_f64()
        .unwrap_or_else(|| panic!("{with}"));
    assert!(pct > 0.0 && pct <= 100.0, "{with}");
    assert!(with["other_cpu_pct"].as_f64().is_some(), "{with}");
    assert!(cpu(false).get("capture_cpu_pct").is_none());
    let _ = std::fs::remove_file(&cap);
}

#[test]
fn captured_test_traffic_matches_tshark_per_connection() {
    if !have("tcpdump") {
        virtperf_testkit::skip("tcpdump", "tcpdump not installed (apt-get install tcpdump)");
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
        virtperf_testkit::skip("tshark", "tshark cross-check: tshark not installed");
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

fn eth(ip: &[u8]) -> Vec<u8> {
    capture::ethernet(capture::ethertype_of(ip), ip)
}

/// Writes `bytes` to a fresh temporary file named after `name`.
fn write(name: &str, bytes: &[u8]) -> PathBuf {
    let p = tmp(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn pcap(args: &[&Path], flags: &[&str]) -> Output {
    vp().arg("pcap").args(args).args(flags).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The standard exchange, then a second connection cut short by the end of the file: `cut`
/// bytes of its last record are kept. Returns the file and that record's offset.
fn cut_capture(cut: usize) -> (Vec<u8>, usize) {
    let mut v = standard_conv("10.0.0.2:40000", "10.0.0.1:80");
    let mut w = Conv::new("10.0.0.3:40001", "10.0.0.1:80", 7000, 9000);
    w.handshake(5000, 5100, 5150);
    w.send(6000, true, ACK | PSH, 300);
    w.send(7000, true, ACK | PSH, 300);
    v.pkts.extend(w.pkts);
    let whole = pcap_of(&v, 1, false, false, eth);
    // The last record holds a 300-byte request: 16 + 14 + 20 + 20 + 300 bytes.
    let last = whole.len() - (16 + 54 + 300);
    (whole[..last + cut].to_vec(), last)
}

#[test]
fn a_cut_capture_is_reported_up_to_the_cut_beside_an_intact_one() {
    let (cut, at) = cut_capture(30);
    let cut = write("cut.pcap", &cut);
    let whole = write(
        "whole.pcap",
        &pcap_of(
            &standard_conv("10.0.9.2:1234", "10.0.9.1:80"),
            1,
            false,
            false,
            eth,
        ),
    );
    let out = pcap(&[&cut, &whole], &[]);
    common::assert_ok(&out);
    let stdout = text(&out.stdout);
    // Every connection of both files: two of the cut one, one of the intact one.
    assert!(stdout.contains("10.0.0.2:40000-10.0.0.1:80 "), "{stdout}");
    assert!(stdout.contains("10.0.0.3:40001-10.0.0.1:80 "), "{stdout}");
    assert!(stdout.contains("10.0.9.2:1234-10.0.9.1:80 "), "{stdout}");
    assert_eq!(
        stdout.matches("summary: connections=2 ").count(),
        1,
        "{stdout}"
    );
    // One warning line naming the file and the offset.
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].starts_with(&format!(
            "virtperf: warning: {}: truncated packet record at byte {at}:",
            cut.display()
        )),
        "{stderr}"
    );

    // JSON and CSV print the same connections; JSON says where reading stopped.
    let out = pcap(&[&cut], &["--json"]);
    common::assert_ok(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["connections"].as_array().map(Vec::len), Some(2));
    assert_eq!(v["summary"]["stopped"]["offset"], at as u64);
    assert!(text(&out.stderr).contains(&format!("byte {at}")));
    let out = pcap(&[&cut], &["--csv"]);
    common::assert_ok(&out);
    assert_eq!(text(&out.stdout).lines().count(), 3);
    for f in [cut, whole] {
        let _ = std::fs::remove_file(f);
    }
}

#[test]
fn a_file_with_nothing_readable_fails_but_the_others_are_printed() {
    let whole = write(
        "ok.pcap",
        &pcap_of(
            &standard_conv("10.0.9.2:1234", "10.0.9.1:80"),
            1,
            false,
            false,
            eth,
        ),
    );
    let junk = write("nothing.pcap", b"not a capture at all, only text");
    let (first_cut, _) = cut_capture(0);
    // Only the file header and a piece of the first record.
    let early = write("early.pcap", &first_cut[..24 + 20]);
    let out = pcap(&[&junk, &whole], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains("10.0.9.2:1234-10.0.9.1:80 "));
    assert_one_line_error(&text(&out.stderr), &junk.display().to_string());
    assert_one_line_error(&text(&out.stderr), "byte 0");

    // Two such files: one error line each, and a last line that sums up.
    let out = pcap(&[&junk, &whole, &early], &["--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["connections"].as_array().map(Vec::len), Some(1));
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 3, "{stderr}");
    assert!(lines[0].contains(&junk.display().to_string()), "{stderr}");
    assert!(
        lines[1].contains(&early.display().to_string()) && lines[1].contains("byte 24"),
        "{stderr}"
    );
    assert_eq!(
        lines[2],
        "virtperf: error: nothing readable in 2 of the 3 capture files (above)"
    );
    for f in [whole, junk, early] {
        let _ = std::fs::remove_file(f);
    }
}

#[test]
fn idle_split_is_a_flag_and_off_by_default() {
    // 400 s of silence in the middle of one connection, sequence numbers continuing.
    let mut v = Conv::new("10.0.0.2:40000", "10.0.0.1:80", 1000, 5000);
    v.handshake(0, 100, 150);
    v.send(1000, true, ACK | PSH, 100);
    v.send(1020, false, ACK | PSH, 500);
    v.send(400_001_000, true, ACK | PSH, 100);
    v.send(400_001_020, false, ACK | PSH, 500);
    v.send(400_002_000, true, FIN | ACK, 0);
    v.send(400_002_050, false, FIN | ACK, 0);
    let f = write("quiet.pcap", &pcap_of(&v, 1, false, false, eth));
    let conns = |flags: &[&str]| {
        let out = pcap(&[&f], &[&["--json"], flags].concat());
        common::assert_ok(&out);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["connections"].as_array().map_or(0, Vec::len)
    };
    assert_eq!(conns(&[]), 1);
    assert_eq!(conns(&["--idle-split", "300s"]), 2);
    assert_eq!(conns(&["--idle-split", "500s"]), 1);
    let (code, err) = run_fail(&["pcap", f.to_str().unwrap(), "--idle-split", "soon"]);
    assert_eq!(code, 2);
    assert_one_line_error(&err, "invalid duration");
    let _ = std::fs::remove_file(f);
}

#[test]
fn columns_units_and_marks_in_the_seed_lines_and_clean_json_numbers() {
    // An 877 µs answer (a double nearest 877000 × 1e-9 prints 0.0008770000000000001).
    let mut v = Conv::new("10.0.0.2:40000", "10.0.0.1:80", 1000, 5000);
    v.handshake(0, 100, 150);
    v.send(1000, true, ACK | PSH, 100);
    v.send(1877, false, ACK | PSH, 500);
    v.send(3000, true, FIN | ACK, 0);
    v.send(3050, false, FIN | ACK, 0);
    // And a connection already open when the capture began.
    let mut w = Conv::new("10.0.0.3:40001", "10.0.0.1:80", 7000, 9000);
    w.send(4000, true, ACK | PSH, 100);
    w.send(4200, false, ACK | PSH, 500);
    v.pkts.extend(w.pkts);
    let f = write("columns.pcap", &pcap_of(&v, 1, false, false, eth));

    let out = pcap(&[&f], &["--columns", "handshake,p99,packets"]);
    common::assert_ok(&out);
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert!(
        lines[0].starts_with(
            "10.0.0.2:40000-10.0.0.1:80 duration=3.05ms bytes_transferred=600 handshake=150µs ["
        ),
        "{stdout}"
    );
    assert!(
        lines[0].contains("[10.0.0.1: avg=") && lines[0].contains("max=877µs packets=3 p99=877µs]"),
        "{stdout}"
    );
    assert!(
        lines[1].starts_with("10.0.0.3:40001-10.0.0.1:80 duration=200µs "),
        "{stdout}"
    );
    assert!(lines[1].contains(" handshake=- "), "{stdout}");
    assert!(
        lines[2].starts_with("  ^ partial: already open"),
        "{stdout}"
    );
    assert!(
        lines[3].starts_with("summary: connections=2 partial=1 "),
        "{stdout}"
    );

    let (code, err) = run_fail(&["pcap", f.to_str().unwrap(), "--columns", "packets,rtt"]);
    assert_eq!(code, 2);
    assert_one_line_error(&err, "choose from packets,retrans,handshake,p50,p99");

    let out = pcap(&[&f], &["--json"]);
    common::assert_ok(&out);
    let json = text(&out.stdout);
    assert!(json.contains("\"max_s\": 0.000877,"), "{json}");
    assert!(
        !json.contains("00000000001") && !json.contains("99999999"),
        "{json}"
    );

    // --compare prints units too, and its JSON is as clean.
    let out = pcap(&[&f, &f], &["--compare"]);
    common::assert_ok(&out);
    assert!(text(&out.stdout).contains("877µs"), "{}", text(&out.stdout));
    let out = pcap(&[&f, &f], &["--compare", "--json"]);
    let json = text(&out.stdout);
    assert!(json.contains("\"max_s\": 0.000877"), "{json}");
    let _ = std::fs::remove_file(f);
}
