//! A whole `ranks/` directory as the plugin's batch placement and `cmlb` read it
//! (`read_ranks_dir`): ranks.yaml, comm.edges and hosts.txt from one input split at `\0--\0`
//! (no hosts.txt when the input has no second separator). No panic; an error names a file of
//! the directory; what reads has one host slot per rank (or none) and a graph of that many ranks.
#![no_main]
use cmlb_fuzz::{assert_names, scratch};
use libfuzzer_sys::fuzz_target;
use profile::ranks::read_ranks_dir;

const SEP: &[u8] = b"\0--\0";

fuzz_target!(|data: &[u8]| {
    let parts = cmlb_fuzz::split(data, 3);
    let has_hosts = data.windows(SEP.len()).filter(|w| *w == SEP).count() >= 2;
    let dir = scratch().join("ranks");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("ranks.yaml"), parts[0]).unwrap();
    std::fs::write(dir.join("comm.edges"), parts[1]).unwrap();
    if has_hosts {
        std::fs::write(dir.join("hosts.txt"), parts[2]).unwrap();
    }
    match read_ranks_dir(&dir) {
        Ok(p) => {
            assert_eq!(p.graph.n(), p.meta.ranks, "graph of the job's ranks");
            assert!(
                p.hosts.is_empty() || p.hosts.len() == p.meta.ranks,
                "{} hosts for {} ranks",
                p.hosts.len(),
                p.meta.ranks
            );
            assert_eq!(p.hosts.is_empty(), !has_hosts, "hosts.txt read iff present");
        }
        Err(e) => assert_names(&e, &dir),
    }
});
