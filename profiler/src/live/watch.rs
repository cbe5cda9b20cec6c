//! The watch backend's scheduler: which words to watch, when, and for how long.
//!
//! The ComDetective idea on machines without precise memory sampling: a hardware watchpoint
//! (debug register, `breakpoint` PMU) on a data word traps on *every* access by any thread,
//! so arming it on a word another thread owns shows who really shares it. A trap costs
//! several microseconds, so the overhead is bounded by duty-cycling:
//!
//! * `slots` watchpoints are armed at once (x86 has 4 debug registers per thread);
//! * they are armed for `window` out of every `interval`, and a window is cut short once it
//!   has collected `max_hits` hits: on a hot word (touched every few nanoseconds) the threads
//!   would otherwise trap continuously, so the trap budget, not the window, bounds the cost
//!   (`max_hits` traps of a few µs per `interval`); on cold words the window runs its length;
//! * the window may adapt to the hit rate between `window` and `max_window` (equal by
//!   default): a window whose words stayed cold doubles the next one, a window that reached
//!   the budget halves it (the cost is the traps, which the budget bounds, not the armed time);
//! * a word stays selected for at most `hold` windows, so threads that were descheduled
//!   during one window are caught in the next (oversubscribed runs), if it has shown two
//!   threads and keeps showing new ones (it is replaced after `STALE` windows without a new
//!   thread); any other word is replaced after `PROBATION` window (most words are private).
//!
//! Words go where evidence is missing: owners (the threads whose faults gave the candidate
//! words) not yet seen sharing come first, and one refill in four one slot takes a word of a
//! page where a watched word was already seen shared (so a pair is seen through several words,
//! which the held-out halves, split by cache line, need to agree about it).
//!
//! Words go where sharing is likely: every other pick from an owner is a word of an *edge*
//! page of its data (a page it first touched whose neighbour page below or above it did not):
//! data decomposed among threads (slabs, chunks of an array) is shared at the borders of each
//! thread's part. And a word touched by more than a quarter of the threads (at least 4) is a
//! *broadcast* word (a barrier, a lock, a table every thread reads): every placement cuts the
//! same share of it, so it is released after its window, its page is not explored and its
//! line is not watched again.
//!
//! Candidate words come from the fault samples (the exact address whose first touch faulted
//! the page in, grouped by the thread that touched it: owners are visited round-robin so every
//! thread's data gets watched) and, for slots they cannot fill (e.g. after `--attach`), from random
//! words of the process's writable mappings (`/proc/PID/maps`) whose page is resident
//! (`/proc/PID/pagemap`): most of a writable address space is untouched thread-stack and heap
//! reserve, and a watchpoint there never fires. Fault addresses outside the
//! writable mappings are never watched: code, read-only data and the GOT after RELRO are read
//! by every thread (a GOT slot on every call through the PLT) without any data moving between
//! threads, and watching one made unrelated threads look like heavy communicators.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

/// Knobs of the watch backend (documented in docs/profiling.md).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WatchConfig {
    /// Watchpoints armed at the same time.
    pub slots: usize,
    /// How long a set of watchpoints stays armed.
    pub window: Duration,
    /// Time between the starts of two windows.
    pub interval: Duration,
    /// Windows a chosen set of words is kept before choosing new words.
    pub hold: u32,
    /// A window ends early after this many hits (all slots together).
    pub max_hits: u32,
    /// Longest window the adaptive duty cycle may stretch to (`window` ..= this, shorter than
    /// `interval`); equal to `window` for a fixed duty cycle.
    pub max_window: Duration,
    /// Register sampling period in microseconds of each thread's CPU time (0: off): the
    /// pointers a thread's registers hold are candidate words ([`Scheduler::add_pointers`]).
    pub regs_period_us: u64,
}

impl Default for WatchConfig {
    fn default() -> Self {
        WatchConfig {
            slots: 4,
            window: Duration::from_millis(10),
            interval: Duration::from_millis(50),
            hold: 6,
            max_hits: 256,
            // Fixed by default: stretched windows (up to 45 ms) collect 2-3x the hits on
            // programs that share few words, but on the ring workload they let the two readers
            // of one buffer outweigh true neighbours in 1 of 6 runs (see docs/evidence.md).
            max_window: Duration::from_millis(10),
            regs_period_us: 1000,
        }
    }
}

impl WatchConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.slots == 0 || self.slots > 4 {
            return Err(format!(
                "watch slots must be 1..=4 (debug registers), got {}",
                self.slots
            ));
        }
        if self.window.is_zero() || self.window >= self.interval {
            return Err(format!(
                "watch window ({:?}) must be > 0 and shorter than the interval ({:?})",
                self.window, self.interval
            ));
        }
        if self.regs_period_us != 0 && !(50..=10_000_000).contains(&self.regs_period_us) {
            return Err(format!(
                "register sampling period must be 0 (off) or 50..=10000000 us, got {}",
                self.regs_period_us
            ));
        }
        if self.hold == 0 {
            return Err("watch hold must be >= 1 window".into());
        }
        if self.max_hits == 0 {
            return Err("watch max hits must be >= 1".into());
        }
        if self.max_window < self.window || self.max_window >= self.interval {
            return Err(format!(
                "watch max window ({:?}) must be at least the window ({:?}) and shorter than the \
                 interval ({:?})",
                self.max_window, self.window, self.interval
            ));
        }
        Ok(())
    }

    /// Fraction of run time watchpoints are armed at the start (at most; windows end early at
    /// `max_hits`).
    pub fn duty_cycle(&self) -> f64 {
        self.window.as_secs_f64() / self.interval.as_secs_f64()
    }

    /// The largest fraction the adaptive duty cycle may reach.
    pub fn max_duty_cycle(&self) -> f64 {
        self.max_window.as_secs_f64() / self.interval.as_secs_f64()
    }
}

/// What the scheduler wants done now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Arm slot i on address (8-byte aligned).
    Arm(Vec<u64>),
    Disarm,
}

/// What the scheduler needs to know about the profiled process's memory.
pub trait AddressSpace {
    /// The process the words are chosen for: only its fault addresses are candidates (the
    /// same address in another process is other memory). `None`: every candidate.
    fn pid(&self) -> Option<i32> {
        None
    }
    /// Current writable data mappings, `(start, end)`; empty when unknown (disables the filter).
    fn writable(&mut self) -> Vec<(u64, u64)>;
    /// Whether the page holding `addr` is in memory; `true` when that cannot be known.
    fn resident(&mut self, _addr: u64) -> bool {
        true
    }
}

/// A closure that lists mappings is an address space with unknown residency.
impl<F: FnMut() -> Vec<(u64, u64)>> AddressSpace for F {
    fn writable(&mut self) -> Vec<(u64, u64)> {
        self()
    }
}

/// A live process's address space, read from `/proc/PID/maps` and `/proc/PID/pagemap`.
pub struct ProcAddressSpace {
    pid: i32,
    page_size: u64,
    /// `None` when pagemap cannot be opened (another user's process, old kernel): every
    /// word then counts as resident.
    pagemap: Option<std::fs::File>,
}

impl ProcAddressSpace {
    pub fn new(pid: i32) -> Self {
        // SAFETY: sysconf has no preconditions.
        let page_size = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
            n if n > 0 => n as u64,
            _ => 4096,
        };
        ProcAddressSpace {
            pid,
            page_size,
            pagemap: None,
        }
    }

    /// Choose the next words in this process (takes effect at the next `writable`).
    pub fn set_pid(&mut self, pid: i32) {
        self.pid = pid;
    }
}

impl AddressSpace for ProcAddressSpace {
    fn pid(&self) -> Option<i32> {
        Some(self.pid)
    }

    fn writable(&mut self) -> Vec<(u64, u64)> {
        // Reopened with every new word set: an open pagemap stays bound to the address space
        // it was opened on, and a launched command replaces its own with exec.
        self.pagemap = std::fs::File::open(format!("/proc/{}/pagemap", self.pid)).ok();
        writable_mappings(self.pid)
    }

    fn resident(&mut self, addr: u64) -> bool {
        use std::os::unix::fs::FileExt;
        let Some(f) = &self.pagemap else {
            return true;
        };
        // One 64-bit entry per page; bit 63 = present in RAM, bit 62 = swapped. Readable
        // without privileges for our own processes (only the frame number is hidden).
        let mut e = [0u8; 8];
        match f.read_exact_at(&mut e, addr / self.page_size * 8) {
            Ok(()) => u64::from_le_bytes(e) >> 63 == 1,
            Err(_) => true,
        }
    }
}

/// Random fill-up tries per free slot: with a few % of the writable space resident this still
/// finds a resident word almost always, at one 8-byte pread per try.
const RESIDENT_TRIES: usize = 64;

/// Max fault addresses remembered per owning thread (reservoir sample).
const PER_OWNER: usize = 512;

/// Most pages remembered per owning thread for finding the edges of its data (128 MiB of
/// 4 KiB pages; a thread with more has its edges found among the first ones).
const PAGES_PER_OWNER: usize = 1 << 15;

/// Pointers remembered per thread from its register samples (the newest replace the oldest:
/// they stand for what it works on now).
const PTRS_PER_OWNER: usize = 64;

/// A register value from just below the sampled stack pointer (the red zone) to this far
/// above it is an address in the thread's live stack frames (its locals): private, never
/// watched. Not more: another mapping (a thread's data) may start right above a stack.
const STACK_SPAN: u64 = 256 << 10;
/// The red zone below the stack pointer (x86-64 ABI: 128 bytes; rounded up).
const RED_ZONE: u64 = 256;

/// Threads whose registers may hold an address in one line before it counts as a global
/// (see [`Scheduler::add_pointers`]).
const POINTER_HOLDERS: usize = 3;

/// Pages whose first-touching thread is remembered, for telling a thread's pointers into
/// other threads' data from pointers into its own (4 GiB of 4 KiB pages).
const PAGE_OWNERS: usize = 1 << 20;

/// Fault addresses first touched by one thread, and the pointers its registers held.
#[derive(Default)]
struct Owner {
    pid: i32,
    seen: u64,
    addrs: Vec<u64>,
    /// Pages the thread first touched, and the edges of their runs (a page whose neighbour
    /// below or above the thread did not touch), recomputed when pages were added.
    pages: std::collections::BTreeSet<u64>,
    edges: Vec<u64>,
    edges_stale: bool,
    /// Recent pointers from the thread's registers into pages another thread first touched:
    /// the data of others it is using now (a ring of [`PTRS_PER_OWNER`]).
    foreign: Vec<u64>,
    /// Recent pointers into its own pages or pages of unknown owner (same ring size).
    ptrs: Vec<u64>,
    /// Next ring positions of `foreign` and `ptrs`.
    next_foreign: usize,
    next_ptr: usize,
}

/// Push `v` into a ring of at most [`PTRS_PER_OWNER`] values at `*next`.
fn ring_push(ring: &mut Vec<u64>, next: &mut usize, v: u64) {
    if ring.len() < PTRS_PER_OWNER {
        ring.push(v);
    } else {
        ring[*next % PTRS_PER_OWNER] = v;
    }
    *next = (*next + 1) % PTRS_PER_OWNER;
}

impl Owner {
    fn edges(&mut self, page_size: u64) -> &[u64] {
        if self.edges_stale {
            self.edges_stale = false;
            let p = &self.pages;
            self.edges = p
                .iter()
                .copied()
                .filter(|&a| {
                    a < page_size || !p.contains(&(a - page_size)) || !p.contains(&(a + page_size))
                })
                .collect();
        }
        &self.edges
    }
}

/// A slot's word is replaced after this many windows unless two threads touched it: most
/// words are private, and holding them `hold` windows wasted most of the watch time on programs
/// that share few of their words (a stencil shares its boundary planes, ~6 % of its data).
/// One window: a word nobody touched is no better a candidate than a fresh one, and one that
/// only its owner touched had its chance while the owner ran. Measured on the stencil workload
/// with 32 threads (4 s): 2 windows gave 141 words, 1 window gives about twice as many.
const PROBATION: u32 = 1;

/// A shared word is replaced once this many windows passed without a new thread on it (at
/// most `hold` windows in all): its pair is known, and more of its events add weight but no
/// new pair or line. Measured on the 32-thread shuffled stencil (4 s, 4 seeds): holding every
/// shared word `hold` (6) windows found 39-44 shared words and the guard kept the plan in 3 of
/// 4 runs; releasing them after 2 quiet windows found 77-92 and kept it in 4 of 4.
const STALE: u32 = 2;

/// Pages where a watched word was touched by two or more threads, remembered for
/// exploitation (other words of a page that is shared are usually shared too).
const SHARED_PAGES: usize = 64;

/// Lines of broadcast words remembered so they are not watched again.
const BROADCAST_LINES: usize = 256;

/// One watchpoint slot: its word, how many windows it has been armed, who touched it.
#[derive(Debug, Clone, Default)]
struct SlotState {
    addr: u64,
    age: u32,
    hitters: Vec<i32>,
    /// `age` when the last new thread was seen on it.
    fresh_age: u32,
    /// Chosen from a pointer one thread held into another thread's page: likely shared, so
    /// it is held up to `hold` windows for the two to show, not replaced after its first
    /// window (when threads outnumber CPUs, both rarely run in the same window).
    patient: bool,
    /// Touched by more threads than [`Scheduler::broadcast_limit`]: a barrier, a lock, a
    /// table every thread reads. Released after its window and never watched again.
    broadcast: bool,
}

pub struct Scheduler {
    cfg: WatchConfig,
    /// By tid.
    owners: BTreeMap<i32, Owner>,
    next_owner: usize,
    rng: u64,
    armed: bool,
    next_at: Instant,
    slots: Vec<SlotState>,
    /// The process `slots` were chosen in (`AddressSpace::pid`).
    current_pid: Option<i32>,
    window_start: Instant,
    /// Current window length: adapted between `cfg.window` and `cfg.max_window`.
    window: Duration,
    hits: u32,
    /// Per thread, the distinct threads it was seen sharing a watched word with: owner
    /// choice prefers the threads that have none yet.
    partners: BTreeMap<i32, HashSet<i32>>,
    /// (pid, page address) of pages with a word touched by two or more threads, newest last.
    shared_pages: Vec<(Option<i32>, u64)>,
    /// (pid, line) of broadcast words seen (at most [`BROADCAST_LINES`], oldest dropped).
    broadcast_lines: Vec<(Option<i32>, u64)>,
    page_size: u64,
    /// (pid, page) -> the thread that first touched it (at most [`PAGE_OWNERS`]).
    page_owner: std::collections::HashMap<(i32, u64), i32>,
    /// (pid, line) -> the threads whose registers held an address in it (up to one more than
    /// the broadcast limit; at most [`PAGE_OWNERS`] lines).
    pointer_holders: std::collections::HashMap<(i32, u64), Vec<i32>>,
    /// The writable mappings read at the last refill: register values outside them are not
    /// pointers to data (counters, hashes, code addresses) and are not kept.
    last_writable: Vec<(u64, u64)>,
    pub windows: u64,
    /// Windows cut short by the hit budget.
    pub cut_windows: u64,
    /// Sum of the armed windows' lengths (for the effective duty cycle).
    pub armed_time: Duration,
    /// Words chosen (every slot fill counts).
    pub words: u64,
    /// Words that showed two or more threads.
    pub shared_words: u64,
    /// Register samples read, and the pointers they gave into other threads' pages.
    pub register_samples: u64,
    pub foreign_pointers: u64,
    /// Words chosen from register pointers (of [`Self::words`]).
    pub pointer_words: u64,
}

impl Scheduler {
    pub fn new(cfg: WatchConfig, start: Instant, seed: u64) -> Self {
        Scheduler {
            cfg,
            owners: BTreeMap::new(),
            next_owner: 0,
            rng: seed | 1,
            armed: false,
            // First window after one interval: lets the program fault its data in first.
            next_at: start + cfg.interval,
            slots: Vec::new(),
            current_pid: None,
            window_start: start,
            window: cfg.window,
            hits: 0,
            partners: BTreeMap::new(),
            shared_pages: Vec::new(),
            broadcast_lines: Vec::new(),
            page_size: 4096,
            page_owner: std::collections::HashMap::new(),
            pointer_holders: std::collections::HashMap::new(),
            last_writable: Vec::new(),
            windows: 0,
            cut_windows: 0,
            armed_time: Duration::ZERO,
            words: 0,
            shared_words: 0,
            register_samples: 0,
            foreign_pointers: 0,
            pointer_words: 0,
        }
    }

    fn rand(&mut self) -> u64 {
        // xorshift64*: plenty for picking addresses.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Remember a first-touch fault address and the thread (and its process) that faulted it.
    pub fn add_fault(&mut self, pid: i32, tid: i32, addr: u64) {
        let r = self.rand();
        let page = addr & !(self.page_size - 1);
        let o = self.owners.entry(tid).or_default();
        o.pid = pid;
        o.seen += 1;
        if o.pages.len() < PAGES_PER_OWNER && o.pages.insert(page) {
            o.edges_stale = true;
        }
        if self.page_owner.len() < PAGE_OWNERS {
            self.page_owner.entry((pid, page)).or_insert(tid);
        }
        if o.addrs.len() < PER_OWNER {
            o.addrs.push(addr);
        } else {
            let j = (r % o.seen) as usize;
            if j < PER_OWNER {
                o.addrs[j] = addr;
            }
        }
    }

    /// A register sample of thread `tid`: `values` in [`super::events::REGS_MASK`] order, the
    /// stack pointer at `sp_index`. Values that point into the process's writable data (as
    /// of the last refill) and not at the thread's stack are remembered as what the thread
    /// works on now; those into a page another thread first touched apart, as the likeliest
    /// sharing.
    pub fn add_pointers(&mut self, pid: i32, tid: i32, values: &[u64], sp_index: usize) {
        self.register_samples += 1;
        let sp = values.get(sp_index).copied();
        let mask = !(self.page_size - 1);
        let limit = self.pointer_holder_limit();
        for (k, &v) in values.iter().enumerate() {
            if k == sp_index
                || v < self.page_size
                || sp.is_some_and(|sp| v >= sp.saturating_sub(RED_ZONE) && v < sp + STACK_SPAN)
                || (!self.last_writable.is_empty() && !inside(&self.last_writable, v))
            {
                continue;
            }
            // A line whose address many threads hold is a global (pointer_holder_limit).
            if self.pointer_holders.len() < PAGE_OWNERS
                || self.pointer_holders.contains_key(&(pid, v >> 6))
            {
                let h = self.pointer_holders.entry((pid, v >> 6)).or_default();
                if !h.contains(&tid) && h.len() <= limit {
                    h.push(tid);
                }
                if h.len() > limit {
                    continue;
                }
            }
            let first = self.page_owner.get(&(pid, v & mask)).copied();
            let o = self.owners.entry(tid).or_default();
            o.pid = pid;
            match first {
                Some(f) if f != tid => {
                    self.foreign_pointers += 1;
                    ring_push(&mut o.foreign, &mut o.next_foreign, v);
                }
                _ => ring_push(&mut o.ptrs, &mut o.next_ptr, v),
            }
        }
    }

    /// A watchpoint hit by thread `tid` on `addr` (a kept one: in the watched process). A
    /// word touched by two threads marks both as having data and its page as shared.
    pub fn note_hit(&mut self, tid: i32, addr: u64) {
        let line = addr >> 6;
        let Some(k) = self.slots.iter().position(|s| s.addr >> 6 == line) else {
            return;
        };
        // Most hits are a known thread on its word again: done before counting the threads
        // seen (a pass over every owner).
        if self.slots[k].hitters.contains(&tid) {
            return;
        }
        let limit = self.broadcast_limit();
        let slot = &mut self.slots[k];
        slot.hitters.push(tid);
        slot.fresh_age = slot.age;
        if slot.hitters.len() > limit && !slot.broadcast {
            // Every placement cuts the same share of a word all threads touch: it adds
            // events to every pair and nothing a plan could use. Holding it `hold` windows
            // (and exploring its page) let one barrier word swamp a 32-thread stencil's matrix
            // with 496 pairs; one window of it is little noise.
            slot.broadcast = true;
            let (pid, page) = (self.current_pid, slot.addr & !(self.page_size - 1));
            if self.broadcast_lines.len() == BROADCAST_LINES {
                self.broadcast_lines.remove(0);
            }
            self.broadcast_lines.push((pid, line));
            self.shared_pages.retain(|&k| k != (pid, page));
            return;
        }
        if slot.broadcast {
            return;
        }
        let others: Vec<i32> = slot.hitters.iter().copied().filter(|&t| t != tid).collect();
        for &o in &others {
            self.partners.entry(tid).or_default().insert(o);
            self.partners.entry(o).or_default().insert(tid);
        }
        if slot.hitters.len() == 2 {
            self.shared_words += 1;
            let page = slot.addr & !(self.page_size - 1);
            let key = (self.current_pid, page);
            if !self.shared_pages.contains(&key) {
                if self.shared_pages.len() == SHARED_PAGES {
                    self.shared_pages.remove(0);
                }
                self.shared_pages.push(key);
            }
        }
    }

    /// A process's address space went away (exec or exit): its fault addresses mean nothing
    /// now, and if its words are watched the window ends and new words are chosen.
    pub fn forget_process(&mut self, pid: i32) {
        self.owners.retain(|_, o| o.pid != pid);
        self.page_owner.retain(|&(p, _), _| p != pid);
        self.pointer_holders.retain(|&(p, _), _| p != pid);
        self.shared_pages.retain(|&(p, _)| p != Some(pid));
        self.broadcast_lines.retain(|&(p, _)| p != Some(pid));
        if self.current_pid == Some(pid) {
            self.slots.clear();
            self.last_writable.clear();
            if self.armed {
                self.next_at = self.window_start;
            }
        }
    }

    /// The process whose words are (or were last) armed: hits from other processes are at
    /// the same addresses in other memory.
    pub fn watched_pid(&self) -> Option<i32> {
        self.current_pid
    }

    /// When the scheduler next needs to act.
    pub fn next_at(&self) -> Instant {
        self.next_at
    }

    pub fn is_armed(&self) -> bool {
        self.armed
    }

    /// The current (adapted) window length.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// Threads known to share a watched word with another thread.
    pub fn threads_with_data(&self) -> usize {
        self.partners.len()
    }

    /// More distinct threads than this on one word make it a broadcast word: a quarter of
    /// the threads seen, at least 4 (a group of 4 sharing threads is structure).
    fn broadcast_limit(&self) -> usize {
        (self.threads_seen() / 4).max(4)
    }

    /// More threads than this holding an address in one line make it a global every thread
    /// uses (a barrier they wait in, a counter): like a broadcast word, nothing to place by.
    /// Sooner than a watched word's broadcast limit: at any instant a thread points at a few
    /// lines of the data it shares, so two sharers rarely hold the same line, and one window
    /// of a barrier word adds every pair of threads to the matrix.
    fn pointer_holder_limit(&self) -> usize {
        self.broadcast_limit().min(POINTER_HOLDERS)
    }

    /// Threads seen touching memory (a first-touch fault) in the process whose words are
    /// watched (all processes before the first window).
    pub fn threads_seen(&self) -> usize {
        self.owners
            .values()
            .filter(|o| self.current_pid.is_none_or(|p| o.pid == p))
            .count()
    }

    /// Count watchpoint hits drained from the ring buffers; ends the window at the budget.
    pub fn add_hits(&mut self, n: u32, now: Instant) {
        if !self.armed {
            return;
        }
        self.hits = self.hits.saturating_add(n);
        if self.hits >= self.cfg.max_hits && self.next_at > now {
            self.next_at = now;
            self.cut_windows += 1;
        }
    }

    /// Advance: returns the action due at `now`, if any. `mem` is consulted only when a slot
    /// needs a new word, so the mappings are current.
    pub fn step(&mut self, now: Instant, mem: &mut dyn AddressSpace) -> Option<Action> {
        if now < self.next_at {
            return None;
        }
        if self.armed {
            self.armed = false;
            self.armed_time += now.saturating_duration_since(self.window_start);
            // Adapt the duty cycle to the hit rate: the cost of a window is its traps (at most
            // `max_hits`), not its length, so a window whose words stayed cold (under 1/32 of
            // the budget) may be longer, and one that hit the budget shorter.
            if self.hits >= self.cfg.max_hits {
                self.window = (self.window / 2).max(self.cfg.window);
            } else if self.hits < self.cfg.max_hits / 32 {
                self.window = (self.window * 2).min(self.cfg.max_window);
            }
            for s in &mut self.slots {
                s.age += 1;
            }
            self.next_at =
                (self.window_start + self.cfg.interval).max(now + Duration::from_micros(100));
            return Some(Action::Disarm);
        }
        self.refill(mem);
        if self.slots.is_empty() {
            self.next_at = now + self.cfg.interval;
            return None;
        }
        self.windows += 1;
        self.armed = true;
        self.hits = 0;
        self.window_start = now;
        self.next_at = now + self.window;
        Some(Action::Arm(self.slots.iter().map(|s| s.addr).collect()))
    }

    /// Replace the words that are due: all of them when the process changed, else those held
    /// `hold` windows, and those that have not shown two threads after [`PROBATION`].
    fn refill(&mut self, mem: &mut dyn AddressSpace) {
        let pid = mem.pid();
        let hold = self.cfg.hold;
        let probation = PROBATION.min(hold);
        if pid != self.current_pid {
            self.slots.clear();
        }
        self.slots.retain(|s| {
            if s.hitters.len() >= 2 && !s.broadcast {
                s.age < hold && s.age - s.fresh_age < STALE
            } else if s.patient && !s.broadcast {
                s.age < hold
            } else {
                s.age < probation
            }
        });
        if self.slots.len() >= self.cfg.slots {
            return;
        }
        self.current_pid = pid;
        let keep: Vec<u64> = self.slots.iter().map(|s| s.addr).collect();
        let fresh = self.choose(mem, self.cfg.slots - self.slots.len(), &keep);
        self.words += fresh.len() as u64;
        self.slots.extend(fresh);
    }

    /// Up to `want` new words, none on the lines of `keep`: one from a page already seen
    /// shared (every other refill, when there is one), the rest from fault addresses of
    /// owner threads visited round-robin, threads without sharing data first; then random
    /// resident writable words for slots still free.
    fn choose(&mut self, mem: &mut dyn AddressSpace, want: usize, keep: &[u64]) -> Vec<SlotState> {
        let writable = mem.writable();
        self.last_writable.clone_from(&writable);
        let mut chosen: Vec<SlotState> = Vec::new();
        let mut lines: HashSet<u64> = keep.iter().map(|a| a >> 6).collect();
        let pid = mem.pid();
        let broadcast: HashSet<u64> = self
            .broadcast_lines
            .iter()
            .filter(|&&(p, _)| p == pid)
            .map(|&(_, l)| l)
            .collect();
        let mut take = |a: u64, chosen: &mut Vec<SlotState>| {
            let a = a & !7;
            if !broadcast.contains(&(a >> 6)) && lines.insert(a >> 6) {
                chosen.push(SlotState {
                    addr: a,
                    ..SlotState::default()
                });
            }
        };
        let pages: Vec<u64> = self
            .shared_pages
            .iter()
            .filter(|&&(p, _)| p == pid)
            .map(|&(_, pg)| pg)
            .collect();
        if !pages.is_empty() && self.rand().is_multiple_of(4) {
            let r = self.rand();
            let page = pages[(r % pages.len() as u64) as usize];
            // A word of the page or of its neighbours (arrays span pages).
            let off = (self.rand() % (3 * self.page_size)) & !7;
            let a = (page + off).saturating_sub(self.page_size);
            if (writable.is_empty() || inside(&writable, a)) && mem.resident(a) {
                take(a, &mut chosen);
            }
        }
        let all: Vec<i32> = self
            .owners
            .iter()
            .filter(|(_, o)| pid.is_none_or(|p| o.pid == p))
            .map(|(&tid, _)| tid)
            .collect();
        // Threads not yet seen sharing first; once every owner has some data, all of them in
        // turn. (Preferring the fewest known partners instead made owners' coverage uneven,
        // and on the ring workload the two readers of an over-watched buffer then outweighed
        // true neighbours in 4 of 8 runs.)
        let without: Vec<i32> = all
            .iter()
            .copied()
            .filter(|t| !self.partners.contains_key(t))
            .collect();
        let owners = if without.is_empty() { all } else { without };
        let limit = self.pointer_holder_limit();
        let mut tries = 0;
        // Fault candidates first; rejected (read-only) ones use up tries too.
        while !owners.is_empty() && chosen.len() < want && tries < 8 * want {
            tries += 1;
            let o = owners[self.next_owner % owners.len()];
            self.next_owner += 1;
            let (r, pick, off) = (self.rand(), self.rand() % 4, self.rand());
            let ps = self.page_size;
            let owner = self.owners.get_mut(&o).expect("owner listed");
            let o_pid = owner.pid;
            // A pointer the thread held into another thread's page first (three picks in
            // four when it has one): it is using that data now, so the watchpoint is likely to
            // show the pair. Then its other recent pointers (every other pick), which follow
            // what it touches now, not what it allocated first.
            let from_regs = if !owner.foreign.is_empty() && pick < 3 {
                Some((
                    owner.foreign[(r % owner.foreign.len() as u64) as usize],
                    true,
                ))
            } else if !owner.ptrs.is_empty() && pick % 2 == 0 {
                Some((owner.ptrs[(r % owner.ptrs.len() as u64) as usize], false))
            } else {
                None
            };
            // Held by many threads since it was remembered: a global, not this pair's data.
            let from_regs = from_regs.filter(|&(a, _)| {
                self.pointer_holders
                    .get(&(o_pid, a >> 6))
                    .is_none_or(|h| h.len() <= limit)
            });
            let edges = owner.edges(ps);
            // Otherwise every other pick a word of an edge page: data split among threads (a
            // domain decomposed in slabs or chunks) is shared at the borders of each thread's
            // part, which is a small fraction of its pages (a 3-D stencil's boundary planes,
            // ~6 %); else a first-touch fault address.
            let a = if let Some((a, _)) = from_regs {
                a
            } else if pick % 2 == 1 && !edges.is_empty() {
                edges[(r % edges.len() as u64) as usize] + ((off % ps) & !7)
            } else if !owner.addrs.is_empty() {
                owner.addrs[(r % owner.addrs.len() as u64) as usize]
            } else {
                continue;
            };
            if writable.is_empty() || inside(&writable, a) {
                let before = chosen.len();
                take(a, &mut chosen);
                if let (Some((_, foreign)), Some(slot)) = (from_regs, chosen.get_mut(before)) {
                    self.pointer_words += 1;
                    slot.patient = foreign;
                }
            }
        }
        // Then random resident writable words for the slots still free (no usable fault
        // candidates, e.g. after --attach once the data is faulted in).
        tries = 0;
        while chosen.len() < want && tries < RESIDENT_TRIES * want {
            tries += 1;
            let r = self.rand();
            match random_word(&writable, r) {
                Some(a) if mem.resident(a) => take(a, &mut chosen),
                Some(_) => {}
                None => break,
            }
        }
        chosen
    }
}

fn inside(maps: &[(u64, u64)], addr: u64) -> bool {
    maps.iter().any(|&(a, b)| addr >= a && addr < b)
}

/// Writable private or anonymous mappings of a process: `(start, end)` pairs.
pub fn writable_mappings(pid: i32) -> Vec<(u64, u64)> {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return Vec::new();
    };
    parse_writable_mappings(&text)
}

/// Parse `/proc/PID/maps`, keeping readable+writable data mappings (heap, anonymous, .data,
/// .bss, thread stacks) and skipping the kernel's special ones.
pub fn parse_writable_mappings(text: &str) -> Vec<(u64, u64)> {
    let mut v = Vec::new();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else {
            continue;
        };
        if !perms.starts_with("rw") {
            continue;
        }
        let name = f.nth(3).unwrap_or("");
        if matches!(name, "[vvar]" | "[vsyscall]" | "[vdso]") {
            continue;
        }
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        if let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) {
            if b > a {
                v.push((a, b));
            }
        }
    }
    v
}

/// A random 8-byte-aligned word in `maps`, weighted by mapping size.
pub fn random_word(maps: &[(u64, u64)], r: u64) -> Option<u64> {
    let total: u64 = maps.iter().map(|(a, b)| b - a).sum();
    if total < 8 {
        return None;
    }
    let mut off = (r % total) & !7;
    for (a, b) in maps {
        if off < b - a {
            return Some(a + off);
        }
        off -= b - a;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bounded() {
        let c = WatchConfig::default();
        c.validate().unwrap();
        assert!(c.duty_cycle() <= 0.25);
        assert!(WatchConfig { max_hits: 0, ..c }.validate().is_err());
        let bad = WatchConfig {
            window: Duration::from_millis(50),
            ..c
        };
        assert!(bad.validate().is_err());
        assert!(WatchConfig { slots: 5, ..c }.validate().is_err());
        assert!(WatchConfig {
            regs_period_us: 1,
            ..c
        }
        .validate()
        .is_err());
        assert!(WatchConfig {
            regs_period_us: 0,
            ..c
        }
        .validate()
        .is_ok());
    }

    #[test]
    fn rotates_over_owners_and_duty_cycles() {
        let cfg = WatchConfig {
            slots: 2,
            window: Duration::from_millis(1),
            interval: Duration::from_millis(10),
            hold: 2,
            max_hits: 100,
            max_window: Duration::from_millis(1),
            regs_period_us: 0,
        };
        let t0 = Instant::now();
        let mut s = Scheduler::new(cfg, t0, 7);
        for tid in 1..=4 {
            for p in 0..10u64 {
                s.add_fault(100, tid, (tid as u64) << 32 | p << 12);
            }
        }
        let mut no_maps = Vec::new;
        assert_eq!(
            s.step(t0, &mut no_maps),
            None,
            "nothing before the first interval"
        );
        let mut owners_seen = HashSet::new();
        let mut t = t0;
        let mut arms = 0;
        for _ in 0..16 {
            t = s.next_at();
            match s.step(t, &mut no_maps).unwrap() {
                Action::Arm(a) => {
                    arms += 1;
                    assert_eq!(a.len(), 2);
                    owners_seen.extend(a.iter().map(|x| x >> 32));
                    assert!(s.is_armed());
                    assert_eq!(s.next_at(), t + cfg.window);
                }
                Action::Disarm => assert!(!s.is_armed()),
            }
        }
        assert_eq!(arms, 8);
        assert_eq!(owners_seen.len(), 4, "every owner's data gets watched");
        assert!(t - t0 >= cfg.interval * 7);
    }

    #[test]
    fn the_window_grows_while_hits_are_rare_and_shrinks_at_the_budget() {
        let cfg = WatchConfig {
            max_window: Duration::from_millis(45),
            ..WatchConfig::default()
        };
        let t0 = Instant::now();
        let mut s = Scheduler::new(cfg, t0, 3);
        s.add_fault(100, 1, 0x1000_0000);
        let mut no_maps = Vec::new;
        let mut lengths = Vec::new();
        let mut t = t0;
        for _ in 0..8 {
            t = s.next_at().max(t);
            if let Some(Action::Arm(_)) = s.step(t, &mut no_maps) {
                lengths.push(s.next_at() - t);
            }
        }
        // No hits: 10, 20, 40, then capped at 45 ms.
        let ms = |v: u64| Duration::from_millis(v);
        assert_eq!(lengths, vec![ms(10), ms(20), ms(40), ms(45)]);
        assert!(s.armed_time >= ms(70), "{:?}", s.armed_time);
        // A window that reaches the hit budget halves the next one.
        t = s.next_at().max(t);
        assert!(matches!(s.step(t, &mut no_maps), Some(Action::Arm(_))));
        s.add_hits(cfg.max_hits, t);
        assert_eq!(s.step(t, &mut no_maps), Some(Action::Disarm));
        assert_eq!(s.window(), Duration::from_micros(22_500));
        // A fixed duty cycle: max_window = window.
        let fixed = WatchConfig {
            max_window: cfg.window,
            ..cfg
        };
        fixed.validate().unwrap();
        let mut s = Scheduler::new(fixed, t0, 3);
        s.add_fault(100, 1, 0x1000_0000);
        for _ in 0..6 {
            let t = s.next_at();
            s.step(t, &mut no_maps);
        }
        assert_eq!(s.window(), cfg.window);
    }

    #[test]
    fn private_words_are_replaced_early_and_threads_without_data_come_first() {
        let cfg = WatchConfig {
            slots: 1,
            ..WatchConfig::default()
        };
        let t0 = Instant::now();
        let mut s = Scheduler::new(cfg, t0, 5);
        // Threads 1..=4 each faulted 16 pages of their own.
        for tid in 1..=4 {
            for p in 0..16u64 {
                s.add_fault(100, tid, (tid as u64) << 32 | p << 12);
            }
        }
        let mut no_maps = Vec::new;
        let mut armed = Vec::new();
        let mut t = t0;
        for _ in 0..12 {
            t = s.next_at().max(t);
            if let Some(Action::Arm(a)) = s.step(t, &mut no_maps) {
                armed.push(a[0]);
            }
        }
        // 6 windows; a word nobody shares is replaced after PROBATION (1) window, not hold (6).
        assert_eq!(armed.len(), 6);
        assert!(armed.windows(2).all(|w| w[0] != w[1]), "{armed:x?}");
        assert_eq!(s.words, 6);
        // The word armed now is read by another thread too: its owner and that thread have
        // data from now on, the word is kept past its probation, new words come from the
        // other two owners, or (exploitation) from around the shared word's page.
        t = s.next_at().max(t);
        let w = match s.step(t, &mut no_maps) {
            Some(Action::Arm(a)) => a[0],
            other => panic!("{other:?}"),
        };
        let owner = (w >> 32) as i32;
        let reader = owner % 4 + 1;
        s.note_hit(owner, w);
        s.note_hit(reader, w + 8);
        assert_eq!(s.threads_with_data(), 2);
        assert_eq!(s.shared_words, 1);
        let page = w & !0xfff;
        let (mut same, mut near) = (0, 0);
        let mut owners = HashSet::new();
        let third = reader % 4 + 1;
        for _ in 0..60 {
            t = s.next_at().max(t);
            if let Some(Action::Arm(a)) = s.step(t, &mut no_maps) {
                if a[0] == w {
                    same += 1;
                    if same == 1 {
                        // A third thread shows up in the next window: held on.
                        s.note_hit(third, w);
                    }
                } else if a[0] + 0x1000 >= page && a[0] < page + 0x2000 {
                    near += 1;
                } else {
                    owners.insert((a[0] >> 32) as i32);
                }
            }
        }
        // Held while it shows new threads, released after STALE (2) windows without one.
        assert_eq!(same, 2, "the shared word is held, then released");
        assert!(near >= 1, "words near a shared one are tried");
        assert!(
            !owners.contains(&owner)
                && !owners.contains(&reader)
                && !owners.contains(&third)
                && !owners.is_empty(),
            "only threads without data: {owners:?} (owner {owner}, reader {reader}, {third})"
        );
    }

    /// Threads 1..=8 each first-touched two runs of 8 pages; the edge pages of the runs are
    /// watched more often than the inside pages (every other pick).
    #[test]
    fn edges_of_each_threads_data_are_watched_more_often() {
        let cfg = WatchConfig {
            slots: 1,
            ..WatchConfig::default()
        };
        let t0 = Instant::now();
        let mut s = Scheduler::new(cfg, t0, 13);
        let run = |tid: u64, k: u64| (tid << 32) | (k << 24);
        for tid in 1..=8u64 {
            for k in 0..2 {
                for p in 0..8u64 {
                    s.add_fault(100, tid as i32, run(tid, k) | p << 12);
                }
            }
        }
        let mut no_maps = Vec::new;
        let (mut edge, mut inner) = (0, 0);
        let mut t = t0;
        for _ in 0..400 {
            t = s.next_at().max(t);
            if let Some(Action::Arm(a)) = s.step(t, &mut no_maps) {
                let p = (a[0] >> 12) & 0xfff;
                if p == 0 || p == 7 {
                    edge += 1;
                } else {
                    inner += 1;
                }
            }
        }
        // Uniform picks would give 2 edge pages in 8; half the picks go to edges.
        assert!(edge + inner == 200, "{edge} {inner}");
        assert!(edge > inner, "edges {edge}, inside {inner}");
        assert!(inner > 40, "the inside is still watched: {inner}");
    }

    /// A word more threads touch than a quarter of them (at least 4) is a broadcast word (a
    /// barrier, a table every thread reads): released after its window, its page not
    /// explored, its line never watched again.
    #[test]
    fn broadcast_words_are_released_and_not_watched_again() {
        let cfg = WatchConfig {
            slots: 1,
            ..WatchConfig::default()
        };
        let t0 = Instant::now();
        let mut s = Scheduler::new(cfg, t0, 17);
        for tid in 1..=8 {
            s.add_fault(100, tid, 0x7000_0000 + tid as u64 * 0x10_0000);
        }
        let mut no_maps = Vec::new;
        let mut t = s.next_at();
        let w = match s.step(t, &mut no_maps) {
            Some(Action::Arm(a)) => a[0],
            other => panic!("{other:?}"),
        };
        for tid in 1..=5 {
            s.note_hit(tid, w);
        }
        assert_eq!(s.shared_words, 1);
        assert!(
            s.shared_pages.is_empty(),
            "a broadcast page is not explored"
        );
        for _ in 0..200 {
            t = s.next_at().max(t);
            if let Some(Action::Arm(a)) = s.step(t, &mut no_maps) {
                assert_ne!(a[0] >> 6, w >> 6, "the broadcast line is watched again");
            }
        }
        // Four threads on one word is structure (a group of 4), held as usual.
        let mut s = Scheduler::new(cfg, t0, 17);
        for tid in 1..=8 {
            s.add_fault(100, tid, 0x7000_0000 + tid as u64 * 0x10_0000);
        }
        let mut t = s.next_at();
        let w = match s.step(t, &mut no_maps) {
            Some(Action::Arm(a)) => a[0],
            other => panic!("{other:?}"),
        };
        for tid in 1..=4 {
            s.note_hit(tid, w);
        }
        let mut held = 0;
        for _ in 0..4 {
            t = s.next_at().max(t);
            if let Some(Action::Arm(a)) = s.step(t, &mut no_maps) {
                held += usize::from(a[0] == w);
            }
        }
        assert_eq!(held, 1, "held for the next window, as any shared word");
    }

    #[test]
    fn hit_budget_cuts_the_window() {
        let cfg = WatchConfig {
            max_hits: 10,
            ..WatchConfig::default()
        };
        let t0 = Instant::now();
        let mut s = Scheduler::new(cfg, t0, 3);
        s.add_fault(100, 1, 0x1000_0000);
        let mut no_maps = Vec::new;
        let t1 = t0 + cfg.interval;
        assert!(matches!(s.step(t1, &mut no_maps), Some(Action::Arm(_))));
        let t2 = t1 + Duration::from_millis(1);
        s.add_hits(4, t2);
        assert_eq!(s.next_at(), t1 + cfg.window, "under budget: full window");
        s.add_hits(6, t2);
        assert_eq!(s.next_at(), t2, "budget reached: disarm now");
        assert_eq!(s.step(t2, &mut no_maps), Some(Action::Disarm));
        assert_eq!(
            s.next_at(),
            t1 + cfg.interval,
            "next window keeps the interval"
        );
        assert_eq!(s.cut_windows, 1);
    }

    #[test]
    fn read_only_fault_addresses_are_never_watched() {
        // Thread 1 faulted its heap page and a GOT slot (read-only after RELRO), thread 2 a
        // code page: of those, only the heap word may be armed.
        let text = "\
55550000-55551000 r--p 00002000 08:01 1 /bin/app
55551000-55552000 rw-p 00003000 08:01 1 /bin/app
7f0000000000-7f0000001000 r-xp 00000000 08:01 2 /lib/libc.so.6
7f1000000000-7f1000100000 rw-p 00000000 00:00 0
";
        let maps = parse_writable_mappings(text);
        let cfg = WatchConfig::default();
        let t0 = Instant::now();
        let mut s = Scheduler::new(cfg, t0, 5);
        s.add_fault(100, 1, 0x5555_0080); // GOT slot
        s.add_fault(100, 1, 0x7f10_0000_2010); // heap
        s.add_fault(100, 2, 0x7f00_0000_0400); // code
        let mut armed = HashSet::new();
        let mut t = t0;
        for _ in 0..40 {
            t = s.next_at().max(t);
            if let Some(Action::Arm(a)) = s.step(t, &mut || maps.clone()) {
                armed.extend(a);
            }
        }
        assert!(armed.contains(&0x7f10_0000_2010), "{armed:x?}");
        // The free slots get random writable words, never a read-only one.
        assert!(armed.len() > 1, "{armed:x?}");
        for w in &armed {
            assert!(inside(&maps, *w), "{w:#x} is not writable");
        }
        // Unknown mappings (empty list): no filter, every candidate may be watched (the fault
        // address, or another word of its page, the edge of the thread's data).
        let mut s = Scheduler::new(cfg, t0, 5);
        s.add_fault(100, 1, 0x5555_0080);
        match s.step(t0 + cfg.interval, &mut Vec::new) {
            Some(Action::Arm(a)) => {
                assert!(!a.is_empty());
                assert!(a.iter().all(|w| w >> 12 == 0x5_5550), "{a:x?}");
            }
            other => panic!("expected an arm action, got {other:?}"),
        }
    }

    #[test]
    fn pointers_into_other_threads_data_are_watched_first() {
        // Eight threads first-touched a page each of the heap. Thread 1's registers hold a
        // pointer into thread 5's page (the data it reads now), its stack, a small number and
        // the address of a global array that every thread's registers hold.
        let maps = vec![
            (0x5555_0000, 0x5556_0000),
            (0x7f10_0000_0000, 0x7f10_0010_0000),
            (0x7ffd_0000_0000, 0x7ffd_0010_0000),
        ];
        let heap = |t: u64| 0x7f10_0000_0000 + t * 0x1000;
        let global = 0x5555_0100;
        let stack = 0x7ffd_000f_f000; // writable, but in the live frames above the stack pointer
        let cfg = WatchConfig::default();
        let t0 = Instant::now();
        let mut s = Scheduler::new(cfg, t0, 11);
        for t in 1..=8 {
            s.add_fault(100, t as i32, heap(t) + 8);
        }
        let sp = stack - 0x40;
        let foreign = heap(5) + 0x208;
        // The value layout of a sample: the stack pointer at REGS_SP_INDEX.
        let sample = |v: &[u64]| {
            let mut values = vec![0u64; 16];
            values[..v.len()].copy_from_slice(v);
            values[7] = sp;
            values
        };
        let mut armed = HashSet::new();
        let mut t = t0;
        for round in 0..40 {
            s.add_pointers(100, 1, &sample(&[foreign, stack, 42, global]), 7);
            for o in 2..=8 {
                s.add_pointers(100, o, &sample(&[heap(o as u64) + 16, global]), 7);
            }
            t = s.next_at().max(t);
            if let Some(Action::Arm(a)) = s.step(t, &mut || maps.clone()) {
                // Thread 1 is seen sharing nothing, so it keeps its place among the owners.
                if round > 0 {
                    armed.extend(a);
                }
            }
        }
        assert!(s.foreign_pointers > 0);
        assert!(s.pointer_words > 0);
        assert!(armed.contains(&foreign), "{armed:x?}");
        assert!(!armed.contains(&stack), "the stack is never watched");
        assert!(!armed.contains(&42));
        assert!(
            !armed.contains(&global),
            "a global every thread holds is not a pair's data: {armed:x?}"
        );
        // Register samples alone (no fault seen, e.g. after --attach) make a thread an owner
        // whose words come from its pointers.
        let mut s = Scheduler::new(cfg, t0, 3);
        s.add_pointers(100, 9, &sample(&[heap(3) + 64]), 7);
        match s.step(t0 + cfg.interval, &mut || maps.clone()) {
            Some(Action::Arm(a)) => assert!(a.contains(&(heap(3) + 64)), "{a:x?}"),
            other => panic!("expected an arm action, got {other:?}"),
        }
    }

    #[test]
    fn a_word_from_a_foreign_pointer_waits_for_both_threads() {
        // Thread 1 holds a pointer into thread 2's page. With 64 threads on 2 CPUs the two
        // seldom run in the same window, so the word stays armed (without hits) for `hold`
        // windows, where a word from first-touch faults is replaced after one.
        let maps = vec![(0x7f10_0000_0000, 0x7f10_0010_0000)];
        let cfg = WatchConfig {
            slots: 1,
            ..WatchConfig::default()
        };
        let t0 = Instant::now();
        let mut s = Scheduler::new(cfg, t0, 5);
        s.add_fault(100, 1, 0x7f10_0000_1008);
        s.add_fault(100, 2, 0x7f10_0000_2008);
        let mut values = vec![0u64; 16];
        values[0] = 0x7f10_0000_2100;
        values[7] = 0x7ffd_0000_0000;
        let mut t = t0;
        let mut arms = Vec::new();
        while arms.len() < 12 {
            // Pointer samples keep coming; the first refill reads the mappings.
            s.add_pointers(100, 1, &values, 7);
            t = s.next_at().max(t);
            if let Some(Action::Arm(a)) = s.step(t, &mut || maps.clone()) {
                arms.push(a[0]);
            }
        }
        let run = arms
            .iter()
            .skip_while(|&&a| a != 0x7f10_0000_2100)
            .take_while(|&&a| a == 0x7f10_0000_2100)
            .count();
        assert_eq!(run, cfg.hold as usize, "{arms:x?}");
    }

    /// A fixed process and its mappings (no residency information).
    struct Proc(i32, Vec<(u64, u64)>);

    impl AddressSpace for Proc {
        fn pid(&self) -> Option<i32> {
            Some(self.0)
        }
        fn writable(&mut self) -> Vec<(u64, u64)> {
            self.1.clone()
        }
    }

    #[test]
    fn words_come_from_one_process_and_its_exec_forgets_them() {
        // A shell (pid 100) and its forked child (pid 300) fault at the same addresses
        // before the child execs: the words for the child are the child's faults only.
        let maps = vec![(0x5500_0000_0000, 0x5500_0010_0000)];
        let cfg = WatchConfig {
            slots: 1,
            hold: 1,
            ..WatchConfig::default()
        };
        let t0 = Instant::now();
        let mut s = Scheduler::new(cfg, t0, 9);
        s.add_fault(100, 100, 0x5500_0000_1000);
        s.add_fault(300, 300, 0x5500_0000_2000);
        let mut child = Proc(300, maps.clone());
        let t1 = t0 + cfg.interval;
        let page = |a: Option<Action>| match a {
            Some(Action::Arm(w)) if w.len() == 1 => w[0] >> 12,
            other => panic!("expected one word armed, got {other:x?}"),
        };
        assert_eq!(page(s.step(t1, &mut child)), 0x5500_0000_2000 >> 12);
        assert_eq!(s.watched_pid(), Some(300));
        // The child execs while its word is armed: the window ends now, its old faults are
        // forgotten and the next words come from its new faults.
        s.forget_process(300);
        assert_eq!(s.next_at(), t1);
        assert_eq!(s.step(t1, &mut child), Some(Action::Disarm));
        s.add_fault(300, 301, 0x5500_0000_3000);
        let mut arms = 0;
        for _ in 0..8 {
            let t = s.next_at();
            if let Some(Action::Arm(a)) = s.step(t, &mut child) {
                assert_eq!(page(Some(Action::Arm(a))), 0x5500_0000_3000 >> 12);
                arms += 1;
            }
        }
        assert_eq!(arms, 4);
        // Forgetting another process leaves the armed set alone.
        let armed = s.is_armed();
        let next = s.next_at();
        s.forget_process(100);
        assert_eq!((s.is_armed(), s.next_at()), (armed, next));
        assert_eq!(s.watched_pid(), Some(300));
    }

    /// Writable mappings with only some pages resident, as after `--attach`.
    struct Sparse {
        maps: Vec<(u64, u64)>,
        resident_pages: HashSet<u64>,
    }

    impl AddressSpace for Sparse {
        fn writable(&mut self) -> Vec<(u64, u64)> {
            self.maps.clone()
        }
        fn resident(&mut self, addr: u64) -> bool {
            self.resident_pages.contains(&(addr >> 12))
        }
    }

    #[test]
    fn random_words_are_taken_from_resident_pages_only() {
        // An 8 MiB untouched "stack" and a 1 MiB buffer of which 16 pages are in memory:
        // ~0.2 % of the writable space is resident, and every armed word must be in it.
        let stack = (0x7f00_0000_0000u64, 0x7f00_0080_0000u64);
        let buf = (0x5500_0000_0000u64, 0x5500_0010_0000u64);
        let resident_pages: HashSet<u64> = (0..16).map(|p| (buf.0 >> 12) + p * 8).collect();
        let mut mem = Sparse {
            maps: vec![stack, buf],
            resident_pages: resident_pages.clone(),
        };
        let cfg = WatchConfig::default();
        let t0 = Instant::now();
        let mut s = Scheduler::new(cfg, t0, 11);
        let mut armed = Vec::new();
        let mut t = t0;
        for _ in 0..60 {
            t = s.next_at().max(t);
            if let Some(Action::Arm(a)) = s.step(t, &mut mem) {
                armed.extend(a);
            }
        }
        assert!(armed.len() >= 10, "slots stay filled: {armed:x?}");
        for w in &armed {
            assert!(
                resident_pages.contains(&(w >> 12)),
                "{w:#x} is not resident"
            );
        }
    }

    #[test]
    fn pagemap_tells_touched_pages_from_untouched_ones() {
        // Our own process: a fresh 64 MiB anonymous allocation is not in memory until
        // written; one page of it is written.
        let mut v: Vec<u8> = Vec::with_capacity(64 << 20);
        let base = v.as_mut_ptr() as u64;
        // SAFETY: within the capacity; volatile so the write is not optimised away.
        unsafe { std::ptr::write_volatile(v.as_mut_ptr(), 1) };
        let mut mem = ProcAddressSpace::new(std::process::id() as i32);
        let maps = mem.writable();
        assert!(inside(&maps, base), "{maps:x?}");
        assert!(mem.resident(base), "the written page is resident");
        // Far enough away that a transparent huge page around the first one cannot cover it.
        assert!(!mem.resident(base + (48 << 20)), "an untouched page is not");
        drop(v);
    }

    #[test]
    fn falls_back_to_mappings() {
        let text = "\
00400000-00401000 r-xp 00000000 08:01 1 /bin/app
00600000-00602000 rw-p 00000000 08:01 1 /bin/app
7ffd000-7ffe000 rw-p 00000000 00:00 0 [vvar]
7f0000000000-7f0000100000 rw-p 00000000 00:00 0
";
        let maps = parse_writable_mappings(text);
        assert_eq!(
            maps,
            vec![(0x600000, 0x602000), (0x7f0000000000, 0x7f0000100000)]
        );
        for r in [0u64, 5, 0x1fff, 0x2000, 123456789] {
            let w = random_word(&maps, r).unwrap();
            assert_eq!(w % 8, 0);
            assert!(maps.iter().any(|(a, b)| w >= *a && w < *b));
        }
        assert_eq!(random_word(&[], 3), None);
        let cfg = WatchConfig::default();
        let t0 = Instant::now();
        let mut s = Scheduler::new(cfg, t0, 1);
        let mut from_maps = || maps.clone();
        match s.step(t0 + cfg.interval, &mut from_maps) {
            Some(Action::Arm(a)) => assert!(!a.is_empty()),
            other => panic!("expected an arm action, got {other:?}"),
        }
    }
}
