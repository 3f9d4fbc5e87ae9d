//! A file a command writes where the user asked (`tune --emit … --out FILE`): checked
//! before any work (its directory exists and takes files, it is not already there unless
//! `--force`), then written whole or not at all — a temporary file created new beside it
//! (`O_EXCL | O_NOFOLLOW`: never through a symlink someone planted), synced, and moved into
//! place without replacing anything unless `--force` (which replaces a symlink itself,
//! never the file it points to).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The directory `path` goes in (`.` for a bare name).
fn dir_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// A temporary name beside `path`, this process's own.
fn temp_beside(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    dir_of(path).join(format!(".{name}.virtperf-{}.tmp", std::process::id()))
}

/// Creates `p` new (never following a symlink, never opening an existing file).
fn create_new(p: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(0o644)
        .open(p)
}

/// Whether `path` can be written as asked; the one-line reason why not. Run before the
/// work that produces its content, so a bad `--out` costs nothing.
pub fn check(path: &Path, force: bool) -> Result<(), String> {
    let shown = path.display();
    let dir = dir_of(path);
    if !dir.is_dir() {
        return Err(format!(
            "--out {shown}: the directory {} does not exist",
            dir.display()
        ));
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => return Err(format!("--out {shown} is a directory: name a file")),
        Ok(_) if !force => {
            return Err(format!(
                "--out {shown} exists: give --force to replace it, or another name"
            ))
        }
        _ => {}
    }
    let probe = temp_beside(path);
    create_new(&probe).map(drop).map_err(|e| {
        format!(
            "--out {shown}: cannot create a file in {} ({e})",
            dir.display()
        )
    })?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Writes `text` to `path` whole: see the module's doc.
pub fn write(path: &Path, text: &str, force: bool) -> Result<(), String> {
    let shown = path.display();
    let tmp = temp_beside(path);
    let put = || -> std::io::Result<()> {
        let mut f = create_new(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        if force {
            std::fs::rename(&tmp, path)
        } else {
            // A hard link fails if the name exists (appeared since the check): no clobber.
            std::fs::hard_link(&tmp, path)?;
            std::fs::remove_file(&tmp)
        }
    };
    put().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            format!("--out {shown} exists: give --force to replace it, or another name")
        } else {
            format!("cannot write --out {shown}: {e}")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A symlink planted at the name is never written through (the file it points to is
    /// untouched); an existing file is refused unless forced; a missing directory is
    /// found by `check`.
    #[test]
    fn out_files_are_created_new_and_never_through_a_symlink() {
        let d = std::env::temp_dir().join(format!("vp-out-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let victim = d.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let link = d.join("link.conf");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        assert!(check(&link, false).unwrap_err().contains("exists"));
        assert!(write(&link, "snippet", false)
            .unwrap_err()
            .contains("exists"));
        write(&link, "snippet", true).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(!std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&link).unwrap(), "snippet");
        let new = d.join("new.conf");
        check(&new, false).unwrap();
        write(&new, "a", false).unwrap();
        assert_eq!(std::fs::read_to_string(&new).unwrap(), "a");
        assert!(check(&d.join("no/such/dir/x"), false)
            .unwrap_err()
            .contains("does not exist"));
        assert!(check(&d, true).unwrap_err().contains("directory"));
        let left: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "temporary files left: {left:?}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
