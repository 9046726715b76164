// SPDX-License-Identifier: GPL-2.0

//! The controller: bring-up, identify, and teardown as the NVMe Base Spec (3.5, 3.6) says.
//!
//! Bring-up: disable (wait CSTS.RDY = 0), program the admin queue (AQA/ASQ/ACQ), enable with
//! the host page size (CC.MPS within CAP.MPSMIN..MPSMAX) and round robin arbitration, wait
//! CSTS.RDY = 1 within CAP.TO, then Identify. Teardown: normal shutdown (CC.SHN, wait
//! CSTS.SHST complete), then disable, so the device can no longer touch memory we free.

use crate::{
    admin::{AdminQueue, ADMIN_DEPTH},
    aen::AsyncEvents,
    blk::{IoQueues, IoSet, NvmeBlk},
    fault::Faults,
    hw::{self, Hw},
    ioctl::{CtrlChar, CtrlLink},
    ioq::{self, IoQueue, QueueIrq},
    kernel_ext::{
        block::mq::TagSet,
        chardev::CharDev,
        dma as kdma,
        irq::{irq_type_name, IrqSet},
        lease::Lease,
        pci_save_state,
    },
    ns, params,
    queue::{Queue, ShadowDoorbells},
    regs::{Regs, BAR0_MIN},
    reset,
    scan::active_namespaces,
    spec::{
        command::{cns, Command},
        effects::{AdminEffects, LOG_CMD_EFFECTS, LOG_CMD_EFFECTS_SIZE, LPA_CMD_EFFECTS},
        identify::{IdentifyController, IdentifyControllerNvm},
        regs::{self as r, Cap},
    },
    stats::{DebugDir, QueueStats},
};
use kernel::{
    device::{Bound, Core},
    dma::{self, DmaMask},
    new_mutex,
    page::PAGE_SHIFT,
    pci::{self, IrqType},
    prelude::*,
    str::CString,
    sync::{
        atomic::{Atomic, Full, Relaxed},
        Arc, Mutex,
    },
    time::msecs_to_jiffies,
};

/// Controller numbers in use (`/dev/rnvme<N>`, `rnvme<N>` in logs), one bit each.
static INSTANCES: Atomic<u64> = Atomic::new(0);

/// A controller number, returned to the pool when dropped.
pub(crate) struct Instance(u32);

impl Instance {
    fn alloc() -> Result<Self> {
        loop {
            let cur = INSTANCES.load(Relaxed);
            let free = (!cur).trailing_zeros();
            if free >= 64 {
                return Err(ENOSPC);
            }
            if INSTANCES.cmpxchg(cur, cur | (1 << free), Full).is_ok() {
                return Ok(Instance(free));
            }
        }
    }

    pub(crate) fn id(&self) -> u32 {
        self.0
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let mut cur = INSTANCES.load(Relaxed);
        while let Err(now) = INSTANCES.cmpxchg(cur, cur & !(1 << self.0), Full) {
            cur = now;
        }
    }
}

/// A controller's state that user space reaches (ioctls, sysfs) through its [`CtrlLink`]:
/// the disks (added and removed by rescans), the identify data, the hardware.
#[pin_data]
pub(crate) struct Shared<'b> {
    pub(crate) hw: Arc<Hw<'b>>,
    pub(crate) id: IdentifyController,
    /// The admin half of the Commands Supported and Effects log, if the controller has it.
    pub(crate) effects: Option<KBox<AdminEffects>>,
    /// NVM command set limits (Write Zeroes, Dataset Management), if the controller says.
    pub(crate) nvm: Option<IdentifyControllerNvm>,
    /// I/O queues with interrupts, and polled ones.
    pub(crate) io_queues: u16,
    pub(crate) poll_queues: u16,
    /// The tag set and its disks (`None`: no I/O queues).
    #[pin]
    pub(crate) disks: Mutex<Option<TagSet<'b, NvmeBlk>>>,
    /// Given to each disk, for its ioctls.
    pub(crate) link: Arc<CtrlLink>,
}

/// One bound NVMe controller: the PCI driver's device data.
///
/// [`Drop`] removes the character device, revokes the link (waiting for running ioctls),
/// removes the disks and shuts the controller down; then the interrupt handlers go, the tag
/// set, the queues they reference, and the BAR.
pub(crate) struct Controller<'b> {
    chardev: Option<Pin<KBox<CharDev<CtrlChar>>>>,
    link: Arc<CtrlLink>,
    pub(crate) events: Option<Arc<AsyncEvents>>,
    /// Counters of every queue, in debugfs.
    debugfs: Option<DebugDir>,
    /// Faults tests inject, through debugfs.
    faults: Arc<Faults>,
    queue_stats: KVec<(u16, Arc<QueueStats>)>,
    irqs: Option<IrqSet<'b, QueueIrq<'b>>>,
    /// Until `shared` is built.
    pub(crate) tagset: Option<TagSet<'b, NvmeBlk>>,
    pub(crate) shared: Option<Arc<Shared<'b>>>,
    /// I/O queues created on the device (ids 1..=io_queues), deleted on teardown.
    io_queues: u16,
    nr_io: u16,
    nr_poll: u16,
    pub(crate) hw: Arc<Hw<'b>>,
    pub(crate) pdev: &'b pci::Device<Bound>,
    instance: Instance,
    id: Option<IdentifyController>,
    effects: Option<KBox<AdminEffects>>,
    nvm: Option<IdentifyControllerNvm>,
}

impl<'b> Controller<'b> {
    /// Probes one controller: everything from PCI set-up to identify.
    pub(crate) fn probe(pdev: &'b pci::Device<Core<'_>>) -> Result<Self> {
        let instance = Instance::alloc()?;
        pdev.enable_device_mem()?;
        pdev.set_master();
        // 64-bit DMA, else 48 bits, as the C driver: some platforms offer no more.
        // SAFETY: Called once in probe, before any DMA allocation or mapping of this device.
        unsafe {
            dma::Device::dma_set_mask_and_coherent(pdev, DmaMask::new::<64>())
                .or_else(|_| dma::Device::dma_set_mask_and_coherent(pdev, DmaMask::new::<48>()))?
        };
        // Bounce buffering must keep each buffer's offset in its page: PRP entries after
        // the first address whole pages.
        // SAFETY: As above.
        unsafe { kdma::set_min_align_mask(pdev.as_ref(), (1 << PAGE_SHIFT) - 1)? };
        // PRPs have no segment size limit: let the DMA layer map segments as long as the
        // block layer builds them (the default is 64 KiB).
        // SAFETY: As above.
        unsafe { dma::Device::dma_set_max_seg_size(pdev, u32::MAX) };

        let bdev: &'b pci::Device<Bound> = pdev;
        let bar = bdev.iomap_region_sized::<BAR0_MIN>(0, c"rnvme")?;
        params::inject(bdev.as_ref(), 1)?;
        let regs = Arc::new(Regs::new(bar), GFP_KERNEL)?;
        let cap = Self::check_cap(bdev, &regs)?;
        // The controller may still run from firmware or a previous driver.
        hw::disable(bdev.as_ref(), &regs, cap)?;

        let depth = ADMIN_DEPTH.min(u16::try_from(cap.mqes()).unwrap_or(u16::MAX));
        let aq = Queue::new(bdev.as_ref(), regs.clone(), 0, depth, None)?;
        params::inject(bdev.as_ref(), 2)?;

        // One vector for the admin queue for now; MSI-X first, then MSI, then INTx, then
        // polling if the platform gives us no interrupt at all.
        let irqs = IrqSet::alloc(bdev, 1, 1, None).ok();
        let faults = Faults::new()?;
        let admin = AdminQueue::new(bdev, aq, irqs.is_none(), faults.clone())?;
        let hw = Hw::new(bdev, regs, admin, cap, instance.id())?;
        let mut ctrl = Controller {
            chardev: None,
            link: Arc::pin_init(Lease::new(), GFP_KERNEL)?,
            events: None,
            debugfs: None,
            faults,
            queue_stats: KVec::new(),
            irqs,
            tagset: None,
            shared: None,
            io_queues: 0,
            nr_io: 0,
            nr_poll: 0,
            hw,
            pdev: bdev,
            instance,
            id: None,
            effects: None,
            nvm: None,
        };
        ctrl.inject(3)?;
        ctrl.setup_admin_irq()?;
        ctrl.inject(4)?;
        ctrl.hw.enable()?;
        ctrl.inject(5)?;
        ctrl.identify(cap)?;
        ctrl.inject(6)?;
        ctrl.setup_io_queues(cap)?;
        ctrl.inject(12)?;
        ctrl.share()?;
        if let Some(sh) = &ctrl.shared {
            sh.scan_namespaces()?;
        }
        ctrl.inject(13)?;
        ctrl.publish()?;
        // For the slot reset of PCI error recovery, which loses it (C's `nvme_pci_enable`).
        pci_save_state(bdev);
        Ok(ctrl)
    }

    /// Moves what user space may reach into [`Shared`].
    fn share(&mut self) -> Result {
        let Some(id) = self.id else {
            return Ok(());
        };
        let tagset = self.tagset.take();
        let (hw, link) = (self.hw.clone(), self.link.clone());
        let (io_queues, poll_queues) = (self.nr_io, self.nr_poll);
        let effects = self.effects.take();
        let nvm = self.nvm;
        self.shared = Some(Arc::pin_init(
            try_pin_init!(Shared {
                hw,
                id,
                effects,
                nvm,
                io_queues,
                poll_queues,
                disks <- new_mutex!(tagset),
                link,
            }),
            GFP_KERNEL,
        )?);
        Ok(())
    }

    /// Lends [`Shared`] to the link and creates `/dev/rnvme<N>`.
    fn publish(&mut self) -> Result {
        let Some(sh) = &self.shared else {
            return Ok(());
        };
        // SAFETY: `shared` is only dropped by `Drop for Controller`, after `link.revoke()`;
        // it is in an `Arc`, so it does not move.
        unsafe { self.link.grant(sh) };
        self.chardev = Some(CharDev::register(
            fmt!("rnvme{}", self.instance.id()),
            self.pdev.as_ref(),
            self.link.clone(),
        )?);
        let mut dbg = DebugDir::new(self.instance.id())?;
        dbg.add_queue(0, self.hw.admin.queue().stats.clone())?;
        for (qid, st) in self.queue_stats.iter() {
            dbg.add_queue(*qid, st.clone())?;
        }
        dbg.add_faults(self.faults.clone())?;
        self.debugfs = Some(dbg);
        let events = AsyncEvents::new(self.link.clone())?;
        self.hw.admin.set_event_handler(events.clone());
        self.events = Some(events);
        self.hw.start_async_events(Some(sh.id.oaes));
        Ok(())
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

    fn inject(&self, step: u32) -> Result {
        params::inject(self.pdev.as_ref(), step)
    }

    /// Registers the admin queue's handler on vector 0.
    fn setup_admin_irq(&mut self) -> Result {
        let name = CString::try_from_fmt(fmt!("rnvme{}q0", self.instance.id()))?;
        let admin = self.hw.admin.clone();
        if let Some(irqs) = self.irqs.as_mut() {
            irqs.request(0, name, QueueIrq::Admin(admin))?;
            self.hw.admin.set_polled(false);
        }
        Ok(())
    }

    /// Asks for one I/O queue pair per CPU, reallocates the interrupt vectors (one for the
    /// admin queue plus one per I/O queue, spread over the CPUs), creates the queues on the
    /// device, and the blk-mq tag set over them.
    ///
    /// Falls back to fewer queues when the controller grants fewer or fewer vectors are
    /// available, and to one vector shared by every queue (MSI or INTx).
    fn setup_io_queues(&mut self, cap: Cap) -> Result {
        let cpus = kernel::cpu::nr_cpu_ids();
        let want = match params::io_queues() {
            0 => cpus,
            n => n.min(cpus),
        }
        .clamp(1, 65534) as u16;
        let want_poll = params::poll_queues().min(cpus).min(65534 - u32::from(want)) as u16;
        let granted_all = u32::from(self.hw.set_num_queues(want + want_poll)?);
        // Polled queues get what they ask for as long as one queue with interrupts
        // remains (as the C driver); the rest have interrupts.
        let granted = granted_all
            .saturating_sub(u32::from(want_poll))
            .clamp(1, u32::from(want));
        self.inject(7)?;

        // Vectors are allocated all at once: give up the admin queue's, poll meanwhile.
        self.hw.admin.set_polled(true);
        self.irqs = None;
        self.irqs = IrqSet::alloc(self.pdev, 1, granted + 1, Some(1))
            .or_else(|_| IrqSet::alloc(self.pdev, 1, 1, None))
            .ok();
        self.setup_admin_irq()?;
        self.inject(8)?;
        let Some(nvec) = self.irqs.as_ref().map(|i| i.len()) else {
            dev_warn!(
                self.pdev.as_ref(),
                "no interrupts available: not creating I/O queues\n"
            );
            return Ok(());
        };
        let nr_io = if nvec > 1 { granted.min(nvec - 1) } else { 1 } as u16;
        let nr_poll = granted_all
            .saturating_sub(u32::from(nr_io))
            .min(u32::from(want_poll)) as u16;
        // CAP.MQES >= 2 was checked at probe.
        let depth = params::io_queue_depth().clamp(2, cap.mqes().min(ioq::MAX_DEPTH)) as u16;

        let shadow = match &self.id {
            Some(id) if id.supports_doorbell_buffer() => Some(ShadowDoorbells::new(
                self.pdev.as_ref(),
                nr_io + nr_poll,
                self.hw.regs.stride(),
            )?),
            _ => None,
        };
        let mut queues = IoQueues::with_capacity(usize::from(nr_io + nr_poll), GFP_KERNEL)?;
        for qid in 1..=nr_io {
            let vector = if nvec > 1 { u32::from(qid) } else { 0 };
            queues.push(
                self.create_io_queue(qid, depth, Some(vector), shadow.clone())?,
                GFP_KERNEL,
            )?;
            self.inject(if qid == 1 { 9 } else { 10 })?;
        }
        for qid in nr_io + 1..=nr_io + nr_poll {
            queues.push(
                self.create_io_queue(qid, depth, None, shadow.clone())?,
                GFP_KERNEL,
            )?;
        }
        if let Some(s) = &shadow {
            self.hw.enable_shadow(s, &queues);
        }
        let irq_map = match self.irqs.as_ref().map(|i| i.kind()) {
            Some(IrqType::MsiX | IrqType::Msi) if nvec > 1 => Some((self.pdev.as_ref(), 1)),
            _ => None,
        };
        let timeout = msecs_to_jiffies(params::io_timeout_ms()) as u32;
        // One slot of each queue stays empty: a full ring would look empty to the device.
        let set = IoSet {
            hw: self.hw.clone(),
            queues,
            shadow,
        };
        self.tagset = Some(TagSet::new(
            u32::from(nr_io),
            u32::from(nr_poll),
            u32::from(depth) - 1,
            timeout,
            irq_map,
            set,
        )?);
        self.inject(11)?;
        self.nr_io = nr_io;
        self.nr_poll = nr_poll;
        let kind = self
            .irqs
            .as_ref()
            .map_or("polled", |i| irq_type_name(i.kind()));
        dev_info!(
            self.pdev.as_ref(),
            "rnvme{}: {} I/O queues of depth {} on {} {} vector(s), {} polled\n",
            self.instance.id(),
            nr_io,
            depth,
            nvec,
            kind,
            nr_poll
        );
        Ok(())
    }

    /// Creates I/O queue pair `qid` on the device, completing on `vector` (`None`: polled,
    /// no interrupt).
    fn create_io_queue(
        &mut self,
        qid: u16,
        depth: u16,
        vector: Option<u32>,
        shadow: Option<Arc<ShadowDoorbells>>,
    ) -> Result<Arc<IoQueue<'b>>> {
        let regs = self.hw.regs.clone();
        let v16 = vector.map(|v| v as u16);
        let q = IoQueue::new(
            self.pdev,
            regs,
            qid,
            depth,
            v16,
            shadow,
            self.faults.clone(),
        )?;
        self.queue_stats.reserve(1, GFP_KERNEL)?;
        self.hw.create_io_queue(&q)?;
        self.queue_stats
            .push_within_capacity((qid, q.queue.stats.clone()))
            .map_err(|_| ENOMEM)?;
        self.io_queues = qid;
        if let (Some(vector), Some(irqs)) = (vector, self.irqs.as_mut()) {
            let name = CString::try_from_fmt(fmt!("rnvme{}q{}", self.instance.id(), qid))?;
            irqs.request(vector, name, QueueIrq::Io(q.clone()))?;
        }
        Ok(q)
    }

    /// Deletes the I/O queues on the device (submission queue before its completion queue,
    /// as the spec requires).
    fn delete_io_queues(&mut self) {
        let timeout = params::admin_timeout_ms().min(5000);
        for qid in (1..=self.io_queues).rev() {
            let sq = self.hw.admin.execute(Command::delete_io_sq(qid), timeout);
            let cq = self.hw.admin.execute(Command::delete_io_cq(qid), timeout);
            if sq.is_err() || cq.is_err() {
                // The controller is not answering: shutdown and disable follow anyway.
                break;
            }
        }
        self.io_queues = 0;
    }

    /// Identify Controller and the active namespace list; logs one line per controller.
    fn identify(&mut self, cap: Cap) -> Result {
        let data = self.hw.admin_read(
            Command::identify(cns::CONTROLLER, 0, 0),
            "Identify Controller",
        )?;
        let id = IdentifyController::parse(&data).map_err(|e| {
            dev_err!(self.pdev.as_ref(), "bad Identify Controller data: {e}\n");
            EINVAL
        })?;

        let n = active_namespaces(&self.hw, &id)?.len();

        let (maj, min, ter) = r::version(self.hw.regs.vs());
        let irq = match &self.irqs {
            Some(irqs) => irq_type_name(irqs.kind()),
            None => "polled",
        };
        let mdts_kib = id.max_transfer_bytes(cap).map(|b| b / 1024);
        dev_info!(
            self.pdev.as_ref(),
            "rnvme{}: model \"{}\" serial \"{}\" firmware \"{}\" NVMe {}.{}.{} namespaces {} mdts {} irq {}\n",
            self.instance.id(),
            id.model,
            id.serial,
            id.firmware,
            maj,
            min,
            ter,
            n,
            MdtsDisplay(mdts_kib),
            irq
        );
        self.hw.set_abort_limit(id.acl);
        self.hw.set_shutdown_timeout(&id);
        self.hw.configure_host_options(&id);
        if id.lpa & LPA_CMD_EFFECTS != 0 {
            self.effects = self.read_effects();
        }
        // As the C driver: asked of every controller of NVMe 1.1 or later, and refused by
        // those that predate it (then only MDTS limits Write Zeroes and Dataset Management).
        if (maj, min) >= (1, 1) {
            self.nvm = self
                .hw
                .try_admin_read(Command::identify(cns::CS_CONTROLLER, 0, 0))
                .ok()
                .and_then(|data| IdentifyControllerNvm::parse(&data).ok());
        }
        self.id = Some(id);
        Ok(())
    }

    /// The Commands Supported and Effects log's admin half; `None` (the mandatory effects
    /// only) if it cannot be read.
    fn read_effects(&self) -> Option<KBox<AdminEffects>> {
        let dwords = (LOG_CMD_EFFECTS_SIZE / 4) as u32;
        let data = self
            .hw
            .admin_read(
                Command::get_log_page(LOG_CMD_EFFECTS, 0xffff_ffff, dwords, 0, 0),
                "Get Log Page (Commands Supported and Effects)",
            )
            .ok()?;
        KBox::new(AdminEffects::parse(&data)?, GFP_KERNEL).ok()
    }
}

impl<'b> Shared<'b> {
    /// Resets the controller (keeping its disks), as an I/O timeout's second stage does.
    pub(crate) fn reset(&self, why: &str) -> Result {
        let disks = self.disks.lock();
        match disks.as_ref() {
            Some(ts) => reset::reset(&ts.handle(), why),
            None => {
                // No I/O queues to bring back: stopping the controller is all we can do.
                let _ = self.hw.disable();
                Err(ENODEV)
            }
        }
    }

    /// Most data one passthrough command may move.
    pub(crate) fn max_data(&self) -> u32 {
        ns::max_transfer(&self.id, self.hw.cap, self.hw.dma_opt)
    }

    /// log2 of namespace `nsid`'s block size, if it has a disk.
    pub(crate) fn lba_shift(&self, nsid: u32) -> Option<u32> {
        let disks = self.disks.lock();
        let ts = disks.as_ref()?;
        let shift = ts.find_disk(|ns| ns.nsid() == nsid)?.data().lba_shift();
        Some(shift)
    }
}

impl Drop for Controller<'_> {
    fn drop(&mut self) {
        // No new opens, no new passthrough command and none waiting on the device; then no
        // running or new ioctl, sysfs read or rescan.
        self.chardev = None;
        self.hw.admin.close();
        self.link.revoke();
        if let Some(ev) = &self.events {
            ev.close();
        }
        // Disks next: their removal waits for I/O in flight, which needs the queues. A
        // controller the PCI core holds (unbound between a frozen link and its slot reset)
        // has them quiesced with requests parked: fail those first.
        if let Some(sh) = &self.shared {
            if self.hw.is_held() {
                if let Some(ts) = sh.disks.lock().as_ref() {
                    reset::give_up(&ts.handle(), "removed while held");
                }
            }
        }
        if let Some(ts) = self.tagset.as_mut() {
            ts.remove_disks();
        }
        if let Some(sh) = &self.shared {
            if let Some(ts) = Option::as_mut(&mut *sh.disks.lock()) {
                ts.remove_disks();
            }
        }
        self.delete_io_queues();
        self.hw.shutdown();
        self.hw.admin.unpark();
        // Handlers go before the queues they reap (field order does the rest).
        self.irqs = None;
        self.tagset = None;
        if let Some(sh) = &self.shared {
            *sh.disks.lock() = None;
        }
        dev_info!(
            self.pdev.as_ref(),
            "rnvme{}: shut down\n",
            self.instance.id()
        );
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
