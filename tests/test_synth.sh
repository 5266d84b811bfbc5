#!/usr/bin/env bash
# Quick tier of the length-generalisation suite (examples/synth.c): proves the whole pipeline
# (generator -> variable-length training -> evaluation at 4x the training length -> CSV -> report)
# learns what the papers say it should, in about two minutes on two cores:
#   * Mamba-2 with the [-1,1] transition solves parity at its training length (64) and keeps it at
#     4x (256): best of 3 seeds >= 0.95 at both (Grazzi et al. report the best of 3 seeds; at this
#     small budget not every seed finds the solution);
#   * the same model with the [0,1] transition stays near chance (<= 0.65 at 256);
#   * the resumable grid skips finished cells, and --report writes the table and the heatmaps;
#   * every row carries its baselines (constant predictor, trivial baseline, standard error) and the
#     report marks untrained/constant cells;
#   * the pieces a large (GPU) run needs, on cells of a few steps: --plan, --shard, --merge (resumable,
#     protocol-checked), --cells, the protocol check on resume, a CSV of the first grid's 23 columns;
#   * pausing (the GPU runner's time limits use it): a cell paused at step 50 and at 100 and resumed gives the
#     rows of the uninterrupted run, number for number; a state of another protocol is not resumed; --stop
#     starts nothing once passed; the gpu tier's protocol (2 heads of 64), --supported and --gpus (refused by the
#     CPU build, passed on by synth_gpu.sh; synth_cuda without a usable GPU stops before it writes anything).
# Single-threaded inside each cell, so every number is reproducible on this machine.
. "$(dirname "$0")/lib.sh"
q="--tier quick --tasks parity --train_len 64 --eval_lens 64,256 --d_model 32 --steps 600 --batch 32 --eval_n 128
   --jobs 2 --out $W/q.csv"

"$B/synth" $q --models mamba2_neg,mamba2 --seeds 1,2,3 > "$W/log" 2>&1 || { bad "synth run failed"; cat "$W/log"; }
# best accuracy over seeds at one length: best MODEL LEN (column 9 = acc, 6 = eval_len, 2 = model)
best() { awk -F, -v m="$1" -v l="$2" 'NR>1 && $2==m && $6==l { if ($9>b) b=$9 } END { printf "%.3f", b+0 }' \
    "$W/q.csv"; }
rows=$(awk 'NR>1' "$W/q.csv" | wc -l)
[ "$rows" -eq 12 ] && ok "12 rows (2 models x 3 seeds x 2 lengths)" || bad "expected 12 rows, got $rows"
n64=$(best mamba2_neg 64); n256=$(best mamba2_neg 256); p256=$(best mamba2 256)
awk -v a="$n64" -v b="$n256" 'BEGIN{exit !(a >= 0.95 && b >= 0.95)}' \
    && ok "Mamba-2 [-1,1] parity: best $n64 at 64 (trained), $n256 at 256 (4x)" \
    || { bad "Mamba-2 [-1,1] parity: best $n64 at 64, $n256 at 256 (want >= 0.95)"; cat "$W/q.csv"; }
awk -v a="$p256" 'BEGIN{exit !(a <= 0.65)}' && ok "Mamba-2 [0,1] parity stays near chance: best $p256 at 256" \
    || { bad "Mamba-2 [0,1] parity: best $p256 at 256 (want <= 0.65)"; cat "$W/q.csv"; }

# resumable: the same command again finds nothing to do and leaves the CSV as it was
cp "$W/q.csv" "$W/before.csv"
"$B/synth" $q --models mamba2_neg,mamba2 --seeds 1,2,3 > "$W/log2" 2>&1
grep -q "0 cells to run (6 already" "$W/log2" && cmp -s "$W/q.csv" "$W/before.csv" \
    && ok "resume: finished cells skipped" \
    || { bad "resume"; cat "$W/log2"; }

# report: markdown table and one heatmap per evaluation length
"$B/synth" --report "$W/q.csv" > "$W/log3" 2>&1
[ -s "$W/q.md" ] && [ -s "$W/q_L64.png" ] && [ -s "$W/q_L256.png" ] && grep -q "Mamba-2 \[-1,1\]" "$W/q.md" \
    && ok "report: q.md and 2 heatmaps" || { bad "report"; cat "$W/log3"; }
# the tables sit between markers: a new report replaces only them, so a reading written around them
# stays; --readme copies the summary tables into another file's markers; a file without markers is
# an error that writes nothing
{ echo "reading above"; sed -n '/synth-table:begin/,/synth-table:end/p' "$W/q.md"; echo "reading below"; } > "$W/r.md"
printf 'stale\n<!-- synth-table:begin -->\nold table\n<!-- synth-table:end -->\nkept\n' > "$W/doc.md"
cp "$W/r.md" "$W/q.md"
"$B/synth" --report "$W/q.csv" --readme "$W/doc.md" > "$W/log4" 2>&1 && cmp -s "$W/q.md" "$W/r.md" \
    && ! grep -q "old table" "$W/doc.md" && grep -q "Mamba-2 \[-1,1\]" "$W/doc.md" \
    && ! grep -q "Every cell" "$W/doc.md" && head -1 "$W/doc.md" | grep -q stale && tail -1 "$W/doc.md" | grep -q kept \
    && ok "report: the text around the markers kept; --readme fills another file's markers" \
    || { bad "report markers"; cat "$W/log4"; }
# a file that cannot be written in full is left as it was (the tables go to FILE.tmp, renamed over FILE)
cp "$W/doc.md" "$W/doc0.md" && mkdir -p "$W/doc.md.tmp"
"$B/synth" --report "$W/q.csv" --readme "$W/doc.md" > "$W/e" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q "cannot write .*doc.md.tmp" "$W/e" && cmp -s "$W/doc.md" "$W/doc0.md" &&
    ok "report: a --readme that cannot be written stays as it was" ||
    { bad "report write failure (rc $rc)"; cat "$W/e"; }
rmdir "$W/doc.md.tmp"
printf 'no markers here\n' > "$W/q.md"; rm -f "$W/q_L64.png"
"$B/synth" --report "$W/q.csv" > "$W/e" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q "lacks the markers" "$W/e" && [ "$(cat "$W/q.md")" = "no markers here" ] \
    && [ ! -e "$W/q_L64.png" ] && ok "report into a file without markers: clear error, nothing written" \
    || bad "report without markers (rc $rc)"

# every row: 33 columns with the baselines; parity at 64: constant predictor near 1/2, trivial = chance, the
# binomial standard error of the accuracy over 128 sequences
awk -F, 'NR>1 && (NF!=33 || $31<0.35 || $31>0.65 || $32!=0.5 || ($33-sqrt($9*(1-$9)/128))^2 > 1e-8) {b++}
          END {exit b>0}' \
    "$W/q.csv" \
    && ok "rows carry constant predictor, trivial baseline and standard error" \
    || { bad "baseline columns"; head -3 "$W/q.csv"; }
rm -f "$W/q.md"; "$B/synth" --report "$W/q.csv" > /dev/null 2>&1
grep -q '^| parity | Mamba-2 \[0,1\] | 256 | 3 | .* u |' "$W/q.md" \
    && grep -q '^| parity | Mamba-2 \[-1,1\] | 64 | 3 | 1.00 |.*[0-9]) |' "$W/q.md" \
    && ok "report: Mamba-2 [0,1] at 256 marked untrained/constant, Mamba-2 [-1,1] at 64 not" \
    || { bad "report marks"; grep '^| parity' "$W/q.md"; }

# the runner's pieces on cells of 3 steps (d_model 16): plan, shards, merge, cells list, protocol checks
P="--tier quick --train_len 16 --eval_lens 16,32 --d_model 16 --heads 2 --steps 3 --batch 4 --eval_n 16 --jobs 2"
T="$P --tasks majority_count,mqar --models mesa,mesa_g95 --seeds 1"
"$B/synth" $T --plan --out "$W/p.csv" > "$W/plan" 2>&1; rc=$?
[ $rc -eq 0 ] && [ "$(grep -vc '^#' "$W/plan")" -eq 4 ] && grep -q '^mqar mesa_g95 1$' "$W/plan" \
    && [ ! -e "$W/p.csv" ] \
    && ok "--plan: 4 cells listed, nothing run" || { bad "--plan (rc $rc)"; cat "$W/plan"; }
"$B/synth" $T --shard 0/2 --out "$W/s0.csv" > "$W/log5" 2>&1 \
    && "$B/synth" $T --shard 1/2 --out "$W/s1.csv" >> "$W/log5" 2>&1
n0=$(awk 'NR>1' "$W/s0.csv" | wc -l); n1=$(awk 'NR>1' "$W/s1.csv" | wc -l)
both=$(cat "$W/s0.csv" "$W/s1.csv" | awk -F, 'NR>1 && $1!="task" {print $1,$2,$4,$6}' | sort | uniq -d | wc -l)
[ "$n0" -eq 4 ] && [ "$n1" -eq 4 ] && [ "$both" -eq 0 ] && ok "--shard 0/2 and 1/2: 2 cells each, disjoint" \
    || { bad "shards: $n0 + $n1 rows, $both in both"; cat "$W/log5"; }
"$B/synth" --merge "$W/m.csv" "$W/s0.csv" "$W/s1.csv" > "$W/log6" 2>&1 && cp "$W/m.csv" "$W/m0.csv" \
    && "$B/synth" --merge "$W/m.csv" "$W/s1.csv" "$W/s0.csv" >> "$W/log6" 2>&1 && cmp -s "$W/m.csv" "$W/m0.csv" \
    && grep -q "merged 8 rows" "$W/log6" && grep -q "merged 0 rows .* (8 already there)" "$W/log6" \
    && ok "--merge: 8 rows, merging again adds none" || { bad "--merge"; cat "$W/log6"; }
"$B/synth" $T --out "$W/m.csv" > "$W/log7" 2>&1
grep -q "0 cells to run (4 already" "$W/log7" && ok "resume on the merged CSV: nothing to run" \
    || { bad "resume after merge"; cat "$W/log7"; }
printf '# one more seed\nmqar mesa_g95 2\n' > "$W/cells"
"$B/synth" $P --cells "$W/cells" --out "$W/m.csv" > "$W/log8" 2>&1
[ "$(awk -F, '$1=="mqar" && $2=="mesa_g95" && $4==2 && $30=="2.944439"' "$W/m.csv" | wc -l)" -eq 2 ] \
    && ok "--cells: the listed cell ran (mesa_g95 with its gate bias in the row)" || { bad "--cells"; cat "$W/log8"; }
cp "$W/m.csv" "$W/m1.csv"
"$B/synth" ${T/--steps 3/--steps 4} --out "$W/m.csv" > "$W/e" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q "at another protocol (steps x batch 3 x 4 vs 4 x 4" "$W/e" && cmp -s "$W/m.csv" "$W/m1.csv" \
    && ok "resume at another protocol: clear error, CSV unchanged" || { bad "protocol check (rc $rc)"; cat "$W/e"; }
awk -F, -v OFS=, 'NR==1 || $1!="mqar" || $2!="mesa" {print; next} {$15=5; print}' "$W/s0.csv" > "$W/x5.csv"   # steps 5
"$B/synth" --merge "$W/m.csv" "$W/x5.csv" > "$W/e" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q "disagree on the protocol" "$W/e" && cmp -s "$W/m.csv" "$W/m1.csv" \
    && ok "--merge of the same cell at another protocol: clear error, nothing merged" \
    || { bad "merge conflict (rc $rc)"; cat "$W/e"; }
# a CSV of the first grid (23 columns): the report regenerates its baselines; a resumed run upgrades its header
cut -d, -f1-23 "$W/q.csv" > "$W/old.csv"; printf '<!-- synth-table:begin -->\n<!-- synth-table:end -->\n' > "$W/old.md"
"$B/synth" --report "$W/old.csv" > "$W/log9" 2>&1 \
    && grep -q '^| parity | final | 0.500 | 0\.[0-9]* / 0.500 |' "$W/old.md" \
    && ok "report of a 23-column CSV: baselines regenerated" \
    || { bad "old CSV report"; cat "$W/log9"; grep '^| parity' "$W/old.md"; }
cut -d, -f1-23 "$W/s0.csv" > "$W/old2.csv"
"$B/synth" $T --out "$W/old2.csv" > "$W/log10" 2>&1
head -1 "$W/old2.csv" | grep -q ',acc_se$' && [ "$(awk -F, 'NF==23' "$W/old2.csv" | wc -l)" -eq 4 ] \
    && [ "$(awk -F, 'NF==33' "$W/old2.csv" | wc -l)" -eq 5 ] \
    && ok "resume into a 23-column CSV: header upgraded, rows kept" \
    || { bad "old CSV resume"; cat "$W/log10"; }
"$B/synth" --list | grep -q '^  mesa_g95 .*log 19' && ok "--list: mesa_g95 (forget gate from 0.95)" || bad "--list"

# bad input: unknown task or model is an error before anything runs
"$B/synth" --tasks nope --out "$W/x.csv" > "$W/e" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q "unknown task 'nope'" "$W/e" && [ ! -e "$W/x.csv" ] && ok "unknown task: clear error, no CSV" \
    || bad "unknown task (rc $rc)"
"$B/synth" --models nope --out "$W/x.csv" > "$W/e" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q "unknown model 'nope'" "$W/e" && ok "unknown model: clear error" \
    || bad "unknown model (rc $rc)"

"$B/synth" --tier nope > "$W/e" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "tier must be published, gpu, gpu-tf32 or quick" "$W/e" && ok "unknown tier: clear error" \
    || bad "unknown tier (rc $rc)"
"$B/synth" --shard 2/2 > "$W/e" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "0 <= I < N" "$W/e" && ok "bad --shard: clear error" || bad "bad --shard (rc $rc)"
"$B/synth" --cells "$W/cells" --tasks parity > "$W/e" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "without --tasks" "$W/e" && ok "--cells with --tasks: clear error" \
    || bad "--cells + --tasks (rc $rc)"
printf 'parity mesa 1\nparity nope 1\n' > "$W/badcells"
"$B/synth" --tier quick --cells "$W/badcells" --out "$W/y.csv" > "$W/e" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q "badcells line 2" "$W/e" && [ ! -e "$W/y.csv" ] && ok "bad --cells line: clear error, no CSV" \
    || bad "bad --cells (rc $rc)"

# pausing and resuming: the same rows as one uninterrupted run (all but the two timing columns, 20 and 21)
R="--tier quick --tasks parity --models transformer,mesa --seeds 1 --train_len 16 --eval_lens 16,32 --d_model 16
   --heads 2 --steps 120 --batch 4 --eval_n 32 --jobs 2"
"$B/synth" $R --out "$W/u.csv" > "$W/log11" 2>&1 || { bad "uninterrupted run"; cat "$W/log11"; }
"$B/synth" $R --out "$W/pz.csv" --pause_step 50 > "$W/log12" 2>&1; rc1=$?
n50=$(grep -c "paused after step 50 of 120" "$W/log12")
"$B/synth" $R --out "$W/pz.csv" --pause_step 100 > "$W/log13" 2>&1; rc2=$?
n100=$(grep -c "paused after step 100 of 120" "$W/log13")
[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ "$n50" -eq 2 ] && [ "$n100" -eq 2 ] && [ ! -s "$W/pz.csv" ] \
    && [ -s "$W/pz.state/parity.mesa.1/optimizer.safetensors" ] && grep -q "2 paused" "$W/log13" \
    && ok "--pause_step: both cells paused at 50, resumed and paused at 100, states saved, no rows yet" \
    || { bad "pause (rc $rc1 $rc2, $n50 $n100)"; cat "$W/log12" "$W/log13"; }
"$B/synth" $R --out "$W/pz.csv" > "$W/log14" 2>&1
cut -d, -f1-19,22- "$W/u.csv" | sort > "$W/u.cut"; cut -d, -f1-19,22- "$W/pz.csv" | sort > "$W/pz.cut"
[ "$(wc -l < "$W/u.cut")" -eq 5 ] && cmp -s "$W/u.cut" "$W/pz.cut" && [ ! -e "$W/pz.state/parity.mesa.1" ] \
    && ok "resumed twice: the rows of the uninterrupted run (loss, accuracies), states removed" \
    || { bad "resumed rows differ from the uninterrupted run"; cat "$W/log14"; diff "$W/u.cut" "$W/pz.cut"; }
"$B/synth" $R --out "$W/pq.csv" --pause_step 50 --models mesa > "$W/log15" 2>&1
"$B/synth" ${R/--steps 120/--steps 130} --models mesa --out "$W/pq.csv" > "$W/log16" 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "another protocol's state; parity/mesa seed 1 starts afresh" "$W/log16" \
    && [ "$(awk -F, 'NR>1 && $15==130' "$W/pq.csv" | wc -l)" -eq 2 ] \
    && ok "a state saved at another protocol (steps 120 vs 130): not resumed, the cell starts afresh" \
    || { bad "state of another protocol (rc $rc)"; cat "$W/log16"; }
"$B/synth" $R --out "$W/st.csv" --stop 0.000001 > "$W/log17" 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "time limit of 0 s reached, 2 cells left" "$W/log17" && [ ! -e "$W/st.csv" ] \
    && ok "--stop already passed: no cell starts, nothing written" || { bad "--stop (rc $rc)"; cat "$W/log17"; }
"$B/synth" --tier gpu --tasks parity --models mesa --seeds 9 --plan > "$W/gp" 2>&1   # seed 9: in no CSV of results/
grep -q "tier gpu, d_model 128, 2 layers, 2 heads, .* out results/synth_gpu.csv" "$W/gp" \
    && grep -q "^# parity  *20000  *256 " "$W/gp" && ok "--tier gpu: the published budgets with 2 heads of 64" \
    || { bad "--tier gpu plan"; cat "$W/gp"; }
# gpu-tf32: the gpu tier's protocol under its own name and CSV; the CPU build plans it but trains no cell of it
# (the budgets compared, not the cell counts: the CSVs in results/ hold different cells)
"$B/synth" --tier gpu-tf32 --tasks parity --models mesa --seeds 9 --plan > "$W/gt" 2>&1
grep -q "tier gpu-tf32, d_model 128, 2 layers, 2 heads, .* out results/synth_gpu_tf32.csv" "$W/gt" &&
    diff <(grep '^# parity' "$W/gp" | awk '{$NF = ""; print}') <(grep '^# parity' "$W/gt" | awk '{$NF = ""; print}') \
        > /dev/null &&
    ok "--tier gpu-tf32: the gpu tier's budgets, its own CSV" || { bad "--tier gpu-tf32 plan"; cat "$W/gt"; }
"$B/synth" --tier gpu-tf32 --tasks parity --models mesa --seeds 1 --steps 2 --out "$W/tf.csv" > "$W/e" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "gpu-tf32 trains on the GPU only" "$W/e" && [ ! -e "$W/tf.csv" ] &&
    ok "--tier gpu-tf32 in the CPU build: refused, nothing written" ||
    { bad "gpu-tf32 on the CPU (rc $rc)"; cat "$W/e"; }
SYNTH="$B/synth" "$(dirname "$0")/../examples/synth_gpu.sh" plan --tier gpu-tf32 --tasks parity --seeds 1 \
    --csv "$W/none.csv" \
    > "$W/pt" 2> "$W/e" && [ "$(wc -l < "$W/pt")" -eq 13 ] && head -1 "$W/pt" | grep -qx "parity transformer 1" &&
    ok "synth_gpu.sh plan --tier gpu-tf32: the 13 parity cells of seed 1" || { bad "synth_gpu.sh --tier"; cat "$W/e"; }
# a --states folder without this CSV's pieces (they are named after the --csv they ran with): refused before
# anything runs, nothing made (not even the --dest folder)
mkdir -p "$W/sx" && : > "$W/sx/other.state.tar.partaa"
OUT= SYNTH="$B/synth" "$(dirname "$0")/../examples/synth_gpu.sh" run --tier gpu-tf32 --tasks parity --seeds 1 \
    --models mesa --csv "$W/mine.csv" --states "$W/sx" --dest "$W/sd" --bin "$B/synth" > "$W/so" 2> "$W/e"; rc=$?
[ $rc -eq 2 ] && grep -q "holds no mine.state.tar.part\*.*other.state.tar.partaa" "$W/e" && [ ! -e "$W/sd" ] &&
    ok "synth_gpu.sh run --states: a folder without this CSV's pieces is refused" ||
    { bad "synth_gpu.sh --states (rc $rc)"; cat "$W/e"; }
# --gpus (the cells spread over several GPUs): the CPU build refuses it for a run (plans it), synth_gpu.sh passes it on
"$B/synth" --gpus 2 --tier quick --tasks parity --models mesa --seeds 1 --steps 2 --out "$W/g2.csv" > "$W/e" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "is for build/synth_cuda" "$W/e" && [ ! -e "$W/g2.csv" ] &&
    "$B/synth" --gpus 2 --tier gpu --tasks parity --models mesa --seeds 1 --plan > /dev/null 2>&1 &&
    ok "--gpus 2 in the CPU build: a run refused (nothing written), a plan made" ||
    { bad "--gpus (rc $rc)"; cat "$W/e"; }
"$B/synth" --delta_form recurrent --tier quick --tasks parity --models gdn --seeds 1 --steps 2 --out "$W/df.csv" \
    > "$W/e" 2>&1; rc=$?
"$B/synth" --delta_form sideways --tier quick --plan > "$W/e2" 2>&1; rc2=$?
[ $rc -eq 2 ] && grep -q "it is for build/synth_cuda" "$W/e" && [ ! -e "$W/df.csv" ] && [ $rc2 -eq 2 ] &&
    grep -q "must be auto or recurrent" "$W/e2" &&
    ok "--delta_form: a GPU option the CPU build refuses for a run; a bad value is a clear error" ||
    { bad "--delta_form (rc $rc, $rc2)"; cat "$W/e" "$W/e2"; }
OUT= SYNTH="$B/synth" "$(dirname "$0")/../examples/synth_gpu.sh" run --tier gpu-tf32 --tasks parity --seeds 1 \
    --models mesa --csv "$W/g.csv" --dest "$W/gd" --gpus 4 --jobs 8 --dry-run > "$W/go" 2> "$W/e" &&
    grep -q "synth_cuda --tier gpu-tf32 --cells .* --jobs 8 --gpus 4 --out .* --delta_form recurrent" "$W/go" &&
    ok "synth_gpu.sh run --gpus 4: synth_cuda spreads the cells over 4 GPUs, DeltaNet on the recurrent kernels" ||
    { bad "synth_gpu.sh --gpus"; cat "$W/e"; }
OUT= SYNTH="$B/synth" "$(dirname "$0")/../examples/synth_gpu.sh" run --tier gpu-tf32 --tasks parity --seeds 1 \
    --models gdn --csv "$W/g.csv" --dest "$W/gd" --delta_form auto --bin "$W/nobin" --dry-run > "$W/go" 2> "$W/e" &&
    grep -q "nobin --tier gpu-tf32 --cells .* --delta_form auto" "$W/go" && [ ! -e "$W/nobin" ] &&
    { OUT= "$(dirname "$0")/../examples/synth_gpu.sh" run --delta_form chunky --dry-run > /dev/null 2> "$W/e2"
      [ $? -eq 2 ]; } && grep -q "delta_form: auto or recurrent" "$W/e2" &&
    ok "synth_gpu.sh run --delta_form auto is passed on (a dry run builds nothing); another value is refused" ||
    { bad "synth_gpu.sh --delta_form"; cat "$W/e" "$W/e2"; }
[ "$("$B/synth" --supported --tier quick | tr ',' '\n' | wc -l)" -eq 13 ] && ok "--supported (CPU): all 13 models" \
    || bad "--supported"
# the GPU build (make cuda), where built: what it does before touching a GPU - the head-dim refusal, and its plan
# is the CPU build's plan of the gpu tier (one copy of the logic)
if [ -x "$B/synth_cuda" ]; then
    "$B/synth_cuda" --tier published --plan > "$W/e" 2>&1; rc=$?
    [ $rc -eq 2 ] && grep -q "head dim d_model / heads = 128 / 4 = 32: the GPU kernels take 64 or 128" "$W/e" \
        && ok "synth_cuda: a head dim the GPU kernels lack is refused before anything runs" \
        || { bad "synth_cuda head dim (rc $rc)"; cat "$W/e"; }
    "$B/synth_cuda" --plan --tasks parity,mqar > "$W/pc" 2>&1 \
        && "$B/synth" --tier gpu --plan --tasks parity,mqar > "$W/pg" 2>&1 && cmp -s "$W/pc" "$W/pg" \
        && ok "synth_cuda --plan: the CPU build's gpu-tier plan" \
        || { bad "synth_cuda plan"; diff "$W/pc" "$W/pg" | head; }
    if ! nvidia-smi -L > /dev/null 2>&1; then   # no usable GPU here: the run stops before it writes anything
        "$B/synth_cuda" --gpus 2 --tasks parity --models mesa --seeds 1 --steps 2 --out "$W/nc.csv" > "$W/e" 2>&1
        rc=$?
        [ $rc -eq 2 ] && grep -q "GPU 1 (--gpus 2) cannot be used: .*nothing ran" "$W/e" && [ ! -e "$W/nc.csv" ] &&
            ok "synth_cuda without a usable GPU: refused before any cell, nothing written" ||
            { bad "synth_cuda without a GPU (rc $rc)"; cat "$W/e"; }
    fi
else echo "  (no $B/synth_cuda: its GPU-free checks skipped; make cuda builds it)"; fi

finish test_synth
