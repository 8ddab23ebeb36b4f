//! A site of the seed paper's size, generated, and a person's walk through it: the recordings the paper
//! reports hold 715–2,752 requests, 12–46 DOM snapshots and 64–154 MB each, where the demo shop's is a few
//! hundred kilobytes. The scale benchmark records this walk through the extension and the host and follows
//! it through every stage (processing and the audit, export, replay, the viewer).
//!
//! The site is a field guide of [`Shape::pages`] parts, written into a temporary directory and served as
//! static files by Python's own HTTP server, as a documentation site is hosted. Each part loads what a
//! modern page loads: a shared stylesheet and script, styles and scripts of its own, a gallery of small
//! images, one large photograph (a bitmap of noise, which no compression shrinks, as photographs are not
//! shrunk), and its data by script (`fetch` of JSON documents, and on some parts a large binary file), drawn
//! into the page once they arrive. One part has a box that filters its list as a person types. The walk
//! reads each part, types into that box, and follows "Next" to the last part: [`Shape::pages`] − 1 clicks
//! and one typed text, each a step of the recorded task.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use chromiumoxide::Page;

use crate::apps::Server;
use crate::apps::person::{pause, type_keys};
use crate::browser::{Build, RecordingBrowser, click, loaded_in, wait_for_text};
use crate::demo::{start_task, stop_recording, stopped_bundle_within};

pub const DESCRIPTION: &str = "Read the field guide to its last part";
/// What the last part says, which the walk waits for.
pub const LAST_WORDS: &str = "You have read the whole guide";
/// The part whose list the walk filters, and what it types.
const FILTERED_PART: usize = 15;
const FILTER_TEXT: &str = "heron";
const WAIT: Duration = Duration::from_secs(60);

/// How large the generated site is.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub pages: usize,
    /// Per part: its own stylesheets, scripts, gallery images and JSON documents.
    pub styles: usize,
    pub scripts: usize,
    pub images: usize,
    pub documents: usize,
    /// The photograph each part shows, in bytes (about; a bitmap's rows are whole).
    pub photo_bytes: usize,
    /// The binary file every [`Shape::blob_every`]-th part fetches, in bytes.
    pub blob_bytes: usize,
    pub blob_every: usize,
}

impl Shape {
    /// The paper's largest task: about 3,000 requests and 150 MB over 30 parts.
    pub const PAPER: Shape = Shape {
        pages: 30,
        styles: 9,
        scripts: 19,
        images: 57,
        documents: 10,
        photo_bytes: 3 << 20,
        blob_bytes: 4 << 20,
        blob_every: 3,
    };

    /// The requests a walk through every part makes: each part's document and what it loads, and the
    /// shared stylesheet and script once.
    pub fn requests(&self) -> usize {
        let per_part = 1 + self.styles + self.scripts + self.images + 1 + self.documents;
        self.pages * per_part + self.pages.div_ceil(self.blob_every) + 2
    }
}

/// The generated site, served on 127.0.0.1 until dropped.
pub struct PaperSizeSite {
    pub server: Server,
    pub shape: Shape,
    /// The bytes of every file the site serves.
    pub bytes: u64,
}

impl PaperSizeSite {
    /// Writes the site of `shape` into a temporary directory and serves it with `python3 -m http.server`.
    pub fn start(shape: Shape) -> Result<PaperSizeSite> {
        ensure!(shape.pages > FILTERED_PART, "the guide needs more than {FILTERED_PART} parts");
        let dir = tempfile::tempdir()?;
        let site = dir.path().join("site");
        let bytes = write_site(&site, shape)?;
        let server = Server::static_files("python3", &site, dir)?;
        Ok(PaperSizeSite { server, shape, bytes })
    }

    /// The URL of part `part` (counted from 1).
    pub fn part_url(&self, part: usize) -> String {
        self.server.url(&format!("/part/{part}.html"))
    }

    /// Walks the guide in a tab that nothing records (the extension loaded, no task started), and
    /// returns each part's load time in milliseconds (navigation start to the load event's end).
    pub async fn walk_unrecorded(&self, build: &Build, data_dir: &Path) -> Result<Vec<f64>> {
        let browser = RecordingBrowser::launch(build, data_dir, false).await?;
        let page = browser.browser().new_page(self.part_url(1)).await?;
        let loads = self.walk(&page).await;
        browser.close().await?;
        loads
    }

    /// Records the walk through the extension and the host; returns the finished bundle and each part's load
    /// time in milliseconds.
    pub async fn record(&self, build: &Build, data_dir: &Path) -> Result<Recorded> {
        let browser = RecordingBrowser::launch(build, data_dir, true).await?;
        let (popup, page) = start_task(&browser, DESCRIPTION, &self.part_url(1)).await?;
        let loads = self.walk(&page).await?;
        pause(1500).await;
        stop_recording(&popup).await?;
        browser.close().await?;
        let bundle = stopped_bundle_within(data_dir, WAIT).await?;
        Ok(Recorded { bundle, loads })
    }

    /// Reads each part as a person does, from the first (already open in `page`) to the last.
    async fn walk(&self, page: &Page) -> Result<Vec<f64>> {
        let mut loads = Vec::with_capacity(self.shape.pages);
        for part in 1..=self.shape.pages {
            wait_for_text(page, "#status", WAIT, |text| text.trim() == "ready")
                .await
                .with_context(|| format!("part {part} did not load its data"))?;
            loads.push(loaded_in(page, &self.part_url(part), WAIT).await?);
            pause(700).await;
            if part == FILTERED_PART {
                click(page, "#filter").await?;
                pause(300).await;
                type_keys(page, FILTER_TEXT).await?;
                wait_for_text(page, "#shown", WAIT, |text| text.starts_with("1 "))
                    .await
                    .context("the filter did not narrow the list")?;
                pause(700).await;
            }
            if part < self.shape.pages {
                click(page, "#next").await?;
                crate::demo::wait_for_url(page, &format!("/part/{}.html", part + 1)).await?;
            }
        }
        wait_for_text(page, "#end", WAIT, |text| text.contains(LAST_WORDS)).await?;
        Ok(loads)
    }
}

/// A recorded walk.
pub struct Recorded {
    pub bundle: PathBuf,
    /// Each part's load time in milliseconds.
    pub loads: Vec<f64>,
}

/// Writes every file of the site under `root`; returns their bytes.
fn write_site(root: &Path, shape: Shape) -> Result<u64> {
    let mut noise = Noise(0x9e37_79b9_7f4a_7c15);
    let mut total = 0u64;
    let mut write = |path: &str, bytes: &[u8]| -> Result<()> {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().context("a file has a folder")?)?;
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
        total += bytes.len() as u64;
        Ok(())
    };
    write("shared/guide.css", stylesheet(0, 0).as_bytes())?;
    write("shared/guide.js", SHARED_SCRIPT.as_bytes())?;
    for part in 1..=shape.pages {
        write(&format!("part/{part}.html"), page(part, shape).as_bytes())?;
        for index in 0..shape.styles {
            write(&format!("css/{part}-{index}.css"), stylesheet(part, index).as_bytes())?;
        }
        for index in 0..shape.scripts {
            write(&format!("js/{part}-{index}.js"), script(part, index).as_bytes())?;
        }
        for index in 0..shape.images {
            write(&format!("img/{part}-{index}.svg"), icon(part, index).as_bytes())?;
        }
        for index in 0..shape.documents {
            write(&format!("data/{part}-{index}.json"), document(part, index).as_bytes())?;
        }
        write(&format!("photo/{part}.bmp"), &bitmap(shape.photo_bytes, &mut noise))?;
        if has_blob(part, shape) {
            write(&format!("blob/{part}.bin"), &noise.bytes(shape.blob_bytes))?;
        }
    }
    Ok(total)
}

fn has_blob(part: usize, shape: Shape) -> bool {
    part % shape.blob_every == 1 % shape.blob_every
}

/// What every part runs first: it counts the data as it arrives and says `ready` when all has.
const SHARED_SCRIPT: &str = "window.guide = { parts: [], loaded: 0 };\n";

/// The species the parts' lists name. The filtered part's list holds one heron besides, the only one.
const BIRDS: &[&str] = &["wren", "finch", "plover", "egret", "swift", "lark", "gannet", "tern", "rail", "kite"];

fn page(part: usize, shape: Shape) -> String {
    let mut html = String::new();
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Field guide, part {part}</title>\n\
         <link rel=\"stylesheet\" href=\"/shared/guide.css\">\n<script src=\"/shared/guide.js\"></script>\n"
    );
    for index in 0..shape.styles {
        let _ = writeln!(html, "<link rel=\"stylesheet\" href=\"/css/{part}-{index}.css\">");
    }
    for index in 0..shape.scripts {
        let _ = writeln!(html, "<script src=\"/js/{part}-{index}.js\"></script>");
    }
    let _ = write!(
        html,
        "</head><body>\n<h1>Part {part} of {pages}</h1>\n<p id=\"status\">loading</p>\n\
         <p>{lead}</p>\n<div id=\"gallery\">",
        pages = shape.pages,
        lead = sentence(part, 0, 60)
    );
    for index in 0..shape.images {
        let _ = write!(html, "<img src=\"/img/{part}-{index}.svg\" width=\"48\" height=\"48\" alt=\"icon {index}\">");
    }
    let _ = write!(
        html,
        "</div>\n<img id=\"photo\" src=\"/photo/{part}.bmp\" width=\"480\" height=\"360\" alt=\"photo\">\n"
    );
    if part == FILTERED_PART {
        html.push_str(
            "<p><label>Filter <input id=\"filter\" autocomplete=\"off\"></label> <span id=\"shown\"></span></p>\n",
        );
    }
    html.push_str("<ul id=\"entries\"></ul>\n");
    if part < shape.pages {
        let _ = writeln!(html, "<p><a id=\"next\" href=\"/part/{}.html\">Next: part {}</a></p>", part + 1, part + 1);
    } else {
        let _ = writeln!(html, "<p id=\"end\">{LAST_WORDS}.</p>");
    }
    let documents: Vec<String> = (0..shape.documents).map(|index| format!("'/data/{part}-{index}.json'")).collect();
    let blob = if has_blob(part, shape) { format!("'/blob/{part}.bin'") } else { "null".to_owned() };
    let _ = write!(
        html,
        "<script>\n\
         // The part's data, fetched as a single-page application fetches its API, drawn once all has come.\n\
         const documents = [{documents}];\n\
         const blob = {blob};\n\
         Promise.all([\n\
           ...documents.map((url) => fetch(url).then((response) => response.json())),\n\
           blob ? fetch(blob).then((response) => response.arrayBuffer()) : Promise.resolve(null),\n\
         ]).then((loaded) => {{\n\
           const list = document.getElementById('entries');\n\
           for (const data of loaded.slice(0, documents.length)) {{\n\
             for (const entry of data.entries) {{\n\
               const item = document.createElement('li');\n\
               item.textContent = entry.name + ': ' + entry.note;\n\
               list.append(item);\n\
             }}\n\
           }}\n\
           const bytes = loaded[documents.length];\n\
           if (bytes) list.insertAdjacentHTML('beforebegin', '<p>Its song: ' + bytes.byteLength + ' bytes</p>');\n\
           document.getElementById('status').textContent = 'ready';\n\
         }});\n\
         const filter = document.getElementById('filter');\n\
         if (filter) filter.addEventListener('input', () => {{\n\
           const items = [...document.querySelectorAll('#entries li')];\n\
           const shown = items.filter((item) => {{\n\
             item.hidden = !item.textContent.includes(filter.value);\n\
             return !item.hidden;\n\
           }});\n\
           document.getElementById('shown').textContent = shown.length + ' shown';\n\
         }});\n\
         </script>\n</body></html>\n",
        documents = documents.join(", ")
    );
    html
}

/// Words that differ from part to part and line to line, so that no two files are alike.
fn sentence(part: usize, index: usize, words: usize) -> String {
    const WORDS: &[&str] = &[
        "marsh", "reed", "tide", "feather", "wing", "nest", "shore", "dune", "call", "flight", "moult", "egg", "brood",
        "perch", "dusk", "dawn", "migrant", "resident", "estuary", "mudflat",
    ];
    (0..words)
        .map(|word| WORDS[(part * 7 + index * 13 + word * 31 + word / 3) % WORDS.len()])
        .collect::<Vec<_>>()
        .join(" ")
}

fn stylesheet(part: usize, index: usize) -> String {
    let mut css = String::new();
    for rule in 0..60 {
        let _ = writeln!(
            css,
            ".part-{part}-{index}-{rule} {{ margin: {}px; color: #{:06x}; font-size: {}px; }}",
            rule % 17,
            (part * 7919 + index * 104_729 + rule * 1_299_709) % 0xff_ffff,
            10 + rule % 9
        );
    }
    css
}

fn script(part: usize, index: usize) -> String {
    let mut js = format!("// Part {part}, module {index}.\n(function () {{\n  const notes = [\n");
    for line in 0..80 {
        let _ = writeln!(js, "    {:?},", sentence(part, index * 100 + line, 12));
    }
    let _ = write!(
        js,
        "  ];\n  window.guide.parts.push({{ part: {part}, module: {index}, notes: notes.length }});\n}})();\n"
    );
    js
}

fn icon(part: usize, index: usize) -> String {
    let hue = (part * 37 + index * 11) % 360;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"48\" height=\"48\" viewBox=\"0 0 48 48\">\
         <rect width=\"48\" height=\"48\" fill=\"hsl({hue},60%,85%)\"/>"
    );
    for dot in 0..24 {
        let (x, y) = ((part * 3 + index * 5 + dot * 7) % 44 + 2, (part * 5 + index * 3 + dot * 11) % 44 + 2);
        let _ = write!(
            svg,
            "<circle cx=\"{x}\" cy=\"{y}\" r=\"{}\" fill=\"hsl({},50%,40%)\"/>",
            1 + dot % 3,
            (hue + dot * 15) % 360
        );
    }
    svg.push_str("</svg>\n");
    svg
}

fn document(part: usize, index: usize) -> String {
    let entries: Vec<serde_json::Value> = (0..24)
        .map(|entry| {
            let bird = match (part, index, entry) {
                (FILTERED_PART, 0, 0) => FILTER_TEXT,
                _ => BIRDS[(part + index * 3 + entry) % BIRDS.len()],
            };
            serde_json::json!({
                "name": format!("{bird} {part}.{index}.{entry}"),
                "note": sentence(part, index * 50 + entry, 20),
            })
        })
        .collect();
    serde_json::json!({ "part": part, "index": index, "entries": entries }).to_string()
}

/// A 24-bit Windows bitmap of about `bytes` bytes, every pixel noise: an image that decodes, which no
/// compression makes smaller.
fn bitmap(bytes: usize, noise: &mut Noise) -> Vec<u8> {
    const HEADER: usize = 54;
    let width = 1024usize;
    let row = width * 3;
    let height = (bytes.saturating_sub(HEADER) / row).max(1);
    let pixels = row * height;
    let mut image = Vec::with_capacity(HEADER + pixels);
    image.extend_from_slice(b"BM");
    image.extend_from_slice(&((HEADER + pixels) as u32).to_le_bytes());
    image.extend_from_slice(&0u32.to_le_bytes());
    image.extend_from_slice(&(HEADER as u32).to_le_bytes());
    image.extend_from_slice(&40u32.to_le_bytes());
    image.extend_from_slice(&(width as i32).to_le_bytes());
    image.extend_from_slice(&(height as i32).to_le_bytes());
    image.extend_from_slice(&1u16.to_le_bytes());
    image.extend_from_slice(&24u16.to_le_bytes());
    image.extend_from_slice(&0u32.to_le_bytes());
    image.extend_from_slice(&(pixels as u32).to_le_bytes());
    image.extend_from_slice(&2835u32.to_le_bytes());
    image.extend_from_slice(&2835u32.to_le_bytes());
    image.extend_from_slice(&[0; 8]);
    image.extend_from_slice(&noise.bytes(pixels));
    image
}

/// A fixed sequence of pseudo-random bytes (xorshift64*): the same site every run, incompressible.
struct Noise(u64);

impl Noise {
    fn bytes(&mut self, count: usize) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(count + 8);
        while bytes.len() < count {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            bytes.extend_from_slice(&self.0.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
        }
        bytes.truncate(count);
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_site_serves_what_its_shape_counts_and_the_paper_shape_is_the_papers_size() {
        let small =
            Shape { pages: FILTERED_PART + 2, images: 3, photo_bytes: 64 << 10, blob_bytes: 32 << 10, ..Shape::PAPER };
        let dir = tempfile::tempdir().unwrap();
        let bytes = write_site(dir.path(), small).unwrap();
        // Every file the pages name is served, and nothing else: the count is the walk's requests.
        assert_eq!(files_under(dir.path()).len(), small.requests());
        assert!(bytes > (small.pages as u64) * (64 << 10));
        // The paper's largest task: about 3,000 requests, about 150 MB, nearly all of it the large bodies.
        let paper = Shape::PAPER;
        assert!((2_900..=3_100).contains(&paper.requests()), "{} requests", paper.requests());
        let large = paper.pages * paper.photo_bytes + paper.pages.div_ceil(paper.blob_every) * paper.blob_bytes;
        assert!((120 << 20..=160 << 20).contains(&large), "{} MB", large >> 20);
        // The large bodies do not shrink: a bundle's size is what the site's is.
        let photo = std::fs::read(dir.path().join("photo/1.bmp")).unwrap();
        assert_eq!(&photo[..2], b"BM");
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut gzip, &photo).unwrap();
        assert!(gzip.finish().unwrap().len() as f64 > photo.len() as f64 * 0.99);
        // Exactly one entry of the filtered part is a heron, so typing its name shows one.
        let herons: usize =
            (0..paper.documents).map(|index| document(FILTERED_PART, index).matches(FILTER_TEXT).count()).sum();
        assert_eq!(herons, 1);
    }

    fn files_under(dir: &Path) -> Vec<PathBuf> {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            if entry.file_type().unwrap().is_dir() {
                files.extend(files_under(&entry.path()));
            } else {
                files.push(entry.path());
            }
        }
        files
    }
}
