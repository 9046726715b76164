// SPDX-License-Identifier: GPL-2.0

//! Peer-to-peer DMA memory in a PCI device's BAR, as C's `pci_p2pdma_add_resource`,
//! `pci_p2pmem_publish` and `pci_alloc_p2pmem`: a controller's memory buffer becomes a pool
//! the driver takes queues from and other drivers (the NVMe target, RDMA) may use for
//! transfers that do not touch host memory. Upstream candidate: a `pci::p2pdma` module.

use super::pci_dev_raw;
use core::ptr::NonNull;
use kernel::{bindings, device::Bound, error::to_result, pci, prelude::*, sync::aref::ARef};

/// Offers `size` bytes of BAR `bar` from `offset` as the device's peer-to-peer pool (C's
/// `pci_p2pdma_add_resource`; the pool goes with the binding: device-managed).
pub(crate) fn add_resource(
    pdev: &pci::Device<Bound>,
    bar: u32,
    size: usize,
    offset: u64,
) -> Result {
    // The kernel indexes its per-BAR providers with it unchecked.
    if bar >= bindings::PCI_STD_NUM_BARS {
        return Err(EINVAL);
    }
    let bar = i32::try_from(bar).map_err(|_| EINVAL)?;
    // SAFETY: `pdev` is a bound PCI device and `bar` one of its standard BARs; the kernel
    // checks the size and offset against it.
    to_result(unsafe { bindings::pci_p2pdma_add_resource(pci_dev_raw(pdev), bar, size, offset) })
}

/// Lists the device's pool for other drivers (`p2pmem/published` in sysfs).
pub(crate) fn publish(pdev: &pci::Device<Bound>) {
    // SAFETY: `pdev` is a bound PCI device; without a pool the call does nothing.
    unsafe { bindings::pci_p2pmem_publish(pci_dev_raw(pdev), true) }
}

/// The bus address of BAR `bar`'s start (C's `pci_bus_address`).
pub(crate) fn bar_bus_address(pdev: &pci::Device<Bound>, bar: u32) -> Result<u64> {
    if bar >= bindings::PCI_STD_NUM_BARS {
        return Err(EINVAL);
    }
    let raw = pci_dev_raw(pdev);
    let mut region = bindings::pci_bus_region { start: 0, end: 0 };
    // SAFETY: `raw` is a valid `pci_dev` (bound); `bar` indexes its standard resources
    // (checked above), which live as long as the device; `region` is a valid output.
    unsafe {
        bindings::pcibios_resource_to_bus(
            (*raw).bus,
            &mut region,
            (&raw mut (*raw).resource)
                .cast::<bindings::resource>()
                .add(bar as usize),
        )
    };
    Ok(region.start)
}

/// The alignment device memory is mapped with (C's `memremap_compat_align`).
pub(crate) fn compat_align() -> u64 {
    // SAFETY: A pure function of the architecture.
    unsafe { bindings::memremap_compat_align() as u64 }
}

/// `size` bytes of a device's peer-to-peer pool, given back when dropped.
///
/// # Invariants
///
/// `ptr` was returned by `pci_alloc_p2pmem(pdev, size)` and not freed yet; the pool it came
/// from lives until the device is unbound, before which it is dropped (`alloc`'s caller's
/// promise).
pub(crate) struct P2pMem {
    pdev: ARef<pci::Device>,
    ptr: NonNull<u8>,
    size: usize,
    bus: u64,
}

// SAFETY: The memory is device memory mapped into the kernel: any thread may access it and
// free it; `ARef<pci::Device>` is `Send`.
unsafe impl Send for P2pMem {}
// SAFETY: Shared references only expose the addresses.
unsafe impl Sync for P2pMem {}

impl P2pMem {
    /// `size` bytes of `pdev`'s pool, or `None` if it has no pool or not that much left.
    ///
    /// # Safety
    ///
    /// The result is dropped before `pdev` is unbound (which releases the pool, waiting for
    /// its memory to come back).
    pub(crate) unsafe fn alloc(pdev: &pci::Device<Bound>, size: usize) -> Option<Self> {
        let raw = pci_dev_raw(pdev);
        // SAFETY: `raw` is a bound PCI device; without a pool the call returns NULL.
        let ptr = NonNull::new(unsafe { bindings::pci_alloc_p2pmem(raw, size) }.cast::<u8>())?;
        // SAFETY: `ptr` was just allocated from `raw`'s pool.
        let bus = unsafe { bindings::pci_p2pmem_virt_to_bus(raw, ptr.as_ptr().cast()) };
        // INVARIANT: `ptr` is `size` bytes of `pdev`'s pool, freed only by `drop`.
        Some(Self {
            pdev: pdev.into(),
            ptr,
            size,
            bus,
        })
    }

    /// The kernel's mapping of the memory.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Its bus address, for the device.
    pub(crate) fn bus_address(&self) -> u64 {
        self.bus
    }
}

impl Drop for P2pMem {
    fn drop(&mut self) {
        // SAFETY: `ptr` is `size` bytes allocated from the pool of `pdev`, which is still
        // there (type invariant), and freed once, here.
        unsafe {
            bindings::pci_free_p2pmem(pci_dev_raw(&self.pdev), self.ptr.as_ptr().cast(), self.size)
        };
    }
}
