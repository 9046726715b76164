# SPDX-License-Identifier: GPL-2.0
# Many namespaces frozen at once. Four controllers in two NVM subsystems of two each
# (--subsys-pairs): 0 and 1 on rnvme, 2 and 3 on the C driver; NS namespaces, each shared
# by its subsystem's controllers. A Format NVM freezes every head disk of the subsystem and
# every path disk of the controller that sends it: 2 * NS queues at once. A freeze taken
# with a lockdep owner holds two lock entries of the task until the unfreeze, and a task
# has MAX_LOCK_DEPTH (48) of them: past it, lockdep reports "BUG: MAX_LOCK_DEPTH too low!"
# and turns itself off (debug kernel). rnvme freezes without an owner, as C's
# nvme_start_freeze; C's nvme_mpath_start_freeze takes its heads with an owner and reaches
# the limit here (seen on the debug kernel: 24 heads held at the report), which fails the
# run's kernel log check, so C formats on the base kernel only. Every head reads after.
. /guest/lib.sh
NS=${NS:-25}

assign_drivers rnvme rnvme nvme
insmod /lib/c/nvme-core.ko && insmod /lib/c/nvme.ko
# Both controllers probe side by side, each joining the subsystem and scanning its
# namespaces: one head per namespace, whichever probe made it, with a path of each
# controller; the subsystem is numbered after the first controller to join it.
check insmod insmod /lib/rnvme.ko
check rnvme_heads_live wait_for 120 sh -c "[ \$(ls /sys/block | grep -cE '^rnvme[0-9]+n[0-9]+\$') = $NS ]"
check c_heads wait_for 120 sh -c "[ \$(ls /sys/block | grep -cE '^nvme[0-9]+n[0-9]+\$') = $NS ]"
S=$(ls /sys/block | grep -E '^rnvme[0-9]+n1$' | sed 's/^rnvme//; s/n1$//')
require_disk rnvme_last_head "/dev/rnvme${S:-X}n$NS" 120
expect_eq rnvme_heads "$NS" "$(ls /sys/block | grep -cE '^rnvme[0-9]+n[0-9]+$')"
expect_eq rnvme_paths_of_both_controllers "$((2 * NS))" \
	"$(ls /sys/block | grep -cE "^rnvme${S:-X}c[01]n[0-9]+\$")"
lockdep_off() { dmesg | grep -c 'MAX_LOCK_DEPTH too low'; }
check format_many_namespaces nvme format /dev/rnvme0 -n 1 -l 0 -f
expect_eq format_within_lock_depth 0 "$(lockdep_off)"
# heads_read DRIVER: every head of DRIVER's subsystem answers a read after the format (C
# numbers its subsystem after the first controller to probe: its heads are found by name).
heads_read() {
	local d ok=0
	for d in $(ls /sys/block | grep -E "^${1}[0-9]+n[0-9]+\$"); do
		dd if=/dev/$d of=/dev/null bs=4k count=1 iflag=direct 2>/dev/null && ok=$((ok + 1))
	done
	expect_eq "${1}_heads_read_after_format" "$NS" "$ok"
}
heads_read rnvme
if [ "${RNVME_FLAVOUR:-}" != debug ]; then
	check c_format_many_namespaces nvme format /dev/nvme0 -n 1 -l 0 -f
	heads_read nvme
fi
check rmmod rmmod rnvme
finish
