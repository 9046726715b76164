// SPDX-License-Identifier: GPL-2.0

//! The NVMe wire format (NVM Express Base Specification 2.0).
//!
//! This module has no dependency on the `kernel` crate: it only uses `core`, so the same
//! source is compiled into the module and into a host crate whose `cargo test` checks the
//! parsing and decoding logic. Device data is always parsed by byte offset from a byte slice,
//! never by casting a DMA buffer to a struct reference, so a hostile or broken device can at
//! worst produce a parse error.

pub(crate) mod access;
pub(crate) mod command;
pub(crate) mod completion;
pub(crate) mod effects;
pub(crate) mod event;
pub(crate) mod identify;
pub(crate) mod ns_ids;
pub(crate) mod passthru;
pub(crate) mod pi;
pub(crate) mod prp;
pub(crate) mod quirks;
pub(crate) mod regs;
pub(crate) mod sgl;
pub(crate) mod smart;
pub(crate) mod subsys;
pub(crate) mod zns;

/// Reads a little-endian `u16` at `off`. `b` must be long enough (checked by callers).
#[inline]
pub(crate) fn le16(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}

/// Reads a little-endian `u32` at `off`. `b` must be long enough (checked by callers).
#[inline]
pub(crate) fn le32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

/// Reads a little-endian `u64` at `off`. `b` must be long enough (checked by callers).
#[inline]
pub(crate) fn le64(b: &[u8], off: usize) -> u64 {
    u64::from(le32(b, off)) | (u64::from(le32(b, off + 4)) << 32)
}
