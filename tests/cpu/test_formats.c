/* test_formats.c — safetensors (F32/BF16/F16, sharded index, bad files), sha256
 * vectors, hashing while writing, config.json round trip and derivation, LR
 * schedules, plan.json loading, metrics lines (time, non-finite values, resume).
 * Usage: test_formats SCRATCH_DIR TINY_PLAN.json CONFIG_DIR ; prints "N passed, N failed".
 * CONFIG_DIR: tests/frontend/files (real config.json files, see its README.md). */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "checkpoint.h"
#include "hf_config.h"
#include "metrics.h"
#include "optim.h"
#include "../../runtime/plan/plan.h"   /* the runtime's, not compiler/check/plan.h */
#include "safetensors.h"
#include "sha256.h"

static int passed, failed;
static void check(int ok, const char *what)
{
    if (ok) passed++;
    else { failed++; printf("FAIL %s\n", what); }
}

static void write_raw(const char *path, const char *header, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    uint64_t len = strlen(header);
    unsigned char lb[8];
    for (int i = 0; i < 8; i++) lb[i] = (unsigned char)(len >> (8 * i));
    fwrite(lb, 1, 8, f);
    fwrite(header, 1, len, f);
    if (n) fwrite(data, 1, n, f);
    fclose(f);
}

static int open_fails_with(const char *path, const char *text)
{
    StModel st;
    char err[512] = "";
    int rc = st_open(&st, path, err, sizeof err);
    if (rc == 0) { st_close(&st); return 0; }
    if (!strstr(err, text)) { printf("  message was: %s\n", err); return 0; }
    return 1;
}

static void test_conversions(void)
{
    check(st_f32_to_bf16(1.0f) == 0x3f80, "bf16(1.0) = 0x3f80");
    check(st_f32_to_bf16(1.00390625f) == 0x3f80, "bf16 rounds a tie to even (down)");
    check(st_f32_to_bf16(1.01171875f) == 0x3f82, "bf16 rounds a tie to even (up)");
    check(st_bf16_to_f32(0xc040) == -3.0f, "bf16 0xc040 = -3");
    check(st_f16_to_f32(0x3c00) == 1.0f && st_f16_to_f32(0xc000) == -2.0f, "f16 1 and -2");
    check(st_f16_to_f32(0x7bff) == 65504.0f, "f16 max 65504");
    check(st_f16_to_f32(0x0001) == ldexpf(1.0f, -24), "f16 smallest subnormal 2^-24");
    check(st_f16_to_f32(0x03ff) == ldexpf(1023.0f, -24), "f16 largest subnormal");
    check(isinf(st_f16_to_f32(0x7c00)) && isnan(st_f16_to_f32(0x7e00)), "f16 inf and nan");
}

static void test_safetensors(const char *dir)
{
    char p[4300], err[512];
    float a[6] = {1, -2, 3.5f, 0.1f, -0.25f, 1e-3f}, b[4] = {7, 8, 9, 10}, out[6];
    StWriteTensor t[2] = {{"x.weight", 2, {2, 3}, a}, {"y.bias", 1, {4}, b}};
    snprintf(p, sizeof p, "%s/f32.safetensors", dir);
    check(st_write(p, t, 2, ST_F32, "\"format\":\"pt\"", err, sizeof err) == 0, "st_write F32");
    StModel st;
    check(st_open(&st, p, err, sizeof err) == 0 && st.n_tensors == 2, "st_open reads both tensors");
    const StTensor *x = st_find(&st, "x.weight");
    check(x && x->ndim == 2 && x->shape[0] == 2 && x->shape[1] == 3 && x->dtype == ST_F32, "shape and dtype");
    check(x && st_read_f32(&st, x, out, err, sizeof err) == 0 && !memcmp(out, a, sizeof a), "F32 data exact");
    check(st.data_start[0] % 8 == 0, "data section 8-byte aligned");
    st_close(&st);

    snprintf(p, sizeof p, "%s/bf16.safetensors", dir);
    check(st_write(p, t, 2, ST_BF16, NULL, err, sizeof err) == 0, "st_write BF16");
    int ok = st_open(&st, p, err, sizeof err) == 0;
    x = ok ? st_find(&st, "x.weight") : NULL;
    ok = x && x->dtype == ST_BF16 && st_read_f32(&st, x, out, err, sizeof err) == 0;
    for (int i = 0; ok && i < 6; i++) ok = out[i] == st_bf16_to_f32(st_f32_to_bf16(a[i]));
    check(ok, "BF16 round trip = rounding");
    if (!st.n_files) memset(&st, 0, sizeof st);
    st_close(&st);

    /* a long name and eight dimensions: the header's room follows what the entries hold (it was 256 bytes an
     * entry, which a 600-byte name ran past) */
    char longname[601];
    memset(longname, 'n', 600);
    longname[600] = 0;
    StWriteTensor lt[2] = {{longname, 8, {1, 1, 1, 1, 1, 1, 2, 3}, a}, {"y.bias", 1, {4}, b}};
    snprintf(p, sizeof p, "%s/long.safetensors", dir);
    ok = st_write(p, lt, 2, ST_F32, NULL, err, sizeof err) == 0 && st_open(&st, p, err, sizeof err) == 0;
    x = ok ? st_find(&st, longname) : NULL;
    check(x && x->ndim == 8 && x->shape[7] == 3 && st_read_f32(&st, x, out, err, sizeof err) == 0 &&
          !memcmp(out, a, sizeof a), "st_write: a 600-byte name and 8 dimensions written and read back");
    if (ok) st_close(&st);

    /* F16, handcrafted */
    uint16_t h[3] = {0x3c00, 0xc000, 0x3800};
    snprintf(p, sizeof p, "%s/f16.safetensors", dir);
    write_raw(p, "{\"h\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[0,6]}}", h, 6);
    ok = st_open(&st, p, err, sizeof err) == 0;
    x = ok ? st_find(&st, "h") : NULL;
    check(x && st_read_f32(&st, x, out, err, sizeof err) == 0 && out[0] == 1 && out[1] == -2 && out[2] == 0.5f,
          "F16 tensor read as fp32");
    if (ok) st_close(&st);

    /* sharded: index + two files */
    char sd[4096];
    snprintf(sd, 4000, "%s/sharded", dir);
    mkdir(sd, 0755);
    snprintf(p, sizeof p, "%s/model-00001-of-00002.safetensors", sd);
    st_write(p, &t[0], 1, ST_F32, NULL, err, sizeof err);
    snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", sd);
    st_write(p, &t[1], 1, ST_BF16, NULL, err, sizeof err);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", sd);
    FILE *f = fopen(p, "w");
    fputs("{\"metadata\":{\"total_size\":32},\"weight_map\":{\"x.weight\":\"model-00001-of-00002.safetensors\","
          "\"y.bias\":\"model-00002-of-00002.safetensors\"}}", f);
    fclose(f);
    ok = st_open(&st, sd, err, sizeof err) == 0;
    check(ok && st.n_files == 2 && st.n_tensors == 2, "sharded index: two files, two tensors");
    const StTensor *y = ok ? st_find(&st, "y.bias") : NULL;
    check(y && y->dtype == ST_BF16 && st_read_f32(&st, y, out, err, sizeof err) == 0 && out[3] == 10.0f,
          "sharded: tensor read from the second file");
    if (ok) st_close(&st);
    f = fopen(p, "w");
    fputs("{\"weight_map\":{\"x.weight\":\"model-00001-of-00002.safetensors\",\"z\":\"model-00003-of-00002.safetensors\"}}", f);
    fclose(f);
    check(open_fails_with(sd, "model-00003-of-00002.safetensors: No such file"), "sharded: missing shard file named");
    f = fopen(p, "w");
    fputs("{\"weight_map\":{\"x.weight\":\"../../etc/passwd\"}}", f);
    fclose(f);
    check(open_fails_with(sd, "is not a file name in the directory"), "sharded: path outside the directory refused");

    /* broken files */
    snprintf(p, sizeof p, "%s/bad1.safetensors", dir);
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", a, 8);
    check(open_fails_with(p, "data_offsets outside the file"), "truncated data detected");
    write_raw(p, "{\"a\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}", a, 8);
    check(open_fails_with(p, "unsupported or missing dtype"), "unsupported dtype named");
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", a, 8);
    check(open_fails_with(p, "8 bytes for 3 elements"), "size/shape mismatch detected");
    write_raw(p, "{not json", NULL, 0);
    check(open_fails_with(p, "header is not a JSON object"), "bad header JSON");
    f = fopen(p, "wb");
    unsigned char huge[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
    fwrite(huge, 1, 8, f);
    fclose(f);
    check(open_fails_with(p, "bad safetensors header length"), "absurd header length");

    /* offsets: overlap, holes, trailing bytes, sizes, integers, non-regular files */
    float z[8] = {0};
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}", z, 24);
    check(open_fails_with(p, "tensor 'b' (bytes 8..24) overlaps tensor 'a' (bytes 0..16)"), "overlapping data_offsets refused, both named");
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", z, 8);
    check(open_fails_with(p, "overlaps tensor"), "two tensors on the same bytes refused");
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}", z, 24);
    check(open_fails_with(p, "leaving bytes 8..16 unused"), "a hole between tensors refused");
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", z, 12);
    check(open_fails_with(p, "4 bytes after the last tensor"), "trailing bytes after the last tensor refused");
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8.5]}}", z, 12);
    check(open_fails_with(p, "data_offsets are not integers"), "fractional data_offsets refused");
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", z, 4);
    check(open_fails_with(p, "shape is not a list of non-negative integers"), "fractional shape refused");
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1000000000000,1000000000000,1000000000000],"
                 "\"data_offsets\":[0,8]}}", z, 8);
    check(open_fails_with(p, "more elements than any file holds"), "element count overflow refused");
    write_raw(p, "{\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,8]}}", z, 8);
    check(open_fails_with(p, "8 bytes for 2 elements (BF16: 4 bytes)"), "size must be shape x dtype size");
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", z, 8);
    StModel ok_st;
    check(st_open(&ok_st, p, err, sizeof err) == 0 && ok_st.n_tensors == 2, "an empty tensor beside a full one is fine");
    if (ok_st.n_files) st_close(&ok_st);
    snprintf(p, sizeof p, "%s/fifo.safetensors", dir);
    check(mkfifo(p, 0644) == 0 && open_fails_with(p, "not a regular file"), "a FIFO as a safetensors file: refused, no hang");
}

static void test_sha256(const char *dir)
{
    char p[4096], hex[65];
    snprintf(p, sizeof p, "%s/a-million", dir);
    FILE *f = fopen(p, "wb");
    for (int i = 0; i < 1000000; i++) fputc('a', f);
    fclose(f);
    check(sha256_file_hex(p, hex) == 0 && !strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"),
          "sha256 of a million 'a' (FIPS 180-2 vector)");
    Sha256 s;
    uint8_t d[32];
    sha256_init(&s);
    sha256_update(&s, "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56);
    sha256_final(&s, d);
    check(d[0] == 0x24 && d[1] == 0x8d && d[31] == 0xc1, "sha256 of the 448-bit vector");
    sha256_init(&s);
    check(sha256_final_hex(&s, hex) == 0 && !strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
          "sha256 of nothing");

    /* hashed while written == hashed by reading the file back, F32 and BF16 */
    static float w[3000];
    for (int i = 0; i < 3000; i++) w[i] = (float)i * 0.37f - 100.0f;
    StWriteTensor t[2] = {{"a", 2, {30, 50}, w}, {"b", 1, {1500}, w + 1500}};
    for (int dt = 0; dt < 2; dt++) {
        char one[65] = "", back[65] = "", err[256];
        snprintf(p, sizeof p, "%s/hashed.safetensors", dir);
        int rc = st_write_sha256(p, t, 2, dt ? ST_BF16 : ST_F32, "\"format\":\"pt\"", one, err, sizeof err);
        check(rc == 0 && sha256_file_hex(p, back) == 0 && strlen(one) == 64 && !strcmp(one, back),
              dt ? "st_write_sha256 (BF16): the digest of the bytes on disk" : "st_write_sha256 (F32): the digest of the bytes on disk");
    }

    /* a manifest from known digests: the same text as from reading; a wrong known digest is what verify catches */
    char md[2048], err[512];
    snprintf(md, sizeof md, "%s/manifest-dir", dir);
    mkdir(md, 0755);
    snprintf(p, sizeof p, "%s/x.safetensors", md);
    char hx[65];
    if (st_write_sha256(p, t, 2, ST_F32, NULL, hx, err, sizeof err)) hx[0] = 0;
    snprintf(p, sizeof p, "%s/y.txt", md);
    f = fopen(p, "w");
    fputs("y\n", f);
    fclose(f);
    ManifestHash known[1] = {{"x.safetensors", ""}};
    snprintf(known[0].hex, sizeof known[0].hex, "%s", hx);
    check(manifest_write_known(md, known, 1, err, sizeof err) == 0 && manifest_check(md, NULL, err, sizeof err) == 0,
          "manifest_write_known: verifies (known digest for one file, the other read)");
    known[0].hex[0] = known[0].hex[0] == '0' ? '1' : '0';
    check(manifest_write_known(md, known, 1, err, sizeof err) == 0 && manifest_check(md, NULL, err, sizeof err) == 1,
          "manifest_write_known with a wrong digest: verify reports the mismatch");
}

/* Every line of path parses as JSON (cJSON rejects inf/nan) with step and an
 * ISO 8601 UTC time; the count, or -1. */
static int metrics_lines_json(const char *path, int *with_flag)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[2048];
    int n = 0;
    *with_flag = 0;
    while (fgets(line, sizeof line, f)) {
        cJSON *o = cJSON_Parse(line);
        const char *t = cJSON_GetStringValue(cJSON_GetObjectItem(o, "time"));
        int y, mo, d, h, mi, sec, ms;
        char z = 0;
        int ok = cJSON_IsNumber(cJSON_GetObjectItem(o, "step")) && t &&
                 sscanf(t, "%4d-%2d-%2dT%2d:%2d:%2d.%3d%c", &y, &mo, &d, &h, &mi, &sec, &ms, &z) == 8 && z == 'Z' &&
                 strlen(t) == 24;
        *with_flag += cJSON_GetObjectItem(o, "nonfinite") != NULL;
        cJSON_Delete(o);
        if (!ok) { fclose(f); return -1; }
        n++;
    }
    fclose(f);
    return n;
}

static void test_metrics(const char *dir)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/metrics.jsonl", dir);
    unlink(p);
    MetricsFile mf;
    int flags = 0;
    StepMetrics a = {1, 2.5, 1e-3, 0.75, 100, 1000.0, 0.1, 1 << 20};
    StepMetrics b = {2, 2.4, 1e-3, INFINITY, 100, 1000.0, 0.1, 1 << 20};
    StepMetrics c = {3, 2.3, NAN, -INFINITY, 100, 1000.0, 0.1, 1 << 20};
    int rc = metrics_open(&mf, p, 0) || metrics_write(&mf, &a) || metrics_write(&mf, &b) || metrics_write(&mf, &c);
    metrics_close(&mf);
    check(!rc && metrics_lines_json(p, &flags) == 3 && flags == 2,
          "metrics: every line JSON with an ISO 8601 time; non-finite values as null plus \"nonfinite\"");
    FILE *f = fopen(p, "r");
    char l2[1024] = "", l3[1024] = "";
    if (f) { if (!fgets(l2, sizeof l2, f) || !fgets(l2, sizeof l2, f) || !fgets(l3, sizeof l3, f)) l2[0] = 0; fclose(f); }
    check(strstr(l2, "\"grad_norm\":null") && strstr(l2, "\"nonfinite\":{\"grad_norm\":\"inf\"}}"),
          "metrics: an infinite grad_norm -> null, nonfinite {grad_norm: inf}");
    check(strstr(l3, "\"lr\":null") && strstr(l3, "\"nonfinite\":{\"lr\":\"nan\",\"grad_norm\":\"-inf\"}}"),
          "metrics: NaN and -inf flagged by field");

    /* resume: an older writer's bare inf is rewritten, not dropped; later steps are cut */
    f = fopen(p, "w");
    fputs("{\"step\":1,\"loss\":2.5,\"lr\":0.001,\"grad_norm\":inf,\"tokens\":100}\n"
          "{\"step\":2,\"loss\":2.4,\"lr\":-nan,\"grad_norm\":0.5,\"tokens\":100}\n"
          "{\"step\":3,\"loss\":2.3,\"lr\":0.001,\"grad_norm\":0.5,\"tokens\":100}\n", f);
    fclose(f);
    rc = metrics_open(&mf, p, 2);
    metrics_close(&mf);
    char all[2048] = "";
    f = fopen(p, "r");
    size_t got = f ? fread(all, 1, sizeof all - 1, f) : 0;
    if (f) fclose(f);
    all[got] = 0;
    check(!rc && strstr(all, "{\"step\":1,\"loss\":2.5,\"lr\":0.001,\"grad_norm\":null,\"tokens\":100,\"nonfinite\":{\"grad_norm\":\"inf\"}}\n") &&
              strstr(all, "\"lr\":null,\"grad_norm\":0.5,\"tokens\":100,\"nonfinite\":{\"lr\":\"nan\"}}\n") &&
              !strstr(all, "\"step\":3"),
          "metrics resume: bare inf/-nan of an older writer kept as null + nonfinite; the step after the checkpoint cut");
}

/* Two writers of one metrics file (two runs at once, or a reader's tool
 * appending a marker): every line is appended whole at the file's end, never
 * written over another writer's line at a stale offset. */
static void test_metrics_append(const char *dir)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/metrics_append.jsonl", dir);
    unlink(p);
    MetricsFile mf;
    StepMetrics a = {1, 2.5, 1e-3, 0.75, 100, 1000.0, 0.1, 1 << 20}, b = {2, 2.4, 1e-3, 0.7, 100, 1000.0, 0.1, 1 << 20};
    int rc = metrics_open(&mf, p, 0) || metrics_write(&mf, &a);
    FILE *other = fopen(p, "a");
    if (other) { fputs("{\"step\":99,\"time\":\"2026-01-01T00:00:00.000Z\"}\n", other); fclose(other); }
    rc = rc || metrics_write(&mf, &b);
    metrics_close(&mf);
    int flags = 0;
    char all[4096] = "";
    FILE *f = fopen(p, "r");
    size_t got = f ? fread(all, 1, sizeof all - 1, f) : 0;
    if (f) fclose(f);
    all[got] = 0;
    char *mark = strstr(all, "{\"step\":99,"), *two = strstr(all, "{\"step\":2,");
    check(!rc && other && metrics_lines_json(p, &flags) == 3 && mark && two && two > mark,
          "metrics: lines appended whole (O_APPEND): another writer's line in between is kept, the next line after it");
}

static void test_hf_config(const char *dir)
{
    ModelConfig c = {ARCH_QWEN3, 3, 96, 6, 2, 32, 200, 1000, 4096, 1e6, 1e-6, 1, 0, 1}, r;
    char p[4096], err[512], diff[128];
    const ModelArch archs[3] = {ARCH_LLAMA, ARCH_QWEN2, ARCH_QWEN3};
    for (int i = 0; i < 3; i++) {
        c.arch = archs[i];
        c.qkv_bias = c.arch == ARCH_QWEN2;
        c.qk_norm = c.arch == ARCH_QWEN3;
        snprintf(p, sizeof p, "%s/config.json", dir);
        int ok = hf_config_write(p, &c, "float32", 1, 2, err, sizeof err) == 0 &&
                 hf_config_read(dir, &r, err, sizeof err) == 0 && !hf_config_diff(&c, &r, diff, sizeof diff) &&
                 r.max_context == 4096 && r.rms_eps == 1e-6;
        check(ok, c.arch == ARCH_LLAMA ? "config.json round trip (llama)" :
                  c.arch == ARCH_QWEN2 ? "config.json round trip (qwen2)" : "config.json round trip (qwen3)");
    }
    FILE *f = fopen(p, "w");
    fputs("{\"model_type\":\"gpt2\",\"hidden_size\":8}", f);
    fclose(f);
    check(hf_config_read(p, &r, err, sizeof err) != 0 && strstr(err, "\"gpt2\" is not llama, qwen2 or qwen3"),
          "config.json: unsupported model_type named");
    /* a stock Qwen2 config: no head_dim (hidden/heads), attention bias implied */
    f = fopen(p, "w");
    fputs("{\"model_type\":\"qwen2\",\"hidden_size\":896,\"intermediate_size\":4864,\"num_hidden_layers\":24,"
          "\"num_attention_heads\":14,\"num_key_value_heads\":2,\"vocab_size\":151936,\"rope_theta\":1000000.0,"
          "\"rms_norm_eps\":1e-06,\"tie_word_embeddings\":true,\"max_position_embeddings\":32768}", f);
    fclose(f);
    check(hf_config_read(p, &r, err, sizeof err) == 0 && r.head_dim == 64 && r.qkv_bias && r.tie_embeddings &&
              r.kv_heads == 2, "stock Qwen2.5-0.5B config.json: head_dim derived, bias implied");
    /* transformers 5 writes theta only inside rope_parameters (the old reader fell back to 10000) */
    static const char *base = "{\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":128,"
                              "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":300,";
    const struct { const char *rest, *want_err; double theta; const char *what; } cases[] = {
        {"\"rope_parameters\":{\"rope_theta\":500000.0,\"rope_type\":\"default\"}}", NULL, 5e5,
         "transformers 5 config.json: rope_theta from rope_parameters"},
        {"\"rope_theta\":500000.0,\"rope_scaling\":null}", NULL, 5e5, "transformers 4 config.json: rope_theta, rope_scaling null"},
        {"\"max_position_embeddings\":64}", NULL, 1e4, "no rope_theta: the default 10000"},
        {"\"rope_theta\":500000.0,\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8.0}}",
         "RoPE scaling \"llama3\" is not implemented", 0, "Llama 3.1 rope_scaling llama3: refused, not trained as plain RoPE"},
        {"\"rope_parameters\":{\"rope_theta\":1e6,\"rope_type\":\"yarn\",\"factor\":4.0}}",
         "RoPE scaling \"yarn\" is not implemented", 0, "transformers 5 rope_parameters yarn: refused"},
        {"\"rope_scaling\":{\"type\":\"linear\",\"factor\":2.0}}", "RoPE scaling \"linear\"", 0,
         "legacy rope_scaling type linear: refused"},
        {"\"rope_theta\":10000.0,\"rope_parameters\":{\"rope_theta\":500000.0}}", "disagree", 0,
         "rope_theta and rope_parameters.rope_theta disagreeing: refused"},
        {"\"rope_theta\":\"big\"}", "is not a number", 0, "rope_theta a string: refused"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        f = fopen(p, "w");
        fprintf(f, "%s%s", base, cases[i].rest);
        fclose(f);
        int rc = hf_config_read(p, &r, err, sizeof err);
        int ok = cases[i].want_err ? rc != 0 && strstr(err, cases[i].want_err) != NULL
                                   : rc == 0 && r.rope_theta == cases[i].theta;
        if (!ok) printf("  got rc %d theta %g: %s\n", rc, r.rope_theta, rc ? err : "");
        check(ok, cases[i].what);
    }
    /* regular files only: a FIFO as config.json is refused at once, not waited on */
    char fifo[4200];
    snprintf(fifo, sizeof fifo, "%s/fifo-config.json", dir);
    unlink(fifo);
    check(mkfifo(fifo, 0600) == 0 && hf_config_read(fifo, &r, err, sizeof err) != 0 && strstr(err, "FIFO"),
          "config.json a FIFO: refused without blocking");
    unlink(fifo);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = calloc(1, 1 << 20);
    if (buf) fread(buf, 1, (1 << 20) - 1, f);
    fclose(f);
    return buf;
}

/* text with every `from` replaced by `to` (a new string) */
static char *replaced(const char *text, const char *from, const char *to)
{
    char *out = calloc(1, strlen(text) * 2 + 64), *o = out;
    for (const char *p = text; *p;) {
        if (!strncmp(p, from, strlen(from))) { o = stpcpy(o, to); p += strlen(from); }
        else *o++ = *p++;
    }
    return out;
}

/* The export's config.json is the source model's with only the dtype changed. */
static void test_config_derive(const char *dir, const char *files)
{
    char src[4200], out[4200], tmp[4300], err[512];
    snprintf(out, sizeof out, "%s/derived-config.json", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    /* real files: transformers 4 (torch_dtype), transformers 5 (dtype, rope_parameters) */
    const char *real[] = {"qwen2.5-0.5b-instruct", "qwen3-0.6b", "llama_tf5"};
    for (int i = 0; i < 3; i++) {
        snprintf(src, sizeof src, "%s/%s", files, real[i]);
        ModelConfig c;
        char what[200], srcfile[4300];
        snprintf(srcfile, sizeof srcfile, "%s/config.json", src);
        char *text = slurp(srcfile);
        int ok = text && hf_config_read(src, &c, err, sizeof err) == 0;
        /* the source's own dtype: the same bytes */
        char *got = ok && hf_config_derive(out, src, &c, "bfloat16", err, sizeof err) == 0 ? slurp(out) : NULL;
        snprintf(what, sizeof what, "%s config.json derived at its own dtype: byte-identical", real[i]);
        check(got && !strcmp(got, text), what);
        free(got);
        /* another dtype: only the dtype value(s) differ */
        char *want = text ? replaced(text, "\"bfloat16\"", "\"float32\"") : NULL;
        got = ok && hf_config_derive(out, src, &c, "float32", err, sizeof err) == 0 ? slurp(out) : NULL;
        snprintf(what, sizeof what, "%s config.json derived as float32: only the dtype changed", real[i]);
        check(got && want && !strcmp(got, want) && strcmp(want, text), what);
        if (!got) printf("  %s\n", err);
        free(got);
        free(want);
        free(text);
    }
    /* Llama 3.1 (rope_scaling llama3): never written as a model llmc-train did not
     * train; the run refuses this config at the start already (hf_config_read) */
    ModelConfig c = {ARCH_LLAMA, 32, 4096, 32, 8, 128, 14336, 128256, 131072, 5e5, 1e-5, 0, 0, 0};
    unlink(out);
    snprintf(src, sizeof src, "%s/llama3.1-8b", files);
    check(hf_config_derive(out, src, &c, "bfloat16", err, sizeof err) != 0 &&
              strstr(err, "RoPE scaling \"llama3\" is not implemented") && access(out, F_OK) && access(tmp, F_OK),
          "Llama 3.1 config.json (rope_scaling llama3): refused, nothing written");
    /* a source without any dtype key gets torch_dtype, every key kept */
    snprintf(src, sizeof src, "%s/nodtype.json", dir);
    FILE *f = fopen(src, "w");
    fputs("{\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":2,"
          "\"num_attention_heads\":4,\"vocab_size\":300,\"custom\":{\"a\":[1,\"}\"]},\"rope_theta\":500000.0}\n", f);
    fclose(f);
    ModelConfig s;
    char *got = hf_config_read(src, &s, err, sizeof err) == 0 &&
                hf_config_derive(out, src, &s, "float32", err, sizeof err) == 0 ? slurp(out) : NULL;
    check(got && !strcmp(got, "{\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":2,"
                              "\"num_attention_heads\":4,\"vocab_size\":300,\"custom\":{\"a\":[1,\"}\"]},\"rope_theta\":500000.0,\n"
                              "  \"torch_dtype\": \"float32\"}\n"),
          "config.json without a dtype: torch_dtype added after the last key, the rest byte-identical");
    free(got);
    /* a source that does not describe the exported model: refused */
    s.ffn = 96;
    check(hf_config_derive(out, src, &s, "float32", err, sizeof err) != 0 && strstr(err, "ffn 96 vs 128") &&
              access(tmp, F_OK),
          "config.json of another shape than the exported model: refused, naming the field");
}

static void test_schedules(void)
{
    LrSchedule s = {SCHED_LINEAR, 1.0, 0, 10, 110};
    check(lr_at(&s, 0) == 0 && fabs(lr_at(&s, 5) - 0.5) < 1e-12 && lr_at(&s, 10) == 1.0 &&
              fabs(lr_at(&s, 60) - 0.5) < 1e-12 && lr_at(&s, 110) == 0, "linear with warmup");
    s.kind = SCHED_CONSTANT;
    check(fabs(lr_at(&s, 3) - 0.3) < 1e-12 && lr_at(&s, 50) == 1.0 && lr_at(&s, 109) == 1.0, "constant with warmup");
    s = (LrSchedule){SCHED_COSINE, 2.0, 0.2, 0, 100};
    check(lr_at(&s, 0) == 2.0 && fabs(lr_at(&s, 50) - 1.1) < 1e-12 && fabs(lr_at(&s, 100) - 0.2) < 1e-12,
          "cosine to min_lr (0.5*(1+cos) scaled between min_lr and lr)");
    check(warmup_from_ratio(1000, 0.03) == 30 && warmup_from_ratio(333, 0.03) == 10, "warmup = ceil(total * ratio)");
    float g[4] = {3, 0, 4, 0};
    double n = grad_global_norm(g, 4);
    grad_clip(g, 4, n, 1.0);
    check(n == 5.0 && fabsf(g[0] - 0.6f) < 1e-6f && fabsf(g[2] - 0.8f) < 1e-6f, "global-norm clip to 1");
}

static void test_plan(const char *plan_path)
{
    RunPlan p;
    char err[512];
    int ok = run_plan_load(&p, plan_path, err, sizeof err) == 0;
    if (!ok) printf("  %s\n", err);
    check(ok && p.model.hidden == 32 && p.model.kv_heads == 2 && p.model.qkv_bias && p.micro_batch == 4 &&
              p.grad_accum == 2 && p.max_steps == 12 && p.warmup_steps == 2 && p.warmup_ratio < 0 &&
              p.schedule == SCHED_COSINE && p.ckpt_every_steps == 4 && p.ckpt_every_seconds < 0 &&
              p.tokenizer_path == NULL && strstr(p.shards_dir, "/shards") && strstr(p.metrics_path, "run/metrics.jsonl"),
          "tiny_plan.json loads with every field");
    if (ok) run_plan_free(&p);
    check(run_plan_load(&p, "/nonexistent/plan.json", err, sizeof err) != 0 && strstr(err, "/nonexistent/plan.json: No such file"),
          "missing plan file named");
}

/* write FILE with TEXT (a PEFT adapter's config, edited) */
static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f) { fputs(text, f); fclose(f); }
}

static int peft_load_fails_with(const char *dir, const Model *base, const char *text)
{
    char err[1024] = "";
    int alpha, rslora;
    Lora *l = peft_load(dir, base, &alpha, &rslora, err, sizeof err);
    if (l) { lora_free(l); return 0; }
    if (!strstr(err, text)) { printf("  message was: %s\n", err); return 0; }
    return 1;
}

/* peft_export then peft_load (the CUDA trainer's `check --lora` reads adapters
 * this way): the same targets, rank, alpha, rsLoRA and every value bit for bit;
 * bad directories refused with the file and what is wrong. */
static void test_peft_roundtrip(const char *dir)
{
    ModelConfig c;
    Model base;
    char err[1024], ad[4096], p[4200];
    check(model_preset("tiny", &c) == 0 && model_layout(&base, &c) == 0, "tiny layout");
    unsigned targets = (1u << LORA_Q) | (1u << LORA_V) | (1u << LORA_DOWN);
    Lora *l = lora_new(&base, targets, 8, 16, 1, 7);
    check(l != NULL, "lora_new");
    if (!l) return;
    for (size_t i = 0; i < l->p.n_floats; i++) l->p.w[i] = (float)sin(0.37 * (double)i) * 0.1f;
    snprintf(ad, sizeof ad, "%s/adapter", dir);
    check(peft_export(ad, l, 16, 1, NULL, err, sizeof err) == 0, "peft_export");
    int alpha = 0, rslora = 0;
    Lora *b = peft_load(ad, &base, &alpha, &rslora, err, sizeof err);
    check(b && b->targets == targets && b->rank == 8 && alpha == 16 && rslora == 1 && b->scale == l->scale &&
              b->p.n_floats == l->p.n_floats && !memcmp(b->p.w, l->p.w, l->p.n_floats * sizeof(float)),
          "peft_load: the adapter peft_export wrote, bit for bit");
    lora_free(b);
    snprintf(p, sizeof p, "%s/adapter_config.json", ad);
    write_text(p, "{\"r\": 8, \"lora_alpha\": 16, \"target_modules\": [\"q_proj\", \"lm_head\"]}");
    check(peft_load_fails_with(ad, &base, "target_modules among q_proj"), "peft_load: an unknown module refused");
    write_text(p, "{\"r\": 0, \"lora_alpha\": 16, \"target_modules\": [\"q_proj\"]}");
    check(peft_load_fails_with(ad, &base, "want r (an integer 1-4096)"), "peft_load: r = 0 refused");
    write_text(p, "{\"r\": 8, \"lora_alpha\": 16, \"target_modules\": [\"q_proj\", \"k_proj\"]}");
    check(peft_load_fails_with(ad, &base, "k_proj.lora_A.weight is missing"), "peft_load: a missing tensor named");
    write_text(p, "{\"r\": 4, \"lora_alpha\": 16, \"target_modules\": [\"q_proj\"]}");
    check(peft_load_fails_with(ad, &base, "has the wrong size"), "peft_load: a rank that is not the file's refused");
    unlink(p);
    check(mkdir(p, 0755) == 0 && peft_load_fails_with(ad, &base, "adapter_config.json: not a readable JSON file"),
          "peft_load: a directory where adapter_config.json should be refused");
    rmdir(p);
    lora_free(l);
    model_free(&base);
}

/* st_read_f32_range: a window of a tensor equals that window of the whole
 * read, for F32 and BF16 (BF16 read in 4 MiB pieces: a 3 Mi-element tensor
 * crosses two piece boundaries), empty and whole windows, and a window
 * outside the tensor refused with its name. */
static void test_safetensors_range(const char *dir)
{
    enum { N = 3 << 20 };   /* 3 Mi floats: 6 MiB in BF16 */
    char p[4200], err[512];
    /* part: one element past the largest window, the NaN that shows nothing was written beyond it */
    float *src = malloc(N * sizeof *src), *whole = malloc(N * sizeof *whole), *part = malloc((N + 1) * sizeof *part);
    if (!src || !whole || !part) { check(0, "range test: out of memory"); free(src); free(whole); free(part); return; }
    for (size_t i = 0; i < N; i++) src[i] = (float)((double)i * 0.37 - 1e5);   /* bf16 rounds these differently */
    const size_t win[][2] = {{0, N}, {0, 0}, {N, 0}, {1, 5}, {(2 << 20) - 3, 7}, {(size_t)N - 9, 9},
                             {12345, (2 << 20) + 777}};
    for (int dt = 0; dt < 2; dt++) {
        StWriteTensor t = {"big", 2, {3, N / 3}, src};
        snprintf(p, sizeof p, "%s/range%d.safetensors", dir, dt);
        StModel st;
        int ok = st_write(p, &t, 1, dt ? ST_BF16 : ST_F32, NULL, err, sizeof err) == 0 &&
                 st_open(&st, p, err, sizeof err) == 0;
        const StTensor *x = ok ? st_find(&st, "big") : NULL;
        ok = x && st_read_f32(&st, x, whole, err, sizeof err) == 0;
        for (size_t w = 0; ok && w < sizeof win / sizeof win[0]; w++) {
            memset(part, 0xff, (win[w][1] + 1) * sizeof *part);
            ok = st_read_f32_range(&st, x, win[w][0], win[w][1], part, err, sizeof err) == 0 &&
                 !memcmp(part, whole + win[w][0], win[w][1] * sizeof *part) &&
                 (win[w][1] == N || isnan(part[win[w][1]]));   /* nothing written past the window */
        }
        check(ok, dt ? "st_read_f32_range, BF16 in pieces: every window equals the whole read's"
                     : "st_read_f32_range, F32: every window equals the whole read's");
        if (x) {
            err[0] = 0;
            check(st_read_f32_range(&st, x, N - 2, 3, part, err, sizeof err) == -1 && strstr(err, "'big'") &&
                  strstr(err, "outside"), "st_read_f32_range: a window past the end is refused, naming the tensor");
            st_close(&st);
        }
    }
    free(src); free(whole); free(part);
}

/* st_create + st_fill: two tensors written in pieces, out of order and
 * from two open descriptors (two "ranks"), give st_write's bytes exactly,
 * for F32 and for BF16 (rounded as st_write rounds); a window past a
 * tensor's end is refused naming the tensor. */
static void test_safetensors_fill(const char *dir)
{
    enum { NA = 3 * 4099, NB = 10 };
    static float a[NA], b[NB];
    for (int i = 0; i < NA; i++) a[i] = (float)((double)i * 0.37 - 1e3);
    for (int i = 0; i < NB; i++) b[i] = -(float)i / 3.0f;
    StWriteTensor t[2] = {{"a", 2, {3, NA / 3}, a}, {"b", 1, {NB}, b}};
    /* the pieces: of a, then of b, in an order no writer would choose */
    const size_t pa[][2] = {{9000, NA - 9000}, {0, 1}, {4096, 4904}, {1, 4095}};
    const size_t pb[][2] = {{5, 5}, {0, 5}};
    char p[4200], q[4200], err[512];
    for (int dt = 0; dt < 2; dt++) {
        StDtype d = dt ? ST_BF16 : ST_F32;
        snprintf(p, sizeof p, "%s/fill-ref%d.safetensors", dir, dt);
        snprintf(q, sizeof q, "%s/fill%d.safetensors", dir, dt);
        StModel st;
        int ok = st_write(p, t, 2, d, "\"format\":\"pt\"", err, sizeof err) == 0 &&
                 st_create(q, t, 2, d, "\"format\":\"pt\"", err, sizeof err) == 0 &&
                 st_open(&st, q, err, sizeof err) == 0, opened = ok;
        int fd0 = ok ? open(q, O_WRONLY) : -1, fd1 = ok ? open(q, O_WRONLY) : -1;
        const StTensor *xa = ok ? st_find(&st, "a") : NULL, *xb = ok ? st_find(&st, "b") : NULL;
        ok = ok && xa && xb && fd0 >= 0 && fd1 >= 0;
        for (size_t k = 0; ok && k < sizeof pa / sizeof pa[0]; k++)
            ok = st_fill(&st, k % 2 ? fd1 : fd0, xa, pa[k][0], pa[k][1], a + pa[k][0], err, sizeof err) == 0;
        for (size_t k = 0; ok && k < sizeof pb / sizeof pb[0]; k++)
            ok = st_fill(&st, k % 2 ? fd0 : fd1, xb, pb[k][0], pb[k][1], b + pb[k][0], err, sizeof err) == 0;
        if (xb) {
            err[0] = 0;
            check(st_fill(&st, fd0, xb, 8, 3, b, err, sizeof err) == -1 && strstr(err, "'b'"),
                  dt ? "st_fill BF16: a window past the end is refused, naming the tensor"
                     : "st_fill F32: a window past the end is refused, naming the tensor");
        }
        if (fd0 >= 0) close(fd0);
        if (fd1 >= 0) close(fd1);
        if (opened) st_close(&st);
        char hp[65] = "", hq[65] = "";
        check(ok && sha256_file_hex(p, hp) == 0 && sha256_file_hex(q, hq) == 0 && !strcmp(hp, hq),
              dt ? "st_create + st_fill in pieces, BF16: st_write's bytes" : "st_create + st_fill in pieces, F32: st_write's bytes");
    }
}

int main(int argc, char **argv)
{
    if (argc != 4) { fprintf(stderr, "usage: test_formats SCRATCH_DIR TINY_PLAN CONFIG_DIR\n"); return 2; }
    test_conversions();
    test_safetensors(argv[1]);
    test_safetensors_range(argv[1]);
    test_safetensors_fill(argv[1]);
    test_sha256(argv[1]);
    test_metrics(argv[1]);
    test_metrics_append(argv[1]);
    test_hf_config(argv[1]);
    test_config_derive(argv[1], argv[3]);
    test_schedules();
    test_plan(argv[2]);
    test_peft_roundtrip(argv[1]);
    printf("formats: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
