//! Live sampling: run a command (or follow a running process) under the perf_event backends
//! and turn what they saw into a [`Profile`].
//!
//! Entry point: [`run_profile`]. Backends (see `docs/profiling.md`):
//! * `faults`: `page-faults` software event with the faulting address: who touched each page
//!   first (page ownership; the load vector counts first-touched pages).
//! * `numa-faults`: the same event; with `numa_balancing` on and several NUMA nodes the kernel
//!   re-faults pages periodically, so faults keep showing which threads use which pages.
//! * `watch`: `faults` plus hardware watchpoints on words picked from the pointers in the
//!   threads' registers (`task-clock` samples) and from the fault addresses, duty-cycled (see
//!   [`watch`]): shows which threads really share data.
//! * `hw`: precise memory sampling (PEBS/IBS/SPE); refused with "no hardware PMU" where absent.

pub mod events;
pub mod hw_setup;
pub mod launch;
pub mod records;
pub mod threads;
pub mod watch;

mod assemble;
mod cpu;
mod knobs;
mod sampling;
pub mod stable;
mod start;

use crate::error::{ProfileError, Result};
use crate::probe::{Backend, Probe};
use crate::sample::Sample;
use events::{OpenOpts, Stream, StreamKind};
use profile::Profile;
use records::Rec;
pub use stable::StopRule;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;
pub use watch::WatchConfig;

/// What to profile.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// Start this command (argv) under the profiler.
    Launch(Vec<String>),
    /// Follow a running process and the threads it creates later.
    Attach(i32),
}

/// Settings of one profiling run. `Default` gives the documented defaults.
#[derive(Debug, Clone)]
pub struct ProfileConfig {
    pub target: Target,
    pub backend: Backend,
    /// Sample period: every N-th page fault (fault-based backends, default 1: every first
    /// touch) or every N-th memory operation (hw, default 2000 as in the thesis).
    pub period: Option<u64>,
    /// Stop profiling after this long (a launched command keeps running to its end).
    pub duration: Option<Duration>,
    /// Watch backend: stop profiling once the evidence is stable (see [`stable`]; a launched
    /// command keeps running to its end). `None` profiles to the end.
    pub early_stop: Option<StopRule>,
    /// Also profile threads of child processes (numbered after the root process's threads
    /// in creation order).
    pub follow_children: bool,
    pub watch: WatchConfig,
    /// Ring buffer size per (thread, CPU, event) in KiB (rounded up to a power of two pages).
    pub buffer_kib: usize,
    /// How often the ring buffers are drained.
    pub tick: Duration,
    /// Print a progress line on stderr (the CLI sets this when stderr is a terminal).
    pub progress: bool,
    /// Install SIGINT/SIGTERM/SIGHUP handlers: attach mode stops and writes the profile;
    /// launch mode forwards SIGTERM/SIGHUP to the command and keeps waiting for it.
    pub handle_signals: bool,
    /// Keep up to this many raw samples for the profile's `samples.csv` (the `dagtm`
    /// strategy's input); 0 writes no log.
    pub sample_log_limit: usize,
}

/// Default bound of `samples.csv`: about 5 MB of text, enough for DagTM's reuse distances on
/// the sampled accesses of a few seconds of profiling.
pub const DEFAULT_SAMPLE_LOG_LIMIT: usize = 200_000;

impl ProfileConfig {
    pub fn new(target: Target) -> Self {
        ProfileConfig {
            target,
            backend: Backend::Auto,
            period: None,
            duration: None,
            early_stop: Some(StopRule::default()),
            follow_children: false,
            watch: WatchConfig::default(),
            buffer_kib: 512,
            tick: Duration::from_millis(10),
            progress: false,
            handle_signals: false,
            sample_log_limit: DEFAULT_SAMPLE_LOG_LIMIT,
        }
    }
}

/// The result of a run: the profile plus what the caller needs to report.
#[derive(Debug)]
pub struct ProfileRun {
    pub profile: Profile,
    /// Raw samples kept for `samples.csv` (at most `ProfileConfig::sample_log_limit`).
    pub sample_log: Vec<mapper::LoggedSample>,
    /// The backend that actually ran (`auto` resolved).
    pub backend: Backend,
    /// Exit status of a launched command (None in attach mode).
    pub exit_status: Option<ExitStatus>,
    pub fault_samples: u64,
    pub watch_samples: u64,
    /// Precise memory samples (hw backend).
    pub hw_samples: u64,
    /// Samples the kernel dropped (full ring buffer), from PERF_RECORD_LOST.
    pub lost: u64,
    /// Overhead knobs in effect, for printing.
    pub knobs: Vec<(String, String)>,
    /// Things the user should know (e.g. numa_balancing off, lost samples).
    pub warnings: Vec<String>,
    pub elapsed: Duration,
}

static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::SeqCst);
}

fn install_signal_handlers() {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let act = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // SAFETY: the handler only stores to an atomic. A handler (not SIG_IGN) is reset to
        // the default by execve, so the profiled command gets normal signal behaviour.
        let _ = unsafe { sigaction(s, &act) };
    }
}

/// Resolve `auto` and check that the requested backend can run here.
pub fn resolve_backend(
    requested: Backend,
    probe: &Probe,
    warnings: &mut Vec<String>,
) -> Result<Backend> {
    let b = match requested {
        Backend::Auto => probe.auto,
        b => b,
    };
    match b {
        Backend::Hw if probe.hw_pmu.is_none() => {
            return Err(ProfileError::NoHardwarePmu(format!(
                "no PEBS, IBS or SPE sampling PMU on this machine (PMU types: {}); \
                 use --backend watch or --backend faults",
                probe.pmus.join(" ")
            )));
        }
        Backend::NumaFaults if !probe.numa_faults_meaningful() => warnings.push(format!(
            "numa-faults: NUMA balancing is {} on {} node(s), so the kernel does not re-fault \
             pages: this run only sees first-touch faults (same as --backend faults)",
            match probe.numa_balancing {
                Some(0) => "off".to_string(),
                Some(_) => "on".to_string(),
                None => "unavailable".to_string(),
            },
            probe.numa_nodes
        )),
        Backend::Watch if !probe.breakpoint_pmu => {
            return Err(ProfileError::BackendUnavailable {
                backend: "watch".into(),
                reason: "the kernel has no breakpoint PMU".into(),
            })
        }
        _ => {}
    }
    Ok(b)
}

fn raise_fd_limit() {
    if let Ok((soft, hard)) =
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
    {
        if soft < hard {
            let _ = nix::sys::resource::setrlimit(
                nix::sys::resource::Resource::RLIMIT_NOFILE,
                hard,
                hard,
            );
        }
    }
}

/// Ring buffer of a register sampler (per target and CPU).
const REGS_BUFFER_BYTES: usize = 64 << 10;

struct Opened {
    streams: Vec<Stream>,
    slots: usize,
    warnings: Vec<String>,
}

/// Open the backend's events on each target task on every online CPU.
fn open_streams(
    targets: &[i32],
    cpus: &[usize],
    backend: Backend,
    cfg: &ProfileConfig,
    enable_on_exec: bool,
    slots: usize,
    hw: &(Vec<crate::hw::HwEvent>, bool),
) -> Result<Opened> {
    let o = OpenOpts {
        follow_children: cfg.follow_children,
        enable_on_exec,
        buffer_bytes: cfg.buffer_kib * 1024,
    };
    let mut streams = Vec::new();
    let mut slots = if backend == Backend::Watch { slots } else { 0 };
    let mut warnings = Vec::new();
    // In hw mode the fault event only carries the task records (thread tracking).
    let fault_period = match backend {
        Backend::Hw => 1 << 40,
        _ => cfg.period.unwrap_or(1),
    };
    for &t in targets {
        for &cpu in cpus {
            streams.push(events::open_faults(t, cpu, fault_period, &o)?);
            if !hw.1 {
                for ev in hw.0.iter().filter(|e| e.covers(cpu)) {
                    streams.push(events::open_hw(ev, Some(t), cpu, &o)?);
                }
            }
            let mut s = 0;
            while s < slots {
                match events::open_watch(t, cpu, s, &o) {
                    Ok(st) => {
                        streams.push(st);
                        s += 1;
                    }
                    // No free debug register (a debugger or another profiler holds some):
                    // run with fewer watchpoints rather than fail.
                    Err(ProfileError::Perf { source, .. })
                        if matches!(
                            source.raw_os_error(),
                            Some(libc::ENOSPC) | Some(libc::EBUSY)
                        ) && s > 0 =>
                    {
                        warnings.push(format!(
                            "only {s} of {slots} watchpoints available (debug registers busy)"
                        ));
                        streams.retain(|x| !matches!(x.kind, StreamKind::Watch(k) if k >= s));
                        slots = s;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
    }
    // The watch backend's pointer source: a thread's registers name the data it uses now.
    // Optional, so opened after every event the backend needs (locked ring-buffer memory is
    // limited per user): without it the words come from first-touch faults alone. A clock
    // sample is ~160 bytes and the buffers are drained every tick, so a small buffer holds
    // many ticks' worth.
    if slots > 0 && cfg.watch.regs_period_us > 0 && events::REGS_MASK != 0 {
        let small = OpenOpts {
            buffer_bytes: REGS_BUFFER_BYTES.min(o.buffer_bytes),
            ..o
        };
        let mut opened = Vec::new();
        let mut failed = None;
        'open: for &t in targets {
            for &cpu in cpus {
                match events::open_regs(t, cpu, cfg.watch.regs_period_us * 1000, &small) {
                    Ok(st) => opened.push(st),
                    Err(e) => {
                        failed = Some(e);
                        break 'open;
                    }
                }
            }
        }
        match failed {
            None => streams.extend(opened),
            Some(e) => warnings.push(format!(
                "register sampling unavailable ({e}): watched words come from first-touch \
                 faults only"
            )),
        }
    }
    if backend == Backend::Hw {
        if let Some(w) = hw_setup::uncovered_cpus_warning(cpus, &hw.0) {
            warnings.push(w);
        }
    }
    Ok(Opened {
        streams,
        slots,
        warnings,
    })
}

/// CPU-wide hw events (AMD IBS), opened once per CPU, not per thread.
fn open_cpu_wide(
    cpus: &[usize],
    hw: &(Vec<crate::hw::HwEvent>, bool),
    cfg: &ProfileConfig,
) -> Result<Vec<Stream>> {
    let mut v = Vec::new();
    if hw.1 {
        let o = OpenOpts {
            follow_children: cfg.follow_children,
            enable_on_exec: false,
            buffer_bytes: cfg.buffer_kib * 1024,
        };
        for &cpu in cpus {
            for ev in hw.0.iter().filter(|e| e.covers(cpu)) {
                v.push(events::open_hw(ev, None, cpu, &o)?);
            }
        }
    }
    Ok(v)
}

/// Collected raw data of a run.
#[derive(Default)]
struct Collected {
    task_recs: Vec<Rec>,
    fault: Vec<Sample>,
    watch: Vec<Sample>,
    hw: Vec<Sample>,
    lost: u64,
    throttled: u64,
    skipped: u64,
    /// Watchpoint hits in a process other than the one whose words were armed.
    foreign_hits: u64,
}

impl Collected {
    /// Sort out drained records; returns the number of watchpoint hits (kept or not: each
    /// cost a trap). `live`: the followed processes (with `--follow-children`), kept up to
    /// date so the scheduler can pick whose words to watch.
    fn absorb(
        &mut self,
        recs: &mut Vec<(StreamKind, Rec)>,
        mut sched: Option<&mut watch::Scheduler>,
        mut live: Option<&mut threads::ThreadTable>,
    ) -> u32 {
        if live.is_some() {
            // A process's FORK must come before its threads', its exec before its new faults;
            // the ring buffers are per CPU, so only time puts them in order.
            recs.sort_by_key(|(_, r)| r.time());
        }
        let watched = sched.as_ref().and_then(|s| s.watched_pid());
        let mut hits = 0;
        for (kind, rec) in recs.drain(..) {
            match rec {
                Rec::Sample {
                    pid,
                    tid,
                    time,
                    addr,
                } => {
                    let s = Sample::address_only(tid, time, addr);
                    match kind {
                        StreamKind::Faults => {
                            if let Some(sc) = sched.as_deref_mut() {
                                sc.add_fault(pid, tid, addr);
                            }
                            self.fault.push(s);
                        }
                        StreamKind::Watch(_) => {
                            hits += 1;
                            if watched.is_none_or(|w| w == pid) {
                                if let Some(sc) = sched.as_deref_mut() {
                                    sc.note_hit(tid, addr);
                                }
                                self.watch.push(s);
                            } else {
                                self.foreign_hits += 1;
                            }
                        }
                        StreamKind::Hw(_) => self.hw.push(s),
                        // Register streams decode to Rec::Regs, never to Sample.
                        StreamKind::Regs => {}
                    }
                }
                Rec::Full { sample, .. } => self.hw.push(sample),
                Rec::Regs {
                    pid, tid, values, ..
                } => {
                    if let Some(sc) = sched.as_deref_mut() {
                        sc.add_pointers(pid, tid, &values, events::REGS_SP_INDEX);
                    }
                }
                Rec::Lost(n) => self.lost += n,
                Rec::Throttle => self.throttled += 1,
                r @ (Rec::Fork { .. } | Rec::Comm { .. } | Rec::Exit { .. }) => {
                    let gone = live.as_deref_mut().and_then(|t| t.apply(&r));
                    if let (Some(pid), Some(sc)) = (gone, sched.as_deref_mut()) {
                        sc.forget_process(pid);
                    }
                    self.task_recs.push(r)
                }
            }
        }
        hits
    }
}

fn process_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !matches!(
            s.rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().next()),
            Some("Z") | Some("X")
        ),
        Err(_) => false,
    }
}

/// Profile a command or a running process. Blocks until the command exits (launch mode),
/// the process exits (attach mode), the duration ends, or (with `handle_signals`) a signal
/// stops an attach run. The profile is returned, not written: see [`Profile::write_dir`].
pub fn run_profile(cfg: &ProfileConfig) -> Result<ProfileRun> {
    if cfg.period == Some(0) {
        return Err(ProfileError::Config("--period must be >= 1".into()));
    }
    if cfg.buffer_kib < 4 {
        return Err(ProfileError::Config("ring buffer must be >= 4 KiB".into()));
    }
    cfg.watch.validate().map_err(ProfileError::Config)?;
    let probe = Probe::run();
    let mut warnings = Vec::new();
    let backend = resolve_backend(cfg.backend, &probe, &mut warnings)?;
    let cpus = events::online_cpus()?;
    let hw = if backend == Backend::Hw {
        hw_setup::hw_events(
            &probe.hw_pmu,
            cfg.period.unwrap_or(crate::hw::events::THESIS_PERIOD),
        )?
    } else {
        (Vec::new(), false)
    };
    raise_fd_limit();
    if cfg.handle_signals {
        SIGNAL.store(0, Ordering::SeqCst);
        install_signal_handlers();
    }

    // Phase 1: the target with its events open (start.rs).
    let start::Started {
        root,
        mut child,
        existing,
        mut opened,
        command,
    } = start::start(cfg, backend, &cpus, &hw)?;
    warnings.append(&mut opened.warnings);
    let slots = opened.slots;

    // Phase 2: sampling until the end (sampling.rs).
    let sampling::Sampled {
        mut data,
        mut exit_status,
        stopped_by_signal,
        watch_errors,
        elapsed,
        sched,
        followed,
        stopped_early,
        cpu,
    } = sampling::sample(
        cfg,
        backend,
        opened.streams,
        slots,
        root,
        &existing,
        &mut child,
    );

    // Phase 3: what the run leaves to say, then the profile (knobs.rs, assemble.rs).
    // Followed processes that outlive the command (`sh -c 'app &'`) are not waited for (a
    // daemon would keep cmlb forever): say that their profile is cut short. After the last
    // drain, so a fork just before the command's exit is known.
    if exit_status.is_some() {
        let orphans = followed.as_ref().map_or(0, |t| {
            t.live_processes()
                .filter(|&p| p != root && process_alive(p))
                .count()
        });
        if orphans > 0 {
            warnings.push(format!(
                "the command exited while {orphans} process(es) it started were still running; \
                 they were profiled only until then (keep the program in the foreground of the \
                 command)"
            ));
        }
    }
    if cfg.progress && elapsed > Duration::from_secs(2) {
        eprint!("\r\x1b[K");
    }
    if let (Some(c), None) = (child.as_mut(), exit_status) {
        // Duration ended, the evidence was stable, or a signal: the command runs on
        // unprofiled; wait for it.
        exit_status = Some(
            c.wait()
                .map_err(|e| ProfileError::io("waiting for the profiled command", e))?,
        );
    }
    if data.lost > 0 {
        warnings.push(format!(
            "the kernel dropped {} samples because a ring buffer was full \
             (raise --buffer-kib or --period)",
            data.lost
        ));
    }
    if data.throttled > 0 {
        warnings.push(format!(
            "the kernel throttled sampling {} times (kernel.perf_event_max_sample_rate)",
            data.throttled
        ));
    }
    if stopped_by_signal {
        warnings.push("stopped by a signal before the process exited".into());
    }
    log::debug!(
        "profile: {} skipped records, {} watchpoint ioctl errors, {} watchpoint hits in \
         other processes",
        data.skipped,
        watch_errors,
        data.foreign_hits
    );

    // Thread identity from the task records, in time order.
    data.task_recs.sort_by_key(Rec::time);
    let mut table = threads::ThreadTable::new(root, existing, cfg.follow_children);
    for r in &data.task_recs {
        table.apply(r);
    }
    let period = match backend {
        Backend::Hw => cfg.period.unwrap_or(crate::hw::events::THESIS_PERIOD),
        _ => cfg.period.unwrap_or(1),
    };
    let knobs = knobs::knobs(
        cfg,
        backend,
        period,
        &hw,
        slots,
        sched.as_ref(),
        elapsed,
        data.watch.len(),
    );
    let fault_samples = data.fault.len() as u64;
    let watch_samples = data.watch.len() as u64;
    let hw_samples = data.hw.len() as u64;
    let (mut profile, sample_log) = assemble::build(
        &table,
        data.fault,
        data.watch,
        data.hw,
        assemble::Meta {
            command,
            backend,
            period,
            duration_s: elapsed.as_secs_f64(),
            lost: data.lost,
            knobs: knobs.clone(),
            watch_interval_ns: cfg.watch.interval.as_nanos() as u64,
            watch_hold: cfg.watch.hold,
            sample_log_limit: cfg.sample_log_limit,
            cpu: Some(cpu),
        },
    )?;
    if let Some(e) = profile.meta.evidence.as_mut() {
        e.sampling_stopped = stopped_early;
    }
    // Per-task events only see the profiled threads, so a sample of an unknown thread means
    // its FORK record was among the lost ones: its samples are gone, and the creation order
    // of the threads after that loss cannot be trusted.
    let unknown: u64 = profile
        .meta
        .params
        .get("samples_unknown_tid")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    if backend != Backend::Hw && data.lost > 0 && unknown > 0 {
        warnings.push(format!(
            "{unknown} samples came from threads whose start records were lost with the full \
             ring buffer: they are left out, and the numbering of threads created after the \
             loss may be wrong, so plans from this profile may pin the wrong threads (raise \
             --buffer-kib)"
        ));
    }
    Ok(ProfileRun {
        profile,
        sample_log,
        backend,
        exit_status,
        fault_samples,
        watch_samples,
        hw_samples,
        lost: data.lost,
        knobs,
        warnings,
        elapsed,
    })
}

fn fmt_ms(d: Duration) -> String {
    format!("{}", d.as_secs_f64() * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// A process with unknown mappings (every fault address is a candidate).
    struct Pid(i32);

    impl watch::AddressSpace for Pid {
        fn pid(&self) -> Option<i32> {
            Some(self.0)
        }
        fn writable(&mut self) -> Vec<(u64, u64)> {
            Vec::new()
        }
    }

    #[test]
    fn hits_of_other_processes_are_not_kept() {
        let t0 = Instant::now();
        let cfg = WatchConfig::default();
        let mut sched = watch::Scheduler::new(cfg, t0, 1);
        sched.add_fault(300, 300, 0x7f00_0000_0000);
        assert!(matches!(
            sched.step(t0 + cfg.interval, &mut Pid(300)),
            Some(watch::Action::Arm(_))
        ));
        let hit = |pid, tid| {
            (
                StreamKind::Watch(0),
                Rec::Sample {
                    pid,
                    tid,
                    time: 1,
                    addr: 0x7f00_0000_0000,
                },
            )
        };
        // The shell (pid 100) touches the same address in its own memory.
        let mut recs = vec![hit(300, 301), hit(100, 100), hit(300, 300)];
        let mut data = Collected::default();
        assert_eq!(data.absorb(&mut recs, Some(&mut sched), None), 3);
        let tids: Vec<i32> = data.watch.iter().map(|s| s.tid).collect();
        assert_eq!(tids, vec![301, 300]);
        assert_eq!(data.foreign_hits, 1);
    }
}
