// SPDX-License-Identifier: GPL-2.0

//! Block integrity (metadata and protection information): a disk's profile in its queue
//! limits, what a request's integrity payload asks the device to check, and the DMA mapping
//! of a request's metadata. Upstream candidate (the Rust block layer has no integrity
//! support; C: `blk-integrity.h`, `bio-integrity.h`, and drivers' use of them, e.g.
//! `drivers/nvme/host/pci.c`).

use super::{Operations, Request};
use crate::kernel_ext::device_raw;
use kernel::{
    bindings,
    device::{Bound, Device},
    prelude::*,
};

/// A disk's integrity profile: the fields of `struct blk_integrity` a driver sets (the block
/// layer fills in the protection interval and its own flags). Upstream candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Integrity {
    /// `BLK_INTEGRITY_CSUM_*`: 0 none (opaque metadata), 2 CRC16 (T10 DIF), 3 CRC64.
    pub(crate) csum: u8,
    /// Metadata bytes per protection interval (logical block).
    pub(crate) metadata_size: u8,
    pub(crate) pi_tuple_size: u8,
    pub(crate) pi_offset: u8,
    pub(crate) tag_size: u8,
    /// The reference tag is the block's position (types 1 and 2).
    pub(crate) ref_tag: bool,
}

/// `enum blk_integrity_flags` (blk-integrity.h, only with `CONFIG_BLK_DEV_INTEGRITY`).
const BLK_INTEGRITY_DEVICE_CAPABLE: u8 = 1 << 2;
const BLK_INTEGRITY_REF_TAG: u8 = 1 << 3;
const BLK_SPLIT_INTERVAL_CAPABLE: u8 = 1 << 5;

impl Integrity {
    /// Sets `lim`'s integrity profile from `profile`, or clears it, whole (the block layer's
    /// validation fills in the rest): one metadata segment per request, which one metadata
    /// pointer (or one SGL descriptor) describes.
    pub(super) fn apply(profile: Option<Self>, lim: &mut bindings::queue_limits) {
        let mut bi: bindings::blk_integrity = pin_init::zeroed();
        lim.max_integrity_segments = 0;
        if let Some(p) = profile {
            bi.flags = BLK_SPLIT_INTERVAL_CAPABLE;
            if p.csum != 0 {
                bi.flags |= BLK_INTEGRITY_DEVICE_CAPABLE;
                bi.pi_tuple_size = p.pi_tuple_size;
                bi.pi_offset = p.pi_offset;
            }
            if p.ref_tag {
                bi.flags |= BLK_INTEGRITY_REF_TAG;
            }
            bi.csum_type = p.csum;
            bi.metadata_size = p.metadata_size;
            bi.tag_size = p.tag_size;
            lim.max_integrity_segments = 1;
        }
        lim.integrity = bi;
    }
}

/// What a request's integrity payload asks the device to check (`BIP_CHECK_*`). Upstream
/// candidate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct IntegrityChecks {
    pub(crate) guard: bool,
    pub(crate) reftag: bool,
    /// The application tag, to check.
    pub(crate) apptag: Option<u16>,
}

/// `REQ_INTEGRITY`: the request carries an integrity payload.
const REQ_INTEGRITY: u32 = 1 << bindings::req_flag_bits___REQ_INTEGRITY;

#[cfg(CONFIG_BLK_DEV_INTEGRITY)]
mod raw {
    use core::ffi::c_int;
    use kernel::bindings;

    /// `struct bio_integrity_payload` (include/linux/bio-integrity.h), opaque to bindgen.
    #[repr(C)]
    pub(super) struct BioIntegrityPayload {
        pub(super) bip_iter: bindings::bvec_iter,
        pub(super) bip_vcnt: u16,
        pub(super) bip_max_vcnt: u16,
        pub(super) bip_flags: u16,
        pub(super) app_tag: u16,
        pub(super) bip_vec: *mut bindings::bio_vec,
    }

    #[cfg(target_pointer_width = "64")]
    const _: () = assert!(core::mem::size_of::<BioIntegrityPayload>() == 40);

    /// `BIP_CHECK_*` of `bip_flags`.
    pub(super) const BIP_CHECK_GUARD: u16 = 1 << 5;
    pub(super) const BIP_CHECK_REFTAG: u16 = 1 << 6;
    pub(super) const BIP_CHECK_APPTAG: u16 = 1 << 7;

    // `struct request` holds a lock class key, which bindgen sees as an empty struct; only
    // pointers are passed.
    #[allow(improper_ctypes)]
    extern "C" {
        // Exported by block/blk-mq-dma.c and block/blk-integrity.c; their header is not
        // among the bindings'.
        pub(super) fn blk_rq_map_integrity_sg(
            rq: *mut bindings::request,
            sg: *mut bindings::scatterlist,
        ) -> c_int;
        pub(super) fn blk_rq_integrity_map_user(
            rq: *mut bindings::request,
            ubuf: *mut core::ffi::c_void,
            bytes: isize,
        ) -> c_int;
    }
}

/// Attaches `len` bytes of user memory at `addr` as the metadata of driver-private request
/// `rq`, whose data is mapped (`blk_rq_integrity_map_user`: pinned, or bounced when it is
/// not aligned as the queue needs).
///
/// # Safety
///
/// `rq` is a request the caller owns and has not issued, with its user data mapped.
pub(super) unsafe fn map_user_metadata(
    rq: *mut bindings::request,
    addr: usize,
    len: u32,
) -> Result {
    #[cfg(CONFIG_BLK_DEV_INTEGRITY)]
    {
        // SAFETY: see the function's safety section; the user range is checked and pinned
        // (or bounced) by the callee, and released with the data's bios.
        kernel::error::to_result(unsafe {
            raw::blk_rq_integrity_map_user(rq, addr as *mut core::ffi::c_void, len as isize)
        })
    }
    #[cfg(not(CONFIG_BLK_DEV_INTEGRITY))]
    {
        let _ = (rq, addr, len);
        Err(EINVAL)
    }
}

impl<T: Operations> Request<T> {
    /// The request carries an integrity payload (`blk_integrity_rq`). Upstream candidate.
    pub(crate) fn has_integrity(&self) -> bool {
        self.cmd_flags() & REQ_INTEGRITY != 0
    }

    /// What the request's integrity payload asks to check (`None`: it has none). Upstream
    /// candidate.
    pub(crate) fn integrity_checks(&self) -> Option<IntegrityChecks> {
        if !self.has_integrity() {
            return None;
        }
        #[cfg(CONFIG_BLK_DEV_INTEGRITY)]
        {
            // SAFETY: a request with `REQ_INTEGRITY` has a bio whose `bi_integrity` is its
            // payload (`bio_integrity`), stable while the driver owns the request.
            let (flags, app_tag) = unsafe {
                let bio = (*self.raw()).bio;
                if bio.is_null() {
                    return Some(IntegrityChecks::default());
                }
                let bip = (*bio).bi_integrity.cast::<raw::BioIntegrityPayload>();
                if bip.is_null() {
                    return Some(IntegrityChecks::default());
                }
                ((*bip).bip_flags, (*bip).app_tag)
            };
            Some(IntegrityChecks {
                guard: flags & raw::BIP_CHECK_GUARD != 0,
                reftag: flags & raw::BIP_CHECK_REFTAG != 0,
                apptag: (flags & raw::BIP_CHECK_APPTAG != 0).then_some(app_tag),
            })
        }
        #[cfg(not(CONFIG_BLK_DEV_INTEGRITY))]
        Some(IntegrityChecks::default())
    }

    /// Maps the request's metadata for DMA by `dev` as one bus range (the queue takes one
    /// integrity segment: the block layer merges only requests whose metadata is contiguous),
    /// its address and length. Through [`super::Dispatched::map_metadata`]; undone by
    /// `unmap_data`.
    pub(super) fn map_metadata(&self, dev: &Device<Bound>) -> Result<(u64, u32)> {
        #[cfg(CONFIG_BLK_DEV_INTEGRITY)]
        {
            use core::sync::atomic::Ordering::Relaxed;
            let pdu = self.pdu();
            let sg = pdu.meta_sg.get();
            // SAFETY: `sg` is this request's one metadata scatterlist entry; the request has
            // an integrity payload of at most one segment (`max_integrity_segments`), which
            // `blk_rq_map_integrity_sg` checks too.
            let n = unsafe {
                bindings::sg_init_table(sg, 1);
                raw::blk_rq_map_integrity_sg(self.raw(), sg)
            };
            if n != 1 {
                return Err(EIO);
            }
            // SAFETY: `sg` holds one entry for the request's metadata, valid until the
            // request ends; `dev` is the bound device doing the DMA.
            let mapped =
                unsafe { bindings::dma_map_sg_attrs(device_raw(dev), sg, 1, self.dma_dir(), 0) };
            if mapped != 1 {
                return Err(ENOMEM);
            }
            pdu.meta_mapped.store(1, Relaxed);
            // SAFETY: mapped above.
            Ok(unsafe { ((*sg).dma_address, (*sg).dma_length) })
        }
        #[cfg(not(CONFIG_BLK_DEV_INTEGRITY))]
        {
            let _ = dev;
            Err(EINVAL)
        }
    }

    /// Undoes [`Self::map_metadata`], if it mapped anything.
    pub(super) fn unmap_metadata(&self, dev: &Device<Bound>) {
        #[cfg(CONFIG_BLK_DEV_INTEGRITY)]
        {
            use core::sync::atomic::Ordering::Relaxed;
            let pdu = self.pdu();
            // Most requests have no metadata: a load, not a swap.
            if pdu.meta_mapped.load(Relaxed) == 0 || pdu.meta_mapped.swap(0, Relaxed) == 0 {
                return;
            }
            // SAFETY: the entry was mapped by `map_metadata` for `dev` in this direction,
            // and is unmapped once (the flag was swapped to 0).
            unsafe {
                bindings::dma_unmap_sg_attrs(
                    device_raw(dev),
                    pdu.meta_sg.get(),
                    1,
                    self.dma_dir(),
                    0,
                )
            };
        }
        #[cfg(not(CONFIG_BLK_DEV_INTEGRITY))]
        let _ = dev;
    }
}
