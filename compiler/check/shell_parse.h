/* shell_parse.h — a setup line parsed by the shell that will run it
 * (shell_parse.c says why bash itself, and how nothing is executed). */
#ifndef LLMC_SHELL_PARSE_H
#define LLMC_SHELL_PARSE_H

#include <stddef.h>

typedef enum {
    SHELL_OK,          /* parses */
    SHELL_WARNS,       /* parses; msg holds bash's warning */
    SHELL_BAD,         /* does not parse; msg holds bash's message */
    SHELL_UNCHECKED,   /* this line could not be given to bash (too long); msg says why */
    SHELL_NO_SHELL     /* bash cannot be run here at all; msg says why */
} ShellParse;

/* Parse line as `eval` in the job script would, executing nothing. */
ShellParse shell_parse_line(const char *line, char *msg, size_t msgsz);

#endif
