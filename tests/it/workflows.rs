//! The bundled workflow scripts (`/compile`, `/systematize`) and `mekara scripts eject`.

use std::path::Path;

use crate::common::{Project, Run, run_with_stdin};

const SCRIPT_API: &str = include_str!("../../docs/script-api.md");

/// `mekara ARGS` with the binary under test on `PATH`, as `/compile`'s shell steps call it.
fn mekara(project: &Project, args: &[&str], stdin: &str) -> Run {
    let bin = Path::new(env!("CARGO_BIN_EXE_mekara"))
        .parent()
        .expect("folder");
    let mut cmd = project.command(args);
    cmd.env("PATH", format!("{}:/usr/bin:/bin", bin.display()));
    run_with_stdin(cmd, stdin)
}

#[test]
fn the_script_api_section_of_docs_scripts_md_is_docs_script_api_md() {
    let reference = include_str!("../../docs/scripts.md");
    let start = reference
        .find("<!-- script-api:")
        .and_then(|at| reference[at..].find('\n').map(|nl| at + nl + 1))
        .expect("docs/scripts.md marks the start of the script API section");
    let end = reference.find("<!-- /script-api -->").expect("and its end");
    assert_eq!(
        &reference[start..end],
        SCRIPT_API,
        "docs/scripts.md's script API section differs from docs/script-api.md: change the docs \
         file and copy it into docs/scripts.md"
    );
}

#[test]
fn compile_shows_the_script_api_from_the_docs() {
    let project = Project::new();
    // Ejected, the bundled script's NL file is in the project as mekara has it.
    mekara(&project, &["scripts", "eject", "compile"], "").expect_code(0);
    let nl = std::fs::read_to_string(project.root().join(".mekara/scripts/nl/compile.md"))
        .expect("ejected");
    assert!(nl.ends_with(&format!("## The script API\n\n{SCRIPT_API}")));
}

#[test]
fn compile_checks_the_written_script_and_completes() {
    let project = Project::new();
    project.script(
        "hello",
        "1. Run `echo hi`.\n",
        Some("def execute(request):\n    auto(\"echo hi\", context = \"Step 1\")\n"),
    );
    let run = mekara(&project, &["run", "compile", "hello"], "\n\n\n");
    run.expect_code(0);
    let out = &run.stdout;
    assert!(out.contains("$ mekara scripts show hello"), "{out}");
    assert!(
        out.contains("Steps 2 and 3: read the NL file shown above"),
        "{out}"
    );
    assert_eq!(out.matches("; mekara check hello").count(), 1, "{out}");
    assert!(out.contains("hello: ok"), "{out}");
    assert!(out.contains("Step 5: try the compiled script"), "{out}");
    assert!(out.contains("completed"), "{out}");
}

#[test]
fn compile_asks_for_fixes_then_falls_back_with_the_api() {
    let project = Project::new();
    project.script(
        "hello",
        "1. Run `echo hi`.\n",
        Some("def execute(request):\n    auto(\n"),
    );
    let run = mekara(&project, &["run", "compile", "hello"], &"\n".repeat(10));
    let out = &run.stdout;
    assert_eq!(out.matches("; mekara check hello").count(), 5, "{out}");
    assert_eq!(
        out.matches("Step 4: the check above failed.").count(),
        5,
        "{out}"
    );
    assert!(
        out.contains("still fails its check after 5 attempts"),
        "{out}"
    );
    // The fallback hands over the NL instructions, the script API included.
    assert!(out.contains("| `llm(prompt, *, expects)` |"), "{out}");
}

#[test]
fn compile_refuses_a_name_that_is_not_a_script_name() {
    let project = Project::new();
    let run = mekara(&project, &["run", "compile", "x; rm -rf /"], "\n");
    let out = &run.stdout;
    assert!(out.contains("`x; rm -rf /` is not a script name"), "{out}");
    assert!(!out.contains("$ mekara scripts show"), "{out}");
}

#[test]
fn systematize_is_an_nl_script() {
    let project = Project::new();
    let run = mekara(&project, &["scripts", "show", "systematize"], "");
    run.expect_code(0);
    assert!(run.stdout.contains("compiled: none"), "{}", run.stdout);
}

#[test]
fn eject_copies_a_bundled_script_and_the_copy_wins() {
    let project = Project::new();
    let run = mekara(&project, &["scripts", "eject", "test:random"], "");
    run.expect_code(0);
    insta::assert_snapshot!(run.stdout);
    let nl = project.root().join(".mekara/scripts/nl/test/random.md");
    assert_eq!(
        std::fs::read_to_string(&nl).expect("copied"),
        include_str!("../../scripts/nl/test/random.md")
    );
    let show = mekara(&project, &["scripts", "show", "test:random"], "");
    assert!(show.stdout.contains("(project)"), "{}", show.stdout);
    assert!(!show.stdout.contains("(bundled)"), "{}", show.stdout);

    // No overwrite without --force, and nothing written on refusal.
    std::fs::write(&nl, "Mine.\n").expect("write");
    std::fs::remove_file(
        project
            .root()
            .join(".mekara/scripts/compiled/test/random.star"),
    )
    .expect("rm");
    let refused = mekara(&project, &["scripts", "eject", "test/random"], "");
    refused.expect_code(2);
    insta::assert_snapshot!(project.scrub(&refused.stderr));
    assert_eq!(std::fs::read_to_string(&nl).expect("kept"), "Mine.\n");
    assert!(
        !project
            .root()
            .join(".mekara/scripts/compiled/test/random.star")
            .exists()
    );

    mekara(
        &project,
        &["scripts", "eject", "--force", "test/random"],
        "",
    )
    .expect_code(0);
    assert_ne!(std::fs::read_to_string(&nl).expect("read"), "Mine.\n");
}

#[test]
fn eject_refuses_names_that_are_not_bundled() {
    let project = Project::new();
    project.script("mine", "Mine.\n", None);
    for name in ["mine", "../etc", "nope"] {
        let run = mekara(&project, &["scripts", "eject", name], "");
        run.expect_code(2);
        insta::assert_snapshot!(
            format!("eject_refused_{}", name.replace(['.', '/'], "_")),
            run.stderr
        );
    }
}

/// An NL script that uses `$ARGUMENTS` twice.
const TWICE: &str =
    "---\ndescription: Greet twice\n---\nGreet $ARGUMENTS. Then say goodbye to $ARGUMENTS.\n";

/// Regression: only the first `$ARGUMENTS` of an NL script was replaced; Claude Code replaces
/// every one. `mekara run` of an NL script shows the instructions with all of them replaced.
#[test]
fn run_replaces_every_arguments_placeholder() {
    let project = Project::new();
    project.script("twice", TWICE, None);
    let run = mekara_snapshot!(
        project,
        project.run(&["run", "twice", "the \"team\""], "\n")
    );
    assert!(!run.stdout.contains("$ARGUMENTS"), "{}", run.stdout);
}

/// `/systematize`'s instructions speak of the placeholder itself: replacing every one must
/// not put the user's arguments where the placeholder is explained.
#[test]
fn systematize_still_explains_the_placeholder() {
    let project = Project::new();
    let run = mekara_snapshot!(
        project,
        project.run(&["run", "systematize", "deploy-docs"], "\n")
    );
    assert_eq!(
        run.stdout.matches("deploy-docs").count(),
        1,
        "{}",
        run.stdout
    );
}

/// Regression: eject wrote through symbolic links, and `--force` overwrote a link's target
/// outside the project.
#[test]
fn eject_refuses_to_write_through_a_symbolic_link() {
    let outside_of = |project: &Project| project.dir.path().join("outside");
    // The link: where it sits, and whether it points at a file there already.
    for (link, to_a_file, target_is_there, what) in [
        (
            ".mekara/scripts/nl/test/random.md",
            true,
            true,
            "the NL file",
        ),
        (
            ".mekara/scripts/nl/test/random.md",
            true,
            false,
            "a dangling link",
        ),
        (
            ".mekara/scripts/compiled/test/random.star",
            true,
            true,
            "the compiled file",
        ),
        (".mekara/scripts/nl", false, true, "a folder on the way"),
        (".mekara", false, true, "the .mekara folder"),
    ] {
        let project = Project::new();
        let outside = outside_of(&project);
        let link_path = project.root().join(link);
        if link == ".mekara" {
            std::fs::remove_dir_all(&link_path).expect("rm");
        }
        std::fs::create_dir_all(link_path.parent().expect("parent")).expect("mkdir");
        let target = if to_a_file {
            outside.join("victim.txt")
        } else {
            outside.clone()
        };
        if target_is_there {
            if target == outside {
                std::fs::create_dir_all(&outside).expect("mkdir");
            } else {
                crate::common::write_file(&target, "precious\n");
            }
        }
        std::os::unix::fs::symlink(&target, &link_path).expect("symlink");
        for args in [
            &["scripts", "eject", "test:random"][..],
            &["scripts", "eject", "--force", "test:random"][..],
        ] {
            let run = mekara(&project, args, "");
            run.expect_code(2);
            assert_eq!(
                project.scrub(&run.stderr),
                format!(
                    "error: `[PROJECT]/{link}` is a symbolic link; mekara does not write through links (it could change a file outside the project): remove the link, or eject in a project without it\n"
                ),
                "{what}, {args:?}"
            );
        }
        if target_is_there && target != outside {
            assert_eq!(
                std::fs::read_to_string(&target).expect("kept"),
                "precious\n",
                "{what}"
            );
        } else if target == outside {
            let written: Vec<_> = walk(&outside);
            assert!(written.is_empty(), "{what}: {written:?}");
        } else {
            assert!(!target.exists(), "{what}: the link's target was created");
        }
    }
}

/// The files under `dir`, at any depth.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}

/// `mekara run compile NAME` answering every llm step with Enter (the agent writes nothing):
/// the transcript, scrubbed.
fn compile_writing_nothing(project: &Project, name: &str) -> String {
    let run = mekara(project, &["run", "compile", name], &"\n".repeat(12));
    project.scrub(&run.stdout)
}

/// Regression: the check loop passed ("NL only, nothing to check") when no compiled script
/// had been written, and went on to the trial run.
#[test]
fn compile_does_not_pass_when_no_compiled_script_was_written() {
    let project = Project::new();
    project.script("hello", "1. Run `echo hi`.\n", None);
    let out = compile_writing_nothing(&project, "hello");
    assert_eq!(
        out.matches(
            "│ no compiled script at [PROJECT]/.mekara/scripts/compiled/hello.star: write it there"
        )
        .count(),
        5,
        "{out}"
    );
    assert!(!out.contains("hello: NL only, nothing to check"), "{out}");
    assert!(
        out.contains("still fails its check after 5 attempts"),
        "{out}"
    );
    assert!(!out.contains("Step 5: try"), "{out}");
    // Regression: the fallback's script API held a real prompt tag, which called a tool.
    assert!(!out.contains("[use-mcp] tag"), "{out}");
}

/// Regression: the prompt said `scripts/compiled/NAME.star`, without `.mekara/`, so an agent
/// could write the file where mekara never looks. The prompt names the one path, and a file
/// anywhere else does not pass.
#[test]
fn compile_names_the_exact_path_and_only_that_file_passes() {
    let project = Project::new();
    project.script("hello", "1. Run `echo hi`.\n", None);
    let star = "def execute(request):\n    auto(\"echo hi\", context = \"Step 1\")\n";
    project.write("scripts/compiled/hello.star", star);
    let out = compile_writing_nothing(&project, "hello");
    assert!(
        out.contains(
            "write its compiled script to exactly `[PROJECT]/.mekara/scripts/compiled/hello.star`"
        ),
        "{out}"
    );
    assert!(
        out.contains("│ no compiled script at [PROJECT]/.mekara/"),
        "{out}"
    );

    // A user's script: beside it, in `~/.mekara`.
    let user = Project::new();
    crate::common::write_file(
        &user.home().join(".mekara/scripts/nl/mine.md"),
        "1. Run `echo hi`.\n",
    );
    let out = compile_writing_nothing(&user, "mine");
    assert!(
        out.contains("to exactly `[HOME]/.mekara/scripts/compiled/mine.star`"),
        "{out}"
    );

    // An Agent Skill: `mekara.star` beside its `SKILL.md`.
    let skills = Project::new();
    skills.write(".agents/skills/tidy/SKILL.md", "1. Run `echo hi`.\n");
    let out = compile_writing_nothing(&skills, "tidy");
    assert!(
        out.contains("to exactly `[PROJECT]/.agents/skills/tidy/mekara.star`"),
        "{out}"
    );

    // A bundled script is compiled in the project, once ejected.
    let bundled = Project::new();
    let out = compile_writing_nothing(&bundled, "systematize");
    assert!(
        out.contains("`systematize` is a bundled script: run `mekara scripts eject systematize`"),
        "{out}"
    );
}

#[test]
fn compile_passes_with_the_file_in_place_and_tries_it_where_effects_are_safe() {
    let project = Project::new();
    project.script(
        "hello",
        "1. Run `echo hi`.\n",
        Some("def execute(request):\n    auto(\"echo hi\", context = \"Step 1\")\n"),
    );
    let out = compile_writing_nothing(&project, "hello");
    assert!(out.contains("hello: ok"), "{out}");
    assert!(!out.contains("│ no compiled script"), "{out}");
    // Regression: the trial ran in the user's project, and each "try again" stacked its
    // effects on the last.
    let trial = out
        .split("Step 5: ")
        .nth(1)
        .unwrap_or_else(|| panic!("no trial step:\n{out}"));
    for words in [
        "where its effects are safe",
        "scratch copy",
        // Issue 28: a worktree shares the user's tags; a script that tags gets a clone with
        // no remote, and the uncommitted compiled script goes into it.
        "A `git worktree` shares the user's repository",
        "use a clone with no remote",
        "copy the compiled script",
        "Never let a trial push or publish",
        "doing each of its steps in the scratch copy, not in the project",
        r#""working_dir""#,
        "undo every change the trial made before trying again",
    ] {
        assert!(
            trial.contains(words),
            "`{words}` is not in step 5:\n{trial}"
        );
    }
}

/// `/compile` over MCP from a mekara that is not on `PATH` (a plugin's, `npx`'s, a wheel's):
/// its shell steps still find it, and the run reaches the check, which passes.
#[tokio::test]
async fn compile_over_mcp_reaches_its_check_with_mekara_not_on_path() {
    let project = Project::new();
    project.script(
        "hello",
        "1. Run `echo hi`.\n",
        Some("def execute(request):\n    auto(\"echo hi\", context = \"Step 1\")\n"),
    );
    let client =
        crate::mcp::client::Client::start(&project, &[("PATH", Path::new("/usr/bin:/bin"))]).await;
    let started = client
        .call(
            "start",
            serde_json::json!({"name": "compile", "arguments": "hello"}),
        )
        .await
        .ok();
    assert!(!started.contains("command not found"), "{started}");
    assert!(started.contains("hello.star"), "{started}");
    let checked = client.continue_with(serde_json::json!({})).await.ok();
    assert!(checked.contains("hello: ok"), "{checked}");
}

/// A decision the NL script leaves to the person, compiled into an `llm` step, would be made
/// by an unattended run's agent alone: `mekara check` says so (the script still passes), and
/// says nothing of the same decision written as an `ask`.
#[test]
fn check_warns_of_an_llm_step_that_asks_the_person_and_not_of_an_ask() {
    let project = Project::new();
    project.script(
        "release",
        "1. Show the changelog.\n2. Ask the user to confirm the release.\n",
        Some(
            "def execute(request):\n    \
             auto(\"cat CHANGELOG.md\", context = \"Step 1: show the changelog\")\n    \
             llm(\"Step 2: Ask the user to confirm the release.\")\n",
        ),
    );
    project.script(
        "asked",
        "1. Ask the user to confirm the release.\n",
        Some(
            "def execute(request):\n    \
             a = ask(\"Release it?\", choices = [\"yes\", \"no\"])\n    \
             if a.answer != \"yes\":\n        fail(\"not confirmed\")\n",
        ),
    );
    let run = mekara(&project, &["check"], "");
    run.expect_code(0);
    let out = &run.stdout;
    assert!(out.contains("release: ok"), "{out}");
    assert!(
        out.contains("release.star:3: this `llm` step's prompt asks the person (\"ask the user\"): unattended there is no person, and the agent would answer alone")
            && out.contains("hint: a question, confirmation or choice for the user is an `ask(question, choices = [...])` step"),
        "{out}"
    );
    assert_eq!(out.matches("warning:").count(), 1, "{out}");
}

/// What failed only at run time, after earlier steps had changed things (issue 28): a field a
/// step's result does not have, an output its `expects` does not name. `mekara check` reports
/// each at its line and column with what was meant; a name bound to something else is left
/// alone.
#[test]
fn check_finds_a_missing_result_field_and_an_output_not_expected() {
    let project = Project::new();
    project.script(
        "release",
        "1. Look at the last commit.\n2. Write the entry.\n3. Ask to go on.\n",
        Some(
            "def execute(request):\n    \
             r = auto(\"git log -1\")\n    \
             print(r.ouput)\n    \
             e = llm(\"Step 2: write the entry.\", expects = {\"entry\": \"the entry\"})\n    \
             auto(\"echo \" + e.outputs[\"entyr\"])\n    \
             a = ask(\"Go on?\", choices = [\"yes\", \"no\"])\n    \
             if a.anwser == \"yes\":\n        \
             print(e.outputs[\"entry\"] + a.answer + r.output)\n    \
             r = struct(ouput = 1)\n    \
             print(r.ouput)\n",
        ),
    );
    let run = mekara(&project, &["check", "release"], "");
    run.expect_code(1);
    let out = &run.stdout;
    for (said, at, hint) in [
        (
            "`r` is what `auto` returned on line 2, which has no field `ouput`",
            "release.star:3:13",
            "did you mean `output`?",
        ),
        (
            "`e.outputs` has no `entyr`: the llm step on line 4 expects `entry`",
            "release.star:5:30",
            "did you mean `entry`?",
        ),
        (
            "The attribute `anwser` is not available on the type `ask_result`",
            "release.star:7:10",
            "did you mean `answer`?",
        ),
    ] {
        assert!(
            out.contains(&format!("error: {said}"))
                && out.contains(at)
                && out.contains(&format!("hint: {hint}")),
            "{said}:\n{out}"
        );
    }
    assert_eq!(out.matches("error:").count(), 3, "{out}");
}

/// The error block of `mekara check`'s output that says `message`: from its `error:` line
/// to the next one.
fn error_block<'a>(out: &'a str, message: &str) -> &'a str {
    let start = out
        .find(&format!("error: {message}\n"))
        .unwrap_or_else(|| panic!("no `error: {message}`:\n{out}"));
    let rest = &out[start + 1..];
    let end = rest.find("\nerror: ").map_or(out.len(), |e| start + 1 + e);
    &out[start..end]
}

/// Issue 28: each step builtin's result has a type starlark's typechecker knows, so
/// `mekara check` reports its misuse at `file:line:col` (a string field added to a number,
/// a misspelled field of each builtin's result, a result passed where an `int` is declared,
/// a method its field's type does not have, a comparison that can never hold), with the
/// field meant.
#[test]
fn check_reports_misuse_of_each_step_result_by_its_type() {
    let project = Project::new();
    project.write(
        ".mcp.json",
        r#"{"mcpServers": {"files": {"command": "true"}}}"#,
    );
    project.script("helper", "1. Help.\n", None);
    project.script(
        "typed",
        "1. Do it all.\n",
        Some(
            "def execute(request):\n    \
             r = auto(\"git log -1\")\n    \
             n = r.output + 1\n    \
             print(r.ouput)\n    \
             f = auto(say, {\"message\": \"hi\"})\n    \
             print(f.valeu)\n    \
             e = llm(\"Write it.\", expects = [\"entry\"])\n    \
             print(e.outptus)\n    \
             a = ask(\"Go on?\")\n    \
             print(a.anser)\n    \
             c = call_script(\"helper\")\n    \
             print(c.sucess)\n    \
             m = mcp(\"files\", \"read\", {})\n    \
             print(m.contetn)\n    \
             double(r)\n    \
             r.exit_code.upper()\n    \
             if r.success == \"yes\":\n        \
             print(n)\n    \
             if r.output < 1:\n        \
             print(n)\n\n\
             def say(message):\n    \
             print(message)\n\n\
             def double(n: int) -> int:\n    \
             return n * 2\n",
        ),
    );
    let run = project.run(&["check", "typed"], "");
    run.expect_code(1);
    let out = &run.stdout;
    for (said, at, hint) in [
        (
            "Binary operator `+` is not available on the types `str` and `int`",
            "typed.star:3:9",
            Some("convert one side: `str(x)` to join text, or `int(s.strip())` to add numbers"),
        ),
        (
            "The attribute `ouput` is not available on the type `auto_result`",
            "typed.star:4:13",
            Some("did you mean `output`?"),
        ),
        (
            "The attribute `valeu` is not available on the type `auto_result`",
            "typed.star:6:13",
            Some("did you mean `value`?"),
        ),
        (
            "The attribute `outptus` is not available on the type `llm_result`",
            "typed.star:8:13",
            Some("did you mean `outputs`?"),
        ),
        (
            "The attribute `anser` is not available on the type `ask_result`",
            "typed.star:10:13",
            Some("did you mean `answer`?"),
        ),
        (
            "The attribute `sucess` is not available on the type `call_script_result`",
            "typed.star:12:13",
            Some("did you mean `success`?"),
        ),
        (
            "The attribute `contetn` is not available on the type `mcp_result`",
            "typed.star:14:13",
            Some("did you mean `content`?"),
        ),
        (
            "Expected type `int` but got `auto_result`",
            "typed.star:15:12",
            None,
        ),
        (
            "The attribute `upper` is not available on the type `None | int`",
            "typed.star:16:17",
            None,
        ),
        (
            "Expected type `bool` but got `str`",
            "typed.star:17:21",
            None,
        ),
        (
            "Binary operator `<` is not available on the types `str` and `int`",
            "typed.star:19:8",
            Some(
                "compare like with like: `int(s.strip())` to compare numbers, or `str(x)` to compare text",
            ),
        ),
    ] {
        let block = error_block(out, said);
        let location = block.lines().nth(1).unwrap_or_default();
        assert!(
            location.trim_start().starts_with("--> ") && location.ends_with(at),
            "{said}: at {at}?\n{block}"
        );
        match hint {
            Some(hint) => assert!(block.contains(&format!("\nhint: {hint}\n")), "{block}"),
            None => assert!(!block.contains("hint:"), "{block}"),
        }
    }
    assert_eq!(out.matches("error:").count(), 11, "{out}");
    // In the order of the source, whichever check found them.
    let lines: Vec<usize> = out
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("--> "))
        .filter_map(|at| at.rsplit(':').nth(1)?.parse().ok())
        .collect();
    assert!(lines.is_sorted() && lines.len() == 11, "{lines:?}\n{out}");
}

/// The typed results refuse no correct use: a result kept in a list, returned, given to
/// `json.encode`, compared with `None`, shown in an f-string or with `%`, its optional
/// fields used where they are set, its untyped values indexed.
#[test]
fn check_passes_every_correct_use_of_step_results() {
    let project = Project::new();
    project.write(
        ".mcp.json",
        r#"{"mcpServers": {"files": {"command": "true"}}}"#,
    );
    project.script(
        "uses",
        "1. Use them.\n",
        Some(
            "def execute(request):\n    \
             r = auto(\"echo 1\", allow_failure = True)\n    \
             f = auto(pick, {})\n    \
             g = llm(\"Say.\", expects = {\"a\": \"the a\"})\n    \
             a = ask(\"Go on?\")\n    \
             m = mcp(\"files\", \"read\", {})\n    \
             kept = [r, f, g, a, m]\n    \
             print(json.encode(r), r == None, None != g, f\"{r}\", \"%s\" % r, \"%s %s\" % (r, g))\n    \
             print(str(r), type(r) == \"struct\", getattr(r, \"output\"), hasattr(r, \"x\"), dir(r))\n    \
             n = int(r.output.strip()) + (r.exit_code or 0)\n    \
             print(n, \"said: \" + r.output, r.output + g.outputs[\"a\"], (r.error or \"\") + \"!\")\n    \
             print(f.value[\"k\"], m.structured, m.content.strip(), a.answer, kept)\n    \
             print(r.output < \"b\", r.output >= g.outputs[\"a\"], 1 <= len(r.output))\n    \
             if r.success and not m.is_error:\n        \
             return show(r)\n    \
             return r\n\n\
             def pick():\n    \
             return {\"k\": 1}\n\n\
             def show(result):\n    \
             return result.output\n",
        ),
    );
    let run = project.run(&["check", "uses"], "");
    run.expect_code(0);
    assert!(!run.stdout.contains("error:"), "{}", run.stdout);
}

/// A `call_script` of a script that does not resolve and an `mcp` call of a server
/// `.mcp.json` does not declare fail only when the run gets there (issue 28): `mekara check`
/// names both with their line; a script and a server that are there pass.
#[test]
fn check_names_a_called_script_and_a_server_that_are_not_there() {
    let project = Project::new();
    project.write(
        ".mcp.json",
        r#"{"mcpServers": {"files": {"command": "true"}}}"#,
    );
    project.script("helper", "1. Help.\n", None);
    project.script(
        "calls",
        "1. Call things.\n",
        Some(
            "def execute(request):\n    \
             call_script(\"helper\")\n    \
             call_script(\"helpr\")\n    \
             mcp(\"files\", \"read\", {})\n    \
             mcp(\"github\", \"issues\", {})\n",
        ),
    );
    let run = mekara(&project, &["check", "calls"], "");
    run.expect_code(1);
    let out = &run.stdout;
    assert!(
        out.contains("error: `call_script(\"helpr\", ...)` cannot run: script `helpr` not found")
            && out.contains("did you mean `helper`")
            && out.contains("calls.star:3\n"),
        "{out}"
    );
    assert!(
        out.contains("error: `mcp(\"github\", ...)` cannot run: no MCP server `github` in `.mcp.json`; it declares `files`")
            && out.contains("calls.star:5\n"),
        "{out}"
    );
    assert_eq!(out.matches("error:").count(), 2, "{out}");
}

/// The ten workflows of the library (`flow/*`), as `mekara scripts` names them.
const LIBRARY: [&str; 10] = [
    "flow:bisect",
    "flow:commit",
    "flow:docs-sync",
    "flow:fix-ci",
    "flow:pr",
    "flow:release",
    "flow:review",
    "flow:test-gaps",
    "flow:triage",
    "flow:upgrade-deps",
];

/// The row of `mekara scripts` that lists `name`.
fn listed_row<'a>(listed: &'a Run, name: &str) -> &'a str {
    listed
        .stdout
        .lines()
        .find(|l| l.starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("{name} is not listed:\n{}", listed.stdout))
}

#[test]
fn every_workflow_of_the_library_passes_check_and_is_listed_with_a_description() {
    let project = Project::new();
    let check = project.run(&["check"], "");
    check.expect_code(0);
    for name in LIBRARY {
        assert!(
            check.stdout.contains(&format!(
                "{name}: ok (bundled:compiled/{}.star)",
                name.replace(':', "/")
            )),
            "{name} is not checked ok:\n{}",
            check.stdout
        );
    }
    let listed = project.run(&["scripts"], "");
    listed.expect_code(0);
    for name in LIBRARY {
        let row = listed_row(&listed, name);
        let description = row.split("compiled").nth(1).unwrap_or_default().trim();
        assert!(description.len() > 20, "{name} has no description: {row}");
    }
}

#[test]
fn every_workflow_of_the_library_ejects_and_the_copy_is_the_one_listed_and_checked() {
    let project = Project::new();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts");
    for name in LIBRARY {
        let path = name.replace(':', "/");
        project.run(&["scripts", "eject", name], "").expect_code(0);
        for file in [format!("nl/{path}.md"), format!("compiled/{path}.star")] {
            let copied =
                std::fs::read_to_string(project.root().join(".mekara/scripts").join(&file))
                    .unwrap_or_else(|e| panic!("{name}: `{file}` was not copied: {e}"));
            let bundled = std::fs::read_to_string(source.join(&file)).expect("bundled");
            assert_eq!(copied, bundled, "{name}: `{file}`");
        }
    }
    let listed = project.run(&["scripts"], "");
    let check = project.run(&["check"], "");
    check.expect_code(0);
    for name in LIBRARY {
        let row = listed_row(&listed, name);
        assert!(row.contains(" project "), "{row}");
        assert!(
            check.stdout.contains(&format!(
                "{name}: ok ({}/.mekara/scripts/compiled/{}.star)",
                project.root().display(),
                name.replace(':', "/")
            )),
            "{name}:\n{}",
            check.stdout
        );
    }
}

#[test]
fn ejecting_a_workflow_brings_the_helper_module_it_loads_and_keeps_an_edited_one() {
    let project = Project::new();
    project
        .run(&["scripts", "eject", "flow:commit"], "")
        .expect_code(0);
    let helper = project.root().join(".mekara/scripts/lib/project.star");
    assert_eq!(
        std::fs::read_to_string(&helper).expect("the helper was ejected"),
        include_str!("../../scripts/lib/project.star")
    );
    let shown = project.run(&["scripts", "show", "flow:commit"], "");
    assert!(
        shown
            .stdout
            .contains(".mekara/scripts/compiled/flow/commit.star"),
        "{}",
        shown.stdout
    );
    // The person changes the helper; ejecting another workflow keeps their change.
    let edited = format!(
        "{}\n# ours\n",
        include_str!("../../scripts/lib/project.star")
    );
    std::fs::write(&helper, &edited).expect("write");
    project
        .run(&["scripts", "eject", "flow:release"], "")
        .expect_code(0);
    assert_eq!(std::fs::read_to_string(&helper).expect("helper"), edited);
    mekara_snapshot!(project, project.run(&["check"], ""));
}

#[test]
fn every_workflow_of_the_library_has_its_page_and_a_row_in_the_index() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/workflows");
    let index = std::fs::read_to_string(docs.join("README.md")).expect("docs/workflows/README.md");
    for name in LIBRARY {
        let short = name.trim_start_matches("flow:");
        let page = std::fs::read_to_string(docs.join(format!("{short}.md")))
            .unwrap_or_else(|e| panic!("no page for {name}: {e}"));
        assert!(
            page.starts_with(&format!("# `/{name}`")),
            "{short}.md: {page}"
        );
        for part in ["**Does.**", "**Asks you.**", "**Changes.**", "**Adapt.**"] {
            assert!(page.contains(part), "{short}.md has no {part}");
        }
        assert!(
            index.contains(&format!("[`/{name}`]({short}.md)")),
            "the index has no row for {name}"
        );
    }
}

/// Issue 39: `auto(PROBE)` with `PROBE` a module-level string (or text joined to one) was
/// taken for a function step, so `r.exit_code` was reported missing and five scripts read it
/// with `getattr`. A command given by a constant has `exit_code` and no `value`; a function
/// the module defines has `value` and no `exit_code`; a parameter, or a name a function binds
/// itself, may be either, so neither is reported.
#[test]
fn check_tells_a_command_in_a_module_constant_from_a_function_step() {
    let project = Project::new();
    project.script(
        "probe",
        "1. Probe.\n",
        Some(
            "PROBE = \"\"\"\necho probed\n\"\"\"\n\
             LOUD = PROBE + \" | tr a-z A-Z\"\n\n\
             def execute(request):\n    \
             r = auto(PROBE, allow_failure = True)\n    \
             print(r.exit_code)\n    \
             j = auto(LOUD.replace(\"probed\", request))\n    \
             print(j.exit_code + 1)\n    \
             print(j.value)\n    \
             f = auto(helper)\n    \
             print(f.exit_code)\n    \
             run(request, PROBE)\n\n\
             def run(command, PROBE):\n    \
             r = auto(command, allow_failure = True)\n    \
             print(r.exit_code, r.value)\n    \
             s = auto(PROBE)\n    \
             print(s.value)\n\n\
             def helper():\n    \
             return 1\n",
        ),
    );
    mekara_snapshot!(project, mekara(&project, &["check", "probe"], ""), @r"
    exit code: 1
    ----- stdout -----
    probe: [PROJECT]/.mekara/scripts/compiled/probe.star
    error: `j` is what `auto` returned on line 9, which has no field `value`
      --> [PROJECT]/.mekara/scripts/compiled/probe.star:11:13
       |
    11 |     print(j.value)
       |             ^^^^^
       |
    hint: its fields are `success`, `exit_code`, `output`, `error`

    error: `f` is what `auto` returned on line 12, which has no field `exit_code`
      --> [PROJECT]/.mekara/scripts/compiled/probe.star:13:13
       |
    13 |     print(f.exit_code)
       |             ^^^^^^^^^
       |
    hint: its fields are `success`, `value`, `output`, `error`

    1 of 1 scripts has errors
    ----- stderr -----
    ");
}
