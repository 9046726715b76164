# SPDX-License-Identifier: GPL-2.0
# A concurrency storm on rnvme and, at the same time, on the C driver's identical
# controller (each in an NVM subsystem of its own: multipath head disks): fio writes and
# verifies namespaces 1 and 2 of each while, in loops, I/O and admin passthrough, hwmon
# reads, rescans, controller resets and the attachment and detachment of namespace 3 run,
# and now and then a function-level reset, a second without Memory Space on each
# controller and a system sleep (pm_test "devices": every device suspends and resumes).
# Then every loop must stop on its own, each controller be live and serve I/O, fio have
# verified its data, and unbind be clean; the kernel log (hung tasks, lockdep, KASAN,
# kmemleak on the debug kernel) must stay clean.
# Environment: STORM_S (seconds of storm, default 20), ROUNDS (sleeps and FLRs each,
# default 1), HICCUP (0: leave Memory Space alone; default 1), WATCHDOG_S (a run still going
# after this long is stopped; default four storms and eight minutes).
. /guest/lib.sh
STORM_S=${STORM_S:-20}
ROUNDS=${ROUNDS:-1}
# A task blocked this long is reported (and fails the run): a storm hang shows in the log.
echo 30 >/proc/sys/kernel/hung_task_timeout_secs 2>/dev/null
# A storm that hangs (a function reset or a system sleep that never returns) ends here, with
# every blocked task's stack in the log, rather than at the host's timeout: the tests it
# never reported fail, and the rest of the suite keeps its time. (A system sleep that
# never returns has frozen this watchdog too: the host's timeout ends that one.)
WATCHDOG_S=${WATCHDOG_S:-$((STORM_S * 4 + 480))}
(
	sleep "$WATCHDOG_S"
	echo "storm: still running after $WATCHDOG_S s: the blocked tasks, then power off"
	echo "storm: states: rnvme0 $(cat /sys/class/misc/rnvme0/state 2>/dev/null)," \
		"nvme0 $(cat /sys/class/nvme/nvme0/state 2>/dev/null)"
	# Blocked tasks, and any other task inside either driver (a worker that loops or
	# sleeps interruptibly holds up a reset as surely).
	for t in /proc/[0-9]*; do
		st=$(cat "$t/stack" 2>/dev/null)
		if grep -q '^State:.*D' "$t/status" 2>/dev/null; then
			echo "storm: blocked: $(cat "$t/comm") (${t#/proc/}): $(tr '\0' ' ' <"$t/cmdline")"
		elif echo "$st" | grep -q nvme; then
			echo "storm: in a driver: $(cat "$t/comm") (${t#/proc/}), $(grep '^State:' "$t/status")"
		else
			continue
		fi
		echo "$st" | sed 's/^/storm:   /'
	done
	# A driver's shutdown may wait for the hang too: the next hung-task check ends the
	# guest (a panic, which ends QEMU) rather than the host's timeout.
	echo 1 >/proc/sys/kernel/hung_task_panic 2>/dev/null
	poweroff -f
) &
watchdog=$!

assign_drivers rnvme nvme
insmod /lib/c/nvme-core.ko && insmod /lib/c/nvme.ko
check insmod insmod /lib/rnvme.ko
for d in /dev/rnvme0n1 /dev/rnvme0n2 /dev/nvme0n1 /dev/nvme0n2; do
	require_disk "disk_$(basename $d)" $d 60
done
udevadm settle -t 60 2>/dev/null
echo 0 >/sys/module/suspend/parameters/pm_test_delay 2>/dev/null
echo devices >/sys/power/pm_test 2>/dev/null
STOP=/tmp/storm-stop
rm -f $STOP

# loop NAME CMD...: runs CMD until the storm stops, counting runs and failures (failures are
# allowed: a command caught by a reset fails; a command that never returns is not).
loop() {
	local name=$1 n=0 bad=0
	shift
	while [ ! -e $STOP ]; do
		"$@" >/dev/null 2>&1 || bad=$((bad + 1))
		n=$((n + 1))
	done
	echo "$name: $n runs, $bad failed" >"/tmp/loop-$name"
}

# lock NAME / unlock NAME: a lock between the guest's shells (mkdir is atomic).
lock() {
	until mkdir "/tmp/lock-$1" 2>/dev/null; do usleep 50000; done
}
unlock() {
	rmdir "/tmp/lock-$1"
}

# reset_locked DRV: a user's controller reset, every three seconds or so.
reset_locked() {
	local rc
	sleep 3
	lock "reset-$1"
	nvme reset "/dev/${1}0"
	rc=$?
	unlock "reset-$1"
	return $rc
}

pids=""
for drv in rnvme nvme; do
	pci=$(bound_to $drv | head -1)
	hw=$(hwmon_of "$pci")
	for ns in 1 2; do
		fio --name="storm-$drv-$ns" --filename="/dev/${drv}0n$ns" --rw=randwrite --bs=4k \
			--iodepth=16 --ioengine=io_uring --direct=1 --size=8M --time_based \
			--runtime="$STORM_S" --verify=crc32c --verify_backlog=32 --randseed=$ns \
			--output="/tmp/storm-$drv-$ns.log" &
		pids="$pids $!"
	done
	loop "$drv-io-passthru" nvme io-passthru "/dev/${drv}0n1" --opcode=2 \
		--namespace-id="$(cat /sys/block/${drv}0n1/nsid)" --data-len=4096 --read \
		--cdw10=4096 --cdw12=7 &
	pids="$pids $!"
	loop "$drv-admin" nvme id-ctrl "/dev/${drv}0" &
	pids="$pids $!"
	loop "$drv-hwmon" cat "$hw/temp1_input" &
	pids="$pids $!"
	loop "$drv-rescan" nvme ns-rescan "/dev/${drv}0" &
	pids="$pids $!"
	# Under the lock the Memory Space hiccup below takes: see there.
	loop "$drv-reset" reset_locked $drv &
	pids="$pids $!"
	# Namespace 3, in no fio's way, attached and detached (asynchronous events: its disk
	# added and removed, during resets too).
	loop "$drv-attach" sh -c "nvme attach-ns /dev/${drv}0 -n 3 -c 0; sleep 1
		nvme detach-ns /dev/${drv}0 -n 3 -c 0; sleep 1" &
	pids="$pids $!"
done

# The occasional events, spread over the storm.
t0=$(now_s)
gap=$((STORM_S / (2 * ROUNDS + 1)))
[ $gap -lt 1 ] && gap=1
for r in $(seq $ROUNDS); do
	sleep $gap
	# rnvme's function reset lands wherever it falls, its user resets too. The C driver's
	# waits for a user reset of its to end: a function reset during one has left C's next
	# reset work running for good (its `nvme reset` and the reset's nvme_reset_done both
	# waiting for it, every later admin command queued behind it, and power-off too).
	ev=""
	for drv in rnvme nvme; do
		p=$(bound_to $drv | head -1)
		if [ $drv = rnvme ]; then
			echo 1 >"/sys/bus/pci/devices/$p/reset" &
		else
			(
				lock "reset-$drv"
				echo 1 >"/sys/bus/pci/devices/$p/reset"
				unlock "reset-$drv"
			) &
		fi
		ev="$ev $!"
	done
	for p in $ev; do wait $p; done
	# A second without Memory Space on each (a stray setpci, a PCI error), turned back on
	# unless a reset did: what is sent meanwhile is lost until a reset takes it back. (Bus
	# mastering lost is busmaster-*'s: C then needs an admin timeout, a minute by default,
	# to come back, which would stall the system sleep below.) A user admin command sent
	# meanwhile must not hold up a reset's own commands (rnvme's used to wait behind it).
	# Not in the middle of a reset of the user's: a command the reset itself sends then is
	# lost too, and both drivers wait an admin timeout (a minute) for it, then give the
	# controller up. The reset loop takes the same lock. Then a user's reset takes back what
	# was lost, at once: left to the reset loop, which a loaded guest runs seldom, the lost
	# writes wait an I/O timeout (longer than the storm), and the system sleep's freeze
	# fails on the tasks that wait for them (C's, in CI).
	for drv in rnvme nvme; do
		[ "${HICCUP:-1}" = 1 ] || break
		p=$(bound_to $drv | head -1)
		lock "reset-$drv"
		pci_command "$p" $(($(pci_command "$p") & ~2))
		sleep 1
		c=$(pci_command "$p")
		[ $((c & 2)) = 0 ] && pci_command "$p" $((c | 2))
		nvme reset "/dev/${drv}0" >/dev/null 2>&1 || echo "round $r: $drv's reset after the hiccup failed"
		unlock "reset-$drv"
	done
	sleep $gap
	if echo mem >/sys/power/state; then sleeps=$((${sleeps:-0} + 1)); else
		echo "round $r: the system sleep failed"
	fi
done
# The rest of the storm, then stop the loops.
while awk -v a="$t0" -v b="$(now_s)" -v s="$STORM_S" 'BEGIN { exit !(b - a < s) }'; do
	sleep 1
done
touch $STOP
# Every loop and fio ends on its own: none is stuck behind another.
stuck=""
for p in $pids; do
	wait_for 90 sh -c "! kill -0 $p 2>/dev/null" || stuck="$stuck $p"
done
if [ -z "$stuck" ]; then pass every_loop_ended; else
	fail every_loop_ended "still running after 90 s:$stuck ($(ps | grep -E "^ *(${stuck# }) " | tr '\n' ' ' | tr -s ' ' | sed 's/ /|/g'))"
fi
cat /tmp/loop-* 2>/dev/null
# Each loop ran, and not every run failed (a command caught by a reset may fail; one that
# can never work tests nothing).
useless=$(awk '$2 == 0 || $2 == $4 { print $1 }' /tmp/loop-* 2>/dev/null | tr '\n' ' ')
if [ "$(ls /tmp/loop-* 2>/dev/null | count)" = 12 ] &&
	[ -z "$useless" ]; then
	pass every_loop_worked
else
	fail every_loop_worked "loops that never ran or always failed: ${useless:-missing reports}"
fi
expect_eq system_slept "$ROUNDS" "${sleeps:-0}"
echo none >/sys/power/pm_test 2>/dev/null

for drv in rnvme nvme; do
	for ns in 1 2; do
		if why=$(fio_verified "/tmp/storm-$drv-$ns.log"); then pass "${drv}_n${ns}_verified"; else
			fail "${drv}_n${ns}_verified" "$why"
		fi
	done
done
# Afterwards: each controller live, its disks serve I/O that verifies.
if wait_for 60 grep -qx live /sys/class/misc/rnvme0/state; then pass rnvme_live; else
	fail rnvme_live "state $(cat /sys/class/misc/rnvme0/state)"
fi
if wait_for 60 grep -qx live /sys/class/nvme/nvme0/state; then pass nvme_live; else
	fail nvme_live "state $(cat /sys/class/nvme/nvme0/state)"
fi
for drv in rnvme nvme; do
	fio_write_verify "${drv}_io_after_storm" "/dev/${drv}0n1" 4M 21
done
for drv in rnvme nvme; do
	pci=$(bound_to $drv | head -1)
	if echo "$pci" >"/sys/bus/pci/drivers/$drv/unbind"; then pass "${drv}_unbind"; else
		fail "${drv}_unbind" "unbind failed"
	fi
done
check rmmod rmmod rnvme
kill $watchdog 2>/dev/null
finish
