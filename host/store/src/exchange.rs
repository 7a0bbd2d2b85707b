//! Swapping what two names point to in one atomic step (Linux's `renameat2` with
//! `RENAME_EXCHANGE`), for the files a step rewrites: one system call where a hard link
//! and two renames were needed to replace a file without freeing its blocks.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once the system refused an exchange as such (an old kernel, a file system
/// without it, a sandbox that forbids the call): later calls go straight to the
/// caller's fallback instead of paying a failing call each time.
static UNSUPPORTED: AtomicBool = AtomicBool::new(false);

/// Atomically swaps the files named `a` and `b` (both in one file system): afterwards
/// `a` names what `b` named and `b` what `a` named, and a crash leaves either both names
/// as they were or both swapped.
///
/// `ErrorKind::NotFound` when either does not exist; `ErrorKind::Unsupported` where
/// names cannot be exchanged (not Linux, a kernel before 3.15, a file system without
/// it, a seccomp filter refusing the call): the caller then replaces the file another
/// way.
pub(crate) fn exchange(a: &Path, b: &Path) -> io::Result<()> {
    if UNSUPPORTED.load(Ordering::Relaxed) {
        return Err(io::ErrorKind::Unsupported.into());
    }
    match exchange_names(a, b) {
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP | libc::EPERM)
            ) =>
        {
            UNSUPPORTED.store(true, Ordering::Relaxed);
            Err(io::Error::new(io::ErrorKind::Unsupported, e))
        }
        other => other,
    }
}

#[cfg(target_os = "linux")]
fn exchange_names(a: &Path, b: &Path) -> io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))
    };
    let (a, b) = (c(a)?, c(b)?);
    // The system call itself, not glibc's wrapper (2.28+): the binary still loads where
    // the C library is older, and an old kernel answers ENOSYS.
    // SAFETY: both are valid NUL-terminated strings that outlive the call; AT_FDCWD makes
    // relative paths relative to the current folder, as `std::fs::rename` does.
    let r = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn exchange_names(_: &Path, _: &Path) -> io::Result<()> {
    Err(io::Error::from_raw_os_error(libc::ENOSYS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_files_swap_and_a_missing_one_is_not_found() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        std::fs::write(&a, b"first").unwrap();
        std::fs::write(&b, b"second, longer").unwrap();
        match exchange(&a, &b) {
            Ok(()) => {
                assert_eq!(std::fs::read(&a).unwrap(), b"second, longer");
                assert_eq!(std::fs::read(&b).unwrap(), b"first");
            }
            // Where the system cannot: nothing moved.
            Err(e) => {
                assert_eq!(e.kind(), io::ErrorKind::Unsupported, "{e}");
                assert_eq!(std::fs::read(&a).unwrap(), b"first");
            }
        }
        let missing = tmp.path().join("missing");
        let e = exchange(&a, &missing).unwrap_err();
        assert!(
            matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::Unsupported
            ),
            "{e}"
        );
        assert!(!missing.exists());
        assert!(a.exists() && b.exists());
    }
}
