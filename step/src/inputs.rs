//! Reading a profile for a plan: the guarded plan, the sample log, and the check that every
//! profile file is a regular file.

use mapper::Topology;
use mapper::{read_samples_csv, SampleLog, SAMPLES_FILE};
use mapper::{MapError, Result};
use mapper::{MapInput, StrategySpec};
use profile::Profile;
use std::path::Path;
use std::sync::Arc;

/// The plan of `spec` from a profile, applied only when the profile supports it: the plan is
/// made from each held-out half and scored on the other against creation order (`compact`),
/// and falls back to it otherwise ([`crate::guard::choose`]); threads without data follow
/// creation order. The verdict line says which. Every front end that plans from a profile
/// (`cmlb run`, `--cmlb-map=apply`, `cmlb map --profile`) calls this, so they agree.
pub fn guarded_plan(
    spec: &StrategySpec,
    prof: &Profile,
    dir: &Path,
    topo: &Topology,
    seed: u64,
) -> Result<crate::guard::Choice> {
    let n = prof.comm.n();
    let samples = if spec.wants_samples() {
        read_profile_samples(dir, n)?
    } else {
        None
    };
    // The guard reports every plan's metrics on the profile's own matrix.
    crate::guard::choose(prof, topo, &|comm: &mapper::CommMatrix| {
        let input = MapInput {
            comm,
            load: &prof.load,
            topology: topo,
            seed,
        };
        mapper::plan(spec, &input, samples.as_ref())
    })
}

/// `dir/samples.csv` when the profile has one, checked against the profile's `n` threads.
pub fn read_profile_samples(dir: &Path, n: usize) -> Result<Option<Arc<SampleLog>>> {
    let path = dir.join(SAMPLES_FILE);
    if !path.exists() {
        return Ok(None);
    }
    let log = read_samples_csv(&path)?;
    if log.threads.len() > n {
        return Err(MapError::input(
            path.display().to_string(),
            format!(
                "has samples of thread {} but the matrix has {n} threads",
                log.threads.len() - 1
            ),
        ));
    }
    Ok(Some(Arc::new(log)))
}

/// The profile files a pipeline reads must be regular files: a FIFO or a device (or a symlink
/// to one) would block or flood the launcher — slurmstepd, under Slurm — while it reads.
pub fn check_profile_files(dir: &Path) -> Result<()> {
    use profile::{cpu::CPU_FILE, HALF_FILES, LINE_FILES, PROFILE_FILE};
    let names = [
        PROFILE_FILE,
        "comm.csv",
        "load.csv",
        "timeline.csv",
        SAMPLES_FILE,
        CPU_FILE,
    ]
    .into_iter()
    .chain(HALF_FILES)
    .chain(LINE_FILES);
    for name in names {
        // Not followed: a symlink is refused too, so it cannot be swapped for a FIFO later.
        // Missing files get Profile::read_dir's own message (timeline.csv is optional).
        match std::fs::symlink_metadata(dir.join(name)) {
            Ok(m) if m.file_type().is_file() => {}
            Ok(_) => {
                return Err(MapError::Step(format!(
                    "profile {}: {name} is not a regular file",
                    dir.display()
                )))
            }
            Err(_) => {}
        }
    }
    Ok(())
}
