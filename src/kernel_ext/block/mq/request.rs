// SPDX-License-Identifier: GPL-2.0

//! A block layer request as the driver sees it between `queue_rq` and its end (upstream:
//! `kernel::block::mq::request`).

use super::{dma_map::Mapping, BlkStatus, Operations};
use core::{
    cell::Cell,
    ffi::c_void,
    marker::PhantomData,
    // Per-request state is written by one CPU at a time, handed over by blk-mq's own
    // ordering; core's atomics compile to plain loads and stores, where the LKMM ones go
    // through out-of-line C helpers (measured in docs/history.md).
    ops::Deref,
    sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed},
};
use kernel::{
    bindings,
    device::{Bound, Device},
    prelude::*,
    types::Opaque,
};

/// `REQ_OP_MASK` (include/linux/blk_types.h): the operation is the low bits of `cmd_flags`.
const REQ_OP_MASK: u32 = (1 << bindings::REQ_OP_BITS) - 1;
/// `RQF_DONTPREP`: the request was prepared by the driver once; blk-mq clears it when the
/// request is reused. (The `RQF_*` masks are `#define`s over an enum of bit numbers, which
/// bindgen only sees as the bit numbers.)
const RQF_DONTPREP: u32 = 1 << bindings::rqf_flags___RQF_DONTPREP;

/// [`Pdu::claim`]: not started in this dispatch, nobody may claim the request.
pub(super) const CLAIM_CLOSED: u8 = 0;
/// [`Pdu::claim`]: started, its completion not claimed yet.
const CLAIM_OPEN: u8 = 1;
/// [`Pdu::claim`]: a [`Claimed`] was handed out.
const CLAIM_TAKEN: u8 = 2;

/// A request's operation. Upstream candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReqOp {
    Read,
    Write,
    Flush,
    Discard,
    WriteZeroes,
    /// A driver-private command from user space (passthrough ioctl): data from the device.
    DrvIn,
    /// A driver-private command from user space: data to the device.
    DrvOut,
    /// A write at a zone's write pointer, wherever it is: the device says where the data
    /// went ([`Owned::set_sector`]).
    ZoneAppend,
    ZoneReset,
    ZoneResetAll,
    ZoneOpen,
    ZoneClose,
    ZoneFinish,
    Other(u32),
}

/// Driver-private data blk-mq allocates behind every `struct request` (`cmd_size`).
#[repr(C)]
pub(super) struct Pdu<T: Operations> {
    /// Scatterlist entries filled by `blk_rq_map_sg` (0: no scatterlist mapped).
    pub(super) nents: AtomicU32,
    /// A single-segment request mapped without the scatterlist: its bus address and length
    /// (length 0: not mapped this way).
    pub(super) single_addr: AtomicU64,
    pub(super) single_len: AtomicU32,
    /// Entries holding DMA segments after `dma_map_sg`.
    pub(super) mapped: AtomicU32,
    /// Who may complete the request in this dispatch: [`CLAIM_CLOSED`] until
    /// [`Request::start`] opens it, then [`CLAIM_TAKEN`] once [`Request::try_claim`] won it.
    pub(super) claim: AtomicU8,
    /// The metadata scatterlist entry is DMA-mapped (`Request::map_metadata`).
    pub(super) meta_mapped: AtomicU32,
    /// The request's metadata: one segment.
    pub(super) meta_sg: Opaque<bindings::scatterlist>,
    pub(super) drv: T::Rq,
    /// The scatterlist of a request of more than one segment, allocated when it is mapped
    /// and freed when it is unmapped (null: none), and its capacity: most requests are one
    /// segment and need none, so none is set aside per request.
    pub(super) sg: AtomicPtr<bindings::scatterlist>,
    pub(super) sg_cap: AtomicU32,
}

/// `blk_mq_rq_to_pdu`, a static inline (its Rust helper is an out-of-line call on the
/// I/O path): the driver's data starts right after `struct request`.
pub(super) fn rq_to_pdu(rq: *mut bindings::request) -> *mut c_void {
    rq.wrapping_add(1).cast()
}

/// A block layer request, seen by the driver between `queue_rq` and its end. Upstream:
/// `kernel::block::mq::Request`, here lent for one callback (see the module documentation).
///
/// # Invariants
///
/// The request belongs to a tag set created by [`super::TagSet::new`] for `T`, so blk-mq
/// allocated a [`Pdu<T>`] behind it, initialized by `init_request`.
#[repr(transparent)]
pub(crate) struct Request<T: Operations>(Opaque<bindings::request>, PhantomData<T>);

impl<T: Operations> Request<T> {
    /// # Safety
    ///
    /// `ptr` points to a live request of a tag set created by [`TagSet::new`] for `T`.
    pub(super) unsafe fn from_raw<'r>(ptr: *mut bindings::request) -> &'r Self {
        // INVARIANT: the caller passes a request of a tag set for `T`.
        // SAFETY: `Request` is a transparent wrapper of `struct request`.
        unsafe { &*ptr.cast() }
    }

    pub(in crate::kernel_ext::block) fn raw(&self) -> *mut bindings::request {
        self.0.get()
    }

    pub(super) fn pdu(&self) -> &Pdu<T> {
        // SAFETY: blk-mq allocates `cmd_size = size_of::<Pdu<T>>()` bytes right behind each
        // request of our tag set, initialized by `init_request` (type invariant).
        unsafe { &*rq_to_pdu(self.raw()).cast::<Pdu<T>>() }
    }

    /// The driver's state for this request. Upstream candidate.
    pub(crate) fn data(&self) -> &T::Rq {
        &self.pdu().drv
    }

    pub(super) fn cmd_flags(&self) -> u32 {
        // SAFETY: `cmd_flags` is set before the request reaches the driver and is constant
        // while the driver owns it.
        unsafe { (*self.raw()).cmd_flags }
    }

    /// Upstream candidate.
    pub(crate) fn op(&self) -> ReqOp {
        match self.cmd_flags() & REQ_OP_MASK {
            bindings::req_op_REQ_OP_READ => ReqOp::Read,
            bindings::req_op_REQ_OP_WRITE => ReqOp::Write,
            bindings::req_op_REQ_OP_FLUSH => ReqOp::Flush,
            bindings::req_op_REQ_OP_DISCARD => ReqOp::Discard,
            bindings::req_op_REQ_OP_WRITE_ZEROES => ReqOp::WriteZeroes,
            bindings::req_op_REQ_OP_DRV_IN => ReqOp::DrvIn,
            bindings::req_op_REQ_OP_DRV_OUT => ReqOp::DrvOut,
            bindings::req_op_REQ_OP_ZONE_APPEND => ReqOp::ZoneAppend,
            bindings::req_op_REQ_OP_ZONE_RESET => ReqOp::ZoneReset,
            bindings::req_op_REQ_OP_ZONE_RESET_ALL => ReqOp::ZoneResetAll,
            bindings::req_op_REQ_OP_ZONE_OPEN => ReqOp::ZoneOpen,
            bindings::req_op_REQ_OP_ZONE_CLOSE => ReqOp::ZoneClose,
            bindings::req_op_REQ_OP_ZONE_FINISH => ReqOp::ZoneFinish,
            other => ReqOp::Other(other),
        }
    }

    /// The submitter asked for no retries (`REQ_FAILFAST_*`: readahead, multipath), so a
    /// failure ends the request at once, as `blk_noretry_request`. Upstream candidate.
    pub(crate) fn failfast(&self) -> bool {
        const FAILFAST: u32 = (1 << bindings::req_flag_bits___REQ_FAILFAST_DEV)
            | (1 << bindings::req_flag_bits___REQ_FAILFAST_TRANSPORT)
            | (1 << bindings::req_flag_bits___REQ_FAILFAST_DRIVER);
        self.cmd_flags() & FAILFAST != 0
    }

    /// Force Unit Access: the write must be on stable media when it completes. Upstream
    /// candidate.
    pub(crate) fn fua(&self) -> bool {
        self.cmd_flags() & (1 << bindings::req_flag_bits___REQ_FUA) != 0
    }

    /// First sector (512 bytes) of the request. Upstream candidate.
    pub(crate) fn sector(&self) -> u64 {
        // SAFETY: constant while the driver owns the request.
        unsafe { (*self.raw()).__sector }
    }

    /// Length in bytes. Upstream candidate.
    pub(crate) fn bytes(&self) -> u32 {
        // SAFETY: constant while the driver owns the request.
        unsafe { (*self.raw()).__data_len }
    }

    /// The request's tag (unique within its hardware queue). Upstream candidate.
    pub(crate) fn tag(&self) -> u32 {
        // SAFETY: constant while the driver owns the request.
        unsafe { (*self.raw()).tag as u32 }
    }

    /// Per-disk data of the disk this request is for, lent for as long as the request is.
    /// Upstream candidate.
    pub(crate) fn disk(&self) -> &T::DiskData<'_> {
        // `DiskData` is covariant (`Operations::shorten_disk`): a `DiskData<'a>` whose `'a`
        // outlives the disk, hence this borrow, is a valid `DiskData<'_>`.
        // SAFETY: `q->queuedata` is `GenDisk::new`'s data, alive until all requests ended.
        unsafe { &*(*(*self.raw()).q).queuedata.cast::<T::DiskData<'_>>() }
    }

    /// Claims the completion of the started request: `None` if somebody already did (an
    /// interrupt handler and error recovery taking commands back race for it). The winner
    /// alone completes it, once: what upstream's reference count (2 -> 0 on completion)
    /// settles, in one atomic swap. Upstream candidate.
    pub(crate) fn try_claim(&self) -> Option<Claimed<'_, T>> {
        if self.pdu().claim.swap(CLAIM_TAKEN, Relaxed) != CLAIM_OPEN {
            return None;
        }
        // INVARIANT: the swap above found the claim open: this is its only winner.
        Some(Claimed(self))
    }

    /// After `queue_rq` returned `status` to blk-mq: the status blk-mq may end or requeue the
    /// request with, or `Ok` if it was started and its completion claimed meanwhile (its
    /// claimer ends it). The claim is closed again: blk-mq owns the request.
    pub(super) fn refuse(&self, status: BlkStatus) -> BlkStatus {
        if status == BlkStatus::Ok {
            return status;
        }
        let claim = &self.pdu().claim;
        match claim.compare_exchange(CLAIM_OPEN, CLAIM_CLOSED, Relaxed, Relaxed) {
            Err(CLAIM_TAKEN) => BlkStatus::Ok,
            // Started and unclaimed, or never started in this dispatch.
            _ => status,
        }
    }

    /// Whether the request was started (`blk_mq_request_started`). Upstream candidate.
    pub(super) fn started(&self) -> bool {
        // SAFETY: `state` of a live request; volatile as blk-mq's `READ_ONCE`, though the
        // callers (after `refuse` closed the claim) read it when nobody else changes it.
        let state = unsafe { core::ptr::read_volatile(&raw const (*self.raw()).state) };
        state != bindings::mq_rq_state_MQ_RQ_IDLE
    }

    /// Calls `f(first_sector, sectors)` for each bio: the ranges of a (merged) discard.
    /// Upstream candidate.
    pub(crate) fn for_each_range(&self, mut f: impl FnMut(u64, u32)) {
        // SAFETY: the bio chain of a request owned by the driver is stable.
        let mut bio = unsafe { (*self.raw()).bio };
        while !bio.is_null() {
            // SAFETY: `bio` is a live bio of this request.
            let (sector, size, next) = unsafe {
                (
                    (*bio).bi_iter.bi_sector,
                    (*bio).bi_iter.bi_size,
                    (*bio).bi_next,
                )
            };
            f(sector, size >> 9);
            bio = next;
        }
    }

    /// Whether the request is in flight: issued to the driver and not completed yet. Upstream
    /// candidate.
    pub(crate) fn in_flight(&self) -> bool {
        // SAFETY: `state` is updated atomically by blk-mq; reading it is always allowed.
        let state = unsafe { core::ptr::read_volatile(&raw const (*self.raw()).state) };
        state == bindings::mq_rq_state_MQ_RQ_IN_FLIGHT
    }
}

/// A request blk-mq handed to [`Operations::queue_rq`] (alone, or in a `queue_rqs` list), lent
/// for that call: only through it may the driver prepare, map and start the request.
/// Upstream: the `ARef<Request>` that `Operations::queue_rq` receives.
///
/// # Invariants
///
/// blk-mq dispatched the request to `queue_rq` or `queue_rqs`, which has not returned;
/// `started` is whether [`Self::start`] was called since.
pub(crate) struct Dispatched<'r, T: Operations> {
    rq: &'r Request<T>,
    started: Cell<bool>,
}

impl<T: Operations> Deref for Dispatched<'_, T> {
    type Target = Request<T>;

    fn deref(&self) -> &Request<T> {
        self.rq
    }
}

impl<'r, T: Operations> Dispatched<'r, T> {
    /// # Safety
    ///
    /// `rq` was handed to the driver's `queue_rq` or `queue_rqs`, which runs until the token
    /// is gone.
    pub(super) unsafe fn new(rq: &'r Request<T>) -> Self {
        // INVARIANT: see the function's safety section; not started yet.
        Self {
            rq,
            started: Cell::new(false),
        }
    }

    /// The request, for as long as the call it was lent to (what it leads to, such as its
    /// disk, outlives a borrow of the token).
    pub(crate) fn request(&self) -> &'r Request<T> {
        self.rq
    }

    /// True the first time the driver sees this request, false when it comes back after
    /// [`Owned::requeue_after`]: lets per-request state such as a retry count start fresh.
    /// Upstream candidate.
    pub(crate) fn first_issue(&self) -> bool {
        // SAFETY: `rq_flags` of a request in `queue_rq` is only changed by the driver (type
        // invariant).
        unsafe {
            let flags = &raw mut (*self.raw()).rq_flags;
            if *flags & RQF_DONTPREP != 0 {
                return false;
            }
            *flags |= RQF_DONTPREP;
        }
        true
    }

    /// Marks the request as started (issued to the device), arming its timeout, and opens
    /// its completion to one [`Request::try_claim`]. Upstream: `Request::start_unchecked`.
    pub(crate) fn start(&self) {
        // INVARIANT: started from here on.
        self.started.set(true);
        // Before the request is seen in flight (by a tag lookup or an iteration).
        self.pdu().claim.store(CLAIM_OPEN, Relaxed);
        // SAFETY: the request is in `queue_rq` (type invariant).
        unsafe { bindings::blk_mq_start_request(self.raw()) };
    }

    /// Maps the request's data for DMA by `dev`; see [`Request::map_data`]. Upstream
    /// candidate.
    pub(crate) fn map_data(&self, dev: &Device<Bound>) -> Result<Mapping> {
        self.rq.map_data(dev)
    }

    /// The DMA segments (bus address, length) of the data [`Self::map_data`] mapped.
    /// Borrowed mutably, so that nothing unmaps the data (which frees its scatterlist) while
    /// they are read; none once the request is started, when its completion on another CPU
    /// may unmap it. Upstream candidate.
    pub(crate) fn segments(&mut self) -> impl Iterator<Item = (u64, u32)> + '_ {
        let n = if self.started.get() { 0 } else { usize::MAX };
        self.rq.segments().take(n)
    }

    /// Maps the request's metadata for DMA by `dev` (after its data); see
    /// [`Request::map_metadata`]. Upstream candidate.
    pub(crate) fn map_metadata(&self, dev: &Device<Bound>) -> Result<(u64, u32)> {
        self.rq.map_metadata(dev)
    }

    /// Undoes [`Self::map_data`] (a command that could not be submitted). Upstream
    /// candidate.
    pub(crate) fn unmap_data(&self, dev: &Device<Bound>) {
        self.rq.unmap_data(dev);
    }
}

/// A started request whose completion the holder claimed ([`Request::try_claim`]): only it
/// may hand the request to blk-mq's completion. Upstream candidate.
///
/// # Invariants
///
/// The request's claim was won by the [`Request::try_claim`] that made this, and the request
/// was not completed since.
#[must_use = "a claimed request must be completed"]
pub(crate) struct Claimed<'r, T: Operations>(&'r Request<T>);

impl<T: Operations> Deref for Claimed<'_, T> {
    type Target = Request<T>;

    fn deref(&self) -> &Request<T> {
        self.0
    }
}

impl<'r, T: Operations> Claimed<'r, T> {
    /// Hands the request to blk-mq's completion machinery, which calls
    /// [`Operations::complete`] (on the submitting CPU's softirq when that is cheaper). As
    /// upstream's `Request::complete`.
    pub(crate) fn complete(self) {
        // SAFETY: the request is in flight and its claim is ours (type invariant): nobody
        // else completes it.
        unsafe { bindings::blk_mq_complete_request(self.raw()) };
    }

    /// The request, for [`super::CompletionBatch`].
    pub(super) fn request(&self) -> &'r Request<T> {
        self.0
    }
}

/// A request handed to [`Operations::complete`]: the driver ends or requeues it, once.
/// Upstream: the `ARef<Request>` that `Operations::complete` receives.
///
/// # Invariants
///
/// blk-mq completed the request and handed it to the driver, which has not ended or requeued
/// it since.
#[must_use = "a completed request must be ended or requeued"]
pub(crate) struct Owned<'r, T: Operations>(&'r Request<T>);

impl<T: Operations> Deref for Owned<'_, T> {
    type Target = Request<T>;

    fn deref(&self) -> &Request<T> {
        self.0
    }
}

impl<'r, T: Operations> Owned<'r, T> {
    /// # Safety
    ///
    /// `rq` was completed and blk-mq hands it to the driver to end (its `complete` callback,
    /// or a claim completed on this CPU outside a batch); nobody else ends it.
    pub(super) unsafe fn new(rq: &'r Request<T>) -> Self {
        // INVARIANT: see the function's safety section.
        Self(rq)
    }

    /// Undoes the DMA mapping `queue_rq` made for `dev` ([`Dispatched::map_data`]): the
    /// device is done with the data. Upstream candidate.
    pub(crate) fn unmap_data(&self, dev: &Device<Bound>) {
        self.0.unmap_data(dev);
    }

    /// The driver's data of the hardware queue the request was issued on: what
    /// [`Operations::queue_rq`] was given for it. Upstream candidate.
    pub(crate) fn queue(&self) -> &T::Queue<'_> {
        // SAFETY: blk-mq completed the request (type invariant), which keeps the hardware
        // context it was issued on; `init_hctx` stored there a pointer to a queue in the set
        // data, which lives as long as the tag set, which outlives its requests.
        unsafe { &*(*(*self.raw()).mq_hctx).driver_data.cast::<T::Queue<'_>>() }
    }

    /// Sets where a [`ReqOp::ZoneAppend`] wrote its data (512-byte sectors), which the block
    /// layer hands to the submitter when the request ends (C: `nvme_end_req_zoned`). Upstream
    /// candidate.
    pub(crate) fn set_sector(&self, sector: u64) {
        // SAFETY: the request is the driver's until it ends it (type invariant); the block
        // layer reads the position only when it is ended.
        unsafe { (*self.raw()).__sector = sector };
    }

    /// Ends the request with `status`. Upstream: `Request::end_ok`, which only ends with
    /// success; upstream candidate.
    pub(crate) fn end(self, status: BlkStatus) {
        // SAFETY: the request is the driver's to end, once (type invariant; `self` is
        // consumed).
        unsafe { bindings::blk_mq_end_request(self.raw(), status as bindings::blk_status_t) };
    }

    /// Puts the request back on the queue to be issued again (a retry), after `ms`
    /// milliseconds (`blk_mq_delay_kick_requeue_list`); at once if `ms` is 0. Upstream
    /// candidate.
    pub(crate) fn requeue_after(self, ms: u32) {
        let rq = self.raw();
        // SAFETY: the request is the driver's to end or requeue, once (type invariant;
        // `self` is consumed); its queue outlives it.
        unsafe {
            if ms == 0 {
                bindings::blk_mq_requeue_request(rq, true);
                return;
            }
            let q = (*rq).q;
            bindings::blk_mq_requeue_request(rq, false);
            bindings::blk_mq_delay_kick_requeue_list(q, ms as usize);
        }
    }
}
