//! A crate's documentation made by rustdoc (`cargo doc`, from the toolchain that builds TRACE) and served as
//! static files by Python's own HTTP server, as documentation is hosted. A page that loads code when a field
//! gets the focus: the search box is hidden until the Search button opens it, and only then does the page
//! load its search code and the crate's index, as scripts; the index's shards for a query load as it is
//! typed, the results are drawn by script, and the URL gains `?search=` through the history API, with no
//! document request. Typing before the code has arrived runs no search.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};

use super::person::{pause, type_keys};
use super::{Server, run};
use crate::browser::{Build, RecordingBrowser, click, click_and_wait, settle, wait_for_text};
use crate::demo::{start_task, stop_task};

pub const DESCRIPTION: &str = "Find how long a trimmed lantern wick burns";
/// The crate documented.
pub const CRATE: &str = "lantern";
/// What the demonstration types into the search box.
pub const QUERY: &str = "wick";
/// The item the demonstration opens among the results, whose page is `fn.trim_wick.html`.
pub const ITEM: &str = "trim_wick";
/// What the item's page says, which the re-run must show.
pub const ANSWER: &str = "burns six hours on one filling";

const WAIT: Duration = Duration::from_secs(20);

/// The crate: a few documented items, two of which the query finds by name.
const CARGO_TOML: &str = "[package]\nname = \"lantern\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
                          # A workspace of its own, whatever directory holds it.\n[workspace]\n";
const LIB_RS: &str = r#"//! Lantern: the parts of a lantern and how to keep it burning.

/// The wick of a lantern.
pub struct Wick {
    /// Its length in millimetres.
    pub length_mm: u32,
}

/// Trims the wick so that it burns evenly. A wick trimmed to 5 mm burns six hours on one filling.
pub fn trim_wick(wick: &mut Wick) {
    wick.length_mm = 5;
}

/// How many hours a filling lasts with this wick.
pub fn burn_hours(wick: &Wick) -> u32 {
    if wick.length_mm <= 5 { 6 } else { 4 }
}
"#;

/// A running documentation site.
pub struct RustdocSearch {
    pub server: Server,
}

impl RustdocSearch {
    /// Writes the crate into a temporary directory, documents it with `cargo doc --no-deps --offline`, and
    /// serves the documentation with `python3 -m http.server`.
    pub fn start() -> Result<RustdocSearch> {
        let dir = tempfile::tempdir()?;
        let crate_dir = dir.path().join(CRATE);
        std::fs::create_dir_all(crate_dir.join("src"))?;
        std::fs::write(crate_dir.join("Cargo.toml"), CARGO_TOML)?;
        std::fs::write(crate_dir.join("src/lib.rs"), LIB_RS)?;
        // The cargo that runs the tests, when one does (it says where it is); its own target directory.
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        run(Command::new(cargo)
            .args(["doc", "--no-deps", "--offline", "--quiet"])
            .current_dir(&crate_dir)
            .env("CARGO_TARGET_DIR", crate_dir.join("target")))
        .context("cargo doc failed")?;
        let html = crate_dir.join("target/doc");
        let server = Server::static_files("python3", &html, dir)?;
        Ok(RustdocSearch { server })
    }

    /// The crate's front page.
    pub fn front_page(&self) -> String {
        self.server.url(&format!("/{CRATE}/index.html"))
    }

    /// Records the demonstration: the crate's front page, the Search button clicked (the page starts loading
    /// its search code), a pause of a person finding the keys, the query typed a key at a time, the
    /// results read, the item opened, and its documentation shown. Returns the finished bundle.
    pub async fn record(&self, build: &Build, data_dir: &Path) -> Result<PathBuf> {
        let browser = RecordingBrowser::launch(build, data_dir, true).await?;
        let (popup, page) = start_task(&browser, DESCRIPTION, &self.front_page()).await?;
        wait_for_text(&page, "#main-content", WAIT, |text| text.contains("Lantern")).await?;
        settle().await;
        click(&page, "#search-button").await?;
        pause(1500).await;
        type_keys(&page, QUERY).await?;
        let results = "#search .search-results.active";
        wait_for_text(&page, results, WAIT, |text| text.contains(ITEM)).await?;
        pause(1200).await;
        click_and_wait(&page, &format!("{results} a[href$='fn.{ITEM}.html']")).await?;
        wait_for_text(&page, "#main-content", WAIT, |text| text.contains(ANSWER)).await?;
        settle().await;
        stop_task(&popup, browser, data_dir).await
    }
}
