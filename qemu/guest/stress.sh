# SPDX-License-Identifier: GPL-2.0
# Stress: CTRLS controllers probed at once, CYCLES unload/load cycles with I/O on every disk
# in between (data written and read back each cycle).
. /guest/lib.sh
CTRLS=${CTRLS:-4}
CYCLES=${CYCLES:-50}

dd if=/dev/urandom of=/tmp/pat bs=64k count=4 2>/dev/null
ok=1
c=1
while [ $c -le "$CYCLES" ]; do
	if ! insmod /lib/rnvme.ko; then
		fail load_io_unload_cycles "insmod failed in cycle $c"
		ok=0
		break
	fi
	if [ "$(bound_to rnvme | count)" != "$CTRLS" ] || ! wait_for 10 disk_live /dev/rnvme$((CTRLS - 1))n1; then
		fail load_io_unload_cycles "cycle $c: $(bound_to rnvme | count) of $CTRLS controllers, disks: $(ls /dev | grep rnvme | tr '\n' ' ')"
		ok=0
		break
	fi
	i=0
	while [ $i -lt "$CTRLS" ]; do
		d=/dev/rnvme${i}n1
		off=$(((c * 7 + i) % 64))
		if ! dd if=/tmp/pat of=$d bs=64k seek=$off oflag=direct 2>/dev/null ||
			! dd if=$d bs=64k skip=$off count=4 iflag=direct 2>/dev/null | cmp -s - /tmp/pat; then
			fail load_io_unload_cycles "cycle $c: I/O on $d failed or data differs"
			ok=0
			break 2
		fi
		i=$((i + 1))
	done
	if ! rmmod rnvme; then
		fail load_io_unload_cycles "rmmod failed in cycle $c"
		ok=0
		break
	fi
	if grep -q rnvme /proc/interrupts /proc/iomem; then
		fail load_io_unload_cycles "cycle $c left IRQs or BARs behind"
		ok=0
		break
	fi
	c=$((c + 1))
done
if [ $ok = 1 ]; then
	pass "load_io_unload_cycles_$CYCLES"
	mark "RNVME-VERIFIED $((CYCLES * CTRLS / 4))MiB"
fi
# Loaded once more after the cycles (whatever became of them): 1 MiB at 10 MiB of the first
# controller's disk, past what the cycles write (their first 4.25 MiB). Its instance is
# whichever its probe took.
insmod /lib/rnvme.ko 2>/dev/null
i=$(rnvme_of "$(nvme_pci_devices | sort | sed -n 1p)")
if [ -n "$i" ] && wait_for 10 disk_live "/dev/rnvme${i}n1"; then
	image_write host_image "/dev/rnvme${i}n1" 0 1
else
	fail host_image "no live disk of the first controller (instance '$i')"
fi
rmmod rnvme
finish
