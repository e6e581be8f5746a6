//! An eval on disk: the folder `.mekara/evals/ID/` with its plan (`plan.json`), one file per
//! finished trial (`trials/NNNN.json`), the run ids each trial started (`trials/NNNN.started`,
//! one line per attempt) and its summary (`summary.json`, `summary.md`).
//!
//! A trial's result is written once, when it is judged, by a rename: a trial with a result
//! is finished and a resumed eval never runs it again; one that only started (the eval was
//! killed during it) runs again from a fresh scratch copy, as a new run.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::cases::Cases;

/// What an eval runs: every trial, decided before the first one starts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Plan {
    pub id: String,
    /// The script under evaluation, as named on the command line.
    pub script: String,
    pub cases: Cases,
    pub agents: Vec<AgentSpec>,
    /// Trials per case, agent and variant.
    pub trials: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Baseline>,
    /// The person agreed to evaluate the project's own script of a bundled script's name
    /// (`--project-script`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub project_script: bool,
    pub caps: Caps,
    /// Trials at once.
    pub jobs: usize,
    /// When it was planned, in milliseconds since the epoch.
    pub created_ms: u64,
    /// Every trial, in the order they start.
    pub list: Vec<Trial>,
}

/// Who does a trial's agent work: a headless client (with a model, perhaps) or a command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct AgentSpec {
    /// `claude`, `codex`, `gemini`, or `command`.
    pub agent: String,
    /// The `--agent-command`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl AgentSpec {
    /// How tables show it: `claude`, `claude/opus`, `command`.
    pub(crate) fn label(&self) -> String {
        match &self.model {
            Some(model) => format!("{}/{model}", self.agent),
            None => self.agent.clone(),
        }
    }
}

/// What the script is compared with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Baseline {
    /// The script's NL instructions, done by the agent as a whole, without its compiled steps.
    Nl,
    /// The script's files at this git ref.
    Ref(String),
}

impl Baseline {
    /// How tables show it.
    pub(crate) fn label(&self) -> String {
        match self {
            Baseline::Nl => "baseline: NL".to_string(),
            Baseline::Ref(r) => format!("baseline: {r}"),
        }
    }
}

/// The caps on spend and time; `None` is no cap.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Caps {
    pub trial_cost_usd: Option<f64>,
    pub trial_ms: Option<u64>,
    pub total_cost_usd: Option<f64>,
    pub total_ms: Option<u64>,
}

/// One trial of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Trial {
    /// 1, 2, …: its place in the plan and its file's name.
    pub number: u32,
    /// The case's name.
    pub case: String,
    /// Its index in [`Plan::agents`].
    pub agent: usize,
    /// Whether it runs the baseline instead of the script.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub baseline: bool,
    /// 1..=trials: which repetition of its case, agent and variant.
    pub repeat: u32,
}

/// How a trial came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Outcome {
    Passed,
    /// The run failed or stopped, or a check or the judge said no.
    Failed,
    /// It passed its cost or time cap and was stopped.
    Capped,
}

/// A check run in a trial's resulting tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct CheckResult {
    pub command: String,
    pub passed: bool,
    /// The end of what it printed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub output: String,
}

/// The judge's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Verdict {
    pub passed: bool,
    pub why: String,
    /// The judge's own run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

/// A finished trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TrialResult {
    pub number: u32,
    /// The trial's run (in `mekara runs` and the viewer).
    pub run_id: String,
    pub outcome: Outcome,
    /// Why it did not pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// Where it failed: a step (`greet[2]`), `check: CMD`, `judge` or `cap`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// How the run ended (`completed`, `failed`, …, as `mekara run --json` says).
    pub state: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<CheckResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<Verdict>,
    /// Agent answers of the run.
    pub agent_steps: usize,
    /// The run's and the judge's spend, as the agents reported it.
    pub cost_usd: f64,
    /// The tokens the models read and wrote.
    pub tokens: u64,
    /// The trial's wall time: the run, its checks and its judge.
    pub duration_ms: u64,
}

/// What went wrong with an eval's folder.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RecordError {
    #[error("no eval `{id}` in `{dir}`; each eval is a folder there, named by its id")]
    NotFound { id: String, dir: PathBuf },
    #[error("cannot read `{path}`: {error}")]
    Read { path: PathBuf, error: String },
    #[error("cannot write `{path}`: {error}")]
    Write { path: PathBuf, error: String },
}

/// One eval's folder.
#[derive(Debug, Clone)]
pub(crate) struct EvalDir {
    pub dir: PathBuf,
}

impl EvalDir {
    /// The folder of eval `id` under `evals` (`.mekara/evals`); `id` must be one mekara makes.
    pub(crate) fn of(evals: &Path, id: &str) -> Result<EvalDir, RecordError> {
        let dir = evals.join(id);
        if !crate::engine::runs::is_run_id(id) || !dir.join("plan.json").is_file() {
            return Err(RecordError::NotFound {
                id: id.to_string(),
                dir: evals.to_path_buf(),
            });
        }
        Ok(EvalDir { dir })
    }

    /// Makes the folder of a new eval and writes its plan.
    pub(crate) fn create(evals: &Path, plan: &Plan) -> Result<EvalDir, RecordError> {
        let dir = evals.join(&plan.id);
        let eval = EvalDir { dir };
        std::fs::create_dir_all(eval.dir.join("trials")).map_err(|e| write_error(&eval.dir, e))?;
        eval.write_json(&eval.dir.join("plan.json"), plan)?;
        Ok(eval)
    }

    pub(crate) fn plan(&self) -> Result<Plan, RecordError> {
        read_json(&self.dir.join("plan.json"))
    }

    fn trial_path(&self, number: u32, ext: &str) -> PathBuf {
        self.dir.join("trials").join(format!("{number:04}.{ext}"))
    }

    /// The result of trial `number`, when it finished.
    pub(crate) fn result(&self, number: u32) -> Option<TrialResult> {
        read_json(&self.trial_path(number, "json")).ok()
    }

    /// Every finished trial's result, in plan order.
    pub(crate) fn results(&self, plan: &Plan) -> Vec<TrialResult> {
        plan.list
            .iter()
            .filter_map(|t| self.result(t.number))
            .collect()
    }

    pub(crate) fn write_result(&self, result: &TrialResult) -> Result<(), RecordError> {
        self.write_json(&self.trial_path(result.number, "json"), result)
    }

    /// The run ids trial `number` started, oldest first (more than one when an eval was
    /// killed during it and resumed).
    pub(crate) fn started(&self, number: u32) -> Vec<String> {
        std::fs::read_to_string(self.trial_path(number, "started"))
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect()
    }

    /// Notes that trial `number` started run `run_id`, before the run starts.
    pub(crate) fn note_started(&self, number: u32, run_id: &str) -> Result<(), RecordError> {
        let path = self.trial_path(number, "started");
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| writeln!(f, "{run_id}"))
            .map_err(|e| write_error(&path, e))
    }

    /// Where a trial's run logs its progress.
    pub(crate) fn log_path(&self, number: u32) -> PathBuf {
        self.trial_path(number, "log")
    }

    /// Writes the summary (`crate::eval::stats::Summary`), as JSON and as Markdown.
    pub(crate) fn write_summary(
        &self,
        summary: &impl Serialize,
        markdown: &str,
    ) -> Result<(), RecordError> {
        self.write_json(&self.dir.join("summary.json"), summary)?;
        write_atomically(&self.dir.join("summary.md"), markdown.as_bytes())
    }

    fn write_json(&self, path: &Path, value: &impl Serialize) -> Result<(), RecordError> {
        let text = serde_json::to_vec_pretty(value).map_err(|e| write_error(path, e))?;
        write_atomically(path, &text)
    }
}

/// The ids of the evals under `evals`, newest first.
pub(crate) fn list(evals: &Path) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(evals)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join("plan.json").is_file())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|id| crate::engine::runs::is_run_id(id))
        .collect();
    ids.sort_unstable_by(|a, b| b.cmp(a));
    ids
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, RecordError> {
    let read = |error: String| RecordError::Read {
        path: path.to_path_buf(),
        error,
    };
    let text = std::fs::read(path).map_err(|e| read(e.to_string()))?;
    serde_json::from_slice(&text).map_err(|e| read(e.to_string()))
}

fn write_error(path: &Path, error: impl std::fmt::Display) -> RecordError {
    RecordError::Write {
        path: path.to_path_buf(),
        error: error.to_string(),
    }
}

/// Writes `bytes` to a file beside `path`, then renames it there: a reader (or a resumed
/// eval) sees the whole file or none.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), RecordError> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| write_error(path, e))
}
