//! The user's `--cmlb-map=MODE[:key=value,...]` (also `CMLB_MAP`) and the site's plugstack.conf
//! arguments. Pure parsing, so every message is unit-tested without Slurm.

use std::path::PathBuf;

/// What the plugin does for a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Off,
    Profile,
    Apply,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::Profile => "profile",
            Mode::Apply => "apply",
        }
    }
}

pub const MODES: &str = "profile, apply, off";

/// The `--cmlb-map` modes with their meaning: the plugin's `--help` text and `cmlb_spank(8)`.
pub const MODE_DOCS: [(&str, &str); 3] = [
    ("profile", "run each task under the profiler and save its profile in the scratch directory; MPI steps also record which rank sends how many bytes to which"),
    ("apply", "pin every task's threads from the plan (a one-task step without a profile is profiled briefly first); MPI ranks get their node's cores by the rank matrix, and an sbatch job's ranks their nodes"),
    ("off", "do nothing"),
];

/// The `--cmlb-map` keys with their meaning (same uses as [`MODE_DOCS`]).
pub const KEY_DOCS: [(&str, &str); 8] = [
    ("strategy=NAME[:key=value,...]", "mapping strategy and its parameters (cmlb map --list); after strategy=NAME:, key=value items belong to the strategy until a key of the option itself"),
    ("profile=PATH", "apply: use this profile directory instead of the scratch lookup"),
    ("name=NAME", "profile: keep the profile under this name in the scratch directory instead of a key made from the command line; apply: use the profile of that name (profile a short run, apply to the long one with other arguments)"),
    ("time=SECS", "apply: longest profiling pre-run (default 3); profile: sample only the first SECS seconds"),
    ("period=N", "sample period passed to cmlb profile --period"),
    ("bind=omp|preload|both", "how threads are placed: OpenMP variables, the pthread_create preload, or both (default)"),
    ("verbose", "log each task's thread-to-PU list; the preload logs every pinning"),
    ("dryrun", "compute, log and write the plans, bind nothing"),
];

/// The plugstack.conf arguments with their meaning (`cmlb_spank(8)`, the package's snippet).
pub const SITE_DOCS: [(&str, &str); 8] = [
    ("default=off|apply", "mode when the user gives neither --cmlb-map nor CMLB_MAP (default off)"),
    ("scratch=TEMPLATE", "where profiles are kept; %u user, %j job id, %n node, %% a percent sign (default /tmp/cmlb-%u)"),
    ("cmlb=PATH", "the cmlb binary (default: next to the plugin, then /usr/bin/cmlb, /usr/local/bin/cmlb)"),
    ("preload=PATH", "libcmlb_preload.so (default: next to the plugin)"),
    ("topology=FILE", "cached hwloc XML topology of the node (skips discovery)"),
    ("strict=0|1", "1: a missing or corrupt profile fails the step instead of running unpinned"),
    ("backend=NAME", "profiler backend passed to cmlb profile --backend (auto, hw, numa-faults, watch, faults)"),
    ("max_runs=N", "profile runs of one command merged into its profile, at most (older runs fade; default 8)"),
];

/// The one-paragraph usage of `--cmlb-map` that srun/sbatch `--help` print.
pub fn option_usage() -> String {
    let modes: Vec<String> = MODE_DOCS
        .iter()
        .map(|(m, d)| format!("{m} ({d})"))
        .collect();
    let keys: Vec<&str> = KEY_DOCS.iter().map(|(k, _)| *k).collect();
    format!(
        "Map threads to NUMA nodes with cmlb. MODE: {}. Keys: {}. Also CMLB_MAP. See cmlb_spank(8).",
        modes.join(", "),
        keys.join(", ")
    )
}
pub const KEYS: &str = "strategy=NAME[:key=value,...], profile=PATH, name=NAME, time=SECS, \
period=N, bind=omp|preload|both, verbose, dryrun";

/// The option's own keys. After `strategy=NAME:`, every following `key=value` whose key is not
/// one of these belongs to the strategy, so `apply:strategy=spectral:k=8,scheme=plain,time=2`
/// gives the strategy two parameters. No strategy parameter may be named like one of these
/// (a unit test checks every registered strategy).
pub const OPTION_KEYS: [&str; 8] = [
    "strategy", "profile", "name", "time", "period", "bind", "verbose", "dryrun",
];

pub use contract::BindMode;

/// A parsed `--cmlb-map` value.
#[derive(Debug, Clone, PartialEq)]
pub struct MapOpts {
    pub mode: Mode,
    pub strategy: Option<mapper::StrategySpec>,
    pub profile: Option<PathBuf>,
    /// `name=NAME`: the profile's name in the scratch directory, instead of the command's key.
    pub name: Option<String>,
    /// Profiling window of the pre-run (apply without a profile) in seconds.
    pub time: f64,
    /// `time=` was given: profile mode then stops sampling after `time` seconds too.
    pub time_set: bool,
    pub period: Option<u64>,
    pub bind: BindMode,
    pub verbose: bool,
    /// Compute and report the plan, bind nothing.
    pub dryrun: bool,
    /// The mode is the site's `default=` (the user gave neither `--cmlb-map` nor `CMLB_MAP`):
    /// apply then never pre-runs a program nobody asked to profile.
    pub from_site: bool,
}

/// Default profiling window of the apply pre-run.
pub const DEFAULT_PRERUN_SECS: f64 = 3.0;

impl MapOpts {
    pub fn off() -> Self {
        MapOpts {
            mode: Mode::Off,
            strategy: None,
            profile: None,
            name: None,
            time: DEFAULT_PRERUN_SECS,
            time_set: false,
            period: None,
            bind: BindMode::Both,
            verbose: false,
            dryrun: false,
            from_site: false,
        }
    }

    /// How a task runs under `cmlb profile`/`cmlb run` (the exec-wrap) for these options on
    /// this site: the site's backend, run count and strictness, the user's period, time,
    /// binding and strategy, and the site's topology (`live` by default). One place for the
    /// step's and the batch step's wraps.
    pub fn wrap_opts(&self, site: &SiteConf, cmlb: PathBuf) -> step::WrapOpts {
        step::WrapOpts {
            cmlb,
            backend: site.backend.clone(),
            period: self.period,
            duration: self.time_set.then_some(self.time),
            prerun_secs: self.time,
            // A profiling problem must not fail the user's job.
            run_anyway: !site.strict,
            max_runs: site.max_runs,
            bind: self.bind,
            topology: site.topology.clone().unwrap_or_else(|| "live".into()),
            strategy: self.strategy.clone().unwrap_or_default(),
        }
    }
}

/// Parse `MODE[:key=value,...]`. Errors name the bad part and the valid choices.
pub fn parse_map(value: &str) -> Result<MapOpts, String> {
    let value = value.trim();
    let (mode, rest) = match value.split_once(':') {
        Some((m, r)) => (m, Some(r)),
        None => (value, None),
    };
    let mut o = MapOpts::off();
    o.mode = match mode {
        "off" => Mode::Off,
        "profile" => Mode::Profile,
        "apply" => Mode::Apply,
        "" => return Err(format!("missing mode; choose one of: {MODES}")),
        m => return Err(format!("unknown mode '{m}'; choose one of: {MODES}")),
    };
    let Some(rest) = rest else { return Ok(o) };
    // Strategy parameters share the option's comma: gather them first (see OPTION_KEYS).
    let mut items: Vec<String> = Vec::new();
    let mut in_strategy = false;
    for kv in rest.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let key = kv.split_once('=').map_or(kv, |(k, _)| k).trim();
        if in_strategy && !OPTION_KEYS.contains(&key) {
            let last = items.last_mut().expect("strategy item pushed before");
            last.push(',');
            last.push_str(kv);
            continue;
        }
        in_strategy = key == "strategy" && kv.contains(':');
        items.push(kv.to_string());
    }
    for kv in &items {
        let kv = kv.as_str();
        let (k, v) = match kv.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (kv, None),
        };
        let need = |v: Option<&str>| -> Result<String, String> {
            match v {
                Some(v) if !v.is_empty() => Ok(v.to_string()),
                _ => Err(format!("key '{k}' needs a value ({k}=...)")),
            }
        };
        match k {
            "strategy" => {
                let s = need(v)?;
                o.strategy = Some(mapper::StrategySpec::parse(&s).map_err(|e| e.to_string())?);
            }
            "profile" => o.profile = Some(PathBuf::from(need(v)?)),
            "name" => o.name = Some(check_name(&need(v)?)?),
            "time" => {
                let s = need(v)?;
                let t: f64 = s
                    .parse()
                    .ok()
                    .filter(|t: &f64| t.is_finite() && *t > 0.0 && *t <= 86400.0)
                    .ok_or_else(|| format!("time={s} is not a number of seconds in (0, 86400]"))?;
                o.time = t;
                o.time_set = true;
            }
            "period" => {
                let s = need(v)?;
                let p: u64 = s
                    .parse()
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| format!("period={s} is not a positive integer"))?;
                o.period = Some(p);
            }
            "bind" => {
                let s = need(v)?;
                o.bind = BindMode::parse(&s).ok_or_else(|| {
                    format!("bind={s} is not valid; choose one of: omp, preload, both")
                })?;
            }
            "verbose" | "dryrun" => {
                let on = match v {
                    None | Some("1") | Some("yes") | Some("true") => true,
                    Some("0") | Some("no") | Some("false") => false,
                    Some(x) => return Err(format!("{k}={x}: use {k}, {k}=1 or {k}=0")),
                };
                if k == "verbose" {
                    o.verbose = on;
                } else {
                    o.dryrun = on;
                }
            }
            other => return Err(format!("unknown key '{other}'; valid keys: {KEYS}")),
        }
    }
    if o.mode == Mode::Off && rest.split(',').any(|s| !s.trim().is_empty()) {
        return Err("mode 'off' takes no keys".into());
    }
    if o.profile.is_some() && o.name.is_some() {
        return Err(
            "profile=PATH and name=NAME both say where the profile is: give one of them".into(),
        );
    }
    Ok(o)
}

/// Longest profile name.
pub const MAX_NAME: usize = 64;

/// A profile name becomes one directory in the scratch directory: letters, digits, `.`, `_`
/// and `-`, at most [`MAX_NAME`] of them, not starting with a dot (no hidden directories, no
/// `..`, no `/`).
pub fn check_name(name: &str) -> Result<String, String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(name.to_string())
    } else {
        Err(format!(
            "name={name} is not a profile name: use 1 to {MAX_NAME} letters, digits, '.', '_' \
             or '-', not starting with '.'"
        ))
    }
}

/// Everything an error message about the option needs to say.
pub fn usage_error(source: &str, value: &str, err: &str) -> String {
    format!("cmlb: invalid {source} value '{value}': {err} (syntax: MODE[:key=value,...])")
}

/// plugstack.conf arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct SiteConf {
    /// Mode when the user gave neither `--cmlb-map` nor `CMLB_MAP`.
    pub default: Mode,
    /// Scratch directory template (`%u` user, `%j` job id, `%n` node, `%%`).
    pub scratch: String,
    /// The `cmlb` binary (profiling, pre-runs). Default: next to the plugin, then `$PATH`.
    pub cmlb: Option<PathBuf>,
    /// The pthread_create-wrapping preload library. Default: next to the plugin.
    pub preload: Option<PathBuf>,
    /// Cached topology (hwloc XML or synthetic string) instead of discovering the node.
    pub topology: Option<String>,
    /// Fail the step instead of running unpinned when something is wrong.
    pub strict: bool,
    /// Profiler backend passed to `cmlb profile --backend`.
    pub backend: Option<String>,
    /// Profile runs of one command merged into its profile at most (`cmlb profile
    /// --max-runs`); default: cmlb's.
    pub max_runs: Option<u32>,
}

pub const DEFAULT_SCRATCH: &str = "/tmp/cmlb-%u";
pub const SITE_KEYS: &str =
    "default=off|apply, scratch=TEMPLATE, cmlb=PATH, preload=PATH, topology=FILE, strict=0|1, backend=NAME, \
max_runs=N";

impl Default for SiteConf {
    fn default() -> Self {
        SiteConf {
            default: Mode::Off,
            scratch: DEFAULT_SCRATCH.into(),
            cmlb: None,
            preload: None,
            topology: None,
            strict: false,
            backend: None,
            max_runs: None,
        }
    }
}

/// Parse the plugstack.conf arguments (`key=value` words).
pub fn parse_site<S: AsRef<str>>(args: &[S]) -> Result<SiteConf, String> {
    let mut c = SiteConf::default();
    for a in args {
        let a = a.as_ref();
        let (k, v) = a.split_once('=').ok_or_else(|| {
            format!("plugstack.conf argument '{a}' is not key=value; keys: {SITE_KEYS}")
        })?;
        if v.is_empty() {
            return Err(format!("plugstack.conf argument '{k}=' needs a value"));
        }
        match k {
            "default" => {
                c.default = match v {
                    "off" => Mode::Off,
                    "apply" => Mode::Apply,
                    _ => return Err(format!("default={v} is not valid; choose off or apply")),
                }
            }
            "scratch" => {
                if !v.starts_with('/') {
                    return Err(format!("scratch={v} must be an absolute path template"));
                }
                c.scratch = v.to_string();
            }
            "cmlb" => c.cmlb = Some(PathBuf::from(v)),
            "preload" => c.preload = Some(PathBuf::from(v)),
            "topology" => c.topology = Some(v.to_string()),
            "strict" => {
                c.strict = match v {
                    "0" | "no" | "false" => false,
                    "1" | "yes" | "true" => true,
                    _ => return Err(format!("strict={v} is not valid; use 0 or 1")),
                }
            }
            "backend" => {
                // The names `cmlb profile --backend` takes: a typo here would otherwise make
                // every pre-run's cmlb reject its command line.
                const BACKENDS: [&str; 5] = ["auto", "hw", "numa-faults", "watch", "faults"];
                if !BACKENDS.contains(&v) {
                    return Err(format!(
                        "backend={v} is not valid; choose one of {}",
                        BACKENDS.join(", ")
                    ));
                }
                c.backend = Some(v.to_string())
            }
            "max_runs" => {
                c.max_runs = Some(
                    v.parse::<u32>()
                        .ok()
                        .filter(|n| (1..=1000).contains(n))
                        .ok_or_else(|| {
                            format!("max_runs={v} is not a number of runs in 1..=1000")
                        })?,
                )
            }
            _ => {
                return Err(format!(
                    "unknown plugstack.conf argument '{k}'; keys: {SITE_KEYS}"
                ))
            }
        }
    }
    Ok(c)
}

pub use step::binding::profile_key;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_names_are_one_plain_directory() {
        let o = parse_map("profile:name=solver-short.v2").unwrap();
        assert_eq!(o.name.as_deref(), Some("solver-short.v2"));
        assert_eq!(
            parse_map("apply:name=solver,verbose")
                .unwrap()
                .name
                .as_deref(),
            Some("solver")
        );
        for bad in ["../x", ".hidden", "a/b", "sp ace", &"x".repeat(65)] {
            let e = parse_map(&format!("apply:name={bad}")).unwrap_err();
            assert!(e.contains("is not a profile name"), "{bad}: {e}");
        }
        let e = parse_map("apply:name=a,profile=/p").unwrap_err();
        assert!(e.contains("give one of them"), "{e}");
        // A strategy parameter list ends at name=, one of the option's own keys.
        let o = parse_map("apply:strategy=spectral:k=2,name=run1").unwrap();
        assert_eq!(o.name.as_deref(), Some("run1"));
    }

    #[test]
    fn modes_and_keys() {
        assert_eq!(parse_map("off").unwrap().mode, Mode::Off);
        assert_eq!(parse_map("profile").unwrap().mode, Mode::Profile);
        let o = parse_map("apply:strategy=compact,profile=/p,time=2.5,bind=omp,verbose,dryrun")
            .unwrap();
        assert_eq!(o.mode, Mode::Apply);
        assert_eq!(o.strategy.unwrap().to_string(), "compact");
        assert_eq!(o.profile, Some(PathBuf::from("/p")));
        assert_eq!(o.time, 2.5);
        assert_eq!(o.bind, BindMode::Omp);
        assert!(o.verbose && o.dryrun);
        assert_eq!(parse_map("profile:period=500").unwrap().period, Some(500));
        assert_eq!(parse_map("apply").unwrap().time, DEFAULT_PRERUN_SECS);
        assert!(!parse_map("profile").unwrap().time_set);
        assert!(parse_map("profile:time=1").unwrap().time_set);
        // A strategy with one parameter of its own.
        let o = parse_map("apply:strategy=cmlb-refine:spare=count,verbose").unwrap();
        assert_eq!(o.strategy.unwrap().to_string(), "cmlb-refine:spare=count");
        assert!(o.verbose);
        // Several: they run until the next key of the option itself.
        let o =
            parse_map("apply:bind=omp,strategy=spectral:k=2,scheme=plain,refine=0,time=2").unwrap();
        assert_eq!(
            o.strategy.unwrap().to_string(),
            "spectral:k=2,scheme=plain,refine=0"
        );
        assert_eq!((o.time, o.bind), (2.0, BindMode::Omp));
        let o = parse_map("apply:strategy=cmlb-refine:spare=count,anneal=0").unwrap();
        assert_eq!(
            o.strategy.unwrap().to_string(),
            "cmlb-refine:spare=count,anneal=0"
        );
    }

    #[test]
    fn bad_values_name_the_choices() {
        let e = parse_map("aply").unwrap_err();
        assert!(
            e.contains("'aply'") && e.contains("profile, apply, off"),
            "{e}"
        );
        let e = parse_map("").unwrap_err();
        assert!(e.contains("missing mode"), "{e}");
        let e = parse_map("apply:strategy=nosuch").unwrap_err();
        assert!(e.contains("nosuch") && e.contains("compact"), "{e}");
        // The same words as `cmlb map --strategy` (both are StrategySpec::parse).
        for bad in [
            "nosuch",
            "spectral:k=0",
            "spectral:k=2,colour=red",
            "compact:x=1",
        ] {
            let e = parse_map(&format!("apply:strategy={bad},verbose")).unwrap_err();
            assert_eq!(e, mapper::StrategySpec::parse(bad).unwrap_err().to_string());
        }
        let e = parse_map("apply:time=-1").unwrap_err();
        assert!(e.contains("time=-1"), "{e}");
        let e = parse_map("apply:time").unwrap_err();
        assert!(e.contains("needs a value"), "{e}");
        let e = parse_map("apply:bind=all").unwrap_err();
        assert!(e.contains("omp, preload, both"), "{e}");
        let e = parse_map("apply:colour=red").unwrap_err();
        assert!(e.contains("'colour'") && e.contains("strategy="), "{e}");
        let e = parse_map("profile:period=0").unwrap_err();
        assert!(e.contains("period=0"), "{e}");
        let e = parse_map("off:verbose").unwrap_err();
        assert!(e.contains("takes no keys"), "{e}");
        let e = usage_error("--cmlb-map", "x", "bad");
        assert!(
            e.contains("--cmlb-map") && e.contains("MODE[:key=value"),
            "{e}"
        );
    }

    #[test]
    fn no_strategy_parameter_is_named_like_an_option_key() {
        for s in mapper::strategies() {
            for k in s.param_keys() {
                assert!(!OPTION_KEYS.contains(k), "{}: parameter {k}", s.name());
            }
        }
    }

    #[test]
    fn documented_keys_are_the_parsed_keys() {
        // Every documented option key is one the parser knows, and vice versa.
        let doc: Vec<&str> = KEY_DOCS
            .iter()
            .map(|(k, _)| k.split(['=', '[']).next().unwrap())
            .collect();
        assert_eq!(doc, OPTION_KEYS);
        for (k, _) in SITE_DOCS {
            let key = k.split('=').next().unwrap();
            assert!(
                SITE_KEYS.contains(&format!("{key}=")),
                "{key} not in SITE_KEYS"
            );
        }
        assert!(option_usage().contains("strategy=NAME[:key=value,...]"));
    }

    #[test]
    fn site_args() {
        let c = parse_site(&[
            "default=apply",
            "scratch=/scratch/%u/%j",
            "cmlb=/opt/cmlb",
            "topology=/etc/topo.xml",
            "strict=1",
            "backend=faults",
        ])
        .unwrap();
        assert_eq!(c.default, Mode::Apply);
        assert_eq!(c.scratch, "/scratch/%u/%j");
        assert_eq!(c.cmlb, Some(PathBuf::from("/opt/cmlb")));
        assert!(c.strict);
        assert_eq!(parse_site::<&str>(&[]).unwrap(), SiteConf::default());
        for (bad, want) in [
            ("default=profile", "off or apply"),
            ("scratch=rel/%u", "absolute"),
            ("strict=maybe", "0 or 1"),
            (
                "backend=pebs",
                "backend=pebs is not valid; choose one of auto, hw",
            ),
            ("flavour=x", "unknown plugstack.conf argument 'flavour'"),
            ("justaword", "not key=value"),
            ("cmlb=", "needs a value"),
        ] {
            let e = parse_site(&[bad]).unwrap_err();
            assert!(e.contains(want), "{bad}: {e}");
        }
    }
}
