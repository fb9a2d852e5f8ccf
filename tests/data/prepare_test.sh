#!/bin/bash
# prepare_test.sh — `llmc-train prepare` end to end on real files:
# the tiny example, packing, pre-training text, bad records with positions,
# idempotence, thread-count independence, and kill -9 in the middle.
#   prepare_test.sh BUILD SCRATCH   (from the repository root)
set -u
BUILD=$1 S=$2
TRAIN=$BUILD/llmc-train SHARD=$BUILD/tests/data/shard_test
R=$(pwd)
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
no() { fail=$((fail + 1)); echo "FAIL $1"; [[ -n ${2:-} ]] && echo "$2" | tail -n 15; }

# plan DIR FORMAT FILE CONTEXT PACKING POLICY [STAGE TEMPLATE]: a plan.json in DIR
plan() {
    local dir=$1 format=$2 file=$3 context=$4 packing=$5 policy=$6 stage=${7:-sft} template=${8:-\"qwen\"}
    mkdir -p "$dir"
    local cols='"messages": "messages", "system": null, "tools": null, "prompt": null, "query": null, "response": null, "history": null, "text": null'
    [[ $format == alpaca ]] && cols='"messages": null, "system": null, "tools": null, "prompt": "instruction", "query": "input", "response": "output", "history": "history", "text": null'
    [[ $format == text ]] && cols='"messages": null, "system": null, "tools": null, "prompt": null, "query": null, "response": null, "history": null, "text": "text"'
    cat > "$dir/plan.json" <<JSON
{"llmc_plan_version": 1, "job": "t", "stage": "$stage", "backend": "llmc",
 "model": {"name": "tiny", "arch": "qwen2", "vocab": 512, "max_context": 256},
 "tokenizer": {"path": "$R/examples/tiny/tokenizer", "template": $template},
 "datasets": [{"name": "d", "file": "$file", "format": "$format", "columns": {$cols},
   "tags": {"role": "role", "content": "content", "user": "user", "assistant": "assistant",
            "observation": null, "function": "function_call", "system": "system"},
   "samples": null, "size_bytes": null, "tokens": null}],
 "data": {"context": $context, "packing": $packing, "on_bad_record": "$policy", "shards_dir": "shards"}}
JSON
}

# 1. the tiny example: 4000 rows, row 0 is record 1 rendered with the qwen template
plan "$S/tiny" sharegpt "$R/examples/tiny/data/arith.json" 64 false fail
if out=$("$TRAIN" prepare "$S/tiny/plan.json" 2>&1) && chk=$("$SHARD" --check "$S/tiny/shards" 2>&1) &&
   [[ $chk == "rows 4000 docs 4000 segments 4000 "* ]]; then ok "prepare tiny: $chk"; else no "prepare tiny" "$out $chk"; fi
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["messages"][int(sys.argv[2])]["content"])' "$R/examples/tiny/data/arith.json" "$1"; }
q=$(field 0) a=$(field 1)
want=$(printf '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n%s<|im_end|>\n' "$q" "$a")
row=$("$SHARD" --row "$S/tiny/shards" 0)
got=$(head -n 1 <<<"$row" | "$TRAIN" tokenize --tokenizer examples/tiny/tokenizer --decode)
labels=$(tail -n 1 <<<"$row" | tr ' ' '\n' | grep -c 1)
ans=$(printf '%s<|im_end|>\n' "$a" | "$TRAIN" tokenize --tokenizer examples/tiny/tokenizer | wc -w)
if [[ "$got" == "${want%$'\n'}" && $labels -eq $ans ]]; then ok "row 0 = record 1 in the qwen template, $labels labels"
else no "row 0" "got: $got / labels $labels, answer tokens $ans"; fi

sumok=$(python3 -c 'import json,sys; i=json.load(open(sys.argv[1])); d=i["summary"]["datasets"][0]
print(int(d["tokens"] == i["n_tokens"] and d["label_tokens"] == i["n_label_tokens"] and d["records_kept"] == 4000))' "$S/tiny/shards/index.json")
if [[ $sumok == 1 ]]; then ok "index.json summary: per-dataset records and tokens"; else no "index.json summary"; fi

# 2. idempotent: a second run does nothing; a changed input file is prepared again
before=$(stat -c %Y.%s "$S/tiny/shards/shard-00000.bin")
out=$("$TRAIN" prepare "$S/tiny/plan.json" 2>&1)
if [[ $out == *"up to date"* && $(stat -c %Y.%s "$S/tiny/shards/shard-00000.bin") == "$before" ]]; then ok "second run: up to date"
else no "idempotence" "$out"; fi
cp "$R/examples/tiny/data/arith.json" "$S/arith.json"
plan "$S/tiny2" sharegpt "$S/arith.json" 64 false fail
"$TRAIN" prepare "$S/tiny2/plan.json" >/dev/null 2>&1
touch -d '2001-01-01' "$S/arith.json"
out=$("$TRAIN" prepare "$S/tiny2/plan.json" 2>&1)
if [[ $out != *"up to date"* && $out == *"4000 records kept"* ]]; then ok "changed input: prepared again"; else no "changed input" "$out"; fi

# 3. the same bytes whatever the thread count (several shards)
plan "$S/t1" sharegpt "$R/examples/tiny/data/arith.json" 128 true fail
plan "$S/t3" sharegpt "$R/examples/tiny/data/arith.json" 128 true fail
"$TRAIN" prepare "$S/t1/plan.json" --threads 1 --shard-tokens 20000 >/dev/null 2>&1
"$TRAIN" prepare "$S/t3/plan.json" --threads 3 --shard-tokens 20000 >/dev/null 2>&1
n=$(ls "$S/t1/shards" | grep -c '^shard-')
if [[ $n -gt 3 ]] && diff -r "$S/t1/shards" "$S/t3/shards" >/dev/null; then ok "threads 1 and 3: identical $n shards"
else no "thread independence" "$(ls "$S/t1/shards" "$S/t3/shards")"; fi

# 4. packing: several documents per row, positions restart, every record kept
chk=$("$SHARD" --check "$S/t1/shards" 2>&1)
rows=$(awk '{print $2}' <<<"$chk") segs=$(awk '{print $6}' <<<"$chk")
if [[ $? -eq 0 && $segs -eq 4000 && $rows -lt 3000 ]]; then ok "packing: $chk"; else no "packing" "$chk"; fi

# 5. pre-training text (JSON Lines), packed: documents end with eos and are cut across rows
for i in $(seq 1 50); do echo "{\"text\": \"Document $i says hello to the number $((i * 37)).\"}"; done > "$S/docs.jsonl"
plan "$S/pt" text "$S/docs.jsonl" 32 true fail pt null
out=$("$TRAIN" prepare "$S/pt/plan.json" 2>&1); chk=$("$SHARD" --check "$S/pt/shards" 2>&1)
eos=$(echo '<|im_end|>' | "$TRAIN" tokenize --tokenizer examples/tiny/tokenizer | cut -d' ' -f1)
r0=$("$SHARD" --row "$S/pt/shards" 0 | head -n 1)
if [[ $out == *"50 records kept"* && $chk == *"docs 50 "* && " $r0 " == *" $eos "* ]]; then ok "pre-training text: $chk"
else no "pre-training text" "$out $chk $r0"; fi

# 6. bad records: positioned messages; "fail" stops, "skip" counts by reason
for f in sharegpt_bad.json alpaca_bad.jsonl text_bad.jsonl; do
    fmt=sharegpt; [[ $f == alpaca* ]] && fmt=alpaca
    stage=sft tpl='"qwen"'; [[ $f == text* ]] && { fmt=text stage=pt tpl=null; }
    cp "tests/data/bad/$f" "$S/$f"
    plan "$S/skip-$f" $fmt "$S/$f" 64 false skip $stage "$tpl"
    out=$("$TRAIN" prepare "$S/skip-$f/plan.json" 2>&1); rc=$?
    got=$(sed "s|$S/||g" <<<"$out" | grep -v '^llmc-train prepare: [0-9]* records (')
    if [[ $rc -eq 0 ]] && diff <(echo "$got") "tests/data/bad/$f.skip.expected" >/dev/null; then ok "skip bad records: $f"
    else no "skip bad records: $f (exit $rc)" "$(diff <(echo "$got") "tests/data/bad/$f.skip.expected")"; fi
    plan "$S/fail-$f" $fmt "$S/$f" 64 false fail $stage "$tpl"
    out=$("$TRAIN" prepare "$S/fail-$f/plan.json" 2>&1); rc=$?
    first=$(grep -m1 '(skipped)' "tests/data/bad/$f.skip.expected" | sed 's/ (skipped)$//')
    if [[ $rc -eq 1 && $(sed "s|$S/||g" <<<"$out") == *"$first"* && ! -e $S/fail-$f/shards/index.json ]]; then
        ok "fail on the first bad record: $f"
    else no "fail policy: $f (exit $rc)" "$out"; fi
done

# --check lists every bad record, writes nothing, and says on stdout what it found
plan "$S/check" sharegpt "$S/sharegpt_bad.json" 64 false fail
out=$("$TRAIN" prepare --check "$S/check/plan.json" 2>"$S/check/err"); rc=$?
nbad=$(grep -c ': record [0-9]*: ' "$S/check/err")
kept=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["records_kept"])' "$out" 2>/dev/null)
if [[ $rc -eq 1 && $nbad -eq 11 && $kept == 3 && ! -e $S/check/shards ]]; then ok "--check: 11 bad records listed, nothing written"
else no "--check (exit $rc, $nbad listed, kept $kept)" "$(cat "$S/check/err")"; fi

# alpaca: record 1 is "instruction\ninput" -> output, rendered with the qwen template
row=$("$SHARD" --row "$S/skip-alpaca_bad.jsonl/shards" 0)
got=$(head -n 1 <<<"$row" | "$TRAIN" tokenize --tokenizer examples/tiny/tokenizer --decode)
want=$(printf '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nAdd.\n2 and 3<|im_end|>\n<|im_start|>assistant\n5<|im_end|>')
lab=$(tail -n 1 <<<"$row" | tr ' ' '\n' | grep -c 1)
if [[ $got == "$want" && $lab -eq 3 ]]; then ok "alpaca record rendered (prompt + query, 3 labels)"; else no "alpaca row" "$got / $lab"; fi

# 7. kill -9 in the middle: nothing complete-looking is left; a rerun finishes
python3 - "$S/big.json" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    f.write("[\n")
    for i in range(40000):
        f.write((",\n" if i else "") + json.dumps({"messages": [
            {"role": "user", "content": "What is %d + %d? Think about it carefully, step by step." % (i % 97, i % 89)},
            {"role": "assistant", "content": "The answer is %d." % (i % 97 + i % 89)}]}))
    f.write("\n]\n")
PY
plan "$S/kill" sharegpt "$S/big.json" 128 false fail
"$TRAIN" prepare "$S/kill/plan.json" --threads 2 --shard-tokens 30000 >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 400); do
    compgen -G "$S/kill/shards/shard-*-00002.bin" >/dev/null && break
    sleep 0.02
done
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
if compgen -G "$S/kill/shards/shard-*-00002.bin" >/dev/null && [[ ! -e $S/kill/shards/index.json ]] &&
   ! "$SHARD" --check "$S/kill/shards" >/dev/null 2>&1; then ok "kill -9: shards without index.json, which the reader refuses"
else no "kill -9" "$(ls "$S/kill/shards" 2>&1)"; fi
out=$("$TRAIN" prepare "$S/kill/plan.json" --shard-tokens 30000 2>&1)
chk=$("$SHARD" --check "$S/kill/shards" 2>&1)
if [[ $chk == "rows 40000 docs 40000 "* && -z $(ls "$S/kill/shards" | grep tmp) ]]; then ok "rerun after kill: $chk"
else no "rerun after kill" "$out $chk"; fi

# 8. usage and plan errors
"$TRAIN" prepare >/dev/null 2>&1; rc1=$?
"$TRAIN" prepare /nonexistent/plan.json >/dev/null 2>&1; rc2=$?
plan "$S/nots" sharegpt "$R/examples/tiny/data/arith.json" 64 false fail sft null
out=$("$TRAIN" prepare "$S/nots/plan.json" 2>&1); rc3=$?
if [[ $rc1 -eq 2 && $rc2 -eq 2 && $rc3 -eq 2 && $out == *"needs tokenizer.template"* ]]; then ok "usage and plan errors"
else no "usage/plan errors ($rc1 $rc2 $rc3)" "$out"; fi

echo "prepare_test: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
