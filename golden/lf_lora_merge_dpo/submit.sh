#!/bin/bash
# Submits the 3 jobs of this plan with sbatch, in order. A job with
# `after = JOB` waits until JOB has completed successfully
# (--dependency=afterok; a requeued JOB is not done yet) and is cancelled if
# JOB fails (--kill-on-invalid-dep=yes); it starts from what JOB trained.
# Written by llmc; recompile the plan instead of editing. Run it where the jobs'
# log directories are meant to be (Slurm opens them relative to the directory
# sbatch runs in):
#   bash DIR/submit.sh [SBATCH_OPTION...]    (the options go to every sbatch)
set -euo pipefail

dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)

mkdir -p -- 'logs'
id_1=$(sbatch --parsable "$@" "$dir/sft_job/sft_job.slurm")
id_1=${id_1%%;*}
echo "sft_job: job $id_1"

mkdir -p -- 'logs'
id_2=$(sbatch --parsable --dependency=afterok:"$id_1" --kill-on-invalid-dep=yes "$@" "$dir/merge_job/merge_job.slurm")
id_2=${id_2%%;*}
echo "merge_job: job $id_2 (after sft_job: job $id_1)"

mkdir -p -- 'logs'
id_3=$(sbatch --parsable --dependency=afterok:"$id_2" --kill-on-invalid-dep=yes "$@" "$dir/dpo_job/dpo_job.slurm")
id_3=${id_3%%;*}
echo "dpo_job: job $id_3 (after merge_job: job $id_2)"
