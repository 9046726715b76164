// SPDX-License-Identifier: GPL-2.0

//! [`Lease`]: a `'static` door to data that lives only while a device is bound.
//!
//! Open files of the controller's character device, a namespace disk's `private_data` and
//! queued work outlive the PCI binding (a file can stay open after unbind), but what they
//! act on (registers, queues, disks) borrows from the bound device. They hold an
//! `Arc<Lease>` instead: while bound, [`Lease::with`] lends the data inside an SRCU
//! read-side section; [`Lease::revoke`] makes later calls fail and waits for the running
//! ones, so the owner can tear the data down afterwards. This is what the C driver gets from
//! reference-counting `struct nvme_ctrl` and checking its state.

use core::{marker::PhantomData, ptr::null_mut};
use kernel::{
    new_srcu,
    prelude::*,
    sync::{
        atomic::{Acquire, Atomic, Release},
        Arc, Srcu,
    },
    types::ForLt,
};

/// See the module documentation. `F` names the leased type for every lifetime of what it
/// borrows (`ForLt!(Shared<'_>)`). Upstream candidate, as `kernel::revocable` for borrowed
/// data.
///
/// # Invariants
///
/// `ptr` is null, or points to an `F::Of<'a>` that stays valid until [`Lease::revoke`]
/// returns (the caller of [`Lease::grant`] promised it). It is only dereferenced inside an
/// SRCU read-side section of `srcu` that started after it was loaded non-null; `revoke`
/// clears it and then waits for every such section.
#[pin_data]
pub(crate) struct Lease<F: ForLt> {
    #[pin]
    srcu: Srcu,
    ptr: Atomic<*mut ()>,
    _f: PhantomData<F>,
}

// SAFETY: The leased data is `Sync` and only lent as shared references; the pointer and the
// SRCU structure are thread-safe.
unsafe impl<F: ForLt> Send for Lease<F> where for<'a> F::Of<'a>: Sync {}
// SAFETY: As above.
unsafe impl<F: ForLt> Sync for Lease<F> where for<'a> F::Of<'a>: Sync {}

impl<F: ForLt> Lease<F> {
    /// A lease with nothing granted yet. Upstream candidate.
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        // INVARIANT: nothing granted.
        try_pin_init!(Self {
            srcu <- new_srcu!(),
            ptr: Atomic::new(null_mut()),
            _f: PhantomData,
        })
    }

    /// Lends `data` until [`Self::revoke`]. Upstream candidate.
    ///
    /// # Safety
    ///
    /// `data` must stay valid (not moved, not dropped) until [`Self::revoke`] has returned.
    pub(crate) unsafe fn grant<'a>(&self, data: &F::Of<'a>) {
        let p = core::ptr::from_ref(data).cast_mut().cast::<()>();
        // INVARIANT: the caller keeps `data` valid until `revoke` returns.
        self.ptr.store(p, Release);
    }

    /// Calls `f` with the granted data, or returns `None` once revoked (or before any grant).
    /// `f` may sleep; [`Self::revoke`] waits for it. Upstream candidate.
    pub(crate) fn with<R>(&self, f: impl for<'a> FnOnce(&'a F::Of<'a>) -> R) -> Option<R> {
        let _guard = self.srcu.read_lock();
        let p = self.ptr.load(Acquire);
        if p.is_null() {
            return None;
        }
        // SAFETY: non-null, so granted and not yet revoked when loaded; `revoke` waits for
        // this read-side section before the data may go (type invariant). The reference
        // does not escape `f`, whose lifetime is chosen here.
        Some(f(unsafe { &*p.cast::<F::Of<'_>>() }))
    }

    /// Ends the lease: later [`Self::with`] calls return `None`; returns once every running one
    /// has finished. Must not be called from inside [`Self::with`]. Upstream candidate.
    pub(crate) fn revoke(&self) {
        self.ptr.store(null_mut(), Release);
        self.srcu.synchronize();
    }
}

/// A [`Lease`] granted until this is dropped (or revoked earlier). Upstream candidate, with
/// [`Lease`].
pub(crate) struct Grant<F: ForLt>(Arc<Lease<F>>);

impl<F: ForLt> Grant<F> {
    /// Lends `data` through `lease` until the grant is dropped. Upstream candidate.
    ///
    /// # Safety
    ///
    /// `data` must stay valid (not moved, not dropped) until the returned grant is dropped.
    pub(crate) unsafe fn new<'a>(lease: &Arc<Lease<F>>, data: &F::Of<'a>) -> Self {
        // SAFETY: the caller keeps `data` valid until the grant is dropped, which revokes.
        unsafe { lease.grant(data) };
        Self(lease.clone())
    }

    /// Revokes the lease now: see [`Lease::revoke`]. Upstream candidate.
    pub(crate) fn revoke(&self) {
        self.0.revoke();
    }
}

impl<F: ForLt> Drop for Grant<F> {
    fn drop(&mut self) {
        self.0.revoke();
    }
}
