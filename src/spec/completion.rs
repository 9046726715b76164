// SPDX-License-Identifier: GPL-2.0

//! 16-byte completion queue entries and status decoding (NVMe Base Spec, 4.6.1).

use core::fmt;

/// A completion queue entry as read from the completion queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct Completion {
    /// Command specific result (DW0).
    pub(crate) result: u32,
    /// DW1, command specific, rarely used.
    pub(crate) dw1: u32,
    /// How far the controller has consumed the submission queue.
    pub(crate) sq_head: u16,
    pub(crate) sq_id: u16,
    /// The command identifier the host put in the command.
    pub(crate) cid: u16,
    /// Bit 0: phase tag; bits 15:1: status field.
    pub(crate) status_phase: u16,
}

impl Completion {
    /// Size of a completion queue entry in bytes (CC.IOCQES = 4).
    #[allow(dead_code, reason = "read by the host tests")]
    pub(crate) const SIZE: usize = 16;

    /// Decodes the entry from its four little-endian dwords.
    pub(crate) fn from_dwords(dw: [u32; 4]) -> Self {
        Self {
            result: dw[0],
            dw1: dw[1],
            sq_head: dw[2] as u16,
            sq_id: (dw[2] >> 16) as u16,
            cid: dw[3] as u16,
            status_phase: (dw[3] >> 16) as u16,
        }
    }

    /// The phase tag: the entry is new when it equals the queue's current phase.
    #[allow(dead_code, reason = "read by the host tests")]
    pub(crate) fn phase(&self) -> bool {
        self.status_phase & 1 != 0
    }

    pub(crate) fn status(&self) -> Status {
        Status(self.status_phase >> 1)
    }
}

/// Status code type (SCT).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StatusType {
    Generic,
    CommandSpecific,
    MediaError,
    PathRelated,
    Vendor,
    Reserved(u8),
}

/// The 15-bit status field of a completion (without the phase tag).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Status(pub(crate) u16);

/// Generic command status codes we act on.
pub(crate) mod sc {
    pub(crate) const SUCCESS: u8 = 0x00;
    pub(crate) const INVALID_OPCODE: u8 = 0x01;
    pub(crate) const INVALID_FIELD: u8 = 0x02;
    pub(crate) const CID_CONFLICT: u8 = 0x03;
    pub(crate) const DATA_XFER_ERROR: u8 = 0x04;
    pub(crate) const POWER_LOSS: u8 = 0x05;
    pub(crate) const INTERNAL: u8 = 0x06;
    pub(crate) const ABORT_REQ: u8 = 0x07;
    pub(crate) const ABORT_QUEUE: u8 = 0x08;
    pub(crate) const INVALID_NS: u8 = 0x0b;
    pub(crate) const LBA_RANGE: u8 = 0x80;
    pub(crate) const CAP_EXCEEDED: u8 = 0x81;
    pub(crate) const NS_NOT_READY: u8 = 0x82;
    /// Command specific (SCT 1).
    pub(crate) const INVALID_QID: u8 = 0x01;
    pub(crate) const INVALID_QSIZE: u8 = 0x02;
    pub(crate) const INVALID_VECTOR: u8 = 0x08;
    /// NVM command set (SCT 1): Invalid Protection Information.
    pub(crate) const INVALID_PI: u8 = 0x81;
    /// Zoned Namespace command set (SCT 1): Too Many Active Zones, Too Many Open Zones.
    pub(crate) const ZONE_TOO_MANY_ACTIVE: u8 = 0xbd;
    pub(crate) const ZONE_TOO_MANY_OPEN: u8 = 0xbe;
    /// Media errors (SCT 2).
    pub(crate) const WRITE_FAULT: u8 = 0x80;
    pub(crate) const READ_ERROR: u8 = 0x81;
    /// Path related (SCT 3): the host aborted the command (controller reset or removal).
    pub(crate) const HOST_ABORTED: u8 = 0x71;
    /// Path related: the host could not send the command on this path.
    pub(crate) const HOST_PATH_ERROR: u8 = 0x70;
}

/// How an I/O error is reported to the block layer (which maps each to an errno).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BlockError {
    /// The command or a field is not supported: EOPNOTSUPP.
    NotSupported,
    /// Out of space: ENOSPC.
    NoSpace,
    /// Addressed outside the namespace: EREMOTEIO ("target").
    Target,
    /// Media error: ENODATA.
    Medium,
    /// End-to-end protection check failed: EILSEQ.
    Protection,
    /// Reservation conflict: EBADE.
    ReservationConflict,
    /// Path or transport error: ENOLINK.
    Transport,
    /// A zoned namespace's limit of open zones was reached (`BLK_STS_ZONE_OPEN_RESOURCE`:
    /// ETOOMANYREFS).
    ZoneOpenResource,
    /// Its limit of active zones was reached (`BLK_STS_ZONE_ACTIVE_RESOURCE`: EOVERFLOW).
    ZoneActiveResource,
    /// Anything else: EIO.
    Io,
}

impl Status {
    #[allow(dead_code, reason = "kept with the rest of the spec's definitions")]
    pub(crate) const SUCCESS: Status = Status(0);
    /// What the host reports for a command it took back from the controller (reset): may be
    /// retried once the controller works again.
    pub(crate) const HOST_ABORTED: Status = Status(3 << 8 | sc::HOST_ABORTED as u16);
    /// What the host reports for a command it could not send on a path (C's
    /// `NVME_SC_HOST_PATH_ERROR`): a multipath head sends it on another.
    pub(crate) const HOST_PATH_ERROR: Status = Status(3 << 8 | sc::HOST_PATH_ERROR as u16);
    /// The same when the controller is gone for good: not retried.
    pub(crate) const HOST_ABORTED_DNR: Status = Status(1 << 14 | 3 << 8 | sc::HOST_ABORTED as u16);

    /// The block layer error for this status (`None` on success), as the C driver's
    /// `nvme_error_status` does: not everything is EIO.
    pub(crate) fn block_error(self) -> Option<BlockError> {
        if self.is_success() {
            return None;
        }
        Some(match (self.status_type(), self.code()) {
            (StatusType::Generic, sc::CAP_EXCEEDED) => BlockError::NoSpace,
            (StatusType::Generic, sc::LBA_RANGE) => BlockError::Target,
            (StatusType::Generic, sc::INVALID_OPCODE | sc::INVALID_FIELD | sc::INVALID_NS) => {
                BlockError::NotSupported
            }
            (StatusType::CommandSpecific, sc::ZONE_TOO_MANY_ACTIVE) => {
                BlockError::ZoneActiveResource
            }
            (StatusType::CommandSpecific, sc::ZONE_TOO_MANY_OPEN) => BlockError::ZoneOpenResource,
            // Reservation Conflict.
            (StatusType::Generic, 0x83) => BlockError::ReservationConflict,
            // Compare Failure is a media status too.
            (StatusType::MediaError, sc::WRITE_FAULT | sc::READ_ERROR | 0x85 | 0x86 | 0x87) => {
                BlockError::Medium
            }
            // End-to-end guard, application tag and reference tag check errors, and
            // protection fields the namespace's format does not allow.
            (StatusType::MediaError, 0x82..=0x84)
            | (StatusType::CommandSpecific, sc::INVALID_PI) => BlockError::Protection,
            // As the C driver: a command the host took back is an I/O error, not a path one.
            (StatusType::PathRelated, sc::HOST_ABORTED) => BlockError::Io,
            (StatusType::PathRelated, _) => BlockError::Transport,
            _ => BlockError::Io,
        })
    }

    pub(crate) fn is_success(self) -> bool {
        self.code() == sc::SUCCESS && self.sct() == 0
    }
    /// Status Code.
    pub(crate) fn code(self) -> u8 {
        self.0 as u8
    }
    /// Status Code Type, raw.
    pub(crate) fn sct(self) -> u8 {
        ((self.0 >> 8) & 0x7) as u8
    }
    pub(crate) fn status_type(self) -> StatusType {
        match self.sct() {
            0 => StatusType::Generic,
            1 => StatusType::CommandSpecific,
            2 => StatusType::MediaError,
            3 => StatusType::PathRelated,
            7 => StatusType::Vendor,
            n => StatusType::Reserved(n),
        }
    }
    /// Command Retry Delay: which of the controller's CRDT1-3 to wait before a retry (0:
    /// none). Set only when the host enabled Advanced Command Retry.
    pub(crate) fn crd(self) -> u8 {
        ((self.0 >> 11) & 0x3) as u8
    }
    /// More information in the Error Information log page.
    pub(crate) fn more(self) -> bool {
        self.0 & (1 << 13) != 0
    }
    /// A path related status (C's `nvme_is_path_error`): another path to the namespace may
    /// succeed.
    pub(crate) fn path_error(self) -> bool {
        self.sct() == 3
    }
    /// A path error the host itself reports (its aborts, a path it could not use), with or
    /// without DNR: the command never failed on the device.
    pub(crate) fn host_path_error(self) -> bool {
        self.path_error() && matches!(self.code(), sc::HOST_ABORTED | sc::HOST_PATH_ERROR)
    }
    /// Do Not Retry: the same command would fail again.
    pub(crate) fn dnr(self) -> bool {
        self.0 & (1 << 14) != 0
    }
    /// Whether a retry can help: not DNR, and not a status that says the command itself is bad.
    pub(crate) fn retryable(self) -> bool {
        !self.is_success() && !self.dnr()
    }

    /// A short name for the status, for log messages.
    pub(crate) fn name(self) -> &'static str {
        match (self.status_type(), self.code()) {
            (StatusType::Generic, sc::SUCCESS) => "success",
            (StatusType::Generic, sc::INVALID_OPCODE) => "invalid opcode",
            (StatusType::Generic, sc::INVALID_FIELD) => "invalid field",
            (StatusType::Generic, sc::CID_CONFLICT) => "command id conflict",
            (StatusType::Generic, sc::DATA_XFER_ERROR) => "data transfer error",
            (StatusType::Generic, sc::POWER_LOSS) => "aborted: power loss",
            (StatusType::Generic, sc::INTERNAL) => "internal error",
            (StatusType::Generic, sc::ABORT_REQ) => "aborted by request",
            (StatusType::Generic, sc::ABORT_QUEUE) => "aborted: queue deleted",
            (StatusType::Generic, sc::INVALID_NS) => "invalid namespace",
            (StatusType::Generic, sc::LBA_RANGE) => "LBA out of range",
            (StatusType::Generic, sc::CAP_EXCEEDED) => "capacity exceeded",
            (StatusType::Generic, sc::NS_NOT_READY) => "namespace not ready",
            (StatusType::CommandSpecific, sc::INVALID_QID) => "invalid queue identifier",
            (StatusType::CommandSpecific, sc::INVALID_QSIZE) => "invalid queue size",
            (StatusType::CommandSpecific, sc::INVALID_VECTOR) => "invalid interrupt vector",
            (StatusType::MediaError, sc::WRITE_FAULT) => "write fault",
            (StatusType::MediaError, sc::READ_ERROR) => "unrecovered read error",
            (StatusType::PathRelated, sc::HOST_ABORTED) => "aborted by host",
            (StatusType::Generic, _) => "generic error",
            (StatusType::CommandSpecific, _) => "command specific error",
            (StatusType::MediaError, _) => "media error",
            (StatusType::PathRelated, _) => "path error",
            (StatusType::Vendor, _) => "vendor specific error",
            (StatusType::Reserved(_), _) => "reserved status type",
        }
    }
}

impl fmt::Debug for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (sct {:#x} sc {:#04x}{}{})",
            self.name(),
            self.sct(),
            self.code(),
            if self.dnr() { " dnr" } else { "" },
            if self.more() { " more" } else { "" }
        )
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}
