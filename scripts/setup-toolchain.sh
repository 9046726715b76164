#!/usr/bin/env bash
# Installs what building and testing rnvme needs, from the system's own Debian
# sources (never another suite: mixing in trixie or sid half-upgrades libc),
# plus bindgen-cli from crates.io. Idempotent: a second run only checks.
#
#   scripts/setup-toolchain.sh [FLAVOUR]   (inline also needs clang-22 and its kin)
. "$(dirname "$0")/common.sh"

# Host packages: kernel Rust toolchain, kernel build tools, QEMU, guest tools.
PKGS=(
	rustc-web rust-web-src rust-web-clippy cargo-web clang-19 lld-19 llvm-19 libclang-19-dev
	flex bison bc libelf-dev libssl-dev cpio kmod make gcc libc6-dev linux-libc-dev xz-utils
	qemu-system-x86 busybox-static fio nvme-cli e2fsprogs util-linux lm-sensors
	python3 gnuplot-nox xfsprogs bonnie++ dbench btrfs-progs
)
# The inline kernel's C compiler: LLVM 22 as rustc-web's (bookworm-security has it).
if [ "${1:-base}" = inline ]; then
	PKGS+=(clang-22 lld-22 llvm-22 libclang-22-dev)
fi

missing_pkgs() {
	local p
	for p in "${PKGS[@]}"; do
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' ||
			echo "$p"
	done
}

install_pkgs() {
	local missing
	missing=$(missing_pkgs)
	[ -z "$missing" ] && return 0
	command -v apt-get >/dev/null || die "not an apt-based system: install by hand: $missing"
	[ "$(id -u)" = 0 ] || die "installing packages needs root (missing: $(echo $missing))"
	say "installing packages: $(echo $missing)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# rustc-web's newest build is in bookworm-security; the default release
	# picks it when that suite is configured, as it is on Debian 12.
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $missing >/dev/null
	missing=$(missing_pkgs)
	[ -z "$missing" ] || die "could not install: $missing"
}

check_rustc() {
	local v
	v=$("$RUSTC" --version | awk '{print $2}')
	# The kernel needs rustc >= 1.85: the smaller of the two must be 1.85.0.
	[ "$(printf '%s\n1.85.0\n' "$v" | sort -V | head -1)" = 1.85.0 ] ||
		die "$RUSTC is $v; the kernel needs >= 1.85"
	[ -d "$("$RUSTC" --print sysroot)/lib/rustlib/src/rust/library/core" ] ||
		die "$RUSTC has no library source (install rust-web-src)"
}

install_bindgen() {
	if [ -x "$BINDGEN_ROOT/bin/bindgen" ] &&
		"$BINDGEN_ROOT/bin/bindgen" --version | grep -q " $BINDGEN_VERSION\$"; then
		return 0
	fi
	command -v cargo >/dev/null || die "cargo is needed to install bindgen-cli"
	say "installing bindgen-cli $BINDGEN_VERSION into $BINDGEN_ROOT (~2 min)"
	cargo install -q bindgen-cli --version "$BINDGEN_VERSION" --locked --root "$BINDGEN_ROOT"
}

# udevadm for the guest's udev rules test: the system's udev package, unpacked into the
# cache, not installed (its version may be ahead of the installed systemd's, and the host
# needs no udev daemon; udevadm needs no library of systemd's).
fetch_udevadm() {
	local dir=$RNVME_CACHE/udev tmp
	[ -x "$dir/bin/udevadm" ] && [ -f "$dir/rules.d/60-persistent-storage.rules" ] && return 0
	say "unpacking udevadm from the udev package into $dir"
	tmp=$(mktemp -d)
	if ! (cd "$tmp" && apt-get download udev >/dev/null 2>&1); then
		apt-get update -qq
		(cd "$tmp" && apt-get download udev >/dev/null 2>&1) || die "cannot download the udev package"
	fi
	dpkg-deb -x "$tmp"/udev_*.deb "$tmp/root"
	mkdir -p "$dir/bin" "$dir/rules.d"
	cp "$tmp/root/bin/udevadm" "$dir/bin/udevadm"
	cp "$tmp/root/lib/udev/rules.d/60-persistent-storage.rules" "$dir/rules.d/"
	rm -rf "$tmp"
}

use_llvm_of "${1:-base}"
install_pkgs
fetch_udevadm
check_rustc
install_bindgen
