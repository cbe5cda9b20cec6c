//! The hw backend's setup: which events to open for the detected PMU, a trial opening for
//! `--probe` and `auto`, and the warning for CPUs no event covers. Separate from `live/mod.rs`
//! (the run) so that `probe.rs` can try the events without importing the module that imports
//! it.

use super::events::{self, OpenOpts};
use crate::error::{ProfileError, Result};
use crate::hw::{HwEvent, HwPmu};

/// The hw backend's events for the detected PMU, and whether they must be opened CPU-wide.
pub fn hw_events(pmu: &Option<HwPmu>, period: u64) -> Result<(Vec<HwEvent>, bool)> {
    let sysfs = std::path::Path::new(crate::hw::events::SYSFS_PMUS);
    hw_events_in(sysfs, pmu, period)
}

/// [`hw_events`] with the PMUs described under `sysfs`.
fn hw_events_in(
    sysfs: &std::path::Path,
    pmu: &Option<HwPmu>,
    period: u64,
) -> Result<(Vec<HwEvent>, bool)> {
    use crate::hw::events;
    match pmu {
        // Hybrid parts: P-cores (`cpu_core`) and E-cores (`cpu_atom`) have a PMU each, each
        // event opens only on its own CPUs.
        Some(HwPmu::IntelPebs) if sysfs.join("cpu_core").exists() => {
            let mut evs = events::intel_pebs(sysfs, "cpu_core", period, Some(3))?;
            if sysfs.join("cpu_atom/events/mem-loads").exists() {
                evs.extend(events::intel_pebs(sysfs, "cpu_atom", period, Some(3))?);
            }
            Ok((evs, false))
        }
        Some(HwPmu::IntelPebs) => Ok((events::intel_pebs(sysfs, "cpu", period, Some(3))?, false)),
        // IBS has no per-task context in the kernel: CPU-wide events, filtered by pid.
        Some(HwPmu::AmdIbs) => Ok((vec![events::amd_ibs_op(sysfs, period)?], true)),
        Some(HwPmu::ArmSpe(pmu)) => Err(ProfileError::BackendUnavailable {
            backend: "hw".into(),
            reason: format!(
                "Arm SPE ({pmu}) delivers an AUX trace that cmlb reads through perf: record \
                 with `perf mem record` and use `cmlb profile --import perf-script FILE`"
            ),
        }),
        None => Err(ProfileError::NoHardwarePmu(
            "no PEBS, IBS or SPE sampling PMU on this machine".into(),
        )),
    }
}

/// Open (and close) the hw backend's events once as a run would: on this process, or
/// CPU-wide where the PMU demands it, on the first online CPU. For `auto`'s choice.
pub(crate) fn try_open_hw(pmu: &Option<HwPmu>) -> std::result::Result<(), String> {
    let (evs, cpu_wide) =
        hw_events(pmu, crate::hw::events::THESIS_PERIOD).map_err(|e| e.to_string())?;
    let online = events::online_cpus().map_err(|e| e.to_string())?;
    let o = OpenOpts {
        follow_children: false,
        enable_on_exec: false,
        buffer_bytes: 16 * 4096,
    };
    let me = std::process::id() as i32;
    for ev in &evs {
        let target = (!cpu_wide).then_some(me);
        // On the first online CPU of the event's PMU.
        let cpu = online
            .iter()
            .copied()
            .find(|&c| ev.covers(c))
            .ok_or_else(|| format!("{}: none of its PMU's CPUs is online", ev.label))?;
        events::open_hw(ev, target, cpu, &o).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// A warning when some CPUs have no hw load sampler (a hybrid part whose E-core PMU has no
/// `mem-loads`): threads running there go unsampled.
pub(crate) fn uncovered_cpus_warning(cpus: &[usize], evs: &[HwEvent]) -> Option<String> {
    let loads = |e: &&HwEvent| e.samples != crate::sample::AccessKind::Store;
    let bare: Vec<usize> = cpus
        .iter()
        .copied()
        .filter(|&c| !evs.iter().filter(loads).any(|e| e.covers(c)))
        .collect();
    (!bare.is_empty()).then(|| {
        format!(
            "no hw load sampling on CPU(s) {}: their PMU has no mem-loads event, so threads \
             running there are not sampled (bind the job to the other CPUs to profile it all)",
            mapper::format_cpu_list(&bare.iter().map(|&c| c as u32).collect::<Vec<_>>())
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a hybrid part the hw backend samples on both kinds of core where both PMUs offer
    /// mem-loads, and warns about the CPUs it cannot sample otherwise.
    #[test]
    fn hybrid_parts_sample_on_both_kinds_of_core_or_say_which_cpus_are_not() {
        use crate::hw::events::fake_sysfs::{pmu, INTEL_FORMATS};
        let d = tempfile::tempdir().unwrap();
        let core_events = [
            ("mem-loads", "event=0xcd,umask=0x1,ldlat=3"),
            ("mem-loads-aux", "event=0x03,umask=0x82"),
            ("mem-stores", "event=0xcd,umask=0x2"),
        ];
        pmu(d.path(), "cpu_core", 8, INTEL_FORMATS, &core_events);
        std::fs::write(d.path().join("cpu_core/cpus"), "0-3").unwrap();
        pmu(d.path(), "cpu_atom", 10, INTEL_FORMATS, &[]);
        std::fs::write(d.path().join("cpu_atom/cpus"), "4-7").unwrap();
        let cpus: Vec<usize> = (0..8).collect();
        let pebs = Some(HwPmu::IntelPebs);

        // E-cores without mem-loads: only the P-core events, and a warning naming CPUs 4-7.
        let (evs, cpu_wide) = hw_events_in(d.path(), &pebs, 2000).unwrap();
        assert!(!cpu_wide);
        assert_eq!(evs.len(), 2);
        assert!(evs.iter().all(|e| e.pmu == "cpu_core"));
        let w = uncovered_cpus_warning(&cpus, &evs).expect("a warning");
        assert!(w.contains("CPU(s) 4-7"), "{w}");

        // E-cores with mem-loads: their own load sampler, no aux leader, no warning.
        std::fs::write(
            d.path().join("cpu_atom/events/mem-loads"),
            "event=0xd0,umask=0x5,ldlat=3",
        )
        .unwrap();
        let (evs, _) = hw_events_in(d.path(), &pebs, 2000).unwrap();
        let atom: Vec<_> = evs.iter().filter(|e| e.pmu == "cpu_atom").collect();
        assert_eq!(atom.len(), 1);
        assert!(atom[0].covers(4) && !atom[0].covers(3) && atom[0].group_leader.is_none());
        assert_eq!(uncovered_cpus_warning(&cpus, &evs), None);
    }
}
