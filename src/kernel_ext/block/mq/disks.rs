// SPDX-License-Identifier: GPL-2.0

//! The disks on a [`TagSet`]: a list that scans change under a lock of their own and that
//! lookups read without any lock (C's `ctrl->namespaces`: written under `scan_lock` and
//! `namespaces_lock`, read under `ctrl->srcu`). Upstream candidate: upstream's `GenDisk`s each
//! hold the tag set's `Arc`, and a driver keeps its own list of them.
//!
//! A writer ([`DisksScan`], the scan lock) adds and removes disks and freezes them all; it
//! may wait for I/O (a new disk's partition read, `del_gendisk`, a freeze) holding the lock.
//! A reader ([`Disks::get_disk`], [`Disks::with_disk`], [`Disks::mark_disks_dead`]) never
//! takes that lock: it sees the list as last published, inside an SRCU read-side section,
//! and keeps a disk past it only by a counted reference ([`DiskArc`]). A disk is published
//! once `device_add_disk` succeeded, and unpublished (readers waited for) before
//! `del_gendisk`, so a reader never finds a disk being added or deleted: a disk taken out
//! is first marked unlisted (readers skip it), then readers are waited for, whether or not
//! there is memory for a new copy of the list.
//!
//! A dead controller's disks are marked dead by a reader; a disk a scan adds meanwhile,
//! published after that reader looked, is marked by the scan itself (the `dead` flag).

use super::{
    gen_disk::{DiskArc, DiskRef, GenDisk, NewDisk},
    Operations, TagSet,
};
use crate::kernel_ext::{async_scope, srcu_box::SrcuBox, sync::MemallocNoio};
use core::{
    cell::Cell,
    sync::atomic::{AtomicBool, Ordering::SeqCst},
};
use kernel::{
    bindings, new_mutex,
    prelude::*,
    sync::{Arc, Mutex, MutexGuard, SpinLock, UniqueArc},
};

/// A list of disks.
type List<'a, T> = KVec<Arc<GenDisk<'a, T>>>;

/// See the module documentation.
///
/// # Invariants
///
/// Every disk of `scan`'s list is on `set`, added, and marked listed. `listed` holds the
/// disks of `scan`'s list as of the last change that could publish them; a disk `scan`
/// dropped is in `listed` only if publishing failed for want of memory, and was marked
/// unlisted (readers skip it) before the readers that might have found it were waited for
/// and it was deleted.
#[pin_data(PinnedDrop)]
pub(crate) struct Disks<'a, T: Operations> {
    /// The scan lock and the writers' list. Held while waiting for I/O; never by a lookup.
    #[pin]
    scan: Mutex<List<'a, T>>,
    /// What lookups read.
    #[pin]
    listed: SrcuBox<List<'a, T>>,
    set: Arc<TagSet<'a, T>>,
    /// The disks were marked dead: one added later is marked too.
    dead: AtomicBool,
}

#[pinned_drop]
impl<T: Operations> PinnedDrop for Disks<'_, T> {
    fn drop(self: Pin<&mut Self>) {
        self.scan().remove_disks();
    }
}

impl<'a, T: Operations> Disks<'a, T> {
    /// No disks yet, on `set`.
    pub(crate) fn new(set: Arc<TagSet<'a, T>>) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            scan <- new_mutex!(KVec::new()),
            listed <- SrcuBox::new(KBox::new(KVec::new(), GFP_KERNEL)?),
            set,
            dead: AtomicBool::new(false),
        })
    }

    /// Takes the scan lock: the only way to change the list, or to freeze every disk. May
    /// wait for another writer, which may be waiting for I/O: never called by recovery.
    pub(crate) fn scan(&self) -> DisksScan<'_, 'a, T> {
        DisksScan {
            disks: self,
            list: self.scan.lock(),
        }
    }

    /// A counted reference to the first disk whose data satisfies `pred`, for use after
    /// the lookup (C's `nvme_find_get_ns`). Takes no lock.
    pub(crate) fn get_disk(
        &self,
        pred: impl Fn(&T::DiskData<'a>) -> bool,
    ) -> Option<DiskArc<'a, T>> {
        let listed = self.listed.read();
        listed
            .iter()
            .find(|d| d.listed() && pred(&d._data))
            .map(|d| DiskArc(d.clone()))
    }

    /// `f` on the data of the first disk whose data satisfies `pred`, inside the lookup
    /// (which `f` must not make wait for I/O). Takes no lock.
    pub(crate) fn with_disk<R>(
        &self,
        pred: impl Fn(&T::DiskData<'a>) -> bool,
        f: impl FnOnce(&T::DiskData<'a>) -> R,
    ) -> Option<R> {
        let listed = self.listed.read();
        listed
            .iter()
            .find(|d| d.listed() && pred(&d._data))
            .map(|d| f(&d._data))
    }

    /// Marks every disk dead, as `blk_mark_disk_dead`: its capacity becomes 0, new I/O fails at
    /// once, and file systems on it are told the device is gone (shut down). The disks stay
    /// until removed, and a disk added later is marked when it is. Returns how many were
    /// newly marked. Takes no lock (a dying controller's scan may be waiting for I/O only
    /// this ends); may wait for the file systems on the disks. Upstream candidate.
    pub(crate) fn mark_disks_dead(&self) -> usize {
        // Before the list is read; `DisksScan::add_disks` reads it after publishing.
        self.dead.store(true, SeqCst);
        let listed = self.listed.read();
        listed
            .iter()
            .filter(|d| d.listed() && d.mark_dead())
            .count()
    }
}

/// What one `build` of [`DisksScan::add_disks`] adds its disk with. Upstream candidate.
pub(crate) struct DiskAdder<'s, 'a, T: Operations> {
    disks: &'s Disks<'a, T>,
    /// The writers' list (the scan lock is held by `add_disks`' caller), for the disks to
    /// be listed one at a time as they are added.
    publish: &'s SpinLock<List<'a, T>>,
    /// Most disks the list can then hold (room was reserved for all).
    cap: usize,
    /// Whether the disk was added.
    added: Cell<Option<Result>>,
}

impl<'a, T: Operations> DiskAdder<'_, 'a, T> {
    /// Adds a disk called `name` of `sectors` 512-byte sectors (it appears in /dev), as a
    /// child of `parent`, and lists it for lookups once added. One disk per adder (`EBUSY`
    /// for a second one).
    ///
    /// `fault` is for fault injection: an error there is reported in place of
    /// `device_add_disk`'s result, so tests walk the path where adding the disk fails (not
    /// part of an upstream version).
    pub(crate) fn add_disk(&self, disk: NewDisk<'_, 'a, T>, fault: Result) -> Result {
        if self.added.get().is_some() {
            return Err(EBUSY);
        }
        let r = self.add(disk, fault);
        self.added.set(Some(r));
        r
    }

    fn add(&self, disk: NewDisk<'_, 'a, T>, fault: Result) -> Result {
        // Everything the listing needs is allocated first: once added, the disk is listed.
        let mut next = KBox::new(KVec::with_capacity(self.cap, GFP_KERNEL)?, GFP_KERNEL)?;
        let slot = UniqueArc::new_uninit(GFP_KERNEL)?;
        let disk = Arc::from(slot.write(GenDisk::new(&self.disks.set, disk, fault)?));
        disk.set_listed(true);
        let retired = {
            let mut list = self.publish.lock();
            list.push_within_capacity(disk.clone())
                .map_err(|_| ENOMEM)?;
            for d in list.iter().filter(|d| d.listed()) {
                next.push_within_capacity(d.clone()).map_err(|_| ENOMEM)?;
            }
            self.disks.listed.exchange(next)
        };
        // The old copy goes after its readers, outside the spinlock.
        drop(retired);
        // After the publication (a full barrier): a controller marked dead before it saw
        // the old list, so its marking missed this disk.
        if self.disks.dead.load(SeqCst) {
            disk.mark_dead();
        }
        Ok(())
    }
}

/// The scan lock of a [`Disks`], held: adds, removes and freezes its disks. Upstream
/// candidate.
pub(crate) struct DisksScan<'s, 'a, T: Operations> {
    disks: &'s Disks<'a, T>,
    list: MutexGuard<'s, List<'a, T>>,
}

impl<'s, 'a, T: Operations> DisksScan<'s, 'a, T> {
    /// A copy of the listed disks of the writers' list for the readers, with room for
    /// `extra` more.
    fn copy(&self, extra: usize) -> Result<KBox<List<'a, T>>> {
        let mut v = KVec::with_capacity(self.list.len() + extra, GFP_KERNEL)?;
        for d in self.list.iter().filter(|d| d.listed()) {
            v.push_within_capacity(d.clone()).map_err(|_| ENOMEM)?;
        }
        Ok(KBox::new(v, GFP_KERNEL)?)
    }

    /// Adds disks side by side, as C's asynchronous namespace scan: `build(i, adder)` for
    /// each `i` below `n` runs on an async worker (the scan lock held here meanwhile) and
    /// may add one disk through `adder` (it appears in /dev, and is listed for lookups at
    /// once). Returns what each `build` returned and whether its disk was added (its error
    /// if adding it failed), in the order of `i`. Upstream candidate.
    pub(crate) fn add_disks<X: Send>(
        &mut self,
        n: usize,
        build: impl Fn(usize, &DiskAdder<'_, 'a, T>) -> X + Sync,
    ) -> Result<KVec<(X, Option<Result>)>>
    where
        for<'x> T::DiskData<'x>: Send + Sync,
        T::SetData<'static>: Send + Sync,
    {
        // Everything but each disk's copy of the list for the readers is allocated first.
        self.list.reserve(n, GFP_KERNEL)?;
        let mut out = KVec::with_capacity(n, GFP_KERNEL)?;
        let mut slots: KVec<Option<(X, Option<Result>)>> = KVec::with_capacity(n, GFP_KERNEL)?;
        for _ in 0..n {
            slots.push(None, GFP_KERNEL)?;
        }
        let (disks, cap) = (self.disks, self.list.len() + n);
        // The writers' list moves under a spinlock of the workers' meanwhile (nobody else
        // reads it: the caller holds the scan lock).
        let publish = KBox::pin_init(
            kernel::new_spinlock!(core::mem::take(&mut *self.list)),
            GFP_KERNEL,
        )?;
        let (publish_ref, build) = (&*publish, &build);
        async_scope::scope(|s| {
            for (i, slot) in slots.iter_mut().enumerate() {
                s.spawn(move || {
                    let adder = DiskAdder {
                        disks,
                        publish: publish_ref,
                        cap,
                        added: Cell::new(None),
                    };
                    let x = build(i, &adder);
                    *slot = Some((x, adder.added.into_inner()));
                });
            }
        });
        core::mem::swap(&mut *publish.lock(), &mut *self.list);
        for slot in slots.into_iter().flatten() {
            // Room for every slot was made above.
            let _ = out.push_within_capacity(slot);
        }
        Ok(out)
    }

    /// Removes (as [`Self::remove_disks`]) every disk whose data does not satisfy `keep`.
    /// Upstream candidate.
    pub(crate) fn retain_disks(&mut self, keep: impl Fn(&T::DiskData<'a>) -> bool) {
        let mut leaving = false;
        for d in self.list.iter().filter(|d| !keep(&d._data)) {
            d.set_listed(false);
            leaving = true;
        }
        if leaving {
            self.unlist();
        }
    }

    /// Removes every disk from the system (waiting for their I/O), keeping the tag set.
    /// Upstream candidate.
    pub(crate) fn remove_disks(&mut self) {
        for d in self.list.iter() {
            d.set_listed(false);
        }
        self.unlist();
    }

    /// Publishes the list without the disks marked unlisted (or, without memory for the
    /// copy, only waits for the readers, which skip them), then deletes them; their memory
    /// goes with their last reference.
    fn unlist(&mut self) {
        match self.copy(0) {
            Ok(next) => self.disks.listed.replace(next),
            Err(_) => self.disks.listed.synchronize(),
        }
        self.list.retain(|d| {
            if !d.listed() {
                d.remove();
            }
            d.listed()
        });
    }

    /// The first disk whose data satisfies `pred`. Upstream candidate.
    pub(crate) fn find_disk(
        &self,
        pred: impl Fn(&T::DiskData<'a>) -> bool,
    ) -> Option<DiskRef<'_, 'a, T>> {
        self.list
            .iter()
            .find(|d| d.added() && pred(&d._data))
            .map(|disk| DiskRef { disk })
    }

    /// Calls `f` for every disk. Upstream candidate.
    pub(crate) fn for_each_disk(&self, mut f: impl FnMut(DiskRef<'_, 'a, T>)) {
        for disk in self.list.iter().filter(|d| d.added()) {
            f(DiskRef { disk });
        }
    }

    /// Freezes the request queues of every disk (waits until no request is in flight and holds
    /// new ones back) until the returned guard is dropped. Allocations by this task do no I/O
    /// meanwhile. Upstream candidate.
    ///
    /// Without a lockdep owner, as C's `nvme_start_freeze`: an owned freeze holds lock
    /// entries of the task until its unfreeze, and a task has `MAX_LOCK_DEPTH` of them, fewer
    /// than the queues a controller with many namespaces freezes at once.
    pub(crate) fn freeze_disks(&self) -> Frozen<'_, 's, 'a, T> {
        let noio = MemallocNoio::save();
        let added = || self.list.iter().filter(|d| d.added());
        // Start every freeze first, so the queues drain in parallel.
        for d in added() {
            // SAFETY: the disk is added, and alive while the list holds it; unfrozen once,
            // by `Frozen::drop` (the list cannot change while it borrows the scan lock).
            unsafe { bindings::blk_freeze_queue_start_non_owner((*d.disk.as_ptr()).queue) };
        }
        for d in added() {
            // SAFETY: as above; the freeze was started.
            unsafe { bindings::blk_mq_freeze_queue_wait((*d.disk.as_ptr()).queue) };
        }
        Frozen {
            scan: self,
            _noio: noio,
        }
    }

    /// Freezes the request queues of every disk, as [`Self::freeze_disks`], until
    /// [`Self::unfreeze_disks_non_owner`], which may run on another task (a resume after a
    /// suspend, as C's `nvme_start_freeze` and `nvme_unfreeze`). No request is in flight when
    /// this returns, and new ones wait at the queues' entrance, holding no tag. Disks already
    /// held stay held once; a disk removed meanwhile is unfrozen first. Upstream candidate.
    pub(crate) fn freeze_disks_non_owner(&mut self) {
        let _noio = MemallocNoio::save();
        for d in self.list.iter().filter(|d| d.added()) {
            // Unfrozen once, by `unfreeze_disks_non_owner` or when removed.
            d.hold();
        }
        for d in self.list.iter().filter(|d| d.held()) {
            // SAFETY: the disk is alive while the list holds it; `hold` started the freeze.
            unsafe { bindings::blk_mq_freeze_queue_wait((*d.disk.as_ptr()).queue) };
        }
    }

    /// Ends what [`Self::freeze_disks_non_owner`] started. Upstream candidate.
    pub(crate) fn unfreeze_disks_non_owner(&mut self) {
        for d in self.list.iter() {
            d.unfreeze_non_owner();
        }
    }
}

/// The disks frozen by [`DisksScan::freeze_disks`]; unfrozen when dropped. The list cannot
/// gain or lose disks meanwhile: this borrows the scan lock. Upstream candidate.
pub(crate) struct Frozen<'f, 's, 'a, T: Operations> {
    scan: &'f DisksScan<'s, 'a, T>,
    _noio: MemallocNoio,
}

impl<T: Operations> Drop for Frozen<'_, '_, '_, T> {
    fn drop(&mut self) {
        for d in self.scan.list.iter().filter(|d| d.added()) {
            // SAFETY: frozen by `freeze_disks`, once (the list is the same: the guard
            // borrows the scan lock).
            unsafe { bindings::blk_mq_unfreeze_queue_non_owner((*d.disk.as_ptr()).queue) };
        }
    }
}
