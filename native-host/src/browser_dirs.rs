//! Where Chrome and Chromium keep a user's data on each operating system: the user data directory, which
//! holds the profiles (`Default/`, `Profile 1/`) and the `NativeMessagingHosts/` folder the browser looks
//! in for native messaging hosts. [`crate::install`] writes the host's manifest there, and
//! [`crate::journeys`] reads a profile's browsing history from there: one place knows the folders, so that
//! the two agree on every system.

use std::path::PathBuf;

/// The profile a browser opens when not told another.
pub const DEFAULT_PROFILE: &str = "Default";

/// The folder of a user data directory where the browser looks for native messaging hosts' manifests.
pub const NATIVE_MESSAGING_HOSTS_DIR: &str = "NativeMessagingHosts";

/// The browsers whose folders TRACE knows: Google Chrome and Chromium keep theirs apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChromeVariant {
    Chrome,
    Chromium,
}

impl ChromeVariant {
    /// Both, Chrome first (a default profile is looked for in this order).
    pub const ALL: [ChromeVariant; 2] = [ChromeVariant::Chrome, ChromeVariant::Chromium];

    /// The browser's name as `trace-host install` reports it.
    pub fn name(self) -> &'static str {
        match self {
            ChromeVariant::Chrome => "chrome",
            ChromeVariant::Chromium => "chromium",
        }
    }

    /// This user's data directory for the browser (whether or not it exists): under the user's
    /// configuration folder on Linux (`google-chrome`, `chromium`) and macOS (`Library/Application
    /// Support/Google/Chrome`, `…/Chromium`), and under the local application data on Windows
    /// (`Google\Chrome\User Data`). `None` when the system does not say where those folders are.
    pub fn user_data_dir(self) -> Option<PathBuf> {
        if cfg!(windows) {
            let local = dirs::data_local_dir()?;
            return Some(match self {
                ChromeVariant::Chrome => local.join("Google").join("Chrome").join("User Data"),
                ChromeVariant::Chromium => local.join("Chromium").join("User Data"),
            });
        }
        let config = dirs::config_dir()?;
        Some(match (self, cfg!(target_os = "macos")) {
            (ChromeVariant::Chrome, true) => config.join("Google").join("Chrome"),
            (ChromeVariant::Chromium, true) => config.join("Chromium"),
            (ChromeVariant::Chrome, false) => config.join("google-chrome"),
            (ChromeVariant::Chromium, false) => config.join("chromium"),
        })
    }
}
