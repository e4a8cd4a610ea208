//! Preparing a regular file as a run target: it must hold real data wherever the job reads.
//!
//! A file grown with `set_len` (or `truncate`) is sparse, and on Linux file systems a read of a
//! hole, or of a preallocated but unwritten extent, is answered from memory without touching the
//! device: a job "reading" such a file would measure the CPU, not the storage, and every scheduler
//! would look alike. So the target is created if missing, grown if short, and every hole in the
//! job's range is filled with written data. Existing data is never overwritten.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;

const CHUNK: usize = 1 << 20;

/// Makes `path` a regular file of at least `needed` bytes with no holes below `needed`; returns how
/// many bytes were written to fill holes. Block devices and other non-regular files are left alone.
pub fn prepare_file(path: &Path, needed: u64) -> io::Result<u64> {
    match std::fs::metadata(path) {
        Ok(meta) if !meta.is_file() => return Ok(0),
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
    if file.metadata()?.len() < needed {
        file.set_len(needed)?;
    }
    let mut filled = 0;
    for (start, end) in holes(&file, needed)? {
        filled += fill(&file, start, end)?;
    }
    if filled > 0 {
        file.sync_all()?;
    }
    Ok(filled)
}

/// The holes of `file` below `limit`, as `[start, end)` byte ranges (SEEK_HOLE/SEEK_DATA).
fn holes(file: &File, limit: u64) -> io::Result<Vec<(u64, u64)>> {
    let fd = file.as_raw_fd();
    let mut out = Vec::new();
    let mut pos = 0u64;
    while pos < limit {
        // SAFETY: lseek on a file descriptor we own; no memory is passed.
        let hole = unsafe { libc::lseek(fd, pos as libc::off_t, libc::SEEK_HOLE) };
        if hole < 0 {
            return Err(io::Error::last_os_error());
        }
        let hole = hole as u64;
        if hole >= limit {
            break;
        }
        // SAFETY: as above.
        let data = unsafe { libc::lseek(fd, hole as libc::off_t, libc::SEEK_DATA) };
        let end = if data < 0 {
            let e = io::Error::last_os_error();
            // ENXIO: no data after `hole`, the rest of the file is a hole.
            if e.raw_os_error() != Some(libc::ENXIO) {
                return Err(e);
            }
            limit
        } else {
            (data as u64).min(limit)
        };
        out.push((hole, end));
        pos = end;
    }
    Ok(out)
}

fn fill(file: &File, start: u64, end: u64) -> io::Result<u64> {
    // Not zeros: some file systems and devices treat zero blocks specially.
    let pattern: Vec<u8> = (0..CHUNK).map(|i| (i.wrapping_mul(131) >> 3) as u8 ^ 0x5a).collect();
    let mut pos = start;
    while pos < end {
        let n = ((end - pos) as usize).min(CHUNK);
        file.write_all_at(&pattern[..n], pos)?;
        pos += n as u64;
    }
    Ok(end - start)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> std::path::PathBuf {
        std::path::PathBuf::from(format!("/var/tmp/bfq-io-target-{}-{name}", std::process::id()))
    }

    #[test]
    fn a_missing_file_is_created_with_data_and_no_holes() {
        let path = temp("missing");
        let filled = prepare_file(&path, 3 << 20).unwrap();
        let file = File::open(&path).unwrap();
        let holes = holes(&file, 3 << 20).unwrap();
        let len = file.metadata().unwrap().len();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(filled, 3 << 20);
        assert_eq!(len, 3 << 20);
        assert!(holes.is_empty(), "holes left: {holes:?}");
    }

    #[test]
    fn existing_data_is_kept_and_only_holes_are_filled() {
        let path = temp("keep");
        std::fs::write(&path, vec![7u8; 1 << 20]).unwrap();
        let filled = prepare_file(&path, 4 << 20).unwrap();
        let head = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(filled, 3 << 20);
        assert!(head[..1 << 20].iter().all(|&b| b == 7), "existing data was overwritten");
        assert_eq!(head.len(), 4 << 20);
    }
}
