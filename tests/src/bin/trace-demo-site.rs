//! `trace-demo-site`: serves the TRACE Demo Shop on 127.0.0.1 until Ctrl+C, printing each request it answers.

use anyhow::Context;
use clap::Parser;
use trace_e2e::site::{self, SiteState};

/// Serve the TRACE Demo Shop, the local site that TRACE's tests and demo record.
#[derive(Debug, Parser)]
struct Args {
    /// The port on 127.0.0.1 (0 for any free port).
    #[arg(long, default_value_t = 8000)]
    port: u16,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let listener = tokio::net::TcpListener::from_std(site::bind(args.port)?)?;
    let port = listener.local_addr()?.port();
    println!("TRACE Demo Shop: http://127.0.0.1:{port}/ (Ctrl+C to stop)");
    let app = site::router(SiteState::printing_requests());
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            // If Ctrl+C cannot be watched, the process can still be killed.
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .context("the server failed")?;
    Ok(())
}
