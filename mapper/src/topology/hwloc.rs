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
//!   skipped; when several NUMA nodes share one cpuset (DDR + HBM) the first one is kept. Those
//!   nodes are not lost: they become [`Topology::memory_only`], with their size, subtype and
//!   the PUs they are local to.
//! * A NUMA latency matrix (hwloc distances of NUMA nodes, e.g. `NUMALatency` from the OS or
//!   added with `hwloc-annotate`) becomes [`Topology::distances`]; bandwidth matrices are
//!   ignored.
//!
//! * GPUs and NICs (hwloc's OS devices of types GPU, co-processor, OpenFabrics and network)
//!   become [`Topology::devices`], one per PCI function with all its names, located by the
//!   cpuset of their first non-I/O ancestor. Display-only adapters (a server's BMC VGA) are not
//!   GPUs.
//!
//! An XML file is parsed and converted in a forked child first ([`trial`]): hwloc 2.9.0
//! crashes on some malformed files, and the caller may be slurmstepd. The child sends back
//! the converted tree, so loading a file costs one parse, not two.

use super::{trial, Device, DeviceKind, Level, MemoryNode, NodeSpec, Topology};
use crate::error::{MapError, Result};
use hwlocality::object::attributes::ObjectAttributes;
use hwlocality::object::distance::DistancesKind;
use hwlocality::object::types::{OSDeviceType, ObjectType};
use hwlocality::object::TopologyObject;
use hwlocality::topology::builder::TypeFilter;
use std::io::Read;
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

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

/// Every use of hwloc in this process, one at a time: an XML file is parsed in a forked
/// child ([`trial`]), which must not inherit hwloc's or the loader's locks held by another
/// thread (tests and library users load topologies from several threads). Loading is rare
/// and short, so nothing waits in practice.
fn hwloc_lock() -> MutexGuard<'static, ()> {
    static HWLOC: Mutex<()> = Mutex::new(());
    HWLOC.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Largest XML file read: an hwloc export of a 16 384-PU machine (the synthetic limit) is
/// about 17 MB, so this leaves room and keeps a wrong path (a log, a device) from being read
/// into memory whole.
pub const MAX_XML_BYTES: u64 = 64 << 20;

/// How long the child may take to parse and convert an XML file. A 17 MB file (16 384 PUs)
/// takes about 0.5 s here; only a hang inside hwloc comes near it, and it bounds how long a
/// step start can wait (slurmstepd runs this in `user_init`).
const XML_DEADLINE: Duration = Duration::from_secs(10);

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

    /// Load it with hwloc in this process. An XML file is never opened here before it
    /// loaded in a child ([`checked_in_child`]).
    fn open(&self, xml_text: Option<&str>) -> Result<hwlocality::Topology> {
        let name = self.name();
        guarded(&name, || match self {
            Source::Live => {
                let failed = |e: String| {
                    MapError::Topology(format!("hwloc could not read this machine's topology: {e}"))
                };
                // I/O objects are off by default in hwloc; GPUs and NICs are what tasks must
                // stay near. Only what the kernel's sysfs tells (PCI, DRM, network and
                // OpenFabrics devices): hwloc's vendor-library backends would load CUDA,
                // NVML, ROCm SMI, Level Zero or an OpenCL ICD, or connect to an X display,
                // inside the caller, which may be slurmstepd before it forks the tasks (threads,
                // seconds of driver start-up). GPUs without an OS device of their own are
                // found from their PCI class ([`devices`]).
                let mut b = hwlocality::Topology::builder()
                    .with_io_type_filter(TypeFilter::KeepImportant)
                    .map_err(|e| failed(e.to_string()))?;
                // hwloc refuses to exclude a component this build does not have (EINVAL), and
                // a refused call consumes the builder: each name is tried on a throwaway one.
                for c in VENDOR_BACKENDS {
                    if hwlocality::Topology::builder().without_component(c).is_ok() {
                        b = b.without_component(c).map_err(|e| failed(e.to_string()))?;
                    }
                }
                b.build().map_err(|e| failed(e.to_string()))
            }
            Source::Xml(_) => {
                let invalid = || {
                    MapError::Topology(format!(
                        "{name}: not a valid hwloc XML topology (create one with \
                         `lstopo-no-graphics --of xml FILE.xml`)"
                    ))
                };
                hwlocality::Topology::builder()
                    .from_xml(xml_text.unwrap_or_default())
                    .map_err(|_| invalid())?
                    .with_io_type_filter(TypeFilter::KeepImportant)
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
                // hwloc builds every object: a typo like core:99999999 would take minutes and
                // GBs, so the counts are read here first, and only a description read whole
                // reaches hwloc.
                let counts = synthetic_counts(description).map_err(|token| {
                    MapError::Topology(format!(
                        "the synthetic description \"{description}\" is not space-separated \
                         TYPE:COUNT levels at \"{token}\" (counts are decimal, e.g. \
                         \"pack:2 numa:2 l3:1 core:8 pu:2\"; types: pack, numa, group, die, \
                         l1..l5, core, pu)"
                    ))
                })?;
                if counts.is_empty() {
                    return Err(invalid());
                }
                let pus = counts.iter().fold(1u128, |acc, &c| acc.saturating_mul(c));
                if pus > MAX_SYNTHETIC_PUS {
                    return Err(MapError::Topology(format!(
                        "the synthetic description \"{description}\" describes {pus} PUs; cmlb \
                         handles at most {MAX_SYNTHETIC_PUS} (check the counts)"
                    )));
                }
                let widest = counts.iter().copied().max().unwrap_or(1);
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

    /// The file's text, for an XML source.
    fn xml_text(&self) -> Result<Option<String>> {
        let Source::Xml(path) = self else {
            return Ok(None);
        };
        let file = std::fs::File::open(path).map_err(|e| MapError::io(*path, e))?;
        let mut bytes = Vec::new();
        file.take(MAX_XML_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| MapError::io(*path, e))?;
        if bytes.len() as u64 > MAX_XML_BYTES {
            return Err(MapError::Topology(format!(
                "{}: larger than {} MiB, which no hwloc XML topology is (an export of a \
                 16 384-PU machine is 17 MB): is it the right file?",
                path.display(),
                MAX_XML_BYTES >> 20
            )));
        }
        String::from_utf8(bytes).map(Some).map_err(|_| {
            MapError::Topology(format!(
                "{}: not a valid hwloc XML topology (not UTF-8 text)",
                path.display()
            ))
        })
    }

    /// Open and convert in this process: the trusted sources, or the child's work for XML.
    fn extract_here(&self, xml_text: Option<&str>) -> Result<Extract> {
        let t = self.open(xml_text)?;
        guarded(&self.name(), || Ok(extract(&t)))
    }

    /// Open and convert `xml_text` in a forked child ([`trial`]); hwloc crashing or hanging
    /// on a malformed file becomes an error naming the file.
    fn checked_in_child(&self, xml_text: &str) -> Result<Extract> {
        let name = self.name();
        let outcome = trial::run(XML_DEADLINE, || {
            self.extract_here(Some(xml_text))
                .map(|ex| ex.encode())
                .map_err(|e| e.to_string())
        })
        .map_err(|e| {
            MapError::Topology(format!(
                "{name}: could not start the process that checks an XML topology: {e}"
            ))
        })?;
        let died = |what: &str| {
            MapError::Topology(format!(
                "{name}: not a valid hwloc XML topology: hwloc {what} reading it (in a separate \
                 process, so nothing else was affected); create one with \
                 `lstopo-no-graphics --of xml FILE.xml`"
            ))
        };
        match outcome {
            trial::Outcome::Sent(bytes) => {
                Extract::decode(&bytes).ok_or_else(|| died("sent back an unreadable tree"))
            }
            // The child's error is already this module's message (a MapError::Topology).
            trial::Outcome::Refused(msg) => Err(MapError::Topology(
                msg.strip_prefix("topology: ").unwrap_or(&msg).to_string(),
            )),
            trial::Outcome::Died(what) => Err(died(&what)),
        }
    }

    fn load(&self) -> Result<Topology> {
        let _hwloc = hwloc_lock();
        let ex = match self.xml_text()? {
            Some(text) => self.checked_in_child(&text)?,
            None => self.extract_here(None)?,
        };
        ex.assemble(&self.name())
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

/// The object counts of a synthetic description, top down, or the first token that is not
/// `[TYPE:]COUNT[(ATTRIBUTES)]` (COUNT decimal, no leading zero) or an attached `[TYPE...]`.
///
/// Stricter than hwloc on purpose: hwloc reads counts with `strtoul(.., 0)` and does not need
/// a space between levels, so `core:0x2000` (hex), `core:010` (octal), `pu: 8192` and
/// `9049pu:2` (9049 objects, then 2 PUs each) are machines to it. A reading that differs from
/// hwloc's let such levels past the limits and hwloc ran for minutes (the last one was found
/// by the `topology_synthetic` fuzz target); with this grammar hwloc only ever gets a
/// description whose every count was read here.
fn synthetic_counts(description: &str) -> std::result::Result<Vec<u128>, &str> {
    let mut counts = Vec::new();
    for token in synthetic_tokens(description) {
        // An attached object, e.g. [numa(memory=1GB)]: one per parent, no count.
        if token.starts_with('[') && token.ends_with(']') && token.len() > 2 {
            continue;
        }
        let head = match token.split_once('(') {
            Some((head, attrs)) if attrs.ends_with(')') => head,
            Some(_) => return Err(token),
            None => token,
        };
        let count = match head.split_once(':') {
            Some((name, count)) => {
                let mut chars = name.chars();
                let named = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
                    && chars.all(|c| c.is_ascii_alphanumeric());
                if !named {
                    return Err(token);
                }
                count
            }
            // A bare count ("4 4 2": hwloc infers the types).
            None => head,
        };
        let decimal = count.bytes().all(|b| b.is_ascii_digit()) && !count.starts_with('0');
        if count.is_empty() || !decimal {
            return Err(token);
        }
        // Saturate: a count beyond u128 is simply too large.
        counts.push(count.parse::<u128>().unwrap_or(u128::MAX));
    }
    Ok(counts)
}

/// Split at spaces outside parentheses and brackets (hwloc's attributes may hold spaces:
/// `core:2(memory=1GB indexes=0,1)`). Only spaces, as in hwloc: a tab or a newline stays
/// inside its token, which the grammar above then refuses.
fn synthetic_tokens(description: &str) -> Vec<&str> {
    let mut tokens = Vec::new();
    let (mut depth, mut start) = (0i32, None);
    for (i, c) in description.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            _ => {}
        }
        if c == ' ' && depth <= 0 {
            if let Some(s) = start.take() {
                tokens.push(&description[s..i]);
            }
            depth = 0;
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        tokens.push(&description[s..]);
    }
    tokens
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
    let _hwloc = hwloc_lock();
    let src = Source::parse(spec);
    let text = src.xml_text()?;
    if let Some(text) = &text {
        src.checked_in_child(text)?;
    }
    let t = src.open(text.as_deref())?;
    guarded(&src.name(), || {
        t.export_xml(hwlocality::topology::export::xml::XMLExportFlags::empty())
            .map(|x| x.as_str().to_string())
            .map_err(|e| MapError::Topology(format!("hwloc could not export XML: {e}")))
    })
}

/// What is taken from hwloc: our tree and the NUMA latency matrices, plain data that crosses
/// from the child that parsed an XML file ([`Extract::encode`]) and becomes a [`Topology`]
/// in the caller ([`Extract::assemble`]).
#[derive(Debug, Clone, PartialEq)]
struct Extract {
    root: NodeSpec,
    latencies: Vec<Latency>,
    /// Located by [`Extract::assemble`] (`numa` empty until then).
    devices: Vec<Device>,
    /// NUMA nodes the tree does not hold (no PUs of their own), `near` empty until assembled.
    memory_only: Vec<MemoryNode>,
}

/// One hwloc distance matrix between NUMA nodes that is not a bandwidth.
#[derive(Debug, Clone, PartialEq)]
struct Latency {
    /// The OS index of each row's NUMA node (None: an object hwloc could not name).
    os: Vec<Option<u32>>,
    /// Row-major, `os.len()`² values when well formed.
    values: Vec<u64>,
}

/// hwloc tree → our tree and the latency matrices.
fn extract(t: &hwlocality::Topology) -> Extract {
    let mut specs = convert_object(t.root_object());
    let root = match (specs.len(), specs.first().map(|s| s.level)) {
        (1, Some(Level::Machine)) => specs.remove(0),
        _ => NodeSpec::new(Level::Machine, 0, specs),
    };
    let latencies = t
        .distances_with_type(None, ObjectType::NUMANode)
        .map(|all| {
            all.iter()
                .filter(|d| !d.kind().contains(DistancesKind::MEANS_BANDWIDTH))
                .map(|d| Latency {
                    os: d
                        .objects()
                        .map(|o| o.map(|o| index_of(o, Level::Numa)))
                        .collect(),
                    values: d.distances().to_vec(),
                })
                .collect()
        })
        .unwrap_or_default();
    let mut in_tree = Vec::new();
    numa_of_tree(&root, &mut in_tree);
    let memory_only = t
        .objects_with_type(ObjectType::NUMANode)
        .filter(|n| !in_tree.contains(&index_of(n, Level::Numa)))
        .map(|n| MemoryNode {
            os_index: index_of(n, Level::Numa),
            bytes: n.total_memory(),
            kind: n
                .subtype()
                .map(|k| k.to_string_lossy().into_owned())
                .unwrap_or_default(),
            local_pus: n.cpuset().map(|c| cpus_of(&c)).unwrap_or_default(),
            near: Vec::new(),
        })
        .collect();
    Extract {
        root,
        latencies,
        devices: devices(t),
        memory_only,
    }
}

/// OS indexes of the NUMA nodes in a converted tree.
fn numa_of_tree(n: &NodeSpec, out: &mut Vec<u32>) {
    if n.level == Level::Numa {
        out.push(n.os_index);
    }
    for c in &n.children {
        numa_of_tree(c, out);
    }
}

/// The OS indexes of a cpuset.
fn cpus_of(c: &hwlocality::cpu::cpuset::CpuSet) -> Vec<u32> {
    c.iter_set()
        .map(|i| u32::try_from(usize::from(i)).unwrap_or(u32::MAX))
        .collect()
}

/// hwloc discovery components that call into GPU vendors' libraries or a display server: never
/// used for the live machine (see [`Source::open`]).
const VENDOR_BACKENDS: [&str; 6] = ["cuda", "nvml", "rsmi", "levelzero", "opencl", "gl"];

/// PCI vendors whose display adapters are only a server's console (BMC VGA), never a GPU a
/// task computes on: ASPEED, Matrox.
const CONSOLE_VGA_VENDORS: [u16; 2] = [0x1a03, 0x102b];

/// PCI vendors of compute GPUs: NVIDIA, AMD/ATI, Intel. A display-class PCI device of theirs
/// without a GPU OS device (no DRM driver bound, vendor backends off) is still a GPU.
const GPU_VENDORS: [u16; 3] = [0x10de, 0x1002, 0x8086];

/// GPUs and NICs: hwloc's OS devices grouped by their PCI function (a V100 is `cuda0`,
/// `nvml0`, `card1` and `renderD128` at once), names most specific first.
fn devices(t: &hwlocality::Topology) -> Vec<Device> {
    /// One device being gathered: its PCI parent's key, kind, (rank, name)s and local PUs.
    struct Found {
        key: u64,
        kind: DeviceKind,
        names: Vec<(u8, String)>,
        pus: Vec<u32>,
    }
    let mut found: Vec<Found> = Vec::new();
    for obj in t.objects_with_type(ObjectType::OSDevice) {
        let Some(ObjectAttributes::OSDevice(a)) = obj.attributes() else {
            continue;
        };
        let name = obj
            .name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let kind = match a.device_type() {
            OSDeviceType::CoProcessor | OSDeviceType::GPU => DeviceKind::Gpu,
            OSDeviceType::OpenFabrics | OSDeviceType::Network => DeviceKind::Nic,
            _ => continue,
        };
        // Which name leads: the one the runtime's visible-device variables count in (CUDA,
        // ROCm SMI, Level Zero), then the management library's, then OpenCL and DRM nodes; for
        // NICs the verbs device (what UCX_NET_DEVICES names) before the interface.
        let starts = |p: &[&str]| p.iter().any(|p| name.starts_with(p));
        let rank = match a.device_type() {
            OSDeviceType::OpenFabrics => 0,
            OSDeviceType::Network => 1,
            _ if starts(&["cuda"]) => 0,
            _ if starts(&["rsmi", "ze"]) => 1,
            _ if starts(&["nvml"]) => 2,
            _ if starts(&["card", "renderD", "controlD"]) => 4,
            _ => 3,
        };
        let parent = obj.parent();
        if kind == DeviceKind::Gpu {
            let console = parent
                .and_then(|p| match p.attributes() {
                    Some(ObjectAttributes::PCIDevice(pci)) => Some(pci.vendor_id()),
                    _ => None,
                })
                .is_some_and(|v| CONSOLE_VGA_VENDORS.contains(&v));
            if console {
                continue;
            }
        }
        let key = parent.map_or(u64::MAX, |p| p.global_persistent_index());
        let pus: Vec<u32> = obj
            .first_non_io_ancestor()
            .and_then(|a| a.cpuset())
            .map(|c| cpus_of(&c))
            .unwrap_or_default();
        match found
            .iter_mut()
            .find(|f| f.key == key && f.kind == kind && key != u64::MAX)
        {
            Some(f) => f.names.push((rank, name)),
            None => found.push(Found {
                key,
                kind,
                names: vec![(rank, name)],
                pus,
            }),
        }
    }
    // Display-class PCI devices of GPU vendors that no GPU OS device stands for (an NVIDIA
    // GPU without nvidia-drm, seen through sysfs only): named by their PCI address.
    for pci in t.objects_with_type(ObjectType::PCIDevice) {
        let Some(ObjectAttributes::PCIDevice(a)) = pci.attributes() else {
            continue;
        };
        let display = a.class_id() >> 8 == 0x03;
        let intel_igpu = a.vendor_id() == 0x8086 && a.class_id() == 0x0300;
        if !display || !GPU_VENDORS.contains(&a.vendor_id()) || intel_igpu {
            continue;
        }
        let key = pci.global_persistent_index();
        if found
            .iter()
            .any(|f| f.key == key && f.kind == DeviceKind::Gpu)
        {
            continue;
        }
        let pus = pci
            .first_non_io_ancestor()
            .and_then(|a| a.cpuset())
            .map(|c| cpus_of(&c))
            .unwrap_or_default();
        found.push(Found {
            key,
            kind: DeviceKind::Gpu,
            names: vec![(
                5,
                format!(
                    "pci:{:04x}:{:02x}:{:02x}.{:x}",
                    a.domain(),
                    a.bus_id(),
                    a.bus_device(),
                    a.function()
                ),
            )],
            pus,
        });
    }
    found
        .into_iter()
        .map(|mut f| {
            f.names.sort();
            Device {
                kind: f.kind,
                names: f.names.into_iter().map(|(_, n)| n).collect(),
                local_pus: f.pus,
                numa: Vec::new(),
            }
        })
        .collect()
}

/// Levels in the order of their one-byte code in [`Extract::encode`].
const LEVEL_CODES: [Level; 7] = [
    Level::Machine,
    Level::Package,
    Level::Numa,
    Level::L3,
    Level::L2,
    Level::Core,
    Level::Pu,
];

/// Deeper than any tree [`Topology::build`] accepts (7 levels and a NUMA level), so a decoded
/// tree this deep is damage, and decoding stays far from the stack's end.
const MAX_DEPTH: usize = 32;

impl Extract {
    /// Little-endian: the tree in preorder (level code u8, OS index u32, child count u32),
    /// then the matrix count u32 and per matrix: k u32, k × (named u8, OS index u32), value
    /// count u32, values u64.
    fn encode(&self) -> Vec<u8> {
        fn node(n: &NodeSpec, out: &mut Vec<u8>) {
            let code = LEVEL_CODES.iter().position(|&l| l == n.level).unwrap_or(0);
            out.push(code as u8);
            out.extend_from_slice(&n.os_index.to_le_bytes());
            out.extend_from_slice(&(n.children.len() as u32).to_le_bytes());
            for c in &n.children {
                node(c, out);
            }
        }
        let mut out = Vec::new();
        node(&self.root, &mut out);
        out.extend_from_slice(&(self.latencies.len() as u32).to_le_bytes());
        for m in &self.latencies {
            out.extend_from_slice(&(m.os.len() as u32).to_le_bytes());
            for o in &m.os {
                out.push(u8::from(o.is_some()));
                out.extend_from_slice(&o.unwrap_or(0).to_le_bytes());
            }
            out.extend_from_slice(&(m.values.len() as u32).to_le_bytes());
            for v in &m.values {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        // Strings and PU lists as Rd::string and Rd::u32s read them.
        let string = |out: &mut Vec<u8>, s: &str| {
            out.extend_from_slice(&(s.len() as u32).to_le_bytes());
            out.extend_from_slice(s.as_bytes());
        };
        let u32s = |out: &mut Vec<u8>, v: &[u32]| {
            out.extend_from_slice(&(v.len() as u32).to_le_bytes());
            for x in v {
                out.extend_from_slice(&x.to_le_bytes());
            }
        };
        out.extend_from_slice(&(self.devices.len() as u32).to_le_bytes());
        for d in &self.devices {
            out.push(u8::from(d.kind == DeviceKind::Nic));
            out.extend_from_slice(&(d.names.len() as u32).to_le_bytes());
            for n in &d.names {
                string(&mut out, n);
            }
            u32s(&mut out, &d.local_pus);
        }
        out.extend_from_slice(&(self.memory_only.len() as u32).to_le_bytes());
        for m in &self.memory_only {
            out.extend_from_slice(&m.os_index.to_le_bytes());
            out.extend_from_slice(&m.bytes.to_le_bytes());
            string(&mut out, &m.kind);
            u32s(&mut out, &m.local_pus);
        }
        out
    }

    /// The inverse of [`Self::encode`]; None unless `bytes` is exactly one encoding.
    fn decode(bytes: &[u8]) -> Option<Extract> {
        struct Rd<'a>(&'a [u8]);
        impl Rd<'_> {
            fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
                let (head, rest) = self.0.split_first_chunk::<N>()?;
                self.0 = rest;
                Some(*head)
            }
            fn u8(&mut self) -> Option<u8> {
                self.take::<1>().map(|b| b[0])
            }
            fn u32(&mut self) -> Option<u32> {
                self.take().map(u32::from_le_bytes)
            }
            fn u64(&mut self) -> Option<u64> {
                self.take().map(u64::from_le_bytes)
            }
            /// A length (u32) and that many UTF-8 bytes.
            fn string(&mut self) -> Option<String> {
                let len = self.u32()? as usize;
                let bytes = self.0.get(..len)?;
                self.0 = &self.0[len..];
                String::from_utf8(bytes.to_vec()).ok()
            }
            /// A count (u32) and that many u32 values.
            fn u32s(&mut self) -> Option<Vec<u32>> {
                let mut v = Vec::new();
                for _ in 0..self.u32()? {
                    v.push(self.u32()?);
                }
                Some(v)
            }
            fn node(&mut self, depth: usize) -> Option<NodeSpec> {
                if depth > MAX_DEPTH {
                    return None;
                }
                let level = *LEVEL_CODES.get(usize::from(self.u8()?))?;
                let os_index = self.u32()?;
                let n = self.u32()?;
                // Counts come from the bytes: grow with what is there, never reserve by them.
                let mut children = Vec::new();
                for _ in 0..n {
                    children.push(self.node(depth + 1)?);
                }
                Some(NodeSpec::new(level, os_index, children))
            }
        }
        let mut rd = Rd(bytes);
        let root = rd.node(0)?;
        let mut latencies = Vec::new();
        for _ in 0..rd.u32()? {
            let mut os = Vec::new();
            for _ in 0..rd.u32()? {
                let named = rd.u8()?;
                let o = rd.u32()?;
                os.push((named == 1).then_some(o));
            }
            let mut values = Vec::new();
            for _ in 0..rd.u32()? {
                values.push(rd.u64()?);
            }
            latencies.push(Latency { os, values });
        }
        let mut devices = Vec::new();
        for _ in 0..rd.u32()? {
            let kind = match rd.u8()? {
                0 => DeviceKind::Gpu,
                1 => DeviceKind::Nic,
                _ => return None,
            };
            let mut names = Vec::new();
            for _ in 0..rd.u32()? {
                names.push(rd.string()?);
            }
            devices.push(Device {
                kind,
                names,
                local_pus: rd.u32s()?,
                numa: Vec::new(),
            });
        }
        let mut memory_only = Vec::new();
        for _ in 0..rd.u32()? {
            memory_only.push(MemoryNode {
                os_index: rd.u32()?,
                bytes: rd.u64()?,
                kind: rd.string()?,
                local_pus: rd.u32s()?,
                near: Vec::new(),
            });
        }
        rd.0.is_empty().then_some(Extract {
            root,
            latencies,
            devices,
            memory_only,
        })
    }

    /// Build the [`Topology`] and take the first latency matrix that covers its NUMA nodes.
    fn assemble(&self, source: &str) -> Result<Topology> {
        let mut topo = Topology::build(&self.root, source)?;
        topo.distances = numa_distances(&self.latencies, &topo);
        Ok(topo.with_io_and_memory(self.devices.clone(), self.memory_only.clone()))
    }
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
fn numa_distances(all: &[Latency], topo: &Topology) -> Option<Vec<Vec<f64>>> {
    for d in all {
        let pos: Option<Vec<usize>> = topo
            .numa
            .iter()
            .map(|n| d.os.iter().position(|&o| o == Some(n.os_index)))
            .collect();
        let Some(pos) = pos else {
            log::warn!("ignoring a NUMA distance matrix that does not cover every NUMA node");
            continue;
        };
        let k = d.os.len();
        if d.values.len() != k * k {
            continue;
        }
        return Some(
            pos.iter()
                .map(|&i| pos.iter().map(|&j| d.values[i * k + j] as f64).collect())
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

    fn data(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(name)
    }

    /// Found by the `topology_xml` fuzz target (the file is its seed now): a Package whose
    /// `complete_cpuset` attribute is run together with the one before it. hwloc 2.9.0 then
    /// dereferences NULL (in hwloc_bitmap_compare_first, `lstopo -i` too); in-process that was
    /// the end of `cmlb`, or of slurmstepd for a plugstack `topology=` file.
    #[test]
    fn fuzz_regression_hwloc_segfault_is_an_error_naming_the_file() {
        let bad = data("../fuzz/seeds/topology_xml/hwloc-2.9.0-segfault.xml");
        let spec = bad.to_str().unwrap();
        let want = format!("topology: {spec}: not a valid hwloc XML topology");
        let e = Topology::load(spec).unwrap_err().to_string();
        assert!(e.starts_with(&want), "{e}");
        assert!(!e.contains('\n'), "one line: {e}");
        let e = hwloc_xml(spec).unwrap_err().to_string();
        assert!(e.starts_with(&want), "{e}");
        // The same file with the attribute spelt right is an ordinary 8-PU machine.
        let text = std::fs::read_to_string(&bad).unwrap();
        assert_eq!(text.matches("nodesetcomplete_cpuset=").count(), 1);
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.xml");
        std::fs::write(
            &good,
            text.replace("nodesetcomplete_cpuset=", "complete_cpuset="),
        )
        .unwrap();
        let t = Topology::load(good.to_str().unwrap()).unwrap();
        assert_eq!((t.num_pus(), t.count(Level::Package)), (8, 2));
    }

    #[test]
    fn an_xml_topology_loaded_in_the_child_equals_one_loaded_here() {
        // The last two carry devices and memory-only NUMA nodes through the encoding.
        for name in [
            "tests/data/amd-2s-8numa-dist.xml",
            "tests/data/snc-2s.xml",
            "tests/data/topologies/eas-tioga.xml",
            "tests/data/topologies/knl-snc4-flat-hwloc1.xml",
        ] {
            let path = data(name);
            let src = Source::Xml(&path);
            let text = std::fs::read_to_string(&path).unwrap();
            let _hwloc = hwloc_lock();
            let here = src.extract_here(Some(&text)).unwrap();
            let there = src.checked_in_child(&text).unwrap();
            assert_eq!(here, there, "{name}");
            let bytes = here.encode();
            assert_eq!(Extract::decode(&bytes).as_ref(), Some(&here));
            // A cut or lengthened answer is refused, never half-read.
            for cut in [0, 1, 5, 9, bytes.len() / 2, bytes.len() - 1] {
                assert_eq!(Extract::decode(&bytes[..cut]), None, "{name} cut at {cut}");
            }
            assert_eq!(Extract::decode(&[bytes.as_slice(), &[0]].concat()), None);
        }
        let t = Topology::from_xml(data("tests/data/amd-2s-8numa-dist.xml")).unwrap();
        let d = t.distances.expect("the file's NUMA latencies");
        assert_eq!((d.len(), d[0][0]), (8, 10.0));
    }

    #[test]
    fn a_decoded_tree_deeper_than_any_machine_is_refused() {
        let mut n = NodeSpec::new(Level::Pu, 0, vec![]);
        for _ in 0..MAX_DEPTH + 1 {
            n = NodeSpec::new(Level::Package, 0, vec![n]);
        }
        let ex = Extract {
            root: n,
            latencies: vec![],
            devices: vec![],
            memory_only: vec![],
        };
        assert_eq!(Extract::decode(&ex.encode()), None);
    }

    #[test]
    fn an_xml_file_too_large_for_a_topology_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("huge.xml");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(MAX_XML_BYTES + 1)
            .unwrap();
        let e = Topology::load(big.to_str().unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("huge.xml: larger than 64 MiB, which no hwloc XML topology is"),
            "{e}"
        );
        let bin = dir.path().join("bin.xml");
        std::fs::write(&bin, [0xff, 0xfe, 0x00]).unwrap();
        let e = Topology::load(bin.to_str().unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("bin.xml: not a valid hwloc XML topology (not UTF-8 text)"),
            "{e}"
        );
    }

    #[test]
    fn wide_synthetic_levels_are_refused_before_hwloc_builds_them() {
        let e = Topology::from_synthetic("core:8192 pu:1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("puts 8192 objects under one parent"), "{e}");
        assert!(e.contains("at most 1024 per level"), "{e}");
        assert_eq!(
            synthetic_counts("numa:4(memory=1GB) core:1024 pu:2"),
            Ok(vec![4, 1024, 2])
        );
        Topology::from_synthetic("numa:2 core:1024 pu:1").expect("1024 per parent is fine");
    }

    /// Found by the `topology_synthetic` fuzz target (timeout-c4c808d6...): " \r9049pu:2" is
    /// 9049 objects then 2 PUs to hwloc (no space needed between levels), but the counting
    /// above saw one token with the count 2, and hwloc ran past the fuzzer's 10 s.
    #[test]
    fn fuzz_regression_count_run_into_the_next_level_is_refused() {
        // Refused by cmlb's own reading, so hwloc never builds the 9049-object level that ran
        // past the fuzzer's 10 s timeout (an error naming the token proves hwloc was not asked).
        for (d, token) in [
            (" \r9049pu:2", "9049pu:2"),
            ("pack:2core:4096 pu:1", "pack:2core:4096"),
            ("core:0x2000 pu:1", "core:0x2000"),
            ("core:010 pu:1", "core:010"),
            ("core: 8192 pu:1", "core:"),
            ("pack core:2", "pack"),
            ("core:2(memory=1GB pu:1", "core:2(memory=1GB pu:1"),
            ("core:2\u{a0}pu:1", "core:2\u{a0}pu:1"),
            ("pack:2\tcore:2 pu:1", "pack:2\tcore:2"),
        ] {
            let e = Topology::from_synthetic(d).unwrap_err().to_string();
            let want = format!("is not space-separated TYPE:COUNT levels at \"{token}\"");
            assert!(e.contains(&want), "{d:?}: {e}");
        }
    }

    #[test]
    fn synthetic_descriptions_hwloc_documents_still_load() {
        for (d, pus) in [
            ("pack:2 numa:2 l3:1 core:8 pu:2", 64),
            ("Package:2 Core:2 PU:2", 8),
            ("4 4 2", 32),
            ("numa:2(memory=1GB) core:2 pu:1", 4),
            ("core:2(memory=1GB indexes=1,0) pu:2", 4),
            ("pack:2 [numa(memory=1GB)] core:2 pu:1", 4),
            ("  pack:2  core:2 pu:1 ", 4),
        ] {
            let t = Topology::from_synthetic(d).unwrap_or_else(|e| panic!("{d}: {e}"));
            assert_eq!(t.num_pus(), pus, "{d}");
        }
    }

    #[test]
    fn synthetic_pu_count_is_the_product_of_the_counts() {
        let pus =
            |d| synthetic_counts(d).map(|c| c.iter().fold(1u128, |a, &x| a.saturating_mul(x)));
        assert_eq!(pus("pack:2 numa:2 l3:1 core:8 pu:2"), Ok(64));
        // Attributes and attached objects count nothing.
        assert_eq!(pus("numa:4(memory=1GB) [numa] core:4 pu:1"), Ok(16));
        assert_eq!(pus("bogus core:3"), Err("bogus"));
        let big = 99_999_999_999u128;
        assert_eq!(
            pus("core:99999999999 pu:99999999999 pu:99999999999"),
            Ok(big * big * big)
        );
        assert_eq!(pus(&"core:4294967295 ".repeat(8)), Ok(u128::MAX));
    }
}
