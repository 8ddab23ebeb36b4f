//! The `trace-replay` binary: command line and exit codes; the work is in the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Serve a TRACE bundle to Chromium offline, and re-run its recorded trajectory.
#[derive(Debug, Parser)]
#[command(name = "trace-replay", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Summarize a bundle (directory or zip): task, pages, hosts with request counts and bytes.
    Inspect {
        bundle: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Serve a bundle to Chromium with no network (not built yet).
    Serve { bundle: PathBuf },
    /// Re-run the recorded human trajectory against the replayed site (not built yet).
    Run {
        bundle: PathBuf,
        #[arg(long)]
        human: bool,
    },
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("trace-replay: {error:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Inspect { bundle, json } => {
            let summary = trace_replay::inspect::inspect(&bundle)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&summary)?);
            } else {
                print!("{summary}");
            }
            Ok(())
        }
        Command::Serve { .. } | Command::Run { .. } => {
            anyhow::bail!("serving bundles is not built yet; `trace-replay inspect` reads a bundle today")
        }
    }
}
