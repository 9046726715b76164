# SPDX-License-Identifier: GPL-2.0
# Bring-up tests: probe, identify, unbind/bind, load/unload cycles, rnvme beside the C driver.
# Environment: CTRLS (controllers QEMU was given), NS (namespaces each), SERIAL_PREFIX.
. /guest/lib.sh

CTRLS=${CTRLS:?} NS=${NS:?} SERIAL_PREFIX=${SERIAL_PREFIX:?}
IRQ=${IRQ:-MSI-X} # the interrupt type the admin queue should end up on
MODEL="QEMU NVMe Ctrl"
# Controllers shut down (CC.SHN) and enabled (CC.EN) so far, by either driver: QEMU's trace
# must show exactly as many (checked at the end).
# SeaBIOS enables every controller once at boot (its NVMe boot driver).
SHUTDOWNS=0
ENABLES=$CTRLS

# --- bad parameters fail insmod with a message naming them ---------------------------
dmesg -c >/dev/null
if insmod /lib/rnvme.ko admin_timeout=0 2>/dev/null; then
	fail param_rejected "insmod admin_timeout=0 succeeded"
	rmmod rnvme
else
	if dmesg | grep -q 'admin_timeout=0 is out of range'; then
		pass param_rejected
	else
		fail param_rejected "no message naming admin_timeout"
	fi
fi

# --- load and bind every controller ---------------------------------------------------
all=$(nvme_pci_devices)
expect_eq emulated_controllers_visible "$CTRLS" "$(echo "$all" | count)"
dmesg -c >/dev/null
check insmod insmod /lib/rnvme.ko
ENABLES=$((ENABLES + CTRLS))
expect_eq binds_every_controller "$(echo "$all" | sort)" "$(bound_to rnvme | sort)"

# --- identify data matches what QEMU was given -----------------------------------------
lines=$(identify_lines)
expect_eq one_identify_line_per_controller "$CTRLS" "$(echo "$lines" | count)"
i=0
ok=1
while [ $i -lt "$CTRLS" ]; do
	l=$(echo "$lines" | grep "serial \"$SERIAL_PREFIX$i\"")
	if [ "$(echo "$l" | count)" != 1 ]; then
		fail identify_matches_qemu "serial $SERIAL_PREFIX$i logged $(echo "$l" | count) times"
		ok=0
	elif ! echo "$l" | grep -q "model \"$MODEL\".* namespaces $NS "; then
		fail identify_matches_qemu "wrong model or namespace count: $l"
		ok=0
	fi
	i=$((i + 1))
done
[ $ok = 1 ] && pass identify_matches_qemu
expect_eq "admin_queue_on_$IRQ" "$CTRLS" "$(echo "$lines" | grep -c "irq $IRQ\$")"

# Every admin vector took interrupts (identify completed through them). INTx lines may be
# shared, listing several handlers on one line.
irq_names() { grep -oE "rnvme[0-9]+q${1:-[0-9]+}" /proc/interrupts || true; }
ok=1
for q in $(irq_names 0); do
	n=$(grep -E "[ ,]$q(,|\$)" /proc/interrupts |
		awk '{s=0; for (i=2; i<=NF; i++) if ($i ~ /^[0-9]+$/) s+=$i; print s}')
	[ "${n:-0}" -gt 0 ] || { fail admin_interrupts_fire "$q has no interrupts"; ok=0; }
done
expect_eq admin_vectors_registered "$CTRLS" "$(irq_names 0 | count)"
[ $ok = 1 ] && pass admin_interrupts_fire
# One I/O queue per CPU (QEMU grants 64), each with its own handler; with a single shared
# vector (INTx), one I/O queue.
cpus=$(grep -c ^processor /proc/cpuinfo)
[ "$IRQ" = INTx ] && cpus=1
expect_eq io_queue_handlers_registered "$((CTRLS * cpus))" "$(irq_names '[1-9][0-9]*' | count)"
expect_eq one_disk_per_namespace "$((CTRLS * NS))" "$(ls /dev | grep -cE '^rnvme[0-9]+n[0-9]+$')"

# I/O completes through whichever vectors the queues ended up on (MSI-X, or shared INTx).
check io_reads_complete dd if=/dev/rnvme0n1 of=/dev/null bs=64k count=64 iflag=direct
check io_writes_complete dd if=/dev/zero of=/dev/rnvme0n1 bs=64k count=64 oflag=direct

# A pin (INTx) is level-triggered: the controller lowers it when the host writes a CQ head
# doorbell that empties the queue. Left up with nothing to reap, it interrupts for ever and
# the kernel disables the line ("nobody cared"): I/O then completes only when its waiter
# polls. The kernel's own count of interrupts no handler claimed on each rnvme line
# (/proc/irq/N/spurious: the latest run of them, restarted after a tenth of a second
# without one) stays near 0 through bursts of deep I/O and the idle second after each, the
# lines take next to no interrupt in those idle seconds, and the kernel never disables a
# line.
if [ "$IRQ" = INTx ]; then
	intx_lines=$(grep -E 'rnvme[0-9]+q0' /proc/interrupts | cut -d: -f1 | tr -d ' ' | sort -u)
	unclaimed() {
		s=0
		for l in $intx_lines; do
			s=$((s + $(awk '/^unhandled/ { print $2 }' "/proc/irq/$l/spurious")))
		done
		echo $s
	}
	# Interrupts taken on the lines so far (every CPU's column).
	taken() {
		s=0
		for l in $intx_lines; do
			s=$((s + $(awk -v l="$l:" '$1 == l { t = 0; for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+$/) t += $i; print t }' /proc/interrupts)))
		done
		echo $s
	}
	worst=0 idle=0 fio_failed=""
	for round in 1 2 3; do
		fio --name=intx --filename=/dev/rnvme0n1 --rw=randread --bs=4k --iodepth=16 \
			--ioengine=io_uring --direct=1 --size=32M --time_based --runtime=2 \
			>/dev/null 2>&1 || fio_failed=$round
		a=$(taken)
		sleep 1
		b=$(taken)
		[ $((b - a)) -gt "$idle" ] && idle=$((b - a))
		n=$(unclaimed)
		[ "$n" -gt "$worst" ] && worst=$n
	done
	if [ -z "$intx_lines" ]; then
		fail intx_line_quiet_after_io "no rnvme line in /proc/interrupts"
	elif [ -n "$fio_failed" ]; then
		fail intx_line_quiet_after_io "fio's reads failed in burst $fio_failed"
	elif dmesg | grep -q 'nobody cared'; then
		fail intx_line_quiet_after_io "the kernel disabled the line: $(dmesg | grep -m1 'nobody cared')"
	elif [ "$worst" -gt 10 ] || [ "$idle" -gt 10 ]; then
		fail intx_line_quiet_after_io "$worst interrupts no handler claimed, $idle taken in an idle second"
	else
		pass intx_line_quiet_after_io
	fi
fi

# --- sysfs unbind / bind -------------------------------------------------------------
dev=$(bound_to rnvme | head -1)
serial=$(identify_lines | grep "$dev" | sed -E 's/.*serial "([^"]*)".*/\1/')
# Its I/O queues, and a disk of another controller for the trace marks.
for c in /sys/class/misc/rnvme*; do
	[ "$(basename "$(readlink -f $c/device)")" = "$dev" ] && nq=$(($(cat $c/queue_count) - 1)) inst=${c##*rnvme}
done
other=$(ls /dev | grep -E '^rnvme[0-9]+n1$' | grep -v "^rnvme${inst}n1\$" | head -1)
dmesg -c >/dev/null
# On a pin, the unbind's last admin completion (Delete I/O Completion Queue) is acknowledged
# (CQ head doorbell) before its waiter goes on to shut the controller down: a controller
# disabled with an entry it believes unread keeps its pin up (QEMU's does, until the next
# boot), and every later handler on the line returns IRQ_NONE. The test build's
# admin_completion_delay_ms holds the interrupt handler for 100 ms after it wakes each
# waiter, so a doorbell written after the wake-up comes after the shutdown; the device's own
# Interrupt Status bit says whether its pin is down once the function is unbound.
delay_set=0
if [ "$IRQ" = INTx ] &&
	echo 100 >"/sys/kernel/debug/rnvme$inst/admin_completion_delay_ms" &&
	[ "$(cat "/sys/kernel/debug/rnvme$inst/admin_completion_delay_ms")" = 100 ]; then
	delay_set=1
fi
trace_mark unbind_begin /dev/$other
echo "$dev" >/sys/bus/pci/drivers/rnvme/unbind
trace_mark unbind_end /dev/$other
if [ "$IRQ" != INTx ]; then
	:
elif [ $delay_set = 0 ]; then
	fail intx_pin_down_after_unbind "admin_completion_delay_ms of rnvme$inst could not be set"
else
	expect_eq intx_pin_down_after_unbind "" "$(intx_raised)"
fi
# Each I/O queue deleted on the device before the shutdown (QEMU traces a CQ deletion only
# when it succeeds, which needs its SQ deleted first; after CC.EN=0 there is no admin queue
# to run them).
trace_expect unbind_deletes_io_sqs unbind_begin unbind_end eq $nq 'pci_nvme_del_sq deleting submission queue sqid=[0-9]+$'
trace_expect unbind_deletes_io_cqs unbind_begin unbind_end eq $nq 'pci_nvme_del_cq deleted completion queue, cqid=[0-9]+$'
SHUTDOWNS=$((SHUTDOWNS + 1))
if [ -e "/sys/bus/pci/drivers/rnvme/$dev" ]; then
	fail sysfs_unbind "$dev still bound"
elif ! dmesg | grep -q "$dev: rnvme[0-9]*: shut down"; then
	fail sysfs_unbind "no shutdown message"
else
	pass sysfs_unbind
fi
expect_eq unbind_frees_irq "$((CTRLS - 1))" "$(irq_names 0 | count)"
expect_eq unbind_removes_disks "$(((CTRLS - 1) * NS))" "$(ls /dev | grep -cE '^rnvme[0-9]+n[0-9]+$')"
grep -q "rnvme" /proc/iomem && before_bind_iomem=$(grep -c rnvme /proc/iomem)
expect_eq unbind_releases_bar "$((CTRLS - 1))" "${before_bind_iomem:-0}"
echo "$dev" >/sys/bus/pci/drivers/rnvme/bind
ENABLES=$((ENABLES + 1))
if [ -e "/sys/bus/pci/drivers/rnvme/$dev" ] &&
	identify_lines | grep -q "serial \"$serial\""; then
	pass sysfs_bind
else
	fail sysfs_bind "$dev not rebound or no identify line for $serial"
fi

# --- 20 rmmod / insmod cycles ----------------------------------------------------------
ok=1
cycle=1
while [ $cycle -le 20 ]; do
	if ! rmmod rnvme; then
		fail rmmod_insmod_20 "rmmod failed in cycle $cycle"
		ok=0
		break
	fi
	SHUTDOWNS=$((SHUTDOWNS + CTRLS))
	raised=$(intx_raised)
	if [ -n "$raised" ]; then
		fail rmmod_insmod_20 "INTx pin of $raised up after rmmod in cycle $cycle"
		ok=0
		break
	fi
	if [ -n "$(bound_to rnvme)" ] || grep -q rnvme /proc/interrupts /proc/iomem; then
		fail rmmod_insmod_20 "resources left after rmmod in cycle $cycle"
		ok=0
		break
	fi
	dmesg -c >/dev/null
	if ! insmod /lib/rnvme.ko; then
		fail rmmod_insmod_20 "insmod failed in cycle $cycle"
		ok=0
		break
	fi
	ENABLES=$((ENABLES + CTRLS))
	if [ "$(bound_to rnvme | count)" != "$CTRLS" ] ||
		[ "$(identify_lines | count)" != "$CTRLS" ]; then
		fail rmmod_insmod_20 "cycle $cycle bound $(bound_to rnvme | count) of $CTRLS"
		ok=0
		break
	fi
	cycle=$((cycle + 1))
done
[ $ok = 1 ] && pass rmmod_insmod_20
# Controller numbers are given back on unbind: after 20 cycles they are still 0..CTRLS-1.
expect_eq instance_numbers_reused "$(seq 0 $((CTRLS - 1)) | sed 's/^/rnvme/' | tr '\n' ' ')" \
	"$(identify_lines | grep -oE 'rnvme[0-9]+: model' | cut -d: -f1 | sort | tr '\n' ' ')"
# Leaks over the cycles: kmemleak and DMA-API debugging on the debug kernel.

# --- the C driver and rnvme side by side ----------------------------------------------
expect_eq no_nvme_names_from_rnvme "" "$(ls /dev | grep -E '^nvme' || true)"
cdev=$(bound_to rnvme | tail -1)
cserial=$(identify_lines | grep "$cdev" | sed -E 's/.*serial "([^"]*)".*/\1/')
echo "$cdev" >/sys/bus/pci/drivers/rnvme/unbind
SHUTDOWNS=$((SHUTDOWNS + 1))
echo nvme >"/sys/bus/pci/devices/$cdev/driver_override"
insmod /lib/c/nvme-core.ko && insmod /lib/c/nvme.ko
if wait_for 20 disk_live /dev/nvme0n1; then
	pass c_driver_binds_other_controller
else
	fail c_driver_binds_other_controller "no /dev/nvme0n1"
fi
expect_eq c_driver_owns_only_its_controller "$cdev" "$(bound_to nvme)"
expect_eq rnvme_keeps_the_rest "$((CTRLS - 1))" "$(bound_to rnvme | count)"
expect_eq c_driver_sees_same_serial "$cserial" "$(cat /sys/class/nvme/nvme0/serial 2>/dev/null | tr -d ' ')"
check c_driver_reads_while_rnvme_bound dd if=/dev/nvme0n1 of=/dev/null bs=4096 count=64 iflag=direct
kmemleak_plant
check rmmod_both sh -c 'rmmod nvme && rmmod nvme-core && rmmod rnvme'
# Every pin down once both drivers let go (the C driver's controller too).
[ "$IRQ" = INTx ] && expect_eq intx_pins_down_after_rmmod_both "" "$(intx_raised)"
# The C driver's controller was enabled once and shut down at its rmmod, the others at ours.
ENABLES=$((ENABLES + 1))
SHUTDOWNS=$((SHUTDOWNS + CTRLS))
trace_expect shutdown_notified_at_every_unbind start end eq $SHUTDOWNS "pci_nvme_mmio_shutdown_set"
trace_expect controller_enabled_at_every_bind start end eq $ENABLES "pci_nvme_mmio_start_success"

finish
