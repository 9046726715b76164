// SPDX-License-Identifier: GPL-2.0

//! The driver's side of a tag set and the `blk_mq_ops` table calling it (upstream:
//! `kernel::block::mq::operations`).

use super::{
    request::{rq_to_pdu, Dispatched, Owned, Pdu, CLAIM_CLOSED},
    tag_set::SetHeader,
    BlkStatus, Request, TagSetRef, Tags, ZoneReporter, ZonedDisk,
};
use crate::kernel_ext::sysfs::SysfsBuf;
use core::{
    ffi::{c_int, c_uint, c_void},
    fmt,
    marker::PhantomData,
    ptr::{null_mut, NonNull},
    sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed},
};
use kernel::{bindings, prelude::*, str::CStr};

/// The driver side of a tag set (upstream's `Operations`, with the callbacks an NVMe driver
/// needs beyond rnull's: upstream candidates).
///
/// `SetData`, `Queue` and `DiskData` may borrow from the bound device (lifetime `'a`); the
/// owner of the [`TagSet`] and [`GenDisk`]s keeps them inside that lifetime.
pub(crate) trait Operations: Sized + 'static {
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

    /// The queue serving hardware queue `index`. Upstream candidate.
    fn queue<'a>(set: &'a Self::SetData<'a>, index: u32) -> Option<&'a Self::Queue<'a>>;
    /// Called when blk-mq attaches `tags` to hardware queue `q`. Upstream candidate.
    fn init_queue(q: &Self::Queue<'_>, tags: Tags<Self>);
    /// Initial value of the driver state of a request. Upstream candidate.
    fn new_rq() -> Self::Rq;
    /// Issue `rq` on `q`. `last` is false when more requests follow in this batch and
    /// [`Self::commit_rqs`] will be called. Upstream: `Operations::queue_rq`.
    fn queue_rq(q: &Self::Queue<'_>, rq: Dispatched<'_, Self>, last: bool) -> BlkStatus;
    /// End of a batch whose last request did not have `last` set. Upstream:
    /// `Operations::commit_rqs`.
    fn commit_rqs(q: &Self::Queue<'_>);
    /// Completion, in the context blk-mq chose, after [`Claimed::complete`]: the driver ends
    /// or requeues `rq`. Upstream: `Operations::complete`.
    ///
    /// [`Claimed::complete`]: super::request::Claimed::complete
    fn complete(rq: Owned<'_, Self>);
    /// A request that completed successfully is about to be ended as part of a
    /// [`CompletionBatch`], which ends it: release what the driver holds for it (its DMA
    /// mapping). Upstream candidate.
    fn end_batched(rq: &Owned<'_, Self>);
    /// Reaps completions of polled queue `q` (no interrupt); returns how many were found.
    /// Upstream: `Operations::poll`, which takes no queue.
    fn poll(q: &Self::Queue<'_>) -> u32;
    /// `rq` has been in flight for longer than the queue's timeout. Runs in process context
    /// (blk-mq's timeout work) and may sleep; `set` is the tag set `rq` belongs to. Upstream
    /// candidate.
    fn timeout(set: TagSetRef<'_, Self>, q: &Self::Queue<'_>, rq: &Request<Self>) -> Timeout;
    /// The outcome of a driver-private request started for an io_uring command, read when
    /// it ends (`ok`: the block layer ended it without error): the completion's value and
    /// its second result. Upstream candidate.
    fn private_outcome(_rq: &Self::Rq, ok: bool) -> (i32, u64) {
        (if ok { 0 } else { EIO.to_errno() }, 0)
    }
    /// Reports the zones of zoned disk `disk` from the one holding `sector`, at most
    /// `nr_zones`, to `to`; returns how many it reported. May sleep (process context, the
    /// disk's queue not frozen). Upstream candidate.
    fn report_zones(
        _disk: &ZonedDisk<'_, Self>,
        _sector: u64,
        _nr_zones: u32,
        _to: &mut ZoneReporter<'_>,
    ) -> Result<u32> {
        Err(EOPNOTSUPP)
    }
    /// An ioctl on the disk's block device that the block layer does not handle itself;
    /// `writable` says whether the device was opened for writing, `partition` whether it is
    /// one of the disk's partitions. Upstream candidate.
    fn ioctl(
        p: &Self::Private,
        writable: bool,
        partition: bool,
        cmd: u32,
        arg: usize,
    ) -> Result<isize>;
    /// The disk is about to be deleted (`del_gendisk`): e.g. a stacking disk must stop
    /// sending it bios first. Upstream candidate.
    fn disk_removing(_d: &Self::DiskData<'_>) {}

    /// Names of the disk's read-only sysfs attributes (`/sys/block/<disk>/<name>`). Upstream
    /// candidate.
    const DISK_ATTRS: &'static [&'static CStr] = &[];
    /// Whether the disk has attribute `index` of [`Self::DISK_ATTRS`] (asked once, when the
    /// disk is added). Upstream candidate.
    fn disk_attr_visible(_p: &Self::Private, _index: usize) -> bool {
        true
    }
    /// Writes attribute `index` of [`Self::DISK_ATTRS`]. Upstream candidate.
    fn disk_attr_show(_p: &Self::Private, _index: usize, _out: &mut SysfsBuf<'_>) -> fmt::Result {
        Err(fmt::Error)
    }

    /// Proof that `SetData` is covariant in its lifetime: implement it as `d`, which only
    /// compiles for a covariant type. [`TagSetRef::data`] relies on it to lend data made for a
    /// longer lifetime as data for the borrow's (it cannot name the longer one). Upstream
    /// candidate.
    #[allow(dead_code, reason = "a proof checked by the compiler, never called")]
    fn shorten_set<'s, 'l: 's>(d: &'s Self::SetData<'l>) -> &'s Self::SetData<'s>;
    /// The same proof for `DiskData`, which [`Request::disk`] relies on. Upstream candidate.
    #[allow(dead_code, reason = "a proof checked by the compiler, never called")]
    fn shorten_disk<'s, 'l: 's>(d: &'s Self::DiskData<'l>) -> &'s Self::DiskData<'s>;
}

/// What the driver did about a request that timed out. Upstream candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Timeout {
    /// The request was completed (or will be, by the driver): do not re-arm its timer.
    Done,
    /// Give the request another timeout period (e.g. an abort was sent for it).
    ResetTimer,
}

/// The `blk_mq_ops` of a [`Operations`] implementor.
pub(super) struct OperationsVTable<T: Operations>(PhantomData<T>);

impl<T: Operations> OperationsVTable<T> {
    pub(super) const OPS: bindings::blk_mq_ops = bindings::blk_mq_ops {
        queue_rq: Some(Self::queue_rq),
        commit_rqs: Some(Self::commit_rqs),
        queue_rqs: Some(Self::queue_rqs),
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

    /// Also called by [`Self::queue_rqs`], into which it is not inlined: one copy of the issue
    /// path, laid out as blk-mq's direct calls found it.
    ///
    /// # Safety
    ///
    /// Only called by blk-mq or [`Self::queue_rqs`], for a request of a tag set created by
    /// [`TagSet::new`] for `T` that blk-mq handed to the caller.
    #[inline(never)]
    unsafe extern "C" fn queue_rq(
        hctx: *mut bindings::blk_mq_hw_ctx,
        bd: *const bindings::blk_mq_queue_data,
    ) -> bindings::blk_status_t {
        // SAFETY: blk-mq passes a live hctx of our set and a request it hands to us.
        let (q, rq, last) = unsafe { (Self::queue(hctx), Request::from_raw((*bd).rq), (*bd).last) };
        // Claimed in a previous dispatch (then ended or requeued): closed until started.
        rq.pdu().claim.store(CLAIM_CLOSED, Relaxed);
        // blk-mq ends a request `queue_rq` failed: not one whose completion is claimed.
        // SAFETY: blk-mq handed `rq` to this `queue_rq`, which the token does not outlive.
        let status = T::queue_rq(q, unsafe { Dispatched::new(rq) }, last);
        rq.refuse(status) as bindings::blk_status_t
    }

    /// A plug's list of requests for one request queue, possibly for several of its hardware
    /// queues (blk-mq's `queue_rqs`, C's `nvme_queue_rqs`): each goes through `queue_rq`
    /// with `last` false, and each hardware queue gets one [`Operations::commit_rqs`] when its
    /// run of requests ends, if any was issued (one doorbell per run, and none of blk-mq's
    /// per-request dispatch). A refused request is dealt with as blk-mq deals with one
    /// `queue_rq` refused when it issues a list itself (`blk_mq_issue_direct`): ended with
    /// the status, or, short of resources, left on the list (not started) or requeued
    /// (started) for blk-mq to issue again. Upstream candidate.
    ///
    /// # Safety
    ///
    /// Only called by blk-mq, for a tag set created by [`TagSet::new`] for `T`.
    unsafe extern "C" fn queue_rqs(list: *mut bindings::rq_list) {
        // SAFETY: blk-mq hands us its list, whose requests are ours until we return.
        let list = unsafe { &mut *list };
        let mut left = bindings::rq_list {
            head: null_mut(),
            tail: null_mut(),
        };
        // The hardware queue of the current run of requests, and how many it issued.
        let mut run: *mut bindings::blk_mq_hw_ctx = null_mut();
        let mut issued = 0u32;
        while let Some(rq) = NonNull::new(list.head) {
            let rq = rq.as_ptr();
            // SAFETY: `rq` heads the list blk-mq handed us (`rq_list_pop`).
            let hctx = unsafe {
                list.head = (*rq).__bindgen_anon_1.rq_next;
                (*rq).__bindgen_anon_1.rq_next = null_mut();
                (*rq).mq_hctx
            };
            if run != hctx {
                if issued > 0 {
                    // SAFETY: `run` is a live hctx of our set: hardware contexts live as long
                    // as their request queue, which the plug's requests hold.
                    T::commit_rqs(unsafe { Self::queue(run) });
                }
                (run, issued) = (hctx, 0);
            }
            let bd = bindings::blk_mq_queue_data { rq, last: false };
            // SAFETY: blk-mq handed `rq`, a request of our set, to this `queue_rqs`; `hctx` is
            // its live hctx.
            let status = unsafe { Self::queue_rq(hctx, &bd) };
            if status == BlkStatus::Ok as bindings::blk_status_t {
                issued += 1;
                continue;
            }
            // SAFETY: blk-mq handed us `rq`; `queue_rq` refused it, closing its claim.
            let started = unsafe { Request::<T>::from_raw(rq) }.started();
            if status != BlkStatus::Resource as bindings::blk_status_t {
                // SAFETY: a request `queue_rq` refused and nobody claimed: ours to end.
                unsafe { bindings::blk_mq_end_request(rq, status) };
            } else if started {
                // SAFETY: as above: ours to requeue.
                unsafe { bindings::blk_mq_requeue_request(rq, true) };
            } else {
                // `rq_list_add_tail`.
                // SAFETY: `left.tail`, if set, is a request we put on `left`.
                unsafe {
                    match NonNull::new(left.tail) {
                        Some(tail) => (*tail.as_ptr()).__bindgen_anon_1.rq_next = rq,
                        None => left.head = rq,
                    }
                }
                left.tail = rq;
            }
        }
        if issued > 0 {
            // SAFETY: as above.
            T::commit_rqs(unsafe { Self::queue(run) });
        }
        *list = left;
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
        // SAFETY: blk-mq passes a request of our set that a `Claimed` completed, once, for
        // the driver to end.
        T::complete(unsafe { Owned::new(Request::from_raw(rq)) })
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
        // INVARIANT: the tag set outlives its request queues, so it is alive during this call.
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
            // INVARIANT: blk-mq set this queue's tags, which live as long as the tag set.
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
        // field initializes it (never dropped: the driver state holds no resources, and a
        // request's scatterlist is freed when it is unmapped).
        unsafe {
            let pdu = rq_to_pdu(rq).cast::<Pdu<T>>();
            (&raw mut (*pdu).nents).write(AtomicU32::new(0));
            (&raw mut (*pdu).single_addr).write(AtomicU64::new(0));
            (&raw mut (*pdu).single_len).write(AtomicU32::new(0));
            (&raw mut (*pdu).mapped).write(AtomicU32::new(0));
            // Closed until `Request::start`.
            (&raw mut (*pdu).claim).write(AtomicU8::new(CLAIM_CLOSED));
            (&raw mut (*pdu).meta_mapped).write(AtomicU32::new(0));
            (&raw mut (*pdu).meta_sg).write_bytes(0, 1);
            (&raw mut (*pdu).drv).write(T::new_rq());
            (&raw mut (*pdu).sg).write(AtomicPtr::new(null_mut()));
            (&raw mut (*pdu).sg_cap).write(AtomicU32::new(0));
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
            if (*set).nr_maps > bindings::hctx_type_HCTX_TYPE_READ {
                // Read queues follow the default ones, their vectors too (a set of their
                // own, spread over every CPU). None: blk-mq sends reads to the default map.
                let read = &raw mut (*set).map[bindings::hctx_type_HCTX_TYPE_READ as usize];
                (*read).nr_queues = header.nr_read;
                (*read).queue_offset = header.nr_default;
                if header.nr_read > 0 {
                    match header.irq_dev {
                        Some((dev, first)) => {
                            bindings::blk_mq_map_hw_queues(read, dev, first + header.nr_default)
                        }
                        None => bindings::blk_mq_map_queues(read),
                    }
                }
            }
            if (*set).nr_maps > bindings::hctx_type_HCTX_TYPE_POLL {
                // Polled queues have no interrupt, hence no affinity: spread them evenly.
                let poll = &raw mut (*set).map[bindings::hctx_type_HCTX_TYPE_POLL as usize];
                (*poll).nr_queues = header.nr_poll;
                (*poll).queue_offset = header.nr_default + header.nr_read;
                bindings::blk_mq_map_queues(poll);
            }
        }
    }
}
