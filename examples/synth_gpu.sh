#!/usr/bin/env bash
# synth_gpu.sh: the synthetic grid (results/synth.md, tier gpu) on one GPU machine - build/synth_cuda runs N cells
# at once as processes sharing the GPU, each cell trained and evaluated by the GPU model; the CSV grows cell by
# cell and every piece of a run (a time-limited device call) leaves a valid, resumable CSV.
#
#   examples/synth_gpu.sh plan [subset]             # here: the cells left, in the order a run takes them
#   examples/synth_gpu.sh run --time 420 [subset]   # on the GPU machine: run what is left, for at most ~420 s
#   examples/synth_gpu.sh merge FILE.csv            # here: the rows a device call brought back -> --csv
#   examples/synth_gpu.sh report [--readme FILE]    # here: results/synth_gpu.md's tables and the heatmaps
#
# subset: --tasks t1,t2 --models m1,m2 --seeds 1,2,3 (default: every task, every model the GPU build supports
#   (synth_cuda --supported), seeds 1,2,3). Other options: --jobs N (cells at once, default one per CPU core)
#   --gpus N (the GPUs the cells are spread over, each cell on the one running fewest; default every GPU that
#   nvidia-smi -L lists, 1 without nvidia-smi; a GPU that cannot be used stops the run before anything is written)
#   --tier gpu|gpu-tf32 (default gpu; gpu-tf32: the same protocol with the GPU model's products in TF32, its own
#   CSV results/synth_gpu_tf32.csv) --csv FILE (the grid's CSV, default results/synth_gpu.csv or _gpu_tf32.csv)
#   --bin FILE (default build/synth_cuda; missing: built here with make) --states DIR (a folder holding the
#   state pieces an earlier call brought back)
#   --dest DIR (where run writes; default $OUT when set, else results) --mps (start an MPS server for the
#   run and stop it after, if nvidia-cuda-mps-control exists: kernels of different processes then share the
#   GPU at once instead of taking turns; off by default) --dry-run (print the synth_cuda command only; planned
#   with the CPU build, nothing built)
#   --pack_mb N (run in a device call: the paused states packed, at most N MiB, default 40; see below)
#   --delta_form auto|recurrent (synth_cuda's DeltaNet / GDN kernels; default recurrent: at these lengths a GDN cell
#   trains 1.3x faster on the one-launch recurrent kernels than on the chunkwise ones, cuda/gpu_checks.sh forms,
#   session 12; the parity rows of results/synth_gpu_tf32.csv ran on auto, the chunkwise form)
#   --extra "ARGS" (more synth options for plan and run, e.g. a smoke test's "--steps 100 --eval_n 64": another
#   protocol, so give another --csv).
#
# run: copies --csv to DEST/synth_gpu.csv (finished cells are skipped: synth's resume), orders the cells left
# (cells with a saved training state first, then the short tasks - parity, s3, z5 (20k steps), mqar (12.5k) -
# before the 100k-step ones, seed 1 of every model before seed 2), and runs them with --stop TIME: no cell
# starts after TIME seconds, and a cell still training then saves its state (model, AdamW moments, step,
# data stream) and stops; every cell also saves every 60 s, so a killed call loses at most that. Without $OUT
# the states stay in DEST/NAME.state (NAME: the --csv's base name, synth_gpu by default), where the next run
# finds them; with $OUT (a device call) they are kept in /tmp/NAME.state and packed as
# $OUT/NAME.state.tar.part* (15 MiB pieces: a call brings back 8 files of 16 MiB at most; a paused cell's
# state is ~3 floats per parameter, 4.9-6.1 MB at d_model 128): carry the pieces to the next call in a folder
# and name it with --states (with the same --csv: pieces of another name are refused). A call also carries at
# most 64 MiB (the tree included), so at most --pack_mb MiB of states are packed: those of the cells furthest
# along; a cell whose state is left out (named in the log) starts afresh - unless the next call finds the same
# machine still warm (called within its idle window): /tmp/NAME.state is still there and every cell resumes. TIME counts
# from synth_cuda's start; leave it 60-120 s below the call's limit: the cells that finish training evaluate at 128, 512
# and 2048 before they end. A session's last call: add --extra "--deadline D" (D < TIME: no cell starts after D s,
# so the GPU goes to the cells already running and fewer are left paused, their states too many to carry back).
# plan uses build/synth (the CPU build: the same protocol, every model unless --models) and
# needs no GPU; plan, merge and report bring it up to date first (make build/synth), or use $SYNTH when set.
# Log: DEST/NAME.log, one line per cell (done, paused or FAILED) and any error; the progress of a cell
# is not logged. Exit status: 0 (also when cells paused or were left), 1 a cell failed, 2 a bad command line.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

cmd=${1:-}; [ $# -gt 0 ] && shift
tasks=all models="" seeds=1,2,3 jobs=$(nproc 2> /dev/null || echo 16) gpus="" time=0 csv="" tier=gpu
bin=build/synth_cuda states="" dest=""
readme="" mps=0 dry=0 file="" extra="" pack_mb=40 delta_form=recurrent
while [ $# -gt 0 ]; do
    case $1 in
        --tasks) tasks=$2; shift 2 ;;
        --models) models=$2; shift 2 ;;
        --seeds) seeds=$2; shift 2 ;;
        --jobs) jobs=$2; shift 2 ;;
        --gpus) gpus=$2; shift 2 ;;
        --time) time=$2; shift 2 ;;
        --csv) csv=$2; shift 2 ;;
        --tier) tier=$2; shift 2 ;;
        --bin) bin=$2; shift 2 ;;
        --states) states=$2; shift 2 ;;
        --dest) dest=$2; shift 2 ;;
        --readme) readme=$2; shift 2 ;;
        --extra) extra=$2; shift 2 ;;
        --pack_mb) pack_mb=$2; shift 2 ;;
        --delta_form) delta_form=$2; shift 2 ;;
        --mps) mps=1; shift ;;
        --dry-run) dry=1; shift ;;
        -*) echo "synth_gpu.sh: unknown option $1" >&2; exit 2 ;;
        *) [ -z "$file" ] && file=$1 && shift || { echo "synth_gpu.sh: unexpected $1" >&2; exit 2; } ;;
    esac
done
case $jobs$gpus$time$pack_mb in
    *[!0-9]*) echo "synth_gpu.sh: --jobs, --gpus, --time and --pack_mb take whole numbers" >&2; exit 2 ;;
esac
case $tier in gpu|gpu-tf32) ;; *) echo "synth_gpu.sh: --tier must be gpu or gpu-tf32" >&2; exit 2 ;; esac
case $delta_form in auto|recurrent) ;; *) echo "synth_gpu.sh: --delta_form: auto or recurrent" >&2; exit 2 ;; esac
[ -n "$csv" ] || csv=results/synth_${tier//-/_}.csv   # synth's own default --out of the tier
[ -n "$dest" ] || dest=${OUT:-results}
name=$(basename "$csv" .csv)
cpu_synth() {   # the CPU build for plan, merge and report: $SYNTH, else build/synth made up to date
    if [ -n "${SYNTH:-}" ]; then echo "$SYNTH"; return 0; fi
    make --no-print-directory build/synth >&2 || exit 1
    echo build/synth
}

# the GPU build, built here when it was not carried (the GPU machine has nvcc)
need_bin() {
    [ -x "$bin" ] && return 0
    echo "synth_gpu.sh: $bin missing: building it (make $bin)"
    make --no-print-directory "$bin" > "$dest/$name.build.log" 2>&1 || { tail -20 "$dest/$name.build.log"; exit 1; }
}

# the cells left ("task model seed" lines) in run order, from synth's own plan of the subset
plan_cells() {  # plan_cells CSV STATE_DIR
    local m=$models
    [ -n "$m" ] || m=$("$plan_bin" --supported --tier "$tier" $extra 2> /dev/null)
    [ -n "$m" ] || { echo "synth_gpu.sh: $plan_bin --supported: no model this build can train" >&2; exit 1; }
    "$plan_bin" --tier "$tier" $extra --plan --tasks "$tasks" --models "$m" --seeds "$seeds" --out "$1" |
        grep -v '^#' |
    awk -v st="$2" '
        BEGIN { n = split("parity s3 z5 mqar majority majority_count anbn anbncn modarith modarith_brackets", t, " ")
                for (i = 1; i <= n; i++) rank[t[i]] = i }
        NF == 3 { saved = system("test -d \"" st "/" $1 "." $2 "." $3 "\"") == 0
                  printf "%d %02d %03d %05d %s\n", saved ? 0 : 1, rank[$1], $3, NR, $0 }' |
    sort | cut -d' ' -f5-
}

case $cmd in
plan)
    plan_bin=$(cpu_synth) || exit 1
    plan_cells "$csv" "${csv%.csv}.state"
    ;;
run)
    if [ -n "$states" ] && ! ls "$states/$name".state.tar.part* > /dev/null 2>&1; then   # before anything is made
        echo "synth_gpu.sh: --states $states holds no $name.state.tar.part* (the pieces take the name of" \
             "the --csv they were run with; found: $(ls "$states" 2> /dev/null | tr '\n' ' '))" >&2
        exit 2
    fi
    mkdir -p "$dest" || exit 1
    # the plan: the GPU build's own (the same as the CPU build's, tests/test_synth.sh); a dry run plans with the
    # CPU build and builds nothing (the GPU build takes minutes to compile)
    if [ $dry -eq 1 ]; then plan_bin=$(cpu_synth) || exit 1; else need_bin; plan_bin=$bin; fi
    out="$dest/$name.csv" st="$dest/$name.state" log="$dest/$name.log" pack=0
    if [ -n "${OUT:-}" ] && [ "$(realpath -m "$dest")" = "$(realpath -m "$OUT")" ]; then
        st=/tmp/$name.state pack=1   # nothing but the CSV, the log and the packed states goes into $OUT
    fi
    [ "$(realpath -m "$csv")" = "$(realpath -m "$out")" ] || { [ ! -e "$csv" ] || cp "$csv" "$out"; }
    mkdir -p "$st"
    if [ -n "$states" ]; then   # an earlier call's states (their pieces checked above)
        cat "$states/$name".state.tar.part* | tar -xf - -C "$st" || exit 1
    fi
    if [ -z "$models" ]; then   # every model the GPU build can train (the library says why not on stderr)
        models=$("$plan_bin" --supported --tier "$tier" $extra 2> "$st.supported") || { cat "$st.supported"; exit 1; }
        echo "synth_gpu.sh: the GPU build trains $models"
    fi
    plan_cells "$out" "$st" > "$st.cells" || exit 1
    ncells=$(wc -l < "$st.cells")
    # shellcheck disable=SC2206
    if [ -z "$gpus" ]; then   # every GPU of the machine
        gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU') || true
        [ "${gpus:-0}" -gt 0 ] || gpus=1
    fi
    run_cmd=("$bin" --tier "$tier" $extra --cells "$st.cells" --jobs "$jobs" --gpus "$gpus" --out "$out" --state "$st"
             --save_every 60 --delta_form "$delta_form")
    [ "$time" -gt 0 ] && run_cmd+=(--stop "$time")
    echo "synth_gpu.sh: $ncells cells left; ${run_cmd[*]}"
    [ $dry -eq 1 ] && { cat "$st.cells"; rm -f "$st.cells" "$st.supported"; exit 0; }
    { nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader 2> /dev/null; date -u; } > "$log"
    if [ $mps -eq 1 ] && command -v nvidia-cuda-mps-control > /dev/null; then
        export CUDA_MPS_PIPE_DIRECTORY=/tmp/synth_mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/synth_mps/log
        mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
        nvidia-cuda-mps-control -d && echo "MPS server started" >> "$log"
    elif [ $mps -eq 1 ]; then echo "synth_gpu.sh: no nvidia-cuda-mps-control: running without MPS" | tee -a "$log"; fi
    rc=0
    if [ "$ncells" -gt 0 ]; then "${run_cmd[@]}" >> "$log" 2>&1; rc=$?; fi
    [ $mps -eq 1 ] && command -v nvidia-cuda-mps-control > /dev/null && echo quit | nvidia-cuda-mps-control
    date -u >> "$log"
    tail -3 "$log"
    # a device call: the states of paused cells in pieces small enough to come back
    rm -f "$st.cells" "$st.supported"
    if [ $pack -eq 1 ] && [ -n "$(ls -A "$st")" ]; then
        # the cells furthest along first (the step in the optimizer file's metadata), while they fit in pack_mb
        for d in "$st"/*/; do
            c=$(basename "$d")
            step=$(head -c 65536 "$d/optimizer.safetensors" 2> /dev/null | grep -ao '"step":"[0-9]*"' | head -1 |
                   tr -dc 0-9)
            echo "${step:-0} $(du -sb "$d" | cut -f1) $c"
        done | sort -rn > "$st.sizes"
        keep=() total=0
        while read -r step size c; do
            if [ $((total + size)) -le $((pack_mb * 1048576)) ]; then keep+=("$c"); total=$((total + size))
            else echo "synth_gpu.sh: $c (step $step) left out of the packed states: it starts afresh next time" |
                 tee -a "$log"; fi
        done < "$st.sizes"
        if [ ${#keep[@]} -gt 0 ]; then
            tar -cf - -C "$st" "${keep[@]}" | split -b 15M - "$dest/$name.state.tar.part"
            n=$(ls "$dest/$name".state.tar.part* | wc -l)
            echo "synth_gpu.sh: ${#keep[@]} paused cells' states ($total bytes) in $n piece(s)" \
                 "$dest/$name.state.tar.part*" | tee -a "$log"
        fi
        rm -f "$st.sizes"
    fi
    exit $rc
    ;;
merge)
    [ -n "$file" ] || { echo "synth_gpu.sh: merge FILE.csv" >&2; exit 2; }
    s=$(cpu_synth) || exit 1
    "$s" --merge "$csv" "$file"
    ;;
report)
    s=$(cpu_synth) || exit 1
    if [ -n "$readme" ]; then "$s" --report "$csv" --readme "$readme"; else "$s" --report "$csv"; fi
    ;;
*)
    sed -n '2,43p' "$0" | sed 's/^# \{0,1\}//'
    [ -z "$cmd" ] && exit 0 || exit 2
    ;;
esac
