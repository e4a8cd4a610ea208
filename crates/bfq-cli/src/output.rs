//! What every command writes where (issue 17): `--json -` puts the JSON, and nothing else, on
//! standard output (the table then goes to standard error); `-q` prints no table; progress goes to
//! standard error — a bar on a terminal, plain lines with `BFQ_PROGRESS=lines` (for scripts and
//! tests), nothing with `-q`, `BFQ_PROGRESS=off` or when standard error is not a terminal; colour only
//! on a terminal, and never with `NO_COLOR` set (<https://no-color.org>) or `TERM=dumb`.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// Whether `--json` names standard output.
pub fn json_to_stdout(json: Option<&Path>) -> bool {
    json.is_some_and(|p| p.as_os_str() == "-")
}

/// Writes a value as pretty JSON to `path` (`-`: standard output).
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    if path.as_os_str() == "-" {
        println!("{text}");
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
        print!("{text}");
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
