//! `bfq serve`'s configuration (TOML): where it listens, its exports, and the scheduler they share.
//! Every error names the file, the line and the field, as job files do.
//!
//! ```toml
//! listen = ["127.0.0.1:10809", "unix:/run/bfq-serve.sock"]
//! scheduler = "bfq"                  # any scheduler of bfq-sched (default bfq)
//! params = { low_latency = 0 }       # its tunables (BFQ here: low_latency 0, latency_guard 150)
//! depth = 32                         # requests on each device at once
//! metrics = "127.0.0.1:9109"         # Prometheus text format at /metrics (default: none)
//! summary_interval = "10s"           # one line per export on standard error ("off": none)
//! read_ahead = "4MiB"                # how far ahead of a shallow sequential reader (default 4MiB; "off")
//! read_cache = "2GiB"                # windows kept in memory for re-reads (default "off")
//!
//! [[export]]
//! name = "vm1"
//! path = "/var/tmp/vm1.img"          # a file (created with `size` if missing) or a block device
//! size = "10GiB"                     # only for a file that does not exist yet
//! weight = 300                       # 1..=1000
//! class = "be"                       # rt0-7, be0-7, idle
//! read_only = false
//! description = "first VM's disk"
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;

use bfq_sched::{IoClass, QueueSpec, MAX_WEIGHT, MIN_WEIGHT};
use serde::Deserialize;

/// The configuration `bfq serve` runs without a `--config`: one export of 1 GiB on a file under
/// /var/tmp (created on first use, never overwritten), on localhost's NBD port.
pub const DEFAULT_CONFIG: &str = r#"
listen = ["127.0.0.1:10809"]

[[export]]
name = "default"
path = "/var/tmp/bfq-serve-default.img"
size = "1GiB"
description = "bfq serve's embedded default export"
"#;

/// A listen address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listen {
    /// `HOST:PORT`.
    Tcp(String),
    /// `unix:PATH`.
    Unix(PathBuf),
}

/// One export.
#[derive(Clone, Debug, PartialEq)]
pub struct Export {
    /// The name clients ask for.
    pub name: String,
    /// The backing file or block device.
    pub path: PathBuf,
    /// Size of the file to create if it does not exist.
    pub size: Option<u64>,
    /// Weight and class of every connection of the export.
    pub spec: QueueSpec,
    /// Writes are refused.
    pub read_only: bool,
    /// Shown by `NBD_OPT_LIST` and `NBD_OPT_INFO`.
    pub description: Option<String>,
    /// Whether the export's reads and writes go through the page cache.
    pub cache: Cache,
}

/// How an export's data reaches its device (qemu's names).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Cache {
    /// O_DIRECT: every read and write goes to the device through the scheduler (the default).
    #[default]
    None,
    /// Through the page cache: re-reads of cached data are answered from memory, and writes are
    /// written back by the kernel on its own schedule, which the scheduler does not order. FLUSH and
    /// FUA keep their guarantees.
    Writeback,
    /// Reads through the page cache, writes with O_DIRECT: a read whose bytes are all cached is
    /// answered from memory without the scheduler (it costs the device nothing), one that is not is
    /// read through the scheduler and leaves its pages cached; every write, trim and write-zeroes
    /// goes to the device through the scheduler as with `None`, and the kernel drops the cached
    /// pages a write replaces before the write completes.
    Read,
}

/// The whole configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Where to listen.
    pub listen: Vec<Listen>,
    /// The scheduler every device's exports share.
    pub scheduler: String,
    /// Its tunables.
    pub params: Vec<(String, String)>,
    /// Requests on each device at once.
    pub depth: u32,
    /// Where to serve Prometheus metrics (`HOST:PORT`, path `/metrics`), if anywhere.
    pub metrics: Option<String>,
    /// How often to print a one-line summary per export on standard error (`None`: never).
    pub summary_interval: Option<std::time::Duration>,
    /// How far ahead of a connection that reads sequentially its windows reach, in bytes (0: none).
    pub read_ahead: u64,
    /// How many bytes of read-ahead windows the server keeps in its memory for re-reads (0: none;
    /// `read_cache`, docs/serve.md "A cache of windows").
    pub read_cache: u64,
    /// Threads serving the connections: 1 runs the connections, the schedulers and the rings on one
    /// thread (no request crosses a thread); more run the connections on that many threads and each
    /// device's engine on a thread of its own. `None`: [`DEFAULT_THREADS`].
    pub threads: Option<usize>,
    /// Where to write the scheduler's events (not a configuration field: `bfq serve --events`); with
    /// several devices, one file each, `FILE.N` in the order of their first export.
    pub event_log: Option<PathBuf>,
    /// The exports.
    pub exports: Vec<Export>,
}

/// A configuration that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}{}: {}{message}", line.map(|l| format!(":{l}")).unwrap_or_default(), field.as_ref().map(|f| format!("field `{f}`: ")).unwrap_or_default())]
pub struct ConfigError {
    /// The file.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// The field, when known.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default = "default_listen")]
    listen: Vec<String>,
    #[serde(default = "default_scheduler")]
    scheduler: String,
    #[serde(default)]
    params: Option<BTreeMap<String, toml::Value>>,
    #[serde(default = "default_depth")]
    depth: u32,
    #[serde(default)]
    metrics: Option<String>,
    #[serde(default)]
    summary_interval: Option<String>,
    #[serde(default)]
    read_ahead: Option<toml::Value>,
    #[serde(default)]
    read_cache: Option<toml::Value>,
    #[serde(default)]
    threads: Option<i64>,
    #[serde(default, rename = "export")]
    exports: Vec<RawExport>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExport {
    name: String,
    path: PathBuf,
    #[serde(default)]
    size: Option<toml::Value>,
    #[serde(default)]
    weight: Option<i64>,
    #[serde(default)]
    class: Option<String>,
    #[serde(default)]
    read_only: bool,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    cache: Option<String>,
}

fn default_listen() -> Vec<String> {
    vec!["127.0.0.1:10809".into()]
}

fn default_scheduler() -> String {
    "bfq".into()
}

fn default_depth() -> u32 {
    32
}

impl Config {
    /// Reads a configuration; `file` names it in errors.
    pub fn from_toml(text: &str, file: &str) -> Result<Config, ConfigError> {
        let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            let message = e.message().trim().to_string();
            let field = message.find("field `").and_then(|i| {
                let rest = &message[i + 7..];
                rest.find('`').map(|j| rest[..j].to_string())
            });
            ConfigError { file: file.into(), line: e.span().map(|s| line_of(s.start)), field, message }
        })?;
        let err = |field: &str, export: Option<usize>, message: String| {
            let line = export.and_then(|i| {
                text.lines()
                    .enumerate()
                    .filter(|(_, l)| l.trim_start().starts_with("[[export]]"))
                    .nth(i)
                    .map(|(n, _)| n + 1)
            });
            ConfigError { file: file.into(), line, field: Some(field.into()), message }
        };
        if raw.listen.is_empty() {
            return Err(err(
                "listen",
                None,
                "needs at least one address (`HOST:PORT` or `unix:PATH`)".into(),
            ));
        }
        let mut listen = Vec::new();
        for l in &raw.listen {
            listen.push(match l.strip_prefix("unix:") {
                Some(p) if !p.is_empty() => Listen::Unix(PathBuf::from(p)),
                Some(_) => return Err(err("listen", None, format!("{l:?}: `unix:` needs a path"))),
                None if l
                    .rsplit_once(':')
                    .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok()) =>
                {
                    Listen::Tcp(l.clone())
                }
                None => return Err(err("listen", None, format!("{l:?} is not `HOST:PORT` or `unix:PATH`"))),
            });
        }
        if bfq_sched::canonical_name(&raw.scheduler).is_none() {
            return Err(err(
                "scheduler",
                None,
                format!(
                    "unknown scheduler {:?} (known: {})",
                    raw.scheduler,
                    bfq_sched::SCHEDULER_NAMES.join(", ")
                ),
            ));
        }
        if raw.depth == 0 || raw.depth > 4096 {
            return Err(err("depth", None, format!("must be 1..=4096, got {}", raw.depth)));
        }
        // Tenants of a server get their weights from the first request on: BFQ's interactive weight
        // raising of newly started queues is off unless the configuration turns it on. The latency
        // guard is on: a client that keeps a request or two outstanding (a VM's synchronous reads)
        // keeps near its latency alone beside greedy ones (docs/serve.md, "Pieces"). Slots end after
        // 20 ms rather than 125, and their largest budget follows (B_max = T_max x R_est, 2,621
        // sectors before the estimator measures anything): at the request rates one thread serves,
        // weights 3:1 came out 3.00, and a light client beside a greedy one 1.6-1.9x its p99 alone,
        // against 1.8-2.6x with 16,384-sector budgets in 20 ms slots (docs/serve.md, "One thread",
        // "Three scheduler fixes").
        let mut params: Vec<(String, String)> = Vec::new();
        if raw.scheduler.starts_with("bfq") {
            params.push(("low_latency".into(), "0".into()));
            params.push(("latency_guard".into(), "150".into()));
            params.push(("timeout_sync".into(), "20ms".into()));
        }
        for (k, v) in raw.params.unwrap_or_default() {
            let v = match v {
                toml::Value::String(s) => s,
                toml::Value::Boolean(b) => if b { "1" } else { "0" }.to_string(),
                other => other.to_string(),
            };
            params.retain(|(key, _)| *key != k);
            params.push((k, v));
        }
        if let Err(e) = bfq_sched::build(&raw.scheduler, bfq_sched::DeviceInfo::default(), &params) {
            return Err(err("params", None, e.to_string()));
        }
        if raw.exports.is_empty() {
            return Err(err("export", None, "needs at least one [[export]]".into()));
        }
        let mut exports: Vec<Export> = Vec::new();
        for (i, e) in raw.exports.into_iter().enumerate() {
            if e.name.len() > 4096 {
                return Err(err("name", Some(i), "is longer than 4096 bytes".into()));
            }
            if exports.iter().any(|x| x.name == e.name) {
                return Err(err("name", Some(i), format!("export {:?} is defined twice", e.name)));
            }
            let size = match e.size {
                None => None,
                Some(toml::Value::Integer(n)) if n > 0 => Some(n as u64),
                Some(toml::Value::String(s)) => Some(parse_size(&s).map_err(|m| err("size", Some(i), m))?),
                Some(other) => {
                    return Err(err(
                        "size",
                        Some(i),
                        format!("expected a size such as \"10GiB\", got {other}"),
                    ))
                }
            };
            let weight = e.weight.unwrap_or(i64::from(bfq_sched::DEFAULT_WEIGHT));
            if !(i64::from(MIN_WEIGHT)..=i64::from(MAX_WEIGHT)).contains(&weight) {
                return Err(err(
                    "weight",
                    Some(i),
                    format!("must be {MIN_WEIGHT}..={MAX_WEIGHT}, got {weight}"),
                ));
            }
            let class = match &e.class {
                Some(c) => c.parse::<IoClass>().map_err(|m| err("class", Some(i), m.to_string()))?,
                None => IoClass::default(),
            };
            let cache = match e.cache.as_deref() {
                None | Some("none") => Cache::None,
                Some("writeback") => Cache::Writeback,
                Some("read") => Cache::Read,
                Some(other) => {
                    return Err(err(
                        "cache",
                        Some(i),
                        format!(
                            "expected \"none\" (O_DIRECT, the default), \"read\" (reads through the page \
                             cache) or \"writeback\", got {other:?}"
                        ),
                    ))
                }
            };
            exports.push(Export {
                cache,
                name: e.name,
                path: e.path,
                size,
                spec: QueueSpec { weight: weight as u32, class },
                read_only: e.read_only,
                description: e.description,
            });
        }
        if let Some(m) = &raw.metrics {
            if !m.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok()) {
                return Err(err("metrics", None, format!("{m:?} is not `HOST:PORT`")));
            }
        }
        let summary_interval = match raw.summary_interval.as_deref().unwrap_or("10s") {
            "0" | "0s" | "off" => None,
            text => Some(parse_interval(text).map_err(|m| err("summary_interval", None, m))?),
        };
        let read_ahead = match size_or_off(raw.read_ahead, "4MiB").map_err(|m| err("read_ahead", None, m))? {
            None => DEFAULT_READ_AHEAD,
            Some(0) => 0,
            Some(n) => checked_read_ahead(n).map_err(|m| err("read_ahead", None, m))?,
        };
        let read_cache = match size_or_off(raw.read_cache, "2GiB").map_err(|m| err("read_cache", None, m))? {
            None | Some(0) => 0,
            Some(n) => checked_read_cache(n).map_err(|m| err("read_cache", None, m))?,
        };
        if read_cache > 0 && read_ahead == 0 {
            return Err(err(
                "read_cache",
                None,
                "keeps read-ahead windows, and `read_ahead` is off: turn it on, or the cache off".into(),
            ));
        }
        let threads = match raw.threads {
            None => None,
            Some(n) if (1..=MAX_THREADS as i64).contains(&n) => Some(n as usize),
            Some(n) => return Err(err("threads", None, format!("must be 1..={MAX_THREADS}, got {n}"))),
        };
        Ok(Config {
            listen,
            read_ahead,
            read_cache,
            threads,
            event_log: None,
            scheduler: raw.scheduler,
            params,
            depth: raw.depth,
            metrics: raw.metrics,
            summary_interval,
            exports,
        })
    }

    /// The threads to serve with: the configured number, or [`DEFAULT_THREADS`].
    pub fn threads_or_default(&self) -> usize {
        self.threads.unwrap_or(DEFAULT_THREADS)
    }

    /// Reads a configuration file.
    pub fn from_file(path: &std::path::Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: path.display().to_string(),
            line: None,
            field: None,
            message: format!("cannot read the configuration: {e}"),
        })?;
        Config::from_toml(&text, &path.display().to_string())
    }
}

/// Threads without a `threads` field: one. Connections, schedulers and rings then share a thread,
/// and no request crosses a thread between its arrival and its reply. On this machine's virtio
/// disk that took random 4 KiB reads at depth 16 from 35,000-44,000 to 63,000-68,000 IOPS, at or
/// above qemu-nbd's 58,000-64,000 (docs/serve.md, "One thread"). One CPU serves roughly
/// 75,000-100,000 small requests a second; a host whose clients need more sets `threads`.
pub const DEFAULT_THREADS: usize = 1;

/// The most threads `threads` may ask for.
pub const MAX_THREADS: usize = 256;

/// Read-ahead without a `read_ahead` field: 4 MiB ahead of the reader, in windows of 1 MiB. On this
/// machine's virtio disk it took a 128 KiB sequential reader at depth 4 from 5,300-6,600 to
/// 7,700-10,800 IOPS (docs/serve.md "Read-ahead, pipelined"); a reader that keeps more requests
/// outstanding, or that is not alone on its device, gets none.
pub const DEFAULT_READ_AHEAD: u64 = 4 << 20;

/// A read-ahead distance: whole 4 KiB blocks, at most 32 MiB (half a connection's 64 MiB byte budget).
fn checked_read_ahead(n: u64) -> Result<u64, String> {
    if n % 4096 != 0 || n > 32 << 20 {
        return Err(format!("must be a multiple of 4 KiB up to 32 MiB (or \"off\"), got {n} bytes"));
    }
    Ok(n)
}

/// A size field that may be `"off"`: `None` when absent, `Some(0)` for `"off"`, `"0"` or 0, else its
/// bytes (`"4MiB"` or a number); `example` shows the syntax in the error.
fn size_or_off(value: Option<toml::Value>, example: &str) -> Result<Option<u64>, String> {
    match value {
        None => Ok(None),
        Some(toml::Value::String(s)) if s == "off" || s == "0" => Ok(Some(0)),
        Some(toml::Value::Integer(n)) if n >= 0 => Ok(Some(n as u64)),
        Some(toml::Value::String(s)) => parse_size(&s).map(Some),
        Some(other) => Err(format!("expected a size such as \"{example}\" or \"off\", got {other}")),
    }
}

/// A read cache: at least one window (1 MiB), at most the machine's memory.
fn checked_read_cache(n: u64) -> Result<u64, String> {
    let window = crate::read_cache::MAX_ENTRY;
    if n < window {
        return Err(format!("must be at least 1MiB (one read-ahead window) or \"off\", got {n} bytes"));
    }
    // SAFETY: sysconf has no preconditions.
    let (pages, page) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    let memory = u64::try_from(pages).unwrap_or(0).saturating_mul(u64::try_from(page).unwrap_or(0));
    if memory > 0 && n > memory {
        return Err(format!("{} MiB is more than this machine's memory ({} MiB)", n >> 20, memory >> 20));
    }
    Ok(n)
}

/// `"10s"`, `"500ms"`, `"1min"`: an interval of at least 100 ms (the job files' duration syntax).
fn parse_interval(text: &str) -> Result<std::time::Duration, String> {
    let ns = bfq_workload::units::parse_duration(text)?;
    if ns < 100 * bfq_sched::MSEC {
        return Err(format!("{text:?} is shorter than 100ms (or write \"off\")"));
    }
    Ok(std::time::Duration::from_nanos(ns))
}

/// `"10GiB"`, `"512MB"`, `"4096"`: bytes, more than zero (the job files' size syntax).
fn parse_size(text: &str) -> Result<u64, String> {
    match bfq_workload::units::parse_size(text)? {
        0 => Err(format!("size {text:?} is zero")),
        n => Ok(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_default_parses_with_low_latency_off_the_latency_guard_on_and_20ms_slots() {
        let c = Config::from_toml(DEFAULT_CONFIG, "default").unwrap();
        assert_eq!(c.listen, vec![Listen::Tcp("127.0.0.1:10809".into())]);
        assert_eq!(c.exports[0].size, Some(1 << 30));
        assert!(c.params.contains(&("low_latency".into(), "0".into())));
        assert!(c.params.contains(&("latency_guard".into(), "150".into())));
        assert!(c.params.contains(&("timeout_sync".into(), "20ms".into())));
        // The largest budget follows the 20 ms slots: the kernel's default per 125 ms, scaled.
        let b_max = |c: &Config| {
            let mut b = bfq_sched::bfq::Bfq::new(bfq_sched::DeviceInfo::default());
            for (k, v) in &c.params {
                bfq_sched::Scheduler::set_param(&mut b, k, v).unwrap();
            }
            b.max_budget()
        };
        assert_eq!(b_max(&c), 2621);
        // A configuration's own slot time scales it; its own max_budget wins.
        let own = format!("params = {{ timeout_sync = \"125ms\" }}\n{DEFAULT_CONFIG}");
        assert_eq!(b_max(&Config::from_toml(&own, "own").unwrap()), 16384);
        let own = format!("params = {{ max_budget = 8192 }}\n{DEFAULT_CONFIG}");
        assert_eq!(b_max(&Config::from_toml(&own, "own").unwrap()), 8192);
        // A configuration's own value wins.
        let own = format!("params = {{ latency_guard = 0 }}\n{DEFAULT_CONFIG}");
        let c = Config::from_toml(&own, "own").unwrap();
        assert!(c.params.contains(&("latency_guard".into(), "0".into())));
        assert!(!c.params.contains(&("latency_guard".into(), "150".into())));
    }

    #[test]
    fn bad_fields_are_named_with_their_export_line() {
        let text = "listen = [\"unix:/tmp/x.sock\"]\n[[export]]\nname = \"a\"\npath = \"/tmp/a\"\n\n[[export]]\nname = \"b\"\npath = \"/tmp/b\"\nweight = 5000\n";
        let e = Config::from_toml(text, "s.toml").unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (Some(6), Some("weight")), "{e}");
        assert!(e.to_string().starts_with("s.toml:6: field `weight`: must be 1..=1000"), "{e}");
        let dup = text.replace("name = \"b\"", "name = \"a\"").replace("weight = 5000\n", "");
        let e = Config::from_toml(&dup, "s.toml").unwrap_err();
        assert!(e.to_string().contains("defined twice"), "{e}");
        let e = Config::from_toml("listen = [\"nowhere\"]\n[[export]]\nname=\"a\"\npath=\"/x\"\n", "s.toml")
            .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("listen"), "{e}");
        let e = Config::from_toml("colour = 1\n", "s.toml").unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (Some(1), Some("colour")), "{e}");
    }

    #[test]
    fn threads_default_to_one_and_must_be_between_one_and_the_maximum() {
        let c = Config::from_toml(DEFAULT_CONFIG, "default").unwrap();
        assert_eq!((c.threads, c.threads_or_default()), (None, 1));
        let four = Config::from_toml(&format!("threads = 4\n{DEFAULT_CONFIG}"), "f").unwrap();
        assert_eq!(four.threads_or_default(), 4);
        for bad in ["0", "-1", "257"] {
            let e = Config::from_toml(&format!("threads = {bad}\n{DEFAULT_CONFIG}"), "f").unwrap_err();
            assert_eq!(e.field.as_deref(), Some("threads"), "{e}");
            assert!(e.message.contains("1..=256"), "{e}");
        }
    }

    #[test]
    fn an_exports_cache_is_none_by_default_or_read_or_writeback_and_nothing_else() {
        let c = Config::from_toml(DEFAULT_CONFIG, "default").unwrap();
        assert_eq!(c.exports[0].cache, Cache::None);
        for (name, cache) in [("writeback", Cache::Writeback), ("read", Cache::Read), ("none", Cache::None)] {
            let t =
                DEFAULT_CONFIG.replace("size = \"1GiB\"", &format!("size = \"1GiB\"\ncache = \"{name}\""));
            assert_eq!(Config::from_toml(&t, "f").unwrap().exports[0].cache, cache);
        }
        let bad = DEFAULT_CONFIG.replace("size = \"1GiB\"", "size = \"1GiB\"\ncache = \"direct\"");
        let e = Config::from_toml(&bad, "f").unwrap_err();
        assert_eq!((e.field.as_deref(), e.line), (Some("cache"), Some(4)), "{e}");
        assert!(
            e.message.contains("\"none\"")
                && e.message.contains("\"read\"")
                && e.message.contains("\"writeback\""),
            "{e}"
        );
    }

    #[test]
    fn read_ahead_is_4_mib_by_default_and_takes_whole_blocks() {
        let base = "[[export]]\nname = \"a\"\npath = \"/tmp/a\"\n";
        assert_eq!(Config::from_toml(base, "s.toml").unwrap().read_ahead, 4 << 20);
        let with = |v: &str| Config::from_toml(&format!("read_ahead = {v}\n{base}"), "s.toml");
        assert_eq!(with("\"1MiB\"").unwrap().read_ahead, 1 << 20);
        assert_eq!(with("\"off\"").unwrap().read_ahead, 0);
        let e = with("\"3000\"").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("read_ahead"), "{e}");
        assert!(e.to_string().contains("multiple of 4 KiB"), "{e}");
        assert!(with("\"64MiB\"").is_err(), "more than half a connection's budget");
        assert!(with("true").is_err());
    }

    #[test]
    fn read_cache_is_off_by_default_and_takes_a_size_of_at_least_a_window_within_memory() {
        let base = "[[export]]\nname = \"a\"\npath = \"/tmp/a\"\n";
        assert_eq!(Config::from_toml(base, "s.toml").unwrap().read_cache, 0);
        let with = |v: &str| Config::from_toml(&format!("read_cache = {v}\n{base}"), "s.toml");
        assert_eq!(with("\"64MiB\"").unwrap().read_cache, 64 << 20);
        assert_eq!(with("\"off\"").unwrap().read_cache, 0);
        for bad in ["\"4KiB\"", "\"1000TiB\"", "true", "\"lots\""] {
            let e = with(bad).unwrap_err();
            assert_eq!(e.field.as_deref(), Some("read_cache"), "{bad}: {e}");
        }
        let e = Config::from_toml(&format!("read_ahead = \"off\"\nread_cache = \"1GiB\"\n{base}"), "s.toml")
            .unwrap_err();
        assert!(e.message.contains("read_ahead"), "{e}");
    }
}
