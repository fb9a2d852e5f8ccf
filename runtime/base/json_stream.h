/* json_stream.h — read the records of a JSON dataset one at a time.
 *
 * A dataset file is either one JSON array of records (LLaMA-Factory's .json)
 * or JSON Lines (one value per line, .jsonl); which one is decided by the
 * first non-blank character ('[' = array). The file is read through a fixed
 * buffer and only the current record is held in memory, so files of many GB
 * stream in constant memory (plus the largest record).
 *
 * Every value carries its line and column (1-based; columns count characters)
 * so that a bad record is reported as file:line:col. Strings are decoded
 * (escapes, surrogate pairs; a lone surrogate becomes U+FFFD) and
 * NUL-terminated; their bytes are otherwise kept as they are in the file. */
#ifndef LLMC_JSON_STREAM_H
#define LLMC_JSON_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum { JV_NULL, JV_FALSE, JV_TRUE, JV_NUMBER, JV_STRING, JV_ARRAY, JV_OBJECT } JvType;

typedef struct JsonValue JsonValue;
struct JsonValue {
    JvType type;
    uint32_t line, col;      /* where the value starts */
    const char *str;         /* JV_STRING: decoded text; JV_NUMBER: its source text */
    size_t len;
    double num;              /* JV_NUMBER */
    const char *key;         /* member name when inside an object, else NULL */
    size_t key_len;
    JsonValue *child;        /* first element / member */
    JsonValue *next;         /* next sibling */
    size_t n_children;
};

typedef struct JsonStream JsonStream;

/* Open PATH for reading only if it is a regular file: a directory, FIFO,
 * device or socket is refused without blocking, with a message naming PATH,
 * WHAT it was meant to be ("dataset", "tokenizer file") and what it is.
 * NULL with the message in err. */
FILE *open_regular_file(const char *path, const char *what, char *err, size_t errlen);

/* Open PATH (a regular file) for streaming. NULL with a message in err. */
JsonStream *js_open(const char *path, char *err, size_t errlen);
void js_close(JsonStream *s);

enum { JS_RECORD = 1, JS_END = 0, JS_ERROR = -1, JS_BAD_RECORD = -2, JS_TOO_LARGE = -3 };

/* The most memory one record may take once parsed (its decoded strings plus
 * about 100 bytes per JSON value); JS_MAX_RECORD_DEFAULT unless set. */
#define JS_MAX_RECORD_DEFAULT ((size_t)16 << 20)
void js_set_max_record(JsonStream *s, size_t bytes);

/* Read the next record. JS_RECORD: *out is valid until the next call.
 * JS_END: no more records. JS_ERROR: the file cannot be read further (message
 * in js_error, with file:line:col). JS_BAD_RECORD: this record is not valid
 * JSON but the stream skipped to the next line (JSON Lines only); the message
 * is in js_error and reading may continue. JS_TOO_LARGE: this record would
 * take more than the js_set_max_record limit; it was skipped to its end in
 * constant memory (array or JSON Lines), the message (with the record's
 * line:col and size) is in js_error, and reading may continue. */
int js_next(JsonStream *s, JsonValue **out);
const char *js_error(const JsonStream *s);

/* Records returned so far (1-based number of the last one, bad ones included). */
uint64_t js_record_number(const JsonStream *s);
/* Bytes consumed so far (for progress). */
uint64_t js_offset(const JsonStream *s);
int js_is_array(const JsonStream *s);

/* Member of an object by name, or NULL. */
const JsonValue *jv_get(const JsonValue *obj, const char *key);

/* Stream records from memory (data must outlive the stream); name is used in messages. */
JsonStream *js_open_memory(const char *data, size_t len, const char *name);

/* Parse one JSON document held in memory (used by tests and the fuzzer):
 * returns the number of top-level values read, -1 on a syntax error. */
long js_parse_buffer(const char *data, size_t len, char *err, size_t errlen);

#endif
