//! `mekara ui`: a local web viewer of the project's runs (DESIGN §16). A small hyper server
//! renders [`view`] as HTML ([`html`]) and JSON (`/api`), streams server-sent events when
//! what a page shows changed (the store is polled: the file store's index and the
//! PostgreSQL store answer a listing cheaply), and takes two actions: answering the question
//! a run waits on, and cancelling a queued run of the shared store.
//!
//! Safe on a shared machine: it binds loopback unless told otherwise, accepts only the names
//! it serves in `Host` and `Origin` (no DNS rebinding, no cross-site form), wants the random
//! token it printed for everything but its stylesheet and script, and sends a content
//! security policy that allows no inline script. Pages are `maud` templates, which escape
//! every value they are given ([`html`]); a failure is a [`UiError`], whose variant names
//! its HTTP status.
//!
//! It reads runs through the store every reader uses and answers through the executor as
//! `mekara answer` does; it knows nothing of the command line.

mod error;
mod eval;
mod html;
mod spend;
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
use error::UiError;
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

/// The values of a query or of a form body (`application/x-www-form-urlencoded`), by name,
/// decoded (`+` a space, `%XX` a byte; bytes that are not UTF-8 shown as `�`).
fn form(text: &[u8]) -> Vec<(String, String)> {
    form_urlencoded::parse(text).into_owned().collect()
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

/// The first non-empty value named `name`.
fn value<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty())
}

/// What a request is after, from its method and path. A run's id is its path segment
/// decoded (`%20` a space): the store then says whether such a run can be.
///
/// A new page is a variant here, its path in [`route`], its handler in
/// [`Viewer::serve`] (returning `Result<Response, UiError>`; a failure is answered by
/// [`Route::failed`]) and its markup in a module of its own built on [`html::layout`].
enum Route {
    Asset(&'static str, &'static str),
    Runs {
        api: bool,
    },
    Run {
        api: bool,
        id: String,
    },
    /// The whole output of the step at event `event` of run `id`, as text.
    Output {
        id: String,
        event: usize,
    },
    Events,
    Answer {
        api: bool,
        id: String,
    },
    Cancel {
        api: bool,
        id: String,
    },
    /// The evals (`mekara eval`), and one of them.
    Evals,
    Eval {
        api: bool,
        id: String,
    },
}

fn route(method: &Method, path: &str) -> Option<Route> {
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
            id: percent_encoding::percent_decode_str(rest.strip_prefix("/evals/")?)
                .decode_utf8()
                .ok()?
                .into_owned(),
        }),
        _ => {
            let rest = rest.strip_prefix("/runs/")?;
            let (id, tail) = rest
                .split_once('/')
                .map_or((rest, None), |(id, tail)| (id, Some(tail)));
            let id = percent_encoding::percent_decode_str(id)
                .decode_utf8()
                .ok()?
                .into_owned();
            match (tail, get) {
                (None, true) => Some(Route::Run { api, id }),
                (Some(tail), true) => {
                    let event = tail.strip_prefix("output/")?.parse().ok()?;
                    Some(Route::Output { id, event })
                }
                (Some("answer"), false) if method == Method::POST => {
                    Some(Route::Answer { api, id })
                }
                (Some("cancel"), false) if method == Method::POST => {
                    Some(Route::Cancel { api, id })
                }
                _ => None,
            }
        }
    }
}

impl Route {
    /// The answer to a failure of this route: JSON under `/api`, plain text for the whole
    /// output and the event stream (read by programs and `EventSource`), a page otherwise.
    fn failed(&self, page: &Page<'_>, e: &UiError) -> Response<Body> {
        match self {
            Route::Runs { api }
            | Route::Run { api, .. }
            | Route::Eval { api, .. }
            | Route::Answer { api, .. }
            | Route::Cancel { api, .. } => error(*api, page, e),
            Route::Evals => error(false, page, e),
            Route::Asset(..) | Route::Output { .. } | Route::Events => refused(e),
        }
    }
}

impl Viewer {
    async fn answer(self: Arc<Self>, request: Request<hyper::body::Incoming>) -> Response<Body> {
        let (parts, body) = request.into_parts();
        if let Err(e) = self.check_sender(&parts.headers) {
            return refused(&e);
        }
        let mut pairs = form(parts.uri.query().unwrap_or("").as_bytes());
        let Some(route) = route(&parts.method, parts.uri.path()) else {
            return refused(&UiError::NoPage {
                method: parts.method.to_string(),
                path: parts.uri.path().to_string(),
            });
        };
        if let Route::Asset(text, kind) = route {
            return respond(StatusCode::OK, kind, Bytes::from_static(text.as_bytes()));
        }
        if matches!(route, Route::Answer { .. } | Route::Cancel { .. }) {
            match tokio::time::timeout(READ_TIMEOUT, Limited::new(body, MAX_BODY).collect()).await {
                Ok(Ok(collected)) => pairs.extend(form(&collected.to_bytes())),
                _ => {
                    return refused(&UiError::Body {
                        limit: MAX_BODY,
                        seconds: READ_TIMEOUT.as_secs(),
                    });
                }
            }
        }
        let given = parts
            .headers
            .get("x-mekara-token")
            .and_then(|v| v.to_str().ok())
            .or_else(|| value(&pairs, "token"));
        if !given.is_some_and(|t| same_token(t, &self.token)) {
            return refused(&UiError::Token);
        }
        let page = Page {
            token: Some(&self.token),
            events: String::new(),
        };
        match self.clone().serve(&route, &pairs).await {
            Ok(response) => response,
            Err(e) => route.failed(&page, &e),
        }
    }

    /// What `route` answers, the token checked.
    async fn serve(
        self: Arc<Self>,
        route: &Route,
        pairs: &[(String, String)],
    ) -> Result<Response<Body>, UiError> {
        let page = Page {
            token: Some(&self.token),
            events: String::new(),
        };
        match route {
            Route::Asset(text, kind) => Ok(respond(
                StatusCode::OK,
                kind,
                Bytes::from_static(text.as_bytes()),
            )),
            Route::Runs { api } => {
                let filters = Filters {
                    state: value(pairs, "state").map(str::to_string),
                    script: value(pairs, "script").map(str::to_string),
                    host: value(pairs, "host").map(str::to_string),
                };
                let me = self.clone();
                let (rows, place) = blocking(move || {
                    view::rows(&me.locations, &me.store, &me.costs).map(|r| (r, me.store.place()))
                })
                .await?;
                if *api {
                    let rows: Vec<_> = rows.into_iter().filter(|r| filters.keep(r)).collect();
                    return Ok(json_response(StatusCode::OK, &json!({ "runs": rows })));
                }
                let page = Page {
                    events: page.link("/events"),
                    ..page
                };
                Ok(html_response(
                    StatusCode::OK,
                    html::runs_page(&page, &place, &rows, &filters),
                ))
            }
            Route::Evals => {
                let me = self.clone();
                let body =
                    blocking(move || Ok::<_, UiError>(eval::list_page(&me.locations, &me.token)))
                        .await?;
                Ok(html_response(StatusCode::OK, maud::PreEscaped(body)))
            }
            Route::Eval { api: true, id } => {
                let (me, id) = (self.clone(), id.clone());
                let json = blocking(move || eval::api(&me.locations, &id)).await?;
                Ok(json_response(StatusCode::OK, &json))
            }
            Route::Eval { api: false, id } => {
                let (me, id) = (self.clone(), id.clone());
                let body = blocking(move || eval::page(&me.locations, &id, &me.token)).await?;
                Ok(html_response(StatusCode::OK, maud::PreEscaped(body)))
            }
            Route::Run { api, id } => {
                let (me, id) = (self.clone(), id.clone());
                let shared = self.store.is_shared();
                let _reading = self.reads.acquire().await;
                let detail = blocking(move || {
                    let detail = view::detail(&me.locations, &me.store, &id);
                    crate::memory::give_back_freed();
                    detail
                })
                .await?;
                if *api {
                    return Ok(json_response(StatusCode::OK, &json!(detail)));
                }
                let mut events = form_urlencoded::Serializer::new(String::new());
                events.append_pair("run", &detail.row.id);
                let page = Page {
                    events: page.link(&format!("/events?{}", events.finish())),
                    ..page
                };
                Ok(html_response(
                    StatusCode::OK,
                    html::run_page(&page, &detail, shared),
                ))
            }
            Route::Output { id, event } => {
                let (me, run, event) = (self.clone(), id.clone(), *event);
                let _reading = self.reads.acquire().await;
                let output = blocking(move || {
                    let output = step_output(&me.store, &run, event);
                    crate::memory::give_back_freed();
                    output
                })
                .await?;
                Ok(respond(
                    StatusCode::OK,
                    "text/plain; charset=utf-8",
                    Bytes::from(output),
                ))
            }
            Route::Events => self.events(value(pairs, "run").map(str::to_string)),
            Route::Answer { api, id } => {
                let answer = value(pairs, "value")
                    .map(str::to_string)
                    .ok_or(UiError::NoAnswer)?;
                // A run paused at a spend cap: the answer raises the cap or stops the run.
                let (me, run, given) = (self.clone(), id.clone(), answer.clone());
                let capped = blocking(move || {
                    crate::engine::caps::answer_cap(
                        Resolver::new(&me.locations),
                        me.store.clone(),
                        &run,
                        &given,
                        AnsweredBy::Viewer,
                    )
                    .map(|a| a.map(|a| (a, me.store.resume_command(&run, false))))
                })
                .await?;
                match capped {
                    Some((Err(refused), _)) => return Err(UiError::CapAnswer(refused)),
                    Some((Ok(answered), resume)) => {
                        return Ok(done(*api, &page, id, &answered.said(id, &resume)));
                    }
                    None => {}
                }
                let (me, run) = (self.clone(), id.clone());
                let (path, answer, resume) = blocking(move || {
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
                .await?;
                match answer {
                    Answer::Given(answer) => Ok(done(
                        *api,
                        &page,
                        id,
                        &format!("answered `{path}` with `{answer}`; go on with `{resume}`"),
                    )),
                    Answer::TooLate(_) => Err(UiError::TooLate {
                        step: path,
                        id: id.clone(),
                    }),
                }
            }
            Route::Cancel { api, id } => {
                let (me, run) = (self.clone(), id.clone());
                let message = blocking(move || -> Result<String, UiError> {
                    let shared = crate::store::config::shared(&me.locations)?
                        .ok_or(UiError::NotShared)?;
                    Ok(match shared.cancel(&run)? {
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
                .await?;
                Ok(done(*api, &page, id, &message))
            }
        }
    }

    /// Refuses a request whose `Host` is not a name this server serves (DNS rebinding), or
    /// that comes from another site's page (`Origin`, `Sec-Fetch-Site`).
    fn check_sender(&self, headers: &HeaderMap) -> Result<(), UiError> {
        for name in [header::HOST, header::ORIGIN] {
            if headers.get_all(&name).iter().nth(1).is_some() {
                return Err(UiError::TwoHeaders {
                    header: name.to_string(),
                });
            }
        }
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        if !host.is_some_and(|h| self.hosts.iter().any(|ok| ok.eq_ignore_ascii_case(h))) {
            return Err(UiError::Host {
                served: crate::display::quoted(&self.hosts),
                given: host.unwrap_or("").to_string(),
            });
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            let ours = origin
                .strip_prefix("http://")
                .is_some_and(|o| self.hosts.iter().any(|ok| ok.eq_ignore_ascii_case(o)));
            if !ours {
                return Err(UiError::Origin {
                    origin: origin.to_string(),
                });
            }
        }
        if headers
            .get("sec-fetch-site")
            .is_some_and(|s| s.as_bytes() == b"cross-site")
        {
            return Err(UiError::CrossSite);
        }
        Ok(())
    }

    /// Server-sent events: `change` whenever what the runs page (or run `run`'s page) shows
    /// changed, found by looking at the store every `poll`.
    /// At most [`MAX_EVENT_STREAMS`] are open at once; one more is refused (503).
    fn events(self: Arc<Self>, run: Option<String>) -> Result<Response<Body>, UiError> {
        let Ok(permit) = self.streams.clone().try_acquire_owned() else {
            return Err(UiError::Streams {
                open: MAX_EVENT_STREAMS,
            });
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
        Ok(response)
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

/// Runs store work (blocking: files, or PostgreSQL's own runtime) off the server's thread.
async fn blocking<T: Send + 'static, E: Into<UiError> + Send + 'static>(
    work: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T, UiError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result.map_err(Into::into),
        Err(e) => Err(UiError::Task(e.to_string())),
    }
}

/// The whole output of the step journaled at event `event` of run `id`. The journal is
/// read for this request only; nothing of it is kept.
fn step_output(store: &RunStore, id: &str, event: usize) -> Result<String, UiError> {
    let contents = store.read(id)?;
    match contents.events.into_iter().nth(event) {
        Some(crate::engine::journal::Event::Step(mut step)) => {
            Ok(std::mem::take(&mut step.record.result.output))
        }
        _ => Err(UiError::NoStep {
            id: id.to_string(),
            event,
        }),
    }
}

/// An action's success: JSON for `/api`, else back to the run's page.
fn done(api: bool, page: &Page<'_>, id: &str, message: &str) -> Response<Body> {
    if api {
        return json_response(StatusCode::OK, &json!({ "ok": true, "message": message }));
    }
    let mut response = respond(
        StatusCode::SEE_OTHER,
        "text/plain; charset=utf-8",
        Bytes::from(format!("{message}\n")),
    );
    if let Ok(location) = http::HeaderValue::from_str(&page.link(&view::run_path(id, ""))) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}

/// A failure as a page, or as JSON for `/api`.
fn error(api: bool, page: &Page<'_>, e: &UiError) -> Response<Body> {
    let status = e.status();
    let message = e.to_string();
    let response = if api {
        json_response(status, &json!({ "ok": false, "error": message }))
    } else {
        html_response(
            status,
            html::error_page(page, status.canonical_reason().unwrap_or("error"), &message),
        )
    };
    with_retry_after(response)
}

/// A failure as plain text.
fn refused(e: &UiError) -> Response<Body> {
    with_retry_after(respond(
        e.status(),
        "text/plain; charset=utf-8",
        Bytes::from(format!("{e}\n")),
    ))
}

/// `response`, telling a client refused for now (503) when to come back.
fn with_retry_after(mut response: Response<Body>) -> Response<Body> {
    if response.status() == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, http::HeaderValue::from_static("10"));
    }
    response
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
    // `same-origin`, not `no-referrer`: the token in a page's address never leaves for
    // another site either way, but under `no-referrer` a browser sends `Origin: null` with
    // the page's own form posts, which the origin check refuses (no form of the viewer
    // could be used from a browser).
    headers.insert(
        header::REFERRER_POLICY,
        http::HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    response
}

fn html_response(status: StatusCode, page: maud::Markup) -> Response<Body> {
    respond(
        status,
        "text/html; charset=utf-8",
        Bytes::from(page.into_string()),
    )
}

fn json_response(status: StatusCode, value: &serde_json::Value) -> Response<Body> {
    let body = serde_json::to_vec_pretty(value).unwrap_or_default();
    respond(status, "application/json", Bytes::from(body))
}

#[cfg(test)]
mod tests {
    use super::{form, same_token};

    #[test]
    fn form_values_decode_pluses_and_percent_escapes() {
        let decoded = form(b"a=b+c%3Cscript%3E%E2%9C%93&token=100%25&bad=%zz&raw=%FF&=x&lone");
        let pairs: Vec<(&str, &str)> = decoded
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("a", "b c<script>✓"),
                ("token", "100%"),
                ("bad", "%zz"),
                ("raw", "\u{fffd}"),
                ("", "x"),
                ("lone", ""),
            ]
        );
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same_token("abc", "abc"));
        assert!(!same_token("abd", "abc"));
        assert!(!same_token("ab", "abc"));
    }
}
