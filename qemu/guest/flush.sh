# SPDX-License-Identifier: GPL-2.0
# Writes data through the page cache and fsyncs it, then says so and waits to be killed:
# the host kills QEMU at once and checks the data is in the image (scripts/test.sh).
. /guest/lib.sh
insmod /lib/rnvme.ko || exit 1
wait_for 10 test -b /dev/rnvme0n1 || exit 1
dd if=/dev/urandom of=/tmp/data bs=1M count=16 2>/dev/null
sum=$(sha256sum </tmp/data | cut -d' ' -f1)
# Buffered writes, then fsync of the block device: the data must be on the device (a FLUSH
# reaches it) before dd returns.
dd if=/tmp/data of=/dev/rnvme0n1 bs=1M conv=fsync 2>/dev/null || exit 1
echo "RNVME-FSYNC-DONE $sum"
sleep 600
