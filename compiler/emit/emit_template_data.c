/* emit_template_data.c — the text of the templates (templates/NAME.tmpl), compiled into llmc so
 * the binary needs no data files at run time. The assembler's .incbin reads
 * each file (paths relative to the repository root, where make runs); a NUL
 * byte after each makes it a C string. tests/emitters/test.mk makes this
 * object depend on the template files so an edited template rebuilds it. */
#include <string.h>
#include "emit_internal.h"

#define EMBED(sym, path)                                  \
    __asm__(".section .rodata\n"                          \
            ".balign 16\n"                                \
            ".globl " #sym "\n"                           \
            ".type " #sym ", @object\n"                   \
            #sym ":\n"                                    \
            ".incbin \"" path "\"\n"                      \
            ".byte 0\n"                                   \
            ".size " #sym ", . - " #sym "\n"              \
            ".previous\n")

EMBED(llmc_tmpl_slurm_conf, "templates/slurm.conf.tmpl");
EMBED(llmc_tmpl_gres_conf, "templates/gres.conf.tmpl");
EMBED(llmc_tmpl_job_llmc, "templates/job_llmc.slurm.tmpl");
EMBED(llmc_tmpl_job_llamafactory, "templates/job_llamafactory.slurm.tmpl");
EMBED(llmc_tmpl_submit, "templates/submit.sh.tmpl");

extern const char llmc_tmpl_slurm_conf[], llmc_tmpl_gres_conf[],
    llmc_tmpl_job_llmc[], llmc_tmpl_job_llamafactory[], llmc_tmpl_submit[];

const char *template_text(const char *name)
{
    static const struct { const char *name; const char *text; } table[] = {
        { "slurm.conf", llmc_tmpl_slurm_conf },
        { "gres.conf", llmc_tmpl_gres_conf },
        { "job_llmc.slurm", llmc_tmpl_job_llmc },
        { "job_llamafactory.slurm", llmc_tmpl_job_llamafactory },
        { "submit.sh", llmc_tmpl_submit },
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].name, name) == 0) return table[i].text;
    return NULL;
}
