//! Benchmark of the replay's request matcher: a synthetic 20,000-request recording (many hosts and paths,
//! static assets, JSON APIs with cache busters, searches with campaign parameters, JSON and form POSTs, a busy
//! analytics endpoint, polling) and a mix of lookups that hit at each level or miss, each timed on its own.
//! Prints p50, p99 and max per match kind and overall against the target p99 ≤ 50 µs. Deterministic: a fixed
//! seed, no clock in the data.
//!
//! Run with `cargo bench -p trace-replay --bench matcher`.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};
use trace_analysis::score::SplitMix64;

use trace_replay::matcher::{FUZZY_THRESHOLD, MatchKind, Matcher, RecordedRequest, Request};

const RECORDED: usize = 20_000;
const LOOKUPS_PER_KIND: usize = 25_000;
const HOSTS: u64 = 40;
const TARGET_P99: Duration = Duration::from_micros(50);
const JSON: &str = "application/json";
const FORM: &str = "application/x-www-form-urlencoded";

/// The generated traffic's random numbers: the same sequence on every machine.
struct Rng(SplitMix64);

impl Rng {
    fn below(&mut self, bound: u64) -> u64 {
        self.0.next_u64() % bound
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

const SYLLABLES: &[&str] = &["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "po", "gri", "bla", "cor", "dun"];
const RESOURCES: &[&str] = &["products", "reviews", "categories", "stock", "prices", "related"];
const STATIC_KINDS: &[(&str, &str)] = &[("js", "js"), ("css", "css"), ("img", "webp"), ("fonts", "woff2")];

/// A made-up word of 2 to 4 syllables: realistic lengths for search terms.
fn word(rng: &mut Rng) -> String {
    (0..2 + rng.below(3)).map(|_| rng.pick(SYLLABLES)).collect()
}

/// The recorded request and how to ask for it again so that each level answers.
struct Generated {
    request: RecordedRequest,
    /// A request that only the canonical level answers (volatile parts changed), when the shape allows one.
    canonical_variant: Option<Lookup>,
    /// A request close enough for the fuzzy level, when the shape allows one.
    fuzzy_variant: Option<Lookup>,
}

#[derive(Clone)]
struct Lookup {
    method: String,
    url: String,
    body: Option<Vec<u8>>,
    content_type: Option<String>,
}

impl Lookup {
    fn get(url: String) -> Lookup {
        Lookup { method: "GET".into(), url, body: None, content_type: None }
    }

    fn post(url: String, content_type: &str, body: String) -> Lookup {
        Lookup { method: "POST".into(), url, body: Some(body.into_bytes()), content_type: Some(content_type.into()) }
    }

    fn of(request: &RecordedRequest) -> Lookup {
        Lookup {
            method: request.method.clone(),
            url: request.url.clone(),
            body: request.body.clone(),
            content_type: request.content_type.clone(),
        }
    }

    fn into_recorded(self) -> RecordedRequest {
        RecordedRequest {
            method: self.method,
            url: self.url,
            body: self.body,
            content_type: self.content_type,
            state: Default::default(),
            accept: None,
        }
    }
}

fn generate(rng: &mut Rng, clock: &mut u64) -> Generated {
    *clock += 1 + rng.below(40);
    let timestamp = 1_700_000_000_000 + *clock;
    let host = rng.below(HOSTS);
    let roll = rng.below(100);
    let (recorded, canonical_variant, fuzzy_variant) = match roll {
        // Static assets: content-hashed names, asked exactly again.
        0..=29 => {
            let (dir, ext) = STATIC_KINDS[rng.below(STATIC_KINDS.len() as u64) as usize];
            let url =
                format!("https://cdn{host}.example/static/{dir}/{}-{:08x}.{ext}", word(rng), rng.0.next_u64() as u32);
            (Lookup::get(url.clone()), Some(Lookup::get(format!("{url}#top"))), None)
        }
        // JSON API with a jQuery cache buster.
        30..=54 => {
            let resource = rng.pick(RESOURCES);
            let category = rng.below(30);
            let page = 1 + rng.below(8);
            let base = format!("https://api{host}.example/api/{resource}");
            let url = format!("{base}?category={category}&page={page}&_={timestamp}");
            let canonical = format!("{base}?_={}&page={page}&category={category}", timestamp + 999_999);
            let fuzzy = format!("{base}?category={category}&page={page}&limit=20&_={}", timestamp + 5);
            (Lookup::get(url), Some(Lookup::get(canonical)), Some(Lookup::get(fuzzy)))
        }
        // Searches arriving from campaigns.
        55..=66 => {
            let query = word(rng);
            let page = 1 + rng.below(3);
            let base = format!("https://shop{host}.example/search");
            let url = format!("{base}?q={query}&page={page}&utm_source=mail&utm_campaign=c{}", rng.below(9));
            let canonical = format!("{base}?page={page}&q={query}&utm_source=ad");
            let typo = format!("{query}{}", rng.pick(&["s", "e", "x"]));
            (Lookup::get(url), Some(Lookup::get(canonical)), Some(Lookup::get(format!("{base}?q={typo}&page={page}"))))
        }
        // Product pages.
        67..=76 => {
            let url = format!("https://shop{host}.example/product/{}?ref=home&t={timestamp}", rng.below(5_000));
            let canonical = url.replace("&t=", "&t=9");
            (Lookup::get(url), Some(Lookup::get(canonical)), None)
        }
        // Cart changes: JSON POSTs to one URL per host, told apart by their bodies.
        77..=84 => {
            let url = format!("https://api{host}.example/api/cart");
            let (item, qty) = (rng.below(5_000), 1 + rng.below(5));
            let body = format!(
                r#"{{"action":"add","item":{item},"qty":{qty},"options":{{"size":"M","gift":false}},"ts":{timestamp}}}"#
            );
            let canonical =
                format!(r#"{{"ts":1,"qty":{qty},"item":{item},"options":{{"gift":false,"size":"M"}},"action":"add"}}"#);
            let fuzzy =
                format!(r#"{{"action":"add","item":{item},"qty":{qty},"options":{{"size":"L","gift":false}}}}"#);
            (
                Lookup::post(url.clone(), JSON, body),
                Some(Lookup::post(url.clone(), JSON, canonical)),
                Some(Lookup::post(url, JSON, fuzzy)),
            )
        }
        // One busy analytics endpoint: the largest fuzzy bucket.
        85..=91 => {
            let url = "https://collect.example/g/collect".to_owned();
            let event = rng.pick(&["page_view", "scroll", "click", "view_item", "add_to_cart"]);
            let page = format!("/p/{}", rng.below(2_000));
            let body =
                format!(r#"{{"en":"{event}","dl":"{page}","sid":"s{host}","seq":{},"_":{timestamp}}}"#, rng.below(50));
            let canonical = body.replace(r#""_":"#, r#""_":9"#);
            (
                Lookup::post(url.clone(), "text/plain;charset=UTF-8", body),
                Some(Lookup::post(url, "text/plain;charset=UTF-8", canonical)),
                None,
            )
        }
        // Form logins.
        92..=94 => {
            let url = format!("https://shop{host}.example/login");
            let user = word(rng);
            let body = format!("user={user}&pass=secret&csrf={:x}", rng.0.next_u64());
            (Lookup::post(url, FORM, body), None, None)
        }
        // Polling: the same URL recorded again and again.
        _ => (Lookup::get(format!("https://api{host}.example/api/poll?channel=orders")), None, None),
    };
    Generated { request: recorded.into_recorded(), canonical_variant, fuzzy_variant }
}

fn misses(rng: &mut Rng) -> Lookup {
    let host = rng.below(HOSTS);
    match rng.below(4) {
        0 => Lookup::get(format!("https://shop{host}.example/never/seen/{}", rng.below(1_000))),
        1 => Lookup::get(format!("https://unknown{host}.example/search?q=mug")),
        // Known path, nothing close enough.
        2 => Lookup::get(format!("https://shop{host}.example/search?q=zzzzzzzzzzzz&page=77")),
        _ => Lookup::post(format!("https://api{host}.example/api/cart"), JSON, r#"{"action":"empty"}"#.into()),
    }
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    let rank = ((sorted.len() as f64 * fraction).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

fn main() {
    let mut rng = Rng(SplitMix64(0x7124_CE00_0000_0001));
    let mut clock = 0;
    let generated: Vec<Generated> = (0..RECORDED).map(|_| generate(&mut rng, &mut clock)).collect();
    let recorded: Vec<RecordedRequest> = generated.iter().map(|g| g.request.clone()).collect();
    let hosts: std::collections::HashSet<&str> = recorded.iter().filter_map(|r| r.url.split('/').nth(2)).collect();
    let posts = recorded.iter().filter(|r| r.method == "POST").count();

    let started = Instant::now();
    let mut matcher = Matcher::new(recorded.clone());
    let build = started.elapsed();

    // The lookups, by the level meant to answer them, shuffled together so caches see a realistic mix.
    let mut lookups: Vec<(&str, Lookup)> = Vec::with_capacity(4 * LOOKUPS_PER_KIND);
    let pick = |rng: &mut Rng| &generated[rng.below(RECORDED as u64) as usize];
    for _ in 0..LOOKUPS_PER_KIND {
        lookups.push(("exact", Lookup::of(&pick(&mut rng).request)));
    }
    while lookups.len() < 2 * LOOKUPS_PER_KIND {
        if let Some(variant) = &pick(&mut rng).canonical_variant {
            lookups.push(("canonical", variant.clone()));
        }
    }
    while lookups.len() < 3 * LOOKUPS_PER_KIND {
        if let Some(variant) = &pick(&mut rng).fuzzy_variant {
            lookups.push(("fuzzy", variant.clone()));
        }
    }
    while lookups.len() < 4 * LOOKUPS_PER_KIND {
        lookups.push(("miss", misses(&mut rng)));
    }
    for i in (1..lookups.len()).rev() {
        lookups.swap(i, rng.below(i as u64 + 1) as usize);
    }

    let mut by_kind: BTreeMap<&str, Vec<Duration>> = BTreeMap::new();
    let mut intended_vs_answered: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    let mut all = Vec::with_capacity(lookups.len());
    let mut fuzzy_scores = Vec::new();
    for (intended, lookup) in &lookups {
        let started = Instant::now();
        let matched = matcher.lookup(&Request {
            method: &lookup.method,
            url: &lookup.url,
            body: lookup.body.as_deref(),
            content_type: lookup.content_type.as_deref(),
            state: None,
            accept: None,
            authorization: None,
        });
        let elapsed = started.elapsed();
        let answered = match black_box(matched).map(|m| m.kind) {
            Some(MatchKind::Exact) => "exact",
            Some(MatchKind::Canonical) => "canonical",
            Some(MatchKind::Fuzzy { score }) => {
                fuzzy_scores.push(score);
                "fuzzy"
            }
            None => "miss",
        };
        by_kind.entry(answered).or_default().push(elapsed);
        *intended_vs_answered.entry((intended, answered)).or_default() += 1;
        all.push(elapsed);
    }

    println!("matcher benchmark");
    println!(
        "  recording: {RECORDED} requests ({posts} POST), {} hosts; index built in {:.1} ms",
        hosts.len(),
        build.as_secs_f64() * 1e3
    );
    println!("  lookups: {} ({LOOKUPS_PER_KIND} meant for each level and for misses), each timed alone", lookups.len());
    println!(
        "  fuzzy threshold {FUZZY_THRESHOLD}; fuzzy scores seen: min {:.3}, max {:.3}",
        fuzzy_scores.iter().copied().fold(f64::INFINITY, f64::min),
        fuzzy_scores.iter().copied().fold(f64::NEG_INFINITY, f64::max)
    );
    println!();
    println!("  {:<10} {:>7} {:>9} {:>9} {:>9}", "answered", "count", "p50 µs", "p99 µs", "max µs");
    let row = |name: &str, durations: &mut Vec<Duration>| {
        durations.sort_unstable();
        println!(
            "  {:<10} {:>7} {:>9.2} {:>9.2} {:>9.2}",
            name,
            durations.len(),
            micros(percentile(durations, 0.50)),
            micros(percentile(durations, 0.99)),
            micros(*durations.last().expect("every row has lookups"))
        );
    };
    for kind in ["exact", "canonical", "fuzzy", "miss"] {
        if let Some(durations) = by_kind.get_mut(kind) {
            row(kind, durations);
        }
    }
    row("overall", &mut all);
    println!();
    println!("  meant for → answered by:");
    for ((intended, answered), count) in &intended_vs_answered {
        println!("    {intended:<10} → {answered:<10} {count:>6}");
    }
    let p99 = percentile(&all, 0.99);
    println!();
    println!(
        "  target: overall p99 ≤ {} µs: {} (p99 {:.2} µs)",
        TARGET_P99.as_micros(),
        if p99 <= TARGET_P99 { "met" } else { "NOT met" },
        micros(p99)
    );
}
