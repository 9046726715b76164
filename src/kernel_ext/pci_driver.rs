// SPDX-License-Identifier: GPL-2.0

//! What the 7.3 `pci::Adapter` does not set in the `struct pci_driver` it registers:
//! `shutdown` (power-off, reboot, kexec), system sleep (`struct dev_pm_ops`: suspend and
//! resume, hibernation's freeze, thaw, poweroff and restore), `struct pci_error_handlers`
//! (PCI error recovery, and the function reset hooks `reset_prepare`/`reset_done`: FLR or
//! bus reset through sysfs, VFIO, a hypervisor) and the probe type. [`Adapter`] sets them,
//! then registers as `pci::Adapter`. Upstream candidate: these as `pci::Driver` methods and
//! a `PROBE_TYPE` constant, set by `pci::Adapter` like `probe` and `remove`.

use core::{marker::PhantomData, pin::Pin};
use kernel::{
    bindings, driver,
    ffi::c_int,
    pci,
    prelude::*,
    types::{ForeignOwnable, Opaque},
    ThisModule,
};

/// The state of the PCI channel after an error (`pci_channel_state_t`). Upstream candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChannelState {
    /// I/O to the device still works (a non-fatal error).
    Normal,
    /// The link is frozen: no MMIO, no DMA until a slot reset.
    Frozen,
    /// The device is gone for good.
    PermFailure,
}

/// What a driver tells PCI error recovery (`pci_ers_result_t`). Upstream candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ErsResult {
    /// The driver can recover without a reset (`mmio_enabled` follows).
    CanRecover,
    /// The device needs a slot reset (`slot_reset` follows).
    NeedReset,
    /// The device cannot be recovered.
    Disconnect,
    /// The device works again (`resume` follows).
    Recovered,
}

impl ErsResult {
    fn to_raw(self) -> bindings::pci_ers_result_t {
        match self {
            Self::CanRecover => bindings::pci_ers_result_PCI_ERS_RESULT_CAN_RECOVER,
            Self::NeedReset => bindings::pci_ers_result_PCI_ERS_RESULT_NEED_RESET,
            Self::Disconnect => bindings::pci_ers_result_PCI_ERS_RESULT_DISCONNECT,
            Self::Recovered => bindings::pci_ers_result_PCI_ERS_RESULT_RECOVERED,
        }
    }
}

/// What a PCI driver does when the system goes down or sleeps, its function is reset, or its
/// link reports an error. The PCI core calls each with the device lock held, so never
/// concurrently with each other, probe or remove. Upstream candidate.
pub(crate) trait DriverExt: pci::Driver {
    /// Whether the driver core may probe the driver's devices asynchronously, each in a
    /// worker of its own (`PROBE_PREFER_ASYNCHRONOUS`): they run side by side, and loading
    /// the module waits for them all (unless it is loaded with `async_probe`).
    const PROBE_ASYNC: bool = false;

    /// Whether `sriov_numvfs` enables and disables the device's virtual functions with the
    /// PCI core's plain handler (`pci_sriov_configure_simple`: no resources to set up on
    /// the physical function; refused while a virtual function is assigned to a guest).
    const SRIOV_SIMPLE: bool = false;

    /// The system goes down (power-off, reboot, kexec): quiesce the device. The driver
    /// stays bound and its data alive; nothing is unbound or freed after this.
    fn shutdown(data: Pin<&Self::Data<'_>>);

    /// The function is about to be reset (its registers and state will be lost): stop
    /// using it.
    fn reset_prepare(data: Pin<&Self::Data<'_>>);

    /// The function was reset and its config space restored: bring it back.
    fn reset_done(data: Pin<&Self::Data<'_>>);

    /// The system sleeps (`suspend`), or saves or has saved a hibernation image (`freeze`,
    /// `poweroff`): quiesce the device; it may lose power. An error aborts the transition.
    fn suspend(data: Pin<&Self::Data<'_>>) -> Result;

    /// The system woke up (`resume`), or goes on after or from a hibernation image (`thaw`,
    /// `restore`): the device may have been reset or powered off meanwhile.
    fn resume(data: Pin<&Self::Data<'_>>) -> Result;

    /// The device's link reported an error and is in `state`.
    fn error_detected(data: Pin<&Self::Data<'_>>, state: ChannelState) -> ErsResult;

    /// After [`Self::error_detected`] asked to recover without reset: MMIO works.
    fn mmio_enabled(data: Pin<&Self::Data<'_>>) -> ErsResult;

    /// The slot was reset: restore the device's config space and bring it back.
    fn slot_reset(data: Pin<&Self::Data<'_>>) -> ErsResult;

    /// Error recovery is over and succeeded: I/O may flow again.
    fn error_resume(data: Pin<&Self::Data<'_>>);
}

/// The registration of a PCI driver `T` with its [`DriverExt`] callbacks and probe type:
/// `driver::Registration<Adapter<T>>` in place of `driver::Registration<pci::Adapter<T>>`.
/// Upstream candidate (as part of `pci::Adapter`).
pub(crate) struct Adapter<T>(PhantomData<T>);

// SAFETY: The layout `pci::Adapter<T>` declares, whose registration this is: a `repr(C)`
// `struct pci_driver`, `T::Data` as the device private data (`pci::Adapter`'s probe stores
// it), the `struct device_driver` embedded at `driver`.
unsafe impl<T: DriverExt> driver::DriverLayout for Adapter<T> {
    type DriverType = bindings::pci_driver;
    type DriverData<'bound> = T::Data<'bound>;
    const DEVICE_DRIVER_OFFSET: usize = core::mem::offset_of!(bindings::pci_driver, driver);
}

// SAFETY: `unregister` is `pci::Adapter`'s, valid after its `register` succeeded, which is
// the only way `register` below succeeds.
unsafe impl<T: DriverExt + 'static> driver::RegistrationOps for Adapter<T> {
    unsafe fn register(
        pdrv: &Opaque<bindings::pci_driver>,
        name: &'static CStr,
        module: &'static ThisModule,
    ) -> Result {
        let handlers: &'static bindings::pci_error_handlers = &ErrorHandlers::<T>::TABLE;
        let pm: &'static bindings::dev_pm_ops = &PmOps::<T>::TABLE;
        let raw = pdrv.get();
        // `driver::Registration::new` calls this once, on the `struct pci_driver` it has just
        // initialised; its fields may be set, as `pci::Adapter::register` sets its own below.
        // SAFETY: `pdrv` is valid (the caller's requirements) and not registered yet (above);
        // `handlers` and `pm` are static.
        unsafe {
            (*raw).shutdown = Some(shutdown_callback::<T>);
            (*raw).err_handler = handlers;
            (*raw).driver.pm = pm;
            if T::PROBE_ASYNC {
                (*raw).driver.probe_type = bindings::probe_type_PROBE_PREFER_ASYNCHRONOUS;
            }
            if T::SRIOV_SIMPLE {
                (*raw).sriov_configure = Some(bindings::pci_sriov_configure_simple);
            }
        }
        // Neither `pci::Adapter::register` (name, probe, remove, ID table) nor
        // `__pci_register_driver` (name, bus, owner, module name, groups, dynamic IDs) writes
        // the members set above.
        // SAFETY: The caller's requirements are `pci::Adapter`'s: `pdrv` stays pinned and
        // valid until `unregister`.
        unsafe { <pci::Adapter<T> as driver::RegistrationOps>::register(pdrv, name, module) }
    }

    unsafe fn unregister(pdrv: &Opaque<bindings::pci_driver>) {
        // SAFETY: `register` succeeded, so `pci::Adapter::register` did (the caller's
        // requirements).
        unsafe { <pci::Adapter<T> as driver::RegistrationOps>::unregister(pdrv) }
    }
}

struct ErrorHandlers<T>(PhantomData<T>);

impl<T: DriverExt> ErrorHandlers<T> {
    const TABLE: bindings::pci_error_handlers = bindings::pci_error_handlers {
        error_detected: Some(error_detected_callback::<T>),
        mmio_enabled: Some(mmio_enabled_callback::<T>),
        slot_reset: Some(slot_reset_callback::<T>),
        resume: Some(error_resume_callback::<T>),
        reset_prepare: Some(reset_prepare_callback::<T>),
        reset_done: Some(reset_done_callback::<T>),
        // SAFETY: The other members are optional function pointers: all zeroes is `None`.
        ..unsafe { core::mem::zeroed() }
    };
}

struct PmOps<T>(PhantomData<T>);

impl<T: DriverExt> PmOps<T> {
    // As C's `nvme_dev_pm_ops`: one pair of callbacks for every system sleep transition.
    const TABLE: bindings::dev_pm_ops = bindings::dev_pm_ops {
        suspend: Some(suspend_callback::<T>),
        resume: Some(resume_callback::<T>),
        freeze: Some(suspend_callback::<T>),
        thaw: Some(resume_callback::<T>),
        poweroff: Some(suspend_callback::<T>),
        restore: Some(resume_callback::<T>),
        // SAFETY: The other members are optional function pointers: all zeroes is `None`.
        ..unsafe { core::mem::zeroed() }
    };
}

/// Calls `f` with the device data of the device `dev`, if it is bound; `unbound` if not.
///
/// # Safety
///
/// `dev` is the valid `struct device` of a `pci_dev` the PCI or PM core passed to a
/// callback of this driver, with its device lock held.
unsafe fn with_data<T: DriverExt, R>(
    dev: *mut bindings::device,
    unbound: R,
    f: impl FnOnce(Pin<&T::Data<'_>>) -> R,
) -> R {
    // SAFETY: By the function's requirements `dev` is valid.
    let data = unsafe { bindings::dev_get_drvdata(dev) };
    if data.is_null() {
        return unbound;
    }
    // The unbind that takes drvdata back (`post_unbind_rust`, after `remove`) holds the
    // device lock too, so it cannot run concurrently and the borrow stays valid.
    // SAFETY: A bound device's drvdata is the `Pin<KBox<T::Data>>` that `pci::Adapter`'s
    // probe stored (`Device::set_drvdata`, by `into_foreign`); see above for its lifetime.
    let data = unsafe { <Pin<KBox<T::Data<'_>>> as ForeignOwnable>::borrow(data.cast()) };
    f(data)
}

/// The `struct device` of `pdev`.
///
/// # Safety
///
/// `pdev` is valid.
unsafe fn dev_of(pdev: *mut bindings::pci_dev) -> *mut bindings::device {
    // SAFETY: By the function's requirements `pdev` is valid.
    unsafe { &raw mut (*pdev).dev }
}

extern "C" fn shutdown_callback<T: DriverExt>(pdev: *mut bindings::pci_dev) {
    // SAFETY: The PCI core calls `shutdown` with a valid `pci_dev`, under its device lock.
    unsafe { with_data::<T, _>(dev_of(pdev), (), T::shutdown) };
}

extern "C" fn reset_prepare_callback<T: DriverExt>(pdev: *mut bindings::pci_dev) {
    // SAFETY: The PCI core calls `reset_prepare` with a valid `pci_dev`, under its device
    // lock (`pci_dev_lock`, held until `reset_done`).
    unsafe { with_data::<T, _>(dev_of(pdev), (), T::reset_prepare) };
}

extern "C" fn reset_done_callback<T: DriverExt>(pdev: *mut bindings::pci_dev) {
    // SAFETY: As for `reset_prepare`.
    unsafe { with_data::<T, _>(dev_of(pdev), (), T::reset_done) };
}

extern "C" fn suspend_callback<T: DriverExt>(dev: *mut bindings::device) -> c_int {
    // SAFETY: The PM core calls the `dev_pm_ops` of a PCI driver (through `pci_pm_*`) with
    // the valid `struct device` of its `pci_dev`, under the device lock.
    let r = unsafe { with_data::<T, _>(dev, Ok(()), T::suspend) };
    r.map_or_else(|e| e.to_errno(), |()| 0)
}

extern "C" fn resume_callback<T: DriverExt>(dev: *mut bindings::device) -> c_int {
    // SAFETY: As for `suspend`.
    let r = unsafe { with_data::<T, _>(dev, Ok(()), T::resume) };
    r.map_or_else(|e| e.to_errno(), |()| 0)
}

extern "C" fn error_detected_callback<T: DriverExt>(
    pdev: *mut bindings::pci_dev,
    state: bindings::pci_channel_state_t,
) -> bindings::pci_ers_result_t {
    let state = match state {
        bindings::pci_channel_io_normal => ChannelState::Normal,
        bindings::pci_channel_io_frozen => ChannelState::Frozen,
        _ => ChannelState::PermFailure,
    };
    // SAFETY: PCI error recovery (`report_error_detected`) calls this with a valid
    // `pci_dev`, under its device lock, as every error handler below.
    let r = unsafe {
        with_data::<T, _>(dev_of(pdev), ErsResult::Disconnect, |d| {
            T::error_detected(d, state)
        })
    };
    r.to_raw()
}

extern "C" fn mmio_enabled_callback<T: DriverExt>(
    pdev: *mut bindings::pci_dev,
) -> bindings::pci_ers_result_t {
    // SAFETY: As for `error_detected`.
    let r = unsafe { with_data::<T, _>(dev_of(pdev), ErsResult::Disconnect, T::mmio_enabled) };
    r.to_raw()
}

extern "C" fn slot_reset_callback<T: DriverExt>(
    pdev: *mut bindings::pci_dev,
) -> bindings::pci_ers_result_t {
    // SAFETY: As for `error_detected`.
    let r = unsafe { with_data::<T, _>(dev_of(pdev), ErsResult::Disconnect, T::slot_reset) };
    r.to_raw()
}

extern "C" fn error_resume_callback<T: DriverExt>(pdev: *mut bindings::pci_dev) {
    // SAFETY: As for `error_detected`.
    unsafe { with_data::<T, _>(dev_of(pdev), (), T::error_resume) };
}
