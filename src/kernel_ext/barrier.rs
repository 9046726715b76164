// SPDX-License-Identifier: GPL-2.0

//! The memory barriers of a device's rings, inline on x86-64. Upstream candidate: inline
//! definitions in `kernel::sync::barrier`.
//!
//! `kernel::sync::barrier` calls the C macros through out-of-line helpers (`rust_helper_mb`,
//! `rust_helper_dma_rmb`, ...): a call and a return around what is, on x86-64, one `mfence`
//! or nothing but a compiler barrier (`arch/x86/include/asm/barrier.h`: x86 keeps loads and
//! stores to coherent memory in order, so `dma_rmb` and `dma_wmb` only stop the compiler).
//! Unless `CONFIG_RUST_INLINE_HELPERS` inlines the helpers, that is the whole cost. Other
//! architectures keep the crate's barriers.

#[cfg(CONFIG_X86_64)]
mod imp {
    /// `dma_rmb()` on x86-64: `barrier()`.
    #[inline(always)]
    pub(crate) fn dma_rmb() {
        // SAFETY: an empty asm block; Rust assumes it may read and write any memory, so it
        // is a compiler barrier, which is what x86-64's `dma_rmb` is.
        unsafe { core::arch::asm!("", options(nostack, preserves_flags)) };
    }

    /// `dma_wmb()` on x86-64: `barrier()`.
    #[inline(always)]
    pub(crate) fn dma_wmb() {
        // SAFETY: as `dma_rmb`.
        unsafe { core::arch::asm!("", options(nostack, preserves_flags)) };
    }

    /// `mb()` on x86-64: `mfence` (a full barrier for the CPU and devices).
    #[inline(always)]
    pub(crate) fn mb() {
        // SAFETY: `mfence` only orders memory accesses; without `nomem` the asm is also a
        // compiler barrier, as the C macro's "memory" clobber.
        unsafe { core::arch::asm!("mfence", options(nostack, preserves_flags)) };
    }
}

#[cfg(not(CONFIG_X86_64))]
mod imp {
    use kernel::sync::barrier::{dma_mb, mb as kmb, Full, Read, Write};

    #[inline(always)]
    pub(crate) fn dma_rmb() {
        dma_mb(Read)
    }

    #[inline(always)]
    pub(crate) fn dma_wmb() {
        dma_mb(Write)
    }

    #[inline(always)]
    pub(crate) fn mb() {
        kmb(Full)
    }
}

pub(crate) use imp::{dma_rmb, dma_wmb, mb};
