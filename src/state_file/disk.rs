//! The state file on disk: read whole at start, written atomically. A
//! write goes to a temporary file beside it (`<name>.tmp`), is flushed and
//! synced to the disk, then renamed over the file, and the directory is
//! synced: a crash or a full disk at any moment leaves the last complete
//! file, never a half-written one. A failed write removes its temporary
//! file.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read};
use std::path::{Path, PathBuf};

/// The largest state file read: about 2 KiB a group, so some 100,000
/// groups. A larger file is not one this exporter wrote, and reading it
/// would cost memory in proportion.
pub const MAX_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// A state file that could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
    /// A step of reading or writing it failed.
    #[error("state file {path}: cannot {step}: {source}")]
    Io {
        /// The file (or its temporary file, or its directory).
        path: PathBuf,
        /// What was being done.
        step: &'static str,
        /// Why it failed.
        source: io::Error,
    },
    /// It is larger than [`MAX_FILE_BYTES`].
    #[error(
        "state file {path}: {bytes} bytes, more than the {MAX_FILE_BYTES} a state file may hold"
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        bytes: u64,
    },
}

/// The file's bytes; `None` when there is none.
///
/// # Errors
/// When it exists but cannot be read, or is too large.
pub fn read(path: &Path) -> Result<Option<Vec<u8>>, StateFileError> {
    let io = |step| {
        move |source| StateFileError::Io {
            path: path.to_path_buf(),
            step,
            source,
        }
    };
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io("open")(e)),
    };
    let bytes = file.metadata().map_err(io("read the size of"))?.len();
    if bytes > MAX_FILE_BYTES {
        return Err(StateFileError::TooLarge {
            path: path.to_path_buf(),
            bytes,
        });
    }
    let mut out = Vec::with_capacity(usize::try_from(bytes).unwrap_or(0));
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut out)
        .map_err(io("read"))?;
    Ok(Some(out))
}

/// The temporary file a write of `path` goes to first.
pub fn temporary(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Replaces the file at `path` with what `write` writes, atomically: the
/// file is either the old one or the whole new one. Readable by its owner
/// only (it holds the names of streams and groups).
///
/// # Errors
/// When a step fails (`write` included); the old file is then left as it
/// was and the temporary file removed.
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> Result<(), StateFileError> {
    let temp = temporary(path);
    let result = write_then_rename(path, &temp, write);
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

fn write_then_rename(
    path: &Path,
    temp: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> Result<(), StateFileError> {
    let io = |at: &Path, step| {
        let at = at.to_path_buf();
        move |source| StateFileError::Io {
            path: at,
            step,
            source,
        }
    };
    let mut options = OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options.open(temp).map_err(io(temp, "create"))?;
    let mut out = BufWriter::new(file);
    write(&mut out).map_err(io(temp, "write"))?;
    let file = out
        .into_inner()
        .map_err(|e| io(temp, "write")(e.into_error()))?;
    file.sync_all().map_err(io(temp, "sync to the disk"))?;
    drop(file);
    fs::rename(temp, path).map_err(io(path, "replace"))?;
    // The rename itself is durable once the directory is synced.
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir, "sync the directory"))?;
    Ok(())
}
