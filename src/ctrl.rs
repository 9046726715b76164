// SPDX-License-Identifier: GPL-2.0

//! The controller: bring-up, identify, and teardown as the NVMe Base Spec (3.5, 3.6) says.
//!
//! Bring-up: disable (wait CSTS.RDY = 0), program the admin queue (AQA/ASQ/ACQ), enable with
//! the host page size (CC.MPS within CAP.MPSMIN..MPSMAX) and round robin arbitration, wait
//! CSTS.RDY = 1 within CAP.TO, then Identify. Teardown: normal shutdown (CC.SHN, wait
//! CSTS.SHST complete), then disable, so the device can no longer touch memory we free.

use crate::{
    admin::{AdminQueue, CmdError, QueueIrq, ADMIN_DEPTH},
    kernel_ext::irq::{IrqSet, IrqTypes},
    queue::Queue,
    regs::{Regs, BAR0_MIN},
    spec::{
        command::{cns, Command},
        identify::{self, IdentifyController, IDENTIFY_SIZE, NS_LIST_MAX},
        regs::{self as r, cc, csts, Cap},
    },
};
use kernel::{
    device::{Bound, Core},
    dma::{self, Coherent, DmaMask},
    io::Io,
    page::PAGE_SHIFT,
    pci,
    prelude::*,
    str::CString,
    sync::{
        atomic::{Atomic, Full, Relaxed},
        Arc,
    },
    time::{delay::fsleep, Delta, Instant, Monotonic},
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

/// One bound NVMe controller: the PCI driver's device data.
///
/// Fields drop in declaration order: interrupt handlers first, then the queues they
/// reference, then the BAR. [`Drop`] shuts the controller down before any of that.
pub(crate) struct Controller<'b> {
    irqs: Option<IrqSet<'b, QueueIrq<'b>>>,
    admin: Arc<AdminQueue<'b>>,
    regs: Arc<Regs<'b>>,
    pdev: &'b pci::Device<Bound>,
    instance: Instance,
}

/// Ticks to wait between CSTS polls.
const POLL_US: i64 = 1000;

fn timeout_ms() -> u32 {
    crate::params::admin_timeout_ms()
}

impl<'b> Controller<'b> {
    /// Probes one controller: everything from PCI set-up to identify.
    pub(crate) fn probe(pdev: &'b pci::Device<Core<'_>>) -> Result<Self> {
        let instance = Instance::alloc()?;
        pdev.enable_device_mem()?;
        pdev.set_master();
        // SAFETY: Called once in probe, before any DMA allocation or mapping of this device.
        unsafe { dma::Device::dma_set_mask_and_coherent(pdev, DmaMask::new::<64>())? };

        let bdev: &'b pci::Device<Bound> = pdev;
        let bar = bdev.iomap_region_sized::<BAR0_MIN>(0, c"rnvme")?;
        let regs = Arc::new(Regs::new(bar), GFP_KERNEL)?;
        let cap = Self::check_cap(bdev, &regs)?;
        // The controller may still run from firmware or a previous driver.
        Self::disable(bdev, &regs, cap)?;

        let depth = ADMIN_DEPTH.min(u16::try_from(cap.mqes()).unwrap_or(u16::MAX));
        let aq = Queue::new(bdev.as_ref(), regs.clone(), 0, depth)?;

        // One vector for the admin queue for now; MSI-X first, then MSI, then INTx, then
        // polling if the platform gives us no interrupt at all.
        let types = IrqTypes {
            msix: true,
            msi: true,
            intx: true,
        };
        let irqs = IrqSet::alloc(bdev, 1, 1, types, None).ok();
        let admin = AdminQueue::new(bdev, aq, irqs.is_none())?;
        let mut ctrl = Controller {
            irqs,
            admin,
            regs,
            pdev: bdev,
            instance,
        };
        ctrl.setup_admin_irq()?;
        ctrl.enable(cap)?;
        ctrl.identify(cap)?;
        Ok(ctrl)
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
        if cap.css() & r::CAP_CSS_NVM == 0 && cap.css() & r::CAP_CSS_CSI == 0 {
            dev_err!(
                pdev.as_ref(),
                "controller lacks the NVM command set (CAP {:#x})\n",
                cap.0
            );
            return Err(ENODEV);
        }
        let page = PAGE_SHIFT as u32;
        if page < cap.mpsmin_shift() || page > cap.mpsmax_shift() {
            dev_err!(
                pdev.as_ref(),
                "host page size {} outside the controller's {}..={} (CAP {:#x})\n",
                1u64 << page,
                1u64 << cap.mpsmin_shift(),
                1u64 << cap.mpsmax_shift(),
                cap.0
            );
            return Err(ENODEV);
        }
        if cap.mqes() < 2 {
            dev_err!(
                pdev.as_ref(),
                "CAP.MQES allows queues of {} entry\n",
                cap.mqes()
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

    /// Waits until `CSTS & mask == want`, at most `CAP.TO` (or `ms`), failing on fatal status.
    fn wait_csts(
        pdev: &pci::Device<Bound>,
        regs: &Regs<'_>,
        mask: u32,
        want: u32,
        ms: u32,
    ) -> Result {
        let start = Instant::<Monotonic>::now();
        // The spec's timeout is a worst case; allow at least half a second for emulators.
        let limit = Delta::from_millis(i64::from(ms.max(500)));
        loop {
            let s = regs.csts();
            if r::device_gone(s) {
                dev_err!(pdev.as_ref(), "device gone (CSTS all ones)\n");
                return Err(ENODEV);
            }
            if s & mask == want {
                return Ok(());
            }
            if s & csts::CFS != 0 && want != 0 {
                dev_err!(pdev.as_ref(), "controller fatal status (CSTS {:#x})\n", s);
                return Err(EIO);
            }
            if start.elapsed() > limit {
                dev_err!(
                    pdev.as_ref(),
                    "timeout after {} ms waiting for CSTS {:#x}/{:#x} (now {:#x})\n",
                    limit.as_millis(),
                    want,
                    mask,
                    s
                );
                return Err(ETIMEDOUT);
            }
            fsleep(Delta::from_micros(POLL_US));
        }
    }

    /// Clears CC.EN and waits for CSTS.RDY to drop: the controller stops all DMA.
    fn disable(pdev: &pci::Device<Bound>, regs: &Regs<'_>, cap: Cap) -> Result {
        let c = regs.cc();
        if c & cc::EN != 0 {
            regs.set_cc(c & !cc::EN);
        } else if regs.csts() & csts::RDY == 0 {
            return Ok(());
        }
        // With EN already clear but RDY still set, the controller is finishing a reset.
        Self::wait_csts(pdev, regs, csts::RDY, 0, cap.timeout_ms())
    }

    /// Registers the admin queue's handler on vector 0.
    fn setup_admin_irq(&mut self) -> Result {
        let name = CString::try_from_fmt(fmt!("rnvme{}q0", self.instance.id()))?;
        let admin = self.admin.clone();
        if let Some(irqs) = self.irqs.as_mut() {
            irqs.request(0, name, QueueIrq { admin })?;
        }
        Ok(())
    }

    /// Programs the admin queue and enables the controller.
    fn enable(&mut self, cap: Cap) -> Result {
        let q = self.admin.queue();
        self.regs.set_aqa(r::aqa(u32::from(q.depth())));
        self.regs.set_asq(q.sq_dma());
        self.regs.set_acq(q.cq_dma());
        let css = if cap.css() & r::CAP_CSS_NVM != 0 {
            cc::CSS_NVM
        } else {
            cc::CSS_CSI
        };
        self.regs.set_cc(r::cc_enable(PAGE_SHIFT as u32, css));
        Self::wait_csts(
            self.pdev,
            &self.regs,
            csts::RDY,
            csts::RDY,
            cap.timeout_ms(),
        )
    }

    /// Runs an admin command that transfers up to one page into a fresh DMA buffer and
    /// returns a copy of the data.
    fn admin_read(&self, cmd: Command, what: &str) -> Result<KVec<u8>> {
        let buf = Coherent::<u8>::zeroed_slice(self.pdev.as_ref(), IDENTIFY_SIZE, GFP_KERNEL)?;
        let cmd = cmd.with_prp(buf.dma_address(), 0);
        match self.admin.execute(cmd, timeout_ms()) {
            Ok(_) => {}
            Err(e) => {
                dev_err!(self.pdev.as_ref(), "{what} failed: {e}\n");
                if e == CmdError::Timeout {
                    // The device may still write into `buf`: stop it before `buf` is freed.
                    let _ = Self::disable(self.pdev, &self.regs, self.regs.cap());
                }
                return Err(e.into());
            }
        }
        let mut out = KVec::from_elem(0u8, IDENTIFY_SIZE, GFP_KERNEL)?;
        (&buf).copy_to_slice(&mut out);
        Ok(out)
    }

    /// Identify Controller and the active namespace list; logs one line per controller.
    fn identify(&mut self, cap: Cap) -> Result {
        let data = self.admin_read(
            Command::identify(cns::CONTROLLER, 0, 0),
            "Identify Controller",
        )?;
        let id = IdentifyController::parse(&data).map_err(|e| {
            dev_err!(self.pdev.as_ref(), "bad Identify Controller data: {e}\n");
            EINVAL
        })?;

        let data = self.admin_read(
            Command::identify(cns::ACTIVE_NS_LIST, 0, 0),
            "Identify Active Namespace List",
        )?;
        let mut ids = KBox::new([0u32; NS_LIST_MAX], GFP_KERNEL)?;
        let n = identify::parse_ns_list(&data, id.nn, &mut ids).map_err(|e| {
            dev_err!(self.pdev.as_ref(), "bad namespace list: {e}\n");
            EINVAL
        })?;
        let (maj, min, ter) = r::version(self.regs.vs());
        let irq = match &self.irqs {
            Some(irqs) => irqs.kind().name(),
            None => "polled",
        };
        let mdts_kib = id.max_transfer_bytes(cap.mpsmin_shift()).map(|b| b / 1024);
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
        Ok(())
    }

    /// Normal shutdown, then disable. Safe to call more than once.
    fn shutdown(&self) {
        let regs = &self.regs;
        let s = regs.csts();
        if r::device_gone(s) {
            return;
        }
        let c = regs.cc();
        if c & cc::EN != 0 && s & csts::RDY != 0 && s & csts::CFS == 0 {
            regs.set_cc((c & !cc::SHN_MASK) | cc::SHN_NORMAL);
            // RTD3 entry latency would be the precise bound; 5 s is the C driver's default.
            if Self::wait_csts(self.pdev, regs, csts::SHST_MASK, csts::SHST_CMPLT, 5000).is_err() {
                dev_warn!(self.pdev.as_ref(), "shutdown did not complete; disabling\n");
            }
        }
        let _ = Self::disable(self.pdev, regs, regs.cap());
    }
}

impl Drop for Controller<'_> {
    fn drop(&mut self) {
        self.shutdown();
        if let Some(irqs) = self.irqs.as_ref() {
            irqs.synchronize(0);
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
