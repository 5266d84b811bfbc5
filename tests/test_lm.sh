#!/usr/bin/env bash
# The language-model comparison's CPU side (results/lm.md) on a tiny corpus and two tiny models:
#  1. examples/lm_data.sh --from: the held-out split is by file and by the SHA-1 of the name (checked
#     independently here), deterministic, train = 9 x validation, and build/train reads the all/ folder so
#     that its held-out 10% is exactly the validation file;
#  2. lm_eval: the per-position NLL averaged equals mn_forward's loss (soft-cap on), the Mesa model decoded
#     by mn_step at its training CG count gives the parallel forward's NLL, CG counts behave, the recall
#     probes are what lm_eval says they are;
#  3. bad input: a clear message, the documented status, nothing written;
#  4. lm_report and lm_compare.sh report turn the CSVs into tables and PNGs (a model's seed folders MODEL.sN into
#     the seeds table) and splice the tables into
#     the markdown between the markers, twice giving the same file.
. "$(dirname "$0")/lib.sh"
R=$(cd "$(dirname "$0")/.." && pwd)

# 1. the corpus: 60 files of different sizes, a few in a subfolder
mkdir -p "$W/src/sub"
for i in $(seq -w 0 59); do
    d="$W/src"; [ $((10#$i % 7)) = 0 ] && d="$W/src/sub"
    awk -v n="$i" 'BEGIN { for (l = 0; l < 40 + 13 * n; l++) printf "file %s line %d: a fox %d\n", n, l, l * n }' \
        > "$d/f$i.txt"
done
"$R/examples/lm_data.sh" --from t "$W/src" --out "$W/d" > "$W/d.log" 2>&1 ||
    { bad "lm_data.sh --from failed"; cat "$W/d.log"; }
tr=$(stat -c %s "$W/d/t/train.txt"); va=$(stat -c %s "$W/d/t/val.txt")
[ "$va" -gt 0 ] && [ "$tr" = $((9 * va)) ] && ok "train.txt ($tr bytes) is 9 x val.txt ($va)" || bad "sizes $tr, $va"
wrong=0; nval=0; : > "$W/valcat"
while IFS=$'\t' read -r split bytes name; do
    [ "$split" = split ] && continue
    h=$(printf %s "$name" | sha1sum | cut -c1-8)
    want=train; [ $(( 16#$h % 10 )) = 0 ] && want=val
    [ "$split" = "$want" ] || wrong=$((wrong + 1))
    [ "$want" = val ] && { cat "$W/src/$name" >> "$W/valcat"; nval=$((nval + 1)); }
done < "$W/d/t/units.tsv"
n=$(($(wc -l < "$W/d/t/units.tsv") - 1))
[ "$wrong" = 0 ] && [ "$n" = 60 ] && [ "$nval" -gt 0 ] &&
    ok "split by the SHA-1 of each file's name: $nval of $n held out" ||
    bad "split: $wrong files on the wrong side, $n listed"
cmp -s <(head -c "$va" "$W/valcat") "$W/d/t/val.txt" && ok "val.txt is the held-out files in name order" ||
    bad "val.txt is not the held-out files"
[ "$W/d/t/all/1_train.txt" -ef "$W/d/t/train.txt" ] && [ "$W/d/t/all/2_val.txt" -ef "$W/d/t/val.txt" ] &&
    ok "all/ holds hard links to train.txt and val.txt" || bad "all/ links"
sums=$(sha256sum "$W/d/t/train.txt" "$W/d/t/val.txt" | cut -d' ' -f1)
"$R/examples/lm_data.sh" --from t "$W/src" --out "$W/d" > /dev/null 2>&1
[ "$sums" = "$(sha256sum "$W/d/t/train.txt" "$W/d/t/val.txt" | cut -d' ' -f1)" ] &&
    ok "a second run writes the same bytes" || bad "lm_data.sh is not deterministic"
"$R/examples/lm_data.sh" --code-mb x > /dev/null 2>&1; rc=$?
[ $rc = 2 ] && ok "lm_data.sh: a bad number is status 2" || bad "lm_data.sh --code-mb x: status $rc"

# two tiny models; the split as build/train sees it
tiny="--data $W/d/t/all --d_model 32 --layers 2 --heads 2 --seq 64 --batch 4 --steps 3 --eval_every 3 --eval_batches 2"
"$B/train" $tiny --sample 0 --pattern attn --out "$W/ck/transformer" > "$W/t1.log" 2>&1 ||
    { bad "train attn"; cat "$W/t1.log"; }
grep -q "($tr train, $va validation)" "$W/t1.log" && ok "build/train reads all/: its held-out part is val.txt" ||
    bad "build/train's split: $(grep data: "$W/t1.log")"
"$B/train" $tiny --sample 0 --pattern mesa --softcap 0.1 --out "$W/ck/mesanet" > "$W/t2.log" 2>&1 ||
    { bad "train mesa"; cat "$W/t2.log"; }

"$B/train" $tiny --sample 0 --pattern attn,mesa --out "$W/ck/hybrid" > "$W/t3.log" 2>&1 ||
    { bad "train attn,mesa"; cat "$W/t3.log"; }

# 2. lm_eval
small="--val $W/d/t/val.txt --seq 64 --seqs 6 --recall_seqs 3 --recall_len 6 --recall_prefix 5 --distances 8,16,40"
for m in transformer mesanet; do
    "$B/lm_eval" --ckpt "$W/ck/$m" --out "$W/ev/$m" $small --cg_seqs 2 --cg_len 32 --cg_counts 0,1,10,30 \
        --dump_probe "$W/probe_$m.csv" > "$W/e_$m.log" 2>&1 || { bad "lm_eval $m"; cat "$W/e_$m.log"; }
done
for m in transformer mesanet; do
    awk -F, 'NR == FNR { if (FNR > 1) { s += $3; n++ } next }
             FNR == 2 { d = s / n - $8; exit !(n == 6 && d < 1e-5 && d > -1e-5) }' \
        "$W/ev/$m/windows.csv" "$W/ev/$m/summary.csv" &&
        ok "$m: windows.csv's 6 window means average to summary.csv's NLL" ||
        bad "$m: windows.csv vs summary"
done
# --cg_starts: the tolerance rows again from the Woodbury start (cfg.mesa_cg_warm 5), the same NLL, fewer steps
"$B/lm_eval" --ckpt "$W/ck/mesanet" --out "$W/ev/mesa_starts" $small --skip recall --cg_seqs 2 --cg_len 32 \
    --cg_counts 30 --cg_starts 0,5 > "$W/e_starts.log" 2>&1 || { bad "lm_eval --cg_starts"; cat "$W/e_starts.log"; }
awk -F, '$2 == "tol" { n0[$3] = $5; s0[$3] = $4 } $2 == "start" { n5[$3] = $5; s5[$3] = $4; k++ }
         END { for (t in n5) { d = n5[t] - n0[t]; if (d > 1e-3 || d < -1e-3 || s5[t] > s0[t]) bad = 1 }
               exit bad || k != 4 }' "$W/ev/mesa_starts/cg.csv" &&
    ok "lm_eval --cg_starts 0,5: 4 Woodbury-start rows, each within 1e-3 of x0 = 0's NLL at no more CG steps" ||
    { bad "--cg_starts rows"; cat "$W/ev/mesa_starts/cg.csv"; }
"$B/lm_eval" --ckpt "$W/ck/hybrid" --out "$W/ev/hybrid" $small --skip recall,cg > "$W/e_hybrid.log" 2>&1 ||
    { bad "lm_eval attn,mesa"; cat "$W/e_hybrid.log"; }
awk -F, 'NR == 2 { exit !(NF == 11 && $2 == "attn+mesa") }' "$W/ev/hybrid/summary.csv" &&
    ok "summary.csv: a hybrid's pattern is one field (attn+mesa), 11 fields" ||
    { bad "summary.csv of a hybrid"; cat "$W/ev/hybrid/summary.csv"; }
# a weights-only checkpoint (no optimizer.safetensors: an fla export, a save without meta) is evaluated too,
# with the same NLL as the full one
mkdir -p "$W/ck/wonly" && cp "$W/ck/hybrid/config.json" "$W/ck/hybrid/model.safetensors" "$W/ck/wonly/"
"$B/lm_eval" --ckpt "$W/ck/wonly" --out "$W/ev/wonly" $small --skip recall,cg > "$W/e_wonly.log" 2>&1 &&
    awk -F, 'NR == FNR { if (FNR == 2) a = $8; next } FNR == 2 { exit !($8 == a && $4 == 0) }' \
        "$W/ev/hybrid/summary.csv" "$W/ev/wonly/summary.csv" &&
    ok "lm_eval of a weights-only checkpoint: the full checkpoint's NLL, step 0" ||
    { bad "lm_eval weights-only"; cat "$W/e_wonly.log" "$W/ev/wonly/summary.csv"; }
for m in transformer mesanet; do
    awk -F, 'NR == FNR { if (FNR > 1) { s += $2 * $3; c += $3 } next }
             FNR == 2 { d = s / c - $8; f = ($8 - $10) / $10
                        exit !(d < 1e-5 && d > -1e-5 && f < 1e-5 && f > -1e-5) }' \
        "$W/ev/$m/position.csv" "$W/ev/$m/summary.csv" &&
        ok "$m: the mean of position.csv is summary.csv's NLL and mn_forward's loss" ||
        bad "$m: position.csv vs summary"
done
awk -F, '$1 == "forward" { f = $5; k = $3 } $2 == "fixed" && $3 == k { d = $5 - f }
         END { exit !(k == 10 && d < 1e-4 && d > -1e-4) }' "$W/ev/mesanet/cg.csv" &&
    ok "mn_step at the training CG count (10) gives the parallel forward's NLL" ||
    { bad "step vs forward"; cat "$W/ev/mesanet/cg.csv"; }
awk -F, '$2 == "fixed" { if ($4 > $3 + 1e-9 || ($3 == 0 && $4 != 0)) bad = 1 }
         $2 == "tol" { if (n++ && $4 < prev - 1e-9) bad = 1; prev = $4 }
         END { exit bad || n != 4 }' "$W/ev/mesanet/cg.csv" &&
    ok "CG steps: a fixed count k takes at most k (0: none), a smaller tolerance never fewer" || bad "CG step counts"
[ "$(wc -l < "$W/ev/mesanet/cg_position.csv")" = $((8 * 32 + 1)) ] && [ ! -e "$W/ev/transformer/cg.csv" ] &&
    ok "cg_position.csv: 8 settings x 32 positions; no CG files for attention" || bad "cg_position.csv rows"
python3 - "$W/probe_mesanet.csv" "$W/d/t/val.txt" "$W/ev/mesanet/recall.csv" > "$W/py.log" 2>&1 <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]))); val = open(sys.argv[2], "rb").read()
assert len(rows) == 9, len(rows)
seen = set()
for r in rows:
    d, off, P, n = int(r["distance"]), int(r["offset"]), int(r["prefix"]), int(r["length"]); L = 6
    x = bytes.fromhex(r["hex"]); R = x[P:P + L]
    assert n == P + d + L and len(x) == n + 1, (n, len(x))
    assert x[P + d:P + d + L] == R and all(33 <= b <= 126 for b in R), "copies"
    assert x[:P] == val[off:off + P] and x[P + L:P + d] == val[off + P:off + P + d - L], "text"
    assert x[n] == val[off + P + d - L], "last byte"
    seen.add(R)
assert len(seen) == 9, "the random strings repeat"
dist = [int(l.split(",")[0]) for l in open(sys.argv[3]).read().split("\n")[1:] if l]
assert dist == [8, 16, 40], dist
PY
[ $? = 0 ] && ok "recall probes: text, R, text, R, as documented" || { bad "recall probes malformed"; cat "$W/py.log"; }
cmp -s <(cut -d, -f1-5 "$W/probe_mesanet.csv") <(cut -d, -f1-5 "$W/probe_transformer.csv") &&
    cmp -s <(cut -d, -f6 "$W/probe_mesanet.csv") <(cut -d, -f6 "$W/probe_transformer.csv") &&
    ok "every model sees the same probes" || bad "the probes differ between models"

# 3. bad input: status, message, nothing written
expect() {  # expect STATUS PATTERN ARGS...: lm_eval into $W/none must fail so and create nothing
    local st=$1 pat=$2; shift 2
    "$B/lm_eval" "$@" --out "$W/none" > "$W/bad.log" 2>&1; rc=$?
    if [ $rc = "$st" ] && grep -q -- "$pat" "$W/bad.log" && [ ! -e "$W/none" ]; then ok "lm_eval: $pat (status $st)"
    else bad "lm_eval $* : status $rc: $(cat "$W/bad.log")"; fi
}
expect 1 "cannot load the checkpoint" --ckpt "$W/ck/nothing" $small
expect 1 "not a readable file" --ckpt "$W/ck/mesanet" --val "$W/d"
expect 2 "exceeds the model's max_seq_len" --ckpt "$W/ck/mesanet" $small --seq 100000
expect 2 "non-overlapping windows" --ckpt "$W/ck/mesanet" $small --seqs 100000
expect 2 "shorter than --recall_len" --ckpt "$W/ck/mesanet" $small --distances 4
expect 2 "exceed the model's max_seq_len" --ckpt "$W/ck/mesanet" $small --distances 600
expect 2 "outside (0, 1)" --ckpt "$W/ck/mesanet" $small --cg_tols 1e-3,2
expect 2 "unknown option --bogus" --ckpt "$W/ck/mesanet" $small --bogus 1
expect 2 "needs the GPU build" --ckpt "$W/ck/mesanet" $small --graph 1
cp -r "$W/ev/mesanet" "$W/keep"
"$B/lm_eval" --ckpt "$W/ck/mesanet" --out "$W/ev/mesanet" $small --seq 100000 > /dev/null 2>&1
diff -r "$W/keep" "$W/ev/mesanet" > /dev/null && ok "a failed run leaves earlier results as they were" ||
    bad "results changed"

# 4. the report from the CSVs alone
"$B/lm_report" --results "$W/ev" --corpus tiny --md "$W/t.md" --png "$W/lm_tiny" > "$W/r.log" 2>&1 ||
    { bad "lm_report"; cat "$W/r.log"; }
npng=$(ls "$W"/lm_tiny_*.png 2>/dev/null | wc -l)
grep -q "^| mesanet | \`mesa\` |" "$W/t.md" && grep -q "^| transformer | \`attn\` |" "$W/t.md" &&
    grep -q "fixed 30" "$W/t.md" &&
    [ "$npng" = 6 ] && ok "lm_report: tables and 6 PNGs" || bad "lm_report: $npng PNGs; $(head -5 "$W/t.md")"
awk -F'|' '!d && $2 == " mesanet " { se = $7 + 0; pse = $10 + 0; m = $6 + 0; d = 1 }
           END { exit !(se > 0 && se < m && pse > 0) }' \
    "$W/t.md" &&
    ok "lm_report: the validation table gives the SE over windows and the paired SE against the transformer" ||
    bad "lm_report: SE columns: $(grep '^| mesanet' "$W/t.md" | head -1)"
# seeds: a real run's folder as seed 1 and as MODEL.s2, MODEL.s3, the bits per byte set to 1.60, 1.70, 1.65
# (median 1.65, sd 0.05, SE 0.05 / sqrt 3 = 0.0289, spread 0.10); the transformer has seed 1 only, so no row
P="$R/results/lm/prose"
mkdir -p "$W/seeds"
cp -r "$P/transformer" "$W/seeds/transformer"
for s in 1:1.600000 2:1.700000 3:1.650000; do
    d="$W/seeds/mesanet"; [ "${s%:*}" = 1 ] || d="$d.s${s%:*}"
    cp -r "$P/mesanet" "$d" && awk -F, -v OFS=, -v b="${s#*:}" 'NR == 2 { $9 = b } 1' "$P/mesanet/summary.csv" \
        > "$d/summary.csv"
done
mkdir -p "$W/seeds/mesanet.s4"   # a seed not evaluated yet (no summary.csv): not a column
"$B/lm_report" --results "$W/seeds" --models transformer,mesanet --corpus prose --md "$W/s.md" --png "$W/s" \
    > "$W/s.log" 2>&1 || { bad "lm_report with seeds"; cat "$W/s.log"; }
row='| mesanet | 1.6000 | 1.7000 | 1.6500 | 3 | 1.6500 | 0.0289 | 0.1000 |'
[ "$(grep -c 'validation bits per byte over seeds' "$W/s.md")" = 1 ] && grep -qxF -- "$row" "$W/s.md" &&
    grep -q '^| model | seed 1 | seed 2 | seed 3 | n | median |' "$W/s.md" &&
    ! sed -n '/over seeds/,/^Each column/p' "$W/s.md" | grep -q '^| transformer' &&
    grep -q '^| mesanet | `mesa` | 41.07 M | 98304 | 1.1527 | .* | 1.6000 |' "$W/s.md" &&
    ok "lm_report: 3 seeds give the seeds table (median 1.65, SE 0.0289, spread 0.10); the rest stays seed 1" ||
    { bad "lm_report: seeds table"; grep -A6 'over seeds' "$W/s.md"; }
# without --models the seed folders are mesanet's seeds, not models; without seed folders, no seeds table
"$B/lm_report" --results "$W/seeds" --corpus prose --md "$W/s2.md" --png "$W/s2" > /dev/null 2>&1 &&
    grep -qxF -- "$row" "$W/s2.md" && ! grep -q '^| mesanet\.s' "$W/s2.md" &&
    ok "lm_report without --models: MODEL.sN is a seed of MODEL, not a model" ||
    bad "lm_report without --models: $(grep -c '^| mesanet.s' "$W/s2.md") rows of seed folders"
rm -r "$W/seeds/mesanet.s2" "$W/seeds/mesanet.s3"
"$B/lm_report" --results "$W/seeds" --models transformer,mesanet --corpus prose --md "$W/s3.md" --png "$W/s3" \
    > /dev/null 2>&1 && ! grep -q 'over seeds' "$W/s3.md" && grep -q '^| mesanet | `mesa` |' "$W/s3.md" &&
    ok "lm_report: seed 1 only, no seeds table" || bad "lm_report: a seeds table without seed folders"
mkdir -p "$W/res/code" && cp -r "$W/ev/transformer" "$W/ev/mesanet" "$W/res/code/"
printf 'head\n<!-- lm:code:begin -->\nold\n<!-- lm:code:end -->\ntail\n' > "$W/lm.md"
"$R/examples/lm_compare.sh" report --results "$W/res" --md "$W/lm.md" --png-dir "$W" > "$W/c.log" 2>&1 &&
    cp "$W/lm.md" "$W/lm1.md" &&
    "$R/examples/lm_compare.sh" report --results "$W/res" --md "$W/lm.md" --png-dir "$W" > /dev/null 2>&1 &&
    cmp -s "$W/lm.md" "$W/lm1.md" && ! grep -q "^old$" "$W/lm.md" && head -1 "$W/lm.md" | grep -q head &&
    tail -1 "$W/lm.md" | grep -q tail && grep -q "^| mesanet |" "$W/lm.md" && [ -s "$W/lm_code_cg.png" ] &&
    ok "lm_compare.sh report splices the tables between the markers (twice: the same file)" ||
    { bad "lm_compare.sh report"; cat "$W/c.log"; }
"$R/examples/lm_compare.sh" train --models nope > /dev/null 2>&1; rc=$?
[ $rc = 2 ] && ok "lm_compare.sh: an unknown model is status 2" || bad "lm_compare.sh unknown model: $rc"
# 5. `device` end to end on the CPU: a stand-in train_cuda (a tiny build/train run with train_cuda's outputs) in a
#    copy of the layout, the real lm_eval: both models trained in order, each evaluated beside the next training,
#    the pack written; a deadline too short to train leaves everything as it was and exits 0
mkdir -p "$W/dev/examples" "$W/dev/build" "$W/dev/data/code"
cp "$R/examples/lm_compare.sh" "$W/dev/examples/" && cp "$B/train" "$B/lm_eval" "$W/dev/build/"
cp -r "$W/d/t/all" "$W/dev/data/code/all" && cp "$W/d/t/val.txt" "$W/dev/data/code/val.txt"
cat > "$W/dev/build/train_cuda" <<'FAKE'
#!/usr/bin/env bash
# the test's stand-in: reads --out --pattern --data, trains 3 steps of a tiny model, prints train_cuda's lines
all="$*"
while [ $# -gt 0 ]; do case "$1" in --out) out=$2; shift 2 ;; --pattern) pat=$2; shift 2 ;;
    --data) data=$2; shift 2 ;; *) shift ;; esac; done
./build/train --data "$data" --out "$out" --pattern "$pat" --d_model 32 --layers 2 --heads 2 --seq 64 --batch 4 \
    --steps 3 --eval_every 3 --eval_batches 2 --sample 0 --overwrite 1 > /dev/null || exit 1
echo "$all" > "$out/args.txt"
echo "summary: 3 steps; 1000 tokens/s after the first step"
echo "checkpoint on the CPU: loss 1 (GPU 1, relative difference 1.0e-06)"
FAKE
chmod +x "$W/dev/build/train_cuda"
(cd "$W/dev" && OUT="$W/dev" ./examples/lm_compare.sh device --corpus code --models "transformer mesanet" \
    --tokens 32768 --deadline 300 --data data --eval "$small --cg_seqs 2 --cg_len 32 --cg_counts 0,30" \
    > "$W/dev.log" 2>&1); rc=$?
[ $rc = 0 ] && [ -f "$W/dev/results/lm/code/transformer/summary.csv" ] &&
    [ -f "$W/dev/results/lm/code/mesanet/cg.csv" ] && [ -f "$W/dev/results/lm/code/mesanet/train.csv" ] &&
    tar -tzf "$W/dev/lm_results.tar.gz" | grep -q "mesanet/summary.csv" &&
    ok "lm_compare.sh device: both models trained and evaluated, the results packed" ||
    { bad "lm_compare.sh device (status $rc)"; tail -20 "$W/dev.log"; }
(cd "$W/dev" && ./examples/lm_compare.sh device --corpus code --models "gdn" --tokens 32768 --deadline 61 --data data \
    > "$W/dev2.log" 2>&1); rc=$?
[ $rc = 0 ] && grep -q "no time left" "$W/dev2.log" && [ ! -e "$W/dev/runs/lm/code/gdn" ] &&
    ok "lm_compare.sh device: a deadline too short to train starts nothing" ||
    { bad "lm_compare.sh device, short deadline (status $rc)"; cat "$W/dev2.log"; }
# --seed N: the run is MODEL.sN (its folders, its train.csv line), train_cuda gets --seed N, seed 1's run stays;
# report puts the seed runs' own tables between the CORPUS-seeds markers and refuses a file without them
(cd "$W/dev" && OUT="$W/dev" ./examples/lm_compare.sh device --corpus code --models "mesanet" --seed 2 \
    --tokens 32768 --deadline 300 --data data --eval "$small --cg_seqs 2 --cg_len 32 --cg_counts 0,30" \
    > "$W/dev3.log" 2>&1); rc=$?
[ $rc = 0 ] && [ -f "$W/dev/results/lm/code/mesanet.s2/summary.csv" ] &&
    [ -f "$W/dev/results/lm/code/mesanet.s2/cg.csv" ] &&
    grep -q -- "--seed 2 " "$W/dev/runs/lm/code/mesanet.s2/args.txt" &&
    grep -q "^mesanet.s2,mesa," "$W/dev/results/lm/code/mesanet.s2/train.csv" &&
    grep -q -- "--seed 1 " "$W/dev/runs/lm/code/mesanet/args.txt" &&
    [ -f "$W/dev/results/lm/code/mesanet/summary.csv" ] &&
    ok "lm_compare.sh device --seed 2: the run mesanet.s2 trained with seed 2 and evaluated, seed 1's kept" ||
    { bad "lm_compare.sh device --seed 2 (status $rc)"; tail -20 "$W/dev3.log"; }
printf 'h\n<!-- lm:code:begin -->\n<!-- lm:code:end -->\n' > "$W/dev/lm.md"
cp "$B/lm_report" "$W/dev/build/" && cp "$W/dev/lm.md" "$W/dev/lm0.md"
(cd "$W/dev" && ./examples/lm_compare.sh report --md lm.md --png-dir . > "$W/dev4.log" 2>&1)
rc=$?
[ $rc = 1 ] && grep -q "lacks the markers <!-- lm:code-seeds:begin -->" "$W/dev4.log" &&
    cmp -s "$W/dev/lm.md" "$W/dev/lm0.md" && ! ls "$W/dev"/lm_code_*.png > /dev/null 2>&1 &&
    ok "lm_compare.sh report: seed runs without their markers in the file: an error, nothing written" ||
    { bad "lm_compare.sh report without the seeds markers (status $rc)"; cat "$W/dev4.log"; }
printf '%s\n' h '<!-- lm:code:begin -->' '<!-- lm:code:end -->' m '<!-- lm:code-seeds:begin -->' old \
    '<!-- lm:code-seeds:end -->' t > "$W/dev/lm.md"
(cd "$W/dev" && ./examples/lm_compare.sh report --md lm.md --png-dir . > "$W/dev5.log" 2>&1); rc=$?
[ $rc = 0 ] && ! grep -q "^old$" "$W/dev/lm.md" && grep -q "over seeds" "$W/dev/lm.md" &&
    awk '/lm:code-seeds:begin/,/lm:code-seeds:end/' "$W/dev/lm.md" | grep -q "^| mesanet.s2 |" &&
    [ -s "$W/dev/lm_code_seeds_cg.png" ] && tail -1 "$W/dev/lm.md" | grep -qx t &&
    ok "lm_compare.sh report: the seeds table, and the seed runs' tables between their markers" ||
    { bad "lm_compare.sh report with seed runs (status $rc)"; cat "$W/dev5.log"; }
"$R/examples/lm_compare.sh" train --models mesanet --seed 0 > /dev/null 2>&1; rc=$?
[ $rc = 2 ] && ok "lm_compare.sh: --seed 0 is status 2" || bad "lm_compare.sh --seed 0: $rc"
finish "language-model comparison (CPU side)"
