//! The system calls and lookups the plugin makes besides Slurm's: names, the plugin's own
//! directory, its companion files, ending a task.

use crate::ffi::{self, LogLevel};
use std::path::PathBuf;

/// Log `msg` and end the task with exit status 1 before it execs. Why not `return -1`: Slurm
/// honours a failing `task_init` only for a `required` plugin and ignores it for an `optional`
/// one (the shipped plugstack line), so strict mode would only log. `task_init` runs in the
/// task's own process after fork, where slurmstepd itself ends a task whose required plugin
/// failed the same way (`_exit(1)`).
pub(crate) fn fail_task(msg: &str) -> ! {
    ffi::log(LogLevel::Error, msg);
    // SAFETY: _exit ends only this forked task process; nothing here needs unwinding.
    unsafe { libc::_exit(1) }
}

pub(crate) fn user_name(uid: u32) -> String {
    let mut buf = vec![0u8; 4096];
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut res: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwuid_r with a caller-owned buffer.
    let rc =
        unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut res) };
    if rc == 0 && !res.is_null() && !pw.pw_name.is_null() {
        // SAFETY: pw_name points into buf, NUL-terminated.
        return unsafe { std::ffi::CStr::from_ptr(pw.pw_name) }
            .to_string_lossy()
            .into_owned();
    }
    uid.to_string()
}

pub(crate) fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buffer of the given size.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0 {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        return String::from_utf8_lossy(&buf[..end]).into_owned();
    }
    "localhost".into()
}

/// The directory this plugin was loaded from (companion files are looked up there).
pub(crate) fn plugin_dir() -> PathBuf {
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr on the address of one of our own functions.
    let ok = unsafe { libc::dladdr(plugin_dir as *const libc::c_void, &mut info) };
    if ok != 0 && !info.dli_fname.is_null() {
        // SAFETY: dli_fname is a NUL-terminated path owned by the loader.
        let p = PathBuf::from(
            unsafe { std::ffi::CStr::from_ptr(info.dli_fname) }
                .to_string_lossy()
                .into_owned(),
        );
        if let Some(d) = p.parent() {
            return d.to_path_buf();
        }
    }
    PathBuf::from("/usr/lib/slurm")
}
