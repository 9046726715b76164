// SPDX-License-Identifier: GPL-2.0

//! Faults a test can inject into a running controller, through debugfs
//! (`/sys/kernel/debug/rnvme<N>/`): error paths and races that a healthy emulated
//! controller never shows. Reading a file gives its current value.
//!
//! - `fail_dma_map`: the next N data mappings fail (4294967295: all of them).
//! - `reset_delay_ms`: an I/O timeout that resets the controller first sleeps this long,
//!   which widens the window in which two namespaces' timeouts race to reset it.
//! - `lose_abort_completions`: the next N Abort completions are dropped, as if the
//!   controller never posted them.
//! - `fail_restart`: the next N times the controller is brought back (after a reset, a
//!   resume, a slot reset) fail, as if it did not come back.
//! - `admin_timeout_delay_ms`: a driver admin command that timed out waits this long
//!   before it moves the controller to resetting, which widens the window in which the
//!   controller may be reset or declared dead meanwhile.
//! - `restart_delay_ms`: the next restart of the controller (a reset's, a release's) waits
//!   this long once the controller is enabled, before it makes the I/O queues again: the
//!   admin queue works while every I/O queue is still stopped. One-shot: the file reads 0
//!   once the restart waits.
//! - `effects_delay_ms`: the next user space admin command that must run alone (Format NVM,
//!   Sanitize) keeps its namespaces frozen this long once the controller answered it,
//!   before they are revalidated: the window in which I/O to them must wait. One-shot: the
//!   file reads 0 once the command waits.
//! - `lose_ns_desc_lists`: the next N Identify (Namespace Identification Descriptor list)
//!   commands of the driver are not sent to the controller, as if it never fetched them:
//!   each times out after `admin_timeout`. Its failure is one a scan tolerates (the
//!   identifiers come from Identify Namespace), so the scan goes on into the reset the
//!   timeout starts: a new disk's first I/O waits for that reset.
//! - `recovery_delay_ms`: the next run of the recovery work that resets the controller after
//!   an admin timeout waits this long before it starts the reset: the window in which the
//!   controller is unbound with a reset asked for and not started. One-shot: the file reads
//!   0 once the work waits.
//! - `kmemleak_control`: each write of N leaks one allocation of N bytes (at least
//!   [`LEAK_MARK`]'s length, at most a page) that starts with [`LEAK_MARK`]; reading gives
//!   how many were leaked. The debug kernel's kmemleak must report it: the positive control
//!   of the suite's leak checks, whose silence proves nothing unless a leak made in the same
//!   window is seen.
//!
//! Only the test build has them (`--cfg rnvme_test_hooks`: `make test`, `make mutants`),
//! as C gates its hooks behind `CONFIG_FAULT_INJECTION_DEBUG_FS`. The production build's
//! [`Faults`] is an empty type whose questions all answer "no" inline: no field, no load, no
//! debugfs file, no parameter.

#[cfg(rnvme_test_hooks)]
pub(crate) use hooks::*;
#[cfg(not(rnvme_test_hooks))]
pub(crate) use none::*;

#[cfg(rnvme_test_hooks)]
mod hooks {
    /// What a controller's queues hold: the controller's faults, shared.
    pub(crate) type FaultsRef = Arc<Faults>;

    // Core atomics, not `kernel::sync::atomic`: `fail_dma_map` is read on every I/O, and the
    // crate's atomics are out-of-line helper calls unless `CONFIG_RUST_INLINE_HELPERS`. The
    // counters order nothing else, so relaxed core atomics (plain loads, `lock cmpxchg`) do.
    use crate::spec::command::{admin_opcode, cns, Command};
    use core::{
        fmt,
        sync::atomic::{AtomicU32, Ordering::Relaxed},
    };
    use kernel::{
        prelude::*,
        sync::Arc,
        time::{
            delay::{fsleep, udelay},
            Delta,
        },
        uaccess::UserSliceReader,
    };

    /// Longest busy wait `admin_completion_delay_ms` gives (it runs in an interrupt handler).
    pub(crate) const MAX_COMPLETION_DELAY_MS: u32 = 200;

    /// Written to `fail_dma_map`: fail every mapping until something else is written.
    pub(crate) const ALWAYS: u32 = u32::MAX;

    /// What a `kmemleak_control` leak starts with: kmemleak's report shows an object's first
    /// bytes, so a test tells the planted leak from a real one.
    pub(crate) const LEAK_MARK: &[u8] = b"rnvme-leak-control";

    pub(crate) struct Faults {
        /// Data mappings still to fail ([`ALWAYS`]: all of them).
        dma_map: AtomicU32,
        /// Milliseconds a timeout waits before its reset.
        reset_delay_ms: AtomicU32,
        /// Abort completions still to drop ([`ALWAYS`]: all of them).
        lost_aborts: AtomicU32,
        /// Restarts still to fail ([`ALWAYS`]: all of them).
        restarts: AtomicU32,
        /// Milliseconds an admin timeout waits before it changes the controller's state.
        admin_timeout_delay_ms: AtomicU32,
        /// Milliseconds the next restart waits between the enable and its I/O queues.
        restart_delay_ms: AtomicU32,
        /// Milliseconds the next frozen admin command holds its freeze once answered.
        effects_delay_ms: AtomicU32,
        /// Identify (Namespace Identification Descriptor list) commands still to lose.
        ns_desc_lists: AtomicU32,
        /// Milliseconds the next recovery work waits before its reset.
        recovery_delay_ms: AtomicU32,
        /// Allocations leaked on purpose through `kmemleak_control`.
        leaks: AtomicU32,
        /// Milliseconds each admin completion busy-waits once handed to its waiter.
        admin_completion_delay_ms: AtomicU32,
    }

    /// The faults' debugfs files.
    #[derive(Clone, Copy)]
    pub(crate) enum Knob {
        FailDmaMap,
        ResetDelayMs,
        LoseAbortCompletions,
        FailRestart,
        AdminTimeoutDelayMs,
        RestartDelayMs,
        EffectsDelayMs,
        LoseNsDescLists,
        RecoveryDelayMs,
        KmemleakControl,
        AdminCompletionDelayMs,
    }

    impl Faults {
        pub(crate) fn new() -> Result<FaultsRef> {
            Ok(Arc::new(
                Self {
                    dma_map: AtomicU32::new(0),
                    reset_delay_ms: AtomicU32::new(0),
                    lost_aborts: AtomicU32::new(0),
                    restarts: AtomicU32::new(0),
                    admin_timeout_delay_ms: AtomicU32::new(0),
                    restart_delay_ms: AtomicU32::new(0),
                    effects_delay_ms: AtomicU32::new(0),
                    ns_desc_lists: AtomicU32::new(0),
                    recovery_delay_ms: AtomicU32::new(0),
                    leaks: AtomicU32::new(0),
                    admin_completion_delay_ms: AtomicU32::new(0),
                },
                GFP_KERNEL,
            )?)
        }

        /// Whether this data mapping is to fail (consumes one injected failure).
        #[inline]
        pub(crate) fn fail_dma_map(&self) -> bool {
            take(&self.dma_map)
        }

        /// Whether this Abort completion is to be dropped (consumes one).
        pub(crate) fn lose_abort_completion(&self) -> bool {
            take(&self.lost_aborts)
        }

        /// Whether this restart of the controller is to fail (consumes one).
        pub(crate) fn fail_restart(&self) -> bool {
            take(&self.restarts)
        }

        /// Sleeps for `reset_delay_ms`, if set, before a timeout resets the controller.
        pub(crate) fn delay_reset(&self) {
            sleep_ms(&self.reset_delay_ms);
        }

        /// Sleeps for `admin_timeout_delay_ms`, if set, before an admin timeout changes the
        /// controller's state.
        pub(crate) fn delay_admin_timeout(&self) {
            sleep_ms(&self.admin_timeout_delay_ms);
        }

        /// Sleeps for `restart_delay_ms`, if set, and clears it: a test reads 0 once the
        /// restart is inside the window.
        pub(crate) fn delay_restart(&self) {
            sleep_once(&self.restart_delay_ms);
        }

        /// Sleeps for `effects_delay_ms`, if set, and clears it: a test reads 0 once the
        /// frozen admin command is inside the window.
        pub(crate) fn delay_effects(&self) {
            sleep_once(&self.effects_delay_ms);
        }

        /// Sleeps for `recovery_delay_ms`, if set, and clears it: a test reads 0 once the
        /// recovery work is inside the window.
        pub(crate) fn delay_recovery(&self) {
            sleep_once(&self.recovery_delay_ms);
        }

        /// Busy-waits `admin_completion_delay_ms` (at most [`MAX_COMPLETION_DELAY_MS`]), if
        /// set, once an admin completion was handed to its waiter: in the interrupt handler,
        /// it holds off whatever the handler does next while the woken waiter runs on.
        pub(crate) fn delay_admin_completion(&self) {
            let ms = self
                .admin_completion_delay_ms
                .load(Relaxed)
                .min(MAX_COMPLETION_DELAY_MS);
            for _ in 0..ms {
                udelay(Delta::from_millis(1));
            }
        }

        /// Whether the driver's admin command `cmd` is to be lost: not sent, left to time
        /// out (consumes one).
        pub(crate) fn lose_admin_command(&self, cmd: &Command) -> bool {
            cmd.opcode() == admin_opcode::IDENTIFY
                && cmd.dw[10] & 0xff == u32::from(cns::NS_DESC_LIST)
                && take(&self.ns_desc_lists)
        }

        fn knob(&self, k: Knob) -> &AtomicU32 {
            match k {
                Knob::FailDmaMap => &self.dma_map,
                Knob::ResetDelayMs => &self.reset_delay_ms,
                Knob::LoseAbortCompletions => &self.lost_aborts,
                Knob::FailRestart => &self.restarts,
                Knob::AdminTimeoutDelayMs => &self.admin_timeout_delay_ms,
                Knob::RestartDelayMs => &self.restart_delay_ms,
                Knob::EffectsDelayMs => &self.effects_delay_ms,
                Knob::LoseNsDescLists => &self.ns_desc_lists,
                Knob::RecoveryDelayMs => &self.recovery_delay_ms,
                Knob::KmemleakControl => &self.leaks,
                Knob::AdminCompletionDelayMs => &self.admin_completion_delay_ms,
            }
        }

        /// A debugfs file's contents.
        pub(crate) fn show(&self, k: Knob, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            writeln!(f, "{}", self.knob(k).load(Relaxed))
        }

        /// A write to a debugfs file: a decimal number.
        pub(crate) fn store(&self, k: Knob, r: &mut UserSliceReader) -> Result {
            let mut buf = [0u8; 16];
            let n = r.len();
            if n > buf.len() {
                return Err(EINVAL);
            }
            r.read_slice(&mut buf[..n])?;
            let text = core::str::from_utf8(&buf[..n]).map_err(|_| EINVAL)?;
            let count = text.trim().parse::<u32>().map_err(|_| EINVAL)?;
            if let Knob::KmemleakControl = k {
                leak(count)?;
                self.leaks.fetch_add(1, Relaxed);
            } else {
                self.knob(k).store(count, Relaxed);
            }
            Ok(())
        }
    }

    /// Leaks one allocation of `len` bytes starting with [`LEAK_MARK`] (`kmemleak_control`).
    fn leak(len: u32) -> Result {
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        if !(LEAK_MARK.len()..=kernel::page::PAGE_SIZE).contains(&len) {
            return Err(EINVAL);
        }
        let mut v = KVec::with_capacity(len, GFP_KERNEL)?;
        v.extend_from_slice(LEAK_MARK, GFP_KERNEL)?;
        v.resize(len, 0, GFP_KERNEL)?;
        // The point: nothing refers to it any more, and nothing frees it.
        core::mem::forget(v);
        Ok(())
    }

    /// Sleeps for the milliseconds a delay knob holds (none if 0).
    fn sleep_ms(ms: &AtomicU32) {
        let ms = ms.load(Relaxed);
        if ms != 0 {
            fsleep(Delta::from_millis(i64::from(ms)));
        }
    }

    /// Sleeps for the milliseconds a one-shot delay knob holds (none if 0), clearing it first.
    fn sleep_once(ms: &AtomicU32) {
        let ms = ms.swap(0, Relaxed);
        if ms != 0 {
            fsleep(Delta::from_millis(i64::from(ms)));
        }
    }

    /// Takes one injected fault from `count` ([`ALWAYS`]: never runs out); false if none is left.
    #[inline]
    fn take(count: &AtomicU32) -> bool {
        // The common case, nothing injected, is one load.
        let mut left = count.load(Relaxed);
        loop {
            match left {
                0 => return false,
                ALWAYS => return true,
                n => match count.compare_exchange(n, n - 1, Relaxed, Relaxed) {
                    Ok(_) => return true,
                    Err(now) => left = now,
                },
            }
        }
    }
}

#[cfg(not(rnvme_test_hooks))]
mod none {
    use kernel::prelude::*;

    /// The production build's faults: none. (Not `Copy`: the callers clone what, in the
    /// test build, is an `Arc`.)
    #[derive(Clone)]
    pub(crate) struct Faults;

    /// What a controller's queues hold: nothing.
    pub(crate) type FaultsRef = Faults;

    impl Faults {
        pub(crate) fn new() -> Result<FaultsRef> {
            Ok(Faults)
        }

        #[inline(always)]
        pub(crate) fn fail_dma_map(&self) -> bool {
            false
        }

        #[inline(always)]
        pub(crate) fn lose_abort_completion(&self) -> bool {
            false
        }

        #[inline(always)]
        pub(crate) fn fail_restart(&self) -> bool {
            false
        }

        #[inline(always)]
        pub(crate) fn delay_reset(&self) {}

        #[inline(always)]
        pub(crate) fn delay_admin_timeout(&self) {}

        #[inline(always)]
        pub(crate) fn delay_restart(&self) {}

        #[inline(always)]
        pub(crate) fn delay_effects(&self) {}

        #[inline(always)]
        pub(crate) fn delay_recovery(&self) {}

        #[inline(always)]
        pub(crate) fn delay_admin_completion(&self) {}

        #[inline(always)]
        pub(crate) fn lose_admin_command(&self, _cmd: &crate::spec::command::Command) -> bool {
            false
        }
    }
}
