//! The import CSV `tid,time_ns,addr,kind[,dram]`: no panic; an error names the file.
#![no_main]
use cmlb_fuzz::{assert_names, file};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let p = file("trace.csv", data);
    if let Err(e) = profiler::import::read_csv(&p) {
        assert_names(&e, &p);
    }
});
