/* cuda_check.h — fail loudly on any CUDA runtime or NCCL error: print where and
 * what (a log.h error line), exit 1. A GPU error leaves the device state
 * unknown, so nothing retries. One of the runtime's few exits, each for what has
 * no caller to report to (the others: a failing cuBLASLt or cuDNN call, an
 * allocation failing inside a step, a dead peer; docs/runtime.md, "Exits"). */
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
