//! Remote context (slurmstepd): per-step planning in user_init, per-task binding in task_init.

use crate::ffi::spank_t;

/// What user_init decided for this step on this node.
pub(crate) struct StepState {}

pub(crate) fn user_init(_sp: spank_t) -> i32 {
    0
}

pub(crate) fn task_init(_sp: spank_t) -> i32 {
    0
}
