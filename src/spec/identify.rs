// SPDX-License-Identifier: GPL-2.0

//! Identify data structures (NVMe Base Spec 5.17.2, NVM Command Set Spec 4.1.5), parsed by
//! byte offset and validated: every value a later step depends on is range checked here.

use super::{completion::Status, le16, le32, le64, regs::Cap};
use core::fmt;

/// Size of every Identify data structure.
pub(crate) const IDENTIFY_SIZE: usize = 4096;

/// Why a device's identify data was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IdentifyError {
    /// The buffer is not a whole identify structure.
    Truncated,
    /// SQES/CQES do not allow the 64/16-byte entries the NVM command set uses.
    QueueEntrySize { sqes: u8, cqes: u8 },
    /// Namespace size zero, or capacity larger than the size.
    NamespaceSize { nsze: u64, ncap: u64 },
    /// FLBAS selects a format beyond NLBAF.
    FormatIndex { index: u8, nlbaf: u8 },
    /// LBA data size outside 512 B ..= 64 KiB (or beyond what we can express).
    BlockSize { lbads: u8 },
    /// The active namespace list is not strictly increasing or has a reserved id.
    NamespaceList { position: usize, nsid: u32 },
}

impl fmt::Display for IdentifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Truncated => write!(f, "identify data truncated"),
            Self::QueueEntrySize { sqes, cqes } => write!(
                f,
                "unsupported queue entry sizes (SQES {sqes:#x}, CQES {cqes:#x}; need 64 B / 16 B)"
            ),
            Self::NamespaceSize { nsze, ncap } => {
                write!(f, "invalid namespace size (NSZE {nsze}, NCAP {ncap})")
            }
            Self::FormatIndex { index, nlbaf } => {
                write!(
                    f,
                    "LBA format {index} selected but only {} exist",
                    u32::from(nlbaf) + 1
                )
            }
            Self::BlockSize { lbads } => write!(f, "unsupported LBA data size 2^{lbads}"),
            Self::NamespaceList { position, nsid } => {
                write!(
                    f,
                    "bad namespace id {nsid:#x} at position {position} of the active list"
                )
            }
        }
    }
}

/// A fixed-size ASCII field (serial, model, firmware), space padded by the device.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct AsciiField<const N: usize> {
    bytes: [u8; N],
}

impl<const N: usize> AsciiField<N> {
    fn parse(b: &[u8]) -> Self {
        let mut bytes = [0u8; N];
        bytes.copy_from_slice(&b[..N]);
        // Anything that is not printable ASCII is shown as '?', so a log line can never
        // carry control characters from the device.
        for c in bytes.iter_mut() {
            if *c != 0 && !(0x20..0x7f).contains(c) {
                *c = b'?';
            }
        }
        Self { bytes }
    }

    /// The field as the device padded it (non-printable bytes as '?').
    pub(crate) fn bytes(&self) -> &[u8; N] {
        &self.bytes
    }

    /// The text without trailing spaces or NULs.
    pub(crate) fn as_str(&self) -> &str {
        let end = self
            .bytes
            .iter()
            .rposition(|&c| c != b' ' && c != 0)
            .map_or(0, |p| p + 1);
        // Only printable ASCII (or NUL) remains after `parse`, so this cannot fail.
        core::str::from_utf8(&self.bytes[..end]).unwrap_or("")
    }
}

impl<const N: usize> fmt::Display for AsciiField<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<const N: usize> fmt::Debug for AsciiField<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

/// The parts of Identify Controller (CNS 01h) the driver uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IdentifyController {
    pub(crate) vid: u16,
    pub(crate) ssvid: u16,
    pub(crate) serial: AsciiField<20>,
    pub(crate) model: AsciiField<40>,
    pub(crate) firmware: AsciiField<8>,
    /// Maximum Data Transfer Size as a power of two of CAP.MPSMIN pages; 0 means no limit.
    pub(crate) mdts: u8,
    /// Controller Multi-Path I/O and Namespace Sharing Capabilities: bit 1, the subsystem
    /// may have more than one controller.
    pub(crate) cmic: u8,
    pub(crate) cntlid: u16,
    pub(crate) ver: u32,
    /// Optional Asynchronous Events Supported.
    pub(crate) oaes: u32,
    /// RTD3 Entry Latency: how long a normal shutdown may take, in microseconds (0: not
    /// reported).
    pub(crate) rtd3e: u32,
    /// Optional Admin Command Support.
    pub(crate) oacs: u16,
    /// Abort Command Limit (0's based).
    pub(crate) acl: u8,
    /// Asynchronous Event Request Limit (0's based).
    pub(crate) aerl: u8,
    /// Command Retry Delay Times 1-3, in 100 ms units.
    pub(crate) crdt: [u16; 3],
    /// Log Page Attributes.
    pub(crate) lpa: u8,
    /// Error Log Page Entries (0's based).
    pub(crate) elpe: u8,
    /// Warning and Critical Composite Temperature Thresholds, kelvin (0: not reported).
    pub(crate) wctemp: u16,
    pub(crate) cctemp: u16,
    pub(crate) sqes: u8,
    pub(crate) cqes: u8,
    /// Maximum outstanding commands (0: not reported).
    pub(crate) maxcmd: u16,
    /// Number of Namespaces: the largest namespace id the controller may use.
    pub(crate) nn: u32,
    /// Optional NVM Command Support.
    pub(crate) oncs: u16,
    /// Volatile Write Cache.
    pub(crate) vwc: u8,
    /// SGL Support.
    pub(crate) sgls: u32,
    /// Controller Attributes.
    pub(crate) ctratt: u32,
    /// NVM Subsystem NVMe Qualified Name (NVMe 1.2.1 on; NULs before then).
    pub(crate) subnqn: AsciiField<256>,
}

impl IdentifyController {
    /// Extended LBA Formats Supported (CTRATT bit 15): the NVM Command Set Identify
    /// Namespace data says each format's protection information format.
    pub(crate) fn elbas(&self) -> bool {
        self.ctratt & (1 << 15) != 0
    }

    /// Parses and validates an Identify Controller data structure.
    pub(crate) fn parse(b: &[u8]) -> Result<Self, IdentifyError> {
        if b.len() < IDENTIFY_SIZE {
            return Err(IdentifyError::Truncated);
        }
        let id = Self {
            vid: le16(b, 0),
            ssvid: le16(b, 2),
            serial: AsciiField::parse(&b[4..24]),
            model: AsciiField::parse(&b[24..64]),
            firmware: AsciiField::parse(&b[64..72]),
            mdts: b[77],
            cmic: b[76],
            cntlid: le16(b, 78),
            ver: le32(b, 80),
            oaes: le32(b, 92),
            rtd3e: le32(b, 88),
            crdt: [le16(b, 134), le16(b, 136), le16(b, 138)],
            oacs: le16(b, 256),
            acl: b[258],
            aerl: b[259],
            lpa: b[261],
            elpe: b[262],
            wctemp: le16(b, 266),
            cctemp: le16(b, 268),
            sqes: b[512],
            cqes: b[513],
            maxcmd: le16(b, 514),
            nn: le32(b, 516),
            oncs: le16(b, 520),
            vwc: b[525],
            sgls: le32(b, 536),
            ctratt: le32(b, 96),
            subnqn: AsciiField::parse(&b[768..1024]),
        };
        // Bits 3:0 are the required (minimum) size, bits 7:4 the maximum, as powers of two.
        let ok = |v: u8, want: u8| (v & 0xf) <= want && (v >> 4) >= want;
        if !ok(id.sqes, 6) || !ok(id.cqes, 4) {
            return Err(IdentifyError::QueueEntrySize {
                sqes: id.sqes,
                cqes: id.cqes,
            });
        }
        Ok(id)
    }

    /// Maximum transfer size in bytes, or `None` when the controller sets no limit.
    ///
    /// MDTS counts in units of the controller's *minimum* memory page size (CAP.MPSMIN),
    /// whatever page size the host enabled it with (CC.MPS), hence `cap` and not a page
    /// shift. Saturates instead of overflowing for absurd MDTS values.
    pub(crate) fn max_transfer_bytes(&self, cap: Cap) -> Option<u64> {
        cap.mpsmin_pages_bytes(self.mdts)
    }

    /// How long to wait for a normal shutdown, as the C driver: RTD3E in whole seconds
    /// (rounded up), at least `default_ms`, at most 60 s.
    pub(crate) fn shutdown_timeout_ms(&self, default_ms: u32) -> u32 {
        if self.rtd3e == 0 {
            return default_ms;
        }
        (self.rtd3e.div_ceil(1_000_000) * 1000).clamp(default_ms, 60_000)
    }

    /// Whether the host should enable Advanced Command Retry (Host Behavior Support), as
    /// the C driver: when the controller has a retry delay to ask for.
    pub(crate) fn wants_acre(&self) -> bool {
        self.crdt[0] != 0
    }

    /// A volatile write cache is present.
    pub(crate) fn has_volatile_write_cache(&self) -> bool {
        self.vwc & 1 != 0
    }

    /// Dataset Management (deallocate) is supported.
    pub(crate) fn supports_dsm(&self) -> bool {
        self.oncs & (1 << 2) != 0
    }

    /// Write Zeroes is supported.
    pub(crate) fn supports_write_zeroes(&self) -> bool {
        self.oncs & (1 << 3) != 0
    }

    /// SGLs are supported for the NVM command set.
    pub(crate) fn supports_sgl(&self) -> bool {
        self.sgls & 0x3 != 0
    }

    /// OACS bit 8: Doorbell Buffer Config (shadow doorbells, mostly offered by emulated
    /// controllers, where every MMIO write is a trap).
    pub(crate) fn supports_doorbell_buffer(&self) -> bool {
        self.oacs & (1 << 8) != 0
    }
}

/// One LBA format descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct LbaFormat {
    /// Metadata bytes per block.
    pub(crate) ms: u16,
    /// LBA data size as a power of two.
    pub(crate) lbads: u8,
    /// Relative performance.
    pub(crate) rp: u8,
}

/// The parts of Identify Namespace (CNS 00h) the driver uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IdentifyNamespace {
    /// Namespace size in logical blocks.
    pub(crate) nsze: u64,
    pub(crate) ncap: u64,
    pub(crate) nsfeat: u8,
    /// Number of LBA formats (0's based).
    pub(crate) nlbaf: u8,
    /// The format in use.
    pub(crate) lbaf: LbaFormat,
    /// Index of the format in use.
    pub(crate) lbaf_index: u8,
    /// Metadata at the end of each block (extended LBA) rather than in a separate buffer.
    pub(crate) extended_lba: bool,
    /// Deallocate Logical Block Features: what reading a deallocated block returns.
    pub(crate) dlfeat: u8,
    /// End-to-end Data Protection Type Settings: PI type (bits 2:0), PI first (bit 3).
    pub(crate) dps: u8,
    /// Namespace Multi-path I/O and Namespace Sharing Capabilities: bit 0, shared.
    pub(crate) nmic: u8,
    /// Namespace Atomic Write Unit Power Fail (0's based), valid when NSFEAT bit 1 is set.
    pub(crate) nawupf: u16,
    /// Preferred write granularity (0's based), valid when NSFEAT bit 4 is set.
    pub(crate) npwg: u16,
    pub(crate) npwa: u16,
    /// Optimal I/O boundary in blocks (0: none).
    pub(crate) noiob: u16,
    /// Preferred deallocate granularity and alignment (0's based), valid when OPTPERF says.
    pub(crate) npdg: u16,
    pub(crate) npda: u16,
    /// Namespace Globally Unique Identifier (all zeroes: none).
    pub(crate) nguid: [u8; 16],
    /// IEEE Extended Unique Identifier (all zeroes: none).
    pub(crate) eui64: [u8; 8],
}

impl IdentifyNamespace {
    /// Parses and validates an Identify Namespace data structure.
    ///
    /// A namespace id that is not active returns all zeroes; callers skip it before parsing
    /// (NSZE 0 is refused here).
    pub(crate) fn parse(b: &[u8]) -> Result<Self, IdentifyError> {
        if b.len() < IDENTIFY_SIZE {
            return Err(IdentifyError::Truncated);
        }
        let nsze = le64(b, 0);
        let ncap = le64(b, 8);
        if nsze == 0 || ncap > nsze {
            return Err(IdentifyError::NamespaceSize { nsze, ncap });
        }
        let nlbaf = b[25];
        let flbas = b[26];
        // With more than 16 formats, FLBAS bits 6:5 hold the upper two index bits.
        let index = (flbas & 0xf) | if nlbaf >= 16 { (flbas >> 1) & 0x30 } else { 0 };
        if index > nlbaf || index >= 64 {
            return Err(IdentifyError::FormatIndex { index, nlbaf });
        }
        let off = 128 + 4 * index as usize;
        let raw = le32(b, off);
        let lbaf = LbaFormat {
            ms: raw as u16,
            lbads: (raw >> 16) as u8,
            rp: ((raw >> 24) & 0x3) as u8,
        };
        if !(9..=16).contains(&lbaf.lbads) {
            return Err(IdentifyError::BlockSize { lbads: lbaf.lbads });
        }
        Ok(Self {
            nsze,
            ncap,
            nsfeat: b[24],
            nlbaf,
            lbaf,
            lbaf_index: index,
            extended_lba: flbas & 0x10 != 0,
            dlfeat: b[33],
            dps: b[29],
            nmic: b[30],
            nawupf: le16(b, 36),
            npwg: le16(b, 64),
            npwa: le16(b, 66),
            noiob: le16(b, 46),
            npdg: le16(b, 68),
            npda: le16(b, 70),
            nguid: b[104..120].try_into().unwrap_or_default(),
            eui64: b[120..128].try_into().unwrap_or_default(),
        })
    }

    /// Logical block size in bytes.
    pub(crate) fn block_size(&self) -> u32 {
        1 << self.lbaf.lbads
    }

    /// Capacity in bytes, saturating.
    #[allow(dead_code, reason = "read by the host tests")]
    pub(crate) fn capacity_bytes(&self) -> u64 {
        self.nsze.saturating_mul(u64::from(self.block_size()))
    }

    /// Preferred deallocation granularity in blocks, as the C driver derives it: the larger
    /// of NPDG and NPDA when NSFEAT's OPTPERF bits say they are valid, else 1.
    pub(crate) fn discard_granularity_blocks(&self) -> u32 {
        let optperf = (self.nsfeat >> 4) & 0x3;
        let npdg = if optperf & 0x1 != 0 {
            u32::from(self.npdg) + 1
        } else {
            1
        };
        let npda = if optperf != 0 {
            u32::from(self.npda) + 1
        } else {
            1
        };
        npdg.max(npda)
    }

    /// Reading a deallocated block returns zeroes (DLFEAT bits 2:0 = 001b).
    pub(crate) fn deallocate_reads_zeroes(&self) -> bool {
        self.dlfeat & 0x7 == 1
    }
}

/// The NVM Command Set Identify Controller data (CNS 06h, CSI 00h): per-command size limits
/// the controller may set for Write Zeroes and Dataset Management.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct IdentifyControllerNvm {
    /// Write Zeroes Size Limit: 2^n CAP.MPSMIN pages (0: no limit beyond MDTS).
    pub(crate) wzsl: u8,
    /// Dataset Management Ranges Limit (0: none but the command's 256).
    pub(crate) dmrl: u8,
    /// Dataset Management Range Size Limit, in logical blocks (0: none).
    pub(crate) dmrsl: u32,
    /// Dataset Management Size Limit, in logical blocks, all ranges together (0: none).
    pub(crate) dmsl: u64,
}

impl IdentifyControllerNvm {
    pub(crate) fn parse(b: &[u8]) -> Result<Self, IdentifyError> {
        if b.len() < IDENTIFY_SIZE {
            return Err(IdentifyError::Truncated);
        }
        Ok(Self {
            wzsl: b[1],
            dmrl: b[3],
            dmrsl: le32(b, 4),
            dmsl: le64(b, 8),
        })
    }

    /// Most logical blocks one Dataset Management range may cover, if limited.
    pub(crate) fn max_range_blocks(&self) -> Option<u32> {
        (self.dmrsl != 0).then_some(self.dmrsl)
    }

    /// Most ranges in one Dataset Management command, out of the command's 256.
    pub(crate) fn max_ranges(&self) -> u16 {
        match self.dmrl {
            0 => 256,
            n => u16::from(n),
        }
    }

    /// Most bytes one Write Zeroes may cover, if WZSL limits it.
    pub(crate) fn max_write_zeroes_bytes(&self, cap: Cap) -> Option<u64> {
        cap.mpsmin_pages_bytes(self.wzsl)
    }
}

/// Maximum entries in an active namespace id list.
pub(crate) const NS_LIST_MAX: usize = IDENTIFY_SIZE / 4;

/// Parses an active namespace id list (CNS 02h) into `out`, returning how many ids it held.
///
/// The list ends at the first zero. Ids must be strictly increasing, below the broadcast id
/// 0xffffffff, and at most `nn` (Identify Controller NN).
pub(crate) fn parse_ns_list(
    b: &[u8],
    nn: u32,
    out: &mut [u32; NS_LIST_MAX],
) -> Result<usize, IdentifyError> {
    if b.len() < IDENTIFY_SIZE {
        return Err(IdentifyError::Truncated);
    }
    let mut prev = 0u32;
    let mut n = 0;
    for position in 0..NS_LIST_MAX {
        let nsid = le32(b, position * 4);
        if nsid == 0 {
            break;
        }
        if nsid <= prev || nsid == u32::MAX || nsid > nn {
            return Err(IdentifyError::NamespaceList { position, nsid });
        }
        out[n] = nsid;
        n += 1;
        prev = nsid;
    }
    Ok(n)
}

/// How long to wait before retrying a command that failed with `status`: the Command Retry
/// Delay Time its CRD field names, in milliseconds (0: retry at once).
pub(crate) fn retry_delay_ms(status: Status, crdt: [u16; 3]) -> u32 {
    match status.crd() {
        0 => 0,
        n => u32::from(crdt[usize::from(n - 1)]) * 100,
    }
}
