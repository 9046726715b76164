# SPDX-License-Identifier: GPL-2.0
# Per-command limits the controller sets in its NVM Identify Controller data (DMRSL,
# DMRL, WZSL) and the queue limits derived from them, against the C driver on an
# identical controller. QEMU reports a DMRSL (the longest Dataset Management range its
# block layer takes) and silently skips longer ranges (trace
# pci_nvme_dsm_single_range_limit_exceeded): a whole-disk discard of this 8 GiB namespace
# must reach it in ranges within DMRSL, covering every block.
. /guest/lib.sh

assign_drivers rnvme nvme
insmod /lib/c/nvme-core.ko && insmod /lib/c/nvme.ko
check insmod insmod /lib/rnvme.ko
require_disk rnvme_disk /dev/rnvme0n1
require_disk c_driver_disk /dev/nvme0n1
nvme id-ns /dev/rnvme0n1 | grep -E "^(nsfeat|npdg|npda|npwg|nawupf) "
# As C's, and as QEMU's identify data make them, so that two equal failures do not pass:
# 512-byte blocks; MDTS 7: 512 KiB; DMRSL is QEMU's largest request (INT_MAX rounded down
# to a sector: 4194303 blocks, 2147483136 bytes); the preferred deallocate granularity is
# QEMU's discard granularity, 4 KiB (NPDG 7, OPTPERF set); DMRL and WZSL a positive number.
for lw in logical_block_size=512 max_hw_sectors_kb=512 discard_max_hw_bytes=2147483136 \
	'max_discard_segments=[1-9]*' discard_granularity=4096 'write_zeroes_max_bytes=[1-9]*'; do
	l=${lw%%=*} w=${lw#*=} c=$(cat /sys/block/nvme0n1/queue/$l) r=$(cat /sys/block/rnvme0n1/queue/$l)
	case "$r" in
	$w) expect_eq "${l}_as_c_driver" "$c" "$r" ;;
	*) fail "${l}_as_c_driver" "got '$r' (C: '$c'), not $w" ;;
	esac
done

blocks=$(($(blockdev --getsize64 /dev/rnvme0n1) / $(blockdev --getss /dev/rnvme0n1)))
trace_mark discard_begin /dev/rnvme0n1
check blkdiscard_whole_disk /usr/bin/blkdiscard /dev/rnvme0n1
trace_mark discard_end /dev/rnvme0n1
# The control, in a window of its own (a range over DMRSL in the discard's is the failure):
# one range of the whole disk (QEMU's DMRSL is under 2 GiB), through passthrough; QEMU
# skips it.
trace_mark over_dmrsl_begin /dev/rnvme0n1
nvme dsm /dev/rnvme0n1 --ad --slbs=0 --blocks=$blocks >/dev/null
trace_mark over_dmrsl_end /dev/rnvme0n1
trace_absent no_range_over_dmrsl discard_begin discard_end \
	"pci_nvme_dsm_single_range_limit_exceeded" \
	"pci_nvme_dsm_single_range_limit_exceeded nlb [0-9]+ dmrsl [0-9]+$" over_dmrsl_begin over_dmrsl_end
trace_expect whole_disk_deallocated discard_begin discard_end sumeq $blocks \
	"pci_nvme_dsm_deallocate slba [0-9]+ nlb ([0-9]+)$"
check rmmod rmmod rnvme
finish
