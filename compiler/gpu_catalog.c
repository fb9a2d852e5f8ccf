/* gpu_catalog.c — the GPUs a plan may name (plan.h: GpuSpec).
 *
 * Capacities are the sizes nvidia-smi reports as total memory; "usable" subtracts
 * what the CUDA context, driver and ECC keep (about 1.5-2%). Peaks are dense
 * (no sparsity) bf16 tensor-core figures from the vendor data sheets (SXM parts).
 * default_mfu is a conservative model-FLOPs utilisation for large-model training
 * with ZeRO/FSDP on that part; plans override it with `mfu`.
 *
 * Fabric defaults (the cluster block's `gpu_link` and `network` override them):
 * the HGX/DGX board of each part. NVLink per GPU as NVIDIA quotes it, both
 * directions together: NVLink 3 (A100) 600 GB/s, NVLink 4 (H100, H200) 900 GB/s,
 * NVLink 5 (B200) 1.8 TB/s; networks as in the DGX A100 (8 x 200 Gb/s HDR) and
 * DGX H100/H200/B200 (8 x 400 Gb/s NDR, ConnectX-7) reference designs. L40S has
 * no NVLink: PCIe 4.0 x16 (64 GB/s both ways) and an assumed 2 x 200 Gb/s.
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

/* In the order of catalog[]. */
static const GpuFabric fabrics[] = {
    {600e9, 8, 200e9, "NVLink 3"},    /* A100_40GB */
    {600e9, 8, 200e9, "NVLink 3"},    /* A100_80GB */
    {900e9, 8, 400e9, "NVLink 4"},    /* H100_80GB */
    {900e9, 8, 400e9, "NVLink 4"},    /* H200_141GB */
    {1800e9, 8, 400e9, "NVLink 5"},   /* B200 */
    {64e9, 2, 200e9, "PCIe 4.0"},     /* L40S */
};
_Static_assert(sizeof fabrics / sizeof fabrics[0] == sizeof catalog / sizeof catalog[0],
               "a fabric for every catalogue entry");

const GpuFabric *gpu_catalog_fabric(const GpuSpec *gpu)
{
    if (!gpu || !gpu->name) return NULL;
    for (size_t i = 0; i < sizeof catalog / sizeof catalog[0]; i++)
        if (strcmp(catalog[i].name, gpu->name) == 0) return &fabrics[i];
    return NULL;
}

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
