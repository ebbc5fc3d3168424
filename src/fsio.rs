//! Files in and out, safely: regular files only, opened without blocking, read with a size
//! cap checked before reading; outputs written beside their target and renamed into place.
//!
//! Every file bilstm reads (a model, its external data, an `.npy` input) goes through
//! [`open_regular`]: the open itself never blocks (`O_NONBLOCK`, so a FIFO with no writer
//! does not hang it) and anything but a regular file (a FIFO, `/dev/zero`, a directory, a
//! socket) is refused with an error saying what it is. Outputs go through [`write_atomic`]:
//! a temporary file in the target's directory, then renamed over the target (not synced: see
//! [`write_atomic`]), so a failed or interrupted write never destroys the previous file and two
//! writers never mix.

use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// What a path that is not a regular file is, in a few words.
fn kind_of(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    "not a regular file"
}

/// The error for a path that is not a regular file.
fn not_regular(meta: &Metadata) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{}, not a regular file", kind_of(meta)),
    )
}

/// Opens `path` for reading without blocking and checks that it is a regular file; returns
/// the file and its length in bytes.
///
/// # Errors
/// The operating system's error (missing, no permission), or [`io::ErrorKind::InvalidInput`]
/// saying what the path is when it is not a regular file.
pub(crate) fn open_regular(path: &Path) -> io::Result<(File, u64)> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // A FIFO's open blocks until a writer appears; with O_NONBLOCK it returns at once and
        // the type check below refuses it. O_NONBLOCK has no effect on regular files.
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(not_regular(&meta));
    }
    Ok((file, meta.len()))
}

/// Reads all of the regular file `path`, refusing before reading one that holds more than
/// `cap` bytes.
///
/// # Errors
/// As [`open_regular`]; [`io::ErrorKind::InvalidData`] for a file over `cap`; a read error.
pub(crate) fn read_capped(path: &Path, cap: u64) -> io::Result<Vec<u8>> {
    let (file, len) = open_regular(path)?;
    if len > cap {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("holds {len} bytes, more than the {cap} bilstm reads for it"),
        ));
    }
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(usize::try_from(len).unwrap_or(usize::MAX))
        .map_err(|_| io::Error::new(io::ErrorKind::OutOfMemory, "cannot allocate its bytes"))?;
    // `take`: a file that grows while read still yields at most `cap + 1` bytes.
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("grew past {cap} bytes while read"),
        ));
    }
    Ok(bytes)
}

/// Whether two paths name the same existing file (same device and inode on Unix, the same
/// canonical path elsewhere). `false` when either does not exist.
#[cfg_attr(not(feature = "cli"), allow(dead_code))]
pub(crate) fn same_file(a: &Path, b: &Path) -> bool {
    let (Ok(ma), Ok(mb)) = (fs::metadata(a), fs::metadata(b)) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        ma.dev() == mb.dev() && ma.ino() == mb.ino()
    }
    #[cfg(not(unix))]
    {
        let _ = (ma, mb);
        matches!((fs::canonicalize(a), fs::canonicalize(b)), (Ok(x), Ok(y)) if x == y)
    }
}

/// Checks, before any work, that an output can be written at `path`: the path names no
/// existing file other than a regular one (a link to one is followed), and its directory
/// exists. Returns the path the finished output is renamed to (the link's target when
/// `path` is a symbolic link to a file, so the link stays).
///
/// Outputs must be regular files because they are written beside the target and renamed
/// into place: `/dev/stdout`, a FIFO or a device cannot be replaced that way and are
/// refused (print a checksum instead, or write a file and read it).
///
/// # Errors
/// [`io::ErrorKind::InvalidInput`] naming what the path is, or the operating system's error
/// for the directory.
pub(crate) fn check_output(path: &Path) -> io::Result<PathBuf> {
    let target = match fs::metadata(path) {
        Ok(meta) if meta.is_file() => fs::canonicalize(path)?,
        Ok(meta) => return Err(not_regular(&meta)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => path.to_path_buf(),
        Err(e) => return Err(e),
    };
    let dir = directory_of(&target);
    let meta = fs::metadata(dir).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("its directory {} is not usable: {e}", dir.display()),
        )
    })?;
    if !meta.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a directory", dir.display()),
        ));
    }
    Ok(target)
}

/// The directory a file path lies in (`.` for a bare name).
fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Distinguishes the temporary files of one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes a file at `target` through `fill`: into a new temporary file in the same
/// directory (created exclusively), flushed, then renamed over `target`. On any
/// failure the temporary file is removed and `target` is left as it was.
///
/// # Errors
/// Whatever creating, writing, syncing or renaming met.
pub(crate) fn write_atomic(
    target: &Path,
    fill: impl FnOnce(&mut (dyn Write + Send)) -> io::Result<()>,
) -> io::Result<()> {
    let dir = directory_of(target);
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".into());
    let (temp, file) = loop {
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let temp = dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
        match OpenOptions::new().write(true).create_new(true).open(&temp) {
            Ok(file) => break (temp, file),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 1_000_000 => continue,
            Err(e) => return Err(e),
        }
    };
    let result = (|| {
        let mut out = io::BufWriter::new(file);
        fill(&mut out)?;
        out.flush()?;
        // Not synced: the rename makes the file appear whole or not at all to every reader (and
        // a failure leaves the old one); durability across a power loss is the OS's, as for
        // any file written without fsync. A sync of a 617 MB output cost about a second on the
        // H200 machine (issue 11: `bilstm run` on 1024 windows, 1.98 s in all).
        let file = out.into_inner().map_err(io::IntoInnerError::into_error)?;
        drop(file);
        fs::rename(&temp, target)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_files_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let e = open_regular(dir.path()).unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
        let e = open_regular(Path::new("/dev/zero")).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        let e = read_capped(Path::new("/dev/zero"), 16).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("f");
        let status = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !status.is_ok_and(|s| s.success()) {
            return; // no mkfifo here: nothing to test
        }
        let e = open_regular(&fifo).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
        assert!(check_output(&fifo).is_err());
    }

    #[test]
    fn reads_are_capped_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a");
        fs::write(&p, [7u8; 100]).unwrap();
        assert_eq!(read_capped(&p, 100).unwrap().len(), 100);
        let e = read_capped(&p, 99).unwrap_err();
        assert!(e.to_string().contains("holds 100 bytes"), "{e}");
    }

    #[test]
    fn atomic_writes_keep_the_old_file_on_failure() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("y");
        fs::write(&p, b"old").unwrap();
        let e = write_atomic(&p, |w: &mut (dyn Write + Send)| {
            w.write_all(b"partial")?;
            Err(io::Error::other("interrupted"))
        });
        assert!(e.is_err());
        assert_eq!(fs::read(&p).unwrap(), b"old");
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "temp file left"
        );
        write_atomic(&p, |w| w.write_all(b"new")).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"new");
        assert!(same_file(&p, &p));
        assert!(!same_file(&p, &dir.path().join("missing")));
        assert!(check_output(Path::new("/dev/null")).is_err());
        assert!(check_output(&dir.path().join("no/such/dir/y.npy")).is_err());
        assert_eq!(check_output(&p).unwrap(), fs::canonicalize(&p).unwrap());
    }
}
