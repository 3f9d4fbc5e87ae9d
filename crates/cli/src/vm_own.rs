//! For VMs virtperf did not boot: `virtperf vm initramfs` (a guest image whose init is
//! virtperf's agent, for a QEMU or Firecracker started by hand) and `virtperf vm watch`
//! (the host's view of a running VM over a while, no test needed).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;

use virtperf_lab::host_vm::Watch;
use virtperf_measure::vm::VmSpec;
use virtperf_place::guest::{init, initramfs, kernel};

/// `virtperf vm initramfs`
#[derive(Debug, Args)]
pub struct InitramfsArgs {
    /// Where to write the initramfs (newc cpio)
    #[arg(long, short = 'o', value_name = "FILE")]
    pub out: PathBuf,
    /// Bake this token (first line of FILE) into the image for the guest's agent (it is
    /// never on the kernel command line, which every local user can read); without it the
    /// agent answers anyone who reaches its port
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Guest kernel (bzImage); default: Debian's linux-image-cloud-amd64, fetched once
    #[arg(long, value_name = "PATH")]
    pub kernel: Option<PathBuf>,
    /// lib/modules/RELEASE directory with that kernel's virtio modules
    #[arg(long, value_name = "DIR")]
    pub kernel_modules: Option<PathBuf>,
    /// virtperf binary to put in the image (default: this one)
    #[arg(long, value_name = "PATH")]
    pub guest_binary: Option<PathBuf>,
    /// The agent's control port in the guest, forwarded from the same port on 127.0.0.1
    #[arg(long, default_value_t = 7150, value_name = "PORT",
          value_parser = clap::value_parser!(u16).range(1..))]
    pub port: u16,
    /// The agent's data range in the guest, each port forwarded (TCP and UDP) from the
    /// same port on 127.0.0.1
    #[arg(long, default_value = "17151-17166", value_name = "FIRST-LAST",
          value_parser = virtperf_lab::parse::port_range)]
    pub data_ports: (u16, u16),
    /// The VM's name: QEMU's `-name` (which names its vCPU threads), or the libvirt domain's
    #[arg(long, default_value = "myvm", value_name = "NAME", value_parser = vm_name)]
    pub name: String,
    /// Accelerator the printed command line or domain asks for: auto (KVM where hardware
    /// virtualization works here, else TCG), kvm, tcg
    #[arg(long, default_value = "auto", value_name = "auto|kvm|tcg")]
    pub accel: virtperf_place::guest::Accel,
    /// Print a libvirt domain definition (`virsh define`) that boots the image, instead of
    /// the QEMU command line; the kernel is copied beside the initramfs, since libvirt's
    /// QEMU runs as its own user and must read both (e.g. under /var/lib/libvirt/images)
    #[arg(long)]
    pub libvirt_xml: bool,
    /// Print JSON: {initramfs, kernel, release, append, ready_line, qemu, libvirt_xml}
    #[arg(long)]
    pub json: bool,
}

/// The most data ports the printed command line or domain forwards.
const MAX_FORWARDED: u32 = 64;

/// A VM name as `--vm qemu:NAME` / `libvirt:NAME` takes it, and as QEMU's `-name`, a
/// domain's `<name>` and the printed shell commands carry it unquoted: letters, digits,
/// '.', '_', '-' (a comma would end QEMU's `-name` value, `<` or a space would turn the
/// printed `virsh define NAME.xml` into something else).
fn vm_name(s: &str) -> Result<String> {
    let spec: VmSpec = format!("libvirt:{s}")
        .parse()
        .map_err(|e: String| anyhow::anyhow!("{e}"))?;
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        anyhow::bail!(
            "{s:?}: {c:?} is not allowed in a VM name here: use letters, digits, '.', '_' and '-'"
        );
    }
    Ok(match spec {
        VmSpec::Libvirt(n) => n,
        _ => s.to_string(),
    })
}

/// The guest's kernel command line and QEMU's `-netdev` value with the agent's ports
/// forwarded on 127.0.0.1.
fn boot_line(a: &InitramfsArgs) -> (String, String) {
    let (port, (first, last)) = (a.port, a.data_ports);
    let append = format!(
        "console=ttyS0 quiet panic=-1 virtperf.ip=10.0.2.15/24 virtperf.port={port} virtperf.data_ports={first}-{last}"
    );
    let mut fwd = format!("user,id=n0,hostfwd=tcp:127.0.0.1:{port}-:{port}");
    for p in first..=last {
        fwd.push_str(&format!(
            ",hostfwd=tcp:127.0.0.1:{p}-:{p},hostfwd=udp:127.0.0.1:{p}-:{p}"
        ));
    }
    (append, fwd)
}

/// `virtperf vm initramfs`
pub fn initramfs_cmd(a: InitramfsArgs) -> Result<()> {
    // A bad --out (no such directory, a directory, not writable) costs nothing: checked
    // first. The image replaces an existing file, as it always has (force).
    crate::out_file::check(&a.out, true)
        .map_err(|m| crate::signals::exit(crate::signals::code::USAGE, m))?;
    if a.data_ports.0 <= a.port && a.port <= a.data_ports.1 {
        return Err(crate::signals::exit(
            crate::signals::code::USAGE,
            format!(
                "--port {} lies inside --data-ports {}-{}: give a control port outside the range",
                a.port, a.data_ports.0, a.data_ports.1
            ),
        ));
    }
    let span = u32::from(a.data_ports.1) - u32::from(a.data_ports.0) + 1;
    if span > MAX_FORWARDED {
        return Err(crate::signals::exit(
            crate::signals::code::USAGE,
            format!(
                "--data-ports {}-{} is {span} ports: forward at most {MAX_FORWARDED} (each is a TCP and a UDP socket QEMU holds on 127.0.0.1; a test takes one port per flow)",
                a.data_ports.0, a.data_ports.1
            ),
        ));
    }
    let (accel, _) = virtperf_place::guest::choose_accel(a.accel)?;
    let k = kernel::resolve(a.kernel.as_deref(), a.kernel_modules.as_deref())?;
    let binary = match &a.guest_binary {
        Some(b) => b.clone(),
        None => std::env::current_exe().context("finding our own executable")?,
    };
    let token = a
        .token_file
        .as_ref()
        .map(|f| crate::args::resolve_token(&None, &Some(f.clone())))
        .transpose()?
        .flatten();
    initramfs::build(&a.out, &binary, &k.modules, token.as_deref(), &[])
        .with_context(|| format!("writing {}", a.out.display()))?;
    let (append, fwd) = boot_line(&a);
    let xml = a
        .libvirt_xml
        .then(|| libvirt_domain(&a, &k.image, accel, &append, &fwd))
        .transpose()?;
    let qemu = qemu_line(&a, &k.image, accel, append.clone(), fwd);
    if a.json {
        let v = serde_json::json!({
            "initramfs": a.out.display().to_string(),
            "kernel": k.image.display().to_string(),
            "release": k.release,
            "append": append,
            "ready_line": init::READY,
            "qemu": qemu,
            "libvirt_xml": xml,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    if let Some(x) = xml {
        print!("{x}");
        return Ok(());
    }
    print_qemu_line(&a, &k.release, &qemu);
    Ok(())
}

/// The QEMU command line that boots the image.
fn qemu_line(
    a: &InitramfsArgs,
    kernel: &std::path::Path,
    accel: &str,
    append: String,
    fwd: String,
) -> Vec<String> {
    let words = [
        "qemu-system-x86_64",
        "-name",
        &format!("{},debug-threads=on", a.name),
        "-machine",
        "pc",
        "-accel",
        accel,
        "-m",
        "512",
        "-nodefaults",
        "-display",
        "none",
        "-serial",
        "stdio",
        "-kernel",
        &kernel.display().to_string(),
        "-initrd",
        &a.out.display().to_string(),
        "-append",
        &append,
        "-netdev",
        &fwd,
        "-device",
        "virtio-net-pci,netdev=n0,romfile=",
    ];
    words.iter().map(|w| w.to_string()).collect()
}

/// Prints what was written and the QEMU command line, quoted for a shell.
fn print_qemu_line(a: &InitramfsArgs, release: &str, qemu: &[String]) {
    println!(
        "wrote {} (virtperf as init and agent; kernel {release})",
        a.out.display()
    );
    println!(
        "boot it, e.g. (the guest prints \"{}\" when its agent listens):",
        init::READY
    );
    let quoted: Vec<String> = qemu
        .iter()
        .map(|w| {
            if w.contains(' ') {
                format!("'{w}'")
            } else {
                w.clone()
            }
        })
        .collect();
    println!("  {}", quoted.join(" "));
    println!(
        "then: virtperf rr --host 127.0.0.1 --port {} --vm qemu:{}",
        a.port, a.name
    );
}

/// `--libvirt-xml`: copies the kernel beside the initramfs and returns the domain
/// definition; says on stderr how to start it, and which directory on the way would keep
/// libvirt's QEMU from reading the files.
fn libvirt_domain(
    a: &InitramfsArgs,
    kernel: &std::path::Path,
    accel: &str,
    append: &str,
    fwd: &str,
) -> Result<String> {
    let out = std::path::absolute(&a.out).context("the initramfs's path")?;
    let beside = out.with_extension("vmlinuz");
    if beside != kernel {
        std::fs::copy(kernel, &beside)
            .with_context(|| format!("copying the kernel to {}", beside.display()))?;
    }
    let log = out.with_extension("console.log");
    let xml = crate::libvirt_xml::domain(&crate::libvirt_xml::Domain {
        name: &a.name,
        accel,
        kernel: &beside,
        initrd: &out,
        cmdline: append,
        netdev: fwd,
        console_log: &log,
    });
    if let Some(d) = crate::libvirt_xml::closed_dir(&out) {
        eprintln!(
            "warning: {} is closed to other users: libvirt's QEMU (user libvirt-qemu) cannot read the image there; write it under /var/lib/libvirt/images",
            d.display()
        );
    }
    eprintln!(
        "wrote {} and {}; save this definition as {n}.xml, then: virsh define {n}.xml && virsh start {n} (the console log {} shows \"{}\" when its agent listens); then: virtperf rr --host 127.0.0.1 --port {} --vm libvirt:{n}",
        out.display(),
        beside.display(),
        log.display(),
        init::READY,
        a.port,
        n = a.name
    );
    Ok(xml)
}

/// `virtperf vm watch`
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The VM: pid:N, qemu:NAME, libvirt:DOMAIN or firecracker:PID
    #[arg(long, value_name = "SPEC")]
    pub vm: VmSpec,
    /// How long to watch
    #[arg(long, short = 'l', default_value = "10s", value_parser = parse_watch)]
    pub duration: Duration,
    /// Print JSON (a `host_vm` object, docs/json.md)
    #[arg(long)]
    pub json: bool,
}

fn parse_watch(s: &str) -> Result<Duration> {
    let d = virtperf_lab::parse::duration(s)?;
    if d.is_zero() || d > Duration::from_secs(24 * 3600) {
        anyhow::bail!("{s:?}: give a duration between 1ms and 24h");
    }
    Ok(d)
}

/// `virtperf vm watch`
pub fn watch(a: WatchArgs) -> Result<()> {
    let w = Watch::open(&a.vm).map_err(|e| crate::signals::exit(1, format!("{e:#}")))?;
    // A signal ends the watch there and the part watched is printed (it was lost: the
    // command died with nothing printed).
    let cut = crate::signals::cut_on_termination()?;
    let progress = crate::progress::Progress::new("vm watch", a.json);
    w.mark(true);
    // Sampled every 100 ms, so a window ends where the VM's process did (the last sample
    // taken while it ran whole: one seen alive after it), not where the command did.
    let t0 = std::time::Instant::now();
    let mut ended = None;
    while t0.elapsed() < a.duration && !cut.load(std::sync::atomic::Ordering::SeqCst) {
        std::thread::sleep((a.duration - t0.elapsed()).min(Duration::from_millis(100)));
        progress.update(Some(t0.elapsed().as_secs_f64() / a.duration.as_secs_f64()));
        if !w.alive() {
            ended = Some(t0.elapsed());
            break;
        }
        w.hold();
    }
    drop(progress);
    let watched = t0.elapsed();
    if ended.is_none() && !w.alive() {
        ended = Some(t0.elapsed());
    }
    if ended.is_some() {
        w.ended();
    } else {
        w.close();
    }
    let h = w.finish(None);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&h)?);
    } else {
        print!("{}", virtperf_report::host_vm::host_vm(&h));
    }
    let sig = crate::signals::received();
    match ended {
        _ if sig != 0 => Err(crate::signals::exit(
            crate::signals::code_for(sig),
            format!(
                "stopped by {}: the {:.1} s watched of the {:.1} s asked are printed",
                crate::signals::name(sig),
                watched.as_secs_f64(),
                a.duration.as_secs_f64()
            ),
        )),
        Some(t) => Err(crate::signals::exit(
            1,
            format!(
                "{}: the VM's process exited {:.1} s into the {:.1} s watch: the figures above end where it did",
                a.vm,
                t.as_secs_f64(),
                a.duration.as_secs_f64()
            ),
        )),
        None if h.classes.is_empty() => Err(crate::signals::exit(
            1,
            format!(
                "{}: nothing was watched ({})",
                a.vm,
                h.missing.values().cloned().collect::<Vec<_>>().join("; ")
            ),
        )),
        None => Ok(()),
    }
}
