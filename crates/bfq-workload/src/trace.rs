//! Application start-up traces (seed 001 sec. 6.3; the traces' README from the S benchmark suite):
//! the 10-field text format, the built-in `xterm` and `gnometerm` traces, and their limits. The replay
//! itself is the runner's business (the simulator's `workload::startup`, the engine runner, the
//! kernel runner's replayer); what a replayed process reads is fixed here: one file of
//! [`THREAD_FILE_BYTES`] per traced process.

/// The most traced processes a trace may have (each is a queue and a 20 MB file).
pub const MAX_TRACE_PROCESSES: usize = 1024;

/// The most requests a trace may have (the shipped ones have a few thousand).
pub const MAX_TRACE_REQUESTS: usize = 1_000_000;

/// The largest trace file read (a million requests of about 60 bytes each).
pub const MAX_TRACE_FILE_BYTES: u64 = 64 << 20;

/// The size of each replay thread's file.
pub const THREAD_FILE_BYTES: u64 = 20_000_000;

/// The traces shipped with the simulator, by name.
pub const BUILTIN_TRACES: &[(&str, &str)] = &[
    ("xterm", include_str!("../traces/xterm.trace")),
    ("gnometerm", include_str!("../traces/gnometerm.trace")),
];

/// One traced request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceRequest {
    /// Replay thread (index of the process in order of first appearance).
    pub thread: usize,
    /// Size in bytes.
    pub bytes: u32,
    /// Continues the thread's previous request (`Seq`) or not (`Rand`).
    pub sequential: bool,
    /// Read-ahead: submitted asynchronously (the replay does not wait for it; still a synchronous read
    /// for the scheduler).
    pub readahead: bool,
    /// Metadata read.
    pub meta: bool,
}

/// A parsed start-up trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    /// The distinct processes, in order of first appearance.
    pub threads: Vec<String>,
    /// The requests, in trace order.
    pub requests: Vec<TraceRequest>,
}

/// Whether `tail`, the last nine fields of a line, are the format's after the process name: a time,
/// a size, a sector, `Seq`/`Rand`, a distance, a run, an action, a timestamp and `START`/`C`.
fn format_tail(tail: &[&str]) -> bool {
    let number = |f: &str| f.parse::<f64>().is_ok_and(f64::is_finite);
    let integer = |f: &str| f.parse::<i64>().is_ok();
    tail.len() == 9
        && number(tail[0])
        && tail[1].parse::<u32>().is_ok()
        && integer(tail[2])
        && matches!(tail[3], "Seq" | "Rand")
        && integer(tail[4])
        && integer(tail[5])
        && action_kind(tail[6]).is_some()
        && number(tail[7])
        && matches!(tail[8], "START" | "C")
}

/// What a request's action (field 8, blkparse's RWBS letters) makes of it in the replay: (read-ahead,
/// metadata). `None` for a token that is not RWBS. As in the S suite's replayer, every request is
/// replayed as a read (the one `WS` of gnometerm.trace, or a `W`, `D` or `N` of a trace recorded
/// elsewhere, reads as many bytes); a read-ahead (`A` with `R`) goes without waiting, any other
/// after the process's pending read-ahead. S submits only `RA` without waiting: a `RAM` is
/// read-ahead of metadata here, and waited for there.
fn action_kind(action: &str) -> Option<(bool, bool)> {
    let rwbs = !action.is_empty() && action.chars().all(|c| "RWDNFASMEB".contains(c));
    let operation = action.chars().filter(|c| "RWDN".contains(*c)).count() == 1;
    (rwbs && operation).then(|| (action.contains('A') && action.contains('R'), action.contains('M')))
}

impl Trace {
    /// Parses the 10-field text format; errors give the 1-based line number.
    pub fn parse(text: &str) -> Result<Trace, String> {
        let mut threads: Vec<String> = Vec::new();
        // Thread lookup by name in O(1): a trace of many processes must not parse in O(n^2).
        let mut thread_index: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        let mut requests = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.is_empty() || fields[0].starts_with('#') {
                continue;
            }
            // The format's ten (the last two are not replayed): a line of fewer, or of more whose
            // last nine are not the format's, is another format, whose fields would be read as the
            // wrong ones. More than ten whose last nine are the format's: a process name with spaces
            // (a thread's name such as "Web Content" in a trace recorded elsewhere).
            let name_fields = match fields.len() {
                10 => 1,
                more if more > 10 && format_tail(&fields[more - 9..]) => more - 9,
                other => {
                    return Err(format!(
                        "line {}: expected 10 fields (process, time, size, sector, Seq/Rand, distance, \
                         run, action, timestamp, START/C), got {other}",
                        n + 1
                    ))
                }
            };
            let name = {
                let offset = |f: &str| f.as_ptr() as usize - line.as_ptr() as usize;
                let last = fields[name_fields - 1];
                &line[offset(fields[0])..offset(last) + last.len()]
            };
            // From here the name's last word stands at index 0, so every other field keeps the
            // index the format gives it.
            let fields = &fields[name_fields - 1..];
            let thread = match thread_index.get(name) {
                Some(&i) => i,
                None => {
                    if threads.len() == MAX_TRACE_PROCESSES {
                        return Err(format!(
                            "line {}: more than {MAX_TRACE_PROCESSES} traced processes (each is replayed by its \
                             own queue and {}-byte file)",
                            n + 1,
                            THREAD_FILE_BYTES
                        ));
                    }
                    threads.push(name.to_string());
                    thread_index.insert(name, threads.len() - 1);
                    threads.len() - 1
                }
            };
            if requests.len() == MAX_TRACE_REQUESTS {
                return Err(format!("line {}: more than {MAX_TRACE_REQUESTS} requests", n + 1));
            }
            let sectors: u32 =
                fields[2].parse().map_err(|_| format!("line {}: bad size {:?}", n + 1, fields[2]))?;
            // Each request must fit in the traced process's file: a larger one read past it (a short
            // read on a real target).
            if sectors == 0 || u64::from(sectors) * 512 > THREAD_FILE_BYTES {
                return Err(format!(
                    "line {}: size {sectors} sectors out of range: a request is 1 to {} sectors (512 bytes \
                     each), to fit in the {THREAD_FILE_BYTES}-byte file each traced process reads",
                    n + 1,
                    THREAD_FILE_BYTES / 512
                ));
            }
            let sequential = match fields[4] {
                "Seq" => true,
                "Rand" => false,
                other => return Err(format!("line {}: expected Seq or Rand, got {other:?}", n + 1)),
            };
            let (readahead, meta) = action_kind(fields[7]).ok_or_else(|| {
                format!(
                    "line {}: unknown action {:?}: expected blkparse's RWBS letters (R, W, D or N for \
                     the operation, with F, A, S, M, E or B flags: R, RA, RM, RS, WS, ...)",
                    n + 1,
                    fields[7]
                )
            })?;
            // The fields not replayed are still the format's: a line whose times or positions are
            // not numbers is of another format (`a zzz 8 qqq Seq x y R z FOO` was replayed).
            let number = |f: &str| f.parse::<f64>().is_ok_and(f64::is_finite);
            let integer = |f: &str| f.parse::<i64>().is_ok() || f.parse::<u64>().is_ok();
            for (i, what, ok) in [
                (1, "time (seconds)", number(fields[1])),
                (3, "sector (a whole number)", integer(fields[3])),
                (5, "distance (a whole number)", integer(fields[5])),
                (6, "run (a whole number)", integer(fields[6])),
                (8, "timestamp (seconds)", number(fields[8])),
            ] {
                if !ok {
                    return Err(format!(
                        "line {}: field {} should be a {what}, got {:?}",
                        n + 1,
                        i + 1,
                        fields[i]
                    ));
                }
            }
            requests.push(TraceRequest { thread, bytes: sectors * 512, sequential, readahead, meta });
        }
        if requests.is_empty() {
            return Err("the trace has no requests".into());
        }
        Ok(Trace { threads, requests })
    }

    /// A trace shipped with the simulator (`"xterm"`, `"gnometerm"`).
    pub fn builtin(name: &str) -> Option<Trace> {
        BUILTIN_TRACES.iter().find(|(n, _)| *n == name).and_then(|(_, text)| Trace::parse(text).ok())
    }

    /// Its first `n` requests (all of them if it has fewer), with only the processes that issue them:
    /// the I/O of a smaller application that starts as this one does (`requests` of a start-up job).
    pub fn first(&self, n: u64) -> Trace {
        let keep = usize::try_from(n).unwrap_or(usize::MAX).min(self.requests.len());
        let mut requests: Vec<TraceRequest> = self.requests[..keep].to_vec();
        // Processes keep their order of first appearance; renumber the ones left.
        let mut map = vec![usize::MAX; self.threads.len()];
        let mut threads = Vec::new();
        for r in &mut requests {
            if map[r.thread] == usize::MAX {
                map[r.thread] = threads.len();
                threads.push(self.threads[r.thread].clone());
            }
            r.thread = map[r.thread];
        }
        Trace { threads, requests }
    }

    /// The file space the replay needs: one file per thread.
    pub fn region_bytes(&self) -> u64 {
        self.threads.len() as u64 * THREAD_FILE_BYTES.next_multiple_of(4096)
    }
}

/// Loads a start-up trace and keeps its first `requests` requests if given (a job's `requests`).
pub fn load_trace_head(name: &str, requests: Option<u64>) -> Result<Trace, String> {
    let t = load_trace(name)?;
    Ok(match requests {
        Some(n) => t.first(n),
        None => t,
    })
}

/// The text of the file at `path` if it is at most `limit` bytes (None if longer), read through the
/// limit: a device or a pipe has no length to check beforehand.
pub fn read_at_most(path: &std::path::Path, limit: u64) -> std::io::Result<Option<String>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Ok(None);
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// Loads a start-up trace: a built-in name, or a file path (read up to its size limit).
pub fn load_trace(name: &str) -> Result<Trace, String> {
    if let Some(t) = Trace::builtin(name) {
        return Ok(t);
    }
    let unreadable = |e: std::io::Error| {
        if e.kind() == std::io::ErrorKind::InvalidData {
            // Read, but not text: "not a readable file" sent a user to the file's permissions.
            return format!(
                "trace {name:?} is not a text file (not UTF-8): a trace has one request per line"
            );
        }
        let known: Vec<&str> = BUILTIN_TRACES.iter().map(|(n, _)| *n).collect();
        format!("trace {name:?} is neither a built-in trace ({}) nor a readable file: {e}", known.join(", "))
    };
    // Read through a limit rather than by the file's length: a device or a pipe has none
    // (`/dev/zero` was read until memory ran out).
    let text =
        read_at_most(std::path::Path::new(name), MAX_TRACE_FILE_BYTES).map_err(unreadable)?.ok_or_else(
            || format!("trace {name}: more than the limit of {MAX_TRACE_FILE_BYTES} bytes for a trace file"),
        )?;
    Trace::parse(&text).map_err(|e| format!("trace {name}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_is_read_only_up_to_its_size_limit_whatever_the_file() {
        // `/dev/zero` has no length: read through the limit, it is refused there, not read on.
        let e = load_trace("/dev/zero").unwrap_err();
        assert!(e.contains("more than the limit"), "{e}");
        let e = load_trace("/").unwrap_err();
        assert!(e.contains("nor a readable file"), "{e}");
        // A binary file is readable: it is named as not text.
        let binary = std::env::temp_dir().join(format!("bfq-binary-trace-{}", std::process::id()));
        std::fs::write(&binary, [0xff, 0xfe, 0x00, 0x80]).unwrap();
        let e = load_trace(binary.to_str().unwrap()).unwrap_err();
        let _ = std::fs::remove_file(&binary);
        assert!(e.contains("is not a text file (not UTF-8)"), "{e}");
    }

    #[test]
    fn builtin_traces_parse_with_their_documented_sizes() {
        // traces/README.md: xterm 718 requests, 2 processes; gnome-terminal 2,781 requests, 7 processes.
        let x = Trace::builtin("xterm").unwrap();
        assert_eq!((x.requests.len(), x.threads.len()), (718, 2));
        let sectors: u64 = x.requests.iter().map(|r| u64::from(r.bytes) / 512).sum();
        assert_eq!(sectors, 12_072);
        let g = Trace::builtin("gnometerm").unwrap();
        assert_eq!((g.requests.len(), g.threads.len()), (2781, 7));
    }

    /// Seed 001 sec. 6.3 (*bash*, the smallest application): a head of a trace keeps its requests in
    /// order and only the processes that issue them, renumbered from 0.
    #[test]
    fn the_head_of_a_trace_keeps_its_first_requests_and_their_processes() {
        let t = Trace::parse(
            "b-2 0 8 0 Rand 0 0 R 0 START\na-1 0 8 0 Seq 0 0 RA 0 C\nb-2 0 16 0 Seq 0 0 R 0 C\n",
        )
        .unwrap();
        let h = t.first(2);
        assert_eq!(h.threads, vec!["b-2".to_string(), "a-1".to_string()]);
        assert_eq!(h.requests, t.requests[..2].to_vec());
        let h = t.first(1);
        assert_eq!((h.threads.len(), h.requests.len(), h.requests[0].thread), (1, 1, 0));
        assert_eq!(t.first(100), t, "a head longer than the trace is the trace");
        // The xterm trace's first 376 requests are all the xterm process's (its loader and libraries).
        let x = Trace::builtin("xterm").unwrap().first(376);
        assert_eq!(x.threads.len(), 1);
    }

    /// A request larger than the 20,000,000-byte file of its process is refused with its line: it
    /// used to pass, and a real run then failed with a short read.
    #[test]
    fn a_request_larger_than_its_process_file_is_refused_with_its_line() {
        let fits = "p 0 39062 0 Seq 0 0 R 0 START\n";
        assert!(Trace::parse(fits).is_ok());
        let err = Trace::parse(&format!("{fits}p 0 39063 0 Seq 0 0 R 0 C\n")).unwrap_err();
        assert!(err.starts_with("line 2: size 39063 sectors out of range"), "{err}");
        assert!(err.contains("1 to 39062 sectors") && err.contains("20000000-byte file"), "{err}");
    }

    #[test]
    fn a_process_name_with_spaces_is_one_process() {
        // Threads are named by their program ("Web Content", "DOM Worker"): with the last nine
        // fields the format's, what comes before them is the name, spaces and all.
        let text = "Web Content-4321 0 8 100 Rand 0 0 R 0 START\nfirefox-4300 .000100 16 200 Rand 100 0 RA .0001 C\n\
                    Web Content-4321 .000050 8 108 Seq 0 8 RM .00015 C\nDOM  Worker-4322 0 8 300 Rand 0 0 R .0002 C\n";
        let t = Trace::parse(text).unwrap();
        assert_eq!(t.threads, ["Web Content-4321", "firefox-4300", "DOM  Worker-4322"]);
        assert_eq!(t.requests.iter().map(|r| r.thread).collect::<Vec<_>>(), [0, 1, 0, 2]);
        assert_eq!(t.requests[1].bytes, 16 * 512);
        // More than ten fields whose last nine are not the format's: another format, refused.
        let err = Trace::parse("p 0 8 0 Seq 0 0 R 0 START\nWeb Content 0 8 100 Rand 0 0 R 0 START x\n")
            .unwrap_err();
        assert!(err.starts_with("line 2: expected 10 fields") && err.ends_with("got 12"), "{err}");
    }

    #[test]
    fn a_line_whose_times_or_positions_are_not_numbers_is_refused_with_its_field() {
        let e = Trace::parse("a zzz 8 100 Seq 0 0 R 0 C\n").unwrap_err();
        assert_eq!(e, "line 1: field 2 should be a time (seconds), got \"zzz\"");
        let e = Trace::parse("a 0 8 qqq Seq 0 0 R 0 C\n").unwrap_err();
        assert!(e.contains("field 4 should be a sector"), "{e}");
        let e = Trace::parse("a 0 8 100 Seq 0 0 R nan C\n").unwrap_err();
        assert!(e.contains("field 9 should be a timestamp"), "{e}");
        assert!(Trace::parse("a 0.5 8 18446744073709551615 Seq -8 0 R 1.5 C\n").is_ok());
    }

    #[test]
    fn actions_are_read_as_blkparse_rwbs_letters() {
        // Traces recorded elsewhere (blkparse's RWBS field) carry actions the shipped ones do not:
        // every one is replayed as a read, read-ahead without waiting, as the S suite does.
        let text =
            "p-1 0 8 100 Rand 0 0 RS 0 START\np-1 0 8 108 Seq 0 8 RA 0 C\np-1 0 8 116 Seq 0 16 RAM 0 C\n\
                    p-1 0 8 124 Seq 0 24 W 0 C\np-1 0 8 132 Seq 0 32 FWFS 0 C\np-1 0 8 140 Seq 0 40 RM 0 C\n";
        let t = Trace::parse(text).unwrap();
        let kinds: Vec<(bool, bool)> = t.requests.iter().map(|r| (r.readahead, r.meta)).collect();
        assert_eq!(
            kinds,
            [(false, false), (true, false), (true, true), (false, false), (false, false), (false, true)]
        );
        for bad in ["X", "RW", "ra", "", "R1"] {
            let line = format!("p-1 0 8 100 Rand 0 0 {bad} 0 START\n");
            let err = Trace::parse(&line).unwrap_err();
            if bad.is_empty() {
                assert!(err.contains("expected 10 fields"), "{err}");
            } else {
                assert!(err.starts_with("line 1: unknown action") && err.contains("RWBS"), "{bad:?}: {err}");
            }
        }
    }

    #[test]
    fn malformed_trace_lines_are_reported_with_their_number() {
        let err = Trace::parse("p-1 0 8 100 Seq 0 0 R 0 START\np-1 0 x 100 Seq 0 0 R 0 C\n").unwrap_err();
        assert!(err.starts_with("line 2"), "{err}");
        // Lines of more or fewer fields than the format's ten are another format: eight, nine and
        // eleven passed while seven was told "expected 10" (a fuzzer's cases, 2026-12-05).
        for fields in
            ["p 0 8 0 Seq 0 0", "p 0 8 0 Seq 0 0 R", "p 0 8 0 Seq 0 0 R 0", "p 0 8 0 Seq 0 0 R 0 C x"]
        {
            let err = Trace::parse(&format!("p 0 8 0 Seq 0 0 R 0 START\n{fields}\n")).unwrap_err();
            let got = fields.split(' ').count();
            assert!(
                err.starts_with("line 2: expected 10 fields") && err.ends_with(&format!("got {got}")),
                "{err}"
            );
        }
    }

    /// Issue 14 item 5: a trace of 300,000 processes is refused at the first process over the limit,
    /// in linear time (it took 50 s in O(n^2) before), with the line and the limit in the message.
    #[test]
    fn a_trace_with_too_many_processes_is_refused_at_the_line_over_the_limit() {
        let text: String = (0..300_000).map(|i| format!("p{i} 0 8 0 Seq 0 0 R 0 0\n")).collect();
        let err = Trace::parse(&text).unwrap_err();
        assert!(err.contains(&format!("line {}", MAX_TRACE_PROCESSES + 1)), "{err}");
        assert!(err.contains("more than 1024 traced processes"), "{err}");
    }

    #[test]
    fn a_trace_file_over_the_size_limit_is_refused_before_it_is_read() {
        let path = std::env::temp_dir().join(format!("bfq-huge-trace-{}", std::process::id()));
        // Sparse: 128 MiB that would take seconds to read and parse, refused from its size alone.
        std::fs::File::create(&path).unwrap().set_len(2 * MAX_TRACE_FILE_BYTES).unwrap();
        let err = crate::trace::load_trace(path.to_str().unwrap()).unwrap_err();
        std::fs::remove_file(&path).unwrap();
        assert!(err.contains("more than the limit of 67108864 bytes"), "{err}");
    }
}
