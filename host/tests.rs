// SPDX-License-Identifier: GPL-2.0

use crate::spec::command::{admin_opcode, cns, host_behavior, Command};
use crate::spec::completion::{sc, Completion, Status, StatusType};
use crate::spec::identify::*;
use crate::spec::regs::{self, Cap};

fn put16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_le_bytes());
}
fn put32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}
fn put64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
}
fn pad(b: &mut [u8], off: usize, len: usize, s: &str) {
    b[off..off + len].fill(b' ');
    b[off..off + s.len()].copy_from_slice(s.as_bytes());
}

/// An Identify Controller page as QEMU 7.2 fills it for `-device nvme,serial=...`.
fn qemu_id_ctrl(serial: &str) -> Vec<u8> {
    let mut b = vec![0u8; IDENTIFY_SIZE];
    put16(&mut b, 0, 0x1b36);
    put16(&mut b, 2, 0x1af4);
    pad(&mut b, 4, 20, serial);
    pad(&mut b, 24, 40, "QEMU NVMe Ctrl");
    pad(&mut b, 64, 8, "7.2.22");
    b[77] = 7;
    put32(&mut b, 80, 0x10400);
    b[512] = 0x66;
    b[513] = 0x44;
    put32(&mut b, 516, 256);
    put16(&mut b, 520, 0x7f);
    b[525] = 1;
    put32(&mut b, 536, 1);
    b
}

fn id_ns(nsze: u64, nlbaf: u8, flbas: u8, formats: &[(u16, u8)]) -> Vec<u8> {
    let mut b = vec![0u8; IDENTIFY_SIZE];
    put64(&mut b, 0, nsze);
    put64(&mut b, 8, nsze);
    b[25] = nlbaf;
    b[26] = flbas;
    for (i, (ms, lbads)) in formats.iter().enumerate() {
        put32(&mut b, 128 + 4 * i, *ms as u32 | ((*lbads as u32) << 16));
    }
    b
}

#[test]
fn cap_fields_from_qemu() {
    // The value QEMU 7.2's emulated controller reports (seen in a probe).
    let cap = Cap(0x4008200f0107ff);
    assert_eq!(cap.mqes(), 2048);
    assert!(cap.cqr());
    assert_eq!(cap.timeout_ms(), 15 * 500);
    assert_eq!(cap.doorbell_stride(), 4);
    assert_eq!(cap.css() & regs::CAP_CSS_NVM, regs::CAP_CSS_NVM);
    assert_eq!(cap.mpsmin_shift(), 12);
    assert_eq!(cap.mpsmax_shift(), 16);
    assert!(!cap.nssrs());
    assert_eq!(cap.ams(), 0);
}

/// The Controller Memory Buffer's registers as QEMU 7.2 reports them with cmb_size_mb=64
/// (CMBLOC 0x62: BAR 2, offset 0; CMBSZ 0x4021d: SQS, LISTS, RDS, WDS, 64 units of 1 MiB),
/// decoded as C's `nvme_map_cmb`.
#[test]
fn cmb_layout() {
    use crate::spec::regs::{CmbLayout, CMBSZ_RDS, CMBSZ_SQS, CMBSZ_WDS};
    let l = CmbLayout::decode(0x62, 0x0004_021d).unwrap();
    assert_eq!(
        l,
        CmbLayout {
            bar: 2,
            offset: 0,
            size: 64 << 20
        }
    );
    assert_eq!(0x0004_021d & (CMBSZ_SQS | CMBSZ_RDS | CMBSZ_WDS), 0x19);
    // 4 KiB units, an offset of 3 units in BAR 4.
    assert_eq!(
        CmbLayout::decode(0x3004, 0x10_0001),
        Some(CmbLayout {
            bar: 4,
            offset: 3 << 12,
            size: 256 << 12
        })
    );
    // Not enabled (CRE clear) or absent: no buffer. A unit past 64 bits: refused.
    assert_eq!(CmbLayout::decode(0x62, 0), None);
    assert_eq!(CmbLayout::decode(0, 0xfff0_0f00), None);
}

/// The depth of submission queues in a Controller Memory Buffer, as C's `nvme_cmb_qdepth`.
#[test]
fn cmb_sq_depth() {
    use crate::spec::regs::cmb_sq_depth;
    const MIB: u64 = 1 << 20;
    // Everything fits: the depth asked for (3 queues of 64 KiB in 2 MiB; 32 in exactly 2 MiB).
    assert_eq!(cmb_sq_depth(2 * MIB, 3, 1024), Some(1024));
    assert_eq!(cmb_sq_depth(2 * MIB, 32, 1024), Some(1024));
    // 18 queues of 128 KiB in 2 MiB: a share of 116508 bytes, 114688 in whole pages, 1792
    // entries (what C computes for the scenario `cmb`'s second half).
    assert_eq!(cmb_sq_depth(2 * MIB, 18, 2048), Some(1792));
    // A queue's size is rounded up to a page: 3 queues of 65 entries (4160 bytes) take 24 KiB;
    // a byte less, and each gets one page, 64 entries.
    assert_eq!(cmb_sq_depth(24 << 10, 3, 65), Some(65));
    assert_eq!(cmb_sq_depth((24 << 10) - 1, 3, 65), Some(64));
    // A share below 64 entries: host memory at full depth instead.
    assert_eq!(cmb_sq_depth(MIB, 256, 1024), Some(64));
    assert_eq!(cmb_sq_depth(MIB, 257, 1024), None);
    // No buffer to speak of, and no queue (counted as one).
    assert_eq!(cmb_sq_depth(0, 4, 1024), None);
    assert_eq!(cmb_sq_depth(2 * MIB, 0, 1024), Some(1024));
}

#[test]
fn shadow_doorbells() {
    use crate::spec::regs::{shadow_len, shadow_need_event, shadow_sq_index};
    assert_eq!(shadow_sq_index(0, 4), 0);
    assert_eq!(shadow_sq_index(3, 4), 6);
    assert_eq!(shadow_sq_index(3, 16), 24);
    assert_eq!(shadow_len(2, 4), 6);
    // The controller asked to be told once the tail passes 5.
    assert!(shadow_need_event(5, 6, 5));
    assert!(shadow_need_event(5, 9, 3));
    // Already past it before this update: the controller is still working through the queue.
    assert!(!shadow_need_event(5, 9, 7));
    // Not reached yet.
    assert!(!shadow_need_event(10, 8, 6));
    // Wrapping around 16 bits.
    assert!(shadow_need_event(0xffff, 2, 0xfffe));
    assert!(!shadow_need_event(0xfff0, 2, 0xfffe));
}

#[test]
fn doorbells_follow_stride() {
    assert_eq!(regs::sq_tail_doorbell(0, 4), 0x1000);
    assert_eq!(regs::cq_head_doorbell(0, 4), 0x1004);
    assert_eq!(regs::sq_tail_doorbell(3, 4), 0x1018);
    assert_eq!(regs::cq_head_doorbell(3, 16), 0x1000 + 7 * 16);
}

#[test]
fn cc_and_aqa_encoding() {
    let cc = regs::cc_enable(12, regs::cc::CSS_NVM);
    assert_eq!(cc, 0x0046_0001);
    assert_eq!(
        regs::cc_enable(16, regs::cc::CSS_NVM) & regs::cc::MPS_MASK,
        4 << 7
    );
    assert_eq!(regs::aqa(32), 0x001f_001f);
    assert_eq!(regs::version(0x10400), (1, 4, 0));
    assert!(regs::device_gone(0xffff_ffff));
    assert!(!regs::device_gone(regs::csts::RDY));
}

#[test]
fn command_layout() {
    let mut c = Command::identify(cns::CONTROLLER, 0, 0x1234_5678_9abc_d000);
    c.set_cid(0xbeef);
    assert_eq!(c.opcode(), admin_opcode::IDENTIFY);
    assert_eq!(c.cid(), 0xbeef);
    assert_eq!(c.dw[0], 0xbeef_0006);
    assert_eq!(c.dw[10], 1);
    assert_eq!(c.prp1(), 0x1234_5678_9abc_d000);
    let bytes = c.to_le_bytes();
    assert_eq!(&bytes[0..4], &[0x06, 0x00, 0xef, 0xbe]);
    assert_eq!(&bytes[24..32], &0x1234_5678_9abc_d000u64.to_le_bytes());
    assert_eq!(core::mem::size_of::<Command>(), Command::SIZE);
}

#[test]
fn queue_commands() {
    let c = Command::create_io_cq(3, 1024, 0x1000, 2, true);
    assert_eq!(c.dw[10], (1023 << 16) | 3);
    assert_eq!(c.dw[11], (2 << 16) | 3);
    let s = Command::create_io_sq(3, 1024, 0x2000, 3, false);
    assert_eq!(s.dw[11], (3 << 16) | 1);
    // QPRIO medium (10b in bits 2:1), as C's NVME_SQ_PRIO_MEDIUM.
    let s = Command::create_io_sq(3, 1024, 0x2000, 3, true);
    assert_eq!(s.dw[11], (3 << 16) | 4 | 1);
    let n = Command::set_num_queues(4, 4);
    assert_eq!(n.dw[10], 7);
    assert_eq!(n.dw[11], 0x0003_0003);
    let rw = Command::rw(2, 1, 0x1_0000_0002, 8, true);
    assert_eq!((rw.dw[10], rw.dw[11], rw.dw[12]), (2, 1, 7 | (1 << 30)));
}

#[test]
fn completion_decode_and_phase() {
    // DW3: cid 0x0042, phase 1, status: SCT 0 SC 0.
    let c = Completion::from_dwords([7, 0, (1 << 16) | 5, 0x0001_0042]);
    assert_eq!(c.result, 7);
    assert_eq!(c.sq_head, 5);
    assert_eq!(c.sq_id, 1);
    assert_eq!(c.cid, 0x42);
    assert!(c.phase());
    assert!(c.status().is_success());

    // Invalid field in command, DNR set, phase 0.
    let st = (1u32 << 14 | 0x02) << 1;
    let c = Completion::from_dwords([0, 0, 0, (st << 16) | 9]);
    assert!(!c.phase());
    let s = c.status();
    assert!(!s.is_success());
    assert_eq!(s.code(), sc::INVALID_FIELD);
    assert_eq!(s.status_type(), StatusType::Generic);
    assert!(s.dnr());
    assert!(!s.retryable());
    assert_eq!(s.name(), "invalid field");
}

#[test]
fn status_types_and_names() {
    let media = Status((2 << 8) | sc::READ_ERROR as u16);
    assert_eq!(media.status_type(), StatusType::MediaError);
    assert_eq!(media.name(), "unrecovered read error");
    assert!(media.retryable());
    let more = Status((1 << 13) | (3 << 11) | sc::INTERNAL as u16);
    assert!(more.more());
    assert_eq!(more.crd(), 3);
    let qsize = Status((1 << 8) | sc::INVALID_QSIZE as u16);
    assert_eq!(qsize.name(), "invalid queue size");
    assert_eq!(Status((5 << 8) | 1).status_type(), StatusType::Reserved(5));
    assert!(format!("{}", Status((1 << 14) | 2)).contains("dnr"));
}

#[test]
fn identify_controller_parses_qemu_values() {
    let b = qemu_id_ctrl("rnvme-0");
    let id = IdentifyController::parse(&b).unwrap();
    assert_eq!(id.vid, 0x1b36);
    assert_eq!(id.serial.as_str(), "rnvme-0");
    assert_eq!(id.model.as_str(), "QEMU NVMe Ctrl");
    assert_eq!(id.firmware.as_str(), "7.2.22");
    assert_eq!(id.nn, 256);
    assert_eq!(id.mdts, 7);
    assert_eq!(id.max_transfer_bytes(Cap(0)), Some(512 * 1024));
    assert!(id.has_volatile_write_cache());
    assert!(id.supports_dsm());
    assert!(id.supports_write_zeroes());
    assert!(id.supports_sgl());
}

/// MDTS counts CAP.MPSMIN pages, not the host's (issue 12 item 6): 2^7 x 8 KiB with
/// MPSMIN = 1, 2^7 x 64 KiB with MPSMIN = 4, whatever page size the host runs with.
#[test]
fn mdts_counts_cap_mpsmin_pages() {
    let id = IdentifyController::parse(&qemu_id_ctrl("rnvme-0")).unwrap();
    assert_eq!(id.max_transfer_bytes(Cap(0)), Some(512 * 1024));
    assert_eq!(id.max_transfer_bytes(Cap(1 << 48)), Some(1024 * 1024));
    assert_eq!(id.max_transfer_bytes(Cap(4 << 48)), Some(8 * 1024 * 1024));
}

#[test]
fn identify_controller_rejects_bad_data() {
    assert_eq!(
        IdentifyController::parse(&[0u8; 100]),
        Err(IdentifyError::Truncated)
    );
    let mut b = qemu_id_ctrl("x");
    b[512] = 0x77; // minimum SQ entry 128 bytes: we only do 64
    assert!(matches!(
        IdentifyController::parse(&b),
        Err(IdentifyError::QueueEntrySize { .. })
    ));
    // Control characters and non-ASCII from the device never reach a log line.
    let mut b = qemu_id_ctrl("ab");
    b[5] = 0x1b;
    b[6] = 0xff;
    let id = IdentifyController::parse(&b).unwrap();
    assert_eq!(id.serial.as_str(), "a??");
    // MDTS 0: no limit; absurd MDTS saturates.
    let mut b = qemu_id_ctrl("x");
    b[77] = 0;
    assert_eq!(
        IdentifyController::parse(&b)
            .unwrap()
            .max_transfer_bytes(Cap(0)),
        None
    );
    b[77] = 255;
    assert_eq!(
        IdentifyController::parse(&b)
            .unwrap()
            .max_transfer_bytes(Cap(0)),
        Some(u64::MAX)
    );
}

/// NGUID at byte 104, EUI64 at 120 (as QEMU's nguid= and eui64= put them).
#[test]
fn identify_namespace_identifiers() {
    let mut b = id_ns(8, 0, 0, &[(0, 9)]);
    b[104..120].copy_from_slice(&[0xa1; 16]);
    b[120..128].copy_from_slice(&[0x52, 0x54, 0, 0x12, 0x34, 0x56, 0x78, 0x9a]);
    let ns = IdentifyNamespace::parse(&b).unwrap();
    assert_eq!(ns.nguid, [0xa1; 16]);
    assert_eq!(ns.eui64, [0x52, 0x54, 0, 0x12, 0x34, 0x56, 0x78, 0x9a]);
}

#[test]
fn identify_namespace_formats() {
    let b = id_ns(1 << 21, 1, 0, &[(0, 9), (0, 12)]);
    let ns = IdentifyNamespace::parse(&b).unwrap();
    assert_eq!(ns.block_size(), 512);
    assert_eq!(ns.capacity_bytes(), 1 << 30);
    let b = id_ns(1 << 18, 1, 1, &[(0, 9), (0, 12)]);
    let ns = IdentifyNamespace::parse(&b).unwrap();
    assert_eq!(ns.block_size(), 4096);
    assert_eq!(ns.lbaf_index, 1);
    // Metadata is reported so the driver can skip such namespaces.
    let b = id_ns(8, 0, 0x10, &[(8, 9)]);
    let ns = IdentifyNamespace::parse(&b).unwrap();
    assert_eq!(ns.lbaf.ms, 8);
    assert!(ns.extended_lba);
}

#[test]
fn identify_namespace_rejects_nonsense() {
    assert!(matches!(
        IdentifyNamespace::parse(&id_ns(0, 0, 0, &[(0, 9)])),
        Err(IdentifyError::NamespaceSize { .. })
    ));
    assert!(matches!(
        IdentifyNamespace::parse(&id_ns(8, 0, 3, &[(0, 9)])),
        Err(IdentifyError::FormatIndex { index: 3, nlbaf: 0 })
    ));
    assert!(matches!(
        IdentifyNamespace::parse(&id_ns(8, 0, 0, &[(0, 8)])),
        Err(IdentifyError::BlockSize { lbads: 8 })
    ));
    assert!(matches!(
        IdentifyNamespace::parse(&id_ns(8, 0, 0, &[(0, 40)])),
        Err(IdentifyError::BlockSize { lbads: 40 })
    ));
    let mut b = id_ns(8, 0, 0, &[(0, 9)]);
    put64(&mut b, 8, 9);
    assert!(IdentifyNamespace::parse(&b).is_err());
}

#[test]
fn namespace_list() {
    let mut b = vec![0u8; IDENTIFY_SIZE];
    for (i, id) in [1u32, 2, 5].iter().enumerate() {
        put32(&mut b, i * 4, *id);
    }
    let mut out = [0u32; NS_LIST_MAX];
    assert_eq!(parse_ns_list(&b, 256, &mut out), Ok(3));
    assert_eq!(&out[..3], &[1, 2, 5]);
    // Not increasing.
    put32(&mut b, 12, 4);
    assert_eq!(
        parse_ns_list(&b, 256, &mut out),
        Err(IdentifyError::NamespaceList {
            position: 3,
            nsid: 4
        })
    );
    // Beyond NN.
    assert!(parse_ns_list(&b, 2, &mut out).is_err());
    // Empty list is fine.
    assert_eq!(parse_ns_list(&[0u8; IDENTIFY_SIZE], 0, &mut out), Ok(0));
    // A full list of 1024 ids.
    let mut full = vec![0u8; IDENTIFY_SIZE];
    for i in 0..NS_LIST_MAX {
        put32(&mut full, i * 4, i as u32 + 1);
    }
    assert_eq!(parse_ns_list(&full, 4096, &mut out), Ok(NS_LIST_MAX));
}

mod prp {
    use crate::spec::prp::{build, PrpError, Prps};
    const P: u64 = 4096;

    fn run(segs: &[(u64, u32)], list_len: usize) -> (Result<Prps, PrpError>, Vec<u64>) {
        let mut list = vec![0u64; list_len];
        let r = build(segs.iter().copied(), P, list_len, 0xdead_0000, |i, a| {
            list[i] = a
        });
        (r, list)
    }

    #[test]
    fn one_sector_in_one_page() {
        let (r, _) = run(&[(0x1_0200, 512)], 512);
        assert_eq!(
            r,
            Ok(Prps {
                prp1: 0x1_0200,
                prp2: 0,
                list_entries: 0
            })
        );
    }

    #[test]
    fn unaligned_start_crossing_into_second_page() {
        // 4 KiB starting 512 bytes into a page: two pages, PRP2 is the second page.
        let (r, _) = run(&[(0x1_0200, 4096)], 512);
        assert_eq!(
            r,
            Ok(Prps {
                prp1: 0x1_0200,
                prp2: 0x1_1000,
                list_entries: 0
            })
        );
    }

    #[test]
    fn two_full_pages_in_two_segments() {
        let (r, _) = run(&[(0x5000, 4096), (0x9000, 4096)], 512);
        assert_eq!(
            r,
            Ok(Prps {
                prp1: 0x5000,
                prp2: 0x9000,
                list_entries: 0
            })
        );
    }

    #[test]
    fn list_for_three_or_more_pages() {
        let (r, list) = run(&[(0x5000, 8192), (0x20000, 4096), (0x30000, 100)], 512);
        assert_eq!(
            r,
            Ok(Prps {
                prp1: 0x5000,
                prp2: 0xdead_0000,
                list_entries: 3
            })
        );
        assert_eq!(&list[..3], &[0x6000, 0x20000, 0x30000]);
    }

    #[test]
    fn max_transfer_fits_one_list() {
        // 2 MiB aligned: first page in PRP1, 511 in the list.
        let (r, list) = run(&[(0x100_0000, 2 << 20)], 512);
        let r = r.unwrap();
        assert_eq!(r.list_entries, 511);
        assert_eq!(list[510], 0x100_0000 + (511 * P));
        // PRP1 plus a full list: 513 pages.
        let (r, _) = run(&[(0x100_0000, (2 << 20) + 4096)], 512);
        assert_eq!(r.unwrap().list_entries, 512);
        // One more page does not fit.
        let (r, _) = run(&[(0x100_0000, (2 << 20) + 8192)], 512);
        assert_eq!(r, Err(PrpError::TooLong { pages: 514 }));
    }

    #[test]
    fn many_small_segments_on_page_boundaries() {
        // 8 segments of one page each, the first starting mid-page and the last partial.
        let mut segs = vec![(0x1800u64, 0x800u32)];
        for i in 1..7 {
            segs.push((0x10_0000 * i, 4096));
        }
        segs.push((0x90_0000, 512));
        let (r, list) = run(&segs, 512);
        let r = r.unwrap();
        assert_eq!(r.prp1, 0x1800);
        assert_eq!(r.list_entries, 7);
        assert_eq!(list[6], 0x90_0000);
    }

    #[test]
    fn simple_agrees_with_build() {
        use crate::spec::prp::simple;
        // Every offset class and length around the one- and two-page limits.
        for addr in [0x1_0000u64, 0x1_0008, 0x1_0200, 0x1_0ff8, 0x1_0fff] {
            for len in [0u32, 1, 8, 512, 4088, 4096, 4104, 8192, 8200, 12288] {
                let (r, _) = run(&[(addr, len)], 512);
                match simple(addr, len, P) {
                    Some((prp1, prp2)) => assert_eq!(
                        r,
                        Ok(Prps {
                            prp1,
                            prp2,
                            list_entries: 0
                        }),
                        "{addr:#x} + {len}"
                    ),
                    // Refused only when it is empty or a list is needed.
                    None => assert!(
                        len == 0 || r.map(|p| p.list_entries).unwrap_or(0) > 0,
                        "{addr:#x} + {len}: {r:?}"
                    ),
                }
            }
        }
    }

    #[test]
    fn rejects_what_prps_cannot_express() {
        assert_eq!(run(&[], 8).0, Err(PrpError::Empty));
        // A middle segment not starting on a page boundary.
        assert_eq!(
            run(&[(0x1000, 4096), (0x2200, 4096)], 8).0,
            Err(PrpError::Unaligned { segment: 1 })
        );
        // A first segment ending mid-page followed by another.
        assert_eq!(
            run(&[(0x1000, 512), (0x3000, 4096)], 8).0,
            Err(PrpError::Unaligned { segment: 0 })
        );
    }
}

mod io_commands {
    use crate::spec::command::{dsm_range, io_opcode, Command};
    use crate::spec::completion::{sc, BlockError, Status};

    #[test]
    fn dsm_and_write_zeroes() {
        let d = Command::deallocate(1, 3, 0xabc000);
        assert_eq!(d.opcode(), io_opcode::DATASET_MANAGEMENT);
        assert_eq!((d.dw[10], d.dw[11]), (2, 4));
        assert_eq!(dsm_range(0x1_0000_0005, 8), [8 << 32, 0x1_0000_0005]);
        let w = Command::write_zeroes(2, 16, 65536);
        assert_eq!((w.opcode(), w.dw[1], w.dw[10], w.dw[12]), (8, 2, 16, 65535));
    }

    #[test]
    fn status_to_block_error() {
        assert_eq!(Status(0).block_error(), None);
        assert_eq!(
            Status(sc::LBA_RANGE as u16).block_error(),
            Some(BlockError::Target)
        );
        assert_eq!(
            Status(sc::INVALID_OPCODE as u16).block_error(),
            Some(BlockError::NotSupported)
        );
        assert_eq!(
            Status((2 << 8) | sc::READ_ERROR as u16).block_error(),
            Some(BlockError::Medium)
        );
        assert_eq!(
            Status((2 << 8) | 0x82).block_error(),
            Some(BlockError::Protection)
        );
        assert_eq!(
            Status((3 << 8) | 0x70).block_error(),
            Some(BlockError::Transport)
        );
        assert_eq!(
            Status(sc::INTERNAL as u16).block_error(),
            Some(BlockError::Io)
        );
        assert_eq!(
            Status(sc::CAP_EXCEEDED as u16).block_error(),
            Some(BlockError::NoSpace)
        );
    }

    #[test]
    fn host_aborted_is_retried_unless_dnr() {
        let s = Status::HOST_ABORTED;
        assert_eq!(s.block_error(), Some(BlockError::Io));
        assert!(s.retryable());
        assert_eq!(s.name(), "aborted by host");
        let d = Status::HOST_ABORTED_DNR;
        assert!(d.dnr());
        assert!(!d.retryable());
        assert_eq!(d.block_error(), Some(BlockError::Io));
    }

    /// The statuses a multipath head sends on another path (C's `nvme_is_path_error`): the
    /// path related type, the host's own aborts and path errors included, DNR or not.
    #[test]
    fn path_errors() {
        assert!(Status::HOST_ABORTED.path_error());
        assert!(Status::HOST_ABORTED_DNR.path_error());
        assert!(Status::HOST_PATH_ERROR.path_error());
        assert_eq!(Status::HOST_PATH_ERROR.0, 0x370);
        assert!(!Status(sc::READ_ERROR as u16 | 2 << 8).path_error());
        assert!(!Status(0x0004).path_error());
        // ANA Inaccessible (0x302): a path error, but the device's, not the host's.
        assert!(Status(0x302).path_error() && !Status(0x302).host_path_error());
        assert!(Status::HOST_ABORTED_DNR.host_path_error());
        assert!(Status::HOST_PATH_ERROR.host_path_error());
    }
}

mod sgl {
    use crate::spec::command::{io_opcode, Command};
    use crate::spec::sgl::{build, descriptor, SglError, TYPE_LAST_SEGMENT};

    #[test]
    fn one_segment_is_inline() {
        let mut list = vec![];
        let r = build([(0x1000u64, 8192u32)], 256, 0xbeef000, |_, d| list.push(d));
        assert_eq!(r, Ok([0x1000, 8192]));
    }

    #[test]
    fn several_segments_use_a_last_segment_descriptor() {
        let mut list = vec![[0u64; 2]; 4];
        let r = build(
            [(0x1000u64, 4096u32), (0x9200, 512), (0x20000, 65536)],
            4,
            0xbeef000,
            |i, d| list[i] = d,
        );
        let sgl1 = r.unwrap();
        assert_eq!(sgl1, [0xbeef000, 48 | (0x30u64 << 56)]);
        assert_eq!(sgl1, descriptor(0xbeef000, 48, TYPE_LAST_SEGMENT));
        assert_eq!(list[1], [0x9200, 512]);
        assert_eq!(list[2], [0x20000, 65536]);
        let c = Command::rw(io_opcode::READ, 1, 0, 8, false).with_sgl(sgl1);
        assert_eq!(c.dw[0] >> 14 & 3, 1);
        assert_eq!(
            (c.dw[6], c.dw[7], c.dw[8], c.dw[9]),
            (0xbeef000, 0, 48, 0x3000_0000)
        );
    }

    #[test]
    fn limits() {
        assert_eq!(build([], 4, 0, |_, _| {}), Err(SglError::Empty));
        let segs = (0..5).map(|i| (i * 0x10000u64, 4096u32));
        assert_eq!(
            build(segs, 4, 0, |_, _| {}),
            Err(SglError::TooManySegments { segments: 5 })
        );
    }
}

mod command_ids {
    use crate::spec::command::io_cid::*;

    #[test]
    fn tag_and_generation_round_trip() {
        for tag in [0u32, 1, 255, 4095] {
            for generation in 0..40u32 {
                let cid = encode(tag, generation);
                let (t, g) = decode(cid);
                assert_eq!(t, tag);
                assert!(current(generation, g));
                // The previous use of the same tag is recognised as stale.
                assert!(!current(generation + 1, g));
            }
        }
        assert_eq!(MAX_DEPTH, 4096);
        assert_eq!(encode(5, 0x13), 0x3005);
    }
}

mod untrusted_device_values {
    use crate::spec::identify::*;
    use crate::spec::regs::{Cap, CapError};

    const QEMU_CAP: u64 = 0x4008200f0107ff;

    #[test]
    fn cap_refusals() {
        assert_eq!(Cap(QEMU_CAP).validate(12), Ok(()));
        // MQES 0 (a one-entry queue) cannot work.
        assert_eq!(
            Cap(QEMU_CAP & !0xffff).validate(12),
            Err(CapError::QueueTooSmall { entries: 1 })
        );
        // No command set at all.
        assert_eq!(
            Cap(QEMU_CAP & !(0xffu64 << 37)).validate(12),
            Err(CapError::NoNvmCommandSet)
        );
        // MPSMIN 64 KiB on a 4 KiB-page host.
        let big = (QEMU_CAP & !(0xfu64 << 48)) | (4u64 << 48) | (4u64 << 52);
        assert!(matches!(
            Cap(big).validate(12),
            Err(CapError::PageSize { min_shift: 16, .. })
        ));
        // All ones (device gone) reads as nonsense too, but must not panic.
        let _ = Cap(u64::MAX).validate(12);
        let _ = Cap(u64::MAX).timeout_ms();
        let _ = Cap(u64::MAX).doorbell_stride();
    }

    #[test]
    fn zero_namespaces_and_lists_beyond_nn() {
        let mut out = [0u32; NS_LIST_MAX];
        let mut b = vec![0u8; IDENTIFY_SIZE];
        b[0] = 1;
        // NN = 0 but the list names namespace 1: refused.
        assert!(parse_ns_list(&b, 0, &mut out).is_err());
        // The broadcast id is never a namespace.
        b[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(parse_ns_list(&b, u32::MAX, &mut out).is_err());
    }

    #[test]
    fn every_byte_pattern_parses_or_errs() {
        // Fill identify pages with patterns; parsing may fail but never panic.
        for fill in [0u8, 0x01, 0x7f, 0x80, 0xff] {
            let b = vec![fill; IDENTIFY_SIZE];
            let _ = IdentifyController::parse(&b);
            let _ = IdentifyNamespace::parse(&b);
            let mut out = [0u32; NS_LIST_MAX];
            let _ = parse_ns_list(&b, u32::MAX, &mut out);
        }
        let mut seed = 0x1234_5678u32;
        for _ in 0..200 {
            let b: Vec<u8> = (0..IDENTIFY_SIZE)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 17;
                    seed ^= seed << 5;
                    seed as u8
                })
                .collect();
            if let Ok(id) = IdentifyController::parse(&b) {
                let _ = id.max_transfer_bytes(Cap(0));
                let _ = id.serial.as_str();
            }
            if let Ok(ns) = IdentifyNamespace::parse(&b) {
                assert!((9..=16).contains(&ns.lbaf.lbads));
                let _ = ns.capacity_bytes();
            }
        }
    }
}

/// Command effects (issue 12 item 2): Format NVM and Sanitize freeze I/O and Format
/// rescans even when the controller reports nothing; the log's own effects are added; a
/// relaxation bit or Security Receive drops CSE.
#[test]
fn command_effects_format_freezes_and_rescans() {
    use crate::spec::effects::{self as fx, EffectsLog};
    let none = fx::admin_effects(None, fx::opcode::FORMAT_NVM);
    assert!(fx::needs_freeze(none) && fx::needs_rescan(none));
    let sanitize = fx::admin_effects(None, fx::opcode::SANITIZE);
    assert!(fx::needs_freeze(sanitize) && !fx::needs_rescan(sanitize));
    let identify = fx::admin_effects(None, admin_opcode::IDENTIFY);
    assert!(!fx::needs_freeze(identify) && !fx::needs_rescan(identify));
    let attach = fx::admin_effects(None, fx::opcode::NS_ATTACHMENT);
    assert!(!fx::needs_freeze(attach) && fx::needs_rescan(attach));

    let mut log = [0u8; fx::LOG_CMD_EFFECTS_SIZE];
    // A vendor command (0xc0) that changes namespaces and must run alone.
    log[4 * 0xc0..4 * 0xc0 + 4].copy_from_slice(&(fx::CSUPP | fx::NCC | 1 << 16).to_le_bytes());
    // Security Receive claiming CSE, and Get Log Page with CSE but a relaxation bit.
    log[4 * 0x82..4 * 0x82 + 4].copy_from_slice(&(fx::CSUPP | 1 << 16).to_le_bytes());
    log[8..12].copy_from_slice(&(fx::CSUPP | 1 << 16 | 1 << 14).to_le_bytes());
    let log = EffectsLog::parse(&log).unwrap();
    let vendor = fx::admin_effects(Some(&log), 0xc0);
    assert!(fx::needs_freeze(vendor) && fx::needs_rescan(vendor));
    assert!(!fx::needs_freeze(fx::admin_effects(Some(&log), 0x82)));
    assert!(!fx::needs_freeze(fx::admin_effects(
        Some(&log),
        admin_opcode::GET_LOG_PAGE
    )));
    assert!(EffectsLog::parse(&[0u8; 1000]).is_none());
}

/// DMRSL, DMRL and WZSL (issue 12 item 8) from QEMU's NVM Identify Controller layout.
#[test]
fn nvm_identify_controller_limits() {
    let mut b = [0u8; 4096];
    assert_eq!(
        IdentifyControllerNvm::parse(&b[..100]),
        Err(IdentifyError::Truncated)
    );
    let none = IdentifyControllerNvm::parse(&b).unwrap();
    assert_eq!(none.max_range_blocks(), None);
    assert_eq!(none.max_ranges(), 256);
    assert_eq!(none.max_write_zeroes_bytes(Cap(0)), None);
    b[1] = 3; // WZSL: 8 pages
    b[3] = 16; // DMRL
    b[4..8].copy_from_slice(&4194303u32.to_le_bytes()); // QEMU's DMRSL for 512-byte blocks
    let id = IdentifyControllerNvm::parse(&b).unwrap();
    assert_eq!(id.max_range_blocks(), Some(4194303));
    assert_eq!(id.max_ranges(), 16);
    assert_eq!(id.max_write_zeroes_bytes(Cap(0)), Some(32 * 1024));
    assert_eq!(id.max_write_zeroes_bytes(Cap(1 << 48)), Some(64 * 1024));
}

/// The discard granularity from NPDG/NPDA, as the C driver derives it (compared with it on
/// QEMU in limits-*): only when NSFEAT's OPTPERF bits say the fields are valid.
#[test]
fn namespace_discard_granularity() {
    let mut id = IdentifyNamespace {
        nsze: 8,
        ncap: 8,
        nsfeat: 0,
        nlbaf: 0,
        lbaf: LbaFormat {
            ms: 0,
            lbads: 9,
            rp: 0,
        },
        lbaf_index: 0,
        extended_lba: false,
        dlfeat: 0,
        dps: 0,
        nmic: 0,
        nawupf: 0,
        npwg: 0,
        npwa: 0,
        noiob: 0,
        npdg: 7,
        npda: 3,
        nguid: [0; 16],
        eui64: [0; 8],
    };
    assert_eq!(id.discard_granularity_blocks(), 1);
    id.nsfeat = 1 << 4;
    assert_eq!(id.discard_granularity_blocks(), 8);
    id.nsfeat = 2 << 4; // NPDGL/NPDAL only: NPDA still counts, NPDG does not
    assert_eq!(id.discard_granularity_blocks(), 4);
    // Parsed from where QEMU puts them (bytes 68 and 70; NSFEAT 0x14).
    let mut b = [0u8; 4096];
    b[0] = 8;
    b[8] = 8;
    b[24] = 0x14;
    b[128..132].copy_from_slice(&(9u32 << 16).to_le_bytes());
    b[68] = 7;
    b[70] = 7;
    assert_eq!(
        IdentifyNamespace::parse(&b)
            .unwrap()
            .discard_granularity_blocks(),
        8
    );
}

/// Command Retry Delay (issue 12 item 9): CRDT1-3 from Identify Controller, Advanced Command
/// Retry asked for only when CRDT1 is set (as the C driver), and a failed command's CRD
/// naming the delay before its retry. (QEMU 7.2 reports CRDT 0 and never sets CRD, so no
/// VM scenario can show the delay.)
#[test]
fn command_retry_delay() {
    let qemu = IdentifyController::parse(&qemu_id_ctrl("rnvme-0")).unwrap();
    assert_eq!(qemu.crdt, [0, 0, 0]);
    assert!(!qemu.wants_acre());
    let mut b = qemu_id_ctrl("rnvme-0");
    put16(&mut b, 134, 5);
    put16(&mut b, 136, 20);
    put16(&mut b, 138, 600);
    let id = IdentifyController::parse(&b).unwrap();
    assert_eq!(id.crdt, [5, 20, 600]);
    assert!(id.wants_acre());
    let busy = |crd: u16| Status((crd << 11) | sc::NS_NOT_READY as u16);
    assert_eq!(retry_delay_ms(busy(0), id.crdt), 0);
    assert_eq!(retry_delay_ms(busy(1), id.crdt), 500);
    assert_eq!(retry_delay_ms(busy(2), id.crdt), 2000);
    assert_eq!(retry_delay_ms(busy(3), id.crdt), 60000);
    assert!(busy(3).retryable());
    let hb = host_behavior(true);
    assert_eq!(hb.len(), 512);
    assert_eq!(hb[0], 1);
    assert!(hb[1..].iter().all(|&x| x == 0));
    assert_eq!(host_behavior(false)[0], 0);
}

mod ns_ids {
    use crate::spec::ns_ids::NsIds;

    /// A descriptor: type, length, two reserved bytes, the value.
    fn desc(out: &mut Vec<u8>, t: u8, value: &[u8]) {
        out.extend_from_slice(&[t, value.len() as u8, 0, 0]);
        out.extend_from_slice(value);
    }

    const UUID: [u8; 16] = [
        0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd,
        0xef,
    ];
    const NGUID: [u8; 16] = [
        0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf,
        0xb0,
    ];
    const EUI64: [u8; 8] = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x78, 0x9a];

    fn text(f: impl Fn(&mut String) -> core::fmt::Result) -> String {
        let mut s = String::new();
        f(&mut s).unwrap();
        s
    }

    #[test]
    fn descriptor_list_as_qemu_sends_it() {
        let mut b = Vec::new();
        desc(&mut b, 3, &UUID);
        desc(&mut b, 1, &EUI64);
        desc(&mut b, 2, &NGUID);
        desc(&mut b, 4, &[0]);
        b.resize(4096, 0);
        let ids = NsIds::from_descriptors(&b);
        assert_eq!(
            (ids.uuid, ids.nguid, ids.eui64, ids.csi),
            (UUID, NGUID, EUI64, 0)
        );
        assert_eq!(
            text(|s| ids.write_wwid(s, 0x1b36, "s0", "QEMU", 1)),
            "uuid.12345678-9abc-def0-0123-456789abcdef\n"
        );
        assert_eq!(
            text(|s| ids.write_uuid(s)),
            "12345678-9abc-def0-0123-456789abcdef\n"
        );
        assert_eq!(
            text(|s| ids.write_nguid(s)),
            "a1a2a3a4-a5a6-a7a8-a9aa-abacadaeafb0\n"
        );
        assert_eq!(text(|s| ids.write_eui(s)), "52 54 00 12 34 56 78 9a\n");
    }

    /// Issue 17 item 1: a namespace's command set decides what rnvme makes of it, as C's
    /// nvme_scan_ns: NVM a disk; zoned a zoned disk (only the generic device in a kernel
    /// without zoned block devices), other sets reported under CC.CSS = 110b only the generic
    /// device; a set without CC.CSS = 110b, or none reported when it is, nothing.
    #[test]
    fn command_set_decides_the_namespace_kind() {
        use crate::spec::ns_ids::{csi, NsKind};
        let listed = |c: u8| {
            let mut b = Vec::new();
            desc(&mut b, 3, &UUID);
            desc(&mut b, 4, &[c]);
            b.resize(4096, 0);
            NsIds::from_descriptors(&b)
        };
        let zoned = listed(csi::ZONED);
        assert!(zoned.csi_reported && zoned.csi == csi::ZONED);
        assert_eq!(listed(csi::NVM).kind(true, true, true), NsKind::Block);
        assert_eq!(zoned.kind(true, true, true), NsKind::Zoned);
        assert_eq!(zoned.kind(true, true, false), NsKind::Passthrough);
        assert_eq!(
            listed(csi::KEY_VALUE).kind(true, true, true),
            NsKind::Passthrough
        );
        assert_eq!(zoned.kind(false, true, true), NsKind::Skip);
        // No CSI in the list: NVM unless the controller runs several command sets.
        let mut b = Vec::new();
        desc(&mut b, 3, &UUID);
        b.resize(4096, 0);
        let silent = NsIds::from_descriptors(&b);
        assert!(!silent.csi_reported);
        assert_eq!(silent.kind(false, true, true), NsKind::Block);
        assert_eq!(silent.kind(true, true, true), NsKind::Skip);
        // No list read (quirk, old version): NVM.
        assert_eq!(NsIds::default().kind(true, false, true), NsKind::Block);
    }

    #[test]
    fn bad_descriptors_end_the_walk() {
        // A known type with the wrong length: what came before stays, nothing after.
        let mut b = Vec::new();
        desc(&mut b, 1, &EUI64);
        desc(&mut b, 2, &NGUID[..8]);
        desc(&mut b, 3, &UUID);
        b.resize(4096, 0);
        let ids = NsIds::from_descriptors(&b);
        assert_eq!(
            (ids.eui64, ids.has_nguid(), ids.has_uuid()),
            (EUI64, false, false)
        );
        // An unknown type is skipped.
        let mut b = Vec::new();
        desc(&mut b, 0x7f, &[1, 2, 3]);
        desc(&mut b, 3, &UUID);
        assert_eq!(NsIds::from_descriptors(&b).uuid, UUID);
        // One running past the end, or a zero length, ends it.
        let mut b = Vec::new();
        desc(&mut b, 3, &UUID);
        assert!(!NsIds::from_descriptors(&b[..19]).has_uuid());
        assert_eq!(NsIds::from_descriptors(&[0u8; 4096]), NsIds::default());
        // Any bytes parse without a panic.
        for seed in 0..2000u32 {
            let b: Vec<u8> = (0..64u32)
                .map(|i| (seed.wrapping_mul(2654435761).wrapping_add(i * 40503) >> 13) as u8)
                .collect();
            let _ = NsIds::from_descriptors(&b);
        }
    }

    #[test]
    fn identify_fields_fill_in_by_version() {
        let mut ids = NsIds::default();
        ids.fill_from_identify(EUI64, NGUID, 0x1_00_00);
        assert_eq!(ids, NsIds::default());
        ids.fill_from_identify(EUI64, NGUID, 0x1_01_00);
        assert_eq!((ids.eui64, ids.has_nguid()), (EUI64, false));
        ids.fill_from_identify(EUI64, NGUID, 0x1_04_00);
        assert_eq!(ids.nguid, NGUID);
        // The descriptors' values win.
        let mut b = Vec::new();
        desc(&mut b, 1, &[9; 8]);
        let mut ids = NsIds::from_descriptors(&b);
        ids.fill_from_identify(EUI64, NGUID, 0x1_04_00);
        assert_eq!((ids.eui64, ids.nguid), ([9; 8], NGUID));
    }

    #[test]
    fn wwid_falls_back_as_the_c_driver() {
        let mut ids = NsIds {
            nguid: NGUID,
            eui64: EUI64,
            ..NsIds::default()
        };
        let w = |ids: &NsIds| text(|s| ids.write_wwid(s, 0x1b36, "rnvme-s0", "QEMU NVMe Ctrl", 2));
        assert_eq!(w(&ids), "eui.a1a2a3a4a5a6a7a8a9aaabacadaeafb0\n");
        // No UUID: the uuid file shows the NGUID.
        assert_eq!(
            text(|s| ids.write_uuid(s)),
            "a1a2a3a4-a5a6-a7a8-a9aa-abacadaeafb0\n"
        );
        ids.nguid = [0; 16];
        assert_eq!(w(&ids), "eui.525400123456789a\n");
        ids.eui64 = [0; 8];
        assert_eq!(
            w(&ids),
            "nvme.1b36-726e766d652d7330-51454d55204e564d65204374726c-00000002\n"
        );
    }
}

#[test]
fn identify_cns_by_version() {
    // NVMe 1.0: one bit; 1.1: two bits, unless quirked; 1.2 on: all.
    assert!(cns::supported(0x1_00_00, 1, false));
    assert!(!cns::supported(0x1_00_00, 2, false));
    assert!(cns::supported(0x1_01_00, 3, false));
    assert!(!cns::supported(0x1_01_00, 6, false));
    assert!(!cns::supported(0x1_01_00, 2, true));
    assert!(cns::supported(0x1_02_00, 6, true));
    assert!(cns::supported(0x1_04_00, 6, false));
}

mod quirks {
    use crate::spec::quirks::*;

    #[test]
    fn names_are_cs_by_bit() {
        assert_eq!(Quirks::by_name(b"bogus_nid"), Some(Quirks::BOGUS_NID));
        assert_eq!(Quirks::by_name(b"admin_page_align"), Some(Quirks(1 << 23)));
        assert_eq!(Quirks::by_name(b"stripe_size"), Some(Quirks(1)));
        assert_eq!(Quirks::by_name(b"bogus"), None);
        assert_eq!(Quirks::by_name(b"bogus_ni"), None);
        let q = Quirks::IDENTIFY_CNS
            .with(Quirks::DISABLE_WRITE_ZEROES)
            .with(Quirks::BOGUS_NID);
        assert_eq!(
            q.to_string(),
            "identify_cns\ndisable_write_zeroes\nbogus_nid\n"
        );
        assert_eq!(Quirks::empty().to_string(), "none\n");
    }

    #[test]
    fn pci_table_as_c() {
        // QEMU's two IDs.
        assert_eq!(Quirks::for_pci_id(0x1b36, 0x0010), Quirks::BOGUS_NID);
        assert_eq!(
            Quirks::for_pci_id(0x8086, 0x5845),
            Quirks::IDENTIFY_CNS
                .with(Quirks::DISABLE_WRITE_ZEROES)
                .with(Quirks::BOGUS_NID)
        );
        // The first of two entries for one ID wins, as in the PCI core.
        assert_eq!(
            Quirks::for_pci_id(0x1d97, 0x2263),
            Quirks::DISABLE_WRITE_ZEROES
        );
        assert_eq!(Quirks::for_pci_id(0x1b36, 0x0011), Quirks::empty());
        assert!(Quirks::for_pci_id(0x106b, 0x2005).0 & Quirks::REFUSED.0 != 0);
    }

    #[test]
    fn identity_table_matches_padded_strings() {
        let mut model = [b' '; 40];
        model[..23].copy_from_slice(b"Samsung Portable SSD X5");
        let fw = *b"1.0     ";
        let q = Quirks::for_identity(0x144d, &model, &fw);
        assert!(q.has(Quirks::DELAY_BEFORE_CHK_RDY));
        // A longer model is another drive.
        model[23] = b'0';
        assert_eq!(Quirks::for_identity(0x144d, &model, &fw), Quirks::empty());
        // Firmware-only entry.
        let q = Quirks::for_identity(0x14a4, &[b' '; 40], b"22301111");
        assert_eq!(q, Quirks::SIMPLE_SUSPEND);
    }

    #[test]
    fn param_syntax_as_c() {
        let all: Vec<_> =
            parse_quirk_param(b"1b36:0010:^bogus_nid,qdepth_one-8086:5845:").collect();
        assert_eq!(
            all,
            vec![
                Ok(QuirkOverride {
                    vendor: 0x1b36,
                    device: 0x10,
                    enable: Quirks::QDEPTH_ONE,
                    disable: Quirks::BOGUS_NID,
                }),
                Ok(QuirkOverride {
                    vendor: 0x8086,
                    device: 0x5845,
                    enable: Quirks::empty(),
                    disable: Quirks::empty(),
                }),
            ]
        );
        assert_eq!(parse_quirk_param(b"").count(), 0);
        // Hex with or without 0x; names end at an empty one.
        let o = find_override(b"0x1B36:10:single_vector,,bogus", 0x1b36, 0x10).unwrap();
        assert_eq!(o.enable, Quirks::SINGLE_VECTOR);
        assert_eq!(
            o.apply(Quirks::BOGUS_NID),
            Quirks::BOGUS_NID.with(Quirks::SINGLE_VECTOR)
        );
        // The first entry for an ID is the one used.
        let o = find_override(b"1:2:bogus_nid-1:2:^bogus_nid", 1, 2).unwrap();
        assert_eq!(o.enable, Quirks::BOGUS_NID);
        assert_eq!(find_override(b"1:2:bogus_nid", 1, 3), None);
    }

    #[test]
    fn param_errors() {
        let first = |s: &'static [u8]| parse_quirk_param(s).find_map(|e| e.err());
        assert_eq!(
            first(b"1b36:0010"),
            Some(QuirkParamError::NoNames(b"1b36:0010"))
        );
        assert_eq!(first(b"1b36"), Some(QuirkParamError::BadId(b"1b36")));
        assert_eq!(
            first(b"10000:1:bogus_nid"),
            Some(QuirkParamError::BadId(b"10000:1:bogus_nid"))
        );
        assert_eq!(
            first(b"xyz:1:bogus_nid"),
            Some(QuirkParamError::BadId(b"xyz:1:bogus_nid"))
        );
        assert_eq!(
            first(b"1:1:bogus"),
            Some(QuirkParamError::UnknownName(b"bogus"))
        );
        assert_eq!(first(b"1:1:^"), Some(QuirkParamError::UnknownName(b"")));
        // A trailing '-' is an empty entry: no IDs.
        assert_eq!(first(b"1:1:bogus_nid-"), Some(QuirkParamError::BadId(b"")));
        assert_eq!(
            first(b"1:1:nope").unwrap().to_string(),
            "unknown quirk \"nope\""
        );
        // An error anywhere: no override at all.
        assert_eq!(
            find_override(b"1:1:bogus_nid-1:1:nope", 1, 1).map(|_| ()),
            Some(())
        );
        assert_eq!(find_override(b"1:1:nope-1:1:bogus_nid", 1, 1), None);
    }
}

/// Passthrough access (issue 16 item 1), as C's `nvme_cmd_allowed`: reads open to anyone
/// who opened the device when the effects log lists them, writes and block-changing
/// commands only through a file opened for writing, partitions and vendor commands
/// privileged, Identify of the I/O-building CNS values open, driver-managed features closed.
#[test]
fn passthrough_access_as_c() {
    use crate::spec::access::{access, Access, IoAccess, Target};
    use crate::spec::effects::{self as fx, EffectsLog};
    let mut log = [0u8; fx::LOG_CMD_EFFECTS_SIZE];
    // QEMU's: Read, Flush supported; Write, Write Zeroes supported and change blocks;
    // Compare (05h) with a namespace-capability effect.
    let io = |log: &mut [u8], opc: usize, v: u32| {
        log[1024 + 4 * opc..1024 + 4 * opc + 4].copy_from_slice(&v.to_le_bytes())
    };
    io(&mut log, 0x02, fx::CSUPP);
    io(&mut log, 0x00, fx::CSUPP);
    io(&mut log, 0x01, fx::CSUPP | fx::LBCC);
    io(&mut log, 0x08, fx::CSUPP | fx::LBCC | 1 << 16);
    io(&mut log, 0x05, fx::CSUPP | fx::NCC);
    let log = EffectsLog::parse(&log).unwrap();
    let ns = |opc: u8, log: Option<&EffectsLog>, partition| Target::Namespace {
        effects: fx::io_effects(log, opc),
        partition,
    };
    let l = Some(&log);
    assert_eq!(access(0x02, 0, ns(0x02, l, false), false), Access::Open);
    assert_eq!(access(0x00, 0, ns(0x00, l, false), false), Access::Open);
    assert_eq!(access(0x01, 0, ns(0x01, l, false), false), Access::Admin);
    assert_eq!(access(0x01, 0, ns(0x01, l, false), true), Access::Open);
    // CSE is dropped for I/O commands; LBCC alone needs a writable file.
    assert_eq!(access(0x08, 0, ns(0x08, l, false), true), Access::Open);
    assert_eq!(access(0x08, 0, ns(0x08, l, false), false), Access::Admin);
    assert_eq!(access(0x05, 0, ns(0x05, l, false), true), Access::Admin);
    // Not in the log, no log at all, a partition, a vendor opcode: privileged.
    assert_eq!(access(0x09, 0, ns(0x09, l, false), true), Access::Admin);
    assert_eq!(access(0x02, 0, ns(0x02, None, false), true), Access::Admin);
    assert_eq!(access(0x02, 0, ns(0x02, l, true), true), Access::Admin);
    assert_eq!(access(0x81, 0, ns(0x81, l, false), true), Access::Admin);
    assert_eq!(fx::io_effects(None, 0x01), fx::LBCC);
    // Admin: Identify by CNS, Set Features by feature.
    let c = Target::Controller;
    for cns in [0u32, 1, 5, 6, 8] {
        assert_eq!(access(0x06, cns, c, false), Access::Open, "cns {cns}");
    }
    for cns in [2u32, 3, 0x10, 0x12] {
        assert_eq!(access(0x06, cns, c, true), Access::Admin, "cns {cns}");
    }
    for fid in [0x07u32, 0x0c, 0x0d, 0x0f, 0x16, 0x8000_0007] {
        assert_eq!(access(0x09, fid, c, true), Access::Never, "fid {fid:#x}");
    }
    assert_eq!(access(0x09, 0x04, c, true), Access::Admin);
    assert_eq!(access(0x02, 0, c, true), Access::Admin);
    assert_eq!(access(0x80, 0, c, true), Access::Admin);
    assert_eq!(access(0x7f, 0, c, true), Access::Admin);
    // The per-controller table answers as the rules, for every opcode, either file mode,
    // with the log and without.
    for log in [Some(&log), None] {
        let table = IoAccess::new(log);
        for opc in 0..=u8::MAX {
            for writable in [false, true] {
                assert_eq!(
                    table.get(opc, writable),
                    access(opc, 0, ns(opc, log, false), writable),
                    "opcode {opc:#x} writable {writable}"
                );
            }
        }
    }
    assert_eq!(IoAccess::new(l).get(0x02, false), Access::Open);
    assert_eq!(IoAccess::new(l).get(0x01, false), Access::Admin);
}

/// Issue 17 item 4: the Zoned Namespace command set's Identify data, commands and zone
/// reports, as C's zns.c reads and builds them.
mod zns {
    use super::*;
    use crate::spec::zns::*;

    fn id_ns_zns(zoc: u16, mar: u32, mor: u32, zsze: &[(usize, u64)]) -> Vec<u8> {
        let mut b = vec![0u8; 4096];
        put16(&mut b, 0, zoc);
        put32(&mut b, 4, mar);
        put32(&mut b, 8, mor);
        for &(i, z) in zsze {
            put64(&mut b, 2816 + 16 * i, z);
        }
        b
    }

    #[test]
    fn zone_sectors_never_wrap() {
        let z = |zone_blocks| ZoneInfo {
            zone_blocks,
            max_open: 0,
            max_active: 0,
        };
        // 4 MiB zones of 4 KiB blocks.
        assert_eq!(z(1024).zone_sectors(12), Some(8192));
        // The largest the block layer takes, and one power of two more.
        assert_eq!(z(1 << 28).zone_sectors(12), Some(1 << 31));
        assert_eq!(z(1 << 29).zone_sectors(12), None);
        // A hostile ZSZE whose sectors wrap to 0 in 64 bits (2^61 blocks of 4 KiB).
        assert_eq!(z(1 << 61).zone_sectors(12), None);
        assert_eq!(z(1 << 63).zone_sectors(9 + 8), None);
        // Blocks smaller than a sector: no such format.
        assert_eq!(z(1024).zone_sectors(8), None);
    }

    #[test]
    fn zone_info_from_identify() {
        // QEMU's zoned.zone_size=4M with 4 KiB blocks, no open/active limit (all ones).
        let b = id_ns_zns(0, u32::MAX, u32::MAX, &[(0, 2048), (1, 1024)]);
        assert_eq!(
            ZoneInfo::parse(&b, 1),
            Ok(ZoneInfo {
                zone_blocks: 1024,
                max_open: 0,
                max_active: 0
            })
        );
        // MOR/MAR are 0's based.
        let b = id_ns_zns(0, 13, 11, &[(0, 2048)]);
        assert_eq!(
            ZoneInfo::parse(&b, 0),
            Ok(ZoneInfo {
                zone_blocks: 2048,
                max_open: 12,
                max_active: 14
            })
        );
        assert_eq!(
            ZoneInfo::parse(&id_ns_zns(1, 0, 0, &[(0, 2048)]), 0),
            Err(ZnsError::Operations(1))
        );
        assert_eq!(
            ZoneInfo::parse(&id_ns_zns(0, 0, 0, &[(0, 3000)]), 0),
            Err(ZnsError::ZoneSize(3000))
        );
        assert_eq!(
            ZoneInfo::parse(&id_ns_zns(0, 0, 0, &[]), 0),
            Err(ZnsError::ZoneSize(0))
        );
        assert_eq!(ZoneInfo::parse(&b[..100], 0), Err(ZnsError::Truncated));
        // The format index is the identify's (0..=63), never past the page.
        assert!(ZoneInfo::parse(&b, 255).is_err());
    }

    #[test]
    fn zone_append_limit_in_minimum_pages() {
        let cap = Cap(0); // MPSMIN 4 KiB
        assert_eq!(zone_append_limit(&[0u8; 4096], cap), None);
        assert_eq!(zone_append_limit(&[5u8; 1], cap), Some(128 << 10));
        let cap16k = Cap(2 << 48); // MPSMIN 16 KiB
        assert_eq!(zone_append_limit(&[5u8; 1], cap16k), Some(512 << 10));
        assert_eq!(zone_append_limit(&[], cap), None);
    }

    #[test]
    fn zone_commands() {
        let c = zone_mgmt_send(3, 0x1_0000_0800, ZoneAction::Reset, false);
        assert_eq!(c.opcode(), 0x79);
        assert_eq!((c.dw[1], c.dw[10], c.dw[11], c.dw[13]), (3, 0x800, 1, 4));
        let c = zone_mgmt_send(1, 0, ZoneAction::Reset, true);
        assert_eq!(c.dw[13], 0x104);
        assert_eq!(zone_mgmt_send(1, 0, ZoneAction::Close, false).dw[13], 1);
        assert_eq!(zone_mgmt_send(1, 0, ZoneAction::Finish, false).dw[13], 2);
        assert_eq!(zone_mgmt_send(1, 0, ZoneAction::Open, false).dw[13], 3);
        let c = report_zones(2, 4096, 8192);
        assert_eq!(c.opcode(), 0x7a);
        assert_eq!(
            (c.dw[1], c.dw[10], c.dw[12], c.dw[13]),
            (2, 4096, 2047, 1 << 16)
        );
        let c = identify_ns(2);
        assert_eq!((c.dw[1], c.dw[10], c.dw[11]), (2, 5, 2 << 24));
        assert_eq!(
            (identify_ctrl().dw[10], identify_ctrl().dw[11]),
            (6, 2 << 24)
        );
    }

    #[test]
    fn zone_report_parse() {
        let mut b = vec![0u8; 64 + 3 * 64];
        put64(&mut b, 0, 2);
        for (i, (zs, zcap, zslba, wp)) in [(1u8, 1000u64, 0u64, 0u64), (0xe, 1000, 1024, 2048)]
            .iter()
            .enumerate()
        {
            let d = 64 + 64 * i;
            b[d] = 0x2;
            b[d + 1] = zs << 4;
            put64(&mut b, d + 8, *zcap);
            put64(&mut b, d + 16, *zslba);
            put64(&mut b, d + 24, *wp);
        }
        let r = ZoneReport::new(&b).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(
            r.zone(1),
            Some(ZoneDescriptor {
                zone_type: ZONE_TYPE_SEQWRITE_REQ,
                state: ZONE_STATE_FULL,
                capacity: 1000,
                start: 1024,
                wp: 2048
            })
        );
        assert_eq!(r.zone(2), None);
        // A header claiming more zones than the buffer holds: only what is there.
        put64(&mut b, 0, u64::MAX);
        assert_eq!(ZoneReport::new(&b).unwrap().len(), 3);
        assert!(ZoneReport::new(&b[..63]).is_none());
    }

    #[test]
    fn zone_resource_errors() {
        use crate::spec::completion::BlockError;
        assert_eq!(
            Status(1 << 8 | 0xbe).block_error(),
            Some(BlockError::ZoneOpenResource)
        );
        assert_eq!(
            Status(1 << 8 | 0xbd).block_error(),
            Some(BlockError::ZoneActiveResource)
        );
        // Zone Invalid Write: an I/O error.
        assert_eq!(Status(1 << 8 | 0xbc).block_error(), Some(BlockError::Io));
    }
}

/// Issue 17 item 2: metadata formats, their integrity profiles and the protection fields of
/// commands, as C's nvme_configure_metadata, nvme_init_integrity and nvme_setup_rw.
mod pi {
    use crate::spec::pi::*;

    #[test]
    fn guard_from_extended_formats() {
        let mut b = vec![0u8; 4096];
        // Format 0: 16-bit guard; 1: 64-bit (PIF 2); 2: a storage tag; 3: PIF 3 (QPIF).
        b[12 + 4..12 + 8].copy_from_slice(&(2u32 << 7).to_le_bytes());
        b[12 + 8..12 + 12].copy_from_slice(&8u32.to_le_bytes());
        b[12 + 12..12 + 16].copy_from_slice(&(3u32 << 7 | 2 << 9).to_le_bytes());
        assert_eq!(guard_from_nvm_ns(&b, 0), Guard::Crc16);
        assert_eq!(guard_from_nvm_ns(&b, 1), Guard::Crc64);
        assert_eq!(guard_from_nvm_ns(&b, 2), Guard::Unsupported);
        // Without QPIFS in PIC, PIF 3 is not a format the block layer has.
        assert_eq!(guard_from_nvm_ns(&b, 3), Guard::Unsupported);
        b[8] = 1 << 3;
        assert_eq!(guard_from_nvm_ns(&b, 3), Guard::Crc64);
        assert_eq!(guard_from_nvm_ns(&b[..100], 1), Guard::Crc16);
    }

    #[test]
    fn metadata_formats_and_modes() {
        // ms=8, no PI: opaque metadata, a "nop" profile.
        let m = Metadata::new(8, false, 0, Guard::Crc16);
        assert!(!m.has_pi());
        let Mode::Integrity(p) = m.mode(true) else {
            panic!()
        };
        assert_eq!(
            (p.csum, p.metadata_size, p.tag_size, p.ref_tag),
            (0, 8, 0, false)
        );
        assert_eq!(m.mode(false), Mode::Unservable);
        // ms=8, type 1: T10-DIF-TYPE1-CRC; PRACT without integrity support.
        let m = Metadata::new(8, false, 1, Guard::Crc16);
        assert!(m.has_pi());
        assert_eq!(
            m.mode(true),
            Mode::Integrity(Profile {
                csum: CSUM_CRC,
                metadata_size: 8,
                pi_tuple_size: 8,
                pi_offset: 0,
                tag_size: 2,
                ref_tag: true
            })
        );
        assert_eq!(m.mode(false), Mode::Pract);
        // Extended LBAs: the block layer cannot give interleaved metadata.
        assert_eq!(
            Metadata::new(8, true, 1, Guard::Crc16).mode(true),
            Mode::Pract
        );
        assert_eq!(
            Metadata::new(16, true, 1, Guard::Crc16).mode(true),
            Mode::Unservable
        );
        // ms=16, type 3, PI last: offset 8, tag space 6.
        let m = Metadata::new(16, false, 3, Guard::Crc16);
        let Mode::Integrity(p) = m.mode(true) else {
            panic!()
        };
        assert_eq!((p.pi_offset, p.tag_size, p.ref_tag), (8, 6, false));
        // PI first (DPS bit 3): offset 0.
        let Mode::Integrity(p) = Metadata::new(16, false, 1 | 8, Guard::Crc16).mode(true) else {
            panic!()
        };
        assert_eq!(p.pi_offset, 0);
        // 64-bit guard: 16 bytes of PI, CRC64.
        let m = Metadata::new(16, false, 1, Guard::Crc64);
        assert!(m.has_pi());
        let Mode::Integrity(p) = m.mode(true) else {
            panic!()
        };
        assert_eq!((p.csum, p.pi_tuple_size), (CSUM_CRC64, 16));
        // Metadata too small for its PI, reserved types, unsupported guards: opaque.
        assert_eq!(Metadata::new(8, false, 1, Guard::Crc64).pi_type, 0);
        assert_eq!(Metadata::new(8, false, 5, Guard::Crc16).pi_type, 0);
        assert_eq!(Metadata::new(8, false, 1, Guard::Unsupported).pi_type, 0);
        // More metadata than the block layer's profile holds (one byte).
        assert_eq!(
            Metadata::new(256, false, 0, Guard::Crc16).mode(true),
            Mode::Unservable
        );
        assert_eq!(
            Metadata::new(0, false, 1, Guard::Crc16).mode(true),
            Mode::Plain
        );
        assert_eq!(Metadata::new(8, false, 1, Guard::Crc16).bytes(8), 64);
    }

    #[test]
    fn command_fields() {
        let t1 = Metadata::new(8, false, 1, Guard::Crc16);
        let slba = 0x1_2345_6789;
        // PRACT and the reference tag (low 32 bits of the LBA).
        assert_eq!(
            t1.rw_fields(slba, None, false),
            PiFields {
                cdw12: prinfo::PRACT,
                cdw3: 0,
                cdw14: 0x2345_6789,
                cdw15: 0
            }
        );
        let all = Checks {
            guard: true,
            reftag: true,
            apptag: Some(0xbeef),
        };
        assert_eq!(
            t1.rw_fields(slba, Some(all), true),
            PiFields {
                cdw12: prinfo::PRCHK_GUARD
                    | prinfo::PRCHK_REF
                    | prinfo::APPEND_PIREMAP
                    | prinfo::PRCHK_APP,
                cdw3: 0,
                cdw14: 0x2345_6789,
                cdw15: 0xffff_beef
            }
        );
        assert_eq!(
            t1.rw_fields(slba, Some(Checks::default()), false),
            PiFields::default()
        );
        // 64-bit guard: a 48-bit reference tag, its upper 16 bits in CDW3.
        let t1_64 = Metadata::new(16, false, 1, Guard::Crc64);
        let f = t1_64.rw_fields(0xabcd_1234_5678_9abc, None, false);
        assert_eq!((f.cdw3, f.cdw14), (0x1234, 0x5678_9abc));
        // Type 3: no reference tag.
        let t3 = Metadata::new(8, false, 3, Guard::Crc16);
        assert_eq!(t3.rw_fields(slba, None, false).cdw14, 0);
        // Write Zeroes: PRACT for PI-only formats, nothing otherwise.
        assert_eq!(t1.write_zeroes_fields(7).cdw12, prinfo::PRACT);
        assert_eq!(
            Metadata::new(16, false, 1, Guard::Crc16).write_zeroes_fields(7),
            PiFields::default()
        );
    }

    #[test]
    fn invalid_pi_is_a_protection_error() {
        use crate::spec::completion::{BlockError, Status};
        assert_eq!(
            Status(1 << 8 | 0x81).block_error(),
            Some(BlockError::Protection)
        );
        assert_eq!(
            Status(2 << 8 | 0x82).block_error(),
            Some(BlockError::Protection)
        );
    }
}

/// The Subsystem NQN groups controllers into subsystems as C's `nvme_init_subnqn`: the
/// device's own field when set and terminated, else the made-up one from the ids, serial and
/// model (also with the quirk ignore_dev_subnqn); CMIC bit 1 and NMIC bit 0.
#[test]
fn subsystem_nqn() {
    use crate::spec::subsys::{multi_controller, shared_namespace, Nqn, NQN_SIZE};
    let mut b = qemu_id_ctrl("rnvme-0");
    pad(&mut b, 768, 0, "");
    let nqn = "nqn.2019-08.org.qemu:rnvme-shared";
    b[768..768 + nqn.len()].copy_from_slice(nqn.as_bytes());
    b[76] = 2;
    let id = IdentifyController::parse(&b).unwrap();
    assert!(multi_controller(id.cmic));
    let (own, missing) = Nqn::of(&id, false);
    assert_eq!(own.as_bytes(), nqn.as_bytes());
    assert!(!missing);
    // The quirk, and a field without its NUL, give C's made-up NQN: the ids as 8 hex
    // digits, then the serial and model fields as padded (20 and 40 bytes).
    let (made, warned) = Nqn::of(&id, true);
    assert!(!warned, "the quirk's controllers are not warned about");
    let want = format!(
        "nqn.2014.08.org.nvmexpress:1b361af4{:<20}{:<40}",
        "rnvme-0", "QEMU NVMe Ctrl"
    );
    assert_eq!(made.as_bytes(), want.as_bytes());
    b[768..768 + NQN_SIZE].fill(b'a');
    let id = IdentifyController::parse(&b).unwrap();
    let (made, missing) = Nqn::of(&id, false);
    assert_eq!(made.as_bytes(), want.as_bytes());
    assert!(
        missing,
        "a 1.4 controller without a valid SUBNQN is warned about"
    );
    assert_eq!(format!("{made}"), want);
    assert!(!multi_controller(1));
    assert!(shared_namespace(1) && !shared_namespace(2));
}
