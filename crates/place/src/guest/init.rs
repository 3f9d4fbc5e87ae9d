//! The guest side: virtperf as PID 1 of the initramfs virtperf builds for its QEMU guests.
//!
//! The guest has no distribution, no shell and no udev, so this does the few things a boot
//! needs by itself: mount `/proc`, `/sys` and `/dev`, load the kernel modules the host put
//! in `/modules` (already in dependency order), bring `lo` and `eth0` up with the address
//! from the kernel command line, then serve as an agent (with `--allow-drive`, so the guest
//! can be the sending end). It prints one line the host waits for:
//! `virtperf-guest: ready ADDR:PORT`. PID 1 must never exit, so every failure is printed
//! and the guest powers off, which ends QEMU (`-no-reboot`).

use std::io::Write;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rustix::mount::MountFlags;

use virtperf_lab::agent::{self, AgentConfig};

/// The line the host waits for on the guest's console.
pub const READY: &str = "virtperf-guest: ready";
/// Prefix of lines that report a failure inside the guest.
pub const FAILED: &str = "virtperf-guest: failed:";
/// Words in a failure that mean the guest kernel lacks what the experiment asked of it (a
/// module parameter): a capability, like a knob this machine lacks, not a fault.
pub const LACKS: &str = "does not exist in the guest kernel";
/// In the guest's failure line where a knob exists but nothing in the guest reads it: like
/// [`LACKS`], the guest lacks what its config asks for.
pub const INERT: &str = "has no effect in the guest";
/// Where the host puts kernel modules in the initramfs (loaded in file-name order).
pub const MODULE_DIR: &str = "/modules";
/// Where the host puts the agent's token in the initramfs (not on the kernel command line,
/// which the host shows every local user as QEMU's arguments).
pub const TOKEN_FILE: &str = "/virtperf-token";

/// Where the host puts module parameters for the guest (`guest = { modules = … }`), one
/// `MODULE.PARAM=VALUE` per line; init writes each to `/sys/module/MODULE/parameters/PARAM`
/// after loading the modules, and fails the boot if one cannot be set.
pub const MODPARAMS_FILE: &str = virtperf_measure::env::GUEST_MODPARAMS_FILE;

/// Settings the host passes on the kernel command line (`virtperf.ip=…` and so on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestParams {
    /// eth0's address.
    pub ip: Ipv4Addr,
    /// eth0's prefix length.
    pub prefix: u8,
    /// The agent's control port.
    pub port: u16,
    /// The agent's token.
    pub token: Option<String>,
    /// `virtperf.data_ports=FIRST-LAST`: the agent's data ports (behind QEMU's user
    /// networking, only forwarded ports reach the guest).
    pub data_ports: Option<(u16, u16)>,
}

impl GuestParams {
    /// Reads `virtperf.ip=A.B.C.D/N`, `virtperf.port=P` and `virtperf.token=T` from a
    /// kernel command line. Parameters with a dot are kept from init's environment by the
    /// kernel, so the guest reads them from `/proc/cmdline`.
    pub fn from_cmdline(cmdline: &str) -> Result<GuestParams> {
        let mut ip = None;
        let mut port = 7150;
        let mut token = None;
        let mut data_ports = None;
        for word in cmdline.split_whitespace() {
            let Some((k, v)) = word.split_once('=') else {
                continue;
            };
            match k {
                "virtperf.ip" => {
                    let (a, p) = v.split_once('/').unwrap_or((v, "24"));
                    let a: Ipv4Addr = a
                        .parse()
                        .map_err(|_| anyhow!("virtperf.ip={v}: not an IPv4 address"))?;
                    let p: u8 = p
                        .parse()
                        .ok()
                        .filter(|p| *p <= 32)
                        .ok_or_else(|| anyhow!("virtperf.ip={v}: bad prefix length"))?;
                    ip = Some((a, p));
                }
                "virtperf.port" => {
                    port = v
                        .parse()
                        .map_err(|_| anyhow!("virtperf.port={v}: not a port"))?
                }
                "virtperf.token" => token = Some(v.to_string()),
                "virtperf.data_ports" => {
                    data_ports = Some(
                        virtperf_lab::parse::port_range(v)
                            .map_err(|e| anyhow!("virtperf.data_ports={v}: {e}"))?,
                    )
                }
                _ => {}
            }
        }
        let (ip, prefix) =
            ip.ok_or_else(|| anyhow!("no virtperf.ip= on the kernel command line"))?;
        Ok(GuestParams {
            ip,
            prefix,
            port,
            token,
            data_ports,
        })
    }
}

/// Whether this process is the init of a virtperf guest (PID 1, started as `/init`).
pub fn is_guest_init() -> bool {
    std::process::id() == 1
        && std::env::args()
            .next()
            .is_some_and(|a| a == "/init" || a.ends_with("/init"))
}

/// Runs the guest; never returns.
pub fn run() -> ! {
    let err = match boot() {
        Ok(()) => anyhow!("the agent stopped"),
        Err(e) => e,
    };
    println!("{FAILED} {err:#}");
    let _ = std::io::stdout().flush();
    power_off()
}

fn power_off() -> ! {
    // As PID 1 we may power off; flush the disks first, as init systems do.
    rustix::fs::sync();
    let _ = rustix::system::reboot(rustix::system::RebootCommand::PowerOff);
    // reboot only returns on failure; PID 1 must not exit, so wait to be killed.
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn boot() -> Result<()> {
    mount("proc", "/proc", "proc")?;
    mount("sysfs", "/sys", "sysfs")?;
    mount("devtmpfs", "/dev", "devtmpfs")?;
    let cmdline = std::fs::read_to_string("/proc/cmdline").context("reading /proc/cmdline")?;
    let mut params = GuestParams::from_cmdline(&cmdline)?;
    if let Ok(t) = std::fs::read_to_string(TOKEN_FILE) {
        params.token = Some(t.trim().to_string()).filter(|t| !t.is_empty());
    }
    let modparams = module_params()?;
    let passed = load_modules(&modparams)?;
    set_module_params(&modparams, &passed)?;
    wait_for_interface("eth0", Duration::from_secs(20))?;
    let sock = std::net::UdpSocket::bind("0.0.0.0:0").context("opening a socket for ioctls")?;
    set_up(&sock, "lo", Some((Ipv4Addr::LOCALHOST, 8)))?;
    set_up(&sock, "eth0", Some((params.ip, params.prefix)))?;
    // Not fatal: only a backend that learns the guest's MAC from its frames needs it.
    if let Err(e) = announce("eth0", params.ip) {
        println!("virtperf-guest: could not announce eth0: {e:#}");
    }
    let cfg = AgentConfig {
        bind: std::net::IpAddr::V4(params.ip),
        port: params.port,
        token: params.token.clone(),
        max_clients: 16,
        max_duration: Duration::from_millis(virtperf_wire::MAX_DURATION_MS),
        verbose: false,
        // Driving sends traffic where a client says: only for a client holding the token
        // (virtperf's own guests always have one; an image from `vm initramfs` without
        // --token-file serves tests but does not drive them).
        allow_drive: params.token.is_some(),
        // The guest is its own machine: its tests take the guest's lock.
        concurrent: None,
        max_flows: virtperf_lab::agent::DEFAULT_MAX_FLOWS,
        max_threads: virtperf_lab::agent::DEFAULT_MAX_THREADS,
        // On a tap: none needed. Behind QEMU's user networking: the forwarded range.
        data_ports: params.data_ports,
    };
    let listener = agent::bind(&cfg)?;
    println!("{READY} {}:{}", params.ip, params.port);
    let _ = std::io::stdout().flush();
    agent::serve(listener, cfg)
}

fn mount(source: &str, target: &str, fstype: &str) -> Result<()> {
    let _ = std::fs::create_dir_all(target);
    // No flags and no mount data. EBUSY: already mounted (the kernel mounted devtmpfs itself).
    match rustix::mount::mount(source, target, fstype, MountFlags::empty(), None) {
        Ok(()) | Err(rustix::io::Errno::BUSY) => Ok(()),
        Err(e) => bail!("mounting {fstype} on {target}: {}", std::io::Error::from(e)),
    }
}

/// Loads every `/modules/*.ko` in name order (the host numbered them in dependency order),
/// with the parameters [`MODPARAMS_FILE`] gives for it: read at the module's load, as many
/// are (`virtio_net.napi_tx` decides at probe time). Returns the modules loaded so.
fn load_modules(params: &[(String, String, String)]) -> Result<Vec<String>> {
    let mut passed = Vec::new();
    let mut files: Vec<_> = match std::fs::read_dir(MODULE_DIR) {
        Ok(d) => d.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(_) => return Ok(passed),
    };
    files.sort();
    for path in files {
        let f =
            std::fs::File::open(&path).with_context(|| format!("opening {}", path.display()))?;
        // `/modules/01-virtio_net.ko` → `virtio_net`.
        let name = path
            .file_stem()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = name
            .split_once('-')
            .map_or(name.as_str(), |(_, n)| n)
            .replace('-', "_");
        let own: Vec<String> = params
            .iter()
            .filter(|(m, _, _)| m.replace('-', "_") == name)
            .map(|(_, p, v)| format!("{p}={v}"))
            .collect();
        let args = std::ffi::CString::new(own.join(" "))
            .map_err(|_| anyhow!("module parameters for {name} contain a NUL byte"))?;
        // EEXIST: built in or already loaded (its parameters are then written to /sys).
        match rustix::system::finit_module(&f, &args, 0) {
            Ok(()) => {
                if !own.is_empty() {
                    passed.push(name);
                }
            }
            Err(rustix::io::Errno::EXIST) => {}
            Err(e) => bail!(
                "loading module {}: {}",
                path.display(),
                std::io::Error::from(e)
            ),
        }
    }
    Ok(passed)
}

/// [`MODPARAMS_FILE`] as (module, parameter, value).
fn module_params() -> Result<Vec<(String, String, String)>> {
    let Ok(text) = std::fs::read_to_string(MODPARAMS_FILE) else {
        return Ok(Vec::new());
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let (name, value) = line
                .split_once('=')
                .ok_or_else(|| anyhow!("bad module parameter line {line:?}"))?;
            let (module, param) = name
                .split_once('.')
                .ok_or_else(|| anyhow!("bad module parameter name {name:?}"))?;
            Ok((module.to_string(), param.to_string(), value.to_string()))
        })
        .collect()
}

/// Applies the guest-side knobs of an experiment (e.g. seed 4's
/// `haltpoll.guest_halt_poll_ns`) that were not passed at a module's load, before the agent
/// serves, so every test sees them.
fn set_module_params(params: &[(String, String, String)], passed: &[String]) -> Result<()> {
    for (module, param, value) in params {
        let name = format!("{module}.{param}");
        let path = format!("/sys/module/{module}/parameters/{param}");
        if passed.contains(&module.replace('-', "_")) {
            // The kernel loads a module with a parameter it does not know, only logging
            // it: check the parameter is there.
            if !std::path::Path::new(&path).exists() {
                bail!("module parameter {name} {LACKS} (its module {module} loaded without it, or does not show it in /sys/module)");
            }
            continue;
        }
        if !std::path::Path::new(&path).exists() {
            bail!("module parameter {name} {LACKS} ({path} is absent: module not built in or not loaded)");
        }
        std::fs::write(&path, value)
            .with_context(|| format!("setting module parameter {name}={value} ({path})"))?;
        if let Some(why) = inert_halt_poll(&name, value) {
            bail!("{name}={value} {INERT}: {why}");
        }
    }
    Ok(())
}

/// Why a nonzero guest halt-poll window reaches no idle loop in this guest (the haltpoll
/// governor reads it alone: a kernel with the governor but without the cpuidle-haltpoll
/// driver loaded, or under another governor, would run the config's trials on an unchanged
/// idle path), or None.
fn inert_halt_poll(name: &str, value: &str) -> Option<String> {
    let driver = virtperf_measure::env::cpuidle_driver();
    let why = virtperf_wire::model::inert_module_setting(
        name,
        value,
        driver.as_deref(),
        virtperf_measure::env::cpuidle_governor().as_deref(),
    )?;
    Some(match driver.as_deref() {
        None | Some("none") => format!(
            "{why} (give the guest cpuidle_haltpoll.force=1 on its command line, with the cpuidle-haltpoll driver built into its kernel)"
        ),
        Some(_) => why,
    })
}

fn wait_for_interface(name: &str, timeout: Duration) -> Result<()> {
    let t0 = Instant::now();
    let path = format!("/sys/class/net/{name}");
    while !std::path::Path::new(&path).exists() {
        if t0.elapsed() > timeout {
            bail!("no {name} after {} s: the kernel has no virtio-net driver (give --kernel-modules with virtio_net, or a kernel with it built in)", timeout.as_secs());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// An `ifreq` naming `dev`.
fn ifreq(dev: &str) -> Result<libc::ifreq> {
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut r: libc::ifreq = unsafe { std::mem::zeroed() };
    if dev.len() >= r.ifr_name.len() {
        bail!("interface name {dev} too long");
    }
    for (d, s) in r.ifr_name.iter_mut().zip(dev.bytes()) {
        *d = s as libc::c_char;
    }
    Ok(r)
}

fn sockaddr(ip: Ipv4Addr) -> libc::sockaddr {
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: sockaddr_in and sockaddr have the same size on Linux; the kernel reads it as
    // sockaddr_in because of sin_family.
    unsafe { std::mem::transmute::<libc::sockaddr_in, libc::sockaddr>(sin) }
}

/// Sends one gratuitous ARP for `ip` on `dev`. The guest otherwise stays silent until
/// spoken to, and passt learns the guest's MAC only from a frame the guest sends: until
/// then it addresses forwarded connections to the broadcast MAC, and the guest's TCP drops
/// a segment not addressed to it. On a bridge or under SLIRP the announcement is harmless.
/// Written by hand: an ARP frame is 28 bytes and a packet socket, not worth a crate in PID 1.
fn announce(dev: &str, ip: Ipv4Addr) -> Result<()> {
    let sys = |f: &str| std::fs::read_to_string(format!("/sys/class/net/{dev}/{f}"));
    let mac: Vec<u8> = sys("address")?
        .trim()
        .split(':')
        .map(|h| u8::from_str_radix(h, 16))
        .collect::<Result<_, _>>()
        .context("reading the MAC")?;
    anyhow::ensure!(mac.len() == 6, "a MAC of {} bytes", mac.len());
    let ifindex: i32 = sys("ifindex")?
        .trim()
        .parse()
        .context("reading the ifindex")?;
    // htype Ethernet, ptype IPv4, hlen 6, plen 4, a request whose sender and target are
    // both this address (RFC 5227's announcement).
    let mut arp = vec![0, 1, 0x08, 0x00, 6, 4, 0, 1];
    arp.extend_from_slice(&mac);
    arp.extend_from_slice(&ip.octets());
    arp.extend_from_slice(&[0; 6]);
    arp.extend_from_slice(&ip.octets());
    let proto = (libc::ETH_P_ARP as u16).to_be();
    // SAFETY: plain socket(2); the descriptor is closed below.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_DGRAM, i32::from(proto)) };
    if fd < 0 {
        bail!("a packet socket: {}", std::io::Error::last_os_error());
    }
    // SAFETY: sockaddr_ll is plain data; zero is a valid start.
    let mut to: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    to.sll_family = libc::AF_PACKET as u16;
    to.sll_protocol = proto;
    to.sll_ifindex = ifindex;
    to.sll_halen = 6;
    to.sll_addr[..6].copy_from_slice(&[0xff; 6]);
    // SAFETY: arp and to outlive the call; the length is to's size.
    let sent = unsafe {
        libc::sendto(
            fd,
            arp.as_ptr().cast(),
            arp.len(),
            0,
            (&to as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    let err = std::io::Error::last_os_error();
    // SAFETY: fd is ours and closed once.
    unsafe { libc::close(fd) };
    if sent < 0 {
        bail!("sending: {err}");
    }
    Ok(())
}

/// Gives `dev` an address (when asked) and brings it up, with the classic SIOCSIF* ioctls:
/// the guest has no `ip` binary, and these two calls are all it needs of rtnetlink.
fn set_up(sock: &std::net::UdpSocket, dev: &str, addr: Option<(Ipv4Addr, u8)>) -> Result<()> {
    let fd = sock.as_raw_fd();
    let ioctl = |req: libc::c_ulong, r: &mut libc::ifreq, what: &str| -> Result<()> {
        // The request parameter is c_ulong in glibc and c_int in musl (the guest build);
        // the SIOC* constants are c_ulong in both, and fit either.
        #[allow(clippy::unnecessary_cast)]
        let req = req as libc::Ioctl;
        // SAFETY: r is a valid ifreq for these SIOC* requests.
        if unsafe { libc::ioctl(fd, req, r as *mut libc::ifreq) } != 0 {
            bail!("{what} {dev}: {}", std::io::Error::last_os_error());
        }
        Ok(())
    };
    if let Some((ip, prefix)) = addr {
        let mut r = ifreq(dev)?;
        r.ifr_ifru.ifru_addr = sockaddr(ip);
        ioctl(libc::SIOCSIFADDR, &mut r, "setting the address of")?;
        let mask = if prefix == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(prefix))
        };
        let mut r = ifreq(dev)?;
        r.ifr_ifru.ifru_netmask = sockaddr(Ipv4Addr::from(mask));
        ioctl(libc::SIOCSIFNETMASK, &mut r, "setting the netmask of")?;
    }
    let mut r = ifreq(dev)?;
    ioctl(libc::SIOCGIFFLAGS, &mut r, "reading the flags of")?;
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
    let flags = unsafe { r.ifr_ifru.ifru_flags };
    r.ifr_ifru.ifru_flags = flags | (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    ioctl(libc::SIOCSIFFLAGS, &mut r, "bringing up")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_its_parameters_from_a_kernel_command_line() {
        let p = GuestParams::from_cmdline(
            "console=ttyS0 quiet virtperf.ip=10.99.3.10/24 virtperf.port=7151 virtperf.token=ab12",
        )
        .expect("valid");
        assert_eq!(p.ip, Ipv4Addr::new(10, 99, 3, 10));
        assert_eq!(p.prefix, 24);
        assert_eq!(p.port, 7151);
        assert_eq!(p.token.as_deref(), Some("ab12"));
    }

    #[test]
    fn refuses_a_command_line_without_an_address_or_with_a_bad_one() {
        for bad in [
            "console=ttyS0",
            "virtperf.ip=10.99.3/24",
            "virtperf.ip=10.0.0.1/40",
            "virtperf.ip=10.0.0.1 virtperf.port=99999",
        ] {
            assert!(GuestParams::from_cmdline(bad).is_err(), "{bad}");
        }
    }
}
