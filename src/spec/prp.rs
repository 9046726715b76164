// SPDX-License-Identifier: GPL-2.0

//! Physical Region Page (PRP) construction (NVMe Base Spec 4.1.1).
//!
//! PRP1 points at the first byte of the transfer, which may be anywhere in a page; every
//! further entry points at the start of a controller page. With at most two pages, PRP2 is
//! the second page itself; otherwise it points at a list of page addresses (one list page
//! holds `page_size / 8` entries; we never chain list pages, so the block layer's transfer
//! limit keeps requests within one list).
//!
//! The input is the DMA-mapped segments of a request. The block layer's virtual boundary
//! (page size - 1) guarantees every segment but the first starts on a page boundary and every
//! segment but the last ends on one; a mapping that breaks this is reported, not sent.

/// Why a request's segments could not be described with PRPs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PrpError {
    /// No data at all.
    Empty,
    /// A segment other than the first starts inside a page, or one other than the last ends
    /// inside a page.
    Unaligned { segment: usize },
    /// More pages than one PRP list holds.
    TooLong { pages: usize },
}

/// The data pointer of a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Prps {
    pub(crate) prp1: u64,
    pub(crate) prp2: u64,
    /// Entries written to the PRP list (0 when PRP2 is a page or unused).
    pub(crate) list_entries: usize,
}

/// Builds PRP1/PRP2 for `segs` (bus address, length). When more than two pages are needed,
/// the list entries are passed to `put(index, address)` for a list of at most `list_cap`
/// entries whose bus address is `list_dma`.
pub(crate) fn build(
    segs: impl IntoIterator<Item = (u64, u32)>,
    page_size: u64,
    list_cap: usize,
    list_dma: u64,
    mut put: impl FnMut(usize, u64),
) -> Result<Prps, PrpError> {
    let mask = page_size - 1;
    let mut first = None;
    // Entry k of the list is the (k+2)th page: with three or more pages, the second page is
    // the list's first entry. Two pages need no list, so `list_cap` only limits n >= 2.
    let mut n = 0usize;
    let mut second = 0u64;
    let mut prev_end_aligned = true;
    for (i, (addr, len)) in segs.into_iter().enumerate() {
        if len == 0 {
            return Err(PrpError::Empty);
        }
        let end = addr + u64::from(len);
        // Page starts strictly after the first byte of the whole transfer.
        let mut page = if i == 0 {
            first = Some(addr);
            (addr & !mask) + page_size
        } else {
            if !prev_end_aligned {
                return Err(PrpError::Unaligned { segment: i - 1 });
            }
            if addr & mask != 0 {
                return Err(PrpError::Unaligned { segment: i });
            }
            addr
        };
        while page < end {
            if n == 0 {
                second = page;
            }
            if n < list_cap {
                put(n, page);
            } else if n >= 1 {
                return Err(PrpError::TooLong { pages: n + 2 });
            }
            n += 1;
            page += page_size;
        }
        prev_end_aligned = end & mask == 0;
    }
    let prp1 = first.ok_or(PrpError::Empty)?;
    Ok(match n {
        0 => Prps {
            prp1,
            prp2: 0,
            list_entries: 0,
        },
        1 => Prps {
            prp1,
            prp2: second,
            list_entries: 0,
        },
        _ => Prps {
            prp1,
            prp2: list_dma,
            list_entries: n,
        },
    })
}

/// PRP1 and PRP2 of one contiguous segment that spans at most two pages: the common small
/// transfer, described without walking segments or touching a list (the C driver's
/// `nvme_setup_prp_simple`). `None` when it is empty or needs a list; [`build`] gives the
/// same entries for every segment this accepts.
// Always inlined: on the path of every small read and write, where an out-of-line call
// costs about as much as its body.
#[inline(always)]
pub(crate) fn simple(addr: u64, len: u32, page_size: u64) -> Option<(u64, u64)> {
    let in_first = page_size - (addr & (page_size - 1));
    let len = u64::from(len);
    if len == 0 {
        None
    } else if len <= in_first {
        Some((addr, 0))
    } else if len - in_first <= page_size {
        Some((addr, addr + in_first))
    } else {
        None
    }
}
