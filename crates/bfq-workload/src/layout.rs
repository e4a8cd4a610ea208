//! Where a job's applications lie on a *real* target (`bfq run` through the engine, `bfq compare`
//! through the engine and through fio on a loop device): one layout for both, so that the same job
//! reads and writes the same bytes whichever way it runs, and so that what a run will overwrite can be
//! said before it starts (docs/safety.md).
//!
//! The applications are laid out one after the other from the job's `layout_start`, in the order of
//! [`Job::expanded_apps`], each region 4 KiB-aligned, as the simulator lays out its files. The one
//! difference from the simulator is the default file size of a greedy application: the simulator gives
//! each the papers' 5 GB (seed 001 sec. 6.2), which no one wants written to a scratch file for a
//! ten-second run; on a real target it is [`REAL_FILE_BYTES`] unless the job sets `file_size`.

use crate::job::{AppSpec, Job, Size};
use crate::trace::Trace;

/// Default file size of an application on a real target (the simulator's is
/// [`crate::DEFAULT_FILE_BYTES`]): large enough that its reads miss every cache but the device's.
pub const REAL_FILE_BYTES: u64 = 64 << 20;

/// Alignment of every region: O_DIRECT and 4 KiB-sector devices need it.
pub const REGION_ALIGN: u64 = 4096;

/// One application of a job with its place on a real target.
#[derive(Debug, Clone)]
pub struct Placement {
    /// Its name in reports.
    pub name: String,
    /// What it does.
    pub spec: AppSpec,
    /// First byte of its region.
    pub start: u64,
    /// Length of its region in bytes.
    pub len: u64,
    /// Its trace, for `startup` applications.
    pub trace: Option<Trace>,
}

impl Placement {
    /// One past the last byte of its region.
    pub fn end(&self) -> u64 {
        self.start + self.len
    }
}

/// A layout that cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("application `{app}`: {message}")]
pub struct LayoutError {
    /// The application.
    pub app: String,
    /// What is wrong.
    pub message: String,
}

/// Every application's region on a real target, and the end of the last one (the bytes the target
/// must hold).
pub fn real_layout(job: &Job) -> Result<(Vec<Placement>, u64), LayoutError> {
    // A real process's think time is its own: a configured one could only be faked with sleeps far
    // coarser than the tens of microseconds it models.
    if let Some((i, app)) = job.apps.iter().enumerate().find(|(_, a)| a.think_time.is_some()) {
        return Err(LayoutError {
            app: app.name.clone().unwrap_or_else(|| format!("[[app]] number {}", i + 1)),
            message: format!("`think_time` {}", crate::job::THINK_TIME_SIMULATED_ONLY),
        });
    }
    layout(job, REAL_FILE_BYTES)
}

/// Every application's region, a greedy application's file being `default_file_bytes` unless the job
/// sets `file_size` (the simulator's is [`crate::DEFAULT_FILE_BYTES`], a real target's
/// [`REAL_FILE_BYTES`]), and the end of the last one.
pub fn layout(job: &Job, default_file_bytes: u64) -> Result<(Vec<Placement>, u64), LayoutError> {
    let mut next = job.layout_start.map_or(0, |s| s.0).next_multiple_of(REGION_ALIGN);
    let mut out = Vec::new();
    for (name, spec) in job.expanded_apps() {
        let trace = match spec.startup() {
            Some(s) => Some(
                crate::trace::load_trace_head(&s.trace, s.requests)
                    .map_err(|message| LayoutError { app: name.clone(), message })?,
            ),
            None => None,
        };
        let len = match &trace {
            Some(t) => t.region_bytes(),
            None => spec.file_size().map_or(default_file_bytes, |s| s.0),
        }
        .next_multiple_of(REGION_ALIGN);
        // A `file_size` in the job was checked when it was read; the default is checked here.
        if trace.is_none() {
            if let Some(problem) = crate::apps::region_problem(&spec, len) {
                return Err(LayoutError {
                    app: name,
                    message: format!("file_size not set: the default {problem}"),
                });
            }
        }
        let start = match spec.at {
            Some(Size(at)) if at < next => {
                return Err(LayoutError {
                    app: name.clone(),
                    message: format!(
                        "`at` = {at} lies inside the previous application's region (which ends at {next}): \
                         regions are laid out in order and may not overlap"
                    ),
                })
            }
            Some(Size(at)) => at.next_multiple_of(REGION_ALIGN),
            None => next,
        };
        next = start.checked_add(len).ok_or_else(|| LayoutError {
            app: name.clone(),
            message: format!(
                "its file ({} at {}) ends past 16 EiB, the largest offset a device can have; use a smaller \
                 file_size, or fewer applications",
                crate::units::format_size(len),
                crate::units::format_size(start)
            ),
        })?;
        out.push(Placement { name, spec, start, len, trace });
    }
    Ok((out, next))
}

/// The regions the job's writers will write (start, end, application), in layout order: the bytes
/// of a target a run overwrites.
pub fn write_regions(placements: &[Placement]) -> Vec<(u64, u64, String)> {
    placements.iter().filter(|p| p.spec.writes()).map(|p| (p.start, p.end(), p.name.clone())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_apps_get_the_real_default_file_and_writers_are_listed() {
        let job = Job::from_toml("duration = \"1s\"\nworkload = \"5r5w-seq\"\n", "j.toml").unwrap();
        let (places, end) = real_layout(&job).unwrap();
        assert_eq!(places.len(), 10);
        assert_eq!(end, 10 * REAL_FILE_BYTES);
        let writes = write_regions(&places);
        assert_eq!(writes.len(), 5);
        assert_eq!(writes[0], (5 * REAL_FILE_BYTES, 6 * REAL_FILE_BYTES, "seq-writer-0".to_string()));
    }

    /// `at` places an application's region further on (seed 002: each file in its own disk slice),
    /// never back over the previous one.
    #[test]
    fn at_moves_a_region_forward_and_an_overlap_is_refused() {
        let text = "duration = \"1s\"\n[[app]]\nkind = \"seq-reader\"\nfile_size = \"1MiB\"\n[[app]]\nkind = \"seq-reader\"\nfile_size = \"1MiB\"\nat = 10000000\n";
        let job = Job::from_toml(text, "j.toml").unwrap();
        let (places, end) = real_layout(&job).unwrap();
        assert_eq!(places[1].start, 10_002_432, "rounded up to 4 KiB");
        assert_eq!(end, 10_002_432 + (1 << 20));
        let overlap = text.replace("10000000", "4096");
        let err = real_layout(&Job::from_toml(&overlap, "j.toml").unwrap()).unwrap_err();
        assert!(err.message.contains("may not overlap"), "{err}");
    }

    #[test]
    fn regions_follow_layout_start_aligned_and_file_size() {
        let text = "duration = \"1s\"\nlayout_start = 1000\n[[app]]\nkind = \"rand-reader\"\nfile_size = \"1MiB\"\n[[app]]\nkind = \"startup\"\ntrace = \"xterm\"\n";
        let job = Job::from_toml(text, "j.toml").unwrap();
        let (places, end) = real_layout(&job).unwrap();
        assert_eq!(places[0].start, 4096);
        assert_eq!(places[1].start, 4096 + (1 << 20));
        let trace = places[1].trace.as_ref().unwrap();
        assert_eq!(end, places[1].start + trace.region_bytes());
    }
}
