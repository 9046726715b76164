#!/usr/bin/env bash
# Builds the test kernel (allnoconfig + our fragments) into the cache, keyed by
# kernel version, flavour, fragment contents and toolchain, and prints its
# build directory (the KDIR for out-of-tree modules). A second run with
# nothing changed returns at once.
#
#   scripts/build-kernel.sh [base|debug|inline]
#
# inline: the base kernel with CONFIG_RUST_INLINE_HELPERS, built by clang-22 (the LLVM of
# rustc), for `make bench`/`make profile` to compare with (not used by `make test`).
. "$(dirname "$0")/common.sh"

FLAVOUR=${1:-${RNVME_FLAVOUR:-base}}
case $FLAVOUR in
base) FRAGMENTS=(base.config) ;;
debug) FRAGMENTS=(base.config debug.config) ;;
inline) FRAGMENTS=(base.config inline.config) ;;
*) die "unknown kernel flavour '$FLAVOUR' (base, debug or inline)" ;;
esac
use_llvm_of "$FLAVOUR"

SRC=$("$RNVME_ROOT/scripts/fetch-kernel.sh")
KVER=$(make -s -C "$SRC" kernelversion 2>/dev/null) || die "cannot read the version of $SRC"

key=$({
	echo "$SRC $KVER"
	for f in "${FRAGMENTS[@]}"; do cat "$RNVME_ROOT/scripts/config/$f"; done
	"$RUSTC" --version
	"clang-$LLVM_VERSION" --version | head -1
	"$BINDGEN_ROOT/bin/bindgen" --version
} | sha256sum | cut -c1-12)
OUT=$RNVME_CACHE/kernel/$KVER-$FLAVOUR-$key

# One build of a kernel at a time: `make test` starts the debug kernel early, in the
# background, and its own request for it later waits here for that build.
mkdir -p "$RNVME_CACHE/kernel"
exec 9>"$OUT.lock"
flock 9
if [ -f "$OUT/.rnvme-built" ]; then
	echo "$OUT"
	exit 0
fi

# shellcheck disable=SC2046
kmake() { make -C "$SRC" O="$OUT" $(kmake_args) "$@"; }

mkdir -p "$OUT"
log=$OUT/build.log
say "building $FLAVOUR kernel $KVER in $OUT (~12 min on 2 cores; log: $log)"
{
	kmake allnoconfig
	frags=()
	for f in "${FRAGMENTS[@]}"; do frags+=("$RNVME_ROOT/scripts/config/$f"); done
	"$SRC/scripts/kconfig/merge_config.sh" -m -O "$OUT" "$OUT/.config" "${frags[@]}"
	kmake olddefconfig
} >"$log" 2>&1 || die "kernel configuration failed; see $log"

# Every option we asked for must have survived olddefconfig (a dependency we
# missed silently drops it).
missing=$(for f in "${frags[@]}"; do grep -E '^CONFIG_[A-Z0-9_]+=' "$f"; done |
	while IFS= read -r line; do grep -qxF "$line" "$OUT/.config" || echo "$line"; done)
[ -z "$missing" ] || die "config options not satisfied (missing dependencies?): $(echo $missing)"

kmake rustavailable >>"$log" 2>&1 || die "the kernel says Rust is not available; see $log"
kmake -j"$JOBS" bzImage modules >>"$log" 2>&1 || die "kernel build failed; see $log"
touch "$OUT/.rnvme-built"
say "kernel ready: $OUT"
echo "$OUT"
