// SPDX-License-Identifier: GPL-2.0

//! Scatter Gather Lists (NVMe Base Spec 4.1.2), the alternative to PRPs for large transfers:
//! one 16-byte descriptor per DMA segment instead of one 8-byte entry per page, and no page
//! alignment rules.
//!
//! A transfer of one segment fits in the command's SGL1 as a Data Block descriptor; larger
//! ones point SGL1 at a Last Segment descriptor naming a list of Data Block descriptors.

/// Descriptor types (the high nibble of byte 15).
pub(crate) const TYPE_DATA_BLOCK: u8 = 0x0;
pub(crate) const TYPE_LAST_SEGMENT: u8 = 0x3;
/// Bytes per descriptor.
pub(crate) const DESC_SIZE: u32 = 16;

/// Why segments could not be described.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SglError {
    Empty,
    TooManySegments { segments: usize },
}

/// A descriptor as two quadwords: the address, then the length with the descriptor type
/// in the top byte (subtype 0: address).
pub(crate) fn descriptor(addr: u64, len: u32, typ: u8) -> [u64; 2] {
    [addr, u64::from(len) | (u64::from(typ << 4) << 56)]
}

/// Builds SGL1 for `segs` (bus address, length). With more than one segment, the Data Block
/// descriptors go to `put(index, descriptor)` in a list of at most `list_cap` descriptors at
/// bus address `list_dma`.
pub(crate) fn build(
    segs: impl IntoIterator<Item = (u64, u32)>,
    list_cap: usize,
    list_dma: u64,
    mut put: impl FnMut(usize, [u64; 2]),
) -> Result<[u64; 2], SglError> {
    let mut n = 0usize;
    let mut first = [0u64; 2];
    for (addr, len) in segs {
        if len == 0 {
            return Err(SglError::Empty);
        }
        let d = descriptor(addr, len, TYPE_DATA_BLOCK);
        if n == 0 {
            first = d;
        }
        if n < list_cap {
            put(n, d);
        } else if n >= 1 {
            return Err(SglError::TooManySegments { segments: n + 1 });
        }
        n += 1;
    }
    match n {
        0 => Err(SglError::Empty),
        1 => Ok(first),
        // `n * 16` cannot overflow: `n <= list_cap`, a page's worth of descriptors.
        _ => Ok(descriptor(
            list_dma,
            n as u32 * DESC_SIZE,
            TYPE_LAST_SEGMENT,
        )),
    }
}
