//! The machine as a tree of the levels that matter for sharing
//! (machine, package, NUMA node, L3, L2, core, PU), built from hwloc
//! (live machine, XML file or synthetic description) and restricted to a cpuset.
//!
//! Strategies only see [`Topology`]; how it was loaded does not matter to them.

use crate::error::{MapError, Result};
use serde::{Deserialize, Serialize};

mod cpulist;
mod hwloc;
mod trial;

pub use cpulist::{format_cpu_list, parse_cpu_list};
pub use hwloc::{hwloc_xml, quiet_hwloc};

/// Tree levels, outermost first. Their order is the nesting order, with one exception: a NUMA
/// node may sit at any depth above the cores. Most machines have NUMA nodes inside packages
/// (or inside an L3, or a die), but some have one NUMA node spanning several packages, and
/// Intel's sub-NUMA clustering puts two NUMA nodes under one shared L3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Machine,
    Package,
    Numa,
    L3,
    L2,
    Core,
    Pu,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Machine => "machine",
            Level::Package => "package",
            Level::Numa => "numa",
            Level::L3 => "l3",
            Level::L2 => "l2",
            Level::Core => "core",
            Level::Pu => "pu",
        }
    }
}

/// A recursive description used to build a [`Topology`] (from hwloc or by hand in tests).
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSpec {
    pub level: Level,
    /// OS index for PUs, cores and NUMA nodes; logical index otherwise.
    pub os_index: u32,
    pub children: Vec<NodeSpec>,
}

impl NodeSpec {
    pub fn new(level: Level, os_index: u32, children: Vec<NodeSpec>) -> Self {
        NodeSpec {
            level,
            os_index,
            children,
        }
    }
}

/// One vertex of the topology tree.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub level: Level,
    pub os_index: u32,
    pub parent: Option<usize>,
    /// Number of edges from the root (root = 0).
    pub depth: u32,
    /// Indices into [`Topology::nodes`].
    pub children: Vec<usize>,
    /// Indices into [`Topology::pus`] of every PU below this node, in tree order.
    pub pus: Vec<usize>,
}

/// A processing unit (hardware thread) available to the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pu {
    /// OS index (what `sched_setaffinity` and `Cpus_allowed_list` use).
    pub os_index: u32,
    /// OS index of the core the PU belongs to (hwloc's `P#`; on real Linux machines core OS
    /// indexes restart in every package, so they are not unique machine-wide: use the tree,
    /// not this number, to find a PU's siblings). The PU's own OS index when there is no core.
    pub core: u32,
    /// OS index of the NUMA node the PU belongs to.
    pub numa: u32,
    /// Index of this PU's leaf in [`Topology::nodes`].
    pub node: usize,
}

/// A NUMA node as seen by the job: only the PUs inside the restriction count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumaNode {
    pub os_index: u32,
    /// Indices into [`Topology::pus`], in tree order.
    pub pus: Vec<usize>,
}

impl NumaNode {
    /// How many threads this node takes before the machine is oversubscribed.
    pub fn capacity(&self) -> usize {
        self.pus.len()
    }
}

/// What an I/O [`Device`] is, for placement: tasks want their GPUs and NICs near their cores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    /// A GPU or other accelerator (hwloc's GPU and co-processor OS devices: CUDA, NVML,
    /// ROCm SMI, OpenCL, Level Zero, DRM).
    Gpu,
    /// A network interface (hwloc's OpenFabrics and network OS devices).
    Nic,
}

impl DeviceKind {
    pub fn name(self) -> &'static str {
        match self {
            DeviceKind::Gpu => "GPU",
            DeviceKind::Nic => "NIC",
        }
    }
}

/// One physical device (one PCI function), with the names its drivers give it and where it
/// hangs in the machine. Locality is the whole machine's, whatever the restriction: a job's
/// cpuset does not move a GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Device {
    pub kind: DeviceKind,
    /// hwloc's OS device names, most specific first (`cuda0`, `nvml0`, `card1`; `mlx5_0`,
    /// `ib0`): what CUDA/ROCm/verbs call it.
    pub names: Vec<String>,
    /// OS indexes of the PUs local to it (the cpuset of its first non-I/O ancestor).
    pub local_pus: Vec<u32>,
    /// OS indexes of the NUMA nodes of those PUs.
    pub numa: Vec<u32>,
}

impl Device {
    /// The name to show: the most specific one.
    pub fn name(&self) -> &str {
        self.names.first().map_or("?", String::as_str)
    }
}

/// A NUMA node with memory but no PUs of its own in the tree: KNL's MCDRAM in flat mode, a CXL
/// memory expander, HBM beside DDR under one cpuset. No thread can run there, so no plan puts
/// one there; where a program's memory goes is its own choice (or `numactl`'s).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryNode {
    pub os_index: u32,
    /// Its memory, in bytes (0 when the topology does not say).
    pub bytes: u64,
    /// hwloc's subtype (`MCDRAM`, `GPUMemory`, ...), empty when it has none.
    pub kind: String,
    /// OS indexes of the PUs it is local to (hwloc's cpuset for it; empty when attached to no
    /// CPU-side object).
    pub local_pus: Vec<u32>,
    /// OS indexes of the NUMA nodes with PUs that share those PUs: where threads that want this
    /// memory close should run.
    pub near: Vec<u32>,
}

/// The topology tree, its PUs in tree order, and its NUMA nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct Topology {
    pub nodes: Vec<Node>,
    pub pus: Vec<Pu>,
    pub numa: Vec<NumaNode>,
    /// Relative NUMA distances (hwloc/ACPI SLIT style, 10 = local), indexed like [`Self::numa`].
    pub distances: Option<Vec<Vec<f64>>>,
    /// Where it came from ("live", a file path, or the synthetic string), for summaries.
    pub source: String,
    /// The cpuset (Linux list format) this topology was restricted to, if any.
    pub restricted_to: Option<String>,
    /// GPUs and NICs with their locality (empty for synthetic topologies and machines
    /// without them), in hwloc's order.
    pub devices: Vec<Device>,
    /// NUMA nodes with memory and no PUs of their own ([`MemoryNode`]); not in [`Self::numa`].
    pub memory_only: Vec<MemoryNode>,
}

/// The NUMA nodes' PU counts as the summary line writes them: each one for up to four nodes
/// (`4+4`), runs of equal counts beyond (`16 × 128`, `8 × 128 + 2 × 64`), so a big machine's
/// line stays readable.
fn capacities(caps: &[usize]) -> String {
    if caps.len() <= 4 {
        let each: Vec<String> = caps.iter().map(usize::to_string).collect();
        return each.join("+");
    }
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &c in caps {
        match runs.last_mut() {
            Some((n, v)) if *v == c => *n += 1,
            _ => runs.push((1, c)),
        }
    }
    let runs: Vec<String> = runs
        .iter()
        .map(|&(n, v)| {
            if n == 1 {
                v.to_string()
            } else {
                format!("{n} × {v}")
            }
        })
        .collect();
    runs.join(" + ")
}

impl Topology {
    /// Build from a tree description. The root is node 0. Every PU must lie below exactly one
    /// NUMA node; a tree without a NUMA level is treated as a single NUMA node 0.
    pub fn build(root: &NodeSpec, source: impl Into<String>) -> Result<Self> {
        let mut t = Topology {
            nodes: Vec::new(),
            pus: Vec::new(),
            numa: Vec::new(),
            distances: None,
            source: source.into(),
            restricted_to: None,
            devices: Vec::new(),
            memory_only: Vec::new(),
        };
        t.add(root, None, None, None)?;
        if t.pus.is_empty() {
            return Err(MapError::Topology("topology has no PUs".into()));
        }
        if t.numa.is_empty() {
            t.numa.push(NumaNode {
                os_index: 0,
                pus: (0..t.pus.len()).collect(),
            });
        }
        let mut seen = std::collections::BTreeSet::new();
        for p in &t.pus {
            if !seen.insert(p.os_index) {
                return Err(MapError::Topology(format!(
                    "PU {} appears twice in the tree",
                    p.os_index
                )));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for n in &t.numa {
            if !seen.insert(n.os_index) {
                return Err(MapError::Topology(format!(
                    "NUMA node {} appears twice in the tree",
                    n.os_index
                )));
            }
        }
        Ok(t)
    }

    fn add(
        &mut self,
        spec: &NodeSpec,
        parent: Option<usize>,
        numa: Option<u32>,
        core: Option<u32>,
    ) -> Result<usize> {
        let id = self.nodes.len();
        let depth = parent.map_or(0, |p| self.nodes[p].depth + 1);
        self.nodes.push(Node {
            level: spec.level,
            os_index: spec.os_index,
            parent,
            depth,
            children: Vec::new(),
            pus: Vec::new(),
        });
        let numa = match spec.level {
            Level::Numa => {
                if numa.is_some() {
                    return Err(MapError::Topology(format!(
                        "NUMA node {} is nested inside another NUMA node",
                        spec.os_index
                    )));
                }
                self.numa.push(NumaNode {
                    os_index: spec.os_index,
                    pus: Vec::new(),
                });
                Some(spec.os_index)
            }
            _ => numa,
        };
        let core = if spec.level == Level::Core {
            Some(spec.os_index)
        } else {
            core
        };
        if spec.level == Level::Pu {
            if !spec.children.is_empty() {
                return Err(MapError::Topology(format!(
                    "PU {} has children",
                    spec.os_index
                )));
            }
            let pu = self.pus.len();
            self.pus.push(Pu {
                os_index: spec.os_index,
                core: core.unwrap_or(spec.os_index),
                numa: numa.unwrap_or(0),
                node: id,
            });
            if let Some(n) = numa {
                if let Some(nn) = self.numa.iter_mut().find(|x| x.os_index == n) {
                    nn.pus.push(pu);
                }
            }
            self.nodes[id].pus.push(pu);
            return Ok(id);
        }
        // Levels must get deeper going down, except that a NUMA node may sit anywhere above
        // the cores, so compare with the nearest ancestor that is not a NUMA node.
        let outer = self.outer_level(id);
        for c in &spec.children {
            let bad = if c.level == Level::Numa {
                spec.level >= Level::Core
            } else {
                c.level <= outer
            };
            if bad {
                return Err(MapError::Topology(format!(
                    "{} {} is below {} {}",
                    c.level.name(),
                    c.os_index,
                    spec.level.name(),
                    spec.os_index
                )));
            }
            let cid = self.add(c, Some(id), numa, core)?;
            self.nodes[id].children.push(cid);
            let cp = self.nodes[cid].pus.clone();
            self.nodes[id].pus.extend(cp);
        }
        Ok(id)
    }

    /// Level of the nearest ancestor-or-self of `id` that is not a NUMA node (machine if none).
    fn outer_level(&self, mut id: usize) -> Level {
        loop {
            let n = &self.nodes[id];
            if n.level != Level::Numa {
                return n.level;
            }
            match n.parent {
                Some(p) => id = p,
                None => return Level::Machine,
            }
        }
    }

    /// The root node index.
    pub fn root(&self) -> usize {
        0
    }

    /// Number of PUs available.
    pub fn num_pus(&self) -> usize {
        self.pus.len()
    }

    /// Position of NUMA node `os_index` in [`Self::numa`].
    pub fn numa_position(&self, os_index: u32) -> Option<usize> {
        self.numa.iter().position(|n| n.os_index == os_index)
    }

    /// Position of the PU with OS index `os` in [`Self::pus`].
    pub fn pu_position(&self, os: u32) -> Option<usize> {
        self.pus.iter().position(|p| p.os_index == os)
    }

    /// Number of edges between PU `a` and PU `b` (indices into [`Self::pus`]) through their
    /// lowest common ancestor: 0 for the same PU, 2 for two PUs of one core, and so on up.
    pub fn hops(&self, a: usize, b: usize) -> u32 {
        let (mut x, mut y) = (self.pus[a].node, self.pus[b].node);
        let mut h = 0;
        while x != y {
            let (dx, dy) = (self.nodes[x].depth, self.nodes[y].depth);
            if dx >= dy {
                x = self.nodes[x].parent.unwrap_or(x);
                h += 1;
            }
            if dy >= dx {
                y = self.nodes[y].parent.unwrap_or(y);
                h += 1;
            }
        }
        h
    }

    /// Cost of communication between PUs `a` and `b`, for EagerMap's quality metric
    /// (Σ `A[i][j]` / distance). It is the tree distance [`Self::hops`], multiplied across NUMA
    /// nodes by the NUMA latency ratio `d(na, nb) / d(local)` when hwloc distances are known
    /// (e.g. 21/10 = 2.1× for SLIT 10/21), so both cache sharing and the NUMA factor count.
    /// Two threads on the *same* PU share everything, so their distance is 1: less than two
    /// PUs of one core (2), and never 0 (the metric divides by it).
    pub fn distance(&self, a: usize, b: usize) -> f64 {
        if a == b {
            return 1.0;
        }
        let hops = f64::from(self.hops(a, b));
        hops * self.numa_factor(self.pus[a].numa, self.pus[b].numa)
    }

    /// NUMA latency of `na`→`nb` relative to local access (1 without distances or on one node).
    pub fn numa_factor(&self, na: u32, nb: u32) -> f64 {
        let Some(d) = &self.distances else {
            return 1.0;
        };
        if na == nb {
            return 1.0;
        }
        let (Some(i), Some(j)) = (self.numa_position(na), self.numa_position(nb)) else {
            return 1.0;
        };
        let local = (d[i][i] + d[j][j]) / 2.0;
        let remote = (d[i][j] + d[j][i]) / 2.0;
        if local > 0.0 && remote > 0.0 {
            remote / local
        } else {
            1.0
        }
    }

    /// The same topology with only the PUs whose OS index is in `cpuset` (e.g. a job's
    /// allocation). Subtrees left without PUs disappear, so NUMA nodes keep only the capacity
    /// the job has there (possibly uneven, possibly zero → the node is gone). Distances are
    /// cut down to the remaining NUMA nodes.
    pub fn restrict(&self, cpuset: &[u32]) -> Result<Topology> {
        if cpuset.is_empty() {
            return Err(MapError::Topology(
                "cannot restrict to an empty cpuset".into(),
            ));
        }
        let outside: Vec<u32> = cpuset
            .iter()
            .copied()
            .filter(|&c| self.pu_position(c).is_none())
            .collect();
        if !outside.is_empty() {
            let have: Vec<u32> = self.pus.iter().map(|p| p.os_index).collect();
            return Err(MapError::Topology(format!(
                "cpuset names PU{} {} outside the topology (it has PUs {})",
                if outside.len() == 1 { "" } else { "s" },
                format_cpu_list(&outside),
                format_cpu_list(&have)
            )));
        }
        let keep: Vec<bool> = self
            .pus
            .iter()
            .map(|p| cpuset.contains(&p.os_index))
            .collect();
        let spec = self
            .spec_of(self.root(), &keep)
            .ok_or_else(|| MapError::Topology("restriction leaves no PUs".into()))?;
        let mut t = Topology::build(&spec, self.source.clone())?;
        t.restricted_to = Some(format_cpu_list(cpuset));
        t.devices = self.devices.clone();
        t.memory_only = self.memory_only.clone();
        if let Some(d) = &self.distances {
            let pos: Vec<usize> = t
                .numa
                .iter()
                .filter_map(|n| self.numa_position(n.os_index))
                .collect();
            t.distances = Some(
                pos.iter()
                    .map(|&i| pos.iter().map(|&j| d[i][j]).collect())
                    .collect(),
            );
        }
        Ok(t)
    }

    /// The subtree under `id` as a [`NodeSpec`], keeping only PUs with `keep[pu]`.
    fn spec_of(&self, id: usize, keep: &[bool]) -> Option<NodeSpec> {
        let n = &self.nodes[id];
        if n.level == Level::Pu {
            let pu = n.pus[0];
            return keep[pu].then(|| NodeSpec::new(Level::Pu, n.os_index, Vec::new()));
        }
        let children: Vec<NodeSpec> = n
            .children
            .iter()
            .filter_map(|&c| self.spec_of(c, keep))
            .collect();
        (!children.is_empty() || id == self.root())
            .then(|| NodeSpec::new(n.level, n.os_index, children))
            .filter(|s| !s.children.is_empty())
    }

    /// Cores of NUMA node `k` (index into [`Self::numa`]) inside the restriction; a PU without
    /// a core above it counts as its own core.
    pub fn numa_cores(&self, k: usize) -> usize {
        let mut cores: Vec<usize> = self.numa[k]
            .pus
            .iter()
            .map(|&p| {
                let leaf = self.pus[p].node;
                match self.nodes[leaf].parent {
                    Some(c) if self.nodes[c].level == Level::Core => c,
                    _ => leaf,
                }
            })
            .collect();
        cores.sort_unstable();
        cores.dedup();
        cores.len()
    }

    /// Number of tree nodes at `level`.
    pub fn count(&self, level: Level) -> usize {
        self.nodes.iter().filter(|n| n.level == level).count()
    }

    /// One line: source, restriction, counts, per-NUMA capacity, whether distances are known.
    /// Example: `pack:2 numa:2 core:4 pu:2: 2 packages, 4 NUMA nodes (8+8+8+8 PUs), 16 cores, 32 PUs`.
    pub fn summary_line(&self) -> String {
        let plural =
            |k: usize, one: &str, many: &str| format!("{k} {}", if k == 1 { one } else { many });
        let mut s = self.source.clone();
        if let Some(r) = &self.restricted_to {
            s.push_str(&format!(" restricted to {r}"));
        }
        let caps: Vec<usize> = self.numa.iter().map(|n| n.capacity()).collect();
        let cores = match self.count(Level::Core) {
            0 => self.pus.len(),
            c => c,
        };
        s.push_str(&format!(
            ": {}, {} ({} PUs), {}, {}",
            plural(self.count(Level::Package).max(1), "package", "packages"),
            plural(self.numa.len(), "NUMA node", "NUMA nodes"),
            capacities(&caps),
            plural(cores, "core", "cores"),
            plural(self.pus.len(), "PU", "PUs"),
        ));
        if self.distances.is_some() {
            s.push_str(", NUMA distances");
        }
        if !self.memory_only.is_empty() {
            s.push_str(&format!(
                ", {} memory-only NUMA node{}",
                self.memory_only.len(),
                if self.memory_only.len() == 1 { "" } else { "s" }
            ));
        }
        for kind in [DeviceKind::Gpu, DeviceKind::Nic] {
            let k = self.devices.iter().filter(|d| d.kind == kind).count();
            if k > 0 {
                s.push_str(&format!(
                    ", {k} {}{}",
                    kind.name(),
                    if k == 1 { "" } else { "s" }
                ));
            }
        }
        s
    }

    /// The devices of `kind` local to NUMA node `os_index`.
    pub fn devices_on_numa(&self, kind: DeviceKind, os_index: u32) -> Vec<&Device> {
        self.devices
            .iter()
            .filter(|d| d.kind == kind && d.numa.contains(&os_index))
            .collect()
    }

    /// OS indexes of the NUMA nodes of the PUs `pus` (OS indexes; those this topology does not
    /// have are ignored), sorted, each once.
    pub fn numa_of_pus(&self, pus: &[u32]) -> Vec<u32> {
        let mut numa: Vec<u32> = pus
            .iter()
            .filter_map(|&p| self.pu_position(p).map(|i| self.pus[i].numa))
            .collect();
        numa.sort_unstable();
        numa.dedup();
        numa
    }

    /// The names of the GPUs, then of the NICs, local to NUMA node `os_index`; kinds without
    /// a device there are left out (what `cmlb map`'s table and the report's figure show).
    pub fn device_names_on_numa(&self, os_index: u32) -> Vec<(DeviceKind, Vec<&str>)> {
        [DeviceKind::Gpu, DeviceKind::Nic]
            .into_iter()
            .map(|kind| {
                let names = self
                    .devices_on_numa(kind, os_index)
                    .iter()
                    .map(|d| d.name())
                    .collect::<Vec<_>>();
                (kind, names)
            })
            .filter(|(_, names)| !names.is_empty())
            .collect()
    }

    /// Attach `devices` and the memory-only NUMA nodes (from hwloc) and locate them on this
    /// topology's NUMA nodes.
    pub(crate) fn with_io_and_memory(
        mut self,
        devices: Vec<Device>,
        memory_only: Vec<MemoryNode>,
    ) -> Topology {
        self.devices = devices
            .into_iter()
            .map(|d| Device {
                numa: self.numa_of_pus(&d.local_pus),
                ..d
            })
            .collect();
        for m in memory_only {
            if self.numa.iter().any(|n| n.os_index == m.os_index) {
                continue;
            }
            let near = self.numa_of_pus(&m.local_pus);
            self.memory_only.push(MemoryNode { near, ..m });
        }
        self
    }

    /// A multi-line, human-readable description: the summary line, the tree with OS indexes
    /// (`P#`) of NUMA nodes, cores and PUs and the capacity of every NUMA node, and the NUMA
    /// distance matrix when known.
    pub fn summary(&self) -> String {
        let mut out = format!("{}\n", self.summary_line());
        self.summary_node(self.root(), 0, &mut out);
        if !self.memory_only.is_empty() {
            out.push_str(
                "memory-only NUMA nodes (no PUs: never a thread's place; near = where threads \
                 that want it run):\n",
            );
            for m in &self.memory_only {
                let near: Vec<String> = m.near.iter().map(|n| format!("P#{n}")).collect();
                out.push_str(&format!(
                    "  numa P#{}{}: {}; near {}\n",
                    m.os_index,
                    if m.kind.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", m.kind)
                    },
                    fmt_bytes(m.bytes),
                    if near.is_empty() {
                        "no PUs".to_string()
                    } else {
                        format!(
                            "numa {} (PUs {})",
                            near.join(","),
                            format_cpu_list(&m.local_pus)
                        )
                    }
                ));
            }
        }
        if !self.devices.is_empty() {
            out.push_str("devices (local NUMA nodes; local PUs; all names):\n");
            for d in &self.devices {
                let numa: Vec<String> = d.numa.iter().map(|n| format!("P#{n}")).collect();
                out.push_str(&format!(
                    "  {} {}: numa {}; PUs {}; {}\n",
                    d.kind.name(),
                    d.name(),
                    if numa.is_empty() {
                        "-".to_string()
                    } else {
                        numa.join(",")
                    },
                    format_cpu_list(&d.local_pus),
                    d.names.join(" ")
                ));
            }
        }
        if let Some(d) = &self.distances {
            out.push_str("NUMA distances (relative latency, 10 = local):\n");
            out.push_str("      ");
            for n in &self.numa {
                out.push_str(&format!(" {:>6}", format!("P#{}", n.os_index)));
            }
            out.push('\n');
            for (n, row) in self.numa.iter().zip(d) {
                out.push_str(&format!("{:>6}", format!("P#{}", n.os_index)));
                for v in row {
                    out.push_str(&format!(" {v:>6}"));
                }
                out.push('\n');
            }
        }
        out
    }

    fn summary_node(&self, id: usize, indent: usize, out: &mut String) {
        let n = &self.nodes[id];
        let pad = "  ".repeat(indent);
        let pu_list = |n: &Node| {
            let os: Vec<u32> = n.pus.iter().map(|&p| self.pus[p].os_index).collect();
            format_cpu_list(&os)
        };
        match n.level {
            Level::Machine => out.push_str(&format!("{pad}machine ({})\n", pus_text(n.pus.len()))),
            Level::Numa => out.push_str(&format!(
                "{pad}numa P#{}: capacity {} ({})\n",
                n.os_index,
                pus_text(n.pus.len()),
                pu_list(n)
            )),
            Level::Core => {
                // Cores are the bulk of the output: one line each, with their PUs.
                out.push_str(&format!("{pad}core P#{}: PU {}\n", n.os_index, pu_list(n)));
                return;
            }
            Level::Pu => {
                out.push_str(&format!("{pad}pu P#{}\n", n.os_index));
                return;
            }
            l => out.push_str(&format!(
                "{pad}{} L#{} ({})\n",
                l.name(),
                n.os_index,
                pus_text(n.pus.len())
            )),
        }
        for &c in &n.children {
            self.summary_node(c, indent + 1, out);
        }
    }
}

fn pus_text(k: usize) -> String {
    if k == 1 {
        "1 PU".into()
    } else {
        format!("{k} PUs")
    }
}

/// Bytes as the largest binary unit that keeps a whole number above 1 (`16 GiB`, `512 MiB`).
fn fmt_bytes(b: u64) -> String {
    if b == 0 {
        return "size unknown".into();
    }
    for (unit, shift) in [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if b >> shift >= 1 {
            let v = b as f64 / (1u64 << shift) as f64;
            return if (v - v.round()).abs() < 0.05 {
                format!("{} {unit}", v.round() as u64)
            } else {
                format!("{v:.1} {unit}")
            };
        }
    }
    format!("{b} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numa_capacities_stay_readable_on_big_machines() {
        assert_eq!(capacities(&[4, 4]), "4+4");
        assert_eq!(capacities(&[2, 2, 2, 1]), "2+2+2+1");
        assert_eq!(capacities(&[128; 32]), "32 × 128");
        assert_eq!(
            capacities(&[128, 128, 128, 64, 64, 32]),
            "3 × 128 + 2 × 64 + 32"
        );
    }

    fn core(os: u32, pus: &[u32]) -> NodeSpec {
        NodeSpec::new(
            Level::Core,
            os,
            pus.iter()
                .map(|&p| NodeSpec::new(Level::Pu, p, vec![]))
                .collect(),
        )
    }

    #[test]
    fn numa_may_sit_above_packages_or_below_l3_but_not_below_cores() {
        let numa_over_pack = NodeSpec::new(
            Level::Machine,
            0,
            vec![NodeSpec::new(
                Level::Numa,
                0,
                vec![NodeSpec::new(Level::Package, 0, vec![core(0, &[0])])],
            )],
        );
        assert!(Topology::build(&numa_over_pack, "t").is_ok());
        let numa_under_l3 = NodeSpec::new(
            Level::L3,
            0,
            vec![NodeSpec::new(Level::Numa, 3, vec![core(0, &[0, 1])])],
        );
        let t = Topology::build(&numa_under_l3, "t").unwrap();
        assert_eq!(t.numa[0].os_index, 3);
        let numa_under_core = NodeSpec::new(
            Level::Core,
            0,
            vec![NodeSpec::new(
                Level::Numa,
                0,
                vec![NodeSpec::new(Level::Pu, 0, vec![])],
            )],
        );
        let e = Topology::build(&numa_under_core, "t").unwrap_err();
        assert_eq!(e.to_string(), "topology: numa 0 is below core 0");
    }

    #[test]
    fn levels_must_nest_and_indexes_be_unique() {
        let l3_in_core = NodeSpec::new(
            Level::Machine,
            0,
            vec![NodeSpec::new(
                Level::Core,
                0,
                vec![NodeSpec::new(Level::L3, 0, vec![])],
            )],
        );
        let e = Topology::build(&l3_in_core, "t").unwrap_err();
        assert_eq!(e.to_string(), "topology: l3 0 is below core 0");
        // A NUMA node between a package and an L3 does not let the L3 climb above the package.
        let pack_in_l3 = NodeSpec::new(
            Level::L3,
            0,
            vec![NodeSpec::new(
                Level::Numa,
                0,
                vec![NodeSpec::new(Level::Package, 0, vec![core(0, &[0])])],
            )],
        );
        assert!(Topology::build(&pack_in_l3, "t").is_err());
        let dup = NodeSpec::new(Level::Machine, 0, vec![core(0, &[0, 1]), core(1, &[1])]);
        let e = Topology::build(&dup, "t").unwrap_err();
        assert_eq!(e.to_string(), "topology: PU 1 appears twice in the tree");
    }

    #[test]
    fn hops_count_edges_through_the_lowest_common_ancestor() {
        // machine -> numa0 -> {core0: pu0 pu1, core1: pu2}, numa1 -> pu3 (no core)
        let spec = NodeSpec::new(
            Level::Machine,
            0,
            vec![
                NodeSpec::new(Level::Numa, 0, vec![core(0, &[0, 1]), core(1, &[2])]),
                NodeSpec::new(Level::Numa, 1, vec![NodeSpec::new(Level::Pu, 3, vec![])]),
            ],
        );
        let t = Topology::build(&spec, "t").unwrap();
        assert_eq!(t.hops(0, 1), 2);
        assert_eq!(t.hops(1, 2), 4);
        assert_eq!(t.hops(2, 3), 5);
        assert_eq!(t.hops(3, 2), 5);
        assert_eq!(t.distance(2, 3), 5.0);
        assert_eq!(t.pus[3].core, 3);
        let mut d = t.clone();
        d.distances = Some(vec![vec![10.0, 20.0], vec![20.0, 10.0]]);
        assert_eq!(d.distance(2, 3), 10.0);
        assert_eq!(d.distance(0, 1), 2.0);
        assert_eq!(d.numa_factor(0, 1), 2.0);
    }
}
