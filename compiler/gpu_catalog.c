/* gpu_catalog.c — the GPUs a plan may name (plan.h: GpuSpec).
 *
 * Capacities are the sizes nvidia-smi reports as total memory; "usable" subtracts
 * what the CUDA context, driver and ECC keep (about 1.5-2%). Peaks are dense
 * (no sparsity) bf16 tensor-core figures from the vendor data sheets (SXM parts).
 * default_mfu is a conservative model-FLOPs utilisation for large-model training
 * with ZeRO/FSDP on that part; plans override it with `mfu`.
 */
#include "plan.h"

#include <string.h>

#define MIB (1024.0 * 1024.0)

static const GpuSpec catalog[] = {
    /* name         gres type     capacity         usable           TFLOP/s  TB/s   MFU */
    {"A100_40GB",  "a100_40gb",  40960 * MIB,     40326 * MIB,      312.0,  1.555, 0.40},
    {"A100_80GB",  "a100_80gb",  81920 * MIB,     81050 * MIB,      312.0,  2.039, 0.40},
    {"H100_80GB",  "h100_80gb",  81559 * MIB,     81510 * MIB,      989.0,  3.35,  0.40},
    {"H200_141GB", "h200_141gb", 143771 * MIB,    142300 * MIB,     989.0,  4.8,   0.40},
    {"B200",       "b200",       183359 * MIB,    181000 * MIB,     2250.0, 8.0,   0.35},
    {"L40S",       "l40s",       46068 * MIB,     45400 * MIB,      362.0,  0.864, 0.35},
};

const GpuSpec *gpu_catalog_find(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof catalog / sizeof catalog[0]; i++)
        if (strcmp(catalog[i].name, name) == 0) return &catalog[i];
    return NULL;
}

int gpu_catalog_count(void)
{
    return (int)(sizeof catalog / sizeof catalog[0]);
}

const GpuSpec *gpu_catalog_at(int i)
{
    if (i < 0 || i >= gpu_catalog_count()) return NULL;
    return &catalog[i];
}
