//! A model provider's API on loopback, for driving real agent clients offline: a small HTTP
//! server that records every request, in order, and answers each with what the client's own
//! stand-in computes from it (the Anthropic Messages API in `claude_code::standin`, the OpenAI
//! Responses API in `codex::standin`). This module owns the server, the recording, the queue
//! of scripted turns and the run of the client; the request and answer shapes belong to
//! those modules.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Value as Json, json};

/// A request the stand-in received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// `POST /v1/messages?beta=true`.
    pub method_and_path: String,
    /// The JSON body (`null` when there was none or it did not parse).
    pub body: Json,
}

impl Recorded {
    /// The path, without the method and the query: `/v1/messages`.
    pub fn path(&self) -> &str {
        let target = self
            .method_and_path
            .split_once(' ')
            .map_or("", |(_, target)| target);
        target.split('?').next().unwrap_or(target)
    }
}

/// An answer to one request.
pub type Answer = Response<Full<Bytes>>;

/// The running server; stops when dropped.
pub struct Server {
    addr: SocketAddr,
    recorded: Arc<Mutex<Vec<Recorded>>>,
    _shutdown: tokio::sync::oneshot::Sender<()>,
}

impl Server {
    /// Starts a server on 127.0.0.1 (a free port) that answers each request with
    /// `answer(request)`, after recording it.
    pub fn start(answer: impl Fn(&Recorded) -> Answer + Send + Sync + 'static) -> Server {
        let recorded = Arc::new(Mutex::new(Vec::new()));
        let answer = Arc::new(answer);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the stand-in");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("local addr");
        let (tx, mut rx) = tokio::sync::oneshot::channel::<()>();
        let served = recorded.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                loop {
                    tokio::select! {
                        _ = &mut rx => break,
                        accepted = listener.accept() => {
                            let Ok((stream, _)) = accepted else { continue };
                            let recorded = served.clone();
                            let answer = answer.clone();
                            tokio::spawn(async move {
                                let service = hyper::service::service_fn(move |req| {
                                    serve(recorded.clone(), answer.clone(), req)
                                });
                                let _ = hyper::server::conn::http1::Builder::new()
                                    .serve_connection(TokioIo::new(stream), service)
                                    .await;
                            });
                        }
                    }
                }
            });
        });
        Server {
            addr,
            recorded,
            _shutdown: tx,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far.
    pub fn recorded(&self) -> Vec<Recorded> {
        self.recorded.lock().expect("recorded").clone()
    }
}

async fn serve<F: Fn(&Recorded) -> Answer>(
    recorded: Arc<Mutex<Vec<Recorded>>>,
    answer: Arc<F>,
    req: Request<Incoming>,
) -> Result<Answer, Infallible> {
    let method_and_path = format!("{} {}", req.method(), req.uri());
    let body = req
        .into_body()
        .collect()
        .await
        .map(http_body_util::Collected::to_bytes)
        .unwrap_or_default();
    let request = Recorded {
        method_and_path,
        body: serde_json::from_slice(&body).unwrap_or(Json::Null),
    };
    recorded.lock().expect("recorded").push(request.clone());
    Ok(answer(&request))
}

/// A JSON answer.
pub fn json_response(value: &Json) -> Answer {
    Response::builder()
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(value.to_string())))
        .expect("a valid response")
}

/// A stream of server-sent events, `(event name, data)`, sent whole.
pub fn sse_response(events: &[(&str, Json)]) -> Answer {
    let mut sse = String::new();
    for (name, data) in events {
        sse.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    }
    event_stream(sse)
}

/// A server-sent events answer with this whole body, for APIs whose events have no names.
pub fn event_stream(body: String) -> Answer {
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Full::new(Bytes::from(body)))
        .expect("a valid response")
}

/// The compiled script `colour` in `project`, for unattended runs (`mekara run --agent`): two
/// llm steps, the second asking about the first's answer (`Count the letters of red.` after
/// `{"colour": "red"}`), then a shell step echoing both (`red has 3`).
pub fn colour_script(project: &crate::common::Project) {
    project.script(
        "colour",
        "Name a colour, then count its letters.",
        Some(
            "def execute(request):\n    \
             r = llm(\"Name a colour.\", expects = {\"colour\": \"one word\"})\n    \
             n = llm(\"Count the letters of \" + r.outputs[\"colour\"] + \".\", expects = {\"letters\": \"how many\"})\n    \
             auto(\"echo \" + r.outputs[\"colour\"] + \" has \" + str(n.outputs[\"letters\"]))\n",
        ),
    );
}

/// The calls an agent makes to run `test/nested` to its end, as (tool, arguments), the
/// handle of the run written [`RUN_ID`]; mekara replies [`NESTED_REPLIES`].
pub fn nested_calls() -> [(&'static str, Json); 5] {
    [
        ("start", json!({"name": "test/nested", "arguments": ""})),
        (
            "continue_compiled_script",
            json!({"run_id": RUN_ID, "outputs": {"guess": "50"}}),
        ),
        (
            "continue_compiled_script",
            json!({"run_id": RUN_ID, "outputs": {}}),
        ),
        ("finish_nl_script", json!({"run_id": RUN_ID})),
        (
            "continue_compiled_script",
            json!({"run_id": RUN_ID, "outputs": {}}),
        ),
    ]
}

/// What mekara replies, call by call, to an agent running `test/nested`: `start`,
/// `continue_compiled_script` with a guess, again with no outputs, `finish_nl_script`, and
/// `continue_compiled_script` once more.
pub const NESTED_REPLIES: [&str; 5] = [
    "## Your turn: llm step `test:nested[0] > test:random[1]`",
    "## Your turn: llm step `test:nested[0] > test:random[3]`",
    "## Your turn: NL script `test:nested[2] > test:imagine-object[0]`",
    "## Your turn: llm step `test:nested[3]`",
    "## Done",
];

/// The argument a scripted call writes for "the run handle of the latest tool result".
pub const RUN_ID: &str = "{run_id}";

/// `value` (a scripted call's arguments) with every string [`RUN_ID`] replaced by `handle`.
pub fn fill_run_id(value: &mut Json, handle: &str) {
    match value {
        Json::String(s) if s == RUN_ID => *s = handle.to_string(),
        Json::Array(items) => items.iter_mut().for_each(|v| fill_run_id(v, handle)),
        Json::Object(map) => map.values_mut().for_each(|v| fill_run_id(v, handle)),
        _ => {}
    }
}

/// mekara's tools, by their own names.
const MEKARA_TOOLS: [&str; 7] = [
    "start",
    "continue_compiled_script",
    "finish_nl_script",
    "status",
    "list_scripts",
    "resume",
    "eject_script",
];

/// Asserts that every one of mekara's tools `text` (a reply the model got) tells the model
/// to call, as a backticked name (`` `mcp_mekara_start` ``), is one the client `offered`
/// the model, and that it names at least one.
pub fn assert_names_offered_tools(text: &str, offered: &[String]) {
    let mentions: Vec<&str> = text
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|word| {
            MEKARA_TOOLS.iter().any(|tool| {
                word.strip_suffix(tool)
                    .is_some_and(|prefix| prefix.is_empty() || prefix.ends_with(['_', '-']))
            })
        })
        .collect();
    assert!(!mentions.is_empty(), "the reply names no tool:\n{text}");
    for mention in mentions {
        assert!(
            offered.iter().any(|o| o == mention),
            "the reply names `{mention}`, which the client does not offer ({offered:?}):\n{text}"
        );
    }
}

/// Asserts that a run's journal `events` say it completed: every frame pushed was popped, the
/// root last.
pub fn assert_completed(events: &[Json]) {
    let count = |kind: &str| events.iter().filter(|e| e["event"] == kind).count();
    assert_eq!(count("push"), count("pop"), "{events:#?}");
    let last = events.last().expect("events");
    assert_eq!(
        (last["event"].as_str(), last["depth"].as_u64()),
        (Some("pop"), Some(0))
    );
}

/// A server that answers with scripted turns, in order: the client's stand-in says which
/// requests take a turn and how a turn (or none) is written as an answer.
pub struct Scripted<T> {
    server: Server,
    turns: Arc<Mutex<VecDeque<T>>>,
}

impl<T: Send + 'static> Scripted<T> {
    /// Starts the server: a request `takes_turn` accepts is answered with
    /// `answer(request, the next turn)` (`None` when the script has run out), any other
    /// with `answer(request, None)`.
    pub fn start_with(
        turns: Vec<T>,
        takes_turn: fn(&Recorded) -> bool,
        answer: fn(&Recorded, Option<T>) -> Answer,
    ) -> Scripted<T> {
        let turns = Arc::new(Mutex::new(VecDeque::from(turns)));
        let queue = turns.clone();
        let server = Server::start(move |request| {
            let turn = if takes_turn(request) {
                queue.lock().expect("turns").pop_front()
            } else {
                None
            };
            answer(request, turn)
        });
        Scripted { server, turns }
    }
}

impl<T> Scripted<T> {
    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// Every request so far.
    pub fn recorded(&self) -> Vec<Recorded> {
        self.server.recorded()
    }

    /// How many scripted turns were not asked for.
    pub fn turns_left(&self) -> usize {
        self.turns.lock().expect("turns").len()
    }
}

/// What one run of an agent client against a stand-in left behind.
pub struct Session<T> {
    pub standin: Scripted<T>,
    pub stdout: String,
    pub stderr: String,
}

impl<T> Session<T> {
    /// Runs `client` (its arguments and environment set) with nothing on stdin, killing it
    /// if it still runs after three minutes.
    pub fn run(mut client: Command, standin: Scripted<T>) -> Session<T> {
        let mut child = client
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn `{}`: {e}", client.get_program().display()));
        let deadline = Instant::now() + Duration::from_secs(3 * 60);
        while child.try_wait().expect("wait for the client").is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = child.wait_with_output().expect("the client's output");
        Session {
            standin,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// The client's output and the requests it made, for a failing check to show.
impl<T> std::fmt::Display for Session<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "client stdout:\n{}\nclient stderr:\n{}",
            self.stdout, self.stderr
        )?;
        for r in self.standin.recorded() {
            writeln!(f, "request {}", r.method_and_path)?;
        }
        Ok(())
    }
}
