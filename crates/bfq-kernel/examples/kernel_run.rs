//! Runs a job file with fio under one kernel scheduler and prints the report as JSON:
//! `kernel_run JOB TARGET [SCHEDULER]` (root and fio needed).

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: kernel_run JOB TARGET [bfq|mq-deadline|kyber|none]");
        std::process::exit(2);
    }
    let result = bfq_workload::Job::from_file(std::path::Path::new(&args[1]))
        .map_err(|e| e.to_string())
        .and_then(|job| {
            let sched = args.get(3).map_or("bfq", String::as_str);
            bfq_kernel::run_kernel_job(&job, std::path::Path::new(&args[2]), sched, &Default::default())
                .map_err(|e| e.to_string())
        });
    match result {
        Ok(report) => println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default()),
        Err(e) => {
            eprintln!("kernel_run: {e}");
            std::process::exit(1);
        }
    }
}
