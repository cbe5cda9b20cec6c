//! An hwloc XML topology file (`--topology FILE.xml`, plugstack `topology=`): nothing crashes
//! this process, hwloc included (it parses the file in a forked child, see
//! `mapper/src/topology/trial.rs`); an error names the file; a topology that loads has at
//! least one PU. The seeds include the file that crashed hwloc 2.9.0 in-process.
#![no_main]
use cmlb_fuzz::{assert_names, file};
use libfuzzer_sys::fuzz_target;
use mapper::Topology;

fuzz_target!(|data: &[u8]| {
    let p = file("topo.xml", data);
    match Topology::load(p.to_str().unwrap()) {
        Ok(t) => assert!(t.num_pus() > 0, "XML topology has no PU"),
        Err(e) => assert_names(&e, &p),
    }
});
