//! The one place TRACE launches Chromium: for replay, and for the end-to-end tests and benchmarks that
//! record with the extension. It owns which Chromium runs (`--chromium`, then `TRACE_CHROMIUM`, then
//! Debian's `/usr/bin/chromium`), the flags that keep it off the network on its own account, `--no-sandbox`
//! only as root, a fresh profile per launch (concurrent launches sharing one fail on its `SingletonLock`),
//! and the task that drives chromiumoxide's connection.
//!
//! chromiumoxide cannot parse some DevTools messages of a newer Chromium (a new enum value in an event
//! nobody here listens to). They are counted, by method, and said once when the browser is gone: at warn
//! when one was a message TRACE depends on (a command's response, a `Fetch` or `Target` event), else at
//! debug, so that a clean run prints no warning while a lost request still shows. A connection that breaks
//! is said at warn too, unless the browser was being closed ([`Chromium::closing`]), when it always does.
//! chromiumoxide's own log lines for these are noise beside that, and [`quiet_chromiumoxide`] turns them off.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use chromiumoxide::error::CdpError;
use chromiumoxide::{Browser, BrowserConfig};
use futures::StreamExt;
use tokio::task::JoinHandle;

/// Where Debian installs Chromium: used when neither `--chromium` nor `TRACE_CHROMIUM` names another.
pub const DEFAULT_CHROMIUM: &str = "/usr/bin/chromium";
/// The environment variable that names the Chromium to drive.
pub const CHROMIUM_ENV: &str = "TRACE_CHROMIUM";

/// Flags that keep Chromium off the network on its own account (updates, sync, metrics, QUIC probes),
/// without their leading dashes.
const OFFLINE_FLAGS: &[&str] = &[
    "disable-background-networking",
    "disable-component-update",
    "no-first-run",
    "disable-sync",
    "disable-quic",
    "disable-gpu",
    "disable-client-side-phishing-detection",
    "disable-domain-reliability",
    "disable-breakpad",
    "disable-default-apps",
    "disable-component-extensions-with-background-pages",
    "disable-search-engine-choice-screen",
    "no-default-browser-check",
    "no-pings",
    "metrics-recording-only",
    "password-store=basic",
    "use-mock-keychain",
    // WebRTC may send UDP only through a proxy, and there is none: no STUN or media packet leaves.
    "force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "webrtc-ip-handling-policy=disable_non_proxied_udp",
];

/// Chromium features that reach Google's servers on their own (autofill, password leak checks, network
/// time, optimization hints, translation, media routing, certificate transparency lists), turned off in
/// one `--disable-features`, to which a launch adds its own.
const BACKGROUND_FEATURES: &[&str] = &[
    "AutofillServerCommunication",
    "PasswordLeakDetection",
    "NetworkTimeServiceQuerying",
    "OptimizationHints",
    "OptimizationHintsFetching",
    "OptimizationGuideModelDownloading",
    "Translate",
    "MediaRouter",
    "DialMediaRouteProvider",
    "CertificateTransparencyComponentUpdater",
    "InterestFeedContentSuggestions",
    "PrivacySandboxSettings4",
];

/// The preferences a fresh profile starts with: what no command-line flag turns off. No sign-in, no
/// password manager (whose leak check calls Google), no network prediction (preconnects to the search
/// engine), no search suggestions, no Safe Browsing lookups.
const PROFILE_PREFERENCES: &str = r#"{
  "credentials_enable_service": false,
  "profile": { "password_manager_enabled": false, "password_manager_leak_detection": false },
  "signin": { "allowed": false },
  "net": { "network_prediction_options": 2 },
  "search": { "suggest_enabled": false },
  "safebrowsing": { "enabled": false },
  "translate": { "enabled": false },
  "alternate_error_pages": { "enabled": false }
}"#;

/// DevTools domains whose events TRACE acts on: one lost there is a request left hanging or a tab missed.
const RELIED_ON_DOMAINS: [&str; 2] = ["Fetch.", "Target."];

/// How to launch Chromium.
#[derive(Debug, Clone, Default)]
pub struct Launch {
    /// The Chromium to run; [`resolve`]d when `None`.
    pub chromium: Option<PathBuf>,
    /// With a window when false (given a display).
    pub headless: bool,
    /// An unpacked extension to load (and no other).
    pub extension: Option<PathBuf>,
    /// Added to the browser's environment (it hands it to the native hosts it starts).
    pub env: Vec<(String, String)>,
    /// More flags, without leading dashes, each with its value if it has one (not `disable-features`).
    pub args: Vec<(String, Option<String>)>,
    /// Features to turn off besides [`BACKGROUND_FEATURES`]: Chromium reads one `--disable-features`.
    pub disabled_features: Vec<String>,
    /// The DevTools port; a free one when `None`.
    pub port: Option<u16>,
    /// A profile directory to use instead of a fresh temporary one (the caller keeps it alive).
    pub user_data_dir: Option<PathBuf>,
    /// The viewport every page gets (and the window's size); chromiumoxide's 800 × 600 when `None`.
    pub viewport: Option<trace_manifest::event::Viewport>,
}

/// A running Chromium: the browser, the task driving its connection, and its profile (removed on drop).
pub struct Chromium {
    pub browser: Browser,
    pub handler: JoinHandle<()>,
    pub profile: Option<tempfile::TempDir>,
    /// Set before closing the browser on purpose: the connection's end is then no news.
    pub closing: Arc<AtomicBool>,
}

impl Chromium {
    /// Closes the browser and waits for it to exit.
    pub async fn close(mut self) -> Result<()> {
        self.closing.store(true, Ordering::SeqCst);
        self.browser.close().await?;
        let _ = self.browser.wait().await;
        let _ = tokio::time::timeout(Duration::from_secs(10), self.handler).await;
        Ok(())
    }
}

/// The Chromium to run: `given`, else `TRACE_CHROMIUM`, else [`DEFAULT_CHROMIUM`].
pub fn resolve(given: Option<&Path>) -> PathBuf {
    choose(given, std::env::var_os(CHROMIUM_ENV))
}

fn choose(given: Option<&Path>, from_env: Option<std::ffi::OsString>) -> PathBuf {
    match given {
        Some(path) => path.to_owned(),
        None => from_env.filter(|value| !value.is_empty()).map_or_else(|| DEFAULT_CHROMIUM.into(), PathBuf::from),
    }
}

/// [`resolve`], refusing a path where there is no Chromium with what to do about it.
pub fn find(given: Option<&Path>) -> Result<PathBuf> {
    let chromium = resolve(given);
    if !chromium.is_file() {
        bail!(
            "Chromium is not at {}: install it (Debian: apt-get install chromium), or name another with \
             --chromium PATH or {CHROMIUM_ENV}",
            chromium.display()
        );
    }
    Ok(chromium)
}

/// The flags every TRACE Chromium starts with, as command-line arguments: the offline flags, and
/// `--no-sandbox` as root. For launchers other than this module's (Playwright in the replay benchmark),
/// so that both sides of a comparison run the same browser the same way.
pub fn command_line_flags() -> Vec<String> {
    let mut flags: Vec<String> = OFFLINE_FLAGS.iter().map(|flag| format!("--{flag}")).collect();
    flags.push(format!("--disable-features={}", BACKGROUND_FEATURES.join(",")));
    if running_as_root() {
        flags.push("--no-sandbox".to_owned());
    }
    flags
}

/// Launches Chromium as `launch` says.
pub async fn launch(launch: &Launch) -> Result<Chromium> {
    let chromium = find(launch.chromium.as_deref())?;
    let (profile, user_data_dir) = match &launch.user_data_dir {
        Some(dir) => (None, dir.clone()),
        None => {
            let profile = tempfile::tempdir().context("cannot create a browser profile directory")?;
            let dir = profile.path().to_owned();
            (Some(profile), dir)
        }
    };
    let preferences = user_data_dir.join("Default/Preferences");
    if !preferences.exists() {
        std::fs::create_dir_all(user_data_dir.join("Default"))
            .and_then(|()| std::fs::write(&preferences, PROFILE_PREFERENCES))
            .with_context(|| format!("cannot write {}", preferences.display()))?;
    }
    let mut config = BrowserConfig::builder()
        .chrome_executable(&chromium)
        .user_data_dir(&user_data_dir)
        // chromiumoxide adds the leading dashes of every flag.
        .args(OFFLINE_FLAGS.iter().copied())
        .launch_timeout(Duration::from_secs(30))
        // Messages chromiumoxide cannot parse come to the handler below, to be counted, rather than being
        // logged one by one.
        .surface_invalid_messages();
    config = if launch.headless { config.new_headless_mode() } else { config.with_head() };
    if let Some(extension) = &launch.extension {
        let extension = extension
            .canonicalize()
            .with_context(|| format!("no extension at {}", extension.display()))?
            .display()
            .to_string();
        config = config.extension(extension.clone()).arg(("disable-extensions-except", extension.as_str()));
    }
    for (name, value) in &launch.env {
        config = config.env(name, value);
    }
    for (flag, value) in &launch.args {
        config = match value {
            Some(value) => config.arg((flag.as_str(), value.as_str())),
            None => config.arg(flag.as_str()),
        };
    }
    let features: Vec<&str> =
        BACKGROUND_FEATURES.iter().copied().chain(launch.disabled_features.iter().map(String::as_str)).collect();
    config = config.arg(("disable-features", features.join(",").as_str()));
    if let Some(port) = launch.port {
        config = config.port(port);
    }
    if let Some(viewport) = launch.viewport {
        config =
            config.window_size(viewport.width, viewport.height).viewport(chromiumoxide::handler::viewport::Viewport {
                width: viewport.width,
                height: viewport.height,
                device_scale_factor: Some(viewport.device_scale_factor),
                ..Default::default()
            });
    }
    if running_as_root() {
        config = config.no_sandbox();
    }
    let config = config.build().map_err(anyhow::Error::msg)?;
    let (browser, mut events) =
        Browser::launch(config).await.with_context(|| format!("cannot start Chromium ({})", chromium.display()))?;
    let closing = Arc::new(AtomicBool::new(false));
    let closed_on_purpose = closing.clone();
    let handler = tokio::spawn(async move {
        let mut unparsed = Unparsed::default();
        while let Some(event) = events.next().await {
            match event {
                Ok(()) => {}
                Err(CdpError::InvalidMessage(message, _)) => unparsed.count(&message),
                // The connection is done: the stream would go on waiting as long as a page handle lives
                // somewhere (a listener's task, an agent's session), and the closing with it.
                Err(error) if closed_on_purpose.load(Ordering::SeqCst) => {
                    tracing::debug!("the closed browser's connection ended: {error}");
                    break;
                }
                Err(error) => tracing::warn!("the connection to Chromium broke: {error}"),
            }
        }
        unparsed.report();
    });
    Ok(Chromium { browser, handler, profile, closing })
}

/// `filter` (a `tracing` directive list, as `TRACE_LOG` gives it) with chromiumoxide's own lines turned
/// off, unless it names chromiumoxide itself: this module reports what of them matters (see above).
pub fn quiet_chromiumoxide(filter: &str) -> String {
    if filter.contains("chromiumoxide") { filter.to_owned() } else { format!("{filter},chromiumoxide=off") }
}

/// Chromium refuses to run as root without `--no-sandbox`.
fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .is_ok_and(|s| s.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0")))
}

/// DevTools messages chromiumoxide could not parse, by method (`response` for a command's answer).
#[derive(Debug, Default)]
struct Unparsed(BTreeMap<String, u64>);

impl Unparsed {
    fn count(&mut self, message: &str) {
        let parsed: Option<serde_json::Value> = serde_json::from_str(message).ok();
        let method = match parsed.as_ref() {
            Some(value) if value.get("id").is_some() => "response".to_owned(),
            Some(value) => value["method"].as_str().unwrap_or("unknown").to_owned(),
            None => "unknown".to_owned(),
        };
        *self.0.entry(method).or_default() += 1;
    }

    fn relied_on(&self) -> bool {
        self.0
            .keys()
            .any(|method| method == "response" || RELIED_ON_DOMAINS.iter().any(|domain| method.starts_with(domain)))
    }

    fn report(&self) {
        if self.0.is_empty() {
            return;
        }
        let total: u64 = self.0.values().sum();
        let methods: Vec<String> = self.0.iter().map(|(method, n)| format!("{method} ×{n}")).collect();
        if self.relied_on() {
            tracing::warn!(
                "chromiumoxide could not parse {total} DevTools messages of this Chromium: {}",
                methods.join(", ")
            );
        } else {
            tracing::debug!(
                "chromiumoxide could not parse {total} DevTools messages of this Chromium: {}",
                methods.join(", ")
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_comes_from_the_argument_then_the_environment_then_debian() {
        let given = Path::new("/opt/chromium/chrome");
        let env = || Some("/elsewhere/chromium".into());
        assert_eq!(choose(Some(given), env()), given);
        assert_eq!(choose(None, env()), Path::new("/elsewhere/chromium"));
        assert_eq!(choose(None, Some("".into())), Path::new(DEFAULT_CHROMIUM));
        assert_eq!(choose(None, None), Path::new(DEFAULT_CHROMIUM));
        let missing = find(Some(Path::new("/nonexistent/chromium"))).unwrap_err().to_string();
        assert!(missing.contains("/nonexistent/chromium") && missing.contains(CHROMIUM_ENV), "{missing}");
    }

    #[test]
    fn unparsed_messages_warn_only_when_trace_relies_on_them() {
        let mut harmless = Unparsed::default();
        harmless.count(r#"{"method":"Network.requestWillBeSentExtraInfo","params":{}}"#);
        harmless.count(r#"{"method":"Network.requestWillBeSentExtraInfo","params":{}}"#);
        assert!(!harmless.relied_on());
        assert_eq!(harmless.0["Network.requestWillBeSentExtraInfo"], 2);
        for message in [r#"{"method":"Fetch.requestPaused","params":{}}"#, r#"{"id":7,"result":{}}"#] {
            let mut unparsed = Unparsed::default();
            unparsed.count(message);
            assert!(unparsed.relied_on(), "{message}");
        }
    }
}
