// SPDX-License-Identifier: GPL-2.0

//! Commands Supported and Effects (log page 05h, NVMe Base Spec 5.16.1.6): what an admin
//! command may change, so the host can stop I/O around it and learn the namespaces anew.
//!
//! A Format NVM, for instance, may change a namespace's LBA format: I/O issued meanwhile,
//! or after it in the old block size, reads or writes the wrong blocks. As the C driver
//! (`nvme_command_effects`), the effects the controller reports for an opcode are combined
//! with those the spec defines for the commands every host must treat with care, since a
//! controller may report none.

use super::le32;

/// Log identifier of Commands Supported and Effects.
pub(crate) const LOG_CMD_EFFECTS: u8 = 0x05;
/// Identify Controller LPA bit 1: the controller has the log page.
pub(crate) const LPA_CMD_EFFECTS: u8 = 1 << 1;
/// Bytes of the log page: 256 admin then 256 I/O command entries.
pub(crate) const LOG_CMD_EFFECTS_SIZE: usize = 4096;

/// Command Supported.
pub(crate) const CSUPP: u32 = 1 << 0;
/// Logical Block Content Change.
pub(crate) const LBCC: u32 = 1 << 1;
/// Namespace Capability Change (size, format).
pub(crate) const NCC: u32 = 1 << 2;
/// Namespace Inventory Change (namespaces created, deleted, attached, detached).
pub(crate) const NIC: u32 = 1 << 3;
/// Controller Capability Change.
#[allow(dead_code, reason = "kept with the rest of the spec's definitions")]
pub(crate) const CCC: u32 = 1 << 4;
/// Command Submission and Execution Relaxations (bits 15:14): when set, CSE is advisory.
pub(crate) const CSER_MASK: u32 = 3 << 14;
/// Command Submission and Execution: bits 18:16, non-zero when other commands must wait.
pub(crate) const CSE_MASK: u32 = 7 << 16;
/// UUID Selection Supported.
pub(crate) const UUID_SEL: u32 = 1 << 19;
/// Command Scope (bits 31:20): what the command may affect (namespace, controller, ...).
pub(crate) const SCOPE_MASK: u32 = 0xfff << 20;

/// Admin opcodes whose effects the host must assume (the spec's mandatory ones).
pub(crate) mod opcode {
    pub(crate) const NS_MANAGEMENT: u8 = 0x0d;
    pub(crate) const NS_ATTACHMENT: u8 = 0x15;
    pub(crate) const FORMAT_NVM: u8 = 0x80;
    pub(crate) const SECURITY_RECEIVE: u8 = 0x82;
    pub(crate) const SANITIZE: u8 = 0x84;
}

/// The effects every host must assume for admin command `opc`, whatever the log says.
pub(crate) fn known_admin_effects(opc: u8) -> u32 {
    match opc {
        opcode::FORMAT_NVM => CSUPP | LBCC | NCC | CSE_MASK,
        opcode::SANITIZE => CSUPP | LBCC | CSE_MASK,
        opcode::NS_MANAGEMENT | opcode::NS_ATTACHMENT => CSUPP | NIC,
        _ => 0,
    }
}

/// NVM command set opcodes whose effects the host must assume.
pub(crate) mod io_opcode {
    pub(crate) const WRITE: u8 = 0x01;
    pub(crate) const WRITE_UNCORRECTABLE: u8 = 0x04;
    pub(crate) const WRITE_ZEROES: u8 = 0x08;
}

/// The effects every host must assume for NVM command `opc` (they change the logical
/// blocks' contents), whatever the log says.
pub(crate) fn known_io_effects(opc: u8) -> u32 {
    match opc {
        io_opcode::WRITE | io_opcode::WRITE_UNCORRECTABLE | io_opcode::WRITE_ZEROES => LBCC,
        _ => 0,
    }
}

/// The log page: the admin half (Admin Command Supported) and the I/O half (I/O Command
/// Supported, for the NVM command set).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EffectsLog {
    acs: [u32; 256],
    iocs: [u32; 256],
}

impl EffectsLog {
    /// Parses the log page (at least its first 2048 bytes).
    pub(crate) fn parse(b: &[u8]) -> Option<Self> {
        if b.len() < 2048 {
            return None;
        }
        let mut acs = [0u32; 256];
        let mut iocs = [0u32; 256];
        for (i, e) in acs.iter_mut().enumerate() {
            *e = le32(b, 4 * i);
        }
        for (i, e) in iocs.iter_mut().enumerate() {
            *e = le32(b, 1024 + 4 * i);
        }
        Some(Self { acs, iocs })
    }

    /// What the controller reports for admin command `opc`.
    pub(crate) fn admin(&self, opc: u8) -> u32 {
        self.acs[usize::from(opc)]
    }

    /// What the controller reports for I/O command `opc`.
    pub(crate) fn io(&self, opc: u8) -> u32 {
        self.iocs[usize::from(opc)]
    }
}

/// The effects to act on for I/O command `opc`, as the C driver's (`nvme_command_effects`
/// with a namespace): the controller's (if it has the log) and the known ones, without CSE
/// (which would have an I/O command wait for the I/O queues to drain: itself included).
/// Without the log no command is marked supported.
pub(crate) fn io_effects(log: Option<&EffectsLog>, opc: u8) -> u32 {
    (log.map_or(0, |l| l.io(opc)) | known_io_effects(opc)) & !CSE_MASK
}

/// The effects to act on for admin command `opc`: the controller's (if it has the log)
/// and the mandatory ones, as the C driver. Security Receive's CSE is ignored (it concerns
/// the admin queue only, which I/O freezing does not serialize), and so is any CSE with a
/// relaxation bit set.
pub(crate) fn admin_effects(log: Option<&EffectsLog>, opc: u8) -> u32 {
    let mut e = log.map_or(0, |l| l.admin(opc)) | known_admin_effects(opc);
    if opc == opcode::SECURITY_RECEIVE || e & CSER_MASK != 0 {
        e &= !CSE_MASK;
    }
    e
}

/// I/O to every namespace must stop around the command (Command Submission and
/// Execution): none may be outstanding when it starts, none submitted until it completes.
pub(crate) fn needs_freeze(effects: u32) -> bool {
    effects & CSE_MASK != 0
}

/// The namespaces must be identified anew afterwards.
pub(crate) fn needs_rescan(effects: u32) -> bool {
    effects & (NCC | NIC) != 0
}
