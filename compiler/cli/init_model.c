/* init_model.c — `llmc init-model DIR [NAME]`: the model block of a plan,
 * written from a Hugging Face model directory's config.json, so that nobody
 * types a shape by hand (docs/language.md, "llmc init-model").
 *
 * The config is read by the same reader `llmc check` uses (model_files.c), so
 * the block printed is exactly what check would take from the file; every key
 * is written out, so the plan also checks where DIR is not readable (compiling
 * away from the cluster). Text in the canonical layout of `llmc fmt`. */
#include "diag.h"
#include "model_files.h"
#include "plan.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Exit statuses: 0 printed, 1 the config.json is not a model llmc takes, 2 usage or a file not readable. */
enum { INIT_OK = 0, INIT_BAD_CONFIG = 1, INIT_USAGE = 2 };

static const char init_usage[] = "usage: llmc init-model DIR [NAME]   print a model block for the HF model in DIR\n";

/* A block name from the directory's last component: lower case, anything
 * but [a-z0-9_] as '_', never starting with a digit ("Qwen2.5-7B" -> qwen2_5_7b). */
static void name_from_dir(const char *dir, char *out, size_t len)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    const char *base = dir;
    for (size_t i = 0; i < n; i++)
        if (dir[i] == '/' && i + 1 < n) base = dir + i + 1;
    size_t o = 0;
    /* a name must not start with a digit: "7b" becomes "m_7b" */
    if (!isalpha((unsigned char)*base) && *base != '_' && len > 2) { out[o++] = 'm'; out[o++] = '_'; }
    for (const char *p = base; p < dir + n && o + 1 < len; p++)
        out[o++] = isalnum((unsigned char)*p) ? (char)tolower((unsigned char)*p) : '_';
    out[o] = 0;
    if (!o || (o == 2 && out[0] == 'm')) snprintf(out, len, "model");
}

/* A block name the lexer reads as one identifier. */
static bool is_ident(const char *s)
{
    if (!isalpha((unsigned char)*s) && *s != '_') return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_') return false;
    return true;
}

/* Characters a plan path may not hold (they reach shell scripts unquoted). */
static bool plan_path_ok(const char *p)
{
    for (const unsigned char *s = (const unsigned char *)p; *s; s++)
        if (*s < 0x20 || *s == 0x7f || strchr("\"'$\\`", *s)) return false;
    return p[0] && p[0] != '~' && !isspace((unsigned char)p[0]) && !isspace((unsigned char)p[strlen(p) - 1]);
}

/* A number as the .llm lexer reads a float: the shortest form that reads back
 * the same, with a point or an exponent, the exponent without '+' or leading
 * zeros (1e6, 5e5, 1e-6, 0.5, 10000.0). */
static void llm_float(char *buf, size_t len, double v)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    char *e = strchr(buf, 'e');
    if (e) {
        char *d = e + 1, *s = e + 1;
        if (*s == '+') s++;
        else if (*s == '-') { *d++ = '-'; s++; }
        while (*s == '0' && s[1]) s++;
        memmove(d, s, strlen(s) + 1);
    } else if (!strchr(buf, '.')) {
        strncat(buf, ".0", len - strlen(buf) - 1);
    }
}

int init_model_main(int argc, char **argv)
{
    /* argv[0] is "init-model" */
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(init_usage, stdout);
        return INIT_OK;
    }
    if (argc < 2 || argc > 3 || argv[1][0] == '-' || (argc == 3 && argv[2][0] == '-')) {
        fputs("llmc: error: init-model takes a model directory and an optional block name\n", stderr);
        fputs(init_usage, stderr);
        return INIT_USAGE;
    }
    const char *dir = argv[1];
    char name[128];
    if (argc == 3) {
        if (!is_ident(argv[2]) || strlen(argv[2]) >= sizeof name) {
            char *clean = diag_escape(argv[2]);
            fprintf(stderr, "llmc: error: '%s' is not a block name (letters, digits and _, not starting with a digit)\n",
                    clean);
            free(clean);
            return INIT_USAGE;
        }
        snprintf(name, sizeof name, "%s", argv[2]);
    } else {
        name_from_dir(dir, name, sizeof name);
    }
    /* the plan's path: DIR as given when absolute, else made absolute here
     * (a relative path in a plan resolves against the plan's directory) */
    char path[4096];
    size_t dlen = strlen(dir);
    while (dlen > 1 && dir[dlen - 1] == '/') dlen--;
    if (dir[0] == '/') {
        snprintf(path, sizeof path, "%.*s", (int)dlen, dir);
    } else {
        char cwd[2048];
        if (!getcwd(cwd, sizeof cwd)) { fputs("llmc: error: cannot name the working directory\n", stderr); return INIT_USAGE; }
        const char *rel = dir;
        /* "./x" and ".//x" name x: the printed path stays tidy */
        while (rel[0] == '.' && rel[1] == '/') { rel += 2; dlen -= 2; while (*rel == '/') { rel++; dlen--; } }
        if (!strcmp(rel, ".") || dlen == 0) snprintf(path, sizeof path, "%s", cwd);
        else snprintf(path, sizeof path, "%s/%.*s", strcmp(cwd, "/") ? cwd : "", (int)dlen, rel);
    }
    ModelFileConfig c;
    char why[600];
    /* rc > 0: the file could not be read; rc < 0: it was read but is not a model llmc takes */
    int rc = model_config_read(path, &c, why, (int)sizeof why);
    if (rc != 0) {
        char *clean = diag_escape(rc > 0 ? path : why);
        if (rc > 0) fprintf(stderr, "llmc: error: cannot read '%s/config.json': %s\n", clean, why);
        else fprintf(stderr, "llmc: error: %s\n", clean);
        free(clean);
        return rc > 0 ? INIT_USAGE : INIT_BAD_CONFIG;
    }
    if (!plan_path_ok(path)) {
        char *clean = diag_escape(path);
        fprintf(stderr, "llmc: error: '%s' cannot be a plan path (no quotes, $, \\, backquotes, control characters, "
                        "leading ~ or surrounding white space)\n", clean);
        free(clean);
        return INIT_USAGE;
    }
    char theta[40], eps[40];
    llm_float(theta, sizeof theta, c.rope_theta);
    llm_float(eps, sizeof eps, c.rms_eps);
    printf("# from %s\n", c.file);
    if (c.rope_scaling[0])
        printf("# config.json asks for RoPE scaling %s: llmc-train refuses this model; train it\n"
               "# with backend = llamafactory, which applies the scaling\n", c.rope_scaling);
    /* (tie_embeddings has 14 characters, experts_per_token 17) */
    int w = c.experts > 0 ? 17 : 14;   /* the canonical layout aligns on the longest key */
    printf("model %s {\n", name);
    printf("  %-*s = %s\n", w, "arch", (unsigned)c.arch < ARCH_COUNT ? arch_llm_names[c.arch] : "?");
    printf("  %-*s = \"%s\"\n", w, "path", path);
    printf("  %-*s = %d\n", w, "layers", c.layers);
    printf("  %-*s = %d\n", w, "hidden", c.hidden);
    printf("  %-*s = %d\n", w, "heads", c.heads);
    printf("  %-*s = %d\n", w, "kv_heads", c.kv_heads);
    printf("  %-*s = %d\n", w, "head_dim", c.head_dim);
    printf("  %-*s = %d\n", w, "ffn", c.ffn);
    printf("  %-*s = %d\n", w, "vocab", c.vocab);
    printf("  %-*s = %d\n", w, "max_context", c.max_context);
    printf("  %-*s = %s\n", w, "rope_theta", theta);
    printf("  %-*s = %s\n", w, "rms_eps", eps);
    printf("  %-*s = %s\n", w, "tie_embeddings", c.tie_embeddings ? "true" : "false");
    if (c.experts > 0) {
        printf("  %-*s = %d\n", w, "experts", c.experts);
        printf("  %-*s = %d\n", w, "experts_per_token", c.experts_per_token);
    }
    printf("}\n");
    if (c.rope_scaling[0])
        fprintf(stderr, "llmc: warning: %s asks for RoPE scaling, which llmc-train does not implement "
                        "(backend = llamafactory applies it)\n", c.file);
    return fflush(stdout) == 0 ? INIT_OK : INIT_USAGE;
}
