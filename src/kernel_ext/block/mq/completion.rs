// SPDX-License-Identifier: GPL-2.0

//! Ending the requests of one pass over a completion queue together (upstream candidate: `struct
//! io_comp_batch` and `blk_mq_end_request_batch`).

use super::{
    request::{Claimed, Owned},
    Operations, ReqOp, Request,
};
use core::marker::PhantomData;
use kernel::bindings;

impl<T: Operations> Claimed<'_, T> {
    /// Completes a request the device finished without error, like [`Self::complete`], but on
    /// this CPU into `batch` when blk-mq allows it (the C driver's `nvme_handle_cqe`): the
    /// batch ends all its requests at once when dropped. Upstream candidate.
    pub(crate) fn complete_batched(self, batch: &mut CompletionBatch<T>) {
        let rq = self.request();
        // SAFETY: the request is in flight and its claim is ours (`Claimed`); on `false`
        // blk-mq leaves its completion to us, in this context.
        if unsafe { bindings::blk_mq_complete_request_remote(rq.raw()) } {
            return;
        }
        if !batch.add(rq) {
            // SAFETY: blk-mq left the completed request to us and the claim is ours: we
            // hand it to the driver to end, once.
            T::complete(unsafe { Owned::new(rq) });
        }
    }
}

/// `RQF_*` flags that keep a request out of a completion batch or ask for a time stamp.
const RQF_SCHED_TAGS: u32 = 1 << bindings::rqf_flags___RQF_SCHED_TAGS;
const RQF_NEED_TS: u32 = (1 << bindings::rqf_flags___RQF_IO_STAT)
    | (1 << bindings::rqf_flags___RQF_STATS)
    | (1 << bindings::rqf_flags___RQF_USE_SCHED);

/// Requests completed in one pass over a completion queue, ended together by
/// `blk_mq_end_request_batch` when the batch is dropped: one tag release and one io_uring
/// completion run per batch instead of per request. Upstream candidate.
///
/// # Invariants
///
/// Every request on `iob.req_list` is a request of a tag set for `T`, completed (state
/// COMPLETE), and is ended exactly once, by [`Self::finish_raw`].
pub(crate) struct CompletionBatch<T: Operations> {
    iob: bindings::io_comp_batch,
    _p: PhantomData<T>,
}

impl<T: Operations> CompletionBatch<T> {
    /// Upstream candidate.
    pub(crate) fn new() -> Self {
        // INVARIANT: the list is empty.
        Self {
            iob: pin_init::zeroed(),
            _p: PhantomData,
        }
    }

    /// `blk_mq_add_to_batch` (a static inline) for a request without error: a
    /// driver-private (passthrough) request with an `end_io` (a waiting ioctl, an io_uring
    /// command) is batched too, its `end_io` run by the batch, as in C.
    fn add(&mut self, rq: &Request<T>) -> bool {
        let r = rq.raw();
        // SAFETY: `r` is a completed request the driver owns; the list links are ours
        // until the batch ends it.
        unsafe {
            if (*r).rq_flags & RQF_SCHED_TAGS != 0
                || (*r).end_io.is_some() && !matches!(rq.op(), ReqOp::DrvIn | ReqOp::DrvOut)
            {
                return false;
            }
            // Only this type ever fills `iob`, so `complete` is ours once set.
            self.iob.complete = Some(Self::finish_raw);
            self.iob.need_ts |= (*r).rq_flags & RQF_NEED_TS != 0 || !(*(*r).q).elevator.is_null();
            (*r).__bindgen_anon_1.rq_next = core::ptr::null_mut();
            let list = &mut self.iob.req_list;
            if list.tail.is_null() {
                list.head = r;
            } else {
                (*list.tail).__bindgen_anon_1.rq_next = r;
            }
            // INVARIANT: `r` is a completed request of a tag set for `T` (the caller's), on
            // the list once; `finish_raw` ends it.
            list.tail = r;
        }
        true
    }

    /// # Safety
    ///
    /// `iob` holds only requests added by [`Self::add`] for `T`.
    unsafe extern "C" fn finish_raw(iob: *mut bindings::io_comp_batch) {
        // SAFETY: see the function's safety section.
        unsafe {
            let mut r = (*iob).req_list.head;
            while !r.is_null() {
                // The batch ends it below; the driver only borrows it.
                T::end_batched(&Owned::new(Request::from_raw(r)));
                r = (*r).__bindgen_anon_1.rq_next;
            }
            bindings::blk_mq_end_request_batch(iob);
        }
    }
}

impl<T: Operations> Drop for CompletionBatch<T> {
    fn drop(&mut self) {
        if !self.iob.req_list.head.is_null() {
            // SAFETY: the list holds only requests added by `add` (type invariant); they are
            // ended here, once.
            unsafe { Self::finish_raw(&mut self.iob) };
        }
    }
}
