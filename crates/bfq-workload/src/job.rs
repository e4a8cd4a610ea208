//! Job descriptions: what to simulate, in TOML (docs/simulator.md, "Job format"). A [`Job`] is a plain struct that
//! code can build directly; [`Job::from_toml`] reads one from text, and every error names the file, the
//! line and the field.

use std::collections::BTreeMap;
use std::fmt;

use bfq_sched::{IoClass, Nanos, QueueSpec, MAX_WEIGHT, MIN_WEIGHT};
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};

use crate::units::{parse_duration, parse_size};

/// A size in bytes, written `"128KiB"`, `"5GB"` or as a plain integer of bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size(pub u64);

/// A duration, written `"500ms"`, `"30s"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Duration(pub Nanos);

/// A weight in `MIN_WEIGHT..=MAX_WEIGHT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Weight(pub u32);

/// An I/O class written `"be"`, `"be4"`, `"rt0"`, `"idle"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Class(pub IoClass);

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match StringOrInt::deserialize(d)? {
            StringOrInt::Int(i) if i >= 0 => Ok(Size(i as u64)),
            StringOrInt::Int(i) => Err(de::Error::custom(format!("a size cannot be negative, got {i}"))),
            StringOrInt::Str(s) => parse_size(&s).map(Size).map_err(de::Error::custom),
        }
    }
}

impl Serialize for Size {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match StringOrInt::deserialize(d)? {
            StringOrInt::Int(_) => Err(de::Error::custom(
                "a duration needs a unit: write it as a string such as \"500ms\" or \"30s\"",
            )),
            StringOrInt::Str(s) => parse_duration(&s).map(Duration).map_err(de::Error::custom),
        }
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{}ns", self.0))
    }
}

impl<'de> Deserialize<'de> for Weight {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = i64::deserialize(d)?;
        if (i64::from(MIN_WEIGHT)..=i64::from(MAX_WEIGHT)).contains(&w) {
            Ok(Weight(w as u32))
        } else {
            Err(de::Error::custom(format!("weight must be {MIN_WEIGHT}..={MAX_WEIGHT}, got {w}")))
        }
    }
}

impl Serialize for Weight {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(self.0)
    }
}

impl Default for Weight {
    fn default() -> Self {
        Weight(bfq_sched::DEFAULT_WEIGHT)
    }
}

impl<'de> Deserialize<'de> for Class {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse::<IoClass>().map(Class).map_err(de::Error::custom)
    }
}

impl Serialize for Class {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.to_string())
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum StringOrInt {
    Int(i64),
    Str(String),
}

/// A parameter value as text; TOML numbers and booleans are accepted and turned into text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct ParamValue(pub String);

impl<'de> Deserialize<'de> for ParamValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Any {
            Int(i64),
            Float(f64),
            Bool(bool),
            Str(String),
        }
        Ok(ParamValue(match Any::deserialize(d)? {
            Any::Int(i) => i.to_string(),
            Any::Float(f) => f.to_string(),
            Any::Bool(b) => if b { "1" } else { "0" }.to_string(),
            Any::Str(s) => s,
        }))
    }
}

/// The device: a preset and overrides of its parameters. Without a `[device]` table, or without a
/// `preset` in it, a job runs on `default`: the papers' disk (seed 001 Table 1, third system, 89 MB/s).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceSpec {
    /// Preset name (see `bfq_sim::device::DEVICE_PRESETS`).
    #[serde(default = "default_preset")]
    pub preset: String,
    /// Parameter overrides, applied in key order.
    #[serde(default)]
    pub params: BTreeMap<String, ParamValue>,
}

fn default_preset() -> String {
    "default".to_string()
}

impl Default for DeviceSpec {
    fn default() -> Self {
        DeviceSpec { preset: default_preset(), params: BTreeMap::new() }
    }
}

/// The scheduler a job names by default (the CLI can run others), with tunables.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulerSpec {
    /// Scheduler name (see `bfq_sched::SCHEDULER_NAMES`).
    pub name: String,
    /// Tunables, passed to `Scheduler::set_param` in key order.
    #[serde(default)]
    pub params: BTreeMap<String, ParamValue>,
}

/// The system-wide write-back path.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WritebackSpec {
    /// Dirty page-cache limit.
    #[serde(default = "default_dirty_limit")]
    pub dirty_limit: Size,
    /// The most flushed writes queued in the scheduler at once.
    #[serde(default = "default_writeback_depth")]
    pub depth: u32,
    /// Weight of the write-back queue.
    #[serde(default)]
    pub weight: Weight,
    /// Class of the write-back queue.
    #[serde(default)]
    pub class: Class,
}

fn default_dirty_limit() -> Size {
    Size(256 << 20)
}

fn default_writeback_depth() -> u32 {
    128
}

impl Default for WritebackSpec {
    fn default() -> Self {
        WritebackSpec {
            dirty_limit: default_dirty_limit(),
            depth: default_writeback_depth(),
            weight: Weight::default(),
            class: Class::default(),
        }
    }
}

/// The kinds of application (workload generators).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AppKind {
    /// Greedy sequential reader of its own file.
    SeqReader,
    /// Greedy random reader of its own file.
    RandReader,
    /// Greedy sequential buffered writer of its own file.
    SeqWriter,
    /// Greedy random buffered writer of its own file.
    RandWriter,
    /// Start-up replay of a trace, once or repeatedly.
    Startup,
    /// Video player reading one frame per period, counting dropped frames.
    Video,
    /// DBMS-like processes reading 4 KiB at random in one common file, `window` outstanding each.
    Dbms,
    /// Processes reading interleaved chunks of one file.
    Interleaved,
    /// Web server: processes serving small (p = 0.9) or large files and appending to a log.
    WebServer,
    /// Streaming server: a new stream every `every` until 1% of the chunks are lost.
    Streaming,
}

impl AppKind {
    /// The name used in job files.
    pub fn as_str(self) -> &'static str {
        match self {
            AppKind::SeqReader => "seq-reader",
            AppKind::RandReader => "rand-reader",
            AppKind::SeqWriter => "seq-writer",
            AppKind::RandWriter => "rand-writer",
            AppKind::Startup => "startup",
            AppKind::Video => "video",
            AppKind::Dbms => "dbms",
            AppKind::Interleaved => "interleaved",
            AppKind::WebServer => "web-server",
            AppKind::Streaming => "streaming",
        }
    }
}

/// One application (or `count` identical ones).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AppSpec {
    /// Name in reports (default: kind and index).
    #[serde(default)]
    pub name: Option<String>,
    /// What it does.
    pub kind: AppKind,
    /// How many identical applications (each with its own file and queue).
    #[serde(default = "one")]
    pub count: u32,
    /// Weight of each of its queues.
    #[serde(default)]
    pub weight: Weight,
    /// Class of each of its queues.
    #[serde(default)]
    pub class: Class,
    /// Request size (readers: each read; writers: each dirtied and flushed chunk).
    #[serde(default)]
    pub request_size: Option<Size>,
    /// Readers: reads kept outstanding (1 = synchronous; more = read-ahead window).
    #[serde(default)]
    pub window: Option<u32>,
    /// Size of its file (readers, writers).
    #[serde(default)]
    pub file_size: Option<Size>,
    /// Start-up: trace name (`xterm`, `gnometerm`) or path of a trace file.
    #[serde(default)]
    pub trace: Option<String>,
    /// When it starts (start-up).
    #[serde(default)]
    pub start: Option<Duration>,
    /// Start-up: start again this long after the previous start (or at its end if later). Streaming:
    /// the interval between new streams (default 15 s).
    #[serde(default)]
    pub every: Option<Duration>,
    /// Start-up: at most this many invocations.
    #[serde(default)]
    pub invocations: Option<u64>,
    /// Start-up: the next invocation starts no earlier than this long after the previous one ended
    /// (the S suite pauses 3 s + 1 s between invocations).
    #[serde(default)]
    pub pause: Option<Duration>,
    /// DBMS, interleaved, web server: number of processes (queues); streaming: most streams.
    #[serde(default)]
    pub processes: Option<u32>,
    /// Video: frames per second; streaming: chunks per second of each stream.
    #[serde(default)]
    pub fps: Option<u32>,
    /// Video, streaming: playback buffer (how late after its period a frame or chunk may arrive).
    #[serde(default)]
    pub buffer: Option<Duration>,
    /// Video: length of the movie.
    #[serde(default)]
    pub length: Option<Duration>,
}

fn one() -> u32 {
    1
}

impl AppSpec {
    /// An application of this kind with every option at its default.
    pub fn new(kind: AppKind) -> Self {
        AppSpec {
            name: None,
            kind,
            count: 1,
            weight: Weight::default(),
            class: Class::default(),
            request_size: None,
            window: None,
            file_size: None,
            trace: None,
            start: None,
            every: None,
            invocations: None,
            pause: None,
            processes: None,
            fps: None,
            buffer: None,
            length: None,
        }
    }

    /// The queue spec of each of its queues.
    pub fn queue_spec(&self) -> QueueSpec {
        QueueSpec { weight: self.weight.0, class: self.class.0 }
    }

    /// Bytes per request: `request_size`, or the kind's default (seed 001 sec. 6.2: 128 KiB
    /// sequential reads, 4 KiB random ones; the write-back path flushes 256 KiB chunks; a video frame
    /// is 40 KiB). The one place every runner (simulator, `bfq run`, `bfq compare`) takes it from.
    pub fn request_bytes(&self) -> u64 {
        self.request_size.map_or(
            match self.kind {
                AppKind::SeqReader | AppKind::WebServer | AppKind::Streaming => 128 << 10,
                AppKind::RandReader | AppKind::RandWriter | AppKind::Dbms => 4 << 10,
                AppKind::SeqWriter => 256 << 10,
                AppKind::Video => 40 << 10,
                AppKind::Interleaved => 64 << 10,
                // A replay's requests have the trace's sizes.
                AppKind::Startup => 0,
            },
            |s| s.0,
        )
    }

    /// Processes (queues) of a DBMS, interleaved or web-server application, or the most streams of a
    /// streaming server: `processes`, or the kind's default; 1 for the other kinds.
    pub fn process_count(&self) -> u32 {
        match self.kind {
            AppKind::Dbms | AppKind::WebServer => self.processes.unwrap_or(100),
            AppKind::Interleaved => self.processes.unwrap_or(4),
            AppKind::Streaming => self.processes.unwrap_or(64),
            _ => 1,
        }
    }

    /// Whether it writes (its region's data is overwritten when it runs on a real target).
    pub fn writes(&self) -> bool {
        matches!(self.kind, AppKind::SeqWriter | AppKind::RandWriter | AppKind::WebServer)
    }
}

/// A whole simulation job.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Job {
    /// Name in reports.
    #[serde(default)]
    pub name: Option<String>,
    /// Seed of every random choice.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Simulated duration.
    pub duration: Duration,
    /// Initial part not measured.
    #[serde(default = "zero_duration")]
    pub warmup: Duration,
    /// Initial width of the throughput-over-time buckets.
    #[serde(default = "default_bucket")]
    pub bucket: Duration,
    /// The device (default: the `default` preset).
    #[serde(default)]
    pub device: DeviceSpec,
    /// The scheduler run when none is named on the command line.
    #[serde(default)]
    pub scheduler: Option<SchedulerSpec>,
    /// The write-back path.
    #[serde(default)]
    pub writeback: WritebackSpec,
    /// Where the first file starts on the device.
    #[serde(default)]
    pub layout_start: Option<Size>,
    /// A named workload of seed 001 sec. 6.2 (`10r-seq`, `10r-rand`, `5r5w-seq`, `5r5w-rand`), added
    /// before the applications listed in `app`.
    #[serde(default)]
    pub workload: Option<String>,
    /// Applications.
    #[serde(default, rename = "app")]
    pub apps: Vec<AppSpec>,
}

fn default_seed() -> u64 {
    1
}

fn zero_duration() -> Duration {
    Duration(0)
}

fn default_bucket() -> Duration {
    Duration(100 * bfq_sched::MSEC)
}

/// The longest run a job may ask for (24 h).
pub const MAX_DURATION: Nanos = 24 * 3600 * bfq_sched::SEC;

/// The most processes (scheduler queues; threads in real runs) a job may have in all.
pub const MAX_QUEUES: u64 = 10_000;

/// The largest request.
pub const MAX_REQUEST_BYTES: u64 = 64 << 20;

/// A duration as people write it in job files.
fn human_duration(ns: Nanos) -> String {
    if ns >= 3600 * bfq_sched::SEC && ns % (3600 * bfq_sched::SEC) == 0 {
        format!("{}h", ns / (3600 * bfq_sched::SEC))
    } else if ns >= bfq_sched::SEC && ns % bfq_sched::MSEC == 0 {
        format!("{}s", ns as f64 / 1e9)
    } else {
        format!("{}ms", ns as f64 / 1e6)
    }
}

/// The named background workloads of seed 001 sec. 6.2.
pub const NAMED_WORKLOADS: &[&str] = &["10r-seq", "10r-rand", "5r5w-seq", "5r5w-rand"];

/// Expands a named workload into its applications.
pub fn named_workload(name: &str) -> Option<Vec<AppSpec>> {
    let with_count = |kind, count| AppSpec { count, ..AppSpec::new(kind) };
    Some(match name {
        "10r-seq" => vec![with_count(AppKind::SeqReader, 10)],
        "10r-rand" => vec![with_count(AppKind::RandReader, 10)],
        "5r5w-seq" => vec![with_count(AppKind::SeqReader, 5), with_count(AppKind::SeqWriter, 5)],
        "5r5w-rand" => vec![with_count(AppKind::RandReader, 5), with_count(AppKind::RandWriter, 5)],
        _ => return None,
    })
}

/// A job that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct JobError {
    /// The file (or `<job>` for text without a file).
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// The field concerned, when known.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        write!(f, ": ")?;
        if let Some(field) = &self.field {
            write!(f, "field `{field}`: ")?;
        }
        write!(f, "{}", self.message)
    }
}

impl Job {
    /// Reads a job from TOML text; `file` names it in errors.
    pub fn from_toml(text: &str, file: &str) -> Result<Job, JobError> {
        let job: Job = toml::from_str(text).map_err(|e| {
            let message = e.message().trim();
            let named = field_in_message(message);
            let (line, field) = match e.span() {
                // `missing field `x``: the span is the table that lacks it (the whole document for a
                // top-level field), not a key of it.
                Some(span) if message.starts_with("missing field") => {
                    let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
                    let on_header =
                        text.lines().nth(line - 1).is_some_and(|l| l.trim_start().starts_with('['));
                    (on_header.then_some(line), named)
                }
                Some(span) => {
                    let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
                    (Some(line), key_on_line(text, line).or(named))
                }
                None => (None, named),
            };
            JobError { file: file.to_string(), line, field, message: message.to_string() }
        })?;
        job.validate().map_err(|(app, field, message)| JobError {
            file: file.to_string(),
            line: match app {
                Some(i) => app_key_line(text, i, &field).or_else(|| app_table_line(text, i)),
                None => top_level_line(text, &field),
            },
            field: Some(field),
            message,
        })?;
        Ok(job)
    }

    /// Reads a job from a file.
    pub fn from_file(path: &std::path::Path) -> Result<Job, JobError> {
        let text = std::fs::read_to_string(path).map_err(|e| JobError {
            file: path.display().to_string(),
            line: None,
            field: None,
            message: format!("cannot read the job file: {e}"),
        })?;
        Job::from_toml(&text, &path.display().to_string())
    }

    /// Checks what the types alone cannot: (application index, field, message) on error.
    pub fn validate(&self) -> Result<(), (Option<usize>, String, String)> {
        let top = |field: &str, msg: String| Err((None, field.to_string(), msg));
        if self.duration.0 == 0 {
            return top("duration", "must be more than zero".into());
        }
        if self.duration.0 > MAX_DURATION {
            return top(
                "duration",
                format!(
                    "{} is longer than the limit of 24h: a longer run (real, or simulated, which takes time \
                     in proportion) is almost certainly a typo; split it into several jobs",
                    human_duration(self.duration.0)
                ),
            );
        }
        if self.warmup.0 >= self.duration.0 {
            return top("warmup", "must be shorter than the duration".into());
        }
        if self.bucket.0 < bfq_sched::MSEC {
            return top(
                "bucket",
                format!(
                    "must be at least 1ms (the throughput-over-time resolution), got {}",
                    human_duration(self.bucket.0)
                ),
            );
        }
        if self.writeback.depth == 0 || self.writeback.depth > 4096 {
            return top(
                "depth",
                format!(
                    "[writeback] depth must be 1..=4096 flushed writes in the scheduler, got {}",
                    self.writeback.depth
                ),
            );
        }
        if self.writeback.dirty_limit.0 < 4096 {
            return top(
                "dirty_limit",
                format!(
                    "[writeback] dirty_limit must be at least 4096 bytes (one page), got {}",
                    self.writeback.dirty_limit.0
                ),
            );
        }
        if let Some(w) = &self.workload {
            if named_workload(w).is_none() {
                return Err((
                    None,
                    "workload".into(),
                    format!("unknown workload {w:?} (known: {})", NAMED_WORKLOADS.join(", ")),
                ));
            }
        }
        if self.workload.is_none() && self.apps.is_empty() {
            return Err((None, "app".into(), "a job needs a `workload` or at least one [[app]]".into()));
        }
        // The named workload's applications count too (at most 10 queues).
        let mut queues: u64 = 10;
        for (i, app) in self.apps.iter().enumerate() {
            let fail = |field: &str, msg: String| Err((Some(i), field.to_string(), msg));
            if app.count == 0 || app.count > 10_000 {
                return fail("count", format!("must be 1..=10000, got {}", app.count));
            }
            if let Some(Size(s)) = app.request_size {
                if s < 512 {
                    return fail("request_size", format!("must be at least 512 bytes (one sector), got {s}"));
                }
                if s > MAX_REQUEST_BYTES {
                    return fail("request_size", format!("must be at most 64 MiB, got {s} bytes"));
                }
                if s % 512 != 0 {
                    return fail(
                        "request_size",
                        format!("must be a multiple of 512 bytes (sectors), got {s}"),
                    );
                }
            }
            if let Some(Size(f)) = app.file_size {
                if f == 0 {
                    return fail("file_size", "must be more than zero".into());
                }
                let request = app.request_bytes();
                if app.kind != AppKind::Startup && f < request {
                    return fail(
                        "file_size",
                        format!(
                            "{f} bytes is smaller than one request ({request} bytes, request_size or the \
                             default of {}): every request must fit in the application's file",
                            app.kind.as_str()
                        ),
                    );
                }
            }
            if app.invocations == Some(0) {
                return fail("invocations", "must be at least 1 (leave it out for no limit)".into());
            }
            queues = queues.saturating_add(u64::from(app.count) * u64::from(app.process_count()));
            if queues > MAX_QUEUES {
                let field = if app.process_count() > 1 { "processes" } else { "count" };
                return fail(
                    field,
                    format!(
                        "the job has more than {MAX_QUEUES} processes in all (count x processes, summed over \
                         the applications): each is a scheduler queue, and in real runs a thread"
                    ),
                );
            }
            if app.kind == AppKind::Startup && app.trace.is_none() {
                return fail(
                    "trace",
                    "a startup application needs `trace` (xterm, gnometerm or a file path)".into(),
                );
            }
            if app.kind != AppKind::Startup {
                for (field, set) in [
                    ("trace", app.trace.is_some()),
                    ("every", app.every.is_some() && app.kind != AppKind::Streaming),
                    ("invocations", app.invocations.is_some()),
                    ("pause", app.pause.is_some()),
                ] {
                    if set {
                        return fail(
                            field,
                            format!(
                                "only applies to startup{} applications, not {}",
                                if field == "every" { " and streaming" } else { "" },
                                app.kind.as_str()
                            ),
                        );
                    }
                }
            }
        }
        Ok(())
    }

    /// Every application, the named workload's first, with `count` expanded, each with its name.
    pub fn expanded_apps(&self) -> Vec<(String, AppSpec)> {
        let mut specs: Vec<AppSpec> = self.workload.as_deref().and_then(named_workload).unwrap_or_default();
        specs.extend(self.apps.iter().cloned());
        let mut out = Vec::new();
        let mut seen: BTreeMap<String, u32> = BTreeMap::new();
        for spec in specs {
            let base = spec.name.clone().unwrap_or_else(|| spec.kind.as_str().to_string());
            for _ in 0..spec.count {
                let n = seen.entry(base.clone()).or_insert(0);
                let name =
                    if spec.count == 1 && spec.name.is_some() { base.clone() } else { format!("{base}-{n}") };
                *n += 1;
                out.push((name, AppSpec { count: 1, ..spec.clone() }));
            }
        }
        out
    }
}

/// The key assigned on a given line (`key = value`), if any.
fn key_on_line(text: &str, line: usize) -> Option<String> {
    let l = text.lines().nth(line.checked_sub(1)?)?;
    let (key, _) = l.split_once('=')?;
    let key = key.trim().trim_matches('"');
    (!key.is_empty() && !key.starts_with('[')).then(|| key.to_string())
}

/// A field named in backquotes in a message about a field (`missing field `duration``, `unknown
/// field `speed``); not the tokens a syntax error quotes (`expected `.`, `]]``).
fn field_in_message(message: &str) -> Option<String> {
    let start = message.find("field `").map(|i| i + "field `".len())?;
    let len = message[start..].find('`')?;
    Some(message[start..start + len].to_string())
}

/// The line of the `i`-th `[[app]]` table.
fn app_table_line(text: &str, i: usize) -> Option<usize> {
    text.lines().enumerate().filter(|(_, l)| l.trim_start().starts_with("[[app]]")).nth(i).map(|(n, _)| n + 1)
}

/// The line where the `i`-th `[[app]]` table sets `key`, if it does.
fn app_key_line(text: &str, i: usize, key: &str) -> Option<usize> {
    let start = app_table_line(text, i)?;
    text.lines()
        .enumerate()
        .skip(start)
        .take_while(|(_, l)| !l.trim_start().starts_with('['))
        .find(|(_, l)| l.split_once('=').is_some_and(|(k, _)| k.trim() == key))
        .map(|(n, _)| n + 1)
}

/// The line where a top-level key is set.
fn top_level_line(text: &str, key: &str) -> Option<usize> {
    text.lines().position(|l| l.split_once('=').is_some_and(|(k, _)| k.trim() == key)).map(|n| n + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "t"
duration = "2s"
workload = "10r-seq"

[device]
preset = "constant"
params = { service_time_us = 100 }

[[app]]
kind = "startup"
trace = "xterm"
"#;

    #[test]
    fn a_valid_job_parses_and_expands_its_named_workload() {
        let job = Job::from_toml(GOOD, "good.toml").unwrap();
        let apps = job.expanded_apps();
        assert_eq!(apps.len(), 11);
        assert_eq!(apps[0].0, "seq-reader-0");
        assert_eq!(apps[10].1.kind, AppKind::Startup);
        assert_eq!(job.device.params["service_time_us"].0, "100");
    }

    #[test]
    fn a_bad_weight_names_the_file_line_and_field() {
        let text = "duration = \"1s\"\nworkload = \"10r-seq\"\n[device]\npreset = \"constant\"\n[[app]]\nkind = \"seq-reader\"\nweight = 5000\n";
        let err = Job::from_toml(text, "bad.toml").unwrap_err();
        assert_eq!(err.line, Some(7), "{err}");
        assert_eq!(err.field.as_deref(), Some("weight"), "{err}");
        assert!(err.to_string().starts_with("bad.toml:7: field `weight`"), "{err}");
    }

    #[test]
    fn an_unknown_field_is_named_with_its_line() {
        let text = "duration = \"1s\"\nworkload = \"10r-seq\"\n[device]\npreset = \"constant\"\nspeed = 3\n";
        let err = Job::from_toml(text, "j.toml").unwrap_err();
        assert_eq!(err.line, Some(5), "{err}");
        assert_eq!(err.field.as_deref(), Some("speed"), "{err}");
    }

    #[test]
    fn a_duration_without_unit_is_rejected_on_its_line() {
        let text = "workload = \"10r-seq\"\nduration = 30\n[device]\npreset = \"constant\"\n";
        let err = Job::from_toml(text, "j.toml").unwrap_err();
        assert_eq!((err.line, err.field.as_deref()), (Some(2), Some("duration")), "{err}");
    }

    #[test]
    fn a_startup_app_without_trace_is_rejected_at_its_table() {
        let text = "duration = \"1s\"\n[device]\npreset = \"constant\"\n\n[[app]]\nkind = \"seq-reader\"\n\n[[app]]\nkind = \"startup\"\n";
        let err = Job::from_toml(text, "j.toml").unwrap_err();
        assert_eq!((err.line, err.field.as_deref()), (Some(8), Some("trace")), "{err}");
    }

    #[test]
    fn a_job_without_device_runs_on_the_papers_disk() {
        let job = Job::from_toml("duration = \"1s\"\nworkload = \"10r-seq\"\n", "j.toml").unwrap();
        assert_eq!(job.device.preset, "default");
        let job = Job::from_toml("duration = \"1s\"\nworkload = \"10r-seq\"\n[device]\n", "j.toml").unwrap();
        assert_eq!(job.device.preset, "default");
        // (The simulator maps `default` to the papers' disk: bfq-sim's device tests.)
    }

    #[test]
    fn every_is_refused_for_a_reader_but_accepted_for_streaming() {
        let bad = "duration = \"1s\"\n[[app]]\nkind = \"seq-reader\"\nevery = \"1s\"\n";
        let err = Job::from_toml(bad, "j.toml").unwrap_err();
        assert_eq!((err.line, err.field.as_deref()), (Some(4), Some("every")), "{err}");
        let good = "duration = \"1s\"\n[[app]]\nkind = \"streaming\"\nevery = \"1s\"\n";
        Job::from_toml(good, "j.toml").unwrap();
    }

    #[test]
    fn an_unknown_kind_is_rejected_on_its_line() {
        let text = "duration = \"1s\"\n[device]\npreset = \"constant\"\n[[app]]\nkind = \"teleporter\"\n";
        let err = Job::from_toml(text, "j.toml").unwrap_err();
        assert_eq!((err.line, err.field.as_deref()), (Some(5), Some("kind")), "{err}");
    }

    /// Issue 14 item 5: every bad input found by trying the CLI as a new user would is refused, and the
    /// message names the field (and the line where the field is set, when it is set on one) and the limit.
    #[test]
    fn each_bad_input_is_refused_naming_its_field_line_and_limit() {
        let app = |extra: &str| format!("duration = \"2s\"\n[[app]]\nkind = \"seq-reader\"\n{extra}\n");
        let cases: Vec<(String, Option<usize>, Option<&str>, &str)> = vec![
            (app("file_size = 0"), Some(4), Some("file_size"), "more than zero"),
            (
                app("file_size = \"1KiB\""),
                Some(4),
                Some("file_size"),
                "smaller than one request (131072 bytes",
            ),
            (app("request_size = \"0\""), Some(4), Some("request_size"), "at least 512 bytes"),
            (app("request_size = \"1000\""), Some(4), Some("request_size"), "multiple of 512"),
            (app("request_size = \"1GiB\""), Some(4), Some("request_size"), "at most 64 MiB"),
            (
                "duration = \"2s\"\n[[app]]\nkind = \"startup\"\ntrace = \"xterm\"\ninvocations = 0\n".into(),
                Some(5),
                Some("invocations"),
                "at least 1",
            ),
            (app("") + "[writeback]\ndepth = 0\n", Some(6), Some("depth"), "1..=4096"),
            (app("") + "[writeback]\ndirty_limit = 0\n", Some(6), Some("dirty_limit"), "at least 4096 bytes"),
            (format!("bucket = \"0s\"\n{}", app("")), Some(1), Some("bucket"), "at least 1ms"),
            (app("").replace("2s", "100000h"), Some(1), Some("duration"), "limit of 24h"),
            (
                "duration = \"2s\"\n[[app]]\nkind = \"dbms\"\ncount = 10000\nprocesses = 10000\n".into(),
                Some(5),
                Some("processes"),
                "more than 10000 processes",
            ),
            (
                "duration = \"1s\"\n[[app]\nkind = \"seq-reader\"\n".into(),
                Some(2),
                None,
                "invalid table header",
            ),
            (
                "workload = \"10r-seq\"\n[device]\npreset = \"constant\"\n".into(),
                None,
                Some("duration"),
                "missing field",
            ),
        ];
        for (text, line, field, phrase) in cases {
            let err = Job::from_toml(&text, "bad.toml").expect_err(&text);
            assert_eq!(err.field.as_deref(), field, "{err}\n{text}");
            assert_eq!(err.line, line, "{err}\n{text}");
            assert!(err.to_string().contains(phrase), "{err} lacks {phrase:?}\n{text}");
        }
    }
}
