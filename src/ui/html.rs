//! The viewer's pages, rendered on the server from [`super::view`]: plain HTML that reads
//! with JavaScript off. Every text from a run (scripts, commands, outputs, errors, prompts,
//! answers) goes through [`escape`]: nothing a step printed is ever markup.

use std::fmt::Write as _;

use super::view::{FrameView, Item, RunDetail, RunRow, STATE_KEYS, StepView};
use crate::display::format_time;
use crate::engine::group_note::DoingKind;
use crate::engine::step::StepInput;

/// An output longer than this many lines is folded (the whole text one click away).
const FOLD_LINES: usize = 40;

/// `text` safe inside an element or a quoted attribute: markup characters as entities,
/// and control characters (an ANSI escape's ESC among them) as visible symbols.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' => out.push(c),
            // U+2400 and on: the Control Pictures block shows C0 controls as symbols (␛).
            c if (c as u32) < 0x20 => out.push(char::from_u32(0x2400 + c as u32).unwrap_or('�')),
            '\u{7f}' => out.push('␡'),
            c => out.push(c),
        }
    }
    out
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
    fn link(&self, path: &str) -> String {
        match self.token {
            Some(token) => {
                let join = if path.contains('?') { '&' } else { '?' };
                format!("{path}{join}token={}", escape(token))
            }
            None => path.to_string(),
        }
    }
}

fn layout(page: &Page<'_>, title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"referrer\" content=\"no-referrer\">\
         <title>{title} · mekara</title><link rel=\"stylesheet\" href=\"/assets/app.css\">\
         <script src=\"/assets/app.js\" defer></script></head>\
         <body data-events=\"{events}\"><header><a class=\"home\" href=\"{home}\">mekara runs</a>\
         <span id=\"live\" class=\"live\" hidden>live</span></header>\
         <main id=\"content\">{body}</main></body></html>\n",
        title = escape(title),
        events = escape(&page.events),
        home = page.link("/"),
    )
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
) -> String {
    let mut body = String::new();
    let _ = write!(
        body,
        "<h1>Runs</h1><p class=\"place\">in {}</p>",
        escape(place)
    );
    body.push_str("<form class=\"filters\" method=\"get\" action=\"/\">");
    if let Some(token) = page.token {
        let _ = write!(
            body,
            "<input type=\"hidden\" name=\"token\" value=\"{}\">",
            escape(token)
        );
    }
    body.push_str("<label>state <select name=\"state\"><option value=\"\">any</option>");
    for key in STATE_KEYS {
        let selected = if filters.state.as_deref() == Some(key) {
            " selected"
        } else {
            ""
        };
        let _ = write!(body, "<option{selected}>{key}</option>");
    }
    let mut hosts: Vec<&str> = rows.iter().filter_map(|r| r.host.as_deref()).collect();
    hosts.sort_unstable();
    hosts.dedup();
    let _ = write!(
        body,
        "</select></label> <label>script <input name=\"script\" value=\"{}\" size=\"14\"></label> ",
        escape(filters.script.as_deref().unwrap_or(""))
    );
    if !hosts.is_empty() {
        body.push_str("<label>host <select name=\"host\"><option value=\"\">any</option>");
        for host in hosts {
            let selected = if filters.host.as_deref() == Some(host) {
                " selected"
            } else {
                ""
            };
            let _ = write!(body, "<option{selected}>{}</option>", escape(host));
        }
        body.push_str("</select></label> ");
    }
    body.push_str("<button>filter</button></form>");
    let shown: Vec<&RunRow> = rows.iter().filter(|r| filters.keep(r)).collect();
    if shown.is_empty() {
        let _ = write!(
            body,
            "<p class=\"empty\">{}</p>",
            if rows.is_empty() {
                "no runs yet"
            } else {
                "no run matches"
            }
        );
        return layout(page, "Runs", &body);
    }
    body.push_str(
        "<table class=\"runs\"><thead><tr><th>run</th><th>script</th><th>state</th><th>host</th>\
         <th>started</th><th>duration</th><th>steps</th><th>agent cost</th></tr></thead><tbody>",
    );
    for r in shown {
        let state = match (&r.queue, &r.worker) {
            (Some(queue), _) if r.state_key == "queued" => format!("queued in {queue}"),
            (_, Some(worker)) if matches!(r.state_key, "active" | "llm") => {
                format!("{} on {worker}", r.state)
            }
            _ => r.state.clone(),
        };
        let state = match &r.problem {
            Some(problem) => format!("unreadable: {problem}"),
            None => state,
        };
        let _ = write!(
            body,
            "<tr class=\"run\" data-run=\"{id}\" data-state=\"{key}\"><td><a href=\"{link}\">{id}</a></td>\
             <td>{script}</td><td><span class=\"state {key}\">{state}</span></td><td>{host}</td>\
             <td>{started}</td><td>{duration}</td><td class=\"num\">{steps}</td><td class=\"num\">{cost}</td></tr>",
            id = escape(&r.id),
            key = r.state_key,
            link = page.link(&format!("/runs/{}", r.id)),
            script = escape(&r.script),
            state = escape(&state),
            host = escape(r.host.as_deref().unwrap_or("")),
            started = format_time(r.started_at),
            duration = duration(r.duration_ms),
            steps = r.steps,
            cost = r.cost_usd.map(dollars).unwrap_or_default(),
        );
    }
    body.push_str("</tbody></table>");
    layout(page, "Runs", &body)
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
    fn bar(&self, from: u64, to: u64, class: &str) -> String {
        let span = (self.end.saturating_sub(self.start)).max(1) as f64;
        let x = (from.saturating_sub(self.start)) as f64 / span * 1000.0;
        let w = ((to.saturating_sub(from)) as f64 / span * 1000.0).max(3.0);
        format!(
            "<svg class=\"bar\" viewBox=\"0 0 1000 10\" preserveAspectRatio=\"none\" aria-hidden=\"true\">\
             <rect class=\"{class}\" x=\"{x:.1}\" y=\"1\" width=\"{w:.1}\" height=\"8\"></rect></svg>"
        )
    }
}

/// A run's page.
pub(crate) fn run_page(page: &Page<'_>, run: &RunDetail, shared: bool) -> String {
    let r = &run.row;
    let mut body = String::new();
    let _ = write!(
        body,
        "<h1><span class=\"script\">{script}</span> <span class=\"state {key}\" id=\"state\">{state}</span></h1>\
         <dl class=\"facts\"><dt>run</dt><dd id=\"run-id\">{id}</dd><dt>started</dt><dd>{started}</dd>\
         <dt>duration</dt><dd>{duration}</dd><dt>steps</dt><dd>{steps}</dd>",
        script = escape(&r.script),
        key = r.state_key,
        state = escape(&r.state),
        id = escape(&r.id),
        started = format_time(r.started_at),
        duration = duration(r.duration_ms),
        steps = r.steps,
    );
    if let Some(host) = &r.host {
        let _ = write!(
            body,
            "<dt>host</dt><dd>{}{}</dd>",
            escape(host),
            r.user
                .as_deref()
                .map(|u| format!(" ({})", escape(u)))
                .unwrap_or_default()
        );
    }
    if let Some(submitted) = run.submitted_at {
        let _ = write!(
            body,
            "<dt>queued</dt><dd>{} before it started</dd>",
            duration(r.started_at.saturating_sub(submitted))
        );
    }
    if run.spent.answers > 0 {
        let _ = write!(body, "<dt>agent</dt><dd id=\"spent\">{}</dd>", spent(run));
    }
    body.push_str("</dl>");
    if let Some(problem) = &r.problem {
        let _ = write!(body, "<p class=\"problem\">{}</p>", escape(problem));
    }
    if let Some(torn) = &run.torn {
        let _ = write!(body, "<p class=\"problem\">{}</p>", escape(torn));
    }
    actions(page, run, shared, &mut body);
    let axis = Axis {
        start: run.submitted_at.unwrap_or(r.started_at).min(r.started_at),
        end: run.until,
        page,
    };
    body.push_str("<section class=\"waterfall\"><h2>Steps</h2>");
    if let Some(submitted) = run.submitted_at
        && submitted < r.started_at
    {
        let _ = write!(
            body,
            "<div class=\"row queue\"><span class=\"label\">⏳ queued</span>{}<span class=\"took\">{}</span></div>",
            axis.bar(submitted, r.started_at, "queued"),
            duration(r.started_at - submitted)
        );
    }
    for frame in &run.frames {
        frame_html(&axis, frame, &mut body);
    }
    if let Some(now) = &run.now {
        let (key, doing) = match now.kind {
            DoingKind::Llm => ("llm", "llm step waiting for the agent"),
            DoingKind::Shell => ("shell", "shell step running"),
        };
        let _ = write!(
            body,
            "<div class=\"row now\" id=\"now\" data-kind=\"{key}\"><span class=\"label\">⏳ {script}[{index}] {doing} since {since}</span>{bar}<span class=\"took\">{took}</span></div>",
            script = escape(&now.script),
            index = now.index,
            since = format_time(now.since),
            bar = axis.bar(now.since, run.until, "open"),
            took = duration(now.for_ms),
        );
    }
    body.push_str("</section>");
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

fn actions(page: &Page<'_>, run: &RunDetail, shared: bool, body: &mut String) {
    let id = escape(&run.row.id);
    if let Some(q) = &run.question {
        let _ = write!(
            body,
            "<section class=\"ask\" id=\"question\"><h2>Waiting for your answer</h2>\
             <p class=\"where\">{} step {}, asked {}</p><pre class=\"text\">{}</pre>",
            escape(&q.script),
            q.index,
            format_time(q.asked_at),
            escape(q.question.trim_end())
        );
        match page.token {
            Some(token) => {
                let _ = write!(
                    body,
                    "<form method=\"post\" action=\"/runs/{id}/answer\" class=\"answer\">\
                     <input type=\"hidden\" name=\"token\" value=\"{}\">",
                    escape(token)
                );
                match &q.choices {
                    Some(choices) => {
                        for choice in choices {
                            let choice = escape(choice);
                            let _ = write!(
                                body,
                                "<button name=\"value\" value=\"{choice}\">{choice}</button> "
                            );
                        }
                    }
                    None => body.push_str(
                        "<input name=\"value\" required size=\"30\" aria-label=\"answer\"> <button>answer</button>",
                    ),
                }
                body.push_str("</form>");
            }
            None => body.push_str(
                "<p class=\"hint\">open the address `mekara ui` printed (with its token) to answer here</p>",
            ),
        }
        body.push_str("</section>");
    }
    let cancellable = shared && matches!(run.row.state_key, "queued" | "active" | "llm");
    if cancellable && run.row.queue.is_some() {
        match page.token {
            Some(token) => {
                let _ = write!(
                    body,
                    "<form method=\"post\" action=\"/runs/{id}/cancel\" class=\"cancel\">\
                     <input type=\"hidden\" name=\"token\" value=\"{}\"><button class=\"danger\">cancel run</button></form>",
                    escape(token)
                );
            }
            None => body.push_str(
                "<p class=\"hint\">open the address `mekara ui` printed (with its token) to cancel here</p>",
            ),
        }
    }
    if !run.commands.is_empty() {
        body.push_str("<section class=\"commands\"><h2>Go on</h2>");
        for command in &run.commands {
            let command = escape(command);
            let _ = write!(
                body,
                "<div class=\"command\"><code>{command}</code> <button type=\"button\" class=\"copy\" data-copy=\"{command}\" hidden>copy</button></div>"
            );
        }
        body.push_str("</section>");
    }
}

fn frame_html(axis: &Axis<'_>, frame: &FrameView, body: &mut String) {
    let outcome = frame.outcome.unwrap_or("running");
    let class = match (frame.superseded, frame.outcome) {
        (true, _) => "superseded",
        (_, Some("completed")) => "ok",
        (_, Some("failed" | "stopped by the script")) => "failed",
        (_, Some(_)) => "manual",
        (_, None) => "open",
    };
    let end = frame.ended_at.unwrap_or(axis.end);
    let _ = write!(
        body,
        "<details class=\"frame {class}\" open data-depth=\"{depth}\"><summary class=\"row\">\
         <span class=\"label\">▶ <b>{script}</b> <span class=\"kind\">{kind}, {origin}</span>{request}\
         <span class=\"outcome\">{outcome}{superseded}</span></span>{bar}<span class=\"took\">{took}</span></summary>",
        depth = frame.depth,
        script = escape(&frame.script),
        kind = if frame.compiled { "compiled" } else { "NL" },
        origin = frame.origin,
        request = if frame.request.is_empty() {
            String::new()
        } else {
            format!(" <code>{}</code>", escape(&frame.request))
        },
        superseded = if frame.superseded { ", superseded" } else { "" },
        bar = axis.bar(frame.started_at, end, class),
        took = duration(end.saturating_sub(frame.started_at)),
    );
    let _ = write!(
        body,
        "<div class=\"frame-body\"><p class=\"where\">in <code>{}</code></p>",
        escape(&frame.working_dir)
    );
    for item in &frame.items {
        match item {
            Item::Step(step) => step_html(axis, step, body),
            Item::Frame(child) => frame_html(axis, child, body),
            Item::Killed { index, group, at } => {
                let _ = write!(
                    body,
                    "<div class=\"supersede killed\">✗ [{index}] killed at {}: this attempt was still running from a mekara that stopped; the resume killed its process group {group} and ran the step again below</div>",
                    format_time(*at),
                );
            }
            Item::Supersede {
                script,
                index,
                reason,
                at,
            } => {
                let _ = write!(
                    body,
                    "<div class=\"supersede\">↺ {reason} at {}: from {}[{index}] on, the attempts above are superseded (kept here) and the run went on below</div>",
                    format_time(*at),
                    escape(script),
                );
            }
            Item::Wait {
                step,
                attempt,
                wait_ms,
                said,
                at,
                superseded,
            } => {
                let _ = write!(
                    body,
                    "<div class=\"wait\">⏸ <code>{}</code> rate-limited by the model at {}: a wait of {} before attempt {attempt}{}<pre class=\"text\">{}</pre></div>",
                    escape(step),
                    format_time(*at),
                    duration(*wait_ms),
                    if *superseded { ", superseded" } else { "" },
                    escape(said.trim_end()),
                );
            }
        }
    }
    if let Some(error) = &frame.fell_back {
        let _ = write!(
            body,
            "<div class=\"fell-back\"><b>✗ fell back to the NL instructions</b><pre class=\"text error\">{}</pre></div>",
            escape(error.trim_end())
        );
    }
    if let Some(error) = &frame.error {
        let _ = write!(
            body,
            "<div class=\"fell-back\"><b>◀ {outcome}</b><pre class=\"text error\">{}</pre></div>",
            escape(error.trim_end())
        );
    }
    if let Some(agent) = &frame.agent {
        let _ = write!(
            body,
            "<p class=\"agent\">finished by an agent process: {}</p>",
            escape(&agent.summary())
        );
    }
    body.push_str("</div></details>");
}

fn step_html(axis: &Axis<'_>, step: &StepView, body: &mut String) {
    let kind = step.input.kind();
    let mark = match step.mark {
        "ok" => "✓",
        "allowed" => "⚠",
        _ => "✗",
    };
    let lane = match (step.group, step.member) {
        (Some(group), Some(member)) => {
            format!(" <span class=\"lane\">∥ group {group}, lane {member}</span>")
        }
        _ => String::new(),
    };
    let class = if step.superseded {
        "superseded"
    } else {
        step.mark
    };
    let waited = step
        .waited_ms
        .map(|ms| {
            let who = if kind == "ask" {
                "the person"
            } else {
                "the agent"
            };
            format!(" title=\"waited {} for {who}\"", duration(ms))
        })
        .unwrap_or_default();
    let _ = write!(
        body,
        "<details class=\"step {class} {kind}\" data-index=\"{index}\"{waited}><summary class=\"row\">\
         <span class=\"label\"><span class=\"mark\">{mark}</span> [{index}] {summary}{lane}{superseded}</span>\
         {bar}<span class=\"took\">{took}</span></summary><div class=\"step-body\">",
        index = step.index,
        summary = escape(&crate::display::clipped(&step.summary, 160)),
        superseded = if step.superseded {
            " <span class=\"tag\">superseded</span>"
        } else {
            ""
        },
        bar = axis.bar(step.started_at, step.ended_at, class),
        took = duration(step.ended_at.saturating_sub(step.started_at)),
    );
    if let Some(context) = &step.context {
        let _ = write!(body, "<p class=\"context\"># {}</p>", escape(context));
    }
    match &step.input {
        StepInput::Shell {
            command,
            working_dir,
            env,
            ..
        } => {
            let _ = write!(
                body,
                "<p class=\"where\">in <code>{}</code></p><pre class=\"text command\">$ {}</pre>",
                escape(&working_dir.display().to_string()),
                escape(command)
            );
            if !env.is_empty() {
                let env: Vec<String> = env.keys().map(|k| escape(k)).collect();
                let _ = write!(body, "<p class=\"where\">env: {}</p>", env.join(", "));
            }
        }
        StepInput::Llm { prompt, expects } => {
            let _ = write!(
                body,
                "<h3>prompt</h3><pre class=\"text prompt\">{}</pre>",
                escape(prompt.trim_end())
            );
            if let Some(expects) = expects {
                let _ = write!(
                    body,
                    "<h3>expects</h3><pre class=\"text\">{}</pre>",
                    escape(&json(&serde_json::Value::Object(expects.clone())))
                );
            }
        }
        StepInput::Ask { question, choices } => {
            let _ = write!(
                body,
                "<h3>question</h3><pre class=\"text\">{}</pre>",
                escape(question.trim_end())
            );
            if let Some(choices) = choices {
                let _ = write!(
                    body,
                    "<p>choices: {}</p>",
                    escape(&crate::display::quoted(choices))
                );
            }
        }
        StepInput::Function { .. } | StepInput::Call { .. } | StepInput::Mcp { .. } => {
            let _ = write!(
                body,
                "<pre class=\"text command\">{}</pre>",
                escape(&step.summary)
            );
        }
    }
    let result = &step.result;
    if let Some(code) = result.exit_code {
        let _ = write!(body, "<p class=\"exit\">exit code {code}</p>");
    }
    if !result.output.is_empty() {
        output_html("output", &result.output, body);
    }
    if let Some(clipped) = &step.output_clipped {
        let _ = write!(
            body,
            "<p class=\"whole\">clipped to its first and last lines: <a class=\"whole-output\" href=\"{}\">the whole output</a> ({} bytes, {} lines, as plain text)</p>",
            escape(&axis.page.link(&clipped.whole)),
            clipped.bytes,
            clipped.lines
        );
    }
    if let Some(value) = &result.value {
        let _ = write!(
            body,
            "<h3>value</h3><pre class=\"text\">{}</pre>",
            escape(&json(value))
        );
    }
    if let Some(structured) = &result.structured {
        let _ = write!(
            body,
            "<h3>structured</h3><pre class=\"text\">{}</pre>",
            escape(&json(structured))
        );
    }
    if let Some(outputs) = &result.outputs {
        let _ = write!(
            body,
            "<h3>the agent's outputs</h3><pre class=\"text outputs\">{}</pre>",
            escape(&json(&serde_json::Value::Object(outputs.clone())))
        );
    }
    if let Some(answer) = &result.answer {
        let _ = write!(
            body,
            "<h3>{}</h3><pre class=\"text answer\">{}</pre>",
            escape(&result.answer_label()),
            escape(answer)
        );
    }
    if let Some(ms) = step.waited_ms {
        let who = if kind == "ask" {
            "the person"
        } else {
            "the agent"
        };
        let _ = write!(
            body,
            "<p class=\"waited\">waited {} for {who}</p>",
            duration(ms)
        );
    }
    if let Some(agent) = &result.agent {
        let _ = write!(
            body,
            "<p class=\"agent\">agent: {}</p>",
            escape(&agent.summary())
        );
    }
    if let Some(error) = &result.error {
        let label = if step.mark == "allowed" {
            "error (allowed by <code>allow_failure</code>: the script went on)"
        } else {
            "error"
        };
        let _ = write!(
            body,
            "<h3>{label}</h3><pre class=\"text error\">{}</pre>",
            escape(error.trim_end())
        );
    }
    body.push_str("</div></details>");
}

fn json(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// A step's output: whole when short, folded behind its first lines when long.
fn output_html(label: &str, text: &str, body: &mut String) {
    let lines = text.lines().count();
    if lines <= FOLD_LINES {
        let _ = write!(
            body,
            "<h3>{label}</h3><pre class=\"text output\">{}</pre>",
            escape(text.trim_end())
        );
        return;
    }
    let head: String = text
        .lines()
        .take(FOLD_LINES / 2)
        .collect::<Vec<_>>()
        .join("\n");
    let _ = write!(
        body,
        "<h3>{label}</h3><pre class=\"text output head\">{}</pre>\
         <details class=\"fold\"><summary>all {lines} lines</summary><pre class=\"text output\">{}</pre></details>",
        escape(&head),
        escape(text.trim_end())
    );
}

/// An error page.
pub(crate) fn error_page(page: &Page<'_>, title: &str, message: &str) -> String {
    layout(
        page,
        title,
        &format!(
            "<h1>{}</h1><p class=\"problem\">{}</p>",
            escape(title),
            escape(message)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::{duration, escape};

    #[test]
    fn run_text_is_never_markup_and_controls_show_as_symbols() {
        assert_eq!(
            escape("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        assert_eq!(
            escape("\u{1b}[31mred\u{1b}[0m\n\tok\u{7f}"),
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
