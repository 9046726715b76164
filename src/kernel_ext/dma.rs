// SPDX-License-Identifier: GPL-2.0

//! DMA constraints the 7.3 `kernel::dma` does not cover: the minimum alignment mask that
//! bounce buffering must keep, and the mapping size the DMA layer handles best.
//! Upstream candidates for `dma::Device`.

use super::device_raw;
use kernel::{
    bindings,
    device::{Bound, Device},
    prelude::*,
};

/// Sets the device's minimum DMA alignment mask (`dma_set_min_align_mask`, a static inline in
/// 7.3): bounce buffering (swiotlb) then keeps the address bits under `mask`, so a buffer that
/// starts at some offset in a controller page is bounced to the same offset, as PRPs need.
/// Fails if the bus gave the device no DMA parameters. Upstream candidate.
///
/// # Safety
///
/// Call before any DMA mapping of `dev` (at probe), as `dma_set_mask` must be.
pub(crate) unsafe fn set_min_align_mask(dev: &Device<Bound>, mask: u32) -> Result {
    let d = device_raw(dev);
    // SAFETY: `d` is a live device; `dma_parms`, if set, points to parameters the bus owns
    // for as long as the device exists; nothing maps DMA for it yet (the caller's
    // contract), so nothing reads them concurrently.
    unsafe {
        let parms = (*d).dma_parms;
        if parms.is_null() {
            return Err(EINVAL);
        }
        (*parms).min_align_mask = mask;
    }
    Ok(())
}

/// The largest mapping the DMA layer handles without a slow path (`dma_opt_mapping_size`): with
/// an IOMMU, its caching limit; with bounce buffering, what one bounce slot run holds. Upstream
/// candidate.
pub(crate) fn opt_mapping_size(dev: &Device<Bound>) -> usize {
    // SAFETY: `dev` is a live, bound device.
    unsafe { bindings::dma_opt_mapping_size(device_raw(dev)) }
}
