// SPDX-License-Identifier: GPL-2.0

//! A disk on a tag set: its `gendisk`, queue limits and block device operations (upstream:
//! `kernel::block::mq::gen_disk`).

use super::{dma_map::MAX_SEGMENTS, zoned, Integrity, Operations, TagSet, ZonedLimits};
use crate::kernel_ext::{
    block::{
        bio::DiskHandle,
        disk::{attr_group, ioctl_result, ioctl_target, setup_disk, take_private, DiskAttrs},
    },
    device_raw,
    sync::MemallocNoio,
    sysfs::{AttrGroup, SysfsBuf},
};
use core::{
    ffi::{c_int, c_uint, c_void},
    marker::PhantomData,
    ptr::NonNull,
    sync::atomic::{AtomicBool, Ordering},
};
use kernel::{
    bindings,
    device::{Bound, Device},
    new_srcu,
    prelude::*,
    static_lock_class,
    sync::{
        atomic::{Acquire, Atomic, Release},
        Arc, Srcu,
    },
};

/// `BLK_FEAT_*` (include/linux/blkdev.h; `__force` casts bindgen cannot evaluate).
const BLK_FEAT_WRITE_CACHE: u32 = 1 << 0;
const BLK_FEAT_FUA: u32 = 1 << 1;
const BLK_FEAT_SKIP_TAGSET_QUIESCE: u32 = 1 << 13;

/// Queue limits for a new disk. Upstream candidate.
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
    /// A boundary requests do not cross, in sectors (0: none); a zoned disk's zone size.
    pub(crate) chunk_sectors: u32,
    pub(crate) io_min: u32,
    pub(crate) io_opt: u32,
    /// A zoned disk's limits (`None`: not zoned).
    pub(crate) zoned: Option<ZonedLimits>,
    /// The integrity profile of a disk with metadata (`None`: no metadata buffers).
    pub(crate) integrity: Option<Integrity>,
}

impl Limits {
    /// What a disk stacked on disks with limits `self` and `o` may send (C's
    /// `blk_stack_limits` for these fields): the smaller transfer limits (0 meaning none
    /// where the block layer says so), the larger sizes and alignments, the write cache and
    /// FUA if either has them; `self`'s zone size and metadata. Upstream candidate.
    pub(crate) fn stack(self, o: &Self) -> Self {
        let min_not_zero = |a: u32, b: u32| match (a, b) {
            (0, x) | (x, 0) => x,
            (a, b) => a.min(b),
        };
        Self {
            logical_block_size: self.logical_block_size.max(o.logical_block_size),
            physical_block_size: self.physical_block_size.max(o.physical_block_size),
            max_hw_sectors: min_not_zero(self.max_hw_sectors, o.max_hw_sectors),
            max_segments: self.max_segments.min(o.max_segments),
            virt_boundary_mask: self.virt_boundary_mask | o.virt_boundary_mask,
            max_segment_size: min_not_zero(self.max_segment_size, o.max_segment_size),
            dma_alignment: self.dma_alignment.max(o.dma_alignment),
            write_cache: self.write_cache || o.write_cache,
            fua: self.fua || o.fua,
            max_discard_sectors: min_not_zero(self.max_discard_sectors, o.max_discard_sectors),
            max_discard_segments: self.max_discard_segments.min(o.max_discard_segments),
            discard_granularity: self.discard_granularity.max(o.discard_granularity),
            max_write_zeroes_sectors: self
                .max_write_zeroes_sectors
                .min(o.max_write_zeroes_sectors),
            chunk_sectors: self.chunk_sectors,
            io_min: self.io_min.max(o.io_min),
            io_opt: self.io_opt.max(o.io_opt),
            zoned: self.zoned,
            integrity: self.integrity,
        }
    }

    pub(in crate::kernel_ext::block) fn to_raw(self) -> bindings::queue_limits {
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
        lim.chunk_sectors = self.chunk_sectors;
        lim.io_min = self.io_min;
        lim.io_opt = self.io_opt;
        ZonedLimits::apply(self.zoned, lim);
        Integrity::apply(self.integrity, lim);
    }
}

/// What a disk's `private_data` holds, from before it is added until `free_disk`: the
/// driver's [`Operations::Private`], and the door to the disk's data (its queue's
/// `queuedata`) for callbacks that reach the disk through an open block device rather than
/// a request (zone reports). The data goes with the [`GenDisk`], which may be dropped while
/// the block device is still open: its drop closes the door first and waits for readers.
///
/// # Invariants
///
/// `data` is null or points to the `GenDisk`'s data, alive until the `GenDisk`'s drop has
/// cleared it and waited for every SRCU read-side section of `srcu` that loaded it.
#[pin_data]
pub(super) struct MqPrivate<T: Operations> {
    pub(super) private: T::Private,
    #[pin]
    srcu: Srcu,
    data: Atomic<*mut ()>,
}

impl<T: Operations> MqPrivate<T> {
    /// The private data of `disk`.
    ///
    /// # Safety
    ///
    /// `disk` was created by [`GenDisk::new`] and its `private_data` not yet taken back (the
    /// block layer holds the disk for a callback, or its `GenDisk` is alive).
    pub(super) unsafe fn of<'p>(disk: *mut bindings::gendisk) -> &'p Self {
        // SAFETY: see the function's safety section.
        unsafe { &*(*disk).private_data.cast::<Self>() }
    }

    /// Calls `f` with the disk's data, or fails with `ENODEV` once its `GenDisk` is
    /// dropped. `f` must not wait for I/O or user memory: dropping the disk waits for it.
    pub(super) fn with_data<R>(
        &self,
        f: impl for<'r> FnOnce(&'r T::DiskData<'r>) -> R,
    ) -> Result<R> {
        let _guard = self.srcu.read_lock();
        let p = self.data.load(Acquire);
        if p.is_null() {
            return Err(ENODEV);
        }
        // `DiskData` is covariant (`Operations::shorten_disk`): data made for a lifetime
        // that outlives the disk is valid for the (higher-ranked) lifetime `f` gets, which
        // nothing `f` returns can name: no reference into the data leaves this section.
        // SAFETY: non-null, so the `GenDisk`'s data, which its drop frees only after this
        // read-side section ends (type invariant).
        Ok(f(unsafe { &*p.cast::<T::DiskData<'_>>() }))
    }

    /// Closes the door to the data and waits for every reader (expedited: a disk's removal
    /// waits for it, once per disk).
    fn revoke(&self) {
        self.data.store(core::ptr::null_mut(), Release);
        self.srcu.synchronize_expedited();
    }
}

/// The sysfs attributes of a [`Operations`] implementor's disks.
struct MqAttrs<T: Operations>(PhantomData<T>);

impl<T: Operations> DiskAttrs for MqAttrs<T> {
    type Private = T::Private;
    const NAMES: &'static [&'static CStr] = T::DISK_ATTRS;

    fn visible(p: &T::Private, index: usize) -> bool {
        T::disk_attr_visible(p, index)
    }

    fn show(p: &T::Private, index: usize, out: &mut SysfsBuf<'_>) -> core::fmt::Result {
        T::disk_attr_show(p, index, out)
    }

    /// # Safety
    ///
    /// `disk` was created by [`GenDisk::new`], whose `private_data` holds an `MqPrivate`
    /// from before the disk is added until `free_disk`.
    unsafe fn private<'p>(disk: *mut bindings::gendisk) -> &'p T::Private {
        // SAFETY: see the function's safety section.
        unsafe { &MqPrivate::<T>::of(disk).private }
    }
}

/// The `block_device_operations` of a [`Operations`] implementor, with this module as owner (an
/// open disk pins the module).
struct DiskOps<T: Operations>(PhantomData<T>);

impl<T: Operations> DiskOps<T> {
    const FOPS: bindings::block_device_operations = bindings::block_device_operations {
        owner: <crate::RnvmeModule as kernel::ModuleMetadata>::THIS_MODULE.as_ptr(),
        ioctl: Some(Self::ioctl),
        // The NVMe passthrough structures have the same layout for 32-bit callers.
        compat_ioctl: Some(Self::ioctl),
        free_disk: Some(Self::free_disk),
        // Only called for zoned disks.
        report_zones: Some(zoned::report_zones::<T>),
        ..pin_init::zeroed()
    };

    /// # Safety
    ///
    /// Called by the block layer for an open block device of a disk created by
    /// [`GenDisk::new`], whose `private_data` holds an `MqPrivate` until `free_disk`.
    unsafe extern "C" fn ioctl(
        bdev: *mut bindings::block_device,
        mode: bindings::blk_mode_t,
        cmd: c_uint,
        arg: kernel::ffi::c_ulong,
    ) -> c_int {
        // SAFETY: see the function's safety section: an open block device of our disk,
        // whose private data is an `MqPrivate` until `free_disk`.
        let (p, writable, partition) = unsafe {
            let (disk, writable, partition) = ioctl_target(bdev, mode);
            (&MqPrivate::<T>::of(disk).private, writable, partition)
        };
        ioctl_result(T::ioctl(p, writable, partition, cmd, arg))
    }

    /// # Safety
    ///
    /// Called by the block layer once, when the last reference to the disk is dropped.
    unsafe extern "C" fn free_disk(disk: *mut bindings::gendisk) {
        // SAFETY: `GenDisk::new` stored a pinned `KBox<MqPrivate<T>>` there (or it was
        // taken back); this is the disk's end.
        unsafe { drop_private::<T>(take_private(disk)) };
    }
}

/// A disk on a tag set; listed in its [`Disks`](super::Disks), which removes it, and
/// reference counted ([`DiskArc`]): a task that uses the disk without the list (a passthrough
/// command waiting for its request) keeps the gendisk, its queue and data alive, never the
/// list's lock. Upstream: `GenDisk`, which also holds its tag set.
///
/// # Invariants
///
/// `disk` came from `__blk_mq_alloc_disk` on `_set` with `queuedata` pointing to `data`;
/// `added` says whether `device_add_disk` succeeded and `del_gendisk` has not been called,
/// with `attrs` (if any) as the device's attribute groups. `drop` deletes (if added) and puts
/// the disk before `data`, `attrs` and the reference to the tag set are dropped.
pub(super) struct GenDisk<'a, T: Operations> {
    pub(super) disk: NonNull<bindings::gendisk>,
    added: AtomicBool,
    /// Found by lookups of its [`Disks`](super::Disks) list (published there, not yet
    /// being taken out).
    listed: AtomicBool,
    /// Marked dead (`blk_mark_disk_dead`).
    dead: AtomicBool,
    /// Frozen by [`DisksScan::freeze_disks_non_owner`](super::DisksScan::freeze_disks_non_owner).
    held: AtomicBool,
    /// Only reached through the request queue's `queuedata`.
    pub(super) _data: Pin<KBox<T::DiskData<'a>>>,
    /// The sysfs attributes of [`Operations::DISK_ATTRS`]; only reached through the device.
    _attrs: Option<KBox<AttrGroup>>,
    /// The disk's queue is on this set until `put_disk` frees it.
    _set: Arc<TagSet<'a, T>>,
}

// SAFETY: the gendisk is a kernel object usable from any thread; the flags are atomic. The
// last `DiskArc` may drop the data and the tag set's reference on another thread: both must
// be `Send` as well as `Sync`.
unsafe impl<T: Operations> Send for GenDisk<'_, T>
where
    for<'x> T::DiskData<'x>: Send + Sync,
    T::SetData<'static>: Send + Sync,
{
}
// SAFETY: as above: shared references only lend `data` (`Sync`) and the set's handle.
unsafe impl<T: Operations> Sync for GenDisk<'_, T>
where
    for<'x> T::DiskData<'x>: Sync,
    T::SetData<'static>: Sync,
{
}

/// A counted reference to a disk of a [`Disks`](super::Disks) list, taken with
/// [`Disks::get_disk`](super::Disks::get_disk) and used after the lookup (C's
/// `nvme_get_ns`). The disk may be removed meanwhile: its queue then fails new requests, and
/// the gendisk is put when the last reference goes. Upstream candidate.
pub(crate) struct DiskArc<'a, T: Operations>(pub(super) Arc<GenDisk<'a, T>>);

impl<'a, T: Operations> DiskArc<'a, T> {
    /// The disk, borrowed for the driver-private requests it may still carry (a removed
    /// disk's queue fails them); nothing that changes it, which is its list owner's.
    fn get(&self) -> DiskRef<'_, 'a, T> {
        DiskRef { disk: &self.0 }
    }

    /// [`DiskRef::execute_private`]. Upstream candidate.
    pub(crate) fn execute_private<R>(
        &self,
        io: super::PrivateIo<'_>,
        prep: impl FnOnce(&T::Rq),
        done: impl FnOnce(&T::Rq) -> R,
    ) -> Result<R> {
        self.get().execute_private(io, prep, done)
    }

    /// [`DiskRef::submit_private_uring`]. Upstream candidate.
    ///
    /// # Safety
    ///
    /// `ctx` is a command queued by `queue_with`, handed to this function once.
    pub(crate) unsafe fn submit_private_uring(
        &self,
        ctx: *mut c_void,
        io: super::PrivateIo<'_>,
        prep: impl FnOnce(&T::Rq),
    ) -> Result {
        // SAFETY: the caller's guarantee, passed on.
        unsafe { self.get().submit_private_uring(ctx, io, prep) }
    }
}

/// A disk of a [`Disks`](super::Disks) list, borrowed from the list or a [`DiskArc`]. Upstream
/// candidate.
pub(crate) struct DiskRef<'s, 'a, T: Operations> {
    pub(super) disk: &'s GenDisk<'a, T>,
}

impl<'s, 'a, T: Operations> DiskRef<'s, 'a, T> {
    /// Upstream candidate.
    pub(crate) fn data(&self) -> &'s T::DiskData<'a> {
        &self.disk._data
    }

    /// A counted reference to the disk, which a stacking disk submits bios to. Upstream
    /// candidate.
    pub(crate) fn handle(&self) -> DiskHandle {
        // SAFETY: the disk is alive (`self` borrows it from its owner).
        unsafe { DiskHandle::get(self.disk.disk) }
    }

    /// Changes the disk's queue limits and capacity in place (a namespace formatted with
    /// another block size, or resized). With its queue frozen, so no request built for the old
    /// format is in flight or issued meanwhile, `update` changes the driver's data and returns
    /// the new limits and capacity in sectors, which are then applied (the capacity change with
    /// a `RESIZE` uevent). Upstream candidate.
    pub(crate) fn update(&self, update: impl FnOnce(&T::DiskData<'a>) -> (Limits, u64)) -> Result {
        let disk = self.disk.disk.as_ptr();
        let _noio = MemallocNoio::save();
        // SAFETY: the disk is alive (`self` borrows it), so is its queue.
        let q = unsafe { (*disk).queue };
        // SAFETY: `q` is live; unfrozen below on this task. Freezing nests.
        unsafe { bindings::blk_mq_freeze_queue_nomemsave(q) };
        let (limits, sectors) = update(&self.disk._data);
        // SAFETY: `q` is live and frozen.
        let ret = unsafe { commit_limits(q, limits) };
        if ret.is_ok() {
            // SAFETY: the disk is live.
            unsafe { bindings::set_capacity_and_notify(disk, sectors) };
        }
        // SAFETY: frozen above.
        unsafe { bindings::blk_mq_unfreeze_queue_nomemrestore(q) };
        ret?;
        if limits.zoned.is_some() {
            // The zones may have changed with the format; read them again, unfrozen (the
            // report goes through the queue).
            // SAFETY: the disk is live and zoned, its capacity set.
            unsafe { zoned::revalidate(disk) }?;
        }
        Ok(())
    }
}

/// Sets the feature bits `set` and clears those of `clear` in the queue's limits.
///
/// # Safety
///
/// `q` is a live request queue.
unsafe fn update_features(q: *mut bindings::request_queue, set: u32, clear: u32) -> Result {
    // SAFETY: `q` is live (the caller's guarantee).
    unsafe { update_limits(q, |lim| lim.features = (lim.features & !clear) | set) }
}

/// Applies `limits` to the queue's limits and commits them.
///
/// # Safety
///
/// `q` is a live request queue, frozen by the caller.
pub(in crate::kernel_ext::block) unsafe fn commit_limits(
    q: *mut bindings::request_queue,
    limits: Limits,
) -> Result {
    // SAFETY: `q` is live (the caller's guarantee).
    unsafe { update_limits(q, |lim| limits.apply(lim)) }
}

/// Changes the queue's limits with `f` and commits them (`queue_limits_start_update`, which
/// is inline, then `queue_limits_commit_update`, which validates them and releases
/// `limits_lock`). Upstream candidate for `kernel::block::mq`.
///
/// # Safety
///
/// `q` is a live request queue.
unsafe fn update_limits(
    q: *mut bindings::request_queue,
    f: impl FnOnce(&mut bindings::queue_limits),
) -> Result {
    // SAFETY: `q` is live; the limits are read and written under `limits_lock`, which
    // `queue_limits_commit_update` releases.
    let ret = unsafe {
        bindings::mutex_lock(&raw mut (*q).limits_lock);
        let mut lim = core::ptr::read(&raw const (*q).limits);
        f(&mut lim);
        bindings::queue_limits_commit_update(q, &mut lim)
    };
    kernel::error::to_result(ret)
}

/// What [`DiskAdder::add_disk`](super::DiskAdder::add_disk) makes a disk of (upstream:
/// `GenDiskBuilder`'s settings and `build`'s arguments). Upstream candidate: queue limits beyond the block sizes, the parent
/// device and a per-disk `private_data`.
pub(crate) struct NewDisk<'n, 'a, T: Operations> {
    pub(crate) limits: Limits,
    /// Its name in /dev.
    pub(crate) name: core::fmt::Arguments<'n>,
    /// Capacity, in 512-byte sectors.
    pub(crate) sectors: u64,
    /// The device the disk is a child of in sysfs.
    pub(crate) parent: &'n Device<Bound>,
    /// Hidden (`GENHD_FL_HIDDEN`): no block device, no partitions, no events; its queue
    /// still carries driver-private requests.
    pub(crate) hidden: bool,
    /// Read-only (`set_disk_ro`): writes fail.
    pub(crate) read_only: bool,
    pub(crate) data: T::DiskData<'a>,
    pub(crate) private: T::Private,
}

impl<'a, T: Operations> GenDisk<'a, T> {
    pub(super) fn new(
        set: &Arc<TagSet<'a, T>>,
        new: NewDisk<'_, 'a, T>,
        fault: Result,
    ) -> Result<Self> {
        let NewDisk {
            limits,
            name,
            sectors,
            parent,
            hidden,
            read_only,
            data,
            private,
        } = new;
        let data = KBox::pin(data, GFP_KERNEL)?;
        let qd = core::ptr::from_ref::<T::DiskData<'a>>(&data)
            .cast_mut()
            .cast::<c_void>();
        // INVARIANT: `data` points to the data `Self` holds; its drop revokes it.
        let private = KBox::pin_init(
            try_pin_init!(MqPrivate::<T> {
                private,
                srcu <- new_srcu!(),
                data: Atomic::new(qd.cast::<()>()),
            }),
            GFP_KERNEL,
        )?;
        let mut attrs = attr_group::<MqAttrs<T>>()?;
        let groups = attrs.as_mut().map_or(core::ptr::null_mut(), |a| a.groups());
        let mut lim = limits.to_raw();
        // The queue joins the set out of its quiesces (blk-mq quiesces the queues on the set
        // when asked, not those added later), and is counted in below. The allocation is
        // made without the count's lock: joining a set may freeze the set's other queue,
        // which waits for its I/O, and that may wait for a reset that needs the lock.
        lim.features |= BLK_FEAT_SKIP_TAGSET_QUIESCE;
        // SAFETY: `set` is an allocated tag set; `lim` is a valid limits structure;
        // `qd` outlives the disk (invariant).
        let disk = kernel::error::from_err_ptr(unsafe {
            bindings::__blk_mq_alloc_disk(set.raw(), &mut lim, qd, static_lock_class!().as_ptr())
        })?;
        // INVARIANT: `disk` came from `__blk_mq_alloc_disk` with `queuedata` pointing to
        // `data`; not added yet.
        let mut this = Self {
            // SAFETY: `from_err_ptr` returned a non-error pointer.
            disk: unsafe { NonNull::new_unchecked(disk) },
            added: AtomicBool::new(false),
            listed: AtomicBool::new(false),
            dead: AtomicBool::new(false),
            held: AtomicBool::new(false),
            _data: data,
            _attrs: attrs,
            _set: set.clone(),
        };
        {
            // Quiesced as often as the set is (`SetHeader::quiesced`), and from now on
            // quiesced and unquiesced with it: a disk a scan adds during a reset waits for it
            // as the others do, and the reset's unquiesce finds it quiesced. Under the
            // count's lock nothing here waits for I/O.
            let quiesced = set.quiesced();
            // SAFETY: `disk` was just allocated with its queue, on which nothing was
            // dispatched yet (there is nothing to wait for); its limits are changed under
            // their lock, and only to take it into the set's quiesces.
            unsafe {
                let q = (*disk).queue;
                for _ in 0..*quiesced {
                    bindings::blk_mq_quiesce_queue_nowait(q);
                }
                update_features(q, 0, BLK_FEAT_SKIP_TAGSET_QUIESCE)?;
            }
        }
        // SAFETY: `disk` is allocated and not yet visible to anyone else; `FOPS` expects a
        // pinned `MqPrivate<T>` (freed by `free_disk`, with the disk's last reference).
        unsafe {
            setup_disk(
                disk,
                name,
                &DiskOps::<T>::FOPS,
                || KBox::into_raw(Pin::into_inner_unchecked(private)).cast(),
                sectors,
                read_only,
            )?;
            if hidden {
                (*disk).flags |= bindings::GENHD_FL_HIDDEN as c_int;
            }
        }
        // A zoned disk's zones are read before it is added (as C's `nvme_update_ns_info`):
        // the block layer tracks their write pointers from the first write on. A hidden
        // disk has no capacity, hence no zones.
        let zones = if limits.zoned.is_some() && sectors != 0 {
            // SAFETY: the disk is allocated and zoned, its capacity set, its private data
            // in place for `report_zones`.
            unsafe { zoned::revalidate(disk) }
        } else {
            Ok(())
        };
        let added = zones.and(fault).and_then(|()| {
            // SAFETY: `disk` is fully set up (its private data too, which the attributes
            // read); `parent` is a bound device; `groups` is null or points into `attrs`,
            // which lives until after the disk is deleted (invariant).
            kernel::error::to_result(unsafe {
                bindings::device_add_disk(device_raw(parent), disk, groups)
            })
        });
        if let Err(e) = added {
            // The block layer calls `free_disk` only for disks that were added: take the
            // private data back here, or it leaks with everything it holds.
            // SAFETY: set above from a pinned `KBox`; the disk was never added, so nobody
            // else saw the pointer, and it is cleared before `put_disk` (in `drop`) runs.
            unsafe { drop_private::<T>(take_private(disk)) };
            return Err(e);
        }
        // INVARIANT: `device_add_disk` succeeded.
        this.added = AtomicBool::new(true);
        Ok(this)
    }

    /// Removes the disk from the system: waits for open I/O to finish and fails new I/O.
    /// Called by the list's owner (under its lock), and by the last reference's drop.
    pub(super) fn remove(&self) {
        self.unfreeze_non_owner();
        if self.added.swap(false, Ordering::AcqRel) {
            T::disk_removing(&self._data);
            // SAFETY: the disk was added (invariant) and is deleted once (the flag).
            unsafe { bindings::del_gendisk(self.disk.as_ptr()) };
        }
    }
}

impl<T: Operations> GenDisk<'_, T> {
    /// Added and not yet removed.
    pub(super) fn added(&self) -> bool {
        self.added.load(Ordering::Acquire)
    }

    /// Found by lookups of its list.
    pub(super) fn listed(&self) -> bool {
        self.listed.load(Ordering::Acquire)
    }

    /// Marks the disk as found by lookups of its list, or not (taken out: readers skip it
    /// from now on).
    pub(super) fn set_listed(&self, listed: bool) {
        self.listed.store(listed, Ordering::Release);
    }

    /// Frozen by [`DisksScan::freeze_disks_non_owner`](super::DisksScan::freeze_disks_non_owner).
    pub(super) fn held(&self) -> bool {
        self.held.load(Ordering::Acquire)
    }

    /// Freezes the queue until [`Self::unfreeze_non_owner`], once: false if already held.
    pub(super) fn hold(&self) -> bool {
        if self.held.swap(true, Ordering::AcqRel) {
            return false;
        }
        // SAFETY: the disk is alive (invariant); unfrozen once, by `unfreeze_non_owner`
        // (the flag).
        unsafe { bindings::blk_freeze_queue_start_non_owner((*self.disk.as_ptr()).queue) };
        true
    }

    pub(super) fn unfreeze_non_owner(&self) {
        if self.held.swap(false, Ordering::AcqRel) {
            // SAFETY: the disk is alive (invariant) and its queue was frozen by `hold`, once.
            unsafe { bindings::blk_mq_unfreeze_queue_non_owner((*self.disk.as_ptr()).queue) };
        }
    }

    /// Marks the disk dead (`blk_mark_disk_dead`), once: false if already marked.
    pub(super) fn mark_dead(&self) -> bool {
        if self.dead.swap(true, Ordering::AcqRel) {
            return false;
        }
        // SAFETY: the disk is alive (invariant), and marked once (the flag). We are in
        // process context and do not hold its `open_mutex`.
        unsafe { bindings::blk_mark_disk_dead(self.disk.as_ptr()) };
        true
    }
}

/// Frees a disk's private data taken back by `take_private` (null: nothing).
///
/// # Safety
///
/// `p` is null or came from the pinned `KBox<MqPrivate<T>>` of [`GenDisk::new`], taken back
/// once.
unsafe fn drop_private<T: Operations>(p: *mut c_void) {
    if !p.is_null() {
        // SAFETY: see the function's safety section; no reference to it is left.
        drop(unsafe { Pin::new_unchecked(KBox::from_raw(p.cast::<MqPrivate<T>>())) });
    }
}

impl<T: Operations> Drop for GenDisk<'_, T> {
    fn drop(&mut self) {
        self.remove();
        // An open block device may still reach the disk's private data: close its door to
        // `data` (freed with `self`) and wait for the readers.
        // SAFETY: the disk is alive until `put_disk` below; its private data is ours unless
        // taken back (a disk that was never added).
        let p = unsafe { (*self.disk.as_ptr()).private_data };
        if !p.is_null() {
            // SAFETY: as above: a live `MqPrivate<T>`.
            unsafe { MqPrivate::<T>::of(self.disk.as_ptr()) }.revoke();
        }
        // The request queue may outlive this (an open block device holds the disk), its
        // `queuedata` then pointing to freed `data`: nothing reads it any more, as
        // `del_gendisk` (in `remove`) left the queue dying and exited, and the zone reports
        // an open block device still makes go through the door closed above.
        // SAFETY: allocated in `new`; our reference is dropped once.
        unsafe { bindings::put_disk(self.disk.as_ptr()) };
    }
}
