//! `mekara ui`, the run viewer: a real run of a real script (a nested call, a `parallel`
//! group, an llm step an agent process answered with its cost, an `ask` answered through
//! the viewer, a failure retried, an allowed failure with its traceback, hostile output),
//! seen through the viewer's pages and `/api` with curl, its actions refused without the
//! token and from a foreign origin, its pages updating live, and the pages loaded by
//! headless Chromium (`--features clients`), whose DOM the test reads and whose screenshot
//! it keeps under `target/ui/`.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};

use crate::common::{Project, lines_with};

/// The script the run is made of: every kind of row the viewer draws.
const TOUR: &str = r#"
def boom():
    fail("the gauge is off")

def execute(request):
    auto("echo hello", context = "Say hello")
    call_script("tour/child", request = "from tour")
    parallel([
        lambda: auto("echo lane zero"),
        lambda: auto("echo lane one"),
    ])
    auto(boom, {}, context = "Read the gauge", allow_failure = True)
    llm("Name a colour.", expects = {"colour": "a colour"})
    r = ask("Ship it?", choices = ["yes", "no"])
    auto("printf '<script>window.pwned=1</script><b>bold</b> \\033[31mred\\033[0m\\n'", context = "Hostile output")
    auto("test -f fixed || (echo not fixed yet; exit 3)", context = "Fails until fixed")
    auto("echo shipped: " + r.answer)
"#;

const CHILD: &str = r#"
def execute(request):
    auto("echo child got " + request)
"#;

/// What a snapshot of the tour's page pins: its lines about the nested call, the agent's
/// outputs and cost, the answer, the superseded attempt, the allowed failure and the hostile
/// output. Not the group's lanes: they are drawn in the order they ended.
const TOUR_ROWS: &[&str] = &[
    "tour:child",
    "the agent's outputs",
    "teal",
    "answer (in",
    "superseded",
    "allow_failure",
    "the gauge is off",
    "tokens in",
    "window.pwned",
];

/// The agent process: answers every llm step with a colour, a session and a cost.
const AGENT: &str = r#"cat > /dev/null; echo '{"outputs": {"colour": "teal"}, "session": "sess-1", "cost_usd": 0.25, "input_tokens": 1200, "output_tokens": 30}'"#;

fn project() -> Project {
    let project = Project::new();
    project.script("tour", "Tour every kind of step.", Some(TOUR));
    project.script("tour/child", "The child.", Some(CHILD));
    project.write("agent.sh", AGENT);
    project
}

/// A `mekara ui` serving the project, stopped when dropped.
pub(crate) struct Viewer {
    child: Child,
    /// The address it printed, with its token.
    pub(crate) url: String,
    /// `http://127.0.0.1:PORT`.
    base: String,
    token: String,
}

impl Viewer {
    /// `mekara ui` in `project`.
    pub(crate) fn start(project: &Project) -> Viewer {
        Viewer::spawn(project.command(&["ui", "--poll", "100ms"]))
    }

    /// `command`, a `mekara ui`, started.
    fn spawn(mut command: Command) -> Viewer {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn mekara ui");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the address");
        let url = line.trim().to_string();
        if url.is_empty() {
            let mut stderr = String::new();
            child
                .stderr
                .take()
                .expect("stderr")
                .read_to_string(&mut stderr)
                .ok();
            panic!("mekara ui printed no address: {stderr}");
        }
        let (base, token) = url.split_once("/?token=").expect("an address with a token");
        Viewer {
            base: base.to_string(),
            token: token.to_string(),
            url: url.clone(),
            child,
        }
    }

    /// `path` with the token.
    pub(crate) fn with_token(&self, path: &str) -> String {
        let join = if path.contains('?') { '&' } else { '?' };
        format!("{}{path}{join}token={}", self.base, self.token)
    }
}

impl Viewer {
    /// Stops the viewer; returns what it wrote to stderr.
    fn stop(mut self) -> String {
        let _ = self.child.kill();
        let mut stderr = String::new();
        if let Some(mut pipe) = self.child.stderr.take() {
            pipe.read_to_string(&mut stderr).expect("stderr");
        }
        stderr
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What curl got: the status and the body.
pub(crate) fn curl(args: &[&str]) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-s", "--max-time", "20", "-w", "\n%{http_code}"])
        .args(args)
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').expect("a status line");
    (status.trim().parse().expect("a status"), body.to_string())
}

fn get_json(url: &str) -> Json {
    let (status, body) = curl(&[url]);
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).expect("JSON")
}

/// What `page` shows in its `<main>` (the whole text when it has none), one element a line
/// (a break before each tag that opens a block), what varies redacted: run ids and the
/// token, and what the run's timing drew (each bar's geometry, a duration shown alone in an
/// element or in an estimate). The text a snapshot of a page pins.
pub(crate) fn page_main(page: &str) -> String {
    const BLOCKS: [&str; 17] = [
        "div", "p", "pre", "h1", "h2", "h3", "details", "summary", "form", "table", "tr", "li",
        "ul", "section", "header", "footer", "label",
    ];
    static TIMING: std::sync::OnceLock<[(regex::Regex, &str); 3]> = std::sync::OnceLock::new();
    let timing = TIMING.get_or_init(|| {
        let duration = r"\d+(?:\.\d)? (?:ms|s)|\d+ min \d\d s|\d+ h \d\d min";
        let regex = |pattern: &str| regex::Regex::new(pattern).expect("a regex");
        [
            (regex(r"<svg [^>]*>.*?</svg>"), "<svg>[BAR]</svg>"),
            (regex(&format!(">(?:{duration})<")), ">[DURATION]<"),
            (
                regex(&format!("(?:{duration}) (median|at the)")),
                "[DURATION] $1",
            ),
        ]
    });
    let main = page
        .split_once("<main id=\"content\">")
        .and_then(|(_, rest)| rest.split_once("</main>"))
        .map_or(page, |(main, _)| main);
    let mut out = String::new();
    for (i, piece) in main.split('<').enumerate() {
        if i > 0 {
            let name: String = piece
                .chars()
                .take_while(char::is_ascii_alphanumeric)
                .collect();
            if BLOCKS.contains(&name.as_str()) && !out.is_empty() {
                out.push('\n');
            }
            out.push('<');
        }
        out.push_str(piece);
    }
    for (pattern, with) in timing {
        out = pattern.replace_all(&out, *with).into_owned();
    }
    crate::common::redact(&out)
}

fn run(project: &Project, args: &[&str]) -> crate::common::Run {
    project.run(args, "")
}

/// The run's steps in `/api/runs/ID`, depth first: (script, step).
fn api_steps(detail: &Json) -> Vec<(String, Json)> {
    fn walk(frame: &Json, out: &mut Vec<(String, Json)>) {
        let script = frame["script"].as_str().unwrap_or("").to_string();
        for item in frame["items"].as_array().into_iter().flatten() {
            match item["item"].as_str() {
                Some("step") => out.push((script.clone(), item.clone())),
                Some("frame") => walk(item, out),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    for frame in detail["frames"].as_array().into_iter().flatten() {
        walk(frame, &mut out);
    }
    out
}

/// Makes the tour's run: waits at the question, is answered through the viewer, fails,
/// and is retried to the end. Returns its id.
fn tour(project: &Project, viewer: &Viewer) -> String {
    let agent = ["--agent-command", "sh agent.sh"];
    let stopped = run(project, &["run", agent[0], agent[1], "tour"]);
    stopped.expect_code(1);
    let id = project.run_ids().pop().expect("a run");

    let runs = get_json(&viewer.with_token("/api/runs"));
    assert_eq!(runs["runs"][0]["id"], id.as_str(), "{runs}");
    assert_eq!(runs["runs"][0]["state_key"], "waiting", "{runs}");
    let detail = get_json(&viewer.with_token(&format!("/api/runs/{id}")));
    assert_eq!(detail["question"]["question"], "Ship it?", "{detail}");
    assert_eq!(detail["question"]["choices"][1], "no", "{detail}");

    // The page's form: the token in its body, posted from the viewer's own origin.
    let page = curl(&[&viewer.with_token(&format!("/runs/{id}"))]).1;
    insta::assert_snapshot!(
        "the_tours_answer_form",
        lines_with(&page_main(&page), &["form", "button", "input"])
    );
    let answer_url = format!("{}/runs/{id}/answer", viewer.base);
    let before = project.journal(&id);
    let origin = format!("Origin: {}", viewer.base);
    // Without the token, with a wrong one, and from another site's page: refused, nothing
    // journaled.
    let (status, body) = curl(&["-H", &origin, "--data", "value=yes", &answer_url]);
    assert_eq!(status, 403, "{body}");
    insta::assert_snapshot!("an_answer_without_the_token", page_main(&body));
    let (status, _) = curl(&[
        "-H",
        &origin,
        "--data",
        &format!("value=yes&token={}0", &viewer.token[1..]),
        &answer_url,
    ]);
    assert_eq!(status, 403);
    let form = format!("value=yes&token={}", viewer.token);
    let (status, body) = curl(&[
        "-H",
        "Origin: http://evil.example",
        "--data",
        &form,
        &answer_url,
    ]);
    assert_eq!(status, 403, "{body}");
    insta::assert_snapshot!("an_answer_from_another_site", page_main(&body));
    let (status, _) = curl(&[
        "-H",
        "Sec-Fetch-Site: cross-site",
        "--data",
        &form,
        &answer_url,
    ]);
    assert_eq!(status, 403);
    // A rebinding name in `Host`: refused even with the token.
    let (status, body) = curl(&["-H", "Host: evil.example", &viewer.with_token("/api/runs")]);
    assert_eq!(status, 421, "{body}");
    assert_eq!(
        project.journal(&id),
        before,
        "a refused action journals nothing"
    );
    // Not a choice: refused with the choices named. Regression (issue 42): the status was
    // chosen by searching the message for "not found", which this refusal quotes.
    let mut refusals = String::new();
    for given in ["maybe", "not+found"] {
        let (status, body) = curl(&[
            "-H",
            &origin,
            "--data",
            &format!("value={given}&token={}", viewer.token),
            &answer_url,
        ]);
        assert_eq!(status, 409, "{body}");
        refusals.push_str(&format!("value={given}\n{}\n", page_main(&body)));
        assert_eq!(project.journal(&id), before);
    }
    insta::assert_snapshot!("answers_that_are_not_a_choice", refusals);

    // With the token, from its own page: answered, and back to the run's page.
    let (status, body) = curl(&["-H", &origin, "-D", "-", "--data", &form, &answer_url]);
    assert_eq!(status, 303, "{body}");
    insta::assert_snapshot!(
        "the_answers_redirect",
        crate::common::redact(&lines_with(
            &body.to_lowercase().replace('\r', ""),
            &["location:"]
        ))
    );
    let detail = get_json(&viewer.with_token(&format!("/api/runs/{id}")));
    assert!(detail["question"].is_null(), "{detail}");
    let asked = api_steps(&detail)
        .into_iter()
        .find(|(_, s)| s["input"]["kind"] == "ask")
        .expect("the ask step");
    assert_eq!(asked.1["result"]["answer"], "yes");
    assert_eq!(asked.1["result"]["answered_by"], "viewer");

    // Goes on, fails at the step that is not fixed yet, and is retried after the fix.
    let failed = run(project, &["run", "--resume", &id, agent[0], agent[1]]);
    failed.expect_code(1);
    let detail = get_json(&viewer.with_token(&format!("/api/runs/{id}")));
    insta::assert_snapshot!(
        "the_commands_after_the_failure",
        crate::common::redact(&format!("{:#}", detail["commands"]))
    );
    project.write("fixed", "");
    let retried = run(
        project,
        &["run", "--resume", &id, "--retry", agent[0], agent[1]],
    );
    retried.expect_code(0);
    id
}

#[test]
fn the_viewer_shows_a_whole_run_and_takes_an_answer_only_with_its_token_from_its_own_page() {
    let project = project();
    let viewer = Viewer::start(&project);
    assert!(
        viewer.url.starts_with("http://127.0.0.1:"),
        "{}",
        viewer.url
    );
    let id = tour(&project, &viewer);

    let detail = get_json(&viewer.with_token(&format!("/api/runs/{id}")));
    assert_eq!(detail["state_key"], "completed", "{detail}");
    assert_eq!(detail["spent"]["cost_usd"], 0.25, "{detail}");
    assert_eq!(detail["spent"]["input_tokens"], 1200, "{detail}");
    let steps = api_steps(&detail);
    let find = |what: &str| {
        steps
            .iter()
            .filter(|(_, s)| s["summary"].as_str().unwrap_or("").contains(what))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        find("echo child got")[0].0,
        "tour:child",
        "the nested frame"
    );
    let lanes: Vec<&Json> = find("echo lane")
        .iter()
        .map(|(_, s)| &s["member"])
        .collect();
    assert_eq!(lanes.len(), 2);
    assert!(lanes.contains(&&Json::from(0)) && lanes.contains(&&Json::from(1)));
    let boom = &find("boom")[0].1;
    assert_eq!(boom["mark"], "allowed");
    insta::assert_snapshot!(
        "the_allowed_failures_error",
        project.scrub(boom["result"]["error"].as_str().expect("an error"))
    );
    let llm = &find("llm: Name a colour")[0].1;
    assert_eq!(llm["result"]["outputs"]["colour"], "teal");
    assert_eq!(llm["result"]["agent"]["cost_usd"], 0.25);
    assert!(llm["waited_ms"].is_u64(), "{llm}");
    let fixed = find("test -f fixed");
    assert_eq!(fixed.len(), 2, "the failed attempt and the retry");
    assert_eq!(fixed[0].1["mark"], "failed");
    assert_eq!(fixed[0].1["superseded"], true);
    assert_eq!(fixed[1].1["mark"], "ok");
    assert_eq!(fixed[1].1["superseded"], false);

    // The page: every row, and the hostile output as text.
    let (status, page) = curl(&[&viewer.with_token(&format!("/runs/{id}"))]);
    assert_eq!(status, 200);
    insta::assert_snapshot!("the_tours_page", lines_with(&page_main(&page), TOUR_ROWS));
    for lane in 0..2 {
        let shown = format!("<span class=\"lane\">∥ group 2, lane {lane}</span>");
        assert_eq!(page.matches(&shown).count(), 1, "{page}");
    }
    assert!(!page.contains("<script>window"), "{page}");
    assert_eq!(
        page.matches("<script").count(),
        1,
        "only the viewer's own script"
    );

    // The runs page, and reading without the token: refused.
    let (status, list) = curl(&[&viewer.url]);
    assert_eq!(status, 200);
    insta::assert_snapshot!("the_tours_row", lines_with(&page_main(&list), &["<tr"]));
    let (status, _) = curl(&[&format!("{}/api/runs", viewer.base)]);
    assert_eq!(status, 403);
    let (status, list) = curl(&[&viewer.with_token("/?state=failed")]);
    assert_eq!(status, 200);
    insta::assert_snapshot!("no_run_matches", project.scrub(&page_main(&list)));
}

#[test]
fn the_event_stream_says_when_a_run_moved() {
    let project = project();
    let viewer = Viewer::start(&project);
    project.script(
        "slow",
        "Wait for a file.",
        Some("def execute(request):\n    auto(\"while [ ! -f go ]; do sleep 0.05; done; echo went\")\n    auto(\"echo after\")\n"),
    );
    let mut events = Command::new("curl")
        .args([
            "-s",
            "-N",
            "--max-time",
            "30",
            &viewer.with_token("/events"),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("curl");
    let mut lines = BufReader::new(events.stdout.take().expect("stdout")).lines();
    assert_eq!(
        lines.next().expect("a line").expect("text"),
        "event: change",
        "the first event says how things are"
    );
    let mut running = project
        .command(&["run", "slow"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut changes = 0;
    while changes < 1 && Instant::now() < deadline {
        let line = lines.next().expect("a line").expect("text");
        if line == "event: change" {
            changes += 1;
        }
    }
    assert_eq!(changes, 1, "a new run is an event");
    project.write("go", "");
    assert!(running.wait().expect("wait").success());
    let id = project.run_ids().pop().expect("a run");
    let runs = get_json(&viewer.with_token("/api/runs"));
    assert_eq!(runs["runs"][0]["id"], id.as_str());
    let _ = events.kill();
    let _ = events.wait();
}

/// Runs `steps` in headless Chromium (Debian's, as `.ci/run` installs it) through the
/// DevTools protocol (`tests/ui/browser.js`, on Node's own WebSocket); panics with what
/// failed. Returns what the driver printed.
pub(crate) fn browse(steps: &Json) -> String {
    let chromium = Path::new("/usr/bin/chromium");
    assert!(
        chromium.exists(),
        "the browser tests need Debian's `chromium` (`apt-get install chromium`; `.ci/run` installs it)"
    );
    let work = tempfile::tempdir().expect("tempdir");
    let plan = work.path().join("plan.json");
    let plan_json = serde_json::json!({
        "chromium": chromium,
        "profile": work.path().join("profile"),
        "steps": steps,
    });
    std::fs::write(&plan, plan_json.to_string()).expect("write the plan");
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui/browser.js");
    let out = Command::new("node")
        .arg("--experimental-websocket")
        .arg(&driver)
        .arg(&plan)
        .output()
        .expect("node (20.10 or later) runs the browser driver");
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "the browser driver failed:\n{printed}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    printed
}

/// Where the screenshots are kept.
pub(crate) fn shots() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ui");
    std::fs::create_dir_all(&dir).expect("mkdir");
    dir
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs Chromium")]
fn chromium_draws_the_runs_and_a_run_and_keeps_a_screenshot() {
    let project = project();
    let viewer = Viewer::start(&project);
    let id = tour(&project, &viewer);
    let work = tempfile::tempdir().expect("tempdir");
    let (list, page) = (work.path().join("list.html"), work.path().join("run.html"));
    let (wide, narrow) = (
        shots().join("run-page.png"),
        shots().join("run-page-narrow.png"),
    );
    for shot in [&wide, &narrow] {
        let _ = std::fs::remove_file(shot);
    }
    let connected = "document.body.dataset.connected === 'yes'";
    browse(&serde_json::json!([
        {"open": viewer.url},
        {"wait": connected},
        {"dom": list},
        {"open": viewer.with_token(&format!("/runs/{id}"))},
        {"wait": connected},
        // A step opened, as a person would, to show its output in the screenshot.
        {"eval": "document.querySelectorAll('details.step.llm').forEach(d => d.open = true)"},
        {"dom": page},
        {"shot": wide, "width": 1280, "height": 1000},
        {"shot": narrow, "width": 420, "height": 900},
        // The hostile output's script never ran.
        {"wait": "window.pwned === undefined"},
    ]));
    let list = std::fs::read_to_string(list).expect("the runs page's DOM");
    insta::assert_snapshot!(
        "the_tours_row_in_chromium",
        lines_with(&page_main(&list), &["<tr"])
    );
    let dom = std::fs::read_to_string(page).expect("the run page's DOM");
    insta::assert_snapshot!(
        "the_tours_page_in_chromium",
        lines_with(&page_main(&dom), TOUR_ROWS)
    );
    assert_eq!(dom.matches("∥ group 2, lane").count(), 2, "{dom}");
    for shot in [&wide, &narrow] {
        let png = std::fs::read(shot).expect("a screenshot");
        assert!(png.starts_with(b"\x89PNG"), "{} is a PNG", shot.display());
    }
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs Chromium")]
fn chromium_pages_follow_a_run_as_it_moves_without_a_reload() {
    let project = project();
    project.script(
        "slow",
        "Wait twice.",
        Some(
            "def execute(request):\n    auto(\"while [ ! -f go ]; do sleep 0.05; done; echo one\")\n    auto(\"while [ ! -f go2 ]; do sleep 0.05; done; echo two\")\n",
        ),
    );
    let viewer = Viewer::start(&project);
    let mut running = project
        .command(&["run", "slow"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run");
    let deadline = Instant::now() + Duration::from_secs(20);
    let id = loop {
        if let Some(id) = project.run_ids().pop()
            && project.journal(&id).contains("\"push\"")
        {
            break id;
        }
        assert!(Instant::now() < deadline, "the run never started");
        std::thread::sleep(Duration::from_millis(50));
    };
    let connected = "document.body.dataset.connected === 'yes'";
    let root = project.root();
    let steps = format!("document.querySelector('tr[data-run=\"{id}\"] td.num').textContent");
    browse(&serde_json::json!([
        {"open": viewer.url},
        {"wait": connected},
        {"wait": "Number(document.body.dataset.refreshed || 0) >= 1"},
        {"eval": "window.kept = 1"},
        // The page's next fetch is slow, and someone starts typing in the filter while it
        // is on its way: what they typed stays, and the page waits for them to leave it.
        {"eval": "const slow = window.fetch; window.fetch = (...a) => { window.fetching = true; return new Promise(d => setTimeout(d, 1500)).then(() => slow(...a)); }"},
        {"touch": root.join("go")},
        {"wait": "window.fetching === true"},
        {"eval": "const f = document.querySelector('input[name=script]'); f.focus(); f.value = 'sl'"},
        {"eval": "new Promise(done => setTimeout(done, 2500))"},
        {"wait": format!("document.querySelector('input[name=script]').value === 'sl' && {steps} === '0'"), "timeout_ms": 1},
        {"eval": "document.activeElement.blur()"},
        {"wait": format!("window.kept === 1 && {steps} === '1'")},
        {"open": viewer.with_token(&format!("/runs/{id}"))},
        {"wait": connected},
        {"eval": "window.kept = 2"},
        {"touch": root.join("go2")},
        {"wait": "window.kept === 2 && document.getElementById('state').textContent === 'completed' && document.querySelectorAll('details.step').length === 2"},
    ]));
    assert!(running.wait().expect("wait").success());
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs PostgreSQL")]
fn the_viewer_shows_the_shared_store_and_answers_and_cancels_its_runs() {
    let project = project();
    project.write(".mekara/config.toml", "[store]\nproject = \"acme\"\n");
    let db = crate::postgres::Db::migrated(&project);
    let laptop = db.host("laptop", project);
    let viewer = Viewer::spawn(laptop.command(&["ui", "--poll", "100ms"]));

    let stopped = laptop.run(&["run", "--agent-command", "sh agent.sh", "tour"]);
    stopped.expect_code(1);
    let id = db.ids().pop().expect("a run");
    let runs = get_json(&viewer.with_token("/api/runs"));
    assert_eq!(runs["runs"][0]["id"], id.as_str(), "{runs}");
    assert_eq!(runs["runs"][0]["host"], "laptop", "{runs}");
    assert_eq!(runs["runs"][0]["state_key"], "waiting", "{runs}");
    assert_eq!(runs["runs"][0]["cost_usd"], 0.25, "{runs}");

    // `/api`: the token in a header, the answer in the body.
    let answer_url = format!("{}/api/runs/{id}/answer", viewer.base);
    let (status, body) = curl(&["--data", "value=no", &answer_url]);
    assert_eq!(status, 403, "{body}");
    let token = format!("X-Mekara-Token: {}", viewer.token);
    let (status, body) = curl(&["-H", &token, "--data", "value=no", &answer_url]);
    assert_eq!(status, 200, "{body}");
    let answered: Json = serde_json::from_str(&body).expect("JSON");
    assert_eq!(answered["ok"], true, "{answered}");
    let detail = get_json(&viewer.with_token(&format!("/api/runs/{id}")));
    let asked = api_steps(&detail)
        .into_iter()
        .find(|(_, s)| s["input"]["kind"] == "ask")
        .expect("the ask step");
    assert_eq!(asked.1["result"]["answer"], "no");
    let (status, page) = curl(&[&viewer.with_token(&format!("/runs/{id}"))]);
    assert_eq!(status, 200);
    insta::assert_snapshot!(
        "the_tours_page_from_the_shared_store",
        lines_with(&page_main(&page), &["tour:child", "tokens in"])
    );

    // A queued run: the page offers to cancel it; without the token, or from another
    // site, nothing happens.
    let submitted = laptop.run(&[
        "submit",
        "--agent-command",
        "sh agent.sh",
        "tour/child",
        "x",
    ]);
    submitted.expect_code(0);
    let queued = submitted.stdout.trim().to_string();
    let runs = get_json(&viewer.with_token("/api/runs"));
    assert_eq!(runs["runs"][0]["id"], queued.as_str(), "{runs}");
    assert_eq!(runs["runs"][0]["state_key"], "queued", "{runs}");
    let (_, page) = curl(&[&viewer.with_token(&format!("/runs/{queued}"))]);
    insta::assert_snapshot!(
        "the_cancel_form",
        lines_with(&page_main(&page), &["cancel"])
    );
    let cancel_url = format!("{}/runs/{queued}/cancel", viewer.base);
    let origin = format!("Origin: {}", viewer.base);
    let (status, _) = curl(&["-H", &origin, "--data", "", &cancel_url]);
    assert_eq!(status, 403);
    let form = format!("token={}", viewer.token);
    let (status, _) = curl(&[
        "-H",
        "Origin: http://evil.example",
        "--data",
        &form,
        &cancel_url,
    ]);
    assert_eq!(status, 403);
    let runs = get_json(&viewer.with_token("/api/runs"));
    assert_eq!(runs["runs"][0]["state_key"], "queued", "{runs}");
    let (status, body) = curl(&["-H", &origin, "--data", &form, &cancel_url]);
    assert_eq!(status, 303, "{body}");
    insta::assert_snapshot!("the_cancelled_runs_redirect", page_main(&body));
    let runs = get_json(&viewer.with_token("/api/runs"));
    assert_eq!(runs["runs"][0]["state_key"], "cancelled", "{runs}");
    let (_, page) = curl(&[&viewer.with_token(&format!("/runs/{queued}"))]);
    assert!(!page.contains("/cancel\""), "{page}");
}

/// A wait for a rate limit of the model is shown in its frame, on the page and in `/api`.
#[test]
fn the_viewer_shows_a_wait_for_a_rate_limit_in_its_frame() {
    let project = crate::unattended::project();
    crate::unattended::answers(
        &project,
        &json!({"colour[1]#1": {"error": "429 Too Many Requests", "rate_limited": true, "retry_after": 8}}),
    );
    let mut command = project.command(&[
        "run",
        "--agent-command",
        crate::unattended::AGENT_COMMAND,
        "colour",
    ]);
    command.env("MEKARA_BACKOFF_SCALE", "0.001");
    crate::common::run_with_stdin(command, "").expect_code(0);
    let id = project.run_ids().pop().expect("a run");
    let viewer = Viewer::start(&project);
    let detail = get_json(&viewer.with_token(&format!("/api/runs/{id}")));
    let items = detail["frames"][0]["items"].as_array().expect("items");
    let wait = items
        .iter()
        .find(|i| i["item"] == "wait")
        .unwrap_or_else(|| panic!("no wait in {detail}"));
    assert_eq!(
        (&wait["step"], &wait["attempt"], &wait["wait_ms"]),
        (&json!("colour[1]"), &json!(2), &json!(8))
    );
    let page = curl(&[&viewer.with_token(&format!("/runs/{id}"))]).1;
    insta::assert_snapshot!(
        "the_wait_for_a_rate_limit",
        lines_with(&page_main(&page), &["class=\"wait\"", "429"])
    );
}

/// A script whose steps the tests hold open: two shell steps that wait for the files `go0`
/// and `go1`, then the llm step.
const COLOUR: &str = r#"
def execute(request):
    auto("while [ ! -f go0 ]; do sleep 0.05; done; echo zero")
    auto("while [ ! -f go1 ]; do sleep 0.05; done; echo one")
    g = llm("Name a colour.", expects = {"colour": "a colour"})
    auto("echo got " + g.outputs["colour"])
"#;

/// An agent process that answers only once the file `go` is there.
const SLOW_AGENT: &str = r#"while [ ! -f go ]; do sleep 0.05; done; cat > /dev/null; echo '{"outputs": {"colour": "teal"}}'"#;

/// Polls `/api/runs` until run `id` is in state `key`; returns its row.
fn wait_for_state(viewer: &Viewer, id: &str, key: &str) -> Json {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let runs = get_json(&viewer.with_token("/api/runs"));
        if let Some(row) = runs["runs"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["id"] == id)
            && row["state_key"] == key
        {
            return row.clone();
        }
        assert!(
            Instant::now() < deadline,
            "run {id} never was `{key}`: {runs}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for the first run of the project's runs folder; returns its id.
fn first_run(project: &Project) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(id) = project.run_ids().pop() {
            return id;
        }
        assert!(Instant::now() < deadline, "the run never started");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A run held at its llm step (a person at the terminal, then an agent process of an
/// unattended run) is listed as waiting for an llm step, apart from a run that is busy
/// with its own steps; answered, it moves on; its mekara killed while it waits, it is
/// interrupted, whatever the note beside its journal still says.
#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs Chromium")]
fn a_run_whose_llm_step_waits_for_the_agent_is_listed_as_waiting_for_an_llm_step() {
    let project = Project::new();
    project.script("colour", "Name a colour.", Some(COLOUR));
    project.write("slow-agent.sh", SLOW_AGENT);
    let viewer = Viewer::start(&project);

    // A person at the terminal: the llm step waits for a line on stdin.
    let mut at_terminal = project.spawn(&["run", "colour"]);
    let id = first_run(&project);
    wait_for_state(&viewer, &id, "active");
    let detail_url = viewer.with_token(&format!("/api/runs/{id}"));
    let now_of = |kind: &str| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let detail = get_json(&detail_url);
            if detail["now"]["kind"] == kind {
                return detail["now"].clone();
            }
            assert!(Instant::now() < deadline, "never `{kind}` now: {detail}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let now = now_of("shell");
    assert_eq!(now["script"], "colour", "{now}");
    assert_eq!(now["index"], 0, "{now}");
    // The pages are open while the shell step runs, and follow the run to its llm step.
    let state = format!("document.querySelector('tr[data-run=\"{id}\"] .state').textContent");
    let now_row = "(document.getElementById('now') || {textContent: ''}).textContent";
    browse(&json!([
        {"open": viewer.with_token(&format!("/runs/{id}"))},
        {"wait": "document.body.dataset.connected === 'yes'"},
        {"wait": format!("{now_row}.includes('colour[0] shell step running')")},
        {"eval": "window.kept = 1"},
        {"touch": project.root().join("go0")},
        {"wait": format!("window.kept === 1 && {now_row}.includes('colour[1] shell step running') && document.querySelectorAll('details.step').length === 1")},
        {"open": viewer.url},
        {"wait": "document.body.dataset.connected === 'yes'"},
        {"wait": format!("{state} === 'active'")},
        {"eval": "window.kept = 1"},
        {"touch": project.root().join("go1")},
        {"wait": format!("window.kept === 1 && {state} === 'waiting for an llm step'")},
        {"open": viewer.with_token(&format!("/runs/{id}"))},
        {"wait": format!("{now_row}.includes('colour[2] llm step waiting for the agent')")},
    ]));
    let row = wait_for_state(&viewer, &id, "llm");
    assert_eq!(row["state"], "waiting for an llm step", "{row}");
    let now = now_of("llm");
    assert_eq!(now["index"], 2, "{now}");
    assert_eq!(api_steps(&get_json(&detail_url)).len(), 2);
    {
        let mut stdin = at_terminal.stdin.take().expect("stdin");
        std::io::Write::write_all(&mut stdin, b"teal\n").expect("answer");
    }
    assert!(at_terminal.wait().expect("wait").success());
    wait_for_state(&viewer, &id, "completed");
    assert!(get_json(&detail_url)["now"].is_null());

    // An agent process of an unattended run; its mekara is killed while the agent works.
    let mut unattended = project
        .command(&["run", "--agent-command", "sh slow-agent.sh", "colour"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run");
    let deadline = Instant::now() + Duration::from_secs(20);
    let second = loop {
        if let Some(second) = project.run_ids().into_iter().find(|r| *r != id) {
            break second;
        }
        assert!(Instant::now() < deadline, "the second run never started");
        std::thread::sleep(Duration::from_millis(50));
    };
    wait_for_state(&viewer, &second, "llm");
    unattended.kill().expect("kill mekara");
    unattended.wait().expect("reap");
    let row = wait_for_state(&viewer, &second, "interrupted");
    assert_eq!(row["state"], "interrupted", "{row}");
    project.write("go", "");
}

/// The same against the shared store: the viewer on the host that drives the run reads the
/// note the run keeps there.
#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs PostgreSQL")]
fn the_shared_store_lists_a_run_waiting_for_an_llm_step() {
    let project = Project::new();
    project.write(".mekara/config.toml", "[store]\nproject = \"acme\"\n");
    project.script("colour", "Name a colour.", Some(COLOUR));
    let db = crate::postgres::Db::migrated(&project);
    project.write("go0", "");
    project.write("go1", "");
    let laptop = db.host("laptop", project);
    let viewer = Viewer::spawn(laptop.command(&["ui", "--poll", "100ms"]));
    let mut at_terminal = laptop
        .command(&["run", "colour"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run");
    let deadline = Instant::now() + Duration::from_secs(20);
    let id = loop {
        if let Some(id) = db.ids().pop() {
            break id;
        }
        assert!(Instant::now() < deadline, "the run never started");
        std::thread::sleep(Duration::from_millis(50));
    };
    let row = wait_for_state(&viewer, &id, "llm");
    assert_eq!(row["state"], "waiting for an llm step", "{row}");
    assert_eq!(row["host"], "laptop", "{row}");
    {
        let mut stdin = at_terminal.stdin.take().expect("stdin");
        std::io::Write::write_all(&mut stdin, b"teal\n").expect("answer");
    }
    assert!(at_terminal.wait().expect("wait").success());
    wait_for_state(&viewer, &id, "completed");
}

/// Regression (issue 40): a step that printed 50 MB made a run's page as big as its journal
/// (58.7 MB) and the server held it all. The page and `/api` show the head and tail of the
/// output with a link to the whole, which serves it as plain text, with the token only.
#[test]
fn a_huge_output_is_clipped_on_the_page_and_in_the_api_with_a_link_to_the_whole() {
    let project = Project::new();
    project.script(
        "loud",
        "Print a lot.",
        Some("def execute(request):\n    auto(\"seq 1 7000000\")\n    auto(\"echo quiet\")\n"),
    );
    run(&project, &["run", "loud"]).expect_code(0);
    let id = project.run_ids().pop().expect("a run");
    assert!(project.journal(&id).len() > 8_000_000);
    let viewer = Viewer::start(&project);
    let (status, page) = curl(&[&viewer.with_token(&format!("/runs/{id}"))]);
    assert_eq!(status, 200);
    assert!(page.len() < 200_000, "a page of {} bytes", page.len());
    let link = format!("/runs/{id}/output/2?token={}", viewer.token);
    insta::assert_snapshot!(
        "the_huge_outputs_cut",
        lines_with(&page_main(&page), &["lines cut here", "whole-output"])
    );
    let detail = get_json(&viewer.with_token(&format!("/api/runs/{id}")));
    let steps = api_steps(&detail);
    let loud = &steps[0].1;
    let clipped = &loud["output_clipped"];
    assert_eq!(clipped["whole"], format!("/runs/{id}/output/2"), "{loud}");
    assert!(loud["result"]["output"].as_str().expect("output").len() < 100_000);
    assert_eq!(
        steps[1].1["output_clipped"],
        Json::Null,
        "a short output is whole"
    );
    let (status, whole) = curl(&[&format!("{}{link}", viewer.base)]);
    assert_eq!(status, 200);
    assert_eq!(Some(whole.len() as u64), clipped["bytes"].as_u64());
    assert!(whole.starts_with("1\n2\n3\n") && whole.ends_with("6999999\n7000000\n"));
    let (status, _) = curl(&[&format!("{}/runs/{id}/output/2", viewer.base)]);
    assert_eq!(status, 403, "the whole output wants the token");
    let (status, body) = curl(&[&viewer.with_token(&format!("/runs/{id}/output/1"))]);
    assert_eq!((status, body.trim()), (404, format!("step not found: run `{id}` has no step at event 1 of its journal; follow the link under a clipped output on the run's page").as_str()));
}

/// Regression (issue 40): event streams had no cap. One past the cap is refused with 503
/// and a body that says why; one closed gives its place back.
#[test]
fn the_event_streams_past_the_cap_are_refused() {
    use std::io::Write as _;
    let project = project();
    let viewer = Viewer::start(&project);
    let address = viewer.base.trim_start_matches("http://").to_string();
    let open = |address: &str| {
        let mut stream = std::net::TcpStream::connect(address).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        write!(
            stream,
            "GET /events?token={} HTTP/1.1\r\nHost: {address}\r\n\r\n",
            viewer.token
        )
        .expect("request");
        let mut head = [0u8; 12];
        stream.read_exact(&mut head).expect("a status line");
        (stream, String::from_utf8_lossy(&head).into_owned())
    };
    let mut streams = Vec::new();
    for _ in 0..32 {
        let (stream, head) = open(&address);
        assert_eq!(head, "HTTP/1.1 200");
        streams.push(stream);
    }
    let (status, body) = curl(&[&viewer.with_token("/events")]);
    assert_eq!(
        (status, body.trim()),
        (
            503,
            "the viewer already has 32 event streams open, the most it serves at once; close some of its pages (or reload this one later)"
        )
    );
    drop(streams.pop());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, head) = open(&address);
        if head == "HTTP/1.1 200" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "a closed stream never gave its place back"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Regression (issue 40): the refusal (and warning) of an address other machines reach said
/// whoever reaches it reads every run, when without the token they get only the stylesheet
/// and the script. Refused before it listens: nothing binds beyond loopback here.
#[test]
fn a_non_loopback_address_says_exactly_what_it_exposes() {
    let project = Project::new();
    let run = run(&project, &["ui", "--bind", "0.0.0.0:0"]);
    run.expect_code(2);
    assert_eq!(
        run.stderr.trim(),
        "error: `0.0.0.0:0` is not a loopback address: without the printed token, whoever reaches it gets only the viewer's stylesheet and script; with the token, they read every run of this store (outputs included) and answer and cancel runs, and the token travels unencrypted (plain HTTP). To serve other machines anyway, name the host they will use with `--allow-host HOST`"
    );
}

/// The command the viewer (and `mekara runs show`) gives for going on with an unattended
/// run names the run's agent command, quoted for the shell, so that running it as shown
/// resumes the run unattended, with the command intact.
#[test]
fn the_resume_command_of_an_unattended_run_keeps_its_agent_command_quoted() {
    let project = Project::new();
    project.script(
        "gauge",
        "Fix the gauge, then name a colour.",
        Some(
            r#"
def execute(request):
    ask("Go on?")
    auto("test -f fixed || (echo not fixed yet; exit 3)", context = "Fails until fixed")
    llm("Name a colour.", expects = {"colour": "a colour"})
"#,
        ),
    );
    // The agent checks that its command reached it whole: `A` holds `$x`, not its value.
    project.write(
        "agent.sh",
        r#"test "$A" = '$x' || exit 9; cat > /dev/null; echo '{"outputs": {"colour": "teal"}}'"#,
    );
    let agent = "A='$x' sh agent.sh";
    run(&project, &["run", "--agent-command", agent, "gauge"]).expect_code(1);
    let id = project.run_ids().pop().expect("a run");
    let quoted = r"'A='\''$x'\'' sh agent.sh'";
    let answered = run(&project, &["answer", &id, "yes"]);
    assert_eq!(
        answered.stdout.trim(),
        format!(
            "answered `gauge[0]` with `yes`; go on with `mekara run --resume {id} --agent-command {quoted}`"
        ),
        "{}",
        answered.stderr
    );
    run(
        &project,
        &["run", "--resume", &id, "--agent-command", agent],
    )
    .expect_code(1);
    let viewer = Viewer::start(&project);
    let detail = get_json(&viewer.with_token(&format!("/api/runs/{id}")));
    assert_eq!(
        detail["commands"],
        json!([
            format!("mekara run --resume {id} --agent-command {quoted} --retry"),
            format!("mekara run --resume {id} --agent-command {quoted}"),
        ]),
        "{detail}"
    );
    let shown = run(&project, &["runs", "show", &id]);
    insta::assert_snapshot!(
        "the_resume_command_in_runs_show",
        project.scrub(&lines_with(&shown.stdout, &["resume it with"]))
    );

    // Run as shown, after the fix: the agent answers the llm step.
    project.write("fixed", "");
    let retry = detail["commands"][0].as_str().expect("a command");
    let out = project.shell(retry).output().expect("sh");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let journal = project.journal(&id);
    assert!(journal.contains(r#""colour":"teal""#), "{journal}");
    assert!(
        journal.contains(r#"{"event":"agent","command":"A='$x' sh agent.sh","ignorable":true"#),
        "{journal}"
    );
}

/// Ids no run of mekara's has, each put directly where a store keeps runs: markup and
/// spaces, a query and a fragment, a letter outside ASCII.
const HOSTILE_IDS: [&str; 3] = ["\"><img src=x onerror=window.pwned=1>", "a b?c#d", "runé"];

/// `id` as a path segment: every byte but letters and digits percent-encoded.
fn encoded(id: &str) -> String {
    id.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A script that waits for an answer, so its page has the answer form.
const WAITS: &str = "def execute(request):\n    ask(\"Ship it?\", choices = [\"yes\", \"no\"])\n";

/// Asks the viewer for a hostile `id` in every place an id goes: its page and `/api`, a
/// step's whole output, the answer and cancel forms, the event stream. Each is refused
/// with the id shown as text (never markup), and nothing is journaled. Returns what the
/// id's page shows, headed by the id.
fn ask_for_hostile(viewer: &Viewer, id: &str) -> String {
    let path = format!("/runs/{}", encoded(id));
    let (status, page) = curl(&[&viewer.with_token(&path)]);
    assert_eq!(status, 404, "{page}");
    let shown = format!("{id}\n{}\n", page_main(&page));
    let (status, body) = curl(&[&viewer.with_token(&format!("/api{path}"))]);
    assert_eq!(status, 404, "{body}");
    let error: Json = serde_json::from_str(&body).expect("JSON");
    assert_eq!(error["error"], format!("run `{id}` not found"), "{body}");
    let (status, _) = curl(&[&viewer.with_token(&format!("{path}/output/1"))]);
    assert_eq!(status, 404);
    let origin = format!("Origin: {}", viewer.base);
    let form = format!("value=yes&token={}", viewer.token);
    for action in ["answer", "cancel"] {
        let url = format!("{}{path}/{action}", viewer.base);
        let (status, body) = curl(&["-H", &origin, "--data", &form, &url]);
        assert!(matches!(status, 404 | 409), "{action}: {status} {body}");
        assert!(!body.contains("<img"), "{body}");
    }
    let (status, body) = curl(&[
        "--max-time",
        "2",
        &viewer.with_token(&format!("/events?run={}", encoded(id))),
    ]);
    assert!(
        body.starts_with("event: change\ndata: "),
        "{status}: {body}"
    );
    shown
}

/// Regression (issue 42): a run id reached the pages as it was (a link's id was neither
/// HTML-escaped nor URL-encoded) and a store listed whatever file or row it found. Journals
/// whose names are hostile ids, copied in beside a real run: the store skips them with a
/// warning that names them, every place an id goes refuses them as text, and in Chromium
/// no script of theirs runs while the real run's forms stay whole.
#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs Chromium")]
fn hostile_run_ids_in_the_runs_folder_are_skipped_refused_and_never_markup() {
    let project = Project::new();
    project.script("waits", "Wait for an answer.", Some(WAITS));
    run(&project, &["run", "waits"]).expect_code(1);
    let id = project.run_ids().pop().expect("a run");
    let journal = project.journal(&id);
    for hostile in HOSTILE_IDS {
        project.write(&format!(".mekara/runs/{hostile}.jsonl"), &journal);
    }
    let viewer = Viewer::start(&project);
    let runs = get_json(&viewer.with_token("/api/runs"));
    let ids: Vec<&str> = runs["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter_map(|r| r["id"].as_str())
        .collect();
    assert_eq!(ids, [id.as_str()], "{runs}");
    let pages: String = HOSTILE_IDS
        .iter()
        .map(|hostile| ask_for_hostile(&viewer, hostile))
        .collect();
    insta::assert_snapshot!("hostile_ids_in_the_runs_folder", pages);
    // A `/` in an id can only come encoded in a link: it is one id, not two segments.
    let (status, body) = curl(&[&viewer.with_token("/api/runs/a%2Fb")]);
    assert_eq!((status, body.contains("run `a/b` not found")), (404, true));
    let page = curl(&[&viewer.with_token(&format!("/runs/{id}"))]).1;
    insta::assert_snapshot!(
        "the_answer_form_beside_hostile_ids",
        lines_with(&page_main(&page), &["form", "button", "input"])
    );
    let hostile_page = viewer.with_token(&format!("/runs/{}", encoded(HOSTILE_IDS[0])));
    browse(&json!([
        {"open": viewer.url},
        {"wait": format!("document.querySelectorAll('tr.run').length === 1 && document.querySelector('tr.run').dataset.run === '{id}'")},
        {"open": hostile_page},
        {"wait": format!("document.querySelector('p.problem').textContent === 'run `{}` not found'", HOSTILE_IDS[0].replace('\'', "\\'"))},
        {"open": viewer.with_token(&format!("/runs/{id}"))},
        {"wait": format!("document.querySelector('form.answer').getAttribute('action') === '/runs/{id}/answer' && document.querySelectorAll('form.answer button').length === 2")},
        {"wait": "window.pwned === undefined && document.querySelectorAll('img').length === 0"},
    ]));
    let warnings = viewer.stop();
    for hostile in HOSTILE_IDS {
        let warning = format!(
            "skipped `{}` in `{}`: it is not a run id (ASCII letters, digits, `-` and `_`, at most 64), so mekara did not make it; rename or remove it",
            hostile.escape_debug(),
            project.root().join(".mekara/runs").display()
        );
        assert_eq!(
            warnings.matches(&warning).count(),
            1,
            "warned once: {warnings}"
        );
    }
}

/// The same in the shared store, where a run id also names the file `store export` writes:
/// the schema refuses hostile ids; a database that had them before its migration to the
/// check keeps them, and every reader skips them with a warning (`runs`, `store export`,
/// the viewer), so no file is written outside the runs folder and no script runs.
#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs PostgreSQL and Chromium")]
fn hostile_run_ids_in_the_shared_store_are_refused_by_its_schema_and_skipped_by_its_readers() {
    let project = Project::new();
    project.write(".mekara/config.toml", "[store]\nproject = \"acme\"\n");
    project.script("waits", "Wait for an answer.", Some(WAITS));
    let db = crate::postgres::Db::migrated(&project);
    let laptop = db.host("laptop", project);
    laptop.run(&["run", "waits"]).expect_code(1);
    let id = db.ids().pop().expect("a run");
    let mut client = db.client();
    let add_run = "INSERT INTO mekara_runs (project, id, host, os_user) \
                   SELECT project, $1::text, host, os_user FROM mekara_runs WHERE id = $2";
    let add_job = "INSERT INTO mekara_queue (project, run_id, queue, script, arguments, agent, \
                   limits, submitted_host, submitted_user) \
                   SELECT project, $1::text, 'default', 'waits', '', '{}', '{}', host, os_user \
                   FROM mekara_runs WHERE id = $2";
    let hostile: Vec<&str> = HOSTILE_IDS.iter().copied().chain(["../outside"]).collect();
    for bad in &hostile {
        for (insert, check) in [
            (add_run, "mekara_runs_id_is_a_run_id"),
            (add_job, "mekara_queue_run_id_is_a_run_id"),
        ] {
            let refused = client.execute(insert, &[bad, &id]).expect_err("refused");
            assert!(
                refused
                    .as_db_error()
                    .is_some_and(|e| e.constraint() == Some(check)),
                "{refused:?}"
            );
        }
    }

    // A database from before the check, with such rows already in it.
    client
        .batch_execute(
            "ALTER TABLE mekara_runs DROP CONSTRAINT mekara_runs_id_is_a_run_id; \
             ALTER TABLE mekara_queue DROP CONSTRAINT mekara_queue_run_id_is_a_run_id; \
             UPDATE mekara_schema SET version = 2",
        )
        .expect("downgrade");
    for bad in &hostile {
        client.execute(add_run, &[bad, &id]).expect("a run row");
        client
            .execute(
                "INSERT INTO mekara_events (project, run_id, line, body) \
                 SELECT project, $1::text, line, body FROM mekara_events WHERE run_id = $2",
                &[bad, &id],
            )
            .expect("its events");
    }
    let queued = "\"><img src=x onerror=window.pwned=2> queued";
    client.execute(add_job, &[&queued, &id]).expect("a job row");
    let migrated = laptop.run(&["store", "migrate"]);
    insta::assert_snapshot!(
        "the_migration_to_the_check",
        laptop.transcript(&migrated, None)
    );

    let listed = laptop.run(&["runs", "--all"]);
    listed.expect_code(0);
    assert!(listed.stdout.contains(&id), "{}", listed.stdout);
    assert!(
        !listed.stdout.contains("img") && !listed.stdout.contains("outside"),
        "{}",
        listed.stdout
    );
    // One warning for each, in the order the store read them: sorted to pin, without the
    // time each was logged at.
    let mut warnings: Vec<&str> = listed
        .stderr
        .lines()
        .map(|l| l.split_once("Z  ").map_or(l, |(_, warning)| warning))
        .collect();
    warnings.sort_unstable();
    insta::assert_snapshot!(
        "hostile_ids_skipped_by_runs",
        laptop.transcript(
            &crate::common::Run {
                code: listed.code,
                stdout: String::new(),
                stderr: warnings.join("\n")
            },
            None
        )
    );
    laptop.run(&["store", "export"]).expect_code(0);
    let runs = laptop.project.root().join(".mekara/runs");
    assert_eq!(
        laptop.project.run_ids(),
        std::slice::from_ref(&id),
        "only the real run is exported"
    );
    assert!(!runs.join("../outside.jsonl").exists());

    let viewer = Viewer::spawn(laptop.command(&["ui", "--poll", "100ms"]));
    let rows = get_json(&viewer.with_token("/api/runs"));
    assert_eq!(rows["runs"].as_array().map(Vec::len), Some(1), "{rows}");
    assert_eq!(rows["runs"][0]["id"], id.as_str(), "{rows}");
    let pages: String = hostile
        .iter()
        .chain([&queued])
        .map(|bad| ask_for_hostile(&viewer, bad))
        .collect();
    insta::assert_snapshot!("hostile_ids_in_the_shared_store", pages);
    browse(&json!([
        {"open": viewer.url},
        {"wait": format!("document.querySelectorAll('tr.run').length === 1 && document.querySelector('tr.run').dataset.run === '{id}'")},
        {"open": viewer.with_token(&format!("/runs/{}", encoded(queued)))},
        {"wait": "document.querySelector('p.problem') !== null"},
        {"wait": "window.pwned === undefined && document.querySelectorAll('img').length === 0"},
    ]));
}

/// Issue 44: a run paused at a spend cap shows in the viewer with what it spent against its
/// caps and the estimate from its script's past runs, and is answered there: the API raises
/// one run's cap, the page's form another's; each resumes without asking a step twice.
#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs Chromium")]
fn the_viewer_shows_the_spend_and_the_estimate_and_raises_a_paused_runs_cap() {
    let project = crate::unattended::project();
    let unattended = |extra: &[&str]| {
        let mut args = vec!["run", "--agent-command", crate::unattended::AGENT_COMMAND];
        args.extend_from_slice(extra);
        project.run(&args, "")
    };
    unattended(&["--max-cost", "0.5", "colour"]).expect_code(1);
    let first = project.run_ids().pop().expect("a run");
    let viewer = Viewer::start(&project);
    let detail = get_json(&viewer.with_token(&format!("/api/runs/{first}")));
    assert_eq!(detail["spend"]["caps"], "`--max-cost 0.5`", "{detail}");
    assert_eq!(detail["state_key"], "waiting", "{detail}");
    let token = format!("X-Mekara-Token: {}", viewer.token);
    let answer_url = format!("{}/api/runs/{first}/answer", viewer.base);
    let (status, body) = curl(&["-H", &token, "--data", "value=max-cost=0.1", &answer_url]);
    assert_eq!(status, 400, "a cap lowered is refused: {body}");
    let (status, body) = curl(&["-H", &token, "--data", "value=max-cost=1", &answer_url]);
    assert_eq!(status, 200, "{body}");
    unattended(&["--resume", &first]).expect_code(0);

    unattended(&["--max-cost", "0.4", "colour"]).expect_code(1);
    // Not the last id in order: two runs started in the same second order by their random
    // part.
    let second = project
        .run_ids()
        .into_iter()
        .find(|id| *id != first)
        .expect("a second run");
    let work = tempfile::tempdir().expect("tempdir");
    let (paused, answered) = (
        work.path().join("paused.html"),
        work.path().join("answered.html"),
    );
    browse(&json!([
        {"open": viewer.with_token(&format!("/runs/{second}"))},
        {"wait": "document.querySelector('#cap form') !== null"},
        {"dom": paused},
        {"eval": "document.querySelector('#cap input[name=value]').value = 'max-cost=2'; document.querySelector('#cap form').submit(); true"},
        {"wait": "document.querySelector('#spend') !== null && document.querySelector('#cap') === null"},
        {"dom": answered},
    ]));
    let paused = std::fs::read_to_string(paused).expect("the paused page's DOM");
    let spend = ["caps:", "paused at a cap", "estimate for", "stop the run"];
    insta::assert_snapshot!(
        "a_run_paused_at_a_cap",
        lines_with(&page_main(&paused), &spend)
    );
    let answered = std::fs::read_to_string(answered).expect("the answered page's DOM");
    insta::assert_snapshot!(
        "a_run_whose_cap_was_raised",
        lines_with(&page_main(&answered), &spend)
    );
    let show = project.run(&["runs", "show", &second], "").stdout;
    insta::assert_snapshot!(
        "a_raised_cap_in_runs_show",
        lines_with(&project.scrub(&show), &["caps"])
    );
    unattended(&["--resume", &second]).expect_code(0);
    let steps: Vec<String> = crate::unattended::calls(&project)
        .iter()
        .map(|c| c["step"].as_str().expect("a step").to_string())
        .collect();
    let once = ["colour[1]", "colour[3]", "colour[4] > plain[0]"];
    assert_eq!(steps, [once, once].concat(), "no step asked twice");
}
