//! `libcmlb_mpi.so`: the bytes and messages every MPI rank sends to every other rank, through
//! the MPI profiling interface, without recompiling the program.
//!
//! Preloaded (`LD_PRELOAD`) into each rank with `CMLB_RANKS_OUT=DIR` set — the SPANK plugin does
//! both under `--cmlb-map=profile` — the library defines the `MPI_` functions that send, counts
//! what each call sends to which rank of `MPI_COMM_WORLD`, and calls the real `PMPI_` function.
//! At `MPI_Finalize` the rows are gathered and the first rank of every host writes the job's
//! rank matrix into `DIR` (the file formats: [`contract::ranks`]). Without `CMLB_RANKS_OUT` the
//! wrappers only pass calls through.
//!
//! Counted exactly: point-to-point sends (`MPI_Send`, `Bsend`, `Ssend`, `Rsend`, their
//! non-blocking `I` forms, `MPI_Sendrecv(_replace)`, persistent sends at each `MPI_Start(all)`).
//! Counted by their logical pattern ([`model`]): the blocking collectives and the common
//! non-blocking ones. Not counted: one-sided communication (`MPI_Put`/`Get`), neighbourhood
//! collectives, intercommunicator collectives, Fortran bindings that bypass the C `MPI_`
//! symbols, and traffic of ranks spawned after `MPI_Init`.
//!
//! One library serves Open MPI and MPICH (and MPICH-derived libraries): see [`abi`].

#![allow(non_snake_case)]
// The exported functions are called by MPI programs through mpi.h's prototypes; their
// safety contract is MPI's.
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]

pub mod abi;
pub mod model;
mod state;

use abi::H;
use model::Coll;
use state::State;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::AtomicUsize;

/// Run a counting hook; a bug in it must never unwind into the MPI program.
fn counted(f: impl FnOnce(&State)) {
    if let Some(st) = state::get() {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(st)));
    }
}

fn missing(name: &str) -> c_int {
    eprintln!("cmlb-mpi: P{name} not found: is this program linked with an MPI library?");
    // MPI_ERR_OTHER is 16 in Open MPI and 15 in MPICH; any non-zero value is an error.
    15
}

/// Per-call bytes of an `int counts[]` argument of `n` entries.
unsafe fn counts_bytes(st: &State, counts: *const c_int, n: usize, dt: H) -> Vec<u64> {
    if counts.is_null() {
        return Vec::new();
    }
    (0..n).map(|i| st.bytes(*counts.add(i), dt)).collect()
}

/// The library's `PMPI_<name>` as `fn(types) -> c_int`, looked up once per call site; when it
/// is missing, the calling wrapper returns [`missing`]'s error.
macro_rules! real {
    ($name:ident : fn($($t:ty),*)) => {{
        static F: AtomicUsize = AtomicUsize::new(0);
        let pname = concat!("P", stringify!($name), "\0");
        let Ok(pname) = CStr::from_bytes_with_nul(pname.as_bytes()) else {
            return missing(stringify!($name));
        };
        let Some(f) = abi::resolve(pname, &F) else {
            return missing(stringify!($name));
        };
        let real: unsafe extern "C" fn($($t),*) -> c_int = std::mem::transmute(f);
        real
    }};
}

/// Define exported `MPI_` functions: look up `PMPI_<name>` once, run the hook, call it.
macro_rules! wrap {
    ($(
        fn $name:ident ( $($a:ident : $t:ty),* ) $hook:expr;
    )*) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $name($($a: $t),*) -> c_int {
            let real = real!($name: fn($($t),*));
            let hook: &dyn Fn(&State) = &$hook;
            counted(hook);
            real($($a),*)
        }
    )*};
}

wrap! {
    fn MPI_Send(buf: *const c_void, count: c_int, dt: H, dest: c_int, tag: c_int, comm: H)
        |st: &State| st.p2p(comm, dest, count, dt);
    fn MPI_Bsend(buf: *const c_void, count: c_int, dt: H, dest: c_int, tag: c_int, comm: H)
        |st: &State| st.p2p(comm, dest, count, dt);
    fn MPI_Ssend(buf: *const c_void, count: c_int, dt: H, dest: c_int, tag: c_int, comm: H)
        |st: &State| st.p2p(comm, dest, count, dt);
    fn MPI_Rsend(buf: *const c_void, count: c_int, dt: H, dest: c_int, tag: c_int, comm: H)
        |st: &State| st.p2p(comm, dest, count, dt);
    fn MPI_Isend(buf: *const c_void, count: c_int, dt: H, dest: c_int, tag: c_int, comm: H,
                 req: *mut c_void)
        |st: &State| st.p2p(comm, dest, count, dt);
    fn MPI_Ibsend(buf: *const c_void, count: c_int, dt: H, dest: c_int, tag: c_int, comm: H,
                  req: *mut c_void)
        |st: &State| st.p2p(comm, dest, count, dt);
    fn MPI_Issend(buf: *const c_void, count: c_int, dt: H, dest: c_int, tag: c_int, comm: H,
                  req: *mut c_void)
        |st: &State| st.p2p(comm, dest, count, dt);
    fn MPI_Irsend(buf: *const c_void, count: c_int, dt: H, dest: c_int, tag: c_int, comm: H,
                  req: *mut c_void)
        |st: &State| st.p2p(comm, dest, count, dt);
    fn MPI_Sendrecv(sbuf: *const c_void, scount: c_int, sdt: H, dest: c_int, stag: c_int,
                    rbuf: *mut c_void, rcount: c_int, rdt: H, source: c_int, rtag: c_int,
                    comm: H, status: *mut c_void)
        |st: &State| st.p2p(comm, dest, scount, sdt);
    fn MPI_Sendrecv_replace(buf: *mut c_void, count: c_int, dt: H, dest: c_int, stag: c_int,
                            source: c_int, rtag: c_int, comm: H, status: *mut c_void)
        |st: &State| st.p2p(comm, dest, count, dt);
    fn MPI_Start(req: *mut c_void)
        |st: &State| if !req.is_null() { st.start(st.abi().read(req)) };
    fn MPI_Startall(n: c_int, reqs: *mut c_void)
        |st: &State| {
            let step = st.abi().handle_size();
            for i in 0..n.max(0) as usize {
                st.start(st.abi().read(reqs.cast::<u8>().add(i * step).cast()));
            }
        };
    fn MPI_Request_free(req: *mut c_void)
        |st: &State| if !req.is_null() { st.forget_request(st.abi().read(req)) };
    fn MPI_Comm_free(comm: *mut c_void)
        |st: &State| if !comm.is_null() { st.forget_comm(st.abi().read(comm)) };

    fn MPI_Bcast(buf: *mut c_void, count: c_int, dt: H, root: c_int, comm: H)
        |st: &State| st.coll(comm, &|_, _| Some(Coll::Bcast {
            root: root.max(0) as usize, n: st.bytes(count, dt) }));
    fn MPI_Ibcast(buf: *mut c_void, count: c_int, dt: H, root: c_int, comm: H,
                  req: *mut c_void)
        |st: &State| st.coll(comm, &|_, _| Some(Coll::Bcast {
            root: root.max(0) as usize, n: st.bytes(count, dt) }));
    fn MPI_Reduce(sbuf: *const c_void, rbuf: *mut c_void, count: c_int, dt: H, op: H,
                  root: c_int, comm: H)
        |st: &State| st.coll(comm, &|_, _| Some(Coll::ToRoot {
            root: root.max(0) as usize, n: st.bytes(count, dt) }));
    fn MPI_Allreduce(sbuf: *const c_void, rbuf: *mut c_void, count: c_int, dt: H, op: H,
                     comm: H)
        |st: &State| st.coll(comm, &|_, _| Some(Coll::Allreduce { n: st.bytes(count, dt) }));
    fn MPI_Iallreduce(sbuf: *const c_void, rbuf: *mut c_void, count: c_int, dt: H, op: H,
                      comm: H, req: *mut c_void)
        |st: &State| st.coll(comm, &|_, _| Some(Coll::Allreduce { n: st.bytes(count, dt) }));
    fn MPI_Gather(sbuf: *const c_void, scount: c_int, sdt: H, rbuf: *mut c_void,
                  rcount: c_int, rdt: H, root: c_int, comm: H)
        |st: &State| st.coll(comm, &|_, _| Some(Coll::ToRoot {
            root: root.max(0) as usize, n: st.bytes(scount, sdt) }));
    fn MPI_Gatherv(sbuf: *const c_void, scount: c_int, sdt: H, rbuf: *mut c_void,
                   rcounts: *const c_int, displs: *const c_int, rdt: H, root: c_int, comm: H)
        |st: &State| st.coll(comm, &|_, _| Some(Coll::ToRoot {
            root: root.max(0) as usize, n: st.bytes(scount, sdt) }));
    fn MPI_Scatter(sbuf: *const c_void, scount: c_int, sdt: H, rbuf: *mut c_void,
                   rcount: c_int, rdt: H, root: c_int, comm: H)
        |st: &State| st.coll(comm, &|_, _| Some(Coll::Scatter {
            root: root.max(0) as usize, parts: vec![st.bytes(scount, sdt)] }));
    fn MPI_Scatterv(sbuf: *const c_void, scounts: *const c_int, displs: *const c_int, sdt: H,
                    rbuf: *mut c_void, rcount: c_int, rdt: H, root: c_int, comm: H)
        |st: &State| st.coll(comm, &|my, size| (my == root.max(0) as usize).then(|| Coll::Scatter {
            root: my, parts: counts_bytes(st, scounts, size, sdt) }));
    fn MPI_Allgather(sbuf: *const c_void, scount: c_int, sdt: H, rbuf: *mut c_void,
                     rcount: c_int, rdt: H, comm: H)
        |st: &State| st.coll(comm, &|_, _| Some(Coll::Allgather {
            n: if sbuf as usize == st.abi().in_place { st.bytes(rcount, rdt) }
               else { st.bytes(scount, sdt) } }));
    fn MPI_Iallgather(sbuf: *const c_void, scount: c_int, sdt: H, rbuf: *mut c_void,
                      rcount: c_int, rdt: H, comm: H, req: *mut c_void)
        |st: &State| st.coll(comm, &|_, _| Some(Coll::Allgather {
            n: if sbuf as usize == st.abi().in_place { st.bytes(rcount, rdt) }
               else { st.bytes(scount, sdt) } }));
    fn MPI_Allgatherv(sbuf: *const c_void, scount: c_int, sdt: H, rbuf: *mut c_void,
                      rcounts: *const c_int, displs: *const c_int, rdt: H, comm: H)
        |st: &State| st.coll(comm, &|my, _| Some(Coll::Allgather {
            n: if sbuf as usize == st.abi().in_place {
                   counts_bytes(st, rcounts, my + 1, rdt).get(my).copied().unwrap_or(0)
               } else { st.bytes(scount, sdt) } }));
    fn MPI_Alltoall(sbuf: *const c_void, scount: c_int, sdt: H, rbuf: *mut c_void,
                    rcount: c_int, rdt: H, comm: H)
        |st: &State| st.coll(comm, &|_, _| Some(Coll::ToEach {
            parts: vec![if sbuf as usize == st.abi().in_place { st.bytes(rcount, rdt) }
                        else { st.bytes(scount, sdt) }] }));
    fn MPI_Ialltoall(sbuf: *const c_void, scount: c_int, sdt: H, rbuf: *mut c_void,
                     rcount: c_int, rdt: H, comm: H, req: *mut c_void)
        |st: &State| st.coll(comm, &|_, _| Some(Coll::ToEach {
            parts: vec![if sbuf as usize == st.abi().in_place { st.bytes(rcount, rdt) }
                        else { st.bytes(scount, sdt) }] }));
    fn MPI_Alltoallv(sbuf: *const c_void, scounts: *const c_int, sdispls: *const c_int,
                     sdt: H, rbuf: *mut c_void, rcounts: *const c_int,
                     rdispls: *const c_int, rdt: H, comm: H)
        |st: &State| st.coll(comm, &|_, size| Some(Coll::ToEach {
            parts: if sbuf as usize == st.abi().in_place {
                       counts_bytes(st, rcounts, size, rdt)
                   } else { counts_bytes(st, scounts, size, sdt) } }));
    fn MPI_Reduce_scatter(sbuf: *const c_void, rbuf: *mut c_void, rcounts: *const c_int,
                          dt: H, op: H, comm: H)
        |st: &State| st.coll(comm, &|_, size| Some(Coll::ToEach {
            parts: counts_bytes(st, rcounts, size, dt) }));
    fn MPI_Reduce_scatter_block(sbuf: *const c_void, rbuf: *mut c_void, rcount: c_int,
                                dt: H, op: H, comm: H)
        |st: &State| st.coll(comm, &|_, _| Some(Coll::ToEach {
            parts: vec![st.bytes(rcount, dt)] }));
    fn MPI_Scan(sbuf: *const c_void, rbuf: *mut c_void, count: c_int, dt: H, op: H, comm: H)
        |st: &State| st.coll(comm, &|_, _| Some(Coll::Scan { n: st.bytes(count, dt) }));
    fn MPI_Exscan(sbuf: *const c_void, rbuf: *mut c_void, count: c_int, dt: H, op: H, comm: H)
        |st: &State| st.coll(comm, &|_, _| Some(Coll::Scan { n: st.bytes(count, dt) }));
}

/// Persistent sends: the request is known only after the real call.
macro_rules! persistent {
    ($($name:ident),*) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $name(buf: *const c_void, count: c_int, dt: H, dest: c_int,
                                       tag: c_int, comm: H, req: *mut c_void) -> c_int {
            let real = real!($name: fn(*const c_void, c_int, H, c_int, c_int, H, *mut c_void));
            let rc = real(buf, count, dt, dest, tag, comm, req);
            if rc == 0 && !req.is_null() {
                counted(|st| st.persistent(st.abi().read(req), comm, dest, count, dt));
            }
            rc
        }
    )*};
}

persistent!(
    MPI_Send_init,
    MPI_Bsend_init,
    MPI_Ssend_init,
    MPI_Rsend_init
);

#[no_mangle]
pub unsafe extern "C" fn MPI_Init(argc: *mut c_int, argv: *mut *mut *mut c_char) -> c_int {
    let real = real!(MPI_Init: fn(*mut c_int, *mut *mut *mut c_char));
    let rc = real(argc, argv);
    if rc == 0 {
        let _ = std::panic::catch_unwind(state::init);
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Init_thread(
    argc: *mut c_int,
    argv: *mut *mut *mut c_char,
    required: c_int,
    provided: *mut c_int,
) -> c_int {
    let real = real!(MPI_Init_thread: fn(*mut c_int, *mut *mut *mut c_char, c_int, *mut c_int));
    let rc = real(argc, argv, required, provided);
    if rc == 0 {
        let _ = std::panic::catch_unwind(state::init);
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Finalize() -> c_int {
    let real = real!(MPI_Finalize: fn());
    let _ = std::panic::catch_unwind(state::finalize);
    real()
}
