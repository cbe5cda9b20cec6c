//! Loading a [`Topology`] from hwloc (crate `hwlocality`): live machine, XML file or
//! synthetic description, converted into the [`NodeSpec`] tree of the levels that matter.
//!
//! Conversion rules:
//! * Machine, Package, L3, L2, Core and PU become tree nodes; every other CPU-side object
//!   (Group, Die, L1/L1i, L4/L5, ...) is dropped and its children move up to its parent.
//! * In hwloc 2.x NUMA nodes are *memory children* of the CPU-side object with the same
//!   cpuset. That object gets a NUMA level: below it when it is the machine or a package
//!   (`package → numa → l3`), replacing it when it is a dropped object (Group/Die), and above it
//!   otherwise (`numa → l3`, `numa → core`). NUMA nodes without PUs (CXL/HBM-only memory) are
//!   skipped; when several NUMA nodes share one cpuset (DDR + HBM) the first one is kept.
//! * A NUMA latency matrix (hwloc distances of NUMA nodes, e.g. `NUMALatency` from the OS or
//!   added with `hwloc-annotate`) becomes [`Topology::distances`]; bandwidth matrices are
//!   ignored.

use super::{Level, NodeSpec, Topology};
use crate::error::{MapError, Result};
use hwlocality::object::distance::DistancesKind;
use hwlocality::object::types::ObjectType;
use hwlocality::object::TopologyObject;
use std::path::Path;

/// hwloc prints parse diagnostics on stderr by default. Programs that report errors
/// themselves (the `cmlb` CLI) call this once at start-up, before starting threads.
pub fn quiet_hwloc() {
    for var in ["HWLOC_XML_VERBOSE", "HWLOC_SYNTHETIC_VERBOSE"] {
        if std::env::var_os(var).is_none() {
            std::env::set_var(var, "0");
        }
    }
}

/// Run an hwlocality call, turning the rare panics it uses for "impossible" errno values
/// into a topology error instead of tearing the caller down.
fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|_| {
        Err(MapError::Topology(format!(
            "{what}: hwloc failed unexpectedly"
        )))
    })
}

/// Where a topology comes from; see [`Topology::load`].
enum Source<'a> {
    Live,
    Xml(&'a Path),
    Synthetic(&'a str),
}

impl<'a> Source<'a> {
    fn parse(spec: &'a str) -> Self {
        let s = spec.trim();
        if s == "live" {
            return Source::Live;
        }
        let path = Path::new(s);
        // Synthetic descriptions never contain '/': anything path-like is a file to read, so
        // a directory or a typo in a path gets a file error, not a synthetic-syntax one.
        if path.exists() || s.contains('/') || s.to_ascii_lowercase().ends_with(".xml") {
            Source::Xml(path)
        } else {
            Source::Synthetic(s)
        }
    }

    fn name(&self) -> String {
        match self {
            Source::Live => "live".into(),
            Source::Xml(p) => p.display().to_string(),
            Source::Synthetic(s) => s.to_string(),
        }
    }

    /// Load it with hwloc.
    fn open(&self) -> Result<hwlocality::Topology> {
        let name = self.name();
        guarded(&name, || match self {
            Source::Live => hwlocality::Topology::new().map_err(|e| {
                MapError::Topology(format!("hwloc could not read this machine's topology: {e}"))
            }),
            Source::Xml(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| MapError::io(*path, e))?;
                let invalid = || {
                    MapError::Topology(format!(
                        "{name}: not a valid hwloc XML topology (create one with \
                         `lstopo-no-graphics --of xml FILE.xml`)"
                    ))
                };
                hwlocality::Topology::builder()
                    .from_xml(&text)
                    .map_err(|_| invalid())?
                    .build()
                    .map_err(|_| invalid())
            }
            Source::Synthetic(description) => {
                let invalid = || {
                    MapError::Topology(format!(
                        "hwloc rejected the synthetic description \"{description}\" (expected \
                         space-separated TYPE:COUNT levels from the machine down to PUs, e.g. \
                         \"pack:2 numa:2 l3:1 core:8 pu:2\"; types: pack, numa, group, die, \
                         l1..l5, core, pu)"
                    ))
                };
                if description.is_empty() {
                    return Err(invalid());
                }
                // hwloc builds every object: a typo like core:99999999 would take minutes and GBs.
                let pus = synthetic_pus(description);
                if pus > MAX_SYNTHETIC_PUS {
                    return Err(MapError::Topology(format!(
                        "the synthetic description \"{description}\" describes {pus} PUs; cmlb \
                         handles at most {MAX_SYNTHETIC_PUS} (check the counts)"
                    )));
                }
                let widest = synthetic_counts(description).into_iter().max().unwrap_or(1);
                if widest > MAX_SYNTHETIC_ARITY {
                    return Err(MapError::Topology(format!(
                        "the synthetic description \"{description}\" puts {widest} objects under \
                         one parent; cmlb handles at most {MAX_SYNTHETIC_ARITY} per level (split \
                         them, e.g. numa:8 core:1024 instead of core:8192)"
                    )));
                }
                hwlocality::Topology::builder()
                    .from_synthetic(description)
                    .map_err(|_| invalid())?
                    .build()
                    .map_err(|_| invalid())
            }
        })
    }

    fn load(&self) -> Result<Topology> {
        let t = self.open()?;
        guarded(&self.name(), || convert(&t, &self.name()))
    }
}

/// Largest synthetic machine accepted: above the largest shared-memory machines (~9 000 PUs).
/// hwloc's synthetic build is superlinear (here: 8 192 PUs 0.3 s, 16 384 PUs 2.5–8.6 s with
/// at most [`MAX_SYNTHETIC_ARITY`] objects per parent).
pub const MAX_SYNTHETIC_PUS: u128 = 1 << 14;

/// Most objects under one parent in a synthetic description. hwloc's build time grows about
/// with the cube of it (measured: core:2048 0.3 s, core:4096 2.5 s, core:8192 21 s, and
/// core:8192 pu:2 70 s); real machines have at most a few hundred cores per package.
pub const MAX_SYNTHETIC_ARITY: u128 = 1024;

/// The `TYPE:COUNT` counts of a synthetic description, top down (tokens it cannot read are
/// left out and left to hwloc to judge).
fn synthetic_counts(description: &str) -> Vec<u128> {
    description
        .split_whitespace()
        .filter_map(|tok| {
            // hwloc also accepts bare counts ("4 4 2": types inferred), so they count too.
            let count = tok.split_once(':').map_or(tok, |(_, c)| c);
            let digits: String = count.chars().take_while(char::is_ascii_digit).collect();
            if digits.is_empty() {
                return None;
            }
            // Saturate: a count beyond u128 is simply too large.
            Some(digits.parse::<u128>().unwrap_or(u128::MAX))
        })
        .collect()
}

/// The number of PUs a synthetic description asks for: the product of its counts.
fn synthetic_pus(description: &str) -> u128 {
    synthetic_counts(description)
        .into_iter()
        .fold(1u128, |acc, c| acc.saturating_mul(c))
}

impl Topology {
    /// The machine this process runs on (only the PUs it is allowed to use, as hwloc reports
    /// by default inside cgroups/cpusets).
    pub fn live() -> Result<Topology> {
        Source::Live.load()
    }

    /// An hwloc XML file, as written by `lstopo --of xml` (optionally annotated with
    /// distances by `hwloc-annotate`).
    pub fn from_xml(path: impl AsRef<Path>) -> Result<Topology> {
        Source::Xml(path.as_ref()).load()
    }

    /// An hwloc synthetic description such as `"pack:2 numa:2 l3:1 core:8 pu:2"`.
    pub fn from_synthetic(description: &str) -> Result<Topology> {
        Source::Synthetic(description.trim()).load()
    }

    /// Load from `"live"`, a path to an hwloc XML file (an existing file, or any name ending in
    /// `.xml`), or otherwise an hwloc synthetic description.
    pub fn load(spec: &str) -> Result<Topology> {
        Source::parse(spec).load()
    }
}

/// hwloc's own XML export of the topology `spec` names (`live`, XML file, synthetic), with
/// its distances: a cache that [`Topology::from_xml`] (and `lstopo -i`) read back, e.g. to map
/// for a cluster node from elsewhere, or to skip discovery in the SPANK plugin.
pub fn hwloc_xml(spec: &str) -> Result<String> {
    let src = Source::parse(spec);
    let t = src.open()?;
    guarded(&src.name(), || {
        t.export_xml(hwlocality::topology::export::xml::XMLExportFlags::empty())
            .map(|x| x.as_str().to_string())
            .map_err(|e| MapError::Topology(format!("hwloc could not export XML: {e}")))
    })
}

/// hwloc tree → our tree, plus NUMA distances.
fn convert(t: &hwlocality::Topology, source: &str) -> Result<Topology> {
    let root = t.root_object();
    let mut specs = convert_object(root);
    let root_spec = match (specs.len(), specs.first().map(|s| s.level)) {
        (1, Some(Level::Machine)) => specs.remove(0),
        _ => NodeSpec::new(Level::Machine, 0, specs),
    };
    let mut topo = Topology::build(&root_spec, source)?;
    topo.distances = numa_distances(t, &topo);
    Ok(topo)
}

fn level_of(ty: ObjectType) -> Option<Level> {
    match ty {
        ObjectType::Machine => Some(Level::Machine),
        ObjectType::Package => Some(Level::Package),
        ObjectType::L3Cache => Some(Level::L3),
        ObjectType::L2Cache => Some(Level::L2),
        ObjectType::Core => Some(Level::Core),
        ObjectType::PU => Some(Level::Pu),
        _ => None,
    }
}

fn index_of(obj: &TopologyObject, level: Level) -> u32 {
    let logical = obj.logical_index();
    let idx = match level {
        Level::Pu | Level::Core | Level::Numa => obj.os_index().unwrap_or(logical),
        _ => logical,
    };
    u32::try_from(idx).unwrap_or(u32::MAX)
}

/// The NUMA node(s) attached to `obj` as memory children, looking through memory-side caches.
fn numa_children<'a>(obj: &'a TopologyObject, out: &mut Vec<&'a TopologyObject>) {
    for m in obj.memory_children() {
        if m.object_type() == ObjectType::NUMANode {
            out.push(m);
        } else {
            numa_children(m, out);
        }
    }
}

/// The NUMA node the PUs below `obj` use: the first attached one that has PUs.
fn local_numa(obj: &TopologyObject) -> Option<&TopologyObject> {
    let mut v = Vec::new();
    numa_children(obj, &mut v);
    v.into_iter()
        .find(|n| n.cpuset().is_some_and(|c| !c.is_empty()))
}

/// Convert one hwloc object; dropped objects return their converted children.
fn convert_object(obj: &TopologyObject) -> Vec<NodeSpec> {
    let children: Vec<NodeSpec> = obj.normal_children().flat_map(convert_object).collect();
    let level = level_of(obj.object_type());
    let numa = local_numa(obj).map(|n| index_of(n, Level::Numa));
    match (level, numa) {
        (Some(l), None) => vec![NodeSpec::new(l, index_of(obj, l), children)],
        (None, None) => children,
        (Some(l @ (Level::Machine | Level::Package)), Some(n)) => vec![NodeSpec::new(
            l,
            index_of(obj, l),
            vec![NodeSpec::new(Level::Numa, n, children)],
        )],
        (Some(l), Some(n)) => vec![NodeSpec::new(
            Level::Numa,
            n,
            vec![NodeSpec::new(l, index_of(obj, l), children)],
        )],
        (None, Some(n)) => vec![NodeSpec::new(Level::Numa, n, children)],
    }
}

/// The first NUMA latency matrix hwloc knows that covers every NUMA node of `topo`,
/// re-indexed like `topo.numa`.
fn numa_distances(t: &hwlocality::Topology, topo: &Topology) -> Option<Vec<Vec<f64>>> {
    let all = t.distances_with_type(None, ObjectType::NUMANode).ok()?;
    for d in &all {
        if d.kind().contains(DistancesKind::MEANS_BANDWIDTH) {
            continue;
        }
        let os: Vec<Option<u32>> = d
            .objects()
            .map(|o| o.map(|o| index_of(o, Level::Numa)))
            .collect();
        let pos: Option<Vec<usize>> = topo
            .numa
            .iter()
            .map(|n| os.iter().position(|&o| o == Some(n.os_index)))
            .collect();
        let Some(pos) = pos else {
            log::warn!("ignoring a NUMA distance matrix that does not cover every NUMA node");
            continue;
        };
        let k = os.len();
        let values = d.distances();
        if values.len() != k * k {
            continue;
        }
        return Some(
            pos.iter()
                .map(|&i| pos.iter().map(|&j| values[i * k + j] as f64).collect())
                .collect(),
        );
    }
    None
}

#[cfg(test)]
mod tests {

    /// Found by the `topology_synthetic` fuzz target (timeout-04f08174...): hwloc takes bare
    /// counts, and "44444444" (44 million PUs) ran for minutes past the PU limit.
    #[test]
    fn fuzz_regression_bare_count_is_limited() {
        let t0 = std::time::Instant::now();
        let e = Topology::from_synthetic("44444444")
            .unwrap_err()
            .to_string();
        assert!(e.contains("44444444 PUs"), "{e}");
        assert!(t0.elapsed().as_secs() < 2);
        assert_eq!(Topology::from_synthetic("2 2").unwrap().num_pus(), 4);
    }
    use super::*;

    #[test]
    fn wide_synthetic_levels_are_refused_before_hwloc_builds_them() {
        let e = Topology::from_synthetic("core:8192 pu:1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("puts 8192 objects under one parent"), "{e}");
        assert!(e.contains("at most 1024 per level"), "{e}");
        assert_eq!(
            synthetic_counts("numa:4(memory=1GB) core:1024 pu:2"),
            vec![4, 1024, 2]
        );
        Topology::from_synthetic("numa:2 core:1024 pu:1").expect("1024 per parent is fine");
    }

    #[test]
    fn synthetic_pu_count_is_the_product_of_the_counts() {
        assert_eq!(synthetic_pus("pack:2 numa:2 l3:1 core:8 pu:2"), 64);
        // Attributes after the count, and tokens without one, are left to hwloc.
        assert_eq!(synthetic_pus("numa:4(memory=1GB) core:4 pu:1"), 16);
        assert_eq!(synthetic_pus("bogus core:3"), 3);
        let big = 99_999_999_999u128;
        assert_eq!(
            synthetic_pus("core:99999999999 pu:99999999999 pu:99999999999"),
            big * big * big
        );
        assert_eq!(synthetic_pus(&"core:4294967295 ".repeat(8)), u128::MAX);
    }
}
