// SPDX-License-Identifier: GPL-2.0

//! Module parameters: range checks at load time, so a bad value fails `insmod` with a
//! message that names the parameter instead of misbehaving later; and the values they
//! choose among (the multipath `Policy`, the queue depth bound), below every user.

use crate::{
    kernel_ext::module_param::module_param_string,
    module_parameters as p,
    spec::{
        command::io_cid,
        quirks::{find_override, parse_quirk_param, Quirks},
    },
};
use kernel::prelude::*;

// As the C driver's (same syntax, same 128-byte limit, readable in sysfs).
module_param_string!(
    quirks,
    128,
    0o444,
    "Enable/disable NVMe quirks by PCI ID, as the nvme driver's: VID:DID:name[,^name...][-VID:DID:...] (^ turns one off)"
);

module_param_string!(
    iopolicy,
    16,
    0o444,
    "How multipath head disks choose a path: numa (one path until it fails, the default) or round-robin, as the nvme driver's"
);

/// Deepest I/O queue the command id layout allows.
pub(crate) const MAX_DEPTH: u32 = io_cid::MAX_DEPTH;

/// How a head chooses among its live paths (C's `iopolicy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Policy {
    /// One path until it fails: the closest to the submitting CPU (one NUMA node here).
    Numa,
    /// Every live path in turn.
    RoundRobin,
}

impl Policy {
    pub(crate) fn parse(s: &[u8]) -> Option<Self> {
        match s {
            b"" | b"numa" => Some(Self::Numa),
            b"round-robin" => Some(Self::RoundRobin),
            _ => None,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Numa => "numa",
            Self::RoundRobin => "round-robin",
        }
    }
}

/// Whether namespaces of multi-controller subsystems get head disks.
pub(crate) fn multipath() -> bool {
    p::multipath.value()
}

/// The multipath I/O policy (checked at load).
pub(crate) fn io_policy() -> Policy {
    Policy::parse(iopolicy.value()).unwrap_or(Policy::Numa)
}

/// Checks one parameter against its range, logging it if it is out of range.
fn check(name: &str, value: u32, min: u32, max: u32, unit: &str) -> bool {
    if (min..=max).contains(&value) {
        return true;
    }
    pr_err!("rnvme: {name}={value} is out of range ({min}-{max}{unit})\n");
    false
}

/// Checks every parameter; logs each bad one and fails with `EINVAL` if any is.
pub(crate) fn validate() -> Result {
    // Every check runs, so one insmod reports every bad value.
    let checks = [
        check(
            "admin_timeout",
            p::admin_timeout.value(),
            1,
            3600,
            " seconds",
        ),
        check("io_timeout", p::io_timeout.value(), 1, 3600, " seconds"),
        check(
            "io_queue_depth",
            p::io_queue_depth.value(),
            2,
            MAX_DEPTH,
            "",
        ),
        check("io_queues", p::io_queues.value(), 0, 65534, ""),
        check("poll_queues", p::poll_queues.value(), 0, 1024, ""),
        check("write_queues", p::write_queues.value(), 0, 1024, ""),
        hook_params_ok(),
    ];
    let quirks_ok = match parse_quirk_param(quirks.value()).find_map(|e| e.err()) {
        None => true,
        Some(e) => {
            pr_err!("quirks: {e}\n");
            false
        }
    };
    let policy_ok = Policy::parse(iopolicy.value()).is_some();
    if !policy_ok {
        pr_err!("rnvme: iopolicy must be numa or round-robin\n");
    }
    if quirks_ok && policy_ok && checks.iter().all(|&ok| ok) {
        Ok(())
    } else {
        Err(EINVAL)
    }
}

/// Admin command timeout in milliseconds.
pub(crate) fn admin_timeout_ms() -> u32 {
    p::admin_timeout.value() * 1000
}

/// I/O command timeout in milliseconds.
pub(crate) fn io_timeout_ms() -> u32 {
    p::io_timeout.value() * 1000
}

/// Requested I/O queue depth.
pub(crate) fn io_queue_depth() -> u32 {
    p::io_queue_depth.value()
}

/// Smallest transfer described with an SGL (0: PRPs only).
pub(crate) fn sgl_threshold() -> u32 {
    p::sgl_threshold.value()
}

/// Probe steps at which [`inject`] can fail the probe.
#[cfg(rnvme_test_hooks)]
pub(crate) const PROBE_FAULT_STEPS: u32 = 14;

/// Longest `probe_delay_ms`.
#[cfg(rnvme_test_hooks)]
const PROBE_DELAY_MAX_MS: u32 = 60_000;

/// The test build's parameters are in range.
#[cfg(rnvme_test_hooks)]
fn hook_params_ok() -> bool {
    // Both checked: each names its own bad value.
    let step = check(
        "probe_fault_step",
        p::probe_fault_step.value(),
        0,
        PROBE_FAULT_STEPS,
        "",
    );
    let delay = check(
        "probe_delay_ms",
        p::probe_delay_ms.value(),
        0,
        PROBE_DELAY_MAX_MS,
        " ms",
    );
    step && delay
}

#[cfg(not(rnvme_test_hooks))]
fn hook_params_ok() -> bool {
    true
}

/// For tests: fails with `EIO` at probe step `step` if `probe_fault_step` names it, so every
/// error path of the probe can be exercised in turn. The production build has no
/// `probe_fault_step`: this is nothing there.
#[cfg(rnvme_test_hooks)]
pub(crate) fn inject(dev: &kernel::device::Device, step: u32) -> Result {
    if p::probe_fault_step.value() == step {
        dev_warn!(dev, "injected probe failure at step {step}\n");
        return Err(EIO);
    }
    Ok(())
}

#[cfg(not(rnvme_test_hooks))]
#[inline(always)]
pub(crate) fn inject(_dev: &kernel::device::Device, _step: u32) -> Result {
    Ok(())
}

/// For tests: sleeps `probe_delay_ms`, so that probes running one after another take the
/// sum of their delays and probes running side by side about one. Nothing in the
/// production build.
#[cfg(rnvme_test_hooks)]
pub(crate) fn probe_delay() {
    let ms = p::probe_delay_ms.value();
    if ms > 0 {
        kernel::time::delay::fsleep(kernel::time::Delta::from_millis(i64::from(ms)));
    }
}

#[cfg(not(rnvme_test_hooks))]
#[inline(always)]
pub(crate) fn probe_delay() {}

/// Most I/O queues, 0 for one per CPU.
pub(crate) fn io_queues() -> u32 {
    p::io_queues.value()
}

pub(crate) fn poll_queues() -> u32 {
    p::poll_queues.value()
}

/// Queues for writes besides the read queues (0: none, reads and writes share).
pub(crate) fn write_queues() -> u32 {
    p::write_queues.value()
}

/// The quirks of PCI device `vendor:device`: the table's, changed by the `quirks` parameter's
/// entry for it.
pub(crate) fn pci_quirks(vendor: u16, device: u16) -> Quirks {
    let q = Quirks::for_pci_id(vendor, device);
    find_override(quirks.value(), vendor, device).map_or(q, |o| o.apply(q))
}
