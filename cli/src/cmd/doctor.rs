//! `cmlb doctor`: check a node the way an admin needs before enabling the SPANK plugin. One line
//! per check — `ok`, `warn` or `FAIL` — and, for the last two, what to do; exit status 1 when
//! any check fails.

use anyhow::Result;
use clap::Args as ClapArgs;
use cmlb_slurm::companions;
use cmlb_slurm::options::{parse_site, SiteConf};
use cmlb_slurm::scratch::expand_scratch;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(ClapArgs)]
#[command(
    about = "Check this node before enabling the cmlb Slurm plugin",
    long_about = "Checks, one line each: the running Slurm release against the plugin's, the \
plugstack.conf entry and its arguments, the scratch directory template, perf_event access and \
the sampling backends as the job user, the hwloc topology, and the preload library and cmlb \
binary where the plugin looks for them. A failed check says what to do; the exit status is 1 \
if any check failed.",
    after_help = "Examples:\n  cmlb doctor\n  cmlb doctor --user alice --plugstack /etc/slurm/plugstack.conf"
)]
pub struct Args {
    /// plugstack.conf to read (default: PlugStackConfig beside $SLURM_CONF, else
    /// /etc/slurm/plugstack.conf); `include` lines are followed.
    #[arg(long, value_name = "FILE")]
    pub plugstack: Option<PathBuf>,
    /// The plugin to check (default: the path on the plugstack line).
    #[arg(long, value_name = "FILE")]
    pub plugin: Option<PathBuf>,
    /// A user jobs run as: the sampling check runs as this user, as jobs do.
    #[arg(long, default_value = "nobody", value_name = "NAME")]
    pub user: String,
}

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Ok,
    Warn,
    Fail,
}

struct Report {
    failed: usize,
}

impl Report {
    fn line(&mut self, v: Verdict, what: &str, detail: &str, fix: Option<&str>) {
        let tag = match v {
            Verdict::Ok => "ok  ",
            Verdict::Warn => "warn",
            Verdict::Fail => {
                self.failed += 1;
                "FAIL"
            }
        };
        match fix {
            Some(f) if v != Verdict::Ok => println!("{tag}  {what}: {detail} — {f}"),
            _ => println!("{tag}  {what}: {detail}"),
        }
    }
}

pub fn run(a: Args) -> Result<i32> {
    let mut r = Report { failed: 0 };
    let slurmd = slurmd_release();
    let plugstack = a.plugstack.clone().unwrap_or_else(default_plugstack);
    let entry = find_entry(&plugstack);
    let plugin = a.plugin.clone().or_else(|| {
        entry
            .as_ref()
            .ok()
            .and_then(|e| e.as_ref().map(|e| e.path.clone()))
    });

    // 1. Slurm releases.
    match (&slurmd, &plugin) {
        (Err(e), _) => r.line(
            Verdict::Fail,
            "slurm",
            e,
            Some("install slurmd on this node, or run cmlb doctor where jobs run"),
        ),
        (Ok(rel), None) => r.line(Verdict::Ok, "slurm", &format!("slurmd {rel}"), None),
        (Ok(rel), Some(p)) => match plugin_release(p) {
            Ok(pr) if major_minor(rel) == Some(pr) => r.line(
                Verdict::Ok,
                "slurm",
                &format!(
                    "slurmd {rel}, plugin {} built for {}.{:02}",
                    p.display(),
                    pr.0,
                    pr.1
                ),
                None,
            ),
            Ok(pr) => r.line(
                Verdict::Fail,
                "slurm",
                &format!(
                    "slurmd {rel} but {} was built for {}.{:02}: slurmd refuses it",
                    p.display(),
                    pr.0,
                    pr.1
                ),
                Some("install the cmlb package built for this Slurm release (packaging/deb)"),
            ),
            Err(e) => r.line(
                Verdict::Fail,
                "slurm",
                &format!("plugin {}: {e}", p.display()),
                Some("install the cmlb package, or give --plugin PATH"),
            ),
        },
    }

    // 2. plugstack.conf.
    let site = match &entry {
        Err(e) => {
            r.line(
                Verdict::Fail,
                "plugstack",
                e,
                Some("give --plugstack FILE (PlugStackConfig in slurm.conf)"),
            );
            None
        }
        Ok(None) => {
            r.line(
                Verdict::Warn,
                "plugstack",
                &format!(
                    "no cmlb_spank.so line in {} (or its includes)",
                    plugstack.display()
                ),
                Some(
                    "enable it: uncomment the line in /etc/slurm/plugstack.conf.d/cmlb.conf \
                     (the package installs it commented)",
                ),
            );
            None
        }
        Ok(Some(e)) => match parse_site(&e.args) {
            Ok(site) => {
                r.line(
                    Verdict::Ok,
                    "plugstack",
                    &format!(
                        "{}:{}: {} {} {}",
                        e.file.display(),
                        e.line,
                        e.kind,
                        e.path.display(),
                        e.args.join(" ")
                    ),
                    None,
                );
                Some(site)
            }
            Err(msg) => {
                r.line(
                    Verdict::Fail,
                    "plugstack",
                    &format!("{}:{}: {msg}", e.file.display(), e.line),
                    Some("fix the argument; the plugin stays disabled until then"),
                );
                None
            }
        },
    };
    let site = site.unwrap_or_default();

    // 3. Scratch template.
    let uid = user_ids(&a.user);
    match &uid {
        None => r.line(
            Verdict::Fail,
            "user",
            &format!("no user '{}' on this node", a.user),
            Some("give --user NAME of a user jobs run as"),
        ),
        Some((u, _)) => {
            let dir = expand_scratch(&site.scratch, &a.user, 0, &hostname());
            let dir = PathBuf::from(dir);
            match cmlb_slurm::scratch::check_parents(&dir, *u) {
                Ok(()) => r.line(
                    Verdict::Ok,
                    "scratch",
                    &format!(
                        "{} (for {}: {}): parents safe",
                        site.scratch,
                        a.user,
                        dir.display()
                    ),
                    None,
                ),
                Err(e) => r.line(
                    Verdict::Fail,
                    "scratch",
                    &e.0,
                    Some("choose scratch= under a root-owned or sticky (1777) directory"),
                ),
            }
        }
    }

    // 4. Sampling, as the job user.
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    match &uid {
        None => {}
        Some((u, g)) => match probe_as(*u, *g) {
            Ok(auto) => r.line(
                Verdict::Ok,
                "sampling",
                &format!(
                    "perf_event_paranoid={paranoid}; as {}: `auto` picks {auto}",
                    a.user
                ),
                None,
            ),
            Err(e) => r.line(
                Verdict::Fail,
                "sampling",
                &format!("perf_event_paranoid={paranoid}; as {}: {e}", a.user),
                Some("set kernel.perf_event_paranoid <= 2 (sysctl) so jobs can sample themselves"),
            ),
        },
    }

    // 5. Topology.
    match mapper::Topology::load(&site.topology.clone().unwrap_or_else(|| "live".into())) {
        Ok(t) => r.line(
            Verdict::Ok,
            "topology",
            &format!("{} NUMA node(s): {}", t.numa.len(), t.summary_line()),
            None,
        ),
        Err(e) => r.line(
            Verdict::Fail,
            "topology",
            &e.to_string(),
            Some("check hwloc (lstopo-no-graphics) or the topology= file"),
        ),
    }

    // 6. Companion files, where the plugin looks for them.
    let dir = plugin
        .as_ref()
        .and_then(|p| p.parent().map(Path::to_path_buf));
    companions(&mut r, &site, dir.as_deref());

    if r.failed > 0 {
        println!("{} check(s) failed", r.failed);
        return Ok(1);
    }
    Ok(0)
}

/// The preload library and `cmlb` exactly where the plugin looks for them
/// (`cmlb_slurm::companions`).
fn companions(r: &mut Report, site: &SiteConf, dir: Option<&Path>) {
    let Some(dir) = dir else {
        r.line(
            Verdict::Warn,
            "preload",
            "plugin location unknown",
            Some("give --plugin PATH"),
        );
        return;
    };
    for (what, found) in [
        ("preload", companions::preload_lib(site, dir)),
        ("cmlb", companions::cmlb_binary(site, dir)),
    ] {
        match found {
            Ok(p) => r.line(Verdict::Ok, what, &p.display().to_string(), None),
            Err(e) => r.line(
                Verdict::Fail,
                what,
                &e,
                Some("install the cmlb package, or set the path in plugstack.conf"),
            ),
        }
    }
    // Only MPI steps need it: without it they run and are mapped, but no rank matrix is made.
    match companions::mpi_lib(site, dir) {
        Ok(p) => r.line(Verdict::Ok, "mpi", &p.display().to_string(), None),
        Err(e) => r.line(
            Verdict::Warn,
            "mpi",
            &e,
            Some("MPI steps profile without their rank matrix; install the cmlb package"),
        ),
    }
}

/// "22.05.8" from `slurmd -V` ("slurm-wlm 22.05.8" or "slurm 24.11.5").
fn slurmd_release() -> Result<String, String> {
    let o = Command::new("slurmd")
        .arg("-V")
        .output()
        .map_err(|e| format!("cannot run slurmd -V: {e}"))?;
    let text = String::from_utf8_lossy(&o.stdout);
    text.split_whitespace()
        .last()
        .filter(|v| v.chars().next().is_some_and(|c| c.is_ascii_digit()))
        .map(str::to_string)
        .ok_or_else(|| format!("slurmd -V printed '{}'", text.trim()))
}

fn major_minor(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split('.');
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// The Slurm release a plugin was built for: its `plugin_version` symbol, which slurmd
/// compares with its own. The plugin resolves Slurm's functions at run time (dlsym), so
/// loading it here runs none of its code and needs no Slurm.
fn plugin_release(p: &Path) -> Result<(u32, u32), String> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: dlopen/dlsym/dlclose with a valid path; the symbol is a plain u32 static.
    unsafe {
        let h = libc::dlopen(c.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL);
        if h.is_null() {
            let e = libc::dlerror();
            let msg = if e.is_null() {
                "cannot be loaded".to_string()
            } else {
                std::ffi::CStr::from_ptr(e).to_string_lossy().into_owned()
            };
            return Err(msg);
        }
        let sym = libc::dlsym(h, c"plugin_version".as_ptr());
        let v = (!sym.is_null()).then(|| *(sym as *const u32));
        libc::dlclose(h);
        let v = v.ok_or("has no plugin_version: not a Slurm plugin")?;
        Ok(((v >> 16) & 0xff, (v >> 8) & 0xff))
    }
}

fn default_plugstack() -> PathBuf {
    let conf = std::env::var_os("SLURM_CONF")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/etc/slurm/slurm.conf".into());
    // PlugStackConfig in slurm.conf wins; Slurm's default is plugstack.conf beside it.
    if let Ok(text) = std::fs::read_to_string(&conf) {
        for l in text.lines() {
            let l = l.trim();
            if let Some((k, v)) = l.split_once('=') {
                if k.trim().eq_ignore_ascii_case("PlugStackConfig") {
                    return PathBuf::from(v.trim());
                }
            }
        }
    }
    conf.parent()
        .unwrap_or(Path::new("/etc/slurm"))
        .join("plugstack.conf")
}

/// The cmlb line of a plugstack.conf.
#[derive(Debug)]
struct Entry {
    file: PathBuf,
    line: usize,
    kind: String,
    path: PathBuf,
    args: Vec<String>,
}

/// The first active line loading `cmlb_spank.so`, following `include GLOB` lines.
fn find_entry(file: &Path) -> Result<Option<Entry>, String> {
    find_in(file, 0)
}

fn find_in(file: &Path, depth: usize) -> Result<Option<Entry>, String> {
    if depth > 8 {
        return Err(format!("{}: includes nested too deep", file.display()));
    }
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    for (i, raw) in text.lines().enumerate() {
        let l = raw.split('#').next().unwrap_or("").trim();
        let words: Vec<&str> = l.split_whitespace().collect();
        match words.as_slice() {
            [] => {}
            ["include", glob] => {
                for inc in expand_glob(glob) {
                    if let Some(e) = find_in(&inc, depth + 1)? {
                        return Ok(Some(e));
                    }
                }
            }
            [kind @ ("optional" | "required"), path, args @ ..]
                if path.ends_with("cmlb_spank.so") =>
            {
                return Ok(Some(Entry {
                    file: file.to_path_buf(),
                    line: i + 1,
                    kind: kind.to_string(),
                    path: PathBuf::from(path),
                    args: args.iter().map(|s| s.to_string()).collect(),
                }));
            }
            _ => {}
        }
    }
    Ok(None)
}

/// `dir/*.conf`-style globs, the form plugstack.conf includes use (a `*` in the file name).
fn expand_glob(glob: &str) -> Vec<PathBuf> {
    let p = Path::new(glob);
    let (Some(dir), Some(name)) = (p.parent(), p.file_name().and_then(|n| n.to_str())) else {
        return Vec::new();
    };
    let Some((pre, post)) = name.split_once('*') else {
        return vec![p.to_path_buf()];
    };
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|f| {
                    f.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with(pre) && n.ends_with(post))
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

fn user_ids(name: &str) -> Option<(u32, u32)> {
    let u = nix::unistd::User::from_name(name).ok()??;
    Some((u.uid.as_raw(), u.gid.as_raw()))
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// `cmlb profile --probe` as the job user: which backend `auto` picks there.
fn probe_as(uid: u32, gid: u32) -> Result<String, String> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(exe);
    cmd.args(["profile", "--probe"]);
    if nix::unistd::geteuid().as_raw() != uid {
        // Root can become the user; anyone else probes as themselves (said in the line).
        if nix::unistd::geteuid().is_root() {
            // std drops root's supplementary groups when it switches the uid.
            cmd.uid(uid).gid(gid);
        }
    }
    let o = cmd
        .output()
        .map_err(|e| format!("cannot run the probe: {e}"))?;
    let text = String::from_utf8_lossy(&o.stdout);
    let auto = text
        .lines()
        .find_map(|l| l.strip_prefix("auto backend:"))
        .map(|s| s.trim().to_string());
    match auto {
        Some(a) if o.status.success() && a != "none" => Ok(a),
        _ => Err(format!(
            "no sampling backend opens ({})",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
    }
}
