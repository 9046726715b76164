// SPDX-License-Identifier: GPL-2.0

//! The user interface of a controller: `/dev/rnvme<N>` and the namespace disks' ioctls
//! (the kernel's NVMe passthrough uapi, so nvme-cli works), and its sysfs attributes.
//!
//! Everything here reaches the controller through its [`CtrlLink`] lease: after unbind, an
//! open file or block device gets `ENODEV` instead of touching freed memory.
//!
//! - Admin commands (`NVME_IOCTL_ADMIN_CMD`, `ADMIN64_CMD`) run on the admin queue with the
//!   user's data copied through a DMA buffer of the driver's own (at most `ns::max_transfer`);
//!   a timeout resets the controller, as the C driver does, since only a disabled controller
//!   is sure to have stopped writing into that buffer.
//! - I/O commands (`NVME_IOCTL_IO_CMD`, `IO64_CMD`, `SUBMIT_IO`) go through blk-mq as
//!   driver-private requests on the namespace's queues: same tags, timeouts, aborts and
//!   resets as block I/O, user memory pinned by the block layer.
//! - `CAP_SYS_ADMIN` is needed for passthrough, reset and rescan, as in the C driver.
//!   `SUBMIT_IO` needs none for reads, and a block device opened for writing for writes.

use crate::{
    admin::CmdError,
    ctrl::Shared,
    hw::State,
    kernel_ext::{
        block::mq::PrivateIo,
        chardev::{capable_sys_admin, CharDevOps},
        lease::Lease,
        sysfs::SysfsBuf,
        uring_cmd::{issue, Queued, UringCmd, CMD_FIXED},
    },
    params,
    spec::{
        identify::AsciiField,
        ns_ids::NsIds,
        passthru::{self as pt, Direction, Layout, PassthruCmd, UserIo},
        prp,
    },
};
use core::fmt::Write;
use kernel::{
    dma::Coherent,
    io::io_write,
    page::PAGE_SIZE,
    prelude::*,
    sync::{Arc, LockClassKey},
    types::ForLt,
    uaccess::{UserPtr, UserSlice},
};

/// What open files, disks and queued work hold of a controller: its shared state, borrowed
/// from the bound device.
pub(crate) type CtrlLink = Lease<ForLt!(Shared<'_>)>;

/// A namespace disk's `private_data`: its controller and namespace id.
pub(crate) struct DiskLink {
    pub(crate) ctrl: Arc<CtrlLink>,
    pub(crate) nsid: u32,
    /// The namespace's identifiers, for its sysfs attributes (which must not take the
    /// controller's locks: removing a disk under them waits for running readers).
    pub(crate) ids: DiskIds,
}

/// What a disk's identifier attributes show: fixed while the disk exists (C removes a disk
/// whose namespace changed identifiers; rnvme keeps what it found when adding it).
pub(crate) struct DiskIds {
    pub(crate) ids: NsIds,
    pub(crate) vid: u16,
    pub(crate) serial: AsciiField<20>,
    pub(crate) model: AsciiField<40>,
}

/// sysfs attributes of a namespace's disk (`/sys/block/rnvme<C>n<N>/`), as the C driver's:
/// the identifiers udev names `/dev/disk/by-id` links after.
pub(crate) const DISK_ATTR_NAMES: &[&CStr] = &[c"wwid", c"uuid", c"nguid", c"eui", c"csi", c"nsid"];

impl DiskLink {
    /// Whether the disk has attribute `index` of [`DISK_ATTR_NAMES`]: as C, `uuid` needs a
    /// UUID or an NGUID (it shows the NGUID without a UUID), `nguid` and `eui` their own.
    pub(crate) fn attr_visible(&self, index: usize) -> bool {
        let ids = &self.ids.ids;
        match DISK_ATTR_NAMES.get(index).map(|n| n.to_bytes()) {
            Some(b"uuid") => ids.has_uuid() || ids.has_nguid(),
            Some(b"nguid") => ids.has_nguid(),
            Some(b"eui") => ids.has_eui64(),
            Some(_) => true,
            None => false,
        }
    }

    /// Writes attribute `index` of [`DISK_ATTR_NAMES`].
    pub(crate) fn show_attr(&self, index: usize, out: &mut SysfsBuf<'_>) -> core::fmt::Result {
        let d = &self.ids;
        match DISK_ATTR_NAMES.get(index).map(|n| n.to_bytes()) {
            Some(b"wwid") => {
                let (serial, model) = (d.serial.as_str(), d.model.as_str());
                d.ids.write_wwid(out, d.vid, serial, model, self.nsid)
            }
            Some(b"uuid") => d.ids.write_uuid(out),
            Some(b"nguid") => d.ids.write_nguid(out),
            Some(b"eui") => d.ids.write_eui(out),
            Some(b"csi") => writeln!(out, "{}", d.ids.csi),
            Some(b"nsid") => writeln!(out, "{}", self.nsid),
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
];

/// Write-only controls of `/sys/class/misc/rnvme<N>`, as the C driver's: a write of
/// anything resets the controller (returning once it is back, or with the reset's error),
/// or rescans its namespaces.
const STORE_ATTR_NAMES: &[&CStr] = &[c"reset_controller", c"rescan_controller"];

impl CharDevOps for CtrlChar {
    type Link = CtrlLink;
    const ATTRS: &'static [&'static CStr] = ATTR_NAMES;
    const STORE_ATTRS: &'static [&'static CStr] = STORE_ATTR_NAMES;

    fn ioctl(link: &CtrlLink, cmd: u32, arg: usize, _writable: bool) -> Result<isize> {
        link.with(|s| ctrl_ioctl(s, cmd, arg))
            .unwrap_or(Err(ENODEV))
    }

    fn lock_class() -> Pin<&'static LockClassKey> {
        kernel::static_lock_class!()
    }

    fn show(link: &CtrlLink, index: usize, out: &mut SysfsBuf<'_>) -> core::fmt::Result {
        link.with(|s| show_attr(s, index, out))
            .unwrap_or(Err(core::fmt::Error))
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
        _ => Err(core::fmt::Error),
    }
}

/// ioctls of `/dev/rnvme<N>`.
fn ctrl_ioctl(s: &Shared<'_>, cmd: u32, arg: usize) -> Result<isize> {
    match cmd {
        pt::NVME_IOCTL_ADMIN_CMD => admin_passthru(s, arg, Layout::Result32),
        pt::NVME_IOCTL_ADMIN64_CMD => admin_passthru(s, arg, Layout::Result64),
        pt::NVME_IOCTL_IO_CMD => io_passthru(s, None, arg, Layout::Result32),
        pt::NVME_IOCTL_IO64_CMD => io_passthru(s, None, arg, Layout::Result64),
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
    pub(crate) nsid: u32,
}

impl CharDevOps for NsChar {
    type Link = NsLink;
    const ATTRS: &'static [&'static CStr] = &[];

    fn ioctl(link: &NsLink, cmd: u32, arg: usize, writable: bool) -> Result<isize> {
        ns_ioctl(&link.ctrl, link.nsid, writable, cmd, arg)
    }

    fn show(_link: &NsLink, _index: usize, _out: &mut SysfsBuf<'_>) -> core::fmt::Result {
        Err(core::fmt::Error)
    }

    fn uring_cmd(
        link: &NsLink,
        cmd: UringCmd,
        issue_flags: u32,
        _writable: bool,
    ) -> Result<Queued> {
        ns_uring_cmd(&link.ctrl, link.nsid, cmd, issue_flags)
    }

    fn lock_class() -> Pin<&'static LockClassKey> {
        kernel::static_lock_class!()
    }
}

/// Most iovecs one vectored command may have (the kernel's `UIO_MAXIOV`).
const UIO_MAXIOV: u32 = 1024;

/// io_uring passthrough of an I/O command on namespace `nsid` (`NVME_URING_CMD_IO`, and
/// `_IO_VEC` with a vector of buffers), as C's
/// `nvme_uring_cmd_io`: the command comes from the 128-byte SQE, runs on the namespace's
/// queues without the submitter waiting, and completes with its NVMe status (or a negative
/// errno) and its result in a 32-byte CQE. Needs `CAP_SYS_ADMIN`, as the ioctls.
fn ns_uring_cmd(ctrl: &CtrlLink, nsid: u32, cmd: UringCmd, issue_flags: u32) -> Result<Queued> {
    // As C (`nvme_uring_cmd_checks`): a big SQE for the command, a big CQE for the result.
    let both = issue::SQE128 | issue::CQE32;
    if issue_flags & both != both {
        return Err(EOPNOTSUPP);
    }
    let vec = match cmd.cmd_op() {
        pt::NVME_URING_CMD_IO => false,
        // `addr` points to an array of `data_len` iovecs.
        pt::NVME_URING_CMD_IO_VEC => true,
        // As C: admin commands are the controller device's.
        pt::NVME_URING_CMD_ADMIN => return Err(ENOTTY),
        _ => return Err(ENOTTY),
    };
    require_admin()?;
    // Registered buffers are not taken yet.
    if cmd.flags() & CMD_FIXED != 0 {
        return Err(EOPNOTSUPP);
    }
    let raw = cmd.sqe128_cmd(issue_flags).ok_or(EOPNOTSUPP)?;
    let c = PassthruCmd::parse(&raw[..pt::URING_CMD_SIZE]).ok_or(EINVAL)?;
    // As C (`nvme_validate_passthru_nsid`): the command is for this namespace.
    if c.nsid != nsid {
        return Err(EINVAL);
    }
    ctrl.with(|s| {
        // A vector's total is checked against the queue limits when it is mapped; its
        // count against the kernel's (UIO_MAXIOV).
        let limit = if vec { UIO_MAXIOV } else { s.max_data() };
        c.validate(limit).map_err(|_| EINVAL)?;
        let command = c.command();
        let disks = s.disks.lock();
        let ts = disks.as_ref().ok_or(ENODEV)?;
        let disk = ts.find_disk(|ns| ns.nsid() == nsid).ok_or(ENODEV)?;
        let nowait = issue_flags & issue::NONBLOCK != 0;
        cmd.queue_with(|ctx| {
            // SAFETY: `ctx` is the command `queue_with` queued, handed over once.
            unsafe {
                disk.submit_private_uring(
                    ctx,
                    PrivateIo {
                        to_device: c.direction() == Direction::ToDevice,
                        addr: c.addr as usize,
                        len: c.data_len,
                        timeout_ms: c.timeout_ms,
                        nowait,
                        vec,
                    },
                    |rq| rq.set_passthru(&command),
                )
            }
        })
    })
    .unwrap_or(Err(ENODEV))
}

/// ioctls of a namespace's block device.
pub(crate) fn disk_ioctl(p: &DiskLink, writable: bool, cmd: u32, arg: usize) -> Result<isize> {
    ns_ioctl(&p.ctrl, p.nsid, writable, cmd, arg)
}

/// ioctls of namespace `nsid` (its block device or its generic device; `writable`: opened
/// for writing), as C's `nvme_ns_ioctl`.
fn ns_ioctl(ctrl: &CtrlLink, nsid: u32, writable: bool, cmd: u32, arg: usize) -> Result<isize> {
    ctrl.with(|s| match cmd {
        pt::NVME_IOCTL_ID => Ok(nsid as isize),
        pt::NVME_IOCTL_ADMIN_CMD => admin_passthru(s, arg, Layout::Result32),
        pt::NVME_IOCTL_ADMIN64_CMD => admin_passthru(s, arg, Layout::Result64),
        pt::NVME_IOCTL_IO_CMD => io_passthru(s, Some(nsid), arg, Layout::Result32),
        pt::NVME_IOCTL_IO64_CMD => io_passthru(s, Some(nsid), arg, Layout::Result64),
        pt::NVME_IOCTL_SUBMIT_IO => submit_io(s, nsid, writable, arg),
        _ => Err(ENOTTY),
    })
    .unwrap_or(Err(ENODEV))
}

fn require_admin() -> Result {
    if capable_sys_admin() {
        Ok(())
    } else {
        Err(EACCES)
    }
}

/// Copies the user's passthrough structure in and checks it.
fn read_cmd(arg: usize, layout: Layout, max_data: u32) -> Result<PassthruCmd> {
    let mut raw = [0u8; pt::PASSTHRU64_SIZE];
    let size = layout.size();
    UserSlice::new(UserPtr::from_addr(arg), size)
        .reader()
        .read_slice(&mut raw[..size])?;
    let c = PassthruCmd::parse(&raw[..size]).ok_or(EINVAL)?;
    c.validate(max_data).map_err(|e| {
        pr_debug!("rnvme: passthrough refused: {}\n", e.as_str());
        EINVAL
    })?;
    Ok(c)
}

/// Writes the command's result dword(s) back into the user's structure.
fn write_result(arg: usize, layout: Layout, result: u64) -> Result {
    let (off, len) = layout.result_field();
    let mut w = UserSlice::new(UserPtr::from_addr(arg).wrapping_byte_add(off), len).writer();
    match layout {
        Layout::Result32 => w.write_slice(&(result as u32).to_ne_bytes()),
        Layout::Result64 => w.write_slice(&result.to_ne_bytes()),
    }
}

/// An NVMe status (without the phase bit) as the ioctl's return value, as the C driver.
fn status_ret(st: crate::spec::completion::Status) -> isize {
    (st.0 & 0x7fff) as isize
}

/// `NVME_IOCTL_ADMIN_CMD` / `ADMIN64_CMD`.
fn admin_passthru(s: &Shared<'_>, arg: usize, layout: Layout) -> Result<isize> {
    require_admin()?;
    let c = read_cmd(arg, layout, s.max_data())?;
    let len = c.data_len as usize;
    let dev = s.hw.dev();
    // The data buffer, whole pages: PRP entries address pages.
    let buf = if len > 0 {
        let alloc = len.div_ceil(PAGE_SIZE) * PAGE_SIZE;
        let mut data = KVec::from_elem(0u8, alloc, GFP_KERNEL)?;
        if c.direction() == Direction::ToDevice {
            UserSlice::new(UserPtr::from_addr(c.addr as usize), len)
                .reader()
                .read_slice(&mut data[..len])?;
        }
        Some(Coherent::from_slice(dev, &data, GFP_KERNEL)?)
    } else {
        None
    };
    // A PRP list for transfers of more than two pages.
    let pages = len.div_ceil(PAGE_SIZE);
    let list = if pages > 2 {
        Some(Coherent::<u64>::zeroed_slice(dev, pages - 1, GFP_KERNEL)?)
    } else {
        None
    };
    let mut cmd = c.command();
    if let Some(b) = &buf {
        let list_dma = list.as_ref().map_or(0, |l| l.dma_address());
        let mut put_err = false;
        let p = prp::build(
            core::iter::once((b.dma_address(), c.data_len)),
            PAGE_SIZE as u64,
            pages.saturating_sub(1),
            list_dma,
            |i, addr| {
                put_err |= match &list {
                    Some(l) => list_put(l, i, addr).is_err(),
                    // Two pages have no list: the second page, passed here as entry 0, is
                    // PRP2 itself. (More would need a list: `pages > 2` made one.)
                    None => i != 0,
                }
            },
        )
        .map_err(|_| EINVAL)?;
        if put_err {
            return Err(EINVAL);
        }
        cmd = cmd.with_prp(p.prp1, p.prp2);
    }
    let timeout = match c.timeout_ms {
        0 => params::admin_timeout_ms(),
        t => t,
    };
    let (status, result) = match s.with_effects(c.opcode, || s.hw.admin.execute_user(cmd, timeout))
    {
        Ok(cqe) => (0, cqe.result),
        Err(CmdError::Status(st)) => (status_ret(st), 0),
        Err(CmdError::Timeout) => {
            dev_warn!(
                dev,
                "rnvme{}: admin passthrough opcode {:#04x} timed out after {} ms\n",
                s.hw.instance,
                c.opcode,
                timeout
            );
            // The controller may still use `buf`: stop it (by a reset) before it is freed.
            let _ = s.reset("admin passthrough timeout");
            return Err(ETIMEDOUT);
        }
        Err(CmdError::Reset) => return Err(EINTR),
        Err(CmdError::Removed) => {
            // The controller may still write into them until removal stops it.
            s.hw.admin.park((buf, list));
            return Err(ENODEV);
        }
        Err(CmdError::Kernel(e)) => return Err(e),
    };
    if status == 0 && c.direction() == Direction::FromDevice {
        if let Some(b) = &buf {
            UserSlice::new(UserPtr::from_addr(c.addr as usize), len)
                .writer()
                .write_dma(b, 0, len)?;
        }
    }
    write_result(arg, layout, u64::from(result))?;
    Ok(status)
}

/// Writes entry `i` of a PRP list.
fn list_put(list: &Coherent<[u64]>, i: usize, addr: u64) -> Result {
    io_write!(list, [try: i], addr.to_le());
    Ok(())
}

/// `NVME_IOCTL_IO_CMD` / `IO64_CMD`: on the disk's namespace (`nsid`), or on the
/// namespace the command names (the character device).
fn io_passthru(s: &Shared<'_>, nsid: Option<u32>, arg: usize, layout: Layout) -> Result<isize> {
    require_admin()?;
    // Checked before the block layer pins or bounces the user's buffer.
    let c = read_cmd(arg, layout, s.max_data())?;
    let (status, result) = run_io(s, nsid.unwrap_or(c.nsid), &c)?;
    write_result(arg, layout, u64::from(result))?;
    Ok(status)
}

/// `NVME_IOCTL_SUBMIT_IO`: a read or write of the disk's namespace.
fn submit_io(s: &Shared<'_>, nsid: u32, writable: bool, arg: usize) -> Result<isize> {
    let mut raw = [0u8; pt::USER_IO_SIZE];
    UserSlice::new(UserPtr::from_addr(arg), raw.len())
        .reader()
        .read_slice(&mut raw)?;
    let io = UserIo::parse(&raw).ok_or(EINVAL)?;
    let lba_shift = s.lba_shift(nsid).ok_or(ENODEV)?;
    let c = io.to_passthru(nsid, lba_shift).map_err(|_| EINVAL)?;
    c.validate(s.max_data()).map_err(|_| EINVAL)?;
    if c.direction() == Direction::ToDevice && !writable && !capable_sys_admin() {
        return Err(EBADF);
    }
    run_io(s, nsid, &c).map(|(status, _)| status)
}

/// Runs an I/O command on namespace `nsid`'s queues; returns (ioctl status, result).
fn run_io(s: &Shared<'_>, nsid: u32, c: &PassthruCmd) -> Result<(isize, u32)> {
    let mut cmd = c.command();
    cmd.dw[1] = nsid;
    let disks = s.disks.lock();
    let ts = disks.as_ref().ok_or(ENODEV)?;
    let disk = ts.find_disk(|ns| ns.nsid() == nsid).ok_or(EINVAL)?;
    let (status, result) = disk.execute_private(
        c.direction() == Direction::ToDevice,
        c.addr as usize,
        c.data_len,
        c.timeout_ms,
        |rq| rq.set_passthru(&cmd),
        |rq| (rq.status(), rq.result()),
    )?;
    Ok((status_ret(status), result))
}
