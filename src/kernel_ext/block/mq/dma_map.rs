// SPDX-License-Identifier: GPL-2.0

//! DMA mapping of a request's data: one segment directly, more through a scatterlist allocated
//! for the request while it is mapped (upstream candidate: `kernel::block::mq` has no DMA
//! mapping).

use super::{Operations, Request};
use crate::kernel_ext::device_raw;
use core::{
    ffi::{c_int, c_uint},
    sync::atomic::Ordering::Relaxed,
};
use kernel::{
    bindings,
    device::{Bound, Device},
    dma::DataDirection,
    prelude::*,
};

/// The most segments the queue limits allow a request (the size of its scatterlist).
pub(crate) const MAX_SEGMENTS: usize = 128;

/// How [`Request::map_data`] mapped a request's data. Upstream candidate.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Mapping {
    /// One contiguous bus range: its address and length.
    Single(u64, u32),
    /// This many DMA segments, through the request's scatterlist.
    Segments(u32),
}

impl Mapping {
    /// The number of DMA segments ([`Request::segments`] yields them). Upstream candidate.
    pub(crate) fn count(self) -> u32 {
        match self {
            Mapping::Single(..) => 1,
            Mapping::Segments(n) => n,
        }
    }
}

/// `RQF_SPECIAL_PAYLOAD` (bit `__RQF_SPECIAL_PAYLOAD`): the data is `special_vec`,
/// not the bios.
const RQF_SPECIAL_PAYLOAD: u32 = 1 << bindings::rqf_flags___RQF_SPECIAL_PAYLOAD;

/// `dma_mapping_error`, a static inline: tells DMA-API debugging the result was checked,
/// then compares with `DMA_MAPPING_ERROR` (~0).
fn dma_mapping_error(dev: &Device<Bound>, addr: bindings::dma_addr_t) -> bool {
    #[cfg(CONFIG_DMA_API_DEBUG)]
    // SAFETY: `dev` is a bound device and `addr` came from a mapping call for it.
    unsafe {
        bindings::debug_dma_mapping_error(device_raw(dev), addr)
    };
    #[cfg(not(CONFIG_DMA_API_DEBUG))]
    let _ = dev;
    addr == !0
}

impl<T: Operations> Request<T> {
    /// The request's data as one physically contiguous range (page, offset from it,
    /// length), when it is a single segment that its first bio vector covers entirely.
    // Always inlined, as `map_data` and `unmap_data`: once per I/O, on the hot path.
    #[inline(always)]
    fn single_bvec(&self) -> Option<(*mut bindings::page, usize, u32)> {
        // SAFETY: the request is owned by the driver; its bio chain and flags are stable.
        unsafe {
            let rq = self.raw();
            if (*rq).nr_phys_segments != 1 || (*rq).rq_flags & RQF_SPECIAL_PAYLOAD != 0 {
                return None;
            }
            let bio = (*rq).bio;
            if bio.is_null() {
                return None;
            }
            // `mp_bvec_iter_bvec` (a static inline): the current vector of the bio.
            let iter = (*bio).bi_iter;
            let bv = &*(*bio).bi_io_vec.add(iter.bi_idx as usize);
            let len = (bv.bv_len - iter.bi_offset).min(iter.bi_size);
            if len != (*rq).__data_len {
                return None;
            }
            Some((bv.bv_page, (bv.bv_offset + iter.bi_offset) as usize, len))
        }
    }

    /// Maps the request's data for DMA by `dev`: a single segment directly (no scatterlist to
    /// build or walk, the common case of small I/O, as the C driver does), anything else
    /// through a scatterlist allocated for it without sleeping (`ENOMEM` when none can be had
    /// now: the caller tries again later). Returns how: the range itself when it is one, else
    /// the number of DMA segments; [`Self::segments`] yields them in either case. Through
    /// [`super::Dispatched::map_data`].
    #[inline(always)]
    pub(super) fn map_data(&self, dev: &Device<Bound>) -> Result<Mapping> {
        let pdu = self.pdu();
        if let Some((page, offset, len)) = self.single_bvec() {
            // SAFETY: `page` + `offset` .. `len` is the request's data buffer, which stays
            // valid until the request ends; `dev` is the bound device doing the DMA.
            let addr = unsafe {
                bindings::dma_map_page_attrs(
                    device_raw(dev),
                    page,
                    offset,
                    len as usize,
                    self.dma_dir(),
                    0,
                )
            };
            if dma_mapping_error(dev, addr) {
                return Err(ENOMEM);
            }
            pdu.single_addr.store(addr, Relaxed);
            pdu.single_len.store(len, Relaxed);
            return Ok(Mapping::Single(addr, len));
        }
        // SAFETY: `raw()` is a valid request; physical segments are bounded by the queue
        // limits we set (`max_segments <= MAX_SEGMENTS`).
        let nseg = unsafe { (*self.raw()).nr_phys_segments } as usize;
        if nseg == 0 || nseg > MAX_SEGMENTS {
            return Err(EINVAL);
        }
        let (sg, _, cap) = KVec::<bindings::scatterlist>::with_capacity(nseg, GFP_ATOMIC)
            .map_err(|_| ENOMEM)?
            .into_raw_parts();
        // SAFETY: `sg` has room for `nseg` entries.
        unsafe { bindings::sg_init_table(sg, nseg as c_uint) };
        let mut last: *mut bindings::scatterlist = core::ptr::null_mut();
        // SAFETY: the table has room for `nr_phys_segments` entries, which is the most
        // `__blk_rq_map_sg` fills.
        let nents = unsafe { bindings::__blk_rq_map_sg(self.raw(), sg, &mut last) };
        let mapped = if nents <= 0 || nents as usize > nseg {
            Err(EIO)
        } else {
            // SAFETY: `sg` holds `nents` initialized entries; `dev` is the bound device doing
            // the DMA; direction matches the operation.
            match unsafe {
                bindings::dma_map_sg_attrs(device_raw(dev), sg, nents, self.dma_dir(), 0)
            } {
                0 => Err(ENOMEM),
                n => Ok(n),
            }
        };
        match mapped {
            Ok(n) => {
                pdu.sg.store(sg, Relaxed);
                pdu.sg_cap.store(cap as u32, Relaxed);
                pdu.nents.store(nents as u32, Relaxed);
                pdu.mapped.store(n, Relaxed);
                Ok(Mapping::Segments(n))
            }
            Err(e) => {
                // SAFETY: allocated just above with this capacity, and not kept.
                drop(unsafe { KVec::from_raw_parts(sg, 0, cap) });
                Err(e)
            }
        }
    }

    /// The direction of the data: to the device for writes (`op_is_write`, a static inline:
    /// odd operations write).
    pub(super) fn dma_dir(&self) -> bindings::dma_data_direction {
        if self.cmd_flags() & 1 != 0 {
            DataDirection::ToDevice
        } else {
            DataDirection::FromDevice
        }
        .into()
    }

    /// The DMA segments (bus address, length) of a request mapped by [`Self::map_data`], for
    /// [`super::Dispatched::segments`], which keeps the scatterlist from being freed while
    /// they are read.
    pub(super) fn segments(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        let pdu = self.pdu();
        let single_len = pdu.single_len.load(Relaxed);
        let single = (single_len != 0).then(|| (pdu.single_addr.load(Relaxed), single_len));
        let n = if single.is_some() {
            0
        } else {
            pdu.mapped.load(Relaxed) as usize
        };
        let sg = pdu.sg.load(Relaxed);
        let n = if sg.is_null() { 0 } else { n };
        Iterator::chain(
            single.into_iter(),
            (0..n.min(MAX_SEGMENTS)).map(move |i| {
                // The scatterlist stays allocated until the request is unmapped, which
                // `Dispatched::segments`, the only caller, rules out while this is read.
                // SAFETY: entries `0..mapped` were filled by `dma_map_sg_attrs`; live (above).
                unsafe {
                    let e = sg.add(i);
                    ((*e).dma_address, (*e).dma_length)
                }
            }),
        )
    }

    /// Undoes [`Self::map_data`] and [`Self::map_metadata`]; does nothing if nothing is
    /// mapped. Through the tokens of
    /// the driver that owns the request ([`super::Dispatched`], [`super::Owned`]).
    #[inline(always)]
    pub(super) fn unmap_data(&self, dev: &Device<Bound>) {
        // The metadata first, as C's `nvme_pci_unmap_rq`.
        self.unmap_metadata(dev);
        let pdu = self.pdu();
        let single_len = pdu.single_len.swap(0, Relaxed);
        if single_len != 0 {
            // SAFETY: mapped by `map_data` for `dev` in this direction with this length, and
            // unmapped once (the length was swapped to 0).
            unsafe {
                bindings::dma_unmap_page_attrs(
                    device_raw(dev),
                    pdu.single_addr.load(Relaxed),
                    single_len as usize,
                    self.dma_dir(),
                    0,
                )
            };
            return;
        }
        let nents = pdu.nents.swap(0, Relaxed);
        pdu.mapped.store(0, Relaxed);
        let sg = pdu.sg.swap(core::ptr::null_mut(), Relaxed);
        if nents == 0 || sg.is_null() {
            return;
        }
        // SAFETY: `sg` was mapped with `nents` entries for `dev` in this direction by
        // `map_data`, and is unmapped once (the count was swapped to 0).
        unsafe {
            bindings::dma_unmap_sg_attrs(device_raw(dev), sg, nents as c_int, self.dma_dir(), 0)
        };
        // SAFETY: allocated by `map_data` with this capacity, freed once (the pointer was
        // swapped to null); the device is done with it.
        drop(unsafe { KVec::from_raw_parts(sg, 0, pdu.sg_cap.load(Relaxed) as usize) });
    }
}
