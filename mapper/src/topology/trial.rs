//! Running C code on input nobody vouched for in a forked child, so that a crash or a hang
//! in it costs an error message instead of the calling process.
//!
//! Why: hwloc 2.9.0's XML importer dereferences NULL on some malformed files (an object with
//! a `cpuset` but no `complete_cpuset`, found by the `topology_xml` fuzz target; `lstopo -i`
//! crashes on it too). In-process that kills whoever reads the file: `cmlb`, or slurmstepd for
//! a corrupt plugstack `topology=` file, which costs a site the node.
//!
//! Why a fork without exec: the caller may be slurmstepd, where no `cmlb` binary is known to
//! run, and the child runs nothing but the given work and `_exit`s (no exit handlers, no
//! stdio flush, no core file). Slurm itself runs plugin code in the children it forks from
//! the same multithreaded slurmstepd. Why no thread: the plugin must not leave threads in
//! slurmstepd, which forks the tasks later; the wait is `poll` on a pipe with a deadline.
//! Callers serialise their own uses of the C library around [`run`] (see `hwloc_lock`), so
//! no other thread of this process holds that library's locks at the fork.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// How the child ended.
#[derive(Debug, PartialEq)]
pub(super) enum Outcome {
    /// The bytes the work returned.
    Sent(Vec<u8>),
    /// The error message the work returned.
    Refused(String),
    /// The child crashed, hung past the deadline or ended without an answer: what happened.
    Died(String),
}

/// Run `work` in a forked child and wait at most `deadline` for its answer. An error only
/// when the child could not be started (no pipe, no fork).
pub(super) fn run(
    deadline: Duration,
    work: impl FnOnce() -> Result<Vec<u8>, String>,
) -> std::io::Result<Outcome> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two new descriptors into the array; close-on-exec so that no
    // program another thread starts meanwhile keeps the write end open.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nothing else.
    let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: the child runs only `child`, which ends in `_exit` (module documentation).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid == 0 {
        drop(rd);
        child(wr, work);
    }
    drop(wr);
    let (answer, complete) = collect(File::from(rd), deadline);
    if !complete {
        // SAFETY: signalling our own child, which we have not reaped yet.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let status = reap(pid);
    if !complete {
        return Ok(Outcome::Died(format!(
            "did not finish within {} s",
            deadline.as_secs_f32()
        )));
    }
    if let Some(st) = status {
        if libc::WIFSIGNALED(st) {
            return Ok(Outcome::Died(signal_text(libc::WTERMSIG(st))));
        }
    }
    Ok(match answer.split_first() {
        Some((b'O', data)) => Outcome::Sent(data.to_vec()),
        Some((b'E', msg)) => Outcome::Refused(String::from_utf8_lossy(msg).into_owned()),
        _ => Outcome::Died(match status {
            Some(st) if libc::WIFEXITED(st) => format!(
                "ended with exit status {} without an answer",
                libc::WEXITSTATUS(st)
            ),
            _ => "ended without an answer".into(),
        }),
    })
}

fn child(wr: OwnedFd, work: impl FnOnce() -> Result<Vec<u8>, String>) -> ! {
    // SAFETY: process-local settings of this child: no core file from a crash (slurmstepd's
    // working directory is not a place for one), and the default action for crash signals,
    // so that handlers inherited from the caller (Slurm's, libFuzzer's) do not run in a copy
    // of it that is about to die.
    unsafe {
        let none = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::setrlimit(libc::RLIMIT_CORE, &none);
        for sig in [
            libc::SIGSEGV,
            libc::SIGBUS,
            libc::SIGILL,
            libc::SIGFPE,
            libc::SIGABRT,
            libc::SIGSYS,
        ] {
            libc::signal(sig, libc::SIG_DFL);
        }
    }
    let answer = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)) {
        Ok(Ok(data)) => [b"O".as_slice(), &data].concat(),
        Ok(Err(msg)) => [b"E".as_slice(), msg.as_bytes()].concat(),
        Err(_) => b"Efailed unexpectedly".to_vec(),
    };
    let _ = File::from(wr).write_all(&answer);
    // SAFETY: ends this child without running the caller's exit handlers or flushing its
    // buffered output a second time.
    unsafe { libc::_exit(0) }
}

/// Read the child's answer until end of file (true) or the deadline (false).
fn collect(mut rd: File, deadline: Duration) -> (Vec<u8>, bool) {
    let end = Instant::now() + deadline;
    let mut answer = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (answer, false);
        }
        let mut p = libc::pollfd {
            fd: rd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = libc::c_int::try_from(left.as_millis().max(1)).unwrap_or(libc::c_int::MAX);
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut p, 1, ms) };
        if n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return (answer, false);
        }
        if n <= 0 {
            continue;
        }
        match rd.read(&mut chunk) {
            Ok(0) => return (answer, true),
            Ok(k) => answer.extend_from_slice(&chunk[..k]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return (answer, false),
        }
    }
}

/// Wait for the child; its status, or None when someone else reaped it (a caller that reaps
/// every child, or one that ignores SIGCHLD).
fn reap(pid: libc::pid_t) -> Option<libc::c_int> {
    loop {
        let mut st = 0;
        // SAFETY: waiting for our own child.
        let r = unsafe { libc::waitpid(pid, &mut st, 0) };
        if r == pid {
            return Some(st);
        }
        if r < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        return None;
    }
}

fn signal_text(sig: libc::c_int) -> String {
    let name = match sig {
        libc::SIGSEGV => "a segmentation fault",
        libc::SIGBUS => "a bus error",
        libc::SIGABRT => "an abort",
        libc::SIGFPE => "an arithmetic exception",
        libc::SIGILL => "an illegal instruction",
        libc::SIGKILL => "SIGKILL (out of memory?)",
        _ => return format!("crashed (signal {sig})"),
    };
    format!("crashed with {name} (signal {sig})")
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: Duration = Duration::from_secs(30);

    #[test]
    fn answers_come_back_whole_even_beyond_a_pipe_buffer() {
        let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let want = big.clone();
        assert_eq!(run(LONG, move || Ok(big)).unwrap(), Outcome::Sent(want));
        assert_eq!(
            run(LONG, || Err("no such level".into())).unwrap(),
            Outcome::Refused("no such level".into())
        );
    }

    #[test]
    fn a_crash_in_the_child_is_an_outcome_not_the_callers_death() {
        let out = run(LONG, || {
            // SAFETY: raising a signal in the forked child only.
            unsafe { libc::raise(libc::SIGSEGV) };
            Ok(vec![])
        })
        .unwrap();
        assert_eq!(
            out,
            Outcome::Died("crashed with a segmentation fault (signal 11)".into())
        );
        let out = run(LONG, || std::process::abort()).unwrap();
        assert_eq!(
            out,
            Outcome::Died("crashed with an abort (signal 6)".into())
        );
        let out = run(LONG, || std::process::exit(3)).unwrap();
        assert_eq!(
            out,
            Outcome::Died("ended with exit status 3 without an answer".into())
        );
    }

    #[test]
    fn a_hung_child_is_killed_at_the_deadline() {
        let t0 = Instant::now();
        let out = run(Duration::from_millis(300), || loop {
            std::thread::sleep(Duration::from_secs(1));
        })
        .unwrap();
        assert_eq!(out, Outcome::Died("did not finish within 0.3 s".into()));
        assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    }
}
