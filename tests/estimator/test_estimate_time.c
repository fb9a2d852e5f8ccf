/* test_estimate_time.c — the estimator's data and time: steps, tokens and
 * padding, CPU plans, hostile inputs, collectives and their volumes, the
 * step's breakdown, host memory and offload time.
 */
#include "test_estimate.h"

/* ---- data and time ---- */

void test_time_arithmetic(void)
{
    Fixture f;
    Estimate e;
    int errors;
    /* Llama-3-8B on 2 x 8 H100, 1e9 stated tokens, packed at context 1000,
     * batch 4: 1e6 sequences / global batch 64 = 15625 steps.
     * FLOPs/token: matmul params 8,030,261,248 - 128256*4096 = 7,504,924,672;
     * 6N = 45,029,548,032; attention 3 x 2 x 32 x 1000 x 4096 = 786,432,000;
     * sum 45,815,980,032. Rate 16 x 989e12 x 0.50 (the defaults table's
     * llmc row for H100: estimate_defaults.c) = 7.912e15 FLOP/s, so 1e9
     * tokens take 5790.695 s: 2 segments of a 1 h limit. */
    fixture(&f, model(ARCH_LLAMA, 32, 4096, 32, 8, 0, 14336, 128256, false), 2, 1000, 4,
            SHARD_ZERO3, RECOMPUTE_NONE, 1e9);
    f.j.time_seconds = 3600;
    f.j.requeue = true;
    char *text = run_job(&f.j, &e, &errors);
    CHECK(errors == 0, "requeue on: no error:\n%s", text);
    free(text);
    CHECK(e.tokens_measured && e.tokens_source == TOKENS_STATED, "stated tokens");
    CHECK(e.global_batch == 64 && e.steps_total == 15625, "steps %lld, global batch %lld",
          (long long)e.steps_total, (long long)e.global_batch);
    CHECK(e.flops_per_token == 45815980032.0, "flops/token %.0f", e.flops_per_token);
    CHECK(near(e.total_seconds, 1e9 * 45815980032.0 / 7.912e15, 1e-12), "total %.4f s", e.total_seconds);
    CHECK(near(e.step_seconds, 64 * 1000 * 45815980032.0 / 7.912e15, 1e-12), "step seconds");
    CHECK(near(e.gpu_hours, 1e9 * 45815980032.0 / 7.912e15 * 16 / 3600, 1e-12), "gpu hours %.3f", e.gpu_hours);
    CHECK(e.requeue_segments == 2, "segments %d", e.requeue_segments);

    f.j.requeue = false;
    text = run_job(&f.j, &e, &errors);
    CHECK(errors == 1 && strstr(text, "t.llm:30:3: error: run cannot finish inside the time limit"),
          "time error:\n%s", text);
    CHECK(strstr(text, "requeue = true runs it in 2 segments"), "segments in help:\n%s", text);
    free(text);

    /* Full recompute adds a forward: + 2N + attention forward. */
    f.j.requeue = true;
    f.t.recompute = RECOMPUTE_FULL;
    free(run_job(&f.j, &e, &errors));
    CHECK(e.flops_per_token == 45815980032.0 + 2 * 7504924672.0 + 262144000.0,
          "recompute full flops/token %.0f", e.flops_per_token);

    /* max_steps wins over epochs. */
    f.t.max_steps = 100;
    free(run_job(&f.j, &e, &errors));
    CHECK(e.steps_total == 100 && e.tokens_total == 100.0 * 64 * 1000, "max_steps");
}

void test_sft_tokens(void)
{
    Fixture f;
    Estimate e;
    int errors;
    /* examples/qwen72b_sft.llm's data (docs/estimator.md, "Tokens per epoch"):
     * 37k samples at context 2560 in a 38 MB file is not 95M tokens per epoch:
     * at 4 bytes/token it is 9.5M, 257 tokens per sample. */
    fixture(&f, model(ARCH_QWEN2, 24, 896, 14, 2, 0, 4864, 151936, true), 1, 2560, 4,
            SHARD_NONE, RECOMPUTE_NONE, -1);
    f.t.stage = STAGE_SFT;
    f.t.packing = false;
    f.t.epochs = 5;
    f.ds.samples = 37000;
    f.ds.size_bytes = 38000000;
    free(run_job(&f.j, &e, &errors));
    CHECK(e.tokens_per_epoch == 9.5e6 && !e.tokens_measured && e.tokens_source == TOKENS_FROM_SIZE,
          "tokens from size: %.0f", e.tokens_per_epoch);
    CHECK(e.sequences_per_epoch == 37000 && near(e.seq_tokens, 9.5e6 / 37000, 1e-12),
          "one sequence per sample, %.1f tokens each", e.seq_tokens);
    CHECK(e.steps_total == (int64_t)ceil(5 * 37000 / 32.0), "steps %lld", (long long)e.steps_total);
    CHECK(near(e.tokens_total, 5 * 9.5e6, 1e-12), "tokens total %.0f", e.tokens_total);
    /* A file bigger than samples x context is capped there. */
    f.ds.size_bytes = 4000000000ull;
    free(run_job(&f.j, &e, &errors));
    CHECK(e.tokens_per_epoch == 37000.0 * 2560, "capped at samples x context");
    /* Stated tokens win over the size. */
    f.ds.tokens = 12345678;
    free(run_job(&f.j, &e, &errors));
    CHECK(e.tokens_per_epoch == 12345678 && e.tokens_measured, "stated tokens win");
    /* samples x context only (an upper bound): a time-limit overrun is a warning. */
    f.ds.tokens = -1; f.ds.size_bytes = 0;
    f.j.time_seconds = 1; f.j.requeue = false;
    char *upper = run_job(&f.j, &e, &errors);
    CHECK(errors == 0 && e.tokens_source == TOKENS_FROM_SAMPLES && e.requeue_segments > 1 &&
          strstr(upper, "t.llm:30:3: warning: run may not finish"), "upper bound warns:\n%s", upper);
    free(upper);
    f.j.time_seconds = 48 * 3600.0; f.j.requeue = true;
    /* Nothing to count from: a warning at the dataset, no steps. */
    f.ds.tokens = -1; f.ds.size_bytes = 0; f.ds.samples = -1;
    char *text = run_job(&f.j, &e, &errors);
    CHECK(errors == 0 && e.tokens_source == TOKENS_UNKNOWN && e.steps_total == 0 &&
          strstr(text, "t.llm:10:1: warning: time to train not estimated"), "unknown tokens:\n%s", text);
    free(text);
}

void test_cpu_plan(void)
{
    Fixture f;
    Estimate e;
    int errors;
    fixture(&f, model(ARCH_QWEN2, 2, 64, 4, 2, 0, 128, 512, true), 1, 128, 8,
            SHARD_NONE, RECOMPUTE_NONE, 1e6);
    f.c.gpu = NULL; f.c.gpus_per_node = 0; f.c.cpus = 2;
    f.c.memory_bytes = 24ull << 30;
    char *text = run_job(&f.j, &e, &errors);
    CHECK(errors == 0 && e.cpu_only && e.world_size == 1 && e.usable_bytes == 24.0 * GIB,
          "CPU plan against node memory:\n%s", text);
    CHECK(e.activation_bytes_per_value == 4 && e.weights_bytes == 4.0 * e.params_total,
          "CPU runs fp32");
    CHECK(e.peak_flops_per_device == 2 * 64e9 && e.mfu == 0.2, "CPU throughput assumption");
    CHECK(e.comm_bytes == 0, "no GPU buffers");
    free(text);
    /* The job's --mem bounds it, and two tasks share the node. */
    f.j.mem_bytes = 1ull << 20;
    f.j.tasks_per_node = 2;
    text = run_job(&f.j, &e, &errors);
    CHECK(errors == 1 && e.world_size == 2 && e.usable_bytes == 0.5 * (1 << 20) &&
          strstr(text, "per node needed"), "tiny --mem does not fit:\n%s", text);
    free(text);
}

void test_hostile(void)
{
    Fixture f;
    Estimate e;
    int errors;
    fixture(&f, model(ARCH_LLAMA, 2000000000, 2000000000, 2000000000, 2000000000, 0, 2000000000,
                      2000000000, false), 1000000, 2000000000, 2000000000, SHARD_ZERO3,
            RECOMPUTE_FULL, 9e18);
    char *text = run_job(&f.j, &e, &errors);
    CHECK(errors >= 1 && !e.fits && e.max_micro_batch_that_fits == 0, "absurd plan does not fit");
    free(text);
    /* Zeros everywhere: no division by zero, no crash. */
    fixture(&f, model(ARCH_LLAMA, 0, 0, 0, 0, 0, 0, 0, false), 0, 0, 0, SHARD_NONE,
            RECOMPUTE_NONE, 0);
    f.t.epochs = 0;
    text = run_job(&f.j, &e, &errors);
    CHECK(isfinite(e.total_bytes) && isfinite(e.total_seconds), "zeros are finite");
    free(text);
    /* Not-a-number and infinite epochs, mfu, bytes per token. */
    fixture(&f, model(ARCH_LLAMA, 2, 64, 4, 2, 0, 128, 512, false), 1, 128, 1, SHARD_NONE,
            RECOMPUTE_NONE, 1e6);
    f.t.epochs = NAN; f.t.mfu = NAN; f.t.bytes_per_token = NAN;
    free(run_job(&f.j, &e, &errors));
    CHECK(e.steps_total == 0 && isfinite(e.total_seconds), "NaN epochs: no steps");
    f.t.epochs = INFINITY;
    free(run_job(&f.j, &e, &errors));
    CHECK(e.steps_total == 0 && isfinite(e.total_seconds), "infinite epochs: no steps");
    /* A job without a run or cluster is left alone. */
    PlanJob empty;
    memset(&empty, 0, sizeof empty);
    Diags *d = diags_new();
    CHECK(estimate_job(&empty, &e, d) == 0 && e.total_bytes == 0, "incomplete job");
    diags_free(d);
}

/* ---- communication (issue 12) ---- */

void test_collectives(void)
{
    /* 4 nodes x 8 GPUs, NVLink 4 (450 GB/s one way, 80% = 360 GB/s), 8 x 400
     * Gb/s (400 GB/s per node, 90% = 360 GB/s). An all-gather of a 1 GB tensor
     * over 32 ranks: each sends 31/32 GB = 968,750,000 bytes, 2.69097 ms on
     * either link; latency 28 NVLink hops x 1 us + 4 network hops x 3 us. */
    Fabric fab = {4, 8, 900e9, 8, 400e9, false, 0, 0};
    double sent, intra, inter, lat;
    estimate_collective(&fab, COLL_ALL_GATHER, 1e9, &sent, &intra, &inter, &lat);
    CHECK(sent == 968750000.0, "all-gather sends %.0f", sent);
    CHECK(near(intra, 968750000.0 / 360e9, 1e-12) && near(inter, 968750000.0 / 360e9, 1e-12),
          "intra %.6f inter %.6f", intra, inter);
    CHECK(near(lat, 28e-6 + 12e-6, 1e-12), "latency %.9f", lat);
    /* All-reduce: reduce-scatter + all-gather, twice the bytes and the hops. */
    estimate_collective(&fab, COLL_ALL_REDUCE, 1e9, &sent, &intra, &inter, &lat);
    CHECK(sent == 1937500000.0 && near(lat, 80e-6, 1e-12), "all-reduce %.0f, %.9f", sent, lat);
    /* Half the NICs: the network takes twice as long, NVLink the same. */
    fab.nics = 4;
    estimate_collective(&fab, COLL_REDUCE_SCATTER, 1e9, &sent, &intra, &inter, &lat);
    CHECK(near(inter, 968750000.0 / 180e9, 1e-12) && near(intra, 968750000.0 / 360e9, 1e-12), "4 NICs");
    /* RoCE hops are slower. */
    fab.roce = true;
    estimate_collective(&fab, COLL_REDUCE_SCATTER, 1e9, &sent, &intra, &inter, &lat);
    CHECK(near(lat, 28e-6 + 4 * 5e-6, 1e-12), "RoCE latency %.9f", lat);
    /* One node: no network; 7 hops. */
    Fabric one = {1, 8, 900e9, 8, 400e9, false, 0, 0};
    estimate_collective(&one, COLL_ALL_GATHER, 1e9, &sent, &intra, &inter, &lat);
    CHECK(sent == 875000000.0 && inter == 0 && near(lat, 7e-6, 1e-12), "one node");
    /* One rank: nothing. */
    Fabric alone = {1, 1, 900e9, 8, 400e9, false, 0, 0};
    estimate_collective(&alone, COLL_ALL_REDUCE, 1e9, &sent, &intra, &inter, &lat);
    CHECK(sent == 0 && intra == 0 && inter == 0 && lat == 0, "one rank");
}

void test_comm_volumes(void)
{
    /* Llama-3-8B: N = 8,030,261,248, bf16 (2 bytes), 32 layers, hidden 4096. */
    PlanModel l8 = model(ARCH_LLAMA, 32, 4096, 32, 8, 0, 14336, 128256, false);
    const double N = 8030261248.0;
    TrainStates full = {N, 0, 0, false, false};
    CommVolume v;
    /* ZeRO-3 (DeepSpeed), 2 micro-steps: per micro-step all-gather 2 x 2N
     * (forward, backward) and reduce-scatter 2N. Collectives: 32 x 7 + 2
     * modules gathered twice, and ceil(N / 4096^2) = ceil(478.64) = 479
     * reduce buckets: 931 per micro-step. */
    estimate_comm_volume(&l8, &full, SHARD_ZERO3, false, PREC_BF16, RECOMPUTE_NONE, 2, 64, &v);
    CHECK(v.allgather_per_micro == 32121044992.0 && v.allgather_bytes == 64242089984.0, "zero3 gathers %.0f",
          v.allgather_bytes);
    CHECK(v.reduce_scatter_bytes == 32121044992.0 && v.allreduce_bytes == 0, "zero3 reduce-scatter");
    CHECK(v.collectives == 1862, "zero3 collectives %.0f", v.collectives);
    /* With recompute (HF gradient checkpointing): a third gather per
     * micro-step for the recomputed forward: 3 x 2N = 48,181,567,488 bytes
     * per micro-step, twice that in 2; 2 x (3 x 226 + 479) = 2,314
     * collectives; the reduce-scatter
     * is unchanged. Selective is the same (LLaMA-Factory has no selective). */
    estimate_comm_volume(&l8, &full, SHARD_ZERO3, false, PREC_BF16, RECOMPUTE_FULL, 2, 64, &v);
    CHECK(v.allgather_per_micro == 48181567488.0 && v.allgather_bytes == 96363134976.0,
          "zero3 recompute gathers %.0f", v.allgather_bytes);
    CHECK(v.reduce_scatter_bytes == 32121044992.0 && v.collectives == 2314, "zero3 recompute collectives %.0f",
          v.collectives);
    estimate_comm_volume(&l8, &full, SHARD_ZERO3, false, PREC_BF16, RECOMPUTE_SELECTIVE, 1, 64, &v);
    CHECK(v.allgather_bytes == 6 * N, "zero3 selective gathers %.0f", v.allgather_bytes);
    /* Recompute changes nothing below ZeRO-3: ZeRO-2 keeps whole weights. */
    estimate_comm_volume(&l8, &full, SHARD_ZERO2, false, PREC_BF16, RECOMPUTE_FULL, 4, 64, &v);
    CHECK(v.allgather_bytes == 16060522496.0, "zero2 recompute");
    /* ZeRO-2, 4 micro-steps: reduce-scatter every micro-step, gather once. */
    estimate_comm_volume(&l8, &full, SHARD_ZERO2, false, PREC_BF16, RECOMPUTE_NONE, 4, 64, &v);
    CHECK(v.reduce_scatter_bytes == 4 * 16060522496.0 && v.allgather_bytes == 16060522496.0, "zero2");
    /* ZeRO-1: reduce-scatter at the boundary and gather once; none: all-reduce. */
    estimate_comm_volume(&l8, &full, SHARD_ZERO1, false, PREC_BF16, RECOMPUTE_NONE, 4, 64, &v);
    CHECK(v.reduce_scatter_bytes == 16060522496.0 && v.allgather_bytes == 16060522496.0, "zero1");
    estimate_comm_volume(&l8, &full, SHARD_NONE, false, PREC_BF16, RECOMPUTE_NONE, 4, 64, &v);
    CHECK(v.allreduce_bytes == 16060522496.0 && v.collectives == 17, "stage 0: %.0f in %.0f", v.allreduce_bytes,
          v.collectives);
    /* The llmc CUDA trainer: fp32 gradients, per-layer all-reduce (33). */
    estimate_comm_volume(&l8, &full, SHARD_NONE, true, PREC_BF16, RECOMPUTE_NONE, 4, 64, &v);
    CHECK(v.allreduce_bytes == 32121044992.0 && v.collectives == 33, "llmc all-reduce");
    estimate_comm_volume(&l8, &full, SHARD_ZERO1, true, PREC_BF16, RECOMPUTE_NONE, 4, 64, &v);
    CHECK(v.reduce_scatter_bytes == 32121044992.0 && v.allgather_bytes == 16060522496.0, "llmc zero1");
    /* ZeRO-2: each of the 4 micro-steps reduces the fp32 gradients (4 x 4P),
     * one bf16 gather after AdamW (2P); ZeRO-3: every weight gathered before
     * forward and before backward in each micro-step (4 x 2 x 2P). */
    estimate_comm_volume(&l8, &full, SHARD_ZERO2, true, PREC_BF16, RECOMPUTE_NONE, 4, 64, &v);
    CHECK(v.reduce_scatter_bytes == 4 * 32121044992.0 && v.allgather_bytes == 16060522496.0, "llmc zero2");
    estimate_comm_volume(&l8, &full, SHARD_ZERO3, true, PREC_BF16, RECOMPUTE_FULL, 4, 64, &v);
    CHECK(v.reduce_scatter_bytes == 4 * 32121044992.0 && v.allgather_bytes == 8 * 16060522496.0, "llmc zero3");
    /* LoRA-like: 1e7 trainable, the rest frozen: ZeRO-3 still gathers every
     * weight, but reduces only the adapters' gradients (2e7 bytes). */
    TrainStates lora = {1e7, N - 1e7, 2, false, false};
    estimate_comm_volume(&l8, &lora, SHARD_ZERO3, false, PREC_BF16, RECOMPUTE_NONE, 1, 64, &v);
    CHECK(v.allgather_bytes == 4 * N && v.reduce_scatter_bytes == 2e7, "lora zero3 %.0f", v.reduce_scatter_bytes);
    /* One rank: no communication. */
    estimate_comm_volume(&l8, &full, SHARD_ZERO3, false, PREC_BF16, RECOMPUTE_NONE, 1, 1, &v);
    CHECK(v.allgather_bytes == 0 && v.collectives == 0, "one rank");
}

void test_step_breakdown(void)
{
    Fixture f;
    Estimate e;
    int errors;
    /* Qwen2.5-72B, ZeRO-3 (llamafactory), 32 nodes x 8 H100, context 512
     * (SFT-length sequences), packed, recompute full. Per micro-step: 4 x 2N bytes of tensor
     * (three gathers: forward, recomputed forward, backward; one
     * reduce-scatter), N = 72,706,203,648: 581,649,629,184 bytes; each GPU
     * sends 255/256 of it, at 360 GB/s: 1.60938 s on NVLink and on the
     * network. Latency: 3 x (80 x 7 + 2) + ceil(N / 8192^2) = 1686 + 1084 =
     * 2770 collectives x (224 x 1 us + 32 x 3 us + 50 us launch) = 1.0249 s. */
    PlanModel q72 = model(ARCH_QWEN2, 80, 8192, 64, 8, 0, 29568, 152064, false);
    fixture(&f, q72, 32, 512, 1, SHARD_ZERO3, RECOMPUTE_FULL, 1e9);
    f.t.backend = BACKEND_LLAMAFACTORY;
    set_fabric(&f);
    free(run_job(&f.j, &e, &errors));
    double sent = 581649629184.0 * 255 / 256;
    CHECK(e.fabric_known && near(e.comm_sent_bytes, sent, 1e-12), "sent %.0f", e.comm_sent_bytes);
    CHECK(near(e.comm_intra_seconds, sent / 360e9, 1e-9) && near(e.comm_inter_seconds, sent / 360e9, 1e-9),
          "intra %.5f inter %.5f", e.comm_intra_seconds, e.comm_inter_seconds);
    CHECK(e.comm_collectives == 2770 && near(e.comm_latency_seconds, 2770 * 370e-6, 1e-9), "latency %.6f",
          e.comm_latency_seconds);
    CHECK(near(e.comm_seconds, sent / 360e9 + 2770 * 370e-6, 1e-9), "comm %.5f", e.comm_seconds);
    CHECK(near(e.step_seconds, e.compute_seconds + e.comm_exposed_seconds, 1e-12) &&
          near(e.comm_overlap_seconds + e.comm_exposed_seconds, e.comm_seconds, 1e-12), "step = compute + exposed");
    /* At batch 1 the collectives bound the step; they do not grow with the
     * batch, so tokens per second per GPU rise with it, and compute does not
     * bound it until the batch amortises them (the shape of ZeRO++'s and
     * FSDP's measurements). */
    double comm1 = e.comm_seconds, tps1 = e.tokens_per_second, compute1 = e.compute_seconds;
    CHECK(e.comm_bound, "72B at batch 1 on 32 nodes is communication-bound");
    f.t.micro_batch = 4;
    free(run_job(&f.j, &e, &errors));
    CHECK(near(e.comm_seconds, comm1, 1e-12) && near(e.compute_seconds, 4 * compute1, 1e-12),
          "comm constant, compute x4");
    CHECK(e.tokens_per_second > 1.5 * tps1, "batch 4 is faster per token: %.0f vs %.0f", e.tokens_per_second, tps1);
    double tps4 = e.tokens_per_second;
    f.t.micro_batch = 8;
    free(run_job(&f.j, &e, &errors));
    CHECK(!e.comm_bound && e.tokens_per_second > tps4, "batch 8: compute-bound, faster still");
    /* Total time follows: the same tokens at batch 1 take longer than at 8. */
    double t8 = e.total_seconds;
    f.t.micro_batch = 1;
    free(run_job(&f.j, &e, &errors));
    CHECK(e.total_seconds > 1.3 * t8, "time at batch 1 %.0f s > at batch 8 %.0f s", e.total_seconds, t8);
    /* Gradient accumulation repeats ZeRO-3's collectives per micro-step. */
    f.t.grad_accum = 4;
    free(run_job(&f.j, &e, &errors));
    CHECK(near(e.comm_seconds, 4 * comm1, 1e-9), "ga 4: 4 x the collectives");
    /* One node: nothing crosses the network. */
    f.t.grad_accum = 1;
    f.j.nodes = 1;
    free(run_job(&f.j, &e, &errors));
    CHECK(e.comm_inter_seconds == 0 && e.comm_intra_seconds > 0, "one node: NVLink only");
    /* No fabric known: communication not estimated, compute only. */
    f.j.nodes = 4;
    f.c.nics = 0;
    free(run_job(&f.j, &e, &errors));
    CHECK(!e.fabric_known && e.comm_seconds == 0 && e.step_seconds == e.compute_seconds, "unknown fabric");
    /* The llmc trainer without ZeRO-1 all-reduces fp32 gradients during
     * backward: with 8B at 4 x 4096 on 2 nodes the reduction hides. */
    PlanModel l8 = model(ARCH_LLAMA, 32, 4096, 32, 8, 0, 14336, 128256, false);
    fixture(&f, l8, 2, 4096, 4, SHARD_NONE, RECOMPUTE_FULL, 1e9);
    set_fabric(&f);
    free(run_job(&f.j, &e, &errors));
    CHECK(e.comm_allreduce_bytes == 4 * 8030261248.0 && e.comm_overlap_seconds > 0 &&
          e.comm_exposed_seconds < e.comm_seconds, "llmc: overlapped all-reduce");
}

void test_train_states(void)
{
    double w, g, o, h;
    /* Full fine-tuning matches the ZeRO paper's accounting. */
    TrainStates full = {7.5e9, 0, 0, false, false};
    estimate_train_states(&full, PREC_BF16, SHARD_ZERO2, 64, &w, &g, &o, &h);
    CHECK(w == 15e9 && g == 15e9 / 64 && o == 90e9 / 64 && h == 0, "full zero2");
    /* LoRA: 1e7 adapters trained, 8e9 frozen in bf16, ZeRO-3 over 8. */
    TrainStates lora = {1e7, 8e9, 2, false, false};
    estimate_train_states(&lora, PREC_BF16, SHARD_ZERO3, 8, &w, &g, &o, &h);
    CHECK(w == (2e7 + 16e9) / 8 && g == 2e7 / 8 && o == 12e7 / 8, "lora zero3 %.0f %.0f %.0f", w, g, o);
    /* QLoRA: frozen weights at 4 bits + fp16 block scales (0.5625 bytes), no sharding. */
    TrainStates qlora = {1e7, 8e9, 0.5625, false, false};
    estimate_train_states(&qlora, PREC_BF16, SHARD_NONE, 1, &w, &g, &o, &h);
    CHECK(w == 2e7 + 4.5e9 && g == 2e7 && o == 12e7, "qlora");
    /* Offload (ZeRO-3 over 16): optimizer states and the fp32 gradient
     * partition to the host, then the 16-bit weights too. */
    TrainStates off = {32e9, 0, 0, true, false};
    estimate_train_states(&off, PREC_BF16, SHARD_ZERO3, 16, &w, &g, &o, &h);
    CHECK(o == 0 && h == (12 * 32e9 + 4 * 32e9) / 16 && w == 64e9 / 16, "offload optimizer: host %.0f", h);
    off.offload_params = true;
    estimate_train_states(&off, PREC_BF16, SHARD_ZERO3, 16, &w, &g, &o, &h);
    CHECK(w == 0 && h == (16 * 32e9 + 2 * 32e9) / 16, "offload params: host %.0f", h);
    /* Parameter offload is ZeRO-3 only; optimizer offload needs a stage. */
    estimate_train_states(&off, PREC_BF16, SHARD_NONE, 16, &w, &g, &o, &h);
    CHECK(h == 0 && o == 12 * 32e9, "no offload without ZeRO");
    /* FLOPs: frozen matrices have no weight gradients. */
    CHECK(estimate_flops_per_token(1e9, 1, 1e6, RECOMPUTE_NONE, ATTN_FLASH) == 6e9 + 3e6, "full 6N");
    CHECK(estimate_flops_per_token(1e9, 0, 1e6, RECOMPUTE_NONE, ATTN_FLASH) == 4e9 + 3e6, "frozen 4N");
    CHECK(estimate_flops_per_token(1e9, 0, 1e6, RECOMPUTE_FULL, ATTN_FLASH) == 6e9 + 4e6, "frozen + recompute");
}

void test_host_memory(void)
{
    Fixture f;
    Estimate e;
    int errors;
    /* 72B ZeRO-3 (llamafactory) on one node, job mem = 64 GB:
     * 8 x 3 GiB processes + 8 x 5 GB checkpoint files + 64 workers (the
     * node's CPUs, capped at 64) x 0.5 GiB + 8 x 0.25 GiB pinned
     * = 58 GiB + 40 GB = 102.277 GB (95.25 GiB) > 64 GB. */
    PlanModel q72 = model(ARCH_QWEN2, 80, 8192, 64, 8, 0, 29568, 152064, false);
    fixture(&f, q72, 1, 2560, 1, SHARD_ZERO3, RECOMPUTE_FULL, 1e8);
    f.t.backend = BACKEND_LLAMAFACTORY;
    f.j.mem_bytes = 64000000000ull;
    f.j.mem_at = (SrcRange){{"t.llm", 31, 3}, {"t.llm", 31, 14}};
    char *text = run_job(&f.j, &e, &errors);
    double want = 58 * GIB + 40e9;
    CHECK(near(e.host_bytes, want, 1e-12) && !e.host_fits, "host %.0f, want %.0f", e.host_bytes, want);
    CHECK(strstr(text, "t.llm:31:3: error: host memory does not fit: 95.3 GiB per node needed, the job's mem is "
                       "59.6 GiB") && strstr(text, "help: mem = 96 GiB fits"), "host error:\n%s", text);
    free(text);
    /* Without ZeRO-3 every rank builds the 16-bit model on the host: 8 x 2N. */
    f.t.shard = SHARD_ZERO2;
    f.j.mem_bytes = 0;
    f.c.memory_bytes = 1ull << 40;
    text = run_job(&f.j, &e, &errors);
    CHECK(e.host_model_bytes == 8 * 2 * 72706203648.0 && !e.host_fits &&
          strstr(text, "the node has 1024.0 GiB") && strstr(text, "shard = zero3 loads one checkpoint"),
          "zero2 host:\n%s", text);
    free(text);
    /* The llmc trainer: 8P per rank (the fp32 model and its GPU-layout copy) +
     * 16P for rank 0's checkpoint gather (the moments and their copies). */
    PlanModel q05 = model(ARCH_QWEN2, 24, 896, 14, 2, 0, 4864, 151936, true);
    fixture(&f, q05, 1, 2048, 4, SHARD_NONE, RECOMPUTE_NONE, 1e8);
    free(run_job(&f.j, &e, &errors));
    CHECK(e.host_model_bytes == (8 * 8 + 16) * 494032768.0 && e.host_fits, "llmc host %.0f", e.host_model_bytes);
    /* Under offload (one GPU): no staging, the 12P host state is the model. */
    fixture(&f, q05, 1, 2048, 4, SHARD_NONE, RECOMPUTE_NONE, 1e8);
    f.c.gpus_per_node = 1;
    f.t.offload = OFFLOAD_OPTIMIZER;
    free(run_job(&f.j, &e, &errors));
    CHECK(e.host_model_bytes == 0 && e.host_offload_bytes == 12 * 494032768.0, "llmc offload host %.0f + %.0f",
          e.host_model_bytes, e.host_offload_bytes);
    /* ZeRO-3 on several ranks (the llmc trainer's sharded state): a rank holds
     * its part of the fp32 weights, m, v and their GPU-layout staging, 24P / N,
     * and nothing is gathered: 72B on 32 x 8 GPUs, 8 x 24 x P / 256 = 54.5 GB a
     * node. A node reads its ranks' 2P / 32 of the HF weights (4.5 GB, 9.1 s at
     * 0.5 GB/s) and every node writes its part of the 12P checkpoint
     * (27.3 s at 1 GB/s a node, instead of 14.5 min by rank 0 alone). */
    const double P72 = 72706203648.0;
    fixture(&f, q72, 32, 2560, 4, SHARD_ZERO3, RECOMPUTE_FULL, 1e8);
    char *t72 = run_job(&f.j, &e, &errors);
    CHECK(e.host_model_bytes == 8 * 24 * P72 / 256 && e.host_fits && near(e.load_bytes, 2 * P72 / 32, 1e-12) &&
          near(e.checkpoint_bytes, 12 * P72, 1e-12) && near(e.checkpoint_write_seconds, 12 * P72 / 32 / 1e9, 1e-12),
          "llmc zero3 x 256: host %.0f, load %.0f, checkpoint %.0f in %.1f s", e.host_model_bytes, e.load_bytes,
          e.checkpoint_bytes, e.checkpoint_write_seconds);
    free(t72);
    /* from scratch: the random initialisation is one sequence over the whole
     * model, made on every rank (4P more each); nothing is read */
    q72.from_scratch = true;
    fixture(&f, q72, 32, 2560, 4, SHARD_ZERO3, RECOMPUTE_FULL, 1e8);
    free(run_job(&f.j, &e, &errors));
    CHECK(e.host_model_bytes == 8 * (24 * P72 / 256 + 4 * P72) && e.load_bytes == 0, "llmc zero3 scratch: host %.0f",
          e.host_model_bytes);
    q72.from_scratch = false;
    /* ZeRO-2 converts every weight on every rank: the whole 8P a rank and the
     * gather to rank 0 (as one rank) */
    fixture(&f, q72, 32, 2560, 4, SHARD_ZERO2, RECOMPUTE_FULL, 1e8);
    free(run_job(&f.j, &e, &errors));
    CHECK(e.host_model_bytes == (8 * 8 + 16) * P72 && !e.host_fits && e.load_bytes == 2 * P72 &&
          near(e.checkpoint_write_seconds, 12 * P72 / 1e9, 1e-12), "llmc zero2 x 256: host %.0f", e.host_model_bytes);
    /* one node, ZeRO-3 + offload: each rank pins its 16P / 8 (master, m, v and
     * the summed fp32 gradient) beside its 12P / 8 of the loop's parts (the
     * pinned shard is the GPU layout: no staging): 28P = 2,036 GB + 6 GiB of
     * processes and pinned buffers, inside a 2 TiB node. On the GPU the
     * gradient is the buckets alone. Per step and GPU, AdamW in place: 20 bytes
     * of the shard up (the norm's read of the gradient, then gradient, master,
     * m, v), 12 down, and the one micro-step's gradient down, 4 bytes. */
    fixture(&f, q72, 1, 2560, 4, SHARD_ZERO3, RECOMPUTE_FULL, 1e8);
    f.t.offload = OFFLOAD_OPTIMIZER;
    f.c.host_link_bytes_per_s = 128e9;
    free(run_job(&f.j, &e, &errors));
    double grads_off = e.grads_bytes;
    CHECK(e.host_model_bytes == 12 * P72 && e.host_offload_bytes == 16 * P72 && e.host_fits &&
          near(e.offload_h2d_bytes, 20 * P72 / 8, 1e-12) && near(e.offload_d2h_bytes, 16 * P72 / 8, 1e-12) &&
          near(e.offload_pcie_exposed_seconds / e.offload_pcie_seconds, 20.0 / 36.0, 1e-12),
          "llmc zero3 + offload, 1 node: host %.0f + %.0f, up %.0f down %.0f", e.host_model_bytes,
          e.host_offload_bytes, e.offload_h2d_bytes, e.offload_d2h_bytes);
    f.t.offload = OFFLOAD_NONE;
    free(run_job(&f.j, &e, &errors));
    /* the shard's fp32 gradient, whole GRAD_NORM_BLOCKs: at least 4P / 8 */
    CHECK(e.grads_bytes - grads_off >= 4 * P72 / 8 && e.grads_bytes - grads_off < 4 * P72 / 8 * 1.001,
          "llmc zero3 1 node: the gradient shard leaves the GPU under offload (%.0f)", e.grads_bytes - grads_off);
}

void test_offload_time(void)
{
    /* Volumes per GPU per optimizer step (DeepSpeed as emitted, bf16 copies):
     * 32e9 parameters, ZeRO-3 over 16 ranks, 2 micro-steps. Optimizer offload:
     * the gradient partition down every micro-step, 2 x 2 x 32e9 / 16 = 8e9
     * bytes; the updated partition up once, 2 x 32e9 / 16 = 4e9. */
    TrainStates off = {32e9, 0, 0, true, false};
    double d2h, up, fetch;
    estimate_offload_volume(&off, SHARD_ZERO3, PREC_BF16, RECOMPUTE_NONE, 2, 16, &d2h, &up, &fetch);
    CHECK(d2h == 8e9 && up == 4e9 && fetch == 0, "optimizer offload %.0f %.0f %.0f", d2h, up, fetch);
    /* offload = all: the CPU step writes the host copy (nothing up after it),
     * but both gathers of each micro-step fetch the partition first:
     * 2 micro x 2 gathers x 2 bytes x 32e9 / 16 = 16e9. */
    off.offload_params = true;
    estimate_offload_volume(&off, SHARD_ZERO3, PREC_BF16, RECOMPUTE_NONE, 2, 16, &d2h, &up, &fetch);
    CHECK(d2h == 8e9 && up == 0 && fetch == 16e9, "offload all %.0f %.0f %.0f", d2h, up, fetch);
    /* With recompute the recomputed forward gathers, and fetches, too:
     * 2 micro x 3 gathers x 2 bytes x 32e9 / 16 = 24e9. */
    estimate_offload_volume(&off, SHARD_ZERO3, PREC_BF16, RECOMPUTE_FULL, 2, 16, &d2h, &up, &fetch);
    CHECK(d2h == 8e9 && up == 0 && fetch == 24e9, "offload all, recompute %.0f", fetch);
    /* LoRA under ZeRO-3 with offload = all over 8: the adapters' gradients
     * (2 x 1e7 / 8) down, every weight (frozen too) fetched: 2 x 2 x 8.01e9 / 8. */
    TrainStates lora = {1e7, 8e9, 2, true, true};
    estimate_offload_volume(&lora, SHARD_ZERO3, PREC_BF16, RECOMPUTE_NONE, 1, 8, &d2h, &up, &fetch);
    CHECK(d2h == 2.5e6 && up == 0 && fetch == 4.005e9, "lora offload %.0f %.0f", d2h, fetch);
    /* No offload, or no ZeRO stage: nothing moves. */
    TrainStates none = {32e9, 0, 0, false, false};
    estimate_offload_volume(&none, SHARD_ZERO3, PREC_BF16, RECOMPUTE_NONE, 2, 16, &d2h, &up, &fetch);
    CHECK(d2h == 0 && up == 0 && fetch == 0, "no offload");
    /* CPU Adam: 0.25e9 parameters/s per thread, 1.8e9 per node. */
    CHECK(estimate_cpu_adam_rate(1, 8) == 0.225e9, "8 ranks x 1 thread: the node's ceiling");
    CHECK(estimate_cpu_adam_rate(1, 4) == 0.25e9, "4 ranks x 1 thread");
    CHECK(estimate_cpu_adam_rate(16, 4) == 0.45e9, "16 threads: capped at 1.8e9 / 4");

    Fixture f;
    Estimate e;
    int errors;
    /* Qwen2.5-72B, ZeRO-3, offload = all, 4 nodes x 8 H100 (PCIe 5.0: 128 GB/s
     * quoted, 51.2 GB/s one way at 80%). N = 72,706,203,648; per rank N / 32
     * = 2,272,068,864 parameters. 8 ranks per node and no OMP_NUM_THREADS:
     * torchrun's 1 thread each, 8 x 0.25e9 = 2e9 > 1.8e9, so 0.225e9 per
     * rank: 10.0981 s of CPU Adam. Copies: 2N/32 down, 3 x 2N/32 fetched
     * (recompute full: forward, recomputed forward and backward gather). */
    const double N = 72706203648.0;
    PlanModel q72 = model(ARCH_QWEN2, 80, 8192, 64, 8, 0, 29568, 152064, false);
    fixture(&f, q72, 4, 2048, 1, SHARD_ZERO3, RECOMPUTE_FULL, 1e9);
    f.t.backend = BACKEND_LLAMAFACTORY;
    f.t.offload = OFFLOAD_ALL;
    set_fabric(&f);
    f.c.host_link_bytes_per_s = 128e9;
    free(run_job(&f.j, &e, &errors));
    CHECK(e.offload_time_known && e.cpu_optimizer_threads == 1, "threads %d", e.cpu_optimizer_threads);
    CHECK(e.cpu_optimizer_params == N / 32 && near(e.cpu_optimizer_seconds, N / 32 / 0.225e9, 1e-12),
          "cpu adam %.4f s", e.cpu_optimizer_seconds);
    CHECK(e.offload_d2h_bytes == 2 * N / 32 && e.offload_h2d_bytes == 6 * N / 32, "copies %.0f %.0f",
          e.offload_d2h_bytes, e.offload_h2d_bytes);
    CHECK(near(e.offload_pcie_seconds, 8 * N / 32 / 51.2e9, 1e-12), "pcie %.4f", e.offload_pcie_seconds);
    /* The gradients wait (2N/32 at 51.2 GB/s = 88.8 ms); the fetches hide at most
     * all but a module's share, so the exposed copies lie between. */
    double grads = 2 * N / 32 / 51.2e9;
    CHECK(e.offload_pcie_exposed_seconds >= grads - 1e-12 && e.offload_pcie_exposed_seconds <= e.offload_pcie_seconds,
          "exposed copies %.4f", e.offload_pcie_exposed_seconds);
    CHECK(near(e.step_seconds, e.compute_seconds + e.comm_exposed_seconds + e.offload_exposed_seconds, 1e-12) &&
          near(e.offload_exposed_seconds, e.offload_pcie_exposed_seconds + e.cpu_optimizer_seconds, 1e-12),
          "step = compute + exposed comm + exposed offload");
    /* The job's OMP_NUM_THREADS: 2 threads per rank would be 0.5e9, but the
     * node's ceiling still gives 0.225e9; with 2 GPUs a node it is 0.5e9. */
    PlanEnvVar omp = {"OMP_NUM_THREADS", "2", BATCH_AT};
    f.j.site.env = &omp; f.j.site.nenv = 1;
    free(run_job(&f.j, &e, &errors));
    CHECK(e.cpu_optimizer_threads == 2 && e.cpu_optimizer_params_per_s == 0.225e9, "env threads");
    f.c.gpus_per_node = 2;
    f.j.nodes = 16;
    free(run_job(&f.j, &e, &errors));
    CHECK(e.cpu_optimizer_params_per_s == 0.5e9, "2 ranks per node x 2 threads: %.0f", e.cpu_optimizer_params_per_s);
    f.j.site.nenv = 0; f.c.gpus_per_node = 8; f.j.nodes = 4;

    /* ZeRO-2 with the optimizer offloaded: everything on the host link waits. */
    f.t.shard = SHARD_ZERO2;
    f.t.offload = OFFLOAD_OPTIMIZER;
    free(run_job(&f.j, &e, &errors));
    CHECK(e.offload_d2h_bytes == 2 * N / 32 && e.offload_h2d_bytes == 2 * N / 32 &&
          near(e.offload_pcie_exposed_seconds, e.offload_pcie_seconds, 1e-12), "zero2 offload");
    /* No host link known: not estimated, the step is compute + communication. */
    f.c.host_link_bytes_per_s = 0;
    free(run_job(&f.j, &e, &errors));
    CHECK(!e.offload_time_known && e.offload_exposed_seconds == 0 &&
          near(e.step_seconds, e.compute_seconds + e.comm_exposed_seconds, 1e-12), "unknown host link");
    /* The llmc trainer has no offload: nothing, whatever the key says. */
    f.c.host_link_bytes_per_s = 128e9;
    f.t.backend = BACKEND_LLMC; f.t.shard = SHARD_ZERO1; f.t.offload = OFFLOAD_NONE;
    free(run_job(&f.j, &e, &errors));
    CHECK(!e.offload_time_known && e.offload_exposed_seconds == 0, "llmc: no offload");

    /* One GPU, Llama-3-8B, ZeRO-3, offload = all, batch 8 x 4096: no
     * collectives; each pass's fetch (2N bytes at 51.2 GB/s = 0.3137 s) is
     * shorter than its compute, so only the first module's share shows: the
     * gradients 2N / 51.2e9 + 2 passes x fetch / (32 x 7 + 2). CPU Adam: one
     * rank with 224 cores runs at the node's 1.8e9: N / 1.8e9. */
    const double N8 = 8030261248.0;
    PlanModel l8 = model(ARCH_LLAMA, 32, 4096, 32, 8, 0, 14336, 128256, false);
    fixture(&f, l8, 1, 4096, 8, SHARD_ZERO3, RECOMPUTE_FULL, 1e9);
    f.t.backend = BACKEND_LLAMAFACTORY;
    f.t.offload = OFFLOAD_ALL;
    set_fabric(&f);
    f.c.gpus_per_node = 1;
    f.c.host_link_bytes_per_s = 128e9;
    free(run_job(&f.j, &e, &errors));
    double fetch8 = 2 * N8 / 51.2e9;
    CHECK(near(e.offload_pcie_exposed_seconds, 2 * N8 / 51.2e9 + 2 * fetch8 / 226, 1e-9), "one GPU exposed %.5f",
          e.offload_pcie_exposed_seconds);
    CHECK(e.cpu_optimizer_threads == 224 && near(e.cpu_optimizer_seconds, N8 / 1.8e9, 1e-12), "one GPU cpu %.4f",
          e.cpu_optimizer_seconds);

    /* Host memory: the same 72B with offload = all on one node of 8 whose
     * memory is 512 GiB. Offloaded per rank (16 + 2) x N / 8, x 8 ranks = 18N
     * = 1,308,711,665,664 bytes (1218.8 GiB) + 8 x 3 GiB processes + 8 x 5 GB
     * checkpoint files + 64 x 0.5 GiB workers + 8 x 0.25 GiB pinned:
     * 58 GiB + 1348.711665664e9 bytes = 1314.1 GiB > 512 GiB: an error at the
     * cluster's memory with the figures. */
    fixture(&f, q72, 1, 2048, 1, SHARD_ZERO3, RECOMPUTE_FULL, 1e9);
    f.t.backend = BACKEND_LLAMAFACTORY;
    f.t.offload = OFFLOAD_ALL;
    set_fabric(&f);
    f.c.host_link_bytes_per_s = 128e9;
    f.c.memory_bytes = 512ull << 30;
    f.c.memory_at = (SrcRange){{"t.llm", 7, 3}, {"t.llm", 7, 20}};
    char *text = run_job(&f.j, &e, &errors);
    CHECK(e.host_offload_bytes == 18 * N && near(e.host_bytes, 58 * GIB + 40e9 + 18 * N, 1e-12) && !e.host_fits,
          "host %.0f", e.host_bytes);
    CHECK(errors >= 1 && strstr(text, "t.llm:7:3: error: host memory does not fit: 1314.1 GiB per node needed, the "
                                      "node has 512.0 GiB") && strstr(text, "offloaded states 1218.8 GiB"),
          "offload host error:\n%s", text);
    free(text);
}

void test_padding_stats(void)
{
    /* Two bins of 100 tokens, one record in each (lengths 99 and 199):
     * b = 1: E = (99 + 199) / 2 = 149; b = 2: max is 99 only if both are
     * short (1/4): 99/4 + 199 x 3/4 = 174; capped at a context of 150:
     * 99/4 + 150 x 3/4 = 137.25. */
    double counts[2] = {1, 1};
    CHECK(estimate_padded_length(counts, 2, 100, 1, 1e9) == 149, "b=1");
    CHECK(estimate_padded_length(counts, 2, 100, 2, 1e9) == 174, "b=2");
    CHECK(estimate_padded_length(counts, 2, 100, 2, 150) == 137.25, "capped");
    /* A stats file beside the data decides tokens, records and padding. */
    char dir[] = "/tmp/llmc-est-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "temp dir");
    char data[256], stats[300];
    snprintf(data, sizeof data, "%s/sft.json", dir);
    snprintf(stats, sizeof stats, "%s.stats.json", data);
    FILE *fp = fopen(stats, "w");
    CHECK(fp != NULL, "write stats");
    if (!fp) return;
    /* 3000 records of 0-255 tokens, 1000 of 256-511: 700,000 tokens. */
    fputs("{\"format\": \"llmc-data-stats\", \"version\": 1, \"records\": 4000, \"tokens\": 700000,\n"
          " \"length_histogram\": {\"bin_tokens\": 256, \"counts\": [3000, 1000]}}\n", fp);
    fclose(fp);
    Fixture f;
    Estimate e;
    int errors;
    fixture(&f, model(ARCH_QWEN2, 24, 896, 14, 2, 0, 4864, 151936, true), 1, 2048, 4, SHARD_NONE,
            RECOMPUTE_NONE, -1);
    f.t.stage = STAGE_SFT; f.t.packing = false;
    f.t.backend = BACKEND_LLAMAFACTORY;   /* transformers computes a batch at its longest record */
    f.ds.file = data;
    free(run_job(&f.j, &e, &errors));
    /* b = 4: P(all four short) = 0.75^4 = 0.31640625: E = 255 x 0.31640625 +
     * 511 x 0.68359375 = 429.9999... = 430. */
    CHECK(e.tokens_source == TOKENS_FROM_STATS && e.tokens_per_epoch == 700000 && e.samples_per_epoch == 4000 &&
          e.sequences_per_epoch == 4000, "stats tokens: %s %.0f", estimate_token_source_name(e.tokens_source),
          e.tokens_per_epoch);
    CHECK(e.padding_from_stats && near(e.padded_seq_tokens, 255 * 0.31640625 + 511 * 0.68359375, 1e-12) &&
          near(e.seq_tokens, 175, 1e-12), "padded %.3f, mean %.3f", e.padded_seq_tokens, e.seq_tokens);
    /* The llmc trainer computes unpacked rows whole: prepare pads each record to the context. */
    f.t.backend = BACKEND_LLMC;
    free(run_job(&f.j, &e, &errors));
    CHECK(e.padding_full_rows && !e.padding_from_stats && e.padded_seq_tokens == 2048, "llmc rows %.0f",
          e.padded_seq_tokens);
    f.t.backend = BACKEND_LLAMAFACTORY;
    /* Packed: no padding. */
    f.t.packing = true;
    free(run_job(&f.j, &e, &errors));
    CHECK(!e.padding_from_stats && e.padded_seq_tokens == e.seq_tokens, "packed: no padding");
    /* A malformed stats file is ignored: the file size is used instead (none here). */
    fp = fopen(stats, "w");
    if (fp) { fputs("{\"format\": \"other\"}", fp); fclose(fp); }
    free(run_job(&f.j, &e, &errors));
    CHECK(e.tokens_source != TOKENS_FROM_STATS, "malformed stats ignored");
    remove(stats);
    remove(dir);
}

/* No histogram: the mean sample length with lengths exponentially spread.
 * Far from the context the cut does nothing: E[max of b exponentials of mean
 * m] = m x (1 + 1/2 + ... + 1/b): 100, 150, 183.33, 208.33 at b = 1..4. At a
 * context of 200 and a cut mean of 100, theta solves theta (1 - e^(-200 /
 * theta)) = 100 (theta = 125.48...), and E[max of 2] = integral over [0, 200]
 * of 1 - (1 - e^(-x/theta))^2 = 2 x 100 - theta/2 (1 - e^(-400/theta)) =
 * 138.8 (checked against the closed form). */
void test_padding_mean(void)
{
    CHECK(near(estimate_padded_length_mean(100, 1, 1e9), 100, 1e-6), "b=1: the mean");
    CHECK(near(estimate_padded_length_mean(100, 2, 1e9), 150, 1e-6), "b=2");
    CHECK(near(estimate_padded_length_mean(100, 4, 1e9), 100 * (1 + 0.5 + 1.0 / 3 + 0.25), 1e-6), "b=4");
    double lo = 100, hi = 1e6;
    for (int i = 0; i < 200; i++) {
        double mid = (lo + hi) / 2;
        if (mid * -expm1(-200 / mid) < 100) lo = mid; else hi = mid;
    }
    double closed = 200 - lo / 2 * -expm1(-400 / lo);
    CHECK(near(estimate_padded_length_mean(100, 2, 200), closed, 1e-6), "cut at 200: %.4f vs %.4f",
          estimate_padded_length_mean(100, 2, 200), closed);
    CHECK(estimate_padded_length_mean(300, 4, 200) == 200, "mean at the context: the context");
    /* In a job: unpacked sft with stated samples and size, no stats file. */
    Fixture f;
    Estimate e;
    int errors;
    fixture(&f, model(ARCH_QWEN2, 24, 896, 14, 2, 0, 4864, 151936, true), 1, 4096, 4, SHARD_NONE,
            RECOMPUTE_NONE, 400000);
    f.t.stage = STAGE_SFT; f.t.packing = false; f.t.backend = BACKEND_LLAMAFACTORY;
    f.ds.samples = 4000;
    free(run_job(&f.j, &e, &errors));
    CHECK(e.padding_assumed && near(e.seq_tokens, 100, 1e-12) &&
          near(e.padded_seq_tokens, estimate_padded_length_mean(100, 4, 4096), 1e-12) &&
          e.padded_seq_tokens > 208 && e.padded_seq_tokens < 208.34, "assumed padding %.3f", e.padded_seq_tokens);
}

/* DeepSpeed's hierarchical partitioning: the backward's and the recomputed
 * forward's gathers stay inside the node. Qwen2.5-72B on 32 x 8 H100 at
 * batch 1 (test_step_breakdown's plan): of the 3 x 2N bytes gathered per
 * micro-step, 2 x 2N go round rings of 8 GPUs: each GPU sends 7/8 of them
 * over NVLink and nothing over the network, so the network carries only the
 * forward's gather and the reduce-scatter, 2 x 2N x 255/256. */
void test_hpz(void)
{
    Fixture f;
    Estimate e, h;
    int errors;
    PlanModel q72 = model(ARCH_QWEN2, 80, 8192, 64, 8, 0, 29568, 152064, false);
    fixture(&f, q72, 32, 512, 1, SHARD_ZERO3, RECOMPUTE_FULL, 1e9);
    f.t.backend = BACKEND_LLAMAFACTORY;
    set_fabric(&f);
    free(run_job(&f.j, &e, &errors));
    estimate_job_hpz(&f.j, 8, &h);
    double n2 = 2 * 72706203648.0;
    double sent = 2 * n2 * 255 / 256 + 2 * n2 * 7 / 8;
    CHECK(near(h.comm_sent_bytes, sent, 1e-12), "sent %.0f vs %.0f", h.comm_sent_bytes, sent);
    CHECK(near(h.comm_inter_seconds, 2 * n2 * 255 / 256 / 360e9, 1e-9), "network: forward gather + reduce-scatter");
    CHECK(h.comm_seconds < e.comm_seconds, "hpz moves less: %.3f < %.3f", h.comm_seconds, e.comm_seconds);
    CHECK(near(h.total_bytes - e.total_bytes, n2 / 8, 1e-9), "secondary copy 2N/8 per GPU");
    /* The remedies of a communication-bound step, each estimated. */
    CommRemedy r[3];
    int n = estimate_comm_remedies(&f.j, &e, r);
    CHECK(e.comm_bound && n == 3 && r[0].kind == REMEDY_BATCH && r[1].kind == REMEDY_ZERO2 &&
          r[2].kind == REMEDY_HPZ && r[2].hpz_group == 8, "remedies %d", n);
    CHECK(n == 3 && r[0].micro_batch > 1 && r[0].speedup > 1, "a larger batch is faster per GPU");
}
