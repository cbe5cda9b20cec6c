//! load.csv: no panic; an error names the file; a vector read back, written one value a line
//! (as `Profile::write_dir` does), reads back equal.
#![no_main]
use cmlb_fuzz::{assert_names, file};
use libfuzzer_sys::fuzz_target;
use mapper::{parse_numeric_csv, read_load_csv};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        // The in-memory table parser behind both CSV readers: rows of finite values >= 0.
        if let Ok(rows) = parse_numeric_csv("t", text) {
            assert!(rows.iter().flatten().all(|v| v.is_finite() && *v >= 0.0));
        }
    }
    let p = file("load.csv", data);
    match read_load_csv(&p) {
        Ok(v) => {
            assert!(!v.is_empty());
            let text: String = v.iter().map(|x| format!("{x}\n")).collect();
            let back = file("load-back.csv", text.as_bytes());
            assert_eq!(read_load_csv(&back).expect("re-read load.csv"), v);
        }
        Err(e) => assert_names(&e, &p),
    }
});
