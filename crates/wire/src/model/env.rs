//! The environment fingerprint: what produced a number.

use super::*;

/// One cpuidle state of CPU 0.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IdleState {
    /// State name (`POLL`, `C1`, `haltpoll`, …).
    pub name: String,
    /// Exit latency in µs.
    #[serde(default)]
    pub latency_us: Option<u64>,
    /// Disabled through sysfs.
    pub disabled: bool,
}

/// Everything that shapes a network or message-passing number on one machine.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Env {
    /// virtperf version.
    pub tool_version: String,
    /// Git commit the binary was built from, when known.
    pub git_commit: Option<String>,
    /// Host name.
    pub hostname: String,
    /// Kernel boot id: equal on both sides means the same kernel.
    pub boot_id: String,
    /// `uname -r`.
    pub kernel: String,
    /// `uname -v`.
    pub kernel_build: String,
    /// `uname -m`.
    pub arch: String,
    /// CPU model name.
    pub cpu_model: String,
    /// Online CPUs.
    pub cpus: u32,
    /// The CPU's identity (x86: vendor, family, model, stepping) and the flags that decide
    /// how the kernel copies between sockets and user buffers: a model name in a VM is often
    /// generic ("AMD EPYC") while copy costs differ between cores of one vendor. Absent where
    /// /proc/cpuinfo names no vendor, and in results from before 2026-11-26.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_id: Option<CpuId>,
    /// Hypervisor vendor from CPUID leaf 0x40000000 (`KVMKVMKVM`, `Microsoft Hv`, …), when
    /// the CPUID hypervisor bit is set.
    pub hypervisor: Option<String>,
    /// /sys/hypervisor/type, when present.
    pub hypervisor_sys: Option<String>,
    /// DMI system vendor and product.
    pub dmi: Option<String>,
    /// Kernel command line.
    pub cmdline: String,
    /// Current clocksource.
    pub clocksource: String,
    /// Cost of one monotonic clock read from user space, ns.
    pub clock_read_ns: f64,
    /// Tick mode: `periodic`, `idle` (NO_HZ_IDLE) or `full` (NO_HZ_FULL), with its source.
    pub nohz: String,
    /// cpuidle driver (`haltpoll`, `acpi_idle`, `intel_idle`, `none`).
    pub cpuidle_driver: Option<String>,
    /// cpuidle governor.
    pub cpuidle_governor: Option<String>,
    /// CPU 0's idle states.
    pub idle_states: Vec<IdleState>,
    /// The idle path in plain words.
    pub idle_explained: String,
    /// cpufreq governor of CPU 0.
    pub cpufreq_governor: Option<String>,
    /// /dev/kvm present and openable.
    pub kvm_available: bool,
    /// The KVM implementation behind /dev/kvm (`vmx`, `svm`, `pvm`).
    pub kvm_platform: Option<String>,
    /// Module parameters that steer halting: `kvm.halt_poll_ns`, `haltpoll.guest_halt_poll_ns`, …
    pub halt_poll: BTreeMap<String, String>,
    /// Whether interrupts reach a vCPU without an exit: on a KVM host the module's
    /// `enable_apicv`/`enable_ipiv` (Intel) or `avic` (AMD); inside a KVM guest the
    /// paravirtual features the hypervisor offers (`pv_send_ipi`, `pv_unhalt`, `pv_eoi`,
    /// `poll_control`), since posted interrupts themselves are invisible from inside.
    #[serde(default)]
    pub interrupt_virt: BTreeMap<String, String>,
    /// Network sysctls that shape these tests.
    pub sysctls: BTreeMap<String, String>,
    /// This machine's virtio-net interfaces as its driver sees them (a guest's NIC: the
    /// features negotiated with the device, ring sizes, queue pairs). Empty elsewhere.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub virtio_net: Vec<VirtioNet>,
    /// In a virtperf guest: the module parameters its experiment set (`--guest-module`),
    /// read back from `/sys/module`. Empty elsewhere.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub module_params: BTreeMap<String, String>,
}

/// A virtio-net interface as its driver sees it: what the device offered and the driver
/// accepted (QEMU's `-device virtio-net-pci,…` options arrive here).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VirtioNet {
    /// The virtio device (`virtio0`).
    pub device: String,
    /// Its interface (`eth0`).
    pub interface: String,
    /// Negotiated feature bits as sysfs shows them (one `0`/`1` per bit, bit 0 first;
    /// trailing zeros trimmed).
    pub features: String,
    /// The names of the bits set (`csum`, `mrg_rxbuf`, `event_idx`, …).
    pub feature_names: Vec<String>,
    /// Receive ring (virtqueue) size, from `ETHTOOL_GRINGPARAM`.
    pub rx_ring: Option<u32>,
    /// Transmit ring size.
    pub tx_ring: Option<u32>,
    /// Queue pairs in use (`ethtool -l` combined).
    pub queue_pairs: Option<u32>,
}

/// A CPU's identity as /proc/cpuinfo gives it for CPU 0.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuId {
    /// `vendor_id` (`AuthenticAMD`, `GenuineIntel`).
    pub vendor: String,
    /// `cpu family`, decimal (25 = AMD Zen 3/4, 6 = most Intel cores).
    pub family: Option<u32>,
    /// `model`, decimal.
    pub model: Option<u32>,
    /// `stepping`.
    pub stepping: Option<u32>,
    /// Of the CPU's flags, those that choose the kernel's copy routine: `erms` (enhanced
    /// `rep movsb`), `fsrm` (fast short `rep movsb`), in that order; the ones present.
    pub copy_flags: Vec<String>,
}

impl CpuId {
    /// One line: `AuthenticAMD family 25 model 1 stepping 1, copy: erms fsrm`.
    pub fn text(&self) -> String {
        let mut s = self.vendor.clone();
        for (name, v) in [
            ("family", self.family),
            ("model", self.model),
            ("stepping", self.stepping),
        ] {
            if let Some(v) = v {
                s += &format!(" {name} {v}");
            }
        }
        if !self.copy_flags.is_empty() {
            s += &format!(", copy: {}", self.copy_flags.join(" "));
        }
        s
    }
}

/// Why the guest halt-poll knob (`haltpoll.guest_halt_poll_ns`) reaches no idle loop on a
/// machine with this cpuidle driver and governor, or None where it acts. The knob is the
/// haltpoll *governor's* (drivers/cpuidle/governors/haltpoll.c): it polls in state 0 and
/// halts after its window, under any driver with a polling state 0, while under another
/// governor (switchable in `current_governor`) nothing reads it — measured on a PVM guest
/// with the haltpoll driver, 200 µs of it left 2.01 halting idle entries per round trip
/// under `menu` against 0.0007 under `haltpoll`. Without a driver there is no governor.
/// Where the governor was not recorded (fingerprints of old runs, where it always followed
/// the driver), the driver decides.
pub fn halt_poll_knob_inert(driver: Option<&str>, governor: Option<&str>) -> Option<String> {
    match (driver, governor) {
        (None | Some("none"), _) => Some(
            "there is no cpuidle driver, so no governor runs and the knob reaches no idle loop"
                .into(),
        ),
        (_, Some("haltpoll")) => None,
        (_, Some(g)) => Some(format!(
            "the cpuidle governor is {g}, not haltpoll, so nothing reads the knob (switch it in /sys/devices/system/cpu/cpuidle/current_governor)"
        )),
        (Some("haltpoll"), None) => None,
        (Some(d), None) => Some(format!(
            "the cpuidle driver is {d}, not haltpoll, so the knob reaches no idle loop"
        )),
    }
}

/// The guest halt-poll window's parameter.
pub const HALT_POLL_KNOB: &str = "haltpoll.guest_halt_poll_ns";

/// Why setting module parameter `name` to `value` would change nothing on a machine with
/// this cpuidle driver and governor: a nonzero [`HALT_POLL_KNOB`] window that no governor
/// reads ([`halt_poll_knob_inert`]). A window of 0 is never inert (no polling is what an
/// idle loop without the governor does), nor is any other parameter.
pub fn inert_module_setting(
    name: &str,
    value: &str,
    driver: Option<&str>,
    governor: Option<&str>,
) -> Option<String> {
    if name != HALT_POLL_KNOB || value.trim().parse::<u64>() == Ok(0) {
        return None;
    }
    halt_poll_knob_inert(driver, governor)
}

impl Env {
    /// [`halt_poll_knob_inert`] for the machine this fingerprint describes.
    pub fn halt_poll_knob_inert(&self) -> Option<String> {
        halt_poll_knob_inert(
            self.cpuidle_driver.as_deref(),
            self.cpuidle_governor.as_deref(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::halt_poll_knob_inert as inert;

    #[test]
    fn the_governor_decides_whether_the_halt_poll_knob_acts() {
        assert_eq!(inert(Some("haltpoll"), Some("haltpoll")), None);
        // The governor reads the knob under any driver with a polling state 0.
        assert_eq!(inert(Some("acpi_idle"), Some("haltpoll")), None);
        let menu = inert(Some("haltpoll"), Some("menu")).unwrap_or_default();
        assert!(menu.contains("governor is menu"), "{menu}");
        let none = inert(Some("none"), Some("haltpoll")).unwrap_or_default();
        assert!(none.contains("no cpuidle driver"), "{none}");
        assert!(inert(None, None).is_some());
        // Old fingerprints without a governor: the driver decides.
        assert_eq!(inert(Some("haltpoll"), None), None);
        let acpi = inert(Some("acpi_idle"), None).unwrap_or_default();
        assert!(acpi.contains("driver is acpi_idle"), "{acpi}");
    }

    #[test]
    fn only_a_nonzero_window_can_be_an_inert_setting() {
        use super::inert_module_setting as setting;
        let menu = (Some("haltpoll"), Some("menu"));
        assert!(setting(super::HALT_POLL_KNOB, "50000", menu.0, menu.1).is_some());
        assert!(setting(super::HALT_POLL_KNOB, " 00 ", menu.0, menu.1).is_none());
        assert!(setting("haltpoll.guest_halt_poll_grow", "4", menu.0, menu.1).is_none());
        assert!(setting(
            super::HALT_POLL_KNOB,
            "50000",
            Some("haltpoll"),
            Some("haltpoll")
        )
        .is_none());
    }
}
