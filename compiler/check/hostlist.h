/* hostlist.h — Slurm hostlist expressions: "hgx[001-032]", "n[01-04,07]", "a,b",
 * "r[1-2]n[1-3]" (cartesian), zero padding kept. */
#ifndef LLMC_HOSTLIST_H
#define LLMC_HOSTLIST_H

#include "arena.h"

#define HOSTLIST_MAX_HOSTS 1000000

/* Expand expr into *hosts (arena strings), in order. Returns the number of hosts,
 * or -1 with a message (static or arena string) in *err. Duplicates are an error. */
int hostlist_expand(Arena *, const char *expr, char ***hosts, const char **err);

#endif
