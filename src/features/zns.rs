// SPDX-License-Identifier: GPL-2.0

//! Zoned namespaces (the Zoned Namespace command set), as the C driver's `zns.c`: their
//! geometry and limits from the ZNS Identify data, and the zone reports the block layer asks
//! for (at probe, for `BLKREPORTZONE`, for its write pointer recovery).

use crate::{
    hw::Hw,
    ioq::NvmeBlk,
    kernel_ext::block::mq::{PrivateData, PrivateIo, Zone, ZoneReporter, ZonedDisk},
    spec::{
        command::Command,
        effects::{EffectsLog, CSUPP, LOG_CMD_EFFECTS, LOG_CMD_EFFECTS_SIZE},
        identify::IdentifyNamespace,
        zns::{self, ZnsError, ZoneInfo, ZoneReport, DESCRIPTOR_SIZE, REPORT_HEADER},
    },
};
use kernel::{alloc::VVec, device::Device, prelude::*, sync::aref::ARef};

/// A zoned namespace's zones and what the controller takes of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Zoned {
    pub(crate) info: ZoneInfo,
    /// The Zone Append Size Limit in bytes (`None`: the transfer limit).
    pub(crate) append_limit: Option<u64>,
    /// The controller runs Zone Append on it (its Commands Supported and Effects log for the
    /// command set says so). Without it the disk is read-only, as C's.
    pub(crate) append: bool,
}

/// Why a zoned namespace gets no zoned disk.
pub(crate) enum ZonedError {
    /// Its zones are of a kind the block layer or rnvme cannot serve (as C's `-ENODEV`: only
    /// the generic device).
    Unsupported(ZnsError),
    /// An Identify command failed.
    Command(Error),
}

impl From<Error> for ZonedError {
    fn from(e: Error) -> Self {
        ZonedError::Command(e)
    }
}

/// Reads namespace `nsid`'s zones (`nid`: its Identify Namespace data), as C's
/// `nvme_query_zone_info`: the ZNS Identify Namespace for the format in use, the controller's
/// Zone Append Size Limit, and whether Zone Append is supported.
pub(crate) fn query(hw: &Hw<'_>, nsid: u32, nid: &IdentifyNamespace) -> Result<Zoned, ZonedError> {
    let data = hw.admin_read(zns::identify_ns(nsid), "Identify Namespace (Zoned)")?;
    let info = ZoneInfo::parse(&data, nid.lbaf_index).map_err(ZonedError::Unsupported)?;
    let ctrl = hw.admin_read(zns::identify_ctrl(), "Identify Controller (Zoned)")?;
    let append_limit = zns::zone_append_limit(&ctrl, hw.cap);
    Ok(Zoned {
        info,
        append_limit,
        append: append_supported(hw),
    })
}

/// Whether the Commands Supported and Effects log of the Zoned Namespace command set (CSI
/// 02h in CDW14, as C's `nvme_get_effects_log`) lists Zone Append. A controller without it
/// does not.
fn append_supported(hw: &Hw<'_>) -> bool {
    let dwords = (LOG_CMD_EFFECTS_SIZE / 4) as u32;
    let cmd = Command::get_log_page(LOG_CMD_EFFECTS, 0xffff_ffff, dwords, 0, 0)
        .with_cdw(14, u32::from(zns::CSI_ZNS) << 24);
    hw.try_admin_read(cmd)
        .ok()
        .and_then(|data| EffectsLog::parse(&data))
        .is_some_and(|log| log.io(zns::opcode::ZONE_APPEND) & CSUPP != 0)
}

/// A zone report buffer for `zones` zones, as C's `nvme_zns_alloc_report_buffer`: at most
/// what one command carries, halved while vmalloc fails, at least one zone.
fn report_buffer(zones: u64, max: usize) -> Result<VVec<u8>> {
    let want = usize::try_from(zones).unwrap_or(usize::MAX);
    let mut len = want
        .saturating_mul(DESCRIPTOR_SIZE)
        .saturating_add(REPORT_HEADER)
        .min(max)
        & !3;
    while len >= REPORT_HEADER + DESCRIPTOR_SIZE {
        if let Ok(buf) = VVec::from_elem(0u8, len, GFP_KERNEL) {
            return Ok(buf);
        }
        len = (len / 2) & !3;
    }
    Err(ENOMEM)
}

/// [`crate::kernel_ext::block::mq::Operations::report_zones`]: the zones from the one holding
/// `sector`, at most `nr_zones`, read with Zone Management Receive (partial reports) on the
/// disk's queue, as C's `nvme_ns_report_zones`.
pub(crate) fn report_zones(
    disk: &ZonedDisk<'_, NvmeBlk>,
    sector: u64,
    nr_zones: u32,
    to: &mut ZoneReporter<'_>,
) -> Result<u32> {
    // What the report needs of the namespace, taken while the disk's data is there: the
    // block device may outlive it (a namespace detached while a report hands zones to a
    // stalled user buffer), as C's open namespace reference outlives its removal.
    let (nsid, shift, zone_blocks, dev) = disk
        .with_data(|ns| {
            let dev: ARef<Device> = ns.dma_dev().as_ref().into();
            ns.zoned()
                .map(|z| (ns.nsid(), ns.lba_shift() - 9, z.info.zone_blocks, dev))
        })?
        .ok_or(EINVAL)?;
    let zone_sectors = zone_blocks << shift;
    let capacity = disk.sectors();
    let zones = u64::from(nr_zones).min(capacity >> zone_sectors.trailing_zeros());
    let mut buf = report_buffer(zones, disk.max_buffer_bytes())?;
    let len = buf.len();
    let in_buf = (len - REPORT_HEADER) / DESCRIPTOR_SIZE;
    let mut sector = sector & !(zone_sectors - 1);
    let mut idx = 0u32;
    // The capacity is read again for each command, as C's: a disk removed meanwhile has
    // none, and the report ends with the zones it handed over so far.
    while idx < nr_zones && sector < disk.sectors() {
        buf.fill(0);
        let cmd = zns::report_zones(nsid, sector >> shift, len as u32);
        let io = PrivateIo {
            to_device: false,
            data: PrivateData::Kernel(&mut buf),
            timeout_ms: 0,
            nowait: false,
            polled: false,
            metadata: None,
        };
        let status = disk.execute_private(io, |rq| rq.set_passthru(&cmd), |rq| rq.status())?;
        if !status.is_success() {
            dev_err!(
                dev,
                "nsid {nsid}: zone report at sector {sector} failed: {status}\n"
            );
            return Err(EIO);
        }
        let report = ZoneReport::new(&buf).ok_or(EIO)?;
        let n = report.len().min(in_buf).min((nr_zones - idx) as usize);
        if n == 0 {
            break;
        }
        for i in 0..n {
            let d = report.zone(i).ok_or(EIO)?;
            if d.zone_type != zns::ZONE_TYPE_SEQWRITE_REQ {
                dev_err!(
                    dev,
                    "nsid {nsid}: invalid zone type {:#x} at zone {idx}\n",
                    d.zone_type
                );
                return Err(EINVAL);
            }
            let start = d.start << shift;
            let wp = if d.state == zns::ZONE_STATE_FULL {
                start.saturating_add(zone_sectors)
            } else {
                d.wp << shift
            };
            let zone = Zone {
                start,
                len: zone_sectors,
                wp,
                capacity: d.capacity << shift,
                cond: d.state,
            };
            to.report(idx, &zone)?;
            idx += 1;
        }
        sector = sector.saturating_add(zone_sectors.saturating_mul(n as u64));
    }
    if idx > 0 {
        Ok(idx)
    } else {
        Err(EINVAL)
    }
}
