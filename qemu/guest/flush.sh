# SPDX-License-Identifier: GPL-2.0
# Writes data through the page cache and fsyncs it, then says so and waits to be killed:
# the host kills QEMU at once and checks the data is in the image and that QEMU's trace
# shows the FLUSH (scripts/test.sh).
. /guest/lib.sh
check insmod insmod /lib/rnvme.ko
require_disk disk_ready /dev/rnvme0n1 10
# The kmemleak scan (debug kernel) now: nothing may stand between fsync's return and the
# line that gets QEMU killed.
kmemleak_check
dd if=/dev/urandom of=/tmp/data bs=1M count=16 2>/dev/null
sum=$(sha256sum </tmp/data | cut -d' ' -f1)
# Buffered writes, then fsync of the block device: the data must be on the device (a FLUSH
# reaches it) before dd returns.
if dd if=/tmp/data of=/dev/rnvme0n1 bs=1M conv=fsync 2>/dev/null; then
	pass buffered_write_fsync
	# The counts first: once the host sees the next line it kills QEMU.
	report_counts
	mark "RNVME-FSYNC-DONE $sum"
	sleep 600
	exit 1 # not killed: the host has given up on this run already
fi
fail buffered_write_fsync "dd conv=fsync failed"
report_counts
exit 1
