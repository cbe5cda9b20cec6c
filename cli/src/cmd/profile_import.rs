//! `cmlb profile --import FORMAT FILE`: analyse a trace recorded elsewhere (e.g. `perf mem
//! record` + `perf script` on a node with PEBS/IBS/SPE) into a profile directory.

use anyhow::{bail, Context, Result};
use profiler::import::{profile_trace, ImportFormat};
use profiler::AnalysisParams;
use std::path::Path;

/// Import `file` in `format` and write the profile to `out` (atomically). Returns the exit
/// code (0); nothing is written on error.
pub fn run(format: &str, file: &Path, out: &Path) -> Result<i32> {
    let Some(fmt) = ImportFormat::parse(format) else {
        bail!(
            "unknown import format '{format}' (expected {})",
            ImportFormat::NAMES.join(" or ")
        );
    };
    super::profile::check_output_dir(out)?;
    let p = profile_trace(fmt, file, &AnalysisParams::default()).with_context(|| {
        format!(
            "importing {} as {format}, no profile written",
            file.display()
        )
    })?;
    p.write_dir(out)
        .with_context(|| format!("writing the profile to {}", out.display()))?;
    let param = |k: &str| p.meta.params.get(k).cloned().unwrap_or_default();
    say!(
        "cmlb: profile written to {} ({}, {} threads numbered by {}, {:.3} s of trace)",
        out.display(),
        p.meta.backend,
        p.meta.threads.len(),
        param("import.thread_order"),
        p.meta.duration_s
    );
    say!(
        "cmlb: {} samples, {} sample lines without a data address skipped; load vector: {}",
        p.meta.samples,
        param("import.skipped_no_addr"),
        param("load.filter")
    );
    Ok(0)
}
