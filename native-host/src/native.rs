//! The native messaging entry point: set up logging to a file (stdout belongs to the protocol), open the
//! data directory, and serve the session on stdin and stdout until the browser closes the port.

use std::io::Write;

use anyhow::Result;
use tokio::runtime::Runtime;
use trace_manifest::wire::{ErrorCode, HostMessage};

use crate::ingest::{Config, Ingestor};
use crate::messaging::{self, SessionEnd};
use crate::paths::DataDir;

/// Runs one native messaging session for the extension at `origin`.
pub fn run(origin: &str) -> Result<SessionEnd> {
    let data = match DataDir::resolve(None) {
        Ok(data) => data,
        Err(error) => {
            refuse(&format!("{error:#}"));
            return Err(error);
        }
    };
    init_file_logging(&data);
    tracing::info!(origin, pid = std::process::id(), version = env!("CARGO_PKG_VERSION"), "session started");
    let ingestor = match Ingestor::new(data, Config::default()) {
        Ok(ingestor) => ingestor,
        Err(error) => {
            tracing::error!("{error:#}");
            refuse(&format!("{error:#}"));
            return Err(error);
        }
    };
    messaging::enlarge_stdin_pipe();
    let runtime: Runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let end = runtime.block_on(messaging::serve(std::io::stdin(), tokio::io::stdout(), ingestor, shutdown_signal()));
    tracing::info!(?end, "session ended");
    // The reader thread may still be blocked on stdin after a signal; do not wait for it.
    runtime.shutdown_background();
    end
}

/// Answers the browser with one error when the host cannot work at all, so that the extension can say why.
fn refuse(message: &str) {
    let reply = HostMessage::Error {
        seq: None,
        task_id: None,
        code: ErrorCode::Storage,
        message: format!("trace-host cannot start: {message}"),
        expected_seq: None,
    };
    let body = serde_json::to_vec(&reply).expect("host messages always serialize");
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(&(body.len() as u32).to_ne_bytes());
    let _ = stdout.write_all(&body);
    let _ = stdout.flush();
}

fn init_file_logging(data: &DataDir) {
    let dir = data.logs();
    let file = std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::OpenOptions::new().create(true).append(true).open(dir.join("trace-host.log")));
    let Ok(file) = file else { return };
    let filter = tracing_subscriber::EnvFilter::try_from_env("TRACE_LOG").unwrap_or_else(|_| "info".into());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::sync::Mutex::new(file))
        .try_init();
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut terminate) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
