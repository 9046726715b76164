# SPDX-License-Identifier: GPL-2.0
# I/O timeouts and controller reset. Namespace 1 keeps data (an image); namespaces 2 and 3
# take 5 s per command (null-co latency-ns). With a 1 s timeout on namespace 2, a read there
# times out, is aborted (QEMU's Abort never aborts), times out again and resets the
# controller; the read is retried after each reset and fails after 1 + 5 attempts. The
# disks stay, data on namespace 1 survives the resets, and I/O works afterwards.
. /guest/lib.sh

# A 5 s admin timeout: it bounds how long an Abort may stay outstanding (below).
check insmod insmod /lib/rnvme.ko admin_timeout=5
require_disk disks_ready /dev/rnvme0n3
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

# The stuck read is at block 800 (a position nothing else reads: the partition scan reads
# the first blocks), so QEMU's trace shows each attempt of it.
trace_mark stuck_begin $fast
start=$(date +%s)
if out=$(dd if=$slow of=/dev/null bs=4k skip=100 count=1 iflag=direct 2>&1); then
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
trace_mark stuck_end $fast
# What the device saw (QEMU's trace): the read 1 + 5 times; after each first timeout an
# Abort, after each second one a controller reset (CC.EN set again).
trace_expect read_attempted_six_times stuck_begin stuck_end eq 6 \
	"pci_nvme_read cid [0-9]+ nsid 2 nlb 8 count 4096 lba 0x320$"
trace_expect abort_sent_each_attempt stuck_begin stuck_end eq 6 \
	"pci_nvme_admin_cmd cid [0-9]+ sqid 0 opc 0x8 "
trace_expect reset_each_attempt stuck_begin stuck_end eq 6 "pci_nvme_mmio_start_success"

log=$(dmesg)
has() { echo "$log" | grep -qE "$1"; }
has 'abort of command 0x[0-9a-f]+ on queue [0-9]+: not aborted by the controller' &&
	pass abort_completion_logged || fail abort_completion_logged "no abort completion"
has 'nsid 2: Read at sector 800 failed after 6 attempt\(s\): aborted by host' &&
	pass failure_logged_with_attempts || fail failure_logged_with_attempts "$(echo "$log" | grep 'failed after' | tail -1)"
if echo "$log" | grep -q 'reset failed'; then fail no_failed_reset "$(echo "$log" | grep 'reset failed')"; else pass no_failed_reset; fi

nfast=$(cat /tmp/fast.count)
echo "fast reads during resets: $nfast"
[ ! -e /tmp/fast.err ] && pass fast_namespace_io_during_resets ||
	fail fast_namespace_io_during_resets "$(head -3 /tmp/fast.err)"
# The fast namespace is only paused while a reset runs, not for the whole 30 s.
[ "${nfast:-0}" -ge 20 ] && pass fast_namespace_reads_continue ||
	fail fast_namespace_reads_continue "only ${nfast:-0} reads of 1 MiB in ${elapsed}s"
[ -b $slow ] && [ -b $fast ] && pass disks_kept || fail disks_kept "a disk went away"

# Data written before the resets reads back; new I/O works.
echo 3 >/proc/sys/vm/drop_caches
sum_after=$(dd if=$fast bs=1M count=4 iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
expect_eq data_survives_resets "$sum_before" "$sum_after"
check write_after_reset dd if=/tmp/pattern of=$fast bs=1M seek=8 count=4 oflag=direct
sum_new=$(dd if=$fast bs=1M skip=8 count=4 iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
expect_eq read_after_reset "$sum_before" "$sum_new"

# --- two namespaces time out together -------------------------------------------------
# A read on each slow namespace, from different CPUs: blk-mq rounds timers up to the
# second, so both time out together, on two CPUs (a 500 ms timeout). A timeout that resets
# the controller waits 300 ms first (debugfs reset_delay_ms), so both pass the "already
# resetting" check before either reset starts, as they can by chance without it. One
# reset must take both reads back, and the other timeout must not reset the controller
# again (it did: that second reset burned a retry of every request). So every reset ends
# one attempt of the read that lives longest: as many resets as its attempts, at most 6.
# (QEMU's reset drains both namespaces: the read that finishes first may complete then,
# with data, so the other may be tried alone afterwards.)
echo 500 >/sys/block/rnvme0n2/queue/io_timeout
echo 500 >/sys/block/rnvme0n3/queue/io_timeout
echo 300 >/sys/kernel/debug/rnvme0/reset_delay_ms
trace_mark pair_begin $fast
busybox taskset -c 0 dd if=/dev/rnvme0n2 of=/dev/null bs=4k skip=200 count=1 iflag=direct 2>/dev/null &
p2=$!
busybox taskset -c 1 dd if=/dev/rnvme0n3 of=/dev/null bs=4k skip=200 count=1 iflag=direct 2>/dev/null &
p3=$!
wait $p2
r2=$?
wait $p3
r3=$?
trace_mark pair_end $fast
echo 0 >/sys/kernel/debug/rnvme0/reset_delay_ms
[ $r2 -ne 0 ] || [ $r3 -ne 0 ] && pass pair_read_fails || fail pair_read_fails "both reads succeeded"
trace_expect pair_nsid2_read_attempts pair_begin pair_end le 6 \
	"pci_nvme_read cid [0-9]+ nsid 2 nlb 8 count 4096 lba 0x640$"
trace_expect pair_nsid3_read_attempts pair_begin pair_end le 6 \
	"pci_nvme_read cid [0-9]+ nsid 3 nlb 8 count 4096 lba 0x640$"
trace_expect pair_one_reset_per_attempt pair_begin pair_end eq \
	max:pair_nsid2_read_attempts,pair_nsid3_read_attempts "pci_nvme_mmio_start_success"
# Every attempt ends by its own timeouts: aborted at the first, reset at the second. A
# second reset for one pair of timeouts may instead end the attempts the first reset sent
# again, before any timeout of theirs (then the count above can still match): those have no
# Abort.
trace_expect pair_every_attempt_aborted pair_begin pair_end eq \
	sum:pair_nsid2_read_attempts,pair_nsid3_read_attempts \
	"pci_nvme_admin_cmd cid [0-9]+ sqid 0 opc 0x8 "

# --- a lost Abort completion -----------------------------------------------------------
# debugfs lose_abort_completions=4: the driver drops the next 4 Abort completions, as if
# the controller never posted them. Four reads on the slow namespace with a 3 s timeout:
# each times out once and is aborted (QEMU's ACL allows 4 at once), then completes with
# its data at 5 s, before a second timeout. Their abort slots stay taken. Aborts have the
# admin timeout (5 s), as in the C driver: after it, the next timeout (a 1 s passthrough
# read) resets the controller, which takes it back, instead of waiting forever for a free
# abort slot (before: it was re-armed until the device completed it, with no reset).
echo 3000 >/sys/block/rnvme0n2/queue/io_timeout
echo 4 >/sys/kernel/debug/rnvme0/lose_abort_completions
rm -f /tmp/lost.ok.*
trace_mark lost_begin $fast
for i in 1 2 3 4; do
	dd if=$slow of=/dev/null bs=4k skip=$((300 + i)) count=1 iflag=direct 2>/dev/null &&
		touch /tmp/lost.ok.$i &
done
wait
trace_mark lost_end $fast
expect_eq lost_abort_reads_complete 4 "$(ls /tmp/lost.ok.* 2>/dev/null | wc -l)"
expect_eq lost_abort_completions_dropped 0 \
	"$(cat /sys/kernel/debug/rnvme0/lose_abort_completions)"
trace_expect lost_aborts_sent lost_begin lost_end eq 4 \
	"pci_nvme_admin_cmd cid [0-9]+ sqid 0 opc 0x8 "
# An enable in the window would be the failure: the control is the boot's enables.
trace_absent lost_aborts_no_reset lost_begin lost_end "pci_nvme_mmio_start_success" \
	"pci_nvme_mmio_start_success" start end
sleep 6
trace_mark lost_after_begin $fast
if nvme io-passthru $slow --opcode=2 --namespace-id=2 --data-len=4096 --read --cdw10=1700 \
	--cdw12=7 --timeout=1000 >/tmp/lost.out 2>&1; then
	fail timeout_after_lost_aborts_resets "the read completed: $(head -2 /tmp/lost.out)"
else
	# The reset took it back: EINTR, as the C driver's cancelled commands.
	grep -q "Interrupted system call" /tmp/lost.out && pass timeout_after_lost_aborts_resets ||
		fail timeout_after_lost_aborts_resets "$(head -2 /tmp/lost.out)"
fi
trace_mark lost_after_end $fast
trace_expect reset_after_lost_aborts lost_after_begin lost_after_end eq 1 \
	"pci_nvme_mmio_start_success"

# With a timeout longer than the device's latency the slow namespace works again.
echo 10000 >/sys/block/rnvme0n2/queue/io_timeout
expect_eq debugfs_timeouts_counted 1 "$(($(stat_sum 0 timeouts) >= 2))"
check slow_read_within_timeout dd if=$slow of=/dev/null bs=4k count=1 iflag=direct
# A passthrough command's own timeout (1 s) wins over the queue's (10 s): abort, reset,
# and the command fails with EINTR (taken back, as C's) before the queue's timeout would
# even fire (QEMU finishes the 5 s read before its reset completes).
trace_mark passthru_begin $fast
run_helper nvme_ioctl_timeout_ran nvme-ioctl timeout $slow 1000 9
trace_mark passthru_end $fast
trace_expect passthrough_timeout_resets_once passthru_begin passthru_end eq 1 \
	"pci_nvme_mmio_start_success"
check read_after_passthrough_timeout dd if=$fast of=/dev/null bs=4k count=1 iflag=direct
# A buffered write and fsync after the resets: the FLUSH must reach the device (trace).
trace_mark flush_begin $fast
check fsync_after_reset dd if=/tmp/pattern of=$fast bs=4k seek=4000 count=1 conv=fsync
trace_mark flush_end $fast
trace_expect flush_after_reset_reaches_device flush_begin flush_end ge 1 \
	"pci_nvme_io_cmd cid [0-9]+ nsid 0x1 sqid [0-9]+ opc 0x0 "

# --- a lost interrupt -----------------------------------------------------------------
# With the function's MSI-X vectors masked (config space), a read completes on the device
# but signals nothing, as a lost interrupt. The timeout handler finds the completion in
# the queue, reaped with the queue's interrupt disabled (the handler reaps without a lock,
# as C's nvme_irq), and ends the read with its data: no abort, no reset. Unmasked, reads
# complete by interrupt again: an unbalanced disable would leave the queue silent.
pci=$(bound_to rnvme | head -1)
echo 1000 >/sys/block/rnvme0n1/queue/io_timeout
sum_lost=$(dd if=/tmp/pattern bs=4k skip=777 count=1 2>/dev/null | sha256sum | cut -d' ' -f1)
trace_mark lostirq_begin $fast
if msix_mask "$pci" 1; then
	start=$(uptime_cs)
	sum=$(dd if=$fast bs=4k skip=777 count=1 iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
	cs=$(($(uptime_cs) - start))
	msix_mask "$pci" 0
	expect_eq lost_irq_read_data "$sum_lost" "$sum"
	# Not before the timeout (the mask held it back), well before a reset would end it.
	[ $cs -ge 90 ] && [ $cs -lt 1000 ] && pass lost_irq_read_ends_at_timeout ||
		fail lost_irq_read_ends_at_timeout "${cs}0 ms"
else
	fail lost_irq_read_data "no MSI-X capability on $pci"
fi
# An admin command in the window (the no-Abort control), once the vectors are unmasked.
nvme id-ctrl /dev/rnvme0 >/dev/null
trace_mark lostirq_end $fast
trace_expect lost_irq_read_once lostirq_begin lostirq_end eq 1 \
	"pci_nvme_read cid [0-9]+ nsid 1 nlb 8 count 4096 lba 0x1848$"
trace_absent lost_irq_no_abort lostirq_begin lostirq_end \
	"pci_nvme_admin_cmd cid [0-9]+ sqid 0 opc 0x8 " "pci_nvme_admin_cmd cid [0-9]+ sqid 0 opc 0x[0-9a-f]+ "
trace_absent lost_irq_no_reset lostirq_begin lostirq_end "pci_nvme_mmio_start_success" \
	"pci_nvme_mmio_start_success" start end # (the boot's enables, as above)
start=$(uptime_cs)
sum=$(dd if=$fast bs=4k skip=777 count=1 iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
cs=$(($(uptime_cs) - start))
expect_eq read_after_lost_irq "$sum_lost" "$sum"
[ $cs -lt 90 ] && pass interrupts_after_lost_irq || fail interrupts_after_lost_irq "${cs}0 ms"
echo 30000 >/sys/block/rnvme0n1/queue/io_timeout

# --- a reset delivers what the device completed before it -------------------------------
# A read completes on the device while the vectors are masked (its entry in the completion
# queue, no interrupt), then the controller is reset: the reset reaps the queues before it
# takes the rest back, so the read ends with its data and the device sees it once (taken
# back instead, it would be sent again after the reset). 888 * 8 = 0x1bc0.
sum_reap=$(dd if=/tmp/pattern bs=4k skip=888 count=1 2>/dev/null | sha256sum | cut -d' ' -f1)
trace_mark reap_begin $fast
if msix_mask "$pci" 1; then
	dd if=$fast of=/tmp/reap bs=4k skip=888 count=1 iflag=direct 2>/dev/null &
	rd=$!
	sleep 1
	echo 1 >/sys/class/misc/rnvme0/reset_controller &
	rs=$!
	# The reset has reaped by now; its first admin command waits for the vector.
	sleep 2
	msix_mask "$pci" 0
	wait $rs
	wait $rd
	expect_eq reset_delivers_completed_read "$sum_reap" "$(sha256sum </tmp/reap | cut -d' ' -f1)"
else
	fail reset_delivers_completed_read "no MSI-X capability on $pci"
fi
trace_mark reap_end $fast
trace_expect reset_in_reap_window reap_begin reap_end eq 1 "pci_nvme_mmio_start_success"
trace_expect completed_read_not_retried reap_begin reap_end eq 1 \
	"pci_nvme_read cid [0-9]+ nsid 1 nlb 8 count 4096 lba 0x1bc0$"

# --- unbind while an admin passthrough waits on the device ------------------------------
# An extra Asynchronous Event Request completes only when the controller has an event to
# report: with a 2-minute timeout it holds the admin queue until then. Unbind takes it
# back at once (its caller gets an error) instead of waiting for it (it used to: the whole
# timeout; 613 s with 600000).
nvme admin-passthru /dev/rnvme0 --opcode=0x0c --timeout=120000 >/tmp/aer.out 2>&1 &
aer=$!
sleep 3
kill -0 $aer 2>/dev/null && pass held_passthrough_waits ||
	fail held_passthrough_waits "ended early: $(cat /tmp/aer.out)"
start=$(date +%s)
echo "$pci" >/sys/bus/pci/drivers/rnvme/unbind
elapsed=$(($(date +%s) - start))
echo "unbind took ${elapsed}s with an admin passthrough outstanding"
[ "$elapsed" -lt 20 ] && pass unbind_cancels_held_passthrough ||
	fail unbind_cancels_held_passthrough "unbind took ${elapsed}s"
i=0
while kill -0 $aer 2>/dev/null && [ $i -lt 20 ]; do
	sleep 1
	i=$((i + 1))
done
if kill -0 $aer 2>/dev/null; then
	fail held_passthrough_fails "still waiting ${i}s after unbind"
	kill $aer
elif wait $aer; then
	fail held_passthrough_fails "succeeded: $(cat /tmp/aer.out)"
else
	pass held_passthrough_fails
fi
echo "$pci" >/sys/bus/pci/drivers/rnvme/bind
require_disk rebind_after_held_passthrough /dev/rnvme0n1
sum_rebind=$(dd if=$fast bs=1M count=4 iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
expect_eq data_after_held_passthrough_unbind "$sum_before" "$sum_rebind"
image_write host_image $fast 0 1

check rmmod rmmod rnvme
finish
