/* test_estimate_plans.c — the estimator on whole plans: the defaults table,
 * pure_bf16, the JSON fields against docs/estimator.md, site profiles,
 * preference stages, start-up and checkpoints, model families, dataset
 * mixtures, optimizers and Liger.
 */
#include "test_estimate.h"

/* The defaults table: each row has a source; the lookups the estimate makes. */
void test_defaults(void)
{
    const EstimateDefault *rows;
    int n = estimate_defaults(&rows);
    for (int i = 0; i < n; i++)
        CHECK(rows[i].source && strlen(rows[i].source) > 10 && rows[i].label && rows[i].value > 0,
              "row %d has a value, a label and a source", i);
    const EstimateDefault *r = estimate_default(DEF_MFU, BACKEND_LLAMAFACTORY, "A100_80GB", METHOD_FULL);
    CHECK(r && r->value == 0.60, "llamafactory A100");
    r = estimate_default(DEF_MFU, BACKEND_LLAMAFACTORY, "H100_80GB", METHOD_FULL);
    CHECK(r && r->value == 0.40, "llamafactory H100");
    r = estimate_default(DEF_MFU, BACKEND_LLMC, "H200_141GB", METHOD_FULL);
    CHECK(r && r->value == 0.50, "llmc H200");
    CHECK(!estimate_default(DEF_MFU, BACKEND_LLMC, NULL, METHOD_FULL), "llmc on CPU: no row (0.20 stands)");
    r = estimate_default(DEF_METHOD_FACTOR, BACKEND_LLAMAFACTORY, "H100_80GB", METHOD_QLORA);
    CHECK(r && r->value == 0.68, "qlora factor");
    CHECK(estimate_default(DEF_COLL_LAUNCH_S, BACKEND_LLAMAFACTORY, NULL, -1)->value == 50e-6 &&
          estimate_default(DEF_COLL_LAUNCH_S, BACKEND_LLMC, NULL, -1)->value == 10e-6, "launch costs");
    /* A LoRA job on H100 starts from 0.40 x 0.92. */
    Fixture f;
    Estimate e;
    int errors;
    fixture(&f, model(ARCH_QWEN2, 24, 896, 14, 2, 0, 4864, 151936, true), 1, 2048, 4, SHARD_NONE,
            RECOMPUTE_NONE, 1e6);
    f.t.backend = BACKEND_LLAMAFACTORY;
    f.t.method = METHOD_LORA; f.t.lora_rank = 8;
    free(run_job(&f.j, &e, &errors));
    CHECK(near(e.mfu, 0.40 * 0.92, 1e-12), "lora mfu %.4f", e.mfu);
}

/* precision = pure_bf16 (LLaMA-Factory): bf16 weights and gradients, AdamW m
 * and v in bf16, no fp32 master: 2 + 2 + 4 bytes per trainable parameter,
 * against 2 + 2 + 12 for bf16 mixed precision; activations at 2 bytes alike. */
void test_pure_bf16(void)
{
    /* Qwen2.5-7B (7,615,616,512 parameters), full, no ZeRO. */
    PlanModel q7 = model(ARCH_QWEN2, 28, 3584, 28, 4, 0, 18944, 152064, false);
    double n = (double)estimate_params(&q7, NULL, NULL);
    double w, g, o, wb, gb, ob;
    estimate_model_states(n, PREC_PURE_BF16, SHARD_NONE, 8, &w, &g, &o);
    estimate_model_states(n, PREC_BF16, SHARD_NONE, 8, &wb, &gb, &ob);
    CHECK(n == 7615616512.0 && w == 2 * n && g == 2 * n && o == 4 * n, "pure_bf16 7B states %.0f %.0f %.0f", w, g, o);
    CHECK((w + g + o) / n == 8 && (wb + gb + ob) / n == 16, "7B: %.1f bytes/param pure_bf16, %.1f bf16",
          (w + g + o) / n, (wb + gb + ob) / n);
    /* LoRA under pure_bf16: adapters, their gradients and moments all bf16. */
    TrainStates lora = {1e7, 8e9, 2, false, false};
    double h;
    estimate_train_states(&lora, PREC_PURE_BF16, SHARD_NONE, 1, &w, &g, &o, &h);
    CHECK(w == 2e7 + 16e9 && g == 2e7 && o == 4e7 && h == 0, "pure_bf16 lora %.0f %.0f %.0f", w, g, o);

    /* The 7B full SFT on LLaMA-Factory, one node of 8 H100, batch 1 x 4096,
     * recompute = full: the same weights, gradients and activations, a third
     * of bf16's optimizer states (4 bytes instead of 12), so it fits where
     * bf16 without ZeRO does not (85 GiB of optimizer states alone). */
    Fixture f;
    Estimate pure, mixed;
    fixture(&f, q7, 1, 4096, 1, SHARD_NONE, RECOMPUTE_FULL, 1e8);
    set_fabric(&f);
    f.t.backend = BACKEND_LLAMAFACTORY;
    f.t.precision = PREC_PURE_BF16;
    memset(&pure, 0, sizeof pure);
    estimate_memory(&f.j, 1, RECOMPUTE_FULL, SHARD_NONE, &pure);
    f.t.precision = PREC_BF16;
    memset(&mixed, 0, sizeof mixed);
    estimate_memory(&f.j, 1, RECOMPUTE_FULL, SHARD_NONE, &mixed);
    CHECK(pure.model_bytes_per_param == 8 && mixed.model_bytes_per_param == 16, "model bytes/param %.1f, %.1f",
          pure.model_bytes_per_param, mixed.model_bytes_per_param);
    CHECK(pure.weights_bytes == 2 * n && pure.grads_bytes == 2 * n && pure.optimizer_bytes == 4 * n &&
              pure.optimizer_bytes * 3 == mixed.optimizer_bytes, "7B pure_bf16 states per GPU");
    CHECK(pure.activation_bytes_per_value == 2 && pure.activations_bytes == mixed.activations_bytes &&
              pure.logits_bytes == mixed.logits_bytes && pure.activations_transformers,
          "activations as bf16's (transformers' layers)");
    CHECK(pure.fits && !mixed.fits, "7B pure_bf16 fits (%.1f GiB), bf16 does not (%.1f GiB)", pure.total_bytes / GIB,
          mixed.total_bytes / GIB);
    /* Time: bf16 tensor cores at full rate; DDP's all-reduce of bf16 gradients. */
    f.t.precision = PREC_PURE_BF16;
    int errors;
    free(run_job(&f.j, &pure, &errors));
    CHECK(errors == 0 && pure.peak_flops_per_device == 989e12 && pure.comm_allreduce_bytes == 2 * n,
          "pure_bf16 time: peak %.3g, all-reduce %.0f", pure.peak_flops_per_device, pure.comm_allreduce_bytes);

    /* Qwen2.5-14B does not fit pure_bf16 without ZeRO (8 x 14.8B = 118 GB):
     * the help lines offer ZeRO in bf16 (what DeepSpeed trains), never
     * pure_bf16 with ZeRO or offload, which the checker refuses. */
    fixture(&f, model(ARCH_QWEN2, 48, 5120, 40, 8, 0, 13824, 152064, false), 1, 4096, 1, SHARD_NONE,
            RECOMPUTE_FULL, 1e8);
    set_fabric(&f);
    f.t.backend = BACKEND_LLAMAFACTORY;
    f.t.precision = PREC_PURE_BF16;
    char *text = run_job(&f.j, &pure, &errors);
    CHECK(errors == 1 && strstr(text, "(8 bytes/param, shard=none over 8 ranks)") &&
              strstr(text, "help: precision = bf16 with shard = zero3 fits at this batch") &&
              !strstr(text, "help: shard =") && !strstr(text, "help: offload ="),
          "14B pure_bf16 help lines:\n%s", text);
    free(text);
}

/* ESTIMATE_FIELDS (compiler/estimate/estimate_fields.c), the one table both JSON
 * writers print: keys unique, plan.json's places 0..n-1 each taken once, each
 * row reading its own field, and every row documented in docs/estimator.md's
 * "plan.json estimate fields" table. */
void test_estimate_fields(const char *docs)
{
    Estimate e;
    memset(&e, 0, sizeof e);
    e.params_total = 123456789012LL;
    e.mfu = 0.375;
    e.fits = true;
    e.attn_workspace_bytes = 4096;
    e.cpu_optimizer_threads = 7;
    EstimateField f[ESTIMATE_FIELD_MAX];
    int n = estimate_fields(&e, f), npos = 0, dup = 0, seen[ESTIMATE_FIELD_MAX] = {0};
    CHECK(n >= 80 && n <= ESTIMATE_FIELD_MAX, "estimate_fields: %d rows", n);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < i; j++) dup += strcmp(f[i].key, f[j].key) == 0;
        if (f[i].plan_pos >= 0 && f[i].plan_pos < ESTIMATE_FIELD_MAX) { seen[f[i].plan_pos]++; npos++; }
    }
    CHECK(dup == 0, "estimate_fields: %d keys twice", dup);
    int holes = 0;
    for (int p = 0; p < npos; p++) holes += seen[p] != 1;
    CHECK(npos == 42 && holes == 0, "plan.json estimate: %d places, %d not taken exactly once", npos, holes);
    int right = 0;
    for (int i = 0; i < n; i++) {
        const EstimateField *x = &f[i];
        right += (!strcmp(x->key, "params_total") && x->kind == EST_INT && x->i == 123456789012LL && x->plan_pos == 0) +
                 (!strcmp(x->key, "mfu") && x->kind == EST_NUM && x->num == 0.375) +
                 (!strcmp(x->key, "fits") && x->kind == EST_BOOL && x->b) +
                 (!strcmp(x->key, "attn_workspace_bytes") && x->num == 4096 && x->plan_pos == 8) +
                 (!strcmp(x->key, "cpu_optimizer_threads") && x->num == 7 && x->plan_pos < 0) +
                 (!strcmp(x->key, "tokens_source") && x->kind == EST_TOKEN_SOURCE && x->str &&
                  !strcmp(x->str, estimate_token_source_name(e.tokens_source)));
    }
    CHECK(right == 6, "estimate_fields: %d of 6 probed rows read their field", right);
    char path[512];
    snprintf(path, sizeof path, "%s/estimator.md", docs);
    FILE *fp = fopen(path, "r");
    CHECK(fp != NULL, "read %s", path);
    if (!fp) return;
    static char text[1 << 18];
    size_t len = fread(text, 1, sizeof text - 1, fp);
    fclose(fp);
    text[len] = 0;
    const char *sect = strstr(text, "## plan.json estimate fields");
    char *table = sect ? strstr(sect, "\n| key |") : NULL;
    CHECK(table != NULL, "%s: no \"plan.json estimate fields\" table", path);
    if (!table) return;
    char *end = strstr(table + 1, "\n\n");
    if (end) *end = 0;   /* the table alone */
    int undocumented = 0;
    for (int i = 0; i < n; i++) {
        char cell[96];
        snprintf(cell, sizeof cell, "`%s`", f[i].key);
        /* a plan.json row must be in the table; explain's own rows may be described in
           their sections instead (the sentence above the table names them) */
        if (f[i].plan_pos >= 0 && !strstr(table, cell)) { undocumented++; printf("  undocumented: %s\n", f[i].key); }
    }
    CHECK(undocumented == 0, "%d plan.json estimate fields missing from docs/estimator.md's table", undocumented);
}

/* A site profile (docs/estimator.md, "Site profiles"): its mfu under the
 * plan's own, its fixed time per step added, its effective bandwidths in
 * place of the fabric's figure x efficiency. */
void test_site_profile(void)
{
    /* estimate_collective: 4 x 8 GPUs, 1 GB all-gathered: 968,750,000 bytes
     * sent; at 100 GB/s per GPU 9.6875 ms, at 5 GB/s per node 193.75 ms. */
    Fabric fab = {4, 8, 900e9, 8, 400e9, false, 100e9, 5e9};
    double sent, intra, inter, lat;
    estimate_collective(&fab, COLL_ALL_GATHER, 1e9, &sent, &intra, &inter, &lat);
    CHECK(sent == 968750000.0 && near(intra, 9.6875e-3, 1e-12) && near(inter, 0.19375, 1e-12),
          "effective bandwidths: intra %.9f inter %.9f", intra, inter);

    /* CPU: the step at the profile's mfu 0.05 is 4x the default's (0.2), plus 40 ms. */
    Fixture f;
    Estimate e0, e1;
    int errors;
    fixture(&f, model(ARCH_QWEN2, 2, 64, 4, 2, 0, 128, 512, true), 1, 128, 8, SHARD_NONE, RECOMPUTE_NONE, 1e6);
    f.c.gpu = NULL; f.c.gpus_per_node = 0; f.c.cpus = 2;
    free(run_job(&f.j, &e0, &errors));
    PlanProfile pf;
    memset(&pf, 0, sizeof pf);
    pf.name = "site"; pf.mfu = 0.05; pf.step_overhead_s = 0.04;
    f.j.profile = &pf;
    free(run_job(&f.j, &e1, &errors));
    CHECK(e1.mfu == 0.05 && e1.profile_mfu && e1.step_overhead_seconds == 0.04 &&
          near(e1.step_seconds, 4 * e0.step_seconds + 0.04, 1e-12) &&
          near(e1.total_seconds, e0.total_seconds / e0.step_seconds * e1.step_seconds, 1e-12),
          "profile mfu and overhead: %.6f s vs %.6f s", e1.step_seconds, e0.step_seconds);
    /* The plan's own mfu wins over the profile's. */
    f.t.mfu = 0.1;
    free(run_job(&f.j, &e1, &errors));
    CHECK(e1.mfu == 0.1 && !e1.profile_mfu && near(e1.step_seconds, 2 * e0.step_seconds + 0.04, 1e-12),
          "train.mfu over the profile");

    /* ZeRO-3 on 4 nodes: an effective 36 GB/s per node (a tenth of 90% of
     * 8 x 400 Gb/s) makes the network term 10x; the GPU link unchanged. */
    fixture(&f, model(ARCH_QWEN2, 48, 5120, 40, 8, 0, 13824, 152064, false), 4, 2048, 1, SHARD_ZERO3,
            RECOMPUTE_FULL, 2e9);
    f.t.backend = BACKEND_LLAMAFACTORY;
    set_fabric(&f);
    free(run_job(&f.j, &e0, &errors));
    memset(&pf, 0, sizeof pf);
    pf.name = "site"; pf.inter_bytes_per_s = 36e9; pf.step_overhead_s = -1;
    f.j.profile = &pf;
    free(run_job(&f.j, &e1, &errors));
    CHECK(e0.comm_inter_seconds > 0 && near(e1.comm_inter_seconds, 10 * e0.comm_inter_seconds, 1e-9) &&
          near(e1.comm_intra_seconds, e0.comm_intra_seconds, 1e-12) && e1.profile_inter && !e1.profile_intra &&
          e1.mfu == e0.mfu && e1.step_overhead_seconds == 0 && e1.step_seconds > e0.step_seconds,
          "profile network: %.4f s vs %.4f s", e1.comm_inter_seconds, e0.comm_inter_seconds);
    /* A profile's bandwidths make the communication known without a fabric. */
    f.c.link_bytes_per_s = 0; f.c.nics = 0; f.c.nic_bits_per_s = 0;
    pf.intra_bytes_per_s = 360e9;
    free(run_job(&f.j, &e1, &errors));
    CHECK(e1.fabric_known && near(e1.comm_inter_seconds, 10 * e0.comm_inter_seconds, 1e-9) &&
          near(e1.comm_intra_seconds, e0.comm_intra_seconds, 1e-9), "profile without a fabric");
}

/* Preference stages as LLaMA-Factory's trainers run them: pairs in one micro
 * batch (rm, dpo), the reference model's copy and forward (dpo unless orpo or
 * simpo; kto), kto's KL forward. Qwen2.5-7B on 8 H100, ZeRO-2, batch 2 x 2048. */
void test_preference(void)
{
    PlanModel q7 = model(ARCH_QWEN2, 28, 3584, 28, 4, 0, 18944, 152064, false);
    double n = (double)estimate_params(&q7, NULL, NULL);
    Fixture f;
    Estimate sft, dpo, orpo, rm, kto, lora, z3;
    fixture(&f, q7, 1, 2048, 2, SHARD_ZERO2, RECOMPUTE_FULL, -1);
    set_fabric(&f);
    f.ds.samples = 10000;
    f.t.packing = false;
    f.t.backend = BACKEND_LLAMAFACTORY;
    f.t.stage = STAGE_SFT;
    int errors;
    free(run_job(&f.j, &sft, &errors));
    f.t.stage = STAGE_DPO;
    free(run_job(&f.j, &dpo, &errors));
    /* Pairs: twice the activations and logits of SFT at the same batch, the
     * frozen reference copy whole on every GPU (ZeRO-2: trl runs it with ZeRO
     * off), its logits (2 + 4 bytes) over 2 x 2 sequences. */
    CHECK(dpo.seqs_per_sample == 2 && dpo.nograd_seqs_per_sample == 2 && dpo.reference == REF_COPY,
          "dpo shape %d %.0f %d", dpo.seqs_per_sample, dpo.nograd_seqs_per_sample, (int)dpo.reference);
    CHECK(near(dpo.activations_bytes, 2 * sft.activations_bytes, 1e-9) && dpo.logits_bytes == 2 * sft.logits_bytes,
          "dpo activations %.3g vs sft %.3g", dpo.activations_bytes, sft.activations_bytes);
    CHECK(dpo.reference_bytes == 2 * n && dpo.reference_params == n, "dpo reference %.0f", dpo.reference_bytes);
    CHECK(dpo.reference_logits_bytes == 6.0 * 4 * 2048 * 152064, "dpo reference logits %.0f", dpo.reference_logits_bytes);
    double extra = sft.activations_bytes + sft.logits_bytes + dpo.reference_bytes + dpo.reference_logits_bytes;
    CHECK(near(dpo.total_bytes - sft.total_bytes, 1.05 * extra, 1e-9), "dpo %.1f GiB vs sft %.1f GiB + %.1f GiB",
          dpo.total_bytes / GIB, sft.total_bytes / GIB, extra / GIB);
    /* Steps follow the pairs (10,000 / 16 = 625), each step computes twice
     * the sequences plus a forward over them: (6N + 2N) / 6N of SFT's FLOPs
     * per token, before attention and recompute. */
    CHECK(dpo.steps_total == sft.steps_total && dpo.steps_total == 625 && dpo.sequences_per_epoch == 20000,
          "dpo steps %lld sft %lld", (long long)dpo.steps_total, (long long)sft.steps_total);
    CHECK(dpo.flops_per_token > sft.flops_per_token && dpo.compute_seconds > 2 * sft.compute_seconds,
          "dpo compute %.2f s vs sft %.2f s", dpo.compute_seconds, sft.compute_seconds);
    /* orpo / simpo: pairs, no reference. */
    f.t.pref_loss = PREF_ORPO;
    free(run_job(&f.j, &orpo, &errors));
    CHECK(orpo.seqs_per_sample == 2 && orpo.reference == REF_NONE && orpo.reference_bytes == 0 &&
              orpo.reference_logits_bytes == 0 && orpo.flops_per_token == sft.flops_per_token,
          "orpo: pairs, no reference");
    f.t.pref_loss = PREF_SIGMOID;
    f.t.stage = STAGE_RM;
    free(run_job(&f.j, &rm, &errors));
    CHECK(rm.seqs_per_sample == 2 && rm.reference == REF_NONE && rm.activations_bytes == dpo.activations_bytes,
          "rm: pairs, no reference");
    /* kto: one sequence per sample, KL forward and reference over both. */
    f.t.stage = STAGE_KTO;
    free(run_job(&f.j, &kto, &errors));
    CHECK(kto.seqs_per_sample == 1 && kto.nograd_seqs_per_sample == 3 && kto.reference == REF_COPY &&
              kto.activations_bytes == sft.activations_bytes && kto.steps_total == sft.steps_total,
          "kto shape");
    /* LoRA without ref_model: the base with adapters off, no copy. */
    f.t.stage = STAGE_DPO;
    f.t.method = METHOD_LORA; f.t.lora_rank = 8;
    free(run_job(&f.j, &lora, &errors));
    CHECK(lora.reference == REF_ADAPTERS_OFF && lora.reference_bytes == 0 && lora.reference_logits_bytes > 0,
          "dpo lora: adapters off");
    /* An explicit ref_model is a copy even with LoRA; under ZeRO-3 it is sharded. */
    f.t.ref_model = &f.m;
    f.t.shard = SHARD_ZERO3;
    memset(&z3, 0, sizeof z3);
    estimate_memory(&f.j, 2, RECOMPUTE_FULL, SHARD_ZERO3, &z3);
    CHECK(z3.reference == REF_COPY && z3.reference_bytes == 2 * n / 8, "zero3 reference %.0f", z3.reference_bytes);
}

/* Start-up and checkpoints: the 32B pre-training plan (48.74 GB of
 * text at 4 bytes/token, 32 nodes of 8 H100, 224 CPUs: 64 workers at the
 * default 100K tokens/s) tokenises for 12.19B / 6.4M = 1904 s, longer than the
 * 30 min barrier: ddp_timeout rises to 2 x 1904 + 600 s in whole minutes. */
void test_startup(void)
{
    PlanModel q32 = model(ARCH_QWEN2, 64, 5120, 40, 8, 0, 27648, 152064, false);
    double n = (double)estimate_params(&q32, NULL, NULL);
    Fixture f;
    Estimate e;
    int errors;
    fixture(&f, q32, 32, 4096, 4, SHARD_ZERO3, RECOMPUTE_FULL, -1);
    set_fabric(&f);
    f.ds.size_bytes = 48740000000ull;
    f.t.backend = BACKEND_LLAMAFACTORY;
    f.t.ddp_timeout_seconds = 1800;
    f.t.checkpoint_keep = 2;
    char *text = run_job(&f.j, &e, &errors);
    double tok = 48.74e9 / 4 / (64 * 1e5);
    CHECK(e.tokenize_workers == 64 && near(e.tokenize_seconds, tok, 1e-9) && e.tokenize_every_start,
          "tokenisation %.0f s (%d workers)", e.tokenize_seconds, e.tokenize_workers);
    CHECK(e.ddp_timeout_raised && e.ddp_timeout_seconds == ceil((2 * tok + 600) / 60) * 60 && e.ddp_timeout_seconds == 4440,
          "ddp_timeout %.0f", e.ddp_timeout_seconds);
    CHECK(errors == 0 && text && strstr(text, "warning: tokenising the data of run") &&
              strstr(text, "ddp_timeout raised from 30 min to 74.0 min"), "raised-barrier warning:\n%s", text ? text : "");
    free(text);
    /* Full ZeRO-3 checkpoint: fp32 master + m + v (12N) and the 16-bit module
     * partitions (2N) from every rank, the 16-bit safetensors (2N) from rank 0;
     * kept twice. Write time: 14N over 32 nodes + 2N at one node's 1 GB/s. */
    CHECK(e.checkpoint_bytes == 16 * n && e.checkpoint_export_bytes == 2 * n && e.checkpoint_kept_bytes == 32 * n,
          "checkpoint %.0f", e.checkpoint_bytes);
    CHECK(near(e.checkpoint_write_seconds, 14 * n / 32e9 + 2 * n / 1e9, 1e-9), "write %.1f s", e.checkpoint_write_seconds);
    CHECK(e.load_bytes == 2 * n && near(e.load_seconds, 2 * n / 0.5e9, 1e-12), "load %.1f s", e.load_seconds);
    CHECK(near(e.wall_seconds, e.total_seconds + e.tokenize_seconds + e.load_seconds +
                                   e.checkpoints_total * e.checkpoint_write_seconds, 1e-9) && e.checkpoints_total > 0,
          "wall %.0f s, %lld saves", e.wall_seconds, (long long)e.checkpoints_total);
    /* A ddp_timeout the plan sets itself is not raised: an error. */
    f.t.ddp_timeout_at = TIME_AT;
    text = run_job(&f.j, &e, &errors);
    CHECK(errors == 1 && !e.ddp_timeout_raised && e.ddp_timeout_seconds == 1800 && text &&
              strstr(text, "ddp_timeout 30.0 min is shorter than the tokenisation"), "explicit barrier:\n%s", text ? text : "");
    free(text);
    /* Segments: each requeued start loads, resumes and tokenises again;
     * tokenized_path spares the tokenisation after the first. */
    f.t.ddp_timeout_at = (SrcRange){0};
    f.t.tokenized_path = "/tmp/tok";
    f.j.time_seconds = 4 * 3600.0;
    free(run_job(&f.j, &e, &errors));
    double again = e.load_seconds + e.resume_seconds;
    double work = e.total_seconds + e.checkpoints_total * e.checkpoint_write_seconds;
    CHECK(!e.tokenize_every_start && e.requeue_segments == (int)ceil((work + e.startup_seconds - again) / (4 * 3600.0 - again)) &&
              e.requeue_segments > 1 && near(e.wall_seconds, work + e.startup_seconds + (e.requeue_segments - 1) * again, 1e-9),
          "segments %d, wall %.0f", e.requeue_segments, e.wall_seconds);
    /* A time limit shorter than one start: an error. */
    f.j.time_seconds = 60;
    text = run_job(&f.j, &e, &errors);
    CHECK(errors >= 1 && text && strstr(text, "is shorter than one requeued start"), "short limit:\n%s", text ? text : "");
    free(text);
}

/* The families LLaMA-Factory trains beyond llama/qwen: parameter counts of
 * the published models (their model cards: Mistral-7B-v0.3 7.25B, Gemma-2-9B
 * 9.24B, Mixtral-8x7B 46.7B), and Mixtral's FLOPs per token from the two
 * active experts (about 12.9B active parameters). */
void test_families(void)
{
    PlanModel mi = model(ARCH_MISTRAL, 32, 4096, 32, 8, 0, 14336, 32768, false);
    PlanModel g2 = model(ARCH_GEMMA2, 42, 3584, 16, 8, 256, 14336, 256000, true);
    g2.norms_per_layer = 4;
    PlanModel mx = model(ARCH_MIXTRAL, 32, 4096, 32, 8, 0, 14336, 32000, false);
    mx.experts = 8; mx.experts_per_token = 2;
    CHECK(estimate_params(&mi, NULL, NULL) == 7248023552LL, "mistral 7B %lld", (long long)estimate_params(&mi, NULL, NULL));
    CHECK(estimate_params(&g2, NULL, NULL) == 9241705984LL, "gemma2 9B %lld", (long long)estimate_params(&g2, NULL, NULL));
    CHECK(estimate_params(&mx, NULL, NULL) == 46702792704LL, "mixtral %lld", (long long)estimate_params(&mx, NULL, NULL));
    /* Qwen3-30B-A3B: 48 layers of 128 experts (768 wide), 8 per token, q/k norms */
    PlanModel q3m = model(ARCH_QWEN3_MOE, 48, 2048, 32, 4, 128, 768, 151936, false);
    q3m.qk_norm = true; q3m.experts = 128; q3m.experts_per_token = 8;
    CHECK(estimate_params(&q3m, NULL, NULL) == 30532122624LL, "qwen3_moe %lld", (long long)estimate_params(&q3m, NULL, NULL));
    Fixture f;
    Estimate e;
    int errors;
    fixture(&f, mx, 2, 4096, 1, SHARD_ZERO3, RECOMPUTE_NONE, 1e8);
    set_fabric(&f);
    f.t.backend = BACKEND_LLAMAFACTORY;
    free(run_job(&f.j, &e, &errors));
    double active = 46702792704.0 - 32.0 * 6 * 3 * 4096 * 14336 - 32000.0 * 4096;   /* the input embedding is a lookup */
    double attn = 2.0 * 32 * e.padded_seq_tokens * 4096;   /* 1e8 tokens packed: 4095.8 per sequence */
    CHECK(near(e.flops_per_token, 6 * active + 3 * attn, 1e-9), "mixtral flops/token %.8g, want %.8g",
          e.flops_per_token, 6 * active + 3 * attn);
    /* every expert's weights in memory (ZeRO-3 over 16 ranks) */
    CHECK(near(e.weights_bytes, 2 * 46702792704.0 / 16, 1e-12), "mixtral weights %.4g", e.weights_bytes);
}

/* Data mixtures (llamafactory): max_samples cuts each dataset; an
 * interleave_under mixture of 2M (after the cut) and 1M samples at 0.7/0.3
 * stops when the first runs out: S = min(2M / 0.7, 1M / 0.3) = 2.857M. */
void test_mixture(void)
{
    PlanModel q7 = model(ARCH_QWEN2, 28, 3584, 28, 4, 0, 18944, 152064, false);
    Fixture f;
    Estimate e;
    int errors;
    fixture(&f, q7, 1, 4096, 1, SHARD_ZERO2, RECOMPUTE_FULL, -1);
    set_fabric(&f);
    PlanDataset b = f.ds;
    PlanDataset *two[2] = {&f.ds, &b};
    f.ds.samples = 3000000; f.ds.tokens = 3000000000LL;
    b.samples = 1000000; b.tokens = 1000000000LL;
    f.t.data = two; f.t.ndata = 2;
    f.t.backend = BACKEND_LLAMAFACTORY;
    free(run_job(&f.j, &e, &errors));
    CHECK(e.tokens_per_epoch == 4e9 && !e.mix_scaled, "concat %.4g", e.tokens_per_epoch);
    f.t.max_samples = 2000000;
    free(run_job(&f.j, &e, &errors));
    CHECK(e.tokens_per_epoch == 3e9 && e.samples_per_epoch == 3e6, "max_samples %.4g", e.tokens_per_epoch);
    double probs[2] = {0.7, 0.3};
    f.t.mix = MIX_INTERLEAVE_UNDER; f.t.interleave_probs = probs; f.t.ninterleave_probs = 2;
    free(run_job(&f.j, &e, &errors));
    double S = 2e6 / 0.7;
    CHECK(e.mix_scaled && near(e.samples_per_epoch, S, 1e-12) && near(e.tokens_per_epoch, 1000 * S, 1e-12),
          "interleave_under %.6g samples, %.6g tokens", e.samples_per_epoch, e.tokens_per_epoch);
    f.t.mix = MIX_INTERLEAVE_OVER;
    free(run_job(&f.j, &e, &errors));
    CHECK(near(e.samples_per_epoch, 1e6 / 0.3, 1e-12), "interleave_over %.6g", e.samples_per_epoch);
    f.t.mix = MIX_INTERLEAVE_ONCE;
    free(run_job(&f.j, &e, &errors));
    CHECK(e.samples_per_epoch == 3e6 && !e.mix_scaled, "interleave_once %.6g", e.samples_per_epoch);
}

/* LLaMA-Factory's optim and Liger: 8-bit AdamW keeps 6 of AdamW's 12 bytes
 * per trainable parameter (mixed precision), Adafactor 4; Liger's fused
 * cross-entropy holds 2^ceil(log2(b s / ceil(V / h))) rows of logits, not b s. */
void test_optim_liger(void)
{
    PlanModel q7 = model(ARCH_QWEN2, 28, 3584, 28, 4, 0, 18944, 152064, false);
    Fixture f;
    Estimate adam, b8, ada, lig;
    fixture(&f, q7, 1, 4096, 8, SHARD_ZERO3, RECOMPUTE_FULL, 1e8);
    f.t.backend = BACKEND_LLAMAFACTORY;
    memset(&adam, 0, sizeof adam);
    estimate_memory(&f.j, 8, RECOMPUTE_FULL, SHARD_ZERO3, &adam);
    f.t.optim = OPTIM_PAGED_ADAMW_8BIT;
    memset(&b8, 0, sizeof b8);
    estimate_memory(&f.j, 8, RECOMPUTE_FULL, SHARD_ZERO3, &b8);
    f.t.optim = OPTIM_ADAFACTOR;
    memset(&ada, 0, sizeof ada);
    estimate_memory(&f.j, 8, RECOMPUTE_FULL, SHARD_ZERO3, &ada);
    CHECK(near(b8.optimizer_bytes, adam.optimizer_bytes / 2, 1e-12) && near(ada.optimizer_bytes, adam.optimizer_bytes / 3, 1e-12),
          "optim states %.4g %.4g %.4g", adam.optimizer_bytes, b8.optimizer_bytes, ada.optimizer_bytes);
    CHECK(near(b8.model_bytes_per_param, 10, 1e-12), "8-bit: %.3f bytes/param", b8.model_bytes_per_param);
    f.t.optim = OPTIM_ADAMW_TORCH;
    f.t.liger_kernel = true;
    memset(&lig, 0, sizeof lig);
    estimate_memory(&f.j, 8, RECOMPUTE_FULL, SHARD_ZERO3, &lig);
    /* b s = 32768 rows, ceil(152064 / 3584) = 43: 762.0 -> 1024 rows */
    CHECK(lig.logits_chunked && lig.logits_chunk_rows == 1024 &&
              lig.logits_bytes == 6.0 * 1024 * 152064 + 32768.0 * 3584 * 2 && adam.logits_bytes == 10.0 * 32768 * 152064,
          "liger logits %.4g (rows %.0f) vs %.4g", lig.logits_bytes, lig.logits_chunk_rows, adam.logits_bytes);
}
