// SPDX-License-Identifier: GPL-2.0

//! The admin queue: synchronous admin commands with a timeout, aborts, the asynchronous event
//! request, and its completion side (the interrupt handler is `QueueIrq`, in `queues.rs`).
//!
//! Synchronous commands run side by side, one per slot, as C's admin tag set: nobody waits
//! for another command to complete before sending theirs, so a reset's commands never wait
//! behind a command the controller lost (a user's may have a timeout of hours). A command id
//! is its slot plus a generation number, so a completion that arrives after its command
//! timed out, or one the device made up, never matches the slot's next command: it is logged
//! and dropped. User space commands are taken only while the controller answers: from a
//! reset's start until it answered its first command after the enable they fail at once (as
//! C's `__nvme_check_ready`), instead of ringing a doorbell nobody reads.

use crate::{
    events::AsyncEvents,
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
        new_condvar, Arc, CondVar, Mutex, SetOnce, SpinLockIrq,
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
    /// A user space command refused: the controller is being reset.
    NotReady,
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
            CmdError::NotReady => EAGAIN,
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
            CmdError::NotReady => write!(f, "refused: the controller is being reset"),
            CmdError::Removed => write!(f, "cancelled: the controller is being removed"),
            CmdError::Kernel(e) => write!(f, "error {}", e.to_errno()),
        }
    }
}

// The kernel's print macros format through their own trait (see `fmt.rs`).
impl kernel::fmt::Display for CmdError {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Synchronous commands in flight at once, at most (C's admin tag set has 30 tags; this
/// leaves room in the ring for the aborts and the event request).
const SYNC_SLOTS: usize = 16;
/// Command id bits that name the slot; the generation number sits above them.
const SLOT_BITS: u16 = 4;

/// One synchronous command slot.
#[derive(Default)]
struct Slot {
    /// Command id of the command in flight, if any.
    cid: Option<u16>,
    /// Its completion, once it arrived.
    result: Option<Completion>,
    /// The command in flight was taken back by a reset.
    cancelled: bool,
    /// The command in flight came from user space (passthrough).
    user: bool,
    /// The command in flight was taken back by [`AdminQueue::close`].
    removed: bool,
}

/// The synchronous command slots.
struct Pending {
    slots: [Slot; SYNC_SLOTS],
    /// Generation counter for the next command id.
    generation: u16,
    /// User space commands are taken: the controller is up (cleared by
    /// [`AdminQueue::cancel`], set by [`AdminQueue::open_users`]).
    users: bool,
    /// The controller is going away: user space commands are refused for good.
    closed: bool,
}

/// The data buffer and PRP list of a user space command taken back by
/// [`AdminQueue::close`], kept until the controller is stopped.
pub(crate) type Parked = (Option<Coherent<[u8]>>, Option<Coherent<[u64]>>);

/// The admin queue and its command slots.
#[pin_data]
pub(crate) struct AdminQueue<'b> {
    pdev: &'b pci::Device<Bound>,
    queue: Arc<Queue<'b>>,
    /// No interrupt handler is registered (none could be set up, or the vectors are being
    /// reallocated): completions are polled by the waiter.
    polled: Atomic<bool>,
    /// Held from the check of `stopped` to the command's submission, never across a wait:
    /// [`Self::restart`] takes it to empty the rings, so no command the reset took back
    /// can reach the new ones.
    #[pin]
    submit: Mutex<()>,
    /// The interrupt handler posts a completion under this spinlock while its waiter sleeps
    /// on its slot's `done`.
    #[pin]
    pending: SpinLockIrq<Pending>,
    #[pin]
    done: [Event; SYNC_SLOTS],
    /// Free slots, one bit each (of the first `slots`); waiters for one sleep on `freed`.
    #[pin]
    free: Mutex<u32>,
    #[pin]
    freed: CondVar,
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
    /// The buffers of user space commands taken back by [`Self::close`], freed by
    /// [`Self::unpark`] once the controller stopped.
    #[pin]
    parked: Mutex<KVec<Parked>>,
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
/// With the synchronous slots this stays below the admin queue's depth.
pub(crate) const ABORT_SLOTS: usize = 4;

impl<'b> AdminQueue<'b> {
    /// The admin queue over `queue`, a ring of `depth` entries.
    pub(crate) fn new(
        pdev: &'b pci::Device<Bound>,
        queue: Arc<Queue<'b>>,
        depth: u16,
        polled: bool,
        faults: FaultsRef,
    ) -> Result<Arc<Self>> {
        // One ring entry stays empty; the aborts and the event request have theirs.
        let room = usize::from(depth).saturating_sub(ABORT_SLOTS + 2);
        let slots = room.clamp(1, SYNC_SLOTS);
        Arc::pin_init(
            try_pin_init!(Self {
                pdev,
                queue,
                polled: Atomic::new(polled),
                submit <- new_mutex!(()),
                pending <- new_spinlock_irq!(Pending {
                    slots: Default::default(),
                    generation: 0,
                    users: true,
                    closed: false,
                }),
                parked <- new_mutex!(KVec::new()),
                done <- pin_init::pin_init_array_from_fn(|_| Event::new()),
                free <- new_mutex!(((1u64 << slots) - 1) as u32),
                freed <- new_condvar!(),
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
    /// Each is acknowledged (CQ head doorbell) before its waiter wakes: the waiter may stop
    /// the controller next (unbind's last Delete I/O Completion Queue before the shutdown).
    pub(crate) fn process(&self) -> u32 {
        self.queue.reap_unowned_acked(|cqe| self.complete(cqe))
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
        let i = usize::from(cqe.cid & ((1 << SLOT_BITS) - 1));
        let mut p = self.pending.lock();
        if let Some(slot) = p.slots.get_mut(i).filter(|s| s.cid == Some(cqe.cid)) {
            slot.cid = None;
            slot.result = Some(cqe);
            // Under `pending`, as `cancel` and `close` signal: once the waiter can see the
            // result, the event is signalled, and never reaches the slot's next command.
            self.done[i].complete();
            drop(p);
            self.faults.delay_admin_completion();
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

    fn run(&self, cmd: Command, timeout_ms: u32, user: bool) -> Result<Completion, CmdError> {
        let i = self.take_slot();
        let r = self.run_in(i, cmd, timeout_ms, user);
        self.put_slot(i);
        r
    }

    /// Waits for a free slot (commands in flight all time out, complete or are taken back
    /// by a reset).
    fn take_slot(&self) -> usize {
        let mut free = self.free.lock();
        while *free == 0 {
            self.freed.wait(&mut free);
        }
        let i = free.trailing_zeros() as usize;
        *free &= !(1 << i);
        i
    }

    fn put_slot(&self, i: usize) {
        *self.free.lock() |= 1 << i;
        self.freed.notify_one();
    }

    fn run_in(
        &self,
        i: usize,
        mut cmd: Command,
        timeout_ms: u32,
        user: bool,
    ) -> Result<Completion, CmdError> {
        {
            let _submit = self.submit.lock();
            // Before the command id is published: `cancel` or `close` may signal as soon as
            // it is.
            self.done[i].reinit();
            let mut p = self.pending.lock();
            // Under `pending`, which `cancel` takes after setting `stopped`: either this
            // sees it, or `cancel` sees the command id and takes the command back.
            if user && p.closed {
                return Err(CmdError::Kernel(ENODEV));
            }
            if user && !p.users {
                return Err(CmdError::NotReady);
            }
            if self.stopped.load(Relaxed) {
                return Err(CmdError::Reset);
            }
            p.generation = p.generation.wrapping_add(1) & (!CID_ASYNC >> SLOT_BITS);
            let cid = p.generation << SLOT_BITS | i as u16;
            p.slots[i] = Slot {
                cid: Some(cid),
                result: None,
                cancelled: false,
                user,
                removed: false,
            };
            drop(p);
            cmd.set_cid(cid);
            // Test fault `lose_ns_desc_lists`: a command of the driver's own left unsent
            // times out as one the controller never fetched.
            let lost = !user && self.faults.lose_admin_command(&cmd);
            if !lost {
                if let Err(e) = self.queue.submit(&cmd, true) {
                    self.pending.lock().slots[i].cid = None;
                    return Err(e.into());
                }
            }
        }

        if self.polled.load(Relaxed) {
            self.poll_wait(i, timeout_ms);
        } else {
            self.irq_wait(i, timeout_ms);
        }

        let mut p = self.pending.lock();
        let slot = &mut p.slots[i];
        match slot.result.take() {
            Some(cqe) if cqe.status().is_success() => Ok(cqe),
            Some(cqe) => Err(CmdError::Status(cqe.status())),
            None if slot.cancelled => Err(CmdError::Reset),
            None if slot.removed => Err(CmdError::Removed),
            None => {
                // Forget the id, so a late completion is reported and ignored.
                slot.cid = None;
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
        // Under `submit`, as every command: a restart (which empties the rings and clears
        // `aer_armed`) cannot run between the check of `stopped` and the submission, or a
        // request sent before it would sit in the new ring beside the one the restart's
        // caller sends (the event work re-arms while the recovery work may reset).
        let _submit = self.submit.lock();
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

    /// A reset has disabled the controller: the commands in flight and outstanding aborts
    /// will never complete. Wakes their waiters with [`CmdError::Reset`], refuses new
    /// commands until [`Self::restart`] and user space ones until [`Self::open_users`].
    pub(crate) fn cancel(&self) {
        self.stopped.store(true, Relaxed);
        for since in &self.abort_since {
            since.store(i64::MAX, Relaxed);
        }
        self.aborts.store(0, Relaxed);
        self.aer_armed.store(false, Relaxed);
        let mut p = self.pending.lock();
        p.users = false;
        for (i, slot) in p.slots.iter_mut().enumerate() {
            if slot.cid.take().is_some() {
                slot.cancelled = true;
                self.done[i].complete();
            }
        }
    }

    /// The controller answers again after a reset: user space commands are taken.
    pub(crate) fn open_users(&self) {
        self.pending.lock().users = true;
    }

    /// The controller is being removed: refuses user space commands from now on, and takes
    /// back the one in flight, if any, at once (its caller chose its timeout, up to 2^32 ms):
    /// it fails with [`CmdError::Removed`]. Nothing else waits for it then, neither removal
    /// (which needs the admin queue) nor the caller.
    pub(crate) fn close(&self) {
        let mut p = self.pending.lock();
        p.closed = true;
        for (i, slot) in p.slots.iter_mut().enumerate() {
            if slot.user && slot.cid.take().is_some() {
                // Its completion, if it ever comes, is now an unknown command id: ignored.
                slot.removed = true;
                self.done[i].complete();
            }
        }
    }

    /// Keeps the buffers of a command that failed with [`CmdError::Removed`] until
    /// [`Self::unpark`]: the controller may write into them until it is stopped.
    pub(crate) fn park(&self, buffers: Parked) {
        let mut parked = self.parked.lock();
        let _ = parked.reserve(1, GFP_KERNEL);
        if let Err(e) = parked.push_within_capacity(buffers) {
            // Leaked rather than freed under a controller that may still write into them.
            core::mem::forget(e);
        }
    }

    /// Frees parked buffers: the controller has been stopped (CSTS.RDY = 0).
    pub(crate) fn unpark(&self) {
        self.parked.lock().clear();
    }

    /// Empties the rings of a disabled controller, taking back whatever is still in them
    /// (a reset that enables once more finds the commands sent after its first enable), and
    /// keeps refusing commands until [`Self::resume`].
    pub(crate) fn restart(&self) -> Result {
        // No command is between its check of `stopped` and its submission once `submit` is
        // ours; `cancel` takes back every one submitted before.
        let _submit = self.submit.lock();
        self.cancel();
        self.queue.reset()
    }

    /// The controller is enabled again with the rings [`Self::restart`] emptied: the
    /// driver's commands are taken (user space ones wait for [`Self::open_users`]). Not
    /// before the enable: a doorbell written to a disabled controller is lost, and the
    /// command with it until its timeout.
    pub(crate) fn resume(&self) {
        self.stopped.store(false, Relaxed);
    }

    /// Waits for the interrupt handler to complete the pending command. Every second without
    /// it, the completion queue is checked once: a lost interrupt costs a second, not the
    /// whole timeout.
    fn irq_wait(&self, i: usize, timeout_ms: u32) {
        let mut left = timeout_ms;
        while left > 0 {
            let slice = left.min(1000);
            if self.done[i].wait_timeout(slice) {
                return;
            }
            left -= slice;
            self.process();
            // Completed, or taken back by `cancel` or `close`.
            if self.pending.lock().slots[i].cid.is_none() {
                return;
            }
        }
    }

    /// Waits for the pending command by polling the completion queue every millisecond.
    fn poll_wait(&self, i: usize, timeout_ms: u32) {
        for _ in 0..timeout_ms.max(1) {
            self.process();
            if self.pending.lock().slots[i].cid.is_none() {
                return;
            }
            self.done[i].wait_timeout(1);
        }
    }
}
