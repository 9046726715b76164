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
//!   spreads bios over every live path (parameter `iopolicy`, read when a subsystem is made).
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
    ioctl::DiskIds,
    kernel_ext::{
        block::{
            bio::{BioList, DiskHandle, FrozenDisks},
            bio_disk::BioDisk,
        },
        spinlock::new_spinlock_irqsave,
        srcu_box::SrcuBox,
        sync::flush_work,
    },
    params::Policy,
    shared::CtrlLink,
    spec::{ns_ids::NsIds, subsys::Nqn},
    state::CtrlStatus,
};
use core::sync::atomic::AtomicUsize;
use kernel::{
    new_mutex, new_work,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        global_lock, Arc,
    },
};

mod head;

pub(crate) use head::PathLimits;
use head::{Head, Path, Paths, Requeue};

global_lock! {
    // SAFETY: `init` runs in the module's init, before the driver is registered.
    unsafe(uninit) static SUBSYSTEMS: Mutex<KVec<Subsystem>> = KVec::new();
}

/// Sets the subsystem registry up; called once, at module load.
pub(crate) fn init() {
    // SAFETY: called once, before any controller can probe.
    unsafe { SUBSYSTEMS.init() };
}

/// One NVM subsystem's controllers and heads, in the registry.
struct Subsystem {
    nqn: Nqn,
    /// Its number (`rnvme<S>n<N>`): its first controller's, reserved while it lives.
    instance: u32,
    /// Controller numbers and ids of its controllers.
    ctrls: KVec<(u32, u16)>,
    heads: KVec<Arc<Head>>,
    /// How its heads choose a path: `iopolicy` when the subsystem was made (C's
    /// `subsys->iopolicy`), so one write cannot split a subsystem's heads.
    policy: Policy,
}

/// A controller's place in its subsystem; leaves it when dropped.
pub(crate) struct Membership {
    nqn: Nqn,
    ctrl: u32,
    /// The subsystem's number.
    pub(crate) instance: u32,
    /// Its subsystem's path policy.
    pub(crate) policy: Policy,
    /// Controller status, for the paths.
    status: Arc<CtrlStatus>,
}

impl Membership {
    /// Joins (or creates) the subsystem named `nqn`. A controller id already present is
    /// refused, as C's `nvme_validate_cntlid` (two controllers the host cannot tell apart).
    pub(crate) fn join(
        nqn: Nqn,
        ctrl: u32,
        cntlid: u16,
        status: Arc<CtrlStatus>,
        policy: Policy,
    ) -> Result<Self> {
        let mut subs = SUBSYSTEMS.lock();
        let (instance, policy) = match subs.iter_mut().find(|s| s.nqn == nqn) {
            Some(s) => {
                if s.ctrls.iter().any(|&(_, id)| id == cntlid) {
                    pr_err!("rnvme{ctrl}: controller id {cntlid} already in subsystem {nqn}\n");
                    return Err(EINVAL);
                }
                s.ctrls.push((ctrl, cntlid), GFP_KERNEL)?;
                (s.instance, s.policy)
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
                        policy,
                    },
                    GFP_KERNEL,
                )?;
                crate::instance::reserve_instance(ctrl);
                (ctrl, policy)
            }
        };
        Ok(Self {
            nqn,
            ctrl,
            instance,
            status,
            policy,
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
        let (subsys, policy) = (s.instance, s.policy);
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

    /// Freezes the head disks of this controller's subsystem until the guard is dropped,
    /// on this task: a command that must run alone on the namespaces (Format NVM, Sanitize)
    /// is not raced by bios that enter a head and take another controller's path (C's
    /// `nvme_mpath_start_freeze` and `nvme_mpath_wait_freeze`). The registry's lock is held
    /// only to collect the disks, not while they drain.
    pub(crate) fn freeze_heads(&self) -> Result<FrozenDisks> {
        let mut disks = KVec::new();
        {
            let subs = SUBSYSTEMS.lock();
            if let Some(s) = subs.iter().find(|s| s.nqn == self.nqn) {
                for h in s.heads.iter() {
                    if let Some(d) = h.disk.lock().as_ref() {
                        disks.push(d.handle(), GFP_KERNEL)?;
                    }
                }
            }
        }
        Ok(DiskHandle::freeze_all(disks))
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
            // Another controller's scan made a new head for the namespace meanwhile (its
            // probe runs beside this one): two heads would share a disk name. This path
            // waits for the next scan, which links it to that head.
            if s.heads.iter().any(|h| h.nsid == head.nsid) {
                return Err(EAGAIN);
            }
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
        self.status.add_head(head.clone())?;
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
            self.status.remove_head(head);
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
                    crate::instance::release_instance(s.instance);
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
