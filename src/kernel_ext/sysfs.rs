// SPDX-License-Identifier: GPL-2.0

//! Device attribute groups built at run time (`struct attribute_group` of
//! `struct device_attribute`s), for devices a driver registers itself: its character device
//! and its disks. Upstream candidate: 7.3's `kernel` crate has no sysfs attributes.

use core::fmt::Write;
use kernel::{
    bindings,
    ffi::{c_char, c_int},
    prelude::*,
    str::CStr,
    sync::LockClassKey,
};

/// Most attributes one group has.
pub(crate) const MAX_ATTRS: usize = 16;

/// The `PAGE_SIZE` buffer of a sysfs `show`: writes past its end are cut off. Upstream
/// candidate.
pub(crate) struct SysfsBuf<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl<'a> SysfsBuf<'a> {
    /// # Safety
    ///
    /// `buf` is the page sysfs passed to a `show` callback, valid for the call.
    pub(super) unsafe fn from_show(buf: *mut c_char) -> Self {
        // SAFETY: See the function's safety section: a page, ours during the call.
        let buf =
            unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), kernel::page::PAGE_SIZE) };
        Self { buf, len: 0 }
    }

    /// What a `show` callback returns for it.
    pub(super) fn len(&self) -> isize {
        self.len as isize
    }
}

impl Write for SysfsBuf<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let room = self.buf.len() - self.len;
        let n = s.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// `device_attribute::show`.
pub(super) type ShowFn = unsafe extern "C" fn(
    *mut bindings::device,
    *mut bindings::device_attribute,
    *mut c_char,
) -> isize;
/// `device_attribute::store`.
pub(super) type StoreFn = unsafe extern "C" fn(
    *mut bindings::device,
    *mut bindings::device_attribute,
    *const c_char,
    usize,
) -> isize;
/// `attribute_group::is_visible`: the attribute's mode for this device, 0 to hide it.
pub(super) type VisibleFn =
    unsafe extern "C" fn(*mut bindings::kobject, *mut bindings::attribute, c_int) -> u16;

/// For an `is_visible` callback: the device whose kobject is `kobj`, and the mode of
/// `attr`.
///
/// # Safety
///
/// `kobj` is the kobject embedded in a live `struct device`; `attr` a live attribute.
pub(super) unsafe fn visible_args(
    kobj: *mut bindings::kobject,
    attr: *mut bindings::attribute,
) -> (*mut bindings::device, u16) {
    // SAFETY: `kobj` is embedded in a `struct device` at `kobj`'s offset, and `attr` is
    // live (the caller's guarantee).
    unsafe {
        let dev = kobj
            .cast::<u8>()
            .sub(core::mem::offset_of!(bindings::device, kobj))
            .cast::<bindings::device>();
        (dev, (*attr).mode)
    }
}

/// A group of read-only attributes (shown by one `show` callback) followed by write-only ones
/// (one `store` callback), and the null-terminated group list a device's `groups` points to.
/// Boxed, so the pointers into it stay valid.
///
/// # Invariants
///
/// `ptrs` holds pointers to the first `len` entries of `attrs`, then null; `group` points
/// to `ptrs`, `groups[0]` to `group`: valid as long as the box lives.
pub(super) struct AttrGroup {
    attrs: [bindings::device_attribute; MAX_ATTRS],
    ptrs: [*mut bindings::attribute; MAX_ATTRS + 1],
    group: bindings::attribute_group,
    groups: [*const bindings::attribute_group; 2],
    len: usize,
}

// SAFETY: Only read after `new` (by sysfs); the pointers point into the box itself, and the
// names are `'static`.
unsafe impl Send for AttrGroup {}
// SAFETY: As above.
unsafe impl Sync for AttrGroup {}

impl AttrGroup {
    /// `show_names` (mode 0444, `show`), then `store_names` (mode 0200, `store`), optionally
    /// filtered per device by `visible`. Fails with `EINVAL` beyond [`MAX_ATTRS`].
    ///
    /// `key` is the lockdep class of the attributes' active references
    /// (`sysfs_attr_init`): one per kind of device, so that a write to one device's
    /// attribute that removes another device (a rescan removing a disk) is not reported as
    /// recursive.
    pub(super) fn new(
        show_names: &[&'static CStr],
        show: ShowFn,
        store_names: &[&'static CStr],
        store: StoreFn,
        visible: Option<VisibleFn>,
        key: Pin<&'static LockClassKey>,
    ) -> Result<KBox<Self>> {
        #[cfg(not(CONFIG_DEBUG_LOCK_ALLOC))]
        let _ = key;
        let len = show_names.len() + store_names.len();
        if len > MAX_ATTRS {
            return Err(EINVAL);
        }
        let mut g = KBox::new(
            Self {
                attrs: pin_init::zeroed(),
                ptrs: [core::ptr::null_mut(); MAX_ATTRS + 1],
                group: pin_init::zeroed(),
                groups: [core::ptr::null(); 2],
                len,
            },
            GFP_KERNEL,
        )?;
        let a = &mut *g;
        for (i, n) in Iterator::chain(show_names.iter(), store_names).enumerate() {
            a.attrs[i].attr.name = n.as_char_ptr();
            if i < show_names.len() {
                a.attrs[i].attr.mode = 0o444;
                a.attrs[i].__bindgen_anon_1.show = Some(show);
            } else {
                a.attrs[i].attr.mode = 0o200;
                a.attrs[i].__bindgen_anon_2.store = Some(store);
            }
            // `sysfs_attr_init`: lockdep needs a static key for attributes that are not
            // static themselves.
            #[cfg(CONFIG_DEBUG_LOCK_ALLOC)]
            {
                a.attrs[i].attr.key = key.as_ptr();
            }
            a.ptrs[i] = &raw mut a.attrs[i].attr;
        }
        a.group.__bindgen_anon_2.attrs = a.ptrs.as_mut_ptr();
        a.group.__bindgen_anon_1.is_visible = visible;
        a.groups[0] = &raw const a.group;
        // INVARIANT: set up just above, inside the box.
        Ok(g)
    }

    /// The null-terminated group list, for a device's `groups`.
    pub(super) fn groups(&mut self) -> *mut *const bindings::attribute_group {
        self.groups.as_mut_ptr()
    }

    /// The index of `attr` in the group (read-only ones first), if it is one of ours.
    pub(super) fn index_of(&self, attr: *const bindings::device_attribute) -> Option<usize> {
        let base = self.attrs.as_ptr() as usize;
        let i =
            (attr as usize).checked_sub(base)? / core::mem::size_of::<bindings::device_attribute>();
        (i < self.len).then_some(i)
    }
}
