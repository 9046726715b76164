#!/usr/bin/env bash
# `make test`: the host unit tests, then every VM scenario on the test kernels.
#
# Each guest test prints `RNVME-TEST PASS|FAIL name`; each VM run adds one more test that
# passes only if the guest finished and its kernel log has no WARNING/BUG/Oops/KASAN/
# lockdep/hung-task report. The last line is `N passed, M failed`; the exit status is
# non-zero if anything failed.
#
#   RNVME_TEST_FLAVOURS="base debug"   kernels to run the VM scenarios on
#   RNVME_TEST_ONLY=regex              only scenarios whose name matches
. "$(dirname "$0")/common.sh"
set +e

FLAVOURS=${RNVME_TEST_FLAVOURS:-"base debug"}
LOGS=$RNVME_ROOT/out/test-logs
rm -rf "$LOGS"
mkdir -p "$LOGS"
PASS=0
FAIL=0
FAILED_NAMES=()

ok() {
	PASS=$((PASS + 1))
	echo "PASS  $1"
}
bad() {
	FAIL=$((FAIL + 1))
	FAILED_NAMES+=("$1")
	echo "FAIL  $1${2:+: $2}"
}

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

# --- VM scenarios ----------------------------------------------------------------------
# run_vm NAME FLAVOUR QEMU-OPTIONS... -- GUEST-COMMAND
run_vm() {
	local name=$1 flavour=$2
	shift 2
	if [ -n "${RNVME_TEST_ONLY:-}" ] && ! [[ $name =~ $RNVME_TEST_ONLY ]]; then
		return
	fi
	local log=$LOGS/$name.console.log
	say "VM scenario $name ($flavour kernel)"
	"$RNVME_ROOT/qemu/run" --flavour "$flavour" --quiet --log "$log" "$@" \
		>"$LOGS/$name.run.log" 2>&1
	local rc=$?
	while IFS= read -r line; do
		case $line in
		"RNVME-TEST PASS "*) ok "$name: ${line#RNVME-TEST PASS }" ;;
		"RNVME-TEST FAIL "*)
			local rest=${line#RNVME-TEST FAIL }
			bad "$name: ${rest%%: *}" "${rest#*: }"
			;;
		esac
	done < <(grep -aoE 'RNVME-TEST (PASS|FAIL) .*' "$log" | tr -d '\r')
	case $rc in
	0 | 1) ok "$name: guest finished, kernel log clean" ;;
	3) bad "$name: guest finished, kernel log clean" "kernel reported problems:
$(grep -A20 'kernel reported problems' "$LOGS/$name.run.log" | tail -n +2)" ;;
	*) bad "$name: guest finished, kernel log clean" \
		"qemu/run exited $rc: $(tail -2 "$LOGS/$name.run.log" | tr '\n' ' ') (log: $log)" ;;
	esac
}

for flavour in $FLAVOURS; do
	say "building rnvme for the $flavour kernel"
	if ! make -s -C "$RNVME_ROOT" module FLAVOUR="$flavour" >"$LOGS/build-$flavour.log" 2>&1; then
		bad "build: rnvme.ko for $flavour kernel" "$(tail -5 "$LOGS/build-$flavour.log")"
		continue
	fi
	ok "build: rnvme.ko for $flavour kernel, no warnings"

	# Bring-up: probe, identify, unbind/bind, 20 load cycles, beside the C driver.
	# Three controllers with two namespaces each on the plain kernel; two with one on the
	# debug kernel, where kmemleak and DMA-API debugging referee the load cycles.
	if [ "$flavour" = base ]; then
		run_vm "basic-$flavour" "$flavour" --ctrls 3 --ns 2 \
			-- 'CTRLS=3 NS=2 SERIAL_PREFIX=rnvme-s sh /guest/basic.sh'
		# No MSI or MSI-X on the platform: the admin queue falls back to (shared) INTx.
		run_vm "intx-$flavour" "$flavour" --ctrls 2 --append pci=nomsi \
			-- 'CTRLS=2 NS=1 SERIAL_PREFIX=rnvme-s IRQ=INTx sh /guest/basic.sh'
	else
		run_vm "basic-$flavour" "$flavour" --ctrls 2 --ns 1 --timeout 1200 \
			-- 'CTRLS=2 NS=1 SERIAL_PREFIX=rnvme-s sh /guest/basic.sh'
	fi
done

echo
if [ $FAIL -gt 0 ]; then
	echo "failed:"
	printf '  %s\n' "${FAILED_NAMES[@]}"
	echo "logs: $LOGS"
fi
echo "$PASS passed, $FAIL failed"
[ $FAIL -eq 0 ]
