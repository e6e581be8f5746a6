//! Helper modules: `load("//lib/x.star", ...)` in compiled scripts, run through `mekara run`
//! and `mekara mcp`, checked by `mekara check`, refused with their location when a path is
//! bad, missing or loops, and never taken for scripts.

use serde_json::json;

use crate::common::Project;
use crate::mcp::client::Client;

/// A script `greet` that loads a helper, which loads one from a nested folder. The helper's
/// functions run as a function step (`shout`) and call step builtins themselves (`announce`,
/// called from `execute`).
fn project_with_helpers() -> Project {
    let project = Project::new();
    project.script(
        "greet",
        "Greet someone loudly, then ask them how they are.\n",
        Some(
            r#"load("//lib/text.star", "announce", "shout")

def execute(request):
    r = auto(shout, {"who": request}, context = "Shout the name")
    announce(r.value)
    llm("Ask " + r.value + " how they are.")
"#,
        ),
    );
    project.write(
        ".mekara/scripts/lib/text.star",
        r#"load("//lib/fmt/case.star", "upper")

def shout(who: str) -> str:
    print("shouting at", who)
    return upper(who) + "!"

def announce(message: str):
    auto("echo " + message, context = "Announce " + message)
"#,
    );
    project.write(
        ".mekara/scripts/lib/fmt/case.star",
        "def upper(text: str) -> str:\n    return text.upper()\n",
    );
    project
}

#[test]
fn a_script_runs_the_helpers_it_loads_in_the_terminal() {
    let project = project_with_helpers();
    let run = project.run(&["run", "greet", "bob"], "\n");
    run.expect_code(0);
    insta::assert_snapshot!(project.transcript(&run), @r#"
    exit code: 0
    ----- stdout -----
    → greet
    # Shout the name
    ▶ greet[0] shout({"who":"bob"})
      │ shouting at bob
    ✓ greet[0] ([MS] ms)
    # Announce BOB!
    ▶ greet[1] $ echo BOB!
      │ BOB!
    ✓ greet[1] ([MS] ms)

    ── llm step greet[2] ──
    Ask BOB! how they are.
    Press Enter when done. 
    ← greet ended

    ── run [RUN] completed: 3 steps in [S] s ──
    ----- stderr -----
    "#);
}

#[tokio::test]
async fn a_script_runs_the_helpers_it_loads_over_mcp() {
    let project = project_with_helpers();
    let client = Client::start(&project, &[]).await;
    let reply = client
        .call("start", json!({"name": "greet", "arguments": "ann"}))
        .await
        .ok();
    assert!(reply.contains("shouting at ann"), "{reply}");
    assert!(reply.contains("`$ echo ANN!`"), "{reply}");
    assert!(
        reply.contains("<instructions>\nAsk ANN! how they are.\n</instructions>"),
        "{reply}"
    );
    let done = client
        .call("continue_compiled_script", json!({"outputs": {}}))
        .await
        .ok();
    assert!(done.contains("## Done"), "{done}");
}

#[test]
fn helpers_are_not_scripts() {
    let project = project_with_helpers();
    let listed = project.run(&["scripts"], "");
    listed.expect_code(0);
    assert!(listed.stdout.contains("greet"), "{}", listed.stdout);
    assert!(
        !listed.stdout.contains("text") && !listed.stdout.contains("case"),
        "{}",
        listed.stdout
    );
    let checked = project.run(&["check"], "");
    checked.expect_code(0);
    // The library's workflows (`flow:*`) are checked too; their own test pins them.
    let checked: Vec<String> = project
        .scrub(&checked.stdout)
        .lines()
        .filter(|l| !l.starts_with("flow:"))
        .map(str::to_string)
        .collect();
    assert_eq!(
        checked,
        [
            "compile: ok (bundled:compiled/compile.star)",
            "greet: ok ([PROJECT]/.mekara/scripts/compiled/greet.star)"
        ]
    );
    let run = project.run(&["run", "text"], "");
    run.expect_code(2);
    assert!(
        run.stderr.contains("script `text` not found"),
        "{}",
        run.stderr
    );
}

/// One script per mistake: each is reported at the `load` (or the line) it is in.
#[test]
fn check_reports_bad_loads_with_their_location() {
    let project = Project::new();
    let script = |name: &str, star: &str| project.script(name, "Do it.\n", Some(star));
    script(
        "missing",
        "load(\"//lib/nope.star\", \"f\")\n\ndef execute(request):\n    f()\n",
    );
    script(
        "symbol",
        "load(\"//lib/ok.star\", \"nope\")\n\ndef execute(request):\n    nope()\n",
    );
    script(
        "cycle",
        "load(\"//lib/a.star\", \"a\")\n\ndef execute(request):\n    a()\n",
    );
    script(
        "dotdot",
        "load(\"//../../etc/x.star\", \"f\")\n\ndef execute(request):\n    f()\n",
    );
    script(
        "absolute",
        "load(\"/etc/x.star\", \"f\")\n\ndef execute(request):\n    f()\n",
    );
    script(
        "relative",
        "load(\"ok.star\", \"f\")\n\ndef execute(request):\n    f()\n",
    );
    script(
        "outside_lib",
        "load(\"//compiled/symbol.star\", \"f\")\n\ndef execute(request):\n    f()\n",
    );
    script(
        "typed",
        "load(\"//lib/ok.star\", \"twice\")\n\ndef execute(request):\n    twice(\"2\")\n",
    );
    script(
        "broken",
        "load(\"//lib/broken.star\", \"f\")\n\ndef execute(request):\n    f()\n",
    );
    script(
        "user_only",
        "load(\"//lib/mine.star\", \"f\")\n\ndef execute(request):\n    f()\n",
    );
    project.write(
        ".mekara/scripts/lib/ok.star",
        "def twice(n: int) -> int:\n    return 2 * n\n\ndef _private():\n    pass\n",
    );
    project.write(
        ".mekara/scripts/lib/a.star",
        "load(\"//lib/b.star\", \"b\")\n\ndef a():\n    b()\n",
    );
    project.write(
        ".mekara/scripts/lib/b.star",
        "load(\"//lib/a.star\", \"a\")\n\ndef b():\n    a()\n",
    );
    project.write(
        ".mekara/scripts/lib/broken.star",
        "def f():\n    return (1,\n",
    );
    crate::common::write_file(
        &project.home().join(".mekara/scripts/lib/mine.star"),
        "def f():\n    pass\n",
    );
    mekara_snapshot!(project, project.command(&["check"]));
}

#[test]
fn run_falls_back_on_a_missing_helper_with_its_location() {
    let project = Project::new();
    project.script(
        "missing",
        "Do it by hand.\n",
        Some("load(\"//lib/gone.star\", \"f\")\n\ndef execute(request):\n    f()\n"),
    );
    let run = project.run(&["run", "missing"], "\n");
    run.expect_code(1);
    let out = project.scrub(&run.stdout);
    assert!(
        out.contains(
            "error: helper module `//lib/gone.star` not found: there is no `[PROJECT]/.mekara/scripts/lib/gone.star`\n --> [PROJECT]/.mekara/scripts/compiled/missing.star:1:6"
        ),
        "{out}"
    );
}

#[test]
fn resume_after_a_helper_changed_reports_the_divergent_step() {
    let project = Project::new();
    project.script(
        "div",
        "Diverge.\n",
        Some(
            "load(\"//lib/steps.star\", \"first\")\n\ndef execute(request):\n    first()\n    llm(\"Now answer.\", expects = [\"answer\"])\n",
        ),
    );
    let helper = "def first():\n    auto(\"echo first\")\n";
    project.write(".mekara/scripts/lib/steps.star", helper);
    project.run(&["run", "div"], "").expect_code(1);
    let id = project.run_ids().remove(0);
    let journal = project.journal(&id);

    project.write(
        ".mekara/scripts/lib/steps.star",
        &helper.replace("echo first", "echo changed"),
    );
    let resumed = project.run(&["run", "--resume", &id], "yes\n");
    resumed.expect_code(1);
    assert_eq!(
        project.journal(&id),
        journal,
        "a refused resume writes nothing"
    );
    assert_eq!(
        project.scrub(&resumed.stderr),
        "error: script `div` changed since this run recorded its step 0: command is now `echo changed` but was `echo first`; restore the script and the helper modules it loads as they were, go on from the change with `--retry` (`mekara run --resume ID --retry`; MCP: `resume` with `retry: true`), or start a new run\n"
    );
}
