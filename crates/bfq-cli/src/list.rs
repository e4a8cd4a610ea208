//! `bfq list [schedulers|devices|workloads|traces] [--json FILE]`: what can be named on the command
//! line and in job files, with the values a run starts from (issue 17 part 5).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Result;
use bfq_sched::DeviceInfo;
use bfq_sim::job::{named_workload, AppKind, AppSpec, NAMED_WORKLOADS};

use bfq_cli::table::{table, Align};

/// What to list.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum What {
    /// Every scheduler with its tunables and their defaults.
    Schedulers,
    /// The simulator's device presets.
    Devices,
    /// Named workloads and application kinds with their defaults.
    Workloads,
    /// Built-in start-up traces.
    Traces,
}

/// Arguments of `bfq list`.
#[derive(clap::Args, Debug)]
pub struct ListArgs {
    /// What to list (default: everything).
    pub what: Option<What>,
    /// Write the lists as JSON to this file (`-` for standard output, with nothing else on it).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(serde::Serialize, Default)]
struct Lists {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    schedulers: Vec<SchedulerEntry>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    devices: Vec<DeviceEntry>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    workloads: Vec<WorkloadEntry>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    application_kinds: Vec<KindEntry>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    traces: Vec<TraceEntry>,
}

#[derive(serde::Serialize)]
struct SchedulerEntry {
    name: &'static str,
    /// Tunable -> default on a rotational device (and on a non-rotational one, where different).
    tunables: BTreeMap<String, String>,
    tunables_non_rotational: BTreeMap<String, String>,
    /// Tunable -> what it means.
    meanings: BTreeMap<String, String>,
}

#[derive(serde::Serialize)]
struct DeviceEntry {
    preset: &'static str,
    model: String,
    rotational: bool,
    queue_depth: u32,
    capacity_bytes: u64,
    /// The keys its figures can be overridden by (`[device] params`).
    params: &'static [&'static str],
}

#[derive(serde::Serialize)]
struct WorkloadEntry {
    name: &'static str,
    applications: Vec<String>,
}

#[derive(serde::Serialize)]
struct KindEntry {
    kind: &'static str,
    request_bytes: u64,
    processes: u32,
    /// `bfq run` and the engine columns of `bfq compare` (every kind: the same generators).
    real_runs: bool,
    /// The kernel columns of `bfq compare` (a fio translation).
    kernel_runs: bool,
    /// Its fields beyond name, kind, count, weight and class.
    fields: Vec<&'static str>,
}

#[derive(serde::Serialize)]
struct TraceEntry {
    name: &'static str,
    processes: usize,
    requests: usize,
    bytes: u64,
}

fn collect(what: Option<What>) -> Lists {
    let all = what.is_none();
    let mut l = Lists::default();
    if all || what == Some(What::Schedulers) {
        for name in bfq_sched::SCHEDULER_NAMES {
            let params = |rotational| -> BTreeMap<String, String> {
                bfq_sched::build(name, DeviceInfo { rotational, queue_depth: 32 }, &[])
                    .map(|s| s.params().into_iter().map(|(k, v)| (k.to_string(), v)).collect())
                    .unwrap_or_default()
            };
            let (rot, flash) = (params(true), params(false));
            let differ = flash.into_iter().filter(|(k, v)| rot.get(k) != Some(v)).collect();
            let meanings = rot
                .keys()
                .filter_map(|k| bfq_sched::param_docs::describe(name, k).map(|d| (k.clone(), d.to_string())))
                .collect();
            l.schedulers.push(SchedulerEntry {
                name,
                tunables: rot,
                tunables_non_rotational: differ,
                meanings,
            });
        }
    }
    if all || what == Some(What::Devices) {
        for preset in bfq_sim::device::DEVICE_PRESETS {
            if let Ok(d) = bfq_sim::device::build_device(preset, &[]) {
                let info = d.info();
                l.devices.push(DeviceEntry {
                    preset,
                    model: d.name().to_string(),
                    rotational: info.rotational,
                    queue_depth: info.queue_depth,
                    capacity_bytes: d.capacity_bytes(),
                    params: bfq_sim::device::param_keys(preset).unwrap_or_default(),
                });
            }
        }
    }
    if all || what == Some(What::Workloads) {
        for name in NAMED_WORKLOADS {
            let apps = named_workload(name)
                .unwrap_or_default()
                .iter()
                .map(|a| format!("{} x {}", a.count, a.kind().as_str()))
                .collect();
            l.workloads.push(WorkloadEntry { name, applications: apps });
        }
        for kind in &AppKind::ALL {
            let spec = AppSpec::new(*kind);
            l.application_kinds.push(KindEntry {
                kind: kind.as_str(),
                request_bytes: spec.request_bytes(),
                processes: spec.process_count(),
                real_runs: true,
                kernel_runs: kind.kernel_runs(),
                fields: kind.fields().to_vec(),
            });
        }
    }
    if all || what == Some(What::Traces) {
        for (name, _) in bfq_sim::workload::startup::BUILTIN_TRACES {
            if let Some(t) = bfq_sim::workload::startup::Trace::builtin(name) {
                l.traces.push(TraceEntry {
                    name,
                    processes: t.threads.len(),
                    requests: t.requests.len(),
                    bytes: t.requests.iter().map(|r| u64::from(r.bytes)).sum(),
                });
            }
        }
    }
    l
}

fn render(l: &Lists) -> String {
    let mut out = String::new();
    if !l.schedulers.is_empty() {
        let _ = writeln!(out, "schedulers (--scheduler, --engine, [scheduler] name; tunables with --params or [scheduler] params):");
        for s in &l.schedulers {
            if s.tunables.is_empty() {
                let _ = writeln!(out, "  {} (no tunables)", s.name);
                continue;
            }
            let _ = writeln!(out, "  {}", s.name);
            let rows = s.tunables.iter().map(|(k, v)| {
                let flash = s
                    .tunables_non_rotational
                    .get(k)
                    .map(|f| format!(" ({f} non-rotational)"))
                    .unwrap_or_default();
                vec![k.clone(), format!("{v}{flash}"), s.meanings.get(k).cloned().unwrap_or_default()]
            });
            out.push_str(&table(rows, &[Align::Left], 4));
        }
        let _ = writeln!(out, "  aliases: noop and none = fifo, as = anticipatory; kernel schedulers for compare --kernel: {}\n", bfq_kernel::KERNEL_SCHEDULERS.join(", "));
    }
    if !l.devices.is_empty() {
        let _ = writeln!(out, "device presets ([device] preset, suite --device):");
        let rows = l.devices.iter().map(|d| {
            vec![
                d.preset.to_string(),
                d.model.clone(),
                if d.rotational { "rotational" } else { "non-rotational" }.to_string(),
                format!("depth {}", d.queue_depth),
                format!("{:.1} GB", d.capacity_bytes as f64 / 1e9),
            ]
        });
        out.push_str(&table(rows, &[Align::Left, Align::Left, Align::Left, Align::Left, Align::Right], 2));
        // The keys, once per set of presets that share them, in the table's order.
        let mut shown: Vec<&[&str]> = Vec::new();
        for d in &l.devices {
            if d.params.is_empty() || shown.contains(&d.params) {
                continue;
            }
            shown.push(d.params);
            let presets: Vec<&str> = l
                .devices
                .iter()
                .filter(|e| e.params == d.params && e.preset != "default")
                .map(|e| e.preset)
                .collect();
            let label = if presets.len() > 1 && presets.iter().all(|p| p.starts_with("hdd-")) {
                "hdd-*".to_string()
            } else {
                presets.join(", ")
            };
            // Wrapped at about 100 columns, continuation lines indented.
            let _ = write!(out, "  [device] params of {label}:");
            let mut column = 22 + label.len();
            for (i, key) in d.params.iter().enumerate() {
                let item = if i + 1 < d.params.len() { format!(" {key},") } else { format!(" {key}") };
                if column + item.len() > 100 {
                    out.push_str("\n   ");
                    column = 3;
                }
                out.push_str(&item);
                column += item.len();
            }
            out.push('\n');
        }
        out.push('\n');
    }
    if !l.workloads.is_empty() {
        let _ = writeln!(out, "named workloads (workload = ...):");
        let rows = l.workloads.iter().map(|w| vec![w.name.to_string(), w.applications.join(", ")]);
        out.push_str(&table(rows, &[Align::Left], 2));
        let _ = writeln!(out, "application kinds ([[app]] kind = ...; defaults):");
        let rows = l.application_kinds.iter().map(|k| {
            let request = if k.request_bytes == 0 {
                "the trace's".to_string()
            } else {
                format!("{} B", k.request_bytes)
            };
            let runs = match (k.real_runs, k.kernel_runs) {
                (true, true) => "sim, run, compare",
                (true, false) => "sim, run, compare (engine side only)",
                _ => "simulator only",
            };
            vec![
                k.kind.into(),
                "request".into(),
                request,
                "processes".into(),
                k.processes.to_string(),
                runs.into(),
                format!("fields: {}", k.fields.join(", ")),
            ]
        });
        let align =
            [Align::Left, Align::Left, Align::Right, Align::Left, Align::Right, Align::Left, Align::Left];
        out.push_str(&table(rows, &align, 2));
        out.push('\n');
    }
    if !l.traces.is_empty() {
        let _ = writeln!(out, "start-up traces (trace = ..., or a trace file's path):");
        let rows = l.traces.iter().map(|t| {
            let size = format!(
                "{} processes, {} requests, {:.1} MiB",
                t.processes,
                t.requests,
                t.bytes as f64 / 1048576.0
            );
            vec![t.name.to_string(), size]
        });
        out.push_str(&table(rows, &[Align::Left], 2));
    }
    out
}

/// Runs `bfq list`.
pub fn execute(args: ListArgs) -> Result<()> {
    let lists = collect(args.what);
    crate::output::print_table(&render(&lists), false, args.json.as_deref());
    if let Some(path) = &args.json {
        crate::output::write_json(path, &lists)?;
    }
    Ok(())
}
