//! The defects found running the bundled workflows on real projects (issue 39's trials,
//! `docs/workflows/trials.md`): each test writes a fixture in the shape of the real project's
//! convention (a src layout, a check target whose first line changes things, a man page, clap
//! options, a report that is no bug), runs the workflow with the scripted agent of
//! `library.rs`, and checks that mekara says what happened truthfully.

use serde_json::json;

use crate::common::Project;
use crate::library::{
    PY_STATS, answer_and_resume, calls, commit_all, completed, detected_on, fake_tools,
    first_prompt, flow, flow_on, git, last_run, outputs, python_with_coverage, read, repository,
    state, told,
};
use crate::release::{stopped_by, today};

/// A Python project checked with pytest (`[tool.pytest.ini_options]`), its test committed, and
/// an uncommitted new function.
fn pytest_project() -> Project {
    let project = repository(&[
        (
            "pyproject.toml",
            "[project]\nname = \"stats\"\nversion = \"0.1.0\"\n\n[tool.pytest.ini_options]\naddopts = \"-q\"\n",
        ),
        ("stats.py", PY_STATS),
        (
            "test_stats.py",
            "from stats import mean\n\n\ndef test_mean():\n    assert mean([1, 2, 3]) == 2\n",
        ),
    ]);
    project.write(
        "stats.py",
        &format!("{PY_STATS}\n\ndef half(x):\n    return x / 2\n"),
    );
    project
}

/// Runs `flow/test-gaps` unattended, the scripted agent following `plan`, with pytest and
/// coverage on the `PATH`.
fn test_gaps_with_pytest(project: &Project, plan: &serde_json::Value) -> crate::common::Run {
    flow_on(
        project,
        plan,
        "flow/test-gaps",
        &[],
        Some(&python_with_coverage()),
    )
}

/// Regression (itsdangerous, fd): `test-gaps` said "the new tests still fail after 2 attempts"
/// when they never ran: pytest could not collect them (a test dependency that is not
/// installed). Now it stops at once, saying they could not run and why.
#[cfg_attr(not(feature = "clients"), ignore = "needs pytest and coverage")]
#[test]
fn test_gaps_says_the_new_tests_could_not_run_when_pytest_cannot_collect_them() {
    let project = pytest_project();
    let write = "printf 'import freezegun\\nfrom stats import half\\n\\n\\ndef test_half():\\n    assert half(4) == 2\\n' > test_half.py";
    let outputs = json!({"tests": "test_half.py checks half"});
    let plan = json!([
        {"when": "Step 3: write tests", "run": write, "outputs": outputs},
        {"when": "Step 4: these checks fail", "outputs": outputs},
    ]);
    let run = test_gaps_with_pytest(&project, &plan);
    assert!(
        stopped_by(&run).ends_with("the new tests could not run here (`python3 -m pytest`: the tests could not be collected (`ModuleNotFoundError: No module named 'freezegun'`): a missing test dependency or a broken import): install what is missing, then run the checks; the tests are in the work tree"),
        "{}",
        run.stderr
    );
    assert_eq!(calls(&project).len(), 1, "no second attempt");
}

/// Regression (itsdangerous): in a src layout, `python3 -m pytest` imported the package from
/// wherever it was installed, not from `src/` (here: nowhere, so every test failed to import
/// it and went to the agent as a failure). The check runs the source, and a project that keeps
/// its environment with uv (`uv.lock`) is checked in it or not at all.
#[cfg_attr(not(feature = "clients"), ignore = "needs pytest")]
#[test]
fn a_src_layout_is_tested_from_its_source_and_a_uv_project_only_with_uv() {
    let project = repository(&[
        (
            "pyproject.toml",
            "[project]\nname = \"signer\"\nversion = \"0.1.0\"\n\n[tool.pytest.ini_options]\ntestpaths = [\"tests\"]\n",
        ),
        (
            "src/signer/__init__.py",
            "def sign(x):\n    return x + \".sig\"\n",
        ),
        (
            "tests/test_sign.py",
            "from signer import sign\n\n\ndef test_sign():\n    assert sign(\"a\") == \"a.sig\"\n",
        ),
    ]);
    let path = python_with_coverage();
    let run = flow_on(&project, &json!([]), "flow/fix-ci", &[], Some(&path));
    completed(&run);
    assert!(calls(&project).is_empty(), "nothing failed");
    let out = outputs(&project);
    for line in [
        "check: PYTHONPATH=src python3 -m pytest (Python project (src layout))",
        "Every check passes: PYTHONPATH=src python3 -m pytest",
    ] {
        assert!(out.contains(line), "{line}\n{out}");
    }

    // With `uv.lock`, the tests run in uv's environment, or, without `uv` here, not at all.
    project.write("uv.lock", "version = 1\n");
    let facts = detected_on(&project, &path);
    let (list, expected) = if crate::library::on_path("uv", Some(&path)) {
        ("checks", json!("uv run pytest"))
    } else {
        (
            "skipped",
            json!({"check": "uv run pytest", "why": "`uv` not installed"}),
        )
    };
    assert!(
        facts[list].as_array().expect("a list").contains(&expected),
        "{facts:#}"
    );
    assert!(
        !facts.to_string().contains("python3 -m pytest"),
        "{facts:#}"
    );
}

/// Regression (fd): `test-gaps` given words instead of a ref failed ("is not a commit"). It
/// asks for the commit, as `bisect` does, and goes on from the one the person names.
#[test]
fn test_gaps_given_words_asks_for_the_commit_to_compare_with() {
    let project = pytest_project();
    let base = git(&project, &["rev-parse", "HEAD"]);
    commit_all(&project, "Add half");
    let plan = json!([{"when": "Step 3: write tests", "outputs": {"tests": "none"}}]);
    let run = flow(
        &project,
        &plan,
        "flow/test-gaps",
        &["the change where I added half"],
    );
    assert_eq!(state(&run), "waiting", "{}\n{}", run.stdout, run.stderr);
    let journal = project.journal(&last_run(&project));
    assert!(
        journal.contains("`the change where I added half` names no commit. Which commit should the change be compared with"),
        "{journal}"
    );
    answer_and_resume(&project, &base);
    let prompt = first_prompt(&project);
    assert!(prompt.contains("stats.py: lines 9-10"), "{prompt}");
}

/// A repository whose `check.sh` passes at tag `v1.0` and fails from the commit after.
fn broken_after_a_tag() -> Project {
    let project = repository(&[("check.sh", "exit 0\n")]);
    git(&project, &["tag", "v1.0"]);
    project.write("check.sh", "exit 1\n");
    commit_all(&project, "Break the check");
    project.write("README.md", "notes\n");
    commit_all(&project, "Readme");
    project
}

/// Regression (ky): `bisect v2.0.2 <a sentence>` ran the sentence as the check command, and its
/// exit 127 counted as "the check fails". Words that start with no command are no command: it
/// asks for one; and a check whose tool is missing did not fail, it did not run.
#[test]
fn bisect_given_a_ref_and_a_sentence_asks_for_the_command_and_never_runs_the_sentence() {
    let project = broken_after_a_tag();
    let plan = json!([{"when": "Step 5", "outputs": {"explanation": "check.sh:1: exits 1"}}]);
    let run = flow(
        &project,
        &plan,
        "flow/bisect",
        &["v1.0", "retries are ignored since the rewrite"],
    );
    assert_eq!(state(&run), "waiting", "{}\n{}", run.stdout, run.stderr);
    let journal = project.journal(&last_run(&project));
    assert!(
        journal.contains("`retries are ignored since the rewrite` does not start with a command here (`retries` is not installed, or these are words). Which shell command shows the breakage"),
        "{journal}"
    );
    completed(&answer_and_resume(&project, "sh check.sh"));
    let bad = git(&project, &["rev-parse", "HEAD~1"]);
    assert!(
        outputs(&project).contains(&format!("first bad commit: {bad}")),
        "{}",
        outputs(&project)
    );

    let missing = flow(
        &project,
        &plan,
        "flow/bisect",
        &["v1.0", "sh -c 'no-such-tool-xyz --check'"],
    );
    assert!(
        stopped_by(&missing).ends_with("`sh -c 'no-such-tool-xyz --check'` could not run here (`no-such-tool-xyz` not installed): install what is missing, or give another command"),
        "{}",
        missing.stderr
    );
}

/// Regression (ky): with no `node_modules`, `npm outdated` compares nothing, and
/// `upgrade-deps` said "Upgraded: nothing". It says the versions cannot be compared until the
/// dependencies are installed.
#[test]
fn upgrade_deps_without_node_modules_says_it_cannot_compare_rather_than_nothing_is_outdated() {
    let project = repository(&[
        (
            "package.json",
            "{\n  \"name\": \"greet\",\n  \"version\": \"1.0.0\",\n  \"dependencies\": {\"left-pad\": \"^1.0.0\"}\n}\n",
        ),
        (
            "package-lock.json",
            "{\n  \"name\": \"greet\",\n  \"lockfileVersion\": 3,\n  \"packages\": {}\n}\n",
        ),
    ]);
    let run = flow(&project, &json!([]), "flow/upgrade-deps", &[]);
    assert!(
        stopped_by(&run).ends_with("nothing was compared: npm: no `node_modules`, so the installed versions cannot be compared with the registry's: install the dependencies (`npm ci`, or `npm install` without a lock file), then run this workflow again"),
        "{}",
        run.stderr
    );
    assert!(!outputs(&project).contains("Upgraded: nothing"));
}

/// Regression (ky): `review HEAD` on `main` compared `main` with itself: "`HEAD` adds
/// nothing". A ref the base already has is reviewed as its own commit, and the run says so.
#[test]
fn review_of_head_on_main_reviews_the_last_commit() {
    let project = repository(&[(
        "greet.py",
        "def greet(name):\n    return \"Hello \" + name\n",
    )]);
    project.write(
        "greet.py",
        "def greet(name):\n    return \"Hello \" + name\n\n\ndef shout(name):\n    return greet(name).upper()\n",
    );
    let last = commit_all(&project, "Add shout");
    let plan = json!([{"when": "Step 4: review", "outputs": {"findings": "greet.py:6: shout has no test"}}]);
    let run = flow(&project, &plan, "flow/review", &["HEAD"]);
    completed(&run);
    let out = outputs(&project);
    assert!(
        out.contains(&format!(
            "`HEAD` is already in main: reviewing its own commit {} (what it changed from its parent).",
            &last[..12]
        )),
        "{out}"
    );
    assert!(out.contains("greet.py:6: shout has no test"), "{out}");
    let diff = read(&project, ".git/mekara/review.diff");
    assert!(diff.contains("+def shout(name):"), "{diff}");
}

/// Regression (cobra): CI and Makefile checks whose tools are missing ran anyway, their first
/// lines first (`make test`'s `go get`, a `docker run` with no daemon). A check target whose
/// recipe needs a missing tool, and a `docker run` with no daemon, are skipped before anything
/// runs. The stand-in `docker` leaves a mark if it is ever run.
#[test]
fn checks_whose_tools_are_missing_are_skipped_before_their_side_effects() {
    let project = repository(&[
        ("check.sh", "#!/bin/sh\necho checked\n"),
        (
            "Makefile",
            "test:\n\tmkdir -p build\n\tno-such-go-xyz get example.com/tool\n\tno-such-go-xyz test ./...\n",
        ),
        (
            ".github/workflows/ci.yml",
            "jobs:\n  check:\n    steps:\n      - run: sh ./check.sh\n  licenses:\n    steps:\n      - run: docker run --rm -v $(pwd):/src addlicense -check .\n",
        ),
    ]);
    let mark = project.home().join("docker-ran");
    let docker = format!("#!/bin/sh\ntouch '{}'\nexit 125\n", mark.display());
    let path = fake_tools(&project, &[("docker", &docker)]);
    if std::path::Path::new("/var/run/docker.sock").exists() {
        return; // a real daemon here: `docker run` may run
    }
    let run = flow_on(&project, &json!([]), "flow/fix-ci", &[], Some(&path));
    completed(&run);
    told(
        &project,
        &run,
        &[
            "skipped: make test (Makefile): `no-such-go-xyz` not installed",
            "skipped: docker run --rm -v $(pwd):/src addlicense -check . (.github/workflows/ci.yml job licenses): needs a running Docker daemon",
        ],
        "The checks that ran pass: sh ./check.sh",
    );
    assert!(!project.root().join("build").exists(), "make test ran");
    assert!(!mark.exists(), "docker ran");
}

/// Regression (fd): a check's output over 60 lines kept its first 40 and last 20, and clippy's
/// error was in the 300 lines of crate downloads cut between them. The lines that carry an
/// error are kept.
#[test]
fn a_long_failing_output_keeps_its_error_lines_for_the_agent() {
    let check = "#!/bin/sh\n[ -f fixed ] && exit 0\nfor i in $(seq 1 300); do echo \"  Downloaded crate-$i v1.0.$i\"; done\necho 'error[E0425]: cannot find value `widht` in this scope'\necho '  --> src/layout.rs:12:9'\nfor i in $(seq 1 30); do echo \"   Compiling crate-$i v1.0.$i\"; done\nexit 1\n";
    let project = repository(&[("check.sh", check)]);
    project.write(
        ".github/workflows/ci.yml",
        "jobs:\n  lint:\n    steps:\n      - run: sh ./check.sh\n",
    );
    commit_all(&project, "CI");
    let plan =
        json!([{"when": "Step 3", "run": "touch fixed", "outputs": {"fix": "renamed widht"}}]);
    completed(&flow(&project, &plan, "flow/fix-ci", &[]));
    let prompt = first_prompt(&project);
    for kept in [
        "lines cut here (lines 41–300 of 332)",
        "  error[E0425]: cannot find value `widht` in this scope\n    --> src/layout.rs:12:9\n",
        "… 10 lines cut here (lines 303–312) …",
    ] {
        assert!(prompt.contains(kept), "{kept}\n{prompt}");
    }
    assert!(!prompt.contains("Downloaded crate-41 "), "{prompt}");
}

/// A project whose README names an option the code no longer has, and whose CI check fails
/// before any docs change.
fn drifted_docs(check: &str) -> Project {
    repository(&[
        (
            "README.md",
            "# greet\n\nRun `node cli.js --shout NAME` to greet loudly.\n",
        ),
        ("cli.js", crate::library::JS_CLI),
        ("check.sh", check),
        (
            ".github/workflows/ci.yml",
            "jobs:\n  test:\n    steps:\n      - run: sh ./check.sh\n",
        ),
    ])
}

/// Regression (itsdangerous): `docs-sync` blamed a test failure that was there before the
/// docs change on it (no baseline run). The checks run before the change too; one that failed
/// already is said to, and the run ends.
#[test]
fn docs_sync_does_not_blame_a_failure_that_was_there_before_the_docs_change() {
    let project = drifted_docs("echo 'FAILED test_old'; exit 1\n");
    let plan = json!([
        {"when": "Step 3", "outputs": {"drifts": "README.md:3: says --shout; the code reads --loud"}},
        {"when": "Step 4", "run": "sed -i 's/--shout/--loud/' README.md", "outputs": {"fixed": "README.md: --loud"}},
    ]);
    let run = flow(&project, &plan, "flow/docs-sync", &[]);
    completed(&run);
    let out = outputs(&project);
    assert!(
        out.contains("The docs are changed; no other check ran. These checks failed before the docs change too, so not because of it: `sh ./check.sh`"),
        "{out}"
    );
    assert!(read(&project, "README.md").contains("--loud"));
}

/// Regression (fd): `docs-sync` did not read the man page (`doc/fd.1`), and clap's options
/// showed as bare `#[arg(` lines, without the field they are on. The man page's option lines
/// are read, each option is one line with its field, and a long listing's rest is in a file.
#[test]
fn docs_sync_reads_man_pages_and_clap_options_with_their_fields() {
    let cli = "use clap::Parser;\n\n#[derive(Parser)]\npub struct Opts {\n    /// Search hidden files.\n    #[arg(\n        long,\n        short = 'H',\n    )]\n    pub hidden: bool,\n    #[arg(long)]\n    pub follow: bool,\n}\n";
    let man = ".TH TOOL 1\n.SH OPTIONS\n.TP\n.B \\-H, \\-\\-hidden\nSearch hidden files.\n.TP\n.B \\-\\-no\\-follow\nDo not follow links.\n";
    let project = repository(&[
        ("README.md", "# tool\n\nSee `tool --help`.\n"),
        ("src/cli.rs", cli),
        ("doc/tool.1", man),
    ]);
    let plan = json!([{"when": "Step 3", "outputs": {"drifts": ""}}]);
    completed(&flow(&project, &plan, "flow/docs-sync", &[]));
    let out = outputs(&project);
    for line in [
        "doc/tool.1:4:.B \\-H, \\-\\-hidden",
        "doc/tool.1:7:.B \\-\\-no\\-follow",
        "src/cli.rs:10: pub hidden: bool, #[arg( long, short = 'H', )]",
        "src/cli.rs:12: pub follow: bool, #[arg(long)]",
        "The docs match the code.",
    ] {
        assert!(out.contains(line), "{line}\n{out}");
    }
}

/// Regression (itsdangerous): `triage` of a report that describes intended behaviour had only
/// "apply" or "leave it"; the person can close it as not a bug, and nothing is changed.
#[test]
fn triage_can_end_with_not_a_bug() {
    let project = repository(&[
        ("stats.py", PY_STATS),
        ("check.sh", "exit 0\n"),
        (
            ".github/workflows/ci.yml",
            "jobs:\n  test:\n    steps:\n      - run: sh ./check.sh\n",
        ),
    ]);
    let plan = json!([
        {"when": "Step 3: write a test", "run": "printf 'from stats import mean\\nassert mean([]) == 0\\n' > test_empty.py",
         "outputs": {"test_file": "test_empty.py", "test_command": "python3 test_empty.py"}},
        {"when": "Steps 4 and 5", "outputs": {"cause": "stats.py:2: the mean of no numbers is undefined, as documented", "fix": "none"}},
    ]);
    let asked = flow(
        &project,
        &plan,
        "flow/triage",
        &["mean([]) raises instead of returning 0"],
    );
    assert_eq!(state(&asked), "waiting", "{}", asked.stderr);
    let ran = answer_and_resume(&project, "run");
    assert_eq!(state(&ran), "waiting", "{}", ran.stderr);
    let question = project
        .run(&["runs", "show", &last_run(&project)], "")
        .stdout;
    assert!(
        question.contains("Apply the fix, leave it, or close the report as not a bug?"),
        "{question}"
    );
    completed(&answer_and_resume(&project, "not a bug"));
    let out = outputs(&project);
    assert!(
        out.contains("Not a bug: stats.py:2: the mean of no numbers is undefined, as documented\nNothing was changed but the test the agent wrote, test_empty.py"),
        "{out}"
    );
    assert_eq!(read(&project, "stats.py"), PY_STATS);
}

/// Regression (ky): `npx` that would have to download the package prints "canceled due to
/// missing packages"; that counted as a failing check for the agent. It did not run.
#[test]
fn npx_canceled_for_missing_packages_is_a_check_that_did_not_run() {
    let project = repository(&[
        ("check.sh", "#!/bin/sh\necho checked\n"),
        (
            ".github/workflows/ci.yml",
            "jobs:\n  test:\n    steps:\n      - run: sh ./check.sh\n      - run: npx vitest run\n",
        ),
    ]);
    let npx = "#!/bin/sh\necho 'npm error npx canceled due to missing packages and no YES option: [\"vitest@3.2.4\"]' >&2\nexit 1\n";
    let path = fake_tools(&project, &[("npx", npx)]);
    let run = flow_on(&project, &json!([]), "flow/fix-ci", &[], Some(&path));
    completed(&run);
    assert!(calls(&project).is_empty(), "nothing for the agent to fix");
    told(
        &project,
        &run,
        &[
            "not run: npx vitest run: `vitest@3.2.4` is not in `node_modules` (npx would download it): install the dependencies first",
        ],
        "The checks that ran pass: sh ./check.sh (not run: `npx vitest run`",
    );
}

/// Regression (the trials): `commit`'s last words, that not every check ran, were a `print`,
/// shown at a terminal only; they are a step's output, in every reply.
#[test]
fn commit_says_in_its_steps_which_checks_did_not_run() {
    let project = repository(&[
        ("check.sh", "#!/bin/sh\necho checked\n"),
        (
            ".github/workflows/ci.yml",
            "jobs:\n  test:\n    steps:\n      - run: sh ./check.sh\n      - run: no-such-linter-xyz .\n",
        ),
    ]);
    project.write("notes.txt", "changed\n");
    let plan = json!([{"when": "Steps 4 and 5", "outputs": {"files": "notes.txt", "message": "Add notes"}}]);
    completed(&flow(&project, &plan, "flow/commit", &[]));
    let out = outputs(&project);
    assert!(
        out.contains("Committed; the checks that ran pass, but not all ran (not run: `no-such-linter-xyz .`: `no-such-linter-xyz` not installed)"),
        "{out}"
    );
}

/// Regression (click): the CI runs `tox run -e typing`, whose `pyright --verifytypes click`
/// passes, but the check came from `[tool.pyright]`: a bare `pyright`, which fails on code the
/// CI never checks that way, for the agent to "fix". A tox environment's command, as the CI
/// runs it, goes before the bare tool its configuration names.
#[test]
fn a_tox_environments_linter_command_goes_before_the_bare_configured_tool() {
    let project = repository(&[(
        "pyproject.toml",
        "[project]\nname = \"pkg\"\nversion = \"1.0.0\"\n\n[tool.pyright]\ninclude = [\"src\", \"tests/typing\"]\n\n[tool.tox.env.typing]\ncommands = [\n    [\"pyright\", \"--ignoreexternal\", \"--verifytypes\", \"pkg\"],\n]\n",
    )]);
    let path = fake_tools(&project, &[("pyright", "#!/bin/sh\nexit 0\n")]);
    let facts = detected_on(&project, &path);
    let checks = facts["checks"].as_array().expect("checks");
    assert!(
        checks.contains(&json!("pyright --ignoreexternal --verifytypes pkg")),
        "{facts:#}"
    );
    assert!(!checks.contains(&json!("pyright")), "{facts:#}");
}

/// Regression (click): `[tool.ruff]` says `fix = true`, so the `ruff check .` made from it
/// fixed the unused import itself and passed: a check changed the code, and the agent and the
/// person never heard of the failure the CI's pre-commit reports. It runs with `--no-fix`. The
/// stand-in `ruff` fixes as the real one does unless told `--no-fix`.
#[test]
fn a_configured_ruff_that_fixes_is_run_as_a_check_that_changes_nothing() {
    let project = repository(&[
        (
            "pyproject.toml",
            "[project]\nname = \"pkg\"\nversion = \"1.0.0\"\n\n[tool.ruff]\nfix = true\n",
        ),
        ("pkg.py", "import os\n\nVALUE = 1\n"),
    ]);
    let ruff = "#!/bin/sh\n[ \"$1\" = check ] || exit 0\ncase \" $* \" in *' --no-fix '*) grep -n '^import os$' pkg.py && { echo 'F401 `os` imported but unused'; exit 1; }; exit 0;; esac\nsed -i '/^import os$/d' pkg.py\necho 'Found 1 error (1 fixed, 0 remaining).'\n";
    let path = fake_tools(&project, &[("ruff", ruff)]);
    let plan = json!([{"when": "Step 3: `ruff check --no-fix .` fails", "run": "sed -i '/^import os$/d' pkg.py", "outputs": {"fix": "removed the unused import"}}]);
    completed(&flow_on(&project, &plan, "flow/fix-ci", &[], Some(&path)));
    assert_eq!(calls(&project).len(), 1, "the failure went to the agent");
}

/// Regression (click): `8.5.0` was released from the maintenance branch, and main still says
/// `8.5.0.dev`; the last release reachable from main is `8.4.2`, so `release` offered `patch:
/// 8.4.3` (below a release that exists) and nothing above `8.5.0`. The versions offered and
/// typed start above the release tagged on another branch, and the question says it is there.
#[test]
fn release_offers_versions_above_a_release_tagged_on_another_branch() {
    let project = crate::release::pep440_project();
    git(&project, &["checkout", "-q", "-b", "stable", "2.2.0"]);
    project.write("NOTES.txt", "the 2.3.0 release\n");
    commit_all(&project, "release version 2.3.0");
    git(&project, &["tag", "-a", "2.3.0", "-m", "Version 2.3.0"]);
    git(&project, &["checkout", "-q", "main"]);
    let run = flow(&project, &json!([]), "flow/release", &[]);
    assert_eq!(state(&run), "waiting", "{}\n{}", run.stdout, run.stderr);
    let question = stopped_by(&run);
    assert!(
        question
            .contains("(last release: 2.2.0; 2.3.0 is tagged on another branch). Which version?")
            && question.contains("- `patch`: 2.3.1\n  - `minor`: 2.4.0\n  - `major`: 3.0.0\n")
            && !question.contains("in progress"),
        "{question}"
    );
    project
        .run(&["answer", &last_run(&project), "type a version"], "")
        .expect_code(0);
    let typed = crate::library::mekara(&project, &crate::library::resume(&last_run(&project)));
    assert_eq!(state(&typed), "waiting", "{}", typed.stderr);
    project
        .run(&["answer", &last_run(&project), "2.2.5"], "")
        .expect_code(0);
    let refused = crate::library::mekara(&project, &crate::library::resume(&last_run(&project)));
    assert!(
        stopped_by(&refused).contains(
            "`2.2.5` is not greater than `2.3.0`, tagged on another branch. Type another version:"
        ),
        "{}",
        stopped_by(&refused)
    );
}

/// Regression (click): a Markdown `CHANGES.md` whose entries are `## Version X.Y.Z`, a blank
/// line and `Released DATE` (the newest one `Unreleased`) got a new entry without its date
/// line: only reStructuredText changelogs had one.
#[test]
fn release_dates_a_markdown_entry_as_the_changelogs_entries_are_dated() {
    let project = repository(&[
        (
            "pyproject.toml",
            "[project]\nname = \"pkg\"\nversion = \"1.1.0\"\n",
        ),
        (
            "CHANGES.md",
            "## Version 1.1.0\n\nReleased 2026-01-02\n\n- Second.\n\n## Version 1.0.0\n\nReleased 2025-12-01\n\n- First.\n",
        ),
    ]);
    git(&project, &["tag", "1.1.0"]);
    project.write("pkg.py", "VALUE = 2\n");
    commit_all(&project, "Change the value");
    let answered = release_answering(&project, "- The value is 2.", &["patch"]);
    let confirm = stopped_by(&answered).replace("\n  ", "\n");
    assert!(
        confirm.contains("## Version 1.1.1\n\nReleased "),
        "{confirm}"
    );
}

/// Regression (walkdir): a library crate that keeps `Cargo.lock` out of git (in `.gitignore`)
/// had its release fail at the commit, half staged: `git add Cargo.lock` refuses an ignored
/// file. The lock file is updated in place and left out of the commit.
#[test]
fn release_of_a_crate_whose_cargo_lock_is_ignored_commits_and_tags() {
    let project = repository(&[
        (".gitignore", "/target\nCargo.lock\n.mekara/\nagent/\n"),
        (
            "Cargo.toml",
            "[package]\nname = \"adder\"\nversion = \"0.4.1\"\nedition = \"2021\"\n",
        ),
        (
            "src/lib.rs",
            "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
        ),
        ("CHANGELOG.md", "# Changelog\n\n## 0.4.1\n\n- First.\n"),
    ]);
    git(&project, &["tag", "0.4.1"]);
    project.write(
        "Cargo.lock",
        "version = 3\n\n[[package]]\nname = \"adder\"\nversion = \"0.4.1\"\n",
    );
    project.write(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 {\n    a.wrapping_add(b)\n}\n",
    );
    commit_all(&project, "Add without overflow");
    let run = release_answering(&project, "- `add` wraps.", &["patch", "yes"]);
    completed(&run);
    assert_eq!(git(&project, &["tag", "--points-at", "HEAD"]), "0.4.2");
    assert_eq!(git(&project, &["status", "--porcelain"]), "");
    assert!(read(&project, "Cargo.lock").contains("version = \"0.4.2\""));
}

/// Regression (p-limit): `bisect` ran the check at the good commit in a fresh worktree under
/// the temporary folder, where the project's installed dependencies (`node_modules`, which git
/// ignores) are not, so a check that imports one "fails at v7.3.1 too". It checks the good
/// commit in the work tree, as `git bisect run` does.
#[test]
fn bisect_checks_the_good_commit_where_the_installed_dependencies_are() {
    let project = repository(&[("check.sh", "test -f node_modules/dep/index.js\n")]);
    git(&project, &["tag", "v1.0"]);
    project.write("node_modules/dep/index.js", "module.exports = 1;\n");
    project.write("check.sh", "test -f node_modules/dep/index.js && exit 1\n");
    commit_all(&project, "Break the check");
    let plan = json!([{"when": "Step 5", "outputs": {"explanation": "check.sh:1: exits 1"}}]);
    let run = flow(&project, &plan, "flow/bisect", &["v1.0", "sh check.sh"]);
    completed(&run);
    let bad = git(&project, &["rev-parse", "HEAD"]);
    assert!(
        outputs(&project).contains(&format!("first bad commit: {bad}")),
        "{}",
        outputs(&project)
    );
    assert_eq!(git(&project, &["branch", "--show-current"]), "main");
}

/// Regression (p-limit): a `package.json` indented with tabs (sindresorhus' packages) was not
/// read as holding the version ("version 7.3.1 in the tags"): the release would have tagged
/// and left the old version in the file. Its top-level `"version"` is found whatever the
/// indentation.
#[test]
fn release_writes_the_version_of_a_tab_indented_package_json() {
    let project = repository(&[(
        "package.json",
        "{\n\t\"name\": \"limit\",\n\t\"version\": \"1.0.0\",\n\t\"engines\": {\n\t\t\"version\": \"x\"\n\t},\n\t\"scripts\": {\n\t\t\"test\": \"node -e 0\"\n\t}\n}\n",
    )]);
    git(&project, &["tag", "v1.0.0"]);
    project.write("index.js", "export default 1;\n");
    commit_all(&project, "Add index");
    let run = release_answering(&project, "- Add the index.", &["minor", "yes"]);
    completed(&run);
    assert!(
        read(&project, "package.json")
            .starts_with("{\n\t\"name\": \"limit\",\n\t\"version\": \"1.1.0\",\n"),
        "{}",
        read(&project, "package.json")
    );
    assert_eq!(git(&project, &["tag", "--points-at", "HEAD"]), "v1.1.0");
}

/// Regression (google/uuid): a release-please history (`chore(master): release 1.6.0
/// (#151)`, headings `## [1.6.0](https://.../compare/v1.5.0...v1.6.0) (DATE)`) gave the new
/// release the last one's pull request number and its compare link. The number is dropped and
/// the link compares the last release with the new one.
#[test]
fn release_in_a_release_please_history_drops_the_pr_number_and_moves_the_compare_link() {
    let project = repository(&[("go.mod", "module example.com/uuid\n\ngo 1.21\n")]);
    project.write(
        "CHANGELOG.md",
        "# Changelog\n\n## [1.6.0](https://github.com/o/uuid/compare/v1.5.0...v1.6.0) (2024-01-16)\n\n### Features\n\n* add Max\n",
    );
    commit_all(&project, "chore(master): release 1.6.0 (#151)");
    git(&project, &["tag", "v1.6.0"]);
    project.write("max.go", "package uuid\n");
    commit_all(&project, "feat: more");
    let run = release_answering(&project, "### Features\n\n* more", &["minor"]);
    let confirm = stopped_by(&run);
    for part in [
        "Commit message: `chore(master): release 1.7.0`\n",
        "## [1.7.0](https://github.com/o/uuid/compare/v1.6.0...v1.7.0) (",
    ] {
        assert!(confirm.contains(part), "{part}\n{confirm}");
    }
}

/// Runs `flow/release` with the agent drafting `entry`, and answers `answers` in order (first
/// "release anyway" whenever the checks could not run here); returns the last run.
fn release_answering(project: &Project, entry: &str, answers: &[&str]) -> crate::common::Run {
    let plan = json!([{"when": "Step 5", "outputs": {"entry": entry}}]);
    let mut run = flow(project, &plan, "flow/release", &[]);
    for answer in answers {
        assert_eq!(state(&run), "waiting", "{}\n{}", run.stdout, run.stderr);
        if stopped_by(&run).contains("release anyway") {
            run = answer_and_resume(project, "release anyway");
            assert_eq!(state(&run), "waiting", "{}\n{}", run.stdout, run.stderr);
        }
        run = answer_and_resume(project, answer);
    }
    run
}

/// The question `run` stopped on, alone: the reply's first line names the step's index, its
/// last the run.
fn question_of(run: &crate::common::Run) -> String {
    let asked = stopped_by(run).replace("\n  ", "\n");
    let question = asked.lines().skip(1).collect::<Vec<_>>();
    question[..question.len().saturating_sub(1)].join("\n")
}

/// Regression (p-limit): `triage` ran the checks before writing its test, but blamed the fix
/// for every check that failed after it, one that failed before too (ava's flaky timing test)
/// included, and the run failed. A check that failed before the fix is named as such, and only
/// a new failure stops the run.
#[test]
fn triage_does_not_blame_the_fix_for_a_check_that_failed_before_it() {
    let project = triage_applied("echo 'FAILED test_timing'; exit 1\n", "", &[]);
    let out = outputs(&project);
    assert!(
        out.ends_with("The fix makes the new test pass; no other check ran. These checks failed before the fix too, so not because of it: `sh ./check.sh`\n"),
        "{out}"
    );
}

/// A project whose CI runs `sh ./check.sh` (`check`) and `more_ci` (more CI steps, with
/// `more_files`), triaged to
/// its end: the agent's test reproduces the bug, the person says run and apply.
fn triage_applied(check: &str, more_ci: &str, more_files: &[(&str, &str)]) -> Project {
    let ci = format!("jobs:\n  test:\n    steps:\n      - run: sh ./check.sh\n{more_ci}");
    let mut files = vec![
        ("stats.py", PY_STATS),
        ("check.sh", check),
        (".github/workflows/ci.yml", ci.as_str()),
    ];
    files.extend_from_slice(more_files);
    let project = repository(&files);
    let plan = json!([
        {"when": "Step 3: write a test", "run": "printf 'from stats import mean\\nassert mean([]) == 0\\n' > test_empty.py",
         "outputs": {"test_file": "test_empty.py", "test_command": "python3 test_empty.py"}},
        {"when": "Steps 4 and 5", "outputs": {"cause": "stats.py:2: divides by zero", "fix": "return 0 for no numbers"}},
        {"when": "Step 6: apply", "run": "sed -i 's|return sum(xs) / len(xs)|return sum(xs) / len(xs) if xs else 0|' stats.py",
         "outputs": {"changed": "stats.py"}},
    ]);
    let asked = flow(
        &project,
        &plan,
        "flow/triage",
        &["mean of no numbers crashes"],
    );
    assert_eq!(state(&asked), "waiting", "{}", asked.stderr);
    assert_eq!(state(&answer_and_resume(&project, "run")), "waiting");
    completed(&answer_and_resume(&project, "apply"));
    project
}

/// Regression (p-limit): `upgrade-deps` reverted an upgrade when any check failed after it:
/// a check that failed before the upgrades, or a flaky one (ava's timing test). The checks run
/// once before the upgrades; a check that failed then is no reason to revert; one that fails
/// after an upgrade runs once more, and passing then is flaky, said so, not blamed.
#[test]
fn upgrade_deps_keeps_an_upgrade_when_a_check_failed_before_it_or_is_flaky() {
    let project = repository(&[
        (
            "package.json",
            "{\n  \"name\": \"greet\",\n  \"version\": \"1.0.0\",\n  \"dependencies\": {\"left-pad\": \"^1.0.0\"}\n}\n",
        ),
        (
            "package-lock.json",
            "{\n  \"name\": \"greet\",\n  \"lockfileVersion\": 3,\n  \"packages\": {}\n}\n",
        ),
        ("lint.sh", "echo 'error: 1 problem'; exit 1\n"),
        // Fails on its second run only, as a timing test under load does.
        (
            "test.sh",
            "n=$(($(cat .git/runs 2>/dev/null || echo 0) + 1)); echo $n > .git/runs; [ $n -ne 2 ] || { echo 'FAILED timing'; exit 1; }\n",
        ),
        (
            ".github/workflows/ci.yml",
            "jobs:\n  test:\n    steps:\n      - run: sh ./lint.sh\n      - run: sh ./test.sh\n",
        ),
    ]);
    project.write("node_modules/left-pad/package.json", "{}\n");
    let npm = "#!/bin/sh\ncase \"$1\" in\n  outdated) echo '{\"left-pad\": {\"current\": \"1.0.0\", \"wanted\": \"1.0.0\", \"latest\": \"1.3.0\"}}' ;;\n  install) sed -i 's/\"\\^1.0.0\"/\"^1.3.0\"/' package.json ;;\nesac\n";
    let path = fake_tools(&project, &[("npm", npm)]);
    let run = flow_on(&project, &json!([]), "flow/upgrade-deps", &[], Some(&path));
    completed(&run);
    assert_eq!(
        git(&project, &["log", "-1", "--format=%s"]),
        "Upgrade left-pad from 1.0.0 to 1.3.0"
    );
    let out = outputs(&project);
    assert!(
        out.ends_with("Upgraded: left-pad 1.0.0 → 1.3.0\nReverted: nothing\nFlaky: `sh ./test.sh` (failed after upgrading left-pad, passed when run again)\nThese checks failed before the upgrades too, so not because of it: `sh ./lint.sh`\n"),
        "{out}"
    );
}

/// Regression (walkdir): a project with no changelog could only have a new `CHANGELOG.md`
/// or cancel the whole release. The confirm question says there is none and offers to
/// release without one; then only the version's files are committed and tagged.
#[test]
fn release_with_no_changelog_can_go_without_one() {
    let project = repository(&[(
        "package.json",
        "{\n  \"name\": \"limit\",\n  \"version\": \"1.0.0\"\n}\n",
    )]);
    git(&project, &["tag", "v1.0.0"]);
    project.write("index.js", "export default 1;\n");
    commit_all(&project, "Add index");
    let asked = release_answering(&project, "- Add the index.", &["minor"]);
    insta::assert_snapshot!(question_of(&asked), @r"
    Release v1.1.0?

    Files to change: `package.json`, `CHANGELOG.md`
    Commit message: `Release v1.1.0`
    Tag: `v1.1.0` (lightweight, as v1.0.0 is)
    This project has no changelog: `yes` releases and creates `CHANGELOG.md` with the entry below; `release without a changelog` releases the other files only; `no` cancels.
    Entry for a new `CHANGELOG.md`:

    ## v1.1.0

    - Add the index. (choices: `yes`, `release without a changelog`, `no`)
    ");
    completed(&answer_and_resume(&project, "release without a changelog"));
    assert_eq!(git(&project, &["tag", "--points-at", "HEAD"]), "v1.1.0");
    assert_eq!(
        git(&project, &["show", "--name-only", "--format=", "HEAD"]),
        "package.json"
    );
    assert!(!project.root().join("CHANGELOG.md").exists());
}

/// Regression (fd, ripgrep, walkdir): `docs-sync` ran no docs build for a Rust crate, so a
/// doc comment's link to an item the code no longer has went unseen. Where the crate's docs
/// are checked (its CI runs `cargo doc`, it denies rustdoc's lints, or its doc comments hold
/// examples), `cargo doc --no-deps` runs, warnings as errors, and its failure is shown.
#[test]
fn docs_sync_builds_a_crates_docs_where_they_are_checked() {
    let lib = "#![deny(rustdoc::broken_intra_doc_links)]\n//! Adds; see [`plus`].\n\n/// The sum.\npub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n";
    let project = repository(&[
        (
            "Cargo.toml",
            "[package]\nname = \"adder\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        ),
        ("src/lib.rs", lib),
        ("README.md", "# adder\n\nCall `adder::add`.\n"),
    ]);
    let plan = json!([{"when": "Step 3", "outputs": {"drifts": ""}}]);
    completed(&flow(&project, &plan, "flow/docs-sync", &[]));
    let out = outputs(&project);
    for line in [
        "docs build: rustdoc (`cargo doc --no-deps`) failed",
        "unresolved link to `plus`",
    ] {
        assert!(out.contains(line), "{line}\n{out}");
    }
}

/// Regression (click): through the MCP client's environment uv could not verify PyPI's
/// certificate (`invalid peer certificate: UnknownIssuer`), and the check was "not run: needs
/// the network", which sends the person to check a network that works. A certificate that
/// could not be verified is its own reason, with what to set for the tool.
#[test]
fn a_certificate_that_cannot_be_verified_is_not_a_missing_network() {
    let project = repository(&[(
        ".github/workflows/ci.yml",
        "jobs:\n  test:\n    steps:\n      - run: uv run pytest\n",
    )]);
    let uv = "#!/bin/sh\nprintf '%s\\n' 'error: Request failed after 3 retries' '  Caused by: Failed to fetch: `https://pypi.org/simple/pytest/`' '  Caused by: error sending request for url (https://pypi.org/simple/pytest/)' '  Caused by: client error (Connect)' '  Caused by: invalid peer certificate: UnknownIssuer' >&2\nexit 2\n";
    let path = fake_tools(&project, &[("uv", uv)]);
    let run = flow_on(&project, &json!([]), "flow/fix-ci", &[], Some(&path));
    insta::assert_snapshot!(stopped_by(&run), @"stopped by the script `flow:fix-ci`: no check could run here (not run: `uv run pytest`: could not verify the registry's certificate (`invalid peer certificate: UnknownIssuer`): uv's `--native-tls` (or `UV_NATIVE_TLS=1`) uses the system's certificates; or set `SSL_CERT_FILE` to the certificate authority's bundle): install what is missing, or give the command to run as the workflow's argument");
}

/// Regression (click): `pr`'s "Push `BRANCH` and open a pull request ...?" reached the person
/// with no choices: the MCP reply listed them after the question the agent passes on word for
/// word. They are in the question's block now, for every workflow's question, so a question
/// makes sense wherever the agent relays it (a terminal shows them numbered, a notification
/// after the question).
#[tokio::test]
async fn a_questions_choices_are_in_the_text_the_agent_relays_word_for_word() {
    let project = Project::new();
    project.script(
        "push",
        "Push the branch.\n",
        Some("def execute(request):\n    ask(\"Push `feature` to `origin`?\", choices = [\"yes\", \"no\"])\n"),
    );
    let client = crate::mcp::client::Client::start(&project, &[]).await;
    let reply = client.call("start", json!({"name": "push"})).await.ok();
    let turn = reply.split("## Your turn").nth(1).unwrap_or_default();
    let turn = turn
        .split("When the user has answered")
        .next()
        .unwrap_or_default();
    insta::assert_snapshot!(turn, @r#"
    : ask the user (`push[0]`)

    The script needs an answer from the user, not from you. Ask the user this question, word for word, and wait for their reply:

    <question>
    Push `feature` to `origin`?

    Choices: "yes", "no"
    </question>

    The answer must be one of the choices, as written.
    "#);
}

/// Regression (the trials, a model as the agent): the refusal to start a repository's own
/// `flow/commit` named its files but not which one's steps would run, nor how to have the
/// bundled workflow back. With only a compiled file, paired with mekara's own NL text (which
/// describes the bundled workflow, not these steps), it says that the compiled file runs.
#[test]
fn a_shadowing_compiled_script_is_named_as_what_runs_with_the_way_back_to_the_bundled_one() {
    let project = Project::new();
    project.write(
        ".mekara/scripts/compiled/flow/commit.star",
        "def execute(request):\n    auto(\"touch marker\")\n",
    );
    let run = project.run(&["run", "flow:commit"], "");
    assert!(!project.root().join("marker").exists());
    mekara_snapshot!(project, run, @r"
    exit code: 2
    ----- stdout -----
    ----- stderr -----
    error: `flow:commit` here is this project's own script (`[PROJECT]/.mekara/scripts/compiled/flow/commit.star`), not mekara's bundled `flow:commit`; nothing of it ran; what would run is the steps of its compiled file `[PROJECT]/.mekara/scripts/compiled/flow/commit.star`, not what the bundled NL text of `flow:commit` describes; read `[PROJECT]/.mekara/scripts/compiled/flow/commit.star` first; to run it, `mekara run --project-script flow:commit`; mekara's bundled `flow:commit` runs under that name again once the project's files are moved out of the project or renamed
    ");
}

/// Writes a wheel of module `name` at `version` with `body`, and the package index page
/// listing every wheel written so far, into the project's own package index under its home
/// (a PEP 503 index on `file://`, as a private index is kept): uv resolves from it with no
/// network.
fn publish_wheel(project: &Project, name: &str, version: &str, body: &str) {
    const WHEEL: &str = r#"
import pathlib, sys, zipfile
index, name, version, body = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
(index / name).mkdir(parents=True, exist_ok=True)
info = f"{name}-{version}.dist-info"
with zipfile.ZipFile(index / name / f"{name}-{version}-py3-none-any.whl", "w") as z:
    z.writestr(f"{name}.py", body)
    z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    z.writestr(f"{info}/RECORD", "")
links = "".join(f'<a href="{w.name}">{w.name}</a>\n' for w in sorted((index / name).glob("*.whl")))
(index / name / "index.html").write_text(f"<html><body>\n{links}</body></html>\n")
"#;
    let index = project.home().join("index");
    let out = std::process::Command::new("python3")
        .args(["-c", WHEEL])
        .arg(&index)
        .args([name, version, body])
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Issue 39 (itsdangerous, click): `upgrade-deps` on a uv project (`uv.lock`) stopped with
/// "no cargo or npm project here (found: python)". It lists the outdated dependencies with
/// `uv tree --outdated`, upgrades each with `uv lock --upgrade-package`, keeps what passes the
/// checks, reverts what breaks them, and holds back what the requirements keep (`gamma<2`).
/// Without `uv.lock`, or without `uv`, it says what is needed. The packages come from a local
/// index the test writes, so nothing needs the network.
#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "needs uv in target/test-clients/py: bash tests/python/install.sh"
)]
fn upgrade_deps_upgrades_a_uv_project_through_its_lock_file() {
    let (uv, path) = crate::release::uv_and_path();
    let project = repository(&[
        (
            "app.py",
            "import alpha, beta, gamma\n\n\ndef total():\n    return alpha.f() + beta.g() + gamma.h()\n",
        ),
        (
            "test_app.py",
            "import unittest\n\nimport app\n\n\nclass TestApp(unittest.TestCase):\n    def test_total(self):\n        self.assertEqual(app.total(), 3)\n",
        ),
        ("Makefile", "test:\n\tuv run python -m unittest -q\n"),
        (".gitignore", ".venv/\n"),
    ]);
    // Without `uv.lock`: what a Python project needs, and nothing changed.
    project.write(
        "pyproject.toml",
        &format!(
            "[project]\nname = \"app\"\nversion = \"0.1.0\"\nrequires-python = \">=3.8\"\ndependencies = [\"alpha>=1\", \"beta>=1\", \"gamma>=1,<2\"]\n\n[[tool.uv.index]]\nname = \"local\"\nurl = \"file://{}\"\ndefault = true\n",
            project.home().join("index").display()
        ),
    );
    commit_all(&project, "A uv project");
    let run = flow_on(&project, &json!([]), "flow/upgrade-deps", &[], Some(&path));
    assert!(
        stopped_by(&run).contains("no cargo, npm, Go or uv project here (found: python, make): a Python project is upgraded through its `uv.lock` (`uv lock` writes one; commit it first)"),
        "{}",
        run.stderr
    );

    // Each package's old version is locked, then a newer one is published: alpha 2 drops `f`,
    // beta 1.1 keeps `g`, gamma 2 is outside `gamma<2`.
    publish_wheel(&project, "alpha", "1.0.0", "def f():\n    return 1\n");
    publish_wheel(&project, "beta", "1.0.0", "def g():\n    return 1\n");
    publish_wheel(&project, "gamma", "1.0.0", "def h():\n    return 1\n");
    let lock = project
        .shell(&format!("{} lock -q", uv.display()))
        .env("PATH", &path)
        .output()
        .expect("uv lock");
    assert!(
        lock.status.success(),
        "{}",
        String::from_utf8_lossy(&lock.stderr)
    );
    let before = commit_all(&project, "Lock");
    publish_wheel(&project, "alpha", "2.0.0", "def f2():\n    return 1\n");
    publish_wheel(&project, "beta", "1.1.0", "def g():\n    return 1\n");
    publish_wheel(&project, "gamma", "2.0.0", "def h():\n    return 1\n");

    // Without `uv` on the `PATH`, nothing is compared, and it says so.
    assert!(!crate::library::on_path("uv", Some("/usr/bin:/bin")));
    let run = flow_on(
        &project,
        &json!([]),
        "flow/upgrade-deps",
        &[],
        Some("/usr/bin:/bin"),
    );
    assert!(
        stopped_by(&run).contains("nothing was compared: uv: `uv.lock` keeps the Python dependencies and `uv` is not installed: install it (https://docs.astral.sh/uv/), then run this workflow again"),
        "{}",
        run.stderr
    );

    let run = flow_on(&project, &json!([]), "flow/upgrade-deps", &[], Some(&path));
    completed(&run);
    let journal = project.journal(&last_run(&project));
    let summary = journal
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|e| e["result"]["output"].as_str().map(str::to_string))
        .find(|o| o.starts_with("Upgraded:"))
        .unwrap_or_else(|| panic!("no summary in the journal:\n{journal}"));
    insta::assert_snapshot!(summary, @r"
    Upgraded: beta 1.0.0 → 1.1.0
    Reverted: alpha 1.0.0 → 2.0.0 (make test failed)
    Held back: gamma 1.0.0 (latest 2.0.0: outside the project's requirements)
    ");
    assert_eq!(
        git(
            &project,
            &["log", "--format=%s", &format!("{before}..HEAD")]
        ),
        "Upgrade beta from 1.0.0 to 1.1.0"
    );
    assert_eq!(git(&project, &["status", "--porcelain"]), "");
    let lock = read(&project, "uv.lock");
    for locked in [
        "name = \"alpha\"\nversion = \"1.0.0\"",
        "name = \"beta\"\nversion = \"1.1.0\"",
        "name = \"gamma\"\nversion = \"1.0.0\"",
    ] {
        assert!(lock.contains(locked), "{locked}\n{lock}");
    }
}

/// Regression (requests): its CI's `make ci` runs `pytest --junitxml=report.xml`, and the
/// report the check wrote showed up as part of the change (`?? report.xml` in what `commit`
/// handed the agent; "new untracked files: report.xml" in `review HEAD`). A file the checks
/// write is removed after them, saying so; an untracked file that was there before is kept.
/// And the question put the checks that did not run in a parenthesis right after the failing
/// one, which read as if it had not run, with the CI's publish step among them.
#[test]
fn a_report_the_checks_write_is_no_part_of_the_change_and_the_question_keeps_failing_and_not_run_apart()
 {
    let project = repository(&[
        ("Makefile", "ci:\n\tsh ./check.sh\n"),
        (
            "check.sh",
            "#!/bin/sh\necho '<testsuite failures=\"1\"/>' > report.xml\necho 'FAILED test_connect_timeout'\nexit 1\n",
        ),
        (
            ".github/workflows/ci.yml",
            "on: [push]\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n      - run: make ci\n  lint:\n    runs-on: ubuntu-latest\n    steps:\n      - run: golangci-lint run\n  publish:\n    runs-on: ubuntu-latest\n    steps:\n      - run: twine upload dist/*\n",
        ),
        ("models.py", "def ok(status):\n    return status < 400\n"),
    ]);
    project.write("notes.txt", "the person's own untracked notes\n");
    project.write(
        "models.py",
        "def ok(status):\n    \"\"\"Whether `status` is below 400.\"\"\"\n    return status < 400\n",
    );
    let plan = json!([{"when": "Steps 4 and 5", "outputs": {"files": "models.py", "message": "Document ok"}}]);
    let run = flow(&project, &plan, "flow/commit", &[]);
    assert_eq!(state(&run), "waiting", "{}\n{}", run.stdout, run.stderr);
    let asked = stopped_by(&run);
    let question = asked.lines().nth(1).unwrap_or_default().trim();
    insta::assert_snapshot!(question, @"These checks fail: `make ci`. Not run here: `golangci-lint run`: `golangci-lint` not installed. Commit anyway? (choices: `stop`, `commit anyway`)");
    completed(&answer_and_resume(&project, "commit anyway"));
    let prompt = first_prompt(&project);
    assert!(!prompt.contains("report.xml"), "{prompt}");
    assert!(prompt.contains("?? notes.txt"), "{prompt}");
    assert!(!project.root().join("report.xml").exists());
    assert!(
        outputs(&project)
            .contains("removed report.xml: the checks wrote it (it is no part of the change)")
    );
    assert_eq!(
        git(&project, &["show", "--name-only", "--format=", "HEAD"]),
        "models.py"
    );
}

/// Regression (requests): its checks are `make ci` (pytest, in the Makefile), so no check
/// named a runner and coverage ran `unittest discover`, which found none of the pytest tests
/// ("Ran 0 tests", exit 0): every changed line was "no test runs these lines", the tested
/// ones too. With pytest installed where the tests run, coverage runs pytest; a run that finds
/// no test says nothing was measured.
#[cfg_attr(not(feature = "clients"), ignore = "needs pytest and coverage")]
#[test]
fn test_gaps_measures_with_pytest_when_the_check_is_a_make_target() {
    let project = pytest_project();
    project.write("Makefile", "test:\n\tpython3 -m pytest -q\n");
    commit_all(&project, "Test with make");
    project.write(
        "stats.py",
        &format!(
            "{}\n\ndef half(x):\n    return x / 2\n\n\ndef double(x):\n    return x * 2\n",
            PY_STATS.replace(
                "return sum(xs) / len(xs)",
                "return sum(xs) / max(len(xs), 1)"
            )
        ),
    );
    let plan = json!([{"when": "Step 3: write tests", "outputs": {"tests": "none"}}]);
    let run = test_gaps_with_pytest(&project, &plan);
    assert!(
        !calls(&project).is_empty(),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    let prompt = first_prompt(&project);
    assert!(
        prompt.contains(
            "Measured with `python3 -m coverage`: no test runs these lines.\n\nstats.py: lines 14"
        ),
        "{prompt}"
    );
    assert!(outputs(&project).contains("passed"), "pytest ran the tests");
}

/// Regression (requests): the version is `__version__` in `src/requests/__version__.py`
/// (`[tool.setuptools.dynamic] version = {attr = "requests.__version__.__version__"}`), a
/// file the release did not look at: it proposed to tag `v2.35.0` changing only the
/// changelog, leaving the package at the old version.
#[test]
fn release_writes_the_version_of_a_dunder_version_module() {
    let project = repository(&[
        (
            "pyproject.toml",
            "[project]\nname = \"fetch\"\ndynamic = [\"version\"]\n\n[tool.setuptools.dynamic]\nversion = {attr = \"fetch.__version__.__version__\"}\n",
        ),
        (
            "src/fetch/__version__.py",
            "__title__ = \"fetch\"\n__version__ = \"2.34.2\"\n",
        ),
        (
            "src/fetch/__init__.py",
            "from .__version__ import __version__\n",
        ),
        ("Makefile", "test:\n\ttrue\n"),
    ]);
    git(&project, &["tag", "v2.34.2"]);
    project.write(
        "src/fetch/retry.py",
        "def parse(value):\n    return int(value)\n",
    );
    commit_all(&project, "Add retry parsing");
    let run = release_answering(&project, "- Retry parsing.", &["minor"]);
    let confirm = stopped_by(&run);
    assert!(
        confirm.contains("Files to change: `src/fetch/__version__.py`"),
        "{confirm}"
    );
    completed(&answer_and_resume(&project, "yes"));
    assert_eq!(
        read(&project, "src/fetch/__version__.py"),
        "__title__ = \"fetch\"\n__version__ = \"2.35.0\"\n"
    );
}

/// A Go module as the Go trials had them (google/uuid, spf13/pflag, spf13/cobra): `go.mod`, a
/// CI job that runs `go test`, and the person's Go settings in the test's home (`go env -w`'s
/// file): `GOPROXY=off`, so that a module not in the cache is never fetched, network or not.
fn go_module(files: &[(&str, &str)]) -> Project {
    let mut all = vec![
        ("go.mod", "module example.com/flags\n\ngo 1.19\n"),
        (
            ".github/workflows/ci.yml",
            "jobs:\n  test:\n    steps:\n      - uses: actions/setup-go@v5\n      - run: go test -v ./...\n",
        ),
    ];
    all.extend_from_slice(files);
    let project = repository(&all);
    crate::common::write_file(
        &project.home().join(".config/go/env"),
        "GOPROXY=off\nGOFLAGS=-mod=mod\n",
    );
    project
}

const GO_COUNT: &str = "package flags\n\n// Count returns how many of words are not empty.\nfunc Count(words []string) int {\n\tn := 0\n\tfor _, w := range words {\n\t\tif w != \"\" {\n\t\t\tn++\n\t\t}\n\t}\n\treturn n\n}\n";

const GO_COUNT_TEST: &str = "package flags\n\nimport \"testing\"\n\nfunc TestCount(t *testing.T) {\n\tif got := Count([]string{\"a\", \"\", \"b\"}); got != 2 {\n\t\tt.Errorf(\"Count = %d, want 2\", got)\n\t}\n}\n";

/// Regression (cobra): its modules could not be downloaded (no proxy here), `make test` failed
/// with go's `dial tcp: lookup proxy.golang.org ... no such host`, and that went to the agent as
/// a failing check to fix. It did not run: it needs the network, and the run says so.
#[test]
fn go_modules_that_cannot_be_downloaded_make_a_check_that_needs_the_network() {
    let project = go_module(&[
        (
            "go.mod",
            "module example.com/flags\n\ngo 1.19\n\nrequire example.com/dep v1.0.0\n",
        ),
        (
            "flags.go",
            "package flags\n\nimport \"example.com/dep\"\n\nvar Name = dep.Name\n",
        ),
    ]);
    let run = flow(&project, &json!([]), "flow/fix-ci", &[]);
    assert!(calls(&project).is_empty(), "nothing for the agent to fix");
    assert!(
        stopped_by(&run).contains("no check could run here (not run: `go test -v ./...`: needs the network (a Go module could not be downloaded: `example.com/dep@v1.0.0`)"),
        "{}",
        run.stdout
    );
}

/// Regression (uuid): its CI runs `go test` and never gofmt, and the gofmt here (1.19)
/// rewrites the doc comments of seven of its files: the default gofmt check failed and the
/// agent was asked to "fix" them. A formatter the CI does not run is left out, said once; one
/// the project enforces (golangci-lint's `formatters: gofmt`, pflag's) runs, and its failure
/// names the files (gofmt exits 0 either way).
#[test]
fn a_formatter_the_ci_does_not_run_is_left_out_and_gofmt_names_the_files_it_would_change() {
    let unformatted = "package flags\n\nfunc  Name() string { return \"x\" }\n";
    let project = go_module(&[("flags.go", unformatted)]);
    let plan = json!([{"when": "Step 3", "outputs": {"fix": "none"}}]);
    completed(&flow(&project, &plan, "flow/fix-ci", &[]));
    assert!(
        calls(&project).is_empty(),
        "gofmt is not this project's check"
    );
    let out = outputs(&project);
    assert!(
        out.contains("left out: test -z \"$(gofmt -l . | tee /dev/stderr)\" (go.mod): the CI does not run it, so the project does not keep that formatting"),
        "{out}"
    );
    assert!(
        out.contains("Every check passes: go test -v ./..., go vet ./..."),
        "{out}"
    );

    let enforced = go_module(&[
        ("flags.go", unformatted),
        (
            ".golangci.yaml",
            "version: \"2\"\nformatters:\n  enable:\n    - gofmt\n",
        ),
    ]);
    let plan =
        json!([{"when": "Step 3", "run": "gofmt -w flags.go", "outputs": {"fix": "gofmt -w"}}]);
    completed(&flow(&enforced, &plan, "flow/fix-ci", &[]));
    let prompt = first_prompt(&enforced);
    assert!(
        prompt.contains("Step 3: `test -z \"$(gofmt -l . | tee /dev/stderr)\"` fails"),
        "{prompt}"
    );
    let journal = enforced.journal(&last_run(&enforced));
    assert!(
        journal.contains("flags.go"),
        "gofmt's list of files: {journal}"
    );
}

/// Regression (uuid, pflag): test-gaps had no coverage for Go and handed the agent every
/// changed line to judge by reading. `go test -coverprofile` measures it: only the new
/// function no test runs is listed, not the tested one, its comment or its signature's block
/// outside the statements.
#[test]
fn test_gaps_measures_go_coverage_with_a_cover_profile() {
    let project = go_module(&[("count.go", GO_COUNT), ("count_test.go", GO_COUNT_TEST)]);
    let base = git(&project, &["rev-parse", "HEAD"]);
    project.write(
        "count.go",
        &format!("{GO_COUNT}\n// Empty reports whether words has no word.\nfunc Empty(words []string) bool {{\n\treturn Count(words) == 0\n}}\n"),
    );
    project.write(
        "count_test.go",
        &format!("{GO_COUNT_TEST}\nfunc TestCountNone(t *testing.T) {{\n\tif Count(nil) != 0 {{\n\t\tt.Error(\"Count(nil) != 0\")\n\t}}\n}}\n"),
    );
    commit_all(&project, "feat: Empty");
    let plan = json!([{"when": "Step 3: write tests", "outputs": {"tests": "none"}}]);
    let run = flow(&project, &plan, "flow/test-gaps", &[&base]);
    assert_eq!(state(&run), "completed", "{}\n{}", run.stdout, run.stderr);
    let prompt = first_prompt(&project);
    assert!(
        prompt.contains("Measured with `go test -coverprofile`: no test runs these lines.\n\ncount.go: lines 15-17"),
        "{prompt}"
    );
}

/// Regression (uuid, cobra): upgrade-deps had no Go: "no cargo or npm project here". It asks
/// `go list -m -u all`, and without the module proxy says it compared nothing and why, never
/// "Upgraded: nothing".
#[test]
fn upgrade_deps_of_a_go_module_without_the_proxy_says_it_needs_the_network() {
    let project = go_module(&[(
        "go.mod",
        "module example.com/flags\n\ngo 1.19\n\nrequire example.com/dep v1.0.0\n",
    )]);
    let run = flow(&project, &json!([]), "flow/upgrade-deps", &[]);
    assert!(
        stopped_by(&run).ends_with("nothing was compared: go: needs the network (a Go module could not be downloaded: `example.com/dep@v1.0.0`), so the required modules cannot be compared with their newest versions"),
        "{}",
        run.stdout
    );
    assert!(!outputs(&project).contains("Upgraded: nothing"));
}

/// Regression (pflag, cobra): a Go module's version is in its lightweight tags alone and it
/// keeps no changelog (the notes are the release page's): the release wrote a new
/// `CHANGELOG.md` and a release commit. It is the tag alone, as the last one was tagged. And
/// `major` offered `v2.0.0` of a module whose path has no `/v2`, a version Go cannot find.
#[test]
fn release_of_a_go_module_without_a_changelog_is_a_tag_and_never_a_v2_of_a_v1_path() {
    let project = go_module(&[("count.go", GO_COUNT), ("count_test.go", GO_COUNT_TEST)]);
    git(&project, &["tag", "v1.2.0"]);
    project.write("empty.go", "package flags\n\n// Empty is true for no words.\nfunc Empty(words []string) bool { return Count(words) == 0 }\n");
    let head = commit_all(&project, "feat: Empty");
    let run = flow(&project, &json!([]), "flow/release", &[]);
    let question = stopped_by(&run);
    assert!(
        question.contains("(not offered: `major` 2.0.0: a Go module's v2 needs `module example.com/flags/v2` in go.mod (it says `module example.com/flags`): Go looks for that major version only there; change go.mod and the imports, commit, then release)"),
        "{question}"
    );
    let run = answer_and_resume(&project, "minor");
    assert!(
        stopped_by(&run).contains("no file changes and no commit: only the tag `v1.3.0` on "),
        "{}",
        run.stdout
    );
    completed(&answer_and_resume(&project, "yes"));
    assert_eq!(git(&project, &["rev-parse", "HEAD"]), head, "no commit");
    assert_eq!(
        git(&project, &["cat-file", "-t", "v1.3.0"]),
        "commit",
        "lightweight, as v1.2.0"
    );
    assert!(!project.root().join("CHANGELOG.md").exists());
    assert!(
        outputs(&project).contains(
            "Tagged v1.3.0 on HEAD. Nothing was pushed: push it with `git push origin v1.3.0`."
        ),
        "{}",
        outputs(&project)
    );
}

/// Regression (uuid, pflag): docs-sync listed a fenced block's fence but not its code (pflag's
/// README sets a renamed field in one), and never Go's docs, its doc comments (uuid's renamed
/// `EnableRandPool` kept its comment). Both are shown to the agent; the run ends saying what
/// it did, not in silence.
#[test]
fn docs_sync_shows_fenced_code_and_go_doc_comments_that_name_another_declaration() {
    let project = go_module(&[
        (
            "pool.go",
            "package flags\n\n// EnablePool turns the pool on.\nfunc EnableRandomPool() {}\n\n// A Set is a set of flags.\ntype Set struct{}\n",
        ),
        (
            "README.md",
            "# flags\n\nTurn the pool on:\n\n``` go\nflags.EnablePool()\n```\n",
        ),
    ]);
    let plan = json!([
        {"when": "Step 3", "outputs": {"drifts": "README.md:6: says EnablePool; the function is EnableRandomPool"}},
        {"when": "Step 4", "run": "sed -i 's/EnablePool()/EnableRandomPool()/' README.md", "outputs": {"fixed": "README.md"}},
    ]);
    completed(&flow(&project, &plan, "flow/docs-sync", &[]));
    let journal = project.journal(&last_run(&project));
    for shown in [
        "README.md:6:flags.EnablePool()",
        "pool.go:3: the doc comment begins `EnablePool`, above `EnableRandomPool`",
    ] {
        assert!(journal.contains(shown), "{shown}\n{journal}");
    }
    assert!(!journal.contains("above `Set`"), "an article is no name");
    let out = outputs(&project);
    assert!(
        out.contains("The docs are changed; every check passes: go test -v ./..., go vet ./..."),
        "{out}"
    );
}

/// Regression (uuid): `go test -v`'s output of 445 lines was clipped to its first 40 and last
/// 20, and the failing test's lines (`--- FAIL: TestParse`, `uuid_test.go:101: ... got true
/// expected false`) were in the cut part: the agent saw `FAIL` and no test. They are kept.
#[test]
fn a_long_go_test_output_keeps_the_failing_tests_lines() {
    let check = "#!/bin/sh\n[ -f fixed ] && exit 0\nfor i in $(seq 1 300); do echo \"=== RUN   TestCase$i\"; echo \"--- PASS: TestCase$i (0.00s)\"; done\necho '    uuid_test.go:101: Parse(g47ac10b) got true expected false'\necho '--- FAIL: TestParse (0.00s)'\nfor i in $(seq 1 30); do echo \"=== RUN   TestMore$i\"; done\necho FAIL\nexit 1\n";
    let project = repository(&[
        ("check.sh", check),
        (
            ".github/workflows/ci.yml",
            "jobs:\n  test:\n    steps:\n      - run: sh ./check.sh test\n",
        ),
    ]);
    let plan = json!([{"when": "Step 3", "run": "touch fixed", "outputs": {"fix": "xtob"}}]);
    completed(&flow(&project, &plan, "flow/fix-ci", &[]));
    let prompt = first_prompt(&project);
    assert!(
        prompt.contains("  uuid_test.go:101: Parse(g47ac10b) got true expected false\n  --- FAIL: TestParse (0.00s)\n"),
        "{prompt}"
    );
}

/// Regression (cobra): with every check unable to run, "commit anyway" ended with "the checks
/// that ran pass", of none. It says no check ran.
#[test]
fn commit_with_no_check_run_says_so() {
    let project = repository(&[(
        ".github/workflows/ci.yml",
        "jobs:\n  test:\n    steps:\n      - run: no-such-linter-xyz .\n",
    )]);
    project.write("notes.txt", "changed\n");
    let plan = json!([{"when": "Steps 4 and 5", "outputs": {"files": "notes.txt", "message": "Add notes"}}]);
    let run = flow(&project, &plan, "flow/commit", &[]);
    assert!(
        stopped_by(&run).contains("Commit anyway?"),
        "{}",
        run.stdout
    );
    completed(&answer_and_resume(&project, "commit anyway"));
    let out = outputs(&project);
    assert!(
        out.contains("Committed, with no check run (not run: `no-such-linter-xyz .`: `no-such-linter-xyz` not installed)"),
        "{out}"
    );
}

/// Regression (ripgrep): a changelog whose newest section is a placeholder for the release in
/// progress (setext `TBD` / `===` above `15.2.0 (2026-07-15)`, its notes written there as the
/// work goes) got the new entry below it, so the `TBD` section stayed on top with the
/// release's notes in it. The placeholder's heading becomes the release's, in the format of
/// the entries below (the underline as long as the heading), and its notes stay under it; its
/// sentence saying the notes are not written yet goes.
#[test]
fn release_turns_a_tbd_section_into_the_release_entry() {
    let project = repository(&[(
        "CHANGELOG.md",
        "TBD\n===\nUnreleased changes. Release notes have not yet been written.\n\nBug fixes:\n\n* [BUG #7](https://example.com/7):\n  Fix the thing.\n\n\n1.2.0 (2026-01-02)\n==================\nFirst.\n",
    )]);
    git(&project, &["tag", "1.2.0"]);
    project.write("fix.txt", "fixed\n");
    commit_all(&project, "Fix the thing");
    let run = release_answering(&project, "unused: the notes are written", &["patch", "yes"]);
    completed(&run);
    let heading = format!("1.2.1 ({})", today());
    assert_eq!(
        read(&project, "CHANGELOG.md"),
        format!(
            "{heading}\n{}\nBug fixes:\n\n* [BUG #7](https://example.com/7):\n  Fix the thing.\n\n\n1.2.0 (2026-01-02)\n==================\nFirst.\n",
            "=".repeat(heading.len())
        )
    );
}

/// The same with an empty placeholder section in Markdown (`## Upcoming` above `## 1.0.0 -
/// DATE`): the agent drafts the notes, which go under the release's heading where the
/// placeholder was.
#[test]
fn release_writes_the_drafted_notes_where_an_empty_upcoming_section_was() {
    let project = repository(&[(
        "CHANGELOG.md",
        "# Changelog\n\n## Upcoming\n\n## 1.0.0 - 2026-01-02\n\n- First.\n",
    )]);
    git(&project, &["tag", "1.0.0"]);
    project.write("more.txt", "more\n");
    commit_all(&project, "Add more");
    let run = release_answering(&project, "- More.", &["minor", "yes"]);
    completed(&run);
    assert_eq!(
        read(&project, "CHANGELOG.md"),
        format!(
            "# Changelog\n\n## 1.1.0 - {}\n\n- More.\n\n## 1.0.0 - 2026-01-02\n\n- First.\n",
            today()
        )
    );
}

/// Regression (fd): a Markdown changelog whose in-progress section is a bare `# Unreleased`
/// (not keep-a-changelog's `## [Unreleased]`), its notes grouped under `## Features`, above
/// entries headed `# 10.4.2`, got `## [10.5.0] - DATE` inside the Unreleased section: a
/// subsection in a format the file never uses. As the history's release commits do, the
/// section's heading becomes `# 10.5.0`.
#[test]
fn release_renames_a_bare_unreleased_section_in_the_format_of_the_entries_below() {
    let project = repository(&[(
        "CHANGELOG.md",
        "# Unreleased\n\n## Features\n- Add `--exact`.\n\n# 10.4.2\n\n## Bugfixes\n- Faster.\n",
    )]);
    git(&project, &["tag", "v10.4.2"]);
    project.write("exact.txt", "exact\n");
    commit_all(&project, "Add --exact");
    let run = release_answering(&project, "unused: the notes are written", &["minor", "yes"]);
    completed(&run);
    assert_eq!(
        read(&project, "CHANGELOG.md"),
        "# 10.5.0\n\n## Features\n- Add `--exact`.\n\n# 10.4.2\n\n## Bugfixes\n- Faster.\n"
    );
    assert_eq!(git(&project, &["tag", "--points-at", "HEAD"]), "v10.5.0");
}

/// Regression (fd): `cargo clippy` waited 10 minutes for another build's lock on a busy
/// machine, its step's timeout stopped it, and `fix-ci` asked the agent to "find the cause and
/// fix the code" of a check that never ran to its end. A check stopped by its timeout did not
/// run: it is said so, with the way out, and no code is blamed.
#[test]
fn a_check_stopped_by_its_timeout_is_not_run_and_not_handed_to_the_agent() {
    let project = repository(&[("README.md", "# Tool\n")]);
    project.write("agent/plan.json", "[]");
    let run = crate::library::mekara(
        &project,
        &[
            "run",
            "--timeout",
            "3",
            "--agent-command",
            crate::library::AGENT_COMMAND,
            "--json",
            "flow/fix-ci",
            "sleep 60",
        ],
    );
    assert_eq!(
        stopped_by(&run),
        "stopped by the script `flow:fix-ci`: no check could run here (not run: `sleep 60`: did not finish in 3s (a slow build, or one waiting for another build's lock): run it by hand, or again with a longer timeout (`--timeout`)): install what is missing, or give the command to run as the workflow's argument"
    );
}

/// Regression (ripgrep): its `rust-version` (1.96) was above the installed rustc (1.95), so
/// cargo refused to build (`rustc 1.95.0 is not supported by the following packages`) and
/// `cargo test` counted as a failing check the agent was asked to fix. It did not run: it is
/// said so, with the version it needs and `rustup update`.
#[test]
fn a_crate_whose_rust_version_is_above_the_toolchain_is_not_run_rather_than_failing() {
    let project = repository(&[
        (
            "Cargo.toml",
            "[package]\nname = \"tool\"\nversion = \"0.1.0\"\nedition = \"2021\"\nrust-version = \"1.999\"\n",
        ),
        ("src/lib.rs", "pub fn one() -> u8 {\n    1\n}\n"),
    ]);
    let run = flow(&project, &json!([]), "flow/fix-ci", &[]);
    completed(&run);
    let out = outputs(&project);
    assert!(
        out.contains(
            "not run: cargo test: needs rustc 1.999 (the project's `rust-version`; this one is 1."
        ),
        "{out}"
    );
    assert!(out.contains("`rustup update`, then run it again"), "{out}");
}

/// Regression (ripgrep): `ci/test-complete` starts with `#!/usr/bin/env zsh`; without zsh,
/// `env` says `/usr/bin/env: 'zsh': No such file or directory`, and the check was "not run:
/// `'zsh'` not installed", the quotes kept inside the name.
#[test]
fn a_missing_interpreter_is_named_without_env_s_quotes() {
    let project = repository(&[("check.sh", "exit 0\n")]);
    project.write("agent/plan.json", "[]");
    let run = flow(
        &project,
        &json!([]),
        "flow/fix-ci",
        &["env nosuchshell check.sh"],
    );
    assert_eq!(
        stopped_by(&run),
        "stopped by the script `flow:fix-ci`: no check could run here (not run: `env nosuchshell check.sh`: `nosuchshell` not installed): install what is missing, or give the command to run as the workflow's argument"
    );
}

/// Regression (express): `History.md` (not `HISTORY.md`: names are case-sensitive here) was
/// not found, so the release proposed a second changelog, a new `CHANGELOG.md`. And its
/// entries are written ahead under `# Unreleased Changes`, above underlined `5.2.1 /
/// 2025-12-01` headings: that section becomes the release, renamed as the entries are headed.
#[test]
fn release_renames_the_unreleased_section_of_a_history_md() {
    let project = repository(&[("index.js", "module.exports = 1;\n")]);
    for (path, text) in [
        (
            "package.json",
            "{\n  \"name\": \"web\",\n  \"version\": \"1.2.0\",\n  \"scripts\": {\n    \"test\": \"node -e 0\"\n  }\n}\n",
        ),
        (
            "History.md",
            "# Unreleased Changes\n\n## Bug fixes\n\n- Fixed the redirect.\n\n1.2.0 / 2025-12-01\n=======================\n\n* First.\n",
        ),
    ] {
        project.write(path, text);
    }
    commit_all(&project, "1.2.0");
    git(&project, &["tag", "-a", "v1.2.0", "-m", "1.2.0"]);
    project.write("index.js", "module.exports = 2;\n");
    commit_all(&project, "fix: the redirect");
    let run = release_answering(
        &project,
        "(no prose: the section is written)",
        &["minor", "yes"],
    );
    completed(&run);
    let day = crate::release::today();
    assert_eq!(
        read(&project, "History.md"),
        format!(
            "1.3.0 / {day}\n==================\n\n## Bug fixes\n\n- Fixed the redirect.\n\n1.2.0 / 2025-12-01\n=======================\n\n* First.\n"
        )
    );
    assert!(!project.root().join("CHANGELOG.md").exists());
    assert_eq!(git(&project, &["log", "-1", "--format=%s"]), "1.3.0");
    assert_eq!(git(&project, &["tag", "--points-at", "HEAD"]), "v1.3.0");
}

/// Regression (express, as `## Unreleased` above `## 1.2.0 (DATE)` in Markdown): the
/// Unreleased section of a changelog whose entries are not keep-a-changelog's (`## [1.2.0] -
/// DATE`) got keep-a-changelog's heading and an empty Unreleased section above it; it is
/// renamed as the entries below are headed.
#[test]
fn release_heads_an_unreleased_markdown_section_as_the_entries_below() {
    let project = repository(&[
        (
            "package.json",
            "{\n  \"name\": \"web\",\n  \"version\": \"1.2.0\",\n  \"scripts\": {\n    \"test\": \"node -e 0\"\n  }\n}\n",
        ),
        (
            "CHANGELOG.md",
            "# Changelog\n\n## Unreleased\n\n- Fixed the redirect.\n\n## 1.2.0 (2025-12-01)\n\n- First.\n",
        ),
    ]);
    git(&project, &["tag", "v1.2.0"]);
    project.write("index.js", "module.exports = 2;\n");
    commit_all(&project, "fix: the redirect");
    let run = release_answering(
        &project,
        "(no prose: the section is written)",
        &["patch", "yes"],
    );
    completed(&run);
    let day = crate::release::today();
    assert_eq!(
        read(&project, "CHANGELOG.md"),
        format!(
            "# Changelog\n\n## 1.2.1 ({day})\n\n- Fixed the redirect.\n\n## 1.2.0 (2025-12-01)\n\n- First.\n"
        )
    );
}

/// Regression (express): a CommonJS library sets its API as methods on objects (`res.send =
/// function send(body) {`), which the code's surface did not list, while its 26 examples'
/// `var app = module.exports = express()` filled it. The methods are listed; examples and
/// benchmarks, which use the API, are not.
#[test]
fn docs_sync_lists_commonjs_methods_and_leaves_the_examples_out() {
    let project = repository(&[
        ("Readme.md", "# web\n\nReply with `res.send(body)`.\n"),
        (
            "lib/response.js",
            "'use strict'\n\nvar res = Object.create(null)\n\nres.send = function send(body) {\n  return body\n}\n\nmodule.exports = res\n",
        ),
        (
            "examples/hello/index.js",
            "var app = module.exports = require('../../')();\n",
        ),
    ]);
    let plan = json!([{"when": "Step 3", "outputs": {"drifts": ""}}]);
    completed(&flow(&project, &plan, "flow/docs-sync", &[]));
    let out = outputs(&project);
    assert!(
        out.contains("lib/response.js:5:res.send = function send(body) {\nlib/response.js:9:module.exports = res\n"),
        "{out}"
    );
    assert!(!out.contains("examples/"), "{out}");
}

/// Regression (express): `docs-sync HEAD~1` (a ref where the docs to look at go) grepped a
/// path that is not there, printed grep's "No such file or directory" and asked the agent
/// for drifts in nothing. It now stops first, saying what to give.
#[test]
fn docs_sync_given_no_path_says_what_to_give_before_anything() {
    let project = repository(&[("Readme.md", "# web\n\nSee `run()`.\n")]);
    let run = flow(&project, &json!([]), "flow/docs-sync", &["HEAD~1"]);
    assert_eq!(
        stopped_by(&run),
        "stopped by the script `flow:docs-sync`: `HEAD~1` is no file or folder here: give the docs to look at (a file or a folder such as `docs/`), or nothing for the README and the other docs"
    );
    assert!(
        calls(&project).is_empty(),
        "no step was handed to the agent"
    );
}

/// The output of the last run's step whose context starts with `context`.
fn step_output(project: &Project, context: &str) -> String {
    crate::library::steps(project)
        .iter()
        .find(|s| {
            s["context"]
                .as_str()
                .is_some_and(|c| c.starts_with(context))
        })
        .map_or_else(
            || panic!("no step `{context}`\n{}", outputs(project)),
            |s| {
                s["result"]["output"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            },
        )
}

/// Runs `flow/docs-sync` with no drift found and returns what its first two listings showed.
fn docs_sync_listings(project: &Project) -> (String, String) {
    let plan = json!([{"when": "Step 3", "outputs": {"drifts": ""}}]);
    completed(&flow(project, &plan, "flow/docs-sync", &[]));
    (
        step_output(project, "Step 1: what the docs say"),
        step_output(project, "Step 2: the code's surface"),
    )
}

/// Regression (ky): a README that gives each option a heading (`##### stringifyJson`, `###
/// ky.get(input, options?)`) had none of them in the docs' listing, and the code's listing
/// showed `export type KyOptions = {` but none of its fields, so a renamed option was in
/// neither. Headings that name code are listed (not `## Install`), and so are the members of
/// the exported types: TypeScript's types and interfaces, Rust's pub fields and variants,
/// Python's annotated class fields, Go's exported fields.
#[test]
fn docs_sync_lists_headings_that_name_code_and_the_fields_of_exported_types() {
    let project = repository(&[
        (
            "readme.md",
            "# ky\n\n## Install\n\n## API\n\n### ky.get(input, options?)\n\n#### options\n\n##### stringifyJson\n\nType: `Function`\n\n### HTTPError\n\nThrown for a bad status.\n",
        ),
        (
            "source/options.ts",
            "export type KyOptions = {\n\t/**\n\tHow the `json` option {is} sent.\n\t*/\n\tserializeJson?: (data: unknown) => string;\n\n\treadonly timeout?: number | false;\n\thooks?: {\n\t\tinit?: Hook[];\n\t};\n};\n\nexport type Input = string | URL;\n\nexport interface Hooks { // the hooks\n\tbeforeRequest(request: Request): void;\n}\n",
        ),
        (
            "src/lib.rs",
            "/// The settings.\npub struct Config {\n    /// How deep.\n    pub depth: usize,\n    secret: u8,\n}\n\npub enum Mode {\n    Fast,\n    Slow(u8),\n}\n",
        ),
        (
            "pkg/model.py",
            "from dataclasses import dataclass\n\n\n@dataclass\nclass Options:\n    \"\"\"What to do.\n\n    Note: these are read once.\n    \"\"\"\n    retries: int = 3\n    _cache: dict = None\n\n    def run(self):\n        local: int = 1\n\n\nlimit: int = 5\n",
        ),
        (
            "settings.go",
            "package settings\n\n// Settings are the settings.\ntype Settings struct {\n\t// Timeout in seconds.\n\tTimeout int\n\tname    string\n}\n",
        ),
    ]);
    let (docs, surface) = docs_sync_listings(&project);
    insta::assert_snapshot!(docs, @r"
    doc files: 1
    6 lines, kept whole in .git/mekara/docs-lines.txt (read there what a reply leaves out):
    readme.md:1:# ky
    readme.md:7:### ky.get(input, options?)
    readme.md:9:#### options
    readme.md:11:##### stringifyJson
    readme.md:13:Type: `Function`
    readme.md:15:### HTTPError
    ");
    insta::assert_snapshot!(surface, @r"
    17 lines, kept whole in .git/mekara/surface.txt (read there what a reply leaves out):
    pkg/model.py:5:class Options:
    pkg/model.py:10: retries: int = 3
    pkg/model.py:13:    def run(self):
    settings.go:4:type Settings struct {
    settings.go:6: Timeout int
    source/options.ts:1:export type KyOptions = {
    source/options.ts:5: serializeJson?: (data: unknown) => string;
    source/options.ts:7: readonly timeout?: number | false;
    source/options.ts:8: hooks?: {
    source/options.ts:13:export type Input = string | URL;
    source/options.ts:15:export interface Hooks { // the hooks
    source/options.ts:16: beforeRequest(request: Request): void;
    src/lib.rs:2:pub struct Config {
    src/lib.rs:4: pub depth: usize,
    src/lib.rs:8:pub enum Mode {
    src/lib.rs:9: Fast,
    src/lib.rs:10: Slow(u8),
    ");
}

/// Regression (uuid): the hint that a Go doc comment names another declaration than the one
/// under it (a rename that left its comment) fired on comments that rightly begin with
/// another word: an acronym (`RFC9562 added ...` above `const Standard`), the package's own
/// type (`UUID version 6 ...` above `func NewV6`). A comment that begins with another
/// MixedCaps name, declared nowhere in the package, and never names the declaration is one.
#[test]
fn docs_sync_hints_only_at_go_doc_comments_that_name_no_declaration_of_the_package() {
    let project = go_module(&[
        ("README.md", "# uuid\n\nMake one with `NewV6()`.\n"),
        (
            "uuid.go",
            "package uuid\n\n// A UUID is 16 bytes.\ntype UUID [16]byte\n\n// RFC9562 added V6 and V7; the constant keeps its name.\nconst Standard = 1\n\n// UUID version 6 is a reordered version 1.\n//\n// NewV6 returns a version 6 UUID.\nfunc NewV6() UUID { return UUID{} }\n\n// UUID.String returns the text form.\nfunc (u UUID) String() string { return \"\" }\n\n// Deprecated: use NewV6.\nfunc NewV1() UUID { return UUID{} }\n\n// Returns whether the pool is on.\nfunc PoolOn() bool { return false }\n\n// DefaultSize and DefaultName are the defaults.\nvar (\n\tDefaultSize = 16\n\tDefaultName = \"u\"\n)\n\n// BufferSize is ignored: NewBuffer picks its own.\nfunc NewBuffer() {}\n",
        ),
        (
            "pool.go",
            "package uuid\n\n// EnableRandPool turns the pool on.\nfunc EnableRandomPool() {}\n\n// The DefaultPool is the pool NewV6 draws from.\nfunc Pool() {}\n",
        ),
    ]);
    let (_, surface) = docs_sync_listings(&project);
    let hints = surface
        .split_once("(a renamed or removed name?):\n")
        .map_or("", |(_, hints)| hints);
    insta::assert_snapshot!(hints, @r"
    2 lines, kept whole in .git/mekara/go-doc-comments.txt (read there what a reply leaves out):
    pool.go:3: the doc comment begins `EnableRandPool`, above `EnableRandomPool`
    pool.go:6: the doc comment begins `DefaultPool`, above `Pool`
    ");
}

/// Regression (ky): a listing longer than a reply shows (its first 40 and last 20 lines) said
/// where the whole of it is only in its last line, past 300 lines, and a reply that cut the
/// middle said only that the journal kept it. The listing's first line says where it is kept
/// whole, and how long it is.
#[test]
fn docs_sync_says_in_a_listings_first_line_where_it_is_kept_whole() {
    let readme = (1..=80).fold(String::new(), |text, i| {
        text + &format!("Use `option{i}`.\n")
    });
    let project = repository(&[("README.md", readme.as_str())]);
    let (docs, _) = docs_sync_listings(&project);
    let head: Vec<&str> = docs.lines().take(2).collect();
    insta::assert_snapshot!(head.join("\n"), @r"
    doc files: 1
    80 lines, kept whole in .git/mekara/docs-lines.txt (read there what a reply leaves out):
    ");
    let kept = std::fs::read_to_string(project.root().join(".git/mekara/docs-lines.txt"))
        .expect("the whole listing");
    assert_eq!(kept.lines().count(), 80);
}

/// Regression (ky, requests): docs-sync's last words after a check that failed before the
/// change too said only that, leaving out the checks that did not run (`pyright`, not
/// installed), and "`npm test` failed before too" hid that its test runner never started:
/// the script is `xo && npm run build && ava`, and `xo` failed. The last words come from one
/// helper, which says all of it.
#[test]
fn docs_sync_last_words_say_what_did_not_run_and_a_chain_that_stopped_before_its_tests() {
    let project = repository(&[
        (
            "package.json",
            "{\n  \"name\": \"fetcher\",\n  \"version\": \"1.0.0\",\n  \"scripts\": {\n    \"test\": \"xo && npm run build && ava\",\n    \"build\": \"echo built\"\n  }\n}\n",
        ),
        (
            "node_modules/.bin/xo",
            "#!/bin/sh\necho '  test/http-error.ts:218:3'\necho '  ✖  218:3  Unexpected void operator.  no-meaningless-void-operator'\necho\necho '  1 error'\nexit 1\n",
        ),
        (
            "node_modules/.bin/ava",
            "#!/bin/sh\necho '  2 tests passed'\n",
        ),
        (
            ".github/workflows/ci.yml",
            "jobs:\n  test:\n    steps:\n      - run: npm test\n      - run: python3 -m pyright src/\n",
        ),
        (
            "readme.md",
            "# fetcher\n\n##### stringifyJson\n\nHow a body is sent.\n",
        ),
        (
            "source/options.ts",
            "export type Options = {\n\tserializeJson?: (data: unknown) => string;\n};\n",
        ),
    ]);
    for tool in ["xo", "ava"] {
        crate::library::executable(&project.root().join("node_modules/.bin").join(tool));
    }
    let plan = json!([
        {"when": "Step 3", "outputs": {"drifts": "readme.md:3: says stringifyJson; the option is serializeJson"}},
        {"when": "Step 4", "run": "sed -i 's/stringifyJson/serializeJson/' readme.md", "outputs": {"fixed": "readme.md"}},
    ]);
    completed(&flow(&project, &plan, "flow/docs-sync", &[]));
    insta::assert_snapshot!(step_output(&project, "Step 5: the docs are changed"), @"The docs are changed; no other check ran (not run: `python3 -m pyright src/`: `pyright` not installed). These checks failed before the docs change too, so not because of it: `npm test` (it stopped at `xo`, the first of `xo && npm run build && ava`: its tests did not run)");
}

/// Regression (express, requests): triage ended with no last words when every check passed
/// after the fix, and its words could leave out a check that did not run (`python -m pyright`
/// with no pyright). Every ending says which checks pass and which did not run.
#[test]
fn triage_ends_saying_which_checks_pass_and_which_did_not_run() {
    let all_pass = triage_applied("exit 0\n", "", &[]);
    let not_run = triage_applied("exit 0\n", "      - run: python3 -m pyright src/\n", &[]);
    let said = [all_pass, not_run].map(|p| step_output(&p, "Step 6: what the checks say"));
    insta::assert_snapshot!(said.join(""), @r"
    The fix makes the new test pass; every check passes: sh ./check.sh
    The fix makes the new test pass; the checks that ran pass: sh ./check.sh (not run: `python3 -m pyright src/`: `pyright` not installed)
    ");
}

/// The members' and Go comments' readers on malformed and hostile input: a type never closed
/// (the next file's type is still read from its start), a type of 45 fields (40 listed, then
/// how many more), braces in a block comment, a file name with a space, a heading that holds
/// shell text (listed as text, never run), a Python class whose body is only a docstring.
#[test]
fn docs_sync_listings_survive_unclosed_types_long_types_and_odd_names() {
    let fields: String = (1..=45).fold(String::new(), |text, i| {
        text + &format!("\tf{i}: number;\n")
    });
    let big = format!("export type Big = {{\n{fields}}};\n");
    let project = go_module(&[
        (
            "README.md",
            "# odd\n\n### $(touch pwned)\n\n##### `retry`\n",
        ),
        (
            "src/a.ts",
            "export type Open = {\n\t/* { not a brace } */\n\tname?: string;\n",
        ),
        ("src/b.ts", "export interface Next {\n\tid: number;\n}\n"),
        ("src/big.ts", big.as_str()),
        (
            "pkg/doc.py",
            "class Empty:\n    \"\"\"Only: a docstring.\"\"\"\n\n\nclass After:\n    size: int\n",
        ),
        (
            "my pool.go",
            "package flags\n\n// EnablePool turns the pool on.\nfunc EnableRandomPool() {}\n",
        ),
    ]);
    let (docs, surface) = docs_sync_listings(&project);
    assert!(!project.root().join("pwned").exists(), "a heading is text");
    insta::assert_snapshot!(docs, @r"
    doc files: 1
    3 lines, kept whole in .git/mekara/docs-lines.txt (read there what a reply leaves out):
    README.md:1:# odd
    README.md:3:### $(touch pwned)
    README.md:5:##### `retry`
    ");
    insta::assert_snapshot!(surface.lines().filter(|l| !l.contains(": f") || l.contains(": f1:") || l.contains(": f40:")).collect::<Vec<_>>().join("\n"), @r"
    50 lines, kept whole in .git/mekara/surface.txt (read there what a reply leaves out):
    my pool.go:4:func EnableRandomPool() {}
    pkg/doc.py:1:class Empty:
    pkg/doc.py:5:class After:
    pkg/doc.py:6: size: int
    src/a.ts:1:export type Open = {
    src/a.ts:3: name?: string;
    src/b.ts:1:export interface Next {
    src/b.ts:2: id: number;
    src/big.ts:1:export type Big = {
    src/big.ts:2: f1: number;
    src/big.ts:41: f40: number;
    src/big.ts:47: ... 5 more members of Big
    Go doc comments that begin with another name than the declaration under them (a renamed or removed name?):
    1 line, kept whole in .git/mekara/go-doc-comments.txt (read there what a reply leaves out):
    my pool.go:3: the doc comment begins `EnablePool`, above `EnableRandomPool`
    ");
}

/// A chain whose tests ran (its output has a test summary) and failed before the change too is
/// not said to have stopped before them; one with no summary is, without naming a step when
/// the output cannot show where it stopped (no npm script after the failed one).
#[test]
fn triage_says_a_chain_stopped_before_its_tests_only_without_a_test_summary() {
    let project = triage_applied(
        "exit 0\n",
        "      - run: true && echo '2 tests failed' && false\n      - run: sh ./lint.sh && npm run build && python3 -m pytest\n      - run: sh ./lint.sh && sh ./check.sh\n",
        &[("lint.sh", "echo 'src/a.js:3: 1 error'\nexit 1\n")],
    );
    insta::assert_snapshot!(step_output(&project, "Step 6: what the checks say"), @"The fix makes the new test pass; the other checks pass: sh ./check.sh. These checks failed before the fix too, so not because of it: `true && echo '2 tests failed' && false`, `sh ./lint.sh && npm run build && python3 -m pytest` (it stopped at `sh ./lint.sh`, the first of its steps: its tests did not run), `sh ./lint.sh && sh ./check.sh` (it printed no test summary: its tests did not run)");
}

/// Regression (google/uuid): a CI job none of whose commands is a check mekara knows (its
/// `compat` job runs `apidiff` against `master`, checked out beside the change) was dropped
/// without a word. Every job with commands is now a check, a skipped check, or left out with
/// why: one that compares with another ref, one of unknown commands, one that only installs.
#[test]
fn a_ci_job_that_is_no_check_here_is_left_out_saying_why() {
    let project = repository(&[
        ("go.mod", "module example.com/ids\n\ngo 1.21\n"),
        (
            "ids.go",
            "package ids\n\nfunc New() string { return \"x\" }\n",
        ),
        (
            ".github/workflows/compat.yaml",
            "name: compat\non:\n  pull_request:\n    branches: [master]\njobs:\n  compat:\n    runs-on: ubuntu-latest\n    steps:\n      - run: go install golang.org/x/exp/cmd/apidiff@latest\n      - uses: actions/checkout@v4\n        with:\n          ref: master\n      - run: apidiff -w base.api .\n      - uses: actions/checkout@v4\n        with:\n          clean: false\n      - run: |\n          apidiff -incompatible base.api . > diff.txt\n          cat diff.txt && ! [ -s diff.txt ]\n",
        ),
        (
            ".github/workflows/tests.yaml",
            "name: tests\non: [push]\njobs:\n  unit:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n      - run: go test -v ./...\n  notes:\n    runs-on: ubuntu-latest\n    steps:\n      - run: ./scripts/notes.sh > notes.md\n  lint:\n    runs-on: ubuntu-latest\n    steps:\n      - run: go install honnef.co/go/tools/cmd/staticcheck@latest\n      - uses: dominikh/staticcheck-action@v1\n",
        ),
    ]);
    let facts = crate::library::detected(&project);
    assert_eq!(facts["checks"][0], "go test -v ./...");
    let gofmt = "the CI does not run it, so the project does not keep that formatting";
    assert_eq!(
        facts["left_out"],
        json!([
            {"check": "apidiff -w base.api .; apidiff -incompatible base.api . > diff.txt", "from": ".github/workflows/compat.yaml job compat",
             "why": "it compares the change with `master`, which it checks out beside it (a pull request's check): run it by hand against that ref"},
            {"check": "./scripts/notes.sh > notes.md", "from": ".github/workflows/tests.yaml job notes",
             "why": "its commands are not checks mekara knows: run them by hand if they check something"},
            {"check": "go install honnef.co/go/tools/cmd/staticcheck@latest", "from": ".github/workflows/tests.yaml job lint",
             "why": "its commands only set the machine up (its check, if any, is an action's)"},
            {"check": "test -z \"$(gofmt -l . | tee /dev/stderr)\"", "from": "go.mod", "why": gofmt},
        ])
    );
    // Said once, in the detection's own step; never counted as a check that did not run.
    assert!(outputs(&project).contains("left out: apidiff -w base.api .; apidiff -incompatible base.api . > diff.txt (.github/workflows/compat.yaml job compat): it compares the change with `master`"));
    assert_eq!(facts["skipped"], json!([]));
}

/// Regression (BurntSushi/ripgrep): a `run: |` line that starts and ends with a quoted word
/// (`"$BIN" --generate man > "$DEPLOY_DIR/rg.1"`) lost both quotes, read as one YAML quoted
/// string; only a one-line `run: "..."` scalar's quotes are YAML's. And a quoted first word
/// is still the command: `"$CARGO"` is a variable, so the CI's variables are needed.
#[test]
fn a_block_scalars_quoted_words_are_the_shells_and_a_quoted_variable_is_the_cis() {
    let project = repository(&[
        (
            "Cargo.toml",
            "[package]\nname = \"grep\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        ),
        ("src/lib.rs", "pub fn f() {}\n"),
        (
            ".github/workflows/ci.yml",
            "name: ci\non: [push]\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n      - run: \"cargo test --locked\"\n      - name: cross\n        shell: bash\n        run: |\n          \"$CARGO\" test --workspace\n  release:\n    runs-on: ubuntu-latest\n    steps:\n      - shell: bash\n        run: |\n          \"$BIN\" --generate man > \"$DEPLOY_DIR/rg.1\"\n",
        ),
    ]);
    let facts = crate::library::detected(&project);
    assert_eq!(facts["checks"], json!(["cargo test --locked"]));
    assert_eq!(
        facts["skipped"],
        json!([
            {"check": "\"$CARGO\" test --workspace", "why": "needs the CI's variables (`$CARGO`)"},
            {"check": "\"$BIN\" --generate man > \"$DEPLOY_DIR/rg.1\"", "why": "a deploy/publish step"},
        ])
    );
}

/// Regression (sindresorhus/ky): `npx tsc --noEmit` was "`npx` not installed" although
/// `node_modules/.bin/tsc` was there: a JavaScript tool the project has installed runs as its
/// own program, whatever the runner is.
#[test]
fn a_javascript_tool_in_node_modules_runs_without_its_runner() {
    let project = repository(&[
        (
            "package.json",
            r#"{"name": "ky", "devDependencies": {"typescript": "^5.4.0"}}"#,
        ),
        (
            "tsconfig.json",
            "{\"compilerOptions\": {\"strict\": true}}\n",
        ),
    ]);
    crate::library::executable(&project.write("node_modules/.bin/tsc", "#!/bin/sh\necho typed\n"));
    // An `npx` that would fail: the program runs without it.
    let path = fake_tools(
        &project,
        &[(
            "npx",
            "#!/bin/sh\necho 'npx canceled due to missing packages'\nexit 1\n",
        )],
    );
    let facts = detected_on(&project, &path);
    assert_eq!(facts["checks"], json!(["node_modules/.bin/tsc --noEmit"]));
    assert_eq!(facts["skipped"], json!([]));
}

/// Regression (google/uuid, ripgrep): review took a `path:line` the change does not touch when
/// the file has that line. A finding points into the change (its hunks, give or take three
/// lines, or a new untracked file); one that does not goes back to the agent with the
/// change's line ranges, and if it comes again it is shown as unverified.
#[test]
fn review_sends_back_a_finding_outside_the_change_with_the_changes_lines() {
    let text = (1..=40).fold(String::new(), |all, n| all + &format!("limit {n}\n"));
    let project = repository(&[("limits.txt", &text)]);
    project.write("limits.txt", &text.replace("limit 30\n", "limit 31\n"));
    project.write("notes.txt", "one\ntwo\n");
    let plan = json!([
        {"when": "do not name a `path:line`", "outputs": {"findings": "limits.txt:30: the limit is off by one\nlimits.txt:5: still the old header\nnotes.txt:2: say why"}},
        {"when": "Step 4: review", "outputs": {"findings": "limits.txt:5: the old header\nlimits.txt:36: three lines past the hunk\nnotes.txt:9: past the end"}},
    ]);
    let run = flow(&project, &plan, "flow/review", &[]);
    completed(&run);
    let retry = calls(&project)[1]["prompt"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    insta::assert_snapshot!(crate::library::instructions(&retry), @"Step 4: these findings do not name a `path:line` of the change that exists: limits.txt:5: the old header (outside the change: it changes `limits.txt` at lines 27-33); notes.txt:9: past the end (`notes.txt` has 2 lines). A finding points into the change: a line the diff adds or keeps around what it changes (limits.txt: 27-33, notes.txt: a new file, every line). Give all the findings again, each as `path:line: what is wrong and why`, with the path from the project's root; a problem elsewhere that the change causes is told at the changed line that causes it.");
    let report = crate::library::steps(&project)
        .last()
        .and_then(|s| s["result"]["output"].as_str().map(str::to_string))
        .unwrap_or_default();
    insta::assert_snapshot!(report, @r"
    limits.txt:30: the limit is off by one
    notes.txt:2: say why

    Unverified (the file or line does not exist, or is outside the change; check them by hand):
    limits.txt:5: still the old header (outside the change: it changes `limits.txt` at lines 27-33)
    ");
}

/// Runs `flow/pr` with the scripted agent following `plan` and `PATH` set to `path`, answering
/// `answers` in order; returns the last run.
fn pr_answering(
    project: &Project,
    plan: &serde_json::Value,
    path: &str,
    answers: &[&str],
) -> crate::common::Run {
    let mut run = flow_on(project, plan, "flow/pr", &[], Some(path));
    for answer in answers {
        assert_eq!(state(&run), "waiting", "{}\n{}", run.stdout, run.stderr);
        run = pr_answering_more(project, path, answer);
    }
    run
}

/// Regression (ripgrep): the work committed on `master` before branching (`origin/master`
/// behind it) was "no commits between `master` and the branch": `pr` compared with the local
/// base. It compares with what the remote has, which is what the pull request will hold.
#[test]
fn pr_compares_with_the_remote_base_not_the_local_one() {
    let project = repository(&[("notes.md", "one\n")]);
    crate::library::with_remote(&project);
    project.write("notes.md", "two\n");
    commit_all(&project, "Say two");
    git(&project, &["switch", "-q", "-c", "notes"]);
    let plan = json!([{"when": "Step 4: write the pull request", "outputs": {"title": "Say two", "body": "Two."}}]);
    let run = pr_answering(&project, &plan, "/usr/bin:/bin", &[]);
    assert_eq!(state(&run), "waiting", "{}\n{}", run.stdout, run.stderr);
    let out = outputs(&project);
    assert!(out.contains(" Say two\n"), "the commit is proposed: {out}");
    assert!(out.contains("notes.md | 2 +-"), "{out}");
}

/// Regression (ky): without `gh` (or logged out of it) the confirm question still promised "open a
/// pull request", and the description step named only the checks that passed, not the failing
/// one the person chose to propose with, nor those that could not run. The question says what
/// a yes does, and the agent is told every check's outcome.
#[test]
fn pr_without_gh_asks_only_to_push_and_the_description_names_the_failing_checks() {
    let gh_logged_out = "#!/bin/sh\n[ \"$1 $2\" = 'auth status' ] && { echo 'You are not logged into any GitHub hosts.' >&2; exit 1; }\nexit 2\n";
    for gh in [None, Some(gh_logged_out)] {
        let project = repository(&[
            ("test.sh", "#!/bin/sh\necho '1 test failed'\nexit 1\n"),
            ("lint.sh", "#!/bin/sh\necho 'no problems'\n"),
            (
                ".github/workflows/ci.yml",
                "jobs:\n  test:\n    steps:\n      - run: sh ./test.sh\n      - run: sh ./lint.sh\n      - run: tslint --project .\n",
            ),
        ]);
        let remote = crate::library::with_remote(&project);
        git(&project, &["switch", "-q", "-c", "docs-fix"]);
        project.write("readme.md", "Fixed.\n");
        commit_all(&project, "Fix the readme");
        let path = match gh {
            None => "/usr/bin:/bin".to_string(),
            Some(script) => {
                let path = fake_tools(&project, &[("gh", script)]);
                format!(
                    "{}:/usr/bin:/bin",
                    path.split(':').next().unwrap_or_default()
                )
            }
        };
        let plan = json!([{"when": "Step 4: write the pull request", "outputs": {"title": "Fix the readme", "body": "Fixes it."}}]);
        let run = pr_answering(&project, &plan, &path, &["propose anyway"]);
        assert_eq!(state(&run), "waiting", "{}\n{}", run.stdout, run.stderr);
        let asked = crate::library_hostile::questions(&project);
        let prompt = first_prompt(&project);
        insta::assert_snapshot!(
            format!(
                "pr_without_gh_asks_only_to_push_{}",
                if gh.is_none() {
                    "missing"
                } else {
                    "logged_out"
                }
            ),
            format!(
                "{}\n\n{}",
                asked.join("\n\n"),
                crate::library::instructions(&prompt)
            )
        );
        completed(&pr_answering_more(&project, &path, "yes"));
        let pushed = git(
            &project,
            &["ls-remote", "--heads", remote.to_str().unwrap_or_default()],
        );
        assert!(pushed.contains("refs/heads/docs-fix"), "{pushed}");
        let out = outputs(&project);
        assert!(
            out.contains("by hand with this title and description\n\nFix the readme\n\nFixes it."),
            "{out}"
        );
    }
}

/// Regression (requests): the tests that need the network failed before the change too, and
/// `test-gaps` blamed them on the new tests: "the new tests still fail after 2 attempts". The
/// checks run before the agent writes: one that failed then is named, not blamed, and the agent
/// is told so.
#[test]
fn test_gaps_does_not_blame_the_new_tests_for_a_check_that_failed_before() {
    let project = repository(&[
        ("util.py", "def half(x):\n    return x / 2\n"),
        (
            "run-tests.sh",
            "#!/bin/sh\nfail=0\nfor t in tests/*.sh; do sh \"$t\" || fail=1; done\nexit $fail\n",
        ),
        (
            "tests/network.sh",
            "#!/bin/sh\necho 'test_proxy: ConnectionError'\nexit 1\n",
        ),
        ("lint.sh", "#!/bin/sh\necho 'no problems'\n"),
        (
            ".github/workflows/ci.yml",
            "jobs:\n  test:\n    steps:\n      - run: sh ./lint.sh\n      - run: sh ./run-tests.sh\n",
        ),
    ]);
    project.write(
        "util.py",
        "def half(x):\n    return x / 2\n\n\ndef double(x):\n    return x * 2\n",
    );
    let plan = json!([{
        "when": "Step 3: write tests",
        "run": "printf 'python3 -c \"import util; assert util.double(2) == 4\"\\n' > tests/double.sh",
        "outputs": {"tests": "tests/double.sh checks double"},
    }]);
    let run = flow(&project, &plan, "flow/test-gaps", &[]);
    completed(&run);
    assert_eq!(calls(&project).len(), 1, "no second attempt");
    insta::assert_snapshot!(told_and_said(&project));
}

/// Regression (express): coverage was measured for Python and Go only, though express's CI
/// runs its tests under nyc (`"test-ci": "nyc ... npm test"`). A JavaScript project that uses
/// c8 or nyc gets line coverage through it: the test script under the tool, its JSON report
/// read for the changed lines only.
#[cfg_attr(
    not(feature = "clients"),
    ignore = "needs node, npm and c8 (tests/c8/install.sh)"
)]
#[test]
fn test_gaps_measures_javascript_coverage_with_the_projects_c8() {
    let c8 = crate::common::outside_client("c8/node_modules", "c8", "tests/c8/install.sh");
    let project = repository(&[
        (
            "package.json",
            "{\n  \"name\": \"web\",\n  \"version\": \"1.0.0\",\n  \"scripts\": {\n    \"test\": \"node --test\",\n    \"test-ci\": \"c8 --reporter=text npm test\"\n  },\n  \"devDependencies\": {\n    \"c8\": \"10.1.3\"\n  }\n}\n",
        ),
        (
            ".github/workflows/ci.yml",
            "jobs:\n  test:\n    steps:\n      - run: npm run test-ci\n",
        ),
        (
            "lib/utils.js",
            "exports.half = function (x) {\n  return x / 2\n}\n",
        ),
        (
            "test/utils.js",
            "const test = require('node:test')\nconst assert = require('node:assert')\nconst { half } = require('../lib/utils')\n\ntest('half', () => assert.strictEqual(half(4), 2))\n",
        ),
    ]);
    std::os::unix::fs::symlink(&c8, project.root().join("node_modules"))
        .expect("link node_modules");
    project.write(
        "lib/utils.js",
        "exports.half = function (x) {\n  return x / 2\n}\n\nexports.compact = function (list) {\n  // Holes and empty strings go.\n  const kept = list.filter(Boolean)\n  return kept\n}\n\nexports.third = function (x) {\n  return x / 3\n}\n",
    );
    project.write(
        "test/third.js",
        "const test = require('node:test')\nconst assert = require('node:assert')\nconst { third } = require('../lib/utils')\n\ntest('third', () => assert.strictEqual(third(9), 3))\n",
    );
    let write = "printf \"const test = require('node:test')\\nconst assert = require('node:assert')\\nconst { compact } = require('../lib/utils')\\n\\ntest('compact', () => assert.deepStrictEqual(compact([1, '', 2]), [1, 2]))\\n\" > test/compact.js";
    let plan = json!([{"when": "Step 3: write tests", "run": write, "outputs": {"tests": "test/compact.js checks compact"}}]);
    let run = flow(&project, &plan, "flow/test-gaps", &[]);
    completed(&run);
    insta::assert_snapshot!(told_and_said(&project));
}

/// A JavaScript project's coverage that could not be read says so, never "no test runs these
/// lines": nyc named by the project but not installed, and a c8 whose report is not JSON, names
/// no file, or is not istanbul's shape.
#[test]
fn test_gaps_says_when_javascript_coverage_measured_nothing() {
    let package = "{\n  \"name\": \"web\",\n  \"scripts\": {\n    \"test\": \"node -e 0\",\n    \"test-ci\": \"nyc npm test\"\n  }\n}\n";
    let mut told = Vec::new();
    for report in [
        None,
        Some("{\"x\":"),
        Some("{}"),
        Some("{\"ROOT/lib.js\": {\"s\": {}}}"),
    ] {
        let project = repository(&[
            ("package.json", package),
            (
                "lib.js",
                "exports.half = function (x) {\n  return x / 2\n}\n",
            ),
        ]);
        if let Some(report) = report {
            let fake = format!(
                "#!/bin/sh\nfor a; do case $a in --report-dir=*) d=${{a#--report-dir=}} ;; esac; done\nprintf '%s' '{report}' | sed \"s|ROOT|$PWD|\" > \"$d/coverage-final.json\"\n"
            );
            let c8 = project.write("node_modules/.bin/c8", &fake);
            std::fs::set_permissions(&c8, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .expect("chmod");
        }
        project.write(
            "lib.js",
            "exports.half = function (x) {\n  return x / 2\n}\n\nexports.third = (x) => x / 3\n",
        );
        let plan = json!([{"when": "Step 3: write tests", "outputs": {"tests": "none"}}]);
        completed(&flow(&project, &plan, "flow/test-gaps", &[]));
        let prompt = first_prompt(&project);
        let how = crate::library::instructions(&prompt)
            .lines()
            .next()
            .unwrap_or_default()
            .to_string();
        told.push(format!(
            "{}: {how}",
            report.unwrap_or("(nyc named, not installed)")
        ));
    }
    insta::assert_snapshot!(told.join("\n\n"));
}

/// The agent's first instructions and the run's last words: what a test-gaps run told the
/// agent and ended with.
fn told_and_said(project: &Project) -> String {
    let prompt = first_prompt(project);
    let out = outputs(project);
    format!(
        "{}\n\n{}",
        crate::library::instructions(&prompt).trim_end(),
        out.lines().last().unwrap_or_default()
    )
}

/// With `gh` logged in, the question asks to push and open the pull request, and a yes opens
/// it with the title and the description the agent wrote (the counterpart of the question
/// without `gh` above).
#[test]
fn pr_with_gh_logged_in_opens_the_pull_request_it_asked_about() {
    let project = repository(&[("notes.md", "one\n")]);
    crate::library::with_remote(&project);
    git(&project, &["switch", "-q", "-c", "notes"]);
    project.write("notes.md", "two\n");
    commit_all(&project, "Say two");
    let made = project.home().join("gh-pr-create");
    let gh = format!(
        "#!/bin/sh\n[ \"$1 $2\" = 'auth status' ] && exit 0\nfor a; do printf '%s\\n' \"$a\"; done > '{}'\ncat \"$(git rev-parse --git-path MEKARA_PR.md)\" >> '{}'\necho https://example.com/pull/1\n",
        made.display(),
        made.display()
    );
    let path = fake_tools(&project, &[("gh", &gh)]);
    let plan = json!([{"when": "Step 4: write the pull request", "outputs": {"title": "Say two", "body": "Two."}}]);
    let run = pr_answering(&project, &plan, &path, &[]);
    assert_eq!(
        crate::library_hostile::questions(&project),
        ["Push `notes` to `origin` and open a pull request into `main` titled \"Say two\"?"],
        "{}",
        run.stdout
    );
    completed(&pr_answering_more(&project, &path, "yes"));
    let args = std::fs::read_to_string(&made).expect("gh pr create ran");
    assert_eq!(
        args.replace(&*git(&project, &["rev-parse", "--absolute-git-dir"]), "GIT"),
        "pr\ncreate\n--base=main\n--head=notes\n--title=Say two\n--body-file=.git/MEKARA_PR.md\nTwo.\n"
    );
}

/// Answers the waiting run's question with `answer` and resumes it with `PATH` set to `path`.
fn pr_answering_more(project: &Project, path: &str, answer: &str) -> crate::common::Run {
    let id = last_run(project);
    project.run(&["answer", &id, answer], "").expect_code(0);
    crate::library::mekara_on(project, &crate::library::resume(&id), Some(path))
}

/// A crate whose `rust-version` is above every toolchain (ripgrep's, one release ahead of the
/// machine's): cargo refuses to build or test it, so only `cargo fmt --check` can run.
const UNBUILDABLE_PACKAGE: &str = "[package]\nname = \"adder\"\nversion = \"0.4.1\"\nedition = \"2021\"\nrust-version = \"1.999\"\n";

/// A crate of [`UNBUILDABLE_PACKAGE`] with `dependencies` (its tables), locked and committed.
fn unbuildable_crate(dependencies: &str) -> Project {
    let project = repository(&[
        (
            "Cargo.toml",
            &format!("{UNBUILDABLE_PACKAGE}\n{dependencies}"),
        ),
        ("src/lib.rs", "pub fn one() -> u8 {\n    1\n}\n"),
    ]);
    crate::library::lock(&project);
    project
}

/// A cargo workspace (fd's and ripgrep's shapes) whose outdated dependencies sit in every kind
/// of table: a plain and an inline-table requirement, an optional one a feature names with
/// `dep:`, a build-dependency, a target-specific one, one kept in `[workspace.dependencies]`
/// and inherited by a member, and a member's dev-dependency in a table of its own. Each is in
/// the registry cache at an older and a newer version (mekara's own `Cargo.lock` has both).
fn cargo_workspace_with_every_table() -> Project {
    let root = format!(
        "[workspace]\nmembers = [\"tool\"]\n\n[workspace.dependencies]\nr-efi = \"5\"\n\n{UNBUILDABLE_PACKAGE}\n[dependencies]\nstrsim = \"0.10\" # edit distance\nbitflags = {{ version = \"1\", default-features = false }}\nembedded-io = {{ version = \"0.4\", optional = true }}\n\n[features]\nio = [\"dep:embedded-io\"]\n\n[build-dependencies]\ncfg_aliases = \"0.1\"\n\n[target.'cfg(unix)'.dependencies]\nbase64 = \"0.22\"\n"
    );
    let project = repository(&[
        ("Cargo.toml", &root),
        ("build.rs", "fn main() {}\n"),
        ("src/lib.rs", "pub fn one() -> u8 {\n    1\n}\n"),
        (
            "tool/Cargo.toml",
            "[package]\nname = \"tool\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nr-efi = { workspace = true }\n\n[dev-dependencies.strsim]\nversion = \"0.10\"\n",
        ),
        ("tool/src/lib.rs", "pub fn two() -> u8 {\n    2\n}\n"),
    ]);
    crate::library::lock(&project);
    project
}

/// What `upgrade-deps` left: its summary, the commits it made since `before`, the files they
/// changed and the manifests' diff. The machine's rustc version is left out.
fn upgraded_since(project: &Project, before: &str) -> String {
    let steps = crate::library::steps(project);
    let summary = steps
        .last()
        .and_then(|s| s["result"]["output"].as_str())
        .unwrap_or_default();
    let range = format!("{before}..HEAD");
    let text = format!(
        "{summary}\n$ git log --format=%s\n{}\n$ git diff --stat\n{}\n$ git diff -- '*.toml'\n{}\n$ git status --porcelain\n{}",
        git(project, &["log", "--format=%s", &range]),
        git(project, &["diff", "--stat", &range]),
        git(project, &["diff", &range, "--", "*.toml"]),
        git(project, &["status", "--porcelain"]),
    );
    let rustc = text
        .split("this one is ")
        .nth(1)
        .and_then(|t| t.split(')').next())
        .unwrap_or("none")
        .to_string();
    text.replace(&rustc, "RUSTC")
}

/// Issue 39 (fd): `upgrade-deps` ran a bare `cargo add NAME@VERSION` for each outdated crate,
/// which writes into `[dependencies]`: fd's dev-dependency `test-case` and its `cfg(unix)`
/// `libc` got second, normal entries (shipped to every platform), and the optional
/// `clap_complete` a new feature. (ripgrep:) only the root manifest's dependencies were
/// compared, not the members'. Each requirement is now changed where it is, in every
/// member, `[workspace.dependencies]` for an inherited one, and `Cargo.lock` follows.
#[test]
fn upgrade_deps_changes_each_crate_requirement_in_the_table_it_is_in() {
    let project = cargo_workspace_with_every_table();
    let before = git(&project, &["rev-parse", "HEAD"]);
    completed(&flow(&project, &json!([]), "flow/upgrade-deps", &[]));
    insta::assert_snapshot!(
        "upgrade_deps_every_table",
        upgraded_since(&project, &before)
    );
}

/// Issue 39 (ripgrep): cargo refused the toolchain, so only `cargo fmt` ran after each upgrade,
/// yet each was listed as upgraded as if checked. An upgrade that no check able to catch a
/// break passed after is listed apart, with the checks that did not run.
#[test]
fn upgrade_deps_says_which_upgrades_no_check_could_catch_a_break_in() {
    let project = unbuildable_crate("[dependencies]\nstrsim = \"0.10\"\n");
    let before = git(&project, &["rev-parse", "HEAD"]);
    completed(&flow(&project, &json!([]), "flow/upgrade-deps", &[]));
    let seen = upgraded_since(&project, &before);
    insta::assert_snapshot!(
        "upgrade_deps_not_checked",
        seen.split("\n$ git diff --stat").next().unwrap_or_default()
    );
}

/// Issue 39 (express): the commits said `Upgrade X from A to B` where the history says
/// Dependabot's `build(deps): bump X from A to B` and `build(deps-dev): bump ...` for a
/// development dependency. The messages follow the last dependency commits of the history.
#[test]
fn upgrade_deps_words_its_commits_as_the_history_does() {
    let project = unbuildable_crate(
        "[dependencies]\nstrsim = \"0.10\"\n\n[dev-dependencies]\nbase64 = \"0.22\"\n",
    );
    for subject in [
        "build(deps-dev): bump criterion from 0.4.0 to 0.5.1 in /fuzz (#80)",
        "Fix the parser",
        "build(deps): bump serde from 1.0.1 to 1.0.2 (#81)",
        "docs: mention the new flag",
    ] {
        git(&project, &["commit", "-q", "--allow-empty", "-m", subject]);
    }
    completed(&flow(&project, &json!([]), "flow/upgrade-deps", &[]));
    insta::assert_snapshot!(
        "upgrade_deps_history_convention",
        git(&project, &["log", "-2", "--format=%s"])
    );
}

/// The parts of `upgrade-deps` that read what a project wrote, given odd and hostile input:
/// manifests (a quoted key, a comment, a range, a `git` dependency, a table that only looks
/// like the one wanted, a value holding quotes) and histories (subjects that only look like
/// an upgrade, a name with shell characters). Each is read, or said to be unreadable: never a
/// guess, never a line it was not asked to change.
#[test]
fn upgrade_deps_reads_odd_manifests_and_histories_without_guessing() {
    let project = repository(&[]);
    project
        .run(&["scripts", "eject", "flow:upgrade-deps"], "")
        .expect_code(0);
    let flow = read(&project, ".mekara/scripts/compiled/flow/upgrade-deps.star")
        .replace("def execute(request):", "def upgrade(request):");
    let probe = r#"
MANIFESTS = [
    ("normal", "[dependencies]\n\"serde\" = { features = [\"derive\"], version = \"=1.0.1\" } # pinned\n", ["dependencies"], "serde"),
    ("dotted key", "[dependencies]\nserde.version = '1'\nserde.features = [\"a\"]\n", ["dependencies"], "serde"),
    ("look-alike table", "[dev-dependencies]\nserde = \"1\"\n[dependencies.serde-json]\nversion = \"1\"\n", ["dependencies"], "serde"),
    ("range", "[dependencies]\nserde = \">=1, <3\"\n", ["dependencies"], "serde"),
    ("git", "[dependencies]\nserde = { git = \"https://example.com/s\" }\n", ["dependencies"], "serde"),
    ("missing", "[package]\nname = \"x\"\n", ["dependencies"], "serde"),
    ("legacy table", "[dev_dependencies]\nserde = \"0.9\" # old\n", ["dev-dependencies"], "serde"),
    ("target", "[target.\"cfg(windows)\".dependencies]\nserde = \"1\"\n[target.'cfg(unix)'.dependencies]\nserde = \"1\"\n", ["target", "cfg(unix)", "dependencies"], "serde"),
    ("cfg written without spaces", "[target.'cfg(all(unix,not(windows)))'.dependencies] # unix\nserde = \"1\"\n", ["target", "cfg(all(unix, not(windows)))", "dependencies"], "serde"),
    ("array of tables", "[[bin]]\nserde = \"1\"\n", ["dependencies"], "serde"),
    ("inherited, no root", "[dependencies]\nserde.workspace = true\n", ["dependencies"], "serde"),
    ("quotes in a value", "[dependencies]\nserde = { version = \"1\", registry = \"a\\\"b\" }\n", ["dependencies"], "serde"),
]

HISTORIES = [
    "chore(deps): update dependency eslint to v9 (#3)\nchore(deps): update rust crate serde to 1.0.200",
    "Update README to mention v2\nUpdate the docs",
    "deps: bump qs minimum to 6.15.2 (#7305)\nbuild(deps): bump actions/checkout from 6.0.2 to 7.0.0 (#7345)",
    "Merge branch 'bump'\nbumped the version to 2.0.0",
    "bump $(touch pwned) from 1 to 2",
    "",
]

def execute(request):
    for name, text, table, key in MANIFESTS:
        found = "begin Cargo.toml\n" + text + "\nend Cargo.toml\n"
        entries = [{"manifest": "Cargo.toml", "table": table, "key": key}]
        print(name + ": " + json.encode(requirement_edits(found, entries, "2.0.0")))
    for subjects in HISTORIES:
        c = commit_convention(subjects)
        d = {"name": "left-pad", "old": "1.0.0", "new": "1.3.0", "dev": False}
        print(json.encode(subjects) + " -> " + message_of(c, d, "1.3.0") + " | dev: " + message_of(c, dict(d, dev = True), "1.3.0"))
"#;
    project.script(
        "probe",
        "Read odd input.\n",
        Some(&format!("{flow}\n{probe}")),
    );
    let run = crate::library::mekara(&project, &["run", "probe"]);
    run.expect_code(0);
    let printed = run
        .stdout
        .lines()
        .filter(|l| l.contains(": {") || l.contains(" -> "))
        .collect::<Vec<_>>()
        .join("\n");
    insta::assert_snapshot!("upgrade_deps_odd_input", printed);
}

/// Issue 39 (express): one MCP call ran the whole suite once per outdated package, 10+
/// minutes, past what clients wait. After a stretch of upgrades (`MEKARA_UPGRADE_SECONDS`,
/// here none) the run hands back to the agent with the progress, before the next upgrade.
#[test]
fn upgrade_deps_hands_back_to_the_agent_between_upgrades_after_its_time() {
    let project = unbuildable_crate("[dependencies]\nstrsim = \"0.10\"\nbase64 = \"0.22\"\n");
    project.write(
        "agent/plan.json",
        &json!([{"when": "hands back here", "outputs": {}}]).to_string(),
    );
    let mut cmd = crate::library::with_tools(project.command(&[
        "run",
        "--agent-command",
        crate::library::AGENT_COMMAND,
        "--json",
        "flow/upgrade-deps",
    ]));
    cmd.env("MEKARA_UPGRADE_SECONDS", "0");
    completed(&crate::common::run_with_stdin(cmd, ""));
    let calls = calls(&project);
    assert_eq!(calls.len(), 1, "one hand-back between the two upgrades");
    let turn = calls[0]["prompt"].as_str().unwrap_or_default();
    let turn = turn
        .split("<instructions>")
        .nth(1)
        .and_then(|t| t.split("</instructions>").next())
        .unwrap_or(turn)
        .trim();
    insta::assert_snapshot!("upgrade_deps_hand_back", turn);
    assert_eq!(
        git(&project, &["log", "-2", "--format=%s"]).lines().count(),
        2
    );
}

/// Issue 39: a Python project without `uv.lock` was refused right after a step that failed
/// (`test -f uv.lock`), so the refusal offered `--retry`, which can only refuse again.
#[test]
fn upgrade_deps_refusing_a_python_project_without_a_lock_file_offers_no_retry() {
    let project = crate::library::python_project();
    let run = flow(&project, &json!([]), "flow/upgrade-deps", &[]);
    let summary: serde_json::Value = serde_json::from_str(&run.stdout).expect("a JSON summary");
    assert_eq!(summary["resume"], serde_json::Value::Null, "{}", run.stdout);
    assert!(stopped_by(&run).contains("no cargo, npm, Go or uv project here (found: python)"));
}

/// Regression (fd): each release is a pull request merged on GitHub (`Merge pull request #12
/// from someone/release-v1.0.0`, the branch's own commit `chore: Bump to 1.0.0`), tagged
/// lightweight on the merge. The release's commit copied the merge's subject with the version
/// swapped, a merge of a branch that never was, and its tag was annotated. Now the message is
/// the merged release commit's, and the tag is lightweight as the last one is.
#[test]
fn release_of_a_history_that_merges_its_releases_takes_the_merged_commits_message_and_tag_kind() {
    let project = merged_release(
        &[("CHANGELOG.md", "# 1.0.0\n\n- First.\n")],
        "chore: Bump to 1.0.0",
        "Merge pull request #12 from someone/release-v1.0.0",
        &["tag", "v1.0.0"],
    );
    let asked = release_answering(&project, "- Find more.", &["minor"]);
    insta::assert_snapshot!(question_of(&asked), @r"
    Release v1.1.0?

    Files to change: `package.json`, `CHANGELOG.md`
    Commit message: `chore: Bump to 1.1.0`
    Tag: `v1.1.0` (lightweight, as v1.0.0 is)
    Changelog entry in `CHANGELOG.md`:

    # 1.1.0

    - Find more. (choices: `yes`, `no`)
    ");
    let run = answer_and_resume(&project, "yes");
    completed(&run);
    assert_eq!(
        git(&project, &["log", "-1", "--format=%s"]),
        "chore: Bump to 1.1.0"
    );
    assert_eq!(git(&project, &["cat-file", "-t", "v1.1.0"]), "commit");
    told(
        &project,
        &run,
        &[],
        "Tagged v1.1.0. Nothing was pushed: push it with `git push origin main v1.1.0`.",
    );
}

/// A package released as pull requests are merged: `files` and `package.json` at 0.9.0, a
/// branch whose commit `subject` sets 1.0.0, merged into `main` as `merge` beside another
/// commit, tagged with `tag` (git's arguments), then one more commit to release.
fn merged_release(files: &[(&str, &str)], subject: &str, merge: &str, tag: &[&str]) -> Project {
    let package =
        |version: &str| format!("{{\n  \"name\": \"find\",\n  \"version\": \"{version}\"\n}}\n");
    let mut all = vec![("package.json", package("0.9.0"))];
    all.extend(
        files
            .iter()
            .map(|(path, text)| (*path, (*text).to_string())),
    );
    let project = repository(
        &all.iter()
            .map(|(p, t)| (*p, t.as_str()))
            .collect::<Vec<_>>(),
    );
    git(&project, &["checkout", "-q", "-b", "release"]);
    project.write("package.json", &package("1.0.0"));
    commit_all(&project, subject);
    git(&project, &["checkout", "-q", "main"]);
    project.write("find.js", "module.exports = 1;\n");
    commit_all(&project, "Add find");
    git(
        &project,
        &["merge", "-q", "--no-ff", "-m", merge, "release"],
    );
    git(&project, tag);
    project.write("find.js", "module.exports = 2;\n");
    commit_all(&project, "Find more");
    project
}

/// Regression (ripgrep): the "release anyway?" question listed every CI line that did not
/// run here, 16 of them in 2.6 KB, each with the same reason. The question names at most
/// five, those with one reason together, and says how many more; the step that found the
/// checks lists them all.
#[test]
fn release_anyway_names_a_few_checks_that_did_not_run_and_counts_the_rest() {
    let mut shards = String::new();
    for n in 1..=7 {
        shards.push_str(&format!("      - run: ${{{{ env.CARGO }}}} test --workspace --features shard-{n} ${{{{ env.TARGET_FLAGS }}}}\n"));
    }
    let project = repository(&[
        (
            "package.json",
            "{\n  \"name\": \"grep\",\n  \"version\": \"1.0.0\",\n  \"scripts\": {\n    \"test\": \"node -e 0\"\n  }\n}\n",
        ),
        (
            ".github/workflows/ci.yml",
            &format!(
                "jobs:\n  test:\n    steps:\n      - run: nosuchlinter check --config ci/the-linters-configuration.toml --format github src tests\n{shards}"
            ),
        ),
    ]);
    git(&project, &["tag", "v1.0.0"]);
    project.write("grep.js", "module.exports = 1;\n");
    commit_all(&project, "Add grep");
    let plan = json!([{"when": "Step 5", "outputs": {"entry": "- Grep."}}]);
    let run = flow(&project, &plan, "flow/release", &[]);
    insta::assert_snapshot!(question_of(&run), @"These checks could not run here (not run: `nosuchlinter check --config ci/the-linters-configuration.toml --format github...`: `nosuchlinter` not installed; `${{ env.CARGO }} test --workspace --features shard-1 ${{ env.TARGET_FLAGS }}`, `${{ env.CARGO }} test --workspace --features shard-2 ${{ env.TARGET_FLAGS }}`, `${{ env.CARGO }} test --workspace --features shard-3 ${{ env.TARGET_FLAGS }}`, `${{ env.CARGO }} test --workspace --features shard-4 ${{ env.TARGET_FLAGS }}`: needs the CI's variables (`${{ ... }}`); and 3 more, listed in the steps that found and ran the checks). A release needs them to pass: release anyway? (choices: `stop`, `release anyway`)");
    let out = outputs(&project);
    assert!(
        out.contains("shard-7 ${{ env.TARGET_FLAGS }} (.github/workflows/ci.yml job test): needs the CI's variables"),
        "{out}"
    );
}

/// Regression (requests): `__version__.py` keeps `__build__ = 0x023402` (the version's numbers,
/// two digits each, as hex) beside `__version__ = "2.34.2"`, and `HISTORY.md` keeps a `dev`
/// section above its entries, a template line for contributors and the notes written so far.
/// The release left `__build__` at the old version and put its entry below the `dev` section,
/// the notes still in it. Now the constant is written with the version, and the notes move
/// into the entry, below the template, which stays for the next release (as requests' own
/// release commits leave it).
#[test]
fn release_writes_a_constant_derived_from_the_version_and_moves_the_dev_sections_notes() {
    let project = repository(&[
        (
            "pyproject.toml",
            "[project]\nname = \"fetch\"\ndynamic = [\"version\"]\n\n[tool.setuptools.dynamic]\nversion = {attr = \"fetch.__version__.__version__\"}\n",
        ),
        (
            "src/fetch/__version__.py",
            "__title__ = \"fetch\"\n__version__ = \"2.34.2\"\n__build__ = 0x023402\n",
        ),
        ("Makefile", "test:\n\ttrue\n"),
    ]);
    project.write(
        "HISTORY.md",
        "Release History\n===============\n\ndev\n---\n\n- \\[Short description of non-trivial change.\\]\n\n**Bugfixes**\n\n- Retries parse their header.\n\n\n2.34.2 (2026-05-14)\n-------------------\n- Moved headers.\n",
    );
    commit_all(&project, "v2.34.2");
    git(&project, &["tag", "v2.34.2"]);
    project.write(
        "src/fetch/retry.py",
        "def parse(value):\n    return int(value)\n",
    );
    commit_all(&project, "Add retry parsing");
    let asked = release_answering(&project, "unused: the notes are written", &["minor"]);
    let day = today();
    insta::assert_snapshot!(question_of(&asked).replace(&day, "DATE"), @r"
    Release v2.35.0?

    Files to change: `src/fetch/__version__.py`, `HISTORY.md`
    Derived from the version: `__build__ = 0x023500` in `src/fetch/__version__.py`
    Commit message: `v2.35.0`
    Tag: `v2.35.0` (lightweight, as v2.34.2 is)
    Changelog entry in `HISTORY.md`:

    2.35.0 (DATE)
    -------------------

    **Bugfixes**

    - Retries parse their header. (choices: `yes`, `no`)
    ");
    completed(&answer_and_resume(&project, "yes"));
    assert_eq!(
        read(&project, "src/fetch/__version__.py"),
        "__title__ = \"fetch\"\n__version__ = \"2.35.0\"\n__build__ = 0x023500\n"
    );
    assert_eq!(
        read(&project, "HISTORY.md"),
        format!(
            "Release History\n===============\n\ndev\n---\n\n- \\[Short description of non-trivial change.\\]\n\n\n2.35.0 ({day})\n-------------------\n\n**Bugfixes**\n\n- Retries parse their header.\n\n\n2.34.2 (2026-05-14)\n-------------------\n- Moved headers.\n"
        )
    );
}

/// Regression (ripgrep): its `TBD` section held only "Unreleased changes. Release notes have
/// not yet been written.", and that sentence became the release's notes: the agent was not
/// asked to draft any. A sentence saying the notes are yet to come is no note: the agent
/// drafts them from the log, and the sentence is gone.
#[test]
fn release_drafts_the_notes_where_the_tbd_section_says_they_are_not_written() {
    let project = repository(&[(
        "CHANGELOG.md",
        "TBD\n===\nUnreleased changes. Release notes have not yet been written.\n\n\n1.2.0 (2026-01-02)\n==================\nFirst.\n",
    )]);
    git(&project, &["tag", "1.2.0"]);
    project.write("fix.txt", "fixed\n");
    commit_all(&project, "Fix the thing");
    let run = release_answering(
        &project,
        "Bug fixes:\n\n* Fix the thing.",
        &["patch", "yes"],
    );
    completed(&run);
    let heading = format!("1.2.1 ({})", today());
    assert_eq!(
        read(&project, "CHANGELOG.md"),
        format!(
            "{heading}\n{}\n\nBug fixes:\n\n* Fix the thing.\n\n\n1.2.0 (2026-01-02)\n==================\nFirst.\n",
            "=".repeat(heading.len())
        )
    );
}

/// A requests-shaped package (`__build__` beside `__version__`, a `dev` section holding only
/// its template line): a typed version its hex constant cannot hold is refused, saying why,
/// and asked again; the agent drafts the notes, which go below the template.
#[test]
fn release_refuses_a_version_its_derived_constant_cannot_hold_and_drafts_below_a_template() {
    let project = repository(&[
        (
            "pyproject.toml",
            "[project]\nname = \"fetch\"\ndynamic = [\"version\"]\n\n[tool.setuptools.dynamic]\nversion = {attr = \"fetch.__version__\"}\n",
        ),
        (
            "fetch/__init__.py",
            "__version__ = \"2.34.2\"\n__build__ = 0x023402  # MMmmpp\n",
        ),
        (
            "HISTORY.md",
            "dev\n---\n\n- \\[Short description of non-trivial change.\\]\n\n\n2.34.2 (2026-05-14)\n-------------------\n- Moved headers.\n",
        ),
        ("Makefile", "test:\n\ttrue\n"),
    ]);
    git(&project, &["tag", "v2.34.2"]);
    project.write("fetch/retry.py", "RETRIES = 3\n");
    commit_all(&project, "Add retries");
    let asked = release_answering(&project, "- Retries.", &["type a version", "2.100.0"]);
    insta::assert_snapshot!(question_of(&asked), @"`2.100.0` does not fit `__build__ = 0x023402` in `fetch/__init__.py`, which holds each number of the version in two digits. Type another version:");
    let confirm = answer_and_resume(&project, "2.35.0");
    assert!(
        stopped_by(&confirm).contains("`__build__ = 0x023500  # MMmmpp` in `fetch/__init__.py`"),
        "{}",
        stopped_by(&confirm)
    );
    completed(&answer_and_resume(&project, "yes"));
    assert_eq!(
        read(&project, "fetch/__init__.py"),
        "__version__ = \"2.35.0\"\n__build__ = 0x023500  # MMmmpp\n"
    );
    assert_eq!(
        read(&project, "HISTORY.md"),
        format!(
            "dev\n---\n\n- \\[Short description of non-trivial change.\\]\n\n\n2.35.0 ({})\n-------------------\n\n- Retries.\n\n\n2.34.2 (2026-05-14)\n-------------------\n- Moved headers.\n",
            today()
        )
    );
}

/// A release branch's commit subject holding shell syntax (`$(...)`, backquotes, quotes) is
/// the new release's message word for word, never run.
#[test]
fn release_takes_a_hostile_merged_subject_as_text() {
    let project = merged_release(
        &[],
        "Bump to 1.0.0 $(touch pwned) `touch pwned` \"'",
        "Merge branch 'next'",
        &["tag", "-a", "v1.0.0", "-m", "v1.0.0"],
    );
    completed(&release_answering(
        &project,
        "- Find more.",
        &["patch", "release without a changelog"],
    ));
    assert_eq!(
        git(&project, &["log", "-1", "--format=%s"]),
        "Bump to 1.0.1 $(touch pwned) `touch pwned` \"'"
    );
    assert_eq!(git(&project, &["cat-file", "-t", "v1.0.1"]), "tag");
    assert!(!project.root().join("pwned").exists());
}
