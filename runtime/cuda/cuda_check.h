/* cuda_check.h — fail loudly on any CUDA runtime or NCCL error: print where and
 * what (a log.h error line), exit 1. A GPU error leaves the device state
 * unknown, so nothing retries: the one place the runtime exits on an error
 * (docs/runtime.md, "Errors"). */
#ifndef LLMC_CUDA_CHECK_H
#define LLMC_CUDA_CHECK_H

#include <stdlib.h>

#include "log.h"

#define CUDA_CHECK(call) do { \
        cudaError_t err_ = (call); \
        if (err_ != cudaSuccess) { \
            log_error("%s:%d: %s: %s", __FILE__, __LINE__, #call, cudaGetErrorString(err_)); \
            exit(1); \
        } \
    } while (0)

#define NCCL_CHECK(call) do { \
        ncclResult_t r_ = (call); \
        if (r_ != ncclSuccess) { \
            log_error("%s:%d: %s: %s", __FILE__, __LINE__, #call, ncclGetErrorString(r_)); \
            exit(1); \
        } \
    } while (0)

#endif
