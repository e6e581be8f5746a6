//! Every reply shape an agent reads, pinned: steps executed (success, failure, call,
//! return, long output), each kind of pending item, status, and every wrong call.

use serde_json::json;

use super::client::Client;
use crate::common::Project;

const SHAPES_NL: &str = "---\ndescription: Every kind of step\n---\n# Shapes\n\n1. Say hello.\n2. Double a number.\n3. Name a colour.\n4. Run the helper script.\n5. Run the notes script.\n6. Count to 150.\n7. Say goodbye.\n";

const SHAPES_STAR: &str = r#"
def execute(request):
    auto("echo hello; echo to stderr >&2", context = "Step 1: say hello")
    auto(double, {"n": 21}, context = "Step 2: double a number")
    colour = llm("Step 3: name a colour for " + request, expects = {"colour": "one word", "why": ""})
    call_script("helper", request = colour.outputs["colour"])
    call_script("notes")
    auto("seq 1 150", context = "Step 6: count")
    llm("Step 7: say goodbye")

def double(n):
    print("doubling", n)
    return {"result": n * 2}
"#;

fn shapes_project() -> Project {
    let project = Project::new();
    project.script("shapes", SHAPES_NL, Some(SHAPES_STAR));
    project.script(
        "helper",
        "---\ndescription: A compiled helper\n---\n1. Echo the colour.\n",
        Some("def execute(request):\n    auto(\"printf '%s\\\\n' \" + request)\n"),
    );
    project.script(
        "notes",
        "---\ndescription: Take notes by hand\n---\nWrite down $ARGUMENTS and what you learned.\n",
        None,
    );
    project.script(
        "broken",
        "---\ndescription: Fails at its second step\n---\n1. Prepare.\n2. Check the disk.\n",
        Some("def execute(request):\n    auto(\"echo ready\")\n    auto(\"echo 'disk full' >&2; exit 1\", context = \"Step 2: check the disk\")\n"),
    );
    project
}

#[tokio::test]
async fn reply_shapes() {
    let project = shapes_project();
    let client = Client::start(&project, &[]).await;
    let snap = |name: &str, text: &str| {
        insta::assert_snapshot!(name.to_string(), project.scrub(text));
    };

    let nothing = client
        .call("continue_compiled_script", json!({"outputs": {}}))
        .await
        .err();
    snap("wrong_continue_nothing_pending", &nothing);
    let finish_nothing = client.call("finish_nl_script", json!({})).await.err();
    snap("wrong_finish_nothing_pending", &finish_nothing);
    snap("status_idle", &client.call("status", json!({})).await.ok());

    let unknown = client.call("start", json!({"name": "shapse"})).await.err();
    snap("wrong_unknown_script", &unknown);
    let far = client
        .call("start", json!({"name": "zzzzzzzz"}))
        .await
        .err();
    snap("wrong_unknown_script_no_suggestion", &far);
    let bad_dir = client
        .call(
            "start",
            json!({"name": "shapes", "working_dir": "no/such/dir"}),
        )
        .await
        .err();
    snap("wrong_working_dir", &bad_dir);

    let first = client
        .call("start", json!({"name": "shapes", "arguments": "the sky"}))
        .await
        .ok();
    snap("llm_step_with_expects_and_nl_source", &first);

    let finish = client.call("finish_nl_script", json!({})).await.err();
    snap("wrong_finish_while_llm_pending", &finish);
    let missing = client
        .call(
            "continue_compiled_script",
            json!({"outputs": {"colour": "blue", "extra": 1}}),
        )
        .await
        .err();
    snap("wrong_outputs", &missing);
    let status = client.call("status", json!({})).await.ok();
    snap("status_llm_pending", &status);

    let nl = client
        .call(
            "continue_compiled_script",
            json!({"outputs": {"colour": "blue", "why": "the sky"}}),
        )
        .await
        .ok();
    snap("call_return_and_nl_pending", &nl);
    let wrong = client
        .call("continue_compiled_script", json!({"outputs": {}}))
        .await
        .err();
    snap("wrong_continue_while_nl_pending", &wrong);

    let long = client.call("finish_nl_script", json!({})).await.ok();
    snap("long_output_and_llm_without_outputs", &long);
    let done = client
        .call("continue_compiled_script", json!({"outputs": {}}))
        .await
        .ok();
    snap("finished", &done);
    snap(
        "status_after_finish",
        &client.call("status", json!({})).await.ok(),
    );

    let failed = client.call("start", json!({"name": "broken"})).await.ok();
    snap("failure_and_fallback", &failed);
    let by_hand = client.call("finish_nl_script", json!({})).await.ok();
    snap("finished_by_hand", &by_hand);

    snap(
        "list_scripts",
        &client.call("list_scripts", json!({})).await.ok(),
    );
    snap(
        "resume_nothing_interrupted",
        &client.call("resume", json!({})).await.ok(),
    );
}

#[tokio::test]
async fn argument_errors_name_the_argument() {
    let project = shapes_project();
    let client = Client::start(&project, &[]).await;
    let cases = [
        ("start", json!({})),
        ("start", json!({"name": 5})),
        ("start", json!({"name": ""})),
        ("start", json!({"name": "shapes", "args": "x"})),
        ("continue_compiled_script", json!({})),
        ("continue_compiled_script", json!({"outputs": "blue"})),
        ("finish_nl_script", json!({"now": true})),
        ("resume", json!({"run_id": 7})),
    ];
    let mut all = String::new();
    for (tool, args) in cases {
        let text = client.call(tool, args.clone()).await.err();
        all.push_str(&format!("{tool} {args}\n{text}\n\n"));
    }
    insta::assert_snapshot!("argument_errors", all);
    // None of them started anything.
    assert!(project.run_ids().is_empty());
}

/// Regression: a failure the script allowed (`allow_failure = True`) was listed as `✗ … error:`,
/// exactly like one that stopped the script.
#[tokio::test]
async fn an_allowed_failure_is_marked_as_allowed() {
    let project = Project::new();
    project.script(
        "tolerant",
        "---\ndescription: Tolerant\n---\n1. Warm the cache.\n2. Build.\n",
        Some(crate::transcripts::TOLERANT),
    );
    let client = Client::start(&project, &[]).await;
    let reply = client.call("start", json!({"name": "tolerant"})).await.ok();
    insta::assert_snapshot!("allowed_failure", project.scrub(&reply));
}

/// Regressions: a called script that failed with `allow_failure = True` was shown as `✗`;
/// the fallback after a called script failed gave only the caller's instructions.
#[tokio::test]
async fn a_called_script_that_fails_is_marked_and_hands_over_its_instructions() {
    let project = crate::transcripts::release_project();
    let client = Client::start(&project, &[]).await;
    let reply = client.call("start", json!({"name": "release"})).await.ok();
    insta::assert_snapshot!("called_script_fails", project.scrub(&reply));
}

/// Outside any project, the refusal of `start` names the folder the server searched from
/// and the levels it searched, so the agent can tell the user why the script is missing.
#[tokio::test]
async fn start_outside_a_project_says_where_it_looked() {
    let project = Project::new();
    project.script("deploy", "Deploy.\n", None);
    let elsewhere = project.dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("mkdir");
    let client = Client::start_in(&project, &elsewhere, &[]).await;
    let refused = client.call("start", json!({"name": "deploy"})).await.err();
    insta::assert_snapshot!("start_not_found_outside_a_project", project.scrub(&refused));
}

/// Regression (issue 28): in a chain of calls `ship` → `release` → `publish` where a step
/// of `publish` failed, the fallback gave the agent only `release`'s instructions (the
/// script `ship` called). It gives `publish`'s, the script whose step failed, names the
/// chain, and gives what `release` still had to do after its call, and the order.
#[tokio::test]
async fn a_failure_two_calls_down_hands_over_the_failing_scripts_instructions() {
    let project = crate::transcripts::chain_project();
    let client = Client::start(&project, &[]).await;
    let reply = client.call("start", json!({"name": "ship"})).await.ok();
    assert!(
        reply.contains("<called-script-instructions name=\"publish\">\nUpload v3 to the registry, then tag it. If the registry is down, stop and tell the user.\n</called-script-instructions>")
            && reply.contains("`ship` called `release`, which called `publish`")
            && reply.contains("Then the instructions of `release`, which called `publish`, for what is left of it after that call:\n\n<called-script-instructions name=\"release\">\nPublish v3, then write its release notes.\n</called-script-instructions>")
            && reply.contains("the instructions of `publish` (the script that failed, below) and of `release` and `ship` say")
            && reply.contains("finish them from the inside out: what is left of `publish`, then of `release`, then of `ship`.")
            && reply.contains("do not `start` them again"),
        "{reply}"
    );
    insta::assert_snapshot!("call_chain_fails", project.scrub(&reply));
}

/// Regression (issue 28): a fallback derived again by a new server (after a restart) lost
/// the called script's instructions when the caller's NL text had a prompt tag: the step
/// journaled for the tag came after the failed call, which was no longer the frame's last
/// step. The fallback after the restart is the same text as before it.
#[cfg_attr(not(feature = "clients"), ignore = "needs the MCP test servers")]
#[tokio::test]
async fn a_fallback_derived_again_after_a_restart_keeps_the_called_scripts_instructions() {
    let dir = crate::common::servers();
    let project = crate::transcripts::release_project();
    project.write(
        ".mcp.json",
        &format!(
            "{{\"mcpServers\": {{\"everything\": {{\"command\": \"node\", \"args\": [\"{}\", \"stdio\"]}}}}}}\n",
            crate::common::everything(&dir)
        ),
    );
    project.script(
        "release",
        "---\ndescription: Release\n---\n1. Lint, if it can.\n2. Publish.\n3. Announce: [use-mcp:everything/echo:{\"message\": \"the news\"}]\n",
        Some(crate::transcripts::RELEASE),
    );
    let fallback = |reply: &str| {
        let start = reply.find("## Your turn").expect("a pending item");
        let end = reply
            .find("Call `finish_nl_script`")
            .expect("the last paragraph");
        reply[start..end].to_string()
    };
    let first = Client::start(&project, &[]).await;
    let started = first.call("start", json!({"name": "release"})).await.ok();
    let handle = super::client::handle(&started);
    assert!(
        started.contains("<called-script-instructions name=\"publish\">"),
        "{started}"
    );
    let id = project.run_ids().pop().expect("a run");
    assert!(
        project.journal(&id).contains("\"kind\":\"mcp\""),
        "the tag was expanded and journaled: {}",
        project.journal(&id)
    );
    let pid = first.pid;
    first.service.cancel().await.expect("close");
    while super::client::alive(pid) {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let second = Client::start(&project, &[]).await;
    let resumed = second.call("resume", json!({"run_id": handle})).await.ok();
    assert_eq!(fallback(&resumed), fallback(&started), "{resumed}");
}

/// Twelve steps of long output and a function step given a 200 KB argument, then an llm step.
const MANY_LONG_STEPS: &str = r#"
def execute(request):
    big = "\n".join(["line %d of the argument, padded to be long enough to matter" % n for n in range(3000)])
    auto(count, {"text": big}, context = "Count the argument's lines")
    for n in range(12):
        auto("for i in $(seq 1 300); do printf 'step %s line %s %0100d\n' " + str(n) + " $i 0; done", context = "Step " + str(n))
    llm("Say what you saw")

def count(text):
    print(len(text.splitlines()))
"#;

/// Regression (issue 39): a function step's reply echoed its whole arguments (297 KB on a real
/// project), and many steps of long output made a reply no agent reads whole. The call is cut
/// to a line, and past the budget the older steps keep a few lines each; the last two keep
/// their head and tail.
#[tokio::test]
async fn a_reply_of_many_long_steps_and_a_big_argument_stays_bounded() {
    let project = Project::new();
    project.script("many", "1. Many steps.\n", Some(MANY_LONG_STEPS));
    let client = Client::start(&project, &[]).await;
    let reply = client.call("start", json!({"name": "many"})).await.ok();
    assert!(reply.len() < 64 * 1024, "{} bytes", reply.len());
    assert!(
        reply.contains("`count(text=\"line 0 of the argument")
            && reply.contains("… [line cut at 400 characters]`"),
        "{reply}"
    );
    // An older step: 6 lines of head and 3 of tail; the last: 40 and 20.
    assert!(
        reply.contains("… 291 lines cut here (lines 7–297 of 300)"),
        "{reply}"
    );
    assert!(
        reply.contains("step 0 line 6 ") && !reply.contains("step 0 line 7 "),
        "{reply}"
    );
    assert!(
        reply.contains("… 240 lines cut here (lines 41–280 of 300)"),
        "{reply}"
    );
    assert!(
        reply.contains("step 11 line 40 ") && reply.contains("step 10 line 40 "),
        "{reply}"
    );
    assert!(!reply.contains("step 9 line 40 "), "{reply}");
}
