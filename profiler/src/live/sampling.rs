//! Phase 2 of a profiling run: drain the ring buffers until the command exits, the duration
//! ends, the evidence is stable ([`stable`]) or a signal stops the run, arming and disarming
//! watchpoints as the scheduler says.

use super::{
    assemble, cpu, process_alive, stable, threads, watch, Collected, ProfileConfig, StreamKind,
    SIGNAL,
};
use super::{Stream, WatchConfig};
use crate::probe::Backend;
use std::io::Write;
use std::process::{Child, ExitStatus};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How the sampling phase ended, and what it left.
pub(super) struct Sampled {
    pub data: Collected,
    pub exit_status: Option<ExitStatus>,
    pub stopped_by_signal: bool,
    pub watch_errors: u64,
    pub elapsed: Duration,
    pub sched: Option<watch::Scheduler>,
    pub followed: Option<threads::ThreadTable>,
    /// Sampling stopped early because the evidence was stable ([`stable`]).
    pub stopped_early: Option<profile::evidence::SamplingStop>,
    /// When each thread ran (`cpu.csv`).
    pub cpu: cpu::CpuPoll,
}

/// Sample until the end; the streams are drained a last time and closed before returning.
pub(super) fn sample(
    cfg: &ProfileConfig,
    backend: Backend,
    mut streams: Vec<Stream>,
    slots: usize,
    root: i32,
    existing: &[(i32, String)],
    child: &mut Option<Child>,
) -> Sampled {
    let start = Instant::now();
    let deadline = cfg.duration.map(|d| start + d);
    let mut sched = (backend == Backend::Watch && slots > 0).then(|| {
        let watch_cfg = WatchConfig { slots, ..cfg.watch };
        watch::Scheduler::new(watch_cfg, start, root as u64 ^ 0x9e37_79b9_7f4a_7c15)
    });
    let mut address_space = watch::ProcAddressSpace::new(root);
    // With --follow-children the root is often a shell or launcher that only waits: the
    // words are taken from the followed process with the most live threads instead.
    let mut followed = cfg
        .follow_children
        .then(|| threads::ThreadTable::new(root, existing.to_vec(), true));
    let mut tracker = stable::rule_in_effect(cfg, sched.is_some()).map(|rule| {
        stable::Tracker::new(
            rule,
            start,
            assemble::watch_expiration_ns(cfg.watch.interval.as_nanos() as u64, cfg.watch.hold),
        )
    });
    let mut fed = 0;
    let mut stopped_early = None;
    let mut data = Collected::default();
    let mut recs = Vec::new();
    let mut exit_status = None;
    let mut last_progress = start;
    let mut watch_errors = 0u64;
    let mut stopped_by_signal = false;
    let mut cpu = cpu::CpuPoll::new(start);

    loop {
        match followed.as_ref() {
            Some(t) => cpu.poll(Instant::now(), t.live_processes().collect::<Vec<_>>()),
            None => cpu.poll(Instant::now(), [root]),
        }
        for s in streams.iter_mut() {
            data.skipped += s.drain(&mut recs);
        }
        let hits = data.absorb(&mut recs, sched.as_mut(), followed.as_mut());
        let now = Instant::now();
        if let Some(sc) = sched.as_mut() {
            sc.add_hits(hits, now);
            // Read by the scheduler only when it chooses a new set of words.
            if let Some(pid) = followed.as_ref().and_then(|t| t.busiest_process()) {
                address_space.set_pid(pid);
            }
            match sc.step(now, &mut address_space) {
                Some(watch::Action::Arm(addrs)) => {
                    for s in streams.iter_mut() {
                        if let StreamKind::Watch(k) = s.kind {
                            let r = match addrs.get(k) {
                                Some(&a) => s.arm(a),
                                None => s.disarm(),
                            };
                            // A thread that exits races with the ioctl: not fatal.
                            if r.is_err() {
                                watch_errors += 1;
                            }
                        }
                    }
                }
                Some(watch::Action::Disarm) => {
                    for s in streams.iter_mut() {
                        if matches!(s.kind, StreamKind::Watch(_)) && s.disarm().is_err() {
                            watch_errors += 1;
                        }
                    }
                }
                None => {}
            }
        }
        if cfg.progress
            && now.duration_since(start) > Duration::from_secs(2)
            && now.duration_since(last_progress) >= Duration::from_millis(500)
        {
            last_progress = now;
            let mut e = std::io::stderr().lock();
            let _ = write!(
                e,
                "\rcmlb profile: {:.1} s, {} samples, {} lost   ",
                now.duration_since(start).as_secs_f64(),
                data.fault.len() + data.watch.len(),
                data.lost
            );
            let _ = e.flush();
        }
        // Stop conditions.
        if let Some(c) = child.as_mut() {
            if let Ok(Some(st)) = c.try_wait() {
                exit_status = Some(st);
                break;
            }
        } else if !process_alive(root) {
            break;
        }
        if deadline.is_some_and(|d| now >= d) {
            break;
        }
        if let (Some(t), Some(sc)) = (tracker.as_mut(), sched.as_ref()) {
            // The hits of this drain, in time order (the ring buffers are per CPU); the
            // profile's analysis sorts all samples anyway.
            data.watch[fed..].sort_by_key(|s| s.time_ns);
            t.feed(&data.watch[fed..]);
            fed = data.watch.len();
            if let Some(stop) = t.check(now, sc.threads_seen()) {
                stopped_early = Some(stop);
                break;
            }
        }
        if cfg.handle_signals {
            let sig = SIGNAL.swap(0, Ordering::SeqCst);
            if sig != 0 {
                match child.as_ref() {
                    Some(c) if sig != libc::SIGINT => {
                        // The command did not necessarily get it (e.g. `kill cmlb`): pass it on.
                        let _ = nix::sys::signal::kill(
                            nix::unistd::Pid::from_raw(c.id() as i32),
                            nix::sys::signal::Signal::try_from(sig).ok(),
                        );
                    }
                    Some(_) => {} // Ctrl-C reached the command too; wait for it to exit.
                    None => {
                        stopped_by_signal = true;
                        break;
                    }
                }
            }
        }
        let mut wake = now + cfg.tick;
        if let Some(sc) = sched.as_ref() {
            wake = wake.min(sc.next_at());
            if sc.is_armed() {
                // Check the hit budget often while watchpoints are armed.
                wake = wake.min(now + Duration::from_millis(1));
            }
        }
        if let Some(d) = deadline {
            wake = wake.min(d);
        }
        let now = Instant::now();
        if wake > now {
            std::thread::sleep(wake - now);
        }
    }
    let elapsed = start.elapsed();
    for s in streams.iter_mut() {
        if matches!(s.kind, StreamKind::Watch(_)) {
            let _ = s.disarm();
        }
        let _ = s.sampler.as_counter_mut().disable();
        data.skipped += s.drain(&mut recs);
    }
    data.absorb(&mut recs, sched.as_mut(), followed.as_mut());
    drop(streams);
    Sampled {
        data,
        exit_status,
        stopped_by_signal,
        watch_errors,
        elapsed,
        sched,
        followed,
        stopped_early,
        cpu,
    }
}
