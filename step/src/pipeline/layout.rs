//! Where a step's profiles live: one key for the whole step, `task<g>/` per task and `ranks/`
//! for multi-task steps, and the other profiles of the same program when the step's is missing.

use super::Step;
use crate::{binding, ProfileSource};
use mapper::{MapError, Result};
use profile::PROFILE_FILE;
use std::path::{Path, PathBuf};

/// The directories of one step's profiles ([`Step::compute`]).
pub(super) struct Dirs {
    /// What [`StepPlan::profile_dir`] reports.
    pub(super) step: PathBuf,
    /// Each local task's thread profile directory.
    pub(super) tasks: Vec<PathBuf>,
    /// The rank matrix directory of a multi-task step.
    pub(super) ranks: Option<PathBuf>,
}

/// A job profile directory: `ranks/` or some `task<g>/` inside.
fn is_job_dir(d: &Path) -> bool {
    d.join(contract::ranks::RANKS_DIR).is_dir()
        || std::fs::read_dir(d)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| {
                e.file_name()
                    .to_str()
                    .and_then(|n| n.strip_prefix("task"))
                    .is_some_and(|g| g.parse::<usize>().is_ok())
                    && e.path().is_dir()
            })
}

impl Step {
    /// Where the step's profiles are: the step's directory, each local task's thread profile
    /// directory, and (multi-task steps) the rank matrix directory.
    pub(super) fn dirs(&self) -> Result<Dirs> {
        let shares_threads = binding::task_shares_dist(&self.node, self.tasks, self.socket_dist)
            .first()
            .map_or(0, Vec::len);
        let job = |d: &Path| Dirs {
            step: d.to_path_buf(),
            tasks: self
                .global
                .iter()
                .map(|g| d.join(format!("task{g}")))
                .collect(),
            ranks: Some(d.join(contract::ranks::RANKS_DIR)),
        };
        match &self.profile {
            None => Err(MapError::Step("no profile location given".into())),
            // A directory the user named serves every task, unless it is a job profile
            // directory (no profile.yaml of its own, task<g>/ or ranks/ inside).
            Some(ProfileSource::Given(d) | ProfileSource::Saved(d)) => {
                if self.total > 1 && !d.join(PROFILE_FILE).exists() && is_job_dir(d) {
                    Ok(job(d))
                } else {
                    Ok(Dirs {
                        step: d.clone(),
                        tasks: vec![d.clone(); self.tasks],
                        ranks: None,
                    })
                }
            }
            Some(ProfileSource::Named { root, name }) => {
                let d = root.join(name);
                if self.total == 1 {
                    Ok(Dirs {
                        step: d.clone(),
                        tasks: vec![d],
                        ranks: None,
                    })
                } else {
                    Ok(job(&d))
                }
            }
            Some(ProfileSource::Keyed(root)) => {
                let threads = self.omp_threads.unwrap_or(shares_threads);
                if self.total == 1 {
                    let d = root.join(binding::profile_key(&self.command, threads, &self.key_cpus));
                    return Ok(Dirs {
                        step: d.clone(),
                        tasks: vec![d],
                        ranks: None,
                    });
                }
                // One key for the whole step, the same on every node: the step's shape, not
                // this node's cores (nodes may be given different core numbers).
                let shape = if self.nodes > 1 {
                    format!("{} nodes, {} tasks", self.nodes, self.total)
                } else {
                    format!("{}, {} tasks", self.key_cpus, self.total)
                };
                Ok(job(&root.join(binding::profile_key(
                    &self.command,
                    threads,
                    &shape,
                ))))
            }
        }
    }

    /// When the step's own profile is missing: the profiles of the same program beside it
    /// (newest first, at most three), as text to append to the line, so that a user who
    /// profiled a run with other arguments learns what to name. Empty when there are none.
    pub fn other_profiles(&self, missing: &Path) -> String {
        let (Some(root), Some(exe)) = (missing.parent(), self.command.first()) else {
            return String::new();
        };
        let base = exe.rsplit('/').next().unwrap_or(exe);
        let mut found: Vec<(std::time::SystemTime, String)> = std::fs::read_dir(root)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .filter(|e| e.path() != missing && e.path().is_dir())
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let p = e.path();
                // A one-task profile names its command; a job profile its task<g>/ profiles.
                let yaml = std::iter::once(p.join(PROFILE_FILE))
                    .chain(
                        std::fs::read_dir(&p)
                            .into_iter()
                            .flatten()
                            .filter_map(|t| t.ok())
                            .map(|t| t.path().join(PROFILE_FILE)),
                    )
                    .find(|y| y.is_file())?;
                let text = std::fs::read_to_string(&yaml).ok()?;
                let meta: profile::ProfileMeta = serde_norway::from_str(&text).ok()?;
                let first = meta.command.first()?;
                (first.rsplit('/').next() == Some(base)).then(|| {
                    let when = std::fs::metadata(&yaml)
                        .and_then(|m| m.modified())
                        .unwrap_or(std::time::UNIX_EPOCH);
                    (when, format!("{name} ({})", meta.command.join(" ")))
                })
            })
            .collect();
        if found.is_empty() {
            return String::new();
        }
        found.sort_by_key(|f| std::cmp::Reverse(f.0));
        let list: Vec<String> = found.into_iter().take(3).map(|(_, s)| s).collect();
        format!(
            "; profiles of {base} in {}: {}: use one with apply:profile=DIR, or profile the \
             next run with profile:name=NAME and apply with apply:name=NAME",
            root.display(),
            list.join(", ")
        )
    }
}
