//! The guest kernel: a file the user names (`--kernel`), or Debian's cloud kernel fetched
//! once with `apt-get download` into virtperf's cache, plus the modules the guest needs for
//! virtio-net, in the order they must be loaded.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};

/// The Debian package that always depends on the current cloud kernel.
pub const DEBIAN_PACKAGE: &str = "linux-image-cloud-amd64";
/// Modules a guest needs for its network card (their dependencies are added from
/// `modules.dep`): virtio-pci for the device, virtio-net for the driver.
pub const WANTED: &[&str] = &["virtio_pci", "virtio_net"];

/// A kernel ready to boot.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// The bzImage.
    pub image: PathBuf,
    /// Release (`6.1.0-56-cloud-amd64`) or, for a user's kernel, its file name.
    pub release: String,
    /// Modules to load, dependencies first.
    pub modules: Vec<PathBuf>,
}

/// virtperf's cache directory: `$VIRTPERF_CACHE`, else `$XDG_CACHE_HOME/virtperf`, else
/// `~/.cache/virtperf`.
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("VIRTPERF_CACHE") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(d).join("virtperf");
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    PathBuf::from(home).join(".cache/virtperf")
}

/// The kernel to boot: `explicit` (with modules from `modules_dir`, a `lib/modules/RELEASE`
/// directory holding `modules.dep`, if given) or Debian's cloud kernel from the cache,
/// fetched on first use.
pub fn resolve(explicit: Option<&Path>, modules_dir: Option<&Path>) -> Result<Kernel> {
    match explicit {
        Some(image) => {
            if !image.is_file() {
                bail!(
                    "kernel {} does not exist (give a bzImage, or omit --kernel to use Debian's cloud kernel)",
                    image.display()
                );
            }
            let modules = match modules_dir {
                Some(d) => module_closure(d, WANTED)?,
                None => Vec::new(),
            };
            let release = image
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| image.display().to_string());
            Ok(Kernel {
                image: image.to_path_buf(),
                release,
                modules,
            })
        }
        None => {
            let (image, moddir, release) = debian_cloud(&cache_dir().join("kernels"))?;
            let dir = modules_dir.map(Path::to_path_buf).unwrap_or(moddir);
            Ok(Kernel {
                image,
                release,
                modules: module_closure(&dir, WANTED)?,
            })
        }
    }
}

/// Holds an exclusive `flock` on a file while alive, so two virtperf processes (or tests)
/// never unpack the same kernel at once.
struct Lock(std::fs::File);

impl Lock {
    fn take(path: &Path) -> Result<Lock> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .with_context(|| format!("opening lock {}", path.display()))?;
        if let Err(e) = rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive) {
            bail!("locking {}: {}", path.display(), std::io::Error::from(e));
        }
        Ok(Lock(f))
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        // Closing the file would release it too.
        let _ = rustix::fs::flock(&self.0, rustix::fs::FlockOperation::Unlock);
    }
}

fn run(cmd: &mut Command, what: &str, hint: &str) -> Result<String> {
    let out = cmd
        .output()
        .map_err(|e| anyhow!("cannot run {what}: {e} ({hint})"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err
            .lines()
            .map(str::trim)
            .rfind(|l| !l.is_empty() && !l.starts_with("W:"))
            .unwrap_or("failed");
        bail!("{what} failed: {line}");
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Debian's cloud kernel unpacked under `dir/RELEASE/root`; returns (image, modules dir,
/// release). A kernel already in the cache is used as it is (newest release first), so runs
/// are repeatable and work offline; delete the cache directory to fetch a newer one.
fn debian_cloud(dir: &Path) -> Result<(PathBuf, PathBuf, String)> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let _lock = Lock::take(&dir.join(".lock"))?;
    let paths = |release: &str| {
        let root = dir.join(release).join("root");
        (
            root.join(format!("boot/vmlinuz-{release}")),
            root.join(format!("lib/modules/{release}")),
        )
    };
    let mut cached: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("complete").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    cached.sort();
    if let Some(release) = cached.pop() {
        let (image, moddir) = paths(&release);
        return Ok((image, moddir, release));
    }
    let deps = run(
        Command::new("apt-cache").args(["depends", DEBIAN_PACKAGE]),
        "`apt-cache depends linux-image-cloud-amd64`",
        "the guest kernel comes from Debian's archive; on other systems give --kernel",
    )?;
    let package = deps
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Depends:"))
        .map(str::trim)
        .find(|p| p.starts_with("linux-image-"))
        .ok_or_else(|| anyhow!("apt-cache names no kernel package for {DEBIAN_PACKAGE} (run apt-get update, or give --kernel)"))?
        .to_string();
    let release = package.trim_start_matches("linux-image-").to_string();
    let work = dir.join(&release);
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    eprintln!(
        "virtperf: fetching guest kernel {package} into {}",
        work.display()
    );
    run(
        Command::new("apt-get")
            .args(["download", &package])
            .current_dir(&work),
        &format!("`apt-get download {package}`"),
        "apt-get is Debian's package tool",
    )?;
    let deb = std::fs::read_dir(&work)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .ok_or_else(|| anyhow!("apt-get download left no .deb in {}", work.display()))?;
    let root = work.join("root");
    run(
        Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root),
        "`dpkg-deb -x`",
        "dpkg-deb unpacks Debian packages",
    )?;
    let (image, moddir) = paths(&release);
    if !image.is_file() {
        bail!("{} holds no {}", deb.display(), image.display());
    }
    // The package ships no modules.dep (depmod makes it at install time): make it here.
    if !moddir.join("modules.dep").exists() {
        run(
            Command::new("depmod").arg("-b").arg(&root).arg(&release),
            "`depmod`",
            "apt-get install kmod",
        )?;
    }
    let _ = std::fs::remove_file(&deb);
    std::fs::write(work.join("complete"), &package)?;
    Ok((image, moddir, release))
}

/// The modules in `moddir` (holding `modules.dep`) that `wanted` need, dependencies first;
/// modules built into the kernel (`modules.builtin`) need nothing.
pub fn module_closure(moddir: &Path, wanted: &[&str]) -> Result<Vec<PathBuf>> {
    let dep_file = moddir.join("modules.dep");
    let text = std::fs::read_to_string(&dep_file).with_context(|| {
        format!(
            "reading {} (a modules directory needs one: run depmod)",
            dep_file.display()
        )
    })?;
    let builtin: BTreeSet<String> = std::fs::read_to_string(moddir.join("modules.builtin"))
        .unwrap_or_default()
        .lines()
        .map(module_name)
        .collect();
    let deps: HashMap<String, (String, Vec<String>)> = text
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(m, d)| {
            (
                module_name(m),
                (
                    m.trim().to_string(),
                    d.split_whitespace().map(str::to_string).collect(),
                ),
            )
        })
        .collect();
    let mut order: Vec<String> = Vec::new();
    for w in wanted {
        if builtin.contains(*w) {
            continue;
        }
        let (path, dep_paths) = deps.get(*w).ok_or_else(|| {
            anyhow!(
                "the guest kernel has no {w} module (in {}) and does not build it in",
                moddir.display()
            )
        })?;
        // modules.dep lists the full closure, most basic last: modprobe loads it reversed.
        for p in dep_paths.iter().rev().chain(std::iter::once(path)) {
            if !order.contains(p) {
                order.push(p.clone());
            }
        }
    }
    Ok(order.into_iter().map(|p| moddir.join(p)).collect())
}

/// `kernel/drivers/net/virtio_net.ko.xz` → `virtio_net` (module names use `_`, files may
/// use `-`).
fn module_name(path: &str) -> String {
    let file = path.trim().rsplit('/').next().unwrap_or("");
    let stem = file.split(".ko").next().unwrap_or(file);
    stem.replace('-', "_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_modules_dependencies_first_and_skips_builtins() {
        let dir = std::env::temp_dir().join(format!("vp-moddep-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        std::fs::write(
            dir.join("modules.dep"),
            "kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio_pci_modern_dev.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko\n\
             kernel/drivers/net/virtio_net.ko: kernel/drivers/net/net_failover.ko kernel/net/core/failover.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko\n\
             kernel/drivers/virtio/virtio.ko: kernel/drivers/virtio/virtio_ring.ko\n",
        )
        .expect("write");
        std::fs::write(
            dir.join("modules.builtin"),
            "kernel/drivers/block/loop.ko\n",
        )
        .expect("write");
        let got: Vec<String> = module_closure(&dir, WANTED)
            .expect("closure")
            .iter()
            .map(|p| module_name(&p.to_string_lossy()))
            .collect();
        assert_eq!(
            got,
            [
                "virtio_ring",
                "virtio",
                "virtio_pci_modern_dev",
                "virtio_pci",
                "failover",
                "net_failover",
                "virtio_net"
            ]
        );
        assert!(module_closure(&dir, &["loop"]).expect("builtin").is_empty());
        let err = module_closure(&dir, &["e1000"]).expect_err("absent");
        assert!(err.to_string().contains("no e1000 module"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
