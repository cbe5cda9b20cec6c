//! Decoding of perf_event ring-buffer records (`PERF_RECORD_SAMPLE`, `PERF_RECORD_LOST`,
//! `PERF_RECORD_LOST_SAMPLES`), byte layout per `include/uapi/linux/perf_event.h`:
//!
//! ```text
//! struct perf_event_header { u32 type; u16 misc; u16 size; }   // size includes the header
//! PERF_RECORD_SAMPLE body, fields present in this order when their sample_type bit is set:
//!   u64 id            IDENTIFIER        u64 ip          IP
//!   u32 pid, tid      TID               u64 time        TIME
//!   u64 addr          ADDR              u64 id          ID
//!   u64 stream_id     STREAM_ID         u32 cpu, res    CPU
//!   u64 period        PERIOD            read_format     READ          (not supported)
//!   u64 nr, ips[nr]   CALLCHAIN         u32 size, data  RAW
//!   branch stack      BRANCH_STACK (not supported)      regs          REGS_USER (not supported)
//!   u64 size, data[size], u64 dyn_size (if size)         STACK_USER
//!   u64 weight        WEIGHT or WEIGHT_STRUCT           u64 data_src  DATA_SRC
//!   ... (fields after DATA_SRC are not needed and not read)
//! ```
//! Records are in the host's byte order. Every read is bounds-checked: a truncated or
//! inconsistent record is an error naming its byte offset, never a panic.

use super::datasrc::DataSrc;
use crate::error::{ProfileError, Result};
use crate::sample::{AccessKind, Sample};

pub const PERF_RECORD_LOST: u32 = 2;
pub const PERF_RECORD_COMM: u32 = 3;
pub const PERF_RECORD_EXIT: u32 = 4;
pub const PERF_RECORD_FORK: u32 = 7;
pub const PERF_RECORD_SAMPLE: u32 = 9;
pub const PERF_RECORD_LOST_SAMPLES: u32 = 13;

pub const PERF_SAMPLE_IP: u64 = 1 << 0;
pub const PERF_SAMPLE_TID: u64 = 1 << 1;
pub const PERF_SAMPLE_TIME: u64 = 1 << 2;
pub const PERF_SAMPLE_ADDR: u64 = 1 << 3;
pub const PERF_SAMPLE_READ: u64 = 1 << 4;
pub const PERF_SAMPLE_CALLCHAIN: u64 = 1 << 5;
pub const PERF_SAMPLE_ID: u64 = 1 << 6;
pub const PERF_SAMPLE_CPU: u64 = 1 << 7;
pub const PERF_SAMPLE_PERIOD: u64 = 1 << 8;
pub const PERF_SAMPLE_STREAM_ID: u64 = 1 << 9;
pub const PERF_SAMPLE_RAW: u64 = 1 << 10;
pub const PERF_SAMPLE_BRANCH_STACK: u64 = 1 << 11;
pub const PERF_SAMPLE_REGS_USER: u64 = 1 << 12;
pub const PERF_SAMPLE_STACK_USER: u64 = 1 << 13;
pub const PERF_SAMPLE_WEIGHT: u64 = 1 << 14;
pub const PERF_SAMPLE_DATA_SRC: u64 = 1 << 15;
pub const PERF_SAMPLE_IDENTIFIER: u64 = 1 << 16;
pub const PERF_SAMPLE_WEIGHT_STRUCT: u64 = 1 << 24;

/// `header.misc & PERF_RECORD_MISC_CPUMODE_MASK` values.
pub const PERF_RECORD_MISC_CPUMODE_MASK: u16 = 7;
pub const PERF_RECORD_MISC_KERNEL: u16 = 1;
pub const PERF_RECORD_MISC_USER: u16 = 2;

/// The sample_type the hw backend asks for: what the analysis needs, nothing more.
pub const HW_SAMPLE_TYPE: u64 =
    PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR | PERF_SAMPLE_DATA_SRC;

/// How to read sample records of events opened with one `sample_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleLayout {
    sample_type: u64,
}

impl SampleLayout {
    /// Fails for sample types whose layout needs more of the attr than `sample_type` (READ,
    /// BRANCH_STACK, REGS_USER), or that lack TID, TIME or ADDR (the analysis needs them).
    pub fn new(sample_type: u64) -> Result<SampleLayout> {
        let unsupported =
            sample_type & (PERF_SAMPLE_READ | PERF_SAMPLE_BRANCH_STACK | PERF_SAMPLE_REGS_USER);
        if unsupported != 0 {
            return Err(ProfileError::record(
                0,
                format!(
                    "sample_type {sample_type:#x} has fields this decoder does not read \
                     (READ, BRANCH_STACK or REGS_USER: {unsupported:#x})"
                ),
            ));
        }
        let needed = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR;
        if sample_type & needed != needed {
            return Err(ProfileError::record(
                0,
                format!("sample_type {sample_type:#x} lacks TID, TIME or ADDR"),
            ));
        }
        Ok(SampleLayout { sample_type })
    }

    pub fn sample_type(&self) -> u64 {
        self.sample_type
    }

    fn has(&self, bit: u64) -> bool {
        self.sample_type & bit != 0
    }
}

/// One decoded `PERF_RECORD_SAMPLE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HwSample {
    pub misc: u16,
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub addr: u64,
    pub ip: Option<u64>,
    pub cpu: Option<u32>,
    pub period: Option<u64>,
    pub weight: Option<u64>,
    pub data_src: Option<DataSrc>,
}

impl HwSample {
    /// Sampled in user mode (kernel-mode samples touch kernel data, not the application's).
    pub fn is_user(&self) -> bool {
        self.misc & PERF_RECORD_MISC_CPUMODE_MASK == PERF_RECORD_MISC_USER
    }

    /// The access as a sample of the analysis stream, or `None` when it is not a data access
    /// of the application: no data address (IBS samples every op, most without one), a
    /// kernel-mode sample, or a data source saying prefetch/instruction fetch.
    pub fn to_sample(&self) -> Option<Sample> {
        if self.addr == 0 || !self.is_user() {
            return None;
        }
        let (kind, dram) = match self.data_src {
            Some(ds) => {
                let op = ds.mem_op();
                if op & (super::datasrc::MEM_OP_LOAD | super::datasrc::MEM_OP_STORE) == 0
                    && op & (super::datasrc::MEM_OP_PFETCH | super::datasrc::MEM_OP_EXEC) != 0
                {
                    return None;
                }
                (ds.kind(), ds.dram())
            }
            None => (AccessKind::Unknown, None),
        };
        Some(Sample {
            tid: self.tid as i32,
            time_ns: self.time,
            addr: self.addr,
            kind,
            dram,
        })
    }
}

/// One record of a ring buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record<'a> {
    Sample(HwSample),
    /// `PERF_RECORD_LOST`: the kernel dropped `lost` records (ring buffer full).
    Lost {
        id: u64,
        lost: u64,
    },
    /// `PERF_RECORD_LOST_SAMPLES`: the PMU dropped `lost` samples.
    LostSamples {
        lost: u64,
    },
    /// Any other record type, undecoded.
    Other {
        kind: u32,
        misc: u16,
        body: &'a [u8],
    },
}

/// Bounds-checked reader over one record; errors carry the absolute byte offset.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    base: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        match end {
            Some(end) => {
                let s = &self.buf[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(ProfileError::record(
                self.base + self.pos,
                format!(
                    "record too short for {what}: needs {n} bytes, {} left",
                    self.buf.len() - self.pos
                ),
            )),
        }
    }
    fn u64(&mut self, what: &str) -> Result<u64> {
        let b = self.take(8, what)?;
        Ok(u64::from_ne_bytes(b.try_into().expect("8 bytes")))
    }
    fn u32(&mut self, what: &str) -> Result<u32> {
        let b = self.take(4, what)?;
        Ok(u32::from_ne_bytes(b.try_into().expect("4 bytes")))
    }
}

/// Decode one `PERF_RECORD_SAMPLE` body (the bytes after the header). `offset` is where the
/// body starts in the caller's buffer, for error messages.
pub fn decode_sample(
    layout: &SampleLayout,
    misc: u16,
    body: &[u8],
    offset: usize,
) -> Result<HwSample> {
    let mut c = Cursor {
        buf: body,
        pos: 0,
        base: offset,
    };
    if layout.has(PERF_SAMPLE_IDENTIFIER) {
        c.u64("identifier")?;
    }
    let ip = if layout.has(PERF_SAMPLE_IP) {
        Some(c.u64("ip")?)
    } else {
        None
    };
    let pid = c.u32("pid")?;
    let tid = c.u32("tid")?;
    let time = c.u64("time")?;
    let addr = c.u64("addr")?;
    if layout.has(PERF_SAMPLE_ID) {
        c.u64("id")?;
    }
    if layout.has(PERF_SAMPLE_STREAM_ID) {
        c.u64("stream_id")?;
    }
    let cpu = if layout.has(PERF_SAMPLE_CPU) {
        let cpu = c.u32("cpu")?;
        c.u32("cpu reserved")?;
        Some(cpu)
    } else {
        None
    };
    let period = if layout.has(PERF_SAMPLE_PERIOD) {
        Some(c.u64("period")?)
    } else {
        None
    };
    if layout.has(PERF_SAMPLE_CALLCHAIN) {
        let nr = c.u64("callchain length")?;
        let bytes = usize::try_from(nr)
            .ok()
            .and_then(|n| n.checked_mul(8))
            .ok_or_else(|| {
                ProfileError::record(offset, format!("callchain length {nr} is absurd"))
            })?;
        c.take(bytes, "callchain")?;
    }
    if layout.has(PERF_SAMPLE_RAW) {
        let size = c.u32("raw size")? as usize;
        c.take(size, "raw data")?;
    }
    if layout.has(PERF_SAMPLE_STACK_USER) {
        let size = c.u64("user stack size")?;
        let size = usize::try_from(size).map_err(|_| {
            ProfileError::record(offset, format!("user stack size {size} is absurd"))
        })?;
        c.take(size, "user stack")?;
        if size != 0 {
            c.u64("user stack dyn_size")?;
        }
    }
    let weight = if layout.has(PERF_SAMPLE_WEIGHT) || layout.has(PERF_SAMPLE_WEIGHT_STRUCT) {
        Some(c.u64("weight")?)
    } else {
        None
    };
    let data_src = if layout.has(PERF_SAMPLE_DATA_SRC) {
        Some(DataSrc(c.u64("data_src")?))
    } else {
        None
    };
    Ok(HwSample {
        misc,
        pid,
        tid,
        time,
        addr,
        ip,
        cpu,
        period,
        weight,
        data_src,
    })
}

/// Iterator over the records in a byte buffer (a copy of ring-buffer data, records back to
/// back). After an error it stops: the record framing can no longer be trusted.
pub struct Records<'a> {
    buf: &'a [u8],
    off: usize,
    layout: SampleLayout,
    failed: bool,
}

/// Iterate over the records in `buf`.
pub fn records<'a>(buf: &'a [u8], layout: SampleLayout) -> Records<'a> {
    Records {
        buf,
        off: 0,
        layout,
        failed: false,
    }
}

impl<'a> Records<'a> {
    fn next_record(&mut self) -> Result<Record<'a>> {
        let start = self.off;
        let rest = &self.buf[start..];
        if rest.len() < 8 {
            return Err(ProfileError::record(
                start,
                format!("truncated header: {} bytes, a header has 8", rest.len()),
            ));
        }
        let kind = u32::from_ne_bytes(rest[0..4].try_into().expect("4 bytes"));
        let misc = u16::from_ne_bytes(rest[4..6].try_into().expect("2 bytes"));
        let size = u16::from_ne_bytes(rest[6..8].try_into().expect("2 bytes")) as usize;
        if size < 8 {
            return Err(ProfileError::record(
                start,
                format!("record size {size} is smaller than its 8-byte header"),
            ));
        }
        if size > rest.len() {
            return Err(ProfileError::record(
                start,
                format!(
                    "record of type {kind} claims {size} bytes but only {} remain (truncated)",
                    rest.len()
                ),
            ));
        }
        self.off = start + size;
        let body = &rest[8..size];
        let mut c = Cursor {
            buf: body,
            pos: 0,
            base: start + 8,
        };
        Ok(match kind {
            PERF_RECORD_SAMPLE => {
                Record::Sample(decode_sample(&self.layout, misc, body, start + 8)?)
            }
            PERF_RECORD_LOST => Record::Lost {
                id: c.u64("lost id")?,
                lost: c.u64("lost count")?,
            },
            PERF_RECORD_LOST_SAMPLES => Record::LostSamples {
                lost: c.u64("lost samples count")?,
            },
            _ => Record::Other { kind, misc, body },
        })
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.off >= self.buf.len() {
            return None;
        }
        let r = self.next_record();
        if r.is_err() {
            self.failed = true;
        }
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::datasrc::*;

    /// Build a record the way the kernel lays it out.
    struct Rec(Vec<u8>);
    impl Rec {
        fn new() -> Rec {
            Rec(Vec::new())
        }
        fn u64(mut self, v: u64) -> Rec {
            self.0.extend_from_slice(&v.to_ne_bytes());
            self
        }
        fn u32(mut self, v: u32) -> Rec {
            self.0.extend_from_slice(&v.to_ne_bytes());
            self
        }
        fn finish(self, kind: u32, misc: u16) -> Vec<u8> {
            let mut out = Vec::new();
            out.extend_from_slice(&kind.to_ne_bytes());
            out.extend_from_slice(&misc.to_ne_bytes());
            out.extend_from_slice(&((self.0.len() + 8) as u16).to_ne_bytes());
            out.extend_from_slice(&self.0);
            out
        }
    }

    fn local_dram_load() -> u64 {
        mem_s(MEM_OP_LOAD, MEM_OP_SHIFT)
            | mem_s(MEM_LVL_LOC_RAM | MEM_LVL_HIT, MEM_LVL_SHIFT)
            | mem_s(MEM_LVLNUM_RAM, MEM_LVLNUM_SHIFT)
    }

    #[test]
    fn decodes_the_hw_backend_layout() {
        let layout = SampleLayout::new(HW_SAMPLE_TYPE).unwrap();
        let rec = Rec::new()
            .u32(4242)
            .u32(4243)
            .u64(123_456_789)
            .u64(0x7fff_0000_1040)
            .u64(local_dram_load())
            .finish(PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER);
        let all: Vec<_> = records(&rec, layout).collect::<Result<_>>().unwrap();
        let Record::Sample(s) = &all[0] else {
            panic!("{all:?}")
        };
        assert_eq!(
            (s.pid, s.tid, s.time, s.addr),
            (4242, 4243, 123_456_789, 0x7fff_0000_1040)
        );
        assert_eq!(s.data_src, Some(DataSrc(local_dram_load())));
        let sample = s.to_sample().unwrap();
        assert_eq!(sample.tid, 4243);
        assert_eq!(sample.kind, AccessKind::Load);
        assert_eq!(sample.dram, Some(true));
    }

    #[test]
    fn decodes_every_supported_field_in_kernel_order() {
        let st = PERF_SAMPLE_IDENTIFIER
            | PERF_SAMPLE_IP
            | HW_SAMPLE_TYPE
            | PERF_SAMPLE_ID
            | PERF_SAMPLE_STREAM_ID
            | PERF_SAMPLE_CPU
            | PERF_SAMPLE_PERIOD
            | PERF_SAMPLE_CALLCHAIN
            | PERF_SAMPLE_RAW
            | PERF_SAMPLE_STACK_USER
            | PERF_SAMPLE_WEIGHT;
        let layout = SampleLayout::new(st).unwrap();
        let mut body = Rec::new()
            .u64(77) // identifier
            .u64(0x40_1000) // ip
            .u32(10)
            .u32(11)
            .u64(5000) // time
            .u64(0xdead_bee0) // addr
            .u64(77) // id
            .u64(78) // stream id
            .u32(3)
            .u32(0) // cpu, res
            .u64(2000) // period
            .u64(2) // callchain nr
            .u64(1)
            .u64(2)
            .u32(4); // raw size
        body.0.extend_from_slice(&[1, 2, 3, 4]);
        let body = body
            .u64(16) // stack size
            .u64(0)
            .u64(0)
            .u64(8) // dyn size
            .u64(250) // weight
            .u64(local_dram_load());
        let rec = body.finish(PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER);
        let Record::Sample(s) = records(&rec, layout).next().unwrap().unwrap() else {
            panic!()
        };
        assert_eq!(s.ip, Some(0x40_1000));
        assert_eq!((s.pid, s.tid, s.time, s.addr), (10, 11, 5000, 0xdead_bee0));
        assert_eq!(s.cpu, Some(3));
        assert_eq!(s.period, Some(2000));
        assert_eq!(s.weight, Some(250));
        assert_eq!(s.data_src, Some(DataSrc(local_dram_load())));
    }

    #[test]
    fn lost_and_other_records_and_sequences() {
        let layout = SampleLayout::new(HW_SAMPLE_TYPE).unwrap();
        let mut buf = Rec::new().u64(1).u64(37).finish(PERF_RECORD_LOST, 0);
        buf.extend(Rec::new().u64(5).finish(PERF_RECORD_LOST_SAMPLES, 0));
        buf.extend(Rec::new().u32(1).u32(2).finish(PERF_RECORD_COMM, 0));
        buf.extend(
            Rec::new()
                .u32(1)
                .u32(2)
                .u64(3)
                .u64(0x1000)
                .u64(0)
                .finish(PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER),
        );
        let all: Vec<_> = records(&buf, layout).collect::<Result<_>>().unwrap();
        assert_eq!(all.len(), 4);
        assert_eq!(all[0], Record::Lost { id: 1, lost: 37 });
        assert_eq!(all[1], Record::LostSamples { lost: 5 });
        assert!(matches!(
            all[2],
            Record::Other {
                kind: PERF_RECORD_COMM,
                ..
            }
        ));
        let Record::Sample(s) = &all[3] else { panic!() };
        // data_src 0: not available -> unknown kind, DRAM unknown
        let smp = s.to_sample().unwrap();
        assert_eq!(smp.kind, AccessKind::Unknown);
        assert_eq!(smp.dram, None);
    }

    #[test]
    fn samples_that_are_not_application_data_accesses_are_skipped() {
        let base = HwSample {
            misc: PERF_RECORD_MISC_USER,
            pid: 1,
            tid: 1,
            time: 1,
            addr: 0x1000,
            ip: None,
            cpu: None,
            period: None,
            weight: None,
            data_src: Some(DataSrc(local_dram_load())),
        };
        assert!(base.to_sample().is_some());
        assert!(HwSample { addr: 0, ..base }.to_sample().is_none());
        assert!(HwSample {
            misc: PERF_RECORD_MISC_KERNEL,
            ..base
        }
        .to_sample()
        .is_none());
        let pf = DataSrc(mem_s(MEM_OP_PFETCH, MEM_OP_SHIFT));
        assert!(HwSample {
            data_src: Some(pf),
            ..base
        }
        .to_sample()
        .is_none());
    }

    #[test]
    fn truncated_records_are_errors_with_offsets() {
        let layout = SampleLayout::new(HW_SAMPLE_TYPE).unwrap();
        let full = Rec::new()
            .u32(1)
            .u32(2)
            .u64(3)
            .u64(4)
            .u64(5)
            .finish(PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER);
        // Cut the buffer inside the record: the header claims more than is there.
        let e = records(&full[..20], layout).next().unwrap().unwrap_err();
        assert_eq!(
            e.to_string(),
            "perf record at byte 0: record of type 9 claims 40 bytes but only 20 remain (truncated)"
        );
        // Header alone cut.
        let e = records(&full[..5], layout).next().unwrap().unwrap_err();
        assert!(e.to_string().contains("truncated header: 5 bytes"), "{e}");
        // A header whose size is consistent but too small for the sample fields.
        let short = Rec::new()
            .u32(1)
            .u32(2)
            .u64(3)
            .finish(PERF_RECORD_SAMPLE, 0);
        let mut buf = full.clone();
        buf.extend(&short);
        let mut it = records(&buf, layout);
        assert!(it.next().unwrap().is_ok());
        let e = it.next().unwrap().unwrap_err();
        assert_eq!(
            e.to_string(),
            "perf record at byte 64: record too short for addr: needs 8 bytes, 0 left"
        );
        assert!(it.next().is_none(), "iteration stops after an error");
    }

    #[test]
    fn garbage_never_panics() {
        let layout = SampleLayout::new(
            HW_SAMPLE_TYPE | PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_RAW | PERF_SAMPLE_STACK_USER,
        )
        .unwrap();
        // size field 0 or < 8
        let mut g = vec![9u8, 0, 0, 0, 0, 0, 3, 0];
        let e = records(&g, layout).next().unwrap().unwrap_err();
        assert!(
            e.to_string().contains("smaller than its 8-byte header"),
            "{e}"
        );
        // A callchain length of 2^61 must not overflow or allocate.
        g = Rec::new()
            .u32(1)
            .u32(2)
            .u64(3)
            .u64(4)
            .u64(1 << 61)
            .finish(PERF_RECORD_SAMPLE, 0);
        assert!(records(&g, layout).next().unwrap().is_err());
        // Pseudo-random bytes: every prefix decodes to records or errors, never panics.
        let mut x = 0x9E37_79B9u32;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect();
        for start in 0..64 {
            for r in records(&noise[start..], layout) {
                let _ = r;
            }
        }
    }

    #[test]
    fn layouts_this_decoder_cannot_read_are_refused() {
        let e = SampleLayout::new(HW_SAMPLE_TYPE | PERF_SAMPLE_READ).unwrap_err();
        assert!(e.to_string().contains("does not read"), "{e}");
        let e = SampleLayout::new(PERF_SAMPLE_TID | PERF_SAMPLE_TIME).unwrap_err();
        assert!(e.to_string().contains("lacks TID, TIME or ADDR"), "{e}");
    }
}
