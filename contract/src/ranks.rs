//! The rank matrix of an MPI job: what the MPI tracer (`libcmlb_mpi.so`, running inside every
//! rank) hands to the launchers that map ranks (the SPANK plugin, `cmlb ranks`).
//!
//! At `MPI_Finalize` every rank encodes its row ([`RankRow::encode`]: bytes and messages it sent
//! to each other rank, point-to-point and collective, and the host it ran on); the rows are
//! gathered inside the job and the first rank of every host writes the whole job's
//! [`JobRanks::write_dir`] into `$CMLB_RANKS_OUT` on its own node. So node-local scratch gets a
//! complete copy on every node, and a shared one gets the same files from each writer (each
//! written to a temporary name and renamed, so a reader never sees half a file).
//!
//! Files of a ranks directory (all ranks numbered as in `MPI_COMM_WORLD`, which under `srun`
//! is the Slurm task id):
//!
//! | file | content |
//! |---|---|
//! | `comm.edges` | `SRC DST BYTES MESSAGES`, directed as sent: point-to-point + collectives |
//! | `p2p.edges` | the same, point-to-point only (counted exactly, nothing modelled) |
//! | `comm.csv`, `messages.csv` | dense symmetric n × n bytes / messages (both directions added), for n ≤ [`DENSE_MAX`] |
//! | `hosts.txt` | `RANK HOST`: where each rank ran (the placement the run measured) |
//! | `ranks.yaml` | the summary: ranks, hosts, MPI library, totals, measured inter-node bytes |
//!
//! Libc only, as the rest of this crate: the tracer links it into every MPI rank.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The MPI tracer's file name (what launchers look for next to themselves).
pub const MPI_LIB: &str = "libcmlb_mpi.so";

/// Directories the tracer writes the job's rank files into, `:`-separated (set by the launcher).
pub const RANKS_OUT: &str = "CMLB_RANKS_OUT";

/// Name of the ranks directory inside a step's profile directory.
pub const RANKS_DIR: &str = "ranks";
/// Directed edge list, point-to-point and collectives.
pub const COMM_EDGES: &str = "comm.edges";
/// Directed edge list, point-to-point only.
pub const P2P_EDGES: &str = "p2p.edges";
/// Dense symmetric bytes.
pub const COMM_CSV: &str = "comm.csv";
/// Dense symmetric messages.
pub const MESSAGES_CSV: &str = "messages.csv";
/// `RANK HOST` lines.
pub const HOSTS: &str = "hosts.txt";
/// Summary.
pub const SUMMARY: &str = "ranks.yaml";
/// Dense matrices are written up to this many ranks (4 M cells; the edge lists always).
pub const DENSE_MAX: usize = 2048;

/// What one rank sent to another: point-to-point bytes and messages, collective bytes and
/// messages (collectives by their pattern, see the tracer's documentation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sent {
    /// Point-to-point bytes.
    pub p2p_bytes: u64,
    /// Point-to-point messages.
    pub p2p_msgs: u64,
    /// Collective bytes.
    pub coll_bytes: u64,
    /// Collective messages.
    pub coll_msgs: u64,
}

impl Sent {
    /// Bytes of both kinds.
    pub fn bytes(&self) -> u64 {
        self.p2p_bytes.saturating_add(self.coll_bytes)
    }
    /// Messages of both kinds.
    pub fn msgs(&self) -> u64 {
        self.p2p_msgs.saturating_add(self.coll_msgs)
    }
    fn is_zero(&self) -> bool {
        *self == Sent::default()
    }
}

/// One rank's row of the job's matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct RankRow {
    /// The rank in `MPI_COMM_WORLD`.
    pub rank: u32,
    /// The host it ran on (`gethostname`).
    pub host: String,
    /// Seconds from `MPI_Init` to `MPI_Finalize`.
    pub seconds: f64,
    /// Destination rank → what was sent there (non-zero entries only).
    pub to: Vec<(u32, Sent)>,
}

/// Why bytes could not be decoded as rows (the tracer reports it and writes nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

const ROW_MAGIC: u64 = 0x636d_6c62_726f_7731; // "cmlbrow1"

impl RankRow {
    /// The row as little-endian 64-bit words: magic, rank, seconds (bits), host length, host
    /// bytes (padded to 8), entry count, then per entry destination and the four counters.
    pub fn encode(&self) -> Vec<u8> {
        let mut w: Vec<u64> = vec![
            ROW_MAGIC,
            self.rank as u64,
            self.seconds.to_bits(),
            self.host.len() as u64,
        ];
        let hb = self.host.as_bytes();
        for chunk in hb.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            w.push(u64::from_le_bytes(b));
        }
        let entries: Vec<&(u32, Sent)> = self.to.iter().filter(|(_, s)| !s.is_zero()).collect();
        w.push(entries.len() as u64);
        for (d, s) in entries {
            w.extend([
                *d as u64,
                s.p2p_bytes,
                s.p2p_msgs,
                s.coll_bytes,
                s.coll_msgs,
            ]);
        }
        w.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// Every row of a concatenation of [`RankRow::encode`] outputs.
    pub fn decode_all(bytes: &[u8]) -> Result<Vec<RankRow>, DecodeError> {
        if !bytes.len().is_multiple_of(8) {
            return Err(DecodeError(format!(
                "{} bytes is not a whole number of words",
                bytes.len()
            )));
        }
        let w: Vec<u64> = bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        let mut rows = Vec::new();
        let mut i = 0;
        let short = || DecodeError("row cut short".into());
        while i < w.len() {
            if w[i] != ROW_MAGIC {
                return Err(DecodeError(format!("word {i} does not start a row")));
            }
            let rank = *w.get(i + 1).ok_or_else(short)?;
            if rank > u64::from(u32::MAX) {
                return Err(DecodeError(format!("word {} is not a rank: {rank}", i + 1)));
            }
            let seconds = f64::from_bits(*w.get(i + 2).ok_or_else(short)?);
            let hlen = *w.get(i + 3).ok_or_else(short)? as usize;
            if hlen > 4096 {
                return Err(DecodeError(format!("host name of {hlen} bytes")));
            }
            i += 4;
            let hw = hlen.div_ceil(8);
            let host_words = w.get(i..i + hw).ok_or_else(short)?;
            let hb: Vec<u8> = host_words.iter().flat_map(|x| x.to_le_bytes()).collect();
            let host = String::from_utf8_lossy(&hb[..hlen]).into_owned();
            i += hw;
            let k = *w.get(i).ok_or_else(short)?;
            i += 1;
            // The count comes off the wire: 5 × k must not wrap around into a short slice.
            let end = usize::try_from(k)
                .ok()
                .and_then(|k| k.checked_mul(5))
                .and_then(|len| len.checked_add(i))
                .ok_or_else(short)?;
            let body = w.get(i..end).ok_or_else(short)?;
            if let Some(e) = body.chunks_exact(5).find(|e| e[0] > u64::from(u32::MAX)) {
                return Err(DecodeError(format!("destination {} is not a rank", e[0])));
            }
            let to = body
                .chunks_exact(5)
                .map(|e| {
                    (
                        e[0] as u32,
                        Sent {
                            p2p_bytes: e[1],
                            p2p_msgs: e[2],
                            coll_bytes: e[3],
                            coll_msgs: e[4],
                        },
                    )
                })
                .collect();
            i = end;
            rows.push(RankRow {
                rank: rank as u32,
                host,
                seconds,
                to,
            });
        }
        Ok(rows)
    }
}

/// The whole job's rows, as written into a ranks directory.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRanks {
    /// Ranks in `MPI_COMM_WORLD`.
    pub n: usize,
    /// One row per rank, any order.
    pub rows: Vec<RankRow>,
    /// `MPI_Get_library_version`'s first line.
    pub mpi: String,
    /// The program's command line (of the rank writing).
    pub command: Vec<String>,
}

/// Totals of a job, as `ranks.yaml` states them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Totals {
    /// Point-to-point bytes.
    pub p2p_bytes: u64,
    /// Collective bytes.
    pub coll_bytes: u64,
    /// Point-to-point bytes between ranks on different hosts.
    pub p2p_inter_node: u64,
    /// All bytes between ranks on different hosts.
    pub inter_node: u64,
    /// Hosts the job ran on.
    pub hosts: usize,
}

impl JobRanks {
    /// Check the rows: one per rank, ranks and destinations below `n`.
    pub fn check(&self) -> Result<(), DecodeError> {
        let mut seen = vec![false; self.n];
        for r in &self.rows {
            let k = r.rank as usize;
            if k >= self.n || std::mem::replace(&mut seen[k], true) {
                return Err(DecodeError(format!("row of rank {k} is out of place")));
            }
            if let Some((d, _)) = r.to.iter().find(|(d, _)| *d as usize >= self.n) {
                return Err(DecodeError(format!(
                    "rank {k} sent to rank {d} of {}",
                    self.n
                )));
            }
        }
        if let Some(k) = seen.iter().position(|s| !s) {
            return Err(DecodeError(format!("no row from rank {k}")));
        }
        Ok(())
    }

    /// Host of every rank.
    pub fn hosts(&self) -> Vec<&str> {
        let mut h = vec![""; self.n];
        for r in &self.rows {
            h[r.rank as usize] = &r.host;
        }
        h
    }

    /// Totals, with inter-node bytes of the placement the run had.
    pub fn totals(&self) -> Totals {
        let hosts = self.hosts();
        let mut t = Totals {
            hosts: hosts
                .iter()
                .collect::<std::collections::BTreeSet<_>>()
                .len(),
            ..Totals::default()
        };
        for r in &self.rows {
            // Saturating, as Sent::bytes: counters off the wire must not wrap into small totals.
            for (d, s) in &r.to {
                t.p2p_bytes = t.p2p_bytes.saturating_add(s.p2p_bytes);
                t.coll_bytes = t.coll_bytes.saturating_add(s.coll_bytes);
                if hosts[r.rank as usize] != hosts[*d as usize] {
                    t.p2p_inter_node = t.p2p_inter_node.saturating_add(s.p2p_bytes);
                    t.inter_node = t.inter_node.saturating_add(s.bytes());
                }
            }
        }
        t
    }

    /// Write every file of a ranks directory into `dir` (created if needed), each to a
    /// temporary name first and then renamed.
    pub fn write_dir(&self, dir: &Path) -> std::io::Result<()> {
        self.check()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.0))?;
        std::fs::create_dir_all(dir)?;
        let mut rows: Vec<&RankRow> = self.rows.iter().collect();
        rows.sort_by_key(|r| r.rank);
        let edges = |p2p_only: bool| {
            let mut s = String::from(if p2p_only {
                "# cmlb rank matrix, point-to-point only: SRC DST BYTES MESSAGES (directed, as sent)\n"
            } else {
                "# cmlb rank matrix: SRC DST BYTES MESSAGES (directed, as sent; point-to-point + collectives)\n"
            });
            for r in &rows {
                for (d, x) in &r.to {
                    let (b, m) = if p2p_only {
                        (x.p2p_bytes, x.p2p_msgs)
                    } else {
                        (x.bytes(), x.msgs())
                    };
                    if b > 0 || m > 0 {
                        s.push_str(&format!("{} {d} {b} {m}\n", r.rank));
                    }
                }
            }
            s
        };
        write_atomic(&dir.join(COMM_EDGES), edges(false).as_bytes())?;
        write_atomic(&dir.join(P2P_EDGES), edges(true).as_bytes())?;
        let mut hosts = String::from("# RANK HOST: where each rank ran\n");
        for r in &rows {
            hosts.push_str(&format!("{} {}\n", r.rank, r.host));
        }
        write_atomic(&dir.join(HOSTS), hosts.as_bytes())?;
        if self.n <= DENSE_MAX {
            let mut bytes = vec![0u64; self.n * self.n];
            let mut msgs = vec![0u64; self.n * self.n];
            for r in &rows {
                let a = r.rank as usize;
                for (d, x) in &r.to {
                    let b = *d as usize;
                    for (i, j) in [(a, b), (b, a)] {
                        let (cb, cm) = (&mut bytes[i * self.n + j], &mut msgs[i * self.n + j]);
                        *cb = cb.saturating_add(x.bytes());
                        *cm = cm.saturating_add(x.msgs());
                    }
                }
            }
            let dense = |v: &[u64]| {
                let mut s = String::with_capacity(v.len() * 2);
                for row in v.chunks(self.n) {
                    let cells: Vec<String> = row.iter().map(u64::to_string).collect();
                    s.push_str(&cells.join(","));
                    s.push('\n');
                }
                s
            };
            write_atomic(&dir.join(COMM_CSV), dense(&bytes).as_bytes())?;
            write_atomic(&dir.join(MESSAGES_CSV), dense(&msgs).as_bytes())?;
        } else {
            // A dense matrix of an earlier, smaller run would contradict the edge lists.
            for f in [COMM_CSV, MESSAGES_CSV] {
                let _ = std::fs::remove_file(dir.join(f));
            }
        }
        let t = self.totals();
        let seconds = rows.iter().map(|r| r.seconds).fold(0.0, f64::max);
        let quote = |s: &str| {
            let mut q = String::from("\"");
            for c in s.chars() {
                match c {
                    '"' | '\\' => {
                        q.push('\\');
                        q.push(c);
                    }
                    // What YAML does not allow raw in a scalar, or would fold as a line break
                    // (NEL, U+2028/9), is escaped, so every string reads back as it was.
                    c if (c as u32) < 0x20
                        || ('\u{7f}'..='\u{9f}').contains(&c)
                        || matches!(
                            c,
                            '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
                        ) =>
                    {
                        q.push_str(&format!("\\u{:04x}", c as u32));
                    }
                    c => q.push(c),
                }
            }
            q.push('"');
            q
        };
        let mut y = String::from("# cmlb MPI rank profile (libcmlb_mpi.so)\nschema: 1\n");
        y.push_str(&format!("ranks: {}\n", self.n));
        y.push_str(&format!("hosts: {}\n", t.hosts));
        y.push_str(&format!("mpi: {}\n", quote(&self.mpi)));
        y.push_str("command: [");
        y.push_str(
            &self
                .command
                .iter()
                .map(|a| quote(a))
                .collect::<Vec<_>>()
                .join(", "),
        );
        y.push_str("]\n");
        y.push_str(&format!("seconds: {seconds:.3}\n"));
        y.push_str(&format!("p2p_bytes: {}\n", t.p2p_bytes));
        y.push_str(&format!("collective_bytes: {}\n", t.coll_bytes));
        y.push_str(&format!(
            "measured_inter_node_p2p_bytes: {}\n",
            t.p2p_inter_node
        ));
        y.push_str(&format!("measured_inter_node_bytes: {}\n", t.inter_node));
        write_atomic(&dir.join(SUMMARY), y.as_bytes())
    }
}

/// The variables of a task whose MPI traffic the tracer records into the directories `out`:
/// `CMLB_RANKS_OUT` and `LD_PRELOAD` with the tracer `lib` added to the task's own list.
pub fn trace_env(
    out: &[PathBuf],
    lib: &str,
    existing_ld_preload: Option<&str>,
) -> Vec<(String, String)> {
    let dirs: Vec<String> = out.iter().map(|p| p.display().to_string()).collect();
    vec![
        (RANKS_OUT.into(), dirs.join(":")),
        (
            crate::env::LD_PRELOAD.into(),
            crate::ld_preload_with(existing_ld_preload, lib),
        ),
    ]
}

/// Write `data` to `path` through a temporary sibling, then rename. The temporary name holds
/// the pid and the time, so writers on several hosts sharing one directory never collide.
pub fn write_atomic(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("no file name"))?
        .to_string_lossy();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = path.with_file_name(format!(".{name}.tmp.{}.{nanos}", std::process::id()));
    let res = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(rank: u32, host: &str, to: &[(u32, u64, u64)]) -> RankRow {
        RankRow {
            rank,
            host: host.into(),
            seconds: 1.5,
            to: to
                .iter()
                .map(|&(d, p, c)| {
                    (
                        d,
                        Sent {
                            p2p_bytes: p,
                            p2p_msgs: u64::from(p > 0),
                            coll_bytes: c,
                            coll_msgs: u64::from(c > 0),
                        },
                    )
                })
                .collect(),
        }
    }

    #[test]
    fn rows_round_trip_through_the_wire_format() {
        let rows = vec![
            row(1, "node-with-a-long-name-17", &[(0, 100, 0), (2, 0, 8)]),
            row(0, "n", &[]),
            row(2, "", &[(1, 5, 5)]),
        ];
        let wire: Vec<u8> = rows.iter().flat_map(RankRow::encode).collect();
        assert_eq!(RankRow::decode_all(&wire).unwrap(), rows);
        assert!(RankRow::decode_all(&wire[..wire.len() - 8]).is_err());
        assert!(RankRow::decode_all(&wire[8..]).is_err());
        assert!(RankRow::decode_all(&wire[..5]).is_err());
    }

    #[test]
    fn counters_near_the_top_saturate_instead_of_wrapping() {
        let big = u64::MAX - 1;
        let job = JobRanks {
            n: 2,
            rows: vec![row(0, "a", &[(1, big, big)]), row(1, "b", &[(0, big, 0)])],
            mpi: String::new(),
            command: Vec::new(),
        };
        let t = job.totals();
        assert_eq!((t.p2p_bytes, t.coll_bytes), (u64::MAX, big));
        assert_eq!((t.p2p_inter_node, t.inter_node), (u64::MAX, u64::MAX));
        let d = std::env::temp_dir().join(format!("cmlb-ranks-big-{}", std::process::id()));
        job.write_dir(&d).unwrap();
        let csv = std::fs::read_to_string(d.join(COMM_CSV)).unwrap();
        assert_eq!(csv, format!("0,{m}\n{m},0\n", m = u64::MAX));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn fuzz_regression_an_entry_count_that_wraps_is_cut_short() {
        // fuzz/seeds/rank_rows/crash-60f674ea…: 5 × an entry count off the wire overflowed.
        let mut wire = row(0, "n", &[]).encode();
        let k = wire.len() - 8;
        wire[k..].copy_from_slice(&(u64::MAX / 5 + 2).to_le_bytes());
        assert_eq!(RankRow::decode_all(&wire).unwrap_err().0, "row cut short");
        let mut wire = row(0, "n", &[(1, 1, 0)]).encode();
        let d = wire.len() - 40;
        wire[d..d + 8].copy_from_slice(&(1u64 << 32).to_le_bytes());
        assert_eq!(
            RankRow::decode_all(&wire).unwrap_err().0,
            "destination 4294967296 is not a rank"
        );
        let mut wire = row(0, "n", &[]).encode();
        wire[8..16].copy_from_slice(&(1u64 << 32).to_le_bytes());
        assert_eq!(
            RankRow::decode_all(&wire).unwrap_err().0,
            "word 1 is not a rank: 4294967296"
        );
    }

    #[test]
    fn the_directory_holds_every_file_and_measured_inter_node_bytes() {
        let job = JobRanks {
            n: 3,
            rows: vec![
                row(0, "a", &[(1, 100, 0), (2, 10, 4)]),
                row(1, "a", &[(0, 100, 0)]),
                row(2, "b", &[(0, 10, 4)]),
            ],
            mpi: "Test MPI \"1\"".into(),
            command: vec!["./app".into(), "x y".into()],
        };
        let t = job.totals();
        assert_eq!((t.p2p_bytes, t.coll_bytes, t.hosts), (220, 8, 2));
        assert_eq!((t.p2p_inter_node, t.inter_node), (20, 28));
        let d = std::env::temp_dir().join(format!("cmlb-ranks-test-{}", std::process::id()));
        job.write_dir(&d).unwrap();
        let read = |f: &str| std::fs::read_to_string(d.join(f)).unwrap();
        assert!(read(COMM_EDGES).contains("\n0 1 100 1\n0 2 14 2\n1 0 100 1\n2 0 14 2\n"));
        assert!(read(P2P_EDGES).ends_with("\n0 1 100 1\n0 2 10 1\n1 0 100 1\n2 0 10 1\n"));
        assert_eq!(read(COMM_CSV), "0,200,28\n200,0,0\n28,0,0\n");
        assert_eq!(read(MESSAGES_CSV), "0,2,4\n2,0,0\n4,0,0\n");
        assert!(read(HOSTS).ends_with("0 a\n1 a\n2 b\n"));
        let y = read(SUMMARY);
        assert!(y.contains("mpi: \"Test MPI \\\"1\\\"\"\n"), "{y}");
        assert!(y.contains("command: [\"./app\", \"x y\"]\n"), "{y}");
        assert!(y.contains("measured_inter_node_bytes: 28\n"), "{y}");
        let leftovers: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".tmp."))
            .collect();
        assert!(leftovers.is_empty());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_missing_or_stray_row_is_refused_before_anything_is_written() {
        let mut job = JobRanks {
            n: 2,
            rows: vec![row(0, "a", &[(1, 1, 0)])],
            mpi: String::new(),
            command: Vec::new(),
        };
        assert_eq!(job.check().unwrap_err().0, "no row from rank 1");
        job.rows.push(row(1, "a", &[(5, 1, 0)]));
        assert_eq!(job.check().unwrap_err().0, "rank 1 sent to rank 5 of 2");
        let d = std::env::temp_dir().join(format!("cmlb-ranks-bad-{}", std::process::id()));
        assert!(job.write_dir(&d).is_err());
        assert!(!d.exists());
    }
}
