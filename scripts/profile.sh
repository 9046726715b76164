#!/usr/bin/env bash
# `make profile`: where the C driver and rnvme spend their instructions per 4 KiB read,
# per kernel function, counted by the icount QEMU plugin (one vCPU, QD1).
#
#   PROFILE_IOS=5000   reads per driver     PROFILE_TOP=40   functions listed
. "$(dirname "$0")/common.sh"

OUT=$RNVME_ROOT/out/profile
mkdir -p "$OUT" "$RNVME_ROOT/out/plugins"
make -s -C "$RNVME_ROOT" module FLAVOUR=base >"$OUT/build.log" 2>&1 ||
	die "build failed: $(tail -5 "$OUT/build.log")"
gcc -O2 -shared -fPIC -Wall -Werror -o "$RNVME_ROOT/out/plugins/icount.so" \
	"$RNVME_ROOT/qemu/plugins/icount.c" || die "building the icount plugin failed"
IOS=${PROFILE_IOS:-5000}
rm -f "$OUT/marks.txt"
"$RNVME_ROOT/qemu/run" --flavour base --quiet --log "$OUT/console.log" --timeout 1800 \
	--ctrls 2 --backend null --smp 1 \
	--extra=-plugin --extra="$RNVME_ROOT/out/plugins/icount.so,out=$OUT/marks.txt,profile=on" \
	-- "COST_IOS=$IOS sh /guest/profile.sh" >"$OUT/run.log" 2>&1 ||
	die "the profile VM failed: $(tail -5 "$OUT/run.log")"
python3 "$RNVME_ROOT/scripts/icount_profile.py" "$OUT/marks.txt" "$OUT/console.log" \
	"$("$RNVME_ROOT/scripts/kdir.sh" base)/System.map" --ios "$IOS" --top "${PROFILE_TOP:-40}"
