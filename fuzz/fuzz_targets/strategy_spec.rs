//! The strategy spec `NAME[:key=value,...]`: no panic; round trip
//! `parse(spec.to_string()) == spec`; a parsed spec builds its strategy.
#![no_main]
use libfuzzer_sys::fuzz_target;
use mapper::StrategySpec;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(spec) = StrategySpec::parse(s) {
        let text = spec.to_string();
        let again = StrategySpec::parse(&text)
            .unwrap_or_else(|e| panic!("canonical spelling {text:?} of {s:?} does not parse: {e}"));
        assert_eq!(again, spec, "round trip of {s:?} via {text:?}");
        spec.build().expect("a parsed spec builds");
    }
});
