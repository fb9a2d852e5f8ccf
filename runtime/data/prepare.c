/* prepare.c — `llmc-train prepare PLAN.json`: the plan's datasets -> token shards.
 *
 * The main thread streams records in order (json_stream), checks them
 * (records), renders them with the chat template into a batch; worker threads
 * tokenize a batch while the main thread reads the next one; the main thread
 * packs finished batches into rows in record order, so the output does not
 * depend on the number of threads. Shards are written whole (temp, fsync,
 * rename) and index.json last; a directory whose index.json carries the same
 * data hash is left alone. docs/shards.md describes the output. */
#include "prepare_internal.h"

#define BATCH 1024
#define BATCH_BYTES ((size_t)32 << 20)   /* a batch also closes at this much rendered text */
#define SLOT_KEEP ((size_t)1 << 20)      /* a slot's buffers above this are freed after use */
#define MAX_SHOWN_BAD 10
#define MAX_SHOWN_CHECK 100

/* Messages go through log.h (docs/runtime.md, "Errors"), their text escaped
 * first: they echo file names, column and role names from the plan and the
 * data. Progress and the summary are log_info lines on stdout, except under
 * --check, whose stdout is the JSON summary: then they go to stderr. */
static int info_to_stderr;

typedef enum { SAY_ERROR, SAY_WARN, SAY_INFO } SayKind;

static void say_line(SayKind kind, const char *fmt, va_list ap)
{
    char text[2048], safe[4096];
    vsnprintf(text, sizeof text, fmt, ap);
    log_escape(safe, sizeof safe, text, strlen(text));
    if (kind == SAY_ERROR) log_error("%s", safe);
    else if (kind == SAY_WARN) log_warn("%s", safe);
    else if (info_to_stderr) log_note("%s", safe);
    else log_info("%s", safe);
}

/* An error; returns -1, so that `return say_error(...)` reports and fails. */
__attribute__((format(printf, 1, 2))) int say_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say_line(SAY_ERROR, fmt, ap);
    va_end(ap);
    return -1;
}

__attribute__((format(printf, 1, 2))) void say_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say_line(SAY_WARN, fmt, ap);
    va_end(ap);
}

__attribute__((format(printf, 1, 2))) void say_info(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say_line(SAY_INFO, fmt, ap);
    va_end(ap);
}

/* path relative to the plan's directory (docs/plan.md) unless absolute */
char *resolve(const char *dir, const char *path)
{
    if (path[0] == '/' || !dir[0]) return strdup(path);
    size_t a = strlen(dir), b = strlen(path);
    char *p = malloc(a + b + 2);
    if (p) { memcpy(p, dir, a); p[a] = '/'; memcpy(p + a + 1, path, b + 1); }
    return p;
}

/* ---- tokenizing batches on worker threads ---- */

typedef struct {
    ChatDoc doc;
    TokIds ids;
    UniBuf mask;
    int failed;
    int cut;                  /* the context cut tokens off this document */
    size_t dataset;           /* index into the plan's datasets */
    size_t start;             /* resuming: tokens of this document already in shards */
} Slot;

typedef struct {
    Slot slots[BATCH];
    size_t n;
} TokBatch;

typedef struct Pool Pool;

typedef struct {
    Pool *pool;
    pthread_t thread;
    TokEncoder *enc;
} Worker;

struct Pool {
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    TokBatch *batch;             /* in flight, or NULL */
    unsigned generation;
    atomic_size_t next;       /* next slot of batch to take */
    size_t finished;          /* slots of batch done */
    int active;               /* workers still inside batch */
    size_t cutoff;
    ChatMasking masking;      /* sft: train_on_prompt, mask_history */
    int quit;
    Worker *workers;
    int n_workers;
};

static void *worker_main(void *arg)
{
    Worker *w = arg;
    Pool *p = w->pool;
    unsigned seen = 0;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->quit && p->generation == seen) pthread_cond_wait(&p->work, &p->mu);
        if (p->quit) { pthread_mutex_unlock(&p->mu); return NULL; }
        seen = p->generation;
        TokBatch *b = p->batch;
        if (!b) { pthread_mutex_unlock(&p->mu); continue; }   /* woke after that batch was done */
        p->active++;
        pthread_mutex_unlock(&p->mu);
        size_t mine = 0, i;
        while ((i = atomic_fetch_add(&p->next, 1)) < b->n) {
            Slot *s = &b->slots[i];
            s->ids.len = s->mask.len = 0;
            s->failed = chat_tokenize_masked(&s->doc, w->enc, p->cutoff, p->masking, &s->ids, &s->mask, &s->cut) != 0;
            mine++;
        }
        pthread_mutex_lock(&p->mu);
        p->finished += mine;
        p->active--;
        if (p->finished == b->n && p->active == 0) pthread_cond_signal(&p->done);
        pthread_mutex_unlock(&p->mu);
    }
}

static void pool_dispatch(Pool *p, TokBatch *b)
{
    pthread_mutex_lock(&p->mu);
    p->batch = b;
    atomic_store(&p->next, 0);
    p->finished = 0;
    p->generation++;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
}

static void pool_wait(Pool *p)
{
    pthread_mutex_lock(&p->mu);
    /* every slot done and no worker still holding the batch (it is refilled next) */
    while (p->batch && (p->finished < p->batch->n || p->active > 0)) pthread_cond_wait(&p->done, &p->mu);
    p->batch = NULL;
    pthread_mutex_unlock(&p->mu);
}

/* ---- the command ---- */

/* A slot that held a big record gives its memory back instead of keeping it for the next. */
static void slot_trim(Slot *s)
{
    if (s->doc.text.cap > SLOT_KEEP || s->doc.cap * sizeof *s->doc.pieces > SLOT_KEEP) chat_doc_free(&s->doc);
    if (s->ids.cap * sizeof *s->ids.ids > SLOT_KEEP) tokids_free(&s->ids);
    if (s->mask.cap > SLOT_KEEP) unibuf_free(&s->mask);
}

/* Pack a tokenized batch in record order. Stops early once a stop signal's
 * shard is written (k->stopped). */
static int pack_batch(Packer *k, TokBatch *b)
{
    for (size_t i = 0; i < b->n && !k->stopped; i++) {
        Slot *s = &b->slots[i];
        if (s->failed) return say_error("out of memory while tokenizing");
        if (pack_doc(k, s->ids.ids, s->mask.p, s->ids.len, s->start, s->cut, &k->per_ds[s->dataset])) return -1;
        slot_trim(s);
    }
    return 0;
}

typedef struct {
    uint64_t kept, skipped[REC_N_REASONS], shown;
} Counts;

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void human(double v, char *out, size_t n)
{
    if (v >= 1e9) snprintf(out, n, "%.2fG", v / 1e9);
    else if (v >= 1e6) snprintf(out, n, "%.2fM", v / 1e6);
    else if (v >= 1e3) snprintf(out, n, "%.1fk", v / 1e3);
    else snprintf(out, n, "%.0f", v);
}

typedef struct {
    int tty;
    double start, last;
    uint64_t total_bytes, done_bytes;
} Progress;

static void progress(Progress *pr, const Counts *c, const Packer *k, int final)
{
    double t = now_s();
    if (!final && t - pr->last < (pr->tty ? 0.5 : 10.0)) return;
    pr->last = t;
    double el = t - pr->start > 1e-6 ? t - pr->start : 1e-6;
    uint64_t recs = c->kept;
    for (int r = 1; r < REC_N_REASONS; r++) recs += c->skipped[r];
    char a[32], b[32], d[32];
    human((double)recs / el, a, sizeof a);
    human((double)k->n_tokens, b, sizeof b);
    human((double)k->n_tokens / el, d, sizeof d);
    double frac = pr->total_bytes ? (double)pr->done_bytes / (double)pr->total_bytes : 1.0;
    double eta = frac > 0 ? el * (1 - frac) / frac : 0;
    char line[256];
    snprintf(line, sizeof line, "%" PRIu64 " records (%s/s), %s tokens (%s/s), %.0f%%, ETA %02d:%02d", recs, a, b, d,
             frac * 100, (int)eta / 60, (int)eta % 60);
    if (!pr->tty) { say_info("%s", line); return; }
    /* on a terminal one line, redrawn in place (as run's step line) */
    FILE *o = info_to_stderr ? stderr : stdout;
    fprintf(o, "\r%s%s%s", log_prefix(), line, final ? "\n" : "");
    fflush(o);
}

static void usage(FILE *out)
{
    fputs("usage: llmc-train prepare PLAN.json [--threads N] [--force] [--check] [--shard-tokens N]\n"
          "                                   [--max-record-bytes N]   (--opt=VALUE or --opt VALUE)\n"
          "  tokenizes the plan's datasets into packed token shards in data.shards_dir\n"
          "  --threads N        tokenizer threads (default $LLMC_THREADS, else the CPUs this\n"
          "                     process may run on: its affinity mask, e.g. Slurm's --cpus-per-task)\n"
          "  --force            redo even when index.json says the shards are up to date\n"
          "  --check            read, check and tokenize everything, list every bad record\n"
          "                     (up to 100) and the totals; write nothing\n"
          "  --shard-tokens N   tokens per shard file (default $LLMC_SHARD_TOKENS, else 33554432)\n"
          "  --max-record-bytes N  a record taking more memory than N bytes once read is a bad\n"
          "                     record (\"too_large\"; default 16777216 = 16 MiB, at most 1 GiB)\n", out);
}

/* One prepare: its options, the plan, and what the steps below share. */
typedef struct {
    /* the command line */
    const char *plan_path;
    long threads;
    long long shard_tokens;     /* tokens per shard file (whole rows: rows_per_shard = this / context) */
    long long max_record;       /* bytes a record may take once read */
    int force, check_only;
    /* set up */
    DataPlan plan;
    int lock_fd;                /* DIR/.prepare.lock; -1 before it is taken, and under --check */
    char **live;                /* the shards index.json names now (the live set) */
    Tokenizer *tok;
    uint32_t vocab;
    int64_t eos, pad, bos;      /* special ids as LLaMA-Factory sets them */
    DatasetCounts *per_ds;      /* [plan.n_ds] */
    Packer k;
    int resumed;                /* the journal's shards were taken up */
    /* reading and tokenizing (valid once `writing`) */
    int writing;                /* past set-up: the pool exists, and a failure removes what was written */
    Pool pool;
    int started;                /* worker threads running */
    TokBatch *batches;          /* two: one is filled while the pool tokenizes the other */
    TokBatch *inflight;         /* the batch the pool has, or NULL */
    int cur, fatal;
    RecordView view;
    Counts counts;
    Progress pr;
    uint64_t bytes_before;      /* bytes of the datasets read before the current one */
    /* resuming: the documents before the journal's point are in its shards (read
     * and checked again for the counts, not tokenized); the one it cut continues */
    uint64_t doc_seq, skip_docs, skip_at;
    char err[512];
} Prep;

/* The command line into P; -1 to go on, else the exit status (0 after --help). */
static int prep_parse_args(Prep *P, int argc, char **argv)
{
    P->threads = cpus_available();
    /* LLMC_SHARD_TOKENS: the default of --shard-tokens where the job script starts prepare */
    const char *st_env = getenv("LLMC_SHARD_TOKENS");
    P->shard_tokens = 1LL << 25;
    int shard_tokens_given = 0;
    P->max_record = (long long)JS_MAX_RECORD_DEFAULT;
    static const struct option longopts[] = {
        {"threads", required_argument, NULL, 't'}, {"max-record-bytes", required_argument, NULL, 'm'},
        {"shard-tokens", required_argument, NULL, 's'}, {"force", no_argument, NULL, 'f'},
        {"check", no_argument, NULL, 'c'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
    };
    const char *cmd = "llmc-train prepare";
    long long v;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 't': if (args_int(cmd, "--threads", optarg, 1, 1024, &v)) return 2; P->threads = (long)v; break;
        case 'm': if (args_int(cmd, "--max-record-bytes", optarg, 1024, 1LL << 30, &P->max_record)) return 2; break;
        case 's':
            if (args_int(cmd, "--shard-tokens", optarg, 1, 1LL << 40, &P->shard_tokens)) return 2;
            shard_tokens_given = 1;
            break;
        case 'f': P->force = 1; break;
        case 'c': P->check_only = 1; break;
        case 'h': usage(stdout); return 0;
        default: return args_getopt_error(cmd, c, argv);
        }
    }
    if (optind < argc) P->plan_path = argv[optind++];
    if (optind < argc) return args_usage_error(cmd, "unexpected argument '%s' (one PLAN.json)", argv[optind]);
    if (!P->plan_path) return args_usage_error(cmd, "PLAN.json is required");
    if (P->threads < 1 || P->threads > 1024)
        return args_usage_error(cmd, "%ld threads (the CPUs available or LLMC_THREADS): want 1 to 1024", P->threads);
    /* the whole value must be the number, as for --shard-tokens: "12k" is refused, not read as 12 */
    if (!shard_tokens_given && st_env && *st_env &&
        args_int(cmd, "LLMC_SHARD_TOKENS", st_env, 1, 1LL << 40, &P->shard_tokens))
        return 2;
    return -1;
}

/* Up to date, or the lock. index.json is replaced atomically, so it is read
 * without the lock; after waiting for the lock it is read again (another
 * prepare may have done the work meanwhile). -1 to go on (locked), else the
 * exit status: 0 up to date, STOP_EXIT_REQUEUE up to date but asked to stop. */
static int prep_lock_unless_up_to_date(Prep *P)
{
    for (int locked = 0; !P->check_only; locked++) {
        if (!P->force) {
            char *have = shard_index_data_hash(P->plan.shards_dir);
            int same = have && !strcmp(have, P->plan.hash);
            free(have);
            if (same) {
                save_content_cache(&P->plan);
                say_info("%s is up to date (data hash %s)", P->plan.shards_dir, P->plan.hash);
                if (!stopsig_requested()) return 0;
                /* the job was asked to stop (its time limit is near): requeue it now */
                say_info("stop signal %s: exiting %d to be requeued", stopsig_name() ? stopsig_name() : "?",
                         STOP_EXIT_REQUEUE);
                return STOP_EXIT_REQUEUE;
            }
        }
        if (locked) break;
        if (mkdirs(P->plan.shards_dir)) {
            say_error("%s: %s", P->plan.shards_dir, strerror(errno));
            return 2;
        }
        if ((P->lock_fd = lock_dir(P->plan.shards_dir)) < 0) return 2;
        save_content_cache(&P->plan);
    }
    return -1;
}

/* The tokenizer, checked against the model, and the special ids as
 * LLaMA-Factory sets them: the template's stop word replaces eos, pad falls
 * back to eos; pre-training text ends with eos (or the template's pretrain_eos:
 * llama3's <|end_of_text|>).
 * -1 to go on, else the exit status. */
static int prep_load_tokenizer(Prep *P)
{
    const DataPlan *plan = &P->plan;
    if (!(P->tok = tok_load(plan->tokenizer_path, P->err, sizeof P->err))) { say_error("%s", P->err); return 2; }
    P->vocab = tok_vocab_size(P->tok);
    if (plan->model_vocab >= 0 && (int64_t)P->vocab > plan->model_vocab) {
        say_error("the tokenizer has %u ids but model.vocab is %" PRId64, P->vocab, plan->model_vocab);
        return 1;
    }
    P->eos = plan->tpl ? tok_token_id(P->tok, plan->tpl->stop_word) : tok_eos_id(P->tok);
    if (plan->tpl && plan->tpl->pretrain_eos && plan->pretrain)
        P->eos = tok_token_id(P->tok, plan->tpl->pretrain_eos);
    P->pad = tok_pad_id(P->tok) >= 0 ? tok_pad_id(P->tok) : P->eos;
    P->bos = tok_bos_id(P->tok);
    if (P->eos < 0 || P->pad < 0) {
        say_error("%s: the tokenizer has no end-of-sequence token%s", plan->tokenizer_path,
                  plan->tpl ? " for the template" : " (tokenizer_config.json eos_token)");
        return 1;
    }
    return -1;
}

/* The packer, and the output directory made ready for the new set: the live
 * set (the one index.json names) stays in place and readable until the new set
 * is complete; the shards an interrupted prepare of the same data recorded in
 * its journal are taken up (unless --force); other leftovers go. -1 to go on,
 * else the exit status. */
static int prep_take_up_journal(Prep *P)
{
    const DataPlan *plan = &P->plan;
    if (!(P->per_ds = calloc(plan->n_ds, sizeof *P->per_ds))) { say_error("out of memory"); return 1; }
    P->k = (Packer){.dir = plan->shards_dir, .context = plan->context, .pad_id = (uint32_t)P->pad,
                    .vocab_size = P->vocab, .packing = plan->packing, .pretrain = plan->pretrain,
                    .dry = P->check_only, .per_ds = P->per_ds, .n_ds = plan->n_ds, .data_hash = plan->hash,
                    .journal = !P->check_only};
    Packer *k = &P->k;
    k->rows_per_shard = (uint64_t)P->shard_tokens / plan->context ? (uint64_t)P->shard_tokens / plan->context : 1;
    if (P->check_only) return -1;
    P->live = shard_index_files(plan->shards_dir);
    P->resumed = !P->force && journal_take(k);
    if (!P->resumed) journal_remove(plan->shards_dir);
    size_t n_live = 0;
    while (P->live && P->live[n_live]) n_live++;
    char **keep = calloc(n_live + k->n_entries + 1, sizeof *keep);
    for (size_t i = 0; keep && i < n_live; i++) keep[i] = P->live[i];
    for (size_t i = 0; keep && i < k->n_entries; i++) keep[n_live + i] = k->entries[i].file;
    int swept = keep ? sweep_dir(plan->shards_dir, keep) : say_error("out of memory");
    free(keep);
    if (swept) return 2;
    if (P->resumed)
        say_info("resuming: %zu shard%s of an interrupted prepare kept; continuing at document %" PRIu64,
                 k->n_entries, k->n_entries == 1 ? "" : "s", k->resume_doc + 1);
    return -1;
}

/* The tokenizer threads, the two batches and the packer's row buffers (one
 * shard of rows: ids and positions 4 bytes a cell, the label mask 1). From
 * here on a failure removes what this prepare wrote. 0, or -1 after a message. */
static int prep_start_pool(Prep *P)
{
    const DataPlan *plan = &P->plan;
    Packer *k = &P->k;
    P->writing = 1;
    P->pool = (Pool){.cutoff = plan->pretrain && plan->packing ? SIZE_MAX : plan->context,
                     .masking = {.train_on_prompt = plan->rp.train_on_prompt, .mask_history = plan->rp.mask_history},
                     .n_workers = (int)P->threads};
    Pool *pool = &P->pool;
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->work, NULL);
    pthread_cond_init(&pool->done, NULL);
    pool->workers = calloc((size_t)P->threads, sizeof *pool->workers);
    P->batches = calloc(2, sizeof *P->batches);
    if (!P->resumed) choose_prefix(k->prefix, plan->hash, P->live);
    size_t cells = (size_t)k->rows_per_shard * plan->context;
    k->ids = malloc(cells * 4);
    k->pos = malloc(cells * 4);
    k->mask = malloc(cells);
    if (!pool->workers || !P->batches || !k->ids || !k->pos || !k->mask) return say_error("out of memory");
    for (int i = 0; i < pool->n_workers; i++) {
        pool->workers[i].pool = pool;
        pool->workers[i].enc = tok_encoder_new(P->tok);
        if (!pool->workers[i].enc ||
            pthread_create(&pool->workers[i].thread, NULL, worker_main, &pool->workers[i])) {
            tok_encoder_free(pool->workers[i].enc);
            return say_error("cannot start worker threads");
        }
        P->started++;
    }
    return 0;
}

/* A record that failed its checks (why, msg; where: its position, or NULL):
 * under "fail" the prepare stops (P->fatal), under "skip" and --check it is
 * counted by reason and the first few are listed. */
static void prep_bad_record(Prep *P, size_t di, JsonStream *js, RecReason why, const JsonValue *where,
                            const char *msg)
{
    const DatasetSpec *ds = &P->plan.ds[di];
    char full[900];
    if (where)
        snprintf(full, sizeof full, "%s:%u:%u: record %" PRIu64 ": %s", ds->file, where->line, where->col,
                 js_record_number(js), msg);
    else
        snprintf(full, sizeof full, "%s", msg);
    if (!P->plan.skip_bad && !P->check_only) {
        say_error("%s", full);
        say_error("stopping: data.on_bad_record is \"fail\" (\"skip\" counts and skips bad records)");
        P->fatal = 1;
        return;
    }
    P->counts.skipped[why]++;
    P->per_ds[di].skipped++;
    if (P->counts.shown++ < (P->check_only ? MAX_SHOWN_CHECK : MAX_SHOWN_BAD)) {
        if (P->check_only) say_error("%s", full);
        else say_warn("%s (skipped)", full);
    }
}

/* Fill batch b from dataset di's stream: every record checked and converted,
 * the good ones rendered with the chat template (the documents before a
 * resume point only counted). Stops at BATCH records or BATCH_BYTES of text,
 * so memory stays bounded with big records. Returns 0 at the end of the
 * file, 1 while there is more; sets P->fatal on an error. */
static int prep_fill_batch(Prep *P, size_t di, JsonStream *js, TokBatch *b)
{
    const DatasetSpec *ds = &P->plan.ds[di];
    b->n = 0;
    size_t b_bytes = 0;   /* rendered text in this batch */
    while (b->n < BATCH && b_bytes < BATCH_BYTES) {
        JsonValue *rec;
        int rc = js_next(js, &rec);
        if (rc == JS_END) return 0;
        if (rc == JS_ERROR) { say_error("%s", js_error(js)); P->fatal = 1; return 1; }
        RecReason why;
        const JsonValue *where = NULL;
        char msg[600];
        if (rc == JS_BAD_RECORD || rc == JS_TOO_LARGE) {
            why = rc == JS_TOO_LARGE ? REC_TOO_LARGE : REC_INVALID_JSON;
            snprintf(msg, sizeof msg, "%s%s", js_error(js),
                     rc == JS_TOO_LARGE ? "; --max-record-bytes raises the limit" : "");
        } else {
            why = record_convert(ds, rec, &P->view, &where, msg, sizeof msg);
        }
        if (why != REC_OK) {
            prep_bad_record(P, di, js, why, where, msg);
            if (P->fatal) return 1;
            continue;
        }
        if (P->doc_seq < P->skip_docs) {
            P->doc_seq++;
            P->counts.kept++;
            P->per_ds[di].kept++;
            continue;
        }
        Slot *s = &b->slots[b->n];
        s->dataset = di;
        s->start = P->doc_seq++ == P->skip_docs ? (size_t)P->skip_at : 0;
        const RecordView *v = &P->view;
        int rr = ds->format == FORMAT_TEXT
                     ? chat_render_text(v->text, v->text_len, tok_add_bos(P->tok) ? P->bos : -1, P->eos, &s->doc)
                     : chat_render(P->plan.tpl, v->system, v->system_len, v->msgs, v->n, P->bos, &s->doc);
        if (rr) { say_error("out of memory"); P->fatal = 1; return 1; }
        b_bytes += s->doc.text.len;
        b->n++;
        P->counts.kept++;
        P->per_ds[di].kept++;
    }
    return 1;
}

/* Every dataset in order, a batch at a time: while the pool tokenizes one
 * batch the next is read; finished batches are packed in record order, so the
 * shards do not depend on the number of threads. Ends at the last record, an
 * error (P->fatal) or a stop signal (P->k.stopped). Returns the exit status
 * the prepare has so far (2 when a dataset cannot be opened, else 1). */
static int prep_read_datasets(Prep *P)
{
    int status = 1;
    P->pr = (Progress){.tty = isatty(info_to_stderr ? 2 : 1), .start = now_s()};
    P->pr.last = P->pr.start;
    for (size_t i = 0; i < P->plan.n_ds; i++) {
        struct stat st;
        if (stat(P->plan.ds[i].file, &st) == 0) P->pr.total_bytes += (uint64_t)st.st_size;
    }
    P->skip_docs = P->resumed ? P->k.resume_doc : 0;
    P->skip_at = P->resumed ? P->k.resume_at : 0;
    for (size_t di = 0; di < P->plan.n_ds && !P->fatal && !P->k.stopped; di++) {
        JsonStream *js = js_open(P->plan.ds[di].file, P->err, sizeof P->err);
        if (!js) { say_error("%s", P->err); status = 2; P->fatal = 1; break; }
        js_set_max_record(js, (size_t)P->max_record);
        int more = 1;
        while (more && !P->fatal && !P->k.stopped) {
            TokBatch *b = &P->batches[P->cur];
            more = prep_fill_batch(P, di, js, b);
            P->pr.done_bytes = P->bytes_before + js_offset(js);
            /* the previous batch is tokenized meanwhile; pack it, then hand this one out */
            if (P->inflight) {
                pool_wait(&P->pool);
                if (pack_batch(&P->k, P->inflight)) P->fatal = 1;
                P->inflight = NULL;
            }
            if (P->fatal || P->k.stopped) break;
            if (b->n) { pool_dispatch(&P->pool, b); P->inflight = b; P->cur ^= 1; }
            progress(&P->pr, &P->counts, &P->k, 0);
        }
        P->bytes_before += js_offset(js);
        js_close(js);
    }
    if (P->inflight) {
        pool_wait(&P->pool);
        if (!P->fatal && !P->k.stopped && pack_batch(&P->k, P->inflight)) P->fatal = 1;
        P->inflight = NULL;
    }
    record_view_free(&P->view);
    uint64_t limit = P->check_only ? MAX_SHOWN_CHECK : MAX_SHOWN_BAD;
    if (P->counts.shown > limit)
        say_info("%" PRIu64 " more bad record%s not listed (the first %" PRIu64 " are)%s", P->counts.shown - limit,
                 P->counts.shown - limit == 1 ? "" : "s", limit,
                 P->check_only ? "" : "; prepare --check lists up to 100");
    return status;
}

/* The totals as JSON (for index.json and --check's stdout) and as text for
 * the summary line: " (reason n, ...)" in reasons, empty when none skipped. */
static cJSON *prep_summary(const Prep *P, uint64_t *skipped, char *reasons, size_t reasons_len)
{
    const Counts *counts = &P->counts;
    *skipped = 0;
    for (int r = 1; r < REC_N_REASONS; r++) *skipped += counts->skipped[r];
    cJSON *sum = cJSON_CreateObject();
    cJSON_AddNumberToObject(sum, "records_kept", (double)counts->kept);
    cJSON_AddNumberToObject(sum, "records_skipped", (double)*skipped);
    cJSON *by = cJSON_AddObjectToObject(sum, "skipped_by_reason");
    reasons[0] = '\0';
    for (int r = 1; r < REC_N_REASONS; r++) {
        if (!counts->skipped[r]) continue;
        cJSON_AddNumberToObject(by, rec_reason_name((RecReason)r), (double)counts->skipped[r]);
        size_t l = strlen(reasons);
        snprintf(reasons + l, reasons_len - l, "%s%s %" PRIu64, l ? ", " : " (", rec_reason_name((RecReason)r),
                 counts->skipped[r]);
    }
    if (reasons[0]) strncat(reasons, ")", reasons_len - strlen(reasons) - 1);
    cJSON *dsa = cJSON_AddArrayToObject(sum, "datasets");
    for (size_t i = 0; i < P->plan.n_ds; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", P->plan.ds[i].name);
        cJSON_AddNumberToObject(o, "records_kept", (double)P->per_ds[i].kept);
        cJSON_AddNumberToObject(o, "records_skipped", (double)P->per_ds[i].skipped);
        cJSON_AddNumberToObject(o, "tokens", (double)P->per_ds[i].tokens);
        cJSON_AddNumberToObject(o, "label_tokens", (double)P->per_ds[i].labels);
        cJSON_AddNumberToObject(o, "records_cut", (double)P->per_ds[i].cut);
        cJSON_AddNumberToObject(o, "records_cut_untrained", (double)P->per_ds[i].cut_untrained);
        cJSON_AddItemToArray(dsa, o);
    }
    return sum;
}

/* Once per dataset the context cut records of: how many, with its file and
 * the context, beside the bad records it dropped (those are also listed and
 * summed by reason); the counts also go to the stats file and index.json. */
static void prep_say_cut(const Prep *P)
{
    for (size_t i = 0; i < P->plan.n_ds; i++) {
        const DatasetCounts *c = &P->per_ds[i];
        if (!c->cut) continue;
        char file[600], untrained[96] = "", dropped[64] = "";
        log_escape(file, sizeof file, P->plan.ds[i].file, strlen(P->plan.ds[i].file));
        if (c->cut_untrained)
            snprintf(untrained, sizeof untrained, " (%" PRIu64 " of them left with no token to train)", c->cut_untrained);
        if (c->skipped) snprintf(dropped, sizeof dropped, ", %" PRIu64 " dropped as bad records", c->skipped);
        say_warn("dataset %s (%s): %" PRIu64 " of %" PRIu64 " records cut at the context of %u tokens%s%s",
                 P->plan.ds[i].name, file, c->cut, c->kept, P->plan.context, untrained, dropped);
    }
}

/* After the last record: the last row and shard, the summary, then (not under
 * --check) the stats files, index.json — the moment the new set becomes the
 * live one — and the sweep of the previous set. Returns the exit status. */
static int prep_finish_set(Prep *P)
{
    const DataPlan *plan = &P->plan;
    Packer *k = &P->k;
    if (close_row(k) || write_shard(k)) return 1;
    P->pr.done_bytes = P->pr.total_bytes;
    progress(&P->pr, &P->counts, k, 1);
    if (P->counts.kept == 0 || k->n_rows == 0) {
        char files[1024] = "";
        for (size_t i = 0; i < plan->n_ds; i++) {
            size_t l = strlen(files);
            snprintf(files + l, sizeof files - l, "%s%s", i ? ", " : "", plan->ds[i].file);
        }
        uint64_t seen = P->counts.kept;
        for (int r = 1; r < REC_N_REASONS; r++) seen += P->counts.skipped[r];
        say_error("no usable records in the plan's datasets (%s): %" PRIu64 " read, none kept with a token to train",
                  files, seen);
        return 1;
    }
    prep_say_cut(P);
    uint64_t skipped;
    char reasons[512];
    cJSON *sum = prep_summary(P, &skipped, reasons, sizeof reasons);
    if (!P->check_only) write_stats(plan, P->per_ds);
    free(P->per_ds);
    P->per_ds = NULL;
    char *sum_text = cJSON_PrintUnformatted(sum);
    cJSON_Delete(sum);
    if (P->check_only) {
        /* the totals as one JSON line on stdout (for tools), the verdict on stderr */
        printf("%s\n", sum_text ? sum_text : "{}");
        free(sum_text);
        say_info("--check: %" PRIu64 " records good, %" PRIu64 " bad%s; %" PRIu64 " tokens (%" PRIu64
                 " trained) in %" PRIu64 " rows of %u", P->counts.kept, skipped, reasons, k->n_tokens, k->n_labels,
                 k->n_rows, plan->context);
        return skipped && !plan->skip_bad ? 1 : 0;
    }
    ShardIndexInfo info = {.context = plan->context, .vocab_size = P->vocab, .pad_id = (uint32_t)P->pad,
                           .packing = plan->packing, .n_tokens = k->n_tokens, .data_hash = plan->hash,
                           .summary_json = sum_text};
    int irc = shard_index_write(plan->shards_dir, &info, k->entries, k->n_entries, P->err, sizeof P->err);
    free(sum_text);
    if (irc) { say_error("%s", P->err); return 1; }
    /* the new index.json is in place: the previous set's files go */
    char **keep = calloc(k->n_entries + 1, sizeof *keep);
    for (size_t i = 0; keep && i < k->n_entries; i++) keep[i] = k->entries[i].file;
    if (keep) sweep_dir(plan->shards_dir, keep);
    free(keep);
    journal_remove(plan->shards_dir);
    say_info("%" PRIu64 " records kept, %" PRIu64 " skipped%s; %" PRIu64 " tokens (%" PRIu64 " trained) in %" PRIu64
             " rows of %u, %zu shard%s -> %s", P->counts.kept, skipped, reasons, k->n_tokens, k->n_labels, k->n_rows,
             plan->context, k->n_entries, k->n_entries == 1 ? "" : "s", plan->shards_dir);
    return 0;
}

/* Free everything P holds and return status. A failed prepare that got as far
 * as writing removes what it wrote of the new set, and its journal; the live
 * set stays. A stopped one keeps both for the next prepare. */
static int prep_close(Prep *P, int status)
{
    if (P->writing && status != 0 && status != STOP_EXIT_REQUEUE && !P->check_only && P->lock_fd >= 0) {
        sweep_dir(P->plan.shards_dir, P->live);
        journal_remove(P->plan.shards_dir);
    }
    shard_names_free(P->live);
    unlock_dir(P->lock_fd);
    free(P->per_ds);
    if (P->writing) {
        Pool *pool = &P->pool;
        pthread_mutex_lock(&pool->mu);
        pool->quit = 1;
        pthread_cond_broadcast(&pool->work);
        pthread_mutex_unlock(&pool->mu);
        for (int i = 0; i < P->started; i++) {
            pthread_join(pool->workers[i].thread, NULL);
            tok_encoder_free(pool->workers[i].enc);
        }
        for (int b = 0; P->batches && b < 2; b++)
            for (size_t i = 0; i < BATCH; i++) {
                chat_doc_free(&P->batches[b].slots[i].doc);
                tokids_free(&P->batches[b].slots[i].ids);
                unibuf_free(&P->batches[b].slots[i].mask);
            }
        free(P->batches);
        free(pool->workers);
        pthread_mutex_destroy(&pool->mu);
        pthread_cond_destroy(&pool->work);
        pthread_cond_destroy(&pool->done);
    }
    for (size_t i = 0; i < P->k.n_entries; i++) free(P->k.entries[i].file);
    free(P->k.entries);
    free(P->k.ids);
    free(P->k.pos);
    free(P->k.mask);
    tok_free(P->tok);
    free_plan(&P->plan);
    return status;
}

/* prepare: arguments, plan, (up to date?) lock, tokenizer, journal, pool,
 * read and pack every dataset, then the summary and index.json. */
int cmd_prepare(int argc, char **argv)
{
    Prep *P = calloc(1, sizeof *P);
    if (!P) { log_error("out of memory"); return 1; }
    P->lock_fd = -1;
    int rc = prep_parse_args(P, argc, argv);
    if (rc >= 0) { free(P); return rc; }
    /* First thing: under Slurm a requeued job's prepare step may get the job's
     * USR2 while it starts, whose default action would kill it (the job fails). */
    if (!P->check_only) stopsig_install();
    info_to_stderr = P->check_only;
    if (load_plan(P->plan_path, &P->plan, P->force)) rc = 2;   /* --force: every file read again */
    else {
        data_hash_max_record(&P->plan, P->max_record);
        if ((rc = prep_lock_unless_up_to_date(P)) < 0 && (rc = prep_load_tokenizer(P)) < 0)
            rc = prep_take_up_journal(P);
    }
    if (rc >= 0) {
        rc = prep_close(P, rc);
        free(P);
        return rc;
    }
    if (prep_start_pool(P)) rc = 1;
    else {
        rc = prep_read_datasets(P);
        if (!P->fatal && P->k.stopped) {
            say_info("stop signal %s: %zu shard%s written and recorded in %s/" JOURNAL "; exiting %d to be "
                     "requeued (the next prepare continues at document %" PRIu64 ")",
                     stopsig_name() ? stopsig_name() : "?", P->k.n_entries, P->k.n_entries == 1 ? "" : "s",
                     P->plan.shards_dir, STOP_EXIT_REQUEUE, P->k.journal_doc + 1);
            rc = STOP_EXIT_REQUEUE;
        } else if (!P->fatal)
            rc = prep_finish_set(P);
    }
    rc = prep_close(P, rc);
    free(P);
    return rc;
}
