use super::*;
use virtperf_wire::{RrParams, StreamParams};

#[test]
fn sweep_expands_to_the_cartesian_product() {
    let s = parse(
        r#"
name = "x"
duration = "2s"
repetitions = 3
[[workload]]
kind = "stream"
send_size = [64, "1KiB", 4096]
reverse = [false, true]
[[config]]
name = "a"
[[config]]
name = "b"
sysctl = { "net.core.busy_poll" = 50 }
socket = { nodelay = true, busy_poll_us = 50 }
"#,
    )
    .unwrap();
    assert_eq!(s.points.len(), 6);
    assert_eq!(s.configs.len(), 2);
    assert_eq!(s.repeat, Repeat::Fixed(3));
    assert_eq!(s.points[1].label, "stream send_size=64 reverse=true");
    assert_eq!(
        s.points[2].workload,
        Workload::Stream(StreamParams {
            send_size: 1024,
            flows: 1,
            reverse: false,
            recv_size: None,
            recv_wait: None,
            threads: None,
            protocol: Default::default(),
            rate_bps: None,
            gso: false,
            gro: false,
            bidir: false,
            zerocopy: None,
            buf_offset: None,
        })
    );
    assert_eq!(s.points[0].duration, Duration::from_secs(2));
    assert_eq!(s.configs[1].knobs[0].1, "50");
    assert_eq!(s.configs[1].sock.busy_poll_us, Some(50));
}

#[test]
fn defaults() {
    let s = parse("name = \"d\"\n[[workload]]\nkind = \"rr\"\n").unwrap();
    assert_eq!(s.repeat, Repeat::Fixed(5));
    assert_eq!(s.configs[0].name, "default");
    assert_eq!(s.points[0].workload, Workload::rr(1, 1));
    assert_eq!(s.points[0].duration, Duration::from_secs(10));
}

/// `protocol` sweeps like any list; a UDP stream takes its rate and offloads; a size
/// no datagram holds is refused at its workload's line.
#[test]
fn protocol_sweeps_and_udp_streams_take_rate_and_offloads() {
    let s = parse(
        r#"
name = "u"
[[workload]]
kind = "rr"
protocol = ["tcp", "udp"]
loss_timeout = "20ms"
[[workload]]
kind = "stream"
protocol = "udp"
send_size = 1472
rate = "2gbit"
gso = true
"#,
    )
    .unwrap();
    assert_eq!(s.points.len(), 3);
    assert_eq!(s.points[1].label, "rr protocol=udp");
    assert_eq!(s.points[1].params["protocol"], "udp");
    assert_eq!(
        s.points[1].workload.protocol(),
        virtperf_wire::Protocol::Udp
    );
    assert!(matches!(
        s.points[1].workload,
        Workload::Rr(RrParams {
            loss_timeout_ms: Some(20),
            ..
        })
    ));
    assert_eq!(s.points[0].workload, Workload::rr(1, 1));
    match &s.points[2].workload {
        Workload::Stream(StreamParams {
            protocol,
            rate_bps,
            gso,
            gro,
            ..
        }) => {
            assert_eq!(*protocol, virtperf_wire::Protocol::Udp);
            assert_eq!(*rate_bps, Some(2_000_000_000));
            assert!(*gso && !*gro);
        }
        w => panic!("stream expected: {w:?}"),
    }
    let (line, m) = line_of_error(
        "name = \"u\"\n[[workload]]\nkind = \"stream\"\nprotocol = \"udp\"\nsend_size = 65508\n",
    );
    assert_eq!(line, 2, "{m}");
    assert!(m.contains("65507"), "{m}");
    // A TCP stream takes a rate too (the kernel paces it); GSO stays UDP's.
    let s = parse("name = \"u\"\n[[workload]]\nkind = \"stream\"\nrate = \"1gbit\"\n").unwrap();
    assert!(
        matches!(
            s.points[0].workload,
            Workload::Stream(StreamParams {
                rate_bps: Some(1_000_000_000),
                ..
            })
        ),
        "{:?}",
        s.points[0].workload
    );
    let (_, m) = line_of_error("name = \"u\"\n[[workload]]\nkind = \"stream\"\ngso = true\n");
    assert!(m.contains("--protocol udp"), "{m}");
}

fn line_of_error(text: &str) -> (usize, String) {
    let e = parse(text).unwrap_err();
    (e.line, e.message)
}

/// seed 2's matrix in one config: each list in the guest table is an axis, every
/// combination its own config (its own guest), named after the values that vary.
#[test]
fn guest_tables_sweep_device_options_kernel_arguments_and_module_parameters() {
    let s = parse(
        "name = \"g\"\n[[workload]]\nkind = \"bulk\"\nbytes = \"1MiB\"\n\
         [[config]]\nname = \"virtio\"\nplacement = \"guest\"\n\
         guest = { virtio = { rx_queue_size = [256, 1024], mrg_rxbuf = [true, false], csum = \"on\" }, \
         cmdline = \"nohz=off\", modules = { \"haltpoll.guest_halt_poll_ns\" = 0 } }\n",
    )
    .expect("valid");
    let names: Vec<&str> = s.configs.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "virtio:mrg_rxbuf=on,rx_queue_size=256",
            "virtio:mrg_rxbuf=off,rx_queue_size=256",
            "virtio:mrg_rxbuf=on,rx_queue_size=1024",
            "virtio:mrg_rxbuf=off,rx_queue_size=1024",
        ]
    );
    match &s.configs[3].placement {
        Some(Placement::Guest(_, o)) => {
            assert_eq!(o.virtio["rx_queue_size"], "1024");
            assert_eq!(o.virtio["mrg_rxbuf"], "off");
            assert_eq!(o.virtio["csum"], "on");
            assert_eq!(o.cmdline.as_deref(), Some("nohz=off"));
            assert_eq!(o.modules["haltpoll.guest_halt_poll_ns"], "0");
        }
        other => panic!("guest placement expected, got {other:?}"),
    }
    let head = "name = \"g\"\n[[workload]]\nkind = \"rr\"\n[[config]]\nname = \"c\"\nplacement = \"guest\"\n";
    for (bad, says) in [
        (
            "guest = { cmdline = \"rdinit=/bin/sh\" }",
            "virtperf is the guest's init",
        ),
        (
            "guest = { cmdline = [\"nohz=off\", \"console=tty0\"] }",
            "console",
        ),
        (
            "guest = { modules = { \"guest_halt_poll_ns\" = 0 } }",
            "MODULE.PARAMETER",
        ),
        ("guest = { virtio = { rx_queue_size = [] } }", "empty list"),
    ] {
        let (line, m) = line_of_error(&format!("{head}{bad}\n"));
        assert_eq!(line, 7, "{bad}: {m}");
        assert!(m.contains(says), "{bad}: {m}");
    }
}

#[test]
fn guest_placements_take_their_settings_from_the_config() {
    let s = parse(
        "name = \"g\"\n[[workload]]\nkind = \"rr\"\n\
         [[config]]\nname = \"native\"\n\
         [[config]]\nname = \"g2h\"\nplacement = \"guest:guest-host\"\n\
         guest = { vcpus = 2, mem = 256, accel = \"tcg\", vcpu_cpus = [1], boot_timeout = \"30s\" }\n\
         [[config]]\nname = \"h2g\"\nplacement = \"guest\"\n",
    )
    .expect("valid spec");
    match &s.configs[1].placement {
        Some(Placement::Guest(d, o)) => {
            assert_eq!(*d, virtperf_place::guest::Direction::GuestHost);
            assert_eq!((o.vcpus, o.mem_mib), (2, 256));
            assert_eq!(o.accel, virtperf_place::guest::Accel::Tcg);
            assert_eq!(o.vcpu_cpus, [1]);
            assert_eq!(o.boot_timeout, Duration::from_secs(30));
        }
        other => panic!("guest placement expected, got {other:?}"),
    }
    match &s.configs[2].placement {
        Some(Placement::Guest(d, o)) => {
            assert_eq!(*d, virtperf_place::guest::Direction::HostGuest);
            assert_eq!(**o, virtperf_place::guest::GuestOpts::default());
        }
        other => panic!("guest placement expected, got {other:?}"),
    }
    assert_eq!(
        s.configs[1]
            .placement
            .as_ref()
            .map(Placement::to_string)
            .as_deref(),
        Some("guest:guest-host")
    );

    let head = "name = \"g\"\n[[workload]]\nkind = \"rr\"\n[[config]]\nname = \"x\"\n";
    let (l, m) = line_of_error(&format!("{head}placement = \"guest:sideways\"\n"));
    assert_eq!(l, 6, "{m}");
    assert!(m.contains("guest:guest-guest"), "{m}");
    let (l, m) = line_of_error(&format!("{head}guest = {{ vcpus = 2 }}\n"));
    assert_eq!(l, 6, "{m}");
    assert!(m.contains("needs placement"), "{m}");
    let (_, m) = line_of_error(&format!(
        "{head}placement = \"guest\"\nguest = {{ vcpus = 0 }}\n"
    ));
    assert!(m.contains("vcpus must be 1..64"), "{m}");
    let (_, m) = line_of_error(&format!(
        "{head}placement = \"guest\"\nguest = {{ accel = \"hvf\" }}\n"
    ));
    assert!(m.contains("unknown accelerator"), "{m}");
    let (_, m) = line_of_error(&format!(
        "{head}placement = \"guest\"\nguest = {{ cores = 2 }}\n"
    ));
    assert!(m.contains("cores"), "{m}");
}

#[test]
fn ssh_and_remote_placements_in_configs() {
    let s = parse(
        "name = \"r\"\n[[workload]]\nkind = \"rr\"\n\
         [[config]]\nname = \"a\"\nplacement = \"ssh:me@box:2222\"\n\
         ssh = { key = \"/k\", options = [\"StrictHostKeyChecking=no\"] }\n\
         [[config]]\nname = \"b\"\nplacement = \"remote:box:7001\"\ntoken = \"t\"\n\
         [[config]]\nname = \"c\"\nplacement = \"remote:box\"\n",
    )
    .expect("valid spec");
    match &s.configs[0].placement {
        Some(Placement::Ssh(t)) => {
            assert_eq!(t.dest, "me@box");
            assert_eq!(t.port, Some(2222));
            assert_eq!(t.identity.as_deref(), Some(std::path::Path::new("/k")));
            assert_eq!(t.options, ["StrictHostKeyChecking=no"]);
        }
        other => panic!("ssh placement expected, got {other:?}"),
    }
    let remote = |i: usize| match &s.configs[i].placement {
        Some(Placement::Remote { host, port, token }) => (host.clone(), *port, token.clone()),
        other => panic!("remote placement expected, got {other:?}"),
    };
    assert_eq!(
        remote(1),
        ("box".to_string(), Some(7001), Some("t".to_string()))
    );
    assert_eq!(remote(2).1, Some(virtperf_wire::DEFAULT_PORT));

    let head = "name = \"g\"\n[[workload]]\nkind = \"rr\"\n[[config]]\nname = \"x\"\n";
    let (l, m) = line_of_error(&format!("{head}ssh = {{ key = \"/k\" }}\n"));
    assert_eq!(l, 6, "{m}");
    assert!(m.contains("needs placement = \"ssh:"), "{m}");
    let (_, m) = line_of_error(&format!("{head}placement = \"remote:box:http\"\n"));
    assert!(m.contains("invalid port"), "{m}");
    let (_, m) = line_of_error(&format!("{head}placement = \"ssh:\"\n"));
    assert!(!m.is_empty());
}

#[test]
fn stream_receive_size_in_specs() {
    let s = parse("name = \"r\"\n[[workload]]\nkind = \"stream\"\nrecv_size = \"64KiB\"\n")
        .expect("valid");
    assert!(matches!(
        s.points[0].workload,
        Workload::Stream(StreamParams {
            recv_size: Some(65536),
            ..
        })
    ));
    let (l, m) = line_of_error("name = \"r\"\n[[workload]]\nkind = \"rr\"\nrecv_size = 4096\n");
    assert_eq!(l, 4, "{m}");
    assert!(m.contains("stream workloads only"), "{m}");
    let s = parse("name = \"r\"\n[[workload]]\nkind = \"stream\"\nrecv_wait = \"block\"\n")
        .expect("valid");
    assert!(matches!(
        s.points[0].workload,
        Workload::Stream(StreamParams {
            recv_wait: Some(RecvWait::Block),
            ..
        })
    ));
    let (l, m) =
        line_of_error("name = \"r\"\n[[workload]]\nkind = \"stream\"\nrecv_wait = \"spin\"\n");
    assert_eq!(l, 4, "{m}");
    assert!(m.contains("`poll`") && m.contains("`spin`"), "{m}");
    let (l, m) =
        line_of_error("name = \"r\"\n[[workload]]\nkind = \"crr\"\nrecv_wait = \"poll\"\n");
    assert_eq!(l, 4, "{m}");
    assert!(m.contains("stream workloads only"), "{m}");
}

#[test]
fn stream_buf_offset_is_read_and_bounded_at_its_line() {
    let s =
        parse("name = \"r\"\n[[workload]]\nkind = \"stream\"\nbuf_offset = 16\n").expect("valid");
    assert!(matches!(
        s.points[0].workload,
        Workload::Stream(StreamParams {
            buf_offset: Some(16),
            ..
        })
    ));
    for (value, needle) in [
        ("4096", "0 to 4095"),
        ("-1", "0 to 4095"),
        ("1e30", ""),
        ("\"16\"", ""),
    ] {
        let (l, m) = line_of_error(&format!(
            "name = \"r\"\n[[workload]]\nkind = \"stream\"\nbuf_offset = {value}\n"
        ));
        assert_eq!(l, 4, "{value}: {m}");
        assert!(m.contains(needle), "{value}: {m}");
    }
    let (l, m) = line_of_error("name = \"r\"\n[[workload]]\nkind = \"rr\"\nbuf_offset = 16\n");
    assert_eq!(l, 4, "{m}");
    assert!(m.contains("stream workloads only"), "{m}");
}

#[test]
fn errors_name_their_line() {
    let (l, m) = line_of_error("name = \"x\"\n[[workload]]\nkind = \"udp\"\n");
    assert_eq!(l, 3, "{m}");
    assert!(m.contains("unknown workload kind"), "{m}");

    let (l, m) = line_of_error("name = \"x\"\n[[workload]]\nkind = \"rr\"\nsize = \"-1\"\n");
    assert_eq!(l, 4);
    assert!(m.contains("positive"), "{m}");

    let (l, m) = line_of_error("name = \"x\"\nduraton = \"5s\"\n[[workload]]\nkind = \"rr\"\n");
    assert_eq!(l, 2);
    assert!(m.contains("duraton"), "{m}");

    let (l, m) = line_of_error("name = \"x\"\n[[workload]]\nkind = \"rr\"\nsend_size = 64\n");
    assert_eq!(l, 4);
    assert!(m.contains("take no"), "{m}");

    let (l, _) = line_of_error(
        "name = \"x\"\nrepetitions = 3\nuntil_ci = \"95,2%\"\n[[workload]]\nkind=\"rr\"\n",
    );
    assert_eq!(l, 2);

    let (l, m) = line_of_error("name = \"x\"\n[[workload]]\nkind = \"rr\"\n[[config]]\nname = \"a\"\nsysctl = { \"../etc/passwd\" = 1 }\n");
    assert_eq!(l, 6);
    assert!(m.contains("sysctl"), "{m}");
    // A network device file outside the steering files is refused at its line too.
    let (l, m) = line_of_error("name = \"x\"\n[[workload]]\nkind = \"rr\"\n[[config]]\nname = \"a\"\nnetdev = { \"lo/../../mtu\" = 1 }\n");
    assert_eq!(l, 6);
    assert!(m.contains("rps_cpus"), "{m}");

    let (l, m) = line_of_error("name = \"x\"\n[[workload]]\nkind = \"bulk\"\n");
    assert_eq!(l, 2, "{m}");
    assert!(m.contains("bytes"));

    let (l, m) = line_of_error("name = [\n");
    assert!(l >= 1, "{m}");
    let (l, m) = line_of_error("name = \"x\"\n");
    assert_eq!(l, 0);
    assert!(m.contains("no [[workload]]"));
}

#[test]
fn out_of_range_values_fail_at_their_line_before_any_trial() {
    let (l, m) =
        line_of_error("name = \"x\"\nduration = \"100000h\"\n[[workload]]\nkind = \"rr\"\n");
    assert_eq!(l, 2, "{m}");
    assert!(m.contains("at most 24h"), "{m}");
    let (l, m) = line_of_error("name = \"x\"\n[[workload]]\nkind = \"rr\"\nduration = \"1e30\"\n");
    assert_eq!(l, 4, "{m}");
    assert!(m.contains("at most 24h"), "{m}");
    let (l, m) =
        line_of_error("name = \"x\"\n[[workload]]\nkind = \"http\"\nbytes = \"1MB\"\ncount = 0\n");
    assert_eq!(l, 5, "{m}");
    assert!(m.contains("count must be between"), "{m}");
}

/// A million sweep points are refused from the axes' lengths, before any is built.
#[test]
fn huge_sweeps_are_refused_with_their_size() {
    let list = |n: usize| {
        (1..=n)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let text = format!(
        "name = \"x\"\n[[workload]]\nkind = \"stream\"\nsend_size = [{}]\nflows = [{}]\n",
        list(1000),
        list(1000)
    );
    let (l, m) = line_of_error(&text);
    assert_eq!(l, 2, "{m}");
    assert!(m.contains("1000000 points") && m.contains("10000"), "{m}");

    // Within the point cap but too many trials in all.
    let text = format!(
        "name = \"x\"\nrepetitions = 1000\n[[workload]]\nkind = \"stream\"\nsend_size = [{}]\n",
        list(200)
    );
    let (_, m) = line_of_error(&text);
    assert!(m.contains("plans 200000 trials"), "{m}");
}

#[test]
fn rr_wait_modes_gaps_and_rates_in_specs() {
    let s = parse(
        "name = \"x\"\n[[workload]]\nkind = \"rr\"\nwait = \"block,spin\"\ngap = [\"0\", \"100us\"]\n",
    )
    .unwrap();
    assert_eq!(s.points.len(), 2);
    assert_eq!(s.points[0].label, "rr gap=0");
    assert_eq!(s.points[1].label, "rr gap=100us");
    match &s.points[1].workload {
        Workload::Rr(RrParams {
            client_wait,
            server_wait,
            gap_us,
            rate_per_s,
            ..
        }) => {
            assert_eq!(*client_wait, virtperf_wire::Wait::Block);
            assert_eq!(*server_wait, virtperf_wire::Wait::Spin);
            assert_eq!(*gap_us, Some(100));
            assert_eq!(*rate_per_s, None);
        }
        other => panic!("{other:?}"),
    }
    let s =
        parse("name = \"x\"\n[[workload]]\nkind = \"rr\"\nflows = [1, 4]\nrate = 1000\n").unwrap();
    assert_eq!(s.points.len(), 2);
    assert_eq!(s.points[1].label, "rr flows=4");
    assert!(matches!(
        s.points[1].workload,
        Workload::Rr(RrParams {
            flows: 4,
            rate_per_s: Some(1000),
            ..
        })
    ));
    let (l, m) = line_of_error("name = \"x\"\n[[workload]]\nkind = \"crr\"\ngap = \"1ms\"\n");
    assert_eq!(l, 4, "{m}");
    assert!(m.contains("take no \"gap\""), "{m}");
    let (l, m) =
        line_of_error("name = \"x\"\n[[workload]]\nkind = \"rr\"\nrate = 1000\ngap = \"1ms\"\n");
    assert_eq!(l, 5, "{m}");
    assert!(m.contains("not both"), "{m}");
}

/// `threads` reaches rr, crr and stream points, fixed while `flows` sweeps (a single
/// flow then runs on one thread); other kinds refuse it at its line.
#[test]
fn threads_multiplex_a_flow_sweep() {
    let s =
        parse("name = \"x\"\n[[workload]]\nkind = \"rr\"\nthreads = 2\nflows = [1, 100, 1000]\n")
            .unwrap();
    let m: Vec<_> = s.points.iter().map(|p| p.workload.multiplexed()).collect();
    assert_eq!(m, [Some((1, 1)), Some((100, 2)), Some((1000, 2))]);
    assert!(s.points.iter().all(|p| p.workload.validate().is_ok()));
    for kind in ["crr", "stream"] {
        let s = parse(&format!(
            "name = \"x\"\n[[workload]]\nkind = \"{kind}\"\nthreads = 2\nflows = 10\n"
        ))
        .unwrap();
        assert_eq!(s.points[0].workload.multiplexed(), Some((10, 2)), "{kind}");
    }
    let s = parse(include_str!("../../../../recipes/flows.toml")).unwrap();
    let m: Vec<_> = s.points.iter().map(|p| p.workload.multiplexed()).collect();
    assert_eq!(
        m,
        [
            Some((1, 1)),
            Some((100, 2)),
            Some((1000, 2)),
            Some((10000, 2))
        ]
    );
    let (l, m) = line_of_error(
        "name = \"x\"\n[[workload]]\nkind = \"bulk\"\nbytes = \"1MB\"\nthreads = 2\n",
    );
    assert_eq!(l, 5, "{m}");
    assert!(m.contains("take no \"threads\""), "{m}");
}

/// `trace` and `timeline` reach the plan; a timeline without two pinned CPUs, or on a
/// workload other than rr, is refused at its line.
#[test]
fn trace_and_timeline_in_specs() {
    let s = parse("name = \"x\"\n[[workload]]\nkind = \"rr\"\ncpus = \"0,1\"\ntrace = true\ntimeline = true\n").expect("parses");
    let plan = crate::spec::plan_for(&s.points[0], &s.configs[0]);
    assert!(plan.trace && plan.timeline);
    let e = parse("name = \"x\"\n[[workload]]\nkind = \"rr\"\ntimeline = true\n").unwrap_err();
    assert_eq!(e.line, 4, "{e}");
    assert!(e.message.contains("cpus"), "{e}");
    let e =
        parse("name = \"x\"\n[[workload]]\nkind = \"stream\"\ncpus = \"0,1\"\ntimeline = true\n")
            .unwrap_err();
    assert!(e.message.contains("timeline"), "{e}");
    let s = parse("name = \"x\"\n[[workload]]\nkind = \"stream\"\ntrace = true\n").expect("parses");
    assert!(s.points[0].trace && !s.points[0].timeline);
}

/// `interval` reaches the point; a too-short one, one longer than the trial, and one
/// on http are refused at their line.
#[test]
fn intervals_in_specs() {
    let s = parse(
        "name = \"x\"\nduration = \"2s\"\n[[workload]]\nkind = \"rr\"\ninterval = \"500ms\"\n",
    )
    .expect("parses");
    assert_eq!(s.points[0].interval, Some(Duration::from_millis(500)));
    let (l, m) =
        line_of_error("name = \"x\"\n[[workload]]\nkind = \"stream\"\ninterval = \"10ms\"\n");
    assert_eq!(l, 4);
    assert!(m.contains("at least 100ms"), "{m}");
    let (l, m) = line_of_error(
        "name = \"x\"\nduration = \"1s\"\n[[workload]]\nkind = \"crr\"\ninterval = \"2s\"\n",
    );
    assert_eq!(l, 5);
    assert!(m.contains("longer than the trial"), "{m}");
    let (_, m) = line_of_error(
        "name = \"x\"\n[[workload]]\nkind = \"http\"\nbytes = \"1MB\"\ninterval = \"1s\"\n",
    );
    assert!(m.contains("take no \"interval\""), "{m}");
}

#[test]
fn until_ci_policy() {
    let s = parse(
        "name=\"x\"\nuntil_ci = \"95,2%\"\nmax_repetitions = 12\n[[workload]]\nkind=\"rr\"\n",
    )
    .unwrap();
    assert_eq!(
        s.repeat,
        Repeat::UntilCi {
            level: 0.95,
            width: 0.02,
            min: 3,
            max: 12
        }
    );
}

/// `[config] socket` takes the command line's socket options; a bad one is refused at its
/// line, with what the machine offers.
#[test]
fn socket_tables_take_congestion_mss_and_tos() {
    let s = parse(
        "name = \"s\"\n[[workload]]\nkind = \"stream\"\n[[config]]\nname = \"reno\"\nsocket = { congestion = \"reno\", mss = 1400, tos = 184, sndbuf = \"256KiB\" }\n",
    )
    .unwrap();
    let o = &s.configs[0].sock;
    assert_eq!(o.congestion.map(|c| c.to_string()).as_deref(), Some("reno"));
    assert_eq!(
        (o.mss, o.tos, o.sndbuf),
        (Some(1400), Some(184), Some(256 << 10))
    );
    let e = parse(
        "name = \"s\"\n[[workload]]\nkind = \"stream\"\n[[config]]\nname = \"x\"\nsocket = { congestion = \"nosuchcc\" }\n",
    )
    .unwrap_err();
    assert_eq!(e.line, 6, "{e}");
    assert!(e.message.contains("reno"), "{e}");
    let e = parse(
        "name = \"s\"\n[[workload]]\nkind = \"stream\"\n[[config]]\nname = \"x\"\nsocket = { mss = 20 }\n",
    )
    .unwrap_err();
    assert!(e.message.contains("--mss"), "{e}");
}

#[test]
fn a_config_load_parses_and_is_refused_where_it_does_not_apply() {
    let s = parse(include_str!("../../../../recipes/rr-under-load.toml")).unwrap();
    let loads: Vec<_> = s
        .configs
        .iter()
        .map(|c| c.load.map(|l| (l.streams, l.reverse)))
        .collect();
    assert_eq!(loads, [None, Some((4, false)), Some((4, true))]);
    let base = "name = \"x\"\n[[workload]]\nkind = \"rr\"\n[[config]]\nname = \"l\"\n";
    for (bad, needle) in [
        ("load = \"streams=0\"", "load"),
        ("load = \"streams=1e30\"", "load"),
        ("load = \"streams=4,pairs=2\"", "repetitions"),
        ("load = \"bogus\"", "load"),
    ] {
        let e = parse(&format!("{base}{bad}\n")).expect_err(bad);
        assert!(e.message.contains(needle), "{bad}: {e:?}");
    }
    let udp = "name = \"x\"\n[[workload]]\nkind = \"rr\"\nprotocol = \"udp\"\n[[config]]\nname = \"l\"\nload = \"streams=2\"\n";
    assert!(parse(udp)
        .expect_err("udp rr")
        .message
        .contains("has a load"));
}

/// A spec names unix-rr by its command's name; a key it does not take is refused at its line.
#[test]
fn unix_rr_is_a_spec_kind_with_its_own_keys() {
    let s = parse(
        "name = \"u\"\nduration = \"1s\"\n[[workload]]\nkind = \"unix-rr\"\nsize = [\"1\", \"64,1024\"]\n",
    )
    .unwrap();
    assert_eq!(s.points.len(), 2);
    let Workload::UnixRr(p) = &s.points[1].workload else {
        panic!("not unix-rr: {:?}", s.points[1].workload)
    };
    assert_eq!((p.request, p.response, p.seqpacket), (64, 1024, false));
    let e = parse("name = \"u\"\n[[workload]]\nkind = \"unix-rr\"\nflows = 2\n").unwrap_err();
    assert!(e.to_string().contains("flows"), "{e}");
    // The socket type, as --seqpacket, and only for unix-rr.
    let s = parse("name = \"u\"\n[[workload]]\nkind = \"unix-rr\"\nseqpacket = true\n").unwrap();
    let Workload::UnixRr(p) = &s.points[0].workload else {
        panic!("not unix-rr")
    };
    assert!(p.seqpacket);
    let e = parse("name = \"u\"\n[[workload]]\nkind = \"rr\"\nseqpacket = true\n").unwrap_err();
    assert!(e.to_string().contains("seqpacket") && e.line == 4, "{e}");
}

/// A config's `wait` overrides every workload's (both sides, or CLIENT,SERVER) and its
/// plan carries it; it is refused where a workload has no wait mode or cannot take it
/// (multiplexed flows wait in epoll). `cpu_dma_latency` is a bound in µs.
#[test]
fn config_wait_and_cpu_dma_latency() {
    let base = "name = \"x\"\n[[workload]]\nkind = \"rr\"\n";
    let s = parse(&format!(
        "{base}[[config]]\nname = \"spin\"\nwait = \"spin,poll:50us\"\ncpu_dma_latency = 0\n"
    ))
    .unwrap();
    let c = &s.configs[0];
    assert_eq!(c.cpu_dma_latency, Some(0));
    let plan = plan_for(&s.points[0], c);
    match plan.workload {
        Workload::Rr(p) => {
            assert_eq!(p.client_wait, virtperf_wire::Wait::Spin);
            assert_eq!(p.server_wait, virtperf_wire::Wait::Poll { window_us: 50 });
        }
        other => panic!("{other:?}"),
    }
    for (text, says) in [
        (
            "name = \"x\"\n[[workload]]\nkind = \"stream\"\n[[config]]\nname = \"a\"\nwait = \"spin\"\n",
            "no wait mode",
        ),
        (
            "name = \"x\"\n[[workload]]\nkind = \"rr\"\nthreads = 2\nflows = 4\n[[config]]\nname = \"a\"\nwait = \"spin\"\n",
            "epoll",
        ),
        (&format!("{base}[[config]]\nname = \"a\"\nwait = \"sometimes\"\n"), "invalid wait"),
        (&format!("{base}[[config]]\nname = \"a\"\ncpu_dma_latency = -1\n"), "cpu_dma_latency"),
    ] {
        let e = parse(text).expect_err(text).to_string();
        assert!(e.contains(says), "{text}: {e}");
    }
}

/// `omit` (a warm-up, `--omit`): the top level's applies to every timed workload and not
/// to byte counts; a workload's own overrides it; on a byte count it is an error at its
/// line; it reaches each trial's plan.
#[test]
fn omit_is_a_warm_up_for_timed_workloads() {
    let s = parse(
        "name = \"o\"\nomit = \"2s\"\n[[workload]]\nkind = \"rr\"\n\
         [[workload]]\nkind = \"stream\"\nomit = \"500ms\"\n\
         [[workload]]\nkind = \"bulk\"\nbytes = \"1MB\"\n\
         [[workload]]\nkind = \"crr\"\nomit = \"0\"\n",
    )
    .unwrap();
    let omits: Vec<_> = s.points.iter().map(|p| p.omit).collect();
    assert_eq!(
        omits,
        [
            Some(Duration::from_secs(2)),
            Some(Duration::from_millis(500)),
            None,
            None
        ]
    );
    let plan = plan_for(&s.points[0], &s.configs[0]);
    assert_eq!(plan.omit, Some(Duration::from_secs(2)));
    let (l, m) = line_of_error(
        "name = \"x\"\n[[workload]]\nkind = \"bulk\"\nbytes = \"1MB\"\nomit = \"1s\"\n",
    );
    assert_eq!(l, 5, "{m}");
    assert!(m.contains("timed workloads"), "{m}");
    let (l, m) = line_of_error("name = \"x\"\nomit = \"2h\"\n[[workload]]\nkind = \"rr\"\n");
    assert_eq!(l, 2, "{m}");
    assert!(m.contains("at most 1h"), "{m}");
}

/// A value of the wrong type under a key that takes one value or a list says which key and
/// value, not serde's "did not match any variant of untagged enum OneOrMany"; a number of
/// bytes is a size as its string is.
#[test]
fn a_wrong_typed_value_names_its_key_and_a_number_is_a_size() {
    let spec = |w: &str| format!("name = \"x\"\n[[workload]]\nkind = \"rr\"\n{w}\n");
    for (w, key) in [
        ("flows = \"x\"", "flows = \"x\""),
        ("cpus = [0, 1]", "cpus = [0, 1]"),
        ("gap = 5", "gap = 5"),
    ] {
        let (line, msg) = line_of_error(&spec(w));
        assert_eq!(line, 4, "{w}: {msg}");
        assert!(
            msg.starts_with(&format!("{key}: not a value")) && !msg.contains("untagged"),
            "{w}: {msg}"
        );
    }
    // Inside an inline table, the innermost key; a knob's value takes no list.
    let (line, msg) = line_of_error(&format!(
        "{}[[config]]\nname = \"a\"\nsysctl = {{\"net.core.busy_poll\" = [1]}}\n",
        spec("")
    ));
    assert_eq!(line, 7, "{msg}");
    assert_eq!(
        msg,
        "\"net.core.busy_poll\" = [1]: not a value \"net.core.busy_poll\" takes (a number, true/false or a string)"
    );
    let (_, msg) = line_of_error(&format!(
        "{}[[config]]\nname = \"a\"\nguest = 5\n",
        spec("")
    ));
    assert_eq!(
        msg,
        "invalid type: integer `5`, expected a table (KEY = {…} or [KEY])"
    );
    // A plain typed key: its words, not Rust's type name.
    for (top, says) in [
        (
            "repetitions = 1e30",
            "repetitions = 1e30: not a value repetitions takes (a whole number, 0 or more)",
        ),
        (
            "repetitions = -1",
            "repetitions = -1: not a value repetitions takes (a whole number, 0 or more)",
        ),
        ("name = 5", "name = 5: not a value name takes (a string)"),
    ] {
        let (line, msg) = line_of_error(&format!("{top}\n[[workload]]\nkind = \"rr\"\n"));
        assert_eq!((line, msg.as_str()), (1, says), "{top}");
    }
    let s = parse(&spec("size = [64, \"1K\"]")).expect("sizes as a number and a string");
    let sizes: Vec<(u32, u32)> = s
        .points
        .iter()
        .map(|p| match &p.workload {
            Workload::Rr(r) => (r.request, r.response),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(sizes, vec![(64, 64), (1024, 1024)]);
}

/// A knob's value is one line of a kernel file: a newline or an escape sequence is refused
/// at its line (it reached the file, the plan and the terminal as it was); tabs, which
/// separate `tcp_rmem`'s fields, stay.
#[test]
fn knob_values_are_one_line() {
    for table in ["sysctl", "module", "netdev"] {
        let key = match table {
            "sysctl" => "net.core.busy_read",
            "module" => "haltpoll.guest_halt_poll_ns",
            _ => "lo/queues/rx-0/rps_cpus",
        };
        for bad in ["50\\n0", "5\\u001b[2J"] {
            let text = format!(
                "name = \"x\"\n[[workload]]\nkind = \"rr\"\n[[config]]\nname = \"a\"\n{table} = {{ \"{key}\" = \"{bad}\" }}\n"
            );
            let (line, msg) = line_of_error(&text);
            assert_eq!(line, 6, "{table} {bad}: {msg}");
            assert!(msg.contains("must be one line"), "{table} {bad}: {msg}");
        }
    }
    let s = parse(
        "name = \"x\"\n[[workload]]\nkind = \"rr\"\n[[config]]\nname = \"a\"\nsysctl = { \"net.ipv4.tcp_rmem\" = \"4096\\t131072\\t6291456\" }\n",
    )
    .expect("tabs separate fields");
    assert_eq!(s.configs[0].knobs[0].1, "4096\t131072\t6291456");
}
