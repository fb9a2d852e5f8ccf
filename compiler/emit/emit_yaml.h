/* emit_yaml.h — the YAML writer every YAML emitter uses (LLaMA-Factory's
 * training YAML, the Kubernetes operators' values and manifests): libyaml's
 * emitter into a Buf, keys plain, strings double-quoted (so no value is ever
 * read back as another type), never folded. */
#ifndef LLMC_EMIT_YAML_H
#define LLMC_EMIT_YAML_H

#include <stdbool.h>
#include <yaml.h>

#include "emit_internal.h"

typedef struct {
    yaml_emitter_t em;
    Buf out;
    bool failed;
} Yaml;

/* One document: the comment lines `header` (may be ""), an explicit "---" when
 * asked, then the top mapping that body(y, ctx) fills. The text, or NULL with
 * the reason in err. */
char *yw_document(const char *header, bool explicit_start, void (*body)(Yaml *, const void *ctx),
                    const void *ctx, char *err, size_t errlen);

void yw_value(Yaml *, const char *text, bool quoted);   /* a scalar; plain when !quoted */
void yw_key(Yaml *, const char *key);
void yw_str(Yaml *, const char *key, const char *v);   /* key: "v" (NULL: "") */
void yw_word(Yaml *, const char *key, const char *v);  /* key: v, plain (enum words) */
void yw_int(Yaml *, const char *key, long long v);
void yw_bool(Yaml *, const char *key, bool v);
void yw_float(Yaml *, const char *key, double v);      /* shortest round trip, YAML 1.1 float syntax */
void yw_map_begin(Yaml *);
void yw_map_end(Yaml *);
void yw_seq_begin(Yaml *);
void yw_seq_end(Yaml *);
void yw_kmap(Yaml *, const char *key);                  /* key: then a mapping (close with yw_map_end) */
void yw_kseq(Yaml *, const char *key);

#endif
