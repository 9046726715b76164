// SPDX-License-Identifier: GPL-2.0

//! blk-mq glue: tag sets, disks, and the request accessors an NVMe driver needs.
//!
//! `kernel::block::mq` in 7.3 is rnull's minimal binding: no sector, length or operation
//! accessors, no tag lookup, no queue limits, no `commit_rqs`/`map_queues`/`complete`. This
//! module is modelled on it but gives the driver what a real device needs, while the driver
//! logic ([`BlkOps`] implementors) stays in safe Rust:
//!
//! - [`TagSet`] owns a `blk_mq_tag_set` and the driver's per-set data, which maps hardware
//!   queue indexes to the driver's queues (`hctx->driver_data`);
//! - [`Disk`] owns a `gendisk` and its per-disk data (`queue->queuedata`);
//! - [`Request`] reads a request's operation, position, length and flags, maps its data for
//!   DMA into a scatterlist kept in the request's private data (no allocation per I/O), and
//!   ends or completes it;
//! - [`Tags`] looks a command identifier's tag up, refusing tags that are out of range or
//!   belong to a request that is not in flight (a device must never make us touch a request
//!   we did not send).

use super::{device_raw, sync::MemallocNoio};
use core::{
    ffi::{c_int, c_uint, c_void},
    marker::PhantomData,
    ptr::NonNull,
    // Per-request state is written by one CPU at a time, handed over by blk-mq's own
    // ordering; core's atomics compile to plain loads and stores, where the LKMM ones go
    // through out-of-line C helpers (measured: ~100 instructions per I/O).
    sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed},
};
use kernel::{
    bindings,
    device::{Bound, Device},
    prelude::*,
    static_lock_class,
    types::Opaque,
};

/// Scatterlist entries kept per request: the most segments the queue limits allow.
pub(crate) const MAX_SEGMENTS: usize = 128;

/// `blk_status_t` values (include/linux/blk_types.h; `#define`s bindgen cannot see).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum BlkStatus {
    Ok = 0,
    NotSupp = 1,
    NoSpc = 3,
    Transport = 4,
    Target = 5,
    ResvConflict = 6,
    Medium = 7,
    Protection = 8,
    Resource = 9,
    IoErr = 10,
}

/// `BLK_FEAT_*` (include/linux/blkdev.h).
const BLK_FEAT_WRITE_CACHE: u32 = 1 << 0;
const BLK_FEAT_FUA: u32 = 1 << 1;
/// `REQ_OP_MASK` (include/linux/blk_types.h).
const REQ_OP_MASK: u32 = 0xff;
/// `RQF_DONTPREP` (include/linux/blk-mq.h: bit `__RQF_DONTPREP` = 3): the request was
/// prepared by the driver once; blk-mq clears it when the request is reused.
const RQF_DONTPREP: u32 = 1 << 3;
/// `RQF_SPECIAL_PAYLOAD` (bit `__RQF_SPECIAL_PAYLOAD`): the data is `special_vec`,
/// not the bios.
const RQF_SPECIAL_PAYLOAD: u32 = 1 << bindings::rqf_flags___RQF_SPECIAL_PAYLOAD;

/// A request's operation.
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
    Other(u32),
}

/// The driver side of a tag set.
///
/// `SetData`, `Queue` and `DiskData` may borrow from the bound device (lifetime `'a`); the
/// owner of the [`TagSet`] and [`Disk`]s keeps them inside that lifetime.
pub(crate) trait BlkOps: Sized + 'static {
    /// Per tag set: holds the hardware queues.
    type SetData<'a>: Sync;
    /// One hardware queue.
    type Queue<'a>: Sync;
    /// Per disk (namespace).
    type DiskData<'a>: Sync;
    /// Driver state in each request's private data; built once per request.
    type Rq: Sync;
    /// Per disk, owned by the `gendisk` itself: it lives until the last opener of the
    /// block device is gone, which can be after the disk was removed.
    type Private: Send + Sync + 'static;

    /// The queue serving hardware queue `index`.
    fn queue<'a>(set: &'a Self::SetData<'a>, index: u32) -> Option<&'a Self::Queue<'a>>;
    /// Called when blk-mq attaches `tags` to hardware queue `q`.
    fn init_queue(q: &Self::Queue<'_>, tags: Tags<Self>);
    /// Initial value of the driver state of a request.
    fn new_rq() -> Self::Rq;
    /// Issue `rq` on `q`. `last` is false when more requests follow in this batch and
    /// [`Self::commit_rqs`] will be called.
    fn queue_rq(q: &Self::Queue<'_>, rq: &Request<Self>, last: bool) -> BlkStatus;
    /// End of a batch whose last request did not have `last` set.
    fn commit_rqs(q: &Self::Queue<'_>);
    /// Completion, in the context blk-mq chose, after [`Request::complete`].
    fn complete(rq: &Request<Self>);
    /// A request that completed successfully is about to be ended as part of a
    /// [`CompletionBatch`]: release what the driver holds for it (its DMA mapping).
    fn end_batched(rq: &Request<Self>);
    /// Reaps completions of polled queue `q` (no interrupt); returns how many were found.
    fn poll(q: &Self::Queue<'_>) -> u32;
    /// `rq` has been in flight for longer than the queue's timeout. Runs in process context
    /// (blk-mq's timeout work) and may sleep; `set` is the tag set `rq` belongs to.
    fn timeout(set: TagSetRef<'_, Self>, q: &Self::Queue<'_>, rq: &Request<Self>) -> Timeout;
    /// An ioctl on the disk's block device that the block layer does not handle itself;
    /// `writable` says whether the device was opened for writing.
    fn ioctl(p: &Self::Private, writable: bool, cmd: u32, arg: usize) -> Result<isize>;
}

/// What the driver did about a request that timed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Timeout {
    /// The request was completed (or will be, by the driver): do not re-arm its timer.
    Done,
    /// Give the request another timeout period (e.g. an abort was sent for it).
    ResetTimer,
}

/// Driver-private data blk-mq allocates behind every `struct request` (`cmd_size`).
#[repr(C)]
struct Pdu<T: BlkOps> {
    /// Scatterlist entries filled by `blk_rq_map_sg` (0: no scatterlist mapped).
    nents: AtomicU32,
    /// A single-segment request mapped without the scatterlist: its bus address and length
    /// (length 0: not mapped this way).
    single_addr: AtomicU64,
    single_len: AtomicU32,
    /// Entries holding DMA segments after `dma_map_sg`.
    mapped: AtomicU32,
    drv: T::Rq,
    sg: Opaque<[bindings::scatterlist; MAX_SEGMENTS]>,
}

/// `dma_mapping_error`, a static inline: tells DMA-API debugging the result was checked,
/// then compares with `DMA_MAPPING_ERROR` (~0).
fn dma_mapping_error(dev: &Device<Bound>, addr: bindings::dma_addr_t) -> bool {
    #[cfg(CONFIG_DMA_API_DEBUG)]
    // SAFETY: `dev` is a bound device and `addr` came from a mapping call for it.
    unsafe {
        bindings::debug_dma_mapping_error(device_raw(dev), addr)
    };
    #[cfg(not(CONFIG_DMA_API_DEBUG))]
    let _ = dev;
    addr == !0
}

/// `blk_mq_rq_to_pdu`, a static inline (its Rust helper is an out-of-line call on the
/// I/O path): the driver's data starts right after `struct request`.
fn rq_to_pdu(rq: *mut bindings::request) -> *mut c_void {
    rq.wrapping_add(1).cast()
}

/// A block layer request, seen by the driver between `queue_rq` and its end.
#[repr(transparent)]
pub(crate) struct Request<T: BlkOps>(Opaque<bindings::request>, PhantomData<T>);

impl<T: BlkOps> Request<T> {
    /// # Safety
    ///
    /// `ptr` points to a live request of a tag set created by [`TagSet::new`] for `T`.
    unsafe fn from_raw<'r>(ptr: *mut bindings::request) -> &'r Self {
        // SAFETY: `Request` is a transparent wrapper of `struct request`.
        unsafe { &*ptr.cast() }
    }

    fn raw(&self) -> *mut bindings::request {
        self.0.get()
    }

    fn pdu(&self) -> &Pdu<T> {
        // SAFETY: blk-mq allocates `cmd_size = size_of::<Pdu<T>>()` bytes right behind each
        // request of our tag set, initialized by `init_request` (type invariant).
        unsafe { &*rq_to_pdu(self.raw()).cast::<Pdu<T>>() }
    }

    /// The driver's state for this request.
    pub(crate) fn data(&self) -> &T::Rq {
        &self.pdu().drv
    }

    fn cmd_flags(&self) -> u32 {
        // SAFETY: `cmd_flags` is set before the request reaches the driver and is constant
        // while the driver owns it.
        unsafe { (*self.raw()).cmd_flags }
    }

    pub(crate) fn op(&self) -> ReqOp {
        match self.cmd_flags() & REQ_OP_MASK {
            bindings::req_op_REQ_OP_READ => ReqOp::Read,
            bindings::req_op_REQ_OP_WRITE => ReqOp::Write,
            bindings::req_op_REQ_OP_FLUSH => ReqOp::Flush,
            bindings::req_op_REQ_OP_DISCARD => ReqOp::Discard,
            bindings::req_op_REQ_OP_WRITE_ZEROES => ReqOp::WriteZeroes,
            bindings::req_op_REQ_OP_DRV_IN => ReqOp::DrvIn,
            bindings::req_op_REQ_OP_DRV_OUT => ReqOp::DrvOut,
            other => ReqOp::Other(other),
        }
    }

    /// The submitter asked for no retries (`REQ_FAILFAST_*`: readahead, multipath), so a
    /// failure ends the request at once, as `blk_noretry_request`.
    pub(crate) fn failfast(&self) -> bool {
        const FAILFAST: u32 = (1 << bindings::req_flag_bits___REQ_FAILFAST_DEV)
            | (1 << bindings::req_flag_bits___REQ_FAILFAST_TRANSPORT)
            | (1 << bindings::req_flag_bits___REQ_FAILFAST_DRIVER);
        self.cmd_flags() & FAILFAST != 0
    }

    /// Force Unit Access: the write must be on stable media when it completes.
    pub(crate) fn fua(&self) -> bool {
        self.cmd_flags() & (1 << bindings::req_flag_bits___REQ_FUA) != 0
    }

    /// First sector (512 bytes) of the request.
    pub(crate) fn sector(&self) -> u64 {
        // SAFETY: constant while the driver owns the request.
        unsafe { (*self.raw()).__sector }
    }

    /// Length in bytes.
    pub(crate) fn bytes(&self) -> u32 {
        // SAFETY: constant while the driver owns the request.
        unsafe { (*self.raw()).__data_len }
    }

    /// The request's tag (unique within its hardware queue).
    pub(crate) fn tag(&self) -> u32 {
        // SAFETY: constant while the driver owns the request.
        unsafe { (*self.raw()).tag as u32 }
    }

    /// Per-disk data of the disk this request is for.
    pub(crate) fn disk<'a>(&self) -> &T::DiskData<'a> {
        // SAFETY: `q->queuedata` was set by `Disk::new` to its `DiskData`, which lives
        // until the disk is released, after all of its requests ended.
        unsafe { &*(*(*self.raw()).q).queuedata.cast::<T::DiskData<'a>>() }
    }

    /// True the first time the driver sees this request, false when it comes back after
    /// [`Self::requeue`]: lets per-request state such as a retry count start fresh.
    pub(crate) fn first_issue(&self) -> bool {
        // SAFETY: `rq_flags` of a request owned by the driver is only changed by the driver.
        unsafe {
            let flags = &raw mut (*self.raw()).rq_flags;
            if *flags & RQF_DONTPREP != 0 {
                return false;
            }
            *flags |= RQF_DONTPREP;
        }
        true
    }

    /// Marks the request as started (issued to the device), arming its timeout.
    pub(crate) fn start(&self) {
        // SAFETY: the request is owned by the driver (we are in `queue_rq`).
        unsafe { bindings::blk_mq_start_request(self.raw()) };
    }

    /// Calls `f(first_sector, sectors)` for each bio: the ranges of a (merged) discard.
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

    /// The request's data as one physically contiguous range (page, offset from it,
    /// length), when it is a single segment that its first bio vector covers entirely.
    fn single_bvec(&self) -> Option<(*mut bindings::page, usize, u32)> {
        // SAFETY: the request is owned by the driver; its bio chain and flags are stable.
        unsafe {
            let rq = self.raw();
            if (*rq).nr_phys_segments != 1 || (*rq).rq_flags & RQF_SPECIAL_PAYLOAD != 0 {
                return None;
            }
            let bio = (*rq).bio;
            if bio.is_null() {
                return None;
            }
            // `mp_bvec_iter_bvec` (a static inline): the current vector of the bio.
            let iter = (*bio).bi_iter;
            let bv = &*(*bio).bi_io_vec.add(iter.bi_idx as usize);
            let len = (bv.bv_len - iter.bi_offset).min(iter.bi_size);
            if len != (*rq).__data_len {
                return None;
            }
            Some((bv.bv_page, (bv.bv_offset + iter.bi_offset) as usize, len))
        }
    }

    /// Maps the request's data for DMA by `dev`: a single segment directly (no scatterlist
    /// to build or walk, the common case of small I/O, as the C driver does), anything else
    /// through the scatterlist in its private data. Returns the number of DMA segments;
    /// [`Self::segments`] then yields them.
    pub(crate) fn map_data(&self, dev: &Device<Bound>) -> Result<u32> {
        let pdu = self.pdu();
        if let Some((page, offset, len)) = self.single_bvec() {
            // SAFETY: `page` + `offset` .. `len` is the request's data buffer, which stays
            // valid until the request ends; `dev` is the bound device doing the DMA.
            let addr = unsafe {
                bindings::dma_map_page_attrs(
                    device_raw(dev),
                    page,
                    offset,
                    len as usize,
                    self.dma_dir(),
                    0,
                )
            };
            if dma_mapping_error(dev, addr) {
                return Err(ENOMEM);
            }
            pdu.single_addr.store(addr, Relaxed);
            pdu.single_len.store(len, Relaxed);
            return Ok(1);
        }
        let sg = pdu.sg.get().cast::<bindings::scatterlist>();
        // SAFETY: `raw()` is a valid request; physical segments are bounded by the queue
        // limits we set (`max_segments <= MAX_SEGMENTS`).
        let nseg = unsafe { (*self.raw()).nr_phys_segments } as usize;
        if nseg == 0 || nseg > MAX_SEGMENTS {
            return Err(EINVAL);
        }
        // SAFETY: `sg` points to `MAX_SEGMENTS` entries owned by this request.
        unsafe { bindings::sg_init_table(sg, nseg as c_uint) };
        let mut last: *mut bindings::scatterlist = core::ptr::null_mut();
        // SAFETY: the table has room for `nr_phys_segments` entries, which is the most
        // `__blk_rq_map_sg` fills.
        let nents = unsafe { bindings::__blk_rq_map_sg(self.raw(), sg, &mut last) };
        if nents <= 0 || nents as usize > nseg {
            return Err(EIO);
        }
        // SAFETY: `sg` holds `nents` initialized entries; `dev` is the bound device doing
        // the DMA; direction matches the operation.
        let mapped =
            unsafe { bindings::dma_map_sg_attrs(device_raw(dev), sg, nents, self.dma_dir(), 0) };
        if mapped == 0 {
            return Err(ENOMEM);
        }
        pdu.nents.store(nents as u32, Relaxed);
        pdu.mapped.store(mapped as u32, Relaxed);
        Ok(mapped as u32)
    }

    fn dma_dir(&self) -> bindings::dma_data_direction {
        if self.cmd_flags() & 1 != 0 {
            bindings::dma_data_direction::DMA_TO_DEVICE
        } else {
            bindings::dma_data_direction::DMA_FROM_DEVICE
        }
    }

    /// The DMA segments (bus address, length) of a request mapped by [`Self::map_data`].
    pub(crate) fn segments(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        let pdu = self.pdu();
        let single_len = pdu.single_len.load(Relaxed);
        let single = (single_len != 0).then(|| (pdu.single_addr.load(Relaxed), single_len));
        let n = if single.is_some() {
            0
        } else {
            pdu.mapped.load(Relaxed) as usize
        };
        let sg = pdu.sg.get().cast::<bindings::scatterlist>();
        Iterator::chain(
            single.into_iter(),
            (0..n.min(MAX_SEGMENTS)).map(move |i| {
                // SAFETY: entries `0..mapped` were filled by `dma_map_sg_attrs`, and `i` is in
                // bounds of the array.
                unsafe {
                    let e = sg.add(i);
                    ((*e).dma_address, (*e).dma_length)
                }
            }),
        )
    }

    /// Undoes [`Self::map_data`]; does nothing if nothing is mapped.
    pub(crate) fn unmap_data(&self, dev: &Device<Bound>) {
        let pdu = self.pdu();
        let single_len = pdu.single_len.swap(0, Relaxed);
        if single_len != 0 {
            // SAFETY: mapped by `map_data` for `dev` in this direction with this length, and
            // unmapped once (the length was swapped to 0).
            unsafe {
                bindings::dma_unmap_page_attrs(
                    device_raw(dev),
                    pdu.single_addr.load(Relaxed),
                    single_len as usize,
                    self.dma_dir(),
                    0,
                )
            };
            return;
        }
        let nents = pdu.nents.swap(0, Relaxed);
        pdu.mapped.store(0, Relaxed);
        if nents == 0 {
            return;
        }
        let sg = pdu.sg.get().cast::<bindings::scatterlist>();
        // SAFETY: `sg` was mapped with `nents` entries for `dev` in this direction by
        // `map_data`, and is unmapped once (the count was swapped to 0).
        unsafe {
            bindings::dma_unmap_sg_attrs(device_raw(dev), sg, nents as c_int, self.dma_dir(), 0)
        };
    }

    /// Hands the request to blk-mq's completion machinery, which calls
    /// [`BlkOps::complete`] (on the submitting CPU's softirq when that is cheaper).
    pub(crate) fn complete(&self) {
        // SAFETY: the request is in flight on our queue.
        unsafe { bindings::blk_mq_complete_request(self.raw()) };
    }

    /// Completes a request the device finished without error, like [`Self::complete`], but
    /// on this CPU into `batch` when blk-mq allows it (the C driver's `nvme_handle_cqe`):
    /// the batch ends all its requests at once when dropped.
    pub(crate) fn complete_batched(&self, batch: &mut CompletionBatch<T>) {
        // SAFETY: the request is in flight on our queue; on `false` blk-mq leaves its
        // completion to us, in this context.
        if unsafe { bindings::blk_mq_complete_request_remote(self.raw()) } {
            return;
        }
        if !batch.add(self) {
            T::complete(self);
        }
    }

    /// Ends the request with `status`; the driver must not touch it afterwards.
    pub(crate) fn end(&self, status: BlkStatus) {
        // SAFETY: the request is owned by the driver; its data was unmapped.
        unsafe { bindings::blk_mq_end_request(self.raw(), status as bindings::blk_status_t) };
    }

    /// Whether the request is in flight: issued to the driver and not completed yet.
    pub(crate) fn in_flight(&self) -> bool {
        // SAFETY: `state` is updated atomically by blk-mq; reading it is always allowed.
        let state = unsafe { core::ptr::read_volatile(&raw const (*self.raw()).state) };
        state == bindings::mq_rq_state_MQ_RQ_IN_FLIGHT
    }

    /// Puts the request back on the queue to be issued again (a retry).
    pub(crate) fn requeue(&self) {
        // SAFETY: the request is owned by the driver and not mapped any more.
        unsafe { bindings::blk_mq_requeue_request(self.raw(), true) };
    }

    /// Puts the request back on the queue, to be issued again after `ms` milliseconds
    /// (`blk_mq_delay_kick_requeue_list`); at once if `ms` is 0.
    pub(crate) fn requeue_after(&self, ms: u32) {
        if ms == 0 {
            self.requeue();
            return;
        }
        // SAFETY: the request is owned by the driver and not mapped any more; its queue
        // outlives it.
        unsafe {
            let q = (*self.raw()).q;
            bindings::blk_mq_requeue_request(self.raw(), false);
            bindings::blk_mq_delay_kick_requeue_list(q, ms as usize);
        }
    }
}

/// `RQF_*` flags that keep a request out of a completion batch or ask for a time stamp.
const RQF_SCHED_TAGS: u32 = 1 << bindings::rqf_flags___RQF_SCHED_TAGS;
const RQF_NEED_TS: u32 = (1 << bindings::rqf_flags___RQF_IO_STAT)
    | (1 << bindings::rqf_flags___RQF_STATS)
    | (1 << bindings::rqf_flags___RQF_USE_SCHED);

/// Requests completed in one pass over a completion queue, ended together by
/// `blk_mq_end_request_batch` when the batch is dropped: one tag release and one io_uring
/// completion run per batch instead of per request.
///
/// # Invariants
///
/// Every request on `iob.req_list` is a request of a tag set for `T`, completed (state
/// COMPLETE), and is ended exactly once, by [`Self::finish`].
pub(crate) struct CompletionBatch<T: BlkOps> {
    iob: bindings::io_comp_batch,
    _p: PhantomData<T>,
}

impl<T: BlkOps> CompletionBatch<T> {
    pub(crate) fn new() -> Self {
        Self {
            iob: pin_init::zeroed(),
            _p: PhantomData,
        }
    }

    /// `blk_mq_add_to_batch` (a static inline) for a request without error.
    fn add(&mut self, rq: &Request<T>) -> bool {
        let r = rq.raw();
        // SAFETY: `r` is a completed request the driver owns; the list links are ours
        // until the batch ends it.
        unsafe {
            if (*r).rq_flags & RQF_SCHED_TAGS != 0 || (*r).end_io.is_some() {
                return false;
            }
            // Only this type ever fills `iob`, so `complete` is ours once set.
            self.iob.complete = Some(Self::finish_raw);
            self.iob.need_ts |= (*r).rq_flags & RQF_NEED_TS != 0 || !(*(*r).q).elevator.is_null();
            (*r).__bindgen_anon_1.rq_next = core::ptr::null_mut();
            let list = &mut self.iob.req_list;
            if list.tail.is_null() {
                list.head = r;
            } else {
                (*list.tail).__bindgen_anon_1.rq_next = r;
            }
            list.tail = r;
        }
        true
    }

    /// # Safety
    ///
    /// `iob` holds only requests added by [`Self::add`] for `T`.
    unsafe extern "C" fn finish_raw(iob: *mut bindings::io_comp_batch) {
        // SAFETY: see the function's safety section.
        unsafe {
            let mut r = (*iob).req_list.head;
            while !r.is_null() {
                T::end_batched(Request::from_raw(r));
                r = (*r).__bindgen_anon_1.rq_next;
            }
            bindings::blk_mq_end_request_batch(iob);
        }
    }
}

impl<T: BlkOps> Drop for CompletionBatch<T> {
    fn drop(&mut self) {
        if !self.iob.req_list.head.is_null() {
            // SAFETY: the list holds only requests added by `add` (type invariant); they are
            // ended here, once.
            unsafe { Self::finish_raw(&mut self.iob) };
        }
    }
}

/// The tags of one hardware queue: command identifier to request.
pub(crate) struct Tags<T: BlkOps> {
    tags: NonNull<bindings::blk_mq_tags>,
    _p: PhantomData<T>,
}

// SAFETY: `blk_mq_tags` is shared by all CPUs submitting to and completing on its queue;
// lookups only read `nr_tags` and `rqs[]`, which blk-mq keeps valid for the tag set's life.
unsafe impl<T: BlkOps> Send for Tags<T> {}
// SAFETY: see `Send`.
unsafe impl<T: BlkOps> Sync for Tags<T> {}

impl<T: BlkOps> Tags<T> {
    /// The request that `tag` refers to, if `tag` is in range and that request is in
    /// flight (started and not completed). A device that reports a tag we never issued, or
    /// one twice, gets `None` instead of another request.
    pub(crate) fn in_flight(&self, tag: u32) -> Option<&Request<T>> {
        let tags = self.tags.as_ptr();
        // SAFETY: `tags` is valid for the tag set's life (type invariant); `rqs` has
        // `nr_tags` entries (`blk_mq_tag_to_rq`, a static inline, does the same).
        let rq = unsafe {
            if tag >= (*tags).nr_tags {
                return None;
            }
            *(*tags).rqs.add(tag as usize)
        };
        if rq.is_null() {
            return None;
        }
        // SAFETY: `rq` is a request of our tag set.
        let state = unsafe { core::ptr::read_volatile(&raw const (*rq).state) };
        if state != bindings::mq_rq_state_MQ_RQ_IN_FLIGHT {
            return None;
        }
        // SAFETY: `rq` is a live request of a tag set created for `T`.
        Some(unsafe { Request::from_raw(rq) })
    }
}

/// Queue limits for a new disk.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Limits {
    pub(crate) logical_block_size: u32,
    pub(crate) physical_block_size: u32,
    pub(crate) max_hw_sectors: u32,
    pub(crate) max_segments: u16,
    pub(crate) virt_boundary_mask: usize,
    pub(crate) max_segment_size: u32,
    pub(crate) dma_alignment: u32,
    pub(crate) write_cache: bool,
    pub(crate) fua: bool,
    pub(crate) max_discard_sectors: u32,
    pub(crate) max_discard_segments: u16,
    pub(crate) discard_granularity: u32,
    pub(crate) max_write_zeroes_sectors: u32,
    pub(crate) io_min: u32,
    pub(crate) io_opt: u32,
}

impl Limits {
    fn to_raw(self) -> bindings::queue_limits {
        let mut lim: bindings::queue_limits = pin_init::zeroed();
        self.apply(&mut lim);
        lim
    }

    /// Sets the limits this type covers in `lim`, leaving the others (those the block layer
    /// set, e.g. polling support) as they are.
    fn apply(self, lim: &mut bindings::queue_limits) {
        lim.logical_block_size = self.logical_block_size;
        lim.physical_block_size = self.physical_block_size;
        lim.max_hw_sectors = self.max_hw_sectors;
        lim.max_segments = self.max_segments.min(MAX_SEGMENTS as u16);
        lim.virt_boundary_mask = self.virt_boundary_mask;
        lim.max_segment_size = self.max_segment_size;
        lim.dma_alignment = self.dma_alignment;
        lim.features &= !(BLK_FEAT_WRITE_CACHE | BLK_FEAT_FUA);
        if self.write_cache {
            lim.features |= BLK_FEAT_WRITE_CACHE;
            if self.fua {
                lim.features |= BLK_FEAT_FUA;
            }
        }
        lim.max_hw_discard_sectors = self.max_discard_sectors;
        lim.max_discard_segments = self.max_discard_segments;
        lim.discard_granularity = self.discard_granularity;
        lim.max_write_zeroes_sectors = self.max_write_zeroes_sectors;
        lim.io_min = self.io_min;
        lim.io_opt = self.io_opt;
    }
}

/// What the set's `driver_data` points to.
struct SetHeader<'a, T: BlkOps> {
    /// Device whose MSI-X vector affinity the queue map follows, and the first vector used
    /// by hardware queue 0; `None` maps queues to CPUs evenly.
    irq_dev: Option<(*mut bindings::device, u32)>,
    /// Hardware queues with interrupts (the default map), then polled ones (the poll map).
    nr_default: u32,
    nr_poll: u32,
    data: T::SetData<'a>,
}

/// A blk-mq tag set, the driver's data for it, and the disks on it.
///
/// # Invariants
///
/// `set` was initialized by `blk_mq_alloc_tag_set` with `driver_data` pointing to `header`
/// and is freed in `drop`, after every disk and before `header`.
pub(crate) struct TagSet<'a, T: BlkOps> {
    disks: KVec<Disk<'a, T>>,
    set: Pin<KBox<Opaque<bindings::blk_mq_tag_set>>>,
    /// Only reached through the set's `driver_data`.
    _header: Pin<KBox<SetHeader<'a, T>>>,
}

// SAFETY: The tag set is a C object designed for concurrent use; the header is only read.
unsafe impl<T: BlkOps> Send for TagSet<'_, T> where T::SetData<'static>: Send {}
// SAFETY: As above.
unsafe impl<T: BlkOps> Sync for TagSet<'_, T> {}

impl<'a, T: BlkOps> TagSet<'a, T> {
    /// Creates a tag set of `nr_hw_queues` queues with interrupts and `nr_poll` polled
    /// queues after them (for `REQ_POLLED` I/O, io_uring's IOPOLL), of `depth` tags each.
    ///
    /// `irq` (the device and the vector of hardware queue 0) maps CPUs to queues by the
    /// vectors' affinity, so a request completes on a CPU that submitted to its queue.
    pub(crate) fn new(
        nr_hw_queues: u32,
        nr_poll: u32,
        depth: u32,
        timeout_jiffies: u32,
        irq: Option<(&Device<Bound>, u32)>,
        data: T::SetData<'a>,
    ) -> Result<Self> {
        let header = KBox::pin(
            SetHeader {
                irq_dev: irq.map(|(d, v)| (device_raw(d), v)),
                nr_default: nr_hw_queues,
                nr_poll,
                data,
            },
            GFP_KERNEL,
        )?;
        let set = KBox::pin(Opaque::<bindings::blk_mq_tag_set>::zeroed(), GFP_KERNEL)?;
        let raw = set.get();
        // SAFETY: `raw` is zeroed, pinned memory for a tag set; `OPS` lives forever; the
        // header outlives the set (invariant: freed after it in `drop`).
        let ret = unsafe {
            (*raw).ops = &Ops::<T>::OPS;
            (*raw).nr_hw_queues = nr_hw_queues + nr_poll;
            // Default, read (unused) and poll maps when there are polled queues.
            (*raw).nr_maps = if nr_poll > 0 {
                bindings::hctx_type_HCTX_TYPE_POLL + 1
            } else {
                1
            };
            (*raw).queue_depth = depth;
            (*raw).cmd_size = core::mem::size_of::<Pdu<T>>() as c_uint;
            (*raw).numa_node = bindings::NUMA_NO_NODE;
            (*raw).timeout = timeout_jiffies;
            (*raw).driver_data = core::ptr::from_ref::<SetHeader<'a, T>>(&header)
                .cast_mut()
                .cast();
            bindings::blk_mq_alloc_tag_set(raw)
        };
        if ret != 0 {
            return Err(Error::from_errno(ret));
        }
        Ok(Self {
            disks: KVec::new(),
            set,
            _header: header,
        })
    }

    /// Removes every disk from the system (waiting for their I/O), keeping the tag set.
    pub(crate) fn remove_disks(&mut self) {
        for d in self.disks.iter_mut() {
            d.remove();
        }
        self.disks.clear();
    }

    fn raw(&self) -> *mut bindings::blk_mq_tag_set {
        self.set.get()
    }

    /// A handle for error recovery: quiescing, cancelling requests, the driver's set data.
    pub(crate) fn handle(&self) -> TagSetRef<'_, T> {
        TagSetRef {
            // SAFETY: `set` is a live, pinned allocation (invariant), so never null.
            set: unsafe { NonNull::new_unchecked(self.raw()) },
            _p: PhantomData,
        }
    }
}

/// A borrowed tag set, as error recovery needs it.
///
/// # Invariants
///
/// `set` is a tag set created by [`TagSet::new`] for `T`, alive for `'s`.
pub(crate) struct TagSetRef<'s, T: BlkOps> {
    set: NonNull<bindings::blk_mq_tag_set>,
    _p: PhantomData<(&'s (), T)>,
}

impl<'s, T: BlkOps> TagSetRef<'s, T> {
    /// The driver's data of the set.
    pub(crate) fn data(&self) -> &'s T::SetData<'s> {
        // SAFETY: `driver_data` points to the set's `SetHeader`, which outlives the set
        // (type invariant of `TagSet`).
        unsafe { &(*(*self.set.as_ptr()).driver_data.cast::<SetHeader<'s, T>>()).data }
    }

    /// Stops blk-mq from calling `queue_rq` on any queue of the set; returns once no call
    /// is running. Requests keep queueing (and requeued ones wait) until [`Self::unquiesce`].
    pub(crate) fn quiesce(&self) {
        // SAFETY: the set is alive (invariant).
        unsafe { bindings::blk_mq_quiesce_tagset(self.set.as_ptr()) };
    }

    /// Lets blk-mq dispatch again and runs the queues.
    pub(crate) fn unquiesce(&self) {
        // SAFETY: the set is alive (invariant).
        unsafe { bindings::blk_mq_unquiesce_tagset(self.set.as_ptr()) };
    }

    /// Calls `f` for every request of the set that is in flight (issued, not completed).
    /// `f` may complete the request.
    pub(crate) fn for_each_in_flight(&self, f: &mut dyn FnMut(&Request<T>)) {
        let mut f = f;
        let data = (&raw mut f).cast::<c_void>();
        // SAFETY: the set is alive (invariant); `data` points to `f`, which outlives the
        // call; `Self::iter` is only called during it.
        unsafe { bindings::blk_mq_tagset_busy_iter(self.set.as_ptr(), Some(Self::iter), data) };
    }

    /// # Safety
    ///
    /// `data` is the `&mut &mut dyn FnMut` passed by [`Self::for_each_in_flight`]; `rq` a
    /// started request of the set.
    unsafe extern "C" fn iter(rq: *mut bindings::request, data: *mut c_void) -> bool {
        // SAFETY: see the function's safety section.
        let (f, rq) = unsafe {
            (
                &mut *data.cast::<&mut dyn FnMut(&Request<T>)>(),
                Request::<T>::from_raw(rq),
            )
        };
        // Started covers completed ones too: leave those to their completion.
        if rq.in_flight() {
            f(rq);
        }
        true
    }

    /// Waits until every request completed with [`Request::complete`] has been handed to
    /// [`BlkOps::complete`] and ended or requeued.
    pub(crate) fn wait_completed(&self) {
        // SAFETY: the set is alive (invariant).
        unsafe { bindings::blk_mq_tagset_wait_completed_request(self.set.as_ptr()) };
    }
}

impl<T: BlkOps> Drop for TagSet<'_, T> {
    fn drop(&mut self) {
        self.remove_disks();
        // SAFETY: allocated in `new` (invariant); every disk using it was released above.
        unsafe { bindings::blk_mq_free_tag_set(self.raw()) };
    }
}

/// `BLK_OPEN_WRITE` (include/linux/blkdev.h).
const BLK_OPEN_WRITE: u32 = 1 << 1;

/// The `block_device_operations` of a [`BlkOps`] implementor, with this module as owner (an
/// open disk pins the module).
struct DiskOps<T: BlkOps>(PhantomData<T>);

impl<T: BlkOps> DiskOps<T> {
    const FOPS: bindings::block_device_operations = bindings::block_device_operations {
        owner: <crate::RnvmeModule as kernel::ModuleMetadata>::THIS_MODULE.as_ptr(),
        ioctl: Some(Self::ioctl),
        // The NVMe passthrough structures have the same layout for 32-bit callers.
        compat_ioctl: Some(Self::ioctl),
        free_disk: Some(Self::free_disk),
        ..pin_init::zeroed()
    };

    /// # Safety
    ///
    /// Called by the block layer for an open block device of a disk created by
    /// [`Disk::new`], whose `private_data` holds a `T::Private` until `free_disk`.
    unsafe extern "C" fn ioctl(
        bdev: *mut bindings::block_device,
        mode: bindings::blk_mode_t,
        cmd: c_uint,
        arg: kernel::ffi::c_ulong,
    ) -> c_int {
        // SAFETY: see the function's safety section; an open block device holds a
        // reference to its disk.
        let p = unsafe { &*(*(*bdev).bd_disk).private_data.cast::<T::Private>() };
        match T::ioctl(p, mode & BLK_OPEN_WRITE != 0, cmd, arg) {
            Ok(v) => v as c_int,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the block layer once, when the last reference to the disk is dropped.
    unsafe extern "C" fn free_disk(disk: *mut bindings::gendisk) {
        // SAFETY: `Disk::new` stored a `KBox<T::Private>` there (or left it null).
        unsafe {
            let p = (*disk).private_data.cast::<T::Private>();
            if !p.is_null() {
                (*disk).private_data = core::ptr::null_mut();
                drop(KBox::from_raw(p));
            }
        }
    }
}

/// A disk on a tag set; owned by its [`TagSet`].
///
/// # Invariants
///
/// `disk` came from `__blk_mq_alloc_disk` with `queuedata` pointing to `data`; `added` says
/// whether `device_add_disk` succeeded. `drop` deletes (if added) and puts the disk before
/// `data` is freed.
struct Disk<'a, T: BlkOps> {
    disk: NonNull<bindings::gendisk>,
    added: bool,
    /// Marked dead (`blk_mark_disk_dead`).
    dead: bool,
    /// Frozen by [`TagSet::freeze_disks_non_owner`].
    held: bool,
    /// Only reached through the request queue's `queuedata`.
    _data: Pin<KBox<T::DiskData<'a>>>,
}

// SAFETY: the gendisk is a kernel object usable from any thread.
unsafe impl<T: BlkOps> Send for Disk<'_, T> {}
// SAFETY: as above; `data` is `Sync`.
unsafe impl<T: BlkOps> Sync for Disk<'_, T> {}

impl<'a, T: BlkOps> TagSet<'a, T> {
    /// Adds a disk called `name` of `sectors` 512-byte sectors (it appears in /dev), as a
    /// child of `parent`.
    ///
    /// `fault` is for fault injection: an error there is reported in place of
    /// `device_add_disk`'s result, so tests walk the path where adding the disk fails (not
    /// part of an upstream version).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn add_disk(
        &mut self,
        limits: Limits,
        name: core::fmt::Arguments<'_>,
        sectors: u64,
        parent: &Device<Bound>,
        data: T::DiskData<'a>,
        private: T::Private,
        fault: Result,
    ) -> Result {
        self.disks.reserve(1, GFP_KERNEL)?;
        let disk = Disk::new(self, limits, name, sectors, parent, data, private, fault)?;
        self.disks.push_within_capacity(disk).map_err(|_| ENOMEM)
    }
    /// The first disk whose data satisfies `pred`.
    pub(crate) fn find_disk(
        &self,
        pred: impl Fn(&T::DiskData<'a>) -> bool,
    ) -> Option<DiskRef<'_, 'a, T>> {
        self.disks
            .iter()
            .find(|d| d.added && pred(&d._data))
            .map(|disk| DiskRef { disk })
    }

    /// Freezes the request queues of every disk (waits until no request is in flight and
    /// holds new ones back) until the returned guard is dropped. Allocations by this task
    /// do no I/O meanwhile.
    pub(crate) fn freeze_disks(&self) -> Frozen<'_, 'a, T> {
        let noio = MemallocNoio::save();
        let added = || self.disks.iter().filter(|d| d.added);
        // Start every freeze first, so the queues drain in parallel.
        for d in added() {
            // SAFETY: the disk is added and alive (invariant); unfrozen by `Frozen::drop`
            // on this task, as the freeze's lockdep owner expects.
            unsafe { bindings::blk_freeze_queue_start((*d.disk.as_ptr()).queue) };
        }
        for d in added() {
            // SAFETY: as above; the freeze was started.
            unsafe { bindings::blk_mq_freeze_queue_wait((*d.disk.as_ptr()).queue) };
        }
        Frozen {
            set: self,
            _noio: noio,
        }
    }

    /// Freezes the request queues of every disk, as [`Self::freeze_disks`], until
    /// [`Self::unfreeze_disks_non_owner`], which may run on another task (a resume after a
    /// suspend, as C's `nvme_start_freeze` and `nvme_unfreeze`). No request is in flight
    /// when this returns, and new ones wait at the queues' entrance, holding no tag.
    /// Disks already held stay held once; a disk removed meanwhile is unfrozen first.
    pub(crate) fn freeze_disks_non_owner(&mut self) {
        let _noio = MemallocNoio::save();
        for d in self.disks.iter_mut().filter(|d| d.added && !d.held) {
            d.held = true;
            // SAFETY: the disk is added and alive (invariant); unfrozen once, by
            // `unfreeze_disks_non_owner` or when removed.
            unsafe { bindings::blk_freeze_queue_start_non_owner((*d.disk.as_ptr()).queue) };
        }
        for d in self.disks.iter().filter(|d| d.held) {
            // SAFETY: as above; the freeze was started.
            unsafe { bindings::blk_mq_freeze_queue_wait((*d.disk.as_ptr()).queue) };
        }
    }

    /// Ends what [`Self::freeze_disks_non_owner`] started.
    pub(crate) fn unfreeze_disks_non_owner(&mut self) {
        for d in self.disks.iter_mut() {
            d.unfreeze_non_owner();
        }
    }

    /// Marks every disk dead, as `blk_mark_disk_dead`: its capacity becomes 0, new I/O
    /// fails at once, and file systems on it are told the device is gone (shut down). The
    /// disks stay until removed. Returns how many were newly marked.
    pub(crate) fn mark_disks_dead(&mut self) -> usize {
        let mut n = 0;
        for d in self.disks.iter_mut().filter(|d| d.added && !d.dead) {
            // SAFETY: the disk is added and alive (invariant), and marked once. We are in
            // process context and do not hold its `open_mutex`.
            unsafe { bindings::blk_mark_disk_dead(d.disk.as_ptr()) };
            d.dead = true;
            n += 1;
        }
        n
    }

    /// Calls `f` for every disk.
    pub(crate) fn for_each_disk(&self, mut f: impl FnMut(DiskRef<'_, 'a, T>)) {
        for disk in self.disks.iter().filter(|d| d.added) {
            f(DiskRef { disk });
        }
    }

    /// Removes (as [`Self::remove_disks`]) every disk whose data does not satisfy `keep`.
    pub(crate) fn retain_disks(&mut self, keep: impl Fn(&T::DiskData<'a>) -> bool) {
        self.disks.retain(|d| keep(&d._data));
    }
}

/// The disks of a [`TagSet`] frozen by [`TagSet::freeze_disks`]; unfrozen when dropped.
/// The set cannot gain or lose disks meanwhile: this borrows it.
pub(crate) struct Frozen<'s, 'a, T: BlkOps> {
    set: &'s TagSet<'a, T>,
    _noio: MemallocNoio,
}

impl<T: BlkOps> Drop for Frozen<'_, '_, T> {
    fn drop(&mut self) {
        for d in self.set.disks.iter().filter(|d| d.added) {
            // SAFETY: frozen by `freeze_disks` on this task (the guard is not `Send`).
            unsafe { bindings::blk_mq_unfreeze_queue_nomemrestore((*d.disk.as_ptr()).queue) };
        }
    }
}

/// A disk of a [`TagSet`], borrowed from it.
pub(crate) struct DiskRef<'s, 'a, T: BlkOps> {
    disk: &'s Disk<'a, T>,
}

impl<'s, 'a, T: BlkOps> DiskRef<'s, 'a, T> {
    pub(crate) fn data(&self) -> &'s T::DiskData<'a> {
        &self.disk._data
    }

    /// Changes the disk's queue limits and capacity in place (a namespace formatted with
    /// another block size, or resized). With its queue frozen, so no request built for the
    /// old format is in flight or issued meanwhile, `update` changes the driver's data and
    /// returns the new limits and capacity in sectors, which are then applied (the capacity
    /// change with a `RESIZE` uevent).
    pub(crate) fn update(&self, update: impl FnOnce(&T::DiskData<'a>) -> (Limits, u64)) -> Result {
        let disk = self.disk.disk.as_ptr();
        let _noio = MemallocNoio::save();
        // SAFETY: the disk is added and alive (`self` borrows it), so is its queue.
        let q = unsafe { (*disk).queue };
        // SAFETY: `q` is live; unfrozen below on this task. Freezing nests.
        unsafe { bindings::blk_mq_freeze_queue_nomemsave(q) };
        let (limits, sectors) = update(&self.disk._data);
        // SAFETY: `q` is live; the limits are read under `limits_lock`, which
        // `queue_limits_commit_update` releases (`queue_limits_start_update` is inline).
        let ret = unsafe {
            bindings::mutex_lock(&raw mut (*q).limits_lock);
            let mut lim = core::ptr::read(&raw const (*q).limits);
            limits.apply(&mut lim);
            bindings::queue_limits_commit_update(q, &mut lim)
        };
        let ret = kernel::error::to_result(ret);
        if ret.is_ok() {
            // SAFETY: the disk is live.
            unsafe { bindings::set_capacity_and_notify(disk, sectors) };
        }
        // SAFETY: frozen above.
        unsafe { bindings::blk_mq_unfreeze_queue_nomemrestore(q) };
        ret
    }

    /// Runs one driver-private request (`REQ_OP_DRV_OUT` if `to_device`, else
    /// `REQ_OP_DRV_IN`) through the disk's queues and waits for it: `len` bytes of user
    /// memory at `addr` are its data (pinned, or bounced when the block layer's alignment
    /// rules require), `timeout_ms` its timeout (0: the tag set's). `prep` fills the
    /// driver's state before it is issued, `done` reads it back after it ended.
    ///
    /// Fails with `EFAULT` for a bad user buffer, `EINVAL` when it exceeds the queue
    /// limits, and the block layer's error if the request failed in the driver.
    pub(crate) fn execute_private<R>(
        &self,
        to_device: bool,
        addr: usize,
        len: u32,
        timeout_ms: u32,
        prep: impl FnOnce(&T::Rq),
        done: impl FnOnce(&T::Rq) -> R,
    ) -> Result<R> {
        let disk = self.disk.disk.as_ptr();
        let op = if to_device {
            bindings::req_op_REQ_OP_DRV_OUT
        } else {
            bindings::req_op_REQ_OP_DRV_IN
        };
        // SAFETY: the disk is added and alive (`self` borrows it), so is its queue.
        let q = unsafe { (*disk).queue };
        // SAFETY: `q` is a live request queue of our tag set.
        let rq = kernel::error::from_err_ptr(unsafe { bindings::blk_mq_alloc_request(q, op, 0) })?;
        // SAFETY: `rq` is a request we own until `blk_mq_free_request`.
        let request = unsafe { Request::<T>::from_raw(rq) };
        if timeout_ms != 0 {
            let j = kernel::time::msecs_to_jiffies(timeout_ms);
            // SAFETY: as above; not yet issued.
            unsafe { (*rq).timeout = c_uint::try_from(j).unwrap_or(c_uint::MAX) };
        }
        prep(request.data());
        let mut bio = core::ptr::null_mut();
        if len > 0 {
            // SAFETY: `rq` is ours and not issued; `blk_rq_map_user` checks the user range
            // (access_ok) and copies or pins it.
            let ret = unsafe {
                bindings::blk_rq_map_user(
                    q,
                    rq,
                    core::ptr::null_mut(),
                    addr as *mut c_void,
                    len as usize,
                    bindings::GFP_KERNEL,
                )
            };
            if ret != 0 {
                // SAFETY: `rq` is ours and was never issued.
                unsafe { bindings::blk_mq_free_request(rq) };
                return Err(Error::from_errno(ret));
            }
            // The bio chain must be remembered for unmapping: the request's own pointer
            // moves on as it completes.
            // SAFETY: `rq` is ours.
            bio = unsafe { (*rq).bio };
        }
        // SAFETY: `rq` is set up; this waits for it to end.
        let status = unsafe { bindings::blk_execute_rq(rq, false) };
        let r = done(request.data());
        let unmapped = if bio.is_null() {
            0
        } else {
            // SAFETY: `bio` is the chain `blk_rq_map_user` built for `rq`; copies bounced
            // data back to user memory and unpins.
            unsafe { bindings::blk_rq_unmap_user(bio) }
        };
        // SAFETY: `rq` ended and is ours; not used afterwards.
        unsafe { bindings::blk_mq_free_request(rq) };
        if status != 0 {
            return Err(EIO);
        }
        if unmapped != 0 {
            return Err(Error::from_errno(unmapped));
        }
        Ok(r)
    }
}

impl<'a, T: BlkOps> Disk<'a, T> {
    #[allow(clippy::too_many_arguments)]
    fn new(
        set: &TagSet<'a, T>,
        limits: Limits,
        name: core::fmt::Arguments<'_>,
        sectors: u64,
        parent: &Device<Bound>,
        data: T::DiskData<'a>,
        private: T::Private,
        fault: Result,
    ) -> Result<Self> {
        let data = KBox::pin(data, GFP_KERNEL)?;
        let private = KBox::new(private, GFP_KERNEL)?;
        let mut lim = limits.to_raw();
        let qd = core::ptr::from_ref::<T::DiskData<'a>>(&data)
            .cast_mut()
            .cast::<c_void>();
        // SAFETY: `set` is an allocated tag set; `lim` is a valid limits structure;
        // `qd` outlives the disk (invariant).
        let disk = kernel::error::from_err_ptr(unsafe {
            bindings::__blk_mq_alloc_disk(set.raw(), &mut lim, qd, static_lock_class!().as_ptr())
        })?;
        let mut this = Self {
            // SAFETY: `from_err_ptr` returned a non-error pointer.
            disk: unsafe { NonNull::new_unchecked(disk) },
            added: false,
            dead: false,
            held: false,
            _data: data,
        };
        let name = kernel::str::CString::try_from_fmt(name)?;
        let bytes = name.to_bytes_with_nul();
        // SAFETY: `disk` is valid and not yet visible to anyone else.
        unsafe {
            let dn = &mut (*disk).disk_name;
            if bytes.len() > dn.len() {
                return Err(ENAMETOOLONG);
            }
            for (d, s) in dn.iter_mut().zip(bytes) {
                *d = *s;
            }
            (*disk).fops = &DiskOps::<T>::FOPS;
            // Freed by `free_disk`, with the disk's last reference.
            (*disk).private_data = KBox::into_raw(private).cast();
            // Dynamic block device numbers: no fixed major, no partitions of our own.
            (*disk).major = 0;
            (*disk).first_minor = 0;
            (*disk).minors = 0;
            bindings::set_capacity(disk, sectors);
        }
        let added = fault.and_then(|()| {
            // SAFETY: `disk` is fully set up; `parent` is a bound device.
            kernel::error::to_result(unsafe {
                bindings::device_add_disk(device_raw(parent), disk, core::ptr::null_mut())
            })
        });
        if let Err(e) = added {
            // The block layer calls `free_disk` only for disks that were added: take the
            // private data back here, or it leaks with everything it holds.
            // SAFETY: set above from `KBox::into_raw`; the disk was never added, so nobody
            // else saw the pointer, and it is cleared before `put_disk` (in `drop`) runs.
            unsafe {
                let p = (*disk).private_data.cast::<T::Private>();
                (*disk).private_data = core::ptr::null_mut();
                drop(KBox::from_raw(p));
            }
            return Err(e);
        }
        this.added = true;
        Ok(this)
    }

    /// Removes the disk from the system: waits for open I/O to finish and fails new I/O.
    fn remove(&mut self) {
        self.unfreeze_non_owner();
        if self.added {
            self.added = false;
            // SAFETY: the disk was added (invariant) and is deleted once.
            unsafe { bindings::del_gendisk(self.disk.as_ptr()) };
        }
    }
}

impl<T: BlkOps> Disk<'_, T> {
    fn unfreeze_non_owner(&mut self) {
        if self.held {
            self.held = false;
            // SAFETY: the disk is alive (invariant) and its queue was frozen by
            // `freeze_disks_non_owner`, once.
            unsafe { bindings::blk_mq_unfreeze_queue_non_owner((*self.disk.as_ptr()).queue) };
        }
    }
}

impl<T: BlkOps> Drop for Disk<'_, T> {
    fn drop(&mut self) {
        self.remove();
        // SAFETY: allocated in `new`; our reference is dropped once. The request queue is
        // gone once this returns, so `data` is no longer referenced by it.
        unsafe { bindings::put_disk(self.disk.as_ptr()) };
    }
}

/// The `blk_mq_ops` of a [`BlkOps`] implementor.
struct Ops<T: BlkOps>(PhantomData<T>);

impl<T: BlkOps> Ops<T> {
    const OPS: bindings::blk_mq_ops = bindings::blk_mq_ops {
        queue_rq: Some(Self::queue_rq),
        commit_rqs: Some(Self::commit_rqs),
        complete: Some(Self::complete),
        init_hctx: Some(Self::init_hctx),
        init_request: Some(Self::init_request),
        map_queues: Some(Self::map_queues),
        timeout: Some(Self::timeout),
        poll: Some(Self::poll),
        ..pin_init::zeroed()
    };

    /// # Safety
    ///
    /// `hctx` belongs to a queue of a tag set created by [`TagSet::new`] for `T`, after
    /// `init_hctx` ran.
    unsafe fn queue<'h>(hctx: *mut bindings::blk_mq_hw_ctx) -> &'h T::Queue<'h> {
        // SAFETY: `init_hctx` stored a pointer to a queue in the set data, which lives as
        // long as the tag set.
        unsafe { &*(*hctx).driver_data.cast::<T::Queue<'h>>() }
    }

    /// # Safety
    ///
    /// Only called by blk-mq, for a tag set created by [`TagSet::new`] for `T`.
    unsafe extern "C" fn queue_rq(
        hctx: *mut bindings::blk_mq_hw_ctx,
        bd: *const bindings::blk_mq_queue_data,
    ) -> bindings::blk_status_t {
        // SAFETY: blk-mq passes a live hctx of our set and a request it hands to us.
        let (q, rq, last) = unsafe { (Self::queue(hctx), Request::from_raw((*bd).rq), (*bd).last) };
        T::queue_rq(q, rq, last) as bindings::blk_status_t
    }

    /// # Safety
    ///
    /// Only called by blk-mq, for a tag set created by [`TagSet::new`] for `T`.
    unsafe extern "C" fn commit_rqs(hctx: *mut bindings::blk_mq_hw_ctx) {
        // SAFETY: blk-mq passes a live hctx of our set.
        T::commit_rqs(unsafe { Self::queue(hctx) })
    }

    /// # Safety
    ///
    /// Only called by blk-mq, for a tag set created by [`TagSet::new`] for `T`.
    unsafe extern "C" fn complete(rq: *mut bindings::request) {
        // SAFETY: blk-mq passes a request of our set that we completed.
        T::complete(unsafe { Request::from_raw(rq) })
    }

    /// # Safety
    ///
    /// Only called by blk-mq, for a tag set created by [`TagSet::new`] for `T`.
    unsafe extern "C" fn poll(
        hctx: *mut bindings::blk_mq_hw_ctx,
        _iob: *mut bindings::io_comp_batch,
    ) -> c_int {
        // SAFETY: blk-mq passes a live hctx of our set.
        T::poll(unsafe { Self::queue(hctx) }) as c_int
    }

    /// # Safety
    ///
    /// Only called by blk-mq, for a tag set created by [`TagSet::new`] for `T`.
    unsafe extern "C" fn timeout(rq: *mut bindings::request) -> bindings::blk_eh_timer_return {
        // SAFETY: blk-mq passes a request of our set that timed out, holding a reference to
        // it and to its queue; its hctx was initialized by `init_hctx`.
        let (q, set, rq) = unsafe {
            (
                Self::queue((*rq).mq_hctx),
                (*(*rq).q).tag_set,
                Request::from_raw(rq),
            )
        };
        let Some(set) = NonNull::new(set) else {
            return bindings::blk_eh_timer_return_BLK_EH_RESET_TIMER;
        };
        // The tag set outlives its request queues, so it is alive during this call.
        let set = TagSetRef {
            set,
            _p: PhantomData,
        };
        match T::timeout(set, q, rq) {
            Timeout::Done => bindings::blk_eh_timer_return_BLK_EH_DONE,
            Timeout::ResetTimer => bindings::blk_eh_timer_return_BLK_EH_RESET_TIMER,
        }
    }

    /// # Safety
    ///
    /// Only called by blk-mq, for a tag set created by [`TagSet::new`] for `T`.
    unsafe extern "C" fn init_hctx(
        hctx: *mut bindings::blk_mq_hw_ctx,
        driver_data: *mut c_void,
        index: c_uint,
    ) -> c_int {
        // SAFETY: `driver_data` is the set's `driver_data`, our `SetHeader`.
        let header = unsafe { &*driver_data.cast::<SetHeader<'_, T>>() };
        let Some(q) = T::queue(&header.data, index) else {
            return EINVAL.to_errno();
        };
        // SAFETY: `hctx` is being initialized by blk-mq and its `tags` are set.
        let Some(tags) = NonNull::new(unsafe { (*hctx).tags }) else {
            return EINVAL.to_errno();
        };
        T::init_queue(
            q,
            Tags {
                tags,
                _p: PhantomData,
            },
        );
        // SAFETY: as above; `q` lives as long as the set.
        unsafe { (*hctx).driver_data = core::ptr::from_ref::<T::Queue<'_>>(q).cast_mut().cast() };
        0
    }

    /// # Safety
    ///
    /// Only called by blk-mq, for a tag set created by [`TagSet::new`] for `T`.
    unsafe extern "C" fn init_request(
        _set: *mut bindings::blk_mq_tag_set,
        rq: *mut bindings::request,
        _hctx_idx: c_uint,
        _numa_node: c_int,
    ) -> c_int {
        // SAFETY: blk-mq allocated `cmd_size` bytes behind `rq` for our PDU; writing each
        // field initializes it (never dropped: the driver state holds no resources). The
        // scatterlist is zeroed in place rather than built on the stack (4 KiB).
        unsafe {
            let pdu = rq_to_pdu(rq).cast::<Pdu<T>>();
            (&raw mut (*pdu).nents).write(AtomicU32::new(0));
            (&raw mut (*pdu).single_addr).write(AtomicU64::new(0));
            (&raw mut (*pdu).single_len).write(AtomicU32::new(0));
            (&raw mut (*pdu).mapped).write(AtomicU32::new(0));
            (&raw mut (*pdu).drv).write(T::new_rq());
            (&raw mut (*pdu).sg).write_bytes(0, 1);
        }
        0
    }

    /// # Safety
    ///
    /// Only called by blk-mq, for a tag set created by [`TagSet::new`] for `T`.
    unsafe extern "C" fn map_queues(set: *mut bindings::blk_mq_tag_set) {
        // SAFETY: `set` is our tag set; `driver_data` points to its header; `nr_maps` maps
        // exist.
        unsafe {
            let header = &*(*set).driver_data.cast::<SetHeader<'_, T>>();
            let map = &raw mut (*set).map[bindings::hctx_type_HCTX_TYPE_DEFAULT as usize];
            (*map).nr_queues = header.nr_default;
            (*map).queue_offset = 0;
            match header.irq_dev {
                Some((dev, first)) => bindings::blk_mq_map_hw_queues(map, dev, first),
                None => bindings::blk_mq_map_queues(map),
            }
            if (*set).nr_maps > bindings::hctx_type_HCTX_TYPE_POLL {
                // No read queues: reads share the default ones.
                let read = &raw mut (*set).map[bindings::hctx_type_HCTX_TYPE_READ as usize];
                (*read).nr_queues = 0;
                // Polled queues have no interrupt, hence no affinity: spread them evenly.
                let poll = &raw mut (*set).map[bindings::hctx_type_HCTX_TYPE_POLL as usize];
                (*poll).nr_queues = header.nr_poll;
                (*poll).queue_offset = header.nr_default;
                bindings::blk_mq_map_queues(poll);
            }
        }
    }
}
