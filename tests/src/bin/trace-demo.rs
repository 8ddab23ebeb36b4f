//! `trace-demo`: records, bundles and checks the demonstration of the README (`cargo xtask demo`).

use std::path::PathBuf;

use clap::Parser;
use trace_e2e::demo::{self, DemoConfig};

/// Record a demonstration, bundle it, export it, and check the result with the real binaries.
#[derive(Debug, Parser)]
struct Args {
    /// Where trace-host and trace-replay are.
    #[arg(long, default_value = "target/release")]
    bin_dir: PathBuf,
    /// Where to put the data directory and the exported zip.
    #[arg(long, default_value = "target/demo")]
    out: PathBuf,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let output = demo::run(&DemoConfig { bin_dir: args.bin_dir, out_dir: args.out })?;
    println!("\ndone: the bundle is in {}, exported as {}", output.bundle_dir.display(), output.zip.display());
    Ok(())
}
