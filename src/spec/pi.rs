// SPDX-License-Identifier: GPL-2.0

//! Metadata and end-to-end protection information (NVM Command Set Spec 5.3): a namespace's
//! metadata format, how the driver serves it, the block layer integrity profile it gets, and
//! the protection fields of its Read, Write, Zone Append and Write Zeroes commands, as the C
//! driver's `nvme_configure_metadata`, `nvme_init_integrity` and `nvme_setup_rw`.

use super::le32;

/// The guard (checksum) of a format's protection information.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Guard {
    /// 16-bit CRC (T10 DIF): 8 bytes of PI.
    Crc16,
    /// 64-bit CRC (NVMe): 16 bytes of PI.
    Crc64,
    /// A storage tag or a guard the block layer has no profile for: the metadata is opaque.
    Unsupported,
}

/// The guard of LBA format `lbaf` from the NVM Command Set Identify Namespace data (CNS 05h,
/// CSI 00h): its Extended LBA Format (ELBAF), as C's `nvme_configure_pi_elbas`.
pub(crate) fn guard_from_nvm_ns(b: &[u8], lbaf: u8) -> Guard {
    // LBSTM at 0, PIC at 8, ELBAF[64] from 12.
    if b.len() < 12 + 4 * 64 {
        return Guard::Crc16;
    }
    let elbaf = le32(b, 12 + 4 * usize::from(lbaf & 63));
    // Storage Tag Size: PI with a storage tag is not served as PI.
    if elbaf & 0x7f != 0 {
        return Guard::Unsupported;
    }
    let mut pif = (elbaf >> 7) & 3;
    // Qualified Protection Information Format Support: PIF 3 defers to QPIF.
    if b[8] & (1 << 3) != 0 && pif == 3 {
        pif = (elbaf >> 9) & 0xf;
    }
    match pif {
        0 => Guard::Crc16,
        2 => Guard::Crc64,
        _ => Guard::Unsupported,
    }
}

/// A namespace's metadata format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Metadata {
    /// Metadata bytes per logical block (0: none).
    pub(crate) ms: u16,
    /// Interleaved with each block's data (extended LBA), not in a separate buffer.
    pub(crate) extended: bool,
    /// Protection information type, 1-3 (0: none).
    pub(crate) pi_type: u8,
    /// The PI has a 64-bit guard (16 bytes) instead of a 16-bit one (8 bytes).
    pub(crate) guard64: bool,
    /// Bytes of PI in each block's metadata (0: none, the metadata is opaque).
    pub(crate) pi_size: u8,
    /// Where the PI starts in the metadata: its last bytes, or its first (DPS bit 3).
    pub(crate) pi_offset: u16,
}

/// How the driver serves a namespace of a metadata format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// No metadata.
    Plain,
    /// Metadata in a separate buffer the block layer provides (its integrity profile).
    Integrity(Profile),
    /// Protection information only, which the controller inserts and strips (PRACT): no
    /// metadata moves between host and controller.
    Pract,
    /// Metadata the block layer cannot provide (interleaved, or without integrity support,
    /// or larger than its profiles take) and the controller cannot make up: no block I/O.
    Unservable,
}

/// The block layer's integrity profile of a format (`struct blk_integrity`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Profile {
    /// `BLK_INTEGRITY_CSUM_*`: 0 none (opaque metadata), 2 CRC16 (T10 DIF), 3 CRC64.
    pub(crate) csum: u8,
    pub(crate) metadata_size: u8,
    pub(crate) pi_tuple_size: u8,
    pub(crate) pi_offset: u8,
    /// Application (and for type 3, reference) tag bytes the block layer may use.
    pub(crate) tag_size: u8,
    /// The reference tag is checked (types 1 and 2): `BLK_INTEGRITY_REF_TAG`.
    pub(crate) ref_tag: bool,
}

/// `BLK_INTEGRITY_CSUM_CRC` and `_CRC64`.
pub(crate) const CSUM_CRC: u8 = 2;
pub(crate) const CSUM_CRC64: u8 = 3;

impl Metadata {
    /// The metadata format of a namespace from its Identify data: metadata size `ms` of the
    /// format in use, FLBAS bit 4 (`extended`), DPS, and the format's guard.
    pub(crate) fn new(ms: u16, extended: bool, dps: u8, guard: Guard) -> Self {
        let (pi_size, guard64) = match guard {
            Guard::Crc16 => (8u8, false),
            Guard::Crc64 => (16, true),
            Guard::Unsupported => (0, false),
        };
        // Types 4-7 are reserved: opaque metadata.
        let pi_type = match dps & 7 {
            t @ 1..=3 if pi_size != 0 && ms >= u16::from(pi_size) => t,
            _ => 0,
        };
        let pi_offset = if pi_type == 0 || dps & (1 << 3) != 0 {
            0
        } else {
            ms - u16::from(pi_size)
        };
        Self {
            ms,
            extended,
            pi_type,
            guard64,
            pi_size: if pi_type == 0 { 0 } else { pi_size },
            pi_offset,
        }
    }

    /// The metadata is protection information and nothing else: the controller can insert
    /// and strip all of it (C's `nvme_ns_has_pi`).
    pub(crate) fn has_pi(&self) -> bool {
        self.pi_type != 0 && self.ms == u16::from(self.pi_size)
    }

    /// How to serve the format; `integrity`: the kernel has block integrity support.
    pub(crate) fn mode(&self, integrity: bool) -> Mode {
        if self.ms == 0 {
            return Mode::Plain;
        }
        match u8::try_from(self.ms) {
            Ok(ms) if integrity && !self.extended => Mode::Integrity(self.profile(ms)),
            _ if self.has_pi() => Mode::Pract,
            _ => Mode::Unservable,
        }
    }

    fn profile(&self, ms: u8) -> Profile {
        let (csum, tag_size) = match (self.pi_type, self.guard64) {
            (0, _) => (0, 0),
            // Type 3 has no reference tag: its bytes are tag space too.
            (3, false) => (CSUM_CRC, 6),
            (3, true) => (CSUM_CRC64, 8),
            (_, false) => (CSUM_CRC, 2),
            (_, true) => (CSUM_CRC64, 2),
        };
        Profile {
            csum,
            metadata_size: ms,
            pi_tuple_size: if csum == 0 { 0 } else { self.pi_size },
            pi_offset: if csum == 0 { 0 } else { self.pi_offset as u8 },
            tag_size,
            ref_tag: matches!(self.pi_type, 1 | 2),
        }
    }

    /// Metadata bytes of `blocks` logical blocks.
    pub(crate) fn bytes(&self, blocks: u32) -> u64 {
        u64::from(blocks) * u64::from(self.ms)
    }
}

/// What the block layer asks of one request's protection information (`BIP_CHECK_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Checks {
    pub(crate) guard: bool,
    pub(crate) reftag: bool,
    /// The application tag to check.
    pub(crate) apptag: Option<u16>,
}

/// PRINFO bits of a Read/Write command's CDW12 (bits 29:26) and Zone Append's PI remap.
pub(crate) mod prinfo {
    pub(crate) const PRACT: u32 = 1 << 29;
    pub(crate) const PRCHK_GUARD: u32 = 1 << 28;
    pub(crate) const PRCHK_APP: u32 = 1 << 27;
    pub(crate) const PRCHK_REF: u32 = 1 << 26;
    pub(crate) const APPEND_PIREMAP: u32 = 1 << 25;
}

/// The protection fields of a command: CDW12 bits to OR in, CDW3 (upper reference tag of a
/// 64-bit guard), CDW14 (reference tag), CDW15 (application tag and mask).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PiFields {
    pub(crate) cdw12: u32,
    pub(crate) cdw3: u32,
    pub(crate) cdw14: u32,
    pub(crate) cdw15: u32,
}

impl Metadata {
    /// The protection fields of a Read, Write or Zone Append (`append`) of the block at
    /// `slba`: with the block layer's metadata (`checks`: what it asks to check), or without
    /// (`None`: the controller inserts and strips the PI, PRACT), as C's `nvme_setup_rw`.
    pub(crate) fn rw_fields(&self, slba: u64, checks: Option<Checks>, append: bool) -> PiFields {
        let mut f = PiFields::default();
        let Some(c) = checks else {
            f.cdw12 = prinfo::PRACT;
            self.set_ref_tag(&mut f, slba);
            return f;
        };
        if c.guard {
            f.cdw12 |= prinfo::PRCHK_GUARD;
        }
        if c.reftag {
            f.cdw12 |= prinfo::PRCHK_REF;
            if append {
                f.cdw12 |= prinfo::APPEND_PIREMAP;
            }
            self.set_ref_tag(&mut f, slba);
        }
        if let Some(tag) = c.apptag {
            f.cdw12 |= prinfo::PRCHK_APP;
            f.cdw15 = u32::from(tag) | 0xffff << 16;
        }
        f
    }

    /// A Write Zeroes of a namespace whose metadata is PI alone: the controller writes the
    /// PI (PRACT), as C's `nvme_setup_write_zeroes`.
    pub(crate) fn write_zeroes_fields(&self, slba: u64) -> PiFields {
        if !self.has_pi() {
            return PiFields::default();
        }
        self.rw_fields(slba, None, false)
    }

    /// The initial reference tag, for types 1 and 2: the first block's LBA, 32 bits of it
    /// (16-bit guard) or 48 (64-bit guard, the upper 16 in CDW3).
    fn set_ref_tag(&self, f: &mut PiFields, slba: u64) {
        if !matches!(self.pi_type, 1 | 2) {
            return;
        }
        f.cdw14 = slba as u32;
        if self.guard64 {
            f.cdw3 = ((slba >> 32) & 0xffff) as u32;
        }
    }
}
