//! Mapping strategies, selectable by name.
//!
//! A strategy turns (communication matrix, load vector, restricted topology) into one PU per
//! thread. [`compute_plan`] runs one and attaches the metrics.

use crate::error::{MapError, Result};
use crate::matrix::CommMatrix;
use crate::metrics::{self, Metrics};
use crate::plan::{Assignment, Plan};
use crate::topology::Topology;

mod baseline;
mod cmlb;
mod common;
pub mod dagtm;
mod eagermap;
mod eigen;
mod pair_exchange;
pub mod qap;
mod refine;
pub mod spectral;

pub use refine::LOAD_TOLERANCE;

/// The strategy used when none is named (CLI, SPANK plugin): see `strategy/refine.rs` (`cmlb-refine`).
pub const DEFAULT: &str = "cmlb-refine";

/// What every strategy gets.
#[derive(Debug, Clone, Copy)]
pub struct MapInput<'a> {
    pub comm: &'a CommMatrix,
    /// One value per thread (all ones when the user gave no load).
    pub load: &'a [f64],
    pub topology: &'a Topology,
    /// Seed for randomised strategies; same seed, same plan.
    pub seed: u64,
}

/// A mapping strategy.
pub trait Strategy {
    /// The name users select it by.
    fn name(&self) -> &'static str;
    /// One line for `--help` and `cmlb map --list`.
    fn describe(&self) -> &'static str;
    /// Returns, for each thread, an index into `input.topology.pus`, or `None` if the strategy
    /// does not bind (e.g. `none`). Must be deterministic for a given input and seed.
    fn map(&self, input: &MapInput) -> Result<Option<Vec<usize>>>;
    /// A copy configured from `name:key=value,...` parameters (see [`Params`]). Strategies
    /// without parameters keep this default, which refuses any.
    fn configure(&self, params: &mut Params) -> Result<Box<dyn Strategy>> {
        Err(MapError::Strategy(format!(
            "'{}' takes no parameters (got '{}')",
            self.name(),
            params.text
        )))
    }
    /// A copy that uses the profile's raw-sample log, for strategies that work from access
    /// streams (`dagtm`); None (the default) when the strategy does not use one.
    fn with_samples(
        &self,
        _log: std::sync::Arc<crate::samples::SampleLog>,
    ) -> Option<Box<dyn Strategy>> {
        None
    }
    /// The parameter keys [`Strategy::configure`] accepts (empty: none).
    fn param_keys(&self) -> &'static [&'static str] {
        &[]
    }
}

/// A strategy name with its checked parameters: what `--strategy` and `strategy=` parse into,
/// once, where the user typed them; everything after that passes this value, never text.
///
/// Spelling: `NAME` or `NAME:key=value,key=value` (see [`Params`]); `none` is `identity`.
/// [`std::fmt::Display`] gives the canonical spelling, which parses back to the same spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrategySpec {
    name: &'static str,
    params: Vec<(String, String)>,
}

impl StrategySpec {
    /// Parse and check `NAME[:key=value,...]`: an unknown name, a malformed, unknown or
    /// out-of-range parameter is an error here, with the same words in every front end.
    pub fn parse(text: &str) -> Result<StrategySpec> {
        let (name, params) = match text.split_once(':') {
            Some((n, p)) => (n.trim(), Some(p)),
            None => (text.trim(), None),
        };
        let wanted = if name == "none" { "identity" } else { name };
        let s = all()
            .into_iter()
            .find(|s| s.name() == wanted)
            .ok_or_else(|| {
                MapError::Strategy(format!(
                    "unknown strategy '{name}'; choose one of: {}",
                    names().join(", ")
                ))
            })?;
        let params = match params {
            None => Vec::new(),
            Some(p) => {
                let parsed = Params::parse(s.name(), p)?;
                // Configure once now so every mistake is reported where it was typed.
                s.configure(&mut parsed.clone())?;
                parsed.pairs
            }
        };
        Ok(StrategySpec {
            name: s.name(),
            params,
        })
    }

    /// Creation order (`compact`): the placement a user has without cmlb, which every plan is
    /// measured against and falls back to.
    pub fn compact() -> StrategySpec {
        StrategySpec {
            name: "compact",
            params: Vec::new(),
        }
    }

    /// The strategy's registered name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The configured strategy.
    pub fn build(&self) -> Result<Box<dyn Strategy>> {
        let s = all()
            .into_iter()
            .find(|s| s.name() == self.name)
            .ok_or_else(|| MapError::Strategy(format!("unknown strategy '{}'", self.name)))?;
        if self.params.is_empty() {
            return Ok(s);
        }
        let mut p = Params {
            strategy: self.name.to_string(),
            text: self.params_text(),
            pairs: self.params.clone(),
        };
        s.configure(&mut p)
    }

    /// True when the strategy maps from the profile's raw-sample log (`dagtm`), so a
    /// pipeline must hand it `samples.csv` and tools comparing strategies on matrix-only
    /// inputs leave it out.
    pub fn wants_samples(&self) -> bool {
        self.build()
            .is_ok_and(|s| s.with_samples(std::sync::Arc::default()).is_some())
    }

    fn params_text(&self) -> String {
        let kv: Vec<String> = self
            .params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        kv.join(",")
    }
}

impl Default for StrategySpec {
    fn default() -> Self {
        StrategySpec {
            name: DEFAULT,
            params: Vec::new(),
        }
    }
}

impl std::fmt::Display for StrategySpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.params.is_empty() {
            f.write_str(self.name)
        } else {
            write!(f, "{}:{}", self.name, self.params_text())
        }
    }
}

impl std::str::FromStr for StrategySpec {
    type Err = MapError;
    fn from_str(s: &str) -> Result<Self> {
        StrategySpec::parse(s)
    }
}

/// Parameters given after a strategy name, as in `spectral:k=8,scheme=first-fit`.
/// A strategy takes the keys it knows with the `take_*` methods; [`Params::finish`] then
/// rejects whatever is left, so a misspelt key is an error instead of being ignored.
#[derive(Debug, Clone)]
pub struct Params {
    strategy: String,
    text: String,
    pairs: Vec<(String, String)>,
}

impl Params {
    /// Parse `key=value,key=value` for strategy `strategy`.
    pub fn parse(strategy: &str, text: &str) -> Result<Params> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        for item in text.split(',') {
            let item = item.trim();
            let (k, v) = item.split_once('=').ok_or_else(|| {
                MapError::Strategy(format!(
                    "'{strategy}': parameter '{item}' is not of the form key=value"
                ))
            })?;
            let (k, v) = (k.trim(), v.trim());
            if k.is_empty() || v.is_empty() {
                return Err(MapError::Strategy(format!(
                    "'{strategy}': parameter '{item}' has an empty key or value"
                )));
            }
            if pairs.iter().any(|(x, _)| x == k) {
                return Err(MapError::Strategy(format!(
                    "'{strategy}': parameter '{k}' is given twice"
                )));
            }
            pairs.push((k.to_string(), v.to_string()));
        }
        Ok(Params {
            strategy: strategy.to_string(),
            text: text.to_string(),
            pairs,
        })
    }

    fn bad(&self, key: &str, value: &str, want: &str) -> MapError {
        MapError::Strategy(format!(
            "'{}': parameter {key}={value} is invalid: {want}",
            self.strategy
        ))
    }

    /// Remove and return the raw value of `key`.
    pub fn take(&mut self, key: &str) -> Option<String> {
        let i = self.pairs.iter().position(|(k, _)| k == key)?;
        Some(self.pairs.remove(i).1)
    }

    /// An integer >= `min`.
    pub fn take_usize(&mut self, key: &str, min: usize) -> Result<Option<usize>> {
        self.take_parsed(
            key,
            |&x: &usize| x >= min,
            &format!("expected an integer >= {min}"),
        )
    }

    /// An integer in `min..=max` (an effort bound, so a typo cannot run for hours).
    pub fn take_usize_in(&mut self, key: &str, min: usize, max: usize) -> Result<Option<usize>> {
        let want = format!("expected an integer in {min}..={max}");
        self.take_parsed(key, |x: &usize| (min..=max).contains(x), &want)
    }

    /// A finite number >= 0.
    pub fn take_f64(&mut self, key: &str) -> Result<Option<f64>> {
        self.take_f64_where(key, |_| true, "expected a finite number >= 0")
    }

    /// A number in `0..=max`; `what` names it in the error (e.g. "a percentage").
    pub fn take_f64_up_to(&mut self, key: &str, max: f64, what: &str) -> Result<Option<f64>> {
        self.take_f64_where(key, |x| x <= max, &format!("expected {what}, 0..={max}"))
    }

    fn take_f64_where(
        &mut self,
        key: &str,
        ok: impl Fn(f64) -> bool,
        want: &str,
    ) -> Result<Option<f64>> {
        self.take_parsed(key, |&x: &f64| x.is_finite() && x >= 0.0 && ok(x), want)
    }

    /// The value of `key` parsed as `T` and accepted by `ok`; else an error saying `want`.
    fn take_parsed<T: std::str::FromStr>(
        &mut self,
        key: &str,
        ok: impl Fn(&T) -> bool,
        want: &str,
    ) -> Result<Option<T>> {
        match self.take(key) {
            None => Ok(None),
            Some(v) => match v.parse::<T>() {
                Ok(x) if ok(&x) => Ok(Some(x)),
                _ => Err(self.bad(key, &v, want)),
            },
        }
    }

    /// One of `choices`.
    pub fn take_choice(&mut self, key: &str, choices: &[&str]) -> Result<Option<String>> {
        match self.take(key) {
            None => Ok(None),
            Some(v) if choices.contains(&v.as_str()) => Ok(Some(v)),
            Some(v) => Err(self.bad(key, &v, &format!("expected one of {}", choices.join(", ")))),
        }
    }

    /// Fail on any parameter nobody took. `known` lists the accepted keys for the message.
    pub fn finish(&self, known: &[&str]) -> Result<()> {
        match self.pairs.first() {
            None => Ok(()),
            Some((k, _)) => Err(MapError::Strategy(format!(
                "'{}' has no parameter '{k}'; known parameters: {}",
                self.strategy,
                known.join(", ")
            ))),
        }
    }
}

/// Every strategy, in the order `--compare` prints them.
pub fn all() -> Vec<Box<dyn Strategy>> {
    vec![
        Box::new(refine::CmlbRefine::default()),
        Box::new(cmlb::Cmlb),
        Box::new(eagermap::EagerMap),
        Box::new(eagermap::EagerMapLb),
        Box::new(baseline::Compact),
        Box::new(baseline::Scatter),
        Box::new(baseline::Random),
        Box::new(baseline::Identity),
        Box::new(spectral::Spectral::default()),
        Box::new(pair_exchange::PairExchange::default()),
        Box::new(dagtm::Dagtm::default()),
    ]
}

/// Names of every strategy, for error messages and help.
pub fn names() -> Vec<&'static str> {
    all().iter().map(|s| s.name()).collect()
}

/// Look a strategy up by its spelling (`spectral:k=8,scheme=plain`, see [`StrategySpec`]);
/// for this module's tests, which exercise strategies directly.
#[cfg(test)]
pub(crate) fn by_name(spec: &str) -> Result<Box<dyn Strategy>> {
    StrategySpec::parse(spec)?.build()
}

/// Check the inputs agree with each other before any strategy sees them.
pub fn validate(input: &MapInput) -> Result<()> {
    if input.load.len() != input.comm.n() {
        return Err(MapError::input(
            "load vector",
            format!(
                "has {} values but the matrix has {} threads",
                input.load.len(),
                input.comm.n()
            ),
        ));
    }
    if let Some(i) = input.load.iter().position(|v| !v.is_finite() || *v < 0.0) {
        return Err(MapError::input(
            "load vector",
            format!(
                "value {} is {}: loads must be finite and >= 0",
                i + 1,
                input.load[i]
            ),
        ));
    }
    crate::matrix::check_sum("load vector", input.load)?;
    if input.topology.pus.is_empty() {
        return Err(MapError::Topology("no PUs to map onto".into()));
    }
    Ok(())
}

/// Run strategy `name` and build the plan with its metrics, for this module's tests (everyone
/// else plans through [`crate::plan`]).
#[cfg(test)]
pub(crate) fn compute_plan(name: &str, input: &MapInput) -> Result<Plan> {
    compute_plan_with(by_name(name)?.as_ref(), input)
}

/// Run an already configured strategy (e.g. one given a sample log with
/// [`Strategy::with_samples`]) and build the plan with its metrics; [`crate::plan`] is the
/// public way in.
pub(crate) fn compute_plan_with(s: &dyn Strategy, input: &MapInput) -> Result<Plan> {
    validate(input)?;
    let start = std::time::Instant::now();
    let pus = s.map(input)?;
    let mapping_ms = start.elapsed().as_secs_f64() * 1e3;
    let topo = input.topology;
    let (assignment, metrics) = match pus {
        None => (
            Vec::new(),
            Metrics {
                mapping_ms,
                ..Metrics::default()
            },
        ),
        Some(pus) => {
            if pus.len() != input.comm.n() || pus.iter().any(|&p| p >= topo.pus.len()) {
                return Err(MapError::Strategy(format!(
                    "strategy '{}' returned an invalid mapping",
                    s.name()
                )));
            }
            let assignment = pus
                .iter()
                .enumerate()
                .map(|(t, &p)| Assignment {
                    thread: t,
                    pu: topo.pus[p].os_index,
                    core: topo.pus[p].core,
                    numa: topo.pus[p].numa,
                })
                .collect();
            let m = Metrics {
                mapping_ms,
                ..metrics::compute(input.comm, input.load, topo, &pus)
            };
            (assignment, m)
        }
    };
    Ok(Plan {
        strategy: s.name().to_string(),
        topology: topo.summary_line(),
        assignment,
        metrics,
    })
}
