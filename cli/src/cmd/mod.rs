//! One module per subcommand.
pub mod map;
pub mod run;
pub mod report;
pub mod topology;
