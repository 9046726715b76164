// SPDX-License-Identifier: GPL-2.0

//! Per-queue counters, shown in debugfs as `/sys/kernel/debug/rnvme<N>/q<qid>`.
//!
//! Counters that one context at a time updates (submissions under the SQ lock, completions
//! and interrupts by the CQ's one reaper at a time, see `IrqCell`) are updated with a plain
//! load and store: no atomic read-modify-write on the I/O path. The others are rare and use
//! `fetch_add`. Readers may see a count a moment old, which is all a statistic needs.

use crate::fault::FaultsRef;
#[cfg(rnvme_test_hooks)]
use crate::fault::Knob;
use core::{
    fmt,
    sync::atomic::{AtomicU64, Ordering::Relaxed},
};
#[cfg(rnvme_test_hooks)]
use kernel::uaccess::UserSliceReader;
use kernel::{debugfs, prelude::*, str::CString, sync::Arc};

/// The counters of one queue pair.
pub(crate) struct QueueStats {
    /// Commands written to the submission queue.
    submitted: AtomicU64,
    /// Completion entries consumed.
    completed: AtomicU64,
    /// MMIO writes of the SQ tail and CQ head doorbells (shadow doorbells save some).
    sq_doorbells: AtomicU64,
    cq_doorbells: AtomicU64,
    /// Batches of commands whose end was committed apart (`commit_rqs`): once per hardware
    /// queue per blk-mq request list (`queue_rqs`).
    commits: AtomicU64,
    /// Interrupt handler calls for this queue.
    interrupts: AtomicU64,
    /// Completions reaped by blk-mq polling (polled queues, io_uring IOPOLL).
    polled: AtomicU64,
    /// Commands that timed out.
    timeouts: AtomicU64,
    /// Completions with an error status.
    errors: AtomicU64,
}

/// Adds `n` to a counter only one context updates at a time.
fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
}

impl QueueStats {
    pub(crate) fn new() -> Result<Arc<Self>> {
        let z = || AtomicU64::new(0);
        Ok(Arc::new(
            Self {
                submitted: z(),
                completed: z(),
                sq_doorbells: z(),
                cq_doorbells: z(),
                commits: z(),
                interrupts: z(),
                polled: z(),
                timeouts: z(),
                errors: z(),
            },
            GFP_KERNEL,
        )?)
    }

    /// Under the SQ lock.
    pub(crate) fn submitted_locked(&self) {
        bump(&self.submitted, 1);
    }

    /// Under the SQ lock.
    pub(crate) fn sq_doorbell_locked(&self) {
        bump(&self.sq_doorbells, 1);
    }

    /// Under the SQ lock.
    pub(crate) fn commit_locked(&self) {
        bump(&self.commits, 1);
    }

    /// By the CQ's one reaper at a time (see `IrqCell`).
    pub(crate) fn completed_locked(&self, n: u32, doorbell: bool) {
        bump(&self.completed, u64::from(n));
        if doorbell {
            bump(&self.cq_doorbells, 1);
        }
    }

    /// By the CQ's one reaper at a time (see `IrqCell`).
    pub(crate) fn error_locked(&self) {
        bump(&self.errors, 1);
    }

    /// From the queue's interrupt handler (a registration's handler never runs twice at
    /// once).
    pub(crate) fn interrupt(&self) {
        bump(&self.interrupts, 1);
    }

    pub(crate) fn polled(&self, n: u32) {
        self.polled.fetch_add(u64::from(n), Relaxed);
    }

    pub(crate) fn timeout(&self) {
        self.timeouts.fetch_add(1, Relaxed);
    }
}

/// The debugfs file's contents: one `name value` line per counter.
impl fmt::Debug for QueueStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (s, c) = (self.submitted.load(Relaxed), self.completed.load(Relaxed));
        writeln!(f, "submitted {s}")?;
        writeln!(f, "completed {c}")?;
        // Admin commands the controller never completes (an outstanding Asynchronous Event
        // Request, commands a reset took back) stay counted here.
        writeln!(f, "in_flight {}", s.saturating_sub(c))?;
        writeln!(f, "sq_doorbells {}", self.sq_doorbells.load(Relaxed))?;
        writeln!(f, "cq_doorbells {}", self.cq_doorbells.load(Relaxed))?;
        writeln!(f, "commits {}", self.commits.load(Relaxed))?;
        writeln!(f, "interrupts {}", self.interrupts.load(Relaxed))?;
        writeln!(f, "polled {}", self.polled.load(Relaxed))?;
        writeln!(f, "timeouts {}", self.timeouts.load(Relaxed))?;
        write!(f, "errors {}", self.errors.load(Relaxed))
    }
}

/// A fault knob's debugfs file data: the controller's faults and which knob.
#[cfg(rnvme_test_hooks)]
type KnobFile = (FaultsRef, Knob);

/// A controller's debugfs directory and one file per queue; removed when dropped.
pub(crate) struct DebugDir {
    files: KVec<Pin<KBox<debugfs::File<Arc<QueueStats>>>>>,
    #[cfg(rnvme_test_hooks)]
    faults: KVec<Pin<KBox<debugfs::File<KnobFile>>>>,
    dir: debugfs::Dir,
}

impl DebugDir {
    pub(crate) fn new(instance: u32) -> Result<Self> {
        let name = CString::try_from_fmt(fmt!("rnvme{instance}"))?;
        Ok(Self {
            files: KVec::new(),
            #[cfg(rnvme_test_hooks)]
            faults: KVec::new(),
            dir: debugfs::Dir::new(&name),
        })
    }

    /// Adds `q<qid>` showing `stats`.
    pub(crate) fn add_queue(&mut self, qid: u16, stats: Arc<QueueStats>) -> Result {
        let name = CString::try_from_fmt(fmt!("q{qid}"))?;
        let file = KBox::pin_init(self.dir.read_only_file(&name, stats), GFP_KERNEL)?;
        self.files.push(file, GFP_KERNEL)?;
        Ok(())
    }

    /// Adds the files through which tests inject faults (see `fault.rs`).
    #[cfg(rnvme_test_hooks)]
    pub(crate) fn add_faults(&mut self, faults: FaultsRef) -> Result {
        let knobs = [
            (c"fail_dma_map", Knob::FailDmaMap),
            (c"reset_delay_ms", Knob::ResetDelayMs),
            (c"lose_abort_completions", Knob::LoseAbortCompletions),
            (c"fail_restart", Knob::FailRestart),
            (c"admin_timeout_delay_ms", Knob::AdminTimeoutDelayMs),
            (c"restart_delay_ms", Knob::RestartDelayMs),
            (c"effects_delay_ms", Knob::EffectsDelayMs),
            (c"lose_ns_desc_lists", Knob::LoseNsDescLists),
            (c"recovery_delay_ms", Knob::RecoveryDelayMs),
            (c"kmemleak_control", Knob::KmemleakControl),
            (c"admin_completion_delay_ms", Knob::AdminCompletionDelayMs),
        ];
        for (name, knob) in knobs {
            let file = self.dir.read_write_callback_file(
                name,
                (faults.clone(), knob),
                &|(f, k): &KnobFile, out: &mut fmt::Formatter<'_>| f.show(*k, out),
                &|(f, k): &KnobFile, r: &mut UserSliceReader| f.store(*k, r),
            );
            self.faults
                .push(KBox::pin_init(file, GFP_KERNEL)?, GFP_KERNEL)?;
        }
        Ok(())
    }

    /// The production build has no faults to show.
    #[cfg(not(rnvme_test_hooks))]
    pub(crate) fn add_faults(&mut self, _faults: FaultsRef) -> Result {
        Ok(())
    }
}
