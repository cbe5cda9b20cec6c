//! `libcmlb_preload.so`: loaded with `LD_PRELOAD` into a task by the SPANK plugin or `cmlb run`.
//!
//! 1. **Thread pinning** (likwid-pin's technique): `pthread_create` is wrapped; the k-th thread
//!    the process creates (main thread = 0) starts in a trampoline that pins it to
//!    `CMLB_BIND_PUS[k]` before the real start routine runs, so it never touches memory from
//!    another PU. The main thread is pinned when the process creates its first thread, not by
//!    the constructor: runtimes size their thread pools from the affinity mask they find at
//!    start (OpenBLAS, GROMACS, TBB, the JVM), and a main thread pinned to one PU made OpenBLAS
//!    start one thread instead of two (NumPy's matrix product 1.8x slower, docs/benchmarks.md,
//!    "Run time"). A process that never creates a thread keeps the task's mask. Threads beyond
//!    the list keep the task's CPU mask. Only the process whose pid is `CMLB_BIND_PID` pins: children
//!    inherit `LD_PRELOAD` but must not stack their threads onto the parent's plan.
//! 2. **Exec-wrap** (profile mode on Slurm releases without `spank_prepend_task_argv`): when
//!    `CMLB_EXEC_PID` is this process, the constructor re-executes the process as
//!    `CMLB_EXEC_WRAP... /proc/self/exe ARGS...` (e.g. `cmlb profile --out DIR -- ./app args`)
//!    before the program's first instruction, with the CMLB_* variables and this library removed
//!    from the environment, so the profiler starts the real program itself and sees every thread.
//!
//! 3. **Rank-wrap** (`mpirun`/`mpiexec` in a batch script under `sbatch --cmlb-map`): when
//!    `CMLB_RANK_WRAP` is set, this process's parent is a launcher that forks MPI ranks and the
//!    launcher's variables name this process's rank, the constructor re-executes it under those
//!    words (`cmlb profile` into the job's `task<rank>/`, or `cmlb run --job-rank`), with the MPI
//!    tracer preloaded in profile mode ([`contract::launcher`]).
//!
//! Failures never stop the program: one line on stderr, then it runs unpinned / unprofiled.

use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;

use contract::env::{
    BIND_PID as ENV_PID, BIND_PUS as ENV_PUS, BIND_VERBOSE as ENV_VERBOSE,
    EXEC_PID as ENV_WRAP_PID, EXEC_WRAP as ENV_WRAP,
};

static PUS: OnceLock<Vec<u32>> = OnceLock::new();
static VERBOSE: OnceLock<bool> = OnceLock::new();
/// Index of the next thread to be created (0 is the main thread).
static NEXT: AtomicUsize = AtomicUsize::new(1);
/// The main thread has been pinned (at the process's first `pthread_create`).
static MAIN_PINNED: AtomicBool = AtomicBool::new(false);

/// "C-unwind": `pthread_exit` and `pthread_cancel` end a thread by a forced unwind through its
/// start routine and our trampoline; through a plain "C" frame Rust aborts the process.
type StartFn = extern "C-unwind" fn(*mut c_void) -> *mut c_void;
type CreateFn = unsafe extern "C" fn(
    *mut libc::pthread_t,
    *const libc::pthread_attr_t,
    StartFn,
    *mut c_void,
) -> c_int;

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

extern "C" fn init() {
    // A panic must not unwind out of a constructor.
    let _ = std::panic::catch_unwind(|| {
        let me = std::process::id().to_string();
        if std::env::var_os(contract::env::RANK_WRAP).is_some() {
            rank_wrap();
        }
        if std::env::var(ENV_WRAP_PID).ok().as_deref() == Some(me.as_str()) {
            let prefix = contract::decode_wrap(&std::env::var(ENV_WRAP).unwrap_or_default());
            std::env::remove_var(ENV_WRAP);
            std::env::remove_var(ENV_WRAP_PID);
            exec_wrap(&prefix, None);
        }
        if std::env::var(ENV_PID).ok().as_deref() != Some(me.as_str()) {
            return;
        }
        let _ = VERBOSE.set(std::env::var(ENV_VERBOSE).ok().as_deref() == Some("1"));
        let Ok(list) = std::env::var(ENV_PUS) else {
            return;
        };
        match contract::decode_pus(&list) {
            Some(p) => {
                let _ = PUS.set(p);
            }
            None => eprintln!("cmlb-preload: {ENV_PUS}='{list}' is not a list of CPU numbers; threads stay unpinned"),
        }
    });
}

fn pin_self(k: usize, pu: u32) {
    match contract::pin(&[pu]) {
        Err(e) => eprintln!("cmlb-preload: thread {k}: cannot pin to CPU {pu}: {e}; left unpinned"),
        Ok(()) if VERBOSE.get().copied().unwrap_or(false) => {
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() };
            eprintln!("cmlb-preload: thread {k} (tid {tid}) pinned to CPU {pu}");
        }
        Ok(()) => {}
    }
}

/// Pin the main thread (tid = pid) from whichever thread runs this.
fn pin_main(pu: u32) {
    // SAFETY: getpid/gettid have no preconditions.
    let (pid, tid) = unsafe { (libc::getpid(), libc::gettid()) };
    if pid == tid {
        return pin_self(0, pu);
    }
    match contract::pin_tid(pid, &[pu]) {
        Err(e) => eprintln!("cmlb-preload: thread 0: cannot pin to CPU {pu}: {e}; left unpinned"),
        Ok(()) if VERBOSE.get().copied().unwrap_or(false) => {
            eprintln!("cmlb-preload: thread 0 (tid {pid}) pinned to CPU {pu}");
        }
        Ok(()) => {}
    }
}

fn real_create() -> Option<CreateFn> {
    static REAL: OnceLock<usize> = OnceLock::new();
    let p = *REAL.get_or_init(|| {
        // SAFETY: looks up the next definition of pthread_create (glibc's).
        unsafe { libc::dlsym(libc::RTLD_NEXT, c"pthread_create".as_ptr()) as usize }
    });
    // SAFETY: glibc's pthread_create has exactly this signature.
    (p != 0).then(|| unsafe { std::mem::transmute::<usize, CreateFn>(p) })
}

struct Tramp {
    start: StartFn,
    arg: *mut c_void,
    k: usize,
    pu: u32,
}

extern "C-unwind" fn trampoline(p: *mut c_void) -> *mut c_void {
    // SAFETY: `p` is the Box<Tramp> leaked by pthread_create below, consumed exactly once.
    // Moved out (the box freed) before the start routine runs: a forced unwind
    // (pthread_exit/pthread_cancel) must not pass a frame that still owns something to drop.
    let Tramp { start, arg, k, pu } = *unsafe { Box::from_raw(p as *mut Tramp) };
    // A pthread_cancel sent right after creation would act at the first cancellation point,
    // and the verbose line's write() is one: its forced unwind must not meet catch_unwind (the
    // process aborts). So cancellation waits until the start routine runs.
    let mut old: c_int = 0;
    // SAFETY: plain glibc calls on the calling thread; `old` is a valid out-pointer.
    let disabled = unsafe { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &mut old) } == 0;
    let _ = std::panic::catch_unwind(|| pin_self(k, pu));
    if disabled {
        // SAFETY: as above; restores the state the thread started with.
        unsafe { pthread_setcancelstate(old, &mut old) };
    }
    start(arg)
}

/// glibc's value (pthread.h enum), not exported by the libc crate.
const PTHREAD_CANCEL_DISABLE: c_int = 1;

extern "C" {
    fn pthread_setcancelstate(state: c_int, oldstate: *mut c_int) -> c_int;
}

/// The interposed `pthread_create`.
///
/// # Safety
/// Same contract as glibc's `pthread_create`.
#[no_mangle]
pub unsafe extern "C" fn pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    start: StartFn,
    arg: *mut c_void,
) -> c_int {
    let Some(real) = real_create() else {
        return libc::EAGAIN;
    };
    let Some(pus) = PUS.get() else {
        return real(thread, attr, start, arg);
    };
    if !MAIN_PINNED.swap(true, Ordering::Relaxed) {
        // The runtime has sized its pools from the task's mask by now: the main thread (tid =
        // pid, whichever thread creates first) takes its PU before the first thread exists.
        let _ = std::panic::catch_unwind(|| pin_main(pus[0]));
    }
    let k = NEXT.fetch_add(1, Ordering::Relaxed);
    let Some(&pu) = pus.get(k) else {
        return real(thread, attr, start, arg);
    };
    let t = Box::into_raw(Box::new(Tramp { start, arg, k, pu }));
    let rc = real(thread, attr, trampoline, t as *mut c_void);
    if rc != 0 {
        // The thread was not created: reclaim the box, give the index back if still last.
        drop(Box::from_raw(t));
        let _ = NEXT.compare_exchange(k + 1, k, Ordering::Relaxed, Ordering::Relaxed);
    }
    rc
}

/// A rank forked by `mpirun`/`mpiexec` in a batch script the plugin prepared: re-execute it
/// under the job's rank-wrap words. Any other process (the script's shell, `mpirun`, `srun`,
/// the daemons, a rank's own children) goes on untouched, and so does a rank when anything is
/// missing: it then runs as it would without cmlb.
fn rank_wrap() {
    use contract::{env, launcher};
    let words = contract::decode_wrap(&std::env::var(env::RANK_WRAP).unwrap_or_default());
    if words.is_empty() {
        return;
    }
    let Some(ids) = launcher::rank_ids(|k| std::env::var(k).ok()) else {
        return;
    };
    if !launcher::started_as_rank() {
        return;
    }
    // The node's name as the scratch directory's %n names it (contract::launcher::node_names).
    let node = launcher::this_node(&[], std::env::var("SLURMD_NODENAME").ok())
        .unwrap_or_else(|| "localhost".into());
    let words = launcher::fill_words(&words, ids.rank, &node);
    let tracer = std::env::var(env::RANK_TRACE)
        .ok()
        .filter(|t| !t.is_empty());
    let out = std::env::var(env::RANK_TRACE_OUT)
        .ok()
        .filter(|t| !t.is_empty());
    // Neither the wrapped rank nor anything it starts may wrap again.
    for k in [env::RANK_WRAP, env::RANK_TRACE, env::RANK_TRACE_OUT] {
        std::env::remove_var(k);
    }
    let trace = match (tracer, out) {
        (Some(lib), Some(out)) => {
            Some((lib, launcher::fill_words(&[out], ids.rank, &node).remove(0)))
        }
        _ => None,
    };
    exec_wrap(&words, trace);
}

/// Replace this process by `PREFIX... <exe> <args>`; returns only on failure. This library
/// leaves `LD_PRELOAD`; with `trace` (the MPI tracer library and its output directory) the
/// tracer joins it, so the program's MPI traffic is recorded.
fn exec_wrap(prefix: &[String], trace: Option<(String, String)>) {
    if prefix.is_empty() {
        return;
    }
    let exe = match std::fs::read_link("/proc/self/exe") {
        Ok(p) => p,
        Err(e) => {
            eprintln!("cmlb-preload: cannot read /proc/self/exe ({e}); running without cmlb");
            return;
        }
    };
    let cmdline = std::fs::read("/proc/self/cmdline").unwrap_or_default();
    let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    // Drop this library from LD_PRELOAD so the profiler and the program start clean.
    let kept = std::env::var(contract::env::LD_PRELOAD)
        .ok()
        .and_then(|lp| contract::ld_preload_without_cmlb(&lp));
    let kept = match &trace {
        Some((lib, out)) => {
            std::env::set_var(contract::ranks::RANKS_OUT, out);
            Some(contract::ld_preload_with(kept.as_deref(), lib))
        }
        None => kept,
    };
    match kept {
        None => std::env::remove_var(contract::env::LD_PRELOAD),
        Some(kept) => std::env::set_var(contract::env::LD_PRELOAD, kept),
    }
    let mut argv: Vec<CString> = Vec::new();
    for w in prefix {
        argv.push(CString::new(w.as_str()).unwrap_or_default());
    }
    argv.push(CString::new(exe.as_os_str().as_encoded_bytes()).unwrap_or_default());
    // cmdline ends with a NUL, so the last split piece is empty.
    let n = args.len().saturating_sub(1);
    for a in args.iter().take(n).skip(1) {
        argv.push(CString::new(*a).unwrap_or_default());
    }
    let mut ptrs: Vec<*const c_char> = argv.iter().map(|c| c.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: NUL-terminated argv of valid C strings; environ is the (updated) process env.
    unsafe { libc::execv(ptrs[0], ptrs.as_ptr()) };
    let e = std::io::Error::last_os_error();
    if trace.is_some() {
        // The other ranks run traced: this one must join the tracer's collective at
        // MPI_Finalize too, or the job hangs there. So it runs traced, only unprofiled.
        eprintln!(
            "cmlb-preload: cannot start {}: {e}; this rank runs with the MPI tracer only",
            prefix[0]
        );
        let n = prefix.len();
        // SAFETY: as above; the program and its arguments are the tail of the same argv.
        unsafe { libc::execv(ptrs[n], ptrs[n..].as_ptr()) };
        eprintln!(
            "cmlb-preload: cannot restart {}: {}; running without cmlb",
            exe.display(),
            std::io::Error::last_os_error()
        );
        return;
    }
    eprintln!(
        "cmlb-preload: cannot start {}: {e}; running without cmlb",
        prefix[0]
    );
}
