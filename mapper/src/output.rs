//! Writing results without losing anything: files are written to a temporary sibling and
//! renamed into place (never half-written), output directories are built the same way, and an
//! existing path is replaced only when it is what cmlb would have written there.

use crate::error::{MapError, Result};
use std::io::{Error, ErrorKind};
use std::path::{Path, PathBuf};

fn refuse(path: &Path, msg: String) -> MapError {
    MapError::io(path, Error::new(ErrorKind::InvalidInput, msg))
}

/// Write a file atomically: a temporary file in the same directory, then rename. A symlink is
/// followed (its target is replaced, the link kept); a device or FIFO (`/dev/null`,
/// `/dev/stdout`, a named pipe) is written to directly, since replacing it by a regular file
/// would break it (as root: for every user of the machine).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if m.file_type().is_symlink() {
            let target = std::fs::canonicalize(path).map_err(|e| {
                refuse(
                    path,
                    format!("a symlink whose target cannot be written ({e})"),
                )
            })?;
            return write_atomic(&target, bytes);
        }
        if m.is_dir() {
            return Err(refuse(path, "is a directory: give a file name".into()));
        }
        if !m.is_file() {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(|e| MapError::io(path, e))?;
            return f.write_all(bytes).map_err(|e| MapError::io(path, e));
        }
    }
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.is_dir() {
        let why = if dir.exists() {
            format!("{} is not a directory", dir.display())
        } else {
            format!("directory {} does not exist", dir.display())
        };
        return Err(MapError::io(path, Error::new(ErrorKind::NotFound, why)));
    }
    // 0666 minus the umask, as a plain create would give: tempfile's own 0600 would make an
    // exported topology or plan unreadable to anyone else (e.g. slurmstepd as the job user).
    let mut tmp = tempfile::Builder::new()
        .prefix(".cmlb-")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666))
        .tempfile_in(dir)
        .map_err(|e| {
            MapError::io(
                path,
                Error::new(
                    e.kind(),
                    format!("cannot create a file in {}: {}", dir.display(), e.kind()),
                ),
            )
        })?;
    tmp.write_all(bytes).map_err(|e| MapError::io(path, e))?;
    tmp.persist(path).map_err(|e| MapError::io(path, e.error))?;
    Ok(())
}

/// Check, before any work, that `out` may become an output directory of the kind whose
/// directories contain `marker` (`profile.yaml`, `index.html`): it must not exist, or be an
/// empty directory, or one holding `marker` (an earlier output, replaced at the end). It must
/// not be `.`/`..`, nor contain any of `inputs` (replacing it would delete what is being read).
pub fn check_output_dir(out: &Path, marker: &str, inputs: &[&Path]) -> Result<()> {
    if matches!(
        out.file_name().and_then(|n| n.to_str()),
        None | Some(".") | Some("..")
    ) {
        return Err(refuse(
            out,
            "name a directory to create or replace (e.g. --out prof), not '.' or '..'".into(),
        ));
    }
    let Ok(m) = std::fs::symlink_metadata(out) else {
        return Ok(());
    };
    if !m.is_dir() {
        return Err(refuse(
            out,
            "exists and is not a directory: choose another --out".into(),
        ));
    }
    let here = std::fs::canonicalize(out).map_err(|e| MapError::io(out, e))?;
    for input in inputs {
        if let Ok(i) = std::fs::canonicalize(input) {
            if i.starts_with(&here) {
                return Err(refuse(
                    out,
                    format!(
                        "contains the input {}: replacing it would delete it; choose another --out",
                        input.display()
                    ),
                ));
            }
        }
    }
    let empty = std::fs::read_dir(out)
        .map_err(|e| MapError::io(out, e))?
        .next()
        .is_none();
    if !empty && !out.join(marker).is_file() {
        return Err(refuse(
            out,
            format!(
                "exists and is not an earlier cmlb output (no {marker}); it would be replaced: \
                 choose another --out or remove it"
            ),
        ));
    }
    Ok(())
}

/// Move the finished directory `from` to `to`; an existing `to` is replaced only at the end,
/// and `from` never survives a failure.
pub fn replace_dir(from: PathBuf, to: &Path) -> Result<()> {
    let fail = |e: Error| {
        let _ = std::fs::remove_dir_all(&from);
        MapError::io(to, e)
    };
    match std::fs::symlink_metadata(to) {
        Err(_) => std::fs::rename(&from, to).map_err(fail),
        Ok(m) if !m.is_dir() => Err(fail(Error::new(
            ErrorKind::InvalidInput,
            "exists and is not a directory",
        ))),
        Ok(_) => {
            let old = to.with_extension(format!("old-{}", std::process::id()));
            std::fs::rename(to, &old).map_err(fail)?;
            if let Err(e) = std::fs::rename(&from, to) {
                let _ = std::fs::rename(&old, to);
                return Err(fail(e));
            }
            let _ = std::fs::remove_dir_all(&old);
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_and_fifos_are_written_not_replaced() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
        };
        write_atomic(&fifo, b"plan\n").unwrap();
        assert_eq!(reader.join().unwrap(), "plan\n");
        let m = std::fs::symlink_metadata(&fifo).unwrap();
        assert!(m.file_type().is_fifo(), "still a FIFO");
        write_atomic(Path::new("/dev/null"), b"x").unwrap();
        use std::os::unix::fs::FileTypeExt;
        assert!(std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
    }

    #[test]
    fn symlinks_keep_pointing_at_the_replaced_file() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("real.yaml");
        std::fs::write(&target, "old").unwrap();
        let link = d.path().join("link.yaml");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_atomic(&link, b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        let e = write_atomic(d.path(), b"x").unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        let e = write_atomic(&target.join("x.yaml"), b"x")
            .unwrap_err()
            .to_string();
        assert!(e.contains("real.yaml is not a directory"), "{e}");
    }

    #[test]
    fn only_empty_or_earlier_output_directories_are_replaced() {
        let d = tempfile::tempdir().unwrap();
        let fresh = d.path().join("new");
        check_output_dir(&fresh, "index.html", &[]).unwrap();
        std::fs::create_dir(&fresh).unwrap();
        check_output_dir(&fresh, "index.html", &[]).expect("empty");
        std::fs::write(fresh.join("precious.txt"), "x").unwrap();
        let e = check_output_dir(&fresh, "index.html", &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("not an earlier cmlb output (no index.html)"),
            "{e}"
        );
        std::fs::write(fresh.join("index.html"), "x").unwrap();
        check_output_dir(&fresh, "index.html", &[]).expect("an earlier report");
        // The input inside the output, or the output itself.
        let prof = fresh.join("prof");
        std::fs::create_dir(&prof).unwrap();
        let e = check_output_dir(&fresh, "index.html", &[&prof])
            .unwrap_err()
            .to_string();
        assert!(e.contains("contains the input"), "{e}");
        for dot in [".", "..", "a/.."] {
            let e = check_output_dir(Path::new(dot), "index.html", &[])
                .unwrap_err()
                .to_string();
            assert!(e.contains("not '.' or '..'"), "{dot}: {e}");
        }
        let file = d.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let e = check_output_dir(&file, "index.html", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a directory"), "{e}");
    }

    #[test]
    fn a_failed_replacement_leaves_no_temporary_directory() {
        let d = tempfile::tempdir().unwrap();
        let from = d.path().join(".cmlb-tmp");
        std::fs::create_dir(&from).unwrap();
        let file = d.path().join("file");
        std::fs::write(&file, "x").unwrap();
        assert!(replace_dir(from.clone(), &file).is_err());
        assert!(!from.exists());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
    }
}
