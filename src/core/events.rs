// SPDX-License-Identifier: GPL-2.0

//! The asynchronous event work items: what the admin queue's interrupt handler and error
//! recovery ask of the controller in process context. Two work items, as C's `scan_work`
//! and `reset_work`: the event work handles completed Asynchronous Event Requests and the
//! rescan after resume, which wait for I/O (a new head disk's partition read waits for a
//! live path); the recovery work resets the controller after an admin timeout and marks the
//! disks of a dead controller dead. A reset never waits behind a scan it must finish: one
//! work item runs one call at a time, so a reset queued behind a scan whose I/O waits for
//! that reset would never run.
//!
//! Below the admin queue, which hands it completed Asynchronous Event Requests; what each
//! request means is the features layer's ([`EventHandler`], implemented in `aen.rs`).

use crate::{
    fault::FaultsRef,
    kernel_ext::sync::{flush_work, system_dfl},
    spec::completion::{Completion, Status},
};
use kernel::{
    impl_has_work, new_work,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc,
    },
    workqueue::{RawWorkItem, Work, WorkItem},
};

/// What the work item does, from process context. Each call does nothing once the
/// controller is unbound.
pub(crate) trait EventHandler: Send + Sync {
    /// Resets the controller after an admin command timed out (failures are logged, and a
    /// controller that does not come back is dead).
    fn reset(&self);
    /// Rescans the namespaces after system sleep.
    fn rescan(&self);
    /// Marks the disks of a controller given up dead.
    fn mark_disks_dead(&self);
    /// Handles one completed Asynchronous Event Request, then sends the next.
    fn async_event(&self, status: Status, result: u32);
}

/// A controller's asynchronous event handling.
#[pin_data]
pub(crate) struct AsyncEvents {
    #[pin]
    work: Work<AsyncEvents, EVENT>,
    /// Error recovery: a reset after an admin timeout, then the disks of a dead controller.
    #[pin]
    recovery: Work<AsyncEvents, RECOVERY>,
    /// What the work does with what it takes; reaches the controller (or nothing, after
    /// unbind).
    handler: Arc<dyn EventHandler>,
    /// The controller's test faults (`recovery_delay_ms`; nothing in the production build).
    faults: FaultsRef,
    /// The completed request's status and dword 0, for the work item. One request is
    /// outstanding at a time (sent again by the work, or by a reset's restart), so one
    /// slot suffices.
    status: Atomic<u32>,
    result: Atomic<u32>,
    /// A completed request waits for the work.
    event: Atomic<bool>,
    /// The controller was declared dead: the work marks its disks dead.
    dead: Atomic<bool>,
    /// An admin command of the driver timed out: the work resets the controller.
    reset: Atomic<bool>,
    /// The controller came back from system sleep: the work rescans its namespaces.
    rescan: Atomic<bool>,
    /// Set at teardown: completions no longer queue the work.
    closed: Atomic<bool>,
}

/// The event work item's id.
const EVENT: u64 = 0;
/// The recovery work item's id.
const RECOVERY: u64 = 1;

impl_has_work! {
    impl HasWork<Self, EVENT> for AsyncEvents { self.work }
    impl HasWork<Self, RECOVERY> for AsyncEvents { self.recovery }
}

impl WorkItem<EVENT> for AsyncEvents {
    type Pointer = Arc<AsyncEvents>;

    fn run(this: Arc<AsyncEvents>) {
        if this.rescan.xchg(false, Relaxed) {
            this.handler.rescan();
        }
        if this.event.xchg(false, Relaxed) {
            let status = Status(this.status.load(Relaxed) as u16);
            let result = this.result.load(Relaxed);
            this.handler.async_event(status, result);
        }
    }
}

impl WorkItem<RECOVERY> for AsyncEvents {
    type Pointer = Arc<AsyncEvents>;

    fn run(this: Arc<AsyncEvents>) {
        // The reset first: a controller it gives up is then marked dead in the same run.
        if this.reset.xchg(false, Relaxed) {
            this.faults.delay_recovery();
            this.handler.reset();
        }
        if this.dead.xchg(false, Relaxed) {
            this.handler.mark_disks_dead();
        }
    }
}

impl AsyncEvents {
    pub(crate) fn new(handler: Arc<dyn EventHandler>, faults: FaultsRef) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                work <- new_work!("rnvme::async_event"),
                recovery <- new_work!("rnvme::recovery"),
                handler,
                faults,
                status: Atomic::new(0),
                result: Atomic::new(0),
                event: Atomic::new(false),
                dead: Atomic::new(false),
                reset: Atomic::new(false),
                rescan: Atomic::new(false),
                closed: Atomic::new(false),
            }),
            GFP_KERNEL,
        )
    }

    /// The Asynchronous Event Request completed (admin queue interrupt handler).
    pub(crate) fn completed(self: &Arc<Self>, cqe: &Completion) {
        self.status.store(u32::from(cqe.status().0), Relaxed);
        self.result.store(cqe.result, Relaxed);
        self.event.store(true, Relaxed);
        self.queue();
    }

    /// Error recovery gave the controller up (any context): its disks are marked dead from
    /// the work item.
    pub(crate) fn controller_dead(self: &Arc<Self>) {
        self.dead.store(true, Relaxed);
        self.queue_recovery();
    }

    /// An admin command timed out outside a reset (any context): the recovery work resets
    /// the controller, even while the event work waits in a scan.
    pub(crate) fn reset_needed(self: &Arc<Self>) {
        self.reset.store(true, Relaxed);
        self.queue_recovery();
    }

    /// The controller came back from system sleep (any context): the work rescans its
    /// namespaces, as C's reset work does (`nvme_queue_scan`).
    pub(crate) fn rescan_needed(self: &Arc<Self>) {
        self.rescan.store(true, Relaxed);
        self.queue();
    }

    fn queue(self: &Arc<Self>) {
        self.enqueue::<EVENT>();
    }

    fn queue_recovery(self: &Arc<Self>) {
        self.enqueue::<RECOVERY>();
    }

    fn enqueue<const ID: u64>(self: &Arc<Self>)
    where
        Arc<Self>: RawWorkItem<ID>,
    {
        if !self.closed.load(Relaxed) {
            // Already queued: the queued run sees what was just stored.
            let _ = system_dfl().enqueue::<_, ID>(self.clone());
        }
    }

    /// Stops handling events; returns once both work items are idle. Call after the
    /// controller's link was revoked.
    pub(crate) fn close(&self) {
        self.closed.store(true, Relaxed);
        flush_work(&self.work);
        flush_work(&self.recovery);
    }
}
