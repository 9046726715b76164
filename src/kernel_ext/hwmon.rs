// SPDX-License-Identifier: GPL-2.0

//! Hardware monitoring devices (`hwmon_device_register_with_info`), for temperature
//! sensors. Upstream candidate: a `kernel::hwmon` shaped like `kernel::miscdevice` (an
//! [`Operations`] trait, a [`Registration`] that unregisters when dropped).
//!
//! The 7.3 kernel crate's bindings do not include `<linux/hwmon.h>`, so its structures and
//! functions are declared here, as that header of 7.3 defines them (`struct hwmon_ops`,
//! `struct hwmon_channel_info`, `struct hwmon_chip_info`, the sensor type and temperature
//! attribute enumerations).

use core::{marker::PhantomData, ptr::null};
use kernel::{
    bindings, device,
    ffi::{c_char, c_int, c_long, c_void},
    prelude::*,
    sync::Arc,
};

/// `enum hwmon_sensor_types`: temperature.
const HWMON_TEMP: u32 = 1;

/// Temperature attributes (`enum hwmon_temp_attributes`, the ones rnvme uses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum TempAttr {
    Input = 1,
    Min = 5,
    Max = 7,
    Crit = 9,
    Alarm = 13,
    Label = 21,
}

impl TempAttr {
    fn from_raw(attr: u32) -> Option<Self> {
        Some(match attr {
            1 => Self::Input,
            5 => Self::Min,
            7 => Self::Max,
            9 => Self::Crit,
            13 => Self::Alarm,
            21 => Self::Label,
            _ => return None,
        })
    }

    /// The attribute's bit in a channel's configuration (`HWMON_T_*`).
    pub(crate) const fn bit(self) -> u32 {
        1 << self as u32
    }
}

/// A hardware monitoring device's temperature sensors.
pub(crate) trait Operations: Send + Sync + 'static {
    /// Each temperature channel's attributes ([`TempAttr::bit`]s), followed by a 0.
    const TEMP_CHANNELS: &'static [u32];

    /// The permissions of `attr` of `channel` (0: hidden), asked once at registration.
    fn visible(&self, attr: TempAttr, channel: usize) -> u16;

    /// The value of `attr` of `channel`, in millidegrees Celsius (or 0/1 for an alarm).
    fn read(&self, attr: TempAttr, channel: usize) -> Result<i64>;

    /// The label of `channel`.
    fn label(&self, channel: usize) -> &'static CStr;

    /// A write of `value` to `attr` of `channel`.
    fn write(&self, attr: TempAttr, channel: usize, value: i64) -> Result;
}

/// `struct hwmon_ops`.
#[repr(C)]
struct HwmonOps {
    visible: u16,
    is_visible: Option<unsafe extern "C" fn(*const c_void, u32, u32, c_int) -> u16>,
    read:
        Option<unsafe extern "C" fn(*mut bindings::device, u32, u32, c_int, *mut c_long) -> c_int>,
    read_string: Option<
        unsafe extern "C" fn(*mut bindings::device, u32, u32, c_int, *mut *const c_char) -> c_int,
    >,
    write: Option<unsafe extern "C" fn(*mut bindings::device, u32, u32, c_int, c_long) -> c_int>,
}

/// `struct hwmon_channel_info`.
#[repr(C)]
struct ChannelInfo {
    kind: u32,
    config: *const u32,
}

/// `struct hwmon_chip_info`.
#[repr(C)]
struct ChipInfo {
    ops: *const HwmonOps,
    info: *const *const ChannelInfo,
}

// `struct device` is only passed by pointer; bindgen's representation of one of its
// members trips the lint.
#[allow(improper_ctypes)]
extern "C" {
    fn hwmon_device_register_with_info(
        dev: *mut bindings::device,
        name: *const c_char,
        drvdata: *mut c_void,
        info: *const ChipInfo,
        extra_groups: *const *const bindings::attribute_group,
    ) -> *mut bindings::device;
    fn hwmon_device_unregister(dev: *mut bindings::device);
}

/// The C tables of an [`Operations`] implementor.
struct Adapter<T>(PhantomData<T>);

impl<T: Operations> Adapter<T> {
    const OPS: HwmonOps = HwmonOps {
        visible: 0,
        is_visible: Some(Self::is_visible),
        read: Some(Self::read),
        read_string: Some(Self::read_string),
        write: Some(Self::write),
    };
    const TEMP: ChannelInfo = ChannelInfo {
        kind: HWMON_TEMP,
        config: T::TEMP_CHANNELS.as_ptr(),
    };
    const INFO: [*const ChannelInfo; 2] = [&Self::TEMP, null()];
    const CHIP: ChipInfo = ChipInfo {
        ops: &Self::OPS,
        info: core::ptr::from_ref(&Self::INFO).cast(),
    };

    /// The operations behind a registered device.
    ///
    /// # Safety
    ///
    /// `dev` is a hwmon device registered by [`Registration::register`] for `T` and not yet
    /// unregistered (the hwmon core calls back only then).
    unsafe fn data<'a>(dev: *mut bindings::device) -> &'a T {
        // SAFETY: The device's driver data is the `Arc<T>` the registration holds until
        // it unregisters the device, after which no callback runs (function's safety
        // section).
        unsafe { &*(*dev).driver_data.cast::<T>() }
    }

    /// # Safety
    ///
    /// `data` is the driver data of a device [`Registration::register`] registered for `T`.
    unsafe extern "C" fn is_visible(data: *const c_void, kind: u32, attr: u32, ch: c_int) -> u16 {
        // SAFETY: `data` is the driver data given at registration: the `Arc<T>`'s
        // pointee, alive while the device is registered.
        let this = unsafe { &*data.cast::<T>() };
        match (kind, TempAttr::from_raw(attr), usize::try_from(ch)) {
            (HWMON_TEMP, Some(a), Ok(ch)) => this.visible(a, ch),
            _ => 0,
        }
    }

    /// # Safety
    ///
    /// `dev` is a device [`Registration::register`] registered for `T`, not yet unregistered;
    /// the pointers are the hwmon core's, valid for the call.
    unsafe extern "C" fn read(
        dev: *mut bindings::device,
        kind: u32,
        attr: u32,
        ch: c_int,
        val: *mut c_long,
    ) -> c_int {
        // SAFETY: Called by the hwmon core for a device registered for `T`.
        let this = unsafe { Self::data(dev) };
        let r = match (kind, TempAttr::from_raw(attr), usize::try_from(ch)) {
            (HWMON_TEMP, Some(a), Ok(ch)) => this.read(a, ch),
            _ => Err(EOPNOTSUPP),
        };
        match r {
            Ok(v) => {
                // SAFETY: `val` points to the caller's `long`, for writing.
                unsafe { *val = v as c_long };
                0
            }
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// `dev` is a device [`Registration::register`] registered for `T`, not yet unregistered;
    /// the pointers are the hwmon core's, valid for the call.
    unsafe extern "C" fn read_string(
        dev: *mut bindings::device,
        kind: u32,
        attr: u32,
        ch: c_int,
        out: *mut *const c_char,
    ) -> c_int {
        // SAFETY: Called by the hwmon core for a device registered for `T`.
        let this = unsafe { Self::data(dev) };
        match (kind, TempAttr::from_raw(attr), usize::try_from(ch)) {
            (HWMON_TEMP, Some(TempAttr::Label), Ok(ch)) => {
                // SAFETY: `out` points to the caller's pointer, for writing; the string is
                // `'static`.
                unsafe { *out = this.label(ch).as_char_ptr() };
                0
            }
            _ => EOPNOTSUPP.to_errno(),
        }
    }

    /// # Safety
    ///
    /// `dev` is a device [`Registration::register`] registered for `T`, not yet unregistered;
    /// the pointers are the hwmon core's, valid for the call.
    unsafe extern "C" fn write(
        dev: *mut bindings::device,
        kind: u32,
        attr: u32,
        ch: c_int,
        val: c_long,
    ) -> c_int {
        // SAFETY: Called by the hwmon core for a device registered for `T`.
        let this = unsafe { Self::data(dev) };
        let r = match (kind, TempAttr::from_raw(attr), usize::try_from(ch)) {
            (HWMON_TEMP, Some(a), Ok(ch)) => this.write(a, ch, val as i64),
            _ => Err(EOPNOTSUPP),
        };
        match r {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }
}

/// A registered hardware monitoring device, unregistered when dropped.
///
/// # Invariants
///
/// `dev` is a hwmon device registered with driver data `Arc::into_raw` of an `Arc<T>`
/// this owns, and the chip information of [`Adapter<T>`].
pub(crate) struct Registration<T: Operations> {
    dev: *mut bindings::device,
    data: *const T,
}

// SAFETY: The registration only holds the device to unregister it, which any thread may;
// `T` is `Send + Sync`.
unsafe impl<T: Operations> Send for Registration<T> {}
// SAFETY: No method of a shared registration does anything.
unsafe impl<T: Operations> Sync for Registration<T> {}

impl<T: Operations> Registration<T> {
    /// Registers a hwmon device named `name` (no '-', '*' or spaces) below `parent`.
    pub(crate) fn register(
        parent: &device::Device<device::Bound>,
        name: &'static CStr,
        data: Arc<T>,
    ) -> Result<Self> {
        // The hwmon core reads these until the device is unregistered: 'static.
        let chip: &'static ChipInfo = &Adapter::<T>::CHIP;
        let raw = Arc::into_raw(data);
        // SAFETY: `parent` is a live device; `name` and `chip` are 'static; `raw` stays
        // valid until the device is unregistered (it is released after, in `drop`, or here
        // on failure); no extra groups.
        let dev = kernel::error::from_err_ptr(unsafe {
            hwmon_device_register_with_info(
                super::device_raw(parent),
                name.as_char_ptr(),
                raw.cast_mut().cast(),
                chip,
                null(),
            )
        });
        match dev {
            // INVARIANT: Registered with `raw` and `Adapter<T>`'s chip information.
            Ok(dev) => Ok(Self { dev, data: raw }),
            Err(e) => {
                // SAFETY: Not registered: the reference from `into_raw` is ours again.
                drop(unsafe { Arc::from_raw(raw) });
                Err(e)
            }
        }
    }
}

impl<T: Operations> Drop for Registration<T> {
    fn drop(&mut self) {
        // SAFETY: `dev` is registered (type invariant); unregistering waits for running
        // callbacks, and none starts after.
        unsafe { hwmon_device_unregister(self.dev) };
        // SAFETY: `data` came from `Arc::into_raw` at registration (type invariant), and
        // no callback uses it any more.
        drop(unsafe { Arc::from_raw(self.data) });
    }
}
