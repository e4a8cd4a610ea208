//! `bfq run`: simulator job files against a real target (issue 6 part 3, 5).

/// Options of a real run.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Engine depth (default 32 when zero).
    pub depth: u32,
}

/// Errors of a real run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] crate::engine::EngineError),
}

/// Runs a simulator job file against a real file/device; same report type and JSON schema as `bfq sim`.
pub fn run_job(
    _job: &bfq_sim::job::Job,
    _target: &std::path::Path,
    _scheduler: &str,
    _params: &[(String, String)],
    _options: &RunOptions,
) -> Result<bfq_sim::report::RunReport, RunError> {
    todo!()
}
