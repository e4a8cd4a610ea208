//! Preparing a run's target without ever destroying data the program did not write (issue 14; what is
//! written where: docs/safety.md).
//!
//! Two facts shape it. A file grown with `set_len` is sparse, and a read of a hole is answered from
//! memory without reaching the device: a job "reading" such a file would measure the CPU, and every
//! scheduler would look alike, so a target must hold written data wherever the job reads. And a
//! target may hold someone's data: a file or block device named by mistake must come out of a run as
//! it went in.
//!
//! So the rules are:
//! - a target that does not exist is created, filled with a pattern over the job's whole layout and
//!   recorded as *ours* in an ownership record (device, inode, size, modification time), the file's
//!   extended attribute `user.bfq.owner`, or `<target>.bfq-owner` beside it on a file system without
//!   user attributes. Whatever a later run does to a file whose record still matches is fair game:
//!   it may be grown, its holes filled and its writers' regions written;
//! - a regular file that is not ours is used as it is: reads only, and only if it is long enough and
//!   has no holes where the job reads. It is never grown, filled or written unless the caller passes
//!   `overwrite_existing_data` (the CLI's `--overwrite-existing-data`);
//! - a block device is never written without that flag either (nothing records who wrote it);
//! - the refusal says which byte ranges would be overwritten, by which application, and how to go on;
//! - a file created by a preparation that then fails is removed again;
//! - a fill cut short by a signal ([`stop_fills`], from the CLI's interrupt handler) leaves a file of
//!   ours recorded as ours, so that the next run fills the rest instead of refusing a half-filled
//!   file as someone else's.
//!
//! A job that only reads gets its target opened read-only, so a read-only file or device works.

use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use rustix::io::Errno;

const CHUNK: usize = 1 << 20;

/// The target being filled, if any, and whether it is ours (to be recorded as ours if the fill is
/// stopped). Each chunk of a fill is written under this lock, so that [`stop_fills`] waits for the
/// chunk in progress.
static FILLING: Mutex<Option<(PathBuf, bool)>> = Mutex::new(None);
/// Set by [`stop_fills`]: a fill that sees it writes nothing more.
static STOP_FILLING: AtomicBool = AtomicBool::new(false);

fn lock_filling() -> MutexGuard<'static, Option<(PathBuf, bool)>> {
    // A panic while holding the lock leaves a valid value: keep using it.
    FILLING.lock().unwrap_or_else(|e| e.into_inner())
}

/// For a signal handler about to end the process: stops a fill in progress after the chunk it is
/// writing and, if the target is ours (created by this process, or recorded as ours before), records
/// it as ours as it is now. Without this, a SIGTERM during the fill of a new target left a
/// half-filled file without a record, which the next run refused as one bfq did not create; with it
/// the next run fills the holes that are left. The fill never returns afterwards: the caller is
/// expected to end the process.
pub fn stop_fills() {
    STOP_FILLING.store(true, Ordering::SeqCst);
    // Waits for the chunk being written; the fill then parks for good.
    let filling = lock_filling().take();
    if let Some((target, true)) = filling {
        if let Err(e) = record_ours(&target) {
            eprintln!("bfq: cannot record {} as bfq's own after its fill was stopped: {e}", target.display());
        } else {
            // The file stays (a next run fills the rest): said, so that a large file does not
            // sit unnoticed where the user interrupted.
            let size = std::fs::metadata(&target).map(|m| m.len()).unwrap_or(0);
            eprintln!(
                "bfq: {} ({} MiB long) is left as its fill stopped, recorded as bfq's: a next run with it \
                 fills what is missing; remove it if it is not wanted",
                target.display(),
                size >> 20
            );
        }
    }
}

/// A fill of `target` in progress, in [`FILLING`] until it is dropped (after the target is synced
/// and, if ours, recorded).
struct Filling;

impl Filling {
    fn start(target: &Path, ours: bool) -> Filling {
        *lock_filling() = Some((target.to_path_buf(), ours));
        Filling
    }
}

impl Drop for Filling {
    fn drop(&mut self) {
        lock_filling().take();
    }
}

/// A byte range an application of the job writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteRegion {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// The application writing it.
    pub app: String,
}

/// What a run needs of its target.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TargetNeeds {
    /// Bytes the target must hold (the end of the job's layout).
    pub bytes: u64,
    /// The regions the job writes (empty: the job only reads).
    pub writes: Vec<WriteRegion>,
    /// The user said existing data may be overwritten (`--overwrite-existing-data`).
    pub overwrite_existing_data: bool,
}

/// What preparing the target did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PreparedTarget {
    /// Bytes written to fill holes (or a new file).
    pub filled: u64,
    /// The file did not exist and was created.
    pub created: bool,
    /// The target is a block device.
    pub block_device: bool,
    /// Open it read-only: the job does not write.
    pub read_only: bool,
}

/// Why a target cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// The job would write over data this program did not write.
    #[error(
        "{path}: refusing to overwrite data bfq did not write: {what}; the job's writers would write {regions}. \
         Use a path that does not exist yet (bfq creates and fills it), or pass --overwrite-existing-data \
         if that data may be destroyed"
    )]
    WouldOverwrite {
        /// The target.
        path: String,
        /// What the target is (`a file of N bytes bfq did not create`, `a block device`).
        what: String,
        /// The byte ranges and the applications writing them, as text.
        regions: String,
    },
    /// The target is shorter than the job's layout, or has holes where it reads, and is not ours to
    /// grow or fill.
    #[error(
        "{path}: {what}, and bfq does not grow or fill files it did not create. Use a path that does not \
         exist yet, give the applications a smaller file_size, or pass --overwrite-existing-data to let \
         bfq grow it and fill its holes"
    )]
    NotOurs {
        /// The target.
        path: String,
        /// What is missing.
        what: String,
    },
    /// A block device smaller than the job's layout.
    #[error("{path}: the block device has {has} bytes but the job's files need {needs}; give the applications a smaller file_size")]
    TooSmall {
        /// The target.
        path: String,
        /// Its size.
        has: u64,
        /// The layout's end.
        needs: u64,
    },
    /// Not enough free space to fill the target.
    #[error("{path}: filling it needs {needs} more bytes but its file system has {free} free; nothing was written")]
    NoSpace {
        /// The target.
        path: String,
        /// Bytes to write.
        needs: u64,
        /// Bytes available.
        free: u64,
    },
    /// Neither a regular file nor a block device.
    #[error("{path}: not a regular file or block device")]
    Unsupported {
        /// The target.
        path: String,
    },
    /// An OS error.
    #[error("{path}: {what}")]
    Io {
        /// The target.
        path: String,
        /// What was being done.
        what: String,
        /// The OS error.
        source: io::Error,
    },
}

fn io_err(path: &Path, what: &str) -> impl FnOnce(io::Error) -> TargetError {
    let (path, what) = (path.display().to_string(), what.to_string());
    move |source| TargetError::Io { path, what, source }
}

/// The extended attribute that holds a target's ownership record, where its file system takes user
/// attributes (ext4, xfs, btrfs, tmpfs): the record then goes with the file, and a user who deletes
/// the file deletes it too.
pub const OWNER_ATTRIBUTE: &str = "user.bfq.owner";

/// The ownership record's file beside `target`, `<target>.bfq-owner`: where the file system takes no
/// user attributes (ramfs, some network file systems), and where versions before 2026-12-01 wrote it.
pub fn owner_record_path(target: &Path) -> PathBuf {
    let mut name = target.as_os_str().to_owned();
    name.push(".bfq-owner");
    PathBuf::from(name)
}

/// What every record this program writes begins with (and a file beside a target must begin with
/// before it is removed as a stale record).
const RECORD_HEADER: &str = "bfq-target-owner/1\n";

fn fingerprint(meta: &std::fs::Metadata) -> String {
    format!(
        "{RECORD_HEADER}dev={}\nino={}\nsize={}\nmtime={}.{:09}\n",
        meta.dev(),
        meta.ino(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec()
    )
}

/// Whether an attribute call failed because the file system takes no user attributes on this file.
fn attributes_unsupported(e: Errno) -> bool {
    e == Errno::NOTSUP || e == Errno::PERM
}

/// Where the ownership record of `target` is, if it has one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OwnerRecord {
    /// The file's extended attribute [`OWNER_ATTRIBUTE`].
    Attribute(String),
    /// A file beside it ([`owner_record_path`]).
    File(PathBuf, String),
}

impl OwnerRecord {
    /// The record's text.
    pub fn text(&self) -> &str {
        match self {
            OwnerRecord::Attribute(text) | OwnerRecord::File(_, text) => text,
        }
    }

    /// Where it is, for a message.
    pub fn describe(&self) -> String {
        match self {
            OwnerRecord::Attribute(_) => format!("the file's extended attribute {OWNER_ATTRIBUTE}"),
            OwnerRecord::File(path, _) => path.display().to_string(),
        }
    }
}

/// The ownership record of `target`: its attribute if it has one (the attribute is the record once
/// written, whatever a file beside it says), else the file beside it.
pub fn owner_record(target: &Path) -> Option<OwnerRecord> {
    let mut value = [0u8; 256];
    match rustix::fs::getxattr(target, OWNER_ATTRIBUTE, &mut value[..]) {
        Ok(len) => return Some(OwnerRecord::Attribute(String::from_utf8_lossy(&value[..len]).into_owned())),
        // Longer than any record: not one of ours, and not to be mistaken for a missing one.
        Err(Errno::RANGE) => return Some(OwnerRecord::Attribute(String::new())),
        Err(_) => {}
    }
    let path = owner_record_path(target);
    std::fs::read_to_string(&path).ok().map(|text| OwnerRecord::File(path, text))
}

/// Whether `target` is a regular file this program created and last wrote (its ownership record
/// matches the file as it is now).
pub fn is_ours(target: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(target) else { return false };
    meta.is_file() && owner_record(target).is_some_and(|r| r.text() == fingerprint(&meta))
}

/// Records `target` as ours as it is now: call it after a run wrote a file that [`prepare_target`]
/// reported `created`, or that was ours before the run. Does nothing for other targets. The record
/// is the file's attribute [`OWNER_ATTRIBUTE`] (setting it changes the file's status time, not its
/// modification time, which the record holds); a record beside the file that this program wrote
/// before is removed then. Where the file system takes no user attributes, the record is a file
/// beside the target, as before.
pub fn record_ours(target: &Path) -> io::Result<()> {
    let meta = std::fs::metadata(target)?;
    if !meta.is_file() {
        return Ok(());
    }
    let record = fingerprint(&meta);
    match rustix::fs::setxattr(target, OWNER_ATTRIBUTE, record.as_bytes(), rustix::fs::XattrFlags::empty()) {
        Ok(()) => {
            let beside = owner_record_path(target);
            if std::fs::read_to_string(&beside).is_ok_and(|text| text.starts_with(RECORD_HEADER)) {
                let _ = std::fs::remove_file(beside);
            }
            Ok(())
        }
        Err(e) if attributes_unsupported(e) => std::fs::write(owner_record_path(target), record),
        Err(e) => Err(e.into()),
    }
}

/// Makes `target` ready for a run that needs `needs` of it, or says why it cannot be, having written
/// nothing (see the module's rules).
pub fn prepare_target(target: &Path, needs: &TargetNeeds) -> Result<PreparedTarget, TargetError> {
    let path = target.display().to_string();
    let read_only = needs.writes.is_empty();
    let meta = match std::fs::metadata(target) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return create(target, needs.bytes, read_only),
        Err(e) => return Err(io_err(target, "cannot inspect it")(e)),
    };
    if meta.file_type().is_block_device() {
        let has = File::open(target)
            .and_then(|mut f| f.seek(SeekFrom::End(0)))
            .map_err(io_err(target, "cannot read its size"))?;
        if has < needs.bytes {
            return Err(TargetError::TooSmall { path, has, needs: needs.bytes });
        }
        if !read_only && !needs.overwrite_existing_data {
            return Err(TargetError::WouldOverwrite {
                path,
                what: format!("it is a block device of {has} bytes"),
                regions: describe(&needs.writes),
            });
        }
        return Ok(PreparedTarget { block_device: true, read_only, ..PreparedTarget::default() });
    }
    if !meta.is_file() {
        return Err(TargetError::Unsupported { path });
    }
    let ours = is_ours(target);
    if !ours && !read_only && !needs.overwrite_existing_data {
        let what = if let Some(record) = owner_record(target) {
            format!(
                "it is a file of {} bytes that changed since bfq last wrote it (written by someone else, or \
                 by a run that was killed; its record is {})",
                meta.len(),
                record.describe()
            )
        } else {
            format!("it is a file of {} bytes that bfq did not create", meta.len())
        };
        return Err(TargetError::WouldOverwrite { path, what, regions: describe(&needs.writes) });
    }
    let may_write = ours || needs.overwrite_existing_data;
    let short = meta.len() < needs.bytes;
    let holes = {
        let file = File::open(target).map_err(io_err(target, "cannot open it"))?;
        holes(&file, needs.bytes.min(meta.len())).map_err(io_err(target, "cannot look for holes"))?
    };
    if !short && holes.is_empty() {
        return Ok(PreparedTarget { read_only, ..PreparedTarget::default() });
    }
    if !may_write {
        let hole_bytes: u64 = holes.iter().map(|(s, e)| e - s).sum();
        let what = if short {
            format!("it has {} bytes but the job's files need {}", meta.len(), needs.bytes)
        } else {
            format!(
                "it has {hole_bytes} bytes of holes where the job reads (reads of holes never reach the device)"
            )
        };
        return Err(TargetError::NotOurs { path, what });
    }
    let file =
        OpenOptions::new().read(true).write(true).open(target).map_err(io_err(target, "cannot open it"))?;
    let growth = needs.bytes.saturating_sub(meta.len());
    let to_fill: u64 = holes.iter().map(|(s, e)| e - s).sum::<u64>() + growth;
    check_space(&file, target, to_fill)?;
    // Before the file changes: a signal from here on leaves it recorded as it is then.
    let _filling = Filling::start(target, ours);
    if short {
        file.set_len(needs.bytes).map_err(io_err(target, "cannot grow it"))?;
    }
    let mut filled = 0;
    let tail = if short { vec![(meta.len(), needs.bytes)] } else { Vec::new() };
    for (start, end) in holes.into_iter().chain(tail) {
        filled += fill(&file, start, end).map_err(io_err(target, "cannot fill it"))?;
    }
    file.sync_all().map_err(io_err(target, "cannot sync it"))?;
    drop(file);
    if ours {
        record_ours(target).map_err(io_err(target, "cannot update its ownership record"))?;
    }
    Ok(PreparedTarget { filled, read_only, ..PreparedTarget::default() })
}

/// Creates the target, fills it, records it as ours; removes it again if any step fails.
fn create(target: &Path, bytes: u64, read_only: bool) -> Result<PreparedTarget, TargetError> {
    let file = OpenOptions::new().read(true).write(true).create_new(true).open(target).map_err(|e| {
        // `exists()` follows links: a link to a missing file looks absent, and creating through it
        // fails with "File exists".
        let dangling = std::fs::symlink_metadata(target).is_ok_and(|m| m.file_type().is_symlink());
        let what = if dangling {
            match std::fs::read_link(target) {
                Ok(to) => format!(
                    "cannot create it: it is a symbolic link to {}, which does not exist (bfq does not \
                         create files through links: give the path the link points to, or remove the link)",
                    to.display()
                ),
                Err(_) => "cannot create it: it is a symbolic link to a missing file".to_string(),
            }
        } else {
            "cannot create it".to_string()
        };
        io_err(target, &what)(e)
    })?;
    let result = (|| {
        check_space(&file, target, bytes)?;
        let _filling = Filling::start(target, true);
        file.set_len(bytes).map_err(io_err(target, "cannot size it"))?;
        let filled = fill(&file, 0, bytes).map_err(io_err(target, "cannot fill it"))?;
        file.sync_all().map_err(io_err(target, "cannot sync it"))?;
        record_ours(target).map_err(io_err(target, "cannot write its ownership record"))?;
        Ok(filled)
    })();
    drop(file);
    match result {
        Ok(filled) => Ok(PreparedTarget { filled, created: true, read_only, ..PreparedTarget::default() }),
        Err(e) => {
            let _ = std::fs::remove_file(target);
            let _ = std::fs::remove_file(owner_record_path(target));
            Err(e)
        }
    }
}

fn check_space(file: &File, target: &Path, needs: u64) -> Result<(), TargetError> {
    let st = rustix::fs::fstatvfs(file)
        .map_err(|e| io_err(target, "cannot read its file system's free space")(e.into()))?;
    // ramfs has no size: it reports no blocks and none free, and grows until memory runs out. Its
    // "0 free" refused every target there, with a reason that was not one.
    if st.f_blocks == 0 {
        return Ok(());
    }
    let free = st.f_bavail.saturating_mul(st.f_frsize);
    if needs > free {
        return Err(TargetError::NoSpace { path: target.display().to_string(), needs, free });
    }
    Ok(())
}

fn describe(writes: &[WriteRegion]) -> String {
    const SHOWN: usize = 4;
    let mut parts: Vec<String> =
        writes.iter().take(SHOWN).map(|w| format!("bytes {}..{} ({})", w.start, w.end, w.app)).collect();
    if writes.len() > SHOWN {
        parts.push(format!("and {} more regions", writes.len() - SHOWN));
    }
    parts.join(", ")
}

/// The holes of `file` below `limit`, as `[start, end)` byte ranges (SEEK_HOLE/SEEK_DATA).
fn holes(file: &File, limit: u64) -> io::Result<Vec<(u64, u64)>> {
    let mut out = Vec::new();
    let mut pos = 0u64;
    while pos < limit {
        let hole = rustix::fs::seek(file, rustix::fs::SeekFrom::Hole(pos))?;
        if hole >= limit {
            break;
        }
        let end = match rustix::fs::seek(file, rustix::fs::SeekFrom::Data(hole)) {
            Ok(data) => data.min(limit),
            // No data after `hole`: the rest of the file is a hole.
            Err(Errno::NXIO) => limit,
            Err(e) => return Err(e.into()),
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
        let gate = lock_filling();
        if STOP_FILLING.load(Ordering::SeqCst) {
            // `stop_fills` is recording the file as it is now, and the process is ending.
            drop(gate);
            loop {
                std::thread::park();
            }
        }
        file.write_all_at(&pattern[..n], pos)?;
        drop(gate);
        pos += n as u64;
    }
    Ok(end - start)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Temp(PathBuf);

    impl Temp {
        fn new(name: &str) -> Temp {
            let p = PathBuf::from(format!("/var/tmp/bfq-io-target-{}-{name}", std::process::id()));
            let _ = std::fs::remove_file(&p);
            let _ = std::fs::remove_file(owner_record_path(&p));
            Temp(p)
        }
    }

    impl Drop for Temp {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
            let _ = std::fs::remove_file(owner_record_path(&self.0));
        }
    }

    fn writer(start: u64, end: u64) -> Vec<WriteRegion> {
        vec![WriteRegion { start, end, app: "seq-writer-0".into() }]
    }

    #[test]
    fn a_missing_file_is_created_filled_without_holes_and_recorded_as_ours() {
        let t = Temp::new("missing");
        let needs = TargetNeeds { bytes: 3 << 20, ..TargetNeeds::default() };
        let prepared = prepare_target(&t.0, &needs).unwrap();
        assert_eq!((prepared.filled, prepared.created, prepared.read_only), (3 << 20, true, true));
        let file = File::open(&t.0).unwrap();
        assert!(holes(&file, 3 << 20).unwrap().is_empty());
        assert_eq!(file.metadata().unwrap().len(), 3 << 20);
        assert!(is_ours(&t.0));
    }

    #[test]
    fn the_record_is_an_attribute_of_the_file_and_nothing_is_left_beside_it() {
        // A user who deletes a target bfq created deletes its record with it (docs/safety.md).
        let t = Temp::new("attribute");
        prepare_target(&t.0, &TargetNeeds { bytes: 1 << 20, ..TargetNeeds::default() }).unwrap();
        assert!(matches!(owner_record(&t.0), Some(OwnerRecord::Attribute(_))), "{:?}", owner_record(&t.0));
        assert!(is_ours(&t.0));
        assert!(!owner_record_path(&t.0).exists());
        std::fs::remove_file(&t.0).unwrap();
        assert_eq!(owner_record(&t.0), None);
    }

    #[test]
    fn a_record_beside_the_file_from_before_is_honoured_then_replaced_by_the_attribute() {
        // Targets created before 2026-12-01 have their record in `<target>.bfq-owner`.
        let t = Temp::new("beside");
        std::fs::write(&t.0, vec![7u8; 4096]).unwrap();
        std::fs::write(owner_record_path(&t.0), fingerprint(&std::fs::metadata(&t.0).unwrap())).unwrap();
        assert!(is_ours(&t.0));
        record_ours(&t.0).unwrap();
        assert!(!owner_record_path(&t.0).exists(), "the old record is removed once the attribute holds it");
        assert!(matches!(owner_record(&t.0), Some(OwnerRecord::Attribute(_))));
        assert!(is_ours(&t.0));
        // A file of that name that is not a record of bfq's is someone else's: left alone.
        std::fs::write(owner_record_path(&t.0), "notes\n").unwrap();
        record_ours(&t.0).unwrap();
        assert_eq!(std::fs::read_to_string(owner_record_path(&t.0)).unwrap(), "notes\n");
    }

    #[test]
    fn an_attribute_that_no_longer_matches_is_not_overruled_by_a_record_beside_the_file() {
        let t = Temp::new("stale");
        std::fs::write(&t.0, vec![7u8; 4096]).unwrap();
        let before = fingerprint(&std::fs::metadata(&t.0).unwrap());
        record_ours(&t.0).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(10));
        std::fs::write(&t.0, vec![8u8; 8192]).unwrap();
        std::fs::write(owner_record_path(&t.0), fingerprint(&std::fs::metadata(&t.0).unwrap())).unwrap();
        assert_ne!(before, fingerprint(&std::fs::metadata(&t.0).unwrap()));
        assert!(!is_ours(&t.0), "the attribute is the record; it says the file changed");
        let needs = TargetNeeds { bytes: 4096, writes: writer(0, 4096), ..TargetNeeds::default() };
        let text = prepare_target(&t.0, &needs).unwrap_err().to_string();
        assert!(text.contains("changed since bfq last wrote it") && text.contains(OWNER_ATTRIBUTE), "{text}");
    }

    #[test]
    fn a_symbolic_link_to_a_missing_file_is_refused_naming_the_link_and_creates_nothing() {
        let t = Temp::new("dangling");
        let missing = t.0.with_extension("missing");
        std::os::unix::fs::symlink(&missing, &t.0).unwrap();
        let needs = TargetNeeds { bytes: 1 << 20, ..TargetNeeds::default() };
        let text = prepare_target(&t.0, &needs).unwrap_err().to_string();
        assert!(text.contains("symbolic link to") && text.contains("does not exist"), "{text}");
        assert!(!missing.exists());
    }

    #[test]
    fn a_users_file_is_never_written_by_a_job_with_writers_without_the_flag() {
        let t = Temp::new("user");
        std::fs::write(&t.0, vec![7u8; 4 << 20]).unwrap();
        let needs =
            TargetNeeds { bytes: 4 << 20, writes: writer(2 << 20, 4 << 20), ..TargetNeeds::default() };
        let err = prepare_target(&t.0, &needs).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, TargetError::WouldOverwrite { .. }), "{text}");
        assert!(text.contains("bytes 2097152..4194304 (seq-writer-0)"), "{text}");
        assert!(text.contains("--overwrite-existing-data"), "{text}");
        assert!(std::fs::read(&t.0).unwrap().iter().all(|&b| b == 7));
        let needs = TargetNeeds { overwrite_existing_data: true, ..needs };
        assert!(!prepare_target(&t.0, &needs).unwrap().read_only);
    }

    #[test]
    fn a_short_users_file_is_neither_grown_nor_filled_but_reads_of_a_long_one_are_allowed() {
        let t = Temp::new("short");
        std::fs::write(&t.0, vec![7u8; 1 << 20]).unwrap();
        let needs = TargetNeeds { bytes: 4 << 20, ..TargetNeeds::default() };
        let err = prepare_target(&t.0, &needs).unwrap_err();
        assert!(matches!(err, TargetError::NotOurs { .. }), "{err}");
        assert_eq!(std::fs::metadata(&t.0).unwrap().len(), 1 << 20);
        let needs = TargetNeeds { bytes: 1 << 20, ..TargetNeeds::default() };
        let prepared = prepare_target(&t.0, &needs).unwrap();
        assert_eq!((prepared.filled, prepared.read_only), (0, true));
        assert!(!is_ours(&t.0));
    }

    #[test]
    fn an_owned_file_is_grown_and_written_and_stays_ours() {
        let t = Temp::new("owned");
        prepare_target(&t.0, &TargetNeeds { bytes: 1 << 20, ..TargetNeeds::default() }).unwrap();
        let needs =
            TargetNeeds { bytes: 3 << 20, writes: writer(1 << 20, 3 << 20), ..TargetNeeds::default() };
        let prepared = prepare_target(&t.0, &needs).unwrap();
        assert_eq!(prepared.filled, 2 << 20);
        assert!(is_ours(&t.0));
    }

    #[test]
    fn a_file_changed_after_bfq_wrote_it_is_no_longer_ours() {
        let t = Temp::new("changed");
        prepare_target(&t.0, &TargetNeeds { bytes: 1 << 20, ..TargetNeeds::default() }).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        OpenOptions::new().write(true).open(&t.0).unwrap().write_all_at(b"user data", 0).unwrap();
        assert!(!is_ours(&t.0));
        let needs = TargetNeeds { bytes: 1 << 20, writes: writer(0, 1 << 20), ..TargetNeeds::default() };
        assert!(matches!(prepare_target(&t.0, &needs), Err(TargetError::WouldOverwrite { .. })));
    }

    #[test]
    fn a_created_file_is_removed_when_filling_it_cannot_be_done() {
        let t = Temp::new("nospace");
        let needs = TargetNeeds { bytes: u64::MAX / 4, ..TargetNeeds::default() };
        let err = prepare_target(&t.0, &needs).unwrap_err();
        assert!(matches!(err, TargetError::NoSpace { .. }), "{err}");
        assert!(!t.0.exists());
        assert!(!owner_record_path(&t.0).exists());
    }

    #[test]
    fn a_file_system_without_a_size_is_not_taken_for_a_full_one() {
        // ramfs reports 0 blocks and 0 free; a target there is created and filled.
        if !rustix::process::geteuid().is_root() {
            assert!(std::env::var_os("CI").is_none(), "CI runs as root: this test must run there");
            eprintln!("skipped: mounting a ramfs needs root");
            return;
        }
        let dir = std::path::PathBuf::from(format!("/var/tmp/bfq-runner-ramfs-{}", std::process::id()));
        std::fs::create_dir(&dir).unwrap();
        struct Mounted(std::path::PathBuf);
        impl Drop for Mounted {
            fn drop(&mut self) {
                let _ = std::process::Command::new("umount").arg(&self.0).status();
                let _ = std::fs::remove_dir(&self.0);
            }
        }
        let ok = std::process::Command::new("mount").args(["-t", "ramfs", "ramfs"]).arg(&dir).status();
        let mounted = Mounted(dir);
        assert!(ok.is_ok_and(|s| s.success()), "mount -t ramfs {}", mounted.0.display());
        let target = mounted.0.join("t.img");
        let prepared =
            prepare_target(&target, &TargetNeeds { bytes: 1 << 20, ..TargetNeeds::default() }).unwrap();
        assert!(prepared.created && prepared.filled == 1 << 20, "{prepared:?}");
        // ramfs takes no user attributes: the record is a file beside the target.
        assert!(matches!(owner_record(&target), Some(OwnerRecord::File(..))), "{:?}", owner_record(&target));
        assert!(is_ours(&target));
        let _ = std::fs::remove_file(owner_record_path(&target));
        std::fs::remove_file(&target).unwrap();
    }

    #[test]
    fn a_block_device_is_never_written_without_the_flag() {
        // /dev/null is a character device; use a loop-free check on the first block device found.
        let Some(dev) = std::fs::read_dir("/dev").ok().and_then(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path())
                .find(|p| std::fs::metadata(p).is_ok_and(|m| m.file_type().is_block_device()))
        }) else {
            return;
        };
        let needs = TargetNeeds { bytes: 0, writes: writer(0, 4096), ..TargetNeeds::default() };
        match prepare_target(&dev, &needs) {
            Err(TargetError::WouldOverwrite { what, .. }) => assert!(what.contains("block device"), "{what}"),
            Err(TargetError::Io { .. }) => {} // not readable here (not root)
            other => panic!("{}: {other:?}", dev.display()),
        }
    }
}
