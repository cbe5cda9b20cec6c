//! `perf script` text import: no panic; an error names the file.
#![no_main]
use cmlb_fuzz::{assert_names, file};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let p = file("perf.txt", data);
    if let Err(e) = profiler::import::read_perf_script(&p) {
        assert_names(&e, &p);
    }
});
