// SPDX-License-Identifier: GPL-2.0

//! Synchronization the 7.3 `kernel` crate lacks: a `struct completion` with a bounded wait,
//! and waiting for queued work.
//!
//! `kernel::sync::Completion` only has an unbounded `wait_for_completion`; a driver must never
//! wait forever on a device, so this one adds `wait_timeout` and `reinit`.

use core::marker::PhantomPinned;
use kernel::{bindings, prelude::*, time::msecs_to_jiffies, types::Opaque};

/// A one-shot event between an interrupt handler and a waiting thread. Upstream candidate:
/// `reinit`, `complete` and `wait_timeout` for `kernel::sync::Completion`, which has only
/// `complete_all` and `wait_for_completion`.
#[pin_data]
pub(crate) struct Completion {
    #[pin]
    inner: Opaque<bindings::completion>,
    #[pin]
    _pin: PhantomPinned,
}

// SAFETY: `struct completion` is designed to be signalled and waited on from any task or
// interrupt context; it holds no thread-affine state.
unsafe impl Send for Completion {}
// SAFETY: All operations go through the C API, which serializes with its internal lock.
unsafe impl Sync for Completion {}

impl Completion {
    /// As upstream's `Completion::new`.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            inner <- Opaque::ffi_init(|slot: *mut bindings::completion| {
                // SAFETY: `slot` is valid, pinned memory for a `struct completion`.
                unsafe { bindings::init_completion(slot) };
            }),
            _pin: PhantomPinned,
        })
    }

    /// Marks the event as not yet happened, before starting a new round. Upstream candidate.
    pub(crate) fn reinit(&self) {
        // SAFETY: `inner` was initialized by `new`. `reinit_completion` is a static inline
        // helper that only sets `done = 0`; the waiter calls this before publishing the work
        // that will signal it, so no signal can be lost.
        unsafe { (*self.inner.get()).done = 0 };
    }

    /// Signals the waiter. Callable from interrupt context. Upstream candidate.
    pub(crate) fn complete(&self) {
        // SAFETY: `inner` was initialized by `new`.
        unsafe { bindings::complete(self.inner.get()) };
    }

    /// Waits for [`Self::complete`] at most `ms` milliseconds (not interruptible: the device
    /// may still be using memory the caller owns). Returns `true` if the event happened.
    /// Upstream candidate.
    pub(crate) fn wait_timeout(&self, ms: u32) -> bool {
        let jiffies = msecs_to_jiffies(ms).max(1);
        // SAFETY: `inner` was initialized by `new`; waiting sleeps, which callers allow.
        unsafe { bindings::wait_for_completion_timeout(self.inner.get(), jiffies) != 0 }
    }
}

/// Waits until `work` is neither queued nor running (`flush_work`). Upstream candidate.
///
/// `kernel::workqueue` in 7.3 can queue work but not wait for it; a driver must before its
/// data (or the module's code) goes away.
pub(crate) fn flush_work<T: ?Sized, const ID: u64>(work: &kernel::workqueue::Work<T, ID>) {
    // SAFETY: `work` is a live, initialized work item (a reference to it exists).
    unsafe { bindings::flush_work(kernel::workqueue::Work::raw_get(work)) };
}

/// The system's default unbound workqueue (`system_dfl_wq`). `kernel::workqueue::system()` in
/// 7.3 is `system_wq`, which the kernel now reports as deprecated on every use. Upstream
/// candidate.
pub(crate) fn system_dfl() -> &'static kernel::workqueue::Queue {
    // SAFETY: `system_dfl_wq` is created at boot and never destroyed.
    unsafe { kernel::workqueue::Queue::from_raw(bindings::system_dfl_wq) }
}

/// While it lives, allocations by the current task may not start I/O
/// (`memalloc_noio_save`/`memalloc_noio_restore`, static inlines the 7.3 crate has no
/// binding for): taken while request queues are frozen, so reclaim never waits on them.
/// Upstream candidate for `kernel::task`. Not `Send`: it belongs to the task that made it.
pub(crate) struct MemallocNoio {
    old: u32,
    _task: core::marker::PhantomData<*mut ()>,
}

impl MemallocNoio {
    /// Upstream candidate.
    pub(crate) fn save() -> Self {
        // SAFETY: `current` is the running task; only it changes its own `flags`.
        let old = unsafe {
            let t = bindings::get_current();
            let old = (*t).flags & bindings::PF_MEMALLOC_NOIO;
            (*t).flags |= bindings::PF_MEMALLOC_NOIO;
            old
        };
        Self {
            old,
            _task: core::marker::PhantomData,
        }
    }
}

impl Drop for MemallocNoio {
    fn drop(&mut self) {
        // SAFETY: as in `save`; this runs on the task that saved (the type is not `Send`).
        unsafe {
            let t = bindings::get_current();
            (*t).flags = ((*t).flags & !bindings::PF_MEMALLOC_NOIO) | self.old;
        }
    }
}
