//! timeline.csv inside an otherwise valid 2-thread profile: no panic; an error names
//! timeline.csv; a timeline read back is finite, >= 0, and survives write_dir → read_dir.
#![no_main]
use cmlb_fuzz::{assert_names, scratch};
use libfuzzer_sys::fuzz_target;
use profile::Profile;

const YAML: &str = "schema: 1\ncommand: [app]\nbackend: page-faults\nthreads:\n- {index: 0, tid: 10}\n- {index: 1, tid: 11}\n";

fuzz_target!(|data: &[u8]| {
    let dir = scratch().join("tl");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("profile.yaml"), YAML).unwrap();
    std::fs::write(dir.join("comm.csv"), "0,1\n1,0\n").unwrap();
    std::fs::write(dir.join("load.csv"), "1\n1\n").unwrap();
    let tl = dir.join("timeline.csv");
    std::fs::write(&tl, data).unwrap();
    match Profile::read_dir(&dir) {
        Ok(p) => {
            let fine = |v: f64| v.is_finite() && v >= 0.0;
            assert!(p
                .timeline
                .iter()
                .all(|r| fine(r.t_ms) && fine(r.samples) && fine(r.smoothed)));
            let out = scratch().join("tl-back");
            let _ = std::fs::remove_dir_all(&out);
            p.write_dir(&out).expect("write_dir");
            assert_eq!(
                Profile::read_dir(&out).expect("re-read").timeline,
                p.timeline
            );
        }
        Err(e) => assert_names(&e, &tl),
    }
});
