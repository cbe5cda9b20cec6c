//! Remote context (slurmstepd): per-step planning in user_init (once per step per node, as the
//! job user), per-task binding in task_init (in the task process, before exec, as the job user).

use crate::ffi::{self, item, spank_t, LogLevel};
use crate::options::{self, MapOpts, Mode, SiteConf};
use crate::{effective, with_state};
use mapper::binding::{self, BindMode};
use mapper::profile::Profile;
use mapper::strategy::{self, MapInput};
use mapper::topology::{format_cpu_list, parse_cpu_list, Topology};
use std::path::{Path, PathBuf};

/// Variables read by the preload library's exec-wrap (profile mode, apply pre-run).
const ENV_WRAP: &str = "CMLB_EXEC_WRAP";
const ENV_WRAP_PID: &str = "CMLB_EXEC_PID";
const WRAP_SEP: &str = "\x1f";

/// What one local task gets.
#[derive(Debug, Clone)]
pub(crate) enum TaskAction {
    /// Nothing (dry-run, or a task beyond the plan).
    Nothing,
    /// Pin: task mask = `share`, thread k on `pus[k]`.
    Pin { pus: Vec<u32>, share: Vec<u32> },
    /// Re-exec the task as `words... <program> <args>` (profiler or pre-run), inside `share`.
    Wrap { words: Vec<String>, share: Vec<u32> },
}

/// What user_init decided for this step on this node.
#[derive(Debug, Clone)]
pub(crate) struct StepState {
    opts: MapOpts,
    preload: PathBuf,
    /// strict=1 and planning failed: every task fails with this message.
    fail: Option<String>,
    tasks: Vec<TaskAction>,
}

/// A reason to run unpinned (or fail with strict=1).
#[derive(Debug)]
struct Skip(String);

impl<E: std::fmt::Display> From<E> for Skip {
    fn from(e: E) -> Self {
        Skip(e.to_string())
    }
}

fn warn(msg: &str) {
    ffi::log(LogLevel::User, msg);
}

pub(crate) fn user_init(sp: spank_t) -> i32 {
    let (site, broken, option, option_bad) = with_state(|s| {
        s.step = None;
        (
            s.site.clone(),
            s.site_broken,
            s.option.as_ref().map(|o| o.1.clone()),
            s.option_bad,
        )
    });
    if broken {
        return 0;
    }
    if option_bad {
        // The value was logged by the option callback; falling back to CMLB_MAP or the site
        // default would apply something the user did not ask for.
        return degrade(&site, "--cmlb-map was not understood here");
    }
    let env = ffi::getenv(sp, crate::ENV_SWITCH);
    let opts = match effective(option, env.as_deref(), &site) {
        Ok(o) => o,
        Err(e) => return degrade(&site, &e),
    };
    if opts.mode == Mode::Off {
        return 0;
    }
    // The batch script, extern and interactive steps are not the user's program: binding them
    // would also leak OMP_* variables into every srun of the script.
    match ffi::get_u32(sp, item::S_JOB_STEPID) {
        Some(id) if id < 0xffff_fff0 => {}
        _ => return 0,
    }
    match plan_step(sp, &site, &opts) {
        Ok(st) => {
            with_state(|s| s.step = Some(st));
            0
        }
        Err(Skip(e)) => degrade(&site, &e),
    }
}

fn degrade(site: &SiteConf, msg: &str) -> i32 {
    if site.strict {
        ffi::log(
            LogLevel::Error,
            &format!("cmlb: {msg} (strict=1: failing the step)"),
        );
        // A failing user_init makes srun report "launch failed" yet exit 0 (22.05), so the
        // tasks fail instead: task_init errors become the step's non-zero exit status.
        with_state(|s| {
            s.step = Some(StepState {
                opts: MapOpts::off(),
                preload: PathBuf::new(),
                fail: Some(msg.to_string()),
                tasks: Vec::new(),
            })
        });
        0
    } else {
        warn(&format!("cmlb: warning: {msg}; the step runs unpinned"));
        0
    }
}

fn plan_step(sp: spank_t, site: &SiteConf, opts: &MapOpts) -> Result<StepState, Skip> {
    let need =
        |what: &str, v: Option<u32>| v.ok_or_else(|| Skip(format!("Slurm did not give {what}")));
    let job = need("the job id", ffi::get_u32(sp, item::S_JOB_ID))?;
    let step = need("the step id", ffi::get_u32(sp, item::S_JOB_STEPID))?;
    let uid = need("the job uid", ffi::get_u32(sp, item::S_JOB_UID))?;
    let ntasks = need(
        "the local task count",
        ffi::get_u32(sp, item::S_JOB_LOCAL_TASK_COUNT),
    )? as usize;
    let argv = ffi::get_argv(sp)
        .filter(|a| !a.is_empty())
        .ok_or_else(|| Skip("Slurm did not give the command".into()))?;
    let cores = ffi::get_str(sp, item::S_STEP_ALLOC_CORES)
        .ok_or_else(|| Skip("Slurm did not give S_STEP_ALLOC_CORES".into()))?;

    let spec = site.topology.clone().unwrap_or_else(|| "live".into());
    let machine = Topology::load(&spec)?;
    let core_ids =
        parse_cpu_list(&cores).map_err(|e| Skip(format!("S_STEP_ALLOC_CORES '{cores}': {e}")))?;
    let pus = binding::pus_of_logical_cores(&machine, &core_ids)
        .map_err(|e| Skip(format!("topology mismatch: step cores {cores}: {e}")))?;
    let node = machine.restrict(&pus)?;
    let shares = binding::task_shares(&node, ntasks.max(1));

    let omp_threads: Option<usize> = ffi::getenv(sp, "OMP_NUM_THREADS")
        .and_then(|v| v.trim().parse().ok())
        .filter(|n| *n > 0);
    let threads = omp_threads.unwrap_or(shares[0].len());
    // The job's environment has the name already; a passwd lookup may block on LDAP/SSSD.
    let user = ffi::getenv(sp, "SLURM_JOB_USER")
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| user_name(uid));
    let nodename = ffi::getenv(sp, "SLURMD_NODENAME").unwrap_or_else(host_name);
    let scratch = PathBuf::from(options::expand_scratch(
        &site.scratch,
        &user,
        job,
        &nodename,
    ));
    let key = options::profile_key(&argv, threads, &cores);
    let dir0 = scratch.join(&key);
    let task_dir = |t: usize| {
        if t == 0 {
            dir0.clone()
        } else {
            scratch.join(format!("{key}.task{t}"))
        }
    };
    let dir = plugin_dir();
    let preload = find_file(
        site.preload.as_deref(),
        &dir,
        &["libcmlb_preload.so", "cmlb_preload.so"],
    )
    .ok_or_else(|| {
        Skip(format!(
            "libcmlb_preload.so not found next to the plugin ({}); set preload= in plugstack.conf",
            dir.display()
        ))
    });
    let strategy_name = opts
        .strategy
        .clone()
        .unwrap_or_else(|| strategy::DEFAULT.to_string());

    match opts.mode {
        Mode::Off => unreachable!("checked by the caller"),
        Mode::Profile => {
            let cmlb = cmlb_binary(site, &dir)?;
            ensure_scratch(&scratch, uid)?;
            let tasks = (0..ntasks)
                .map(|t| {
                    let mut w = vec![
                        cmlb.display().to_string(),
                        "profile".into(),
                        "--out".into(),
                        task_dir(t).display().to_string(),
                    ];
                    if !site.strict {
                        // A profiling problem must not fail the user's job.
                        w.push("--run-anyway".into());
                    }
                    if let Some(b) = &site.backend {
                        w.extend(["--backend".into(), b.clone()]);
                    }
                    if let Some(p) = opts.period {
                        w.extend(["--period".into(), p.to_string()]);
                    }
                    if opts.time_set {
                        // Sampling window only: the program itself runs to its end.
                        w.extend(["--duration".into(), opts.time.to_string()]);
                    }
                    w.push("--".into());
                    TaskAction::Wrap {
                        words: w,
                        share: shares[t].clone(),
                    }
                })
                .collect();
            warn(&format!(
                "cmlb: profiling {} ({} task{}, cores {cores}); profile: {}",
                argv[0],
                ntasks,
                if ntasks == 1 { "" } else { "s" },
                dir0.display()
            ));
            Ok(StepState {
                opts: opts.clone(),
                preload: preload?,
                fail: None,
                tasks,
            })
        }
        Mode::Apply => {
            let explicit = opts.profile.clone();
            if explicit.is_none() && std::fs::symlink_metadata(&scratch).is_ok() {
                check_scratch(&scratch, uid)?;
            }
            let base = explicit.clone().unwrap_or(dir0.clone());
            if !base.join("profile.yaml").exists() {
                if let Some(p) = explicit {
                    return Err(Skip(format!("profile={} has no profile.yaml", p.display())));
                }
                if opts.from_site {
                    // The pre-run starts the program twice: only for users who asked for apply,
                    // never for every job of a site whose default is apply.
                    ffi::log(
                        LogLevel::Verbose,
                        &format!(
                            "cmlb: no profile for {} yet (site default apply): running unpinned; \
                             srun --cmlb-map=profile or --cmlb-map=apply makes one",
                            argv[0]
                        ),
                    );
                    return Ok(StepState {
                        opts: opts.clone(),
                        preload: PathBuf::new(),
                        fail: None,
                        tasks: vec![TaskAction::Nothing; ntasks],
                    });
                }
                // No profile yet: each task profiles itself briefly, then runs pinned (cmlb run).
                let cmlb = cmlb_binary(site, &dir)?;
                ensure_scratch(&scratch, uid)?;
                let tasks = (0..ntasks)
                    .map(|t| {
                        let mut w = vec![
                            cmlb.display().to_string(),
                            "run".into(),
                            "--time".into(),
                            opts.time.to_string(),
                            "--save-profile".into(),
                            task_dir(t).display().to_string(),
                            "--strategy".into(),
                            strategy_name.clone(),
                            "--bind".into(),
                            opts.bind.name().into(),
                            "--topology".into(),
                            spec.clone(),
                        ];
                        if let Some(b) = &site.backend {
                            w.extend(["--backend".into(), b.clone()]);
                        }
                        if let Some(p) = opts.period {
                            w.extend(["--period".into(), p.to_string()]);
                        }
                        w.push("--".into());
                        TaskAction::Wrap {
                            words: w,
                            share: shares[t].clone(),
                        }
                    })
                    .collect();
                warn(&format!(
                    "cmlb: no profile for {} in {}: profiling for {} s first (pre-run), then running pinned",
                    argv[0],
                    scratch.display(),
                    opts.time
                ));
                return Ok(StepState {
                    opts: opts.clone(),
                    preload: preload?,
                    fail: None,
                    tasks,
                });
            }
            // bind=omp pins through the environment alone and needs no library.
            let preload = match opts.bind {
                BindMode::Omp => PathBuf::new(),
                _ => preload?,
            };
            let mut tasks = Vec::with_capacity(ntasks);
            let mut summary = None;
            for (t, share) in shares.iter().enumerate().take(ntasks) {
                let tdir = if explicit.is_none() && task_dir(t).join("profile.yaml").exists() {
                    task_dir(t)
                } else {
                    base.clone()
                };
                check_profile_files(&tdir)?;
                let prof = Profile::read_dir(&tdir)
                    .map_err(|e| Skip(format!("profile {} is unusable: {e}", tdir.display())))?;
                let n = prof.comm.n();
                if let Some(m) = omp_threads {
                    if m != n {
                        return Err(Skip(format!(
                            "profile {} has {n} threads but OMP_NUM_THREADS={m}; profile again with --cmlb-map=profile",
                            tdir.display()
                        )));
                    }
                }
                let topo = node.restrict(share)?;
                let input = MapInput {
                    comm: &prof.comm,
                    load: &prof.load,
                    topology: &topo,
                    seed: 1,
                };
                let plan = strategy::compute_plan(&strategy_name, &input)?;
                if t == 0 {
                    let compact = strategy::compute_plan("compact", &input)?;
                    summary = Some(format!(
                        "cmlb: apply: strategy {}, profile {} ({n} threads), {ntasks} task{} on cores {cores} (PUs {}); task 0: RemoteComm {:.4e} (compact {:.4e}), Load_std {:.4e} (compact {:.4e}){}",
                        plan.strategy,
                        tdir.display(),
                        if ntasks == 1 { "" } else { "s" },
                        format_cpu_list(&pus),
                        plan.metrics.remote_comm,
                        compact.metrics.remote_comm,
                        plan.metrics.load_std,
                        compact.metrics.load_std,
                        if opts.dryrun { " [dry run: nothing bound]" } else { "" }
                    ));
                }
                let thread_pus = binding::thread_pus(&plan);
                if opts.verbose {
                    if let Some(p) = &thread_pus {
                        warn(&format!(
                            "cmlb: task {t}: thread->PU {}",
                            p.iter()
                                .enumerate()
                                .map(|(k, u)| format!("{k}:{u}"))
                                .collect::<Vec<_>>()
                                .join(" ")
                        ));
                    }
                }
                if opts.dryrun {
                    let out = scratch
                        .join("dryrun")
                        .join(format!("{job}.{step}"))
                        .join(format!("task{t}.plan.yaml"));
                    ensure_scratch(&scratch, uid)?;
                    std::fs::create_dir_all(out.parent().expect("has parent"))?;
                    plan.write_yaml(&out)?;
                    warn(&format!(
                        "cmlb: dry run: plan of task {t} written to {}",
                        out.display()
                    ));
                    tasks.push(TaskAction::Nothing);
                    continue;
                }
                tasks.push(match thread_pus {
                    Some(p) => TaskAction::Pin {
                        pus: p,
                        share: share.clone(),
                    },
                    None => TaskAction::Nothing,
                });
            }
            if let Some(s) = summary {
                warn(&s);
            }
            Ok(StepState {
                opts: opts.clone(),
                preload,
                fail: None,
                tasks,
            })
        }
    }
}

pub(crate) fn task_init(sp: spank_t) -> i32 {
    let Some(st) = with_state(|s| s.step.clone()) else {
        return 0;
    };
    let strict = with_state(|s| s.site.strict);
    if let Some(msg) = &st.fail {
        fail_task(&format!("cmlb: strict=1: task not started ({msg})"));
    }
    let Some(t) = ffi::get_int(sp, item::S_TASK_ID) else {
        return degrade_task(strict, "Slurm did not give the local task id");
    };
    let Some(action) = st.tasks.get(t as usize) else {
        return 0;
    };
    let pid = std::process::id().to_string();
    let preload = st.preload.display().to_string();
    let existing = ffi::getenv(sp, "LD_PRELOAD");
    let set = |k: &str, v: &str| {
        if let Err(rc) = ffi::setenv(sp, k, v) {
            warn(&format!(
                "cmlb: warning: cannot set {k} in task {t} (spank error {rc})"
            ));
        }
    };
    match action {
        TaskAction::Nothing => 0,
        TaskAction::Pin { pus, share } => {
            if let Err(e) = set_affinity(share) {
                return degrade_task(
                    strict,
                    &format!(
                        "task {t}: cannot set the CPU mask {}: {e}",
                        format_cpu_list(share)
                    ),
                );
            }
            let omp_set = ffi::getenv(sp, "OMP_NUM_THREADS").is_some();
            for (k, v) in binding::task_env(pus, st.opts.bind, omp_set) {
                set(&k, &v);
            }
            if st.opts.bind != BindMode::Omp {
                set(
                    "LD_PRELOAD",
                    &binding::ld_preload_with(existing.as_deref(), &preload),
                );
                set(binding::ENV_PID, &pid);
                if st.opts.verbose {
                    set(binding::ENV_VERBOSE, "1");
                }
            }
            0
        }
        TaskAction::Wrap { words, share } => {
            if let Err(e) = set_affinity(share) {
                return degrade_task(
                    strict,
                    &format!(
                        "task {t}: cannot set the CPU mask {}: {e}",
                        format_cpu_list(share)
                    ),
                );
            }
            // Slurm >= 23.11: start the task as `words... program args` (reaches static
            // programs too); on any error fall back to the preload's exec-wrap below.
            #[cfg(spank_prepend_task_argv)]
            if ffi::prepend_task_argv(sp, words).is_ok() {
                return 0;
            }
            set(ENV_WRAP, &words.join(WRAP_SEP));
            set(ENV_WRAP_PID, &pid);
            set(
                "LD_PRELOAD",
                &binding::ld_preload_with(existing.as_deref(), &preload),
            );
            0
        }
    }
}

fn degrade_task(strict: bool, msg: &str) -> i32 {
    if strict {
        fail_task(&format!("cmlb: {msg} (strict=1: failing the task)"));
    } else {
        warn(&format!("cmlb: warning: {msg}; the task runs unpinned"));
        0
    }
}

/// Log `msg` and end the task with exit status 1 before it execs. Why not `return -1`: Slurm
/// honours a failing `task_init` only for a `required` plugin and ignores it for an `optional`
/// one (the shipped plugstack line), so strict mode would only log. `task_init` runs in the
/// task's own process after fork, where slurmstepd itself ends a task whose required plugin
/// failed the same way (`_exit(1)`).
fn fail_task(msg: &str) -> ! {
    ffi::log(LogLevel::Error, msg);
    // SAFETY: _exit ends only this forked task process; nothing here needs unwinding.
    unsafe { libc::_exit(1) }
}

fn set_affinity(pus: &[u32]) -> std::io::Result<()> {
    // SAFETY: cpu_set_t is plain data; indexes are range-checked before CPU_SET.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
        for &p in pus {
            if p as usize >= max {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("CPU {p} out of range"),
                ));
            }
            libc::CPU_SET(p as usize, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Create the scratch directory (we run as the job user here) and check it ([`check_scratch`]),
/// so nobody can redirect the user's profiles.
fn ensure_scratch(dir: &Path, uid: u32) -> Result<(), Skip> {
    use std::os::unix::fs::DirBuilderExt;
    if let Err(e) = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
    {
        return Err(Skip(format!(
            "scratch directory {} cannot be created: {e}",
            dir.display()
        )));
    }
    check_scratch(dir, uid)?;
    // A writability check now gives one clear message instead of a failed profiler later.
    tempfile_probe(dir).map_err(|e| {
        Skip(format!(
            "scratch directory {} is not writable: {e}",
            dir.display()
        ))
    })
}

/// Refuse a scratch directory another user could swap or fill: it must be the job user's own
/// directory (not a symlink), and every directory above it must belong to root or the job user
/// and, if others may write to it, be sticky like /tmp. Why: with the default `/tmp/cmlb-%u`,
/// anyone could create the directory first and plant a profile (or a FIFO that blocks
/// slurmstepd) where apply looks.
fn check_scratch(dir: &Path, uid: u32) -> Result<(), Skip> {
    use std::os::unix::fs::MetadataExt;
    let md = std::fs::symlink_metadata(dir)
        .map_err(|e| Skip(format!("scratch directory {}: {e}", dir.display())))?;
    if md.file_type().is_symlink() || !md.is_dir() {
        return Err(Skip(format!(
            "scratch directory {} is a symlink or not a directory",
            dir.display()
        )));
    }
    if md.uid() != uid {
        return Err(Skip(format!(
            "scratch directory {} belongs to uid {}, not the job's uid {uid}",
            dir.display(),
            md.uid()
        )));
    }
    for up in dir.ancestors().skip(1) {
        let Ok(m) = std::fs::symlink_metadata(up) else {
            continue;
        };
        if m.uid() != 0 && m.uid() != uid {
            return Err(Skip(format!(
                "scratch directory {}: {} belongs to uid {}, another user",
                dir.display(),
                up.display(),
                m.uid()
            )));
        }
        let others_write = m.mode() & 0o022 != 0 && m.mode() & 0o1000 == 0;
        if !m.file_type().is_symlink() && others_write {
            return Err(Skip(format!(
                "scratch directory {}: {} is writable by other users and not sticky",
                dir.display(),
                up.display()
            )));
        }
    }
    Ok(())
}

/// The profile files apply reads must be regular files: a FIFO or device (or a symlink to one)
/// would block or flood slurmstepd while it reads.
fn check_profile_files(dir: &Path) -> Result<(), Skip> {
    for name in ["profile.yaml", "comm.csv", "load.csv", "timeline.csv"] {
        let p = dir.join(name);
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_file() => {}
            Ok(_) => {
                return Err(Skip(format!(
                    "profile {}: {name} is not a regular file",
                    dir.display()
                )))
            }
            // Missing files get read_dir's own message (timeline.csv is optional).
            Err(_) => {}
        }
    }
    Ok(())
}

fn tempfile_probe(dir: &Path) -> std::io::Result<()> {
    let p = dir.join(format!(".cmlb-probe-{}", std::process::id()));
    std::fs::write(&p, b"")?;
    std::fs::remove_file(&p)
}

fn user_name(uid: u32) -> String {
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

fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buffer of the given size.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0 {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        return String::from_utf8_lossy(&buf[..end]).into_owned();
    }
    "localhost".into()
}

/// The directory this plugin was loaded from (companion files are looked up there).
fn plugin_dir() -> PathBuf {
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

fn find_file(explicit: Option<&Path>, dir: &Path, names: &[&str]) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return p.is_file().then(|| p.to_path_buf());
    }
    names.iter().map(|n| dir.join(n)).find(|p| p.is_file())
}

fn cmlb_binary(site: &SiteConf, dir: &Path) -> Result<PathBuf, Skip> {
    if let Some(p) = find_file(site.cmlb.as_deref(), dir, &["cmlb"]) {
        return Ok(p);
    }
    if site.cmlb.is_none() {
        for p in ["/usr/bin/cmlb", "/usr/local/bin/cmlb"] {
            if Path::new(p).is_file() {
                return Ok(PathBuf::from(p));
            }
        }
    }
    Err(Skip(format!(
        "the cmlb binary was not found ({}); set cmlb= in plugstack.conf",
        site.cmlb
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| format!("looked in {}, /usr/bin, /usr/local/bin", dir.display()))
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn scratch_must_be_the_users_own_directory_under_safe_parents() {
        let uid = nix::unistd::geteuid().as_raw();
        let t = tempfile::tempdir().unwrap();
        let parent = t.path().join("shared");
        let dir = parent.join("cmlb-me");
        ensure_scratch(&dir, uid).expect("own directory under a private parent");

        // A parent anyone may write to (and rename entries in) is refused, unless sticky.
        chmod(&parent, 0o777);
        let e = check_scratch(&dir, uid).unwrap_err().0;
        assert!(e.contains("writable by other users and not sticky"), "{e}");
        chmod(&parent, 0o1777);
        check_scratch(&dir, uid).expect("sticky like /tmp");

        // The directory itself: not a symlink, and the job user's.
        let link = parent.join("cmlb-link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        let e = check_scratch(&link, uid).unwrap_err().0;
        assert!(e.contains("is a symlink"), "{e}");
        let e = check_scratch(&dir, uid + 1).unwrap_err().0;
        assert!(e.contains(&format!("not the job's uid {}", uid + 1)), "{e}");

        // A parent owned by another user (needs root to set up).
        if uid == 0 {
            let theirs = t.path().join("theirs");
            std::fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), None).unwrap();
            let mine = theirs.join("cmlb-root");
            std::fs::create_dir(&mine).unwrap();
            let e = check_scratch(&mine, 0).unwrap_err().0;
            assert!(e.contains("belongs to uid 65534, another user"), "{e}");
        }
    }

    #[test]
    fn profile_files_must_be_regular_files() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        std::fs::write(d.join("profile.yaml"), "schema: 1\n").unwrap();
        std::fs::write(d.join("load.csv"), "1\n").unwrap();
        // Missing files are left to Profile::read_dir's message.
        check_profile_files(d).expect("regular files and a missing one");
        nix::unistd::mkfifo(&d.join("comm.csv"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let e = check_profile_files(d).unwrap_err().0;
        assert!(e.contains("comm.csv is not a regular file"), "{e}");
        std::fs::remove_file(d.join("comm.csv")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", d.join("comm.csv")).unwrap();
        let e = check_profile_files(d).unwrap_err().0;
        assert!(e.contains("comm.csv is not a regular file"), "{e}");
    }
}
