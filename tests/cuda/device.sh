#!/bin/bash
# Everything the CUDA backend checks on a GPU machine, in one go (device time is
# short): build, correctness against HF/PyTorch, GPU training of the tiny plan
# against the CPU trainer, data parallelism on two GPUs, benchmark.
#
#   tests/cuda/device.sh OUTDIR [SECTION...]
#     sections: attn check check-variants check-more lora run resume dp ftbench bench torch run7b
#               split split-bench trust host2 zero fp8 fp8-san fp8-bench llmq1k gemm-choices converge zero-scale
#               gemm-sm90 swiglu-sm90 wgrad-side power-probe
#               (default: all but run7b, split, split-bench, trust, host2, zero, fp8, fp8-san, fp8-bench, llmq1k,
#               gemm-choices, converge, zero-scale, gemm-sm90, swiglu-sm90, wgrad-side,
#               power-probe)
#     (check-more: recompute full/selective, optimizer offload, Qwen3, eager attention)
#     attn: cuDNN attention against the flash kernels (build/attn_check), then its timings
#     lora: LoRA against PyTorch + peft (tests/cuda/check_lora.py)
#     trust: compute-sanitizer over a few steps of each path, the same plan twice
#            (same bits?), held-out exact match over 5 seeds (tests/cuda/trust.sh)
#     host2: 1, 2 and 4 ranks of the tiny plan (ZeRO-1) sharing one GPU over the host
#            transport (LLMC_TRANSPORT=host), against each other and against 1 rank
#     zero: ZeRO-1/2/3 (with and without optimizer offload, full and LoRA) on 1, 2 and 4
#           ranks sharing one GPU over the host transport, against 1 rank (the tiny plan,
#           the kill test, then the same grid for 50 steps of the Qwen2.5-0.5B shape;
#           ZERO_ONLY="CASE ...": only those several-rank 0.5B cases and their references)
#     split: master weights as bf16 + low halves (--master-weights split, the plan's
#            train.master_weights) against HF; split-bench: its memory and speed beside the default
#     fp8: precision = fp8 (tests/cuda/fp8_check.c: quantisation and FP8 GEMMs against fp64;
#          check_vs_hf --fp8 with FP8's tolerances) and bf16 optimizer states against HF;
#     llmq1k: issue 31's Done-when run (bench/cuda/run.sh at llmq's T = 1024 shapes, bf16 and
#          FP8 columns with tuned GEMM choices; about 8 minutes on an H200; LLMQ1K_ROWS:
#          some of its rows, e.g. "1.5b-llmq1k 3b-llmq1k"; nvidia-smi dmon beside it, summarised
#          by bench/cuda/power_summary.py: the power and SM clock while the rows ran)
#     fp8-san: compute-sanitizer memcheck, racecheck, initcheck over fp8_check's kernel sections
#          (FP8SAN_TIMEOUT seconds a tool, default 300; under 50 s each on an H100)
#     fp8-bench: llmq's shapes at T = 1024 (bf16 GEMMs vs FP8, both with split master
#          weights and bf16 moments), phase times of the 0.5B FP8 step
#     gemm-sm90: runtime/cuda/gemm_sm90.cu's bf16 products against cuBLASLt and fp64
#          (tests/cuda/gemm_sm90_check.c), then both timed at the 12 projection GEMMs of
#          GEMM_SM90_MODELS (default 3b,1.5b,7b; llmq1k micro batches), the 3B ones sustained
#          for 15 s (at the power limit; cuBLASLt also with the weight gradients accumulated
#          into bf16, as llmq keeps them), then memcheck, racecheck, initcheck
#     swiglu-sm90: LLMC_SWIGLU_SM90=1 (SwiGLU in gemm_sm90's epilogues) in the trainer:
#          check_vs_hf with it, then bench and phase times of SWIGLU_ROWS ("model batch accum",
#          comma-separated; default the 1.5B and 3B shapes that fit an H100) without and with it
#     power-probe: bench/cuda/power_probe.py (PROBE_SECONDS a workload, default 4): is the card
#          at its power limit under a bf16 GEMM, and how far below it under a memory-bound kernel?
#     wgrad-side: LLMC_WGRAD_SMS (the weight gradients on a side stream) in the trainer:
#          check_vs_hf and the 0.5B-layer plan twice (same bits?) with it, then bench of
#          WGRAD_ROWS (default as swiglu-sm90's) for each of WGRAD_SMS (off 0 116 100, twice)
#     gemm-choices: llmq's shapes in FP8, GEMM choices tuned once into a file, then run from it
#     zero-scale: 2+ GPUs, NCCL: ZeRO-1/2/3 (+ offload) throughput on 1, 2, 4, ... GPUs
#     converge: the 0.5B shape from scratch on real text, 2,000 steps, FP8 and bf16 states
#          against bf16 (tests/cuda/fp8_converge.sh; needs .cuda-run/converge prepared here)
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
# --master-weights split: the same checks as the default master weights pass, then the
# benchmark shapes with and without it (its peak should fall by 2 bytes per
# trained parameter: 2.88 GiB at 1.5B; AdamW moves 28 bytes a parameter, not 30).
if has split; then
    (
        chk split_main --steps 200 --master-weights split
        chk split_hd128 --steps 20 --head-dim 128 --master-weights split
        chk split_selective --steps 20 --selective-recompute --master-weights split
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
            LLMC_PHASE_TIMES=1 ./build/llmc-train-cuda bench --model $1 --batch $2 --seq 2048 --master-weights $mode \
                > "$out/split_$1_$mode.json" 2> "$out/split_$1_$mode.log"
            note "master $mode $1 x$2: $(cat "$out/split_$1_$mode.json")"
            grep -h "adamw\|AdamW" "$out/split_$1_$mode.log" | head -2
        done
    done
fi
if has fp8; then
    if make -s -j8 fp8-check > "$out/fp8_build.log" 2>&1; then
        ./build/fp8_check > "$out/fp8_check.log" 2>&1
        note "fp8 kernels and GEMMs: $(tail -1 "$out/fp8_check.log")"
        grep -h FAIL "$out/fp8_check.log" | head -8
    else
        note "fp8: build FAILED"; tail -20 "$out/fp8_build.log"
    fi
    chk fp8_main --steps 200 --fp8
    chk fp8_selective --steps 20 --fp8 --selective-recompute
    chk fp8_recompute --steps 20 --fp8 --recompute
    chk fp8_qwen3 --steps 20 --fp8 --arch qwen3 --head-dim 64
    chk states_bf16 --steps 200 --optimizer-states bf16
    chk split_states_bf16 --steps 50 --master-weights split --optimizer-states bf16
fi
# compute-sanitizer over fp8_check's own kernels (quantisers, fused maxima, RMSNorm
# backward), without the cuBLASLt products that take most of its time. Sections,
# not a --kernel-name filter: with the filter, initcheck reported the first GEMM's
# output as uninitialised (the uninstrumented GEMM's writes unseen, we read it) and
# racecheck stopped on an internal error inside that GEMM (2026-12-05, H100)
if has fp8-san; then
    if make -s -j8 fp8-check > "$out/fp8san_build.log" 2>&1; then
        for tool in memcheck racecheck initcheck; do
            timeout ${FP8SAN_TIMEOUT:-300} compute-sanitizer --tool $tool --error-exitcode 7 ./build/fp8_check quant fused norm loss \
                > "$out/fp8san_$tool.log" 2>&1
            note "fp8 kernels under $tool: exit $? $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$out/fp8san_$tool.log" | tail -1) $(tail -1 "$out/fp8san_$tool.log")"
        done
    else
        note "fp8-san: build FAILED"; tail -20 "$out/fp8san_build.log"
    fi
fi
# llmq's published H100 runs (benchmarks/H100x1.md: T = 1024, 524,288 tokens per
# step, bf16 master weights and moments): ours with split master weights and bf16
# moments, bf16 GEMMs and FP8 GEMMs. 7B: micro-batch 4 (bf16) as llmq, fp8 4 too.
if has fp8-bench; then
    # F8_ROWS: "MODEL MICRO ACCUM [BENCH ARGS...],..." (default llmq's own), e.g. a 7B row
    # at a larger micro-batch under selective recompute: "qwen2.5-7b 16 8 --selective-recompute"
    IFS=, read -ra f8rows <<< "${F8_ROWS:-qwen2.5-0.5b 32 16,qwen2.5-1.5b 32 16,qwen2.5-3b 16 32,qwen2.5-7b 4 128}"
    for v in "${f8rows[@]}"; do
        set -- $v
        tag=$1-$2${4:+$(echo "${*:4}" | tr -cd 'a-z0-9-')}
        for p in "" --fp8; do
            timeout 400 ./build/llmc-train-cuda bench --model $1 --batch $2 --seq 1024 --accum $3 --steps 2 --warmup 1 \
                --master-weights split --optimizer-states bf16 $p "${@:4}" > "$out/f8b_$tag$p.json" 2> "$out/f8b_$tag$p.log"
            note "bench $1 ${2}x1024x$3 ${*:4} split+bf16 states ${p:-bf16}: exit $? $(cat "$out/f8b_$tag$p.json")"
            grep -h "error" "$out/f8b_$tag$p.log" | head -2
        done
    done
    LLMC_PHASE_TIMES=1 ./build/llmc-train-cuda bench --model qwen2.5-0.5b --batch 32 --seq 1024 --steps 3 --warmup 1 \
        --master-weights split --optimizer-states bf16 --fp8 > "$out/f8_phases.json" 2> "$out/f8_phases.log"
    LLMC_PHASE_TIMES=1 ./build/llmc-train-cuda bench --model qwen2.5-0.5b --batch 32 --seq 1024 --steps 3 --warmup 1 \
        --master-weights split --optimizer-states bf16 > "$out/b16_phases.json" 2> "$out/b16_phases.log"
fi
# gemm-choices: LLMC_GEMM_CHOICES (runtime/cuda/gemm_choices.h) at llmq's shapes, FP8: each
# row tuned once into a file (LLMC_GEMM_TUNE=1), then run from the file: the tuned speed
# with a fixed choice (the same bits twice: trust.sh's `twice fp8-choices`).
#   GC_ROWS: "MODEL MICRO ACCUM,..." (default the four FP8 rows, 7B at micro 8)
if has gemm-choices; then
    IFS=, read -ra gcrows <<< "${GC_ROWS:-qwen2.5-0.5b 32 16,qwen2.5-1.5b 32 16,qwen2.5-3b 16 32,qwen2.5-7b 8 64}"
    for v in "${gcrows[@]}"; do
        set -- $v
        gc=$(cd "$out" && pwd)/gemm-choices-$1-$2.txt
        rm -f "$gc"
        for pass in tune file; do
            env $([[ $pass == tune ]] && echo LLMC_GEMM_TUNE=1) LLMC_GEMM_CHOICES="$gc" timeout 400 \
                ./build/llmc-train-cuda bench --model $1 --batch $2 --seq 1024 --accum $3 --steps 2 --warmup 1 \
                --master-weights split --optimizer-states bf16 --fp8 > "$out/gc_$1-$2-$pass.json" 2> "$out/gc_$1-$2-$pass.log"
            note "gemm-choices $1 ${2}x1024x$3 fp8, $pass: exit $? $(cat "$out/gc_$1-$2-$pass.json");" \
                 "$(($(wc -l < "$gc" 2>/dev/null || echo 1) - 1)) shapes in the file"
            grep -h "error" "$out/gc_$1-$2-$pass.log" | head -2
        done
    done
fi
# issue 31's convergence checks (tests/cuda/fp8_converge.sh, prepared here with
# `fp8_converge.sh prep .cuda-run/converge`): CONVERGE_VARIANTS and CONVERGE_REUSE
# pass through (three variants exceed one 600 s call: bf16 fp8, then bf16 bf16s
# reusing bf16's runs)
if has converge; then
    if [[ -f .cuda-run/converge/bf16/out/plan.json ]]; then
        bash tests/cuda/fp8_converge.sh run .cuda-run/converge "$out/converge" > "$out/converge.log" 2>&1
        note "converge: exit $?"
        grep -h '^converge\|FAIL' "$out/converge/converge.txt" "$out/converge.log" 2>/dev/null | sort -u | tee -a "$out/summary.txt"
    else
        note "converge: no .cuda-run/converge (run tests/cuda/fp8_converge.sh prep .cuda-run/converge here)"
    fi
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
# host2: ranks sharing this one GPU over the host transport (LLMC_TRANSPORT=host,
# runtime/cuda/cuda_coll.h: collectives staged through pinned memory and summed by
# runtime/base/dist.c in rank order). The tiny plan on 1 rank, on 2 ranks with
# ZeRO-1 (plan-gpu2.json: same global batch) twice -- once with LLMC_TRANSPORT=host,
# once unset, which must pick host by itself since the ranks share a GPU -- and on
# 4 ranks. 2 ranks twice: the same bits (fixed-order sums). 1 vs 2 and 4 ranks:
# the same math only up to summation order (each rank's GEMMs see a quarter or
# half of the batch), so compare_runs.py's tolerances (as for 1 vs 2 GPUs) and
# the largest |Δloss|, |Δgrad norm| and |Δweight| are reported. LLMC_TRANSPORT=nccl
# on one GPU must be refused with a message. With 2+ GPUs, host vs NCCL on
# 2 GPUs: a sum of two terms does not depend on order, so the same bits.
# Ranks start by hand with torchrun-style variables (no MPI needed).
if has host2 && [[ -f .cuda-run/tiny/plan-gpu2.json ]]; then
    r=.cuda-run/tiny
    python3 - $r <<'PY'
import json, sys
r = sys.argv[1]
def variant(src, name, n=None):
    q = json.load(open(f"{r}/{src}"))
    q["output"]["dir"] = "run-" + name
    q["checkpoint"]["dir"] = "run-" + name + "/ckpt"
    if n:
        q["train"]["micro_batch"] = q["train"]["global_batch"] // n
        q["train"]["grad_accum"] = 1
        q["parallel"].update(world_size=n, data_parallel=n, gpus_per_node=n)
    json.dump(q, open(f"{r}/plan-{name}.json", "w"), indent=1)
variant("plan-gpu.json", "host1")
for name in ("host2a", "host2b", "nccl2"):
    variant("plan-gpu2.json", name)
variant("plan-gpu2.json", "host4", 4)
PY
    # ranks N NAME PORT [ENV...]: N ranks run plan-NAME.json here (logs host_NAME.K.log); exit codes in RCS
    ranks() {
        local n=$1 name=$2 port=$3 k pids=(); shift 3
        rm -rf $r/run-$name
        for ((k = 0; k < n; k++)); do
            env "$@" RANK=$k WORLD_SIZE=$n LOCAL_RANK=$k MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
                timeout 1800 ./build/llmc-train-cuda run $r/plan-$name.json > "$out/host_$name.$k.log" 2>&1 &
            pids+=($!)
        done
        RCS=""
        for k in "${pids[@]}"; do wait "$k"; RCS+="$? "; done
    }
    # cmp_runs A B: steps, largest |Δloss| and |Δgrad norm|, exported weights (bitwise? largest |Δ|)
    cmp_runs() {
        python3 - $r/run-$1 $r/run-$2 <<'PY'
import json, os, struct, sys
import numpy as np
def steps(d):
    return {o["step"]: o for o in map(json.loads, open(d + "/metrics.jsonl"))}
def weights(d):
    out = {}
    for f in sorted(os.listdir(d + "/final")) if os.path.isdir(d + "/final") else []:
        if not f.endswith(".safetensors"): continue
        b = open(os.path.join(d, "final", f), "rb").read()
        n = struct.unpack("<Q", b[:8])[0]
        for k, v in json.loads(b[8:8 + n]).items():
            if k == "__metadata__": continue
            raw = b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]
            if v["dtype"] == "BF16":
                a = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
            else:
                a = np.frombuffer(raw, np.float32 if v["dtype"] == "F32" else np.uint8).astype(np.float32)
            out[k] = (raw, a)
    return out
a, b = steps(sys.argv[1]), steps(sys.argv[2])
common = sorted(set(a) & set(b))
dl = max((abs(a[s]["loss"] - b[s]["loss"]) for s in common), default=float("nan"))
dg = max((abs((a[s].get("grad_norm") or 0) - (b[s].get("grad_norm") or 0)) for s in common), default=float("nan"))
same_steps = all(a[s]["loss"] == b[s]["loss"] and a[s].get("grad_norm") == b[s].get("grad_norm") for s in common)
wa, wb = weights(sys.argv[1]), weights(sys.argv[2])
wsame = bool(wa) and wa.keys() == wb.keys() and all(wa[k][0] == wb[k][0] for k in wa)
dw = max((float(np.max(np.abs(wa[k][1] - wb[k][1]))) for k in wa if k in wb and wa[k][1].shape == wb[k][1].shape),
         default=float("nan"))
ok = len(a) == len(b) == len(common) and len(common) > 0 and same_steps and wsame
print(f"{'SAME' if ok else 'DIFFERENT'}: {len(a)} vs {len(b)} steps, max |dloss| {dl:.3g}, max |dgrad_norm| {dg:.3g}, "
      f"weights {'bitwise equal' if wsame else 'differ'} ({len(wa)} vs {len(wb)} tensors, max |dw| {dw:.3g}), "
      f"final loss {a[max(a)]['loss'] if a else '-'} / {b[max(b)]['loss'] if b else '-'}")
PY
    }
    ranks 1 host1 29531
    note "host2: 1 rank: exit $RCS"
    ranks 2 host2a 29532 LLMC_TRANSPORT=host
    note "host2: 2 ranks, LLMC_TRANSPORT=host: exit $RCS; $(grep -h 'transport' "$out"/host_host2a.0.log | head -2 | cut -c1-200 | tr '\n' ' ')"
    ranks 2 host2b 29533 -u LLMC_TRANSPORT
    note "host2: 2 ranks, LLMC_TRANSPORT unset: exit $RCS; $(grep -h 'share one GPU\|transport' "$out"/host_host2b.0.log | head -2 | cut -c1-200 | tr '\n' ' ')"
    note "host2: 2 ranks twice: $(cmp_runs host2a host2b)"
    note "host2: 1 vs 2 ranks: $(cmp_runs host1 host2a)"
    python3 tests/cuda/compare_runs.py $r/run-host1/metrics.jsonl $r/run-host2a/metrics.jsonl > "$out/cmp_host1_host2.log" 2>&1
    note "host2:   compare_runs 1 vs 2: $(grep -E 'mean|final|passed' "$out/cmp_host1_host2.log" | tr '\n' ' ')"
    ranks 4 host4 29534 LLMC_TRANSPORT=host
    note "host2: 4 ranks, LLMC_TRANSPORT=host: exit $RCS"
    note "host2: 1 vs 4 ranks: $(cmp_runs host1 host4)"
    python3 tests/cuda/compare_runs.py $r/run-host1/metrics.jsonl $r/run-host4/metrics.jsonl > "$out/cmp_host1_host4.log" 2>&1
    note "host2:   compare_runs 1 vs 4: $(grep -E 'mean|final|passed' "$out/cmp_host1_host4.log" | tr '\n' ' ')"
    if [[ $ngpu -eq 1 ]]; then
        ranks 2 nccl2 29535 LLMC_TRANSPORT=nccl
        note "host2: 2 ranks on 1 GPU with LLMC_TRANSPORT=nccl: exit $RCS (want 1 1); $(grep -h 'error' "$out"/host_nccl2.0.log | head -1 | cut -c1-220)"
    else
        ranks 2 nccl2 29535 LLMC_TRANSPORT=nccl
        note "host2: 2 GPUs, NCCL: exit $RCS; host vs NCCL (want SAME): $(cmp_runs host2a nccl2)"
    fi
    cp $r/run-host2a/gpu_metrics.jsonl "$out/host2_gpu_memory.jsonl" 2>/dev/null
fi
# zero: ZeRO-1/2/3 on this one GPU over the host transport (tests/cuda/zero_check.py
# writes the plans: the tiny plan, 20 steps, the same global batch of 8 rows as
# micro-batches of 2 on 1, 2 and 4 ranks, so every rank count runs the same
# micro-batches). Exact (gradient norms and exported weights bitwise equal):
# ZeRO-2/3 on 1, 2, 4 ranks against ZeRO-2 on 1 rank -- each micro-batch's
# gradients are reduced on their own, in rank order, onto the shard, which is
# the order one rank adds them in; the norm adds fixed blocks in block order;
# AdamW is elementwise; ZeRO-3's gathered bf16 weights are the shards' own --
# and optimizer offload against the same run without it (the same AdamW kernel
# on the same values, from pinned host memory). The steps computed from the same
# weights (step 1, and after lr-0 updates) within 1e-6 relative (only the loss's fp32
# sum order differs), then within compare_runs.py's
# tolerances, relative (the first half's mean 1%, final loss 15%): ZeRO-1 on 2 and 4 ranks and ZeRO-2
# against ZeRO-1 on 1 rank (ZeRO-1 sums a rank's micro-batches inside the GEMMs
# before the ranks are summed: another order), and LoRA on 2 and 4 ranks (the
# adapters' gradients are all-reduced per step: the same). Per case: each rank's
# GPU memory (its model allocations; ranks share the device, so the device's
# counters are not theirs) and one summary line. Resume: ZeRO-2 on 2 ranks stopped
# half way and resumed by ZeRO-3 on 4 ranks must give ZeRO-2 on 1 rank's bits
# (the checkpoint is whole and fp32; the bf16 weights are rounded from it as AdamW
# rounds them). Memory: each case's rank 0 allocation against `llmc explain` of the
# same plan (within 10%).
if has zero && [[ -f .cuda-run/tiny/plan-gpu.json ]]; then
    r=.cuda-run/tiny
    zport=29600
    zrun() {   # NAME RANKS [ARGS...]: the case's ranks here, logs zero_NAME.K.log
        local name=$1 n=$2 k pids=() rcs=""
        shift 2
        rm -rf $r/run-$name
        zport=$((zport + 1))
        for ((k = 0; k < n; k++)); do
            env LLMC_TRANSPORT=${ZT:-host} RANK=$k WORLD_SIZE=$n LOCAL_RANK=$k MASTER_ADDR=127.0.0.1 MASTER_PORT=$zport \
                timeout ${zlimit:-300} ./build/llmc-train-cuda run $r/plan-$name.json "$@" > "$out/zero_$name.$k.log" 2>&1 &
            pids+=($!)
        done
        for k in "${pids[@]}"; do wait "$k"; rcs+="$? "; done
        local mem
        mem=$(grep -ho 'rank [0-9]*: [0-9.]* GiB of GPU memory' "$out"/zero_$name.*.log | awk '{printf "%s%s ", $3, $4}')
        note "zero $name: exit ${rcs% } ; GPU memory per rank: ${mem:-none}; $(grep -ho 'ZeRO-[0-9][^,]*' "$out/zero_$name.0.log" | head -1)"
        [[ $rcs == *[1-9]* ]] && grep -h "error" "$out"/zero_$name.*.log | head -3
        # rank 0's allocation against `llmc explain` of the same plan (zero_check.py estimates,
        # written here by make_tiny_run.sh): within 10%
        local g0
        g0=$(grep -ho 'rank 0: [0-9.]* GiB of GPU memory' "$out/zero_$name.0.log" | awk '{print $3}')
        [[ -f $r/zero_estimates.json ]] && grep -q "\"$name\"" $r/zero_estimates.json &&
            note "zero: $(python3 tests/cuda/zero_check.py mem $r $name "${g0:-none}")"
        return 0
    }
    zcmp() { note "zero: $(python3 tests/cuda/zero_check.py cmp $r "$@" 2>&1 | tail -1)"; }
    t0=$SECONDS
    python3 tests/cuda/zero_check.py plans $r > "$out/zero_cases.txt"
    # ZERO_ONLY="h-z2-off-r2 ...": only these several-rank cases of the 0.5B grid (and the
    # one-rank references), no tiny grid and no kill test: a rerun of what a cut call missed
    if [[ -z ${ZERO_ONLY:-} ]]; then
        # the most telling first, each comparison as soon as its runs are done (a run
        # cut short still reports what it reached)
        zrun z2-full-r1 1
        for c in "z2-full-r2 2" "z3-full-r2 2" "z3-full-r4 4" "z2-full-r4 4" "z3-full-r1 1"; do
            set -- $c; zrun $1 $2; zcmp z2-full-r1 $1 exact
        done
        zrun z3-off-r2 2; zcmp z2-full-r1 z3-off-r2 exact
        zrun z2-off-r2 2; zcmp z2-full-r2 z2-off-r2 exact
        zrun z3-off-r4 4; zcmp z2-full-r1 z3-off-r4 exact
        # resume: ZeRO-2 on 2 ranks stops half way, ZeRO-3 on 4 ranks resumes (one run-zres)
        rm -rf $r/run-zres
        zrun zres-a 2 --stop-after $(python3 -c 'import sys; sys.path.insert(0, "tests/cuda"); import zero_check; print(zero_check.STEPS // 2)')
        zrun zres-b 4
        zcmp z2-full-r1 zres exact
        rm -rf $r/run-zres3
        zrun zres3-a 4 --stop-after $(python3 -c 'import sys; sys.path.insert(0, "tests/cuda"); import zero_check; print(zero_check.STEPS // 2)')
        zrun zres3-b 2
        zcmp z2-full-r1 zres3 exact
        zrun z1-full-r1 1
        zrun z1-off-r1 1; zcmp z1-full-r1 z1-off-r1 exact
        zcmp z1-full-r1 z2-full-r1 tol
        for c in "z1-full-r2 2" "z1-full-r4 4"; do set -- $c; zrun $1 $2; zcmp z1-full-r1 $1 tol; done
        zrun z1-lora-r1 1
        for c in "z2-lora-r2 2" "z3-lora-r2 2" "z3-lora-r4 4"; do set -- $c; zrun $1 $2; zcmp z1-lora-r1 $1 tol; done
        # 2+ GPUs: NCCL, one rank per GPU (NCCL reduces a window, then it is added:
        # another order than ((acc + g_0) + g_1), so tolerances)
        if [[ $ngpu -ge 2 ]]; then
            for c in z2-nccl-r2 z3-nccl-r2 z3-nccl-off-r2; do ZT=nccl zrun $c 2; zcmp z2-full-r1 $c tol; done
        fi
        # a rank killed mid-run (ZeRO-3 on 4 ranks, each step a run of gathers and
        # reduce-scatters): the others stop within 60 s with a message (rank 0 names
        # the dead rank; the others lose rank 0, the hub of the host transport), the
        # job's ranks all exit non-zero, the newest checkpoint verifies and resumes
        python3 - "$r" <<'PY'
import json, sys
r = sys.argv[1]
p = json.load(open(r + "/plan-z3-full-r4.json"))
p["output"]["dir"] = "run-zkill"; p["checkpoint"]["dir"] = "run-zkill/ckpt"
p["train"]["max_steps"] = 3000; p["checkpoint"]["every_steps"] = 10
json.dump(p, open(r + "/plan-zkill.json", "w"), indent=1)
PY
        rm -rf $r/run-zkill
        zport=$((zport + 1))
        kp=()
        for ((k = 0; k < 4; k++)); do   # no timeout wrapper: $! is the trainer itself (env execs it)
            env LLMC_TRANSPORT=host RANK=$k WORLD_SIZE=4 LOCAL_RANK=$k MASTER_ADDR=127.0.0.1 MASTER_PORT=$zport \
                LLMC_DIST_TIMEOUT=300 ./build/llmc-train-cuda run $r/plan-zkill.json > "$out/zkill.$k.log" 2>&1 &
            kp+=($!)
        done
        for ((i = 0; i < 600; i++)); do grep -q 'checkpoint step 20 ' "$out/zkill.0.log" && break; sleep 0.1; done
        sleep 0.3
        kill -9 "${kp[2]}"; wait "${kp[2]}" 2>/dev/null
        tk=$SECONDS kres="" kgood=1
        for k in 0 1 3; do   # each within 60 s of the kill, else stopped here and counted a failure
            while kill -0 "${kp[$k]}" 2>/dev/null && (( SECONDS - tk <= 60 )); do sleep 0.2; done
            if kill -0 "${kp[$k]}" 2>/dev/null; then kill -9 "${kp[$k]}"; wait "${kp[$k]}" 2>/dev/null; rc=124
            else wait "${kp[$k]}"; rc=$?; fi
            kres+="rank $k exit $rc; "
            [[ $rc -ne 0 && $rc -ne 124 ]] || kgood=0
        done
        kwait=$((SECONDS - tk))
        (( kwait <= 60 )) || kgood=0
        grep -q 'error: lost the connection to rank 2' "$out/zkill.0.log" || kgood=0
        for k in 1 3; do grep -q 'error: lost the connection to rank 0' "$out/zkill.$k.log" || kgood=0; done
        kl=$(cat $r/run-zkill/ckpt/latest 2>/dev/null)
        kl=${kl:-step-0}
        ./build/llmc-train-cuda verify "$r/run-zkill/ckpt/$kl" > "$out/zkill.verify.log" 2>&1 || kgood=0
        kstep=$((10#${kl#step-}))
        kstop=$((kstep + 2))
        kp=()
        zport=$((zport + 1))
        for ((k = 0; k < 4; k++)); do
            env LLMC_TRANSPORT=host RANK=$k WORLD_SIZE=4 LOCAL_RANK=$k MASTER_ADDR=127.0.0.1 MASTER_PORT=$zport \
                timeout 120 ./build/llmc-train-cuda run $r/plan-zkill.json --stop-after $kstop > "$out/zkill-resume.$k.log" 2>&1 &
            kp+=($!)
        done
        krc=""; for k in "${kp[@]}"; do wait "$k"; krc+="$? "; done
        grep -q "resumed from .* at step $kstep" "$out/zkill-resume.0.log" || kgood=0
        [[ $krc == "3 3 3 3 " ]] || kgood=0
        note "zero: $( ((kgood)) && echo PASS || echo FAIL) kill: rank 2 killed after step 20; ${kres}others stopped in ${kwait} s;" \
             "rank 0: $(grep -ho 'error: .*' "$out/zkill.0.log" | head -1); latest ${kl:-none} verifies and resumes (exit $krc)"
        rm -rf $r/run-zkill/ckpt
    fi
    # the Qwen2.5-0.5B shape, 50 steps (zero_check.py HALF), the tiny cases' grid: the
    # one-rank references one after another (0.1 s a step), beside them the several-rank
    # cases, each started as soon as at most 16 of their ranks would run (the host
    # transport's time is the hub's CPU; 16 cores), the slowest first: offload on 2
    # ranks 4.3-5.8 s a step, ZeRO-3 on 4 2.9 s (2026-12-04); two fixed waves left
    # cores idle behind each wave's slowest case. Each case its own ports; each
    # comparison once its case and its reference are done.
    rm -f $r/run-h-refs.done
    (zrun h-z2-r1 1
     zrun h-z3-r1 1; zcmp h-z2-r1 h-z3-r1 exact
     zrun h-z1-r1 1; zcmp h-z1-r1 h-z2-r1 tol
     zrun h-z1-off-r1 1; zcmp h-z1-r1 h-z1-off-r1 exact
     zrun h-z1-lora-r1 1
     touch $r/run-h-refs.done) &
    hrefs=$!
    hk=0
    hpool() {   # "NAME RANKS REF EXPECT" ...: in this order, at most 16 ranks at once
        local c i used hp=() hn=() hname=()
        for c in "$@"; do
            set -- $c
            [[ -n ${ZERO_ONLY:-} && " $ZERO_ONLY " != *" $1 "* ]] && continue
            while :; do   # the ranks of the cases started and not yet done
                used=0
                for i in "${!hp[@]}"; do
                    [[ -f $r/run-${hname[$i]}.ranks-done ]] || ! kill -0 "${hp[$i]}" 2>/dev/null || used=$((used + hn[$i]))
                done
                ((used + $2 <= 16)) && break
                sleep 1
            done
            hk=$((hk + 1))
            rm -f $r/run-$1.ranks-done
            (zport=$((zport + 100 * hk)); zlimit=480 zrun $1 $2; touch $r/run-$1.ranks-done
             while [[ ! -f $r/run-h-refs.done ]] && kill -0 $hrefs 2>/dev/null; do sleep 1; done
             zcmp $3 $1 $4) &
            hp+=($!); hn+=($2); hname+=($1)
        done
        ((${#hp[@]})) && wait "${hp[@]}"
    }
    hpool "h-z2-off-r2 2 h-z2-r1 exact" "h-z3-off-r2 2 h-z2-r1 exact" "h-z3-off-r4 4 h-z2-r1 exact" \
          "h-z3-r4 4 h-z2-r1 exact" "h-z3-r2 2 h-z2-r1 exact" "h-z2-r2 2 h-z2-r1 exact" \
          "h-z2-r4 4 h-z2-r1 exact" "h-z1-r4 4 h-z1-r1 tol" "h-z1-r2 2 h-z1-r1 tol" \
          "h-z2-lora-r2 2 h-z1-lora-r1 tol" "h-z3-lora-r4 4 h-z1-lora-r1 tol"
    wait $hrefs
    rm -rf $r/run-h-*
    note "zero: $(grep -c '^zero: PASS' "$out/summary.txt") passed, $(grep -c '^zero: FAIL' "$out/summary.txt") failed, $((SECONDS - t0)) s"
    rm -rf $r/run-z[123]-*/ckpt $r/run-zres/ckpt $r/run-zres3/ckpt
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
# zero-scale (issue 30; needs 2+ GPUs, NCCL, one rank per GPU): throughput scaling of
# ZeRO-1/2/3 and ZeRO-3 + optimizer offload at a fixed micro-batch per GPU (weak
# scaling), 1 GPU against 2, 4, ... all of them; each row's tokens/s, its speed-up
# over 1 GPU and the efficiency (speed-up / GPUs); rank 0's line per run.
#   ZS_ROWS: "MODEL MICRO ACCUM,..." (default 1.5B and 7B at 2 x 2048, 8 accumulations)
if has zero-scale && [[ $ngpu -ge 2 ]]; then
    IFS=, read -ra zsrows <<< "${ZS_ROWS:-qwen2.5-1.5b 2 8,qwen2.5-7b 2 8}"
    zs_port=29800
    for v in "${zsrows[@]}"; do
        set -- $v
        for stage in "1" "2" "3" "3 --offload"; do
            set -- $1 $2 $3 $stage
            base="" base_w=1
            for ((w = 1; w <= ngpu; w *= 2)); do
                tag="$1_z$4${5:+off}_w$w"
                zs_port=$((zs_port + 1))
                for ((k = 0; k < w; k++)); do
                    env LLMC_TRANSPORT=nccl RANK=$k WORLD_SIZE=$w LOCAL_RANK=$k MASTER_ADDR=127.0.0.1 \
                        MASTER_PORT=$zs_port timeout 600 ./build/llmc-train-cuda bench --model $1 --batch $2 \
                        --seq 2048 --accum $3 --steps 3 --warmup 1 --zero $4 ${5:-} \
                        > "$out/zs_$tag.$k.json" 2> "$out/zs_$tag.$k.log" &
                done
                wait
                tps=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read())["tokens_per_s"])' \
                      "$out/zs_$tag.0.json" 2>/dev/null)
                # against the fewest GPUs that ran it (7B ZeRO-1 does not fit one)
                [[ -z $base && -n $tps ]] && base=$tps base_w=$w
                note "zero-scale $1 ${2}x2048x$3 ZeRO-$4${5:+ + offload} on $w GPUs: ${tps:-failed} tokens/s$(
                    [[ -n $tps && -n $base ]] && python3 -c "s = $tps / $base; print(f', {s:.2f}x {$base_w} GPU(s), efficiency {s * $base_w / $w:.0%}')")"
                [[ -z $tps ]] && grep -h 'error' "$out"/zs_$tag.*.log | head -2
            done
        done
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
# issue 31's Done-when run: llmq's four T = 1024 shapes, ours bf16 (split master,
# bf16 moments) and FP8, both with tuned GEMM choices, one timed step a row
if has gemm-sm90; then
    if make -s -j8 gemm-sm90-check > "$out/gemm_sm90_build.log" 2>&1; then
        timeout 300 ./build/gemm_sm90_check --time --models "${GEMM_SM90_MODELS:-3b,1.5b,7b}" > "$out/gemm_sm90.log" 2>&1
        note "gemm_sm90 (exit $?): $(tail -1 "$out/gemm_sm90.log")"
        grep -v "^PASS" "$out/gemm_sm90.log" | tee -a "$out/summary.txt"
        # the power-limited rate, as in a training step
        timeout 120 ./build/gemm_sm90_check --sustain 15 --models 3b > "$out/gemm_sm90_sustain.log" 2>&1
        note "gemm_sm90 sustained (exit $?):"; grep sustained "$out/gemm_sm90_sustain.log" | tee -a "$out/summary.txt"
        # every kernel instrumented (a --kernel-name filter misleads initcheck: see fp8-san);
        # racecheck reports hazards inside cuBLASLt's own nvjet_* kernels (its TMA and
        # mbarrier protocol, 2026-12-06, H100), so ours are counted apart
        for tool in memcheck racecheck initcheck; do
            timeout 300 compute-sanitizer --tool $tool --error-exitcode 9 ./build/gemm_sm90_check \
                > "$out/gemm_sm90_$tool.log" 2>&1
            rc=$?
            if [[ $tool == racecheck ]]; then
                note "gemm_sm90 racecheck (exit $rc): $(grep -c 'Race reported.*k_gemm_sm90' "$out/gemm_sm90_$tool.log") hazards in k_gemm_sm90, $(grep -c 'Race reported.*nvjet' "$out/gemm_sm90_$tool.log") in cuBLASLt's kernels; $(tail -1 "$out/gemm_sm90_$tool.log")"
            else
                note "gemm_sm90 $tool (exit $rc): $(grep 'ERROR SUMMARY' "$out/gemm_sm90_$tool.log" | tail -1)"
            fi
        done
    else
        note "gemm-sm90: build FAILED"; tail -20 "$out/gemm_sm90_build.log"
    fi
fi
if has swiglu-sm90; then
    LLMC_SWIGLU_SM90=1 chk swiglu_sm90 --steps 100
    IFS=, read -ra rows <<< "${SWIGLU_ROWS:-qwen2.5-1.5b 16 4,qwen2.5-3b 8 4}"
    for row in "${rows[@]}"; do
        set -- $row
        for f in 0 1 0 1; do   # alternating, twice: run-to-run spread beside the difference
            LLMC_SWIGLU_SM90=$f ./build/llmc-train-cuda bench --model $1 --batch $2 --seq 1024 --accum $3 --steps 1 \
                --warmup 1 --master-weights split --optimizer-states bf16 > "$out/swiglu.json" 2>/dev/null
            note "swiglu-sm90 $1 $2 x 1024 x $3 LLMC_SWIGLU_SM90=$f: $(cat "$out/swiglu.json")"
        done
        for f in 0 1; do
            LLMC_PHASE_TIMES=1 LLMC_SWIGLU_SM90=$f ./build/llmc-train-cuda bench --model $1 --batch $2 --seq 1024 \
                --accum 1 --steps 2 --warmup 1 --master-weights split --optimizer-states bf16 \
                > /dev/null 2> "$out/swiglu_phases_$1_$f.log"
            note "swiglu-sm90 $1 phases, LLMC_SWIGLU_SM90=$f:"
            grep -E "gate/up|swiglu|down dx|all GEMMs" "$out/swiglu_phases_$1_$f.log" | tee -a "$out/summary.txt"
        done
    done
fi
if has wgrad-side; then
    # LLMC_WGRAD_SMS: the weight gradients on a side stream (cuBLASLt planned for that many SMs)
    if [[ ${WGRAD_CHECK:-1} == 1 ]]; then   # WGRAD_CHECK=0: the timings only
        LLMC_WGRAD_SMS=${WGRAD_CHECK_SMS:-116} chk wgrad_side --steps 100
        LLMC_WGRAD_SMS=${WGRAD_CHECK_SMS:-116} TRUST_TWICE=0.5b bash tests/cuda/trust.sh "$out/wgrad_trust" repro \
            > "$out/wgrad_trust.log" 2>&1
        note "wgrad-side same bits twice (0.5b plan, LLMC_WGRAD_SMS=${WGRAD_CHECK_SMS:-116}): $(grep -h 'twice 0.5b' "$out/wgrad_trust/summary.txt")"
    fi
    IFS=, read -ra rows <<< "${WGRAD_ROWS:-qwen2.5-1.5b 16 4,qwen2.5-3b 8 4}"
    for row in "${rows[@]}"; do
        set -- $row
        for s in ${WGRAD_SMS:-off 0 116 100 off 0 116 100}; do   # alternating, twice
            if [[ $s == off ]]; then unset LLMC_WGRAD_SMS; else export LLMC_WGRAD_SMS=$s; fi
            ./build/llmc-train-cuda bench --model $1 --batch $2 --seq 1024 --accum $3 --steps 1 \
                --warmup 1 --master-weights split --optimizer-states bf16 > "$out/wgrad.json" 2>/dev/null
            note "wgrad-side $1 $2 x 1024 x $3 LLMC_WGRAD_SMS=$s: $(cat "$out/wgrad.json")"
        done
        unset LLMC_WGRAD_SMS
    done
fi
if has power-probe; then
    # the card's power and SM clock under a bf16 GEMM, a copy, SwiGLU's forward, idle
    timeout 90 python3 bench/cuda/power_probe.py --seconds "${PROBE_SECONDS:-4}" > "$out/power_probe.txt" 2>&1
    note "power-probe (exit $?):"; tee -a "$out/summary.txt" < "$out/power_probe.txt"
fi
if has llmq1k; then
    # the power and SM clock beside it (at the power limit, the clock comes down)
    nvidia-smi dmon -s pc -d 1 > "$out/llmq1k_dmon.txt" 2>&1 &
    dmon=$!
    BENCH_SHAPES=${LLMQ1K_ROWS:-llmq1k} BENCH_TORCH=0 BENCH_GEMM_TUNE=1 BENCH_ACCUM_STEPS=1 BENCH_TIMEOUT=${BENCH_TIMEOUT:-200} \
        BENCH_POWER=1 bash bench/cuda/run.sh "$out/llmq1k" > "$out/llmq1k.txt" 2>&1
    note "llmq1k bench: exit $?"
    kill $dmon 2>/dev/null; wait $dmon 2>/dev/null
    # each timed run's own median power and SM clock (BENCH_POWER=1)
    python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print("llmq1k %s %s: %s tok/s, %s W, %s MHz (%s samples)" % (r.get("bench_impl"), r.get("row"), r.get("tokens_per_s", r.get("error")),
          r.get("power_w_median"), r.get("sm_mhz_median"), r.get("power_samples")))' "$out/llmq1k/bench.jsonl" 2>&1 | tee -a "$out/summary.txt"
    note "llmq1k power: $(nvidia-smi --query-gpu=power.limit,clocks.max.sm --format=csv,noheader) (limit, max SM clock)"
    python3 bench/cuda/power_summary.py "$out/llmq1k_dmon.txt" 2>&1 | tee -a "$out/summary.txt"
    cp "$out/llmq1k/bench.jsonl" "$out/llmq1k.jsonl" 2>/dev/null
    tail -8 "$out/llmq1k.txt"
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
