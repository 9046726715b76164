// SPDX-License-Identifier: GPL-2.0

//! Module parameters, shown in `/sys/module/rnvme/parameters/` with the C driver's
//! permissions: writable where C's are (a write is checked as at load and applies to the
//! controllers and heads set up after it, as C's), read-only elsewhere. A bad value fails
//! `insmod`, or the write, with a message that names the parameter instead of misbehaving
//! later. Also the values they choose among (the multipath `Policy`, the queue depth bound),
//! below every user.

use crate::{
    kernel_ext::module_param::{
        module_param_bool, module_param_choice, module_param_string, module_param_uint,
    },
    spec::{
        command::io_cid,
        quirks::{find_override, parse_quirk_param, Quirks},
    },
};
use kernel::prelude::*;

/// The parameters themselves (named as in sysfs; the functions below read them).
mod p {
    use super::*;

    module_param_uint!(
        admin_timeout,
        60,
        1,
        3600,
        " seconds",
        0o644,
        "Timeout of admin commands in seconds (1-3600, default 60)"
    );

    module_param_uint!(
        io_timeout,
        30,
        1,
        3600,
        " seconds",
        0o644,
        "Timeout of I/O commands in seconds (1-3600, default 30)"
    );

    module_param_uint!(
        io_queue_depth,
        1024,
        2,
        MAX_DEPTH,
        "",
        0o644,
        "Entries per I/O queue (2-4096, capped by CAP.MQES; default 1024)"
    );

    module_param_uint!(
        sgl_threshold,
        32768,
        0,
        u32::MAX,
        "",
        0o644,
        "Use SGLs for transfers of this many bytes or more, when the controller supports them (0: never; default 32768)"
    );

    module_param_uint!(
        io_queues,
        0,
        0,
        65534,
        "",
        0o644,
        "Most I/O queue pairs per controller (0: one per CPU, the default)"
    );

    module_param_uint!(
        poll_queues,
        0,
        0,
        1024,
        "",
        0o644,
        "Polled I/O queues per controller, without interrupts, for io_uring IOPOLL (0-1024, capped by CPUs; default 0)"
    );

    module_param_uint!(
        write_queues,
        0,
        0,
        1024,
        "",
        0o644,
        "I/O queues for writes and every other non-read command, besides one queue per CPU for reads (0-1024; 0: reads and writes share the queues, the default)"
    );

    // Read-only, as C's: a head disk per namespace or not is decided for the module's life.
    module_param_bool!(
        multipath,
        true,
        0o444,
        "A multipath head disk per namespace of a subsystem that may have several controllers, as the nvme driver's native multipath (default true)"
    );

    // As C's: set at load only.
    module_param_bool!(
        use_cmb_sqes,
        true,
        0o444,
        "Put I/O submission queues in the controller's memory buffer when it has one (default true), as the nvme driver's"
    );

    // As the C driver's (same syntax, same 128-byte limit, readable in sysfs).
    module_param_string!(
        quirks,
        128,
        0o444,
        "Enable/disable NVMe quirks by PCI ID, as the nvme driver's: VID:DID:name[,^name...][-VID:DID:...] (^ turns one off)"
    );

    // The names are `Policy::name`'s, in `Policy::from_index`'s order.
    module_param_choice!(
        iopolicy,
        ["numa", "round-robin"],
        0o644,
        "How multipath head disks choose a path: numa (one path until it fails, the default) or round-robin, as the nvme driver's"
    );

    // The test build's parameters (`--cfg rnvme_test_hooks`, see `src/core/fault.rs`): fail the
    // probe at a given step, slow every probe down. The production build has neither.
    #[cfg(rnvme_test_hooks)]
    module_param_uint!(
        probe_fault_step,
        0,
        0,
        PROBE_FAULT_STEPS,
        "",
        0o444,
        "Testing: fail the probe at this step (1-14) to exercise its unwinding (0: never, the default)"
    );

    #[cfg(rnvme_test_hooks)]
    module_param_uint!(
        probe_delay_ms,
        0,
        0,
        PROBE_DELAY_MAX_MS,
        " ms",
        0o444,
        "Testing: each probe sleeps this long once its controller is enabled (0-60000 ms), to show probes running side by side (0: never, the default)"
    );
}

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
    /// The policy of `iopolicy`'s value number `i`.
    fn from_index(i: usize) -> Self {
        if i == 0 {
            Self::Numa
        } else {
            Self::RoundRobin
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

/// Whether I/O submission queues go in a controller memory buffer.
pub(crate) fn use_cmb_sqes() -> bool {
    p::use_cmb_sqes.value()
}

/// The multipath I/O policy for heads made now.
pub(crate) fn io_policy() -> Policy {
    Policy::from_index(p::iopolicy.index())
}

/// Checks what the parameters' own `set` cannot: the quirk list's entries (a string
/// parameter, copied at load as C's). Fails with `EINVAL` after logging the bad entry.
pub(crate) fn validate() -> Result {
    match parse_quirk_param(p::quirks.value()).find_map(|e| e.err()) {
        None => Ok(()),
        Some(e) => {
            pr_err!("quirks: {e}\n");
            Err(EINVAL)
        }
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
    find_override(p::quirks.value(), vendor, device).map_or(q, |o| o.apply(q))
}
