//! Starting the profiled command so that the sampler is attached before its first instruction.
//!
//! The child is forked by `std::process::Command`; in `pre_exec` it reports its pid on one pipe
//! and blocks reading a second pipe. The parent opens the perf events on that pid (with
//! `enable_on_exec`, so counting starts exactly at the execve) and then releases the child.
//! If the setup fails the parent closes the pipe instead, the child's `pre_exec` fails, and the
//! command never runs. `Command` reports exec failures (command not found, not executable).

use crate::error::{ProfileError, Result};
use nix::fcntl::OFlag;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

/// Fork `argv`, run `setup(pid)` while the child waits before exec, then let it exec.
pub fn launch<T>(argv: &[String], setup: impl FnOnce(i32) -> Result<T>) -> Result<(Child, T)> {
    let Some(program) = argv.first() else {
        return Err(ProfileError::Config("no command given to profile".into()));
    };
    let (pid_r, pid_w) = pipe()?;
    let (go_r, go_w) = pipe()?;
    let (pw, gr) = (pid_w.as_raw_fd(), go_r.as_raw_fd());
    let (pr, gw) = (pid_r.as_raw_fd(), go_w.as_raw_fd());
    let mut cmd = Command::new(program);
    cmd.args(&argv[1..]);
    // SAFETY: the closure only calls async-signal-safe functions (prctl, close, getpid, write,
    // read).
    unsafe {
        cmd.pre_exec(move || {
            // Transparent huge pages off for the profiled program (inherited across exec and
            // fork): the load vector counts first-touch page faults, and one 2 MiB fault would
            // stand for 512 pages of memory (with THP `always`, the Debian kernel's default, a
            // thread owning 4x the memory of the others did not top load.csv). Failure is
            // harmless: the program then runs as it would have.
            libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
            // The parent's ends: the child must not hold the write end it waits on, or a
            // parent that closes it (setup failed) would never be seen.
            libc::close(pr);
            libc::close(gw);
            let pid = libc::getpid().to_ne_bytes();
            if libc::write(pw, pid.as_ptr().cast(), pid.len()) != pid.len() as isize {
                return Err(io::Error::last_os_error());
            }
            let mut go = 0u8;
            loop {
                let n = libc::read(gr, (&mut go as *mut u8).cast(), 1);
                if n == 1 && go == 1 {
                    return Ok(());
                }
                if n < 0 && *libc::__errno_location() == libc::EINTR {
                    continue;
                }
                return Err(io::Error::other("the profiler could not attach"));
            }
        });
    }
    let spawner = std::thread::spawn(move || {
        let r = cmd.spawn();
        drop(cmd);
        drop(pid_w);
        drop(go_r);
        r
    });
    let mut pid_r = std::fs::File::from(pid_r);
    let mut buf = [0u8; 4];
    let got_pid = pid_r.read_exact(&mut buf).is_ok();
    if !got_pid {
        // The fork itself failed: the spawner holds the reason.
        let e = match spawner.join() {
            Ok(Err(e)) => e,
            _ => io::Error::other("the child exited before reporting its pid"),
        };
        return Err(command_error(program, e));
    }
    let pid = i32::from_ne_bytes(buf);
    let mut go_w = std::fs::File::from(go_w);
    let setup_result = setup(pid);
    if setup_result.is_ok() {
        // If the write fails the child is gone; spawn() below reports why.
        let _ = go_w.write_all(&[1]);
    }
    drop(go_w);
    let spawned = spawner
        .join()
        .map_err(|_| ProfileError::Config("the process-spawning thread panicked".into()))?;
    match (setup_result, spawned) {
        (Ok(t), Ok(child)) => Ok((child, t)),
        (Err(e), _) => Err(e),
        (Ok(_), Err(e)) => Err(command_error(program, e)),
    }
}

fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    nix::unistd::pipe2(OFlag::O_CLOEXEC)
        .map_err(|e| ProfileError::io("pipe", io::Error::from_raw_os_error(e as i32)))
}

fn command_error(program: &str, e: io::Error) -> ProfileError {
    let reason = match e.kind() {
        io::ErrorKind::NotFound => {
            if program.contains('/') {
                "no such file".to_string()
            } else {
                "command not found in PATH".to_string()
            }
        }
        io::ErrorKind::PermissionDenied => "permission denied (not executable?)".to_string(),
        _ => e.to_string(),
    };
    ProfileError::Command {
        command: program.to_string(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_sees_the_child_before_exec() {
        let argv = vec!["true".to_string()];
        let (mut child, pid) = launch(&argv, |pid| {
            // The child has not exec'd yet: its comm is still the test binary's.
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
            assert_ne!(comm.trim(), "true");
            Ok(pid)
        })
        .unwrap();
        assert_eq!(child.id() as i32, pid);
        assert!(child.wait().unwrap().success());
    }

    #[test]
    fn missing_command_is_reported() {
        let argv = vec!["/nonexistent/cmlb-no-such-program".to_string()];
        let err = launch(&argv, |_| Ok(())).unwrap_err().to_string();
        assert!(
            err.contains("cmlb-no-such-program") && err.contains("no such file"),
            "{err}"
        );
        let argv = vec!["cmlb-no-such-program-xyz".to_string()];
        let err = launch(&argv, |_| Ok(())).unwrap_err().to_string();
        assert!(err.contains("not found in PATH"), "{err}");
    }

    #[test]
    fn failed_setup_never_runs_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let argv = vec!["touch".to_string(), marker.to_string_lossy().into_owned()];
        let err = launch(&argv, |_| -> Result<()> {
            Err(ProfileError::Config("setup refused".into()))
        })
        .unwrap_err();
        assert!(err.to_string().contains("setup refused"));
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!marker.exists());
    }
}
