// SPDX-License-Identifier: GPL-2.0

//! The Zoned Namespace command set (NVMe ZNS Command Set Spec 1.1): its Identify data, zone
//! management commands and zone reports, parsed and checked as the C driver's `zns.c`.

use super::{
    command::{cns, Command},
    le16, le32, le64,
    regs::Cap,
};
use core::fmt;

/// Zone command opcodes (ZNS 4.4, 4.3, 4.5).
pub(crate) mod opcode {
    pub(crate) const ZONE_MGMT_SEND: u8 = 0x79;
    pub(crate) const ZONE_MGMT_RECV: u8 = 0x7a;
    pub(crate) const ZONE_APPEND: u8 = 0x7d;
}

/// Zone Send Action (Zone Management Send CDW13 bits 7:0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum ZoneAction {
    Close = 0x01,
    Finish = 0x02,
    Open = 0x03,
    Reset = 0x04,
}

/// The I/O Command Set Identifier of the Zoned Namespace command set.
pub(crate) const CSI_ZNS: u8 = 0x02;

/// Zone Type "Sequential Write Required", the only one the spec defines.
pub(crate) const ZONE_TYPE_SEQWRITE_REQ: u8 = 0x2;

/// Zone State "Full" (in the upper nibble of a descriptor's ZS, as the block layer's
/// `BLK_ZONE_COND_FULL`: the block layer's conditions are the spec's states).
pub(crate) const ZONE_STATE_FULL: u8 = 0xe;

/// Size of the zone report's header and of each zone descriptor.
pub(crate) const REPORT_HEADER: usize = 64;
pub(crate) const DESCRIPTOR_SIZE: usize = 64;

/// Identify (CNS 05h) of a namespace in the Zoned Namespace command set (CSI 02h).
pub(crate) fn identify_ns(nsid: u32) -> Command {
    Command::identify(cns::CS_NAMESPACE, nsid, 0).with_cdw(11, u32::from(CSI_ZNS) << 24)
}

/// Identify (CNS 06h) of the controller's Zoned Namespace command set limits.
pub(crate) fn identify_ctrl() -> Command {
    Command::identify(cns::CS_CONTROLLER, 0, 0).with_cdw(11, u32::from(CSI_ZNS) << 24)
}

/// Zone Management Send: `action` on the zone starting at `slba`, or on every zone.
pub(crate) fn zone_mgmt_send(nsid: u32, slba: u64, action: ZoneAction, all: bool) -> Command {
    Command::new(opcode::ZONE_MGMT_SEND)
        .with_nsid(nsid)
        .with_cdw(10, slba as u32)
        .with_cdw(11, (slba >> 32) as u32)
        .with_cdw(13, action as u32 | (u32::from(all) << 8))
}

/// Zone Management Receive: a partial report (the header counts only the zones returned)
/// of every zone from the one at `slba`, into `bytes` bytes (a multiple of 4).
pub(crate) fn report_zones(nsid: u32, slba: u64, bytes: u32) -> Command {
    // ZRA 00h (Report Zones), ZRASF 00h (all zones), bit 16: Partial Report.
    Command::new(opcode::ZONE_MGMT_RECV)
        .with_nsid(nsid)
        .with_cdw(10, slba as u32)
        .with_cdw(11, (slba >> 32) as u32)
        .with_cdw(12, (bytes / 4).saturating_sub(1))
        .with_cdw(13, 1 << 16)
}

/// Why a zoned namespace cannot be served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ZnsError {
    /// The identify data is not a whole page.
    Truncated,
    /// Zone Operation Characteristics the host must honour (variable zone capacity, zone
    /// active excursions): as the C driver, not supported.
    Operations(u16),
    /// The zone size is not a power of two (or zero), which the block layer requires.
    ZoneSize(u64),
}

impl fmt::Display for ZnsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Truncated => write!(f, "zoned identify data truncated"),
            Self::Operations(zoc) => write!(f, "zone operations {zoc:#x} not supported"),
            Self::ZoneSize(zsze) => write!(f, "invalid zone size {zsze} (not a power of two)"),
        }
    }
}

/// A zoned namespace's geometry and limits, from its ZNS Identify Namespace data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ZoneInfo {
    /// Zone size in logical blocks (a power of two).
    pub(crate) zone_blocks: u64,
    /// Most zones open at once (0: no limit).
    pub(crate) max_open: u32,
    /// Most zones active (open or closed) at once (0: no limit).
    pub(crate) max_active: u32,
}

impl ZoneInfo {
    /// Parses ZNS Identify Namespace data for LBA format `lbaf` (the one in use), as C's
    /// `nvme_query_zone_info`: MOR and MAR are 0's based, all ones meaning no limit.
    pub(crate) fn parse(b: &[u8], lbaf: u8) -> Result<Self, ZnsError> {
        // LBA Format Extensions: 16 bytes each from byte 2816, ZSZE first.
        const LBAFE: usize = 2816;
        if b.len() < 4096 {
            return Err(ZnsError::Truncated);
        }
        let zoc = le16(b, 0);
        if zoc != 0 {
            return Err(ZnsError::Operations(zoc));
        }
        let zone_blocks = le64(b, LBAFE + 16 * usize::from(lbaf & 63));
        if !zone_blocks.is_power_of_two() {
            return Err(ZnsError::ZoneSize(zone_blocks));
        }
        Ok(Self {
            zone_blocks,
            max_open: le32(b, 8).wrapping_add(1),
            max_active: le32(b, 4).wrapping_add(1),
        })
    }
}

impl ZoneInfo {
    /// The zone size in 512-byte sectors for blocks of 2^`lbads` bytes (`lbads` at least 9),
    /// if the block layer can take it (it counts a zone's sectors in 32 bits). A multiply,
    /// not a shift: a shift drops the bits it moves out (2^61 blocks of 4 KiB would be 0).
    pub(crate) fn zone_sectors(&self, lbads: u8) -> Option<u32> {
        let per_block = 1u64.checked_shl(u32::from(lbads).checked_sub(9)?)?;
        u32::try_from(self.zone_blocks.checked_mul(per_block)?).ok()
    }
}

/// The Zone Append Size Limit of ZNS Identify Controller data, in bytes: `None` when the
/// controller gives none (MDTS limits Zone Append then). ZASL counts minimum memory pages
/// (CAP.MPSMIN) as a power of two, as MDTS.
pub(crate) fn zone_append_limit(b: &[u8], cap: Cap) -> Option<u64> {
    cap.mpsmin_pages_bytes(*b.first()?)
}

/// One zone of a zone report, in logical blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ZoneDescriptor {
    /// Zone Type (ZT bits 3:0).
    pub(crate) zone_type: u8,
    /// Zone State (ZS bits 7:4).
    pub(crate) state: u8,
    /// Zone Capacity.
    pub(crate) capacity: u64,
    /// Zone Start LBA.
    pub(crate) start: u64,
    /// Write Pointer.
    pub(crate) wp: u64,
}

/// A zone report (Zone Management Receive data), checked against its buffer.
pub(crate) struct ZoneReport<'a> {
    b: &'a [u8],
}

impl<'a> ZoneReport<'a> {
    pub(crate) fn new(b: &'a [u8]) -> Option<Self> {
        (b.len() >= REPORT_HEADER).then_some(Self { b })
    }

    /// How many zone descriptors the report holds: what the header says, at most what
    /// the buffer has room for.
    pub(crate) fn len(&self) -> usize {
        let room = (self.b.len() - REPORT_HEADER) / DESCRIPTOR_SIZE;
        usize::try_from(le64(self.b, 0)).map_or(room, |n| n.min(room))
    }

    /// Descriptor `i` (below [`Self::len`]).
    pub(crate) fn zone(&self, i: usize) -> Option<ZoneDescriptor> {
        if i >= self.len() {
            return None;
        }
        let d = REPORT_HEADER + i * DESCRIPTOR_SIZE;
        Some(ZoneDescriptor {
            zone_type: self.b[d] & 0xf,
            state: self.b[d + 1] >> 4,
            capacity: le64(self.b, d + 8),
            start: le64(self.b, d + 16),
            wp: le64(self.b, d + 24),
        })
    }
}
