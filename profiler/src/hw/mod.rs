//! The **hw** backend's machine-independent half: perf_event attr settings for Intel PEBS,
//! AMD IBS op and Arm SPE ([`events`]), sample-record decoding ([`record`]) and
//! `perf_mem_data_src` classification into load/store and DRAM local/remote ([`datasrc`]).
//! None of this needs the hardware, so it is tested on hand-built records and fake sysfs
//! trees; the live backend opens the events and feeds ring-buffer bytes to [`record::records`].

pub mod datasrc;
pub mod events;
pub mod record;

pub use datasrc::{DataSrc, MemSource};
pub use events::{GroupLeader, HwEvent};
pub use record::{records, HwSample, Record, SampleLayout};

/// Precise memory-sampling hardware found in `/sys/bus/event_source/devices`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum HwPmu {
    /// Intel PEBS: the core PMU (`cpu`) exports `mem-loads`/`mem-stores`.
    IntelPebs,
    /// AMD IBS op sampling (`ibs_op`).
    AmdIbs,
    /// Arm Statistical Profiling Extension (`arm_spe_*`).
    ArmSpe(String),
}
