//! What every command writes where (issue 17): `--json -` puts the JSON, and nothing else, on
//! standard output (the table then goes to standard error); `-q` prints no table; progress goes to
//! standard error — a bar on a terminal, plain lines with `BFQ_PROGRESS=lines` (for scripts and
//! tests), nothing with `-q`, `BFQ_PROGRESS=off` or when standard error is not a terminal; colour only
//! on a terminal, and never with `NO_COLOR` set (<https://no-color.org>) or `TERM=dumb`.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// Whether `--json` names standard output.
pub fn json_to_stdout(json: Option<&Path>) -> bool {
    json.is_some_and(|p| p.as_os_str() == "-")
}

/// Set when standard output refused a write (other than a closed pipe): the command then ends with
/// status 1 ([`stdout_failed`]), its other outputs (files) written as usual.
static STDOUT_FAILED: AtomicBool = AtomicBool::new(false);
/// Set when standard output is a pipe whose reader has gone (`bfq list | head -3`): nothing more is
/// written there, quietly, as a command cut short by its reader.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `text` on standard output. `print!` panicked when it could not (`bfq list > /dev/full`:
/// status 101 and a backtrace); a pipe whose reader has gone is now left alone from then on, and any
/// other failure is said once on standard error and makes the command end with status 1.
pub fn to_stdout(text: &str) {
    use std::io::Write;
    if STDOUT_CLOSED.load(Ordering::Relaxed) || STDOUT_FAILED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => STDOUT_CLOSED.store(true, Ordering::Relaxed),
        Err(e) => {
            STDOUT_FAILED.store(true, Ordering::Relaxed);
            eprintln!("bfq: cannot write to standard output: {e}");
        }
    }
}

/// A writer that passes everything to `inner` and keeps its first error, where the one it is handed
/// to would drop it: the simulator ends a trace at a write error and goes on, and a `BufWriter`
/// drops its last flush's error, so an event log cut short by a full disk went unsaid (status 0).
pub struct Recording<W> {
    inner: W,
    error: Arc<std::sync::Mutex<Option<std::io::Error>>>,
}

impl<W: std::io::Write> Recording<W> {
    /// `inner`, and where its first error will be.
    pub fn new(inner: W) -> (Self, Arc<std::sync::Mutex<Option<std::io::Error>>>) {
        let error = Arc::new(std::sync::Mutex::new(None));
        (Recording { inner, error: error.clone() }, error)
    }

    fn keep<T>(&self, r: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(e) = &r {
            let mut first = self.error.lock().unwrap_or_else(|p| p.into_inner());
            if first.is_none() {
                *first = Some(std::io::Error::new(e.kind(), e.to_string()));
            }
        }
        r
    }
}

impl<W: std::io::Write> std::io::Write for Recording<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let r = self.inner.write(buf);
        self.keep(r)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let r = self.inner.flush();
        self.keep(r)
    }
}

/// Whether standard output refused a write ([`to_stdout`]).
pub fn stdout_failed() -> bool {
    STDOUT_FAILED.load(Ordering::Relaxed)
}

/// Writes a value as pretty JSON to `path` (`-`: standard output).
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    if path.as_os_str() == "-" {
        to_stdout(&(text + "\n"));
    } else {
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Prints a table: on standard output, or on standard error when the JSON goes to standard output;
/// not at all with `-q`.
pub fn print_table(text: &str, quiet: bool, json: Option<&Path>) {
    if quiet {
        return;
    }
    if json_to_stdout(json) {
        eprint!("{text}");
    } else {
        to_stdout(text);
    }
}

/// Whether to colour what goes to standard output.
pub fn colour() -> bool {
    std::env::var_os("NO_COLOR").map_or(true, |v| v.is_empty())
        && std::env::var("TERM").map_or(true, |t| t != "dumb")
        && std::io::stdout().is_terminal()
}

/// How progress is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressMode {
    /// An indicatif bar on standard error.
    Bar,
    /// Plain `progress: ...` lines on standard error, about once a second.
    Lines,
    /// Nothing.
    Off,
}

/// The progress mode for a command run with or without `-q`.
pub fn progress_mode(quiet: bool) -> ProgressMode {
    if quiet {
        return ProgressMode::Off;
    }
    match std::env::var("BFQ_PROGRESS").as_deref() {
        Ok("lines") => ProgressMode::Lines,
        Ok("off") => ProgressMode::Off,
        Ok("bar") => ProgressMode::Bar,
        _ if std::io::stderr().is_terminal() => ProgressMode::Bar,
        _ => ProgressMode::Off,
    }
}

/// Progress of a sequence of timed runs (each about `run_s` long): which one, how far, what is left.
/// Reports from a thread of its own until dropped.
pub struct Ticker {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Ticker {
    /// Starts reporting run `index` (0-based) of `count`, named `label`, expected to take `run_s`.
    pub fn start(mode: ProgressMode, label: &str, index: usize, count: usize, run_s: f64) -> Ticker {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = (mode != ProgressMode::Off).then(|| {
            let (stop, label) = (stop.clone(), label.to_string());
            std::thread::spawn(move || {
                let started = Instant::now();
                let total_left =
                    |elapsed: f64| (run_s - elapsed).max(0.0) + run_s * (count - index - 1) as f64;
                let bar = (mode == ProgressMode::Bar).then(|| {
                    let b = indicatif::ProgressBar::new((run_s * 10.0).max(1.0) as u64);
                    b.set_style(
                        indicatif::ProgressStyle::with_template("{prefix} [{bar:30}] {msg}")
                            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                    );
                    b.set_prefix(format!("run {}/{count} {label}", index + 1));
                    b
                });
                let mut last_line = Instant::now() - Duration::from_secs(2);
                while !stop.load(Ordering::Relaxed) {
                    let elapsed = started.elapsed().as_secs_f64();
                    let msg = format!(
                        "{elapsed:.1} of ~{run_s:.1} s; about {:.0} s left in all",
                        total_left(elapsed)
                    );
                    match &bar {
                        Some(b) => {
                            b.set_position((elapsed * 10.0) as u64);
                            b.set_message(msg);
                        }
                        None if last_line.elapsed() >= Duration::from_secs(1) => {
                            eprintln!("progress: run {}/{count} {label}: {msg}", index + 1);
                            last_line = Instant::now();
                        }
                        None => {}
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                if let Some(b) = bar {
                    b.finish_and_clear();
                }
            })
        });
        Ticker { stop, thread }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// How long a simulation runs before its progress is shown: a short one prints nothing at all.
const SIM_QUIET_FOR: Duration = Duration::from_secs(1);

/// Progress of one simulated column of `bfq sim` (issue 17: a 24-hour simulated `--duration` must not
/// run silently): which scheduler, how far in simulated seconds, the wall time spent and an estimate of
/// what is left, from the wall-clock rate so far. The simulation only stores the simulated time it has
/// reached ([`SimTicker::reached`], an atomic store every few thousand events); a thread of its own
/// reads it, draws the bar or prints the lines, until dropped. Nothing is shown in the first second.
pub struct SimTicker {
    reached: Arc<AtomicU64>,
    /// Dropping it wakes the thread at once (a short simulation is not held up by the ticker's tick).
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SimTicker {
    /// Starts reporting column `index` (0-based) of `count`, the scheduler `label`, which stops at
    /// simulated time `end` (nanoseconds).
    pub fn start(mode: ProgressMode, label: &str, index: usize, count: usize, end: u64) -> SimTicker {
        let reached = Arc::new(AtomicU64::new(0));
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = if mode == ProgressMode::Off {
            None
        } else {
            let (reached, prefix) = (reached.clone(), format!("sim {}/{count} {label}", index + 1));
            let later_columns = count.saturating_sub(index + 1);
            // Without a thread there is no progress, which is no reason to fail the simulation.
            std::thread::Builder::new()
                .name("bfq-sim-progress".into())
                .spawn(move || {
                    let started = Instant::now();
                    let mut bar: Option<indicatif::ProgressBar> = None;
                    let mut last_line: Option<Instant> = None;
                    while let Err(mpsc::RecvTimeoutError::Timeout) =
                        stopped.recv_timeout(Duration::from_millis(100))
                    {
                        let elapsed = started.elapsed();
                        if elapsed < SIM_QUIET_FOR {
                            continue;
                        }
                        let now = reached.load(Ordering::Relaxed).min(end);
                        let msg = sim_message(now, end, elapsed.as_secs_f64(), later_columns);
                        if mode == ProgressMode::Bar {
                            let b = bar.get_or_insert_with(|| {
                                // Set up hidden, so the first frame drawn already has its message.
                                let b = indicatif::ProgressBar::with_draw_target(
                                    Some((end / 1_000_000).max(1)),
                                    indicatif::ProgressDrawTarget::hidden(),
                                );
                                b.set_style(
                                    indicatif::ProgressStyle::with_template("{prefix} [{bar:30}] {msg}")
                                        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                                );
                                b.set_prefix(prefix.clone());
                                b.set_message(msg.clone());
                                b.set_draw_target(indicatif::ProgressDrawTarget::stderr());
                                b
                            });
                            b.set_message(msg);
                            b.set_position(now / 1_000_000);
                        } else if last_line.map_or(true, |t| t.elapsed() >= Duration::from_secs(1)) {
                            eprintln!("progress: {prefix}: {msg}");
                            last_line = Some(Instant::now());
                        }
                    }
                    if let Some(b) = bar {
                        b.finish_and_clear();
                    }
                })
                .ok()
        };
        SimTicker { reached, stop: Some(stop), thread }
    }

    /// Whether anything is shown (if not, the simulation need not report how far it is).
    pub fn is_active(&self) -> bool {
        self.thread.is_some()
    }

    /// The simulation has reached simulated time `now` (nanoseconds).
    pub fn reached(&self, now: u64) {
        self.reached.store(now, Ordering::Relaxed);
    }
}

impl Drop for SimTicker {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `simulated 1,234 of 86,400 s; 3 s elapsed, about 3 min left (7 min in all)`: how far a simulated
/// column is, and what is left of it (and of the `later_columns` after it, at this column's rate),
/// from the wall-clock rate so far.
fn sim_message(now: u64, end: u64, elapsed_s: f64, later_columns: usize) -> String {
    let (now_s, end_s) = (now as f64 / 1e9, end as f64 / 1e9);
    let simulated = if end_s < 100.0 {
        format!("simulated {now_s:.1} of {end_s:.1} s")
    } else {
        format!("simulated {} of {} s", thousands(now_s as u64), thousands(end_s as u64))
    };
    let elapsed = format!("{} elapsed", human_seconds(elapsed_s));
    if now == 0 {
        return format!("{simulated}; {elapsed}, estimating what is left");
    }
    let wall_per_simulated = elapsed_s / now_s;
    let left = (end_s - now_s) * wall_per_simulated;
    let in_all = if later_columns > 0 {
        let all = left + end_s * wall_per_simulated * later_columns as f64;
        format!(" ({} in all)", human_seconds(all))
    } else {
        String::new()
    };
    format!("{simulated}; {elapsed}, about {} left{in_all}", human_seconds(left))
}

/// `1234567` as `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A wall-clock span a person reads at a glance: `45 s`, `12 min`, `3.5 h`.
fn human_seconds(s: f64) -> String {
    if s < 100.0 {
        format!("{s:.0} s")
    } else if s < 6000.0 {
        format!("{:.0} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sim_message_says_how_far_and_what_is_left() {
        const S: u64 = 1_000_000_000;
        assert_eq!(
            sim_message(1234 * S, 86_400 * S, 2.0, 0),
            "simulated 1,234 of 86,400 s; 2 s elapsed, about 2 min left"
        );
        assert_eq!(
            sim_message(5 * S / 2, 10 * S, 3.0, 1),
            "simulated 2.5 of 10.0 s; 3 s elapsed, about 9 s left (21 s in all)"
        );
        assert_eq!(
            sim_message(0, 10 * S, 1.0, 0),
            "simulated 0.0 of 10.0 s; 1 s elapsed, estimating what is left"
        );
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(86_400_000), "86,400,000");
        assert_eq!(human_seconds(7200.0), "2.0 h");
    }
}
