// SPDX-License-Identifier: GPL-2.0

//! String module parameters, as C's `module_param_string`: the kernel copies the argument
//! into a fixed buffer when the module loads. The 7.3 `module!` macro takes integers and
//! bools only. Upstream candidate: a `string` parameter type in `module!`.

use core::cell::UnsafeCell;
use kernel::bindings;

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

/// Declares a string module parameter `$name` of at most `$len - 1` bytes, shown in sysfs
/// with permissions `$perm` (read-only ones only) and in `modinfo` with `$desc`.
macro_rules! module_param_string {
    ($name:ident, $len:expr, $perm:expr, $desc:literal) => {
        #[allow(non_upper_case_globals)]
        pub(crate) static $name: $crate::kernel_ext::module_param::StringParam<$len> =
            $crate::kernel_ext::module_param::StringParam::new();

        const _: () = {
            use kernel::bindings;
            use $crate::kernel_ext::module_param::{modinfo, KParamString};

            // Written only at load: a writable parameter would race with its readers.
            assert!($perm & 0o222 == 0);

            static STRING: KParamString = KParamString(bindings::kparam_string {
                maxlen: $len,
                string: $name.raw().cast(),
            });

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
                    ops: &raw const bindings::param_ops_string,
                    perm: $perm,
                    level: -1,
                    flags: 0,
                    __bindgen_anon_1: bindings::kernel_param__bindgen_ty_1 {
                        str_: core::ptr::from_ref(&STRING).cast(),
                    },
                });

            const PARMTYPE: &str = concat!("parmtype=", stringify!($name), ":string\0");
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
pub(crate) use module_param_string;
