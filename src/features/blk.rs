// SPDX-License-Identifier: GPL-2.0

//! The blk-mq operations: one request in, one NVMe command out, and back.
//!
//! `queue_rq` builds the command for the request's operation (READ/WRITE with PRPs, FLUSH,
//! DISCARD as Dataset Management deallocate, WRITE_ZEROES), gives it a command id made of
//! the tag and a generation counter, and submits it; the SQ doorbell is written once per
//! batch (`last`, or `commit_rqs`). The completion (see `ioq.rs`) stores the NVMe status in
//! the request; `complete` unmaps the data and ends the request with the matching block
//! status, or requeues it when the device says a retry may succeed.

use crate::{
    ioctl::{self, DiskLink},
    ioq::{IoQueue, List, NvmeBlk, RqState},
    kernel_ext::{
        block::mq::{
            BlkStatus, Dispatched, Mapping, Operations, Owned, ReqOp, Request, TagSetRef, Tags,
            Timeout, ZoneReporter, ZonedDisk,
        },
        sysfs::SysfsBuf,
    },
    ns::Namespace,
    params,
    queues::IoSet,
    reset,
    spec::{
        command::{dsm_range, io_cid, io_opcode, Command, DSM_MAX_RANGES},
        completion::{BlockError, Status},
        pi::{Checks, Metadata, PiFields},
        prp, sgl,
        zns::{self, ZoneAction},
    },
    zns as zoned,
};
use kernel::{
    page::PAGE_SIZE,
    prelude::*,
    str::CStr,
    time::{ClockSource, Monotonic},
};
// Per-request state: plain loads and stores (see kernel_ext::block::mq::request on why not LKMM atomics).
use core::sync::atomic::Ordering::Relaxed;

/// Retries of a command the device failed without Do Not Retry.
const MAX_RETRIES: u32 = 5;

/// The block layer's status for an NVMe error.
fn blk_status(e: BlockError) -> BlkStatus {
    match e {
        BlockError::NotSupported => BlkStatus::NotSupp,
        BlockError::NoSpace => BlkStatus::NoSpc,
        BlockError::Target => BlkStatus::Target,
        BlockError::Medium => BlkStatus::Medium,
        BlockError::Protection => BlkStatus::Protection,
        BlockError::ReservationConflict => BlkStatus::ResvConflict,
        BlockError::Transport => BlkStatus::Transport,
        BlockError::ZoneOpenResource => BlkStatus::ZoneOpenResource,
        BlockError::ZoneActiveResource => BlkStatus::ZoneActiveResource,
        BlockError::Io => BlkStatus::IoErr,
    }
}

impl Operations for NvmeBlk {
    type SetData<'a> = IoSet<'a>;
    type Queue<'a> = IoQueue<'a>;
    type DiskData<'a> = Namespace<'a>;
    type Rq = RqState;
    type Private = DiskLink;

    fn queue<'a>(set: &'a IoSet<'a>, index: u32) -> Option<&'a IoQueue<'a>> {
        set.queues.get(index as usize).map(|q| &**q)
    }

    fn init_queue(q: &IoQueue<'_>, tags: Tags<Self>) {
        q.set_tags(tags);
    }

    fn new_rq() -> RqState {
        RqState::new()
    }

    #[inline]
    fn queue_rq(q: &IoQueue<'_>, mut rq: Dispatched<'_, Self>, last: bool) -> BlkStatus {
        let ns = rq.request().disk();
        if q.is_dead() || ns.unusable() {
            if ns.head().is_some() && !rq.failfast() {
                // A path that chose this queue before it died: completed with a path error,
                // so the head sends the bios on another path (C's `nvme_host_path_error`).
                rq.data().set_completion(Status::HOST_PATH_ERROR, 0, 0);
                rq.start();
                if let Some(c) = rq.try_claim() {
                    c.complete();
                }
                return BlkStatus::Ok;
            }
            return BlkStatus::IoErr;
        }
        if rq.first_issue() {
            rq.data().retries.store(0, Relaxed);
            rq.data().map_failed_at.store(0, Relaxed);
        }
        // Built in place: a 64-byte command returned by value is copied at each step.
        let mut cmd = Command::default();
        if let Err(s) = build_command(q, ns, &mut rq, &mut cmd) {
            return s;
        }
        let st = rq.data();
        // Everything it needed (mappings, a list) was had: a later shortage counts afresh.
        if st.map_failed_at.load(Relaxed) != 0 {
            st.map_failed_at.store(0, Relaxed);
        }
        let generation = st.generation.load(Relaxed).wrapping_add(1);
        st.generation.store(generation, Relaxed);
        st.status.store(0, Relaxed);
        st.aborted.store(false, Relaxed);
        cmd.set_cid(io_cid::encode(rq.tag(), generation));
        rq.start();
        if q.queue.submit(&cmd, last).is_err() {
            rq.unmap_data(ns.dma_dev());
            q.release_list(rq.tag(), st);
            return BlkStatus::IoErr;
        }
        BlkStatus::Ok
    }

    fn commit_rqs(q: &IoQueue<'_>) {
        q.queue.commit();
    }

    fn complete(rq: Owned<'_, Self>) {
        let ns = rq.disk();
        rq.unmap_data(ns.dma_dev());
        rq.queue().release_list(rq.tag(), rq.data());
        let st = rq.data();
        let status = st.status();
        if matches!(rq.op(), ReqOp::DrvIn | ReqOp::DrvOut) {
            // Passthrough: the ioctl reports the NVMe status; never retried or logged.
            rq.end(BlkStatus::Ok);
            return;
        }
        let Some(err) = status.block_error() else {
            zone_append_done(&rq);
            rq.end(BlkStatus::Ok);
            return;
        };
        if let Some(link) = ns.head() {
            // As C's `nvme_decide_disposition` for a multipath request: the host's own path
            // errors (its aborts at a reset or a controller's death, a dead queue) or a
            // namespace going away send the bios to another path. Path errors the device
            // reports (ANA states) are ended as errors: without ANA, rnvme cannot tell
            // which path would do better, and would send them around forever.
            if !rq.failfast() && (status.host_path_error() || ns.unusable()) {
                let head = link.head.clone();
                head.failover(rq);
                return;
            }
        }
        let tries = st.retries.fetch_add(1, Relaxed) + 1;
        if status.retryable() && !rq.failfast() && tries <= MAX_RETRIES {
            // After the delay the controller asked for (CRD), as the C driver.
            let delay = ns.retry_delay_ms(status);
            rq.requeue_after(delay);
            return;
        }
        ns.log_error(rq.op(), rq.sector(), status, tries);
        rq.end(blk_status(err));
    }

    fn poll(q: &IoQueue<'_>) -> u32 {
        // Most polls find nothing: skip the lock then, as the C driver's nvme_cqe_pending.
        if !q.queue.cq_pending() {
            return 0;
        }
        let n = q.poll();
        q.queue.stats.polled(n);
        n
    }

    fn end_batched(rq: &Owned<'_, Self>) {
        rq.unmap_data(rq.disk().dma_dev());
        rq.queue().release_list(rq.tag(), rq.data());
        zone_append_done(rq);
    }

    fn report_zones(
        disk: &ZonedDisk<'_, Self>,
        sector: u64,
        nr_zones: u32,
        to: &mut ZoneReporter<'_>,
    ) -> Result<u32> {
        zoned::report_zones(disk, sector, nr_zones, to)
    }

    fn timeout(set: TagSetRef<'_, Self>, q: &IoQueue<'_>, rq: &Request<Self>) -> Timeout {
        reset::timeout(set, q, rq)
    }

    /// As C's `nvme_uring_cmd_end_io`: the NVMe status if the device gave one (without the
    /// phase bit), else the block layer's error, and the result dword.
    fn private_outcome(rq: &RqState, ok: bool) -> (i32, u64) {
        let status = rq.status();
        let result = rq.result();
        if rq.cancelled() {
            // Taken back by a reset or a dead controller: `EINTR`, as C's cancelled
            // requests.
            (EINTR.to_errno(), 0)
        } else if !status.is_success() {
            (crate::passthru::status_ret(status), result)
        } else if !ok {
            (EIO.to_errno(), result)
        } else {
            (0, result)
        }
    }

    fn ioctl(p: &DiskLink, writable: bool, partition: bool, cmd: u32, arg: usize) -> Result<isize> {
        ioctl::disk_ioctl(p, writable, partition, cmd, arg)
    }

    fn disk_removing(ns: &Namespace<'_>) {
        if let Some(link) = ns.head() {
            link.detach();
        }
    }

    const DISK_ATTRS: &'static [&'static CStr] = ioctl::DISK_ATTR_NAMES;

    fn disk_attr_visible(p: &DiskLink, index: usize) -> bool {
        p.ids.attr_visible(index)
    }

    fn disk_attr_show(p: &DiskLink, index: usize, out: &mut SysfsBuf<'_>) -> core::fmt::Result {
        p.ids.show_attr(p.ns.nsid, index, out)
    }

    fn shorten_set<'s, 'l: 's>(d: &'s IoSet<'l>) -> &'s IoSet<'s> {
        d
    }

    fn shorten_disk<'s, 'l: 's>(d: &'s Namespace<'l>) -> &'s Namespace<'s> {
        d
    }
}

/// Builds the command for `rq` in `cmd`, mapping its data if it has any.
#[inline]
fn build_command(
    q: &IoQueue<'_>,
    ns: &Namespace<'_>,
    rq: &mut Dispatched<'_, NvmeBlk>,
    cmd: &mut Command,
) -> Result<(), BlkStatus> {
    let nsid = ns.nsid();
    match rq.op() {
        ReqOp::Flush => {
            *cmd = Command::flush(nsid);
            Ok(())
        }
        ReqOp::Read | ReqOp::Write => {
            let (slba, nlb) = ns.blocks(rq.sector(), rq.bytes()).ok_or(BlkStatus::IoErr)?;
            let opcode = if rq.op() == ReqOp::Read {
                io_opcode::READ
            } else {
                io_opcode::WRITE
            };
            // `cmd` is the zeroed command of `queue_rq`.
            cmd.set_rw(opcode, nsid, slba, nlb, rq.fua());
            if let Some(meta) = ns.metadata() {
                return protected_rw(q, ns, meta, rq, cmd, slba, nlb, false);
            }
            map_data(q, ns, rq, cmd, false)
        }
        ReqOp::WriteZeroes if ns.zeroes_by_deallocate() => {
            // deallocate_zeroes: the controller reads deallocated blocks as zeroes; one
            // range, within the discard limits.
            let (slba, nlb) = ns.blocks(rq.sector(), rq.bytes()).ok_or(BlkStatus::IoErr)?;
            let [lo, hi] = dsm_range(slba, nlb);
            let list = take_list(q, ns, rq, 2)?;
            list.put(0, lo)
                .and_then(|()| list.put(1, hi))
                .map_err(|_| BlkStatus::IoErr)?;
            *cmd = Command::deallocate(nsid, 1, list.dma());
            q.park_list(rq.tag(), rq.data(), list)
                .map_err(|_| BlkStatus::IoErr)
        }
        ReqOp::WriteZeroes => {
            let (slba, nlb) = ns.blocks(rq.sector(), rq.bytes()).ok_or(BlkStatus::IoErr)?;
            if nlb > 65536 {
                return Err(BlkStatus::IoErr);
            }
            *cmd = Command::write_zeroes(nsid, slba, nlb);
            if let Some(meta) = ns.metadata() {
                // The controller writes the protection information (PRACT).
                set_pi(cmd, meta.write_zeroes_fields(slba));
            }
            Ok(())
        }
        ReqOp::Discard => {
            let mut ranges = 0usize;
            rq.for_each_range(|_, _| ranges += 1);
            if ranges == 0 || ranges > DSM_MAX_RANGES {
                return Err(BlkStatus::IoErr);
            }
            let list = take_list(q, ns, rq, 2 * ranges)?;
            let mut n = 0usize;
            let mut bad = false;
            rq.for_each_range(|sector, sectors| {
                let Some((slba, nlb)) = ns.blocks(sector, sectors << 9) else {
                    bad = true;
                    return;
                };
                if n >= DSM_MAX_RANGES {
                    bad = true;
                    return;
                }
                let [lo, hi] = dsm_range(slba, nlb);
                bad |= list.put(2 * n, lo).is_err() || list.put(2 * n + 1, hi).is_err();
                n += 1;
            });
            if bad || n == 0 {
                return Err(BlkStatus::IoErr);
            }
            *cmd = Command::deallocate(nsid, n as u32, list.dma());
            q.park_list(rq.tag(), rq.data(), list)
                .map_err(|_| BlkStatus::IoErr)
        }
        ReqOp::DrvIn | ReqOp::DrvOut => {
            *cmd = rq.data().passthru();
            if rq.bytes() == 0 {
                return Ok(());
            }
            // Passthrough buffers may be longer than the command's transfer (nvme-cli
            // passes its whole buffer): PRPs allow that, SGLs do not (SGL Length Invalid).
            map_data(q, ns, rq, cmd, true)?;
            if rq.has_integrity() {
                // The user's metadata buffer, its length the user's.
                map_metadata(q, ns, rq, cmd, None)?;
            }
            Ok(())
        }
        ReqOp::ZoneAppend => {
            // SLBA is the zone's start; the completion says where the data went.
            let (slba, nlb) = ns.blocks(rq.sector(), rq.bytes()).ok_or(BlkStatus::IoErr)?;
            cmd.set_rw(zns::opcode::ZONE_APPEND, nsid, slba, nlb, rq.fua());
            if let Some(meta) = ns.metadata() {
                return protected_rw(q, ns, meta, rq, cmd, slba, nlb, true);
            }
            map_data(q, ns, rq, cmd, false)
        }
        ReqOp::ZoneReset | ReqOp::ZoneResetAll => {
            let all = rq.op() == ReqOp::ZoneResetAll;
            *cmd = zns::zone_mgmt_send(nsid, ns.lba(rq.sector()), ZoneAction::Reset, all);
            Ok(())
        }
        ReqOp::ZoneOpen | ReqOp::ZoneClose | ReqOp::ZoneFinish => {
            let action = match rq.op() {
                ReqOp::ZoneOpen => ZoneAction::Open,
                ReqOp::ZoneClose => ZoneAction::Close,
                _ => ZoneAction::Finish,
            };
            *cmd = zns::zone_mgmt_send(nsid, ns.lba(rq.sector()), action, false);
            Ok(())
        }
        ReqOp::Other(_) => Err(BlkStatus::NotSupp),
    }
}

/// A Zone Append that succeeded: the request's position becomes where the device wrote
/// the data (completion dwords 0 and 1, a logical block), for the submitter.
#[inline]
fn zone_append_done(rq: &Owned<'_, NvmeBlk>) {
    if rq.op() == ReqOp::ZoneAppend {
        let ns = rq.disk();
        rq.set_sector(rq.data().result() << ((ns.lba_shift() - 9) & 31));
    }
}

/// A Read, Write or Zone Append (`append`) of `nlb` blocks at `slba` on a namespace with
/// metadata `meta`: the protection fields, then the data and the metadata mapped, as C's
/// `nvme_setup_rw` and `nvme_map_metadata`. Without the block layer's metadata (a disk
/// without an integrity profile, or a read it does not verify) the controller inserts and
/// strips the protection information; other metadata cannot be made up.
#[allow(clippy::too_many_arguments)]
fn protected_rw(
    q: &IoQueue<'_>,
    ns: &Namespace<'_>,
    meta: &Metadata,
    rq: &mut Dispatched<'_, NvmeBlk>,
    cmd: &mut Command,
    slba: u64,
    nlb: u32,
    append: bool,
) -> Result<(), BlkStatus> {
    let checks = rq.integrity_checks().map(|c| Checks {
        guard: c.guard,
        reftag: c.reftag,
        apptag: c.apptag,
    });
    if checks.is_none() && !meta.has_pi() {
        return Err(BlkStatus::NotSupp);
    }
    set_pi(cmd, meta.rw_fields(slba, checks, append));
    map_data(q, ns, rq, cmd, false)?;
    if checks.is_some() {
        map_metadata(q, ns, rq, cmd, Some(meta.bytes(nlb)))?;
    }
    Ok(())
}

/// ORs protection fields into a command.
fn set_pi(cmd: &mut Command, f: PiFields) {
    cmd.dw[12] |= f.cdw12;
    cmd.dw[3] |= f.cdw3;
    cmd.dw[14] |= f.cdw14;
    cmd.dw[15] |= f.cdw15;
}

/// Maps the request's metadata (its data is mapped) and points the command's metadata
/// pointer at it; `expected`: the length it must have (block I/O). On failure the data is
/// unmapped and its list given back too.
fn map_metadata(
    q: &IoQueue<'_>,
    ns: &Namespace<'_>,
    rq: &Dispatched<'_, NvmeBlk>,
    cmd: &mut Command,
    expected: Option<u64>,
) -> Result<(), BlkStatus> {
    let dev = ns.dma_dev();
    match rq.map_metadata(dev) {
        // The metadata pointer is one buffer of implicit length, dword aligned.
        Ok((addr, len)) if addr & 3 == 0 && expected.is_none_or(|e| e == u64::from(len)) => {
            cmd.set_mptr(addr);
            Ok(())
        }
        Ok((_, len)) => {
            rq.unmap_data(dev);
            q.release_list(rq.tag(), rq.data());
            ns.log_metadata_error(rq.sector(), len);
            Err(BlkStatus::IoErr)
        }
        Err(e) => {
            rq.unmap_data(dev);
            q.release_list(rq.tag(), rq.data());
            if e == ENOMEM {
                Err(map_failed(ns, rq))
            } else {
                Err(BlkStatus::IoErr)
            }
        }
    }
}

/// Maps the request's data and points the command at it: with an SGL when the controller
/// supports them and the transfer is at least `sgl_threshold` bytes of more than one segment
/// (one descriptor per segment beats one PRP entry per page) and not `prps_only`, else with
/// PRPs.
// Always inlined (with what it calls for one segment): since the metadata and zoned paths
// call it too, the compiler otherwise keeps it out of `queue_rq`, a call on every I/O.
#[inline(always)]
fn map_data(
    q: &IoQueue<'_>,
    ns: &Namespace<'_>,
    rq: &mut Dispatched<'_, NvmeBlk>,
    cmd: &mut Command,
    prps_only: bool,
) -> Result<(), BlkStatus> {
    let dev = ns.dma_dev();
    let mapped = if q.faults.fail_dma_map() {
        Err(ENOMEM)
    } else {
        rq.map_data(dev)
    };
    let Ok(mapping) = mapped else {
        return Err(map_failed(ns, rq));
    };
    // One segment within two pages, most small I/O: PRP1 and PRP2 directly.
    if let Mapping::Single(addr, len) = mapping {
        if let Some((prp1, prp2)) = prp::simple(addr, len, PAGE_SIZE as u64) {
            cmd.set_prp(prp1, prp2);
            return Ok(());
        }
    }
    map_list(q, ns, rq, cmd, prps_only, mapping.count())
}

/// [`map_data`] for data that needs a PRP list or an SGL: takes a list, from the small pool
/// when the transfer's entries fit, and fills it; parks it for the request while the device
/// reads it. Short of lists, the request is tried again later, as short of mappings.
fn map_list(
    q: &IoQueue<'_>,
    ns: &Namespace<'_>,
    rq: &mut Dispatched<'_, NvmeBlk>,
    cmd: &mut Command,
    prps_only: bool,
    segments: u32,
) -> Result<(), BlkStatus> {
    let dev = ns.dma_dev();
    let threshold = params::sgl_threshold();
    let use_sgl =
        !prps_only && ns.sgl() && threshold != 0 && segments > 1 && rq.bytes() >= threshold;
    // At most: two words per SGL descriptor; a PRP entry per page after the first (only the
    // first segment may start inside a page, so the pages are at most bytes / page + 1).
    let entries = if use_sgl {
        2 * segments as usize
    } else {
        (rq.bytes() as usize).div_ceil(PAGE_SIZE)
    };
    let list = match take_list(q, ns, rq, entries) {
        Ok(list) => list,
        Err(s) => {
            rq.unmap_data(dev);
            if s == BlkStatus::IoErr {
                ns.log_mapping_error(rq.sector(), rq.bytes());
            }
            return Err(s);
        }
    };
    let mut put_err = false;
    let mapped = if use_sgl {
        sgl::build(
            rq.segments(),
            list.entries() / 2,
            list.dma(),
            |i, [a, b]| put_err |= list.put(2 * i, a).is_err() || list.put(2 * i + 1, b).is_err(),
        )
        .map(|sgl1| {
            cmd.set_sgl(sgl1);
            segments > 1
        })
        .map_err(|_| ())
    } else {
        prp::build(
            rq.segments(),
            PAGE_SIZE as u64,
            list.entries(),
            list.dma(),
            |i, addr| put_err |= list.put(i, addr).is_err(),
        )
        .map(|p| {
            cmd.set_prp(p.prp1, p.prp2);
            p.list_entries > 0
        })
        .map_err(|_| ())
    };
    match mapped {
        // The list unused (all fitted in the command) goes back to its pool when dropped.
        Ok(false) if !put_err => return Ok(()),
        Ok(true) if !put_err => {
            if q.park_list(rq.tag(), rq.data(), list).is_ok() {
                return Ok(());
            }
        }
        _ => {}
    }
    rq.unmap_data(dev);
    ns.log_mapping_error(rq.sector(), rq.bytes());
    Err(BlkStatus::IoErr)
}

/// A list of `entries` for `rq`: none to be had now is a shortage blk-mq retries, as an
/// unmappable request is ([`map_failed`]); more entries than a list page holds never fit.
fn take_list<'q>(
    q: &'q IoQueue<'_>,
    ns: &Namespace<'_>,
    rq: &Request<NvmeBlk>,
    entries: usize,
) -> Result<List<'q>, BlkStatus> {
    match q.take_list(entries) {
        Ok(Some(list)) => Ok(list),
        Ok(None) => Err(map_failed(ns, rq)),
        Err(_) => Err(BlkStatus::IoErr),
    }
}

/// The request's data could not be mapped: for want of IOMMU space or bounce buffers, which
/// other I/O gives back as it completes, so blk-mq tries again later. One that still cannot
/// be mapped after the I/O timeout fails instead of being retried forever. (Transfers fit
/// one mapping: see `ns::max_transfer`.)
fn map_failed(ns: &Namespace<'_>, rq: &Request<NvmeBlk>) -> BlkStatus {
    let st = rq.data();
    // Never 0, which means "has not failed".
    let now = (Monotonic::ktime_get() as u64).max(1);
    let first = st.map_failed_at.load(Relaxed);
    if first == 0 {
        st.map_failed_at.store(now, Relaxed);
        return BlkStatus::Resource;
    }
    let waited_ms = now.saturating_sub(first) / 1_000_000;
    if waited_ms < u64::from(params::io_timeout_ms()) {
        return BlkStatus::Resource;
    }
    st.map_failed_at.store(0, Relaxed);
    ns.log_unmappable(rq.sector(), rq.bytes(), waited_ms);
    BlkStatus::IoErr
}
