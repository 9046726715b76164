# SPDX-License-Identifier: GPL-2.0
# A probe that fails half way unwinds cleanly. With the module loaded and one controller
# unbound, its probe (a sysfs bind from this shell) is repeated with the Nth fault-injection
# point of the binding task failing (/proc/self/fail-nth), N = 1, 2, ... until a probe passes
# all its points; every failed probe must leave no IRQ, BAR or disk behind, a later normal
# bind must work, and kmemleak (in finish) must find nothing. Debug kernel only
# (CONFIG_FAILSLAB, CONFIG_FAULT_INJECTION_DEBUG_FS).
. /guest/lib.sh
F=/sys/kernel/debug/failslab
MAX=${MAX:-600}
if [ ! -d $F ]; then
	fail failslab_available "no $F"
	finish
	exit
fi
# fail-nth alone decides: no random failures (probability 0), sleeping allocations too.
echo 0 >$F/probability
echo 0 >$F/verbose
echo N >$F/ignore-gfp-wait

check insmod insmod /lib/rnvme.ko
dev=$(bound_to rnvme | tail -1)
echo "$dev" >/sys/bus/pci/drivers/rnvme/unbind
others=$(bound_to rnvme | count)

failed=0
n=1
done_all=0
while [ $n -le "$MAX" ]; do
	# Prints the fail-nth count left: non-zero means the probe passed all its points.
	left=$(sh -c "echo $n >/proc/self/fail-nth
		echo $dev >/sys/bus/pci/drivers/rnvme/bind 2>/dev/null; cat /proc/self/fail-nth" 2>/dev/null)
	if [ -e "/sys/bus/pci/drivers/rnvme/$dev" ]; then
		if [ "${left:-0}" != 0 ]; then
			done_all=1
			break
		fi
		# The failure hit something the probe could live with (a log line, say): unbind.
		echo "$dev" >/sys/bus/pci/drivers/rnvme/unbind
	else
		failed=$((failed + 1))
	fi
	if [ "$(grep -oE 'rnvme[0-9]+q[0-9]+' /proc/interrupts | count)" -gt $((others * 3)) ] ||
		[ "$(grep -c rnvme /proc/iomem)" != "$others" ]; then
		fail failslab_unwind "probe failing at point $n left IRQs or BARs behind"
		break
	fi
	n=$((n + 1))
done
echo "failslab: probe has $((n - 1)) fault-injection points; $failed failed probes unwound"
[ $done_all = 1 ] && pass failslab_every_probe_step ||
	fail failslab_every_probe_step "stopped at point $n of at most $MAX"
[ $failed -gt 0 ] && pass failslab_probes_failed_and_unwound ||
	fail failslab_probes_failed_and_unwound "no probe failed"
check rmmod_after_faults rmmod rnvme
check insmod_after_faults insmod /lib/rnvme.ko
expect_eq all_bound_after_faults "$((others + 1))" "$(bound_to rnvme | count)"
check io_after_faults dd if=/dev/rnvme0n1 of=/dev/null bs=64k count=16 iflag=direct
check rmmod rmmod rnvme
finish
