// SPDX-License-Identifier: GPL-2.0

//! A per-controller character device (`/dev/rnvme<N>`) with ioctls and sysfs attributes.
//!
//! `kernel::miscdevice` in 7.3 takes a `&'static` name, no parent, no attributes and no
//! per-registration data. [`CharDev`] registers a `struct miscdevice` the same way but with a
//! name built at probe, the PCI device as parent (so it appears under it in sysfs), read-only
//! attributes in the device's attribute group, mode 0600, and a `'static` link every open
//! file holds a reference to (open files outlive the registration).

use super::device_raw;
use core::fmt::Write;
use kernel::{
    bindings,
    device::{Bound, Device},
    ffi::{c_char, c_int, c_long, c_uint, c_ulong},
    prelude::*,
    str::{CStr, CString},
    sync::Arc,
    types::{ForeignOwnable, Opaque},
};

/// Most attributes one character device has.
pub(crate) const MAX_ATTRS: usize = 16;

/// What a character device does.
pub(crate) trait CharDevOps: 'static {
    /// Shared by the registration and every open file.
    type Link: Send + Sync + 'static;
    /// Names of the read-only sysfs attributes, shown by [`Self::show`] by index.
    const ATTRS: &'static [&'static CStr];
    /// An ioctl on an open file.
    fn ioctl(link: &Self::Link, cmd: u32, arg: usize) -> Result<isize>;
    /// Writes attribute `index` of [`Self::ATTRS`], one line.
    fn show(link: &Self::Link, index: usize, out: &mut SysfsBuf<'_>) -> core::fmt::Result;
}

/// The `PAGE_SIZE` buffer of a sysfs `show`: writes past its end are cut off. Upstream
/// candidate.
pub(crate) struct SysfsBuf<'a> {
    buf: &'a mut [u8],
    len: usize,
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

/// The attribute group and what it points to; boxed, so the pointers stay valid.
struct Attrs {
    attrs: [bindings::device_attribute; MAX_ATTRS],
    ptrs: [*mut bindings::attribute; MAX_ATTRS + 1],
    group: bindings::attribute_group,
    groups: [*const bindings::attribute_group; 2],
}

/// A registered character device. Upstream candidate.
///
/// # Invariants
///
/// `misc` (first field, `repr(C)`) was registered with `misc_register` and is deregistered
/// in `drop` before any other field goes; its `name`, `groups` and the file operations'
/// private data point into `name`, `attrs` and `link`. The device's `driver_data` is the
/// `miscdevice` (set by `misc_register`), hence this structure.
#[repr(C)]
#[pin_data(PinnedDrop)]
pub(crate) struct CharDev<T: CharDevOps> {
    #[pin]
    misc: Opaque<bindings::miscdevice>,
    name: CString,
    attrs: KBox<Attrs>,
    link: Arc<T::Link>,
}

// SAFETY: The miscdevice is only touched by the misc core (which locks) and `drop`; the
// link is `Send + Sync`.
unsafe impl<T: CharDevOps> Send for CharDev<T> {}
// SAFETY: As above; `&self` gives no access to the miscdevice.
unsafe impl<T: CharDevOps> Sync for CharDev<T> {}

impl<T: CharDevOps> CharDev<T> {
    /// Registers `/dev/<name>` under `parent`, its files holding `link`. Upstream candidate.
    pub(crate) fn register(
        name: core::fmt::Arguments<'_>,
        parent: &Device<Bound>,
        link: Arc<T::Link>,
    ) -> Result<Pin<KBox<Self>>> {
        if T::ATTRS.len() > MAX_ATTRS {
            return Err(EINVAL);
        }
        let name = CString::try_from_fmt(name)?;
        let mut attrs = KBox::new(
            Attrs {
                attrs: pin_init::zeroed(),
                ptrs: [core::ptr::null_mut(); MAX_ATTRS + 1],
                group: pin_init::zeroed(),
                groups: [core::ptr::null(); 2],
            },
            GFP_KERNEL,
        )?;
        let a = &mut *attrs;
        for (i, n) in T::ATTRS.iter().enumerate() {
            a.attrs[i].attr.name = n.as_char_ptr();
            a.attrs[i].attr.mode = 0o444;
            a.attrs[i].__bindgen_anon_1.show = Some(Self::show);
            // `sysfs_attr_init`: lockdep needs a static key for attributes that are not
            // static themselves.
            #[cfg(CONFIG_DEBUG_LOCK_ALLOC)]
            {
                a.attrs[i].attr.key = kernel::static_lock_class!().as_ptr();
            }
            a.ptrs[i] = &raw mut a.attrs[i].attr;
        }
        a.group.__bindgen_anon_2.attrs = a.ptrs.as_mut_ptr();
        a.groups[0] = &raw const a.group;
        let parent = device_raw(parent);
        // Heap pointers: they stay valid when `name` and `attrs` move into the structure.
        let name_ptr = name.as_char_ptr();
        let groups = attrs.groups.as_mut_ptr();
        // INVARIANT: `misc` is registered last, pointing into `name` and `attrs`, which move
        // into the structure with it; `drop` deregisters it first.
        let init = try_pin_init!(Self {
            misc <- Opaque::try_ffi_init(|slot: *mut bindings::miscdevice| {
                let mut m: bindings::miscdevice = pin_init::zeroed();
                m.minor = bindings::MISC_DYNAMIC_MINOR as c_int;
                m.name = name_ptr;
                m.fops = &Self::FOPS;
                m.parent = parent;
                m.groups = groups;
                m.mode = 0o600;
                // SAFETY: `slot` is pinned memory for the miscdevice; `name` and `attrs`
                // are heap allocations moved into this structure below, so the pointers stay
                // valid until `drop` deregisters it (invariant).
                unsafe {
                    slot.write(m);
                    kernel::error::to_result(bindings::misc_register(slot))
                }
            }),
            name,
            attrs,
            link,
        });
        KBox::pin_init(init, GFP_KERNEL)
    }

    const FOPS: bindings::file_operations = bindings::file_operations {
        owner: <crate::RnvmeModule as kernel::ModuleMetadata>::THIS_MODULE.as_ptr(),
        open: Some(Self::open),
        release: Some(Self::release),
        unlocked_ioctl: Some(Self::ioctl),
        // The passthrough structures have the same layout for 32-bit callers.
        compat_ioctl: Some(Self::ioctl),
        ..pin_init::zeroed()
    };

    /// # Safety
    ///
    /// `misc` is the `miscdevice` of a live `CharDev<T>`.
    unsafe fn from_misc<'a>(misc: *const bindings::miscdevice) -> &'a Self {
        // SAFETY: `misc` is the first field of the `repr(C)` `CharDev<T>` and `Opaque` is
        // `repr(transparent)`, so the pointers are the same.
        unsafe { &*misc.cast::<Self>() }
    }

    /// # Safety
    ///
    /// Called by the VFS through `misc_open`, which set `private_data` to our `miscdevice`
    /// and holds `misc_mtx`, so the registration cannot go away meanwhile.
    unsafe extern "C" fn open(_inode: *mut bindings::inode, file: *mut bindings::file) -> c_int {
        // SAFETY: see the function's safety section.
        let this = unsafe { Self::from_misc((*file).private_data.cast()) };
        let link = this.link.clone();
        // SAFETY: the file is being opened; its private data is ours from now on and is
        // released in `release`.
        unsafe { (*file).private_data = link.into_foreign().cast() };
        0
    }

    /// # Safety
    ///
    /// Called by the VFS for a file `open` succeeded on.
    unsafe extern "C" fn release(_inode: *mut bindings::inode, file: *mut bindings::file) -> c_int {
        // SAFETY: `open` stored an `Arc<T::Link>` there; this is its last use.
        drop(unsafe {
            <Arc<T::Link> as ForeignOwnable>::from_foreign((*file).private_data.cast())
        });
        0
    }

    /// # Safety
    ///
    /// Called by the VFS for a file `open` succeeded on, before `release`.
    unsafe extern "C" fn ioctl(file: *mut bindings::file, cmd: c_uint, arg: c_ulong) -> c_long {
        // SAFETY: `open` stored an `Arc<T::Link>`, alive until `release`.
        let link = unsafe { <Arc<T::Link> as ForeignOwnable>::borrow((*file).private_data.cast()) };
        match T::ioctl(&link, cmd, arg) {
            Ok(v) => v as c_long,
            Err(e) => e.to_errno() as c_long,
        }
    }

    /// # Safety
    ///
    /// Called by sysfs for one of our attributes while the device is registered (device
    /// removal waits for running `show` calls).
    unsafe extern "C" fn show(
        dev: *mut bindings::device,
        attr: *mut bindings::device_attribute,
        buf: *mut c_char,
    ) -> isize {
        // SAFETY: `misc_register` made the miscdevice the device's driver data (invariant);
        // it stays registered during this call; `buf` is a page sysfs gives us.
        let (this, buf) = unsafe {
            (
                Self::from_misc((*dev).driver_data.cast()),
                core::slice::from_raw_parts_mut(buf.cast::<u8>(), kernel::page::PAGE_SIZE),
            )
        };
        let base = this.attrs.attrs.as_ptr() as usize;
        let index = (attr as usize - base) / core::mem::size_of::<bindings::device_attribute>();
        let mut out = SysfsBuf { buf, len: 0 };
        if index >= T::ATTRS.len() || T::show(&this.link, index, &mut out).is_err() {
            return EIO.to_errno() as isize;
        }
        out.len as isize
    }
}

#[pinned_drop]
impl<T: CharDevOps> PinnedDrop for CharDev<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: registered (invariant); deregistered once, here. This removes the device
        // node and attributes and waits for running `show` calls; open files keep their
        // own reference to the link.
        unsafe { bindings::misc_deregister(self.misc.get()) };
    }
}

/// True if the calling task has `CAP_SYS_ADMIN`. Upstream candidate.
pub(crate) fn capable_sys_admin() -> bool {
    // SAFETY: `capable` only reads the current task's credentials.
    unsafe { bindings::capable(bindings::CAP_SYS_ADMIN as c_int) }
}
