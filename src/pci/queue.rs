// SPDX-License-Identifier: GPL-2.0

//! One submission/completion queue pair in DMA-coherent memory.
//!
//! Used by the admin queue and the I/O queues alike. Submission copies a 64-byte command into
//! the SQ under the SQ lock and rings the tail doorbell; completion walks the CQ while the
//! phase tag matches, hands each entry to a callback, and writes the CQ head doorbell once
//! for the whole batch.
//!
//! Callers bound the number of commands in flight below the queue depth (blk-mq's tag depth,
//! the admin command slots), so the SQ can never overflow and needs no head tracking here.

use crate::{
    kernel_ext::{
        barrier::{dma_rmb, dma_wmb, mb},
        dma_ring::DmaRing,
        irq::{IrqCell, IrqContext, IrqKey},
        spinlock::{new_spinlock_direct, SpinLock},
    },
    regs::{Doorbells, Regs},
    spec::{
        command::Command,
        completion::Completion,
        regs::{shadow_len, shadow_need_event, shadow_sq_index},
    },
    stats::QueueStats,
};
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
use kernel::{
    device::{Bound, Device},
    pci,
    prelude::*,
    sync::Arc,
};

/// Entries [`Queue::reap_unowned_acked`] acknowledges at a time before handing them on (a
/// copy on the stack; the admin queue rarely has more outstanding).
const ACKED_BATCH: usize = 16;

/// The shadow doorbell and event index buffers of a controller (Doorbell Buffer Config).
///
/// With them, the driver posts each new SQ tail and CQ head in memory and writes the MMIO
/// doorbell only when the controller's event index says it is waiting for one. An emulated
/// controller polls the buffer while it is busy, so most MMIO writes (each a trap into the
/// hypervisor or emulator) go away.
///
/// # Invariants
///
/// `dbs` and `eis` have the same length: a slot [`Self::has_slot`] accepts is in both.
pub(crate) struct ShadowDoorbells {
    dbs: DmaRing<1>,
    eis: DmaRing<1>,
    stride: usize,
}

impl ShadowDoorbells {
    /// Buffers for queues 0..=`max_qid` with doorbell stride `stride` (bytes).
    pub(crate) fn new(dev: &Device<Bound>, max_qid: u16, stride: usize) -> Result<Arc<Self>> {
        let len = u16::try_from(shadow_len(max_qid, stride)).map_err(|_| EINVAL)?;
        // INVARIANT: both buffers have `len` entries.
        Ok(Arc::new(
            Self {
                dbs: DmaRing::new(dev, len)?,
                eis: DmaRing::new(dev, len)?,
                stride,
            },
            GFP_KERNEL,
        )?)
    }

    /// Bus addresses of the doorbell and event index buffers (page aligned).
    pub(crate) fn dma(&self) -> (u64, u64) {
        (self.dbs.dma_address(), self.eis.dma_address())
    }

    /// Zeroes both buffers, for a controller that is enabled again after a reset.
    pub(crate) fn clear(&self) {
        for i in 0..self.dbs.len() {
            self.dbs.write_dword::<0>(i, 0);
            self.eis.write_dword::<0>(i, 0);
        }
    }

    /// Whether slot `idx` (a dword index) is in the buffers.
    fn has_slot(&self, idx: usize) -> bool {
        idx < usize::from(self.dbs.len())
    }

    /// Posts `value` in doorbell `idx`; returns whether the MMIO doorbell must be written too.
    ///
    /// # Safety
    ///
    /// [`Self::has_slot`] accepts `idx`.
    #[inline(always)]
    unsafe fn update(&self, idx: u16, value: u16) -> bool {
        // The queue entries are written before the shadow doorbell that announces them.
        dma_wmb();
        // SAFETY: `idx` is below the length of `dbs` (the caller's guarantee), which is
        // also the length of `eis` (type invariant).
        let old = unsafe { self.dbs.read_dword_unchecked::<0>(idx) };
        // SAFETY: as above.
        unsafe { self.dbs.write_dword_unchecked::<0>(idx, u32::from(value)) };
        // The doorbell is written before the event index is read; the controller orders
        // its event index update before reading the doorbell.
        mb();
        // SAFETY: as above.
        let event = unsafe { self.eis.read_dword_unchecked::<0>(idx) };
        shadow_need_event(event as u16, value, old as u16)
    }
}

/// Where the host is in the submission queue.
struct SqState {
    tail: u16,
    /// The tail value last written to the doorbell.
    rung: u16,
}

/// Where the host is in the completion queue.
struct CqState {
    head: u16,
    /// The phase tag value that marks a new entry; flips each time the head wraps.
    phase: bool,
}

/// A queue pair.
#[pin_data]
pub(crate) struct Queue<'b> {
    qid: u16,
    depth: u16,
    regs: Arc<Regs<'b>>,
    db: Doorbells,
    /// Submission queue entries: sixteen dwords each.
    sq: DmaRing<16>,
    /// Completion queue entries: four dwords each.
    cq: DmaRing<4>,
    /// The controller's shadow doorbells, if it has them (I/O queues only, as the C driver).
    shadow: Option<Arc<ShadowDoorbells>>,
    /// The controller was given the shadow buffers (Doorbell Buffer Config succeeded).
    shadow_on: AtomicBool,
    /// This queue's SQ tail and CQ head slots in the shadow buffers.
    ///
    /// INVARIANT: if `shadow` is `Some`, its `has_slot` accepts both.
    shadow_slots: [u16; 2],
    /// A copy of the CQ head and phase (`phase << 16 | head`) for [`Self::cq_pending`],
    /// readable without the lock.
    cq_hint: AtomicU32,
    pub(crate) stats: Arc<QueueStats>,
    #[pin]
    sq_state: SpinLock<SqState>,
    /// Used without a lock by the interrupt handler bound to it (I/O queues); others
    /// disable that interrupt first, or find it unbound (admin and polled queues).
    #[pin]
    cq_state: IrqCell<CqState>,
}

impl<'b> Queue<'b> {
    /// Allocates a queue pair of `depth` entries for queue id `qid` (0 = admin), its
    /// submission queue in `cmb`'s peer-to-peer pool (the controller's memory buffer) if
    /// given and it has room, as C's `nvme_alloc_sq_cmds`.
    pub(crate) fn new(
        dev: &Device<Bound>,
        regs: Arc<Regs<'b>>,
        qid: u16,
        depth: u16,
        shadow: Option<Arc<ShadowDoorbells>>,
        cmb: Option<&pci::Device<Bound>>,
    ) -> Result<Arc<Self>> {
        if depth < 2 {
            return Err(EINVAL);
        }
        let db = regs.doorbells(qid)?;
        let shadow_slots = match &shadow {
            Some(s) => {
                let sq = shadow_sq_index(qid, s.stride);
                let cq = sq + s.stride / 4;
                if !s.has_slot(cq) {
                    return Err(EINVAL);
                }
                // INVARIANT: `sq <= cq`, both accepted by `has_slot`: below the buffers'
                // length, which is a `u16`.
                [sq as u16, cq as u16]
            }
            None => [0, 0],
        };
        // SAFETY: The ring goes with this queue, which borrows the binding (`'b`): it is
        // dropped before unbind releases the pool.
        let sq = match cmb.and_then(|pdev| unsafe { DmaRing::new_p2p(pdev, depth) }) {
            Some(sq) => sq,
            None => DmaRing::new(dev, depth)?,
        };
        let cq = DmaRing::new(dev, depth)?;
        Arc::pin_init(
            try_pin_init!(Self {
                qid,
                depth,
                regs,
                db,
                sq,
                cq,
                shadow,
                shadow_on: AtomicBool::new(false),
                shadow_slots,
                cq_hint: AtomicU32::new(1 << 16),
                stats: QueueStats::new()?,
                sq_state <- new_spinlock_direct!(SqState { tail: 0, rung: 0 }),
                cq_state <- IrqCell::new(CqState { head: 0, phase: true }),
            }),
            GFP_KERNEL,
        )
    }

    pub(crate) fn qid(&self) -> u16 {
        self.qid
    }

    pub(crate) fn depth(&self) -> u16 {
        self.depth
    }

    /// Whether the SQ ring is in the controller's memory buffer.
    pub(crate) fn sq_in_cmb(&self) -> bool {
        self.sq.is_p2p()
    }

    /// Bus address of the SQ ring, for ASQ or Create I/O SQ.
    pub(crate) fn sq_dma(&self) -> u64 {
        self.sq.dma_address()
    }

    /// Bus address of the CQ ring, for ACQ or Create I/O CQ.
    pub(crate) fn cq_dma(&self) -> u64 {
        self.cq.dma_address()
    }

    /// Copies `cmd` into the next SQ slot; rings the tail doorbell if `ring` (else a later
    /// [`Self::ring_sq`] does, once for a whole batch).
    #[inline]
    pub(crate) fn submit(&self, cmd: &Command, ring: bool) -> Result {
        let mut sq = self.sq_state.lock();
        if !self.sq.write(sq.tail, &cmd.dw) {
            return Err(EINVAL);
        }
        self.stats.submitted_locked();
        // `tail < depth <= u16::MAX`: the increment cannot wrap.
        let next = sq.tail.wrapping_add(1);
        sq.tail = if next == self.depth { 0 } else { next };
        if ring {
            self.ring_locked(&mut sq);
        }
        Ok(())
    }

    /// Ends a batch of commands submitted without ringing: writes the SQ tail doorbell if
    /// commands were added since it was last written.
    pub(crate) fn commit(&self) {
        let mut sq = self.sq_state.lock();
        self.stats.commit_locked();
        self.ring_locked(&mut sq);
    }

    /// Starts or stops using the shadow doorbells (after Doorbell Buffer Config, before a
    /// reset).
    pub(crate) fn set_shadow(&self, on: bool) {
        self.shadow_on.store(on && self.shadow.is_some(), Relaxed);
    }

    /// Whether doorbell `which` (0: SQ tail, 1: CQ head) needs an MMIO write for `value`,
    /// after posting it in the shadow buffer if shadow doorbells are on.
    #[inline(always)]
    fn need_mmio(&self, which: usize, value: u16) -> bool {
        match &self.shadow {
            // SAFETY: `has_slot` accepts this queue's slots in `s` (type invariant).
            Some(s) if self.shadow_on.load(Relaxed) => unsafe {
                s.update(self.shadow_slots[which], value)
            },
            _ => true,
        }
    }

    #[inline]
    fn ring_locked(&self, sq: &mut SqState) {
        if sq.rung != sq.tail {
            // The MMIO write orders after the entries' memory writes (writel is ordered
            // after prior stores to coherent memory).
            if self.need_mmio(0, sq.tail) {
                self.regs.ring(self.db.sq, sq.tail);
                self.stats.sq_doorbell_locked();
            }
            sq.rung = sq.tail;
        }
    }

    /// Returns the queue to its state at creation, for a controller that was disabled and is
    /// enabled again (which resets its own head and tail pointers to 0). The old completion
    /// entries are cleared: their phase tags would otherwise look new on the first pass.
    pub(crate) fn reset(&self) -> Result {
        self.set_shadow(false);
        {
            let mut sq = self.sq_state.lock();
            sq.tail = 0;
            sq.rung = 0;
        }
        self.cq_state.with_irq_disabled(|cq| {
            for i in 0..self.depth {
                self.cq.write_dword::<3>(i, 0);
            }
            cq.head = 0;
            cq.phase = true;
            self.cq_hint.store(1 << 16, Relaxed);
        });
        Ok(())
    }

    /// Gives the completion queue to the interrupt handler of registration `key` (or takes
    /// it back): from then on that handler reaps it without a lock. May sleep.
    pub(crate) fn bind_cq(&self, key: Option<&IrqKey>) {
        self.cq_state.bind(key);
    }

    /// Reads the entry at `head` if its phase tag says it is new.
    #[inline(always)]
    fn peek(&self, head: u16, phase: bool) -> Option<Completion> {
        let e = self.cq.read_if::<3>(head, |dw3| {
            if (dw3 & (1 << 16) != 0) != phase {
                return false;
            }
            // The rest of the entry may only be read after its phase tag was seen.
            dma_rmb();
            true
        })?;
        Some(Completion::from_dwords(e))
    }

    /// Whether a new completion is waiting, without taking the lock: lets a poller that
    /// finds nothing return at once. May be stale by the time the caller acts on it.
    pub(crate) fn cq_pending(&self) -> bool {
        let hint = self.cq_hint.load(Relaxed);
        let (head, phase) = ((hint & 0xffff) as u16, hint >> 16 != 0);
        self.peek(head, phase).is_some()
    }

    /// [`Self::reap`] from the interrupt handler that owns the completion queue (0 from any
    /// other).
    #[inline(always)]
    pub(crate) fn reap_in_handler(&self, ctx: &IrqContext, f: impl FnMut(Completion)) -> u32 {
        self.cq_state
            .with_handler(ctx, |st| self.reap::<false>(st, f, usize::MAX))
            .unwrap_or(0)
    }

    /// [`Self::reap`] in any context, for a completion queue no handler owns (admin and
    /// polled queues; 0 for another).
    pub(crate) fn reap_unowned(&self, f: impl FnMut(Completion)) -> u32 {
        self.cq_state
            .with_unowned(|st| self.reap::<true>(st, f, usize::MAX))
            .unwrap_or(0)
    }

    /// [`Self::reap_unowned`] for a queue whose completions let their waiters stop the
    /// controller (the admin queue): each batch's CQ head doorbell is written before its
    /// entries are handed to `f`. A waiter woken first could disable the controller before
    /// the write, with the entries unacknowledged, and a controller that resets with entries
    /// it believes unread may keep its INTx pin raised (QEMU's does, for good: an interrupt
    /// storm no handler claims). C's handler likewise rings before its batch completes.
    pub(crate) fn reap_unowned_acked(&self, mut f: impl FnMut(Completion)) -> u32 {
        self.cq_state
            .with_unowned(|st| {
                let mut total = 0;
                loop {
                    let mut batch = [Completion::default(); ACKED_BATCH];
                    let n = self.reap::<true>(
                        st,
                        {
                            let mut i = 0;
                            let batch = &mut batch;
                            move |cqe| {
                                batch[i] = cqe;
                                i += 1;
                            }
                        },
                        ACKED_BATCH,
                    );
                    batch[..n as usize].iter().for_each(|cqe| f(*cqe));
                    total += n;
                    if (n as usize) < ACKED_BATCH {
                        return total;
                    }
                }
            })
            .unwrap_or(0)
    }

    /// [`Self::reap`] with the owning handler's interrupt disabled (a missed interrupt,
    /// error recovery). May sleep.
    pub(crate) fn reap_irq_disabled(&self, f: impl FnMut(Completion)) -> u32 {
        self.cq_state
            .with_irq_disabled(|st| self.reap::<true>(st, f, usize::MAX))
    }

    /// Hands every new completion to `f` and writes the CQ head doorbell once at the end.
    /// Returns how many entries were consumed. With `HINT`, updates the copy of the head
    /// that [`Self::cq_pending`] reads (which only polled queues use; an interrupt handler
    /// skips it).
    #[inline(always)]
    fn reap<const HINT: bool>(
        &self,
        st: &mut CqState,
        mut f: impl FnMut(Completion),
        limit: usize,
    ) -> u32 {
        let mut n = 0;
        // `head` is always below `depth`, the ring's length, so `peek` only returns `None`
        // for an entry the controller has not posted yet.
        while (n as usize) < limit {
            let Some(cqe) = self.peek(st.head, st.phase) else {
                break;
            };
            // `head < depth <= u16::MAX`: the increment cannot wrap.
            st.head = st.head.wrapping_add(1);
            if st.head == self.depth {
                st.head = 0;
                st.phase = !st.phase;
            }
            n += 1u32;
            f(cqe);
        }
        if n > 0 {
            if HINT {
                self.cq_hint
                    .store(u32::from(st.phase) << 16 | u32::from(st.head), Relaxed);
            }
            let mmio = self.need_mmio(1, st.head);
            if mmio {
                self.regs.ring(self.db.cq, st.head);
            }
            self.stats.completed_locked(n, mmio);
        }
        n
    }
}
