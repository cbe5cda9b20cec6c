//! Decoding of the few kernel ring-buffer records the live backends ask for.
//!
//! Every sampler is opened with `sample_type = TID | TIME | ADDR` and (for the fault samplers,
//! which also carry the task records) `sample_id_all`, so the layouts are fixed and small
//! enough to decode by hand (`perf_event_open(2)`, "MMAP layout"):
//!
//! ```text
//! SAMPLE (9):       u32 pid, u32 tid, u64 time, u64 addr
//! SAMPLE (9), regs: u32 pid, u32 tid, u64 time, u64 abi, u64 regs[popcount(mask)]
//! FORK (7)/EXIT (4): u32 pid, ppid, tid, ptid; u64 time; sample_id
//! COMM (3):         u32 pid, tid; char comm[] (NUL-padded to 8); sample_id {u32 pid, tid; u64 time}
//! LOST (2):         u64 id, u64 lost; sample_id
//! LOST_SAMPLES (13): u64 lost; sample_id
//! ```
//! Unknown or short records are skipped (counted as `malformed`), never a panic.

/// `PERF_RECORD_*` types used here.
pub const RECORD_LOST: u32 = 2;
pub const RECORD_COMM: u32 = 3;
pub const RECORD_EXIT: u32 = 4;
pub const RECORD_THROTTLE: u32 = 5;
pub const RECORD_FORK: u32 = 7;
pub const RECORD_SAMPLE: u32 = 9;
pub const RECORD_LOST_SAMPLES: u32 = 13;
/// `PERF_RECORD_MISC_COMM_EXEC`: the COMM record comes from an execve.
pub const MISC_COMM_EXEC: u16 = 1 << 13;

/// One decoded record.
#[derive(Debug, Clone, PartialEq)]
pub enum Rec {
    Sample {
        pid: i32,
        tid: i32,
        time: u64,
        addr: u64,
    },
    Fork {
        pid: i32,
        ppid: i32,
        tid: i32,
        ptid: i32,
        time: u64,
    },
    Exit {
        pid: i32,
        tid: i32,
        time: u64,
    },
    Comm {
        pid: i32,
        tid: i32,
        /// Time from the trailing sample_id (0 if the sampler has no sample_id_all).
        time: u64,
        name: String,
        exec: bool,
    },
    /// A fully decoded sample (hw backend: kind and DRAM flag from DATA_SRC).
    Full {
        pid: i32,
        sample: crate::sample::Sample,
    },
    /// A clock sample of a thread's user registers (`sample_type = TID | TIME | REGS_USER`):
    /// the values of the registers in [`super::events::REGS_MASK`], in mask bit order, or
    /// none when the clock ticked in a kernel thread or before the task had user registers.
    Regs {
        pid: i32,
        tid: i32,
        time: u64,
        values: Vec<u64>,
    },
    /// Samples the kernel dropped because the ring buffer was full.
    Lost(u64),
    /// The kernel throttled the event (too many samples per tick).
    Throttle,
}

impl Rec {
    /// The record's timestamp, for putting records from per-CPU buffers in order (0 for the
    /// kinds that carry none).
    pub fn time(&self) -> u64 {
        match self {
            Rec::Sample { time, .. }
            | Rec::Fork { time, .. }
            | Rec::Exit { time, .. }
            | Rec::Comm { time, .. }
            | Rec::Regs { time, .. } => *time,
            Rec::Full { sample, .. } => sample.time_ns,
            Rec::Lost(_) | Rec::Throttle => 0,
        }
    }
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    b.get(off..off + 4)
        .map(|s| u32::from_ne_bytes(s.try_into().expect("4 bytes")))
}

fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    b.get(off..off + 8)
        .map(|s| u64::from_ne_bytes(s.try_into().expect("8 bytes")))
}

/// Decode one record body (the bytes after the 8-byte header). `with_sample_id`: the sampler
/// was opened with `sample_id_all` (so non-sample records end in `{pid, tid, time}`).
/// Returns `None` for record types the profiler does not use or bodies too short to hold them.
pub fn decode(ty: u32, misc: u16, body: &[u8], with_sample_id: bool) -> Option<Rec> {
    match ty {
        RECORD_SAMPLE => Some(Rec::Sample {
            pid: u32_at(body, 0)? as i32,
            tid: u32_at(body, 4)? as i32,
            time: u64_at(body, 8)?,
            addr: u64_at(body, 16)?,
        }),
        RECORD_FORK => Some(Rec::Fork {
            pid: u32_at(body, 0)? as i32,
            ppid: u32_at(body, 4)? as i32,
            tid: u32_at(body, 8)? as i32,
            ptid: u32_at(body, 12)? as i32,
            time: u64_at(body, 16)?,
        }),
        RECORD_EXIT => Some(Rec::Exit {
            pid: u32_at(body, 0)? as i32,
            tid: u32_at(body, 8)? as i32,
            time: u64_at(body, 16)?,
        }),
        RECORD_COMM => {
            let pid = u32_at(body, 0)? as i32;
            let tid = u32_at(body, 4)? as i32;
            let (name_end, time) = if with_sample_id {
                let end = body.len().checked_sub(16)?;
                (end, u64_at(body, end + 8)?)
            } else {
                (body.len(), 0)
            };
            let raw = body.get(8..name_end.max(8))?;
            let len = raw.iter().position(|&c| c == 0).unwrap_or(raw.len());
            Some(Rec::Comm {
                pid,
                tid,
                time,
                name: String::from_utf8_lossy(&raw[..len]).into_owned(),
                exec: misc & MISC_COMM_EXEC != 0,
            })
        }
        RECORD_LOST => Some(Rec::Lost(u64_at(body, 8)?)),
        RECORD_LOST_SAMPLES => Some(Rec::Lost(u64_at(body, 0)?)),
        RECORD_THROTTLE => Some(Rec::Throttle),
        _ => None,
    }
}

/// Decode a register sample's body: `u32 pid, tid; u64 time; u64 abi; u64 regs[nregs]`
/// (`regs` only when `abi` is not `PERF_SAMPLE_REGS_ABI_NONE`). `None` when the body is short.
pub fn decode_regs(body: &[u8], nregs: usize) -> Option<Rec> {
    let abi = u64_at(body, 16)?;
    let values = if abi == 0 {
        Vec::new()
    } else {
        (0..nregs)
            .map(|k| u64_at(body, 24 + 8 * k))
            .collect::<Option<Vec<u64>>>()?
    };
    Some(Rec::Regs {
        pid: u32_at(body, 0)? as i32,
        tid: u32_at(body, 4)? as i32,
        time: u64_at(body, 8)?,
        values,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u32s(v: &[u32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    #[test]
    fn sample_record() {
        let mut b = u32s(&[100, 101]);
        b.extend(5000u64.to_ne_bytes());
        b.extend(0x7f00_1234u64.to_ne_bytes());
        assert_eq!(
            decode(RECORD_SAMPLE, 0, &b, true),
            Some(Rec::Sample {
                pid: 100,
                tid: 101,
                time: 5000,
                addr: 0x7f00_1234
            })
        );
        // Truncated body: skipped, not a panic.
        assert_eq!(decode(RECORD_SAMPLE, 0, &b[..20], true), None);
    }

    #[test]
    fn register_sample_record() {
        let mut b = u32s(&[100, 101]);
        b.extend(5000u64.to_ne_bytes());
        b.extend(2u64.to_ne_bytes()); // PERF_SAMPLE_REGS_ABI_64
        for v in [0x7f00_0000u64, 42, 0x5555_0000] {
            b.extend(v.to_ne_bytes());
        }
        assert_eq!(
            decode_regs(&b, 3),
            Some(Rec::Regs {
                pid: 100,
                tid: 101,
                time: 5000,
                values: vec![0x7f00_0000, 42, 0x5555_0000]
            })
        );
        // Fewer registers than the mask says: skipped, not a panic.
        assert_eq!(decode_regs(&b, 4), None);
        // ABI none (a kernel thread): no values, and nothing more is read.
        let mut k = u32s(&[100, 101]);
        k.extend(5000u64.to_ne_bytes());
        k.extend(0u64.to_ne_bytes());
        assert!(matches!(decode_regs(&k, 3), Some(Rec::Regs { values, .. }) if values.is_empty()));
        assert_eq!(decode_regs(&k[..12], 3), None);
    }

    #[test]
    fn fork_and_exit_records() {
        let mut b = u32s(&[100, 100, 102, 101]);
        b.extend(777u64.to_ne_bytes());
        b.extend(u32s(&[100, 101]));
        b.extend(777u64.to_ne_bytes());
        assert_eq!(
            decode(RECORD_FORK, 0, &b, true),
            Some(Rec::Fork {
                pid: 100,
                ppid: 100,
                tid: 102,
                ptid: 101,
                time: 777
            })
        );
        assert_eq!(
            decode(RECORD_EXIT, 0, &b, true),
            Some(Rec::Exit {
                pid: 100,
                tid: 102,
                time: 777
            })
        );
    }

    #[test]
    fn comm_record_with_sample_id() {
        let mut b = u32s(&[100, 103]);
        b.extend(b"worker-3\0\0\0\0\0\0\0\0");
        b.extend(u32s(&[100, 103]));
        b.extend(999u64.to_ne_bytes());
        assert_eq!(
            decode(RECORD_COMM, MISC_COMM_EXEC, &b, true),
            Some(Rec::Comm {
                pid: 100,
                tid: 103,
                time: 999,
                name: "worker-3".into(),
                exec: true
            })
        );
        // Without sample_id_all the whole tail is the name.
        let mut c = u32s(&[100, 103]);
        c.extend(b"ab\0\0\0\0\0\0");
        assert_eq!(
            decode(RECORD_COMM, 0, &c, false),
            Some(Rec::Comm {
                pid: 100,
                tid: 103,
                time: 0,
                name: "ab".into(),
                exec: false
            })
        );
    }

    #[test]
    fn lost_records() {
        let mut b = 42u64.to_ne_bytes().to_vec();
        b.extend(17u64.to_ne_bytes());
        assert_eq!(decode(RECORD_LOST, 0, &b, false), Some(Rec::Lost(17)));
        assert_eq!(
            decode(RECORD_LOST_SAMPLES, 0, &b, false),
            Some(Rec::Lost(42))
        );
        assert_eq!(decode(1, 0, &b, false), None, "MMAP records are not used");
    }
}
