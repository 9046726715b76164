# SPDX-License-Identifier: GPL-2.0
# I/O command sets (issue 17 item 1): two identical controllers, rnvme's and the C driver's,
# each with namespace 1 of the NVM command set and namespace 2 zoned (QEMU zoned=true,
# 4 MiB zones). Both drivers enable every command set the controller has (CC.CSS = 110b,
# in QEMU's trace); rnvme makes a disk of namespace 1 and a zoned disk of namespace 2 (the
# zoned scenario tests those), and passthrough reaches namespace 2's generic device as C's:
# the zoned Identify data, the zone report, a write at the write pointer and one elsewhere
# (Zone Invalid Write) come back as through C's generic device.
. /guest/lib.sh

assign_drivers rnvme nvme
insmod /lib/c/nvme-core.ko && insmod /lib/c/nvme.ko
if insmod /lib/rnvme.ko; then pass insmod; else abort insmod "insmod failed"; fi
require_disk rnvme_nvm_disk /dev/rnvme0n1
require_disk c_driver_nvm_disk /dev/nvme0n1
# C names its disks (and their generic devices) in scan order: find them by nsid.
czoned="" cnvm=""
for f in /sys/block/nvme0n*/nsid; do
	case $(cat $f) in 1) cnvm=${f%/nsid} ;; 2) czoned=${f%/nsid} ;; esac
done
CG=/dev/ng${czoned##*/nvme}
echo "C driver: NVM namespace $cnvm, zoned $czoned ($CG)"
wait_for 20 test -c /dev/rng0n2
# The zoned namespace: a zoned disk on both drivers, and the generic device.
wait_for 20 disk_live /dev/rnvme0n2
expect_eq c_zoned_disk host-managed "$(cat $czoned/queue/zoned 2>/dev/null)"
expect_eq zoned_disk_as_c "$(cat $czoned/queue/zoned 2>/dev/null)" \
	"$(cat /sys/block/rnvme0n2/queue/zoned 2>/dev/null)"
check zoned_generic_device test -c /dev/rng0n2
check c_zoned_generic_device test -c $CG
expect_eq nvm_disk_csi_as_c "$(cat $cnvm/csi)" "$(cat /sys/block/rnvme0n1/csi)"
# Passthrough on the zoned namespace's generic device, as through C's: the ZNS Identify
# Namespace (zone size), the zone report (every zone empty), a write at the first zone's
# write pointer (LBA 0), then one past it (LBA 64: Zone Invalid Write), and the report after.
zns() { nvme zns "$@" 2>&1; }
expect_eq zns_id_ns_as_c "$(zns id-ns $CG)" "$(zns id-ns /dev/rng0n2)"
expect_eq zns_report_as_c "$(zns report-zones $CG -d 4)" "$(zns report-zones /dev/rng0n2 -d 4)"
zns report-zones /dev/rng0n2 -d 2
head -c 4096 /dev/urandom >/tmp/data
wr() { nvme write "$1" -s "$2" -c 7 -z 4096 -d /tmp/data 2>&1 | sed "s|$1|DEV|"; }
expect_eq zoned_write_at_wp_as_c "$(wr $CG 0)" "$(wr /dev/rng0n2 0)"
expect_eq zoned_write_off_wp_as_c "$(wr $CG 64)" "$(wr /dev/rng0n2 64)"
case "$(wr /dev/rng0n2 128)" in *"ZONE_INVALID_WRITE"* | *"Invalid Write"* | *"0x1bc"* | *"0x21bc"*)
	pass zoned_write_off_wp_refused ;;
	*) fail zoned_write_off_wp_refused "$(wr /dev/rng0n2 128)" ;; esac
expect_eq zns_report_after_writes_as_c "$(zns report-zones $CG -d 2)" \
	"$(zns report-zones /dev/rng0n2 -d 2)"
nvme read /dev/rng0n2 -s 0 -c 7 -z 4096 -d /tmp/back >/dev/null 2>&1
check zoned_data_read_back cmp /tmp/data /tmp/back
# The NVM namespace works as before.
check nvm_disk_io dd if=/dev/rnvme0n1 of=/dev/null bs=64k count=16 iflag=direct
# A controller enable selects every I/O command set (CC.CSS = 110b: CC = 0x460061 with 4 KiB
# pages), not the NVM set alone (0x460001, as SeaBIOS's at boot), for rnvme as for C: each
# driver reloaded between two marks on its disk.
for d in rnvme nvme; do
	case $d in rnvme) dev=/dev/rnvme0n1 ko=/lib/rnvme.ko ;; nvme) dev=/dev/nvme0n1 ko=/lib/c/nvme.ko ;; esac
	trace_mark ${d}_reload_start $dev
	rmmod $d && insmod $ko && wait_for 20 disk_live $dev
	trace_mark ${d}_reload_end $dev
	trace_expect ${d}_enable_all_command_sets ${d}_reload_start ${d}_reload_end eq 1 \
		'config controller config=0x460061$'
	# Control: the reload writes CC (its shutdown and its enable) whatever it selects.
	trace_absent ${d}_enable_not_nvm_only ${d}_reload_start ${d}_reload_end \
		'config controller config=0x460001$' 'config controller config=0x[0-9a-f]+$'
done
# Namespace 1, the NVM one (the zoned one refuses writes off its write pointers).
image_write host_image /dev/rnvme0n1 0 1
check rmmod sh -c 'rmmod rnvme && rmmod nvme && rmmod nvme-core'
finish
