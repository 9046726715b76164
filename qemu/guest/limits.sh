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
for l in logical_block_size max_hw_sectors_kb discard_max_hw_bytes max_discard_segments \
	discard_granularity write_zeroes_max_bytes; do
	expect_eq "${l}_as_c_driver" "$(cat /sys/block/nvme0n1/queue/$l)" \
		"$(cat /sys/block/rnvme0n1/queue/$l)"
done

trace_mark discard_begin /dev/rnvme0n1
check blkdiscard_whole_disk /usr/bin/blkdiscard /dev/rnvme0n1
trace_mark discard_end /dev/rnvme0n1
trace_expect no_range_over_dmrsl discard_begin discard_end eq 0 \
	"pci_nvme_dsm_single_range_limit_exceeded"
blocks=$(($(blockdev --getsize64 /dev/rnvme0n1) / $(blockdev --getss /dev/rnvme0n1)))
trace_expect whole_disk_deallocated discard_begin discard_end sumeq $blocks \
	"pci_nvme_dsm_deallocate slba [0-9]+ nlb ([0-9]+)$"
check rmmod rmmod rnvme
finish
