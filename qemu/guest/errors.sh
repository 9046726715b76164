# SPDX-License-Identifier: GPL-2.0
# Device errors (qemu/guest/errors.rules injects them below the emulated controllers): the
# affected I/O fails, with the same error the C driver gives, after a bounded number of
# retries; I/O next to it succeeds. Controller 0 is rnvme's, controller 1 the C driver's.
. /guest/lib.sh

# A short I/O timeout: it bounds how long a request that cannot be DMA-mapped is retried.
IO_TIMEOUT=8
assign_drivers rnvme nvme
check insmod insmod /lib/rnvme.ko io_timeout=$IO_TIMEOUT
insmod /lib/c/nvme-core.ko && insmod /lib/c/nvme.ko
require_disk c_driver_ready /dev/nvme0n1
require_disk rnvme_ready /dev/rnvme0n1

# errno text of a failed dd, or "ok"
ddres() { out=$(dd "$@" 2>&1) && echo ok || echo "$out" | grep -oE "[A-Z][a-z /]+$" | tail -1; }

for d in rnvme0n1 nvme0n1; do
	dev=/dev/$d
	# QEMU's trace counts the attempts at the bad blocks between the marks (each driver's
	# own, one after the other).
	trace_mark "${d}_read_begin" $dev
	r_bad=$(ddres if=$dev of=/dev/null bs=4k skip=512 count=1 iflag=direct)
	trace_mark "${d}_read_end" $dev
	r_before=$(ddres if=$dev of=/dev/null bs=4k skip=511 count=1 iflag=direct)
	r_after=$(ddres if=$dev of=/dev/null bs=4k skip=514 count=1 iflag=direct)
	trace_mark "${d}_write_begin" $dev
	w_bad=$(ddres if=/dev/zero of=$dev bs=4k seek=1024 count=1 oflag=direct)
	trace_mark "${d}_write_end" $dev
	w_after=$(ddres if=/dev/zero of=$dev bs=4k seek=1026 count=1 oflag=direct)
	# Buffered: the page cache reads ahead (REQ_RAHEAD, so REQ_FAILFAST_*: not retried),
	# then reads the one page again, retried. Same count as the C driver's.
	echo 3 >/proc/sys/vm/drop_caches
	trace_mark "${d}_buffered_begin" $dev
	b_bad=$(ddres if=$dev of=/dev/null bs=4k skip=512 count=1)
	trace_mark "${d}_buffered_end" $dev
	trace_expect "${d}_readahead_not_retried" "${d}_buffered_begin" "${d}_buffered_end" eq 7 \
		"pci_nvme_read cid [0-9]+ nsid 1 nlb [0-9]+ count [0-9]+ lba 0x1000$"
	# The media error is not marked Do Not Retry: 1 + 5 attempts, as the C driver's
	# nvme_max_retries.
	trace_expect "${d}_read_attempted_six_times" "${d}_read_begin" "${d}_read_end" eq 6 \
		"pci_nvme_read cid [0-9]+ nsid 1 nlb 8 count 4096 lba 0x1000$"
	trace_expect "${d}_write_attempted_six_times" "${d}_write_begin" "${d}_write_end" eq 6 \
		"pci_nvme_write cid [0-9]+ opname 'NVME_NVM_CMD_WRITE' nsid 1 nlb 8 count 4096 lba 0x2000$"
	eval "${d}_r_bad='$r_bad'; ${d}_w_bad='$w_bad'"
	echo "$d: read bad: $r_bad, before: $r_before, after: $r_after; write bad: $w_bad, after: $w_after"
	if [ "$d" = rnvme0n1 ]; then
		# Unrecovered Read Error and Write Fault are medium errors (C's nvme_error_status:
		# BLK_STS_MEDIUM, ENODATA), not any error.
		expect_eq read_error_reaches_reader "No data available" "$r_bad"
		expect_eq write_error_reaches_writer "No data available" "$w_bad"
		[ "$r_before" = ok ] && [ "$r_after" = ok ] && pass reads_next_to_error_succeed ||
			fail reads_next_to_error_succeed "before: $r_before, after: $r_after"
		[ "$w_after" = ok ] && pass writes_next_to_error_succeed ||
			fail writes_next_to_error_succeed "$w_after"
		# The page cache reports a page its read left not up to date as EIO
		# (filemap_read_folio), whatever the device said.
		expect_eq buffered_read_error "Input/output error" "$b_bad"
	fi
done
expect_eq read_error_same_as_c_driver "No data available|No data available" "$nvme0n1_r_bad|$rnvme0n1_r_bad"
expect_eq write_error_same_as_c_driver "No data available|No data available" "$nvme0n1_w_bad|$rnvme0n1_w_bad"
# The failure is logged with its attempts and the device's status.
if dmesg | grep -qE 'rnvme.*Read at sector 4096 failed after 6 attempt\(s\): unrecovered read error'; then
	pass read_failure_logged
else
	fail read_failure_logged "$(dmesg | grep 'failed after' | head -2)"
fi
if dmesg | grep -qE 'rnvme.*Write at sector 8192 failed after 6 attempt\(s\): write fault'; then
	pass write_failure_logged
else
	fail write_failure_logged "$(dmesg | grep 'failed after' | tail -2)"
fi

# DMA mapping failures, injected through debugfs: transient ones are retried and the data
# arrive intact; a request that cannot be mapped for the I/O timeout fails with EIO instead
# of being retried forever; the disk works afterwards.
fdm=/sys/kernel/debug/rnvme0/fail_dma_map
dev=/dev/rnvme0n1
dd if=/dev/urandom of=/tmp/pat bs=64k count=1 2>/dev/null
check map_pattern_written dd if=/tmp/pat of=$dev bs=64k seek=160 count=1 oflag=direct
echo 3 >$fdm
r=$(ddres if=$dev of=/tmp/back bs=64k skip=160 count=1 iflag=direct)
expect_eq transient_map_failure_retried ok "$r"
cmp -s /tmp/pat /tmp/back && pass transient_map_failure_data_intact ||
	fail transient_map_failure_data_intact "read back differs"
expect_eq injected_map_failures_consumed 0 "$(cat $fdm)"
# The same inside batches (io_uring submitting 16 at once: a plug's list, blk-mq's
# queue_rqs): a request refused before it was started goes back to blk-mq, which issues it
# again; every block written is read back and verified.
echo 5 >$fdm
if fio --name=batchmap --filename=$dev --ioengine=io_uring --direct=1 --rw=randwrite \
	--bs=4k --iodepth=16 --iodepth_batch_submit=16 --iodepth_batch_complete_min=16 \
	--offset=32m --size=1m --randseed=3 --verify=crc32c --verify_fatal=1 \
	--output=/tmp/batchmap.log; then
	pass batch_map_failure_retried_data_verified
else
	fail batch_map_failure_retried_data_verified \
		"$(grep -iE 'err|verify' /tmp/batchmap.log | head -3 | tr '\n' ' ')"
fi
expect_eq batch_map_failures_consumed 0 "$(cat $fdm)"
# An io_uring passthrough failing in the driver before the device saw it (its data cannot
# be mapped either) completes with EIO, as C's (which clears a request's status when it
# sets the command up), never with the NVMe status its tag's previous command left: first,
# every tag of CPU 0's queue completes an opcode the controller lacks (0x4001, 16385).
expect_eq uring_tags_primed_with_a_status "res=16385 res2=0" \
	"$(busybox taskset -c 0 uring-cmd -n 1100 /dev/rng0n1 badop 2>&1)"
echo 4294967295 >$fdm
busybox taskset -c 0 uring-cmd /dev/rng0n1 read >/tmp/uring-unmap.res 2>&1 &
upid=$!
ddres if=$dev of=/dev/null bs=64k skip=160 count=1 iflag=direct >/tmp/unmap.res &
pid=$! waited=0
while kill -0 $pid 2>/dev/null && [ $waited -lt 40 ]; do
	sleep 1
	waited=$((waited + 1))
done
wait_for 20 sh -c "! kill -0 $upid"
echo 0 >$fdm
wait $pid
wait $upid
expect_eq unmappable_request_fails "Input/output error" "$(cat /tmp/unmap.res)"
expect_eq unmappable_uring_passthrough_fails_eio "res=-5 res2=0" "$(cat /tmp/uring-unmap.res)"
[ $waited -ge $((IO_TIMEOUT - 1)) ] && [ $waited -le $((IO_TIMEOUT + 10)) ] &&
	pass unmappable_request_fails_after_io_timeout ||
	fail unmappable_request_fails_after_io_timeout "after ${waited} s, io_timeout $IO_TIMEOUT s"
rm -f /tmp/back
r=$(ddres if=$dev of=/tmp/back bs=64k skip=160 count=1 iflag=direct)
cmp -s /tmp/pat /tmp/back && [ "$r" = ok ] && pass io_after_map_failures_intact ||
	fail io_after_map_failures_intact "read: $r"
check rmmod_all sh -c 'rmmod nvme && rmmod nvme-core && rmmod rnvme'

# --- power-off with the drivers bound -------------------------------------------------
# Both drivers again (controller 1 keeps its driver_override), a buffered write with fsync
# on each disk, then the VM powers off with them bound (no rmmod): each controller must
# get its shutdown notification (CC.SHN; QEMU's trace), as the C driver's .shutdown sends
# it, and the data must be in the host's images afterwards (the host checks them).
check reload_rnvme insmod /lib/rnvme.ko io_timeout=$IO_TIMEOUT
check reload_c_driver sh -c 'insmod /lib/c/nvme-core.ko && insmod /lib/c/nvme.ko'
require_disk rnvme_ready_again /dev/rnvme0n1
require_disk c_driver_ready_again /dev/nvme0n1
for d in rnvme0n1 nvme0n1; do
	dd if=/dev/urandom of=/tmp/off.$d bs=64k count=1 2>/dev/null
	check "${d}_buffered_write_fsync" dd if=/tmp/off.$d of=/dev/$d bs=64k seek=200 count=1 conv=fsync
	# Controller 0 is rnvme's, 1 the C driver's.
	c=0
	[ $d = nvme0n1 ] && c=1
	mark "RNVME-IMAGE-EXPECT ${d}_data_in_image_after_poweroff $c 1 $((200 * 65536)) 65536 $(sha256sum </tmp/off.$d | cut -d' ' -f1)"
done
trace_mark poweroff_begin /dev/rnvme0n1
# From here to the end of the trace: the power-off. Both controllers, rnvme's and C's.
trace_expect shutdown_notified_at_poweroff poweroff_begin end eq 2 "pci_nvme_mmio_shutdown_set"
finish
