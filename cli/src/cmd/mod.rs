//! One module per subcommand.
pub mod bench;
pub mod doctor;
pub mod eval;
pub mod man;
pub mod map;
pub mod profile;
pub mod profile_import;
pub mod ranks;
pub mod report;
pub mod run;
pub mod topology;

/// `--strategy`'s value parser: the spec is parsed and checked once, where it was typed, with
/// the same words as `--cmlb-map=…:strategy=` (both are [`mapper::StrategySpec::parse`]).
pub(crate) fn parse_strategy(s: &str) -> Result<mapper::StrategySpec, String> {
    mapper::StrategySpec::parse(s).map_err(|e| e.to_string())
}

/// Longest time span any option accepts (about 3 years): beyond it `Instant` arithmetic would
/// overflow and panic, and no profiling window or pre-run is meant to be longer.
pub(crate) const MAX_SECS: f64 = 1e8;

/// `v` seconds as a Duration, for option `what`: positive, finite and at most [`MAX_SECS`].
pub(crate) fn positive_secs(v: f64, what: &str) -> anyhow::Result<std::time::Duration> {
    if !(v.is_finite() && v > 0.0) {
        anyhow::bail!("{what} must be a positive number of seconds, got {v}");
    }
    if v > MAX_SECS {
        anyhow::bail!("{what} must be at most {MAX_SECS:e} seconds (about 3 years), got {v:e}");
    }
    Ok(std::time::Duration::from_secs_f64(v))
}

#[cfg(test)]
mod tests {
    #[test]
    fn time_spans_are_bounded() {
        assert_eq!(
            super::positive_secs(1.5, "--time").unwrap(),
            std::time::Duration::from_millis(1500)
        );
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e19, 1e300] {
            let e = super::positive_secs(bad, "--time").unwrap_err().to_string();
            assert!(e.starts_with("--time must be"), "{bad}: {e}");
        }
    }
}
