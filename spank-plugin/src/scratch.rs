//! Where a job's profiles live on this node: the site's scratch template (`scratch=` in
//! plugstack.conf) expanded for the job's user, id and node. One lookup for the step
//! (`remote.rs`) and the batch step (`batch.rs`); the template's rules and the directory checks
//! are `cmlb-slurm`'s `scratch`.

use crate::ffi::{self, spank_t};
use crate::sys;
use cmlb_slurm::scratch::expand_scratch;
use contract::launcher;
use std::path::PathBuf;

/// The job's scratch directories.
pub(crate) struct JobScratch {
    /// On this node.
    pub(crate) here: PathBuf,
    /// With the node's name left as [`launcher::NODE_WORD`], for ranks on any node to fill in
    /// (a node-local scratch).
    pub(crate) any_node: PathBuf,
}

/// The scratch directories of job `job`, run by user `uid`.
pub(crate) fn job_scratch(sp: spank_t, template: &str, uid: u32, job: u32) -> JobScratch {
    let env = |k: &str| ffi::getenv(sp, k).filter(|v| !v.trim().is_empty());
    // The job's environment has the name already; a passwd lookup may block on LDAP/SSSD.
    let user = env("SLURM_JOB_USER").unwrap_or_else(|| sys::user_name(uid));
    let node = env("SLURMD_NODENAME").unwrap_or_else(sys::host_name);
    JobScratch {
        here: PathBuf::from(expand_scratch(template, &user, job, &node)),
        any_node: PathBuf::from(expand_scratch(template, &user, job, launcher::NODE_WORD)),
    }
}
