//! `vm initramfs --libvirt-xml NAME`: a libvirt domain definition that boots virtperf's
//! agent image by direct kernel boot, so a libvirt user needs no hand-written XML.
//!
//! The NIC is QEMU's user networking added through `<qemu:commandline>`, not a libvirt
//! `<interface>`, because that is what forwards the agent's ports on libvirt 9.0 (Debian
//! 12), as tried: `<backend type='passt'/>` is refused as an invalid backend type, and a
//! `<portForward>` on a SLIRP `<interface type='user'>` is accepted and silently dropped
//! (QEMU's `-netdev user` gets no forward). Tested against Debian 12's libvirtd in
//! `cli/tests/own_vm_libvirt/`.

use std::path::{Path, PathBuf};

/// What the domain boots and how it is reached.
pub struct Domain<'a> {
    /// The domain's name (also QEMU's `-name guest=…`, which names its threads).
    pub name: &'a str,
    /// `kvm` or `tcg` (libvirt's domain types `kvm` and `qemu`).
    pub accel: &'a str,
    /// The guest kernel and initramfs, readable by libvirt's QEMU user.
    pub kernel: &'a Path,
    pub initrd: &'a Path,
    /// Kernel command line.
    pub cmdline: &'a str,
    /// QEMU `-netdev` value (user networking with its forwards), id `n0`.
    pub netdev: &'a str,
    /// Where virtlogd keeps the serial console's output (the agent's ready line).
    pub console_log: &'a Path,
}

/// `s` safe in XML text and single- or double-quoted attributes.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

/// The domain definition (`virsh define FILE`).
pub fn domain(d: &Domain) -> String {
    let kind = if d.accel == "kvm" { "kvm" } else { "qemu" };
    let p = |p: &Path| esc(&p.display().to_string());
    format!(
        "<domain type='{kind}' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>{name}</name>
  <memory unit='MiB'>512</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>{kernel}</kernel>
    <initrd>{initrd}</initrd>
    <cmdline>{cmdline}</cmdline>
  </os>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <serial type='pty'><log file='{log}' append='off'/></serial>
    <console type='pty'/>
    <controller type='usb' model='none'/>
    <memballoon model='none'/>
  </devices>
  <qemu:commandline>
    <qemu:arg value='-netdev'/>
    <qemu:arg value='{netdev}'/>
    <qemu:arg value='-device'/>
    <qemu:arg value='virtio-net-pci,netdev=n0,romfile='/>
  </qemu:commandline>
</domain>
",
        name = esc(d.name),
        kernel = p(d.kernel),
        initrd = p(d.initrd),
        cmdline = esc(d.cmdline),
        log = p(d.console_log),
        netdev = esc(d.netdev),
    )
}

/// The first directory on the way to `file` that other users cannot pass through (no
/// `o+x`), where libvirt's QEMU, running as its own user, could not open the file even
/// after libvirt hands the file itself to that user (it changes the file, not its
/// directories).
pub fn closed_dir(file: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let abs = std::path::absolute(file).ok()?;
    abs.ancestors()
        .skip(1)
        .find(|d| std::fs::metadata(d).is_ok_and(|m| m.permissions().mode() & 0o001 == 0))
        .map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names and paths with XML's special characters stay text; the domain type follows
    /// the accelerator.
    #[test]
    fn the_definition_escapes_what_it_is_given() {
        let d = Domain {
            name: "a<b>&'c\"",
            accel: "tcg",
            kernel: Path::new("/img/k'1"),
            initrd: Path::new("/img/i&1"),
            cmdline: "x=<y>",
            netdev: "user,id=n0,hostfwd=tcp:127.0.0.1:1-:1",
            console_log: Path::new("/img/c.log"),
        };
        let x = domain(&d);
        assert!(
            x.contains("<name>a&lt;b&gt;&amp;&apos;c&quot;</name>"),
            "{x}"
        );
        assert!(x.contains("<kernel>/img/k&apos;1</kernel>"), "{x}");
        assert!(x.contains("<initrd>/img/i&amp;1</initrd>"), "{x}");
        assert!(x.contains("<cmdline>x=&lt;y&gt;</cmdline>"), "{x}");
        assert!(x.starts_with("<domain type='qemu'"), "{x}");
        assert!(domain(&Domain { accel: "kvm", ..d }).starts_with("<domain type='kvm'"));
    }

    /// A file under a directory closed to others is found; one under /tmp is not.
    #[test]
    fn a_closed_directory_on_the_way_is_named() {
        use std::os::unix::fs::PermissionsExt;
        let base = std::env::temp_dir().join(format!("vp-lvx-{}", std::process::id()));
        let closed = base.join("closed");
        std::fs::create_dir_all(&closed).expect("dir");
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        assert_eq!(closed_dir(&closed.join("k")), Some(closed.clone()));
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        assert_eq!(closed_dir(&closed.join("k")), None);
        let _ = std::fs::remove_dir_all(&base);
    }
}
