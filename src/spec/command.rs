// SPDX-License-Identifier: GPL-2.0

//! 64-byte submission queue entries, with one constructor per command we send.

/// Admin command opcodes (NVMe Base Spec, figure 28).
pub(crate) mod admin_opcode {
    pub(crate) const DELETE_IO_SQ: u8 = 0x00;
    pub(crate) const CREATE_IO_SQ: u8 = 0x01;
    pub(crate) const GET_LOG_PAGE: u8 = 0x02;
    pub(crate) const DELETE_IO_CQ: u8 = 0x04;
    pub(crate) const CREATE_IO_CQ: u8 = 0x05;
    pub(crate) const IDENTIFY: u8 = 0x06;
    pub(crate) const ABORT: u8 = 0x08;
    pub(crate) const SET_FEATURES: u8 = 0x09;
    #[allow(dead_code, reason = "kept with the rest of the spec's definitions")]
    pub(crate) const GET_FEATURES: u8 = 0x0a;
    pub(crate) const ASYNC_EVENT_REQUEST: u8 = 0x0c;
    pub(crate) const DOORBELL_BUFFER_CONFIG: u8 = 0x7c;
}

/// NVM command set I/O opcodes.
pub(crate) mod io_opcode {
    pub(crate) const FLUSH: u8 = 0x00;
    pub(crate) const WRITE: u8 = 0x01;
    pub(crate) const READ: u8 = 0x02;
    pub(crate) const WRITE_ZEROES: u8 = 0x08;
    pub(crate) const DATASET_MANAGEMENT: u8 = 0x09;
}

/// Identify CNS values.
pub(crate) mod cns {
    pub(crate) const NAMESPACE: u8 = 0x00;
    pub(crate) const CONTROLLER: u8 = 0x01;
    pub(crate) const ACTIVE_NS_LIST: u8 = 0x02;
    /// Namespace Identification Descriptor list.
    pub(crate) const NS_DESC_LIST: u8 = 0x03;
    /// I/O Command Set specific Identify Namespace (CSI in CDW11).
    pub(crate) const CS_NAMESPACE: u8 = 0x05;
    /// I/O Command Set specific Identify Controller (CSI 00h: the NVM command set).
    pub(crate) const CS_CONTROLLER: u8 = 0x06;

    /// Whether a controller of version `vs` (VER) understands CNS value `cns`, as the C
    /// driver's `nvme_id_cns_ok`: NVMe 1.0 had a one-bit CNS, 1.1 a two-bit one, 1.2 the
    /// whole byte. `cns_1_0` (the identify_cns quirk) treats a 1.1 controller as 1.0 (QEMU
    /// before 1.2 answered so).
    pub(crate) fn supported(vs: u32, cns: u8, cns_1_0: bool) -> bool {
        if vs >= 0x1_02_00 {
            true
        } else if vs >= 0x1_01_00 && !cns_1_0 {
            cns <= 3
        } else {
            cns <= 1
        }
    }
}

/// Feature identifiers.
pub(crate) mod feature {
    #[allow(dead_code, reason = "kept with the rest of the spec's definitions")]
    pub(crate) const VOLATILE_WRITE_CACHE: u8 = 0x06;
    pub(crate) const NUMBER_OF_QUEUES: u8 = 0x07;
    pub(crate) const ASYNC_EVENT_CONFIG: u8 = 0x0b;
    pub(crate) const HOST_BEHAVIOR: u8 = 0x16;
}

/// Host Behavior Support (feature 16h) data: 512 bytes, byte 0 Advanced Command Retry
/// Enable.
pub(crate) fn host_behavior(acre: bool) -> [u8; 512] {
    let mut b = [0u8; 512];
    b[0] = u8::from(acre);
    b
}

/// A submission queue entry, as sixteen little-endian command dwords.
///
/// The layout is the one the device reads; `dw` index n is command dword n.
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct Command {
    pub(crate) dw: [u32; 16],
}

impl Command {
    /// Size of a submission queue entry in bytes (CC.IOSQES = 6).
    #[allow(dead_code, reason = "read by the host tests")]
    pub(crate) const SIZE: usize = 64;

    /// A command with `opcode` and nothing else set.
    pub(crate) fn new(opcode: u8) -> Self {
        let mut c = Self::default();
        c.dw[0] = u32::from(opcode);
        c
    }

    #[allow(
        dead_code,
        reason = "read by the host tests and the test build's faults"
    )]
    pub(crate) fn opcode(&self) -> u8 {
        self.dw[0] as u8
    }

    /// Sets the command identifier (CDW0 bits 31:16).
    pub(crate) fn set_cid(&mut self, cid: u16) {
        self.dw[0] = (self.dw[0] & 0xffff) | (u32::from(cid) << 16);
    }

    #[allow(dead_code, reason = "read by the host tests")]
    pub(crate) fn cid(&self) -> u16 {
        (self.dw[0] >> 16) as u16
    }

    pub(crate) fn with_nsid(mut self, nsid: u32) -> Self {
        self.dw[1] = nsid;
        self
    }

    /// Sets PRP entry 1 and 2 (data pointer, dwords 6..9).
    pub(crate) fn with_prp(mut self, prp1: u64, prp2: u64) -> Self {
        self.set_prp(prp1, prp2);
        self
    }

    /// Sets the Metadata Pointer (CDW4-5): one buffer of the command's metadata.
    pub(crate) fn set_mptr(&mut self, addr: u64) {
        self.dw[4] = addr as u32;
        self.dw[5] = (addr >> 32) as u32;
    }

    /// Sets PRP entry 1 and 2 in place.
    pub(crate) fn set_prp(&mut self, prp1: u64, prp2: u64) {
        self.dw[6] = prp1 as u32;
        self.dw[7] = (prp1 >> 32) as u32;
        self.dw[8] = prp2 as u32;
        self.dw[9] = (prp2 >> 32) as u32;
    }

    /// Points the command at its data with SGL1 (dwords 6..9) and sets PSDT to "SGLs,
    /// metadata in one buffer" (CDW0 bits 15:14 = 01b).
    #[allow(dead_code, reason = "read by the host tests")]
    pub(crate) fn with_sgl(mut self, sgl1: [u64; 2]) -> Self {
        self.set_sgl(sgl1);
        self
    }

    /// [`Self::with_sgl`] in place.
    pub(crate) fn set_sgl(&mut self, sgl1: [u64; 2]) {
        self.dw[0] = (self.dw[0] & !(3 << 14)) | (1 << 14);
        self.dw[6] = sgl1[0] as u32;
        self.dw[7] = (sgl1[0] >> 32) as u32;
        self.dw[8] = sgl1[1] as u32;
        self.dw[9] = (sgl1[1] >> 32) as u32;
    }

    #[allow(dead_code, reason = "read by the host tests")]
    pub(crate) fn prp1(&self) -> u64 {
        u64::from(self.dw[6]) | (u64::from(self.dw[7]) << 32)
    }

    #[allow(dead_code, reason = "read by the host tests")]
    pub(crate) fn prp2(&self) -> u64 {
        u64::from(self.dw[8]) | (u64::from(self.dw[9]) << 32)
    }

    pub(crate) fn with_cdw(mut self, n: usize, value: u32) -> Self {
        self.dw[n] = value;
        self
    }

    /// Identify (CNS in CDW10 bits 7:0). The 4 KiB result goes to `prp1`.
    pub(crate) fn identify(cns: u8, nsid: u32, prp1: u64) -> Self {
        Self::new(admin_opcode::IDENTIFY)
            .with_nsid(nsid)
            .with_prp(prp1, 0)
            .with_cdw(10, u32::from(cns))
    }

    /// Set Features with the feature's CDW11 value.
    pub(crate) fn set_features(fid: u8, cdw11: u32) -> Self {
        Self::new(admin_opcode::SET_FEATURES)
            .with_cdw(10, u32::from(fid))
            .with_cdw(11, cdw11)
    }

    /// Get Features (current value).
    #[allow(dead_code, reason = "kept with the rest of the spec's definitions")]
    pub(crate) fn get_features(fid: u8) -> Self {
        Self::new(admin_opcode::GET_FEATURES).with_cdw(10, u32::from(fid))
    }

    /// Set Features, Number of Queues: requests `sq` submission and `cq` completion queues.
    pub(crate) fn set_num_queues(sq: u16, cq: u16) -> Self {
        let ncqr = u32::from(cq.saturating_sub(1));
        let nsqr = u32::from(sq.saturating_sub(1));
        Self::set_features(feature::NUMBER_OF_QUEUES, (ncqr << 16) | nsqr)
    }

    /// Create I/O Completion Queue: physically contiguous, interrupts enabled on `vector`.
    pub(crate) fn create_io_cq(qid: u16, depth: u16, prp1: u64, vector: u16, irq: bool) -> Self {
        let flags = 1 | if irq { 2 } else { 0 };
        Self::new(admin_opcode::CREATE_IO_CQ)
            .with_prp(prp1, 0)
            .with_cdw(10, ((u32::from(depth) - 1) << 16) | u32::from(qid))
            .with_cdw(11, (u32::from(vector) << 16) | flags)
    }

    /// Create I/O Submission Queue bound to completion queue `cqid`, physically contiguous,
    /// of urgent priority (QPRIO 00b; what arbitration without weights ignores) or, with
    /// `medium`, medium (10b: the medium_prio_sq quirk, for controllers that would otherwise
    /// make every queue urgent in weighted round robin).
    pub(crate) fn create_io_sq(qid: u16, depth: u16, prp1: u64, cqid: u16, medium: bool) -> Self {
        let prio = if medium { 2 << 1 } else { 0 };
        Self::new(admin_opcode::CREATE_IO_SQ)
            .with_prp(prp1, 0)
            .with_cdw(10, ((u32::from(depth) - 1) << 16) | u32::from(qid))
            .with_cdw(11, (u32::from(cqid) << 16) | prio | 1)
    }

    pub(crate) fn delete_io_sq(qid: u16) -> Self {
        Self::new(admin_opcode::DELETE_IO_SQ).with_cdw(10, u32::from(qid))
    }

    pub(crate) fn delete_io_cq(qid: u16) -> Self {
        Self::new(admin_opcode::DELETE_IO_CQ).with_cdw(10, u32::from(qid))
    }

    /// Doorbell Buffer Config: the shadow doorbell page at `dbs` and the event index page
    /// at `eis` (both page aligned).
    pub(crate) fn doorbell_buffer_config(dbs: u64, eis: u64) -> Self {
        Self::new(admin_opcode::DOORBELL_BUFFER_CONFIG).with_prp(dbs, eis)
    }

    /// Abort command `cid` on submission queue `sqid`.
    pub(crate) fn abort(sqid: u16, cid: u16) -> Self {
        Self::new(admin_opcode::ABORT).with_cdw(10, (u32::from(cid) << 16) | u32::from(sqid))
    }

    /// Get Log Page of `dwords` dwords (at most one PRP page's worth is what we send).
    pub(crate) fn get_log_page(lid: u8, nsid: u32, dwords: u32, prp1: u64, prp2: u64) -> Self {
        let numd = dwords.saturating_sub(1);
        Self::new(admin_opcode::GET_LOG_PAGE)
            .with_nsid(nsid)
            .with_prp(prp1, prp2)
            .with_cdw(10, ((numd & 0xffff) << 16) | u32::from(lid))
            .with_cdw(11, numd >> 16)
    }

    /// Read or write `nlb` logical blocks starting at `slba`.
    pub(crate) fn rw(opcode: u8, nsid: u32, slba: u64, nlb: u32, fua: bool) -> Self {
        let mut c = Self::default();
        c.set_rw(opcode, nsid, slba, nlb, fua);
        c
    }

    /// Makes a zeroed command (a fresh `Command::default()`) the Read/Write/Write Zeroes
    /// [`Self::rw`] builds, in place: the I/O path builds its commands where they lie.
    pub(crate) fn set_rw(&mut self, opcode: u8, nsid: u32, slba: u64, nlb: u32, fua: bool) {
        let fua = if fua { 1 << 30 } else { 0 };
        self.dw[0] = u32::from(opcode);
        self.dw[1] = nsid;
        self.dw[10] = slba as u32;
        self.dw[11] = (slba >> 32) as u32;
        self.dw[12] = nlb.wrapping_sub(1) | fua;
    }

    /// Write Zeroes of `nlb` blocks (1..=65536).
    pub(crate) fn write_zeroes(nsid: u32, slba: u64, nlb: u32) -> Self {
        Self::rw(io_opcode::WRITE_ZEROES, nsid, slba, nlb, false)
    }

    /// Dataset Management, deallocate: `ranges` (1..=256) ranges at `prp1`.
    pub(crate) fn deallocate(nsid: u32, ranges: u32, prp1: u64) -> Self {
        Self::new(io_opcode::DATASET_MANAGEMENT)
            .with_nsid(nsid)
            .with_prp(prp1, 0)
            .with_cdw(10, ranges - 1)
            .with_cdw(11, 1 << 2)
    }

    pub(crate) fn flush(nsid: u32) -> Self {
        Self::new(io_opcode::FLUSH).with_nsid(nsid)
    }

    /// The command as the little-endian bytes the device reads.
    #[allow(dead_code, reason = "read by the host tests")]
    pub(crate) fn to_le_bytes(self) -> [u8; 64] {
        let mut out = [0u8; 64];
        for (i, d) in self.dw.iter().enumerate() {
            out[i * 4..i * 4 + 4].copy_from_slice(&d.to_le_bytes());
        }
        out
    }
}

/// I/O command identifiers: the request's tag in the low 12 bits, a 4-bit generation counter
/// above it, so a completion for an earlier use of the same tag is recognised as stale.
pub(crate) mod io_cid {
    pub(crate) const TAG_BITS: u32 = 12;
    /// Deepest queue the layout allows.
    pub(crate) const MAX_DEPTH: u32 = 1 << TAG_BITS;

    pub(crate) fn encode(tag: u32, generation: u32) -> u16 {
        ((tag & (MAX_DEPTH - 1)) | ((generation & 0xf) << TAG_BITS)) as u16
    }

    /// (tag, generation)
    pub(crate) fn decode(cid: u16) -> (u32, u32) {
        let cid = u32::from(cid);
        (cid & (MAX_DEPTH - 1), cid >> TAG_BITS)
    }

    /// Whether a completion's generation is the one the request was last issued with.
    pub(crate) fn current(issued_generation: u32, completed: u32) -> bool {
        issued_generation & 0xf == completed
    }
}

/// Most ranges one Dataset Management command carries.
pub(crate) const DSM_MAX_RANGES: usize = 256;

/// One Dataset Management range (16 bytes) as two quadwords: context attributes (0) and
/// length in blocks, then the starting LBA. Stored little endian by the caller.
pub(crate) fn dsm_range(slba: u64, nlb: u32) -> [u64; 2] {
    [u64::from(nlb) << 32, slba]
}
