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
};
use kernel::{
    bindings,
    device::{Bound, Device},
    prelude::*,
    static_lock_class,
};

/// `BLK_FEAT_*` (include/linux/blkdev.h; `__force` casts bindgen cannot evaluate).
const BLK_FEAT_WRITE_CACHE: u32 = 1 << 0;
const BLK_FEAT_FUA: u32 = 1 << 1;

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
    /// `disk` was created by [`GenDisk::new`], whose `private_data` holds a `T::Private`
    /// from before the disk is added until `free_disk`.
    unsafe fn private<'p>(disk: *mut bindings::gendisk) -> &'p T::Private {
        // SAFETY: see the function's safety section.
        unsafe { &*(*disk).private_data.cast::<T::Private>() }
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
    /// [`GenDisk::new`], whose `private_data` holds a `T::Private` until `free_disk`.
    unsafe extern "C" fn ioctl(
        bdev: *mut bindings::block_device,
        mode: bindings::blk_mode_t,
        cmd: c_uint,
        arg: kernel::ffi::c_ulong,
    ) -> c_int {
        // SAFETY: see the function's safety section: an open block device of our disk,
        // whose private data is a `T::Private` until `free_disk`.
        let (p, writable, partition) = unsafe {
            let (disk, writable, partition) = ioctl_target(bdev, mode);
            (
                &*(*disk).private_data.cast::<T::Private>(),
                writable,
                partition,
            )
        };
        ioctl_result(T::ioctl(p, writable, partition, cmd, arg))
    }

    /// # Safety
    ///
    /// Called by the block layer once, when the last reference to the disk is dropped.
    unsafe extern "C" fn free_disk(disk: *mut bindings::gendisk) {
        // SAFETY: `GenDisk::new` stored a `KBox<T::Private>` there (or it was taken back);
        // this is the disk's end.
        unsafe {
            let p = take_private(disk).cast::<T::Private>();
            if !p.is_null() {
                drop(KBox::from_raw(p));
            }
        }
    }
}

/// A disk on a tag set; owned by its [`Disks`](super::Disks) list, which keeps the tag set alive.
///
/// # Invariants
///
/// `disk` came from `__blk_mq_alloc_disk` with `queuedata` pointing to `data`; `added` says
/// whether `device_add_disk` succeeded, with `attrs` (if any) as the device's attribute
/// groups. `drop` deletes (if added) and puts the disk before `data` and `attrs` are freed.
pub(super) struct GenDisk<'a, T: Operations> {
    pub(super) disk: NonNull<bindings::gendisk>,
    pub(super) added: bool,
    /// Marked dead (`blk_mark_disk_dead`).
    pub(super) dead: bool,
    /// Frozen by [`Disks::freeze_disks_non_owner`](super::Disks::freeze_disks_non_owner).
    pub(super) held: bool,
    /// Only reached through the request queue's `queuedata`.
    pub(super) _data: Pin<KBox<T::DiskData<'a>>>,
    /// The sysfs attributes of [`Operations::DISK_ATTRS`]; only reached through the device.
    _attrs: Option<KBox<AttrGroup>>,
}

// SAFETY: the gendisk is a kernel object usable from any thread.
unsafe impl<T: Operations> Send for GenDisk<'_, T> {}
// SAFETY: as above; `data` is `Sync`.
unsafe impl<T: Operations> Sync for GenDisk<'_, T> {}

/// A disk of a [`Disks`](super::Disks) list, borrowed from it. Upstream candidate.
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
        // SAFETY: the disk is added and alive (`self` borrows it), so is its queue.
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

/// Applies `limits` to the queue's limits and commits them (`queue_limits_start_update`,
/// then `queue_limits_commit_update`).
///
/// # Safety
///
/// `q` is a live request queue, frozen by the caller.
pub(in crate::kernel_ext::block) unsafe fn commit_limits(
    q: *mut bindings::request_queue,
    limits: Limits,
) -> Result {
    // SAFETY: `q` is live; the limits are read under `limits_lock`, which
    // `queue_limits_commit_update` releases (`queue_limits_start_update` is inline).
    let ret = unsafe {
        bindings::mutex_lock(&raw mut (*q).limits_lock);
        let mut lim = core::ptr::read(&raw const (*q).limits);
        limits.apply(&mut lim);
        bindings::queue_limits_commit_update(q, &mut lim)
    };
    kernel::error::to_result(ret)
}

/// What [`Disks::add_disk`](super::Disks::add_disk) makes a disk of (upstream: `GenDiskBuilder`'s settings and
/// `build`'s arguments). Upstream candidate: queue limits beyond the block sizes, the parent
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
    pub(super) fn new(set: &TagSet<'a, T>, new: NewDisk<'_, 'a, T>, fault: Result) -> Result<Self> {
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
        let private = KBox::new(private, GFP_KERNEL)?;
        let mut attrs = attr_group::<MqAttrs<T>>()?;
        let groups = attrs.as_mut().map_or(core::ptr::null_mut(), |a| a.groups());
        let mut lim = limits.to_raw();
        let qd = core::ptr::from_ref::<T::DiskData<'a>>(&data)
            .cast_mut()
            .cast::<c_void>();
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
            added: false,
            dead: false,
            held: false,
            _data: data,
            _attrs: attrs,
        };
        // SAFETY: `disk` is allocated and not yet visible to anyone else; `FOPS` expects a
        // `T::Private` (freed by `free_disk`, with the disk's last reference).
        unsafe {
            setup_disk(
                disk,
                name,
                &DiskOps::<T>::FOPS,
                || KBox::into_raw(private).cast(),
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
            // SAFETY: set above from `KBox::into_raw`; the disk was never added, so nobody
            // else saw the pointer, and it is cleared before `put_disk` (in `drop`) runs.
            unsafe { drop(KBox::from_raw(take_private(disk).cast::<T::Private>())) };
            return Err(e);
        }
        // INVARIANT: `device_add_disk` succeeded.
        this.added = true;
        Ok(this)
    }

    /// Removes the disk from the system: waits for open I/O to finish and fails new I/O.
    pub(super) fn remove(&mut self) {
        self.unfreeze_non_owner();
        if self.added {
            self.added = false;
            T::disk_removing(&self._data);
            // SAFETY: the disk was added (invariant) and is deleted once.
            unsafe { bindings::del_gendisk(self.disk.as_ptr()) };
        }
    }
}

impl<T: Operations> GenDisk<'_, T> {
    pub(super) fn unfreeze_non_owner(&mut self) {
        if self.held {
            self.held = false;
            // SAFETY: the disk is alive (invariant) and its queue was frozen by
            // `freeze_disks_non_owner`, once.
            unsafe { bindings::blk_mq_unfreeze_queue_non_owner((*self.disk.as_ptr()).queue) };
        }
    }
}

impl<T: Operations> Drop for GenDisk<'_, T> {
    fn drop(&mut self) {
        self.remove();
        // SAFETY: allocated in `new`; our reference is dropped once. The request queue is
        // gone once this returns, so `data` is no longer referenced by it.
        unsafe { bindings::put_disk(self.disk.as_ptr()) };
    }
}
