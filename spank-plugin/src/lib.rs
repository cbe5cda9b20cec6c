//! `cmlb_spank.so`: the Slurm SPANK plugin adding `--cmlb-map` to srun/sbatch/salloc.
//!
//! Lifecycle (docs/spank.md has the full story):
//! * `slurm_spank_init` (local, remote, allocator): parse the plugstack.conf arguments and
//!   register `--cmlb-map` (the static option table is ignored by sbatch/salloc).
//! * option callback + `slurm_spank_init_post_opt` (local, allocator): validate `--cmlb-map`
//!   and `CMLB_MAP`, so a bad value stops srun/sbatch before anything runs.
//! * `slurm_spank_user_init` (remote, once per step per node, as the job user): profile
//!   location, topology, plan for every local task.
//! * `slurm_spank_task_init` (remote, in each task before exec, as the job user): CPU mask,
//!   OpenMP variables, preload library, or the exec-wrap that runs the task under `cmlb profile`.
//!
//! Every exported callback runs inside `catch_unwind`: a panic is logged and turned into
//! "run unpinned" (or a step failure with `strict=1`), never unwound into Slurm. The plugin
//! starts no threads and never blocks in srun/sbatch.

mod batch;
mod ffi;
pub use cmlb_slurm::options;
mod remote;
mod scratch;
mod slog;
mod sys;

use ffi::{spank_t, Context, LogLevel};
use options::SiteConf;
use std::ffi::{c_char, c_int, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

/// `plugin_name`: Slurm names the option's environment variable after it
/// (`SLURM_SPANK__SLURM_SPANK_OPTION_cmlb_cmlb_map`).
#[no_mangle]
#[used]
pub static plugin_name: [u8; 5] = *b"cmlb\0";
/// `plugin_type`.
#[no_mangle]
#[used]
pub static plugin_type: [u8; 6] = *b"spank\0";
/// `plugin_version`: slurmd/srun load the plugin only if its major.minor equals their own.
#[no_mangle]
#[used]
pub static plugin_version: u32 = ffi::SLURM_VERSION_NUMBER;
/// `spank_plugin_version` (SPANK_PLUGIN's second argument).
#[no_mangle]
#[used]
pub static spank_plugin_version: u32 = 1;

/// Name of the user option (`--cmlb-map`).
pub const OPTION: &str = "cmlb-map";
/// Environment switch with the same syntax.
pub const ENV_SWITCH: &str = "CMLB_MAP";

/// Process-wide plugin state. Slurm calls plugins from one thread; the mutex is only there to
/// make the statics sound.
pub(crate) struct State {
    pub site: SiteConf,
    /// The plugstack.conf arguments were invalid: the plugin stays off.
    pub site_broken: bool,
    /// `--cmlb-map` as given (raw, parsed), set by the option callback.
    pub option: Option<(String, options::MapOpts)>,
    /// The option callback rejected a value (already reported).
    pub option_bad: bool,
    pub step: Option<remote::StepState>,
}

pub(crate) static STATE: Mutex<Option<State>> = Mutex::new(None);

pub(crate) fn with_state<R>(f: impl FnOnce(&mut State) -> R) -> R {
    let mut g = STATE.lock().unwrap_or_else(|p| p.into_inner());
    let s = g.get_or_insert_with(|| State {
        site: SiteConf::default(),
        site_broken: false,
        option: None,
        option_bad: false,
        step: None,
    });
    f(s)
}

/// Run a callback body; a panic becomes a logged error and `on_panic`.
fn guarded(name: &str, on_panic: c_int, f: impl FnOnce() -> c_int) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(rc) => rc,
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            ffi::log(
                LogLevel::Error,
                &format!("cmlb: internal error in {name}: {msg}; continuing without cmlb"),
            );
            on_panic
        }
    }
}

fn args_of(ac: c_int, av: *const *const c_char) -> Vec<String> {
    if av.is_null() || ac <= 0 {
        return Vec::new();
    }
    (0..ac as usize)
        .filter_map(|i| {
            // SAFETY: Slurm passes `ac` valid C strings.
            let p = unsafe { *av.add(i) };
            (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
        })
        .collect()
}

extern "C" fn option_cb(_val: c_int, optarg: *const c_char, remote: c_int) -> c_int {
    guarded("the --cmlb-map callback", -1, || {
        let raw = if optarg.is_null() {
            String::new()
        } else {
            // SAFETY: Slurm passes the option argument as a C string.
            unsafe { CStr::from_ptr(optarg) }
                .to_string_lossy()
                .into_owned()
        };
        match options::parse_map(&raw) {
            Ok(o) => {
                with_state(|s| s.option = Some((raw, o)));
                0
            }
            Err(e) if remote == 0 => {
                // In srun/sbatch/salloc: the user's typo stops the command before anything runs.
                ffi::log(
                    LogLevel::User,
                    &options::usage_error("--cmlb-map", &raw, &e),
                );
                with_state(|s| s.option_bad = true);
                -1
            }
            Err(e) => {
                // In slurmstepd the value was already checked by srun, so this only happens when
                // the login node's cmlb and this node's differ. A failing option callback there
                // fails the step's launch; user_init instead runs the step unpinned with one
                // warning (or fails its tasks under strict=1), as for every other problem.
                ffi::log(
                    LogLevel::Error,
                    &options::usage_error("--cmlb-map", &raw, &e),
                );
                with_state(|s| s.option_bad = true);
                0
            }
        }
    })
}

/// `slurm_spank_init`: parse plugstack.conf arguments, register `--cmlb-map`.
#[no_mangle]
pub extern "C" fn slurm_spank_init(sp: spank_t, ac: c_int, av: *const *const c_char) -> c_int {
    guarded("slurm_spank_init", 0, || {
        let ctx = ffi::context();
        if !matches!(ctx, Context::Local | Context::Remote | Context::Allocator) {
            return 0;
        }
        slog::init();
        // Panics are caught by `guarded` and reported through Slurm's log; the default hook
        // would also write to the stderr of srun or slurmstepd. Where it happened: debug log.
        std::panic::set_hook(Box::new(|info| {
            ffi::log(LogLevel::Debug, &format!("cmlb: {info}"));
        }));
        let args = args_of(ac, av);
        match options::parse_site(&args) {
            Ok(site) => with_state(|s| s.site = site),
            Err(e) => {
                // A broken site line must not take every job down: report it loudly and stay off.
                ffi::log(
                    LogLevel::Error,
                    &format!("cmlb: plugstack.conf: {e}; the cmlb plugin is disabled"),
                );
                with_state(|s| s.site_broken = true);
            }
        }
        // Leaked once per process: Slurm keeps pointers to the option for its lifetime.
        let usage = Box::leak(
            std::ffi::CString::new(options::option_usage())
                .unwrap_or_default()
                .into_boxed_c_str(),
        );
        let opt = Box::leak(Box::new(ffi::SpankOption {
            name: c"cmlb-map".as_ptr(),
            arginfo: c"MODE[:k=v,...]".as_ptr(),
            usage: usage.as_ptr(),
            has_arg: 1,
            val: 0,
            cb: Some(option_cb),
        }));
        if let Err(rc) = ffi::option_register(sp, opt) {
            ffi::log(
                LogLevel::Error,
                &format!("cmlb: could not register --cmlb-map (spank error {rc})"),
            );
        }
        0
    })
}

/// `slurm_spank_init_post_opt`: in srun/sbatch/salloc, reject a bad `CMLB_MAP` before anything
/// runs (a bad `--cmlb-map` was already rejected by the option callback).
#[no_mangle]
pub extern "C" fn slurm_spank_init_post_opt(
    _sp: spank_t,
    _ac: c_int,
    _av: *const *const c_char,
) -> c_int {
    guarded("slurm_spank_init_post_opt", 0, || {
        if !matches!(ffi::context(), Context::Local | Context::Allocator) {
            return 0;
        }
        let (bad_opt, has_opt) = with_state(|s| (s.option_bad, s.option.is_some()));
        if bad_opt {
            return -1;
        }
        if has_opt {
            return 0;
        }
        match std::env::var(ENV_SWITCH) {
            Ok(v) if !v.trim().is_empty() => match options::parse_map(&v) {
                Ok(_) => 0,
                Err(e) => {
                    ffi::log(LogLevel::User, &options::usage_error(ENV_SWITCH, &v, &e));
                    -1
                }
            },
            _ => 0,
        }
    })
}

/// `slurm_spank_user_init`: once per step per node, as the job user.
#[no_mangle]
pub extern "C" fn slurm_spank_user_init(
    sp: spank_t,
    _ac: c_int,
    _av: *const *const c_char,
) -> c_int {
    guarded("slurm_spank_user_init", 0, || {
        if ffi::context() != Context::Remote {
            return 0;
        }
        remote::user_init(sp)
    })
}

/// `slurm_spank_task_init`: in each task, before exec, as the job user.
#[no_mangle]
pub extern "C" fn slurm_spank_task_init(
    sp: spank_t,
    _ac: c_int,
    _av: *const *const c_char,
) -> c_int {
    guarded("slurm_spank_task_init", 0, || {
        if ffi::context() != Context::Remote {
            return 0;
        }
        remote::task_init(sp)
    })
}

/// The effective mode for a step: `--cmlb-map`, else `CMLB_MAP`, else the site default.
pub(crate) fn effective(
    option: Option<options::MapOpts>,
    env: Option<&str>,
    site: &SiteConf,
) -> Result<options::MapOpts, String> {
    if let Some(o) = option {
        return Ok(o);
    }
    if let Some(v) = env.filter(|v| !v.trim().is_empty()) {
        return options::parse_map(v).map_err(|e| options::usage_error(ENV_SWITCH, v, &e));
    }
    let mut o = options::MapOpts::off();
    o.mode = site.default;
    o.from_site = true;
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use options::Mode;

    #[test]
    fn precedence_option_env_site() {
        let site = SiteConf {
            default: Mode::Apply,
            ..SiteConf::default()
        };
        let opt = options::parse_map("off").unwrap();
        assert_eq!(
            effective(Some(opt), Some("profile"), &site).unwrap().mode,
            Mode::Off
        );
        assert_eq!(
            effective(None, Some("profile"), &site).unwrap().mode,
            Mode::Profile
        );
        assert_eq!(effective(None, None, &site).unwrap().mode, Mode::Apply);
        assert!(effective(None, None, &site).unwrap().from_site);
        assert!(!effective(None, Some("apply"), &site).unwrap().from_site);
        assert_eq!(
            effective(None, Some(" "), &SiteConf::default())
                .unwrap()
                .mode,
            Mode::Off
        );
        let e = effective(None, Some("bogus"), &site).unwrap_err();
        assert!(e.contains("CMLB_MAP") && e.contains("bogus"), "{e}");
    }

    #[test]
    fn exported_version_matches_headers() {
        let (maj, min) = ffi::version_major_minor(plugin_version);
        assert!(maj >= 20, "Slurm major {maj}");
        assert_eq!(&plugin_name[..4], b"cmlb");
        let _ = min;
    }

    #[test]
    fn panics_do_not_escape() {
        let rc = guarded("test", -7, || panic!("boom"));
        assert_eq!(rc, -7);
    }
}
