// SPDX-License-Identifier: GPL-2.0

//! Namespace identifiers: the Namespace Identification Descriptor list (Identify CNS 03h)
//! and the EUI64 and NGUID fields of Identify Namespace, combined as the C driver combines
//! them, and their text in sysfs (`wwid`, `eui`, `nguid`, `uuid`), which udev names
//! `/dev/disk/by-id` links after.

use core::fmt::{self, Write};

/// Namespace Identifier Types (NIDT).
mod nidt {
    pub(super) const EUI64: u8 = 1;
    pub(super) const NGUID: u8 = 2;
    pub(super) const UUID: u8 = 3;
    pub(super) const CSI: u8 = 4;
}

/// A namespace's globally unique identifiers; all-zero ones are absent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct NsIds {
    pub(crate) eui64: [u8; 8],
    pub(crate) nguid: [u8; 16],
    pub(crate) uuid: [u8; 16],
    /// Command Set Identifier (0: NVM).
    pub(crate) csi: u8,
    /// The descriptor list had a Command Set Identifier.
    pub(crate) csi_reported: bool,
}

/// Command Set Identifiers (NVMe Base Spec figure "Command Set Identifiers").
pub(crate) mod csi {
    pub(crate) const NVM: u8 = 0;
    pub(crate) const KEY_VALUE: u8 = 1;
    pub(crate) const ZONED: u8 = 2;

    /// The command set's name, for the log.
    pub(crate) fn name(csi: u8) -> &'static str {
        match csi {
            NVM => "NVM",
            KEY_VALUE => "Key Value",
            ZONED => "Zoned Namespace",
            _ => "unknown",
        }
    }
}

/// What rnvme makes of a namespace, by its command set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NsKind {
    /// A block device (and its generic device).
    Block,
    /// A zoned block device (and its generic device).
    Zoned,
    /// Only the generic device, for passthrough: the command set has no block device in
    /// rnvme (C: `nvme_update_ns_info_generic`, a hidden disk).
    Passthrough,
    /// Nothing: its command set is not known (C leaves such namespaces out).
    Skip,
}

impl NsIds {
    /// What to make of the namespace, as C's `nvme_scan_ns` and `nvme_update_ns_info`:
    /// `multi_css` when the controller runs every I/O command set it has (CC.CSS = 110b),
    /// `listed` when its descriptor list was read (a controller running several command
    /// sets must say each namespace's there). Zoned namespaces are zoned disks where the
    /// kernel has zoned block devices (`zoned_disks`), else only generic devices.
    pub(crate) fn kind(&self, multi_css: bool, listed: bool, zoned_disks: bool) -> NsKind {
        if multi_css && listed && !self.csi_reported {
            return NsKind::Skip;
        }
        match self.csi {
            csi::NVM => NsKind::Block,
            _ if !multi_css => NsKind::Skip,
            csi::ZONED if zoned_disks => NsKind::Zoned,
            _ => NsKind::Passthrough,
        }
    }
}

impl NsIds {
    /// Parses a Namespace Identification Descriptor list (4096 bytes or fewer). As the C
    /// driver, the walk ends at a descriptor of length 0, at one that would run past the
    /// end, and at a known type with the wrong length; unknown types are skipped.
    pub(crate) fn from_descriptors(b: &[u8]) -> Self {
        let mut ids = Self::default();
        let mut pos = 0;
        // Each descriptor: NIDT, NIDL, 2 reserved bytes, then NIDL bytes.
        while pos + 4 <= b.len() {
            let (t, len) = (b[pos], b[pos + 1]);
            let start = pos + 4;
            let end = start + usize::from(len);
            if len == 0 || end > b.len() {
                break;
            }
            let value = &b[start..end];
            match (t, len) {
                (nidt::EUI64, 8) => ids.eui64.copy_from_slice(value),
                (nidt::NGUID, 16) => ids.nguid.copy_from_slice(value),
                (nidt::UUID, 16) => ids.uuid.copy_from_slice(value),
                (nidt::CSI, 1) => {
                    ids.csi = value[0];
                    ids.csi_reported = true;
                }
                // A known type with a length the spec does not give it.
                (nidt::EUI64..=nidt::CSI, _) => break,
                _ => {}
            }
            pos = end;
        }
        ids
    }

    /// Takes EUI64 (NVMe 1.1 on) and NGUID (1.2 on) from Identify Namespace where the
    /// descriptors gave none, as the C driver. `vs` is the controller's version (VER).
    pub(crate) fn fill_from_identify(&mut self, eui64: [u8; 8], nguid: [u8; 16], vs: u32) {
        if vs >= 0x1_01_00 && is_zero(&self.eui64) {
            self.eui64 = eui64;
        }
        if vs >= 0x1_02_00 && is_zero(&self.nguid) {
            self.nguid = nguid;
        }
    }

    pub(crate) fn has_eui64(&self) -> bool {
        !is_zero(&self.eui64)
    }

    pub(crate) fn has_nguid(&self) -> bool {
        !is_zero(&self.nguid)
    }

    pub(crate) fn has_uuid(&self) -> bool {
        !is_zero(&self.uuid)
    }

    /// sysfs `uuid`: the UUID, or the NGUID without one (C's backward compatibility); C
    /// hides the file when both are absent.
    pub(crate) fn write_uuid(&self, w: &mut impl Write) -> fmt::Result {
        write_uuid(
            w,
            if self.has_uuid() {
                &self.uuid
            } else {
                &self.nguid
            },
        )?;
        w.write_char('\n')
    }

    /// sysfs `nguid`, as a UUID (C's `%pU`).
    pub(crate) fn write_nguid(&self, w: &mut impl Write) -> fmt::Result {
        write_uuid(w, &self.nguid)?;
        w.write_char('\n')
    }

    /// sysfs `eui`: bytes separated by spaces (C's `%8ph`).
    pub(crate) fn write_eui(&self, w: &mut impl Write) -> fmt::Result {
        for (i, b) in self.eui64.iter().enumerate() {
            let sep = if i == 0 { "" } else { " " };
            write!(w, "{sep}{b:02x}")?;
        }
        w.write_char('\n')
    }

    /// sysfs `wwid`, as the C driver: `uuid.` the UUID, else `eui.` the NGUID, else `eui.`
    /// the EUI64, else `nvme.` the vendor id, serial and model (hex, trailing spaces
    /// dropped) and the namespace id.
    pub(crate) fn write_wwid(
        &self,
        w: &mut impl Write,
        vid: u16,
        serial: &str,
        model: &str,
        nsid: u32,
    ) -> fmt::Result {
        if self.has_uuid() {
            w.write_str("uuid.")?;
            write_uuid(w, &self.uuid)?;
        } else if self.has_nguid() {
            w.write_str("eui.")?;
            write_hex(w, &self.nguid)?;
        } else if self.has_eui64() {
            w.write_str("eui.")?;
            write_hex(w, &self.eui64)?;
        } else {
            write!(w, "nvme.{vid:04x}-")?;
            write_hex(w, serial.as_bytes())?;
            w.write_char('-')?;
            write_hex(w, model.as_bytes())?;
            write!(w, "-{nsid:08x}")?;
        }
        w.write_char('\n')
    }
}

fn is_zero(b: &[u8]) -> bool {
    b.iter().all(|&x| x == 0)
}

fn write_hex(w: &mut impl Write, b: &[u8]) -> fmt::Result {
    b.iter().try_for_each(|x| write!(w, "{x:02x}"))
}

/// 16 bytes in UUID form, in order (C's `%pU`): 8-4-4-4-12 lowercase hex digits.
fn write_uuid(w: &mut impl Write, b: &[u8; 16]) -> fmt::Result {
    for (i, x) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            w.write_char('-')?;
        }
        write!(w, "{x:02x}")?;
    }
    Ok(())
}
