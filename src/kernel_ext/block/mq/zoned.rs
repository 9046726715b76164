// SPDX-License-Identifier: GPL-2.0

//! Zoned disks: their queue limits, the zone report the block layer asks the driver for
//! (`report_zones`), and zone revalidation. Upstream candidate (the Rust block layer has no
//! zoned disks yet; C: the driver side of block/blk-zoned.c, as `drivers/nvme/host/zns.c`
//! and null_blk use it).

use super::{gen_disk::MqPrivate, private, Operations, PrivateIo};
use core::{
    ffi::{c_int, c_uint},
    marker::PhantomData,
    ptr::NonNull,
};
use kernel::{bindings, page::PAGE_SHIFT, prelude::*};

/// The limits of a zoned disk (`BLK_FEAT_ZONED`); its zone size is the limits'
/// `chunk_sectors`. Upstream candidate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ZonedLimits {
    /// Most zones open at once (0: no limit).
    pub(crate) max_open_zones: u32,
    /// Most zones open or closed at once (0: no limit).
    pub(crate) max_active_zones: u32,
    /// Largest Zone Append the device takes, in sectors (0: the block layer emulates Zone
    /// Append with writes).
    pub(crate) max_zone_append_sectors: u32,
}

/// `BLK_FEAT_ZONED` (a `__force` cast bindgen cannot evaluate).
const BLK_FEAT_ZONED: u32 = 1 << 10;

impl ZonedLimits {
    /// Sets `lim`'s zoned limits from `zoned`, or clears them (which the block layer
    /// requires of a disk that is not zoned).
    pub(super) fn apply(zoned: Option<Self>, lim: &mut bindings::queue_limits) {
        match zoned {
            Some(z) => {
                lim.features |= BLK_FEAT_ZONED;
                lim.max_open_zones = z.max_open_zones;
                lim.max_active_zones = z.max_active_zones;
                lim.max_hw_zone_append_sectors = z.max_zone_append_sectors;
            }
            None => {
                lim.features &= !BLK_FEAT_ZONED;
                lim.max_open_zones = 0;
                lim.max_active_zones = 0;
                lim.max_hw_zone_append_sectors = 0;
                lim.max_zone_append_sectors = 0;
                lim.zone_write_granularity = 0;
            }
        }
    }
}

/// A sequential-write-required zone as a driver reports it (`struct blk_zone`), in 512-byte
/// sectors. Upstream candidate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Zone {
    pub(crate) start: u64,
    pub(crate) len: u64,
    /// Write pointer.
    pub(crate) wp: u64,
    /// How much of the zone can be written.
    pub(crate) capacity: u64,
    /// Its condition, `BLK_ZONE_COND_*` (the NVMe zone states have the same values).
    pub(crate) cond: u8,
}

/// Where [`Operations::report_zones`] reports zones to: the block layer's callback for one
/// report. Upstream candidate.
///
/// # Invariants
///
/// `disk` and `args` are the arguments of a `report_zones` call that is running.
pub(crate) struct ZoneReporter<'r> {
    disk: NonNull<bindings::gendisk>,
    args: *mut bindings::blk_report_zones_args,
    _p: PhantomData<&'r mut ()>,
}

impl ZoneReporter<'_> {
    /// Reports `zone` as zone `idx` of the report (counted from 0 for each report). An
    /// error ends the report.
    pub(crate) fn report(&mut self, idx: u32, zone: &Zone) -> Result {
        let mut z: bindings::blk_zone = pin_init::zeroed();
        z.start = zone.start;
        z.len = zone.len;
        z.wp = zone.wp;
        z.capacity = zone.capacity;
        z.cond = zone.cond;
        z.type_ = bindings::blk_zone_type_BLK_ZONE_TYPE_SEQWRITE_REQ as u8;
        // SAFETY: `disk` and `args` are those of the running report (type invariant); `z`
        // is a valid zone the callee only reads.
        kernel::error::to_result(unsafe {
            bindings::disk_report_zone(self.disk.as_ptr(), &mut z, idx, self.args)
        })
    }
}

/// A zoned disk whose zones the block layer asks for: its data, limits and queue, for the
/// commands that read them. Upstream candidate.
///
/// # Invariants
///
/// `disk` is a disk of a tag set for `T` (allocated by `GenDisk::new`, maybe not yet added),
/// alive with its queue for `'s`.
pub(crate) struct ZonedDisk<'s, T: Operations> {
    disk: NonNull<bindings::gendisk>,
    _p: PhantomData<&'s T>,
}

impl<'s, T: Operations> ZonedDisk<'s, T> {
    fn queue(&self) -> *mut bindings::request_queue {
        // SAFETY: the disk is alive (type invariant).
        unsafe { (*self.disk.as_ptr()).queue }
    }

    /// Calls `f` with the disk's data, or fails with `ENODEV` once the disk's owner dropped
    /// it: a report runs on an open block device, which may outlive the disk's data (a
    /// namespace detached meanwhile). `f` must not wait for I/O or user memory (a zone the
    /// report hands to user space), as dropping the disk waits for it: take what the report
    /// needs, then report.
    pub(crate) fn with_data<R>(
        &self,
        f: impl for<'r> FnOnce(&'r T::DiskData<'r>) -> R,
    ) -> Result<R> {
        // SAFETY: the disk was made by `GenDisk::new` and is held by the block layer for
        // this report, so its private data is there (type invariant).
        unsafe { MqPrivate::<T>::of(self.disk.as_ptr()) }.with_data(f)
    }

    /// Capacity in sectors (`get_capacity`).
    pub(crate) fn sectors(&self) -> u64 {
        // SAFETY: the disk is alive, and so is its whole-disk block device.
        unsafe { (*(*self.disk.as_ptr()).part0).bd_nr_sectors }
    }

    /// The largest buffer one command on the disk's queue can carry, as C's
    /// `nvme_zns_alloc_report_buffer` bounds it: the transfer limit, and a page per segment.
    pub(crate) fn max_buffer_bytes(&self) -> usize {
        // SAFETY: the disk's queue is alive (type invariant); its limits are only changed
        // with the queue frozen, which a report never runs in.
        let (sectors, segments) = unsafe {
            let lim = &(*self.queue()).limits;
            (lim.max_hw_sectors, lim.max_segments)
        };
        ((sectors as usize) << 9).min((segments as usize) << PAGE_SHIFT)
    }

    /// Runs a driver-private request on the disk's queue and waits for it, as
    /// [`super::DiskRef::execute_private`].
    pub(crate) fn execute_private<R>(
        &self,
        io: PrivateIo<'_>,
        prep: impl FnOnce(&T::Rq),
        done: impl FnOnce(&T::Rq) -> R,
    ) -> Result<R> {
        // SAFETY: the disk's queue is alive for `'s`, which outlives this call.
        unsafe { private::execute_private::<T, R>(self.queue(), io, prep, done) }
    }
}

/// `block_device_operations.report_zones` of a [`Operations`] implementor.
///
/// # Safety
///
/// Called by the block layer for a disk of a tag set for `T` (`GenDisk::new`'s), with the
/// arguments of one zone report.
pub(super) unsafe extern "C" fn report_zones<T: Operations>(
    disk: *mut bindings::gendisk,
    sector: bindings::sector_t,
    nr_zones: c_uint,
    args: *mut bindings::blk_report_zones_args,
) -> c_int {
    let Some(disk) = NonNull::new(disk) else {
        return EINVAL.to_errno();
    };
    // INVARIANT: the block layer holds the disk for the call (function's safety section).
    let zoned = ZonedDisk::<T> {
        disk,
        _p: PhantomData,
    };
    // INVARIANT: the arguments of this running report.
    let mut to = ZoneReporter {
        disk,
        args,
        _p: PhantomData,
    };
    match T::report_zones(&zoned, sector, nr_zones, &mut to) {
        Ok(n) => c_int::try_from(n).unwrap_or(c_int::MAX),
        Err(e) => e.to_errno(),
    }
}

/// Has the block layer read every zone of `disk` (`blk_revalidate_disk_zones`), after its
/// limits or capacity were set and outside any freeze: a zoned disk needs it before it is
/// added and whenever its zones may have changed.
///
/// # Safety
///
/// `disk` is a live zoned disk of a tag set for some [`Operations`] with its capacity set.
pub(super) unsafe fn revalidate(disk: *mut bindings::gendisk) -> Result {
    // SAFETY: see the function's safety section.
    kernel::error::to_result(unsafe { bindings::blk_revalidate_disk_zones(disk) })
}
