// SPDX-License-Identifier: GPL-2.0

//! [`SrcuBox`]: a boxed value readers use without a lock and writers replace whole, freeing
//! the old one after an SRCU grace period (C's `rcu_assign_pointer` + `synchronize_srcu` +
//! free, under the SRCU of the structure that owns it: e.g. an NVMe head's path list).
//! Readers may sleep. Upstream candidate, next to `kernel::sync::Srcu`.

use core::marker::PhantomData;
use kernel::{
    new_srcu,
    prelude::*,
    sync::{
        atomic::{Acquire, Atomic, Relaxed, Release},
        srcu::Guard,
        Srcu,
    },
};

/// See the module documentation.
///
/// # Invariants
///
/// `ptr` comes from `KBox::<T>::into_raw` and is owned by this value. A value it pointed to
/// is freed only after an SRCU grace period of `srcu` that started after `ptr` stopped
/// pointing to it, so a reader inside a read-side section that loaded it may use it.
#[pin_data(PinnedDrop)]
pub(crate) struct SrcuBox<T> {
    #[pin]
    srcu: Srcu,
    ptr: Atomic<*mut ()>,
    _t: PhantomData<KBox<T>>,
}

// SAFETY: the value is `Send + Sync` and only lent as shared references; the pointer and
// the SRCU structure are thread-safe. (The bounds are here, not on the type, so that a
// generic owner needs them only where it is shared.)
unsafe impl<T: Send + Sync> Send for SrcuBox<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for SrcuBox<T> {}

/// A value of an [`SrcuBox`], read inside an SRCU read-side section.
pub(crate) struct SrcuRef<'a, T> {
    value: &'a T,
    _guard: Guard<'a>,
}

impl<T> core::ops::Deref for SrcuRef<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.value
    }
}

impl<T> SrcuBox<T> {
    pub(crate) fn new(value: KBox<T>) -> impl PinInit<Self, Error> {
        // INVARIANT: `ptr` comes from `KBox::into_raw`.
        try_pin_init!(Self {
            srcu <- new_srcu!(),
            ptr: Atomic::new(KBox::into_raw(value).cast::<()>()),
            _t: PhantomData,
        })
    }

    /// The current value, until the returned reference is dropped (which may sleep
    /// meanwhile).
    pub(crate) fn read(&self) -> SrcuRef<'_, T> {
        let guard = self.srcu.read_lock();
        let p = self.ptr.load(Acquire).cast::<T>();
        SrcuRef {
            // SAFETY: loaded inside the read-side section `guard` holds, so it is freed
            // only after the guard is dropped (type invariant), which the returned value
            // outlives.
            value: unsafe { &*p },
            _guard: guard,
        }
    }

    /// Waits for the readers inside a read-side section now (of this box's SRCU). Must not
    /// be called inside one.
    pub(crate) fn synchronize(&self) {
        self.srcu.synchronize();
    }

    /// Replaces the value, then waits for readers of the old one and frees it. Must not be
    /// called inside a read-side section of this box.
    pub(crate) fn replace(&self, value: KBox<T>) {
        // INVARIANT: the new pointer comes from `KBox::into_raw`; the old one is freed after
        // a grace period that starts after the exchange.
        let old = self.ptr.xchg(KBox::into_raw(value).cast::<()>(), Release);
        self.srcu.synchronize();
        // SAFETY: `old` came from `KBox::into_raw` and no reader can still hold it.
        drop(unsafe { KBox::from_raw(old.cast::<T>()) });
    }
}

#[pinned_drop]
impl<T> PinnedDrop for SrcuBox<T> {
    fn drop(self: Pin<&mut Self>) {
        let p = self.ptr.load(Relaxed).cast::<T>();
        // SAFETY: dropping the box means no reader holds a reference to it (readers borrow
        // it); the pointer came from `KBox::into_raw` (type invariant).
        drop(unsafe { KBox::from_raw(p) });
    }
}
