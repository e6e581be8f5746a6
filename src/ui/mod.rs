//! `mekara ui`: a local web viewer of the project's runs (DESIGN §16). A small hyper server
//! renders [`view`] as HTML ([`html`]) and JSON (`/api`), streams server-sent events when
//! what a page shows changed (the store is polled: the file store's index and the
//! PostgreSQL store answer a listing cheaply), and takes two actions: answering the question
//! a run waits on, and cancelling a queued run of the shared store.
//!
//! Safe on a shared machine: it binds loopback unless told otherwise, accepts only the names
//! it serves in `Host` and `Origin` (no DNS rebinding, no cross-site form), wants the random
//! token it printed for everything but its stylesheet and script, and sends a content
//! security policy that allows no inline script. Run text only ever reaches the page
//! escaped ([`html::escape`]).
//!
//! It reads runs through the store every reader uses and answers through the executor as
//! `mekara answer` does; it knows nothing of the command line.

mod eval;
mod html;
mod view;

use std::convert::Infallible;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full, Limited, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::json;

use crate::engine::step::AnsweredBy;
use crate::engine::store::RunStore;
use crate::engine::{Answer, EngineError, Executor};
use crate::paths::Locations;
use crate::script::Resolver;
use html::{Filters, Page};

/// What `mekara ui` serves, and where.
#[derive(Debug)]
pub(crate) struct UiOptions {
    /// Where to listen (port 0: a free one).
    pub addr: SocketAddr,
    /// Names accepted in `Host` and `Origin` besides the loopback ones and the address.
    pub allowed_hosts: Vec<String>,
    /// How often the store is looked at for changes, for the live pages.
    pub poll: Duration,
}

/// How long a request's headers and body may take.
const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest request body read (an answer).
const MAX_BODY: usize = 1024 * 1024;
/// A comment line sent on an idle event stream, so a closed one is noticed.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// The most event streams open at once: each looks at the store every `poll`, and a page
/// holds one, so more are pages left open by the dozen or a client gone wrong.
pub(crate) const MAX_EVENT_STREAMS: usize = 32;
/// The most requests reading a whole journal (a run's page, a step's output) at once: each
/// holds the journal's events while it builds its answer, so this bounds the memory held.
const MAX_JOURNAL_READS: usize = 2;

const CSS: &str = include_str!("assets/app.css");
const JS: &str = include_str!("assets/app.js");
/// No inline script or style, nothing from elsewhere, no framing, forms only to here.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

type Body = BoxBody<Bytes, Infallible>;

/// The server's state, shared by its connections.
struct Viewer {
    locations: Locations,
    store: RunStore,
    token: String,
    /// `host:port` values accepted in `Host` (and, after `http://`, in `Origin`).
    hosts: Vec<String>,
    poll: Duration,
    costs: view::CostCache,
    /// One permit per open event stream ([`MAX_EVENT_STREAMS`]).
    streams: Arc<tokio::sync::Semaphore>,
    /// One permit per whole journal being read ([`MAX_JOURNAL_READS`]).
    reads: tokio::sync::Semaphore,
}

/// Serves the viewer of `store` until the process is stopped. `ready` is called with the
/// address to open (the token in it) once the server listens.
pub(crate) async fn serve(
    options: UiOptions,
    locations: Locations,
    store: RunStore,
    ready: impl FnOnce(&str),
) -> anyhow::Result<()> {
    let token = crate::engine::handle::new_token();
    if token.is_empty() {
        anyhow::bail!(
            "the system gave no randomness for the viewer's token, and without one anyone on this machine could act on your runs; try again"
        );
    }
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .with_context(|| format!("cannot listen on {}", options.addr))?;
    let local = listener.local_addr()?;
    let port = local.port();
    let mut names: Vec<String> = vec!["127.0.0.1".into(), "localhost".into(), "[::1]".into()];
    if !local.ip().is_unspecified() && !local.ip().is_loopback() {
        names.push(match local {
            SocketAddr::V4(v4) => v4.ip().to_string(),
            SocketAddr::V6(v6) => format!("[{}]", v6.ip()),
        });
    }
    names.extend(options.allowed_hosts.iter().cloned());
    let hosts = names.iter().map(|n| format!("{n}:{port}")).collect();
    let shown_host = if local.ip().is_loopback() || local.ip().is_unspecified() {
        "127.0.0.1".to_string()
    } else {
        names[3].clone()
    };
    let viewer = Arc::new(Viewer {
        locations,
        store,
        token,
        hosts,
        poll: options.poll,
        costs: view::CostCache::default(),
        streams: Arc::new(tokio::sync::Semaphore::new(MAX_EVENT_STREAMS)),
        reads: tokio::sync::Semaphore::new(MAX_JOURNAL_READS),
    });
    ready(&format!(
        "http://{shown_host}:{port}/?token={}",
        viewer.token
    ));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let viewer = viewer.clone();
        tokio::spawn(async move {
            let handler = hyper::service::service_fn(move |request| {
                let viewer = viewer.clone();
                async move { Ok::<_, Infallible>(viewer.answer(request).await) }
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(READ_TIMEOUT);
            if let Err(e) = builder
                .serve_connection(TokioIo::new(stream), handler)
                .await
            {
                tracing::debug!("connection from {peer} ended: {e}");
            }
        });
    }
}

/// The query's values by name (`a=1&b=x+y`), decoded.
fn query(text: &str) -> Vec<(String, String)> {
    text.split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(name), decode(value))
        })
        .collect()
}

/// `application/x-www-form-urlencoded` text decoded: `+` is a space, `%XX` a byte.
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = |b: u8| (b as char).to_digit(16);
                match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                    (Some(high), Some(low)) => {
                        out.push(u8::try_from(high * 16 + low).unwrap_or(b'?'));
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn value<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty())
}

/// Whether `given` is `expected`, in time that does not depend on where they differ.
fn same_token(given: &str, expected: &str) -> bool {
    given.len() == expected.len()
        && given
            .bytes()
            .zip(expected.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// What a request is after, from its method and path.
enum Route<'a> {
    Asset(&'static str, &'static str),
    Runs {
        api: bool,
    },
    Run {
        api: bool,
        id: &'a str,
    },
    /// The whole output of the step at event `event` of run `id`, as text.
    Output {
        id: &'a str,
        event: usize,
    },
    Events,
    Answer {
        api: bool,
        id: &'a str,
    },
    Cancel {
        api: bool,
        id: &'a str,
    },
    /// The evals (`mekara eval`), and one of them.
    Evals,
    Eval {
        api: bool,
        id: &'a str,
    },
}

fn route<'a>(method: &Method, path: &'a str) -> Option<Route<'a>> {
    let (api, rest) = match path.strip_prefix("/api") {
        Some(rest) => (true, rest),
        None => (false, path),
    };
    let get = method == Method::GET || method == Method::HEAD;
    match (rest, get) {
        ("/assets/app.css", true) if !api => Some(Route::Asset(CSS, "text/css; charset=utf-8")),
        ("/assets/app.js", true) if !api => {
            Some(Route::Asset(JS, "text/javascript; charset=utf-8"))
        }
        ("/" | "", true) if !api => Some(Route::Runs { api }),
        ("/runs" | "/runs/", true) => Some(Route::Runs { api }),
        ("/events", true) if !api => Some(Route::Events),
        ("/evals" | "/evals/", true) if !api => Some(Route::Evals),
        _ if get && rest.starts_with("/evals/") => Some(Route::Eval {
            api,
            id: rest.strip_prefix("/evals/")?,
        }),
        _ => {
            let rest = rest.strip_prefix("/runs/")?;
            match (rest.split_once('/'), get) {
                (None, true) => Some(Route::Run { api, id: rest }),
                (Some((id, tail)), true) => {
                    let event = tail.strip_prefix("output/")?.parse().ok()?;
                    Some(Route::Output { id, event })
                }
                (Some((id, "answer")), false) if method == Method::POST => {
                    Some(Route::Answer { api, id })
                }
                (Some((id, "cancel")), false) if method == Method::POST => {
                    Some(Route::Cancel { api, id })
                }
                _ => None,
            }
        }
    }
}

impl Viewer {
    async fn answer(self: Arc<Self>, request: Request<hyper::body::Incoming>) -> Response<Body> {
        let (parts, body) = request.into_parts();
        if let Some(refused) = self.refusal(&parts.headers) {
            return refused;
        }
        let path = parts.uri.path().to_string();
        let mut pairs = query(parts.uri.query().unwrap_or(""));
        let Some(route) = route(&parts.method, &path) else {
            return text(
                StatusCode::NOT_FOUND,
                &format!(
                    "no page `{} {path}` here: the viewer serves `/`, `/runs/ID`, `/evals`, `/evals/ID`, `/runs/ID/output/N`, `/api/runs`, `/api/runs/ID`, and POSTs to `/runs/ID/answer` and `/runs/ID/cancel`",
                    parts.method
                ),
            );
        };
        if let Route::Asset(text, kind) = route {
            return respond(StatusCode::OK, kind, Bytes::from_static(text.as_bytes()));
        }
        if matches!(route, Route::Answer { .. } | Route::Cancel { .. }) {
            let form = match tokio::time::timeout(
                READ_TIMEOUT,
                Limited::new(body, MAX_BODY).collect(),
            )
            .await
            {
                Ok(Ok(collected)) => collected.to_bytes(),
                _ => {
                    return text(
                        StatusCode::BAD_REQUEST,
                        &format!(
                            "the request body did not arrive whole (at most {MAX_BODY} bytes, within {} s)",
                            READ_TIMEOUT.as_secs()
                        ),
                    );
                }
            };
            pairs.extend(query(&String::from_utf8_lossy(&form)));
        }
        let given = parts
            .headers
            .get("x-mekara-token")
            .and_then(|v| v.to_str().ok())
            .or_else(|| value(&pairs, "token"));
        if !given.is_some_and(|t| same_token(t, &self.token)) {
            return text(
                StatusCode::FORBIDDEN,
                "this needs the viewer's token: open the address `mekara ui` printed (it ends in `?token=…`), or send the token in the `X-Mekara-Token` header",
            );
        }
        let page = Page {
            token: Some(&self.token),
            events: String::new(),
        };
        match route {
            Route::Asset(..) => unreachable_asset(),
            Route::Runs { api } => {
                let filters = Filters {
                    state: value(&pairs, "state").map(str::to_string),
                    script: value(&pairs, "script").map(str::to_string),
                    host: value(&pairs, "host").map(str::to_string),
                };
                let me = self.clone();
                let rows = blocking(move || {
                    view::rows(&me.locations, &me.store, &me.costs).map(|r| (r, me.store.place()))
                })
                .await;
                match rows {
                    Err(e) => error(api, &page, StatusCode::INTERNAL_SERVER_ERROR, &e),
                    Ok((rows, _)) if api => {
                        let rows: Vec<_> = rows.into_iter().filter(|r| filters.keep(r)).collect();
                        json_response(StatusCode::OK, &json!({ "runs": rows }))
                    }
                    Ok((rows, place)) => {
                        let page = Page {
                            events: format!("/events?token={}", self.token),
                            ..page
                        };
                        html_response(
                            StatusCode::OK,
                            html::runs_page(&page, &place, &rows, &filters),
                        )
                    }
                }
            }
            Route::Evals => {
                let me = self.clone();
                let body =
                    blocking(move || Ok::<_, String>(eval::list_page(&me.locations, &me.token)))
                        .await;
                match body {
                    Ok(body) => html_response(StatusCode::OK, body),
                    Err(e) => error(false, &page, StatusCode::INTERNAL_SERVER_ERROR, &e),
                }
            }
            Route::Eval { api: true, id } => {
                let (me, id) = (self.clone(), id.to_string());
                match blocking(move || eval::api(&me.locations, &id)).await {
                    Ok(json) => json_response(StatusCode::OK, &json),
                    Err(e) => error(true, &page, StatusCode::NOT_FOUND, &e),
                }
            }
            Route::Eval { api: false, id } => {
                let (me, id) = (self.clone(), id.to_string());
                match blocking(move || eval::page(&me.locations, &id, &me.token)).await {
                    Ok(body) => html_response(StatusCode::OK, body),
                    Err(e) => error(false, &page, StatusCode::NOT_FOUND, &e),
                }
            }
            Route::Run { api, id } => {
                let (me, id) = (self.clone(), id.to_string());
                let shared = self.store.is_shared();
                let _reading = self.reads.acquire().await;
                let detail = blocking(move || {
                    let detail = view::detail(&me.locations, &me.store, &id);
                    crate::memory::give_back_freed();
                    detail
                })
                .await;
                match detail {
                    Err(e) => error(api, &page, status_of(&e), &e),
                    Ok(detail) if api => json_response(StatusCode::OK, &json!(detail)),
                    Ok(detail) => {
                        let page = Page {
                            events: format!("/events?run={}&token={}", detail.row.id, self.token),
                            ..page
                        };
                        html_response(StatusCode::OK, html::run_page(&page, &detail, shared))
                    }
                }
            }
            Route::Output { id, event } => {
                let (me, run) = (self.clone(), id.to_string());
                let _reading = self.reads.acquire().await;
                let output = blocking(move || {
                    let output = step_output(&me.store, &run, event);
                    crate::memory::give_back_freed();
                    output
                })
                .await;
                match output {
                    Ok(output) => respond(
                        StatusCode::OK,
                        "text/plain; charset=utf-8",
                        Bytes::from(output),
                    ),
                    Err(e) => text(status_of(&e), &e),
                }
            }
            Route::Events => self.events(value(&pairs, "run").map(str::to_string)),
            Route::Answer { api, id } => {
                let Some(answer) = value(&pairs, "value").map(str::to_string) else {
                    return error(
                        api,
                        &page,
                        StatusCode::BAD_REQUEST,
                        &"the answer is missing: send it as the form field `value`",
                    );
                };
                let (me, id) = (self.clone(), id.to_string());
                let run = id.clone();
                let answered = blocking(move || {
                    let answered = Executor::answer_run(
                        Resolver::new(&me.locations),
                        me.store.clone(),
                        &run,
                        &answer,
                        AnsweredBy::Viewer,
                    );
                    let resume = me.store.resume_command(&run, false);
                    answered.map(|(path, answer)| (path, answer, resume))
                })
                .await;
                match answered {
                    Err(e) => error(api, &page, status_of(&e), &e),
                    Ok((path, Answer::Given(answer), resume)) => done(
                        api,
                        &self.token,
                        &id,
                        &format!("answered `{path}` with `{answer}`; go on with `{resume}`"),
                    ),
                    Ok((path, Answer::TooLate(_), _)) => error(
                        api,
                        &page,
                        StatusCode::CONFLICT,
                        &format!(
                            "the answer came after the question's timeout, so `{path}` failed and the answer was not kept; `mekara run --resume {id} --retry` asks again"
                        ),
                    ),
                }
            }
            Route::Cancel { api, id } => {
                let (me, run) = (self.clone(), id.to_string());
                let cancelled = blocking(move || -> Result<String, String> {
                    let shared = crate::store::config::shared(&me.locations)
                        .map_err(|e| e.to_string())?
                        .ok_or("only a queued run of the shared run store can be cancelled here; a run in this project's files stops with Ctrl-C in the `mekara run` (or agent) that drives it")?;
                    Ok(match shared.cancel(&run).map_err(|e| e.to_string())? {
                        crate::store::postgres::Cancel::Dequeued => {
                            format!("cancelled run {run}: no worker runs it, and none will")
                        }
                        crate::store::postgres::Cancel::Asked { worker_host } => format!(
                            "asked the worker on {worker_host} to stop run {run}; it stops within the step in flight"
                        ),
                        crate::store::postgres::Cancel::Ended(state) => {
                            format!("run {run} has ended ({state}): there is nothing to cancel")
                        }
                        crate::store::postgres::Cancel::NotQueued => format!(
                            "run {run} was not submitted to a queue: the `mekara run` (or agent) that drives it stops it (Ctrl-C)"
                        ),
                    })
                })
                .await;
                match cancelled {
                    Ok(message) => done(api, &self.token, id, &message),
                    Err(e) => error(api, &page, status_of(&e), &e),
                }
            }
        }
    }

    /// Refuses a request whose `Host` is not a name this server serves (DNS rebinding), or
    /// that comes from another site's page (`Origin`, `Sec-Fetch-Site`).
    fn refusal(&self, headers: &HeaderMap) -> Option<Response<Body>> {
        for name in [header::HOST, header::ORIGIN] {
            if headers.get_all(&name).iter().nth(1).is_some() {
                return Some(text(
                    StatusCode::BAD_REQUEST,
                    &format!("the request has more than one `{name}` header; send exactly one"),
                ));
            }
        }
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        if !host.is_some_and(|h| self.hosts.iter().any(|ok| ok.eq_ignore_ascii_case(h))) {
            return Some(text(
                StatusCode::MISDIRECTED_REQUEST,
                &format!(
                    "the viewer answers only to {}, not to `Host: {}`; open the address `mekara ui` printed (`--allow-host NAME` adds a name)",
                    crate::display::quoted(&self.hosts),
                    host.unwrap_or("")
                ),
            ));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            let ours = origin
                .strip_prefix("http://")
                .is_some_and(|o| self.hosts.iter().any(|ok| ok.eq_ignore_ascii_case(o)));
            if !ours {
                return Some(text(
                    StatusCode::FORBIDDEN,
                    &format!("a page of `{origin}` may not use the viewer; only its own pages may"),
                ));
            }
        }
        if headers
            .get("sec-fetch-site")
            .is_some_and(|s| s.as_bytes() == b"cross-site")
        {
            return Some(text(
                StatusCode::FORBIDDEN,
                "another site's page may not use the viewer; only its own pages may",
            ));
        }
        None
    }

    /// Server-sent events: `change` whenever what the runs page (or run `run`'s page) shows
    /// changed, found by looking at the store every `poll`.
    /// At most [`MAX_EVENT_STREAMS`] are open at once; one more is refused (503).
    fn events(self: Arc<Self>, run: Option<String>) -> Response<Body> {
        let Ok(permit) = self.streams.clone().try_acquire_owned() else {
            let mut refused = text(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!(
                    "the viewer already has {MAX_EVENT_STREAMS} event streams open, the most it serves at once; close some of its pages (or reload this one later)"
                ),
            );
            refused
                .headers_mut()
                .insert(header::RETRY_AFTER, http::HeaderValue::from_static("10"));
            return refused;
        };
        let (sender, receiver) = tokio::sync::mpsc::channel::<Bytes>(4);
        tokio::spawn(async move {
            let mut last: Option<String> = None;
            let mut quiet = Duration::ZERO;
            loop {
                let (me, run) = (self.clone(), run.clone());
                let now = blocking(move || Ok::<_, EngineError>(me.fingerprint(run.as_deref())))
                    .await
                    .unwrap_or_default();
                let message = match &last {
                    Some(before) if *before == now => {
                        quiet += self.poll;
                        (quiet >= KEEP_ALIVE).then(|| Bytes::from_static(b": still here\n\n"))
                    }
                    _ => Some(Bytes::from(format!(
                        "event: change\ndata: {}\n\n",
                        now.len()
                    ))),
                };
                last = Some(now);
                if let Some(message) = message {
                    quiet = Duration::ZERO;
                    if sender.send(message).await.is_err() {
                        return;
                    }
                }
                // A stream whose page went away ends now, not at its next message.
                tokio::select! {
                    () = sender.closed() => return,
                    () = tokio::time::sleep(self.poll) => {}
                }
            }
        });
        // The permit goes with the body: it is given back when the connection drops it.
        let stream =
            futures::stream::unfold((receiver, permit), |(mut receiver, permit)| async move {
                let bytes = receiver.recv().await?;
                Some((Ok::<_, Infallible>(Frame::data(bytes)), (receiver, permit)))
            });
        let mut response = Response::new(StreamBody::new(stream).boxed());
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/event-stream"),
        );
        headers.insert(
            header::CACHE_CONTROL,
            http::HeaderValue::from_static("no-store"),
        );
        response
    }

    /// What changes when a page should be drawn again: the listing, or one run's summary.
    fn fingerprint(&self, run: Option<&str>) -> String {
        let runs = match run {
            Some(id) => self.store.summary(id).map(|s| vec![s]),
            None => view::summaries(&self.locations, &self.store),
        };
        match runs {
            Ok(runs) => runs.iter().fold(String::new(), |mut text, r| {
                // What it does now by its kind only: a shell step's start is read from the
                // boot clock, and would differ by a millisecond from one look to the next.
                let doing = r.now.map(|now| now.kind);
                let _ = writeln!(
                    text,
                    "{} {} {} {} {doing:?}",
                    r.id, r.state, r.steps, r.last_at
                );
                text
            }),
            Err(e) => e.to_string(),
        }
    }
}

fn unreachable_asset() -> Response<Body> {
    text(StatusCode::INTERNAL_SERVER_ERROR, "an asset was not served")
}

/// Runs store work (blocking: files, or PostgreSQL's own runtime) off the server's thread.
async fn blocking<T: Send + 'static, E: std::fmt::Display + Send + 'static>(
    work: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T, String> {
    match tokio::task::spawn_blocking(work).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(e.to_string()),
        Err(e) => Err(format!("the viewer failed reading the store: {e}")),
    }
}

/// The whole output of the step journaled at event `event` of run `id`. The journal is
/// read for this request only; nothing of it is kept.
fn step_output(store: &RunStore, id: &str, event: usize) -> Result<String, String> {
    let contents = store.read(id).map_err(|e| e.to_string())?;
    match contents.events.into_iter().nth(event) {
        Some(crate::engine::journal::Event::Step(mut step)) => {
            Ok(std::mem::take(&mut step.record.result.output))
        }
        _ => Err(format!(
            "step not found: run `{id}` has no step at event {event} of its journal; follow the link under a clipped output on the run's page"
        )),
    }
}

/// The status of an error of the store or the executor.
fn status_of(message: &str) -> StatusCode {
    if message.contains("not found") || message.contains("no run") {
        StatusCode::NOT_FOUND
    } else {
        StatusCode::CONFLICT
    }
}

/// An action's success: JSON for `/api`, else back to the run's page.
fn done(api: bool, token: &str, id: &str, message: &str) -> Response<Body> {
    if api {
        return json_response(StatusCode::OK, &json!({ "ok": true, "message": message }));
    }
    let mut response = respond(
        StatusCode::SEE_OTHER,
        "text/plain; charset=utf-8",
        Bytes::from(format!("{message}\n")),
    );
    if let Ok(location) = http::HeaderValue::from_str(&format!("/runs/{id}?token={token}")) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}

fn error(
    api: bool,
    page: &Page<'_>,
    status: StatusCode,
    message: &dyn std::fmt::Display,
) -> Response<Body> {
    let message = message.to_string();
    if api {
        return json_response(status, &json!({ "ok": false, "error": message }));
    }
    html_response(
        status,
        html::error_page(page, status.canonical_reason().unwrap_or("error"), &message),
    )
}

fn respond(status: StatusCode, kind: &'static str, body: Bytes) -> Response<Body> {
    let mut response = Response::new(Full::new(body).boxed());
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, http::HeaderValue::from_static(kind));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        http::HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        http::HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        http::HeaderValue::from_static("no-referrer"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    response
}

fn text(status: StatusCode, reason: &str) -> Response<Body> {
    respond(
        status,
        "text/plain; charset=utf-8",
        Bytes::from(format!("{reason}\n")),
    )
}

fn html_response(status: StatusCode, page: String) -> Response<Body> {
    respond(status, "text/html; charset=utf-8", Bytes::from(page))
}

fn json_response(status: StatusCode, value: &serde_json::Value) -> Response<Body> {
    let body = serde_json::to_vec_pretty(value).unwrap_or_default();
    respond(status, "application/json", Bytes::from(body))
}

#[cfg(test)]
mod tests {
    use super::{decode, same_token};

    #[test]
    fn form_values_decode_pluses_and_percent_escapes() {
        assert_eq!(decode("a+b%3Cscript%3E%E2%9C%93"), "a b<script>✓");
        assert_eq!(decode("100%"), "100%");
        assert_eq!(decode("%zz"), "%zz");
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same_token("abc", "abc"));
        assert!(!same_token("abd", "abc"));
        assert!(!same_token("ab", "abc"));
    }
}
