// SPDX-License-Identifier: GPL-2.0

//! A blk-mq tag set, its queues' tags and its disks (upstream: `kernel::block::mq::tag_set`).
//!
//! The tag set is reference counted and never changes once made: error recovery reaches it
//! (quiesce, cancel) without taking any lock. Its disks are a separate [`Disks`] list, which
//! holds a reference to the set (so the set is freed after every disk) and has a scan lock
//! of its own: a task that waits for I/O holding it never stands in the way of the
//! recovery that ends that I/O.

use super::{operations::OperationsVTable, request::Pdu, Operations, Request};
use crate::kernel_ext::device_raw;
use core::{
    ffi::{c_uint, c_void},
    marker::PhantomData,
    ptr::NonNull,
    sync::atomic::{AtomicPtr, Ordering},
};
use kernel::{
    bindings,
    device::{Bound, Device},
    new_mutex,
    prelude::*,
    sync::{
        lock::{mutex::MutexBackend, Guard},
        Arc, Mutex,
    },
    types::Opaque,
};

/// What the set's `driver_data` points to.
#[pin_data]
pub(super) struct SetHeader<'a, T: Operations> {
    /// Device whose MSI-X vector affinity the queue map follows, and the first vector used
    /// by hardware queue 0; `None` maps queues to CPUs evenly.
    pub(super) irq_dev: Option<(*mut bindings::device, u32)>,
    /// Hardware queues with interrupts (the default map, then the read map), then polled
    /// ones (the poll map).
    pub(super) nr_default: u32,
    pub(super) nr_read: u32,
    pub(super) nr_poll: u32,
    pub(super) data: T::SetData<'a>,
    /// How many quiesces of the whole set are in force ([`TagSetRef::quiesce`] less
    /// [`TagSetRef::unquiesce`]). blk-mq quiesces the queues on the set when asked, not
    /// the ones added later: a disk's queue made meanwhile (out of the set's quiesces until
    /// then, `BLK_FEAT_SKIP_TAGSET_QUIESCE`) is quiesced as many times and taken into them
    /// under this lock, so it waits for the recovery as the others do and the set's
    /// unquiesce finds it quiesced. Held across the quiesce (waits for `queue_rq` calls to
    /// return, never for I/O), the unquiesce and that taking in (no wait); never across a
    /// queue's allocation, which may freeze the set's other queue.
    #[pin]
    pub(super) quiesced: Mutex<u32>,
}

/// A blk-mq tag set and the driver's data for it. Upstream: `kernel::block::mq::TagSet`
/// (also reference counted there: its disks hold it).
///
/// # Invariants
///
/// `set` was initialized by `blk_mq_alloc_tag_set` with `driver_data` pointing to `header`
/// and is freed in `drop`, before `header`. Every disk on it is in a [`Disks`] holding a
/// reference to it, so none is left when it is dropped.
pub(crate) struct TagSet<'a, T: Operations> {
    set: Pin<KBox<Opaque<bindings::blk_mq_tag_set>>>,
    /// Only reached through the set's `driver_data`.
    _header: Pin<KBox<SetHeader<'a, T>>>,
}

// SAFETY: The tag set is a C object designed for concurrent use; the header is only read,
// and its data is lent (`TagSetRef::data`) to any thread holding a reference: it must be
// `Sync` as well as `Send`.
unsafe impl<T: Operations> Send for TagSet<'_, T> where T::SetData<'static>: Send + Sync {}
// SAFETY: As above: shared references only read the header and lend its data.
unsafe impl<T: Operations> Sync for TagSet<'_, T> where T::SetData<'static>: Sync {}

impl<'a, T: Operations> TagSet<'a, T> {
    /// Creates a tag set of `nr_hw_queues` queues with interrupts, `nr_read` queues with
    /// interrupts for reads only after them (the others take writes and every other
    /// request; 0: reads too), and `nr_poll` polled queues last (for `REQ_POLLED` I/O,
    /// io_uring's IOPOLL), of `depth` tags each. Upstream: `TagSet::new`; upstream
    /// candidate: read and polled queues, the timeout and a queue map that follows the
    /// interrupt vectors.
    ///
    /// `irq` (the device and the vector of hardware queue 0) maps CPUs to queues by the
    /// vectors' affinity, so a request completes on a CPU that submitted to its queue.
    pub(crate) fn new(
        nr_hw_queues: u32,
        nr_read: u32,
        nr_poll: u32,
        depth: u32,
        timeout_jiffies: u32,
        irq: Option<(&Device<Bound>, u32)>,
        data: T::SetData<'a>,
    ) -> Result<Arc<Self>> {
        let header = KBox::pin_init(
            pin_init!(SetHeader {
                irq_dev: irq.map(|(d, v)| (device_raw(d), v)),
                nr_default: nr_hw_queues,
                nr_read,
                nr_poll,
                data,
                quiesced <- new_mutex!(0),
            }),
            GFP_KERNEL,
        )?;
        let set = KBox::pin(Opaque::<bindings::blk_mq_tag_set>::zeroed(), GFP_KERNEL)?;
        let raw = set.get();
        // SAFETY: `raw` is zeroed, pinned memory for a tag set; `OPS` lives forever; the
        // header outlives the set (invariant: freed after it in `drop`).
        let ret = unsafe {
            (*raw).ops = &OperationsVTable::<T>::OPS;
            (*raw).nr_hw_queues = nr_hw_queues + nr_read + nr_poll;
            // The default map, then the read map (empty without read queues: reads use the
            // default one), then the poll map, as far as needed.
            (*raw).nr_maps = if nr_poll > 0 {
                bindings::hctx_type_HCTX_TYPE_POLL + 1
            } else if nr_read > 0 {
                bindings::hctx_type_HCTX_TYPE_READ + 1
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
        // INVARIANT: `set` was initialized with `driver_data` pointing to `header`; the
        // fields drop in order (`set` before `_header`); disks are only made by `Disks`,
        // which holds a reference.
        // (Should the `Arc` not be allocated, the set is dropped, hence freed.)
        Ok(Arc::new(
            Self {
                set,
                _header: header,
            },
            GFP_KERNEL,
        )?)
    }

    pub(super) fn raw(&self) -> *mut bindings::blk_mq_tag_set {
        self.set.get()
    }

    /// The count of quiesces in force, locked: a disk's queue is allocated under it.
    pub(super) fn quiesced(&self) -> Guard<'_, u32, MutexBackend> {
        self._header.quiesced.lock()
    }

    /// A handle for error recovery: quiescing, cancelling requests, the driver's set data.
    /// Upstream candidate.
    pub(crate) fn handle(&self) -> TagSetRef<'_, T> {
        // INVARIANT: the set was created by `TagSet::new` and lives as long as `self`.
        TagSetRef {
            // SAFETY: `set` is a live, pinned allocation (invariant), so never null.
            set: unsafe { NonNull::new_unchecked(self.raw()) },
            _p: PhantomData,
        }
    }
}

/// A borrowed tag set, as error recovery needs it. Upstream candidate.
///
/// # Invariants
///
/// `set` is a tag set created by [`TagSet::new`] for `T`, alive for `'s`.
pub(crate) struct TagSetRef<'s, T: Operations> {
    pub(super) set: NonNull<bindings::blk_mq_tag_set>,
    pub(super) _p: PhantomData<(&'s (), T)>,
}

impl<'s, T: Operations> TagSetRef<'s, T> {
    /// The driver's data of the set. Upstream candidate.
    pub(crate) fn data(&self) -> &'s T::SetData<'s> {
        &self.header().data
    }

    fn header(&self) -> &'s SetHeader<'s, T> {
        // Data made for a lifetime outliving the set is a valid `SetData<'s>`: `SetData` is
        // covariant (`Operations::shorten_set`).
        // SAFETY: `driver_data` is the set's `SetHeader`, alive for `'s` (type invariants).
        unsafe { &*(*self.set.as_ptr()).driver_data.cast::<SetHeader<'s, T>>() }
    }

    /// Stops blk-mq from calling `queue_rq` on any queue of the set, those of disks added
    /// meanwhile too; returns once no call is running. Requests keep queueing (and requeued
    /// ones wait) until [`Self::unquiesce`]. Quiesces nest. Upstream candidate.
    pub(crate) fn quiesce(&self) {
        let mut quiesced = self.header().quiesced.lock();
        // SAFETY: the set is alive (invariant).
        unsafe { bindings::blk_mq_quiesce_tagset(self.set.as_ptr()) };
        *quiesced += 1;
    }

    /// Ends one [`Self::quiesce`]: with the last, blk-mq dispatches again and runs the
    /// queues. Upstream candidate.
    pub(crate) fn unquiesce(&self) {
        let mut quiesced = self.header().quiesced.lock();
        *quiesced = quiesced.saturating_sub(1);
        // SAFETY: the set is alive (invariant).
        unsafe { bindings::blk_mq_unquiesce_tagset(self.set.as_ptr()) };
    }

    /// Calls `f` for every request of the set that is in flight (issued, not completed). `f`
    /// may complete the request. Upstream candidate.
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
    /// [`Operations::complete`] and ended or requeued. Upstream candidate.
    pub(crate) fn wait_completed(&self) {
        // SAFETY: the set is alive (invariant).
        unsafe { bindings::blk_mq_tagset_wait_completed_request(self.set.as_ptr()) };
    }
}

impl<T: Operations> Drop for TagSet<'_, T> {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` (invariant); every disk using it was released first (the
        // `Disks` holding them held a reference to `self`).
        unsafe { bindings::blk_mq_free_tag_set(self.raw()) };
    }
}

/// The tags of one hardware queue: command identifier to request. Upstream candidate.
///
/// # Invariants
///
/// `tags` are the tags of a hardware queue of a tag set created by [`TagSet::new`] for `T`,
/// valid for the tag set's life.
pub(crate) struct Tags<T: Operations> {
    pub(super) tags: NonNull<bindings::blk_mq_tags>,
    pub(super) _p: PhantomData<T>,
}

// SAFETY: `blk_mq_tags` is shared by all CPUs submitting to and completing on its queue;
// lookups only read `nr_tags` and `rqs[]`, which blk-mq keeps valid for the tag set's life.
unsafe impl<T: Operations> Send for Tags<T> {}
// SAFETY: see `Send`.
unsafe impl<T: Operations> Sync for Tags<T> {}

/// The request that `tag` refers to, if `tag` is in range and that request is in flight
/// (started and not completed). A device that reports a tag we never issued, or one twice,
/// gets `None` instead of another request.
///
/// # Safety
///
/// `tags` are the tags of a hardware queue of a tag set created for `T`, valid for `'r`.
#[inline]
unsafe fn in_flight<'r, T: Operations>(
    tags: NonNull<bindings::blk_mq_tags>,
    tag: u32,
) -> Option<&'r Request<T>> {
    let tags = tags.as_ptr();
    {
        // SAFETY: `tags` is valid (the caller's contract); `rqs` has `nr_tags` entries
        // (`blk_mq_tag_to_rq`, a static inline, does the same).
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
        // SAFETY: `rq` is a live request of a tag set created for `T`, which lives for `'r`.
        Some(unsafe { Request::from_raw(rq) })
    }
}

/// A hardware queue's [`Tags`], set once when blk-mq attaches them ([`Operations::init_queue`])
/// and looked up on every completion. Upstream candidate.
///
/// `SetOnce<Tags<T>>` would do, but its read is an acquire load through an out-of-line LKMM
/// helper call on every completion; this is a core atomic pointer, whose acquire load is a
/// plain load on x86 and an `ldar` on arm64, as `READ_ONCE` plus a barrier would be.
///
/// # Invariants
///
/// `tags` is null or the pointer of a [`Tags<T>`] (so it keeps that type's invariant).
pub(crate) struct QueueTags<T: Operations> {
    tags: AtomicPtr<bindings::blk_mq_tags>,
    _p: PhantomData<T>,
}

impl<T: Operations> QueueTags<T> {
    /// No tags yet. Upstream candidate.
    pub(crate) const fn new() -> Self {
        // INVARIANT: null.
        Self {
            tags: AtomicPtr::new(core::ptr::null_mut()),
            _p: PhantomData,
        }
    }

    /// Sets the tags; keeps the first ones if already set (every namespace's request queue
    /// of one tag set brings the same tags). Upstream candidate.
    pub(crate) fn set(&self, tags: Tags<T>) {
        // INVARIANT: the pointer of a `Tags<T>`.
        let _ = self.tags.compare_exchange(
            core::ptr::null_mut(),
            tags.tags.as_ptr(),
            Ordering::Release,
            Ordering::Relaxed,
        );
    }

    /// The request that `tag` refers to, if `tag` is in range and that request is in flight
    /// (started and not completed); `None` before the tags are set. A device that reports a
    /// tag we never issued, or one twice, gets `None` instead of another request. Upstream
    /// candidate.
    #[inline]
    pub(crate) fn in_flight(&self, tag: u32) -> Option<&Request<T>> {
        let tags = NonNull::new(self.tags.load(Ordering::Acquire))?;
        // SAFETY: a non-null pointer here is that of a `Tags<T>` (type invariant), valid for
        // the tag set's life, which `self` (data of a queue the tag set serves) does not
        // outlive.
        unsafe { in_flight(tags, tag) }
    }
}
