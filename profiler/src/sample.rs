//! The one sample stream every backend produces and the analysis consumes.

use serde::{Deserialize, Serialize};

/// Load, store, or unknown (backends that cannot tell, e.g. page faults).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccessKind {
    Load,
    Store,
    Unknown,
}

/// One sampled memory access.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Kernel thread id of the accessing thread.
    pub tid: i32,
    /// Time in nanoseconds (any monotonic origin; the analysis only uses differences).
    pub time_ns: u64,
    /// Virtual data address.
    pub addr: u64,
    pub kind: AccessKind,
    /// `Some(true)` if the hardware says the access was served by DRAM (local or remote),
    /// `Some(false)` if by a cache, `None` if the backend cannot tell.
    pub dram: Option<bool>,
}

impl Sample {
    /// An access known only by its thread, time and address: what page faults and watchpoint
    /// hits give (no load/store kind, no data source).
    pub fn address_only(tid: i32, time_ns: u64, addr: u64) -> Sample {
        Sample {
            tid,
            time_ns,
            addr,
            kind: AccessKind::Unknown,
            dram: None,
        }
    }
}
