// SPDX-License-Identifier: GPL-2.0

//! The Controller Memory Buffer: memory on the controller, in one of its BARs, that the
//! host may write submission queues (and data) into. As C's `nvme_map_cmb`: enabled through
//! CMBMSC where the controller has it, offered as the device's peer-to-peer DMA pool,
//! published for other drivers when it takes both read and write data, and the I/O
//! submission queues taken from it (`use_cmb_sqes`), so the controller fetches commands from
//! its own memory instead of across the bus.

use crate::{
    kernel_ext::p2pdma,
    params,
    regs::Regs,
    spec::regs::{self as r, Cap, CmbLayout},
};
use kernel::{device::Bound, pci, prelude::*};

/// A controller's memory buffer registers, and the buffer if it could be used.
pub(crate) struct Cmb {
    /// The registers as read at probe (the `cmb`, `cmbloc`, `cmbsz` attributes, shown
    /// whenever CMBSZ is not 0, as C's).
    pub(crate) cmbloc: u32,
    pub(crate) cmbsz: u32,
    /// Bytes offered as the peer-to-peer pool (0: the buffer is not used).
    pub(crate) size: u64,
    /// I/O submission queues go in it.
    pub(crate) use_sqes: bool,
}

impl Cmb {
    /// Reads the controller's buffer registers and maps the buffer if it fits its BAR;
    /// `None` without a buffer (with a warning if its pool cannot be made, as C's).
    pub(crate) fn map(pdev: &pci::Device<Bound>, regs: &Regs<'_>, cap: Cap) -> Option<Self> {
        // NVMe 1.4: CMBLOC and CMBSZ read 0 until CRE is set (the low half alone: the base
        // address stays as it was).
        if cap.cmbs() {
            regs.set_cmbmsc_low(r::CMBMSC_CRE as u32);
        }
        let (cmbloc, cmbsz) = (regs.cmbloc(), regs.cmbsz());
        if cmbsz == 0 {
            return None;
        }
        let mut this = Self {
            cmbloc,
            cmbsz,
            size: 0,
            use_sqes: false,
        };
        if let Some(size) = Self::pool(pdev, regs, cap, cmbloc, cmbsz) {
            this.size = size;
            this.use_sqes = params::use_cmb_sqes() && cmbsz & r::CMBSZ_SQS != 0;
            dev_info!(
                pdev.as_ref(),
                "controller memory buffer: {} KiB (cmbloc {:#x}, cmbsz {:#x}){}\n",
                size >> 10,
                cmbloc,
                cmbsz,
                if this.use_sqes {
                    ", I/O submission queues in it"
                } else {
                    ""
                }
            );
        }
        Some(this)
    }

    /// Enables the buffer and makes it the device's peer-to-peer pool, as C's
    /// `nvme_map_cmb`: its size, or `None` if it cannot be used.
    fn pool(
        pdev: &pci::Device<Bound>,
        regs: &Regs<'_>,
        cap: Cap,
        cmbloc: u32,
        cmbsz: u32,
    ) -> Option<u64> {
        let layout = CmbLayout::decode(cmbloc, cmbsz)?;
        // BIR 6 and 7 are reserved: only the six standard BARs.
        if layout.bar >= 6 {
            return None;
        }
        let bar_len = pdev.resource_len(layout.bar).ok()?;
        if layout.offset > bar_len {
            return None;
        }
        // A buffer larger than what is left of its BAR is cut to it.
        let size = layout.size.min(bar_len - layout.offset);
        // The pool's pages are mapped in sections: both ends on a section boundary.
        let align = p2pdma::compat_align();
        let bar_start = pdev.resource_start(layout.bar).ok()?;
        if align == 0 || size % align != 0 || bar_start % align != 0 {
            return None;
        }
        // The controller decodes the buffer at the BAR's bus address plus its offset.
        if cap.cmbs() {
            let base = p2pdma::bar_bus_address(pdev, layout.bar).ok()? + layout.offset;
            regs.set_cmbmsc(base | r::CMBMSC_CRE | r::CMBMSC_CMSE);
        }
        let pool = usize::try_from(size)
            .map_err(|_| EINVAL)
            .and_then(|s| p2pdma::add_resource(pdev, layout.bar, s, layout.offset));
        if pool.is_err() {
            dev_warn!(pdev.as_ref(), "failed to register the CMB\n");
            if cap.cmbs() {
                regs.set_cmbmsc(0);
            }
            return None;
        }
        if cmbsz & (r::CMBSZ_RDS | r::CMBSZ_WDS) == r::CMBSZ_RDS | r::CMBSZ_WDS {
            p2pdma::publish(pdev);
        }
        Some(size)
    }
}
