// SPDX-License-Identifier: GPL-2.0

//! BAR0 access: the controller registers and the doorbells.
//!
//! Offsets and bit fields come from [`crate::spec::regs`]; this module only knows how to reach
//! them through the mapped BAR.
//!
//! Why not `kernel::io::register!`, as nova-core's `regs.rs`: the layout is defined once, in
//! `src/spec`, where host tests check its encodings against the values QEMU's controller
//! reports (`cap_fields_from_qemu`, `cc_and_aqa_encoding`). `register!` expands to the
//! `kernel` crate (`Bounded` fields, `build_assert!`), which the host build does not have,
//! so using it would define every field a second time, untested. What it would add, the
//! compile-time check of each offset against the mapping, `Io::read32` with a constant
//! offset already does (`BAR0_MIN`).

use crate::{
    kernel_ext::mmio,
    spec::regs::{self as r, Cap},
};
use kernel::{io::Io, pci, prelude::*};

/// The part of BAR0 every controller has: registers plus the admin queue's doorbells.
/// Offsets below this are checked at compile time; doorbells beyond it at run time.
pub(crate) const BAR0_MIN: usize = r::DOORBELL_BASE + 8;

/// A mapped BAR0.
pub(crate) struct Regs<'b> {
    bar: pci::Bar<'b, BAR0_MIN>,
    stride: usize,
    len: usize,
}

impl<'b> Regs<'b> {
    pub(crate) fn new(bar: pci::Bar<'b, BAR0_MIN>) -> Self {
        let len = (&bar).size();
        let mut regs = Self {
            bar,
            stride: 4,
            len,
        };
        regs.stride = regs.cap().doorbell_stride();
        regs
    }

    /// Doorbell stride in bytes.
    pub(crate) fn stride(&self) -> usize {
        self.stride
    }

    /// Size of the mapped BAR in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// CAP, read as two 32-bit halves (64-bit MMIO reads are not guaranteed to be atomic on
    /// every platform, and CAP does not change).
    pub(crate) fn cap(&self) -> Cap {
        let lo = u64::from((&self.bar).read32(r::CAP));
        let hi = u64::from((&self.bar).read32(r::CAP + 4));
        Cap(lo | (hi << 32))
    }

    pub(crate) fn vs(&self) -> u32 {
        (&self.bar).read32(r::VS)
    }

    pub(crate) fn cc(&self) -> u32 {
        (&self.bar).read32(r::CC)
    }

    pub(crate) fn set_cc(&self, v: u32) {
        (&self.bar).write32(v, r::CC)
    }

    pub(crate) fn csts(&self) -> u32 {
        (&self.bar).read32(r::CSTS)
    }

    pub(crate) fn set_aqa(&self, v: u32) {
        (&self.bar).write32(v, r::AQA)
    }

    /// Writes a 64-bit queue base register as low then high half.
    fn write_base(&self, off: usize, addr: u64) {
        (&self.bar).write32(addr as u32, off);
        (&self.bar).write32((addr >> 32) as u32, off + 4);
    }

    pub(crate) fn set_asq(&self, addr: u64) {
        self.write_base(r::ASQ, addr)
    }

    pub(crate) fn set_acq(&self, addr: u64) {
        self.write_base(r::ACQ, addr)
    }

    pub(crate) fn cmbloc(&self) -> u32 {
        (&self.bar).read32(r::CMBLOC)
    }

    pub(crate) fn cmbsz(&self) -> u32 {
        (&self.bar).read32(r::CMBSZ)
    }

    /// Writes CMBMSC's low half alone (CRE), as C's first write: the base address a previous
    /// binding set stays as it was.
    pub(crate) fn set_cmbmsc_low(&self, v: u32) {
        (&self.bar).write32(v, r::CMBMSC);
    }

    /// Writes CMBMSC high half first: the low half's write (CRE, CMSE) acts on the whole
    /// base address, as C's `hi_lo_writeq`.
    pub(crate) fn set_cmbmsc(&self, v: u64) {
        (&self.bar).write32((v >> 32) as u32, r::CMBMSC + 4);
        (&self.bar).write32(v as u32, r::CMBMSC);
    }

    /// Doorbell registers of queue `qid`, or `EINVAL` if they lie outside the BAR (a
    /// controller that advertises more queues than its BAR has doorbells for).
    pub(crate) fn doorbells(&self, qid: u16) -> Result<Doorbells> {
        let sq = r::sq_tail_doorbell(qid, self.stride);
        let cq = r::cq_head_doorbell(qid, self.stride);
        if cq + 4 > self.len {
            return Err(EINVAL);
        }
        // Both 4-byte aligned (the stride is a multiple of 4) and inside the BAR, whose
        // size is far below 16 GiB.
        let dword = |off: usize| u32::try_from(off / 4).map_err(|_| EINVAL);
        Ok(Doorbells {
            sq: dword(sq)?,
            cq: dword(cq)?,
        })
    }

    /// Writes a doorbell obtained from [`Self::doorbells`].
    #[inline]
    pub(crate) fn ring(&self, dword: u32, value: u16) {
        // `dword` was range checked by `doorbells`, so this cannot fail; the check here
        // is the BAR's own and costs a compare.
        let _ = mmio::try_write32_dword(&self.bar, u32::from(value), dword);
    }
}

/// The two doorbell registers of one queue pair (dword indexes into the BAR), validated
/// against the BAR size.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Doorbells {
    pub(crate) sq: u32,
    pub(crate) cq: u32,
}
