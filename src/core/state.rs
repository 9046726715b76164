// SPDX-License-Identifier: GPL-2.0

//! The controller's state as error recovery and the multipath paths see it.
//!
//! Below the queues and the features, so the hardware layer (`Hw`) keeps it and the
//! multipath heads read it; heads waiting for a live path are kicked through [`Waiter`],
//! which they implement, so this layer never names them.

use kernel::{
    new_mutex,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, Mutex,
    },
};

/// Controller states, as far as error recovery cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum State {
    /// Serving I/O.
    Live = 0,
    /// A reset is running: timeouts wait for it.
    Resetting = 1,
    /// Gone or failed to come back: every I/O fails at once.
    Dead = 2,
}

/// What waits for a controller to be live again: a multipath head with bios waiting for a
/// path.
pub(crate) trait Waiter: Send + Sync {
    /// The controller is live again (or dead): submit what waits (without blocking).
    fn kick(self: Arc<Self>);
}

/// A controller's state as its paths see it, and the heads it has paths in (kicked when it
/// is live again). Shared between the controller (`Hw`) and the heads.
#[pin_data]
pub(crate) struct CtrlStatus {
    state: Atomic<u32>,
    /// The controller is being unbound (C's `NVME_CTRL_DELETING`): its paths still serve
    /// what they are given, but no longer count as ones that may come back.
    leaving: Atomic<bool>,
    #[pin]
    heads: Mutex<KVec<Arc<dyn Waiter>>>,
}

impl CtrlStatus {
    pub(crate) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                state: Atomic::new(State::Live as u32),
                leaving: Atomic::new(false),
                heads <- new_mutex!(KVec::new()),
            }),
            GFP_KERNEL,
        )
    }

    pub(crate) fn state(&self) -> State {
        match self.state.load(Relaxed) {
            0 => State::Live,
            1 => State::Resetting,
            _ => State::Dead,
        }
    }

    /// Sets the state; a controller live again (or dead: nothing will come back through it)
    /// has each head it serves submit the bios waiting for a path.
    pub(crate) fn set_state(&self, s: State) {
        self.state.store(s as u32, Relaxed);
        self.changed(s);
    }

    /// Moves the state from `from` to `s`, unless it is no longer `from`; returns whether
    /// it did. For those who change it without the reset lock: they must not overwrite
    /// what a reset or a give-up stored since they looked.
    pub(crate) fn change(&self, from: State, s: State) -> bool {
        let ok = self.state.cmpxchg(from as u32, s as u32, Relaxed).is_ok();
        if ok {
            self.changed(s);
        }
        ok
    }

    fn changed(&self, s: State) {
        if s != State::Resetting {
            self.kick_heads();
        }
    }

    fn kick_heads(&self) {
        for h in self.heads.lock().iter() {
            h.clone().kick();
        }
    }

    /// The controller is being unbound: bios waiting at a head for it alone (a reset that
    /// the unbind may now drop) fail, those with another path to wait for go on waiting.
    /// Without it a scan whose new head's partition read waits for such a reset would
    /// keep the unbind's revoke waiting for ever.
    pub(crate) fn set_leaving(&self) {
        self.leaving.store(true, Relaxed);
        self.kick_heads();
    }

    /// See [`Self::set_leaving`].
    pub(crate) fn leaving(&self) -> bool {
        self.leaving.load(Relaxed)
    }

    /// Kicks `head` from now on when the controller is live again.
    pub(crate) fn add_head(&self, head: Arc<dyn Waiter>) -> Result {
        self.heads.lock().push(head, GFP_KERNEL)?;
        Ok(())
    }

    /// No longer kicks `head` (every entry of it).
    pub(crate) fn remove_head<W: Waiter>(&self, head: &Arc<W>) {
        let head = Arc::as_ptr(head);
        self.heads
            .lock()
            .retain(|h| !core::ptr::addr_eq(Arc::as_ptr(h), head));
    }
}
