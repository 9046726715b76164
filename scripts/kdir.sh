#!/usr/bin/env bash
# Prints the kernel build directory to build rnvme against: $KDIR if set (checked), else the
# cached test kernel of the requested flavour, set up and built first if missing.
#
#   scripts/kdir.sh [base|debug|inline]
. "$(dirname "$0")/common.sh"

if [ -n "${KDIR:-}" ]; then
	[ -f "$KDIR/Makefile" ] || die "KDIR=$KDIR has no Makefile"
	[ -f "$KDIR/rust/libkernel.rmeta" ] || [ -f "$KDIR/rust/kernel.o" ] ||
		die "KDIR=$KDIR was not built with CONFIG_RUST (no rust/ metadata): out-of-tree Rust modules need a kernel build tree"
	echo "$KDIR"
	exit 0
fi
"$RNVME_ROOT/scripts/setup-toolchain.sh" "${1:-${RNVME_FLAVOUR:-base}}"
"$RNVME_ROOT/scripts/build-kernel.sh" "${1:-${RNVME_FLAVOUR:-base}}"
