# SPDX-License-Identifier: GPL-2.0
# System sleep under I/O: suspend to RAM, suspend to idle and hibernation's freeze/restore,
# through the kernel's pm_test ("devices": every device's suspend callback runs, then every
# resume callback, without the platform sleeping), ROUNDS times in turn, while fio writes
# and verifies on rnvme's disk and, beside it, on the C driver's identical controller (one
# system transition suspends both). Each round: the transition succeeds, fio verifies on
# both disks, and in QEMU's trace both controllers were shut down (CC.SHN, as C's simple
# suspend) and enabled again, once each, with no Abort (no I/O timed out). After all
# rounds the disk and the character device are the ones from before (a descriptor opened
# before still reads), and the controller is live. Last, a real hibernation without a
# swap device: devices frozen, the non-boot CPUs taken offline, the image created, devices
# thawed; only then does writing the image fail (no swap). fio verifies across it too, and
# both controllers were shut down and enabled once.
. /guest/lib.sh

ROUNDS=${ROUNDS:-20}
assign_drivers rnvme nvme
insmod /lib/c/nvme-core.ko && insmod /lib/c/nvme.ko
check insmod insmod /lib/rnvme.ko
require_disk rnvme_disk /dev/rnvme0n1
require_disk c_driver_disk /dev/nvme0n1

if grep -q devices /sys/power/pm_test 2>/dev/null; then pass pm_test_available; else
	abort pm_test_available "no /sys/power/pm_test (CONFIG_PM_SLEEP, CONFIG_PM_DEBUG)"
fi
# The test level waits 5 s by default before resuming: not needed here.
echo 0 >/sys/module/suspend/parameters/pm_test_delay
echo 0 >/sys/module/hibernate/parameters/pm_test_delay
echo devices >/sys/power/pm_test

exec 3</dev/rnvme0n1
dev_before=$(stat -c %t:%T /dev/rnvme0n1)
char_before=$(stat -c %t:%T /dev/rnvme0)

# writes DISK: write requests DISK has completed.
writes() { awk '{print $5}' "/sys/block/$1/stat"; }

# One transition per round: mem, freeze, disk, mem, ...
failed_sleep=0 failed_io=0 slow=0 worst=0
round=1
while [ $round -le "$ROUNDS" ]; do
	case $((round % 3)) in
	1) state=mem ;;
	2) state=freeze ;;
	0) state=disk ;;
	esac
	trace_mark "round${round}_begin" /dev/rnvme0n1
	w0=$(writes rnvme0n1) c0=$(writes nvme0n1)
	for d in rnvme0n1 nvme0n1; do
		fio --name=sleep --filename=/dev/$d --rw=randwrite --bs=4k --iodepth=32 \
			--ioengine=io_uring --direct=1 --size=16M --time_based --runtime=${FIO_S:-3} \
			--verify=crc32c --verify_backlog=64 --randseed=$round --output=/tmp/sleep-$d.log &
	done
	# The transition starts once fio has written 128 blocks on each disk, so its verify
	# backlog (every 64 writes) has read some back: on the debug kernel, fio can take most of
	# a second to start, and hibernation's image allocation most of the rest of its 3 s
	# (FIO_S: the debug kernel's run gives it 6, for a VM that shares the host with another,
	# where fio wrote about 50 blocks a second).
	if ! wait_for 30 sh -c "[ \$(awk '{print \$5}' /sys/block/rnvme0n1/stat) -ge $((w0 + 128)) ] &&
		[ \$(awk '{print \$5}' /sys/block/nvme0n1/stat) -ge $((c0 + 128)) ]"; then
		failed_io=$((failed_io + 1))
		echo "round $round: fio did not write 128 blocks on each disk before the transition"
	fi
	t0=$(date +%s)
	if ! echo $state >/sys/power/state; then
		failed_sleep=$((failed_sleep + 1))
		echo "round $round: echo $state >/sys/power/state failed"
	fi
	took=$(($(date +%s) - t0))
	[ $took -gt $worst ] && worst=$took
	wait
	for d in rnvme0n1 nvme0n1; do
		# verify_backlog: fio reads back every 64 writes as it goes, sleep or not.
		if ! fio_verified /tmp/sleep-$d.log >/dev/null ||
			! grep -q "sleep: (groupid" /tmp/sleep-$d.log; then
			failed_io=$((failed_io + 1))
			echo "round $round ($state): fio on $d: $(grep -E 'err=|verify' /tmp/sleep-$d.log | head -2)"
		fi
	done
	trace_mark "round${round}_end" /dev/rnvme0n1
	round=$((round + 1))
done
echo "$ROUNDS rounds; the longest transition took $worst s"

expect_eq every_transition_succeeded 0 $failed_sleep
expect_eq io_verifies_across_every_sleep 0 $failed_io
mark "RNVME-VERIFIED $((ROUNDS * 2 * 16))MiB"
# Both controllers (rnvme's and C's) were shut down and enabled once per round.
trace_expect both_shut_down_every_round round1_begin "round${ROUNDS}_end" eq $((ROUNDS * 2)) \
	"pci_nvme_mmio_shutdown_set"
trace_expect both_enabled_every_round round1_begin "round${ROUNDS}_end" eq $((ROUNDS * 2)) \
	"pci_nvme_mmio_start_success"
# Control: each resume's re-initialisation (Identify, Create I/O Queues, ...) is admin commands.
trace_absent no_abort_across_sleep round1_begin "round${ROUNDS}_end" \
	"pci_nvme_admin_cmd cid [0-9]+ sqid 0 opc 0x8 " "pci_nvme_admin_cmd cid [0-9]+ sqid 0 opc 0x[0-9a-f]+ "
expect_eq disk_kept "$dev_before" "$(stat -c %t:%T /dev/rnvme0n1)"
expect_eq char_device_kept "$char_before" "$(stat -c %t:%T /dev/rnvme0 2>&1)"
check descriptor_opened_before_reads dd if=/proc/self/fd/3 of=/dev/null bs=4k count=16 iflag=direct
exec 3<&-
expect_eq rnvme_live_after_sleep live "$(cat /sys/class/misc/rnvme0/state)"

# --- hibernation's freeze and thaw, for real -------------------------------------------
echo none >/sys/power/pm_test
trace_mark thaw_begin /dev/rnvme0n1
writes() { awk '{print $5}' "/sys/block/$1/stat"; }
w0_rnvme0n1=$(writes rnvme0n1) w0_nvme0n1=$(writes nvme0n1)
for d in rnvme0n1 nvme0n1; do
	fio --name=thaw --filename=/dev/$d --rw=randwrite --bs=4k --iodepth=32 \
		--ioengine=io_uring --direct=1 --size=16M --time_based --runtime=3 \
		--verify=crc32c --verify_backlog=64 --randseed=99 --output=/tmp/thaw-$d.log &
done
# The image is made while both are writing: not a fixed time after they were started
# (a slow start of fio under the debug kernel can outlast it), but once each disk
# completed 200 writes since (verify_backlog reads back every 64).
wait_for 30 sh -c "[ \$(awk '{print \$5}' /sys/block/rnvme0n1/stat) -ge $((w0_rnvme0n1 + 200)) ] &&
	[ \$(awk '{print \$5}' /sys/block/nvme0n1/stat) -ge $((w0_nvme0n1 + 200)) ]" ||
	echo "thaw: fewer than 200 writes on a disk after 30 s"
echo "thaw: writes before the image: rnvme0n1 $(($(writes rnvme0n1) - w0_rnvme0n1)), nvme0n1 $(($(writes nvme0n1) - w0_nvme0n1))"
echo disk >/sys/power/state 2>/dev/null
wait
expect_eq image_created_then_thawed 1 "$(dmesg | grep -c 'Cannot find swap device')"
bad=0
for d in rnvme0n1 nvme0n1; do
	if ! fio_verified /tmp/thaw-$d.log >/dev/null || ! grep -q "thaw: (groupid" /tmp/thaw-$d.log; then
		bad=$((bad + 1))
		echo "thaw: fio on $d: $(grep -E 'err=|verify|ios=' /tmp/thaw-$d.log | head -3)"
	fi
done
expect_eq io_verifies_across_freeze_and_thaw 0 $bad
trace_mark thaw_end /dev/rnvme0n1
trace_expect both_shut_down_for_the_image thaw_begin thaw_end eq 2 "pci_nvme_mmio_shutdown_set"
trace_expect both_enabled_after_thaw thaw_begin thaw_end eq 2 "pci_nvme_mmio_start_success"
expect_eq rnvme_live_after_thaw live "$(cat /sys/class/misc/rnvme0/state)"
image_write host_image /dev/rnvme0n1 0 1
check rmmod rmmod rnvme
finish
