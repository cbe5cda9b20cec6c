//! `cmlb profile`: run a command (or follow a process) under the sampling profiler and write
//! the profile directory.

use anyhow::{bail, Context, Result};
use clap::Args as ClapArgs;
use profiler::{Backend, Probe, ProfileConfig, Target};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(ClapArgs, Debug)]
#[command(
    about = "Profile which threads share memory and how much memory each uses",
    long_about = "Runs COMMAND (or follows --attach PID) under perf_event sampling and writes a \
profile directory (profile.yaml, comm.csv, load.csv, timeline.csv) for `cmlb map`.\n\n\
Backends (--backend):\n  \
hw           precise memory sampling (Intel PEBS, AMD IBS, Arm SPE); bare-metal nodes only\n  \
numa-faults  page faults re-raised by NUMA balancing (needs numa_balancing=1 and >1 node)\n  \
watch        hardware watchpoints on sampled data words (true sharing) + page faults (load)\n  \
faults       first-touch page faults only (page ownership, no sharing after first touch)\n  \
auto         the best of the above that works here (see --probe)\n\n\
Threads are numbered in creation order inside the process (main thread = 0). The command's \
exit status becomes cmlb's exit status (128+N if it was killed by signal N) once the profile \
is written; cmlb exits 1 without writing anything if profiling itself fails.",
    after_help = "Examples:\n  cmlb profile --probe\n  cmlb profile --out prof -- ./app 8\n  \
cmlb profile --backend faults --duration 10 --attach 1234\n  \
cmlb profile --import perf-script app.trace --out prof   (trace from `perf script -F \
comm,pid,tid,time,event,addr,data_src --show-task-events`, or csv: tid,time_ns,addr,kind[,dram])"
)]
pub struct Args {
    /// Sampling backend: auto (the best one this machine offers, see --probe), hw (PEBS/IBS
    /// precise memory samples), numa-faults (NUMA hinting faults), watch (hardware
    /// watchpoints plus page faults), faults (page faults only).
    #[arg(long, default_value = "auto", value_parser = parse_backend)]
    backend: Backend,
    /// Sample period: every N-th page fault (faults, numa-faults, watch; default 1) or every
    /// N-th memory operation (hw; default 2000, the thesis's setting).
    #[arg(long, value_name = "N")]
    period: Option<u64>,
    /// Stop profiling after SECS seconds (a launched command keeps running to its end).
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,
    /// Profile until the command ends (or --duration) even once the evidence is stable. By
    /// default the watch backend stops sampling, and the command runs on unprofiled, once
    /// three checks a second apart found every thread with sharing data, split-half stability
    /// of at least 0.9 and no longer changing, and consistent partners in both halves for at
    /// least 90 % of the threads.
    #[arg(long)]
    no_early_stop: bool,
    /// Profile directory to write (replaced atomically if it exists).
    #[arg(long, short, default_value = "cmlb-profile")]
    out: PathBuf,
    /// Also profile threads of child processes the command starts.
    #[arg(long)]
    follow_children: bool,
    /// Follow this running process (and threads it creates later) instead of a command.
    #[arg(long, value_name = "PID", conflicts_with = "command")]
    attach: Option<i32>,
    /// Print what the kernel offers and which backend `auto` picks, then exit.
    #[arg(long)]
    probe: bool,
    /// Ring buffer per thread, CPU and event, in KiB (too small: lost samples).
    #[arg(long, default_value_t = 512, value_name = "KIB")]
    buffer_kib: usize,
    /// Keep up to N raw samples in the profile's samples.csv (input of `--strategy dagtm`);
    /// 0 writes no sample log.
    #[arg(long, default_value_t = profiler::live::DEFAULT_SAMPLE_LOG_LIMIT, value_name = "N")]
    sample_log: usize,
    /// watch: watchpoints armed at once (1-4, x86 debug registers).
    #[arg(long, default_value_t = 4)]
    watch_slots: usize,
    /// watch: how long watchpoints stay armed, in ms.
    #[arg(long, default_value_t = 10.0, value_name = "MS")]
    watch_window_ms: f64,
    /// watch: time between two arming windows, in ms (duty cycle = window / interval).
    #[arg(long, default_value_t = 50.0, value_name = "MS")]
    watch_interval_ms: f64,
    /// watch: the longest a window may grow to, in ms: windows whose words stay cold double,
    /// up to this (adaptive duty cycle, e.g. 45 for programs that share few of their words).
    /// Default: --watch-window-ms (a fixed duty cycle).
    #[arg(long, value_name = "MS")]
    watch_max_window_ms: Option<f64>,
    /// watch: windows the same words stay watched before new ones are picked.
    #[arg(long, default_value_t = 6)]
    watch_hold: u32,
    /// watch: a window ends early after this many hits (bounds the trap cost on hot words).
    #[arg(long, default_value_t = 256)]
    watch_max_hits: u32,
    /// watch: sample each thread's registers every US microseconds of its CPU time
    /// (task-clock, no PMU needed); the pointers they hold into the program's data, above all
    /// into other threads' pages, are the words watched first. 0: words from first-touch page
    /// faults only.
    #[arg(long, default_value_t = 1000, value_name = "US")]
    regs_period_us: u64,
    /// Analyse a recorded trace instead of running anything: FORMAT is perf-script (output of
    /// `perf script` with tid, time and addr, e.g. after `perf mem record`) or csv
    /// (columns tid, time_ns, addr, kind and, optionally, dram).
    #[arg(long, num_args = 2, value_names = ["FORMAT", "FILE"], conflicts_with_all = ["command", "attach"])]
    import: Option<Vec<String>>,
    /// Merge this run into the profile already in --out if it is one of the same command
    /// (same argv, thread count and backend): the communication matrix and its held-out
    /// halves add up, the load vector is averaged, and the evidence grows with every run.
    /// Otherwise (no profile there, or another command's) the profile is written as usual.
    /// `cmlb run --save-profile` and the Slurm plugin's profile mode pass this.
    #[arg(long)]
    accumulate: bool,
    /// With --accumulate: keep the weight of at most N runs (older runs fade out: once N runs
    /// are in, the accumulated counts are scaled by (N-1)/N before a run is added). 1 = keep
    /// only the newest run.
    #[arg(long, default_value_t = profile::accumulate::DEFAULT_MAX_RUNS, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    max_runs: u32,
    /// Never fail the command for a profiling problem: if sampling cannot start, warn and run
    /// the command unprofiled; if its run gives no profile, warn. Either way exit with the
    /// command's own status. The Slurm plugin passes this unless the site set strict=1.
    #[arg(long)]
    run_anyway: bool,
    /// The job user's scratch directory on this node, made and checked before anything is
    /// written below it (the user's own directory, under parents nobody else can swap), as
    /// the plugin does on the nodes it runs on. The plugin's rank-wrap passes it for ranks
    /// that mpirun/mpiexec start on other nodes. If it fails the check, the command runs
    /// unprofiled; an MPI tracer in its environment then writes into a private temporary
    /// directory instead, so this rank still takes part in the tracer's collective.
    #[arg(long, value_name = "DIR")]
    job_scratch: Option<PathBuf>,
    /// The command to profile and its arguments (after `--`).
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

impl Args {
    /// `--probe`: print a report and exit, nothing launched or followed.
    pub fn probe_only(&self) -> bool {
        self.probe
    }
}

#[cfg(test)]
impl Args {
    /// What the launchers' exec words set (see the parse-back test in main.rs): out, period,
    /// duration, max runs, accumulate, run anyway.
    pub(crate) fn wrapped_for_test(&self) -> (PathBuf, u64, f64, u32, bool, bool) {
        (
            self.out.clone(),
            self.period.unwrap_or(0),
            self.duration.unwrap_or(0.0),
            self.max_runs,
            self.accumulate,
            self.run_anyway,
        )
    }
    pub(crate) fn backend_for_test(&self) -> &'static str {
        self.backend.name()
    }
}

pub(crate) fn parse_backend(s: &str) -> Result<Backend, String> {
    Backend::parse(s).ok_or_else(|| {
        format!("unknown backend '{s}' (expected auto, hw, numa-faults, watch or faults)")
    })
}

fn ms(v: f64, what: &str) -> Result<Duration> {
    if !(v.is_finite() && v > 0.0) {
        bail!("--{what} must be a positive number of milliseconds, got {v}");
    }
    if v / 1000.0 > super::MAX_SECS {
        bail!(
            "--{what} must be at most {:e} milliseconds, got {v:e}",
            super::MAX_SECS * 1000.0
        );
    }
    Ok(Duration::from_secs_f64(v / 1000.0))
}

pub fn run(a: Args) -> Result<i32> {
    if a.probe {
        println!("{}", Probe::run());
        return Ok(0);
    }
    if let Some(imp) = &a.import {
        return super::profile_import::run(&imp[0], Path::new(&imp[1]), &a.out);
    }
    let target = match (a.attach, a.command.is_empty()) {
        (Some(pid), true) => Target::Attach(pid),
        (None, false) => Target::Launch(a.command.clone()),
        (None, true) => bail!("nothing to profile: give a command after `--` or --attach PID"),
        (Some(_), false) => bail!("give either --attach PID or a command, not both"),
    };
    let duration = a
        .duration
        .map(|d| super::positive_secs(d, "--duration"))
        .transpose()?;
    let launched = match &target {
        Target::Launch(argv) if a.run_anyway => Some(argv.clone()),
        _ => None,
    };
    if let (Some(dir), Target::Launch(argv)) = (&a.job_scratch, &target) {
        let uid = nix::unistd::getuid().as_raw();
        if let Err(e) = cmlb_slurm::scratch::ensure_scratch(dir, uid) {
            if let Some(out) = std::env::var_os(contract::ranks::RANKS_OUT) {
                let private = tempfile::Builder::new()
                    .prefix("cmlb-ranks-")
                    .tempdir()
                    .context("a private directory for the MPI tracer")?
                    .keep();
                say!(
                    "cmlb: the MPI tracer writes to {} instead of {}",
                    private.display(),
                    Path::new(&out).display()
                );
                std::env::set_var(contract::ranks::RANKS_OUT, &private);
            }
            return run_unprofiled(argv, &anyhow::Error::new(e));
        }
    }
    match profile_and_write(&a, target, duration) {
        Ok(code) => Ok(code),
        Err(Failure::BeforeStart(e)) => match launched {
            Some(argv) => run_unprofiled(&argv, &e),
            None => Err(e),
        },
        Err(Failure::AfterRun(e, code)) if a.run_anyway => {
            say!("cmlb: warning: {e:#}; no profile written (--run-anyway: exit status is the command's)");
            Ok(code)
        }
        Err(Failure::AfterRun(e, _)) => Err(e),
    }
}

/// Why `cmlb profile` gave no profile: before the command started (it has not run), or after
/// it ran (with its exit status).
enum Failure {
    BeforeStart(anyhow::Error),
    AfterRun(anyhow::Error, i32),
}

/// `--run-anyway` after a failure to start sampling: replace this process by the command, so
/// its exit status, signals and pid are the command's own.
fn run_unprofiled(argv: &[String], why: &anyhow::Error) -> Result<i32> {
    use std::os::unix::process::CommandExt;
    say!(
        "cmlb: warning: {why:#}; running {} unprofiled (--run-anyway)",
        argv[0]
    );
    let e = std::process::Command::new(&argv[0]).args(&argv[1..]).exec();
    bail!("cannot run {}: {e}", argv[0])
}

/// `--accumulate`: the profile merged with the one already in `out`, and a line saying what
/// happened. `None` (write `new` as is) when there is nothing to merge with; a profile there
/// that cannot take this run (another command, unreadable) is replaced, and the line says why.
pub(crate) fn accumulate(
    out: &Path,
    new: &profile::Profile,
    max_runs: u32,
) -> (Option<profile::Profile>, Option<String>) {
    use profile::Profile;
    if !out.join(profile::PROFILE_FILE).exists() {
        return (None, None);
    }
    let mut old = match Profile::read_dir(out) {
        Ok(p) => p,
        Err(e) => {
            return (
                None,
                Some(format!(
                    "warning: not accumulating: the profile in {} is unreadable ({e}); replaced \
                     by this run",
                    out.display()
                )),
            )
        }
    };
    if let Some(why) = profile::accumulate::mismatch(&old, new) {
        return (
            None,
            Some(format!(
                "warning: not accumulating: the profile in {} cannot take this run ({why}); \
                 replaced by this run",
                out.display()
            )),
        );
    }
    match old.merge_run(new, max_runs) {
        Ok(()) => {
            let runs = old.runs();
            (
                Some(old),
                Some(format!(
                    "merged into the profile in {} ({runs} run{} kept, at most {max_runs})",
                    out.display(),
                    if runs == 1 { "" } else { "s" }
                )),
            )
        }
        Err(e) => (
            None,
            Some(format!(
                "warning: not accumulating ({e}); replaced by this run"
            )),
        ),
    }
}

fn profile_and_write(
    a: &Args,
    target: Target,
    duration: Option<Duration>,
) -> std::result::Result<i32, Failure> {
    super::profile_import::check_output_dir(&a.out).map_err(Failure::BeforeStart)?;
    let mut cfg = ProfileConfig::new(target);
    cfg.backend = a.backend;
    cfg.period = a.period;
    cfg.duration = duration;
    cfg.early_stop = (!a.no_early_stop).then(profiler::live::StopRule::default);
    cfg.follow_children = a.follow_children;
    cfg.buffer_kib = a.buffer_kib;
    cfg.sample_log_limit = a.sample_log;
    cfg.watch.slots = a.watch_slots;
    cfg.watch.window = ms(a.watch_window_ms, "watch-window-ms").map_err(Failure::BeforeStart)?;
    cfg.watch.interval =
        ms(a.watch_interval_ms, "watch-interval-ms").map_err(Failure::BeforeStart)?;
    cfg.watch.max_window = match a.watch_max_window_ms {
        Some(v) => ms(v, "watch-max-window-ms").map_err(Failure::BeforeStart)?,
        None => cfg.watch.window,
    };
    cfg.watch.hold = a.watch_hold;
    cfg.watch.max_hits = a.watch_max_hits;
    cfg.watch.regs_period_us = a.regs_period_us;
    cfg.progress = std::io::stderr().is_terminal();
    cfg.handle_signals = true;

    // An error here means the command never started (launch runs it only once sampling is set up).
    let run = profiler::run_profile(&cfg)
        .context("profiling failed, no profile written")
        .map_err(Failure::BeforeStart)?;
    let code = match run.exit_status {
        Some(st) => {
            use std::os::unix::process::ExitStatusExt;
            st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0))
        }
        None => 0,
    };
    let p = &run.profile;
    if p.meta.samples == 0 {
        return Err(Failure::AfterRun(
            anyhow::anyhow!(
                "no samples were recorded ({} backend, {:.2} s): nothing written to {}",
                run.backend,
                run.elapsed.as_secs_f64(),
                a.out.display()
            ),
            code,
        ));
    }
    let log = (a.sample_log > 0).then_some(run.sample_log.as_slice());
    let (merged, note) = if a.accumulate {
        accumulate(&a.out, p, a.max_runs)
    } else {
        (None, None)
    };
    let p = merged.as_ref().unwrap_or(p);
    p.write_dir_with_samples(&a.out, log)
        .with_context(|| format!("writing the profile to {}", a.out.display()))
        .map_err(|e| Failure::AfterRun(e, code))?;
    if let Some(n) = note {
        say!("cmlb: {n}");
    }
    for w in &run.warnings {
        say!("cmlb: warning: {w}");
    }
    if p.load.iter().all(|&l| l == 0.0) {
        // Typical of --attach: the process touched its memory before sampling began.
        say!(
            "cmlb: warning: no sample fed the memory-load vector (load.csv is all zero), so \
             plans from this profile balance thread counts, not memory load; profile the \
             program from its start for a load vector"
        );
    }
    say!(
        "cmlb: profile written to {} ({} backend, {} threads, {:.2} s)",
        a.out.display(),
        run.backend,
        p.meta.threads.len(),
        run.elapsed.as_secs_f64()
    );
    say!(
        "cmlb: this run: {} samples ({} page faults, {} watchpoint hits ({:.0}/s), {} precise \
         memory samples), {} lost",
        run.profile.meta.samples,
        run.fault_samples,
        run.watch_samples,
        run.watch_samples as f64 / run.elapsed.as_secs_f64().max(1e-9),
        run.hw_samples,
        run.lost
    );
    // Where the watched words came from: the user should know which source ran.
    let knob = |k: &str| {
        run.knobs
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    };
    if let (Some(words), Some(shared)) = (knob("watch_words"), knob("watch_shared_words")) {
        match (knob("register_samples"), knob("pointer_words")) {
            (Some(n), Some(from_regs)) if n != "0" => say!(
                "cmlb: watched words: {words} ({from_regs} from pointers in {n} register \
                 samples, the rest from first-touch faults), {shared} seen shared"
            ),
            _ => say!(
                "cmlb: watched words: {words} (from first-touch faults; no register samples), \
                 {shared} seen shared"
            ),
        }
    }
    if let Some(e) = &p.meta.evidence {
        say!("cmlb: {}", e.summary_line());
    }
    let knobs: Vec<String> = run
        .knobs
        .iter()
        .filter(|(k, _)| k != "backend")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    say!("cmlb: settings: {}", knobs.join(" "));
    match run.exit_status.and_then(|st| {
        use std::os::unix::process::ExitStatusExt;
        st.signal()
    }) {
        Some(sig) => say!(
            "cmlb: the profiled command was killed by signal {sig} ({}); exit status {code}",
            nix::sys::signal::Signal::try_from(sig).map_or("unknown", |s| s.as_str())
        ),
        None if code != 0 => say!("cmlb: the profiled command exited with status {code}"),
        None => {}
    }
    Ok(code)
}
