//! Opening the perf events of the live backends and draining their ring buffers.
//!
//! The kernel refuses `mmap` of a per-task inherited event that is not bound to a CPU, so
//! every event is opened once per (target task, online CPU) with `inherit` set: threads the
//! target creates later inherit the events and their records land in the parent event's ring
//! buffer on the CPU where they ran (the layout `perf record` uses).

use super::records::{self, Rec};
use crate::error::{ProfileError, Result};
use perf_event::events::{Breakpoint, Software};
use perf_event::{Builder, Counter, SampleFlag, Sampler};
use std::io;

/// `PERF_EVENT_IOC_MODIFY_ATTRIBUTES` (`_IOW('$', 11, __u64 *)`), breakpoints only, Linux 4.17+.
const IOC_MODIFY_ATTRIBUTES: libc::c_ulong = 0x4008_240b;

/// Which backend event a ring buffer carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    /// `page-faults` software event (also carries FORK/COMM/EXIT records).
    Faults,
    /// Breakpoint (watchpoint) slot `n`.
    Watch(usize),
    /// Precise memory sampling event (PEBS/IBS), decoded with [`crate::hw::record`].
    Hw(crate::hw::SampleLayout),
    /// `task-clock` samples of the user registers ([`REGS_MASK`]): the pointers a thread holds.
    Regs,
}

/// The general-purpose registers a clock sample reads (`PERF_REG_*` bits, asm/perf_regs.h),
/// and the stack pointer, which tells stack addresses apart: at any instant the data a thread
/// is working on is addressed from these. Not the instruction pointer or flags.
/// x86-64: AX BX CX DX SI DI BP SP, R8-R15.
#[cfg(target_arch = "x86_64")]
pub const REGS_MASK: u64 = 0xff | (0xff << 16);
/// Position of the stack pointer among the values of a sample (bit 7, the 8th set bit).
#[cfg(target_arch = "x86_64")]
pub const REGS_SP_INDEX: usize = 7;
/// aarch64: x0-x28 and sp (bit 31).
#[cfg(target_arch = "aarch64")]
pub const REGS_MASK: u64 = ((1 << 29) - 1) | (1 << 31);
#[cfg(target_arch = "aarch64")]
pub const REGS_SP_INDEX: usize = 29;
/// Elsewhere register sampling is not used (no mask known).
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub const REGS_MASK: u64 = 0;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub const REGS_SP_INDEX: usize = 0;

/// One ring buffer.
pub struct Stream {
    pub sampler: Sampler,
    pub kind: StreamKind,
    pub target: i32,
    pub cpu: usize,
    /// Attributes the event was opened with (needed to re-point a watchpoint).
    attrs: perf_event_open_sys::bindings::perf_event_attr,
    /// Word a watchpoint currently points at.
    watched: u64,
    /// The counting group leader the sampler is scheduled with (`mem-loads-aux`), kept open
    /// for as long as the sampler.
    #[cfg_attr(not(test), allow(dead_code))]
    leader: Option<Counter>,
}

/// Common options of the events opened on one target.
#[derive(Debug, Clone, Copy)]
pub struct OpenOpts {
    /// Follow child processes too (otherwise `inherit_thread`: threads only).
    pub follow_children: bool,
    /// Start counting at the target's next execve (launch mode) instead of immediately.
    pub enable_on_exec: bool,
    /// Ring buffer data size in bytes (rounded up to a power of two pages by perf-event2).
    pub buffer_bytes: usize,
}

/// The online CPUs (`/sys/devices/system/cpu/online`, e.g. `0-3,6`).
pub fn online_cpus() -> Result<Vec<usize>> {
    let path = "/sys/devices/system/cpu/online";
    let text = std::fs::read_to_string(path).map_err(|e| ProfileError::io(path, e))?;
    mapper::parse_cpu_list(&text)
        .map(|c| c.into_iter().map(|c| c as usize).collect())
        .map_err(|e| ProfileError::Config(format!("{path}: {e}")))
}

/// The current `perf_event_paranoid` level (2 on Debian by default), if readable.
pub fn paranoid_level() -> Option<i32> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Turn a perf_event_open error into the message a user can act on.
pub fn classify_open_error(e: io::Error, what: &str, target: i32) -> ProfileError {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            let level = paranoid_level();
            let uid = nix::unistd::getuid();
            let detail = match level {
                Some(l) if l > 2 && !uid.is_root() => format!(
                    "unprivileged perf_event_open is disabled (kernel.perf_event_paranoid={l}): run as root, grant CAP_PERFMON, or `sysctl kernel.perf_event_paranoid=2`"
                ),
                l => format!(
                    "uid {uid} may not observe pid {target} (kernel.perf_event_paranoid={}; another user's process needs root or CAP_PERFMON, levels above 2 forbid unprivileged perf entirely)",
                    l.map(|l| l.to_string()).unwrap_or_else(|| "unknown".into())
                ),
            };
            ProfileError::NotPermitted {
                what: what.to_string(),
                detail,
            }
        }
        Some(libc::ESRCH) => ProfileError::NoSuchProcess(target),
        // Intel's answer to mem-loads without its mem-loads-aux leader: cmlb groups them when
        // sysfs lists the alias, so reaching this means the kernel wants it but hides it.
        Some(libc::ENODATA) => ProfileError::BackendUnavailable {
            backend: what.to_string(),
            reason: format!(
                "the kernel wants this event grouped with an auxiliary event that its PMU does \
                 not list in sysfs (Intel: events/mem-loads-aux) ({e})"
            ),
        },
        Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::EOPNOTSUPP) => {
            ProfileError::BackendUnavailable {
                backend: what.to_string(),
                reason: format!("the kernel does not offer this event ({e})"),
            }
        }
        Some(libc::EMFILE) | Some(libc::ENFILE) => ProfileError::Perf {
            what: what.to_string(),
            source: io::Error::new(
                e.kind(),
                format!("{e}: too many open files (one event per thread x CPU; raise `ulimit -n`)"),
            ),
        },
        _ => ProfileError::Perf {
            what: what.to_string(),
            source: e,
        },
    }
}

fn base_builder<'a>(b: &mut Builder<'a>, target: i32, cpu: usize, o: &OpenOpts) {
    b.observe_pid(target)
        .one_cpu(cpu)
        .inherit(true)
        .inherit_thread(!o.follow_children)
        .sample(SampleFlag::TID | SampleFlag::TIME | SampleFlag::ADDR)
        .exclude_kernel(true)
        .exclude_hv(true);
}

/// Open a software or breakpoint sampler set up in `b` as `kind` on `target` and `cpu`, with
/// its ring buffer; `what` names the event and its ring buffer in errors.
fn open_sampled(
    b: &mut Builder,
    (kind, target, cpu): (StreamKind, i32, usize),
    o: &OpenOpts,
    what: [&str; 2],
) -> Result<Stream> {
    let attrs = *b.attrs();
    let counter = b
        .build()
        .map_err(|e| classify_open_error(e, what[0], target))?;
    let sampler = counter
        .sampled(o.buffer_bytes)
        .map_err(|e| classify_open_error(e, what[1], target))?;
    Ok(Stream {
        sampler,
        kind,
        target,
        cpu,
        attrs,
        watched: PARKED_ADDR,
        leader: None,
    })
}

/// Open the `page-faults` sampler of `target` on `cpu`, sampling every `period`-th fault, with
/// task (FORK/EXIT) and COMM records for thread tracking.
pub fn open_faults(target: i32, cpu: usize, period: u64, o: &OpenOpts) -> Result<Stream> {
    let mut b = Builder::new(Software::PAGE_FAULTS);
    base_builder(&mut b, target, cpu, o);
    b.sample_period(period)
        .task(true)
        .comm(true)
        .comm_exec(true)
        .sample_id_all(true)
        .enable_on_exec(o.enable_on_exec)
        .enabled(!o.enable_on_exec);
    open_sampled(
        &mut b,
        (StreamKind::Faults, target, cpu),
        o,
        ["page-fault sampling", "page-fault ring buffer"],
    )
}

/// Open the register sampler of `target` on `cpu`: a `task-clock` sample every `period_ns` of
/// the thread's CPU time with its user registers. A software event: no PMU, no privilege
/// beyond what the fault sampler needs, and it works in virtual machines.
pub fn open_regs(target: i32, cpu: usize, period_ns: u64, o: &OpenOpts) -> Result<Stream> {
    let mut b = Builder::new(Software::TASK_CLOCK);
    base_builder(&mut b, target, cpu, o);
    // Set, not added to the base's TID | TIME | ADDR (`Builder::sample` ORs): a clock sample
    // has no data address, and decode_regs expects none.
    b.attrs_mut().sample_type = (SampleFlag::TID | SampleFlag::TIME | SampleFlag::REGS_USER).bits();
    b.sample_regs_user(REGS_MASK)
        .sample_period(period_ns)
        .enable_on_exec(o.enable_on_exec)
        .enabled(!o.enable_on_exec);
    open_sampled(
        &mut b,
        (StreamKind::Regs, target, cpu),
        o,
        [
            "register sampling (task-clock)",
            "register sampling ring buffer",
        ],
    )
}

/// An address no program maps (the first page), used for a watchpoint that is not armed yet.
pub const PARKED_ADDR: u64 = 0x1000;

/// Open watchpoint slot `slot` of `target` on `cpu`, disabled and parked on an unmapped word.
pub fn open_watch(target: i32, cpu: usize, slot: usize, o: &OpenOpts) -> Result<Stream> {
    let mut b = Builder::new(Breakpoint::read_write(PARKED_ADDR, 8));
    base_builder(&mut b, target, cpu, o);
    b.sample_period(1).enabled(false);
    open_sampled(
        &mut b,
        (StreamKind::Watch(slot), target, cpu),
        o,
        ["watchpoint (breakpoint PMU)", "watchpoint ring buffer"],
    )
}

/// Open a precise memory-sampling event (under its group leader, if it has one). `target`
/// None: CPU-wide (AMD IBS has no per-task mode; samples are filtered by pid afterwards, and
/// the kernel demands CAP_PERFMON or `perf_event_paranoid` <= 0 for it).
pub fn open_hw(
    ev: &crate::hw::HwEvent,
    target: Option<i32>,
    cpu: usize,
    o: &OpenOpts,
) -> Result<Stream> {
    let layout = crate::hw::SampleLayout::new(ev.sample_type)?;
    let who = target.unwrap_or(-1);
    // Both events start together: at the target's exec, or now.
    let on_exec = o.enable_on_exec && target.is_some();
    let attach = |b: &mut Builder| {
        match target {
            Some(t) => base_builder(b, t, cpu, o),
            None => {
                b.any_pid().one_cpu(cpu);
            }
        }
        b.exclude_kernel(ev.exclude_kernel)
            .exclude_hv(ev.exclude_hv)
            .enable_on_exec(on_exec)
            .enabled(!on_exec);
    };
    let mut leader = match &ev.group_leader {
        Some(l) => {
            let mut b = Builder::new(Software::DUMMY);
            attach(&mut b);
            // A plain counter: it only has to be scheduled with the sampler.
            b.sample(SampleFlag::empty());
            set_event(b.attrs_mut(), l.pmu_type, [l.config, l.config1, l.config2]);
            let c = b.build().map_err(|e| {
                classify_open_error(e, &format!("hw group leader {}", l.label), who)
            })?;
            Some(c)
        }
        None => None,
    };
    let mut b = Builder::new(Software::DUMMY);
    attach(&mut b);
    b.sample(SampleFlag::from_bits_retain(ev.sample_type))
        .sample_period(ev.sample_period)
        .precise_ip(match ev.precise_ip {
            0 => perf_event::SampleSkid::Arbitrary,
            1 => perf_event::SampleSkid::Constant,
            2 => perf_event::SampleSkid::RequestZero,
            _ => perf_event::SampleSkid::RequireZero,
        });
    set_event(
        b.attrs_mut(),
        ev.pmu_type,
        [ev.config, ev.config1, ev.config2],
    );
    let attrs = *b.attrs();
    let built = match leader.as_mut() {
        Some(l) => b.build_with_group(l),
        None => b.build(),
    };
    let counter =
        built.map_err(|e| classify_open_error(e, &format!("hw event {}", ev.label), who))?;
    let sampler = counter
        .sampled(o.buffer_bytes)
        .map_err(|e| classify_open_error(e, "hw ring buffer", who))?;
    Ok(Stream {
        sampler,
        kind: StreamKind::Hw(layout),
        target: who,
        cpu,
        attrs,
        watched: PARKED_ADDR,
        leader,
    })
}

/// Point an attr at a PMU's event: type and config words.
fn set_event(a: &mut perf_event_open_sys::bindings::perf_event_attr, ty: u32, w: [u64; 3]) {
    a.type_ = ty;
    a.config = w[0];
    a.__bindgen_anon_3.config1 = w[1];
    a.__bindgen_anon_4.config2 = w[2];
}

impl Stream {
    /// Point a watchpoint at `addr` (8-byte aligned) and enable it (in every inherited child).
    /// Re-pointing is skipped when the word is already watched (the same set stays for
    /// several windows): each modification reaches every inherited child, with an IPI to the
    /// CPUs they run on.
    pub fn arm(&mut self, addr: u64) -> io::Result<()> {
        let addr = addr & !7;
        if addr == self.watched {
            return self.sampler.as_counter_mut().enable();
        }
        let mut attrs = self.attrs;
        attrs.__bindgen_anon_3.bp_addr = addr;
        use std::os::fd::AsRawFd;
        // SAFETY: the fd is a live perf event and `attrs` a complete perf_event_attr that
        // outlives the call; the kernel only reads it.
        let rc = unsafe {
            libc::ioctl(
                self.sampler.as_raw_fd(),
                IOC_MODIFY_ATTRIBUTES as _,
                &mut attrs as *mut _,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        self.watched = addr;
        self.sampler.as_counter_mut().enable()
    }

    /// Disable a watchpoint (in every inherited child).
    pub fn disarm(&mut self) -> io::Result<()> {
        self.sampler.as_counter_mut().disable()
    }

    /// Decode every pending record into `out`; returns how many records were malformed or of
    /// unused types.
    pub fn drain(&mut self, out: &mut Vec<(StreamKind, Rec)>) -> u64 {
        let mut skipped = 0;
        let with_id = self.kind == StreamKind::Faults;
        let kind = self.kind;
        while let Some(r) = self.sampler.next_record() {
            let body = r.to_contiguous();
            if let (StreamKind::Hw(layout), records::RECORD_SAMPLE) = (kind, r.ty()) {
                match crate::hw::record::decode_sample(&layout, r.misc(), &body, 0)
                    .ok()
                    .and_then(|h| h.to_sample().map(|s| (h.pid as i32, s)))
                {
                    Some((pid, s)) => out.push((kind, Rec::Full { pid, sample: s })),
                    None => skipped += 1,
                }
                continue;
            }
            if (kind, r.ty()) == (StreamKind::Regs, records::RECORD_SAMPLE) {
                match records::decode_regs(&body, REGS_MASK.count_ones() as usize) {
                    Some(rec) => out.push((kind, rec)),
                    None => skipped += 1,
                }
                continue;
            }
            match records::decode(r.ty(), r.misc(), &body, with_id) {
                Some(rec) => out.push((kind, rec)),
                None => skipped += 1,
            }
        }
        skipped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn online_cpus_are_read() {
        assert!(!online_cpus().unwrap().is_empty());
    }

    /// Page faults sampled in the hw sample layout (TID|TIME|ADDR|DATA_SRC): a software event
    /// standing in for PEBS/IBS, which this machine does not have.
    fn faults_in_hw_layout() -> crate::hw::HwEvent {
        crate::hw::HwEvent {
            label: "software/page-faults/ in the hw layout".into(),
            pmu: "software".into(),
            pmu_type: 1, // PERF_TYPE_SOFTWARE
            config: 2,   // PERF_COUNT_SW_PAGE_FAULTS
            config1: 0,
            config2: 0,
            precise_ip: 0,
            sample_type: crate::hw::record::HW_SAMPLE_TYPE,
            sample_period: 1,
            exclude_kernel: true,
            exclude_hv: true,
            samples: crate::sample::AccessKind::Unknown,
            aux_trace: false,
            data_src_has_level: false,
            group_leader: None,
            cpus: None,
        }
    }

    /// Open `ev` on this test's thread on every CPU.
    fn open_on_this_thread(ev: &crate::hw::HwEvent) -> Vec<Stream> {
        let o = OpenOpts {
            follow_children: false,
            enable_on_exec: false,
            buffer_bytes: 256 * 1024,
        };
        let tid = nix::unistd::gettid().as_raw();
        online_cpus()
            .unwrap()
            .into_iter()
            .map(|c| open_hw(ev, Some(tid), c, &o).unwrap())
            .collect()
    }

    /// First-touch 64 fresh pages from this thread; returns how many of them the streams
    /// decoded as samples of this thread at those addresses.
    fn sampled_faults(streams: &mut [Stream]) -> usize {
        let me = std::process::id() as i32;
        let tid = nix::unistd::gettid().as_raw();
        let len = 64 * 4096;
        // SAFETY: anonymous private mapping, unmapped below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        } as *mut u8;
        assert!(p as *mut libc::c_void != libc::MAP_FAILED);
        for i in 0..64 {
            // SAFETY: within the mapping.
            unsafe { p.add(i * 4096).write_volatile(1) };
        }
        let mut recs = Vec::new();
        for s in streams.iter_mut() {
            s.drain(&mut recs);
        }
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(p.cast(), len) };
        let base = p as u64;
        recs.iter()
            .filter(|(k, r)| {
                matches!(k, StreamKind::Hw(_))
                    && matches!(r, Rec::Full { pid, sample }
                        if *pid == me && sample.tid == tid
                            && sample.addr >= base && sample.addr < base + len as u64)
            })
            .count()
    }

    /// The hw path (attr from an `HwEvent`, ring buffer bytes through the hw record decoder).
    #[test]
    fn hw_stream_decodes_through_the_hw_record_layout() {
        let mut streams = open_on_this_thread(&faults_in_hw_layout());
        let n = sampled_faults(&mut streams);
        assert!(n >= 60, "only {n} of 64 page faults decoded");
    }

    /// An event with a group leader (Intel mem-loads under mem-loads-aux) is opened in the
    /// leader's group: the leader counts alongside the sampler, and the sampler runs only
    /// while its leader is enabled, which is what membership of the group means. Software
    /// events stand in for both, since this machine has no PEBS.
    #[test]
    fn hw_event_is_opened_in_its_leaders_group() {
        let mut ev = faults_in_hw_layout();
        ev.group_leader = Some(crate::hw::GroupLeader {
            label: "software/page-faults/ counting".into(),
            pmu_type: 1,
            config: 2,
            config1: 0,
            config2: 0,
        });
        let mut streams = open_on_this_thread(&ev);
        let n = sampled_faults(&mut streams);
        assert!(n >= 60, "only {n} of 64 page faults sampled in the group");
        let counted: u64 = streams
            .iter_mut()
            .map(|s| {
                s.leader
                    .as_mut()
                    .expect("the leader is kept")
                    .read()
                    .unwrap()
            })
            .sum();
        assert!(counted >= 60, "the leader counted {counted} faults");

        for s in streams.iter_mut() {
            s.leader.as_mut().unwrap().disable().unwrap();
        }
        let n = sampled_faults(&mut streams);
        assert_eq!(n, 0, "the sampler ran with its group leader disabled");
    }
}
