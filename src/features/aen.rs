// SPDX-License-Identifier: GPL-2.0

//! Asynchronous events: one Asynchronous Event Request is kept outstanding on the admin
//! queue; when the controller completes it, the event is logged and handled in process
//! context (a work item), then the request is sent again.
//!
//! A namespace attribute change (namespace attached, detached, resized) reads the Changed
//! Namespace List log page, which re-enables the event, and rescans: disks of namespaces
//! that are gone are removed, new ones added. A health (SMART) warning reads the SMART /
//! Health log and logs what it says; an error event reads the Error Information log (a
//! persistent internal error resets the controller, as in C). Other events are logged;
//! their log pages are left to user space (nvme-cli), as the C driver does.
//!
//! A second work item, the recovery work, marks the disks dead when error recovery gives
//! the controller up ([`AsyncEvents::controller_dead`]: the marking may wait for the disks'
//! file systems, which the code that decides it must not), and resets the controller after
//! an admin command timed out ([`AsyncEvents::reset_needed`]: the command's sender may be a
//! scan, holding the scan lock, on the event work itself, waiting for I/O only that reset
//! lets through). Neither takes the scan lock; an I/O the stopped controller holds does
//! not wait for the recovery work either: its timeout starts the reset first if the work
//! is late, see `Hw::pending_reset`.
//!
//! The work item ([`AsyncEvents`], in the core layer) is `'static` and reaches the
//! controller through its [`CtrlLink`], its [`EventHandler`] here, so one still queued at
//! unbind finds the link revoked and does nothing; [`AsyncEvents::close`] waits for it.

use crate::{
    events::{AsyncEvents, EventHandler},
    hw::Hw,
    hwmon::read_smart_log,
    shared::CtrlLink,
    shared::Shared,
    spec::{
        command::Command,
        completion::{sc, Status},
        event::{kind, AsyncEvent, LOG_CHANGED_NS_LIST},
        identify::IDENTIFY_SIZE,
        smart::{kelvin_to_millicelsius, Warnings, LOG_ERROR},
    },
};
use kernel::{prelude::*, sync::Arc};

/// A controller's hold on its asynchronous event handling, started by [`Events::start`]:
/// dropping it closes the handling (the admin queue keeps the [`AsyncEvents`] it calls).
pub(crate) struct Events(Arc<AsyncEvents>);

impl EventHandler for CtrlLink {
    fn reset(&self) {
        let _ = self.with(|s| s.reset_pending("admin command timeout"));
    }

    fn rescan(&self) {
        self.with(|s| s.rescan_after(format_args!("resume")));
    }

    fn mark_disks_dead(&self) {
        self.with(|s| s.mark_disks_dead());
    }

    fn async_event(&self, status: Status, result: u32) {
        self.with(|s| s.async_event(status, result));
    }
}

impl Events {
    /// Starts handling asynchronous events: the admin queue hands completed requests to the
    /// work, and the first request is sent with the events `oaes` says the controller has.
    pub(crate) fn start(hw: &Hw<'_>, link: &Arc<CtrlLink>, oaes: u32) -> Result<Self> {
        let events = AsyncEvents::new(link.clone(), hw.admin.faults.clone())?;
        hw.admin.set_event_handler(events.clone());
        hw.start_async_events(Some(oaes));
        Ok(Self(events))
    }

    /// See [`AsyncEvents::close`].
    pub(crate) fn close(&self) {
        self.0.close();
    }

    /// See [`AsyncEvents::rescan_needed`].
    pub(crate) fn rescan_needed(&self) {
        self.0.rescan_needed();
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        self.0.close();
    }
}

impl Shared<'_> {
    /// The controller is dead: as the C driver, marks every disk dead (capacity 0, new I/O
    /// fails at once, file systems on it shut down) instead of leaving full-size disks
    /// that fail every I/O. They stay until the device is unbound.
    pub(crate) fn mark_disks_dead(&self) {
        if let Some(ts) = self.disks.as_ref() {
            let n = ts.mark_disks_dead();
            dev_warn!(
                self.hw.dev(),
                "rnvme{}: controller dead: {n} disk(s) marked dead\n",
                self.hw.instance
            );
        }
    }

    /// Handles one asynchronous event (work item, process context), then asks for the next.
    pub(crate) fn async_event(&self, status: Status, result: u32) {
        let inst = self.hw.instance;
        if !status.is_success() {
            // Aborted by a reset or shutdown (the restart sends a new one), or the
            // controller refused it: do not send it again from here.
            if !(status.sct() == 0 && status.code() == sc::ABORT_REQ) {
                dev_warn!(
                    self.hw.dev(),
                    "rnvme{inst}: asynchronous event request failed: {status}\n"
                );
            }
            return;
        }
        let event = AsyncEvent::decode(result);
        dev_info!(
            self.hw.dev(),
            "rnvme{inst}: asynchronous event: {} (type {:#x} info {:#04x} log page {:#04x})\n",
            event.describe(),
            event.kind,
            event.info,
            event.log_page
        );
        // The log page an event names holds its details; reading it (without Retain
        // Asynchronous Event) re-enables events of its type, which the controller holds
        // back until then. The C driver leaves health and error logs to user space (and
        // does not enable health events), so a second warning is only seen once something
        // read the log; rnvme reads them and says what they hold.
        if event.namespaces_changed() {
            let _ = self.hw.admin_read(
                get_log_page(LOG_CHANGED_NS_LIST),
                "Get Log Page (Changed Namespace List)",
            );
            self.rescan_after(format_args!("namespace change"));
        } else if event.kind == kind::SMART {
            match read_smart_log(&self.hw) {
                Ok(log) => dev_warn!(
                    self.hw.dev(),
                    "rnvme{inst}: health warning: {} (critical warning {:#04x}); composite temperature {} C, available spare {}% (threshold {}%), {}% used\n",
                    Warnings(log.critical_warning),
                    log.critical_warning,
                    kelvin_to_millicelsius(log.temperature) / 1000,
                    log.available_spare,
                    log.spare_threshold,
                    log.percent_used
                ),
                Err(e) => dev_warn!(
                    self.hw.dev(),
                    "rnvme{inst}: SMART / health log unreadable ({})\n",
                    e.to_errno()
                ),
            }
        } else if event.kind == kind::ERROR {
            let _ = self
                .hw
                .admin_read(get_log_page(LOG_ERROR), "Get Log Page (Error Information)");
            if event.needs_reset() {
                // As the C driver: the reset sends the requests again.
                let _ = self.reset("persistent internal error");
                return;
            }
        }
        if let Err(e) = self.hw.admin.submit_aer() {
            dev_warn!(
                self.hw.dev(),
                "rnvme{inst}: cannot send an asynchronous event request: {}\n",
                e.to_errno()
            );
        }
    }
}

/// A Get Log Page of one page (global, NSID FFFFFFFFh).
fn get_log_page(lid: u8) -> Command {
    Command::get_log_page(lid, 0xffff_ffff, (IDENTIFY_SIZE / 4) as u32, 0, 0)
}
