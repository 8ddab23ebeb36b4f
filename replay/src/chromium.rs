//! The one place TRACE launches Chromium: for replay, and for the end-to-end tests and benchmarks that
//! record with the extension. It owns which Chromium runs (`--chromium`, then `TRACE_CHROMIUM`, then
//! Debian's `/usr/bin/chromium`), the flags that keep it off the network on its own account, `--no-sandbox`
//! only as root, a fresh profile per launch (concurrent launches sharing one fail on its `SingletonLock`),
//! the process itself, started here so that it dies with trace-replay ([`BrowserProcess`]), and the task
//! that drives chromiumoxide's connection.
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
use chromiumoxide::Browser;
use chromiumoxide::error::CdpError;
use chromiumoxide::handler::HandlerConfig;
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
    // The mDNS responder WebRTC starts to name a page's local addresses: it listens on 224.0.0.251:5353.
    "WebRtcHideLocalIpsWithMdns",
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
    /// Unpacked extensions to load, and no others (none: extensions disabled). More than one when a
    /// benchmark compares TRACE's extension with another recorder's in the same browser.
    pub extensions: Vec<PathBuf>,
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

/// A running Chromium: the browser, the task driving its connection, its profile (removed on drop), and
/// its process (killed on drop, unless it exited).
pub struct Chromium {
    pub browser: Browser,
    pub handler: JoinHandle<()>,
    pub profile: Option<tempfile::TempDir>,
    /// Set before closing the browser on purpose: the connection's end is then no news.
    pub closing: Arc<AtomicBool>,
    pub process: BrowserProcess,
}

impl Chromium {
    /// Closes the browser and waits for it to exit.
    pub async fn close(mut self) -> Result<()> {
        self.closing.store(true, Ordering::SeqCst);
        self.browser.close().await?;
        self.process.exited(Duration::from_secs(10)).await;
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

/// The command line of a Chromium that another program launches (BrowserGym's Playwright, which takes no
/// flags of ours): `given` as it is, with each offline flag it lacks ([`command_line_flags`]) added, and
/// the features both turn off in one `--disable-features` (Chromium reads only the last one given).
pub fn offline_arguments(given: &[std::ffi::OsString]) -> Vec<std::ffi::OsString> {
    let name_of = |flag: &str| flag.trim_start_matches('-').split('=').next().unwrap_or_default().to_owned();
    let mut features: Vec<String> = Vec::new();
    let mut arguments: Vec<std::ffi::OsString> = Vec::new();
    let mut named = std::collections::HashSet::new();
    fn add_features(value: &str, features: &mut Vec<String>) {
        for feature in value.split(',').filter(|feature| !feature.is_empty()) {
            if !features.iter().any(|known| known == feature) {
                features.push(feature.to_owned());
            }
        }
    }
    for argument in given {
        match argument.to_str().and_then(|flag| flag.strip_prefix("--disable-features=")) {
            Some(value) => add_features(value, &mut features),
            None => {
                if let Some(flag) = argument.to_str().filter(|flag| flag.starts_with("--")) {
                    named.insert(name_of(flag));
                }
                arguments.push(argument.clone());
            }
        }
    }
    for flag in command_line_flags() {
        match flag.strip_prefix("--disable-features=") {
            Some(value) => add_features(value, &mut features),
            None if !named.contains(&name_of(&flag)) => arguments.push(flag.into()),
            None => {}
        }
    }
    if !features.is_empty() {
        arguments.push(format!("--disable-features={}", features.join(",")).into());
    }
    arguments
}

/// Replaces this process by Chromium (`chromium`, else [`resolve`]d) run with [`offline_arguments`] of
/// `given`, its profile (`--user-data-dir`, when given) seeded with TRACE's preferences if it has none.
/// The file descriptors it was given stay open (Playwright talks to the browser through two of them).
#[cfg(unix)]
pub fn exec_offline(chromium: Option<&Path>, given: &[std::ffi::OsString]) -> Result<std::convert::Infallible> {
    use std::os::unix::process::CommandExt as _;
    let chromium = find(chromium)?;
    let profile = given.iter().rev().find_map(|argument| argument.to_str()?.strip_prefix("--user-data-dir="));
    if let Some(profile) = profile {
        let preferences = Path::new(profile).join("Default/Preferences");
        if !preferences.exists() {
            std::fs::create_dir_all(Path::new(profile).join("Default"))
                .and_then(|()| std::fs::write(&preferences, PROFILE_PREFERENCES))
                .with_context(|| format!("cannot write {}", preferences.display()))?;
        }
    }
    let error = std::process::Command::new(&chromium).args(offline_arguments(given)).exec();
    Err(error).with_context(|| format!("cannot run Chromium ({})", chromium.display()))
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
    let mut flags = Flags::default();
    for flag in CHROMIUMOXIDE_FLAGS.iter().chain(OFFLINE_FLAGS) {
        flags.add_written(flag);
    }
    add_extension_flags(&mut flags, &launch.extensions)?;
    for (flag, value) in &launch.args {
        flags.add(flag, value.as_deref());
    }
    let features: Vec<&str> =
        BACKGROUND_FEATURES.iter().copied().chain(launch.disabled_features.iter().map(String::as_str)).collect();
    flags.add("disable-features", Some(&features.join(",")));
    flags.add("remote-debugging-port", Some(&launch.port.unwrap_or(0).to_string()));
    flags.add("user-data-dir", Some(&user_data_dir.display().to_string()));
    if let Some(viewport) = launch.viewport {
        flags.add("window-size", Some(&format!("{},{}", viewport.width, viewport.height)));
    }
    if running_as_root() {
        flags.add("no-sandbox", None);
        flags.add("disable-setuid-sandbox", None);
    }
    if launch.headless {
        flags.add("headless", Some("new"));
        flags.add("hide-scrollbars", None);
        flags.add("mute-audio", None);
    }
    let mut command = std::process::Command::new(&chromium);
    command
        .args(flags.command_line())
        // The first tab opens blank, as Playwright's does: the new tab page would load the default search
        // engine's start page (Debian's: DuckDuckGo's), which is no page of the task's.
        .arg("about:blank")
        .envs(launch.env.iter().map(|(name, value)| (name.as_str(), value.as_str())))
        // What Chromium detaches (its crash handler) is its own, not an agent's orphan.
        .env(crate::processes::EPISODE_ENV, crate::processes::BROWSER_MARK)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let (process, devtools) =
        BrowserProcess::start(command).with_context(|| format!("cannot start Chromium ({})", chromium.display()))?;
    let websocket = match tokio::time::timeout(LAUNCH_TIMEOUT, devtools).await {
        Ok(Ok(Ok(websocket))) => websocket,
        Ok(Ok(Err(output))) => {
            bail!("Chromium ({}) exited before it was ready; what it said:\n{}", chromium.display(), output.trim_end())
        }
        Ok(Err(_)) => bail!("Chromium ({}) exited before it was ready", chromium.display()),
        Err(_) => bail!(
            "Chromium ({}) did not open its DevTools port within {LAUNCH_TIMEOUT:?}: is it a Chromium, and does \
             it start by hand?",
            chromium.display()
        ),
    };
    let handler_config = HandlerConfig {
        // Messages chromiumoxide cannot parse come to the handler below, to be counted, rather than being
        // logged one by one.
        ignore_invalid_messages: false,
        viewport: Some(launch.viewport.map_or_else(Default::default, |viewport| {
            chromiumoxide::handler::viewport::Viewport {
                width: viewport.width,
                height: viewport.height,
                device_scale_factor: Some(viewport.device_scale_factor),
                ..Default::default()
            }
        })),
        ..HandlerConfig::default()
    };
    let (browser, mut events) = Browser::connect_with_config(websocket, handler_config)
        .await
        .with_context(|| format!("cannot connect to Chromium ({})", chromium.display()))?;
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
    Ok(Chromium { browser, handler, profile, closing, process })
}

/// How long Chromium may take to open its DevTools port.
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(30);

/// How much of what Chromium prints before it is ready is kept, to say why it did not start.
const STARTUP_OUTPUT_BYTES: usize = 64 << 10;

/// The flags chromiumoxide starts Chromium with (Puppeteer's), kept now that Chromium is started here so
/// that it runs as it did: no throttling of background tabs and timers, no hang monitor, no pop-up
/// blocking, sRGB colours, English.
const CHROMIUMOXIDE_FLAGS: &[&str] = &[
    "disable-background-networking",
    "enable-features=NetworkService,NetworkServiceInProcess",
    "disable-background-timer-throttling",
    "disable-backgrounding-occluded-windows",
    "disable-breakpad",
    "disable-client-side-phishing-detection",
    "disable-component-extensions-with-background-pages",
    "disable-default-apps",
    "disable-dev-shm-usage",
    "disable-features=TranslateUI",
    "disable-hang-monitor",
    "disable-ipc-flooding-protection",
    "disable-popup-blocking",
    "disable-prompt-on-repost",
    "disable-renderer-backgrounding",
    "disable-sync",
    "force-color-profile=srgb",
    "metrics-recording-only",
    "no-first-run",
    "enable-automation",
    "password-store=basic",
    "use-mock-keychain",
    "enable-blink-features=IdleDetection",
    "lang=en_US",
];

/// `--load-extension` and `--disable-extensions-except` naming every extension, comma-separated (each flag
/// is read once), or `--disable-extensions` when there is none.
fn add_extension_flags(flags: &mut Flags, extensions: &[PathBuf]) -> Result<()> {
    if extensions.is_empty() {
        flags.add("disable-extensions", None);
        return Ok(());
    }
    for extension in extensions {
        let extension = extension
            .canonicalize()
            .with_context(|| format!("no extension at {}", extension.display()))?
            .display()
            .to_string();
        flags.add("load-extension", Some(&extension));
        flags.add("disable-extensions-except", Some(&extension));
    }
    Ok(())
}

/// Chromium's command line, one flag each: Chromium reads the last of a repeated flag, so a flag given
/// twice has its values joined (two `--disable-features` lists become one).
#[derive(Debug, Default)]
struct Flags(Vec<(String, Vec<String>)>);

impl Flags {
    fn add(&mut self, name: &str, value: Option<&str>) {
        let values = match self.0.iter_mut().find(|(known, _)| known == name) {
            Some((_, values)) => values,
            None => {
                self.0.push((name.to_owned(), Vec::new()));
                &mut self.0.last_mut().expect("just pushed").1
            }
        };
        if let Some(value) = value
            && !values.iter().any(|known| known == value)
        {
            values.push(value.to_owned());
        }
    }

    /// A flag as written in the lists above: `name` or `name=value`.
    fn add_written(&mut self, flag: &str) {
        match flag.split_once('=') {
            Some((name, value)) => self.add(name, Some(value)),
            None => self.add(flag, None),
        }
    }

    fn command_line(&self) -> Vec<String> {
        self.0
            .iter()
            .map(
                |(name, values)| {
                    if values.is_empty() { format!("--{name}") } else { format!("--{name}={}", values.join(",")) }
                },
            )
            .collect()
    }
}

/// The Chromium process, started here rather than by chromiumoxide so that it dies with trace-replay: on
/// Linux it is started with `PR_SET_PDEATHSIG` (`SIGKILL`), which the kernel sends when trace-replay is
/// killed, even by `SIGKILL`, when nothing else could close the browser.
///
/// The kernel sends it when the *thread* that started the process ends, not the process. Tokio's threads
/// come and go, so each Chromium is started by a thread of its own, which waits for it and ends with it.
/// Dropped before the process exited (an episode given up), the process is killed, as chromiumoxide's
/// `kill_on_drop` did.
pub struct BrowserProcess {
    id: u32,
    /// The process as a file descriptor (Linux 5.3 and later), so that a signal never reaches another
    /// process given the same id once this one is gone.
    #[cfg(target_os = "linux")]
    handle: Option<std::os::fd::OwnedFd>,
    exited: tokio::sync::watch::Receiver<bool>,
}

type DevtoolsUrl = tokio::sync::oneshot::Receiver<Result<String, String>>;

impl BrowserProcess {
    /// Starts `command` from a thread of its own, and returns the process with what will be its DevTools
    /// WebSocket URL (or what it printed, when it exits before saying one).
    fn start(mut command: std::process::Command) -> Result<(BrowserProcess, DevtoolsUrl)> {
        die_with_this_thread(&mut command);
        let (started_sender, started) = std::sync::mpsc::channel();
        let (exited_sender, exited) = tokio::sync::watch::channel(false);
        std::thread::Builder::new()
            .name("chromium".to_owned())
            .spawn(move || {
                let spawned = crate::processes::spawn_known(|| command.spawn(), |child| Some(child.id()));
                let mut child = match spawned {
                    Ok(child) => child,
                    Err(error) => {
                        let _ = started_sender.send(Err(error));
                        return;
                    }
                };
                let id = child.id();
                let stderr = child.stderr.take();
                let _ = started_sender.send(Ok((id, stderr)));
                let _ = child.wait();
                crate::processes::forget(id);
                let _ = exited_sender.send(true);
            })
            .context("cannot start a thread to run Chromium")?;
        let (id, stderr) = started.recv().context("the thread starting Chromium ended")??;
        let process = BrowserProcess {
            id,
            #[cfg(target_os = "linux")]
            handle: rustix::process::Pid::from_raw(id as i32)
                .and_then(|pid| rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()),
            exited,
        };
        let (url_sender, url) = tokio::sync::oneshot::channel();
        if let Some(stderr) = stderr {
            std::thread::Builder::new()
                .name("chromium-output".to_owned())
                .spawn(move || read_devtools_url(stderr, url_sender))
                .context("cannot start a thread to read Chromium's output")?;
        }
        Ok((process, url))
    }

    /// The process's id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Waits, up to `within`, for the process to exit; whether it did.
    pub async fn exited(&mut self, within: Duration) -> bool {
        tokio::time::timeout(within, self.exited.wait_for(|exited| *exited)).await.is_ok_and(|waited| waited.is_ok())
    }

    fn kill(&self) {
        if *self.exited.borrow() {
            return;
        }
        #[cfg(target_os = "linux")]
        if let Some(handle) = &self.handle {
            let _ = rustix::process::pidfd_send_signal(handle, rustix::process::Signal::KILL);
            return;
        }
        if let Some(pid) = rustix::process::Pid::from_raw(self.id as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}

impl Drop for BrowserProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Reads Chromium's standard error until it names its DevTools WebSocket, sends the URL, then goes on
/// reading (and dropping) the rest, so that Chromium never blocks on a full pipe.
fn read_devtools_url(stderr: std::process::ChildStderr, url: tokio::sync::oneshot::Sender<Result<String, String>>) {
    use std::io::BufRead as _;
    let mut reader = std::io::BufReader::new(stderr);
    let mut said = String::new();
    let mut line = Vec::new();
    let mut url = Some(url);
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if url.is_none() {
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        if let Some((_, websocket)) = text.rsplit_once("listening on ")
            && websocket.starts_with("ws")
            && websocket.contains("devtools/browser")
        {
            let _ = url.take().expect("checked above").send(Ok(websocket.trim().to_owned()));
        } else if said.len() < STARTUP_OUTPUT_BYTES {
            said.push_str(&text);
        }
    }
    if let Some(url) = url {
        let _ = url.send(Err(said));
    }
}

/// Makes `command`'s process receive `SIGKILL` when the thread that starts it ends (Linux; elsewhere
/// nothing), and not start at all when trace-replay is already gone.
fn die_with_this_thread(command: &mut std::process::Command) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt as _;
        let parent = rustix::process::getpid();
        // SAFETY: the closure runs in the child between `fork` and `exec`, where only async-signal-safe
        // calls may be made: it makes two system calls and allocates nothing (its errors are OS codes).
        #[allow(unsafe_code)]
        unsafe {
            command.pre_exec(move || {
                rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
                // The parent died before the request was made: nobody would send the signal.
                if rustix::process::getppid() != Some(parent) {
                    return Err(std::io::Error::from_raw_os_error(rustix::io::Errno::SRCH.raw_os_error()));
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = command;
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

    /// Issue #45: BrowserGym's browser, launched by Playwright with flags of its own, lacked the offline
    /// flags (WebRTC sent STUN packets past the proxy; an mDNS socket was held). They are added to what
    /// Playwright gives, a flag it gave itself left as it is, and every feature to turn off in the one
    /// `--disable-features` Chromium reads.
    #[test]
    fn a_harness_command_line_gets_the_offline_flags_and_one_list_of_features() {
        let given: Vec<std::ffi::OsString> = [
            "--disable-background-networking",
            "--disable-features=ImprovedCookieControls,LazyFrameLoading",
            "--remote-debugging-pipe",
            "--proxy-server=http://127.0.0.1:4000",
            "--disable-features=OverlayScrollbars",
            "--user-data-dir=/tmp/profile",
            "about:blank",
        ]
        .iter()
        .map(Into::into)
        .collect();
        let arguments: Vec<String> =
            offline_arguments(&given).into_iter().map(|argument| argument.into_string().unwrap()).collect();
        let count = |name: &str| arguments.iter().filter(|argument| argument.starts_with(name)).count();
        assert_eq!(count("--disable-background-networking"), 1);
        assert_eq!(count("--disable-features="), 1);
        assert_eq!(count("--force-webrtc-ip-handling-policy=disable_non_proxied_udp"), 1);
        assert_eq!(count("--disable-quic"), 1);
        let features = arguments.iter().find_map(|argument| argument.strip_prefix("--disable-features=")).unwrap();
        for feature in ["ImprovedCookieControls", "OverlayScrollbars", "WebRtcHideLocalIpsWithMdns", "MediaRouter"] {
            assert!(features.split(',').any(|known| known == feature), "{feature} in {features}");
        }
        let first =
            ["--disable-background-networking", "--remote-debugging-pipe", "--proxy-server=http://127.0.0.1:4000"];
        assert_eq!(&arguments[..3], first, "what Playwright gave comes first, in its order");
    }

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
    fn a_flag_given_twice_is_given_once_with_the_values_of_both() {
        let mut flags = Flags::default();
        for flag in ["disable-features=TranslateUI", "no-first-run", "password-store=basic"] {
            flags.add_written(flag);
        }
        flags.add("disable-features", Some("Translate,MediaRouter"));
        flags.add("no-first-run", None);
        flags.add("password-store", Some("basic"));
        assert_eq!(
            flags.command_line(),
            ["--disable-features=TranslateUI,Translate,MediaRouter", "--no-first-run", "--password-store=basic"]
        );
    }

    #[test]
    fn every_extension_is_loaded_and_only_those() {
        let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (first_path, second_path) = (
            first.path().canonicalize().unwrap().display().to_string(),
            second.path().canonicalize().unwrap().display().to_string(),
        );
        let mut flags = Flags::default();
        add_extension_flags(&mut flags, &[first.path().to_owned(), second.path().to_owned()]).unwrap();
        assert_eq!(
            flags.command_line(),
            [
                format!("--load-extension={first_path},{second_path}"),
                format!("--disable-extensions-except={first_path},{second_path}")
            ]
        );
        let mut none = Flags::default();
        add_extension_flags(&mut none, &[]).unwrap();
        assert_eq!(none.command_line(), ["--disable-extensions"]);
        let missing = add_extension_flags(&mut Flags::default(), &[PathBuf::from("/nonexistent/extension")]);
        assert!(missing.unwrap_err().to_string().contains("/nonexistent/extension"));
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
