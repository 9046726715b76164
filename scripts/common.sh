# Shared settings for rnvme's set-up scripts. Sourced, never run.
#
# Everything we download or build lives in $RNVME_CACHE (outside the repo) so a
# fresh clone, and CI, reuse it.

set -euo pipefail

RNVME_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RNVME_CACHE=${RNVME_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rnvme}
# The kernel series we build against. Debian ships it as linux-source-$KSERIES.
KSERIES=${KSERIES:-7.3}
# The Rust toolchain the kernel needs: Debian's rustc-web (rustup's has no rust-src).
RUSTC=${RUSTC_KERNEL:-/usr/bin/rustc}
RUSTDOC=${RUSTDOC_KERNEL:-/usr/bin/rustdoc}
BINDGEN_VERSION=0.71.1
BINDGEN_ROOT=$RNVME_CACHE/bindgen-$BINDGEN_VERSION
export LIBCLANG_PATH=${LIBCLANG_PATH:-/usr/lib/llvm-19/lib}
# bindgen from our cache; cargo from rustup if present, else Debian's cargo-web.
export PATH=$BINDGEN_ROOT/bin:$PATH:$HOME/.cargo/bin:/usr/bin
JOBS=${JOBS:-$(($(nproc) + 1))}

# Arguments every kernel (and out-of-tree module) make invocation needs.
# The C compiler's LLVM for a kernel flavour: Debian 12's clang-19 for the test kernels;
# for `inline` (CONFIG_RUST_INLINE_HELPERS) clang-22 from bookworm-security, whose LLVM is
# rustc-web's, as inlining C helpers into Rust by LTO needs.
llvm_version() {
	case ${1:-base} in
	inline) echo 22 ;;
	*) echo 19 ;;
	esac
}

# Selects the LLVM of a kernel flavour for this script: bindgen's libclang too, and a
# bindgen that reads libclang 22 correctly (>= 0.72.1: older ones lay out some structs as
# opaque blobs; the kernel's own check warns, citing rust-bindgen PR 3278).
use_llvm_of() {
	LLVM_VERSION=$(llvm_version "$1")
	export LIBCLANG_PATH=/usr/lib/llvm-$LLVM_VERSION/lib
	if [ "$LLVM_VERSION" -ge 22 ]; then
		BINDGEN_VERSION=0.72.1
		BINDGEN_ROOT=$RNVME_CACHE/bindgen-$BINDGEN_VERSION
	fi
}
LLVM_VERSION=19

kmake_args() {
	echo "LLVM=-$LLVM_VERSION RUSTC=$RUSTC RUSTDOC=$RUSTDOC BINDGEN=$BINDGEN_ROOT/bin/bindgen"
}

say() { printf '[rnvme] %s\n' "$*" >&2; }
die() {
	printf '[rnvme] error: %s\n' "$*" >&2
	exit 1
}

mkdir -p "$RNVME_CACHE"
