//! A whole profile directory (profile.yaml, comm.csv, load.csv, timeline.csv from one input,
//! split at `\0--\0`): no panic; an error names a file of the directory; a profile that reads
//! back, written with `write_dir`, reads back equal.
#![no_main]
use cmlb_fuzz::{assert_names, scratch, split};
use libfuzzer_sys::fuzz_target;
use profile::Profile;

fuzz_target!(|data: &[u8]| {
    let parts = split(data, 4);
    let dir = scratch().join("profile");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, bytes) in ["profile.yaml", "comm.csv", "load.csv", "timeline.csv"]
        .iter()
        .zip(&parts)
    {
        // An empty timeline part means "no timeline.csv" (it is optional).
        if *name == "timeline.csv" && bytes.is_empty() {
            continue;
        }
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    match Profile::read_dir(&dir) {
        Ok(p) => {
            let out = scratch().join("profile-back");
            let _ = std::fs::remove_dir_all(&out);
            p.write_dir(&out)
                .expect("write_dir of a profile that was read");
            let back = Profile::read_dir(&out).expect("re-read a written profile");
            assert_eq!(p, back, "profile round trip");
        }
        Err(e) => assert_names(&e, &dir),
    }
});
