//! The Linux CPU list format (`0-3,8,10-11`) as Slurm gives it (`S_STEP_ALLOC_CORES`, read by
//! the plugin inside slurmstepd) and as `--cpuset` takes it: no panic, no unbounded allocation;
//! an error is one non-empty message; a list that parses is sorted and de-duplicated, and its
//! canonical spelling (`format_cpu_list`) parses back equal.
#![no_main]
use contract::{format_cpu_list, parse_cpu_list};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    match parse_cpu_list(s) {
        Ok(cpus) => {
            assert!(
                !cpus.is_empty() && cpus.len() <= 1 << 20,
                "{} CPUs",
                cpus.len()
            );
            assert!(cpus.windows(2).all(|w| w[0] < w[1]), "sorted, no repeats");
            let spelled = format_cpu_list(&cpus);
            assert_eq!(
                parse_cpu_list(&spelled).expect("canonical list"),
                cpus,
                "{spelled}"
            );
        }
        Err(e) => assert!(!e.to_string().trim().is_empty()),
    }
});
