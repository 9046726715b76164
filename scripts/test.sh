#!/usr/bin/env bash
# `make test`: the host unit tests, then every VM scenario on the test kernels.
#
# Each guest test reports `RNVME-TEST PASS|FAIL name` on the VM's results channel (a serial
# port of its own, qemu/run --results); the guest's expectations of QEMU's trace are
# checked here (scripts/trace_expect.py). Each VM run adds two tests: the guest exited 0
# and its kernel log has no WARNING/BUG/Oops/KASAN/lockdep/hung-task report; the guest's
# own count of passes and failures matches the lines received. Every name is compared with
# the manifest (scripts/test.manifest): a missing, duplicated or unknown test fails. The
# last line is `N passed, M failed`; the exit status is non-zero if anything failed.
#
#   RNVME_TEST_FLAVOURS="base debug"   kernels to run the VM scenarios on
#   RNVME_TEST_ONLY=regex              only scenarios whose name matches
#   RNVME_STORM_S, RNVME_STORM_ROUNDS  the storm scenario's length and rounds (20, 1)
#   RNVME_STORM_HICCUP=0               the storm leaves Memory Space alone (default: a second off
#                                      per round on each controller)
#   RNVME_STORM_WATCHDOG_S             seconds before a hung storm dumps its stacks and powers off
#   RNVME_TEST_LOGS=dir                where the logs go (default out/test-logs)
#   RNVME_TEST_JOBS=2                  VM scenarios run at once (a block of lines each)
#   RNVME_CI=1                         refuse a partial selection (.ci/run sets it)
. "$(dirname "$0")/common.sh"
set +e

FLAVOURS=${RNVME_TEST_FLAVOURS:-"base debug"}
# The selection, named in the summary: a partial run must not look like a whole one.
if [ -n "${RNVME_TEST_ONLY:-}" ] || [ "$FLAVOURS" != "base debug" ]; then
	SELECTION="partial: scenarios matching '${RNVME_TEST_ONLY:-.*}' on the $FLAVOURS kernel(s)"
	if [ -n "${RNVME_CI:-}" ]; then
		echo "rnvme: CI runs every test; refusing the selection RNVME_TEST_ONLY='${RNVME_TEST_ONLY:-}' RNVME_TEST_FLAVOURS='$FLAVOURS'" >&2
		echo "0 passed, 1 failed"
		exit 1
	fi
else
	SELECTION="every scenario on the base and debug kernels"
fi
LOGS=${RNVME_TEST_LOGS:-$RNVME_ROOT/out/test-logs}
MANIFEST=$RNVME_ROOT/scripts/test.manifest
rm -rf "$LOGS"
mkdir -p "$LOGS"
: >"$LOGS/seen"
PASS=0
FAIL=0
HOST_VERIFIED_MIB=0
FAILED_NAMES=()
# QEMU trace events every VM scenario records: the evidence of what the device did.
# The cli scenario's namespace identifiers (qemu/guest/cli.sh checks them).
NS1_UUID=5aa5c33c-0b1e-4c2d-9e8f-0123456789ab NS1_EUI64=0x5254000000c0ffee NS2_EUI64=0x52540000000beef2
TRACE_EVENTS=pci_nvme_read,pci_nvme_write,pci_nvme_io_cmd,pci_nvme_admin_cmd,pci_nvme_create_sq,pci_nvme_create_cq,pci_nvme_del_sq,pci_nvme_del_cq,pci_nvme_dsm*,pci_nvme_map_sgl,pci_nvme_mmio_start_success,pci_nvme_mmio_shutdown_set

# ok NAME / bad NAME [WHY]: one test result; NAME is "scenario: test".
ok() {
	PASS=$((PASS + 1))
	echo "$1" >>"$LOGS/seen"
	echo "PASS  $1"
}
bad() {
	FAIL=$((FAIL + 1))
	# The summary at the end repeats each failure with the start of its reason: a log that
	# keeps only its tail still says why.
	local why=${2:-}
	why=${why//$'\n'/ }
	FAILED_NAMES+=("$1${why:+: ${why:0:240}}")
	echo "$1" >>"$LOGS/seen"
	echo "FAIL  $1${2:+: $2}"
}

# --- the debug kernel, in the background ------------------------------------------------
# On a new machine the debug kernel builds from here on, on the CPU time the rest leaves
# idle: the base kernel's serial steps (its Rust crates, its links), the base scenarios'
# waits (a guest waiting out a timeout, a sleep, QEMU's I/O). At SCHED_IDLE and in the idle
# I/O class it never takes a core from the base kernel's build or a VM; the debug flavour's
# own build waits for it (scripts/build-kernel.sh's lock). The toolchain and the kernel
# source come first, in the foreground: the base kernel needs them too, and two package
# installations at once would collide. A kernel already built returns at once.
BG_KERNEL=
if [[ " $FLAVOURS " == *" debug "* ]] && [ -z "${KDIR:-}" ] &&
	"$RNVME_ROOT/scripts/setup-toolchain.sh" debug >"$LOGS/setup.log" 2>&1 &&
	"$RNVME_ROOT/scripts/fetch-kernel.sh" >/dev/null 2>>"$LOGS/setup.log"; then
	setsid ionice -c 3 chrt --idle 0 "$RNVME_ROOT/scripts/kdir.sh" debug \
		>"$LOGS/kernel-debug.log" 2>&1 &
	BG_KERNEL=$!
	trap '[ -z "$BG_KERNEL" ] || kill -- -"$BG_KERNEL" 2>/dev/null' EXIT
fi

# --- host unit tests -----------------------------------------------------------------
say "host unit tests (cargo test)"
"$RNVME_ROOT/scripts/host-test.sh" >"$LOGS/host.log" 2>&1
status=$?
while read -r name result; do
	case $result in
	ok) ok "host: $name" ;;
	*) bad "host: $name" "$result" ;;
	esac
done < <(sed -nE 's/^test (\S+) \.\.\. (\S+)$/\1 \2/p' "$LOGS/host.log")
if [ $status -ne 0 ] && ! grep -q '^test result: FAILED' "$LOGS/host.log"; then
	bad "host: cargo test" "did not run (see $LOGS/host.log)"
	tail -20 "$LOGS/host.log"
fi

# Files stay short enough to read whole (the style guide's bound).
long=$(find "$RNVME_ROOT/src" "$RNVME_ROOT/rnvme.rs" -name '*.rs' -exec wc -l {} + |
	awk '$2 != "total" && $1 > 700 { printf "%s (%d lines) ", $2, $1 }')
if [ -z "$long" ]; then ok "docs: no source file over 700 lines"
else bad "docs: no source file over 700 lines" "$long"; fi

# docs/testing.md's table of scenarios and test counts is the manifest's.
if diff <(python3 "$RNVME_ROOT/scripts/manifest.py" table "$MANIFEST") \
	<(sed -n '/<!-- manifest-begin -->/,/<!-- manifest-end -->/p' "$RNVME_ROOT/docs/testing.md" |
		grep '^|') >"$LOGS/docs-table.diff" 2>&1; then
	ok "docs: scenario table in docs/testing.md matches the manifest"
else
	bad "docs: scenario table in docs/testing.md matches the manifest" "$(head -5 "$LOGS/docs-table.diff")"
fi

# ARCHITECTURE.md, README.md and docs/ against the code: the unsafe count, the items named,
# the test and mutant counts, the parameter table (scripts/docs-check.py).
python3 "$RNVME_ROOT/scripts/docs-check.py" >"$LOGS/docs-check.log" 2>&1
status=$?
while IFS= read -r line; do
	case $line in
	"PASS "*) ok "docs: ${line#PASS }" ;;
	"FAIL "*)
		rest=${line#FAIL }
		bad "docs: ${rest%%: *}" "${rest#*: }"
		;;
	esac
done <"$LOGS/docs-check.log"
if [ $status -ne 0 ] && ! grep -q '^FAIL ' "$LOGS/docs-check.log"; then
	bad "docs: docs-check.py ran" "$(tail -3 "$LOGS/docs-check.log")"
fi

# The driver's layers: each module in its layer folder, imports only from the layers below
# (scripts/import-check.py).
if python3 "$RNVME_ROOT/scripts/import-check.py" >"$LOGS/import-check.log" 2>&1; then
	ok "docs: $(sed -n 's/^PASS //p' "$LOGS/import-check.log")"
else
	line=$(grep '^FAIL ' "$LOGS/import-check.log")
	if [ -n "$line" ]; then
		rest=${line#FAIL }
		bad "docs: ${rest%%: *}" "${rest#*: }"
	else
		bad "docs: import-check.py ran" "$(tail -3 "$LOGS/import-check.log")"
	fi
fi

# --- VM scenarios ----------------------------------------------------------------------
# guest_results NAME: the guest's RNVME-TEST lines from its results channel, its own count
# of them, and its expectations of QEMU's trace.
guest_results() {
	local name=$1 res=$LOGS/$1.results line rest np=0 nf=0 done_line
	while IFS= read -r line; do
		case $line in
		"RNVME-TEST PASS "*)
			np=$((np + 1))
			ok "$name: ${line#RNVME-TEST PASS }"
			;;
		"RNVME-TEST FAIL "*)
			nf=$((nf + 1))
			rest=${line#RNVME-TEST FAIL }
			bad "$name: ${rest%%: *}" "${rest#*: }"
			;;
		esac
	done < <(tr -d '\r' <"$res" 2>/dev/null)
	done_line=$(tr -d '\r' <"$res" 2>/dev/null | grep -E '^RNVME-DONE ' | tail -1)
	if [ "$done_line" = "RNVME-DONE passed=$np failed=$nf" ]; then
		ok "$name: every result the guest counted was received"
	else
		bad "$name: every result the guest counted was received" \
			"guest: '${done_line:-no RNVME-DONE line}', received: passed=$np failed=$nf"
	fi
	# Every expectation gets its verdict; a checker that stopped half way is a failure.
	local want nres=0
	want=$(tr -d '\r' <"$res" 2>/dev/null | grep -c '^RNVME-TRACE-EXPECT ')
	python3 "$RNVME_ROOT/scripts/trace_expect.py" "$res" "$LOGS/$name.trace" \
		>"$LOGS/$name.trace-check" 2>&1
	while IFS= read -r line; do
		case $line in
		"PASS "*)
			nres=$((nres + 1))
			ok "$name: ${line#PASS }"
			;;
		"FAIL "*)
			nres=$((nres + 1))
			rest=${line#FAIL }
			bad "$name: ${rest%%: *}" "${rest#*: }"
			;;
		esac
	done <"$LOGS/$name.trace-check"
	if [ "$nres" != "$want" ]; then
		bad "$name: trace expectations checked" "$want expected, $nres verdicts: $(tail -3 "$LOGS/$name.trace-check")"
	fi
	# The guest's expectations of the commands in the submission queues (scripts/sqe.py).
	if tr -d '\r' <"$res" 2>/dev/null | grep -qE '^RNVME-SQE-(EXPECT|SAME|ABORTS) '; then
		while IFS= read -r line; do
			case $line in
			"PASS "*) ok "$name: ${line#PASS }" ;;
			"FAIL "*)
				rest=${line#FAIL }
				bad "$name: ${rest%%: *}" "${rest#*: }"
				;;
			esac
		done < <(python3 "$RNVME_ROOT/scripts/sqe.py" check "$res" "$LOGS/$name.sqe" \
			"$LOGS/$name.trace" 2>&1)
	fi
}

# vm_status NAME RC: the guest command exited 0 and the kernel log is clean. Also notes how
# long the scenario took (since scenario_start), for the summary of the slowest.
SCENARIO_T0=0
scenario_start() {
	SCENARIO_T0=$(date +%s)
	say "VM scenario $1 ($2 kernel)"
}
# problem_traces LOG: the call traces of the first kernel reports in console log LOG, so
# that a failure seen only in CI's output (its logs are gone with its machine) says which
# driver's code was running, and where.
problem_traces() {
	awk '
		/^\[ *[0-9.]+\] / && /(WARNING:|BUG:|INFO: task .* blocked|Oops|general protection|KASAN|UBSAN|possible circular|inconsistent lock|soft lockup)/ {
			# A task blocked for good is reported again every half minute: once is enough.
			key = $0
			sub(/^\[ *[0-9.]+\] /, "", key)
			sub(/ blocked for more than .*/, "", key)
			if (!(key in seen) && reports++ < 3) { seen[key] = 1; left = 30; print "  " $0 } else left = 0
			next
		}
		left > 0 && /---\[ end trace/ { left = 0; next }
		left > 0 && /^\[ *[0-9.]+\]  +[^ <]/ { sub(/^\[ *[0-9.]+\] /, "   "); print; left-- }
	' "$1" 2>/dev/null
}
vm_status() {
	local name=$1 rc=$2 log=$LOGS/$1.console.log
	local took=$(($(date +%s) - SCENARIO_T0))
	echo "$took $name" >>"$LOGS/durations"
	say "$name took $took s"
	case $rc in
	0) ok "$name: guest exited 0, kernel log clean" ;;
	# The first reports' stacks before the list of every problem line: a summary that
	# keeps only a message's first lines (CI's) still shows where a hung task waits.
	3) bad "$name: guest exited 0, kernel log clean" "kernel reported problems:
$(problem_traces "$log")
every problem line:
$(grep -A20 'kernel reported problems' "$LOGS/$name.run.log" | tail -n +2)" ;;
	*) bad "$name: guest exited 0, kernel log clean" \
		"qemu/run exited $rc: $(tail -2 "$LOGS/$name.run.log" | tr '\n' ' ') (log: $log)" ;;
	esac
}

# scenario_images NAME FLAVOUR QEMU-OPTIONS...: sets IMAGES to the directory of the
# scenario's namespace images (its --image-dir; for --backend image without one, a directory
# made for it, whose option goes in IMAGE_OPT), kept after the VM exits: the host then finds
# there the data the guest asked it to (RNVME-IMAGE-EXPECT, lib.sh's image_write).
scenario_images() {
	local name=$1 flavour=$2 prev="" a
	shift 2
	IMAGES="" IMAGE_OPT=()
	for a in "$@"; do
		[ "$a" = -- ] && break
		[ "$prev" = --image-dir ] && IMAGES=$a
		prev=$a
	done
	if [ -z "$IMAGES" ] && [[ " $* " == *" --backend image "* ]]; then
		IMAGES=$RNVME_ROOT/out/test-images/$flavour/$name
		rm -rf "$IMAGES"
		mkdir -p "$IMAGES"
		IMAGE_OPT=(--image-dir "$IMAGES")
	fi
}

# run_vm NAME FLAVOUR QEMU-OPTIONS... -- GUEST-COMMAND
run_vm() {
	local name=$1 flavour=$2
	shift 2
	if [ -n "${RNVME_TEST_ONLY:-}" ] && ! [[ $name =~ $RNVME_TEST_ONLY ]]; then
		return
	fi
	local log=$LOGS/$name.console.log
	scenario_start "$name" "$flavour"
	scenario_images "$name" "$flavour" "$@"
	"$RNVME_ROOT/qemu/run" --flavour "$flavour" --module "$RNVME_ROOT/out/$flavour-test/rnvme.ko" --quiet --log "$log" \
		--results "$LOGS/$name.results" --trace "$TRACE_EVENTS" --trace-file "$LOGS/$name.trace" \
		"${IMAGE_OPT[@]}" "$@" >"$LOGS/$name.run.log" 2>&1
	local rc=$?
	guest_results "$name"
	vm_status "$name" $rc
	if [ -n "$IMAGES" ]; then image_expect "$name" "$IMAGES"; fi
}

# The data a guest wrote through rnvme (qemu/guest/io.sh, HOSTCHECK=1) is verified on the
# host from the namespace's image file after the VM exited.
host_verify() {
	local name=$1 img=$2 log=$LOGS/$1.hostcheck.log
	[[ -n ${RNVME_TEST_ONLY:-} && ! $name =~ $RNVME_TEST_ONLY ]] && return
	if ! grep -q RNVME-HOSTCHECK-WRITTEN "$LOGS/$name.results"; then
		bad "$name: host verifies the image (32 MiB, crc32c)" "the guest did not write the data"
	elif fio --name=hostcheck --filename="$img" --rw=randwrite --bs=64k --size=32M \
		--ioengine=psync --verify=crc32c --verify_only --verify_fatal=1 --randseed=1234 \
		--verify_state_save=0 --output="$log" && ! grep -qE "err=[ ]*[1-9]|verify: bad" "$log"; then
		ok "$name: host verifies the image (32 MiB, crc32c)"
		HOST_VERIFIED_MIB=$((HOST_VERIFIED_MIB + 32))
	else
		bad "$name: host verifies the image (32 MiB, crc32c)" "$(grep -iE 'verify|err' "$log" | head -3)"
	fi
}

# image_expect SCENARIO IMAGE-DIR: the data a guest asked for (RNVME-IMAGE-EXPECT NAME
# CTRL NSID OFFSET LENGTH SHA256 on its results channel) is in the namespace's image file
# after the VM exited.
image_expect() {
	local name=$1 dir=$2 t c n off len sum got
	[[ -n ${RNVME_TEST_ONLY:-} && ! $name =~ $RNVME_TEST_ONLY ]] && return
	while read -r _ t c n off len sum; do
		got=$(tail -c +$((off + 1)) "$dir/ctrl$c-ns$n.img" 2>/dev/null | head -c "$len" | sha256sum | cut -d' ' -f1)
		if [ "$got" = "$sum" ]; then ok "$name: $t"; else
			bad "$name: $t" "bytes $off+$len of ctrl$c-ns$n.img differ from what the guest wrote"
		fi
	done < <(tr -d '\r' <"$LOGS/$name.results" 2>/dev/null | grep -a '^RNVME-IMAGE-EXPECT ')
}

# trace_check SCENARIO WHAT TRACE-FILE REGEX: the device saw a command matching REGEX.
trace_check() {
	[[ -n ${RNVME_TEST_ONLY:-} && ! $1 =~ $RNVME_TEST_ONLY ]] && return
	if grep -qE "$4" "$3" 2>/dev/null; then ok "$1: $2"; else
		bad "$1: $2" "no '$4' in the QEMU trace $3"
	fi
}

# After fsync returns in the guest, the data must be in the host image even if QEMU is
# killed at once, and a FLUSH must have reached the device.
flush_test() {
	local flavour=$1 name=flush-$1
	[[ -n ${RNVME_TEST_ONLY:-} && ! $name =~ $RNVME_TEST_ONLY ]] && return
	local dir=$RNVME_ROOT/out/test-images/$name log=$LOGS/$name.console.log
	local res=$LOGS/$name.results
	rm -rf "$dir"
	mkdir -p "$dir"
	scenario_start "$name" "$flavour"
	"$RNVME_ROOT/qemu/run" --flavour "$flavour" --module "$RNVME_ROOT/out/$flavour-test/rnvme.ko" --quiet --log "$log" --ctrls 1 \
		--backend image --image-dir "$dir" --size 64M --pidfile "$dir/qemu.pid" \
		--results "$res" --trace pci_nvme_io_cmd,pci_nvme_enqueue_req_completion \
		--trace-file "$LOGS/$name.trace" \
		-- 'sh /guest/flush.sh' >"$LOGS/$name.run.log" 2>&1 &
	local runner=$! sum="" i=0
	# Up to 5 minutes for the guest to say fsync returned, then QEMU is killed at once.
	while [ $i -lt 1500 ]; do
		sum=$(grep -aoE 'RNVME-FSYNC-DONE [0-9a-f]{64}' "$res" 2>/dev/null | cut -d' ' -f2 || true)
		[ -n "$sum" ] && break
		kill -0 $runner 2>/dev/null || break
		sleep 0.2
		i=$((i + 1))
	done
	echo "watcher: stopped after $i polls; fsync line: ${sum:-missing}" >"$LOGS/$name.watcher.log"
	# QEMU writes its pid file as it starts; kill it whatever happened, so nothing hangs.
	i=0
	while [ $i -lt 100 ] && [ ! -s "$dir/qemu.pid" ] && kill -0 $runner 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
	done
	[ -s "$dir/qemu.pid" ] && kill -9 "$(cat "$dir/qemu.pid")" 2>/dev/null
	wait $runner 2>/dev/null
	echo "$(($(date +%s) - SCENARIO_T0)) $name" >>"$LOGS/durations"
	guest_results "$name"
	# QEMU was killed: qemu/run's own verdict is lost, so check the kernel log here.
	if out=$("$RNVME_ROOT/qemu/run" --check-log "$log"); then
		ok "$name: kernel log clean"
	else
		bad "$name: kernel log clean" "kernel reported problems:
$out"
	fi
	if [ -z "$sum" ]; then
		bad "$name: fsync returned in the guest" "no RNVME-FSYNC-DONE (log: $log)"
		bad "$name: fsynced data in the host image after QEMU was killed" "no fsync"
		bad "$name: a FLUSH reached the device" "no fsync"
		return
	fi
	ok "$name: fsync returned in the guest"
	local got
	got=$(head -c $((16 << 20)) "$dir/ctrl0-ns1.img" | sha256sum | cut -d' ' -f1)
	if [ "$got" = "$sum" ]; then
		ok "$name: fsynced data in the host image after QEMU was killed"
		HOST_VERIFIED_MIB=$((HOST_VERIFIED_MIB + 16))
	else
		bad "$name: fsynced data in the host image after QEMU was killed" "sha256 differs"
	fi
	# After the last write the device completed (QEMU's trace: scripts/flush_order.py).
	if why=$(python3 "$RNVME_ROOT/scripts/flush_order.py" "$LOGS/$name.trace"); then
		ok "$name: a FLUSH reached the device"
	else
		bad "$name: a FLUSH reached the device" "$why"
	fi
}

# bg_vm_done NAME RUNNER QMP: waits for a VM started in the background with a QMP socket,
# then reports it as run_vm does.
bg_vm_done() {
	wait "$2"
	local rc=$? failed=$FAIL f
	rm -f "$3"
	guest_results "$1"
	vm_status "$1" $rc
	# What QEMU answered the host's commands, when something failed.
	if [ $FAIL -gt $failed ]; then
		for f in "$LOGS/$1".hmp.log "$LOGS/$1".qmp.log; do
			[ -s "$f" ] && echo "  ${f##*/} (last lines):" && tail -5 "$f" | cut -c1-300 | sed 's/^/    /'
		done
	fi
	return 0
}

# hmp_vm NAME FLAVOUR QEMU-OPTIONS... -- GUEST-COMMAND: run_vm, with the guest asking the
# host for QEMU monitor commands: each line "RNVME-HMP SEQ COMMAND..." on its results
# channel is run once, in order, and its reply logged ($LOGS/NAME.hmp.log). The guest
# checks the effect itself (an injected PCI error reported, recovered).
hmp_vm() {
	local name=$1 flavour=$2
	shift 2
	[[ -n ${RNVME_TEST_ONLY:-} && ! $name =~ $RNVME_TEST_ONLY ]] && return
	local log=$LOGS/$name.console.log qmp=/tmp/rnvme-qmp-$$-$name.sock res=$LOGS/$name.results
	scenario_start "$name" "$flavour"
	scenario_images "$name" "$flavour" "$@"
	"$RNVME_ROOT/qemu/run" --flavour "$flavour" --module "$RNVME_ROOT/out/$flavour-test/rnvme.ko" --quiet --log "$log" \
		--results "$res" --trace "$TRACE_EVENTS" --trace-file "$LOGS/$name.trace" \
		--qmp "$qmp" "${IMAGE_OPT[@]}" "$@" >"$LOGS/$name.run.log" 2>&1 &
	local runner=$! done=0 dumped=0 seq cmd
	while kill -0 $runner 2>/dev/null; do
		while read -r seq cmd; do
			[ "$seq" -eq $((done + 1)) ] || continue
			echo "$seq $cmd: $("$RNVME_ROOT/qemu/qmp" "$qmp" human-monitor-command \
				"$(python3 -c 'import json,sys; print(json.dumps({"command-line": sys.argv[1]}))' "$cmd")" 2>&1)" \
				>>"$LOGS/$name.hmp.log"
			done=$seq
		done < <(cat "$res" 2>/dev/null | tr -d '\r' | sed -n 's/^RNVME-HMP //p')
		# The submission queues, when the guest asks (lib.sh's sq_dump).
		while read -r seq cmd; do
			[ "$seq" -eq $((dumped + 1)) ] || continue
			python3 "$RNVME_ROOT/scripts/sqe.py" dump "$LOGS/$name.trace" "$qmp" \
				"$LOGS/$name.sqe/$cmd" >>"$LOGS/$name.sqe.log" 2>&1 ||
				echo "dump $cmd failed" >>"$LOGS/$name.sqe.log"
			dumped=$seq
		done < <(mkdir -p "$LOGS/$name.sqe"; cat "$res" 2>/dev/null | tr -d '\r' | sed -n 's/^RNVME-SQDUMP //p')
		sleep 0.2
	done
	bg_vm_done "$name" $runner "$qmp"
	if [ -n "$IMAGES" ]; then image_expect "$name" "$IMAGES"; fi
}

# Controller removal under I/O: the host deletes nvme1 over QMP when the guest is ready,
# and adds it back when the guest saw it go.
hotplug_test() {
	local flavour=$1 name=hotplug-$1
	[[ -n ${RNVME_TEST_ONLY:-} && ! $name =~ $RNVME_TEST_ONLY ]] && return
	local log=$LOGS/$name.console.log qmp=/tmp/rnvme-qmp-$$-$name.sock res=$LOGS/$name.results
	scenario_start "$name" "$flavour"
	"$RNVME_ROOT/qemu/run" --flavour "$flavour" --module "$RNVME_ROOT/out/$flavour-test/rnvme.ko" --quiet --log "$log" --ctrls 2 \
		--results "$res" --trace "$TRACE_EVENTS" --trace-file "$LOGS/$name.trace" \
		--qmp "$qmp" --timeout "$T" -- 'sh /guest/hotplug.sh' >"$LOGS/$name.run.log" 2>&1 &
	local runner=$! step=ready i
	for i in $(seq $((T * 5))); do
		kill -0 $runner 2>/dev/null || break
		if [ $step = ready ] && grep -q RNVME-HOTPLUG-READY "$res" 2>/dev/null; then
			"$RNVME_ROOT/qemu/qmp" "$qmp" device_del '{"id": "nvme1"}' >>"$LOGS/$name.qmp.log" 2>&1
			step=removed
		elif [ $step = removed ] && grep -q RNVME-HOTPLUG-REMOVED "$res" 2>/dev/null; then
			# An nvme-ns cannot be hot-added to a controller's bus; the controller's own
			# drive property gives it namespace 1. QEMU may still hold the drive for the
			# removed controller for a moment after the guest saw it go ("permission
			# conflict on node c1n1", seen once; "Duplicate device ID" while the slower debug
			# kernel has not yet ejected it): try again, for up to a minute.
			local try reply
			for try in $(seq 120); do
				reply=$("$RNVME_ROOT/qemu/qmp" "$qmp" device_add \
					'{"driver": "nvme", "id": "nvme1", "serial": "rnvme-s1", "drive": "c1n1"}' 2>&1)
				echo "$reply" >>"$LOGS/$name.qmp.log"
				echo "$reply" | grep -q '"error"' || break
				sleep 0.5
			done
			step=added
		fi
		sleep 0.2
	done
	bg_vm_done "$name" $runner "$qmp"
}

# --- the scenario pool ---------------------------------------------------------------
# A VM under TCG keeps the two host cores about half busy (its vCPUs wait for the device
# models and the big lock, its guest waits out timeouts and sleeps): RNVME_TEST_JOBS
# scenarios (default 2) run at once, each in a subshell of its own whose output and results
# are printed, and counted, as a block when it ends. The pool's own jobs are tracked by pid:
# the debug kernel's background build is a job of this shell too.
JOBS=${RNVME_TEST_JOBS:-2}
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || die "RNVME_TEST_JOBS must be a positive number, not '$JOBS'"
declare -A RUNNING=()
# reap_one: waits for one scenario of the pool to end, prints its block, adds its counts.
reap_one() {
	local pid name p f n line
	wait -n -p pid "${!RUNNING[@]}"
	name=${RUNNING[$pid]}
	unset "RUNNING[$pid]"
	cat "$LOGS/$name.out"
	if read -r p f n <"$LOGS/$name.tally" 2>/dev/null; then
		PASS=$((PASS + p)) FAIL=$((FAIL + f)) HOST_VERIFIED_MIB=$((HOST_VERIFIED_MIB + n))
		while IFS= read -r line; do FAILED_NAMES+=("$line"); done <"$LOGS/$name.failed"
	else
		bad "$name: scenario ended" "its subshell left no tally (see $LOGS/$name.out)"
	fi
}
# job NAME FUNCTION ARGS...: runs a scenario in the pool, once a slot is free; nothing if
# NAME is not selected.
job() {
	local name=$1
	shift
	[[ -n ${RNVME_TEST_ONLY:-} && ! $name =~ $RNVME_TEST_ONLY ]] && return
	while [ ${#RUNNING[@]} -ge "$JOBS" ]; do reap_one; done
	(
		PASS=0 FAIL=0 HOST_VERIFIED_MIB=0 FAILED_NAMES=()
		"$@"
		echo "$PASS $FAIL $HOST_VERIFIED_MIB" >"$LOGS/$name.tally"
		printf '%s\n' "${FAILED_NAMES[@]}" | grep -v '^$' >"$LOGS/$name.failed"
	) >"$LOGS/$name.out" 2>&1 &
	RUNNING[$!]=$name
	say "VM scenario $name started"
}
# alone NAME FUNCTION ARGS...: as job, for a scenario that times the drivers against each
# other: it starts once no other scenario runs, and the next starts once it has ended.
alone() {
	[[ -n ${RNVME_TEST_ONLY:-} && ! $1 =~ $RNVME_TEST_ONLY ]] && return
	reap_all
	job "$@"
	reap_all
}
# reap_all: waits for every scenario still running.
reap_all() {
	while [ ${#RUNNING[@]} -gt 0 ]; do reap_one; done
}

# The I/O path, on file-backed namespaces so data is real and checked on the host.
io_scenario() {
	run_vm "io-$flavour" "$flavour" --ctrls 1 --ns 2 --backend image --timeout $T \
		--image-dir "$img/io" --size $IO_SIZE -- "NS=2 $IO_ENV sh /guest/io.sh"
	host_verify "io-$flavour" "$img/io/ctrl0-ns2.img"
	trace_check "io-$flavour" "SGLs carry large transfers" "$LOGS/io-$flavour.trace" \
		'pci_nvme_map_sgl type 0x3'
}
# verified_vm NAME ...: run_vm, then on the base kernel the host checks the image of the
# scenario's first namespace ($img/SCENARIO/ctrl0-ns1.img).
verified_vm() {
	run_vm "$@"
	[ "$flavour" = base ] || return 0
	host_verify "$1" "$img/${1%-"$flavour"}/ctrl0-ns1.img"
}

for flavour in $FLAVOURS; do
	if [ "$flavour" = debug ] && [ -n "${BG_KERNEL:-}" ]; then
		say "waiting for the debug kernel's build (log: $LOGS/kernel-debug.log)"
		wait "$BG_KERNEL" || say "the debug kernel's build failed; trying again: $(tail -3 "$LOGS/kernel-debug.log")"
		trap - EXIT
		BG_KERNEL=
	fi
	say "building rnvme for the $flavour kernel"
	# The VMs load the test build (fault injection compiled in: out/FLAVOUR-test).
	if ! make -s -C "$RNVME_ROOT" module FLAVOUR="$flavour" TEST_HOOKS=1 \
		>"$LOGS/build-$flavour.log" 2>&1; then
		bad "build-$flavour: rnvme.ko, no warnings" "$(tail -5 "$LOGS/build-$flavour.log")"
		continue
	fi
	ok "build-$flavour: rnvme.ko, no warnings"
	# The production build (what make and make bench build) has none of the test hooks: no
	# probe_fault_step parameter, no fault files (their names are in the test build).
	if [ "$flavour" = base ]; then
		if ! make -s -C "$RNVME_ROOT" module FLAVOUR="$flavour" \
			>"$LOGS/build-$flavour-production.log" 2>&1; then
			bad "build-$flavour: production rnvme.ko, no warnings" \
				"$(tail -5 "$LOGS/build-$flavour-production.log")"
		else
			ok "build-$flavour: production rnvme.ko, no warnings"
			prod=$RNVME_ROOT/out/$flavour/rnvme.ko test_ko=$RNVME_ROOT/out/$flavour-test/rnvme.ko
			hooks_in() { echo "$(/sbin/modinfo -F parm "$1" | grep -c -e '^probe_fault_step:' -e '^probe_delay_ms:')" \
				"$(grep -c -a -e fail_dma_map -e admin_timeout_delay_ms "$1")"; }
			expect_hooks=$(hooks_in "$test_ko") got_hooks=$(hooks_in "$prod")
			if [ "${expect_hooks%% *}" != 2 ] || [ "${expect_hooks##* }" = 0 ]; then
				bad "build-$flavour: production build without test hooks" \
					"the test build shows none to compare with: $expect_hooks"
			elif [ "$got_hooks" = "0 0" ]; then
				ok "build-$flavour: production build without test hooks"
			else
				bad "build-$flavour: production build without test hooks" \
					"parameter, fault file names: $got_hooks (test build: $expect_hooks)"
			fi
		fi
	fi
	# Every module parameter has a description in modinfo and a row in the README.
	if [ "$flavour" = base ]; then
		nparm=0
		while IFS= read -r line; do
			p=${line%%:*} desc=${line#*:}
			nparm=$((nparm + 1))
			if [ -z "${desc// /}" ] || [ "$desc" = "$line" ]; then
				bad "modinfo-$flavour: $p documented" "no description"
			elif ! grep -q "^| \`$p\` |" "$RNVME_ROOT/README.md"; then
				bad "modinfo-$flavour: $p documented" "not in the README's parameter table"
			else
				ok "modinfo-$flavour: $p documented"
			fi
		done < <(/sbin/modinfo -F parm "$RNVME_ROOT/out/$flavour-test/rnvme.ko")
		[ $nparm -gt 0 ] || bad "modinfo-$flavour: parameters listed" "modinfo shows none"
		# The harness's own tests: qemu/run's retry of a kernel that failed to boot (with a
		# stand-in for QEMU), the counted cost's scope (on this kernel's build), make
		# bench's verdict on a run.
		for t in qemu_run_test.py cost_scope_test.py bench_report_test.py; do
			while IFS= read -r line; do
				case $line in
				"PASS "*) ok "harness-$flavour: ${line#PASS }" ;;
				"FAIL "*)
					rest=${line#FAIL }
					bad "harness-$flavour: ${rest%%: *}" "${rest#*: }"
					;;
				esac
			done < <(python3 "$RNVME_ROOT/scripts/$t" "$("$RNVME_ROOT/scripts/kdir.sh" "$flavour")" 2>&1)
		done
	fi

	# Every scenario runs on both kernels. The debug kernel (KASAN, lockdep, kmemleak,
	# DMA-API debugging, ...) runs several times slower under TCG: it gets the shorter
	# variants (fewer controllers, the quick I/O matrix, fewer fuzz ioctls and load cycles)
	# and longer VM timeouts.
	img=$RNVME_ROOT/out/test-images/$flavour
	rm -rf "$img"
	mkdir -p "$img"/{io,lba4k,mdts1,queues1,msix1,poll,aen,errors,timeout,stress,dead,format,busmaster,swiotlb,power,aer,mpath,storm,sriov,cmb,remove}
	if [ "$flavour" = base ]; then
		T=900 BASIC_CTRLS=3 BASIC_NS=2 IO_ENV='LBA=512 HOSTCHECK=1' IO_SIZE=256M FUZZ_N=3000 URING_SIZE=16M
		CYCLES=50 SLEEP_ROUNDS=20 SLEEP_FIO_S=3 SPECIAL_ENV='QUICK=1 HOSTCHECK=1'
	else
		T=1800 BASIC_CTRLS=2 BASIC_NS=1 IO_ENV='QUICK=1 FIO_SIZE=8M HOSTCHECK=1' IO_SIZE=128M FUZZ_N=1000 URING_SIZE=8M
		CYCLES=10 SLEEP_ROUNDS=9 SLEEP_FIO_S=6 SPECIAL_ENV='QUICK=1 FIO_SIZE=8M'
	fi

	# Scale beside the C driver, each alone in turn on the same eight controllers (the first
	# with many namespaces), queues for 16 possible vCPUs (one per CPU), the work on as
	# many online as the host has cores: on base, 64 namespaces, depths 256 and 1024, rnvme's
	# memory per I/O queue within 1.2x C's and its time to every disk within 1.5x C's; on
	# debug the same bring-ups and unbinds under its checkers, smaller (its memory and times
	# measure the checkers, not the drivers).
	# On base it times the drivers against each other: no other VM runs beside it.
	if [ "$flavour" = base ]; then
		SCALE_VM=(--smp 16 --ns-of 0:64) SCALE_ENV="CHECK=1 NS_BIG=64 ONLINE=$(nproc)" SCALE_RUN=alone
	else
		SCALE_VM=(--smp 4 --ns-of 0:16) SCALE_ENV="CHECK=0 NS_BIG=16 DEPTHS=1024 ONLINE=$(nproc)"
		SCALE_RUN=job
	fi
	"$SCALE_RUN" "scale-$flavour" run_vm "scale-$flavour" "$flavour" \
		--ctrls 8 "${SCALE_VM[@]}" --backend null \
		--size 16M --timeout $T -- "$SCALE_ENV sh /guest/scale.sh"
	# Bring-up: probe, identify, unbind/bind, 20 load cycles, beside the C driver.
	job "basic-$flavour" run_vm "basic-$flavour" "$flavour" --ctrls $BASIC_CTRLS --ns $BASIC_NS --timeout $T \
		-- "CTRLS=$BASIC_CTRLS NS=$BASIC_NS SERIAL_PREFIX=rnvme-s sh /guest/basic.sh"
	# No MSI or MSI-X on the platform: the admin queue falls back to (shared) INTx.
	job "intx-$flavour" run_vm "intx-$flavour" "$flavour" --ctrls 2 --append pci=nomsi --timeout $T \
		-- 'CTRLS=2 NS=1 SERIAL_PREFIX=rnvme-s IRQ=INTx sh /guest/basic.sh'

	# The I/O path, on file-backed namespaces so data is real and checked on the host.
	job "io-$flavour" io_scenario
	# Device errors injected under the emulated controllers (QEMU blkdebug).
	job "errors-$flavour" run_vm "errors-$flavour" "$flavour" --ctrls 2 --backend image --image-dir "$img/errors" \
		--size 64M --blkdebug "$RNVME_ROOT/qemu/guest/errors.rules" --timeout $T \
		-- 'sh /guest/errors.sh'
	# I/O slower than its timeout: abort, controller reset, bounded retries.
	job "timeout-$flavour" run_vm "timeout-$flavour" "$flavour" --ctrls 1 --ns 3 --backend image --timeout $T \
		--image-dir "$img/timeout" --size 64M --slow-ns 2 --slow-ns 3 --slow-ms 5000 \
		-- 'sh /guest/timeout.sh'
	# A controller that stops answering under fio: I/O fails within seconds, unbind
	# is clean, a rebind after it answers again probes it.
	job "dead-$flavour" run_vm "dead-$flavour" "$flavour" --ctrls 1 --ns 2 --backend image --image-dir "$img/dead" \
		--size 128M --timeout $T -- 'sh /guest/dead.sh'
	# Bus Master Enable cleared under fio: the reset restores it (rnvme and the C driver).
	job "busmaster-$flavour" run_vm "busmaster-$flavour" "$flavour" --ctrls 2 --backend image --image-dir "$img/busmaster" \
		--size 64M --timeout $T -- 'sh /guest/busmaster.sh'
	# The controller core beside the C driver: a passthrough and a rescan do not wait
	# behind a slow command (namespace 2 answers after 3 s); a namespace rnvme (16 KiB blocks over 8 KiB transfers) fails alone. The block layer warns
	# at the C driver's limits for it; rnvme checks them first.
	job "core-$flavour" run_vm "core-$flavour" "$flavour" --ctrls 2 --ns 4 --mdts 1 --backend image --size 64M \
		--slow-ns 2 --slow-ms 3000 --ns-extra 3:logical_block_size=16384,physical_block_size=16384 \
		--ns-extra 4:zoned=true,zoned.zone_size=64K,zoned.zone_capacity=64K \
		--known-warning blk_validate_limits --timeout $T -- 'SLOW_MS=3000 sh /guest/core.sh'
	# A concurrency storm on rnvme and the C driver at once: fio verify, passthrough, admin
	# commands, hwmon, rescans, resets, namespace attach/detach in loops; an FLR and a
	# system sleep (`make storm`: longer, more rounds). The block layer warns when the C
	# driver's reset unquiesces a namespace queue its scan added meanwhile (`nvme_alloc_ns`
	# does not quiesce a new queue of a stopped controller, nor does blk-mq add it to the
	# tag set's quiesce); rnvme takes a new queue into the set's quiesces (`GenDisk`), and
	# the same warning with an rnvme frame still fails the run (unless C's came first: it
	# warns once per boot). A hung storm ends at the guest's watchdog, or, when the hang is
	# in a system sleep (user space frozen, the watchdog too), at this timeout: several
	# times the debug kernel's storm, half the scenario default there.
	job "storm-$flavour" run_vm "storm-$flavour" "$flavour" --ctrls 2 --ns 3 --subsys --detached 3 --backend image \
		--image-dir "$img/storm" --size 64M --timeout $((900 + 4 * ${RNVME_STORM_S:-20})) \
		--known-warning blk_mq_unquiesce_queue \
		-- "STORM_S=${RNVME_STORM_S:-20} ROUNDS=${RNVME_STORM_ROUNDS:-1} HICCUP=${RNVME_STORM_HICCUP:-1} WATCHDOG_S=${RNVME_STORM_WATCHDOG_S:-} sh /guest/storm.sh"
	# System sleep under fio (pm_test): suspend to RAM and to idle, hibernation; rnvme beside
	# the C driver, which the same transitions suspend.
	job "power-$flavour" run_vm "power-$flavour" "$flavour" --ctrls 2 --backend image --image-dir "$img/power" \
		--size 64M --timeout $T -- "ROUNDS=$SLEEP_ROUNDS FIO_S=$SLEEP_FIO_S sh /guest/power.sh"
	# PCIe errors injected by QEMU (AER) and a secondary bus reset under fio, on a q35
	# machine: rnvme beside the C driver, where recovery works and where it fails.
	job "aer-$flavour" hmp_vm "aer-$flavour" "$flavour" --machine q35 --ctrls 3 --untrained-ctrls 1 --backend image \
		--image-dir "$img/aer" --size 64M --timeout $T -- 'sh /guest/aer.sh'
	# Polled queues (io_uring IOPOLL) without interrupts.
	job "poll-$flavour" run_vm "poll-$flavour" "$flavour" --ctrls 2 --backend image --image-dir "$img/poll" \
		--size 64M --timeout $T -- 'sh /guest/poll.sh'
	# Metadata and protection information: eight formats, rnvme beside the C driver.
	job "meta-$flavour" run_vm "meta-$flavour" "$flavour" --ctrls 2 --ns 8 --backend image --size 64M \
		--ns-extra 1:ms=8,pi=1 --ns-extra 2:ms=8,pi=3 --ns-extra 3:ms=16,pi=1,pif=2 \
		--ns-extra 4:ms=16,pi=1 --ns-extra 5:ms=16,pi=2,pil=1 --ns-extra 6:ms=8 \
		--ns-extra 7:ms=8,mset=1,pi=1 --ns-extra 8:ms=8,mset=1 --timeout $T \
		-- 'sh /guest/meta.sh'
	job "lba4k-$flavour" verified_vm "lba4k-$flavour" "$flavour" --ctrls 1 --lba 4096 --backend image --timeout $T \
		--image-dir "$img/lba4k" --size 256M -- "LBA=4096 $SPECIAL_ENV sh /guest/io.sh"
	# MDTS = 1 (8 KiB transfers): 1 MiB requests are split by the block layer.
	job "mdts1-$flavour" verified_vm "mdts1-$flavour" "$flavour" --ctrls 1 --mdts 1 --backend image --timeout $T \
		--image-dir "$img/mdts1" --size 256M -- "$SPECIAL_ENV sh /guest/io.sh"
	# Fewer queues than CPUs, and one MSI-X vector shared by every queue.
	# With the deepest queues the controller takes (io_queue_depth=4096 is capped by
	# QEMU's CAP.MQES to 2048 entries).
	job "queues1-$flavour" verified_vm "queues1-$flavour" "$flavour" --ctrls 1 --max-qpairs 1 --backend image \
		--image-dir "$img/queues1" --size 256M --timeout $T \
		-- "$SPECIAL_ENV RNVME_ARGS=io_queue_depth=4096 DEEP=2048 EXPECT_QUEUES='1 I/O queues of depth 2048 on 2 MSI-X' sh /guest/io.sh"
	job "msix1-$flavour" verified_vm "msix1-$flavour" "$flavour" --ctrls 1 --msix 1 --backend image \
		--image-dir "$img/msix1" --size 256M --timeout $T \
		-- "$SPECIAL_ENV EXPECT_QUEUES='1 I/O queues of depth [0-9]+ on 1 MSI-X' sh /guest/io.sh"
	# nvme-cli through /dev/rnvme0 and its disks, compared with the C driver on an
	# identical controller; ioctl edge cases, a bounded fuzz, unbind with open files.
	# Namespace identifiers: namespace 1 has a UUID and an EUI64, namespace 2 an EUI64
	# only (its UUID all zeroes: QEMU's default is a random one), the same on both
	# controllers; QEMU 7.2 has no NGUID property.
	job "cli-$flavour" run_vm "cli-$flavour" "$flavour" --ctrls 2 --ns 2 --backend image --size 64M \
		--ns-extra "1:uuid=$NS1_UUID,eui64=$NS1_EUI64" \
		--ns-extra "2:uuid=00000000-0000-0000-0000-000000000000,eui64=$NS2_EUI64" \
		--timeout $T -- "FUZZ_N=$FUZZ_N NS1_UUID=$NS1_UUID sh /guest/cli.sh"
	# Quirks: QEMU's old Intel ID (the table's identify_cns, disable_write_zeroes,
	# bogus_nid) and the quirks= parameter, rnvme beside the C driver given the same.
	job "quirks-$flavour" run_vm "quirks-$flavour" "$flavour" --ctrls 2 --ctrl-props use-intel-id=on \
		--backend image --size 64M --ns-extra "1:uuid=$NS1_UUID,eui64=$NS1_EUI64" \
		--trace "$TRACE_EVENTS,pci_nvme_identify*,pci_nvme_map_prp" --timeout $T -- 'sh /guest/quirks.sh'
	# Logical blocks of 16 KiB (larger than a page), rnvme beside the C driver.
	job "lbs-$flavour" run_vm "lbs-$flavour" "$flavour" --ctrls 2 --lba 16384 --backend image --size 512M \
		--timeout $T -- 'sh /guest/lbs.sh'
	# I/O command sets: a zoned namespace beside an NVM one, rnvme beside the C driver.
	job "cmdset-$flavour" run_vm "cmdset-$flavour" "$flavour" --ctrls 2 --ns 2 --backend image --size 64M \
		--ns-extra "2:zoned=true,zoned.zone_size=4M,zoned.zone_capacity=4M" \
		--trace "$TRACE_EVENTS,pci_nvme_mmio_cfg" --timeout $T -- 'sh /guest/cmdset.sh'
	# Zoned namespaces: host-managed zoned disks (8 MiB zones of 6 MiB capacity, at most
	# 12 open and 14 active, Zone Append up to 128 KiB), rnvme beside the C driver.
	job "zoned-$flavour" run_vm "zoned-$flavour" "$flavour" --ctrls 2 --backend image --size 512M \
		--ctrl-props zoned.zasl=5 \
		--ns-extra "1:zoned=true,zoned.zone_size=8M,zoned.zone_capacity=6M,zoned.max_open=12,zoned.max_active=14" \
		--timeout $T -- 'sh /guest/zoned.sh'
	# Temperatures in hwmon and health and error events, beside the C driver; the host
	# raises health warnings (QMP qom-set) when the guest asks.
	job "health-$flavour" hmp_vm "health-$flavour" "$flavour" --ctrls 2 --backend image --size 64M --timeout $T \
		--trace "$TRACE_EVENTS,pci_nvme_aer_post_cqe,pci_nvme_get_log,pci_nvme_setfeat" -- 'sh /guest/health.sh'
	# io_uring passthrough on the generic devices, beside the C driver's.
	job "uring-$flavour" run_vm "uring-$flavour" "$flavour" --ctrls 2 --backend image --size 64M --timeout $T \
		-- "SIZE=$URING_SIZE sh /guest/uring.sh"
	# Namespace attach/detach: asynchronous events add and remove disks.
	job "aen-$flavour" run_vm "aen-$flavour" "$flavour" --ctrls 1 --ns 3 --subsys --detached 2 --detached 3 \
		--slow-ns 3 --slow-ms 3000 \
		--backend image --image-dir "$img/aen" --size 64M --timeout $T -- 'sh /guest/aen.sh'
	# Controller limits (DMRSL, DMRL, WZSL) against the C driver; a whole-disk discard.
	job "limits-$flavour" run_vm "limits-$flavour" "$flavour" --ctrls 2 --size 8G --timeout $T -- 'sh /guest/limits.sh'
	# Every DMA through bounce buffers (swiotlb=force): offsets kept, transfers bounded.
	job "swiotlb-$flavour" run_vm "swiotlb-$flavour" "$flavour" --ctrls 2 --append swiotlb=force --backend image \
		--image-dir "$img/swiotlb" --size 128M --timeout $T -- 'sh /guest/swiotlb.sh'
	# Format NVM under a live disk (two controllers sharing one namespace: rnvme and the C
	# driver), a rescan after a format behind rnvme's back, an unservable format.
	job "format-$flavour" run_vm "format-$flavour" "$flavour" --ctrls 2 --shared-subsys --lba 4096 --backend image \
		--image-dir "$img/format" --size 64M --timeout $T -- 'sh /guest/format.sh'
	# Native multipath: two subsystems of two controllers each (rnvme's, C's), a head disk
	# per namespace; policies, a path's reset and removal (QMP) under fio verify.
	job "mpath-$flavour" hmp_vm "mpath-$flavour" "$flavour" --ctrls 4 --subsys-pairs --ns 2 --private-ns 2 \
		--backend image --image-dir "$img/mpath" --size 64M --timeout $T -- 'sh /guest/mpath.sh'
	# SR-IOV beside the C driver: virtual functions made, given resources through
	# Virtualization Management, bound, their data verified, removed (q35: the extended
	# capabilities; QEMU wants an NVM subsystem for SR-IOV).
	job "sriov-$flavour" run_vm "sriov-$flavour" "$flavour" --machine q35 --subsys --ctrls 2 \
		--ctrl-props sriov_max_vfs=2,sriov_vq_flexible=8,sriov_vi_flexible=4 \
		--backend image --image-dir "$img/sriov" --size 64M --timeout $T -- 'sh /guest/sriov.sh'
	# The Controller Memory Buffer beside the C driver: published as peer-to-peer memory,
	# the submission queues in it (QEMU's trace), data verified, and without it.
	job "cmb-$flavour" run_vm "cmb-$flavour" "$flavour" --ctrls 2 --ctrl-props cmb_size_mb=2 --smp 16 \
		--backend image --image-dir "$img/cmb" --size 64M --timeout $T -- 'sh /guest/cmb.sh'
	# A PCI function removed through sysfs under reads and writes and found again by a
	# rescan, beside the C driver (what C's delete_controller does for fabrics controllers).
	job "remove-$flavour" run_vm "remove-$flavour" "$flavour" --ctrls 2 --backend image \
		--image-dir "$img/remove" --size 64M --timeout $T -- 'sh /guest/remove.sh'
	# A Format NVM freezing many heads and disks at once, rnvme beside the C driver: within
	# lockdep's depth of held locks per task.
	job "manyns-$flavour" run_vm "manyns-$flavour" "$flavour" --ctrls 4 --subsys-pairs --ns 25 --backend null \
		--size 16M --timeout $T -- 'NS=25 sh /guest/manyns.sh'
	# Every field of the commands rnvme submits, read from the submission queues (guest
	# memory, over QMP) after its requests, beside the C driver's: FUA, PRINFO and the
	# reference tag, LBAs past 2^32 on an 8 TiB namespace, NLB, Write Zeroes, the Abort
	# that follows a timeout.
	job "sqe-$flavour" hmp_vm "sqe-$flavour" "$flavour" --ctrls 2 --ns 3 --slow-ns 3 --slow-ms 5000 \
		--backend image --size 8T \
		--ns-extra 2:ms=8,pi=1 --trace "$TRACE_EVENTS,pci_nvme_mmio_asqaddr*,pci_nvme_mmio_aqattr" \
		--timeout $T -- 'sh /guest/sqe.sh'
	job "flush-$flavour" flush_test "$flavour"
	job "hotplug-$flavour" hotplug_test "$flavour"
	# 4 controllers probed at once, load/unload cycles with I/O in between.
	job "stress-$flavour" run_vm "stress-$flavour" "$flavour" --ctrls 4 --backend image --image-dir "$img/stress" \
		--size 16M --timeout $T -- "CTRLS=4 CYCLES=$CYCLES sh /guest/stress.sh"
	# A probe failing at each of its steps unwinds cleanly (kmemleak and the other
	# checkers watching on the debug kernel).
	job "probefail-$flavour" run_vm "probefail-$flavour" "$flavour" --ctrls 2 --timeout $T \
		-- 'CTRLS=2 sh /guest/probefail.sh'
done
reap_all

# Bytes written through rnvme and read back and compared (fio verify, dd + cmp), plus the
# host's check of the image.
# Every name reported against the manifest: nothing missing, duplicated or unknown.
python3 "$RNVME_ROOT/scripts/manifest.py" check "$MANIFEST" "$LOGS/seen" "$FLAVOURS" \
	"${RNVME_TEST_ONLY:-}" >"$LOGS/manifest-check" 2>&1
mrc=$?
while IFS= read -r line; do
	case $line in
	"FAIL "*)
		rest=${line#FAIL }
		FAIL=$((FAIL + 1))
		FAILED_NAMES+=("manifest: $rest")
		echo "FAIL  manifest: $rest"
		;;
	*) echo "$line" ;;
	esac
done <"$LOGS/manifest-check"
if [ $mrc -ne 0 ] && ! grep -q '^FAIL ' "$LOGS/manifest-check"; then
	FAIL=$((FAIL + 1))
	FAILED_NAMES+=("manifest: check ran")
	echo "FAIL  manifest: check ran (exit $mrc)"
fi

verified=$(cat "$LOGS"/*.results 2>/dev/null | tr -d '\r' | grep -aoE '^RNVME-VERIFIED [0-9.]+[KMG]i?B' |
	awk '{v=$2; m=1; if (v ~ /KiB$/) m=1024; if (v ~ /MiB$/) m=1048576; if (v ~ /GiB$/) m=1073741824;
	sub(/[KMG]i?B$/, "", v); s += v * m} END {printf "%.0f", s}')
echo
echo "data verified: $((verified / 1048576)) MiB in the guests, $HOST_VERIFIED_MIB MiB on the host from images"
if [ -s "$LOGS/durations" ]; then
	echo "VM scenarios: $(awk '{s += $1} END {print s}' "$LOGS/durations") s in all; slowest:" \
		"$(sort -rn "$LOGS/durations" | head -8 | awk '{printf "%s%s %d s", (NR > 1 ? ", " : ""), $2, $1}')"
fi
if [ $FAIL -gt 0 ]; then
	echo "failed:"
	printf '  %s\n' "${FAILED_NAMES[@]}"
	echo "logs: $LOGS"
fi
echo "selection: $SELECTION"
echo "$PASS passed, $FAIL failed"
[ $FAIL -eq 0 ]
