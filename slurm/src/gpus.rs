//! Whether a step uses GPUs, from the variables Slurm's gres/gpu plugin and the GPU runtimes
//! use. A GPU step's ranks keep the NUMA nodes of the shares Slurm gave them (the mapping
//! core's `Step::gpus`): Slurm chose each task's GPUs near those cores, and cmlb must not carry
//! a rank away from them.

/// The variables that say a step (or a task) has GPUs, in the order they are consulted:
/// Slurm's own first, then the vendor runtimes' visible-device lists.
pub const GPU_VARIABLES: [&str; 9] = [
    "SLURM_STEP_GPUS",
    "SLURM_JOB_GPUS",
    "SLURM_GPUS_ON_NODE",
    "SLURM_GPUS_PER_TASK",
    "CUDA_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ZE_AFFINITY_MASK",
    "GPU_DEVICE_ORDINAL",
];

/// `VARIABLE=value` of the first variable that names GPUs, or `None` when none does. Empty
/// values, `0` GPUs and Slurm's `NoDevFiles` (a step given no GPU devices) do not count.
pub fn gpu_hint(get: impl Fn(&str) -> Option<String>) -> Option<String> {
    GPU_VARIABLES.iter().find_map(|&k| {
        let v = get(k)?;
        let t = v.trim();
        let none = t.is_empty() || t == "NoDevFiles" || t == "0" || t == "-1";
        (!none).then(|| format!("{k}={t}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn slurm_and_runtime_variables_name_gpu_steps() {
        assert_eq!(gpu_hint(env(&[])), None);
        assert_eq!(
            gpu_hint(env(&[
                ("CUDA_VISIBLE_DEVICES", "2,3"),
                ("SLURM_STEP_GPUS", "2,3")
            ])),
            Some("SLURM_STEP_GPUS=2,3".into())
        );
        assert_eq!(
            gpu_hint(env(&[("ROCR_VISIBLE_DEVICES", "4")])),
            Some("ROCR_VISIBLE_DEVICES=4".into())
        );
        // What Slurm writes for a step without GPU devices, and empty or zero counts.
        for (k, v) in [
            ("CUDA_VISIBLE_DEVICES", "NoDevFiles"),
            ("SLURM_GPUS_ON_NODE", "0"),
            ("SLURM_STEP_GPUS", " "),
            ("CUDA_VISIBLE_DEVICES", "-1"),
        ] {
            assert_eq!(gpu_hint(env(&[(k, v)])), None, "{k}={v}");
        }
    }
}
