/* estimate_defaults.c — the defaults the time estimate starts from, per
 * backend, each from a published or measured figure.
 *
 * One row per figure, first match wins (so specific rows come before the
 * general one of their kind). A GPU without a compute-efficiency row keeps
 * its catalogue (or declared) default_mfu; a CPU plan 0.20. docs/estimator.md, "Defaults from published
 * measurements", is this table with the arithmetic behind each value; a row
 * changed here is changed there. A site profile (`llmc calibrate`) or the
 * plan's `mfu` replaces what a row says for the compute efficiency.
 */
#include <string.h>
#include "estimate.h"

static const EstimateDefault ESTIMATE_DEFAULTS[] = {
    /* ---- compute efficiency (all FLOPs executed, recompute included) ---- */
    {DEF_MFU, BACKEND_LLAMAFACTORY, "A100", -1, 0.60,
     "ms-swift's Qwen2.5-14B benchmark on 8 A800 (ZeRO-2 and 3)",
     "ms-swift's benchmark (docs, Megatron-SWIFT Quick Start; examples/train/megatron/benchmark/deepspeed.sh): "
     "Qwen2.5-14B full, 8 x A800, 8192 packed, 1 x 2 per GPU, gradient checkpointing: ZeRO-2 10.32 s/it, "
     "ZeRO-3 10.56 s/it, which the estimate reproduces at 0.68 and 0.66 with attention counted at the full "
     "context (packed documents attend less); PyTorch FSDP on 128 A100 reached 0.57-0.67 (pytorch.org, "
     "Maximizing training throughput using PyTorch FSDP, table 1)"},
    {DEF_MFU, BACKEND_LLAMAFACTORY, "H100", -1, 0.40,
     "FSDP on 96 H100 reached 0.37-0.45",
     "the GPU catalogue's default, kept: PyTorch FSDP on 96 H100 reached 0.37-0.45 of all FLOPs (pytorch.org, "
     "Maximizing training throughput using PyTorch FSDP, table 1: MFU 0.34-0.37 with recompute)"},
    {DEF_MFU, BACKEND_LLAMAFACTORY, "H200", -1, 0.40,
     "as H100 (the same bf16 peak); FSDP on 96 H100 reached 0.37-0.45",
     "the GPU catalogue's default, kept: the H200 has the H100's bf16 peak; PyTorch FSDP on 96 H100 reached "
     "0.37-0.45 of all FLOPs (pytorch.org, Maximizing training throughput using PyTorch FSDP, table 1)"},
    {DEF_MFU, BACKEND_LLMC, "H100", -1, 0.50,
     "llmc-train-cuda as measured on one H200",
     "llmc-train-cuda measured on one H200 (docs/PERFORMANCE.md, 2026-12-01): 0.48-0.52 full fine-tuning "
     "1.5B-7B, 0.49-0.56 LoRA 1.5B-7B; 2 GPUs 1.89-1.92x one"},
    {DEF_MFU, BACKEND_LLMC, "H200", -1, 0.50,
     "llmc-train-cuda as measured on one H200",
     "llmc-train-cuda measured on one H200 (docs/PERFORMANCE.md, 2026-12-01): 0.48-0.52 full fine-tuning "
     "1.5B-7B, 0.49-0.56 LoRA 1.5B-7B; 2 GPUs 1.89-1.92x one"},
    /* ---- method: a factor on the compute efficiency (the FLOPs already count
     * LoRA's missing weight gradients: 4N, not 6N) ---- */
    {DEF_METHOD_FACTOR, BACKEND_LLAMAFACTORY, NULL, METHOD_LORA, 0.92,
     "LoRA 0.74 of full's time for 0.68 of its FLOPs (Qwen README)",
     "QwenLM/Qwen README, Profiling of Memory and Speed (A100-80G, flash attention 2, 1 x 8): Qwen-1.8B at 2048 "
     "tokens LoRA 1.7 s/it against full 2.3 s/it = 0.74 of the time, for 0.68 of the FLOPs"},
    {DEF_METHOD_FACTOR, BACKEND_LLAMAFACTORY, NULL, METHOD_QLORA, 0.68,
     "QLoRA 1.35-1.40x LoRA's time (Qwen README)",
     "QwenLM/Qwen README, Profiling of Memory and Speed: at 2048 tokens Q-LoRA 7.0 s/it against LoRA 5.2 "
     "(Qwen-7B) and 11.8 against 8.4 (Qwen-14B): 1.35-1.40x LoRA's time, the 4-bit weights dequantised "
     "every matmul"},
    {DEF_METHOD_FACTOR, BACKEND_LLMC, NULL, -1, 1.0,
     "LoRA as efficient as full in llmc-train-cuda",
     "llmc-train-cuda: LoRA r16 ran at 0.40-0.56 of its own FLOPs against 0.50 full (docs/PERFORMANCE.md)"},
    {DEF_METHOD_FACTOR, BACKEND_LLAMAFACTORY, NULL, -1, 1.0, "full and freeze",
     "full and freeze: the efficiency above"},
    /* ---- collectives ---- */
    {DEF_LINK_EFFICIENCY, -1, NULL, -1, 0.80,
     "NCCL on NVLink",
     "nccl-tests bus bandwidth on NVLink 4: ~360 of 450 GB/s one way"},
    {DEF_NET_EFFICIENCY, -1, NULL, -1, 0.90,
     "NCCL over InfiniBand",
     "nccl-tests bus bandwidth over InfiniBand NDR: ~45 of a 400 Gb/s NIC's 50 GB/s"},
    {DEF_COLL_LAUNCH_S, BACKEND_LLAMAFACTORY, NULL, -1, 50e-6,
     "DeepSpeed's hooks per collective",
     "DeepSpeed's Python hooks per gathered module or reduced bucket (per-module ZeRO-3 fetch); with the ring "
     "hops it makes ZeRO-3 at 1K tokens per GPU expose 25% of the step, ZeRO++'s published 1.28-1.36x needing "
     ">= 22-26% (docs/estimator.md, DeepSpeed ZeRO-3 at multi-node scale)"},
    /* ---- DeepSpeed offload (docs/estimator.md, "Offload time", has the table of cases) ---- */
    {DEF_HOST_LINK_EFFICIENCY, -1, NULL, -1, 0.80, "pinned copies (CUDA bandwidthTest)",
     "CUDA's bandwidthTest with pinned memory: ~25 of PCIe 4.0 x16's 32 GB/s one way, ~51-55 of 5.0's 64"},
    {DEF_CPU_ADAM_THREAD_RATE, -1, NULL, -1, 0.25e9, "DeepSpeed CPU Adam per thread",
     "DeepSpeed's CPU Adam (csrc/adam/cpu_adam_impl.cpp, AVX, OpenMP over the rank's partition) moves ~30 "
     "bytes per parameter; one core streams ~7.5 GB/s"},
    {DEF_CPU_ADAM_NODE_RATE, -1, NULL, -1, 1.8e9, "DeepSpeed CPU Adam per node",
     "DeepSpeed issue 6834 (Qwen-72B, ZeRO-3 offload, 4 x 8 A100: ~10 s optimizer step, 8 single-threaded "
     "ranks a node) and the ZenFlow blog (Llama-2-7B on 4 A100, every core: over 4 s): 1.7-1.8 G/s a node"},
    {DEF_COLL_LAUNCH_S, BACKEND_LLMC, NULL, -1, 10e-6, "NCCL launch",
     "NCCL's kernel launch from C, one call per bucket"},
};

#define NDEFAULTS (sizeof ESTIMATE_DEFAULTS / sizeof ESTIMATE_DEFAULTS[0])

static bool row_matches(const EstimateDefault *r, DefaultKind kind, int backend, const char *gpu, int method)
{
    if (r->kind != kind) return false;
    if (r->backend >= 0 && r->backend != backend) return false;
    if (r->method >= 0 && r->method != method) return false;
    if (r->gpu_prefix && (!gpu || strncmp(gpu, r->gpu_prefix, strlen(r->gpu_prefix)) != 0)) return false;
    return true;
}

const EstimateDefault *estimate_default(DefaultKind kind, int backend, const char *gpu, int method)
{
    for (size_t i = 0; i < NDEFAULTS; i++)
        if (row_matches(&ESTIMATE_DEFAULTS[i], kind, backend, gpu, method)) return &ESTIMATE_DEFAULTS[i];
    return NULL;
}

int estimate_defaults(const EstimateDefault **rows)
{
    *rows = ESTIMATE_DEFAULTS;
    return (int)NDEFAULTS;
}
