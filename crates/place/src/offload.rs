//! A device's GRO and TSO switches, through the `SIOCETHTOOL` ioctl (what `ethtool -K DEV
//! gro off` does). Written by hand: no maintained crate sets one ethtool feature (the
//! `ethtool` crate speaks its netlink family through an async stack), and the legacy
//! `ETHTOOL_[GS]GRO`/`ETHTOOL_[GS]TSO` commands are two small structs the kernel keeps.
//! Called on a thread inside the device's namespace (the ioctl acts on the caller's).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

const ETHTOOL_GTSO: u32 = 0x1e;
const ETHTOOL_STSO: u32 = 0x1f;
const ETHTOOL_GGRO: u32 = 0x2b;
const ETHTOOL_SGRO: u32 = 0x2c;

/// Which offloads to switch; `None` leaves one as the device has it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Offloads {
    /// Generic receive offload (the receiving device merges segments).
    pub gro: Option<bool>,
    /// TCP segmentation offload (the sending device splits large packets).
    pub tso: Option<bool>,
}

/// `struct ethtool_value`.
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// `struct ifreq` with `ifr_data`, padded to the kernel's 40 bytes.
#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    data: *mut EthtoolValue,
    _pad: [u8; 16],
}

fn socket() -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes no pointers.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just returned by socket(2) and is owned by nothing else.
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

fn ethtool(dev: &str, cmd: u32, data: u32) -> io::Result<u32> {
    let bytes = dev.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{dev:?} is no device name"),
        ));
    }
    let mut value = EthtoolValue { cmd, data };
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        data: &mut value,
        _pad: [0; 16],
    };
    req.name[..bytes.len()].copy_from_slice(bytes);
    let s = socket()?;
    // SAFETY: SIOCETHTOOL reads the ifreq (a NUL-terminated name and a pointer to an
    // ethtool_value that lives across the call) and writes only into that value.
    // The request is a c_ulong on glibc and a c_int on musl: `as _` fits either.
    let r = unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCETHTOOL as _, &mut req) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(value.data)
}

/// The device's current switches (both read).
pub fn get(dev: &str) -> io::Result<Offloads> {
    Ok(Offloads {
        gro: Some(ethtool(dev, ETHTOOL_GGRO, 0)? != 0),
        tso: Some(ethtool(dev, ETHTOOL_GTSO, 0)? != 0),
    })
}

/// Sets what `o` names on device `dev`.
pub fn set(dev: &str, o: Offloads) -> io::Result<()> {
    let what = |e: io::Error, f: &str| io::Error::new(e.kind(), format!("{f} on {dev}: {e}"));
    if let Some(g) = o.gro {
        ethtool(dev, ETHTOOL_SGRO, u32::from(g)).map_err(|e| what(e, "GRO"))?;
    }
    if let Some(t) = o.tso {
        ethtool(dev, ETHTOOL_STSO, u32::from(t)).map_err(|e| what(e, "TSO"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Loopback's switches read (both on, as the kernel makes it); a name too long is
    /// refused before any ioctl.
    #[test]
    fn loopbacks_offloads_read_and_bad_names_are_refused() {
        let o = get("lo").expect("lo's offloads");
        assert_eq!(o.tso, Some(true), "{o:?}");
        assert!(o.gro.is_some());
        let long = "x".repeat(libc::IFNAMSIZ);
        assert_eq!(
            get(&long).map_err(|e| e.kind()).err(),
            Some(io::ErrorKind::InvalidInput)
        );
        assert!(get("vp-no-such-dev").is_err());
    }
}
