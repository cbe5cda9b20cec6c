//! plugstack.conf arguments (whitespace-separated `key=value` words): no panic; an error is a
//! non-empty message; an accepted scratch template expands without panicking.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let words: Vec<&str> = s.split_whitespace().collect();
    match cmlb_slurm::options::parse_site(&words) {
        Ok(c) => {
            let _ = cmlb_slurm::scratch::expand_scratch(&c.scratch, "user", 42, "node1");
        }
        Err(e) => assert!(!e.trim().is_empty()),
    }
});
