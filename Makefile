# rrxe: one entry point for the toolchain, kernel, module, guest image, VM
# runs and tests.  See README.md.  (The module itself is built by Kbuild:
# `make module` runs `make -C $KDIR M=$PWD` inside the toolchain root.)

# Driver for `make run` and `make shell`: rrxe (default) or rxe (the C baseline).
DRIVER ?= rrxe
# Drivers the VM suites of `make test` run on.
DRIVERS ?= rxe rrxe

.PHONY: all host-deps toolchain kernel guest module run test test-full shell bench clean

all: module

host-deps:
	@scripts/host-deps

toolchain: host-deps
	@scripts/build-toolchain >/dev/null

kernel: host-deps
	@scripts/build-kernel >/dev/null

guest: host-deps
	@scripts/build-guest >/dev/null

module: kernel
	@scripts/build-module

run: host-deps
	@echo "make run: rping and ibv_rc_pingpong between two VMs on DRIVER=$(DRIVER)$(if $(filter rxe,$(DRIVER)), (the C driver),)"
	@DRIVER=$(DRIVER) RUN_NAME=main-job qemu/run-pair qemu/main-job.sh qemu/main-job.sh

# make test: the quick level, what CI runs; make test-full: also the long
# matrices (README "Test plan").
test: host-deps
	@DRIVERS="$(DRIVERS)" tests/run

test-full: host-deps
	@TEST_LEVEL=full DRIVERS="$(DRIVERS)" tests/run

bench: host-deps
	@benches/run

shell: host-deps
	@DRIVER=$(DRIVER) qemu/shell

clean:
	rm -rf build results
