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
//! stop_timeout = "30s"               # after SIGTERM, connections still open then are closed
//! handshake_limit = "10s"            # a client must finish negotiating within it ("off": no limit)
//! memory_limit = "1GiB"              # request data held across all connections ("off": per connection only)
//! unread_reply_limit = "10s"         # a client leaving replies unread this long while others wait
//!                                    # for memory is disconnected ("off": never)
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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;

use bfq_sched::{IoClass, QueueSpec, MAX_WEIGHT, MIN_WEIGHT};
use serde::Deserialize;
use toml::Spanned;

use crate::protocol::MAX_STRING;

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
    /// The line of its `path` in the configuration, for errors about its file.
    pub line: Option<usize>,
    /// The line of its `size`, for errors about the size of the file it creates.
    pub size_line: Option<usize>,
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
    /// After a stop (SIGTERM), how long connections may take to end before the ones still open
    /// are closed (a client that keeps sending, or never reads its replies).
    pub stop_timeout: std::time::Duration,
    /// How long a client may take to negotiate (from its connection to `NBD_OPT_GO` or
    /// `NBD_OPT_EXPORT_NAME`) before it is disconnected (`None`: no limit). A client that connects
    /// and never negotiates holds a descriptor and some memory; many of them would leave none for
    /// the others.
    pub handshake_limit: Option<std::time::Duration>,
    /// The most memory all connections' requests together may hold (read buffers until their reply
    /// is sent, write payloads until written, as the buffers are sized), in bytes (0: no bound beyond
    /// each connection's own [`CONNECTION_BUDGET`]). A request that does not fit waits, and its
    /// client's further requests with it. Read-ahead windows and buffers kept for reuse have a
    /// quarter of it each, of their own.
    pub memory_limit: u64,
    /// How long a connection's client may leave its replies unread (the socket takes none of them)
    /// while other connections wait for memory under `memory_limit`, before it is disconnected
    /// (`None`: never). A client that sends requests and reads no reply holds its memory for as long
    /// as it likes; without this, a few of them could hold `memory_limit` and stall everyone else.
    pub unread_reply_limit: Option<std::time::Duration>,
    /// The exports.
    pub exports: Vec<Export>,
    /// The file it was read from, as its errors name it.
    pub file: String,
    /// The line of each `listen` address, in `listen`'s order (none for the default address, without
    /// a `listen` field): what only a start finds wrong with one (a port in use) names its line.
    pub listen_lines: Vec<usize>,
    /// The line of `metrics`, likewise.
    pub metrics_line: Option<usize>,
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

/// A TOML value and where it stands in the text: every field's line comes from its value's span.
#[derive(Debug)]
enum Node {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    Date(String),
    List(Vec<Spanned<Node>>),
    Table(Vec<(String, Spanned<Node>)>),
}

/// The key under which the toml crate hands over a date-time as a one-entry table.
const TOML_DATETIME: &str = "$__toml_private_datetime";

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Node, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Node;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a TOML value")
            }
            fn visit_str<E>(self, v: &str) -> Result<Node, E> {
                Ok(Node::Str(v.into()))
            }
            fn visit_string<E>(self, v: String) -> Result<Node, E> {
                Ok(Node::Str(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Node, E> {
                Ok(Node::Int(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Node, E> {
                i64::try_from(v).map(Node::Int).map_err(|_| E::custom(format!("{v} is too large")))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Node, E> {
                Ok(Node::Float(v))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Node, E> {
                Ok(Node::Bool(v))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Node, A::Error> {
                let mut items = Vec::new();
                while let Some(x) = a.next_element()? {
                    items.push(x);
                }
                Ok(Node::List(items))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Node, A::Error> {
                let mut entries = Vec::new();
                // Keys as plain strings: a date-time's one key is not a spanned value.
                while let Some(k) = a.next_key::<String>()? {
                    if k == TOML_DATETIME {
                        return Ok(Node::Date(a.next_value()?));
                    }
                    entries.push((k, a.next_value()?));
                }
                Ok(Node::Table(entries))
            }
        }
        d.deserialize_any(Visit)
    }
}

/// Whether two `HOST:PORT` addresses would take the same socket: the same port (not 0), on an address
/// they share once resolved, or one of them on every address (`0.0.0.0`, `[::]`). Spelt differently
/// (`localhost:10809` and `127.0.0.1:10809`), the second bind failed with "Address already in use", as
/// if another process held the port. Names that do not resolve are left to the bind to report.
fn same_socket(a: &str, b: &str) -> bool {
    use std::net::ToSocketAddrs;
    let (Ok(a), Ok(b)) = (a.to_socket_addrs(), b.to_socket_addrs()) else { return false };
    let (a, b): (Vec<_>, Vec<_>) = (a.collect(), b.collect());
    a.iter().any(|x| {
        b.iter().any(|y| {
            x.port() == y.port()
                && x.port() != 0
                && (x.ip() == y.ip()
                    || (x.ip().is_unspecified() || y.ip().is_unspecified()) && x.is_ipv4() == y.is_ipv4())
        })
    })
}

impl Node {
    /// What the value is, for an error: `the string "300"`, `the number 32`, `a table`.
    fn describe(&self) -> String {
        match self {
            Node::Str(s) => format!("the string {s:?}"),
            Node::Int(n) => format!("the number {n}"),
            Node::Float(x) => format!("the number {x:?} (with a fraction part)"),
            Node::Bool(b) => format!("`{b}`"),
            Node::Date(d) => format!("the date {d}"),
            Node::List(_) => "a list".into(),
            Node::Table(_) => "a table".into(),
        }
    }
}

/// The top-level fields, in the order the documentation gives them.
const TOP_FIELDS: [&str; 14] = [
    "listen",
    "scheduler",
    "params",
    "depth",
    "metrics",
    "summary_interval",
    "read_ahead",
    "read_cache",
    "threads",
    "stop_timeout",
    "handshake_limit",
    "memory_limit",
    "unread_reply_limit",
    "export",
];

/// The fields of an `[[export]]`.
const EXPORT_FIELDS: [&str; 8] =
    ["name", "path", "size", "weight", "class", "read_only", "description", "cache"];

/// Errors of one configuration text: the file's name and the line of a span.
struct Source<'a> {
    file: &'a str,
    /// Where the text's newlines are, found once: a span's line is then a binary search. Counting
    /// the newlines before each span made every export's line cost the whole text before it (10,000
    /// exports took 30 s to check).
    newlines: Vec<usize>,
}

impl<'a> Source<'a> {
    fn new(file: &'a str, text: &str) -> Source<'a> {
        Source { file, newlines: text.match_indices('\n').map(|(at, _)| at).collect() }
    }

    fn line(&self, span: &std::ops::Range<usize>) -> usize {
        self.newlines.partition_point(|&at| at < span.start) + 1
    }

    fn err(&self, at: Option<&std::ops::Range<usize>>, field: &str, message: String) -> ConfigError {
        ConfigError {
            file: self.file.into(),
            line: at.map(|s| self.line(s)),
            field: Some(field.into()),
            message,
        }
    }

    /// `node`'s string, or an error that says what was `expected`.
    fn string(&self, node: &Spanned<Node>, field: &str, expected: &str) -> Result<String, ConfigError> {
        match node.get_ref() {
            Node::Str(s) => Ok(s.clone()),
            other => Err(self.err(
                Some(&node.span()),
                field,
                format!("expected {expected}, got {}", other.describe()),
            )),
        }
    }

    /// `node`'s whole number, or an error that says what was `expected`.
    fn int(&self, node: &Spanned<Node>, field: &str, expected: &str) -> Result<i64, ConfigError> {
        match node.get_ref() {
            Node::Int(n) => Ok(*n),
            other => Err(self.err(
                Some(&node.span()),
                field,
                format!("expected {expected}, got {}", other.describe()),
            )),
        }
    }

    /// The fields of a table as a map, each checked against `known`.
    fn fields(
        &self,
        entries: Vec<(String, Spanned<Node>)>,
        known: &[&str],
        prefix: &str,
    ) -> Result<BTreeMap<String, Spanned<Node>>, ConfigError> {
        let mut out = BTreeMap::new();
        for (k, v) in entries {
            if !known.contains(&k.as_str()) {
                return Err(self.err(
                    Some(&v.span()),
                    &format!("{prefix}{k}"),
                    format!("unknown field (known: {})", known.join(", ")),
                ));
            }
            out.insert(k, v);
        }
        Ok(out)
    }
}

/// A value of a size field that may be `"off"` (`read_ahead`, `read_cache`), not yet checked
/// against its field's limits: `None` when absent, `Some(0)` for `"off"`, `"0"` or 0.
fn size_or_off(
    src: &Source,
    node: Option<&Spanned<Node>>,
    field: &str,
    example: &str,
) -> Result<Option<u64>, ConfigError> {
    let Some(node) = node else { return Ok(None) };
    let fail = |m: String| src.err(Some(&node.span()), field, m);
    match node.get_ref() {
        Node::Str(s) if s == "off" || s == "0" => Ok(Some(0)),
        Node::Int(n) if *n >= 0 => Ok(Some(*n as u64)),
        Node::Str(s) => parse_size(s).map(Some).map_err(fail),
        other => {
            Err(fail(format!("expected a size such as \"{example}\" or \"off\", got {}", other.describe())))
        }
    }
}

impl Config {
    /// Reads a configuration; `file` names it in errors.
    pub fn from_toml(text: &str, file: &str) -> Result<Config, ConfigError> {
        let src = Source::new(file, text);
        let root: Node = toml::from_str(text).map_err(|e| ConfigError {
            file: file.into(),
            line: e.span().map(|s| src.line(&s)),
            field: None,
            message: e.message().trim().to_string(),
        })?;
        let Node::Table(entries) = root else {
            return Err(ConfigError {
                file: file.into(),
                line: None,
                field: None,
                message: "expected a TOML document of fields and [[export]] tables".into(),
            });
        };
        let mut top = src.fields(entries, &TOP_FIELDS, "")?;
        let export = top.remove("export");
        let at = |field: &str| top.get(field).map(|n| n.span());
        let err = |field: &str, message: String| src.err(at(field).as_ref(), field, message);

        let listen_expected =
            "a list of addresses such as [\"127.0.0.1:10809\", \"unix:/run/bfq-serve.sock\"]";
        let raw_listen: &[Spanned<Node>] = match top.get("listen") {
            None => &[],
            Some(n) => match n.get_ref() {
                Node::List(items) => items,
                other => {
                    return Err(err(
                        "listen",
                        format!("expected {listen_expected}, got {}", other.describe()),
                    ))
                }
            },
        };
        let mut listen = Vec::new();
        if top.contains_key("listen") && raw_listen.is_empty() {
            return Err(err("listen", "needs at least one address (`HOST:PORT` or `unix:PATH`)".into()));
        }
        let mut listen_lines = Vec::new();
        for item in raw_listen {
            let l = src.string(item, "listen", "an address (`HOST:PORT` or `unix:PATH`)")?;
            let bad = |m: String| src.err(Some(&item.span()), "listen", m);
            let address = match l.strip_prefix("unix:") {
                Some(p) if !p.is_empty() => {
                    // sun_path holds 108 bytes, its terminating zero included: a longer path could
                    // never be bound, whatever the file system holds.
                    if p.len() > MAX_SOCKET_PATH {
                        return Err(bad(format!(
                            "{l:?}: a unix socket's path is {} bytes long, and at most {MAX_SOCKET_PATH} fit",
                            p.len()
                        )));
                    }
                    Listen::Unix(PathBuf::from(p))
                }
                Some(_) => return Err(bad(format!("{l:?}: `unix:` needs a path"))),
                None if is_host_port(&l) => {
                    check_host(&l).map_err(|m| bad(format!("{l:?}: {m}")))?;
                    Listen::Tcp(l.clone())
                }
                None => return Err(bad(format!("{l:?} is not `HOST:PORT` or `unix:PATH`"))),
            };
            let twice = listen.iter().any(|x| match (x, &address) {
                (Listen::Unix(a), Listen::Unix(b)) => lexical(a) == lexical(b),
                (Listen::Tcp(a), Listen::Tcp(b)) => a == b && !a.ends_with(":0"),
                _ => false,
            });
            if twice {
                return Err(bad(format!("{l:?} is listed twice")));
            }
            if let Some(Listen::Tcp(other)) = listen
                .iter()
                .find(|x| matches!((x, &address), (Listen::Tcp(a), Listen::Tcp(b)) if same_socket(a, b)))
            {
                return Err(bad(format!(
                    "{l:?} and {other:?} are the same port on the same address (or one is on every address): \
                     the second could not listen"
                )));
            }
            listen.push(address);
            listen_lines.push(src.line(&item.span()));
        }
        if listen.is_empty() {
            listen.push(Listen::Tcp("127.0.0.1:10809".into()));
        }

        let scheduler = match top.get("scheduler") {
            Some(n) => src.string(n, "scheduler", "a scheduler's name such as \"bfq\"")?,
            None => "bfq".to_string(),
        };
        if bfq_sched::canonical_name(&scheduler).is_none() {
            return Err(err(
                "scheduler",
                format!("unknown scheduler {scheduler:?} (known: {})", bfq_sched::SCHEDULER_NAMES.join(", ")),
            ));
        }
        let depth = match top.get("depth") {
            Some(n) => src.int(n, "depth", "a whole number 1..=4096")?,
            None => 32,
        };
        if !(1..=4096).contains(&depth) {
            return Err(err("depth", format!("must be 1..=4096, got {depth}")));
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
        if scheduler.starts_with("bfq") {
            params.push(("low_latency".into(), "0".into()));
            params.push(("latency_guard".into(), "150".into()));
            params.push(("timeout_sync".into(), "20ms".into()));
        }
        if let Some(n) = top.get("params") {
            let Node::Table(entries) = n.get_ref() else {
                return Err(err(
                    "params",
                    format!(
                        "expected a table of the scheduler's tunables such as {{ slice_idle = \"2ms\" }}, got {}",
                        n.get_ref().describe()
                    ),
                ));
            };
            // Both kernel names of BFQ's idle window: the later key won, unsaid.
            if let Some((_, v)) = entries.iter().find(|(k, _)| k.as_str() == "slice_idle_us") {
                if entries.iter().any(|(k, _)| k.as_str() == "slice_idle") {
                    return Err(src.err(
                        Some(&v.span()),
                        "params.slice_idle_us",
                        "`slice_idle` and `slice_idle_us` set one tunable (the idle window, in ms and in us); \
                         give one"
                            .into(),
                    ));
                }
            }
            for (k, v) in entries {
                let value = match v.get_ref() {
                    Node::Str(s) => s.clone(),
                    Node::Bool(b) => b.to_string(),
                    Node::Int(i) => i.to_string(),
                    Node::Float(x) => x.to_string(),
                    other => {
                        return Err(src.err(
                            Some(&v.span()),
                            &format!("params.{k}"),
                            format!("expected a number, a string or true/false, got {}", other.describe()),
                        ))
                    }
                };
                params.retain(|(key, _)| key != k);
                params.push((k.clone(), value));
            }
        }
        if let Err(e) = bfq_sched::build(&scheduler, bfq_sched::DeviceInfo::default(), &params) {
            return Err(err("params", e.to_string()));
        }

        let exports = parse_exports(&src, export)?;

        let metrics = match top.get("metrics") {
            None => None,
            Some(n) => {
                let m = src.string(n, "metrics", "an address `HOST:PORT` such as \"127.0.0.1:9109\"")?;
                if !is_host_port(&m) {
                    return Err(err("metrics", format!("{m:?} is not `HOST:PORT`")));
                }
                check_host(&m).map_err(|why| err("metrics", format!("{m:?}: {why}")))?;
                if !m.ends_with(":0")
                    && listen.iter().any(|l| matches!(l, Listen::Tcp(a) if a == &m || same_socket(a, &m)))
                {
                    return Err(err(
                        "metrics",
                        format!("{m:?} is in `listen` too: the metrics need an address of their own"),
                    ));
                }
                Some(m)
            }
        };
        let summary_interval = match top.get("summary_interval") {
            None => Some(std::time::Duration::from_secs(10)),
            Some(n) => {
                match src.string(n, "summary_interval", "an interval such as \"10s\" or \"off\"")?.as_str() {
                    "0" | "0s" | "off" => None,
                    text => Some(parse_interval(text).map_err(|m| err("summary_interval", m))?),
                }
            }
        };
        let stop_timeout = match top.get("stop_timeout") {
            None => DEFAULT_STOP_TIMEOUT,
            Some(n) => {
                let text = src.string(n, "stop_timeout", "an interval such as \"30s\"")?;
                let ns = bfq_workload::units::parse_duration(&text).map_err(|m| err("stop_timeout", m))?;
                if ns < 100 * bfq_sched::MSEC {
                    return Err(err("stop_timeout", format!("{text:?} is shorter than 100ms")));
                }
                std::time::Duration::from_nanos(ns)
            }
        };
        let handshake_limit = match top.get("handshake_limit") {
            None => Some(DEFAULT_HANDSHAKE_LIMIT),
            Some(n) => {
                match src.string(n, "handshake_limit", "an interval such as \"10s\" or \"off\"")?.as_str() {
                    "0" | "0s" | "off" => None,
                    text => Some(parse_interval(text).map_err(|m| err("handshake_limit", m))?),
                }
            }
        };
        let unread_reply_limit = match top.get("unread_reply_limit") {
            None => Some(DEFAULT_UNREAD_REPLY_LIMIT),
            Some(n) => {
                match src.string(n, "unread_reply_limit", "an interval such as \"10s\" or \"off\"")?.as_str()
                {
                    "0" | "0s" | "off" => None,
                    text => Some(parse_interval(text).map_err(|m| err("unread_reply_limit", m))?),
                }
            }
        };
        let memory_limit = match size_or_off(&src, top.get("memory_limit"), "memory_limit", "1GiB")? {
            None => DEFAULT_MEMORY_LIMIT,
            Some(0) => 0,
            Some(n) => checked_memory_limit(n).map_err(|m| err("memory_limit", m))?,
        };
        let read_ahead = match size_or_off(&src, top.get("read_ahead"), "read_ahead", "4MiB")? {
            None => DEFAULT_READ_AHEAD,
            Some(0) => 0,
            Some(n) => checked_read_ahead(n).map_err(|m| err("read_ahead", m))?,
        };
        let read_cache = match size_or_off(&src, top.get("read_cache"), "read_cache", "2GiB")? {
            None | Some(0) => 0,
            Some(n) => checked_read_cache(n).map_err(|m| err("read_cache", m))?,
        };
        if read_cache > 0 && read_ahead == 0 {
            return Err(err(
                "read_cache",
                "keeps read-ahead windows, and `read_ahead` is off: turn it on, or the cache off".into(),
            ));
        }
        let threads = match top.get("threads") {
            None => None,
            Some(n) => match src.int(n, "threads", &format!("a whole number 1..={MAX_THREADS}"))? {
                n if (1..=MAX_THREADS as i64).contains(&n) => Some(n as usize),
                n => return Err(err("threads", format!("must be 1..={MAX_THREADS}, got {n}"))),
            },
        };
        Ok(Config {
            listen,
            read_ahead,
            read_cache,
            threads,
            event_log: None,
            scheduler,
            params,
            depth: depth as u32,
            metrics,
            summary_interval,
            stop_timeout,
            handshake_limit,
            memory_limit,
            unread_reply_limit,
            exports,
            file: file.into(),
            listen_lines,
            metrics_line: at("metrics").map(|s| src.line(&s)),
        })
    }

    /// An error about `listen`'s address `i`, on its line: the configuration's own kind of error,
    /// for what only a look beyond the text finds (a name that does not resolve, a socket's missing
    /// directory).
    pub fn listen_error(&self, i: usize, message: String) -> ConfigError {
        ConfigError {
            file: self.file.clone(),
            line: self.listen_lines.get(i).copied(),
            field: Some("listen".into()),
            message,
        }
    }

    /// An error about the `metrics` address, on its line.
    pub fn metrics_error(&self, message: String) -> ConfigError {
        ConfigError {
            file: self.file.clone(),
            line: self.metrics_line,
            field: Some("metrics".into()),
            message,
        }
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

    /// What a reload of `new` over this running configuration cannot apply: one line per field that
    /// only a restart changes (SIGHUP says them on standard error). Weights and classes,
    /// `summary_interval`, `stop_timeout` and `handshake_limit` apply at once (the last to
    /// connections that come after) and are not listed; nor is an export's
    /// `size`, which only creates a file that does not exist. `unread_reply_limit` applies at once
    /// too; `memory_limit` needs a restart.
    pub fn restart_needed(&self, new: &Config) -> Vec<String> {
        let mut notes = Vec::new();
        let mut differs = |field: &str, was: String, now: String| {
            if was != now {
                notes.push(format!("`{field}` changes only with a restart: still {was}, not {now}"));
            }
        };
        let addresses = |c: &Config| {
            let list: Vec<String> = c
                .listen
                .iter()
                .map(|l| match l {
                    Listen::Tcp(a) => a.clone(),
                    Listen::Unix(p) => format!("unix:{}", p.display()),
                })
                .collect();
            list.join(", ")
        };
        differs("listen", addresses(self), addresses(new));
        differs("scheduler", self.scheduler.clone(), new.scheduler.clone());
        let params = |c: &Config| {
            let sorted: BTreeMap<&str, &str> =
                c.params.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let list: Vec<String> = sorted.iter().map(|(k, v)| format!("{k} = {v}")).collect();
            format!("{{ {} }}", list.join(", "))
        };
        differs("params", params(self), params(new));
        differs("depth", self.depth.to_string(), new.depth.to_string());
        let metrics = |c: &Config| c.metrics.clone().unwrap_or_else(|| "none".into());
        differs("metrics", metrics(self), metrics(new));
        let bytes = |n: u64| if n == 0 { "off".to_string() } else { format!("{n} bytes") };
        differs("read_ahead", bytes(self.read_ahead), bytes(new.read_ahead));
        differs("read_cache", bytes(self.read_cache), bytes(new.read_cache));
        differs("memory_limit", bytes(self.memory_limit), bytes(new.memory_limit));
        differs("threads", self.threads_or_default().to_string(), new.threads_or_default().to_string());
        // By name, looked up (a SIGHUP to a server of 10,000 exports compared every pair).
        let running: HashMap<&str, &Export> = self.exports.iter().map(|e| (e.name.as_str(), e)).collect();
        let wanted: HashSet<&str> = new.exports.iter().map(|e| e.name.as_str()).collect();
        for n in &new.exports {
            let Some(e) = running.get(n.name.as_str()) else {
                notes.push(format!("export `{}` is new: restart to serve it", n.name));
                continue;
            };
            let mut changed = Vec::new();
            if n.path != e.path {
                changed.push("path");
            }
            if n.read_only != e.read_only {
                changed.push("read_only");
            }
            if n.cache != e.cache {
                changed.push("cache");
            }
            if n.description != e.description {
                changed.push("description");
            }
            if !changed.is_empty() {
                let verb = if changed.len() == 1 { "changes" } else { "change" };
                notes.push(format!(
                    "export `{}`: {} {verb} only with a restart; not applied",
                    n.name,
                    changed.join(", ")
                ));
            }
        }
        for e in &self.exports {
            if !wanted.contains(e.name.as_str()) {
                notes.push(format!(
                    "export `{}` is gone from the configuration: it is served until a restart",
                    e.name
                ));
            }
        }
        notes
    }

    /// Refuses two exports on one file (or one block device), however their paths are spelt: a
    /// write through one would not be seen by the other's read-ahead windows and read cache, which
    /// belong to one export. Looks at the file system (the files that exist; a missing one is
    /// compared by its path).
    pub fn check_shared_files(&self) -> Result<(), ConfigError> {
        let identity = |e: &Export| -> FileIdentity {
            use std::os::unix::fs::{FileTypeExt, MetadataExt};
            match std::fs::metadata(&e.path) {
                Ok(m) if m.file_type().is_block_device() => FileIdentity::Device(m.rdev()),
                Ok(m) => FileIdentity::Inode(m.dev(), m.ino()),
                Err(_) => FileIdentity::Path(lexical(&e.path)),
            }
        };
        // Each file's first export, by identity: one look-up per export, not a comparison with
        // every export before it.
        let mut first: HashMap<FileIdentity, &Export> = HashMap::with_capacity(self.exports.len());
        for e in &self.exports {
            if let Some(earlier) = first.insert(identity(e), e) {
                return Err(shared_file_error(&self.file, earlier, e));
            }
        }
        Ok(())
    }
}

/// What makes two exports' files the same.
#[derive(PartialEq, Eq, Hash)]
enum FileIdentity {
    /// A block device, by its device number (two device nodes of one disk are one).
    Device(u64),
    /// A file, by device and inode (hard links, symbolic links and `..` included).
    Inode(u64, u64),
    /// A file that does not exist yet, by its path.
    Path(PathBuf),
}

/// `path` made absolute (against the current directory), without `.` and with `..` taken away
/// lexically: for files that do not exist yet.
fn lexical(path: &std::path::Path) -> PathBuf {
    use std::path::Component;
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = PathBuf::new();
    for c in absolute.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

fn shared_file_error(file: &str, first: &Export, second: &Export) -> ConfigError {
    ConfigError {
        file: file.into(),
        line: second.line,
        field: Some("path".into()),
        message: format!(
            "exports `{}` ({}) and `{}` ({}) are the same file: each export keeps its own read-ahead \
             windows and read cache, so a write through one would not be seen by reads of the other; \
             serve the file as one export",
            first.name,
            first.path.display(),
            second.name,
            second.path.display()
        ),
    }
}

fn is_host_port(s: &str) -> bool {
    s.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok())
}

/// The longest path a unix socket can be bound at: sun_path's 108 bytes less the terminating zero.
pub const MAX_SOCKET_PATH: usize = 107;

/// Whether the host of a `HOST:PORT` can be an address at all, without looking it up: an IP address
/// (IPv6 in brackets), or a host name's letters, digits, `-`, `.` and `_` (and an IPv6 address's
/// `:` and `%`, which the resolver takes unbracketed). Such a host was left to the bind, which said
/// only "failed to lookup address information" (`tcp://127.0.0.1:0`, `999.1.1.1:0`).
fn check_host(address: &str) -> Result<(), String> {
    if address.parse::<std::net::SocketAddr>().is_ok() {
        return Ok(());
    }
    let Some((host, _)) = address.rsplit_once(':') else { return Ok(()) };
    if let Some((scheme, _)) = address.split_once("://") {
        return Err(format!(
            "write `HOST:PORT` without a scheme (`{scheme}://`), such as \"127.0.0.1:10809\""
        ));
    }
    if let Some(inside) = host.strip_prefix('[') {
        return Err(match inside.strip_suffix(']') {
            Some(ip) if ip.parse::<std::net::Ipv6Addr>().is_err() => {
                format!("`{ip}` in brackets is not an IPv6 address")
            }
            _ => format!("`{host}` is not an IPv6 address in brackets such as \"[::1]:10809\""),
        });
    }
    // Four numbers are an IPv4 address, never a name to look up: each must be 0..=255. A number
    // with a leading zero is left to the resolver (octal, for inet_aton).
    let parts: Vec<&str> = host.split('.').collect();
    if parts.len() == 4 && parts.iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())) {
        if let Some(p) = parts.iter().find(|p| !p.starts_with('0') && p.parse::<u8>().is_err()) {
            return Err(format!("`{host}` is not an IPv4 address: {p} is more than 255"));
        }
    }
    if let Some(c) = host.chars().find(|c| !(c.is_ascii_alphanumeric() || "-._:%".contains(*c))) {
        return Err(format!("`{host}` is not an IP address or a host name (it has {c:?})"));
    }
    Ok(())
}

/// The `[[export]]` tables.
fn parse_exports(src: &Source, node: Option<Spanned<Node>>) -> Result<Vec<Export>, ConfigError> {
    let Some(node) = node else {
        return Err(ConfigError {
            file: src.file.into(),
            line: None,
            field: Some("export".into()),
            message: "needs at least one [[export]]".into(),
        });
    };
    let span = node.span();
    let tables = match node.into_inner() {
        Node::List(items) => items,
        Node::Table(_) => {
            return Err(src.err(
                Some(&span),
                "export",
                "write each export as [[export]] (two brackets: a list of tables), not [export]".into(),
            ))
        }
        other => {
            return Err(src.err(
                Some(&span),
                "export",
                format!("expected [[export]] tables, got {}", other.describe()),
            ))
        }
    };
    if tables.is_empty() {
        return Err(src.err(Some(&span), "export", "needs at least one [[export]]".into()));
    }
    let mut exports: Vec<Export> = Vec::with_capacity(tables.len());
    // The names and (lexical) paths of the exports so far, for the duplicates: looked up, not
    // compared with every export before (which made checks quadratic in the number of exports).
    let mut names: HashSet<String> = HashSet::with_capacity(tables.len());
    let mut paths: HashMap<PathBuf, usize> = HashMap::with_capacity(tables.len());
    for item in tables {
        let header = item.span();
        let entries = match item.into_inner() {
            Node::Table(entries) => entries,
            other => {
                return Err(src.err(
                    Some(&header),
                    "export",
                    format!("expected an [[export]] table, got {}", other.describe()),
                ))
            }
        };
        let f = src.fields(entries, &EXPORT_FIELDS, "")?;
        let err = |field: &str, message: String| {
            let at = f.get(field).map(|n| n.span()).unwrap_or_else(|| header.clone());
            src.err(Some(&at), field, message)
        };
        let name = match f.get("name") {
            Some(n) => src.string(n, "name", "a string (the name clients ask for)")?,
            None => return Err(err("name", "missing: every [[export]] needs a `name`".into())),
        };
        if name.len() > MAX_STRING {
            return Err(err(
                "name",
                format!("is {} bytes long: the NBD protocol allows at most {MAX_STRING}", name.len()),
            ));
        }
        if let Some(c) = name.chars().find(|c| c.is_control()) {
            // Its summary line on the terminal and its log lines would carry it.
            return Err(err(
                "name",
                format!(
                    "holds the control character {c:?}: clients ask for it by name; use printable characters"
                ),
            ));
        }
        if !names.insert(name.clone()) {
            return Err(err("name", format!("export {name:?} is defined twice")));
        }
        let path = match f.get("path") {
            Some(n) => PathBuf::from(src.string(n, "path", "a path (a string)")?),
            None => return Err(err("path", format!("missing: export `{name}` needs a `path`"))),
        };
        if path.as_os_str().is_empty() {
            return Err(err("path", "is empty".into()));
        }
        let line = f.get("path").map(|n| src.line(&n.span()));
        let size = match f.get("size") {
            None => None,
            Some(n) => match n.get_ref() {
                Node::Int(v) if *v > 0 => Some(*v as u64),
                Node::Str(s) => Some(parse_size(s).map_err(|m| err("size", m))?),
                other => {
                    return Err(err(
                        "size",
                        format!("expected a size such as \"10GiB\", got {}", other.describe()),
                    ))
                }
            },
        };
        if let Some(n) = size.filter(|&n| n > MAX_EXPORT_SIZE) {
            return Err(err(
                "size",
                format!(
                    "{n} bytes is more than an export can be: at most {MAX_EXPORT_SIZE} bytes (1 PiB), \
                     what the I/O engine addresses of each file"
                ),
            ));
        }
        let size_line = f.get("size").map(|n| src.line(&n.span()));
        let weight = match f.get("weight") {
            Some(n) => src.int(n, "weight", &format!("a whole number {MIN_WEIGHT}..={MAX_WEIGHT}"))?,
            None => i64::from(bfq_sched::DEFAULT_WEIGHT),
        };
        if !(i64::from(MIN_WEIGHT)..=i64::from(MAX_WEIGHT)).contains(&weight) {
            return Err(err("weight", format!("must be {MIN_WEIGHT}..={MAX_WEIGHT}, got {weight}")));
        }
        let class = match f.get("class") {
            Some(n) => src
                .string(n, "class", "an I/O class such as \"be\", \"rt0\" or \"idle\"")?
                .parse::<IoClass>()
                .map_err(|m| err("class", m))?,
            None => IoClass::default(),
        };
        let read_only = match f.get("read_only").map(|n| (n, n.get_ref())) {
            None => false,
            Some((_, Node::Bool(b))) => *b,
            Some((_, other)) => {
                return Err(err("read_only", format!("expected true or false, got {}", other.describe())))
            }
        };
        let description = match f.get("description") {
            None => None,
            Some(n) => {
                let d = src.string(n, "description", &format!("a string of at most {MAX_STRING} bytes"))?;
                if d.len() > MAX_STRING {
                    // Clients skip an export whose description is longer (nbdinfo --list fails).
                    return Err(err(
                        "description",
                        format!("is {} bytes long: the NBD protocol allows at most {MAX_STRING}", d.len()),
                    ));
                }
                Some(d)
            }
        };
        let cache_expected =
            "\"none\" (O_DIRECT, the default), \"read\" (reads through the page cache) or \"writeback\"";
        let cache = match f.get("cache") {
            None => Cache::None,
            Some(n) => match src.string(n, "cache", cache_expected)?.as_str() {
                "none" => Cache::None,
                "writeback" => Cache::Writeback,
                "read" => Cache::Read,
                other => return Err(err("cache", format!("expected {cache_expected}, got {other:?}"))),
            },
        };
        let export = Export {
            cache,
            name,
            path,
            size,
            spec: QueueSpec { weight: weight as u32, class },
            read_only,
            description,
            line,
            size_line,
        };
        // The same path twice needs no look at the file system (`check_shared_files` finds the rest).
        match paths.entry(lexical(&export.path)) {
            std::collections::hash_map::Entry::Occupied(first) => {
                return Err(shared_file_error(src.file, &exports[*first.get()], &export))
            }
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(exports.len());
            }
        }
        exports.push(export);
    }
    Ok(exports)
}

/// Threads without a `threads` field: one. Connections, schedulers and rings then share a thread,
/// and no request crosses a thread between its arrival and its reply. On this machine's virtio
/// disk that took random 4 KiB reads at depth 16 from 35,000-44,000 to 63,000-68,000 IOPS, at or
/// above qemu-nbd's 58,000-64,000 (docs/serve.md, "One thread"). One CPU serves roughly
/// 75,000-100,000 small requests a second; a host whose clients need more sets `threads`.
pub const DEFAULT_THREADS: usize = 1;

/// How long a stop waits for the connections without a `stop_timeout` field: every request in
/// flight is answered well within it on any device, and a client that keeps sending after the stop
/// (each request answered with ESHUTDOWN) cannot keep the server alive longer.
pub const DEFAULT_STOP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// How long a client may negotiate without a `handshake_limit` field: qemu's NBD server's default
/// since CVE-2024-7409 (clients that connect and never negotiate, to use up a server's
/// descriptors). Real clients negotiate in milliseconds.
pub const DEFAULT_HANDSHAKE_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// What one connection's requests may hold at once (read buffers until their reply is sent, write
/// payloads until written, read-ahead windows): beyond it the server stops reading from that client.
pub const CONNECTION_BUDGET: u64 = 64 << 20;

/// The memory all connections' requests may hold without a `memory_limit` field. Sixteen clients
/// that each keep a whole connection's budget outstanding (64 MiB: 256 requests of 256 KiB) fill
/// it; clients of virtual machines keep far less (qemu: a few hundred KiB to a few MiB each).
pub const DEFAULT_MEMORY_LIMIT: u64 = 1 << 30;

/// How long a client may leave its replies unread while others wait for memory, without an
/// `unread_reply_limit` field: as long as a client may take to negotiate.
pub const DEFAULT_UNREAD_REPLY_LIMIT: std::time::Duration = DEFAULT_HANDSHAKE_LIMIT;

/// The largest `size` of a file to create: what the I/O engine addresses of each file (1 PiB, whole
/// 4 KiB blocks), whose requests past it it refuses. File systems may hold less (`check` knows some).
pub const MAX_EXPORT_SIZE: u64 = bfq_io::TARGET_BYTES;

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

/// A read cache: at least one window (1 MiB), at most the machine's memory.
fn checked_read_cache(n: u64) -> Result<u64, String> {
    let window = crate::read_cache::MAX_ENTRY;
    if n < window {
        return Err(format!("must be at least 1MiB (one read-ahead window) or \"off\", got {n} bytes"));
    }
    within_machine_memory(n)
}

/// `n` bytes, if the machine has that much memory (or cannot say).
fn within_machine_memory(n: u64) -> Result<u64, String> {
    // SAFETY: sysconf has no preconditions.
    let (pages, page) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    let memory = u64::try_from(pages).unwrap_or(0).saturating_mul(u64::try_from(page).unwrap_or(0));
    if memory > 0 && n > memory {
        return Err(format!("{} MiB is more than this machine's memory ({} MiB)", n >> 20, memory >> 20));
    }
    Ok(n)
}

/// A memory limit: at least one connection's budget (so that every request the protocol allows can
/// be served: a connection's budget fits the largest), at most the machine's memory.
fn checked_memory_limit(n: u64) -> Result<u64, String> {
    if n < CONNECTION_BUDGET {
        return Err(format!(
            "must be at least 64MiB (what one connection may hold) or \"off\", got {} bytes",
            n
        ));
    }
    within_machine_memory(n)
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
    fn bad_fields_are_named_with_their_own_line() {
        let text = "listen = [\"unix:/tmp/x.sock\"]\n[[export]]\nname = \"a\"\npath = \"/tmp/a\"\n\n[[export]]\nname = \"b\"\npath = \"/tmp/b\"\nweight = 5000\n";
        let e = Config::from_toml(text, "s.toml").unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (Some(9), Some("weight")), "{e}");
        assert!(e.to_string().starts_with("s.toml:9: field `weight`: must be 1..=1000, got 5000"), "{e}");
        // A missing field: the line of its [[export]].
        let e = Config::from_toml(&text.replace("name = \"b\"\n", ""), "s.toml").unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (Some(6), Some("name")), "{e}");
        // Top-level fields have their line too.
        let e = Config::from_toml(&format!("\n\ndepth = 0\n{text}"), "s.toml").unwrap_err();
        assert_eq!(e.to_string(), "s.toml:3: field `depth`: must be 1..=4096, got 0");
        let dup = text.replace("name = \"b\"", "name = \"a\"").replace("weight = 5000\n", "");
        let e = Config::from_toml(&dup, "s.toml").unwrap_err();
        assert!(e.to_string().contains("defined twice"), "{e}");
        let e = Config::from_toml("listen = [\"nowhere\"]\n[[export]]\nname=\"a\"\npath=\"/x\"\n", "s.toml")
            .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("listen"), "{e}");
        for twice in
            ["listen = [\"unix:/tmp/x.sock\", \"unix:/tmp/./x.sock\"]", "listen = [\"h:1\", \"h:1\"]"]
        {
            let e = Config::from_toml(
                &format!("{twice}\n[[export]]\nname = \"a\"\npath = \"/tmp/a\"\n"),
                "s.toml",
            )
            .unwrap_err();
            assert_eq!(e.field.as_deref(), Some("listen"), "{e}");
            assert!(e.message.contains("listed twice"), "{e}");
        }
        // The same socket spelt two ways, or inside one on every address (a fuzzer's; the bind then
        // failed with "Address already in use", as if another process held the port).
        for clash in [
            "listen = [\"127.0.0.1:10899\", \"localhost:10899\"]",
            "listen = [\"0.0.0.0:10899\", \"127.0.0.1:10899\"]",
        ] {
            let e = Config::from_toml(
                &format!("{clash}\n[[export]]\nname = \"a\"\npath = \"/tmp/a\"\n"),
                "s.toml",
            )
            .unwrap_err();
            assert_eq!(e.field.as_deref(), Some("listen"), "{e}");
            assert!(e.message.contains("same port on the same address"), "{e}");
        }
        for apart in [
            "listen = [\"127.0.0.1:10899\", \"127.0.0.1:10900\"]",
            "listen = [\"127.0.0.1:0\", \"localhost:0\"]",
        ] {
            Config::from_toml(&format!("{apart}\n[[export]]\nname = \"a\"\npath = \"/tmp/a\"\n"), "s.toml")
                .unwrap();
        }
        let e = Config::from_toml(&format!("metrics = \"localhost:10809\"\n{DEFAULT_CONFIG}"), "s.toml")
            .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("metrics"), "{e}");
        let e = Config::from_toml(&format!("metrics = \"127.0.0.1:10809\"\n{DEFAULT_CONFIG}"), "s.toml")
            .unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (Some(1), Some("metrics")), "{e}");
        let e = Config::from_toml("colour = 1\n", "s.toml").unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (Some(1), Some("colour")), "{e}");
    }

    /// A fuzzer's: `tcp://127.0.0.1:0` and `999.1.1.1:0` passed as `HOST:PORT` and failed at the
    /// bind ("failed to lookup address information"), a unix socket's path too long to bind failed
    /// only at the check's look at it; each is refused when the file is read, on its line, with
    /// what is wrong, and the addresses a resolver takes still pass.
    #[test]
    fn addresses_that_cannot_be_listened_on_are_refused_on_their_line_when_read() {
        let base = "[[export]]\nname = \"a\"\npath = \"/tmp/a\"\n";
        let long = format!("/tmp/{}.sock", "s".repeat(135));
        let cases = [
            ("listen", "\"127.0.0.1:0\", \"tcp://127.0.0.1:0\"", "without a scheme (`tcp://`)"),
            ("listen", "\"999.1.1.1:0\"", "`999.1.1.1` is not an IPv4 address: 999 is more than 255"),
            ("listen", "\"[nope]:80\"", "`nope` in brackets is not an IPv6 address"),
            ("listen", "\"my host:80\"", "`my host` is not an IP address or a host name (it has ' ')"),
            (
                "listen",
                &format!("\"unix:{long}\""),
                "a unix socket's path is 145 bytes long, and at most 107 fit",
            ),
            ("metrics", "\"tcp://127.0.0.1:9109\"", "without a scheme (`tcp://`)"),
        ];
        for (field, value, message) in cases {
            let value = if field == "listen" { format!("[{value}]") } else { value.to_string() };
            let text = format!("\n{field} = {value}\n{base}");
            let e = Config::from_toml(&text, "s.toml").unwrap_err();
            assert_eq!((e.line, e.field.as_deref()), (Some(2), Some(field)), "{e}");
            assert!(e.message.contains(message), "{e}");
        }
        let c = Config::from_toml(
            &format!(
                "listen = [\n\"[::1]:0\",\n\"::1:0\",\n\"localhost:0\",\n\"my-host_1.example:0\",\n\"010.0.0.1:0\",\n\"unix:/tmp/s.sock\"]\nmetrics = \"127.0.0.1:0\"\n{base}"
            ),
            "s.toml",
        )
        .unwrap();
        assert_eq!((c.listen_lines, c.metrics_line), (vec![2, 3, 4, 5, 6, 7], Some(8)));
    }

    /// A fuzzer's `size = "1000000TiB"`, more than the engine addresses of a file (1 PiB: a start on
    /// a file system that holds it served it, refusing every request past 1 PiB, and failed on
    /// ext4 with "cannot size it: File too large" on the line of `path`), is refused on the line of
    /// `size` when the file is read; 1 PiB is read (a file system may still hold less: `check` and the
    /// start say so, on the same line).
    #[test]
    fn a_size_past_what_the_engine_addresses_is_refused_on_its_own_line() {
        let with = |size: &str| Config::from_toml(&one_export("", &format!("\n\nsize = {size}")), "s.toml");
        for too_big in ["\"1000000TiB\"", "\"1025TiB\"", "1125899906842625", "9223372036854775807"] {
            let e = with(too_big).unwrap_err();
            assert_eq!((e.line, e.field.as_deref()), (Some(7), Some("size")), "{e}");
            assert!(e.message.contains("more than an export can be: at most 1125899906842624 bytes"), "{e}");
        }
        let c = with("\"1024TiB\"").unwrap();
        assert_eq!((c.exports[0].size, c.exports[0].size_line), (Some(1 << 50), Some(7)));
        assert_eq!(c.exports[0].line, Some(4), "`line` stays the line of `path`");
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
        assert_eq!((e.field.as_deref(), e.line), (Some("cache"), Some(8)), "{e}");
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

    /// One export `a` on /tmp/a after `top` (top-level fields), with `export` (more of its fields).
    fn one_export(top: &str, export: &str) -> String {
        format!("{top}\n[[export]]\nname = \"a\"\npath = \"/tmp/a\"\n{export}\n")
    }

    #[test]
    fn an_export_name_with_a_control_character_is_refused_on_its_line() {
        let text = "listen = [\"127.0.0.1:0\"]\n[[export]]\nname = \"vm\\u001b[2J\"\npath = \"/tmp/a\"\n";
        let e = Config::from_toml(text, "s.toml").unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (Some(3), Some("name")), "{e}");
        assert!(e.message.contains("control character '\\u{1b}'"), "{e}");
    }

    #[test]
    fn handshake_limit_is_ten_seconds_unless_set_and_can_be_off() {
        let limit = |top: &str| Config::from_toml(&one_export(top, ""), "s.toml").map(|c| c.handshake_limit);
        assert_eq!(limit("").unwrap(), Some(std::time::Duration::from_secs(10)));
        assert_eq!(
            limit("handshake_limit = \"2.5s\"").unwrap(),
            Some(std::time::Duration::from_millis(2500))
        );
        assert_eq!(limit("handshake_limit = \"off\"").unwrap(), None);
        let e = limit("handshake_limit = \"5ms\"").unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (Some(1), Some("handshake_limit")), "{e}");
        assert!(e.message.contains("shorter than 100ms"), "{e}");
        let e = limit("handshake_limit = 10").unwrap_err();
        assert!(e.message.contains("an interval such as \"10s\" or \"off\""), "{e}");
    }

    #[test]
    fn memory_limit_is_one_gib_unless_set_at_least_one_connections_budget_and_can_be_off() {
        let config = |top: &str| Config::from_toml(&one_export(top, ""), "s.toml");
        let limit = |top: &str| config(top).map(|c| c.memory_limit);
        assert_eq!(limit("").unwrap(), 1 << 30);
        assert_eq!(limit("memory_limit = \"256MiB\"").unwrap(), 256 << 20);
        assert_eq!(limit("memory_limit = \"off\"").unwrap(), 0);
        // Smaller than what one connection may hold: a request of the largest size could never be
        // served. Said on its line.
        let e = limit("listen = [\"127.0.0.1:0\"]\nmemory_limit = \"32MiB\"").unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (Some(2), Some("memory_limit")), "{e}");
        assert!(e.message.contains("at least 64MiB (what one connection may hold)"), "{e}");
        let e = limit("memory_limit = \"1000TiB\"").unwrap_err();
        assert!(e.message.contains("more than this machine's memory"), "{e}");
        let e = limit("memory_limit = true").unwrap_err();
        assert!(e.message.contains("a size such as \"1GiB\" or \"off\""), "{e}");
        let unread = |top: &str| config(top).map(|c| c.unread_reply_limit);
        assert_eq!(unread("").unwrap(), Some(std::time::Duration::from_secs(10)));
        assert_eq!(unread("unread_reply_limit = \"2s\"").unwrap(), Some(std::time::Duration::from_secs(2)));
        assert_eq!(unread("unread_reply_limit = \"off\"").unwrap(), None);
        let e = unread("unread_reply_limit = \"1ms\"").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("unread_reply_limit"), "{e}");
    }

    #[test]
    fn wrong_types_name_the_field_and_say_what_is_expected_in_words() {
        let cases = [
            (
                one_export("", "weight = \"300\""),
                5,
                "weight",
                "expected a whole number 1..=1000, got the string \"300\"",
            ),
            (
                one_export("depth = \"32\"", ""),
                1,
                "depth",
                "expected a whole number 1..=4096, got the string \"32\"",
            ),
            (
                one_export("", "read_only = \"yes\""),
                5,
                "read_only",
                "expected true or false, got the string \"yes\"",
            ),
            (
                one_export("threads = 1.5", ""),
                1,
                "threads",
                "expected a whole number 1..=256, got the number 1.5",
            ),
            (one_export("listen = \"127.0.0.1:1\"", ""), 1, "listen", "expected a list of addresses"),
            (
                one_export("scheduler = 3", ""),
                1,
                "scheduler",
                "expected a scheduler's name such as \"bfq\", got the number 3",
            ),
            (one_export("", "size = true"), 5, "size", "expected a size such as \"10GiB\", got `true`"),
            (
                one_export("", "description = [1]"),
                5,
                "description",
                "expected a string of at most 4096 bytes, got a list",
            ),
            (one_export("", "colour = 1"), 5, "colour", "unknown field (known: name, path,"),
            (
                one_export("params = { slice_idle = 1, slice_idle_us = 5000 }", ""),
                1,
                "params.slice_idle_us",
                "`slice_idle` and `slice_idle_us` set one tunable",
            ),
        ];
        for (text, line, field, message) in cases {
            let e = Config::from_toml(&text, "s.toml").unwrap_err();
            assert_eq!((e.line, e.field.as_deref()), (Some(line), Some(field)), "{e}");
            assert!(e.message.starts_with(message), "{e}");
            for rust in ["i64", "u32", "a boolean", "invalid type"] {
                assert!(!e.message.contains(rust), "{e}");
            }
        }
        let e = Config::from_toml(
            "listen = [\"unix:/x\"]\n[export]\nname = \"a\"\npath = \"/tmp/a\"\n",
            "s.toml",
        )
        .unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (Some(2), Some("export")), "{e}");
        assert!(e.message.contains("[[export]]"), "{e}");
    }

    #[test]
    fn a_description_or_name_longer_than_the_protocol_allows_is_refused_on_its_line() {
        let ok = one_export("", &format!("description = \"{}\"", "d".repeat(4096)));
        assert_eq!(
            Config::from_toml(&ok, "s.toml").unwrap().exports[0].description.as_ref().unwrap().len(),
            4096
        );
        let long = one_export("", &format!("description = \"{}\"", "d".repeat(4097)));
        let e = Config::from_toml(&long, "s.toml").unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (Some(5), Some("description")), "{e}");
        assert!(e.message.contains("4097 bytes") && e.message.contains("at most 4096"), "{e}");
        let name = format!("[[export]]\nname = \"{}\"\npath = \"/tmp/a\"\n", "n".repeat(4097));
        let e = Config::from_toml(&name, "s.toml").unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (Some(2), Some("name")), "{e}");
    }

    #[test]
    fn two_exports_on_one_file_are_refused_naming_both_exports_and_the_file() {
        // The same path, however spelt: refused while parsing, on the second export's `path`.
        let text = "[[export]]\nname = \"rw\"\npath = \"/tmp/x.img\"\n[[export]]\nname = \"view\"\npath = \"/tmp/./y/../x.img\"\nread_only = true\n";
        let e = Config::from_toml(text, "s.toml").unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (Some(6), Some("path")), "{e}");
        assert!(
            e.message.contains("`rw` (/tmp/x.img)") && e.message.contains("`view` (/tmp/./y/../x.img)"),
            "{e}"
        );
        // Another name of the same file (a symbolic link, a hard link): refused by a look at the files.
        let dir = std::env::temp_dir().join(format!("bfq-serve-same-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (file, link, hard, other) =
            (dir.join("x.img"), dir.join("link.img"), dir.join("hard.img"), dir.join("o.img"));
        std::fs::write(&file, [0u8; 4096]).unwrap();
        std::fs::write(&other, [0u8; 4096]).unwrap();
        let _ = std::fs::remove_file(&link);
        let _ = std::fs::remove_file(&hard);
        std::os::unix::fs::symlink(&file, &link).unwrap();
        std::fs::hard_link(&file, &hard).unwrap();
        let two = |second: &std::path::Path| {
            let text = format!(
                "[[export]]\nname = \"rw\"\npath = \"{}\"\n[[export]]\nname = \"view\"\npath = \"{}\"\nread_only = true\n",
                file.display(),
                second.display()
            );
            Config::from_toml(&text, "s.toml").unwrap().check_shared_files()
        };
        let results = [two(&link), two(&hard), two(&other)];
        let _ = std::fs::remove_dir_all(&dir);
        for r in &results[..2] {
            let e = r.as_ref().unwrap_err();
            assert_eq!((e.line, e.field.as_deref()), (Some(6), Some("path")), "{e}");
            assert!(
                e.message.contains("`rw`") && e.message.contains("`view`") && e.message.contains("same file"),
                "{e}"
            );
        }
        assert!(results[2].is_ok(), "two files are two exports");
    }

    /// A fuzzer's: checking took time quadratic in the number of exports (10,000 took 30 s), each
    /// export's line counted from the top of the text and its name and path compared with every
    /// export before it. Twenty thousand are read here, with their lines right to the last, and the
    /// duplicates that end such a file are found on their own lines (this test ran for minutes
    /// before; it asserts no time, only the answers).
    #[test]
    fn twenty_thousand_exports_are_read_with_their_lines_and_a_duplicate_at_the_end_is_found() {
        const N: usize = 20_000;
        let mut text = String::from("listen = [\"127.0.0.1:0\"]\n");
        for i in 0..N {
            text += &format!("[[export]]\nname = \"e{i}\"\npath = \"/nonexistent/bfq/e{i}.img\"\n");
        }
        let c = Config::from_toml(&text, "many.toml").unwrap();
        assert_eq!(c.exports.len(), N);
        // Line 1 is `listen`; export i's `path` is line 4 + 3i.
        assert_eq!(c.exports[N - 1].line, Some(4 + 3 * (N - 1)));
        c.check_shared_files().unwrap();
        // A reload of it compares the exports by name (SIGHUP's notes): one gone, one new.
        assert_eq!(c.restart_needed(&c), Vec::<String>::new());
        let renamed = Config::from_toml(&text.replace("\"e5\"", "\"e5b\""), "many.toml").unwrap();
        assert_eq!(c.restart_needed(&renamed).len(), 2);
        let last_line = 1 + 3 * N;
        let twice = format!("{text}[[export]]\nname = \"e17\"\npath = \"/nonexistent/bfq/new.img\"\n");
        let e = Config::from_toml(&twice, "many.toml").unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (Some(last_line + 2), Some("name")), "{e}");
        assert!(e.message.contains("\"e17\" is defined twice"), "{e}");
        let same = format!("{text}[[export]]\nname = \"new\"\npath = \"/nonexistent/./bfq/e9.img\"\n");
        let e = Config::from_toml(&same, "many.toml").unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (Some(last_line + 3), Some("path")), "{e}");
        assert!(e.message.contains("`e9`") && e.message.contains("`new`"), "{e}");
    }

    #[test]
    fn a_reload_lists_every_top_level_change_that_only_a_restart_applies() {
        let before = Config::from_toml(&one_export("", "description = \"d\""), "s.toml").unwrap();
        assert_eq!(before.restart_needed(&before), Vec::<String>::new(), "nothing changed");
        let top = "listen = [\"127.0.0.1:1\"]\nscheduler = \"fifo\"\ndepth = 8\nmetrics = \"127.0.0.1:2\"\n\
                   read_ahead = \"1MiB\"\nread_cache = \"8MiB\"\nthreads = 2\nsummary_interval = \"1s\"\nstop_timeout = \"5s\"\nhandshake_limit = \"off\"\n\
                   memory_limit = \"128MiB\"\nunread_reply_limit = \"off\"";
        let after = Config::from_toml(&one_export(top, "cache = \"read\"\nweight = 500"), "s.toml").unwrap();
        let notes = before.restart_needed(&after);
        let fields: Vec<&str> = notes.iter().map(|n| n.split('`').nth(1).unwrap_or_default()).collect();
        assert_eq!(
            fields,
            [
                "listen",
                "scheduler",
                "params",
                "depth",
                "metrics",
                "read_ahead",
                "read_cache",
                "memory_limit",
                "threads",
                "a"
            ],
            "{notes:#?}"
        );
        assert_eq!(notes[3], "`depth` changes only with a restart: still 32, not 8");
        assert_eq!(
            notes[7],
            "`memory_limit` changes only with a restart: still 1073741824 bytes, not 134217728 bytes"
        );
        assert_eq!(notes[9], "export `a`: cache, description change only with a restart; not applied");
        // What a reload applies (weights, the summary's interval, the stop's bound) is not listed.
        assert!(
            !notes.iter().any(|n| {
                n.contains("weight")
                    || n.contains("summary")
                    || n.contains("stop")
                    || n.contains("handshake")
                    || n.contains("unread")
            }),
            "{notes:#?}"
        );
    }
}
