//! `trace-host install` / `uninstall`: registers `trace-host` as a native messaging host for the current
//! user, by writing the host manifest where each browser looks for it, with `allowed_origins` naming the
//! extension's fixed ID. For a browser started with a custom `--user-data-dir`, the manifest goes into
//! `DIR/NativeMessagingHosts/`, which Chrome and Chromium search too.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
pub use trace_manifest::report::Installed;
use trace_manifest::{EXTENSION_ID, HOST_NAME};
use trace_store::atomic;

use crate::browser_dirs::{ChromeVariant, NATIVE_MESSAGING_HOSTS_DIR};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Browser {
    Chrome,
    Chromium,
    All,
}

/// The host manifest for the given `trace-host` executable.
pub fn host_manifest(executable: &Path) -> serde_json::Value {
    serde_json::json!({
        "name": HOST_NAME,
        "description": "TRACE recorder: stores recordings and builds capture bundles",
        "path": executable,
        "type": "stdio",
        "allowed_origins": [format!("chrome-extension://{EXTENSION_ID}/")],
    })
}

/// The directories where the chosen browsers look for this user's native messaging hosts.
pub fn manifest_dirs(browser: Browser, user_data_dir: Option<&Path>) -> Result<Vec<(String, PathBuf)>> {
    if let Some(dir) = user_data_dir {
        return Ok(vec![("custom profile".to_owned(), dir.join(NATIVE_MESSAGING_HOSTS_DIR))]);
    }
    if cfg!(windows) {
        bail!("installing on Windows needs a registry key, which trace-host does not write yet");
    }
    let chosen: &[ChromeVariant] = match browser {
        Browser::Chrome => &[ChromeVariant::Chrome],
        Browser::Chromium => &[ChromeVariant::Chromium],
        Browser::All => &ChromeVariant::ALL,
    };
    let mut dirs = Vec::new();
    for variant in chosen {
        let user_data = variant.user_data_dir().context("cannot find this user's configuration directory")?;
        dirs.push((variant.name().to_owned(), user_data.join(NATIVE_MESSAGING_HOSTS_DIR)));
    }
    Ok(dirs)
}

pub fn install(browser: Browser, user_data_dir: Option<&Path>) -> Result<Vec<Installed>> {
    let executable = std::env::current_exe()
        .and_then(|path| path.canonicalize())
        .context("cannot find the path of trace-host itself")?;
    let manifest = serde_json::to_string_pretty(&host_manifest(&executable))?;
    let mut written = Vec::new();
    for (browser, dir) in manifest_dirs(browser, user_data_dir)? {
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let path = dir.join(format!("{HOST_NAME}.json"));
        atomic::write(&path, |out| Ok(out.write_all(manifest.as_bytes())?))?;
        written.push(Installed { browser, manifest: path });
    }
    Ok(written)
}

pub fn uninstall(browser: Browser, user_data_dir: Option<&Path>) -> Result<Vec<Installed>> {
    let mut removed = Vec::new();
    for (browser, dir) in manifest_dirs(browser, user_data_dir)? {
        let path = dir.join(format!("{HOST_NAME}.json"));
        match std::fs::remove_file(&path) {
            Ok(()) => removed.push(Installed { browser, manifest: path }),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(error).with_context(|| format!("cannot remove {}", path.display())),
        }
    }
    Ok(removed)
}
