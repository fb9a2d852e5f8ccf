/* emit_yaml.c — the YAML writer of the emitters (emit_yaml.h). */
#include "emit_yaml.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* libyaml's write handler: 1 to go on, 0 makes the emitter fail (the buffer
 * could not grow). */
static int to_buf(void *data, unsigned char *buffer, size_t size)
{
    Buf *b = data;
    buf_put(b, (const char *)buffer, size);
    return !b->failed;
}

/* After a failure the emitter is not called again (its state is undefined
 * then); the event is freed here, as yaml_emitter_emit would have freed it.
 * The first error is reported once, by yw_document. */
static void emit(Yaml *y, yaml_event_t *ev)
{
    if (y->failed) { yaml_event_delete(ev); return; }
    if (!yaml_emitter_emit(&y->em, ev)) y->failed = true;
}

/* header: text put before the document (its comment lines); explicit_start:
 * open it with "---". The document is one mapping that body fills. Returns
 * the text (the caller frees it), or NULL with err. */
char *yw_document(const char *header, bool explicit_start, void (*body)(Yaml *, const void *ctx),
                    const void *ctx, char *err, size_t errlen)
{
    Yaml y;
    memset(&y, 0, sizeof y);
    buf_init(&y.out);
    buf_puts(&y.out, header ? header : "");
    if (!yaml_emitter_initialize(&y.em)) {
        buf_free(&y.out);
        snprintf(err, errlen, "libyaml: cannot initialise the emitter");
        return NULL;
    }
    yaml_emitter_set_output(&y.em, to_buf, &y.out);
    yaml_emitter_set_unicode(&y.em, 1);   /* UTF-8 as is, not \u escapes: names stay readable */
    yaml_emitter_set_width(&y.em, -1);   /* never fold long paths */
    yaml_event_t ev;
    yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
    emit(&y, &ev);
    yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, !explicit_start);
    emit(&y, &ev);
    yw_map_begin(&y);
    body(&y, ctx);
    yw_map_end(&y);
    yaml_document_end_event_initialize(&ev, 1);
    emit(&y, &ev);
    yaml_stream_end_event_initialize(&ev);
    emit(&y, &ev);
    bool failed = y.failed || y.out.failed;
    if (failed) snprintf(err, errlen, "libyaml: %s", y.em.problem ? y.em.problem : "out of memory writing the YAML");
    yaml_emitter_delete(&y.em);
    if (failed) { buf_free(&y.out); return NULL; }
    return y.out.data;
}

void yw_value(Yaml *y, const char *text, bool quoted)
{
    /* Strings are always double-quoted: a plain `yes`, `on` or `1e5` would read
     * back (YAML 1.1, PyYAML) as a bool or a number. Words, numbers and keys
     * are plain; the implicit flags write no tags. */
    yaml_event_t ev;
    yaml_scalar_style_t style = quoted ? YAML_DOUBLE_QUOTED_SCALAR_STYLE : YAML_PLAIN_SCALAR_STYLE;
    if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)text, (int)strlen(text), !quoted, quoted, style)) {
        y->failed = true;
        return;
    }
    emit(y, &ev);
}

void yw_key(Yaml *y, const char *key) { yw_value(y, key, false); }
void yw_str(Yaml *y, const char *key, const char *v) { yw_key(y, key); yw_value(y, v ? v : "", true); }
void yw_word(Yaml *y, const char *key, const char *v) { yw_key(y, key); yw_value(y, v, false); }
void yw_bool(Yaml *y, const char *key, bool v) { yw_key(y, key); yw_value(y, v ? "true" : "false", false); }

void yw_int(Yaml *y, const char *key, long long v)
{
    char text[32];
    snprintf(text, sizeof text, "%lld", v);
    yw_key(y, key);
    yw_value(y, text, false);
}

/* Shortest text that reads back as v, in YAML 1.1 float syntax (a '.' in the
 * mantissa, a signed exponent), so PyYAML reads a float, not a string. */
static void float_text(double v, char *out, size_t n)
{
    char tmp[40];
    for (int prec = 1; prec <= 17; prec++) {   /* 17 digits always round-trip a double */
        snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        if (strtod(tmp, NULL) == v) break;
    }
    char *e = strchr(tmp, 'e');
    char mant[40], expo[16] = "";
    if (e) {
        snprintf(mant, sizeof mant, "%.*s", (int)(e - tmp), tmp);
        snprintf(expo, sizeof expo, "%s", e);   /* "e-05" / "e+20": sign always present */
    } else {
        snprintf(mant, sizeof mant, "%s", tmp);
    }
    snprintf(out, n, "%s%s%s", mant, strchr(mant, '.') ? "" : ".0", expo);
}

void yw_float(Yaml *y, const char *key, double v)
{
    char text[64];
    /* the checker admits finite numbers only: the 0.0 is a guard, not a value */
    float_text(isfinite(v) ? v : 0.0, text, sizeof text);
    yw_key(y, key);
    yw_value(y, text, false);
}

/* Block style throughout: one key per line, as people write these files. */
void yw_map_begin(Yaml *y)
{
    yaml_event_t ev;
    yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE);
    emit(y, &ev);
}

void yw_map_end(Yaml *y)
{
    yaml_event_t ev;
    yaml_mapping_end_event_initialize(&ev);
    emit(y, &ev);
}

void yw_seq_begin(Yaml *y)
{
    yaml_event_t ev;
    yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE);
    emit(y, &ev);
}

void yw_seq_end(Yaml *y)
{
    yaml_event_t ev;
    yaml_sequence_end_event_initialize(&ev);
    emit(y, &ev);
}

void yw_kmap(Yaml *y, const char *key) { yw_key(y, key); yw_map_begin(y); }
void yw_kseq(Yaml *y, const char *key) { yw_key(y, key); yw_seq_begin(y); }
