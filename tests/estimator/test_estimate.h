/* test_estimate.h — what the estimator's test files share (tests/estimator/):
 * the pass/fail counters and CHECK, the hand-built plans, and each topic's
 * tests for main (test_estimate.c) to run.
 */
#ifndef LLMC_TEST_ESTIMATE_H
#define LLMC_TEST_ESTIMATE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "estimate.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

extern int passed, failed;

#define CHECK(cond, ...) do { \
    if (cond) passed++; \
    else { failed++; printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } \
} while (0)

bool near(double got, double want, double rel);

/* ---- hand-built plans (test_estimate.c) ---- */

extern const GpuSpec H100;
extern const SrcRange BATCH_AT, TIME_AT;

PlanModel model(ModelArch arch, int layers, int hidden, int heads, int kv, int head_dim,
                int ffn, int vocab, bool tied);

typedef struct {
    PlanModel m;
    PlanDataset ds;
    PlanDataset *dsp[1];
    PlanTrain t;
    PlanCluster c;
    PlanJob j;
} Fixture;

/* A bf16 job on `nodes` x 8 H100 with one dataset of `tokens` tokens. */
void fixture(Fixture *f, PlanModel m, int nodes, int context, int batch,
             ShardStage shard, Recompute rc, double tokens);
/* Run estimate_job and return the rendered diagnostics (caller frees). */
char *run_job(const PlanJob *j, Estimate *e, int *errors);
/* DIR/NAME parsed, or NULL. */
cJSON *load_json(const char *dir, const char *name);
/* A number of a JSON object (NAN when absent). */
double num(const cJSON *o, const char *key);
/* The H100 nodes' fabric: NVLink 4 and eight 400 Gb/s NICs each. */
void set_fabric(Fixture *f);

/* ---- the tests, by file ---- */

/* test_estimate_memory.c */
void test_params_issue(void);
void test_params_transformers(const cJSON *ref);
void test_zero_paper(void);
void test_korthikanti(void);
void test_layer_vs_transformers(const cJSON *ref);
void test_step_peak(const cJSON *ref);
void test_llama_layer_formula(void);
void test_fit_boundary(void);
void test_examples(void);
void test_llmc_cuda_measured(const cJSON *ref);
void test_llmc_zero_measured(const cJSON *ref);
void test_llmc_cudnn_measured(const cJSON *ref);
void test_llmc_cudnn_workspace(void);
void test_llmc_cuda_allocation(void);
void test_llmc_states_fp8(void);
void test_comm_buffers(void);
void test_low_use_warning(void);

/* test_estimate_time.c */
void test_time_arithmetic(void);
void test_sft_tokens(void);
void test_cpu_plan(void);
void test_hostile(void);
void test_collectives(void);
void test_comm_volumes(void);
void test_step_breakdown(void);
void test_train_states(void);
void test_host_memory(void);
void test_offload_time(void);
void test_padding_stats(void);
void test_padding_mean(void);
void test_hpz(void);

/* test_estimate_plans.c */
void test_defaults(void);
void test_pure_bf16(void);
void test_estimate_fields(const char *docs);
void test_site_profile(void);
void test_preference(void);
void test_startup(void);
void test_families(void);
void test_mixture(void);
void test_optim_liger(void);

#endif
