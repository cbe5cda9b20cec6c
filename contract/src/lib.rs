//! What crosses a process boundary in cmlb, in one place.
//!
//! Three processes cooperate to pin a thread: a launcher (the SPANK plugin inside slurmstepd,
//! or `cmlb run`) decides, the task's environment carries the decision across `exec`, and the
//! preload library (`libcmlb_preload.so`) carries it out inside the program. This crate is the
//! whole contract between them:
//!
//! * [`env`](mod@env): the variable names;
//! * [`cpulist`]: the Linux CPU-list encoding (`0-3,8`), and [`encode_pus`]/[`decode_pus`], the
//!   per-thread PU list (`2,0,2`: thread k on the k-th number);
//! * [`encode_wrap`]/[`decode_wrap`]: the exec-wrap argv (profile mode, apply pre-run);
//! * [`task_env`]: every variable a pinned task gets, for a [`BindMode`];
//! * [`pin`] and [`own_cpus`]: the one `sched_setaffinity`/`sched_getaffinity` pair;
//! * [`launcher`]: `mpirun`/`mpiexec` daemons and the ranks they fork.
//!
//! It depends on libc only, because the preload library links it into every pinned program.

pub mod cpulist;
pub mod launcher;
pub mod ranks;

pub use cpulist::{format_cpu_list, parse_cpu_list, CpuListError};

/// Environment variable names shared by the launchers and the preload library.
pub mod env {
    /// Per-thread PU list for the preload library ([`super::encode_pus`]).
    pub const BIND_PUS: &str = "CMLB_BIND_PUS";
    /// Only the process with this pid applies [`BIND_PUS`]: children inherit `LD_PRELOAD` and
    /// the variables, but must not stack their own threads onto the parent's plan.
    pub const BIND_PID: &str = "CMLB_BIND_PID";
    /// `1`: the preload library logs each pinning to stderr.
    pub const BIND_VERBOSE: &str = "CMLB_BIND_VERBOSE";
    /// Exec-wrap words ([`super::encode_wrap`]): the preload library re-executes the process as
    /// `WORDS... /proc/self/exe ARGS...` before the program's first instruction.
    pub const EXEC_WRAP: &str = "CMLB_EXEC_WRAP";
    /// Only the process with this pid performs the exec-wrap.
    pub const EXEC_PID: &str = "CMLB_EXEC_PID";
    /// The dynamic loader's preload list.
    pub const LD_PRELOAD: &str = "LD_PRELOAD";
    /// The user's OpenMP thread count (read, never overridden when set).
    pub const OMP_NUM_THREADS: &str = "OMP_NUM_THREADS";
    /// Set by the plugin in a batch script profiled with `sbatch --cmlb-map=profile`: the
    /// job's profile directory; MPI steps with [`JOB_TASKS`] tasks also write their rank
    /// matrix into its `ranks/`, from which `sbatch --cmlb-map=apply` places the ranks on nodes.
    pub const JOB_PROFILE: &str = "CMLB_JOB_PROFILE";
    /// The batch job's task count (see [`JOB_PROFILE`]).
    pub const JOB_TASKS: &str = "CMLB_JOB_TASKS";
    /// Set by the plugin in a batch script (profile, or apply with a rank profile): the words
    /// ([`super::encode_wrap`], with [`crate::launcher::RANK_WORD`] and
    /// [`crate::launcher::NODE_WORD`]) under which the preload library re-executes each rank
    /// that `mpirun`/`mpiexec` forks ([`crate::launcher`]).
    pub const RANK_WRAP: &str = "CMLB_RANK_WRAP";
    /// Profile mode: the MPI tracer library, preloaded into each rank so that the job's
    /// rank matrix is recorded into `ranks/` of the job profile directory [`RANK_TRACE_OUT`].
    pub const RANK_TRACE: &str = "CMLB_RANK_TRACE";
    /// Where the tracer writes (with [`crate::launcher::NODE_WORD`]).
    pub const RANK_TRACE_OUT: &str = "CMLB_RANK_TRACE_OUT";
    /// Apply mode: the host of each rank as the job's `mpirun` places them
    /// ([`crate::launcher::encode_hosts`]), so each rank knows which ranks share its node.
    pub const RANK_HOSTS: &str = "CMLB_RANK_HOSTS";
}

/// File name of the preload library (what launchers look for next to themselves).
pub const PRELOAD_LIB: &str = "libcmlb_preload.so";

/// Separator of the exec-wrap words: the ASCII unit separator, which no path or argument a
/// launcher builds contains.
pub const WRAP_SEP: char = '\x1f';

/// Which mechanism places individual threads (the task's CPU mask is always set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BindMode {
    /// OpenMP environment only (`OMP_PLACES`, `GOMP_CPU_AFFINITY`, `KMP_AFFINITY`).
    Omp,
    /// The `pthread_create` wrapper only (any threaded program, dynamically linked).
    Preload,
    /// Both; they agree on every thread's PU.
    #[default]
    Both,
}

impl BindMode {
    /// Every spelling, for messages and help.
    pub const NAMES: &'static str = "omp, preload, both";

    /// `omp`, `preload` or `both`.
    pub fn parse(s: &str) -> Option<BindMode> {
        match s {
            "omp" => Some(BindMode::Omp),
            "preload" => Some(BindMode::Preload),
            "both" => Some(BindMode::Both),
            _ => None,
        }
    }
    /// The spelling [`BindMode::parse`] reads.
    pub fn name(self) -> &'static str {
        match self {
            BindMode::Omp => "omp",
            BindMode::Preload => "preload",
            BindMode::Both => "both",
        }
    }
    /// True when the OpenMP variables are exported.
    pub fn omp(self) -> bool {
        matches!(self, BindMode::Omp | BindMode::Both)
    }
    /// True when the preload library pins threads.
    pub fn preload(self) -> bool {
        matches!(self, BindMode::Preload | BindMode::Both)
    }
}

/// `2,0,2`: thread k runs on the k-th PU (OS index).
pub fn encode_pus(pus: &[u32]) -> String {
    let list: Vec<String> = pus.iter().map(|p| p.to_string()).collect();
    list.join(",")
}

/// The inverse of [`encode_pus`]; `None` when an item is not a CPU number or the list is empty.
pub fn decode_pus(text: &str) -> Option<Vec<u32>> {
    let pus: Result<Vec<u32>, _> = text.split(',').map(|s| s.trim().parse::<u32>()).collect();
    pus.ok().filter(|p| !p.is_empty())
}

/// The exec-wrap words as one environment value.
pub fn encode_wrap(words: &[String]) -> String {
    words.join(&WRAP_SEP.to_string())
}

/// The inverse of [`encode_wrap`] (empty words dropped).
pub fn decode_wrap(text: &str) -> Vec<String> {
    text.split(WRAP_SEP)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// `LD_PRELOAD` with `lib` put first (space or colon separated lists; kept once).
pub fn ld_preload_with(existing: Option<&str>, lib: &str) -> String {
    match existing.map(str::trim).filter(|s| !s.is_empty()) {
        Some(e) if e.split([' ', ':']).any(|x| x == lib) => e.to_string(),
        Some(e) => format!("{lib} {e}"),
        None => lib.to_string(),
    }
}

/// `LD_PRELOAD` without cmlb's preload library (file name [`PRELOAD_LIB`], or
/// `cmlb_preload.so` as a site may install it); `None` when nothing is left (the variable
/// should then be removed).
pub fn ld_preload_without_cmlb(existing: &str) -> Option<String> {
    let ours = |s: &str| {
        s.rsplit('/')
            .next()
            .is_some_and(|f| f == PRELOAD_LIB || f == "cmlb_preload.so")
    };
    let kept: Vec<&str> = existing
        .split([' ', ':'])
        .filter(|s| !s.is_empty() && !ours(s))
        .collect();
    (!kept.is_empty()).then(|| kept.join(" "))
}

/// What a pinned task needs in its environment, besides its CPU mask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinEnv<'a> {
    /// PU of thread k (creation order, main thread = 0).
    pub pus: &'a [u32],
    /// Which mechanisms place the threads.
    pub mode: BindMode,
    /// The preload library's path (needed when `mode.preload()`).
    pub preload_lib: Option<&'a str>,
    /// The task's `LD_PRELOAD` before cmlb's.
    pub existing_ld_preload: Option<&'a str>,
    /// The pid that will exec the program (the preload pins only there).
    pub pid: u32,
    /// Ask the preload library to log every pinning.
    pub verbose: bool,
    /// The OpenMP team size of a program that starts threads of its own before the team (an
    /// MPI rank: the library's progress threads come right after the main thread). The
    /// OpenMP variables then list the team's PUs only — the main thread's and the last
    /// `team - 1` created — so the runtime's team thread i and the preload's creation order
    /// agree. `None`: every thread is a team thread.
    pub omp_team: Option<usize>,
}

/// Every `(name, value)` a pinned task gets: the OpenMP variables and/or the preload library's.
///
/// `OMP_NUM_THREADS` is never set: placing threads must not change how many a program starts.
/// The profiled thread count is no OpenMP team size: it counts the threads of MPI libraries
/// (LAMMPS ranks started 3 OpenMP threads where they had 1) and of the program's own helpers
/// (GROMACS `mdrun -nt 4` stopped with "not divisible by the number of OpenMP threads
/// requested (5)", docs/benchmarks.md "Run time"). Unset, the runtime sizes the team as it
/// would without cmlb.
pub fn task_env(p: &PinEnv) -> Vec<(String, String)> {
    let mut env = Vec::new();
    if p.pus.is_empty() {
        return env;
    }
    if p.mode.omp() {
        let team: Vec<u32> = match p.omp_team {
            Some(m) if m >= 1 && m < p.pus.len() => std::iter::once(p.pus[0])
                .chain(p.pus[p.pus.len() - (m - 1)..].iter().copied())
                .collect(),
            _ => p.pus.to_vec(),
        };
        let places: Vec<String> = team.iter().map(|u| format!("{{{u}}}")).collect();
        env.push(("OMP_PLACES".into(), places.join(",")));
        env.push(("OMP_PROC_BIND".into(), "true".into()));
        let list: Vec<String> = team.iter().map(|u| u.to_string()).collect();
        env.push(("GOMP_CPU_AFFINITY".into(), list.join(" ")));
        env.push((
            "KMP_AFFINITY".into(),
            format!("granularity=fine,explicit,proclist=[{}]", list.join(",")),
        ));
    }
    if p.mode.preload() {
        env.push((env::BIND_PUS.into(), encode_pus(p.pus)));
        env.push((env::BIND_PID.into(), p.pid.to_string()));
        if p.verbose {
            env.push((env::BIND_VERBOSE.into(), "1".into()));
        }
        if let Some(lib) = p.preload_lib {
            env.push((
                env::LD_PRELOAD.into(),
                ld_preload_with(p.existing_ld_preload, lib),
            ));
        }
    }
    env
}

/// The environment of a task that the preload library re-executes as `words... PROGRAM ARGS`.
pub fn wrap_env(
    words: &[String],
    pid: u32,
    preload_lib: &str,
    existing_ld_preload: Option<&str>,
) -> Vec<(String, String)> {
    vec![
        (env::EXEC_WRAP.into(), encode_wrap(words)),
        (env::EXEC_PID.into(), pid.to_string()),
        (
            env::LD_PRELOAD.into(),
            ld_preload_with(existing_ld_preload, preload_lib),
        ),
    ]
}

/// Bits in one word of a kernel CPU mask.
const MASK_BITS: usize = 8 * std::mem::size_of::<libc::c_ulong>();

/// The largest mask `own_cpus` offers the kernel (4 M CPUs): far beyond any `nr_cpu_ids`, so the
/// search for the kernel's mask size ends even on a kernel that keeps answering EINVAL.
const MAX_MASK_WORDS: usize = (1 << 22) / MASK_BITS;

/// `cpus` as the kernel's affinity mask: an array of unsigned longs, CPU c at bit c % bits of
/// word c / bits, just long enough for the largest CPU. Sized at run time, not a `cpu_set_t`:
/// that holds 1 024 CPUs, and nodes with more PUs exist (8-socket SMT machines).
pub fn cpu_mask(cpus: &[u32]) -> Vec<libc::c_ulong> {
    let words = cpus.iter().max().map_or(1, |&m| m as usize / MASK_BITS + 1);
    let mut mask: Vec<libc::c_ulong> = vec![0; words];
    for &c in cpus {
        mask[c as usize / MASK_BITS] |= 1 << (c as usize % MASK_BITS);
    }
    mask
}

/// The CPUs set in a kernel affinity mask, ascending.
pub fn mask_cpus(mask: &[libc::c_ulong]) -> Vec<u32> {
    let mut cpus = Vec::new();
    for (w, &word) in mask.iter().enumerate() {
        let mut rest = word;
        while rest != 0 {
            let bit = rest.trailing_zeros() as usize;
            cpus.push((w * MASK_BITS + bit) as u32);
            rest &= rest - 1;
        }
    }
    cpus
}

/// Restrict the calling thread (and what it creates or execs afterwards) to `pus`.
///
/// The mask is as long as the largest PU needs. A mask shorter than the kernel's is zero-filled
/// by the kernel; PUs beyond the kernel's `nr_cpu_ids`, or none the thread may use, give EINVAL.
pub fn pin(pus: &[u32]) -> std::io::Result<()> {
    pin_tid(0, pus)
}

/// [`pin`] for the thread `tid` of this process (0: the calling thread): the preload pins the
/// main thread (tid = pid) from whichever thread creates the first one.
pub fn pin_tid(tid: libc::pid_t, pus: &[u32]) -> std::io::Result<()> {
    if pus.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "no CPU to pin to",
        ));
    }
    if let Some(&p) = pus
        .iter()
        .find(|&&p| p as usize >= MAX_MASK_WORDS * MASK_BITS)
    {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("CPU {p} is beyond any CPU mask the kernel takes"),
        ));
    }
    let mask = cpu_mask(pus);
    // SAFETY: the kernel reads exactly `len` bytes from a live buffer of that size; glibc's
    // wrapper passes the size through (cpu_set_t is only its nominal pointer type).
    let rc = unsafe {
        libc::sched_setaffinity(
            tid,
            std::mem::size_of_val(mask.as_slice()),
            mask.as_ptr().cast::<libc::cpu_set_t>(),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The CPUs the calling thread may run on, ascending.
///
/// The kernel refuses (EINVAL) a buffer shorter than its `nr_cpu_ids` bits even when the
/// thread's CPUs all fit, so the buffer starts at 1 024 CPUs and doubles until it is taken.
pub fn own_cpus() -> std::io::Result<Vec<u32>> {
    let mut words = 1024 / MASK_BITS;
    loop {
        let mut mask: Vec<libc::c_ulong> = vec![0; words];
        // SAFETY: the kernel writes at most `len` bytes into a live buffer of that size.
        let rc = unsafe {
            libc::sched_getaffinity(
                0,
                std::mem::size_of_val(mask.as_slice()),
                mask.as_mut_ptr().cast::<libc::cpu_set_t>(),
            )
        };
        if rc == 0 {
            return Ok(mask_cpus(&mask));
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINVAL) || words >= MAX_MASK_WORDS {
            return Err(e);
        }
        words *= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get<'a>(e: &'a [(String, String)], k: &str) -> Option<&'a str> {
        e.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
    }

    #[test]
    fn env_per_mode() {
        let pus = [2, 0, 2];
        let mut p = PinEnv {
            pus: &pus,
            mode: BindMode::Both,
            preload_lib: Some("/l.so"),
            existing_ld_preload: Some("/a.so"),
            pid: 42,
            verbose: true,
            omp_team: None,
        };
        let e = task_env(&p);
        assert_eq!(get(&e, "OMP_PLACES"), Some("{2},{0},{2}"));
        assert_eq!(get(&e, "OMP_PROC_BIND"), Some("true"));
        assert_eq!(get(&e, "GOMP_CPU_AFFINITY"), Some("2 0 2"));
        assert_eq!(
            get(&e, "KMP_AFFINITY"),
            Some("granularity=fine,explicit,proclist=[2,0,2]")
        );
        assert_eq!(
            get(&e, "OMP_NUM_THREADS"),
            None,
            "the program's own thread count"
        );
        assert_eq!(get(&e, env::BIND_PUS), Some("2,0,2"));
        assert_eq!(get(&e, env::BIND_PID), Some("42"));
        assert_eq!(get(&e, env::BIND_VERBOSE), Some("1"));
        assert_eq!(get(&e, env::LD_PRELOAD), Some("/l.so /a.so"));

        // An MPI rank: main thread, 2 library threads, then a team of 3.
        let rank = [4, 9, 9, 5, 6];
        let e = task_env(&PinEnv {
            pus: &rank,
            omp_team: Some(3),
            ..p
        });
        assert_eq!(get(&e, "OMP_PLACES"), Some("{4},{5},{6}"));
        assert_eq!(get(&e, "GOMP_CPU_AFFINITY"), Some("4 5 6"));
        assert_eq!(get(&e, env::BIND_PUS), Some("4,9,9,5,6"));

        p.mode = BindMode::Omp;
        let e = task_env(&p);
        assert!(e
            .iter()
            .all(|(n, _)| !n.starts_with("CMLB_") && n != "OMP_NUM_THREADS" && n != "LD_PRELOAD"));

        p.mode = BindMode::Preload;
        p.verbose = false;
        let e = task_env(&p);
        let names: Vec<&str> = e.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, [env::BIND_PUS, env::BIND_PID, env::LD_PRELOAD]);
        assert!(task_env(&PinEnv { pus: &[], ..p }).is_empty());
    }

    #[test]
    fn encodings_round_trip() {
        assert_eq!(decode_pus(&encode_pus(&[3, 0, 3])), Some(vec![3, 0, 3]));
        assert_eq!(decode_pus("1,x"), None);
        assert_eq!(decode_pus(""), None);
        let w: Vec<String> = ["/usr/bin/cmlb", "profile", "--out", "/tmp/a b,c"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(decode_wrap(&encode_wrap(&w)), w);
        let e = wrap_env(&w, 7, "/l.so", None);
        assert_eq!(get(&e, env::EXEC_PID), Some("7"));
        assert_eq!(get(&e, env::LD_PRELOAD), Some("/l.so"));
    }

    #[test]
    fn ld_preload_lists() {
        assert_eq!(ld_preload_with(None, "/l.so"), "/l.so");
        assert_eq!(ld_preload_with(Some("  "), "/l.so"), "/l.so");
        assert_eq!(ld_preload_with(Some("/a.so"), "/l.so"), "/l.so /a.so");
        assert_eq!(ld_preload_with(Some("/l.so:/a.so"), "/l.so"), "/l.so:/a.so");
        assert_eq!(
            ld_preload_without_cmlb("/x/libcmlb_preload.so /a.so:/b.so"),
            Some("/a.so /b.so".into())
        );
        assert_eq!(ld_preload_without_cmlb("/x/libcmlb_preload.so"), None);
        // Only the file name counts: a directory of that name is not the library.
        assert_eq!(
            ld_preload_without_cmlb("/libcmlb_preload.so/x.so"),
            Some("/libcmlb_preload.so/x.so".into())
        );
    }

    #[test]
    fn pin_round_trips_through_the_kernel() {
        let mine = own_cpus().expect("sched_getaffinity");
        assert!(!mine.is_empty());
        // Pin this test thread to its first CPU and back; both must read back exactly.
        pin(&mine[..1]).expect("pin to one of our own CPUs");
        assert_eq!(own_cpus().unwrap(), &mine[..1]);
        pin(&mine).unwrap();
        assert_eq!(own_cpus().unwrap(), mine);
        let e = pin(&[u32::MAX]).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert_eq!(
            pin(&[]).unwrap_err().kind(),
            std::io::ErrorKind::InvalidInput
        );
        // A CPU the kernel does not have: its own EINVAL, and the thread keeps its CPUs.
        assert!(pin(&[100_000]).is_err());
        assert_eq!(own_cpus().unwrap(), mine);
    }

    #[test]
    fn cpu_masks_of_any_size_round_trip() {
        // Far beyond a cpu_set_t's 1 024 bits: the word and bit of each CPU, and back.
        let cpus = [0u32, 1, 63, 64, 1023, 1024, 2047, 4095, 65_535, 1_000_000];
        let mask = cpu_mask(&cpus);
        assert_eq!(mask.len(), 1_000_000 / MASK_BITS + 1);
        assert_eq!(
            mask[1024 / MASK_BITS] & 1,
            1,
            "CPU 1024 is bit 0 of its word"
        );
        assert_eq!(mask_cpus(&mask), cpus);
        // Unsorted, repeated input: the set, ascending.
        assert_eq!(
            mask_cpus(&cpu_mask(&[4095, 3, 4095, 2048])),
            [3, 2048, 4095]
        );
        assert_eq!(cpu_mask(&[]), [0]);
        assert!(mask_cpus(&[0, 0, 0]).is_empty());
    }

    #[test]
    fn own_cpus_agrees_with_the_kernels_list() {
        // The list the kernel prints in /proc is the truth the mask must read back as.
        let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
        let list = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap()
            .trim();
        assert_eq!(own_cpus().unwrap(), parse_cpu_list(list).unwrap());
    }
}
