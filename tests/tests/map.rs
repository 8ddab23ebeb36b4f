//! Environment maps end to end, as a dataset builder makes them: three purchases in the demo shop (different
//! searches, products and quantities) are recorded in Chromium through the extension and the host, put in
//! a redacted dataset with `trace-host dataset`, and mapped with `trace-host map`. The map must have one
//! context for the product pages with the add-to-cart action parameterized by the products bought, the
//! search context with its query, the links nobody followed as potential actions; the same recordings must
//! give the same bytes, a merge must equal a build from all, the leave-one-out coverage must be what
//! counting the steps by hand gives, definitions must come from a model only (a scripted one on loopback),
//! and `trace-replay eval --map` must hand the map to the agent. Needs `cargo xtask dist`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use trace_e2e::browser::Build;
use trace_e2e::demo::{self, Purchase};
use trace_e2e::judge::{Behaviour, ScriptedJudge};
use trace_e2e::run;
use trace_e2e::site::DemoSite;
use trace_manifest::map::{EnvironmentMap, MapAction, MapCoverage, PageContext};

const PURCHASES: [Purchase; 3] = [
    Purchase { search: "mug", product: "blue-mug", quantity: 2 },
    Purchase { search: "tea", product: "teapot", quantity: 1 },
    Purchase { search: "red", product: "red-mug", quantity: 3 },
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_purchases_make_one_map_of_the_shop() {
    let Some(build) = Build::for_tests("three_purchases_make_one_map_of_the_shop") else { return };
    let site = DemoSite::start(0).unwrap();
    // A data directory each, as three people recording on their own machines.
    let data: Vec<tempfile::TempDir> = PURCHASES.iter().map(|_| tempfile::tempdir().unwrap()).collect();
    let mut bundles = Vec::new();
    for (purchase, data) in PURCHASES.iter().zip(&data) {
        bundles.push(demo::record_purchase(&build, &site, data.path(), purchase).await.unwrap());
    }
    let work = tempfile::tempdir().unwrap();
    let host = |args: &[&str]| run(&build.trace_host, args);

    // A redacted dataset of the three, as it would be shared, and its map.
    let dataset = work.path().join("dataset");
    let mut args = vec!["dataset"];
    args.extend(bundles.iter().map(|bundle| bundle.to_str().unwrap()));
    args.extend(["--out", dataset.to_str().unwrap()]);
    let made = host(&args);
    let made = String::from_utf8_lossy(&made.stdout);
    assert!(!made.contains("skipped"), "{made}");
    let map_dir = work.path().join("map");
    host(&["map", dataset.to_str().unwrap(), "--out", map_dir.to_str().unwrap()]);
    let map: EnvironmentMap = read_json(&map_dir.join("map.json"));
    let contexts: Vec<PageContext> =
        map.page_contexts.iter().map(|entry| read_json(&map_dir.join(&entry.context_mesh_path))).collect();
    let context = |pattern: &str| {
        contexts.iter().find(|context| context.pattern == pattern).unwrap_or_else(|| {
            let patterns: Vec<&str> = contexts.iter().map(|c| c.pattern.as_str()).collect();
            panic!("no context {pattern} among {patterns:?}")
        })
    };
    assert_eq!(map.statistics.recordings, 3);
    assert_eq!(map.workflows.len(), 3);

    // One context for every product page, its add-to-cart parameterized by the products bought.
    let item_contexts: Vec<&str> =
        contexts.iter().map(|c| c.pattern.as_str()).filter(|p| p.starts_with("{site}/item/")).collect();
    assert_eq!(item_contexts, ["{site}/item/{item}"]);
    let item = context("{site}/item/{item}");
    assert_eq!(item.example_urls.len(), 3, "{:?}", item.example_urls);
    let add = action(item, "Click \"Add to cart\" with {product}");
    assert!(add.is_taken && add.is_parameterized);
    assert_eq!(add.parameter_name.as_deref(), Some("product"));
    assert_eq!(add.possible_values, ["blue-mug", "red-mug", "teapot"]);
    assert_eq!(add.instances.iter().filter(|instance| instance.is_taken).count(), 3);
    let quantity = action(item, "Type {qty} into \"Quantity\"");
    assert_eq!(quantity.possible_values, ["1", "2", "3"]);
    // The link on every product page that nobody followed is offered, not taken.
    let back = action(item, "Click \"All products\"");
    assert!(!back.is_taken && back.instances.iter().all(|instance| !instance.is_taken));
    assert_eq!(back.instances.len(), 3, "one per recording that saw it");

    // The search: its query is a parameter of the page, typed on the home page; the results are one
    // parameterized link.
    let search = context("{site}/search?q={q}");
    let result = action(search, "Click {link_text}");
    assert!(result.is_taken);
    assert_eq!(
        result.possible_values,
        ["Blue Mug", "Red Mug", "Teapot"],
        "{}",
        serde_json::to_string_pretty(search).unwrap()
    );
    let home = context("{site}/");
    let typed = action(home, "Type {q} into \"Search products\"");
    assert_eq!(typed.possible_values, ["mug", "red", "tea"]);
    // The home page's links nobody followed (the purchases went to the sign-in page by its address).
    let links = action(home, "Click {link_text}");
    assert!(!links.is_taken);
    for link in ["Your cart", "Today's deals", "Sign in"] {
        assert!(links.possible_values.iter().any(|value| value == link), "{link} in {:?}", links.possible_values);
    }
    // Signing in is the same three actions in every recording: a procedure.
    assert!(
        map.tacit_knowledge.procedures.iter().any(|procedure| procedure.name.contains("\"Username\"")
            && procedure.name.contains("\"Password\"")
            && procedure.recordings.len() == 3),
        "{:#?}",
        map.tacit_knowledge.procedures
    );
    // Nothing secret: the password is a placeholder wherever the map shows what was typed.
    let everything = files_of(&map_dir);
    for (path, bytes) in &everything {
        let text = String::from_utf8_lossy(bytes);
        assert!(!text.contains(trace_e2e::site::DEMO_PASSWORD), "the password is in {}", path.display());
    }
    let graph = String::from_utf8(everything[Path::new("map.html")].clone()).unwrap();
    assert!(graph.contains("<svg") && graph.contains("{site}/item/{item}"));

    // The same recordings give the same bytes.
    let again = work.path().join("again");
    host(&["map", dataset.to_str().unwrap(), "--out", again.to_str().unwrap()]);
    assert_eq!(files_of(&again), everything);

    // A map of two, merged with the third, is the map of all three.
    let zips: Vec<PathBuf> = {
        let mut zips: Vec<PathBuf> =
            std::fs::read_dir(dataset.join("bundles")).unwrap().map(|entry| entry.unwrap().path()).collect();
        zips.sort();
        zips
    };
    let merged = work.path().join("merged");
    host(&["map", zips[0].to_str().unwrap(), zips[1].to_str().unwrap(), "--out", merged.to_str().unwrap()]);
    assert_ne!(files_of(&merged), everything);
    host(&["map", zips[2].to_str().unwrap(), "--merge", merged.to_str().unwrap(), "--out", merged.to_str().unwrap()]);
    assert_eq!(files_of(&merged), everything);

    // Leave-one-out coverage, as counted by hand from the purchases. Each has ten actions on pages: the user
    // name, the password, "Sign in", the search typed, Enter, the product's link, a click in the quantity's
    // field, Control+A there, the quantity typed, "Add to cart". Every page's context is known from the
    // other two recordings (the product pages' template included), and so is every action. The values not
    // seen elsewhere: the search typed, the quantity and the product added differ in every purchase; the
    // product's link was offered by another recording only for the red mug (the "mug" search listed it).
    let output = host(&["map", dataset.to_str().unwrap(), "--coverage", "--json"]);
    let coverage: MapCoverage = serde_json::from_slice(&output.stdout).unwrap();
    let by_task: BTreeMap<String, (usize, usize, usize, usize)> = coverage
        .recordings
        .iter()
        .map(|r| (r.task.clone(), (r.counts.steps, r.counts.in_context, r.counts.action_known, r.counts.value_seen)))
        .collect();
    let task_of = |product: &str| {
        map.workflows.iter().find(|workflow| workflow.name.ends_with(product)).unwrap().recording.clone()
    };
    assert_eq!(by_task[&task_of("blue-mug")], (10, 10, 10, 6), "{coverage:#?}");
    assert_eq!(by_task[&task_of("teapot")], (10, 10, 10, 6), "{coverage:#?}");
    assert_eq!(by_task[&task_of("red-mug")], (10, 10, 10, 7), "{coverage:#?}");
    let table = String::from_utf8(host(&["map", dataset.to_str().unwrap(), "--coverage"]).stdout).unwrap();
    assert!(table.contains("leave-one-out coverage of 127.0.0.1 (3 recording(s))"), "{table}");
    assert!(
        table.lines().any(|line| line.starts_with("all") && line.contains("30") && line.ends_with("63%")),
        "{table}"
    );

    // Definitions only from a model, each saying so; asked again, the cache answers and the map is the same.
    let judge = ScriptedJudge::start(Behaviour::Scripted).await;
    let cache = work.path().join("llm-cache");
    let defined = work.path().join("defined");
    let with_model = |out: &Path| {
        let output = std::process::Command::new(&build.trace_host)
            .args(["map", dataset.to_str().unwrap(), "--out", out.to_str().unwrap()])
            .args(["--llm", "scripted-model", "--llm-cache", cache.to_str().unwrap()])
            .env("OPENAI_BASE_URL", judge.base_url())
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    };
    with_model(&defined);
    let with_definitions: EnvironmentMap = read_json(&defined.join("map.json"));
    let definitions = &with_definitions.tacit_knowledge.definitions;
    assert_eq!(definitions.len(), map.page_contexts.len(), "{definitions:#?}");
    assert_eq!(with_definitions.statistics.definitions, definitions.len());
    assert!(definitions.iter().all(|definition| definition.source == "model:scripted-model"));
    assert!(map.tacit_knowledge.definitions.is_empty() && map.statistics.definitions == 0, "none without a model");
    assert_eq!(judge.requests(), 1);
    let defined_again = work.path().join("defined-again");
    with_model(&defined_again);
    assert_eq!(judge.requests(), 1, "the second map is answered from the cache");
    assert_eq!(files_of(&defined_again), files_of(&defined));
    // A model out of reach: a clear error, and nothing written.
    let unreachable = work.path().join("unreachable");
    let output = std::process::Command::new(&build.trace_host)
        .args(["map", dataset.to_str().unwrap(), "--out", unreachable.to_str().unwrap(), "--llm", "other-model"])
        .args(["--llm-cache", cache.to_str().unwrap()])
        .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(error.contains("no definitions for the map") && error.contains("cannot reach the model"), "{error}");
    assert!(!unreachable.join("map.json").exists());

    // `eval --map` hands the map to the agent: this one answers with the map's name, read from TRACE_MAP.
    let agent = r#"name=$(sed -n 's/^  "name": "\(.*\)",$/\1/p' "$TRACE_MAP/map.json"); printf '{"text": "%s", "success": true}' "$name" > "$TRACE_OUT/done.json""#;
    let run_dir = work.path().join("run");
    let eval = run(
        &build.trace_replay,
        &["eval", zips[0].to_str().unwrap(), "--agent", agent, "--map", map_dir.to_str().unwrap()]
            .into_iter()
            .chain(["--out", run_dir.to_str().unwrap(), "--timeout", "60", "--json"])
            .collect::<Vec<_>>(),
    );
    let results = std::fs::read_to_string(run_dir.join(trace_manifest::eval::RESULTS_FILE)).unwrap();
    let result: trace_manifest::eval::EvalResult = serde_json::from_str(results.lines().next().unwrap()).unwrap();
    assert_eq!(result.answer.as_deref(), Some(map.name.as_str()), "{}", String::from_utf8_lossy(&eval.stdout));
    let not_a_map = std::process::Command::new(&build.trace_replay)
        .args(["eval", zips[0].to_str().unwrap(), "--agent", "true", "--map", dataset.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!not_a_map.status.success());
    assert!(String::from_utf8_lossy(&not_a_map.stderr).contains("is not a map folder"));
}

fn action<'c>(context: &'c PageContext, template: &str) -> &'c MapAction {
    context.available_actions.iter().find(|action| action.action == template).unwrap_or_else(|| {
        let templates: Vec<&str> = context.available_actions.iter().map(|a| a.action.as_str()).collect();
        panic!(
            "no action {template} in {} among {templates:?}\n{}",
            context.pattern,
            serde_json::to_string_pretty(context).unwrap()
        )
    })
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> T {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every file under `dir`, by relative path.
fn files_of(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(folder) = pending.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                files.insert(path.strip_prefix(dir).unwrap().to_owned(), std::fs::read(&path).unwrap());
            }
        }
    }
    let names: BTreeSet<&Path> = files.keys().map(PathBuf::as_path).collect();
    assert!(names.contains(Path::new("map.json")), "{names:?}");
    files
}
