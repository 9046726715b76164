// SPDX-License-Identifier: GPL-2.0

//! blk-mq: tag sets, disks, and the request accessors an NVMe driver needs.
//!
//! Shaped like 7.3's `kernel::block::mq` (rnull's binding: the same four files and names,
//! [`Operations`], [`Request`], [`TagSet`], [`GenDisk`]), which has no sector, length or
//! operation accessors, no tag lookup, no queue limits, no DMA mapping and no
//! `commit_rqs`/`queue_rqs`/`map_queues`/`complete`/`timeout`. Everything here that upstream
//! lacks is an upstream candidate; each item says so where it differs in model, not only in
//! extent:
//!
//! - [`TagSet`] owns a `blk_mq_tag_set`, the driver's per-set data (which maps hardware
//!   queue indexes to the driver's queues, `hctx->driver_data`), and the disks on it;
//! - [`GenDisk`] owns a `gendisk` and its per-disk data (`queue->queuedata`);
//! - [`Request`] reads a request's operation, position, length and flags. What only its
//!   owner of the moment may do goes through a token: [`Operations::queue_rq`] receives a
//!   [`Dispatched`] (prepare, map, start); the completion claim ([`Request::try_claim`])
//!   gives the one `Claimed` that may complete it; [`Operations::complete`] receives the
//!   [`Owned`] that unmaps and ends or requeues it. `dma_map` maps the data for DMA into a
//!   scatterlist kept in the request's private data (no allocation per I/O); `completion`
//!   ends requests in batches;
//! - [`QueueTags`] looks a command identifier's tag up, refusing tags that are out of range or
//!   belong to a request that is not in flight (a device must never make us touch a request
//!   we did not send).
//!
//! # Ownership: why not `ARef<Request>`, and the disks' list holding `Arc<TagSet>`
//!
//! Upstream hands the driver an `ARef<Request>`, counted in the request's private data, so
//! a request may outlive the callback that received it and ending it checks that no other
//! reference exists. Here a request is lent (`&Request`) for one callback, and a request
//! found by tag ([`QueueTags::in_flight`], [`TagSetRef::for_each_in_flight`]) only while blk-mq
//! says it is in flight; who may end it is settled by the request's completion claim (one
//! atomic swap per I/O, whose winner gets a token that completing consumes) instead of a
//! reference count (an atomic increment in `queue_rq`, another per tag lookup, a
//! compare-exchange per end). The driver never keeps a request past the callback, so the
//! count would buy nothing and cost three atomics per I/O.
//!
//! Upstream's `GenDisk` keeps its tag set alive with an `Arc<TagSet>`. Here a [`Disks`] list
//! holds the disks of one tag set and the `Arc`: a controller freezes, marks dead and
//! removes all of them together (format, suspend, death, removal), and "every disk is gone
//! before the tag set is freed" follows from the list's `Drop` and the count. The tag set
//! itself stays outside any lock the driver keeps around the list, so error recovery
//! (quiesce, cancel) never waits for a task that holds the list while it waits for I/O.

mod completion;
mod disks;
mod dma_map;
pub(super) mod gen_disk;
mod integrity;
mod operations;
mod private;
mod request;
mod tag_set;
mod zoned;

pub(crate) use completion::CompletionBatch;
pub(crate) use disks::{DiskAdder, Disks, DisksScan};
pub(crate) use dma_map::{Mapping, MAX_SEGMENTS};
pub(crate) use gen_disk::{DiskArc, DiskRef, Limits, NewDisk};
pub(crate) use integrity::Integrity;
pub(crate) use operations::{Operations, Timeout};
pub(crate) use private::{PrivateData, PrivateIo};
pub(crate) use request::{Dispatched, Owned, ReqOp, Request};
pub(crate) use tag_set::{QueueTags, TagSet, TagSetRef, Tags};
pub(crate) use zoned::{Zone, ZoneReporter, ZonedDisk, ZonedLimits};

/// `blk_status_t` values (include/linux/blk_types.h; `#define`s bindgen cannot see). Upstream
/// candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum BlkStatus {
    Ok = 0,
    NotSupp = 1,
    NoSpc = 3,
    Transport = 4,
    Target = 5,
    ResvConflict = 6,
    Medium = 7,
    Protection = 8,
    Resource = 9,
    IoErr = 10,
    /// A zoned device's limit of open zones was reached.
    ZoneOpenResource = 14,
    /// A zoned device's limit of active zones was reached.
    ZoneActiveResource = 15,
}
