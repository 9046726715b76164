// SPDX-License-Identifier: GPL-2.0

//! DMA pools (`include/linux/dmapool.h`): blocks of coherent DMA memory smaller than a page,
//! or a page, taken and given back on the I/O path as C's drivers take their PRP lists and
//! SGL segments. The 7.3 `kernel::dma` has whole coherent allocations only. Upstream
//! candidate: `kernel::dma::Pool`.
//!
//! A block lives from [`DmaPool::alloc`] until it is dropped, or, handed to the device, in
//! one of the pool's slots ([`DmaPool::park`]) until [`DmaPool::release`] gives it back: a
//! request's list parks in the slot of its tag between submission and completion. The
//! slots belong to the pool, so a parked block can only go back to the pool it came from,
//! and the pool gives back every parked block before it is destroyed.

use super::device_raw;
use core::{
    ffi::c_void,
    marker::PhantomData,
    ptr::NonNull,
    sync::atomic::{
        AtomicPtr, AtomicU64, AtomicU8,
        Ordering::{Acquire, Relaxed, Release},
    },
};
use kernel::{
    bindings,
    device::{Bound, Device},
    prelude::*,
};

/// A DMA pool of `device`, with a slot per index for parked blocks.
///
/// # Invariants
///
/// `raw` is a pool made by `dma_pool_create_node` for a device that stays bound for `'a`,
/// with blocks of `size` bytes; each [`FULL`] slot holds a block of this pool, with its bus
/// address, that nothing else references.
pub(crate) struct DmaPool<'a> {
    raw: NonNull<bindings::dma_pool>,
    size: usize,
    slots: KVec<Slot>,
    _dev: PhantomData<&'a Device<Bound>>,
}

/// A parking place for one block. Whoever moves `state` from [`EMPTY`] or [`FULL`] to
/// [`BUSY`] alone reads or writes the block's two halves, then publishes the new state: the
/// pointer and the bus address always change together.
struct Slot {
    state: AtomicU8,
    cpu: AtomicPtr<c_void>,
    dma: AtomicU64,
}

const EMPTY: u8 = 0;
const BUSY: u8 = 1;
const FULL: u8 = 2;

// SAFETY: a `dma_pool` takes its own lock in every call; the slots are atomics.
unsafe impl Send for DmaPool<'_> {}
// SAFETY: as for `Send`.
unsafe impl Sync for DmaPool<'_> {}

impl<'a> DmaPool<'a> {
    /// A pool of `size`-byte blocks aligned to `align` (a power of two, at least 8; a block
    /// then takes `size` rounded up to it), none crossing a page, with `slots` parking slots. The pool takes memory only as blocks are
    /// allocated, a page at a time, and keeps it until it is dropped.
    pub(crate) fn new(
        dev: &'a Device<Bound>,
        name: &'static CStr,
        size: usize,
        align: usize,
        slots: usize,
    ) -> Result<Self> {
        if size == 0 || size % 8 != 0 || !align.is_power_of_two() || align < 8 {
            return Err(EINVAL);
        }
        let mut table = KVec::with_capacity(slots, GFP_KERNEL)?;
        for _ in 0..slots {
            table.push(
                Slot {
                    state: AtomicU8::new(EMPTY),
                    cpu: AtomicPtr::new(core::ptr::null_mut()),
                    dma: AtomicU64::new(0),
                },
                GFP_KERNEL,
            )?;
        }
        // SAFETY: `dev` is a bound device for `'a` (the pool does not outlive it, type
        // invariant); `name` is a static C string; boundary 0: blocks do not cross the pool's
        // allocation unit (a page).
        let raw = unsafe {
            bindings::dma_pool_create_node(
                name.as_char_ptr(),
                device_raw(dev),
                size,
                align,
                0,
                bindings::NUMA_NO_NODE,
            )
        };
        // INVARIANT: made just now for `dev`, with `size`-byte blocks; the slots are empty.
        Ok(Self {
            raw: NonNull::new(raw).ok_or(ENOMEM)?,
            size,
            slots: table,
            _dev: PhantomData,
        })
    }

    /// Takes a block (its contents undefined) without sleeping, as the I/O path must
    /// (`GFP_ATOMIC`); `None` if none can be had now: the caller tries again later.
    #[inline]
    pub(crate) fn alloc_atomic(&self) -> Option<PoolBlock<'_, 'a>> {
        let mut dma: bindings::dma_addr_t = 0;
        // SAFETY: `raw` is a live pool (type invariant).
        let cpu =
            unsafe { bindings::dma_pool_alloc(self.raw.as_ptr(), bindings::GFP_ATOMIC, &mut dma) };
        // INVARIANT: a block of this pool, at bus address `dma`, referenced by nothing else.
        Some(PoolBlock {
            pool: self,
            cpu: NonNull::new(cpu)?,
            dma,
        })
    }

    /// Keeps `block` in slot `index` until [`Self::release`] (a block whose bus address the
    /// device holds). An occupied slot, an index out of range or a block of another pool is
    /// an error, and the block goes back to its own pool.
    #[inline]
    pub(crate) fn park(&self, index: usize, block: PoolBlock<'_, '_>) -> Result {
        let slot = self.slots.get(index).ok_or(EINVAL)?;
        if !core::ptr::eq(block.pool.raw.as_ptr(), self.raw.as_ptr()) {
            return Err(EINVAL);
        }
        slot.state
            .compare_exchange(EMPTY, BUSY, Acquire, Relaxed)
            .map_err(|_| EBUSY)?;
        let block = core::mem::ManuallyDrop::new(block);
        slot.cpu.store(block.cpu.as_ptr(), Relaxed);
        slot.dma.store(block.dma, Relaxed);
        slot.state.store(FULL, Release);
        Ok(())
    }

    /// Gives back the block parked in slot `index`, if any.
    #[inline]
    pub(crate) fn release(&self, index: usize) {
        let Some(slot) = self.slots.get(index) else {
            return;
        };
        if slot
            .state
            .compare_exchange(FULL, BUSY, Acquire, Relaxed)
            .is_err()
        {
            return;
        }
        let (cpu, dma) = (slot.cpu.load(Relaxed), slot.dma.load(Relaxed));
        slot.state.store(EMPTY, Release);
        self.free(cpu, dma);
    }

    fn free(&self, cpu: *mut c_void, dma: bindings::dma_addr_t) {
        // SAFETY: `cpu` at `dma` is a block of this live pool that nothing references any
        // more (taken out of its slot, or dropped by its only owner).
        unsafe { bindings::dma_pool_free(self.raw.as_ptr(), cpu, dma) };
    }
}

impl Drop for DmaPool<'_> {
    fn drop(&mut self) {
        for i in 0..self.slots.len() {
            self.release(i);
        }
        // SAFETY: `raw` is a live pool (type invariant), none of its blocks is in use: each
        // `PoolBlock` borrows the pool, and the slots were just emptied.
        unsafe { bindings::dma_pool_destroy(self.raw.as_ptr()) };
    }
}

/// A block of a [`DmaPool`], given back when dropped unless parked.
///
/// # Invariants
///
/// `cpu` is a block of `pool` at bus address `dma`, `pool.size` bytes, that nothing else
/// references.
pub(crate) struct PoolBlock<'p, 'a> {
    pool: &'p DmaPool<'a>,
    cpu: NonNull<c_void>,
    dma: bindings::dma_addr_t,
}

impl PoolBlock<'_, '_> {
    /// Its bus address.
    #[inline]
    pub(crate) fn dma_handle(&self) -> u64 {
        self.dma
    }

    /// How many 64-bit entries it holds.
    #[inline]
    pub(crate) fn entries(&self) -> usize {
        self.pool.size / 8
    }

    /// Writes 64-bit entry `index`, little-endian as the device reads it.
    #[inline]
    pub(crate) fn put(&self, index: usize, value: u64) -> Result {
        if index >= self.entries() {
            return Err(EINVAL);
        }
        // SAFETY: `index` is within the block (checked above), which this owns (type
        // invariant) and which is 8-byte aligned (`new` asks the pool for at least that).
        // Volatile: the device reads it.
        unsafe {
            self.cpu
                .as_ptr()
                .cast::<u64>()
                .add(index)
                .write_volatile(value.to_le())
        };
        Ok(())
    }
}

impl Drop for PoolBlock<'_, '_> {
    fn drop(&mut self) {
        self.pool.free(self.cpu.as_ptr(), self.dma);
    }
}
