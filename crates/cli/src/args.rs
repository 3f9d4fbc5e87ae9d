//! The groups of flags several commands share: where the agent is (`ConnArgs`) and how
//! guests are built and run (`GuestArgs`). The lowest module of the command line: it names
//! no command, and every command module may use it.

use clap::Args;

impl ConnArgs {
    /// The token, from --token-file, --token or $VIRTPERF_TOKEN.
    pub fn token(&self) -> anyhow::Result<Option<String>> {
        resolve_token(&self.token, &self.token_file)
    }
}

pub fn resolve_token(
    token: &Option<String>,
    file: &Option<std::path::PathBuf>,
) -> anyhow::Result<Option<String>> {
    match file {
        Some(path) => Ok(Some(virtperf_lab::agent::read_token_file(path)?)),
        None => Ok(token.clone().filter(|t| !t.is_empty())),
    }
}

/// Where the agent is; shared by every workload.
#[derive(Debug, Args, Clone)]
pub struct ConnArgs {
    /// Agent control port
    #[arg(long, default_value_t = virtperf_wire::DEFAULT_PORT)]
    pub port: u16,
    /// Token the agent was started with (visible in `ps`: prefer --token-file or
    /// $VIRTPERF_TOKEN)
    #[arg(long, env = "VIRTPERF_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Read the agent's token from the first line of FILE (`-`: of standard input)
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<std::path::PathBuf>,
}

/// The help heading of the guest flags.
const GUEST_HEADING: &str = "Guest placement";

/// How guests are built and run (`--placement guest…`, `virtperf vm`).
///
/// Each flag names its help heading itself: a struct-level `next_help_heading` stays set
/// after the flatten (clap does not restore it) and pulled the flags that follow
/// (`--link-rate`, `--ssh-key`, `--json`, `--db`) under this heading too.
#[derive(Debug, Args, Clone)]
pub struct GuestArgs {
    /// Guest kernel (bzImage); default: Debian's linux-image-cloud-amd64, fetched once with
    /// apt-get download into ~/.cache/virtperf
    #[arg(long, help_heading = GUEST_HEADING, value_name = "PATH")]
    pub kernel: Option<std::path::PathBuf>,
    /// lib/modules/RELEASE directory (with modules.dep) holding that kernel's virtio modules
    #[arg(long, help_heading = GUEST_HEADING, value_name = "DIR")]
    pub kernel_modules: Option<std::path::PathBuf>,
    /// virtperf binary to run in the guest (a static musl build is smallest; default: this
    /// one, with its shared libraries)
    #[arg(long, help_heading = GUEST_HEADING, value_name = "PATH")]
    pub guest_binary: Option<std::path::PathBuf>,
    /// vCPUs per guest
    #[arg(long, help_heading = GUEST_HEADING, default_value_t = 1, value_name = "N")]
    pub vcpus: u32,
    /// Memory per guest in MiB
    #[arg(long, help_heading = GUEST_HEADING, default_value_t = 512, value_name = "MIB")]
    pub mem: u32,
    /// Host CPUs to pin the vCPU threads to (vCPU i on the i-th, cycling), e.g. 1 or 0,1
    #[arg(long, help_heading = GUEST_HEADING, value_name = "LIST", value_delimiter = ',')]
    pub vcpu_cpus: Vec<u32>,
    /// virtio-net through vhost-net (needs /dev/vhost-net)
    #[arg(long, help_heading = GUEST_HEADING, default_value = "off", value_parser = parse_on_off, value_name = "on|off", action = clap::ArgAction::Set)]
    pub vhost: bool,
    /// Accelerator: auto (KVM where hardware virtualization works, else TCG), kvm, tcg
    #[arg(long, help_heading = GUEST_HEADING, default_value = "auto", value_name = "auto|kvm|tcg")]
    pub accel: virtperf_place::guest::Accel,
    /// How long a guest may take to boot
    #[arg(long, help_heading = GUEST_HEADING, default_value = "120s", value_parser = virtperf_lab::parse::duration, value_name = "DURATION")]
    pub boot_timeout: std::time::Duration,
    /// virtio-net device option, repeatable: rx_queue_size=1024, mrg_rxbuf=off, csum=off,
    /// guest_tso4=off, queues=2, vhost=on, … (any option of the installed QEMU's
    /// virtio-net-pci; checked against it before booting)
    #[arg(long, help_heading = GUEST_HEADING, value_name = "KEY=VALUE", value_parser = virtperf_place::guest::device::parse_pair)]
    pub virtio: Vec<(String, String)>,
    /// Kernel arguments for the guest, after virtperf's own, e.g. "nohz=off"
    #[arg(long, help_heading = GUEST_HEADING, value_name = "ARGS")]
    pub guest_cmdline: Option<String>,
    /// Module parameter the guest's init sets, repeatable, e.g.
    /// haltpoll.guest_halt_poll_ns=0
    #[arg(long, help_heading = GUEST_HEADING, value_name = "MODULE.PARAM=VALUE", value_parser = virtperf_place::guest::device::parse_pair)]
    pub guest_module: Vec<(String, String)>,
    /// The guest NIC's backend: tap (a bridge and tap in a namespace virtperf creates;
    /// root), user (QEMU's user networking with the agent's ports forwarded on
    /// 127.0.0.1; no root, no bridge, no tap) or passt (passt beside QEMU, the same ports
    /// forwarded; where passt is installed)
    #[arg(long, help_heading = GUEST_HEADING, default_value = "tap", value_name = "tap|user|passt")]
    pub guest_net: virtperf_place::guest::GuestNet,
}

impl GuestArgs {
    /// The lab's guest options.
    pub fn opts(&self, quiet: bool) -> virtperf_place::guest::GuestOpts {
        virtperf_place::guest::GuestOpts {
            kernel: self.kernel.clone(),
            kernel_modules: self.kernel_modules.clone(),
            binary: self.guest_binary.clone(),
            vcpus: self.vcpus,
            mem_mib: self.mem,
            accel: self.accel,
            vhost: self.vhost,
            vcpu_cpus: self.vcpu_cpus.clone(),
            boot_timeout: self.boot_timeout,
            quiet,
            virtio: self.virtio.iter().cloned().collect(),
            cmdline: self.guest_cmdline.clone(),
            modules: self.guest_module.iter().cloned().collect(),
            net: self.guest_net,
        }
    }
}

fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" | "yes" | "true" => Ok(true),
        "off" | "no" | "false" => Ok(false),
        _ => Err(format!("expected on or off, got {s:?}")),
    }
}

/// Socket options of the data connections, with the peers' spellings (netperf's `-s -S -D
/// -K`, iperf3's `-w -N -C -M -S`); every workload takes them, spec files as
/// `[config.socket]`. The result records what the kernel applied (`sock_applied`).
#[derive(Debug, Args, Clone, Default)]
pub struct SockArgs {
    /// SO_SNDBUF of the data connections (netperf -s, iperf3 -w); the kernel doubles it
    #[arg(long, short = 's', value_parser = sock_buf, value_name = "SIZE", allow_hyphen_values = true, help_heading = SOCKET)]
    pub sndbuf: Option<u32>,
    /// SO_RCVBUF of the data connections (netperf -S, iperf3 -w), set before connecting
    #[arg(long, short = 'S', value_parser = sock_buf, value_name = "SIZE", allow_hyphen_values = true, help_heading = SOCKET)]
    pub rcvbuf: Option<u32>,
    /// TCP_NODELAY on the data connections (netperf -D, iperf3 -N; rr and crr set it anyway)
    #[arg(long, short = 'D', help_heading = SOCKET)]
    pub nodelay: bool,
    /// Congestion control of the data connections (iperf3 -C, netperf -K): one of
    /// net.ipv4.tcp_available_congestion_control
    #[arg(long, short = 'C', value_parser = virtperf_lab::parse::congestion, value_name = "NAME", help_heading = SOCKET)]
    pub congestion: Option<virtperf_wire::CcName>,
    /// TCP_MAXSEG, the largest segment sent, bytes (iperf3 -M), set before connecting
    #[arg(long, value_parser = mss, value_name = "BYTES", allow_hyphen_values = true, help_heading = SOCKET)]
    pub mss: Option<u32>,
    /// IP TOS byte of the data connections, decimal or 0x hex (iperf3 -S)
    #[arg(long, value_parser = virtperf_lab::parse::tos, conflicts_with = "dscp", allow_hyphen_values = true, help_heading = SOCKET)]
    pub tos: Option<u8>,
    /// DSCP code point (0-63) of the data connections (iperf3 --dscp): TOS = DSCP << 2
    #[arg(long, value_parser = virtperf_lab::parse::dscp, allow_hyphen_values = true, help_heading = SOCKET)]
    pub dscp: Option<u8>,
    /// Multipath TCP data connections on both ends (iperf3 --mptcp; rr, stream, bulk),
    /// where net.mptcp.enabled is 1
    #[arg(long, help_heading = SOCKET)]
    pub mptcp: bool,
    /// IPv4 only (netperf -4, iperf3 -4): the agent's IPv4 address
    #[arg(short = '4', long = "ipv4", conflicts_with = "ipv6", help_heading = SOCKET)]
    pub ipv4: bool,
    /// IPv6 only (netperf -6, iperf3 -6): the agent's IPv6 address; a local agent on ::1
    #[arg(short = '6', long = "ipv6", help_heading = SOCKET)]
    pub ipv6: bool,
    /// SO_BUSY_POLL: busy-wait this many µs on the device queue in blocking reads
    #[arg(long, value_parser = busy_poll, value_name = "US", allow_hyphen_values = true, help_heading = SOCKET)]
    pub busy_poll: Option<u32>,
}

/// The help heading of the socket options.
const SOCKET: &str = "Socket options";

impl SockArgs {
    /// The address family `-4`/`-6` ask for.
    pub fn family(&self) -> Option<virtperf_lab::plan::Family> {
        use virtperf_lab::plan::Family;
        match (self.ipv4, self.ipv6) {
            (true, _) => Some(Family::V4),
            (_, true) => Some(Family::V6),
            _ => None,
        }
    }

    /// The options as the plan carries them.
    pub fn opts(&self) -> virtperf_wire::SockOpts {
        virtperf_wire::SockOpts {
            nodelay: self.nodelay.then_some(true),
            busy_poll_us: self.busy_poll,
            sndbuf: self.sndbuf,
            rcvbuf: self.rcvbuf,
            congestion: self.congestion,
            mss: self.mss,
            tos: self.tos.or(self.dscp),
            mptcp: self.mptcp.then_some(true),
        }
    }
}

pub(crate) fn sock_buf(s: &str) -> Result<u32, String> {
    let v = virtperf_lab::parse::bytes(s).map_err(|e| e.to_string())?;
    u32::try_from(v)
        .ok()
        .filter(|v| (1..=virtperf_wire::MAX_SOCK_BUF).contains(v))
        .ok_or_else(|| format!("{v} bytes: a socket buffer is 1 byte to 1GiB"))
}

fn mss(s: &str) -> Result<u32, String> {
    let (lo, hi) = virtperf_wire::MSS_RANGE;
    s.trim()
        .parse::<u32>()
        .ok()
        .filter(|m| (lo..=hi).contains(m))
        .ok_or_else(|| format!("invalid MSS {s:?}: {lo} to {hi} bytes"))
}

fn busy_poll(s: &str) -> Result<u32, String> {
    s.trim()
        .trim_end_matches("us")
        .parse::<u32>()
        .ok()
        .filter(|u| *u <= virtperf_wire::MAX_BUSY_POLL_US)
        .ok_or_else(|| format!("invalid busy-poll time {s:?}: 0 to 1000000 µs"))
}

/// `--tag KEY=VALUE`: where a run ran, in a fleet's words, stored with it.
#[derive(Debug, Clone, Default, Args)]
pub struct TagArgs {
    /// Store this tag with the run (repeatable), e.g. --tag rack=b12 --tag campaign=c7;
    /// added to $VIRTPERF_TAGS (KEY=VALUE,KEY=VALUE), and wins over it for the same key
    #[arg(long = "tag", value_name = "KEY=VALUE", value_parser = virtperf_store::parse_tag)]
    pub tags: Vec<(String, String)>,
}

impl TagArgs {
    /// `$VIRTPERF_TAGS`, then each `--tag` in order (a later one replaces an earlier key).
    /// A malformed `$VIRTPERF_TAGS` is an error naming the variable, not a silent drop.
    pub fn resolve(&self) -> anyhow::Result<virtperf_store::Tags> {
        let mut tags = match std::env::var("VIRTPERF_TAGS") {
            Ok(s) => virtperf_store::parse_tag_list(&s).map_err(|e| {
                crate::signals::exit(crate::signals::code::USAGE, format!("$VIRTPERF_TAGS: {e}"))
            })?,
            Err(_) => virtperf_store::Tags::new(),
        };
        tags.extend(self.tags.iter().cloned());
        Ok(tags)
    }
}

/// A trial's length as a command takes it (`-l 2s`): at most 60 s, at least `min` (shorter
/// measures nothing worth a number).
pub fn trial_length(s: &str, min: std::time::Duration) -> anyhow::Result<std::time::Duration> {
    let d = virtperf_lab::parse::duration_up_to(s, std::time::Duration::from_secs(60), "60s")?;
    anyhow::ensure!(
        d >= min,
        "{s:?} is too short for a trial: give at least {}ms",
        min.as_millis()
    );
    Ok(d)
}

/// A `--where` filter: `host=…`, `name=…` or `tag.KEY=VALUE`.
pub fn parse_where(s: &str) -> Result<(String, String), String> {
    let Some((k, v)) = s.split_once('=') else {
        return Err(format!(
            "invalid filter {s:?}: write KEY=VALUE, e.g. host=node7 or tag.rack=b12"
        ));
    };
    let k = k.trim();
    if let Some(tag) = k.strip_prefix("tag.") {
        // The same rules as --tag, so a filter can name every tag a run can carry.
        let (tk, tv) = virtperf_store::parse_tag(&format!("{tag}={v}"))?;
        return Ok((format!("tag.{tk}"), tv));
    }
    if !["host", "name"].contains(&k) {
        return Err(format!(
            "unknown filter key {k:?}: use host, name or tag.KEY"
        ));
    }
    Ok((k.to_string(), v.to_string()))
}

/// The store filter for `--where` pairs, `--since` and campaign ids (a campaign is the
/// tag `campaign`, as the Ansible role stamps it).
pub fn filter(
    filters: &[(String, String)],
    since: Option<std::time::Duration>,
    campaign: &[&str],
) -> virtperf_store::RunFilter {
    let mut f = virtperf_store::RunFilter {
        since: since.map(virtperf_store::rfc3339_ago),
        ..Default::default()
    };
    for (k, v) in filters {
        match k.as_str() {
            "host" => f.host = Some(v.clone()),
            "name" => f.name = Some(v.clone()),
            tag => {
                let key = tag.strip_prefix("tag.").unwrap_or(tag);
                f.tags.push((key.to_string(), v.clone()));
            }
        }
    }
    for c in campaign {
        f.tags.push(("campaign".into(), c.to_string()));
    }
    f
}

/// What `explain` explains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExplainKind {
    /// The cross-CPU request/response round trip.
    Rr,
    /// A TCP stream's rate.
    Stream,
}

/// The stream's shape (with --workload stream).
#[derive(Debug, Args)]
pub struct ExplainStreamArgs {
    /// With --workload stream: parallel flows
    #[arg(long, short = 'P', value_parser = clap::value_parser!(u32).range(1..=64))]
    pub flows: Option<u32>,
    /// With --workload stream: the agent sends, the client receives
    #[arg(long, short = 'R')]
    pub reverse: bool,
    /// With --workload stream: SO_RCVBUF of both ends (the receive window's limit; iperf3
    /// -w), e.g. 64K; default: the kernel's autotuning
    #[arg(long, value_name = "SIZE", value_parser = sock_buf)]
    pub window: Option<u32>,
    /// With --workload stream --placement netns:…: shape the client's link with a token
    /// bucket (e.g. 1gbit); a stream at that rate is bound by the link
    #[arg(long, requires = "placement", value_name = "RATE", value_parser = virtperf_lab::parse::rate)]
    pub link_rate: Option<String>,
}
