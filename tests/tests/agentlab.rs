//! End to end, issue #33: TRACE tasks as an AgentLab benchmark, run on Ray. The demonstration of
//! [`trace_e2e::demo`] is recorded and exported redacted; a 3-task dataset shares it, and
//! `browsergym_trace.trace_benchmark` makes the dataset an AgentLab benchmark. A scripted agent (no model)
//! does the person's task on two of the tasks and only answers on the third. AgentLab's own
//! `make_study(...).run` runs the study once sequentially and once with `parallel_backend="ray"` and two
//! workers; `browsergym_trace.benchmark.run_on_cluster` runs it a third time on a Ray cluster of two CPUs
//! already running (`ray start --head`). All three finish every task, with the same rewards (1, 0, 1), and
//! on Ray the episodes ran in worker processes, two at a time. AgentLab's results name the benchmark, not
//! "trace" (issue #47). Nothing here says where Ray listens or where Playwright's browsers are, as on a
//! fresh machine: the Ray `run` starts listens on 127.0.0.1 alone, and every browser of an episode is the
//! system's Chromium. A benchmark name that AgentLab would take for one of its own is refused. Needs
//! `cargo xtask dist` and `bash .ci/install`, which installs AgentLab with the README's command.

use std::collections::{BTreeMap, BTreeSet};

use trace_e2e::agentlab::{self, Backend, RayCluster, Study};
use trace_e2e::apps::{Environment, python_of_for_tests};
use trace_e2e::demo;

/// The dataset's tasks: the person's task done, an agent that only says it is done, and the task done again.
const DONE: &str = "shop-done";
const IDLE: &str = "shop-idle";
const DONE_AGAIN: &str = "shop-done-again";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agentlab_study_on_ray_gives_every_task_the_rewards_of_a_sequential_run() {
    let test = "an_agentlab_study_on_ray_gives_every_task_the_rewards_of_a_sequential_run";
    let Some(recorded) = demo::recorded_once(test).await else { return };
    if python_of_for_tests(test, Environment::AgentLab).is_none() {
        return;
    }
    let origin = &recorded.exported.origin;
    let dataset = tempfile::tempdir().unwrap();
    agentlab::dataset(dataset.path(), &recorded.exported.bundle, origin, demo::DESCRIPTION, &[DONE, IDLE, DONE_AGAIN])
        .unwrap();
    let demonstration = demo::in_playwright(&recorded.exported.origin, &recorded.exported.password().unwrap());
    let scripts: BTreeMap<String, Vec<String>> = [
        (format!("trace.{DONE}"), demonstration.clone()),
        (format!("trace.{IDLE}"), vec!["send_message_to_user('Done.')".to_owned()]),
        (format!("trace.{DONE_AGAIN}"), demonstration),
    ]
    .into();

    let run = |name: &str, backend| {
        let work = tempfile::tempdir().unwrap();
        let study = agentlab::run_study(&recorded.build, dataset.path(), &scripts, backend, work.path()).unwrap();
        let (episodes, seconds, rate) = (study.tasks.len(), study.seconds, study.episodes_per_minute());
        eprintln!("{name}: {episodes} episodes in {seconds:.1} s, {rate:.1} per minute");
        study
    };
    let sequential = run("sequential", Backend::Sequential);
    let ray = run("Ray, 2 workers", Backend::Ray { workers: 2 });
    let cluster_work = tempfile::tempdir().unwrap();
    let cluster = RayCluster::start(2, cluster_work.path()).unwrap();
    let on_cluster = run("a Ray cluster of 2 CPUs", Backend::RayCluster(&cluster));
    drop(cluster);

    let expected = BTreeMap::from([
        (format!("trace.{DONE}"), Some(1.0)),
        (format!("trace.{IDLE}"), Some(0.0)),
        (format!("trace.{DONE_AGAIN}"), Some(1.0)),
    ]);
    for study in [&sequential, &ray, &on_cluster] {
        let dataset_name = dataset.path().file_name().unwrap().to_str().unwrap();
        assert_eq!(study.benchmark, format!("trace-{dataset_name}"));
        assert_eq!(study.benchmark_column, std::slice::from_ref(&study.benchmark), "the results name the benchmark");
        for (task, episode) in &study.tasks {
            assert_eq!(episode.error, None, "{task}: {study:#?}");
            assert_eq!(episode.terminated, Some(true), "{task} ended by its answer: {study:#?}");
        }
        let rewards: BTreeMap<String, Option<f64>> =
            study.rewards().into_iter().map(|(task, reward)| (task.to_owned(), reward)).collect();
        assert_eq!(rewards, expected, "{study:#?}");
    }
    assert_eq!(ray.rewards(), sequential.rewards());
    assert_eq!(on_cluster.rewards(), sequential.rewards());

    let pids =
        |study: &Study| study.tasks.values().flat_map(|episode| episode.pids.iter().copied()).collect::<Vec<_>>();
    assert!(pids(&sequential).iter().all(|&pid| pid == sequential.driver_pid), "{sequential:#?}");
    for study in [&ray, &on_cluster] {
        let workers: BTreeSet<u32> = pids(study).into_iter().collect();
        assert!(!workers.contains(&study.driver_pid), "the episodes ran in Ray's workers: {study:#?}");
        assert!(workers.len() >= 2, "more than one worker: {study:#?}");
        assert!(study.overlapped(), "two episodes at a time: {study:#?}");
    }

    // The Ray that `run` started listened, and on 127.0.0.1 alone (on Linux Ray's default is every interface).
    let ray_servers: Vec<_> = ray.listeners.iter().filter(|listener| listener.process == "gcs_server").collect();
    assert!(!ray_servers.is_empty(), "Ray's GCS server was seen listening: {:?}", ray.listeners);
    let exposed: Vec<_> = ray.listeners.iter().filter(|listener| !listener.is_loopback()).collect();
    assert!(exposed.is_empty(), "listening beyond this machine: {exposed:?}");

    // A name AgentLab would take for its WebArena benchmark is refused, saying why; the default passed above.
    let work = tempfile::tempdir().unwrap();
    let refused = agentlab::python_command(work.path())
        .unwrap()
        .args(["-c", "import sys; from browsergym_trace import trace_benchmark; trace_benchmark(sys.argv[1], name='webarena-copy')"])
        .arg(dataset.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("ValueError") && stderr.contains("'webarena-copy'"),
        "{stderr}"
    );
}
