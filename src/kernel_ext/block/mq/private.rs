// SPDX-License-Identifier: GPL-2.0

//! Driver-private requests (`REQ_OP_DRV_IN`/`REQ_OP_DRV_OUT`) on a disk's queues, carrying
//! user or kernel memory: how NVMe passthrough (and the driver's own I/O commands, such as
//! zone reports) reaches a namespace with the same tags, timeouts, aborts and resets as
//! block I/O. Run and waited for ([`DiskRef::execute_private`], the ioctls;
//! [`super::ZonedDisk::execute_private`]), or started for an io_uring command that
//! completes later ([`DiskRef::submit_private_uring`]). Upstream candidate (C:
//! `blk_rq_map_user_io`, `blk_rq_map_kern`, `blk_execute_rq`, `blk_execute_rq_nowait` users
//! in drivers).

use super::{DiskRef, Operations, Request};
use crate::kernel_ext::uring_cmd::{self, FixedBuf};
use core::ffi::{c_int, c_uint, c_void};
use kernel::{bindings, prelude::*};

/// The memory of a driver-private request.
pub(crate) enum PrivateData<'b> {
    /// No data.
    None,
    /// `len` bytes at `addr`.
    Buf { addr: usize, len: u32 },
    /// An array of `count` iovecs at `addr`.
    Vec { addr: usize, count: u32 },
    /// A buffer registered with io_uring, resolved by [`uring_cmd::UringCmd::import_fixed`].
    Fixed(&'b mut FixedBuf),
    /// Kernel memory (kmalloc or vmalloc), borrowed until the request ended.
    Kernel(&'b mut [u8]),
}

/// A driver-private request's data and timing.
pub(crate) struct PrivateIo<'b> {
    /// `REQ_OP_DRV_OUT` (else `REQ_OP_DRV_IN`).
    pub(crate) to_device: bool,
    pub(crate) data: PrivateData<'b>,
    /// The request's timeout (0: the tag set's).
    pub(crate) timeout_ms: u32,
    /// `EAGAIN` instead of waiting for a tag (`REQ_NOWAIT`).
    pub(crate) nowait: bool,
    /// On a polled queue (`REQ_POLLED`): its completion is reaped by polling, not an
    /// interrupt.
    pub(crate) polled: bool,
    /// User memory for the command's metadata (address, length), with user data only: the
    /// request's integrity payload (the disk must have an integrity profile).
    pub(crate) metadata: Option<(usize, u32)>,
}

/// `REQ_*` flag bits of `cmd_flags`.
const fn req_flag(bit: c_uint) -> u32 {
    1 << bit
}

/// A request for `io` on queue `q`, allocated, prepared by `prep` (the driver's state) and
/// mapped to its memory; returns it with its bio chain of user memory (null: none), which
/// must be unmapped once it ended.
///
/// # Safety
///
/// `q` is a live request queue of a tag set for `T`, alive until the request is freed.
unsafe fn alloc_private<T: Operations>(
    q: *mut bindings::request_queue,
    io: PrivateIo<'_>,
    prep: impl FnOnce(&T::Rq),
) -> Result<(*mut bindings::request, *mut bindings::bio)> {
    let mut op = if io.to_device {
        bindings::req_op_REQ_OP_DRV_OUT
    } else {
        bindings::req_op_REQ_OP_DRV_IN
    };
    let mut flags = 0;
    if io.nowait {
        op |= req_flag(bindings::req_flag_bits___REQ_NOWAIT);
        flags = bindings::BLK_MQ_REQ_NOWAIT;
    }
    if io.polled {
        op |= req_flag(bindings::req_flag_bits___REQ_POLLED);
    }
    // SAFETY: `q` is a live request queue of our tag set (function's safety section).
    let rq = kernel::error::from_err_ptr(unsafe { bindings::blk_mq_alloc_request(q, op, flags) })?;
    // SAFETY: `rq` is a request we own until it is issued or freed.
    let request = unsafe { Request::<T>::from_raw(rq) };
    if io.timeout_ms != 0 {
        let j = kernel::time::msecs_to_jiffies(io.timeout_ms);
        // SAFETY: as above; not yet issued.
        unsafe { (*rq).timeout = c_uint::try_from(j).unwrap_or(c_uint::MAX) };
    }
    prep(request.data());
    let dir = c_int::from(io.to_device);
    // User ranges are checked (access_ok) and pinned, or bounced for the direction of `op`;
    // a registered buffer's pages are held by io_uring until the command completes; kernel
    // memory is borrowed by `io` until the request ended (the callers wait for it), and its
    // bio is freed when the request completes.
    // SAFETY: `rq` is ours and not issued; the memory stays valid as said above.
    let (ret, user) = unsafe {
        match io.data {
            PrivateData::Buf { addr, len } => (
                bindings::blk_rq_map_user_io(
                    rq,
                    core::ptr::null_mut(),
                    addr as *mut c_void,
                    len as usize,
                    bindings::GFP_KERNEL,
                    false,
                    0,
                    false,
                    dir,
                ),
                true,
            ),
            PrivateData::Vec { addr, count } => (
                bindings::blk_rq_map_user_io(
                    rq,
                    core::ptr::null_mut(),
                    addr as *mut c_void,
                    count as usize,
                    bindings::GFP_KERNEL,
                    true,
                    0,
                    false,
                    dir,
                ),
                true,
            ),
            PrivateData::Fixed(buf) => (
                bindings::blk_rq_map_user_iov(
                    q,
                    rq,
                    core::ptr::null_mut(),
                    buf.as_raw(),
                    bindings::GFP_KERNEL,
                ),
                true,
            ),
            PrivateData::Kernel(buf) => match c_uint::try_from(buf.len()) {
                Ok(len) => (
                    bindings::blk_rq_map_kern(
                        rq,
                        buf.as_mut_ptr().cast(),
                        len,
                        bindings::GFP_KERNEL,
                    ),
                    false,
                ),
                Err(_) => (EINVAL.to_errno(), false),
            },
            PrivateData::None => (0, false),
        }
    };
    if ret != 0 {
        // SAFETY: `rq` is ours and was never issued.
        unsafe { bindings::blk_mq_free_request(rq) };
        return Err(Error::from_errno(ret));
    }
    if let Some((addr, len)) = io.metadata.filter(|_| user) {
        // SAFETY: `rq` is ours, not issued, its user data mapped.
        if let Err(e) = unsafe { super::integrity::map_user_metadata(rq, addr, len) } {
            // SAFETY: `rq` is ours and was never issued; its user data chain is unmapped
            // once.
            unsafe {
                let bio = (*rq).bio;
                if !bio.is_null() {
                    bindings::blk_rq_unmap_user(bio);
                }
                bindings::blk_mq_free_request(rq);
            }
            return Err(e);
        }
    }
    // The user bio chain must be remembered for unmapping: the request's own pointer moves
    // on as it completes.
    let bio = if user {
        // SAFETY: `rq` is ours.
        unsafe { (*rq).bio }
    } else {
        core::ptr::null_mut()
    };
    Ok((rq, bio))
}

/// [`DiskRef::execute_private`] on queue `q`.
///
/// # Safety
///
/// `q` is a live request queue of a tag set for `T`, alive until this returns.
pub(super) unsafe fn execute_private<T: Operations, R>(
    q: *mut bindings::request_queue,
    io: PrivateIo<'_>,
    prep: impl FnOnce(&T::Rq),
    done: impl FnOnce(&T::Rq) -> R,
) -> Result<R> {
    // SAFETY: see the function's safety section.
    let (rq, bio) = unsafe { alloc_private::<T>(q, io, prep) }?;
    // SAFETY: `rq` is set up; this waits for it to end.
    let status = unsafe { bindings::blk_execute_rq(rq, false) };
    // SAFETY: `rq` ended and is still ours.
    let r = done(unsafe { Request::<T>::from_raw(rq) }.data());
    let unmapped = if bio.is_null() {
        0
    } else {
        // SAFETY: `bio` is the chain mapped for `rq`; copies bounced data back to user
        // memory and unpins.
        unsafe { bindings::blk_rq_unmap_user(bio) }
    };
    // SAFETY: `rq` ended and is ours; not used afterwards.
    unsafe { bindings::blk_mq_free_request(rq) };
    if status != 0 {
        return Err(EIO);
    }
    if unmapped != 0 {
        return Err(Error::from_errno(unmapped));
    }
    Ok(r)
}

impl<'s, 'a, T: Operations> DiskRef<'s, 'a, T> {
    /// The disk's request queue.
    fn queue(&self) -> *mut bindings::request_queue {
        // SAFETY: the disk is alive (`self` borrows it from its list or a `DiskArc`), so is
        // its queue; once the disk is removed, the queue fails new requests.
        unsafe { (*self.disk.disk.as_ptr()).queue }
    }

    /// Runs one driver-private request through the disk's queues and waits for it. `prep`
    /// fills the driver's state before it is issued, `done` reads it back after it ended.
    /// Upstream candidate.
    ///
    /// Fails with `EFAULT` for a bad user buffer, `EINVAL` when it exceeds the queue
    /// limits, and the block layer's error if the request failed in the driver.
    pub(crate) fn execute_private<R>(
        &self,
        io: PrivateIo<'_>,
        prep: impl FnOnce(&T::Rq),
        done: impl FnOnce(&T::Rq) -> R,
    ) -> Result<R> {
        // SAFETY: the disk's queue lives as long as the disk `self` borrows.
        unsafe { execute_private::<T, R>(self.queue(), io, prep, done) }
    }

    /// Starts one driver-private request as [`Self::execute_private`] runs one, for the
    /// io_uring command `ctx` ([`uring_cmd::UringCmd::queue_with`]'s pointer), and returns
    /// once it is issued. When it ends, [`Operations::private_outcome`] says how the
    /// command completes, in its submitting task (which also undoes the user mapping).
    /// Upstream candidate.
    ///
    /// # Safety
    ///
    /// `ctx` is a command queued by `queue_with`, handed to this function once.
    pub(crate) unsafe fn submit_private_uring(
        &self,
        ctx: *mut c_void,
        io: PrivateIo<'_>,
        prep: impl FnOnce(&T::Rq),
    ) -> Result {
        // Kernel memory is only borrowed for this call; the request outlives it.
        if matches!(io.data, PrivateData::Kernel(_)) {
            return Err(EINVAL);
        }
        // SAFETY: the disk's queue lives as long as the disk `self` borrows, and its
        // requests are ended before the disk is removed.
        let (rq, bio) = unsafe { alloc_private::<T>(self.queue(), io, prep) }?;
        // SAFETY: `ctx` is queued and not completed (function's safety section): the chain
        // is unmapped at its completion; the request is what polling the command polls.
        unsafe { uring_cmd::set_request(ctx, rq, bio) };
        // SAFETY: `rq` is set up and ours; from here the block layer owns it and calls
        // `uring_end` once, which frees it.
        unsafe {
            (*rq).end_io = Some(Self::uring_end);
            (*rq).end_io_data = ctx;
            bindings::blk_execute_rq_nowait(rq, false);
        }
        Ok(())
    }

    /// # Safety
    ///
    /// The end of a request [`Self::submit_private_uring`] started, called once by blk-mq.
    unsafe extern "C" fn uring_end(
        rq: *mut bindings::request,
        err: bindings::blk_status_t,
        _iob: *const bindings::io_comp_batch,
    ) -> bindings::rq_end_io_ret {
        // SAFETY: `rq` is our request, ended; its driver state is initialised.
        let (ctx, outcome) = unsafe {
            let request = Request::<T>::from_raw(rq);
            (
                (*rq).end_io_data,
                T::private_outcome(request.data(), err == 0),
            )
        };
        // SAFETY: `ctx` is the queued command this request was started for; it completes
        // once, here.
        unsafe { uring_cmd::complete(ctx, outcome.0, outcome.1) };
        bindings::rq_end_io_ret_RQ_END_IO_FREE
    }
}
