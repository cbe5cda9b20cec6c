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
//! * `mpirun`/`mpiexec` in the script: their daemons' steps are left alone (`remote.rs`); the
//!   ranks they fork are reached through the script's environment ([`reach_ranks`]): the
//!   preload library joins `LD_PRELOAD` with `CMLB_RANK_WRAP`, under which it re-executes each
//!   rank — profile: `cmlb profile` into the job's `task<rank>/` with the MPI tracer recording
//!   `ranks/`; apply: `cmlb run --job-rank`, which plans the node's ranks from that profile and
//!   pins this one. Open MPI's `mpirun` also gets the plan's hostfile with its `seq` mapper
//!   (`OMPI_MCA_rmaps_base_mapping_policy`, `OMPI_MCA_orte_default_hostfile`); MPICH's hydra
//!   keeps its block placement, which `CMLB_RANK_HOSTS` then states.

use crate::ffi::{self, spank_t};
use crate::options::{MapOpts, Mode, SiteConf};
use crate::sys;
use cmlb_slurm::companions;
use cmlb_slurm::layout::per_node_counts;
use cmlb_slurm::nodes::{expand_hostlist, with_topology_conf};
use cmlb_slurm::scratch::{check_scratch, ensure_scratch};
use contract::launcher;
use mapper::ranks::{block, map_to_machines, Cluster, Machine};
use profile::ranks::{has_ranks, read_ranks_dir};
use std::path::{Path, PathBuf};
use step::binding::profile_key;
use step::profile_argv;

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
    /// `dir` with the node's name as [`launcher::NODE_WORD`] (a node-local scratch): where a
    /// rank on any node finds the job's profile on its own node.
    node_dir: PathBuf,
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
    let scratch = crate::scratch::job_scratch(sp, &site.scratch, uid, id);
    // Stable across jobs of the same script: the job name (the script's file name unless
    // --job-name), where it was submitted, its node and task counts.
    let words = [
        env(sp, "SLURM_JOB_NAME").unwrap_or_else(|| "job".into()),
        env(sp, "SLURM_SUBMIT_DIR").unwrap_or_default(),
    ];
    let shape = format!("batch, {} nodes, {ntasks} tasks", nodes.len());
    let key = profile_key(&words, 0, &shape);
    Ok(Some(Job {
        id,
        uid,
        nodes,
        tasks_per_node,
        ntasks,
        dir: scratch.here.join(&key),
        node_dir: scratch.any_node.join(&key),
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
            reach_ranks(sp, site, opts, &job, None);
            Ok(())
        }
        Mode::Apply => apply(sp, site, opts, &job, scratch),
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

fn apply(
    sp: spank_t,
    site: &SiteConf,
    opts: &MapOpts,
    job: &Job,
    scratch: &Path,
) -> Result<(), String> {
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
    let blocked = block(&cluster, job.ntasks).map_err(|e| e.to_string())?;
    let machine_names: Vec<String> = cluster.machines.iter().map(|m| m.name.clone()).collect();
    let names = |placed: &[usize]| -> Vec<String> {
        placed.iter().map(|&m| machine_names[m].clone()).collect()
    };
    let block_hosts = names(&blocked);
    for k in ["SLURM_DISTRIBUTION", "SLURM_HOSTFILE"] {
        if let Some(v) = env(sp, k) {
            ffi::log(
                ffi::LogLevel::User,
                &format!(
                    "cmlb: apply: the job sets {k}={v}: ranks are placed as you asked, not \
                     by the rank profile"
                ),
            );
            // mpirun/mpiexec place by block whatever srun is told.
            reach_ranks(sp, site, opts, job, Some(&block_hosts));
            return Ok(());
        }
    }
    // Switches from the cluster's topology.conf, beside the slurm.conf the job uses.
    let conf_dir = env(sp, "SLURM_CONF")
        .and_then(|c| Path::new(&c).parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("/etc/slurm"));
    let topo_conf = conf_dir.join("topology.conf");
    if let Ok(text) = std::fs::read_to_string(&topo_conf) {
        cluster = with_topology_conf(cluster, &text, &topo_conf.display().to_string())
            .map_err(|e| e.to_string())?;
    }
    let placed = map_to_machines(&rp.graph, &cluster).map_err(|e| e.to_string())?;
    let (cut, cut_block) = (rp.graph.cut(&placed), rp.graph.cut(&blocked));
    if cut >= cut_block {
        ffi::log(
            ffi::LogLevel::User,
            &format!(
                "cmlb: apply: Slurm's block distribution already cuts least ({cut_block:.4e} \
                 inter-node bytes of the rank profile): ranks are placed as Slurm distributes them"
            ),
        );
        reach_ranks(sp, site, opts, job, Some(&block_hosts));
        return Ok(());
    }
    let hosts = names(&placed);
    let mut text = String::new();
    for h in &hosts {
        text.push_str(h);
        text.push('\n');
    }
    let path = job.dir.join(format!("hostfile.{}", job.id));
    ensure_scratch(scratch, job.uid).map_err(|e| e.0)?;
    std::fs::create_dir_all(&job.dir).map_err(|e| format!("{}: {e}", job.dir.display()))?;
    contract::ranks::write_atomic(&path, text.as_bytes())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let hostfile = path.display().to_string();
    set(sp, "SLURM_HOSTFILE", &hostfile);
    set(sp, "SLURM_DISTRIBUTION", "arbitrary");
    // Open MPI's mpirun: rank i on line i of the same file (its `seq` mapper), unless the user
    // chose a mapping or hostfile of their own.
    let ompi = [
        ("OMPI_MCA_rmaps_base_mapping_policy", "seq"),
        ("OMPI_MCA_orte_default_hostfile", hostfile.as_str()),
    ];
    let ompi_own = ompi
        .iter()
        .find_map(|(k, _)| env(sp, k).map(|v| format!("{k}={v}")));
    let mpirun_hosts = match &ompi_own {
        None => {
            for (k, v) in ompi {
                set(sp, k, v);
            }
            &hosts
        }
        Some(_) => &block_hosts,
    };
    reach_ranks(sp, site, opts, job, Some(mpirun_hosts));
    ffi::log(
        ffi::LogLevel::User,
        &format!(
            "cmlb: apply: ranks placed on nodes by the rank profile {}: inter-node bytes \
             {cut:.4e} (block {cut_block:.4e}); every srun of the script gets \
             SLURM_HOSTFILE={} and --distribution=arbitrary{}",
            ranks.display(),
            path.display(),
            match &ompi_own {
                None => ", Open MPI's mpirun the same hostfile with its seq mapper".to_string(),
                Some(kv) => format!("; the job sets {kv}: mpirun places its ranks as you asked"),
            }
        ),
    );
    Ok(())
}

/// The ranks `mpirun`/`mpiexec` forks in the script: the preload library joins the script's
/// `LD_PRELOAD` with the words it re-executes each rank under (contract::launcher). Profile
/// (`hosts` `None`): `cmlb profile` into the job's `task<rank>/`, the MPI tracer recording the
/// rank matrix into its `ranks/`. Apply: `cmlb run --job-rank` from the job profile, with the
/// host of each rank as the launcher will place them. Every other process of the script
/// ignores the variables; without a companion file, one line says the ranks run as they are.
fn reach_ranks(
    sp: spank_t,
    site: &SiteConf,
    opts: &MapOpts,
    job: &Job,
    hosts: Option<&Vec<String>>,
) {
    let dir = sys::plugin_dir();
    let found = companions::preload_lib(site, &dir)
        .and_then(|p| Ok((p, companions::cmlb_binary(site, &dir)?)));
    let (preload, cmlb) = match found {
        Ok(f) => f,
        Err(e) => {
            ffi::log(
                ffi::LogLevel::User,
                &format!("cmlb: warning: {e}: ranks that mpirun/mpiexec start run without cmlb"),
            );
            return;
        }
    };
    let topology = site.topology.clone().unwrap_or_else(|| "live".into());
    let strategy = opts.strategy.clone().unwrap_or_default();
    let words = match hosts {
        None => {
            let wrap = opts.wrap_opts(site, cmlb);
            let task = job.node_dir.join(format!("task{}", launcher::RANK_WORD));
            match companions::mpi_lib(site, &dir) {
                Ok(lib) => {
                    set(sp, contract::env::RANK_TRACE, &lib.display().to_string());
                    let out = job.node_dir.join(contract::ranks::RANKS_DIR);
                    set(
                        sp,
                        contract::env::RANK_TRACE_OUT,
                        &out.display().to_string(),
                    );
                }
                Err(e) => ffi::log(
                    ffi::LogLevel::User,
                    &format!(
                        "cmlb: warning: {e}: the rank matrix of mpirun/mpiexec ranks is not \
                         recorded"
                    ),
                ),
            }
            profile_argv(&wrap, &task)
        }
        Some(hosts) => {
            set(
                sp,
                contract::env::RANK_HOSTS,
                &launcher::encode_hosts(hosts),
            );
            let mut w = vec![
                cmlb.display().to_string(),
                "run".into(),
                "--job-rank".into(),
                "--profile".into(),
                job.node_dir.display().to_string(),
                "--strategy".into(),
                strategy.to_string(),
                "--bind".into(),
                opts.bind.name().into(),
                "--topology".into(),
                topology,
            ];
            if opts.verbose {
                w.push("--show-pins".into());
            }
            w.push("--".into());
            w
        }
    };
    // Ranks on the other nodes write and read their node's scratch directory without the
    // plugin there to check it: the rank's cmlb checks it first (--job-scratch).
    let mut words = words;
    if let Some(scratch) = job.node_dir.parent() {
        words.splice(
            2..2,
            ["--job-scratch".to_string(), scratch.display().to_string()],
        );
    }
    set(sp, contract::env::RANK_WRAP, &contract::encode_wrap(&words));
    let existing = env(sp, contract::env::LD_PRELOAD);
    set(
        sp,
        contract::env::LD_PRELOAD,
        &contract::ld_preload_with(existing.as_deref(), &preload.display().to_string()),
    );
}
