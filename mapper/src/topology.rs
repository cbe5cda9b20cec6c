//! The machine as a tree of the levels that matter for sharing
//! (machine, package, NUMA node, L3, L2, core, PU), built from hwloc
//! (live machine, XML file or synthetic description) and restricted to a cpuset.
//!
//! Strategies only see [`Topology`]; how it was loaded does not matter to them.

use crate::error::{MapError, Result};
use serde::{Deserialize, Serialize};

/// Tree levels, outermost first. Their order is the nesting order.
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
    /// OS index of the core the PU belongs to.
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
        self.nodes.push(Node {
            level: spec.level,
            os_index: spec.os_index,
            parent,
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
        for c in &spec.children {
            if c.level < spec.level || (c.level == spec.level && c.level != Level::Pu) {
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
}
