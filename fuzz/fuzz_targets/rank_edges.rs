//! A rank edge list (`comm.edges`, `cmlb ranks --comm`) through `read_edges`, with the rank
//! count taken from the edges and, from the first byte, given as the job's: no panic; an error
//! names the file; a graph that reads back, written with `write_edges`, reads back equal.
#![no_main]
use cmlb_fuzz::{assert_names, file, scratch};
use libfuzzer_sys::fuzz_target;
use mapper::ranks::{read_edges, write_edges};

fuzz_target!(|data: &[u8]| {
    let p = file("comm.edges", data);
    let given = data.first().map(|&b| usize::from(b) + 1);
    for n in [None, given] {
        match read_edges(&p, n) {
            Ok(g) => {
                if let Some(n) = n {
                    assert_eq!(g.n(), n, "the job's rank count");
                }
                let back = scratch().join("back.edges");
                write_edges(&g, &back).expect("write_edges of a graph that was read");
                let again = read_edges(&back, Some(g.n())).expect("re-read written edges");
                assert_eq!(g, again, "edge list round trip");
            }
            Err(e) => assert_names(&e, &p),
        }
    }
});
