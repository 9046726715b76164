// SPDX-License-Identifier: GPL-2.0

//! The PCI driver: matches NVMe controllers by class code and hands them to [`Controller`].

use crate::{
    ctrl::Controller,
    kernel_ext::pci_driver::{ChannelState, DriverExt, ErsResult},
};
use core::pin::Pin;
use kernel::{device::Core, pci, prelude::*};

pub(crate) struct RnvmeDriver;

kernel::pci_device_table!(
    PCI_TABLE,
    <RnvmeDriver as pci::Driver>::IdInfo,
    [(
        // Mass storage (01h), non-volatile memory (08h), NVM Express interface (02h).
        pci::DeviceId::from_class(
            pci::Class::STORAGE_EXPRESS.as_raw(),
            pci::ClassMask::Full.as_raw()
        ),
        ()
    )]
);

impl pci::Driver for RnvmeDriver {
    type IdInfo = ();
    type Data<'bound> = Controller<'bound>;
    const ID_TABLE: pci::IdTable<Self::IdInfo> = &PCI_TABLE;

    fn probe<'bound>(
        pdev: &'bound pci::Device<Core<'_>>,
        _info: Option<&'bound Self::IdInfo>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        Controller::new(pdev)
    }

    fn unbind<'bound>(_pdev: &'bound pci::Device<Core<'_>>, ctrl: Pin<&Controller<'bound>>) {
        ctrl.unbind();
    }
}

impl DriverExt for RnvmeDriver {
    // As C: controllers come up side by side (one that is slow to become ready, or to
    // answer, holds up no other), and their namespaces are scanned by each probe.
    const PROBE_ASYNC: bool = true;

    // As C: `echo N > sriov_numvfs` makes N virtual functions, each a controller of its
    // own that the driver binds (once the physical function's Virtualization Management
    // has given it queues and vectors and brought it online).
    const SRIOV_SIMPLE: bool = true;

    fn shutdown(ctrl: Pin<&Controller<'_>>) {
        ctrl.shutdown();
    }

    fn reset_prepare(ctrl: Pin<&Controller<'_>>) {
        ctrl.function_reset_prepare();
    }

    fn reset_done(ctrl: Pin<&Controller<'_>>) {
        ctrl.function_reset_done();
    }

    fn suspend(ctrl: Pin<&Controller<'_>>) -> Result {
        ctrl.suspend()
    }

    fn resume(ctrl: Pin<&Controller<'_>>) -> Result {
        ctrl.resume()
    }

    fn error_detected(ctrl: Pin<&Controller<'_>>, state: ChannelState) -> ErsResult {
        ctrl.error_detected(state)
    }

    fn mmio_enabled(ctrl: Pin<&Controller<'_>>) -> ErsResult {
        ctrl.mmio_enabled()
    }

    fn slot_reset(ctrl: Pin<&Controller<'_>>) -> ErsResult {
        ctrl.slot_reset()
    }

    fn error_resume(ctrl: Pin<&Controller<'_>>) {
        ctrl.error_resume();
    }
}
