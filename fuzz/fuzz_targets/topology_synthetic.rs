//! The synthetic-topology string (`--topology`, plugstack `topology=`): no panic, no abort
//! inside hwloc; a topology that loads has at least one PU and NUMA node.
#![no_main]
use libfuzzer_sys::fuzz_target;
use mapper::Topology;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    // `live`, paths and `.xml` names select other sources (topology_xml covers XML).
    if s.trim() == "live" || s.contains('/') || s.trim_end().ends_with(".xml") || s.len() > 256 {
        return;
    }
    if let Ok(t) = Topology::from_synthetic(s) {
        assert!(t.num_pus() > 0, "synthetic topology {s:?} has no PU");
    }
});
