# SPDX-License-Identifier: GPL-2.0
#
# rnvme: the two commands a user needs are `make bench` (build everything, boot QEMU,
# benchmark rnvme against the C driver) and `make test`. Everything they need is set up on
# the way and cached in $(RNVME_CACHE) (default ~/.cache/rnvme).
#
#   make              build rnvme.ko against KDIR (default: the cached test kernel)
#   make CLIPPY=1     the same, linted with clippy
#   make TEST_HOOKS=1 the test build (fault injection compiled in) into out/FLAVOUR-test
#   make test         host unit tests + the QEMU test suite
#   make bench        rnvme against the C driver and null_blk (table, JSON, plot in out/bench)
#   make profile      instructions per kernel function per read, C driver and rnvme
#   make mutants      plant each bug of scripts/mutants.toml in a copy; the tests must catch it
#   make storm        the concurrency storm of make test, 10 minutes and 10 rounds per kernel
#   make qemu         interactive shell in the test VM with rnvme.ko in /lib
#   make setup        toolchain, kernel source and test kernel only
#   make clean        remove build products (not the cache)
#   make rust-analyzer  rust-project.json for editors

FLAVOUR ?= base
SHELL := /bin/bash
ifeq ("$(origin CLIPPY)", "command line")
KMAKE_EXTRA := CLIPPY=$(CLIPPY)
endif

.PHONY: all module setup test unit-test qemu clean rust-analyzer fmt bench profile mutants storm

all: module

setup:
	@scripts/kdir.sh $(FLAVOUR) >/dev/null

# Each kernel flavour gets its own output directory (kbuild's MO=): out/base/rnvme.ko,
# out/debug/rnvme.ko; the test build out/base-test/rnvme.ko, out/debug-test/rnvme.ko.
TEST_HOOKS ?= 0
OUT = $(CURDIR)/out/$(FLAVOUR)$(if $(filter 1,$(TEST_HOOKS)),-test)

module:
	@mkdir -p $(OUT) && RNVME_TEST_HOOKS=$(TEST_HOOKS) scripts/kmake.sh $(FLAVOUR) modules $(KMAKE_EXTRA) 2>&1 | tee $(OUT)/build.log; \
	status=$${PIPESTATUS[0]}; \
	if [ $$status -ne 0 ]; then exit $$status; fi; \
	if grep -qE '^(warning|error)' $(OUT)/build.log; then \
		echo "rnvme: the build printed warnings" >&2; exit 1; fi; \
	echo "rnvme: built $(OUT)/rnvme.ko"

bench:
	@scripts/bench.sh

# Instructions per kernel function per 4 KiB read, C driver and rnvme (QEMU icount plugin).
profile:
	@scripts/profile.sh

unit-test:
	@scripts/host-test.sh

test:
	@scripts/test.sh

# The storm scenario alone, long: STORM_S seconds and STORM_ROUNDS rounds of FLR and system
# sleep and Memory Space hiccups, on both kernels.
STORM_S ?= 600
STORM_ROUNDS ?= 10
storm:
	@RNVME_TEST_ONLY='^storm-' RNVME_STORM_S=$(STORM_S) RNVME_STORM_ROUNDS=$(STORM_ROUNDS) \
		scripts/test.sh

qemu: module
	@qemu/run --flavour $(FLAVOUR) --shell

rust-analyzer:
	@scripts/kmake.sh $(FLAVOUR) rust-analyzer && \
	if [ -f $(OUT)/rust-project.json ]; then cp $(OUT)/rust-project.json .; fi && \
	ls rust-project.json

fmt:
	@rustfmt --edition 2021 rnvme.rs host/lib.rs host/tests.rs

clean:
	@rm -rf out host/target rust-project.json

# Planted bugs, one at a time, each against the tests that should catch it.
mutants:
	@scripts/mutants.py $(MUTANTS)
