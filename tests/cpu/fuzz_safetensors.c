/* fuzz_safetensors.c — libFuzzer target for the safetensors reader
 * (runtime/store/safetensors.c): input bytes up to the first NUL are a header's JSON,
 * the bytes after it the data section (an input starting with NUL is a whole
 * file as is). The file is opened with st_open and every tensor it accepts is
 * read with st_read_f32. No crash, no hang, no leak; an accepted file's tensors
 * tile its data section exactly (checked here again, independently). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "safetensors.h"

static char path[64];
static void remove_file(void) { unlink(path); }

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    snprintf(path, sizeof path, "/tmp/fuzz-st-%d.safetensors", (int)getpid());
    atexit(remove_file);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && data[0] == 0) {
        fwrite(data + 1, 1, size - 1, f);
    } else {
        const uint8_t *nul = memchr(data, 0, size);
        size_t hl = nul ? (size_t)(nul - data) : size;
        uint8_t lb[8];
        for (int i = 0; i < 8; i++) lb[i] = (uint8_t)((uint64_t)hl >> (8 * i));
        fwrite(lb, 1, 8, f);
        fwrite(data, 1, hl, f);
        if (nul) fwrite(nul + 1, 1, size - hl - 1, f);
    }
    fclose(f);
    StModel st;
    char err[512];
    if (st_open(&st, path, err, sizeof err) == 0) {
        uint64_t covered = 0;
        for (int i = 0; i < st.n_tensors; i++) {
            const StTensor *t = &st.tensors[i];
            covered += t->end - t->begin;
            float *out = malloc((t->numel ? t->numel : 1) * sizeof *out);
            if (!out) abort();
            if (st_read_f32(&st, t, out, err, sizeof err)) abort();   /* accepted means readable */
            free(out);
        }
        FILE *g = fopen(path, "rb");
        fseek(g, 0, SEEK_END);
        long fsz = ftell(g);
        fclose(g);
        if (covered != (uint64_t)fsz - st.data_start[0]) abort();   /* no overlap, no hole */
        st_close(&st);
    }
    return 0;
}
