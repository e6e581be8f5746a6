//! Traces: each run exported as an OpenTelemetry trace over OTLP/HTTP when the standard
//! variables (`OTEL_EXPORTER_OTLP_ENDPOINT` and its kin) name a collector (DESIGN §13).
//!
//! Spans are made from a run's journal events as they are appended (a [`Watch`] on the run
//! store), so every way of driving a run (the terminal, `--agent-command`, MCP, a worker) is
//! traced alike, and a replayed step, which appends nothing, is never exported again. Ids
//! come from the run: the trace id from the run id, a span id from the journal line that
//! opens the span. A run resumed by another process, on another host, lands in the same
//! trace under the same parents, with nothing kept beside the journal.
//!
//! A span is exported when it ends: a step when it is journaled, a frame when it is popped,
//! the run when its root frame is. The SDK batches them on its own thread, which posts them
//! with mekara's hyper client; an endpoint that is down, slow or refusing costs one warning
//! in the log and never a step's time, and exit waits for the last batch at most
//! [`EXIT_BUDGET`]. Prompt and output text are sent only when `[traces] include_text = true`
//! (or `MEKARA_TRACES_INCLUDE_TEXT=1`); the journal holds no `${VAR}` secret, and every text
//! is redacted again of the values this process took from the environment.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, SpanKind, Status, TraceContextExt as _, TraceFlags, TraceId,
    TraceState, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use sha2::Digest as _;

use crate::client::config::redact_log;
use crate::engine::journal::{Contents, Event, JournalError, Origin, Outcome};
use crate::engine::runs::RunState;
use crate::engine::step::{AgentReport, StepInput, StepRecord};
use crate::engine::store::{RunLog, Watch};
use crate::paths::Locations;

/// The most exit waits for the last batch to be sent.
const EXIT_BUDGET: Duration = Duration::from_secs(2);

/// How long one export may take, unless `OTEL_EXPORTER_OTLP_TIMEOUT` says otherwise.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The most of one text (a prompt, an output) a span carries, head kept.
const MAX_TEXT: usize = 16 * 1024;

/// Asks for prompt and output text in spans, as `[traces] include_text` does.
const INCLUDE_TEXT_VAR: &str = "MEKARA_TRACES_INCLUDE_TEXT";

/// This process's exporter, set up by the first run store that asks (`None`: traces off).
static TRACES: OnceLock<Option<Arc<Traces>>> = OnceLock::new();

/// What watches the runs of `locations` to export them, when the environment names a
/// collector. Set up once per process; a setting that is wrong is a warning, never an error.
pub(crate) fn watch(locations: &Locations) -> Option<Arc<dyn Watch>> {
    let traces = TRACES.get_or_init(|| start(locations)).clone()?;
    Some(Arc::new(Watcher(traces)))
}

/// Sends what is left, waiting at most [`EXIT_BUDGET`]; at exit.
pub(crate) fn shutdown() {
    if let Some(Some(traces)) = TRACES.get() {
        let _ = traces.provider.shutdown_with_timeout(EXIT_BUDGET);
    }
}

/// The first of `vars` that is set and not blank, with its value.
fn var(vars: &[&'static str]) -> Option<(&'static str, String)> {
    vars.iter().find_map(|name| {
        std::env::var(name)
            .ok()
            .filter(|v| !v.trim().is_empty())
            .map(|v| (*name, v.trim().to_string()))
    })
}

/// The exporter the environment asks for; `None`, with a warning that says why, when the
/// settings are wrong.
fn start(locations: &Locations) -> Option<Arc<Traces>> {
    if std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return None;
    }
    let (endpoint_var, endpoint) = var(&[
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ])?;
    match build(locations, endpoint_var, &endpoint) {
        Ok(traces) => Some(Arc::new(traces)),
        Err(reason) => {
            tracing::warn!("traces are off: {reason}");
            None
        }
    }
}

fn build(locations: &Locations, endpoint_var: &str, endpoint: &str) -> Result<Traces, String> {
    let shown = crate::store::postgres::redact_url(endpoint);
    let uri: http::Uri = endpoint
        .parse()
        .map_err(|e| format!("`{endpoint_var}` is not a URL (`{shown}`: {e}); set it to the collector's OTLP/HTTP address, such as `http://localhost:4318`"))?;
    let https = match uri.scheme_str() {
        Some("http") => false,
        Some("https") => true,
        _ => {
            return Err(format!(
                "`{endpoint_var}` is `{shown}`, not an `http://` or `https://` URL; set it to the collector's OTLP/HTTP address, such as `http://localhost:4318`"
            ));
        }
    };
    let protocol = match var(&[
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ]) {
        None => Protocol::HttpBinary,
        Some((_, p)) if p == "http/protobuf" => Protocol::HttpBinary,
        Some((_, p)) if p == "http/json" => Protocol::HttpJson,
        Some((name, p)) => {
            return Err(format!(
                "`{name}` is `{p}`; mekara exports over OTLP/HTTP only: set it to `http/protobuf` (the default) or `http/json`, and the endpoint to the collector's HTTP port (4318)"
            ));
        }
    };
    let timeout = export_timeout();
    check_headers();
    let client = Client {
        hyper: crate::client::http::HyperClient::new(Vec::new(), Arc::default(), https, None)?,
        runtime: tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the exporter: {e}"))?,
        timeout,
        endpoint: shown,
        warned: AtomicBool::new(false),
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_protocol(protocol)
        .with_timeout(timeout)
        .build()
        .map_err(|e| format!("cannot export to `{endpoint_var}`: {e}"))?;
    let mut resource = opentelemetry_sdk::Resource::builder().with_attributes([
        KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
        KeyValue::new("host.name", crate::store::postgres::this_host()),
    ]);
    let named = std::env::var("OTEL_SERVICE_NAME").is_ok_and(|v| !v.trim().is_empty())
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|v| v.contains("service.name="));
    if !named {
        resource = resource.with_service_name("mekara");
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build();
    Ok(Traces {
        tracer: provider.tracer("mekara"),
        provider,
        include_text: include_text(locations),
        host: crate::store::postgres::this_host(),
        user: crate::store::postgres::this_user(),
    })
}

/// The export timeout of `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT` or `OTEL_EXPORTER_OTLP_TIMEOUT`
/// (milliseconds), else [`DEFAULT_TIMEOUT`].
fn export_timeout() -> Duration {
    let Some((name, value)) = var(&[
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    ]) else {
        return DEFAULT_TIMEOUT;
    };
    match value.parse::<u64>() {
        Ok(ms) if ms > 0 => Duration::from_millis(ms),
        _ => {
            tracing::warn!(
                "traces: `{name}` is `{value}`, not a number of milliseconds above 0; using {} s",
                DEFAULT_TIMEOUT.as_secs()
            );
            DEFAULT_TIMEOUT
        }
    }
}

/// Warns of the entries of `OTEL_EXPORTER_OTLP_(TRACES_)HEADERS` that the exporter leaves
/// out (not `key=value`, or not a valid header), naming them by position and never by value;
/// the values are secrets to the log from now on.
fn check_headers() {
    let Some((name, value)) = var(&[
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        "OTEL_EXPORTER_OTLP_HEADERS",
    ]) else {
        return;
    };
    let mut secrets = crate::client::Secrets::default();
    for (position, entry) in value.split(',').enumerate() {
        let (key, val) = entry.split_once('=').unwrap_or((entry, ""));
        secrets.add(name, val.trim());
        let valid = entry.contains('=')
            && http::HeaderName::from_bytes(key.trim().as_bytes()).is_ok()
            && http::HeaderValue::from_str(val.trim()).is_ok();
        if !valid {
            tracing::warn!(
                "traces: entry {} of `{name}` is not `name=value` with a valid header name and value; it is not sent (entries are separated by `,`)",
                position + 1
            );
        }
    }
}

/// Whether spans carry prompt and output text: `MEKARA_TRACES_INCLUDE_TEXT`, else
/// `[traces] include_text` of `.mekara/config.toml`.
fn include_text(locations: &Locations) -> bool {
    if let Ok(value) = std::env::var(INCLUDE_TEXT_VAR) {
        let value = value.trim().to_ascii_lowercase();
        return matches!(value.as_str(), "1" | "true" | "yes" | "on");
    }
    let Some(file) = crate::config::path(locations.project_root.as_deref()) else {
        return false;
    };
    match read_section(&file) {
        Ok(section) => section.include_text.unwrap_or(false),
        Err(reason) => {
            tracing::warn!(
                "traces: `{}`: {reason}; prompt and output text are left out",
                file.display()
            );
            false
        }
    }
}

/// The `[traces]` section of `.mekara/config.toml`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Section {
    include_text: Option<bool>,
}

fn read_section(file: &Path) -> Result<Section, String> {
    let Some(text) = crate::config::read(file)? else {
        return Ok(Section::default());
    };
    let mut table: toml::Table = toml::from_str(&text).map_err(|e| crate::config::reason(&e))?;
    match table.remove("traces") {
        None => Ok(Section::default()),
        Some(section) => section
            .try_into()
            .map_err(|e: toml::de::Error| format!("`[traces]`: {}", crate::config::reason(&e))),
    }
}

/// The OTLP exporter's HTTP client: mekara's hyper client, on a small runtime of its own
/// (the SDK exports from its own thread, outside any runtime), each export bounded by the
/// timeout. The first failure is logged; later ones are not.
struct Client {
    hyper: crate::client::http::HyperClient,
    runtime: tokio::runtime::Runtime,
    timeout: Duration,
    endpoint: String,
    warned: AtomicBool,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl Client {
    fn warn_once(&self, reason: &str) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "traces: cannot export to `{}`: {reason}; runs go on, and this is not said again",
                self.endpoint
            );
        }
    }

    fn exchange(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, Box<dyn std::error::Error + Send + Sync>> {
        let (mut parts, body) = request.into_parts();
        if let Some(authority) = parts.uri.authority() {
            let host = http::HeaderValue::from_str(authority.as_str())?;
            parts.headers.insert(http::header::HOST, host);
        }
        let request = http::Request::from_parts(parts, Full::new(body));
        self.runtime.block_on(async {
            let exchange = async {
                let response = self.hyper.send(request).await.map_err(collector_error)?;
                let (parts, body) = response.into_parts();
                let body = body.collect().await?.to_bytes();
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(http::Response::from_parts(
                    parts, body,
                ))
            };
            match tokio::time::timeout(self.timeout, exchange).await {
                Ok(result) => result,
                Err(_) => Err(format!("no answer within {:?}", self.timeout).into()),
            }
        })
    }
}

/// The client's error in words about the collector (its own name MCP servers and
/// `.mcp.json`).
fn collector_error(e: crate::client::http::HttpError) -> Box<dyn std::error::Error + Send + Sync> {
    use crate::client::http::HttpError;
    match e {
        HttpError::Connect { target, source } => format!(
            "cannot connect to `{target}`: {source}; check that the collector is running and that `OTEL_EXPORTER_OTLP_ENDPOINT` is right"
        )
        .into(),
        HttpError::Tls { target, source } => format!(
            "the TLS handshake with `{target}` failed: {source}; a private CA can be trusted with `SSL_CERT_FILE`"
        )
        .into(),
        other => other.into(),
    }
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for Client {
    async fn send_bytes(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, opentelemetry_http::HttpError> {
        let result = self.exchange(request);
        match &result {
            Err(e) => self.warn_once(&crate::client::http::explain(e.as_ref())),
            Ok(response) if !response.status().is_success() => {
                self.warn_once(&format!("the collector answered {}", response.status()));
            }
            Ok(_) => {}
        }
        result
    }
}

/// The exporter of this process.
#[derive(Debug)]
struct Traces {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    include_text: bool,
    host: String,
    user: String,
}

/// Wraps the runs a store hands out for writing.
#[derive(Debug)]
struct Watcher(Arc<Traces>);

impl Watch for Watcher {
    fn wrap(&self, log: Box<dyn RunLog>, history: &[Event]) -> Box<dyn RunLog> {
        let mut run = RunTrace {
            id: log.id().to_string(),
            marks: Vec::with_capacity(history.len() + 1),
            stack: Vec::new(),
        };
        if history.is_empty() {
            // A new run: its header is written with its first event.
            run.marks.push(Mark::Other);
        }
        for event in history {
            run.marks.push(Mark::of(event));
        }
        for index in 0..run.marks.len() {
            run.follow(index);
        }
        Box::new(TracedLog {
            inner: log,
            traces: self.0.clone(),
            run,
        })
    }
}

/// A run held for writing, whose appended events become spans.
#[derive(Debug)]
struct TracedLog {
    inner: Box<dyn RunLog>,
    traces: Arc<Traces>,
    run: RunTrace,
}

impl RunLog for TracedLog {
    fn id(&self) -> &str {
        self.inner.id()
    }

    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn append(&mut self, event: &Event) -> Result<(), JournalError> {
        self.inner.append(event)?;
        self.run.record(&self.traces, event);
        Ok(())
    }

    fn sync(&mut self) -> Result<(), JournalError> {
        self.inner.sync()
    }

    fn read(&self) -> Result<Contents, JournalError> {
        self.inner.read()
    }

    fn group_note(&self) -> &crate::engine::group_note::GroupNote {
        self.inner.group_note()
    }

    fn close(self: Box<Self>) -> Result<(), JournalError> {
        self.inner.close()
    }
}

/// What the spans need of one journal event.
#[derive(Debug, Clone)]
enum Mark {
    Push(Frame),
    Pop,
    Fail {
        at: u64,
        error: String,
    },
    /// A `call_script` step: the end of the call that pushed the frame popped last.
    CallStep,
    Supersede(usize),
    Other,
}

impl Mark {
    /// The mark of `event`, its line unknown yet.
    fn of(event: &Event) -> Mark {
        match event {
            Event::Push(push) => Mark::Push(Frame {
                line: 0,
                epoch: 0,
                span: SpanId::INVALID,
                parent: SpanId::INVALID,
                script: push.script.clone(),
                compiled: push.compiled,
                origin: push.origin,
                request: push.request.clone(),
                at: push.at,
                fell_back: None,
                called: None,
            }),
            Event::Pop(_) => Mark::Pop,
            Event::Fail(fail) => Mark::Fail {
                at: fail.at,
                error: fail.error.clone(),
            },
            Event::Step(step) if matches!(step.record.input, StepInput::Call { .. }) => {
                Mark::CallStep
            }
            Event::Supersede(supersede) => Mark::Supersede(supersede.line),
            _ => Mark::Other,
        }
    }
}

/// A frame on the stack, as its span needs it.
#[derive(Debug, Clone)]
struct Frame {
    /// The journal line (from 1) of its `push`.
    line: usize,
    /// The line of the `supersede` that opened it again after it had been popped (its span
    /// was sent, so the frame reopened is a span of its own); 0 when none did.
    epoch: usize,
    span: SpanId,
    parent: SpanId,
    script: String,
    compiled: bool,
    origin: Origin,
    request: String,
    at: u64,
    /// When and why it fell back to its NL instructions.
    fell_back: Option<(u64, String)>,
    /// The frame it called last, popped and not yet recorded as its `call_script` step:
    /// that frame's push line, epoch and time.
    called: Option<(usize, usize, u64)>,
}

/// One run's spans in the making: a mark per journal line, and the frames open.
#[derive(Debug)]
struct RunTrace {
    id: String,
    marks: Vec<Mark>,
    stack: Vec<Frame>,
}

impl RunTrace {
    fn trace_id(&self) -> TraceId {
        let digest = sha2::Sha256::digest(format!("mekara run {}", self.id));
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&digest[..16]);
        TraceId::from_bytes(bytes)
    }

    /// The id of the span `what` opened at journal line `line` (in `epoch`, see
    /// [`Frame::epoch`]).
    fn span_id(&self, what: &str, line: usize, epoch: usize) -> SpanId {
        let digest = sha2::Sha256::digest(format!("mekara run {} {what} {line} {epoch}", self.id));
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&digest[..8]);
        if bytes == [0; 8] {
            bytes[7] = 1;
        }
        SpanId::from_bytes(bytes)
    }

    /// Follows mark `index` (already in `marks`) on the stack.
    fn follow(&mut self, index: usize) {
        let mark = self.marks[index].clone();
        if matches!(mark, Mark::Supersede(_)) {
            self.reopen(index);
        } else {
            let mut stack = std::mem::take(&mut self.stack);
            self.apply(&mut stack, index + 1, &mark);
            self.stack = stack;
        }
    }

    /// The stack again from the live marks up to the `supersede` at `index`, which took part
    /// of the history out. A frame popped and now open again gets a new epoch: its span, and
    /// the call step's, were sent already.
    fn reopen(&mut self, index: usize) {
        let marks = &self.marks[..=index];
        let live = crate::engine::runs::live_by(marks.len(), |i| match marks[i] {
            Mark::Supersede(line) => Some(line),
            _ => None,
        })
        .unwrap_or_else(|_| vec![true; marks.len()]);
        let mut stack = Vec::new();
        for (i, mark) in marks.iter().enumerate() {
            if live[i] {
                self.apply(&mut stack, i + 1, mark);
            }
        }
        for position in 0..stack.len() {
            let (below, rest) = stack.split_at_mut(position);
            let frame = &mut rest[0];
            frame.epoch = self
                .stack
                .iter()
                .find(|old| old.line == frame.line)
                .map_or(index + 1, |old| old.epoch);
            self.name(below.last(), frame);
        }
        self.stack = stack;
    }

    /// Gives `frame`, above `below`, its span id and its parent's.
    fn name(&self, below: Option<&Frame>, frame: &mut Frame) {
        frame.span = self.span_id("frame", frame.line, frame.epoch);
        frame.parent = match (below, frame.origin) {
            (None, _) => self.span_id("run", frame.line, frame.epoch),
            (Some(_), Origin::Call) => self.span_id("call", frame.line, frame.epoch),
            (Some(below), Origin::Start) => below.span,
        };
    }

    /// What the event of `line` does to `stack`.
    fn apply(&self, stack: &mut Vec<Frame>, line: usize, mark: &Mark) {
        match mark {
            Mark::Push(frame) => {
                let mut frame = Frame {
                    line,
                    epoch: 0,
                    ..frame.clone()
                };
                self.name(stack.last(), &mut frame);
                stack.push(frame);
            }
            Mark::Pop => {
                if let Some(popped) = stack.pop()
                    && popped.origin == Origin::Call
                    && let Some(caller) = stack.last_mut()
                {
                    caller.called = Some((popped.line, popped.epoch, popped.at));
                }
            }
            Mark::Fail { at, error } => {
                if let Some(top) = stack.last_mut() {
                    top.fell_back = Some((*at, error.clone()));
                }
            }
            Mark::CallStep => {
                if let Some(top) = stack.last_mut() {
                    top.called = None;
                }
            }
            Mark::Supersede(_) | Mark::Other => {}
        }
    }

    /// Exports what `event`, just appended, ends.
    fn record(&mut self, traces: &Traces, event: &Event) {
        let line = self.marks.len() + 1;
        self.marks.push(Mark::of(event));
        match event {
            Event::Step(step) => {
                let frame = self.stack.get(step.depth).or(self.stack.last());
                if let Some(frame) = frame {
                    self.export_step(traces, frame, line, &step.record, step.at);
                }
            }
            Event::Pop(pop) => {
                if let Some(frame) = self.stack.last() {
                    let span = FrameEnd {
                        at: pop.at,
                        outcome: pop.outcome,
                        error: pop.error.as_deref(),
                        agent: pop.agent.as_ref(),
                    };
                    self.export_frame(traces, frame, &span);
                    if self.stack.len() == 1 {
                        self.export_run(traces, frame, &span);
                    }
                }
            }
            _ => {}
        }
        self.follow(line - 1);
    }

    /// A context whose parent is span `parent` of this run's trace.
    fn under(&self, parent: SpanId) -> Context {
        Context::new().with_remote_span_context(SpanContext::new(
            self.trace_id(),
            parent,
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        ))
    }

    fn export_step(
        &self,
        traces: &Traces,
        frame: &Frame,
        line: usize,
        record: &StepRecord,
        at: u64,
    ) {
        let result = &record.result;
        let (span_id, start) = match (&record.input, frame.called) {
            (StepInput::Call { .. }, Some((child, epoch, child_at))) => {
                (self.span_id("call", child, epoch), child_at)
            }
            _ => (
                self.span_id("step", line, 0),
                at.saturating_sub(result.duration_ms.unwrap_or(0)),
            ),
        };
        let kind = kind(&record.input);
        let mut attributes = vec![
            KeyValue::new("mekara.run.id", self.id.clone()),
            KeyValue::new("mekara.script", frame.script.clone()),
            KeyValue::new("mekara.step.index", index(record.index)),
            KeyValue::new("mekara.step.kind", kind),
            KeyValue::new(
                "mekara.step.label",
                text(&label(record, traces.include_text)),
            ),
            KeyValue::new("mekara.step.success", result.success),
        ];
        if let Some(code) = result.exit_code {
            attributes.push(KeyValue::new("mekara.step.exit_code", i64::from(code)));
        }
        if let Some(ms) = result.duration_ms {
            attributes.push(KeyValue::new("mekara.step.duration_ms", index_u64(ms)));
        }
        if record.allow_failure {
            attributes.push(KeyValue::new("mekara.step.allow_failure", true));
        }
        if let Some(member) = record.parallel {
            attributes.push(KeyValue::new(
                "mekara.step.parallel.group",
                index(member.group),
            ));
            attributes.push(KeyValue::new(
                "mekara.step.parallel.member",
                index(member.member),
            ));
        }
        if let StepInput::Call { script, .. } = &record.input {
            attributes.push(KeyValue::new("mekara.call.script", script.clone()));
        }
        if let Some(agent) = &result.agent {
            agent_attributes(&mut attributes, agent);
        }
        if traces.include_text {
            step_text(&mut attributes, record);
        }
        let mut span = traces
            .tracer
            .span_builder(format!("step {kind}"))
            .with_kind(SpanKind::Internal)
            .with_span_id(span_id)
            .with_start_time(time(start))
            .with_attributes(attributes)
            .start_with_context(&traces.tracer, &self.under(frame.span));
        if !result.success {
            let error = result
                .error
                .clone()
                .unwrap_or_else(|| "the step failed".to_string());
            fail(&mut span, &error, at);
        }
        span.end_with_timestamp(time(at));
    }

    fn export_frame(&self, traces: &Traces, frame: &Frame, end: &FrameEnd<'_>) {
        let path: Vec<&str> = self.stack.iter().map(|f| f.script.as_str()).collect();
        let mut attributes = vec![
            KeyValue::new("mekara.run.id", self.id.clone()),
            KeyValue::new("mekara.script", frame.script.clone()),
            KeyValue::new("mekara.frame.path", path.join(" > ")),
            KeyValue::new("mekara.frame.depth", index(self.stack.len() - 1)),
            KeyValue::new("mekara.frame.compiled", frame.compiled),
            KeyValue::new(
                "mekara.frame.origin",
                match frame.origin {
                    Origin::Start => "start",
                    Origin::Call => "call",
                },
            ),
            KeyValue::new("mekara.frame.outcome", outcome(end.outcome)),
        ];
        if let Some(agent) = end.agent {
            agent_attributes(&mut attributes, agent);
        }
        if traces.include_text && !frame.request.is_empty() {
            attributes.push(KeyValue::new("mekara.frame.request", text(&frame.request)));
        }
        let mut span = traces
            .tracer
            .span_builder(format!("script {}", frame.script))
            .with_kind(SpanKind::Internal)
            .with_span_id(frame.span)
            .with_start_time(time(frame.at))
            .with_attributes(attributes)
            .start_with_context(&traces.tracer, &self.under(frame.parent));
        if let Some((at, error)) = &frame.fell_back {
            span.set_attribute(KeyValue::new("mekara.frame.fell_back", true));
            span.add_event_with_timestamp(
                "fallback",
                time(*at),
                vec![KeyValue::new("mekara.error", text(error))],
            );
        }
        if end.outcome == Outcome::Failed {
            let error = end.error.unwrap_or("the script failed");
            fail(&mut span, error, end.at);
        }
        span.end_with_timestamp(time(end.at));
    }

    fn export_run(&self, traces: &Traces, root: &Frame, end: &FrameEnd<'_>) {
        let state = match end.outcome {
            Outcome::Completed => RunState::Completed,
            _ if root.fell_back.is_some() => RunState::FellBack,
            _ => RunState::FinishedByAgent,
        };
        let attributes = vec![
            KeyValue::new("mekara.run.id", self.id.clone()),
            KeyValue::new("mekara.script", root.script.clone()),
            KeyValue::new("mekara.run.state", state.to_string()),
            KeyValue::new("mekara.host", traces.host.clone()),
            KeyValue::new("mekara.user", traces.user.clone()),
        ];
        let builder = traces
            .tracer
            .span_builder(format!("run {}", root.script))
            .with_kind(SpanKind::Internal)
            .with_trace_id(self.trace_id())
            .with_span_id(root.parent)
            .with_start_time(time(root.at))
            .with_attributes(attributes);
        let mut span = builder.start_with_context(&traces.tracer, &Context::new());
        if state == RunState::FellBack {
            span.set_status(Status::error(text(
                root.fell_back.as_ref().map_or("", |(_, e)| e.as_str()),
            )));
        }
        span.end_with_timestamp(time(end.at));
    }
}

/// How a frame ended, from its `pop`.
struct FrameEnd<'a> {
    at: u64,
    outcome: Outcome,
    error: Option<&'a str>,
    agent: Option<&'a AgentReport>,
}

/// Marks `span` failed with `error`: its status, and an exception event at `at`.
fn fail(span: &mut opentelemetry_sdk::trace::Span, error: &str, at: u64) {
    let error = text(error);
    span.add_event_with_timestamp(
        "exception",
        time(at),
        vec![
            KeyValue::new("exception.type", "mekara.StepFailed"),
            KeyValue::new("exception.message", error.clone()),
        ],
    );
    span.set_status(Status::error(error));
}

fn agent_attributes(attributes: &mut Vec<KeyValue>, agent: &AgentReport) {
    if let Some(session) = &agent.session {
        attributes.push(KeyValue::new("mekara.agent.session", session.clone()));
    }
    if let Some(cost) = agent.cost_usd {
        attributes.push(KeyValue::new("mekara.agent.cost_usd", cost));
    }
    if let Some(tokens) = agent.input_tokens {
        attributes.push(KeyValue::new(
            "gen_ai.usage.input_tokens",
            index_u64(tokens),
        ));
    }
    if let Some(tokens) = agent.output_tokens {
        attributes.push(KeyValue::new(
            "gen_ai.usage.output_tokens",
            index_u64(tokens),
        ));
    }
    if let Some(ms) = agent.wall_ms {
        attributes.push(KeyValue::new("mekara.agent.wall_ms", index_u64(ms)));
    }
    attributes.push(KeyValue::new(
        "mekara.agent.attempts",
        i64::from(agent.attempts),
    ));
}

/// The text of a step, for `include_text`: what it was asked and what it gave.
fn step_text(attributes: &mut Vec<KeyValue>, record: &StepRecord) {
    let result = &record.result;
    match &record.input {
        StepInput::Llm { prompt, .. } => {
            attributes.push(KeyValue::new("mekara.step.prompt", text(prompt)));
        }
        StepInput::Ask { question, .. } => {
            attributes.push(KeyValue::new("mekara.step.prompt", text(question)));
        }
        _ => {}
    }
    if !result.output.is_empty() {
        attributes.push(KeyValue::new("mekara.step.output", text(&result.output)));
    }
    if let Some(outputs) = &result.outputs {
        let json = serde_json::Value::Object(outputs.clone()).to_string();
        attributes.push(KeyValue::new("mekara.step.outputs", text(&json)));
    }
    if let Some(answer) = &result.answer {
        attributes.push(KeyValue::new("mekara.step.answer", text(answer)));
    }
}

/// A step's label: the script's `context` for it, else what it does, without the text of a
/// prompt or question unless `include_text`.
fn label(record: &StepRecord, include_text: bool) -> String {
    if let Some(context) = &record.context {
        return context.clone();
    }
    match &record.input {
        StepInput::Llm { .. } | StepInput::Ask { .. } if !include_text => {
            kind(&record.input).to_string()
        }
        StepInput::Shell { command, .. } => command.clone(),
        input => input.summary(),
    }
}

fn kind(input: &StepInput) -> &'static str {
    match input {
        StepInput::Shell { .. } => "shell",
        StepInput::Function { .. } => "function",
        StepInput::Llm { .. } => "llm",
        StepInput::Call { .. } => "call",
        StepInput::Ask { .. } => "ask",
        StepInput::Mcp { .. } => "mcp",
    }
}

fn outcome(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Completed => "completed",
        Outcome::FinishedByAgent => "finished_by_agent",
        Outcome::Failed => "failed",
    }
}

/// `text` as a span may carry it: redacted of this process's secrets, at most
/// [`MAX_TEXT`] bytes.
fn text(text: &str) -> String {
    let mut text = redact_log(text);
    if text.len() > MAX_TEXT {
        let mut cut = MAX_TEXT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str(" [...]");
    }
    text
}

fn time(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

fn index(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn index_u64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
