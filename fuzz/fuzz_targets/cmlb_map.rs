//! The `--cmlb-map` / `CMLB_MAP` grammar: no panic; an error is a non-empty message; a value
//! that parses keeps its strategy canonical (the spec's own spelling parses back equal) and its
//! times finite and positive.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    match cmlb_slurm::options::parse_map(s) {
        Ok(o) => {
            assert!(
                o.time.is_finite() && o.time > 0.0,
                "time {} accepted from {s:?}",
                o.time
            );
            if let Some(spec) = &o.strategy {
                let again = mapper::StrategySpec::parse(&spec.to_string()).expect("canonical spec");
                assert_eq!(&again, spec);
            }
        }
        Err(e) => assert!(!e.trim().is_empty()),
    }
});
