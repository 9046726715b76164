# SPDX-License-Identifier: GPL-2.0
# A controller that stops answering while fio runs on it: the guest moves its BAR 0 far
# above every PCI window (the upper address dword, behind the PCI core's back), so its
# registers and doorbells vanish from where the driver maps them (reads give all ones or
# zeroes, writes are dropped) and no reset brings them back (neither C's nor rnvme's
# touches a BAR; both turn Memory Space Enable back on, which a briefer hiccup below
# clears). Every outstanding and later I/O must fail with an error within seconds, nothing
# may hang, the device must unbind cleanly, and once the BAR is back a new bind must bring
# it back.
# Namespace 2 holds a mounted, idle ext4: once the controller is dead its disks are marked
# dead as the C driver does (capacity 0, the file system shut down), not left full-size.
. /guest/lib.sh

# rescan_timed_out NAME: the background rescan ($rescan, started at $rescan_start) failed,
# and no sooner than the admin timeout (3 s) after it started: its Identify, which the
# device never saw (Memory Space Enable was off), timed out; an error returned at once (or
# a rescan that waited for nothing) fails. The driver's log says which Identify it was.
rescan_timed_out() {
	local rc took
	wait $rescan
	rc=$?
	took=$(awk -v a=$rescan_start -v b=$(now_s) 'BEGIN { printf "%.2f", b - a }')
	if [ $rc = 0 ]; then
		fail $1 "the rescan succeeded"
	elif awk -v t=$took 'BEGIN { exit !(t >= 3) }'; then
		pass $1
	else
		fail $1 "the rescan failed after ${took}s, before the admin timeout: $(dmesg | grep -i 'failed' | tail -2)"
	fi
	dmesg | grep -E 'Identify[A-Za-z ]* failed' | tail -1
}

check insmod insmod /lib/rnvme.ko admin_timeout=3
require_disk disk_ready /dev/rnvme0n2
mkfs.ext4 -q -F /dev/rnvme0n2 && mkdir -p /mnt/fs && mount -t ext4 /dev/rnvme0n2 /mnt/fs &&
	echo data >/mnt/fs/before && sync && pass ext4_mounted || fail ext4_mounted "mkfs or mount failed"
pci=$(bound_to rnvme | head -1)
cmd=$(pci_command $pci)
echo "PCI command register: $(printf %#x $cmd)"

# --- an admin command of the driver times out ----------------------------------------------
# The controller never sees a rescan's Identify (Memory Space Enable is off while it is
# submitted, on again a second later). After the admin timeout (3 s) the controller must
# be reset at once: I/O right after completes within seconds, instead of waiting on a
# disabled controller for two I/O timeouts (10 s each; it used to).
echo 10000 >/sys/block/rnvme0n1/queue/io_timeout
trace_mark admin_timeout_begin /dev/rnvme0n1
dmesg -c >/dev/null
pci_command $pci $((cmd & ~2))
rescan_start=$(now_s)
nvme ns-rescan /dev/rnvme0 >/tmp/rescan.out 2>&1 &
rescan=$!
sleep 1
pci_command $pci $cmd
rescan_timed_out rescan_times_out
start=$(date +%s)
check read_after_admin_timeout dd if=/dev/rnvme0n1 of=/dev/null bs=4k count=1 iflag=direct
elapsed=$(($(date +%s) - start))
echo "read after the admin timeout took ${elapsed}s"
[ $elapsed -lt 8 ] && pass io_prompt_after_admin_timeout ||
	fail io_prompt_after_admin_timeout "${elapsed}s"
wait_for 20 grep -q live /sys/class/misc/rnvme0/state
trace_mark admin_timeout_end /dev/rnvme0n1
trace_expect admin_timeout_resets_controller admin_timeout_begin admin_timeout_end eq 1 \
	"pci_nvme_mmio_start_success"

# --- a reset while the registers are out of reach -------------------------------------------
# A user's reset with Memory Space Enable off (a stray config write): registers then read
# as zeroes, like a stopped controller, and writes are lost. The reset must see that the
# registers are out of reach, turn decoding back on (as C's reset does, through
# pci_enable_device_mem), stop the controller for real and enable it again: the controller
# is enabled once (QEMU's trace), decoding is on, and I/O reads back what was written.
dd if=/dev/urandom of=/tmp/decode bs=64k count=4 2>/dev/null
dd if=/tmp/decode of=/dev/rnvme0n1 bs=64k seek=256 oflag=direct 2>/dev/null
trace_mark decode_reset_begin /dev/rnvme0n1
pci_command $pci $((cmd & ~2))
check reset_with_decode_off nvme reset /dev/rnvme0
expect_eq decode_on_after_reset 2 $(($(pci_command $pci) & 2))
expect_eq live_after_decode_reset live "$(cat /sys/class/misc/rnvme0/state)"
check data_after_decode_reset sh -c \
	"dd if=/dev/rnvme0n1 bs=64k skip=256 count=4 iflag=direct 2>/dev/null | cmp - /tmp/decode"
trace_mark decode_reset_end /dev/rnvme0n1
trace_expect decode_reset_enables_once decode_reset_begin decode_reset_end eq 1 \
	"pci_nvme_mmio_start_success"
pci_command $pci $cmd

echo 2000 >/sys/block/rnvme0n1/queue/io_timeout

fio --name=dead --filename=/dev/rnvme0n1 --rw=randrw --bs=4k --iodepth=32 \
	--ioengine=io_uring --direct=1 --time_based --runtime=300 --size=32M \
	--output=/tmp/fio.out &
fio_pid=$!
sleep 3
kill -0 $fio_pid 2>/dev/null && pass fio_running || fail fio_running "fio ended early: $(tail -3 /tmp/fio.out)"

start=$(date +%s)
bar=$(pci_bar0_high $pci)
pci_bar0_high $pci $((bar + 0x40))
wait $fio_pid
rc=$?
elapsed=$(($(date +%s) - start))
echo "fio ended ${elapsed}s after the device stopped answering (exit $rc)"
[ $rc -ne 0 ] && pass fio_sees_error || fail fio_sees_error "fio exit status 0"
grep -qE "err=[ ]*5|Input/output error" /tmp/fio.out && pass fio_error_is_eio ||
	fail fio_error_is_eio "$(grep -E 'err=' /tmp/fio.out | head -2)"
[ $elapsed -lt 30 ] && pass outstanding_io_ends_within_30s || fail outstanding_io_ends_within_30s "${elapsed}s"
dmesg | grep -qE 'rnvme0: (reset failed|.*failing all I/O)' && pass controller_declared_dead ||
	fail controller_declared_dead "$(dmesg | grep rnvme0 | tail -3)"
# Out of reach, its registers may read as a stopped controller: a dead one must not write
# into memory given back from now on, so bus mastering is off (as C's pci_disable_device).
expect_eq dead_controller_bus_master_off 0 $((($(pci_command $pci) >> 2) & 1))

# The disks are marked dead: capacity 0 (the block layer's view), and the mounted file
# system was told its device is gone: it refuses new files with EIO at once (it used to
# take them into the page cache, to lose them at writeback).
wait_for 10 sh -c 'test "$(cat /sys/block/rnvme0n2/size)" = 0'
expect_eq dead_disk_capacity_zero 0 "$(blockdev --getsize64 /dev/rnvme0n1)"
expect_eq dead_disks_sysfs_size_zero "0 0" "$(cat /sys/block/rnvme0n1/size) $(cat /sys/block/rnvme0n2/size)"
if out=$(touch /mnt/fs/after 2>&1); then
	fail mounted_fs_shut_down "a new file was created on the dead disk's file system"
else
	echo "$out" | grep -q "Input/output error" && pass mounted_fs_shut_down ||
		fail mounted_fs_shut_down "unexpected error: $out"
fi
check umount_dead_fs umount /mnt/fs

# Later I/O fails at once instead of waiting for timeouts: an error, or (capacity 0) no data.
start=$(date +%s)
if bytes=$(dd if=/dev/rnvme0n1 bs=4k count=1 iflag=direct 2>/dev/null | wc -c) && [ "$bytes" != 0 ]; then
	fail new_io_fails "a read returned $bytes bytes on a dead controller"
else
	pass new_io_fails
fi
elapsed=$(($(date +%s) - start))
[ $elapsed -le 2 ] && pass new_io_fails_fast || fail new_io_fails_fast "${elapsed}s"

start=$(date +%s)
echo "$pci" >/sys/bus/pci/drivers/rnvme/unbind
elapsed=$(($(date +%s) - start))
[ ! -e /dev/rnvme0n1 ] && pass unbind_removes_disk || fail unbind_removes_disk "disk still there"
[ $elapsed -lt 20 ] && pass unbind_bounded || fail unbind_bounded "${elapsed}s"

# The device answers again: a new bind probes it from scratch.
pci_bar0_high $pci $bar
pci_command $pci $cmd
echo "$pci" >/sys/bus/pci/drivers/rnvme/bind
wait_for 20 disk_live /dev/rnvme0n1 && pass rebind_after_recovery || fail rebind_after_recovery "no disk"
check read_after_rebind dd if=/dev/rnvme0n1 of=/dev/null bs=64k count=16 iflag=direct
# Before the race below leaves the controller dead for good.
image_write host_image /dev/rnvme0n1 0 1

# --- an admin timeout racing with a give-up ------------------------------------------------
# A rescan's Identify times out (sent while Memory Space Enable was off), and while its
# handler waits between stopping the controller and the reset it asks for (debugfs
# admin_timeout_delay_ms), a read times out twice on the stopped controller, whose reset
# does not bring it back (debugfs fail_restart): it is declared dead. The late handler must
# leave it dead: it used to store "resetting" over "dead", and the reset it then asked for
# enabled the dead controller again (its queues and disks stay dead: a live state over
# nothing). QEMU's trace: no enable from before the race to the end.
grep -q ' /sys/kernel/debug ' /proc/mounts || mount -t debugfs none /sys/kernel/debug
dbg=/sys/kernel/debug/rnvme0
trace_mark race_begin /dev/rnvme0n1
dmesg -c >/dev/null
echo 8000 >$dbg/admin_timeout_delay_ms
echo 1 >$dbg/fail_restart
echo 1000 >/sys/block/rnvme0n1/queue/io_timeout
pci_command $pci $((cmd & ~2))
rescan_start=$(now_s)
nvme ns-rescan /dev/rnvme0 >/tmp/rescan-race.out 2>&1 &
rescan=$!
sleep 1
pci_command $pci $cmd
# The Identify times out 3 s after it was sent; its handler then waits 8 s, the controller
# stopped: a read now times out, is aborted, times out again and resets it.
sleep 3
# It fails as I/O on a dead controller does (taken back, Host Aborted: EIO).
if dd if=/dev/rnvme0n1 of=/dev/null bs=4k count=1 iflag=direct 2>/tmp/dd-race.err; then
	fail race_read_fails "the read succeeded"
elif grep -q 'Input/output error' /tmp/dd-race.err; then
	pass race_read_fails
else
	fail race_read_fails "not EIO: $(head -1 /tmp/dd-race.err)"
fi
expect_eq race_controller_dead dead "$(cat /sys/class/misc/rnvme0/state)"
wait_for 20 sh -c "! kill -0 $rescan"
rescan_timed_out race_rescan_times_out
# The device never saw the rescan's Identify, nor any after it (no reset brought the
# controller back to be scanned): the control is the Identifies of the boot's scan.
trace_absent race_identify_never_reached_device race_begin end \
	"pci_nvme_admin_cmd .*'NVME_ADM_CMD_IDENTIFY'" "pci_nvme_admin_cmd .*'NVME_ADM_CMD_IDENTIFY'" start race_begin
# A reset the late handler asked for would run now, in the controller's work.
sleep 3
expect_eq admin_timeout_leaves_dead_controller_dead dead "$(cat /sys/class/misc/rnvme0/state)"
# An enable after race_begin would be the failure: the control is the boot's enables.
trace_absent admin_timeout_after_death_enables_nothing race_begin end \
	"pci_nvme_mmio_start_success" "pci_nvme_mmio_start_success" start end
check rmmod rmmod rnvme
finish
