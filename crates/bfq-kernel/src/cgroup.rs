//! Per-application cgroups carrying the applications' weights to the kernel's BFQ (seed 001 sec. 3:
//! each application's weight fixes its share of the device throughput; in the kernel, weights are set
//! per cgroup through `blkio.bfq.weight` on cgroup v1 or `io.bfq.weight` on cgroup v2).
//!
//! One tree `bfq-compare-PID` is created under the io controller's mount, with one child per
//! application; fio processes are moved into their application's child before they start any I/O.
//! Every directory is removed when its [`Cgroup`] is dropped and on Ctrl-C ([`crate::cleanup`]).

use std::path::{Path, PathBuf};

use crate::cleanup::{self, Action, Guard};
use crate::KernelError;

/// Which cgroup hierarchy holds the io controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hierarchy {
    /// cgroup v1 with the `blkio` controller mounted at this path.
    V1Blkio(PathBuf),
    /// cgroup v2 (unified) mounted at this path, with the `io` controller available.
    V2(PathBuf),
}

/// Finds the io controller from a `/proc/self/mounts` text: a v1 `blkio` mount if the controller is
/// bound to v1 (it then cannot be used in v2), else a v2 mount offering `io`.
pub fn find_hierarchy(mounts: &str, v2_controllers: impl Fn(&Path) -> String) -> Option<Hierarchy> {
    let mut v2 = None;
    for line in mounts.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 4 {
            continue;
        }
        let (dir, fstype, opts) = (fields[1], fields[2], fields[3]);
        if fstype == "cgroup" && opts.split(',').any(|o| o == "blkio") {
            return Some(Hierarchy::V1Blkio(PathBuf::from(dir)));
        }
        if fstype == "cgroup2" && v2.is_none() {
            let dir = PathBuf::from(dir);
            if v2_controllers(&dir).split_whitespace().any(|c| c == "io") {
                v2 = Some(Hierarchy::V2(dir));
            }
        }
    }
    v2
}

/// The io controller of this host.
pub fn detect() -> Result<Hierarchy, KernelError> {
    let mounts = std::fs::read_to_string("/proc/self/mounts")
        .map_err(|e| KernelError::Io { path: "/proc/self/mounts".into(), message: e.to_string() })?;
    find_hierarchy(&mounts, |dir| std::fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default())
        .ok_or_else(|| {
            KernelError::Setup(
                "no cgroup hierarchy with the io (blkio) controller is mounted; weights cannot reach the kernel".into(),
            )
        })
}

/// A cgroup directory this run created, removed on drop.
#[derive(Debug)]
pub struct Cgroup {
    path: PathBuf,
    weight_file: Option<String>,
    _guard: Guard,
}

impl Cgroup {
    /// Its directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file the weight was written to (`blkio.bfq.weight`, `io.bfq.weight`...), or None when the
    /// kernel offers no weight file (then the weight is not enforced).
    pub fn weight_file(&self) -> Option<&str> {
        self.weight_file.as_deref()
    }

    /// The file to write a pid into to move that process here.
    pub fn procs_file(&self) -> PathBuf {
        self.path.join("cgroup.procs")
    }
}

/// Cgroups removed in the reverse of their creation order (children before their parents).
#[derive(Debug, Default)]
pub struct CgroupStack(Vec<Cgroup>);

impl CgroupStack {
    /// Adds one, created after those already in.
    pub fn push(&mut self, cg: Cgroup) {
        self.0.push(cg);
    }

    /// The one pushed `index`-th.
    pub fn get(&self, index: usize) -> Option<&Cgroup> {
        self.0.get(index)
    }
}

impl Drop for CgroupStack {
    fn drop(&mut self) {
        while let Some(cg) = self.0.pop() {
            drop(cg);
        }
    }
}

/// The tree of this run: a parent cgroup and one child per application.
#[derive(Debug)]
pub struct CgroupTree {
    hierarchy: Hierarchy,
    // Dropped last (fields drop in declaration order), after every child.
    root: Cgroup,
}

impl CgroupTree {
    /// Creates `NAME` under the io controller's hierarchy.
    pub fn create(hierarchy: Hierarchy, name: &str) -> Result<CgroupTree, KernelError> {
        let base = match &hierarchy {
            Hierarchy::V1Blkio(dir) => dir.clone(),
            Hierarchy::V2(dir) => {
                // The io controller must be enabled for the children of the mount root.
                enable_io(dir)?;
                dir.clone()
            }
        };
        let path = base.join(name);
        let root = make_dir(&path)?;
        if matches!(hierarchy, Hierarchy::V2(_)) {
            enable_io(&path)?;
        }
        Ok(CgroupTree { hierarchy, root })
    }

    /// The hierarchy in use.
    pub fn hierarchy(&self) -> &Hierarchy {
        &self.hierarchy
    }

    /// The tree's directory.
    pub fn path(&self) -> &Path {
        self.root.path()
    }

    /// Creates a child for one application and sets its weight (1..=1000).
    pub fn child(&self, name: &str, weight: u32) -> Result<Cgroup, KernelError> {
        self.child_in(None, name, weight)
    }

    /// Creates a cgroup for one of the job's `[[group]]` tables inside `parent` (`None`: the run's
    /// tree), with its weight; with cgroup v2 the io controller is enabled for its children, so the
    /// applications and groups inside it get their own weights (the kernel's BFQ schedules a
    /// hierarchy of cgroups as the job's hierarchy of groups).
    pub fn group_in(&self, parent: Option<&Cgroup>, name: &str, weight: u32) -> Result<Cgroup, KernelError> {
        let cg = self.child_in(parent, &format!("group-{name}"), weight)?;
        if matches!(self.hierarchy, Hierarchy::V2(_)) {
            enable_io(cg.path())?;
        }
        Ok(cg)
    }

    /// Creates a cgroup inside `parent` (`None`: the run's tree) and sets its weight (1..=1000).
    pub fn child_in(&self, parent: Option<&Cgroup>, name: &str, weight: u32) -> Result<Cgroup, KernelError> {
        let base = parent.map_or(&self.root.path, |p| &p.path);
        let mut cg = make_dir(&base.join(sanitize(name)))?;
        let candidates: &[&str] = match self.hierarchy {
            Hierarchy::V1Blkio(_) => &["blkio.bfq.weight", "blkio.weight"],
            Hierarchy::V2(_) => &["io.bfq.weight", "io.weight"],
        };
        for file in candidates {
            let p = cg.path.join(file);
            if p.exists() {
                std::fs::write(&p, weight.to_string())
                    .map_err(|e| KernelError::Io { path: p.clone(), message: e.to_string() })?;
                cg.weight_file = Some((*file).to_string());
                break;
            }
        }
        Ok(cg)
    }
}

fn make_dir(path: &Path) -> Result<Cgroup, KernelError> {
    std::fs::create_dir(path).map_err(|e| KernelError::Io {
        path: path.to_path_buf(),
        message: format!("cannot create cgroup: {e}"),
    })?;
    let guard = cleanup::register(Action::RemoveCgroup(path.to_path_buf()));
    Ok(Cgroup { path: path.to_path_buf(), weight_file: None, _guard: guard })
}

fn enable_io(dir: &Path) -> Result<(), KernelError> {
    let file = dir.join("cgroup.subtree_control");
    let current = std::fs::read_to_string(&file).unwrap_or_default();
    if current.split_whitespace().any(|c| c == "io") {
        return Ok(());
    }
    std::fs::write(&file, "+io").map_err(|e| KernelError::Io { path: file, message: e.to_string() })
}

/// A cgroup directory name from an application name.
pub fn sanitize(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n\
        cgroup /sys/fs/cgroup/blkio cgroup rw,relatime,blkio 0 0\n";

    #[test]
    fn a_v1_blkio_mount_is_preferred_because_it_owns_the_controller() {
        let h = find_hierarchy(HYBRID, |_| "io memory".into());
        assert_eq!(h, Some(Hierarchy::V1Blkio("/sys/fs/cgroup/blkio".into())));
    }

    #[test]
    fn a_v2_mount_is_used_only_when_it_offers_io() {
        let v2 = "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n";
        assert_eq!(find_hierarchy(v2, |_| "cpu io".into()), Some(Hierarchy::V2("/sys/fs/cgroup".into())));
        assert_eq!(find_hierarchy(v2, |_| "cpu memory".into()), None);
    }

    #[test]
    fn names_become_safe_directory_names() {
        assert_eq!(sanitize("seq-reader-0"), "seq-reader-0");
        assert_eq!(sanitize("a/b c"), "a_b_c");
    }
}
