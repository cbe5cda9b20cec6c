//! The MPI tracer's rank rows (`contract::ranks`): the wire format every rank sends at
//! `MPI_Finalize` (`RankRow::decode_all`), then the ranks directory the first rank of each host
//! writes from them (`JobRanks::write_dir`) and the launchers read (`read_ranks_dir`).
//! Input: wire bytes, `\0--\0`, the MPI library line, `\0--\0`, the command's arguments
//! separated by NUL (as in /proc/self/cmdline).
//! Checks: no panic; rows that decode encode back to the same bytes (less the all-zero entries
//! `encode` leaves out); when they make a whole job (one row per rank), the directory written
//! reads back with the same rank count, hosts, MPI line, command, totals and graph.
#![no_main]
use cmlb_fuzz::{scratch, split};
use contract::ranks::{JobRanks, RankRow};
use libfuzzer_sys::fuzz_target;
use profile::ranks::read_ranks_dir;
use mapper::ranks::RankGraph;

fuzz_target!(|data: &[u8]| {
    let parts = split(data, 3);
    let Ok(rows) = RankRow::decode_all(parts[0]) else {
        return;
    };
    let wire: Vec<u8> = rows.iter().flat_map(RankRow::encode).collect();
    let again = RankRow::decode_all(&wire).expect("decode what encode wrote");
    let rewire: Vec<u8> = again.iter().flat_map(RankRow::encode).collect();
    assert_eq!(wire, rewire, "rank rows: encode → decode → encode");

    let mut rows = rows;
    for r in &mut rows {
        // What the tracer can send: a gethostname result ("?" when it fails) and an
        // MPI_Wtime difference. Anything else is not a host or a duration it can produce.
        if r.host.is_empty() || r.host.chars().any(|c| c.is_whitespace() || c.is_control()) {
            r.host = "?".into();
        }
        if !r.seconds.is_finite() || r.seconds < 0.0 {
            r.seconds = 0.0;
        }
    }
    let job = JobRanks {
        n: rows.len(),
        rows,
        mpi: String::from_utf8_lossy(parts[1]).into_owned(),
        command: parts[2]
            .split(|&b| b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
    };
    if job.n == 0 || job.check().is_err() {
        return;
    }
    let dir = scratch().join("ranks");
    let _ = std::fs::remove_dir_all(&dir);
    job.write_dir(&dir).expect("write_dir of a checked job");
    let p = read_ranks_dir(&dir).expect("read the ranks directory the tracer wrote");
    let t = job.totals();
    assert_eq!(p.meta.ranks, job.n);
    assert_eq!(p.meta.hosts, t.hosts);
    assert_eq!(p.meta.mpi, job.mpi, "ranks.yaml mpi");
    assert_eq!(p.meta.command, job.command, "ranks.yaml command");
    assert_eq!(
        (
            p.meta.p2p_bytes,
            p.meta.collective_bytes,
            p.meta.measured_inter_node_p2p_bytes,
            p.meta.measured_inter_node_bytes
        ),
        (t.p2p_bytes, t.coll_bytes, t.p2p_inter_node, t.inter_node),
        "ranks.yaml totals"
    );
    let hosts: Vec<&str> = p.hosts.iter().map(String::as_str).collect();
    assert_eq!(hosts, job.hosts(), "hosts.txt");
    // comm.edges lists rows by rank, each in its own order: the same edges in the same order
    // give the same sums.
    let mut by_rank: Vec<&RankRow> = job.rows.iter().collect();
    by_rank.sort_by_key(|r| r.rank);
    let mut edges = Vec::new();
    for r in by_rank {
        for (d, s) in &r.to {
            if s.bytes() > 0 || s.msgs() > 0 {
                edges.push((
                    r.rank as usize,
                    *d as usize,
                    s.bytes() as f64,
                    s.msgs() as f64,
                ));
            }
        }
    }
    // Edge weights pass through text as u64 and are summed as f64 in that order, here too:
    // the graphs are equal, not just close.
    if let Ok(g) = RankGraph::from_edges(job.n, &edges) {
        assert_eq!(p.graph, g, "comm.edges");
    }
});
