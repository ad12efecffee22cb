//! Every file nodescope writes goes through here: created new, or replaced
//! by a rename in its own directory, never opened through a link.
//!
//! Why: a path nodescope writes may be a symbolic link someone else put
//! there (`tls.key -> /etc/somewhere`). Opening it for writing would write
//! the private key into the link's target and chmod it; a rename replaces
//! the directory entry itself, so the target is never touched. The
//! temporary file is created with `O_CREAT|O_EXCL` (which refuses a link
//! too) and its final mode, so the bytes are never readable by others, not
//! even for a moment.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Who may read a file nodescope writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// 0600: a private key.
    Private,
    /// 0666 less the umask, as any new file.
    Public,
}

impl Mode {
    fn bits(self) -> u32 {
        match self {
            Mode::Private => 0o600,
            Mode::Public => 0o666,
        }
    }
}

/// Creates `path` holding `bytes`; fails with `AlreadyExists` when anything
/// is there, a dangling link included (`O_CREAT|O_EXCL`).
///
/// # Errors
/// The file exists, or the directory cannot be written.
pub fn write_new(path: &Path, bytes: &[u8], mode: Mode) -> std::io::Result<()> {
    let mut file = create_exclusive(path, mode)?;
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    if written.is_err() {
        let _ = std::fs::remove_file(path);
    }
    written
}

/// Writes `bytes` to a new temporary file beside `path` and renames it over
/// `path`: whatever `path` was (a file, a link) is replaced, a link's target
/// is left as it was, and a crash leaves the old file or the new one.
///
/// # Errors
/// The directory cannot be written, or `path` is a directory.
pub fn replace(path: &Path, bytes: &[u8], mode: Mode) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (tmp, mut file) = temporary(dir, &name, mode)?;
    let written = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Whether `path` is a symbolic link (not following it).
#[must_use]
pub fn is_link(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// A new file `.NAME.<n>.tmp` in `dir`, trying further numbers while a name
/// is taken.
fn temporary(dir: &Path, name: &str, mode: Mode) -> std::io::Result<(PathBuf, std::fs::File)> {
    let seed = u64::from(std::process::id()) << 20;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::from(d.subsec_nanos()));
    let mut last = None;
    for attempt in 0..100u64 {
        let tmp = dir.join(format!(".{name}.{:x}.tmp", seed ^ nanos ^ attempt));
        match create_exclusive(&tmp, mode) {
            Ok(file) => return Ok((tmp, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free temporary name")))
}

fn create_exclusive(path: &Path, mode: Mode) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // With O_EXCL, a link (even a dangling one) is EEXIST (POSIX).
        options.mode(mode.bits());
    }
    #[cfg(not(unix))]
    let _ = mode.bits();
    options.open(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn replace_replaces_a_link_and_leaves_its_target_as_it_was() {
        let dir = tempfile::tempdir().expect("tempdir");
        let outside = dir.path().join("outside");
        std::fs::write(&outside, "theirs").expect("written");
        std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o644)).expect("mode");
        let link = dir.path().join("tls.key");
        std::os::unix::fs::symlink(&outside, &link).expect("link");
        replace(&link, b"ours", Mode::Private).expect("replaced");
        assert_eq!(std::fs::read(&outside).expect("read"), b"theirs");
        let mode = std::fs::metadata(&outside)
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o644);
        let meta = std::fs::symlink_metadata(&link).expect("meta");
        assert!(meta.file_type().is_file());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read(&link).expect("read"), b"ours");
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .expect("listed")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(left.len(), 2, "no temporary file is left: {left:?}");
    }

    #[test]
    fn write_new_refuses_a_dangling_link() {
        let dir = tempfile::tempdir().expect("tempdir");
        let target = dir.path().join("nowhere");
        let link = dir.path().join("ca.crt");
        std::os::unix::fs::symlink(&target, &link).expect("link");
        let error = write_new(&link, b"x", Mode::Public).expect_err("refused");
        assert_eq!(error.kind(), std::io::ErrorKind::AlreadyExists);
        assert!(!target.exists());
    }
}
