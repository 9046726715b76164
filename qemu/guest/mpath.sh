# SPDX-License-Identifier: GPL-2.0
# Native multipath. Four controllers in two NVM subsystems of two controllers each
# (--subsys-pairs): controllers 0 and 1 on rnvme, 2 and 3 on the C driver (built with
# CONFIG_NVME_MULTIPATH). Namespace 1 is shared by both controllers of its subsystem,
# namespace 2 attached to the first only.
#
# Each driver makes one head disk per namespace (<drv>0n1, <drv>0n2) with a hidden path
# disk per controller (<drv>0c<C>n<N>): the same names (less the r), sizes and limits.
# Through rnvme's head: fio verify; the policies (numa: one path; round-robin: both, seen in
# the block layer's counts of the hidden path disks); under each policy, a reset of one
# path's controller, a read while that reset is held (the other path answers at once), its
# death, and the removal of a path's controller (QMP device_del) under fio verify, then
# its return (device_add), and a reset with a single path (bios wait for the controller),
# with the data read back after each; multipath=0.
. /guest/lib.sh

assign_drivers rnvme rnvme nvme
insmod /lib/c/nvme-core.ko && insmod /lib/c/nvme.ko
# rnvme's controllers bound in PCI order: the names below (subsystem 0, paths c0 and c1,
# QEMU's nvme1 as rnvme1) follow it. manyns-* loads them side by side.
check insmod insmod_in_order
require_disk head_disk /dev/rnvme0n1
require_disk private_namespace_head /dev/rnvme0n2
# C numbers a subsystem after its first controller to probe, and its heads in the order it
# found the namespaces (it probes and scans in parallel): its disks are found by nsid.
if wait_for 60 sh -c "ls /sys/block | grep -qE '^nvme[0-9]+n2\$'"; then pass c_head_disks
else abort c_head_disks "no C head disk: $(ls /sys/block | tr '\n' ' ')"; fi
# c_disk h|p NSID: C's head, or a path, of namespace NSID.
c_disk() {
	local d k
	for d in $(ls /sys/block | grep '^nvme'); do
		case $d in *c*) k=p ;; *) k=h ;; esac
		[ $k = $1 ] && [ "$(cat /sys/block/$d/nsid)" = $2 ] && echo $d && return
	done
}
# Until C has all three paths (it scans from a work item).
wait_for 60 sh -c "[ \$(ls /sys/block | grep -cE '^nvme[0-9]+c') = 3 ]"
CH=$(c_disk h 1) CH2=$(c_disk h 2) CP=$(c_disk p 1)
# reads DISK: reads completed on a disk (the block layer's count).
reads() { awk '{print $1}' /sys/block/$1/stat 2>/dev/null || echo 0; }
# ios DISK: reads and writes completed.
ios() { awk '{print $1 + $5}' /sys/block/$1/stat 2>/dev/null || echo 0; }
# bg_verify NAME DISK SECONDS: fio writes DISK in the background for SECONDS, reading back
# and checking every 64 writes as it goes (a time-based write job with --verify alone
# never reaches its verify phase).
bg_verify() {
	fio --name=$1 --filename=$2 --rw=randwrite --bs=4k --size=16M --direct=1 \
		--ioengine=io_uring --iodepth=16 --verify=crc32c --verify_backlog=64 --verify_fatal=1 \
		--time_based --runtime=$3 --output=/tmp/$1.log >/tmp/$1.err 2>&1 &
	fio_pid=$!
}
# end_verify NAME: the background fio NAME ended without an error, having read its data
# back.
end_verify() {
	wait $fio_pid
	local rc=$? why
	cat /tmp/$1.err >>/tmp/$1.log
	if why=$(fio_verified /tmp/$1.log) && [ $rc = 0 ]; then pass $1; else
		fail $1 "fio exited $rc: $why"
	fi
}
# data_kept NAME: the 1 MiB written through the head before the faults reads back the same
# (fio writes only the first 16 MiB).
data_kept() {
	dd if=/dev/rnvme0n1 of=/tmp/a.k bs=64k skip=512 count=16 iflag=direct 2>/dev/null
	cmp -s /tmp/a /tmp/a.k && pass $1 || fail $1 "read back differs"
}
# numa_path: the path (0, 1) that 200 reads through the head went to, as the block layer
# counted them on the hidden path disks; anything else says what it saw.
numa_path() {
	local p0 p1 d0 d1
	p0=$(reads rnvme0c0n1) p1=$(reads rnvme0c1n1)
	dd if=/dev/rnvme0n1 of=/dev/null bs=4k count=200 iflag=direct 2>/dev/null
	d0=$(($(reads rnvme0c0n1) - p0)) d1=$(($(reads rnvme0c1n1) - p1))
	if [ $d0 -ge 200 ] && [ $d1 = 0 ]; then echo 0
	elif [ $d1 -ge 200 ] && [ $d0 = 0 ]; then echo 1
	else echo "reads $d0 and $d1"; fi
}
# numa_to_path1 NAME: a numa head moved to path 1 (a reset of controller 0 under reads, if
# it used path 0), so that a fault of controller 1 meets the path in use.
numa_to_path1() {
	local try=0 p0
	# The reset must meet reads in flight: it waits until the reads reach path 0 (fio is
	# slow to start on the debug kernel), and is tried again if none met it.
	while [ "$(numa_path)" = 0 ] && [ $try -lt 3 ]; do
		try=$((try + 1))
		p0=$(reads rnvme0c0n1)
		fio --name=move --filename=/dev/rnvme0n1 --rw=randread --bs=4k --size=16M \
			--direct=1 --ioengine=io_uring --iodepth=8 --time_based --runtime=6 \
			--output=/tmp/move.log >/dev/null 2>&1 &
		local mover=$!
		wait_for 20 sh -c "[ \$(awk '{print \$1}' /sys/block/rnvme0c0n1/stat) -gt $((p0 + 100)) ]"
		nvme reset /dev/rnvme0
		wait $mover
	done
	expect_eq $1 1 "$(numa_path)"
}
# verify NAME DISK SECONDS: fio writes and verifies DISK; no error.
verify() {
	bg_verify "$@"
	end_verify $1
}

# --- topology, against the C driver ---------------------------------------------------------
# shape PREFIX: the driver's disks as heads and paths of namespace ids.
shape() {
	local d
	for d in $(ls /sys/block | grep "^$1"); do
		case $d in *c*) echo "path$(cat /sys/block/$d/nsid)" ;; *) echo "head$(cat /sys/block/$d/nsid)" ;; esac
	done | sort | tr '\n' ' '
}
if [ "$(shape nvme)" = "$(shape rnvme)" ]; then pass disks_as_c; else
	fail disks_as_c "C: $(ls /sys/block | grep '^nvme' | tr '\n' ' ')rnvme: $(shape rnvme)"
fi
rdisks=$(ls /sys/block | grep '^rnvme' | sed 's/^r//' | sort | tr '\n' ' ')
expect_eq disk_names "nvme0c0n1 nvme0c0n2 nvme0c1n1 nvme0n1 nvme0n2 " "$rdisks"
# The paths are hidden: no device node; the heads have one.
expect_eq paths_hidden "no no" \
	"$(test -b /dev/rnvme0c0n1 && echo yes || echo no) $(test -b /dev/rnvme0c1n1 && echo yes || echo no)"
for a in size queue/logical_block_size queue/max_hw_sectors_kb queue/discard_max_hw_bytes \
	queue/write_zeroes_max_bytes; do
	expect_eq "head_${a#queue/}_as_c" "$(cat /sys/block/$CH/$a)" "$(cat /sys/block/rnvme0n1/$a)"
done
# Segments: each driver's path has its own; each head takes its path's.
expect_eq head_max_segments_as_path \
	"$(cat /sys/block/$CP/queue/max_segments) $(cat /sys/block/rnvme0c0n1/queue/max_segments)" \
	"$(cat /sys/block/$CH/queue/max_segments) $(cat /sys/block/rnvme0n1/queue/max_segments)"
expect_eq private_head_size_as_c "$(cat /sys/block/$CH2/size)" "$(cat /sys/block/rnvme0n2/size)"
# nvme-cli through the head (an ioctl sent on a path): the namespace's identify.
expect_eq head_id_ns_as_c "$(nvme id-ns /dev/$CH | grep -E '^nsze|^lbaf')" \
	"$(nvme id-ns /dev/rnvme0n1 | grep -E '^nsze|^lbaf')"

# The namespace's identifiers on the head, as on its path (udev's by-id links name the
# head), as C's head and path.
ids() { cat /sys/block/$1/wwid /sys/block/$1/nsid /sys/block/$1/csi | tr '\n' ' '; }
expect_eq head_ids_as_path_as_c "$(ids $CP)/ $(ids rnvme0c0n1)" "$(ids $CH)/ $(ids rnvme0n1)"

# udev's /dev/disk/by-id links for the heads (udev/60-rnvme.rules; Debian's rules for C's):
# the same names, each subsystem's serial number (plain and in hex, in the wwid) set aside.
mkdir -p /etc/udev/rules.d && cp /guest/udev/60-rnvme.rules /etc/udev/rules.d/
by_id() {
	local serial=$(cat /sys/block/$1/serial 2>/dev/null || cat /sys/class/nvme/$2/serial)
	serial=$(echo $serial)
	local hex=$(printf %s "$serial" | od -An -tx1 | tr -d ' \n')
	udevadm test --action=add "/sys/block/$1" 2>/dev/null | sed -n 's/^DEVLINKS=//p' |
		tr ' ' '\n' | grep /disk/by-id/ | sed "s/$hex/HEX/; s/$serial/SERIAL/" | sort | tr '\n' ' '
}
rlinks=$(by_id rnvme0n1) clinks=$(by_id $CH $(ls /sys/class/nvme | head -1))
echo "head by-id: $rlinks"
[ $(echo $rlinks | wc -w) -ge 3 ] && pass head_by_id_links || fail head_by_id_links "$rlinks"
expect_eq head_by_id_links_as_c "$(echo "$clinks" | sed 's/nvme[0-9]*n1/nvmeSn1/g')" \
	"$(echo "$rlinks" | sed 's/nvme[0-9]*n1/nvmeSn1/g')"

# held_path_reset PREFIX POLICY: a read through the head while the controller of a path it
# uses (numa: the one in use) is held in a reset (debugfs restart_delay_ms, 6 s: the
# controller enabled, its I/O queues not back). The path is not usable: the read goes to the
# other path and completes in milliseconds, with the data written before, while the reset is
# still held; it must not wait out the reset on a path that is merely available.
held_path_reset() {
	local pre=$1 policy=$2 k=1 dbg t0 took rpid held
	[ $policy = numa ] && k=$(numa_path)
	case $k in 0 | 1) ;; *) echo "numa path: $k"; k=0 ;; esac
	dbg=/sys/kernel/debug/rnvme$k
	echo 6000 >$dbg/restart_delay_ms
	nvme reset /dev/rnvme$k >/tmp/held.out 2>&1 &
	rpid=$!
	check ${pre}path_restart_held wait_for 10 sh -c "[ \"\$(cat $dbg/restart_delay_ms)\" = 0 ]"
	t0=$(now_s)
	dd if=/dev/rnvme0n1 of=/tmp/a.h bs=64k skip=512 count=16 iflag=direct 2>/dev/null
	took=$(awk -v a="$t0" -v b="$(now_s)" 'BEGIN { printf "%.1f", b - a }')
	if kill -0 $rpid 2>/dev/null; then held=held; else held=over; fi
	cmp -s /tmp/a /tmp/a.h && same=same || same=differs
	if [ "$same $held" = "same held" ] && awk -v t="$took" 'BEGIN { exit !(t < 2) }'; then
		pass ${pre}read_beside_held_path_reset
	else
		fail ${pre}read_beside_held_path_reset "data $same, reset $held, the read took ${took}s of the 6 s hold"
	fi
	wait $rpid
	expect_eq ${pre}held_path_reset_done "0 " "$? $(cat /tmp/held.out)"
}

# --- the faults of a path, met by the policy loaded ----------------------------------------
# path_faults PREFIX POLICY: a path's controller reset under fio verify, its death, its
# removal (QMP device_del) and return, then a reset with a single path left; after each, the
# data written before it read back. Test names start with PREFIX. Under numa the head uses
# one path: each fault is made on the path it uses (numa_on_path1_*), or it would meet none.
path_faults() {
	local pre=$1 policy=$2 rc0 k bar1 io0
	# A reset of a path's controller under I/O: its bios go to the other path. Under numa
	# the reset is of the path in use, which the head then leaves.
	k=1
	[ $policy = numa ] && k=$(numa_path)
	io0=$(ios rnvme0c${k}n1)
	bg_verify ${pre}verify_across_path_reset /dev/rnvme0n1 6
	# The reset must meet I/O on the path (fio is slow to start on the debug kernel): under
	# numa a head no bio chose a path for during the reset stays on it.
	wait_for 20 sh -c "[ \$(awk '{print \$1 + \$5}' /sys/block/rnvme0c${k}n1/stat) -gt $((io0 + 100)) ]"
	check ${pre}reset_path_controller nvme reset /dev/rnvme$k
	end_verify ${pre}verify_across_path_reset
	data_kept ${pre}data_after_path_reset
	[ $policy = numa ] && expect_eq numa_left_reset_path $((1 - k)) "$(numa_path)"
	held_path_reset "$pre" $policy

	# A path's controller dies under I/O: its outstanding bios go to the other path.
	# Its BAR 0 moved out of every PCI window (as dead.sh): its registers vanish from where
	# the driver maps them, and no reset brings them back; the I/O timeouts (3 s on the
	# path) end with the controller given up, its commands taken back.
	[ $policy = numa ] && numa_to_path1 numa_on_path1_before_death
	pci1=$(basename "$(readlink -f /sys/class/misc/rnvme1/device)")
	bar1=$(pci_bar0_high $pci1)
	echo 3000 >/sys/block/rnvme0c1n1/queue/io_timeout
	bg_verify ${pre}verify_across_path_death /dev/rnvme0n1 10
	sleep 2
	rc0=$(ios rnvme0c0n1)
	pci_bar0_high $pci1 $((bar1 + 0x40))
	if wait_for 30 grep -q dead /sys/class/misc/rnvme1/state; then pass ${pre}path_controller_dead
	else fail ${pre}path_controller_dead "state $(cat /sys/class/misc/rnvme1/state)"; fi
	end_verify ${pre}verify_across_path_death
	pci_bar0_high $pci1 $bar1
	[ $(($(ios rnvme0c0n1) - rc0)) -gt 100 ] && pass ${pre}other_path_carried_io ||
		fail ${pre}other_path_carried_io "$(($(ios rnvme0c0n1) - rc0)) I/Os on it"
	expect_eq ${pre}head_kept_after_path_death yes "$(test -b /dev/rnvme0n1 && echo yes || echo no)"
	data_kept ${pre}data_after_path_death
	# Unbound and bound again, the controller is a path again.
	echo $pci1 >/sys/bus/pci/drivers/rnvme/unbind
	echo $pci1 >/sys/bus/pci/drivers/rnvme/bind
	if wait_for 30 test -e /sys/block/rnvme0c1n1; then pass ${pre}path_back_after_rebind
	else fail ${pre}path_back_after_rebind "no rnvme0c1n1"; fi

	# A path's controller removed and added back (QMP) under I/O. The C driver is unloaded
	# first (once), so the controller added back is rnvme's to probe.
	[ $policy = numa ] && numa_to_path1 numa_on_path1_before_removal
	lsmod | grep -q '^nvme ' && check rmmod_c rmmod nvme
	bg_verify ${pre}verify_across_path_removal /dev/rnvme0n1 12
	sleep 2
	hmp device_del nvme1
	if wait_for 60 sh -c '! test -e /sys/block/rnvme0c1n1'; then pass ${pre}path_removed_with_controller
	else fail ${pre}path_removed_with_controller "rnvme0c1n1 still there after 60 s"; fi
	expect_eq ${pre}head_kept_after_path_removal yes "$(test -b /dev/rnvme0n1 && echo yes || echo no)"
	# QEMU may still hold the removed controller's id for a moment: the guest asks again.
	for i in 1 2 3 4 5 6; do
		hmp device_add nvme,id=nvme1,serial=rnvme-smp0,subsys=subsys0
		wait_for 10 test -e /sys/block/rnvme0c1n1 && break
	done
	if test -e /sys/block/rnvme0c1n1; then pass ${pre}path_back_with_controller
	else fail ${pre}path_back_with_controller "no rnvme0c1n1 after device_add"; fi
	end_verify ${pre}verify_across_path_removal
	data_kept ${pre}data_after_path_removal
	rc0=$(ios rnvme0c1n1)
	verify ${pre}verify_after_path_back /dev/rnvme0n1 3
	# Round-robin takes the returned path at once; numa keeps the path it moved to.
	if [ $policy = round-robin ]; then
		[ $(($(ios rnvme0c1n1) - rc0)) -gt 100 ] && pass returned_path_used ||
			fail returned_path_used "$(($(ios rnvme0c1n1) - rc0)) I/Os on it"
	fi

	# One path left: a reset holds the bios until its controller is back.
	ctrl1=$(readlink -f /sys/class/misc/rnvme1/device 2>/dev/null)
	echo "$(basename "$ctrl1")" >/sys/bus/pci/drivers/rnvme/unbind
	wait_for 30 sh -c '! test -e /sys/block/rnvme0c1n1'
	expect_eq ${pre}single_path_left "nvme0c0n1 nvme0c0n2 nvme0n1 nvme0n2 " \
		"$(ls /sys/block | grep '^rnvme' | sed 's/^r//' | sort | tr '\n' ' ')"
	bg_verify ${pre}verify_across_single_path_reset /dev/rnvme0n1 6
	sleep 2
	check ${pre}reset_single_path nvme reset /dev/rnvme0
	end_verify ${pre}verify_across_single_path_reset
	data_kept ${pre}data_after_single_path_reset
}

# --- Format NVM under I/O through a head -----------------------------------------------------
# fio writes through the head while one controller formats the shared namespace (to the
# LBA format it has) and the head's bios go to the other controller's path (numa: the one
# in use; the format is sent through the other): fio ends without an error and the head's
# data verify afterwards, as C's.
# format_under_head_io DRIVER CHARDEV HEAD
format_under_head_io() {
	local drv=$1 ctrl=$2 head=$3 w0 f rc
	w0=$(ios "${head#/dev/}")
	fio --name=fmt --filename="$head" --rw=randwrite --bs=4k --size=16M --direct=1 \
		--ioengine=io_uring --iodepth=16 --time_based --runtime=6 \
		--output="/tmp/fmt-$drv.log" >/dev/null 2>&1 &
	f=$!
	wait_for 30 sh -c "[ \$(awk '{print \$1 + \$5}' /sys/block/${head#/dev/}/stat) -gt $((w0 + 200)) ]"
	check "${drv}_format_under_head_io" nvme format "$ctrl" -n 1 -l 0 -f
	wait $f
	rc=$?
	expect_eq "${drv}_head_io_across_format" "0 0" "$rc $(grep -cE 'err=[ ]*[1-9]' "/tmp/fmt-$drv.log")"
	fio_write_verify "${drv}_head_verifies_after_format" "$head" 4M 21
}
# rnvme's head uses path k (controller k): the format goes through the other controller.
k=$(numa_path)
case $k in 0 | 1) ;; *) echo "numa path: $k"; k=0 ;; esac
format_under_head_io rnvme /dev/rnvme$((1 - k)) /dev/rnvme0n1
# The format's window held open (debugfs effects_delay_ms: the namespaces stay frozen 6 s
# once the controller answered): a read through the head waits for it, as C freezes its
# heads for the command (nvme_mpath_start_freeze), instead of reaching the namespace through
# the other controller's path meanwhile. rnvme used to freeze only the formatting
# controller's own disks. (QEMU formats at once, and C has no hold: rnvme only.)
dbg=/sys/kernel/debug/rnvme$((1 - k))
echo 6000 >$dbg/effects_delay_ms
nvme format /dev/rnvme$((1 - k)) -n 1 -l 0 -f >/tmp/fmtw.out 2>&1 &
fp=$!
check format_window_held wait_for 10 sh -c "[ \"\$(cat $dbg/effects_delay_ms)\" = 0 ]"
# A lookup does not wait for the window: a command naming a namespace without a disk is
# refused at once (the controller's disks are looked up without the scan lock the format
# holds across its window, as C's SRCU list). rnvme used to wait for the whole window.
t0=$(now_s)
r=$(uring-cmd -i /dev/rnvme$((1 - k)) nsid 2>&1)
took=$(awk -v a="$t0" -v b="$(now_s)" 'BEGIN { printf "%.1f", b - a }')
if kill -0 $fp 2>/dev/null; then window=open; else window=closed; fi
expect_eq missing_ns_in_format_window "res=-22 res2=0" "$r"
expect_eq lookup_inside_format_window open "$window"
if awk -v t="$took" 'BEGIN { exit !(t < 1.5) }'; then pass lookup_not_behind_format
else fail lookup_not_behind_format "the command took ${took}s of the format's 6 s window"; fi
# The read's time: at least half the window (a read through a path runs in milliseconds).
t0=$(now_s)
dd if=/dev/rnvme0n1 of=/dev/null bs=4k count=1 iflag=direct 2>/dev/null
rc=$?
took=$(awk -v a="$t0" -v b="$(now_s)" 'BEGIN { printf "%.1f", b - a }')
wait $fp
expect_eq format_in_window 0 "$?"
expect_eq head_read_after_format 0 "$rc"
if awk -v t="$took" 'BEGIN { exit !(t >= 3) }'; then pass head_read_waits_for_format
else fail head_read_waits_for_format "the read through the head took ${took}s of the format's 6 s window"; fi
# C's (numa too): the controller of the path of namespace 1 a read burst does not use
# (nvme<S>c<C>n1 is controller C's).
set -- $(for d in $(ls /sys/block | grep -E '^nvme[0-9]+c[0-9]+n'); do
	[ "$(cat /sys/block/$d/nsid)" = 1 ] && echo $d; done)
r1=$(reads $1) r2=$(reads $2)
dd if=/dev/$CH of=/dev/null bs=4k count=200 iflag=direct 2>/dev/null
if [ $(($(reads $1) - r1)) -lt $(($(reads $2) - r2)) ]; then idle=$1; else idle=$2; fi
idle=${idle#nvme*c}
format_under_head_io nvme /dev/nvme${idle%%n*} /dev/$CH

# --- data, policies --------------------------------------------------------------------------
pattern() { dd if=/dev/urandom of=/tmp/$1 bs=64k count=16 2>/dev/null; }
pattern a
dd if=/tmp/a of=/dev/rnvme0n1 bs=64k seek=512 oflag=direct 2>/dev/null
dd if=/dev/rnvme0n1 of=/tmp/a.r bs=64k skip=512 count=16 iflag=direct 2>/dev/null
cmp -s /tmp/a /tmp/a.r && pass data_through_head || fail data_through_head "read back differs"
# numa (the default): one path carries everything.
p0=$(reads rnvme0c0n1) p1=$(reads rnvme0c1n1)
dd if=/dev/rnvme0n1 of=/dev/null bs=4k count=2000 iflag=direct 2>/dev/null
d0=$(($(reads rnvme0c0n1) - p0)) d1=$(($(reads rnvme0c1n1) - p1))
[ $((d0 + d1)) -ge 2000 ] && { [ $d0 = 0 ] || [ $d1 = 0 ]; } && pass numa_one_path ||
	fail numa_one_path "path reads $d0 and $d1"
verify verify_numa /dev/rnvme0n1 3
verify verify_private_ns /dev/rnvme0n2 2
path_faults numa_ numa
check rmmod_numa rmmod rnvme
check insmod_round_robin insmod_in_order iopolicy=round-robin
require_disk head_disk_round_robin /dev/rnvme0n1
p0=$(reads rnvme0c0n1) p1=$(reads rnvme0c1n1)
dd if=/dev/rnvme0n1 of=/dev/null bs=4k count=2000 iflag=direct 2>/dev/null
d0=$(($(reads rnvme0c0n1) - p0)) d1=$(($(reads rnvme0c1n1) - p1))
# Alternating: each path about half (the partition scan's reads aside).
[ $d0 -ge 900 ] && [ $d1 -ge 900 ] && pass round_robin_both_paths ||
	fail round_robin_both_paths "path reads $d0 and $d1"
# The driver's own per-queue counts agree: both controllers submitted.
s0=$(stat_sum 0 submitted) s1=$(stat_sum 1 submitted)
[ "$s0" -ge 900 ] && [ "$s1" -ge 900 ] && pass round_robin_queue_counters ||
	fail round_robin_queue_counters "submitted $s0 and $s1"
dd if=/dev/rnvme0n1 of=/tmp/a.rr bs=64k skip=512 count=16 iflag=direct 2>/dev/null
cmp -s /tmp/a /tmp/a.rr &&
	pass data_kept_across_reload || fail data_kept_across_reload "read back differs"


path_faults "" round-robin
# Through the head (one path left, controller 0): the namespace is stored with controller 0
# of subsystem 0. The multipath=0 section below only reads it.
image_write host_image /dev/rnvme0n1 0 1
check rmmod_round_robin rmmod rnvme

# --- an admin timeout inside a namespace-changed scan -----------------------------------------
# Namespace 2, controller 0's alone (its head has one path), is detached and attached again
# through the other controller of its subsystem (Namespace Attachment naming controller 0):
# controller 0 gets the namespace-changed event, and its event work scans. That scan's
# Identify (Namespace Identification Descriptors) is never sent (debugfs lose_ns_desc_lists)
# and times out after admin_timeout (3 s): the controller is disabled and a reset asked
# for, while the scan, which tolerates that failure, goes on to add the namespace's head
# disk, whose partition read waits for a live path, that is for the reset (held 3 s once
# the controller is enabled, debugfs restart_delay_ms, so the read meets it whatever the
# timing). The reset must not wait behind the scan (it used to be queued on the same work
# item: both waited for ever, as C's reset_work and scan_work never do). The head comes
# back live after the hold, with the data written before the detach, after exactly one
# enable of the controller.
assign_drivers rnvme rnvme nvme
check insmod_short_admin_timeout insmod_in_order admin_timeout=3
require_disk private_head_before_detach /dev/rnvme0n2 30
# private_paths NAME: sets P (the controller of namespace 2's one path) and O (another
# controller of subsystem 0); NAME passes, or the script gives up.
private_paths() {
	P=$(ls /sys/block | sed -n 's/^rnvme0c\([0-9]*\)n2$/\1/p')
	O=$(ls /sys/block | sed -n 's/^rnvme0c\([0-9]*\)n1$/\1/p' | grep -vx "$P" | head -1)
	if [ -n "$P" ] && [ -n "$O" ]; then pass "$1"
	else abort "$1" "path '$P', other '$O': $(ls /sys/block | tr '\n' ' ')"; fi
}
private_paths private_path_and_other_controller
# ns_attach_to SEL CNTLID: attach (SEL 0) or detach (1) namespace 2 to or from controller
# CNTLID, sent through controller $O (a raw command: nvme-cli's attach-ns also rescans).
ns_attach_to() {
	printf "\\001\\000\\$(printf %03o $(($2 & 255)))\\$(printf %03o $(($2 >> 8)))" >/tmp/cl
	dd if=/dev/zero bs=4092 count=1 >>/tmp/cl 2>/dev/null
	nvme admin-passthru /dev/rnvme$O -o 0x15 -n 2 --cdw10=$1 -l 4096 -w -i /tmp/cl >/dev/null
}
cntlid=$(cat /sys/class/misc/rnvme$P/cntlid)
dd if=/dev/urandom of=/tmp/n2 bs=64k count=16 2>/dev/null
check private_data_written dd if=/tmp/n2 of=/dev/rnvme0n2 bs=64k seek=64 oflag=direct
check detach_through_other_controller ns_attach_to 1 "$cntlid"
check private_head_gone wait_for 30 sh -c '! test -e /sys/block/rnvme0n2'
dbg=/sys/kernel/debug/rnvme$P
echo 1 >$dbg/lose_ns_desc_lists
echo 3000 >$dbg/restart_delay_ms
trace_mark scan_timeout_begin /dev/rnvme0n1
t0=$(now_s)
check attach_through_other_controller ns_attach_to 0 "$cntlid"
# Bounded: a scan that hangs in the head's partition read holds the disk's open_mutex, so
# an open of it (blockdev) would wait with it.
within head_added_across_scan_admin_timeout 90 wait_for 60 disk_live /dev/rnvme0n2
took=$(awk -v a="$t0" -v b="$(now_s)" 'BEGIN { printf "%.1f", b - a }')
echo "head disk live ${took}s after the attach"
# The controls: the lost command was taken and the reset's restart held (both knobs read
# 0), and the head was not live before the timeout and the hold had passed (3 s each).
expect_eq scan_faults_taken "0 0" "$(cat $dbg/lose_ns_desc_lists) $(cat $dbg/restart_delay_ms)"
if awk -v t="$took" 'BEGIN { exit !(t >= 6) }'; then pass head_live_after_reset_hold
else fail head_live_after_reset_hold "live ${took}s after the attach, before the admin timeout and the reset's hold"; fi
check live_after_scan_admin_timeout wait_for 30 grep -qx live /sys/class/misc/rnvme$P/state
check private_data_after_scan_admin_timeout sh -c \
	"dd if=/dev/rnvme0n2 bs=64k skip=64 count=16 iflag=direct 2>/dev/null | cmp - /tmp/n2"
trace_mark scan_timeout_end /dev/rnvme0n1
trace_expect scan_admin_timeout_resets_once scan_timeout_begin scan_timeout_end eq 1 \
	"pci_nvme_mmio_start_success"
check rmmod_after_scan_admin_timeout rmmod rnvme

# --- unbind while the reset an admin timeout asked for has not started -----------------------
# As above, but the recovery work waits 10 s before it starts the reset (debugfs
# recovery_delay_ms) and the namespace's controller is unbound meanwhile: the scan's new head waits in its
# partition read for a reset that the unbind will never let run. The controller leaving,
# its path no longer counts as one that may come back (as C's DELETING state): the read
# fails, the scan ends, and the unbind returns once the held work is done (it used to wait
# for the scan for ever). The head goes with its only path; bound again, the namespace
# reads back the data written before.
assign_drivers rnvme rnvme nvme
check insmod_unbind_in_recovery insmod_in_order admin_timeout=3
require_disk private_head_before_unbind /dev/rnvme0n2 30
private_paths private_path_before_unbind
cntlid=$(cat /sys/class/misc/rnvme$P/cntlid)
pci=$(basename "$(readlink -f /sys/class/misc/rnvme$P/device)")
check detach_before_unbind ns_attach_to 1 "$cntlid"
check head_gone_before_unbind wait_for 30 sh -c '! test -e /sys/block/rnvme0n2'
dbg=/sys/kernel/debug/rnvme$P
echo 1 >$dbg/lose_ns_desc_lists
echo 10000 >$dbg/recovery_delay_ms
check attach_before_unbind ns_attach_to 0 "$cntlid"
# The Identify timed out and the recovery work holds its reset (the knob reads 0 once it
# waits).
check reset_held_before_unbind wait_for 30 grep -qx 0 $dbg/recovery_delay_ms
# The scan went on to add the head disk, whose partition read then waits for the reset.
check head_added_before_unbind wait_for 30 test -e /sys/block/rnvme0n2
t0=$(now_s)
within unbind_beside_held_reset 60 sh -c "echo $pci >/sys/bus/pci/drivers/rnvme/unbind"
echo "unbind returned $(awk -v a="$t0" -v b="$(now_s)" 'BEGIN { printf "%.1f", b - a }')s after the hold began"
check head_gone_with_unbound_path sh -c '! test -e /sys/block/rnvme0n2'
echo "$pci" >/sys/bus/pci/drivers/rnvme/bind
check private_head_after_rebind wait_for 60 disk_live /dev/rnvme0n2
check private_data_after_unbind_in_recovery sh -c \
	"dd if=/dev/rnvme0n2 bs=64k skip=64 count=16 iflag=direct 2>/dev/null | cmp - /tmp/n2"
check rmmod_after_unbind_in_recovery rmmod rnvme

# --- multipath=0: a disk per controller, as before -----------------------------------------
assign_drivers rnvme rnvme nvme
check insmod_no_multipath insmod_in_order multipath=0
wait_for 30 disk_live /dev/rnvme1n1
expect_eq no_multipath_disks "rnvme0n1 rnvme0n2 rnvme1n1 " \
	"$(ls /sys/block | grep '^rnvme' | sort | tr '\n' ' ')"
dd if=/dev/rnvme1n1 of=/tmp/a.r1 bs=64k skip=512 count=16 iflag=direct 2>/dev/null
cmp -s /tmp/a /tmp/a.r1 &&
	pass data_through_second_controller || fail data_through_second_controller "read back differs"
check rmmod rmmod rnvme
# Refused with EINVAL (the parameter's check), not loaded, not any other failure.
out=$(insmod /lib/rnvme.ko iopolicy=fastest 2>&1)
rc=$?
if [ $rc != 0 ] && echo "$out" | grep -q 'Invalid argument' && ! lsmod | grep -q '^rnvme '; then
	pass insmod_bad_policy
else
	fail insmod_bad_policy "insmod exited $rc: $out"
fi
finish
