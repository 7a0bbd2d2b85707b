//! Bounded reads of workspace files: the one way the host reads a file a model, a task
//! or a plugin can name.
//!
//! A workspace may hold anything: a FIFO (reading it blocks forever), a device node
//! (`/dev/zero` never ends), a socket, a file another process keeps growing, a sparse
//! file of terabytes. [`read_regular_file`] therefore
//!
//! - looks at the path without following it (`lstat`) and refuses anything but a regular
//!   file before opening it, so a device node is never even opened;
//! - opens with `O_NONBLOCK | O_NOFOLLOW` (a FIFO swapped in after the check cannot block
//!   the open, a symlink swapped in cannot redirect it) and checks the opened handle
//!   again (`fstat`);
//! - reads through `take(cap + 1)`: whatever the file's size claims or becomes, at most
//!   `cap + 1` bytes are read, and the extra byte only tells that there was more.
//!
//! Over the cap, the read is **truncated, not refused**: [`BoundedRead::truncated`] says so
//! and the first `cap` bytes are kept. Callers that need the whole file (an edit must not
//! write back half a file) call [`BoundedRead::complete`], which turns a truncated read
//! into [`ReadError::TooLarge`]; callers that only show text mark the cut instead.

use std::borrow::Cow;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::path::Path;

/// Why a workspace file was not read. The display text names the path and says what to
/// do, because it usually ends up in front of the model or the user.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Nothing is at the path.
    #[error("`{path}` does not exist")]
    NotFound {
        /// The path as shown.
        path: String,
    },
    /// The path is a FIFO, a device, a socket, a folder or a symlink.
    #[error("`{path}` is {kind}, not a regular file; only regular files are read")]
    NotRegular {
        /// The path as shown.
        path: String,
        /// What it is (`a FIFO (named pipe)`, `a character device`, ...).
        kind: &'static str,
    },
    /// The file is larger than the reader's cap and the caller needs all of it.
    #[error("`{path}` is larger than the {cap} bytes that may be read ({size} bytes)")]
    TooLarge {
        /// The path as shown.
        path: String,
        /// The size the file reports, or at least `cap + 1`.
        size: u64,
        /// The cap.
        cap: u64,
    },
    /// Any other I/O error.
    #[error("cannot read `{path}`: {source}")]
    Io {
        /// The path as shown.
        path: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

impl ReadError {
    /// The same error with the path shown as `shown` (a workspace-relative form).
    pub fn shown_as(mut self, shown: &str) -> ReadError {
        match &mut self {
            ReadError::NotFound { path }
            | ReadError::NotRegular { path, .. }
            | ReadError::TooLarge { path, .. }
            | ReadError::Io { path, .. } => *path = shown.to_string(),
        }
        self
    }
}

/// What [`read_regular_file`] read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundedRead {
    /// At most `cap` bytes from the start of the file.
    pub bytes: Vec<u8>,
    /// Whether the file had more than `cap` bytes (the rest was not read).
    pub truncated: bool,
    /// The size the file reported when opened (`fstat`); may be smaller than what was
    /// read for files that grow or report no size (`/proc`).
    pub size: u64,
    /// The cap the read was made with.
    pub cap: u64,
    /// The path as shown in errors.
    path: String,
}

impl BoundedRead {
    /// The bytes as text; invalid UTF-8 is replaced (`U+FFFD`), never an error.
    pub fn text(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.bytes)
    }

    /// The whole file, or [`ReadError::TooLarge`] when it was cut at the cap.
    pub fn complete(self) -> Result<Vec<u8>, ReadError> {
        if self.truncated {
            return Err(ReadError::TooLarge {
                path: self.path,
                size: self.size.max(self.cap + 1),
                cap: self.cap,
            });
        }
        Ok(self.bytes)
    }
}

/// What a file type is called in errors.
fn kind_of(ft: &fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if ft.is_char_device() {
            return "a character device";
        }
        if ft.is_block_device() {
            return "a block device";
        }
        if ft.is_socket() {
            return "a socket";
        }
    }
    if ft.is_dir() {
        "a folder"
    } else if ft.is_symlink() {
        "a symlink"
    } else {
        "not a regular file"
    }
}

#[cfg(unix)]
fn open_no_block_no_follow(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path)
}

#[cfg(not(unix))]
fn open_no_block_no_follow(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).open(path)
}

/// Reads at most `cap` bytes of the regular file at `path` (see the module docs).
///
/// The path is used as given: symlinks are refused, not followed, so callers resolve a
/// model-given path first ([`super::Workspace::read_bounded`] does both).
pub fn read_regular_file(path: &Path, cap: u64) -> Result<BoundedRead, ReadError> {
    let shown = path.display().to_string();
    let io_error = |source: io::Error| match source.kind() {
        io::ErrorKind::NotFound => ReadError::NotFound {
            path: shown.clone(),
        },
        _ => ReadError::Io {
            path: shown.clone(),
            source,
        },
    };
    let not_regular = |kind| ReadError::NotRegular {
        path: shown.clone(),
        kind,
    };
    // Before opening: opening a device can itself have effects, and opening a FIFO
    // without O_NONBLOCK waits for a writer.
    let before = fs::symlink_metadata(path).map_err(io_error)?;
    if !before.file_type().is_file() {
        return Err(not_regular(kind_of(&before.file_type())));
    }
    let file = open_no_block_no_follow(path).map_err(|e| {
        // O_NOFOLLOW reports a symlink swapped in since the check as ELOOP.
        #[cfg(unix)]
        if e.raw_os_error() == Some(libc::ELOOP) {
            return not_regular("a symlink");
        }
        io_error(e)
    })?;
    // The handle is what is read: check it, not the path, which may have changed.
    let meta = file.metadata().map_err(io_error)?;
    if !meta.file_type().is_file() {
        return Err(not_regular(kind_of(&meta.file_type())));
    }
    let mut bytes = Vec::with_capacity(meta.len().min(cap) as usize);
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io_error)?;
    let truncated = bytes.len() as u64 > cap;
    bytes.truncate(cap as usize);
    Ok(BoundedRead {
        bytes,
        truncated,
        size: meta.len(),
        cap,
        path: shown,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_small_files_whole_and_lossy() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.txt");
        fs::write(&p, b"ok \xff\n").unwrap();
        let r = read_regular_file(&p, 100).unwrap();
        assert!(!r.truncated);
        assert_eq!(r.size, 5);
        assert_eq!(r.text(), "ok \u{fffd}\n");
        assert_eq!(r.complete().unwrap(), b"ok \xff\n");
    }

    #[test]
    fn caps_at_exactly_cap_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.txt");
        fs::write(&p, b"0123456789").unwrap();
        let exact = read_regular_file(&p, 10).unwrap();
        assert!(!exact.truncated);
        let cut = read_regular_file(&p, 4).unwrap();
        assert!(cut.truncated);
        assert_eq!(cut.bytes, b"0123");
        let err = cut.complete().unwrap_err().to_string();
        assert!(err.contains("a.txt") && err.contains("4 bytes"), "{err}");
    }

    #[test]
    fn a_huge_sparse_file_is_cut_at_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sparse.bin");
        File::create(&p).unwrap().set_len(1 << 40).unwrap();
        let r = read_regular_file(&p, 1024).unwrap();
        assert!(r.truncated);
        assert_eq!(r.bytes.len(), 1024);
        assert_eq!(r.size, 1 << 40);
    }

    #[cfg(unix)]
    #[test]
    fn fifo_device_folder_and_symlink_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo has no other preconditions.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let err = read_regular_file(&fifo, 10).unwrap_err().to_string();
        assert!(err.contains("FIFO") && err.contains("pipe"), "{err}");

        let err = read_regular_file(Path::new("/dev/zero"), 10).unwrap_err();
        assert!(err.to_string().contains("character device"), "{err}");

        let err = read_regular_file(dir.path(), 10).unwrap_err();
        assert!(err.to_string().contains("a folder"), "{err}");

        std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero")).unwrap();
        let err = read_regular_file(&dir.path().join("zero"), 10).unwrap_err();
        assert!(err.to_string().contains("a symlink"), "{err}");

        let err = read_regular_file(&dir.path().join("missing"), 10).unwrap_err();
        assert!(matches!(err, ReadError::NotFound { .. }), "{err}");
        let shown = err.shown_as("src/missing").to_string();
        assert_eq!(shown, "`src/missing` does not exist");
    }
}
