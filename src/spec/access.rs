// SPDX-License-Identifier: GPL-2.0

//! Who may send a passthrough command, as the C driver's `nvme_cmd_allowed`: any process
//! with access to the device file may send the commands that only read what it could read
//! anyway (a namespace's blocks, the Identify data needed to build I/O commands), and the
//! commands that change blocks if it opened the file for writing; everything else needs
//! `CAP_SYS_ADMIN`, and a few Set Features the driver manages itself are refused to all.

use super::effects::{io_effects, EffectsLog, CSUPP, LBCC, SCOPE_MASK, UUID_SEL};

/// Vendor specific commands start here (admin and NVM command sets alike).
const VENDOR_START: u8 = 0x80;
/// The Fabrics command opcode.
const FABRICS: u8 = 0x7f;
/// Admin opcodes with rules of their own.
const IDENTIFY: u8 = 0x06;
const SET_FEATURES: u8 = 0x09;

/// Identify CNS values that describe how to build I/O commands and nothing sensitive:
/// Namespace, Controller, I/O Command Set specific Namespace and Controller, I/O Command
/// Set Independent Namespace.
const OPEN_CNS: [u8; 5] = [0x00, 0x01, 0x05, 0x06, 0x08];

/// Feature identifiers the driver sets itself: Number of Queues, Autonomous Power State
/// Transition, Host Memory Buffer, Keep Alive Timer (armed only on fabrics), Host Behavior
/// Support. Changing them behind its back leaves it wrong about the controller.
const DRIVER_FEATURES: [u8; 5] = [0x07, 0x0c, 0x0d, 0x0f, 0x16];

/// Who may send a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Any process that opened the device.
    Open,
    /// Only with `CAP_SYS_ADMIN`.
    Admin,
    /// Nobody (`EACCES`).
    Never,
}

/// Where a command goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// The admin queue.
    Controller,
    /// A namespace, whose I/O command has `effects` (`effects::io_effects`); `partition`:
    /// sent through a partition of its block device (which passthrough would escape).
    Namespace { effects: u32, partition: bool },
}

/// Who may send command `opcode` (with `cdw10`) to `target` through a file opened for
/// writing or not (`writable`), as `nvme_cmd_allowed`.
pub(crate) fn access(opcode: u8, cdw10: u32, target: Target, writable: bool) -> Access {
    if let Target::Namespace {
        partition: true, ..
    } = target
    {
        return Access::Admin;
    }
    // Vendor and fabrics commands: their effects cannot be known.
    if opcode >= VENDOR_START || opcode == FABRICS {
        return Access::Admin;
    }
    match target {
        Target::Controller => admin_access(opcode, cdw10),
        Target::Namespace { effects, .. } => io_access(opcode, effects, writable),
    }
}

fn admin_access(opcode: u8, cdw10: u32) -> Access {
    match opcode {
        IDENTIFY if OPEN_CNS.contains(&(cdw10 as u8)) => Access::Open,
        SET_FEATURES if DRIVER_FEATURES.contains(&(cdw10 as u8)) => Access::Never,
        _ => Access::Admin,
    }
}

fn io_access(opcode: u8, effects: u32, writable: bool) -> Access {
    // Supported by the controller's own account, with no effect beyond the blocks.
    if effects & CSUPP == 0 || effects & !(CSUPP | LBCC | UUID_SEL | SCOPE_MASK) != 0 {
        return Access::Admin;
    }
    // Data to the controller, or blocks changed: only through a file open for writing.
    let to_device = opcode & 1 != 0;
    if (to_device || effects & LBCC != 0) && !writable {
        return Access::Admin;
    }
    Access::Open
}

/// [`access`] to a namespace (not through a partition) for every I/O opcode, worked out
/// once from a controller's effects log, which does not change while it is bound: one
/// lookup per passthrough command instead of the effects and the rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct IoAccess {
    /// Per opcode: [`OPEN_READ_ONLY`] and [`OPEN_WRITABLE`], the files that may send it
    /// without `CAP_SYS_ADMIN` (no I/O command is refused to all).
    open: [u8; 256],
}

/// [`IoAccess`]: open to a file opened read-only.
const OPEN_READ_ONLY: u8 = 1;
/// [`IoAccess`]: open to a file opened for writing.
const OPEN_WRITABLE: u8 = 2;

impl IoAccess {
    /// The table of a controller with effects log `log` (`None`: it has none).
    pub(crate) fn new(log: Option<&EffectsLog>) -> Self {
        let mut open = [0u8; 256];
        for (opc, slot) in (0..=u8::MAX).zip(open.iter_mut()) {
            let effects = io_effects(log, opc);
            let target = Target::Namespace {
                effects,
                partition: false,
            };
            for (writable, bit) in [(false, OPEN_READ_ONLY), (true, OPEN_WRITABLE)] {
                if access(opc, 0, target, writable) == Access::Open {
                    *slot |= bit;
                }
            }
        }
        Self { open }
    }

    /// Who may send I/O command `opcode` to the namespace through a file opened for
    /// writing or not: [`access`]'s answer.
    #[inline]
    pub(crate) fn get(&self, opcode: u8, writable: bool) -> Access {
        let bit = if writable {
            OPEN_WRITABLE
        } else {
            OPEN_READ_ONLY
        };
        if self.open[usize::from(opcode)] & bit != 0 {
            Access::Open
        } else {
            Access::Admin
        }
    }
}
