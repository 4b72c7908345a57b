# nanoforge's everyday commands. `make test` is CI's first stage (.ci/run, on a clean clone; then
# check-gpu-build, sanitize-address, sanitize-thread, fuzz-ci, test-arm64-ci): install the missing Debian
# packages, configure, build with every core, run the tests (output shown on failure).
# Where nvcc is found, build/bin/nanoforge is always the GPU build; on a machine without a GPU the tests (and
# nanoforge-emulated, the program they start) run the CUDA backend on the CPU emulator of CUDA (docs/build.md).
# `make sanitize` runs the whole test suite again in a tree built with AddressSanitizer
# and UndefinedBehaviorSanitizer (the GPU tests on the emulator, where every kernel overrun is a host
# overrun), then the tests that run MPI in a CPU-only tree built with ThreadSanitizer (cmake/Sanitizers.cmake,
# tools/dev/sanitizers/, docs/build.md).
# `make demo` trains a small model from scratch on this machine: tokenizer and shards from the demo corpus,
# recipes/tiny.toml, evaluation (bits per byte, and CORE on the small test bundle), a sample, a plot of the
# run (run.png) and its page (report.html, `nanoforge report`: docs/watching.md). It builds only the program,
# in a tree of its own: for this machine's GPU alone when it has one, else for the default architectures where
# nvcc is found (the GPU build, which trains on the CPU here), else for the CPU.
# `make fuzz FUZZ_SECONDS=N` builds the libFuzzer targets with clang in build-fuzz/ and runs each for N seconds
# from its committed seed corpus; `make fuzz-ci`, CI's stage, runs each for a fixed number of inputs from a
# fixed seed (docs/fuzzing.md).

BUILD_DIR ?= build
JOBS ?= $(shell nproc)
# The build tree's Python (scripts/install-deps.sh): pyarrow for parquet input, tiktoken and torch for tools/.
BUILD_PYTHON_ENV := $(abspath $(BUILD_DIR))/python
CMAKE_FLAGS ?=
# The AddressSanitizer tree builds the CUDA backend for the emulator alone (no nvcc build and no comparison of
# schedules: those are `make test`'s; nanoforge-emulated stands in for the program); the ThreadSanitizer tree
# is CPU-only.
ASAN_CMAKE_FLAGS ?= -DNANOFORGE_CUDA_EMULATION=ONLY -DNANOFORGE_EMULATOR_TEST_SCHEDULES=rotate
TSAN_CMAKE_FLAGS ?= -DNANOFORGE_CUDA=OFF
GPU_BUILD_DIR ?= build-gpu
GPU_BUILD_CUDA12_DIR ?= build-gpu-cuda12.4
ASAN_BUILD_DIR ?= build-sanitize
TSAN_BUILD_DIR ?= build-sanitize-thread
# What ThreadSanitizer checks: the programs and tests that run under mpirun (KilledDuringACollective is left
# out: its 3 s watchdog fires before the victim dies, as 64 MB all-reduces take longer than that under TSan).
TSAN_TARGETS := nanoforge dist_mpi_tests lost_rank_worker dist_lost_rank_tests train_data_parallel_tests \
                optim_data_parallel_step_tests
TSAN_TESTS := dist_mpi_collectives|LostRank|DataParallel|parity_optim_.*_np|optim_data_parallel_step_cpu_np
TSAN_EXCLUDED := KilledDuringACollective
# What the AddressSanitizer stage leaves out of the GPU tests, for CI's time on a slow 2-core machine
# (docs/build.md, "CI"): the end-to-end runs (the training curves on one and two GPUs, CORE in bf16: 10 to 20
# CPU-minutes each there; the NCCL training runs' launches, whose 60 s hard limits assume a Release build,
# and the launch agents' runs, a dozen 3-machine trainings whose agents' own code the dist tests check),
# whose kernels and host code run under it in the model's, optimizer's, NCCL and CPU training tests; and
# flash attention's second sweep, the same kernels and shapes on the GB10's profile.
ASAN_GPU_EXCLUDED := ^TrainingGpu\.|^CoreGpu\.|^NcclLaunch\.TorchrunStyleTrainsLikeMpirun$$|^NcclTraining\.RankKilledMidStep|^LaunchAgents\.|\.gb10_truncating_mma$$
DEMO_BUILD_DIR ?= build-demo
DEMO_CMAKE_FLAGS ?= -DNANOFORGE_CUDA_EMULATION=OFF \
                    $(shell nvidia-smi >/dev/null 2>&1 && echo -DCMAKE_CUDA_ARCHITECTURES=native)
NANOFORGE := $(DEMO_BUILD_DIR)/bin/nanoforge
DEMO_DIR := $(DEMO_BUILD_DIR)/demo
DEMO_RUN ?= runs/tiny
FUZZ_BUILD_DIR ?= build-fuzz
FUZZ_SECONDS ?= 30
FUZZ_CMAKE_FLAGS ?=
# A python3 that has matplotlib (a pyenv python3 first on PATH may not see Debian's packages).
PYTHON := $(shell python3 -c 'import matplotlib' >/dev/null 2>&1 && echo python3 || echo /usr/bin/python3)

.PHONY: all deps configure build test check-gpu-build sanitize sanitize-address sanitize-thread demo demo-build \
        demo-data fuzz fuzz-ci fuzz-build fuzz-seeds fuzz-merge format clean

all: build

deps:
	scripts/install-deps.sh $(BUILD_PYTHON_ENV)

configure: deps
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	    -DPython3_EXECUTABLE=$(BUILD_PYTHON_ENV)/bin/python3 $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

# The GPU build as a GPU machine makes it, made here without a GPU (nothing runs on one): no emulator, warnings
# as errors, against CUDA 13 (every target, $(GPU_BUILD_DIR)/; configured like $(BUILD_DIR)/, whose objects the
# compiler cache serves) and CUDA 12.4 (what touches CUDA, sm_90; the toolkit assembled in a cache outside the
# clone by scripts/cuda-toolkit-cache.sh), and ptxas 12.9 on that build's PTX for sm_121
# (scripts/check-gpu-build.sh; docs/build.md, "The GPU build in CI"). CI runs it after `make test`.
check-gpu-build: deps
	JOBS=$(JOBS) CMAKE_FLAGS="$(CMAKE_FLAGS)" GPU_BUILD_DIR=$(GPU_BUILD_DIR) \
	    GPU_BUILD_CUDA12_DIR=$(GPU_BUILD_CUDA12_DIR) scripts/check-gpu-build.sh $(BUILD_PYTHON_ENV)/bin/python3

sanitize: sanitize-address sanitize-thread

sanitize-address: deps
	cmake -S . -B $(ASAN_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    -DNANOFORGE_SANITIZE=address,undefined -DPython3_EXECUTABLE=$(BUILD_PYTHON_ENV)/bin/python3 \
	    $(ASAN_CMAKE_FLAGS) $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD_DIR) -j $(JOBS)
	cd $(ASAN_BUILD_DIR) && ctest --output-on-failure --no-tests=error -j $(JOBS) -LE gpu
	@# The GPU tests without LeakSanitizer: the emulated runtime, like CUDA's, keeps its devices to exit.
	cd $(ASAN_BUILD_DIR) && ASAN_OPTIONS=detect_leaks=0 ctest --output-on-failure -j $(JOBS) -L gpu \
	    -E '$(ASAN_GPU_EXCLUDED)'

# One OpenMP thread: GCC's libgomp is not built for ThreadSanitizer, whose every parallel region would
# otherwise report races it cannot see synchronised; the threads left are nanoforge's own.
sanitize-thread: deps
	cmake -S . -B $(TSAN_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNANOFORGE_SANITIZE=thread \
	    $(TSAN_CMAKE_FLAGS) $(CMAKE_FLAGS)
	cmake --build $(TSAN_BUILD_DIR) -j $(JOBS) --target $(TSAN_TARGETS)
	cd $(TSAN_BUILD_DIR) && OMP_NUM_THREADS=1 ctest --output-on-failure --no-tests=error -j $(JOBS) \
	    -R '$(TSAN_TESTS)' -E '$(TSAN_EXCLUDED)'

demo-build:
	scripts/install-deps.sh
	cmake -S . -B $(DEMO_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release $(DEMO_CMAKE_FLAGS)
	cmake --build $(DEMO_BUILD_DIR) -j $(JOBS) --target nanoforge

# The demo corpus, its tokenizer (8,192 tokens) and its shards (the first 50 chapters for validation), in the
# demo's own base directory, where recipes/tiny.toml's [data] defaults find them.
demo-data demo: export NANOFORGE_BASE_DIR := $(abspath $(DEMO_DIR))
demo-data: demo-build
	scripts/make-demo-corpus.sh $(DEMO_DIR)/kjv.txt
	$(NANOFORGE) tokenizer train --input $(DEMO_DIR)/kjv.txt --vocab-size 8192 --out $(DEMO_DIR)/tokenizer \
	    --overwrite
	$(NANOFORGE) prep --input $(DEMO_DIR)/kjv.txt --tokenizer $(DEMO_DIR)/tokenizer --out $(DEMO_DIR)/shards \
	    --val-docs 50 --overwrite

demo: demo-data
	rm -rf $(DEMO_RUN)
	$(NANOFORGE) train --recipe recipes/tiny.toml --run-dir $(DEMO_RUN)
	$(NANOFORGE) eval --checkpoint $(DEMO_RUN) --data $(DEMO_DIR)/shards --eval-tokens 40960
	$(NANOFORGE) eval --core tests/eval/core/bundle --checkpoint $(DEMO_RUN) --out $(DEMO_RUN)/core.json
	$(NANOFORGE) sample --checkpoint $(DEMO_RUN) --prompt "And God said" --max-tokens 40 --temperature 0.8
	$(PYTHON) tools/plot_run.py $(DEMO_RUN)
	$(NANOFORGE) report $(DEMO_RUN) --out $(DEMO_RUN)/report.html
	@echo "demo run: $(DEMO_RUN) (config.toml, metrics.jsonl, checkpoints/, core.json, run.png, report.html)"

fuzz-build: deps
	cmake -S . -B $(FUZZ_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
	    -DCMAKE_CXX_COMPILER=clang++ -DNANOFORGE_CUDA=OFF -DNANOFORGE_FUZZ=ON \
	    -DPython3_EXECUTABLE=$(BUILD_PYTHON_ENV)/bin/python3 $(FUZZ_CMAKE_FLAGS)
	cmake --build $(FUZZ_BUILD_DIR) -j $(JOBS) --target nanoforge_fuzzers

# Each target for FUZZ_SECONDS from its seed corpus; what it finds is left in $(FUZZ_BUILD_DIR)/fuzz-work/.
fuzz: fuzz-build
	cd $(FUZZ_BUILD_DIR) && FUZZ_SECONDS=$(FUZZ_SECONDS) ctest -L '^fuzz$$' --output-on-failure -j $(JOBS) \
	    --timeout $$(( $(FUZZ_SECONDS) + 120 ))

# Each target for its fixed number of inputs from seed 1 (tests/fuzz/CMakeLists.txt): the same inputs on
# every run of the same tree. Reproducers land in $(FUZZ_BUILD_DIR)/fuzz-ci-work/NAME/artifacts/.
fuzz-ci: fuzz-build
	cd $(FUZZ_BUILD_DIR) && ctest -L '^fuzz_ci$$' --output-on-failure -j $(JOBS) --timeout 300

# Rewrites the generated seeds in tests/fuzz/corpus/ (reproducers of findings stay); the parquet ones are
# the parquet tests' files, which pyarrow writes.
fuzz-seeds: fuzz-build
	$(FUZZ_BUILD_DIR)/tests/fuzz/nanoforge_fuzz_seeds tests/fuzz/corpus .
	$(BUILD_PYTHON_ENV)/bin/python3 tests/data/documents/write_parquet_fixtures.py $(FUZZ_BUILD_DIR)/parquet-seeds
	mkdir -p tests/fuzz/corpus/documents_parquet
	for name in docs ints truncated corrupt; do \
	  cp $(FUZZ_BUILD_DIR)/parquet-seeds/$$name.parquet tests/fuzz/corpus/documents_parquet/; \
	done

# Adds to tests/fuzz/corpus/ the inputs of the last `make fuzz` that reach new coverage.
fuzz-merge: fuzz-build
	for fuzzer in $(FUZZ_BUILD_DIR)/fuzz/fuzz_*; do \
	  name=$${fuzzer##*/fuzz_}; \
	  [ -d $(FUZZ_BUILD_DIR)/fuzz-work/$$name/corpus ] || continue; \
	  $$fuzzer -merge=1 tests/fuzz/corpus/$$name $(FUZZ_BUILD_DIR)/fuzz-work/$$name/corpus || exit 1; \
	done

format:
	git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR) $(GPU_BUILD_DIR) $(GPU_BUILD_CUDA12_DIR) $(ASAN_BUILD_DIR) $(TSAN_BUILD_DIR) \
	    $(DEMO_BUILD_DIR) $(FUZZ_BUILD_DIR) $(ARM64_BUILD_DIR)

# aarch64 (the DGX Spark's CPU), cross-built on this x86-64 machine and tested under qemu-user (docs/build.md,
# "aarch64 (DGX Spark): cross build and qemu"). scripts/arm64-sysroot.sh installs the cross compiler and qemu,
# lets qemu run aarch64 programs (binfmt_misc) and makes the arm64 sysroot once, outside the clone; one tree,
# $(ARM64_BUILD_DIR)/, builds the CPU backend and the CUDA backend on the emulator
# (cmake/toolchains/aarch64-linux-gnu.cmake, NANOFORGE_CUDA_EMULATION=ONLY). `make test-arm64` runs every test
# under qemu but ARM64_EXCLUDED; `make test-arm64-ci` builds and runs ARM64_CI_TESTS alone.
ARM64_BUILD_DIR ?= build-arm64
ARM64_CMAKE_FLAGS ?=
# What cannot pass under qemu, where a test takes about 27 times as long as here (docs/build.md): the tests whose subject
# is a time limit sized for a native Release build (the NCCL training runs' 2 s collective watchdog and 60 s
# hard limits, the launch agents' 10 s silence limit and 180 s runs).
ARM64_EXCLUDED := ^NcclLaunch\.TorchrunStyleTrainsLikeMpirun$$|^NcclTraining\.RankKilledMidStep|^LaunchAgents\.
# CI's subset: nanochat parity of the model and optimizer, the tokenizer, the loader, resume bit for bit, the
# emulator's own tests, the GPT model on the emulated GPU, and `nanoforge train` through nanoforge-emulated
# on the CPU and the emulated GPU; only their programs are built (152 tests, about 2.5 minutes on 2 cores).
# `$\` at a line's end joins the lines without a space.
ARM64_CI_TARGETS := nanoforge-emulated parity_tests data_tokenizer_tests data_loader_tests train_tests \
                    emulator_tests model_gpu_tests train_emulated_device_tests
ARM64_CI_TESTS := ^(BadCaseTest|ModelParity|OptimParity|Tokenizer[A-Za-z]+|Utf8Text|BosBestFitPacker|DocOrder|$\
    FeistelPermutation|LoaderPrefetchTest|LoaderTest|CublasLt|Emulator[A-Za-z]+|$\
    LayoutsTransposesTypes/EmulatorCublasLt|NcclNumerics|GptCudaContract|EmulatedDevice|EmulatedProgram)\.|$\
    ^Resume\.StopAndResumeEqualsOneRunBitForBit$$|$\
    ^GptCuda\.(ForwardRefusesCopiesOlderThanTheWeights|RefreshRoundsTheMasterMatricesToBf16)$$|$\
    ^MlpGemms/GptCudaMlpGemm\.LossLogitsAndEveryGradientMatchTheCpuInFp32/cublaslt( |$$)
ARM64_CONFIGURE = scripts/arm64-sysroot.sh && \
    cmake -S . -B $(ARM64_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release \
        --toolchain cmake/toolchains/aarch64-linux-gnu.cmake \
        -DPython3_EXECUTABLE=$(BUILD_PYTHON_ENV)/bin/python3 $(ARM64_CMAKE_FLAGS)
# ctest puts qemu in front of the test programs itself; what they start (mpiexec's ranks, the programs of
# Python scripts) runs through binfmt_misc, and gets the tree's sysroot and CPU from here, and Open MPI's
# shared-memory transport without its single-copy mechanism (process_vm_readv, which qemu-user lacks).
ARM64_CTEST = cd $(ARM64_BUILD_DIR) && \
    env QEMU_LD_PREFIX=$$(sed -n 's/^NANOFORGE_ARM64_SYSROOT:PATH=//p' CMakeCache.txt) \
        QEMU_CPU=$$(sed -n 's/^NANOFORGE_QEMU_CPU:STRING=//p' CMakeCache.txt) \
        OMPI_MCA_btl_vader_single_copy_mechanism=none \
    ctest --output-on-failure --no-tests=error -j $(JOBS)

.PHONY: test-arm64 test-arm64-ci

test-arm64: deps
	$(ARM64_CONFIGURE)
	cmake --build $(ARM64_BUILD_DIR) -j $(JOBS)
	$(ARM64_CTEST) -E '$(ARM64_EXCLUDED)'

test-arm64-ci: deps
	$(ARM64_CONFIGURE)
	cmake --build $(ARM64_BUILD_DIR) -j $(JOBS) --target $(ARM64_CI_TARGETS)
	$(ARM64_CTEST) -R '$(ARM64_CI_TESTS)' -E '$(ARM64_EXCLUDED)'
