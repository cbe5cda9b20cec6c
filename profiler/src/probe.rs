//! What the kernel offers for memory-access sampling, and the `auto` backend choice.
//!
//! Preference, best first:
//! 1. `hw`: precise memory sampling (Intel PEBS, AMD IBS, Arm SPE);
//! 2. `numa-faults`: NUMA balancing on and more than one node (the kernel re-faults pages
//!    periodically, so page faults keep showing who uses which page);
//! 3. `watch`: watchpoints on sampled words, plus first-touch faults for the load vector;
//! 4. `faults`: first-touch page faults only (page ownership, little sharing information).

use serde::Serialize;
use std::fmt;
use std::path::Path;

/// A profiling backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    Auto,
    Hw,
    NumaFaults,
    Watch,
    Faults,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Hw => "hw",
            Backend::NumaFaults => "numa-faults",
            Backend::Watch => "watch",
            Backend::Faults => "faults",
        }
    }

    pub fn parse(s: &str) -> Option<Backend> {
        [
            Backend::Auto,
            Backend::Hw,
            Backend::NumaFaults,
            Backend::Watch,
            Backend::Faults,
        ]
        .into_iter()
        .find(|b| b.name() == s)
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

pub use crate::hw::HwPmu;

/// The probe report printed by `cmlb profile --probe`.
#[derive(Debug, Clone, Serialize)]
pub struct Probe {
    /// PMU types (`/sys/bus/event_source/devices`).
    pub pmus: Vec<String>,
    pub hw_pmu: Option<HwPmu>,
    pub breakpoint_pmu: bool,
    pub paranoid: Option<i32>,
    pub root: bool,
    /// `/proc/sys/kernel/numa_balancing` (None if the file is absent: kernel without NUMA).
    pub numa_balancing: Option<u32>,
    pub numa_nodes: usize,
    /// Result of actually opening a page-fault sampler on this process.
    pub faults_ok: Result<(), String>,
    /// Result of actually opening a watchpoint on this process.
    pub watch_ok: Result<(), String>,
    /// Result of actually opening the hw backend's events as a run would (None without a
    /// hardware PMU). Detection alone is not enough: e.g. IBS is CPU-wide, which a default
    /// `perf_event_paranoid` refuses to non-root users.
    pub hw_ok: Option<Result<(), String>>,
    /// The backend `auto` picks, and why.
    pub auto: Backend,
    pub reasons: Vec<String>,
}

fn read_trim(p: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Detect hardware memory sampling from the PMU list and the core PMU's event aliases.
pub fn detect_hw(pmus: &[String], sysfs: &Path) -> Option<HwPmu> {
    if let Some(spe) = pmus.iter().find(|p| p.starts_with("arm_spe")) {
        return Some(HwPmu::ArmSpe(spe.clone()));
    }
    if pmus.iter().any(|p| p == "ibs_op") {
        return Some(HwPmu::AmdIbs);
    }
    // Intel core PMUs (`cpu`, or `cpu_core` on hybrid parts) list mem-loads when PEBS load
    // latency sampling exists.
    for core in ["cpu", "cpu_core"] {
        if sysfs.join(core).join("events/mem-loads").exists() {
            return Some(HwPmu::IntelPebs);
        }
    }
    None
}

fn try_open_faults() -> Result<(), String> {
    use perf_event::events::Software;
    perf_event::Builder::new(Software::PAGE_FAULTS)
        .sample_period(1)
        .sample(perf_event::SampleFlag::TID | perf_event::SampleFlag::ADDR)
        .build()
        .map(drop)
        .map_err(|e| e.to_string())
}

fn try_open_watch() -> Result<(), String> {
    use perf_event::events::Breakpoint;
    let word = Box::new(0u64);
    let addr = &*word as *const u64 as u64;
    let r = perf_event::Builder::new(Breakpoint::read_write(addr, 8))
        .sample_period(1)
        .build()
        .map(drop)
        .map_err(|e| e.to_string());
    drop(word);
    r
}

impl Probe {
    /// Probe the running kernel.
    pub fn run() -> Probe {
        let sysfs = Path::new("/sys/bus/event_source/devices");
        let mut pmus: Vec<String> = std::fs::read_dir(sysfs)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        pmus.sort();
        let hw_pmu = detect_hw(&pmus, sysfs);
        let numa_nodes = std::fs::read_dir("/sys/devices/system/node")
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter(|e| {
                        let n = e.file_name();
                        let n = n.to_string_lossy();
                        n.starts_with("node") && n[4..].parse::<u32>().is_ok()
                    })
                    .count()
            })
            .unwrap_or(1)
            .max(1);
        let mut p = Probe {
            breakpoint_pmu: pmus.iter().any(|x| x == "breakpoint"),
            pmus,
            hw_pmu,
            paranoid: read_trim("/proc/sys/kernel/perf_event_paranoid")
                .and_then(|s| s.parse().ok()),
            root: nix::unistd::geteuid().is_root(),
            numa_balancing: read_trim("/proc/sys/kernel/numa_balancing")
                .and_then(|s| s.parse().ok()),
            numa_nodes,
            faults_ok: try_open_faults(),
            watch_ok: try_open_watch(),
            hw_ok: None,
            auto: Backend::Faults,
            reasons: Vec::new(),
        };
        if p.hw_pmu.is_some() {
            p.hw_ok = Some(crate::live::hw_setup::try_open_hw(&p.hw_pmu));
        }
        p.choose();
        p
    }

    /// Whether NUMA hinting faults happen (balancing on and more than one node).
    pub fn numa_faults_meaningful(&self) -> bool {
        self.numa_balancing.unwrap_or(0) != 0 && self.numa_nodes > 1
    }

    /// Fill `auto` and `reasons` from the probed facts.
    pub fn choose(&mut self) {
        let mut r = Vec::new();
        let hw = match &self.hw_pmu {
            Some(HwPmu::ArmSpe(n)) => {
                r.push(format!(
                    "hw: Arm SPE ({n}) present; its AUX trace is read via `perf mem record` + --import"
                ));
                false
            }
            Some(k) if self.faults_ok.is_ok() => match &self.hw_ok {
                Some(Err(e)) => {
                    r.push(format!(
                        "hw: {k:?} present but its events cannot be opened: {e}"
                    ));
                    false
                }
                _ => {
                    r.push(format!("hw: {k:?} present"));
                    true
                }
            },
            Some(k) => {
                r.push(format!("hw: {k:?} present but perf_event_open is refused"));
                false
            }
            None => {
                r.push("hw: no PEBS/IBS/SPE PMU in /sys/bus/event_source/devices".into());
                false
            }
        };
        let numa = self.numa_faults_meaningful() && self.faults_ok.is_ok();
        r.push(format!(
            "numa-faults: numa_balancing={} on {} NUMA node(s){}",
            self.numa_balancing
                .map(|v| v.to_string())
                .unwrap_or_else(|| "absent".into()),
            self.numa_nodes,
            if numa {
                ""
            } else {
                " (needs balancing on and >1 node)"
            }
        ));
        let watch = self.breakpoint_pmu && self.watch_ok.is_ok() && self.faults_ok.is_ok();
        r.push(match &self.watch_ok {
            Ok(()) if self.breakpoint_pmu => "watch: breakpoint PMU usable".to_string(),
            Ok(()) => "watch: no breakpoint PMU".to_string(),
            Err(e) => format!("watch: breakpoint PMU refused: {e}"),
        });
        r.push(match &self.faults_ok {
            Ok(()) => "faults: page-fault sampling usable".to_string(),
            Err(e) => format!("faults: page-fault sampling refused: {e}"),
        });
        self.auto = if hw {
            Backend::Hw
        } else if numa {
            Backend::NumaFaults
        } else if watch {
            Backend::Watch
        } else {
            Backend::Faults
        };
        self.reasons = r;
    }
}

impl fmt::Display for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "PMU types:            {}", self.pmus.join(" "))?;
        writeln!(
            f,
            "hardware sampling:    {}",
            match &self.hw_pmu {
                Some(HwPmu::IntelPebs) => "Intel PEBS (mem-loads/mem-stores)".to_string(),
                Some(HwPmu::AmdIbs) => "AMD IBS op".to_string(),
                Some(HwPmu::ArmSpe(n)) => format!("Arm SPE ({n})"),
                None => "none".to_string(),
            }
        )?;
        writeln!(
            f,
            "perf_event_paranoid:  {}{}",
            self.paranoid
                .map(|v| v.to_string())
                .unwrap_or_else(|| "unknown".into()),
            if self.root { " (running as root)" } else { "" }
        )?;
        writeln!(
            f,
            "numa_balancing:       {} ({} NUMA node(s))",
            self.numa_balancing
                .map(|v| v.to_string())
                .unwrap_or_else(|| "absent".into()),
            self.numa_nodes
        )?;
        for r in &self.reasons {
            writeln!(f, "  {r}")?;
        }
        write!(f, "auto backend:         {}", self.auto)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(hw: Option<HwPmu>, balancing: Option<u32>, nodes: usize, bp: bool) -> Probe {
        let mut p = Probe {
            pmus: vec![],
            hw_ok: hw.as_ref().map(|_| Ok(())),
            hw_pmu: hw,
            breakpoint_pmu: bp,
            paranoid: Some(2),
            root: false,
            numa_balancing: balancing,
            numa_nodes: nodes,
            faults_ok: Ok(()),
            watch_ok: Ok(()),
            auto: Backend::Auto,
            reasons: vec![],
        };
        p.choose();
        p
    }

    #[test]
    fn auto_preference_order() {
        assert_eq!(
            probe(Some(HwPmu::AmdIbs), Some(1), 2, true).auto,
            Backend::Hw
        );
        assert_eq!(probe(None, Some(1), 2, true).auto, Backend::NumaFaults);
        assert_eq!(
            probe(None, Some(1), 1, true).auto,
            Backend::Watch,
            "one node"
        );
        assert_eq!(
            probe(None, Some(0), 4, true).auto,
            Backend::Watch,
            "balancing off"
        );
        assert_eq!(probe(None, None, 1, false).auto, Backend::Faults);
        assert_eq!(
            probe(Some(HwPmu::ArmSpe("arm_spe_0".into())), None, 1, true).auto,
            Backend::Watch,
            "SPE is import-only"
        );
        let mut p = probe(None, None, 1, true);
        p.watch_ok = Err("EACCES".into());
        p.choose();
        assert_eq!(p.auto, Backend::Faults);
        // A PMU whose events do not open (ENODATA without mem-loads-aux, paranoid IBS, ...)
        // is passed over, with the reason.
        let mut p = probe(Some(HwPmu::IntelPebs), Some(0), 1, true);
        p.hw_ok = Some(Err("No data available (os error 61)".into()));
        p.choose();
        assert_eq!(p.auto, Backend::Watch);
        assert!(
            p.reasons[0].contains("cannot be opened: No data available"),
            "{:?}",
            p.reasons
        );
    }

    #[test]
    fn hw_detection_from_sysfs() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(detect_hw(&["software".into()], d.path()), None);
        assert_eq!(
            detect_hw(&["ibs_op".into(), "cpu".into()], d.path()),
            Some(HwPmu::AmdIbs)
        );
        assert_eq!(
            detect_hw(&["arm_spe_0".into()], d.path()),
            Some(HwPmu::ArmSpe("arm_spe_0".into()))
        );
        std::fs::create_dir_all(d.path().join("cpu/events")).unwrap();
        std::fs::write(d.path().join("cpu/events/mem-loads"), "event=0xcd").unwrap();
        assert_eq!(detect_hw(&["cpu".into()], d.path()), Some(HwPmu::IntelPebs));
    }

    #[test]
    fn backend_names_round_trip() {
        for b in ["auto", "hw", "numa-faults", "watch", "faults"] {
            assert_eq!(Backend::parse(b).unwrap().name(), b);
        }
        assert_eq!(Backend::parse("pebs"), None);
    }

    #[test]
    fn live_probe_here() {
        // This VM: no hardware PMU, breakpoint PMU works, so auto is watch (or faults if the
        // breakpoint PMU is refused, e.g. inside a restricted container).
        let p = Probe::run();
        assert!(p.faults_ok.is_ok(), "{:?}", p.faults_ok);
        assert!(matches!(
            p.auto,
            Backend::Watch | Backend::Faults | Backend::Hw
        ));
        assert!(p.to_string().contains("auto backend:"));
    }
}
