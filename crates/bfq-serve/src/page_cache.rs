//! Which pages of an export's file are in the page cache (`cache = "read"`, docs/serve.md), so that
//! a read can be answered from memory when all of its pages are there and go through the scheduler
//! when any is not. Not a mechanism of the papers: it keeps what the scheduler orders (the device's
//! work) apart from what it should not ration (copies from memory).

use std::os::fd::AsRawFd;

/// `cachestat(2)` (Linux 6.5): 451 on every architecture, as all system calls numbered from 424 on
/// share one table.
const SYS_CACHESTAT: libc::c_long = 451;

#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

/// The kernel's page size, in bytes.
fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).ok().filter(|&s| s > 0).unwrap_or(4096)
}

/// Whether every page of `offset..offset + len` of `file` is in the page cache.
pub fn all_cached(file: &std::fs::File, offset: u64, len: u64) -> std::io::Result<bool> {
    if len == 0 {
        return Ok(true);
    }
    let page = page_size();
    let first = offset / page;
    let last = (offset + len).div_ceil(page);
    let range = CachestatRange { off: first * page, len: (last - first) * page };
    let mut stat = Cachestat::default();
    // SAFETY: both pointers are to live values of the layouts the system call takes (struct
    // cachestat_range and struct cachestat of the kernel's uapi), and the descriptor is open.
    let r = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            file.as_raw_fd(),
            &range as *const CachestatRange,
            &mut stat as *mut Cachestat,
            0u32,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(stat.nr_cache >= last - first)
}

/// Drops the clean cached pages under `offset..offset + len` (whole pages, rounded outwards) before
/// a direct write over them. The kernel would drop them itself, but a direct write over cached pages
/// cannot be started without waiting, so io_uring hands each one to a worker thread: random 4 KiB
/// writes over a file that hot reads had cached ran at 33,000-47,000 IOPS against 60,000 over the
/// same file uncached, with 45 % of the server's CPU in the worker (docs/serve.md, "Writes over
/// cached pages"). Only an optimization: a page that a read brings back in between, or that this
/// leaves (locked, under read), is still dropped by the kernel's own direct-write path.
pub fn forget(file: &std::fs::File, offset: u64, len: u64) {
    if len == 0 {
        return;
    }
    let page = page_size();
    let start = offset - offset % page;
    let end = (offset + len).next_multiple_of(page);
    // Errors only say the advice was not taken; the write stays correct without it.
    let _ = rustix::fs::fadvise(
        file,
        start,
        std::num::NonZeroU64::new(end - start),
        rustix::fs::Advice::DontNeed,
    );
}

/// Readies the buffered descriptor of an export with `cache = "read"`: the kernel does no read-ahead
/// on it (a read that misses reads its own pages, through the scheduler; the server's windows read
/// ahead, as tenants' requests), and `cachestat` must work.
pub fn prepare(file: &std::fs::File) -> Result<(), String> {
    rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::Random)
        .map_err(|e| format!("cannot turn the kernel's read-ahead off on it: {e}"))?;
    check_cachestat(file)
}

/// Whether `cachestat` answers on `file` (the kernel has it: Linux 6.5 or later), with the error
/// [`prepare`] gives when it does not: `bfq serve --check` asks it too, of a file that a start would
/// create on the directory it would be created in.
pub fn check_cachestat(file: &std::fs::File) -> Result<(), String> {
    all_cached(file, 0, 1)
        .map(|_| ())
        .map_err(|e| format!("cannot ask which of its pages are cached (cachestat, Linux 6.5 or later): {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// After the file's pages are dropped, a page read (without read-ahead) is counted as cached
    /// and one never read is not; a range is cached only if every page of it is; forgetting a range
    /// drops the pages under it (rounded outwards) and no other.
    #[test]
    fn a_range_is_cached_only_if_every_page_of_it_is_and_forgetting_drops_whole_pages() {
        let path = std::env::temp_dir().join(format!("bfq-page-cache-{}.img", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let page = page_size();
        std::fs::write(&path, vec![7u8; (256 * page) as usize]).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        rustix::fs::fdatasync(&file).unwrap();
        rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed).unwrap();
        assert!(!all_cached(&file, 0, page).unwrap(), "dropped");
        rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::Random).unwrap();
        let mut buf = vec![0u8; (2 * page) as usize];
        assert_eq!(rustix::io::pread(&file, &mut buf, 64 * page).unwrap(), buf.len());
        assert!(all_cached(&file, 64 * page, 2 * page).unwrap(), "pages 64 and 65 were read");
        assert!(all_cached(&file, 64 * page + 10, 20).unwrap(), "a few bytes of page 64");
        assert!(!all_cached(&file, 65 * page, 2 * page).unwrap(), "page 66 was not read");
        assert!(!all_cached(&file, 200 * page + 10, 5).unwrap(), "a few bytes of page 200");
        assert!(all_cached(&file, 3 * page, 0).unwrap(), "nothing is always cached");
        // Forgetting a few bytes drops the whole page under them, and only that page.
        forget(&file, 64 * page + 10, 20);
        assert!(!all_cached(&file, 64 * page, page).unwrap(), "page 64 was forgotten");
        assert!(all_cached(&file, 65 * page, page).unwrap(), "page 65 was not");
    }
}
