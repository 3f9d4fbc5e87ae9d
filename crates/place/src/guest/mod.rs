//! Guest placements: one or two QEMU guests booted by virtperf, with virtperf itself as the
//! guest's init and agent, so a workload runs host→guest, guest→host or guest↔guest.
//!
//! Layout (all in one network namespace `vp-<pid>-<n>-vm` that we create and delete):
//! ```text
//!   host side: bridge vpbr0 10.99.3.1/24 ── tap vptap0 ── QEMU guest 0 (eth0 10.99.3.10)
//!                                      └─── tap vptap1 ── QEMU guest 1 (eth0 10.99.3.11)
//! ```
//! The host's end of a test runs on a thread that joined the namespace; QEMU runs in it too
//! (`ip netns exec`), so no traffic leaves the namespace. When a guest is the sending end,
//! the host asks the guest's agent to drive the test (`Drive` in the control protocol).
//!
//! QEMU is started with `PR_SET_PDEATHSIG`, so it dies with us even on SIGKILL; the namespace
//! and run directory go when the [`GuestLab`] drops, and `virtperf cleanup` removes what a
//! killed run left.

mod args;
pub use args::{check_cmdline, module_params};
mod direction;
mod host_cpu;
mod text;
pub use direction::Direction;
use text::tail;
mod net;
pub use net::GuestNet;
use net::{Nic, GUEST_PORT, HOST_IP};
pub mod device;
pub mod init;
pub mod initramfs;
pub mod kernel;

pub use device::QEMU;

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use virtperf_machine::children::Tracked;
use virtperf_wire::{GuestInfo, TestResult};

use crate::local::LocalAgent;
use crate::netns;
use virtperf_lab::client;
use virtperf_lab::plan::{Plan, ProgressFn, Target};
use virtperf_lab::trace::HostExits;

/// How to run the guest's CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Accel {
    /// KVM where hardware-assisted virtualization works here, TCG otherwise.
    #[default]
    Auto,
    /// `-accel kvm`.
    Kvm,
    /// `-accel tcg` (QEMU's emulator).
    Tcg,
}

impl std::str::FromStr for Accel {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(Accel::Auto),
            "kvm" => Ok(Accel::Kvm),
            "tcg" => Ok(Accel::Tcg),
            _ => Err(anyhow!("unknown accelerator {s:?} (auto, kvm, tcg)")),
        }
    }
}

/// Guest settings (`--kernel`, `--vcpus`, …).
#[derive(Debug, Clone, PartialEq)]
pub struct GuestOpts {
    /// A bzImage to boot instead of Debian's cloud kernel.
    pub kernel: Option<PathBuf>,
    /// `lib/modules/RELEASE` directory for that kernel's virtio modules.
    pub kernel_modules: Option<PathBuf>,
    /// virtperf binary to put in the guest (default: this one).
    pub binary: Option<PathBuf>,
    /// vCPUs per guest.
    pub vcpus: u32,
    /// Memory per guest in MiB.
    pub mem_mib: u32,
    /// Accelerator.
    pub accel: Accel,
    /// Use vhost-net for virtio-net.
    pub vhost: bool,
    /// Host CPUs to pin vCPU threads to (vCPU i → `vcpu_cpus[i % len]`); empty: unpinned.
    pub vcpu_cpus: Vec<u32>,
    /// How long a guest may take to report ready.
    pub boot_timeout: Duration,
    /// No progress lines on stderr while booting (the TCG warning is printed regardless).
    pub quiet: bool,
    /// virtio-net device options (`--virtio KEY=VALUE`), checked against QEMU at boot.
    pub virtio: BTreeMap<String, String>,
    /// Extra kernel arguments (`--guest-cmdline "nohz=off"`), after virtperf's own.
    pub cmdline: Option<String>,
    /// Module parameters the guest's init sets (`haltpoll.guest_halt_poll_ns` → `0`).
    pub modules: BTreeMap<String, String>,
    /// The NIC's backend (`--guest-net`): a tap on a bridge, or QEMU's user networking.
    pub net: GuestNet,
}

impl Default for GuestOpts {
    fn default() -> Self {
        GuestOpts {
            kernel: None,
            kernel_modules: None,
            binary: None,
            vcpus: 1,
            mem_mib: 512,
            accel: Accel::Auto,
            vhost: false,
            vcpu_cpus: Vec::new(),
            boot_timeout: Duration::from_secs(120),
            quiet: false,
            virtio: BTreeMap::new(),
            cmdline: None,
            modules: BTreeMap::new(),
            net: GuestNet::Tap,
        }
    }
}

struct Guest {
    child: Tracked,
    /// passt beside QEMU under `--guest-net passt`, ours by PID.
    passt: Option<Tracked>,
    reach: net::Reach,
    token: String,
    console: PathBuf,
}

impl Drop for Guest {
    fn drop(&mut self) {
        // QEMU first, then passt (which would exit on QEMU's end closing anyway).
        self.child.stop();
        if let Some(p) = &mut self.passt {
            p.stop();
        }
    }
}

impl Guest {
    fn target(&self) -> Target {
        Target {
            host: self.reach.host.clone(),
            port: self.reach.port,
            token: Some(self.token.clone()),
            lock: None,
        }
    }
}

/// Booted guests, their namespace and (for guest→host) the host's agent; all removed on drop.
pub struct GuestLab {
    direction: Direction,
    /// The lab's name (`vp-<pid>-<n>`): QEMU's `-name`, and the run directory's.
    tag: String,
    /// The namespace of the bridge and taps (none under user networking).
    ns: Option<String>,
    net: GuestNet,
    dir: PathBuf,
    guests: Vec<Guest>,
    host_agent: Option<LocalAgent>,
    info: GuestInfo,
    created_ns: bool,
}

/// Which accelerator `accel` means on this machine, and why when it is not KVM.
pub fn choose_accel(accel: Accel) -> Result<(&'static str, Option<String>)> {
    let kvm = virtperf_kvm::available();
    match (accel, kvm) {
        (Accel::Tcg, _) => Ok(("tcg", Some("TCG was asked for (--accel tcg)".into()))),
        (Accel::Kvm, Err(e)) => bail!("--accel kvm: {e}"),
        (Accel::Kvm, Ok(_)) => Ok(("kvm", None)),
        (Accel::Auto, Err(e)) => Ok(("tcg", Some(e.to_string()))),
        (Accel::Auto, Ok(info)) if info.platform == "pvm" => Ok((
            "tcg",
            Some("/dev/kvm here is nested PVM, which emulates guest kernel code (Linux guests hang in the decompressor under -accel kvm)".into()),
        )),
        (Accel::Auto, Ok(_)) => Ok(("kvm", None)),
    }
}

fn qemu_version() -> Result<String> {
    let out = Command::new(QEMU).arg("--version").output().map_err(|e| {
        anyhow!(
            "cannot run {QEMU}: {e} (guest placements need QEMU: apt-get install qemu-system-x86)"
        )
    })?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_string())
}

/// What a guest placement needs before any trial (its NIC options against QEMU, its
/// network backend's own tools: passt installed, a direction the backend can reach),
/// so a spec or `vm compare` fails before it measures its native side.
pub fn preflight(direction: Direction, opts: &GuestOpts) -> Result<()> {
    let virtio = device::validate(&opts.virtio)?;
    let vhost = virtio.vhost.unwrap_or(opts.vhost);
    opts.net.check(direction, vhost, virtio.queues.unwrap_or(1))
}

impl GuestLab {
    /// Builds the namespace, bridge and taps, boots the guests `direction` needs and waits
    /// until each agent answers.
    pub fn boot(direction: Direction, opts: &GuestOpts) -> Result<GuestLab> {
        // What the user asked of the guest is checked first, so a typo costs no boot.
        let virtio = device::validate(&opts.virtio)?;
        check_cmdline(opts.cmdline.as_deref())?;
        let modparams = module_params(&opts.modules)?;
        let vhost = virtio.vhost.unwrap_or(opts.vhost);
        let queues = virtio.queues.unwrap_or(1);
        opts.net.check(direction, vhost, queues)?;
        check_host(opts, vhost)?;
        let qemu = qemu_version()?;
        let (accel, why_not_kvm) = choose_accel(opts.accel)?;
        let kernel = kernel::resolve(opts.kernel.as_deref(), opts.kernel_modules.as_deref())?;
        let binary = match &opts.binary {
            Some(b) => b.clone(),
            None => std::env::current_exe().context("finding our own executable")?,
        };
        let tag = netns::new_tag();
        let dir = std::env::temp_dir().join(&tag);
        make_run_dir(&dir)?;
        let mut lab = GuestLab {
            direction,
            ns: (opts.net == GuestNet::Tap).then(|| format!("{tag}-vm")),
            tag: tag.clone(),
            net: opts.net,
            dir: dir.clone(),
            guests: Vec::new(),
            host_agent: None,
            info: GuestInfo {
                accel: accel.to_string(),
                emulated: accel == "tcg",
                direction: direction.name().to_string(),
                kernel: kernel.release.clone(),
                vhost,
                qemu,
                virtio: virtio.as_map(),
                ..described(opts)
            },
            created_ns: false,
        };
        // Loud even with --json (it goes to stderr): a guest number under TCG must never
        // pass for a virtualization tax. Once per command: `vm compare --explain` boots a
        // guest per battery and printed the same warning three times.
        if let Some(why) = &why_not_kvm {
            static WARNED: std::sync::Once = std::sync::Once::new();
            WARNED.call_once(|| eprintln!("virtperf: WARNING: guests run under TCG emulation, not KVM: {why}. Guest numbers measure QEMU's instruction emulation, not a virtualization tax."));
        }
        let initrd = dir.join("initramfs.cpio");
        // One token for this lab's guests, inside the initramfs (not on QEMU's command line).
        let token = crate::local::random_token()?;
        initramfs::build(
            &initrd,
            &binary,
            &kernel.modules,
            Some(&token),
            &[(init::MODPARAMS_FILE, modparams.as_bytes())],
        )?;
        let n = 1 + usize::from(direction == Direction::GuestGuest);
        if let Some(ns) = lab.ns.clone() {
            netns::add_namespace(&ns)?;
            lab.created_ns = true;
            net::bridge_and_taps(&ns, n, queues)?;
        }
        if !opts.quiet {
            eprintln!(
                "virtperf: booting {n} guest{} ({accel}, kernel {}, {} vCPU, {} MiB)…",
                if n > 1 { "s" } else { "" },
                kernel.release,
                opts.vcpus,
                opts.mem_mib
            );
        }
        let nic = Nic {
            vhost,
            queues,
            device: virtio.device_suffix(),
        };
        let (image, token) = (&kernel.image, &token);
        let boot = Boot {
            image,
            initrd: &initrd,
            token,
            accel,
        };
        for i in 0..n {
            let g = lab.start_fresh(i, &boot, opts, &nic)?;
            lab.guests.push(g);
        }
        let t0 = Instant::now();
        for i in 0..n {
            lab.wait_started(i, t0, (&boot, opts, &nic))?;
            if !opts.vcpu_cpus.is_empty() {
                pin_vcpus(lab.guests[i].child.id(), &opts.vcpu_cpus)?;
            }
        }
        if direction == Direction::GuestHost {
            let ns = lab.ns.as_deref();
            lab.host_agent = Some(LocalAgent::start_at(ns, HOST_IP.into())?);
        }
        Ok(lab)
    }

    fn start_guest(&self, i: usize, boot: &Boot<'_>, opts: &GuestOpts, nic: &Nic) -> Result<Guest> {
        let Boot {
            image,
            initrd,
            token,
            accel,
        } = *boot;
        let token = token.to_string();
        let reach = net::Reach::new(self.net, i)?;
        let (ip, port) = (reach.guest_ip, reach.port);
        let console = self.dir.join(format!("console{i}.log"));
        let qemu_log = self.dir.join(format!("qemu{i}.log"));
        let mut append = format!(
            "console=ttyS0 quiet loglevel=3 panic=-1 mitigations=off virtperf.ip={ip}/24 virtperf.port={port}"
        );
        if let Some((first, last)) = reach.data_ports {
            append.push_str(&format!(" virtperf.data_ports={first}-{last}"));
        }
        // The user's arguments last: for most parameters the kernel keeps the last value.
        if let Some(extra) = opts.cmdline.as_deref().filter(|c| !c.trim().is_empty()) {
            append.push(' ');
            append.push_str(extra.trim());
        }
        let cpu = if accel == "kvm" { "host" } else { "max" };
        let backend = net::Backend::start(self.net, &self.dir, i, &reach)?;
        let qemu_fd = backend.qemu_fd();
        let netdev = reach.netdev(self.net, i, nic, qemu_fd);
        // romfile= skips the PXE option ROM: the guest boots the kernel directly.
        let mut device = format!(
            "virtio-net-pci,netdev=n0,mac=52:54:00:99:03:{:02x},romfile=",
            10 + i
        );
        if !nic.device.is_empty() {
            device.push(',');
            device.push_str(&nic.device);
        }
        let mut cmd = match &self.ns {
            Some(ns) => crate::local::in_namespace(ns, Path::new(QEMU)),
            None => Command::new(QEMU),
        };
        // debug-threads names the vCPU threads ("CPU 0/TCG"), which --vcpu-cpus pins.
        cmd.args(["-name", &format!("{}-g{i},debug-threads=on", self.tag)])
            .args([
                "-nodefaults",
                "-no-user-config",
                "-display",
                "none",
                "-no-reboot",
            ])
            .args(["-machine", "pc", "-accel", accel, "-cpu", cpu])
            .args([
                "-smp",
                &opts.vcpus.to_string(),
                "-m",
                &opts.mem_mib.to_string(),
            ])
            .arg("-kernel")
            .arg(image)
            .arg("-initrd")
            .arg(initrd)
            .args(["-append", &append])
            .arg("-serial")
            .arg(format!("file:{}", console.display()))
            .args(["-netdev", &netdev, "-device", &device])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&qemu_log)?)
            .process_group(0);
        // SAFETY: prctl and fcntl in the child between fork and exec touch no shared state.
        // The death signal survives `ip netns exec`'s exec of QEMU, so QEMU dies with us
        // even on SIGKILL; under passt QEMU keeps its end of the pair (fd -1: none).
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0
                    || (qemu_fd >= 0 && libc::fcntl(qemu_fd, libc::F_SETFD, 0) != 0)
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = Tracked::spawn(&mut cmd, "QEMU")
            .map_err(|e| anyhow!("cannot start {QEMU}: {e} (apt-get install qemu-system-x86)"))?;
        Ok(Guest {
            child,
            passt: backend.started(),
            reach,
            token,
            console,
        })
    }

    /// Starts guest `i`, on new ports while passt finds one of its forwards taken (the
    /// same race [`Self::wait_started`] handles for QEMU's own forwards).
    fn start_fresh(&self, i: usize, boot: &Boot<'_>, opts: &GuestOpts, nic: &Nic) -> Result<Guest> {
        for _ in 0..3 {
            match self.start_guest(i, boot, opts, nic) {
                Err(e) if e.is::<net::ForwardTaken>() => continue,
                r => return r,
            }
        }
        self.start_guest(i, boot, opts, nic)
    }

    /// Waits for guest `i` as [`Self::wait_ready`] does, starting it again on new ports
    /// when QEMU could not bind its forwards: `free_block`'s ports are free when probed, but
    /// QEMU binds them later and another process can take one in between (QEMU then exits
    /// at once). The race is rare, so three more tries are plenty.
    fn wait_started(
        &mut self,
        i: usize,
        t0: Instant,
        how: (&Boot<'_>, &GuestOpts, &Nic),
    ) -> Result<()> {
        let (boot, opts, nic) = how;
        for _ in 0..3 {
            match self.wait_ready(i, t0, opts.boot_timeout) {
                Err(e) if e.is::<net::ForwardTaken>() => {
                    self.guests[i] = self.start_fresh(i, boot, opts, nic)?;
                }
                r => return r,
            }
        }
        self.wait_ready(i, t0, opts.boot_timeout)
    }

    fn wait_ready(&mut self, i: usize, t0: Instant, timeout: Duration) -> Result<()> {
        loop {
            // Whether QEMU has exited is asked before the console is read, so an exited
            // guest's console is read whole.
            let exited = self.guests[i].child.try_wait()?;
            let console = std::fs::read_to_string(&self.guests[i].console).unwrap_or_default();
            // The serial console is written a character at a time: while QEMU runs, a line
            // counts once its newline is there (a half-written "failed:" line would lose
            // its reason, and with it whether the guest lacks something or broke).
            let whole = match exited {
                Some(_) => console.as_str(),
                None => console.rfind('\n').map_or("", |end| &console[..end]),
            };
            if let Some(line) = whole.lines().find(|l| l.contains(init::FAILED)) {
                let msg = format!("guest {i} failed to start: {}", line.trim());
                if line.contains(init::LACKS) || line.contains(init::INERT) {
                    return Err(GuestLacks(msg).into());
                }
                bail!("{msg}");
            }
            if console.contains(init::READY) {
                break;
            }
            if let Some(status) = exited {
                let mut log = String::new();
                let _ = std::fs::File::open(self.dir.join(format!("qemu{i}.log")))
                    .and_then(|mut f| f.read_to_string(&mut log));
                // QEMU's own complaint if it made one, else what the guest printed.
                if log.contains(net::FORWARD_FAILED) {
                    return Err(net::ForwardTaken(tail(&log, 2)).into());
                }
                let why = if log.trim().is_empty() {
                    tail(&console, 3)
                } else {
                    tail(&log, 2)
                };
                bail!("QEMU for guest {i} exited ({status}) before the guest was ready: {why}");
            }
            if t0.elapsed() > timeout {
                bail!(
                    "guest {i} did not report ready within {:.1} s (raise --boot-timeout); console tail: {}",
                    timeout.as_secs_f64(),
                    tail(&console, 3)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // The guest prints ready after binding; one fingerprint proves the path works.
        let target = self.guests[i].target();
        self.in_lab(move || client::remote_env(&target))
            .with_context(|| format!("guest {i} said ready but its agent does not answer"))?;
        Ok(())
    }

    /// What the guests are, for results.
    pub fn info(&self) -> &GuestInfo {
        &self.info
    }

    /// The agent serving the server half in this lab's direction.
    fn server(&self) -> Result<Target> {
        let guest = |i: usize| {
            self.guests
                .get(i)
                .map(Guest::target)
                .ok_or_else(|| anyhow!("guest {i} is not running"))
        };
        match self.direction {
            Direction::HostGuest | Direction::Loopback => guest(0),
            Direction::GuestGuest => guest(1),
            Direction::GuestHost => self
                .host_agent
                .as_ref()
                .map(LocalAgent::target)
                .ok_or_else(|| anyhow!("no host agent is running")),
        }
    }

    /// Runs one test across the placement and labels the result.
    pub fn run(&self, plan: &Plan) -> Result<TestResult> {
        self.run_with(plan, None)
    }

    /// Runs one test, its server's hello presenting `lock` (a hold on that agent's
    /// machine, see [`Site::run_beside`]) when given.
    fn run_with(&self, plan: &Plan, lock: Option<String>) -> Result<TestResult> {
        let mut plan = plan.clone();
        let g0 = self.guests.first().map(Guest::target);
        let server = self.server().map(|t| Target {
            lock: lock.or(t.lock.clone()),
            ..t
        });
        let direction = self.direction;
        let pids = self.qemu_pids();
        let host_exits = plan.trace.then(|| match direction {
            Direction::HostGuest => HostExits::over_window(&self.info.vcpu_cpus, &mut plan),
            _ => HostExits::whole_test(&self.info.vcpu_cpus),
        });
        // The host's view of the first guest over the window (where the host's client
        // sees it; a guest-driven test spans the whole test and says so).
        let watch = pids.first().and_then(|p| {
            virtperf_lab::host_vm::Watch::open(&virtperf_measure::vm::VmSpec::Pid(*p)).ok()
        });
        if let Some(w) = &watch {
            w.attach(&mut plan);
        }
        let cpu0: Vec<Option<f64>> = pids
            .iter()
            .map(|p| virtperf_measure::process_cpu_s(*p))
            .collect();
        // A guest drives: neither side's figures are this host's, so the host samples its
        // own CPUs around the whole test (what it paid, vCPU threads included).
        let host0 = (direction != Direction::HostGuest).then(host_cpu::HostSample::take);
        let mut r = self.in_lab(move || {
            let g0 = g0.ok_or_else(|| anyhow!("no guest is running"))?;
            let server = server?;
            match direction {
                Direction::HostGuest => client::run(&server, &plan, &|_| {}),
                // The first guest's agent drives the test against the host's agent, the
                // second guest's, or (loopback: both ends in the guest) its own.
                Direction::GuestHost | Direction::GuestGuest | Direction::Loopback => {
                    client::drive(&g0, &server, &plan)
                }
            }
        })?;
        r.placement = Some(format!("guest:{}", direction.name()));
        if self.info.emulated {
            r.warnings.push(
                "guest ran under TCG emulation: these numbers measure QEMU's instruction emulation, not a virtualization tax"
                    .into(),
            );
        }
        let mut info = self.info.clone();
        info.qemu_cpu_s = pids
            .iter()
            .zip(cpu0)
            // Clock ticks are 10 ms: keep two decimals, not float noise.
            .filter_map(|(p, before)| {
                let d = virtperf_measure::process_cpu_s(*p)? - before?;
                Some((d * 100.0).round() / 100.0)
            })
            .collect();
        r.warnings.extend(ring_warnings(&info.virtio, &r));
        if let Some(h) = host_exits {
            let (counts, warning) = h.finish(&r, info.emulated);
            r.host_trace = counts;
            r.warnings.extend(warning);
        }
        r.guest = Some(info);
        if let Some(w) = watch {
            let h = w.finish(Some(r.outcome.work()));
            virtperf_lab::assemble::attach_vm(&mut r, h);
        }
        r.host_cpu = host0.flatten().and_then(|h| h.finish());
        Ok(r)
    }

    /// The guests' console output so far (for diagnostics).
    pub fn console(&self, i: usize) -> String {
        self.guests
            .get(i)
            .and_then(|g| std::fs::read_to_string(&g.console).ok())
            .unwrap_or_default()
    }

    /// PIDs of the QEMU processes (ours, started by us).
    pub fn qemu_pids(&self) -> Vec<u32> {
        self.guests.iter().map(|g| g.child.id()).collect()
    }

    /// The namespace everything lives in (none under user networking).
    pub fn namespace(&self) -> Option<&str> {
        self.ns.as_deref()
    }

    /// Runs `f` where the guests' agents are reachable: on a thread in the lab's
    /// namespace, or (user networking: forwards on the host's loopback) right here.
    fn in_lab<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> Result<T> {
        match &self.ns {
            Some(ns) => netns::run_in(ns, f),
            None => f(),
        }
    }
}

impl super::Site for GuestLab {
    fn target(&self) -> Target {
        self.guests.first().map(Guest::target).unwrap_or(Target {
            host: net::tap_ip(0).to_string(),
            port: GUEST_PORT,
            token: None,
            lock: None,
        })
    }

    /// Progress is not reported: the test runs on a thread in the namespace, or in a guest.
    fn run(&self, plan: &Plan, _progress: ProgressFn) -> Result<TestResult> {
        GuestLab::run(self, plan)
    }

    /// A guest's agent runs one test at a time under the guest's lock: hold the server's
    /// machine (taken from inside the lab's namespace) for the pair.
    fn run_beside(
        &self,
        background: &Plan,
        foreground: &Plan,
        lead: Duration,
    ) -> Result<(TestResult, Result<TestResult>)> {
        let server = self.server()?;
        let hold = self.in_lab(move || client::Hold::take(&server))?;
        let lock = hold.id().map(str::to_string);
        crate::site::beside(
            &|p| self.run_with(p, lock.clone()),
            background,
            foreground,
            lead,
        )
    }

    /// The first guest runs the probe; its agent is reachable from the lab's namespace.
    fn probe(&self, params: serde_json::Value, bound: Duration) -> Result<serde_json::Value> {
        let g0 = self
            .guests
            .first()
            .map(Guest::target)
            .ok_or_else(|| anyhow!("no guest is running"))?;
        self.in_lab(move || client::probe(&g0, params, bound))
            .map_err(|e| {
                // The guest's console has the probe's progress: say where it stopped.
                let console = self.console(0);
                let tail: Vec<&str> = console.lines().rev().take(5).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                anyhow!(
                    "{e:#}; the guest's console ended with: {}",
                    tail.join(" | ")
                )
            })
    }
}

impl Drop for GuestLab {
    fn drop(&mut self) {
        self.host_agent = None;
        // Each guest's QEMU and passt are killed as it drops.
        self.guests.clear();
        if let (true, Some(ns)) = (self.created_ns, &self.ns) {
            let _ = netns::delete_namespace(ns);
        }
        if std::fs::remove_dir_all(&self.dir).is_ok() || !self.dir.exists() {
            virtperf_machine::state::unmark(&virtperf_machine::state::Resource::Dir {
                path: self.dir.clone(),
            });
        }
    }
}

/// A guest that could not start because its kernel lacks what the config asked of it (a
/// module parameter): experiments skip such a config, as they skip a knob this machine
/// lacks.
#[derive(Debug)]
pub struct GuestLacks(pub String);

impl std::fmt::Display for GuestLacks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for GuestLacks {}

/// What every guest of a lab boots: its kernel and initrd, the token its agent requires and
/// QEMU's accelerator (`kvm` or `tcg`).
#[derive(Clone, Copy)]
struct Boot<'a> {
    image: &'a Path,
    initrd: &'a Path,
    token: &'a str,
    accel: &'a str,
}

/// Where a ring size asked for is not what the guest's driver got (QEMU keeps the
/// transmit ring at 256 for tap backends, whatever `tx_queue_size` says), say so.
fn ring_warnings(asked: &BTreeMap<String, String>, r: &TestResult) -> Vec<String> {
    let mut out = Vec::new();
    let guests: Vec<&virtperf_wire::Env> = [Some(&r.env.client), r.env.server.as_ref()]
        .into_iter()
        .flatten()
        .filter(|e| !e.virtio_net.is_empty() && e.cmdline.contains("virtperf.ip="))
        .collect();
    for (key, pick) in [
        (
            "rx_queue_size",
            (|n: &virtperf_wire::VirtioNet| n.rx_ring) as fn(&_) -> _,
        ),
        ("tx_queue_size", |n: &virtperf_wire::VirtioNet| n.tx_ring),
    ] {
        let Some(want) = asked.get(key).and_then(|v| v.parse::<u32>().ok()) else {
            continue;
        };
        for e in &guests {
            if let Some(got) = e.virtio_net.first().and_then(pick) {
                if got != want {
                    let why = if key == "tx_queue_size" {
                        " (QEMU uses transmit rings above 256 only with vhost-user backends)"
                    } else {
                        ""
                    };
                    out.push(format!(
                        "{key}={want} was asked, the guest's driver sees a ring of {got}{why}"
                    ));
                    break;
                }
            }
        }
    }
    out
}

/// Pins QEMU's vCPU threads (named `CPU n/TCG` or `CPU n/KVM`) of process `pid`.
fn pin_vcpus(pid: u32, cpus: &[u32]) -> Result<()> {
    let mut pinned = 0;
    for entry in std::fs::read_dir(format!("/proc/{pid}/task"))?.flatten() {
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        let Some(n) = comm
            .trim()
            .strip_prefix("CPU ")
            .and_then(|r| r.split('/').next())
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        let tid = entry
            .file_name()
            .to_string_lossy()
            .parse()
            .ok()
            .and_then(rustix::process::Pid::from_raw)
            .ok_or_else(|| anyhow!("odd task id in /proc/{pid}/task"))?;
        let cpu = cpus[n % cpus.len()];
        if !virtperf_load::sock::cpu_allowed(cpu) {
            bail!("--vcpu-cpus: CPU {cpu} does not exist here");
        }
        // cpu_allowed checked that `cpu` is below CPU_SETSIZE, so `set` cannot panic.
        let mut set = rustix::thread::CpuSet::new();
        set.set(cpu as usize);
        if let Err(e) = rustix::thread::sched_setaffinity(Some(tid), &set) {
            bail!("pinning vCPU {n} to CPU {cpu}: {}", std::io::Error::from(e));
        }
        pinned += 1;
    }
    if pinned == 0 {
        bail!("--vcpu-cpus: found no vCPU threads in QEMU (pid {pid})");
    }
    Ok(())
}

/// Stops everything guest placements of this process started — QEMU processes (found by
/// their `-name vp-<our pid>-…`, so only ours), namespaces and run directories (by their
/// markers) — for a signal handler. Returns what it removed.
pub fn cleanup_own() -> Vec<String> {
    let mine = format!("{}{}-", netns::PREFIX, std::process::id());
    let mut removed = Vec::new();
    if let Ok(procs) = std::fs::read_dir("/proc") {
        for p in procs.flatten() {
            let Some(pid) = p
                .file_name()
                .to_string_lossy()
                .parse()
                .ok()
                .and_then(rustix::process::Pid::from_raw)
            else {
                continue;
            };
            let cmdline = std::fs::read(p.path().join("cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline);
            if cmdline.starts_with(QEMU) && cmdline.contains(&mine) {
                // Its command line names our run: a QEMU we started.
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                removed.push(format!("QEMU pid {pid}"));
            }
        }
    }
    removed.extend(netns::cleanup_own());
    let me = virtperf_machine::state::Owner::me();
    for (_, owned) in virtperf_machine::state::read_all::<virtperf_machine::state::Owned>("owned")
        .into_iter()
        .flatten()
    {
        if let (true, virtperf_machine::state::Resource::Dir { path }) =
            (owned.owner == me, &owned.resource)
        {
            if std::fs::remove_dir_all(path).is_ok() {
                virtperf_machine::state::unmark(&owned.resource);
                removed.push(path.display().to_string());
            }
        }
    }
    removed
}

/// Refuses what this host or these sizes cannot give a guest: root, vhost-net, a vCPU
/// count and memory size QEMU can boot with.
fn check_host(opts: &GuestOpts, vhost: bool) -> Result<()> {
    if opts.net == GuestNet::Tap && !virtperf_machine::is_root() {
        bail!("guest placements with --guest-net tap need root (they create a network namespace and tap devices): run as root, or use --guest-net user");
    }
    if vhost && !Path::new("/dev/vhost-net").exists() {
        bail!(
            "vhost on: /dev/vhost-net does not exist here (modprobe vhost_net, or leave vhost off)"
        );
    }
    if opts.vcpus == 0 || opts.vcpus > 64 {
        bail!("--vcpus must be 1..64 (got {})", opts.vcpus);
    }
    if opts.mem_mib < 128 {
        bail!("--mem must be at least 128 MiB (the initramfs alone needs tens)");
    }
    Ok(())
}

/// What a result says of the guests that `opts` alone decides.
fn described(opts: &GuestOpts) -> GuestInfo {
    GuestInfo {
        vcpus: opts.vcpus,
        mem_mib: opts.mem_mib,
        vcpu_cpus: opts.vcpu_cpus.clone(),
        cmdline: opts.cmdline.clone(),
        modules: opts.modules.clone(),
        net: opts.net.name().to_string(),
        ..GuestInfo::default()
    }
}

/// Records the guests' run directory in the state directory before creating it, so
/// `virtperf cleanup` can remove it if this process is killed.
fn make_run_dir(dir: &Path) -> Result<()> {
    virtperf_machine::state::mark(&virtperf_machine::state::Resource::Dir {
        path: dir.to_path_buf(),
    })
    .with_context(|| {
        format!(
            "cannot record {} in {}: set ${} to a writable directory",
            dir.display(),
            virtperf_machine::state::dir().display(),
            virtperf_machine::state::STATE_DIR_ENV
        )
    })?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(())
}
