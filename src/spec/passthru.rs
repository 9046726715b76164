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
    /// A metadata buffer was given: rnvme only serves formats without metadata.
    Metadata,
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
            PassthruError::Metadata => "metadata buffers are not supported",
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

    /// Checks what the driver can carry out; `max_data` is the most bytes one command may
    /// move.
    pub(crate) fn validate(&self, max_data: u32) -> Result<(), PassthruError> {
        if self.flags != 0 {
            return Err(PassthruError::Flags);
        }
        if self.metadata_len != 0 || self.metadata != 0 {
            return Err(PassthruError::Metadata);
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
    /// (as the C driver's `nvme_submit_io`: read, write and compare only).
    pub(crate) fn to_passthru(
        self,
        nsid: u32,
        lba_shift: u32,
    ) -> Result<PassthruCmd, PassthruError> {
        // Read, write, compare (0x05).
        if !matches!(self.opcode, 0x01 | 0x02 | 0x05) || self.rsvd != 0 {
            return Err(PassthruError::UserIo);
        }
        let bytes = (u64::from(self.nblocks) + 1) << lba_shift;
        let data_len = u32::try_from(bytes).map_err(|_| PassthruError::TooLong)?;
        let mut c = PassthruCmd {
            opcode: self.opcode,
            flags: self.flags,
            nsid,
            metadata: self.metadata,
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
        assert_eq!(c.validate(4096), Ok(()));
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
        assert_eq!(ok.validate(4095), Err(PassthruError::TooLong));
        let c = PassthruCmd { flags: 1, ..ok };
        assert_eq!(c.validate(1 << 20), Err(PassthruError::Flags));
        let c = PassthruCmd {
            metadata_len: 8,
            ..ok
        };
        assert_eq!(c.validate(1 << 20), Err(PassthruError::Metadata));
        let c = PassthruCmd { addr: 0, ..ok };
        assert_eq!(c.validate(1 << 20), Err(PassthruError::NoBuffer));
        let c = PassthruCmd { opcode: 0x03, ..ok };
        assert_eq!(c.validate(1 << 20), Err(PassthruError::Bidirectional));
        // No data: direction bits do not matter, no address needed.
        let c = PassthruCmd {
            opcode: 0x03,
            data_len: 0,
            addr: 0,
            ..ok
        };
        assert_eq!(c.validate(0), Ok(()));
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
        let c = io.to_passthru(3, 12).unwrap();
        assert_eq!(c.nsid, 3);
        assert_eq!(c.data_len, 8 * 4096);
        assert_eq!(c.cdw10_15[0], 2);
        assert_eq!(c.cdw10_15[1], 1);
        assert_eq!(c.cdw10_15[2], 7);
        assert_eq!(c.direction(), Direction::FromDevice);
        let flush = UserIo { opcode: 0, ..io };
        assert_eq!(flush.to_passthru(3, 12), Err(PassthruError::UserIo));
        let rsvd = UserIo { rsvd: 1, ..io };
        assert_eq!(rsvd.to_passthru(3, 12), Err(PassthruError::UserIo));
        // 65536 blocks of 64 KiB do not fit a 32-bit length.
        let huge = UserIo {
            nblocks: u16::MAX,
            ..io
        };
        assert_eq!(huge.to_passthru(3, 16), Err(PassthruError::TooLong));
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
                let _ = c.validate(seed);
                let _ = c.command();
            }
            if let Some(io) = UserIo::parse(&b) {
                let _ = io.to_passthru(1, 9 + seed % 8);
            }
        }
    }
}
