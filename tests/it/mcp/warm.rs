//! The warm evaluator: one `mekara __evaluate` child holds a run's suspended evaluation
//! between calls, and is only a cache: killed, the next call starts another, which goes on
//! from the journal as if it had never been there.

use serde_json::json;

use super::client::Client;
use crate::common::Project;

/// A script of `n` llm steps, each prompt naming the answer before it, with a print and a
/// shell step that appends to `ran.txt` between them (so a step that runs twice shows).
fn steps_script(project: &Project, n: usize) {
    project.script(
        "steps",
        "Answer each step.\n",
        Some(&format!(
            r#"def execute(request):
    last = "none"
    for i in range({n}):
        auto("echo %d >> ran.txt" % i)
        print("before step %d" % i)
        r = llm("Step %d, after %s: answer." % (i, last), expects = {{"answer": "a word"}})
        last = r.outputs["answer"]
    auto("echo done:%s >> ran.txt" % last)
"#
        )),
    );
}

/// The `mekara __evaluate` children of process `parent` alive now.
pub(crate) fn evaluators(parent: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`: the fields after the last `)`.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if ppid == Some(parent) && cmdline.split(|b| *b == 0).any(|a| a == b"__evaluate") {
            found.push(pid);
        }
    }
    found
}

fn ran(project: &Project) -> Vec<String> {
    std::fs::read_to_string(project.root().join("ran.txt"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn one_evaluator_holds_the_run_from_its_start_to_its_end() {
    let project = Project::new();
    steps_script(&project, 12);
    let client = Client::start(&project, &[]).await;
    let mut reply = client.call("start", json!({"name": "steps"})).await.ok();
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..12 {
        assert!(
            reply.contains(&format!(
                "Step {i}, after {}: answer.",
                if i == 0 {
                    "none".to_string()
                } else {
                    format!("w{}", i - 1)
                }
            )),
            "step {i}:\n{reply}"
        );
        let alive = evaluators(client.pid);
        assert_eq!(
            alive.len(),
            1,
            "one child holds the run between calls: {alive:?}"
        );
        seen.extend(alive);
        reply = client
            .continue_with(json!({"answer": format!("w{i}")}))
            .await
            .ok();
    }
    insta::assert_snapshot!("held_to_its_end", project.scrub(&reply));
    assert_eq!(seen.len(), 1, "the same child all along: {seen:?}");
    assert!(
        evaluators(client.pid).is_empty(),
        "the child ended with the run"
    );
    let mut expected: Vec<String> = (0..12).map(|i| i.to_string()).collect();
    expected.push("done:w11".to_string());
    assert_eq!(
        ran(&project),
        expected,
        "every shell step ran once, in order"
    );
}

#[tokio::test]
async fn a_killed_evaluator_is_started_again_and_the_run_goes_on_from_its_journal() {
    let project = Project::new();
    steps_script(&project, 4);
    let client = Client::start(&project, &[]).await;
    let reply = client.call("start", json!({"name": "steps"})).await.ok();
    insta::assert_snapshot!("killed_evaluator_0", project.scrub(&reply));
    let reply = client.continue_with(json!({"answer": "w0"})).await.ok();
    insta::assert_snapshot!("killed_evaluator_1", project.scrub(&reply));
    let first = evaluators(client.pid);
    assert_eq!(first.len(), 1, "{first:?}");
    // The cache goes, as it may at any time (a crash, the OOM killer).
    std::process::Command::new("kill")
        .args(["-9", &first[0].to_string()])
        .status()
        .expect("kill");
    while std::path::Path::new(&format!("/proc/{}/cmdline", first[0])).exists()
        && !evaluators(client.pid).is_empty()
    {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let reply = client.continue_with(json!({"answer": "w1"})).await.ok();
    insta::assert_snapshot!("killed_evaluator_2", project.scrub(&reply));
    let second = evaluators(client.pid);
    assert_eq!(second.len(), 1, "{second:?}");
    assert_ne!(first, second, "a new child");
    // A status call in between changes nothing: the held evaluation answers it.
    client.call("status", json!({})).await.ok();
    assert_eq!(evaluators(client.pid), second);
    let reply = client.continue_with(json!({"answer": "w2"})).await.ok();
    insta::assert_snapshot!("killed_evaluator_3", project.scrub(&reply));
    let reply = client.continue_with(json!({"answer": "w3"})).await.ok();
    insta::assert_snapshot!("killed_evaluator_done", project.scrub(&reply));
    assert_eq!(
        ran(&project),
        ["0", "1", "2", "3", "done:w3"],
        "no step ran twice"
    );
}

/// The child holding a run ends on its own after its idle time (`MEKARA_EVALUATOR_IDLE_SECS`
/// here, ten minutes unless set), on every system: a thread of its own waits out the time
/// beside the blocking read of its stdin (a Windows pipe's read has no timeout). The next
/// call starts another, which goes on from the journal.
#[tokio::test]
async fn a_held_evaluator_left_idle_ends_and_the_run_goes_on_from_its_journal() {
    let project = Project::new();
    steps_script(&project, 2);
    let idle = std::path::Path::new("3");
    let client = Client::start(&project, &[("MEKARA_EVALUATOR_IDLE_SECS", idle)]).await;
    let reply = client.call("start", json!({"name": "steps"})).await.ok();
    assert!(reply.contains("Step 0, after none"), "{reply}");
    let held = evaluators(client.pid);
    assert_eq!(held.len(), 1, "a child holds the run: {held:?}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !evaluators(client.pid).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the idle child did not end"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let reply = client.continue_with(json!({"answer": "w0"})).await.ok();
    assert!(reply.contains("Step 1, after w0"), "{reply}");
    let second = evaluators(client.pid);
    assert!(
        second.len() == 1 && second != held,
        "a new child: {second:?}"
    );
    let reply = client.continue_with(json!({"answer": "w1"})).await.ok();
    assert!(reply.contains("completed"), "{reply}");
    assert_eq!(ran(&project), ["0", "1", "done:w1"], "no step ran twice");
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs strace")]
fn an_unattended_run_starts_one_evaluator_for_all_its_llm_steps() {
    // Counted from the system calls: every `__evaluate` the run started.
    let project = Project::new();
    steps_script(&project, 10);
    let answer = project.write("answer.json", "{\"outputs\": {\"answer\": \"w\"}}\n");
    let agent = format!("cat {}", answer.display());
    let (run, execs) = crate::common::under_strace(
        &project,
        &["-e", "trace=execve"],
        &["run", "--agent-command", &agent, "steps"],
    );
    run.expect_code(0);
    let evaluators = execs
        .lines()
        .filter(|l| l.contains("execve(") && l.contains("\"__evaluate\""))
        .count();
    assert_eq!(evaluators, 1, "{execs}");
    assert_eq!(ran(&project).len(), 11, "{:?}", ran(&project));
}

/// Regression (issue 40): a `start` whose evaluator child was killed while a step ran
/// replied that the run "can be resumed" without its handle, so `resume` had nothing to take
/// up. The reply names the handle now, `resume` with it goes on, and the step that ran while
/// the child died is not run again.
#[tokio::test]
async fn a_start_whose_evaluator_dies_names_the_handle_that_resumes_it() {
    let project = Project::new();
    project.script(
        "gated",
        "Run the steps.",
        Some(
            r#"def execute(request):
    auto("echo 0 >> ran.txt")
    auto("touch started; while [ ! -e go ]; do sleep 0.02; done; echo 1 >> ran.txt")
    auto("echo 2 >> ran.txt")
"#,
        ),
    );
    let client = Client::start(&project, &[]).await;
    let (root, server) = (project.root(), client.pid);
    // The child is killed while its parent runs the second step, which then ends.
    let killer = std::thread::spawn(move || {
        crate::common::wait_for(&root.join("started"));
        let children = evaluators(server);
        assert_eq!(children.len(), 1, "{children:?}");
        std::process::Command::new("kill")
            .args(["-9", &children[0].to_string()])
            .status()
            .expect("kill");
        while !evaluators(server).is_empty() {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        std::fs::write(root.join("go"), "").expect("go");
    });
    let reply = client.call("start", json!({"name": "gated"})).await.err();
    killer.join().expect("killer");
    let handle = crate::common::run_handle(&reply)
        .unwrap_or_else(|| panic!("the reply names the run's handle:\n{reply}"));
    insta::assert_snapshot!("evaluation_stopped", project.scrub(&reply));
    let reply = client.call("resume", json!({"run_id": handle})).await.ok();
    insta::assert_snapshot!(
        "resumed_after_the_evaluation_stopped",
        project.scrub(&reply)
    );
    assert_eq!(ran(&project), ["0", "1", "2"], "no step ran twice");
}
