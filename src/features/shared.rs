// SPDX-License-Identifier: GPL-2.0

//! [`Shared`]: what user space and the features reach of a bound controller (through its
//! [`CtrlLink`]), built by the controller (`ctrl.rs`) after the admin queue is up: identify
//! data (Identify, step 6 of bring-up), the I/O queues, the tag set and the disks.

use crate::{
    fault::FaultsRef,
    hw::Hw,
    ioctl::NsKey,
    ioq::NvmeBlk,
    kernel_ext::{
        block::mq::{DiskArc, Disks, TagSet},
        irq::{irq_type_name, IrqSet},
        lease::Lease,
    },
    mpath::Membership,
    ns, params,
    queues::{QueueIrq, Queues},
    reset,
    scan::active_namespaces,
    spec::{
        access::IoAccess,
        command::{cns, Command},
        effects::{EffectsLog, LOG_CMD_EFFECTS, LOG_CMD_EFFECTS_SIZE, LPA_CMD_EFFECTS},
        identify::{IdentifyController, IdentifyControllerNvm},
        pi::Metadata,
        quirks::Quirks,
        regs as r,
        subsys::{multi_controller, Nqn},
    },
};
use kernel::{prelude::*, sync::Arc, types::ForLt};

/// What open files, disks and queued work hold of a controller: its shared state, borrowed
/// from the bound device.
pub(crate) type CtrlLink = Lease<ForLt!(Shared<'_>)>;

/// A controller's state that user space reaches (ioctls, sysfs) through its [`CtrlLink`]:
/// the disks (added and removed by rescans), the queues, the identify data, the hardware.
///
/// Its disks are removed (by `Controller::unbind`, or a probe whose scan failed) before it
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
    /// Most data one passthrough command may move (`ns::max_transfer`): its inputs (MDTS,
    /// CAP, the DMA mapping limit) never change while the controller is bound, and every
    /// passthrough command checks it.
    max_data: u32,
    /// The NVM subsystem, when its namespaces get multipath head disks (`None`: a
    /// single-controller subsystem, or `multipath=0`).
    pub(crate) subsys: Option<Membership>,
    /// The Commands Supported and Effects log, if the controller has it.
    pub(crate) effects: Option<KBox<EffectsLog>>,
    /// Who may send each I/O command to a namespace, from `effects` (passthrough's
    /// `admit`).
    pub(crate) io_access: IoAccess,
    /// NVM command set limits (Write Zeroes, Dataset Management), if the controller says.
    pub(crate) nvm: Option<IdentifyControllerNvm>,
    /// Given to each disk, for its ioctls.
    pub(crate) link: Arc<CtrlLink>,
}

impl<'b> Shared<'b> {
    /// Identifies the controller (step 6), sets up its queues (7 to 10, taking the admin
    /// queue's interrupt `irq` over) and the tag set over them (11).
    pub(crate) fn new<'a>(
        hw: &'a Arc<Hw<'b>>,
        faults: &'a FaultsRef,
        link: &'a Arc<CtrlLink>,
        irq: Option<IrqSet<'b, QueueIrq<'b>>>,
    ) -> impl PinInit<Self, Error> + use<'a, 'b> {
        try_pin_init!(Self {
            hw: hw.clone(),
            id: identify(hw, &irq)?,
            max_data: ns::max_transfer(id, hw.cap, hw.dma_opt),
            subsys: join_subsystem(hw, id)?,
            effects: (id.lpa & LPA_CMD_EFFECTS != 0)
                .then(|| read_effects(hw))
                .flatten(),
            io_access: IoAccess::new(effects.as_deref()),
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
    pub(crate) fn remove_disks(&self) {
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
        self.max_data
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
            |ns| (ns.lba_shift(), ns.metadata().copied()),
        )
    }

    /// Metadata bytes per block of namespace `key`'s metadata buffers (0: none), if it has
    /// a disk.
    pub(crate) fn integrity_size(&self, key: NsKey) -> Option<u8> {
        self.disks
            .as_ref()?
            .with_disk(|ns| key.matches(ns.key()), |ns| ns.integrity_size())
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
    let m = Membership::join(
        nqn,
        hw.instance,
        id.cntlid,
        hw.status.clone(),
        params::io_policy(),
    )?;
    dev_info!(
        hw.dev(),
        "rnvme{}: subsystem rnvme{} ({nqn}), controller id {}, multipath policy {}\n",
        hw.instance,
        m.instance,
        id.cntlid,
        m.policy.name()
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
pub(crate) struct QuirkList(pub(crate) Quirks);

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
