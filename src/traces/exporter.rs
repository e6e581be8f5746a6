//! The exporter of this process ([`Traces`]), made from the settings: OTLP/HTTP to the
//! collector the environment names, batched by the SDK.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};

use super::otlp_http::Client;
use super::settings::{check_headers, export_timeout, include_text, var};
use crate::paths::Locations;

/// The exporter the environment asks for; `None`, with a warning that says why, when the
/// settings are wrong.
pub(super) fn start(locations: &Locations) -> Option<Arc<Traces>> {
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
    let shown = crate::display::redact_url(endpoint);
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
        KeyValue::new("host.name", crate::host::this_host()),
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
        host: crate::host::this_host(),
        user: crate::host::this_user(),
    })
}

/// The exporter of this process.
#[derive(Debug)]
pub(super) struct Traces {
    pub(super) provider: SdkTracerProvider,
    pub(super) tracer: SdkTracer,
    pub(super) include_text: bool,
    pub(super) host: String,
    pub(super) user: String,
}
