/* json_stream_test.c — the streaming JSON reader: values, positions of errors,
 * JSON Lines recovery, and a large array read in bounded memory.
 *   json_stream_test SCRATCHDIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json_stream.h"
#include "log.h"

static int passed, failed;
#define CHECK(cond, ...) do { if (cond) passed++; else { failed++; \
    fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

static char dir[512];

static const char *put(const char *name, const char *text, size_t len)
{
    static char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    fwrite(text, 1, len, f);
    fclose(f);
    return path;
}
#define PUT(name, text) put(name, text, sizeof(text) - 1)

/* Read all records; return the error message of the first failure or "" */
static const char *first_error(const char *path, int *n_records, int *n_bad)
{
    static char msg[600];
    char err[256];
    msg[0] = '\0';
    *n_records = *n_bad = 0;
    JsonStream *s = js_open(path, err, sizeof err);
    if (!s) { snprintf(msg, sizeof msg, "%s", err); return msg; }
    JsonValue *v;
    int rc;
    while ((rc = js_next(s, &v)) != JS_END) {
        if (rc == JS_RECORD) { (*n_records)++; continue; }
        if (!msg[0]) snprintf(msg, sizeof msg, "%s", js_error(s));
        if (rc == JS_ERROR) break;
        (*n_bad)++;
    }
    js_close(s);
    return msg;
}

static void expect_error(const char *name, const char *text, size_t len, const char *want, int want_records)
{
    int n, bad;
    const char *path = put(name, text, len);
    const char *msg = first_error(path, &n, &bad);
    const char *tail = strchr(msg, ':');   /* drop the directory part of the path */
    const char *base = strrchr(path, '/') + 1;
    char got[700];
    snprintf(got, sizeof got, "%s%s", base, tail ? tail : msg);
    CHECK(!strcmp(got, want) && n == want_records, "%s: got \"%s\" (%d records), want \"%s\" (%d)", name, got, n,
          want, want_records);
}
#define EXPECT(name, text, want, nrec) expect_error(name, text, sizeof(text) - 1, want, nrec)

int main(int argc, char **argv)
{
    if (argc != 2) { fprintf(stderr, "usage: json_stream_test SCRATCHDIR\n"); return 2; }
    snprintf(dir, sizeof dir, "%s", argv[1]);
    char err[256];

    /* values and structure */
    const char *p = PUT("ok.json", "\xEF\xBB\xBF[ {\"a\": [1, -2.5e3, true, false, null], \"s\": \"x\\u00e9\\ud83d\\ude00\\n\\\"\","
                        " \"s\": \"last\"},\n  \"\\ud800 lone\" ]\n");
    JsonStream *s = js_open(p, err, sizeof err);
    JsonValue *v;
    CHECK(s && js_is_array(s), "open array");
    CHECK(js_next(s, &v) == JS_RECORD && v->type == JV_OBJECT && v->n_children == 3, "record 1");
    const JsonValue *a = jv_get(v, "a");
    CHECK(a && a->type == JV_ARRAY && a->n_children == 5 && a->child->next->num == -2500.0, "array values");
    CHECK(!strcmp(jv_get(v, "s")->str, "last"), "duplicate key: last wins");
    CHECK(!strcmp(v->child->next->str, "x\xC3\xA9\xF0\x9F\x98\x80\n\""), "escapes and surrogate pair");
    CHECK(a->line == 1 && a->col == 9, "position of a value: %u:%u", a->line, a->col);
    CHECK(js_next(s, &v) == JS_RECORD && v->type == JV_STRING && !strcmp(v->str, "\xEF\xBF\xBD lone") &&
          v->line == 2 && v->col == 3, "lone surrogate -> U+FFFD, position 2:3");
    CHECK(js_next(s, &v) == JS_END, "end");
    js_close(s);

    /* JSON Lines */
    int n, bad;
    p = PUT("ok.jsonl", "{\"x\": 1}\n\n{\"x\": 2}  \r\n{\"x\": 3}");
    CHECK(!first_error(p, &n, &bad)[0] && n == 3, "jsonl records: %d", n);
    p = PUT("bad.jsonl", "{\"x\": 1}\n{\"x\": 2,}\n{\"x\" 3}\n{\"x\": 4}\n");
    const char *m = first_error(p, &n, &bad);
    CHECK(n == 2 && bad == 2 && strstr(m, "bad.jsonl:2:9: record 2: expected a member name"), "jsonl recovery: %s", m);

    /* errors, with positions (line:col, columns count characters) */
    EXPECT("e1.json", "[{\"a\": 1}, {\"a\": }]", "e1.json:1:18: record 2: expected a JSON value, found '}'", 1);
    EXPECT("e2.json", "[{\"a\": 1}\n {\"a\": 2}]", "e2.json:2:2: record 1: expected ',' or ']' after record 1, found '{'", 1);
    EXPECT("e3.json", "[\"日本語\", \"abc\n\"]", "e3.json:1:13: record 2: unterminated string (raw line break in a string)", 1);
    EXPECT("e4.json", "[{\"a\": 1}", "e4.json:1:10: record 1: expected ',' or ']' after record 1, found end of file", 1);
    EXPECT("e5.json", "[1, 2,]", "e5.json:1:7: record 2: trailing ',' before ']'", 2);
    EXPECT("e6.json", "[1] [2]", "e6.json:1:5: record 1: unexpected '[' after the top-level array", 1);
    EXPECT("e7.json", "[tru]", "e7.json:1:5: record 1: invalid literal (expected 'true')", 0);
    EXPECT("e8.json", "[\"\\x\"]", "e8.json:1:4: record 1: bad escape \\x in a string", 0);
    EXPECT("e9.json", "[01]", "e9.json:1:3: record 1: expected ',' or ']' after record 1, found '1'", 1);
    EXPECT("e10.jsonl", "{\"a\": 1} {\"b\": 2}\n", "e10.jsonl:1:10: record 1: unexpected '{' after the record "
           "(JSON Lines: one value per line)", 0);
    {
        char deep[2100];
        memset(deep, '[', 1100);
        deep[1100] = '\0';
        expect_error("e11.json", deep, 1100, "e11.json:1:514: record 1: nesting deeper than 512", 0);
    }
    CHECK(js_open("/nonexistent/x.json", err, sizeof err) == NULL && strstr(err, "No such file"), "missing file");
    CHECK(js_parse_buffer("[1,2,{\"a\":[]}]", 14, err, sizeof err) == 3, "parse buffer");
    CHECK(js_parse_buffer("[1,", 3, err, sizeof err) == -1, "parse buffer error");

    /* a large array (64 MiB) streams in bounded memory */
    char big[600];
    snprintf(big, sizeof big, "%s/big.json", dir);
    FILE *f = fopen(big, "wb");
    fputs("[\n", f);
    char content[1001];
    memset(content, 'x', 1000);
    content[1000] = '\0';
    long records = 60000;
    for (long i = 0; i < records; i++)
        fprintf(f, "%s{\"messages\": [{\"role\": \"user\", \"content\": \"%ld %s\"}, {\"role\": \"assistant\", "
                "\"content\": \"ok\"}]}", i ? ",\n" : "", i, content);
    fputs("\n]\n", f);
    long size = ftell(f);
    fclose(f);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    long before = ru.ru_maxrss;
    const char *e = first_error(big, &n, &bad);
    getrusage(RUSAGE_SELF, &ru);
    long grew_kb = ru.ru_maxrss - before;
    CHECK(!e[0] && n == records, "big array: %d records, %s", n, e);
    CHECK(grew_kb < 16 * 1024, "big array (%ld MiB) grew peak RSS by %ld KiB", size >> 20, grew_kb);
    remove(big);

    /* a record over the limit is skipped to its end without being kept, in both layouts,
     * with its position; the records around it are read */
    for (int array = 0; array < 2; array++) {
        size_t big_n = 300000;
        char *text = malloc(3 * big_n + 1000);
        size_t o = 0;
        o += (size_t)sprintf(text + o, "%s{\"a\": 1}%s", array ? "[" : "", array ? ",\n" : "\n");
        /* record 2: a long string with escaped quotes and brackets inside */
        o += (size_t)sprintf(text + o, "{\"x\": [1, {\"t\": \"");
        for (size_t i = 0; i < big_n; i++) text[o++] = i % 1000 == 7 ? '[' : i % 1000 == 9 ? '}' : 'y';
        o += (size_t)sprintf(text + o, "\\\"]\\\\\"}], \"z\": \"}\"}%s", array ? ",\n" : "\n");
        /* record 3: many small values (the size of the tree, not of the text) */
        o += (size_t)sprintf(text + o, "{\"n\": [[");
        for (size_t i = 0; i < big_n / 2; i++) { text[o++] = '1'; text[o++] = ','; }
        o += (size_t)sprintf(text + o, "1]]}%s{\"b\": 2}%s", array ? ",\n" : "\n", array ? "]\n" : "\n");
        const char *path = put(array ? "big.json" : "big.jsonl", text, o);
        free(text);
        char err[256];
        JsonStream *st = js_open(path, err, sizeof err);
        CHECK(st != NULL, "open %s: %s", path, err);
        if (!st) continue;
        js_set_max_record(st, 65536);
        JsonValue *v;
        int r1 = js_next(st, &v);
        int r2 = js_next(st, &v);
        char e2[600];
        snprintf(e2, sizeof e2, "%s", js_error(st));
        int r3 = js_next(st, &v);
        char e3[600];
        snprintf(e3, sizeof e3, "%s", js_error(st));
        int r4 = js_next(st, &v);
        const JsonValue *b = r4 == JS_RECORD ? jv_get(v, "b") : NULL;
        int r5 = js_next(st, &v);
        CHECK(r1 == JS_RECORD && r2 == JS_TOO_LARGE && r3 == JS_TOO_LARGE && r4 == JS_RECORD && b && b->num == 2 &&
              r5 == JS_END, "too large (%s): %d %d %d %d %d: %s / %s", array ? "array" : "lines", r1, r2, r3, r4, r5,
              e2, e3);
        CHECK(strstr(e2, ":2:1: record 2: too large") && strstr(e3, ":3:1: record 3: too large"),
              "too-large messages (%s): %s / %s", array ? "array" : "lines", e2, e3);
        js_close(st);
    }

    /* only regular files: a FIFO (no writer: it must not block), a directory, a device */
    {
        char fifo[700], err[512];
        snprintf(fifo, sizeof fifo, "%s/fifo", dir);
        remove(fifo);
        CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
        const char *paths[] = {fifo, dir, "/dev/zero"};
        const char *kinds[] = {"a FIFO", "a directory", "a character device"};
        for (int i = 0; i < 3; i++) {
            JsonStream *st = js_open(paths[i], err, sizeof err);
            CHECK(!st && strstr(err, paths[i]) && strstr(err, kinds[i]) && strstr(err, "dataset"),
                  "js_open(%s): %s", paths[i], st ? "opened" : err);
            js_close(st);
        }
        remove(fifo);
    }

    /* log_escape: control characters, DEL, C1 and broken UTF-8 as \xNN; valid UTF-8 kept; cut at a character */
    {
        char out[64];
        const char in[] = "a\x1b[31m\x07\tb\x7f\xc2\x9b\xff\xe4\xb8\xad\n";
        log_escape(out, sizeof out, in, sizeof in - 1);
        CHECK(!strcmp(out, "a\\e[31m\\x07\\tb\\x7F\\xC2\\x9B\\xFF\xe4\xb8\xad\\n"), "log_escape: %s", out);
        char small[8];
        log_escape(small, sizeof small, "abc\xe4\xb8\xad\xe4\xb8\xad", 9);
        CHECK(!strcmp(small, "abc..."), "log_escape cut: %s", small);
        const char nul[] = "x\0y";
        log_escape(out, sizeof out, nul, 3);
        CHECK(!strcmp(out, "x\\x00y"), "log_escape NUL: %s", out);
    }

    printf("json_stream_test: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
