// SPDX-License-Identifier: GPL-2.0

//! PCI driver callbacks the 7.3 `pci::Driver` trait lacks: `shutdown` (power-off, reboot,
//! kexec). Upstream candidate: a `pci::Driver::shutdown` method, called by `pci::Adapter`.

use super::pci_dev_raw;
use core::pin::Pin;
use kernel::{bindings, device::Core, pci, prelude::*, types::ForeignOwnable};

/// A PCI driver with a `shutdown` callback.
pub(crate) trait Shutdown {
    /// The driver's device data, as [`pci::Driver::Data`].
    type Data<'bound>;

    /// The system goes down (power-off, reboot, kexec): quiesce the device. The driver
    /// stays bound and its data stays alive; nothing is unbound or freed after this.
    fn shutdown(data: Pin<&Self::Data<'_>>);
}

/// Makes `T::shutdown` the `shutdown` callback of the driver `pdev` is being probed by.
///
/// The 7.3 `driver::Registration` registers the `struct pci_driver` before anyone but
/// `pci::Adapter` can set its fields, so this is done from probe: every probe stores the
/// same pointer, which the PCI core reads only when the system shuts down.
pub(crate) fn set_shutdown<T: Shutdown>(pdev: &pci::Device<Core<'_>>) {
    let raw = pci_dev_raw(pdev);
    // SAFETY: `pdev` is being probed, so `dev.driver` points to the `struct device_driver`
    // embedded in this module's registered `struct pci_driver` (`to_pci_driver`), which
    // lives until the module is unloaded, after every device is unbound. Storing one
    // function pointer in it is how C drivers get their `shutdown` called.
    unsafe {
        let drv = (*raw).dev.driver;
        let pdrv = drv
            .cast::<u8>()
            .sub(core::mem::offset_of!(bindings::pci_driver, driver))
            .cast::<bindings::pci_driver>();
        (*pdrv).shutdown = Some(shutdown_callback::<T>);
    }
}

extern "C" fn shutdown_callback<T: Shutdown>(pdev: *mut bindings::pci_dev) {
    // SAFETY: The PCI core calls `shutdown` with a valid `pci_dev`, under its device lock,
    // for a device bound to this driver.
    let data = unsafe { bindings::dev_get_drvdata(&raw mut (*pdev).dev) };
    if data.is_null() {
        return;
    }
    // SAFETY: A bound device's drvdata is the `Pin<KBox<T::Data>>` that `pci::Adapter`'s
    // probe stored (`Device::set_drvdata`, by `into_foreign`); `remove`, which takes it
    // back, cannot run concurrently (the device lock), so the borrow stays valid.
    let data = unsafe { <Pin<KBox<T::Data<'_>>> as ForeignOwnable>::borrow(data.cast()) };
    T::shutdown(data);
}
