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
        drop(self.exchange(value));
    }

    /// Replaces the value; the old one is freed when the returned [`Retired`] is dropped,
    /// after the readers of it: a writer under a spinlock of its own drops the lock first
    /// (and writers side by side share their grace periods). Upstream candidate.
    pub(crate) fn exchange(&self, value: KBox<T>) -> Retired<'_, T> {
        // INVARIANT: the new pointer comes from `KBox::into_raw`; the old one is freed by
        // `Retired::drop` after a grace period that starts after the exchange.
        let old = self.ptr.xchg(KBox::into_raw(value).cast::<()>(), Release);
        Retired {
            srcu: &self.srcu,
            old: old.cast::<T>(),
        }
    }
}

/// An old value of an [`SrcuBox`], freed after its readers when dropped (which may sleep: not
/// inside a read-side section of the box, nor under a spinlock).
///
/// # Invariants
///
/// `old` came from `KBox::into_raw`, is no longer the box's value, and is owned here.
pub(crate) struct Retired<'a, T> {
    srcu: &'a Srcu,
    old: *mut T,
}

impl<T> Drop for Retired<'_, T> {
    fn drop(&mut self) {
        // Readers that loaded `old` did so before the exchange: this waits for them.
        self.srcu.synchronize();
        // SAFETY: `old` came from `KBox::into_raw`, is owned here (type invariant), and no
        // reader can still hold it.
        drop(unsafe { KBox::from_raw(self.old) });
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
