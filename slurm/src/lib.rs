//! cmlb's Slurm-side rules, with no Slurm in them: what a user may write in `--cmlb-map` /
//! `CMLB_MAP` ([`options::parse_map`]), what a site may write in `plugstack.conf`
//! ([`options::parse_site`]), and where profiles may live ([`scratch`]). The SPANK plugin
//! applies them inside slurmstepd; `cmlb doctor` checks a node against them; the man page
//! `cmlb_spank(8)` is generated from them. Pure functions, unit-tested without Slurm.

pub mod companions;
pub mod cores;
pub mod gpus;
pub mod layout;
pub mod nodes;
pub mod options;
pub mod scratch;
