// SPDX-License-Identifier: GPL-2.0

//! Safe wrappers for what the `kernel` crate of Linux 7.3 does not offer yet.
//!
//! This is the only part of rnvme that calls `kernel::bindings` directly. Each wrapper is
//! modelled on its neighbours in `rust/kernel/`, keeps its invariants in its type, and has a
//! `// SAFETY:` comment on every `unsafe` block; the driver above it is safe Rust.

pub(crate) mod async_scope;
pub(crate) mod barrier;
pub(crate) mod block;
pub(crate) mod chardev;
pub(crate) mod dma;
pub(crate) mod dma_pool;
pub(crate) mod dma_ring;
pub(crate) mod hwmon;
pub(crate) mod irq;
pub(crate) mod lease;
pub(crate) mod mmio;
pub(crate) mod module_param;
pub(crate) mod p2pdma;
pub(crate) mod pci_driver;
pub(crate) mod spinlock;
pub(crate) mod srcu_box;
pub(crate) mod sync;
pub(crate) mod sysfs;
pub(crate) mod uring_cmd;

use kernel::{bindings, device, pci};

/// The raw `struct pci_dev` behind a [`pci::Device`]. Upstream candidate: a public
/// `pci::Device::as_raw`.
///
/// `pci::Device::as_raw` is private in 7.3, so this derives the pointer from the type's
/// layout instead.
pub(crate) fn pci_dev_raw<Ctx: device::DeviceContext>(
    pdev: &pci::Device<Ctx>,
) -> *mut bindings::pci_dev {
    // `pci::Device<Ctx>` is `#[repr(transparent)]` over `Opaque<bindings::pci_dev>` (plus a
    // zero-sized `PhantomData`), and `Opaque<T>` is `#[repr(transparent)]` over
    // `UnsafeCell<MaybeUninit<T>>`, so a reference to it is a pointer to the `pci_dev`.
    core::ptr::from_ref(pdev).cast_mut().cast()
}

/// The raw `struct device` behind a [`device::Device`], derived like [`pci_dev_raw`]. Upstream
/// candidate: a public `device::Device::as_raw`.
pub(crate) fn device_raw<Ctx: device::DeviceContext>(
    dev: &device::Device<Ctx>,
) -> *mut bindings::device {
    // `device::Device<Ctx>` is `#[repr(transparent)]` over `Opaque<bindings::device>` (plus a
    // zero-sized `PhantomData`), see `pci_dev_raw`.
    core::ptr::from_ref(dev).cast_mut().cast()
}

/// The PCI command register's offset in config space, and its Memory Space Enable bit.
pub(crate) const PCI_COMMAND: usize = bindings::PCI_COMMAND as usize;
pub(crate) const PCI_COMMAND_MEMORY: u16 = bindings::PCI_COMMAND_MEMORY as u16;

/// Enables bus mastering of a bound device (`pci_set_master`), as error recovery must after
/// a reset: the 7.3 crate has `set_master` on an unbound-context `pci::Device` only.
/// Upstream candidate: `pci::Device<Bound>::set_master`.
pub(crate) fn pci_set_master(pdev: &pci::Device<device::Bound>) {
    // SAFETY: `pdev` is a live, bound PCI device; `pci_set_master` only updates its command
    // register (under the PCI core's own locking of config space).
    unsafe { bindings::pci_set_master(pci_dev_raw(pdev)) };
}

/// Disables bus mastering (`pci_clear_master`): a controller that could not be stopped can
/// then no longer write into memory the driver frees. Upstream candidate:
/// `pci::Device<Bound>::clear_master`.
pub(crate) fn pci_clear_master(pdev: &pci::Device<device::Bound>) {
    // SAFETY: `pdev` is a live, bound PCI device; `pci_clear_master` only updates its
    // command register.
    unsafe { bindings::pci_clear_master(pci_dev_raw(pdev)) };
}

/// Saves the config space of a bound device (`pci_save_state`), for
/// [`pci_restore_state`] after a reset that loses it (a slot reset in PCI error recovery).
/// Upstream candidate: `pci::Device<Bound>::save_state`.
pub(crate) fn pci_save_state(pdev: &pci::Device<device::Bound>) {
    // SAFETY: `pdev` is a live, bound PCI device; `pci_save_state` reads its config space
    // into the `pci_dev`'s own buffers. It cannot fail for a device that has them.
    let _ = unsafe { bindings::pci_save_state(pci_dev_raw(pdev)) };
}

/// Restores the config space [`pci_save_state`] saved (`pci_restore_state`); does nothing
/// if none is saved. Upstream candidate: `pci::Device<Bound>::restore_state`.
pub(crate) fn pci_restore_state(pdev: &pci::Device<device::Bound>) {
    // SAFETY: `pdev` is a live, bound PCI device; `pci_restore_state` writes its config
    // space from the `pci_dev`'s saved state (if any) under the PCI core's locking.
    unsafe { bindings::pci_restore_state(pci_dev_raw(pdev)) };
}

/// Logs a PCI Express device's link: its bandwidth, speed and width, and what limits it when
/// that is below what the device is capable of (a slower or narrower slot or bridge on the
/// way): `pcie_print_link_status`. Nothing for a conventional PCI device. Upstream
/// candidate: `pci::Device::print_link_status`.
pub(crate) fn pcie_print_link_status(pdev: &pci::Device<device::Bound>) {
    let dev = pci_dev_raw(pdev);
    // SAFETY: `dev` is a live, bound PCI device; `pcie_cap` is set at enumeration and
    // constant after (`pci_is_pcie`).
    if unsafe { (*dev).pcie_cap } == 0 {
        return;
    }
    // SAFETY: `dev` is a live PCI Express device; the function reads config space of it and
    // the bridges above it.
    unsafe { bindings::pcie_print_link_status(dev) };
}
