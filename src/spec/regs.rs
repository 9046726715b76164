// SPDX-License-Identifier: GPL-2.0

//! Controller register layout (NVMe Base Spec, section 3.1.4) and bit-field decoding.

/// Controller Capabilities (64 bit).
pub(crate) const CAP: usize = 0x00;
/// Version.
pub(crate) const VS: usize = 0x08;
/// Interrupt Mask Set / Clear (only used with pin-based or MSI interrupts).
#[allow(dead_code, reason = "kept with the rest of the spec's definitions")]
pub(crate) const INTMS: usize = 0x0c;
#[allow(dead_code, reason = "kept with the rest of the spec's definitions")]
pub(crate) const INTMC: usize = 0x10;
/// Controller Configuration.
pub(crate) const CC: usize = 0x14;
/// Controller Status.
pub(crate) const CSTS: usize = 0x1c;
/// Admin Queue Attributes.
pub(crate) const AQA: usize = 0x24;
/// Admin Submission / Completion Queue Base Address (64 bit each).
pub(crate) const ASQ: usize = 0x28;
pub(crate) const ACQ: usize = 0x30;
/// Controller Memory Buffer Location and Size (read as zero until CMBMSC.CRE is set).
pub(crate) const CMBLOC: usize = 0x38;
pub(crate) const CMBSZ: usize = 0x3c;
/// Controller Memory Buffer Memory Space Control (64 bit).
pub(crate) const CMBMSC: usize = 0x50;
/// First doorbell register.
pub(crate) const DOORBELL_BASE: usize = 0x1000;

/// CMBMSC Capabilities Registers Enabled: CMBLOC and CMBSZ read their values.
pub(crate) const CMBMSC_CRE: u64 = 1 << 0;
/// CMBMSC Controller Memory Space Enable: the controller decodes the buffer at CBA.
pub(crate) const CMBMSC_CMSE: u64 = 1 << 1;

/// CMBSZ: submission queues may be in the buffer.
pub(crate) const CMBSZ_SQS: u32 = 1 << 0;
/// CMBSZ: read data (controller to host transfers' buffers) may be in it.
pub(crate) const CMBSZ_RDS: u32 = 1 << 3;
/// CMBSZ: write data may be in it.
pub(crate) const CMBSZ_WDS: u32 = 1 << 4;

/// Where a Controller Memory Buffer is and how large, from CMBLOC and CMBSZ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CmbLayout {
    /// The BAR it is in (CMBLOC.BIR).
    pub(crate) bar: u32,
    /// Its offset in the BAR, in bytes.
    pub(crate) offset: u64,
    /// Its size in bytes.
    pub(crate) size: u64,
}

impl CmbLayout {
    /// Decodes CMBLOC and CMBSZ as C's `nvme_map_cmb`; `None` if CMBSZ is 0 (no buffer, or
    /// one not enabled) or the size overflows.
    pub(crate) fn decode(cmbloc: u32, cmbsz: u32) -> Option<Self> {
        if cmbsz == 0 {
            return None;
        }
        // Size Units: 4 KiB << (4 * SZU).
        let unit = 1u64.checked_shl(12 + 4 * ((cmbsz >> 8) & 0xf))?;
        let size = unit.checked_mul(u64::from(cmbsz >> 12))?;
        let offset = unit.checked_mul(u64::from(cmbloc >> 12))?;
        Some(Self {
            bar: cmbloc & 0x7,
            offset,
            size,
        })
    }
}

/// How deep `queues` I/O submission queues of `depth` entries can be in a Controller Memory
/// Buffer of `size` bytes, as C's `nvme_cmb_qdepth`: `depth` if every queue fits (each
/// rounded up to 4 KiB), else the depth of an equal share of the buffer; `None` if that is
/// below 64 entries, where queues of full depth in host memory serve better.
pub(crate) fn cmb_sq_depth(size: u64, queues: u32, depth: u32) -> Option<u32> {
    const PAGE: u64 = 4096;
    const SQE: u64 = 64;
    let queues = u64::from(queues.max(1));
    let per_queue = (u64::from(depth) * SQE).next_multiple_of(PAGE);
    if per_queue.saturating_mul(queues) <= size {
        return Some(depth);
    }
    let share = size / queues / PAGE * PAGE;
    let shallower = u32::try_from(share / SQE).ok()?;
    (shallower >= 64).then_some(shallower.min(depth))
}

/// Decoded Controller Capabilities.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cap(pub(crate) u64);

impl Cap {
    /// Maximum Queue Entries Supported, as a count (the register is 0's based).
    pub(crate) fn mqes(self) -> u32 {
        (self.0 & 0xffff) as u32 + 1
    }
    /// Contiguous Queues Required.
    #[allow(dead_code, reason = "read by the host tests")]
    pub(crate) fn cqr(self) -> bool {
        self.0 & (1 << 16) != 0
    }
    /// Arbitration Mechanism Supported (bit 0: weighted round robin, bit 1: vendor specific).
    #[allow(dead_code, reason = "read by the host tests")]
    pub(crate) fn ams(self) -> u8 {
        ((self.0 >> 17) & 0x3) as u8
    }
    /// Worst-case time for CSTS.RDY to change, in milliseconds (the field is in 500 ms units).
    pub(crate) fn timeout_ms(self) -> u32 {
        (((self.0 >> 24) & 0xff) as u32) * 500
    }
    /// Doorbell stride in bytes: `4 << DSTRD`.
    pub(crate) fn doorbell_stride(self) -> usize {
        4usize << ((self.0 >> 32) & 0xf)
    }
    /// NVM Subsystem Reset Supported.
    #[allow(dead_code, reason = "read by the host tests")]
    pub(crate) fn nssrs(self) -> bool {
        self.0 & (1 << 36) != 0
    }
    /// Command Sets Supported bit field.
    pub(crate) fn css(self) -> u8 {
        ((self.0 >> 37) & 0xff) as u8
    }
    /// Memory page size minimum, as a shift (12 = 4 KiB).
    pub(crate) fn mpsmin_shift(self) -> u32 {
        12 + ((self.0 >> 48) & 0xf) as u32
    }
    /// Bytes in 2^`log2_pages` minimum-size memory pages, the unit of MDTS and WZSL; `None`
    /// for 0 (no limit). Saturates instead of overflowing for absurd values.
    pub(crate) fn mpsmin_pages_bytes(self, log2_pages: u8) -> Option<u64> {
        if log2_pages == 0 {
            return None;
        }
        let shift = u32::from(log2_pages) + self.mpsmin_shift();
        Some(if shift >= 63 { u64::MAX } else { 1u64 << shift })
    }
    /// Memory page size maximum, as a shift.
    pub(crate) fn mpsmax_shift(self) -> u32 {
        12 + ((self.0 >> 52) & 0xf) as u32
    }
    /// Controller Memory Buffer Supported (CMBMSC is implemented).
    pub(crate) fn cmbs(self) -> bool {
        self.0 & (1 << 57) != 0
    }
}

/// Why a controller's capabilities are refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CapError {
    /// Neither the NVM command set nor I/O command set selection is supported.
    NoNvmCommandSet,
    /// The host page size is outside CAP.MPSMIN..=CAP.MPSMAX.
    PageSize { min_shift: u32, max_shift: u32 },
    /// Queues of fewer than two entries cannot hold a command (one slot stays empty).
    QueueTooSmall { entries: u32 },
}

impl core::fmt::Display for CapError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Self::NoNvmCommandSet => write!(f, "no NVM command set"),
            Self::PageSize {
                min_shift,
                max_shift,
            } => write!(
                f,
                "host page size outside the controller's {}..={} bytes",
                1u64 << min_shift,
                1u64 << max_shift
            ),
            Self::QueueTooSmall { entries } => {
                write!(f, "CAP.MQES allows queues of only {entries} entry")
            }
        }
    }
}

impl Cap {
    /// Checks what bring-up depends on, for a host with pages of `1 << page_shift` bytes.
    pub(crate) fn validate(self, page_shift: u32) -> Result<(), CapError> {
        if self.css() & (CAP_CSS_NVM | CAP_CSS_CSI) == 0 {
            return Err(CapError::NoNvmCommandSet);
        }
        if page_shift < self.mpsmin_shift() || page_shift > self.mpsmax_shift() {
            return Err(CapError::PageSize {
                min_shift: self.mpsmin_shift(),
                max_shift: self.mpsmax_shift(),
            });
        }
        if self.mqes() < 2 {
            return Err(CapError::QueueTooSmall {
                entries: self.mqes(),
            });
        }
        Ok(())
    }
}

/// CAP.CSS bit for the NVM command set.
pub(crate) const CAP_CSS_NVM: u8 = 1 << 0;
/// CAP.CSS bit: one or more I/O command sets (selected with CC.CSS = 110b).
pub(crate) const CAP_CSS_CSI: u8 = 1 << 6;
/// CAP.CSS bit: admin command set only.
#[allow(dead_code, reason = "kept with the rest of the spec's definitions")]
pub(crate) const CAP_CSS_NO_IO: u8 = 1 << 7;

/// Controller Configuration fields.
pub(crate) mod cc {
    pub(crate) const EN: u32 = 1 << 0;
    pub(crate) const CSS_NVM: u32 = 0 << 4;
    pub(crate) const CSS_CSI: u32 = 6 << 4;
    #[allow(dead_code, reason = "kept with the rest of the spec's definitions")]
    pub(crate) const CSS_MASK: u32 = 7 << 4;
    pub(crate) const MPS_SHIFT: u32 = 7;
    #[allow(dead_code, reason = "read by the host tests")]
    pub(crate) const MPS_MASK: u32 = 0xf << MPS_SHIFT;
    pub(crate) const AMS_RR: u32 = 0 << 11;
    #[allow(dead_code, reason = "kept with the rest of the spec's definitions")]
    pub(crate) const AMS_MASK: u32 = 7 << 11;
    #[allow(dead_code, reason = "kept with the rest of the spec's definitions")]
    pub(crate) const SHN_NONE: u32 = 0 << 14;
    pub(crate) const SHN_NORMAL: u32 = 1 << 14;
    #[allow(dead_code, reason = "kept with the rest of the spec's definitions")]
    pub(crate) const SHN_ABRUPT: u32 = 2 << 14;
    pub(crate) const SHN_MASK: u32 = 3 << 14;
    /// I/O submission queue entry size: 2^6 = 64 bytes.
    pub(crate) const IOSQES: u32 = 6 << 16;
    /// I/O completion queue entry size: 2^4 = 16 bytes.
    pub(crate) const IOCQES: u32 = 4 << 20;
}

/// Controller Status fields.
pub(crate) mod csts {
    pub(crate) const RDY: u32 = 1 << 0;
    /// Controller Fatal Status.
    pub(crate) const CFS: u32 = 1 << 1;
    pub(crate) const SHST_MASK: u32 = 3 << 2;
    #[allow(dead_code, reason = "kept with the rest of the spec's definitions")]
    pub(crate) const SHST_OCCUR: u32 = 1 << 2;
    pub(crate) const SHST_CMPLT: u32 = 2 << 2;
    /// NVM Subsystem Reset Occurred.
    #[allow(dead_code, reason = "kept with the rest of the spec's definitions")]
    pub(crate) const NSSRO: u32 = 1 << 4;
}

/// CSTS read as all ones means the device has gone (surprise removal, link down).
pub(crate) fn device_gone(csts: u32) -> bool {
    csts == u32::MAX
}

/// Builds the CC value to enable the controller with the given memory page size shift.
///
/// Round robin arbitration is the only mechanism every controller supports; the I/O
/// queue entry sizes are the only ones the spec defines for the NVM command set.
pub(crate) fn cc_enable(page_shift: u32, css: u32) -> u32 {
    ((page_shift - 12) << cc::MPS_SHIFT) | css | cc::AMS_RR | cc::IOSQES | cc::IOCQES | cc::EN
}

/// Admin Queue Attributes value for admin SQ/CQ of `depth` entries each.
pub(crate) fn aqa(depth: u32) -> u32 {
    let d = depth - 1;
    (d << 16) | d
}

/// Byte offset of the submission queue tail doorbell of queue `qid`.
pub(crate) fn sq_tail_doorbell(qid: u16, stride: usize) -> usize {
    DOORBELL_BASE + (2 * qid as usize) * stride
}

/// Byte offset of the completion queue head doorbell of queue `qid`.
pub(crate) fn cq_head_doorbell(qid: u16, stride: usize) -> usize {
    DOORBELL_BASE + (2 * qid as usize + 1) * stride
}

/// The version register as (major, minor, tertiary).
pub(crate) fn version(vs: u32) -> (u16, u8, u8) {
    ((vs >> 16) as u16, (vs >> 8) as u8, vs as u8)
}

/// Index (in dwords) of a queue's SQ tail doorbell in the shadow doorbell and event index
/// buffers; the CQ head doorbell follows one stride later. `stride` is in bytes.
pub(crate) fn shadow_sq_index(qid: u16, stride: usize) -> usize {
    2 * qid as usize * (stride / 4)
}

/// Dwords of a shadow doorbell buffer for queues 0..=`max_qid`.
pub(crate) fn shadow_len(max_qid: u16, stride: usize) -> usize {
    (max_qid as usize + 1) * 2 * (stride / 4)
}

/// With shadow doorbells, whether moving a doorbell from `old` to `new` passed the event
/// index the controller published, so it must be told with an MMIO write (NVMe Base Spec
/// 5.8, the same test as virtio's `vring_need_event`).
pub(crate) fn shadow_need_event(event_idx: u16, new: u16, old: u16) -> bool {
    new.wrapping_sub(event_idx).wrapping_sub(1) < new.wrapping_sub(old)
}
