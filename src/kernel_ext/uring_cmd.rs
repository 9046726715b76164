// SPDX-License-Identifier: GPL-2.0

//! io_uring commands (`IORING_OP_URING_CMD`) on a character device: the command a driver is
//! handed in `file_operations::uring_cmd`, and its completion from the submitting task.
//! Upstream candidate: `kernel::io_uring::IoUringCmd` (proposed upstream, not in 7.3).
//!
//! The 7.3 bindings have `struct io_uring_cmd` as an opaque type and none of
//! `<linux/io_uring/cmd.h>`'s functions: they are declared here as 7.3 defines them.

use core::ptr::NonNull;
use kernel::{bindings, ffi::c_void, prelude::*};

/// `struct io_uring_cmd`.
#[repr(C)]
pub(super) struct RawCmd {
    file: *mut bindings::file,
    sqe: *const u8,
    cmd_op: u32,
    flags: u32,
    pdu: [u8; 32],
    unused: [u8; 8],
}

/// `struct io_tw_req` (passed by value).
#[repr(C)]
struct TwReq {
    req: *mut c_void,
}

/// `struct io_tw_state` (passed by value).
#[repr(C)]
struct TwState {
    _cancel: bool,
}

// `struct file` is only passed by pointer; bindgen's representation of one of its members
// trips the lint.
#[allow(improper_ctypes)]
extern "C" {
    fn __io_uring_cmd_done(cmd: *mut RawCmd, ret: i32, res2: u64, issue_flags: u32, cqe32: bool);
    fn __io_uring_cmd_do_in_task(
        cmd: *mut RawCmd,
        cb: unsafe extern "C" fn(TwReq, TwState),
        flags: u32,
    );
    fn io_uring_cmd_import_fixed(
        ubuf: u64,
        len: core::ffi::c_ulong,
        rw: core::ffi::c_int,
        iter: *mut bindings::iov_iter,
        cmd: *mut RawCmd,
        issue_flags: u32,
    ) -> core::ffi::c_int;
    fn io_uring_cmd_import_fixed_vec(
        cmd: *mut RawCmd,
        uvec: *const bindings::iovec,
        uvec_segs: usize,
        ddir: core::ffi::c_int,
        iter: *mut bindings::iov_iter,
        issue_flags: u32,
    ) -> core::ffi::c_int;
}

/// Issue flags (`enum io_uring_cmd_flags`) a command is handed with.
pub(crate) mod issue {
    /// The ring has 128-byte submission entries (room for an 80-byte command).
    pub(crate) const SQE128: u32 = 1 << 8;
    /// The ring has 32-byte completion entries (a second result).
    pub(crate) const CQE32: u32 = 1 << 9;
    /// The submitter must not block (`IO_URING_F_NONBLOCK`): io_uring retries from a
    /// worker on `EAGAIN`.
    pub(crate) const NONBLOCK: u32 = 1 << 31;
    /// The ring is polled (`IORING_SETUP_IOPOLL`) and the file polls its commands: the
    /// command's request goes to a polled queue.
    pub(crate) const IOPOLL: u32 = 1 << 10;
    /// The ring belongs to a 32-bit task (its pointers and iovecs are 32-bit).
    pub(crate) const COMPAT: u32 = 1 << 12;
    /// Completion from task work (`IO_URING_CMD_TASK_WORK_ISSUE_FLAGS`).
    pub(super) const COMPLETE_DEFER: u32 = 1;
}

/// `IORING_URING_CMD_FIXED`: the buffer is a registered one.
pub(crate) const CMD_FIXED: u32 = 1 << 0;

/// `IOU_F_TWQ_LAZY_WAKE`: the task need not be woken before it waits for completions.
const LAZY_WAKE: u32 = 1;

/// Bytes of command after the SQE's first 48 in a 128-byte SQE (`sqe->cmd`).
pub(crate) const SQE128_CMD_LEN: usize = 80;
const SQE_CMD_OFFSET: usize = 48;

/// A registered buffer (`IORING_URING_CMD_FIXED`) resolved into pages: an `iov_iter` over
/// io_uring's own page vector, which io_uring keeps until the command completes.
pub(crate) struct FixedBuf {
    iter: bindings::iov_iter,
    /// Bytes of the buffer, as imported.
    len: usize,
}

impl FixedBuf {
    pub(crate) fn as_raw(&mut self) -> *mut bindings::iov_iter {
        &mut self.iter
    }

    /// Bytes of the buffer.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Copies `out.len()` bytes out of the buffer (the data of a command to the device);
    /// `EFAULT` if it holds fewer.
    pub(crate) fn read(&mut self, out: &mut [u8]) -> Result {
        // SAFETY: `iter` is a source iterator (imported for a transfer to the device) owned
        // by `self`, used only through this borrow.
        let src = unsafe { kernel::iov::IovIterSource::from_raw(&mut self.iter) };
        if src.copy_from_iter(out) == out.len() {
            Ok(())
        } else {
            Err(EFAULT)
        }
    }

    /// Copies `data` into the buffer (the data a command read); `EFAULT` if it holds less.
    pub(crate) fn write(&mut self, data: &[u8]) -> Result {
        // SAFETY: `iter` is a destination iterator (imported for a transfer from the
        // device) owned by `self`, used only through this borrow.
        let dst = unsafe { kernel::iov::IovIterDest::from_raw(&mut self.iter) };
        if dst.copy_to_iter(data) == data.len() {
            Ok(())
        } else {
            Err(EFAULT)
        }
    }
}

/// What a command carries from its request's end to its completion in the submitting task:
/// the result and the user mapping to undo there.
#[repr(C)]
struct Pdu {
    /// The command's request while it may be polled (null: none).
    rq: *mut bindings::request,
    /// The bio chain of the user buffer (null: none).
    bio: *mut bindings::bio,
    /// Result dword(s) (the second completion value).
    result: u64,
    /// The completion value: an NVMe status (positive) or an errno (negative).
    status: i32,
}

const _: () = assert!(core::mem::size_of::<Pdu>() <= 32);

/// An io_uring command handed to the driver, to be completed exactly once: either the
/// driver returns an error from `uring_cmd` (and io_uring completes it), or it queues it
/// and gets a [`Queued`] from [`UringCmd::queue_with`], after which [`complete`] completes
/// it in the submitting task.
///
/// # Invariants
///
/// `raw` is a live `io_uring_cmd` io_uring handed to `uring_cmd`, not completed yet.
pub(crate) struct UringCmd {
    raw: NonNull<RawCmd>,
}

/// Proof that a command was queued: `uring_cmd` returns `-EIOCBQUEUED` for it.
pub(crate) struct Queued(());

impl UringCmd {
    /// # Safety
    ///
    /// `raw` is the command io_uring passed to `file_operations::uring_cmd`, during that
    /// call.
    pub(super) unsafe fn from_raw(raw: *mut RawCmd) -> Option<Self> {
        // INVARIANT: See the safety section.
        NonNull::new(raw).map(|raw| Self { raw })
    }

    /// The file the command is for.
    pub(super) fn file(&self) -> *mut bindings::file {
        // SAFETY: `raw` is live (invariant).
        unsafe { (*self.raw.as_ptr()).file }
    }

    /// The command's operation (`sqe->cmd_op`).
    pub(crate) fn cmd_op(&self) -> u32 {
        // SAFETY: `raw` is live (invariant).
        unsafe { (*self.raw.as_ptr()).cmd_op }
    }

    /// The command's flags (`sqe->uring_cmd_flags`).
    pub(crate) fn flags(&self) -> u32 {
        // SAFETY: `raw` is live (invariant).
        unsafe { (*self.raw.as_ptr()).flags }
    }

    /// The command's 80 bytes of a 128-byte SQE; only with [`issue::SQE128`] in the issue
    /// flags (else `None`).
    pub(crate) fn sqe128_cmd(&self, issue_flags: u32) -> Option<[u8; SQE128_CMD_LEN]> {
        if issue_flags & issue::SQE128 == 0 {
            return None;
        }
        let mut out = [0u8; SQE128_CMD_LEN];
        // SAFETY: `raw` is live (invariant) and, during `uring_cmd`, `sqe` points to the
        // (copied) submission entry, 128 bytes with SQE128.
        unsafe {
            let sqe = (*self.raw.as_ptr()).sqe;
            core::ptr::copy_nonoverlapping(
                sqe.add(SQE_CMD_OFFSET),
                out.as_mut_ptr(),
                SQE128_CMD_LEN,
            );
        }
        Some(out)
    }

    /// Resolves the registered buffer the command names (`IORING_URING_CMD_FIXED`):
    /// `len` bytes at user address `addr` within it, for a transfer to the device or from
    /// it. As C: `io_uring_cmd_import_fixed`.
    pub(crate) fn import_fixed(
        &self,
        addr: u64,
        len: u32,
        to_device: bool,
        issue_flags: u32,
    ) -> Result<FixedBuf> {
        let mut buf = FixedBuf {
            // SAFETY: An all-zero `iov_iter` is a valid empty one; it is filled below.
            iter: unsafe { core::mem::zeroed() },
            len: len as usize,
        };
        // SAFETY: `raw` is live (invariant) and has `IORING_URING_CMD_FIXED`; `iter` is
        // ours to fill.
        let ret = unsafe {
            io_uring_cmd_import_fixed(
                addr,
                len.into(),
                core::ffi::c_int::from(to_device),
                &mut buf.iter,
                self.raw.as_ptr(),
                issue_flags,
            )
        };
        kernel::error::to_result(ret).map(|()| buf)
    }

    /// As [`Self::import_fixed`] for a vector of `count` iovecs at user address `addr`,
    /// each within the registered buffer. As C: `io_uring_cmd_import_fixed_vec`.
    pub(crate) fn import_fixed_vec(
        &self,
        addr: u64,
        count: u32,
        to_device: bool,
        issue_flags: u32,
    ) -> Result<FixedBuf> {
        let mut buf = FixedBuf {
            // SAFETY: As in `import_fixed`.
            iter: unsafe { core::mem::zeroed() },
            len: 0,
        };
        // SAFETY: `raw` is live (invariant) and has `IORING_URING_CMD_FIXED`; the iovecs
        // are user memory, copied in by io_uring; `iter` is ours to fill.
        let ret = unsafe {
            io_uring_cmd_import_fixed_vec(
                self.raw.as_ptr(),
                addr as usize as *const bindings::iovec,
                count as usize,
                core::ffi::c_int::from(to_device),
                &mut buf.iter,
                issue_flags,
            )
        };
        kernel::error::to_result(ret)?;
        // SAFETY: `iter` was just filled as a source or destination by direction.
        buf.len = unsafe {
            if to_device {
                kernel::iov::IovIterSource::from_raw(&mut buf.iter).len()
            } else {
                kernel::iov::IovIterDest::from_raw(&mut buf.iter).len()
            }
        };
        Ok(buf)
    }

    /// Completes the command now, with `status` (an NVMe status, or a negative errno) and
    /// `result`, for a `uring_cmd` that ran it to the end (on io_uring's worker); the
    /// handler then returns `-EIOCBQUEUED` for it.
    pub(crate) fn complete_now(self, status: i32, result: u64, issue_flags: u32) -> Queued {
        // SAFETY: `raw` is live and completed once, here (invariant; `self` is consumed).
        // Without `COMPLETE_DEFER` in the flags io_uring posts it from task work.
        unsafe { __io_uring_cmd_done(self.raw.as_ptr(), status, result, issue_flags, true) };
        Queued(())
    }

    /// Hands the command to `start`, which queues it (storing the pointer it is given as
    /// the context of the request that will [`complete`] it) or fails, leaving the command
    /// to io_uring.
    pub(crate) fn queue_with(self, start: impl FnOnce(*mut c_void) -> Result) -> Result<Queued> {
        let raw = self.raw.as_ptr();
        // SAFETY: `raw` is live (invariant); the pdu is ours until completion.
        unsafe {
            (*raw).pdu.as_mut_ptr().cast::<Pdu>().write_unaligned(Pdu {
                rq: core::ptr::null_mut(),
                bio: core::ptr::null_mut(),
                result: 0,
                status: 0,
            })
        };
        start(raw.cast())?;
        Ok(Queued(()))
    }
}

/// Records the request of queued command `ctx` (a pointer [`UringCmd::queue_with`] gave),
/// which polling the command polls, and its user mapping (`bio`, null: none), undone at
/// completion.
///
/// # Safety
///
/// `ctx` is a queued command not completed yet, `rq` not issued yet.
pub(super) unsafe fn set_request(
    ctx: *mut c_void,
    rq: *mut bindings::request,
    bio: *mut bindings::bio,
) {
    let pdu = pdu_of(ctx.cast());
    // SAFETY: The command is live and its pdu ours (function's safety section).
    unsafe {
        (*pdu).rq = rq;
        (*pdu).bio = bio;
    }
}

/// `file_operations::uring_cmd_iopoll`: polls the queue of command `raw`'s request for
/// completions, as C's `nvme_ns_chr_uring_cmd_iopoll`; returns how many were found.
///
/// # Safety
///
/// `raw` is a command of a polled ring that `uring_cmd` queued, not completed yet; `iob`
/// is io_uring's batch (or null).
pub(super) unsafe fn iopoll(
    raw: *mut RawCmd,
    iob: *mut bindings::io_comp_batch,
    poll_flags: u32,
) -> core::ffi::c_int {
    let pdu = pdu_of(raw);
    // SAFETY: The command is live (function's safety section) and its pdu ours. A request
    // that ended meanwhile stays a request of its tag set (only its tag is freed): polling
    // it at worst reaps another command's completion, as in C.
    unsafe {
        let rq = (*pdu).rq;
        if rq.is_null() {
            return 0;
        }
        let hctx = (*rq).mq_hctx;
        // `blk_rq_is_poll` (inline).
        if hctx.is_null() || (*hctx).type_ != bindings::hctx_type_HCTX_TYPE_POLL as u16 {
            return 0;
        }
        bindings::blk_rq_poll(rq, iob, poll_flags)
    }
}

fn pdu_of(raw: *mut RawCmd) -> *mut Pdu {
    // The pdu is 8-byte aligned in `struct io_uring_cmd` (after two pointers and two u32).
    raw.cast::<u8>()
        .wrapping_add(core::mem::offset_of!(RawCmd, pdu))
        .cast()
}

/// Completes queued command `ctx` with `status` and `result` from the submitting task (any
/// context: the request's end): its user mapping is undone there, then io_uring posts the
/// completion.
///
/// # Safety
///
/// `ctx` is a queued command, completed once, here.
pub(super) unsafe fn complete(ctx: *mut c_void, status: i32, result: u64) {
    let raw = ctx.cast::<RawCmd>();
    let pdu = pdu_of(raw);
    // SAFETY: The command is live and its pdu ours until it completes; task work runs it
    // in the submitting task, once.
    unsafe {
        (*pdu).status = status;
        (*pdu).result = result;
        __io_uring_cmd_do_in_task(raw, task_done, LAZY_WAKE);
    }
}

/// # Safety
///
/// Called by io_uring's task work for a command [`complete`] scheduled.
unsafe extern "C" fn task_done(tw: TwReq, _state: TwState) {
    // `io_kiocb_to_cmd`: the command is the start of its io_kiocb.
    let raw = tw.req.cast::<RawCmd>();
    let pdu = pdu_of(raw);
    // SAFETY: The command is live until `__io_uring_cmd_done`; its pdu was filled by
    // `complete`; the bio chain (if any) came from `blk_rq_map_user*` for it and is
    // unmapped once, in the task that mapped it (copies bounced data to its memory).
    unsafe {
        let (bio, mut status, result) = ((*pdu).bio, (*pdu).status, (*pdu).result);
        if !bio.is_null() {
            let r = bindings::blk_rq_unmap_user(bio);
            if r != 0 && status == 0 {
                status = r;
            }
        }
        __io_uring_cmd_done(raw, status, result, issue::COMPLETE_DEFER, true);
    }
}
