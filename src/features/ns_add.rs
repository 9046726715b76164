// SPDX-License-Identifier: GPL-2.0

//! A new namespace's disk: what a scan ([`crate::scan`]) does for each namespace it finds
//! without one. Identifying it and adding its disk runs on an async worker, side by side
//! with the scan's other new namespaces; its publication (generic device, path of a head
//! disk, log line) then runs in namespace order, under the scan lock.

use crate::{
    admin::CmdError,
    ioctl::{DiskIds, DiskLink, NsLink},
    ioq::NvmeBlk,
    kernel_ext::{
        block::mq::{DiskAdder, DisksScan, Limits, NewDisk},
        chardev::CharDev,
    },
    mpath::PathLimits,
    ns::{metadata_mode, Namespace, Serving, Unservable},
    params,
    shared::Shared,
    spec::{
        command::{cns, Command},
        identify::IdentifyNamespace,
        ns_ids::{csi, NsIds, NsKind},
        pi::{Metadata, Mode},
        quirks::Quirks,
        subsys::shared_namespace,
    },
    zns::{self, Zoned, ZonedError},
};
use kernel::{page::PAGE_SHIFT, prelude::*, sync::Arc};

/// What a disk's name has between `rnvme` and `n<N>`: a path's `<S>c<C>` (subsystem and
/// controller), else the controller's number.
struct DiskPrefix(Option<u32>, u32);

impl kernel::fmt::Display for DiskPrefix {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        match self.0 {
            Some(s) => write!(f, "{s}c{}", self.1),
            None => write!(f, "{}", self.1),
        }
    }
}

/// A new namespace whose disk a scan's worker added: what its publication needs.
pub(crate) struct Found {
    pub(crate) nsid: u32,
    hidden: bool,
    zoned: Option<Zoned>,
    limits: Limits,
    sectors: u64,
    block_size: u32,
    zeroes: bool,
    read_only: bool,
    meta_shown: Option<(Metadata, bool)>,
    /// In a multi-controller subsystem's namespace list (`NMIC`).
    shared: bool,
    /// The subsystem whose head disk it is a path of.
    sub: Option<u32>,
}

impl<'b> Shared<'b> {
    /// Identifies new namespace `nsid` and adds its disk through `adder` (on an async worker
    /// of [`Self::scan_namespaces`]); what its publication needs, `None` for a namespace
    /// skipped, or the error of a command that failed (which fails the scan).
    pub(crate) fn add_namespace(
        &self,
        nsid: u32,
        adder: &DiskAdder<'_, 'b, NvmeBlk>,
    ) -> Result<Option<Found>> {
        let (id, inst) = (&self.id, self.hw.instance);
        let data = self.hw.admin_read(
            Command::identify(cns::NAMESPACE, nsid, 0),
            "Identify Namespace",
        )?;
        let nid = match IdentifyNamespace::parse(&data) {
            Ok(nid) => nid,
            Err(e) => {
                dev_warn!(
                    self.hw.pdev.as_ref(),
                    "rnvme{inst}: namespace {nsid} skipped: {e}\n"
                );
                return Ok(None);
            }
        };
        let (ids, listed) = self.namespace_ids(nsid, &nid)?;
        let zoned_disks = cfg!(CONFIG_BLK_DEV_ZONED);
        let mut zoned = None;
        let hidden = match ids.kind(self.hw.multi_css(), listed, zoned_disks) {
            NsKind::Block => false,
            NsKind::Zoned => match zns::query(&self.hw, nsid, &nid) {
                Ok(z) => {
                    zoned = Some(z);
                    false
                }
                // As C: a zoned namespace rnvme cannot serve keeps its generic device.
                Err(ZonedError::Unsupported(e)) => {
                    dev_warn!(
                        self.hw.pdev.as_ref(),
                        "rnvme{inst}n{nsid}: {e}: no block device, passthrough through /dev/rng{inst}n{nsid} only\n"
                    );
                    true
                }
                Err(ZonedError::Command(e)) => return Err(e),
            },
            NsKind::Passthrough => {
                dev_info!(
                    self.hw.pdev.as_ref(),
                    "rnvme{inst}n{nsid}: {} command set ({}): no block device, passthrough through /dev/rng{inst}n{nsid} only\n",
                    csi::name(ids.csi),
                    ids.csi
                );
                true
            }
            NsKind::Skip => {
                dev_warn!(
                    self.hw.pdev.as_ref(),
                    "rnvme{inst}: namespace {nsid} skipped: command set {} not reported or not enabled\n",
                    ids.csi
                );
                return Ok(None);
            }
        };
        let meta = self.metadata(nsid, &nid)?;
        let hidden = hidden
            || if metadata_mode(&meta) == Mode::Unservable {
                dev_warn!(
                    self.hw.pdev.as_ref(),
                    "rnvme{inst}n{nsid}: {}: no block device, passthrough through /dev/rng{inst}n{nsid} only\n",
                    Unservable::Metadata
                );
                true
            } else {
                false
            };
        let quirks = self.hw.quirks();
        let how = Serving {
            zoned,
            meta,
            hidden,
            transfer: self.max_data(),
        };
        let mut ns = match Namespace::new(self.hw.pdev, id, nsid, nid, quirks, how) {
            Ok(ns) => ns,
            Err(why) => {
                dev_warn!(
                    self.hw.pdev.as_ref(),
                    "rnvme{inst}: namespace {nsid} skipped: {why}\n"
                );
                return Ok(None);
            }
        };
        let (cap, dma) = (self.hw.cap, self.hw.dma_opt);
        let limits = ns.limits(id, self.nvm.as_ref(), cap, dma, PAGE_SHIFT as u32);
        // A hidden disk has no capacity to show (as C's).
        let sectors = if hidden { 0 } else { ns.sectors() };
        let found = Found {
            nsid,
            hidden,
            zoned,
            limits,
            sectors,
            block_size: ns.block_size(),
            zeroes: ns.deallocate_reads_zeroes(),
            read_only: ns.read_only(),
            meta_shown: ns.metadata().map(|m| (*m, ns.integrity_size() != 0)),
            shared: shared_namespace(nid.nmic),
            sub: None,
        };
        let disk_ids = DiskIds {
            ids,
            vid: id.vid,
            serial: id.serial,
            model: id.model,
        };
        // A namespace of a multi-controller subsystem: this disk is a hidden path of the
        // subsystem's head disk (zoned ones, and those served by passthrough only, keep a
        // disk of their own for now).
        let subsys = self.subsys.as_ref().filter(|_| !hidden && zoned.is_none());
        if let Some(m) = subsys {
            match m.head(nsid, ids, found.shared, disk_ids) {
                Ok(link) => ns.set_head(link),
                Err(_) => return Ok(None),
            }
        }
        let private = DiskLink {
            ctrl: self.link.clone(),
            ns: ns.key(),
            ids: disk_ids,
        };
        let sub = subsys.map(|m| m.instance);
        let disk = NewDisk {
            limits,
            name: fmt!("rnvme{}n{nsid}", DiskPrefix(sub, inst)),
            sectors,
            parent: self.hw.pdev.as_ref(),
            hidden: hidden || sub.is_some(),
            read_only: found.read_only,
            data: ns,
            private,
        };
        // One namespace the block layer refuses (limits it cannot take: a block larger
        // than the transfer limit) fails that namespace, not the controller (as C's
        // `nvme_alloc_ns`); the next scan tries again. Probe fault step 14: adding the
        // disk fails. The caller logs it.
        let _ = adder.add_disk(disk, params::inject(self.hw.dev(), 14));
        Ok(Some(Found { sub, ..found }))
    }

    /// What follows the addition of a new namespace's disk, once it is listed: its generic
    /// device, its path of a head disk, its log line.
    pub(crate) fn publish_namespace(&self, ts: &mut DisksScan<'_, 'b, NvmeBlk>, f: Found) {
        let (nsid, inst, sub) = (f.nsid, self.hw.instance, f.sub);
        // The generic device goes with the namespace's disk (dropped with it), once the
        // disk is listed, as C's order: a command through it finds the disk. A namespace
        // without one still has its disk.
        if let Some(d) = ts.find_disk(|ns| ns.nsid() == nsid) {
            let link = Arc::new(
                NsLink {
                    ctrl: self.link.clone(),
                    ns: d.data().key(),
                },
                GFP_KERNEL,
            )
            .map_err(Error::from);
            match link.and_then(|l| CharDev::register(fmt!("rng{inst}n{nsid}"), self.hw.dev(), l)) {
                Ok(dev) => d.data().set_generic(dev),
                Err(e) => dev_warn!(
                    self.hw.dev(),
                    "rnvme{inst}n{nsid}: no generic character device ({})\n",
                    e.to_errno()
                ),
            }
        }
        if f.hidden {
            return;
        }
        if let Some(s) = sub {
            let path = PathLimits {
                limits: f.limits,
                sectors: f.sectors,
                read_only: f.read_only,
            };
            let attached = ts.find_disk(|ns| ns.nsid() == nsid).map(|d| {
                d.data()
                    .head()
                    .map(|l| l.attach(d.handle(), self.link.clone(), path))
            });
            if let Some(Some(Err(e))) = attached {
                dev_err!(
                    self.hw.pdev.as_ref(),
                    "rnvme{s}n{nsid}: path through rnvme{inst} not added ({}): removing its disk\n",
                    e.to_errno()
                );
                // The next scan tries again.
                ts.retain_disks(|ns| ns.nsid() != nsid);
                return;
            }
            dev_dbg!(
                self.hw.pdev.as_ref(),
                "rnvme{s}n{nsid}: path rnvme{s}c{inst}n{nsid} ({} namespace)\n",
                if f.shared { "shared" } else { "private" }
            );
        }
        dev_dbg!(
            self.hw.pdev.as_ref(),
            "rnvme{}n{nsid}: {} MiB, {} byte blocks{}{}{}{}\n",
            DiskPrefix(sub, inst),
            f.sectors >> 11,
            f.block_size,
            if self.id.has_volatile_write_cache() {
                ", volatile write cache"
            } else {
                ""
            },
            if f.zeroes {
                ", deallocated blocks read as zeroes"
            } else {
                ""
            },
            ZonedDisplay(f.zoned, f.block_size),
            MetaDisplay(f.meta_shown)
        );
        if f.read_only {
            dev_warn!(
                self.hw.pdev.as_ref(),
                "rnvme{inst}n{nsid}: Zone Append not supported for this zoned namespace: read-only\n"
            );
        }
    }

    /// Namespace `nsid`'s identifiers, as the C driver gathers them: the Namespace
    /// Identification Descriptor list (NVMe 1.3 on), then EUI64 and NGUID from Identify
    /// Namespace where the list had none. A controller that refuses the list loses only
    /// what only the list holds (the UUID).
    /// The quirks bogus_nid (identifiers not unique: only the command set is kept) and
    /// no_ns_desc_list (the list is not asked for) apply as in C.
    /// Also says whether the list was read (asked of 1.3 controllers, and of any running
    /// several command sets, as C).
    fn namespace_ids(&self, nsid: u32, nid: &IdentifyNamespace) -> Result<(NsIds, bool)> {
        let ver = self.id.ver;
        let quirks = self.hw.quirks();
        let mut ids = NsIds::default();
        let mut listed = false;
        if (ver >= 0x1_03_00 || self.hw.multi_css()) && !quirks.has(Quirks::NO_NS_DESC_LIST) {
            let cmd = Command::identify(cns::NS_DESC_LIST, nsid, 0);
            match self.hw.try_admin_read(cmd) {
                Ok(data) => {
                    ids = NsIds::from_descriptors(&data);
                    listed = true;
                }
                // Refused, or lost itself (its timeout resets the controller): the
                // namespace goes on without what only the list holds.
                Err(e @ (CmdError::Status(_) | CmdError::Timeout)) => dev_warn!(
                    self.hw.pdev.as_ref(),
                    "rnvme{}n{nsid}: Identify (Namespace Identification Descriptors) failed: {e}\n",
                    self.hw.instance
                ),
                // Taken back by a reset for another command (a namespace identified side
                // by side), or the controller gone: the namespace is not added without
                // what the list says, as the sequential scan stopped at the next Identify.
                Err(e) => return Err(e.into()),
            }
        }
        if quirks.has(Quirks::BOGUS_NID) {
            let ids = NsIds {
                csi: ids.csi,
                csi_reported: ids.csi_reported,
                ..NsIds::default()
            };
            return Ok((ids, listed));
        }
        ids.fill_from_identify(nid.eui64, nid.nguid, ver);
        Ok((ids, listed))
    }
}

/// ", zoned: N zones of X MiB" for a zoned disk's log line (nothing for another).
struct ZonedDisplay(Option<Zoned>, u32);

impl kernel::fmt::Display for ZonedDisplay {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        match self.0 {
            Some(z) => write!(
                f,
                ", zoned: {} KiB zones, {} open, {} active at most (0: no limit)",
                (z.info.zone_blocks * u64::from(self.1)) >> 10,
                z.info.max_open,
                z.info.max_active
            ),
            None => Ok(()),
        }
    }
}

/// ", N-byte metadata ..." for a disk's log line (nothing without metadata): its protection
/// information, and whether the block layer provides it (else the controller inserts and
/// strips it).
struct MetaDisplay(Option<(Metadata, bool)>);

impl kernel::fmt::Display for MetaDisplay {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        let Some((m, buffers)) = self.0 else {
            return Ok(());
        };
        write!(f, ", {}-byte metadata", m.ms)?;
        if m.pi_type != 0 {
            let guard = if m.guard64 { 64 } else { 16 };
            write!(f, ", PI type {} ({guard}-bit guard)", m.pi_type)?;
        }
        if !buffers {
            f.write_str(", inserted and stripped by the controller")?;
        }
        Ok(())
    }
}
