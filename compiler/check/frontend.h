/* frontend.h — the llmc front end as one call: read, lex, parse, resolve `use`,
 * check, and build the typed plan (plan.h). */
#ifndef LLMC_FRONTEND_H
#define LLMC_FRONTEND_H

#include "ast.h"
#include "plan.h"

/* Largest plan file accepted (a plan is hand-written; anything bigger is a mistake). */
#define FRONTEND_MAX_FILE_BYTES (16u * 1024 * 1024)

/* Load and check the plan in `path` and every file it uses. Diagnostics go to d.
 * Returns NULL only when `path` itself cannot be read (the error is in d);
 * otherwise a Plan, possibly incomplete when d holds errors — a caller must not
 * run later stages on a plan whose load reported errors. Free with plan_free(). */
Plan *frontend_load(const char *path, Diags *d);

/* A value from the command line (compiler/check/override.c): option "--set"
 * or "--sweep", arg "BLOCK.KEY=VALUE". BLOCK is a block kind the plan has once
 * (train), a kind and a name (train.sft) or a name (sft); KEY may go through
 * sub-blocks (dataset.columns.messages). The value is lexed, parsed and checked
 * like the file's; diagnostics point into the argument (source "--set BLOCK.KEY"). */
typedef struct {
    const char *option;
    const char *arg;
} PlanOverride;

/* frontend_load with the overrides applied, in order, before the checker runs. */
Plan *frontend_load_overrides(const char *path, const PlanOverride *ov, int nov, Diags *d);
/* Put the overrides into the parsed files (errors in d). */
void apply_overrides(SourceFile **files, int nfiles, const PlanOverride *ov, int nov, Arena *, Diags *d);

/* The parsed files of a plan, for the formatter: parse one file without `use`
 * resolution or checking. Returns NULL on I/O failure (reported in d). */
SourceFile *frontend_parse_file(const char *path, Arena *, Diags *d);

/* Read a whole file into an arena buffer with a NUL after it. Returns NULL with
 * a message in d on failure; `at` (may be NULL) is where to point the error. */
char *frontend_read_file(const char *path, size_t *len, Arena *, Diags *d, const SrcRange *at);

/* The checker (compiler/check/check.c and the check_*.c files of each block): AST of all files -> typed plan. */
void check_plan(SourceFile **files, int nfiles, Plan *plan, Diags *d);

/* Smallest edit distance candidate within reach of `word`, or NULL. */
const char *did_you_mean(const char *word, const char *const *candidates, int n);

#endif
