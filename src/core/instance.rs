// SPDX-License-Identifier: GPL-2.0

//! Controller and subsystem numbers (`/dev/rnvme<N>`, `rnvme<S>n<N>`): a controller takes
//! the lowest free one; a subsystem keeps its first controller's until it goes, so no new
//! controller takes a number a subsystem's disks still use.

use kernel::{
    prelude::*,
    sync::atomic::{Acquire, Atomic, Full, Relaxed},
};

/// Controller numbers in use (`/dev/rnvme<N>`, `rnvme<N>` in logs), one bit each.
static INSTANCES: Atomic<u64> = Atomic::new(0);

/// Numbers of NVM subsystems (`rnvme<S>n<N>`): each its first controller's, kept from new
/// controllers until the subsystem goes.
static SUBSYS_INSTANCES: Atomic<u64> = Atomic::new(0);

/// Keeps controller number `n` (in use by a controller) for its subsystem.
pub(crate) fn reserve_instance(n: u32) {
    let mut cur = SUBSYS_INSTANCES.load(Relaxed);
    while let Err(now) = SUBSYS_INSTANCES.cmpxchg(cur, cur | (1 << n), Full) {
        cur = now;
    }
}

/// The subsystem holding number `n` went.
pub(crate) fn release_instance(n: u32) {
    let mut cur = SUBSYS_INSTANCES.load(Relaxed);
    while let Err(now) = SUBSYS_INSTANCES.cmpxchg(cur, cur & !(1 << n), Full) {
        cur = now;
    }
}

/// A controller number, returned to the pool when dropped.
pub(crate) struct Instance(u32);

impl Instance {
    pub(crate) fn alloc() -> Result<Self> {
        loop {
            // Acquire: the reservations read next are at least as new as the numbers in
            // use (a controller reserves its number for its subsystem before freeing it).
            let cur = INSTANCES.load(Acquire);
            let free = (!(cur | SUBSYS_INSTANCES.load(Relaxed))).trailing_zeros();
            if free >= 64 {
                return Err(ENOSPC);
            }
            if INSTANCES.cmpxchg(cur, cur | (1 << free), Full).is_ok() {
                return Ok(Instance(free));
            }
        }
    }

    pub(crate) fn id(&self) -> u32 {
        self.0
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let mut cur = INSTANCES.load(Relaxed);
        while let Err(now) = INSTANCES.cmpxchg(cur, cur & !(1 << self.0), Full) {
            cur = now;
        }
    }
}
