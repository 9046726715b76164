// SPDX-License-Identifier: GPL-2.0

//! The controller's register-level state and steps, shared by bring-up, reset and teardown.
//!
//! [`Hw`] lives in an [`Arc`] held by the controller (`ctrl.rs`) and by the tag set's data,
//! so blk-mq's timeout handler can reach it to abort a command or reset the controller.
//! Enabling, disabling and creating I/O queues on the device are the same steps at probe and
//! after a reset, so they are here once.

use crate::kernel_ext::irq::IrqTypes;
use crate::{
    admin::{AdminQueue, CmdError},
    cmb::Cmb,
    ioq::IoQueue,
    kernel_ext::{dma as kdma, pci_clear_master, PCI_COMMAND, PCI_COMMAND_MEMORY},
    params,
    queue::ShadowDoorbells,
    regs::Regs,
    spec::{
        command::{cns, feature, host_behavior, Command},
        event::AEC_NOTICES,
        identify::{IdentifyController, IDENTIFY_SIZE},
        quirks::{Quirks, DELAY_BEFORE_CHK_RDY_MS},
        regs::{self as r, cc, csts, Cap},
        smart::critical,
    },
    state::{CtrlStatus, State},
};
use kernel::{
    device::{Bound, Device},
    dma::Coherent,
    io::poll::read_poll_timeout,
    io::Io,
    new_mutex,
    page::PAGE_SHIFT,
    pci,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, Mutex,
    },
    time::Delta,
};

/// Microseconds between CSTS polls.
const POLL_US: i64 = 1000;

/// Shutdown time when the controller reports no RTD3 entry latency, and the least it is
/// given (the C driver's `shutdown_timeout` default).
const DEFAULT_SHUTDOWN_MS: u32 = 5000;

/// The controller's shared hardware state.
#[pin_data]
pub(crate) struct Hw<'b> {
    pub(crate) pdev: &'b pci::Device<Bound>,
    pub(crate) regs: Arc<Regs<'b>>,
    pub(crate) admin: Arc<AdminQueue<'b>>,
    pub(crate) cap: Cap,
    /// The largest mapping the DMA layer handles well (`dma_opt_mapping_size`): a bound
    /// on every transfer, as in the C driver (bounce buffers, IOMMU caching).
    pub(crate) dma_opt: u32,
    /// The controller number (`rnvme<N>`).
    pub(crate) instance: u32,
    /// The controller's state, shared with the multipath heads it has paths in.
    pub(crate) status: Arc<CtrlStatus>,
    /// Aborts the controller accepts at once (Identify ACL + 1), 1 until identified.
    abort_limit: Atomic<u32>,
    /// How long a normal shutdown may take, in milliseconds (from RTD3E).
    shutdown_ms: Atomic<u32>,
    /// The PCI core holds the function: between `reset_prepare` and `reset_done`, suspend
    /// and resume, a frozen link and its slot reset. Timeouts wait; the release brings the
    /// controller back.
    held: Atomic<bool>,
    /// Resets done, for the log and tests.
    resets: Atomic<u32>,
    /// A reset an admin timeout asked for and nobody has started: the reset count it saw,
    /// plus one (0: none). Whoever gets the reset lock first with it, the controller's work
    /// or the timeout of an I/O the stopped controller holds, resets; the other finds the
    /// count moved and does nothing. So recovery never waits for the work, which may be
    /// waiting for that very I/O (a rescan).
    pending_reset: Atomic<u32>,
    /// Asynchronous Event Configuration to set after every enable (0: none).
    aen_config: Atomic<u32>,
    /// CC.EN may be set: from [`Self::enable`] until a [`Self::disable`] was tried (a
    /// controller that did not stop has lost bus mastering).
    running: Atomic<bool>,
    /// The controller's quirks: its PCI ID's, then those of its identity too.
    quirks: Atomic<u32>,
    /// Its memory buffer, if it has one (mapped once, at probe, as C's).
    pub(crate) cmb: Option<Cmb>,
    /// Serializes resets. It guards a procedure on the device (registers, rings, queue
    /// creation), not data in memory: the state above is read without it, on the I/O path
    /// and by timeouts.
    #[pin]
    pub(crate) reset_lock: Mutex<()>,
}

impl<'b> Hw<'b> {
    pub(crate) fn new(
        pdev: &'b pci::Device<Bound>,
        regs: Arc<Regs<'b>>,
        admin: Arc<AdminQueue<'b>>,
        cap: Cap,
        instance: u32,
        quirks: Quirks,
    ) -> Result<Arc<Self>> {
        Arc::pin_init(
            try_pin_init!(Self {
                pdev,
                regs,
                admin,
                cap,
                dma_opt: u32::try_from(kdma::opt_mapping_size(pdev.as_ref())).unwrap_or(u32::MAX),
                instance,
                status: CtrlStatus::new()?,
                abort_limit: Atomic::new(1),
                shutdown_ms: Atomic::new(DEFAULT_SHUTDOWN_MS),
                held: Atomic::new(false),
                resets: Atomic::new(0),
                pending_reset: Atomic::new(0),
                aen_config: Atomic::new(0),
                running: Atomic::new(false),
                quirks: Atomic::new(quirks.0),
                cmb: Cmb::map(pdev, regs, *cap),
                reset_lock <- new_mutex!(()),
            }),
            GFP_KERNEL,
        )
    }

    pub(crate) fn dev(&self) -> &kernel::device::Device<Bound> {
        self.pdev.as_ref()
    }

    pub(crate) fn state(&self) -> State {
        self.status.state()
    }

    pub(crate) fn set_state(&self, s: State) {
        self.status.set_state(s);
    }

    pub(crate) fn abort_limit(&self) -> u32 {
        self.abort_limit.load(Relaxed)
    }

    pub(crate) fn set_abort_limit(&self, acl: u8) {
        self.abort_limit.store(u32::from(acl) + 1, Relaxed);
    }

    /// Bounds normal shutdowns by the controller's RTD3 entry latency.
    pub(crate) fn set_shutdown_timeout(&self, id: &IdentifyController) {
        self.shutdown_ms
            .store(id.shutdown_timeout_ms(DEFAULT_SHUTDOWN_MS), Relaxed);
    }

    /// Marks the function as held by the PCI core or released; returns whether it was held.
    pub(crate) fn set_held(&self, on: bool) -> bool {
        self.held.xchg(on, Relaxed)
    }

    pub(crate) fn is_held(&self) -> bool {
        self.held.load(Relaxed)
    }

    /// Resets done so far.
    pub(crate) fn resets(&self) -> u32 {
        self.resets.load(Relaxed)
    }

    /// The reset count an admin timeout saw when it asked for a reset nobody has started
    /// yet (see `pending_reset`).
    pub(crate) fn pending_reset(&self) -> Option<u32> {
        self.pending_reset.load(Relaxed).checked_sub(1)
    }

    /// A reset, a hold or a give-up started: what an admin timeout asked for is done.
    /// Under the reset lock.
    pub(crate) fn clear_pending_reset(&self) {
        self.pending_reset.store(0, Relaxed);
    }

    /// Counts a reset; returns how many there were, this one included.
    pub(crate) fn count_reset(&self) -> u32 {
        self.resets.fetch_add(1, Relaxed) + 1
    }

    /// Waits until `CSTS & mask == want`, at most `ms` (CAP.TO); see [`wait_csts`].
    pub(crate) fn wait_csts(&self, mask: u32, want: u32, ms: u32) -> Result {
        wait_csts(self.dev(), &self.regs, mask, want, ms)
    }

    /// Clears CC.EN and waits for CSTS.RDY to drop; see [`disable`]. A controller whose
    /// registers are out of reach (memory decode off: they read as zeroes, which looks
    /// like a stopped controller) did not stop. One that did not stop loses bus mastering,
    /// so it cannot write into memory the caller then frees.
    pub(crate) fn disable(&self) -> Result {
        self.disable_after(ready_delay_ms(self.quirks()))
    }

    /// [`Self::disable`], waiting `delay_ms` before the first look at CSTS.RDY.
    fn disable_after(&self, delay_ms: u32) -> Result {
        self.running.store(false, Relaxed);
        let stopped = disable(self.dev(), &self.regs, self.cap, delay_ms).and_then(|()| {
            if self.memory_decode() {
                Ok(())
            } else {
                dev_err!(self.dev(), "registers out of reach (memory decode off)\n");
                Err(EIO)
            }
        });
        if stopped.is_err() {
            dev_warn!(
                self.dev(),
                "rnvme{}: controller did not stop: bus mastering disabled\n",
                self.instance
            );
            pci_clear_master(self.pdev);
        }
        stopped
    }

    /// Whether the controller's registers are reachable (PCI command register's Memory
    /// Space Enable).
    fn memory_decode(&self) -> bool {
        self.pdev.config_space().read16(PCI_COMMAND) & PCI_COMMAND_MEMORY != 0
    }

    /// A controller that did not stop because its registers were out of reach (memory
    /// decoding turned off: a stray config write, a PCI error) may be fine: turn decoding
    /// back on, as C's reset does with `pci_enable_device_mem`, and stop it properly. It
    /// lost bus mastering when it did not stop, so it wrote nothing meanwhile; the enable
    /// that follows restores that. An error if decoding was on (the controller itself did
    /// not stop) or it does not stop now.
    pub(crate) fn stop_with_decode_restored(&self) -> Result {
        let config = self.pdev.config_space();
        let cmd = config.read16(PCI_COMMAND);
        if cmd & PCI_COMMAND_MEMORY != 0 {
            return Err(EIO);
        }
        config.write16(cmd | PCI_COMMAND_MEMORY, PCI_COMMAND);
        dev_warn!(
            self.dev(),
            "rnvme{}: memory decoding was off: turned back on\n",
            self.instance
        );
        self.disable()
    }

    /// Whether the controller runs with every I/O command set it has enabled (CC.CSS =
    /// 110b), as C chooses whenever CAP.CSS offers it: namespaces then report their command
    /// set, and those of sets rnvme has no block device for are told apart (a zoned
    /// namespace run as NVM takes reads and most writes, failing the rest).
    pub(crate) fn multi_css(&self) -> bool {
        self.cap.css() & r::CAP_CSS_CSI != 0
    }

    /// Programs the admin queue and enables the controller (NVMe Base Spec 3.5.1).
    pub(crate) fn enable(&self) -> Result {
        let q = self.admin.queue();
        self.regs.set_aqa(r::aqa(u32::from(q.depth())));
        self.regs.set_asq(q.sq_dma());
        self.regs.set_acq(q.cq_dma());
        let css = if self.multi_css() {
            cc::CSS_CSI
        } else {
            cc::CSS_NVM
        };
        self.running.store(true, Relaxed);
        self.regs.set_cc(r::cc_enable(PAGE_SHIFT as u32, css));
        self.wait_csts(csts::RDY, csts::RDY, self.cap.timeout_ms())
    }

    /// Normal shutdown, then disable. Safe to call more than once.
    pub(crate) fn shutdown(&self) {
        let regs = &self.regs;
        let s = regs.csts();
        if r::device_gone(s) {
            self.running.store(false, Relaxed);
            return;
        }
        let c = regs.cc();
        if c & cc::EN != 0 && s & csts::RDY != 0 && s & csts::CFS == 0 {
            regs.set_cc((c & !cc::SHN_MASK) | cc::SHN_NORMAL);
            let ms = self.shutdown_ms.load(Relaxed);
            if self
                .wait_csts(csts::SHST_MASK, csts::SHST_CMPLT, ms)
                .is_err()
            {
                dev_warn!(self.dev(), "shutdown did not complete; disabling\n");
            }
        }
        // As the C driver, a shutdown is not delayed by delay_before_chk_rdy: CSTS.SHST
        // said when it was done.
        let _ = self.disable_after(0);
    }

    pub(crate) fn quirks(&self) -> Quirks {
        Quirks(self.quirks.load(Relaxed))
    }

    /// Adds the quirks found once the controller is identified (by the probe, before
    /// anything else runs that could change them).
    pub(crate) fn add_quirks(&self, q: Quirks) {
        self.quirks.store(self.quirks.load(Relaxed) | q.0, Relaxed);
    }

    /// The interrupt types the controller may use: all, but MSI for broken_msi.
    pub(crate) fn irq_types(&self) -> IrqTypes {
        if self.quirks().has(Quirks::BROKEN_MSI) {
            IrqTypes::all().without_msi()
        } else {
            IrqTypes::all()
        }
    }

    /// Shuts the controller down unless it is stopped already (by unbind, a suspend, a
    /// reset that failed): what a teardown does whatever ran before it.
    pub(crate) fn stop(&self) {
        if self.running.load(Relaxed) {
            self.shutdown();
        }
    }

    /// Runs an admin command without data; logs failures.
    pub(crate) fn admin_cmd(&self, cmd: Command, what: &str) -> Result<u32> {
        match self.admin.execute(cmd, params::admin_timeout_ms()) {
            Ok(c) => Ok(c.result),
            Err(e) => {
                dev_err!(self.dev(), "{what} failed: {e}\n");
                if e == CmdError::Timeout {
                    self.admin_timed_out();
                }
                Err(e.into())
            }
        }
    }

    /// An admin command of the driver's own timed out. The controller is stopped (it may
    /// still own the command's buffer). Outside a reset (which handles its own failures)
    /// it is then reset, as the C driver resets on an admin timeout: admin commands are
    /// refused and I/O timeouts wait until the controller work has reset it, instead of
    /// I/O stalling on a disabled controller until two I/O timeouts have passed.
    fn admin_timed_out(&self) {
        let _ = self.disable();
        self.admin.faults.delay_admin_timeout();
        // Not under the reset lock (a reset's own commands time out here while it holds
        // it): a reset or a give-up may have run since this command was sent, and a dead
        // controller must stay dead, so only a live one moves to resetting.
        if !self.status.change(State::Live, State::Resetting) {
            return;
        }
        // Commands taken back before the reset is published: a reset that an I/O timeout
        // starts as soon as it sees it must find them cancelled, or its restart's `resume`
        // and `open_users` would come before this `cancel`, leaving them refused for good.
        self.admin.cancel();
        self.pending_reset
            .store(self.resets().wrapping_add(1).max(1), Relaxed);
        // Without the work (a probe before it started it), the probe fails with the command.
        if let Some(work) = self.admin.events() {
            work.reset_needed();
        }
    }

    /// Identify Controller, read and checked (at probe and after every reset).
    pub(crate) fn identify_controller(&self) -> Result<IdentifyController> {
        let data = self.admin_read(
            Command::identify(cns::CONTROLLER, 0, 0),
            "Identify Controller",
        )?;
        IdentifyController::parse(&data).map_err(|e| {
            dev_err!(self.dev(), "bad Identify Controller data: {e}\n");
            EIO
        })
    }

    /// Runs an admin command that transfers `data` (up to one page) to the controller.
    pub(crate) fn admin_write(&self, cmd: Command, data: &[u8], what: &str) -> Result<u32> {
        let buf = Coherent::<u8>::from_slice(self.dev(), data, GFP_KERNEL)?;
        // On a timeout `admin_cmd` stops the controller before `buf` is freed.
        self.admin_cmd(cmd.with_prp(buf.dma_address(), 0), what)
    }

    /// Enables Advanced Command Retry (Host Behavior Support) if the controller asks for
    /// retry delays, as the C driver's `nvme_configure_host_options`: only then does it
    /// set Command Retry Delay in its statuses. A controller that refuses keeps working
    /// with immediate retries.
    pub(crate) fn configure_host_options(&self, id: &IdentifyController) {
        if !id.wants_acre() {
            return;
        }
        let _ = self.admin_write(
            Command::set_features(feature::HOST_BEHAVIOR, 0),
            &host_behavior(true),
            "Set Features (Host Behavior Support)",
        );
    }

    /// Runs an admin command that transfers up to one page into a fresh DMA buffer and
    /// returns a copy of the data.
    pub(crate) fn admin_read(&self, cmd: Command, what: &str) -> Result<KVec<u8>> {
        self.try_admin_read(cmd).map_err(|e| {
            dev_err!(self.dev(), "{what} failed: {e}\n");
            e.into()
        })
    }

    /// [`Self::admin_cmd`] without the log line, for commands a controller may refuse or
    /// user space asks for (hwmon thresholds).
    pub(crate) fn try_admin_cmd(&self, cmd: Command) -> Result<u32, CmdError> {
        match self.admin.execute(cmd, params::admin_timeout_ms()) {
            Ok(c) => Ok(c.result),
            Err(e) => {
                if e == CmdError::Timeout {
                    self.admin_timed_out();
                }
                Err(e)
            }
        }
    }

    /// [`Self::admin_read`] without the log line, for commands a controller may refuse.
    pub(crate) fn try_admin_read(&self, cmd: Command) -> Result<KVec<u8>, CmdError> {
        let buf = Coherent::<u8>::zeroed_slice(self.dev(), IDENTIFY_SIZE, GFP_KERNEL)?;
        let cmd = cmd.with_prp(buf.dma_address(), 0);
        if let Err(e) = self.admin.execute(cmd, params::admin_timeout_ms()) {
            if e == CmdError::Timeout {
                // The device may still write into `buf`: it is stopped before `buf` is
                // freed.
                self.admin_timed_out();
            }
            return Err(e);
        }
        let mut out = KVec::from_elem(0u8, IDENTIFY_SIZE, GFP_KERNEL).map_err(|_| ENOMEM)?;
        (&buf).copy_to_slice(&mut out);
        Ok(out)
    }

    /// Asks for `want` I/O queue pairs (Set Features, Number of Queues); returns how many the
    /// controller grants, at most `want`.
    pub(crate) fn set_num_queues(&self, want: u16) -> Result<u16> {
        let granted = self.admin_cmd(
            Command::set_num_queues(want, want),
            "Set Features (Number of Queues)",
        )?;
        let nsqa = (granted & 0xffff) + 1;
        let ncqa = (granted >> 16) + 1;
        Ok(u32::from(want).min(nsqa).min(ncqa) as u16)
    }

    /// Enables the SMART / health warnings and the asynchronous event notices the controller
    /// supports (of [`AEC_NOTICES`], out of its OAES) and sends an Asynchronous Event Request. Called once
    /// the event handler is in place, and after every reset (which clears both).
    pub(crate) fn start_async_events(&self, oaes: Option<u32>) {
        if let Some(oaes) = oaes {
            // Every SMART / health critical warning (bits 7:0, which every controller
            // has; the C driver enables none), and the notices the controller has.
            self.aen_config
                .store(u32::from(critical::ALL) | (oaes & AEC_NOTICES), Relaxed);
        }
        let config = self.aen_config.load(Relaxed);
        if config != 0
            && self
                .admin_cmd(
                    Command::set_features(feature::ASYNC_EVENT_CONFIG, config),
                    "Set Features (Asynchronous Event Configuration)",
                )
                .is_err()
        {
            return;
        }
        if let Err(e) = self.admin.submit_aer() {
            dev_warn!(
                self.dev(),
                "cannot send an asynchronous event request: {}\n",
                e.to_errno()
            );
        }
    }

    /// Hands the shadow doorbell buffers to the controller and switches `queues` to them. On
    /// failure the queues keep using MMIO doorbells only.
    pub(crate) fn enable_shadow(&self, shadow: &ShadowDoorbells, queues: &[Arc<IoQueue<'_>>]) {
        let (dbs, eis) = shadow.dma();
        match self.admin_cmd(
            Command::doorbell_buffer_config(dbs, eis),
            "Doorbell Buffer Config",
        ) {
            Ok(_) => {
                for q in queues {
                    q.queue.set_shadow(true);
                }
            }
            Err(_) => dev_warn!(self.dev(), "using MMIO doorbells only\n"),
        }
    }

    /// Creates `q` on the device: its completion queue, then its submission queue.
    pub(crate) fn create_io_queue(&self, q: &IoQueue<'_>) -> Result {
        let (qid, depth) = (q.queue.qid(), q.queue.depth());
        self.admin_cmd(
            Command::create_io_cq(qid, depth, q.queue.cq_dma(), q.vector(), !q.polled()),
            "Create I/O Completion Queue",
        )?;
        if let Err(e) = self.admin_cmd(
            Command::create_io_sq(
                qid,
                depth,
                q.queue.sq_dma(),
                qid,
                self.quirks().has(Quirks::MEDIUM_PRIO_SQ),
            ),
            "Create I/O Submission Queue",
        ) {
            let _ = self.admin_cmd(Command::delete_io_cq(qid), "Delete I/O Completion Queue");
            return Err(e);
        }
        Ok(())
    }
}

/// Waits until `CSTS & mask == want`, at most `ms` (CAP.TO), failing on fatal status or a
/// device that reads as all ones. A free function so probe can use it before [`Hw`] exists.
pub(crate) fn wait_csts(
    dev: &Device<Bound>,
    regs: &Regs<'_>,
    mask: u32,
    want: u32,
    ms: u32,
) -> Result {
    // The spec's timeout is a worst case; allow at least half a second for emulators.
    let limit = Delta::from_millis(i64::from(ms.max(500)));
    let mut last = 0;
    let polled = read_poll_timeout(
        || {
            last = regs.csts();
            if r::device_gone(last) {
                dev_err!(dev, "device gone (CSTS all ones)\n");
                return Err(ENODEV);
            }
            if last & csts::CFS != 0 && want != 0 && last & mask != want {
                dev_err!(dev, "controller fatal status (CSTS {:#x})\n", last);
                return Err(EIO);
            }
            Ok(last)
        },
        |s| s & mask == want,
        Delta::from_micros(POLL_US),
        limit,
    );
    if polled == Err(ETIMEDOUT) {
        dev_err!(
            dev,
            "timeout after {} ms waiting for CSTS {:#x}/{:#x} (now {:#x})\n",
            limit.as_millis(),
            want,
            mask,
            last
        );
    }
    polled.map(|_| ())
}

/// How long a controller with `quirks` needs after CC.EN is cleared before CSTS.RDY means
/// anything (delay_before_chk_rdy), in milliseconds.
pub(crate) fn ready_delay_ms(quirks: Quirks) -> u32 {
    if quirks.has(Quirks::DELAY_BEFORE_CHK_RDY) {
        DELAY_BEFORE_CHK_RDY_MS
    } else {
        0
    }
}

/// Clears CC.EN and waits for CSTS.RDY to drop: the controller stops all DMA and forgets
/// its queues. Waits `delay_ms` first if it clears EN (a controller that reports RDY too
/// early).
pub(crate) fn disable(dev: &Device<Bound>, regs: &Regs<'_>, cap: Cap, delay_ms: u32) -> Result {
    let c = regs.cc();
    if c & cc::EN != 0 {
        regs.set_cc(c & !cc::EN);
        if delay_ms > 0 {
            kernel::time::delay::fsleep(Delta::from_millis(i64::from(delay_ms)));
        }
    } else if regs.csts() & csts::RDY == 0 {
        return Ok(());
    }
    // With EN already clear but RDY still set, the controller is finishing a reset.
    wait_csts(dev, regs, csts::RDY, 0, cap.timeout_ms())
}

/// The controller enabled at probe: stopped when this is dropped, unless it was already
/// (see [`Hw::stop`]). After a failed probe this is what stops it before the admin queue's
/// memory goes.
pub(crate) struct Enabled<'b>(Arc<Hw<'b>>);

impl<'b> Enabled<'b> {
    /// Programs the admin queue and enables the controller; disables it again if it does
    /// not become ready.
    pub(crate) fn new(hw: &Arc<Hw<'b>>) -> Result<Self> {
        let this = Enabled(hw.clone());
        hw.enable()?;
        Ok(this)
    }
}

impl Drop for Enabled<'_> {
    fn drop(&mut self) {
        self.0.stop();
    }
}
