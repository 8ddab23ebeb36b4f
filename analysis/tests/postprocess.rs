//! Post-processing of the real demo recording (`fixtures/demo-events.jsonl`): the ignore list, the
//! checkpoints and whether they hold. The DOM snapshots are not committed (the whole bundle is 1.7 MB), so
//! the final-text checkpoint is covered by the host's tests instead.

use trace_analysis::evidence::{Evidence, holds};
use trace_analysis::{checkpoints, exchange, ignore, trajectory};
use trace_manifest::postprocess::Predicate;
use trace_manifest::task::TaskId;

fn demo_evidence() -> Evidence {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/demo-events.jsonl");
    let events = trace_bundle::archive::parse_events(&std::fs::read(path).unwrap()).unwrap();
    Evidence { exchanges: exchange::exchanges(&events), events, ..Evidence::default() }
}

#[test]
fn the_demo_shop_ignores_its_tracker_and_checkpoints_its_login_cart_and_search() {
    let evidence = demo_evidence();
    let task_id: TaskId = "demo".parse().unwrap();
    let derived = trajectory::derive(task_id, &evidence.events, None);
    let ignored = ignore::ignore_list(&evidence.exchanges);
    assert_eq!(ignored, ["127.0.0.1:46297/collect?"]);
    assert!(!ignored.iter().any(|pattern| "127.0.0.1:46297/api/products?_=1".contains(pattern.as_str())));

    let checkpoints = checkpoints::select(&evidence, &derived.trajectory, &derived.credentials, &ignored);
    let predicates: Vec<&Predicate> = checkpoints.iter().map(|c| &c.predicate).collect();
    let request = |url: &str, fields: &[(&str, &str)]| Predicate::Request {
        method: "POST".into(),
        url_pattern: url.into(),
        body_fields: fields.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        credential_fields: Default::default(),
    };
    let url = |pattern: &str| Predicate::Url { pattern: pattern.into() };
    // The password signs in only as given: named by its placeholder, never by its value.
    let login = Predicate::Request {
        method: "POST".into(),
        url_pattern: "127.0.0.1:46297/login".into(),
        body_fields: [("username".to_owned(), "ann".to_owned())].into(),
        credential_fields: [("password".to_owned(), derived.credentials[0].placeholder())].into(),
    };
    assert_eq!(
        predicates,
        [
            &login,
            &url("127.0.0.1:46297/account"),
            &request(
                "127.0.0.1:46297/cart",
                &[("product", "blue-mug"), ("qty", "1"), ("shipping", "express"), ("gift_wrap", "yes")]
            ),
            &url("127.0.0.1:46297/cart"),
            &url("127.0.0.1:46297/search?q=mug"),
        ]
    );
    for checkpoint in &checkpoints {
        assert!(holds(&checkpoint.predicate, &evidence).contains(&checkpoint.event_ids[0]), "{checkpoint:?}");
        assert!(!serde_json::to_string(checkpoint).unwrap().contains("blue-mug-42"));
    }
    let steps: Vec<Option<usize>> = checkpoints.iter().map(|c| c.step).collect();
    assert!(steps.windows(2).all(|pair| pair[0] <= pair[1]), "in the order reached: {steps:?}");
}
