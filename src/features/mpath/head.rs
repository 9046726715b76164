// SPDX-License-Identifier: GPL-2.0

//! A multipath head: the namespace's disk through which bios reach one of its paths, the
//! path choice (`iopolicy`), and the bios waiting for a path.

use super::PathState;
use crate::{
    ioctl::{self, DiskIds, DiskLink, NsKey},
    ioq::NvmeBlk,
    kernel_ext::{
        block::{
            bio::{Bio, BioList, DiskHandle},
            bio_disk::{BioDisk, BioOperations},
            mq::{BlkStatus, Limits, Owned},
        },
        spinlock::SpinLockIrqSave,
        srcu_box::SrcuBox,
        sync::{system_dfl, MemallocNoio},
        sysfs::SysfsBuf,
    },
    params::Policy,
    shared::CtrlLink,
    spec::ns_ids::NsIds,
    state::CtrlStatus,
    state::{State, Waiter},
};
use core::sync::atomic::{AtomicUsize, Ordering::Relaxed as R};
use kernel::{
    impl_has_work,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, ArcBorrow, Mutex,
    },
    workqueue::{Work, WorkItem},
};

/// What a head needs of a path's disk to set its own limits.
#[derive(Clone, Copy)]
pub(crate) struct PathLimits {
    pub(crate) limits: Limits,
    pub(crate) sectors: u64,
    pub(crate) read_only: bool,
}

/// One controller's way to a head's namespace.
#[derive(Clone)]
pub(super) struct Path {
    pub(super) ctrl: u32,
    pub(super) disk: DiskHandle,
    pub(super) status: Arc<CtrlStatus>,
    pub(super) state: Arc<PathState>,
    /// The controller, for the head's ioctls.
    pub(super) link: Arc<CtrlLink>,
    pub(super) limits: PathLimits,
}

impl Path {
    pub(super) fn usable(&self) -> bool {
        self.serves() && self.status.state() == State::Live
    }

    /// Live, or may be again (resetting, and not being unbound).
    pub(super) fn available(&self) -> bool {
        self.serves() && self.status.state() != State::Dead && !self.status.leaving()
    }

    pub(super) fn serves(&self) -> bool {
        self.state.usable.load(Relaxed) && !self.state.removed.load(Relaxed)
    }
}

/// A head's paths, replaced whole (under the registry's lock) and read under SRCU.
pub(super) struct Paths {
    pub(super) list: KVec<Path>,
}

/// A namespace of a subsystem, reached through one path per controller.
#[pin_data]
pub(crate) struct Head {
    pub(super) subsys: u32,
    pub(super) nsid: u32,
    pub(super) ids: NsIds,
    pub(super) disk_ids: DiskIds,
    pub(super) shared: bool,
    pub(super) policy: Policy,
    #[pin]
    pub(super) paths: SrcuBox<Paths>,
    /// Serializes changes of `paths` and of the head disk's limits: held briefly, never
    /// across I/O or an allocation that may start I/O.
    #[pin]
    pub(super) paths_lock: Mutex<()>,
    /// The head's disk (`None` before its first path and after its last).
    #[pin]
    pub(super) disk: Mutex<Option<BioDisk<HeadOps>>>,
    /// Bios waiting for a path, and the disk they name.
    #[pin]
    pub(super) requeue: SpinLockIrqSave<Requeue>,
    /// Out of its subsystem (no path left), under the registry's lock.
    pub(super) removed: Atomic<bool>,
    #[pin]
    pub(super) work: Work<Head>,
    /// `numa`: the index of the path in use.
    pub(super) current: AtomicUsize,
    /// `round-robin`: where the next choice starts.
    pub(super) next: AtomicUsize,
    /// "No available path" was logged.
    pub(super) warned: Atomic<bool>,
}

/// A head's waiting bios.
pub(super) struct Requeue {
    /// A reference to the head disk, which bios taken back from a path name again; `None`
    /// once the head is being removed (bios then fail instead of waiting).
    pub(super) dev: Option<DiskHandle>,
    pub(super) bios: BioList,
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

impl Waiter for Head {
    fn kick(self: Arc<Self>) {
        Head::kick(&self);
    }
}

impl Head {
    pub(super) fn kick(self: &Arc<Self>) {
        // Already queued: the run to come takes every bio.
        let _ = system_dfl().enqueue(self.clone());
    }

    /// Replaces the path list by what `f` makes of it. Serialized by `paths_lock`; without
    /// I/O for memory (callers may hold a frozen path queue).
    pub(super) fn replace_paths(
        &self,
        f: impl FnOnce(&KVec<Path>, &mut KVec<Path>) -> Result,
    ) -> Result {
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
    pub(super) fn stacked(&self) -> (Limits, u64, bool) {
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
    pub(super) fn apply_limits(&self) -> Result {
        let _serial = self.paths_lock.lock();
        let (limits, sectors, ro) = self.stacked();
        match &*self.disk.lock() {
            Some(d) => d.update(limits, sectors, ro),
            None => Ok(()),
        }
    }

    /// The path for the next bio, as the policy says; `None` if no path is live.
    pub(super) fn choose<'p>(&self, paths: &'p Paths) -> Option<&'p Path> {
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
    pub(super) fn wait_for_path(self: &Arc<Self>, bio: Bio) {
        let mut r = self.requeue.lock();
        if r.dev.is_none() {
            drop(r);
            bio.end(BlkStatus::IoErr);
            return;
        }
        r.bios.push(bio);
        drop(r);
        // A controller that went live, dead or leaving between the choice and now kicked
        // before the bio was queued: look again. (The kick's work takes `requeue` after
        // the state was stored, and this look comes after `requeue` was released: either
        // the work saw this bio, or this look sees the new state.)
        let paths = self.paths.read();
        if self.choose(&paths).is_some() || !paths.list.iter().any(Path::available) {
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
            ns: NsKey::any(head.nsid),
            ids: head.disk_ids,
        };
        ioctl::disk_ioctl(&disk, writable, partition, cmd, arg)
    }
}
