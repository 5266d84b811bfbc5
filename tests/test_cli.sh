#!/usr/bin/env bash
# End-to-end checks of the example programs, single-threaded so runs are bit-reproducible:
#  1. a short training run on the built-in text must bring the validation loss below a bound;
#  2. 2N straight steps and N steps + resume + N steps give the same loss.csv, line for line, with the
#     flags repeated and with --resume alone (it takes them from the checkpoint);
#  3. generate loads the checkpoint and prints text;
#  4. bad inputs (missing data, unknown mixer, corrupt checkpoint) fail with a message, non-zero
#     status, and leave an existing checkpoint untouched;
#  5. checkpoints are never lost: a NaN run saves nothing; a kill at every stage of a save and at
#     random moments, a full disk and a failed write each leave the old set or the new one, which
#     resumes exactly; mixed or malformed sets are refused; a second trainer on one --out is refused;
#  6. every command-line number is checked (a clear message and status 2), tiny data and huge batches
#     are errors, --resume refuses flags that contradict the checkpoint.
# Prints "N passed, N failed" and exits non-zero on any failure.
. "$(dirname "$0")/lib.sh"
small="--d_model 64 --layers 2 --heads 2 --seq 64 --batch 8 --eval_batches 2 --sample 0"
tiny="--d_model 32 --layers 2 --heads 2 --seq 32 --batch 2 --eval_batches 2 --sample 0"

# 1. learning (the default model, MesaNet): 150 steps on the license texts; byte entropy of English is ~4.5 bits
# at unigram level (3.1 nats); a model that learned anything goes well below 2.6 nats in 150 steps.
"$B/train" $small --steps 150 --eval_every 50 --lr 3e-3 --out "$W/a" > "$W/a.log" 2>&1
val=$(awk -F, 'NR>1{v=$3} END{print v}' "$W/a/loss.csv")
if awk -v v="$val" 'BEGIN{exit !(v < 2.6)}'; then
    ok "training: validation loss $val < 2.6 after 150 steps";
else bad "training: validation loss $val not < 2.6"; cat "$W/a.log"; fi
[ -s "$W/a/loss.png" ] && ok "loss.png written" || bad "loss.png missing"
grep -q '"model_type": "mesa_net"' "$W/a/config.json" && grep -q '"max_cg_step_training": 10' "$W/a/config.json" &&
    ok "config.json has fla MesaNetConfig keys" || bad "config.json"
# the Transformer baseline through the same program
"$B/train" $small --pattern attn --steps 60 --eval_every 60 --out "$W/t" > "$W/t.log" 2>&1
val=$(awk -F, 'NR>1{v=$3} END{print v}' "$W/t/loss.csv")
if awk -v v="$val" 'BEGIN{exit !(v < 3.1)}' && grep -q '"model_type": "transformer"' "$W/t/config.json"; then
    ok "attention model trains ($val < 3.1 after 60 steps), TransformerConfig keys";
else bad "attention run: $val"; cat "$W/t.log"; fi

# 2. exact resume
"$B/train" $small --steps 40 --eval_every 20 --out "$W/s" > /dev/null 2>&1
"$B/train" $small --steps 20 --eval_every 20 --out "$W/r" > /dev/null 2>&1
"$B/train" --resume "$W/r" --steps 40 --eval_every 20 $small > /dev/null 2>&1
if diff <(cut -d, -f1-4 "$W/s/loss.csv") <(cut -d, -f1-4 "$W/r/loss.csv") > /dev/null; then
    ok "resume reproduces the straight run (loss.csv identical)";
else bad "resume differs:"; diff "$W/s/loss.csv" "$W/r/loss.csv"; fi
"$B/train" $small --steps 20 --eval_every 20 --out "$W/r2" > /dev/null 2>&1
"$B/train" --resume "$W/r2" --steps 40 > "$W/r2.log" 2>&1
if diff <(cut -d, -f1-4 "$W/s/loss.csv") <(cut -d, -f1-4 "$W/r2/loss.csv") > /dev/null; then
    ok "--resume alone takes batch, seq, data, eval settings from the checkpoint (identical loss.csv)"
else bad "--resume alone differs:"; diff "$W/s/loss.csv" "$W/r2/loss.csv"; cat "$W/r2.log"; fi

# 3. generation from the checkpoint
out=$("$B/generate" --ckpt "$W/a" --prompt "The " --n 50 2>/dev/null)
[ ${#out} -ge 50 ] && ok "generate printed ${#out} characters" || bad "generate output too short: '$out'"

# 4. bad input
"$B/train" --data "$W/nothing.txt" --steps 1 --out "$W/x" > "$W/e.log" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q "cannot open" "$W/e.log" &&
    ok "missing data file: clear error" || bad "missing data file (rc $rc)"
"$B/train" $small --pattern attn,nope --steps 1 --out "$W/x" > "$W/e.log" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q "unknown mixer 'nope'" "$W/e.log" &&
    ok "unknown mixer: clear error" || bad "unknown mixer (rc $rc)"
cp "$W/a/model.safetensors" "$W/keep"
head -c 1000 "$W/keep" > "$W/a/model.safetensors"
"$B/generate" --ckpt "$W/a" > "$W/e.log" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q "safetensors" "$W/e.log" &&
    ok "truncated checkpoint: clear error" || bad "truncated checkpoint (rc $rc)"
"$B/train" --resume "$W/a" --steps 200 > "$W/e.log" 2>&1; rc=$?
cmp -s <(head -c 1000 "$W/keep") "$W/a/model.safetensors" && [ $rc -ne 0 ] &&
    ok "failed resume leaves the checkpoint as it was" || bad "failed resume (rc $rc)"
"$B/train" --lr 1e30 $small --steps 30 --eval_every 10 --out "$W/nan" > "$W/e.log" 2>&1; rc=$?
[ $rc -eq 3 ] && grep -q "stopping" "$W/e.log" &&
    ok "divergent run stops with a clear error" || { bad "NaN run (rc $rc)"; tail -3 "$W/e.log"; }

# 5. checkpoints that are never lost
step_of() { sed -n 's/.*"mesanet_stamp": "\([0-9]*\)-.*/\1/p' "$1/config.json" 2>/dev/null; }
leftovers() { ls -a "$(dirname "$1")" | grep -c "^\.$(basename "$1")\.mn-save-"; }
same_set() {
    cmp -s "$1/config.json" "$2/config.json" && cmp -s "$1/model.safetensors" "$2/model.safetensors" &&
        cmp -s "$1/optimizer.safetensors" "$2/optimizer.safetensors"
}
snapshot() { rm -rf "$2"; mkdir -p "$2"; cp "$1"/config.json "$1"/model.safetensors "$1"/optimizer.safetensors "$2"/; }
same_log() { diff -q <(cut -d, -f1-4 "$1/loss.csv") <(cut -d, -f1-4 "$2/loss.csv") > /dev/null; }   # (tokens/s differ)
# report NAME: ok when the last condition held, else bad with the log
report() { if [ "$1" = 0 ]; then ok "$2"; else bad "$2 (rc $rc)"; tail -5 "$W/e.log"; fi; }
# the straight run every interrupted one must reproduce once resumed
"$B/train" $tiny --steps 15 --eval_every 5 --out "$W/ref" > /dev/null 2>&1
"$B/train" $tiny --steps 10 --eval_every 5 --out "$W/c" > /dev/null 2>&1
snapshot "$W/c" "$W/c.before"

# a run that diverges (lr 1e10: the weights overflow) or meets NaN saves nothing and says so
"$B/train" --resume "$W/c" --steps 30 --eval_every 1 --lr 1e10 > "$W/e.log" 2>&1; rc=$?
same_set "$W/c" "$W/c.before" && [ $rc -eq 3 ] && grep -q "not saving\|not finite\|stopping" "$W/e.log" &&
    "$B/generate" --ckpt "$W/c" --n 5 > /dev/null 2>&1
report $? "diverging resume (--lr 1e10): status 3, the checkpoint of step 10 untouched and loadable"
"$B/train" --resume "$W/c" --steps 11 > "$W/e.log" 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "resumed .* at step 10" "$W/e.log"
report $? "  ... and it resumes at step 10"
snapshot "$W/c" "$W/c.before"

# a kill at every stage of the second save: the first set (stages 1-7) or the second (8-9), whole; the
# resumed run is bit-identical to the straight one; the next save clears the temporary folder left behind
kills_ok=1
for s in 1 2 3 4 5 6 7 8 9; do
    rm -rf "$W/k"
    { MN_TEST_SAVE_KILL=2:$s "$B/train" $tiny --steps 15 --eval_every 5 --out "$W/k" > /dev/null 2>&1; } 2> /dev/null
    rc=$?   # (the braces keep bash's "Killed" line quiet)
    want=5; [ $s -ge 8 ] && want=10
    got=$(step_of "$W/k")
    "$B/train" --resume "$W/k" > "$W/k.log" 2>&1; rr=$?
    left=$(leftovers "$W/k")
    if [ $rc -ne 137 ] || [ "$got" != $want ] || [ $rr -ne 0 ] || ! same_log "$W/ref" "$W/k" || [ "$left" != 0 ]; then
        kills_ok=0; tail -3 "$W/k.log"
        echo "    stage $s: kill rc $rc, checkpoint step '$got' (want $want), resume rc $rr, leftovers $left"
    fi
done
[ $kills_ok = 1 ] && ok "kill -9 at each of the 9 stages of a save: old or new set whole, exact resume, no leftover" \
    || bad "kill at a save stage"

# a fresh run into a folder that holds a checkpoint is refused unless --overwrite 1 says to replace it
"$B/train" $tiny --pattern attn --steps 5 --out "$W/c" > "$W/ow.log" 2>&1; rc=$?
same_set "$W/c" "$W/c.before" && [ $rc -eq 2 ] && grep -q "holds a checkpoint" "$W/ow.log"
report $? "a fresh run into a checkpoint folder without --overwrite: status 2, the set unchanged"
# a different model into an existing checkpoint folder, killed half-way through its first save: the old set stays
{ MN_TEST_SAVE_KILL=1:4 "$B/train" $tiny --pattern attn --steps 5 --overwrite 1 --out "$W/c" > /dev/null 2>&1; } \
    2> /dev/null; rc=$?
same_set "$W/c" "$W/c.before" && [ $rc -eq 137 ] && "$B/generate" --ckpt "$W/c" --n 5 > /dev/null 2>&1
report $? "another architecture killed while saving into a checkpoint folder: the old set stays, whole"

# kills at random moments while every save stage is slowed down (so they land inside saves too)
rand_ok=1; inside=0
for i in 1 2 3 4 5 6 7 8; do
    rm -rf "$W/rk"
    MN_TEST_SAVE_PAUSE_MS=15 "$B/train" $tiny --steps 15 --eval_every 5 --out "$W/rk" > /dev/null 2>&1 & p=$!
    sleep "0.$(printf %03d $((RANDOM % 450 + 60)))"; kill -9 $p 2> /dev/null; wait $p 2> /dev/null
    [ "$(leftovers "$W/rk")" != 0 ] && inside=$((inside+1))
    if [ "$(step_of "$W/rk")" = 15 ]; then   # it had finished
        same_log "$W/ref" "$W/rk" || { rand_ok=0; echo "    kill $i: finished run differs"; }
    elif [ -e "$W/rk/config.json" ]; then
        if ! "$B/train" --resume "$W/rk" --steps 15 > "$W/rk.log" 2>&1 || ! same_log "$W/ref" "$W/rk" ||
            [ "$(leftovers "$W/rk")" != 0 ]; then
            rand_ok=0; echo "    kill $i: resume failed or differs"; tail -3 "$W/rk.log"
        fi
    elif ls "$W/rk" 2> /dev/null | grep -q safetensors; then
        rand_ok=0; echo "    kill $i: safetensors files without a config.json"
    fi
done
[ $rand_ok = 1 ] && ok "8 kills at random moments ($inside inside a save): every folder resumes to the straight run" \
    || bad "random kills"

# a failed write (file size limit: EFBIG) during a save: status 1 with the reason, the old set untouched
( trap '' XFSZ; ulimit -f 250; exec "$B/train" --resume "$W/c" --steps 20 ) > "$W/e.log" 2>&1; rc=$?
same_set "$W/c" "$W/c.before" && [ $rc -eq 1 ] && grep -q "File too large" "$W/e.log" && [ "$(leftovers "$W/c")" = 0 ]
report $? "a write failing mid-save: status 1, 'File too large' in the message, old set untouched, no temporary folder"
# a full disk: a tmpfs that holds one checkpoint set but not two (where this machine lets us mount one)
mkdir -p "$W/fs"
if mount -t tmpfs -o size=800k tmpfs "$W/fs" 2> /dev/null; then
    "$B/train" $tiny --steps 10 --eval_every 5 --out "$W/fs/d" > "$W/e.log" 2>&1; rc=$?
    [ $rc -eq 1 ] && grep -q "No space left on device" "$W/e.log" && [ "$(step_of "$W/fs/d")" = 5 ] &&
        [ "$(leftovers "$W/fs/d")" = 0 ] && "$B/generate" --ckpt "$W/fs/d" --n 5 > /dev/null 2>&1 &&
        ! grep -q "final validation" "$W/e.log"
    report $? "full disk (800 KB tmpfs): status 1, 'No space left on device', the step-5 set loads, no temporary folder"
    umount "$W/fs"
else echo "  note: no tmpfs mount here (not root?); the file-size limit above covers failed writes"; fi

# mixed and malformed sets are refused, and nothing is changed
rm -rf "$W/m"; cp -r "$W/c" "$W/m"; cp "$W/ref/model.safetensors" "$W/m/"
"$B/generate" --ckpt "$W/m" > "$W/e.log" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "different saves" "$W/e.log"
report $? "a model file from another save: refused as a mixed set"
rm -rf "$W/m"; cp -r "$W/c" "$W/m"
perl -0777 -pi -e 's/"step":"(\d\d)"/"step":"xx"/' "$W/m/optimizer.safetensors"   # same length: same header size
snapshot "$W/m" "$W/m.before"
"$B/train" --resume "$W/m" --steps 20 > "$W/e.log" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "decimal whole numbers" "$W/e.log" && same_set "$W/m" "$W/m.before"
report $? "\"step\": \"xx\" in the optimizer metadata: refused, nothing written"

# one trainer per folder: a second one is refused while the first runs, and the first finishes untouched
rm -rf "$W/lk"
MN_TEST_SAVE_PAUSE_MS=40 "$B/train" $tiny --steps 15 --eval_every 5 --out "$W/lk" > "$W/lk1.log" 2>&1 & p=$!
for i in $(seq 100); do [ -s "$W/lk/train.lock" ] && break; sleep 0.05; done
"$B/train" $tiny --steps 15 --eval_every 5 --out "$W/lk" > "$W/e.log" 2>&1; rc2=$?
"$B/train" --resume "$W/lk" --steps 30 > "$W/lk3.log" 2>&1; rc3=$?
wait $p; rc=$?
[ $rc2 -eq 4 ] && [ $rc3 -eq 4 ] && grep -q "in use by another trainer" "$W/e.log" && [ $rc -eq 0 ] &&
    same_log "$W/ref" "$W/lk"
report $? "a second trainer (fresh or --resume) on a busy --out: status 4; the first finishes with its loss.csv intact"

# 6. command lines: every number validated, contradictions refused
bad_args=0
for a in "--steps abc" "--steps -5" "--steps 0" "--lr -1" "--lr nan" "--lr inf" "--clip -1" "--wd -1" "--cg -5" \
         "--d_model 0" "--eval_every 0" "--eval_batches 0" "--batch 1000000000" "--batch 4611686018427387904 --seq 4" \
         "--seed 1x" "--top_p 2" "--steps" "--gate_bias 99" "--cg_warm 7"; do
    "$B/train" $a --out "$W/x2" > "$W/e.log" 2>&1; rc=$?
    if [ $rc -ne 2 ] || [ ! -s "$W/e.log" ] || [ -e "$W/x2" ]; then
        bad_args=$((bad_args+1)); echo "    train $a: rc $rc"; cat "$W/e.log"
    fi
done
[ $bad_args = 0 ] && ok "19 bad train arguments: each status 2 with a message, nothing created" \
    || bad "$bad_args bad arguments accepted"
"$B/train" $tiny --batch 50000000 --steps 1 --out "$W/x2" > "$W/e.log" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "GB of activations" "$W/e.log" && [ ! -e "$W/x2" ]
report $? "a batch larger than the machine's memory: status 1 before allocating"
head -c 6000 /usr/share/common-licenses/GPL-3 > "$W/small.txt"
"$B/train" --data "$W/small.txt" --out "$W/x2" > "$W/e.log" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "fewer than --seq + 2" "$W/e.log"
report $? "a 6000-byte --data with default flags: status 2, the validation slices are too short"
"$B/train" --help > "$W/e.log" 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "^usage: train" "$W/e.log"
report $? "train --help: usage, status 0"
"$B/generate" --help > "$W/e.log" 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "^usage: generate" "$W/e.log"
report $? "generate --help: usage, status 0"
"$B/generate" --ckpt "$W/c" --n -1 > "$W/e.log" 2>&1; rc=$?
[ $rc -eq 2 ]
report $? "generate --n -1: status 2"
"$B/generate" --ckpt "$W/t" --n 600 > /dev/null 2> "$W/e.log"; rc=$?
[ $rc -eq 1 ] && grep -q "stopped after" "$W/e.log"
report $? "generate past an attention model's context: stops with status 1 and says why"
contra=0
for a in "--d_model 64" "--pattern attn" "--batch 4" "--seq 16" "--data $W/small.txt" "--eval_batches 3" "--seed 7"; do
    "$B/train" --resume "$W/c" --steps 20 $a > "$W/e.log" 2>&1; rc=$?
    if [ $rc -ne 2 ] || ! grep -q "contradicts\|not the text" "$W/e.log" || ! same_set "$W/c" "$W/c.before"; then
        contra=$((contra+1)); echo "    --resume $a: rc $rc"; cat "$W/e.log"
    fi
done
[ $contra = 0 ] && ok "7 flags contradicting the checkpoint: each refused (status 2), the checkpoint unchanged" \
    || bad "$contra contradictions accepted"
"$B/train" --resume "$W/c" --steps 15 --lr 1e-3 > "$W/e.log" 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "note: --lr 0.001 replaces the checkpoint's 0.003" "$W/e.log" && [ "$(step_of "$W/c")" = 15 ]
report $? "--resume with a new --lr: allowed, with a note"

# the Mesa forget-gate initialisation: a trained bias near log 19 (gamma ~0.95) after a few steps
"$B/train" $tiny --gate_bias 2.944 --steps 2 --eval_every 2 --out "$W/gb" > "$W/e.log" 2>&1; rc=$?
[ $rc -eq 0 ] && [ -s "$W/gb/model.safetensors" ]
report $? "--gate_bias 2.944: trains and saves"
# fla's CG arithmetic as a training option: written to config.json for fla and for --resume
"$B/train" $tiny --cg_fla 1 --steps 2 --eval_every 2 --out "$W/fla" > "$W/e.log" 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q '"mesanet_cg_fla": 1' "$W/fla/config.json"
report $? "--cg_fla 1: trains, config.json says mesanet_cg_fla 1"

finish test_cli
