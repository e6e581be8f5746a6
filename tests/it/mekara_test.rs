//! `mekara test`: workflows' test cases run with no agent, each in a scratch project. The
//! bundled library's cases pass; cases that must fail (a wrong expected file, an unanswered
//! llm step or question, a script changed since its steps were recorded) fail with what a user
//! needs to read; malformed and hostile case files are refused with what is wrong; `--update`
//! writes what a re-run then passes; the JUnit report parses; a cassette becomes a case that
//! passes.

use crate::common::{Project, Run};

/// A project script: shell steps, an llm step, a question, and a step that depends on the
/// answer.
const GREET: &str = r#"
def execute(request):
    auto("git status --porcelain", context = "See the tree")
    g = llm("Step 2: write a greeting for " + request, expects = {"greeting": "the text"})
    auto("printf '%s\\n' " + quote(g.outputs["greeting"]) + " > greeting.txt")
    a = ask("Sign it?", choices = ["yes", "no"])
    if a.answer == "yes":
        auto("echo '-- me' >> greeting.txt")

def quote(s):
    return "'" + s.replace("'", "'\\''") + "'"
"#;

/// A case of `greet` that passes.
const PASSING: &str = r#"# Greets Ada.
arguments = "Ada"

[fixture]
git = true
files = { "README.md" = "hi\n" }

[[agent]]
prompt = "Step 2"
outputs = { greeting = "Hello, Ada!" }

[[ask]]
question = "Sign"
answer = "yes"

[expect]
end = "completed"
files = { "greeting.txt" = "Hello, Ada!\n-- me\n" }

[[expect.command]]
run = "git status --porcelain"
output = "?? greeting.txt\n"
"#;

fn greet_project() -> Project {
    let project = Project::new();
    project.script(
        "greet",
        "Greet someone, and ask whether to sign.\n",
        Some(GREET),
    );
    project
}

fn case(project: &Project, name: &str, text: &str) {
    project.write(&format!(".mekara/tests/greet/{name}.toml"), text);
}

/// `mekara test ARGS`, one case at a time (so the progress lines come in order).
fn test(project: &Project, args: &[&str]) -> Run {
    let mut all = vec!["test", "-j", "1"];
    all.extend_from_slice(args);
    project.run(&all, "")
}

#[test]
fn the_bundled_cases_of_every_workflow_pass() {
    let project = Project::new();
    let run = crate::common::run_with_stdin(
        crate::library::with_tools(project.command(&["test", "--bundled"])),
        "",
    );
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    for workflow in [
        "commit",
        "pr",
        "review",
        "fix-ci",
        "release",
        "upgrade-deps",
        "docs-sync",
        "triage",
        "test-gaps",
        "bisect",
    ] {
        assert!(
            run.stderr.contains(&format!("✓ flow/{workflow}/")),
            "{workflow}: {}",
            run.stderr
        );
    }
}

#[test]
fn a_passing_case_passes() {
    let project = greet_project();
    case(&project, "signs", PASSING);
    mekara_snapshot!(project, test(&project, &[]), @r"
    exit code: 0
    ----- stdout -----
    ── 1 passed, 0 failed in [S] s ──
    ----- stderr -----
    running 1 test case (1 at once)
    ✓ greet/signs ([MS] ms)
    ");
}

#[test]
fn cases_that_must_fail_say_what_differs_and_where_the_run_parted() {
    let project = greet_project();
    case(
        &project,
        "wrong-file",
        &PASSING.replace("Hello, Ada!\\n-- me\\n\"", "Hello, Bob!\\n-- me\\n\""),
    );
    case(
        &project,
        "unanswered-step",
        &PASSING.replace("prompt = \"Step 2\"", "prompt = \"Step 9\""),
    );
    case(
        &project,
        "unanswered-ask",
        &PASSING.replace("[[ask]]\nquestion = \"Sign\"\nanswer = \"yes\"\n", ""),
    );
    case(
        &project,
        "other-question",
        &PASSING.replace("question = \"Sign\"", "question = \"Deploy\""),
    );
    mekara_snapshot!("must_fail", project, test(&project, &[]));
}

#[test]
fn a_script_changed_since_its_steps_were_recorded_fails_at_the_step_that_changed() {
    let project = greet_project();
    case(&project, "signs", PASSING);
    test(&project, &["--update"]).expect_code(0);
    let recorded = std::fs::read_to_string(project.root().join(".mekara/tests/greet/signs.toml"))
        .expect("the case");
    // The steps are added; the rest is kept as written.
    insta::assert_snapshot!(recorded, @r#"
    # Greets Ada.
    arguments = "Ada"

    [fixture]
    git = true
    files = { "README.md" = "hi\n" }

    [[agent]]
    prompt = "Step 2"
    outputs = { greeting = "Hello, Ada!" }

    [[ask]]
    question = "Sign"
    answer = "yes"

    [expect]
    end = "completed"
    files = { "greeting.txt" = "Hello, Ada!\n-- me\n" }
    steps = [
      "greet[0] $ git status --porcelain",
      "greet[1] llm: Step 2: write a greeting for Ada",
      '''greet[2] $ printf '%s\n' 'Hello, Ada!' > greeting.txt''',
      "greet[3] ask: Sign it?",
      "greet[4] $ echo '-- me' >> greeting.txt",
    ]

    [[expect.command]]
    run = "git status --porcelain"
    output = "?? greeting.txt\n"
    "#);
    // The re-run passes, and changes nothing.
    test(&project, &[]).expect_code(0);
    test(&project, &["--update"]).expect_code(0);
    assert_eq!(
        std::fs::read_to_string(project.root().join(".mekara/tests/greet/signs.toml"))
            .expect("the case"),
        recorded
    );
    project.script(
        "greet",
        "Greet someone, and ask whether to sign.\n",
        Some(&GREET.replace("git status --porcelain", "git status --short")),
    );
    mekara_snapshot!(project, test(&project, &[]), @r#"
    exit code: 1
    ----- stdout -----

    ✗ greet/signs ([PROJECT]/.mekara/tests/greet/signs.toml)
      the run parted from the case at `greet[0]`
      the steps differ from `[expect] steps`: step 1 ran `greet[0] $ git status --short` where the case expects `greet[0] $ git status --porcelain`
        --- expected
        +++ actual
        @@ -1,4 +1,4 @@
        -greet[0] $ git status --porcelain
        +greet[0] $ git status --short
         greet[1] llm: Step 2: write a greeting for Ada
         greet[2] $ printf '%s\n' 'Hello, Ada!' > greeting.txt
         greet[3] ask: Sign it?
    ── 0 passed, 1 failed in [S] s ──
    ----- stderr -----
    running 1 test case (1 at once)
    ✗ greet/signs ([MS] ms)
    "#);
}

#[test]
fn malformed_and_hostile_case_files_are_refused_with_what_is_wrong() {
    let project = greet_project();
    case(
        &project,
        "escapes",
        "[fixture]\ndir = \"../../../../etc\"\n",
    );
    case(&project, "typo", "argumnets = \"Ada\"\n");
    case(&project, "wrong-type", "[fixture]\ngit = \"yes\"\n");
    case(&project, "bad-pattern", "[[agent]]\nprompt = \"Step (2\"\n");
    case(&project, "bad-end", "[expect]\nend = \"done\"\n");
    case(
        &project,
        "outside-file",
        "[expect]\nfiles = { \"../../home/.bashrc\" = \"\" }\n",
    );
    mekara_snapshot!("malformed", project, test(&project, &[]));
    // Nothing was written outside the project.
    assert!(!project.home().join(".bashrc").exists());
}

#[test]
fn a_name_that_picks_no_case_and_a_project_without_cases_are_usage_errors() {
    let project = greet_project();
    case(&project, "signs", PASSING);
    let empty = Project::new();
    let session = format!(
        "{}\n{}",
        project.session(&[&["test", "nothing/here"]]),
        empty.session(&[&["test"]])
    );
    insta::assert_snapshot!(session, @r"
    $ mekara test nothing/here
    exit code: 2
    ----- stdout -----
    ----- stderr -----
    error: no test case in `[PROJECT]/.mekara/tests` is `nothing/here`: name a script (`flow/commit`), a folder (`flow`) or a case (`flow/commit/basic`)

    $ mekara test
    exit code: 2
    ----- stdout -----
    ----- stderr -----
    error: no test cases in `[PROJECT]/.mekara/tests`: write one (`.mekara/tests/SCRIPT/CASE.toml`, see docs/testing.md), or turn a recorded session into one with `mekara test --from-cassette CASSETTE -o CASE.toml`
    ");
}

#[test]
fn the_junit_report_parses_and_names_each_case_and_failure() {
    let project = greet_project();
    case(&project, "signs", PASSING);
    case(
        &project,
        "wrong-file",
        &PASSING.replace("Hello, Ada!\\n-- me\\n\"", "Hello, <Bob> & \\\"co\\\"\\n\""),
    );
    let junit = project.root().join("junit.xml");
    test(&project, &["--junit", junit.to_str().expect("utf-8")]).expect_code(1);
    let parsed = std::process::Command::new("python3")
        .arg("-c")
        .arg("import sys, xml.etree.ElementTree as E\nfor c in E.parse(sys.argv[1]).iter('testcase'):\n  f = c.find('failure')\n  print(c.get('classname'), c.get('name'), 'failed: ' + f.get('message') if f is not None else 'passed')\n  if f is not None: assert 'Hello, <Bob> & \"co\"' in f.text, f.text")
        .arg(&junit)
        .output()
        .expect("python3");
    assert!(
        parsed.status.success(),
        "{}",
        String::from_utf8_lossy(&parsed.stderr)
    );
    insta::assert_snapshot!(String::from_utf8_lossy(&parsed.stdout), @r"
    greet signs passed
    greet wrong-file failed: file `greeting.txt` differs from what the case expects:
    ");
}

#[test]
fn a_cassette_becomes_a_case_that_passes() {
    let project = Project::new();
    let cassette =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cassettes/test-random.toml");
    let out = project
        .root()
        .join(".mekara/tests/test/random/recorded.toml");
    project
        .run(
            &[
                "test",
                "--from-cassette",
                cassette.to_str().expect("utf-8"),
                "-o",
                out.to_str().expect("utf-8"),
            ],
            "",
        )
        .expect_code(0);
    let made = std::fs::read_to_string(&out).expect("the case");
    insta::assert_snapshot!(made, @r#"
    # A test case made by `mekara test --from-cassette` of `test-random.toml`.
    # The recording ran in a project this case does not carry: add a `[fixture]` (a `dir`
    # beside this file, `files`, `git = true`, `setup` commands) where its steps need one.
    script = "test/random"

    [[agent]]
    step = "test:random[1]"
    outputs = { guess = 50 }

    [[agent]]
    step = "test:random[3]"

    [expect]
    end = "completed"
    "#);
    test(&project, &[]).expect_code(0);
}

/// A case that runs past `--timeout` is stopped, with the step it ran: its shell step's
/// process does not outlive it.
#[test]
fn a_case_past_its_timeout_is_stopped_with_its_running_step() {
    let project = Project::new();
    let marker = project.home().join("still-running");
    project.script(
        "slow",
        "Sleep.\n",
        Some(&format!(
            "def execute(request):\n    auto(\"sleep 3 && touch '{}'\")\n",
            marker.display()
        )),
    );
    project.write(
        ".mekara/tests/slow/sleeps.toml",
        "[expect]\nend = \"completed\"\n",
    );
    let run = test(&project, &["--timeout", "0.5"]);
    assert_eq!(run.code, Some(1), "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("the case's run took more than 0.5 s and was stopped (`--timeout`)"),
        "{}",
        run.stdout
    );
    std::thread::sleep(std::time::Duration::from_secs(4));
    assert!(
        !marker.exists(),
        "the step went on after the case was stopped"
    );
}
