//! Huge pages for fio's buffers ([`crate::fio::FioBuffers::HugePages`]), so that the kernel's
//! schedulers read into memory of the same kind as the engine's (docs/performance.md, "The convoy's
//! cause and its fix": on a virtio disk without indirect descriptors every physically contiguous
//! piece of a request takes one descriptor of the ring, and a 128 KiB read into base pages can take
//! 32).
//!
//! fio maps its buffers with `MAP_HUGETLB`, which draws on the kernel's huge page pool. A machine
//! usually has none reserved (`vm.nr_hugepages` 0), so a run allows the pages it needs as *surplus*
//! pages (`vm.nr_overcommit_hugepages`): they are taken from free memory when fio maps them and given
//! back when it exits, and nothing is held while no fio runs. The setting is raised only by what is
//! missing, and put back when the run ends (also on an interrupt, and by the next run after a
//! SIGKILL: [`crate::cleanup`]) unless someone changed it since.

use std::path::{Path, PathBuf};

use crate::cleanup::{self, Action, Guard};

/// The kernel's limit on surplus huge pages.
pub const OVERCOMMIT: &str = "/proc/sys/vm/nr_overcommit_hugepages";

/// The huge pages a run's fio processes may map; the setting raised for them is put back on drop.
#[derive(Debug)]
pub struct HugePages {
    /// The size of one page, bytes.
    pub page_bytes: u64,
    /// Pages allowed.
    pub pages: u64,
    _restore: Option<Guard>,
}

/// The size of the system's default huge page, or why there is none.
pub fn page_bytes() -> Result<u64, String> {
    let meminfo = read("/proc/meminfo")?;
    meminfo_kib(&meminfo, "Hugepagesize")
        .map(|kib| kib * 1024)
        .filter(|&b| b > 0)
        .ok_or_else(|| "this kernel has no huge pages (no Hugepagesize in /proc/meminfo)".to_string())
}

/// Makes `pages` huge pages of the default size available to this process's children until the
/// returned value is dropped, raising [`OVERCOMMIT`] by what the pool lacks; checks that the kernel
/// can give them now by mapping them once. The error says why not (the caller then keeps fio's
/// buffers on the heap, and says so).
pub fn allow(pages: u64) -> Result<HugePages, String> {
    let page_bytes = page_bytes()?;
    let meminfo = read("/proc/meminfo")?;
    let field =
        |name: &str| meminfo_kib(&meminfo, name).ok_or_else(|| format!("/proc/meminfo has no {name} line"));
    let (free, reserved, surplus) =
        (field("HugePages_Free")?, field("HugePages_Rsvd")?, field("HugePages_Surp")?);
    let bytes = pages.saturating_mul(page_bytes);
    // Never a large part of the machine's memory for buffers: heap buffers then, and a note.
    let available_kib = field("MemAvailable")?;
    if bytes / 1024 > available_kib / 4 {
        return Err(format!(
            "{pages} huge pages ({} MiB) would be more than a quarter of the available memory ({} MiB)",
            bytes >> 20,
            available_kib >> 10
        ));
    }
    let overcommit = read_number(Path::new(OVERCOMMIT))?;
    let set = limit_needed(pages, free, reserved, surplus);
    let restore = if set > overcommit {
        let guard = cleanup::register(Action::RestoreSetting {
            path: PathBuf::from(OVERCOMMIT),
            before: overcommit,
            set,
        });
        std::fs::write(OVERCOMMIT, format!("{set}\n"))
            .map_err(|e| format!("cannot raise {OVERCOMMIT} to {set}: {e}"))?;
        Some(guard)
    } else {
        None
    };
    try_map(bytes, page_bytes)?;
    Ok(HugePages { page_bytes, pages, _restore: restore })
}

/// The surplus limit under which `pages` more pages can be mapped, given the pool's free and
/// reserved pages and the surplus pages in use. Surplus pages in use count against the limit (and
/// may exceed it, when it was lowered while they were held), so the limit must cover them and the
/// new pages that the free, unreserved ones do not.
fn limit_needed(pages: u64, free: u64, reserved: u64, surplus: u64) -> u64 {
    surplus + pages.saturating_sub(free.saturating_sub(reserved))
}

/// Maps `bytes` of huge pages once and unmaps them: the mapping reserves every page, so it fails now
/// rather than in fio if the kernel cannot find that many (free memory too fragmented).
fn try_map(bytes: u64, page_bytes: u64) -> Result<(), String> {
    if bytes == 0 {
        return Ok(());
    }
    let len =
        usize::try_from(bytes).map_err(|_| format!("{bytes} bytes of huge pages do not fit in memory"))?;
    // SAFETY: a fresh private anonymous mapping, never read or written, unmapped at once; no Rust
    // object refers to it.
    unsafe {
        let addr = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_HUGETLB,
            -1,
            0,
        );
        if addr == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            return Err(format!(
                "the kernel could not give {} huge pages of {} KiB ({e}); free memory may be too fragmented",
                bytes / page_bytes.max(1),
                page_bytes / 1024
            ));
        }
        libc::munmap(addr, len);
    }
    Ok(())
}

fn read(path: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))
}

fn read_number(path: &Path) -> Result<u64, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    text.trim().parse().map_err(|_| format!("{}: expected a number, found {:?}", path.display(), text.trim()))
}

/// The number of a /proc/meminfo line (`Hugepagesize:    2048 kB`, `HugePages_Free:  0`).
fn meminfo_kib(meminfo: &str, name: &str) -> Option<u64> {
    meminfo.lines().find_map(|line| {
        let (key, rest) = line.split_once(':')?;
        (key.trim() == name).then(|| rest.split_whitespace().next()?.parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_covers_surplus_pages_in_use_and_what_the_free_pool_lacks() {
        // Nothing in the pool, nothing in use: the pages themselves.
        assert_eq!(limit_needed(18, 0, 0, 0), 18);
        // Two surplus pages held by another program (one reserved, not yet touched), limit 0: the
        // limit must be 2 + 18, not 18 (the bug of the first version: fio then could not map all).
        assert_eq!(limit_needed(18, 1, 1, 2), 20);
        // Free unreserved pages of a reserved pool serve first.
        assert_eq!(limit_needed(18, 10, 2, 0), 10);
        assert_eq!(limit_needed(4, 10, 2, 0), 0);
    }

    #[test]
    fn meminfo_lines_are_read_by_name_with_or_without_a_unit() {
        let text = "MemAvailable:   23000000 kB\nHugePages_Free:        3\nHugepagesize:       2048 kB\n";
        assert_eq!(meminfo_kib(text, "Hugepagesize"), Some(2048));
        assert_eq!(meminfo_kib(text, "HugePages_Free"), Some(3));
        assert_eq!(meminfo_kib(text, "MemAvailable"), Some(23_000_000));
        assert_eq!(meminfo_kib(text, "HugePages_Surp"), None);
    }
}
