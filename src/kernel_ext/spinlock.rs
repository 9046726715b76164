// SPDX-License-Identifier: GPL-2.0

//! Spinlocks for the I/O path that call the kernel's lock functions directly. Upstream
//! candidate: the same backends in `kernel::sync::lock::spinlock`, or inline helpers.
//!
//! `kernel::sync::SpinLock` locks through `rust_helper_spin_lock`, an out-of-line helper that
//! calls `_raw_spin_lock`, and each guard also calls `rust_helper_spin_assert_is_held`, which
//! does nothing without lockdep: three calls where C makes one. Unless
//! `CONFIG_RUST_INLINE_HELPERS` inlines the helpers, that is a measurable share of a queue's
//! submission and completion. These backends call `_raw_spin_lock` and its kin themselves
//! (what `spin_lock` and `spin_lock_irqsave` expand to without `PREEMPT_RT`), and check the
//! lock is held only under lockdep. The locks are the crate's [`Lock`], so guards, `lock()`
//! and lock classes work as for `kernel::sync::SpinLock`.

#[cfg(not(CONFIG_PREEMPT_RT))]
use kernel::{
    bindings,
    sync::lock::{Backend, Lock},
};

/// A spinlock taken in process and softirq context only: [`Lock`] with [`SpinLockBackend`].
#[cfg(not(CONFIG_PREEMPT_RT))]
pub(crate) type SpinLock<T> = Lock<T, SpinLockBackend>;

/// A spinlock that interrupt handlers take too: held with local interrupts off, saved and
/// restored as `spin_lock_irqsave` does (so it may be taken in any context).
#[cfg(not(CONFIG_PREEMPT_RT))]
pub(crate) type SpinLockIrqSave<T> = Lock<T, SpinLockIrqSaveBackend>;

// With PREEMPT_RT a `spinlock_t` is a sleeping lock: the crate's own types.
#[cfg(CONFIG_PREEMPT_RT)]
pub(crate) type SpinLock<T> = kernel::sync::SpinLock<T>;
#[cfg(CONFIG_PREEMPT_RT)]
pub(crate) type SpinLockIrqSave<T> = kernel::sync::SpinLockIrq<T>;

/// Creates a [`SpinLock`] initialiser with a lock class of its own, as `new_spinlock!`.
macro_rules! new_spinlock_direct {
    ($inner:expr $(,)?) => {
        $crate::kernel_ext::spinlock::SpinLock::new(
            $inner,
            kernel::optional_name!(),
            kernel::static_lock_class!(),
        )
    };
}
pub(crate) use new_spinlock_direct;

/// Creates a [`SpinLockIrqSave`] initialiser with a lock class of its own.
macro_rules! new_spinlock_irqsave {
    ($inner:expr $(,)?) => {
        $crate::kernel_ext::spinlock::SpinLockIrqSave::new(
            $inner,
            kernel::optional_name!(),
            kernel::static_lock_class!(),
        )
    };
}
pub(crate) use new_spinlock_irqsave;

/// The `raw_spinlock_t` inside a `spinlock_t`.
///
/// # Safety
///
/// `ptr` points to a `spinlock_t`.
#[cfg(not(CONFIG_PREEMPT_RT))]
#[inline(always)]
unsafe fn raw(ptr: *mut bindings::spinlock_t) -> *mut bindings::raw_spinlock_t {
    // Without PREEMPT_RT, `struct spinlock` is a union whose first member is the
    // `raw_spinlock` `rlock` (the lockdep map, when present, is in a padded sibling), so
    // the two share an address: `spin_lock(l)` is `raw_spin_lock(&l->rlock)`.
    ptr.cast()
}

/// `spin_assert_is_held`, which only does something with lockdep.
///
/// # Safety
///
/// `ptr` points to an initialised `spinlock_t`.
#[cfg(not(CONFIG_PREEMPT_RT))]
#[inline(always)]
unsafe fn assert_held(ptr: *mut bindings::spinlock_t) {
    #[cfg(CONFIG_LOCKDEP)]
    // SAFETY: `ptr` is an initialised lock (the caller's contract).
    unsafe {
        bindings::spin_assert_is_held(ptr)
    };
    #[cfg(not(CONFIG_LOCKDEP))]
    let _ = ptr;
}

/// The backend of [`SpinLock`]: `spin_lock`/`spin_unlock`.
#[cfg(not(CONFIG_PREEMPT_RT))]
pub(crate) struct SpinLockBackend;

#[cfg(not(CONFIG_PREEMPT_RT))]
// SAFETY: the kernel's `spinlock_t` gives mutual exclusion; `lock` and `unlock` are
// `spin_lock` and `spin_unlock` as C expands them, `relock` keeps the default.
unsafe impl Backend for SpinLockBackend {
    type State = bindings::spinlock_t;
    type GuardState = ();

    unsafe fn init(
        ptr: *mut Self::State,
        name: *const kernel::ffi::c_char,
        key: *mut bindings::lock_class_key,
    ) {
        // SAFETY: `ptr` is valid for writes, `name` and `key` valid for ever (the trait's
        // contract).
        unsafe { bindings::__spin_lock_init(ptr, name, key) }
    }

    #[inline(always)]
    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: `ptr` is an initialised lock (the trait's contract).
        unsafe { bindings::_raw_spin_lock(raw(ptr)) };
    }

    #[inline(always)]
    unsafe fn unlock(ptr: *mut Self::State, _guard_state: &Self::GuardState) {
        // SAFETY: `ptr` is a lock the caller holds (the trait's contract).
        unsafe { bindings::_raw_spin_unlock(raw(ptr)) };
    }

    unsafe fn try_lock(ptr: *mut Self::State) -> Option<Self::GuardState> {
        // SAFETY: `ptr` is an initialised lock (the trait's contract).
        (unsafe { bindings::spin_trylock(ptr) } != 0).then_some(())
    }

    #[inline(always)]
    unsafe fn assert_is_held(ptr: *mut Self::State) {
        // SAFETY: `ptr` is an initialised lock (the trait's contract).
        unsafe { assert_held(ptr) }
    }
}

/// The backend of [`SpinLockIrqSave`]: `spin_lock_irqsave`/`spin_unlock_irqrestore`; the
/// guard keeps the saved interrupt flags.
#[cfg(not(CONFIG_PREEMPT_RT))]
pub(crate) struct SpinLockIrqSaveBackend;

#[cfg(not(CONFIG_PREEMPT_RT))]
// SAFETY: `spinlock_t` gives mutual exclusion; `lock`/`unlock` are C's `spin_lock_irqsave`/
// `spin_unlock_irqrestore` (flags saved in the guard), `relock` keeps the default.
unsafe impl Backend for SpinLockIrqSaveBackend {
    type State = bindings::spinlock_t;
    type GuardState = kernel::ffi::c_ulong;

    unsafe fn init(
        ptr: *mut Self::State,
        name: *const kernel::ffi::c_char,
        key: *mut bindings::lock_class_key,
    ) {
        // SAFETY: as `SpinLockBackend::init`.
        unsafe { bindings::__spin_lock_init(ptr, name, key) }
    }

    #[inline(always)]
    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: `ptr` is an initialised lock (the trait's contract).
        unsafe { bindings::_raw_spin_lock_irqsave(raw(ptr)) }
    }

    #[inline(always)]
    unsafe fn unlock(ptr: *mut Self::State, flags: &Self::GuardState) {
        // SAFETY: `ptr` is a lock the caller holds, `flags` what its `lock` saved (the
        // trait's contract).
        unsafe { bindings::_raw_spin_unlock_irqrestore(raw(ptr), *flags) };
    }

    /// Never succeeds: `spin_trylock_irqsave` is a macro with no binding, and no caller
    /// tries these locks.
    unsafe fn try_lock(_ptr: *mut Self::State) -> Option<Self::GuardState> {
        None
    }

    #[inline(always)]
    unsafe fn assert_is_held(ptr: *mut Self::State) {
        // SAFETY: `ptr` is an initialised lock (the trait's contract).
        unsafe { assert_held(ptr) }
    }
}
