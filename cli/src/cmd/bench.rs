//! `cmlb bench`: "is my program faster with it?" — the program run under each placement
//! (what the user has without cmlb, `compact`, `scatter`, the cmlb plan), interleaved, its wall
//! time compared as a ratio with a 95 % interval from an exact rank test.

use anyhow::{bail, Context, Result};
use clap::Args as ClapArgs;
use mapper::format_cpu_list;
use mapper::StrategySpec;
use std::ffi::CString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::run;
use crate::stats::{self, Comparison};

/// The placement that is what the user had without cmlb: the OS schedules the threads.
const UNPINNED: &str = "unpinned";
/// The placement `cmlb run` would use (its `--strategy`, behind the guard).
const PLAN: &str = "cmlb";
/// Under `--slurm`: the step as Slurm places it (`--cmlb-map=off`).
const SLURM: &str = "slurm";
/// Under `--slurm` for multi-node steps: Slurm's task distributions, without cmlb.
const DISTRIBUTIONS: [&str; 2] = ["block", "cyclic"];
/// Relative width (hi/lo - 1) of the main interval above which more rounds are run.
const WIDE: f64 = 0.10;

#[derive(ClapArgs)]
#[command(
    about = "Time a program under several placements, interleaved, and say whether cmlb's plan \
is faster",
    long_about = "Runs COMMAND under each placement of --placements, one run of each per round, \
the order rotated every round (A B C, B C A, C A B, ...) so that a drift of the machine falls \
on all of them alike, for --runs rounds (more, up to --max-runs, while the interval of the \
main comparison is wider than 10 %). An untimed warm-up run comes first.\n\n\
Placements: `unpinned` (no CPU mask, no preload: what the user has without cmlb), `cmlb` (the \
plan `cmlb run` makes with --strategy, behind its guard: when the profile cannot support a \
plan it is creation order, and the summary line says so), or any strategy name of \
`cmlb map --list` (e.g. compact, scatter). The profile comes as for `cmlb run`: --profile DIR, \
the cached profile of this command, or a profiling pre-run (untimed).\n\n\
Per placement it reports the median wall time, user+sys CPU time, context switches and page \
faults of the program (from wait4), and on kernels with NUMA balancing the share of the \
kernel's sampled accesses that were local (numa_hint_faults_local / numa_hint_faults, \
/proc/vmstat, machine-wide during the run). Each placement's wall time is compared with \
--baseline's as a ratio (Hodges-Lehmann estimate: the median of all run-time ratios) with a \
95 % confidence interval from the exact Mann-Whitney rank test; an interval that holds 1 is \
\"no significant difference\". The last line is the verdict for `cmlb` (or the last \
placement) against the baseline.\n\n\
Under Slurm (--slurm, inside salloc or sbatch): every run is an srun step of the allocation, \
`srun [--srun ARGS] --cmlb-map=... COMMAND`. Placements: `slurm` (--cmlb-map=off: the step \
as Slurm binds it; the default baseline), `unpinned` (--cpu-bind=none, off), `cmlb` \
(--cmlb-map=apply), a strategy name (apply:strategy=NAME), and `block`/`cyclic` \
(--distribution=..., off) for multi-node steps. A profiling step (--cmlb-map=profile, \
untimed) comes first unless --no-profile-run. The CPU and fault columns are srun's own, so \
they are left out.\n\n\
Every run is written to OUT/bench.csv as it ends (rewritten whole, never half-written). If \
COMMAND fails under a placement, cmlb bench says which, shows the end of its stderr and stops \
with exit status 1; the runs done so far stay in the CSV. COMMAND's output is discarded \
(stderr of the latest run is kept in OUT/run.stderr) unless --show-output; its stdin is \
/dev/null.",
    after_help = "Examples:\n  cmlb bench -- ./app 8\n  cmlb bench --runs 9 --placements \
unpinned,compact,cmlb -- ./solver input.dat\n  cmlb bench --profile prof --baseline compact -- ./app\n  \
salloc -N1 -c8 cmlb bench --slurm --srun \"-n1 -c8\" -- ./app 8\n  \
salloc -N2 -n8 cmlb bench --slurm --placements block,cyclic,cmlb -- ./mpi_app"
)]
pub struct Args {
    /// Timed runs of each placement (at least 4: fewer cannot give a 95 % interval).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(4..=1000))]
    pub runs: u32,
    /// Most runs of each placement when the main interval is wide (default: twice --runs).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(4..=1000))]
    pub max_runs: Option<u32>,
    /// Placements to compare, comma-separated: unpinned, cmlb, or strategy names; with
    /// --slurm also slurm, block, cyclic. Default: unpinned,compact,scatter,cmlb (--slurm:
    /// slurm,cmlb).
    #[arg(long, value_delimiter = ',', value_parser = parse_placement)]
    pub placements: Option<Vec<String>>,
    /// The placement every other one is compared with (default: unpinned; --slurm: slurm).
    #[arg(long, value_parser = parse_placement)]
    pub baseline: Option<String>,
    /// Run every placement as an srun step of the current allocation (salloc/sbatch).
    #[arg(long)]
    pub slurm: bool,
    /// With --slurm: srun's own options for every step, as one string split at spaces (e.g.
    /// "-n4 -c2"); --cmlb-map and the placement's options are added.
    #[arg(
        long,
        value_name = "ARGS",
        requires = "slurm",
        allow_hyphen_values = true
    )]
    pub srun: Option<String>,
    /// With --slurm: no profiling step first (a profile of this step already exists).
    #[arg(long, requires = "slurm")]
    pub no_profile_run: bool,
    /// Untimed runs before the first round (page cache, CPU frequency).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub warmup: u32,
    /// Directory for bench.csv and run.stderr (created if missing).
    #[arg(long, default_value = "cmlb-bench", value_name = "DIR")]
    pub out: PathBuf,
    /// Let COMMAND's stdout and stderr through instead of discarding them.
    #[arg(long)]
    pub show_output: bool,
    /// How the `cmlb` placement (and each strategy named in --placements) is planned and
    /// pinned: as `cmlb run` would.
    #[command(flatten)]
    pub placing: run::Placing,
    /// The program and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

fn parse_placement(s: &str) -> Result<String, String> {
    let s = s.trim();
    if s == UNPINNED
        || s == PLAN
        || s == SLURM
        || DISTRIBUTIONS.contains(&s)
        || mapper::strategy_names().contains(&s)
    {
        return Ok(s.to_string());
    }
    Err(format!(
        "unknown placement '{s}' (expected {UNPINNED}, {PLAN}, a strategy: {}; with --slurm \
         also {SLURM}, {})",
        mapper::strategy_names().join(", "),
        DISTRIBUTIONS.join(", ")
    ))
}

/// Placements that only an srun step can make.
fn slurm_only(name: &str) -> bool {
    name == SLURM || DISTRIBUTIONS.contains(&name)
}

/// One placement: its name and what each run of it gets (CPU mask and environment), `None`
/// for a run as the user would start it.
struct Placement {
    name: String,
    launch: Option<run::Launch>,
    /// Under --slurm: the whole command line of a run (srun first).
    argv: Option<Vec<String>>,
    /// Why a placement other than `unpinned` runs unpinned (no plan could be made).
    note: Option<String>,
    /// Variables left out of the run's environment (under --slurm: the rank hostfile of an
    /// `sbatch --cmlb-map=apply` job, for the placements that show Slurm's own).
    unset: Vec<&'static str>,
}

/// What one run of the program measured.
#[derive(Clone, Debug)]
pub struct Sample {
    pub round: u32,
    pub placement: String,
    pub wall_s: f64,
    pub user_s: f64,
    pub sys_s: f64,
    pub max_rss_kib: i64,
    pub minor_faults: i64,
    pub major_faults: i64,
    pub voluntary_cs: i64,
    pub involuntary_cs: i64,
    /// /proc/vmstat deltas over the run (machine-wide; 0 without NUMA balancing).
    pub hint_faults: u64,
    pub hint_faults_local: u64,
    /// CPU migrations of the program's threads (a software perf counter inherited by the run);
    /// `None` where the kernel does not let this user count them (perf_event_paranoid 2 without
    /// CAP_PERFMON) and in CSVs of older versions.
    pub migrations: Option<u64>,
    /// Pages allocated on each NUMA node during the run (`numa_hit` deltas of
    /// /sys/devices/system/node/node*/numastat, machine-wide), in node order; empty in CSVs of
    /// older versions.
    pub node_pages: Vec<u64>,
}

pub fn run(a: Args) -> Result<()> {
    super::positive_secs(a.placing.time, "--time")?;
    let given = a.placements.clone().unwrap_or_else(|| {
        let d: &[&str] = if a.slurm {
            &[SLURM, PLAN]
        } else {
            &[UNPINNED, "compact", "scatter", PLAN]
        };
        d.iter().map(|s| s.to_string()).collect()
    });
    let baseline = a
        .baseline
        .clone()
        .unwrap_or_else(|| if a.slurm { SLURM } else { UNPINNED }.to_string());
    let mut names: Vec<String> = Vec::new();
    for p in &given {
        if names.contains(p) {
            bail!("--placements names {p} twice");
        }
        if slurm_only(p) && !a.slurm {
            bail!("placement {p} is an srun step's: it needs --slurm (inside salloc or sbatch)");
        }
        names.push(p.clone());
    }
    if !names.contains(&baseline) {
        bail!(
            "--baseline {baseline} is not one of --placements ({})",
            names.join(",")
        );
    }
    if names.len() < 2 {
        bail!("--placements needs at least two placements to compare");
    }
    if a.slurm && std::env::var_os("SLURM_JOB_ID").is_none() {
        bail!(
            "--slurm runs its steps inside an allocation, and SLURM_JOB_ID is not set: start \
             it under salloc or in an sbatch script"
        );
    }
    let a = Args {
        placements: Some(names.clone()),
        baseline: Some(baseline),
        ..a
    };
    let baseline = a.baseline.as_deref().unwrap_or(UNPINNED);
    let max_runs = a.max_runs.unwrap_or(2 * a.runs).max(a.runs);
    // Under --slurm the program is found on the node by srun; here it is srun itself.
    let program = run::find_program(if a.slurm { "srun" } else { &a.command[0] })?;
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let csv = a.out.join("bench.csv");
    let err_file = a.out.join("run.stderr");

    let hostfile = cmlb_hostfile(|k| std::env::var(k).ok(), Path::is_dir);
    let placements = names
        .iter()
        .map(|n| {
            if a.slurm {
                Ok(srun_placement(&a, n, hostfile.as_deref()))
            } else {
                placement(&a, n)
            }
        })
        .collect::<Result<Vec<_>>>()?;
    let main = if names.iter().any(|n| n == PLAN) && baseline != PLAN {
        PLAN.to_string()
    } else {
        names
            .iter()
            .rev()
            .find(|n| *n != baseline)
            .cloned()
            .unwrap_or_default()
    };
    if a.slurm && !a.no_profile_run {
        let argv = srun_argv(&a, "profile".into(), &[]);
        say!("cmlb bench: profiling step (untimed): {}", argv.join(" "));
        let p = Placement {
            name: "profile".into(),
            launch: None,
            argv: Some(argv),
            note: None,
            unset: Vec::new(),
        };
        let io = RunIo {
            show_output: a.show_output,
            stderr_file: err_file.clone(),
        };
        if let Err(e) = run_once(&program, &a.command, &p, 0, &io)? {
            let tail = stderr_tail(&err_file, 5);
            if !tail.is_empty() {
                say!("cmlb bench: end of its stderr:\n{tail}");
            }
            bail!("the profiling step failed ({e})");
        }
    }

    let io = RunIo {
        show_output: a.show_output,
        stderr_file: err_file.clone(),
    };
    for w in 0..a.warmup {
        say!("cmlb bench: warm-up run {}/{}", w + 1, a.warmup);
        let p = &placements[0];
        let s = run_once(&program, &a.command, p, 0, &io)?;
        if let Err(e) = s {
            bail!("{} failed in the warm-up run ({e})", a.command[0]);
        }
    }

    let mut samples: Vec<Sample> = Vec::new();
    let mut relayed: Vec<String> = Vec::new();
    let mut round = 0u32;
    loop {
        let n = placements.len();
        for k in 0..n {
            let p = &placements[(k + round as usize) % n];
            match run_once(&program, &a.command, p, round + 1, &io)? {
                Ok(s) => {
                    say!(
                        "cmlb bench: round {}/{}: {:<10} {:.3} s",
                        round + 1,
                        if round < a.runs { a.runs } else { max_runs },
                        p.name,
                        s.wall_s
                    );
                    samples.push(s);
                    write_csv(&csv, &samples)?;
                    // An srun step's plan is the plugin's: its lines (plan kept, or the
                    // guard's fallback and why) shown once per placement.
                    if a.slurm && !a.show_output && !relayed.contains(&p.name) {
                        relayed.push(p.name.clone());
                        for line in std::fs::read_to_string(&err_file)
                            .unwrap_or_default()
                            .lines()
                            .filter(|l| l.starts_with("cmlb: "))
                        {
                            say!("cmlb bench: [{}] {line}", p.name);
                        }
                    }
                }
                Err(status) => {
                    let tail = stderr_tail(&err_file, 5);
                    if !tail.is_empty() {
                        say!("cmlb bench: end of its stderr:\n{tail}");
                    }
                    bail!(
                        "{} failed under placement {} in round {} ({status}); stopped, the {} \
                         runs done are in {}",
                        a.command[0],
                        p.name,
                        round + 1,
                        samples.len(),
                        csv.display()
                    );
                }
            }
        }
        round += 1;
        if round < a.runs {
            continue;
        }
        if round >= max_runs {
            break;
        }
        match compare(&samples, &main, baseline) {
            Some(c) if c.hi / c.lo - 1.0 <= WIDE => break,
            Some(c) => say!(
                "cmlb bench: {main}/{baseline} interval {:.3}-{:.3} is wider than {:.0} %: one \
                 more round",
                c.lo,
                c.hi,
                WIDE * 100.0
            ),
            None => break,
        }
    }
    let summary = format!(
        "command: {}\n{}{}\n",
        a.command.join(" "),
        table(&placements, &samples, baseline, a.slurm),
        verdict(&samples, &main, baseline, &placements)
    );
    print!("{}", summary.split_once('\n').map_or("", |(_, rest)| rest));
    write_atomic(&a.out.join(SUMMARY), &summary)?;
    let runs = bench_runs(&samples);
    match report::bench_plot(&runs, &names, &title(&a.command), &a.out) {
        Ok(_) => say!(
            "cmlb bench: {} runs in {}, figure {}, page: cmlb report {}",
            samples.len(),
            csv.display(),
            a.out.join("bench.svg").display(),
            a.out.display()
        ),
        Err(e) => say!(
            "cmlb bench: {} runs in {}; warning: no figure ({e})",
            samples.len(),
            csv.display()
        ),
    }
    Ok(())
}

/// The table and verdict as printed, with the command on a first line.
pub const SUMMARY: &str = "bench.txt";

/// The figure's title: the command, shortened.
pub fn title(command: &[String]) -> String {
    let t = command.join(" ");
    if t.chars().count() > 70 {
        format!("{}...", t.chars().take(67).collect::<String>())
    } else {
        t
    }
}

pub fn bench_runs(samples: &[Sample]) -> Vec<report::BenchRun> {
    samples
        .iter()
        .map(|s| report::BenchRun {
            placement: s.placement.clone(),
            round: s.round,
            wall_s: s.wall_s,
        })
        .collect()
}

/// The runs of a bench.csv (for `cmlb report`); errors name the file and line.
pub fn read_csv(path: &Path) -> Result<Vec<Sample>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, h)) if h.trim() == CSV_HEADER || h.trim() == CSV_HEADER_V1 => {}
        _ => bail!(
            "{}: line 1 is not the header cmlb bench writes ({CSV_HEADER})",
            path.display()
        ),
    }
    let mut out = Vec::new();
    for (i, line) in lines {
        let bad = |what: &str| anyhow::anyhow!("{}: line {}: {what}", path.display(), i + 1);
        let f: Vec<&str> = line.split(',').collect();
        // 12 fields from cmlb bench before migrations and node pages were recorded.
        if f.len() != 14 && f.len() != 12 {
            return Err(bad(&format!("{} fields, expected 14", f.len())));
        }
        let int = |k: usize| -> Result<i64> {
            f[k].parse()
                .map_err(|_| bad(&format!("field {} '{}' is not an integer", k + 1, f[k])))
        };
        let real = |k: usize| -> Result<f64> {
            f[k].parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| bad(&format!("field {} '{}' is not a time", k + 1, f[k])))
        };
        out.push(Sample {
            round: u32::try_from(int(0)?).map_err(|_| bad("round out of range"))?,
            placement: f[1].to_string(),
            wall_s: real(2)?,
            user_s: real(3)?,
            sys_s: real(4)?,
            max_rss_kib: int(5)?,
            minor_faults: int(6)?,
            major_faults: int(7)?,
            voluntary_cs: int(8)?,
            involuntary_cs: int(9)?,
            hint_faults: int(10)?.max(0) as u64,
            hint_faults_local: int(11)?.max(0) as u64,
            migrations: match f.get(12) {
                Some(v) if !v.is_empty() => Some(int(12)?.max(0) as u64),
                _ => None,
            },
            node_pages: match f.get(13) {
                Some(v) if !v.is_empty() => v
                    .split(';')
                    .map(|x| {
                        x.parse()
                            .map_err(|_| bad(&format!("node pages '{v}' are not counts")))
                    })
                    .collect::<Result<_>>()?,
                _ => Vec::new(),
            },
        });
    }
    Ok(out)
}

fn write_atomic(path: &Path, text: &str) -> Result<()> {
    Ok(mapper::write_atomic(path, text.as_bytes())?)
}

/// How to make a placement: through `cmlb run`'s own planning, so that the bench times
/// exactly what `cmlb run --strategy NAME` would start.
fn placement(a: &Args, name: &str) -> Result<Placement> {
    if name == UNPINNED {
        return Ok(Placement {
            name: name.into(),
            launch: None,
            argv: None,
            note: None,
            unset: Vec::new(),
        });
    }
    let spec = if name == PLAN {
        a.placing.strategy.clone()
    } else {
        StrategySpec::parse(name)?
    };
    let ra = run::Args {
        placing: run::Placing {
            strategy: spec,
            ..a.placing.clone()
        },
        save_profile: None,
        backend: None,
        period: None,
        strict: false,
        dry_run: false,
        job_rank: false,
        show_pins: false,
        job_scratch: None,
        command: a.command.clone(),
    };
    say!("cmlb bench: placement {name}:");
    match run::plan(&ra) {
        Ok(Some(l)) => Ok(Placement {
            name: name.into(),
            // No environment: the guard found no plan, the threads are left free.
            note: l
                .env
                .is_empty()
                .then(|| "no thread plan: threads left as they are".to_string()),
            launch: Some(l),
            argv: None,
            unset: Vec::new(),
        }),
        Ok(None) => Ok(Placement {
            name: name.into(),
            launch: None,
            argv: None,
            note: Some("no plan: runs unpinned".into()),
            unset: Vec::new(),
        }),
        Err(e) => {
            let why = crate::one_line(&e);
            say!("cmlb bench: warning: placement {name}: {why}; it runs unpinned");
            Ok(Placement {
                name: name.into(),
                launch: None,
                argv: None,
                note: Some(format!("no plan ({why}): runs unpinned")),
                unset: Vec::new(),
            })
        }
    }
}

/// `srun [--srun ARGS] [EXTRA] --cmlb-map=MAP COMMAND...`.
fn srun_argv(a: &Args, map: String, extra: &[&str]) -> Vec<String> {
    let mut v = vec!["srun".to_string()];
    v.extend(
        a.srun
            .as_deref()
            .unwrap_or("")
            .split_whitespace()
            .map(String::from),
    );
    v.extend(extra.iter().map(|s| s.to_string()));
    v.push(format!("--cmlb-map={map}"));
    v.extend(a.command.iter().cloned());
    v
}

/// The variables with which `sbatch --cmlb-map=apply` hands its script the rank hostfile.
const HOSTFILE_VARS: [&str; 2] = ["SLURM_HOSTFILE", "SLURM_DISTRIBUTION"];

/// The rank hostfile cmlb's batch step gave this job, if any: `SLURM_HOSTFILE` with
/// `SLURM_DISTRIBUTION=arbitrary`, naming `hostfile.<jobid>` beside the job profile's `ranks/`
/// (where `sbatch --cmlb-map=apply` writes it). Its `cmlb` placement keeps it; Slurm's own
/// placements run without it. A hostfile of the user's own is left to every placement.
fn cmlb_hostfile(
    get: impl Fn(&str) -> Option<String>,
    is_dir: impl Fn(&Path) -> bool,
) -> Option<String> {
    let arbitrary = get("SLURM_DISTRIBUTION").is_some_and(|d| d.trim() == "arbitrary");
    let h = get("SLURM_HOSTFILE").filter(|_| arbitrary)?;
    let path = Path::new(&h);
    let named = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("hostfile."));
    let beside_ranks = path
        .parent()
        .is_some_and(|d| is_dir(&d.join(contract::ranks::RANKS_DIR)));
    (named && beside_ranks).then_some(h)
}

/// A placement as an srun step: the plugin (or Slurm alone) places the tasks. `hostfile`: the
/// job's rank hostfile from `sbatch --cmlb-map=apply` ([`cmlb_hostfile`]), which the cmlb and
/// strategy placements keep and Slurm's own (slurm, unpinned, block, cyclic) leave out.
fn srun_placement(a: &Args, name: &str, hostfile: Option<&str>) -> Placement {
    let default = a.placing.strategy.to_string() == mapper::DEFAULT_STRATEGY;
    let slurms_own = name == SLURM || name == UNPINNED || DISTRIBUTIONS.contains(&name);
    let argv = match name {
        SLURM => srun_argv(a, "off".into(), &[]),
        UNPINNED => srun_argv(a, "off".into(), &["--cpu-bind=none"]),
        PLAN if default => srun_argv(a, "apply".into(), &[]),
        PLAN => srun_argv(a, format!("apply:strategy={}", a.placing.strategy), &[]),
        d if DISTRIBUTIONS.contains(&d) => {
            srun_argv(a, "off".into(), &[&format!("--distribution={d}")])
        }
        s => srun_argv(a, format!("apply:strategy={s}"), &[]),
    };
    let (unset, how) = match hostfile {
        Some(h) if slurms_own => (
            HOSTFILE_VARS.to_vec(),
            format!(" (without the job's rank hostfile {h}: Slurm places the ranks)"),
        ),
        Some(h) => (
            Vec::new(),
            format!(" (ranks on nodes by the job's rank hostfile {h}, --distribution=arbitrary)"),
        ),
        None => (Vec::new(), String::new()),
    };
    say!("cmlb bench: placement {name}: {}{how}", argv.join(" "));
    Placement {
        name: name.into(),
        launch: None,
        argv: Some(argv),
        note: None,
        unset,
    }
}

struct RunIo {
    show_output: bool,
    stderr_file: PathBuf,
}

/// Run the program once under `p`: `Ok(Err(status))` when it failed.
fn run_once(
    program: &Path,
    command: &[String],
    p: &Placement,
    round: u32,
    io: &RunIo,
) -> Result<std::result::Result<Sample, String>> {
    let to_c = |s: &str| CString::new(s).with_context(|| format!("NUL byte in '{s}'"));
    let path = to_c(&program.to_string_lossy())?;
    let argv = p
        .argv
        .as_deref()
        .unwrap_or(command)
        .iter()
        .map(|s| to_c(s))
        .collect::<Result<Vec<_>>>()?;
    // The environment each run gets, built before the fork; the preload's pid is the child's
    // own, patched in the child.
    let mut env: Vec<(String, String)> = std::env::vars().collect();
    env.retain(|(k, _)| !p.unset.contains(&k.as_str()));
    let mut mask: Option<&[u32]> = None;
    if let Some(l) = &p.launch {
        for (k, v) in &l.env {
            env.retain(|(ek, _)| ek != k);
            env.push((k.clone(), v.clone()));
        }
        mask = Some(&l.mask);
    }
    let pid_at = env.iter().position(|(k, _)| k == contract::env::BIND_PID);
    let envp: Vec<CString> = env
        .iter()
        .map(|(k, v)| to_c(&format!("{k}={v}")))
        .collect::<Result<_>>()?;
    let (out_fd, err_fd) = if io.show_output {
        (None, None)
    } else {
        let null = std::fs::File::options()
            .write(true)
            .open("/dev/null")
            .context("opening /dev/null")?;
        let err = std::fs::File::create(&io.stderr_file)
            .with_context(|| format!("creating {}", io.stderr_file.display()))?;
        (Some(null), Some(err))
    };
    // Every run reads nothing: a program that reads stdin would otherwise eat the input of
    // whatever started the bench (a site kit's list of programs) and differ run to run.
    let null_in = std::fs::File::open("/dev/null").context("opening /dev/null")?;
    // Everything the child needs is made here: between fork and exec it only copies bytes and
    // makes system calls (no allocation, no lock), whatever threads a library may have left.
    let mut args: Vec<*const libc::c_char> = argv.iter().map(|c| c.as_ptr()).collect();
    args.push(std::ptr::null());
    let mut envs: Vec<*const libc::c_char> = envp.iter().map(|c| c.as_ptr()).collect();
    envs.push(std::ptr::null());
    // "CMLB_BIND_PID=" and room for the child's pid, filled in by the child.
    let prefix = format!("{}=", contract::env::BIND_PID);
    let mut pid_entry = vec![0u8; prefix.len() + 24];
    pid_entry[..prefix.len()].copy_from_slice(prefix.as_bytes());
    if let Some(i) = pid_at {
        envs[i] = pid_entry.as_ptr().cast();
    }
    let failed = format!("cmlb bench: cannot run {}\n", program.display());
    // The child inherits this process's CPU mask at fork: set it for the fork, then take ours
    // back (no allocating call is needed in the child for it).
    let own = match mask {
        Some(m) => {
            let own = contract::own_cpus().context("sched_getaffinity")?;
            contract::pin(m)
                .with_context(|| format!("setting the CPU mask {}", format_cpu_list(m)))?;
            Some(own)
        }
        None => None,
    };
    let before = vmstat_hints();
    let pages_before = node_pages();
    // Counts this process and, inherited at fork, every thread of the run (added on exit).
    let mut migrations = migration_counter();
    // The counter also counts this process (restoring its own mask after the fork moves it):
    // its own migrations, from the scheduler, are taken off.
    let own_before = own_migrations();
    if let Some(c) = migrations.as_mut() {
        if c.reset().and_then(|_| c.enable()).is_err() {
            migrations = None;
        }
    }
    let t0 = Instant::now();
    // SAFETY: the child runs only async-signal-safe code (dup2, getpid, execve, write, _exit)
    // on memory prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        use std::os::fd::AsRawFd;
        unsafe {
            libc::dup2(null_in.as_raw_fd(), 0);
            if let Some(f) = &out_fd {
                libc::dup2(f.as_raw_fd(), 1);
            }
            if let Some(f) = &err_fd {
                libc::dup2(f.as_raw_fd(), 2);
            }
            if pid_at.is_some() {
                write_decimal(&mut pid_entry[prefix.len()..], libc::getpid() as u64);
            }
            libc::execve(path.as_ptr(), args.as_ptr(), envs.as_ptr());
            libc::write(2, failed.as_ptr().cast(), failed.len());
            libc::_exit(127)
        }
    }
    let fork_error = std::io::Error::last_os_error();
    if let Some(own) = &own {
        contract::pin(own).context("restoring cmlb bench's own CPU mask")?;
    }
    if pid < 0 {
        bail!("fork: {fork_error}");
    }
    let mut status = 0;
    // SAFETY: zeroed rusage is a valid value for wait4 to fill.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            bail!("waiting for {}: {e}", program.display());
        }
    }
    let wall = t0.elapsed().as_secs_f64();
    let after = vmstat_hints();
    let pages_after = node_pages();
    let migrations = migrations.and_then(|mut c| {
        let _ = c.disable();
        let own = own_migrations()?.saturating_sub(own_before?);
        c.read().ok().map(|m| m.saturating_sub(own))
    });
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        let why = if libc::WIFEXITED(status) {
            format!("exit status {}", libc::WEXITSTATUS(status))
        } else if libc::WIFSIGNALED(status) {
            format!("killed by signal {}", libc::WTERMSIG(status))
        } else {
            format!("wait status {status}")
        };
        return Ok(Err(why));
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    Ok(Ok(Sample {
        round,
        placement: p.name.clone(),
        wall_s: wall,
        user_s: secs(ru.ru_utime),
        sys_s: secs(ru.ru_stime),
        max_rss_kib: ru.ru_maxrss,
        minor_faults: ru.ru_minflt,
        major_faults: ru.ru_majflt,
        voluntary_cs: ru.ru_nvcsw,
        involuntary_cs: ru.ru_nivcsw,
        hint_faults: after.0.saturating_sub(before.0),
        hint_faults_local: after.1.saturating_sub(before.1),
        migrations,
        node_pages: if pages_before.len() == pages_after.len() {
            pages_after
                .iter()
                .zip(&pages_before)
                .map(|(a, b)| a.saturating_sub(*b))
                .collect()
        } else {
            Vec::new()
        },
    }))
}

/// A CPU-migrations counter on this process, inherited by the children it forks, disabled;
/// `None` where this user may not count kernel-side software events (perf_event_paranoid 2
/// without CAP_PERFMON: the count would be 0, not unknown).
fn migration_counter() -> Option<perf_event::Counter> {
    perf_event::Builder::new(perf_event::events::Software::CPU_MIGRATIONS)
        .inherit(true)
        .exclude_kernel(false)
        .exclude_hv(true)
        .enabled(false)
        .build()
        .ok()
}

/// This thread's own CPU migrations so far (`se.nr_migrations` of /proc/thread-self/sched).
fn own_migrations() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/sched")
        .ok()?
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == "se.nr_migrations").then(|| v.trim().parse().ok())?
        })
}

/// `numa_hit` of every NUMA node (/sys/devices/system/node/node*/numastat), in node order:
/// pages allocated there. Empty where the files are missing.
fn node_pages() -> Vec<u64> {
    let mut nodes: Vec<(u32, u64)> = std::fs::read_dir("/sys/devices/system/node")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let k: u32 = name.strip_prefix("node")?.parse().ok()?;
            let text = std::fs::read_to_string(e.path().join("numastat")).ok()?;
            let hit = text
                .lines()
                .find_map(|l| l.strip_prefix("numa_hit ")?.trim().parse().ok())?;
            Some((k, hit))
        })
        .collect();
    nodes.sort_unstable();
    nodes.into_iter().map(|(_, h)| h).collect()
}

/// `v` in decimal, NUL-terminated, at the start of `buf` (at least 21 bytes): in a forked
/// child, where formatting (which may allocate) is not safe.
fn write_decimal(buf: &mut [u8], mut v: u64) {
    let mut digits = [0u8; 20];
    let mut n = 0;
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for i in 0..n {
        buf[i] = digits[n - 1 - i];
    }
    buf[n] = 0;
}

/// `numa_hint_faults` and `numa_hint_faults_local` from /proc/vmstat (0 where absent).
fn vmstat_hints() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/vmstat").unwrap_or_default();
    let get = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
            .unwrap_or(0)
    };
    (get("numa_hint_faults"), get("numa_hint_faults_local"))
}

fn stderr_tail(file: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

pub const CSV_HEADER: &str = "round,placement,wall_s,user_s,sys_s,max_rss_kib,minor_faults,\
major_faults,voluntary_cs,involuntary_cs,numa_hint_faults,numa_hint_faults_local,\
cpu_migrations,node_pages";
/// The header before `cpu_migrations` and `node_pages` (read, never written).
const CSV_HEADER_V1: &str = "round,placement,wall_s,user_s,sys_s,max_rss_kib,minor_faults,\
major_faults,voluntary_cs,involuntary_cs,numa_hint_faults,numa_hint_faults_local";

/// The whole CSV, written to a temporary file and renamed over the old one: a reader (or an
/// interrupted bench) never sees half a file.
fn write_csv(path: &Path, samples: &[Sample]) -> Result<()> {
    let mut text = String::from(CSV_HEADER);
    text.push('\n');
    for s in samples {
        let _ = writeln!(
            text,
            "{},{},{:.6},{:.6},{:.6},{},{},{},{},{},{},{},{},{}",
            s.round,
            s.placement,
            s.wall_s,
            s.user_s,
            s.sys_s,
            s.max_rss_kib,
            s.minor_faults,
            s.major_faults,
            s.voluntary_cs,
            s.involuntary_cs,
            s.hint_faults,
            s.hint_faults_local,
            s.migrations.map_or(String::new(), |m| m.to_string()),
            s.node_pages
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(";")
        );
    }
    write_atomic(path, &text)
}

fn walls(samples: &[Sample], name: &str) -> Vec<f64> {
    samples
        .iter()
        .filter(|s| s.placement == name)
        .map(|s| s.wall_s)
        .collect()
}

fn compare(samples: &[Sample], name: &str, baseline: &str) -> Option<Comparison> {
    stats::ratio(&walls(samples, name), &walls(samples, baseline), 0.95)
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The per-placement table a person reads first.
fn table(placements: &[Placement], samples: &[Sample], baseline: &str, slurm: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<10} {:>4} {:>9} {:>17} {:>10} {:>9} {:>6} {:>9} {:>7} {:>11}  {:<24}",
        "placement",
        "runs",
        "median s",
        "min-max s",
        "cpu s",
        "ctx sw",
        "migr",
        "faults",
        "local",
        "node pages",
        format!("time vs {baseline} (95% CI)")
    );
    for p in placements {
        let mine: Vec<&Sample> = samples.iter().filter(|s| s.placement == p.name).collect();
        let w: Vec<f64> = mine.iter().map(|s| s.wall_s).collect();
        let lo = w.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = w.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let cpu = median(mine.iter().map(|s| s.user_s + s.sys_s).collect());
        let cs = median(
            mine.iter()
                .map(|s| (s.voluntary_cs + s.involuntary_cs) as f64)
                .collect(),
        );
        let faults = median(
            mine.iter()
                .map(|s| (s.minor_faults + s.major_faults) as f64)
                .collect(),
        );
        let migr = if mine.iter().all(|s| s.migrations.is_some()) && !mine.is_empty() {
            format!(
                "{:.0}",
                median(
                    mine.iter()
                        .map(|s| s.migrations.unwrap_or(0) as f64)
                        .collect()
                )
            )
        } else {
            "-".into()
        };
        // Where the run's pages went, as each node's share (only with several nodes).
        let nodes = mine.iter().map(|s| s.node_pages.len()).max().unwrap_or(0);
        let pages = if nodes > 1 {
            let sums: Vec<u64> = (0..nodes)
                .map(|k| {
                    mine.iter()
                        .map(|s| s.node_pages.get(k).copied().unwrap_or(0))
                        .sum()
                })
                .collect();
            let total: u64 = sums.iter().sum();
            if total > 0 {
                sums.iter()
                    .map(|&v| format!("{:.0}", 100.0 * v as f64 / total as f64))
                    .collect::<Vec<_>>()
                    .join("/")
                    + " %"
            } else {
                "-".into()
            }
        } else {
            "-".into()
        };
        let hints: u64 = mine.iter().map(|s| s.hint_faults).sum();
        let local = if hints > 0 {
            let l: u64 = mine.iter().map(|s| s.hint_faults_local).sum();
            format!("{:.0} %", 100.0 * l as f64 / hints as f64)
        } else {
            "-".into()
        };
        let vs = if p.name == baseline {
            "(baseline)".to_string()
        } else {
            match compare(samples, &p.name, baseline) {
                Some(c) => format!("{:.3} [{:.3}, {:.3}] {}", c.ratio, c.lo, c.hi, c.mark()),
                None => "too few runs".into(),
            }
        };
        // srun's own CPU time and faults say nothing of the step's tasks.
        let own = |v: f64, digits: usize| {
            if slurm {
                "-".to_string()
            } else {
                format!("{v:.digits$}")
            }
        };
        let _ = writeln!(
            out,
            "{:<10} {:>4} {:>9.3} {:>17} {:>10} {:>9} {:>6} {:>9} {:>7} {:>11}  {}{}",
            p.name,
            w.len(),
            median(w.clone()),
            format!("{lo:.3}-{hi:.3}"),
            own(cpu, 3),
            own(cs, 0),
            if slurm { "-".to_string() } else { migr },
            own(faults, 0),
            local,
            pages,
            vs,
            p.note
                .as_deref()
                .map(|n| format!("  ({n})"))
                .unwrap_or_default()
        );
    }
    out
}

/// The one line that answers "is it faster?".
fn verdict(samples: &[Sample], main: &str, baseline: &str, placements: &[Placement]) -> String {
    let n_main = walls(samples, main).len();
    let n_base = walls(samples, baseline).len();
    let unpinned_note = placements
        .iter()
        .find(|p| p.name == main)
        .and_then(|p| p.note.as_deref())
        .map(|n| format!(" [{main}: {n}]"))
        .unwrap_or_default();
    match compare(samples, main, baseline) {
        None => format!("verdict: too few runs to compare {main} with {baseline}"),
        Some(c) => {
            let what = match c.significant() {
                Some(true) => "slower, significant".to_string(),
                Some(false) => "faster, significant".to_string(),
                None => "no significant difference".to_string(),
            };
            format!(
                "verdict: {main} took {:.3}x the time of {baseline} (95% CI {:.3}-{:.3}, \
                 {n_main} and {n_base} runs, p = {:.3}): {what}{unpinned_note}",
                c.ratio, c.lo, c.hi, c.p
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_without_allocation() {
        let mut buf = [0xffu8; 24];
        write_decimal(&mut buf, 0);
        assert_eq!(&buf[..2], b"0\0");
        write_decimal(&mut buf, 4_194_304);
        assert_eq!(&buf[..8], b"4194304\0");
        write_decimal(&mut buf, u64::MAX);
        assert_eq!(&buf[..21], b"18446744073709551615\0");
    }

    fn args(words: &[&str]) -> Args {
        use clap::Parser;
        #[derive(Parser)]
        struct T {
            #[command(flatten)]
            a: Args,
        }
        T::try_parse_from(std::iter::once("bench").chain(words.iter().copied()))
            .unwrap()
            .a
    }

    #[test]
    fn slurm_placements_are_srun_steps() {
        let a = args(&["--slurm", "--srun", "-n2  -c1", "--", "./app", "8"]);
        let line = |n: &str| srun_placement(&a, n, None).argv.unwrap().join(" ");
        assert_eq!(line("slurm"), "srun -n2 -c1 --cmlb-map=off ./app 8");
        assert_eq!(line("cmlb"), "srun -n2 -c1 --cmlb-map=apply ./app 8");
        assert_eq!(
            line("unpinned"),
            "srun -n2 -c1 --cpu-bind=none --cmlb-map=off ./app 8"
        );
        assert_eq!(
            line("block"),
            "srun -n2 -c1 --distribution=block --cmlb-map=off ./app 8"
        );
        assert_eq!(
            line("scatter"),
            "srun -n2 -c1 --cmlb-map=apply:strategy=scatter ./app 8"
        );
        assert_eq!(
            srun_argv(&a, "profile".into(), &[]).join(" "),
            "srun -n2 -c1 --cmlb-map=profile ./app 8"
        );
        // A strategy with parameters reaches the plugin in its own option syntax.
        let a = args(&["--slurm", "--strategy", "spectral:k=4", "--", "./app"]);
        assert_eq!(
            srun_placement(&a, "cmlb", None).argv.unwrap().join(" "),
            "srun --cmlb-map=apply:strategy=spectral:k=4 ./app"
        );
    }

    /// In an `sbatch --cmlb-map=apply` job the script has the rank hostfile: the cmlb
    /// placement keeps it, Slurm's own placements run without it (else block and cyclic would
    /// be cmlb's placement too).
    #[test]
    fn the_jobs_rank_hostfile_goes_to_cmlb_only() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let ranks_at = |d: &Path| d == Path::new("/s/job/ranks");
        let job = vars(&[
            ("SLURM_HOSTFILE", "/s/job/hostfile.7"),
            ("SLURM_DISTRIBUTION", "arbitrary"),
        ]);
        assert_eq!(
            cmlb_hostfile(job, ranks_at).as_deref(),
            Some("/s/job/hostfile.7")
        );
        // A user's own hostfile (not beside a job profile), or one without arbitrary
        // distribution, is not cmlb's.
        let own = vars(&[
            ("SLURM_HOSTFILE", "/home/u/hostfile.1"),
            ("SLURM_DISTRIBUTION", "arbitrary"),
        ]);
        assert_eq!(cmlb_hostfile(own, ranks_at), None);
        let plain = vars(&[("SLURM_HOSTFILE", "/s/job/hostfile.7")]);
        assert_eq!(cmlb_hostfile(plain, ranks_at), None);
        let a = args(&["--slurm", "--", "./app"]);
        let h = Some("/s/job/hostfile.7");
        for own in ["slurm", "unpinned", "block", "cyclic"] {
            assert_eq!(
                srun_placement(&a, own, h).unset,
                HOSTFILE_VARS.to_vec(),
                "{own}"
            );
        }
        for ours in ["cmlb", "scatter"] {
            assert!(srun_placement(&a, ours, h).unset.is_empty(), "{ours}");
        }
        assert!(srun_placement(&a, "block", None).unset.is_empty());
    }

    /// CSVs of the version before migrations and node pages still read (`cmlb report` on an
    /// old bench directory); a row with a wrong field count is refused with its line.
    #[test]
    fn old_and_new_csvs_read_back() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("bench.csv");
        std::fs::write(
            &p,
            format!("{CSV_HEADER_V1}\n1,unpinned,1.5,1.0,0.1,100,10,0,5,6,0,0\n"),
        )
        .unwrap();
        let s = read_csv(&p).unwrap();
        assert_eq!((s[0].migrations, s[0].node_pages.len()), (None, 0));
        let new = Sample {
            migrations: Some(3),
            node_pages: vec![10, 20],
            ..s[0].clone()
        };
        write_csv(&p, std::slice::from_ref(&new)).unwrap();
        let back = read_csv(&p).unwrap();
        assert_eq!(
            (back[0].migrations, back[0].node_pages.clone()),
            (Some(3), vec![10, 20])
        );
        std::fs::write(&p, format!("{CSV_HEADER}\n1,unpinned,1.5\n")).unwrap();
        let e = read_csv(&p).unwrap_err().to_string();
        assert!(e.contains("line 2: 3 fields, expected 14"), "{e}");
    }

    #[test]
    fn placements_are_checked_where_typed() {
        assert_eq!(parse_placement(" compact").unwrap(), "compact");
        assert_eq!(parse_placement("cmlb").unwrap(), "cmlb");
        let e = parse_placement("compcat").unwrap_err();
        assert!(
            e.contains("unknown placement 'compcat'") && e.contains("scatter"),
            "{e}"
        );
    }
}
