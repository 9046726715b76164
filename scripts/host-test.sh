#!/usr/bin/env bash
# Host unit tests of the kernel-independent spec module (cargo test in host/).
. "$(dirname "$0")/common.sh"
command -v cargo >/dev/null || "$RNVME_ROOT/scripts/setup-toolchain.sh"
cd "$RNVME_ROOT/host"
exec cargo test --offline --target-dir "$RNVME_ROOT/out/host-target" "$@"
