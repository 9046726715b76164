// SPDX-License-Identifier: GPL-2.0

//! The user interface of a controller: `/dev/rnvme<N>` and the namespace disks' ioctls
//! (the kernel's NVMe passthrough uapi, so nvme-cli works), and its sysfs attributes.
//!
//! Everything here reaches the controller through its [`CtrlLink`] lease: after unbind, an
//! open file or block device gets `ENODEV` instead of touching freed memory.
//!
//! The passthrough commands themselves are [`crate::passthru`]'s. `CAP_SYS_ADMIN` is needed
//! for reset and rescan, as in the C driver.

use crate::{
    kernel_ext::{
        chardev::CharDevOps,
        sysfs::SysfsBuf,
        uring_cmd::{Queued, UringCmd},
    },
    passthru::{self, require_admin, Caller},
    shared::{CtrlLink, Shared},
    spec::{
        identify::AsciiField,
        ns_ids::NsIds,
        passthru::{self as pt, Layout},
    },
    state::State,
};
use core::fmt::Write;
use kernel::{
    prelude::*,
    sync::{Arc, LockClassKey},
};

/// Which namespace a handle means: its id and, for a handle of one disk (its block or
/// generic device, [`NsKey::bound`]), that disk's serial, which no later disk of the same
/// id has. As C binds such a handle to its own `nvme_ns`, a handle whose disk is gone finds
/// nothing, rather than a namespace attached again under the same id.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct NsKey {
    pub(crate) nsid: u32,
    serial: Option<u64>,
}

impl NsKey {
    /// Namespace `nsid`, whichever disk serves it now (a command on the controller's
    /// device names its namespace; a head's command goes to its path's namespace).
    pub(crate) fn any(nsid: u32) -> Self {
        Self { nsid, serial: None }
    }

    /// The disk of namespace `nsid` with `serial` (`Namespace::key`), not a later one.
    pub(crate) fn bound(nsid: u32, serial: u64) -> Self {
        Self {
            nsid,
            serial: Some(serial),
        }
    }

    /// Bound to one disk: when it is gone, the handle's commands fail with `ENODEV`.
    pub(crate) fn is_bound(&self) -> bool {
        self.serial.is_some()
    }

    /// Whether `disk`, a disk's own key, is the one this key means.
    pub(crate) fn matches(&self, disk: NsKey) -> bool {
        disk.nsid == self.nsid && (self.serial.is_none() || disk.serial == self.serial)
    }
}

/// A namespace disk's `private_data`: its controller and namespace.
pub(crate) struct DiskLink {
    pub(crate) ctrl: Arc<CtrlLink>,
    pub(crate) ns: NsKey,
    /// The namespace's identifiers, for its sysfs attributes (which must not take the
    /// controller's locks: removing a disk under them waits for running readers).
    pub(crate) ids: DiskIds,
}

/// What a disk's identifier attributes show: fixed while the disk exists (C removes a disk
/// whose namespace changed identifiers; rnvme keeps what it found when adding it).
#[derive(Clone, Copy)]
pub(crate) struct DiskIds {
    pub(crate) ids: NsIds,
    pub(crate) vid: u16,
    pub(crate) serial: AsciiField<20>,
    pub(crate) model: AsciiField<40>,
}

/// sysfs attributes of a namespace's disk (`/sys/block/rnvme<C>n<N>/`), as the C driver's:
/// the identifiers udev names `/dev/disk/by-id` links after. And the controller's serial
/// number and model, which C's rules find on the disk's parent (its controller device):
/// rnvme's disks are children of the PCI function, so `udev/60-rnvme.rules` reads them here.
pub(crate) const DISK_ATTR_NAMES: &[&CStr] = &[
    c"wwid", c"uuid", c"nguid", c"eui", c"csi", c"nsid", c"serial", c"model",
];

impl DiskIds {
    /// Whether a disk of namespace `nsid` with these identifiers has attribute `index` of
    /// [`DISK_ATTR_NAMES`]: as C, `uuid` needs a UUID or an NGUID (it shows the NGUID
    /// without a UUID), `nguid` and `eui` their own.
    pub(crate) fn attr_visible(&self, index: usize) -> bool {
        let ids = &self.ids;
        match DISK_ATTR_NAMES.get(index).map(|n| n.to_bytes()) {
            Some(b"uuid") => ids.has_uuid() || ids.has_nguid(),
            Some(b"nguid") => ids.has_nguid(),
            Some(b"eui") => ids.has_eui64(),
            Some(_) => true,
            None => false,
        }
    }

    /// Writes attribute `index` of [`DISK_ATTR_NAMES`] of namespace `nsid`'s disk (a path's
    /// or a head's: the same, as C's).
    pub(crate) fn show_attr(
        &self,
        nsid: u32,
        index: usize,
        out: &mut SysfsBuf<'_>,
    ) -> core::fmt::Result {
        let d = self;
        match DISK_ATTR_NAMES.get(index).map(|n| n.to_bytes()) {
            Some(b"wwid") => {
                let (serial, model) = (d.serial.as_str(), d.model.as_str());
                d.ids.write_wwid(out, d.vid, serial, model, nsid)
            }
            Some(b"uuid") => d.ids.write_uuid(out),
            Some(b"nguid") => d.ids.write_nguid(out),
            Some(b"eui") => d.ids.write_eui(out),
            Some(b"csi") => writeln!(out, "{}", d.ids.csi),
            Some(b"nsid") => writeln!(out, "{}", nsid),
            Some(b"serial") => writeln!(out, "{}", d.serial.as_str()),
            Some(b"model") => writeln!(out, "{}", d.model.as_str()),
            _ => Err(core::fmt::Error),
        }
    }
}

/// The controller character device.
pub(crate) struct CtrlChar;

/// sysfs attributes of `/sys/class/misc/rnvme<N>` (as the C driver's `/sys/class/nvme`).
const ATTR_NAMES: &[&CStr] = &[
    c"model",
    c"serial",
    c"firmware_rev",
    c"state",
    c"queue_count",
    c"poll_queues",
    c"cntlid",
    c"resets",
    c"quirks",
    // The controller memory buffer's registers, as C's (only with one).
    c"cmb",
    c"cmbloc",
    c"cmbsz",
];

/// Write-only controls of `/sys/class/misc/rnvme<N>`, as the C driver's: a write of
/// anything resets the controller (returning once it is back, or with the reset's error),
/// or rescans its namespaces.
const STORE_ATTR_NAMES: &[&CStr] = &[c"reset_controller", c"rescan_controller"];

impl CharDevOps for CtrlChar {
    type Link = CtrlLink;
    const ATTRS: &'static [&'static CStr] = ATTR_NAMES;
    const STORE_ATTRS: &'static [&'static CStr] = STORE_ATTR_NAMES;

    fn ioctl(link: &CtrlLink, cmd: u32, arg: usize, writable: bool) -> Result<isize> {
        link.with(|s| ctrl_ioctl(s, cmd, arg, writable))
            .unwrap_or(Err(ENODEV))
    }

    fn uring_cmd(
        link: &CtrlLink,
        cmd: UringCmd,
        issue_flags: u32,
        writable: bool,
    ) -> Result<Queued> {
        passthru::ctrl_uring_cmd(link, cmd, issue_flags, writable)
    }

    fn lock_class() -> Pin<&'static LockClassKey> {
        kernel::static_lock_class!()
    }

    fn show(link: &CtrlLink, index: usize, out: &mut SysfsBuf<'_>) -> core::fmt::Result {
        link.with(|s| show_attr(s, index, out))
            .unwrap_or(Err(core::fmt::Error))
    }

    fn visible(link: &CtrlLink, index: usize) -> bool {
        match ATTR_NAMES.get(index).map(|n| n.to_bytes()) {
            Some(b"cmb" | b"cmbloc" | b"cmbsz") => {
                link.with(|s| s.hw.cmb.is_some()).unwrap_or(false)
            }
            _ => true,
        }
    }

    fn store(link: &CtrlLink, index: usize, _input: &[u8]) -> Result {
        link.with(
            |s| match STORE_ATTR_NAMES.get(index).map(|n| n.to_bytes()) {
                Some(b"reset_controller") => s.reset("reset requested through sysfs"),
                Some(b"rescan_controller") => s.rescan(),
                _ => Err(EINVAL),
            },
        )
        .unwrap_or(Err(ENODEV))
    }
}

fn show_attr(s: &Shared<'_>, index: usize, out: &mut SysfsBuf<'_>) -> core::fmt::Result {
    let id = &s.id;
    match ATTR_NAMES.get(index).map(|n| n.to_bytes()) {
        Some(b"model") => writeln!(out, "{}", id.model.as_str()),
        Some(b"serial") => writeln!(out, "{}", id.serial.as_str()),
        Some(b"firmware_rev") => writeln!(out, "{}", id.firmware.as_str()),
        Some(b"state") => writeln!(
            out,
            "{}",
            match s.hw.state() {
                State::Live => "live",
                State::Resetting => "resetting",
                State::Dead => "dead",
            }
        ),
        // As the C driver: I/O queues plus the admin queue.
        Some(b"queue_count") => {
            let (io, poll) = s.queues.counts();
            writeln!(out, "{}", io + poll + 1)
        }
        Some(b"poll_queues") => writeln!(out, "{}", s.queues.counts().1),
        Some(b"cntlid") => writeln!(out, "{}", id.cntlid),
        Some(b"resets") => writeln!(out, "{}", s.hw.resets()),
        // One name per line, or "none", as C's.
        Some(b"quirks") => write!(out, "{}", s.hw.quirks()),
        Some(b"cmb") => match &s.hw.cmb {
            Some(c) => write!(
                out,
                "cmbloc : 0x{:08x}\ncmbsz  : 0x{:08x}\n",
                c.cmbloc, c.cmbsz
            ),
            None => Err(core::fmt::Error),
        },
        Some(b"cmbloc") => {
            s.hw.cmb
                .as_ref()
                .map_or(Err(core::fmt::Error), |c| writeln!(out, "{}", c.cmbloc))
        }
        Some(b"cmbsz") => {
            s.hw.cmb
                .as_ref()
                .map_or(Err(core::fmt::Error), |c| writeln!(out, "{}", c.cmbsz))
        }
        _ => Err(core::fmt::Error),
    }
}

/// ioctls of `/dev/rnvme<N>`; `writable`: the file was opened for writing.
fn ctrl_ioctl(s: &Shared<'_>, cmd: u32, arg: usize, writable: bool) -> Result<isize> {
    let caller = Caller::chardev(writable);
    match cmd {
        pt::NVME_IOCTL_ADMIN_CMD => passthru::admin_ioctl(s, arg, Layout::Result32, caller),
        pt::NVME_IOCTL_ADMIN64_CMD => passthru::admin_ioctl(s, arg, Layout::Result64, caller),
        // As C's, I/O commands on the controller's device name their namespace.
        pt::NVME_IOCTL_IO_CMD => passthru::io_ioctl(s, None, arg, Layout::Result32, caller, false),
        pt::NVME_IOCTL_IO64_CMD => {
            passthru::io_ioctl(s, None, arg, Layout::Result64, caller, false)
        }
        pt::NVME_IOCTL_RESET => {
            require_admin()?;
            s.reset("reset requested by user space").map(|()| 0)
        }
        pt::NVME_IOCTL_RESCAN => {
            require_admin()?;
            s.rescan().map(|()| 0)
        }
        _ => Err(ENOTTY),
    }
}

/// A namespace's generic character device (`/dev/rng<C>n<N>`, as C's `/dev/ng<C>n<N>`):
/// the namespace's ioctls without its block device (no partitions, no page cache, no
/// exclusive openers in the way), and the device io_uring passthrough is meant for.
pub(crate) struct NsChar;

/// What a namespace's generic device and its open files hold: the controller and the
/// namespace id (its requests go through the namespace's disk while it has one).
pub(crate) struct NsLink {
    pub(crate) ctrl: Arc<CtrlLink>,
    pub(crate) ns: NsKey,
}

impl CharDevOps for NsChar {
    type Link = NsLink;
    const ATTRS: &'static [&'static CStr] = &[];

    fn ioctl(link: &NsLink, cmd: u32, arg: usize, writable: bool) -> Result<isize> {
        ns_ioctl(&link.ctrl, link.ns, Caller::chardev(writable), cmd, arg)
    }

    fn show(_link: &NsLink, _index: usize, _out: &mut SysfsBuf<'_>) -> core::fmt::Result {
        Err(core::fmt::Error)
    }

    fn uring_cmd(link: &NsLink, cmd: UringCmd, issue_flags: u32, writable: bool) -> Result<Queued> {
        passthru::ns_uring_cmd(&link.ctrl, link.ns, cmd, issue_flags, writable)
    }

    const IOPOLL: bool = true;

    fn lock_class() -> Pin<&'static LockClassKey> {
        kernel::static_lock_class!()
    }
}

/// ioctls of a namespace's block device (`partition`: of one of its partitions).
pub(crate) fn disk_ioctl(
    p: &DiskLink,
    writable: bool,
    partition: bool,
    cmd: u32,
    arg: usize,
) -> Result<isize> {
    let caller = Caller {
        writable,
        partition,
    };
    ns_ioctl(&p.ctrl, p.ns, caller, cmd, arg)
}

/// ioctls of namespace `ns` (its block device or its generic device), as C's
/// `nvme_ns_ioctl` (and admin commands as the controller's device's).
fn ns_ioctl(ctrl: &CtrlLink, ns: NsKey, caller: Caller, cmd: u32, arg: usize) -> Result<isize> {
    use passthru::{admin_ioctl, io_ioctl};
    let (r32, r64) = (Layout::Result32, Layout::Result64);
    ctrl.with(|s| match cmd {
        pt::NVME_IOCTL_ID => Ok(ns.nsid as isize),
        pt::NVME_IOCTL_ADMIN_CMD => admin_ioctl(s, arg, r32, caller),
        pt::NVME_IOCTL_ADMIN64_CMD => admin_ioctl(s, arg, r64, caller),
        pt::NVME_IOCTL_IO_CMD => io_ioctl(s, Some(ns), arg, r32, caller, false),
        pt::NVME_IOCTL_IO64_CMD => io_ioctl(s, Some(ns), arg, r64, caller, false),
        pt::NVME_IOCTL_IO64_CMD_VEC => io_ioctl(s, Some(ns), arg, r64, caller, true),
        pt::NVME_IOCTL_SUBMIT_IO => passthru::submit_io(s, ns, caller, arg),
        _ => Err(ENOTTY),
    })
    .unwrap_or(Err(ENODEV))
}
