// SPDX-License-Identifier: GPL-2.0

//! A doorbell write without the out-of-line `writel` helper. Upstream candidate: an inline
//! `writel` for x86-64 in `kernel::io`.
//!
//! `Io::try_write32` checks the offset, then calls `rust_helper_writel`, which is one `movl`
//! on x86-64 (`arch/x86/include/asm/io.h`): on the I/O path, ringing a doorbell cost a call
//! and a return around a single store. This does the same check and, on x86-64, the same
//! `movl` inline, as C's `writel` (an asm statement with a "memory" clobber, so the compiler
//! keeps earlier stores to the rings before it; x86 keeps them in order for the device).
//! Elsewhere it is `Io::try_write32`.
//!
//! [`try_write32_dword`] takes the register as a dword index: aligned by construction and
//! never overflowing, so the only check left is the BAR's end, as for C's `writel` none.

use kernel::{io::Io, pci, prelude::*};

/// `writel(value, bar + offset)`, for a 4-byte aligned register inside `bar`.
#[inline(always)]
pub(crate) fn try_write32<const SIZE: usize>(
    bar: &pci::Bar<'_, SIZE>,
    value: u32,
    offset: usize,
) -> Result {
    #[cfg(CONFIG_X86_64)]
    {
        use kernel::io::{IoBackend, IoBase};
        let view = bar.as_view();
        let base = <<&pci::Bar<'_, SIZE> as IoBase<'_>>::Backend as IoBackend>::as_ptr(view);
        if offset % 4 != 0 || offset.checked_add(4).is_none_or(|end| end > bar.size()) {
            return Err(EINVAL);
        }
        let reg = base.cast::<u8>().wrapping_add(offset);
        // SAFETY: `reg` is a 4-byte aligned register inside the BAR (checked above; the BAR's
        // mapping is page aligned), mapped while `bar` lives. The asm is C's `writel`: one
        // 32-bit `mov` to it, and (without `nomem`) a compiler barrier.
        unsafe {
            core::arch::asm!(
                "mov dword ptr [{reg}], {value:e}",
                reg = in(reg) reg,
                value = in(reg) value,
                options(nostack, preserves_flags)
            )
        };
        Ok(())
    }
    #[cfg(not(CONFIG_X86_64))]
    bar.try_write32(value, offset)
}

/// `writel(value, bar + 4 * index)`: [`try_write32`] for the register with dword index
/// `index`, which needs no alignment or overflow check.
#[inline(always)]
pub(crate) fn try_write32_dword<const SIZE: usize>(
    bar: &pci::Bar<'_, SIZE>,
    value: u32,
    index: u32,
) -> Result {
    // A `u32` times 4 fits a 64-bit `usize` (the only target with the inline path) and is
    // 4-byte aligned: the compiler drops both checks of `try_write32`.
    try_write32(bar, value, index as usize * 4)
}
