//! A scripted stand-in model on loopback, for driving a real agent client offline: the HTTP
//! server, the queue of scripted turns and the record of every request. What the requests and
//! answers look like is the API's: [`crate::claude_code`] speaks Anthropic's Messages API,
//! [`crate::gemini`] Google's `generateContent`.
//!
//! Each main-conversation request (one that offers tools) takes the next scripted turn; the
//! API's answer function turns it (or `None`, once the script has run out, and for side
//! requests) into a response.

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
use serde_json::Value as Json;

/// A request the stand-in received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// `POST /v1/messages?beta=true`.
    pub method_and_path: String,
    /// The path alone (`/v1/messages`).
    pub path: String,
    /// The JSON body (`null` when there was none or it did not parse).
    pub body: Json,
}

impl Recorded {
    /// Whether this is a turn of the main conversation (it offers tools).
    pub fn is_main(&self) -> bool {
        self.body
            .get("tools")
            .and_then(Json::as_array)
            .is_some_and(|t| !t.is_empty())
    }
}

/// One scripted answer of the model: its content blocks, in the API's shape.
pub type Turn = Vec<Json>;

/// How an API answers a request, given the scripted turn it took (if any).
pub type Answer = fn(&Recorded, Option<Turn>) -> Response<Full<Bytes>>;

#[derive(Default)]
struct State {
    turns: VecDeque<Turn>,
    recorded: Vec<Recorded>,
}

/// The running stand-in; stops when dropped.
pub struct StandIn {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    _shutdown: tokio::sync::oneshot::Sender<()>,
}

impl StandIn {
    /// Starts a stand-in on 127.0.0.1 answering with `turns`, in order, through `answer`.
    pub fn start(turns: Vec<Turn>, answer: Answer) -> StandIn {
        let state = Arc::new(Mutex::new(State {
            turns: turns.into(),
            recorded: Vec::new(),
        }));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the stand-in");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("local addr");
        let (tx, mut rx) = tokio::sync::oneshot::channel::<()>();
        let served = state.clone();
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
                            let state = served.clone();
                            tokio::spawn(async move {
                                let service = hyper::service::service_fn(move |req| {
                                    serve(state.clone(), answer, req)
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
        StandIn {
            addr,
            state,
            _shutdown: tx,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far.
    pub fn recorded(&self) -> Vec<Recorded> {
        self.state.lock().expect("state").recorded.clone()
    }

    /// The main-conversation requests so far.
    pub fn main_requests(&self) -> Vec<Recorded> {
        self.recorded()
            .into_iter()
            .filter(Recorded::is_main)
            .collect()
    }

    /// How many scripted turns were not asked for.
    pub fn turns_left(&self) -> usize {
        self.state.lock().expect("state").turns.len()
    }
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

/// What one run of a client against a stand-in left behind.
pub struct Session {
    /// The stand-in, with every request the client made.
    pub standin: StandIn,
    /// The client's output.
    pub stdout: String,
    /// The client's diagnostics.
    pub stderr: String,
    client: &'static str,
}

impl Session {
    /// Runs `command` (the `client`, told to use `standin`) to its end, or for three minutes.
    pub fn run(client: &'static str, standin: StandIn, mut command: Command) -> Session {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {client}: {e}"));
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
            client,
        }
    }
}

impl std::fmt::Display for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let client = self.client;
        writeln!(
            f,
            "{client} stdout:\n{}\n{client} stderr:\n{}",
            self.stdout, self.stderr
        )?;
        for r in self.standin.recorded() {
            writeln!(f, "request {} (main: {})", r.method_and_path, r.is_main())?;
        }
        Ok(())
    }
}

async fn serve(
    state: Arc<Mutex<State>>,
    answer: Answer,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let method_and_path = format!("{} {}", req.method(), req.uri());
    let path = req.uri().path().to_string();
    let body = req
        .into_body()
        .collect()
        .await
        .map(http_body_util::Collected::to_bytes)
        .unwrap_or_default();
    let recorded = Recorded {
        method_and_path,
        path,
        body: serde_json::from_slice(&body).unwrap_or(Json::Null),
    };
    let turn = {
        let mut state = state.lock().expect("state");
        state.recorded.push(recorded.clone());
        if recorded.is_main() {
            state.turns.pop_front()
        } else {
            None
        }
    };
    Ok(answer(&recorded, turn))
}

/// A JSON response.
pub fn json_response(value: &Json) -> Response<Full<Bytes>> {
    response("application/json", value.to_string())
}

/// A server-sent events response with this whole body.
pub fn sse_response(events: String) -> Response<Full<Bytes>> {
    response("text/event-stream", events)
}

fn response(content_type: &str, body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .expect("a valid response")
}
