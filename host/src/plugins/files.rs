//! Bounded reads of the files a plugin folder holds (its manifest and component).

use std::io::Read;
use std::path::Path;

/// The bytes of `path` if it is a regular file of at most `cap` bytes.
///
/// Opened without blocking (a FIFO would wait for a writer forever) and checked on the
/// opened handle (no race with a swap after a check by path); at most `cap + 1` bytes are
/// read, so a file that grows or a device that never ends cannot exhaust memory.
pub(crate) fn read_regular(path: &Path, cap: u64) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file (a folder, FIFO, socket or device is never read)",
        ));
    }
    if meta.len() > cap {
        return Err(too_large(meta.len(), cap));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(too_large(bytes.len() as u64, cap));
    }
    Ok(bytes)
}

fn too_large(size: u64, cap: u64) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("{size} bytes, beyond the cap of {cap} bytes"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifos_folders_and_large_files_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_regular(&fifo, 100).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        assert!(read_regular(dir.path(), 100).is_err());
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'x'; 101]).unwrap();
        assert!(read_regular(&big, 100)
            .unwrap_err()
            .to_string()
            .contains("beyond the cap of 100"));
        assert_eq!(read_regular(&big, 101).unwrap().len(), 101);
        assert!(read_regular(Path::new("/dev/zero"), 100).is_err());
    }
}
