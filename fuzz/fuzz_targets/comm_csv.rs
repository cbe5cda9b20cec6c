//! comm.csv in both row orders (plain, EagerMap's reversed rows), BOM, trailing commas:
//! no panic; an error names the file; what reads back, written in the same order, reads back equal.
#![no_main]
use cmlb_fuzz::{assert_names, file};
use libfuzzer_sys::fuzz_target;
use mapper::{read_comm_csv, write_comm_csv};

fuzz_target!(|data: &[u8]| {
    let p = file("comm.csv", data);
    for eagermap in [false, true] {
        match read_comm_csv(&p, eagermap) {
            Ok(m) => {
                let back = cmlb_fuzz::scratch().join("comm-back.csv");
                write_comm_csv(&back, &m, eagermap).expect("write comm.csv");
                let again = read_comm_csv(&back, eagermap).expect("re-read written comm.csv");
                assert_eq!(m, again, "comm.csv round trip (eagermap order: {eagermap})");
            }
            Err(e) => assert_names(&e, &p),
        }
    }
});
