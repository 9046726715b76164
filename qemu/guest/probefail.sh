# SPDX-License-Identifier: GPL-2.0
# A probe that fails half way unwinds cleanly: with probe_fault_step=N the probe of every
# controller fails at its Nth step (BAR mapped, admin queue allocated, vectors allocated,
# handler registered, controller enabled, identified, queue count set, vectors reallocated,
# first and last I/O queue created, tag set created, queues done, disks added). After
# each, nothing may be left: no binding, IRQ, BAR or disk; kmemleak (in finish, on the
# debug kernel) checks memory. At step 14 a disk's device_add_disk fails: that namespace
# alone is skipped, the controller stays bound without a disk. The controllers probe side
# by side (probe_delay_ms slows each down). Then a normal load binds everything and serves
# I/O.
. /guest/lib.sh
CTRLS=${CTRLS:-2}
STEPS=14
ok=1
n=1
while [ $n -lt $STEPS ]; do
	dmesg -c >/dev/null
	if ! insmod /lib/rnvme.ko probe_fault_step=$n; then
		fail probe_failure_unwinds "insmod failed at step $n"
		ok=0
		break
	fi
	hit=$(dmesg | grep -c "injected probe failure at step $n\$")
	left=$(bound_to rnvme | count)
	irqs=$(grep -c rnvme /proc/interrupts)
	bars=$(grep -c rnvme /proc/iomem)
	disks=$(ls /dev | grep -c '^rnvme')
	rmmod rnvme
	if [ "$hit" != "$CTRLS" ] || [ "$left$irqs$bars$disks" != 0000 ]; then
		fail probe_failure_unwinds "step $n: hit $hit/$CTRLS, left bound $left, irqs $irqs, bars $bars, disks $disks"
		ok=0
	fi
	n=$((n + 1))
done
[ $ok = 1 ] && pass "probe_failure_unwinds_at_each_of_$((STEPS - 1))_steps"
dmesg -c >/dev/null
if insmod /lib/rnvme.ko probe_fault_step=$STEPS; then
	hit=$(dmesg | grep -c "injected probe failure at step $STEPS\$")
	skipped=$(dmesg | grep -c 'namespace 1 skipped: its disk was refused (-5)$')
	left=$(bound_to rnvme | count)
	disks=$(ls /sys/block | grep -c '^rnvme')
	chars=$(ls /dev | grep -c '^rnvme[0-9]*$')
	rmmod rnvme
	expect_eq refused_disk_skips_namespace_alone "$CTRLS $CTRLS $CTRLS 0 $CTRLS" \
		"$hit $skipped $left $disks $chars"
else
	fail refused_disk_skips_namespace_alone "insmod failed at step $STEPS"
fi
dmesg -c >/dev/null
if insmod /lib/rnvme.ko probe_fault_step=$((STEPS + 1)) 2>/dev/null; then
	fail probe_fault_step_validated "step $((STEPS + 1)) accepted"
	rmmod rnvme
else
	pass probe_fault_step_validated
fi
if insmod /lib/rnvme.ko probe_delay_ms=60001 2>/dev/null; then
	fail probe_delay_ms_validated "60001 ms accepted"
	rmmod rnvme
elif dmesg | grep -q 'probe_delay_ms=60001 is out of range'; then
	pass probe_delay_ms_validated
else
	fail probe_delay_ms_validated "refused without naming probe_delay_ms"
fi
# Probes run side by side: with probe_delay_ms=D each probe sleeps D once its controller is
# enabled, so loading takes a plain load's time B and about one D more, where one probe
# after another would add CTRLS * D. At least D more: the delay happened (the control).
D=8000
t0=$(uptime_cs)
insmod /lib/rnvme.ko
base=$((($(uptime_cs) - t0) * 10))
rmmod rnvme
t0=$(uptime_cs)
if insmod /lib/rnvme.ko probe_delay_ms=$D; then
	took=$((($(uptime_cs) - t0) * 10))
	n=$(bound_to rnvme | count)
	if [ "$n" = "$CTRLS" ] && [ $took -ge $D ] && [ $((took - base)) -lt $((D * 3 / 2)) ]; then
		pass probes_run_side_by_side
	else
		fail probes_run_side_by_side "insmod took $took ms (a plain one $base ms) for $n of $CTRLS controllers, each probe sleeping $D ms (one after another: $((CTRLS * D)) ms more)"
	fi
	rmmod rnvme
else
	fail probes_run_side_by_side "insmod probe_delay_ms=$D failed"
fi
check insmod_after_faults insmod /lib/rnvme.ko
expect_eq all_bound_after_faults "$CTRLS" "$(bound_to rnvme | count)"
check io_after_faults dd if=/dev/rnvme0n1 of=/dev/null bs=64k count=16 iflag=direct
kmemleak_plant
check rmmod rmmod rnvme
finish
