// SPDX-License-Identifier: GPL-2.0

//! Error recovery: I/O timeouts, Abort, controller reset, and giving up on a dead device.
//!
//! As the C driver (`nvme_timeout`), escalating:
//!
//! 1. The device reads as all ones: it is gone. Every request fails, nothing is retried.
//! 2. CSTS.CFS (controller fatal status): reset at once.
//! 3. The completion is already in the completion queue (a lost interrupt): reap it.
//! 4. First timeout of a command: send Abort (bounded by the controller's Abort Command
//!    Limit) and give the command another timeout period.
//! 5. Second timeout: reset the controller. Quiesce the queues, disable the controller (it
//!    stops all DMA), reap what completed, take every command still in flight back with
//!    "aborted by host" (retried by `blk.rs`, at most `MAX_RETRIES` times per request),
//!    empty the rings, enable, ask for the same number of queues, re-create them with the
//!    same memory and vectors, re-identify, and unquiesce. The disks stay.
//!
//! If the controller does not come back it is declared dead: queued and new requests fail
//! with an I/O error until the device is unbound.

use crate::{
    hw::Hw,
    ioq::{IoQueue, NvmeBlk},
    kernel_ext::{
        block::mq::{Request, TagSetRef, Timeout},
        pci_clear_master, pci_set_master,
    },
    params,
    queues::IoSet,
    spec::{
        command::io_cid,
        completion::Status,
        regs::{self as r, csts},
    },
    state::State,
};
use kernel::prelude::*;

/// blk-mq's timeout handler for one request.
pub(crate) fn timeout(
    set: TagSetRef<'_, NvmeBlk>,
    q: &IoQueue<'_>,
    rq: &Request<NvmeBlk>,
) -> Timeout {
    let io = set.data();
    let hw = &io.hw;
    let (qid, tag) = (q.queue.qid(), rq.tag());
    q.queue.stats.timeout();
    let cid = io_cid::encode(tag, rq.data().generation());
    // Resets so far. Another namespace's timeout may start one while this runs: it takes
    // this request back too, and must not be followed by a second reset for it.
    let seen = hw.resets();
    let s = hw.regs.csts();
    if r::device_gone(s) {
        give_up(&set, "device not responding (registers read as all ones)");
        return Timeout::Done;
    }
    if hw.state() == State::Dead {
        give_up(&set, "controller is dead");
        return Timeout::Done;
    }
    if hw.state() == State::Resetting {
        // An admin timeout stopped the controller and asked for a reset that nobody has
        // started: start it here rather than wait for the controller's work, which may
        // itself be waiting for this request (a rescan). Unless the PCI core holds the
        // function (its release brings the controller back).
        if let Some(seen) = hw.pending_reset() {
            if !hw.is_held() {
                return reset_for(&set, q, rq, seen, "admin command timeout");
            }
        }
        // A reset under way takes every request back (a fatal status too: it is reset
        // already).
        return Timeout::ResetTimer;
    }
    if s & csts::CFS != 0 {
        return reset_for(&set, q, rq, seen, "controller fatal status");
    }
    // Did we miss an interrupt?
    q.process();
    if !rq.in_flight() {
        dev_warn!(
            hw.dev(),
            "rnvme{}: I/O tag {tag} ({cid:#06x}) QID {qid} timeout, completion polled\n",
            hw.instance
        );
        return Timeout::Done;
    }
    // Aborts have the admin timeout, as in the C driver: one the controller has not
    // completed by then it has lost, and it holds an abort slot for good.
    if let Some(ms) = hw.admin.oldest_abort_ms() {
        if ms >= u64::from(params::admin_timeout_ms()) {
            dev_warn!(
                hw.dev(),
                "rnvme{}: I/O tag {tag} ({cid:#06x}) QID {qid} timeout; an Abort sent {ms} ms ago never completed: resetting controller\n",
                hw.instance
            );
            return reset_for(&set, q, rq, seen, "Abort timeout");
        }
    }
    if rq.data().mark_aborted() {
        let Ok(slot) = hw.admin.claim_abort(qid, cid, hw.abort_limit()) else {
            // No abort slot free (or a reset started): try again at the next timeout.
            rq.data().clear_aborted();
            return Timeout::ResetTimer;
        };
        dev_warn!(
            hw.dev(),
            "rnvme{}: I/O tag {tag} ({cid:#06x}) QID {qid} timeout, aborting {:?} of {} bytes\n",
            hw.instance,
            rq.op(),
            rq.bytes()
        );
        if hw.admin.send_abort(slot).is_err() {
            rq.data().clear_aborted();
        }
        return Timeout::ResetTimer;
    }
    dev_warn!(
        hw.dev(),
        "rnvme{}: I/O tag {tag} ({cid:#06x}) QID {qid} timeout after abort, resetting controller\n",
        hw.instance
    );
    reset_for(&set, q, rq, seen, "I/O timeout")
}

/// Resets the controller for a timed-out request, unless a reset ran after the request's
/// timeout saw `seen` resets: that one took the request back (it is retried, or in flight
/// again with a new timer).
fn reset_for(
    set: &TagSetRef<'_, NvmeBlk>,
    q: &IoQueue<'_>,
    rq: &Request<NvmeBlk>,
    seen: u32,
    why: &str,
) -> Timeout {
    q.faults.delay_reset();
    match reset_unless_after(set, why, Some(seen)) {
        Ok(false) if rq.in_flight() => Timeout::ResetTimer,
        _ => Timeout::Done,
    }
}

/// Takes every command in flight back from the controller with `status`.
fn cancel_in_flight(set: &TagSetRef<'_, NvmeBlk>, status: Status) {
    set.for_each_in_flight(&mut |rq| {
        // Unless an interrupt handler (or a poller) got its completion entry first.
        if let Some(rq) = rq.try_claim() {
            rq.data().set_cancelled(status);
            rq.complete();
        }
    });
    set.wait_completed();
}

/// Resets the controller, keeping its disks; see the module documentation.
pub(crate) fn reset(set: &TagSetRef<'_, NvmeBlk>, why: &str) -> Result {
    reset_unless_after(set, why, None).map(|_| ())
}

/// Starts the reset an admin timeout asked for, unless it was started already (by the
/// timeout of an I/O it stopped, a hold or a give-up).
pub(crate) fn reset_pending(set: &TagSetRef<'_, NvmeBlk>, why: &str) -> Result {
    match set.data().hw.pending_reset() {
        Some(seen) => reset_unless_after(set, why, Some(seen)).map(|_| ()),
        None => Ok(()),
    }
}

/// Resets the controller, unless `seen` is given and a reset ran after the caller saw
/// `seen` resets (false then).
fn reset_unless_after(set: &TagSetRef<'_, NvmeBlk>, why: &str, seen: Option<u32>) -> Result<bool> {
    let io = set.data();
    let hw = &io.hw;
    let _serial = hw.reset_lock.lock();
    if hw.state() == State::Dead {
        return Err(ENODEV);
    }
    if hw.is_held() {
        // The PCI core holds the function; `release` brings it back.
        return Err(EBUSY);
    }
    if seen.is_some_and(|seen| hw.resets() != seen) {
        return Ok(false);
    }
    hw.clear_pending_reset();
    hw.set_state(State::Resetting);
    let n = hw.count_reset();
    dev_warn!(
        hw.dev(),
        "rnvme{}: resetting controller ({why}), reset {n}\n",
        hw.instance
    );
    let stopped = stop(set, Halt::Disable);
    bring_back(set, stopped, "reset").map(|()| true)
}

/// How [`stop`] stops the controller.
#[derive(Clone, Copy)]
pub(crate) enum Halt {
    /// Clear CC.EN (a reset follows).
    Disable,
    /// Normal shutdown (CC.SHN), then disable: the controller may lose power.
    Shutdown,
    /// Leave the registers alone: the link is frozen, a slot reset follows.
    Untouched,
}

/// Quiesces the queues and stops the controller as `halt` says, turns its bus mastering
/// off, delivers what it completed before it stopped and takes every other command back
/// with "aborted by host" (retried). Returns whether it stopped.
fn stop(set: &TagSetRef<'_, NvmeBlk>, halt: Halt) -> Result {
    let io = set.data();
    let hw = &io.hw;
    set.quiesce();
    let stopped = match halt {
        Halt::Disable => hw.disable(),
        Halt::Shutdown => {
            hw.shutdown();
            Ok(())
        }
        Halt::Untouched => Ok(()),
    };
    // Registers out of reach may read as a stopped controller: whatever it looked like, it
    // must not write into the memory of the commands given back below (C's
    // `nvme_dev_disable` disables the PCI device). The enable that follows turns it on.
    pci_clear_master(hw.pdev);
    // What completed before the controller stopped is good: deliver it.
    for q in io.queues.iter() {
        q.process();
    }
    hw.admin.process();
    hw.admin.cancel();
    cancel_in_flight(set, Status::HOST_ABORTED);
    stopped
}

/// Brings a controller [`stop`] stopped back with its queues and resumes I/O, or
/// declares it dead if it did not stop or does not come back.
fn bring_back(set: &TagSetRef<'_, NvmeBlk>, stopped: Result, what: &str) -> Result {
    let io = set.data();
    let hw = &io.hw;
    let stopped = stopped.or_else(|e| hw.stop_with_decode_restored().map_err(|_| e));
    match stopped.and_then(|()| restart(io)) {
        Ok(()) => {
            hw.set_state(State::Live);
            set.unquiesce();
            dev_info!(hw.dev(), "rnvme{}: {what} done\n", hw.instance);
            Ok(())
        }
        Err(e) => {
            dev_err!(
                hw.dev(),
                "rnvme{}: {what} failed ({}): controller disabled, I/O will fail\n",
                hw.instance,
                e.to_errno()
            );
            mark_dead(set, hw);
            Err(e)
        }
    }
}

/// Enables the controller again with empty rings: restores bus mastering first (a PCI
/// error, or someone writing the command register, may have cleared it: the controller
/// then cannot fetch a command, as C's `nvme_pci_enable` knows), then asks for `nr` I/O
/// queues. A controller that does not answer that first command gets one more enable.
fn enable_again(hw: &Hw<'_>, nr: u16) -> Result {
    let mut tries = 0;
    loop {
        hw.admin.restart()?;
        pci_set_master(hw.pdev);
        hw.enable()?;
        hw.admin.resume();
        let first = if nr > 0 { hw.set_num_queues(nr) } else { Ok(0) };
        match first {
            Ok(granted) if granted < nr => {
                dev_err!(
                    hw.dev(),
                    "controller now grants {granted} I/O queues, {nr} needed\n"
                );
                return Err(EIO);
            }
            Ok(_) => {
                // The controller answers: user space commands may reach it again. (C takes
                // them only once the whole reset is done; a namespace attached meanwhile
                // is found by the rescan the command's effects ask for.)
                hw.admin.open_users();
                return Ok(());
            }
            Err(e) if tries == 0 && hw.state() != State::Dead => {
                tries += 1;
                dev_warn!(
                    hw.dev(),
                    "rnvme{}: first command after enable failed ({}): enabling once more\n",
                    hw.instance,
                    e.to_errno()
                );
                hw.disable()?;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Brings a disabled controller back with the queues it had.
fn restart(io: &IoSet<'_>) -> Result {
    let hw = &io.hw;
    if io
        .queues
        .iter()
        .next()
        .is_some_and(|q| q.faults.fail_restart())
    {
        dev_err!(
            hw.dev(),
            "rnvme{}: restart failed (injected)\n",
            hw.instance
        );
        return Err(EIO);
    }
    for q in io.queues.iter() {
        q.queue.reset()?;
    }
    if let Some(s) = &io.shadow {
        s.clear();
    }
    let nr = io.queues.len() as u16;
    enable_again(hw, nr)?;
    if let Some(q) = io.queues.iter().next() {
        q.faults.delay_restart();
    }
    for q in io.queues.iter() {
        hw.create_io_queue(q)?;
    }
    if let Some(s) = &io.shadow {
        hw.enable_shadow(s, &io.queues);
    }
    let id = hw.identify_controller()?;
    hw.set_abort_limit(id.acl);
    hw.configure_host_options(&id);
    hw.start_async_events(None);
    Ok(())
}

/// Declares the controller dead: stops it, fails what is in flight and what comes later.
fn mark_dead(set: &TagSetRef<'_, NvmeBlk>, hw: &Hw<'_>) {
    hw.clear_pending_reset();
    hw.set_state(State::Dead);
    hw.set_held(false);
    for q in set.data().queues.iter() {
        q.set_dead();
    }
    let _ = hw.disable();
    // Whether or not it looked stopped (registers out of reach read as a stopped
    // controller), a dead controller must not write into memory given back from here on:
    // bus mastering off, as C's `pci_disable_device`.
    pci_clear_master(hw.pdev);
    hw.admin.cancel();
    cancel_in_flight(set, Status::HOST_ABORTED_DNR);
    set.unquiesce();
    if let Some(events) = hw.admin.events() {
        events.controller_dead();
    }
}

/// The system goes down: new and outstanding I/O fails (not retried) and the controller
/// gets a normal shutdown. Nothing is freed: the driver stays bound, and a later unbind
/// finds a dead controller.
pub(crate) fn shut_down(set: &TagSetRef<'_, NvmeBlk>) {
    let io = set.data();
    let hw = &io.hw;
    let _serial = hw.reset_lock.lock();
    hw.set_state(State::Dead);
    for q in io.queues.iter() {
        q.set_dead();
    }
    // A held function's queues are quiesced already (quiescing nests).
    if !hw.set_held(false) {
        set.quiesce();
    }
    hw.shutdown();
    // As in `stop`: nothing written into memory given back.
    pci_clear_master(hw.pdev);
    // What completed before the controller stopped is good: deliver it.
    for q in io.queues.iter() {
        q.process();
    }
    hw.admin.cancel();
    cancel_in_flight(set, Status::HOST_ABORTED_DNR);
    set.unquiesce();
}

/// The PCI core takes the function (a function reset, system sleep, a frozen link): stop
/// the controller as `halt` says, deliver what it completed, take every other command back
/// (retried once the controller is back) and keep the queues quiesced until [`release`].
/// Other resets wait for it. Returns false if the controller is dead (nothing to hold).
pub(crate) fn hold(set: &TagSetRef<'_, NvmeBlk>, halt: Halt, why: &str) -> bool {
    let io = set.data();
    let hw = &io.hw;
    let _serial = hw.reset_lock.lock();
    if hw.state() == State::Dead {
        return false;
    }
    if hw.set_held(true) {
        return true;
    }
    // The release brings the controller back: that is the reset an admin timeout asked for.
    hw.clear_pending_reset();
    hw.set_state(State::Resetting);
    dev_info!(
        hw.dev(),
        "rnvme{}: {why}: stopping the controller\n",
        hw.instance
    );
    // A controller that does not stop loses bus mastering; what follows stops it anyway.
    let _ = stop(set, halt);
    true
}

/// The PCI core gives the function back: bring the controller [`hold`] stopped back with
/// its queues, as a reset does, or declare it dead. Whatever it went through meanwhile
/// (a function reset, a power loss, a hibernation image restored by another kernel), it
/// starts disabled.
pub(crate) fn release(set: &TagSetRef<'_, NvmeBlk>, what: &str) -> Result {
    let io = set.data();
    let hw = &io.hw;
    let _serial = hw.reset_lock.lock();
    if !hw.set_held(false) {
        // Not held: dead before, or given up meanwhile.
        return if hw.state() == State::Dead {
            Err(ENODEV)
        } else {
            Ok(())
        };
    }
    hw.count_reset();
    let stopped = hw.disable();
    bring_back(set, stopped, what)
}

/// A controller without I/O queues (so no disks) comes back from a hold: the admin queue
/// only.
pub(crate) fn restart_admin(hw: &Hw<'_>) -> Result {
    let _serial = hw.reset_lock.lock();
    if hw.state() == State::Dead {
        return Err(ENODEV);
    }
    hw.disable()?;
    hw.admin.process();
    hw.admin.cancel();
    enable_again(hw, 0)?;
    hw.start_async_events(None);
    Ok(())
}

/// The device is gone (or its link failed for good): fail everything, once.
pub(crate) fn give_up(set: &TagSetRef<'_, NvmeBlk>, why: &str) {
    let io = set.data();
    let hw = &io.hw;
    let _serial = hw.reset_lock.lock();
    if hw.state() != State::Dead {
        dev_err!(hw.dev(), "rnvme{}: {why}: failing all I/O\n", hw.instance);
        // A held function's queues are quiesced already; quiescing nests, and
        // `mark_dead` unquiesces once.
        if !hw.is_held() {
            set.quiesce();
        }
        mark_dead(set, hw);
    } else {
        cancel_in_flight(set, Status::HOST_ABORTED_DNR);
    }
}
