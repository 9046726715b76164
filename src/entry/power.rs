// SPDX-License-Identifier: GPL-2.0

//! The PCI lifecycle of a bound controller: power-off, system sleep, function resets and
//! PCI error recovery, as C's `nvme_shutdown`, `nvme_dev_pm_ops` and `nvme_err_handler`.
//!
//! Each stops the controller and holds its queues ([`reset::hold`]) until the PCI core
//! gives the function back, then brings it back as a reset does ([`reset::release`]):
//! rings emptied, the controller enabled, the same I/O queues created with the same memory
//! and vectors, shadow doorbells, host options and asynchronous events set again.
//!
//! - Power-off, reboot, kexec: outstanding and new I/O fails, the controller gets a normal
//!   shutdown (CC.SHN) so it flushes its cache and records a safe shutdown.
//! - System sleep (suspend to RAM or idle, hibernation's freeze, poweroff, thaw, restore):
//!   C's simple suspend. The disks' queues are frozen first, so every request in flight
//!   completes and new ones wait at the queues' entrance holding no tag (the CPUs may go
//!   offline while they wait); then a normal shutdown, as the device may lose power. Resume
//!   brings the controller back and rescans the namespaces (one may have changed while the
//!   system slept), then lets the requests in.
//! - Function reset (FLR, bus reset): the controller is disabled and what it had in flight
//!   is retried once the reset is over.
//! - PCI error: a non-fatal error (the link still works) recovers without reset if the
//!   controller is healthy; a frozen link holds the queues without touching the registers
//!   until the slot reset; a permanent failure fails all I/O and marks the disks dead.

use crate::{
    ctrl::Controller,
    ioq::NvmeBlk,
    kernel_ext::{
        block::mq::TagSetRef,
        pci_driver::{ChannelState, ErsResult},
        pci_restore_state, pci_save_state,
    },
    reset::{self, Halt},
    spec::regs::{self as r, csts},
    state::State,
};
use kernel::prelude::*;

impl Controller<'_> {
    /// The system goes down (power-off, reboot, kexec): new and outstanding I/O fails and
    /// the controller gets a normal shutdown (CC.SHN), so it flushes its cache and records
    /// a safe shutdown, as C's `nvme_shutdown`. The driver stays bound; nothing is freed.
    pub(crate) fn shutdown(&self) {
        if self.with_tagset(reset::shut_down).is_none() {
            // No I/O queues: nothing to fail.
            self.hw.shutdown();
        }
    }

    /// The PCI function is about to be reset (FLR): stop the controller and take every
    /// command back, to be retried once [`Self::function_reset_done`] brought it back,
    /// as C's `nvme_reset_prepare`.
    pub(crate) fn function_reset_prepare(&self) {
        let held = self.with_tagset(|s| reset::hold(s, Halt::Disable, "function reset"));
        if held.is_none() {
            let _ = self.hw.disable();
        }
    }

    /// The function reset is over: bring the controller back, as a reset does.
    pub(crate) fn function_reset_done(&self) {
        if self
            .with_tagset(|s| reset::release(s, "function reset"))
            .is_none()
        {
            let _ = reset::restart_admin(&self.hw);
        }
    }

    /// System sleep (suspend, hibernation's freeze and poweroff): drain the disks' I/O, then
    /// a normal shutdown, as C's simple suspend. Requests wait (holding no tag) until
    /// [`Self::resume`].
    pub(crate) fn suspend(&self) -> Result {
        // The scan lock keeps scans from adding a disk between the freeze and the hold;
        // the I/O the freeze waits for never needs it (recovery uses the tag set).
        match (self.shared.disks.as_ref(), self.shared.tagset.as_ref()) {
            (Some(disks), Some(ts)) => {
                let mut scan = disks.scan();
                scan.freeze_disks_non_owner();
                reset::hold(&ts.handle(), Halt::Shutdown, "system sleep");
            }
            _ => self.hw.shutdown(),
        }
        Ok(())
    }

    /// Back from system sleep (resume, thaw, restore): a full re-initialisation, then a
    /// rescan of the namespaces, and the waiting requests go on. A controller that does not
    /// come back is dead (its disks are marked dead); the system resumes anyway.
    pub(crate) fn resume(&self) -> Result {
        let back = match (self.shared.disks.as_ref(), self.shared.tagset.as_ref()) {
            (Some(disks), Some(ts)) => {
                let mut scan = disks.scan();
                let back = reset::release(&ts.handle(), "resume");
                scan.unfreeze_disks_non_owner();
                back
            }
            _ => reset::restart_admin(&self.hw),
        };
        if back.is_ok() {
            self.events.rescan_needed();
        }
        Ok(())
    }

    /// A PCI error left the link in `state`, as C's `nvme_error_detected`.
    pub(crate) fn error_detected(&self, state: ChannelState) -> ErsResult {
        let hw = &self.hw;
        match state {
            // The link works: `mmio_enabled` checks the controller.
            ChannelState::Normal => ErsResult::CanRecover,
            ChannelState::Frozen => {
                dev_warn!(
                    hw.dev(),
                    "rnvme{}: PCI error, link frozen: holding I/O until the slot reset\n",
                    hw.instance
                );
                let held = self.with_tagset(|s| reset::hold(s, Halt::Untouched, "PCI error"));
                if held == Some(false) || hw.state() == State::Dead {
                    return ErsResult::Disconnect;
                }
                ErsResult::NeedReset
            }
            ChannelState::PermFailure => {
                if self
                    .with_tagset(|s| reset::give_up(s, "PCI error, link failed for good"))
                    .is_none()
                {
                    hw.set_state(State::Dead);
                }
                ErsResult::Disconnect
            }
        }
    }

    /// After a non-fatal PCI error: recovered if the controller is healthy (ready, no fatal
    /// status), else it is stopped and held, and asks for a slot reset.
    pub(crate) fn mmio_enabled(&self) -> ErsResult {
        if self.hw.state() == State::Resetting {
            // A reset of ours is running: it decides.
            return ErsResult::Recovered;
        }
        let s = self.hw.regs.csts();
        if r::device_gone(s) || s & csts::CFS != 0 || s & csts::RDY == 0 {
            // No I/O while the PCI core resets the slot.
            self.with_tagset(|s| reset::hold(s, Halt::Disable, "PCI error"));
            dev_warn!(
                self.hw.dev(),
                "rnvme{}: PCI error: controller unhealthy (CSTS {s:#x}): slot reset\n",
                self.hw.instance
            );
            return ErsResult::NeedReset;
        }
        ErsResult::Recovered
    }

    /// The slot was reset: restore the config space (saved at probe) and bring the
    /// controller back, as a reset does, as C's `nvme_slot_reset`.
    pub(crate) fn slot_reset(&self) -> ErsResult {
        pci_restore_state(self.pdev);
        // `pci_restore_state` used it up; the next slot reset needs it again.
        pci_save_state(self.pdev);
        let back = self.with_tagset(|s| {
            reset::hold(s, Halt::Untouched, "slot reset");
            reset::release(s, "PCI error recovery")
        });
        let back = back.unwrap_or_else(|| reset::restart_admin(&self.hw));
        if back.is_err() || self.hw.state() == State::Dead {
            return ErsResult::Disconnect;
        }
        ErsResult::Recovered
    }

    /// PCI error recovery is over.
    pub(crate) fn error_resume(&self) {
        dev_info!(
            self.hw.dev(),
            "rnvme{}: PCI error recovery done\n",
            self.hw.instance
        );
    }

    /// Runs `f` on the tag set, if the controller has I/O queues; `None` if it has none.
    pub(crate) fn with_tagset<R>(&self, f: impl FnOnce(&TagSetRef<'_, NvmeBlk>) -> R) -> Option<R> {
        self.shared.tagset.as_ref().map(|ts| f(&ts.handle()))
    }
}
