//! `flow/release` on projects kept as real ones keep their releases (issue 39): PEP 440
//! development versions, `CHANGES.rst`, marker tags, the history's commit convention,
//! keep-a-changelog, Cargo workspaces, `__version__`, lock files; typed and hostile versions
//! (issue 40); and the documented recovery, `--retry` after a failed check.
//!
//! Each test writes its fixture, runs the workflow unattended with the scripted agent of
//! [`crate::library`] and answers its questions as the person would.

use std::process::Command;

use serde_json::{Value as Json, json};

use crate::common::{Project, Run};
use crate::library::{
    calls, commit_all, completed, flow_on, git, last_run, lock, mekara_on, read, repository,
    resume, state, with_tools,
};

/// What the run stopped on: the question it waits for, or why it stopped.
pub(crate) fn stopped_by(run: &Run) -> String {
    let summary: Json = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("no JSON summary ({e}):\n{}\n{}", run.stdout, run.stderr));
    summary["stopped_by"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Runs `flow/release` with the agent following `plan`, answering `answers` in order; returns
/// the last run and each question asked (the text the person saw).
fn release(project: &Project, plan: &Json, answers: &[&str]) -> (Run, Vec<String>) {
    release_with_path(project, plan, answers, None)
}

fn release_with_path(
    project: &Project,
    plan: &Json,
    answers: &[&str],
    path: Option<&str>,
) -> (Run, Vec<String>) {
    let run = flow_on(project, plan, "flow/release", &[], path);
    answer_all(project, run, answers, path)
}

/// Answers the questions `run` and the runs after it wait on with `answers`, in order.
fn answer_all(
    project: &Project,
    mut run: Run,
    answers: &[&str],
    path: Option<&str>,
) -> (Run, Vec<String>) {
    let mut questions = Vec::new();
    for answer in answers {
        assert_eq!(state(&run), "waiting", "{}\n{}", run.stdout, run.stderr);
        questions.push(stopped_by(&run));
        let id = last_run(project);
        project.run(&["answer", &id, answer], "").expect_code(0);
        run = mekara_on(project, &resume(&id), path);
    }
    (run, questions)
}

/// Today as `date` gives it, as the workflow dates the changelog.
pub(crate) fn today() -> String {
    let out = Command::new("date")
        .arg("+%Y-%m-%d")
        .output()
        .expect("date");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `mekara run --resume ID --retry` of the project's last run, unattended.
fn retry(project: &Project) -> Run {
    let id = last_run(project);
    let mut args = resume(&id).to_vec();
    args.push("--retry");
    mekara_on(project, &args, None)
}

/// Runs `line` in the project with the person's tools; panics with its stderr when it fails.
fn succeeds(project: &Project, line: &str) {
    let out = with_tools(project.shell(line)).output().expect("a shell");
    assert!(
        out.status.success(),
        "{line}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn tag_message(project: &Project, tag: &str) -> String {
    git(
        project,
        &[
            "for-each-ref",
            &format!("refs/tags/{tag}"),
            "--format=%(contents:subject)",
        ],
    )
}

const PY_TEST: &str = "import unittest\n\n\nclass T(unittest.TestCase):\n    def test_one(self):\n        self.assertEqual(1, 1)\n";

/// A Python library between releases, kept as the was: `2.3.0.dev` in
/// `pyproject.toml`, `CHANGES.rst` with `Version X.Y.Z` / `Released DATE` sections, releases
/// committed as `release version X.Y.Z` and tagged `X.Y.Z` (annotated `Version X.Y.Z`), and
/// a maintenance-branch marker tag `2.1.x` made after the last release.
pub(crate) fn pep440_project() -> Project {
    let project = repository(&[
        (
            "pyproject.toml",
            "[project]\nname = \"signer\"\nversion = \"2.2.0\"\nrequires-python = \">=3.9\"\n",
        ),
        ("src/signer/__init__.py", "def sign(x):\n    return x\n"),
        ("test_signer.py", PY_TEST),
    ]);
    project.write(
        "CHANGES.rst",
        "Version 2.2.0\n-------------\n\nReleased 2025-04-02\n\n-   Sign bytes.\n\n\nVersion 2.1.0\n-------------\n\nReleased 2024-09-30\n\n-   First.\n",
    );
    commit_all(&project, "release version 2.2.0");
    git(&project, &["tag", "-a", "2.2.0", "-m", "Version 2.2.0"]);
    project.write(
        "pyproject.toml",
        "[project]\nname = \"signer\"\nversion = \"2.3.0.dev\"\nrequires-python = \">=3.9\"\n",
    );
    commit_all(&project, "start version 2.3.0");
    git(&project, &["tag", "2.1.x"]);
    git(&project, &["tag", "stable"]);
    project.write(
        "src/signer/__init__.py",
        "def sign(x):\n    return x\n\n\ndef unsign(x):\n    return x\n",
    );
    commit_all(&project, "Add unsign");
    project
}

#[test]
fn release_of_a_pep440_dev_version_releases_the_version_in_progress_in_the_projects_changes_rst_and_convention()
 {
    let project = pep440_project();
    let plan = json!([{
        "when": "Step 5: draft the changelog entry for 2.3.0",
        "outputs": {"entry": "-   Add ``unsign``."},
    }]);
    let (run, questions) = release(&project, &plan, &["in progress", "yes"]);
    completed(&run);
    assert!(
        questions[0].contains("`in progress`: 2.3.0")
            && questions[0].contains("last release: 2.2.0"),
        "the marker tag is not a release, the version in progress is offered: {}",
        questions[0]
    );
    let day = today();
    insta::assert_snapshot!(
        "release_confirm_question",
        questions[1]
            .replace(&day, "DATE")
            .replace(&last_run(&project), "RUN")
    );
    assert_eq!(
        git(&project, &["log", "-1", "--format=%s"]),
        "release version 2.3.0"
    );
    assert_eq!(git(&project, &["tag", "--points-at", "HEAD"]), "2.3.0");
    assert_eq!(tag_message(&project, "2.3.0"), "Version 2.3.0");
    assert!(read(&project, "pyproject.toml").contains("version = \"2.3.0\"\n"));
    assert!(
        read(&project, "CHANGES.rst").starts_with(&format!(
            "Version 2.3.0\n-------------\n\nReleased {day}\n\n-   Add ``unsign``.\n\nVersion 2.2.0\n-------------\n"
        )),
        "{}",
        read(&project, "CHANGES.rst")
    );
    assert!(
        !project.root().join("CHANGELOG.md").exists(),
        "no second changelog"
    );
    // The agent was shown the previous entry, to write in its format.
    let prompt = calls(&project)[0]["prompt"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        prompt.contains("Released 2025-04-02\n\n-   Sign bytes."),
        "{prompt}"
    );
    assert!(
        run.stderr.contains("push it with `git push --follow-tags`"),
        "{}",
        run.stderr
    );
}

#[test]
fn release_with_uv_lock_and_no_uv_stops_before_asking_or_changing_anything() {
    let project = pep440_project();
    project.write(
        "uv.lock",
        "version = 1\n\n[[package]]\nname = \"signer\"\nversion = \"2.3.0.dev0\"\nsource = { editable = \".\" }\n",
    );
    let head = commit_all(&project, "Lock");
    let (run, questions) = release_with_path(&project, &json!([]), &[], Some("/usr/bin:/bin"));
    assert!(questions.is_empty());
    assert_ne!(state(&run), "waiting", "{}", run.stderr);
    assert!(
        stopped_by(&run).contains("`uv.lock` holds the version and `uv` is not installed")
            || run
                .stderr
                .contains("`uv.lock` holds the version and `uv` is not installed"),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    assert_eq!(git(&project, &["rev-parse", "HEAD"]), head);
    assert_eq!(git(&project, &["status", "--porcelain"]), "");
}

#[test]
fn release_turns_keep_a_changelogs_unreleased_section_into_the_version_and_updates_package_lock_and_prints_the_push()
 {
    let project = repository(&[
        (
            "package.json",
            "{\n  \"name\": \"greet\",\n  \"version\": \"1.2.3\",\n  \"dependencies\": {\n    \"dep\": \"1.2.3\"\n  }\n}\n",
        ),
        (
            "package-lock.json",
            "{\n  \"name\": \"greet\",\n  \"version\": \"1.2.3\",\n  \"lockfileVersion\": 3,\n  \"packages\": {\n    \"\": {\n      \"name\": \"greet\",\n      \"version\": \"1.2.3\"\n    },\n    \"node_modules/dep\": {\n      \"version\": \"1.2.3\"\n    }\n  }\n}\n",
        ),
        (
            "CHANGELOG.md",
            "# Changelog\n\n## [Unreleased]\n\n### Fixed\n\n- The greeting ends with a period.\n\n## [1.2.3] - 2024-05-01\n\n- First.\n",
        ),
    ]);
    // Annotated, so the new tag is too and `--follow-tags` pushes it.
    git(&project, &["tag", "-a", "v1.2.3", "-m", "Release v1.2.3"]);
    project.write("cli.js", "console.log('hi.')\n");
    commit_all(&project, "Fix the greeting");
    let remote = project.root().join("agent/remote.git");
    git(
        &project,
        &["init", "-q", "--bare", remote.to_str().expect("utf-8")],
    );
    git(
        &project,
        &["remote", "add", "origin", remote.to_str().expect("utf-8")],
    );
    git(&project, &["push", "-q", "-u", "origin", "main"]);
    // No llm step: the entries are under Unreleased already.
    let (run, _) = release(&project, &json!([]), &["patch", "yes"]);
    completed(&run);
    let day = today();
    assert_eq!(
        read(&project, "CHANGELOG.md"),
        format!(
            "# Changelog\n\n## [Unreleased]\n\n## [1.2.4] - {day}\n\n### Fixed\n\n- The greeting ends with a period.\n\n## [1.2.3] - 2024-05-01\n\n- First.\n"
        )
    );
    let lock = read(&project, "package-lock.json");
    assert!(
        lock.starts_with("{\n  \"name\": \"greet\",\n  \"version\": \"1.2.4\",")
            && lock.contains("      \"name\": \"greet\",\n      \"version\": \"1.2.4\"\n")
            && lock.contains("\"node_modules/dep\": {\n      \"version\": \"1.2.3\""),
        "{lock}"
    );
    assert!(read(&project, "package.json").contains("\"dep\": \"1.2.3\""));
    assert_eq!(
        git(&project, &["show", "--name-only", "--format=", "HEAD"]),
        "CHANGELOG.md\npackage-lock.json\npackage.json"
    );
    assert_eq!(
        git(&project, &["log", "-1", "--format=%s"]),
        "Release v1.2.4"
    );
    assert!(
        run.stderr
            .contains("push it with `git push --follow-tags origin main`"),
        "{}",
        run.stderr
    );
    assert!(calls(&project).is_empty(), "no entry to draft");
}

#[test]
fn release_of_a_cargo_workspace_writes_the_workspace_version_and_the_lock() {
    let project = repository(&[
        (
            "Cargo.toml",
            "[workspace]\nmembers = [\"crates/adder\"]\nresolver = \"2\"\n\n[workspace.package]\nversion = \"0.4.1\"\nedition = \"2021\"\n",
        ),
        (
            "crates/adder/Cargo.toml",
            "[package]\nname = \"adder\"\nversion.workspace = true\nedition.workspace = true\n",
        ),
        (
            "crates/adder/src/lib.rs",
            "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
        ),
    ]);
    lock(&project);
    let plan = json!([{"when": "Step 5", "outputs": {"entry": "### Added\n\n- `add`."}}]);
    let (run, _) = release(&project, &plan, &["minor", "yes"]);
    completed(&run);
    assert!(read(&project, "Cargo.toml").contains("[workspace.package]\nversion = \"0.5.0\"\n"));
    assert!(
        read(&project, "Cargo.lock").contains("name = \"adder\"\nversion = \"0.5.0\""),
        "{}",
        read(&project, "Cargo.lock")
    );
    assert_eq!(
        read(&project, "CHANGELOG.md"),
        "# Changelog\n\n## v0.5.0\n\n### Added\n\n- `add`.\n",
        "a changelog is started only where there is none"
    );
    assert_eq!(git(&project, &["status", "--porcelain"]), "");
    assert_eq!(git(&project, &["tag", "--points-at", "HEAD"]), "v0.5.0");
}

#[test]
fn release_of_a_dunder_version_refuses_typed_versions_that_are_not_greater_or_not_versions_before_confirming()
 {
    let project = repository(&[
        (
            "pyproject.toml",
            "[project]\nname = \"tiny\"\ndynamic = [\"version\"]\n\n[tool.hatch.version]\npath = \"src/tiny/__init__.py\"\n",
        ),
        (
            "src/tiny/__init__.py",
            "\"\"\"Tiny.\"\"\"\n\n__version__ = \"1.4.0\"\n",
        ),
        ("test_tiny.py", PY_TEST),
        (
            "HISTORY.md",
            "# History\n\n## 1.4.0 (2025-03-01)\n\n- Something.\n",
        ),
    ]);
    git(&project, &["tag", "v1.4.0"]);
    project.write("more.py", "X = 1\n");
    commit_all(&project, "Add more");
    let plan = json!([{"when": "Step 5", "outputs": {"entry": "- More."}}]);
    let (run, questions) = release(
        &project,
        &plan,
        &[
            "type a version",
            "1.3.0",
            "1.5.0'$(touch PWNED)'",
            "1.5.0",
            "yes",
        ],
    );
    completed(&run);
    assert!(
        questions[2].contains("`1.3.0` is not greater than the last release `1.4.0`"),
        "{}",
        questions[2]
    );
    assert!(
        questions[3].contains("`1.5.0'$(touch PWNED)'` is not a version"),
        "{}",
        questions[3]
    );
    assert!(!project.root().join("PWNED").exists());
    assert!(read(&project, "src/tiny/__init__.py").contains("__version__ = \"1.5.0\"\n"));
    assert!(
        read(&project, "HISTORY.md").starts_with(&format!(
            "# History\n\n## 1.5.0 ({})\n\n- More.\n\n## 1.4.0",
            today()
        )),
        "{}",
        read(&project, "HISTORY.md")
    );
    assert_eq!(git(&project, &["tag", "--points-at", "HEAD"]), "v1.5.0");
}

#[test]
fn release_refuses_a_hostile_version_in_the_version_file_before_asking_and_runs_nothing() {
    for (file, text) in [
        (
            "package.json",
            "{\n  \"name\": \"greet\",\n  \"version\": \"1.2.3-a'$(touch PWNED)'\"\n}\n",
        ),
        (
            "pyproject.toml",
            "[project]\nname = \"x\"\nversion = \"1.2.3-a'$(touch PWNED)'\"\n",
        ),
    ] {
        let project = repository(&[(file, text)]);
        let (run, questions) = release(&project, &json!([]), &[]);
        assert!(questions.is_empty());
        assert_ne!(state(&run), "waiting", "{}", run.stdout);
        assert!(
            stopped_by(&run).contains("is not a version mekara can release")
                || run.stderr.contains("is not a version mekara can release"),
            "{}\n{}",
            run.stdout,
            run.stderr
        );
        assert!(!project.root().join("PWNED").exists());
    }
}

#[test]
fn release_whose_check_failed_goes_on_with_retry_once_the_code_is_fixed() {
    let project = repository(&[
        (
            "pyproject.toml",
            "[project]\nname = \"x\"\nversion = \"0.1.0\"\n",
        ),
        (
            "test_x.py",
            &PY_TEST.replace("assertEqual(1, 1)", "assertEqual(1, 2)"),
        ),
    ]);
    let plan = json!([{"when": "Step 5", "outputs": {"entry": "- Works."}}]);
    let (run, _) = release(&project, &plan, &[]);
    assert_ne!(state(&run), "waiting", "{}", run.stdout);
    assert_ne!(state(&run), "completed", "{}", run.stdout);
    // Not the same length as the failing file: written within the second it was first run,
    // Python would take the same length and second for an unchanged file and run its
    // cached bytecode.
    project.write("test_x.py", &format!("{PY_TEST}# fixed\n"));
    commit_all(&project, "Fix the test");
    let retried = retry(&project);
    let (run, _) = answer_all(&project, retried, &["patch", "yes"], None);
    completed(&run);
    assert_eq!(git(&project, &["tag", "--points-at", "HEAD"]), "v0.1.1");
}

/// A check whose tool is missing here stopped the release as a failure of the code (the raw
/// `not found`). Now it is a check that could not run: the person is asked, saying which, and
/// the release goes on only on their word.
#[test]
fn release_with_a_check_that_could_not_run_asks_whether_to_release_anyway() {
    for answer in ["stop", "release anyway"] {
        let project = repository(&[
            (
                "pyproject.toml",
                "[project]\nname = \"x\"\nversion = \"0.1.0\"\n",
            ),
            ("test_x.py", PY_TEST),
            ("check.sh", "#!/bin/sh\nnosuchlinter .\n"),
            (
                ".github/workflows/ci.yml",
                "jobs:\n  lint:\n    steps:\n      - run: sh ./check.sh\n",
            ),
        ]);
        let plan = json!([{"when": "Step 5", "outputs": {"entry": "- Works."}}]);
        let (run, questions) = release(&project, &plan, &[answer]);
        assert!(
            questions[0].contains(
                "These checks could not run here (not run: `sh ./check.sh`: `nosuchlinter` not \
                 installed). A release needs them to pass: release anyway?"
            ),
            "{}",
            questions[0]
        );
        if answer == "stop" {
            assert_ne!(state(&run), "completed", "{}", run.stdout);
            assert_ne!(state(&run), "waiting", "{}", run.stdout);
            assert_eq!(git(&project, &["tag", "--list"]), "");
        } else {
            assert_eq!(state(&run), "waiting", "{}\n{}", run.stdout, run.stderr);
            assert!(stopped_by(&run).contains("0.1.1"), "{}", stopped_by(&run));
        }
    }
}

/// Issue 39's failure: the version read was not one it could release, and `--retry` after
/// correcting the file replayed the step on the version read before. Now it stops before
/// asking, and the retried step reads the project again.
#[test]
fn release_stopped_on_a_version_it_cannot_read_goes_on_with_retry_once_the_file_is_corrected() {
    let project = repository(&[(
        "pyproject.toml",
        "[project]\nname = \"x\"\nversion = \"latest\"\n",
    )]);
    let plan = json!([{"when": "Step 5", "outputs": {"entry": "- Works."}}]);
    let (run, _) = release(&project, &plan, &[]);
    assert_ne!(state(&run), "waiting", "{}", run.stdout);
    assert!(
        stopped_by(&run).contains("the version `latest` in pyproject.toml is not a version")
            || run
                .stderr
                .contains("the version `latest` in pyproject.toml is not a version"),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    project.write(
        "pyproject.toml",
        "[project]\nname = \"x\"\nversion = \"0.2.0\"\n",
    );
    commit_all(&project, "A version");
    let retried = retry(&project);
    let (run, questions) = answer_all(&project, retried, &["as it is", "yes"], None);
    completed(&run);
    assert!(
        questions[0].contains("`as it is`: 0.2.0"),
        "{}",
        questions[0]
    );
    assert_eq!(git(&project, &["tag", "--points-at", "HEAD"]), "v0.2.0");
}

/// A crate whose dependencies are not in the registry cache (as a cloned project often is,
/// offline): `cargo update -w --offline` cannot resolve, so the crate's own version is
/// written into `Cargo.lock` by hand, and a dependency at the same version is left alone.
#[test]
fn release_writes_the_crates_version_into_cargo_lock_when_cargo_cannot_update_it_offline() {
    let project = repository(&[
        (
            "Cargo.toml",
            "[package]\nname = \"tool\"\nversion = \"1.0.0\"\nedition = \"2021\"\n\n[dependencies]\nnot-cached-anywhere = \"1\"\n",
        ),
        (
            "Cargo.lock",
            "version = 4\n\n[[package]]\nname = \"not-cached-anywhere\"\nversion = \"1.0.0\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\nchecksum = \"0000000000000000000000000000000000000000000000000000000000000000\"\n\n[[package]]\nname = \"tool\"\nversion = \"1.0.0\"\ndependencies = [\n \"not-cached-anywhere\",\n]\n",
        ),
        ("src/main.rs", "fn main() {}\n"),
        ("Makefile", "check:\n\ttrue\n"),
    ]);
    let plan = json!([{"when": "Step 5", "outputs": {"entry": "- Faster."}}]);
    let (run, _) = release(&project, &plan, &["patch", "yes"]);
    completed(&run);
    assert_eq!(
        read(&project, "Cargo.lock"),
        "version = 4\n\n[[package]]\nname = \"not-cached-anywhere\"\nversion = \"1.0.0\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\nchecksum = \"0000000000000000000000000000000000000000000000000000000000000000\"\n\n[[package]]\nname = \"tool\"\nversion = \"1.0.1\"\ndependencies = [\n \"not-cached-anywhere\",\n]\n"
    );
    assert_eq!(git(&project, &["status", "--porcelain"]), "");
}

/// `uv.lock` holds the project's own version (`2.3.0.dev` written `2.3.0.dev0`): after the
/// release, `uv lock --locked` (what CI's `uv run --locked` checks) accepts it. With the `uv`
/// that `tests/python/install.sh` puts in `target/test-clients/py`.
#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "needs uv in target/test-clients/py: bash tests/python/install.sh"
)]
fn release_updates_uv_lock_so_that_uv_locked_accepts_it() {
    let (uv, path) = uv_and_path();
    let project = repository(&[
        (
            "pyproject.toml",
            "[project]\nname = \"signer\"\nversion = \"2.3.0.dev\"\nrequires-python = \">=3.8\"\ndependencies = []\n",
        ),
        ("Makefile", "check:\n\ttrue\n"),
    ]);
    let uv = uv.display();
    succeeds(&project, &format!("{uv} lock --offline"));
    commit_all(&project, "Lock");
    let plan = json!([{"when": "Step 5", "outputs": {"entry": "- Signed."}}]);
    let (run, _) = release_with_path(&project, &plan, &["in progress", "yes"], Some(&path));
    completed(&run);
    assert!(
        read(&project, "uv.lock").contains("name = \"signer\"\nversion = \"2.3.0\"\n"),
        "{}",
        read(&project, "uv.lock")
    );
    succeeds(&project, &format!("{uv} lock --locked --offline"));
    assert_eq!(git(&project, &["status", "--porcelain"]), "");
}

/// Changelogs kept by a tool: changesets (use `changeset version`) and towncrier when it is
/// not installed stop the release before it asks or changes anything.
#[test]
fn release_stops_before_asking_where_changesets_or_a_missing_towncrier_keep_the_changelog() {
    for (files, expected) in [
        (
            vec![
                (
                    "package.json",
                    "{\n  \"name\": \"a\",\n  \"version\": \"1.0.0\"\n}\n",
                ),
                (".changeset/config.json", "{}\n"),
            ],
            "run `npx changeset version`",
        ),
        (
            vec![
                (
                    "pyproject.toml",
                    "[project]\nname = \"a\"\nversion = \"1.0.0\"\n\n[tool.towncrier]\ndirectory = \"changes\"\n",
                ),
                ("changes/12.feature.rst", "Faster.\n"),
            ],
            "towncrier (its news fragments), which is not installed",
        ),
    ] {
        let project = repository(&files);
        let head = git(&project, &["rev-parse", "HEAD"]);
        let (run, questions) = release_with_path(&project, &json!([]), &[], Some("/usr/bin:/bin"));
        assert!(questions.is_empty());
        let said = format!("{}\n{}", stopped_by(&run), run.stderr);
        assert!(said.contains(expected), "{said}");
        assert_eq!(git(&project, &["rev-parse", "HEAD"]), head);
        assert_eq!(git(&project, &["status", "--porcelain"]), "");
    }
}

/// A version from the tags (setuptools_scm): no file holds it, the release is the tag, and
/// the commit holds only the changelog entry.
#[test]
fn release_of_a_version_from_the_tags_writes_no_version_file_and_tags() {
    let project = repository(&[
        (
            "pyproject.toml",
            "[build-system]\nrequires = [\"setuptools>=64\", \"setuptools_scm>=8\"]\n\n[project]\nname = \"a\"\ndynamic = [\"version\"]\n",
        ),
        ("NEWS.md", "# News\n\n## v0.9.0\n\n- Old.\n"),
        ("Makefile", "check:\n\ttrue\n"),
    ]);
    git(&project, &["tag", "v0.9.0"]);
    project.write("a.py", "A = 1\n");
    commit_all(&project, "Add a");
    let plan = json!([{"when": "Step 5", "outputs": {"entry": "- New."}}]);
    let (run, questions) = release(&project, &plan, &["minor", "yes"]);
    completed(&run);
    assert!(
        questions[0].contains("the version is 0.9.0"),
        "{}",
        questions[0]
    );
    assert!(
        questions[1].contains("Files to change: `NEWS.md`\n"),
        "{}",
        questions[1]
    );
    assert_eq!(git(&project, &["tag", "--points-at", "HEAD"]), "v0.10.0");
    assert_eq!(
        read(&project, "NEWS.md"),
        "# News\n\n## v0.10.0\n\n- New.\n\n## v0.9.0\n\n- Old.\n"
    );
    assert!(read(&project, "pyproject.toml").contains("dynamic = [\"version\"]"));
}

/// The versions offered for each scheme: a pre-release offers the version in progress, a
/// version never tagged is offered as it is, a calendar version offers the next one.
#[test]
fn release_offers_the_versions_each_scheme_can_go_to() {
    for (version, tag, offers) in [
        (
            "1.3.0-rc.1",
            None,
            "- `in progress`: 1.3.0\n  - `patch`: 1.3.1\n",
        ),
        (
            "2.3.0rc1",
            Some("2.2.0"),
            "- `in progress`: 2.3.0\n  - `patch`: 2.2.1\n",
        ),
        (
            "2024.11.3",
            Some("v2024.11.3"),
            "- `next`: 2024.11.4\n  - `type a version`",
        ),
        (
            "2.3.0.post1",
            None,
            "- `as it is`: 2.3.0.post1\n  - `patch`: 2.3.1\n",
        ),
    ] {
        let project = repository(&[(
            "package.json",
            &format!("{{\n  \"name\": \"a\",\n  \"version\": \"{version}\"\n}}\n"),
        )]);
        if let Some(tag) = tag {
            git(&project, &["tag", tag]);
        }
        let (run, _) = release(&project, &json!([]), &[]);
        assert!(
            stopped_by(&run).contains(offers),
            "{version}: {}",
            stopped_by(&run)
        );
    }
}

/// The `uv` that `tests/python/install.sh` puts in `target/test-clients/py`, and the `PATH`
/// with its folder first.
pub(crate) fn uv_and_path() -> (std::path::PathBuf, String) {
    let uv = crate::common::outside_client("py/bin/uv", "uv", "tests/python/install.sh");
    let bin = uv.parent().expect("bin").display().to_string();
    let path = format!("{bin}:{}", std::env::var("PATH").unwrap_or_default());
    (uv, path)
}
