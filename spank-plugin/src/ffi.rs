//! Hand-declared FFI for the SPANK calls the plugin uses.
//!
//! Why not bindgen or the `slurm-spank` crate: they need libclang or a Slurm newer than 22.05
//! (see docs/spank.md). Why `dlsym` instead of link-time symbols: the functions live in the host
//! process (srun, sbatch, slurmstepd link `libslurmfull`), so the plugin must not link its own
//! copy of libslurm, and resolving them at run time lets the crate's unit tests link without
//! Slurm (logging then goes to stderr). Item numbers come from the installed `spank.h` via
//! build.rs, so a Slurm release that reorders `enum spank_item` is picked up by rebuilding.

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;

include!(concat!(env!("OUT_DIR"), "/slurm_consts.rs"));

/// Opaque `spank_t`.
pub type spank_t = *mut c_void;

/// `spank_opt_cb_f`.
pub type OptCb = extern "C" fn(val: c_int, optarg: *const c_char, remote: c_int) -> c_int;

/// `struct spank_option`.
#[repr(C)]
pub struct SpankOption {
    pub name: *const c_char,
    pub arginfo: *const c_char,
    pub usage: *const c_char,
    pub has_arg: c_int,
    pub val: c_int,
    pub cb: Option<OptCb>,
}

/// `enum spank_context`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    Error,
    Local,
    Remote,
    Allocator,
    Slurmd,
    JobScript,
}

pub const ESPANK_SUCCESS: c_int = 0;

type FnOptionRegister = unsafe extern "C" fn(spank_t, *mut SpankOption) -> c_int;
type FnGetItem = unsafe extern "C" fn(spank_t, c_int, ...) -> c_int;
type FnGetenv = unsafe extern "C" fn(spank_t, *const c_char, *mut c_char, c_int) -> c_int;
type FnSetenv = unsafe extern "C" fn(spank_t, *const c_char, *const c_char, c_int) -> c_int;
type FnContext = unsafe extern "C" fn() -> c_int;
type FnLog = unsafe extern "C" fn(*const c_char, ...);

struct Api {
    option_register: Option<FnOptionRegister>,
    get_item: Option<FnGetItem>,
    getenv: Option<FnGetenv>,
    setenv: Option<FnSetenv>,
    context: Option<FnContext>,
    info: Option<FnLog>,
    error: Option<FnLog>,
    verbose: Option<FnLog>,
    debug: Option<FnLog>,
    spank_log: Option<FnLog>,
}

fn sym<T: Copy>(name: &CStr) -> Option<T> {
    // SAFETY: dlsym with RTLD_DEFAULT only looks a name up; the caller picks the matching
    // function-pointer type from the declaration in <slurm/spank.h>.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    if p.is_null() {
        None
    } else {
        assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<*mut c_void>());
        // SAFETY: T is a function pointer type of pointer size (checked above).
        Some(unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) })
    }
}

fn api() -> &'static Api {
    static API: OnceLock<Api> = OnceLock::new();
    API.get_or_init(|| Api {
        option_register: sym(c"spank_option_register"),
        get_item: sym(c"spank_get_item"),
        getenv: sym(c"spank_getenv"),
        setenv: sym(c"spank_setenv"),
        context: sym(c"spank_context"),
        info: sym(c"slurm_info"),
        error: sym(c"slurm_error"),
        verbose: sym(c"slurm_verbose"),
        debug: sym(c"slurm_debug"),
        spank_log: sym(c"slurm_spank_log"),
    })
}

/// Where the plugin is running.
pub fn context() -> Context {
    match api().context {
        // SAFETY: `spank_context(void)`.
        Some(f) => match unsafe { f() } {
            1 => Context::Local,
            2 => Context::Remote,
            3 => Context::Allocator,
            4 => Context::Slurmd,
            5 => Context::JobScript,
            _ => Context::Error,
        },
        None => Context::Error,
    }
}

/// Log levels routed to Slurm's own logging.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    /// `slurm_error`: goes to the user's terminal and the daemon log with "error:".
    Error,
    /// `slurm_spank_log`: error level without the prefix; reaches the srun user.
    User,
    Info,
    Verbose,
    Debug,
}

/// Write one line through Slurm's logging (stderr when not loaded by Slurm).
pub fn log(level: LogLevel, msg: &str) {
    let a = api();
    let f = match level {
        LogLevel::Error => a.error,
        LogLevel::User => a.spank_log.or(a.error),
        LogLevel::Info => a.info,
        LogLevel::Verbose => a.verbose,
        LogLevel::Debug => a.debug,
    };
    let clean: String = msg
        .chars()
        .map(|c| if c == '\0' { ' ' } else { c })
        .collect();
    match (f, CString::new(clean)) {
        (Some(f), Ok(c)) => {
            // SAFETY: printf-style function called with a constant "%s" format and one C string.
            unsafe { f(c"%s".as_ptr(), c.as_ptr()) }
        }
        _ => eprintln!("{msg}"),
    }
}

/// `spank_option_register` for a `'static` option.
pub fn option_register(sp: spank_t, opt: &'static mut SpankOption) -> Result<(), c_int> {
    let f = api().option_register.ok_or(-1)?;
    // SAFETY: `opt` lives for the rest of the process, as Slurm may keep the pointer.
    let rc = unsafe { f(sp, opt as *mut SpankOption) };
    if rc == ESPANK_SUCCESS {
        Ok(())
    } else {
        Err(rc)
    }
}

/// A `uint32_t` item (S_JOB_UID/GID are uid_t/gid_t, also 32 bits on Linux).
pub fn get_u32(sp: spank_t, item: i32) -> Option<u32> {
    let f = api().get_item?;
    let mut v: u32 = 0;
    // SAFETY: the item takes one `uint32_t *` (or uid_t/gid_t *, same size).
    let rc = unsafe { f(sp, item as c_int, &mut v as *mut u32) };
    (rc == ESPANK_SUCCESS).then_some(v)
}

/// S_JOB_LOCAL_TO_GLOBAL_ID: the global task id (MPI rank under srun) of local task `local`.
pub fn local_to_global(sp: spank_t, local: u32) -> Option<u32> {
    let f = api().get_item?;
    let mut g: u32 = 0;
    // SAFETY: the item takes a `uint32_t` (promoted to unsigned int through `...`) and a
    // `uint32_t *`.
    let rc = unsafe {
        f(
            sp,
            item::S_JOB_LOCAL_TO_GLOBAL_ID as c_int,
            local as std::ffi::c_uint,
            &mut g as *mut u32,
        )
    };
    (rc == ESPANK_SUCCESS).then_some(g)
}

/// An `int` item (S_TASK_ID).
pub fn get_int(sp: spank_t, item: i32) -> Option<i32> {
    let f = api().get_item?;
    let mut v: c_int = 0;
    // SAFETY: the item takes one `int *`.
    let rc = unsafe { f(sp, item as c_int, &mut v as *mut c_int) };
    (rc == ESPANK_SUCCESS).then_some(v)
}

/// A `char **` item (S_STEP_ALLOC_CORES, S_SLURM_VERSION...).
pub fn get_str(sp: spank_t, item: i32) -> Option<String> {
    let f = api().get_item?;
    let mut p: *const c_char = std::ptr::null();
    // SAFETY: the item takes one `char **`; Slurm keeps ownership of the string.
    let rc = unsafe { f(sp, item as c_int, &mut p as *mut *const c_char) };
    if rc != ESPANK_SUCCESS || p.is_null() {
        return None;
    }
    // SAFETY: Slurm returns a NUL-terminated string that outlives this call.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// S_JOB_ARGV: `(int *, char ***)`.
pub fn get_argv(sp: spank_t) -> Option<Vec<String>> {
    let f = api().get_item?;
    let mut argc: c_int = 0;
    let mut argv: *const *const c_char = std::ptr::null();
    // SAFETY: S_JOB_ARGV takes `int *` and `char ***`.
    let rc = unsafe {
        f(
            sp,
            item::S_JOB_ARGV as c_int,
            &mut argc as *mut c_int,
            &mut argv as *mut *const *const c_char,
        )
    };
    if rc != ESPANK_SUCCESS || argv.is_null() || argc < 0 {
        return None;
    }
    let mut out = Vec::with_capacity(argc as usize);
    for i in 0..argc as usize {
        // SAFETY: argv has argc valid entries.
        let a = unsafe { *argv.add(i) };
        if a.is_null() {
            break;
        }
        // SAFETY: each entry is a NUL-terminated string.
        out.push(unsafe { CStr::from_ptr(a) }.to_string_lossy().into_owned());
    }
    Some(out)
}

/// Read a variable of the job's environment (remote context).
pub fn getenv(sp: spank_t, name: &str) -> Option<String> {
    let f = api().getenv?;
    let name = CString::new(name).ok()?;
    let mut buf = vec![0u8; 4096];
    loop {
        // SAFETY: buf is writable for buf.len() bytes.
        let rc = unsafe {
            f(
                sp,
                name.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len() as c_int,
            )
        };
        match rc {
            ESPANK_SUCCESS => {
                let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
                return Some(String::from_utf8_lossy(&buf[..end]).into_owned());
            }
            // ESPANK_NOSPACE = ESPANK_ERROR + 5
            3005 if buf.len() < (1 << 20) => buf.resize(buf.len() * 4, 0),
            _ => return None,
        }
    }
}

/// Set a variable in the job's environment (remote context), overwriting.
pub fn setenv(sp: spank_t, name: &str, value: &str) -> Result<(), c_int> {
    let f = api().setenv.ok_or(-1)?;
    let n = CString::new(name).map_err(|_| -1)?;
    let v = CString::new(value).map_err(|_| -1)?;
    // SAFETY: two valid C strings.
    let rc = unsafe { f(sp, n.as_ptr(), v.as_ptr(), 1) };
    if rc == ESPANK_SUCCESS {
        Ok(())
    } else {
        Err(rc)
    }
}

/// `spank_prepend_task_argv(spank_t, int argc, const char *argv[])` (Slurm >= 23.11).
#[cfg(spank_prepend_task_argv)]
type FnPrependTaskArgv = unsafe extern "C" fn(spank_t, c_int, *const *const c_char) -> c_int;

/// Start the task as `words... <its own argv>` with `spank_prepend_task_argv` (Slurm >= 23.11,
/// `task_init` only). Unlike the preload's exec-wrap this also reaches statically linked
/// programs, which ignore `LD_PRELOAD`. Compiled only when the headers built against
/// declare the call (cfg set by build.rs); looked up at run time all the same, so a Slurm
/// without it gives `Err(-1)` instead of a failed load. On `Err` the task is untouched and the
/// caller falls back to the exec-wrap; the failure is logged at verbose level here.
#[cfg(spank_prepend_task_argv)]
pub fn prepend_task_argv(sp: spank_t, words: &[String]) -> Result<(), c_int> {
    let result = prepend_task_argv_with(sym(c"spank_prepend_task_argv"), sp, words);
    if let Err(rc) = result {
        log(
            LogLevel::Verbose,
            &format!(
                "cmlb: spank_prepend_task_argv failed (spank error {rc}); using the exec-wrap"
            ),
        );
    }
    result
}

#[cfg(spank_prepend_task_argv)]
fn prepend_task_argv_with(
    f: Option<FnPrependTaskArgv>,
    sp: spank_t,
    words: &[String],
) -> Result<(), c_int> {
    let f = f.ok_or(-1)?;
    let words = words
        .iter()
        .map(|w| CString::new(w.as_str()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| -1)?;
    let argc = c_int::try_from(words.len()).map_err(|_| -1)?;
    // Leaked on purpose: spank.h does not say whether Slurm copies them, and this forked task
    // process execs right after task_init anyway.
    let mut argv: Vec<*const c_char> = words
        .into_iter()
        .map(|w| w.into_raw().cast_const())
        .collect();
    argv.push(std::ptr::null());
    let argv = argv.leak();
    // SAFETY: argc valid NUL-terminated strings followed by a NULL, alive for the process.
    let rc = unsafe { f(sp, argc, argv.as_ptr()) };
    if rc == ESPANK_SUCCESS {
        Ok(())
    } else {
        Err(rc)
    }
}

/// `plugin_version` check slurmd does: equal major.minor.
#[cfg(test)]
pub fn version_major_minor(v: u32) -> (u32, u32) {
    ((v >> 16) & 0xff, (v >> 8) & 0xff)
}

#[cfg(all(test, spank_prepend_task_argv))]
mod tests {
    use super::*;
    use std::sync::Mutex;

    static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());

    unsafe extern "C" fn fake_prepend(
        _sp: spank_t,
        argc: c_int,
        argv: *const *const c_char,
    ) -> c_int {
        let mut seen = SEEN.lock().unwrap();
        for i in 0..argc as usize {
            // SAFETY: the caller passes argc valid strings.
            seen.push(
                unsafe { CStr::from_ptr(*argv.add(i)) }
                    .to_string_lossy()
                    .into_owned(),
            );
        }
        // SAFETY: the array is NULL-terminated.
        assert!(unsafe { *argv.add(argc as usize) }.is_null());
        ESPANK_SUCCESS
    }

    unsafe extern "C" fn refusing_prepend(_: spank_t, _: c_int, _: *const *const c_char) -> c_int {
        3 // ESPANK_NOT_TASK
    }

    #[test]
    fn prepend_passes_the_words_in_order_and_reports_refusal() {
        let words: Vec<String> = ["/opt/cmlb", "profile", "--out", "/s/k", "--"]
            .map(String::from)
            .to_vec();
        prepend_task_argv_with(Some(fake_prepend), std::ptr::null_mut(), &words).unwrap();
        assert_eq!(*SEEN.lock().unwrap(), words);
        let rc = prepend_task_argv_with(Some(refusing_prepend), std::ptr::null_mut(), &words);
        assert_eq!(rc, Err(3));
        // Outside Slurm (here) the symbol is missing: the caller falls back to the exec-wrap.
        assert_eq!(prepend_task_argv(std::ptr::null_mut(), &words), Err(-1));
        let nul = vec!["a\0b".to_string()];
        assert_eq!(
            prepend_task_argv_with(Some(fake_prepend), std::ptr::null_mut(), &nul),
            Err(-1)
        );
    }
}
