//! The batch step of an `sbatch --cmlb-map=...` job: where the job's ranks go across nodes.
//!
//! Inside a node the plugin places ranks per step (`remote.rs`). Which node a rank runs on is
//! Slurm's decision, taken by srun before any node sees the step; the one way to steer it
//! without changing the user's command is `--distribution=arbitrary` with a `SLURM_HOSTFILE`,
//! which srun reads from its environment. The batch step runs before any srun of the script,
//! knows the allocation, and may set the script's environment — so it does it here:
//!
//! * profile: `CMLB_JOB_PROFILE` names the job's profile directory (keyed by the job's name,
//!   submit directory, node and task counts); every MPI step of the script with the job's task
//!   count also writes its rank matrix into its `ranks/`.
//! * apply (asked for by the user, never as a site default): from that rank matrix, ranks →
//!   nodes with the tasks per node Slurm allocated (`mapper::ranks`, over the switches of
//!   `topology.conf` when there is one), written as a hostfile; the script gets
//!   `SLURM_HOSTFILE` and `SLURM_DISTRIBUTION=arbitrary`, so its sruns place ranks that way.
//!   When the user chose a distribution or hostfile, or the profile does not fit, one line says
//!   so and nothing changes.

use crate::ffi::{self, spank_t};
use crate::options::{self, MapOpts, Mode, SiteConf};
use crate::sys;
use cmlb_slurm::layout::per_node_counts;
use cmlb_slurm::scratch::{check_scratch, ensure_scratch};
use mapper::binding::profile_key;
use mapper::profile::ranks::{has_ranks, read_ranks_dir};
use mapper::ranks::{block, expand_hostlist, map_to_machines, Cluster, Machine};
use std::path::{Path, PathBuf};

/// `SLURM_BATCH_SCRIPT`: the step id of a batch script.
pub(crate) const BATCH_STEP: u32 = 0xffff_fffb;

fn env(sp: spank_t, name: &str) -> Option<String> {
    ffi::getenv(sp, name).filter(|v| !v.trim().is_empty())
}

/// The job's layout as the batch step's environment states it.
struct Job {
    id: u32,
    uid: u32,
    nodes: Vec<String>,
    tasks_per_node: Vec<usize>,
    ntasks: usize,
    dir: PathBuf,
}

fn read_job(sp: spank_t, site: &SiteConf) -> Result<Option<Job>, String> {
    use crate::ffi::item;
    let id = ffi::get_u32(sp, item::S_JOB_ID).ok_or("Slurm did not give the job id")?;
    let uid = ffi::get_u32(sp, item::S_JOB_UID).ok_or("Slurm did not give the job uid")?;
    // A job without a task count (sbatch without -n/--ntasks-per-node) has no rank layout.
    let (Some(ntasks), Some(per_node), Some(list)) = (
        env(sp, "SLURM_NTASKS"),
        env(sp, "SLURM_TASKS_PER_NODE"),
        env(sp, "SLURM_JOB_NODELIST"),
    ) else {
        return Ok(None);
    };
    let ntasks: usize = ntasks
        .trim()
        .parse()
        .map_err(|_| format!("SLURM_NTASKS='{ntasks}' is not a count"))?;
    let tasks_per_node =
        per_node_counts(&per_node).map_err(|e| format!("SLURM_TASKS_PER_NODE: {e}"))?;
    let nodes = expand_hostlist(&list).map_err(|e| format!("SLURM_JOB_NODELIST: {e}"))?;
    if !cmlb_slurm::layout::describes(&tasks_per_node, nodes.len(), ntasks) {
        return Err(format!(
            "SLURM_JOB_NODELIST={list} and SLURM_TASKS_PER_NODE={per_node} do not describe \
             SLURM_NTASKS={ntasks}"
        ));
    }
    let user = env(sp, "SLURM_JOB_USER").unwrap_or_else(|| sys::user_name(uid));
    let nodename = env(sp, "SLURMD_NODENAME").unwrap_or_else(sys::host_name);
    let scratch = PathBuf::from(options::expand_scratch(&site.scratch, &user, id, &nodename));
    // Stable across jobs of the same script: the job name (the script's file name unless
    // --job-name), where it was submitted, its node and task counts.
    let words = [
        env(sp, "SLURM_JOB_NAME").unwrap_or_else(|| "job".into()),
        env(sp, "SLURM_SUBMIT_DIR").unwrap_or_default(),
    ];
    let shape = format!("batch, {} nodes, {ntasks} tasks", nodes.len());
    let dir = scratch.join(profile_key(&words, 0, &shape));
    Ok(Some(Job {
        id,
        uid,
        nodes,
        tasks_per_node,
        ntasks,
        dir,
    }))
}

/// `user_init` of the batch step. Errors are reasons to leave the job as it is (logged by the
/// caller, fatal only in strict mode).
pub(crate) fn user_init(sp: spank_t, site: &SiteConf, opts: &MapOpts) -> Result<(), String> {
    if opts.dryrun || (opts.mode == Mode::Apply && opts.from_site) {
        return Ok(());
    }
    let Some(job) = read_job(sp, site)? else {
        ffi::log(
            ffi::LogLevel::Verbose,
            "cmlb: batch job without a task count: ranks are not placed across nodes",
        );
        return Ok(());
    };
    let scratch = job.dir.parent().expect("the key is below the scratch dir");
    match opts.mode {
        Mode::Profile => {
            ensure_scratch(scratch, job.uid).map_err(|e| e.0)?;
            set(
                sp,
                contract::env::JOB_PROFILE,
                &job.dir.display().to_string(),
            );
            set(sp, contract::env::JOB_TASKS, &job.ntasks.to_string());
            Ok(())
        }
        Mode::Apply => apply(sp, &job, scratch),
        Mode::Off => Ok(()),
    }
}

fn set(sp: spank_t, k: &str, v: &str) {
    if let Err(rc) = ffi::setenv(sp, k, v) {
        ffi::log(
            ffi::LogLevel::User,
            &format!("cmlb: warning: cannot set {k} for the batch script (spank error {rc})"),
        );
    }
}

fn apply(sp: spank_t, job: &Job, scratch: &Path) -> Result<(), String> {
    let ranks = job.dir.join(contract::ranks::RANKS_DIR);
    if std::fs::symlink_metadata(scratch).is_ok() {
        check_scratch(scratch, job.uid).map_err(|e| e.0)?;
    }
    if !has_ranks(&ranks) {
        ffi::log(
            ffi::LogLevel::User,
            &format!(
                "cmlb: apply: no rank profile of this batch job in {}: ranks are placed as \
                 Slurm distributes them (sbatch --cmlb-map=profile once records one)",
                job.dir.display()
            ),
        );
        return Ok(());
    }
    for k in ["SLURM_DISTRIBUTION", "SLURM_HOSTFILE"] {
        if let Some(v) = env(sp, k) {
            ffi::log(
                ffi::LogLevel::User,
                &format!(
                    "cmlb: apply: the job sets {k}={v}: ranks are placed as you asked, not \
                     by the rank profile"
                ),
            );
            return Ok(());
        }
    }
    let rp = read_ranks_dir(&ranks).map_err(|e| format!("rank profile unusable: {e}"))?;
    if rp.meta.ranks != job.ntasks {
        ffi::log(
            ffi::LogLevel::User,
            &format!(
                "cmlb: apply: the rank profile {} has {} ranks but this job {} tasks: ranks \
                 are placed as Slurm distributes them",
                ranks.display(),
                rp.meta.ranks,
                job.ntasks
            ),
        );
        return Ok(());
    }
    let mut cluster = Cluster {
        machines: job
            .nodes
            .iter()
            .zip(&job.tasks_per_node)
            .map(|(name, &slots)| Machine {
                name: name.clone(),
                slots,
            })
            .collect(),
        switches: Vec::new(),
    };
    // Switches from the cluster's topology.conf, beside the slurm.conf the job uses.
    let conf_dir = env(sp, "SLURM_CONF")
        .and_then(|c| Path::new(&c).parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("/etc/slurm"));
    let topo_conf = conf_dir.join("topology.conf");
    if let Ok(text) = std::fs::read_to_string(&topo_conf) {
        cluster = cluster
            .with_topology_conf(&text, &topo_conf.display().to_string())
            .map_err(|e| e.to_string())?;
    }
    let placed = map_to_machines(&rp.graph, &cluster).map_err(|e| e.to_string())?;
    let blocked = block(&cluster, job.ntasks).map_err(|e| e.to_string())?;
    let (cut, cut_block) = (rp.graph.cut(&placed), rp.graph.cut(&blocked));
    if cut >= cut_block {
        ffi::log(
            ffi::LogLevel::User,
            &format!(
                "cmlb: apply: Slurm's block distribution already cuts least ({cut_block:.4e} \
                 inter-node bytes of the rank profile): ranks are placed as Slurm distributes them"
            ),
        );
        return Ok(());
    }
    let mut text = String::new();
    for &m in &placed {
        text.push_str(&cluster.machines[m].name);
        text.push('\n');
    }
    let path = job.dir.join(format!("hostfile.{}", job.id));
    ensure_scratch(scratch, job.uid).map_err(|e| e.0)?;
    std::fs::create_dir_all(&job.dir).map_err(|e| format!("{}: {e}", job.dir.display()))?;
    contract::ranks::write_atomic(&path, text.as_bytes())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    set(sp, "SLURM_HOSTFILE", &path.display().to_string());
    set(sp, "SLURM_DISTRIBUTION", "arbitrary");
    ffi::log(
        ffi::LogLevel::User,
        &format!(
            "cmlb: apply: ranks placed on nodes by the rank profile {}: inter-node bytes \
             {cut:.4e} (block {cut_block:.4e}); every srun of the script gets \
             SLURM_HOSTFILE={} and --distribution=arbitrary",
            ranks.display(),
            path.display()
        ),
    );
    Ok(())
}
