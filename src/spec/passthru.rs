// SPDX-License-Identifier: GPL-2.0

//! The kernel's NVMe passthrough interface (`include/uapi/linux/nvme_ioctl.h`): ioctl
//! numbers, the structures user space passes, and their validation.
//!
//! The structures are parsed from the bytes copied from user space, field by field, so any
//! bit pattern is a valid input: what is wrong with it is reported as a [`PassthruError`].
//! The layouts are host-endian, as the C header's.

use super::command::Command;

/// `_IOC(dir, 'N', nr, size)` as `asm-generic/ioctl.h` computes it.
const fn ioc(dir: u32, nr: u32, size: u32) -> u32 {
    (dir << 30) | (size << 16) | ((b'N' as u32) << 8) | nr
}
const IOC_NONE: u32 = 0;
const IOC_WRITE: u32 = 1;
const IOC_READ: u32 = 2;

/// `NVME_IOCTL_ID`: the namespace id of a namespace's block device.
pub(crate) const NVME_IOCTL_ID: u32 = ioc(IOC_NONE, 0x40, 0);
/// `NVME_IOCTL_ADMIN_CMD`: an admin command, [`PassthruCmd`] with a 32-bit result.
pub(crate) const NVME_IOCTL_ADMIN_CMD: u32 = ioc(IOC_READ | IOC_WRITE, 0x41, PASSTHRU_SIZE as u32);
/// `NVME_IOCTL_SUBMIT_IO`: a read or write described by [`UserIo`].
pub(crate) const NVME_IOCTL_SUBMIT_IO: u32 = ioc(IOC_WRITE, 0x42, USER_IO_SIZE as u32);
/// `NVME_IOCTL_IO_CMD`: an I/O command, [`PassthruCmd`] with a 32-bit result.
pub(crate) const NVME_IOCTL_IO_CMD: u32 = ioc(IOC_READ | IOC_WRITE, 0x43, PASSTHRU_SIZE as u32);
/// `NVME_IOCTL_RESET`: reset the controller.
pub(crate) const NVME_IOCTL_RESET: u32 = ioc(IOC_NONE, 0x44, 0);
/// `NVME_IOCTL_SUBSYS_RESET`: NVM subsystem reset (not offered: it resets every controller
/// of the subsystem, including ones other hosts use).
#[allow(dead_code, reason = "kept with the rest of the spec's definitions")]
pub(crate) const NVME_IOCTL_SUBSYS_RESET: u32 = ioc(IOC_NONE, 0x45, 0);
/// `NVME_IOCTL_RESCAN`: rescan the namespaces.
pub(crate) const NVME_IOCTL_RESCAN: u32 = ioc(IOC_NONE, 0x46, 0);
/// `NVME_IOCTL_ADMIN64_CMD`: an admin command, [`PassthruCmd`] with a 64-bit result.
pub(crate) const NVME_IOCTL_ADMIN64_CMD: u32 =
    ioc(IOC_READ | IOC_WRITE, 0x47, PASSTHRU64_SIZE as u32);
/// `NVME_IOCTL_IO64_CMD`: an I/O command, [`PassthruCmd`] with a 64-bit result.
pub(crate) const NVME_IOCTL_IO64_CMD: u32 = ioc(IOC_READ | IOC_WRITE, 0x48, PASSTHRU64_SIZE as u32);
/// `NVME_IOCTL_IO64_CMD_VEC`: the same with `addr` an array of `data_len` iovecs.
pub(crate) const NVME_IOCTL_IO64_CMD_VEC: u32 =
    ioc(IOC_READ | IOC_WRITE, 0x49, PASSTHRU64_SIZE as u32);

/// `sizeof(struct nvme_passthru_cmd)` (= `struct nvme_admin_cmd`).
pub(crate) const PASSTHRU_SIZE: usize = 72;
/// `struct nvme_uring_cmd`: [`PassthruCmd`]'s layout with `rsvd2` where the 32-bit result is
/// (the results come back in the completion entry).
pub(crate) const URING_CMD_SIZE: usize = 72;
/// `NVME_URING_CMD_IO`: an I/O command on a namespace, through io_uring.
pub(crate) const NVME_URING_CMD_IO: u32 = ioc(IOC_READ | IOC_WRITE, 0x80, URING_CMD_SIZE as u32);
/// `NVME_URING_CMD_IO_VEC`: the same with a vector of buffers.
pub(crate) const NVME_URING_CMD_IO_VEC: u32 =
    ioc(IOC_READ | IOC_WRITE, 0x81, URING_CMD_SIZE as u32);
/// `NVME_URING_CMD_ADMIN`: an admin command, through io_uring.
pub(crate) const NVME_URING_CMD_ADMIN: u32 = ioc(IOC_READ | IOC_WRITE, 0x82, URING_CMD_SIZE as u32);
/// `NVME_URING_CMD_ADMIN_VEC`: the same with a vector of buffers.
pub(crate) const NVME_URING_CMD_ADMIN_VEC: u32 =
    ioc(IOC_READ | IOC_WRITE, 0x83, URING_CMD_SIZE as u32);
/// `sizeof(struct nvme_passthru_cmd64)`.
pub(crate) const PASSTHRU64_SIZE: usize = 80;
/// `sizeof(struct nvme_user_io)`.
pub(crate) const USER_IO_SIZE: usize = 48;
/// Offset of `result` in `struct nvme_passthru_cmd` (a `__u32`).
pub(crate) const RESULT_OFFSET: usize = 68;
/// Offset of `result` in `struct nvme_passthru_cmd64` (a `__u64`).
pub(crate) const RESULT64_OFFSET: usize = 72;

/// The two passthrough command layouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// `struct nvme_passthru_cmd`, 32-bit result.
    Result32,
    /// `struct nvme_passthru_cmd64`, 64-bit result.
    Result64,
}

impl Layout {
    pub(crate) const fn size(self) -> usize {
        match self {
            Layout::Result32 => PASSTHRU_SIZE,
            Layout::Result64 => PASSTHRU64_SIZE,
        }
    }

    /// Where the result goes in the user's structure, and its size in bytes.
    pub(crate) const fn result_field(self) -> (usize, usize) {
        match self {
            Layout::Result32 => (RESULT_OFFSET, 4),
            Layout::Result64 => (RESULT64_OFFSET, 8),
        }
    }
}

/// Why a passthrough request is refused (the ioctl returns `EINVAL` for all of them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PassthruError {
    /// `flags` is not zero (fused operations and the like are not offered).
    Flags,
    /// A metadata buffer for a namespace without metadata buffers (no integrity profile),
    /// or for an admin command.
    Metadata,
    /// A metadata buffer smaller than the metadata of the blocks the command moves.
    MetadataTooShort,
    /// Data length without a buffer address.
    NoBuffer,
    /// More data than one command may move (MDTS, and the driver's own bound).
    TooLong,
    /// Bidirectional data transfer (opcode bits 1:0 = 11b) cannot be described.
    Bidirectional,
    /// The reserved fields of `struct nvme_user_io`, or an opcode it does not carry.
    UserIo,
}

impl PassthruError {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            PassthruError::Flags => "flags must be 0",
            PassthruError::Metadata => "metadata buffers need a namespace formatted with metadata",
            PassthruError::MetadataTooShort => "metadata buffer shorter than the blocks' metadata",
            PassthruError::NoBuffer => "data length without a buffer",
            PassthruError::TooLong => "data length exceeds the maximum transfer size",
            PassthruError::Bidirectional => "bidirectional commands are not supported",
            PassthruError::UserIo => "only read and write are valid in NVME_IOCTL_SUBMIT_IO",
        }
    }
}

#[inline]
fn ne16(b: &[u8], off: usize) -> u16 {
    u16::from_ne_bytes([b[off], b[off + 1]])
}

#[inline]
fn ne32(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

#[inline]
fn ne64(b: &[u8], off: usize) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[off..off + 8]);
    u64::from_ne_bytes(v)
}

/// `struct nvme_passthru_cmd` / `nvme_passthru_cmd64`, as given by user space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct PassthruCmd {
    pub(crate) opcode: u8,
    pub(crate) flags: u8,
    pub(crate) nsid: u32,
    pub(crate) cdw2: u32,
    pub(crate) cdw3: u32,
    pub(crate) metadata: u64,
    pub(crate) addr: u64,
    pub(crate) metadata_len: u32,
    pub(crate) data_len: u32,
    pub(crate) cdw10_15: [u32; 6],
    pub(crate) timeout_ms: u32,
}

/// Which way a command moves data, from its opcode (bits 1:0, NVMe Base Spec figure 28).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    None,
    /// Host to controller.
    ToDevice,
    /// Controller to host.
    FromDevice,
}

impl PassthruCmd {
    /// Parses the user's structure; `b` holds at least [`PASSTHRU_SIZE`] bytes.
    pub(crate) fn parse(b: &[u8]) -> Option<Self> {
        if b.len() < PASSTHRU_SIZE {
            return None;
        }
        let mut cdw10_15 = [0u32; 6];
        for (i, d) in cdw10_15.iter_mut().enumerate() {
            *d = ne32(b, 40 + 4 * i);
        }
        Some(Self {
            opcode: b[0],
            flags: b[1],
            nsid: ne32(b, 4),
            cdw2: ne32(b, 8),
            cdw3: ne32(b, 12),
            metadata: ne64(b, 16),
            addr: ne64(b, 24),
            metadata_len: ne32(b, 32),
            data_len: ne32(b, 36),
            cdw10_15,
            timeout_ms: ne32(b, 64),
        })
    }

    /// The data direction of the command. Like the C driver, a command that has data but
    /// neither direction bit is treated as a read (vendor commands do this).
    pub(crate) fn direction(&self) -> Direction {
        if self.data_len == 0 {
            Direction::None
        } else if self.opcode & 1 != 0 {
            Direction::ToDevice
        } else {
            Direction::FromDevice
        }
    }

    /// The metadata buffer (address, length) the command carries, as C takes it: with data
    /// only, and both given.
    pub(crate) fn metadata_buffer(&self) -> Option<(u64, u32)> {
        (self.data_len != 0 && self.metadata != 0 && self.metadata_len != 0)
            .then_some((self.metadata, self.metadata_len))
    }

    /// Checks what the driver can carry out; `max_data` is the most bytes one command may
    /// move, `ms` the metadata bytes per block its namespace has buffers for (0: none, or an
    /// admin command).
    pub(crate) fn validate(&self, max_data: u32, ms: u8) -> Result<(), PassthruError> {
        if self.flags != 0 {
            return Err(PassthruError::Flags);
        }
        if let Some((_, len)) = self.metadata_buffer() {
            if ms == 0 {
                return Err(PassthruError::Metadata);
            }
            // The metadata pointer has no length: a read, write, compare or Zone Append
            // whose buffer is short would have the device go past it (beyond C, which
            // trusts the caller).
            let blocks = u64::from(self.cdw10_15[2] & 0xffff) + 1;
            if matches!(self.opcode, 0x01 | 0x02 | 0x05 | 0x7d)
                && u64::from(len) < blocks * u64::from(ms)
            {
                return Err(PassthruError::MetadataTooShort);
            }
        }
        if self.data_len != 0 && self.addr == 0 {
            return Err(PassthruError::NoBuffer);
        }
        if self.data_len > max_data {
            return Err(PassthruError::TooLong);
        }
        if self.data_len != 0 && self.opcode & 3 == 3 {
            return Err(PassthruError::Bidirectional);
        }
        Ok(())
    }

    /// The submission queue entry, without command id or data pointer (the driver sets them).
    pub(crate) fn command(&self) -> Command {
        let mut c = Command::new(self.opcode);
        c.dw[1] = self.nsid;
        c.dw[2] = self.cdw2;
        c.dw[3] = self.cdw3;
        c.dw[10..16].copy_from_slice(&self.cdw10_15);
        c
    }
}

/// What `NVME_IOCTL_SUBMIT_IO` needs of a namespace's metadata format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct UserIoMeta {
    /// Metadata bytes per block.
    pub(crate) ms: u16,
    /// The metadata is protection information alone (PRACT moves none).
    pub(crate) pi_only: bool,
    /// Interleaved with the data (extended LBAs).
    pub(crate) extended: bool,
}

/// `struct nvme_user_io` (NVME_IOCTL_SUBMIT_IO): a read or write of `nblocks + 1` blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct UserIo {
    pub(crate) opcode: u8,
    pub(crate) flags: u8,
    pub(crate) control: u16,
    pub(crate) nblocks: u16,
    pub(crate) rsvd: u16,
    pub(crate) metadata: u64,
    pub(crate) addr: u64,
    pub(crate) slba: u64,
    pub(crate) dsmgmt: u32,
    pub(crate) reftag: u32,
    pub(crate) apptag: u16,
    pub(crate) appmask: u16,
}

impl UserIo {
    pub(crate) fn parse(b: &[u8]) -> Option<Self> {
        if b.len() < USER_IO_SIZE {
            return None;
        }
        Some(Self {
            opcode: b[0],
            flags: b[1],
            control: ne16(b, 2),
            nblocks: ne16(b, 4),
            rsvd: ne16(b, 6),
            metadata: ne64(b, 8),
            addr: ne64(b, 16),
            slba: ne64(b, 24),
            dsmgmt: ne32(b, 32),
            reftag: ne32(b, 36),
            apptag: ne16(b, 40),
            appmask: ne16(b, 42),
        })
    }

    /// The equivalent passthrough command on namespace `nsid` with `lba_shift`-sized blocks
    /// and metadata format `meta` (as the C driver's `nvme_submit_io`: read, write and
    /// compare only; the metadata of the blocks, interleaved with the data for extended
    /// LBAs, none when the controller inserts and strips PI alone).
    pub(crate) fn to_passthru(
        self,
        nsid: u32,
        lba_shift: u32,
        meta: UserIoMeta,
    ) -> Result<PassthruCmd, PassthruError> {
        // Read, write, compare (0x05).
        if !matches!(self.opcode, 0x01 | 0x02 | 0x05) || self.rsvd != 0 {
            return Err(PassthruError::UserIo);
        }
        let blocks = u64::from(self.nblocks) + 1;
        let pract = self.control & (1 << 13) != 0;
        let mut meta_len = if pract && meta.pi_only {
            if self.metadata != 0 {
                return Err(PassthruError::Metadata);
            }
            0
        } else {
            blocks * u64::from(meta.ms)
        };
        let mut bytes = blocks << lba_shift;
        if meta.extended {
            bytes += meta_len;
            meta_len = 0;
        } else if meta_len != 0 && (self.metadata == 0 || self.metadata & 3 != 0) {
            return Err(PassthruError::Metadata);
        }
        let data_len = u32::try_from(bytes).map_err(|_| PassthruError::TooLong)?;
        let mut c = PassthruCmd {
            opcode: self.opcode,
            flags: self.flags,
            nsid,
            metadata: if meta_len == 0 { 0 } else { self.metadata },
            metadata_len: u32::try_from(meta_len).map_err(|_| PassthruError::TooLong)?,
            addr: self.addr,
            data_len,
            ..Default::default()
        };
        c.cdw10_15[0] = self.slba as u32;
        c.cdw10_15[1] = (self.slba >> 32) as u32;
        c.cdw10_15[2] = u32::from(self.nblocks) | (u32::from(self.control) << 16);
        c.cdw10_15[3] = self.dsmgmt;
        c.cdw10_15[4] = self.reftag;
        c.cdw10_15[5] = u32::from(self.apptag) | (u32::from(self.appmask) << 16);
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_numbers_match_the_uapi_header() {
        // Values from a C program including <linux/nvme_ioctl.h> on x86_64.
        assert_eq!(NVME_IOCTL_ID, 0x4e40);
        assert_eq!(NVME_IOCTL_ADMIN_CMD, 0xc0484e41);
        assert_eq!(NVME_IOCTL_SUBMIT_IO, 0x40304e42);
        assert_eq!(NVME_IOCTL_IO_CMD, 0xc0484e43);
        assert_eq!(NVME_IOCTL_RESET, 0x4e44);
        assert_eq!(NVME_IOCTL_RESCAN, 0x4e46);
        assert_eq!(NVME_IOCTL_ADMIN64_CMD, 0xc0504e47);
        assert_eq!(NVME_IOCTL_IO64_CMD, 0xc0504e48);
        assert_eq!(NVME_URING_CMD_IO, 0xc0484e80);
        assert_eq!(NVME_URING_CMD_IO_VEC, 0xc0484e81);
        assert_eq!(NVME_URING_CMD_ADMIN, 0xc0484e82);
    }

    fn identify_bytes() -> [u8; PASSTHRU64_SIZE] {
        let mut b = [0u8; PASSTHRU64_SIZE];
        b[0] = 0x06;
        b[4..8].copy_from_slice(&1u32.to_ne_bytes());
        b[24..32].copy_from_slice(&0x7fff_0000_1000u64.to_ne_bytes());
        b[36..40].copy_from_slice(&4096u32.to_ne_bytes());
        b[40..44].copy_from_slice(&1u32.to_ne_bytes());
        b[64..68].copy_from_slice(&5000u32.to_ne_bytes());
        b
    }

    #[test]
    fn parses_and_builds_identify() {
        let c = PassthruCmd::parse(&identify_bytes()).unwrap();
        assert_eq!(c.opcode, 6);
        assert_eq!(c.nsid, 1);
        assert_eq!(c.data_len, 4096);
        assert_eq!(c.timeout_ms, 5000);
        assert_eq!(c.direction(), Direction::FromDevice);
        assert_eq!(c.validate(4096, 0), Ok(()));
        let cmd = c.command();
        assert_eq!(cmd.opcode(), 6);
        assert_eq!(cmd.dw[1], 1);
        assert_eq!(cmd.dw[10], 1);
        assert_eq!(cmd.dw[6], 0, "data pointer is the driver's to set");
        assert!(PassthruCmd::parse(&identify_bytes()[..71]).is_none());
    }

    #[test]
    fn refuses_what_it_cannot_do() {
        let ok = PassthruCmd::parse(&identify_bytes()).unwrap();
        assert_eq!(ok.validate(4095, 0), Err(PassthruError::TooLong));
        let c = PassthruCmd { flags: 1, ..ok };
        assert_eq!(c.validate(1 << 20, 0), Err(PassthruError::Flags));
        let c = PassthruCmd {
            metadata: 0x2000,
            metadata_len: 8,
            ..ok
        };
        assert_eq!(c.validate(1 << 20, 0), Err(PassthruError::Metadata));
        // With metadata buffers: at least the blocks' metadata for a read (CDW12 NLB 7).
        let read = PassthruCmd {
            opcode: 0x02,
            cdw10_15: [0, 0, 7, 0, 0, 0],
            metadata_len: 63,
            ..c
        };
        assert_eq!(
            read.validate(1 << 20, 8),
            Err(PassthruError::MetadataTooShort)
        );
        let read = PassthruCmd {
            metadata_len: 64,
            ..read
        };
        assert_eq!(read.validate(1 << 20, 8), Ok(()));
        // Without data, metadata is ignored (as C).
        let c = PassthruCmd {
            data_len: 0,
            addr: 0,
            ..c
        };
        assert_eq!(c.metadata_buffer(), None);
        assert_eq!(c.validate(1 << 20, 0), Ok(()));
        let c = PassthruCmd { addr: 0, ..ok };
        assert_eq!(c.validate(1 << 20, 0), Err(PassthruError::NoBuffer));
        let c = PassthruCmd { opcode: 0x03, ..ok };
        assert_eq!(c.validate(1 << 20, 0), Err(PassthruError::Bidirectional));
        // No data: direction bits do not matter, no address needed.
        let c = PassthruCmd {
            opcode: 0x03,
            data_len: 0,
            addr: 0,
            ..ok
        };
        assert_eq!(c.validate(0, 0), Ok(()));
        assert_eq!(c.direction(), Direction::None);
        let c = PassthruCmd { opcode: 0x09, ..ok };
        assert_eq!(c.direction(), Direction::ToDevice);
    }

    #[test]
    fn user_io_becomes_read_or_write() {
        let mut b = [0u8; USER_IO_SIZE];
        b[0] = 0x02;
        b[4..6].copy_from_slice(&7u16.to_ne_bytes());
        b[16..24].copy_from_slice(&0x1000u64.to_ne_bytes());
        b[24..32].copy_from_slice(&0x1_0000_0002u64.to_ne_bytes());
        let io = UserIo::parse(&b).unwrap();
        let c = io.to_passthru(3, 12, UserIoMeta::default()).unwrap();
        assert_eq!(c.nsid, 3);
        assert_eq!(c.data_len, 8 * 4096);
        assert_eq!(c.cdw10_15[0], 2);
        assert_eq!(c.cdw10_15[1], 1);
        assert_eq!(c.cdw10_15[2], 7);
        assert_eq!(c.direction(), Direction::FromDevice);
        let flush = UserIo { opcode: 0, ..io };
        assert_eq!(
            flush.to_passthru(3, 12, UserIoMeta::default()),
            Err(PassthruError::UserIo)
        );
        let rsvd = UserIo { rsvd: 1, ..io };
        assert_eq!(
            rsvd.to_passthru(3, 12, UserIoMeta::default()),
            Err(PassthruError::UserIo)
        );
        // 65536 blocks of 64 KiB do not fit a 32-bit length.
        let huge = UserIo {
            nblocks: u16::MAX,
            ..io
        };
        assert_eq!(
            huge.to_passthru(3, 16, UserIoMeta::default()),
            Err(PassthruError::TooLong)
        );
        // Metadata of 8 blocks of 8 bytes, 4-byte aligned; none with PRACT on a PI-only
        // format (and a pointer is then refused); interleaved for extended LBAs.
        let meta = UserIoMeta {
            ms: 8,
            pi_only: true,
            extended: false,
        };
        let io = UserIo {
            metadata: 0x4000,
            ..io
        };
        let c = io.to_passthru(3, 12, meta).unwrap();
        assert_eq!(
            (c.metadata, c.metadata_len, c.data_len),
            (0x4000, 64, 8 * 4096)
        );
        let odd = UserIo {
            metadata: 0x4002,
            ..io
        };
        assert_eq!(odd.to_passthru(3, 12, meta), Err(PassthruError::Metadata));
        let pract = UserIo {
            control: 1 << 13,
            ..io
        };
        assert_eq!(pract.to_passthru(3, 12, meta), Err(PassthruError::Metadata));
        let pract = UserIo {
            metadata: 0,
            ..pract
        };
        assert_eq!(pract.to_passthru(3, 12, meta).unwrap().metadata_len, 0);
        let ext = UserIoMeta {
            extended: true,
            ..meta
        };
        let c = io.to_passthru(3, 12, ext).unwrap();
        assert_eq!(
            (c.metadata, c.metadata_len, c.data_len),
            (0, 0, 8 * 4096 + 64)
        );
    }

    #[test]
    fn any_bytes_parse_without_panic() {
        let mut seed = 0x1234_5678u32;
        for _ in 0..2000 {
            let mut b = [0u8; PASSTHRU64_SIZE];
            for x in b.iter_mut() {
                seed ^= seed << 13;
                seed ^= seed >> 17;
                seed ^= seed << 5;
                *x = seed as u8;
            }
            if let Some(c) = PassthruCmd::parse(&b) {
                let _ = c.validate(seed, seed as u8);
                let _ = c.command();
            }
            if let Some(io) = UserIo::parse(&b) {
                let _ = io.to_passthru(
                    1,
                    9 + seed % 8,
                    UserIoMeta {
                        ms: seed as u16,
                        pi_only: seed & 1 != 0,
                        extended: seed & 2 != 0,
                    },
                );
            }
        }
    }
}
