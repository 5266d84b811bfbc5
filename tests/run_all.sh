#!/usr/bin/env bash
# Runs every test suite that `make test` built and prints one summary line at the end:
# "N passed, N failed" counting suites (each suite prints its own check counts).
set -u
B=${BUILD:-build}
pass=0; fail=0; failed=(); times=()
run() {  # run NAME CMD... (its wall time is kept for the summary: CI must stay under 15 minutes)
    local name=$1 t0=$SECONDS; shift
    echo "=== $name"
    if "$@"; then pass=$((pass+1)); else fail=$((fail+1)); failed+=("$name"); echo "*** $name FAILED"; fi
    times+=("$((SECONDS - t0)) s  $name")
}
run "compile C99 (float+double, -Wall -Wextra -Werror -Wpedantic)" "$B/test_compile_c"
run "compile C++ (float+double)" "$B/test_compile_cpp"
run "synthetic-task generators (labels by independent computation)" "$B/test_tasks"
run "finite-difference gradients (double)" "$B/test_grad"
run "Mesa op vs float64 oracle, across forms (double)" "$B/test_mesa"
run "Mesa float64 oracle vs golden vectors" "$B/test_mesa_oracle"
run "Mesa forget-gate initialisation (mesa_gate_bias)" "$B/test_mesa_gate"
run "linear attention / simple GLA / GLA (double)" "$B/test_gla_d"
run "linear attention / simple GLA / GLA (float)" "$B/test_gla_f"
run "DeltaNet / Gated DeltaNet (double)" "$B/test_delta_d"
run "DeltaNet / Gated DeltaNet (float)" "$B/test_delta_f"
run "Mamba-2 SSD / RG-LRU (double)" "$B/test_ssm_d"
run "Mamba-2 SSD / RG-LRU (float)" "$B/test_ssm_f"
run "mLSTM / sLSTM (double)" "$B/test_xlstm_d"
run "mLSTM / sLSTM (float)" "$B/test_xlstm_f"
run "model tests (double)" "$B/test_model_d"
run "model tests (float, BLAS/OpenMP as built)" "$B/test_model_f"
run "vector-file parser" "$B/test_vecfile"
run "checkpoints and argument checks: swap by exchange" "$B/test_io"
run "checkpoints: swap by two renames (MN_NO_EXCHANGE)" "$B/test_io_rename"
run "checkpoints: in place (MN_NO_POSIX)" "$B/test_io_inplace"
run "peer vectors (double, 1e-8)" "$B/check_vectors" --tol 1e-8 "${VECTORS:-reference/vectors}"
run "ASan+UBSan: gradients" "$B/asan_test_grad"
run "ASan+UBSan: model" "$B/asan_test_model"
run "ASan+UBSan: GLA family" "$B/asan_test_gla"
run "ASan+UBSan: delta rule" "$B/asan_test_delta"
run "ASan+UBSan: Mamba-2 SSD / RG-LRU" "$B/asan_test_ssm"
run "ASan+UBSan: mLSTM / sLSTM" "$B/asan_test_xlstm"
run "ASan+UBSan: vector-file parser" "$B/asan_test_vecfile"
run "ASan+UBSan: checkpoints and argument checks (double)" "$B/asan_test_io"
run "command-line programs" ./tests/test_cli.sh "$B"
run "synthetic suite, quick tier (parity learns; resume; report)" ./tests/test_synth.sh "$B"
run "language-model comparison, CPU side (data split, lm_eval, lm_report)" ./tests/test_lm.sh "$B"
# the Python bridge, bit for bit against C in double (Debian's python3: its numpy and Jupyter packages)
run "Python bridge (notebooks/mesanet.py) vs the C library" "${PYTHON:-/usr/bin/python3}" tests/test_bridge.py "$B"
run "tutorials: every CPU notebook executes, saved outputs match" make --no-print-directory notebooks BUILD="$B"
# the optional CUDA translation unit compiles wherever nvcc is installed (it runs on a GPU machine only)
if command -v nvcc > /dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
    # a make of its own (not a sub-make of `make test`, whose job server is not handed to this script); one job a
    # core: the GPU unit compiles beside the host objects, then the programs link two at a time
    # (CI: 161 s -> 138 s)
    run "CUDA: make cuda compiles (sm_90a; not run here)" env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
        make --no-print-directory -j"$(nproc 2> /dev/null || echo 2)" cuda BUILD="$B" \
        NVCC="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
    # the multi-GPU launcher's checks that run before any GPU is touched: a batch that does not split,
    # and a missing NCCL library, each a clear message and a non-zero status
    gpu_free() {
        local out rc
        out=$("$B/train_cuda" --gpus 2 --batch 3 2>&1); rc=$?
        [ $rc -eq 2 ] && grep -q "does not split over 2 GPUs" <<< "$out" ||
            { echo "bad --batch: rc $rc: $out"; return 1; }
        out=$(MN_NCCL_LIB=/nonexistent "$B/train_cuda" --gpus 2 2>&1); rc=$?
        [ $rc -eq 1 ] && grep -q "NCCL not found" <<< "$out" || { echo "missing NCCL: rc $rc: $out"; return 1; }
        echo "train_cuda: 2 passed, 0 failed"
    }
    [ -x "$B/train_cuda" ] && run "CUDA: multi-GPU launcher errors without a GPU" gpu_free
else echo "=== CUDA: nvcc not found, make cuda skipped"; fi
# the profile summariser of cuda/results.md's kernel shares (pure Python: its parser on a built-in ncu sample)
run "CUDA: ncu_top.py parses an ncu CSV" "${PYTHON:-/usr/bin/python3}" cuda/ncu_top.py --selftest
# the scripts a device call runs (a syntax error there costs a whole call): they parse, and gpu_checks.sh prints its
# usage with status 2 when given no check
scripts_parse() {
    local f n=0
    for f in cuda/*.sh examples/*.sh; do bash -n "$f" || { echo "bash -n $f failed"; return 1; }; n=$((n + 1)); done
    for f in cuda/*.py; do
        "${PYTHON:-/usr/bin/python3}" -c "import ast, sys; ast.parse(open(sys.argv[1]).read())" "$f" ||
            { echo "$f does not parse"; return 1; }
        n=$((n + 1))
    done
    bash cuda/gpu_checks.sh > /dev/null 2>&1
    [ $? -eq 2 ] || { echo "gpu_checks.sh without a check: not status 2"; return 1; }
    echo "scripts: $((n + 1)) passed, 0 failed"
}
run "device scripts parse (bash -n, Python's parser)" scripts_parse
mkdir -p "$B/corpus_st" "$B/corpus_ck" "$B/corpus_vec"
# libFuzzer is chatty: keep its log and show the end of it only when it finds something
fuzz() {  # fuzz BINARY CORPUS SEEDS [extra flags]
    local bin=$1 corpus=$2 seeds=$3; shift 3
    if "$bin" -max_total_time="${FUZZ_SECONDS:-20}" "$@" "$corpus" "$seeds" > "$B/$(basename "$bin").log" 2>&1; then
        tail -n 1 "$B/$(basename "$bin").log"
    else tail -n 30 "$B/$(basename "$bin").log"; return 1; fi
}
run "fuzz safetensors/config.json parsers (${FUZZ_SECONDS:-20}s)" \
    fuzz "$B/fuzz_safetensors" "$B/corpus_st" tests/corpus/safetensors
run "fuzz checkpoint loader: config + model + optimizer (${FUZZ_SECONDS:-20}s)" \
    fuzz "$B/fuzz_checkpoint" "$B/corpus_ck" tests/corpus/checkpoint -dict=tests/fuzz_checkpoint.dict
run "fuzz vector-file parser (${FUZZ_SECONDS:-20}s)" \
    fuzz "$B/fuzz_vecfile" "$B/corpus_vec" tests/corpus/vecfile -dict=tests/fuzz_vecfile.dict
echo "slowest suites (wall time; all suites $SECONDS s, the make before them not counted):"
printf '%s\n' "${times[@]}" | sort -rn | head -6 | sed 's/^/  /'
[ $fail -eq 0 ] || echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
