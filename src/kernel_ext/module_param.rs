// SPDX-License-Identifier: GPL-2.0

//! Module parameters shown in sysfs, as C's `module_param`, `module_param_cb` and
//! `module_param_string`: the 7.3 `module!` macro gives its integers and bools permission 0
//! (invisible in `/sys/module/<name>/parameters/`, written once at load). Here an integer
//! parameter checks its range in its `set`, at load and on every sysfs write (a bad value
//! fails with `EINVAL` and a message naming it, the old value kept), and its readers take
//! the current value, so a write applies to what is set up after it, as C's. Upstream
//! candidate: `perm` and a checking `set` in `module!`'s parameters.

use core::{
    cell::UnsafeCell,
    sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering},
};
use kernel::{
    bindings,
    ffi::{c_char, c_int},
    prelude::*,
};

/// The buffer of a string parameter of at most `N - 1` bytes, declared with
/// [`module_param_string!`].
///
/// # Invariants
///
/// The kernel writes the buffer only while it parses the module's arguments, before the
/// module's init runs (the parameter is not writable through sysfs: the macro rejects
/// write permissions); after that it is only read. It always holds a NUL.
pub(crate) struct StringParam<const N: usize> {
    buf: UnsafeCell<[u8; N]>,
}

// SAFETY: After the module's arguments are parsed, the buffer is never written (type
// invariant), so shared references may read it from any thread.
unsafe impl<const N: usize> Sync for StringParam<N> {}

impl<const N: usize> StringParam<N> {
    #[doc(hidden)]
    pub(crate) const fn new() -> Self {
        // INVARIANT: Zeroes hold a NUL (the empty string, the default).
        Self {
            buf: UnsafeCell::new([0; N]),
        }
    }

    #[doc(hidden)]
    pub(crate) const fn raw(&self) -> *mut u8 {
        self.buf.get().cast()
    }

    /// The value given at load time (empty if none), without its NUL.
    pub(crate) fn value(&self) -> &[u8] {
        // SAFETY: The buffer is no longer written once the module runs (type invariant).
        let buf = unsafe { &*self.buf.get() };
        let end = buf.iter().position(|&c| c == 0).unwrap_or(N);
        &buf[..end]
    }
}

/// `bindings::kparam_string`, shareable between threads.
#[doc(hidden)]
#[repr(transparent)]
pub(crate) struct KParamString(pub(crate) bindings::kparam_string);

// SAFETY: The kernel reads it (and writes the buffer it points to under the rules of
// `StringParam`); Rust code never touches it.
unsafe impl Sync for KParamString {}

/// Copies `s` into an array of its length, for `.modinfo` entries.
#[doc(hidden)]
pub(crate) const fn modinfo<const L: usize>(s: &str) -> [u8; L] {
    let b = s.as_bytes();
    let mut out = [0u8; L];
    let mut i = 0;
    while i < L {
        out[i] = b[i];
        i += 1;
    }
    out
}

/// An unsigned integer parameter in `min..=max` (see [`module_param_uint!`]).
///
/// # Invariants
///
/// `value` is written only by [`set_uint`], which the kernel calls under the module's
/// parameter lock (at load, and on sysfs writes); the kernel's `param_get_uint` reads it
/// under the same lock. It is `repr(C)` with `value` first, so the parameter's `arg`
/// points at an `unsigned int`.
#[repr(C)]
pub(crate) struct UintParam {
    value: AtomicU32,
    min: u32,
    max: u32,
    unit: &'static str,
}

impl UintParam {
    #[doc(hidden)]
    pub(crate) const fn new(default: u32, min: u32, max: u32, unit: &'static str) -> Self {
        // Evaluated at build time: the parameter is a static.
        assert!(min <= default && default <= max);
        Self {
            value: AtomicU32::new(default),
            min,
            max,
            unit,
        }
    }

    /// The current value.
    #[inline]
    pub(crate) fn value(&self) -> u32 {
        self.value.load(Ordering::Relaxed)
    }

    #[doc(hidden)]
    pub(crate) const fn arg(&self) -> *mut core::ffi::c_void {
        core::ptr::from_ref(self).cast_mut().cast()
    }
}

/// A bool parameter written only at load (see [`module_param_bool!`]).
///
/// # Invariants
///
/// The kernel's `param_set_bool` writes it while it parses the module's arguments, before
/// the module's init runs (the macro rejects write permissions); after that it is only
/// read. `AtomicBool` has `bool`'s layout, which the kernel's ops read and write.
#[repr(transparent)]
pub(crate) struct BoolParam(AtomicBool);

impl BoolParam {
    #[doc(hidden)]
    pub(crate) const fn new(default: bool) -> Self {
        Self(AtomicBool::new(default))
    }

    /// The value given at load time, or the default.
    #[inline]
    pub(crate) fn value(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    #[doc(hidden)]
    pub(crate) const fn arg(&self) -> *mut core::ffi::c_void {
        core::ptr::from_ref(self).cast_mut().cast()
    }
}

/// A parameter that takes one of a few names (see [`module_param_choice!`]).
///
/// # Invariants
///
/// `index` is below `names.len()`; it is written only by [`set_choice`], under the module's
/// parameter lock, as [`get_choice`] reads it.
pub(crate) struct ChoiceParam {
    index: AtomicU8,
    names: &'static [&'static str],
}

impl ChoiceParam {
    #[doc(hidden)]
    pub(crate) const fn new(names: &'static [&'static str]) -> Self {
        assert!(!names.is_empty() && names.len() <= u8::MAX as usize);
        // INVARIANT: `names` is not empty.
        Self {
            index: AtomicU8::new(0),
            names,
        }
    }

    /// The index in `names` of the current value (0, the first, by default).
    #[inline]
    pub(crate) fn index(&self) -> usize {
        usize::from(self.index.load(Ordering::Relaxed))
    }

    #[doc(hidden)]
    pub(crate) const fn arg(&self) -> *mut core::ffi::c_void {
        core::ptr::from_ref(self).cast_mut().cast()
    }
}

/// The parameter's name and its value as given (`None` if absent or not UTF-8), for
/// messages.
///
/// # Safety
///
/// `kp` points to a valid `kernel_param`; `val`, if not null, to a NUL-terminated string;
/// both valid for the call.
unsafe fn name_and_value<'a>(
    val: *const c_char,
    kp: *const bindings::kernel_param,
) -> (&'a str, Option<&'a str>) {
    // SAFETY: The caller's contract: `kp` is valid and its name a NUL-terminated string
    // of the module's static data.
    let name = unsafe { CStr::from_char_ptr((*kp).name) }
        .to_str()
        .unwrap_or("?");
    let value = if val.is_null() {
        None
    } else {
        // SAFETY: The caller's contract: `val` is NUL-terminated and valid for the call.
        unsafe { CStr::from_char_ptr(val) }.to_str().ok()
    };
    (name, value.map(|v| v.trim_end_matches('\n')))
}

/// `kernel_param_ops.set` of [`UintParam`]: parses as C's `param_set_uint`, then checks the
/// range; a bad value is refused and the old one kept.
///
/// # Safety
///
/// Called by the kernel's parameter code with `kp` one of [`module_param_uint!`]'s
/// parameters, whose `arg` is its `UintParam`, and `val` NUL-terminated or null.
unsafe extern "C" fn set_uint(val: *const c_char, kp: *const bindings::kernel_param) -> c_int {
    if val.is_null() {
        return EINVAL.to_errno();
    }
    // SAFETY: `kp` is one of `module_param_uint!`'s (the function's contract): its `arg`
    // points to a static `UintParam`.
    let param = unsafe { &*(*kp).__bindgen_anon_1.arg.cast::<UintParam>() };
    let mut n: u32 = 0;
    // SAFETY: `val` is a NUL-terminated string valid for the call; `n` is a valid `u32`.
    if unsafe { bindings::kstrtouint(val, 0, &mut n) } != 0 {
        // SAFETY: The function's contract.
        let (name, value) = unsafe { name_and_value(val, kp) };
        pr_err!("{name}={} is not a number\n", value.unwrap_or("?"));
        return EINVAL.to_errno();
    }
    if !(param.min..=param.max).contains(&n) {
        // SAFETY: The function's contract.
        let (name, _) = unsafe { name_and_value(val, kp) };
        pr_err!(
            "{name}={n} is out of range ({}-{}{})\n",
            param.min,
            param.max,
            param.unit
        );
        return EINVAL.to_errno();
    }
    param.value.store(n, Ordering::Relaxed);
    0
}

/// The ops of [`module_param_uint!`]'s parameters.
#[doc(hidden)]
pub(crate) static UINT_OPS: KParamOps = KParamOps(bindings::kernel_param_ops {
    flags: 0,
    set: Some(set_uint),
    get: Some(bindings::param_get_uint),
    free: None,
});

/// `kernel_param_ops.set` of [`ChoiceParam`]: one of its names (a trailing newline, as
/// sysfs writes have, ignored).
///
/// # Safety
///
/// Called by the kernel's parameter code with `kp` one of [`module_param_choice!`]'s
/// parameters, whose `arg` is its `ChoiceParam`, and `val` NUL-terminated or null.
unsafe extern "C" fn set_choice(val: *const c_char, kp: *const bindings::kernel_param) -> c_int {
    // SAFETY: `kp` is one of `module_param_choice!`'s (the function's contract): its `arg`
    // points to a static `ChoiceParam`.
    let param = unsafe { &*(*kp).__bindgen_anon_1.arg.cast::<ChoiceParam>() };
    // SAFETY: The function's contract.
    let (name, value) = unsafe { name_and_value(val, kp) };
    match value.and_then(|v| param.names.iter().position(|&c| c == v)) {
        Some(i) => {
            // INVARIANT: `i` indexes `names`, whose length fits a `u8` (checked in `new`).
            param.index.store(i as u8, Ordering::Relaxed);
            0
        }
        None => {
            pr_err!(
                "{name}={} is not one of {:?}\n",
                value.unwrap_or(""),
                param.names
            );
            EINVAL.to_errno()
        }
    }
}

/// `kernel_param_ops.get` of [`ChoiceParam`]: its current name and a newline.
///
/// # Safety
///
/// Called by the kernel's parameter code with `kp` one of [`module_param_choice!`]'s
/// parameters and `buffer` a page to write.
unsafe extern "C" fn get_choice(buffer: *mut c_char, kp: *const bindings::kernel_param) -> c_int {
    // SAFETY: As in `set_choice`.
    let param = unsafe { &*(*kp).__bindgen_anon_1.arg.cast::<ChoiceParam>() };
    let name = param.names[param.index()].as_bytes();
    // SAFETY: `buffer` is a page (the kernel's `param_attr_show`); a name and a newline are
    // far shorter.
    unsafe {
        core::ptr::copy_nonoverlapping(name.as_ptr(), buffer.cast::<u8>(), name.len());
        *buffer.add(name.len()) = b'\n';
    }
    (name.len() + 1) as c_int
}

/// The ops of [`module_param_choice!`]'s parameters.
#[doc(hidden)]
pub(crate) static CHOICE_OPS: KParamOps = KParamOps(bindings::kernel_param_ops {
    flags: 0,
    set: Some(set_choice),
    get: Some(get_choice),
    free: None,
});

/// `bindings::kernel_param_ops`, shareable between threads.
#[doc(hidden)]
#[repr(transparent)]
pub(crate) struct KParamOps(pub(crate) bindings::kernel_param_ops);

// SAFETY: Only the kernel reads it; it holds function pointers and flags, never written.
unsafe impl Sync for KParamOps {}

/// Emits the `__param` entry of parameter `$name` (ops `$ops`, argument `$arg`, sysfs
/// permissions `$perm`) and its `modinfo` lines (`$type`, `$desc`).
#[doc(hidden)]
macro_rules! kernel_param {
    ($name:ident, $ops:expr, $perm:expr, $arg:expr, $type:literal, $desc:literal) => {
        const _: () = {
            use kernel::bindings;
            use $crate::kernel_ext::module_param::modinfo;

            #[link_section = "__param"]
            #[used(compiler)]
            static PARAM: kernel::module_param::KernelParam =
                kernel::module_param::KernelParam::new(bindings::kernel_param {
                    name: kernel::str::as_char_ptr_in_const_context(
                        match core::ffi::CStr::from_bytes_with_nul(
                            concat!(stringify!($name), "\0").as_bytes(),
                        ) {
                            Ok(s) => s,
                            Err(_) => panic!("parameter name"),
                        },
                    ),
                    // `__this_module` is built by the kernel at load time and outlives the
                    // module's code and data.
                    mod_: &raw mut bindings::__this_module,
                    ops: $ops,
                    perm: $perm,
                    level: -1,
                    flags: 0,
                    __bindgen_anon_1: $arg,
                });

            const PARMTYPE: &str = concat!("parmtype=", stringify!($name), ":", $type, "\0");
            #[link_section = ".modinfo"]
            #[used(compiler)]
            static PARMTYPE_INFO: [u8; PARMTYPE.len()] = modinfo(PARMTYPE);

            const PARM: &str = concat!("parm=", stringify!($name), ":", $desc, "\0");
            #[link_section = ".modinfo"]
            #[used(compiler)]
            static PARM_INFO: [u8; PARM.len()] = modinfo(PARM);
        };
    };
}
pub(crate) use kernel_param;

/// Declares an unsigned integer module parameter `$name` in `$min..=$max` (`$unit` follows
/// the range in the message that refuses a value), shown in sysfs with permissions
/// `$perm` (writable ones check each write as at load) and in `modinfo` with `$desc`.
macro_rules! module_param_uint {
    ($name:ident, $default:expr, $min:expr, $max:expr, $unit:literal, $perm:expr, $desc:literal) => {
        #[allow(non_upper_case_globals)]
        pub(crate) static $name: $crate::kernel_ext::module_param::UintParam =
            $crate::kernel_ext::module_param::UintParam::new($default, $min, $max, $unit);

        $crate::kernel_ext::module_param::kernel_param!(
            $name,
            &raw const $crate::kernel_ext::module_param::UINT_OPS.0,
            $perm,
            kernel::bindings::kernel_param__bindgen_ty_1 { arg: $name.arg() },
            "uint",
            $desc
        );
    };
}
pub(crate) use module_param_uint;

/// Declares a bool module parameter `$name`, set at load only (read-only permissions
/// `$perm` in sysfs), described in `modinfo` by `$desc`; a bare `$name` means true, as C's.
macro_rules! module_param_bool {
    ($name:ident, $default:expr, $perm:expr, $desc:literal) => {
        #[allow(non_upper_case_globals)]
        pub(crate) static $name: $crate::kernel_ext::module_param::BoolParam =
            $crate::kernel_ext::module_param::BoolParam::new($default);

        // Written only at load: a writable parameter would race with its readers.
        const _: () = assert!($perm & 0o222 == 0);

        $crate::kernel_ext::module_param::kernel_param!(
            $name,
            &raw const kernel::bindings::param_ops_bool,
            $perm,
            kernel::bindings::kernel_param__bindgen_ty_1 { arg: $name.arg() },
            "bool",
            $desc
        );
    };
}
pub(crate) use module_param_bool;

/// Declares a module parameter `$name` that takes one of `$names` (the first is the
/// default), with sysfs permissions `$perm` (a write checked as at load) and `modinfo`
/// description `$desc`.
macro_rules! module_param_choice {
    ($name:ident, [$($names:literal),+ $(,)?], $perm:expr, $desc:literal) => {
        #[allow(non_upper_case_globals)]
        pub(crate) static $name: $crate::kernel_ext::module_param::ChoiceParam =
            $crate::kernel_ext::module_param::ChoiceParam::new(&[$($names),+]);

        $crate::kernel_ext::module_param::kernel_param!(
            $name,
            &raw const $crate::kernel_ext::module_param::CHOICE_OPS.0,
            $perm,
            kernel::bindings::kernel_param__bindgen_ty_1 { arg: $name.arg() },
            "string",
            $desc
        );
    };
}
pub(crate) use module_param_choice;

/// Declares a string module parameter `$name` of at most `$len - 1` bytes, shown in sysfs
/// with permissions `$perm` (read-only ones only) and in `modinfo` with `$desc`.
macro_rules! module_param_string {
    ($name:ident, $len:expr, $perm:expr, $desc:literal) => {
        #[allow(non_upper_case_globals)]
        pub(crate) static $name: $crate::kernel_ext::module_param::StringParam<$len> =
            $crate::kernel_ext::module_param::StringParam::new();

        // Written only at load: a writable parameter would race with its readers.
        const _: () = assert!($perm & 0o222 == 0);

        const _: () = {
            static STRING: $crate::kernel_ext::module_param::KParamString =
                $crate::kernel_ext::module_param::KParamString(kernel::bindings::kparam_string {
                    maxlen: $len,
                    string: $name.raw().cast(),
                });

            $crate::kernel_ext::module_param::kernel_param!(
                $name,
                &raw const kernel::bindings::param_ops_string,
                $perm,
                kernel::bindings::kernel_param__bindgen_ty_1 {
                    str_: core::ptr::from_ref(&STRING).cast(),
                },
                "string",
                $desc
            );
        };
    };
}
pub(crate) use module_param_string;
