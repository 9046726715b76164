// SPDX-License-Identifier: GPL-2.0

//! The controller's temperatures in hwmon, as the C driver's `nvme_hwmon`: the composite
//! temperature and each sensor the SMART / Health log has, their over and under thresholds
//! (Temperature Threshold feature, writable), the critical temperature (CCTEMP) and the
//! temperature warning of the log as an alarm. `sensors` shows them as chip `rnvme-pci-*`.

use crate::{
    hw::Hw,
    kernel_ext::hwmon::{Operations, Registration, TempAttr},
    shared::CtrlLink,
    spec::{
        command::Command,
        identify::IdentifyController,
        quirks::Quirks,
        smart::{
            critical, kelvin_to_millicelsius, millicelsius_to_threshold, temp_threshold_cdw11,
            SmartLog, FEATURE_TEMP_THRESHOLD, LOG_SMART, SMART_LOG_SIZE, TEMP_SENSORS,
        },
    },
};
use kernel::{pci, prelude::*, sync::Arc};

/// Reads the SMART / Health Information log page (which also re-enables the SMART
/// asynchronous events it reports).
pub(crate) fn read_smart_log(hw: &Hw<'_>) -> Result<SmartLog> {
    let cmd = Command::get_log_page(LOG_SMART, 0xffff_ffff, (SMART_LOG_SIZE / 4) as u32, 0, 0);
    let data = hw.try_admin_read(cmd)?;
    SmartLog::parse(&data).ok_or(EIO)
}

const COMPOSITE: u32 = TempAttr::Input.bit()
    | TempAttr::Max.bit()
    | TempAttr::Min.bit()
    | TempAttr::Crit.bit()
    | TempAttr::Label.bit()
    | TempAttr::Alarm.bit();
const SENSOR: u32 =
    TempAttr::Input.bit() | TempAttr::Max.bit() | TempAttr::Min.bit() | TempAttr::Label.bit();

/// What the hwmon device reads and writes; the controller is reached through its link (an
/// unbound controller's files fail with `ENODEV` until the device goes).
pub(crate) struct Sensors {
    link: Arc<CtrlLink>,
    /// WCTEMP and CCTEMP of Identify Controller (0: not reported).
    wctemp: u16,
    cctemp: u16,
    /// The sensors the SMART log had at registration.
    present: [bool; TEMP_SENSORS],
    quirks: Quirks,
}

impl Sensors {
    /// Registers the hwmon device of a controller (below its PCI device). As the C driver,
    /// a controller whose SMART log cannot be read gets none (a warning says so).
    pub(crate) fn register(
        pdev: &pci::Device<kernel::device::Bound>,
        hw: &Hw<'_>,
        link: &Arc<CtrlLink>,
        id: &IdentifyController,
    ) -> Option<Registration<Sensors>> {
        let log = match read_smart_log(hw) {
            Ok(log) => log,
            Err(e) => {
                dev_warn!(
                    pdev.as_ref(),
                    "rnvme{}: no hwmon device: SMART log unreadable ({})\n",
                    hw.instance,
                    e.to_errno()
                );
                return None;
            }
        };
        let this = Arc::new(
            Sensors {
                link: link.clone(),
                wctemp: id.wctemp,
                cctemp: id.cctemp,
                present: log.sensors.map(|k| k != 0),
                quirks: hw.quirks(),
            },
            GFP_KERNEL,
        )
        .ok()?;
        Registration::register(pdev.as_ref(), c"rnvme", this)
            .inspect_err(|e| {
                dev_warn!(
                    pdev.as_ref(),
                    "rnvme{}: no hwmon device ({})\n",
                    hw.instance,
                    e.to_errno()
                )
            })
            .ok()
    }

    fn sensor_present(&self, channel: usize) -> bool {
        channel == 0 || self.present.get(channel - 1).copied().unwrap_or(false)
    }

    /// Runs `f` on the controller's hardware, `ENODEV` once it is unbound.
    fn with_hw<R>(&self, f: impl FnOnce(&Hw<'_>) -> Result<R>) -> Result<R> {
        self.link.with(|s| f(&s.hw)).unwrap_or(Err(ENODEV))
    }

    fn threshold(&self, channel: usize, under: bool) -> Result<i64> {
        let sensor = u8::try_from(channel).map_err(|_| EINVAL)?;
        let cdw11 = temp_threshold_cdw11(sensor, under, 0);
        let cmd = Command::get_features(FEATURE_TEMP_THRESHOLD).with_cdw(11, cdw11);
        let dw0 = self.with_hw(|hw| hw.try_admin_cmd(cmd).map_err(|_| EIO))?;
        Ok(kelvin_to_millicelsius(dw0 as u16))
    }

    fn set_threshold(&self, channel: usize, under: bool, mc: i64) -> Result {
        let sensor = u8::try_from(channel).map_err(|_| EINVAL)?;
        let cdw11 = temp_threshold_cdw11(sensor, under, millicelsius_to_threshold(mc));
        let cmd = Command::set_features(FEATURE_TEMP_THRESHOLD, cdw11);
        self.with_hw(|hw| hw.try_admin_cmd(cmd).map(|_| ()).map_err(|_| EIO))
    }
}

impl Operations for Sensors {
    const TEMP_CHANNELS: &'static [u32] = &[
        COMPOSITE, SENSOR, SENSOR, SENSOR, SENSOR, SENSOR, SENSOR, SENSOR, SENSOR, 0,
    ];

    /// As C's `nvme_hwmon_is_visible`.
    fn visible(&self, attr: TempAttr, channel: usize) -> u16 {
        match attr {
            TempAttr::Crit if channel == 0 && self.cctemp != 0 => 0o444,
            TempAttr::Max | TempAttr::Min
                if (channel == 0 && self.wctemp != 0)
                    || (channel > 0
                        && self.sensor_present(channel)
                        && !self.quirks.has(Quirks::NO_SECONDARY_TEMP_THRESH)) =>
            {
                if self.quirks.has(Quirks::NO_TEMP_THRESH_CHANGE) {
                    0o444
                } else {
                    0o644
                }
            }
            TempAttr::Alarm if channel == 0 => 0o444,
            TempAttr::Input | TempAttr::Label if self.sensor_present(channel) => 0o444,
            _ => 0,
        }
    }

    fn read(&self, attr: TempAttr, channel: usize) -> Result<i64> {
        match attr {
            TempAttr::Max => self.threshold(channel, false),
            TempAttr::Min => self.threshold(channel, true),
            TempAttr::Crit => Ok(kelvin_to_millicelsius(self.cctemp)),
            TempAttr::Input => {
                let log = self.with_hw(read_smart_log)?;
                Ok(kelvin_to_millicelsius(log.channel_kelvin(channel)))
            }
            TempAttr::Alarm => {
                let log = self.with_hw(read_smart_log)?;
                Ok(i64::from(log.critical_warning & critical::TEMPERATURE != 0))
            }
            TempAttr::Label => Err(EOPNOTSUPP),
        }
    }

    fn label(&self, channel: usize) -> &'static CStr {
        const NAMES: [&CStr; 9] = [
            c"Composite",
            c"Sensor 1",
            c"Sensor 2",
            c"Sensor 3",
            c"Sensor 4",
            c"Sensor 5",
            c"Sensor 6",
            c"Sensor 7",
            c"Sensor 8",
        ];
        NAMES.get(channel).copied().unwrap_or(c"")
    }

    fn write(&self, attr: TempAttr, channel: usize, value: i64) -> Result {
        match attr {
            TempAttr::Max => self.set_threshold(channel, false, value),
            TempAttr::Min => self.set_threshold(channel, true, value),
            _ => Err(EOPNOTSUPP),
        }
    }
}
