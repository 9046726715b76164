// SPDX-License-Identifier: GPL-2.0

//! Faults a test can inject into a running controller, through debugfs
//! (`/sys/kernel/debug/rnvme<N>/fail_dma_map`): error paths that a healthy emulated
//! controller never takes. Reading the file gives what is still to be injected.

use core::fmt;
use kernel::{
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc,
    },
    uaccess::UserSliceReader,
};

/// Written to `fail_dma_map`: fail every mapping until something else is written.
pub(crate) const ALWAYS: u32 = u32::MAX;

pub(crate) struct Faults {
    /// Data mappings still to fail ([`ALWAYS`]: all of them).
    dma_map: Atomic<u32>,
}

impl Faults {
    pub(crate) fn new() -> Result<Arc<Self>> {
        Ok(Arc::new(
            Self {
                dma_map: Atomic::new(0),
            },
            GFP_KERNEL,
        )?)
    }

    /// Whether this data mapping is to fail (consumes one injected failure).
    pub(crate) fn fail_dma_map(&self) -> bool {
        // The common case, nothing injected, is one load.
        let mut left = self.dma_map.load(Relaxed);
        loop {
            match left {
                0 => return false,
                ALWAYS => return true,
                n => match self.dma_map.cmpxchg(n, n - 1, Relaxed) {
                    Ok(_) => return true,
                    Err(now) => left = now,
                },
            }
        }
    }

    /// The debugfs file's contents.
    pub(crate) fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.dma_map.load(Relaxed))
    }

    /// A write to the debugfs file: a decimal count.
    pub(crate) fn store(&self, r: &mut UserSliceReader) -> Result {
        let mut buf = [0u8; 16];
        let n = r.len();
        if n > buf.len() {
            return Err(EINVAL);
        }
        r.read_slice(&mut buf[..n])?;
        let text = core::str::from_utf8(&buf[..n]).map_err(|_| EINVAL)?;
        let count = text.trim().parse::<u32>().map_err(|_| EINVAL)?;
        self.dma_map.store(count, Relaxed);
        Ok(())
    }
}
