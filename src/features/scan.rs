// SPDX-License-Identifier: GPL-2.0

//! Namespace scanning: which namespaces get a disk, and keeping each disk in line with its
//! namespace when a command (Format NVM, Sanitize, namespace management) or another host
//! changes it.
//!
//! A scan (at probe, by `NVME_IOCTL_RESCAN`, after a namespace-changed event or a command
//! whose effects say so) removes the disks of namespaces that are no longer active,
//! identifies the others again and applies a changed format or size to their disk in place
//! (or removes it if it can no longer be served), and adds a disk for each new namespace.

use crate::{
    hw::Hw,
    ioctl::{DiskIds, DiskLink, NsLink},
    ioq::NvmeBlk,
    kernel_ext::{
        block::{
            bio::FrozenDisks,
            mq::{DiskRef, NewDisk},
        },
        chardev::CharDev,
        sync::MemallocNoio,
    },
    mpath::PathLimits,
    ns::{metadata_mode, servable, Namespace, Serving, Unservable},
    params,
    shared::Shared,
    spec::{
        command::{cns, Command},
        effects,
        identify::{self, IdentifyController, IdentifyNamespace, NS_LIST_MAX},
        ns_ids::{csi, NsIds, NsKind},
        pi::{self, Guard, Metadata, Mode},
        quirks::Quirks,
        subsys::shared_namespace,
    },
    state::State,
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

/// The active namespace ids, parsed and checked.
pub(crate) fn active_namespaces(hw: &Hw<'_>, id: &IdentifyController) -> Result<KVec<u32>> {
    let cns_1_0 = hw.quirks().has(Quirks::IDENTIFY_CNS);
    if !cns::supported(hw.regs.vs(), cns::ACTIVE_NS_LIST, cns_1_0) {
        return allocated_namespaces(hw, id);
    }
    let data = hw.admin_read(
        Command::identify(cns::ACTIVE_NS_LIST, 0, 0),
        "Identify Active Namespace List",
    )?;
    let mut ids = KBox::new([0u32; NS_LIST_MAX], GFP_KERNEL)?;
    let n = identify::parse_ns_list(&data, id.nn, &mut ids).map_err(|e| {
        dev_err!(hw.dev(), "bad namespace list: {e}\n");
        EINVAL
    })?;
    let mut out = KVec::with_capacity(n, GFP_KERNEL)?;
    for &nsid in &ids[..n] {
        out.push(nsid, GFP_KERNEL)?;
    }
    Ok(out)
}

/// The namespaces of a controller without the active namespace list (NVMe 1.0, or the
/// identify_cns quirk), as the C driver's sequential scan: each id up to NN whose Identify
/// Namespace shows capacity. Ids beyond the first [`NS_LIST_MAX`] are not looked at, so a
/// controller claiming billions cannot stall the probe.
fn allocated_namespaces(hw: &Hw<'_>, id: &IdentifyController) -> Result<KVec<u32>> {
    let last = id.nn.min(NS_LIST_MAX as u32);
    if last < id.nn {
        dev_warn!(
            hw.dev(),
            "rnvme{}: scanning namespaces 1-{last} of {}\n",
            hw.instance,
            id.nn
        );
    }
    let mut out = KVec::new();
    for nsid in 1..=last {
        let data = hw.admin_read(
            Command::identify(cns::NAMESPACE, nsid, 0),
            "Identify Namespace",
        )?;
        if IdentifyNamespace::parse(&data).is_ok_and(|n| n.ncap != 0) {
            out.push(nsid, GFP_KERNEL)?;
        }
    }
    Ok(out)
}

impl<'b> Shared<'b> {
    /// Brings the disks in line with the controller's active namespaces: removes the disks of
    /// namespaces that are gone, identifies new ones and adds a disk for each we can serve.
    /// Used at probe and by rescans (ioctl, namespace-changed events).
    pub(crate) fn scan_namespaces(&self) -> Result {
        let Some(disks) = self.disks.as_ref() else {
            return Ok(());
        };
        let mut ts = disks.scan();
        let id = &self.id;
        let inst = self.hw.instance;
        let active = active_namespaces(&self.hw, id)?;
        // Existing disks: still active, and revalidated (a format or size change applied in
        // place, a format we cannot serve removes the disk).
        let mut stale = KVec::new();
        ts.for_each_disk(|d| {
            let nsid = d.data().nsid();
            let gone = !active.contains(&nsid);
            if gone {
                dev_info!(
                    self.hw.pdev.as_ref(),
                    "rnvme{inst}n{nsid}: namespace no longer active, removing its disk\n"
                );
            }
            if gone || d.data().unusable() || !self.revalidate(&d, true) {
                d.data().set_unusable();
                // Without memory for the list the disk stays, failing I/O, until the next
                // scan.
                let _ = stale.push(nsid, GFP_KERNEL);
            }
        });
        ts.retain_disks(|ns| !stale.contains(&ns.nsid()));
        for &nsid in active.iter() {
            if ts.find_disk(|ns| ns.nsid() == nsid).is_some() {
                continue;
            }
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
                    continue;
                }
            };
            let (ids, listed) = self.namespace_ids(nsid, &nid);
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
                    continue;
                }
            };
            let meta = self.metadata(nsid, &nid);
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
            let new = Namespace::new(self.hw.pdev, id, nsid, nid, quirks, how);
            let mut ns = match new {
                Ok(ns) => ns,
                Err(why) => {
                    dev_warn!(
                        self.hw.pdev.as_ref(),
                        "rnvme{inst}: namespace {nsid} skipped: {why}\n"
                    );
                    continue;
                }
            };
            let (cap, dma) = (self.hw.cap, self.hw.dma_opt);
            let limits = ns.limits(id, self.nvm.as_ref(), cap, dma, PAGE_SHIFT as u32);
            // A hidden disk has no capacity to show (as C's).
            let (sectors, bs) = (if hidden { 0 } else { ns.sectors() }, ns.block_size());
            let zeroes = ns.deallocate_reads_zeroes();
            let read_only = ns.read_only();
            let meta_shown = ns.metadata().map(|m| (*m, ns.integrity_size() != 0));
            let disk_ids = DiskIds {
                ids,
                vid: id.vid,
                serial: id.serial,
                model: id.model,
            };
            // A namespace of a multi-controller subsystem: this disk is a hidden path of
            // the subsystem's head disk (zoned ones, and those served by passthrough only,
            // keep a disk of their own for now).
            let subsys = self.subsys.as_ref().filter(|_| !hidden && zoned.is_none());
            if let Some(m) = subsys {
                let shared = shared_namespace(nid.nmic);
                match m.head(nsid, ids, shared, disk_ids, params::io_policy()) {
                    Ok(link) => ns.set_head(link),
                    Err(_) => continue,
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
                read_only,
                data: ns,
                private,
            };
            // One namespace the block layer refuses (limits it cannot take: a block larger
            // than the transfer limit) fails that namespace, not the controller (as C's
            // `nvme_alloc_ns`); the next scan tries again. Probe fault step 14: adding the
            // disk fails.
            if let Err(e) = ts.add_disk(disk, params::inject(self.hw.dev(), 14)) {
                dev_warn!(
                    self.hw.pdev.as_ref(),
                    "rnvme{inst}: namespace {nsid} skipped: its disk was refused ({})\n",
                    e.to_errno()
                );
                continue;
            }
            // The generic device goes with the namespace's disk (dropped with it), once the
            // disk is listed, as C's order: a command through it finds the disk. A
            // namespace without one still has its disk.
            if let Some(d) = ts.find_disk(|ns| ns.nsid() == nsid) {
                let link = Arc::new(
                    NsLink {
                        ctrl: self.link.clone(),
                        ns: d.data().key(),
                    },
                    GFP_KERNEL,
                )
                .map_err(Error::from);
                match link
                    .and_then(|l| CharDev::register(fmt!("rng{inst}n{nsid}"), self.hw.dev(), l))
                {
                    Ok(dev) => d.data().set_generic(dev),
                    Err(e) => dev_warn!(
                        self.hw.dev(),
                        "rnvme{inst}n{nsid}: no generic character device ({})\n",
                        e.to_errno()
                    ),
                }
            }
            if hidden {
                continue;
            }
            if let Some(s) = sub {
                let path = PathLimits {
                    limits,
                    sectors,
                    read_only,
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
                    continue;
                }
                dev_info!(
                    self.hw.pdev.as_ref(),
                    "rnvme{s}n{nsid}: path rnvme{s}c{inst}n{nsid} ({} namespace)\n",
                    if shared_namespace(nid.nmic) {
                        "shared"
                    } else {
                        "private"
                    }
                );
            }
            dev_info!(
                self.hw.pdev.as_ref(),
                "rnvme{}n{nsid}: {} MiB, {} byte blocks{}{}{}{}\n",
                DiskPrefix(sub, inst),
                sectors >> 11,
                bs,
                if id.has_volatile_write_cache() {
                    ", volatile write cache"
                } else {
                    ""
                },
                if zeroes {
                    ", deallocated blocks read as zeroes"
                } else {
                    ""
                },
                ZonedDisplay(zoned, bs),
                MetaDisplay(meta_shown)
            );
            if read_only {
                dev_warn!(
                    self.hw.pdev.as_ref(),
                    "rnvme{inst}n{nsid}: Zone Append not supported for this zoned namespace: read-only\n"
                );
            }
        }
        Ok(())
    }

    /// Namespace `nsid`'s identifiers, as the C driver gathers them: the Namespace
    /// Identification Descriptor list (NVMe 1.3 on), then EUI64 and NGUID from Identify
    /// Namespace where the list had none. A controller that refuses the list loses only
    /// what only the list holds (the UUID).
    /// The quirks bogus_nid (identifiers not unique: only the command set is kept) and
    /// no_ns_desc_list (the list is not asked for) apply as in C.
    /// Also says whether the list was read (asked of 1.3 controllers, and of any running
    /// several command sets, as C).
    fn namespace_ids(&self, nsid: u32, nid: &IdentifyNamespace) -> (NsIds, bool) {
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
                Err(e) => dev_warn!(
                    self.hw.pdev.as_ref(),
                    "rnvme{}n{nsid}: Identify (Namespace Identification Descriptors) failed: {e}\n",
                    self.hw.instance
                ),
            }
        }
        if quirks.has(Quirks::BOGUS_NID) {
            let ids = NsIds {
                csi: ids.csi,
                csi_reported: ids.csi_reported,
                ..NsIds::default()
            };
            return (ids, listed);
        }
        ids.fill_from_identify(nid.eui64, nid.nguid, ver);
        (ids, listed)
    }

    /// Namespace `nsid`'s metadata format (`nid`: its Identify Namespace data), as C's
    /// `nvme_configure_metadata`: the guard of its protection information from the NVM
    /// Command Set Identify Namespace data where the controller has extended LBA formats
    /// (else, or if that cannot be read, a 16-bit guard).
    fn metadata(&self, nsid: u32, nid: &IdentifyNamespace) -> Metadata {
        let (ms, cns_1_0) = (nid.lbaf.ms, self.hw.quirks().has(Quirks::IDENTIFY_CNS));
        let guard = if ms != 0
            && self.id.elbas()
            && cns::supported(self.hw.regs.vs(), cns::CS_NAMESPACE, cns_1_0)
        {
            match self
                .hw
                .try_admin_read(Command::identify(cns::CS_NAMESPACE, nsid, 0))
            {
                Ok(data) => pi::guard_from_nvm_ns(&data, nid.lbaf_index),
                Err(e) => {
                    dev_warn!(
                        self.hw.dev(),
                        "rnvme{}n{nsid}: Identify Namespace (NVM) failed: {e}: 16-bit guard assumed\n",
                        self.hw.instance
                    );
                    Guard::Crc16
                }
            }
        } else {
            Guard::Crc16
        };
        Metadata::new(ms, nid.extended_lba, nid.dps, guard)
    }

    /// Identifies the namespace of disk `d` again and applies a changed format or size to
    /// the disk in place. Returns false if the disk must go: the namespace is no longer
    /// valid or its new format is one we cannot serve. A failed Identify keeps the disk as
    /// it is.
    fn revalidate(&self, d: &DiskRef<'_, 'b, NvmeBlk>, update_head: bool) -> bool {
        let ns = d.data();
        let (nsid, inst) = (ns.nsid(), self.hw.instance);
        let Ok(data) = self.hw.admin_read(
            Command::identify(cns::NAMESPACE, nsid, 0),
            "Identify Namespace",
        ) else {
            return true;
        };
        let nid = match IdentifyNamespace::parse(&data) {
            Ok(nid) => nid,
            Err(e) => {
                dev_warn!(
                    self.hw.dev(),
                    "rnvme{inst}n{nsid}: {e}: removing its disk\n"
                );
                return false;
            }
        };
        let meta = self.metadata(nsid, &nid);
        if ns.metadata().copied() != (meta.ms != 0).then_some(meta) {
            // Fixed for a disk's life, as zones.
            dev_info!(
                self.hw.dev(),
                "rnvme{inst}n{nsid}: metadata format changed: its disk is made anew\n"
            );
            return false;
        }
        if let Some(old) = ns.zoned() {
            // Zones are fixed for a disk's life: a zoned namespace whose format or zones
            // changed gets a new disk (from the scan that removes this one).
            // A failed Identify keeps the disk as it is, as for other namespaces.
            let same = ns.same_format(&nid)
                && match zns::query(&self.hw, nsid, &nid) {
                    Ok(z) => z == *old,
                    Err(ZonedError::Command(_)) => true,
                    Err(ZonedError::Unsupported(_)) => false,
                };
            if !same {
                dev_info!(
                    self.hw.dev(),
                    "rnvme{inst}n{nsid}: zoned namespace changed: its disk is made anew\n"
                );
            }
            return same;
        }
        if ns.same_format(&nid) {
            return true;
        }
        // A format the disk cannot take (blocks larger than the block layer takes, or than
        // one transfer) removes it before its limits are changed: the block layer would
        // refuse them, with a warning.
        if let Err(why) = servable(&nid, self.max_data()) {
            dev_warn!(
                self.hw.dev(),
                "rnvme{inst}n{nsid}: reformatted: {why}: removing its disk\n"
            );
            return false;
        }
        let (old_bs, old_mib) = (ns.block_size(), ns.sectors() >> 11);
        let updated = d.update(|ns| {
            ns.set_format(&nid);
            let p = self.path_limits(ns);
            (p.limits, p.sectors)
        });
        match updated {
            Ok(()) => {
                if update_head {
                    self.update_head(d);
                }
                dev_info!(
                    self.hw.dev(),
                    "rnvme{inst}n{nsid}: format changed: {old_bs} to {} byte blocks, {old_mib} to {} MiB\n",
                    ns.block_size(),
                    ns.sectors() >> 11
                );
                true
            }
            Err(e) => {
                dev_err!(
                    self.hw.dev(),
                    "rnvme{inst}n{nsid}: cannot apply its new format ({}): removing its disk\n",
                    e.to_errno()
                );
                false
            }
        }
    }

    /// What a path disk gives its head: its namespace's limits, size and write protection.
    fn path_limits(&self, ns: &Namespace<'_>) -> PathLimits {
        let (id, nvm, cap, dma) = (&self.id, self.nvm.as_ref(), self.hw.cap, self.hw.dma_opt);
        PathLimits {
            limits: ns.limits(id, nvm, cap, dma, PAGE_SHIFT as u32),
            sectors: ns.sectors(),
            read_only: ns.read_only(),
        }
    }

    /// The head follows its path's format (none for a disk of its own). It freezes the
    /// head: never inside a path's freeze, as C updates its head after the path's.
    fn update_head(&self, d: &DiskRef<'_, 'b, NvmeBlk>) {
        let ns = d.data();
        if let Some(link) = ns.head().filter(|_| !ns.unusable()) {
            link.update(self.path_limits(ns));
        }
    }

    /// The subsystem's head disks frozen (none without a subsystem), as C's
    /// `nvme_passthru_start`: bios through a head must not take another controller's path
    /// to a namespace a command here changes. A failure leaves them running, logged.
    fn freeze_heads(&self, opcode: u8) -> Option<FrozenDisks> {
        let m = self.subsys.as_ref()?;
        m.freeze_heads()
            .inspect_err(|e| {
                dev_warn!(
                    self.hw.dev(),
                    "rnvme{}: head disks not frozen for admin command {opcode:#04x} ({})\n",
                    self.hw.instance,
                    e.to_errno()
                )
            })
            .ok()
    }

    /// Runs admin command `opcode` from user space through `f` as its effects (Commands
    /// Supported and Effects, and those the spec makes mandatory) require, as the C
    /// driver's `nvme_passthru_start`/`end`: I/O to every disk frozen around a command
    /// that must run alone (Format NVM, Sanitize), and the disks revalidated before it
    /// runs again; the namespaces rescanned after one that changes them.
    pub(crate) fn with_effects<R>(&self, opcode: u8, f: impl FnOnce() -> R) -> R {
        let fx = effects::admin_effects(self.effects.as_deref(), opcode);
        let r = if effects::needs_freeze(fx) {
            match self.disks.as_ref() {
                Some(disks) => {
                    // The scan lock across the command, as C's `nvme_passthru_start`: no
                    // disk comes or goes while they are frozen.
                    let ts = disks.scan();
                    // Allocations do no I/O until every freeze is gone: each freeze guard
                    // restores the task's flags as it found them, and the heads' guard is
                    // dropped before the disks'.
                    let _noio = MemallocNoio::save();
                    // The subsystem's heads first, then this controller's disks, as C's
                    // `nvme_passthru_start`.
                    let heads = self.freeze_heads(opcode);
                    let frozen = ts.freeze_disks();
                    let r = f();
                    self.hw.admin.faults.delay_effects();
                    // The heads go on before the revalidation, as C unfreezes them before
                    // its rescan: their bios wait at the paths, still frozen, and a head
                    // takes its path's new limits out of every path's freeze.
                    drop(heads);
                    let rescan = effects::needs_rescan(fx);
                    if rescan {
                        // No request may be built in the old format: revalidate before
                        // unfreezing. Disks that must go fail I/O until the scan below.
                        ts.for_each_disk(|d| {
                            if !self.revalidate(&d, false) {
                                d.data().set_unusable();
                            }
                        });
                    }
                    drop(frozen);
                    if rescan {
                        ts.for_each_disk(|d| self.update_head(&d));
                    }
                    r
                }
                None => f(),
            }
        } else {
            f()
        };
        if effects::needs_rescan(fx) {
            self.rescan_after(format_args!("admin command {opcode:#04x}"));
        }
        r
    }

    /// Rescans the namespaces after `why`; failures are logged.
    pub(crate) fn rescan_after(&self, why: core::fmt::Arguments<'_>) {
        if let Err(e) = self.scan_namespaces() {
            dev_warn!(
                self.hw.dev(),
                "rnvme{}: rescan after {why} failed: {}\n",
                self.hw.instance,
                e.to_errno()
            );
        }
    }

    /// `NVME_IOCTL_RESCAN`.
    pub(crate) fn rescan(&self) -> Result {
        if self.hw.state() != State::Live {
            return Err(EBUSY);
        }
        self.scan_namespaces()
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
