#!/bin/bash
# Everything the CUDA backend checks on a GPU machine, in one go (device time is
# short): build, correctness against HF/PyTorch, GPU training of the tiny plan
# against the CPU trainer, data parallelism on two GPUs, benchmark.
#
#   tests/cuda/device.sh OUTDIR [SECTION...]
#     sections: attn check check-variants check-more lora run resume dp ftbench bench torch run7b
#               split split-bench trust   (default: all but run7b, split, split-bench and trust)
#     (check-more: recompute full/selective, optimizer offload, Qwen3, eager attention)
#     attn: cuDNN attention against the flash kernels (build/attn_check), then its timings
#     lora: LoRA against PyTorch + peft (tests/cuda/check_lora.py)
#     trust: compute-sanitizer over a few steps of each path, the same plan twice
#            (same bits?), held-out exact match over 5 seeds (tests/cuda/trust.sh)
#     split: LLMC_MASTER=split (master weights as bf16 + low halves) against HF, through
#            run and resume; split-bench: its memory and speed beside the default
#
# `run` expects .cuda-run/tiny/ (made here by tests/cuda/make_tiny_run.sh: the tiny
# plan compiled and prepared, plus the CPU trainer's metrics for comparison).
# On a machine without OpenBLAS, netlib BLAS unpacked into .deps-cuda/ is used.
# Logs go to OUTDIR; OUTDIR/summary.txt has one line per result.
set -uo pipefail
out=${1:?usage: device.sh OUTDIR [SECTION...]}
shift
sections=${*:-attn check check-variants check-more lora run resume dp bench torch}
has() { [[ " $sections " == *" $1 "* ]]; }
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
note() { echo "$*" | tee -a "$out/summary.txt"; }
: > "$out/summary.txt"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$out/gpu.txt" 2>&1
ngpu=$(nvidia-smi -L | wc -l)
if [[ -d .deps-cuda/usr ]] && ! ldconfig -p | grep -q libopenblas; then
    mkdir -p .deps/usr && cp -a .deps-cuda/usr/. .deps/usr/
fi
# re2c and the Unicode data the build generates from (tests/cuda/fetch_deps.sh)
[[ -d .deps-cuda/bin ]] && ! command -v re2c >/dev/null && export PATH=$PWD/.deps-cuda/bin:$PATH
[[ -f .deps-cuda/ucd/UnicodeData.txt && ! -f /usr/share/unicode/UnicodeData.txt ]] && export UCD_DIR=$PWD/.deps-cuda/ucd
if ! make -s -j8 cuda > "$out/build.log" 2>&1; then note "build FAILED"; tail -40 "$out/build.log"; exit 1; fi
chk() {   # name, args...
    local name=$1; shift
    python3 tests/cuda/check_vs_hf.py --bin build/llmc-train-cuda --work "/tmp/chk_$name" "$@" > "$out/check_$name.log" 2>&1
    note "check $name: $(tail -1 "$out/check_$name.log")"
    grep -h FAIL "$out/check_$name.log" | head -5
    grep -h "loss curve:" "$out/check_$name.log"
}
if has attn; then
    if make -s -j8 attn-check > "$out/attn_build.log" 2>&1; then
        ./build/attn_check > "$out/attn_check.log" 2>&1
        note "attn cuDNN vs flash: $(tail -1 "$out/attn_check.log")"
        grep -h "FAIL\|note:" "$out/attn_check.log" | head -8
        ./build/attn_check --time > "$out/attn_time.log" 2>&1
        cat "$out/attn_time.log" | tee -a "$out/summary.txt"
        for v in cudnn flash; do
            LLMC_ATTN=$v ./build/llmc-train-cuda bench --model qwen2.5-1.5b --batch 4 --seq 2048 --steps 10 --warmup 3 \
                > "$out/attn_bench_$v.json" 2> "$out/attn_bench_$v.log"
            note "bench 1.5b x4 LLMC_ATTN=$v: $(cat "$out/attn_bench_$v.json")"
            tail -2 "$out/attn_bench_$v.log"
        done
    else
        note "attn: build FAILED"; tail -20 "$out/attn_build.log"
    fi
fi
if has check; then
    chk main --steps 200
    cp /tmp/chk_main/curve.tsv "$out/" 2>/dev/null
fi
if has check-variants; then
    chk hd128 --steps 20 --head-dim 128
    chk hd64 --steps 20 --head-dim 64
fi
if has check-more; then
    chk recompute --steps 20 --recompute
    chk selective --steps 20 --selective-recompute
    chk selective_eager --steps 20 --selective-recompute --eager-attention
    chk offload --steps 50 --offload
    chk qwen3 --steps 50 --arch qwen3 --head-dim 64
    chk qwen3_hd128 --steps 20 --arch qwen3 --head-dim 128 --selective-recompute
    chk eager --steps 20 --eager-attention
fi
if has lora; then
    for v in "all --steps 30" "qvd_rslora --steps 30 --targets q_proj,v_proj,down_proj --rank 16 --rslora --head-dim 64" \
             "selective_hd128 --steps 20 --selective-recompute --head-dim 128" "recompute --steps 10 --recompute"; do
        set -- $v; name=$1; shift
        python3 tests/cuda/check_lora.py --bin build/llmc-train-cuda --work "/tmp/lora_$name" "$@" > "$out/lora_$name.log" 2>&1
        note "lora $name: $(tail -1 "$out/lora_$name.log")"
        grep -h "FAIL\|Error\|error" "$out/lora_$name.log" | head -5
        grep -h "loss curve:\|after " "$out/lora_$name.log"
    done
fi
# LLMC_MASTER=split: the same checks as the default master weights pass, then the
# benchmark shapes with and without it (its peak should fall by 2 bytes per
# trained parameter: 2.88 GiB at 1.5B; AdamW moves 28 bytes a parameter, not 30).
if has split; then
    (
        export LLMC_MASTER=split
        chk split_main --steps 200
        chk split_hd128 --steps 20 --head-dim 128
        chk split_selective --steps 20 --selective-recompute
        if [[ -f .cuda-run/tiny/plan-gpu.json ]]; then
            r=.cuda-run/tiny
            bash tests/cuda/resume_check.sh "$out/resume_split" > "$out/resume_split.log" 2>&1
            note "split resume safety: $(tail -1 "$out/resume_split.log")"
            for ft in "" -freeze; do
                rm -rf $r/run-gpu$ft
                ./build/llmc-train-cuda run $r/plan-gpu$ft.json > "$out/run_split$ft.log" 2>&1
                rc=$?
                python3 tests/cuda/compare_runs.py $r/run-cpu$ft/metrics.jsonl $r/run-gpu$ft/metrics.jsonl \
                    > "$out/cmp_split$ft.log" 2>&1
                note "split run tiny$ft: exit $rc ; cpu vs gpu: $(grep -E 'mean|final' "$out/cmp_split$ft.log" | tr '\n' ' ')"
            done
        fi
    )
fi
if has split-bench; then
    for v in "qwen2.5-0.5b 8" "qwen2.5-1.5b 4" "qwen2.5-3b 4"; do
        set -- $v
        for mode in fp32 split; do
            LLMC_MASTER=$mode LLMC_PHASE_TIMES=1 ./build/llmc-train-cuda bench --model $1 --batch $2 --seq 2048 \
                > "$out/split_$1_$mode.json" 2> "$out/split_$1_$mode.log"
            note "master $mode $1 x$2: $(cat "$out/split_$1_$mode.json")"
            grep -h "adamw\|AdamW" "$out/split_$1_$mode.log" | head -2
        done
    done
fi
if has trust && [[ -f .cuda-run/tiny/plan-gpu.json ]]; then
    bash tests/cuda/trust.sh "$out/trust" > "$out/trust.log" 2>&1
    cat "$out/trust/summary.txt" >> "$out/summary.txt"
fi
if has resume && [[ -f .cuda-run/tiny/plan-gpu.json ]]; then
    bash tests/cuda/resume_check.sh "$out/resume" > "$out/resume.log" 2>&1
    note "resume safety: $(tail -1 "$out/resume.log")"
    grep -h FAIL "$out/resume.log" | head -5
fi
# A 7B plan with offload (tests/cuda/make_7b_run.sh): its metrics, GPU memory
# and host RSS against `llmc explain`. The final checkpoint (91 GB of fp32
# weights and moments) does not fit the GPU machine's 64 GB of free disk, so the
# plan's checkpoint directory is replaced by one that cannot be created: the run
# is expected to fail at once after the last step, with the error, exit 1.
if has run7b && [[ -f .cuda-run/q7b/out/plan.json ]]; then
    r=.cuda-run/q7b/out
    rm -rf $r/../run
    # checkpoints into a directory that cannot be created: the failure is immediate
    python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); p["checkpoint"]["dir"]="/proc/llmc-no-disk"; json.dump(p,open(sys.argv[2],"w"))' \
        $r/plan.json $r/plan-nockpt.json
    /usr/bin/time -v ./build/llmc-train-cuda run $r/plan-nockpt.json > "$out/run7b.log" 2> "$out/run7b.err"
    note "run 7b offload: exit $? ; $(grep -h 'training\|step 3/3\|error' "$out/run7b.err" | tail -4 | tr '\n' ' ')"
    note "run 7b host: $(grep -h 'Maximum resident' "$out/run7b.err")"
    cp $r/../run/metrics.jsonl "$out/run7b_metrics.jsonl" 2>/dev/null
    cp $r/../run/gpu_metrics.jsonl "$out/run7b_gpu_metrics.jsonl" 2>/dev/null
fi
if has run && [[ -f .cuda-run/tiny/plan-gpu.json ]]; then
    r=.cuda-run/tiny
    rm -rf $r/run-gpu $r/run-gpu2
    ./build/llmc-train-cuda run $r/plan-gpu.json --stop-after 400 > "$out/run_gpu_a.log" 2>&1
    rc1=$?
    ev=(); [[ -f $r/shards-eval/index.json ]] && ev=(--eval-shards $r/shards-eval)
    ./build/llmc-train-cuda run $r/plan-gpu.json "${ev[@]}" > "$out/run_gpu_b.log" 2>&1
    rc2=$?
    note "run tiny on 1 GPU: stop-after 400 exit $rc1 (want 3), resume exit $rc2, $(wc -l < $r/run-gpu/metrics.jsonl) metric lines, final/: $(ls $r/run-gpu/final | tr '\n' ' ')"
    # the one loop's files: the Prometheus gauges (as the CPU's), result.json with the unigram baseline and eval
    note "gpu llmc_train.prom: $(grep -c '^llmc_train_' $r/run-gpu/llmc_train.prom 2>/dev/null) gauges ($(grep -c '^llmc_train_' $r/run-cpu/llmc_train.prom 2>/dev/null) on the CPU), $(grep -h '^llmc_train_step{' $r/run-gpu/llmc_train.prom 2>/dev/null)"
    note "gpu result.json: $(tr -d ' \n' < $r/run-gpu/result.json 2>/dev/null || echo MISSING)"
    note "cpu result.json: $(tr -d ' \n' < $r/run-cpu/result.json 2>/dev/null || echo MISSING)"
    cp $r/run-gpu/result.json "$out/tiny_gpu_result.json" 2>/dev/null; cp $r/run-gpu/llmc_train.prom "$out/tiny_gpu.prom" 2>/dev/null
    python3 tests/cuda/compare_runs.py $r/run-cpu/metrics.jsonl $r/run-gpu/metrics.jsonl > "$out/cmp_cpu_gpu.log" 2>&1
    note "cpu fp32 vs gpu bf16: $(grep -E 'mean|final' "$out/cmp_cpu_gpu.log" | tr '\n' ' ')"
    cp $r/run-gpu/metrics.jsonl "$out/tiny_gpu_metrics.jsonl"; cp $r/run-gpu/gpu_metrics.jsonl "$out/tiny_gpu_memory.jsonl"
    tail -2 "$out/run_gpu_b.log"
    # fine-tuning through the loop: the CPU trainer's run of the same plan is the reference
    for ft in lora freeze freeze-first; do
        [[ -f $r/plan-gpu-$ft.json ]] || continue
        rm -rf $r/run-gpu-$ft
        ./build/llmc-train-cuda run $r/plan-gpu-$ft.json > "$out/run_gpu_$ft.log" 2>&1
        note "run tiny $ft on 1 GPU: exit $? ; $(grep -h 'training\|trainable' "$out/run_gpu_$ft.log" | head -1 | cut -c1-200)"
        python3 tests/cuda/compare_runs.py $r/run-cpu-$ft/metrics.jsonl $r/run-gpu-$ft/metrics.jsonl \
            > "$out/cmp_cpu_gpu_$ft.log" 2>&1
        note "  cpu vs gpu $ft: $(grep -E 'mean|final|passed' "$out/cmp_cpu_gpu_$ft.log" | tr '\n' ' ')"
        note "  gpu $ft final/: $(ls $r/run-gpu-$ft/final 2>/dev/null | tr '\n' ' ') adapter/: $(ls $r/run-gpu-$ft/adapter 2>/dev/null | tr '\n' ' ')"
        tail -1 "$out/run_gpu_$ft.log"
    done
    if [[ $ngpu -ge 2 ]]; then
        for rk in 0 1; do
            RANK=$rk WORLD_SIZE=2 LOCAL_RANK=$rk MASTER_ADDR=127.0.0.1 MASTER_PORT=29521 \
                ./build/llmc-train-cuda run $r/plan-gpu2.json > "$out/run_gpu2_$rk.log" 2>&1 &
        done
        wait
        python3 tests/cuda/compare_runs.py $r/run-gpu/metrics.jsonl $r/run-gpu2/metrics.jsonl > "$out/cmp_gpu1_gpu2.log" 2>&1
        note "1 GPU vs 2 GPUs (ZeRO-1): $(grep -E 'mean|final|same' "$out/cmp_gpu1_gpu2.log" | tr '\n' ' ')"
        tail -1 "$out/run_gpu2_0.log"
    fi
fi
if has dp && [[ $ngpu -ge 2 ]]; then
    for z in "" "--zero1"; do
        for rk in 0 1; do
            RANK=$rk WORLD_SIZE=2 LOCAL_RANK=$rk MASTER_ADDR=127.0.0.1 MASTER_PORT=29517 \
                ./build/llmc-train-cuda bench --model qwen2.5-0.5b --batch 8 --seq 2048 --steps 10 --warmup 3 $z \
                > "$out/dp${z}_$rk.json" 2> "$out/dp${z}_$rk.log" &
        done
        wait
        note "dp2 $z: $(cat "$out/dp${z}_0.json")"
    done
fi
# LoRA (rank 16 on every linear layer) and full training at the 0.5B-7B shapes: memory and throughput
if has ftbench; then
    for v in "qwen2.5-0.5b 8" "qwen2.5-1.5b 4" "qwen2.5-3b 4" "qwen2.5-7b 4"; do
        set -- $v
        ./build/llmc-train-cuda bench --model $1 --batch $2 --seq 2048 --steps 5 --warmup 2 --lora-rank 16 \
            > "$out/ft_$1.json" 2> "$out/ft_$1.log"
        note "lora r16 $1 x$2: $(cat "$out/ft_$1.json")"
        grep -h "error\|memory" "$out/ft_$1.log" | head -3
    done
    ./build/llmc-train-cuda bench --model qwen2.5-0.5b --batch 8 --seq 2048 --steps 10 --warmup 3 > "$out/full05.json" 2>/dev/null
    note "full 0.5b x8: $(cat "$out/full05.json")"
fi
if has bench; then
    for v in "qwen2.5-1.5b 4 LLMC_GEMM_TUNE=1" "qwen2.5-1.5b 4 --eager-attention" "qwen2.5-0.5b 8 --eager-attention" \
             "qwen2.5-1.5b 4 --recompute"; do
        set -- $v
        if [[ $3 == LLMC_* ]]; then env "$3" ./build/llmc-train-cuda bench --model $1 --batch $2 --seq 2048 > "$out/var.json" 2>/dev/null
        else ./build/llmc-train-cuda bench --model $1 --batch $2 --seq 2048 $3 > "$out/var.json" 2>/dev/null; fi
        note "variant $v: $(cat "$out/var.json")"
    done
    torch=0; has torch && torch=1
    BENCH_TORCH=$torch bash bench/cuda/run.sh "$out/bench" > "$out/bench.txt" 2>&1
    cp "$out/bench/bench.jsonl" "$out/" 2>/dev/null
    tail -8 "$out/bench.txt"
fi
