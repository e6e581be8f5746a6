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
use crate::release::stopped_by;

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
    let run = flow_on(
        &project,
        &plan,
        "flow/test-gaps",
        &[],
        Some(&python_with_coverage()),
    );
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
        out.contains("The docs are changed. These checks failed before the change too, so not because of it: `sh ./check.sh`"),
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
        out.contains(
            "The docs are changed; the checks that ran pass: go test -v ./..., go vet ./..."
        ),
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
