// SPDX-License-Identifier: GPL-2.0

//! Character devices with ioctls and sysfs attributes: a controller's (`/dev/rnvme<N>`) and
//! each namespace's generic one (`/dev/rng<N>n<M>`).
//!
//! `kernel::miscdevice` in 7.3 takes a `&'static` name, no parent, no attributes and no
//! per-registration data. [`CharDev`] registers a `struct miscdevice` the same way but with a
//! name built at probe, the PCI device as parent (so it appears under it in sysfs), read-only
//! and write-only attributes in the device's attribute group, mode 0600, and a `'static`
//! link every open file holds a reference to (open files outlive the registration).

use super::{
    device_raw,
    sysfs::{visible_args, AttrGroup, SysfsBuf},
    uring_cmd::{self, Queued, UringCmd},
};
use kernel::{
    bindings,
    device::{Bound, Device},
    ffi::{c_char, c_int, c_long, c_uint, c_ulong},
    prelude::*,
    str::{CStr, CString},
    sync::Arc,
    types::{ForeignOwnable, Opaque},
};

/// What a character device does.
pub(crate) trait CharDevOps: 'static {
    /// Shared by the registration and every open file.
    type Link: Send + Sync + 'static;
    /// Names of the read-only sysfs attributes, shown by [`Self::show`] by index.
    const ATTRS: &'static [&'static CStr];
    /// An ioctl on an open file; `writable`: the file was opened for writing.
    fn ioctl(link: &Self::Link, cmd: u32, arg: usize, writable: bool) -> Result<isize>;
    /// The lockdep class of the attributes (`kernel::static_lock_class!()`): one per kind
    /// of device.
    fn lock_class() -> Pin<&'static kernel::sync::LockClassKey>;
    /// Writes attribute `index` of [`Self::ATTRS`], one line.
    fn show(link: &Self::Link, index: usize, out: &mut SysfsBuf<'_>) -> core::fmt::Result;
    /// Whether the device has attribute `index` of [`Self::ATTRS`] (asked once, when it is
    /// registered); every one by default.
    fn visible(_link: &Self::Link, _index: usize) -> bool {
        true
    }
    /// An io_uring command (`IORING_OP_URING_CMD`) on an open file, with io_uring's issue
    /// flags; `writable`: the file was opened for writing. The default takes none.
    fn uring_cmd(
        _link: &Self::Link,
        _cmd: UringCmd,
        _issue_flags: u32,
        _writable: bool,
    ) -> Result<Queued> {
        Err(ENOTTY)
    }
    /// Whether io_uring may poll the device's commands (`uring_cmd_iopoll`): on a polled
    /// ring, [`Self::uring_cmd`] is then handed [`uring_cmd::issue::IOPOLL`] and must put
    /// the command's request on a polled queue. Without it such a ring completes the
    /// commands by interrupt.
    const IOPOLL: bool = false;
    /// Names of the write-only sysfs attributes (mode 0200, as C's `S_IWUSR` controls),
    /// handled by [`Self::store`] by index.
    const STORE_ATTRS: &'static [&'static CStr] = &[];
    /// A write of `input` to attribute `index` of [`Self::STORE_ATTRS`]; an error is the
    /// write's.
    fn store(_link: &Self::Link, _index: usize, _input: &[u8]) -> Result {
        Err(EINVAL)
    }
}

/// `FMODE_WRITE` (include/linux/fs.h; a `__force` cast bindgen cannot evaluate).
const FMODE_WRITE: u32 = 1 << 1;

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
    attrs: KBox<AttrGroup>,
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
        let name = CString::try_from_fmt(name)?;
        let mut attrs = AttrGroup::new(
            T::ATTRS,
            Self::show,
            T::STORE_ATTRS,
            Self::store,
            Some(Self::visible),
            T::lock_class(),
        )?;
        let parent = device_raw(parent);
        // Heap pointers: they stay valid when `name` and `attrs` move into the structure.
        let name_ptr = name.as_char_ptr();
        let groups = attrs.groups();
        // INVARIANT: `misc` is registered last, pointing into `name` and `attrs`, already in
        // the structure with `link` (its attributes' visibility reads `link` while it
        // registers); `drop` deregisters it first.
        let init = try_pin_init!(Self {
            name,
            attrs,
            link,
            misc <- Opaque::try_ffi_init(|slot: *mut bindings::miscdevice| {
                let mut m: bindings::miscdevice = pin_init::zeroed();
                m.minor = bindings::MISC_DYNAMIC_MINOR as c_int;
                m.name = name_ptr;
                m.fops = &Self::FOPS;
                m.parent = parent;
                m.groups = groups;
                m.mode = 0o600;
                // SAFETY: `slot` is pinned memory for the miscdevice; `name` and `attrs`
                // are heap allocations already moved into this structure, so the pointers
                // stay valid until `drop` deregisters it (invariant).
                unsafe {
                    slot.write(m);
                    kernel::error::to_result(bindings::misc_register(slot))
                }
            }),
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
        uring_cmd: Some(Self::uring_cmd),
        uring_cmd_iopoll: if T::IOPOLL {
            Some(Self::uring_cmd_iopoll)
        } else {
            None
        },
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
        // SAFETY: The file is open; its mode is fixed at open.
        let writable = unsafe { (*file).f_mode } & FMODE_WRITE != 0;
        match T::ioctl(&link, cmd, arg, writable) {
            Ok(v) => v as c_long,
            Err(e) => e.to_errno() as c_long,
        }
    }

    /// # Safety
    ///
    /// Called by io_uring for a file `open` succeeded on, before `release`, with a command
    /// of that file.
    unsafe extern "C" fn uring_cmd(
        ioucmd: *mut bindings::io_uring_cmd,
        issue_flags: c_uint,
    ) -> c_int {
        // SAFETY: io_uring hands us the command during this call (function's safety
        // section).
        let Some(cmd) = (unsafe { UringCmd::from_raw(ioucmd.cast()) }) else {
            return EINVAL.to_errno();
        };
        // SAFETY: The command's file is open: `open` stored an `Arc<T::Link>`, alive until
        // `release`; the mode is fixed at open.
        let (link, writable) = unsafe {
            let file = cmd.file();
            (
                <Arc<T::Link> as ForeignOwnable>::borrow((*file).private_data.cast()),
                (*file).f_mode & FMODE_WRITE != 0,
            )
        };
        match T::uring_cmd(&link, cmd, issue_flags, writable) {
            Ok(_) => -(bindings::EIOCBQUEUED as c_int),
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by io_uring for a command [`Self::uring_cmd`] queued on a polled ring, until
    /// it completes.
    unsafe extern "C" fn uring_cmd_iopoll(
        ioucmd: *mut bindings::io_uring_cmd,
        iob: *mut bindings::io_comp_batch,
        poll_flags: c_uint,
    ) -> c_int {
        // SAFETY: See the function's safety section: the command was queued through
        // `UringCmd::queue_with` (the only way `uring_cmd` succeeds), which set its pdu.
        unsafe { uring_cmd::iopoll(ioucmd.cast(), iob, poll_flags) }
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
        let (this, mut out) = unsafe {
            (
                Self::from_misc((*dev).driver_data.cast()),
                SysfsBuf::from_show(buf),
            )
        };
        match this.attrs.index_of(attr) {
            Some(i) if i < T::ATTRS.len() && T::show(&this.link, i, &mut out).is_ok() => out.len(),
            _ => EIO.to_errno() as isize,
        }
    }

    /// # Safety
    ///
    /// Called by sysfs for one of our attributes while the device registers: `kobj` is its
    /// device's, whose driver data is already the miscdevice (`device_create_with_groups`
    /// sets it before `device_add`), in a `CharDev<T>` whose other fields are initialised
    /// (invariant: `misc` is registered last).
    unsafe extern "C" fn visible(
        kobj: *mut bindings::kobject,
        attr: *mut bindings::attribute,
        n: c_int,
    ) -> u16 {
        // SAFETY: See the function's safety section.
        let (this, mode) = unsafe {
            let (dev, mode) = visible_args(kobj, attr);
            (Self::from_misc((*dev).driver_data.cast()), mode)
        };
        match usize::try_from(n) {
            Ok(i) if i >= T::ATTRS.len() || T::visible(&this.link, i) => mode,
            _ => 0,
        }
    }

    /// # Safety
    ///
    /// Called by sysfs for one of our attributes while the device is registered (device
    /// removal waits for running `store` calls).
    unsafe extern "C" fn store(
        dev: *mut bindings::device,
        attr: *mut bindings::device_attribute,
        buf: *const c_char,
        count: usize,
    ) -> isize {
        // SAFETY: As in `show`; `buf` holds the `count` bytes written.
        let (this, input) = unsafe {
            (
                Self::from_misc((*dev).driver_data.cast()),
                core::slice::from_raw_parts(buf.cast::<u8>(), count),
            )
        };
        let Some(index) = this
            .attrs
            .index_of(attr)
            .and_then(|i| i.checked_sub(T::ATTRS.len()))
        else {
            return EIO.to_errno() as isize;
        };
        match T::store(&this.link, index, input) {
            Ok(()) => count as isize,
            Err(e) => e.to_errno() as isize,
        }
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
