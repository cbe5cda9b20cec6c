//! `cmlb_spank.so`: the Slurm SPANK plugin adding `--cmlb-map` to srun/sbatch/salloc.
