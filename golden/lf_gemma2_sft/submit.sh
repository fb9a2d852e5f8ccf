#!/bin/bash
# Submits the 2 jobs of this plan with sbatch, in order. A job with
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
id_1=$(sbatch --parsable "$@" "$dir/gemma_job/gemma_job.slurm")
id_1=${id_1%%;*}
echo "gemma_job: job $id_1"

mkdir -p -- 'logs'
id_2=$(sbatch --parsable "$@" "$dir/mistral_job/mistral_job.slurm")
id_2=${id_2%%;*}
echo "mistral_job: job $id_2"
