// SPDX-License-Identifier: GPL-2.0

//! NVMe passthrough: commands user space builds, through the ioctls of `/dev/rnvme<N>`, the
//! namespaces' block and generic devices, and io_uring commands on the generic devices
//! (I/O) and `/dev/rnvme<N>` (admin), as the C driver's `ioctl.c`.
//!
//! - Admin commands run on the admin queue with the user's data copied through a DMA
//!   buffer of the driver's own (at most `ns::max_transfer`); a timeout resets the
//!   controller, as the C driver does, since only a disabled controller is sure to have
//!   stopped writing into that buffer. Through io_uring they run on io_uring's worker (the
//!   admin queue waits), then complete.
//! - I/O commands go through blk-mq as driver-private requests on the namespace's queues:
//!   same tags, timeouts, aborts and resets as block I/O, user memory pinned by the block
//!   layer (or a buffer registered with io_uring). Through io_uring they complete without
//!   the submitter waiting, on a polled queue when the ring polls.
//! - Who may send what is C's `nvme_cmd_allowed` ([`access`]).

use crate::{
    admin::CmdError,
    ioctl::NsKey,
    kernel_ext::{
        block::mq::{PrivateData, PrivateIo},
        chardev::capable_sys_admin,
        uring_cmd::{issue, FixedBuf, Queued, UringCmd, CMD_FIXED},
    },
    params,
    shared::CtrlLink,
    shared::Shared,
    spec::{
        access::{access, Access, Target},
        passthru::{self as pt, Direction, Layout, PassthruCmd, UserIo, UserIoMeta},
        prp,
    },
};
use kernel::{
    dma::Coherent,
    io::{io_write, Io},
    page::PAGE_SIZE,
    prelude::*,
    uaccess::{UserPtr, UserSlice},
};

/// Most iovecs one vectored command may have (the kernel's `UIO_MAXIOV`).
const UIO_MAXIOV: u32 = 1024;
/// Bytes of a `struct iovec` (64-bit callers: vectors of 32-bit ones are refused).
const IOVEC_SIZE: usize = 16;

/// The file a command came through.
#[derive(Clone, Copy)]
pub(crate) struct Caller {
    /// Opened for writing.
    pub(crate) writable: bool,
    /// A partition of a namespace's block device.
    pub(crate) partition: bool,
}

impl Caller {
    /// A character device's file.
    pub(crate) fn chardev(writable: bool) -> Self {
        Self {
            writable,
            partition: false,
        }
    }
}

/// `EACCES` unless the caller may send a command of `access`.
fn check(a: Access) -> Result {
    match a {
        Access::Open => Ok(()),
        Access::Admin => require_admin(),
        Access::Never => Err(EACCES),
    }
}

pub(crate) fn require_admin() -> Result {
    if capable_sys_admin() {
        Ok(())
    } else {
        Err(EACCES)
    }
}

/// Checks a command as C does, in its order: flags, namespace (`want_ns`: the one the
/// device is for), who may send it, then what the driver can carry out (`limit`: the most
/// bytes, or iovecs for a vector).
fn admit(
    s: &Shared<'_>,
    c: &PassthruCmd,
    want_ns: Option<NsKey>,
    caller: Caller,
    limit: u32,
) -> Result {
    if c.flags != 0 {
        return Err(EINVAL);
    }
    let allowed = match want_ns {
        Some(ns) => {
            if c.nsid != ns.nsid {
                return Err(EINVAL);
            }
            // `access` with the namespace's effects: the controller's table of it, but
            // for a partition (which passthrough would escape).
            if caller.partition {
                Access::Admin
            } else {
                s.io_access.get(c.opcode, caller.writable)
            }
        }
        None => access(c.opcode, c.cdw10_15[0], Target::Controller, caller.writable),
    };
    check(allowed)?;
    // Metadata buffers only for a namespace that has them (looked up only when given). A
    // device's own namespace that is gone fails as its command would (`run_io`).
    let ms = match want_ns {
        Some(ns) if c.metadata_buffer().is_some() => match s.integrity_size(ns) {
            Some(ms) => ms,
            None if ns.is_bound() => return Err(ENODEV),
            None => 0,
        },
        _ => 0,
    };
    c.validate(limit, ms).map_err(|e| {
        pr_debug!("rnvme: passthrough refused: {}\n", e.as_str());
        EINVAL
    })
}

/// Copies the user's passthrough structure in.
fn read_cmd(arg: usize, layout: Layout) -> Result<PassthruCmd> {
    let mut raw = [0u8; pt::PASSTHRU64_SIZE];
    let size = layout.size();
    UserSlice::new(UserPtr::from_addr(arg), size)
        .reader()
        .read_slice(&mut raw[..size])?;
    PassthruCmd::parse(&raw[..size]).ok_or(EINVAL)
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

/// An NVMe status (without the phase bit) as an ioctl's return value or an io_uring
/// command's result, as the C driver.
pub(crate) fn status_ret(st: crate::spec::completion::Status) -> i32 {
    i32::from(st.0 & 0x7fff)
}

/// `NVME_IOCTL_ADMIN_CMD` / `ADMIN64_CMD`, on any of the controller's devices.
pub(crate) fn admin_ioctl(
    s: &Shared<'_>,
    arg: usize,
    layout: Layout,
    caller: Caller,
) -> Result<isize> {
    let c = read_cmd(arg, layout)?;
    admit(s, &c, None, caller, s.max_data())?;
    let mut data = AdminData::Buf;
    let (status, result) = run_admin(s, &c, &mut data)?;
    write_result(arg, layout, result)?;
    Ok(status as isize)
}

/// Where an admin command's data is in user memory.
enum AdminData<'b> {
    /// `data_len` bytes at `addr`.
    Buf,
    /// Segments (address, length) of a vector.
    Vec(KVec<(usize, usize)>),
    /// A registered buffer.
    Fixed(&'b mut FixedBuf),
}

impl AdminData<'_> {
    /// Bytes of data for command `c`.
    fn len(&self, c: &PassthruCmd) -> usize {
        match self {
            AdminData::Buf => c.data_len as usize,
            AdminData::Vec(segs) => segs.iter().map(|s| s.1).sum(),
            AdminData::Fixed(b) => b.len(),
        }
    }

    /// Fills `out` from the user's memory.
    fn copy_in(&mut self, c: &PassthruCmd, out: &mut [u8]) -> Result {
        match self {
            AdminData::Buf => UserSlice::new(UserPtr::from_addr(c.addr as usize), out.len())
                .reader()
                .read_slice(out),
            AdminData::Vec(segs) => {
                let mut off = 0;
                for &(addr, len) in segs.iter() {
                    UserSlice::new(UserPtr::from_addr(addr), len)
                        .reader()
                        .read_slice(&mut out[off..off + len])?;
                    off += len;
                }
                Ok(())
            }
            AdminData::Fixed(b) => b.read(out),
        }
    }

    /// Copies the first `len` bytes of `buf` to the user's memory.
    fn copy_out(&mut self, c: &PassthruCmd, buf: &Coherent<[u8]>, len: usize) -> Result {
        match self {
            AdminData::Buf => UserSlice::new(UserPtr::from_addr(c.addr as usize), len)
                .writer()
                .write_dma(buf, 0, len),
            AdminData::Vec(segs) => {
                let mut off = 0;
                for &(addr, seg) in segs.iter() {
                    UserSlice::new(UserPtr::from_addr(addr), seg)
                        .writer()
                        .write_dma(buf, off, seg)?;
                    off += seg;
                }
                Ok(())
            }
            AdminData::Fixed(b) => {
                let mut bounce = KVec::from_elem(0u8, buf.size(), GFP_KERNEL)?;
                buf.copy_to_slice(&mut bounce);
                b.write(&bounce[..len])
            }
        }
    }
}

/// Reads a vector of `count` iovecs at `addr`: its segments, at most `max` bytes in all.
fn read_iovecs(addr: usize, count: u32, max: u32) -> Result<KVec<(usize, usize)>> {
    if count > UIO_MAXIOV {
        return Err(EINVAL);
    }
    let n = count as usize;
    let mut raw = KVec::from_elem(0u8, n * IOVEC_SIZE, GFP_KERNEL)?;
    UserSlice::new(UserPtr::from_addr(addr), raw.len())
        .reader()
        .read_slice(&mut raw)?;
    let mut segs = KVec::with_capacity(n, GFP_KERNEL)?;
    let mut total = 0usize;
    for iov in raw.chunks_exact(IOVEC_SIZE) {
        let word = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&iov[i..i + 8]);
            u64::from_ne_bytes(b) as usize
        };
        let (base, len) = (word(0), word(8));
        total = total.checked_add(len).ok_or(EINVAL)?;
        segs.push((base, len), GFP_KERNEL)?;
    }
    if total > max as usize {
        return Err(EINVAL);
    }
    Ok(segs)
}

/// Runs admin command `c` with its data in `data`; returns (status, result) as the
/// ioctl does.
fn run_admin(s: &Shared<'_>, c: &PassthruCmd, data: &mut AdminData<'_>) -> Result<(i32, u64)> {
    let len = data.len(c);
    if len > s.max_data() as usize {
        return Err(EINVAL);
    }
    let dev = s.hw.dev();
    let to_device = c.opcode & 1 != 0;
    // The data buffer, whole pages: PRP entries address pages.
    let buf = if len > 0 {
        let alloc = len.div_ceil(PAGE_SIZE) * PAGE_SIZE;
        let mut bounce = KVec::from_elem(0u8, alloc, GFP_KERNEL)?;
        if to_device {
            data.copy_in(c, &mut bounce[..len])?;
        }
        Some(Coherent::from_slice(dev, &bounce, GFP_KERNEL)?)
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
            core::iter::once((b.dma_address(), len as u32)),
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
        // As C's `nvme_fail_nonready_command`: a host path error, which nvme-cli names.
        Err(CmdError::NotReady) => (
            status_ret(crate::spec::completion::Status::HOST_PATH_ERROR),
            0,
        ),
        Err(CmdError::Removed) => {
            // The controller may still write into them until removal stops it.
            s.hw.admin.park((buf, list));
            return Err(ENODEV);
        }
        Err(CmdError::Kernel(e)) => return Err(e),
    };
    if status == 0 && !to_device {
        if let Some(b) = &buf {
            data.copy_out(c, b, len)?;
        }
    }
    Ok((status, u64::from(result)))
}

/// Writes entry `i` of a PRP list.
fn list_put(list: &Coherent<[u64]>, i: usize, addr: u64) -> Result {
    io_write!(list, [try: i], addr.to_le());
    Ok(())
}

/// `NVME_IOCTL_IO_CMD` / `IO64_CMD` / `IO64_CMD_VEC` (`vec`): on the namespace of the
/// device (`ns`), or on the one the command names (`/dev/rnvme<N>`).
pub(crate) fn io_ioctl(
    s: &Shared<'_>,
    ns: Option<NsKey>,
    arg: usize,
    layout: Layout,
    caller: Caller,
    vec: bool,
) -> Result<isize> {
    let c = read_cmd(arg, layout)?;
    let ns = ns.unwrap_or(NsKey::any(c.nsid));
    // Checked before the block layer pins or bounces the user's buffer.
    admit(s, &c, Some(ns), caller, io_limit(s, vec))?;
    let data = user_data(&c, vec);
    let (status, result) = run_io(s, ns, &c, data)?;
    write_result(arg, layout, result)?;
    Ok(status as isize)
}

/// What `validate` bounds: bytes, or iovecs for a vector (whose bytes the queue limits
/// bound when it is mapped).
fn io_limit(s: &Shared<'_>, vec: bool) -> u32 {
    if vec {
        UIO_MAXIOV
    } else {
        s.max_data()
    }
}

fn user_data(c: &PassthruCmd, vec: bool) -> PrivateData<'static> {
    let addr = c.addr as usize;
    match (c.data_len, vec) {
        (0, _) => PrivateData::None,
        (count, true) => PrivateData::Vec { addr, count },
        (len, false) => PrivateData::Buf { addr, len },
    }
}

/// The user's metadata buffer of an I/O command, which [`admit`] checked.
fn user_metadata(c: &PassthruCmd) -> Option<(usize, u32)> {
    c.metadata_buffer().map(|(addr, len)| (addr as usize, len))
}

/// `NVME_IOCTL_SUBMIT_IO`: a read or write of the disk's namespace.
pub(crate) fn submit_io(s: &Shared<'_>, ns: NsKey, caller: Caller, arg: usize) -> Result<isize> {
    let mut raw = [0u8; pt::USER_IO_SIZE];
    UserSlice::new(UserPtr::from_addr(arg), raw.len())
        .reader()
        .read_slice(&mut raw)?;
    let io = UserIo::parse(&raw).ok_or(EINVAL)?;
    let (lba_shift, meta) = s.ns_format(ns).ok_or(ENODEV)?;
    let meta = meta.map_or(UserIoMeta::default(), |m| UserIoMeta {
        ms: m.ms,
        pi_only: m.has_pi(),
        extended: m.extended,
    });
    let c = io
        .to_passthru(ns.nsid, lba_shift, meta)
        .map_err(|_| EINVAL)?;
    admit(s, &c, Some(ns), caller, s.max_data())?;
    run_io(s, ns, &c, user_data(&c, false)).map(|(status, _)| status as isize)
}

/// Runs an I/O command on namespace `ns`'s queues; returns (status, result).
fn run_io(s: &Shared<'_>, ns: NsKey, c: &PassthruCmd, data: PrivateData<'_>) -> Result<(i32, u64)> {
    let mut cmd = c.command();
    cmd.dw[1] = ns.nsid;
    // A reference to the disk, not the list's lock, is held while the command waits: other
    // commands, scans and recovery go on meanwhile. A device's own namespace that is gone
    // is ENODEV (C: its queue is dying); one the command names that has no disk, EINVAL.
    let gone = if ns.is_bound() { ENODEV } else { EINVAL };
    let disk = s.get_disk(ns).ok_or(gone)?;
    let (status, result, cancelled) = disk.execute_private(
        PrivateIo {
            to_device: c.direction() == Direction::ToDevice,
            data,
            timeout_ms: c.timeout_ms,
            nowait: false,
            polled: false,
            metadata: user_metadata(c),
        },
        |rq| rq.set_passthru(&cmd),
        |rq| (rq.status(), rq.result(), rq.cancelled()),
    )?;
    if cancelled {
        // Taken back by a reset or a dead controller (C: `NVME_REQ_CANCELLED`).
        return Err(EINTR);
    }
    Ok((status_ret(status), result))
}

/// The passthrough command of an io_uring command whose operation is `plain` or `vec` (a
/// vector of buffers: the second value), as C (`nvme_uring_cmd_checks`): a big SQE for the
/// command, a big CQE for the result; `ENOTTY` for another operation.
fn uring_passthru(
    cmd: &UringCmd,
    issue_flags: u32,
    plain: u32,
    vec: u32,
) -> Result<(PassthruCmd, bool)> {
    let both = issue::SQE128 | issue::CQE32;
    if issue_flags & both != both {
        return Err(EOPNOTSUPP);
    }
    let is_vec = match cmd.cmd_op() {
        op if op == plain => false,
        op if op == vec => true,
        _ => return Err(ENOTTY),
    };
    let raw = cmd.sqe128_cmd(issue_flags).ok_or(EOPNOTSUPP)?;
    let c = PassthruCmd::parse(&raw[..pt::URING_CMD_SIZE]).ok_or(EINVAL)?;
    Ok((c, is_vec))
}

/// The registered buffer command `c` names, if its io_uring command says it has one.
#[inline]
fn import_fixed(
    cmd: &UringCmd,
    c: &PassthruCmd,
    vec: bool,
    to_device: bool,
    issue_flags: u32,
) -> Result<Option<FixedBuf>> {
    if cmd.flags() & CMD_FIXED == 0 || c.data_len == 0 {
        return Ok(None);
    }
    import_registered(cmd, c, vec, to_device, issue_flags).map(Some)
}

/// The registered buffer of [`import_fixed`], out of line: most commands have none.
#[cold]
fn import_registered(
    cmd: &UringCmd,
    c: &PassthruCmd,
    vec: bool,
    to_device: bool,
    issue_flags: u32,
) -> Result<FixedBuf> {
    if vec {
        cmd.import_fixed_vec(c.addr, c.data_len, to_device, issue_flags)
    } else {
        cmd.import_fixed(c.addr, c.data_len, to_device, issue_flags)
    }
}

/// io_uring passthrough of an I/O command on namespace `ns` (`NVME_URING_CMD_IO`, and
/// `_IO_VEC` with a vector of buffers), as C's `nvme_uring_cmd_io`: the command comes from
/// the 128-byte SQE, runs on the namespace's queues (a polled one on a polled ring) without
/// the submitter waiting, and completes with its NVMe status (or a negative errno) and its
/// result in a 32-byte CQE.
pub(crate) fn ns_uring_cmd(
    ctrl: &CtrlLink,
    ns: NsKey,
    cmd: UringCmd,
    issue_flags: u32,
    writable: bool,
) -> Result<Queued> {
    // As C, admin commands are the controller device's (`ENOTTY` here).
    let (c, vec) = uring_passthru(
        &cmd,
        issue_flags,
        pt::NVME_URING_CMD_IO,
        pt::NVME_URING_CMD_IO_VEC,
    )?;
    ctrl.with(|s| {
        admit(s, &c, Some(ns), Caller::chardev(writable), io_limit(s, vec))?;
        let to_device = c.direction() == Direction::ToDevice;
        let mut fixed = import_fixed(&cmd, &c, vec, to_device, issue_flags)?;
        let data = match &mut fixed {
            Some(f) => PrivateData::Fixed(f),
            None => user_data(&c, vec),
        };
        let command = c.command();
        let disk = s.get_disk(ns).ok_or(ENODEV)?;
        let io = PrivateIo {
            to_device,
            data,
            timeout_ms: c.timeout_ms,
            nowait: issue_flags & issue::NONBLOCK != 0,
            polled: issue_flags & issue::IOPOLL != 0,
            metadata: user_metadata(&c),
        };
        cmd.queue_with(|ctx| {
            // SAFETY: `ctx` is the command `queue_with` queued, handed over once.
            unsafe { disk.submit_private_uring(ctx, io, |rq| rq.set_passthru(&command)) }
        })
    })
    .unwrap_or(Err(ENODEV))
}

/// io_uring passthrough of an admin command on `/dev/rnvme<N>` (`NVME_URING_CMD_ADMIN`, and
/// `_ADMIN_VEC`), as C's `nvme_dev_uring_cmd`. The admin queue is waited on, so the command
/// runs on io_uring's worker (`EAGAIN` when the submitter must not block sends it there),
/// completing once it has ended.
pub(crate) fn ctrl_uring_cmd(
    ctrl: &CtrlLink,
    cmd: UringCmd,
    issue_flags: u32,
    writable: bool,
) -> Result<Queued> {
    let (c, vec) = uring_passthru(
        &cmd,
        issue_flags,
        pt::NVME_URING_CMD_ADMIN,
        pt::NVME_URING_CMD_ADMIN_VEC,
    )?;
    ctrl.with(|s| {
        admit(s, &c, None, Caller::chardev(writable), io_limit(s, vec))?;
        if issue_flags & issue::NONBLOCK != 0 {
            return Err(EAGAIN);
        }
        // 32-bit callers' iovecs have another layout.
        if vec && cmd.flags() & CMD_FIXED == 0 && issue_flags & issue::COMPAT != 0 {
            return Err(EINVAL);
        }
        let to_device = c.opcode & 1 != 0;
        let mut fixed = import_fixed(&cmd, &c, vec, to_device, issue_flags)?;
        let mut data = match &mut fixed {
            Some(f) => AdminData::Fixed(f),
            None if vec && c.data_len > 0 => {
                AdminData::Vec(read_iovecs(c.addr as usize, c.data_len, s.max_data())?)
            }
            None => AdminData::Buf,
        };
        let (status, result) = run_admin(s, &c, &mut data)?;
        Ok(cmd.complete_now(status, result, issue_flags))
    })
    .unwrap_or(Err(ENODEV))
}
