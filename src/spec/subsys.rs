// SPDX-License-Identifier: GPL-2.0

//! NVM subsystems: which controllers belong to one (their Subsystem NQN), and which
//! namespaces they share (Base Spec 2.0, 2.4 "NVM Subsystem Entities", 8.1 "Multi-Path I/O
//! and Namespace Sharing").

use super::identify::IdentifyController;
use core::fmt;

/// NQN field size (Identify Controller bytes 768..1023).
pub(crate) const NQN_SIZE: usize = 256;

/// CMIC bit 1: the NVM subsystem may contain more than one controller.
const CMIC_MULTI_CTRL: u8 = 1 << 1;
/// NMIC bit 0: the namespace may be attached to more than one controller.
const NMIC_SHARED: u8 = 1 << 0;

/// The subsystem may have several controllers: its namespaces get a multipath head disk, as
/// C's `nvme_mpath_alloc_disk` (whether or not each is shared).
pub(crate) fn multi_controller(cmic: u8) -> bool {
    cmic & CMIC_MULTI_CTRL != 0
}

/// The namespace may be reached through more than one controller.
pub(crate) fn shared_namespace(nmic: u8) -> bool {
    nmic & NMIC_SHARED != 0
}

/// A Subsystem NQN: the device's own, or the one the C driver makes up for a device that has
/// none (`nvme_init_subnqn`), so the same controllers group into the same subsystems.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Nqn {
    bytes: [u8; NQN_SIZE],
}

impl Nqn {
    /// The controller's subsystem NQN: SUBNQN if it is set and NUL terminated within the
    /// field (NVMe 1.2.1 on) and the quirk `ignore_dev_subnqn` does not apply; else
    /// `nqn.2014.08.org.nvmexpress:` with the PCI vendor and subsystem vendor ids, the
    /// serial number and the model, as C. Also says whether a 1.2.1 controller's own field
    /// was missing or invalid, the quirk aside (C warns then).
    pub(crate) fn of(id: &IdentifyController, ignore_dev_subnqn: bool) -> (Self, bool) {
        let dev = id.subnqn.bytes();
        let len = dev.iter().position(|&c| c == 0).unwrap_or(NQN_SIZE);
        let mut bytes = [0u8; NQN_SIZE];
        if !ignore_dev_subnqn && len > 0 && len < NQN_SIZE {
            bytes[..len].copy_from_slice(&dev[..len]);
            return (Self { bytes }, false);
        }
        let mut w = Writer {
            buf: &mut bytes,
            pos: 0,
        };
        // Cannot fail: the prefix and ids take 35 bytes of 256.
        let _ = fmt::write(
            &mut w,
            format_args!("nqn.2014.08.org.nvmexpress:{:04x}{:04x}", id.vid, id.ssvid),
        );
        w.put(id.serial.bytes());
        w.put(id.model.bytes());
        (Self { bytes }, !ignore_dev_subnqn && id.ver >= 0x1_02_01)
    }

    /// The NQN's bytes, without the NULs that pad it.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        let len = self.bytes.iter().position(|&c| c == 0).unwrap_or(NQN_SIZE);
        &self.bytes[..len]
    }
}

impl fmt::Display for Nqn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Printable ASCII only: the identify parser replaced anything else by '?', and the
        // made-up NQN is built from such fields.
        f.write_str(core::str::from_utf8(self.as_bytes()).unwrap_or("?"))
    }
}

/// Writes into a fixed buffer, keeping the last byte for a NUL.
struct Writer<'a> {
    buf: &'a mut [u8; NQN_SIZE],
    pos: usize,
}

impl Writer<'_> {
    fn put(&mut self, s: &[u8]) {
        for &c in s {
            if self.pos + 1 >= NQN_SIZE {
                return;
            }
            self.buf[self.pos] = c;
            self.pos += 1;
        }
    }
}

impl fmt::Write for Writer<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.put(s.as_bytes());
        Ok(())
    }
}
