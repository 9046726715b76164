// SPDX-License-Identifier: GPL-2.0

//! A controller's I/O queues and the interrupt vectors they complete on: how many (Set
//! Features, Number of Queues, and the vectors the platform gives), created on the device
//! once, and the blk-mq tag set over them.
//!
//! The admin queue's single vector (allocated before the controller was enabled) is given up
//! once the controller said how many queues it grants, and the vectors are allocated again:
//! one for the admin queue plus one per I/O queue, spread over the CPUs (MSI-X first, then
//! MSI, then INTx with one vector for every queue, then no interrupt and no I/O queue).

use crate::{
    admin::AdminQueue,
    fault::FaultsRef,
    hw::Hw,
    ioq::{IoQueue, NvmeBlk},
    kernel_ext::{
        block::mq::TagSet,
        irq::{irq_type_name, IrqContext, IrqKey, IrqSet, Spread, VectorHandler},
    },
    params,
    queue::ShadowDoorbells,
    spec::{command::Command, identify::IdentifyController, quirks::Quirks, regs::cmb_sq_depth},
    stats::DebugDir,
};
use kernel::{
    irq::IrqReturn, pci::IrqType, prelude::*, str::CString, sync::Arc, time::msecs_to_jiffies,
};

/// The hardware queues of a controller, indexed by blk-mq hardware queue number.
pub(crate) type IoQueues<'b> = KVec<Arc<IoQueue<'b>>>;

/// The tag set's data: the queues, and the controller state error recovery needs.
pub(crate) struct IoSet<'b> {
    pub(crate) hw: Arc<Hw<'b>>,
    pub(crate) queues: IoQueues<'b>,
    /// Shadow doorbells of the I/O queues, if the controller offers them.
    pub(crate) shadow: Option<Arc<ShadowDoorbells>>,
}

/// A queue's interrupt handler: what it reaps. Several queues may share a vector (the admin
/// queue and the first I/O queue, when the device granted few vectors).
pub(crate) enum QueueIrq<'b> {
    Admin(Arc<AdminQueue<'b>>),
    Io(Arc<IoQueue<'b>>),
}

impl VectorHandler for QueueIrq<'_> {
    fn handle(&self, ctx: &IrqContext) -> IrqReturn {
        let n = match self {
            QueueIrq::Admin(a) => {
                a.queue().stats.interrupt();
                a.process()
            }
            QueueIrq::Io(q) => {
                q.queue.stats.interrupt();
                q.process_in_handler(ctx)
            }
        };
        if n > 0 {
            IrqReturn::Handled
        } else {
            // Nothing for this queue: another one on a shared vector, or another device
            // on a shared INTx line, raised it.
            IrqReturn::None
        }
    }

    /// An I/O queue's handler reaps its completion queue without a lock; the admin queue's
    /// is also reaped by process context waiting for a command, so it keeps its lock.
    fn bind(&self, key: Option<&IrqKey>) {
        if let QueueIrq::Io(q) = self {
            q.queue.bind_cq(key);
        }
    }
}

/// The queues and vectors of a controller. Dropping it stops the controller (unless unbind
/// already did), then frees the interrupt handlers, then the queues' memory: the device is
/// never left able to write into memory that is gone, also when a probe fails half way.
///
/// # Invariants
///
/// Every queue of `created` was created on the device, in qid order from 1.
pub(crate) struct Queues<'b> {
    hw: Arc<Hw<'b>>,
    /// `None`: the platform gave no interrupt; the admin queue polls and there is no I/O
    /// queue. Declared before `created`: handlers go before the queues they reap.
    irqs: Option<IrqSet<'b, QueueIrq<'b>>>,
    created: IoQueues<'b>,
    shadow: Option<Arc<ShadowDoorbells>>,
    /// The I/O submission queues go in the controller memory buffer.
    sq_in_cmb: bool,
    /// Queues with interrupts (ids 1..=nr_io: the default set, then `nr_read` for reads
    /// only), then polled ones.
    nr_io: u16,
    nr_read: u16,
    nr_poll: u16,
    depth: u16,
}

impl<'b> Queues<'b> {
    /// Asks for one I/O queue pair per CPU (and the polled ones the parameters ask for),
    /// allocates the vectors, registers the admin queue's handler and creates the I/O queues
    /// on the device.
    ///
    /// Falls back to fewer queues when the controller grants fewer or fewer vectors are
    /// available, and to one vector shared by every queue (MSI or INTx).
    pub(crate) fn new(
        hw: &Arc<Hw<'b>>,
        id: &IdentifyController,
        faults: &FaultsRef,
        admin_irq: Option<IrqSet<'b, QueueIrq<'b>>>,
    ) -> Result<Self> {
        let (pdev, inst) = (hw.pdev, hw.instance);
        let cpus = kernel::cpu::nr_cpu_ids();
        // With write queues, as the C driver: one read queue per CPU besides them.
        let writes = params::write_queues();
        let want = match params::io_queues() {
            0 => cpus,
            n => n.min(cpus),
        }
        .saturating_add(writes)
        .clamp(1, 65534) as u16;
        let want_poll = params::poll_queues().min(cpus).min(65534 - u32::from(want)) as u16;
        let granted_all = u32::from(hw.set_num_queues(want + want_poll)?);
        // Polled queues get what they ask for as long as one queue with interrupts
        // remains (as the C driver); the rest have interrupts.
        let granted = granted_all
            .saturating_sub(u32::from(want_poll))
            .clamp(1, u32::from(want));
        params::inject(pdev.as_ref(), 7)?;

        // Vectors are allocated all at once: give up the admin queue's, poll meanwhile.
        hw.admin.set_polled(true);
        drop(admin_irq);
        let split = |n| split_queues(n, writes);
        let spread = Spread {
            pre: 1,
            sets: Some(&split),
        };
        let types = hw.irq_types();
        // single_vector: every queue on the admin queue's vector, as the C driver.
        let irqs = if hw.quirks().has(Quirks::SINGLE_VECTOR) {
            IrqSet::alloc(pdev, 1, 1, None, types)
        } else {
            IrqSet::alloc(pdev, 1, granted + 1, Some(spread), types)
                .or_else(|_| IrqSet::alloc(pdev, 1, 1, None, types))
        }
        .ok();
        let mut this = Queues {
            hw: hw.clone(),
            irqs,
            created: KVec::new(),
            shadow: None,
            sq_in_cmb: false,
            nr_io: 0,
            nr_read: 0,
            nr_poll: 0,
            depth: 0,
        };
        let Some(irqs) = this.irqs.as_mut() else {
            dev_warn!(
                pdev.as_ref(),
                "no interrupts available: not creating I/O queues\n"
            );
            params::inject(pdev.as_ref(), 8)?;
            return Ok(this);
        };
        let name = CString::try_from_fmt(fmt!("rnvme{inst}q0"))?;
        irqs.request(0, name, QueueIrq::Admin(hw.admin.clone()))?;
        hw.admin.set_polled(false);
        params::inject(pdev.as_ref(), 8)?;

        let nvec = irqs.len();
        let nr_io = if nvec > 1 { granted.min(nvec - 1) } else { 1 } as u16;
        // The sets the vectors were spread in (one vector for all: no read queues).
        let nr_read = if nvec > 1 {
            split_queues(nvec - 1, writes)[1].min(u32::from(nr_io) - 1) as u16
        } else {
            0
        };
        let nr_poll = granted_all
            .saturating_sub(u32::from(nr_io))
            .min(u32::from(want_poll)) as u16;
        // CAP.MQES >= 2 was checked at probe.
        this.depth = if hw.quirks().has(Quirks::QDEPTH_ONE) {
            2
        } else {
            params::io_queue_depth().clamp(2, hw.cap.mqes().min(params::MAX_DEPTH)) as u16
        };
        // Submission queues in the controller memory buffer as C's: every queue the
        // controller granted, as deep as an equal share of the buffer allows, or none.
        if let Some(cmb) = hw.cmb.as_ref().filter(|c| c.use_sqes) {
            match cmb_sq_depth(cmb.size, granted_all, u32::from(this.depth)) {
                // At most the depth asked for.
                Some(depth) => {
                    this.depth = depth as u16;
                    this.sq_in_cmb = true;
                }
                None => dev_info!(
                    pdev.as_ref(),
                    "rnvme{inst}: controller memory buffer too small for {granted_all} submission queues: in host memory\n"
                ),
            }
        }
        // No shadow doorbells on a pin (INTx): the CQ head doorbell write is what lowers a
        // level-triggered line, and the shadow's event index lets the host skip it (QEMU's
        // lags one update behind): the pin then stays up with nothing to reap, an interrupt
        // storm the kernel ends by disabling the line. MSI and MSI-X are messages: no level
        // to lower.
        if id.supports_doorbell_buffer() && !matches!(irqs.kind(), IrqType::Intx) {
            this.shadow = Some(ShadowDoorbells::new(
                pdev.as_ref(),
                nr_io + nr_poll,
                hw.regs.stride(),
            )?);
        }
        this.created
            .reserve(usize::from(nr_io + nr_poll), GFP_KERNEL)?;
        for qid in 1..=nr_io {
            let vector = if nvec > 1 { qid } else { 0 };
            this.create(qid, Some(vector), faults)?;
            params::inject(pdev.as_ref(), if qid == 1 { 9 } else { 10 })?;
        }
        for qid in nr_io + 1..=nr_io + nr_poll {
            this.create(qid, None, faults)?;
        }
        if let Some(s) = &this.shadow {
            hw.enable_shadow(s, &this.created);
        }
        (this.nr_io, this.nr_read, this.nr_poll) = (nr_io, nr_read, nr_poll);
        dev_info!(
            pdev.as_ref(),
            "rnvme{}: {} I/O queues of depth {} on {} {} vector(s), {} polled, {} for reads only\n",
            inst,
            nr_io,
            this.depth,
            nvec,
            this.irq_name(),
            nr_poll,
            nr_read
        );
        let in_cmb = this.created.iter().filter(|q| q.queue.sq_in_cmb()).count();
        if in_cmb > 0 {
            dev_info!(
                pdev.as_ref(),
                "rnvme{inst}: {in_cmb} submission queue(s) in the controller memory buffer\n"
            );
        }
        Ok(this)
    }

    /// Creates I/O queue pair `qid` on the device, completing on `vector` (`None`: polled,
    /// no interrupt).
    fn create(&mut self, qid: u16, vector: Option<u16>, faults: &FaultsRef) -> Result {
        let hw = &self.hw;
        let q = IoQueue::new(
            hw.pdev,
            hw.regs.clone(),
            qid,
            self.depth,
            vector,
            self.shadow.clone(),
            faults.clone(),
            hw.quirks(),
            self.sq_in_cmb,
        )?;
        hw.create_io_queue(&q)?;
        // INVARIANT: created on the device just above, after qids 1..qid (capacity was
        // reserved in `new`).
        self.created
            .push_within_capacity(q.clone())
            .map_err(|_| ENOMEM)?;
        if let (Some(vector), Some(irqs)) = (vector, self.irqs.as_mut()) {
            let name = CString::try_from_fmt(fmt!("rnvme{}q{}", hw.instance, qid))?;
            irqs.request(u32::from(vector), name, QueueIrq::Io(q))?;
        }
        Ok(())
    }

    /// The blk-mq tag set over the I/O queues; `None` without I/O queues.
    pub(crate) fn tag_set(&self) -> Result<Option<Arc<TagSet<'b, NvmeBlk>>>> {
        let Some(irqs) = self.irqs.as_ref() else {
            return Ok(None);
        };
        let mut queues = IoQueues::with_capacity(self.created.len(), GFP_KERNEL)?;
        for q in self.created.iter() {
            queues.push(q.clone(), GFP_KERNEL)?;
        }
        let irq_map = match irqs.kind() {
            IrqType::MsiX | IrqType::Msi if irqs.len() > 1 => Some((self.hw.dev(), 1)),
            _ => None,
        };
        let timeout = msecs_to_jiffies(params::io_timeout_ms()) as u32;
        let set = IoSet {
            hw: self.hw.clone(),
            queues,
            shadow: self.shadow.clone(),
        };
        // One slot of each queue stays empty: a full ring would look empty to the device.
        let ts = TagSet::new(
            u32::from(self.nr_io - self.nr_read),
            u32::from(self.nr_read),
            u32::from(self.nr_poll),
            u32::from(self.depth) - 1,
            timeout,
            irq_map,
            set,
        )?;
        params::inject(self.hw.dev(), 11)?;
        Ok(Some(ts))
    }

    /// Deletes the I/O queues on the device (submission queue before its completion queue,
    /// as the spec requires), as the last step before a normal shutdown.
    pub(crate) fn delete_on_device(&self) {
        let timeout = params::admin_timeout_ms().min(5000);
        for q in self.created.iter().rev() {
            let qid = q.queue.qid();
            let sq = self.hw.admin.execute(Command::delete_io_sq(qid), timeout);
            let cq = self.hw.admin.execute(Command::delete_io_cq(qid), timeout);
            if sq.is_err() || cq.is_err() {
                // The controller is not answering: shutdown and disable follow anyway.
                break;
            }
        }
    }

    /// Adds a debugfs file for each I/O queue.
    pub(crate) fn add_debugfs(&self, dir: &mut DebugDir) -> Result {
        for q in self.created.iter() {
            dir.add_queue(q.queue.qid(), q.queue.stats.clone())?;
        }
        Ok(())
    }

    /// I/O queues with interrupts, and polled ones.
    pub(crate) fn counts(&self) -> (u16, u16) {
        (self.nr_io, self.nr_poll)
    }

    /// How the queues complete: the interrupt mechanism, or "polled".
    pub(crate) fn irq_name(&self) -> &'static str {
        self.irqs
            .as_ref()
            .map_or("polled", |i| irq_type_name(i.kind()))
    }
}

impl Drop for Queues<'_> {
    fn drop(&mut self) {
        // After unbind the controller is stopped already; after a failed probe it is stopped
        // here. The fields follow.
        self.hw.stop();
    }
}

/// Splits `n` queues with interrupts into the default set (writes and every other command)
/// and the read set, for `writes` write queues, as C's `nvme_calc_irq_sets`: without write
/// queues, or with a single queue, everything shares the default set; otherwise at least
/// one queue is left for reads. Each set gets vectors spread over every CPU.
fn split_queues(n: u32, writes: u32) -> [u32; 2] {
    if n <= 1 || writes == 0 {
        [n.max(1), 0]
    } else if writes >= n {
        [n - 1, 1]
    } else {
        [writes, n - writes]
    }
}
