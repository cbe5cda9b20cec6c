//! One module per subcommand.
pub mod eval;
pub mod map;
pub mod profile;
pub mod profile_import;
pub mod report;
pub mod run;
pub mod topology;
