/* estimate_data.c — the data of a run (docs/estimator.md, "Tokens per epoch",
 * "The stats file", "Sequences and steps"): tokens, samples and sequences per
 * epoch from what the datasets state, the stats file `llmc-train prepare`
 * leaves beside them or their size, mixtures, and the padded length of an
 * unpacked micro batch.
 */
#include <stdlib.h>
#include <sys/stat.h>
#include <cjson/cJSON.h>
#include "estimate_internal.h"

const char *estimate_token_source_name(TokenSource s)
{
    switch (s) {
    case TOKENS_STATED: return "stated";
    case TOKENS_FROM_STATS: return "prepare stats";
    case TOKENS_FROM_SIZE: return "file size";
    case TOKENS_FROM_SAMPLES: return "samples x context";
    case TOKENS_UNKNOWN: return "unknown";
    }
    return "unknown";
}

/* Size of a regular file, or 0 when it cannot be read from here. */
static double file_size(const char *path)
{
    struct stat st;
    if (!path || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    return (double)st.st_size;
}

/* The stats file `llmc-train prepare` is to leave beside a dataset:
 * FILE.stats.json = {"format": "llmc-data-stats", "version": 1, "records": N,
 * "tokens": T, "length_histogram": {"bin_tokens": W, "counts": [c0, c1, ...]}}
 * (docs/estimator.md, "The stats file"); bin i holds records of i*W to
 * (i+1)*W - 1 tokens. Read when reachable from here; false otherwise. */
bool estimate_read_stats(const char *data_file, DataStats *st)
{
    memset(st, 0, sizeof *st);
    if (!data_file) return false;
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s.stats.json", data_file) >= sizeof path) return false;
    FILE *fp = fopen(path, "rb");
    if (!fp) return false;
    char *buf = malloc(1 << 20);
    size_t n = buf ? fread(buf, 1, (1 << 20) - 1, fp) : 0;
    fclose(fp);
    if (!buf) return false;
    buf[n] = 0;
    cJSON *o = cJSON_Parse(buf);
    free(buf);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(o, "format");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(o, "version");
    const cJSON *rec = cJSON_GetObjectItemCaseSensitive(o, "records");
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(o, "tokens");
    bool ok = cJSON_IsString(fmt) && strcmp(fmt->valuestring, "llmc-data-stats") == 0 && cJSON_IsNumber(ver) &&
              ver->valuedouble == 1 && cJSON_IsNumber(rec) && rec->valuedouble >= 1 && rec->valuedouble < 1e15 &&
              cJSON_IsNumber(tok) && tok->valuedouble >= 0 && tok->valuedouble < 1e18;
    if (ok) {
        st->records = floor(rec->valuedouble);
        st->tokens = floor(tok->valuedouble);
        const cJSON *hist = cJSON_GetObjectItemCaseSensitive(o, "length_histogram");
        const cJSON *bin = cJSON_GetObjectItemCaseSensitive(hist, "bin_tokens");
        const cJSON *counts = cJSON_GetObjectItemCaseSensitive(hist, "counts");
        if (cJSON_IsNumber(bin) && bin->valuedouble >= 1 && bin->valuedouble <= 1e7 && cJSON_IsArray(counts) &&
            cJSON_GetArraySize(counts) >= 1 && cJSON_GetArraySize(counts) <= STATS_MAX_BINS) {
            double sum = 0;
            const cJSON *c;
            st->bin = floor(bin->valuedouble);
            cJSON_ArrayForEach(c, counts) {
                if (!cJSON_IsNumber(c) || !(c->valuedouble >= 0) || c->valuedouble > 1e15) { st->nbins = 0; sum = -1; break; }
                st->counts[st->nbins++] = c->valuedouble;
                sum += c->valuedouble;
            }
            if (!(sum > 0)) st->nbins = 0;
        }
    }
    cJSON_Delete(o);
    return ok;
}

/* Expected length of the longest of b records drawn from the histogram (each
 * bin at its upper end, capped at the context): a micro batch padded to its
 * longest record. E[max] = sum_i x_i (F_i^b - F_{i-1}^b). */
double estimate_padded_length(const double *counts, int nbins, double bin, int b, double context)
{
    double total = 0;
    for (int i = 0; i < nbins; i++) total += counts[i];
    if (!(total > 0) || b < 1) return 0;
    double cum = 0, prev = 0, e = 0;
    for (int i = 0; i < nbins; i++) {
        cum += counts[i];
        double f = pow(cum / total, b);
        double x = fmin((i + 1) * bin - 1, context);
        e += x * (f - prev);
        prev = f;
    }
    return e;
}

/* E[min(X, c)] for X exponential with mean theta. */
static double exp_cut_mean(double theta, double c)
{
    return theta * -expm1(-c / theta);
}

double estimate_padded_length_mean(double mean, int b, double context)
{
    if (!(mean > 0) || b < 1) return 0;
    if (!(context > 0) || mean >= 0.999 * context) return context > 0 ? fmin(mean, context) : mean;
    /* theta such that the cut mean is the stated one (the cut mean grows with theta) */
    double lo = mean, hi = mean;
    while (exp_cut_mean(hi, context) < mean && hi < 1e12 * mean) hi *= 2;
    for (int i = 0; i < 200; i++) {
        double mid = 0.5 * (lo + hi);
        if (exp_cut_mean(mid, context) < mean) lo = mid; else hi = mid;
    }
    double theta = 0.5 * (lo + hi);
    /* E[max of b] = integral over [0, c] of 1 - F(x)^b (Simpson's rule);
     * past 60 theta the integrand is below b e^-60 */
    int n = 8192;
    double h = fmin(context, 60 * theta) / n, sum = 0;
    for (int i = 0; i <= n; i++) {
        double f = 1 - pow(-expm1(-i * h / theta), b);
        sum += (i == 0 || i == n ? 1 : i % 2 ? 4 : 2) * f;
    }
    return sum * h / 3;
}

/* Tokens and sequences per epoch, summed over the datasets. Returns the first
 * dataset with nothing to count from, or NULL. */
const PlanDataset *count_tokens(const PlanTrain *t, Estimate *e)
{
    const PlanDataset *missing = NULL;
    double ctx = t->context > 0 ? t->context : 1;
    double bpt = t->bytes_per_token > 0 ? t->bytes_per_token : 4.0;
    bool packed = t->packing;
    TokenSource worst = TOKENS_STATED;
    double tokens = 0, sequences = 0, samples = 0;
    static double hist[STATS_MAX_BINS];
    memset(hist, 0, sizeof hist);
    double hist_bin = 0;
    int hist_n = 0;
    bool hist_mixed = false;

    /* Pairs (rm, dpo): every sample is two sequences, each cut at the context. */
    double seqs = e->seqs_per_sample > 1 ? e->seqs_per_sample : 1;
    /* each dataset's share, for an interleaved mixture (below) */
    struct { double tokens, samples, sequences; } *mix =
        t->backend == BACKEND_LLAMAFACTORY && t->mix != MIX_CONCAT && t->ndata > 1 ? calloc((size_t)t->ndata, sizeof *mix) : NULL;
    for (int i = 0; i < t->ndata; i++) {
        const PlanDataset *ds = t->data[i];
        double cap = ds->samples > 0 ? (double)ds->samples * ctx * seqs : INFINITY;
        double tk, on_disk;
        TokenSource src;
        DataStats *st = calloc(1, sizeof *st);
        bool have_stats = st && ds->tokens < 0 && estimate_read_stats(ds->file, st);
        if (ds->tokens >= 0) {
            tk = (double)ds->tokens; src = TOKENS_STATED;
        } else if (have_stats) {
            /* Measured by prepare: its tokens and records. */
            tk = st->tokens; src = TOKENS_FROM_STATS;
            if (ds->samples <= 0) cap = st->records * ctx * seqs;
            if (st->nbins > 0 && !packed) {
                if (hist_bin == 0 || hist_bin == st->bin) {
                    hist_bin = st->bin;
                    for (int k = 0; k < st->nbins; k++) hist[k] += st->counts[k];
                    if (st->nbins > hist_n) hist_n = st->nbins;
                } else {
                    hist_mixed = true;
                }
            } else if (!packed) {
                hist_mixed = true;
            }
        } else if (ds->size_bytes > 0) {
            tk = (double)ds->size_bytes / bpt; src = TOKENS_FROM_SIZE;
        } else if ((on_disk = file_size(ds->file)) > 0) {
            /* Reachable at compile time (a local plan): its size, not a guess. */
            tk = on_disk / bpt; src = TOKENS_FROM_SIZE;
            e->size_read_from_file = true;
        } else if (ds->samples > 0) {
            tk = cap; src = TOKENS_FROM_SAMPLES;
        } else {
            if (!missing) missing = ds;
            worst = TOKENS_UNKNOWN;
            free(st);
            continue;
        }
        /* A sample longer than the context is truncated to it. */
        if (tk > cap) tk = cap;
        if (src > worst) worst = src;
        if (!have_stats) hist_mixed = true;
        double nsamples = ds->samples > 0 ? (double)ds->samples : have_stats ? st->records : -1;
        if (nsamples <= 0) e->samples_unknown = true;
        double n_i = nsamples > 0 ? nsamples : ceil(tk / ctx);
        /* max_samples (llamafactory): each dataset cut to its first N samples */
        if (t->backend == BACKEND_LLAMAFACTORY && t->max_samples > 0 && n_i > (double)t->max_samples) {
            double keep = (double)t->max_samples / n_i;
            tk *= keep;
            n_i = (double)t->max_samples;
            if (nsamples > 0) nsamples = n_i;
        }
        /* Packed: sequences are full contexts. Unpacked: one sequence per sample;
         * with no sample count, samples are taken as full-context long. */
        double seq_i = packed || nsamples <= 0 ? ceil(tk / ctx) : nsamples * seqs;
        if (mix) { mix[i].tokens = tk; mix[i].samples = n_i; mix[i].sequences = seq_i; }
        tokens += tk;
        samples += n_i;
        sequences += seq_i;
        free(st);
    }
    /* Interleaved mixtures (LLaMA-Factory's merge_dataset, datasets'
     * interleave_datasets): each sample drawn from dataset i with probability
     * p_i (equal without interleave_probs), stopping when the first dataset is
     * exhausted (under: S = min n_i / p_i samples), when all are, repeating the
     * others (over: max n_i / p_i), or when all are without repeating (once:
     * every sample once, as concat). Dataset i gives p_i x S of its samples. */
    if (mix && !missing && (t->mix == MIX_INTERLEAVE_UNDER || t->mix == MIX_INTERLEAVE_OVER) && t->ndata > 1) {
        double S = t->mix == MIX_INTERLEAVE_UNDER ? INFINITY : 0;
        for (int i = 0; i < t->ndata; i++) {
            double p = t->ninterleave_probs == t->ndata ? t->interleave_probs[i] : 1.0 / t->ndata;
            double r = mix[i].samples > 0 ? mix[i].samples / p : 0;
            S = t->mix == MIX_INTERLEAVE_UNDER ? fmin(S, r) : fmax(S, r);
        }
        tokens = samples = sequences = 0;
        for (int i = 0; i < t->ndata && isfinite(S); i++) {
            double p = t->ninterleave_probs == t->ndata ? t->interleave_probs[i] : 1.0 / t->ndata;
            double f = mix[i].samples > 0 ? p * S / mix[i].samples : 0;
            tokens += f * mix[i].tokens;
            samples += f * mix[i].samples;
            sequences += ceil(f * mix[i].sequences);
        }
        e->mix_scaled = true;
    }
    free(mix);
    e->tokens_source = worst;
    e->tokens_measured = worst <= TOKENS_FROM_STATS;
    /* Unpacked: every dataset's histogram known (one bin width) decides the
     * padding; else none is counted (stated as an assumption). */
    e->padding_from_stats = e->padding_assumed = e->padding_full_rows = false;
    int rows = (t->micro_batch > 0 ? t->micro_batch : 1) * (int)seqs;
    if (!packed && t->backend == BACKEND_LLMC) {
        /* prepare pads every unpacked record to a row of the context, and the
         * trainer computes whole rows */
        e->padded_seq_tokens = ctx;
        e->padding_full_rows = true;
    } else if (!packed && !hist_mixed && hist_n > 0 && t->ndata > 0) {
        double p = estimate_padded_length(hist, hist_n, hist_bin, rows, ctx);
        if (p > 0) { e->padded_seq_tokens = p; e->padding_from_stats = true; }
    } else if (!packed && !missing && !e->samples_unknown && sequences > 0 && rows > 1) {
        /* no histogram: the mean sample length and a stated distribution */
        double p = estimate_padded_length_mean(tokens / sequences, rows, ctx);
        if (p > 0) { e->padded_seq_tokens = p; e->padding_assumed = true; }
    }
    e->tokens_per_epoch = tokens;
    e->samples_per_epoch = samples;
    e->sequences_per_epoch = sequences;
    e->seq_tokens = sequences > 0 ? tokens / sequences : 0;
    if (!(e->padded_seq_tokens >= e->seq_tokens)) e->padded_seq_tokens = e->seq_tokens;
    return missing;
}
