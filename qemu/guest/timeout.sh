# SPDX-License-Identifier: GPL-2.0
# I/O timeouts and controller reset. Namespace 1 keeps data (an image); namespace 2 takes
# 5 s per command (null-co latency-ns). With a 1 s timeout on namespace 2, a read there
# times out, is aborted (QEMU's Abort never aborts), times out again and resets the
# controller; the read is retried after each reset and fails after 1 + 5 attempts. The
# disks stay, data on namespace 1 survives the resets, and I/O works afterwards.
. /guest/lib.sh

check insmod insmod /lib/rnvme.ko
wait_for 20 test -b /dev/rnvme0n2 || fail disks_ready "no /dev/rnvme0n2"
fast=/dev/rnvme0n1
slow=/dev/rnvme0n2

# 4 MiB of random data on the fast namespace, and its checksum.
dd if=/dev/urandom of=/tmp/pattern bs=1M count=4 2>/dev/null
check write_pattern dd if=/tmp/pattern of=$fast bs=1M count=4 oflag=direct
sum_before=$(sha256sum </tmp/pattern | cut -d' ' -f1)

echo 1000 >/sys/block/rnvme0n2/queue/io_timeout
expect_eq io_timeout_set 1000 "$(cat /sys/block/rnvme0n2/queue/io_timeout)"

# I/O on the fast namespace keeps going while the slow one times out and resets.
(
	i=0
	while [ ! -e /tmp/stop ]; do
		dd if=$fast of=/dev/null bs=64k count=16 iflag=direct 2>/dev/null || echo "fast read $i failed" >>/tmp/fast.err
		i=$((i + 1))
	done
	echo $i >/tmp/fast.count
) &
bg=$!

start=$(date +%s)
if out=$(dd if=$slow of=/dev/null bs=4k count=1 iflag=direct 2>&1); then
	fail stuck_read_fails "read succeeded although every attempt timed out"
else
	echo "$out" | grep -q "Input/output error" && pass stuck_read_fails ||
		fail stuck_read_fails "unexpected error: $out"
fi
elapsed=$(($(date +%s) - start))
echo "stuck read ended after ${elapsed}s"
# 6 attempts of (timeout + timeout after abort + reset), 5 s each (the latency).
[ "$elapsed" -lt 55 ] && pass stuck_read_ends_in_bounded_time ||
	fail stuck_read_ends_in_bounded_time "${elapsed}s"
touch /tmp/stop
wait $bg

log=$(dmesg)
has() { echo "$log" | grep -qE "$1"; }
has 'rnvme0: I/O tag [0-9]+ \(0x[0-9a-f]+\) QID [0-9]+ timeout, aborting Read of 4096 bytes' &&
	pass timeout_sends_abort || fail timeout_sends_abort "no abort message"
has 'abort of command 0x[0-9a-f]+ on queue [0-9]+: not aborted by the controller' &&
	pass abort_completion_logged || fail abort_completion_logged "no abort completion"
has 'rnvme0: I/O tag [0-9]+ \(0x[0-9a-f]+\) QID [0-9]+ timeout after abort, resetting controller' &&
	pass second_timeout_resets || fail second_timeout_resets "no reset message"
resets=$(echo "$log" | grep -c 'rnvme0: reset done' || true)
expect_eq six_resets_done 6 "$resets"
has 'nsid 2: Read at sector 0 failed after 6 attempt\(s\): aborted by host' &&
	pass retries_bounded || fail retries_bounded "$(echo "$log" | grep 'failed after' | tail -1)"
if echo "$log" | grep -q 'reset failed'; then fail no_failed_reset "$(echo "$log" | grep 'reset failed')"; else pass no_failed_reset; fi

echo "fast reads during resets: $(cat /tmp/fast.count)"
[ ! -e /tmp/fast.err ] && pass fast_namespace_io_during_resets ||
	fail fast_namespace_io_during_resets "$(head -3 /tmp/fast.err)"
[ -b $slow ] && [ -b $fast ] && pass disks_kept || fail disks_kept "a disk went away"

# Data written before the resets reads back; new I/O works.
echo 3 >/proc/sys/vm/drop_caches
sum_after=$(dd if=$fast bs=1M count=4 iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
expect_eq data_survives_resets "$sum_before" "$sum_after"
check write_after_reset dd if=/tmp/pattern of=$fast bs=1M seek=8 count=4 oflag=direct
sum_new=$(dd if=$fast bs=1M skip=8 count=4 iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
expect_eq read_after_reset "$sum_before" "$sum_new"

# With a timeout longer than the device's latency the slow namespace works again.
echo 10000 >/sys/block/rnvme0n2/queue/io_timeout
expect_eq debugfs_timeouts_counted 1 "$(($(stat_sum 0 timeouts) >= 2))"
check slow_read_within_timeout dd if=$slow of=/dev/null bs=4k count=1 iflag=direct
# A passthrough command's own timeout (1 s) wins over the queue's (10 s): abort, reset,
# and the command comes back as aborted before the queue's timeout would even fire (QEMU
# finishes the 5 s read before its reset completes).
nvme-ioctl timeout $slow 1000 9
check read_after_passthrough_timeout dd if=$fast of=/dev/null bs=4k count=1 iflag=direct
check flush_after_reset sync

check rmmod rmmod rnvme
finish
