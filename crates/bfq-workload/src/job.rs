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
        struct SizeVisitor;
        impl de::Visitor<'_> for SizeVisitor {
            type Value = Size;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a size: a number of bytes, or a string such as \"128KiB\" or \"5GB\"")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Size, E> {
                Ok(Size(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Size, E> {
                u64::try_from(v)
                    .map(Size)
                    .map_err(|_| E::custom(format!("a size cannot be negative, got {v}")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Size, E> {
                parse_size(v).map(Size).map_err(E::custom)
            }
        }
        d.deserialize_any(SizeVisitor)
    }
}

impl Serialize for Size {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct DurationVisitor;
        impl de::Visitor<'_> for DurationVisitor {
            type Value = Duration;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration: a string such as \"500ms\" or \"30s\"")
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Duration, E> {
                Err(E::custom(DURATION_NEEDS_A_UNIT))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Duration, E> {
                Err(E::custom(DURATION_NEEDS_A_UNIT))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
                parse_duration(v).map(Duration).map_err(E::custom)
            }
        }
        d.deserialize_any(DurationVisitor)
    }
}

const DURATION_NEEDS_A_UNIT: &str =
    "a duration needs a unit: write it as a string such as \"500ms\" or \"30s\"";

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

/// A parameter value as text; TOML numbers and booleans are accepted and turned into text. A boolean
/// stays a word (`true`/`false`), which switches accept and numbers refuse: as `1`/`0` it ran
/// `max_budget = true` with a budget of one sector.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct ParamValue(pub String);

impl<'de> Deserialize<'de> for ParamValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Text;
        impl de::Visitor<'_> for Text {
            type Value = ParamValue;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number, a string or a boolean (a parameter's value)")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ParamValue, E> {
                Ok(ParamValue(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ParamValue, E> {
                Ok(ParamValue(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<ParamValue, E> {
                Ok(ParamValue(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<ParamValue, E> {
                Ok(ParamValue(v.to_string()))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ParamValue, E> {
                Ok(ParamValue(v.to_string()))
            }
        }
        d.deserialize_any(Text)
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

/// The largest `[writeback] dirty_limit`: what the simulator's write-back model can hold in memory.
pub const MAX_DIRTY_LIMIT: u64 = 64 << 30;

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

/// One application (or `count` identical ones): what every kind has (name, count, weight, class) and
/// its workload, one variant per kind with that kind's own fields.
///
/// In a job file it is one flat `[[app]]` table with a `kind` ([`AppTable`]); a field the kind does
/// not use is refused there, naming the fields it has.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(try_from = "AppTable", into = "AppTable")]
pub struct AppSpec {
    /// Name in reports (default: kind and index).
    pub name: Option<String>,
    /// How many identical applications (each with its own file and queue).
    pub count: u32,
    /// Weight of each of its queues.
    pub weight: Weight,
    /// Class of each of its queues.
    pub class: Class,
    /// The `[[group]]` its queues are placed in (default: none, the root of the hierarchy): B-WF2Q+
    /// shares the device between groups by their weights, then between the queues of a group by
    /// theirs (seed 003 sec. V, hierarchical BFQ).
    pub group: Option<String>,
    /// Where its file (region) starts on the device, in bytes (default: right after the previous
    /// application's; with `count`, the first copy's).
    pub at: Option<Size>,
    /// How long each of its processes takes, after one of its requests completes, to react (issue
    /// its next request, or whatever the completion leads to): default [`DEFAULT_THINK_TIME`]. The
    /// simulator delays the reaction by this much, so a scheduler sees the process with nothing
    /// queued in between (deceptive idleness, seed 000 sec. 3, seed 001 sec. 3); a real run has its
    /// process's real think time and refuses the field rather than pretend to honour it.
    pub think_time: Option<Duration>,
    /// What it does, with the options of that kind.
    pub workload: Workload,
}

/// The default think time of a simulated process: 50 us from a completion to the process's next
/// request. It stands for the wake-up of the process and the copy of the data it read out of the
/// page cache on the papers' PCs (seed 001 sec. 6.1 Table 1: Athlon 64 3200+ and Pentium 4 3.2 GHz;
/// a 128 KiB copy at the 2-3 GB/s of their memory buses takes 40-65 us): an estimate, not a
/// measurement. It only has to be above zero, so that a work-conserving scheduler sees the gap
/// (Iyer and Druschel's deceptive idleness), and far below the idling windows of the schedulers that
/// wait for it (AS's 6 ms `antic_expire`, CFQ's and BFQ's 8 ms `slice_idle`; BFQ and CFQ deem a think
/// time short below half of it, kernel-bfq-reference.md "Seeky / think time"), so that they still
/// wait, as they do for such readers in the kernel. `think_time = "0us"` gives the instant reaction
/// of earlier versions.
pub const DEFAULT_THINK_TIME: bfq_sched::Nanos = 50 * bfq_sched::USEC;

/// What an application does: one variant per [`AppKind`], each with the fields that kind uses. A
/// field left `None` takes the kind's default (documented on the field).
#[derive(Clone, Debug, PartialEq)]
pub enum Workload {
    /// Greedy sequential reader of its own file.
    SeqReader(Greedy),
    /// Greedy random reader of its own file.
    RandReader(Greedy),
    /// Greedy sequential buffered writer of its own file.
    SeqWriter(Greedy),
    /// Greedy random buffered writer of its own file.
    RandWriter(Greedy),
    /// Start-up replay of a trace, once or repeatedly.
    Startup(Startup),
    /// Video player reading one frame per period, counting dropped frames.
    Video(Video),
    /// DBMS-like processes reading at random in one common file, `window` outstanding each.
    Dbms(Dbms),
    /// Processes reading interleaved chunks of one file.
    Interleaved(Processes),
    /// Web server: processes serving small (p = 0.9) or large files and appending to a log.
    WebServer(Processes),
    /// Streaming server: a new stream every `every` until 1% of the chunks are lost.
    Streaming(Streaming),
}

/// A greedy reader's or writer's options.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Greedy {
    /// Bytes per read, or per dirtied and flushed chunk (default: 128 KiB sequential reads, 4 KiB
    /// random ones, 256 KiB written back).
    pub request_size: Option<Size>,
    /// Readers: reads kept outstanding (1 = synchronous; more = read-ahead window). Writers on a real
    /// target: writes in flight. Default 1.
    pub window: Option<u32>,
    /// Size of its file.
    pub file_size: Option<Size>,
    /// Readers: an ON/OFF reader reads for `on`, then issues nothing for `off`, and again (seed
    /// 002's streaming benchmark runs "5 ON/OFF file readers"). Both or neither. The simulator, the
    /// engine (`bfq run`) and the kernel side of `bfq compare` (fio's `thinktime_iotime` and
    /// `thinktime`) honour it.
    pub on: Option<Duration>,
    /// See `on`.
    pub off: Option<Duration>,
}

/// A start-up replay's options (seed 001 sec. 6.3).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Startup {
    /// Trace name (`xterm`, `gnometerm`) or path of a trace file.
    pub trace: String,
    /// When it first starts (default: at once).
    pub start: Option<Duration>,
    /// Start again this long after the previous start (or at its end if later); default: once.
    pub every: Option<Duration>,
    /// At most this many invocations.
    pub invocations: Option<u64>,
    /// The next invocation starts no earlier than this long after the previous one ended (the S suite
    /// pauses 3 s + 1 s between invocations).
    pub pause: Option<Duration>,
    /// Replay only the trace's first this many requests (default: all): a smaller application whose
    /// I/O is the start of a traced one's (the suite's *bash*, seed 001 sec. 6.3, is the head of the
    /// *xterm* trace: loading the program and its shared libraries).
    pub requests: Option<u64>,
}

/// A video player's options (seed 001 sec. 6.4).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Video {
    /// Bytes per frame (default 40 KiB).
    pub request_size: Option<Size>,
    /// Size of the movie's file.
    pub file_size: Option<Size>,
    /// Frames per second (default 25).
    pub fps: Option<u32>,
    /// How late after its period a frame may arrive (default 200 ms).
    pub buffer: Option<Duration>,
    /// When playback starts (default: at once).
    pub start: Option<Duration>,
    /// Length of the movie (default: the run).
    pub length: Option<Duration>,
}

/// A DBMS's options (seed 002).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Dbms {
    /// Bytes per read (default 4 KiB).
    pub request_size: Option<Size>,
    /// Reads each process keeps outstanding (default 1).
    pub window: Option<u32>,
    /// Size of the common file.
    pub file_size: Option<Size>,
    /// Processes, one queue each (default 100).
    pub processes: Option<u32>,
}

/// Options of the interleaved readers and the web server: processes sharing one region.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Processes {
    /// Bytes per read (default: interleaved 64 KiB chunks, web server 128 KiB).
    pub request_size: Option<Size>,
    /// Size of the shared region.
    pub file_size: Option<Size>,
    /// Processes, one queue each (default: interleaved 4, web server 100).
    pub processes: Option<u32>,
}

/// A streaming server's options (seed 002).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Streaming {
    /// Bytes per chunk (default 128 KiB).
    pub request_size: Option<Size>,
    /// Size of the movies' region.
    pub file_size: Option<Size>,
    /// The most streams (default 64).
    pub processes: Option<u32>,
    /// Chunks per second of each stream (default 4).
    pub fps: Option<u32>,
    /// How late after its period a chunk may arrive (default 1 s).
    pub buffer: Option<Duration>,
    /// Interval between new streams (default 15 s).
    pub every: Option<Duration>,
}

/// An `[[app]]` table as written in a job file: every field of every kind, flat, with its `kind`.
/// [`AppSpec`] is made from it, refusing fields that the kind does not use.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AppTable {
    /// Name in reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What it does.
    pub kind: Option<AppKind>,
    /// How many identical applications.
    #[serde(default = "one")]
    pub count: u32,
    /// Weight of each of its queues.
    #[serde(default)]
    pub weight: Weight,
    /// Class of each of its queues.
    #[serde(default)]
    pub class: Class,
    /// The `[[group]]` its queues are placed in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Where its region starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Size>,
    /// Its processes' think time (simulator).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think_time: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[allow(missing_docs)]
    pub request_size: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[allow(missing_docs)]
    pub window: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[allow(missing_docs)]
    pub file_size: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[allow(missing_docs)]
    pub trace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[allow(missing_docs)]
    pub start: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[allow(missing_docs)]
    pub every: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[allow(missing_docs)]
    pub invocations: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[allow(missing_docs)]
    pub pause: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[allow(missing_docs)]
    pub requests: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[allow(missing_docs)]
    pub processes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[allow(missing_docs)]
    pub fps: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[allow(missing_docs)]
    pub buffer: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[allow(missing_docs)]
    pub length: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[allow(missing_docs)]
    pub on: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[allow(missing_docs)]
    pub off: Option<Duration>,
}

fn one() -> u32 {
    1
}

impl AppKind {
    /// Every kind, in the order `bfq list` shows them.
    pub const ALL: [AppKind; 10] = [
        AppKind::SeqReader,
        AppKind::RandReader,
        AppKind::SeqWriter,
        AppKind::RandWriter,
        AppKind::Startup,
        AppKind::Video,
        AppKind::Dbms,
        AppKind::Interleaved,
        AppKind::WebServer,
        AppKind::Streaming,
    ];

    /// The fields of an `[[app]]` table of this kind, beyond name, kind, count, weight, class, group
    /// and at.
    pub fn fields(self) -> &'static [&'static str] {
        match self {
            AppKind::SeqReader | AppKind::RandReader => &["request_size", "window", "file_size", "on", "off"],
            AppKind::SeqWriter | AppKind::RandWriter => &["request_size", "window", "file_size"],
            AppKind::Startup => &["trace", "start", "every", "invocations", "pause", "requests"],
            AppKind::Video => &["request_size", "file_size", "fps", "buffer", "start", "length"],
            AppKind::Dbms => &["request_size", "window", "file_size", "processes"],
            AppKind::Interleaved | AppKind::WebServer => &["request_size", "file_size", "processes"],
            AppKind::Streaming => &["request_size", "file_size", "processes", "fps", "buffer", "every"],
        }
    }

    /// Whether `bfq compare` can run it under the kernel's schedulers (it has a fio translation).
    pub fn kernel_runs(self) -> bool {
        !matches!(self, AppKind::Video | AppKind::Interleaved | AppKind::WebServer | AppKind::Streaming)
    }
}

impl TryFrom<AppTable> for AppSpec {
    type Error = String;

    fn try_from(t: AppTable) -> Result<Self, String> {
        let kind = t.kind.ok_or("missing field `kind` (one of seq-reader, rand-reader, seq-writer, rand-writer, startup, video, dbms, interleaved, web-server, streaming)")?;
        let set = [
            ("request_size", t.request_size.is_some()),
            ("window", t.window.is_some()),
            ("file_size", t.file_size.is_some()),
            ("trace", t.trace.is_some()),
            ("start", t.start.is_some()),
            ("every", t.every.is_some()),
            ("invocations", t.invocations.is_some()),
            ("pause", t.pause.is_some()),
            ("requests", t.requests.is_some()),
            ("processes", t.processes.is_some()),
            ("fps", t.fps.is_some()),
            ("buffer", t.buffer.is_some()),
            ("length", t.length.is_some()),
            ("on", t.on.is_some()),
            ("off", t.off.is_some()),
        ];
        if let Some((field, _)) = set.iter().find(|(f, on)| *on && !kind.fields().contains(f)) {
            return Err(format!(
                "`{field}` does not apply to {} applications (their fields: {})",
                kind.as_str(),
                kind.fields().join(", ")
            ));
        }
        if t.on.is_some() != t.off.is_some() {
            return Err("an ON/OFF reader needs both `on` and `off`".into());
        }
        let greedy = || Greedy {
            request_size: t.request_size,
            window: t.window,
            file_size: t.file_size,
            on: t.on,
            off: t.off,
        };
        let processes =
            || Processes { request_size: t.request_size, file_size: t.file_size, processes: t.processes };
        let workload = match kind {
            AppKind::SeqReader => Workload::SeqReader(greedy()),
            AppKind::RandReader => Workload::RandReader(greedy()),
            AppKind::SeqWriter => Workload::SeqWriter(greedy()),
            AppKind::RandWriter => Workload::RandWriter(greedy()),
            AppKind::Startup => Workload::Startup(Startup {
                trace: t.trace.clone().ok_or("`trace` is missing: a startup application needs `trace` (xterm, gnometerm or a file path)")?,
                start: t.start,
                every: t.every,
                invocations: t.invocations,
                pause: t.pause,
                requests: t.requests,
            }),
            AppKind::Video => Workload::Video(Video {
                request_size: t.request_size,
                file_size: t.file_size,
                fps: t.fps,
                buffer: t.buffer,
                start: t.start,
                length: t.length,
            }),
            AppKind::Dbms => Workload::Dbms(Dbms {
                request_size: t.request_size,
                window: t.window,
                file_size: t.file_size,
                processes: t.processes,
            }),
            AppKind::Interleaved => Workload::Interleaved(processes()),
            AppKind::WebServer => Workload::WebServer(processes()),
            AppKind::Streaming => Workload::Streaming(Streaming {
                request_size: t.request_size,
                file_size: t.file_size,
                processes: t.processes,
                fps: t.fps,
                buffer: t.buffer,
                every: t.every,
            }),
        };
        Ok(AppSpec {
            name: t.name,
            count: t.count,
            weight: t.weight,
            class: t.class,
            group: t.group,
            at: t.at,
            think_time: t.think_time,
            workload,
        })
    }
}

impl From<AppSpec> for AppTable {
    fn from(a: AppSpec) -> AppTable {
        let mut t = AppTable {
            name: a.name,
            kind: Some(a.workload.kind()),
            count: a.count,
            weight: a.weight,
            class: a.class,
            group: a.group,
            at: a.at,
            think_time: a.think_time,
            ..AppTable::default()
        };
        match a.workload {
            Workload::SeqReader(g)
            | Workload::RandReader(g)
            | Workload::SeqWriter(g)
            | Workload::RandWriter(g) => {
                (t.request_size, t.window, t.file_size, t.on, t.off) =
                    (g.request_size, g.window, g.file_size, g.on, g.off);
            }
            Workload::Startup(s) => {
                (t.trace, t.start, t.every, t.invocations, t.pause, t.requests) =
                    (Some(s.trace), s.start, s.every, s.invocations, s.pause, s.requests);
            }
            Workload::Video(v) => {
                (t.request_size, t.file_size, t.fps, t.buffer, t.start, t.length) =
                    (v.request_size, v.file_size, v.fps, v.buffer, v.start, v.length);
            }
            Workload::Dbms(d) => {
                (t.request_size, t.window, t.file_size, t.processes) =
                    (d.request_size, d.window, d.file_size, d.processes);
            }
            Workload::Interleaved(p) | Workload::WebServer(p) => {
                (t.request_size, t.file_size, t.processes) = (p.request_size, p.file_size, p.processes);
            }
            Workload::Streaming(s) => {
                (t.request_size, t.file_size, t.processes, t.fps, t.buffer, t.every) =
                    (s.request_size, s.file_size, s.processes, s.fps, s.buffer, s.every);
            }
        }
        t
    }
}

impl Workload {
    /// Its kind.
    pub fn kind(&self) -> AppKind {
        match self {
            Workload::SeqReader(_) => AppKind::SeqReader,
            Workload::RandReader(_) => AppKind::RandReader,
            Workload::SeqWriter(_) => AppKind::SeqWriter,
            Workload::RandWriter(_) => AppKind::RandWriter,
            Workload::Startup(_) => AppKind::Startup,
            Workload::Video(_) => AppKind::Video,
            Workload::Dbms(_) => AppKind::Dbms,
            Workload::Interleaved(_) => AppKind::Interleaved,
            Workload::WebServer(_) => AppKind::WebServer,
            Workload::Streaming(_) => AppKind::Streaming,
        }
    }

    /// A workload of this kind with every option at its default (a start-up replay of `xterm`).
    pub fn new(kind: AppKind) -> Workload {
        match kind {
            AppKind::SeqReader => Workload::SeqReader(Greedy::default()),
            AppKind::RandReader => Workload::RandReader(Greedy::default()),
            AppKind::SeqWriter => Workload::SeqWriter(Greedy::default()),
            AppKind::RandWriter => Workload::RandWriter(Greedy::default()),
            AppKind::Startup => Workload::Startup(Startup { trace: "xterm".into(), ..Startup::default() }),
            AppKind::Video => Workload::Video(Video::default()),
            AppKind::Dbms => Workload::Dbms(Dbms::default()),
            AppKind::Interleaved => Workload::Interleaved(Processes::default()),
            AppKind::WebServer => Workload::WebServer(Processes::default()),
            AppKind::Streaming => Workload::Streaming(Streaming::default()),
        }
    }
}

impl AppSpec {
    /// One application doing `workload`, at the default weight and class.
    pub fn of(workload: Workload) -> Self {
        AppSpec {
            name: None,
            count: 1,
            weight: Weight::default(),
            class: Class::default(),
            group: None,
            at: None,
            think_time: None,
            workload,
        }
    }

    /// An application of this kind with every option at its default.
    pub fn new(kind: AppKind) -> Self {
        AppSpec::of(Workload::new(kind))
    }

    /// Named `name`.
    pub fn named(mut self, name: &str) -> Self {
        self.name = Some(name.to_string());
        self
    }

    /// With its region starting at byte `at` of the device.
    pub fn at(mut self, at: u64) -> Self {
        self.at = Some(Size(at));
        self
    }

    /// With weight `weight` (checked by [`Job::validate`]).
    pub fn weight(mut self, weight: u32) -> Self {
        self.weight = Weight(weight);
        self
    }

    /// Its kind.
    pub fn kind(&self) -> AppKind {
        self.workload.kind()
    }

    /// A reader's ON and OFF periods, if it has them (`on`, `off`; seed 002's streaming readers).
    pub fn on_off(&self) -> Option<(Nanos, Nanos)> {
        match &self.workload {
            Workload::SeqReader(g) | Workload::RandReader(g) => {
                g.on.zip(g.off).map(|(on, off)| (on.0, off.0))
            }
            _ => None,
        }
    }

    /// Its processes' think time: `think_time`, or [`DEFAULT_THINK_TIME`].
    pub fn think_time(&self) -> bfq_sched::Nanos {
        self.think_time.map_or(DEFAULT_THINK_TIME, |d| d.0)
    }

    /// The queue spec of each of its queues.
    pub fn queue_spec(&self) -> QueueSpec {
        QueueSpec { weight: self.weight.0, class: self.class.0 }
    }

    /// `request_size`, where the kind has one and it is set.
    pub fn request_size(&self) -> Option<Size> {
        match &self.workload {
            Workload::SeqReader(g)
            | Workload::RandReader(g)
            | Workload::SeqWriter(g)
            | Workload::RandWriter(g) => g.request_size,
            Workload::Startup(_) => None,
            Workload::Video(v) => v.request_size,
            Workload::Dbms(d) => d.request_size,
            Workload::Interleaved(p) | Workload::WebServer(p) => p.request_size,
            Workload::Streaming(s) => s.request_size,
        }
    }

    /// `file_size`, where the kind has one and it is set (a start-up replay's files are its trace's).
    pub fn file_size(&self) -> Option<Size> {
        match &self.workload {
            Workload::SeqReader(g)
            | Workload::RandReader(g)
            | Workload::SeqWriter(g)
            | Workload::RandWriter(g) => g.file_size,
            Workload::Startup(_) => None,
            Workload::Video(v) => v.file_size,
            Workload::Dbms(d) => d.file_size,
            Workload::Interleaved(p) | Workload::WebServer(p) => p.file_size,
            Workload::Streaming(s) => s.file_size,
        }
    }

    /// Requests each process keeps outstanding (`window`, default 1; 1 for kinds without one).
    pub fn window(&self) -> u32 {
        match &self.workload {
            Workload::SeqReader(g)
            | Workload::RandReader(g)
            | Workload::SeqWriter(g)
            | Workload::RandWriter(g) => g.window.unwrap_or(1),
            Workload::Dbms(d) => d.window.unwrap_or(1),
            _ => 1,
        }
    }

    /// When it starts (`start` of a start-up replay or a video player; the others start at once).
    pub fn start(&self) -> Option<Duration> {
        match &self.workload {
            Workload::Startup(s) => s.start,
            Workload::Video(v) => v.start,
            _ => None,
        }
    }

    /// A start-up replay's options.
    pub fn startup(&self) -> Option<&Startup> {
        match &self.workload {
            Workload::Startup(s) => Some(s),
            _ => None,
        }
    }

    /// Bytes per request: `request_size`, or the kind's default (seed 001 sec. 6.2: 128 KiB
    /// sequential reads, 4 KiB random ones; the write-back path flushes 256 KiB chunks; a video frame
    /// is 40 KiB). The one place every runner (simulator, `bfq run`, `bfq compare`) takes it from.
    pub fn request_bytes(&self) -> u64 {
        self.request_size().map_or(
            match self.kind() {
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
        match &self.workload {
            Workload::Dbms(d) => d.processes.unwrap_or(100),
            Workload::WebServer(p) => p.processes.unwrap_or(100),
            Workload::Interleaved(p) => p.processes.unwrap_or(4),
            Workload::Streaming(s) => s.processes.unwrap_or(64),
            _ => 1,
        }
    }

    /// The counts, rates and periods its table sets (`None`: not set, or not a field of its kind),
    /// for [`Job::validate`].
    fn numbers(&self) -> Numbers {
        let mut n = Numbers::default();
        match &self.workload {
            Workload::SeqReader(g)
            | Workload::RandReader(g)
            | Workload::SeqWriter(g)
            | Workload::RandWriter(g) => {
                n.window = g.window;
                n.periods = vec![("on", g.on), ("off", g.off)];
            }
            Workload::Startup(s) => n.periods = vec![("every", s.every)],
            Workload::Video(v) => n.fps = v.fps,
            Workload::Dbms(d) => (n.window, n.processes) = (d.window, d.processes),
            Workload::Interleaved(p) | Workload::WebServer(p) => n.processes = p.processes,
            Workload::Streaming(s) => {
                (n.processes, n.fps) = (s.processes, s.fps);
                n.periods = vec![("every", s.every)];
            }
        }
        n
    }

    /// Whether it writes (its region's data is overwritten when it runs on a real target).
    pub fn writes(&self) -> bool {
        matches!(self.kind(), AppKind::SeqWriter | AppKind::RandWriter | AppKind::WebServer)
    }
}

/// What [`AppSpec::numbers`] gives.
#[derive(Default)]
struct Numbers {
    window: Option<u32>,
    processes: Option<u32>,
    fps: Option<u32>,
    periods: Vec<(&'static str, Option<Duration>)>,
}

/// Where a message of [`Invalid`] names the other application of a duplicate name, as the caller
/// can: by line, or by table number.
const OTHER: &str = "{other}";

/// `message` with its [`OTHER`] mark replaced by `other`: the last one, since the names the message
/// quotes before it could hold the mark too.
fn with_other(message: &str, other: &str) -> String {
    match message.rsplit_once(OTHER) {
        Some((before, after)) => format!("{before}{other}{after}"),
        None => message.to_string(),
    }
}

/// Where a value that [`Job::validate`] refuses is written in a job file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// A top-level key.
    Top,
    /// A key of a table (`[writeback]`, `[scheduler]`).
    Table(&'static str),
    /// A key of the `i`-th `[[app]]` table.
    App(usize),
    /// A key of the `i`-th `[[group]]` table.
    Group(usize),
}

/// A value [`Job::validate`] refuses, and where it is written.
struct Invalid {
    place: Place,
    field: String,
    message: String,
    /// The application a duplicate name is also given to: its `[[app]]` table, or `None` for one of
    /// the named `workload`.
    other: Option<Option<usize>>,
}

impl Invalid {
    fn new(place: Place, field: &str, message: String) -> Invalid {
        Invalid { place, field: field.to_string(), message, other: None }
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
    /// Scheduling groups (`[[group]]`), in the order written: a hierarchy of tenants whose
    /// applications are placed in them with `group`.
    #[serde(default, rename = "group", skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupSpec>,
    /// Applications.
    #[serde(default, rename = "app")]
    pub apps: Vec<AppSpec>,
}

/// A scheduling group (`[[group]]`): a tenant of the hierarchy, scheduled by B-WF2Q+ among its
/// siblings by its weight and class as a queue is (seed 003 sec. V; the kernel's BFQ does this with
/// cgroups). The queues of the applications placed in it (`group = "name"`), and the groups below
/// it (`parent = "name"`), share what it gets.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GroupSpec {
    /// Its name, which applications and other groups refer to.
    pub name: String,
    /// Its weight among its siblings.
    #[serde(default)]
    pub weight: Weight,
    /// Its class among its siblings.
    #[serde(default)]
    pub class: Class,
    /// The group it is inside (default: the root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

/// The most `[[group]]` tables of a job.
pub const MAX_GROUPS: usize = 1000;

/// A group as a run sets it up in the scheduler: ids numbered from 1 in the order of the job's
/// `[[group]]` tables (0 is the root), listed parents first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSetup {
    /// Its name in the job.
    pub name: String,
    /// Its scheduler id.
    pub id: bfq_sched::GroupId,
    /// Its parent's scheduler id (`bfq_sched::ROOT_GROUP` at the top).
    pub parent: bfq_sched::GroupId,
    /// Its weight and class.
    pub spec: QueueSpec,
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

/// The most processes of one application (`processes`), and the most copies of one (`count`).
pub const MAX_PROCESSES: u32 = 10_000;

/// The most requests one process keeps outstanding (`window`).
pub const MAX_WINDOW: u32 = 1024;

/// The shortest period of an application's own rhythm: `on`, `off`, `every`, and one frame or chunk
/// (so at most [`MAX_FPS`] per second). Shorter periods are below one seek and a scheduler's idling
/// window, so no scheduler could see them, and each costs simulator events.
pub const MIN_PERIOD: Nanos = bfq_sched::MSEC;

/// Why [`MIN_PERIOD`] is 1 ms, for the messages that refuse a shorter period.
const PERIOD_REASON: &str = "a shorter period is below one seek and a scheduler's idling window (8ms), \
     so no scheduler could see it, and each period costs events (at 1ns a 5s run never ends)";

/// The most frames (video) or chunks per stream (streaming) per second: one per [`MIN_PERIOD`].
pub const MAX_FPS: u32 = 1000;

/// A video's frames per second when `fps` is not given.
pub const DEFAULT_FPS: u32 = 25;

/// A duration as people write it in job files.
pub(crate) fn human_duration(ns: Nanos) -> String {
    if ns == 0 {
        "0s".to_string()
    } else if ns < bfq_sched::USEC {
        format!("{ns}ns")
    } else if ns < bfq_sched::MSEC {
        format!("{}us", ns as f64 / 1e3)
    } else if ns >= 3600 * bfq_sched::SEC && ns % (3600 * bfq_sched::SEC) == 0 {
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
    /// A job of `duration` with everything else at its default (seed 1, no warm-up, 100 ms buckets,
    /// the `default` device, no applications yet): build jobs as values, then [`Job::validate`].
    pub fn new(duration: Duration) -> Job {
        Job {
            name: None,
            seed: default_seed(),
            duration,
            warmup: zero_duration(),
            bucket: default_bucket(),
            device: DeviceSpec::default(),
            scheduler: None,
            writeback: WritebackSpec::default(),
            layout_start: None,
            workload: None,
            groups: Vec::new(),
            apps: Vec::new(),
        }
    }

    /// Reads a job from TOML text; `file` names it in errors. A relative start-up `trace` path is read
    /// from the current directory ([`Job::from_file`] reads it from the job file's).
    pub fn from_toml(text: &str, file: &str) -> Result<Job, JobError> {
        Job::from_toml_in(text, file, None)
    }

    /// [`Job::from_toml`], with relative start-up `trace` paths read from `dir` if given: a job file
    /// and its traces move together, and the job then runs from any directory.
    fn from_toml_in(text: &str, file: &str, dir: Option<&std::path::Path>) -> Result<Job, JobError> {
        let mut job: Job = toml::from_str(text).map_err(|e| {
            let message = e.message().trim();
            let named = field_in_message(message);
            let error = |line: Option<usize>, field: Option<String>| {
                let message = in_words(message, field.as_deref());
                JobError { file: file.to_string(), line, field, message }
            };
            // An `[[app]]` table refused as a whole (a field its kind does not use, a missing
            // trace): toml points at the array of tables; find the table and the field's line.
            if let Some(i) = failing_app(text, message) {
                let line = named
                    .as_deref()
                    .and_then(|f| app_key_line(text, i, f))
                    .or_else(|| app_table_line(text, i));
                return error(line, named);
            }
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
                    // A one-bracket header (`[app]` for `[[app]]`) names its table as the field.
                    let header = text.lines().nth(line - 1).and_then(|l| {
                        let l = l.trim();
                        let name = l.strip_prefix('[')?.strip_suffix(']')?;
                        (!name.starts_with('[')).then(|| name.trim().to_string())
                    });
                    (Some(line), key_on_line(text, line).or(named).or(header))
                }
                None => (None, named),
            };
            error(line, field)
        })?;
        let moved = job.read_traces_from(dir);
        job.check().map_err(|e| {
            let written = match e.place {
                Place::Top => top_level_line(text, &e.field),
                Place::Table(table) => table_key_line(text, table, &e.field),
                Place::App(i) => app_key_line(text, i, &e.field),
                Place::Group(i) => array_key_line(text, "group", i, &e.field),
            };
            // A field the file does not write (an application's default `count`, say) is not named:
            // the line of its table is, and the message says what is wrong.
            let (line, field) = match (written, e.place) {
                (Some(line), _) => (Some(line), Some(e.field)),
                (None, Place::App(i)) => (app_table_line(text, i), None),
                (None, Place::Group(i)) => (array_table_line(text, "group", i), None),
                (None, Place::Table(table)) => (table_header_line(text, table), None),
                (None, Place::Top) => (None, Some(e.field)),
            };
            let other = match e.other {
                Some(Some(j)) => app_key_line(text, j, "name").or_else(|| app_table_line(text, j)),
                Some(None) => top_level_line(text, "workload"),
                None => None,
            };
            let other = other.map_or_else(String::new, |line| format!(" (the other on line {line})"));
            let mut message = with_other(&e.message, &other);
            if matches!(e.place, Place::App(i) if moved.contains(&i)) && field.as_deref() == Some("trace") {
                message.push_str(" (a relative `trace` is read from the job file's directory)");
            }
            JobError { file: file.to_string(), line, field, message }
        })?;
        Ok(job)
    }

    /// Puts `dir` before each start-up's relative `trace` path that is not a built-in trace's name;
    /// the indexes of the applications changed.
    fn read_traces_from(&mut self, dir: Option<&std::path::Path>) -> Vec<usize> {
        let Some(dir) = dir else { return Vec::new() };
        let mut moved = Vec::new();
        for (i, app) in self.apps.iter_mut().enumerate() {
            if let Workload::Startup(s) = &mut app.workload {
                let path = std::path::Path::new(&s.trace);
                let builtin = crate::trace::BUILTIN_TRACES.iter().any(|(name, _)| *name == s.trace);
                if !builtin && path.is_relative() {
                    s.trace = dir.join(path).display().to_string();
                    moved.push(i);
                }
            }
        }
        moved
    }

    /// The line of a job file's text where table `[table]` sets `key` (`table` may be dotted, as
    /// `device.params`), or where its sub-table `[table.key]` starts: for errors about a table's
    /// values found after loading (an unknown device preset, say).
    pub fn table_line(text: &str, table: &str, key: &str) -> Option<usize> {
        table_key_line(text, table, key)
    }

    /// Reads a job from a file.
    pub fn from_file(path: &std::path::Path) -> Result<Job, JobError> {
        let (file, text) = read_job_text(path)?;
        Job::from_toml_in(&text, &file, path.parent())
    }

    /// A job file for a real run (`bfq run`, `bfq compare`): [`Job::from_file`], and then a field that
    /// applies to simulated runs only is refused on its line (the layout refuses it too, but without the
    /// file and line).
    pub fn from_file_for_real_run(path: &std::path::Path) -> Result<Job, JobError> {
        let (file, text) = read_job_text(path)?;
        let job = Job::from_toml_in(&text, &file, path.parent())?;
        if let Some(i) = job.apps.iter().position(|a| a.think_time.is_some()) {
            return Err(JobError {
                file,
                line: app_key_line(&text, i, "think_time").or_else(|| app_table_line(&text, i)),
                field: Some("think_time".into()),
                message: THINK_TIME_SIMULATED_ONLY.into(),
            });
        }
        Ok(job)
    }

    /// Checks what the types alone cannot: (application index, field, message) on error.
    pub fn validate(&self) -> Result<(), (Option<usize>, String, String)> {
        self.check().map_err(|e| {
            let app = match e.place {
                Place::App(i) => Some(i),
                Place::Top | Place::Table(_) | Place::Group(_) => None,
            };
            let other = match e.other {
                Some(Some(j)) => format!(" (the other is [[app]] number {})", j + 1),
                Some(None) => " (the other is an application of the named `workload`)".to_string(),
                None => String::new(),
            };
            let message = with_other(&e.message, &other);
            (app, e.field, message)
        })
    }

    /// [`Job::validate`], saying where in a job file each value it refuses is written.
    fn check(&self) -> Result<(), Invalid> {
        let top = |field: &str, message: String| Err(Invalid::new(Place::Top, field, message));
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
        if self.bucket.0 > self.duration.0 {
            // One bucket, cut short: no series over time at all, said nowhere.
            return top(
                "bucket",
                format!(
                    "is longer than the run ({} against a duration of {}): the throughput over time would \
                     be one partial bucket",
                    human_duration(self.bucket.0),
                    human_duration(self.duration.0)
                ),
            );
        }
        let writeback =
            |field: &str, message: String| Err(Invalid::new(Place::Table("writeback"), field, message));
        if self.writeback.depth == 0 || self.writeback.depth > 4096 {
            return writeback(
                "depth",
                format!(
                    "[writeback] depth must be 1..=4096 flushed writes in the scheduler, got {}",
                    self.writeback.depth
                ),
            );
        }
        // The simulator keeps an entry per dirtied extent (a page written twice counts twice, as the
        // seeds' write-back model does), so its memory follows the limit: 64 GiB of 4 KiB writes is
        // about half a GiB; 1 TiB ran out of memory.
        if !(4096..=MAX_DIRTY_LIMIT).contains(&self.writeback.dirty_limit.0) {
            return writeback(
                "dirty_limit",
                format!(
                    "[writeback] dirty_limit must be 4096 bytes (one page) to 64 GiB, got {}",
                    self.writeback.dirty_limit.0
                ),
            );
        }
        if let Some(s) = &self.scheduler {
            let scheduler =
                |field: &str, message: String| Err(Invalid::new(Place::Table("scheduler"), field, message));
            if bfq_sched::canonical_name(&s.name).is_none() {
                return scheduler(
                    "name",
                    format!(
                        "[scheduler] name: unknown scheduler {:?} (known: {})",
                        s.name,
                        bfq_sched::SCHEDULER_NAMES.join(", ")
                    ),
                );
            }
            // Both kernel names of BFQ's idle window: one would win by the keys' order, unsaid.
            if s.params.contains_key("slice_idle") && s.params.contains_key("slice_idle_us") {
                return scheduler(
                    "params",
                    "[scheduler] params: `slice_idle` and `slice_idle_us` set one tunable (the idle window, \
                     in ms and in us); give one"
                        .into(),
                );
            }
            // Built once as a check, on both kinds of device (some tunables depend on it), so that a bad
            // tunable is named here rather than when its run starts, after the runs before it.
            let params: Vec<(String, String)> =
                s.params.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect();
            for rotational in [true, false] {
                let device = bfq_sched::DeviceInfo { rotational, queue_depth: 32 };
                if let Err(e) = bfq_sched::build(&s.name, device, &params) {
                    return scheduler("params", format!("[scheduler] params: {e}"));
                }
            }
        }
        let named = match &self.workload {
            Some(w) => match named_workload(w) {
                Some(apps) => apps,
                None => {
                    return top(
                        "workload",
                        format!("unknown workload {w:?} (known: {})", NAMED_WORKLOADS.join(", ")),
                    )
                }
            },
            None => Vec::new(),
        };
        if self.workload.is_none() && self.apps.is_empty() {
            return top("app", "a job needs a `workload` or at least one [[app]]".into());
        }
        self.check_groups()?;
        // The named workload's processes count too.
        let mut processes: u64 =
            named.iter().map(|a| u64::from(a.count) * u64::from(a.process_count())).sum();
        for (i, app) in self.apps.iter().enumerate() {
            let fail = |field: &str, message: String| Err(Invalid::new(Place::App(i), field, message));
            if app.count == 0 || app.count > MAX_PROCESSES {
                return fail("count", format!("must be 1..={MAX_PROCESSES}, got {}", app.count));
            }
            if app.name.as_deref().is_some_and(|n| n.trim().is_empty()) {
                // Reports and --alone name applications by it: an empty one made a blank table row.
                return fail("name", "must not be empty (leave `name` out to name it after its kind)".into());
            }
            if let Some(c) = app.name.as_deref().and_then(|n| n.chars().find(|&c| !printable(c))) {
                // A table row split over two lines, a terminal's colours changed by an escape, or
                // the one-line-per-request log broken by a newline in a name.
                return fail(
                    "name",
                    format!("holds the control character {c:?}: use letters, digits, spaces and punctuation"),
                );
            }
            if let Some(group) = &app.group {
                if !self.groups.iter().any(|g| &g.name == group) {
                    return fail("group", unknown_group(group, &self.groups));
                }
            }
            if let Some(Size(s)) = app.request_size() {
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
            if let Some(Size(f)) = app.file_size() {
                if f == 0 {
                    return fail("file_size", "must be more than zero".into());
                }
                let request = app.request_bytes();
                if f < request {
                    return fail(
                        "file_size",
                        format!(
                            "{f} bytes is smaller than one request ({request} bytes, request_size or the \
                             default of {}): every request must fit in the application's file",
                            app.kind().as_str()
                        ),
                    );
                }
                if let Some(problem) = crate::apps::region_problem(app, f.next_multiple_of(4096)) {
                    return fail("file_size", problem);
                }
            }
            if let Some(Duration(t)) = app.think_time {
                if t > bfq_sched::SEC {
                    return fail(
                        "think_time",
                        format!(
                            "{} is longer than the limit of 1s: a process that thinks that long between \
                             requests is better written as a timed workload (video, streaming)",
                            human_duration(t)
                        ),
                    );
                }
            }
            let fields = app.numbers();
            if let Some(w) = fields.window {
                if !(1..=MAX_WINDOW).contains(&w) {
                    return fail(
                        "window",
                        format!("must be 1..={MAX_WINDOW} requests outstanding per process, got {w}"),
                    );
                }
            }
            if let Some(p) = fields.processes {
                if !(1..=MAX_PROCESSES).contains(&p) {
                    return fail("processes", format!("must be 1..={MAX_PROCESSES}, got {p}"));
                }
            }
            if let Some(f) = fields.fps {
                if !(1..=MAX_FPS).contains(&f) {
                    return fail(
                        "fps",
                        format!(
                            "must be 1..={MAX_FPS} per second (one every 1ms at most: the shortest period \
                             an application may have), got {f}"
                        ),
                    );
                }
            }
            for (field, period) in fields.periods {
                if let Some(Duration(p)) = period {
                    if p < MIN_PERIOD {
                        return fail(
                            field,
                            format!("must be at least 1ms, got {}: {PERIOD_REASON}", human_duration(p)),
                        );
                    }
                }
            }
            if let Workload::Video(v) = &app.workload {
                let frame = bfq_sched::SEC / u64::from(v.fps.unwrap_or(DEFAULT_FPS));
                if let Some(Duration(l)) = v.length {
                    if l < frame {
                        return fail(
                            "length",
                            format!(
                                "{} is shorter than one frame ({} at {} fps): the player would have no frame \
                                 to play; leave `length` out to play for the whole run",
                                human_duration(l),
                                human_duration(frame),
                                v.fps.unwrap_or(DEFAULT_FPS)
                            ),
                        );
                    }
                    // Over before the measurement starts: its table reported 0 frames dropped of 2,
                    // which reads as a perfect playback.
                    let end = v.start.map_or(0, |s| s.0).saturating_add(l);
                    if end <= self.warmup.0 {
                        return fail(
                            "length",
                            format!(
                                "the player stops at {}, inside the warm-up ({}), which is not measured: \
                                 nothing of it would be reported; start it later or play longer",
                                human_duration(end),
                                human_duration(self.warmup.0)
                            ),
                        );
                    }
                }
            }
            if let Some(Duration(s)) = app.start() {
                if s >= self.duration.0 {
                    return fail(
                        "start",
                        format!(
                            "{} is at or after the end of the run (duration {}): the application would \
                             never run; start it earlier or make the run longer",
                            human_duration(s),
                            human_duration(self.duration.0)
                        ),
                    );
                }
            }
            if let Some(s) = app.startup() {
                if s.invocations == Some(0) {
                    return fail("invocations", "must be at least 1 (leave it out for no limit)".into());
                }
                if s.requests == Some(0) {
                    return fail("requests", "must be at least 1 (leave it out for the whole trace)".into());
                }
                // Read now, so that an unknown or malformed trace is named on its line rather than when
                // a run lays the job out.
                if let Err(message) = crate::trace::load_trace_head(&s.trace, s.requests) {
                    return fail("trace", message);
                }
            }
            let own = u64::from(app.count) * u64::from(app.process_count());
            processes = processes.saturating_add(own);
            if processes > MAX_QUEUES {
                // The field that makes the number, if the table writes one (else its line is cited).
                let field = if fields.processes.is_some() { "processes" } else { "count" };
                return fail(
                    field,
                    format!(
                        "with this application's {own} (count {} x processes {}), the job has {processes} \
                         processes in all, more than {MAX_QUEUES} processes, the limit (count x processes, \
                         summed over the applications): each is a scheduler queue, and in real runs a thread",
                        app.count,
                        app.process_count()
                    ),
                );
            }
        }
        // Reports and the JSON tell applications apart by name, copies of a `count` included.
        let mut seen: BTreeMap<String, Option<usize>> = BTreeMap::new();
        for (name, spec, source) in self.expanded_apps_with_source() {
            if let Some(&other) = seen.get(&name) {
                let base = spec.name.clone().unwrap_or_else(|| spec.kind().as_str().to_string());
                let copy = if base == name {
                    String::new()
                } else {
                    format!(" (the name of a copy: with `count`, copies are named {base}-0, {base}-1, ...)")
                };
                let place = source.map_or(Place::Top, Place::App);
                let field = if source.is_some() { "name" } else { "workload" };
                let mut invalid = Invalid::new(
                    place,
                    field,
                    format!(
                        "two applications are named `{name}`{copy}{OTHER}: reports and the JSON tell \
                         applications apart by name; give one another `name`"
                    ),
                );
                invalid.other = Some(other);
                return Err(invalid);
            }
            seen.insert(name, source);
        }
        Ok(())
    }

    /// The `[[group]]` tables' checks: names unique and not empty, parents known, no cycle.
    fn check_groups(&self) -> Result<(), Invalid> {
        if self.groups.len() > MAX_GROUPS {
            return Err(Invalid::new(
                Place::Group(MAX_GROUPS),
                "name",
                format!(
                    "a job may have at most {MAX_GROUPS} [[group]] tables, this one has {}",
                    self.groups.len()
                ),
            ));
        }
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, g) in self.groups.iter().enumerate() {
            let fail = |field: &str, message: String| Err(Invalid::new(Place::Group(i), field, message));
            if let Some(c) = g.name.chars().find(|&c| !printable(c)) {
                return fail(
                    "name",
                    format!("holds the control character {c:?}: use letters, digits, spaces and punctuation"),
                );
            }
            if g.name.trim().is_empty() {
                return fail("name", "a group needs a name (applications refer to it with `group`)".into());
            }
            if let Some(first) = seen.insert(&g.name, i) {
                return fail(
                    "name",
                    format!(
                        "two [[group]] tables are named `{}` (numbers {} and {}): applications and groups \
                         refer to a group by its name; give one another name",
                        g.name,
                        first + 1,
                        i + 1
                    ),
                );
            }
        }
        for (i, g) in self.groups.iter().enumerate() {
            let fail = |message: String| Err(Invalid::new(Place::Group(i), "parent", message));
            let Some(parent) = &g.parent else { continue };
            if parent == &g.name {
                return fail(format!("group `{}` cannot be its own parent", g.name));
            }
            if !seen.contains_key(parent.as_str()) {
                return fail(unknown_group(parent, &self.groups));
            }
            // Up the chain of parents: back to this group is a cycle.
            let mut chain = vec![g.name.as_str()];
            let mut up = Some(parent.as_str());
            while let Some(name) = up {
                if name == g.name {
                    chain.push(name);
                    return fail(format!(
                        "the groups' parents make a cycle ({}): a group cannot be inside itself",
                        chain.join(" -> ")
                    ));
                }
                chain.push(name);
                up = seen.get(name).and_then(|&j| self.groups[j].parent.as_deref());
                if chain.len() > self.groups.len() + 1 {
                    break;
                }
            }
        }
        Ok(())
    }

    /// The job's groups as a run sets them up in the scheduler, parents before children (the job has
    /// been validated: every parent is known and there is no cycle).
    pub fn group_setup(&self) -> Vec<GroupSetup> {
        // By name once: looking each parent up along each chain took 2 s for 1,000 nested groups.
        let index: std::collections::HashMap<&str, usize> =
            self.groups.iter().enumerate().map(|(i, g)| (g.name.as_str(), i)).collect();
        let parent_of = |i: usize| self.groups[i].parent.as_deref().and_then(|p| index.get(p).copied());
        // Each group's depth, from its parent's once known (a checked job has no cycle; the bound
        // keeps an unchecked one from looping).
        let mut depth: Vec<Option<usize>> = vec![None; self.groups.len()];
        for start in 0..self.groups.len() {
            let mut chain = Vec::new();
            let mut at = Some(start);
            while let Some(i) = at {
                if depth[i].is_some() || chain.len() > self.groups.len() {
                    break;
                }
                chain.push(i);
                at = parent_of(i);
            }
            let top = at.and_then(|i| depth[i]).map_or(0, |d| d + 1);
            for (k, &i) in chain.iter().rev().enumerate() {
                depth[i] = Some(top + k);
            }
        }
        let mut out: Vec<(usize, GroupSetup)> = self
            .groups
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let setup = GroupSetup {
                    name: g.name.clone(),
                    id: bfq_sched::GroupId(i as u32 + 1),
                    parent: parent_of(i).map_or(bfq_sched::ROOT_GROUP, |p| bfq_sched::GroupId(p as u32 + 1)),
                    spec: QueueSpec { weight: g.weight.0, class: g.class.0 },
                };
                (depth[i].unwrap_or(0), setup)
            })
            .collect();
        out.sort_by_key(|(d, s)| (*d, s.id.0));
        out.into_iter().map(|(_, s)| s).collect()
    }

    /// The scheduler id of the group named `name` ([`Job::group_setup`]'s numbering).
    pub fn group_id(&self, name: &str) -> Option<bfq_sched::GroupId> {
        self.groups.iter().position(|g| g.name == name).map(|i| bfq_sched::GroupId(i as u32 + 1))
    }

    /// Every application, the named workload's first, with `count` expanded, each with its name.
    pub fn expanded_apps(&self) -> Vec<(String, AppSpec)> {
        self.expanded_apps_with_source().into_iter().map(|(name, spec, _)| (name, spec)).collect()
    }

    /// The line of the job's text where the `[[app]]` table that gave the application named `app` in
    /// reports (an instance name such as `seq-2` for a table with `count`) sets `field`, or else where
    /// that table starts; `None` for an application of a named `workload` or an unknown name. For
    /// errors found after loading (the simulator's device is too small for the files, for instance).
    pub fn app_line(&self, text: &str, app: &str, field: &str) -> Option<usize> {
        let (_, _, index) = self.expanded_apps_with_source().into_iter().find(|(name, _, _)| name == app)?;
        let index = index?;
        app_key_line(text, index, field).or_else(|| app_table_line(text, index))
    }

    /// [`Job::expanded_apps`], each with the index of its `[[app]]` table (`None` for those of a
    /// named `workload`).
    fn expanded_apps_with_source(&self) -> Vec<(String, AppSpec, Option<usize>)> {
        let named: Vec<AppSpec> = self.workload.as_deref().and_then(named_workload).unwrap_or_default();
        let specs = named
            .into_iter()
            .map(|s| (s, None))
            .chain(self.apps.iter().cloned().enumerate().map(|(i, s)| (s, Some(i))));
        let mut out = Vec::new();
        let mut seen: BTreeMap<String, u32> = BTreeMap::new();
        for (spec, source) in specs {
            let base = spec.name.clone().unwrap_or_else(|| spec.kind().as_str().to_string());
            for copy in 0..spec.count {
                let n = seen.entry(base.clone()).or_insert(0);
                let name =
                    if spec.count == 1 && spec.name.is_some() { base.clone() } else { format!("{base}-{n}") };
                *n += 1;
                // The copies follow one another from the first one's place.
                let at = if copy == 0 { spec.at } else { None };
                out.push((name, AppSpec { count: 1, at, ..spec.clone() }, source));
            }
        }
        out
    }
}

/// Why a real run refuses `think_time` (its processes have their own).
pub(crate) const THINK_TIME_SIMULATED_ONLY: &str =
    "applies to simulated runs only (`bfq sim`, `bfq suite`): \
     a real run's processes react with their own think time; remove the field for real runs";

/// A job file's name as errors show it, and its text.
/// The longest job file read (10,000 applications of a few lines each fit many times over).
const MAX_JOB_FILE_BYTES: u64 = 16 << 20;

fn read_job_text(path: &std::path::Path) -> Result<(String, String), JobError> {
    let file = path.display().to_string();
    // Through a limit: a job file named `/dev/zero` was read until memory ran out.
    match crate::trace::read_at_most(path, MAX_JOB_FILE_BYTES) {
        Ok(Some(text)) => Ok((file, text)),
        Ok(None) => Err(JobError {
            file,
            line: None,
            field: None,
            message: format!("the job file is longer than {MAX_JOB_FILE_BYTES} bytes; is it a job file?"),
        }),
        Err(e) => {
            Err(JobError { file, line: None, field: None, message: format!("cannot read the job file: {e}") })
        }
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
    // `x` does not apply ... / `trace` is missing ...
    if let Some(rest) = message.strip_prefix('`') {
        let len = rest.find('`')?;
        return Some(rest[..len].to_string());
    }
    let start = message.find("field `").map(|i| i + "field `".len())?;
    let len = message[start..].find('`')?;
    Some(message[start..start + len].to_string())
}

/// The index of the `[[app]]` table whose conversion into an [`AppSpec`] fails with `message`.
fn failing_app(text: &str, message: &str) -> Option<usize> {
    let doc: toml::Table = toml::from_str(text).ok()?;
    let apps = doc.get("app")?.as_array()?;
    apps.iter().position(|v| {
        AppTable::deserialize(v.clone())
            .ok()
            .is_some_and(|t| AppSpec::try_from(t).err().is_some_and(|e| e == message))
    })
}

/// The message for a `group` or `parent` naming no `[[group]]` of the job.
fn unknown_group(name: &str, groups: &[GroupSpec]) -> String {
    if groups.is_empty() {
        format!("unknown group `{name}`: the job has no [[group]] tables (add one with name = \"{name}\")")
    } else {
        let names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
        format!("unknown group `{name}` (the job's groups: {})", names.join(", "))
    }
}

/// The line of the `i`-th `[[table]]` of an array of tables.
fn array_table_line(text: &str, table: &str, i: usize) -> Option<usize> {
    text.lines().enumerate().filter(|(_, l)| l.trim() == format!("[[{table}]]")).nth(i).map(|(n, _)| n + 1)
}

/// The line where the `i`-th `[[table]]` sets `key`, if it does.
fn array_key_line(text: &str, table: &str, i: usize, key: &str) -> Option<usize> {
    let start = array_table_line(text, table, i)?;
    text.lines()
        .enumerate()
        .skip(start)
        .take_while(|(_, l)| !l.trim_start().starts_with('['))
        .find(|(_, l)| sets_key(l, key))
        .map(|(n, _)| n + 1)
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

/// Whether a line sets `key` (`key = ...`, or `"key" = ...`).
fn sets_key(line: &str, key: &str) -> bool {
    line.split_once('=').is_some_and(|(k, _)| k.trim().trim_matches('"') == key)
}

/// The name of the table a header line opens (`[device]`: `device`; `[[app]]`: `app`), if it is one.
fn header_name(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let inner = t.strip_prefix("[[").or_else(|| t.strip_prefix('['))?;
    Some(inner[..inner.find(']')?].trim())
}

/// The line where a top-level key is set (before the first table).
fn top_level_line(text: &str, key: &str) -> Option<usize> {
    text.lines().take_while(|l| header_name(l).is_none()).position(|l| sets_key(l, key)).map(|n| n + 1)
}

/// The line of the header `[table]`.
fn table_header_line(text: &str, table: &str) -> Option<usize> {
    text.lines().position(|l| header_name(l) == Some(table)).map(|n| n + 1)
}

/// The line where `[table]` sets `key`, or where `[table.key]` starts; or, for a table written
/// inline at the top level (`scheduler = { name = "x" }`), that line.
fn table_key_line(text: &str, table: &str, key: &str) -> Option<usize> {
    let mut current: Option<&str> = None;
    for (n, l) in text.lines().enumerate() {
        if let Some(name) = header_name(l) {
            if name == format!("{table}.{key}") {
                return Some(n + 1);
            }
            current = Some(name);
        } else if current == Some(table) && sets_key(l, key) {
            return Some(n + 1);
        }
    }
    top_level_line(text, table)
}

/// A type error of serde in words a person reads: `invalid type: string "high", expected u32` becomes
/// `expected a whole number from 1 to 1024, got the string "high"` for `window` (what the field
/// takes, where it is known; else the type in words).
fn in_words(message: &str, field: Option<&str>) -> String {
    // `[app]` (one bracket) where `[[app]]` is meant, as `bfq serve` says for `[export]`.
    if let Some(f @ ("app" | "group")) = field {
        if message.contains("expected a sequence")
            && (message.contains("got a table") || message.contains("invalid type: map"))
        {
            return format!("expected an array of tables: write each as [[{f}]] (two brackets), not [{f}]");
        }
    }
    // toml's word for an integer past 2^63 - 1 (`weight = 99999999999999999999`).
    if message == "number too large to fit in target type" {
        return match field.and_then(field_takes) {
            Some(expected) => format!("the number is too large: expected {expected}"),
            None => "the number is too large".to_string(),
        };
    }
    // toml's own word for an enum given a number (`kind = 3`).
    if message == "wanted string or table" {
        return match field {
            Some("kind") => format!(
                "expected a string, one of {}",
                AppKind::ALL.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ")
            ),
            _ => "expected a string".to_string(),
        };
    }
    let Some(rest) =
        message.strip_prefix("invalid type: ").or_else(|| message.strip_prefix("invalid value: "))
    else {
        return message.to_string();
    };
    let Some((got, expected)) = rest.rsplit_once(", expected ") else { return message.to_string() };
    let expected = field.and_then(field_takes).map_or_else(|| type_in_words(expected), str::to_string);
    // `integer `-1``, `boolean `true``: the value alone; `string "x"`: the string "x".
    let got = match got.split_once(" `") {
        Some((_, value)) => value.trim_end_matches('`').to_string(),
        None if got.starts_with("string ") => format!("the {got}"),
        None => match got {
            "sequence" => "an array".to_string(),
            "map" => "a table".to_string(),
            other => other.to_string(),
        },
    };
    format!("expected {expected}, got {got}")
}

/// What a field whose type alone does not say it takes (a number's range, a class's spelling).
fn field_takes(field: &str) -> Option<&'static str> {
    Some(match field {
        "weight" => "a whole number from 1 to 1000",
        "count" | "processes" => "a whole number from 1 to 10000",
        "window" => "a whole number from 1 to 1024",
        "fps" => "a whole number from 1 to 1000",
        "invocations" | "requests" => "a whole number, at least 1",
        "depth" => "a whole number from 1 to 4096",
        // TOML integers are signed 64-bit: a job file cannot hold the larger half of a u64.
        "seed" => "a whole number from 0 to 9223372036854775807",
        "class" => "an I/O class: \"rt\", \"rt0\" to \"rt7\", \"be\", \"be0\" to \"be7\", or \"idle\"",
        _ => return None,
    })
}

/// serde's names of Rust types in words.
fn type_in_words(expected: &str) -> String {
    match expected {
        "u8" | "u16" | "u32" | "u64" | "usize" => {
            let max = match expected {
                "u8" => u64::from(u8::MAX),
                "u16" => u64::from(u16::MAX),
                "u32" => u64::from(u32::MAX),
                _ => u64::MAX,
            };
            format!("a whole number from 0 to {max}")
        }
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number".to_string(),
        "f32" | "f64" => "a number".to_string(),
        "a map" => "a table, such as { key = value }".to_string(),
        // The job's own tables, by their Rust names (`app = ["x"]`, `device = 3`).
        "struct AppTable" | "struct AppSpec" => "an [[app]] table".to_string(),
        "struct DeviceSpec" => "a [device] table".to_string(),
        "struct SchedulerSpec" => "a [scheduler] table".to_string(),
        "struct WritebackSpec" => "a [writeback] table".to_string(),
        "struct GroupSpec" | "struct GroupTable" => "a [[group]] table".to_string(),
        other if other.starts_with("struct ") => "a table".to_string(),
        other => other.to_string(),
    }
}

/// Whether `c` may be in a name that tables, logs and terminals print: not a control character
/// (newline, escape, ...) nor a character that reorders or hides the text around it (bidirectional
/// overrides and isolates, zero-width ones).
fn printable(c: char) -> bool {
    !c.is_control()
        && !matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
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
        assert_eq!(apps[10].1.kind(), AppKind::Startup);
        assert_eq!(job.device.params["service_time_us"].0, "100");
    }

    #[test]
    fn a_think_time_in_a_real_run_is_refused_on_its_line() {
        let path = std::env::temp_dir().join(format!("bfq-think-{}.toml", std::process::id()));
        let text = "duration = \"1s\"\n[[app]]\nkind = \"seq-reader\"\n[[app]]\nkind = \"rand-reader\"\nthink_time = \"5ms\"\n";
        std::fs::write(&path, text).unwrap();
        let err = Job::from_file_for_real_run(&path).unwrap_err();
        let simulated = Job::from_file(&path);
        std::fs::remove_file(&path).unwrap();
        assert_eq!((err.line, err.field.as_deref()), (Some(6), Some("think_time")), "{err}");
        assert!(simulated.is_ok(), "the simulator takes it");
    }

    #[test]
    fn an_application_is_found_on_its_line_by_its_name_in_reports() {
        // Errors found after loading (a file too large for the simulated device) name the line.
        let text =
            "duration = \"1s\"\nworkload = \"10r-seq\"\n[[app]]\nname = \"seq\"\nkind = \"seq-reader\"\n\
                    count = 3\nfile_size = \"1GiB\"\n[[app]]\nkind = \"rand-reader\"\n";
        let job = Job::from_toml(text, "j.toml").unwrap();
        assert_eq!(job.app_line(text, "seq-2", "file_size"), Some(7));
        assert_eq!(job.app_line(text, "seq-0", "count"), Some(6));
        // No such field in its table: the table's line.
        assert_eq!(job.app_line(text, "rand-reader-0", "file_size"), Some(8));
        // An application of the named workload has no table of its own; an unknown name, no line.
        assert_eq!(job.app_line(text, "seq-reader-0", "file_size"), None);
        assert_eq!(job.app_line(text, "nobody", "file_size"), None);
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

    /// Issue 15 part 1: each kind has its own fields; one it does not use is refused on its line, with
    /// the kind's fields named (it used to be ignored silently).
    #[test]
    fn a_field_the_kind_does_not_use_is_refused_with_the_kinds_fields() {
        let text = "duration = \"1s\"\n[[app]]\nkind = \"rand-reader\"\n\n[[app]]\nkind = \"seq-reader\"\nwindow = 2\nfps = 25\n";
        let err = Job::from_toml(text, "j.toml").unwrap_err();
        assert_eq!((err.line, err.field.as_deref()), (Some(8), Some("fps")), "{err}");
        assert!(
            err.message.contains("seq-reader") && err.message.contains("request_size, window, file_size"),
            "{err}"
        );
    }

    /// A typed application written back to TOML reads back the same (the suite builds jobs as values).
    #[test]
    fn a_typed_job_round_trips_through_its_toml_form() {
        let mut job = Job::new(Duration(2 * bfq_sched::SEC));
        job.apps = vec![
            AppSpec::of(Workload::SeqReader(Greedy { window: Some(4), ..Greedy::default() }))
                .named("r")
                .weight(300),
            AppSpec::of(Workload::Startup(Startup {
                trace: "gnometerm".into(),
                every: Some(Duration(3 * bfq_sched::SEC)),
                requests: Some(250),
                ..Startup::default()
            })),
            AppSpec::of(Workload::Dbms(Dbms { processes: Some(7), ..Dbms::default() })),
        ];
        let text = toml::to_string(&job).unwrap();
        assert_eq!(Job::from_toml(&text, "round-trip.toml").unwrap(), job, "{text}");
    }

    #[test]
    fn every_is_refused_for_a_reader_but_accepted_for_streaming() {
        let bad = "duration = \"1s\"\n[[app]]\nkind = \"seq-reader\"\nevery = \"1s\"\n";
        let err = Job::from_toml(bad, "j.toml").unwrap_err();
        assert_eq!((err.line, err.field.as_deref()), (Some(4), Some("every")), "{err}");
        let good = "duration = \"1s\"\n[[app]]\nkind = \"streaming\"\nevery = \"1s\"\n";
        Job::from_toml(good, "j.toml").unwrap();
    }

    /// Seed 002, video streaming: "5 ON/OFF file readers": a reader's `on` and `off` go together, and
    /// a writer has neither.
    #[test]
    fn on_off_readers_need_both_periods_and_only_readers_have_them_seed002_streaming() {
        let job = |app: &str| Job::from_toml(&format!("duration = \"1s\"\n[[app]]\n{app}\n"), "j.toml");
        let j = job("kind = \"seq-reader\"\non = \"5s\"\noff = \"5s\"").unwrap();
        let Workload::SeqReader(g) = &j.apps[0].workload else { panic!("a reader") };
        assert_eq!((g.on, g.off), (Some(Duration(5 * bfq_sched::SEC)), Some(Duration(5 * bfq_sched::SEC))));
        let text = toml::to_string(&j).unwrap();
        assert_eq!(Job::from_toml(&text, "again").unwrap(), j, "{text}");
        assert!(job("kind = \"seq-reader\"\non = \"5s\"").unwrap_err().to_string().contains("both"));
        assert!(job("kind = \"seq-writer\"\non = \"5s\"\noff = \"5s\"").is_err());
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
            (
                app("") + "[writeback]\ndirty_limit = 0\n",
                Some(6),
                Some("dirty_limit"),
                "4096 bytes (one page) to 64 GiB",
            ),
            (
                app("") + "[writeback]\ndirty_limit = \"1TiB\"\n",
                Some(6),
                Some("dirty_limit"),
                "to 64 GiB, got 1099511627776",
            ),
            // A boolean for a number (ran with a budget of one sector when booleans became 1/0).
            (
                app("") + "[scheduler]\nname = \"bfq\"\nparams = { max_budget = true }\n",
                Some(7),
                Some("params"),
                "`max_budget` = \"true\"",
            ),
            // Both names of the idle window: `slice_idle_us` won by the keys' order, unsaid.
            (
                app("") + "[scheduler]\nname = \"bfq\"\nparams = { slice_idle = 1, slice_idle_us = 5000 }\n",
                Some(7),
                Some("params"),
                "`slice_idle` and `slice_idle_us` set one tunable",
            ),
            (
                app("") + "[device]\npreset = \"ssd-px256m5s\"\nparams = { queue_depth = [1] }\n",
                Some(7),
                Some("params"),
                "a number, a string or a boolean (a parameter's value), got an array",
            ),
            // One bracket where two are meant, and the job's tables named in words, not Rust's.
            (
                "duration = \"1s\"\n[app]\nkind = \"seq-reader\"\n".to_string(),
                Some(2),
                Some("app"),
                "write each as [[app]] (two brackets), not [app]",
            ),
            (
                "duration = \"1s\"\n[group]\nname = \"g\"\n".to_string(),
                Some(2),
                Some("group"),
                "write each as [[group]] (two brackets), not [group]",
            ),
            (
                "duration = \"1s\"\napp = [\"x\"]\n".to_string(),
                Some(2),
                Some("app"),
                "expected an [[app]] table",
            ),
            (
                "duration = \"1s\"\ndevice = 3\n".to_string(),
                Some(2),
                Some("device"),
                "expected a [device] table",
            ),
            (format!("bucket = \"0s\"\n{}", app("")), Some(1), Some("bucket"), "at least 1ms"),
            (format!("bucket = \"10s\"\n{}", app("")), Some(1), Some("bucket"), "is longer than the run"),
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

    /// Reads `text` as `j.toml`, which must be refused: (line, field, message).
    fn refused(text: &str) -> (Option<usize>, Option<String>, String) {
        let err = Job::from_toml(text, "j.toml").expect_err(text);
        (err.line, err.field.clone(), err.to_string())
    }

    /// A zero or tiny rate, count or period divided by zero (fps) or never let a run end (on/off of
    /// 1ns): each is refused on its line with its range.
    #[test]
    fn a_zero_or_tiny_rate_count_or_period_is_refused_on_its_line_with_its_range() {
        let app =
            |kind: &str, extra: &str| format!("duration = \"5s\"\n[[app]]\nkind = \"{kind}\"\n{extra}\n");
        let cases = [
            (app("video", "fps = 0"), "fps", "1..=1000"),
            (app("streaming", "fps = 0"), "fps", "1..=1000"),
            (app("video", "fps = 1001"), "fps", "1..=1000"),
            (app("seq-reader", "window = 0"), "window", "1..=1024"),
            (app("rand-reader", "window = 1025"), "window", "1..=1024"),
            (app("dbms", "window = 0"), "window", "1..=1024"),
            (app("dbms", "processes = 0"), "processes", "1..=10000"),
            (app("streaming", "processes = 0"), "processes", "1..=10000"),
            (app("interleaved", "processes = 10001"), "processes", "1..=10000"),
            (app("streaming", "every = \"0s\""), "every", "at least 1ms, got 0s"),
            (app("startup", "trace = \"xterm\"\nevery = \"0s\""), "every", "at least 1ms, got 0s"),
            (app("seq-reader", "on = \"1ns\"\noff = \"1s\""), "on", "at least 1ms, got 1ns"),
            (app("seq-reader", "on = \"1s\"\noff = \"500us\""), "off", "at least 1ms, got 500us"),
            (app("video", "length = \"0s\""), "length", "shorter than one frame (40ms at 25 fps)"),
            (
                format!("warmup = \"500ms\"\n{}", app("video", "start = \"100ms\"\nlength = \"100ms\"")),
                "length",
                "stops at 200ms, inside the warm-up (500ms)",
            ),
            (app("seq-reader", "name = \" \""), "name", "must not be empty"),
            (
                app("seq-reader", "weight = 99999999999999999999"),
                "weight",
                "the number is too large: expected a whole number",
            ),
            (app("seq-reader", "name = \"a\\nb\""), "name", "holds the control character '\\n'"),
            (
                app("seq-reader", "name = \"a\\u001b[31mred\""),
                "name",
                "holds the control character '\\u{1b}'",
            ),
            (app("seq-reader", "name = \"a\\u202eb\""), "name", "holds the control character '\\u{202e}'"),
            (
                app("video", "fps = 10\nlength = \"50ms\""),
                "length",
                "shorter than one frame (100ms at 10 fps)",
            ),
        ];
        for (text, field, phrase) in cases {
            let (line, named, message) = refused(&text);
            assert_eq!(named.as_deref(), Some(field), "{message}");
            let expected = text.lines().position(|l| l.starts_with(field)).map(|n| n + 1);
            assert_eq!(line, expected, "{message}");
            assert!(message.contains(phrase), "{message} lacks {phrase:?}");
        }
        // The limits themselves are taken.
        for extra in ["fps = 1000", "length = \"40ms\""] {
            Job::from_toml(&app("video", extra), "j.toml").unwrap();
        }
        Job::from_toml(&app("seq-reader", "window = 1024\non = \"1ms\"\noff = \"1ms\""), "j.toml").unwrap();
        Job::from_toml(&app("dbms", "processes = 10000"), "j.toml").unwrap();
    }

    /// docs/safety.md: at most 10,000 processes in all. It used to stop at 9,990 (ten processes of a
    /// named workload were counted in every job) and to name a `count` the file did not have.
    #[test]
    fn the_process_limit_is_10000_in_all_and_names_only_a_field_the_file_has() {
        let dbms = |n: u32| format!("duration = \"1s\"\n[[app]]\nkind = \"dbms\"\nprocesses = {n}\n");
        Job::from_toml(&dbms(10_000), "j.toml").unwrap();
        Job::from_toml(&(dbms(9_999) + "[[app]]\nkind = \"seq-reader\"\n"), "j.toml").unwrap();
        Job::from_toml("duration = \"1s\"\n[[app]]\nkind = \"seq-reader\"\ncount = 10000\n", "j.toml")
            .unwrap();
        // One more, from a table without `count` or `processes`: its own line, no field.
        let (line, field, message) = refused(&(dbms(10_000) + "\n[[app]]\nkind = \"seq-reader\"\n"));
        assert_eq!((line, field), (Some(6), None), "{message}");
        assert!(message.contains("application's 1 (count 1 x processes 1), the job has 10001 processes in all, more than 10000 processes"), "{message}");
        // The named workload's ten readers count.
        let (line, field, message) =
            refused(&dbms(9_991).replace("[[app]]", "workload = \"10r-seq\"\n[[app]]"));
        assert_eq!((line, field.as_deref()), (Some(5), Some("processes")), "{message}");
        assert!(message.contains("the job has 10001 processes in all"), "{message}");
    }

    /// Reports and the JSON tell applications apart by name: a name given twice, also one a `count`
    /// makes for its copies, is refused on the second with the first's line.
    #[test]
    fn a_name_given_to_two_applications_is_refused_with_both_lines() {
        let text = "duration = \"1s\"\n[[app]]\nname = \"a\"\nkind = \"seq-reader\"\n[[app]]\nname = \"a\"\nkind = \"rand-reader\"\n";
        let (line, field, message) = refused(text);
        assert_eq!((line, field.as_deref()), (Some(6), Some("name")), "{message}");
        assert!(
            message.contains("two applications are named `a` (the other on line 3): reports"),
            "{message}"
        );
        // `count = 2` names its copies seq-0 and seq-1.
        let text = "duration = \"1s\"\n[[app]]\nname = \"seq-1\"\nkind = \"seq-reader\"\n[[app]]\nname = \"seq\"\nkind = \"seq-reader\"\ncount = 2\n";
        let (line, field, message) = refused(text);
        assert_eq!((line, field.as_deref()), (Some(6), Some("name")), "{message}");
        assert!(
            message.contains("`seq-1` (the name of a copy")
                && message.contains("seq-1, ...) (the other on line 3)"),
            "{message}"
        );
        // An application of the named workload: the other line is the workload's.
        let text =
            "duration = \"1s\"\nworkload = \"10r-seq\"\n[[app]]\nname = \"seq-reader-3\"\nkind = \"video\"\n";
        let (line, _, message) = refused(text);
        assert_eq!(line, Some(4), "{message}");
        assert!(message.contains("(the other on line 2)"), "{message}");
        // Built as values: the table's number instead of a line.
        let mut job = Job::new(Duration(bfq_sched::SEC));
        job.apps = vec![AppSpec::new(AppKind::Video).named("v"), AppSpec::new(AppKind::Video).named("v")];
        let (app, field, message) = job.validate().unwrap_err();
        assert_eq!((app, field.as_str()), (Some(1), "name"));
        assert!(message.contains("named `v` (the other is [[app]] number 1): "), "{message}");
    }

    /// Seed 003 sec. V (hierarchical BFQ): groups are read with their parents, set up parents first
    /// (ids in the order written), and a group the job cannot have is refused on its line.
    #[test]
    fn groups_are_set_up_parents_first_and_bad_ones_are_refused_on_their_line() {
        let text = "duration = \"1s\"\n[[group]]\nname = \"inner\"\nparent = \"outer\"\nweight = 300\n\
                    [[group]]\nname = \"outer\"\nclass = \"idle\"\n[[app]]\nkind = \"seq-reader\"\ngroup = \"inner\"\n";
        let job = Job::from_toml(text, "j.toml").unwrap();
        let setup = job.group_setup();
        let ids: Vec<(String, u32, u32, u32)> =
            setup.iter().map(|g| (g.name.clone(), g.id.0, g.parent.0, g.spec.weight)).collect();
        assert_eq!(ids, vec![("outer".into(), 2, 0, 100), ("inner".into(), 1, 2, 300)]);
        assert_eq!(setup[0].spec.class, IoClass::Idle);
        assert_eq!(job.group_id("inner"), Some(bfq_sched::GroupId(1)));
        assert_eq!(job.expanded_apps()[0].1.group.as_deref(), Some("inner"));
        // Written back, the job reads the same.
        let again = Job::from_toml(&toml::to_string(&job).unwrap(), "again.toml").unwrap();
        assert_eq!(again, job);
        let group = |body: &str| format!("duration = \"1s\"\n{body}[[app]]\nkind = \"seq-reader\"\n");
        let cases: [(String, usize, &str, &str); 6] = [
            (
                group("[[group]]\nname = \"a\"\nparent = \"b\"\n"),
                4,
                "parent",
                "unknown group `b` (the job's groups: a)",
            ),
            (group("[[group]]\nname = \"a\"\nparent = \"a\"\n"), 4, "parent", "cannot be its own parent"),
            (
                group("[[group]]\nname = \"a\"\nparent = \"b\"\n[[group]]\nname = \"b\"\nparent = \"a\"\n"),
                4,
                "parent",
                "make a cycle (a -> b -> a)",
            ),
            (
                group("[[group]]\nname = \"a\"\n[[group]]\nname = \"a\"\n"),
                5,
                "name",
                "two [[group]] tables are named `a` (numbers 1 and 2)",
            ),
            (group("[[group]]\nname = \" \"\n"), 3, "name", "a group needs a name"),
            (group("[[group]]\nname = \"a\"\nweight = 0\n"), 4, "weight", "weight"),
        ];
        for (text, line, field, phrase) in cases {
            let (got_line, got_field, message) = refused(&text);
            assert_eq!((got_line, got_field.as_deref()), (Some(line), Some(field)), "{message}\n{text}");
            assert!(message.contains(phrase), "{message} lacks {phrase:?}\n{text}");
        }
        // An application in a group the job does not have.
        let text = "duration = \"1s\"\n[[app]]\nkind = \"seq-reader\"\ngroup = \"vm1\"\n";
        let (line, field, message) = refused(text);
        assert_eq!((line, field.as_deref()), (Some(4), Some("group")), "{message}");
        assert!(
            message.contains("the job has no [[group]] tables (add one with name = \"vm1\")"),
            "{message}"
        );
        // An unknown field of a group is named.
        let (line, _, message) = refused(&group("[[group]]\nname = \"a\"\nshare = 3\n"));
        assert_eq!(line, Some(4), "{message}");
        assert!(
            message.contains("unknown field `share`, expected one of `name`, `weight`, `class`, `parent`"),
            "{message}"
        );
    }

    #[test]
    fn an_application_starting_at_or_after_the_end_of_the_run_is_refused_on_its_start() {
        let app = |kind: &str, start: &str| {
            format!("duration = \"2s\"\n[[app]]\nkind = \"{kind}\"\ntrace = \"xterm\"\nstart = \"{start}\"\n")
        };
        let (line, field, message) = refused(&app("startup", "2s"));
        assert_eq!((line, field.as_deref()), (Some(5), Some("start")), "{message}");
        assert!(message.contains("2s is at or after the end of the run (duration 2s)"), "{message}");
        let video = app("video", "3s").replace("trace = \"xterm\"\n", "");
        assert_eq!(refused(&video).1.as_deref(), Some("start"));
        Job::from_toml(&app("startup", "1999ms"), "j.toml").unwrap();
    }

    /// An unknown trace, or one with a request larger than its process's file, used to pass the job
    /// file and fail when a run laid it out (`bfq run`: a short read mid-run), without a line.
    #[test]
    fn a_trace_that_cannot_be_replayed_is_refused_on_its_line() {
        let text = "duration = \"1s\"\n[[app]]\nkind = \"startup\"\ntrace = \"nosuch\"\n";
        let (line, field, message) = refused(text);
        assert_eq!((line, field.as_deref()), (Some(4), Some("trace")), "{message}");
        assert!(
            message.contains("neither a built-in trace (xterm, gnometerm) nor a readable file"),
            "{message}"
        );
        let path = std::env::temp_dir().join(format!("bfq-big-request-{}.trace", std::process::id()));
        std::fs::write(&path, "p 0 8 0 Seq 0 0 R 0 START\np 0 65536 0 Seq 0 0 R 0 C\n").unwrap();
        let (line, field, message) = refused(&text.replace("nosuch", path.to_str().unwrap()));
        std::fs::remove_file(&path).unwrap();
        assert_eq!((line, field.as_deref()), (Some(4), Some("trace")), "{message}");
        assert!(message.contains("line 2: size 65536 sectors out of range"), "{message}");
    }

    /// `[scheduler] name` is checked with the job (it was reported as if given to `--scheduler`), on
    /// its own line, not on the job's `name`; its tunables too.
    #[test]
    fn the_jobs_scheduler_and_its_tunables_are_refused_on_their_lines() {
        let text =
            "name = \"t\"\nduration = \"1s\"\n[scheduler]\nname = \"bfqq\"\n[[app]]\nkind = \"seq-reader\"\n";
        let (line, field, message) = refused(text);
        assert_eq!((line, field.as_deref()), (Some(4), Some("name")), "{message}");
        assert!(message.contains("[scheduler] name: unknown scheduler \"bfqq\" (known: bfq,"), "{message}");
        let text = text.replace("bfqq\"", "bfq\"\nparams = { no_such_tunable = 1 }");
        let (line, field, message) = refused(&text);
        assert_eq!((line, field.as_deref()), (Some(5), Some("params")), "{message}");
        assert!(message.contains("no_such_tunable"), "{message}");
    }

    /// serde's `invalid type: string "high", expected i64` named Rust types: the message says what the
    /// field takes instead.
    #[test]
    fn a_value_of_the_wrong_type_is_refused_saying_what_the_field_takes() {
        let app = |extra: &str| format!("duration = \"1s\"\n[[app]]\nkind = \"seq-reader\"\n{extra}\n");
        let cases = [
            (
                app("weight = \"high\""),
                "field `weight`: expected a whole number from 1 to 1000, got the string \"high\"",
            ),
            (
                app("window = \"x\""),
                "field `window`: expected a whole number from 1 to 1024, got the string \"x\"",
            ),
            (app("count = -1"), "field `count`: expected a whole number from 1 to 10000, got -1"),
            (
                app("file_size = true"),
                "field `file_size`: expected a size: a number of bytes, or a string such as \"128KiB\"",
            ),
            (app("on = 1.5\noff = \"1s\""), "field `on`: expected a duration: a string such as \"500ms\""),
            (app("class = 3"), "field `class`: expected an I/O class"),
            (
                app("").replace("\"seq-reader\"", "3"),
                "field `kind`: expected a string, one of seq-reader, rand-reader",
            ),
            (
                app("") + "[device]\nparams = 3\n",
                "field `params`: expected a table, such as { key = value }, got 3",
            ),
            (
                app("") + "[writeback]\ndepth = \"x\"\n",
                "field `depth`: expected a whole number from 1 to 4096",
            ),
            (
                "duration = \"1s\"\nseed = \"x\"\nworkload = \"10r-seq\"\n".into(),
                "field `seed`: expected a whole number from 0 to",
            ),
        ];
        for (text, phrase) in cases {
            let (_, _, message) = refused(&text);
            assert!(message.contains(phrase), "{message} lacks {phrase:?}");
            for rust in ["i64", "u32", "u64", "untagged"] {
                assert!(!message.contains(rust), "{message} names {rust}");
            }
        }
    }

    /// A web server's large files and a streaming server's per-stream parts must fit in its file: a
    /// smaller one read past its region, over other applications' files.
    #[test]
    fn a_file_too_small_for_a_web_or_streaming_servers_layout_is_refused() {
        let app =
            |kind: &str, extra: &str| format!("duration = \"1s\"\n[[app]]\nkind = \"{kind}\"\n{extra}\n");
        let (line, field, message) =
            refused(&app("web-server", "request_size = \"4KiB\"\nfile_size = \"64KiB\""));
        assert_eq!((line, field.as_deref()), (Some(5), Some("file_size")), "{message}");
        assert!(
            message.contains("too small for a web server") && message.contains("at least 64 MiB"),
            "{message}"
        );
        Job::from_toml(&app("web-server", "file_size = \"64MiB\""), "j.toml").unwrap();
        let (_, field, message) = refused(&app("streaming", "processes = 64\nfile_size = \"4MiB\""));
        assert_eq!(field.as_deref(), Some("file_size"), "{message}");
        assert!(
            message.contains("64 streams of 128 KiB chunks") && message.contains("use at least 8 MiB"),
            "{message}"
        );
        Job::from_toml(&app("streaming", "processes = 64\nfile_size = \"8MiB\""), "j.toml").unwrap();
    }
}
