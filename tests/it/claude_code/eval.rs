//! `mekara eval --agent claude`: trials run by the real Claude Code (`claude -p` for each
//! llm step, and for the judge) against the stand-in model, which answers through Claude
//! Code's StructuredOutput tool.

use serde_json::{Value as Json, json};

use super::standin::{StandIn, tool_use};
use super::unattended;
use crate::common::Project;

#[cfg_attr(not(feature = "clients"), ignore = "needs Claude Code")]
#[test]
fn an_eval_through_claude_code_runs_each_trial_and_its_judge_and_adds_up_what_claude_reported() {
    let project = Project::new();
    project.script(
        "answer",
        "Answer yes.\n",
        Some("def execute(request):\n    llm(\"Answer yes.\", expects = {\"answer\": \"the word yes\"})\n"),
    );
    project.write(
        "cases.toml",
        "[[case]]\nname = \"yes\"\nchecks = [\"git status --short\"]\njudge = \"the run answered yes\"\n[case.fixture]\ngit = true\n",
    );
    let output = |id: &str, input: Json| vec![tool_use(id, "StructuredOutput", input)];
    // Trial 1: its step, then its judge says pass; trial 2: its step, then its judge says
    // fail.
    let standin = StandIn::start_on_prompts(vec![
        output("toolu_1", json!({"answer": "yes"})),
        output("toolu_2", json!({"verdict": "pass", "why": "it said yes"})),
        output("toolu_3", json!({"answer": "yes"})),
        output(
            "toolu_4",
            json!({"verdict": "fail", "why": "not convinced"}),
        ),
    ]);
    let run = unattended(
        &project,
        &standin,
        &[
            "eval",
            "answer",
            "--cases",
            "cases.toml",
            "--trials",
            "2",
            "--agent",
            "claude",
            "--json",
        ],
    );
    run.expect_code(0);
    let summary: Json = serde_json::from_str(&run.stdout).expect("a JSON summary");
    let all = &summary["rows"][0];
    assert_eq!(
        (all["passed"].as_u64(), all["trials"].as_u64()),
        (Some(1), Some(2)),
        "{summary}\n{}",
        run.stderr
    );
    assert_eq!(all["agent"], "claude");
    assert_eq!(summary["failures"][0]["step"], "judge");
    assert!(
        all["tokens_per_trial"].as_f64().unwrap_or_default() > 0.0,
        "Claude Code's token counts: {all}"
    );
    // The judge read the rubric.
    let judged = standin.main_requests()[1].message_text();
    assert!(judged.contains("the run answered yes"), "{judged}");
}
