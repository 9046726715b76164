// SPDX-License-Identifier: GPL-2.0

//! Native multipath, as C's `multipath.c`: the controllers of one NVM subsystem (same
//! Subsystem NQN) share its namespaces, and each namespace of a subsystem that may have
//! several controllers (CMIC bit 1) gets one head disk, `/dev/rnvme<S>n<N>` (S: the number
//! of the subsystem's first controller, kept for the subsystem's life), whose bios go to one
//! of its paths: the hidden disk of that namespace on each controller
//! (`rnvme<S>c<C>n<N>`).
//!
//! - The head chooses a path per bio under SRCU, without a lock: `numa` keeps using one
//!   live path until it fails (one NUMA node here: the first live one), `round-robin`
//!   spreads bios over every live path (parameter `iopolicy`, read when a head is made).
//! - A request that fails on a path with a path error (status code type 3, which includes
//!   the host's own aborts at a reset or a controller's death) gives its bios back to the
//!   head (`blk_steal_bios`), which submits them again from a work item: on another live
//!   path, or, while no path is live but one may come back (its controller resetting),
//!   once a controller is live again. With no path left, bios fail.
//! - A path leaves its head before its disk is deleted (the SRCU grace period ensures no
//!   bio is still choosing it); the head disk goes with its last path.
//!
//! Zoned namespaces and namespaces rnvme can only pass commands to (hidden disks) keep a
//! disk per controller, as before (C stacks zoned limits and reports zones through a path;
//! not done here yet).

use crate::{
    blk::NvmeBlk,
    hw::State,
    ioctl::{self, CtrlLink, DiskIds, DiskLink},
    kernel_ext::{
        block::{
            bio::{Bio, BioList, DiskHandle},
            bio_disk::{BioDisk, BioOperations},
            mq::{BlkStatus, Limits, Owned},
        },
        spinlock::{new_spinlock_irqsave, SpinLockIrqSave},
        srcu_box::SrcuBox,
        sync::{flush_work, system_dfl, MemallocNoio},
        sysfs::SysfsBuf,
    },
    spec::{ns_ids::NsIds, subsys::Nqn},
};
use core::sync::atomic::{AtomicUsize, Ordering::Relaxed as R};
use kernel::{
    impl_has_work, new_mutex, new_work,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        global_lock, Arc, ArcBorrow, Mutex,
    },
    workqueue::{Work, WorkItem},
};

global_lock! {
    // SAFETY: `init` runs in the module's init, before the driver is registered.
    unsafe(uninit) static SUBSYSTEMS: Mutex<KVec<Subsystem>> = KVec::new();
}

/// Sets the subsystem registry up; called once, at module load.
pub(crate) fn init() {
    // SAFETY: called once, before any controller can probe.
    unsafe { SUBSYSTEMS.init() };
}

/// How a head chooses among its live paths (C's `iopolicy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Policy {
    /// One path until it fails: the closest to the submitting CPU (one NUMA node here).
    Numa,
    /// Every live path in turn.
    RoundRobin,
}

impl Policy {
    pub(crate) fn parse(s: &[u8]) -> Option<Self> {
        match s {
            b"" | b"numa" => Some(Self::Numa),
            b"round-robin" => Some(Self::RoundRobin),
            _ => None,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Numa => "numa",
            Self::RoundRobin => "round-robin",
        }
    }
}

/// A controller's state as its paths see it, and the heads it has paths in (kicked when it
/// is live again). Shared between the controller (`Hw`) and the heads.
#[pin_data]
pub(crate) struct CtrlStatus {
    state: Atomic<u32>,
    #[pin]
    heads: Mutex<KVec<Arc<Head>>>,
}

impl CtrlStatus {
    pub(crate) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                state: Atomic::new(State::Live as u32),
                heads <- new_mutex!(KVec::new()),
            }),
            GFP_KERNEL,
        )
    }

    pub(crate) fn state(&self) -> State {
        match self.state.load(Relaxed) {
            0 => State::Live,
            1 => State::Resetting,
            _ => State::Dead,
        }
    }

    /// Sets the state; a controller live again (or dead: nothing will come back through it)
    /// has each head it serves submit the bios waiting for a path.
    pub(crate) fn set_state(&self, s: State) {
        self.state.store(s as u32, Relaxed);
        self.changed(s);
    }

    /// Moves the state from `from` to `s`, unless it is no longer `from`; returns whether
    /// it did. For those who change it without the reset lock: they must not overwrite
    /// what a reset or a give-up stored since they looked.
    pub(crate) fn change(&self, from: State, s: State) -> bool {
        let ok = self.state.cmpxchg(from as u32, s as u32, Relaxed).is_ok();
        if ok {
            self.changed(s);
        }
        ok
    }

    fn changed(&self, s: State) {
        if s != State::Resetting {
            for h in self.heads.lock().iter() {
                h.kick();
            }
        }
    }
}

/// One NVM subsystem's controllers and heads, in the registry.
struct Subsystem {
    nqn: Nqn,
    /// Its number (`rnvme<S>n<N>`): its first controller's, reserved while it lives.
    instance: u32,
    /// Controller numbers and ids of its controllers.
    ctrls: KVec<(u32, u16)>,
    heads: KVec<Arc<Head>>,
}

/// A controller's place in its subsystem; leaves it when dropped.
pub(crate) struct Membership {
    nqn: Nqn,
    ctrl: u32,
    /// The subsystem's number.
    pub(crate) instance: u32,
    /// Controller status, for the paths.
    status: Arc<CtrlStatus>,
}

impl Membership {
    /// Joins (or creates) the subsystem named `nqn`. A controller id already present is
    /// refused, as C's `nvme_validate_cntlid` (two controllers the host cannot tell apart).
    pub(crate) fn join(nqn: Nqn, ctrl: u32, cntlid: u16, status: Arc<CtrlStatus>) -> Result<Self> {
        let mut subs = SUBSYSTEMS.lock();
        let instance = match subs.iter_mut().find(|s| s.nqn == nqn) {
            Some(s) => {
                if s.ctrls.iter().any(|&(_, id)| id == cntlid) {
                    pr_err!("rnvme{ctrl}: controller id {cntlid} already in subsystem {nqn}\n");
                    return Err(EINVAL);
                }
                s.ctrls.push((ctrl, cntlid), GFP_KERNEL)?;
                s.instance
            }
            None => {
                let mut ctrls = KVec::new();
                ctrls.push((ctrl, cntlid), GFP_KERNEL)?;
                subs.push(
                    Subsystem {
                        nqn,
                        instance: ctrl,
                        ctrls,
                        heads: KVec::new(),
                    },
                    GFP_KERNEL,
                )?;
                crate::ctrl::reserve_instance(ctrl);
                ctrl
            }
        };
        Ok(Self {
            nqn,
            ctrl,
            instance,
            status,
        })
    }

    /// The head of namespace `nsid` in this subsystem, made if it has none: a namespace
    /// several controllers report must be shared (NMIC) by all of them and have the same
    /// identifiers everywhere (C's `nvme_find_ns_head` and `nvme_init_ns_head`).
    pub(crate) fn head(
        &self,
        nsid: u32,
        ids: NsIds,
        shared: bool,
        disk_ids: DiskIds,
        policy: Policy,
    ) -> Result<HeadLink> {
        let mut subs = SUBSYSTEMS.lock();
        let s = subs.iter_mut().find(|s| s.nqn == self.nqn).ok_or(ENODEV)?;
        if let Some(h) = s.heads.iter().find(|h| h.nsid == nsid) {
            if !shared || !h.shared {
                pr_err!(
                    "rnvme{}: namespace {nsid} reported by several controllers of subsystem {} but not shared\n",
                    self.ctrl,
                    self.nqn
                );
                return Err(EINVAL);
            }
            if h.ids != ids {
                pr_err!(
                    "rnvme{}: namespace {nsid}: identifiers differ from another controller's\n",
                    self.ctrl
                );
                return Err(EINVAL);
            }
            return self.link(h.clone());
        }
        let subsys = s.instance;
        let head = Arc::pin_init(
            try_pin_init!(Head {
                subsys,
                nsid,
                ids,
                disk_ids,
                shared,
                policy,
                paths <- SrcuBox::new(KBox::new(Paths { list: KVec::new() }, GFP_KERNEL)?),
                paths_lock <- new_mutex!(()),
                disk <- new_mutex!(None),
                requeue <- new_spinlock_irqsave!(Requeue {
                    dev: None,
                    bios: BioList::new(),
                }),
                removed: Atomic::new(false),
                work <- new_work!("rnvme::mpath_requeue"),
                current: AtomicUsize::new(0),
                next: AtomicUsize::new(0),
                warned: Atomic::new(false),
            }),
            GFP_KERNEL,
        )?;
        let link = self.link(head.clone())?;
        s.heads.push(head, GFP_KERNEL)?;
        Ok(link)
    }

    fn link(&self, head: Arc<Head>) -> Result<HeadLink> {
        Ok(HeadLink {
            head,
            ctrl: self.ctrl,
            status: self.status.clone(),
            state: Arc::new(
                PathState {
                    usable: Atomic::new(true),
                    removed: Atomic::new(false),
                },
                GFP_KERNEL,
            )?,
        })
    }
}

/// A namespace's place in its head, kept by the namespace's disk on this controller.
pub(crate) struct HeadLink {
    pub(crate) head: Arc<Head>,
    ctrl: u32,
    status: Arc<CtrlStatus>,
    /// Shared with the path in the head's list.
    state: Arc<PathState>,
}

/// What the head reads of a path besides its controller's state.
struct PathState {
    /// The namespace can still be served through it (cleared when its format changed to
    /// one the disk cannot serve, until the disk is removed).
    usable: Atomic<bool>,
    /// Taken out of the head: never chosen again.
    removed: Atomic<bool>,
}

impl HeadLink {
    /// Adds this controller's path (its hidden disk `disk`) to the head, and the head's disk
    /// if it has none yet (after the path, so the partition scan finds one); a head whose
    /// last path went meanwhile is put back in its subsystem. Waiting bios are kicked: the
    /// new path may be the first live one.
    pub(crate) fn attach(&self, disk: DiskHandle, link: Arc<CtrlLink>, p: PathLimits) -> Result {
        let head = &self.head;
        let mut subs = SUBSYSTEMS.lock();
        if head.removed.load(Relaxed) {
            let s = subs
                .iter_mut()
                .find(|s| s.instance == head.subsys)
                .ok_or(ENODEV)?;
            s.heads.push(head.clone(), GFP_KERNEL)?;
            head.removed.store(false, Relaxed);
        }
        self.state.removed.store(false, Relaxed);
        let path = Path {
            ctrl: self.ctrl,
            disk,
            status: self.status.clone(),
            state: self.state.clone(),
            link,
            limits: p,
        };
        head.replace_paths(|old, new| {
            for q in old.iter().filter(|q| q.ctrl != path.ctrl) {
                new.push(q.clone(), GFP_KERNEL)?;
            }
            new.push(path, GFP_KERNEL)?;
            Ok(())
        })?;
        self.status.heads.lock().push(head.clone(), GFP_KERNEL)?;
        let added = if head.disk.lock().is_some() {
            head.apply_limits()
        } else {
            // Added without holding the head's locks: its partition scan reads through a
            // path, which may be frozen by a command whose revalidation updates the head.
            let (limits, sectors, ro) = head.stacked();
            BioDisk::new(
                limits,
                fmt!("rnvme{}n{}", head.subsys, head.nsid),
                sectors,
                ro,
                head.clone(),
                // Before the partition scan, whose reads may fail over.
                |dev| head.requeue.lock().dev = Some(dev),
            )
            .map(|d| *head.disk.lock() = Some(d))
        };
        drop(subs);
        head.kick();
        added
    }

    /// The namespace can no longer be served through this path.
    pub(crate) fn set_unusable(&self) {
        self.state.usable.store(false, Relaxed);
    }

    /// Takes this controller's path out of the head (its disk is about to be deleted, or was
    /// never added); the head's disk goes with its last path: the bios waiting for a path
    /// fail, the requeue work is flushed, then the disk is deleted (under the registry's lock,
    /// so a head made or revived for the same namespace never meets its name still in use).
    /// Does nothing the second time.
    pub(crate) fn detach(&self) {
        let head = &self.head;
        let _subs_guard;
        {
            let mut subs = SUBSYSTEMS.lock();
            // Skipped from now on even if the list cannot be rebuilt (no memory).
            self.state.removed.store(true, Relaxed);
            let had = head.paths.read().list.iter().any(|q| q.ctrl == self.ctrl);
            if had {
                let _ = head.replace_paths(|old, new| {
                    for q in old.iter().filter(|q| q.ctrl != self.ctrl) {
                        new.push(q.clone(), GFP_KERNEL)?;
                    }
                    Ok(())
                });
            }
            self.status.heads.lock().retain(|h| !Arc::ptr_eq(h, head));
            let left = head
                .paths
                .read()
                .list
                .iter()
                .any(|q| !q.state.removed.load(Relaxed));
            if left {
                if had {
                    let _ = head.apply_limits();
                }
                return;
            }
            if head.removed.xchg(true, Relaxed) {
                return;
            }
            if let Some(s) = subs.iter_mut().find(|s| s.instance == head.subsys) {
                s.heads.retain(|h| !Arc::ptr_eq(h, head));
            }
            _subs_guard = subs;
        }
        let waiting = {
            let mut r = head.requeue.lock();
            r.dev = None;
            r.bios.take()
        };
        // Ended with an error when dropped (they name the head disk, still there).
        drop(waiting);
        flush_work(&head.work);
        // `del_gendisk`: bios inside `submit_bio` finish (they find no path and fail).
        let disk = head.disk.lock().take();
        drop(disk);
    }

    /// The path's format changed (a Format NVM): the head follows. Called with the path's
    /// queue frozen: takes only the head's own locks, which are never held across I/O.
    pub(crate) fn update(&self, p: PathLimits) {
        let head = &self.head;
        let replaced = head.replace_paths(|old, new| {
            for q in old.iter() {
                let mut q = q.clone();
                if q.ctrl == self.ctrl {
                    q.limits = p;
                }
                new.push(q, GFP_KERNEL)?;
            }
            Ok(())
        });
        if replaced.is_ok() {
            let _ = head.apply_limits();
        }
    }
}

impl Drop for HeadLink {
    /// A namespace whose path disk was never added (or whose attach failed) leaves no head
    /// without paths behind.
    fn drop(&mut self) {
        self.detach();
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        let mut subs = SUBSYSTEMS.lock();
        if let Some(i) = subs.iter().position(|s| s.nqn == self.nqn) {
            subs[i].ctrls.retain(|e| e.0 != self.ctrl);
            if subs[i].ctrls.is_empty() && subs[i].heads.is_empty() {
                let s = subs.remove(i);
                if let Ok(s) = s {
                    crate::ctrl::release_instance(s.instance);
                }
            }
        }
        if subs.is_empty() {
            // The registry is a static, never dropped: give its buffer back with its last
            // subsystem, or it outlives the module.
            drop(core::mem::replace(&mut *subs, KVec::new()));
        }
    }
}

/// What a head needs of a path's disk to set its own limits.
#[derive(Clone, Copy)]
pub(crate) struct PathLimits {
    pub(crate) limits: Limits,
    pub(crate) sectors: u64,
    pub(crate) read_only: bool,
}

/// One controller's way to a head's namespace.
#[derive(Clone)]
struct Path {
    ctrl: u32,
    disk: DiskHandle,
    status: Arc<CtrlStatus>,
    state: Arc<PathState>,
    /// The controller, for the head's ioctls.
    link: Arc<CtrlLink>,
    limits: PathLimits,
}

impl Path {
    fn usable(&self) -> bool {
        self.serves() && self.status.state() == State::Live
    }

    /// Live, or may be again (resetting).
    fn available(&self) -> bool {
        self.serves() && self.status.state() != State::Dead
    }

    fn serves(&self) -> bool {
        self.state.usable.load(Relaxed) && !self.state.removed.load(Relaxed)
    }
}

/// A head's paths, replaced whole (under the registry's lock) and read under SRCU.
struct Paths {
    list: KVec<Path>,
}

/// A namespace of a subsystem, reached through one path per controller.
#[pin_data]
pub(crate) struct Head {
    subsys: u32,
    nsid: u32,
    ids: NsIds,
    disk_ids: DiskIds,
    shared: bool,
    policy: Policy,
    #[pin]
    paths: SrcuBox<Paths>,
    /// Serializes changes of `paths` and of the head disk's limits: held briefly, never
    /// across I/O or an allocation that may start I/O.
    #[pin]
    paths_lock: Mutex<()>,
    /// The head's disk (`None` before its first path and after its last).
    #[pin]
    disk: Mutex<Option<BioDisk<HeadOps>>>,
    /// Bios waiting for a path, and the disk they name.
    #[pin]
    requeue: SpinLockIrqSave<Requeue>,
    /// Out of its subsystem (no path left), under the registry's lock.
    removed: Atomic<bool>,
    #[pin]
    work: Work<Head>,
    /// `numa`: the index of the path in use.
    current: AtomicUsize,
    /// `round-robin`: where the next choice starts.
    next: AtomicUsize,
    /// "No available path" was logged.
    warned: Atomic<bool>,
}

/// A head's waiting bios.
struct Requeue {
    /// A reference to the head disk, which bios taken back from a path name again; `None`
    /// once the head is being removed (bios then fail instead of waiting).
    dev: Option<DiskHandle>,
    bios: BioList,
}

impl_has_work! {
    impl HasWork<Self> for Head { self.work }
}

impl WorkItem for Head {
    type Pointer = Arc<Head>;

    /// Submits the waiting bios again, through the head (which chooses a path for each).
    fn run(this: Arc<Head>) {
        let mut list = this.requeue.lock().bios.take();
        while let Some(bio) = list.pop() {
            bio.resubmit();
        }
    }
}

impl Head {
    fn kick(self: &Arc<Self>) {
        // Already queued: the run to come takes every bio.
        let _ = system_dfl().enqueue(self.clone());
    }

    /// Replaces the path list by what `f` makes of it. Serialized by `paths_lock`; without
    /// I/O for memory (callers may hold a frozen path queue).
    fn replace_paths(&self, f: impl FnOnce(&KVec<Path>, &mut KVec<Path>) -> Result) -> Result {
        let _noio = MemallocNoio::save();
        let _serial = self.paths_lock.lock();
        let mut new = KVec::new();
        f(&self.paths.read().list, &mut new)?;
        self.paths
            .replace(KBox::new(Paths { list: new }, GFP_KERNEL)?);
        Ok(())
    }

    /// The head's limits: what every path can do (C's `queue_limits_stack_bdev`), with the
    /// format (block sizes, metadata) of the newest path, as C takes the one it just read.
    fn stacked(&self) -> (Limits, u64, bool) {
        let paths = self.paths.read();
        let mut it = paths.list.iter().rev();
        let Some(first) = it.next() else {
            return (Limits::default(), 0, true);
        };
        let mut l = first.limits.limits;
        let mut ro = first.limits.read_only;
        for p in it {
            l = l.stack(&p.limits.limits);
            ro |= p.limits.read_only;
        }
        (l, first.limits.sectors, ro)
    }

    /// Sets the head disk's limits from its paths'.
    fn apply_limits(&self) -> Result {
        let _serial = self.paths_lock.lock();
        let (limits, sectors, ro) = self.stacked();
        match &*self.disk.lock() {
            Some(d) => d.update(limits, sectors, ro),
            None => Ok(()),
        }
    }

    /// The path for the next bio, as the policy says; `None` if no path is live.
    fn choose<'p>(&self, paths: &'p Paths) -> Option<&'p Path> {
        let list = &paths.list;
        let n = list.len();
        let start = match self.policy {
            Policy::Numa => {
                let cur = self.current.load(R);
                if list.get(cur).is_some_and(Path::usable) {
                    return list.get(cur);
                }
                0
            }
            Policy::RoundRobin => self.next.fetch_add(1, R),
        };
        let i = (0..n)
            .map(|k| (start + k) % n)
            .find(|&i| list[i].usable())?;
        if self.policy == Policy::Numa {
            self.current.store(i, R);
        }
        list.get(i)
    }

    /// Gives the bios of `rq`, which failed on a path of this head, back to the head, to be
    /// submitted again on another path (C's `nvme_failover_req`). Any context.
    pub(crate) fn failover(self: &Arc<Self>, rq: Owned<'_, NvmeBlk>) {
        let mut r = self.requeue.lock();
        let Requeue { dev, bios } = &mut *r;
        match dev {
            Some(dev) => {
                bios.steal(rq, dev);
                drop(r);
                self.kick();
            }
            None => {
                // The head is being removed: nothing to send them to.
                drop(r);
                rq.end(BlkStatus::IoErr);
            }
        }
    }

    /// Keeps `bio` until a path may take it.
    fn wait_for_path(self: &Arc<Self>, bio: Bio) {
        let mut r = self.requeue.lock();
        if r.dev.is_none() {
            drop(r);
            bio.end(BlkStatus::IoErr);
            return;
        }
        r.bios.push(bio);
        drop(r);
        // A controller that went live between the choice and now kicked before the bio
        // was queued: look again.
        if self.choose(&self.paths.read()).is_some() {
            self.kick();
        }
    }
}

/// The head disk's operations.
pub(crate) struct HeadOps;

impl BioOperations for HeadOps {
    type Data = Head;

    fn submit_bio(head: ArcBorrow<'_, Head>, bio: Bio) {
        let Some(bio) = bio.split_to_limits() else {
            return;
        };
        let paths = head.paths.read();
        if let Some(p) = head.choose(&paths) {
            bio.submit_to(&p.disk);
        } else if paths.list.iter().any(Path::available) {
            drop(paths);
            Arc::from(head).wait_for_path(bio);
        } else {
            drop(paths);
            // Once per head (C: rate limited, which the crate's printing does not offer).
            if !head.warned.xchg(true, Relaxed) {
                pr_warn!(
                    "rnvme{}n{}: no available path: failing I/O\n",
                    head.subsys,
                    head.nsid
                );
            }
            bio.end(BlkStatus::IoErr);
        }
    }

    /// The namespace's identifiers, as on its paths (and as on C's head disks): udev's
    /// `/dev/disk/by-id` links name the head.
    const DISK_ATTRS: &'static [&'static CStr] = ioctl::DISK_ATTR_NAMES;

    fn disk_attr_visible(head: &Head, index: usize) -> bool {
        head.disk_ids.attr_visible(index)
    }

    fn disk_attr_show(head: &Head, index: usize, out: &mut SysfsBuf<'_>) -> core::fmt::Result {
        head.disk_ids.show_attr(head.nsid, index, out)
    }

    /// Runs on a live path's controller (C's `nvme_ns_head_ioctl`), outside the SRCU
    /// section: a passthrough command may take long.
    fn ioctl(
        head: ArcBorrow<'_, Head>,
        writable: bool,
        partition: bool,
        cmd: u32,
        arg: usize,
    ) -> Result<isize> {
        let link = {
            let paths = head.paths.read();
            let p = head
                .choose(&paths)
                .or_else(|| paths.list.iter().find(|p| p.available()))
                .ok_or(ENODEV)?;
            p.link.clone()
        };
        let disk = DiskLink {
            ctrl: link,
            nsid: head.nsid,
            ids: head.disk_ids,
        };
        ioctl::disk_ioctl(&disk, writable, partition, cmd, arg)
    }
}
