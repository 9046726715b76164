// SPDX-License-Identifier: GPL-2.0

//! The controller: bring-up, identify, and teardown as the NVMe Base Spec (3.5, 3.6) says.
//!
//! Bring-up: disable (wait CSTS.RDY = 0), program the admin queue (AQA/ASQ/ACQ), enable with
//! the host page size (CC.MPS within CAP.MPSMIN..MPSMAX) and round robin arbitration, wait
//! CSTS.RDY = 1 within CAP.TO, Identify, then the I/O queues (`queues.rs`) and the disks.
//! [`Controller::new`] states that order in one `try_pin_init!`. Teardown, in
//! [`Controller::unbind`]: the disks go, the I/O queues are deleted, then a normal shutdown
//! (CC.SHN, wait CSTS.SHST complete) and disable, so the device can no longer touch memory
//! that dropping the controller then frees.

use crate::{
    admin::{AdminQueue, ADMIN_DEPTH},
    aen::Events,
    fault::{Faults, FaultsRef},
    hw::{self, Enabled, Hw},
    hwmon::Sensors,
    instance::Instance,
    ioctl::{CtrlChar, CtrlLink, NsKey},
    ioq::NvmeBlk,
    ioq::QueueIrq,
    kernel_ext::{
        block::mq::{DiskArc, Disks, TagSet},
        chardev::CharDev,
        dma as kdma, hwmon,
        irq::{irq_type_name, IrqSet},
        lease::{Grant, Lease},
        pci_save_state, pcie_print_link_status,
    },
    mpath::Membership,
    ns, params,
    queue::Queue,
    queues::Queues,
    regs::{Regs, BAR0_MIN},
    reset,
    scan::active_namespaces,
    spec::{
        command::{cns, Command},
        effects::{EffectsLog, LOG_CMD_EFFECTS, LOG_CMD_EFFECTS_SIZE, LPA_CMD_EFFECTS},
        identify::{IdentifyController, IdentifyControllerNvm},
        pi::Metadata,
        quirks::Quirks,
        regs::{self as r, Cap},
        subsys::{multi_controller, Nqn},
    },
    stats::DebugDir,
};
use kernel::{
    device::{Bound, Core},
    dma::{self, DmaMask},
    page::PAGE_SHIFT,
    pci,
    prelude::*,
    str::CString,
    sync::Arc,
    types::ForLt,
};

/// A controller's state that user space reaches (ioctls, sysfs) through its [`CtrlLink`]:
/// the disks (added and removed by rescans), the queues, the identify data, the hardware.
///
/// Its disks are removed (by [`Controller::unbind`], or a probe whose scan failed) before it
/// is dropped: removal waits for their I/O, which needs the queues. The fields are then
/// dropped in declaration order: the queues stop the controller and free their interrupt
/// handlers, which look requests up in the tag set, before the tag set goes. (The tag set is
/// built last in [`Shared::new`], after which nothing fails, so a failed construction never
/// drops it before the queues.)
#[pin_data]
pub(crate) struct Shared<'b> {
    pub(crate) queues: Queues<'b>,
    /// The disks (`None`: no I/O queues). Their scan lock is held by scans, Format NVM and
    /// system sleep while they wait for I/O; lookups (passthrough, ioctls, a dead
    /// controller's marking) take no lock. What ends I/O (timeouts, resets, removal's
    /// give-up, the PCI core's holds) uses [`Self::tagset`].
    pub(crate) disks: Option<Pin<KBox<Disks<'b, NvmeBlk>>>>,
    /// The tag set over the I/O queues (`None`: none), never changed after probe: error
    /// recovery quiesces and cancels through it without a lock.
    pub(crate) tagset: Option<Arc<TagSet<'b, NvmeBlk>>>,
    pub(crate) hw: Arc<Hw<'b>>,
    pub(crate) id: IdentifyController,
    /// The NVM subsystem, when its namespaces get multipath head disks (`None`: a
    /// single-controller subsystem, or `multipath=0`).
    pub(crate) subsys: Option<Membership>,
    /// The Commands Supported and Effects log, if the controller has it.
    pub(crate) effects: Option<KBox<EffectsLog>>,
    /// NVM command set limits (Write Zeroes, Dataset Management), if the controller says.
    pub(crate) nvm: Option<IdentifyControllerNvm>,
    /// Given to each disk, for its ioctls.
    pub(crate) link: Arc<CtrlLink>,
}

/// One bound NVMe controller: the PCI driver's device data.
///
/// [`Controller::new`] builds it in dependency order; the fields are declared in the reverse
/// order, which is the order they are dropped in (after a failed probe too, where pin-init
/// drops what was built in reverse). [`Controller::unbind`] does the teardown that needs the
/// device; the drops then only free (the guards among them, `grant`, `events`, the
/// queues and `enabled`, find their work done and only stop what a failed probe left
/// running).
#[pin_data]
pub(crate) struct Controller<'b> {
    /// The temperatures in hwmon (`None`: the SMART log could not be read).
    hwmon: Option<hwmon::Registration<Sensors>>,
    /// `/dev/rnvme<N>`.
    chardev: Pin<KBox<CharDev<CtrlChar>>>,
    /// Counters of every queue and the fault knobs, in debugfs.
    debugfs: DebugDir,
    pub(crate) events: Events,
    /// `shared` lent to the link; revoked when dropped, before `shared` goes.
    grant: Grant<ForLt!(Shared<'_>)>,
    #[pin]
    pub(crate) shared: Shared<'b>,
    enabled: Enabled<'b>,
    /// The admin queue's interrupt until `shared`'s queues take it over (`None` then, or
    /// if the platform gives no interrupt: the admin queue polls).
    admin_irq: Option<IrqSet<'b, QueueIrq<'b>>>,
    pub(crate) hw: Arc<Hw<'b>>,
    link: Arc<CtrlLink>,
    /// Faults tests inject, through debugfs.
    faults: FaultsRef,
    pub(crate) pdev: &'b pci::Device<Bound>,
    /// The quirks of the controller's PCI ID (those of its identity join them in `hw`).
    quirks: Quirks,
    instance: Instance,
}

impl<'b> Controller<'b> {
    /// Probes one controller: everything from PCI set-up to the disks. Probe fault steps
    /// ([`params::inject`]) mark the points a test fails it at.
    pub(crate) fn new<'a>(
        pdev: &'b pci::Device<Core<'a>>,
    ) -> impl PinInit<Self, Error> + use<'b, 'a> {
        let bdev: &'b pci::Device<Bound> = pdev;
        try_pin_init!(Self {
            instance: Instance::alloc()?,
            quirks: Self::pci_quirks(bdev)?,
            _: { Self::setup_pci(pdev, *quirks)? },
            pdev: bdev,
            faults: Faults::new()?,
            // Steps 1 (BAR mapped) and 2 (admin queue allocated).
            hw: Self::map(bdev, faults, instance.id(), *quirks)?,
            link: Arc::pin_init(Lease::new(), GFP_KERNEL)?,
            // Steps 3 (vector allocated) and 4 (handler registered).
            admin_irq: Self::admin_irq(hw)?,
            enabled: Enabled::new(hw)?,
            _: { params::inject(bdev.as_ref(), 5)? },
            // Steps 6 to 11; the queues take the admin queue's vector over.
            shared <- Shared::new(hw, faults, link, admin_irq.take()),
            _: { params::inject(bdev.as_ref(), 12)? },
            // SAFETY: `shared` is pinned and dropped after `grant` (declaration order, and
            // the reverse of this order if the probe fails).
            grant: unsafe { Grant::new(link, &*shared) },
            events: Events::start(hw, link, shared.id.oaes)?,
            debugfs: Self::debugfs(instance.id(), hw, &shared.queues, faults)?,
            chardev: CharDev::register(
                fmt!("rnvme{}", instance.id()),
                bdev.as_ref(),
                link.clone(),
            )?,
            hwmon: Sensors::register(bdev, hw, link, &shared.id),
            // Step 14 (a disk's `device_add_disk` fails) is in the scan.
            _: {
                let scanned = shared
                    .scan_namespaces()
                    .and_then(|()| params::inject(bdev.as_ref(), 13));
                if scanned.is_err() {
                    // User space may reach the controller already: as unbind, stop its
                    // passthrough commands before the grant's revocation waits for them,
                    // and remove the disks while the queues serve them.
                    hw.admin.close();
                    shared.remove_disks();
                }
                scanned?;
                // For the slot reset of PCI error recovery, which loses it (C's
                // `nvme_pci_enable`).
                pci_save_state(bdev);
            },
        })
    }

    /// The quirks of the device's PCI ID and the `quirks` parameter. A controller that
    /// needs a quirk rnvme does not implement is refused, for the C driver to take.
    fn pci_quirks(pdev: &pci::Device<Bound>) -> Result<Quirks> {
        let (vendor, device) = (pdev.vendor_id().as_raw(), pdev.device_id());
        let quirks = params::pci_quirks(vendor, device);
        let refused = Quirks(quirks.0 & Quirks::REFUSED.0);
        if refused != Quirks::empty() {
            dev_err!(
                pdev.as_ref(),
                "{vendor:04x}:{device:04x} needs quirks rnvme does not implement ({}): not binding; the nvme driver serves it\n",
                QuirkList(refused)
            );
            return Err(ENODEV);
        }
        if quirks != Quirks::empty() {
            let ignored = Quirks(quirks.0 & Quirks::IGNORED.0);
            dev_info!(
                pdev.as_ref(),
                "{vendor:04x}:{device:04x}: quirks {} (without effect in rnvme: {})\n",
                QuirkList(quirks),
                QuirkList(ignored)
            );
        }
        Ok(quirks)
    }

    /// Enables the function, its bus mastering and DMA.
    fn setup_pci(pdev: &pci::Device<Core<'_>>, quirks: Quirks) -> Result {
        pdev.enable_device_mem()?;
        pdev.set_master();
        // The link's speed and width, and whether a slot or bridge holds it below what the
        // device can do (the C driver does not say).
        pcie_print_link_status(pdev);
        // 64-bit DMA, else 48 bits, as the C driver: some platforms offer no more, and some
        // controllers (quirk dma_address_bits_48) address no more.
        // SAFETY: Called once in probe, before any DMA allocation or mapping of this device.
        unsafe {
            if quirks.has(Quirks::DMA_ADDRESS_BITS_48) {
                dma::Device::dma_set_mask_and_coherent(pdev, DmaMask::new::<48>())?
            } else {
                dma::Device::dma_set_mask_and_coherent(pdev, DmaMask::new::<64>()).or_else(
                    |_| dma::Device::dma_set_mask_and_coherent(pdev, DmaMask::new::<48>()),
                )?
            }
        };
        // Bounce buffering must keep each buffer's offset in its page: PRP entries after
        // the first address whole pages.
        // SAFETY: As above.
        unsafe { kdma::set_min_align_mask(pdev.as_ref(), (1 << PAGE_SHIFT) - 1)? };
        // PRPs have no segment size limit: let the DMA layer map segments as long as the
        // block layer builds them (the default is 64 KiB).
        // SAFETY: As above.
        unsafe { dma::Device::dma_set_max_seg_size(pdev, u32::MAX) };
        Ok(())
    }

    /// Maps the registers, checks CAP, stops whatever ran the controller before us (firmware,
    /// a previous driver) and allocates the admin queue (polled until it has a vector).
    fn map(
        pdev: &'b pci::Device<Bound>,
        faults: &FaultsRef,
        instance: u32,
        quirks: Quirks,
    ) -> Result<Arc<Hw<'b>>> {
        let bar = pdev.iomap_region_sized::<BAR0_MIN>(0, c"rnvme")?;
        params::inject(pdev.as_ref(), 1)?;
        let regs = Arc::new(Regs::new(bar), GFP_KERNEL)?;
        let cap = Self::check_cap(pdev, &regs)?;
        hw::disable(pdev.as_ref(), &regs, cap, hw::ready_delay_ms(quirks))?;
        let depth = ADMIN_DEPTH.min(u16::try_from(cap.mqes()).unwrap_or(u16::MAX));
        let aq = Queue::new(pdev.as_ref(), regs.clone(), 0, depth, None)?;
        params::inject(pdev.as_ref(), 2)?;
        let admin = AdminQueue::new(pdev, aq, depth, true, faults.clone())?;
        Hw::new(pdev, regs, admin, cap, instance, quirks)
    }

    /// One vector for the admin queue, and its handler, before the controller is enabled
    /// (as C's `nvme_pci_enable`: the device sees the vector its admin completion queue
    /// signals from the start). MSI-X first, then MSI, then INTx; `None` (polling) if the
    /// platform gives no interrupt at all.
    fn admin_irq(hw: &Hw<'b>) -> Result<Option<IrqSet<'b, QueueIrq<'b>>>> {
        let irqs = IrqSet::alloc(hw.pdev, 1, 1, None, hw.irq_types()).ok();
        params::inject(hw.dev(), 3)?;
        let Some(mut irqs) = irqs else {
            return Ok(None);
        };
        let name = CString::try_from_fmt(fmt!("rnvme{}q0", hw.instance))?;
        irqs.request(0, name, QueueIrq::Admin(hw.admin.clone()))?;
        hw.admin.set_polled(false);
        params::inject(hw.dev(), 4)?;
        Ok(Some(irqs))
    }

    /// The debugfs directory: one file per queue, and the fault knobs.
    fn debugfs(
        instance: u32,
        hw: &Hw<'_>,
        queues: &Queues<'_>,
        faults: &FaultsRef,
    ) -> Result<DebugDir> {
        let mut dir = DebugDir::new(instance)?;
        dir.add_queue(0, hw.admin.queue().stats.clone())?;
        queues.add_debugfs(&mut dir)?;
        dir.add_faults(faults.clone())?;
        Ok(dir)
    }

    /// The device is being unbound (removal, `rmmod`, sysfs unbind): user space is cut
    /// off, the disks removed, the queues deleted and the controller shut down, as C's
    /// `nvme_remove`. What is left is freed when the data is dropped.
    pub(crate) fn unbind(&self) {
        // No new passthrough command and none waiting on the device; then no running or
        // new ioctl, sysfs read or rescan, and no event work.
        self.hw.admin.close();
        self.grant.revoke();
        self.events.close();
        self.shared.remove_disks();
        self.shared.queues.delete_on_device();
        self.hw.shutdown();
        // Buffers of commands given up on while the controller ran: it is stopped now.
        self.hw.admin.unpark();
        dev_info!(
            self.pdev.as_ref(),
            "rnvme{}: shut down\n",
            self.instance.id()
        );
    }

    /// Reads and sanity-checks CAP.
    fn check_cap(pdev: &pci::Device<Bound>, regs: &Regs<'_>) -> Result<Cap> {
        let csts = regs.csts();
        if r::device_gone(csts) {
            dev_err!(
                pdev.as_ref(),
                "registers read as all ones: device not responding\n"
            );
            return Err(ENODEV);
        }
        let cap = regs.cap();
        if let Err(e) = cap.validate(PAGE_SHIFT as u32) {
            dev_err!(
                pdev.as_ref(),
                "unusable controller: {e} (CAP {:#x})\n",
                cap.0
            );
            return Err(ENODEV);
        }
        if regs.doorbells(0).is_err() {
            dev_err!(
                pdev.as_ref(),
                "BAR0 of {} bytes has no room for doorbells\n",
                regs.len()
            );
            return Err(ENODEV);
        }
        Ok(cap)
    }
}

impl<'b> Shared<'b> {
    /// Identifies the controller (step 6), sets up its queues (7 to 10, taking the admin
    /// queue's interrupt `irq` over) and the tag set over them (11).
    fn new<'a>(
        hw: &'a Arc<Hw<'b>>,
        faults: &'a FaultsRef,
        link: &'a Arc<CtrlLink>,
        irq: Option<IrqSet<'b, QueueIrq<'b>>>,
    ) -> impl PinInit<Self, Error> + use<'a, 'b> {
        try_pin_init!(Self {
            hw: hw.clone(),
            id: identify(hw, &irq)?,
            subsys: join_subsystem(hw, id)?,
            effects: (id.lpa & LPA_CMD_EFFECTS != 0)
                .then(|| read_effects(hw))
                .flatten(),
            nvm: read_nvm(hw),
            _: { params::inject(hw.dev(), 6)? },
            queues: Queues::new(hw, id, faults, irq)?,
            tagset: queues.tag_set()?,
            disks: tagset
                .clone()
                .map(|ts| KBox::pin_init(Disks::new(ts), GFP_KERNEL))
                .transpose()?,
            link: link.clone(),
        })
    }

    /// Removes the disks (waiting for their I/O), at unbind or after a failed scan. A
    /// controller the PCI core holds (unbound between a frozen link and its slot reset) has
    /// its queues quiesced with requests parked: those fail first.
    fn remove_disks(&self) {
        if let Some(ts) = self.tagset.as_ref() {
            if self.hw.is_held() {
                reset::give_up(&ts.handle(), "removed while held");
            }
        }
        if let Some(disks) = self.disks.as_ref() {
            disks.scan().remove_disks();
        }
    }

    /// Resets the controller (keeping its disks), as an I/O timeout's second stage does.
    /// Takes no lock a task waiting for I/O may hold: the reset is what ends that I/O.
    pub(crate) fn reset(&self, why: &str) -> Result {
        match self.tagset.as_ref() {
            Some(ts) => reset::reset(&ts.handle(), why),
            None => {
                // No I/O queues to bring back: stopping the controller is all we can do.
                let _ = self.hw.disable();
                Err(ENODEV)
            }
        }
    }

    /// Starts the reset an admin timeout asked for, unless the timeout of an I/O it stopped
    /// (or a hold, or a give-up) started it already.
    pub(crate) fn reset_pending(&self, why: &str) -> Result {
        match self.tagset.as_ref() {
            Some(ts) => reset::reset_pending(&ts.handle(), why),
            None => self.reset(why),
        }
    }

    /// Most data one passthrough command may move.
    pub(crate) fn max_data(&self) -> u32 {
        ns::max_transfer(&self.id, self.hw.cap, self.hw.dma_opt)
    }

    /// A counted reference to the disk of namespace `key`, if it has one (C's
    /// `nvme_find_get_ns`), without waiting for a scan.
    pub(crate) fn get_disk(&self, key: NsKey) -> Option<DiskArc<'b, NvmeBlk>> {
        self.disks.as_ref()?.get_disk(|ns| key.matches(ns.key()))
    }

    /// log2 of namespace `key`'s block size and its metadata format, if it has a disk.
    pub(crate) fn ns_format(&self, key: NsKey) -> Option<(u32, Option<Metadata>)> {
        self.disks.as_ref()?.with_disk(
            |ns| key.matches(ns.key()),
            |d| (d.data().lba_shift(), d.data().metadata().copied()),
        )
    }

    /// Metadata bytes per block of namespace `key`'s metadata buffers (0: none), if it has
    /// a disk.
    pub(crate) fn integrity_size(&self, key: NsKey) -> Option<u8> {
        self.disks
            .as_ref()?
            .with_disk(|ns| key.matches(ns.key()), |d| d.data().integrity_size())
    }
}

/// Identify Controller, and the settings that follow from it; logs one line per controller.
fn identify(hw: &Hw<'_>, irq: &Option<IrqSet<'_, QueueIrq<'_>>>) -> Result<IdentifyController> {
    let id = hw.identify_controller()?;
    // As the C driver: the quirks of the model and firmware join those of the PCI ID (and
    // the parameter cannot take them away).
    let by_identity = Quirks::for_identity(id.vid, id.model.bytes(), id.firmware.bytes());
    if by_identity != Quirks::empty() {
        dev_info!(
            hw.dev(),
            "rnvme{}: quirks of \"{}\" firmware \"{}\": {}\n",
            hw.instance,
            id.model,
            id.firmware,
            QuirkList(by_identity)
        );
        hw.add_quirks(by_identity);
    }
    let n = active_namespaces(hw, &id)?.len();
    let (maj, min, ter) = r::version(hw.regs.vs());
    let mdts_kib = id.max_transfer_bytes(hw.cap).map(|b| b / 1024);
    dev_info!(
        hw.dev(),
        "rnvme{}: model \"{}\" serial \"{}\" firmware \"{}\" NVMe {}.{}.{} namespaces {} mdts {} irq {}\n",
        hw.instance,
        id.model,
        id.serial,
        id.firmware,
        maj,
        min,
        ter,
        n,
        MdtsDisplay(mdts_kib),
        irq.as_ref().map_or("polled", |i| irq_type_name(i.kind()))
    );
    hw.set_abort_limit(id.acl);
    hw.set_shutdown_timeout(&id);
    hw.configure_host_options(&id);
    Ok(id)
}

/// Joins the controller's NVM subsystem if its namespaces get head disks: when it says the
/// subsystem may have several controllers (CMIC), as C's native multipath, unless
/// `multipath=0`.
fn join_subsystem(hw: &Hw<'_>, id: &IdentifyController) -> Result<Option<Membership>> {
    if !multi_controller(id.cmic) || !params::multipath() {
        return Ok(None);
    }
    let (nqn, missing) = Nqn::of(id, hw.quirks().has(Quirks::IGNORE_DEV_SUBNQN));
    if missing {
        dev_warn!(
            hw.dev(),
            "rnvme{}: missing or invalid SUBNQN field\n",
            hw.instance
        );
    }
    let m = Membership::join(nqn, hw.instance, id.cntlid, hw.status.clone())?;
    dev_info!(
        hw.dev(),
        "rnvme{}: subsystem rnvme{} ({nqn}), controller id {}, multipath policy {}\n",
        hw.instance,
        m.instance,
        id.cntlid,
        params::io_policy().name()
    );
    Ok(Some(m))
}

/// The Commands Supported and Effects log (admin and NVM command set halves); `None` (the
/// mandatory effects only, no I/O command known to be supported) if it cannot be read.
fn read_effects(hw: &Hw<'_>) -> Option<KBox<EffectsLog>> {
    let dwords = (LOG_CMD_EFFECTS_SIZE / 4) as u32;
    let data = hw
        .admin_read(
            Command::get_log_page(LOG_CMD_EFFECTS, 0xffff_ffff, dwords, 0, 0),
            "Get Log Page (Commands Supported and Effects)",
        )
        .ok()?;
    KBox::new(EffectsLog::parse(&data)?, GFP_KERNEL).ok()
}

/// The NVM command set's Identify Controller data. As the C driver: asked of every
/// controller whose version knows CNS 06h (1.2 on), and refused by those that predate it
/// (then only MDTS limits Write Zeroes and Dataset Management).
fn read_nvm(hw: &Hw<'_>) -> Option<IdentifyControllerNvm> {
    let cns_1_0 = hw.quirks().has(Quirks::IDENTIFY_CNS);
    if !cns::supported(hw.regs.vs(), cns::CS_CONTROLLER, cns_1_0) {
        return None;
    }
    hw.try_admin_read(Command::identify(cns::CS_CONTROLLER, 0, 0))
        .ok()
        .and_then(|data| IdentifyControllerNvm::parse(&data).ok())
}

/// Quirk names for the log, comma separated.
struct QuirkList(Quirks);

impl kernel::fmt::Display for QuirkList {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        if self.0 == Quirks::empty() {
            return f.write_str("none");
        }
        for (i, n) in self.0.names().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(n)?;
        }
        Ok(())
    }
}

/// MDTS for the log: "none" or a size in KiB.
struct MdtsDisplay(Option<u64>);

impl kernel::fmt::Display for MdtsDisplay {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        match self.0 {
            None => write!(f, "none"),
            Some(k) => write!(f, "{k}KiB"),
        }
    }
}
