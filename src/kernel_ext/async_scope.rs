// SPDX-License-Identifier: GPL-2.0

//! Scoped asynchronous calls: C's `async_schedule_domain` on a domain of the caller's own,
//! every call waited for before the scope returns, so the calls may borrow the caller's
//! data (as `std::thread::scope`). Upstream candidate, as `kernel::async_`: the C driver
//! scans a controller's namespaces this way (`nvme_scan_ns_list`).

use core::{ffi::c_void, marker::PhantomData};
use kernel::{bindings, prelude::*, types::Opaque};

/// `struct async_domain` (include/linux/async.h): the pending entries, and whether
/// `async_synchronize_full` waits for them too (`registered`, as `ASYNC_DOMAIN`).
#[repr(C)]
struct AsyncDomain {
    pending: bindings::list_head,
    registered: u32,
}

/// `registered:1`, the first bit-field of an `unsigned int`: its lowest bit on a
/// little-endian ABI, its highest on a big-endian one.
const REGISTERED: u32 = if cfg!(target_endian = "big") {
    1 << 31
} else {
    1
};

/// `async_func_t`.
type AsyncFunc = unsafe extern "C" fn(data: *mut c_void, cookie: u64);

extern "C" {
    fn async_schedule_node_domain(
        func: AsyncFunc,
        data: *mut c_void,
        node: i32,
        domain: *mut AsyncDomain,
    ) -> u64;
    fn async_synchronize_full_domain(domain: *mut AsyncDomain);
}

/// The calls of one [`scope`]: [`Scope::spawn`] starts one. `'env` is what they may borrow.
///
/// # Invariants
///
/// `domain` is initialised, and does not move until [`scope`] has waited for it
/// (`async_synchronize_full_domain`), which it does before anything of `'env` may go.
pub(crate) struct Scope<'scope, 'env: 'scope> {
    domain: Opaque<AsyncDomain>,
    _env: PhantomData<&'env mut &'env ()>,
    _scope: PhantomData<&'scope mut &'scope ()>,
}

/// Runs `f`, whose [`Scope::spawn`] calls run side by side on the kernel's async workers;
/// returns once all of them have returned. Upstream candidate.
pub(crate) fn scope<'env, R>(f: impl for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R) -> R {
    let s = Scope {
        domain: Opaque::uninit(),
        _env: PhantomData,
        _scope: PhantomData,
    };
    let d = s.domain.get();
    // SAFETY: `d` is valid for writes; an empty list points to itself (`LIST_HEAD_INIT`),
    // and `s` stays in this frame, not moved, until the wait below.
    unsafe {
        let head = core::ptr::addr_of_mut!((*d).pending);
        head.write(bindings::list_head {
            next: head,
            prev: head,
        });
        core::ptr::addr_of_mut!((*d).registered).write(REGISTERED);
    }
    // INVARIANT: initialised above; the wait below comes before `'env` can end (this
    // function's return).
    let r = f(&s);
    // SAFETY: an initialised domain; every call spawned on it ends before this returns.
    unsafe { async_synchronize_full_domain(d) };
    r
}

impl<'scope, 'env> Scope<'scope, 'env> {
    /// Calls `f` on an async worker (here, at once, without memory for it). Upstream
    /// candidate.
    pub(crate) fn spawn<F: FnOnce() + Send + 'scope>(&'scope self, f: F) {
        let Ok(slot) = KBox::<F>::new_uninit(GFP_KERNEL) else {
            f();
            return;
        };
        let data = KBox::into_raw(KBox::write(slot, f)).cast::<c_void>();
        // Without memory for its entry, or with too many entries pending, the C function
        // runs `call` here. What `f` wrote is seen by `scope`'s caller: the entry leaves the
        // domain's list under `async_lock` after `f` returned, and the wait reads the list
        // under it.
        // SAFETY: `call::<F>` takes back the box made here, once; the domain is initialised
        // and [`scope`] waits for it before `f`'s borrows end (type invariant).
        unsafe {
            async_schedule_node_domain(call::<F>, data, bindings::NUMA_NO_NODE, self.domain.get())
        };
    }
}

/// Runs and frees a box [`Scope::spawn`] made.
///
/// # Safety
///
/// `data` is a `KBox<F>` turned into a raw pointer, not used again.
unsafe extern "C" fn call<F: FnOnce()>(data: *mut c_void, _cookie: u64) {
    // SAFETY: the function's safety requirement.
    let f = unsafe { KBox::from_raw(data.cast::<F>()) };
    KBox::into_inner(f)()
}
