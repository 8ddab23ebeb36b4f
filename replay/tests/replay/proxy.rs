//! `trace-replay serve --proxy-port`: a browser that replay does not launch, its proxy set to replay's,
//! gets an HTTPS site of a bundle offline. Chromium, started with nothing but the proxy and the
//! fingerprint replay prints, shows the recorded page with its clock at the recording's time, the
//! logged-in answer the recording's start cookies choose (the browser never had them), and a request to
//! a host the recording never reached refused and counted; the session holds what crossed. The binary,
//! driven as a user runs it, prints where it listens and what to trust, refuses what it must, and writes
//! the session when stopped.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use trace_replay::archive::ReplayArchive;
use trace_replay::chromium::{self, Launch};
use trace_replay::proxy::{Proxy, ProxyOptions};
use trace_replay::session::SessionRecorder;

use crate::common::{STARTED_AT, har, har_entry, stored_body, write_bundle};

const SHOP: &str = "https://shop.test/";
const SHOP_HTML: &str = r#"<!doctype html>
<html><head><title>Shop</title></head><body>
<p id="clock"></p><p id="cookies"></p><p id="me">asking</p><p id="tracker">asking</p>
<script>
  document.getElementById("clock").textContent = String(Date.now());
  document.getElementById("cookies").textContent = document.cookie;
  fetch("/api/me").then((r) => r.json()).then(
    (me) => { document.getElementById("me").textContent = me.user; },
    () => { document.getElementById("me").textContent = "failed"; });
  fetch("https://tracker.elsewhere.test/pixel").then(
    () => { document.getElementById("tracker").textContent = "reached"; },
    () => { document.getElementById("tracker").textContent = "refused"; });
</script></body></html>"#;

/// A bundle of the shop over HTTPS, where `/api/me` was recorded twice: logged out, then with the session
/// cookie the recording started with.
fn shop_bundle(dir: &std::path::Path) {
    let with_cookie = |mut entry: Value, cookie: &str| {
        entry["request"]["headers"] = json!([{ "name": "Cookie", "value": cookie }]);
        entry
    };
    let entries = vec![
        har_entry(SHOP, stored_body(dir, SHOP_HTML.as_bytes(), "text/html")),
        har_entry("https://shop.test/api/me", stored_body(dir, br#"{"user":"nobody"}"#, "application/json")),
        with_cookie(
            har_entry("https://shop.test/api/me", stored_body(dir, br#"{"user":"ada"}"#, "application/json")),
            "session=abc123; theme=dark",
        ),
    ];
    let storage = json!({ "snapshots": [{
        "time": STARTED_AT,
        "phase": "start",
        "cookies": [
            { "name": "session", "value": "abc123", "domain": "shop.test", "path": "/", "http_only": true, "secure": true },
            { "name": "theme", "value": "dark", "domain": "shop.test", "path": "/" },
        ],
    }]});
    write_bundle(dir, "proxied", &har(entries), &storage);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_of_its_own_gets_an_https_site_offline_through_the_proxy() {
    let scratch = tempfile::tempdir().unwrap();
    let bundle = scratch.path().join("bundle");
    shop_bundle(&bundle);
    let session = SessionRecorder::create(&scratch.path().join("session")).unwrap();
    let options = ProxyOptions { determinism: true, ..ProxyOptions::default() };
    let replay_started = std::time::Instant::now();
    let proxy = Proxy::start(ReplayArchive::open(&bundle).unwrap(), &options, Some(session.clone())).await.unwrap();

    // The browser knows only the proxy and which certificate key to take: the one an agent would launch.
    let launch = Launch {
        args: vec![
            ("proxy-server".to_owned(), Some(proxy.url())),
            ("ignore-certificate-errors-spki-list".to_owned(), Some(proxy.authority().spki_fingerprint())),
        ],
        headless: true,
        ..Launch::default()
    };
    // Every part is held to the end: the process is killed when its handle goes.
    let chromium::Chromium { browser, handler: _handler, profile: _profile, process: _process, .. } =
        chromium::launch(&launch).await.unwrap();
    let page = browser.new_page(SHOP).await.unwrap();
    let text = |id: &'static str| {
        let page = page.clone();
        async move {
            let script = format!("document.getElementById('{id}')?.textContent ?? ''");
            page.evaluate(script).await.unwrap().into_value::<String>().unwrap()
        }
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while (text("me").await == "asking" || text("tracker").await == "asking") && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    assert_eq!(text("me").await, "ada", "the start cookies chose the logged-in answer");
    assert_eq!(
        text("cookies").await,
        "theme=dark",
        "the readable start cookie reached the page, the other stayed httpOnly"
    );
    assert_eq!(text("tracker").await, "refused");
    let clock: f64 = text("clock").await.parse().unwrap();
    // The replay's clock starts at the recording's start and runs at real speed: the page read it no
    // later than now.
    let started = trace_manifest::time_fmt::millis_from_rfc3339(STARTED_AT).unwrap();
    let elapsed = replay_started.elapsed().as_secs_f64() * 1000.0;
    assert!(
        clock >= started && clock <= started + elapsed,
        "the page's clock starts at the recording's: {clock} vs {started}, {elapsed:.0} ms on"
    );
    drop(browser);

    let stats = proxy.close();
    assert_eq!(stats.live_attempts, 1, "the tracker was a live attempt: {stats}");
    assert!(stats.exact >= 2, "{stats}");
    let task = trace_replay::eval::Reference::read(&bundle, Default::default()).unwrap().task;
    let events = session.finish(task, None).unwrap();
    let urls: Vec<String> = events
        .iter()
        .filter_map(|record| match &record.event.kind {
            trace_manifest::event::EventKind::Request(request) => Some(request.url.clone()),
            _ => None,
        })
        .collect();
    assert!(urls.contains(&SHOP.to_owned()) && urls.contains(&"https://shop.test/api/me".to_owned()), "{urls:?}");
}

#[test]
fn serve_with_a_proxy_port_says_where_it_listens_and_writes_the_session_when_stopped() {
    let scratch = tempfile::tempdir().unwrap();
    let bundle = scratch.path().join("bundle");
    shop_bundle(&bundle);
    let ca_dir = scratch.path().join("ca");
    let episode = scratch.path().join("episode");
    let mut serve = Command::new(env!("CARGO_BIN_EXE_trace-replay"))
        .arg("serve")
        .arg(&bundle)
        .args(["--proxy-port", "0", "--ca-dir"])
        .arg(&ca_dir)
        .arg("--episode")
        .arg(&episode)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(serve.stdout.take().unwrap()).lines();
    let mut said = Vec::new();
    while !said.iter().any(|line: &String| line.starts_with("press Ctrl+C")) {
        said.push(lines.next().expect("serve printed its addresses").unwrap());
    }
    let proxy = said.iter().find_map(|line| line.strip_prefix("proxy: ")).expect("the proxy's URL").to_owned();
    assert!(proxy.starts_with("http://127.0.0.1:"), "{said:?}");
    assert!(ca_dir.join("trace-replay-ca.pem").is_file() && ca_dir.join("trace-replay-ca.key.pem").is_file());
    use std::os::unix::fs::PermissionsExt as _;
    let key_mode = std::fs::metadata(ca_dir.join("trace-replay-ca.key.pem")).unwrap().permissions().mode();
    assert_eq!(key_mode & 0o077, 0, "the authority's key is its owner's alone");

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = reqwest::Client::builder()
            .proxy(reqwest::Proxy::all(&proxy).unwrap())
            .tls_danger_accept_invalid_certs(true)
            .build()
            .unwrap();
        let page = client.get(SHOP).header("Accept", "text/html").send().await.unwrap();
        assert_eq!(page.status(), 200);
        let html = page.text().await.unwrap();
        assert!(html.starts_with("<!doctype html><script>"), "the page scripts lead the document: {}", &html[..80]);
        assert!(html.contains(r#"<p id="me">asking</p>"#));
        let api = client.get("https://shop.test/api/me").send().await.unwrap().text().await.unwrap();
        assert!(!api.contains("<script>"), "a script's request gets the recorded body as it was: {api}");
        // A page reaching a host the recording never did is a live attempt; the browser's own service
        // (no page's headers) is refused without being counted against the agent.
        let from_page = client.get("https://elsewhere.test/").header("Referer", SHOP).send().await;
        assert!(from_page.is_err(), "nothing recorded there");
        assert!(client.post("https://updates.browser.test/check").body("{}").send().await.is_err());
        assert!(client.get("https://shop.test/never-recorded").send().await.is_err(), "a miss fails");
        assert_eq!(
            reqwest::get(format!("{proxy}/")).await.unwrap().status(),
            400,
            "asked as a server, it says what it is"
        );
    });

    rustix::process::kill_process(
        rustix::process::Pid::from_raw(serve.id() as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    assert!(serve.wait().unwrap().success());
    let summary = rest.join("\n");
    assert!(summary.contains("missed: 2; live: 1"), "{summary}");
    let events = std::fs::read_to_string(episode.join("session/events.jsonl")).unwrap();
    assert!(events.contains("https://shop.test/api/me") && events.contains("never-recorded"), "{events}");
    assert!(!events.contains("updates.browser.test"), "the browser's own request is no part of the session");

    // Scored as `eval` scores an episode, with what the proxy served.
    let score = Command::new(env!("CARGO_BIN_EXE_trace-replay"))
        .arg("score")
        .arg(&bundle)
        .arg("--episode")
        .arg(&episode)
        .arg("--json")
        .output()
        .unwrap();
    assert!(score.status.success(), "{}", String::from_utf8_lossy(&score.stderr));
    let result: Value = serde_json::from_slice(&score.stdout).unwrap();
    assert_eq!(result["ended"]["kind"], "proxied", "{result:#}");
    assert_eq!(result["live_attempts"], 1, "{result:#}");
    assert_eq!(result["requests"]["missed"], 2, "{result:#}");
    let written: Value = serde_json::from_slice(&std::fs::read(episode.join("result.json")).unwrap()).unwrap();
    assert_eq!(written, result);

    // The authority is kept: a second run takes the same one, which a browser was told to trust once.
    let certificate = std::fs::read(ca_dir.join("trace-replay-ca.pem")).unwrap();
    let hosts = std::collections::BTreeSet::from(["shop.test".to_owned()]);
    let again = trace_replay::proxy::Authority::load_or_create(Some(&ca_dir), &hosts).unwrap();
    assert_eq!(std::fs::read(again.certificate_path()).unwrap(), certificate);
}

/// The proxy of `bundle`, in this process, with the session recorded into `session` when given.
async fn proxy_of(bundle: &std::path::Path, session: Option<std::sync::Arc<SessionRecorder>>) -> Proxy {
    Proxy::start(ReplayArchive::open(bundle).unwrap(), &ProxyOptions::default(), session).await.unwrap()
}

/// Issue #45: the proxy read request heads without a time limit, so 3,000 connections that sent half a
/// request line were all held 40 s later. A connection that has not sent its head within the head
/// timeout is closed. A request sent meanwhile, behind more such connections than the proxy serves at
/// once, is answered at once: it takes the place of the one that has said nothing longest (it waited 19 s
/// behind 3,000 when it had to wait for their head timeouts).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_never_finish_a_request_are_closed_and_the_proxy_still_answers() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let scratch = tempfile::tempdir().unwrap();
    let bundle = scratch.path().join("bundle");
    shop_bundle(&bundle);
    let proxy = proxy_of(&bundle, None).await;
    let slow_count = trace_replay::proxy::MAX_CONNECTIONS + 44;
    let mut slow = Vec::new();
    for _ in 0..slow_count {
        let mut stream = tokio::net::TcpStream::connect(proxy.address()).await.unwrap();
        stream.write_all(b"GET http://shop.test/ HT").await.unwrap();
        slow.push(stream);
    }
    let client = reqwest::Client::builder()
        .proxy(reqwest::Proxy::all(proxy.url()).unwrap())
        .tls_danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let started = std::time::Instant::now();
    let answered = client.get(SHOP).header("Accept", "text/html").send().await.unwrap();
    assert_eq!(answered.status(), 200);
    let waited = started.elapsed();
    assert!(waited < trace_replay::proxy::HEAD_TIMEOUT / 2, "answered after {waited:?}");
    eprintln!("a real request behind {slow_count} slow connections was answered in {waited:?}");
    let mut closed = 0;
    for stream in &mut slow {
        let mut byte = [0u8; 1];
        let read =
            tokio::time::timeout(trace_replay::proxy::HEAD_TIMEOUT * 3, stream.read(&mut byte)).await.map(|r| r.ok());
        // Closed (end of stream or reset), or answered with an error status: not held.
        if matches!(read, Ok(Some(_)) | Ok(None)) {
            closed += 1;
        }
    }
    assert_eq!(closed, slow_count, "every slow connection was closed");
    proxy.close();
}

/// Issue #45: one certificate was made and kept for every host a CONNECT named: 10,000 names, 210 MB.
/// At most `MAX_CERTIFICATES` are kept; the recorded host's is made again when it was dropped, and its
/// page still comes over TLS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_kept_are_bounded_and_a_recorded_https_host_still_works() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let scratch = tempfile::tempdir().unwrap();
    let bundle = scratch.path().join("bundle");
    shop_bundle(&bundle);
    let proxy = proxy_of(&bundle, None).await;
    let connector = {
        let mut config = tokio_rustls::rustls::ClientConfig::builder()
            .dangerous()
            .with_custom_certificate_verifier(std::sync::Arc::new(AnyCertificate))
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
    };
    for n in 0..trace_replay::proxy::MAX_CERTIFICATES + 76 {
        let host = format!("h{n}.example.test");
        let mut stream = tokio::net::TcpStream::connect(proxy.address()).await.unwrap();
        stream.write_all(format!("CONNECT {host}:443 HTTP/1.1\r\nHost: {host}:443\r\n\r\n").as_bytes()).await.unwrap();
        let mut answer = [0u8; 64];
        let read = stream.read(&mut answer).await.unwrap();
        assert!(answer[..read].starts_with(b"HTTP/1.1 200"), "{:?}", String::from_utf8_lossy(&answer[..read]));
        let name = tokio_rustls::rustls::pki_types::ServerName::try_from(host).unwrap();
        connector.connect(name, stream).await.unwrap();
    }
    let kept = proxy.authority().certificates_kept();
    assert!(kept <= trace_replay::proxy::MAX_CERTIFICATES, "{kept} certificates kept");
    let client = reqwest::Client::builder()
        .proxy(reqwest::Proxy::all(proxy.url()).unwrap())
        .tls_danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let page = client.get(SHOP).header("Accept", "text/html").send().await.unwrap();
    assert_eq!(page.status(), 200);
    proxy.close();
}

/// Takes any certificate: what a browser told the proxy's key fingerprint does, for the test of how many
/// certificates are kept.
#[derive(Debug)]
struct AnyCertificate;

impl tokio_rustls::rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &tokio_rustls::rustls::pki_types::CertificateDer<'_>,
        _: &[tokio_rustls::rustls::pki_types::CertificateDer<'_>],
        _: &tokio_rustls::rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: tokio_rustls::rustls::pki_types::UnixTime,
    ) -> Result<tokio_rustls::rustls::client::danger::ServerCertVerified, tokio_rustls::rustls::Error> {
        Ok(tokio_rustls::rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &tokio_rustls::rustls::pki_types::CertificateDer<'_>,
        _: &tokio_rustls::rustls::DigitallySignedStruct,
    ) -> Result<tokio_rustls::rustls::client::danger::HandshakeSignatureValid, tokio_rustls::rustls::Error> {
        Ok(tokio_rustls::rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &tokio_rustls::rustls::pki_types::CertificateDer<'_>,
        _: &tokio_rustls::rustls::DigitallySignedStruct,
    ) -> Result<tokio_rustls::rustls::client::danger::HandshakeSignatureValid, tokio_rustls::rustls::Error> {
        Ok(tokio_rustls::rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<tokio_rustls::rustls::SignatureScheme> {
        tokio_rustls::rustls::crypto::aws_lc_rs::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Issue #45: the `--ca-dir` authority could vouch for any name until 2099, so a browser (or a system)
/// told to trust it trusted a forged certificate of any site. A client that trusts the authority alone,
/// as an installed one is trusted, gets the recorded HTTPS host over TLS, and is refused a certificate
/// of any other host (the authority's name constraints); the authority lasts thirty days when kept, and
/// one kept but expired or not covering a bundle's hosts is made anew.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_authority_vouches_for_the_recorded_hosts_alone_and_not_for_long() {
    let scratch = tempfile::tempdir().unwrap();
    let bundle = scratch.path().join("bundle");
    shop_bundle(&bundle);
    let ca_dir = scratch.path().join("ca");
    let options = ProxyOptions { ca_dir: Some(ca_dir.clone()), ..ProxyOptions::default() };
    let proxy = Proxy::start(ReplayArchive::open(&bundle).unwrap(), &options, None).await.unwrap();
    let authority = reqwest::Certificate::from_pem(&std::fs::read(proxy.authority().certificate_path()).unwrap());
    let client = reqwest::Client::builder()
        .proxy(reqwest::Proxy::all(proxy.url()).unwrap())
        .tls_certs_only([authority.unwrap()])
        .build()
        .unwrap();
    let page = client.get(SHOP).header("Accept", "text/html").send().await.unwrap();
    assert_eq!(page.status(), 200, "the recorded host's certificate is trusted through the authority");
    let forged = client.get("https://bank.example/").header("Referer", SHOP).send().await.unwrap_err();
    let chain = std::iter::successors(Some(&forged as &dyn std::error::Error), |error| error.source())
        .map(|error| error.to_string())
        .collect::<Vec<_>>()
        .join(": ");
    assert!(chain.contains("NameConstraintViolation"), "refused for its name constraints: {chain}");
    proxy.close();

    let scope: Value = serde_json::from_slice(&std::fs::read(ca_dir.join("trace-replay-ca.json")).unwrap()).unwrap();
    assert_eq!(scope["hosts"], json!(["shop.test"]));
    let lasts = scope["not_after"].as_u64().unwrap() - scope["not_before"].as_u64().unwrap();
    assert!(lasts <= 31 * 24 * 3600, "valid for {lasts} s");

    // Kept and still good: the same authority. Expired: a new one, covering what the old one did.
    let pem = || std::fs::read(ca_dir.join("trace-replay-ca.pem")).unwrap();
    let first = pem();
    let hosts = std::collections::BTreeSet::from(["shop.test".to_owned()]);
    trace_replay::proxy::Authority::load_or_create(Some(&ca_dir), &hosts).unwrap();
    assert_eq!(pem(), first);
    let mut expired = scope.clone();
    expired["not_after"] = json!(1_000);
    std::fs::write(ca_dir.join("trace-replay-ca.json"), expired.to_string()).unwrap();
    trace_replay::proxy::Authority::load_or_create(Some(&ca_dir), &hosts).unwrap();
    assert_ne!(pem(), first, "an expired authority is made anew");
    let wider = std::collections::BTreeSet::from(["api.shop.example".to_owned(), "10.0.0.7".to_owned()]);
    let second = pem();
    trace_replay::proxy::Authority::load_or_create(Some(&ca_dir), &wider).unwrap();
    assert_ne!(pem(), second, "one that does not cover a bundle's hosts is made anew");
    let scope: Value = serde_json::from_slice(&std::fs::read(ca_dir.join("trace-replay-ca.json")).unwrap()).unwrap();
    assert_eq!(scope["hosts"], json!(["10.0.0.7", "api.shop.example", "shop.test"]));
}

/// `trace-replay serve BUNDLE --proxy-port 0 ARGS…` with its standard input and output piped, once it has
/// said where it listens: the process, the proxy's URL, and the lines it prints after.
fn piped_proxy(
    bundle: &std::path::Path,
    args: &[&std::ffi::OsStr],
) -> (std::process::Child, String, std::io::Lines<BufReader<std::process::ChildStdout>>) {
    let mut serve = Command::new(env!("CARGO_BIN_EXE_trace-replay"))
        .arg("serve")
        .arg(bundle)
        .args(["--proxy-port", "0"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(serve.stdout.take().unwrap()).lines();
    let mut proxy = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(url) = line.strip_prefix("proxy: ") {
            proxy = Some(url.to_owned());
        }
        if line.starts_with("press Ctrl+C") {
            break;
        }
    }
    (serve, proxy.expect("the proxy's URL"), lines)
}

/// Issue #45: `serve --proxy-port --episode` outlived the Python process that started it (killed, or
/// stopped with SIGTERM), listening for good and never writing its episode. With
/// `--stop-when-stdin-closes`, it stops when its standard input ends, as it does when its parent is
/// gone, and writes the episode; while the input is open, it serves.
#[test]
fn the_proxy_stops_and_writes_its_episode_when_its_standard_input_closes() {
    use std::io::Write as _;
    let scratch = tempfile::tempdir().unwrap();
    let bundle = scratch.path().join("bundle");
    shop_bundle(&bundle);
    let episode = scratch.path().join("episode");
    let (mut serve, proxy, _lines) =
        piped_proxy(&bundle, &["--stop-when-stdin-closes".as_ref(), "--episode".as_ref(), episode.as_os_str()]);
    let mut stdin = serve.stdin.take().unwrap();
    stdin.write_all(b"anything written is read and dropped\n").unwrap();
    std::thread::sleep(Duration::from_secs(1));
    assert!(serve.try_wait().unwrap().is_none(), "it serves while its input is open");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = reqwest::Client::builder().proxy(reqwest::Proxy::all(&proxy).unwrap()).build().unwrap();
        client.get("http://shop.test/").header("Accept", "text/html").send().await.ok();
    });
    drop(stdin);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while serve.try_wait().unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "still serving 20 s after its input closed");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(episode.join("served.json").is_file() && episode.join("session/manifest.json").is_file());
}

/// Issue #48: one proxy serves episode after episode (`--episodes-on-stdin`), as BrowserGym's package
/// resets, each from a clean slate: the recording's start cookies are handed to each episode's browser
/// (had the first episode's handing been kept, the second would be served logged out), each episode's
/// session holds its own requests alone, each is scored on its own, and a request that is not one is
/// answered with an error and changes nothing. Standard input ending writes the episode being recorded.
#[test]
fn one_proxy_serves_episode_after_episode_each_from_a_clean_slate() {
    use std::io::Write as _;
    let scratch = tempfile::tempdir().unwrap();
    let bundle = scratch.path().join("bundle");
    shop_bundle(&bundle);
    let (mut serve, proxy, mut lines) = piped_proxy(&bundle, &["--episodes-on-stdin".as_ref()]);
    let mut stdin = serve.stdin.take().unwrap();
    let mut ask = move |asked: Value| -> Value {
        writeln!(stdin, "{asked}").unwrap();
        serde_json::from_str(&lines.next().expect("an answer").unwrap()).unwrap()
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    // A browser of the episode's own, as each BrowserGym episode has a context of its own: what the
    // shop's page hands it, and what `/api/me` answers it then.
    let visit = |marker: &str| {
        runtime.block_on(async {
            let client = reqwest::Client::builder()
                .proxy(reqwest::Proxy::all(&proxy).unwrap())
                .tls_danger_accept_invalid_certs(true)
                .build()
                .unwrap();
            let page = client.get(SHOP).header("Accept", "text/html").header("Referer", SHOP).send().await.unwrap();
            let handed: Vec<String> = page
                .headers()
                .get_all("set-cookie")
                .iter()
                .map(|value| value.to_str().unwrap().split(';').next().unwrap().to_owned())
                .collect();
            // As a browser sends what it was handed.
            let cookie = handed.join("; ");
            let me = client.get("https://shop.test/api/me").header("Referer", SHOP).header("Cookie", cookie);
            let me = me.send().await.unwrap().text().await.unwrap();
            let marked = client.get(format!("https://shop.test/{marker}")).header("Referer", SHOP).send().await;
            assert!(marked.is_err(), "nothing recorded answers /{marker}");
            (handed, me)
        })
    };
    let (first, second) = (scratch.path().join("first"), scratch.path().join("second"));

    assert_eq!(ask(json!({ "end": {} })), json!({ "error": "no episode is being recorded: begin one first" }));
    assert_eq!(ask(json!({ "begin": { "episode": first } })), json!({ "began": first }));
    let refused = ask(json!({ "begin": { "episode": second } }));
    assert!(refused["error"].as_str().unwrap().contains("end it first"), "{refused}");
    let (handed, me) = visit("first-episode-only");
    assert_eq!(handed, ["session=abc123", "theme=dark"], "the start cookies, handed to the first browser");
    assert_eq!(me, r#"{"user":"ada"}"#);
    let ended = ask(json!({ "end": { "answer": "ada", "steps": 2 } }));
    assert_eq!(ended["ended"]["episode"], json!(first), "{ended}");
    let result = &ended["ended"]["result"];
    assert_eq!((result["steps"].as_u64(), result["answer"].as_str()), (Some(2), Some("ada")), "{result:#}");
    assert_eq!(result["requests"]["missed"], 1, "the first episode's miss is its own: {result:#}");
    let written: Value = serde_json::from_slice(&std::fs::read(first.join("result.json")).unwrap()).unwrap();
    assert_eq!(&written, result, "scored as `trace-replay score` writes it");

    let garbled = ask(json!({ "begin": { "folder": second } }));
    assert!(garbled["error"].as_str().unwrap().starts_with("not a request"), "{garbled}");
    assert_eq!(ask(json!({ "begin": { "episode": second } })), json!({ "began": second }));
    let (handed, me) = visit("second-episode-only");
    assert_eq!(handed, ["session=abc123", "theme=dark"], "handed again: nothing of the first episode's was kept");
    assert_eq!(me, r#"{"user":"ada"}"#);
    // The caller goes (`ask` holds its end of the pipe): the episode being recorded is written, and the
    // proxy stops.
    drop(ask);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while serve.try_wait().unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "still serving 20 s after its input closed");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(second.join("served.json").is_file() && !second.join("result.json").exists(), "written, not scored");
    let events = |episode: &std::path::Path| std::fs::read_to_string(episode.join("session/events.jsonl")).unwrap();
    let (first_events, second_events) = (events(&first), events(&second));
    assert!(first_events.contains("first-episode-only") && !first_events.contains("second-episode-only"));
    assert!(second_events.contains("second-episode-only") && !second_events.contains("first-episode-only"));
}

/// Issue #45: at its open-file limit the proxy's accept loop spun, 4 CPU-s per 10 s, writing 435 MB of
/// warnings to stderr in 12 s (which BrowserGym keeps per episode). It waits instead, saying so once; and
/// once connections close, it answers again.
#[test]
fn at_the_open_file_limit_the_proxy_waits_and_says_so_once() {
    let scratch = tempfile::tempdir().unwrap();
    let bundle = scratch.path().join("bundle");
    shop_bundle(&bundle);
    let stderr_path = scratch.path().join("stderr");
    let mut serve = Command::new("prlimit")
        .arg("--nofile=64")
        .arg(env!("CARGO_BIN_EXE_trace-replay"))
        .arg("serve")
        .arg(&bundle)
        .args(["--proxy-port", "0"])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(serve.stdout.take().unwrap()).lines();
    let mut proxy = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(url) = line.strip_prefix("proxy: ") {
            proxy = Some(url.strip_prefix("http://").unwrap().to_owned());
        }
        if line.starts_with("press Ctrl+C") {
            break;
        }
    }
    let proxy = proxy.expect("the proxy's URL");
    let cpu = || {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", serve.id())).unwrap_or_default();
        let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or_default().split_whitespace().collect();
        fields.get(11).and_then(|t| t.parse::<u64>().ok()).unwrap_or(0)
            + fields.get(12).and_then(|t| t.parse::<u64>().ok()).unwrap_or(0)
    };
    // `prlimit` execs trace-replay: the child is the proxy itself.
    let before = cpu();
    let held: Vec<std::net::TcpStream> = (0..100).filter_map(|_| std::net::TcpStream::connect(&proxy).ok()).collect();
    std::thread::sleep(Duration::from_secs(5));
    let ticks = cpu() - before;
    let said = std::fs::read_to_string(&stderr_path).unwrap();
    drop(held);
    assert!(ticks < 100, "{ticks} ticks of CPU in 5 s at the limit");
    assert!(said.len() < 4096, "{} bytes on stderr: {}", said.len(), &said[..said.len().min(500)]);
    assert_eq!(said.matches("limit of open files").count(), 1, "{said}");
    std::thread::sleep(Duration::from_secs(1));
    let mut probe = std::net::TcpStream::connect(&proxy).unwrap();
    probe.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    std::io::Write::write_all(
        &mut probe,
        b"GET https://shop.test/ HTTP/1.1\r\nHost: shop.test\r\nAccept: text/html\r\nSec-Fetch-Mode: navigate\r\n\r\n",
    )
    .unwrap();
    let mut answer = [0u8; 16];
    let read = std::io::Read::read(&mut probe, &mut answer).unwrap();
    assert!(answer[..read].starts_with(b"HTTP/1.1"), "answered again: {:?}", &answer[..read]);
    serve.kill().unwrap();
    serve.wait().unwrap();
}
