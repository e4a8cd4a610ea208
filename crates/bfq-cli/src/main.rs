//! The `bfq` command. One module per subcommand (`sim`, `suite`), each with
//! its own clap arguments and an `execute` function.

use clap::{Parser, Subcommand};

mod alone;
mod checks;
mod compare;
mod list;
mod output;
mod replay_cmd;
mod run;
mod serve_cmd;
mod sim;
mod suite_cmd;

/// Budget Fair Queueing: simulate, run and compare storage I/O schedulers.
#[derive(Parser, Debug)]
#[command(
    name = "bfq",
    version,
    about,
    after_help = "Exit status: 0 success; 1 an error (bad input, a failed run); 2 a usage error; 3 a failing headline claim under `suite --fail-on-headline`; 130 interrupted (SIGINT, SIGTERM, SIGHUP).\nEnvironment: NO_COLOR turns colour off; BFQ_PROGRESS=lines|off|bar chooses how progress is shown on standard error.\nSee `bfq list` for the schedulers and their tunables, the device presets, workloads and traces."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Simulate a job file under one or more schedulers and compare them side by side.
    Sim(sim::SimArgs),
    /// Run the papers' benchmark suite on the simulator and compare with the published results.
    Suite(suite_cmd::SuiteArgs),
    /// Run a job file against a real file or block device through the io_uring engine.
    Run(run::RunArgs),
    /// Run a job through the engine and, with fio on a loop device, under the kernel's schedulers,
    /// side by side (Linux, root).
    Compare(compare::CompareArgs),
    /// List the schedulers with their tunables, the device presets, the workloads and the traces.
    List(list::ListArgs),
    /// Serve files and block devices to NBD clients, each export and connection a BFQ tenant.
    Serve(serve_cmd::ServeArgs),
    /// The S-suite start-up replay `bfq compare` runs under the kernel's schedulers (internal).
    #[command(hide = true)]
    ReplayStartup(replay_cmd::ReplayArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Sim(args) => sim::execute(args),
        Command::Suite(args) => suite_cmd::execute(args),
        Command::Run(args) => run::execute(args),
        Command::Compare(args) => compare::execute(args),
        Command::Serve(args) => serve_cmd::execute(args),
        Command::List(args) => list::execute(args),
        Command::ReplayStartup(args) => replay_cmd::execute(args),
    };
    // Standard output that refused the table or the JSON (a full disk behind `>`): said when it
    // happened (`output::to_stdout`); the command fails.
    let result = result.and_then(|()| {
        if output::stdout_failed() {
            anyhow::bail!("standard output could not be written (above)");
        }
        Ok(())
    });
    if let Err(err) = result {
        eprintln!("bfq: error: {err:#}");
        // Exit statuses (README, "Exit status"): 1 an error, 2 a usage error (clap), 3 a failing
        // headline claim under `suite --fail-on-headline`, 130 interrupted.
        let status = if err.downcast_ref::<suite_cmd::HeadlineFailed>().is_some() { 3 } else { 1 };
        std::process::exit(status);
    }
}
