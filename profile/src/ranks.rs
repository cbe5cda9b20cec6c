//! The rank profile of a multi-task step: the `ranks/` directory that the MPI tracer
//! (`libcmlb_mpi.so`) writes into a job profile directory. File formats: [`contract::ranks`].
//!
//! ```text
//! <job profile>/           one directory per step command (the profile key)
//!   ranks/                 comm.edges, p2p.edges, hosts.txt, ranks.yaml (+ comm.csv,
//!                          messages.csv up to 2048 ranks): the rank matrix, rank order
//!   task0/, task1/, ...    each task's (rank's) thread profile, by global task id
//! ```

use contract::ranks::{COMM_EDGES, HOSTS, SUMMARY};
use mapper::ranks::{read_edges, RankGraph};
use mapper::{MapError, Result};
use serde::Deserialize;
use std::path::Path;

/// `ranks.yaml`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RanksMeta {
    /// Format version.
    pub schema: u32,
    /// Ranks in `MPI_COMM_WORLD`.
    pub ranks: usize,
    /// Hosts the profiled run used.
    #[serde(default)]
    pub hosts: usize,
    /// The MPI library.
    #[serde(default)]
    pub mpi: String,
    /// The program.
    #[serde(default)]
    pub command: Vec<String>,
    /// Longest rank's `MPI_Init` → `MPI_Finalize` time.
    #[serde(default)]
    pub seconds: f64,
    /// Point-to-point bytes.
    #[serde(default)]
    pub p2p_bytes: u64,
    /// Collective bytes (by pattern).
    #[serde(default)]
    pub collective_bytes: u64,
    /// Point-to-point bytes between ranks on different hosts in the profiled run.
    #[serde(default)]
    pub measured_inter_node_p2p_bytes: u64,
    /// All bytes between ranks on different hosts in the profiled run.
    #[serde(default)]
    pub measured_inter_node_bytes: u64,
}

/// A rank profile: the summary, the symmetric rank graph (bytes both ways), and the host each
/// rank ran on.
#[derive(Debug, Clone)]
pub struct RankProfile {
    /// `ranks.yaml`.
    pub meta: RanksMeta,
    /// `comm.edges`, both directions added.
    pub graph: RankGraph,
    /// `hosts.txt`: host of each rank (empty when the file is absent).
    pub hosts: Vec<String>,
}

/// Whether `dir` holds a rank profile.
pub fn has_ranks(dir: &Path) -> bool {
    dir.join(SUMMARY).is_file() && dir.join(COMM_EDGES).is_file()
}

/// Read a `ranks/` directory. Errors name the file.
pub fn read_ranks_dir(dir: &Path) -> Result<RankProfile> {
    let yaml = dir.join(SUMMARY);
    let text = std::fs::read_to_string(&yaml).map_err(|e| MapError::io(&yaml, e))?;
    let meta: RanksMeta =
        serde_norway::from_str(&text).map_err(|e| MapError::parse(&yaml, e.to_string()))?;
    if meta.schema != 1 {
        return Err(MapError::parse(
            &yaml,
            format!("schema {} is not one this cmlb reads (1)", meta.schema),
        ));
    }
    if meta.ranks == 0 || meta.ranks > mapper::ranks::MAX_RANKS {
        return Err(MapError::parse(
            &yaml,
            format!("ranks: {} is not a rank count", meta.ranks),
        ));
    }
    let graph = read_edges(&dir.join(COMM_EDGES), Some(meta.ranks))?;
    let hp = dir.join(HOSTS);
    let mut hosts = Vec::new();
    if hp.exists() {
        let text = std::fs::read_to_string(&hp).map_err(|e| MapError::io(&hp, e))?;
        hosts = vec![String::new(); meta.ranks];
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = || {
                MapError::input(
                    format!("{}:{}", hp.display(), i + 1),
                    format!("'{line}' is not RANK HOST"),
                )
            };
            let (r, h) = line.split_once(char::is_whitespace).ok_or_else(bad)?;
            let r: usize = r.parse().map_err(|_| bad())?;
            *hosts.get_mut(r).ok_or_else(bad)? = h.trim().to_string();
        }
    }
    Ok(RankProfile { meta, graph, hosts })
}

#[cfg(test)]
mod tests {
    use super::*;
    use contract::ranks::{JobRanks, RankRow, Sent};

    #[test]
    fn reads_what_the_tracer_writes() {
        let d = tempfile::tempdir().unwrap();
        let sent = |b| Sent {
            p2p_bytes: b,
            p2p_msgs: 1,
            ..Sent::default()
        };
        JobRanks {
            n: 3,
            rows: vec![
                RankRow {
                    rank: 0,
                    host: "n1".into(),
                    seconds: 1.0,
                    to: vec![(2, sent(10))],
                },
                RankRow {
                    rank: 1,
                    host: "n2".into(),
                    seconds: 1.0,
                    to: vec![],
                },
                RankRow {
                    rank: 2,
                    host: "n1".into(),
                    seconds: 2.0,
                    to: vec![(0, sent(5))],
                },
            ],
            mpi: "MPI".into(),
            command: vec!["app".into()],
        }
        .write_dir(d.path())
        .unwrap();
        assert!(has_ranks(d.path()));
        let p = read_ranks_dir(d.path()).unwrap();
        assert_eq!(p.meta.ranks, 3);
        assert_eq!(p.graph.n(), 3);
        assert_eq!(p.graph.total(), 15.0);
        assert_eq!(p.hosts, ["n1", "n2", "n1"]);
        assert_eq!(p.meta.seconds, 2.0);
        std::fs::write(d.path().join(HOSTS), "0 n1\nx\n").unwrap();
        let e = read_ranks_dir(d.path()).unwrap_err().to_string();
        assert!(e.contains("hosts.txt:2: 'x' is not RANK HOST"), "{e}");
        std::fs::write(d.path().join(SUMMARY), "schema: 1\nranks: 2\n").unwrap();
        let e = read_ranks_dir(d.path()).unwrap_err().to_string();
        assert!(e.contains("names rank 2 but the job has 2 ranks"), "{e}");
    }

    #[test]
    fn fuzz_regression_control_characters_in_mpi_and_command_read_back() {
        // fuzz/seeds/rank_rows/crash-378caa81…: ranks.yaml wrote control characters as spaces,
        // so the MPI line read back changed; DEL, C1 and U+2028 would make the file unreadable
        // or fold into a line break.
        let d = tempfile::tempdir().unwrap();
        let mpi = "MPI\0-\u{fffd}p\0\t\u{7f}\u{85}\u{9f}\u{2028}\u{feff}\"\\";
        let command = vec!["./a\u{1b}[1m".to_string(), "x\ny\u{2029}".to_string()];
        JobRanks {
            n: 1,
            rows: vec![RankRow {
                rank: 0,
                host: "n1".into(),
                seconds: 1.0,
                to: vec![],
            }],
            mpi: mpi.into(),
            command: command.clone(),
        }
        .write_dir(d.path())
        .unwrap();
        let p = read_ranks_dir(d.path()).unwrap();
        assert_eq!(p.meta.mpi, mpi);
        assert_eq!(p.meta.command, command);
    }
}
