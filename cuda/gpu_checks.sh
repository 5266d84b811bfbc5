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
#                                       # the gpu-tf32 tier (transformer, gdn, mesa: 3,000 launches of parity
#                                       # training; the launches and kernel time of one step) and of
#                                       # bench_cuda delta
#   cuda/gpu_checks.sh jobs    [DEST]   # how many synthetic-task cells to run at once: 600 parity steps of
#                                       # J cells (the 11 models in turn) for J = 1, 4, 8, 11, 16, 22 under MPS
#                                       # and J = 11 without; the steps/s of all together in DEST/jobs.md
#   cuda/gpu_checks.sh forms   [DEST]   # one GDN / GDN [-1,1] parity cell alone (600 steps) on the chunkwise
#                                       # and on the recurrent DeltaNet kernels (synth_cuda --delta_form):
#                                       # wall time and training loss of each in DEST/forms.md
#   cuda/gpu_checks.sh delta   [DEST]   # test_cuda delta, ops and the model cases of deltanet and gdn
#                                       # patterns, bench_cuda delta (the kept form's rows too), and the anchor training
#                                       # tokens/s of deltanet, gdn and gdn_neg (train_cuda --bench 1, the kept
#                                       # form and --delta_recompute alternating, twice each): the
#                                       # DeltaNet kernels after a change, in DEST/delta.md
#   cuda/gpu_checks.sh train   [DEST]   # for each pattern of $PATTERNS (default: those under 300k tokens/s,
#                                       # mamba2 slstm gdn deltanet): the anchor training tokens/s (--bench 1)
#                                       # and the ncu kernel shares of two training steps, in DEST/train.md
#   cuda/gpu_checks.sh ssd     [DEST]   # test_cuda gla and ssd (the local gate gradient, ctx->ssd_tf32),
#                                       # bench_cuda ssd, the anchor tokens/s of mamba2 and mamba2_neg with and
#                                       # without --ssd_tf32 (alternating, twice each), in DEST/ssd.md
#   cuda/gpu_checks.sh peers   [DEST]   # fla's chunk_gla and chunk_simple_gla (cuda/peer_gla.py; fla's package
#                                       # unpacked where PYTHONPATH finds it, its Triton compiled first, one
#                                       # process per kernel and dtype at once, up to $WARM s, default 240)
#                                       # then timed alone beside bench_cuda gla, in
#                                       # DEST/peers.md; Triton's cache packed into DEST/triton.tgz.part* (15 MB
#                                       # pieces: a call brings back files of at most 16 MiB; carry the folder
#                                       # and pass TRITON_PARTS=DIR: the next call skips compiling)
#   cuda/gpu_checks.sh bf16    [DEST]   # the bf16 model cases and the ops tests, then the anchor tokens/s of
#                                       # $PATTERNS (default mamba2 slstm mesa gdn) with TF32 and bf16
#                                       # projections (alternating, twice each), in DEST/bf16.md
#   cuda/gpu_checks.sh layers  [DEST]   # the sLSTM and Mamba-2 layer changes of session 17: test_cuda slstm,
#                                       # ssd, ops and the model cases of slstm, mamba2 and bf16, bench_cuda
#                                       # slstm, then the anchor tokens/s of mamba2, mamba2_neg and slstm with
#                                       # TF32 and bf16 projections (alternating, twice each), in DEST/layers.md
#   cuda/gpu_checks.sh table   [DEST]   # the measurements of cuda/results.md's "Every mixer in one table", alone
#                                       # on the GPU: bench_cuda (the Mesa op, attention, the GLA family) and
#                                       # each family's rows (delta ssd rglru mlstm slstm), torch's SDPA
#                                       # (cuda/peer_sdpa.py, if torch is there), then the anchor tokens/s of
#                                       # $PATTERNS (default: every pattern of the table) in each of $MATHS
#                                       # (default "tf32 bf16"), in DEST/table.md; what does not fit in $TABLE_S
#                                       # seconds (default 560) is listed as skipped, for the next call
#   cuda/gpu_checks.sh seeds   [DEST]   # the model cases named by $CASE (default hawk,mesa) over several draws
#                                       # (MN_TEST_SEED in $SEEDS, default 1..8, all at once): whether a bound
#                                       # that failed on one draw holds on others; every FAIL line under its
#                                       # case's name and each draw's summary, in DEST/seeds.md
#   cuda/gpu_checks.sh next    [DEST]   # what cuda/results.md still owes, in one call of $LIM s (default 560):
#                                       # phase A at once under MPS (seeds, tests, fla's warm-up, the synthetic
#                                       # cells of $SYNTH), phase B alone (GLA beside fla, the Mesa bf16 scan
#                                       # A/B, the bf16 checkpoint minute, on an H200 the table; PROFILE=1: the
#                                       # synthetic cells' ncu shares if time is left), in DEST/next.md
#   cuda/gpu_checks.sh all     [DEST]   # tests, decode and profile, in that order
#
# Exit status: 0 when every program ran and every test passed, 1 otherwise (the summaries say which).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
what=${1:-}; dest=${2:-${OUT:-/tmp/gpu_checks}}
mkdir -p "$dest" || exit 1
NCU=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
rc=0

# tmo CMD...: CMD under `timeout $TMO` when TMO is set (run_next's phase A), else CMD
tmo() { if [ -n "${TMO:-}" ]; then timeout "$TMO" "$@"; else "$@"; fi; }

run_tests() {   # the three test sets at once (they check numbers, not speed)
    local s pids=()
    for s in model step quick; do
        ( t0=$(date +%s); tmo stdbuf -oL -eL ./build/test_cuda 0 $s > "/tmp/gpu_checks_$s.log" 2>&1; r=$?
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
    for m in transformer gdn mesa; do
        "$NCU" --clock-control none --metrics gpu__time_duration.sum --csv --launch-skip 3000 --launch-count 3000 \
            ./build/synth_cuda --tier gpu-tf32 --tasks parity --models $m --seeds 1 --steps 200 --eval_n 64 \
            --eval_lens 128 --jobs 1 --out "/tmp/gpu_checks_$m.csv" > "/tmp/gpu_checks_ncu_$m.csv" 2>&1
        python3 cuda/ncu_top.py "/tmp/gpu_checks_ncu_$m.csv" --title "synth_cuda gpu-tf32 parity $m (3,000 kernels)" \
            >> "$dest/profile.md" || rc=1
        echo >> "$dest/profile.md"
    done
    "$NCU" --clock-control none --metrics gpu__time_duration.sum --csv --launch-count 3000 ./build/bench_cuda delta \
        > /tmp/gpu_checks_ncu_delta.csv 2>&1
    python3 cuda/ncu_top.py /tmp/gpu_checks_ncu_delta.csv --title "bench_cuda delta (first 3,000 kernels)" \
        >> "$dest/profile.md" || rc=1
}

# short_cells OUT.csv LOG ARGS...: 600 gpu-tf32 parity-protocol steps a cell, a 64-sequence evaluation at 128, from
# scratch (OUT and its state removed first); prints the wall seconds; status 1 when synth_cuda fails or a cell does
short_cells() {
    local out=$1 log=$2 t0 r=0; shift 2
    rm -rf "$out" "${out%.csv}.state"
    t0=$(date +%s.%N)
    ./build/synth_cuda --tier gpu-tf32 --steps 600 --eval_n 64 --eval_lens 128 --out "$out" "$@" > "$log" 2>&1 || r=1
    awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f\n", b - a }'
    grep -q FAILED "$log" && r=1
    return $r
}

run_jobs() {   # aggregate training steps/s of J cells at once (the process start and a 64-sequence eval included)
    local spec j i w mps models=(transformer mamba2 mamba2_neg gdn gdn_neg xlstm10 xlstm11 xlstm01 mesa mesa_g95
                                  hawk_mesa)
    command -v nvidia-cuda-mps-control > /dev/null || { echo "gpu_checks: no nvidia-cuda-mps-control" > "$dest/jobs.md"
                                                          rc=1; return; }
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/gpu_checks_mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/gpu_checks_mps/log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    { echo "| cells at once | MPS | wall s | steps/s, all cells | steps/s per cell |"; echo "|---|---|---|---|---|"; } \
        > "$dest/jobs.md"
    for spec in 1:1 4:1 8:1 11:1 16:1 22:1 11:0; do
        j=${spec%:*} mps=${spec#*:}
        : > /tmp/gpu_checks_cells.txt
        for ((i = 0; i < j; i++)); do echo "parity ${models[i % 11]} $((i / 11 + 1))" >> /tmp/gpu_checks_cells.txt; done
        [ "$mps" = 1 ] && nvidia-cuda-mps-control -d
        w=$(short_cells /tmp/gpu_checks_jobs.csv /tmp/gpu_checks_jobs.log --cells /tmp/gpu_checks_cells.txt \
            --jobs "$j") || { rc=1; grep FAILED /tmp/gpu_checks_jobs.log >> "$dest/jobs.md"; }
        [ "$mps" = 1 ] && echo quit | nvidia-cuda-mps-control
        awk -v j="$j" -v m="$mps" -v w="$w" 'BEGIN { printf "| %d | %s | %.1f | %.0f | %.0f |\n",
            j, m ? "yes" : "no", w, j * 600 / w, 600 / w }' >> "$dest/jobs.md"
        sleep 1
    done
}

run_forms() {   # which DeltaNet form a synthetic cell should train with
    local m f w
    { echo "| model | form | wall s (600 steps + 64-sequence eval) | mean training loss |"
      echo "|---|---|---|---|"; } > "$dest/forms.md"
    for m in gdn gdn_neg; do
        for f in auto recurrent auto recurrent; do   # twice each, alternating: the machine's noise beside the gap
            w=$(short_cells /tmp/gpu_checks_forms.csv /tmp/gpu_checks_forms.log --tasks parity --models "$m" \
                --seeds 1 --jobs 1 --delta_form "$f") ||
                { rc=1; tail -3 /tmp/gpu_checks_forms.log >> "$dest/forms.md"; }
            awk -F, -v m="$m" -v f="$f" -v w="$w" 'NR == 2 { printf "| %s | %s | %.2f | %s |\n", m, f, w, $18 }' \
                /tmp/gpu_checks_forms.csv >> "$dest/forms.md"
        done
    done
}

# alternate FILE PATTERN FLAG LABEL: the anchor training tokens/s of PATTERN as LABEL and with FLAG, alternating,
# twice each (the machine's noise beside the gap), one line a run appended to FILE
alternate() {
    local f
    for f in "$4" "$3" "$4" "$3"; do
        ./build/train_cuda --anchor --pattern "$2" --bench 1 --bench_steps 12 ${f#"$4"} 2>&1 \
            | grep -iE 'tokens/s over|rror' | sed "s/^/$2 ${f#--}: /" >> "$1" || rc=1
    done
}

# test_summaries FILE SET[:TEXT]...: ./build/test_cuda 0 SET for each, with MN_TEST_CASE=TEXT (model:TEXT: the
# whole-model cases whose name holds TEXT; a bare SET passes SET itself), its FAIL lines and summary into FILE.
# The sets run at once, each with its share of the CPU cores for the double reference's OpenMP (session 17: six
# sets of 16 threads each on 16 cores left the sLSTM sets unfinished after 230 s) and line-buffered output, so
# a set that a timeout stops still shows how far it got (its last line in FILE).
test_summaries() {
    local out=$1 s log pids=() th; shift
    th=$(( $(nproc 2> /dev/null || echo 16) / $# )); [ "$th" -ge 1 ] || th=1
    for s in "$@"; do
        log=/tmp/gpu_checks_${s/:/_}.log
        MN_TEST_CASE=${s#*:} OMP_NUM_THREADS=$th stdbuf -oL -eL ./build/test_cuda 0 ${s%%:*} > "$log" 2>&1 &
        pids+=($!)
    done
    for s in "$@"; do
        wait "${pids[0]}" || rc=1; pids=("${pids[@]:1}")
        log=/tmp/gpu_checks_${s/:/_}.log
        { echo "MN_TEST_CASE=${s#*:} ./build/test_cuda 0 ${s%%:*}:"; grep -E '^FAIL' "$log" | head -20
          tail -1 "$log"; echo; } >> "$out"
    done
}

run_delta() {   # correctness first (a failing test is reported, the timings still run)
    local p
    test_summaries "$dest/delta.md" delta ops model:deltanet model:gdn
    { echo '```'; ./build/bench_cuda delta 2>&1 | tail -40; echo '```'; } >> "$dest/delta.md" || rc=1
    for p in deltanet gdn gdn_neg; do alternate "$dest/delta.md" $p --delta_recompute kept; done   # kept: the default
}

run_ssd() {   # Mamba-2's SSD in TF32 with the local gate gradient against the default 3xTF32
    local s p
    for s in gla ssd; do
        ./build/test_cuda 0 $s > "/tmp/gpu_checks_$s.log" 2>&1 || rc=1
        { echo "./build/test_cuda 0 $s:"; grep -E '^FAIL' "/tmp/gpu_checks_$s.log" | head -20
          grep -E 'local' "/tmp/gpu_checks_$s.log" | head -30; tail -1 "/tmp/gpu_checks_$s.log"; echo
        } >> "$dest/ssd.md"
    done
    { echo '```'; ./build/bench_cuda ssd 2>&1 | tail -30; echo '```'; } >> "$dest/ssd.md" || rc=1
    for p in mamba2 mamba2_neg; do alternate "$dest/ssd.md" $p --ssd_tf32 3xtf32; done
}

PY=${PY:-$(command -v /opt/torch/.venv/bin/python3 || command -v python3)}

# peer_warm FILE: fla's GLA kernels compiled and autotuned (Triton compiles on the CPU, one kernel after the other
# within a process: run 39's single process had not finished in 245 s), one process per (kernel, dtype), all at
# once, each given up to $WARM s (default 240); their status and the wall time appended to FILE. Triton's compiled
# kernels persist in TRITON_CACHE_DIR: the cache is packed into DEST/triton.tgz.part* (15 MB pieces: run 38's whole
# archive, 26 MB, did not come back), and a later call given the pieces (TRITON_PARTS=DIR, carried in) starts there
peer_warm() {
    local n d pids=() t0
    export PYTHONPATH=${PYTHONPATH:-}:$PWD/cuda TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/gpu_checks_triton}
    mkdir -p "$TRITON_CACHE_DIR"
    [ -n "${TRITON_PARTS:-}" ] && { cat "$TRITON_PARTS"/triton.tgz.part* | tar xzf - -C "$TRITON_CACHE_DIR" || rc=1; }
    t0=$(date +%s)
    for n in chunk_gla chunk_simple_gla; do
        for d in bf16 fp32; do
            timeout "${WARM:-240}" "$PY" cuda/peer_gla.py 4 4096 16 128 $n $d \
                > "/tmp/gpu_checks_peer_${n}_$d.log" 2>&1 &
            pids+=($!)
        done
    done
    for n in "${pids[@]}"; do wait "$n"; echo -n "peer warm-up status $? " >> "$1"; done
    echo "($(( $(date +%s) - t0 )) s)" >> "$1"
    tar czf - -C "$TRITON_CACHE_DIR" . | split -b 15m - "$dest/triton.tgz.part" || rc=1
}
# peer_time FILE: bench_cuda gla, then fla's kernels (warmed up), alone on the GPU, appended to FILE
peer_time() {
    export PYTHONPATH=${PYTHONPATH:-}:$PWD/cuda TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/gpu_checks_triton}
    { echo '```'; ./build/bench_cuda gla 2>&1 | tail -30; echo '```'; } >> "$1" || rc=1
    timeout 120 "$PY" cuda/peer_gla.py 4 4096 16 128 chunk_gla,chunk_simple_gla >> "$1" 2>&1 || rc=1
}

run_peers() {   # fla's GLA kernels and ours in one call: the peer compiled and autotuned first
    peer_warm "$dest/peers.md"
    peer_time "$dest/peers.md"
}

run_layers() {   # session 17's sLSTM walk (two rows a thread, split-K dR) and Mamba-2 layer (fused conv, padded rows)
    local p
    test_summaries "$dest/layers.md" slstm model:slstm ssd model:mamba2 model:bf16 ops
    { echo '```'; ./build/bench_cuda slstm 2>&1 | tail -12; echo '```'; } >> "$dest/layers.md" || rc=1
    for p in mamba2 mamba2_neg slstm; do alternate "$dest/layers.md" "$p" "--math bf16" tf32; done
}

run_bf16() {   # mixed precision after a change: its tests, then whether it is faster than TF32 pattern by pattern
    local p
    test_summaries "$dest/bf16.md" model:bf16 ops
    for p in ${PATTERNS:-mamba2 slstm mesa gdn}; do alternate "$dest/bf16.md" "$p" "--math bf16" tf32; done
}

run_train() {   # where an anchor training step's GPU time goes, pattern by pattern
    local p
    for p in ${PATTERNS:-mamba2 slstm gdn deltanet}; do
        ./build/train_cuda --anchor --pattern "$p" --bench 1 --bench_steps 12 2>&1 | grep -iE 'tokens/s|rror' \
            | sed "s/^/$p: /" >> "$dest/train.md" || rc=1
        [ -x "$NCU" ] || continue
        # steps 1-2 are skipped (cuBLAS's first calls, the workspace), the loss kernel marks the steps counted
        "$NCU" --clock-control none --metrics gpu__time_duration.sum --csv --launch-skip 2000 --launch-count 2000 \
            ./build/train_cuda --anchor --pattern "$p" --steps 12 --seconds 0 --quiet \
            > "/tmp/gpu_checks_ncu_$p.csv" 2>&1
        python3 cuda/ncu_top.py "/tmp/gpu_checks_ncu_$p.csv" --top 20 \
            --title "train_cuda --anchor --pattern $p (2,000 kernels after 2,000)" >> "$dest/train.md" || rc=1
        echo >> "$dest/train.md"
    done
}

run_table() {   # one machine, nothing else on it: the numbers of the one table, each with its command
    local t0 p m f out="$dest/table.md"
    local pats=${PATTERNS:-attn swa linattn sgla gla deltanet gdn gdn_neg mamba2 mamba2_neg hawk mlstm slstm mesa \
        hawk,mesa mlstm,mlstm,mlstm,mlstm,mlstm,mlstm,mlstm,slstm}
    t0=$(date +%s)
    left() { echo $(( ${TABLE_S:-560} - ($(date +%s) - t0) )); }
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader >> "$out" 2>&1
    for f in "" delta ssd rglru mlstm slstm; do
        if [ "$(left)" -lt 90 ]; then echo "skipped: bench_cuda $f" >> "$out"; continue; fi
        { echo "./build/bench_cuda $f"; echo '```'; timeout 120 ./build/bench_cuda $f 2>&1 | grep -E '^\||^$|^[A-Z]'
          echo '```'; } >> "$out" || rc=1
    done
    if [ "$(left)" -gt 90 ] && "$PY" -c "import torch" 2> /dev/null; then
        { echo "cuda/peer_sdpa.py"; echo '```'; timeout 90 "$PY" cuda/peer_sdpa.py 2>&1 | tail -20; echo '```'; } \
            >> "$out" || rc=1
    fi
    for m in ${MATHS:-tf32 bf16}; do
        for p in $pats; do
            if [ "$(left)" -lt 30 ]; then echo "skipped: $p $m" >> "$out"; continue; fi
            ./build/train_cuda --anchor --pattern "$p" --bench 1 --bench_steps 12 --math "$m" 2>&1 \
                | grep -iE 'tokens/s over|MFU|rror' | sed "s|^|$p $m: |" >> "$out" || rc=1
        done
    done
}

run_seeds() {   # one case set, many draws (each model case draws from MN_TEST_SEED and its name)
    local sd case=${CASE:-hawk,mesa} seeds=${SEEDS:-1 2 3 4 5 6 7 8} pids=() th n
    n=$(echo $seeds | wc -w); th=$(( $(nproc 2> /dev/null || echo 16) / n )); [ "$th" -ge 1 ] || th=1
    for sd in $seeds; do
        MN_TEST_SEED=$sd MN_TEST_CASE=$case OMP_NUM_THREADS=$th tmo stdbuf -oL ./build/test_cuda 0 model \
            > "/tmp/gpu_checks_seed$sd.log" 2>&1 &
        pids+=($!)
    done
    for sd in "${pids[@]}"; do wait "$sd" || rc=1; done
    for sd in $seeds; do
        { echo "MN_TEST_SEED=$sd MN_TEST_CASE=$case ./build/test_cuda 0 model:"
          grep -E '^-- model|^FAIL' "/tmp/gpu_checks_seed$sd.log" | grep -B1 '^FAIL' | head -40
          # every Mesa gate tensor's line, passed or not, under its case: the spread over draws sizes a bound
          awk '/^-- model /{ sub(/^-- model /, ""); sub(/: pattern.*/, ""); c = $0; next }
               /grad .*attn\.[ab]_proj\.(weight|bias)/{ print "  " c ": " $0 }' "/tmp/gpu_checks_seed$sd.log"
          tail -1 "/tmp/gpu_checks_seed$sd.log"; echo; } >> "$dest/seeds.md"
    done
}

run_next() {   # the checks cuda/results.md's "What remains" owes (1, 2, 6), in one call of $LIM s (default 560)
    local t0 pids=() p f out="$dest/next.md" lim=${LIM:-560} mps=0 syn=/tmp/gpu_checks_synth
    t0=$(date +%s)
    next_left() { echo $(( lim - ($(date +%s) - t0) )); }   # (run_table has its own left)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader >> "$out" 2>&1
    # phase A, at once under MPS (numbers and compilation, no speed read): the hawk,mesa draws (seeds.md), the
    # model / step / quick sets (test_*.txt), fla's warm-up, and the synthetic cells of $SYNTH (synth_cuda's
    # --tasks / --models / --seeds, e.g. SYNTH="--tasks z5 --models mesa,mesa_g95 --seeds 1"; paused states in
    # DEST/synth.state.part*, resumed from the pieces in folder $SYNTH_PARTS), each stopped at $PA s (default half
    # of LIM)
    local pa=${PA:-$(( lim / 2 ))}
    if command -v nvidia-cuda-mps-control > /dev/null; then
        export CUDA_MPS_PIPE_DIRECTORY=/tmp/gpu_checks_mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/gpu_checks_mps/log
        mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
        nvidia-cuda-mps-control -d && mps=1
    fi
    ( TMO=$(( pa - 15 )) run_seeds; exit $rc ) & pids+=($!)
    ( TMO=$(( pa - 15 )) OMP_NUM_THREADS=2 run_tests; exit $rc ) & pids+=($!)
    ( WARM=$(( pa - 20 )) peer_warm "$out"; exit $rc ) & pids+=($!)
    if [ -n "${SYNTH:-}" ]; then
        # the tree's CSV first, so that its finished cells are skipped (`build/synth --merge` takes back the new rows)
        mkdir -p "$syn"; cp results/synth_gpu_tf32.csv "$syn/" 2> /dev/null
        [ -n "${SYNTH_PARTS:-}" ] && { cat "$SYNTH_PARTS"/*.part* | tar xzf - -C "$syn" || rc=1; }
        # (DeltaNet / GDN cells on the recurrent kernels, as examples/synth_gpu.sh runs them: 1.3x at these lengths)
        # shellcheck disable=SC2086  # SYNTH is a list of options
        ( ./build/synth_cuda --tier gpu-tf32 --delta_form recurrent $SYNTH --jobs "${JOBS:-6}" \
              --out "$syn/synth_gpu_tf32.csv" \
              --state "$syn/st" --stop $(( pa - 30 )) > "$syn/log" 2>&1 ) & pids+=($!)
    fi
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    [ "$mps" = 1 ] && { echo quit | nvidia-cuda-mps-control; sleep 1; }
    echo "phase A done at $(( $(date +%s) - t0 )) s" >> "$out"
    if [ -n "${SYNTH:-}" ]; then
        { echo '```'; tail -12 "$syn/log"; echo '```'; } >> "$out"
        cp "$syn/synth_gpu_tf32.csv" "$dest/" 2> /dev/null
        [ -d "$syn/st" ] && { tar czf - -C "$syn" st | split -b 15m - "$dest/synth.state.part" || rc=1; }
    fi
    # phase B, alone: GLA beside fla (issue 16), the bf16 checkpoint minute (issue 17: trained in bf16, loaded and
    # sampled by the CPU build), the Mesa layers' TF32 scan and kept states in bf16 mode against the default (issue
    # 17, alternating), then on an H200 the one table with what time is left
    if [ "$(next_left)" -gt 150 ]; then peer_time "$out"; else echo "skipped: GLA beside fla" >> "$out"; fi
    if [ "$(next_left)" -gt 110 ]; then
        find /usr/lib/python3* -name '*.py' -size -200k -print0 | sort -z | xargs -0 cat > /tmp/gpu_checks_py.txt \
            2> /dev/null
        { echo "bf16 checkpoint minute:"; echo '```'
          ./build/train_cuda --anchor --math bf16 --data /tmp/gpu_checks_py.txt --seconds 60 --cpu_check 512 \
              --sample 200 --out /tmp/gpu_checks_b16 2>&1 | grep -vE '^step ' | tail -30
          echo '```'; } >> "$out" || rc=1
    else echo "skipped: bf16 checkpoint minute" >> "$out"; fi
    # MesaNet bf16 at the anchor: the default, the op's TF32 scan, the kept states (--mesa_keep), alternating
    for f in default tf32 keep default tf32 keep; do
        if [ "$(next_left)" -lt 40 ]; then echo "skipped: mesa bf16 $f" >> "$out"; continue; fi
        local x=()
        [ $f = tf32 ] && x=(--mesa_scan tf32)
        [ $f = keep ] && x=(--mesa_keep)
        ./build/train_cuda --anchor --pattern mesa --bench 1 --bench_steps 12 --math bf16 "${x[@]}" 2>&1 \
            | grep -iE 'tokens/s over|rror|no usable|cannot' | sed "s/^/mesa bf16, $f: /" >> "$out" || rc=1
    done
    if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && [ "$(next_left)" -gt 120 ]; then
        TABLE_S=$(( $(next_left) - 10 )) run_table
    fi
    # PROFILE=1: where a synthetic cell's step goes (run_profile's ncu shares, profile.md), if 180 s are left
    if [ "${PROFILE:-0}" = 1 ] && [ "$(next_left)" -gt 180 ]; then run_profile; fi
    echo "done at $(( $(date +%s) - t0 )) s" >> "$out"
}

case $what in
    tests) run_tests ;;
    train) run_train ;;
    decode) run_decode ;;
    profile) run_profile ;;
    jobs) run_jobs ;;
    forms) run_forms ;;
    delta) run_delta ;;
    ssd) run_ssd ;;
    peers) run_peers ;;
    bf16) run_bf16 ;;
    layers) run_layers ;;
    table) run_table ;;
    seeds) run_seeds ;;
    next) run_next ;;
    all) run_tests; run_decode; run_profile ;;
    *) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
exit $rc
