//! [`Notice`]: what happened to a run that a person should hear of, and the one body every
//! notifier is given (the webhook's JSON, the command's stdin and environment).

use serde::Serialize;

/// The most of a question or an error a notification carries: a chat message or a desktop
/// notification is not the place for a whole log.
const MAX_DETAIL: usize = 1_000;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Kind {
    /// The script asked the person a question (`ask`): the run waits for the answer.
    Ask,
    /// A step failed and the unattended run stopped there, resumable.
    StepFailed,
    /// An unattended run stopped at a limit (cost, agent steps, duration), resumable.
    Limit,
    /// An unattended run's agent could not go on; the run stopped, resumable.
    AgentFailed,
    /// An unattended run reached a spend cap and paused: a person raises the cap or stops
    /// the run (`mekara answer`).
    Cap,
    /// The run's script ran to its end.
    Completed,
    /// The agent finished the run's script by hand (an NL script).
    FinishedByAgent,
    /// A step failed, the script fell back, and the agent finished it by hand.
    FellBack,
    /// The script stopped itself (`fail()`), and with it the run.
    Stopped,
}

impl Kind {
    /// Whether the run now waits for a person (else it ended).
    pub(crate) fn waiting(self) -> bool {
        matches!(
            self,
            Kind::Ask | Kind::StepFailed | Kind::Limit | Kind::AgentFailed | Kind::Cap
        )
    }

    /// The name, as the body's `event` and `MEKARA_EVENT` give it.
    fn name(self) -> &'static str {
        match self {
            Kind::Ask => "ask",
            Kind::StepFailed => "step_failed",
            Kind::Limit => "limit",
            Kind::AgentFailed => "agent_failed",
            Kind::Cap => "cap",
            Kind::Completed => "completed",
            Kind::FinishedByAgent => "finished_by_agent",
            Kind::FellBack => "fell_back",
            Kind::Stopped => "stopped",
        }
    }

    /// What happened, in words, after "run `ID` of `SCRIPT`".
    fn phrase(self) -> &'static str {
        match self {
            Kind::Ask => "waits for an answer",
            Kind::StepFailed => "stopped at a failed step",
            Kind::Limit => "stopped at a limit",
            Kind::AgentFailed => "stopped: the agent could not go on",
            Kind::Cap => "paused at a spend cap",
            Kind::Completed => "completed",
            Kind::FinishedByAgent => "was finished by the agent",
            Kind::FellBack => "failed and was finished by the agent",
            Kind::Stopped => "was stopped by its script",
        }
    }
}

/// What happened to a run, as whoever saw it happen tells it.
#[derive(Debug, Clone)]
pub(crate) struct Notice {
    /// What happened.
    pub kind: Kind,
    /// The run's id.
    pub run_id: String,
    /// The run's script.
    pub script: String,
    /// The question, the error or the limit.
    pub detail: Option<String>,
    /// The answers the question takes, when it takes only some.
    pub choices: Option<Vec<String>>,
    /// The command that goes on (`mekara answer ID VALUE`, the resume command).
    pub next: Option<String>,
    /// When it happened (Unix ms).
    pub at: u64,
}

/// The body every notifier is given: [`Notice`] with the run's page and a line of text.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Body {
    /// [`Kind`]'s name: `ask`, `step_failed`, `limit`, `agent_failed`, `completed`,
    /// `finished_by_agent`, `fell_back`, `stopped`.
    pub event: &'static str,
    /// Whether the run waits for a person (else it ended).
    pub waiting: bool,
    /// The run's id.
    pub run_id: String,
    /// The run's script.
    pub script: String,
    /// The question, the error or the limit, clipped to 1,000 bytes.
    pub detail: Option<String>,
    /// The answers the question takes, when it takes only some.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub choices: Option<Vec<String>>,
    /// The command that goes on.
    pub next: Option<String>,
    /// The run's page in the viewer, when `[notify] viewer_url` names one.
    pub url: Option<String>,
    /// When it happened (Unix ms).
    pub at: u64,
    /// All of it in a few lines, for a chat (Slack reads `text`) or a desktop notification.
    pub text: String,
}

impl Notice {
    /// The body, with the run's page under `viewer_url` when one is given.
    pub(crate) fn body(&self, viewer_url: Option<&str>) -> Body {
        let detail = self
            .detail
            .as_deref()
            .map(|d| crate::display::clipped(d.trim(), MAX_DETAIL).into_owned());
        let url = viewer_url.map(|v| format!("{v}/runs/{}", self.run_id));
        let mut text = format!(
            "mekara: run `{}` of `{}` {}",
            self.run_id,
            self.script,
            self.kind.phrase()
        );
        if let Some(detail) = &detail {
            text.push_str(&format!(": {detail}"));
        }
        if let Some(choices) = &self.choices {
            text.push_str(&format!(" ({})", choices.join(" / ")));
        }
        if let Some(next) = &self.next {
            text.push_str(&format!("\nnext: `{next}`"));
        }
        if let Some(url) = &url {
            text.push_str(&format!("\n{url}"));
        }
        Body {
            event: self.kind.name(),
            waiting: self.kind.waiting(),
            run_id: self.run_id.clone(),
            script: self.script.clone(),
            detail,
            choices: self.choices.clone(),
            next: self.next.clone(),
            url,
            at: self.at,
            text,
        }
    }
}

impl Body {
    /// The environment a notify command is given (`MEKARA_EVENT`, …): every field but the
    /// choices, absent ones as empty. A NUL, which no variable can hold, becomes a space.
    pub(crate) fn vars(&self) -> Vec<(&'static str, String)> {
        let text = |s: Option<&String>| s.map_or_else(String::new, |s| s.replace('\0', " "));
        vec![
            ("MEKARA_EVENT", self.event.to_string()),
            ("MEKARA_WAITING", u8::from(self.waiting).to_string()),
            ("MEKARA_RUN_ID", self.run_id.clone()),
            ("MEKARA_SCRIPT", text(Some(&self.script))),
            ("MEKARA_DETAIL", text(self.detail.as_ref())),
            ("MEKARA_NEXT", text(self.next.as_ref())),
            ("MEKARA_RUN_URL", text(self.url.as_ref())),
            ("MEKARA_TEXT", text(Some(&self.text))),
        ]
    }
}
