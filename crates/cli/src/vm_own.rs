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
    /// Print JSON: {initramfs, kernel, release, append, qemu}
    #[arg(long)]
    pub json: bool,
}

/// The guest agent's control port and data range in the example command line.
const PORT: u16 = 7150;
const DATA: (u16, u16) = (17151, 17166);

/// `virtperf vm initramfs`
pub fn initramfs_cmd(a: InitramfsArgs) -> Result<()> {
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
    let append = format!(
        "console=ttyS0 quiet panic=-1 virtperf.ip=10.0.2.15/24 virtperf.port={PORT} virtperf.data_ports={}-{}",
        DATA.0, DATA.1
    );
    let mut fwd = format!("user,id=n0,hostfwd=tcp:127.0.0.1:{PORT}-:{PORT}");
    for p in DATA.0..=DATA.1 {
        fwd.push_str(&format!(
            ",hostfwd=tcp:127.0.0.1:{p}-:{p},hostfwd=udp:127.0.0.1:{p}-:{p}"
        ));
    }
    let qemu = vec![
        "qemu-system-x86_64".to_string(),
        "-name".into(),
        "myvm,debug-threads=on".into(),
        "-machine".into(),
        "pc,accel=kvm:tcg".into(),
        "-m".into(),
        "512".into(),
        "-nodefaults".into(),
        "-display".into(),
        "none".into(),
        "-serial".into(),
        "stdio".into(),
        "-kernel".into(),
        k.image.display().to_string(),
        "-initrd".into(),
        a.out.display().to_string(),
        "-append".into(),
        append.clone(),
        "-netdev".into(),
        fwd,
        "-device".into(),
        "virtio-net-pci,netdev=n0,romfile=".into(),
    ];
    if a.json {
        let v = serde_json::json!({
            "initramfs": a.out.display().to_string(),
            "kernel": k.image.display().to_string(),
            "release": k.release,
            "append": append,
            "ready_line": init::READY,
            "qemu": qemu,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!(
        "wrote {} (virtperf as init and agent; kernel {})",
        a.out.display(),
        k.release
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
    println!("then: virtperf rr --host 127.0.0.1 --port {PORT} --vm qemu:myvm");
    Ok(())
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
    w.mark(true);
    // Sampled every 100 ms, so a window ends where the VM's process did (the last sample
    // taken while it ran), not where the command did.
    let t0 = std::time::Instant::now();
    let mut ended = None;
    while t0.elapsed() < a.duration {
        std::thread::sleep((a.duration - t0.elapsed()).min(Duration::from_millis(100)));
        if !w.alive() {
            ended = Some(t0.elapsed());
            break;
        }
        w.mark(false);
    }
    let h = w.finish(None);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&h)?);
    } else {
        print!("{}", virtperf_report::host_vm::host_vm(&h));
    }
    match ended {
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
