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
    admin::CmdError,
    hw::Hw,
    ioq::NvmeBlk,
    kernel_ext::{
        block::{bio::FrozenDisks, mq::DiskRef},
        sync::MemallocNoio,
    },
    mpath::PathLimits,
    ns::{servable, Namespace},
    shared::Shared,
    spec::{
        command::{cns, Command},
        effects,
        identify::{self, IdentifyController, IdentifyNamespace, NS_LIST_MAX},
        pi::{self, Guard, Metadata},
        quirks::Quirks,
    },
    state::State,
    zns::{self, ZonedError},
};
use kernel::{page::PAGE_SHIFT, prelude::*};

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
        let mut new = KVec::new();
        for &nsid in active.iter() {
            if ts.find_disk(|ns| ns.nsid() == nsid).is_none() {
                new.push(nsid, GFP_KERNEL)?;
            }
        }
        // Each new namespace identified and its disk added side by side (as C's
        // asynchronous scan: most of the time is the device's answers and each disk's
        // partition read), then listed in namespace order; what follows a disk's addition
        // (its generic device, its path of a head, its log line) goes in that order here.
        if new.is_empty() {
            return Ok(());
        }
        let found = ts.add_disks(new.len(), |i, adder| self.add_namespace(new[i], adder))?;
        let mut failed = Ok(());
        for (outcome, added) in found {
            match (outcome, added) {
                (Ok(Some(f)), Some(Ok(()))) => self.publish_namespace(&mut ts, f),
                (Ok(Some(f)), Some(Err(e))) => dev_warn!(
                    self.hw.pdev.as_ref(),
                    "rnvme{inst}: namespace {} skipped: its disk was refused ({})\n",
                    f.nsid,
                    e.to_errno()
                ),
                (Ok(_), _) => {}
                // The first command that failed fails the scan, once every other
                // namespace is in place.
                (Err(e), _) => {
                    if failed.is_ok() {
                        failed = Err(e);
                    }
                }
            }
        }
        failed
    }

    /// Namespace `nsid`'s metadata format (`nid`: its Identify Namespace data), as C's
    /// `nvme_configure_metadata`: the guard of its protection information from the NVM
    /// Command Set Identify Namespace data where the controller has extended LBA formats
    /// (else, or if that cannot be read, a 16-bit guard).
    pub(crate) fn metadata(&self, nsid: u32, nid: &IdentifyNamespace) -> Result<Metadata> {
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
                // Refused, or lost itself (its timeout resets the controller).
                Err(e @ (CmdError::Status(_) | CmdError::Timeout)) => {
                    dev_warn!(
                        self.hw.dev(),
                        "rnvme{}n{nsid}: Identify Namespace (NVM) failed: {e}: 16-bit guard assumed\n",
                        self.hw.instance
                    );
                    Guard::Crc16
                }
                // Taken back by a reset for another command, or the controller gone: the
                // guard is not known.
                Err(e) => return Err(e.into()),
            }
        } else {
            Guard::Crc16
        };
        Ok(Metadata::new(ms, nid.extended_lba, nid.dps, guard))
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
        // A lost command keeps the disk as it is, as a failed Identify does.
        let Ok(meta) = self.metadata(nsid, &nid) else {
            return true;
        };
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
