#!/bin/bash
# prepare_test.sh — `llmc-train prepare` end to end on real files:
# the tiny example, packing, pre-training text, bad records with positions,
# idempotence, thread-count independence, kill -9 in the middle, and loss masking.
#   prepare_test.sh BUILD SCRATCH   (from the repository root)
set -u
BUILD=$1 S=$2
TRAIN=$BUILD/llmc-train SHARD=$BUILD/tests/data/shard_test
R=$(pwd)
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"   # ok, bad, finish (tests/lib.sh)
# the prefix log.h puts on every line: time (UTC, ms) and rank
logp='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z \[[^]]*\] '
no() { fail=$((fail + 1)); echo "FAIL $1"; [[ -n ${2:-} ]] && echo "$2" | tail -n 15; }   # bad with an output, not a file

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
            "observation": "observation", "function": "function_call", "system": "system"},
   "samples": null, "size_bytes": null, "tokens": null}],
 "data": {"context": $context, "packing": $packing, "on_bad_record": "$policy", "shards_dir": "shards"}}
JSON
}

# 1. the tiny example: 9600 rows, row 0 is record 1 rendered with the qwen template.
#    Plans read a copy: prepare writes FILE.stats.json beside its data, and the
#    repository's copy of the example's stats is the example plan's.
A=$S/tiny-arith.json
cp "$R/examples/tiny/data/arith.json" "$A"
plan "$S/tiny" sharegpt "$A" 64 false fail
if out=$("$TRAIN" prepare "$S/tiny/plan.json" 2>&1) && chk=$("$SHARD" --check "$S/tiny/shards" 2>&1) &&
   [[ $chk == "rows 9600 docs 9600 segments 9600 "* ]]; then ok "prepare tiny: $chk"; else no "prepare tiny" "$out $chk"; fi
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["messages"][int(sys.argv[2])]["content"])' "$R/examples/tiny/data/arith.json" "$1"; }
sys=$(field 0) q=$(field 1) a=$(field 2)
want=$(printf '<|im_start|>system\n%s<|im_end|>\n<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n%s<|im_end|>\n' "$sys" "$q" "$a")
row=$("$SHARD" --row "$S/tiny/shards" 0)
got=$(head -n 1 <<<"$row" | "$TRAIN" tokenize --tokenizer examples/tiny/tokenizer --decode)
labels=$(tail -n 1 <<<"$row" | tr ' ' '\n' | grep -c 1)
ans=$(printf '%s<|im_end|>\n' "$a" | "$TRAIN" tokenize --tokenizer examples/tiny/tokenizer | wc -w)
if [[ "$got" == "${want%$'\n'}" && $labels -eq $ans ]]; then ok "row 0 = record 1 in the qwen template, $labels labels"
else no "row 0" "got: $got / labels $labels, answer tokens $ans"; fi

sumok=$(python3 -c 'import json,sys; i=json.load(open(sys.argv[1])); d=i["summary"]["datasets"][0]
print(int(d["tokens"] == i["n_tokens"] and d["label_tokens"] == i["n_label_tokens"] and d["records_kept"] == 9600))' "$S/tiny/shards/index.json")
if [[ $sumok == 1 ]]; then ok "index.json summary: per-dataset records and tokens"; else no "index.json summary"; fi

# 1b. the stats file beside the data (issue 12): records and tokens as packed, the length
#     histogram; `llmc explain` then takes its token counts from it (the llmc trainer computes
#     unpacked rows whole, so its padding is the context, not the histogram's)
stok=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); i=json.load(open(sys.argv[2]))
h=s["length_histogram"]
print(int(s["format"] == "llmc-data-stats" and s["records"] == 9600 and s["tokens"] == i["n_tokens"] and
          h["bin_tokens"] == 16 and sum(h["counts"]) == 9600 and s["context"] == 64 and s["packing"] is False))' \
      "$A.stats.json" "$S/tiny/shards/index.json" 2>&1)
if [[ $stok == 1 ]]; then ok "FILE.stats.json: 9600 records, the tokens of index.json, a histogram of 9600"
else no "stats file" "$stok $(cat "$A.stats.json" 2>&1)"; fi
sed -e "s|\"data/arith.json\"|\"$A\"|" -e "s|\"tokenizer\"$|\"$R/examples/tiny/tokenizer\"|" \
    -e 's/context          = 128/context          = 64/' -e 's/packing          = true/packing          = false/' \
    "$R/examples/tiny/tiny.llm" >"$S/stats.llm"
ex=$("$BUILD/llmc" explain "$S/stats.llm" --color=never 2>&1)
ntok=$(python3 -c 'import json,sys; print("%.1fK" % (json.load(open(sys.argv[1]))["n_tokens"] / 1000))' "$S/tiny/shards/index.json")
if grep -Eq "tokens per epoch +$ntok +prepare stats" <<<"$ex" && [[ $ex == *"pads every record to a row of 64 tokens"* ]]; then
    ok "llmc explain takes tokens per epoch ($ntok) from the stats file, unpacked rows at the context"
else no "explain with stats" "$ex"; fi

# 1c. records over the context (issue 28): counted, said once per dataset with its file and
#     the context, and written to the stats file and index.json, beside the bad records dropped
[[ $out != *"records cut at the context"* ]] && ok "tiny at context 64: nothing cut, nothing said" || no "tiny: a cut reported" "$out"
C=$S/cut.json
python3 - "$C" <<'PY'
import json, sys
short = {"messages": [{"role": "user", "content": "1+1"}, {"role": "assistant", "content": "2"}]}
long_answer = {"messages": [{"role": "user", "content": "1+1"}, {"role": "assistant", "content": "9 " * 200}]}
long_turns = {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b " * 100},
                           {"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}]}
bad = {"messages": [{"role": "user", "content": "no answer"}]}
json.dump([short, long_answer, long_turns, bad, short], open(sys.argv[1], "w"))
PY
plan "$S/cut" sharegpt "$C" 64 false skip
out=$("$TRAIN" prepare "$S/cut/plan.json" 2>&1); rc=$?
said=$(grep -c "records cut at the context" <<<"$out")
if [[ $rc -eq 0 && $said -eq 1 ]] &&
   grep -Eq "${logp}warning: dataset d \($C\): 2 of 4 records cut at the context of 64 tokens, 1 dropped as bad records$" <<<"$out"; then
    ok "2 records cut at the context, 1 dropped: said once, with the file and the context"
else no "records cut at the context (exit $rc, said $said times)" "$out"; fi
cutok=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); d=json.load(open(sys.argv[2]))["summary"]["datasets"][0]
print(int(s["records_cut"] == 2 and s["records_cut_untrained"] == 0 and s["records_skipped"] == 1 and s["records"] == 4 and
          d["records_cut"] == 2 and d["records_cut_untrained"] == 0 and d["records_skipped"] == 1))' "$C.stats.json" "$S/cut/shards/index.json" 2>&1)
[[ $cutok == 1 ]] && ok "records_cut in FILE.stats.json and index.json" || no "records_cut written" "$cutok $(cat "$C.stats.json")"
out=$("$TRAIN" prepare --check "$S/cut/plan.json" 2>&1)
[[ $(grep -c "2 of 4 records cut at the context of 64 tokens" <<<"$out") -eq 1 ]] && ok "prepare --check says the cut too" ||
    no "prepare --check: no cut count" "$out"

# 1d. a file-size limit (ulimit -f) reached while a shard is written: a message naming the
#     file and exit 1 (the job script's failure, not a requeue), not death by SIGXFSZ; the
#     live set stays whole
out=$(ulimit -f 50; exec "$TRAIN" prepare --force "$S/tiny/plan.json" 2>&1); rc=$?
chk=$("$SHARD" --check "$S/tiny/shards" 2>&1)
if [[ $rc -eq 1 ]] && grep -Eq "${logp}error: .*/shard-[0-9a-f]+-00000\.bin\.tmp: write: File too large$" <<<"$out" &&
   [[ $chk == "rows 9600 docs 9600 segments 9600 "* ]]; then ok "ulimit -f reached: 'File too large' naming the shard, exit 1, the live set whole"
else no "prepare under ulimit -f (exit $rc)" "$out $chk"; fi

# 2. idempotent: a second run does nothing; a changed input file is prepared again
before=$(stat -c %Y.%s "$S"/tiny/shards/shard-*-00000.bin)
out=$("$TRAIN" prepare "$S/tiny/plan.json" 2>&1)
if [[ $out == *"up to date"* && $(stat -c %Y.%s "$S"/tiny/shards/shard-*-00000.bin) == "$before" ]]; then ok "second run: up to date"
else no "idempotence" "$out"; fi
cp "$R/examples/tiny/data/arith.json" "$S/arith.json"
plan "$S/tiny2" sharegpt "$S/arith.json" 64 false fail
"$TRAIN" prepare "$S/tiny2/plan.json" >/dev/null 2>&1
# the data hash follows content (docs/shards.md): a touch, the same bytes under a new
# mtime, and a dataset's descriptive counts leave the shards up to date; one byte changed
# prepares again. The digests are cached under path, size and mtime.
index_before=$(cat "$S/tiny2/shards/index.json")
touch -d '2001-01-01' "$S/arith.json"
out=$("$TRAIN" prepare "$S/tiny2/plan.json" 2>&1)
if [[ $out == *"up to date"* && $(cat "$S/tiny2/shards/index.json") == "$index_before" ]] \
   && python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); sys.exit(0 if any(e["file"].endswith("/arith.json") and e["mtime_s"] == 978307200 for e in c["files"]) else 1)' "$S/tiny2/shards/content-cache.json"
then ok "touched input (same bytes): up to date, the new mtime cached with its digest"; else no "touched input" "$out"; fi
python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); d=p["datasets"][0]; d.update(samples=9600, size_bytes=123, tokens=5, name="renamed"); json.dump(p,open(sys.argv[1],"w"))' "$S/tiny2/plan.json"
out=$("$TRAIN" prepare "$S/tiny2/plan.json" 2>&1)
if [[ $out == *"up to date"* ]]; then ok "samples, size, tokens and name of a dataset changed: up to date"; else no "descriptive counts" "$out"; fi
# a cached digest is trusted while path, size and mtime stay: the same-size edit below,
# its mtime put back, is not seen (mtime is the cache key); with a new mtime it is
sed -i '0,/Compute\./s//Compute!/' "$S/arith.json"
touch -d '2001-01-01' "$S/arith.json"
out=$("$TRAIN" prepare "$S/tiny2/plan.json" 2>&1)
if [[ $out == *"up to date"* ]]; then ok "content cache: a file with its cached size and mtime is not read again"; else no "content cache hit" "$out"; fi
hash_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["data_hash"])' "$S/tiny2/shards/index.json"; }
h0=$(hash_of)
out=$("$TRAIN" prepare "$S/tiny2/plan.json" --force 2>&1)
if [[ $out == *"9600 records kept"* && $(hash_of) != "$h0" ]]; then ok "--force: every input read again, the edit seen (a new data hash)"
else no "--force rereads" "$out"; fi
sed -i '0,/Compute!/s//Compute./' "$S/arith.json"   # the first bytes back, under a new mtime
out=$("$TRAIN" prepare "$S/tiny2/plan.json" 2>&1)
if [[ $out != *"up to date"* && $out == *"9600 records kept"* && $(hash_of) == "$h0" ]]; then ok "changed input (one byte): prepared again, the same bytes the same hash"
else no "changed input" "$out"; fi

# 3. the same bytes whatever the thread count (several shards)
plan "$S/t1" sharegpt "$A" 128 true fail
plan "$S/t3" sharegpt "$A" 128 true fail
"$TRAIN" prepare "$S/t1/plan.json" --threads 1 --shard-tokens 20000 >/dev/null 2>&1
"$TRAIN" prepare "$S/t3/plan.json" --threads 3 --shard-tokens 20000 >/dev/null 2>&1
n=$(ls "$S/t1/shards" | grep -c '^shard-')
if [[ $n -gt 3 ]] && diff -r "$S/t1/shards" "$S/t3/shards" >/dev/null; then ok "threads 1 and 3: identical $n shards"
else no "thread independence" "$(ls "$S/t1/shards" "$S/t3/shards")"; fi

# 4. packing: several documents per row, positions restart, every record kept
chk=$("$SHARD" --check "$S/t1/shards" 2>&1)
rows=$(awk '{print $2}' <<<"$chk") segs=$(awk '{print $6}' <<<"$chk")
if [[ $? -eq 0 && $segs -eq 9600 && $rows -lt 4800 ]]; then ok "packing: $chk"; else no "packing" "$chk"; fi

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
    # log.h's prefix (time, rank) is dropped, and the progress lines with it
    got=$(sed -E "s|$S/||g; s/$logp//" <<<"$out" | grep -v '^[0-9]* records (')
    if [[ $rc -eq 0 ]] && diff <(echo "$got") "tests/data/bad/$f.skip.expected" >/dev/null; then ok "skip bad records: $f"
    else no "skip bad records: $f (exit $rc)" "$(diff <(echo "$got") "tests/data/bad/$f.skip.expected")"; fi
    plan "$S/fail-$f" $fmt "$S/$f" 64 false fail $stage "$tpl"
    out=$("$TRAIN" prepare "$S/fail-$f/plan.json" 2>&1); rc=$?
    first=$(grep -m1 '(skipped)' "tests/data/bad/$f.skip.expected" | sed 's/^warning: //; s/ (skipped)$//')
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

# 7b. a stop signal (USR2, TERM) finishes the shard being written, records it in progress.json and
#     exits 3; the next prepare keeps those shards untouched and continues where the last one cut
#     the stream: the result is byte for byte an uninterrupted prepare's (packed sft and streamed pt)
plan "$S/ref" sharegpt "$S/big.json" 128 true fail
"$TRAIN" prepare "$S/ref/plan.json" --shard-tokens 30000 >/dev/null 2>&1
stop_resume() {   # stop_resume NAME SIGNAL SHARD_TOKENS REF
    local d=$S/$1 sig=$2 st=$3 ref=$4 pid rc out
    "$TRAIN" prepare "$d/plan.json" --threads 1 --shard-tokens "$st" >"$d.err" 2>&1 &
    pid=$!
    for _ in $(seq 1 1000); do compgen -G "$d/shards/shard-*-00002.bin" >/dev/null && break; sleep 0.005; done
    kill -"$sig" $pid; wait $pid; rc=$?
    [[ $rc -eq 3 && -e $d/shards/progress.json && ! -e $d/shards/index.json ]] || { echo "exit $rc"; cat "$d.err"; return 1; }
    grep -q "stop signal $sig: [0-9]* shards written" "$d.err" || { cat "$d.err"; return 1; }
    stat -c '%i %Y.%y %n' "$d"/shards/shard-*.bin > "$d.before"
    out=$("$TRAIN" prepare "$d/plan.json" --threads 2 --shard-tokens "$st" 2>&1) || { echo "$out"; return 1; }
    [[ $out == *"resuming: "*" shards of an interrupted prepare kept"* ]] || { echo "$out"; return 1; }
    stat -c '%i %Y.%y %n' $(awk '{print $NF}' "$d.before") | diff - "$d.before" || { echo "finished shards rewritten"; return 1; }
    [[ ! -e $d/shards/progress.json ]] || { echo "journal left behind"; return 1; }
    diff -r "$ref/shards" "$d/shards" || { echo "differs from an uninterrupted prepare"; return 1; }
}
plan "$S/stop" sharegpt "$S/big.json" 128 true fail
if out=$(stop_resume stop USR2 30000 "$S/ref"); then ok "USR2 during prepare: exit 3, then resumed without redoing finished shards, same bytes"
else no "USR2 during prepare" "$out"; fi
rm -rf "$S/stop/shards"
if out=$(stop_resume stop TERM 30000 "$S/ref"); then ok "TERM during prepare: the same"; else no "TERM during prepare" "$out"; fi
for i in $(seq 1 3000); do echo "{\"text\": \"Document $i says hello to the number $((i * 37)) and then goes on about things $i times, with words enough to be cut across rows.\"}"; done > "$S/long.jsonl"
plan "$S/ptref" text "$S/long.jsonl" 128 true fail pt null
plan "$S/ptstop" text "$S/long.jsonl" 128 true fail pt null
"$TRAIN" prepare "$S/ptref/plan.json" --shard-tokens 3000 >/dev/null 2>&1
if out=$(stop_resume ptstop USR2 3000 "$S/ptref"); then ok "USR2 during a streamed pt prepare: resumed inside the cut document, same bytes"
else no "USR2 during pt prepare" "$out"; fi
# --force starts over: the journal and its shards go
rm -rf "$S/stop/shards"
"$TRAIN" prepare "$S/stop/plan.json" --threads 1 --shard-tokens 30000 >/dev/null 2>&1 & pid=$!
for _ in $(seq 1 1000); do compgen -G "$S/stop/shards/shard-*-00002.bin" >/dev/null && break; sleep 0.005; done
kill -USR2 $pid; wait $pid
out=$("$TRAIN" prepare "$S/stop/plan.json" --force --shard-tokens 30000 2>&1)
if [[ $out != *resuming* && ! -e $S/stop/shards/progress.json ]] && diff -r "$S/ref/shards" "$S/stop/shards" >/dev/null; then
    ok "--force after a stop: starts over, no journal left"
else no "--force after a stop" "$out"; fi

# 8. usage and plan errors
"$TRAIN" prepare >/dev/null 2>&1; rc1=$?
"$TRAIN" prepare /nonexistent/plan.json >/dev/null 2>&1; rc2=$?
plan "$S/nots" sharegpt "$A" 64 false fail sft null
out=$("$TRAIN" prepare "$S/nots/plan.json" 2>&1); rc3=$?
if [[ $rc1 -eq 2 && $rc2 -eq 2 && $rc3 -eq 2 && $out == *"needs tokenizer.template"* ]]; then ok "usage and plan errors"
else no "usage/plan errors ($rc1 $rc2 $rc3)" "$out"; fi

# 9. a failed re-prepare keeps the previous good set: the same index.json, every shard it names
#    intact, nothing of the new set left behind; so does a re-prepare killed in the middle
cp "$R/examples/tiny/data/arith.json" "$S/keep.json"
plan "$S/keep" sharegpt "$S/keep.json" 64 false fail
"$TRAIN" prepare "$S/keep/plan.json" >/dev/null 2>&1
cp "$S/keep/shards/index.json" "$S/keep-index.json"
files=$(ls "$S/keep/shards")
cp tests/data/bad/sharegpt_bad.json "$S/keep.json"
out=$("$TRAIN" prepare "$S/keep/plan.json" 2>&1); rc=$?
chk=$("$SHARD" --check "$S/keep/shards" 2>&1)
if [[ $rc -eq 1 && $chk == "rows 9600 docs 9600 "* ]] && cmp -s "$S/keep-index.json" "$S/keep/shards/index.json" &&
   [[ $(ls "$S/keep/shards") == "$files" ]]; then ok "failed re-prepare: the previous set is kept whole"
else no "failed re-prepare (exit $rc)" "$out $chk $(ls "$S/keep/shards")"; fi
cp "$S/kill/shards/index.json" "$S/kill-index.json"
"$TRAIN" prepare "$S/kill/plan.json" --force --threads 2 --shard-tokens 20000 >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 400); do
    [[ $(ls "$S/kill/shards" | grep -c '^shard-') -gt $(($(grep -o '"file"' "$S/kill-index.json" | wc -l) + 3)) ]] && break
    sleep 0.02
done
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
chk=$("$SHARD" --check "$S/kill/shards" 2>&1)
if [[ $chk == "rows 40000 docs 40000 "* ]] && cmp -s "$S/kill-index.json" "$S/kill/shards/index.json"; then
    ok "re-prepare killed with -9: the previous set still reads whole"
else no "killed re-prepare" "$chk"; fi
out=$("$TRAIN" prepare "$S/kill/plan.json" --force --shard-tokens 20000 2>&1)
names=$(python3 -c 'import json,sys; print(" ".join(sorted(s["file"] for s in json.load(open(sys.argv[1]))["shards"])))' "$S/kill/shards/index.json")
have=$(ls "$S/kill/shards" | grep '^shard-' | tr '\n' ' ')
if [[ "$names " == "$have" ]] && "$SHARD" --check "$S/kill/shards" >/dev/null 2>&1; then ok "next prepare: only the new set's shards remain"
else no "files after the switch" "names: $names / have: $have"; fi

# 10. three concurrent prepares of one plan (a Slurm job array): all succeed, one set, no leftovers
conc() {
    local force=$1 i pids=() rc=0
    for i in 1 2 3; do "$TRAIN" prepare "$S/kill/plan.json" $force --shard-tokens 30000 >"$S/conc.$i" 2>&1 & pids+=($!); done
    for i in 0 1 2; do wait ${pids[$i]} || rc=1; done
    [[ $rc -eq 0 ]] || { cat "$S"/conc.*; return 1; }
    "$SHARD" --check "$S/kill/shards" | grep -q '^rows 40000 docs 40000 ' || return 1
    [[ -z $(ls "$S/kill/shards" | grep tmp) ]] || return 1
    names=$(python3 -c 'import json,sys; print(" ".join(sorted(s["file"] for s in json.load(open(sys.argv[1]))["shards"])))' "$S/kill/shards/index.json")
    [[ "$names " == "$(ls "$S/kill/shards" | grep '^shard-' | tr '\n' ' ')" ]] || { echo "stray shards"; return 1; }
}
if conc --force && grep -q "waiting for it to finish" "$S"/conc.* && grep -q "pid [0-9]* on " "$S"/conc.*; then
    ok "3 concurrent prepares --force: one after another, one valid set"
else no "concurrent prepares --force" "$(cat "$S"/conc.*)"; fi
rm "$S/kill/shards/index.json"   # (a touch no longer prepares again: the data hash follows content)
if conc "" && [[ $(grep -l "up to date" "$S"/conc.* | wc -l) -eq 2 ]]; then ok "3 concurrent prepares: one prepares, two find it up to date"
else no "concurrent prepares" "$(cat "$S"/conc.*)"; fi

# 10b. nothing usable: every record skipped; the error names the file and the count read
printf '[{"messages": []}, {"messages": [{"role": "user", "content": "only a question"}]}]\n' >"$S/none.json"
plan "$S/none" sharegpt "$S/none.json" 64 false skip
out=$("$TRAIN" prepare "$S/none/plan.json" 2>&1); rc=$?
if [[ $rc -eq 1 && $out == *"no usable records in the plan's datasets ($S/none.json): 2 read, none kept"* ]]; then ok "no usable records: the file named"
else no "no usable records (exit $rc)" "$out"; fi

# 11. only regular files: a dataset or tokenizer that is a device, a FIFO or a directory is refused at once
# (named .json: a plan's dataset file must be .json or .jsonl before its type is looked at)
mkfifo "$S/fifo.json"
mkdir -p "$S/adir.json/tokenizer.json"   # as a tokenizer: DIR/tokenizer.json is a directory
ln -s /dev/zero "$S/zero.json"
nonreg() {
    local f=$1 kind=$2 out rc
    plan "$S/nonreg" sharegpt "$f" 64 false skip
    out=$(timeout 20 "$TRAIN" prepare "$S/nonreg/plan.json" 2>&1); rc=$?
    [[ $rc -eq 2 && $out == *"$f: the dataset is $kind; it must be a regular file"* ]] || { echo "exit $rc: $out"; return 1; }
    sed -i "s|\"path\": \"[^\"]*\"|\"path\": \"$f\"|" "$S/nonreg/plan.json"
    sed -i "s|\"file\": \"[^\"]*\"|\"file\": \"$A\"|" "$S/nonreg/plan.json"
    out=$(timeout 20 "$TRAIN" prepare "$S/nonreg/plan.json" 2>&1); rc=$?
    [[ $rc -eq 2 && $out == *"$f"*"$kind"* ]] || { echo "tokenizer: exit $rc: $out"; return 1; }
}
check_nonreg() { if nonreg "$@"; then ok "refused: $2 ($1)"; else no "not refused: $2 ($1)" "$(nonreg "$@")"; fi; }
check_nonreg "$S/zero.json" "a character device"
check_nonreg "$S/fifo.json" "a FIFO (named pipe)"
check_nonreg "$S/adir.json" "a directory"
out=$(timeout 20 "$TRAIN" prepare "$S/fifo.json" 2>&1); rc=$?
if [[ $rc -eq 2 && $out == *"fifo.json: the plan file is a FIFO"* ]]; then ok "refused: a FIFO as the plan"; else no "FIFO plan (exit $rc)" "$out"; fi

# 12. memory bounded by what is kept: a 300 MB one-line record is refused as too large, read
#     in constant memory, with its position; a 12 MB record cut to 128 tokens costs far less than 1 GB
python3 - "$S/huge.jsonl" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write('{"text": "one small document"}\n{"text": "')
    chunk = "hello world " * 100000
    for _ in range(250): f.write(chunk)
    f.write('"}\n{"text": "another small one"}\n')
PY
plan "$S/huge" text "$S/huge.jsonl" 128 false skip pt null
rss_max=150000   # KiB; AddressSanitizer's shadow memory and quarantine take more
[[ $BUILD == *san* ]] && rss_max=400000
out=$(/usr/bin/time -f 'maxrss %M' timeout 120 "$TRAIN" prepare "$S/huge/plan.json" 2>&1); rc=$?
rss=$(grep -o 'maxrss [0-9]*' <<<"$out" | grep -o '[0-9]*')
if [[ $rc -eq 0 && $out == *"huge.jsonl:2:1: record 2: too large"* && $out == *"2 records kept, 1 skipped (too_large 1)"* &&
      ${rss:-999999999} -lt $rss_max ]]; then ok "300 MB record: skipped as too large, peak RSS $((rss / 1024)) MiB"
else no "300 MB record (exit $rc, rss ${rss:-?} KiB)" "$out"; fi
plan "$S/hugef" text "$S/huge.jsonl" 128 false fail pt null
out=$(timeout 120 "$TRAIN" prepare "$S/hugef/plan.json" 2>&1); rc=$?
if [[ $rc -eq 1 && $out == *"record 2: too large"*"--max-record-bytes raises the limit"* ]]; then ok "too large with on_bad_record fail: stops, names the record"
else no "too large, fail (exit $rc)" "$out"; fi
python3 - "$S/mid.jsonl" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write('{"text": "' + "hello world " * 1000000 + '"}\n')
PY
plan "$S/mid" text "$S/mid.jsonl" 128 false fail pt null
out=$(/usr/bin/time -f 'maxrss %M' timeout 120 "$TRAIN" prepare "$S/mid/plan.json" 2>&1); rc=$?
rss=$(grep -o 'maxrss [0-9]*' <<<"$out" | grep -o '[0-9]*')
chk=$("$SHARD" --check "$S/mid/shards" 2>&1)
if [[ $rc -eq 0 && $chk == "rows 1 docs 1 segments 1 tokens 128 "* && ${rss:-999999999} -lt $rss_max ]]; then
    ok "12 MB record cut to 128 tokens: peak RSS $((rss / 1024)) MiB"
else no "12 MB record (exit $rc, rss ${rss:-?} KiB)" "$out $chk"; fi
out=$("$TRAIN" prepare "$S/mid/plan.json" --force --max-record-bytes 1048576 2>&1); rc=$?
if [[ $rc -eq 1 && $out == *"more than 1048576 bytes"* ]]; then ok "--max-record-bytes lowers the limit"; else no "--max-record-bytes (exit $rc)" "$out"; fi

# 13. control characters from the data are escaped in messages (a role name with an escape sequence)
printf '%s\n' '{"messages": [{"role": "\u001b[2J\u001b]0;pwned\u0007", "content": "hi"}, {"role": "assistant", "content": "x"}]}' \
    '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}]}' > "$S/esc.jsonl"
plan "$S/esc" sharegpt "$S/esc.jsonl" 64 false skip
out=$("$TRAIN" prepare "$S/esc/plan.json" 2>&1)
if [[ $out == *"unknown role '\\e[2J\\e]0;pwned\\x07'"* && $out != *$'\e'* && $out != *$'\a'* ]]; then ok "control characters escaped in messages"
else no "escaping" "$(cat -v <<<"$out")"; fi

# 14. hostile records: NUL bytes, broken UTF-8, deep nesting, huge numbers; 10^6 bad lines print 10 and a count
python3 - "$S/hostile.jsonl" <<'PY'
import sys
w = open(sys.argv[1], "wb").write
w(b'{"text": "ok one"}\n{"text": "nul \x00 inside"}\n\x00\x00\n{"text": "cut \xe4\xb8"}\n{"text": "bad \xff\xfe \xc0\xaf"}\n')
w(b"[" * 100000 + b"\n" + b'{"text": 1e999999}\n{"text": ' + b"9" * 100000 + b'}\n{"text": "\\udfff \\ud800x"}\n{"text": "last"}')
w(b"\nx" * 1000000 + b"\n")
PY
plan "$S/hostile" text "$S/hostile.jsonl" 32 false skip pt null
out=$(timeout 60 "$TRAIN" prepare "$S/hostile/plan.json" 2>&1); rc=$?
shown=$(grep -c '(skipped)$' <<<"$out")
if [[ $rc -eq 0 && $shown -eq 10 && $out == *"999995 more bad records not listed"* && $out == *"5 records kept, 1000005 skipped"* &&
      $(wc -l <<<"$out") -lt 20 ]]; then ok "hostile records: 5 kept, 10 shown, the rest counted"
else no "hostile records (exit $rc, $shown shown)" "$(head -c 3000 <<<"$out")"; fi

# 15. loss masking (data.train_on_prompt, data.mask_history) on 3-turn conversations
#     within the context: the same ids; by default the three answers are
#     trained, with train_on_prompt every token, with mask_history the last
#     answer only; a plan asking both, or either with pt, is refused
python3 - "$S/turns.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(20):
        turns = []
        for t in range(3):
            turns += [{"role": "user", "content": f"what is {i} + {t}?"},
                      {"role": "assistant", "content": f"{i} + {t} = {i + t}"}]
        f.write(json.dumps({"messages": turns}) + "\n")
PY
masked_plan() {  # DIR KEYS...: the 3-turn plan with "KEY": true for each KEY
    plan "$1" sharegpt "$S/turns.jsonl" 256 false fail
    local k
    for k in "${@:2}"; do sed -i "s/\"on_bad_record\"/\"$k\": true, \"on_bad_record\"/" "$1/plan.json"; done
}
masked_plan "$S/mask-none"
masked_plan "$S/mask-prompt" train_on_prompt
masked_plan "$S/mask-history" mask_history
rows=()
for m in none prompt history; do
    out=$("$TRAIN" prepare "$S/mask-$m/plan.json" 2>&1) || no "prepare mask-$m" "$out"
    rows+=("$("$SHARD" --row "$S/mask-$m/shards" 0)")
done
ids0=$(head -n 1 <<<"${rows[0]}")
labels() { tail -n 1 <<<"$1" | tr ' ' '\n' | grep -c 1; }
nids=$(wc -w <<<"$ids0")
answer() { printf '%s<|im_end|>\n' "$1" | "$TRAIN" tokenize --tokenizer examples/tiny/tokenizer | wc -w; }
a0=$(answer "0 + 0 = 0") a1=$(answer "0 + 1 = 1") a2=$(answer "0 + 2 = 2")
l0=$(labels "${rows[0]}") lp=$(labels "${rows[1]}") lh=$(labels "${rows[2]}")
last=$(tail -n 1 <<<"${rows[2]}" | tr ' ' '\n' | grep -n 1 | head -n 1 | cut -d: -f1)

if [[ $(head -n 1 <<<"${rows[1]}") == "$ids0" && $(head -n 1 <<<"${rows[2]}") == "$ids0" &&
      $l0 -eq $((a0 + a1 + a2)) && $lh -eq $a2 && $last -eq $((nids - a2 + 1)) ]]; then
    ok "mask_history: the same ids, only the last answer trained ($lh of $l0 labels)"
else no "mask_history" "labels default $l0 (answers $a0 $a1 $a2), mask_history $lh from token $last of $nids"; fi
lbl_tok=$(python3 -c 'import json,sys; i=json.load(open(sys.argv[1])); print(i["n_label_tokens"], i["n_tokens"])' "$S/mask-prompt/shards/index.json")
# a row's labels are its next tokens: the first token of a document is nobody's label
if [[ $lp -eq $((nids - 1)) && ${lbl_tok% *} -eq $((${lbl_tok#* } - 20)) ]]; then ok "train_on_prompt: every token trained ($lp)"
else no "train_on_prompt" "labels $lp of $nids; index.json labels/tokens $lbl_tok"; fi
# the round trip: a plan saying mask_history = true, compiled by llmc, gives plan.json's
# data.mask_history and the same rows as the hand-written plan
sed -e "s|\"data/arith.json\"|\"$S/turns.jsonl\"|" -e "s|\"tokenizer\"$|\"$R/examples/tiny/tokenizer\"|" \
    -e 's/context          = 128/context          = 256/' -e 's|"../../out/tiny-run"|"out"|' \
    -e 's/packing          = true/packing          = false\n  mask_history     = true/' "$R/examples/tiny/tiny.llm" >"$S/masked.llm"
out=$("$BUILD/llmc" "$S/masked.llm" -o "$S/masked" 2>&1) &&
    out=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["data"]; assert d["mask_history"] is True and d["train_on_prompt"] is False' \
          "$S/masked/plan.json" 2>&1) && out=$("$TRAIN" prepare "$S/masked/plan.json" 2>&1)
if [[ $? -eq 0 && -n ${rows[2]} && $("$SHARD" --row "$S/masked/shards" 0) == "${rows[2]}" ]]; then
    ok "mask_history = true through llmc, plan.json and prepare: the rows of the hand-written plan"
else no "mask_history round trip" "$out"; fi
masked_plan "$S/mask-both" train_on_prompt mask_history
out=$("$TRAIN" prepare "$S/mask-both/plan.json" 2>&1); rc=$?
plan "$S/mask-pt" text "$S/turns.jsonl" 32 true fail pt null
sed -i 's/"on_bad_record"/"mask_history": true, "on_bad_record"/' "$S/mask-pt/plan.json"
out2=$("$TRAIN" prepare "$S/mask-pt/plan.json" 2>&1); rc2=$?
sed -i 's/"mask_history": true/"mask_history": "yes"/' "$S/mask-pt/plan.json"
out3=$("$TRAIN" prepare "$S/mask-pt/plan.json" 2>&1); rc3=$?
if [[ $rc -ne 0 && $out == *"data.mask_history: cannot be true together with data.train_on_prompt"* && ! -e $S/mask-both/shards &&
      $rc2 -ne 0 && $out2 == *'data.mask_history: is only for stage "sft", not "pt"'* &&
      $rc3 -ne 0 && $out3 == *"data.mask_history: expected true or false"* ]]; then
    ok "masking refused: both switches, with pt, not a bool"
else no "masking refused (exit $rc, $rc2, $rc3)" "$out / $out2 / $out3"; fi

finish prepare_test
