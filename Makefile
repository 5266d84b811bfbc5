# mesanet Makefile: every target says what it adds. The library itself needs no build: copy
# mesanet.h into your project and #define MESANET_IMPLEMENTATION in one file.
#
#   make demo            the main job: set up, build, train a small model on built-in text, sample
#   make test            every test (unit, gradients, vectors, CLI, sanitizers, fuzz); CI runs this
#   make bench           REF-S throughput table -> results/bench.md
#   make check-vectors   compare with the golden vectors (VECTORS=dir, default reference/vectors)
#
# Switches: BLAS=0 (pure C matmul, no OpenBLAS), OMP=0 (no OpenMP), CC=clang.

# builds in parallel on both cores (the test runner itself runs the suites one after another); only the top-level
# make sets it, a sub-make (make test's build step) shares the parent's job server instead of resetting it
ifeq ($(MAKELEVEL),0)
MAKEFLAGS += -j2
endif
CC      ?= gcc
CXX     ?= g++
BLAS    ?= 1
OMP     ?= 1
CSTD     = -std=c99
WARN     = -Wall -Wextra -Werror
CFLAGS  ?= -O2
BUILD   ?= build
VECTORS ?= reference/vectors

ACCEL_CFLAGS =
ACCEL_LIBS   =
ifeq ($(BLAS),1)
ACCEL_CFLAGS += -DMN_USE_BLAS
ACCEL_LIBS   += -lopenblas
endif
ifeq ($(OMP),1)
ACCEL_CFLAGS += -fopenmp
endif
FULL = $(CC) $(CSTD) $(CFLAGS) $(WARN) -I. $(ACCEL_CFLAGS)

.PHONY: all demo setup test bench check-vectors fuzz clean
all: $(BUILD)/train $(BUILD)/generate $(BUILD)/synth $(BUILD)/bench $(BUILD)/bench_mesa $(BUILD)/bench_ops \
     $(BUILD)/check_vectors $(BUILD)/dump_logits
# the language-model comparison (results/lm.md): evaluation of a checkpoint, and its tables and plots from the CSVs
all: $(BUILD)/lm_eval $(BUILD)/lm_report

$(BUILD):
	@mkdir -p $(BUILD)

# the example programs: float build, BLAS and OpenMP when switched on
$(BUILD)/train: examples/train.c examples/common.h examples/plot.h mesanet.h | $(BUILD)
	$(FULL) $< -o $@ $(ACCEL_LIBS) -lstb -lm
$(BUILD)/generate: examples/generate.c examples/common.h mesanet.h | $(BUILD)
	$(FULL) $< -o $@ $(ACCEL_LIBS) -lm
$(BUILD)/synth: examples/synth.c examples/common.h examples/plot.h mesanet.h | $(BUILD)
	$(FULL) $< -o $@ $(ACCEL_LIBS) -lstb -lm
$(BUILD)/bench: examples/bench.c examples/common.h mesanet.h | $(BUILD)
	$(FULL) $< -o $@ $(ACCEL_LIBS) -lm
$(BUILD)/bench_ops: examples/bench_ops.c examples/common.h mesanet.h | $(BUILD)
	$(FULL) $< -o $@ $(ACCEL_LIBS) -lm
$(BUILD)/bench_mesa: examples/bench_mesa.c examples/common.h reference/mesa_oracle.h mesanet.h | $(BUILD)
	$(FULL) $< -o $@ $(ACCEL_LIBS) -lm
# lm_eval needs no stb (it also runs on the GPU machine, e.g. `make BLAS=0 build/lm_eval`); lm_report draws
$(BUILD)/lm_eval: examples/lm_eval.c examples/common.h mesanet.h | $(BUILD)
	$(FULL) $< -o $@ $(ACCEL_LIBS) -lm
# the same, linked statically (OpenBLAS included) for a machine without OpenBLAS (examples/lm_compare.sh prepare)
$(BUILD)/lm_eval_static: examples/lm_eval.c examples/common.h mesanet.h | $(BUILD)
	$(FULL) -static $< -o $@ $(ACCEL_LIBS) -lm -lpthread
$(BUILD)/lm_report: examples/lm_report.c examples/common.h examples/plot.h | $(BUILD)
	$(CC) $(CSTD) $(CFLAGS) $(WARN) -I. $< -o $@ -lstb -lm

# the peer-vector checker is a double build (mn_real = double) compared at 1e-8
$(BUILD)/check_vectors: reference/check_vectors.c reference/vecfile.h mesanet.h | $(BUILD)
	$(CC) $(CSTD) $(CFLAGS) $(WARN) -I. -DMESANET_DOUBLE -DMESANET_IMPLEMENTATION -DMN_VECFILE_IMPLEMENTATION $< -o $@ -lm
# a checkpoint's logits as float64 for comparing with another implementation (reference/fla_interop.py;
# add LDFLAGS=-static to carry it to another machine)
$(BUILD)/dump_logits: reference/dump_logits.c mesanet.h | $(BUILD)
	$(CC) $(CSTD) $(CFLAGS) $(WARN) -DMESANET_DOUBLE $< -o $@ $(LDFLAGS) -lm

# the Python bridge (notebooks/mesanet.py) loads these: mesanet.h + the .vec reader as shared libraries,
# MN_LOG captured for its exceptions. The double build is plain C like the double tests (bit-equal to them);
# the float build has BLAS/OpenMP as switched, like the example programs.
LIB_DEPS = notebooks/mesanet_bridge.c mesanet.h reference/vecfile.h
$(BUILD)/libmesanet_f64.so: $(LIB_DEPS) | $(BUILD)
	$(CC) $(CSTD) $(CFLAGS) $(WARN) -I. -fPIC -shared -DMESANET_DOUBLE $< -o $@ -lm
$(BUILD)/libmesanet_f32.so: $(LIB_DEPS) | $(BUILD)
	$(FULL) -fPIC -shared $< -o $@ $(ACCEL_LIBS) -lm
.PHONY: lib notebooks
lib: $(BUILD)/libmesanet_f64.so $(BUILD)/libmesanet_f32.so
# executes every CPU tutorial in notebooks/ and fails on a failing cell or assertion, or on saved outputs that
# differ from the fresh run (notebooks/nbtool.py; Debian's python3, where its numpy and Jupyter packages live)
PYTHON ?= /usr/bin/python3
notebooks: lib
	MESANET_BUILD=$(abspath $(BUILD)) $(PYTHON) notebooks/nbtool.py check
# the bridge's test (tests/test_bridge.py) compares it bit for bit with this program, built like the double library
$(BUILD)/bridge_ref: tests/bridge_ref.c mesanet.h | $(BUILD)
	$(CC) $(CSTD) $(CFLAGS) $(WARN) -I. -DMESANET_DOUBLE $< -o $@ -lm

# installs the Debian packages the build uses when they are missing (as root), else says how
setup:
	@./.ci/setup

# the main job: a 4-layer attention LM on Debian's license texts (no download), a few minutes on 2 cores
demo: setup
	@$(MAKE) --no-print-directory $(BUILD)/train $(BUILD)/generate
	./$(BUILD)/train --out runs/demo --overwrite 1
	@echo "loss curve: runs/demo/loss.png   checkpoint: runs/demo/"

# ---- tests ---------------------------------------------------------------------------------
TEST_BINS = $(BUILD)/test_tasks $(BUILD)/synth $(BUILD)/test_grad $(BUILD)/test_mesa $(BUILD)/test_mesa_oracle \
            $(BUILD)/test_gla_d $(BUILD)/test_gla_f $(BUILD)/test_delta_d $(BUILD)/test_delta_f $(BUILD)/test_ssm_d \
            $(BUILD)/test_ssm_f $(BUILD)/test_xlstm_d $(BUILD)/test_xlstm_f $(BUILD)/asan_test_gla \
            $(BUILD)/asan_test_delta $(BUILD)/asan_test_ssm $(BUILD)/asan_test_xlstm $(BUILD)/test_model_d \
            $(BUILD)/test_model_f $(BUILD)/test_vecfile $(BUILD)/test_compile_c $(BUILD)/test_compile_cpp \
            $(BUILD)/asan_test_grad $(BUILD)/asan_test_model $(BUILD)/asan_test_vecfile $(BUILD)/test_io \
            $(BUILD)/test_io_rename $(BUILD)/test_io_inplace $(BUILD)/asan_test_io

# the Python bridge: both libraries, the C program it is compared with, the vector checker it writes files for
TEST_BINS += $(BUILD)/libmesanet_f64.so $(BUILD)/libmesanet_f32.so $(BUILD)/bridge_ref $(BUILD)/check_vectors
# the Mesa forget-gate knob's test
TEST_BINS += $(BUILD)/test_mesa_gate

# the synthetic-task generators: every label against an independent computation
$(BUILD)/test_tasks: tests/test_tasks.c tests/testutil.h mesanet.h | $(BUILD)
	$(CC) $(CSTD) $(CFLAGS) $(WARN) -I. -Itests $< -o $@ -lm
# the Mesa forget-gate initialisation knob (mn_config.mesa_gate_bias) sets the initial gamma and nothing else
$(BUILD)/test_mesa_gate: tests/test_mesa_gate.c tests/testutil.h mesanet.h | $(BUILD)
	$(CC) $(CSTD) $(CFLAGS) $(WARN) -I. -Itests $< -o $@ -lm
# finite differences need double precision (MESANET_DOUBLE); the model test runs in both types
$(BUILD)/test_grad: tests/test_grad.c tests/testutil.h mesanet.h | $(BUILD)
	$(CC) $(CSTD) $(CFLAGS) $(WARN) -I. -DMESANET_DOUBLE $< -o $@ -lm
# the Mesa op against the independent float64 oracle, and the oracle against the vectors
$(BUILD)/test_mesa: tests/test_mesa.c tests/testutil.h reference/mesa_oracle.h mesanet.h | $(BUILD)
	$(CC) $(CSTD) $(CFLAGS) $(WARN) -I. -Itests -DMESANET_DOUBLE $< -o $@ -lm
$(BUILD)/test_mesa_oracle: tests/test_mesa_oracle.c tests/testutil.h reference/mesa_oracle.h \
                           reference/vecfile.h | $(BUILD)
	$(CC) $(CSTD) $(CFLAGS) $(WARN) -I. $< -o $@ -lm
# linear-attention family and delta rule: every form against the vectors, each other and finite
# differences (double), their float bounds, and sanitizers
$(BUILD)/test_gla_d: tests/test_gla.c tests/testutil.h reference/vecfile.h mesanet.h | $(BUILD)
	$(CC) $(CSTD) $(CFLAGS) $(WARN) -I. -Itests -DMESANET_DOUBLE $< -o $@ -lm
$(BUILD)/test_gla_f: tests/test_gla.c tests/testutil.h reference/vecfile.h mesanet.h | $(BUILD)
	$(FULL) -Itests $< -o $@ $(ACCEL_LIBS) -lm
$(BUILD)/test_delta_d: tests/test_delta.c tests/testutil.h reference/vecfile.h mesanet.h | $(BUILD)
	$(CC) $(CSTD) $(CFLAGS) $(WARN) -I. -Itests -DMESANET_DOUBLE $< -o $@ -lm
$(BUILD)/test_delta_f: tests/test_delta.c tests/testutil.h reference/vecfile.h mesanet.h | $(BUILD)
	$(FULL) -Itests $< -o $@ $(ACCEL_LIBS) -lm
$(BUILD)/asan_test_gla: tests/test_gla.c tests/testutil.h reference/vecfile.h mesanet.h | $(BUILD)
	$(CC) $(CSTD) $(SAN) $(WARN) -I. -Itests -DMESANET_DOUBLE $< -o $@ -lm
$(BUILD)/asan_test_delta: tests/test_delta.c tests/testutil.h reference/vecfile.h mesanet.h | $(BUILD)
	$(CC) $(CSTD) $(SAN) $(WARN) -I. -Itests -DMESANET_DOUBLE $< -o $@ -lm
$(BUILD)/test_ssm_d: tests/test_ssm.c tests/testutil.h reference/vecfile.h mesanet.h | $(BUILD)
	$(CC) $(CSTD) $(CFLAGS) $(WARN) -I. -Itests -DMESANET_DOUBLE $< -o $@ -lm
$(BUILD)/test_ssm_f: tests/test_ssm.c tests/testutil.h reference/vecfile.h mesanet.h | $(BUILD)
	$(FULL) -Itests $< -o $@ $(ACCEL_LIBS) -lm
$(BUILD)/asan_test_ssm: tests/test_ssm.c tests/testutil.h reference/vecfile.h mesanet.h | $(BUILD)
	$(CC) $(CSTD) $(SAN) $(WARN) -I. -Itests -DMESANET_DOUBLE $< -o $@ -lm
$(BUILD)/test_xlstm_d: tests/test_xlstm.c tests/testutil.h reference/vecfile.h mesanet.h | $(BUILD)
	$(CC) $(CSTD) $(CFLAGS) $(WARN) -I. -Itests -DMESANET_DOUBLE $< -o $@ -lm
$(BUILD)/test_xlstm_f: tests/test_xlstm.c tests/testutil.h reference/vecfile.h mesanet.h | $(BUILD)
	$(FULL) -Itests $< -o $@ $(ACCEL_LIBS) -lm
$(BUILD)/asan_test_xlstm: tests/test_xlstm.c tests/testutil.h reference/vecfile.h mesanet.h | $(BUILD)
	$(CC) $(CSTD) $(SAN) $(WARN) -I. -Itests -DMESANET_DOUBLE $< -o $@ -lm
$(BUILD)/test_model_d: tests/test_model.c tests/testutil.h mesanet.h | $(BUILD)
	$(CC) $(CSTD) $(CFLAGS) $(WARN) -I. -DMESANET_DOUBLE $< -o $@ -lm
$(BUILD)/test_model_f: tests/test_model.c tests/testutil.h mesanet.h | $(BUILD)
	$(FULL) $< -o $@ $(ACCEL_LIBS) -lm
# checkpoints and argument checks, once per save tier: the Linux exchange, two renames, in place (no POSIX)
$(BUILD)/test_io: tests/test_io.c tests/testutil.h mesanet.h | $(BUILD)
	$(CC) $(CSTD) $(CFLAGS) $(WARN) -I. -Itests $< -o $@ -lm
$(BUILD)/test_io_rename: tests/test_io.c tests/testutil.h mesanet.h | $(BUILD)
	$(CC) $(CSTD) $(CFLAGS) $(WARN) -I. -Itests -DMN_NO_EXCHANGE $< -o $@ -lm
$(BUILD)/test_io_inplace: tests/test_io.c tests/testutil.h mesanet.h | $(BUILD)
	$(CC) $(CSTD) $(CFLAGS) $(WARN) -I. -Itests -DMN_NO_POSIX $< -o $@ -lm
$(BUILD)/test_vecfile: tests/test_vecfile.c reference/vecfile.h | $(BUILD)
	$(CC) $(CSTD) $(CFLAGS) $(WARN) -I. $< -o $@ -lm
# the header compiles warning-free as C99 and as C++, float and double
$(BUILD)/test_compile_c: tests/test_compile.c mesanet.h | $(BUILD)
	$(CC) $(CSTD) $(WARN) -Wpedantic -DMESANET_DOUBLE -fsyntax-only $<
	$(CC) $(CSTD) $(WARN) -Wpedantic $< -o $@ -lm
$(BUILD)/test_compile_cpp: tests/test_compile.cpp tests/test_compile.c mesanet.h | $(BUILD)
	$(CXX) $(WARN) -DMESANET_DOUBLE -fsyntax-only -x c++ $<
	$(CXX) $(WARN) -x c++ $< -o $@
# AddressSanitizer + UndefinedBehaviorSanitizer builds of the unit tests
SAN = -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
$(BUILD)/asan_test_grad: tests/test_grad.c tests/testutil.h mesanet.h | $(BUILD)
	$(CC) $(CSTD) $(SAN) $(WARN) -I. -DMESANET_DOUBLE $< -o $@ -lm
$(BUILD)/asan_test_model: tests/test_model.c tests/testutil.h mesanet.h | $(BUILD)
	$(CC) $(CSTD) $(SAN) $(WARN) -I. $< -o $@ -lm
$(BUILD)/asan_test_io: tests/test_io.c tests/testutil.h mesanet.h | $(BUILD)
	$(CC) $(CSTD) $(SAN) $(WARN) -I. -Itests -DMESANET_DOUBLE $< -o $@ -lm
$(BUILD)/asan_test_vecfile: tests/test_vecfile.c reference/vecfile.h | $(BUILD)
	$(CC) $(CSTD) $(SAN) $(WARN) -I. $< -o $@ -lm
# libFuzzer targets (clang) for the checkpoint and vector-file parsers
$(BUILD)/fuzz_safetensors: tests/fuzz_safetensors.c mesanet.h | $(BUILD)
	clang -g -O1 -fsanitize=fuzzer,address,undefined -I. $< -o $@ -lm
# the whole loader (config.json + model + optimizer from memory: every check mn_load makes)
$(BUILD)/fuzz_checkpoint: tests/fuzz_checkpoint.c mesanet.h | $(BUILD)
	clang -g -O1 -fsanitize=fuzzer,address,undefined -I. $< -o $@ -lm
$(BUILD)/fuzz_vecfile: tests/fuzz_vecfile.c reference/vecfile.h | $(BUILD)
	clang -g -O1 -fsanitize=fuzzer,address,undefined -I. $< -o $@ -lm

check-vectors: $(BUILD)/check_vectors
	./$(BUILD)/check_vectors --tol 1e-8 $(VECTORS)

FUZZ_SECONDS ?= 20
fuzz: $(BUILD)/fuzz_safetensors $(BUILD)/fuzz_checkpoint $(BUILD)/fuzz_vecfile
	@mkdir -p $(BUILD)/corpus_st $(BUILD)/corpus_ck $(BUILD)/corpus_vec
	./$(BUILD)/fuzz_safetensors -max_total_time=$(FUZZ_SECONDS) $(BUILD)/corpus_st tests/corpus/safetensors
	./$(BUILD)/fuzz_checkpoint -max_total_time=$(FUZZ_SECONDS) -dict=tests/fuzz_checkpoint.dict \
	    $(BUILD)/corpus_ck tests/corpus/checkpoint
	./$(BUILD)/fuzz_vecfile -max_total_time=$(FUZZ_SECONDS) -dict=tests/fuzz_vecfile.dict \
	    $(BUILD)/corpus_vec tests/corpus/vecfile

# set up first (as demo does: a fresh Debian machine lacks libstb-dev), then build everything and run the suites
test: setup
	@$(MAKE) --no-print-directory $(TEST_BINS) all $(BUILD)/fuzz_safetensors $(BUILD)/fuzz_checkpoint $(BUILD)/fuzz_vecfile
	@BUILD=$(BUILD) VECTORS=$(VECTORS) FUZZ_SECONDS=$(FUZZ_SECONDS) ./tests/run_all.sh

# REF-S training/inference throughput (attention, Mesa CG 10 and 30), the core ops' recurrent vs
# chunkwise times, then the Mesa op's accuracy, stability, speed and dynamic-CG tables; ~6 minutes on 2 cores
bench: setup $(BUILD)/bench $(BUILD)/bench_mesa $(BUILD)/bench_ops
	./$(BUILD)/bench results/bench.md
	./$(BUILD)/bench_ops results/bench_ops.md
	./$(BUILD)/bench_mesa results/mesa_bench.md

clean:
	rm -rf $(BUILD)

# ---- CUDA (optional; nvcc for sm_90a, compiles on a machine without a GPU) --------------------
# cuda/mesanet_cuda.o + mesanet_cuda_host.o: the GPU library for sm_90a (H100/H200: the Mesa kernels use
# wgmma), link both with -lcublas;
# build/test_cuda: every kernel against mesanet.h in double, and with the name "model" the whole
# GPU model (mn_cuda_model) against mn_model (run it on a GPU machine); build/bench_cuda: every GPU
# mixer's op (Mesa, attention/SWA, the GLA family) at fla's anchor shape and their decode steps
# (`bench_cuda attn`, `bench_cuda gla`: those rows alone); build/train_cuda: a byte-level model of
# any GPU pattern (--pattern, default mesa) trained on the GPU (examples/train.c's loop; --anchor is
# fla's 40M-parameter config), on one GPU or data-parallel over several (--gpus N, cuda/dist_cuda.h):
# NCCL is dlopen()ed at run time, so nothing NCCL is needed to build (-ldl only); run it with
# libnccl.so.2 on LD_LIBRARY_PATH or
# MN_NCCL_LIB=/path/to/libnccl.so.2 (results.md: "Multi-GPU (NCCL)")
NVCC    ?= nvcc
NVFLAGS ?= -O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -lineinfo -Xcompiler -Wall,-Wextra
CUDA_LIB = $(BUILD)/mesanet_cuda.o $(BUILD)/mesanet_cuda_host.o

.PHONY: cuda
cuda: $(BUILD)/test_cuda $(BUILD)/bench_cuda $(BUILD)/train_cuda $(BUILD)/synth_cuda $(BUILD)/lm_eval_cuda
$(BUILD)/mesanet_cuda.o: cuda/mesanet_cuda.cu cuda/mesanet_cuda.h mesanet.h | $(BUILD)
	$(NVCC) $(NVFLAGS) -I. -c $< -o $@
# the library's private float copy of mesanet.h (mn_model_init, mn_save, mn_load for the GPU model)
$(BUILD)/mesanet_cuda_host.o: cuda/mesanet_cuda_host.c mesanet.h | $(BUILD)
	$(CC) $(CSTD) $(CFLAGS) $(WARN) -I. -c $< -o $@
$(BUILD)/test_cuda: cuda/test_cuda.cu $(CUDA_LIB) cuda/mesanet_cuda.h mesanet.h | $(BUILD)
	$(NVCC) $(NVFLAGS) -Xcompiler -fopenmp -I. $< $(CUDA_LIB) -o $@ -lcublas -lgomp
$(BUILD)/bench_cuda: cuda/bench_cuda.cu $(CUDA_LIB) cuda/mesanet_cuda.h | $(BUILD)
	$(NVCC) $(NVFLAGS) -I. $< $(CUDA_LIB) -o $@ -lcublas
# build/synth_cuda: examples/synth.c (-DSYNTH_CUDA) with every cell trained and evaluated on the GPU by mn_cuda_model,
# one process per cell; C99, linked by nvcc; no BLAS, OpenMP or stb, so the GPU machine needs the CUDA libraries only
# (the report and heatmaps come from build/synth).
SYNTH_DEPS = examples/synth.c examples/common.h mesanet.h cuda/mesanet_cuda.h
$(BUILD)/synth_cuda.o: $(SYNTH_DEPS) | $(BUILD)
	$(CC) $(CSTD) $(CFLAGS) $(WARN) -I. $(filter -DMN_WIP_SKIP_%,$(NVFLAGS)) -DSYNTH_CUDA -DSYNTH_NO_PNG -c $< -o $@
$(BUILD)/synth_cuda: $(BUILD)/synth_cuda.o $(CUDA_LIB) | $(BUILD)
	$(NVCC) $(NVFLAGS) $< $(CUDA_LIB) -o $@ -lcublas -lm
# build/lm_eval_cuda: examples/lm_eval.c (-DLM_EVAL_CUDA) with the forwards on the GPU (results/lm.md's evaluation
# in seconds instead of minutes); OpenMP for the scoring and the CPU decoding, no BLAS or stb
$(BUILD)/lm_eval_cuda.o: examples/lm_eval.c examples/common.h mesanet.h cuda/mesanet_cuda.h | $(BUILD)
	$(CC) $(CSTD) $(CFLAGS) $(WARN) -I. -fopenmp -DLM_EVAL_CUDA -c $< -o $@
$(BUILD)/lm_eval_cuda: $(BUILD)/lm_eval_cuda.o $(CUDA_LIB) | $(BUILD)
	$(NVCC) $(NVFLAGS) $< $(CUDA_LIB) -o $@ -lcublas -lgomp -lm
$(BUILD)/train_cuda: cuda/train_cuda.cu $(CUDA_LIB) cuda/mesanet_cuda.h cuda/dist_cuda.h mesanet.h \
                     examples/common.h | $(BUILD)
	$(NVCC) $(NVFLAGS) -Xcompiler -fopenmp -I. $< $(CUDA_LIB) -o $@ -lcublas -lgomp -ldl
