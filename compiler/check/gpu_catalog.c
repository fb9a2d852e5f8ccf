/* gpu_catalog.c — the GPUs a plan may name (plan.h: GpuSpec).
 *
 * Capacities are the sizes nvidia-smi reports as total memory; "usable" subtracts
 * what the CUDA context, driver and ECC keep (about 1.5-2%). Peaks are dense
 * (no sparsity) bf16 tensor-core figures from the vendor data sheets (SXM parts).
 * FP8 peaks are the same data sheets' dense FP8 tensor figures (half the "with
 * sparsity" figure they print): H100 SXM and H200 3,958 TFLOPS sparse = 1,979
 * dense (H100 and H200 Tensor Core GPU data sheets), GH200 the same (GH200
 * data sheet), H100 NVL 3,341 sparse = 1,670 dense, B200 9 PFLOPS sparse =
 * 4,500 dense (HGX B200 data sheet, per GPU), L40S 1,466 sparse = 733 dense,
 * L4 485 sparse = 242.5 dense (Ada has FP8 tensor cores), MI300X 2,614.9
 * dense (AMD data sheet, FP8 without sparsity); 0 for Ampere (A100, A10),
 * which has none: precision = fp8 is refused there (the checker).
 * default_mfu is a conservative model-FLOPs utilisation for large-model training
 * with ZeRO/FSDP on that part; plans override it with `mfu`.
 *
 * Fabric defaults (the cluster block's `gpu_link` and `network` override them):
 * the HGX/DGX board of each part. NVLink per GPU as NVIDIA quotes it, both
 * directions together: NVLink 3 (A100) 600 GB/s, NVLink 4 (H100, H200) 900 GB/s,
 * NVLink 5 (B200) 1.8 TB/s; networks as in the DGX A100 (8 x 200 Gb/s HDR) and
 * DGX H100/H200/B200 (8 x 400 Gb/s NDR, ConnectX-7) reference designs. L40S has
 * no NVLink: PCIe 4.0 x16 (64 GB/s both ways) and an assumed 2 x 200 Gb/s.
 *
 * Host link (the cluster block's `host_link` overrides it): each GPU's own
 * path to host memory, which DeepSpeed offload moves gradients and weights
 * over, quoted like NVLink (both directions together): PCIe 4.0 x16 64 GB/s
 * (A100, L40S, L4, A10), PCIe 5.0 x16 128 GB/s (H100, H200, B200, H100 NVL,
 * MI300X), NVLink-C2C 900 GB/s between Hopper and Grace (GH200 data sheet).
 */
#include "plan.h"

#include <string.h>

#define MIB (1024.0 * 1024.0)

static const GpuSpec catalog[] = {
    /* name         gres type     capacity         usable           TFLOP/s  TB/s   MFU   FP8 TFLOP/s */
    {"A100_40GB",  "a100_40gb",  40960 * MIB,     40326 * MIB,      312.0,  1.555, 0.40,      0},
    {"A100_80GB",  "a100_80gb",  81920 * MIB,     81050 * MIB,      312.0,  2.039, 0.40,      0},
    {"H100_80GB",  "h100_80gb",  81559 * MIB,     81510 * MIB,      989.0,  3.35,  0.40, 1979.0},
    {"H200_141GB", "h200_141gb", 143771 * MIB,    142300 * MIB,     989.0,  4.8,   0.40, 1979.0},
    {"B200",       "b200",       183359 * MIB,    181000 * MIB,     2250.0, 8.0,   0.35, 4500.0},
    {"L40S",       "l40s",       46068 * MIB,     45400 * MIB,      362.0,  0.864, 0.35,  733.0},
    /* Entries below: capacity and usable as nvidia-smi / rocm-smi report them
     * where noted, else the data sheet's capacity less 2%. Sources:
     * GH200: NVIDIA GH200 Grace Hopper Superchip data sheet (96 GB HBM3, 4 TB/s;
     *   FP16/BF16 tensor 989 TFLOPS dense, 1,979 with sparsity); capacity = 96 GB.
     * H100 NVL: NVIDIA H100 Tensor Core GPU data sheet, H100 NVL column (94 GB HBM3,
     *   3.9 TB/s, BF16 1,671 TFLOPS with sparsity = 835 dense); nvidia-smi 95830 MiB.
     * L4: NVIDIA L4 data sheet (24 GB GDDR6, 300 GB/s, BF16 242 TFLOPS with
     *   sparsity = 121 dense); nvidia-smi 23034 MiB.
     * A10: NVIDIA A10 data sheet (24 GB GDDR6, 600 GB/s, BF16 250 TFLOPS with
     *   sparsity = 125 dense); nvidia-smi 23028 MiB.
     * MI300X: AMD Instinct MI300X data sheet (192 GB HBM3, 5.3 TB/s, peak BF16
     *   1,307.4 TFLOPS dense); rocm-smi VRAM total 205822885888 B = 196288 MiB. */
    {"GH200",      "gh200",      96e9,            96e9 * 0.98,      989.0,  4.0,   0.40, 1979.0},
    {"H100_NVL",   "h100_nvl",   95830 * MIB,     95000 * MIB,      835.0,  3.9,   0.40, 1670.0},
    {"L4",         "l4",         23034 * MIB,     22500 * MIB,      121.0,  0.3,   0.35,  242.5},
    {"A10",        "a10",        23028 * MIB,     22500 * MIB,      125.0,  0.6,   0.35,      0},
    {"MI300X",     "mi300x",     196288 * MIB,    192000 * MIB,     1307.4, 5.3,   0.30, 2614.9},
};

/* In the order of catalog[]. */
static const GpuFabric fabrics[] = {
    {600e9, 8, 200e9, "NVLink 3", 64e9, "PCIe 4.0"},     /* A100_40GB */
    {600e9, 8, 200e9, "NVLink 3", 64e9, "PCIe 4.0"},     /* A100_80GB */
    {900e9, 8, 400e9, "NVLink 4", 128e9, "PCIe 5.0"},    /* H100_80GB */
    {900e9, 8, 400e9, "NVLink 4", 128e9, "PCIe 5.0"},    /* H200_141GB */
    {1800e9, 8, 400e9, "NVLink 5", 128e9, "PCIe 5.0"},   /* B200 */
    {64e9, 2, 200e9, "PCIe 4.0", 64e9, "PCIe 4.0"},      /* L40S */
    {900e9, 4, 200e9, "NVLink 4", 900e9, "NVLink-C2C"},  /* GH200: NVLink 4 between the superchips of a node (assumed
                                         900 GB/s), 4 x 200 Gb/s as in HPE Cray EX254n nodes (4 GH200,
                                         one Slingshot 11 NIC each) */
    {600e9, 4, 400e9, "NVLink 4 bridge", 128e9, "PCIe 5.0"},  /* H100_NVL: 600 GB/s NVLink bridge between a pair; the
                                              usual 4 x 400 Gb/s server (assumed) */
    {64e9, 2, 100e9, "PCIe 4.0", 64e9, "PCIe 4.0"},      /* L4: no NVLink; 2 x 100 Gb/s assumed */
    {64e9, 2, 100e9, "PCIe 4.0", 64e9, "PCIe 4.0"},      /* A10: no NVLink; 2 x 100 Gb/s assumed */
    {896e9, 8, 400e9, "Infinity Fabric", 128e9, "PCIe 5.0"},  /* MI300X: 7 links x 128 GB/s = 896 GB/s per GPU (AMD
                                              platform brief), 8 x 400 Gb/s */
};
_Static_assert(sizeof fabrics / sizeof fabrics[0] == sizeof catalog / sizeof catalog[0],
               "a fabric for every catalogue entry");

#define NCATALOG (sizeof catalog / sizeof catalog[0])

bool gpu_catalog_is_amd(const GpuSpec *gpu)
{
    for (size_t i = 0; gpu && i < NCATALOG; i++)
        if (gpu == &catalog[i]) return strcmp(catalog[i].name, "MI300X") == 0;
    return false;
}

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
