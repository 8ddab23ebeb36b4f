//! The `trace-host` binary: chooses between native messaging mode (Chrome passes the extension's origin)
//! and the command line, and alone decides the exit code.

use std::process::ExitCode;

use clap::Parser;
use trace_host::cli::{self, Cli, Outcome};
use trace_host::messaging::SessionEnd;

fn main() -> ExitCode {
    // Chrome starts a native host as `trace-host chrome-extension://ID/` (plus `--parent-window=N` on
    // Windows), which no subcommand could parse: recognise it before clap sees it.
    if let Some(origin) = std::env::args().nth(1).filter(|arg| arg.starts_with("chrome-extension://")) {
        return match trace_host::native::run(&origin) {
            Ok(SessionEnd::Closed | SessionEnd::Signalled) => ExitCode::SUCCESS,
            Ok(SessionEnd::BadFrame(_)) | Err(_) => ExitCode::FAILURE,
        };
    }
    init_stderr_logging();
    match cli::run(Cli::parse()) {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::Failure) => ExitCode::from(1),
        // The reader went away (`trace-host tasks --json | head -1`): it has all it wanted.
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("trace-host: {error:#}");
            ExitCode::from(2)
        }
    }
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn init_stderr_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TRACE_LOG").unwrap_or_else(|_| "warn".into());
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
}
