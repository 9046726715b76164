# SPDX-License-Identifier: GPL-2.0
# PCI error recovery, on a q35 machine where each controller sits below a PCIe root port of
# its own: QEMU injects AER errors (pcie_aer_inject_error, asked of the host through
# RNVME-HMP lines) at the root port above rnvme's controller (QEMU's NVMe controller has no
# AER capability of its own; the port reports errors on its link, and recovery runs on
# every device below it) and, the same, above the C driver's identical one, each while fio
# writes and verifies 32 deep:
#   correctable (Receiver Error, then Bad TLP): the link corrected them, nothing is to be
#     recovered: the port counts each, no driver is called (neither rnvme nor C has a
#     cor_error_detected), no reset. QEMU drops correctable error messages on their way up
#     (pcie_aer_msg_alldev passes only uncorrectable ones), so these come from the kernel's
#     software injector (aer_inject.ko) instead, which fakes the port's AER registers until
#     it is unloaded: it is unloaded before QEMU injects the others;
#   uncorrectable non-fatal (Poisoned TLP): the link works: error_detected says it can
#     recover, and rnvme's mmio_enabled finds the controller healthy (C has none: the same
#     outcome), no reset;
#   uncorrectable fatal (Data Link Protocol Error): the link is frozen, the AER driver
#     resets the port's secondary bus, and the driver brings the controller back from
#     slot_reset: enabled exactly once.
# For each: the port's AER counter counts it, the AER driver reports the recovery
# successful, fio verifies, no Abort reaches the device (no I/O timed out), and the
# controller is enabled as many times as said (QEMU's trace). Then a secondary bus reset
# through sysfs (reset_method "bus") under fio: the function reset hooks on a bus reset.
# Last, a controller that does not come back from the slot reset (rnvme only).
. /guest/lib.sh

# Controllers 0 and 1 below ports that recover, 2 below a port whose bus reset fails.
assign_drivers rnvme nvme rnvme
insmod /lib/c/nvme-core.ko && insmod /lib/c/nvme.ko
check insmod insmod /lib/rnvme.ko
# rnvme's two controllers probe side by side: their instances are found from their PCI
# functions (A below rp0, B below rp2).
A=$(rnvme_of "$(bound_to rnvme | sed -n 1p)")
B=$(rnvme_of "$(bound_to rnvme | sed -n 2p)")
require_disk rnvme_disk "/dev/rnvme${A:-X}n1"
require_disk c_driver_disk /dev/nvme0n1
require_disk rnvme_disk_unrecoverable "/dev/rnvme${B:-X}n1"

# The probe says each controller's PCIe link, and names what limits it when it runs below
# the device's capability (controller 2's port trains at its default speed, the others at
# 5 GT/s): the line must agree with the link the PCI core reads.
n=0
for pci in $(bound_to rnvme); do
	n=$((n + 1))
	d=/sys/bus/pci/devices/$pci
	line=$(dmesg | grep "$pci: .*available PCIe bandwidth" | tail -1)
	if [ -z "$line" ]; then
		fail "link_status_logged_$n" "no link line for $pci"
		continue
	fi
	pass "link_status_logged_$n"
	if [ "$(cat $d/current_link_speed)" = "$(cat $d/max_link_speed)" ] &&
		[ "$(cat $d/current_link_width)" = "$(cat $d/max_link_width)" ]; then
		want=full
	else
		want=limited
	fi
	case "$line" in *"limited by"*) got=limited ;; *) got=full ;; esac
	if [ "$want" = "$got" ]; then pass "link_status_as_pci_core_$n"; else
		fail "link_status_as_pci_core_$n" "link $(cat $d/current_link_speed) x$(cat $d/current_link_width) of $(cat $d/max_link_speed) x$(cat $d/max_link_width), logged: $line"
	fi
done


# aer_count PCI KIND: the AER counter of KIND (correctable, nonfatal, fatal) of the port
# above PCI.
port_of() { basename "$(readlink -f "/sys/bus/pci/devices/$1/..")"; }
aer_count() {
	awk '$1 ~ /^TOTAL_ERR/ { print $2 }' "/sys/bus/pci/devices/$(port_of "$1")/aer_dev_$2" 2>/dev/null
}

# io_across NAME DRIVER DISK CMD...: fio writes and verifies on DISK, 32 deep, for 6 s;
# CMD runs 2 s in. NAME passes if fio verified everything.
io_across() {
	local name=$1 drv=$2 disk=$3
	shift 3
	fio --name=aer --filename="$disk" --rw=randwrite --bs=4k --iodepth=32 --ioengine=io_uring \
		--direct=1 --size=32M --time_based --runtime=6 --verify=crc32c --verify_backlog=64 --randseed=13 \
		--output="/tmp/aer-$drv.log" &
	local fio=$! t0
	sleep 2
	t0=$(date +%s)
	"$@"
	wait $fio
	local rc=$?
	echo "$name: fio exited $rc, $(($(date +%s) - t0)) s after the event"
	# verify_backlog: fio reads back every 64 writes as it goes.
	local why
	if why=$(fio_verified "/tmp/aer-$drv.log") && [ $rc -eq 0 ]; then
		pass "$name"
	else
		fail "$name" "fio exited $rc: $why"
	fi
}

# recoveries: how many recoveries the AER driver reported as over, and how.
recoveries() { dmesg | grep -cE "device recovery (successful|failed)" || true; }
recovered() { dmesg | grep -c "device recovery successful" || true; }

# aer_case DRIVER PORT-QEMU-ID DISK CHARDEV KIND FLAG ERROR ENABLES
aer_case() {
	local drv=$1 id=$2 disk=$3 kind=$5 pci port before rec ok
	pci=$(bound_to "$drv" | head -1)
	port=$(port_of "$pci")
	before=$(aer_count "$pci" "$kind")
	rec=$(recoveries)
	ok=$(recovered)
	trace_mark "${drv}_${kind}_begin" "$disk"
	nvme id-ctrl "$4" >/dev/null # an admin command in the window (the no-Abort control)
	io_across "${drv}_io_verifies_across_${kind}_error" "$drv" "$disk" \
		hmp pcie_aer_inject_error $6 "$id" "$7"
	wait_for 30 sh -c "[ \"\$(awk '\$1 ~ /^TOTAL_ERR/ { print \$2 }' /sys/bus/pci/devices/$port/aer_dev_$kind)\" -gt ${before:-0} ]" &&
		pass "${drv}_${kind}_error_reported" ||
		fail "${drv}_${kind}_error_reported" "aer_dev_$kind still ${before:-missing}: $(cat /sys/bus/pci/devices/$port/aer_dev_$kind | tr '\n' ' ')"
	# Wait for the AER driver's verdict before the next error.
	wait_for 60 sh -c "[ \$(dmesg | grep -cE 'device recovery (successful|failed)') -gt $rec ]"
	expect_eq "${drv}_recovers_from_${kind}_error" $((ok + 1)) "$(recovered)"
	trace_mark "${drv}_${kind}_end" "$disk"
	trace_absent "${drv}_no_abort_across_${kind}_error" "${drv}_${kind}_begin" "${drv}_${kind}_end" \
		"pci_nvme_admin_cmd cid [0-9]+ sqid 0 opc 0x8 " "pci_nvme_admin_cmd cid [0-9]+ sqid 0 opc 0x[0-9a-f]+ "
	# No enable at all is an absence: its control is the boot's enables.
	mark "RNVME-TRACE-CONTROL ${drv}_enabled_$8_times_after_${kind}_error start end pci_nvme_mmio_start_success"
	trace_expect "${drv}_enabled_$8_times_after_${kind}_error" "${drv}_${kind}_begin" \
		"${drv}_${kind}_end" eq "$8" "pci_nvme_mmio_start_success"
	[ -e "$4" ] && pass "${drv}_chardev_kept_after_${kind}_error" ||
		fail "${drv}_chardev_kept_after_${kind}_error" "no $4"
}

# cor_count PORT NAME: the port's count of correctable errors named NAME (RxErr, BadTLP,
# TOTAL_ERR_COR).
cor_count() {
	awk -v n="$2" '$1 == n { print $2 }' "/sys/bus/pci/devices/$1/aer_dev_correctable" 2>/dev/null
}

# cor_errors PORT: a Receiver Error, then a Bad TLP, reported by PORT through the software
# injector, the second once the first was counted (two at once would be one message).
cor_counted() { [ "$(cor_count "$1" TOTAL_ERR_COR)" -gt "$2" ]; }
cor_errors() {
	local c0 s t0
	for s in 0x1 0x40; do
		c0=$(cor_count "$1" TOTAL_ERR_COR)
		t0=$(uptime_cs)
		aer-inject "$1" cor "$s" || return 1
		wait_for 10 cor_counted "$1" "${c0:-0}" || return 1
		echo "correctable error $s at $1 counted $((($(uptime_cs) - t0) * 10)) ms after it was injected"
	done
}

# cor_case DRIVER DISK CHARDEV: correctable errors at the port above DRIVER's controller
# while fio writes and verifies on DISK: counted by kind, no recovery run, no reset, no
# Abort (no I/O timed out), fio verifies.
cor_case() {
	local drv=$1 disk=$2 pci port rx bad rec
	pci=$(bound_to "$drv" | head -1)
	port=$(port_of "$pci")
	rx=$(cor_count "$port" RxErr)
	bad=$(cor_count "$port" BadTLP)
	rec=$(recoveries)
	trace_mark "${drv}_correctable_begin" "$disk"
	nvme id-ctrl "$3" >/dev/null # an admin command in the window (the no-Abort control)
	io_across "${drv}_io_verifies_across_correctable_errors" "$drv" "$disk" cor_errors "$port"
	expect_eq "${drv}_receiver_error_counted" "$((${rx:-0} + 1))" "$(cor_count "$port" RxErr)"
	expect_eq "${drv}_bad_tlp_counted" "$((${bad:-0} + 1))" "$(cor_count "$port" BadTLP)"
	expect_eq "${drv}_no_recovery_for_correctable_errors" "$rec" "$(recoveries)"
	trace_mark "${drv}_correctable_end" "$disk"
	trace_absent "${drv}_no_abort_across_correctable_errors" "${drv}_correctable_begin" \
		"${drv}_correctable_end" "pci_nvme_admin_cmd cid [0-9]+ sqid 0 opc 0x8 " \
		"pci_nvme_admin_cmd cid [0-9]+ sqid 0 opc 0x[0-9a-f]+ "
	# An enable in the window would be the failure: the control is the boot's enables.
	trace_absent "${drv}_no_reset_for_correctable_errors" "${drv}_correctable_begin" \
		"${drv}_correctable_end" "pci_nvme_mmio_start_success" "pci_nvme_mmio_start_success" start end
	[ -e "$3" ] && pass "${drv}_chardev_kept_after_correctable_errors" ||
		fail "${drv}_chardev_kept_after_correctable_errors" "no $3"
}

check insmod_aer_inject insmod /lib/c/aer_inject.ko
cor_case rnvme /dev/rnvme${A}n1 /dev/rnvme${A}
cor_case nvme /dev/nvme0n1 /dev/nvme0
expect_eq rnvme_live_after_correctable_errors live "$(cat /sys/class/misc/rnvme${A}/state)"
check rmmod_aer_inject rmmod aer_inject

for drv in rnvme nvme; do
	if [ $drv = rnvme ]; then set -- rp0 /dev/rnvme${A}n1 /dev/rnvme${A}; else
		set -- rp1 /dev/nvme0n1 /dev/nvme0
	fi
	aer_case $drv "$1" "$2" "$3" nonfatal "" POISON_TLP 0
	aer_case $drv "$1" "$2" "$3" fatal "" DLP 1
done
expect_eq rnvme_live_after_errors live "$(cat /sys/class/misc/rnvme${A}/state)"

# --- secondary bus reset through sysfs --------------------------------------------------
for drv in rnvme nvme; do
	pci=$(bound_to "$drv" | head -1)
	disk=/dev/rnvme${A}n1
	[ $drv = nvme ] && disk=/dev/nvme0n1
	if echo bus >"/sys/bus/pci/devices/$pci/reset_method"; then
		pass "${drv}_bus_reset_method"
	else
		fail "${drv}_bus_reset_method" "cannot select bus reset"
	fi
	trace_mark "${drv}_sbr_begin" "$disk"
	nvme id-ctrl "${disk%n1}" >/dev/null # an admin command in the window (the no-Abort control)
	io_across "${drv}_io_verifies_across_bus_reset" "$drv" "$disk" \
		sh -c "echo 1 >/sys/bus/pci/devices/$pci/reset"
	trace_mark "${drv}_sbr_end" "$disk"
	trace_absent "${drv}_no_abort_across_bus_reset" "${drv}_sbr_begin" "${drv}_sbr_end" \
		"pci_nvme_admin_cmd cid [0-9]+ sqid 0 opc 0x8 " "pci_nvme_admin_cmd cid [0-9]+ sqid 0 opc 0x[0-9a-f]+ "
	trace_expect "${drv}_enabled_once_after_bus_reset" "${drv}_sbr_begin" "${drv}_sbr_end" eq 1 \
		"pci_nvme_mmio_start_success"
done
expect_eq rnvme_live_at_end live "$(cat /sys/class/misc/rnvme${A}/state)"
# Controller 0 (rnvme$A), before give_up below leaves it dead for good.
image_write host_image /dev/rnvme${A}n1 0 1

# --- where recovery fails --------------------------------------------------------------
# give_up DRIVER PORT DISK STATE-FILE TEST-PREFIX [parked]: a fatal error under fio on DISK
# that the recovery cannot undo. The AER driver reports the recovery failed; the disk is marked dead
# (capacity 0) or removed; no read returns data that is not the disk's: fio reads a pattern
# written first and checks every read it completes (a read the driver held and then ended
# as done without the device would fail that), and a new direct read returns no data
# within 10 s; fio, asked to stop, stops within 20 s (I/O held in the driver for good would
# keep it waiting: the C driver's case, below). Whether fio saw an EIO of its own depends on
# timing: reads held when the controller died fail, but after the disk is dead the block
# layer answers reads as end of device. With "parked", a one-at-a-time reader beside it
# must see its read, parked by the hold, fail at the give-up.
PATTERN=0x5aa5c33c
# bad_data TEST-PREFIX [show]: whether fio found a read whose data was not the pattern (its
# verify errors, EILSEQ); with "show", the first such line.
bad_data() {
	if [ "${2:-}" = show ]; then
		cat "/tmp/aer-$1.log" "/tmp/aer-$1.err" 2>/dev/null | grep -m1 -E "bad pattern|verify: bad|err= *84"
		# The whole report, and the first bytes of what the bad read received, in the log.
		cat "/tmp/aer-$1.log" "/tmp/aer-$1.err" 2>/dev/null | grep -E "fio:|verify|offset" >&2
		for f in "/tmp/aer-$1.dump"/*received*; do
			[ -f "$f" ] && echo "$f:" >&2 && od -A d -t x1 "$f" | head -8 >&2
		done
	else
		cat "/tmp/aer-$1.log" "/tmp/aer-$1.err" 2>/dev/null | grep -qE "bad pattern|verify: bad|err= *84"
	fi
}
give_up() {
	local drv=$1 port=$2 disk=$3 t=$5 parked=${6:-} rec fio took n dd filled=yes started=yes r0
	local b=${disk#/dev/} reader
	fio --name=fill --filename="$disk" --rw=write --bs=1M --size=16M --ioengine=psync \
		--direct=1 --verify=pattern --verify_pattern=$PATTERN --do_verify=0 \
		--output="/tmp/aer-$t-fill.log" || filled=no
	rec=$(recoveries)
	r0=$(awk '{print $1}' "/sys/block/$b/stat")
	# verify_dump: a bad read leaves the block fio received in the directory.
	rm -rf "/tmp/aer-$t.dump" && mkdir "/tmp/aer-$t.dump"
	(cd "/tmp/aer-$t.dump" && exec fio --name=dead --filename="$disk" --rw=randread --bs=4k \
		--iodepth=32 --ioengine=io_uring --direct=1 --size=16M --time_based --runtime=120 \
		--verify=pattern --verify_pattern=$PATTERN --verify_fatal=1 --verify_dump=1 \
		--output="/tmp/aer-$t.log" 2>"/tmp/aer-$t.err") &
	fio=$!
	# PARKED: a reader of one 4 KiB read at a time (psync) beside it. Its read out when the
	# link freezes, or the next one it sends, waits in the driver through the hold (the
	# queues stopped); the give-up must end it with an error. (Whether the deep fio's own
	# reads were in the driver or already answered at that moment is timing.)
	if [ -n "$parked" ]; then
		fio --name=parked --filename="$disk" --rw=randread --bs=4k --ioengine=psync \
			--direct=1 --size=16M --time_based --runtime=120 \
			--output="/tmp/aer-$t-parked.log" >"/tmp/aer-$t-parked.err" 2>&1 &
		reader=$!
	fi
	# Once the disk is dead, the block layer answers a read as end of device (0 bytes) and
	# fio checks its buffer anyway: each of fio's buffers must hold the pattern before the
	# error, or an untouched one reads as bad data that no device sent. So the error comes
	# once fio completed 1000 reads (its 32 buffers each filled many times over), not after
	# a fixed time a slow start may outlast.
	wait_for 60 sh -c "[ \$(awk '{print \$1}' /sys/block/$b/stat) -ge $((r0 + 1000)) ]" ||
		started=no
	echo "$t: $(($(awk '{print $1}' "/sys/block/$b/stat") - r0)) reads completed before the error"
	bad_data "$t" && echo "$t: fio found bad data before the error was injected"
	hmp pcie_aer_inject_error "$port" DLP
	wait_for 60 sh -c "[ \$(dmesg | grep -cE 'device recovery (successful|failed)') -gt $rec ]"
	expect_eq "${t}_recovery_reported_failed" 1 \
		"$(dmesg | grep -E 'device recovery (successful|failed)' | tail -n +$((rec + 1)) | grep -c failed)"
	wait_for 30 sh -c "[ ! -e /sys/block/$b ] || [ \"\$(cat /sys/block/$b/size)\" = 0 ]"
	local size
	size=$(cat "/sys/block/$b/size" 2>/dev/null || echo removed)
	[ "$size" = 0 ] || [ "$size" = removed ] && pass "${t}_disk_dead_or_removed" ||
		fail "${t}_disk_dead_or_removed" "$b: size $size"
	if [ -n "$parked" ]; then
		if ! wait_for 10 ended $reader; then
			fail "${t}_parked_read_fails" "the reader still waits 10 s after the give-up: its read stays parked"
		else
			wait $reader
			n=$?
			if cat "/tmp/aer-$t-parked.log" "/tmp/aer-$t-parked.err" | grep -q "Input/output error"; then
				pass "${t}_parked_read_fails"
			else
				fail "${t}_parked_read_fails" "the reader exited $n without an I/O error: $(grep -m1 'err=' "/tmp/aer-$t-parked.log")"
			fi
		fi
	fi
	# A new read, in the background: one blocked for good cannot hold up the script.
	rm -f /tmp/aer-read
	dd if="$disk" of=/tmp/aer-read bs=4k count=1 iflag=direct 2>/dev/null &
	dd=$!
	wait_for 10 sh -c "! kill -0 $dd"
	n=$(wc -c </tmp/aer-read 2>/dev/null || echo 0)
	if [ $filled = no ]; then
		fail "${t}_io_fails" "could not write the pattern first"
	elif [ $started = no ]; then
		fail "${t}_io_fails" "fio completed fewer than 1000 reads in 60 s before the error"
	elif kill -0 $dd 2>/dev/null; then
		fail "${t}_io_fails" "a new read still blocked after 10 s"
	elif bad_data "$t"; then
		fail "${t}_io_fails" "fio read data that is not the disk's: $(bad_data "$t" show)"
	elif [ "$n" != 0 ]; then
		fail "${t}_io_fails" "a new read returned $n bytes"
	else
		pass "${t}_io_fails"
	fi
	t0=$(date +%s)
	kill -INT $fio 2>/dev/null
	wait_for 20 sh -c "! kill -0 $fio"
	took=$(($(date +%s) - t0))
	if kill -0 $fio 2>/dev/null; then
		fail "${t}_io_ends_promptly" "fio still running $took s after SIGINT"
	else
		wait $fio
		echo "$t: fio stopped $took s after it was asked (exit $?); $(grep -m1 -E 'err=' "/tmp/aer-$t.log")"
		bad_data "$t" && fail "${t}_io_ends_promptly" "fio read data that is not the disk's" ||
			pass "${t}_io_ends_promptly"
	fi
	[ -n "$4" ] && expect_eq "${t}_controller_dead" dead "$(cat "$4")"
}

# The PCI core gives up (the port's bus reset fails): error_detected(perm_failure) after
# the frozen link was held. The C driver is not run here: its queues stay frozen for good
# (nvme_dev_disable started the freeze; nothing ends it after perm_failure), so its I/O
# blocks forever in __bio_queue_enter (hung task reports after 61 s: measured once, with
# nvme1n1 on port rp3).
give_up rnvme rp2 /dev/rnvme${B}n1 /sys/class/misc/rnvme${B}/state rnvme_port_reset_fails parked

# The driver gives up: a controller that does not come back from the slot reset (debugfs
# fail_restart: the restart fails as if the controller stayed down). rnvme only: nothing
# makes the C driver's reset fail here; it gives up the same way (nvme_remove_dead_ctrl).
grep -q ' /sys/kernel/debug ' /proc/mounts || mount -t debugfs none /sys/kernel/debug
echo 1 >/sys/kernel/debug/rnvme${A}/fail_restart
give_up rnvme rp0 /dev/rnvme${A}n1 /sys/class/misc/rnvme${A}/state rnvme_restart_fails
# The dead disks' held I/O has ended: nothing keeps their removal waiting.
within rmmod 60 rmmod rnvme
finish
