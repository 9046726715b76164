// SPDX-License-Identifier: GPL-2.0

//! Asynchronous events (NVMe Base Spec 5.2): the completion of an Asynchronous Event
//! Request says what happened in dword 0.

/// Asynchronous Event Configuration (Set Features 0Bh) bits for the notices rnvme acts on
/// or logs: Namespace Attribute Notices (bit 8) and Firmware Activation Notices (bit 9).
pub(crate) const AEC_NOTICES: u32 = 0x300;

/// Log page of the Changed Namespace List, read to clear a namespace-changed event.
pub(crate) const LOG_CHANGED_NS_LIST: u8 = 0x04;

/// Asynchronous Event Type values.
pub(crate) mod kind {
    pub(crate) const ERROR: u8 = 0;
    pub(crate) const SMART: u8 = 1;
    pub(crate) const NOTICE: u8 = 2;
    pub(crate) const IMMEDIATE: u8 = 3;
    pub(crate) const IO_COMMAND_SET: u8 = 6;
    pub(crate) const VENDOR: u8 = 7;
}

/// Error status information values.
pub(crate) mod error {
    pub(crate) const INVALID_SQ: u8 = 0x00;
    pub(crate) const INVALID_DOORBELL: u8 = 0x01;
    pub(crate) const DIAGNOSTIC_FAILURE: u8 = 0x02;
    pub(crate) const PERSISTENT_INTERNAL: u8 = 0x03;
    pub(crate) const TRANSIENT_INTERNAL: u8 = 0x04;
    pub(crate) const FIRMWARE_IMAGE_LOAD: u8 = 0x05;
}

/// SMART / health status information values.
pub(crate) mod health {
    pub(crate) const RELIABILITY: u8 = 0x00;
    pub(crate) const TEMPERATURE: u8 = 0x01;
    pub(crate) const SPARE: u8 = 0x02;
}

/// Notice information values.
pub(crate) mod notice {
    pub(crate) const NS_ATTR_CHANGED: u8 = 0x00;
    pub(crate) const FW_ACTIVATION_STARTING: u8 = 0x01;
    pub(crate) const TELEMETRY_LOG_CHANGED: u8 = 0x02;
    pub(crate) const ANA_CHANGE: u8 = 0x03;
}

/// One asynchronous event, decoded from completion dword 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AsyncEvent {
    pub(crate) kind: u8,
    pub(crate) info: u8,
    /// The log page that holds the details (reading it re-enables the event).
    pub(crate) log_page: u8,
}

impl AsyncEvent {
    pub(crate) fn decode(dw0: u32) -> Self {
        Self {
            kind: (dw0 & 0x7) as u8,
            info: (dw0 >> 8) as u8,
            log_page: (dw0 >> 16) as u8,
        }
    }

    /// The namespace set or a namespace's attributes changed: rescan.
    pub(crate) fn namespaces_changed(&self) -> bool {
        self.kind == kind::NOTICE && self.info == notice::NS_ATTR_CHANGED
    }

    /// A persistent internal error: the controller needs a reset (as the C driver).
    pub(crate) fn needs_reset(&self) -> bool {
        self.kind == kind::ERROR && self.info == error::PERSISTENT_INTERNAL
    }

    /// What happened, for the log.
    pub(crate) fn describe(&self) -> &'static str {
        match (self.kind, self.info) {
            (kind::NOTICE, notice::NS_ATTR_CHANGED) => "namespace attribute changed",
            (kind::NOTICE, notice::FW_ACTIVATION_STARTING) => "firmware activation starting",
            (kind::NOTICE, notice::TELEMETRY_LOG_CHANGED) => "telemetry log changed",
            (kind::NOTICE, notice::ANA_CHANGE) => "asymmetric namespace access change",
            (kind::NOTICE, _) => "notice",
            (kind::ERROR, error::INVALID_SQ) => "error: write to an invalid submission queue",
            (kind::ERROR, error::INVALID_DOORBELL) => "error: invalid doorbell write",
            (kind::ERROR, error::DIAGNOSTIC_FAILURE) => "error: diagnostic failure",
            (kind::ERROR, error::PERSISTENT_INTERNAL) => "error: persistent internal error",
            (kind::ERROR, error::TRANSIENT_INTERNAL) => "error: transient internal error",
            (kind::ERROR, error::FIRMWARE_IMAGE_LOAD) => "error: firmware image load error",
            (kind::ERROR, _) => "error status",
            (kind::SMART, health::RELIABILITY) => "health: NVM subsystem reliability",
            (kind::SMART, health::TEMPERATURE) => "health: temperature threshold",
            (kind::SMART, health::SPARE) => "health: spare below threshold",
            (kind::SMART, _) => "SMART / health status",
            (kind::IMMEDIATE, _) => "immediate",
            (kind::IO_COMMAND_SET, _) => "I/O command set specific status",
            (kind::VENDOR, _) => "vendor specific",
            _ => "reserved event type",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_namespace_changed_notice() {
        // What QEMU posts on namespace attach/detach.
        let e = AsyncEvent::decode(0x0004_0002);
        assert_eq!(e.kind, kind::NOTICE);
        assert_eq!(e.info, notice::NS_ATTR_CHANGED);
        assert_eq!(e.log_page, LOG_CHANGED_NS_LIST);
        assert!(e.namespaces_changed());
        assert_eq!(e.describe(), "namespace attribute changed");
        let smart = AsyncEvent::decode(0x0002_0101);
        assert!(!smart.namespaces_changed());
        assert_eq!(smart.describe(), "health: temperature threshold");
        assert_eq!(smart.log_page, 0x02);
        assert_eq!(
            AsyncEvent::decode(0x0002_0701).describe(),
            "SMART / health status"
        );
        // QEMU's invalid doorbell write: error type, log page 01h.
        let err = AsyncEvent::decode(0x0001_0100);
        assert_eq!(err.describe(), "error: invalid doorbell write");
        assert_eq!(err.log_page, 0x01);
        assert!(!err.needs_reset());
        assert!(AsyncEvent::decode(0x0001_0300).needs_reset());
        assert_eq!(
            AsyncEvent::decode(0xffff_ffff).describe(),
            "vendor specific"
        );
        assert_eq!(AsyncEvent::decode(0x4).describe(), "reserved event type");
    }
}
