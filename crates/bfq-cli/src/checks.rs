//! Checks every command makes before anything expensive or destructive (issue 14 item 3): scheduler
//! names and tunables, output paths, duration overrides against the job. Each failure names the
//! option or field and what was expected, and nothing has been run or written when it is reported.

use std::path::Path;

use anyhow::{bail, Context, Result};
use bfq_sched::DeviceInfo;
use bfq_sim::job::Duration;
use bfq_sim::{Job, RunReport};

/// Builds every scheduler with its tunables once, as a check: an unknown name, a bad tunable, or a
/// tunable scoped to a scheduler that is not in the run is reported before any run (`option` names
/// the command-line option in the message).
pub fn schedulers(option: &str, names: &[String], params: &[(String, String)]) -> Result<()> {
    for name in names {
        if bfq_sched::canonical_name(name).is_none() {
            bail!("{option}: unknown scheduler {name:?} (known: {})", bfq_sched::SCHEDULER_NAMES.join(", "));
        }
    }
    for (key, _) in params {
        let Some((scope, _)) = scope_of(key)? else { continue };
        if !names.iter().any(|n| bfq_sched::canonical_name(n) == Some(scope)) {
            bail!(
                "--params: `{key}` is for scheduler {scope}, which is not in this run ({option} {})",
                names.join(",")
            );
        }
    }
    for name in names {
        let own = params_for(name, params);
        for rotational in [true, false] {
            if let Err(e) = bfq_sched::build(name, DeviceInfo { rotational, queue_depth: 32 }, &own) {
                // An unscoped key goes to every scheduler of the run: one that another scheduler of
                // the run takes was meant for that one (`-s bfq,fifo -p slice_idle=0`).
                let refused = e.to_string();
                let unscoped =
                    params.iter().find(|(k, _)| !k.contains('.') && refused.contains(&format!("`{k}`")));
                let hint = unscoped.and_then(|(k, value)| {
                    names
                        .iter()
                        .filter(|n| *n != name)
                        .find(|n| {
                            bfq_sched::build(
                                n,
                                DeviceInfo { rotational, queue_depth: 32 },
                                &[(k.to_string(), value.clone())],
                            )
                            .is_ok()
                        })
                        .map(|other| format!("; a key for one scheduler only is written {other}.{k}={value}"))
                });
                match hint {
                    Some(hint) => bail!("--params for scheduler {name}: {e}{hint}"),
                    None => {
                        return Err(anyhow::Error::new(e).context(format!("--params for scheduler {name}")))
                    }
                }
            }
        }
    }
    Ok(())
}

/// A key of `--params` scoped to one scheduler, `SCHEDULER.key`: the scheduler's canonical name and
/// the tunable's name; `None` for a key that applies to every scheduler of the run.
fn scope_of(key: &str) -> Result<Option<(&'static str, &str)>> {
    let Some((scope, tunable)) = key.split_once('.') else { return Ok(None) };
    match bfq_sched::canonical_name(scope) {
        Some(canonical) if !tunable.is_empty() => Ok(Some((canonical, tunable))),
        _ => bail!(
            "--params: `{key}`: expected SCHEDULER.key=value with SCHEDULER one of {} (or key=value for every scheduler)",
            bfq_sched::SCHEDULER_NAMES.join(", ")
        ),
    }
}

/// The tunables of `--params` that apply to scheduler `name`: every `key=value`, and every
/// `SCHEDULER.key=value` of that scheduler, without its prefix. One command can then tune one of the
/// schedulers it compares (`-s bfq,fifo -p bfq.latency_guard=300`), where a plain key would be
/// refused by every scheduler that does not have that tunable. Call after [`schedulers`], which
/// reports a bad scope.
pub fn params_for(name: &str, params: &[(String, String)]) -> Vec<(String, String)> {
    let me = bfq_sched::canonical_name(name);
    params
        .iter()
        .filter_map(|(k, v)| match scope_of(k) {
            Ok(None) => Some((k.clone(), v.clone())),
            Ok(Some((scope, tunable))) if Some(scope) == me => Some((tunable.to_string(), v.clone())),
            _ => None,
        })
        .collect()
}

/// The `--params` option as pairs (`key=value` for every scheduler of the run, `SCHEDULER.key=value`
/// for one: [`params_for`]).
pub fn params(given: &[String]) -> Result<Vec<(String, String)>> {
    // `-p a=1 -p b=2` is `-p a=1,b=2`, as repeated `-s` lists are joined.
    let joined = given.join(",");
    let p = joined.as_str();
    let pairs = bfq_sched::params::parse_pairs(p).map_err(|e| anyhow::anyhow!("--params: {e}"))?;
    // An empty key would reach the schedulers and come back as "unknown parameter ``".
    if let Some(item) =
        p.split(',').map(str::trim).find(|i| i.split_once('=').is_some_and(|(k, _)| k.trim().is_empty()))
    {
        bail!("--params: `{item}`: a key is missing before `=` (expected key=value, e.g. slice_idle=0)");
    }
    // One tunable set twice, or under both its names, for one scheduler: the last one won silently
    // (`slice_idle=1,slice_idle_us=5000` ran with 5 ms, the reverse with 1 ms).
    let knob = |key: &str| -> (Option<String>, String) {
        let (scope, name) = match key.split_once('.') {
            Some((scope, name)) => {
                (Some(bfq_sched::canonical_name(scope).unwrap_or(scope).to_string()), name)
            }
            None => (None, key),
        };
        // The kernel's two spellings of BFQ's idle window (kernel-bfq-reference.md, "Tunables").
        let name = if name == "slice_idle_us" { "slice_idle" } else { name };
        (scope, name.to_string())
    };
    for (i, (a, _)) in pairs.iter().enumerate() {
        let (scope_a, name_a) = knob(a);
        for (b, _) in &pairs[i + 1..] {
            let (scope_b, name_b) = knob(b);
            let same_scheduler = scope_a.is_none() || scope_b.is_none() || scope_a == scope_b;
            if name_a == name_b && same_scheduler {
                let what = if a == b {
                    format!("`{a}` is given twice")
                } else {
                    format!("`{a}` and `{b}` set one tunable")
                };
                bail!("--params: {what}; give it once");
            }
        }
    }
    Ok(pairs)
}

/// Checks that `--json PATH` can be written, before the runs whose results it would hold: the
/// directory exists and the file can be created or opened for writing. Nothing is truncated here.
pub fn json_path(path: Option<&Path>) -> Result<()> {
    output_path("--json", path)
}

/// Checks that the output files of one command do not collide: two options naming the same file (the
/// JSON written over the event log), both on standard output (`-`: the JSON no longer parses), or
/// the event logs of several schedulers on standard output, where nothing tells them apart.
pub fn distinct_outputs(outputs: &[(&str, Option<&Path>)], schedulers: usize) -> Result<()> {
    let named: Vec<(&str, &Path)> = outputs.iter().filter_map(|&(o, p)| Some((o, p?))).collect();
    for (i, &(a, pa)) in named.iter().enumerate() {
        if pa.as_os_str() == "-" && a != "--json" && schedulers > 1 {
            bail!(
                "{a} -: the runs of {schedulers} schedulers would be mixed on standard output; give a file \
                 name (one file per scheduler, FILE.SCHEDULER) or one scheduler"
            );
        }
        for &(b, pb) in &named[i + 1..] {
            let same = pa == pb
                || (pa.as_os_str() != "-"
                    && pa.canonicalize().ok().is_some_and(|c| pb.canonicalize().ok() == Some(c)));
            if same {
                let what = if pa.as_os_str() == "-" {
                    "standard output".to_string()
                } else {
                    pa.display().to_string()
                };
                bail!("{a} and {b} both name {what}: give each its own file");
            }
        }
    }
    Ok(())
}

/// A real run (`bfq run`, `bfq compare`) does not use the job's `[device]` (the target is the
/// device), but a preset that names no device is a typo all the same, and is refused on its line as
/// the simulator refuses it (`preset = "floppy"` ran without a word).
pub fn device_preset_known(job: &Job, path: &Path) -> Result<()> {
    let preset = job.device.preset.as_str();
    if bfq_sim::device::DEVICE_PRESETS.contains(&preset) {
        return Ok(());
    }
    let text = std::fs::read_to_string(path).unwrap_or_default();
    Err(bfq_workload::job::JobError {
        file: path.display().to_string(),
        line: Job::table_line(&text, "device", "preset"),
        field: Some("preset".into()),
        message: format!(
            "unknown device preset `{preset}` (known: {}); a real run does not use [device], but a name that \
             is none is refused",
            bfq_sim::device::DEVICE_PRESETS.join(", ")
        ),
    }
    .into())
}

/// The files a command reads that no output of it may name: the job file, each start-up trace it
/// reads from a file, and (`bfq run`, `bfq compare`) the target. A `--json` or `--events` there
/// would write over them: a 16 MiB file of data bfq did not write became 6,848 bytes of JSON.
pub fn inputs(job_path: &Path, job: &Job, target: Option<&Path>) -> Vec<(String, std::path::PathBuf)> {
    let mut inputs = vec![("the job file".to_string(), job_path.to_path_buf())];
    for (name, spec) in job.expanded_apps() {
        if let Some(trace) = spec.startup().map(|s| Path::new(&s.trace)).filter(|p| p.exists()) {
            inputs.push((format!("the trace of application `{name}`"), trace.to_path_buf()));
        }
    }
    if let Some(target) = target {
        inputs.push(("the target".to_string(), target.to_path_buf()));
    }
    inputs
}

/// The files named by output options, as they will be written: `--json` as given, an event or
/// request log as given with one scheduler and as `FILE.SCHEDULER` for each of several (`-`,
/// standard output, is left out).
pub fn output_files(
    outputs: &[(&str, Option<&Path>)],
    schedulers: &[String],
) -> Vec<(String, std::path::PathBuf)> {
    let mut files = Vec::new();
    for &(option, path) in outputs {
        let Some(path) = path.filter(|p| p.as_os_str() != "-") else { continue };
        if option == "--json" || schedulers.len() < 2 {
            files.push((format!("{option} {}", path.display()), path.to_path_buf()));
            continue;
        }
        for name in schedulers {
            let mut f = path.as_os_str().to_os_string();
            f.push(format!(".{name}"));
            let f = std::path::PathBuf::from(f);
            files.push((format!("{option} {} (the log of {name})", path.display()), f));
        }
    }
    files
}

/// Checks, before anything runs, every file the command will write ([`output_files`]): none is a
/// file it reads ([`inputs`]; compared by device and inode, so another path to the same file is
/// found too), none is a block device (an output there would write over a disk) or a directory,
/// and each can be created or opened for writing (nothing is truncated here, and a file made to
/// check it is removed again).
pub fn outputs_apart_from_inputs(
    outputs: &[(String, std::path::PathBuf)],
    inputs: &[(String, std::path::PathBuf)],
) -> Result<()> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let id = |p: &Path| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    for (i, (what, path)) in outputs.iter().enumerate() {
        // A scheduler named twice (`-s bfq,fifo,bfq`) would write its second log over its first.
        if let Some((earlier, _)) = outputs[..i].iter().find(|(_, p)| p == path) {
            bail!("{what} and {earlier} are one file: name each scheduler once, or give no log");
        }
    }
    for (what, path) in outputs {
        if let Ok(meta) = std::fs::metadata(path) {
            if let Some((input, _)) = inputs.iter().find(|(_, i)| id(i) == Some((meta.dev(), meta.ino()))) {
                bail!("{what}: is {input}; writing there would destroy it: give the output another name");
            }
            if meta.file_type().is_block_device() {
                bail!(
                    "{what}: is a block device; an output written there would overwrite the data on it: give a file name"
                );
            }
        }
        writable(what, path)?;
    }
    Ok(())
}

/// Checks that an output file named by `option` can be written (`-`: standard output), without
/// leaving a file behind if none was there.
pub fn output_path(option: &str, path: Option<&Path>) -> Result<()> {
    let Some(path) = path else { return Ok(()) };
    if path.as_os_str() == "-" {
        return Ok(());
    }
    writable(&format!("{option} {}", path.display()), path)
}

/// Checks that `path` (an output, `what` in messages) is not a directory and can be written: opened,
/// or made and removed again. Nothing is truncated.
fn writable(what: &str, path: &Path) -> Result<()> {
    if path.is_dir() {
        bail!("{what}: is a directory; give a file name");
    }
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .with_context(|| format!("{what}: cannot be written"))?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// Checks that the output directory named by `option` can take `files` (each a name and the text a
/// file of that name starts with when this command wrote it): the directory exists, or only its last
/// component is missing (it is made then, not a whole path: as root, a mistyped path made a tree of
/// directories); and a file of that name already there is one this command wrote, never a file of
/// the user's. Nothing is written here.
pub fn output_dir(option: &str, dir: &Path, files: &[(&str, &str)]) -> Result<()> {
    if dir.exists() {
        if !dir.is_dir() {
            bail!("{option} {}: is not a directory", dir.display());
        }
    } else {
        let parent = match dir.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        if !parent.is_dir() {
            bail!(
                "{option} {}: its parent directory {} does not exist; create it first (only the last \
                 directory is made)",
                dir.display(),
                parent.display()
            );
        }
        return Ok(());
    }
    for (name, starts_with) in files {
        let path = dir.join(name);
        if !path.exists() {
            continue;
        }
        let mut head = vec![0; starts_with.len()];
        let ours = std::fs::File::open(&path)
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
            .is_ok_and(|()| head == starts_with.as_bytes());
        if !ours {
            bail!(
                "{option} {}: {} is there and was not written by bfq; it is not overwritten: move it, or \
                 give another directory",
                dir.display(),
                path.display()
            );
        }
    }
    Ok(())
}

/// Makes the directory [`output_dir`] checked, if it does not exist yet.
pub fn make_output_dir(option: &str, dir: &Path) -> Result<()> {
    if !dir.is_dir() {
        std::fs::create_dir(dir).with_context(|| format!("{option} {}: cannot be made", dir.display()))?;
    }
    Ok(())
}

/// Applies `--duration` to the job read from `path`: it must be longer than the warm-up and at most
/// 24 h (the job file's own limit, `bfq_sim::job::MAX_DURATION`), and every application with a
/// `start` must start before the new end (one that would not run is refused, as the job file refuses
/// it for its own `duration`, with the file, the line and the field `start`).
pub fn apply_duration_to_file(job: &mut Job, path: &Path, text: Option<&str>) -> Result<()> {
    apply_duration_to(job, Some(path), text)
}

fn apply_duration_to(job: &mut Job, path: Option<&Path>, text: Option<&str>) -> Result<()> {
    let Some(d) = text else { return Ok(()) };
    let ns = bfq_sim::units::parse_duration(d).map_err(|e| anyhow::anyhow!("--duration: {e}"))?;
    if ns <= job.warmup.0 {
        bail!("--duration {d}: must be longer than the job's warm-up ({} s)", job.warmup.0 as f64 / 1e9);
    }
    if ns > bfq_sim::job::MAX_DURATION {
        bail!(
            "--duration {d}: longer than the limit of 24h (a longer run, real or simulated, is almost \
             certainly a typo; split it into several)"
        );
    }
    for (name, spec) in job.expanded_apps() {
        let Some(start) = spec.start().filter(|s| s.0 >= ns) else { continue };
        let message = format!(
            "application `{name}` starts at {} s, at or after the end of the run ({d}, from --duration): it \
             would never run; give a longer --duration, or start it earlier",
            start.0 as f64 / 1e9
        );
        let Some(path) = path else { bail!("--duration {d}: {message}") };
        let line = std::fs::read_to_string(path).ok().and_then(|text| job.app_line(&text, &name, "start"));
        let file = path.display().to_string();
        return Err(bfq_workload::job::JobError { file, line, field: Some("start".into()), message }.into());
    }
    job.duration = Duration(ns);
    Ok(())
}

/// Every application that stopped on an error, as `run `scheduler`: application `name`: error`.
pub fn failed_apps(reports: &[RunReport]) -> Vec<String> {
    reports
        .iter()
        .flat_map(|r| {
            r.apps.iter().filter_map(move |a| {
                a.extra.error.as_ref().map(|e| format!("run {}: application `{}`: {e}", r.scheduler, a.name))
            })
        })
        .collect()
}

/// Fails, naming every application that stopped on an error, if any did (after the tables are out).
pub fn fail_on_failed_apps(reports: &[RunReport]) -> Result<()> {
    let failed = failed_apps(reports);
    if !failed.is_empty() {
        bail!(
            "{} application run(s) stopped on an error (their results up to then are shown above):\n  {}",
            failed.len(),
            failed.join("\n  ")
        );
    }
    Ok(())
}
