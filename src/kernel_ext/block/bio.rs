// SPDX-License-Identifier: GPL-2.0

//! Bios as a stacking (bio-based) driver handles them: redirected to another disk, ended,
//! kept on a list, taken back from a request that failed. Upstream candidate: 7.3's
//! `kernel::block` has no bio type of its own (only `bio_vec` iteration in rnull's
//! neighbourhood).
//!
//! Ownership follows the C rules: a [`Bio`] is a bio the driver must pass on (submit), end or
//! keep on a [`BioList`]; each of those consumes it, so safe code cannot end a bio twice or
//! forget one. A [`DiskHandle`] is a counted reference to a disk, so a bio can be sent to a
//! disk whose owner removes it meanwhile: the block layer then fails the bio, it never
//! touches freed memory.

use super::mq::{BlkStatus, Operations, Owned};
use crate::kernel_ext::sync::MemallocNoio;
use core::ptr::{null_mut, NonNull};
use kernel::{alloc::KVec, bindings};

/// `REQ_NOWAIT` and `REQ_POLLED` (include/linux/blk_types.h; `__force` casts bindgen cannot
/// evaluate).
const REQ_NOWAIT: u32 = 1 << bindings::req_flag_bits___REQ_NOWAIT;
const REQ_POLLED: u32 = 1 << bindings::req_flag_bits___REQ_POLLED;

/// A counted reference to a disk (its `part0` device). Upstream candidate, as an
/// `ARef<GenDisk>`.
///
/// # Invariants
///
/// `disk` is a `gendisk` on whose device (`disk_to_dev`) this handle holds a reference, so
/// the structure, its `part0` and its request queue stay allocated until it is dropped.
pub(crate) struct DiskHandle {
    disk: NonNull<bindings::gendisk>,
}

// SAFETY: a device reference may be taken and dropped on any thread; the disk is a kernel
// object usable from any thread.
unsafe impl Send for DiskHandle {}
// SAFETY: as above; `&DiskHandle` only reads the pointer.
unsafe impl Sync for DiskHandle {}

impl DiskHandle {
    /// Takes a reference to `disk`.
    ///
    /// # Safety
    ///
    /// `disk` points to a live `gendisk` (one the caller holds a reference to).
    pub(super) unsafe fn get(disk: NonNull<bindings::gendisk>) -> Self {
        // SAFETY: `disk` is live (see the safety section), so is its `part0`.
        unsafe { bindings::get_device(&raw mut (*(*disk.as_ptr()).part0).bd_device) };
        // INVARIANT: the reference was just taken.
        Self { disk }
    }

    /// The disk's whole-device block device.
    fn part0(&self) -> *mut bindings::block_device {
        // SAFETY: the disk stays allocated while this handle lives (invariant).
        unsafe { (*self.disk.as_ptr()).part0 }
    }

    /// Freezes the queues of `disks` (every freeze started first, so they drain together),
    /// until the returned guard is dropped on this task: what entered them has left, and new
    /// bios and requests wait at their entrance (C's `nvme_mpath_start_freeze` and
    /// `nvme_mpath_wait_freeze` on its heads). A disk removed meanwhile stays allocated (the
    /// handles) and is unfrozen all the same. Allocations by this task do no I/O meanwhile.
    /// Without a lockdep owner, as C's `nvme_mpath_start_freeze`: a task holds at most
    /// `MAX_LOCK_DEPTH` lock entries, fewer than the heads of a large subsystem would take.
    /// Upstream candidate.
    pub(crate) fn freeze_all(disks: KVec<DiskHandle>) -> FrozenDisks {
        let noio = MemallocNoio::save();
        for d in disks.iter() {
            // SAFETY: the handle keeps the disk and its queue allocated (invariant);
            // unfrozen once, by `FrozenDisks::drop`.
            unsafe { bindings::blk_freeze_queue_start_non_owner((*d.disk.as_ptr()).queue) };
        }
        for d in disks.iter() {
            // SAFETY: as above; the freeze was started.
            unsafe { bindings::blk_mq_freeze_queue_wait((*d.disk.as_ptr()).queue) };
        }
        FrozenDisks { disks, _noio: noio }
    }
}

/// Disks frozen by [`DiskHandle::freeze_all`]; unfrozen when dropped, on the task that froze
/// them (the guard is not `Send`: its `MemallocNoio` scope is the task's). Upstream
/// candidate.
pub(crate) struct FrozenDisks {
    disks: KVec<DiskHandle>,
    _noio: MemallocNoio,
}

impl Drop for FrozenDisks {
    fn drop(&mut self) {
        for d in self.disks.iter() {
            // SAFETY: frozen by `freeze_all`, once; the handle keeps the queue.
            unsafe { bindings::blk_mq_unfreeze_queue_non_owner((*d.disk.as_ptr()).queue) };
        }
    }
}

impl Clone for DiskHandle {
    fn clone(&self) -> Self {
        // SAFETY: `self` holds a reference, so the disk is live.
        unsafe { Self::get(self.disk) }
    }
}

impl Drop for DiskHandle {
    fn drop(&mut self) {
        // SAFETY: the reference taken in `get` is dropped once.
        unsafe { bindings::put_device(&raw mut (*self.part0()).bd_device) };
    }
}

/// A bio the driver owns: from its disk's `submit_bio`, or taken off a [`BioList`].
/// Upstream candidate.
///
/// # Invariants
///
/// `bio` is a bio nobody else may end or queue until this value is consumed.
pub(crate) struct Bio {
    bio: NonNull<bindings::bio>,
}

// SAFETY: a bio may be submitted or ended from any thread.
unsafe impl Send for Bio {}

impl Bio {
    /// # Safety
    ///
    /// `bio` is a live bio whose ownership the caller hands over (it was given to a
    /// `submit_bio` callback, or unlinked from a list the driver owns).
    pub(super) unsafe fn from_raw(bio: *mut bindings::bio) -> Option<Self> {
        // INVARIANT: ownership passed with the pointer (see the safety section).
        NonNull::new(bio).map(|bio| Self { bio })
    }

    fn into_raw(self) -> *mut bindings::bio {
        let bio = self.bio.as_ptr();
        core::mem::forget(self);
        bio
    }

    /// Splits the bio to its disk's queue limits, as a bio-based driver must before it
    /// passes it on (`bio_split_to_limits`): the first part comes back, the rest is
    /// resubmitted by the block layer. `None`: the block layer ended the bio (a bad bio).
    pub(crate) fn split_to_limits(self) -> Option<Self> {
        // SAFETY: we own the bio (invariant); its ownership passes to the block layer,
        // which returns the bio to go on with, or null if it ended it.
        unsafe { Self::from_raw(bindings::bio_split_to_limits(self.into_raw())) }
    }

    /// Redirects the bio to `to`'s whole disk and submits it there (C's `bio_set_dev`, then
    /// `submit_bio_noacct`). A removed disk fails it.
    pub(crate) fn submit_to(self, to: &DiskHandle) {
        let bio = self.into_raw();
        // As C's multipath, a bio sent just before the disk's owner deletes it fails at the
        // disk's queue (`bio_queue_enter`); the owner keeps the disk's memory until then.
        // SAFETY: we owned the bio, now the block layer's; `to` keeps `part0` valid.
        unsafe {
            set_dev(bio, to.part0());
            bindings::submit_bio_noacct(bio);
        }
    }

    /// Submits the bio again to the block device it names (a requeued bio, whose device was
    /// set when it was queued).
    pub(crate) fn resubmit(self) {
        // SAFETY: we owned the bio; its ownership passes to the block layer.
        unsafe { bindings::submit_bio_noacct(self.into_raw()) };
    }

    /// Ends the bio with `status` (`bio_io_error` for `IoErr`).
    pub(crate) fn end(self, status: BlkStatus) {
        let bio = self.into_raw();
        // SAFETY: we owned the bio; it is ended once, here.
        unsafe {
            (*bio).bi_status = status as u8;
            bindings::bio_endio(bio);
        }
    }
}

impl Drop for Bio {
    /// A bio dropped without being passed on would never end and hang its submitter: end it
    /// with an error instead. Only reached on a driver bug.
    fn drop(&mut self) {
        // SAFETY: we own the bio (invariant); it is ended once, here.
        unsafe {
            (*self.bio.as_ptr()).bi_status = BlkStatus::IoErr as u8;
            bindings::bio_endio(self.bio.as_ptr());
        }
    }
}

/// `bio_set_dev` (include/linux/bio.h, inline): the bio now names `bdev`; a remap or
/// throttling done for its old device is forgotten.
///
/// # Safety
///
/// The caller owns `bio`; `bdev` is a live block device.
unsafe fn set_dev(bio: *mut bindings::bio, bdev: *mut bindings::block_device) {
    // SAFETY: see the function's safety section.
    unsafe {
        (*bio).bi_flags &= !(1u16 << bindings::BIO_REMAPPED);
        if (*bio).bi_bdev != bdev {
            (*bio).bi_flags &= !(1u16 << bindings::BIO_BPS_THROTTLED);
        }
        (*bio).bi_bdev = bdev;
        #[cfg(CONFIG_BLK_CGROUP)]
        bindings::bio_associate_blkg(bio);
    }
}

/// A list of bios the driver keeps (C's `struct bio_list`, chained through `bi_next`).
/// Upstream candidate.
///
/// # Invariants
///
/// `head` is null or the first of a chain of owned bios linked by `bi_next` whose last is
/// `tail` (null with `head`).
pub(crate) struct BioList {
    head: *mut bindings::bio,
    tail: *mut bindings::bio,
}

// SAFETY: the bios it owns may be handled on any thread.
unsafe impl Send for BioList {}

impl BioList {
    pub(crate) const fn new() -> Self {
        // INVARIANT: empty.
        Self {
            head: null_mut(),
            tail: null_mut(),
        }
    }

    /// Appends `bio`.
    pub(crate) fn push(&mut self, bio: Bio) {
        let bio = bio.into_raw();
        // SAFETY: we own `bio` and the chain (invariant).
        unsafe {
            (*bio).bi_next = null_mut();
            if self.tail.is_null() {
                self.head = bio;
            } else {
                (*self.tail).bi_next = bio;
            }
        }
        // INVARIANT: appended at the tail.
        self.tail = bio;
    }

    /// Takes the first bio off the list.
    pub(crate) fn pop(&mut self) -> Option<Bio> {
        let bio = self.head;
        if bio.is_null() {
            return None;
        }
        // SAFETY: `bio` is the first of our chain (invariant).
        unsafe {
            self.head = (*bio).bi_next;
            (*bio).bi_next = null_mut();
        }
        if self.head.is_null() {
            self.tail = null_mut();
        }
        // SAFETY: unlinked from our chain, so its ownership is ours to hand over.
        unsafe { Bio::from_raw(bio) }
    }

    /// Takes every bio off the list, leaving it empty.
    pub(crate) fn take(&mut self) -> Self {
        core::mem::replace(self, Self::new())
    }

    /// Takes the bios of a request that failed on one disk, to submit them again elsewhere
    /// (C's `nvme_failover_req`): each now names `to` (the stacking disk, whose `submit_bio`
    /// chooses again), not polled (the queue it will reach is not known) and
    /// without `REQ_NOWAIT` (it is resubmitted from a work item, not by the issuer who could
    /// take an `EAGAIN`). The request is then ended without data (`blk_mq_end_request` with
    /// no bios left: success, as C).
    pub(crate) fn steal<T: Operations>(&mut self, rq: Owned<'_, T>, to: &DiskHandle) {
        let raw = rq.raw();
        // SAFETY: `rq` is owned (completed, not yet ended), so its bios are ours to take;
        // `to` holds its disk.
        unsafe {
            let mut bio = (*raw).bio;
            while !bio.is_null() {
                set_dev(bio, to.part0());
                (*bio).bi_opf &= !(REQ_POLLED | REQ_NOWAIT);
                bio = (*bio).bi_next;
            }
            let mut list = bindings::bio_list {
                head: self.head,
                tail: self.tail,
            };
            bindings::blk_steal_bios(&mut list, raw);
            // INVARIANT: `blk_steal_bios` appended the request's chain to ours.
            self.head = list.head;
            self.tail = list.tail;
        }
        rq.end(BlkStatus::Ok);
    }
}

impl Drop for BioList {
    fn drop(&mut self) {
        while let Some(bio) = self.pop() {
            bio.end(BlkStatus::IoErr);
        }
    }
}
