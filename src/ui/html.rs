//! The viewer's pages, rendered on the server from [`super::view`] with `maud` templates:
//! plain HTML that reads with JavaScript off. The template engine escapes every value
//! spliced into a page, in text and in attributes alike, so nothing a step printed (nor a
//! run id, a script name or an answer) is ever markup; run text goes through [`Text`], which
//! also shows control characters as symbols. A link to a run is built by
//! [`super::view::run_path`], which URL-encodes the id.
//!
//! A new page is a function returning [`Markup`] whose body goes through [`layout`], with
//! the [`Page`] the router hands it (the token for its links and forms).

use maud::{DOCTYPE, Markup, Render, html};

use super::view::{FrameView, Item, RunDetail, RunRow, STATE_KEYS, StepView, run_path};
use crate::display::format_time;
use crate::engine::group_note::DoingKind;
use crate::engine::step::StepInput;

/// An output longer than this many lines is folded (the whole text one click away).
const FOLD_LINES: usize = 40;

/// Run text as a page shows it: escaped as every spliced value is, with control characters
/// (an ANSI escape's ESC among them) shown as visible symbols rather than dropped or
/// passed to the browser.
pub(crate) struct Text<'a>(pub &'a str);

impl Render for Text<'_> {
    fn render_to(&self, buffer: &mut String) {
        // A copy only for the rare text with a control character in it.
        if self.0.chars().any(|c| visible(c) != c) {
            let shown: String = self.0.chars().map(visible).collect();
            shown.render_to(buffer);
        } else {
            self.0.render_to(buffer);
        }
    }
}

/// `c`, or its symbol when it is a control character other than a newline or a tab.
fn visible(c: char) -> char {
    match c {
        '\n' | '\t' => c,
        // U+2400 and on: the Control Pictures block shows C0 controls as symbols (␛).
        c if (c as u32) < 0x20 => char::from_u32(0x2400 + c as u32).unwrap_or('�'),
        '\u{7f}' => '␡',
        c => c,
    }
}

/// What a page needs besides its data: the token actions take, when the page was opened
/// with it.
pub(crate) struct Page<'a> {
    pub token: Option<&'a str>,
    /// The events stream that tells this page to refresh.
    pub events: String,
}

impl Page<'_> {
    /// `path` with the token, so that a link keeps the actions it had.
    pub(crate) fn link(&self, path: &str) -> String {
        match self.token {
            Some(token) => {
                let mut query = form_urlencoded::Serializer::new(String::new());
                query.append_pair("token", token);
                let join = if path.contains('?') { '&' } else { '?' };
                format!("{path}{join}{}", query.finish())
            }
            None => path.to_string(),
        }
    }
}

/// A whole page: the head every page has, the header with its way home, and `body`.
pub(crate) fn layout(page: &Page<'_>, title: &str, body: &Markup) -> Markup {
    html! {
        (DOCTYPE) "\n"
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="referrer" content="same-origin";
                title { (Text(title)) " · mekara" }
                link rel="stylesheet" href="/assets/app.css";
                script src="/assets/app.js" defer {}
            }
            body data-events=(page.events) {
                header {
                    a class="home" href=(page.link("/")) { "mekara runs" }
                    span id="live" class="live" hidden { "live" }
                }
                main id="content" { (body) }
            }
        }
        "\n"
    }
}

/// The filters of the runs page, from its query.
#[derive(Debug, Default)]
pub(crate) struct Filters {
    pub state: Option<String>,
    pub script: Option<String>,
    pub host: Option<String>,
}

impl Filters {
    pub(crate) fn keep(&self, row: &RunRow) -> bool {
        self.state.as_deref().is_none_or(|s| row.state_key == s)
            && self
                .script
                .as_deref()
                .is_none_or(|s| row.script.contains(s))
            && self
                .host
                .as_deref()
                .is_none_or(|h| row.host.as_deref() == Some(h))
    }
}

/// The runs page.
pub(crate) fn runs_page(
    page: &Page<'_>,
    place: &str,
    rows: &[RunRow],
    filters: &Filters,
) -> Markup {
    let mut hosts: Vec<&str> = rows.iter().filter_map(|r| r.host.as_deref()).collect();
    hosts.sort_unstable();
    hosts.dedup();
    let shown: Vec<&RunRow> = rows.iter().filter(|r| filters.keep(r)).collect();
    let body = html! {
        h1 { "Runs" }
        p class="place" { "in " (Text(place)) }
        form class="filters" method="get" action="/" {
            @if let Some(token) = page.token {
                input type="hidden" name="token" value=(token);
            }
            label {
                "state "
                select name="state" {
                    option value="" { "any" }
                    @for key in STATE_KEYS {
                        option selected[filters.state.as_deref() == Some(key)] { (key) }
                    }
                }
            }
            " "
            label {
                "script "
                input name="script" value=(Text(filters.script.as_deref().unwrap_or(""))) size="14";
            }
            " "
            @if !hosts.is_empty() {
                label {
                    "host "
                    select name="host" {
                        option value="" { "any" }
                        @for host in &hosts {
                            option selected[filters.host.as_deref() == Some(*host)] { (Text(host)) }
                        }
                    }
                }
                " "
            }
            button { "filter" }
        }
        @if shown.is_empty() {
            p class="empty" { (if rows.is_empty() { "no runs yet" } else { "no run matches" }) }
        } @else {
            table class="runs" {
                thead {
                    tr {
                        th { "run" } th { "script" } th { "state" } th { "host" }
                        th { "started" } th { "duration" } th { "steps" } th { "agent cost" }
                    }
                }
                tbody {
                    @for r in shown { (run_row(page, r)) }
                }
            }
        }
    };
    layout(page, "Runs", &body)
}

/// A run's row on the runs page.
fn run_row(page: &Page<'_>, r: &RunRow) -> Markup {
    let state = match (&r.problem, &r.queue, &r.worker) {
        (Some(problem), _, _) => format!("unreadable: {problem}"),
        (None, Some(queue), _) if r.state_key == "queued" => format!("queued in {queue}"),
        (None, _, Some(worker)) if matches!(r.state_key, "active" | "llm") => {
            format!("{} on {worker}", r.state)
        }
        _ => r.state.clone(),
    };
    html! {
        tr class="run" data-run=(Text(&r.id)) data-state=(r.state_key) {
            td { a href=(page.link(&run_path(&r.id, ""))) { (Text(&r.id)) } }
            td { (Text(&r.script)) }
            td { span class={ "state " (r.state_key) } { (Text(&state)) } }
            td { (Text(r.host.as_deref().unwrap_or(""))) }
            td { (format_time(r.started_at)) }
            td { (duration(r.duration_ms)) }
            td class="num" { (r.steps) }
            td class="num" { (r.cost_usd.map(dollars).unwrap_or_default()) }
        }
    }
}

fn dollars(cost: f64) -> String {
    format!("${cost:.4}")
}

/// `850 ms`, `12.3 s`, `4 min 05 s`, `2 h 03 min`.
pub(crate) fn duration(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        60_000..3_600_000 => format!("{} min {:02} s", ms / 60_000, ms / 1000 % 60),
        _ => format!("{} h {:02} min", ms / 3_600_000, ms / 60_000 % 60),
    }
}

/// The time axis of a run page: from `start` to `end`, in Unix ms; and the page, for links.
struct Axis<'a> {
    start: u64,
    end: u64,
    page: &'a Page<'a>,
}

impl Axis<'_> {
    /// A bar from `from` to `to` on the axis, as an SVG (no inline style: the page's
    /// content security policy allows none).
    fn bar(&self, from: u64, to: u64, class: &str) -> Markup {
        let span = (self.end.saturating_sub(self.start)).max(1) as f64;
        let x = (from.saturating_sub(self.start)) as f64 / span * 1000.0;
        let w = ((to.saturating_sub(from)) as f64 / span * 1000.0).max(3.0);
        html! {
            svg class="bar" viewBox="0 0 1000 10" preserveAspectRatio="none" aria-hidden="true" {
                rect class=(class) x=(format!("{x:.1}")) y="1" width=(format!("{w:.1}")) height="8" {}
            }
        }
    }
}

/// A run's page.
pub(crate) fn run_page(page: &Page<'_>, run: &RunDetail, shared: bool) -> Markup {
    let r = &run.row;
    let axis = Axis {
        start: run.submitted_at.unwrap_or(r.started_at).min(r.started_at),
        end: run.until,
        page,
    };
    let queued = run
        .submitted_at
        .filter(|submitted| *submitted < r.started_at);
    let body = html! {
        h1 {
            span class="script" { (Text(&r.script)) }
            " "
            span class={ "state " (r.state_key) } id="state" { (Text(&r.state)) }
        }
        dl class="facts" {
            dt { "run" } dd id="run-id" { (Text(&r.id)) }
            dt { "started" } dd { (format_time(r.started_at)) }
            dt { "duration" } dd { (duration(r.duration_ms)) }
            dt { "steps" } dd { (r.steps) }
            @if let Some(host) = &r.host {
                dt { "host" }
                dd {
                    (Text(host))
                    @if let Some(user) = &r.user { " (" (Text(user)) ")" }
                }
            }
            @if let Some(submitted) = run.submitted_at {
                dt { "queued" } dd { (duration(r.started_at.saturating_sub(submitted))) " before it started" }
            }
            @if run.spent.answers > 0 {
                dt { "agent" } dd id="spent" { (spent(run)) }
            }
        }
        @if let Some(problem) = &r.problem {
            p class="problem" { (Text(problem)) }
        }
        @if let Some(torn) = &run.torn {
            p class="problem" { (Text(torn)) }
        }
        (actions(page, run, shared))
        (super::spend::section(&run.spend, &run.row.id, page.token))
        section class="waterfall" {
            h2 { "Steps" }
            @if let Some(submitted) = queued {
                div class="row queue" {
                    span class="label" { "⏳ queued" }
                    (axis.bar(submitted, r.started_at, "queued"))
                    span class="took" { (duration(r.started_at - submitted)) }
                }
            }
            @for frame in &run.frames { (frame_html(&axis, frame)) }
            @if let Some(now) = &run.now {
                @let (key, doing) = match now.kind {
                    DoingKind::Llm => ("llm", "llm step waiting for the agent"),
                    DoingKind::Shell => ("shell", "shell step running"),
                };
                div class="row now" id="now" data-kind=(key) {
                    span class="label" {
                        "⏳ " (Text(&now.script)) "[" (now.index) "] " (doing) " since " (format_time(now.since))
                    }
                    (axis.bar(now.since, run.until, "open"))
                    span class="took" { (duration(now.for_ms)) }
                }
            }
        }
    };
    layout(page, &format!("{} {}", r.script, r.id), &body)
}

fn spent(run: &RunDetail) -> String {
    let s = &run.spent;
    let mut parts = Vec::new();
    if let Some(cost) = s.cost_usd {
        parts.push(dollars(cost));
    }
    if let Some(tokens) = s.input_tokens {
        parts.push(format!("{tokens} tokens in"));
    }
    if let Some(tokens) = s.output_tokens {
        parts.push(format!("{tokens} out"));
    }
    parts.push(crate::display::count(s.answers, "answer"));
    parts.join(", ")
}

/// What a person can do with the run here: answer its question, cancel it, or copy the
/// commands that go on with it.
fn actions(page: &Page<'_>, run: &RunDetail, shared: bool) -> Markup {
    let id = &run.row.id;
    let cancellable = shared
        && matches!(run.row.state_key, "queued" | "active" | "llm")
        && run.row.queue.is_some();
    html! {
        @if let Some(q) = &run.question {
            section class="ask" id="question" {
                h2 { "Waiting for your answer" }
                p class="where" { (Text(&q.script)) " step " (q.index) ", asked " (format_time(q.asked_at)) }
                pre class="text" { (Text(q.question.trim_end())) }
                @match page.token {
                    Some(token) => {
                        form method="post" action=(run_path(id, "/answer")) class="answer" {
                            input type="hidden" name="token" value=(token);
                            @match &q.choices {
                                Some(choices) => {
                                    @for choice in choices {
                                        button name="value" value=(Text(choice)) { (Text(choice)) }
                                        " "
                                    }
                                }
                                None => {
                                    input name="value" required size="30" aria-label="answer";
                                    " "
                                    button { "answer" }
                                }
                            }
                        }
                    }
                    None => p class="hint" { "open the address `mekara ui` printed (with its token) to answer here" },
                }
            }
        }
        @if cancellable {
            @match page.token {
                Some(token) => {
                    form method="post" action=(run_path(id, "/cancel")) class="cancel" {
                        input type="hidden" name="token" value=(token);
                        button class="danger" { "cancel run" }
                    }
                }
                None => p class="hint" { "open the address `mekara ui` printed (with its token) to cancel here" },
            }
        }
        @if !run.commands.is_empty() {
            section class="commands" {
                h2 { "Go on" }
                @for command in &run.commands {
                    div class="command" {
                        code { (Text(command)) }
                        " "
                        button type="button" class="copy" data-copy=(Text(command)) hidden { "copy" }
                    }
                }
            }
        }
    }
}

fn frame_html(axis: &Axis<'_>, frame: &FrameView) -> Markup {
    let outcome = frame.outcome.unwrap_or("running");
    let class = match (frame.superseded, frame.outcome) {
        (true, _) => "superseded",
        (_, Some("completed")) => "ok",
        (_, Some("failed" | "stopped by the script")) => "failed",
        (_, Some(_)) => "manual",
        (_, None) => "open",
    };
    let end = frame.ended_at.unwrap_or(axis.end);
    html! {
        details class={ "frame " (class) } open data-depth=(frame.depth) {
            summary class="row" {
                span class="label" {
                    "▶ " b { (Text(&frame.script)) } " "
                    span class="kind" { (if frame.compiled { "compiled" } else { "NL" }) ", " (frame.origin) }
                    @if !frame.request.is_empty() { " " code { (Text(&frame.request)) } }
                    span class="outcome" { (outcome) @if frame.superseded { ", superseded" } }
                }
                (axis.bar(frame.started_at, end, class))
                span class="took" { (duration(end.saturating_sub(frame.started_at))) }
            }
            div class="frame-body" {
                p class="where" { "in " code { (Text(&frame.working_dir)) } }
                @for item in &frame.items { (item_html(axis, item)) }
                @if let Some(error) = &frame.fell_back {
                    div class="fell-back" {
                        b { "✗ fell back to the NL instructions" }
                        pre class="text error" { (Text(error.trim_end())) }
                    }
                }
                @if let Some(error) = &frame.error {
                    div class="fell-back" {
                        b { "◀ " (outcome) }
                        pre class="text error" { (Text(error.trim_end())) }
                    }
                }
                @if let Some(agent) = &frame.agent {
                    p class="agent" { "finished by an agent process: " (Text(&agent.summary())) }
                }
            }
        }
    }
}

/// One item of a frame, in the order it happened.
fn item_html(axis: &Axis<'_>, item: &Item) -> Markup {
    match item {
        Item::Step(step) => step_html(axis, step),
        Item::Frame(child) => frame_html(axis, child),
        Item::Killed { index, group, at } => html! {
            div class="supersede killed" {
                "✗ [" (index) "] killed at " (format_time(*at))
                ": this attempt was still running from a mekara that stopped; the resume killed its process group "
                (group) " and ran the step again below"
            }
        },
        Item::Supersede {
            script,
            index,
            reason,
            at,
        } => html! {
            div class="supersede" {
                "↺ " (reason) " at " (format_time(*at)) ": from " (Text(script)) "[" (index)
                "] on, the attempts above are superseded (kept here) and the run went on below"
            }
        },
        Item::Wait {
            step,
            attempt,
            wait_ms,
            said,
            at,
            superseded,
        } => html! {
            div class="wait" {
                "⏸ " code { (Text(step)) } " rate-limited by the model at " (format_time(*at))
                ": a wait of " (duration(*wait_ms)) " before attempt " (attempt)
                @if *superseded { ", superseded" }
                pre class="text" { (Text(said.trim_end())) }
            }
        },
    }
}

fn step_html(axis: &Axis<'_>, step: &StepView) -> Markup {
    let kind = step.input.kind();
    let mark = match step.mark {
        "ok" => "✓",
        "allowed" => "⚠",
        _ => "✗",
    };
    let class = if step.superseded {
        "superseded"
    } else {
        step.mark
    };
    let who = if kind == "ask" {
        "the person"
    } else {
        "the agent"
    };
    let waited = step
        .waited_ms
        .map(|ms| format!("waited {} for {who}", duration(ms)));
    let result = &step.result;
    html! {
        details class={ "step " (class) " " (kind) } data-index=(step.index) title=[waited.as_deref()] {
            summary class="row" {
                span class="label" {
                    span class="mark" { (mark) }
                    " [" (step.index) "] " (Text(&crate::display::clipped(&step.summary, 160)))
                    @if let (Some(group), Some(member)) = (step.group, step.member) {
                        " " span class="lane" { "∥ group " (group) ", lane " (member) }
                    }
                    @if step.superseded { " " span class="tag" { "superseded" } }
                }
                (axis.bar(step.started_at, step.ended_at, class))
                span class="took" { (duration(step.ended_at.saturating_sub(step.started_at))) }
            }
            div class="step-body" {
                @if let Some(context) = &step.context {
                    p class="context" { "# " (Text(context)) }
                }
                (input_html(step))
                @if let Some(code) = result.exit_code {
                    p class="exit" { "exit code " (code) }
                }
                @if !result.output.is_empty() { (output_html("output", &result.output)) }
                @if let Some(clipped) = &step.output_clipped {
                    p class="whole" {
                        "clipped to its first and last lines: "
                        a class="whole-output" href=(axis.page.link(&clipped.whole)) { "the whole output" }
                        " (" (clipped.bytes) " bytes, " (clipped.lines) " lines, as plain text)"
                    }
                }
                @if let Some(value) = &result.value {
                    h3 { "value" } pre class="text" { (Text(&json(value))) }
                }
                @if let Some(structured) = &result.structured {
                    h3 { "structured" } pre class="text" { (Text(&json(structured))) }
                }
                @if let Some(outputs) = &result.outputs {
                    h3 { "the agent's outputs" }
                    pre class="text outputs" { (Text(&json(&serde_json::Value::Object(outputs.clone())))) }
                }
                @if let Some(answer) = &result.answer {
                    h3 { (Text(&result.answer_label())) }
                    pre class="text answer" { (Text(answer)) }
                }
                @if let Some(waited) = &waited {
                    p class="waited" { (waited) }
                }
                @if let Some(agent) = &result.agent {
                    p class="agent" { "agent: " (Text(&agent.summary())) }
                }
                @if let Some(error) = &result.error {
                    h3 {
                        @if step.mark == "allowed" {
                            "error (allowed by " code { "allow_failure" } ": the script went on)"
                        } @else {
                            "error"
                        }
                    }
                    pre class="text error" { (Text(error.trim_end())) }
                }
            }
        }
    }
}

/// What a step was asked to do: its command, prompt, question or call.
fn input_html(step: &StepView) -> Markup {
    match &step.input {
        StepInput::Shell {
            command,
            working_dir,
            env,
            ..
        } => html! {
            p class="where" { "in " code { (Text(&working_dir.display().to_string())) } }
            pre class="text command" { "$ " (Text(command)) }
            @if !env.is_empty() {
                p class="where" { "env: " (Text(&env.keys().map(String::as_str).collect::<Vec<_>>().join(", "))) }
            }
        },
        StepInput::Llm { prompt, expects } => html! {
            h3 { "prompt" }
            pre class="text prompt" { (Text(prompt.trim_end())) }
            @if let Some(expects) = expects {
                h3 { "expects" }
                pre class="text" { (Text(&json(&serde_json::Value::Object(expects.clone())))) }
            }
        },
        StepInput::Ask { question, choices } => html! {
            h3 { "question" }
            pre class="text" { (Text(question.trim_end())) }
            @if let Some(choices) = choices {
                p { "choices: " (Text(&crate::display::quoted(choices))) }
            }
        },
        StepInput::Function { .. } | StepInput::Call { .. } | StepInput::Mcp { .. } => html! {
            pre class="text command" { (Text(&step.summary)) }
        },
    }
}

fn json(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// A step's output: whole when short, folded behind its first lines when long.
fn output_html(label: &str, text: &str) -> Markup {
    let lines = text.lines().count();
    if lines <= FOLD_LINES {
        return html! {
            h3 { (label) }
            pre class="text output" { (Text(text.trim_end())) }
        };
    }
    let head: String = text
        .lines()
        .take(FOLD_LINES / 2)
        .collect::<Vec<_>>()
        .join("\n");
    html! {
        h3 { (label) }
        pre class="text output head" { (Text(&head)) }
        details class="fold" {
            summary { "all " (lines) " lines" }
            pre class="text output" { (Text(text.trim_end())) }
        }
    }
}

/// An error page.
pub(crate) fn error_page(page: &Page<'_>, title: &str, message: &str) -> Markup {
    let body = html! {
        h1 { (Text(title)) }
        p class="problem" { (Text(message)) }
    };
    layout(page, title, &body)
}

#[cfg(test)]
mod tests {
    use super::{Filters, Page, Text, duration, run_page, runs_page};
    use crate::ui::view::{Question, RunDetail, RunRow, Spent};
    use maud::Render as _;

    /// Every place a page shows a run id, given one no store lets through: it is text in
    /// the page and one path segment in its links and forms.
    #[test]
    fn a_hostile_run_id_is_text_on_the_pages_and_one_segment_in_their_links() {
        let id = "\"><script>alert(1)</script> a/b?c#d é";
        let row = RunRow {
            id: id.to_string(),
            script: "waits".into(),
            state: "queued".into(),
            state_key: "queued",
            host: Some("laptop".into()),
            user: None,
            queue: Some("default".into()),
            worker: None,
            started_at: 0,
            duration_ms: 0,
            steps: 0,
            cost_usd: None,
            problem: None,
        };
        let detail = RunDetail {
            row: row.clone(),
            submitted_at: None,
            until: 0,
            frames: Vec::new(),
            spent: Spent::default(),
            question: Some(Question {
                question: "Ship it?".into(),
                choices: Some(vec!["yes".into()]),
                script: "waits".into(),
                index: 0,
                asked_at: 0,
            }),
            commands: vec![format!("mekara run --resume '{id}'")],
            torn: None,
            now: None,
            spend: crate::ui::spend::SpendView::default(),
        };
        let page = Page {
            token: Some("t0k"),
            events: String::new(),
        };
        let text = "&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt; a/b?c#d é";
        let path = "/runs/%22%3E%3Cscript%3Ealert%281%29%3C%2Fscript%3E%20a%2Fb%3Fc%23d%20%C3%A9";
        let list = runs_page(
            &page,
            "here",
            std::slice::from_ref(&row),
            &Filters::default(),
        )
        .into_string();
        assert!(
            list.contains(&format!(
                "<tr class=\"run\" data-run=\"{text}\" data-state=\"queued\"><td><a href=\"{path}?token=t0k\">{text}</a></td>"
            )),
            "{list}"
        );
        let run = run_page(&page, &detail, true).into_string();
        for expected in [
            format!("<title>waits {text} · mekara</title>"),
            format!("<dd id=\"run-id\">{text}</dd>"),
            format!("<form method=\"post\" action=\"{path}/answer\" class=\"answer\">"),
            format!("<form method=\"post\" action=\"{path}/cancel\" class=\"cancel\">"),
            format!("data-copy=\"mekara run --resume '{text}'\""),
        ] {
            assert!(run.contains(&expected), "`{expected}` is not in {run}");
        }
        for html in [list, run] {
            assert_eq!(html.matches("<script").count(), 1, "the viewer's own only");
        }
    }

    #[test]
    fn run_text_is_never_markup_and_controls_show_as_symbols() {
        assert_eq!(
            Text("<script>alert('x')</script> & \"q\"")
                .render()
                .into_string(),
            "&lt;script&gt;alert('x')&lt;/script&gt; &amp; &quot;q&quot;"
        );
        assert_eq!(
            Text("\u{1b}[31mred\u{1b}[0m\n\tok\u{7f}")
                .render()
                .into_string(),
            "␛[31mred␛[0m\n\tok␡"
        );
    }

    #[test]
    fn durations_read_at_every_scale() {
        assert_eq!(duration(850), "850 ms");
        assert_eq!(duration(12_340), "12.3 s");
        assert_eq!(duration(245_000), "4 min 05 s");
        assert_eq!(duration(7_380_000), "2 h 03 min");
    }
}
