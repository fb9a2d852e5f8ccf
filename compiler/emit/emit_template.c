/* emit_template.c — fills the templates (templates/NAME.tmpl): {{name}} holes and line sections
 * "{{#flag}}" ... "{{/flag}}" kept when flag is set non-empty. Deliberately
 * logic-less: every decision is made in C, the template is only the text. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emit_internal.h"

void tmpl_init(Tmpl *t) { memset(t, 0, sizeof *t); }

void tmpl_free(Tmpl *t)
{
    for (int i = 0; i < t->nvars; i++) free(t->vars[i].value);
    tmpl_init(t);
}

/* A linear search: a template has a few dozen values. */
static TmplVar *tmpl_find(Tmpl *t, const char *name, size_t len)
{
    for (int i = 0; i < t->nvars; i++)
        if (strlen(t->vars[i].name) == len && memcmp(t->vars[i].name, name, len) == 0)
            return &t->vars[i];
    return NULL;
}

/* Setting a value twice replaces it. Failures (out of memory, too many
 * values) are remembered and reported by tmpl_fill, so emitters set values
 * without checking each call. name is not copied: emitters pass literals. */
void tmpl_set(Tmpl *t, const char *name, const char *value)
{
    char *copy = strdup(value ? value : "");
    TmplVar *v = tmpl_find(t, name, strlen(name));
    if (!copy || (!v && t->nvars == (int)(sizeof t->vars / sizeof t->vars[0]))) {
        free(copy);
        t->failed = true;
        return;
    }
    if (v) {
        free(v->value);
    } else {
        v = &t->vars[t->nvars++];
        v->name = name;
        v->used = false;
    }
    v->value = copy;
}

void tmpl_setf(Tmpl *t, const char *name, const char *fmt, ...)
{
    char *s = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0) { t->failed = true; return; }
    tmpl_set(t, name, s);
    free(s);
}

/* If line [p, end) is exactly "{{#name}}" or "{{/name}}" (kind '#' or '/'),
 * return the name's span. */
static bool section_line(const char *p, const char *end, char kind,
                         const char **name, size_t *len)
{
    size_t n = (size_t)(end - p);
    if (n < 6 || p[0] != '{' || p[1] != '{' || p[2] != kind ||
        end[-2] != '}' || end[-1] != '}')
        return false;
    *name = p + 3;
    *len = n - 5;
    return true;
}

/* Strict both ways: a hole without a value and a value without a hole are
 * both errors, so a template and its emitter cannot drift apart unnoticed
 * (a renamed hole would otherwise leave "{{name}}" in a job script). */
int tmpl_fill(Tmpl *t, const char *text, Buf *out, char *err, size_t errlen)
{
    if (t->failed) { snprintf(err, errlen, "out of memory filling a template"); return -1; }
    /* sections: a stack of open section names; skip > 0 while inside an unset one */
    const char *open_name[8];
    size_t open_len[8];
    int depth = 0, skip_from = -1;
    int lineno = 0;
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        const char *end = nl ? nl : p + strlen(p);
        const char *next = nl ? nl + 1 : end;
        lineno++;
        const char *name;
        size_t len;
        if (section_line(p, end, '#', &name, &len)) {
            if (depth == 8) { snprintf(err, errlen, "template line %d: sections nested too deep", lineno); return -1; }
            TmplVar *v = tmpl_find(t, name, len);
            if (!v) { snprintf(err, errlen, "template line %d: section '%.*s' not set", lineno, (int)len, name); return -1; }
            v->used = true;
            open_name[depth] = name;
            open_len[depth] = len;
            /* skip_from: the depth of the outermost unset section, -1 when none */
            if (skip_from < 0 && v->value[0] == '\0') skip_from = depth;
            depth++;
            p = next;
            continue;
        }
        if (section_line(p, end, '/', &name, &len)) {
            if (depth == 0 || open_len[depth - 1] != len || memcmp(open_name[depth - 1], name, len) != 0) {
                snprintf(err, errlen, "template line %d: '{{/%.*s}}' closes no open section", lineno, (int)len, name);
                return -1;
            }
            depth--;
            if (skip_from == depth) skip_from = -1;
            p = next;
            continue;
        }
        /* an ordinary line: copy, substituting holes (in a skipped section
         * only check its holes, so a value used there counts as used) */
        bool emit = skip_from < 0;
        const char *q = p;
        while (q < end) {
            const char *h = strstr(q, "{{");
            if (!h || h >= end) { if (emit) buf_put(out, q, (size_t)(end - q)); break; }
            const char *close = strstr(h + 2, "}}");
            if (!close || close >= end) { snprintf(err, errlen, "template line %d: unclosed '{{'", lineno); return -1; }
            if (emit) buf_put(out, q, (size_t)(h - q));
            TmplVar *v = tmpl_find(t, h + 2, (size_t)(close - h - 2));
            if (!v) {
                snprintf(err, errlen, "template line %d: hole '%.*s' not set", lineno, (int)(close - h - 2), h + 2);
                return -1;
            }
            v->used = true;
            if (emit) buf_puts(out, v->value);
            q = close + 2;
        }
        if (nl && emit) buf_put(out, "\n", 1);
        p = next;
    }
    if (depth != 0) { snprintf(err, errlen, "template: section '%.*s' not closed", (int)open_len[depth - 1], open_name[depth - 1]); return -1; }
    for (int i = 0; i < t->nvars; i++)
        if (!t->vars[i].used) { snprintf(err, errlen, "template: value '%s' set but no hole uses it", t->vars[i].name); return -1; }
    if (out->failed) { snprintf(err, errlen, "out of memory filling a template"); return -1; }
    return 0;
}
