//! `trace-host view`, the real binary, on a recording made through the real host (a login with a password
//! flagged as a credential, processed into `credentials.json`), asked over real HTTP on 127.0.0.1 as a
//! browser asks it (issue #31): its token in every path and never in a cookie, its pages' links all
//! answering, the credentials' values served nowhere, `--open` keeping the token off the opener's command
//! line, and a body the HAR declares empty not read whole.

use std::collections::{BTreeSet, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use regex::Regex;

use crate::common::*;

/// The recorded task, processed (its `credentials.json` written).
const TASK: &str = "login-cart";

/// A data directory holding [`TASK`], processed.
fn processed_login(scratch: &Scratch) {
    record_login_and_cart(scratch, TASK);
    let processed = scratch.cli(&["process", TASK, "--no-audit"]);
    assert!(processed.status.success(), "{}", String::from_utf8_lossy(&processed.stderr));
    assert!(contains(&std::fs::read(scratch.capture(TASK).join("credentials.json")).unwrap(), PASSWORD.as_bytes()));
}

/// `trace-host view` running, and the URL it printed.
struct Viewer {
    child: Child,
    /// What it printed to open: `http://127.0.0.1:PORT/TOKEN/...`.
    url: url::Url,
}

impl Viewer {
    /// `trace-host --data DATA view ARGS…`, with `path` as its `PATH` when given.
    fn start(scratch: &Scratch, args: &[&str], path: Option<&str>) -> Viewer {
        let mut command = Command::new(host_exe());
        command.arg("--data").arg(scratch.data()).arg("view").args(args).env_remove("TRACE_DATA");
        if let Some(path) = path {
            command.env("PATH", path);
        }
        let mut child = command.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        let url = line.split_whitespace().find(|word| word.starts_with("http://127.0.0.1:")).expect(&line);
        Viewer { child, url: url::Url::parse(url).unwrap() }
    }

    /// `/TOKEN`, the first segment of every path the viewer answers.
    fn root(&self) -> String {
        format!("/{}", self.url.path_segments().unwrap().next().unwrap())
    }

    fn token(&self) -> String {
        self.root()[1..].to_owned()
    }

    /// A GET of `path` (with its query) over a connection of its own, with `headers` sent.
    fn get(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        let address = format!("127.0.0.1:{}", self.url.port().unwrap());
        let mut stream = std::net::TcpStream::connect(&address).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let headers: String = headers.iter().map(|(name, value)| format!("{name}: {value}\r\n")).collect();
        // HTTP/1.0: the answer ends with the connection, never in chunks.
        write!(stream, "GET {path} HTTP/1.0\r\nHost: {address}\r\n{headers}\r\n").unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        Reply::parse(&raw)
    }

    /// The peak memory the viewer has taken so far (`VmHWM`), in bytes.
    fn peak_memory(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|line| line.starts_with("VmHWM:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP answer.
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn parse(raw: &[u8]) -> Reply {
        let end = raw.windows(4).position(|window| window == b"\r\n\r\n").expect("a complete answer");
        let head = String::from_utf8_lossy(&raw[..end]);
        let mut lines = head.lines();
        let status = lines.next().unwrap().split_whitespace().nth(1).unwrap().parse().unwrap();
        let headers = lines
            .filter_map(|line| line.split_once(':'))
            .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
            .collect();
        Reply { status, headers, body: raw[end + 4..].to_vec() }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, value)| value.as_str())
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Every `href`, `src` and `action` of an HTML page, as written.
fn links(html: &str) -> Vec<String> {
    static LINK: LazyLock<Regex> = LazyLock::new(|| Regex::new(r#"\b(?:href|src|action)="([^"]*)""#).unwrap());
    LINK.captures_iter(html).map(|caps| caps[1].replace("&amp;", "&").replace("&quot;", "\"")).collect()
}

/// What a crawl of the viewer met: each URL asked (path and query) with its answer.
struct Crawl {
    visited: Vec<(String, Reply)>,
    /// Every link of every app page, resolved, with the page it is on.
    links: Vec<(String, url::Url)>,
}

/// Follows every link of the app's pages from `start`, as a browser resolves them, up to `most` URLs; the
/// files and snapshots they lead to are asked for too, but not read for links (they are the bundle's).
fn crawl(viewer: &Viewer, start: &url::Url, most: usize) -> Crawl {
    let mut crawl = Crawl { visited: Vec::new(), links: Vec::new() };
    let mut seen = BTreeSet::from([start.to_string()]);
    let mut pending = VecDeque::from([start.clone()]);
    while let Some(url) = pending.pop_front() {
        assert!(crawl.visited.len() < most, "more than {most} URLs: {:?}", seen);
        let target = format!("{}{}", url.path(), url.query().map(|q| format!("?{q}")).unwrap_or_default());
        let reply = viewer.get(&target, &[]);
        let is_app_page = !target.contains("/file/") && !target.contains("/snapshot/");
        if is_app_page && reply.status == 200 {
            for link in links(&reply.text()) {
                let resolved = url.join(&link).unwrap_or_else(|e| panic!("{link} on {url}: {e}"));
                crawl.links.push((target.clone(), resolved.clone()));
                let mut without_fragment = resolved.clone();
                without_fragment.set_fragment(None);
                if resolved.origin() == viewer.url.origin() && seen.insert(without_fragment.to_string()) {
                    pending.push_back(without_fragment);
                }
            }
        }
        crawl.visited.push((target, reply));
    }
    crawl
}

/// Issue #31, part 1: the viewer's cookie `trace_view=TOKEN` was scoped to 127.0.0.1, which browsers send to
/// every port of it; a server on another port received it and read the recording with it. The token is now
/// the first segment of every path, never a cookie: no answer sets one, every link of every page carries
/// the token (or is relative to a page that does) and answers, and nothing answers without the token.
#[test]
fn the_token_is_in_every_path_and_never_in_a_cookie() {
    let scratch = Scratch::new();
    processed_login(&scratch);
    let viewer = Viewer::start(&scratch, &[], None);
    let root = viewer.root();
    assert_eq!(viewer.token().len(), 32, "{}", viewer.url);
    assert!(viewer.url.query().is_none(), "the printed URL has its token in its path: {}", viewer.url);

    let crawl = crawl(&viewer, &viewer.url, 400);
    let recording = format!("{root}/r/{TASK}/");
    let visited: Vec<&str> = crawl.visited.iter().map(|(path, _)| path.as_str()).collect();
    for wanted in [&format!("{root}/"), &recording, &format!("{recording}network"), &format!("{recording}state")] {
        assert!(visited.contains(&wanted.as_str()), "{wanted} is linked: {visited:?}");
    }
    assert!(visited.iter().any(|path| path.starts_with(&format!("{recording}network/"))), "{visited:?}");
    assert!(visited.iter().any(|path| path.starts_with(&format!("{recording}snapshot/dom/"))), "{visited:?}");
    assert!(visited.iter().any(|path| path.starts_with(&format!("{recording}?step="))), "{visited:?}");
    for (path, reply) in &crawl.visited {
        assert_eq!(reply.status, 200, "{path}: {}", reply.text());
        assert_eq!(reply.header("set-cookie"), None, "{path} sets no cookie");
        assert_eq!(reply.header("referrer-policy"), Some("no-referrer"), "{path} sends its URL nowhere");
    }
    for (page, link) in &crawl.links {
        assert_eq!(link.origin(), viewer.url.origin(), "{link} on {page} stays in the app");
        assert!(link.path().starts_with(&format!("{root}/")), "{link} on {page} carries the token");
    }

    // Without the token, in the path, nothing: not with it in a query, nor in the old cookie.
    let token = viewer.token();
    let cookie = format!("trace_view={token}");
    for (path, headers) in [
        ("/".to_owned(), vec![]),
        (format!("/?token={token}"), vec![]),
        ("/".to_owned(), vec![("Cookie", cookie.as_str())]),
        (format!("/r/{TASK}/"), vec![("Cookie", cookie.as_str())]),
        (format!("/0123456789abcdef0123456789abcdef/r/{TASK}/"), vec![]),
        (format!("/{}/r/{TASK}/", token.to_ascii_uppercase()), vec![]),
        (format!("/{token}x/r/{TASK}/"), vec![]),
        (format!("/x/{token}/r/{TASK}/"), vec![]),
    ] {
        let reply = viewer.get(&path, &headers);
        assert_eq!(reply.status, 404, "{path} {headers:?}: {}", reply.text());
        assert!(!reply.text().contains(&token));
        assert_eq!(reply.header("set-cookie"), None);
    }
}

/// Issue #31, part 2: `/file/credentials.json` served the typed passwords. No top-level document of a
/// bundle is served (`credentials.json`, `events.jsonl` and `recording.har` hold what was typed and sent),
/// a request body shows each credential as its placeholder, and no page or file of the app holds the
/// password; the recording's page still lists the credential by its placeholder.
#[test]
fn no_page_nor_file_of_the_viewer_holds_a_credentials_value() {
    let scratch = Scratch::new();
    processed_login(&scratch);
    let viewer = Viewer::start(&scratch, &[TASK], None);
    let recording = format!("{}/r/{TASK}", viewer.root());
    for document in
        ["credentials.json", "events.jsonl", "recording.har", "trajectory.json", "manifest.json", "storage.json"]
    {
        let reply = viewer.get(&format!("{recording}/file/{document}"), &[]);
        assert_eq!(reply.status, 404, "{document} is not served: {}", reply.text());
    }

    let page = viewer.get(&format!("{recording}/"), &[]);
    assert_eq!(page.status, 200);
    assert!(page.text().contains("{{credentials.127.0.0.1.password}}"), "the credential is listed by its placeholder");
    let crawl = crawl(&viewer, &viewer.url, 400);
    let form_encoded = PASSWORD.replace('!', "%21");
    let mut login_shown = false;
    for (path, reply) in &crawl.visited {
        for form in [PASSWORD, &form_encoded] {
            assert!(!contains(&reply.body, form.as_bytes()), "{path} holds the password: {}", reply.text());
        }
        login_shown |= reply.text().contains("username=ann&amp;password={{credentials.127.0.0.1.password}}");
    }
    assert!(login_shown, "the login POST's body is shown, the password as its placeholder");
    drop(viewer);

    // A request body stored apart, as a file of the bundle: served with the placeholder too.
    let bundle = scratch.path("bundle");
    copy_dir(&scratch.capture(TASK), &bundle);
    let har_path = bundle.join("recording.har");
    let mut har: serde_json::Value = serde_json::from_slice(&std::fs::read(&har_path).unwrap()).unwrap();
    let login = har["log"]["entries"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|entry| entry["request"]["method"] == "POST" && entry["request"]["url"] == "http://127.0.0.1:8000/login")
        .unwrap();
    let body = login["request"]["postData"]["text"].as_str().unwrap().to_owned();
    assert!(body.contains(&form_encoded), "{body}");
    std::fs::write(bundle.join("resources/login-body"), &body).unwrap();
    login["request"]["postData"] =
        serde_json::json!({ "mimeType": "application/x-www-form-urlencoded", "_file": "resources/login-body" });
    std::fs::write(&har_path, serde_json::to_vec(&har).unwrap()).unwrap();
    let viewer = Viewer::start(&scratch, &[bundle.to_str().unwrap()], None);
    let reply = viewer.get(&format!("{}/r/bundle/file/resources/login-body", viewer.root()), &[]);
    assert_eq!(reply.status, 200);
    assert_eq!(reply.text(), body.replace(&form_encoded, "{{credentials.127.0.0.1.password}}"));
}

/// Issue #31, part 3: `--open` ran `xdg-open URL`, the token on a command line every user of the machine
/// can read (`ps`). The opener now gets a page in a private directory that leads to the URL.
#[cfg(target_os = "linux")]
#[test]
fn open_hands_the_opener_a_private_page_never_the_token() {
    use std::os::unix::fs::PermissionsExt;

    let scratch = Scratch::new();
    processed_login(&scratch);
    // An opener of our own, first on the PATH: it records its arguments and what it was given to open.
    let bin = scratch.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let seen = scratch.path("opened");
    let script = format!(
        "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{argv}.partial'\ncp \"$1\" '{page}'\nstat -c %a \"$1\" > '{mode}'\n\
         stat -c %a \"$(dirname \"$1\")\" >> '{mode}'\nmv '{argv}.partial' '{argv}'\n",
        argv = seen.with_extension("argv").display(),
        page = seen.with_extension("html").display(),
        mode = seen.with_extension("mode").display(),
    );
    let opener = bin.join("xdg-open");
    std::fs::write(&opener, script).unwrap();
    std::fs::set_permissions(&opener, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let viewer = Viewer::start(&scratch, &[TASK, "--open"], Some(&path));

    let argv_file = seen.with_extension("argv");
    let deadline = Instant::now() + TIMEOUT;
    while !argv_file.exists() {
        assert!(Instant::now() < deadline, "the opener was not run");
        std::thread::sleep(Duration::from_millis(50));
    }
    let argv = std::fs::read_to_string(&argv_file).unwrap();
    assert!(!argv.contains(&viewer.token()), "the token is on the opener's command line: {argv}");
    assert_eq!(argv.lines().count(), 1, "{argv}");
    assert!(PathBuf::from(argv.trim()).is_absolute(), "a file: {argv}");
    let modes = std::fs::read_to_string(seen.with_extension("mode")).unwrap();
    assert_eq!(modes.split_whitespace().collect::<Vec<_>>(), ["600", "700"], "the page and its directory are private");

    // The page leads to the URL printed, which answers.
    let page = std::fs::read_to_string(seen.with_extension("html")).unwrap();
    let printed = viewer.url.to_string();
    assert!(page.contains(&format!("http-equiv=\"refresh\" content=\"0; url={printed}\"")), "{page}");
    let reply = viewer.get(viewer.url.path(), &[]);
    assert_eq!(reply.status, 200);
    assert!(reply.text().contains("buy the blue mug"));
    drop(viewer);
}

/// Issue #31, part 4: the viewer read a request body stored apart whenever the HAR declared its `bodySize`
/// small; a bundle declaring 0 for a body of gigabytes drove it to 6.4 GB. The file's real size decides
/// now, and no page reads a body whole: a bundle whose HAR declares a 200 MiB body empty, as the request's
/// and as a response's, is shown with the viewer's memory well under that.
#[cfg(target_os = "linux")]
#[test]
fn a_body_the_har_declares_empty_is_never_read_whole() {
    const BIG: u64 = 200 << 20;
    let scratch = Scratch::new();
    record_login_and_cart(&scratch, TASK);
    let bundle = scratch.path("bundle");
    copy_dir(&scratch.capture(TASK), &bundle);
    // Zeros, written as a hole: the file is as large as any other to whoever reads it.
    std::fs::File::create(bundle.join("resources/big")).unwrap().set_len(BIG).unwrap();
    let har_path = bundle.join("recording.har");
    let mut har: serde_json::Value = serde_json::from_slice(&std::fs::read(&har_path).unwrap()).unwrap();
    let entries = har["log"]["entries"].as_array_mut().unwrap();
    let cart = entries.iter().position(|e| e["request"]["url"].as_str().unwrap().ends_with("/api/cart")).unwrap();
    entries[cart]["request"]["postData"] =
        serde_json::json!({ "mimeType": "application/json", "_file": "resources/big" });
    entries[cart]["request"]["bodySize"] = serde_json::json!(0);
    let products =
        entries.iter().position(|e| e["request"]["url"].as_str().unwrap().contains("/api/products")).unwrap();
    entries[products]["response"]["content"]["_file"] = serde_json::json!("resources/big");
    entries[products]["response"]["content"]["size"] = serde_json::json!(0);
    entries[products]["response"]["bodySize"] = serde_json::json!(0);
    std::fs::write(&har_path, serde_json::to_vec(&har).unwrap()).unwrap();

    let viewer = Viewer::start(&scratch, &[bundle.to_str().unwrap()], None);
    let recording = format!("{}/r/bundle", viewer.root());
    for page in ["/".to_owned(), "/network".to_owned(), format!("/network/{cart}"), format!("/network/{products}")] {
        let reply = viewer.get(&format!("{recording}{page}"), &[]);
        assert_eq!(reply.status, 200, "{page}: {}", reply.text());
        assert!(reply.body.len() < 4 << 20, "{page} is {} bytes", reply.body.len());
    }
    let entry = viewer.get(&format!("{recording}/network/{products}"), &[]).text();
    assert!(entry.contains("The body is larger than the"), "the page says it shows a part");
    let file = viewer.get(&format!("{recording}/file/resources/big"), &[]);
    assert_eq!(file.status, 422, "a file past the limit is refused, not read");
    assert!(file.text().contains("larger than the 64 MiB"), "{}", file.text());
    let peak = viewer.peak_memory();
    assert!(peak < 120 << 20, "the viewer took {} MiB for a body of {} MiB", peak >> 20, BIG >> 20);
}
