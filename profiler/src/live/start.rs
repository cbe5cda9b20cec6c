//! Phase 1 of a profiling run: start the command with the events attached before its first
//! instruction, or attach to a running process and every thread it has.

use super::{open_cpu_wide, open_streams, process_alive, threads, Opened, ProfileConfig, Target};
use crate::error::{ProfileError, Result};
use crate::probe::Backend;
use std::process::Child;

/// The target once its events are open.
pub(super) struct Started {
    /// The profiled process.
    pub root: i32,
    /// The launched command (none when attached).
    pub child: Option<Child>,
    /// Threads that existed when profiling began (tid, name).
    pub existing: Vec<(i32, String)>,
    pub opened: Opened,
    /// The command line, for profile.yaml.
    pub command: Vec<String>,
}

/// Open `backend`'s events on the target: a launched command gets them before it execs; a
/// followed process gets them on every thread, until its thread list stops growing.
pub(super) fn start(
    cfg: &ProfileConfig,
    backend: Backend,
    cpus: &[usize],
    hw: &(Vec<crate::hw::HwEvent>, bool),
) -> Result<Started> {
    let (root, child, existing, opened, command) = match &cfg.target {
        Target::Launch(argv) => {
            let (child, opened) = super::launch::launch(argv, |pid| {
                let mut o = open_streams(&[pid], cpus, backend, cfg, true, cfg.watch.slots, hw)?;
                o.streams.extend(open_cpu_wide(cpus, hw, cfg)?);
                Ok(o)
            })?;
            let pid = child.id() as i32;
            (
                pid,
                Some(child),
                vec![(pid, String::new())],
                opened,
                argv.clone(),
            )
        }
        Target::Attach(pid) => {
            let pid = *pid;
            if pid <= 0 || !process_alive(pid) {
                return Err(ProfileError::NoSuchProcess(pid));
            }
            let mut existing =
                threads::existing_threads(pid).map_err(|_| ProfileError::NoSuchProcess(pid))?;
            let tids: Vec<i32> = existing.iter().map(|t| t.0).collect();
            let mut opened = open_streams(&tids, cpus, backend, cfg, false, cfg.watch.slots, hw)?;
            opened.streams.extend(open_cpu_wide(cpus, hw, cfg)?);
            // Threads created while the events were being opened have no inherited
            // events: open theirs too, until the thread list is stable.
            for _ in 0..10 {
                let now = threads::existing_threads(pid).unwrap_or_default();
                let new: Vec<(i32, String)> = now
                    .into_iter()
                    .filter(|(t, _)| !existing.iter().any(|(e, _)| e == t))
                    .collect();
                if new.is_empty() {
                    break;
                }
                let tids: Vec<i32> = new.iter().map(|t| t.0).collect();
                let more = open_streams(&tids, cpus, backend, cfg, false, opened.slots, hw)?;
                opened.streams.extend(more.streams);
                existing.extend(new);
            }
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|b| {
                    b.split(|&c| c == 0)
                        .filter(|s| !s.is_empty())
                        .map(|s| String::from_utf8_lossy(s).into_owned())
                        .collect()
                })
                .unwrap_or_default();
            (pid, None, existing, opened, cmdline)
        }
    };
    Ok(Started {
        root,
        child,
        existing,
        opened,
        command,
    })
}
