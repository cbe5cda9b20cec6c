//! Thread identity: creation order inside the profiled process, from the kernel's FORK/COMM
//! records (main thread = 0), not from tid values.
//! During a run the same records tell which followed process has the most live threads (the
//! watch backend takes its words from it).

use super::records::Rec;
use std::collections::{HashMap, HashSet};

/// One thread seen during the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackedThread {
    pub tid: i32,
    pub pid: i32,
    pub name: String,
}

/// Builds the creation-ordered thread list.
#[derive(Debug, Clone)]
pub struct ThreadTable {
    follow_children: bool,
    procs: HashSet<i32>,
    threads: Vec<TrackedThread>,
    by_tid: HashMap<i32, usize>,
    /// Threads not exited yet: tid -> pid, and the count per process (a process without
    /// live threads has no entry).
    live: HashMap<i32, i32>,
    live_per_process: HashMap<i32, usize>,
}

impl ThreadTable {
    /// Threads already running when profiling starts, in the order given (main thread first).
    pub fn new(root_pid: i32, existing: Vec<(i32, String)>, follow_children: bool) -> Self {
        let mut t = ThreadTable {
            follow_children,
            procs: HashSet::from([root_pid]),
            threads: Vec::new(),
            by_tid: HashMap::new(),
            live: HashMap::new(),
            live_per_process: HashMap::new(),
        };
        for (tid, name) in existing {
            t.add(tid, root_pid, name);
        }
        t
    }

    fn add(&mut self, tid: i32, pid: i32, name: String) {
        if self.live.insert(tid, pid).is_none() {
            *self.live_per_process.entry(pid).or_default() += 1;
        }
        if self.by_tid.contains_key(&tid) {
            return;
        }
        self.by_tid.insert(tid, self.threads.len());
        self.threads.push(TrackedThread { tid, pid, name });
    }

    /// Apply task records, which must be sorted by time. Returns the pid of a tracked process
    /// whose address space just went away: it exec'd or its last thread exited.
    pub fn apply(&mut self, rec: &Rec) -> Option<i32> {
        match rec {
            Rec::Fork {
                pid,
                ppid,
                tid,
                ptid,
                ..
            } => {
                let parent_name = self
                    .by_tid
                    .get(ptid)
                    .map(|&i| self.threads[i].name.clone())
                    .unwrap_or_default();
                if self.procs.contains(pid) {
                    // A new thread of a tracked process.
                    self.add(*tid, *pid, parent_name);
                } else if self.follow_children && pid == tid && self.procs.contains(ppid) {
                    // A child process (only followed when asked).
                    self.procs.insert(*pid);
                    self.add(*tid, *pid, parent_name);
                }
            }
            Rec::Comm {
                pid,
                tid,
                name,
                exec,
                ..
            } => {
                if let Some(&i) = self.by_tid.get(tid) {
                    self.threads[i].name = name.clone();
                    if *exec {
                        return Some(*pid);
                    }
                }
            }
            Rec::Exit { tid, .. } => {
                let pid = self.live.remove(tid)?;
                let n = self.live_per_process.get_mut(&pid)?;
                *n -= 1;
                if *n == 0 {
                    self.live_per_process.remove(&pid);
                    return Some(pid);
                }
            }
            _ => {}
        }
        None
    }

    /// The tracked process with the most live threads, the newest one on a tie (a launcher
    /// or shell waiting for its child has as many threads as a single-threaded child).
    pub fn busiest_process(&self) -> Option<i32> {
        self.live_per_process
            .iter()
            .max_by_key(|&(pid, n)| (*n, self.by_tid.get(pid)))
            .map(|(&pid, _)| pid)
    }

    /// The tracked processes that still have live threads.
    pub fn live_processes(&self) -> impl Iterator<Item = i32> + '_ {
        self.live_per_process.keys().copied()
    }

    /// Creation index of a tid, if it belongs to the profiled process(es).
    pub fn index(&self, tid: i32) -> Option<usize> {
        self.by_tid.get(&tid).copied()
    }

    pub fn threads(&self) -> &[TrackedThread] {
        &self.threads
    }
}

/// The threads of a running process, main thread first, then by start time and tid
/// (the best order available for threads created before the profiler attached).
pub fn existing_threads(pid: i32) -> std::io::Result<Vec<(i32, String)>> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let e = e?;
        let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        // Field 22 (starttime) follows the ')' that closes the comm field.
        let start: u64 = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(19))
            .and_then(|s| s.parse().ok())
            .unwrap_or(u64::MAX);
        let name = std::fs::read_to_string(e.path().join("comm"))
            .map(|s| s.trim_end().to_string())
            .unwrap_or_default();
        v.push((tid != pid, start, tid, name));
    }
    v.sort();
    Ok(v.into_iter().map(|(_, _, tid, name)| (tid, name)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fork(pid: i32, ppid: i32, tid: i32, ptid: i32) -> Rec {
        Rec::Fork {
            pid,
            ppid,
            tid,
            ptid,
            time: 0,
        }
    }

    #[test]
    fn creation_order_and_names() {
        let mut t = ThreadTable::new(100, vec![(100, String::new())], false);
        t.apply(&Rec::Comm {
            pid: 100,
            tid: 100,
            time: 0,
            name: "app".into(),
            exec: true,
        });
        t.apply(&fork(100, 100, 205, 100));
        t.apply(&fork(100, 100, 203, 205)); // created by thread 1; lower tid, later creation
        t.apply(&Rec::Comm {
            pid: 100,
            tid: 203,
            time: 0,
            name: "worker".into(),
            exec: false,
        });
        // A child process and its thread are ignored without follow_children.
        t.apply(&fork(300, 100, 300, 100));
        t.apply(&fork(300, 300, 301, 300));
        let names: Vec<_> = t
            .threads()
            .iter()
            .map(|x| (x.tid, x.name.as_str()))
            .collect();
        assert_eq!(names, vec![(100, "app"), (205, "app"), (203, "worker")]);
        assert_eq!(t.index(203), Some(2));
        assert_eq!(t.index(300), None);
    }

    #[test]
    fn follow_children_tracks_child_processes() {
        let mut t = ThreadTable::new(100, vec![(100, "sh".into())], true);
        t.apply(&fork(300, 100, 300, 100));
        t.apply(&fork(300, 300, 301, 300));
        t.apply(&fork(400, 999, 400, 999)); // not a descendant
        assert_eq!(t.index(300), Some(1));
        assert_eq!(t.index(301), Some(2));
        assert_eq!(t.index(400), None);
    }

    #[test]
    fn busiest_process_follows_forks_execs_and_exits() {
        let exit = |pid, tid| Rec::Exit { pid, tid, time: 0 };
        let mut t = ThreadTable::new(100, vec![(100, "sh".into())], true);
        assert_eq!(t.busiest_process(), Some(100));
        // The shell's child: one thread each, the newer process wins.
        t.apply(&fork(300, 100, 300, 100));
        assert_eq!(t.busiest_process(), Some(300));
        let exec = Rec::Comm {
            pid: 300,
            tid: 300,
            time: 0,
            name: "app".into(),
            exec: true,
        };
        assert_eq!(t.apply(&exec), Some(300), "exec replaces the address space");
        t.apply(&fork(300, 300, 301, 300));
        t.apply(&fork(300, 300, 302, 300));
        // A newer single-threaded process does not beat one with three threads.
        t.apply(&fork(400, 100, 400, 100));
        assert_eq!(t.busiest_process(), Some(300));
        assert_eq!(t.apply(&exit(300, 301)), None);
        assert_eq!(t.apply(&exit(300, 302)), None);
        assert_eq!(
            t.busiest_process(),
            Some(400),
            "one thread each: the newest"
        );
        assert_eq!(
            t.apply(&exit(400, 400)),
            Some(400),
            "its last thread exited"
        );
        assert_eq!(t.busiest_process(), Some(300));
        assert_eq!(t.apply(&exit(300, 300)), Some(300));
        assert_eq!(t.busiest_process(), Some(100));
        // Exits of unknown threads change nothing; numbering keeps the exited threads.
        assert_eq!(t.apply(&exit(999, 999)), None);
        assert_eq!(t.index(302), Some(3));
    }

    #[test]
    fn existing_threads_of_self() {
        let me = std::process::id() as i32;
        let v = existing_threads(me).unwrap();
        assert_eq!(v[0].0, me, "main thread first");
    }
}
