//! perf_event attr settings for precise memory sampling, as plain data: which PMU (its type
//! number from `/sys/bus/event_source/devices/<pmu>/type`), `config`/`config1`/`config2`,
//! `precise_ip`, `sample_type`, period. The live backend opens them; the probe reports them.
//!
//! Event encodings are taken from the PMU's own sysfs description where it has one
//! (`events/<alias>` such as `event=0xcd,umask=0x1,ldlat=3`, and `format/<field>` such as
//! `config1:0-15`), the way `perf` resolves `cpu/mem-loads/`; only the thesis's raw Intel
//! events are hard-coded.

use super::record::HW_SAMPLE_TYPE;
use crate::error::{ProfileError, Result};
use crate::sample::AccessKind;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the kernel lists PMUs.
pub const SYSFS_PMUS: &str = "/sys/bus/event_source/devices";

/// `PERF_TYPE_RAW`: raw core-PMU event codes.
pub const PERF_TYPE_RAW: u32 = 4;

/// The thesis's sample period (section 3.2.3, Table 3-1: 2K balances accuracy and overhead).
pub const THESIS_PERIOD: u64 = 2000;

/// Intel `MEM_UOPS_RETIRED.ALL_LOADS` (event 0xD0, umask 0x81; `MEM_INST_RETIRED.ALL_LOADS`
/// from Skylake on, same code), the thesis's load event. With it the kernel's DATA_SRC only
/// says "load" (no cache level), so it cannot feed a DRAM-only load vector.
pub const INTEL_ALL_LOADS: u64 = 0x81d0;
/// Intel `MEM_UOPS_RETIRED.ALL_STORES` (event 0xD0, umask 0x82), the thesis's store event.
pub const INTEL_ALL_STORES: u64 = 0x82d0;

/// One event to open, as plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HwEvent {
    /// Short description, e.g. `cpu/mem-loads,ldlat=3/`.
    pub label: String,
    /// PMU name in sysfs (`cpu`, `cpu_core`, `ibs_op`, `arm_spe_0`).
    pub pmu: String,
    /// `perf_event_attr.type`.
    pub pmu_type: u32,
    pub config: u64,
    pub config1: u64,
    pub config2: u64,
    pub precise_ip: u8,
    pub sample_type: u64,
    pub sample_period: u64,
    pub exclude_kernel: bool,
    pub exclude_hv: bool,
    /// What the event samples.
    pub samples: AccessKind,
    /// True when samples arrive as an AUX-area trace (Arm SPE), not as sample records with
    /// DATA_SRC; cmlb decodes those only through `perf script` import.
    pub aux_trace: bool,
    /// True when DATA_SRC tells DRAM from cache hits (the load vector can be DRAM-only).
    pub data_src_has_level: bool,
    /// A counting event the sampling event must be grouped under (Intel `mem-loads-aux`).
    pub group_leader: Option<GroupLeader>,
    /// The CPUs whose PMU this is, when it is not every CPU: on hybrid parts `cpu_core` covers
    /// the P-cores and `cpu_atom` the E-cores (sysfs `<pmu>/cpus`), and the kernel refuses an
    /// event on a CPU of the other kind. `None`: every CPU.
    pub cpus: Option<Vec<usize>>,
}

impl HwEvent {
    /// Whether the event can be opened on `cpu`.
    pub fn covers(&self, cpu: usize) -> bool {
        self.cpus.as_ref().is_none_or(|c| c.contains(&cpu))
    }
}

/// A non-sampling event opened first, as the group leader of a sampling event. Intel parts
/// with `events/mem-loads-aux` in sysfs (Sapphire/Emerald/Granite Rapids, the P-cores of
/// Alder/Raptor Lake) fill the load-latency record's data-source fields only when that event
/// is scheduled with `mem-loads`, so the kernel refuses a `mem-loads` sampler outside such a
/// group with ENODATA; `perf mem` opens `{cpu/mem-loads-aux/,cpu/mem-loads/}` the same way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupLeader {
    /// Short description, e.g. `cpu/mem-loads-aux/ (event=0x03,umask=0x82)`.
    pub label: String,
    /// `perf_event_attr.type`.
    pub pmu_type: u32,
    pub config: u64,
    pub config1: u64,
    pub config2: u64,
}

/// Read `<sysfs>/<pmu>/type`.
pub fn pmu_type(sysfs: &Path, pmu: &str) -> Result<u32> {
    let p = sysfs.join(pmu).join("type");
    let text = std::fs::read_to_string(&p).map_err(|e| ProfileError::io(&p, e))?;
    text.trim().parse().map_err(|_| {
        ProfileError::import(&p, 1, format!("'{}' is not a PMU type number", text.trim()))
    })
}

/// The CPUs a PMU covers, from `<sysfs>/<pmu>/cpus` (hybrid PMUs have it; `None` without it).
pub fn pmu_cpus(sysfs: &Path, pmu: &str) -> Result<Option<Vec<usize>>> {
    let p = sysfs.join(pmu).join("cpus");
    let Ok(text) = std::fs::read_to_string(&p) else {
        return Ok(None);
    };
    mapper::parse_cpu_list(&text)
        .map(|c| Some(c.into_iter().map(|c| c as usize).collect()))
        .map_err(|e| ProfileError::import(&p, 1, e.to_string()))
}

/// Which attr word a format field lives in, and its bit ranges (low, high inclusive).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatField {
    pub word: usize,
    pub ranges: Vec<(u32, u32)>,
}

/// Parse a sysfs format file's content: `config:0-7`, `config1:0-15`, `config:0-7,32-35`,
/// `config2:5`.
pub fn parse_format(text: &str) -> std::result::Result<FormatField, String> {
    let text = text.trim();
    let (word, bits) = text
        .split_once(':')
        .ok_or_else(|| format!("'{text}' is not of the form configN:bits"))?;
    let word = match word {
        "config" => 0,
        "config1" => 1,
        "config2" => 2,
        "config3" => 3,
        w => return Err(format!("unknown attr word '{w}'")),
    };
    let mut ranges = Vec::new();
    for part in bits.split(',') {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part.trim(), part.trim()),
        };
        let lo: u32 = lo
            .parse()
            .map_err(|_| format!("bad bit '{lo}' in '{text}'"))?;
        let hi: u32 = hi
            .parse()
            .map_err(|_| format!("bad bit '{hi}' in '{text}'"))?;
        if lo > hi || hi > 63 {
            return Err(format!("bad bit range {lo}-{hi} in '{text}'"));
        }
        ranges.push((lo, hi));
    }
    Ok(FormatField { word, ranges })
}

/// All format fields of a PMU (`<sysfs>/<pmu>/format/*`).
pub fn read_formats(sysfs: &Path, pmu: &str) -> Result<BTreeMap<String, FormatField>> {
    let dir = sysfs.join(pmu).join("format");
    let mut out = BTreeMap::new();
    let entries = std::fs::read_dir(&dir).map_err(|e| ProfileError::io(&dir, e))?;
    for e in entries {
        let e = e.map_err(|e| ProfileError::io(&dir, e))?;
        let path = e.path();
        let text = std::fs::read_to_string(&path).map_err(|err| ProfileError::io(&path, err))?;
        let f = parse_format(&text).map_err(|msg| ProfileError::import(&path, 1, msg))?;
        out.insert(e.file_name().to_string_lossy().into_owned(), f);
    }
    Ok(out)
}

/// Encode `term=value,...` (a sysfs event alias plus overrides; a bare term means `=1`) into
/// `[config, config1, config2, config3]` using the PMU's format fields.
pub fn encode_terms(
    terms: &str,
    formats: &BTreeMap<String, FormatField>,
) -> std::result::Result<[u64; 4], String> {
    let mut words = [0u64; 4];
    for term in terms.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let (name, value) = match term.split_once('=') {
            Some((n, v)) => (n.trim(), v.trim()),
            None => (term, "1"),
        };
        let value = if let Some(h) = value
            .strip_prefix("0x")
            .or_else(|| value.strip_prefix("0X"))
        {
            u64::from_str_radix(h, 16)
        } else {
            value.parse()
        }
        .map_err(|_| format!("term '{term}': '{value}' is not a number"))?;
        let f = formats
            .get(name)
            .ok_or_else(|| format!("term '{term}': the PMU has no format field '{name}'"))?;
        // Scatter the value's bits over the field's ranges, low bits first.
        let mut v = value;
        let mut width_total = 0u32;
        for &(lo, hi) in &f.ranges {
            let width = hi - lo + 1;
            let mask = if width == 64 {
                u64::MAX
            } else {
                (1u64 << width) - 1
            };
            words[f.word] = (words[f.word] & !(mask << lo)) | ((v & mask) << lo);
            v = if width == 64 { 0 } else { v >> width };
            width_total += width;
        }
        if v != 0 {
            return Err(format!(
                "term '{term}': value does not fit the field's {width_total} bits"
            ));
        }
    }
    Ok(words)
}

fn read_alias(sysfs: &Path, pmu: &str, alias: &str) -> Option<(PathBuf, String)> {
    let p = sysfs.join(pmu).join("events").join(alias);
    std::fs::read_to_string(&p)
        .ok()
        .map(|t| (p, t.trim().to_string()))
}

fn build(sysfs: &Path, pmu: &str, terms: &str, label: String) -> Result<(u32, [u64; 4], String)> {
    let ty = pmu_type(sysfs, pmu)?;
    let formats = read_formats(sysfs, pmu)?;
    let words = encode_terms(terms, &formats).map_err(|msg| {
        ProfileError::import(sysfs.join(pmu).join("format"), 1, format!("{label}: {msg}"))
    })?;
    Ok((ty, words, label))
}

/// Intel PEBS through the core PMU's `mem-loads` (load latency, with `ldlat` as threshold in
/// cycles: `None` keeps the alias's own, usually 3, which samples almost every load) and
/// `mem-stores` aliases, as `perf mem record` uses them. `core_pmu` is `cpu`, or `cpu_core`
/// on hybrid parts. `precise_ip` 2 ("pp"); some parts accept 3, a caller may retry lower
/// on EINVAL as perf's `:P` does.
pub fn intel_pebs(
    sysfs: &Path,
    core_pmu: &str,
    period: u64,
    ldlat: Option<u16>,
) -> Result<Vec<HwEvent>> {
    let mut out = Vec::new();
    let cpus = pmu_cpus(sysfs, core_pmu)?;
    let (_, loads) = read_alias(sysfs, core_pmu, "mem-loads").ok_or_else(|| {
        ProfileError::import(
            sysfs.join(core_pmu).join("events/mem-loads"),
            1,
            "no mem-loads event: this CPU/kernel has no PEBS load-latency sampling",
        )
    })?;
    let mut terms = loads;
    if let Some(l) = ldlat {
        terms.push_str(&format!(",ldlat={l}"));
    }
    // One precise ("pp") sampler of the core PMU from an alias's terms.
    let pebs = |name: &str, terms: &str, samples, data_src_has_level| -> Result<HwEvent> {
        let (ty, w, label) = build(
            sysfs,
            core_pmu,
            terms,
            format!("{core_pmu}/{name}/ ({terms})"),
        )?;
        Ok(HwEvent {
            label,
            pmu: core_pmu.to_string(),
            pmu_type: ty,
            config: w[0],
            config1: w[1],
            config2: w[2],
            precise_ip: 2,
            sample_type: HW_SAMPLE_TYPE,
            sample_period: period,
            exclude_kernel: true,
            exclude_hv: true,
            samples,
            aux_trace: false,
            data_src_has_level,
            group_leader: None,
            cpus: cpus.clone(),
        })
    };
    let mut load = pebs("mem-loads", &terms, AccessKind::Load, true)?;
    load.group_leader = mem_loads_aux(sysfs, core_pmu)?;
    out.push(load);
    if let Some((_, stores)) = read_alias(sysfs, core_pmu, "mem-stores") {
        // Precise stores report only L1 hit/miss.
        out.push(pebs("mem-stores", &stores, AccessKind::Store, false)?);
    }
    Ok(out)
}

/// The core PMU's `mem-loads-aux` alias as a group leader, where the PMU has one.
fn mem_loads_aux(sysfs: &Path, core_pmu: &str) -> Result<Option<GroupLeader>> {
    let Some((_, terms)) = read_alias(sysfs, core_pmu, "mem-loads-aux") else {
        return Ok(None);
    };
    let (ty, w, label) = build(
        sysfs,
        core_pmu,
        &terms,
        format!("{core_pmu}/mem-loads-aux/ ({terms})"),
    )?;
    Ok(Some(GroupLeader {
        label,
        pmu_type: ty,
        config: w[0],
        config1: w[1],
        config2: w[2],
    }))
}

/// The thesis's own events (MEM_UOPS_RETIRED.ALL_LOADS / ALL_STORES as raw PEBS events). They
/// need no sysfs alias, but their DATA_SRC carries no cache level.
pub fn intel_thesis_events(period: u64) -> Vec<HwEvent> {
    [
        (
            "MEM_UOPS_RETIRED.ALL_LOADS",
            INTEL_ALL_LOADS,
            AccessKind::Load,
        ),
        (
            "MEM_UOPS_RETIRED.ALL_STORES",
            INTEL_ALL_STORES,
            AccessKind::Store,
        ),
    ]
    .into_iter()
    .map(|(name, config, kind)| HwEvent {
        label: format!("{name} (raw {config:#x})"),
        pmu: "cpu".into(),
        pmu_type: PERF_TYPE_RAW,
        config,
        config1: 0,
        config2: 0,
        precise_ip: 2,
        sample_type: HW_SAMPLE_TYPE,
        sample_period: period,
        exclude_kernel: true,
        exclude_hv: true,
        samples: kind,
        aux_trace: false,
        data_src_has_level: false,
        group_leader: None,
        cpus: None,
    })
    .collect()
}

/// AMD IBS op sampling (`ibs_op` PMU). Counts dispatched ops (`cnt_ctl=1`) when the PMU has
/// that format field, else cycles; the kernel fills DATA_SRC from IbsOpData2/3 (Linux 6.1+)
/// and ADDR from IbsDcLinAddr. IBS tags every kind of op: samples without a data address are
/// dropped by [`super::record::HwSample::to_sample`]. IBS does not honour exclude_kernel on
/// many kernels (EINVAL), so kernel samples are filtered by cpumode instead.
pub fn amd_ibs_op(sysfs: &Path, period: u64) -> Result<HwEvent> {
    let formats = read_formats(sysfs, "ibs_op")?;
    let terms = if formats.contains_key("cnt_ctl") {
        "cnt_ctl=1"
    } else {
        ""
    };
    let (ty, w, label) = build(sysfs, "ibs_op", terms, format!("ibs_op/{terms}/"))?;
    Ok(HwEvent {
        label,
        pmu: "ibs_op".into(),
        pmu_type: ty,
        config: w[0],
        config1: w[1],
        config2: w[2],
        precise_ip: 0,
        sample_type: HW_SAMPLE_TYPE,
        // The IBS max-count field drops the low 4 bits.
        sample_period: period.max(16) & !0xf,
        exclude_kernel: false,
        exclude_hv: false,
        samples: AccessKind::Unknown,
        aux_trace: false,
        data_src_has_level: true,
        group_leader: None,
        cpus: None,
    })
}

/// Arm SPE (`arm_spe_N`): loads and stores with timestamps. SPE delivers an AUX-area trace
/// of SPE packets rather than sample records; cmlb does not decode that trace live — record
/// with `perf mem record` / `perf record -e arm_spe//` and import `perf script` output.
pub fn arm_spe(sysfs: &Path, pmu: &str, period: u64) -> Result<HwEvent> {
    let formats = read_formats(sysfs, pmu)?;
    let mut terms: Vec<&str> = Vec::new();
    for t in ["ts_enable", "load_filter", "store_filter"] {
        if formats.contains_key(t) {
            terms.push(t);
        }
    }
    let terms = terms.join(",");
    let (ty, w, label) = build(sysfs, pmu, &terms, format!("{pmu}/{terms}/"))?;
    Ok(HwEvent {
        label,
        pmu: pmu.to_string(),
        pmu_type: ty,
        config: w[0],
        config1: w[1],
        config2: w[2],
        precise_ip: 0,
        sample_type: HW_SAMPLE_TYPE,
        sample_period: period,
        exclude_kernel: true,
        exclude_hv: true,
        samples: AccessKind::Unknown,
        aux_trace: true,
        data_src_has_level: true,
        group_leader: None,
        cpus: None,
    })
}

/// Fake sysfs PMU directories for tests.
#[cfg(test)]
pub(crate) mod fake_sysfs {
    use std::path::Path;

    /// A fake sysfs PMU directory.
    pub(crate) fn pmu(
        root: &Path,
        name: &str,
        ty: u32,
        formats: &[(&str, &str)],
        events: &[(&str, &str)],
    ) {
        let d = root.join(name);
        std::fs::create_dir_all(d.join("format")).unwrap();
        std::fs::create_dir_all(d.join("events")).unwrap();
        std::fs::write(d.join("type"), format!("{ty}\n")).unwrap();
        for (f, v) in formats {
            std::fs::write(d.join("format").join(f), format!("{v}\n")).unwrap();
        }
        for (e, v) in events {
            std::fs::write(d.join("events").join(e), format!("{v}\n")).unwrap();
        }
    }

    pub(crate) const INTEL_FORMATS: &[(&str, &str)] = &[
        ("event", "config:0-7"),
        ("umask", "config:8-15"),
        ("edge", "config:18"),
        ("inv", "config:23"),
        ("cmask", "config:24-31"),
        ("ldlat", "config1:0-15"),
    ];
}

#[cfg(test)]
mod tests {
    use super::fake_sysfs::*;
    use super::*;

    #[test]
    fn format_parsing() {
        assert_eq!(
            parse_format("config:0-7\n").unwrap(),
            FormatField {
                word: 0,
                ranges: vec![(0, 7)]
            }
        );
        assert_eq!(
            parse_format("config1:0-15").unwrap(),
            FormatField {
                word: 1,
                ranges: vec![(0, 15)]
            }
        );
        assert_eq!(
            parse_format("config:0-7,32-35").unwrap().ranges,
            vec![(0, 7), (32, 35)]
        );
        assert_eq!(parse_format("config2:5").unwrap().ranges, vec![(5, 5)]);
        assert!(parse_format("config:9-3").is_err());
        assert!(parse_format("config:0-64").is_err());
        assert!(parse_format("bogus").is_err());
        assert!(parse_format("config7:1").is_err());
    }

    #[test]
    fn term_encoding_scatters_bits() {
        let mut f = BTreeMap::new();
        f.insert(
            "event".to_string(),
            parse_format("config:0-7,32-35").unwrap(),
        );
        f.insert("ldlat".to_string(), parse_format("config1:0-15").unwrap());
        f.insert("flag".to_string(), parse_format("config2:3").unwrap());
        let w = encode_terms("event=0x1cd,ldlat=30,flag", &f).unwrap();
        assert_eq!(w[0], 0xcd | (0x1 << 32));
        assert_eq!(w[1], 30);
        assert_eq!(w[2], 1 << 3);
        assert!(encode_terms("event=0x1fff", &f)
            .unwrap_err()
            .contains("does not fit"));
        assert!(encode_terms("nosuch=1", &f)
            .unwrap_err()
            .contains("no format field"));
        assert!(encode_terms("event=zz", &f)
            .unwrap_err()
            .contains("not a number"));
    }

    #[test]
    fn intel_mem_loads_and_stores_from_sysfs() {
        let d = tempfile::tempdir().unwrap();
        pmu(
            d.path(),
            "cpu",
            4,
            INTEL_FORMATS,
            &[
                ("mem-loads", "event=0xcd,umask=0x1,ldlat=3"),
                ("mem-stores", "event=0xd0,umask=0x82"),
            ],
        );
        let ev = intel_pebs(d.path(), "cpu", 2000, None).unwrap();
        assert_eq!(ev.len(), 2);
        assert_eq!(ev[0].pmu_type, 4);
        assert_eq!(ev[0].config, 0x01cd);
        assert_eq!(ev[0].config1, 3);
        assert_eq!(ev[0].precise_ip, 2);
        assert_eq!(ev[0].sample_type, HW_SAMPLE_TYPE);
        assert_eq!(ev[0].sample_period, 2000);
        assert_eq!(ev[0].samples, AccessKind::Load);
        assert!(ev[0].data_src_has_level);
        assert_eq!(ev[1].config, INTEL_ALL_STORES);
        assert_eq!(ev[1].samples, AccessKind::Store);
        assert!(!ev[1].data_src_has_level);
        // ldlat override, perf mem's default of 30
        let ev = intel_pebs(d.path(), "cpu", 2000, Some(30)).unwrap();
        assert_eq!(ev[0].config1, 30);
        // No mem-loads-aux alias (Skylake to Ice Lake): mem-loads opens on its own.
        assert_eq!(ev[0].group_leader, None);
    }

    /// Sapphire Rapids' sysfs (its aliases as the kernel exports them): mem-loads is opened
    /// under the mem-loads-aux counter (0x8203, the config the kernel looks for), mem-stores
    /// alone. On the hybrid parts the same aliases sit under `cpu_core`.
    #[test]
    fn intel_mem_loads_get_the_aux_leader_where_sysfs_has_it() {
        for core in ["cpu", "cpu_core"] {
            let d = tempfile::tempdir().unwrap();
            pmu(
                d.path(),
                core,
                8,
                INTEL_FORMATS,
                &[
                    ("mem-loads", "event=0xcd,umask=0x1,ldlat=3"),
                    ("mem-loads-aux", "event=0x03,umask=0x82"),
                    ("mem-stores", "event=0xcd,umask=0x2"),
                ],
            );
            let ev = intel_pebs(d.path(), core, 2000, Some(3)).unwrap();
            let leader = ev[0].group_leader.as_ref().expect("aux leader");
            assert_eq!(leader.pmu_type, 8);
            assert_eq!(leader.config, 0x8203);
            assert_eq!((leader.config1, leader.config2), (0, 0));
            assert!(leader.label.starts_with(&format!("{core}/mem-loads-aux/")));
            assert_eq!(ev[0].config, 0x01cd);
            assert_eq!(ev[1].samples, AccessKind::Store);
            assert_eq!(ev[1].group_leader, None);
        }
    }

    /// Hybrid parts: each core PMU's events carry its `cpus`, and only `cpu_core` (P-cores)
    /// has the aux leader. A `cpus` file that is no CPU list is an error naming it.
    #[test]
    fn hybrid_core_pmus_cover_their_own_cpus() {
        let d = tempfile::tempdir().unwrap();
        pmu(
            d.path(),
            "cpu_core",
            8,
            INTEL_FORMATS,
            &[
                ("mem-loads", "event=0xcd,umask=0x1,ldlat=3"),
                ("mem-loads-aux", "event=0x03,umask=0x82"),
            ],
        );
        std::fs::write(d.path().join("cpu_core/cpus"), "0-7\n").unwrap();
        pmu(
            d.path(),
            "cpu_atom",
            10,
            INTEL_FORMATS,
            &[("mem-loads", "event=0xd0,umask=0x5,ldlat=3")],
        );
        std::fs::write(d.path().join("cpu_atom/cpus"), "8-15\n").unwrap();
        let p = intel_pebs(d.path(), "cpu_core", 2000, None).unwrap();
        assert_eq!(p.len(), 1);
        assert!(p[0].covers(0) && p[0].covers(7) && !p[0].covers(8));
        assert!(p[0].group_leader.is_some());
        let e = intel_pebs(d.path(), "cpu_atom", 2000, None).unwrap();
        assert!(e[0].covers(8) && e[0].covers(15) && !e[0].covers(7));
        assert_eq!((e[0].pmu_type, e[0].config), (10, 0x05d0));
        assert_eq!(e[0].group_leader, None);
        // Without a cpus file (not hybrid): every CPU.
        assert_eq!(pmu_cpus(d.path(), "nosuch").unwrap(), None);

        std::fs::write(d.path().join("cpu_atom/cpus"), "8-x\n").unwrap();
        let err = intel_pebs(d.path(), "cpu_atom", 2000, None).unwrap_err();
        assert!(err.to_string().contains("cpu_atom/cpus"), "{err}");
    }

    #[test]
    fn intel_without_pebs_aliases_is_a_clear_error() {
        let d = tempfile::tempdir().unwrap();
        pmu(d.path(), "cpu", 4, INTEL_FORMATS, &[]);
        let e = intel_pebs(d.path(), "cpu", 2000, None).unwrap_err();
        assert!(
            e.to_string().contains("no PEBS load-latency sampling"),
            "{e}"
        );
    }

    #[test]
    fn thesis_raw_events() {
        let ev = intel_thesis_events(THESIS_PERIOD);
        assert_eq!(ev[0].config, 0x81d0);
        assert_eq!(ev[1].config, 0x82d0);
        assert!(ev
            .iter()
            .all(|e| e.pmu_type == PERF_TYPE_RAW && e.precise_ip == 2));
    }

    #[test]
    fn amd_ibs_op_from_sysfs() {
        let d = tempfile::tempdir().unwrap();
        pmu(d.path(), "ibs_op", 11, &[("cnt_ctl", "config:19")], &[]);
        let e = amd_ibs_op(d.path(), 2000).unwrap();
        assert_eq!(e.pmu_type, 11);
        assert_eq!(e.config, 1 << 19);
        assert_eq!(e.precise_ip, 0);
        assert_eq!(e.sample_period, 2000);
        assert!(!e.exclude_kernel);
        let e = amd_ibs_op(d.path(), 2007).unwrap();
        assert_eq!(e.sample_period, 2000, "low 4 bits dropped");
    }

    #[test]
    fn arm_spe_from_sysfs() {
        let d = tempfile::tempdir().unwrap();
        pmu(
            d.path(),
            "arm_spe_0",
            9,
            &[
                ("ts_enable", "config:0"),
                ("pa_enable", "config:1"),
                ("load_filter", "config:33"),
                ("store_filter", "config:34"),
                ("min_latency", "config2:0-11"),
            ],
            &[],
        );
        let e = arm_spe(d.path(), "arm_spe_0", 2000).unwrap();
        assert_eq!(e.pmu_type, 9);
        assert_eq!(e.config, 1 | (1 << 33) | (1 << 34));
        assert!(e.aux_trace);
    }

    #[test]
    fn missing_or_bad_sysfs_files_name_the_file() {
        let d = tempfile::tempdir().unwrap();
        let e = pmu_type(d.path(), "ibs_op").unwrap_err();
        assert!(e.to_string().contains("ibs_op/type"), "{e}");
        pmu(
            d.path(),
            "ibs_op",
            11,
            &[("cnt_ctl", "config:nineteen")],
            &[],
        );
        let e = amd_ibs_op(d.path(), 2000).unwrap_err();
        assert!(e.to_string().contains("format/cnt_ctl"), "{e}");
        std::fs::write(d.path().join("ibs_op/type"), "eleven").unwrap();
        let e = pmu_type(d.path(), "ibs_op").unwrap_err();
        assert!(e.to_string().contains("not a PMU type number"), "{e}");
    }
}
