//! Phase 3 of a profiling run, the part the user reads besides the profile: the overhead
//! knobs that were in effect (printed by `cmlb profile`, kept in profile.yaml).

use super::{fmt_ms, watch, ProfileConfig, WatchConfig};
use crate::probe::Backend;
use std::time::Duration;

/// `(name, value)` of every knob of this run, in print order.
#[allow(clippy::too_many_arguments)]
pub(super) fn knobs(
    cfg: &ProfileConfig,
    backend: Backend,
    period: u64,
    hw: &(Vec<crate::hw::HwEvent>, bool),
    slots: usize,
    sched: Option<&watch::Scheduler>,
    elapsed: Duration,
    watch_hits: usize,
) -> Vec<(String, String)> {
    let mut knobs = vec![("backend".to_string(), backend.to_string())];
    knobs.push(("period".into(), period.to_string()));
    if backend == Backend::Hw {
        let labels: Vec<&str> = hw.0.iter().map(|e| e.label.as_str()).collect();
        knobs.push(("hw_events".into(), labels.join(" ")));
    }
    knobs.push(("buffer_kib".into(), cfg.buffer_kib.to_string()));
    if backend == Backend::Watch {
        let w = WatchConfig { slots, ..cfg.watch };
        knobs.push(("watch_slots".into(), w.slots.to_string()));
        knobs.push(("watch_window_ms".into(), fmt_ms(w.window)));
        knobs.push(("watch_interval_ms".into(), fmt_ms(w.interval)));
        knobs.push(("watch_hold".into(), w.hold.to_string()));
        knobs.push(("watch_max_hits".into(), w.max_hits.to_string()));
        knobs.push(("watch_max_window_ms".into(), fmt_ms(w.max_window)));
        knobs.push(("regs_period_us".into(), w.regs_period_us.to_string()));
        knobs.push(("watch_duty_cycle".into(), format!("{:.3}", w.duty_cycle())));
        knobs.push((
            "watch_max_duty_cycle".into(),
            format!("{:.3}", w.max_duty_cycle()),
        ));
        if let Some(sc) = sched {
            knobs.push((
                "watch_armed_fraction".into(),
                format!(
                    "{:.3}",
                    sc.armed_time.as_secs_f64() / elapsed.as_secs_f64().max(1e-9)
                ),
            ));
            knobs.push(("watch_words".into(), sc.words.to_string()));
            knobs.push(("watch_shared_words".into(), sc.shared_words.to_string()));
            knobs.push(("watch_hits".into(), watch_hits.to_string()));
            knobs.push(("register_samples".into(), sc.register_samples.to_string()));
            knobs.push(("foreign_pointers".into(), sc.foreign_pointers.to_string()));
            knobs.push(("pointer_words".into(), sc.pointer_words.to_string()));
        }
        knobs.push((
            "early_stop".into(),
            if super::stable::rule_in_effect(cfg, sched.is_some()).is_some() {
                "on"
            } else {
                "off"
            }
            .into(),
        ));
        knobs.push((
            "watch_windows".into(),
            sched.map_or(0, |s| s.windows).to_string(),
        ));
        knobs.push((
            "watch_windows_cut".into(),
            sched.map_or(0, |s| s.cut_windows).to_string(),
        ));
    }
    knobs
}
