# nanoforge's two everyday commands. `make test` is what CI runs (.ci/run) on a clean clone: install the
# missing Debian packages, configure, build with every core, run the tests (output shown on failure).
# `make demo` builds and shows what nanoforge does today on this machine's CPU.

BUILD_DIR ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
NANOFORGE := $(BUILD_DIR)/bin/nanoforge
PARITY_CASE := ../shared/parity/dev_case1.h5

.PHONY: all deps configure build test demo format clean

all: build

deps:
	scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

demo: build
	$(NANOFORGE) --version
	@if [ -f $(PARITY_CASE) ]; then \
	  $(NANOFORGE) parity --case $(PARITY_CASE) --out $(BUILD_DIR)/demo_parity_result.h5; \
	else echo "($(PARITY_CASE) not found: skipping the parity demo)"; fi
	$(NANOFORGE) bench step --depth 4 --seq 256 --batch 8 --vocab 8192 --steps 5

format:
	git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR)
