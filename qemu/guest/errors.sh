# SPDX-License-Identifier: GPL-2.0
# Device errors (qemu/guest/errors.rules injects them below the emulated controllers): the
# affected I/O fails, with the same error the C driver gives, after a bounded number of
# retries; I/O next to it succeeds. Controller 0 is rnvme's, controller 1 the C driver's.
. /guest/lib.sh

check insmod insmod /lib/rnvme.ko
cdev=$(bound_to rnvme | tail -1)
echo "$cdev" >/sys/bus/pci/drivers/rnvme/unbind
echo nvme >"/sys/bus/pci/devices/$cdev/driver_override"
insmod /lib/c/nvme-core.ko && insmod /lib/c/nvme.ko
require_disk c_driver_ready /dev/nvme0n1
require_disk rnvme_ready /dev/rnvme0n1

# errno text of a failed dd, or "ok"
ddres() { out=$(dd "$@" 2>&1) && echo ok || echo "$out" | grep -oE "[A-Z][a-z ]+$" | tail -1; }

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
	# The media error is not marked Do Not Retry: 1 + 5 attempts, as the C driver's
	# nvme_max_retries.
	trace_expect "${d}_read_attempted_six_times" "${d}_read_begin" "${d}_read_end" eq 6 \
		"pci_nvme_read cid [0-9]+ nsid 1 nlb 8 count 4096 lba 0x1000$"
	trace_expect "${d}_write_attempted_six_times" "${d}_write_begin" "${d}_write_end" eq 6 \
		"pci_nvme_write cid [0-9]+ opname 'NVME_NVM_CMD_WRITE' nsid 1 nlb 8 count 4096 lba 0x2000$"
	eval "${d}_r_bad='$r_bad'; ${d}_w_bad='$w_bad'"
	echo "$d: read bad: $r_bad, before: $r_before, after: $r_after; write bad: $w_bad, after: $w_after"
	if [ "$d" = rnvme0n1 ]; then
		[ "$r_bad" != ok ] && pass read_error_reaches_reader || fail read_error_reaches_reader "read of the bad sector succeeded"
		[ "$w_bad" != ok ] && pass write_error_reaches_writer || fail write_error_reaches_writer "write of the bad sector succeeded"
		[ "$r_before" = ok ] && [ "$r_after" = ok ] && pass reads_next_to_error_succeed ||
			fail reads_next_to_error_succeed "before: $r_before, after: $r_after"
		[ "$w_after" = ok ] && pass writes_next_to_error_succeed ||
			fail writes_next_to_error_succeed "$w_after"
		# Buffered: the page cache turns it into EIO.
		echo 3 >/proc/sys/vm/drop_caches
		b=$(ddres if=$dev of=/dev/null bs=4k skip=512 count=1)
		[ "$b" != ok ] && pass buffered_read_error || fail buffered_read_error "succeeded"
	fi
done
expect_eq read_error_same_as_c_driver "$nvme0n1_r_bad" "$rnvme0n1_r_bad"
expect_eq write_error_same_as_c_driver "$nvme0n1_w_bad" "$rnvme0n1_w_bad"
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
check rmmod_all sh -c 'rmmod nvme && rmmod nvme-core && rmmod rnvme'
finish
