// SPDX-License-Identifier: GPL-2.0

//! The admin queue: synchronous admin commands with a timeout, and its interrupt handler.
//!
//! One synchronous command is in flight at a time (serialized by `exec`). Its command id
//! carries a generation number, so a completion that arrives after its command timed out, or
//! one the device made up, never matches the next command: it is logged and dropped.

use crate::{
    kernel_ext::sync::Completion as Event,
    queue::Queue,
    spec::{
        command::Command,
        completion::{Completion, Status},
    },
};
use core::fmt;
use kernel::{
    device::Bound,
    new_mutex, new_spinlock_irq, pci,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, Mutex, SpinLockIrq,
    },
};

/// Admin queue depth, as the C driver uses (capped by CAP.MQES).
pub(crate) const ADMIN_DEPTH: u16 = 32;

/// How an admin command failed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum CmdError {
    /// The controller completed it with an error status.
    Status(Status),
    /// No completion within the timeout. The controller may still own the command's buffers.
    Timeout,
    /// Could not be submitted.
    Kernel(Error),
}

impl From<Error> for CmdError {
    fn from(e: Error) -> Self {
        CmdError::Kernel(e)
    }
}

impl From<CmdError> for Error {
    fn from(e: CmdError) -> Error {
        match e {
            CmdError::Status(_) => EIO,
            CmdError::Timeout => ETIMEDOUT,
            CmdError::Kernel(e) => e,
        }
    }
}

impl fmt::Display for CmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CmdError::Status(s) => write!(f, "{s}"),
            CmdError::Timeout => write!(f, "timed out"),
            CmdError::Kernel(e) => write!(f, "error {}", e.to_errno()),
        }
    }
}

/// The synchronous command slot.
struct Pending {
    /// Command id of the command in flight, if any.
    cid: Option<u16>,
    /// Its completion, once it arrived.
    result: Option<Completion>,
    /// Generation counter for the next command id.
    generation: u16,
}

/// The admin queue and its command slot.
#[pin_data]
pub(crate) struct AdminQueue<'b> {
    pdev: &'b pci::Device<Bound>,
    queue: Arc<Queue<'b>>,
    /// No interrupt handler is registered (none could be set up, or the vectors are being
    /// reallocated): completions are polled by the waiter.
    polled: Atomic<bool>,
    #[pin]
    exec: Mutex<()>,
    #[pin]
    pending: SpinLockIrq<Pending>,
    #[pin]
    done: Event,
}

/// Command ids with this bit set are reserved for asynchronous event requests.
const CID_ASYNC: u16 = 0x8000;

impl<'b> AdminQueue<'b> {
    pub(crate) fn new(
        pdev: &'b pci::Device<Bound>,
        queue: Arc<Queue<'b>>,
        polled: bool,
    ) -> Result<Arc<Self>> {
        Arc::pin_init(
            try_pin_init!(Self {
                pdev,
                queue,
                polled: Atomic::new(polled),
                exec <- new_mutex!(()),
                pending <- new_spinlock_irq!(Pending { cid: None, result: None, generation: 0 }),
                done <- Event::new(),
            }),
            GFP_KERNEL,
        )
    }

    /// Switches between interrupt-driven and polled completion.
    pub(crate) fn set_polled(&self, polled: bool) {
        self.polled.store(polled, Relaxed);
    }

    pub(crate) fn queue(&self) -> &Queue<'b> {
        &self.queue
    }

    /// Consumes new completions; called from the interrupt handler or the polling waiter.
    pub(crate) fn process(&self) -> u32 {
        self.queue.process_completions(|cqe| self.complete(cqe))
    }

    fn complete(&self, cqe: Completion) {
        let mut p = self.pending.lock();
        if p.cid == Some(cqe.cid) {
            p.cid = None;
            p.result = Some(cqe);
            drop(p);
            self.done.complete();
        } else {
            drop(p);
            dev_warn!(
                self.pdev.as_ref(),
                "ignoring admin completion for unknown command id {:#x} (status {})\n",
                cqe.cid,
                cqe.status()
            );
        }
    }

    /// Submits `cmd` and waits up to `timeout_ms` for its completion.
    ///
    /// On [`CmdError::Timeout`] the controller may still access the command's data buffer:
    /// the caller must disable the controller before freeing it.
    pub(crate) fn execute(
        &self,
        mut cmd: Command,
        timeout_ms: u32,
    ) -> Result<Completion, CmdError> {
        let _serial = self.exec.lock();
        {
            let mut p = self.pending.lock();
            p.generation = p.generation.wrapping_add(1) & !CID_ASYNC;
            let cid = p.generation;
            p.cid = Some(cid);
            p.result = None;
            cmd.set_cid(cid);
        }
        self.done.reinit();
        if let Err(e) = self.queue.submit(&cmd, true) {
            self.pending.lock().cid = None;
            return Err(e.into());
        }

        if self.polled.load(Relaxed) {
            self.poll_wait(timeout_ms);
        } else {
            self.irq_wait(timeout_ms);
        }

        let mut p = self.pending.lock();
        match p.result.take() {
            Some(cqe) if cqe.status().is_success() => Ok(cqe),
            Some(cqe) => Err(CmdError::Status(cqe.status())),
            None => {
                // Forget the id, so a late completion is reported and ignored.
                p.cid = None;
                Err(CmdError::Timeout)
            }
        }
    }

    /// Waits for the interrupt handler to complete the pending command. Every second without
    /// it, the completion queue is checked once: a lost interrupt costs a second, not the
    /// whole timeout.
    fn irq_wait(&self, timeout_ms: u32) {
        let mut left = timeout_ms;
        while left > 0 {
            let slice = left.min(1000);
            if self.done.wait_timeout(slice) {
                return;
            }
            left -= slice;
            self.process();
            if self.pending.lock().result.is_some() {
                return;
            }
        }
    }

    /// Waits for the pending command by polling the completion queue every millisecond.
    fn poll_wait(&self, timeout_ms: u32) {
        for _ in 0..timeout_ms.max(1) {
            self.process();
            if self.pending.lock().result.is_some() {
                return;
            }
            self.done.wait_timeout(1);
        }
    }
}
