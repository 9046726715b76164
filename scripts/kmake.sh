#!/usr/bin/env bash
# Runs kbuild for rnvme against the test kernel of a flavour (or $KDIR), with the kernel's
# Rust toolchain, into out/<flavour>/ (kbuild's MO=), or out/<flavour>-test/ for the test
# build (RNVME_TEST_HOOKS=1: fault injection compiled in, see src/core/fault.rs).
#
#   [RNVME_TEST_HOOKS=1] scripts/kmake.sh FLAVOUR TARGET [MAKE-ARGS...]
. "$(dirname "$0")/common.sh"
flavour=${1:?flavour}
shift
use_llvm_of "$flavour"
kdir=$("$RNVME_ROOT/scripts/kdir.sh" "$flavour")
out=$RNVME_ROOT/out/$flavour hooks=0
if [ "${RNVME_TEST_HOOKS:-0}" = 1 ]; then out=$out-test hooks=1; fi
mkdir -p "$out"
# shellcheck disable=SC2046
exec make -s -C "$kdir" M="$RNVME_ROOT" MO="$out" $(kmake_args) \
	CLIPPY_DRIVER=/usr/bin/clippy-driver RUSTFLAGS_MODULE=-Dwarnings RNVME_TEST_HOOKS=$hooks "$@"
