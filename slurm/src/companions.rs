//! Where the plugin finds its companion files (the `cmlb` binary, the preload library): one
//! lookup, used by the plugin in slurmstepd and by `cmlb doctor`, so the doctor checks exactly
//! the files the plugin will use.

use crate::options::SiteConf;
use std::path::{Path, PathBuf};

/// File names the preload library is looked up by next to the plugin.
pub const PRELOAD_NAMES: [&str; 2] = [contract::PRELOAD_LIB, "cmlb_preload.so"];

/// `explicit` if given and a file; else the first of `names` in `dir` that is a file.
pub fn find_file(explicit: Option<&Path>, dir: &Path, names: &[&str]) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return p.is_file().then(|| p.to_path_buf());
    }
    names.iter().map(|n| dir.join(n)).find(|p| p.is_file())
}

/// The preload library: `preload=` if set, else next to the plugin (in `plugin_dir`).
pub fn preload_lib(site: &SiteConf, plugin_dir: &Path) -> Result<PathBuf, String> {
    find_file(site.preload.as_deref(), plugin_dir, &PRELOAD_NAMES).ok_or_else(|| {
        format!(
            "{} not found next to the plugin ({}); set preload= in plugstack.conf",
            contract::PRELOAD_LIB,
            plugin_dir.display()
        )
    })
}

/// The MPI tracer (`libcmlb_mpi.so`): next to the plugin, else next to the preload library.
pub fn mpi_lib(site: &SiteConf, plugin_dir: &Path) -> Result<PathBuf, String> {
    let beside_preload = site
        .preload
        .as_deref()
        .and_then(Path::parent)
        .map(Path::to_path_buf);
    std::iter::once(plugin_dir.to_path_buf())
        .chain(beside_preload)
        .map(|d| d.join(contract::ranks::MPI_LIB))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            format!(
                "{} not found next to the plugin ({})",
                contract::ranks::MPI_LIB,
                plugin_dir.display()
            )
        })
}

/// The `cmlb` binary: `cmlb=` if set, else next to the plugin, then /usr/bin, /usr/local/bin.
pub fn cmlb_binary(site: &SiteConf, plugin_dir: &Path) -> Result<PathBuf, String> {
    if let Some(p) = find_file(site.cmlb.as_deref(), plugin_dir, &["cmlb"]) {
        return Ok(p);
    }
    if site.cmlb.is_none() {
        for p in ["/usr/bin/cmlb", "/usr/local/bin/cmlb"] {
            if Path::new(p).is_file() {
                return Ok(PathBuf::from(p));
            }
        }
    }
    Err(format!(
        "the cmlb binary was not found ({}); set cmlb= in plugstack.conf",
        site.cmlb
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| format!(
                "looked in {}, /usr/bin, /usr/local/bin",
                plugin_dir.display()
            ))
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_paths_win_and_missing_ones_are_named() {
        let d = tempfile::tempdir().unwrap();
        let mut site = SiteConf::default();
        let e = preload_lib(&site, d.path()).unwrap_err();
        assert!(
            e.contains("libcmlb_preload.so not found next to the plugin"),
            "{e}"
        );
        std::fs::write(d.path().join("cmlb_preload.so"), "").unwrap();
        assert_eq!(
            preload_lib(&site, d.path()).unwrap(),
            d.path().join("cmlb_preload.so")
        );
        // An explicit path that is not a file is not replaced by the one next to the plugin.
        site.preload = Some(d.path().join("nope.so"));
        let e = preload_lib(&site, d.path()).unwrap_err();
        assert!(e.contains("libcmlb_preload.so not found"), "{e}");
        site.cmlb = Some(d.path().join("nocmlb"));
        let e = cmlb_binary(&site, d.path()).unwrap_err();
        assert!(e.contains("nocmlb") && e.contains("set cmlb="), "{e}");
        std::fs::write(d.path().join("cmlb"), "").unwrap();
        site.cmlb = None;
        assert_eq!(cmlb_binary(&site, d.path()).unwrap(), d.path().join("cmlb"));
    }
}
