# SPDX-License-Identifier: GPL-2.0
# SR-IOV beside the C driver: two identical controllers on q35, each in an NVM subsystem of
# its own with two virtual functions (QEMU's sriov_max_vfs=2, flexible queues and vectors),
# the first on rnvme, the second on the C driver. For each driver: `sriov_numvfs` makes the
# virtual functions; Virtualization Management sent through the driver's controller device
# (nvme virt-mgmt) gives each secondary controller queues and vectors and brings it online,
# which the device's Secondary Controller List must show; each virtual function is bound
# as a controller of its own, with a disk of its own (multipath=0 on both drivers) that fio
# verifies; data written through one function is read back through the others (one shared
# namespace) and found by the host in QEMU's image; changing the count without going
# through 0 is refused (the PCI core's rule), going to 0 removes the bound functions and
# their disks while the physical function goes on; then again, and unload (kmemleak clean
# on debug).
. /guest/lib.sh

assign_drivers rnvme nvme
insmod /lib/c/nvme-core.ko multipath=0 && insmod /lib/c/nvme.ko
if insmod /lib/rnvme.ko multipath=0; then pass insmod; else abort insmod "insmod failed"; fi
RPF=$(bound_to rnvme | head -1)
CPF=$(bound_to nvme | head -1)
[ -n "$RPF" ] && [ -n "$CPF" ] || abort physical_functions_bound "rnvme: '$RPF', nvme: '$CPF'"
pass physical_functions_bound

# ctrl_dev DRV PCI: the controller device (/dev/rnvme<N>, /dev/nvme<N>) of function PCI.
ctrl_dev() {
	if [ "$1" = rnvme ]; then
		n=$(rnvme_of "$2")
		[ -n "$n" ] && echo /dev/rnvme$n
	else
		for c in /sys/bus/pci/devices/"$2"/nvme/nvme[0-9]*; do
			[ -e "$c" ] && echo "/dev/${c##*/}"
		done
	fi
}

# ns_disk DRV PCI: the disk of namespace 1 of function PCI's controller.
ns_disk() {
	local d
	for d in /sys/block/*; do
		[ "$(readlink -f "$d/device" 2>/dev/null)" = "$(readlink -f /sys/bus/pci/devices/$2)" ] ||
			[ "$(readlink -f "$d/device/device" 2>/dev/null)" = "$(readlink -f /sys/bus/pci/devices/$2)" ] ||
			continue
		[ "$(cat "$d/nsid" 2>/dev/null || cat "$d/device/nsid" 2>/dev/null)" = 1 ] || continue
		case ${d##*/} in "$1"[0-9]*n1) echo "/dev/${d##*/}" && return ;; esac
	done
}

# wait_disk DRV PCI: waits (up to 20 s) for ns_disk DRV PCI, and prints it.
wait_disk() {
	local t=200 d
	while [ $t -gt 0 ]; do
		d=$(ns_disk "$1" "$2")
		[ -n "$d" ] && disk_live "$d" && echo "$d" && return 0
		usleep 100000
		t=$((t - 1))
	done
	return 1
}

# secondary DEV SCID FIELD: FIELD (SCS, NVQ, NVI) of secondary controller SCID in the
# device's Secondary Controller List, as nvme-cli prints it (hexadecimal).
secondary() {
	nvme list-secondary "$1" 2>/dev/null | awk -v id="$(printf '0x%04x' "$2")" -v f="$3" '
		$1 == "SCID" { cur = $NF }
		$1 == f && cur == id { for (i = 2; i <= NF; i++) if ($i ~ /^0x/) { print $i; exit } }'
}

# bring_up DRV PF NAME: makes two virtual functions of PF, gives each queues and vectors
# through Virtualization Management on DRV's controller device, brings them online and binds
# them to DRV; its tests are named NAME_*.
bring_up() {
	local drv=$1 pf=$2 P=/sys/bus/pci/devices/$2 dev vf i t=$3
	dev=$(ctrl_dev "$drv" "$pf")
	echo 0 >"$P/sriov_drivers_autoprobe"
	check "${t}_sriov_numvfs_2" sh -c "echo 2 >$P/sriov_numvfs"
	expect_eq "${t}_virtual_functions" 2 "$(ls -d "$P"/virtfn* 2>/dev/null | count)"
	for i in 1 2; do
		# Queues (resource type 0: an admin and two I/O queues), vectors (type 1), online.
		check "${t}_virt_mgmt_vq_$i" nvme virt-mgmt "$dev" -c $i -r 0 -a 8 -n 3
		check "${t}_virt_mgmt_vi_$i" nvme virt-mgmt "$dev" -c $i -r 1 -a 8 -n 2
		check "${t}_virt_mgmt_online_$i" nvme virt-mgmt "$dev" -c $i -r 0 -a 9
		expect_eq "${t}_secondary_${i}_online" "0x0001 0x0003 0x0002" \
			"$(secondary "$dev" $i SCS) $(secondary "$dev" $i NVQ) $(secondary "$dev" $i NVI)"
	done
	for vf in $(vfs "$pf"); do
		echo "$drv" >"/sys/bus/pci/devices/$vf/driver_override"
		echo "$vf" >"/sys/bus/pci/drivers/$drv/bind"
	done
}

# vfs PF: the PCI addresses of PF's virtual functions.
vfs() {
	local v
	for v in /sys/bus/pci/devices/"$1"/virtfn*; do
		[ -e "$v" ] && basename "$(readlink -f "$v")"
	done
}

for drv in rnvme nvme; do
	if [ $drv = rnvme ]; then pf=$RPF; else pf=$CPF; fi
	P=/sys/bus/pci/devices/$pf
	expect_eq "${drv}_sriov_totalvfs" 2 "$(cat "$P/sriov_totalvfs" 2>&1)"
	# C adds its disks from a work item, after its probe.
	dp=$(wait_disk $drv "$pf") || abort "${drv}_pf_disk" "no disk of namespace 1 under $pf"
	trace_mark "${drv}_sriov_begin" "$dp"
	bring_up $drv "$pf" $drv
	n=0
	for vf in $(vfs "$pf"); do
		n=$((n + 1))
		expect_eq "${drv}_vf${n}_bound" "$drv" "$(basename "$(readlink -f /sys/bus/pci/devices/$vf/driver)")"
		if d=$(wait_disk $drv "$vf"); then
			pass "${drv}_vf${n}_disk"
		else
			fail "${drv}_vf${n}_disk" "no disk of namespace 1 under $vf: $(ls /sys/block | tr '\n' ' ')"
		fi
		fio_write_verify "${drv}_vf${n}_fio_verify" "$d" 8M $n 8
	done
	# One namespace behind all three functions: what one writes, the others read.
	set -- $(vfs "$pf")
	d1=$(ns_disk $drv "$1") d2=$(ns_disk $drv "$2")
	dd if=/dev/urandom of=/tmp/blk bs=1M count=1 2>/dev/null
	if dd if=/tmp/blk of="$d1" bs=1M seek=32 count=1 oflag=direct 2>/dev/null; then
		check "${drv}_vf1_data_read_by_vf2" sh -c "dd if=$d2 bs=1M skip=32 count=1 iflag=direct 2>/dev/null | cmp - /tmp/blk"
		check "${drv}_vf1_data_read_by_pf" sh -c "dd if=$dp bs=1M skip=32 count=1 iflag=direct 2>/dev/null | cmp - /tmp/blk"
	else
		fail "${drv}_vf1_data_read_by_vf2" "the write through $d1 failed"
		fail "${drv}_vf1_data_read_by_pf" "the write through $d1 failed"
	fi
	# The device saw each virtual function create its I/O queue (QEMU's trace: one Create
	# I/O Submission Queue per function's queue, three functions' worth since the mark).
	trace_mark "${drv}_sriov_up" "$dp"
	trace_expect "${drv}_vfs_created_queues" "${drv}_sriov_begin" "${drv}_sriov_up" eq 2 \
		"pci_nvme_create_sq "
	# The PCI core's rule, the same for both drivers: from 2 to 1 only through 0.
	if sh -c "echo 1 >$P/sriov_numvfs" 2>/dev/null; then
		fail "${drv}_sriov_numvfs_2_to_1_refused" "accepted"
	else
		expect_eq "${drv}_sriov_numvfs_2_to_1_refused" 2 "$(cat "$P/sriov_numvfs")"
	fi
	# Going to 0 unbinds and removes the functions (bound or not, as C's simple handler).
	check "${drv}_sriov_numvfs_0" sh -c "echo 0 >$P/sriov_numvfs"
	expect_eq "${drv}_virtual_functions_gone" "0 0" \
		"$(ls -d "$P"/virtfn* 2>/dev/null | count) $(for v in $d1 $d2; do [ -e "$v" ] && echo "$v"; done | count)"
	check "${drv}_pf_reads_after_disable" sh -c "dd if=$dp bs=1M skip=32 count=1 iflag=direct 2>/dev/null | cmp - /tmp/blk"
	# And again: the secondaries went offline with their functions (QEMU), so the same
	# steps bring them back.
	bring_up $drv "$pf" ${drv}_again
	set -- $(vfs "$pf")
	if d=$(wait_disk $drv "${1:-none}"); then
		check "${drv}_vf_again_reads" sh -c "dd if=$d bs=1M skip=32 count=1 iflag=direct 2>/dev/null | cmp - /tmp/blk"
	else
		fail "${drv}_vf_again_reads" "no disk after enabling again"
	fi
done
# The host finds data written through an rnvme virtual function in the image of QEMU's
# first controller's namespace.
image_write vf_write_in_image "$(ns_disk rnvme "$(vfs "$RPF" | head -1)")" 0 1
check rnvme_sriov_numvfs_0_at_end sh -c "echo 0 >/sys/bus/pci/devices/$RPF/sriov_numvfs"
kmemleak_plant
check rmmod rmmod rnvme
finish
