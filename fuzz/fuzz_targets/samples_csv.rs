//! samples.csv (the raw-sample log dagtm maps from): no panic; an error names the file;
//! a log that reads back, written with `write_samples_csv`, reads back equal.
#![no_main]
use cmlb_fuzz::{assert_names, file, scratch};
use libfuzzer_sys::fuzz_target;
use mapper::{read_samples_csv, write_samples_csv, LoggedSample};

fuzz_target!(|data: &[u8]| {
    let p = file("samples.csv", data);
    match read_samples_csv(&p) {
        Ok(log) => {
            // Rewrite per thread in order (the log keeps addresses per thread, in time order).
            let mut rows = Vec::new();
            for (t, addrs) in log.threads.iter().enumerate() {
                for (k, a) in addrs.iter().enumerate() {
                    rows.push(LoggedSample {
                        thread: t,
                        time_ns: k as u64,
                        addr: *a,
                    });
                }
            }
            let back = scratch().join("samples-back.csv");
            write_samples_csv(&back, &rows).expect("write samples.csv");
            let again = read_samples_csv(&back).expect("re-read samples.csv");
            assert_eq!(log.threads, again.threads, "samples.csv round trip");
        }
        Err(e) => assert_names(&e, &p),
    }
});
