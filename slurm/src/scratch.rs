//! The scratch directory's security: profiles live in a directory the job user owns under
//! parents nobody else can swap, because slurmstepd reads them and apply trusts them.

use std::path::Path;

/// Why the scratch directory cannot be used (the step then runs unpinned).
#[derive(Debug)]
pub struct ScratchError(pub String);

impl std::fmt::Display for ScratchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ScratchError {}

/// Create the scratch directory (we run as the job user here) and check it ([`check_scratch`]),
/// so nobody can redirect the user's profiles.
pub fn ensure_scratch(dir: &Path, uid: u32) -> Result<(), ScratchError> {
    use std::os::unix::fs::DirBuilderExt;
    if let Err(e) = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
    {
        return Err(ScratchError(format!(
            "scratch directory {} cannot be created: {e}",
            dir.display()
        )));
    }
    check_scratch(dir, uid)?;
    // A writability check now gives one clear message instead of a failed profiler later.
    tempfile_probe(dir).map_err(|e| {
        ScratchError(format!(
            "scratch directory {} is not writable: {e}",
            dir.display()
        ))
    })
}

/// Refuse a scratch directory another user could swap or fill: it must be the job user's own
/// directory (not a symlink), and every directory above it must belong to root or the job user
/// and, if others may write to it, be sticky like /tmp. Why: with the default `/tmp/cmlb-%u`,
/// anyone could create the directory first and plant a profile (or a FIFO that blocks
/// slurmstepd) where apply looks.
pub fn check_scratch(dir: &Path, uid: u32) -> Result<(), ScratchError> {
    use std::os::unix::fs::MetadataExt;
    let md = std::fs::symlink_metadata(dir)
        .map_err(|e| ScratchError(format!("scratch directory {}: {e}", dir.display())))?;
    if md.file_type().is_symlink() || !md.is_dir() {
        return Err(ScratchError(format!(
            "scratch directory {} is a symlink or not a directory",
            dir.display()
        )));
    }
    if md.uid() != uid {
        return Err(ScratchError(format!(
            "scratch directory {} belongs to uid {}, not the job's uid {uid}",
            dir.display(),
            md.uid()
        )));
    }
    check_parents(dir, uid)
}

/// The directories above `dir` (which need not exist yet): each must belong to root or the
/// user `uid` and, if others may write to it, be sticky like /tmp (see [`check_scratch`]).
pub fn check_parents(dir: &Path, uid: u32) -> Result<(), ScratchError> {
    use std::os::unix::fs::MetadataExt;
    for up in dir.ancestors().skip(1) {
        let Ok(m) = std::fs::symlink_metadata(up) else {
            continue;
        };
        if m.uid() != 0 && m.uid() != uid {
            return Err(ScratchError(format!(
                "scratch directory {}: {} belongs to uid {}, another user",
                dir.display(),
                up.display(),
                m.uid()
            )));
        }
        let others_write = m.mode() & 0o022 != 0 && m.mode() & 0o1000 == 0;
        if !m.file_type().is_symlink() && others_write {
            return Err(ScratchError(format!(
                "scratch directory {}: {} is writable by other users and not sticky",
                dir.display(),
                up.display()
            )));
        }
    }
    Ok(())
}

fn tempfile_probe(dir: &Path) -> std::io::Result<()> {
    let p = dir.join(format!(".cmlb-probe-{}", std::process::id()));
    std::fs::write(&p, b"")?;
    std::fs::remove_file(&p)
}

/// Expand the site's scratch template (`scratch=` in plugstack.conf): `%u` user, `%j` job id,
/// `%n` node, `%%` a percent sign. Unknown `%x` sequences are kept literally.
pub fn expand_scratch(template: &str, user: &str, job: u32, node: &str) -> String {
    let mut out = String::new();
    let mut it = template.chars();
    while let Some(c) = it.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('u') => out.push_str(user),
            Some('j') => out.push_str(&job.to_string()),
            Some('n') => out.push_str(node),
            Some('%') => out.push('%'),
            Some(o) => {
                out.push('%');
                out.push(o);
            }
            None => out.push('%'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_template() {
        assert_eq!(
            expand_scratch("/tmp/cmlb-%u/%j/%n/100%%/%x", "ann", 42, "node1"),
            "/tmp/cmlb-ann/42/node1/100%/%x"
        );
    }
    use std::os::unix::fs::PermissionsExt;

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn scratch_must_be_the_users_own_directory_under_safe_parents() {
        let uid = nix::unistd::geteuid().as_raw();
        let t = tempfile::tempdir().unwrap();
        let parent = t.path().join("shared");
        let dir = parent.join("cmlb-me");
        ensure_scratch(&dir, uid).expect("own directory under a private parent");

        // A parent anyone may write to (and rename entries in) is refused, unless sticky.
        chmod(&parent, 0o777);
        let e = check_scratch(&dir, uid).unwrap_err().0;
        assert!(e.contains("writable by other users and not sticky"), "{e}");
        chmod(&parent, 0o1777);
        check_scratch(&dir, uid).expect("sticky like /tmp");

        // The directory itself: not a symlink, and the job user's.
        let link = parent.join("cmlb-link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        let e = check_scratch(&link, uid).unwrap_err().0;
        assert!(e.contains("is a symlink"), "{e}");
        let e = check_scratch(&dir, uid + 1).unwrap_err().0;
        assert!(e.contains(&format!("not the job's uid {}", uid + 1)), "{e}");

        // A parent owned by another user (needs root to set up).
        if uid == 0 {
            let theirs = t.path().join("theirs");
            std::fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), None).unwrap();
            let mine = theirs.join("cmlb-root");
            std::fs::create_dir(&mine).unwrap();
            let e = check_scratch(&mine, 0).unwrap_err().0;
            assert!(e.contains("belongs to uid 65534, another user"), "{e}");
        }
    }
}
