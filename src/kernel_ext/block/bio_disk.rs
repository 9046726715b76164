// SPDX-License-Identifier: GPL-2.0

//! A bio-based disk: a `gendisk` without a tag set whose `submit_bio` passes each bio on (a
//! stacking driver's disk: md, dm, C's NVMe multipath head). Upstream candidate:
//! `kernel::block` only builds blk-mq disks.

use super::{
    bio::{Bio, DiskHandle},
    disk::{attr_group, ioctl_result, ioctl_target, setup_disk, take_private, DiskAttrs},
    mq::{gen_disk::commit_limits, Limits},
};
use crate::kernel_ext::sync::MemallocNoio;
use crate::kernel_ext::sysfs::{AttrGroup, SysfsBuf};
use core::{
    ffi::{c_int, c_uint},
    marker::PhantomData,
    ptr::NonNull,
};
use kernel::{
    bindings,
    prelude::*,
    static_lock_class,
    sync::{Arc, ArcBorrow},
};

/// What a bio-based disk's driver provides. Upstream candidate.
pub(crate) trait BioOperations: Sized + 'static {
    /// The disk's data, shared with the driver (e.g. the paths a head disk chooses from).
    type Data: Send + Sync;

    /// A bio for the disk: the driver passes it on, queues it or ends it.
    fn submit_bio(data: ArcBorrow<'_, Self::Data>, bio: Bio);

    /// Names of the disk's read-only sysfs attributes (`/sys/block/<disk>/<name>`).
    const DISK_ATTRS: &'static [&'static CStr] = &[];
    /// Whether the disk has attribute `index` of [`Self::DISK_ATTRS`].
    fn disk_attr_visible(_data: &Self::Data, _index: usize) -> bool {
        true
    }
    /// Writes attribute `index` of [`Self::DISK_ATTRS`].
    fn disk_attr_show(
        _data: &Self::Data,
        _index: usize,
        _out: &mut SysfsBuf<'_>,
    ) -> core::fmt::Result {
        Err(core::fmt::Error)
    }

    /// An ioctl on the disk's block device (`writable`: opened for writing).
    fn ioctl(
        data: ArcBorrow<'_, Self::Data>,
        writable: bool,
        partition: bool,
        cmd: u32,
        arg: usize,
    ) -> Result<isize>;
}

/// The sysfs attributes of a [`BioOperations`] implementor's disks.
struct BioAttrs<T: BioOperations>(PhantomData<T>);

impl<T: BioOperations> DiskAttrs for BioAttrs<T> {
    type Private = T::Data;
    const NAMES: &'static [&'static CStr] = T::DISK_ATTRS;

    fn visible(p: &T::Data, index: usize) -> bool {
        T::disk_attr_visible(p, index)
    }

    fn show(p: &T::Data, index: usize, out: &mut SysfsBuf<'_>) -> core::fmt::Result {
        T::disk_attr_show(p, index, out)
    }

    /// # Safety
    ///
    /// `disk` was created by [`BioDisk::new`]: its `private_data` holds an `Arc<T::Data>`
    /// from before it is added until `free_disk`.
    unsafe fn private<'p>(disk: *mut bindings::gendisk) -> &'p T::Data {
        // SAFETY: see the function's safety section.
        unsafe { &*(*disk).private_data.cast::<T::Data>() }
    }
}

/// The `block_device_operations` of a [`BioOperations`] implementor.
struct BioDiskOps<T: BioOperations>(PhantomData<T>);

impl<T: BioOperations> BioDiskOps<T> {
    const FOPS: bindings::block_device_operations = bindings::block_device_operations {
        owner: <crate::RnvmeModule as kernel::ModuleMetadata>::THIS_MODULE.as_ptr(),
        submit_bio: Some(Self::submit_bio),
        ioctl: Some(Self::ioctl),
        // The NVMe passthrough structures have the same layout for 32-bit callers.
        compat_ioctl: Some(Self::ioctl),
        free_disk: Some(Self::free_disk),
        ..pin_init::zeroed()
    };

    /// # Safety
    ///
    /// `disk` is a disk created by [`BioDisk::new`], whose `private_data` holds an
    /// `Arc<T::Data>` until `free_disk`.
    unsafe fn data<'d>(disk: *mut bindings::gendisk) -> ArcBorrow<'d, T::Data> {
        // SAFETY: see the function's safety section: the pointer came from `Arc::into_raw`
        // and the reference it stands for is dropped only by `free_disk`, after the
        // callbacks that borrow it.
        unsafe { ArcBorrow::from_raw((*disk).private_data.cast::<T::Data>()) }
    }

    /// # Safety
    ///
    /// Called by the block layer with a bio for a disk created by [`BioDisk::new`], inside
    /// its queue's usage (`bio_queue_enter`), so the disk is not freed meanwhile.
    unsafe extern "C" fn submit_bio(bio: *mut bindings::bio) {
        // SAFETY: the bio names a block device of our disk (see the safety section); its
        // ownership is handed to us.
        unsafe {
            let data = Self::data((*(*bio).bi_bdev).bd_disk);
            if let Some(bio) = Bio::from_raw(bio) {
                T::submit_bio(data, bio);
            }
        }
    }

    /// # Safety
    ///
    /// Called by the block layer for an open block device of a disk created by
    /// [`BioDisk::new`] (an open block device holds a reference to its disk).
    unsafe extern "C" fn ioctl(
        bdev: *mut bindings::block_device,
        mode: bindings::blk_mode_t,
        cmd: c_uint,
        arg: kernel::ffi::c_ulong,
    ) -> c_int {
        // SAFETY: see the function's safety section.
        let (data, writable, partition) = unsafe {
            let (disk, writable, partition) = ioctl_target(bdev, mode);
            (Self::data(disk), writable, partition)
        };
        ioctl_result(T::ioctl(data, writable, partition, cmd, arg))
    }

    /// # Safety
    ///
    /// Called by the block layer once, when the last reference to the disk is dropped.
    unsafe extern "C" fn free_disk(disk: *mut bindings::gendisk) {
        // SAFETY: `BioDisk::new` stored an `Arc::into_raw` there (or it was taken back);
        // this is the disk's end.
        unsafe {
            let p = take_private(disk).cast::<T::Data>();
            if !p.is_null() {
                drop(Arc::from_raw(p));
            }
        }
    }
}

/// A bio-based disk. Upstream candidate.
///
/// # Invariants
///
/// `disk` came from `__blk_alloc_disk` with [`BioDiskOps::FOPS`] and an `Arc<T::Data>` as
/// `private_data`, and was added (`device_add_disk`, with `_attrs` as its attribute groups)
/// unless `added` is false. `drop` deletes (if added) and puts it before `_attrs` is freed.
pub(crate) struct BioDisk<T: BioOperations> {
    disk: NonNull<bindings::gendisk>,
    added: bool,
    /// The sysfs attributes of [`BioOperations::DISK_ATTRS`]; only reached through the
    /// device, deleted with the disk.
    _attrs: Option<KBox<AttrGroup>>,
    _t: PhantomData<T>,
}

// SAFETY: the gendisk is a kernel object usable from any thread.
unsafe impl<T: BioOperations> Send for BioDisk<T> {}
// SAFETY: as above; shared references only read the pointer.
unsafe impl<T: BioOperations> Sync for BioDisk<T> {}

impl<T: BioOperations> BioDisk<T> {
    /// Creates and adds a disk named `name` of `sectors` 512-byte sectors with `limits`, with
    /// no parent device (C's head disks are children of their subsystem's device, which an
    /// out-of-tree driver cannot create in the nvme class: ours are virtual block devices).
    /// `allocated` receives a reference to the disk before it is added (and its partitions
    /// read through `submit_bio`).
    pub(crate) fn new(
        limits: Limits,
        name: core::fmt::Arguments<'_>,
        sectors: u64,
        read_only: bool,
        data: Arc<T::Data>,
        allocated: impl FnOnce(DiskHandle),
    ) -> Result<Self> {
        let mut attrs = attr_group::<BioAttrs<T>>()?;
        let groups = attrs.as_mut().map_or(core::ptr::null_mut(), |a| a.groups());
        let mut lim = limits.to_raw();
        // SAFETY: `lim` is a valid limits structure; the lock class is static.
        let disk = kernel::error::from_err_ptr(unsafe {
            bindings::__blk_alloc_disk(
                &mut lim,
                bindings::NUMA_NO_NODE,
                static_lock_class!().as_ptr(),
            )
        })?;
        // INVARIANT: allocated, not yet added; `private_data` set below before anyone can
        // reach the disk.
        let mut this = Self {
            // SAFETY: `from_err_ptr` returned a non-error pointer.
            disk: unsafe { NonNull::new_unchecked(disk) },
            added: false,
            _attrs: attrs,
            _t: PhantomData,
        };
        // SAFETY: `disk` is allocated and not yet visible to anyone else; `FOPS` expects an
        // `Arc<T::Data>` (released by `free_disk`, with the disk's last reference).
        unsafe {
            setup_disk(
                disk,
                name,
                &BioDiskOps::<T>::FOPS,
                || Arc::into_raw(data).cast_mut().cast(),
                sectors,
                read_only,
            )?
        };
        allocated(this.handle());
        // SAFETY: the disk is fully set up; no parent; `groups` is null or points into
        // `_attrs`, which lives until after the disk is deleted (invariant).
        let added = kernel::error::to_result(unsafe {
            bindings::device_add_disk(core::ptr::null_mut(), disk, groups)
        });
        if let Err(e) = added {
            // `free_disk` only runs for added disks: take the data back here.
            // SAFETY: set above from `Arc::into_raw`; nobody else saw it.
            unsafe { drop(Arc::from_raw(take_private(disk).cast::<T::Data>())) };
            return Err(e);
        }
        // INVARIANT: added.
        this.added = true;
        Ok(this)
    }

    /// A counted reference to the disk (the device bios taken back from a path name).
    pub(crate) fn handle(&self) -> DiskHandle {
        // SAFETY: the disk is alive while `self` is.
        unsafe { DiskHandle::get(self.disk) }
    }

    /// Changes the disk's limits and capacity (its paths' format changed), frozen.
    pub(crate) fn update(&self, limits: Limits, sectors: u64, read_only: bool) -> Result {
        let disk = self.disk.as_ptr();
        let _noio = MemallocNoio::save();
        // SAFETY: the disk and its queue are alive while `self` is; unfrozen below.
        let q = unsafe { (*disk).queue };
        // SAFETY: as above.
        unsafe { bindings::blk_mq_freeze_queue_nomemsave(q) };
        // SAFETY: `q` is live and frozen.
        let ret = unsafe { commit_limits(q, limits) };
        if ret.is_ok() {
            // SAFETY: the disk is live.
            unsafe {
                bindings::set_capacity_and_notify(disk, sectors);
                bindings::set_disk_ro(disk, read_only);
            }
        }
        // SAFETY: frozen above.
        unsafe { bindings::blk_mq_unfreeze_queue_nomemrestore(q) };
        ret
    }
}

impl<T: BioOperations> Drop for BioDisk<T> {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` and deleted (if added) and put once, here. Deleting
        // waits for bios inside `submit_bio`; later ones fail at queue entry.
        unsafe {
            if self.added {
                bindings::del_gendisk(self.disk.as_ptr());
            }
            bindings::put_disk(self.disk.as_ptr());
        }
    }
}
