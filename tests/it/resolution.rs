//! Script resolution (DESIGN §2) through the real binary: `mekara scripts show NAME` says
//! which files a name resolves to, and `mekara scripts` lists what there is.
//!
//! Each case builds real folders in a temp dir: `<tmp>/project` (with `.mekara/`), `<tmp>/home`
//! (passed as `HOME`), and the bundled scripts compiled into the binary.

use std::path::Path;

use crate::common::{Project, Run, write_file};

/// Creates `paths` (relative to the temp dir): `.md` files are NL scripts whose description
/// names their path, `.star` files are compiled scripts, and a path ending in `/` is a folder.
fn build(project: &Project, paths: &[&str]) {
    let tmp = project.dir.path();
    for path in paths {
        if let Some(dir) = path.strip_suffix('/') {
            std::fs::create_dir_all(tmp.join(dir)).expect("mkdir");
        } else if Path::new(path).extension().is_some_and(|e| e == "md") {
            write_file(
                &tmp.join(path),
                &format!("---\ndescription: from {path}\n---\n\nDo the thing.\n"),
            );
        } else if Path::new(path).extension().is_some_and(|e| e == "star") {
            write_file(
                &tmp.join(path),
                "def execute(request):\n    llm(\"Do the thing.\")\n",
            );
        } else {
            panic!("unknown kind of file: {path}");
        }
    }
}

/// `mekara ARGS` run in `cwd` (relative to the temp dir).
fn mekara_in(project: &Project, cwd: &str, args: &[&str]) -> Run {
    let dir = project.dir.path().join(cwd);
    std::fs::create_dir_all(&dir).expect("mkdir cwd");
    crate::common::run_with_stdin(project.command_in(&dir, args), "")
}

/// The three lines of `mekara scripts show`: the name line, the NL origin, the compiled origin.
fn show_lines(project: &Project, run: &Run) -> (String, String, String) {
    let out = project.scrub(&run.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    let nl = lines[1]
        .strip_prefix("  nl:       ")
        .unwrap_or_else(|| panic!("nl line: {out}"));
    let compiled = lines[2]
        .strip_prefix("  compiled: ")
        .unwrap_or_else(|| panic!("compiled line: {out}"));
    let compiled = if compiled.starts_with("none (") {
        "none"
    } else {
        compiled
    };
    (lines[0].to_string(), nl.to_string(), compiled.to_string())
}

struct Case {
    /// What the case shows.
    what: &'static str,
    /// Files and folders to create, relative to the temp dir.
    files: &'static [&'static str],
    /// The current folder, relative to the temp dir.
    cwd: &'static str,
    /// The name asked for.
    name: &'static str,
    /// The name as displayed.
    shown: &'static str,
    /// `<origin> (<level>)` of the NL file.
    nl: &'static str,
    /// `<origin> (<level>)` of the compiled file, or `none`.
    compiled: &'static str,
}

/// Runs each case in a fresh temp dir and reports every mismatch at once.
fn check_cases(cases: &[Case]) {
    let mut failures = Vec::new();
    for case in cases {
        let project = Project::new();
        build(&project, case.files);
        let run = mekara_in(&project, case.cwd, &["scripts", "show", case.name]);
        if run.code != Some(0) {
            failures.push(format!(
                "{}: exit {:?}\n{}",
                case.what, run.code, run.stderr
            ));
            continue;
        }
        let (first, nl, compiled) = show_lines(&project, &run);
        let got = (
            first.split(": ").next().unwrap_or_default(),
            nl.as_str(),
            compiled.as_str(),
        );
        let want = (case.shown, case.nl, case.compiled);
        if got != want {
            failures.push(format!("{}:\n  want {want:?}\n  got  {got:?}", case.what));
        }
    }
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn precedence_and_pairing_of_nl_and_compiled_files() {
    check_cases(&[
        Case {
            what: "a bundled script pairs with its bundled compiled file",
            files: &[],
            cwd: "project",
            name: "test:random",
            shown: "test:random",
            nl: "bundled:nl/test/random.md (bundled)",
            compiled: "bundled:compiled/test/random.star (bundled)",
        },
        Case {
            what: "a project NL file shadows the bundled one and is not paired with the bundled compiled file",
            files: &["project/.mekara/scripts/nl/test/random.md"],
            cwd: "project",
            name: "test:random",
            shown: "test:random",
            nl: "[PROJECT]/.mekara/scripts/nl/test/random.md (project)",
            compiled: "none",
        },
        Case {
            what: "a user NL file shadows the bundled one and is not paired with the bundled compiled file",
            files: &["home/.mekara/scripts/nl/test/random.md"],
            cwd: "project",
            name: "test:random",
            shown: "test:random",
            nl: "[HOME]/.mekara/scripts/nl/test/random.md (user)",
            compiled: "none",
        },
        Case {
            what: "a project NL file shadows a user one",
            files: &[
                "project/.mekara/scripts/nl/test/random.md",
                "home/.mekara/scripts/nl/test/random.md",
            ],
            cwd: "project",
            name: "test:random",
            shown: "test:random",
            nl: "[PROJECT]/.mekara/scripts/nl/test/random.md (project)",
            compiled: "none",
        },
        Case {
            what: "project over user over bundled, each level with both files",
            files: &[
                "project/.mekara/scripts/nl/test/random.md",
                "project/.mekara/scripts/compiled/test/random.star",
                "home/.mekara/scripts/nl/test/random.md",
                "home/.mekara/scripts/compiled/test/random.star",
            ],
            cwd: "project",
            name: "test:random",
            shown: "test:random",
            nl: "[PROJECT]/.mekara/scripts/nl/test/random.md (project)",
            compiled: "[PROJECT]/.mekara/scripts/compiled/test/random.star (project)",
        },
        Case {
            what: "user NL and user compiled are paired",
            files: &[
                "home/.mekara/scripts/nl/mine.md",
                "home/.mekara/scripts/compiled/mine.star",
            ],
            cwd: "project",
            name: "mine",
            shown: "mine",
            nl: "[HOME]/.mekara/scripts/nl/mine.md (user)",
            compiled: "[HOME]/.mekara/scripts/compiled/mine.star (user)",
        },
        Case {
            what: "user NL is paired with a project compiled file (a higher level)",
            files: &[
                "home/.mekara/scripts/nl/mine.md",
                "project/.mekara/scripts/compiled/mine.star",
            ],
            cwd: "project",
            name: "mine",
            shown: "mine",
            nl: "[HOME]/.mekara/scripts/nl/mine.md (user)",
            compiled: "[PROJECT]/.mekara/scripts/compiled/mine.star (project)",
        },
        Case {
            what: "user NL with compiled files at user and project takes the higher level's",
            files: &[
                "home/.mekara/scripts/nl/mine.md",
                "home/.mekara/scripts/compiled/mine.star",
                "project/.mekara/scripts/compiled/mine.star",
            ],
            cwd: "project",
            name: "mine",
            shown: "mine",
            nl: "[HOME]/.mekara/scripts/nl/mine.md (user)",
            compiled: "[PROJECT]/.mekara/scripts/compiled/mine.star (project)",
        },
        Case {
            what: "project NL is never paired with a user compiled file (a lower level)",
            files: &[
                "project/.mekara/scripts/nl/mine.md",
                "home/.mekara/scripts/compiled/mine.star",
            ],
            cwd: "project",
            name: "mine",
            shown: "mine",
            nl: "[PROJECT]/.mekara/scripts/nl/mine.md (project)",
            compiled: "none",
        },
        Case {
            what: "bundled NL is paired with a user compiled file (a higher level)",
            files: &["home/.mekara/scripts/compiled/test/imagine-object.star"],
            cwd: "project",
            name: "test:imagine-object",
            shown: "test:imagine-object",
            nl: "bundled:nl/test/imagine-object.md (bundled)",
            compiled: "[HOME]/.mekara/scripts/compiled/test/imagine-object.star (user)",
        },
        Case {
            what: "bundled NL is paired with a project compiled file (a higher level)",
            files: &["project/.mekara/scripts/compiled/test/imagine-object.star"],
            cwd: "project",
            name: "test:imagine-object",
            shown: "test:imagine-object",
            nl: "bundled:nl/test/imagine-object.md (bundled)",
            compiled: "[PROJECT]/.mekara/scripts/compiled/test/imagine-object.star (project)",
        },
        Case {
            what: "a bundled NL-only script stays NL-only",
            files: &[],
            cwd: "project",
            name: "test:imagine-object",
            shown: "test:imagine-object",
            nl: "bundled:nl/test/imagine-object.md (bundled)",
            compiled: "none",
        },
    ]);
}

#[test]
fn dashes_underscores_colons_and_slashes() {
    check_cases(&[
        Case {
            what: "`foo-bar` finds `foo_bar.md`",
            files: &["project/.mekara/scripts/nl/foo_bar.md"],
            cwd: "project",
            name: "foo-bar",
            shown: "foo_bar",
            nl: "[PROJECT]/.mekara/scripts/nl/foo_bar.md (project)",
            compiled: "none",
        },
        Case {
            what: "`foo-bar.md` is paired with `foo_bar.star`",
            files: &[
                "project/.mekara/scripts/nl/foo-bar.md",
                "project/.mekara/scripts/compiled/foo_bar.star",
            ],
            cwd: "project",
            name: "foo-bar",
            shown: "foo-bar",
            nl: "[PROJECT]/.mekara/scripts/nl/foo-bar.md (project)",
            compiled: "[PROJECT]/.mekara/scripts/compiled/foo_bar.star (project)",
        },
        Case {
            what: "the name as written wins over the underscored form at the same level",
            files: &[
                "project/.mekara/scripts/nl/foo-bar.md",
                "project/.mekara/scripts/nl/foo_bar.md",
            ],
            cwd: "project",
            name: "foo-bar",
            shown: "foo-bar",
            nl: "[PROJECT]/.mekara/scripts/nl/foo-bar.md (project)",
            compiled: "none",
        },
        Case {
            what: "the level wins over the spelling: a project `foo_bar.md` beats a user `foo-bar.md`",
            files: &[
                "home/.mekara/scripts/nl/foo-bar.md",
                "project/.mekara/scripts/nl/foo_bar.md",
            ],
            cwd: "project",
            name: "foo-bar",
            shown: "foo_bar",
            nl: "[PROJECT]/.mekara/scripts/nl/foo_bar.md (project)",
            compiled: "none",
        },
        Case {
            what: "every part of a nested name has `-` read as `_`",
            files: &["home/.mekara/scripts/nl/a_b/c_d.md"],
            cwd: "project",
            name: "a-b:c-d",
            shown: "a_b:c_d",
            nl: "[HOME]/.mekara/scripts/nl/a_b/c_d.md (user)",
            compiled: "none",
        },
        Case {
            what: "`a:b` finds `a/b.md` and is shown with `:`",
            files: &[
                "project/.mekara/scripts/nl/a/b.md",
                "project/.mekara/scripts/compiled/a/b.star",
            ],
            cwd: "project",
            name: "a:b",
            shown: "a:b",
            nl: "[PROJECT]/.mekara/scripts/nl/a/b.md (project)",
            compiled: "[PROJECT]/.mekara/scripts/compiled/a/b.star (project)",
        },
        Case {
            what: "`a/b` is shown with `:` too",
            files: &["project/.mekara/scripts/nl/a/b.md"],
            cwd: "project",
            name: "a/b",
            shown: "a:b",
            nl: "[PROJECT]/.mekara/scripts/nl/a/b.md (project)",
            compiled: "none",
        },
        Case {
            what: "`:` and `/` mix in one name",
            files: &["home/.mekara/scripts/nl/x/y/z.md"],
            cwd: "project",
            name: "x:y/z",
            shown: "x:y:z",
            nl: "[HOME]/.mekara/scripts/nl/x/y/z.md (user)",
            compiled: "none",
        },
        Case {
            what: "a bundled name with `/`",
            files: &[],
            cwd: "project",
            name: "test/double-or-nothing",
            shown: "test:double-or-nothing",
            nl: "bundled:nl/test/double-or-nothing.md (bundled)",
            compiled: "bundled:compiled/test/double-or-nothing.star (bundled)",
        },
    ]);
}

#[test]
fn the_project_root_is_the_nearest_marked_ancestor_but_never_home() {
    check_cases(&[
        Case {
            what: "from a subfolder of the project, the project scripts are found",
            files: &["project/.mekara/scripts/nl/where.md", "project/src/deep/"],
            cwd: "project/src/deep",
            name: "where",
            shown: "where",
            nl: "[PROJECT]/.mekara/scripts/nl/where.md (project)",
            compiled: "none",
        },
        Case {
            what: "a `.claude/` folder marks a root, nearer than the outer `.mekara/` one",
            files: &[
                "project/.mekara/scripts/nl/here.md",
                "project/inner/.claude/",
                "project/inner/.agents/skills/here/SKILL.md",
            ],
            cwd: "project/inner/sub",
            name: "here",
            shown: "here",
            nl: "[PROJECT]/inner/.agents/skills/here/SKILL.md (project)",
            compiled: "none",
        },
        Case {
            what: "a subfolder of home with no markers: home's scripts are the user level, not a project",
            files: &[
                "home/.claude/",
                "home/.mekara/scripts/nl/mine.md",
                "home/code/app/",
            ],
            cwd: "home/code/app",
            name: "mine",
            shown: "mine",
            nl: "[HOME]/.mekara/scripts/nl/mine.md (user)",
            compiled: "none",
        },
        Case {
            what: "home itself is not a project root",
            files: &["home/.claude/", "home/.mekara/scripts/nl/mine.md"],
            cwd: "home",
            name: "mine",
            shown: "mine",
            nl: "[HOME]/.mekara/scripts/nl/mine.md (user)",
            compiled: "none",
        },
        Case {
            what: "a marked subfolder of home is a project, and shadows home's scripts",
            files: &[
                "home/.claude/",
                "home/.mekara/scripts/nl/mine.md",
                "home/code/app/.mekara/scripts/nl/mine.md",
            ],
            cwd: "home/code/app/src",
            name: "mine",
            shown: "mine",
            nl: "[HOME]/code/app/.mekara/scripts/nl/mine.md (project)",
            compiled: "none",
        },
    ]);
}

#[test]
fn a_claude_root_hides_the_outer_projects_scripts() {
    let project = Project::new();
    build(
        &project,
        &[
            "project/.mekara/scripts/nl/outer-only.md",
            "project/inner/.claude/",
        ],
    );
    let outer = mekara_in(&project, "project", &["scripts", "show", "outer-only"]);
    outer.expect_code(0);
    let inner = mekara_in(
        &project,
        "project/inner/sub",
        &["scripts", "show", "outer-only"],
    );
    inner.expect_code(2);
    assert!(
        inner.stderr.contains("script `outer-only` not found"),
        "{}",
        inner.stderr
    );
}

#[test]
fn agent_skills_layout() {
    check_cases(&[
        Case {
            what: "a project skill pairs with the `mekara.star` beside it",
            files: &[
                "project/.agents/skills/deploy/SKILL.md",
                "project/.agents/skills/deploy/mekara.star",
            ],
            cwd: "project",
            name: "deploy",
            shown: "deploy",
            nl: "[PROJECT]/.agents/skills/deploy/SKILL.md (project)",
            compiled: "[PROJECT]/.agents/skills/deploy/mekara.star (project)",
        },
        Case {
            what: "a nested skill is named with `:`",
            files: &[
                "project/.agents/skills/team/deploy/SKILL.md",
                "project/.agents/skills/team/deploy/mekara.star",
            ],
            cwd: "project",
            name: "team:deploy",
            shown: "team:deploy",
            nl: "[PROJECT]/.agents/skills/team/deploy/SKILL.md (project)",
            compiled: "[PROJECT]/.agents/skills/team/deploy/mekara.star (project)",
        },
        Case {
            what: "a user skill, NL only",
            files: &["home/.agents/skills/notes/SKILL.md"],
            cwd: "project",
            name: "notes",
            shown: "notes",
            nl: "[HOME]/.agents/skills/notes/SKILL.md (user)",
            compiled: "none",
        },
        Case {
            what: "a project skill shadows a user script of the other layout",
            files: &[
                "project/.agents/skills/notes/SKILL.md",
                "home/.mekara/scripts/nl/notes.md",
            ],
            cwd: "project",
            name: "notes",
            shown: "notes",
            nl: "[PROJECT]/.agents/skills/notes/SKILL.md (project)",
            compiled: "none",
        },
        Case {
            what: "a skill pairs with a compiled file of the `.mekara` layout at the same level",
            files: &[
                "project/.agents/skills/notes/SKILL.md",
                "project/.mekara/scripts/compiled/notes.star",
            ],
            cwd: "project",
            name: "notes",
            shown: "notes",
            nl: "[PROJECT]/.agents/skills/notes/SKILL.md (project)",
            compiled: "[PROJECT]/.mekara/scripts/compiled/notes.star (project)",
        },
        Case {
            what: "a project skill shadowing a bundled script is not paired with the bundled compiled file",
            files: &["project/.agents/skills/test/random/SKILL.md"],
            cwd: "project",
            name: "test:random",
            shown: "test:random",
            nl: "[PROJECT]/.agents/skills/test/random/SKILL.md (project)",
            compiled: "none",
        },
        Case {
            what: "a user skill is paired with a project `mekara.star` (a higher level)",
            files: &[
                "home/.agents/skills/notes/SKILL.md",
                "project/.agents/skills/notes/mekara.star",
            ],
            cwd: "project",
            name: "notes",
            shown: "notes",
            nl: "[HOME]/.agents/skills/notes/SKILL.md (user)",
            compiled: "[PROJECT]/.agents/skills/notes/mekara.star (project)",
        },
    ]);
}

#[test]
fn a_skill_shows_the_description_from_its_front_matter() {
    let project = Project::new();
    project.write(
        ".agents/skills/team/deploy/SKILL.md",
        "---\nname: deploy\ndescription: Deploy the app to staging\n---\n\n# Deploy\n\nShip it.\n",
    );
    project.write(
        ".agents/skills/team/deploy/mekara.star",
        "def execute(request):\n    llm(\"Ship it.\")\n",
    );
    let run = project.run(&["scripts", "show", "team/deploy"], "");
    run.expect_code(0);
    insta::assert_snapshot!("show_nested_skill", project.scrub(&run.stdout));
}

#[test]
fn a_compiled_file_without_its_nl_file_is_not_a_script() {
    let project = Project::new();
    build(
        &project,
        &[
            "project/.mekara/scripts/compiled/orphan.star",
            "project/.agents/skills/lonely/mekara.star",
        ],
    );
    for name in ["orphan", "lonely"] {
        let run = project.run(&["scripts", "show", name], "");
        run.expect_code(2);
        assert!(
            run.stderr.contains(&format!("script `{name}` not found")),
            "{}",
            run.stderr
        );
    }
}

#[test]
fn refused_names_exit_2_with_the_reason() {
    let project = Project::new();
    // Files a name would reach if it were joined to `.mekara/scripts/nl/` unchecked, so a
    // refusal cannot be mistaken for "not found".
    build(
        &project,
        &[
            "project/.mekara/scripts/etc/passwd.md",
            "project/.mekara/scripts/nl/b.md",
            "project/.mekara/scripts/nl/a/b.md",
            "project/.mekara/scripts/nl/.hidden.md",
        ],
    );
    let cases = [
        ("../etc/passwd", "`.` and `..` are not allowed in a name"),
        ("a/../b", "`.` and `..` are not allowed in a name"),
        ("a:..:b", "`.` and `..` are not allowed in a name"),
        ("/abs", "a name cannot start with `/` or `:`"),
        (":abs", "a name cannot start with `/` or `:`"),
        ("a//b", "a name cannot have an empty part"),
        ("a/", "a name cannot have an empty part"),
        (".hidden", "a part of a name cannot start with `.`"),
        ("a/.git", "a part of a name cannot start with `.`"),
        (
            "a b",
            "` ` is not allowed; use letters, digits, `-`, `_`, `.` and `/`",
        ),
        ("a\\b", "`\\\\` is not allowed"),
        ("~/x", "`~` is not allowed"),
        ("", "the name is empty"),
        ("   ", "the name is empty"),
    ];
    let mut failures = Vec::new();
    for (name, reason) in cases {
        let run = project.run(&["scripts", "show", name], "");
        let want = format!("error: invalid script name `{name}`: {reason}");
        if run.code != Some(2) || !run.stderr.starts_with(&want) || !run.stdout.is_empty() {
            failures.push(format!(
                "{name:?}: want exit 2 and stderr starting {want:?}\n  got exit {:?}, stdout {:?}, stderr {:?}",
                run.code, run.stdout, run.stderr
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn refused_name_messages() {
    let project = Project::new();
    for (snapshot, name) in [
        ("refused_dotdot", "../etc/passwd"),
        ("refused_absolute", "/abs"),
        ("refused_space", "a b"),
        ("refused_empty", ""),
    ] {
        let run = project.run(&["scripts", "show", name], "");
        run.expect_code(2);
        insta::assert_snapshot!(snapshot, run.stderr);
    }
}

#[test]
fn refused_names_are_refused_by_run_too() {
    let project = Project::new();
    build(&project, &["project/.mekara/scripts/etc/passwd.md"]);
    mekara_snapshot!(project, project.run(&["run", "../etc/passwd"], "\n"));
    assert!(project.run_ids().is_empty(), "a refused name starts no run");
}

#[test]
fn unknown_names_suggest_the_closest() {
    let project = Project::new();
    build(
        &project,
        &[
            "project/.agents/skills/team/deploy/SKILL.md",
            "home/.mekara/scripts/nl/foo-bar.md",
        ],
    );
    let cases = [
        ("tset/random", "did you mean `test:random`?"),
        ("test:randon", "did you mean `test:random`?"),
        ("random", "did you mean `test:random`?"),
        ("team:deplyo", "did you mean `team:deploy`?"),
        ("foo_bar", "did you mean `foo-bar`?"),
        (
            "zzzzzzzzzzzz",
            "`mekara scripts` lists the scripts there are",
        ),
    ];
    let mut failures = Vec::new();
    for (name, hint) in cases {
        let run = project.run(&["scripts", "show", name], "");
        let want = format!("error: script `{name}` not found; {hint}\n");
        if run.code != Some(2) || run.stderr != want || !run.stdout.is_empty() {
            failures.push(format!(
                "{name:?}: want exit 2 and stderr {want:?}\n  got exit {:?}, stdout {:?}, stderr {:?}",
                run.code, run.stdout, run.stderr
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn unknown_name_messages() {
    let project = Project::new();
    for (snapshot, name) in [
        ("unknown_typo", "tset/random"),
        ("unknown_far", "nothing-like-this"),
    ] {
        let run = project.run(&["scripts", "show", name], "");
        run.expect_code(2);
        insta::assert_snapshot!(snapshot, run.stderr);
    }
}

#[test]
fn run_follows_the_same_resolution_as_show() {
    // The project's NL file shadows the bundled `test:random`; the bundled compiled file must
    // not run for it, so the run hands over the project's instructions instead.
    let project = Project::new();
    project.script(
        "test/random",
        "---\ndescription: the project's own game\n---\n\nPick a colour.\n",
        None,
    );
    // It shadows a bundled name, so it runs on the person's word (`shadowing` tests that).
    let run = mekara_snapshot!(
        project,
        project.run(&["run", "--project-script", "test:random"], "\n")
    );
    assert!(
        !run.stdout.contains("shuf"),
        "the bundled compiled script ran:\n{}",
        run.stdout
    );
}

/// The `mekara scripts` rows as `(name, level, kind)`.
fn listing_rows(stdout: &str) -> Vec<(String, String, String)> {
    stdout
        .lines()
        .skip(1)
        .map(|line| {
            let mut cols = line.split_whitespace();
            let mut next = || cols.next().unwrap_or_default().to_string();
            (next(), next(), next())
        })
        .collect()
}

#[test]
fn scripts_lists_every_level_once_at_the_winning_level() {
    let project = Project::new();
    build(
        &project,
        &[
            // shadows the bundled test:random; the bundled compiled file does not pair
            "project/.mekara/scripts/nl/test/random.md",
            // at both project and user: listed once, as project
            "project/.mekara/scripts/nl/shared.md",
            "home/.mekara/scripts/nl/shared.md",
            // a user NL paired with a project compiled file
            "home/.mekara/scripts/nl/test/imagine-object.md",
            "project/.mekara/scripts/compiled/test/imagine-object.star",
            // user scripts of both layouts
            "home/.mekara/scripts/nl/tools/lint.md",
            "home/.mekara/scripts/compiled/tools/lint.star",
            "home/.agents/skills/notes/SKILL.md",
            // a nested project skill with its compiled file
            "project/.agents/skills/team/deploy/SKILL.md",
            "project/.agents/skills/team/deploy/mekara.star",
            // a project NL file not paired with a user compiled one
            "project/.mekara/scripts/nl/solo.md",
            "home/.mekara/scripts/compiled/solo.star",
        ],
    );
    // `--all`: the bundled demos (`test:*`) take part in the levels too.
    let run = project.run(&["scripts", "--all"], "");
    run.expect_code(0);
    let rows = listing_rows(&run.stdout);
    let want = [
        ("compile", "bundled", "compiled"),
        ("flow:bisect", "bundled", "compiled"),
        ("flow:commit", "bundled", "compiled"),
        ("flow:docs-sync", "bundled", "compiled"),
        ("flow:fix-ci", "bundled", "compiled"),
        ("flow:pr", "bundled", "compiled"),
        ("flow:release", "bundled", "compiled"),
        ("flow:review", "bundled", "compiled"),
        ("flow:test-gaps", "bundled", "compiled"),
        ("flow:triage", "bundled", "compiled"),
        ("flow:upgrade-deps", "bundled", "compiled"),
        ("notes", "user", "nl"),
        ("shared", "project", "nl"),
        ("solo", "project", "nl"),
        ("systematize", "bundled", "nl"),
        ("team:deploy", "project", "compiled"),
        ("test:double-or-nothing", "bundled", "compiled"),
        ("test:imagine-object", "user", "compiled"),
        ("test:nested", "bundled", "compiled"),
        ("test:random", "project", "nl"),
        ("tools:lint", "user", "compiled"),
    ];
    let want: Vec<(String, String, String)> = want
        .iter()
        .map(|(a, b, c)| ((*a).to_string(), (*b).to_string(), (*c).to_string()))
        .collect();
    assert_eq!(rows, want, "{}", run.stdout);
    insta::assert_snapshot!("scripts_listing", project.scrub(&run.stdout));
}

#[test]
fn scripts_lists_the_bundled_scripts_in_an_empty_project() {
    let project = Project::new();
    let run = project.run(&["scripts"], "");
    run.expect_code(0);
    insta::assert_snapshot!("scripts_listing_bundled_only", run.stdout);
}

#[test]
fn scripts_from_a_home_subfolder_lists_home_scripts_as_user() {
    let project = Project::new();
    build(
        &project,
        &[
            "home/.claude/",
            "home/.mekara/scripts/nl/mine.md",
            "home/code/app/",
        ],
    );
    let run = mekara_in(&project, "home/code/app", &["scripts"]);
    run.expect_code(0);
    let rows = listing_rows(&run.stdout);
    assert!(
        rows.contains(&("mine".to_string(), "user".to_string(), "nl".to_string())),
        "{}",
        run.stdout
    );
}

#[cfg(unix)]
#[test]
fn home_reached_through_a_symlink_is_never_a_project_root() {
    // On systems where /home is a symlink (FreeBSD's /usr/home, Fedora Silverblue's
    // /var/home), HOME and the current directory spell the same folder differently.
    let project = Project::new();
    let tmp = project.dir.path();
    build(
        &project,
        &[
            "realhome/.claude/",
            "realhome/.mekara/scripts/nl/mine.md",
            "realhome/code/app/",
        ],
    );
    std::fs::remove_dir(tmp.join("home")).expect("rmdir home");
    std::os::unix::fs::symlink(tmp.join("realhome"), tmp.join("home")).expect("symlink home");
    let run = mekara_in(&project, "home/code/app", &["scripts", "show", "mine"]);
    run.expect_code(0);
    let (_, nl, _) = show_lines(&project, &run);
    assert!(
        nl.ends_with("/.mekara/scripts/nl/mine.md (user)"),
        "home's scripts shown as {nl}"
    );
}

/// Regression (the first hour of a real user): a compiled file with no NL file beside it
/// was invisible: `mekara run orphan` said only "not found", and `mekara check` skipped it,
/// even with a syntax error.
#[test]
fn a_compiled_file_without_its_nl_file_is_reported() {
    let project = Project::new();
    project.write(
        ".mekara/scripts/compiled/orphan.star",
        "def execute(request):\n    x = = 1\n",
    );
    project.write(
        ".agents/skills/skill-orphan/mekara.star",
        "def execute(request):\n    pass\n",
    );
    mekara_snapshot!("orphan_check", project, project.command(&["check"]));
    mekara_snapshot!(
        "orphan_check_by_name",
        project,
        project.command(&["check", "orphan"])
    );
    mekara_snapshot!("orphan_run", project, project.command(&["run", "orphan"]));
}

/// A compiled file paired with an NL file at a lower level is no orphan: it runs.
#[test]
fn a_compiled_file_with_its_nl_file_at_the_user_level_is_no_orphan() {
    let project = Project::new();
    project.write(
        ".mekara/scripts/compiled/paired.star",
        "def execute(request):\n    pass\n",
    );
    write_file(
        &project.home().join(".mekara/scripts/nl/paired.md"),
        "Do it.\n",
    );
    let run = project.run(&["check"], "");
    run.expect_code(0);
    assert!(!run.stdout.contains("beside it"), "{}", run.stdout);
}

/// Regression (the first hour of a real user): `mekara run hello.md` and `mekara check
/// path/to/file.star` said only "not found". A path inside a scripts folder means the
/// script there; a `.star` file is checked as it is; any other path gets what to type.
#[test]
fn a_path_where_a_name_goes_means_the_script_or_says_what_to_type() {
    let project = Project::new();
    project.script(
        "hello",
        "Say hello.\n",
        Some("def execute(request):\n    auto(\"echo hello\")\n"),
    );
    mekara_snapshot!(
        project,
        project.run(&["run", ".mekara/scripts/nl/hello.md"], "")
    );
    let check = project.run(&["check", ".mekara/scripts/compiled/hello.star"], "");
    check.expect_code(0);
    project.write("hello.md", "Say hello.\n");
    project.write("loose.star", "def execute():\n    pass\n");
    mekara_snapshot!(
        "path_run_loose_md",
        project,
        project.command(&["run", "hello.md"])
    );
    mekara_snapshot!(
        "path_check_loose_star",
        project,
        project.command(&["check", "loose.star"])
    );
}

/// Outside any project, "script `deploy` not found" gave no clue that mekara had looked for
/// no project at all: it names the folder it searched from, the levels it searched, and
/// (the CLI's hint) what to do.
#[test]
fn not_found_outside_a_project_says_where_it_looked() {
    let project = Project::new();
    project.script(
        "deploy",
        "Deploy.\n",
        Some("def execute(request):\n    pass\n"),
    );
    let elsewhere = project.dir.path().join("elsewhere/sub");
    std::fs::create_dir_all(&elsewhere).expect("mkdir");
    mekara_snapshot!(
        "not_found_outside_run",
        project,
        project.command_in(&elsewhere, &["run", "deploy"])
    );
    mekara_snapshot!(
        "not_found_outside_check",
        project,
        project.command_in(&elsewhere, &["check", "deploy"])
    );
    // A close bundled name is still suggested.
    let typo = mekara_in(
        &project,
        "elsewhere/sub",
        &["scripts", "show", "tset/random"],
    );
    typo.expect_code(2);
    assert!(
        typo.stderr.contains("did you mean `test:random`?")
            && typo.stderr.contains("no `.mekara/` or `.claude/` folder"),
        "{}",
        typo.stderr
    );
    // Inside the project, the message is the usual one.
    let inside = project.run(&["run", "nothing-like-this"], "");
    inside.expect_code(2);
    assert!(!inside.stderr.contains(".claude/"), "{}", inside.stderr);
}

/// Regression: a link in a scripts folder back to a folder above it (a cloned repository can
/// hold one) made `mekara scripts` run forever. Each real folder is listed once.
#[test]
fn a_link_loop_in_a_scripts_folder_is_listed_once() {
    let project = Project::new();
    project.script("real", "---\ndescription: Real\n---\nDo it.\n", None);
    let nl = project.root().join(".mekara/scripts/nl");
    std::os::unix::fs::symlink("..", nl.join("up")).expect("link");
    std::os::unix::fs::symlink(".", nl.join("here")).expect("link");
    std::fs::create_dir_all(nl.join("team")).expect("mkdir");
    std::os::unix::fs::symlink("../team", nl.join("team/again")).expect("link");
    let mut child = project
        .command(&["scripts"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("`mekara scripts` still lists after 30 s: the walk does not end");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let run = Run::from_output(child.wait_with_output().expect("output"));
    run.expect_code(0);
    let listed: Vec<&str> = run
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| name.contains("real"))
        .collect();
    assert_eq!(listed, ["real"], "{}", run.stdout);
    assert!(
        run.stderr
            .contains("a link to a folder that is listed already"),
        "{}",
        run.stderr
    );
}

/// Regressions: `mekara check` listed orphans before the other scripts, and said "1 of N
/// scripts have errors".
#[test]
fn check_lists_orphans_among_the_scripts_by_name_and_counts_in_words() {
    let project = Project::new();
    project.script("alpha", "A.\n", Some("def execute(request):\n    pass\n"));
    project.write(
        ".mekara/scripts/compiled/beta.star",
        "def execute(request):\n    pass\n",
    );
    project.script("gamma", "G.\n", Some("def execute(request):\n    pass\n"));
    let run = project.run(&["check"], "");
    run.expect_code(1);
    let out = project.scrub(&run.stdout);
    let at = |what: &str| {
        out.find(what)
            .unwrap_or_else(|| panic!("no {what} in:\n{out}"))
    };
    assert!(at("alpha: ok") < at("beta: [PROJECT]"), "{out}");
    assert!(at("beta: [PROJECT]") < at("compile: ok"), "{out}");
    assert!(at("compile: ok") < at("gamma: ok"), "{out}");
    assert!(out.ends_with("\n1 of 14 scripts has errors\n"), "{out}");

    project.script("delta", "D.\n", Some("def execute(:\n"));
    let run = project.run(&["check"], "");
    assert!(
        run.stdout.ends_with("\n2 of 15 scripts have errors\n"),
        "{}",
        run.stdout
    );
}
