#!/usr/bin/env bash
# lm_compare.sh: the language-model comparison of results/lm.md - every model of the list trained with one
# backbone, optimiser, schedule and token budget by build/train_cuda, evaluated by build/lm_eval, reported by
# build/lm_report.
#
#   examples/lm_compare.sh list                              # the models, their patterns and flags
#   examples/lm_compare.sh prepare                           # here: build what the GPU machine runs (below)
#   examples/lm_compare.sh device --corpus code --models "transformer mesanet" --deadline 540
#   examples/lm_compare.sh unpack FILE                       # here: the results a device call brought back
#   examples/lm_compare.sh report                            # here: results/lm.md's tables and the PNGs
#   examples/lm_compare.sh train|eval [options]              # the steps of `device`, one at a time
#
# Options: --corpus code|prose (default code) --models "a b ..." (default: every model of the corpus)
#   --tokens N (training tokens per model, default 100000000) --deadline S (seconds this call may take, default
#   0 = no limit) --seed N (default 1; a run of seed N != 1 is named MODEL.sN: runs/lm/CORPUS/MODEL.sN and
#   results/lm/CORPUS/MODEL.sN, reported beside seed 1) --data DIR (data/lm) --runs DIR (runs/lm) --results DIR
#   (results/lm) --dry-run (print the commands only) --eval "ARGS" (extra lm_eval arguments, e.g. "--seqs 32
#   --cg_seqs 4"); report: --md FILE (results/lm.md, which holds the markers <!-- lm:CORPUS:begin --> and
#   <!-- lm:CORPUS:end -->, and <!-- lm:CORPUS-seeds:begin/end --> where runs of other seeds exist) --png-dir DIR
#   (results: DIR/lm_CORPUS_*.png).
#
# The training: fla's anchor backbone (train_cuda --anchor: d_model 640, 8 layers, 5 heads of 128, SwiGLU
# 1792, vocabulary 256, batch 16 x 2048 tokens), every mixer in every layer (hybrids as listed), AdamW (0.9,
# 0.98, weight decay 0.1, clip 1), learning rate LR with WARMUP linear steps (at most a tenth of the budget's
# steps, so a short budget is not all warm-up) and a cosine to LR/10 over the
# budget, seed 1 (--seed), --tokens / 32768 steps. A run is cut into pieces that fit one device command: train_cuda
# saves every SAVE_EVERY steps and a run that --deadline stops (timeout) continues from its last checkpoint at
# the next call (--resume: the same schedule, the same batches). A pattern the GPU model has no kernels for yet
# (train_cuda says "no GPU kernels for the mixer") is skipped with a message and tried again at the next call.
# Divergence (train_cuda's status 3) is recorded in the run's train.csv and the last good checkpoint evaluated.
#
# `device` is one call on the GPU machine: unpacks data/lm/lm_CORPUS.tar.xz (examples/lm_data.sh) unless the
# corpus is there, uses the carried build/train_cuda, build/lm_eval_cuda and build/lm_eval_static.xz
# (`prepare` makes them here: the GPU machine has nvcc but no OpenBLAS; without them it builds train_cuda with
# nvcc and lm_eval with BLAS=0), trains what is left within --deadline, evaluates every finished run that has
# no results yet (each as soon as its training ends, beside the next training), and packs the results (CSVs
# only, no checkpoint) into $OUT/lm_results.tar.gz (or ./lm_results.tar.gz). LM_EVAL_BIN=PATH picks the
# evaluation program (default: build/lm_eval_cuda if it runs, else the static CPU build, else build/lm_eval).
# Exit status: 0 done (also when models were skipped or paused: the messages say which); 1 a step failed;
# 2 a bad command line.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

# ---- the models: name | pattern | extra train_cuda flags | corpora ----
# xLSTM[a:b]: a mLSTM blocks per b sLSTM blocks; Hawk-Mesa alternates Hawk and Mesa layers. The hybrids of
# the code corpus give each of xLSTM[7:1], Mamba-2 and Gated DeltaNet the same share of attention: layers 4
# and 8 of the 8 (a quarter), the other layers as in the pure model (xLSTM: 5 mLSTM and 1 sLSTM).
MODELS="
transformer|attn||code prose
swa64|swa|--window 64|code prose
swa256|swa|--window 256|code prose
mamba2|mamba2||code prose
xlstm10|mlstm||code prose
xlstm71|mlstm,mlstm,mlstm,mlstm,mlstm,mlstm,mlstm,slstm||code prose
deltanet|deltanet||code prose
gdn|gdn||code prose
gla|gla||code prose
hawk|hawk||code prose
mesanet|mesa||code prose
hawkmesa|hawk,mesa||code prose
xlstm71_attn|mlstm,mlstm,mlstm,attn,mlstm,mlstm,slstm,attn||code
mamba2_attn|mamba2,mamba2,mamba2,attn||code
gdn_attn|gdn,gdn,gdn,attn||code
"
LR=2e-3; WARMUP=300; SAVE_EVERY=250; EVAL_EVERY=500; BT=32768   # BT: tokens per step, 16 x 2048

usage() { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "lm_compare: $*" >&2; exit 1; }
cmd=${1:-}; [ $# -gt 0 ] && shift
corpus=code; models=""; tokens=100000000; deadline=0; seed=1; data=data/lm; runs=runs/lm; results=results/lm; dry=0
eval_args=""; file=""; md=results/lm.md; pngdir=results
while [ $# -gt 0 ]; do
    case "$1" in
        --corpus) corpus=${2:-}; shift 2 || exit 2 ;;
        --models) models=${2:-}; shift 2 || exit 2 ;;
        --tokens|--deadline|--seed)
            [[ "${2:-}" =~ ^[0-9]+$ ]] || { echo "lm_compare: $1 needs a whole number" >&2; exit 2; }
            case $1 in --tokens) tokens=$2 ;; --deadline) deadline=$2 ;; *) seed=$2 ;; esac; shift 2 ;;
        --data) data=${2:-}; shift 2 || exit 2 ;;
        --runs) runs=${2:-}; shift 2 || exit 2 ;;
        --results) results=${2:-}; shift 2 || exit 2 ;;
        --eval) eval_args=${2:-}; shift 2 || exit 2 ;;
        --md) md=${2:-}; shift 2 || exit 2 ;;
        --png-dir) pngdir=${2:-}; shift 2 || exit 2 ;;
        --dry-run) dry=1; shift ;;
        -h|--help) usage; exit 0 ;;
        -*) echo "lm_compare: unknown option $1" >&2; exit 2 ;;
        *) [ -z "$file" ] || { echo "lm_compare: one file only" >&2; exit 2; }; file=$1; shift ;;
    esac
done
case "$corpus" in code|prose) ;; *) echo "lm_compare: --corpus must be code or prose" >&2; exit 2 ;; esac
[ "$tokens" -ge "$BT" ] || { echo "lm_compare: --tokens must be at least one step ($BT)" >&2; exit 2; }
steps=$(( (tokens + BT - 1) / BT ))
[ "$seed" -ge 1 ] || { echo "lm_compare: --seed must be at least 1" >&2; exit 2; }
sfx=""; [ "$seed" = 1 ] || sfx=".s$seed"   # a run's name: MODEL for seed 1, MODEL.sN for seed N
[ $(( steps / 10 )) -lt "$WARMUP" ] && WARMUP=$(( steps / 10 > 1 ? steps / 10 : 1 ))
[ $(( steps / 4 )) -lt "$EVAL_EVERY" ] && EVAL_EVERY=$(( steps / 4 > 1 ? steps / 4 : 1 ))   # four points of the curve
t_start=$(date +%s)
left() { if [ "$deadline" -gt 0 ]; then echo $(( deadline - ($(date +%s) - t_start) )); else echo 1000000; fi; }

field() { echo "$1" | cut -d'|' -f"$2"; }   # field LINE N
# the models of corpus $1, in the table's order
corpus_models() { echo "$MODELS" | awk -F'|' -v c="$1" 'NF >= 4 && (" " $4 " ") ~ (" " c " ") {print $1}'; }
model_line() { echo "$MODELS" | grep "^$1|" | head -1; }
# the models of this corpus, in the table's order, or those of --models (each checked against the table)
selected() {
    local m line
    if [ -z "$models" ]; then
        corpus_models "$corpus"
        return
    fi
    for m in $models; do
        line=$(model_line "$m")
        [ -n "$line" ] || { echo "lm_compare: unknown model $m (lm_compare.sh list shows them)" >&2; return 1; }
        [[ " $(field "$line" 4) " == *" $corpus "* ]] || { echo "lm_compare: $m is not run on $corpus" >&2; return 1; }
        echo "$m"
    done
}
ckpt_step() { sed -n 's/.*"mesanet_stamp": "\([0-9]*\)-.*/\1/p' "$1/config.json" 2>/dev/null; }

run_or_print() { if [ "$dry" = 1 ]; then echo "  $*"; return 0; fi; "$@"; }

train_one() {  # train_one NAME: 0 done or already done, 10 paused or skipped, 1 failed
    local name=$1 line pattern extra dir log rc step
    line=$(model_line "$name"); pattern=$(field "$line" 2); extra=$(field "$line" 3)
    dir=$runs/$corpus/$name$sfx; log=$dir/train.log
    if [ -e "$dir/done" ]; then echo "lm_compare: $corpus/$name$sfx: trained ($(cat "$dir/done"))"; return 0; fi
    local args=(--anchor --data "$data/$corpus/all" --out "$dir" --pattern "$pattern" $extra --seconds 0
                --steps "$steps" --lr "$LR" --warmup "$WARMUP" --wd 0.1 --clip 1 --seed "$seed"
                --save_every "$SAVE_EVERY"
                --eval_every "$EVAL_EVERY" --eval_batches 4 --log_every 50 --sample 0 --cpu_check 512)
    step=$(ckpt_step "$dir")
    if [ -n "$step" ]; then
        args+=(--resume "$dir")
        # a killed piece logged steps past its last checkpoint: the resumed run logs them again
        [ -f "$dir/loss.csv" ] && awk -F, -v s="$step" 'NR == 1 || $1 <= s' "$dir/loss.csv" > "$dir/loss.csv.tmp" &&
            mv "$dir/loss.csv.tmp" "$dir/loss.csv"
    fi
    local budget; budget=$(left)
    if [ "$budget" -lt 60 ]; then echo "lm_compare: $corpus/$name$sfx: no time left in this call"; return 10; fi
    echo "lm_compare: $corpus/$name$sfx: pattern $pattern, $steps steps of $BT tokens${step:+, from step $step}" \
         "(this call: ${budget} s left)"
    if [ "$dry" = 1 ]; then echo "  ./build/train_cuda ${args[*]}"; return 0; fi
    mkdir -p "$dir"
    timeout "$budget" ./build/train_cuda "${args[@]}" >> "$log" 2>&1; rc=$?
    if grep -q "no GPU kernels for the mixer" "$log" && [ -z "$(ckpt_step "$dir")" ]; then
        echo "lm_compare: $corpus/$name$sfx: SKIPPED: $(grep -o 'no GPU kernels for the mixer[^(]*' "$log" | tail -1)" \
             "- the GPU model does not support this pattern yet"
        rm -rf "$dir"; return 10
    fi
    step=$(ckpt_step "$dir")
    case $rc in
        0) ;;
        124) echo "lm_compare: $corpus/$name$sfx: paused at step ${step:-0} of $steps (deadline);" \
                  "the next call continues"
             return 10 ;;
        3) echo "lm_compare: $corpus/$name$sfx: DIVERGED (train_cuda status 3);" \
                "last good checkpoint: step ${step:-none}" ;;
        *) echo "lm_compare: $corpus/$name$sfx: train_cuda failed (status $rc); the end of $log:" >&2
           tail -5 "$log" >&2
           return 1 ;;
    esac
    # the run's line for the report: what it trained, how fast, how it ended
    local tps secs val cpu status=ok
    [ $rc = 3 ] && status="diverged after step ${step:-0}"
    tps=$(grep -o '[0-9]* tokens/s after the first step' "$log" | tail -1 | cut -d' ' -f1)
    secs=$(awk -F, 'NR > 1 && $8 != "" {s = $8} END {print s}' "$dir/loss.csv")
    val=$(awk -F, 'NR > 1 && $3 != "nan" && $3 != "" {v = $3} END {print v}' "$dir/loss.csv")
    cpu=$(grep -o 'relative difference [0-9.e+-]*' "$log" | tail -1 | cut -d' ' -f3)
    {
        echo "model,pattern,steps,tokens,train_seconds,tokens_per_s,val_loss_gpu,cpu_gpu_rel_diff,status"
        echo "$name$sfx,${pattern//,/+},${step:-0},$(( ${step:-0} * BT )),${secs:-},${tps:-},${val:-},${cpu:-},$status"
    } > "$dir/train.csv"
    echo "$status, step ${step:-0}" > "$dir/done"
    echo "lm_compare: $corpus/$name$sfx: trained: step ${step:-0}, $status"
    return 0
}

# the evaluation program: the GPU build (forwards in seconds), else the carried static build, else one built here
lm_eval_bin() {
    if [ -n "${LM_EVAL_BIN:-}" ]; then echo "$LM_EVAL_BIN"; return; fi   # the caller's choice
    if [ -x build/lm_eval_cuda ] && build/lm_eval_cuda --help > /dev/null 2>&1; then echo build/lm_eval_cuda; return; fi
    if [ -f build/lm_eval_static.xz ] && [ ! -x build/lm_eval_static ]; then
        xz -dc build/lm_eval_static.xz > build/lm_eval_static && chmod +x build/lm_eval_static
    fi
    if [ -x build/lm_eval_static ] && build/lm_eval_static --help > /dev/null 2>&1; then echo build/lm_eval_static
    elif [ -x build/lm_eval ]; then echo build/lm_eval
    else echo ""; fi
}

eval_one() {  # eval_one NAME
    local name=$1$sfx dir=$runs/$corpus/$1$sfx res=$results/$corpus/$1$sfx bin budget
    [ -e "$dir/done" ] || return 0
    if [ -f "$res/summary.csv" ]; then echo "lm_compare: $corpus/$name: evaluated already ($res)"; return 0; fi
    budget=$(left)
    if [ "$budget" -lt 60 ]; then echo "lm_compare: $corpus/$name: no time left to evaluate"; return 10; fi
    bin=$(lm_eval_bin)
    [ -n "$bin" ] || [ "$dry" = 1 ] || { echo "lm_compare: no lm_eval (prepare, or make build/lm_eval)" >&2; return 1; }
    echo "lm_compare: $corpus/$name: evaluating (${bin:-build/lm_eval})"
    run_or_print mkdir -p "$res"
    # shellcheck disable=SC2086
    run_or_print timeout "$budget" "${bin:-build/lm_eval}" --ckpt "$dir" --val "$data/$corpus/val.txt" --out "$res" \
        --name "$name" $eval_args ||
        { echo "lm_compare: $corpus/$name: lm_eval failed or ran out of time" >&2; return 1; }
    [ "$dry" = 1 ] || { cp "$dir/train.csv" "$res/train.csv" && cp "$dir/loss.csv" "$res/loss.csv"; }
}

need_data() {
    local b=$data/lm_$corpus.tar.xz
    [ -f "$data/$corpus/val.txt" ] && return 0
    [ -f "$b" ] || die "no $data/$corpus/val.txt and no $b (examples/lm_data.sh makes both)"
    echo "lm_compare: unpacking $b"
    tar -xJf "$b" -C "$data" || die "cannot unpack $b"
}

has_marks() { grep -q "<!-- lm:$1:begin -->" "$md" && grep -q "<!-- lm:$1:end -->" "$md"; }
splice() {  # splice CORPUS MARK MODELS PNG: lm_report's tables of MODELS between $md's lm:MARK markers
    local frag; frag=$(mktemp)
    ./build/lm_report --results "$results/$1" --models "$3" --corpus "$1" --md "$frag" --png "$4" ||
        { rm -f "$frag"; die "lm_report failed for $2"; }
    awk -v f="$frag" -v b="<!-- lm:$2:begin -->" -v e="<!-- lm:$2:end -->" '
        $0 == b {print; while ((getline l < f) > 0) print l; skip = 1; next}
        $0 == e {skip = 0} !skip {print}' "$md" > "$md.tmp" && mv "$md.tmp" "$md"
    rm -f "$frag"
}

case "$cmd" in
list)
    printf "%-14s %-56s %-14s %s\n" model pattern flags corpora
    echo "$MODELS" | awk -F'|' 'NF >= 4 {printf "%-14s %-56s %-14s %s\n", $1, $2, $3, $4}'
    echo "budget: --tokens $tokens = $steps steps of $BT tokens; lr $LR, warmup $WARMUP, checkpoints every $SAVE_EVERY"
    ;;
prepare)   # here, before a device call: what it carries besides the data
    make build/train build/lm_eval build/lm_report || exit 1
    make build/lm_eval_static && xz -6 -T2 -c build/lm_eval_static > build/lm_eval_static.xz || exit 1
    make build/train_cuda build/lm_eval_cuda ||
        echo "lm_compare: no build/train_cuda here (no nvcc?): the device call builds it itself"
    carry="data/lm/lm_$corpus.tar.xz build/train_cuda build/lm_eval_cuda build/lm_eval_static.xz"
    # shellcheck disable=SC2086
    echo "carry: $carry ($(du -cb $carry 2>/dev/null | tail -1 | cut -f1) bytes; the working tree travels too)"
    ;;
train|eval|device)
    list=$(selected) || exit 2
    if [ "$cmd" != eval ]; then
        [ "$dry" = 1 ] || need_data
        if [ ! -x build/train_cuda ] && [ "$dry" = 0 ]; then
            echo "lm_compare: building train_cuda (nvcc)"
            make build/train_cuda > /dev/null || die "cannot build train_cuda"
        fi
    fi
    if [ "$cmd" != train ] && [ "$dry" = 0 ] && [ -z "$(lm_eval_bin)" ]; then
        make BLAS=0 build/lm_eval > /dev/null || die "cannot build lm_eval"
    fi
    fail=0
    if [ "$cmd" = device ] && [ "$dry" = 0 ]; then
        # the GPU trains one model after another; each model is evaluated as soon as its training is done, in
        # the background (the GPU build's forwards take seconds, a Mesa model's CG sweep on the CPU minutes), so
        # evaluations never hold up the training; the training stops a minute before --deadline so that the
        # last model's evaluation fits
        tdl=$deadline; [ "$deadline" -gt 60 ] && tdl=$(( deadline - 60 ))
        ( deadline=$tdl; r=0; for m in $list; do train_one "$m"; [ $? = 1 ] && r=1; done; exit $r ) &
        tp=$!; pids=""
        for m in $list; do
            while [ ! -e "$runs/$corpus/$m$sfx/done" ] && kill -0 "$tp" 2>/dev/null; do sleep 1; done
            [ -e "$runs/$corpus/$m$sfx/done" ] || break   # the training stopped before this model
            eval_one "$m" > "$runs/$corpus/$m$sfx/eval.log" 2>&1 &
            pids="$pids $!"
        done
        wait "$tp" || fail=1
        for p in $pids; do wait "$p"; [ $? = 1 ] && fail=1; done
        for m in $list; do [ -f "$runs/$corpus/$m$sfx/eval.log" ] && cat "$runs/$corpus/$m$sfx/eval.log"; done
    else
        for m in $list; do
            if [ "$cmd" != eval ]; then train_one "$m"; rc=$?; [ $rc = 1 ] && fail=1; fi
            if [ "$cmd" != train ]; then eval_one "$m"; rc=$?; [ $rc = 1 ] && fail=1; fi
        done
    fi
    if [ "$cmd" = device ] && [ "$dry" = 0 ]; then
        pack=${OUT:-.}/lm_results.tar.gz
        if [ -d "$results" ]; then
            tar -czf "$pack" "$results" && echo "lm_compare: results packed into $pack ($(stat -c %s "$pack") bytes)"
        fi
    fi
    exit $fail
    ;;
unpack)
    [ -n "$file" ] && [ -f "$file" ] || { echo "lm_compare: unpack needs the lm_results.tar.gz a device call wrote" >&2
                                         exit 2; }
    tar -tzf "$file" | grep -qv "^$results/" && die "$file holds paths outside $results/"
    tar -xzf "$file" && echo "lm_compare: unpacked $(tar -tzf "$file" | grep -c 'summary.csv$') model results"
    ;;
report)
    [ -x build/lm_report ] || make build/lm_report > /dev/null || die "cannot build lm_report"
    # first what to write and whether the file has room for it (every marker), so that a missing marker
    # changes nothing; then each corpus's tables (seed 1) and those of its runs of other seeds (MODEL.sN,
    # --seed: recall, the Mesa models' CG trade-off; plots $pngdir/lm_CORPUS_seeds_*.png)
    work=()
    for c in code prose; do
        [ -d "$results/$c" ] || continue
        order=$(corpus_models "$c" | while read -r m; do [ -f "$results/$c/$m/summary.csv" ] && echo "$m"; done |
            paste -sd, -)
        [ -n "$order" ] || continue
        has_marks "$c" || die "$md lacks the markers <!-- lm:$c:begin --> and <!-- lm:$c:end -->"
        sorder=$(corpus_models "$c" | while read -r m; do
                for d in "$results/$c/$m".s*; do
                    [ -f "$d/summary.csv" ] && [[ $(basename "$d") =~ ^$m\.s[1-9][0-9]*$ ]] && basename "$d"
                done | sort -V
            done | paste -sd, -)
        [ -z "$sorder" ] || has_marks "$c-seeds" ||
            die "$md lacks the markers <!-- lm:$c-seeds:begin --> and <!-- lm:$c-seeds:end --> (runs of other seeds)"
        work+=("$c $order $sorder")
    done
    [ ${#work[@]} -gt 0 ] || die "no results under $results/code or $results/prose"
    for w in "${work[@]}"; do
        read -r c order sorder <<< "$w"
        splice "$c" "$c" "$order" "$pngdir/lm_$c"
        echo "lm_compare: $md: the $c tables; $pngdir/lm_${c}_*.png"
        [ -n "$sorder" ] || continue
        splice "$c" "$c-seeds" "$sorder" "$pngdir/lm_${c}_seeds"
        echo "lm_compare: $md: the $c seed runs ($sorder); $pngdir/lm_${c}_seeds_*.png"
    done
    ;;
*) usage >&2; exit 2 ;;
esac
