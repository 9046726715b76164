// SPDX-License-Identifier: GPL-2.0

//! The admin queue: synchronous admin commands with a timeout, aborts, the asynchronous event
//! request, and its completion side (the interrupt handler is [`crate::ioq::QueueIrq`]).
//!
//! One synchronous command is in flight at a time (serialized by `exec`). Its command id
//! carries a generation number, so a completion that arrives after its command timed out, or
//! one the device made up, never matches the next command: it is logged and dropped.

use crate::{
    aen::AsyncEvents,
    fault::FaultsRef,
    kernel_ext::sync::Completion as Event,
    queue::Queue,
    spec::{
        command::{admin_opcode, Command},
        completion::{Completion, Status},
    },
};
use core::fmt;
use kernel::{
    device::Bound,
    dma::Coherent,
    new_mutex, new_spinlock_irq, pci,
    prelude::*,
    sync::{
        atomic::{Acquire, Atomic, Full, Relaxed},
        Arc, Mutex, SetOnce, SpinLockIrq,
    },
    time::{ClockSource, Monotonic},
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
    /// Taken back by a controller reset (or refused while one runs).
    Reset,
    /// A user space command taken back because the controller is being removed. The
    /// controller may still own the command's buffers: hand them to [`AdminQueue::park`].
    Removed,
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
            CmdError::Reset => EIO,
            CmdError::Removed => ENODEV,
            CmdError::Kernel(e) => e,
        }
    }
}

impl fmt::Display for CmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CmdError::Status(s) => write!(f, "{s}"),
            CmdError::Timeout => write!(f, "timed out"),
            CmdError::Reset => write!(f, "cancelled by a controller reset"),
            CmdError::Removed => write!(f, "cancelled: the controller is being removed"),
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
    /// The command in flight was taken back by a reset.
    cancelled: bool,
    /// The command in flight came from user space (passthrough).
    user: bool,
    /// The controller is going away: user space commands are refused.
    closed: bool,
    /// The command in flight was taken back by [`AdminQueue::close`].
    removed: bool,
}

/// The data buffer and PRP list of a user space command taken back by
/// [`AdminQueue::close`], kept until the controller is stopped.
pub(crate) type Parked = (Option<Coherent<[u8]>>, Option<Coherent<[u64]>>);

/// The admin queue and its command slot.
#[pin_data]
pub(crate) struct AdminQueue<'b> {
    pdev: &'b pci::Device<Bound>,
    queue: Arc<Queue<'b>>,
    /// No interrupt handler is registered (none could be set up, or the vectors are being
    /// reallocated): completions are polled by the waiter.
    polled: Atomic<bool>,
    /// One synchronous command at a time: `pending` tracks a single command in flight. A
    /// mutex beside it, not around it: the interrupt handler posts the completion under
    /// `pending`'s spinlock while the waiter sleeps on `done`.
    #[pin]
    exec: Mutex<()>,
    #[pin]
    pending: SpinLockIrq<Pending>,
    #[pin]
    done: Event,
    /// The controller is being reset: refuse new commands until the rings are reset.
    stopped: Atomic<bool>,
    /// Abort command slots in use, one bit each.
    aborts: Atomic<u32>,
    /// What each abort slot aborts: command id << 16 | submission queue id.
    abort_target: [Atomic<u32>; ABORT_SLOTS],
    /// When each abort slot was taken (monotonic nanoseconds; [`i64::MAX`] while free, so
    /// a slot seen taken before its time is stored looks new, not old).
    abort_since: [Atomic<i64>; ABORT_SLOTS],
    /// Faults tests inject (lost Abort completions, a delayed admin timeout).
    pub(crate) faults: FaultsRef,
    /// An Asynchronous Event Request is outstanding.
    aer_armed: Atomic<bool>,
    /// Who handles asynchronous events, once the controller is up.
    events: SetOnce<Arc<AsyncEvents>>,
    /// The buffers of a user space command taken back by [`Self::close`] (one at most: one
    /// command is in flight at a time), freed by [`Self::unpark`] once the controller
    /// stopped.
    #[pin]
    parked: Mutex<Option<Parked>>,
}

/// A reserved abort slot.
pub(crate) struct AbortSlot(usize);

/// Command ids with this bit set are reserved for commands not sent by [`AdminQueue::execute`]:
/// aborts and the asynchronous event request.
const CID_ASYNC: u16 = 0x8000;
/// Command ids of Abort commands: this plus the slot number.
const CID_ABORT: u16 = CID_ASYNC | 0x100;
/// Command id of the Asynchronous Event Request (one is kept outstanding, as the C driver).
const CID_AER: u16 = CID_ASYNC | 0x200;
/// Aborts outstanding at once, at most (the controller's own limit, ACL + 1, may be lower).
/// With the synchronous slot this stays far below the admin queue's depth.
pub(crate) const ABORT_SLOTS: usize = 4;

impl<'b> AdminQueue<'b> {
    pub(crate) fn new(
        pdev: &'b pci::Device<Bound>,
        queue: Arc<Queue<'b>>,
        polled: bool,
        faults: FaultsRef,
    ) -> Result<Arc<Self>> {
        Arc::pin_init(
            try_pin_init!(Self {
                pdev,
                queue,
                polled: Atomic::new(polled),
                exec <- new_mutex!(()),
                pending <- new_spinlock_irq!(Pending {
                    cid: None,
                    result: None,
                    generation: 0,
                    cancelled: false,
                    user: false,
                    closed: false,
                    removed: false,
                }),
                parked <- new_mutex!(None),
                done <- Event::new(),
                stopped: Atomic::new(false),
                aborts: Atomic::new(0),
                abort_target: [const { Atomic::new(0) }; ABORT_SLOTS],
                abort_since: [const { Atomic::new(i64::MAX) }; ABORT_SLOTS],
                faults,
                aer_armed: Atomic::new(false),
                events: SetOnce::new(),
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
        self.queue.reap_unowned(|cqe| self.complete(cqe))
    }

    /// Under the CQ lock.
    fn complete(&self, cqe: Completion) {
        if !cqe.status().is_success() {
            self.queue.stats.error_locked();
        }
        if cqe.cid & !0xff == CID_ABORT {
            self.abort_done(cqe);
            return;
        }
        if cqe.cid == CID_AER && self.aer_armed.load(Relaxed) {
            self.aer_armed.store(false, Relaxed);
            if let Some(events) = self.events.as_ref() {
                events.completed(&cqe);
            }
            return;
        }
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
    pub(crate) fn execute(&self, cmd: Command, timeout_ms: u32) -> Result<Completion, CmdError> {
        self.run(cmd, timeout_ms, false)
    }

    /// [`Self::execute`] for a command from user space (passthrough): refused with `ENODEV`
    /// once [`Self::close`] was called, and taken back by the removal that called it.
    pub(crate) fn execute_user(
        &self,
        cmd: Command,
        timeout_ms: u32,
    ) -> Result<Completion, CmdError> {
        self.run(cmd, timeout_ms, true)
    }

    fn run(&self, mut cmd: Command, timeout_ms: u32, user: bool) -> Result<Completion, CmdError> {
        let _serial = self.exec.lock();
        // Before the command id is published: `cancel` or `close` may signal as soon as it is.
        self.done.reinit();
        {
            let mut p = self.pending.lock();
            // Under `pending`, which `cancel` takes after setting `stopped`: either this
            // sees it, or `cancel` sees the command id and takes the command back.
            if self.stopped.load(Relaxed) {
                return Err(CmdError::Reset);
            }
            if user && p.closed {
                return Err(CmdError::Kernel(ENODEV));
            }
            p.user = user;
            p.removed = false;
            p.generation = p.generation.wrapping_add(1) & !CID_ASYNC;
            let cid = p.generation;
            p.cid = Some(cid);
            p.result = None;
            p.cancelled = false;
            cmd.set_cid(cid);
        }
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
            None if p.cancelled => Err(CmdError::Reset),
            None if p.removed => Err(CmdError::Removed),
            None => {
                // Forget the id, so a late completion is reported and ignored.
                p.cid = None;
                Err(CmdError::Timeout)
            }
        }
    }

    /// Reserves an abort slot for command `cid` on submission queue `sqid`. Fails when
    /// `limit` aborts (at most [`ABORT_SLOTS`]) are already outstanding or a reset is running.
    pub(crate) fn claim_abort(&self, sqid: u16, cid: u16, limit: u32) -> Result<AbortSlot> {
        if self.stopped.load(Relaxed) {
            return Err(EBUSY);
        }
        let limit = limit.clamp(1, ABORT_SLOTS as u32);
        loop {
            let cur = self.aborts.load(Relaxed);
            let free = (!cur).trailing_zeros();
            if free >= limit {
                return Err(EBUSY);
            }
            if self.aborts.cmpxchg(cur, cur | 1 << free, Full).is_ok() {
                let slot = free as usize;
                self.abort_target[slot].store(u32::from(cid) << 16 | u32::from(sqid), Relaxed);
                self.abort_since[slot].store(Monotonic::ktime_get(), Relaxed);
                return Ok(AbortSlot(slot));
            }
        }
    }

    /// Sends the Abort reserved by [`Self::claim_abort`] without waiting for it; its
    /// completion is logged.
    pub(crate) fn send_abort(&self, slot: AbortSlot) -> Result {
        let target = self.abort_target[slot.0].load(Relaxed);
        let mut cmd = Command::abort(target as u16, (target >> 16) as u16);
        cmd.set_cid(CID_ABORT | slot.0 as u16);
        self.queue.submit(&cmd, true).inspect_err(|_| {
            self.release_abort(slot.0);
        })
    }

    /// How long the oldest outstanding Abort has waited for its completion, in
    /// milliseconds (`None`: none is outstanding). Aborts have the admin timeout, as in the
    /// C driver: one outstanding longer was lost by the controller.
    pub(crate) fn oldest_abort_ms(&self) -> Option<u64> {
        let now = Monotonic::ktime_get();
        // Acquire: a slot seen taken shows its time, or the free marker stored before it
        // was released, never an older claim's time.
        let taken = self.aborts.load(Acquire);
        (0..ABORT_SLOTS)
            .filter(|&slot| taken & (1 << slot) != 0)
            .map(|slot| {
                let since = self.abort_since[slot].load(Relaxed);
                (now.saturating_sub(since).max(0) / 1_000_000) as u64
            })
            .max()
    }

    fn release_abort(&self, slot: usize) {
        self.abort_since[slot].store(i64::MAX, Relaxed);
        let mut cur = self.aborts.load(Relaxed);
        while let Err(now) = self.aborts.cmpxchg(cur, cur & !(1 << slot), Full) {
            cur = now;
        }
    }

    /// An Abort completed. Dword 0 bit 0 clear means the command was aborted (it completes
    /// with status "aborted by request"); set means the controller did not abort it.
    fn abort_done(&self, cqe: Completion) {
        let slot = usize::from(cqe.cid & 0xff);
        if slot >= ABORT_SLOTS || self.aborts.load(Relaxed) & (1 << slot) == 0 {
            dev_warn!(
                self.pdev.as_ref(),
                "ignoring completion of unknown abort {:#x}\n",
                cqe.cid
            );
            return;
        }
        if self.faults.lose_abort_completion() {
            return;
        }
        let target = self.abort_target[slot].load(Relaxed);
        self.release_abort(slot);
        let (sqid, cid) = (target & 0xffff, target >> 16);
        let status = cqe.status();
        if !status.is_success() {
            dev_warn!(
                self.pdev.as_ref(),
                "abort of command {cid:#x} on queue {sqid} failed: {status}\n"
            );
        } else if cqe.result & 1 == 0 {
            dev_warn!(
                self.pdev.as_ref(),
                "abort of command {cid:#x} on queue {sqid}: aborted\n"
            );
        } else {
            dev_warn!(
                self.pdev.as_ref(),
                "abort of command {cid:#x} on queue {sqid}: not aborted by the controller\n"
            );
        }
    }

    /// Who handles asynchronous events, once set.
    pub(crate) fn events(&self) -> Option<&Arc<AsyncEvents>> {
        self.events.as_ref()
    }

    /// Hands asynchronous events to `events` from now on.
    pub(crate) fn set_event_handler(&self, events: Arc<AsyncEvents>) {
        let _ = self.events.populate(events);
    }

    /// Sends an Asynchronous Event Request, unless one is outstanding or no handler is set.
    /// It completes when the controller has an event to report.
    pub(crate) fn submit_aer(&self) -> Result {
        if self.events.as_ref().is_none() {
            return Ok(());
        }
        if self.stopped.load(Relaxed) {
            return Err(EBUSY);
        }
        if self.aer_armed.xchg(true, Full) {
            return Ok(());
        }
        let mut cmd = Command::new(admin_opcode::ASYNC_EVENT_REQUEST);
        cmd.set_cid(CID_AER);
        self.queue.submit(&cmd, true).inspect_err(|_| {
            self.aer_armed.store(false, Relaxed);
        })
    }

    /// A reset has disabled the controller: the command in flight (if any) and outstanding
    /// aborts will never complete. Wakes the waiter with [`CmdError::Reset`] and refuses new
    /// commands until [`Self::restart`].
    pub(crate) fn cancel(&self) {
        self.stopped.store(true, Relaxed);
        for since in &self.abort_since {
            since.store(i64::MAX, Relaxed);
        }
        self.aborts.store(0, Relaxed);
        self.aer_armed.store(false, Relaxed);
        let mut p = self.pending.lock();
        if p.cid.take().is_some() {
            p.cancelled = true;
            drop(p);
            self.done.complete();
        }
    }

    /// The controller is being removed: refuses user space commands from now on, and takes
    /// back the one in flight, if any, at once (its caller chose its timeout, up to 2^32 ms):
    /// it fails with [`CmdError::Removed`]. Nothing else waits for it then, neither removal
    /// (which needs the admin queue) nor the caller.
    pub(crate) fn close(&self) {
        let mut p = self.pending.lock();
        p.closed = true;
        if p.user && p.cid.take().is_some() {
            // Its completion, if it ever comes, is now an unknown command id: ignored.
            p.removed = true;
            drop(p);
            self.done.complete();
        }
    }

    /// Keeps the buffers of a command that failed with [`CmdError::Removed`] until
    /// [`Self::unpark`]: the controller may write into them until it is stopped.
    pub(crate) fn park(&self, buffers: Parked) {
        *self.parked.lock() = Some(buffers);
    }

    /// Frees parked buffers: the controller has been stopped (CSTS.RDY = 0).
    pub(crate) fn unpark(&self) {
        *self.parked.lock() = None;
    }

    /// Empties the rings for a re-enabled controller and accepts commands again.
    pub(crate) fn restart(&self) -> Result {
        // No command is in flight once `exec` is ours: `cancel` woke any waiter.
        let _serial = self.exec.lock();
        self.queue.reset()?;
        self.stopped.store(false, Relaxed);
        Ok(())
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
            // Completed, or taken back by `cancel` or `close`.
            if self.pending.lock().cid.is_none() {
                return;
            }
        }
    }

    /// Waits for the pending command by polling the completion queue every millisecond.
    fn poll_wait(&self, timeout_ms: u32) {
        for _ in 0..timeout_ms.max(1) {
            self.process();
            if self.pending.lock().cid.is_none() {
                return;
            }
            self.done.wait_timeout(1);
        }
    }
}
