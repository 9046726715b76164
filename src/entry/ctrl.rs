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
    ioctl::CtrlChar,
    kernel_ext::{
        chardev::CharDev,
        dma as kdma, hwmon,
        irq::IrqSet,
        lease::{Grant, Lease},
        pci_save_state, pcie_print_link_status,
    },
    params,
    queue::Queue,
    queues::QueueIrq,
    queues::Queues,
    regs::{Regs, BAR0_MIN},
    shared::CtrlLink,
    shared::{QuirkList, Shared},
    spec::{
        quirks::Quirks,
        regs::{self as r, Cap},
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
            _: {
                params::inject(bdev.as_ref(), 5)?;
                params::probe_delay();
            },
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
        let aq = Queue::new(pdev.as_ref(), regs.clone(), 0, depth, None, None)?;
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
        // Before the revoke: a scan inside its read section may wait for a head's read
        // that waits for a reset this controller would never run once revoked.
        self.hw.status.set_leaving();
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
