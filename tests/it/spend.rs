//! Spend under control (issue 44): token caps, costs from the price table for agents that
//! report only tokens, caps that pause a run for a person who raises them with `mekara
//! answer`, the estimate from a script's past runs, and a resumed Claude Code session that
//! restates its earlier totals. The agents are the scripted agent of `unattended.rs` (a
//! Python script answering the JSON contract) and a stand-in `claude` on `PATH`.

use serde_json::json;

use crate::common::{Project, Run};
use crate::unattended::{
    AGENT_COMMAND, answers, asked_steps as asked, calls, json_summary as summary, project,
};

fn unattended(project: &Project, extra: &[&str]) -> Run {
    let mut args = vec!["run", "--agent-command", AGENT_COMMAND];
    args.extend_from_slice(extra);
    project.run(&args, "")
}

/// A reached `--max-cost` pauses the run before the next agent step (not after it ran); a
/// raise that does not raise is refused; `mekara answer` raises it and the resume goes on
/// from the paused step, asking no step twice, though the resume repeats the old flag.
#[test]
fn a_reached_cost_cap_pauses_the_run_until_mekara_answer_raises_it_and_no_step_runs_twice() {
    let project = project();
    let paused = unattended(&project, &["--max-cost", "0.5", "colour"]);
    let id = project.run_ids().pop().expect("a run");
    insta::assert_snapshot!("cap_paused", project.transcript(&paused));
    assert_eq!(asked(&project), ["colour[1]", "colour[3]"]);
    let runs = project.run(&["runs"], "").stdout;
    assert!(runs.contains("waiting for an answer"), "{runs}");
    let show = project.run(&["runs", "show", &id], "");
    let show = project.scrub(&show.stdout);
    assert!(
        show.contains("⏸ paused at a cap before `colour[4] > plain[0]`: the run's agents spent $0.5000 (`--max-cost 0.5`)"),
        "{show}"
    );
    assert!(
        show.contains("spent: $0.5000 and 214 tokens in 2 agent answers (caps: `--max-cost 0.5`)"),
        "{show}"
    );
    let refused = project.scrub(&project.session(&[
        &["answer", &id, "max-cost=0.5"],
        &["answer", &id, "go on"],
        &["answer", &id, "max-cost=lots"],
    ]));
    insta::assert_snapshot!("cap_answers_refused", refused);
    mekara_snapshot!(
        "cap_raised",
        project,
        project.run(&["answer", &id, "max-cost=1"], "")
    );
    let resumed = unattended(&project, &["--resume", &id, "--max-cost", "0.5", "--json"]);
    resumed.expect_code(0);
    assert_eq!(summary(&resumed)["cost_usd"], 0.75);
    assert_eq!(
        asked(&project),
        ["colour[1]", "colour[3]", "colour[4] > plain[0]"],
        "each step asked once"
    );
}

/// `stop` ends a paused run for good: a resume runs nothing and says why.
#[test]
fn a_paused_run_stopped_with_mekara_answer_is_not_resumed() {
    let project = project();
    let paused = unattended(&project, &["--max-tokens", "200", "--json", "colour"]);
    paused.expect_code(1);
    let said = summary(&paused);
    assert_eq!(said["state"], "waiting");
    assert!(
        said["stopped_by"]
            .as_str()
            .expect("a string")
            .starts_with("paused before `colour[4] > plain[0]`: the run's agents used 214 tokens (`--max-tokens 200`)"),
        "{said:#}"
    );
    let id = said["run_id"].as_str().expect("a run id").to_string();
    let stopped = project.run(&["answer", &id, "stop"], "");
    stopped.expect_code(0);
    assert_eq!(
        stopped.stdout,
        format!("stopped run {id} at its spend cap: it will not be resumed\n")
    );
    let resumed = unattended(&project, &["--resume", &id]);
    resumed.expect_code(1);
    assert!(
        resumed
            .stderr
            .contains("was stopped at its spend cap by a person"),
        "{}",
        resumed.stderr
    );
    assert_eq!(calls(&project).len(), 2, "nothing was asked after the stop");
    // A run that waits at no cap is answered as before: it has no question either.
    let not = project.run(&["answer", &id, "max-cost=9"], "");
    not.expect_code(2);
}

/// An agent that reports tokens and a model but no cost: the price table gives the cost,
/// labelled an estimate; `--max-tokens` and `--max-step-tokens` stop the run before the step
/// that would go past them (`--on-cap stop`, as CI wants), never after.
#[test]
fn token_caps_stop_agents_that_report_only_tokens_and_their_cost_is_an_estimate() {
    let tokens_only = json!({
        "colour[1]#1": {"outputs": {"colour": "red"}, "input_tokens": 1000, "output_tokens": 200, "model": "gpt-5"},
        "colour[3]#1": {"outputs": {"letters": 3}, "input_tokens": 5000, "output_tokens": 100, "model": "gpt-5"},
        "colour[4] > plain[0]#1": {"outputs": {}, "input_tokens": 10, "output_tokens": 10, "model": "gpt-5"},
    });
    let project = project();
    answers(&project, &tokens_only);
    let stopped = unattended(
        &project,
        &["--max-step-tokens", "4000", "--on-cap", "stop", "colour"],
    );
    // $0.00325 for the first step's 1,200 tokens, $0.00725 for the second's 5,100.
    insta::assert_snapshot!("step_tokens_stopped", project.transcript(&stopped));
    assert_eq!(asked(&project), ["colour[1]", "colour[3]"]);

    let project = self::project();
    answers(&project, &tokens_only);
    let stopped = unattended(
        &project,
        &[
            "--max-tokens",
            "1000",
            "--on-cap",
            "stop",
            "--json",
            "colour",
        ],
    );
    stopped.expect_code(1);
    let said = summary(&stopped);
    assert_eq!(said["state"], "stopped");
    assert_eq!(
        said["stopped_by"],
        "stopped before `colour[3]`: the run's agents used 1200 tokens (`--max-tokens 1000`)"
    );
    assert_eq!(said["cost_estimated"], true);
    assert_eq!(said["tokens"], 1200);
    assert_eq!(asked(&project), ["colour[1]"]);
}

/// `[limits]` of the config sets the caps a run has when its flags do not, and a bad one is
/// a usage error that names it.
#[test]
fn limits_in_the_config_cap_a_run_and_bad_ones_are_named() {
    let project = project();
    project.write(
        ".mekara/config.toml",
        "[limits]\nmax_tokens = 100\non_cap = \"stop\"\n",
    );
    let stopped = unattended(&project, &["--json", "colour"]);
    assert_eq!(
        summary(&stopped)["stopped_by"],
        "stopped before `colour[3]`: the run's agents used 107 tokens (`--max-tokens 100`)"
    );
    for (config, said) in [
        (
            "[limits]\nmax_cost = -2.0\n",
            "`max_cost` must be a number of US dollars, 0 or more, not `-2`",
        ),
        ("[limits]\nmax_tokens = \"lots\"\n", "`[limits]`"),
        ("[limits]\non_cap = \"shrug\"\n", "unknown variant `shrug`"),
        (
            "[limits]\nmax_duration = \"soon\"\n",
            "write a duration such as `90s`",
        ),
        ("[limits]\nmax_wishes = 3\n", "unknown field `max_wishes`"),
        (
            "[prices.\"m\"]\ninput_per_mtok = -1\noutput_per_mtok = 1\n",
            "`[prices.\"m\"] input_per_mtok` must be US dollars per million tokens",
        ),
    ] {
        project.write(".mekara/config.toml", config);
        let run = unattended(&project, &["colour"]);
        run.expect_code(2);
        assert!(run.stderr.contains(said), "{config}: {}", run.stderr);
    }
}

/// The estimate rests on the script's completed runs only: three runs that cost $0.75,
/// $1.50 and $0.75 give a median of $0.75 and a 90th percentile of $1.50; a paused run is
/// not counted. It shows in `--dry-run`, at the start of an unattended run and in `runs show`.
#[test]
fn the_estimate_is_the_median_and_90th_percentile_of_the_scripts_completed_runs() {
    let project = project();
    // The second run's first step costs $1 and 1,000 tokens; every other answer $0.25 and 107.
    answers(
        &project,
        &json!({"colour[1]#2": {"outputs": {"colour": "red"}, "cost_usd": 1.0, "input_tokens": 1000, "output_tokens": 0}}),
    );
    for _ in 0..3 {
        unattended(&project, &["colour"]).expect_code(0);
    }
    unattended(&project, &["--max-cost", "0.1", "colour"]).expect_code(1);
    let line = "estimate for `colour` from 3 past completed runs: cost $0.7500 median, $1.5000 at the 90th percentile; 321 tokens median, 1214 at the 90th percentile; time";
    let dry = project.run(&["run", "--dry-run", "colour"], "");
    dry.expect_code(0);
    assert!(dry.stdout.contains(line), "{}", dry.stdout);
    let before = project.run_ids();
    let started = unattended(&project, &["--max-cost", "0.1", "colour"]);
    assert!(started.stderr.starts_with(line), "{}", started.stderr);
    // The new run (not the last id in order: runs of one second order by their random part).
    let id = project
        .run_ids()
        .into_iter()
        .find(|id| !before.contains(id))
        .expect("a new run");
    let show = project.run(&["runs", "show", &id], "");
    assert!(show.stdout.contains(line), "{}", show.stdout);
}

/// The stand-in `claude`: answers with the step's outputs from its `--json-schema`, each
/// answer costing $0.25 and 100 tokens in, 10 out; on `--resume` it restates the session's
/// earlier totals in its result, as newer Claude Code versions do.
const CUMULATIVE_CLAUDE: &str = r#"#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
sys.stdin.read()
def arg(name):
    return args[args.index(name) + 1] if name in args else None
here = os.path.dirname(os.path.abspath(__file__))
totals_file = os.path.join(here, "totals.json")
totals = json.load(open(totals_file)) if os.path.exists(totals_file) else {}
session = arg("--resume") or "session-%d" % (len(totals) + 1)
before = totals.get(session, {"cost": 0.0, "in": 0, "out": 0})
now = {"cost": before["cost"] + 0.25, "in": before["in"] + 100, "out": before["out"] + 10}
totals[session] = now
json.dump(totals, open(totals_file, "w"))
schema = json.loads(arg("--json-schema") or "{}")
outputs = {k: ("red" if k == "colour" else 3) for k in schema.get("properties", {})}
print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "result": "done",
    "session_id": session, "total_cost_usd": now["cost"],
    "usage": {"input_tokens": now["in"], "output_tokens": now["out"]},
    "structured_output": outputs}))
"#;

/// Regression (issue 44): a resumed Claude Code session that restates its earlier totals
/// was added up whole at every step: $1.50 for three answers of $0.25 each.
#[test]
fn a_resumed_claude_session_that_restates_its_totals_is_counted_once() {
    let project = project();
    let bin = project.write("bin/claude", CUMULATIVE_CLAUDE);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let path = format!(
        "{}:{}",
        project.root().join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = project.command(&["run", "--agent", "claude", "--json", "colour"]);
    command.env("PATH", path);
    let run = crate::common::run_with_stdin(command, "");
    run.expect_code(0);
    let said = summary(&run);
    assert_eq!(said["agent_steps"], 3);
    assert_eq!(said["cost_usd"], 0.75, "{}", run.stderr);
    assert_eq!(said["tokens"], 330);
}
