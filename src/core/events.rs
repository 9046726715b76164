// SPDX-License-Identifier: GPL-2.0

//! The asynchronous event work item: what the admin queue's interrupt handler and error
//! recovery ask of the controller in process context (an event to handle, a reset after an
//! admin timeout, a rescan after resume, disks to mark dead), run from one work item.
//!
//! Below the admin queue, which hands it completed Asynchronous Event Requests; what each
//! request means is the features layer's ([`EventHandler`], implemented in `aen.rs`).

use crate::{
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
    workqueue::{Work, WorkItem},
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
    work: Work<AsyncEvents>,
    /// What the work does with what it takes; reaches the controller (or nothing, after
    /// unbind).
    handler: Arc<dyn EventHandler>,
    /// The completed request's status and dword 0, for the work item. One request is
    /// outstanding at a time and sent again only by the work, so one slot suffices.
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

impl_has_work! {
    impl HasWork<Self> for AsyncEvents { self.work }
}

impl WorkItem for AsyncEvents {
    type Pointer = Arc<AsyncEvents>;

    fn run(this: Arc<AsyncEvents>) {
        if this.reset.xchg(false, Relaxed) {
            this.handler.reset();
        }
        if this.rescan.xchg(false, Relaxed) {
            this.handler.rescan();
        }
        if this.dead.xchg(false, Relaxed) {
            this.handler.mark_disks_dead();
        }
        if this.event.xchg(false, Relaxed) {
            let status = Status(this.status.load(Relaxed) as u16);
            let result = this.result.load(Relaxed);
            this.handler.async_event(status, result);
        }
    }
}

impl AsyncEvents {
    pub(crate) fn new(handler: Arc<dyn EventHandler>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                work <- new_work!("rnvme::async_event"),
                handler,
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
        self.queue();
    }

    /// An admin command timed out outside a reset (any context): the work resets the
    /// controller.
    pub(crate) fn reset_needed(self: &Arc<Self>) {
        self.reset.store(true, Relaxed);
        self.queue();
    }

    /// The controller came back from system sleep (any context): the work rescans its
    /// namespaces, as C's reset work does (`nvme_queue_scan`).
    pub(crate) fn rescan_needed(self: &Arc<Self>) {
        self.rescan.store(true, Relaxed);
        self.queue();
    }

    fn queue(self: &Arc<Self>) {
        if !self.closed.load(Relaxed) {
            // Already queued: the queued run sees what was just stored.
            let _ = system_dfl().enqueue(self.clone());
        }
    }

    /// Stops handling events; returns once the work item is idle. Call after the controller's
    /// link was revoked.
    pub(crate) fn close(&self) {
        self.closed.store(true, Relaxed);
        flush_work(&self.work);
    }
}
