/* safetensors.h — HF safetensors: read a single file or a sharded checkpoint
 * (model.safetensors.index.json), F32/BF16/F16 converted to fp32 on load; write
 * F32 or BF16. STABLE: the functions below.
 *
 * File layout: u64 little-endian header length N | N bytes of JSON header
 * ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}},
 * padded with spaces to a multiple of 8) | tensor bytes.
 */
#ifndef LLMC_SAFETENSORS_H
#define LLMC_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

typedef enum { ST_F32, ST_BF16, ST_F16 } StDtype;

typedef struct {
    char *name;
    StDtype dtype;
    int ndim;
    int64_t shape[8];
    size_t numel;
    uint64_t begin, end;  /* byte offsets in the data section */
    int file;             /* index into StModel.files */
} StTensor;

/* A set of tensors spread over one or more files. */
typedef struct {
    char **files;         /* paths */
    int n_files;
    uint64_t *data_start; /* per file: offset of the data section */
    StTensor *tensors;
    int n_tensors;
} StModel;

/* Open DIR/model.safetensors.index.json when present, else DIR/model.safetensors;
 * or a single .safetensors file when path is a file. On error: message in err, -1. */
int st_open(StModel *st, const char *path, char *err, size_t errlen);
void st_close(StModel *st);
const StTensor *st_find(const StModel *st, const char *name);
/* Read a tensor converted to fp32 into out (t->numel floats). */
int st_read_f32(const StModel *st, const StTensor *t, float *out, char *err, size_t errlen);
/* Elements [first, first + count) of t, converted to fp32, into out (count
 * floats): only those bytes are read (a rank's shard of a large checkpoint). */
int st_read_f32_range(const StModel *st, const StTensor *t, size_t first, size_t count, float *out, char *err,
                      size_t errlen);

/* A tensor to write: fp32 data, stored as dtype (ST_F32 or ST_BF16). */
typedef struct {
    const char *name;
    int ndim;
    int64_t shape[8];
    const float *data;
} StWriteTensor;

/* Write tensors (in the given order) to path atomically (path.tmp, fsync,
 * rename). metadata_json: an object's members or NULL (e.g. "\"format\":\"pt\""). */
int st_write(const char *path, const StWriteTensor *t, int n, StDtype dtype,
             const char *metadata_json, char *err, size_t errlen);
/* The same, and the SHA-256 of the bytes written, as hex, into sha256_hex[65]
 * (NULL: not hashed): hashed while written, so a manifest needs no re-read. */
int st_write_sha256(const char *path, const StWriteTensor *t, int n, StDtype dtype,
                    const char *metadata_json, char sha256_hex[65], char *err, size_t errlen);

/* A file to be filled in pieces, by several writers at once (the ranks of a
 * sharded checkpoint or export): st_create writes the header st_write would
 * write for t and extends the file to its full size (the data zero); st_fill
 * then writes elements [first, first + count) of one of its tensors in place
 * (t from st_open of that file, fd open for writing on it; F32 as is, BF16
 * rounded as st_write rounds), not fsync'd: the caller syncs fd once after
 * its last piece. Every piece written, the file holds st_write's bytes. */
int st_create(const char *path, const StWriteTensor *t, int n, StDtype dtype, const char *metadata_json, char *err,
              size_t errlen);
int st_fill(const StModel *st, int fd, const StTensor *t, size_t first, size_t count, const float *data, char *err,
            size_t errlen);

/* fp32 <-> bf16 (round to nearest even) and fp16 -> fp32 conversions. */
uint16_t st_f32_to_bf16(float f);
float st_bf16_to_f32(uint16_t h);
float st_f16_to_f32(uint16_t h);

#endif
