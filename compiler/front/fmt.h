/* fmt.h — the canonical formatter behind `llmc fmt`. */
#ifndef LLMC_FMT_H
#define LLMC_FMT_H

#include "ast.h"

/* Canonical text of a parsed file (no syntax errors), comments kept:
 * two-space indent, one entry per line, '=' aligned within runs of entries,
 * at most one blank line in a row, one blank line between blocks.
 * fmt(fmt(x)) == fmt(x). Returns a malloc'd NUL-terminated buffer. */
char *fmt_source(const SourceFile *sf, size_t *len);

#endif
