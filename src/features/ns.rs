// SPDX-License-Identifier: GPL-2.0

//! Namespaces: identify, decide whether we can expose them, and the disk's queue limits.

use crate::{
    ioctl::{NsChar, NsKey},
    kernel_ext::{
        block::mq::{Integrity, Limits, ReqOp, ZonedLimits, MAX_SEGMENTS},
        chardev::CharDev,
    },
    mpath::HeadLink,
    spec::{
        command::DSM_MAX_RANGES,
        completion::Status,
        identify::{retry_delay_ms, IdentifyController, IdentifyControllerNvm, IdentifyNamespace},
        pi::{Metadata, Mode},
        quirks::Quirks,
        regs::Cap,
    },
    zns::Zoned,
};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use kernel::{
    device::{Bound, Device},
    page::PAGE_SIZE,
    pci,
    prelude::*,
    sync::SetOnce,
};

/// Largest transfer we issue: one PRP list page describes 512 pages after the first.
const MAX_TRANSFER: u64 = 2 << 20;

/// Most bytes one command moves on a controller identified by `ctrl` with capabilities
/// `cap` whose DMA mappings are best at most `dma_opt` bytes: MDTS, at most what one PRP
/// list page describes, and (as the C driver) at most `dma_opt` in whole pages. Block
/// requests and passthrough commands alike.
pub(crate) fn max_transfer(ctrl: &IdentifyController, cap: Cap, dma_opt: u32) -> u32 {
    let dma = u64::from(dma_opt) & !(PAGE_SIZE as u64 - 1);
    ctrl.max_transfer_bytes(cap)
        .unwrap_or(MAX_TRANSFER)
        .min(MAX_TRANSFER)
        .min(dma.max(PAGE_SIZE as u64)) as u32
}

/// The largest logical block the 7.3 block layer takes (`BLK_MAX_BLOCK_SIZE`): 64 KiB with
/// large folios (transparent huge pages), else a page, as the C driver finds with
/// `blk_validate_block_size`.
pub(crate) const MAX_BLOCK_SIZE: usize = if cfg!(CONFIG_TRANSPARENT_HUGEPAGE) {
    65536
} else {
    PAGE_SIZE
};

/// Why a namespace cannot be served; `Display` says it for the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unservable {
    /// Its LBA format carries metadata the block layer cannot provide nor the controller
    /// make up.
    Metadata,
    /// Its logical block size is larger than the block layer takes.
    BlockTooLarge,
    /// Its logical blocks (bytes) are larger than the controller's transfer limit (bytes):
    /// no block could be read, and the block layer refuses such limits.
    BlockExceedsTransfer(u32, u32),
    /// Its zones are larger than the block layer takes (4 billion sectors).
    ZoneTooLarge,
}

impl kernel::fmt::Display for Unservable {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        if let Unservable::BlockExceedsTransfer(block, transfer) = self {
            return write!(
                f,
                "its {block}-byte blocks exceed the controller's {transfer}-byte transfer limit"
            );
        }
        f.write_str(match self {
            Unservable::Metadata => {
                if cfg!(CONFIG_BLK_DEV_INTEGRITY) {
                    "its metadata is interleaved with the data (or over 255 bytes) and is not protection information alone"
                } else {
                    "its metadata is not protection information alone (other metadata needs CONFIG_BLK_DEV_INTEGRITY)"
                }
            }
            Unservable::BlockTooLarge => {
                if MAX_BLOCK_SIZE == PAGE_SIZE {
                    "its logical block size is larger than the page size (the block layer takes larger ones with CONFIG_TRANSPARENT_HUGEPAGE)"
                } else {
                    "its logical block size is larger than the block layer takes"
                }
            }
            Unservable::ZoneTooLarge => "its zones are larger than the block layer takes",
            Unservable::BlockExceedsTransfer(..) => "",
        })
    }
}

/// How a namespace of metadata format `meta` is served: with the block layer's integrity
/// support where the kernel has it.
pub(crate) fn metadata_mode(meta: &Metadata) -> Mode {
    meta.mode(cfg!(CONFIG_BLK_DEV_INTEGRITY))
}

/// Whether a namespace identified as `id` has a block size we can serve on a controller
/// moving at most `transfer` bytes per command; says why not. (Its metadata is judged by
/// [`metadata_mode`]: a namespace whose metadata cannot be served still has its generic
/// device.)
pub(crate) fn servable(
    id: &IdentifyNamespace,
    transfer: u32,
) -> core::result::Result<(), Unservable> {
    let block = id.block_size();
    if block as usize > MAX_BLOCK_SIZE {
        return Err(Unservable::BlockTooLarge);
    }
    if block > transfer {
        return Err(Unservable::BlockExceedsTransfer(block, transfer));
    }
    Ok(())
}

/// How a namespace is served, beyond its Identify data: a zoned namespace's zones, its
/// metadata format, and whether its disk is hidden (no block I/O, only its generic device).
pub(crate) struct Serving {
    pub(crate) zoned: Option<Zoned>,
    pub(crate) meta: Metadata,
    pub(crate) hidden: bool,
    /// The controller's transfer limit in bytes ([`max_transfer`]).
    pub(crate) transfer: u32,
}

/// Serials of [`Namespace`]s ([`NsKey`]), one each: no two disks of a driver's life share one.
static SERIALS: AtomicU64 = AtomicU64::new(0);

/// One namespace exposed as a disk.
///
/// Its format (block size, size) can change under the disk (Format NVM, a resize): the
/// fields that describe it are only changed by a revalidation, with the disk's queue
/// frozen, so every request is built and completed with one format.
pub(crate) struct Namespace<'b> {
    pdev: &'b pci::Device<Bound>,
    nsid: u32,
    /// This disk's serial ([`NsKey`]).
    serial: u64,
    /// log2 of the logical block size.
    lba_shift: AtomicU32,
    /// Size in logical blocks.
    nsze: AtomicU64,
    /// Deallocated blocks read as zeroes.
    zeroes: AtomicBool,
    /// Preferred deallocation granularity, in blocks.
    discard_blocks: AtomicU32,
    /// Optimal I/O boundary (NOIOB), in blocks (0: none).
    io_boundary: AtomicU32,
    /// The namespace's format changed to one we cannot serve: I/O fails until the disk
    /// is removed.
    unusable: AtomicBool,
    /// The controller takes SGLs for I/O commands.
    sgl: bool,
    /// The controller's Command Retry Delay Times (Identify Controller CRDT1-3).
    crdt: [u16; 3],
    /// The controller's quirks.
    quirks: Quirks,
    /// The namespace's generic character device (`/dev/rng<C>n<N>`), registered once its
    /// disk is listed (a command through it finds the disk), removed with the disk.
    generic: SetOnce<Pin<KBox<CharDev<NsChar>>>>,
    /// A zoned namespace's zones (`None`: not zoned). Fixed for the disk's life: a zoned
    /// namespace whose zones change gets a new disk.
    zoned: Option<Zoned>,
    /// The metadata format (`None`: no metadata). Fixed for the disk's life, as zones.
    meta: Option<Metadata>,
    /// The block layer's integrity profile for it (`None`: no metadata buffers; with
    /// `meta`, the controller inserts and strips protection information).
    integrity: Option<Integrity>,
    /// The multipath head this disk is a path of (`None`: the disk is the namespace's).
    mpath: Option<HeadLink>,
}

impl<'b> Namespace<'b> {
    /// Checks that the namespace's format (and a zoned one's zones) is one we can serve;
    /// says why not otherwise.
    pub(crate) fn new(
        pdev: &'b pci::Device<Bound>,
        ctrl: &IdentifyController,
        nsid: u32,
        id: IdentifyNamespace,
        quirks: Quirks,
        how: Serving,
    ) -> core::result::Result<Self, Unservable> {
        let Serving {
            zoned,
            meta,
            hidden,
            transfer,
        } = how;
        servable(&id, transfer)?;
        if let Some(z) = zoned {
            if z.info.zone_sectors(id.lbaf.lbads).is_none() {
                return Err(Unservable::ZoneTooLarge);
            }
        }
        Ok(Self {
            pdev,
            nsid,
            serial: SERIALS.fetch_add(1, Relaxed),
            lba_shift: AtomicU32::new(u32::from(id.lbaf.lbads)),
            nsze: AtomicU64::new(id.nsze),
            zeroes: AtomicBool::new(id.deallocate_reads_zeroes()),
            discard_blocks: AtomicU32::new(id.discard_granularity_blocks()),
            io_boundary: AtomicU32::new(u32::from(id.noiob)),
            unusable: AtomicBool::new(false),
            sgl: ctrl.supports_sgl(),
            crdt: ctrl.crdt,
            quirks,
            generic: SetOnce::new(),
            zoned,
            meta: (meta.ms != 0).then_some(meta),
            integrity: match metadata_mode(&meta) {
                Mode::Integrity(p) if !hidden => Some(Integrity {
                    csum: p.csum,
                    metadata_size: p.metadata_size,
                    pi_tuple_size: p.pi_tuple_size,
                    pi_offset: p.pi_offset,
                    tag_size: p.tag_size,
                    ref_tag: p.ref_tag,
                }),
                _ => None,
            },
            mpath: None,
        })
    }

    /// Makes the disk a path of a head (before it is added).
    pub(crate) fn set_head(&mut self, link: HeadLink) {
        self.mpath = Some(link);
    }

    /// The head this disk is a path of.
    #[inline]
    pub(crate) fn head(&self) -> Option<&HeadLink> {
        self.mpath.as_ref()
    }

    /// The metadata format, if the namespace has metadata.
    #[inline]
    pub(crate) fn metadata(&self) -> Option<&Metadata> {
        self.meta.as_ref()
    }

    /// Metadata bytes per block the block layer provides (0: none): what passthrough may
    /// carry.
    pub(crate) fn integrity_size(&self) -> u8 {
        self.integrity.map_or(0, |i| i.metadata_size)
    }

    /// A zoned namespace's zones.
    pub(crate) fn zoned(&self) -> Option<&Zoned> {
        self.zoned.as_ref()
    }

    /// Writes fail: a zoned namespace on a controller without Zone Append, as C's.
    pub(crate) fn read_only(&self) -> bool {
        self.zoned.is_some_and(|z| !z.append)
    }

    /// The first logical block of 512-byte sector `sector` (a zone's start: whole blocks).
    pub(crate) fn lba(&self, sector: u64) -> u64 {
        sector >> ((self.lba_shift() - 9) & 31)
    }

    /// Whether the namespace, identified again as `id`, still has the format the disk was
    /// set up with.
    pub(crate) fn same_format(&self, id: &IdentifyNamespace) -> bool {
        self.lba_shift() == u32::from(id.lbaf.lbads)
            && self.nsze.load(Relaxed) == id.nsze
            && self.deallocate_reads_zeroes() == id.deallocate_reads_zeroes()
            && self.discard_blocks.load(Relaxed) == id.discard_granularity_blocks()
            && self.io_boundary.load(Relaxed) == u32::from(id.noiob)
    }

    /// Takes the format of `id` (which [`servable`] accepted). Only with the disk's queue
    /// frozen.
    pub(crate) fn set_format(&self, id: &IdentifyNamespace) {
        self.lba_shift.store(u32::from(id.lbaf.lbads), Relaxed);
        self.nsze.store(id.nsze, Relaxed);
        self.zeroes.store(id.deallocate_reads_zeroes(), Relaxed);
        self.discard_blocks
            .store(id.discard_granularity_blocks(), Relaxed);
        self.io_boundary.store(u32::from(id.noiob), Relaxed);
    }

    /// Gives the namespace its generic character device, which goes with it (once: a
    /// second one is dropped).
    pub(crate) fn set_generic(&self, dev: Pin<KBox<CharDev<NsChar>>>) {
        self.generic.populate(dev);
    }

    /// Fails I/O from now on: the namespace can no longer be served.
    pub(crate) fn set_unusable(&self) {
        self.unusable.store(true, Relaxed);
        if let Some(link) = &self.mpath {
            link.set_unusable();
        }
    }

    pub(crate) fn unusable(&self) -> bool {
        self.unusable.load(Relaxed)
    }

    /// Logical block size in bytes.
    pub(crate) fn block_size(&self) -> u32 {
        1 << self.lba_shift()
    }

    pub(crate) fn deallocate_reads_zeroes(&self) -> bool {
        self.zeroes.load(Relaxed)
    }

    /// Write Zeroes is done with Dataset Management (deallocate_zeroes quirk).
    pub(crate) fn zeroes_by_deallocate(&self) -> bool {
        self.quirks.has(Quirks::DEALLOCATE_ZEROES)
    }

    /// The I/O boundary requests should not cross, in 512-byte sectors (0: none), as the C
    /// driver: the largest transfer for stripe_size controllers (Intel's), else NOIOB; only
    /// a power of two.
    fn chunk_sectors(&self, max_sectors: u32) -> u32 {
        let iob = if self.quirks.has(Quirks::STRIPE_SIZE) && max_sectors.is_power_of_two() {
            max_sectors
        } else {
            self.io_boundary.load(Relaxed) << (self.lba_shift() - 9)
        };
        if iob.is_power_of_two() {
            iob
        } else {
            0
        }
    }

    pub(crate) fn sgl(&self) -> bool {
        self.sgl
    }

    /// What a handle of this disk names it by ([`NsKey`]).
    pub(crate) fn key(&self) -> NsKey {
        NsKey::bound(self.nsid, self.serial)
    }

    pub(crate) fn nsid(&self) -> u32 {
        self.nsid
    }

    /// log2 of the logical block size.
    pub(crate) fn lba_shift(&self) -> u32 {
        self.lba_shift.load(Relaxed)
    }

    /// The device doing DMA for this namespace's requests.
    pub(crate) fn dma_dev(&self) -> &Device<Bound> {
        self.pdev.as_ref()
    }

    /// Capacity in 512-byte sectors.
    pub(crate) fn sectors(&self) -> u64 {
        self.nsze
            .load(Relaxed)
            .saturating_mul(1 << (self.lba_shift() - 9))
    }

    /// Converts a request's position and length to (first LBA, number of blocks), or `None`
    /// if they are not whole blocks or the count does not fit a command.
    #[inline]
    pub(crate) fn blocks(&self, sector: u64, bytes: u32) -> Option<(u64, u32)> {
        // The block size was checked when the namespace was identified (2^9 to 2^16);
        // the masks only tell the compiler the shifts are in range (no overflow checks).
        let lba_shift = self.lba_shift() & 31;
        let shift = lba_shift.wrapping_sub(9) & 31;
        let mask = (1u64 << shift) - 1;
        let bs_mask = (1u32 << lba_shift) - 1;
        if sector & mask != 0 || bytes & bs_mask != 0 || bytes == 0 {
            return None;
        }
        Some((sector >> shift, bytes >> lba_shift))
    }

    /// Queue limits for this namespace on a controller identified by `ctrl` (and `nvm`, its
    /// NVM command set limits, if it has them) with capabilities `cap`, enabled with a
    /// memory page size of `1 << page_shift`.
    pub(crate) fn limits(
        &self,
        ctrl: &IdentifyController,
        nvm: Option<&IdentifyControllerNvm>,
        cap: Cap,
        dma_opt: u32,
        page_shift: u32,
    ) -> Limits {
        let bs = self.block_size();
        let to_sectors = self.lba_shift() - 9;
        let max_sectors = max_transfer(ctrl, cap, dma_opt) >> 9;
        // Write Zeroes counts blocks in 16 bits, and WZSL may limit it further.
        let wzsl = nvm
            .and_then(|n| n.max_write_zeroes_bytes(cap))
            .map_or(u64::MAX, |b| b >> 9);
        let max_wz = (65536u64 << to_sectors)
            .min(u64::from(max_sectors))
            .min(wzsl) as u32;
        // One discard is one Dataset Management range (the block layer merges several
        // into one command, up to the segments limit): at most DMRSL blocks, which a
        // controller may otherwise skip without an error.
        let max_discard = nvm
            .and_then(IdentifyControllerNvm::max_range_blocks)
            .map_or(u64::MAX, |b| u64::from(b) << to_sectors)
            .min(u64::from(u32::MAX >> 9)) as u32;
        let max_ranges = nvm.map_or(DSM_MAX_RANGES as u16, |n| {
            n.max_ranges().min(DSM_MAX_RANGES as u16)
        });
        Limits {
            logical_block_size: bs,
            physical_block_size: bs,
            max_hw_sectors: max_sectors,
            max_segments: MAX_SEGMENTS as u16,
            // PRPs: every segment but the first starts, and every one but the last ends,
            // on a controller page boundary; PRP entries must be dword aligned.
            virt_boundary_mask: (1usize << page_shift) - 1,
            max_segment_size: 0,
            dma_alignment: 3,
            write_cache: ctrl.has_volatile_write_cache(),
            fua: ctrl.has_volatile_write_cache(),
            max_discard_sectors: if ctrl.supports_dsm() { max_discard } else { 0 },
            max_discard_segments: max_ranges,
            discard_granularity: bs.saturating_mul(self.discard_blocks.load(Relaxed)),
            max_write_zeroes_sectors: if self.zeroes_by_deallocate() && ctrl.supports_dsm() {
                // One range of one Dataset Management command, as a discard.
                max_discard
            } else if ctrl.supports_write_zeroes() && !self.quirks.has(Quirks::DISABLE_WRITE_ZEROES)
            {
                max_wz
            } else {
                0
            },
            // A zoned disk's zone size, which requests never cross.
            chunk_sectors: match self.zoned {
                Some(z) => (z.info.zone_blocks << to_sectors) as u32,
                None => self.chunk_sectors(max_sectors),
            },
            io_min: bs,
            io_opt: 0,
            integrity: self.integrity,
            zoned: self.zoned.map(|z| ZonedLimits {
                max_open_zones: z.info.max_open,
                max_active_zones: z.info.max_active,
                // ZASL, within what one command carries (as MDTS when there is none).
                max_zone_append_sectors: z
                    .append_limit
                    .map_or(max_sectors, |b| (b >> 9).min(u64::from(max_sectors)) as u32),
            }),
        }
    }

    pub(crate) fn log_error(&self, op: ReqOp, sector: u64, status: Status, tries: u32) {
        dev_err!(
            self.pdev.as_ref(),
            "nsid {}: {:?} at sector {} failed after {} attempt(s): {}\n",
            self.nsid,
            op,
            sector,
            tries,
            status
        );
    }

    /// How long to wait before retrying a command that failed with `status`.
    pub(crate) fn retry_delay_ms(&self, status: Status) -> u32 {
        retry_delay_ms(status, self.crdt)
    }

    pub(crate) fn log_unmappable(&self, sector: u64, bytes: u32, waited_ms: u64) {
        dev_err!(
            self.pdev.as_ref(),
            "nsid {}: request at sector {} ({} bytes) could not be DMA-mapped for {} ms: failed\n",
            self.nsid,
            sector,
            bytes,
            waited_ms
        );
    }

    pub(crate) fn log_metadata_error(&self, sector: u64, bytes: u32) {
        dev_err!(
            self.pdev.as_ref(),
            "nsid {}: request at sector {}: its metadata ({} bytes) is not one dword-aligned buffer of its blocks' metadata\n",
            self.nsid,
            sector,
            bytes
        );
    }

    pub(crate) fn log_mapping_error(&self, sector: u64, bytes: u32) {
        dev_err!(
            self.pdev.as_ref(),
            "nsid {}: request at sector {} ({} bytes) has a segment layout PRPs cannot describe\n",
            self.nsid,
            sector,
            bytes
        );
    }
}
