// SPDX-License-Identifier: GPL-2.0

//! Arrays of fixed-size entries in DMA-coherent memory shared with a device: submission and
//! completion rings, shadow doorbell buffers. Upstream candidate: a companion of
//! `kernel::dma::Coherent<[T]>` for rings.
//!
//! `Coherent<[T]>` reaches an element through `io_project!`, which checks the index, then the
//! field, then that the projected pointer does not overflow, and returns a `Result` at each
//! step: several compares and branches per dword on a path that runs twice per I/O. A ring of
//! `N`-dword entries checks the index once, then reads or writes whole entries (or one dword)
//! with volatile accesses, which the compiler can neither elide nor merge.

use super::p2pdma::P2pMem;
use core::ptr::NonNull;
use kernel::{
    device::{Bound, Device},
    dma::Coherent,
    pci,
    prelude::*,
};

/// `len` entries of `N` little-endian dwords in coherent memory, zeroed at allocation, or
/// in a device's peer-to-peer memory (a controller's memory buffer).
///
/// # Invariants
///
/// `ptr` points to `len` entries of `mem`, which owns them; `len` is between 1 and
/// `u16::MAX`: every `u16` index below it is in bounds.
pub(crate) struct DmaRing<const N: usize> {
    ptr: NonNull<[u32; N]>,
    len: u16,
    dma: u64,
    mem: Memory<N>,
}

/// Where a [`DmaRing`]'s entries are.
enum Memory<const N: usize> {
    Coherent(#[allow(dead_code, reason = "owns the entries")] Coherent<[[u32; N]]>),
    P2p(#[allow(dead_code, reason = "owns the entries")] P2pMem),
}

// SAFETY: `ptr` points into `mem`, which is `Send` and `Sync`; the entries are shared with a
// device and only reached through volatile accesses.
unsafe impl<const N: usize> Send for DmaRing<N> {}
// SAFETY: As above.
unsafe impl<const N: usize> Sync for DmaRing<N> {}

impl<const N: usize> DmaRing<N> {
    /// Allocates `len` zeroed entries for DMA by `dev`. Upstream candidate.
    pub(crate) fn new(dev: &Device<Bound>, len: u16) -> Result<Self> {
        if len == 0 {
            return Err(EINVAL);
        }
        let mem = Coherent::<[u32; N]>::zeroed_slice(dev, usize::from(len), GFP_KERNEL)?;
        let ptr = NonNull::new(mem.as_mut_ptr().cast::<[u32; N]>()).ok_or(ENOMEM)?;
        let dma = mem.dma_address();
        // INVARIANT: `mem` has `len` entries at `ptr`, and `len` is a non-zero `u16`.
        Ok(Self {
            ptr,
            len,
            dma,
            mem: Memory::Coherent(mem),
        })
    }

    /// `len` zeroed entries in `pdev`'s peer-to-peer pool, or `None` if it has no room (or
    /// no pool).
    ///
    /// # Safety
    ///
    /// The ring is dropped before `pdev` is unbound (`P2pMem::alloc`'s rule).
    pub(crate) unsafe fn new_p2p(pdev: &pci::Device<Bound>, len: u16) -> Option<Self> {
        if len == 0 {
            return None;
        }
        let size = usize::from(len) * core::mem::size_of::<[u32; N]>();
        // SAFETY: The caller drops the ring, hence the memory, before `pdev` is unbound.
        let mem = unsafe { P2pMem::alloc(pdev, size) }?;
        let ptr = NonNull::new(mem.as_ptr().cast::<[u32; N]>())?;
        for i in 0..usize::from(len) {
            // SAFETY: `i` is below `len`, and the allocation holds `len` entries; the pool's
            // allocations are page aligned. No device reads the memory yet.
            unsafe { ptr.as_ptr().add(i).write_volatile([0; N]) };
        }
        let dma = mem.bus_address();
        // INVARIANT: `mem` holds `len` entries at `ptr`, and `len` is a non-zero `u16`.
        Some(Self {
            ptr,
            len,
            dma,
            mem: Memory::P2p(mem),
        })
    }

    /// Whether the entries are in a device's peer-to-peer memory.
    pub(crate) fn is_p2p(&self) -> bool {
        matches!(self.mem, Memory::P2p(_))
    }

    /// Number of entries. Upstream candidate.
    #[inline]
    pub(crate) fn len(&self) -> u16 {
        self.len
    }

    /// Bus address of entry 0. Upstream candidate.
    pub(crate) fn dma_address(&self) -> u64 {
        self.dma
    }

    /// Pointer to entry `i`, or `None` past the end.
    #[inline(always)]
    fn entry(&self, i: u16) -> Option<*mut [u32; N]> {
        if i >= self.len {
            return None;
        }
        // SAFETY: `i` is below the number of entries at `ptr` (type invariant), so the
        // offset stays inside the allocation.
        Some(unsafe { self.ptr.as_ptr().add(usize::from(i)) })
    }

    /// Pointer to dword `D` of entry `i`.
    ///
    /// # Safety
    ///
    /// `i` is below [`Self::len`].
    #[inline(always)]
    unsafe fn dword_unchecked<const D: usize>(&self, i: u16) -> *mut u32 {
        const { assert!(D < N) };
        // SAFETY: `i` is below the number of entries (the caller's guarantee) and `D < N`,
        // so both offsets stay inside the allocation.
        unsafe { self.ptr.as_ptr().add(usize::from(i)).cast::<u32>().add(D) }
    }

    /// Reads dword `D` of entry `i` alone (CPU order), at an index the caller has checked:
    /// a shadow doorbell, read on every I/O. Upstream candidate.
    ///
    /// # Safety
    ///
    /// `i` is below [`Self::len`].
    #[inline(always)]
    pub(crate) unsafe fn read_dword_unchecked<const D: usize>(&self, i: u16) -> u32 {
        // SAFETY: the pointer is in bounds (the caller's guarantee on `i`) and aligned;
        // coherent memory may be read at any time, and any bit pattern is a valid `u32`.
        u32::from_le(unsafe { self.dword_unchecked::<D>(i).read_volatile() })
    }

    /// [`Self::write_dword`] at an index the caller has checked. Upstream candidate.
    ///
    /// # Safety
    ///
    /// `i` is below [`Self::len`].
    #[inline(always)]
    pub(crate) unsafe fn write_dword_unchecked<const D: usize>(&self, i: u16, v: u32) {
        // SAFETY: the pointer is in bounds (the caller's guarantee on `i`) and aligned; a
        // volatile write to coherent memory the device also reads is not a data race.
        unsafe { self.dword_unchecked::<D>(i).write_volatile(v.to_le()) };
    }

    /// Reads dword `D` of entry `i` and, if `ready` accepts it, then the whole entry: one
    /// index check for both. `ready` orders the two reads (e.g. with `dma_rmb` after a
    /// completion's phase tag). Upstream candidate.
    #[inline(always)]
    pub(crate) fn read_if<const D: usize>(
        &self,
        i: u16,
        ready: impl FnOnce(u32) -> bool,
    ) -> Option<[u32; N]> {
        const { assert!(D < N) };
        let p = self.entry(i)?;
        // SAFETY: `p` is in bounds and `D < N`, so the dword is inside entry `i`; any bit
        // pattern is a valid `u32`.
        let v = unsafe { p.cast::<u32>().add(D).read_volatile() };
        if !ready(u32::from_le(v)) {
            return None;
        }
        // SAFETY: `p` is in bounds and aligned (an element of the coherent array); coherent
        // memory may be read at any time, and any bit pattern is a valid `[u32; N]`.
        let e = unsafe { p.read_volatile() };
        Some(e.map(u32::from_le))
    }

    /// Writes entry `i` whole (CPU order). Returns `false` past the end. Upstream candidate.
    #[inline(always)]
    pub(crate) fn write(&self, i: u16, e: &[u32; N]) -> bool {
        let Some(p) = self.entry(i) else {
            return false;
        };
        // SAFETY: `p` is in bounds and aligned; the device only reads what the caller
        // publishes after this write (through a doorbell, ordered by the caller).
        unsafe { p.write_volatile(e.map(u32::to_le)) };
        true
    }

    /// Writes dword `D` of entry `i` alone. Returns `false` past the end. Upstream candidate.
    #[inline(always)]
    pub(crate) fn write_dword<const D: usize>(&self, i: u16, v: u32) -> bool {
        const { assert!(D < N) };
        let Some(p) = self.entry(i) else {
            return false;
        };
        // SAFETY: `p` is in bounds and `D < N`, so the dword is inside entry `i`.
        unsafe { p.cast::<u32>().add(D).write_volatile(v.to_le()) };
        true
    }
}
