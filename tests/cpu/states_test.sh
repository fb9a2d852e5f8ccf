#!/bin/bash
# tests/cpu/states_test.sh LLMC_TRAIN MAKE_SHARDS — the optimizer-state settings
# of plan.json (train.master_weights, train.optimizer_states) and precision = fp8
# on the CPU trainer, end to end on synthetic shards:
#   - optimizer_states = bf16: the same bits twice, after a stop and resume, and on
#     2 ZeRO-1 ranks as on one; every stored moment a bf16 value; not the fp32
#     run's bits, but its loss within a bound; a checkpoint of fp32 states refused;
#   - master_weights = split: the fp32 run's bits (CPU weights are their own master);
#   - precision = fp8: refused by `run` and `check-plan`, naming the field.
set -u
BIN=$(realpath "$1"); MKSH=$(realpath "$2")
NAME=states
source "$(dirname "$0")/synth_lib.sh"
run() { (cd "$1" && shift && "$BIN" run plan.json "$@") >"$1.log" 2>&1; }
same() { cmp -s "$1/run/final/model.safetensors" "$2/run/final/model.safetensors" &&
         cmp -s "$1/ckpt/step-00000012/optimizer.safetensors" "$2/ckpt/step-00000012/optimizer.safetensors"; }
BF='p["train"]["optimizer_states"]="bf16"'

mkdir -p "$T/shards"; "$MKSH" "$T/shards" 64 32 64 7 >/dev/null 2>&1 || { bad make_shards; finish cpu-states; }

mkrun "$T/f32"; run "$T/f32"; rc0=$?
mkrun "$T/b1" "$BF"; run "$T/b1"; rc1=$?
mkrun "$T/b2" "$BF"; run "$T/b2"; rc2=$?
if [[ $rc0 -eq 0 && $rc1 -eq 0 && $rc2 -eq 0 ]] && same "$T/b1" "$T/b2"
then ok "optimizer_states = bf16: two runs, the same final weights and optimizer state (bits)"
else bad "bf16 states twice (exit $rc0, $rc1, $rc2)" "$T/f32.log" "$T/b1.log" "$T/b2.log"; fi

# the checkpoint's moments: every one a bf16 value (low 16 bits zero); fp32 states: not so
moments_bf16() {
    python3 - "$1/ckpt/step-00000012/optimizer.safetensors" <<'PYEOF'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
head = json.loads(b[8:8 + n])
low = total = 0
for k, t in head.items():
    if k == "__metadata__": continue
    assert t["dtype"] == "F32", t["dtype"]
    s, e = t["data_offsets"]
    for (u,) in struct.iter_unpack("<I", b[8 + n + s:8 + n + e]):
        total += 1
        low += (u & 0xffff) != 0
print(total, low)
sys.exit(0 if total > 0 and low == 0 else 1)
PYEOF
}
moments_bf16 "$T/b1" >"$T/mb.out" 2>&1 && ! moments_bf16 "$T/f32" >"$T/mf.out" 2>&1 \
    && ok "bf16 states: all $(cut -d' ' -f1 "$T/mb.out") stored moments are bf16 values; fp32 states' are not" \
    || bad "stored moments" "$T/mb.out" "$T/mf.out"

# against fp32 states: other bits, the same learning (final loss within 2%)
if ! cmp -s "$T/f32/run/final/model.safetensors" "$T/b1/run/final/model.safetensors" && python3 - "$T/f32/run/result.json" "$T/b1/run/result.json" >"$T/cmp.out" <<'PYEOF'
import json, sys
a, b = (json.load(open(f))["final_loss"] for f in sys.argv[1:3])
print(f"final loss fp32 states {a:.6g}, bf16 states {b:.6g}")
sys.exit(0 if abs(a - b) <= 0.02 * a else 1)
PYEOF
then ok "bf16 vs fp32 states: other bits, $(cat "$T/cmp.out") (within 2%)"
else bad "bf16 vs fp32 states" "$T/cmp.out"; fi

# stop after step 5 and resume: the uninterrupted run's bits (the rounding is keyed by step, not a stream)
mkrun "$T/br" "$BF"
run "$T/br" --stop-after 5; rca=$?
run "$T/br"; rcb=$?
if [[ $rca -eq 3 && $rcb -eq 0 ]] && grep -q "resumed from .* at step 5" "$T/br.log" && same "$T/b1" "$T/br"
then ok "bf16 states: stop at step 5 + resume == uninterrupted (bits)"
else bad "bf16 states resume (exit $rca, $rcb)" "$T/br.log"; fi

# 2 ranks with ZeRO-1 (each rank rounds its shard of the moments) == 1 rank with twice the accumulation
mkrun "$T/bz" "$BF"'; p["train"]["grad_accum"]=1; p["parallel"]["world_size"]=2; p["parallel"]["data_parallel"]=2; p["parallel"]["zero_stage"]=1'
free_port
RANKS=()
for r in 0 1; do
    (cd "$T/bz" && SLURM_STEP_NUM_TASKS=2 SLURM_PROCID=$r SLURM_LOCALID=$r MASTER_ADDR=127.0.0.1 \
        MASTER_PORT=$PORT LLMC_THREADS=1 timeout 120 "$BIN" run plan.json) >"$T/bz.$r.log" 2>&1 &
    PIDS+=($!); RANKS+=($!)
done
wait "${RANKS[0]}"; rz0=$?; wait "${RANKS[1]}"; rz1=$?
if [[ $rz0 -eq 0 && $rz1 -eq 0 ]] && same "$T/b1" "$T/bz"
then ok "bf16 states on 2 ZeRO-1 ranks x accum 1 == 1 rank x accum 2 (weights and moments, bits)"
else bad "bf16 states on 2 ranks (exit $rz0, $rz1)" "$T/bz.0.log" "$T/bz.1.log"; fi

# a checkpoint of fp32 states is another run's
mkrun "$T/mix"
run "$T/mix" --stop-after 4 >/dev/null
python3 - "$T/mix/plan.json" <<'PYEOF'
import json, sys
p = json.load(open(sys.argv[1])); p["train"]["optimizer_states"] = "bf16"; json.dump(p, open(sys.argv[1], "w"))
PYEOF
run "$T/mix"; rc=$?
[[ $rc -ne 0 ]] && grep -q "train.optimizer_states" "$T/mix.log" \
    && ok "a checkpoint of fp32 states refused by a bf16-states plan (exit $rc, the field named)" \
    || bad "fp32-state checkpoint resumed with bf16 states (exit $rc)" "$T/mix.log"

# master_weights = split: the CPU backend's fp32 weights are their own master: the fp32 run's bits
mkrun "$T/sp" 'p["train"]["master_weights"]="split"'; run "$T/sp"; rc=$?
[[ $rc -eq 0 ]] && same "$T/f32" "$T/sp" && ok "master_weights = split on CPUs: the fp32 master run's bits" \
    || bad "split master (exit $rc)" "$T/sp.log"

# precision = fp8: the CPU trainer has no FP8 GEMMs; run and check-plan refuse it, naming the field
mkrun "$T/f8" 'p["train"]["precision"]="fp8"'
run "$T/f8"; rc=$?
(cd "$T/f8" && "$BIN" check-plan plan.json) >"$T/f8c.log" 2>&1; rcc=$?
if [[ $rc -eq 2 && $rcc -eq 1 ]] && grep -q "train.precision = fp8: the CPU backend" "$T/f8.log" \
   && grep -q "train.precision = fp8: the CPU backend" "$T/f8c.log" && [[ ! -d $T/f8/ckpt ]]
then ok "precision = fp8: run (exit 2, before anything is written) and check-plan (exit 1) refuse it, train.precision named, nothing written"
else bad "fp8 on the CPU trainer (run exit $rc, check-plan exit $rcc)" "$T/f8.log" "$T/f8c.log"; fi
# the words the reader takes: a misspelt one refused naming the words
mkrun "$T/w" 'p["train"]["optimizer_states"]="fp16"; p["train"]["master_weights"]="half"'
(cd "$T/w" && "$BIN" check-plan plan.json) >"$T/w.log" 2>&1; rc=$?
[[ $rc -eq 1 ]] && grep -q 'train.master_weights' "$T/w.log" && grep -q '"fp32", "split"\|fp32.*split' "$T/w.log" \
    && ok "check-plan: master_weights \"half\" refused, the words it takes named" || bad "reader words (exit $rc)" "$T/w.log"
finish cpu-states
