//! The guest's initramfs: a newc cpio archive (written with the `cpio` crate) holding
//! virtperf as `/init`, the shared libraries it needs when it is not a static build, the
//! kernel modules in load order, `/dev/console` so the kernel can give init a console, and
//! the agent's token in [`TOKEN_FILE`]: a file in an archive only root can read, where the
//! kernel command line (QEMU's `-append`) would show it to every local user in `ps`.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};
use cpio::newc::Builder;

use super::init::{MODULE_DIR, TOKEN_FILE};

/// What went into an initramfs, for the record and for tests.
#[derive(Debug, Clone, Default)]
pub struct Contents {
    /// Whether virtperf was a static binary (else its libraries were copied).
    pub static_binary: bool,
    /// Shared libraries copied in, by their path in the guest.
    pub libraries: Vec<String>,
    /// Modules, in load order (file names in the guest).
    pub modules: Vec<String>,
}

/// Writes an initramfs to `out` with `binary` as `/init`, `modules` to load in order, and
/// `token` (if any) in [`TOKEN_FILE`]. The archive is readable by its owner only, since it
/// holds the token.
pub fn build(
    out: &Path,
    binary: &Path,
    modules: &[PathBuf],
    token: Option<&str>,
    extra: &[(&str, &[u8])],
) -> Result<Contents> {
    let exe = stripped(binary, out)?;
    let libs = shared_libraries(&exe)?;
    let _ = std::fs::remove_file(out);
    let file = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(out)
            .with_context(|| format!("creating {}", out.display()))?
    };
    let mut w = std::io::BufWriter::new(file);
    let mut dirs = BTreeSet::new();
    let mut ino = 1u32;
    let mut next_ino = || {
        ino += 1;
        ino
    };
    for d in ["/dev", "/proc", "/sys", "/tmp", MODULE_DIR] {
        dir(&mut w, &mut dirs, d, &mut next_ino)?;
    }
    // The kernel opens /dev/console for init's stdio before init can mount devtmpfs.
    w = Builder::new("dev/console")
        .ino(next_ino())
        .mode(0o020600)
        .nlink(1)
        .rdev_major(5)
        .rdev_minor(1)
        .write(w, 0)
        .finish()?;
    let data = std::fs::read(&exe).with_context(|| format!("reading {}", exe.display()))?;
    w = file_entry(w, "/init", 0o100755, &data, next_ino())?;
    let _ = std::fs::remove_file(&exe);
    let mut contents = Contents {
        static_binary: libs.is_empty(),
        ..Default::default()
    };
    for lib in &libs {
        let parent = Path::new(lib)
            .parent()
            .map(|p| p.to_string_lossy().into_owned());
        if let Some(p) = parent {
            dir(&mut w, &mut dirs, &p, &mut next_ino)?;
        }
        let data = std::fs::read(lib).with_context(|| format!("reading {lib}"))?;
        w = file_entry(w, lib, 0o100755, &data, next_ino())?;
        contents.libraries.push(lib.clone());
    }
    for (i, m) in modules.iter().enumerate() {
        let data = module_bytes(m)?;
        let base = m
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let stem = base.split(".ko").next().unwrap_or(&base);
        let name = format!("{MODULE_DIR}/{i:02}-{stem}.ko");
        w = file_entry(w, &name, 0o100644, &data, next_ino())?;
        contents.modules.push(name);
    }
    if let Some(t) = token {
        w = file_entry(w, TOKEN_FILE, 0o100600, t.as_bytes(), next_ino())?;
    }
    // Settings for the guest's init (module parameters …), files at the root.
    for (path, data) in extra {
        w = file_entry(w, path, 0o100600, data, next_ino())?;
    }
    let mut w = cpio::newc::trailer(w)?;
    w.flush()?;
    Ok(contents)
}

fn dir<W: Write>(
    w: &mut W,
    made: &mut BTreeSet<String>,
    path: &str,
    next_ino: &mut impl FnMut() -> u32,
) -> Result<()> {
    // Parents first: the kernel's unpacker does not create missing directories.
    let mut acc = String::new();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        acc.push('/');
        acc.push_str(part);
        if made.insert(acc.clone()) {
            Builder::new(acc.trim_start_matches('/'))
                .ino(next_ino())
                .mode(0o040755)
                .nlink(2)
                .write(&mut *w, 0)
                .finish()?;
        }
    }
    Ok(())
}

fn file_entry<W: Write>(w: W, path: &str, mode: u32, data: &[u8], ino: u32) -> Result<W> {
    let size = u32::try_from(data.len()).map_err(|_| anyhow!("{path} is over 4 GiB"))?;
    let mut fw = Builder::new(path.trim_start_matches('/'))
        .ino(ino)
        .mode(mode)
        .nlink(1)
        .write(w, size);
    fw.write_all(data)?;
    Ok(fw.finish()?)
}

/// A copy of `binary` without debug information next to `out` (a debug build is five times
/// larger, and the guest kernel unpacks every byte under emulation). Without `strip`, a
/// plain copy.
fn stripped(binary: &Path, out: &Path) -> Result<PathBuf> {
    let copy = out.with_extension("init");
    let ok = Command::new("strip")
        .arg("--strip-debug")
        .arg("-o")
        .arg(&copy)
        .arg(binary)
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        std::fs::copy(binary, &copy)
            .with_context(|| format!("copying {} to {}", binary.display(), copy.display()))?;
    }
    Ok(copy)
}

/// The shared libraries (and ELF interpreter) `binary` loads, from `ldd`; empty for a
/// static binary. `ldd` is glibc's own answer to this question, so we ask it rather than
/// walk ELF dynamic sections ourselves.
fn shared_libraries(binary: &Path) -> Result<Vec<String>> {
    let out = match Command::new("ldd").arg(binary).output() {
        Ok(o) => o,
        // No ldd: only a static binary can work, which is what the guest build is.
        Err(_) => return Ok(Vec::new()),
    };
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || text.contains("statically linked") || text.contains("not a dynamic")
    {
        return Ok(Vec::new());
    }
    let mut libs = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        let path = match line.split_once("=>") {
            Some((name, rest)) => {
                let p = rest.split_whitespace().next().unwrap_or("");
                if p == "not" {
                    bail!(
                        "{} needs {} which is not installed",
                        binary.display(),
                        name.trim()
                    );
                }
                p
            }
            None => line.split_whitespace().next().unwrap_or(""),
        };
        if path.starts_with('/') {
            libs.push(path.to_string());
        }
    }
    Ok(libs)
}

/// A module's bytes; compressed modules (`.ko.xz`, `.ko.zst`, `.ko.gz`) are decompressed
/// with the matching tool, since `finit_module` in the guest wants a plain ELF object.
fn module_bytes(path: &Path) -> Result<Vec<u8>> {
    let name = path.to_string_lossy();
    let tool = if name.ends_with(".xz") {
        Some("xz")
    } else if name.ends_with(".zst") {
        Some("zstd")
    } else if name.ends_with(".gz") {
        Some("gzip")
    } else {
        None
    };
    match tool {
        None => std::fs::read(path).with_context(|| format!("reading module {name}")),
        Some(t) => {
            let out = Command::new(t)
                .args(["-dc"])
                .arg(path)
                .output()
                .map_err(|e| {
                    anyhow!("cannot run {t} to decompress {name}: {e} (apt-get install {t})")
                })?;
            if !out.status.success() {
                bail!("{t} could not decompress {name}");
            }
            Ok(out.stdout)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guest::init::MODPARAMS_FILE;

    #[test]
    fn archive_holds_init_console_libraries_and_numbered_modules() {
        let dir = std::env::temp_dir().join(format!("vp-initramfs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let m1 = dir.join("virtio.ko");
        let m2 = dir.join("virtio_net.ko");
        std::fs::write(&m1, b"\x7fELF one").expect("write");
        std::fs::write(&m2, b"\x7fELF two").expect("write");
        let out = dir.join("initramfs.cpio");
        let exe = std::env::current_exe().expect("own exe");
        let contents = build(
            &out,
            &exe,
            &[m1, m2],
            Some("f00d"),
            &[(MODPARAMS_FILE, b"haltpoll.guest_halt_poll_ns=0\n")],
        )
        .expect("build");
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&out).expect("stat").permissions().mode();
            assert_eq!(mode & 0o077, 0, "the archive holds the token: owner only");
        }
        assert_eq!(
            contents.modules,
            ["/modules/00-virtio.ko", "/modules/01-virtio_net.ko"]
        );
        // Read the archive back with the same crate and check what the kernel will see.
        let mut names = Vec::new();
        let mut r = std::fs::File::open(&out).expect("open");
        loop {
            let entry = cpio::NewcReader::new(r).expect("entry");
            if entry.entry().is_trailer() {
                break;
            }
            let e = entry.entry();
            let is_token = e.name() == TOKEN_FILE.trim_start_matches('/');
            names.push((e.name().to_string(), e.mode(), e.file_size()));
            let mut entry = entry;
            if is_token {
                let mut body = String::new();
                std::io::Read::read_to_string(&mut entry, &mut body).expect("token body");
                assert_eq!(body, "f00d");
            }
            r = entry.finish().expect("next");
        }
        let find = |n: &str| names.iter().find(|(name, _, _)| name == n);
        let init = find("init").expect("init present");
        assert_eq!(init.1 & 0o777, 0o755);
        assert!(init.2 > 0);
        assert_eq!(find("dev/console").expect("console").1, 0o020600);
        assert!(find("modules/01-virtio_net.ko").is_some());
        let params = find(MODPARAMS_FILE.trim_start_matches('/')).expect("parameters present");
        assert_eq!(params.2, 30);
        let token = find(TOKEN_FILE.trim_start_matches('/')).expect("token file present");
        assert_eq!(token.1, 0o100600);
        assert_eq!(token.2, 4);
        for lib in &contents.libraries {
            let n = lib.trim_start_matches('/');
            assert!(find(n).is_some(), "{lib} copied");
            let parent = Path::new(n)
                .parent()
                .expect("parent")
                .to_string_lossy()
                .into_owned();
            let pos_dir = names
                .iter()
                .position(|(x, _, _)| *x == parent)
                .expect("dir entry");
            let pos_lib = names
                .iter()
                .position(|(x, _, _)| x == n)
                .expect("lib entry");
            assert!(pos_dir < pos_lib, "{parent} comes before {n}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
