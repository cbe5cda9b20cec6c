//! `cmlb profile --import FORMAT FILE`: analyse a trace recorded elsewhere (e.g. `perf mem
//! record` + `perf script` on a node with PEBS/IBS/SPE) into a profile directory.

use anyhow::{bail, Context, Result};
use profiler::import::{profile_trace, ImportFormat};
use profiler::AnalysisParams;
use std::path::Path;
use std::path::PathBuf;

/// Import `file` in `format` and write the profile to `out` (atomically). Returns the exit
/// code (0); nothing is written on error.
pub fn run(format: &str, file: &Path, out: &Path) -> Result<i32> {
    let Some(fmt) = ImportFormat::parse(format) else {
        bail!(
            "unknown import format '{format}' (expected {})",
            ImportFormat::NAMES.join(" or ")
        );
    };
    check_output_dir(out)?;
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

/// Fail before running anything if the profile cannot be written where asked. Here rather
/// than in `profile.rs` (which calls this module), so the two modules do not import each other. Nothing is
/// created here: the nearest existing ancestor must be a writable directory.
pub(crate) fn check_output_dir(out: &Path) -> Result<()> {
    // Only a new, empty or earlier profile directory may be replaced.
    mapper::check_output_dir(out, profile::PROFILE_FILE, &[])?;
    let mut anc = out.parent().map(Path::to_path_buf);
    while let Some(a) = anc.clone() {
        if a.as_os_str().is_empty() {
            anc = Some(PathBuf::from("."));
            break;
        }
        if a.exists() {
            break;
        }
        anc = a.parent().map(Path::to_path_buf);
    }
    let anc = anc.unwrap_or_else(|| PathBuf::from("."));
    if !anc.is_dir() {
        bail!(
            "output directory for --out {} cannot be created: {} is not a directory",
            out.display(),
            anc.display()
        );
    }
    nix::unistd::access(
        &anc,
        nix::unistd::AccessFlags::W_OK | nix::unistd::AccessFlags::X_OK,
    )
    .map_err(|e| {
        anyhow::anyhow!(
            "output directory {} is not writable (for --out {}): {}",
            anc.display(),
            out.display(),
            e.desc()
        )
    })?;
    Ok(())
}
