#!/usr/bin/env bash
# Fetches and unpacks the newest Debian linux-source-$KSERIES through a
# private apt list: the system's own apt sources are never touched (adding a
# newer suite there drags in a new libc). Prints the source tree's path.
#
# KERNEL_SRC=/path/to/linux skips all of this and uses that tree.
. "$(dirname "$0")/common.sh"

if [ -n "${KERNEL_SRC:-}" ]; then
	[ -f "$KERNEL_SRC/Makefile" ] && [ -d "$KERNEL_SRC/rust/kernel" ] ||
		die "KERNEL_SRC=$KERNEL_SRC is not a kernel tree with Rust support"
	echo "$KERNEL_SRC"
	exit 0
fi

# Debian backports the series to the stable release after the one that
# introduced it; list both so a future backport is found too.
SUITES=${KERNEL_SUITES:-"trixie-backports trixie"}
APT_DIR=$RNVME_CACHE/apt
SRC_ROOT=$RNVME_CACHE/src

# The mirror the system already uses, so no new host is contacted.
mirror() {
	local m
	m=$(grep -hsE '^[[:space:]]*(deb|URIs:)[[:space:]]' /etc/apt/sources.list \
		/etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
		grep -oE 'https?://[^ ]+/debian/?( |$)' | grep -v security | head -1 | tr -d ' ')
	echo "${m:-http://deb.debian.org/debian}"
}

apt_private() {
	apt-get -q -o APT::Sandbox::User=root -o Dir::Etc::SourceList="$APT_DIR/sources.list" \
		-o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists="$APT_DIR/lists" \
		-o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= \
		-o Dir::State::status=/var/lib/dpkg/status "$@"
}

refresh_lists() {
	local m s
	m=$(mirror)
	mkdir -p "$APT_DIR/lists/partial"
	: >"$APT_DIR/sources.list"
	for s in $SUITES; do
		echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $m $s main" \
			>>"$APT_DIR/sources.list"
	done
	say "refreshing private apt lists ($SUITES)"
	apt_private update >/dev/null 2>"$APT_DIR/update.err" || true
	# apt-get update exits 0 even when every index failed: check for the lists.
	ls "$APT_DIR/lists" | grep -q '_Packages' || {
		say "apt update of the private list failed: $(grep -E '^(E|W: Failed)' "$APT_DIR/update.err" | head -2)"
		return 1
	}
}

newest_version() {
	apt_private -qq --print-uris download "linux-source-$KSERIES" 2>/dev/null |
		sed -nE "s/.*linux-source-${KSERIES}_([^_]+)_all\.deb.*/\1/p" | head -1
}

# Offline, or lists already fresh today: reuse what is unpacked.
existing=$(ls -d "$SRC_ROOT"/*/linux-source-"$KSERIES" 2>/dev/null | sort -V | tail -1 || true)
if [ -n "$existing" ] && [ -f "$existing/.rnvme-unpacked" ] &&
	[ -z "$(find "$APT_DIR/lists" -maxdepth 1 -name '*Packages*' -mmin +1440 2>/dev/null)" ] &&
	ls "$APT_DIR/lists" 2>/dev/null | grep -q '_Packages'; then
	echo "$existing"
	exit 0
fi

if ! refresh_lists; then
	[ -n "$existing" ] && { say "using cached $existing"; echo "$existing"; exit 0; }
	exit 1
fi
ver=$(newest_version)
if [ -z "$ver" ]; then
	[ -n "$existing" ] && { say "linux-source-$KSERIES not listed; using cached $existing"; echo "$existing"; exit 0; }
	die "linux-source-$KSERIES was not found in $SUITES on $(mirror); set KERNEL_SRC=/path/to/linux-$KSERIES"
fi

dest=$SRC_ROOT/$ver
if [ ! -f "$dest/linux-source-$KSERIES/.rnvme-unpacked" ]; then
	say "downloading linux-source-$KSERIES $ver"
	rm -rf "$dest"
	mkdir -p "$dest/deb"
	(cd "$dest/deb" && apt_private -qq download "linux-source-$KSERIES=$ver" >/dev/null) ||
		die "download of linux-source-$KSERIES $ver failed"
	dpkg -x "$dest"/deb/linux-source-"$KSERIES"_*.deb "$dest/deb/x"
	say "unpacking"
	tar -C "$dest" -xf "$dest/deb/x/usr/src/linux-source-$KSERIES.tar.xz"
	rm -rf "$dest/deb"
	touch "$dest/linux-source-$KSERIES/.rnvme-unpacked"
fi
echo "$dest/linux-source-$KSERIES"
