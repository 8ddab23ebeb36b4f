//! The judge of `trace-replay eval --judge` against the scripted judge of [`trace_e2e::judge`], an
//! OpenAI-compatible endpoint on loopback: each question is asked once and then answered from the cache,
//! by this judge or by a later one sharing its cache; a judge that refuses or answers without a verdict
//! costs the episode its judge verdicts, said in `judge.error`, and nothing else. No browser: the episode
//! judged is written here; `tests/eval.rs` judges real ones.

use serde_json::json;
use trace_analysis::evidence::{Evidence, page_text};
use trace_analysis::judge::Episode;
use trace_analysis::score;
use trace_e2e::judge::{Behaviour, ScriptedJudge};
use trace_manifest::bundle::TaskInfo;
use trace_manifest::eval::{EvalResult, Rubric};
use trace_manifest::postprocess::{Checkpoint, Predicate};
use trace_manifest::trajectory::ToolCall;
use trace_replay::judge::{Judge, judge_episode};

struct Fixture {
    task: TaskInfo,
    demonstration: Vec<ToolCall>,
    agent_steps: Vec<ToolCall>,
    evidence: Evidence,
    checkpoints: Vec<Checkpoint>,
    rubric: Rubric,
}

impl Fixture {
    /// A person who searched for mugs and ended on the results; an agent who did the same.
    fn new() -> Fixture {
        let task = serde_json::from_value(json!({
            "id": "mugs", "source": "test", "task_type": "action", "description": "Search the shop for mugs",
            "website": "http://shop.test/", "status": "stopped"
        }))
        .unwrap();
        let call = |url: &str| -> ToolCall {
            serde_json::from_value(json!({"name": "navigate", "params": {"url": url}, "url_after": url, "ts": 0.0}))
                .unwrap()
        };
        let results = "http://shop.test/search?q=mug";
        let evidence = Evidence {
            events: vec![
                serde_json::from_value(
                    json!({"id": 2, "ts": 0.0, "tab_id": 1, "type": "navigation", "url": results, "cause": "typed"}),
                )
                .unwrap(),
            ],
            pages: vec![page_text(
                3,
                results,
                "dom/3.html",
                "<h1>Search</h1><p>2 products match mug: Blue Mug, Red Mug</p>",
            )],
            ..Evidence::default()
        };
        let checkpoints = vec![
            Checkpoint {
                id: "cp1".to_owned(),
                reason: "The results were reached".to_owned(),
                predicate: Predicate::Url { pattern: "shop.test/search?q=mug".to_owned() },
                event_ids: vec![],
                step: None,
                role: None,
                proposed_by: None,
            },
            Checkpoint {
                id: "cp2".to_owned(),
                reason: "The cart was changed".to_owned(),
                predicate: Predicate::Request {
                    method: "POST".to_owned(),
                    url_pattern: "shop.test/cart".to_owned(),
                    body_fields: Default::default(),
                    credential_fields: Default::default(),
                },
                event_ids: vec![],
                step: None,
                role: None,
                proposed_by: None,
            },
            Checkpoint {
                id: "cp3".to_owned(),
                reason: "The cart was shown".to_owned(),
                predicate: Predicate::Url { pattern: "shop.test/cart".to_owned() },
                event_ids: vec![],
                step: None,
                role: None,
                proposed_by: None,
            },
        ];
        let rubric = serde_json::from_value(json!({"items": [
            {"id": "listed", "requirement": "The results list the `Red Mug`", "verification": "Read the final page"},
            {"id": "reached", "weight": 2, "requirement": "The results were reached",
             "verification": {"kind": "url", "pattern": "search?q=mug"}}
        ]}))
        .unwrap();
        Fixture {
            task,
            demonstration: vec![call("http://shop.test/"), call(results)],
            agent_steps: vec![call(results)],
            evidence,
            checkpoints,
            rubric,
        }
    }

    fn episode(&self) -> Episode<'_> {
        Episode {
            task: &self.task,
            demonstration: &self.demonstration,
            agent_steps: &self.agent_steps,
            answer: None,
            evidence: &self.evidence,
        }
    }

    /// The episode's result as the rules score it, before any judge.
    fn result(&self) -> EvalResult {
        let checkpoints = score::checkpoints(&self.checkpoints, &self.evidence);
        let rubric = score::rubric(Some(&self.rubric), &self.checkpoints, &self.evidence);
        let mut result: EvalResult = serde_json::from_value(json!({
            "task_id": "mugs", "website": "http://shop.test/", "task_type": "action",
            "description": "Search the shop for mugs", "agent": "test", "started_at": "2026-01-01T00:00:00Z",
            "duration_seconds": 1.0, "ended": {"kind": "exited", "code": 0}, "steps": 1, "said_done": true,
            "success": 0.0, "success_basis": "rules", "checkpoints": checkpoints, "rubric": rubric,
            "spl": {"averaged": 0.0, "perfect": 0.0}, "live_attempts": 0,
            "requests": {"exact": 0, "canonical": 0, "fuzzy": 0, "ignored": 0, "missed": 0}
        }))
        .unwrap();
        result.spl = score::spl(&result.rubric, result.steps, 0.0);
        result
    }
}

async fn judged(judge: &Judge, fixture: &Fixture) -> EvalResult {
    let mut result = fixture.result();
    judge_episode(judge, &fixture.episode(), &fixture.checkpoints, Some(&fixture.rubric), &mut result).await;
    result
}

#[tokio::test]
async fn each_question_is_asked_once_and_then_answered_from_the_cache() {
    let server = ScriptedJudge::start(Behaviour::Scripted).await;
    let cache = tempfile::tempdir().unwrap();
    let fixture = Fixture::new();
    let judge = Judge::new("scripted-model", &server.base_url(), None, cache.path().to_owned()).unwrap();
    let first = judged(&judge, &fixture).await;
    let verdicts = first.judge.clone().unwrap();
    assert!(verdicts.error.is_none(), "{verdicts:#?}");
    assert!(verdicts.success.as_ref().unwrap().satisfied, "the agent ended where the person did");
    // In order, stopping at the first missed: cp3 is not asked.
    let checkpoints: Vec<(&str, bool)> =
        verdicts.checkpoints.iter().map(|c| (c.id.as_str(), c.verdict.satisfied)).collect();
    assert_eq!(checkpoints, [("cp1", true), ("cp2", false)]);
    assert_eq!(verdicts.partial_credit, 1.0 / 3.0);
    // The text item is the judge's; the predicate item stays the rules'.
    let listed = first.rubric.items.iter().find(|item| item.id == "listed").unwrap();
    assert_eq!((listed.satisfied, listed.judged_by.as_deref()), (Some(true), Some("scripted-model")));
    assert_eq!((first.rubric.averaged, first.rubric.perfect, first.rubric.judged), (1.0, 1.0, 1));
    assert_eq!(first.spl.averaged, 1.0, "the SPL follows the rubric the judge completed");
    let questions = 1 + 2 + 1;
    assert_eq!((verdicts.asked, verdicts.cached, server.requests()), (questions, 0, questions));

    // Again, and by another judge sharing the cache (another run, another machine): no request is made.
    for judge in
        [&judge, &Judge::new("scripted-model", "http://127.0.0.1:9/v1", None, cache.path().to_owned()).unwrap()]
    {
        let again = judged(judge, &fixture).await;
        let cached = again.judge.as_ref().unwrap();
        assert_eq!((cached.asked, cached.cached, server.requests()), (0, questions, questions));
        assert_eq!((&cached.success, &cached.checkpoints), (&verdicts.success, &verdicts.checkpoints));
    }
    // Another model is another question.
    let other = Judge::new("another-model", &server.base_url(), None, cache.path().to_owned()).unwrap();
    assert_eq!(judged(&other, &fixture).await.judge.unwrap().asked, questions);
}

#[tokio::test]
async fn a_failing_judge_costs_only_its_own_verdicts() {
    let fixture = Fixture::new();
    let rules = fixture.result();
    for (behaviour, says, requests) in
        [(Behaviour::Unavailable, "503", 3), (Behaviour::NoVerdict, "holds no verdict", 1)]
    {
        let server = ScriptedJudge::start(behaviour).await;
        let cache = tempfile::tempdir().unwrap();
        let judge = Judge::new("scripted-model", &server.base_url(), None, cache.path().to_owned()).unwrap();
        let result = judged(&judge, &fixture).await;
        let verdicts = result.judge.as_ref().unwrap();
        let error = verdicts.error.as_deref().unwrap_or_default();
        assert!(error.contains(says), "{behaviour:?}: {error:?}");
        assert!(verdicts.success.is_none() && verdicts.checkpoints.is_empty(), "{verdicts:#?}");
        assert_eq!(server.requests(), requests, "{behaviour:?}: a transient failure is retried twice");
        assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 0, "nothing without a verdict is cached");
        // The rules' scores are untouched; the text item stays unscored.
        assert_eq!((result.success, &result.checkpoints), (rules.success, &rules.checkpoints));
        assert_eq!((result.rubric.averaged, result.rubric.unjudged, result.rubric.judged), (1.0, 1, 0));
    }
    // No endpoint at all.
    let cache = tempfile::tempdir().unwrap();
    let judge = Judge::new("scripted-model", "http://127.0.0.1:9/v1", None, cache.path().to_owned()).unwrap();
    let result = judged(&judge, &fixture).await;
    let error = result.judge.unwrap().error.unwrap_or_default();
    assert!(error.contains("cannot reach the judge at http://127.0.0.1:9/v1/chat/completions"), "{error}");
}
