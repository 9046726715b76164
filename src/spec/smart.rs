// SPDX-License-Identifier: GPL-2.0

//! Health: the SMART / Health Information log page (Log Identifier 02h), the Temperature
//! Threshold feature (Feature Identifier 04h), and the temperatures hwmon shows.
//!
//! NVMe reports temperatures in kelvin; hwmon wants millidegrees Celsius. The conversions
//! are the kernel's (`kelvin_to_millicelsius`, `millicelsius_to_kelvin`), so rnvme shows
//! the same values as the C driver's `nvme_hwmon`.

use super::le16;
use core::fmt;

/// Log Identifier of the SMART / Health Information log page.
pub(crate) const LOG_SMART: u8 = 0x02;
/// Log Identifier of the Error Information log page.
pub(crate) const LOG_ERROR: u8 = 0x01;
/// Size of the SMART / Health Information log page.
pub(crate) const SMART_LOG_SIZE: usize = 512;
/// Feature Identifier of the Temperature Threshold feature.
pub(crate) const FEATURE_TEMP_THRESHOLD: u8 = 0x04;

/// Critical Warning bits (byte 0 of the log), each also an Asynchronous Event
/// Configuration bit (Set Features 0Bh) that makes the controller report it.
pub(crate) mod critical {
    pub(crate) const SPARE: u8 = 1 << 0;
    pub(crate) const TEMPERATURE: u8 = 1 << 1;
    pub(crate) const RELIABILITY: u8 = 1 << 2;
    pub(crate) const READ_ONLY: u8 = 1 << 3;
    pub(crate) const VOLATILE_BACKUP: u8 = 1 << 4;
    pub(crate) const PMR_READ_ONLY: u8 = 1 << 5;
    /// Every warning the specification defines.
    pub(crate) const ALL: u8 = 0x3f;
}

/// Temperature sensors besides the composite one.
pub(crate) const TEMP_SENSORS: usize = 8;

/// The SMART / Health Information log page's fields rnvme reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SmartLog {
    pub(crate) critical_warning: u8,
    /// Composite temperature, kelvin.
    pub(crate) temperature: u16,
    /// Available spare, percent.
    pub(crate) available_spare: u8,
    pub(crate) spare_threshold: u8,
    pub(crate) percent_used: u8,
    /// Temperature Sensors 1-8, kelvin (0: not implemented).
    pub(crate) sensors: [u16; TEMP_SENSORS],
}

impl SmartLog {
    /// Parses the log page; `None` if `b` is shorter than it.
    pub(crate) fn parse(b: &[u8]) -> Option<Self> {
        if b.len() < SMART_LOG_SIZE {
            return None;
        }
        let mut sensors = [0; TEMP_SENSORS];
        for (i, s) in sensors.iter_mut().enumerate() {
            *s = le16(b, 200 + 2 * i);
        }
        Some(Self {
            critical_warning: b[0],
            temperature: le16(b, 1),
            available_spare: b[3],
            spare_threshold: b[4],
            percent_used: b[5],
            sensors,
        })
    }

    /// Temperature of `channel` (0: composite, 1-8: the sensors), kelvin; 0 if the sensor
    /// is not implemented.
    pub(crate) fn channel_kelvin(&self, channel: usize) -> u16 {
        match channel {
            0 => self.temperature,
            n => self.sensors.get(n - 1).copied().unwrap_or(0),
        }
    }
}

/// Critical warning bits, shown by name ("none" without any).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Warnings(pub(crate) u8);

impl fmt::Display for Warnings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [(u8, &str); 6] = [
            (critical::SPARE, "available spare below threshold"),
            (critical::TEMPERATURE, "temperature threshold crossed"),
            (critical::RELIABILITY, "reliability degraded"),
            (critical::READ_ONLY, "media read-only"),
            (critical::VOLATILE_BACKUP, "volatile memory backup failed"),
            (
                critical::PMR_READ_ONLY,
                "persistent memory region read-only",
            ),
        ];
        if self.0 & critical::ALL == 0 {
            return f.write_str("none");
        }
        let mut sep = "";
        for (bit, n) in NAMES {
            if self.0 & bit != 0 {
                write!(f, "{sep}{n}")?;
                sep = ", ";
            }
        }
        Ok(())
    }
}

/// Kelvin to millidegrees Celsius.
pub(crate) fn kelvin_to_millicelsius(k: u16) -> i64 {
    i64::from(k) * 1000 - 273_150
}

/// Millidegrees Celsius to kelvin, rounded to the closest, as a Temperature Threshold
/// (clamped to its 16 bits, as the C driver clamps).
pub(crate) fn millicelsius_to_threshold(mc: i64) -> u16 {
    let mk = mc.saturating_add(273_150);
    // DIV_ROUND_CLOSEST for either sign.
    let k = if mk >= 0 {
        mk.saturating_add(500) / 1000
    } else {
        mk.saturating_sub(500) / 1000
    };
    k.clamp(0, i64::from(u16::MAX)) as u16
}

/// Command Dword 11 of a Temperature Threshold Get or Set Features: sensor `sensor` (0:
/// composite), the over (`under` false) or under threshold, and for a Set the value.
pub(crate) fn temp_threshold_cdw11(sensor: u8, under: bool, kelvin: u16) -> u32 {
    (u32::from(sensor & 0xf) << 16) | (u32::from(under) << 20) | u32::from(kelvin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_qemus_log() {
        let mut b = [0u8; SMART_LOG_SIZE];
        b[0] = critical::TEMPERATURE;
        b[1..3].copy_from_slice(&323u16.to_le_bytes());
        b[3] = 100;
        b[4] = 10;
        b[202..204].copy_from_slice(&300u16.to_le_bytes());
        let log = SmartLog::parse(&b).unwrap();
        assert_eq!(log.critical_warning, critical::TEMPERATURE);
        assert_eq!(log.channel_kelvin(0), 323);
        assert_eq!(log.channel_kelvin(1), 0);
        assert_eq!(log.channel_kelvin(2), 300);
        assert_eq!(log.channel_kelvin(9), 0);
        assert_eq!((log.available_spare, log.spare_threshold), (100, 10));
        assert!(SmartLog::parse(&b[..511]).is_none());
    }

    #[test]
    fn conversions_as_the_kernels() {
        assert_eq!(kelvin_to_millicelsius(323), 49_850);
        assert_eq!(kelvin_to_millicelsius(0), -273_150);
        // 60 C is 333.15 K: rounded to 333.
        assert_eq!(millicelsius_to_threshold(60_000), 333);
        assert_eq!(millicelsius_to_threshold(60_400), 334);
        assert_eq!(millicelsius_to_threshold(-273_150), 0);
        assert_eq!(millicelsius_to_threshold(-300_000), 0);
        assert_eq!(millicelsius_to_threshold(i64::MAX), u16::MAX);
        assert_eq!(millicelsius_to_threshold(i64::MIN), 0);
    }

    #[test]
    fn threshold_dword() {
        assert_eq!(temp_threshold_cdw11(0, false, 343), 343);
        assert_eq!(temp_threshold_cdw11(2, true, 0), (2 << 16) | (1 << 20));
    }

    #[test]
    fn warning_names() {
        let w = Warnings(critical::TEMPERATURE | critical::READ_ONLY);
        assert_eq!(
            w.to_string(),
            "temperature threshold crossed, media read-only"
        );
        assert_eq!(Warnings(0).to_string(), "none");
        assert_eq!(Warnings(0xc0).to_string(), "none");
    }
}
