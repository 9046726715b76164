// SPDX-License-Identifier: GPL-2.0

//! Device quirks: controllers known to get part of the specification wrong, and what the
//! driver does instead.
//!
//! The bits and their names are the C driver's (`enum nvme_quirks`), so the `quirks=`
//! parameter takes the same text (`VID:DID:name,^name-VID:DID:...`, `^` turning a quirk
//! off) and `/sys/class/misc/rnvme<N>/quirks` reads as C's `/sys/class/nvme/nvme<N>/quirks`
//! for the same device. The tables are the C driver's entries (by PCI ID, and by Identify
//! Controller's vendor, model and firmware), with every bit, whether or not rnvme acts on
//! it: [`Quirks::IGNORED`] and [`Quirks::REFUSED`] say which it does not.

use core::fmt;

/// A set of quirks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Quirks(pub(crate) u32);

impl Quirks {
    /// Intel: the vendor-specific stripe size is the optimal I/O boundary.
    pub(crate) const STRIPE_SIZE: Self = Self(1 << 0);
    /// Identify CNS values above 1 are not understood although VER says 1.1.
    pub(crate) const IDENTIFY_CNS: Self = Self(1 << 1);
    /// Deallocated blocks read as zeroes: Write Zeroes is done with Dataset Management.
    pub(crate) const DEALLOCATE_ZEROES: Self = Self(1 << 2);
    /// Wait before polling CSTS.RDY after clearing CC.EN.
    pub(crate) const DELAY_BEFORE_CHK_RDY: Self = Self(1 << 3);
    pub(crate) const NO_APST: Self = Self(1 << 4);
    pub(crate) const NO_DEEPEST_PS: Self = Self(1 << 5);
    /// One command outstanding per I/O queue.
    pub(crate) const QDEPTH_ONE: Self = Self(1 << 6);
    /// I/O submission queues are created with medium priority.
    pub(crate) const MEDIUM_PRIO_SQ: Self = Self(1 << 7);
    pub(crate) const IGNORE_DEV_SUBNQN: Self = Self(1 << 8);
    /// Write Zeroes is not used, whatever ONCS says.
    pub(crate) const DISABLE_WRITE_ZEROES: Self = Self(1 << 9);
    pub(crate) const SIMPLE_SUSPEND: Self = Self(1 << 10);
    /// Every queue on the first interrupt vector.
    pub(crate) const SINGLE_VECTOR: Self = Self(1 << 11);
    pub(crate) const SQES_128_BYTES: Self = Self(1 << 12);
    pub(crate) const SHARED_TAGS: Self = Self(1 << 13);
    /// hwmon's temperature thresholds are read-only.
    pub(crate) const NO_TEMP_THRESH_CHANGE: Self = Self(1 << 14);
    /// The Namespace Identification Descriptor list (Identify CNS 03h) is not asked for.
    pub(crate) const NO_NS_DESC_LIST: Self = Self(1 << 15);
    /// DMA addresses are limited to 48 bits.
    pub(crate) const DMA_ADDRESS_BITS_48: Self = Self(1 << 16);
    pub(crate) const SKIP_CID_GEN: Self = Self(1 << 17);
    /// The namespace identifiers (EUI64, NGUID, UUID) are not unique: ignored.
    pub(crate) const BOGUS_NID: Self = Self(1 << 18);
    /// Only the composite temperature has thresholds.
    pub(crate) const NO_SECONDARY_TEMP_THRESH: Self = Self(1 << 19);
    pub(crate) const FORCE_NO_SIMPLE_SUSPEND: Self = Self(1 << 20);
    /// MSI is not used (MSI-X or INTx are).
    pub(crate) const BROKEN_MSI: Self = Self(1 << 21);
    /// Small lists (PRP lists, SGL segments, ranges) aligned to 512 bytes, not 256.
    pub(crate) const DMAPOOL_ALIGN_512: Self = Self(1 << 22);
    pub(crate) const ADMIN_PAGE_ALIGN: Self = Self(1 << 23);

    /// Quirks that change nothing in rnvme: power state transitions it does not make (APST),
    /// a suspend that is always the simple one, an alignment its admin buffers always have
    /// (whole pages).
    pub(crate) const IGNORED: Self = Self(
        Self::NO_APST.0
            | Self::NO_DEEPEST_PS.0
            | Self::SIMPLE_SUSPEND.0
            | Self::FORCE_NO_SIMPLE_SUSPEND.0
            | Self::ADMIN_PAGE_ALIGN.0,
    );

    /// Quirks rnvme does not implement and cannot serve a controller without (Apple's
    /// 128-byte submission entries, tags shared with the admin queue, command ids without a
    /// generation): such a controller is left to the C driver.
    pub(crate) const REFUSED: Self =
        Self(Self::SQES_128_BYTES.0 | Self::SHARED_TAGS.0 | Self::SKIP_CID_GEN.0);

    pub(crate) const fn empty() -> Self {
        Self(0)
    }

    pub(crate) const fn has(self, q: Self) -> bool {
        self.0 & q.0 == q.0 && q.0 != 0
    }

    pub(crate) const fn with(self, q: Self) -> Self {
        Self(self.0 | q.0)
    }

    pub(crate) const fn without(self, q: Self) -> Self {
        Self(self.0 & !q.0)
    }

    /// The quirk named `name` (C's spelling).
    pub(crate) fn by_name(name: &[u8]) -> Option<Self> {
        NAMES
            .iter()
            .position(|n| n.as_bytes() == name)
            .map(|bit| Self(1 << bit))
    }

    /// The names of the quirks in `self`, lowest bit first.
    pub(crate) fn names(self) -> impl Iterator<Item = &'static str> {
        NAMES
            .iter()
            .enumerate()
            .filter(move |&(bit, _)| self.0 & (1 << bit) != 0)
            .map(|(_, &n)| n)
    }

    /// The quirks of PCI device `vendor:device`, from the C driver's ID table (the first
    /// entry that matches, as the PCI core matches).
    pub(crate) fn for_pci_id(vendor: u16, device: u16) -> Self {
        PCI_TABLE
            .iter()
            .find(|e| e.0 == vendor && e.1 == device)
            .map_or(Self::empty(), |e| e.2)
    }

    /// The quirks of a controller by its Identify Controller vendor, model and firmware
    /// (space padded), from the C driver's table of them.
    pub(crate) fn for_identity(vid: u16, model: &[u8; 40], firmware: &[u8; 8]) -> Self {
        IDENTITY_TABLE
            .iter()
            .filter(|e| e.vid == vid && padded_eq(model, e.model) && padded_eq(firmware, e.fw))
            .fold(Self::empty(), |q, e| q.with(e.quirks))
    }
}

/// Writes the names one per line, or `none`, as C's sysfs `quirks`.
impl fmt::Display for Quirks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            return writeln!(f, "none");
        }
        self.names().try_for_each(|n| writeln!(f, "{n}"))
    }
}

/// The C driver's names, by bit.
const NAMES: [&str; 24] = [
    "stripe_size",
    "identify_cns",
    "deallocate_zeroes",
    "delay_before_chk_rdy",
    "no_apst",
    "no_deepest_ps",
    "qdepth_one",
    "medium_prio_sq",
    "ignore_dev_subnqn",
    "disable_write_zeroes",
    "simple_suspend",
    "single_vector",
    "128_bytes_sqes",
    "shared_tags",
    "no_temp_thresh_change",
    "no_ns_desc_list",
    "dma_address_bits_48",
    "skip_cid_gen",
    "bogus_nid",
    "no_secondary_temp_thresh",
    "force_no_simple_suspend",
    "broken_msi",
    "dmapool_align_512",
    "admin_page_align",
];

/// How long [`Quirks::DELAY_BEFORE_CHK_RDY`] waits, in milliseconds (C's
/// `NVME_QUIRK_DELAY_AMOUNT`).
pub(crate) const DELAY_BEFORE_CHK_RDY_MS: u32 = 2300;

/// `field` (space padded) is `want`, or `want` is `None` (any).
fn padded_eq(field: &[u8], want: Option<&str>) -> bool {
    let Some(want) = want else {
        return true;
    };
    let w = want.as_bytes();
    field.len() >= w.len() && field[..w.len()] == *w && field[w.len()..].iter().all(|&c| c == b' ')
}

struct IdentityEntry {
    vid: u16,
    model: Option<&'static str>,
    fw: Option<&'static str>,
    quirks: Quirks,
}

/// The C driver's `core_quirks`.
const IDENTITY_TABLE: &[IdentityEntry] = &[
    // Toshiba THNSF5256GPUK: dies in any APST state.
    IdentityEntry {
        vid: 0x1179,
        model: Some("THNSF5256GPUK TOSHIBA"),
        fw: None,
        quirks: Quirks::NO_APST,
    },
    // LiteON CL1 firmware 22301111: races in suspend to idle.
    IdentityEntry {
        vid: 0x14a4,
        model: None,
        fw: Some("22301111"),
        quirks: Quirks::SIMPLE_SUSPEND,
    },
    // Kioxia CD6-V / HPE PE8030: I/O timeouts under load with APST.
    IdentityEntry {
        vid: 0x1e0f,
        model: Some("KCD6XVUL6T40"),
        fw: None,
        quirks: Quirks::NO_APST,
    },
    // Samsung Portable SSD X5: needs the delay to start; shares its PCI ID with drives that
    // do not.
    IdentityEntry {
        vid: 0x144d,
        model: Some("Samsung Portable SSD X5"),
        fw: None,
        quirks: Quirks(
            Quirks::DELAY_BEFORE_CHK_RDY.0 | Quirks::NO_DEEPEST_PS.0 | Quirks::IGNORE_DEV_SUBNQN.0,
        ),
    },
];

const fn q(bits: &[Quirks]) -> Quirks {
    let mut v = 0;
    let mut i = 0;
    while i < bits.len() {
        v |= bits[i].0;
        i += 1;
    }
    Quirks(v)
}

use Quirks as Q;

/// The C driver's PCI ID table entries that carry quirks (vendor, device, quirks).
const PCI_TABLE: &[(u16, u16, Quirks)] = &[
    // Intel 750/P3500/P3600/P3700, P3520.
    (0x8086, 0x0953, q(&[Q::STRIPE_SIZE, Q::DEALLOCATE_ZEROES])),
    (0x8086, 0x0a53, q(&[Q::STRIPE_SIZE, Q::DEALLOCATE_ZEROES])),
    // Intel P4500/P4600, Dell Express Flash P4600.
    (
        0x8086,
        0x0a54,
        q(&[Q::STRIPE_SIZE, Q::IGNORE_DEV_SUBNQN, Q::BOGUS_NID]),
    ),
    (0x8086, 0x0a55, Q::STRIPE_SIZE),
    // Intel 600P/P3100.
    (
        0x8086,
        0xf1a5,
        q(&[
            Q::NO_DEEPEST_PS,
            Q::MEDIUM_PRIO_SQ,
            Q::NO_TEMP_THRESH_CHANGE,
            Q::DISABLE_WRITE_ZEROES,
        ]),
    ),
    (0x8086, 0xf1a6, Q::IGNORE_DEV_SUBNQN),
    // QEMU's emulated controller, under its old Intel ID and under Red Hat's.
    (
        0x8086,
        0x5845,
        q(&[Q::IDENTIFY_CNS, Q::DISABLE_WRITE_ZEROES, Q::BOGUS_NID]),
    ),
    (0x1b36, 0x0010, Q::BOGUS_NID),
    // O2 Micro (Steam Deck).
    (0x1217, 0x8760, Q::DMAPOOL_ALIGN_512),
    // Silicon Motion.
    (0x126f, 0x1001, q(&[Q::NO_DEEPEST_PS, Q::IGNORE_DEV_SUBNQN])),
    (0x126f, 0x2262, q(&[Q::NO_DEEPEST_PS, Q::BOGUS_NID])),
    (0x126f, 0x2263, q(&[Q::NO_NS_DESC_LIST, Q::BOGUS_NID])),
    // Seagate Nytro.
    (
        0x1bb1,
        0x0100,
        q(&[Q::DELAY_BEFORE_CHK_RDY, Q::NO_NS_DESC_LIST]),
    ),
    // HGST, WDC SN200, Memblaze Pblaze4 adapters.
    (0x1c58, 0x0003, Q::DELAY_BEFORE_CHK_RDY),
    (0x1c58, 0x0023, Q::DELAY_BEFORE_CHK_RDY),
    (0x1c5f, 0x0540, Q::DELAY_BEFORE_CHK_RDY),
    // Memblaze Pblaze5.
    (0x1c5f, 0x0555, Q::NO_NS_DESC_LIST),
    // Samsung PM1725, PM1725a.
    (0x144d, 0xa821, Q::DELAY_BEFORE_CHK_RDY),
    (
        0x144d,
        0xa822,
        q(&[
            Q::DELAY_BEFORE_CHK_RDY,
            Q::DISABLE_WRITE_ZEROES,
            Q::IGNORE_DEV_SUBNQN,
        ]),
    ),
    // Sandisk SN530, SN550.
    (0x15b7, 0x5008, Q::BROKEN_MSI),
    (0x15b7, 0x5009, q(&[Q::BROKEN_MSI, Q::NO_DEEPEST_PS])),
    // Phison E12, E16, E19, E21.
    (0x1987, 0x5012, Q::BOGUS_NID),
    (0x1987, 0x5016, q(&[Q::IGNORE_DEV_SUBNQN, Q::BOGUS_NID])),
    (0x1987, 0x5019, Q::DISABLE_WRITE_ZEROES),
    (0x1987, 0x5021, Q::DISABLE_WRITE_ZEROES),
    // Lexar 256 GB.
    (
        0x1b4b,
        0x1092,
        q(&[Q::NO_NS_DESC_LIST, Q::IGNORE_DEV_SUBNQN]),
    ),
    // ADATA IM2P33F8ABR1, SX6000LNP, SX6000PNP (also TEAMGROUP Z330), SX8200PNP.
    (0x1cc1, 0x33f8, Q::BOGUS_NID),
    (0x10ec, 0x5762, q(&[Q::IGNORE_DEV_SUBNQN, Q::BOGUS_NID])),
    (0x10ec, 0x5763, Q::BOGUS_NID),
    (0x1cc1, 0x8201, q(&[Q::NO_DEEPEST_PS, Q::IGNORE_DEV_SUBNQN])),
    // Micron.
    (0x1344, 0x5407, Q::IGNORE_DEV_SUBNQN),
    (0x1344, 0x6001, Q::BOGUS_NID),
    (0x1344, 0x6004, Q::DMAPOOL_ALIGN_512),
    // SK Hynix PC400, P31, BC901.
    (0x1c5c, 0x1504, Q::DISABLE_WRITE_ZEROES),
    (0x1c5c, 0x174a, Q::BOGUS_NID),
    (0x1c5c, 0x1d59, Q::DISABLE_WRITE_ZEROES),
    // Sandisk Skyhawk.
    (0x15b7, 0x2001, Q::DISABLE_WRITE_ZEROES),
    // SPCC (its ID is also Lexar NM610's, whose later entry the PCI core never reaches).
    (0x1d97, 0x2263, Q::DISABLE_WRITE_ZEROES),
    // Samsung PM9B1, MZALQ256HBJD, SM953.
    (0x144d, 0xa80b, q(&[Q::DISABLE_WRITE_ZEROES, Q::BOGUS_NID])),
    (0x144d, 0xa809, Q::DISABLE_WRITE_ZEROES),
    (0x144d, 0xa802, Q::BOGUS_NID),
    // UMIS RPJTJ512MGE1QDY, RPJTJ256MGE1QDY.
    (0x1cc4, 0x6303, Q::DISABLE_WRITE_ZEROES),
    (0x1cc4, 0x6302, Q::DISABLE_WRITE_ZEROES),
    // Kingston.
    (0x2646, 0x2262, Q::NO_DEEPEST_PS),
    (0x2646, 0x2263, Q::NO_DEEPEST_PS),
    (0x2646, 0x5013, Q::NO_SECONDARY_TEMP_THRESH),
    (0x2646, 0x5018, Q::DISABLE_WRITE_ZEROES),
    (0x2646, 0x5016, Q::DISABLE_WRITE_ZEROES),
    (0x2646, 0x501a, Q::DISABLE_WRITE_ZEROES),
    (0x2646, 0x501b, Q::DISABLE_WRITE_ZEROES),
    (0x2646, 0x501e, Q::DISABLE_WRITE_ZEROES),
    (0x2646, 0x502f, Q::DISABLE_WRITE_ZEROES),
    // Netac NV3000, NV7000.
    (0x1f40, 0x1202, Q::BOGUS_NID),
    (0x1f40, 0x5236, Q::BOGUS_NID),
    // MAXIO MAP1001, MAP1002, MAP1202, MAP1602 (also HS-SSD-FUTURE).
    (0x1e4b, 0x1001, Q::BOGUS_NID),
    (0x1e4b, 0x1002, Q::BOGUS_NID),
    (0x1e4b, 0x1202, Q::BOGUS_NID),
    (0x1e4b, 0x1602, Q::BOGUS_NID),
    // ADATA XPG GAMMIX S50, Acer/INNOGRIT FA100, ADATA XPG GAMMIX S70.
    (0x1cc1, 0x5350, Q::BOGUS_NID),
    (0x1dbe, 0x5216, Q::BOGUS_NID),
    (0x1dbe, 0x5236, Q::BOGUS_NID),
    // ZHITAI TiPro5000, TiPro7000.
    (0x1e49, 0x0021, Q::NO_DEEPEST_PS),
    (0x1e49, 0x0041, Q::NO_DEEPEST_PS),
    // Wodposit WPBSNM8-256GTP.
    (0x1fa0, 0x2283, Q::NO_SECONDARY_TEMP_THRESH),
    // Solidigm P44 Pro.
    (0x025e, 0xf1ac, Q::NO_DEEPEST_PS),
    // Crucial P2.
    (0xc0a9, 0x540a, Q::BOGUS_NID),
    // Lexar NM620, NM760.
    (0x1d97, 0x1d97, Q::BOGUS_NID),
    (0x1d97, 0x2269, q(&[Q::BOGUS_NID, Q::IGNORE_DEV_SUBNQN])),
    // TEAMGROUP MP33.
    (0x10ec, 0x5765, Q::BOGUS_NID),
    // Amazon (EC2 instance stores, EBS).
    (0x1d0f, 0x0061, Q::DMA_ADDRESS_BITS_48),
    (0x1d0f, 0x0065, Q::DMA_ADDRESS_BITS_48),
    (0x1d0f, 0x8061, Q::DMA_ADDRESS_BITS_48),
    (0x1d0f, 0xcd00, Q::DMA_ADDRESS_BITS_48),
    (0x1d0f, 0xcd01, Q::DMA_ADDRESS_BITS_48),
    (0x1d0f, 0xcd02, Q::DMA_ADDRESS_BITS_48),
    // Apple (MacBook8,1 and some MacBook7,1; T2).
    (0x106b, 0x2001, q(&[Q::SINGLE_VECTOR, Q::QDEPTH_ONE])),
    (
        0x106b,
        0x2005,
        q(&[
            Q::SINGLE_VECTOR,
            Q::SQES_128_BYTES,
            Q::SHARED_TAGS,
            Q::SKIP_CID_GEN,
            Q::IDENTIFY_CNS,
        ]),
    ),
];

/// What is wrong with a `quirks=` value.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum QuirkParamError<'a> {
    /// An entry whose vendor or device is not a 16-bit hexadecimal number.
    BadId(&'a [u8]),
    /// An entry without its third (names) field.
    NoNames(&'a [u8]),
    /// A name no quirk has.
    UnknownName(&'a [u8]),
}

impl fmt::Display for QuirkParamError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (what, text) = match self {
            Self::BadId(t) => ("bad vendor or device ID in", t),
            Self::NoNames(t) => ("no quirk names (VID:DID:names) in", t),
            Self::UnknownName(t) => ("unknown quirk", t),
        };
        write!(
            f,
            "{what} \"{}\"",
            core::str::from_utf8(text).unwrap_or("?")
        )
    }
}

/// One entry of a `quirks=` value: quirks to add to and remove from a PCI ID's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QuirkOverride {
    pub(crate) vendor: u16,
    pub(crate) device: u16,
    pub(crate) enable: Quirks,
    pub(crate) disable: Quirks,
}

impl QuirkOverride {
    /// Applies the override to `q`.
    pub(crate) fn apply(&self, q: Quirks) -> Quirks {
        q.with(self.enable).without(self.disable)
    }
}

/// Parses a `quirks=` value in the C driver's syntax: entries `VID:DID:names` separated by
/// `-`, names separated by `,`, each optionally preceded by `^` (turned off). As C, the
/// names end at an empty one. Returns the entries in order, or the first error.
pub(crate) fn parse_quirk_param(
    s: &[u8],
) -> impl Iterator<Item = Result<QuirkOverride, QuirkParamError<'_>>> {
    s.split(|&c| c == b'-')
        .filter(move |_| !s.is_empty())
        .map(parse_entry)
}

/// The first entry of `s` for `vendor:device` (as C: later ones are not looked at), if
/// `s` parses.
pub(crate) fn find_override(s: &[u8], vendor: u16, device: u16) -> Option<QuirkOverride> {
    for e in parse_quirk_param(s) {
        match e {
            Ok(e) if e.vendor == vendor && e.device == device => return Some(e),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

fn parse_entry(entry: &[u8]) -> Result<QuirkOverride, QuirkParamError<'_>> {
    let mut fields = entry.splitn(3, |&c| c == b':');
    let mut id = || {
        fields
            .next()
            .and_then(parse_hex16)
            .ok_or(QuirkParamError::BadId(entry))
    };
    let (vendor, device) = (id()?, id()?);
    let names = fields.next().ok_or(QuirkParamError::NoNames(entry))?;
    let mut o = QuirkOverride {
        vendor,
        device,
        enable: Quirks::empty(),
        disable: Quirks::empty(),
    };
    for name in names.split(|&c| c == b',') {
        if name.is_empty() {
            break;
        }
        let (off, name) = match name.strip_prefix(b"^") {
            Some(n) => (true, n),
            None => (false, name),
        };
        let q = Quirks::by_name(name).ok_or(QuirkParamError::UnknownName(name))?;
        if off {
            o.disable = o.disable.with(q);
        } else {
            o.enable = o.enable.with(q);
        }
    }
    Ok(o)
}

/// A 16-bit hexadecimal number, optionally `0x`-prefixed (as `kstrtou16(s, 16)`).
fn parse_hex16(s: &[u8]) -> Option<u16> {
    let s = s
        .strip_prefix(b"0x")
        .or_else(|| s.strip_prefix(b"0X"))
        .unwrap_or(s);
    if s.is_empty() {
        return None;
    }
    let v = s.iter().try_fold(0u32, |v, &c| {
        let d = (c as char).to_digit(16)?;
        v.checked_mul(16)?.checked_add(d)
    })?;
    u16::try_from(v).ok()
}
