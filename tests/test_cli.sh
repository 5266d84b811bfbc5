#!/usr/bin/env bash
# End-to-end checks of the example programs, single-threaded so runs are bit-reproducible:
#  1. a short training run on the built-in text must bring the validation loss below a bound;
#  2. 2N straight steps and N steps + resume + N steps give the same loss.csv, line for line;
#  3. generate loads the checkpoint and prints text;
#  4. bad inputs (missing data, unknown mixer, corrupt checkpoint) fail with a message, non-zero
#     status, and leave an existing checkpoint untouched.
# Prints "N passed, N failed" and exits non-zero on any failure.
. "$(dirname "$0")/lib.sh"
small="--d_model 64 --layers 2 --heads 2 --seq 64 --batch 8 --eval_batches 2 --sample 0"

# 1. learning (the default model, MesaNet): 150 steps on the license texts; byte entropy of English is ~4.5 bits at unigram
# level (3.1 nats); a model that learned anything goes well below 2.6 nats in 150 steps.
"$B/train" $small --steps 150 --eval_every 50 --lr 3e-3 --out "$W/a" > "$W/a.log" 2>&1
val=$(awk -F, 'NR>1{v=$3} END{print v}' "$W/a/loss.csv")
if awk -v v="$val" 'BEGIN{exit !(v < 2.6)}'; then ok "training: validation loss $val < 2.6 after 150 steps"; else bad "training: validation loss $val not < 2.6"; cat "$W/a.log"; fi
[ -s "$W/a/loss.png" ] && ok "loss.png written" || bad "loss.png missing"
grep -q '"model_type": "mesa_net"' "$W/a/config.json" && grep -q '"max_cg_step_training": 10' "$W/a/config.json" && ok "config.json has fla MesaNetConfig keys" || bad "config.json"
# the Transformer baseline through the same program
"$B/train" $small --pattern attn --steps 60 --eval_every 60 --out "$W/t" > "$W/t.log" 2>&1
val=$(awk -F, 'NR>1{v=$3} END{print v}' "$W/t/loss.csv")
if awk -v v="$val" 'BEGIN{exit !(v < 3.1)}' && grep -q '"model_type": "transformer"' "$W/t/config.json"; then ok "attention model trains ($val < 3.1 after 60 steps), TransformerConfig keys"; else bad "attention run: $val"; cat "$W/t.log"; fi

# 2. exact resume
"$B/train" $small --steps 40 --eval_every 20 --out "$W/s" > /dev/null 2>&1
"$B/train" $small --steps 20 --eval_every 20 --out "$W/r" > /dev/null 2>&1
"$B/train" --resume "$W/r" --steps 40 --eval_every 20 $small > /dev/null 2>&1
if diff <(cut -d, -f1-4 "$W/s/loss.csv") <(cut -d, -f1-4 "$W/r/loss.csv") > /dev/null; then ok "resume reproduces the straight run (loss.csv identical)"; else bad "resume differs:"; diff "$W/s/loss.csv" "$W/r/loss.csv"; fi

# 3. generation from the checkpoint
out=$("$B/generate" --ckpt "$W/a" --prompt "The " --n 50 2>/dev/null)
[ ${#out} -ge 50 ] && ok "generate printed ${#out} characters" || bad "generate output too short: '$out'"

# 4. bad input
"$B/train" --data "$W/nothing.txt" --steps 1 --out "$W/x" > "$W/e.log" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q "cannot open" "$W/e.log" && ok "missing data file: clear error" || bad "missing data file (rc $rc)"
"$B/train" $small --pattern attn,nope --steps 1 --out "$W/x" > "$W/e.log" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q "unknown mixer 'nope'" "$W/e.log" && ok "unknown mixer: clear error" || bad "unknown mixer (rc $rc)"
cp "$W/a/model.safetensors" "$W/keep"
head -c 1000 "$W/keep" > "$W/a/model.safetensors"
"$B/generate" --ckpt "$W/a" > "$W/e.log" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q "safetensors" "$W/e.log" && ok "truncated checkpoint: clear error" || bad "truncated checkpoint (rc $rc)"
"$B/train" --resume "$W/a" --steps 200 > "$W/e.log" 2>&1; rc=$?
cmp -s <(head -c 1000 "$W/keep") "$W/a/model.safetensors" && [ $rc -ne 0 ] && ok "failed resume leaves the checkpoint as it was" || bad "failed resume (rc $rc)"
"$B/train" --lr 1e30 $small --steps 30 --eval_every 10 --out "$W/nan" > "$W/e.log" 2>&1; rc=$?
[ $rc -eq 3 ] && grep -q "stopping" "$W/e.log" && ok "divergent run stops with a clear error" || { bad "NaN run (rc $rc)"; tail -3 "$W/e.log"; }

finish test_cli
