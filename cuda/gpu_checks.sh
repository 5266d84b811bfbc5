#!/usr/bin/env bash
# gpu_checks.sh: the GPU machine's checks, each writing small summaries into DEST (default $OUT, else
# /tmp/gpu_checks), built binaries expected in build/ (carry them: `make cuda` here, then name build/test_cuda,
# build/train_cuda, build/bench_cuda, build/synth_cuda in the call's carry).
#
#   cuda/gpu_checks.sh tests   [DEST]   # test_cuda model, step and quick (the three at once; their summaries
#                                       # and every FAIL line in DEST/test_*.txt, the wall time of each)
#   cuda/gpu_checks.sh decode  [DEST]   # train_cuda --anchor --pattern P --bench_decode 64 for the recurrent
#                                       # patterns and attention: plain and CUDA-graph tokens/s in one run
#   cuda/gpu_checks.sh profile [DEST]   # ncu kernel shares (cuda/ncu_top.py) of one synthetic-task cell of
#                                       # the gpu-tf32 tier (transformer, mesa: 200 parity steps) and of
#                                       # bench_cuda delta
#   cuda/gpu_checks.sh all     [DEST]   # the three, in that order
#
# Exit status: 0 when every program ran and every test passed, 1 otherwise (the summaries say which).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
what=${1:-}; dest=${2:-${OUT:-/tmp/gpu_checks}}
mkdir -p "$dest" || exit 1
NCU=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
rc=0

run_tests() {   # the three test sets at once (they check numbers, not speed)
    local s pids=()
    for s in model step quick; do
        ( t0=$(date +%s); ./build/test_cuda 0 $s > "/tmp/gpu_checks_$s.log" 2>&1; r=$?
          { echo "./build/test_cuda 0 $s: status $r, $(( $(date +%s) - t0 )) s"
            grep -E '^FAIL' "/tmp/gpu_checks_$s.log" | head -40
            tail -1 "/tmp/gpu_checks_$s.log"; } > "$dest/test_$s.txt"
          exit $r ) &
        pids+=($!)
    done
    for s in "${pids[@]}"; do wait "$s" || rc=1; done
}

run_decode() {   # one line per (pattern, batch, plain / graph)
    local p
    for p in mesa gdn mamba2 hawk mlstm slstm attn; do
        ./build/train_cuda --anchor --pattern "$p" --bench_decode 64 2>&1 | grep -E '^bench_decode|rror' \
            >> "$dest/decode.txt" || rc=1
    done
}

run_profile() {   # kernel shares; ncu serialises the kernels, so the shares are what to read
    local m
    if [ ! -x "$NCU" ]; then echo "gpu_checks: no ncu at $NCU" | tee "$dest/profile.md"; rc=1; return; fi
    for m in transformer mesa; do
        "$NCU" --metrics gpu__time_duration.sum --csv --launch-skip 2000 --launch-count 1500 \
            ./build/synth_cuda --tier gpu-tf32 --tasks parity --models $m --seeds 1 --steps 200 --eval_n 64 \
            --eval_lens 128 --jobs 1 --out "/tmp/gpu_checks_$m.csv" > "/tmp/gpu_checks_ncu_$m.csv" 2>&1
        python3 cuda/ncu_top.py "/tmp/gpu_checks_ncu_$m.csv" --title "synth_cuda gpu-tf32 parity $m (1,500 kernels)" \
            >> "$dest/profile.md" || rc=1
        echo >> "$dest/profile.md"
    done
    "$NCU" --metrics gpu__time_duration.sum --csv --launch-count 3000 ./build/bench_cuda delta \
        > /tmp/gpu_checks_ncu_delta.csv 2>&1
    python3 cuda/ncu_top.py /tmp/gpu_checks_ncu_delta.csv --title "bench_cuda delta (first 3,000 kernels)" \
        >> "$dest/profile.md" || rc=1
}

case $what in
    tests) run_tests ;;
    decode) run_decode ;;
    profile) run_profile ;;
    all) run_tests; run_decode; run_profile ;;
    *) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
exit $rc
