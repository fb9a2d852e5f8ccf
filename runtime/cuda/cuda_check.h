/* cuda_check.h — fail loudly on any CUDA runtime or NCCL error: print where and
 * what, exit 1. A GPU error leaves the device state unknown, so nothing retries. */
#ifndef LLMC_CUDA_CHECK_H
#define LLMC_CUDA_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CUDA_CHECK(call) do { \
        cudaError_t err_ = (call); \
        if (err_ != cudaSuccess) { \
            fprintf(stderr, "llmc-train-cuda: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
                    cudaGetErrorString(err_)); \
            exit(1); \
        } \
    } while (0)

#define NCCL_CHECK(call) do { \
        ncclResult_t r_ = (call); \
        if (r_ != ncclSuccess) { \
            fprintf(stderr, "llmc-train-cuda: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
                    ncclGetErrorString(r_)); \
            exit(1); \
        } \
    } while (0)

#endif
