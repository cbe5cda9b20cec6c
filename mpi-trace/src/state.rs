//! What the tracer counts between `MPI_Init` and `MPI_Finalize`, and the write-out.

use crate::abi::{self, Abi, H, UNDEFINED};
use crate::model::{self, Coll};
use contract::ranks::{JobRanks, RankRow, Sent};
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// A communicator as the tracer needs it: the caller's rank, and every member's (or, for an
/// intercommunicator, every remote member's) rank in `MPI_COMM_WORLD`.
struct Comm {
    my: usize,
    world: Vec<Option<u32>>,
    inter: bool,
}

/// Counters of one process (one rank).
pub struct State {
    abi: Abi,
    rank: u32,
    size: usize,
    /// Per destination world rank: p2p bytes, p2p messages, collective bytes, collective msgs.
    sent: Vec<[AtomicU64; 4]>,
    comms: Mutex<HashMap<H, Arc<Comm>>>,
    /// Persistent send requests: request → (world destination, bytes per start).
    persistent: Mutex<HashMap<H, (u32, u64)>>,
    start: Instant,
    /// Directories the job's rank files go to (`CMLB_RANKS_OUT`, `:`-separated).
    out: Vec<PathBuf>,
}

static STATE: OnceLock<State> = OnceLock::new();
static DONE: AtomicBool = AtomicBool::new(false);

/// The counters while the job is between `MPI_Init` and `MPI_Finalize` with tracing asked for.
pub fn get() -> Option<&'static State> {
    if DONE.load(Ordering::Relaxed) {
        return None;
    }
    STATE.get()
}

fn warn(msg: &str) {
    eprintln!("cmlb-mpi: {msg}");
}

/// Call `P<name>` with the given argument types; `None` when the library lacks it.
macro_rules! pmpi {
    ($name:literal, fn($($t:ty),*) $(, $a:expr)*) => {{
        static F: AtomicUsize = AtomicUsize::new(0);
        match abi::resolve($name, &F) {
            // SAFETY: the symbol is the MPI library's function of this signature (mpi.h), with
            // handles carried pointer-sized (see abi.rs).
            Some(f) => Some(unsafe {
                std::mem::transmute::<usize, unsafe extern "C" fn($($t),*) -> c_int>(f)($($a),*)
            }),
            None => None,
        }
    }};
}

fn ok(rc: Option<c_int>) -> bool {
    rc == Some(0)
}

/// Set up after the real `MPI_Init` returned, when `CMLB_RANKS_OUT` names a directory.
pub fn init() {
    let Some(out) = std::env::var_os(contract::ranks::RANKS_OUT).filter(|v| !v.is_empty()) else {
        return;
    };
    let Some(abi) = Abi::detect() else {
        warn("neither Open MPI nor an MPICH-derived library is loaded: nothing is counted");
        return;
    };
    let (mut rank, mut size): (c_int, c_int) = (0, 0);
    if !ok(pmpi!(
        c"PMPI_Comm_rank",
        fn(H, *mut c_int),
        abi.world,
        &mut rank
    )) || !ok(pmpi!(
        c"PMPI_Comm_size",
        fn(H, *mut c_int),
        abi.world,
        &mut size
    )) || rank < 0
        || size <= 0
    {
        warn("cannot read the rank in MPI_COMM_WORLD: nothing is counted");
        return;
    }
    let size = size as usize;
    let _ = STATE.set(State {
        abi,
        rank: rank as u32,
        size,
        sent: (0..size).map(|_| Default::default()).collect(),
        comms: Mutex::new(HashMap::new()),
        persistent: Mutex::new(HashMap::new()),
        start: Instant::now(),
        out: std::env::split_paths(&out)
            .filter(|p| !p.as_os_str().is_empty())
            .collect(),
    });
}

impl State {
    /// The implementation's predefined values.
    pub fn abi(&self) -> &Abi {
        &self.abi
    }

    fn comm(&self, comm: H) -> Option<Arc<Comm>> {
        let key = self.abi.norm(comm);
        if let Some(c) = self.comms.lock().ok()?.get(&key) {
            return Some(Arc::clone(c));
        }
        let c = Arc::new(self.describe(comm)?);
        self.comms.lock().ok()?.insert(key, Arc::clone(&c));
        Some(c)
    }

    fn describe(&self, comm: H) -> Option<Comm> {
        let (mut inter, mut my, mut n): (c_int, c_int, c_int) = (0, 0, 0);
        if !ok(pmpi!(
            c"PMPI_Comm_test_inter",
            fn(H, *mut c_int),
            comm,
            &mut inter
        )) || !ok(pmpi!(c"PMPI_Comm_rank", fn(H, *mut c_int), comm, &mut my))
        {
            return None;
        }
        let inter = inter != 0;
        if self.abi.norm(comm) == self.abi.norm(self.abi.world) {
            return Some(Comm {
                my: my as usize,
                world: (0..self.size as u32).map(Some).collect(),
                inter: false,
            });
        }
        let mut group: H = 0;
        let got = if inter {
            ok(pmpi!(
                c"PMPI_Comm_remote_size",
                fn(H, *mut c_int),
                comm,
                &mut n
            )) && ok(pmpi!(
                c"PMPI_Comm_remote_group",
                fn(H, *mut H),
                comm,
                &mut group
            ))
        } else {
            ok(pmpi!(c"PMPI_Comm_size", fn(H, *mut c_int), comm, &mut n))
                && ok(pmpi!(c"PMPI_Comm_group", fn(H, *mut H), comm, &mut group))
        };
        if !got || n < 0 {
            return None;
        }
        let mut wgroup: H = 0;
        if !ok(pmpi!(
            c"PMPI_Comm_group",
            fn(H, *mut H),
            self.abi.world,
            &mut wgroup
        )) {
            return None;
        }
        let ranks: Vec<c_int> = (0..n).collect();
        let mut world = vec![UNDEFINED; n as usize];
        let tr = pmpi!(
            c"PMPI_Group_translate_ranks",
            fn(H, c_int, *const c_int, H, *mut c_int),
            group,
            n,
            ranks.as_ptr(),
            wgroup,
            world.as_mut_ptr()
        );
        pmpi!(c"PMPI_Group_free", fn(*mut H), &mut group);
        pmpi!(c"PMPI_Group_free", fn(*mut H), &mut wgroup);
        if !ok(tr) {
            return None;
        }
        Some(Comm {
            my: my as usize,
            world: world
                .into_iter()
                .map(|w| (w >= 0 && (w as usize) < self.size).then_some(w as u32))
                .collect(),
            inter,
        })
    }

    /// Size in bytes of `count` elements of `dt`.
    pub fn bytes(&self, count: c_int, dt: H) -> u64 {
        let mut size: c_int = 0;
        if count <= 0 || !ok(pmpi!(c"PMPI_Type_size", fn(H, *mut c_int), dt, &mut size)) {
            return 0;
        }
        (count as u64).saturating_mul(size.max(0) as u64)
    }

    fn add(&self, world: u32, slot: usize, bytes: u64) {
        if let Some(c) = self.sent.get(world as usize) {
            c[slot].fetch_add(bytes, Ordering::Relaxed);
            c[slot + 1].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The world rank of `dest` in `comm`, for a send.
    fn dest(&self, comm: H, dest: c_int) -> Option<u32> {
        if dest < 0 {
            return None; // MPI_PROC_NULL (both ABIs' values are negative)
        }
        self.comm(comm)?.world.get(dest as usize).copied().flatten()
    }

    /// A point-to-point send of `count` elements of `dt` to `dest` of `comm`.
    pub fn p2p(&self, comm: H, dest: c_int, count: c_int, dt: H) {
        if let Some(w) = self.dest(comm, dest) {
            self.add(w, 0, self.bytes(count, dt));
        }
    }

    /// A collective on `comm` (intracommunicators only).
    pub fn coll(&self, comm: H, c: &dyn Fn(usize, usize) -> Option<Coll>) {
        let Some(info) = self.comm(comm) else { return };
        if info.inter {
            return;
        }
        let Some(call) = c(info.my, info.world.len()) else {
            return;
        };
        for (m, b) in model::sends(&call, info.my, info.world.len()) {
            if let Some(Some(w)) = info.world.get(m) {
                self.add(*w, 2, b);
            }
        }
    }

    /// `MPI_Send_init` and friends returned request `req` for a send of `count` × `dt` to
    /// `dest`: counted at every `MPI_Start`.
    pub fn persistent(&self, req: H, comm: H, dest: c_int, count: c_int, dt: H) {
        if let Some(w) = self.dest(comm, dest) {
            let b = self.bytes(count, dt);
            if let Ok(mut m) = self.persistent.lock() {
                m.insert(self.abi.norm(req), (w, b));
            }
        }
    }

    /// `MPI_Start` of request `req` (a receive or an unknown request counts nothing).
    pub fn start(&self, req: H) {
        let hit = self
            .persistent
            .lock()
            .ok()
            .and_then(|m| m.get(&self.abi.norm(req)).copied());
        if let Some((w, b)) = hit {
            self.add(w, 0, b);
        }
    }

    /// `MPI_Request_free`: a persistent request's handle may be reused.
    pub fn forget_request(&self, req: H) {
        if let Ok(mut m) = self.persistent.lock() {
            m.remove(&self.abi.norm(req));
        }
    }

    /// `MPI_Comm_free`: the handle may be reused for another communicator.
    pub fn forget_comm(&self, comm: H) {
        if let Ok(mut m) = self.comms.lock() {
            m.remove(&self.abi.norm(comm));
        }
    }

    fn row(&self) -> RankRow {
        RankRow {
            rank: self.rank,
            host: host_name(),
            seconds: self.start.elapsed().as_secs_f64(),
            to: self
                .sent
                .iter()
                .enumerate()
                .map(|(d, c)| {
                    let v = |k: usize| c[k].load(Ordering::Relaxed);
                    (
                        d as u32,
                        Sent {
                            p2p_bytes: v(0),
                            p2p_msgs: v(1),
                            coll_bytes: v(2),
                            coll_msgs: v(3),
                        },
                    )
                })
                .collect(),
        }
    }
}

fn host_name() -> String {
    let mut b = [0u8; 256];
    // SAFETY: gethostname writes at most b.len() bytes.
    let rc = unsafe { libc::gethostname(b.as_mut_ptr().cast::<c_char>(), b.len()) };
    if rc != 0 {
        return "?".into();
    }
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

fn fnv(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in s.as_bytes() {
        h ^= x as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn library_version() -> String {
    let mut buf = vec![0u8; 8192];
    let mut len: c_int = 0;
    if !ok(pmpi!(
        c"PMPI_Get_library_version",
        fn(*mut c_char, *mut c_int),
        buf.as_mut_ptr().cast(),
        &mut len
    )) {
        return String::new();
    }
    let end = buf.iter().position(|&c| c == 0).unwrap_or(buf.len());
    let text = String::from_utf8_lossy(&buf[..end]).into_owned();
    let first = text.lines().next().unwrap_or("").trim();
    first.trim_end_matches(',').to_string()
}

fn command() -> Vec<String> {
    std::fs::read("/proc/self/cmdline")
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Before the real `MPI_Finalize`: gather every rank's row and let the first rank of each
/// host write the job's ranks directory there. Collective over `MPI_COMM_WORLD`; every rank
/// takes the same path (an error on one rank is reported by it and the others still finish
/// the collectives they started, as MPI errors are fatal by default).
pub fn finalize() {
    let Some(st) = get() else { return };
    DONE.store(true, Ordering::Relaxed);
    let (world, byte) = (st.abi.world, st.abi.byte);
    let n = st.size;
    let row = st.row();
    let mine = row.encode();
    // Which ranks share this host: the first of them writes.
    let h = fnv(&row.host);
    let mut hashes = vec![0u64; n];
    if !ok(pmpi!(
        c"PMPI_Allgather",
        fn(*const c_void, c_int, H, *mut c_void, c_int, H, H),
        (&h as *const u64).cast(),
        8,
        byte,
        hashes.as_mut_ptr().cast(),
        8,
        byte,
        world
    )) {
        warn("MPI_Allgather of the host names failed: no rank profile written");
        return;
    }
    let me = st.rank as usize;
    let leader = hashes.iter().position(|&x| x == h) == Some(me);
    // Row lengths to rank 0, then the rows.
    let len = mine.len() as u64;
    let mut lens = vec![0u64; if me == 0 { n } else { 1 }];
    let ok_gather = ok(pmpi!(
        c"PMPI_Gather",
        fn(*const c_void, c_int, H, *mut c_void, c_int, H, c_int, H),
        (&len as *const u64).cast(),
        8,
        byte,
        lens.as_mut_ptr().cast(),
        8,
        byte,
        0,
        world
    ));
    let total: u64 = if me == 0 { lens.iter().sum() } else { 0 };
    let too_big = total > c_int::MAX as u64;
    let counts: Vec<c_int> = if me == 0 && !too_big {
        lens.iter().map(|&l| l as c_int).collect()
    } else {
        vec![0; n]
    };
    let mut displs = vec![0 as c_int; n];
    for k in 1..n {
        displs[k] = displs[k - 1].saturating_add(counts[k - 1]);
    }
    let mut all = vec![
        0u8;
        if me == 0 && !too_big {
            total as usize
        } else {
            0
        }
    ];
    let ok_gatherv = ok(pmpi!(
        c"PMPI_Gatherv",
        fn(*const c_void, c_int, H, *mut c_void, *const c_int, *const c_int, H, c_int, H),
        mine.as_ptr().cast(),
        mine.len() as c_int,
        byte,
        all.as_mut_ptr().cast(),
        counts.as_ptr(),
        displs.as_ptr(),
        byte,
        0,
        world
    ));
    // The writers: one per host (rank 0 is one), in their own communicator.
    let mut writers: H = 0;
    let color = if leader { 0 } else { UNDEFINED };
    if !ok(pmpi!(
        c"PMPI_Comm_split",
        fn(H, c_int, c_int, *mut H),
        world,
        color,
        me as c_int,
        &mut writers
    )) {
        warn("MPI_Comm_split failed: no rank profile written");
        return;
    }
    if !leader {
        return;
    }
    // Rank 0 tells the other writers the size (0 = nothing to write), then the rows.
    let mut blob_len: u64 = if ok_gather && ok_gatherv && !too_big {
        total
    } else {
        0
    };
    let bcast = |p: *mut c_void, c: c_int| {
        ok(pmpi!(
            c"PMPI_Bcast",
            fn(*mut c_void, c_int, H, c_int, H),
            p,
            c,
            byte,
            0,
            writers
        ))
    };
    let sent_len = bcast((&mut blob_len as *mut u64).cast(), 8);
    if sent_len && blob_len > 0 && me != 0 {
        all = vec![0u8; blob_len as usize];
    }
    let sent_rows = sent_len && blob_len > 0 && bcast(all.as_mut_ptr().cast(), blob_len as c_int);
    pmpi!(c"PMPI_Comm_free", fn(*mut H), &mut writers);
    if me == 0 && too_big {
        warn(&format!(
            "the rows of {n} ranks take {total} bytes, more than one MPI message holds: no rank profile written"
        ));
        return;
    }
    if !sent_rows {
        warn("gathering the rank rows failed: no rank profile written");
        return;
    }
    let job = match RankRow::decode_all(&all) {
        Ok(rows) => JobRanks {
            n,
            rows,
            mpi: library_version(),
            command: command(),
        },
        Err(e) => {
            warn(&format!(
                "the gathered rank rows are unreadable ({e}): no rank profile written"
            ));
            return;
        }
    };
    for dir in &st.out {
        if let Err(e) = job.write_dir(dir) {
            warn(&format!(
                "cannot write the rank profile to {}: {e}",
                dir.display()
            ));
        }
    }
}
