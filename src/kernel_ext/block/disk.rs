// SPDX-License-Identifier: GPL-2.0

//! What every disk here shares, blk-mq ([`super::mq::GenDisk`]) or bio-based
//! ([`super::bio_disk::BioDisk`]): its set-up before `device_add_disk`, its private data,
//! its ioctl entry, its sysfs attributes. Upstream candidate: the common part of
//! `kernel::block::mq::gen_disk`.

use crate::kernel_ext::sysfs::{visible_args, AttrGroup, SysfsBuf};
use core::{
    ffi::{c_int, c_void},
    marker::PhantomData,
    mem::offset_of,
};
use kernel::{bindings, prelude::*, static_lock_class};

/// `BLK_OPEN_WRITE` (include/linux/blkdev.h; a `__force` cast bindgen cannot evaluate).
const BLK_OPEN_WRITE: u32 = 1 << 1;

/// Names a new disk and sets what every disk here has: its operations, its private data
/// (taken back by [`take_private`], in `free_disk` or when adding fails), dynamic device
/// numbers without partitions of our own, its capacity and read-only state. Upstream
/// candidate (`GenDiskBuilder::build`'s common part).
///
/// # Safety
///
/// `disk` is allocated and not yet added or visible to anyone else; `private` is what
/// `fops`' callbacks expect in `private_data`.
pub(in crate::kernel_ext::block) unsafe fn setup_disk(
    disk: *mut bindings::gendisk,
    name: core::fmt::Arguments<'_>,
    fops: &'static bindings::block_device_operations,
    private: impl FnOnce() -> *mut c_void,
    sectors: u64,
    read_only: bool,
) -> Result {
    let name = kernel::str::CString::try_from_fmt(name)?;
    let bytes = name.to_bytes_with_nul();
    // SAFETY: see the function's safety section.
    unsafe {
        let dn = &mut (*disk).disk_name;
        if bytes.len() > dn.len() {
            return Err(ENAMETOOLONG);
        }
        for (d, s) in dn.iter_mut().zip(bytes) {
            *d = *s;
        }
        (*disk).fops = fops;
        (*disk).private_data = private();
        (*disk).major = 0;
        (*disk).first_minor = 0;
        (*disk).minors = 0;
        bindings::set_capacity(disk, sectors);
        bindings::set_disk_ro(disk, read_only);
    }
    Ok(())
}

/// Takes a disk's private data back (null if taken already): `free_disk`, or a disk whose
/// `device_add_disk` failed (the block layer calls `free_disk` only for added disks).
///
/// # Safety
///
/// `disk` is live and nobody else uses its private data any more.
pub(in crate::kernel_ext::block) unsafe fn take_private(
    disk: *mut bindings::gendisk,
) -> *mut c_void {
    // SAFETY: see the function's safety section.
    unsafe { core::mem::replace(&mut (*disk).private_data, core::ptr::null_mut()) }
}

/// An ioctl's disk, whether the device was opened for writing and whether it is a partition.
///
/// # Safety
///
/// `bdev` is an open block device (which holds a reference to its disk).
pub(in crate::kernel_ext::block) unsafe fn ioctl_target(
    bdev: *mut bindings::block_device,
    mode: bindings::blk_mode_t,
) -> (*mut bindings::gendisk, bool, bool) {
    // SAFETY: see the function's safety section.
    let disk = unsafe { (*bdev).bd_disk };
    // `bdev_is_partition` (inline): the whole disk is its `part0`.
    // SAFETY: as above.
    let partition = unsafe { (*disk).part0 != bdev };
    (disk, mode & BLK_OPEN_WRITE != 0, partition)
}

/// An ioctl's result as the block layer takes it.
pub(in crate::kernel_ext::block) fn ioctl_result(r: Result<isize>) -> c_int {
    match r {
        Ok(v) => v as c_int,
        Err(e) => e.to_errno(),
    }
}

/// A kind of disk's read-only sysfs attributes (`/sys/block/<disk>/<name>`). Upstream
/// candidate.
pub(crate) trait DiskAttrs: 'static {
    /// What the disk's `private_data` holds.
    type Private;
    const NAMES: &'static [&'static CStr];
    /// Whether the disk has attribute `index` (asked once, when the disk is added).
    fn visible(p: &Self::Private, index: usize) -> bool;
    /// Writes attribute `index`.
    fn show(p: &Self::Private, index: usize, out: &mut SysfsBuf<'_>) -> core::fmt::Result;
    /// The disk's private data.
    ///
    /// # Safety
    ///
    /// `disk` is a live disk of this kind, between its set-up and `free_disk`.
    unsafe fn private<'p>(disk: *mut bindings::gendisk) -> &'p Self::Private;
}

/// The attribute group of `A`'s disks (`None` without attributes), for `device_add_disk`;
/// it must outlive the disk's deletion.
pub(in crate::kernel_ext::block) fn attr_group<A: DiskAttrs>() -> Result<Option<KBox<AttrGroup>>> {
    if A::NAMES.is_empty() {
        return Ok(None);
    }
    Ok(Some(AttrGroup::new(
        A::NAMES,
        AttrOps::<A>::show,
        &[],
        AttrOps::<A>::store,
        Some(AttrOps::<A>::visible),
        static_lock_class!(),
    )?))
}

/// The sysfs callbacks of [`DiskAttrs`].
struct AttrOps<A>(PhantomData<A>);

impl<A: DiskAttrs> AttrOps<A> {
    /// The private data of the disk whose device (`disk_to_dev`) is `dev`.
    ///
    /// # Safety
    ///
    /// `dev` is the device of a live disk of kind `A`.
    unsafe fn private_of<'p>(dev: *mut bindings::device) -> &'p A::Private {
        // SAFETY: A disk's device is `part0->bd_device` (`dev_to_disk`): the block device
        // holding it points to the disk; see the function's safety section for the rest.
        unsafe {
            let bdev = dev
                .cast::<u8>()
                .sub(offset_of!(bindings::block_device, bd_device))
                .cast::<bindings::block_device>();
            A::private((*bdev).bd_disk)
        }
    }

    /// # Safety
    ///
    /// Called by sysfs for an attribute of `A::NAMES` of a disk of kind `A` while it is
    /// added (deleting the disk waits for running calls).
    unsafe extern "C" fn show(
        dev: *mut bindings::device,
        attr: *mut bindings::device_attribute,
        buf: *mut kernel::ffi::c_char,
    ) -> isize {
        // SAFETY: See the function's safety section; `buf` is the page sysfs gives us.
        let (p, name, mut out) = unsafe {
            (
                Self::private_of(dev),
                (*attr).attr.name,
                SysfsBuf::from_show(buf),
            )
        };
        // The group's names are `NAMES`' own pointers.
        let index = A::NAMES.iter().position(|n| n.as_char_ptr() == name);
        match index {
            Some(i) if A::show(p, i, &mut out).is_ok() => out.len(),
            _ => EIO.to_errno() as isize,
        }
    }

    /// # Safety
    ///
    /// Called by sysfs while a disk of kind `A` is added, for attribute `n` of `A::NAMES`.
    unsafe extern "C" fn visible(
        kobj: *mut bindings::kobject,
        attr: *mut bindings::attribute,
        n: c_int,
    ) -> u16 {
        // SAFETY: The kobject is the disk's device's (see the function's safety section).
        let (p, mode) = unsafe {
            let (dev, mode) = visible_args(kobj, attr);
            (Self::private_of(dev), mode)
        };
        match usize::try_from(n) {
            Ok(i) if A::visible(p, i) => mode,
            _ => 0,
        }
    }

    /// Disks have no write-only attributes: never called.
    ///
    /// # Safety
    ///
    /// None needed: it touches nothing.
    unsafe extern "C" fn store(
        _dev: *mut bindings::device,
        _attr: *mut bindings::device_attribute,
        _buf: *const kernel::ffi::c_char,
        _count: usize,
    ) -> isize {
        EIO.to_errno() as isize
    }
}
