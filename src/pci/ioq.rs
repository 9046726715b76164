// SPDX-License-Identifier: GPL-2.0

//! An I/O queue pair: the submission/completion rings, the per-tag list pages, and the
//! completion side that turns device completions back into block requests; and what the
//! queues, recovery and the block operations share: the `NvmeBlk` marker and each
//! request's `RqState`.

use crate::{
    fault::FaultsRef,
    kernel_ext::{
        block::mq::{CompletionBatch, QueueTags, Tags},
        dma_pool::{DmaPool, PoolBlock},
        irq::IrqContext,
    },
    queue::{Queue, ShadowDoorbells},
    regs::Regs,
    spec::{
        command::{io_cid, Command},
        completion::{Completion, Status},
        quirks::Quirks,
    },
};
// Per-request state: plain loads and stores (see kernel_ext::block::mq::request on why not LKMM atomics).
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use kernel::{
    device::Bound,
    pci,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc,
    },
};

/// The block layer's side of the driver (its `Operations`, in `blk.rs`): the tag set's and
/// the disks' type.
pub(crate) struct NvmeBlk;

/// In [`RqState`]'s status word: the host took the command back (a reset, a dead
/// controller) instead of the device completing it (C's `NVME_REQ_CANCELLED`). In the same
/// word as the status, so the store that clears one at issue clears both.
const CANCELLED: u32 = 1 << 16;

/// Per-request driver state, in the request's private data.
pub(crate) struct RqState {
    pub(crate) generation: AtomicU32,
    /// The NVMe status (low 16 bits) and [`CANCELLED`].
    pub(crate) status: AtomicU32,
    pub(crate) result: AtomicU32,
    /// Completion dword 1: the upper half of a 64-bit result (Zone Append's LBA).
    pub(crate) result_hi: AtomicU32,
    pub(crate) retries: AtomicU32,
    /// An Abort was sent for this command after its first timeout.
    pub(crate) aborted: AtomicBool,
    /// When its data first failed to map (monotonic nanoseconds; 0: it did not).
    pub(crate) map_failed_at: AtomicU64,
    /// The pool of the list parked in its tag's slot while it is in flight (`LIST_NONE`:
    /// none), so that completions of requests without one skip the pools.
    list: AtomicU8,
    /// The command of a passthrough request (`REQ_OP_DRV_*`), set by the ioctl: its dwords
    /// in pairs (the lower one in the low half), half the stores and loads of one each.
    pub(crate) passthru: [AtomicU64; 8],
}

impl RqState {
    pub(crate) fn new() -> Self {
        RqState {
            generation: AtomicU32::new(0),
            status: AtomicU32::new(0),
            result: AtomicU32::new(0),
            result_hi: AtomicU32::new(0),
            retries: AtomicU32::new(0),
            aborted: AtomicBool::new(false),
            map_failed_at: AtomicU64::new(0),
            list: AtomicU8::new(LIST_NONE),
            passthru: [const { AtomicU64::new(0) }; 8],
        }
    }

    pub(crate) fn generation(&self) -> u32 {
        self.generation.load(Ordering::Relaxed)
    }

    /// Marks the command as aborted once; false if it already was.
    pub(crate) fn mark_aborted(&self) -> bool {
        !self.aborted.swap(true, Ordering::Relaxed)
    }

    /// The abort could not be sent after all.
    pub(crate) fn clear_aborted(&self) {
        self.aborted.store(false, Ordering::Relaxed);
    }

    /// Records the device's completion (from the interrupt handler).
    #[inline]
    pub(crate) fn set_completion(&self, status: Status, result: u32, result_hi: u32) {
        self.store(u32::from(status.0), result, result_hi);
    }

    /// Records that the host took the command back with `status`, the device never having
    /// completed it.
    pub(crate) fn set_cancelled(&self, status: Status) {
        self.store(u32::from(status.0) | CANCELLED, 0, 0);
    }

    #[inline]
    fn store(&self, status_word: u32, result: u32, result_hi: u32) {
        self.status.store(status_word, Ordering::Relaxed);
        self.result.store(result, Ordering::Relaxed);
        self.result_hi.store(result_hi, Ordering::Relaxed);
    }

    pub(crate) fn status(&self) -> Status {
        Status(self.status.load(Ordering::Relaxed) as u16)
    }

    /// Taken back by the host ([`Self::set_cancelled`]) since it was last issued.
    pub(crate) fn cancelled(&self) -> bool {
        self.status.load(Ordering::Relaxed) & CANCELLED != 0
    }

    /// Completion dwords 0 and 1: the command's result (a 64-bit one for some).
    pub(crate) fn result(&self) -> u64 {
        u64::from(self.result_hi.load(Ordering::Relaxed)) << 32
            | u64::from(self.result.load(Ordering::Relaxed))
    }

    /// Sets the command a passthrough request carries (before it is issued), and clears
    /// what the tag's previous command left (as C's `nvme_clear_nvme_request`): a request
    /// that fails before it reaches the device ends with no NVMe status and no result.
    pub(crate) fn set_passthru(&self, cmd: &Command) {
        self.set_completion(Status(0), 0, 0);
        for (d, v) in self.passthru.iter().zip(cmd.dw.chunks_exact(2)) {
            d.store(u64::from(v[0]) | u64::from(v[1]) << 32, Ordering::Relaxed);
        }
    }

    pub(crate) fn passthru(&self) -> Command {
        let mut c = Command::default();
        for (v, d) in c.dw.chunks_exact_mut(2).zip(&self.passthru) {
            let pair = d.load(Ordering::Relaxed);
            v[0] = pair as u32;
            v[1] = (pair >> 32) as u32;
        }
        c
    }
}

/// Entries of a list page: a PRP list (512 addresses), 256 SGL descriptors or 256 Dataset
/// Management ranges.
pub(crate) const LIST_ENTRIES: usize = 512;

/// Entries of a small list, from its own pool: 32 PRP entries (a 128 KiB transfer), 16 SGL
/// descriptors or 16 ranges, as C's small descriptor pool. Most lists are small, and sixteen
/// of them share a page.
pub(crate) const SMALL_LIST_ENTRIES: usize = 32;

/// Which pool the list of a request in flight came from ([`RqState::list`]).
const LIST_NONE: u8 = 0;
const LIST_SMALL: u8 = 1;
const LIST_PAGE: u8 = 2;

/// A list taken for a request, filled before it is handed to the device
/// ([`IoQueue::park_list`]).
pub(crate) struct List<'q> {
    block: PoolBlock<'q, 'q>,
    kind: u8,
}

impl List<'_> {
    /// Its bus address, for the command.
    #[inline]
    pub(crate) fn dma(&self) -> u64 {
        self.block.dma_handle()
    }

    /// How many 64-bit entries it holds.
    #[inline]
    pub(crate) fn entries(&self) -> usize {
        self.block.entries()
    }

    /// Writes 64-bit entry `index`.
    #[inline]
    pub(crate) fn put(&self, index: usize, value: u64) -> Result {
        self.block.put(index, value)
    }
}

/// Log at most this many bad completions per queue; count the rest.
const BAD_CQE_LOG_LIMIT: u32 = 10;

/// One I/O queue pair.
pub(crate) struct IoQueue<'b> {
    pub(crate) queue: Arc<Queue<'b>>,
    pdev: &'b pci::Device<Bound>,
    /// The tags of the hardware queue this serves, set when blk-mq initializes it.
    tags: QueueTags<NvmeBlk>,
    /// PRP lists, SGL segments and range lists, taken per request only when its transfer
    /// needs one (as C's descriptor pools), parked in the slot of its tag until it completes:
    /// small lists, and pages.
    small_lists: DmaPool<'b>,
    page_lists: DmaPool<'b>,
    /// Completions that named no request in flight (logged, then counted).
    bad_completions: Atomic<u32>,
    /// Interrupt vector its completion queue signals.
    vector: u16,
    /// No interrupt: completions are reaped by blk-mq's poll (io_uring IOPOLL).
    polled: bool,
    /// The controller is dead: fail requests instead of submitting them.
    dead: AtomicBool,
    /// Faults tests inject (the controller's, shared by its queues).
    pub(crate) faults: FaultsRef,
}

impl<'b> IoQueue<'b> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        pdev: &'b pci::Device<Bound>,
        regs: Arc<Regs<'b>>,
        qid: u16,
        depth: u16,
        vector: Option<u16>,
        shadow: Option<Arc<ShadowDoorbells>>,
        faults: FaultsRef,
        quirks: Quirks,
        sq_in_cmb: bool,
    ) -> Result<Arc<Self>> {
        let cmb = sq_in_cmb.then_some(pdev);
        let queue = Queue::new(pdev.as_ref(), regs, qid, depth, shadow, cmb)?;
        let dev = pdev.as_ref();
        let small = SMALL_LIST_ENTRIES * 8;
        // Some controllers read small lists only at 512-byte alignment (C's
        // `NVME_QUIRK_DMAPOOL_ALIGN_512`).
        let small_align = if quirks.has(Quirks::DMAPOOL_ALIGN_512) {
            512
        } else {
            small
        };
        let page = LIST_ENTRIES * 8;
        let slots = usize::from(depth);
        Ok(Arc::new(
            Self {
                queue,
                pdev,
                tags: QueueTags::new(),
                small_lists: DmaPool::new(dev, c"rnvme list small", small, small_align, slots)?,
                page_lists: DmaPool::new(dev, c"rnvme list page", page, page, slots)?,
                bad_completions: Atomic::new(0),
                vector: vector.unwrap_or(0),
                polled: vector.is_none(),
                dead: AtomicBool::new(false),
                faults,
            },
            GFP_KERNEL,
        )?)
    }

    pub(crate) fn set_tags(&self, tags: Tags<NvmeBlk>) {
        // The tag set is created once per controller; a second call (another namespace's
        // request queue sharing it) brings the same tags.
        self.tags.set(tags);
    }

    pub(crate) fn vector(&self) -> u16 {
        self.vector
    }

    pub(crate) fn polled(&self) -> bool {
        self.polled
    }

    pub(crate) fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Relaxed)
    }

    pub(crate) fn set_dead(&self) {
        self.dead.store(true, Ordering::Relaxed);
    }

    /// A list of at least `entries` 64-bit entries, from the small pool when it fits;
    /// `None` when none can be had now (blk-mq tries the request again once others complete),
    /// `EINVAL` when no list holds that many.
    #[inline]
    pub(crate) fn take_list(&self, entries: usize) -> Result<Option<List<'_>>> {
        let (pool, kind) = if entries <= SMALL_LIST_ENTRIES {
            (&self.small_lists, LIST_SMALL)
        } else if entries <= LIST_ENTRIES {
            (&self.page_lists, LIST_PAGE)
        } else {
            return Err(EINVAL);
        };
        Ok(pool.alloc_atomic().map(|block| List { block, kind }))
    }

    /// Keeps a filled `list` for the request of `tag` (its state `st`) until
    /// [`Self::release_list`]: the device reads it while the command is in flight.
    #[inline]
    pub(crate) fn park_list(&self, tag: u32, st: &RqState, list: List<'_>) -> Result {
        let pool = if list.kind == LIST_SMALL {
            &self.small_lists
        } else {
            &self.page_lists
        };
        pool.park(tag as usize, list.block)?;
        st.list.store(list.kind, Ordering::Relaxed);
        Ok(())
    }

    /// Gives back the list of the request of `tag` (its state `st`), if it has one: its
    /// command is done (completed, or never issued).
    #[inline]
    pub(crate) fn release_list(&self, tag: u32, st: &RqState) {
        match st.list.swap(LIST_NONE, Ordering::Relaxed) {
            LIST_NONE => {}
            LIST_SMALL => self.small_lists.release(tag as usize),
            _ => self.page_lists.release(tag as usize),
        }
    }

    /// Consumes new completions from the queue's interrupt handler: each valid one completes
    /// its request. Successful ones are ended together at the end.
    #[inline]
    pub(crate) fn process_in_handler(&self, ctx: &IrqContext) -> u32 {
        let mut batch = CompletionBatch::new();
        self.queue
            .reap_in_handler(ctx, |cqe| self.complete_one(cqe, &mut batch))
    }

    /// As the interrupt handler does, with the queue's interrupt disabled meanwhile: for a
    /// missed interrupt and error recovery. May sleep.
    pub(crate) fn process(&self) -> u32 {
        let mut batch = CompletionBatch::new();
        self.queue
            .reap_irq_disabled(|cqe| self.complete_one(cqe, &mut batch))
    }

    /// As the interrupt handler does, for a polled queue (blk-mq's poll). Any context.
    pub(crate) fn poll(&self) -> u32 {
        let mut batch = CompletionBatch::new();
        self.queue
            .reap_unowned(|cqe| self.complete_one(cqe, &mut batch))
    }

    #[inline(always)]
    fn complete_one(&self, cqe: Completion, batch: &mut CompletionBatch<NvmeBlk>) {
        let (tag, generation) = io_cid::decode(cqe.cid);
        let rq = self.tags.in_flight(tag);
        // Unless error recovery took the command back first.
        let claimed = rq
            .filter(|rq| io_cid::current(rq.data().generation(), generation))
            .and_then(|rq| rq.try_claim());
        match claimed {
            Some(rq) => {
                let status = cqe.status();
                rq.data().set_completion(status, cqe.result, cqe.dw1);
                if status.is_success() {
                    rq.complete_batched(batch);
                } else {
                    self.queue.stats.error_locked();
                    rq.complete();
                }
            }
            None => {
                let n = self.bad_completions.fetch_add(1, Relaxed);
                if n < BAD_CQE_LOG_LIMIT {
                    dev_warn!(
                        self.pdev.as_ref(),
                        "queue {}: ignoring completion with command id {:#x} (no such request in flight)\n",
                        self.queue.qid(),
                        cqe.cid
                    );
                }
            }
        }
    }
}
