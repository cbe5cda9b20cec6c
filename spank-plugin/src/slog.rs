//! The `log` facade routed to Slurm's logging, so messages from the mapper library end up in
//! the slurmd log / the user's srun output like the plugin's own.

use crate::ffi::{self, LogLevel};

struct SlurmLogger;

impl log::Log for SlurmLogger {
    fn enabled(&self, m: &log::Metadata) -> bool {
        m.level() <= log::max_level()
    }
    fn log(&self, r: &log::Record) {
        if !self.enabled(r.metadata()) {
            return;
        }
        let lvl = match r.level() {
            log::Level::Error => LogLevel::Error,
            log::Level::Warn => LogLevel::User,
            log::Level::Info => LogLevel::Info,
            log::Level::Debug => LogLevel::Verbose,
            log::Level::Trace => LogLevel::Debug,
        };
        ffi::log(lvl, &format!("cmlb: {}", r.args()));
    }
    fn flush(&self) {}
}

static LOGGER: SlurmLogger = SlurmLogger;

/// Install the logger (idempotent). Debug and trace go to Slurm's verbose/debug levels, which
/// Slurm itself filters, so they are always passed on.
pub fn init() {
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Debug);
    }
}
