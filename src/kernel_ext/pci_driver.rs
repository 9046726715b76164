// SPDX-License-Identifier: GPL-2.0

//! PCI driver callbacks the 7.3 `pci::Driver` trait lacks: `shutdown` (power-off, reboot,
//! kexec) and the function reset hooks of `struct pci_error_handlers` (`reset_prepare`,
//! `reset_done`: FLR through sysfs, VFIO, a hypervisor). Upstream candidate: these as
//! `pci::Driver` methods, set by `pci::Adapter` like `probe` and `remove`.

use super::pci_dev_raw;
use core::{marker::PhantomData, pin::Pin};
use kernel::{bindings, device::Core, pci, prelude::*, types::ForeignOwnable};

/// What a PCI driver does when the system goes down or its function is reset.
pub(crate) trait DriverExt {
    /// The driver's device data, as [`pci::Driver::Data`].
    type Data<'bound>;

    /// The system goes down (power-off, reboot, kexec): quiesce the device. The driver
    /// stays bound and its data alive; nothing is unbound or freed after this.
    fn shutdown(data: Pin<&Self::Data<'_>>);

    /// The function is about to be reset (its registers and state will be lost): stop
    /// using it.
    fn reset_prepare(data: Pin<&Self::Data<'_>>);

    /// The function was reset and its config space restored: bring it back.
    fn reset_done(data: Pin<&Self::Data<'_>>);
}

/// Makes `T`'s callbacks those of the driver `pdev` is being probed by.
///
/// The 7.3 `driver::Registration` registers the `struct pci_driver` before anyone but
/// `pci::Adapter` can set its fields, so this is done from probe: every probe stores the
/// same pointers, which the PCI core reads only at shutdown or around a function reset of
/// a bound device.
pub(crate) fn attach<T: DriverExt>(pdev: &pci::Device<Core<'_>>) {
    let raw = pci_dev_raw(pdev);
    let handlers: &'static bindings::pci_error_handlers = &ErrorHandlers::<T>::TABLE;
    // SAFETY: `pdev` is being probed: `dev.driver` is this module's registered driver, the
    // `driver` member of a `struct pci_driver` (`to_pci_driver`) alive until module unload.
    let pdrv = unsafe {
        (*raw)
            .dev
            .driver
            .cast::<u8>()
            .sub(core::mem::offset_of!(bindings::pci_driver, driver))
            .cast::<bindings::pci_driver>()
    };
    // SAFETY: `pdrv` is live (above); C drivers set these members the same way, and every
    // probe stores the same pointers. `handlers` is static.
    unsafe {
        (*pdrv).shutdown = Some(shutdown_callback::<T>);
        (*pdrv).err_handler = handlers;
    }
}

struct ErrorHandlers<T>(PhantomData<T>);

impl<T: DriverExt> ErrorHandlers<T> {
    const TABLE: bindings::pci_error_handlers = bindings::pci_error_handlers {
        reset_prepare: Some(reset_prepare_callback::<T>),
        reset_done: Some(reset_done_callback::<T>),
        // SAFETY: The other members are optional function pointers: all zeroes is `None`.
        ..unsafe { core::mem::zeroed() }
    };
}

/// Calls `f` with the device data of `pdev`, if it is bound.
///
/// # Safety
///
/// `pdev` is a valid `pci_dev` the PCI core passed to a callback of this driver, with its
/// device lock held.
unsafe fn with_data<T: DriverExt>(pdev: *mut bindings::pci_dev, f: fn(Pin<&T::Data<'_>>)) {
    // SAFETY: By the function's requirements `pdev` is valid.
    let data = unsafe { bindings::dev_get_drvdata(&raw mut (*pdev).dev) };
    if data.is_null() {
        return;
    }
    // SAFETY: A bound device's drvdata is the `Pin<KBox<T::Data>>` that `pci::Adapter`'s
    // probe stored (`Device::set_drvdata`, by `into_foreign`); `remove`, which takes it
    // back, cannot run concurrently (the device lock), so the borrow stays valid.
    let data = unsafe { <Pin<KBox<T::Data<'_>>> as ForeignOwnable>::borrow(data.cast()) };
    f(data);
}

extern "C" fn shutdown_callback<T: DriverExt>(pdev: *mut bindings::pci_dev) {
    // SAFETY: The PCI core calls `shutdown` with a valid `pci_dev`, under its device lock.
    unsafe { with_data::<T>(pdev, T::shutdown) };
}

extern "C" fn reset_prepare_callback<T: DriverExt>(pdev: *mut bindings::pci_dev) {
    // SAFETY: The PCI core calls `reset_prepare` with a valid `pci_dev`, under its device
    // lock (`pci_dev_lock`, held until `reset_done`).
    unsafe { with_data::<T>(pdev, T::reset_prepare) };
}

extern "C" fn reset_done_callback<T: DriverExt>(pdev: *mut bindings::pci_dev) {
    // SAFETY: As for `reset_prepare`.
    unsafe { with_data::<T>(pdev, T::reset_done) };
}
