//! Datasette (PyPI `datasette`), serving a small SQLite database of its own making. A real application with
//! a code editor: its SQL box is CodeMirror 5, which reads the keys from a hidden textarea it empties after
//! every one (a textarea proxy), so the text typed is only ever in the editor's own rendering; running the
//! query is a form submitted by GET, and the results are a table the page shows.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Result;

use super::{Server, free_port, run};
use crate::browser::{Build, RecordingBrowser, click, click_and_wait, control_key, settle, wait_for_text};
use crate::demo::{start_task, stop_task};

pub const DESCRIPTION: &str = "Find the mugs that are in stock";
/// The query the demonstration types.
pub const QUERY: &str = "select name, price from products where stock > 0 and name like '%mug%'";

const WAIT: Duration = Duration::from_secs(20);

/// A running Datasette.
pub struct Datasette {
    pub server: Server,
}

impl Datasette {
    /// Writes the database (`shop.db`, a table of products) and serves it.
    pub fn start(python: &Path) -> Result<Datasette> {
        let dir = tempfile::tempdir()?;
        let database = dir.path().join("shop.db");
        let script = "import sqlite3, sys\n\
            db = sqlite3.connect(sys.argv[1])\n\
            db.execute('create table products (id integer primary key, name text, price real, stock integer)')\n\
            db.executemany('insert into products (name, price, stock) values (?, ?, ?)', [\n\
              ('Blue mug', 12.5, 40), ('Red mug', 11.0, 0), ('Teapot', 30.0, 5), ('Green mug', 12.5, 12)])\n\
            db.commit()\n";
        run(Command::new(python).arg("-c").arg(script).arg(&database))?;
        let port = free_port()?;
        let server = Server::start(
            Command::new(python)
                .args(["-m", "datasette", "serve", "--host", "127.0.0.1", "--port", &port.to_string()])
                .arg(&database),
            port,
            dir,
        )?;
        Ok(Datasette { server })
    }

    /// Records the demonstration: the database's page, the query typed into the SQL editor over its
    /// example text (selected with Control+A), Run SQL, and the results. Returns the finished bundle.
    pub async fn record(&self, build: &Build, data_dir: &Path) -> Result<PathBuf> {
        let browser = RecordingBrowser::launch(build, data_dir, true).await?;
        let (popup, page) = start_task(&browser, DESCRIPTION, &self.server.url("/shop")).await?;
        wait_for_text(&page, ".CodeMirror", WAIT, |text| text.contains("select")).await?;
        click(&page, ".CodeMirror-lines").await?;
        control_key(&page, "a").await?;
        page.find_element(".CodeMirror textarea").await?.type_str(QUERY).await?;
        settle().await;
        click_and_wait(&page, "input[type=submit][value='Run SQL']").await?;
        wait_for_text(&page, "table.rows-and-columns", WAIT, |text| text.contains("Green mug")).await?;
        settle().await;
        stop_task(&popup, browser, data_dir).await
    }
}
