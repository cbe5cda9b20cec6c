//! The profile directory: what the profiler measured and the mapper reads.
//!
//! ```text
//! profile/
//!   profile.yaml   schema, command, host, topology summary, backend, period, duration,
//!                  threads in creation order (tid, name, samples), phases
//!   comm.csv       n×n communication matrix, row i = thread i, no header
//!   load.csv       n values, one per line (memory load vector V)
//!   timeline.csv   header `t_ms,samples,smoothed,phase`, one row per timeslice
//!   samples.csv    optional bounded raw-sample log `tid_index,time_ns,addr` ([`mapper::SampleLog`], [`mapper::read_samples_csv`])
//!   comm.a.csv     optional: two disjoint halves of the sharing events that add up to
//!   comm.b.csv     comm.csv (held-out evidence for the guard, see [`evidence`])
//!   lines.a.csv    optional, with the halves: per pair, the distinct cache lines its events
//!   lines.b.csv    in that half came from (the independent observations behind the counts)
//!   cpu.csv        optional: CPU time per thread per time bin (`cpu.bin_ms` in the params),
//!                  when each thread ran ([`cpu`])
//! ```
//! Written atomically: into a temporary sibling directory, then renamed into place.

use mapper::{read_comm_csv, read_load_csv, write_comm_csv};

use mapper::{CommMatrix, MapError, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

pub mod accumulate;
pub mod cpu;
pub mod evidence;
pub mod ranks;

pub use evidence::Evidence;

/// The profile's metadata file: its presence is what makes a directory a profile.
pub const PROFILE_FILE: &str = "profile.yaml";
/// File names of the two halves of the communication matrix.
pub const HALF_FILES: [&str; 2] = ["comm.a.csv", "comm.b.csv"];
/// File names of the per-half line counts ([`Profile::lines`]).
pub const LINE_FILES: [&str; 2] = ["lines.a.csv", "lines.b.csv"];

/// Version of the profile directory format written by this build.
pub const PROFILE_SCHEMA: u32 = 1;

/// One thread of the profiled process, in creation order (main thread = index 0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadInfo {
    pub index: usize,
    pub tid: i64,
    #[serde(default)]
    pub name: String,
    /// All samples attributed to this thread.
    #[serde(default)]
    pub samples: u64,
    /// Samples that counted towards the load vector (DRAM-only where the backend can tell).
    #[serde(default)]
    pub load_samples: u64,
}

/// One phase of the memory-access timeline (thesis Algorithm 3-2, Eq. 3-2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    pub start_ms: f64,
    pub end_ms: f64,
    /// Mean samples per timeslice in the phase (Eq. 3-2).
    pub weight: f64,
}

/// `profile.yaml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileMeta {
    pub schema: u32,
    pub command: Vec<String>,
    #[serde(default)]
    pub host: String,
    /// Human-readable topology summary of the machine that was profiled.
    #[serde(default)]
    pub topology: String,
    pub backend: String,
    #[serde(default)]
    pub sample_period: u64,
    #[serde(default)]
    pub duration_s: f64,
    #[serde(default)]
    pub samples: u64,
    #[serde(default)]
    pub lost_samples: u64,
    /// True when the load vector only counts DRAM accesses (hardware backends).
    #[serde(default)]
    pub load_dram_only: bool,
    pub threads: Vec<ThreadInfo>,
    #[serde(default)]
    pub phases: Vec<Phase>,
    /// Free-form analysis parameters (expiration period, line size, timeslice, ...).
    #[serde(default)]
    pub params: std::collections::BTreeMap<String, String>,
    /// How much the profile knows ([`Evidence`]); absent in profiles of older cmlb versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Evidence>,
}

impl ThreadInfo {
    /// A thread with this tid, name and sample counts (index 0: [`ProfileMeta::new`] numbers
    /// the threads).
    pub fn new(tid: i64, name: &str, samples: u64, load_samples: u64) -> Self {
        ThreadInfo {
            index: 0,
            tid,
            name: name.to_string(),
            samples,
            load_samples,
        }
    }
}

impl ProfileMeta {
    /// The description of a profile of `command` with `n` threads in creation order, each like
    /// `thread` (its `tid` is the first thread's, the next ones count up; `index` is set), the
    /// current schema, the threads' samples as the total, and nothing else: where tests and
    /// importers start, setting what else they know with `..ProfileMeta::new(..)`.
    pub fn new(command: &[&str], backend: &str, n: usize, thread: ThreadInfo) -> Self {
        ProfileMeta {
            schema: PROFILE_SCHEMA,
            command: command.iter().map(|s| s.to_string()).collect(),
            host: String::new(),
            topology: String::new(),
            backend: backend.to_string(),
            sample_period: 1,
            duration_s: 0.0,
            samples: thread.samples * n as u64,
            lost_samples: 0,
            load_dram_only: false,
            threads: (0..n)
                .map(|i| ThreadInfo {
                    index: i,
                    tid: thread.tid + i as i64,
                    ..thread.clone()
                })
                .collect(),
            phases: Vec::new(),
            params: Default::default(),
            evidence: None,
        }
    }
}

/// One row of `timeline.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelineRow {
    pub t_ms: f64,
    pub samples: f64,
    pub smoothed: f64,
    /// Phase index, or -1 for slices outside every phase.
    pub phase: i64,
}

/// A whole profile directory in memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub meta: ProfileMeta,
    pub comm: CommMatrix,
    pub load: Vec<f64>,
    pub timeline: Vec<TimelineRow>,
    /// Two disjoint halves of the sharing events (`comm.a.csv`, `comm.b.csv`): each event of
    /// `comm` is in exactly one, so `a + b == comm`. `None` when the files are absent (older
    /// profiles, imports).
    pub halves: Option<(CommMatrix, CommMatrix)>,
    /// For each half, how many distinct cache lines each pair's events came from
    /// (`lines.a.csv`, `lines.b.csv`). A watched word gives a burst of dependent events on one
    /// line, so lines, not events, are the independent observations: the guard's test for
    /// programs with few threads counts them. `None` without halves and in older profiles.
    pub lines: Option<(CommMatrix, CommMatrix)>,
    /// When each thread ran (`cpu.csv`): lets the guard refuse a plan that stacks threads
    /// running at the same time on one PU. `None` in older profiles and imports.
    pub cpu: Option<cpu::CpuTimeline>,
}

impl Profile {
    /// Read `dir/profile.yaml`, `comm.csv`, `load.csv` and (if present) `timeline.csv`,
    /// checking that their sizes agree.
    pub fn read_dir(dir: &Path) -> Result<Profile> {
        let yaml = dir.join(PROFILE_FILE);
        let text = std::fs::read_to_string(&yaml).map_err(|e| MapError::io(&yaml, e))?;
        let meta: ProfileMeta =
            serde_norway::from_str(&text).map_err(|e| MapError::parse(&yaml, e.to_string()))?;
        if meta.schema > PROFILE_SCHEMA {
            return Err(MapError::parse(
                &yaml,
                format!(
                    "schema {} is newer than this cmlb understands ({PROFILE_SCHEMA})",
                    meta.schema
                ),
            ));
        }
        let comm = read_comm_csv(&dir.join("comm.csv"), false)?;
        let load_path = dir.join("load.csv");
        let load = read_load_csv(&load_path)?;
        if load.len() != comm.n() {
            return Err(MapError::input(
                load_path.display().to_string(),
                format!(
                    "load vector has {} values but the matrix has {} threads",
                    load.len(),
                    comm.n()
                ),
            ));
        }
        if meta.threads.len() != comm.n() {
            return Err(MapError::parse(
                &yaml,
                format!(
                    "lists {} threads but comm.csv has {}",
                    meta.threads.len(),
                    comm.n()
                ),
            ));
        }
        let tl = dir.join("timeline.csv");
        let timeline = if tl.exists() {
            read_timeline_csv(&tl)?
        } else {
            Vec::new()
        };
        let halves = read_halves(dir, &comm)?;
        let lines = read_lines(dir, halves.as_ref())?;
        let cpu = read_cpu(dir, &meta, comm.n())?;
        Ok(Profile {
            meta,
            comm,
            load,
            timeline,
            halves,
            lines,
            cpu,
        })
    }

    /// Recompute `meta.evidence` from the matrix, its halves and the thread sample counts
    /// (`runs` merged runs). How sampling ended is kept: it is not in the counts.
    pub fn update_evidence(&mut self, runs: u32) {
        let samples: Vec<u64> = self.meta.threads.iter().map(|t| t.samples).collect();
        let stopped = self
            .meta
            .evidence
            .as_ref()
            .and_then(|e| e.sampling_stopped.clone());
        let mut e = Evidence::compute(
            &self.comm,
            self.halves.as_ref(),
            &samples,
            self.meta.duration_s,
            runs,
        );
        e.sampling_stopped = stopped;
        self.meta.evidence = Some(e);
    }

    /// Runs merged into this profile (1 for a profile without evidence).
    pub fn runs(&self) -> u32 {
        self.meta.evidence.as_ref().map_or(1, |e| e.runs.max(1))
    }

    /// Write the profile to `dir` atomically: a temporary sibling directory is filled and then
    /// renamed over `dir` (an existing profile there is replaced only once the new one is complete).
    pub fn write_dir(&self, dir: &Path) -> Result<()> {
        self.write_dir_with_samples(dir, None)
    }

    /// [`Profile::write_dir`], plus the raw-sample log `samples.csv` when `samples` is given
    /// (written inside the same temporary directory, so it appears together with the rest).
    pub fn write_dir_with_samples(
        &self,
        dir: &Path,
        samples: Option<&[mapper::LoggedSample]>,
    ) -> Result<()> {
        mapper::check_output_dir(dir, PROFILE_FILE, &[])?;
        let parent = dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).map_err(|e| MapError::io(parent, e))?;
        // 0777 minus the umask, as mkdir would give (tempfile's default is 0700).
        let tmp = tempfile::Builder::new()
            .prefix(".cmlb-profile-")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o777))
            .tempdir_in(parent)
            .map_err(|e| MapError::io(parent, e))?;
        let t = tmp.path();
        let yaml = serde_norway::to_string(&self.meta)
            .map_err(|e| MapError::parse(t.join(PROFILE_FILE), e.to_string()))?;
        write_file(&t.join(PROFILE_FILE), yaml.as_bytes())?;
        write_comm_csv(&t.join("comm.csv"), &self.comm, false)?;
        if let Some((a, b)) = &self.halves {
            write_comm_csv(&t.join(HALF_FILES[0]), a, false)?;
            write_comm_csv(&t.join(HALF_FILES[1]), b, false)?;
            if let Some((la, lb)) = &self.lines {
                write_comm_csv(&t.join(LINE_FILES[0]), la, false)?;
                write_comm_csv(&t.join(LINE_FILES[1]), lb, false)?;
            }
        }
        let mut load = String::new();
        for v in &self.load {
            load.push_str(&format!("{v}\n"));
        }
        write_file(&t.join("load.csv"), load.as_bytes())?;
        let mut w = csv::Writer::from_writer(Vec::new());
        for r in &self.timeline {
            w.serialize(r)
                .map_err(|e| MapError::parse(t.join("timeline.csv"), e.to_string()))?;
        }
        if self.timeline.is_empty() {
            w.write_record(["t_ms", "samples", "smoothed", "phase"])
                .map_err(|e| MapError::parse(t.join("timeline.csv"), e.to_string()))?;
        }
        let bytes = w
            .into_inner()
            .map_err(|e| MapError::parse(t.join("timeline.csv"), e.to_string()))?;
        write_file(&t.join("timeline.csv"), &bytes)?;
        if let Some(c) = &self.cpu {
            write_file(&t.join(cpu::CPU_FILE), c.to_csv().as_bytes())?;
        }
        if let Some(log) = samples {
            mapper::write_samples_csv(&t.join(mapper::SAMPLES_FILE), log)?;
        }
        mapper::replace_dir(tmp.keep(), dir)
    }
}

/// Read `cpu.csv` if it exists; its bin width must be in the params.
fn read_cpu(dir: &Path, meta: &ProfileMeta, n: usize) -> Result<Option<cpu::CpuTimeline>> {
    let path = dir.join(cpu::CPU_FILE);
    if !path.exists() {
        return Ok(None);
    }
    let Some(bin_ms) = cpu::bin_ms(&meta.params) else {
        return Err(MapError::input(
            path.display().to_string(),
            format!(
                "profile.yaml has no '{}' parameter for its bin width (delete {} to map without it)",
                cpu::BIN_PARAM,
                cpu::CPU_FILE
            ),
        ));
    };
    cpu::CpuTimeline::read(&path, n, bin_ms).map(Some)
}

/// Read `comm.a.csv` and `comm.b.csv` if both exist; they must have the matrix's size and add
/// up to it (a hand-edited `comm.csv` with stale halves would otherwise be judged on evidence
/// it no longer has).
fn read_halves(dir: &Path, comm: &CommMatrix) -> Result<Option<(CommMatrix, CommMatrix)>> {
    let (pa, pb) = (dir.join(HALF_FILES[0]), dir.join(HALF_FILES[1]));
    match (pa.exists(), pb.exists()) {
        (false, false) => return Ok(None),
        (true, true) => {}
        (a, _) => {
            let (have, missing) = if a { (&pa, &pb) } else { (&pb, &pa) };
            return Err(MapError::input(
                have.display().to_string(),
                format!(
                    "{} is missing: the two halves come together (delete both to use comm.csv alone)",
                    missing.display()
                ),
            ));
        }
    }
    let a = read_comm_csv(&pa, false)?;
    let b = read_comm_csv(&pb, false)?;
    for (p, h) in [(&pa, &a), (&pb, &b)] {
        if h.n() != comm.n() {
            return Err(MapError::input(
                p.display().to_string(),
                format!("has {} threads but comm.csv has {}", h.n(), comm.n()),
            ));
        }
    }
    let n = comm.n();
    for i in 0..n {
        for j in i..n {
            let (s, c) = (a.get(i, j) + b.get(i, j), comm.get(i, j));
            if (s - c).abs() > 1e-6 * c.abs().max(1.0) {
                return Err(MapError::input(
                    dir.display().to_string(),
                    format!(
                        "comm.a.csv + comm.b.csv = {s} at A[{i}][{j}] but comm.csv has {c}: the \
                         halves must add up to the matrix (delete both to use comm.csv alone)"
                    ),
                ));
            }
        }
    }
    Ok(Some((a, b)))
}

/// Read `lines.a.csv` and `lines.b.csv` if both exist. They belong to the halves: each must
/// have the matrix's size, and a pair has lines in a half exactly when it has events there,
/// never more lines than events (each line counted gave at least one event).
fn read_lines(
    dir: &Path,
    halves: Option<&(CommMatrix, CommMatrix)>,
) -> Result<Option<(CommMatrix, CommMatrix)>> {
    let (pa, pb) = (dir.join(LINE_FILES[0]), dir.join(LINE_FILES[1]));
    let (ea, eb) = (pa.exists(), pb.exists());
    if !ea && !eb {
        return Ok(None);
    }
    let Some((ha, hb)) = halves else {
        let have = if ea { &pa } else { &pb };
        return Err(MapError::input(
            have.display().to_string(),
            format!(
                "line counts without the halves {} and {} they describe (delete {} and {})",
                HALF_FILES[0], HALF_FILES[1], LINE_FILES[0], LINE_FILES[1]
            ),
        ));
    };
    if ea != eb {
        let (have, missing) = if ea { (&pa, &pb) } else { (&pb, &pa) };
        return Err(MapError::input(
            have.display().to_string(),
            format!(
                "{} is missing: the two line counts come together",
                missing.display()
            ),
        ));
    }
    let a = read_comm_csv(&pa, false)?;
    let b = read_comm_csv(&pb, false)?;
    for (p, l, h) in [(&pa, &a, ha), (&pb, &b, hb)] {
        if l.n() != h.n() {
            return Err(MapError::input(
                p.display().to_string(),
                format!("has {} threads but the halves have {}", l.n(), h.n()),
            ));
        }
        for i in 0..h.n() {
            for j in (i + 1)..h.n() {
                let (lv, ev) = (l.get(i, j), h.get(i, j));
                if (lv > 0.0) != (ev > 0.0) || lv > ev * (1.0 + 1e-9) {
                    return Err(MapError::input(
                        p.display().to_string(),
                        format!(
                            "{lv} lines for pair ({i}, {j}) but its half has {ev} events there \
                             (lines need events, at most one line per event)"
                        ),
                    ));
                }
            }
        }
    }
    Ok(Some((a, b)))
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).map_err(|e| MapError::io(path, e))
}

fn read_timeline_csv(path: &Path) -> Result<Vec<TimelineRow>> {
    let mut r = csv::Reader::from_path(path).map_err(|e| MapError::parse(path, e.to_string()))?;
    let mut rows = Vec::new();
    for (k, row) in r.deserialize::<TimelineRow>().enumerate() {
        let row = row.map_err(|e| MapError::parse(path, e.to_string()))?;
        // Plotted as is: a NaN or negative value would draw nonsense without a word.
        let fine = |v: f64| v.is_finite() && v >= 0.0;
        if !(fine(row.t_ms) && fine(row.samples) && fine(row.smoothed)) {
            return Err(MapError::parse(
                path,
                format!(
                    "line {}: t_ms, samples and smoothed must be finite and >= 0",
                    k + 2
                ),
            ));
        }
        rows.push(row);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym(n: usize, pairs: &[(usize, usize, f64)]) -> CommMatrix {
        let mut m = CommMatrix::zeros(n);
        for &(i, j, v) in pairs {
            m.add_sym(i, j, v);
        }
        m
    }

    /// The line counts travel with the halves, and a file that contradicts them is refused
    /// with its name.
    #[test]
    fn line_counts_round_trip_and_must_fit_their_halves() {
        let n = 3;
        let (a, b) = (
            sym(n, &[(0, 1, 40.0)]),
            sym(n, &[(0, 1, 10.0), (1, 2, 3.0)]),
        );
        let mut p = Profile {
            meta: ProfileMeta {
                duration_s: 1.0,
                ..ProfileMeta::new(&["./app"], "watch", n, ThreadInfo::new(0, "", 1, 1))
            },
            comm: sym(n, &[(0, 1, 50.0), (1, 2, 3.0)]),
            load: vec![1.0; n],
            timeline: Vec::new(),
            halves: Some((a, b)),
            lines: Some((sym(n, &[(0, 1, 4.0)]), sym(n, &[(0, 1, 2.0), (1, 2, 1.0)]))),
            cpu: None,
        };
        p.update_evidence(1);
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("p");
        p.write_dir(&d).unwrap();
        assert_eq!(Profile::read_dir(&d).unwrap(), p);
        // The CPU timeline travels with its bin width, and is refused without it.
        p.cpu = Some(cpu::CpuTimeline {
            bin_ms: 20.0,
            ms: vec![vec![1.5, 0.0], vec![20.0, 2.25], vec![0.0, 0.0]],
        });
        p.meta.params.insert(cpu::BIN_PARAM.into(), "20".into());
        p.write_dir(&d).unwrap();
        assert_eq!(Profile::read_dir(&d).unwrap(), p);
        let yaml = std::fs::read_to_string(d.join("profile.yaml")).unwrap();
        std::fs::write(
            d.join("profile.yaml"),
            yaml.replace(cpu::BIN_PARAM, "cpu.other"),
        )
        .unwrap();
        let e = Profile::read_dir(&d).unwrap_err().to_string();
        assert!(e.contains("cpu.csv") && e.contains(cpu::BIN_PARAM), "{e}");
        std::fs::remove_file(d.join(cpu::CPU_FILE)).unwrap();
        // More lines than events.
        std::fs::write(d.join(LINE_FILES[1]), "0,2,0\n2,0,4\n0,4,0\n").unwrap();
        let e = Profile::read_dir(&d).unwrap_err().to_string();
        assert!(
            e.contains("lines.b.csv") && e.contains("pair (1, 2)"),
            "{e}"
        );
        std::fs::remove_file(d.join(LINE_FILES[1])).unwrap();
        let e = Profile::read_dir(&d).unwrap_err().to_string();
        assert!(e.contains("lines.b.csv is missing"), "{e}");
        std::fs::remove_file(d.join(HALF_FILES[0])).unwrap();
        std::fs::remove_file(d.join(HALF_FILES[1])).unwrap();
        let e = Profile::read_dir(&d).unwrap_err().to_string();
        assert!(e.contains("line counts without the halves"), "{e}");
        // Without line counts (older profiles) it reads as before.
        std::fs::remove_file(d.join(LINE_FILES[0])).unwrap();
        let q = Profile::read_dir(&d).unwrap();
        assert_eq!((q.halves, q.lines), (None, None));
    }

    /// EagerMap's layout (numalize writes the same): the first thread's row is the last line.
    /// A file written this way must read back as the same matrix, so a cmlb profile can be fed
    /// to EagerMap's tools and their matrices to cmlb.
    #[test]
    fn eagermap_order_puts_the_first_thread_last_and_round_trips() {
        let m = CommMatrix::from_rows(
            "m",
            vec![
                vec![0.0, 1.0, 5.0],
                vec![1.0, 0.0, 2.5],
                vec![5.0, 2.5, 0.0],
            ],
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (em, plain) = (dir.path().join("em.csv"), dir.path().join("plain.csv"));
        write_comm_csv(&em, &m, true).unwrap();
        write_comm_csv(&plain, &m, false).unwrap();
        assert_eq!(
            std::fs::read_to_string(&em).unwrap(),
            "5,2.5,0\n1,0,2.5\n0,1,5\n"
        );
        assert_eq!(
            std::fs::read_to_string(&plain).unwrap(),
            "0,1,5\n1,0,2.5\n5,2.5,0\n"
        );
        assert_eq!(read_comm_csv(&em, true).unwrap(), m);
        assert_eq!(read_comm_csv(&plain, false).unwrap(), m);
        // numalize ends its matrix with an empty line; EagerMap's files end rows with a comma.
        let numalize = dir.path().join("numalize.csv");
        std::fs::write(&numalize, "5,2.5,0\n1,0,2.5\n0,1,5\n\n").unwrap();
        assert_eq!(read_comm_csv(&numalize, true).unwrap(), m);
        std::fs::write(&numalize, "5,2.5,0,\n1,0,2.5,\n0,1,5,\n").unwrap();
        assert_eq!(read_comm_csv(&numalize, true).unwrap(), m);
        // Read in the wrong order the rows no longer mirror the columns.
        let err = read_comm_csv(&em, false).unwrap_err().to_string();
        assert!(err.contains("not symmetric"), "{err}");
    }
}
