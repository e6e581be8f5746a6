//! TLS for the run store: which connections use it, and how the server is checked.
//!
//! A store on this machine (a Unix socket, `localhost`, a loopback address) may be reached
//! without TLS, as before. Any other store gets the password and every run's output, so it
//! is reached only over TLS: `sslmode=disable` is refused before anything is sent, and
//! `prefer` (libpq's default) becomes `require`, since a fallback to plain text is what an
//! attacker on the path would ask for. TLS always checks the certificate against the
//! system's roots (or the bundle in `SSL_CERT_FILE`) plus `sslrootcert`, and the host name
//! against it, as libpq's `verify-full` does; `require`, `verify-ca` and `verify-full` on
//! this machine ask for the same.
//!
//! `tokio-postgres` knows only `disable`, `prefer` and `require` and no `sslrootcert`, so
//! these two parameters are taken out of the URL here and applied to its settings.

use std::net::IpAddr;
use std::path::PathBuf;

use postgres::config::{Host, SslMode};
use tokio_postgres_rustls::MakeRustlsConnect;

/// The parameters of a URL that are read here, not by `tokio-postgres`.
#[derive(Debug, Default, PartialEq)]
pub(super) struct TlsParams {
    /// `sslmode`, as written.
    pub mode: Option<String>,
    /// `sslrootcert`: a PEM file of the CA (or the certificate) to trust.
    pub root_cert: Option<PathBuf>,
}

/// `url` without `sslmode` and `sslrootcert`, and them. Both forms `tokio-postgres` reads
/// are taken: a URL's query (`?sslmode=require&…`, percent-encoded) and `key=value` words.
pub(super) fn take_params(url: &str) -> (String, TlsParams) {
    let mut params = TlsParams::default();
    let mut take = |pair: &str, decode: bool| -> bool {
        let Some((key, value)) = pair.split_once('=') else {
            return false;
        };
        let value = if decode {
            percent_encoding::percent_decode_str(value)
                .decode_utf8_lossy()
                .into_owned()
        } else {
            value.to_string()
        };
        match key.trim() {
            "sslmode" => params.mode = Some(value),
            "sslrootcert" => params.root_cert = Some(PathBuf::from(value)),
            _ => return false,
        }
        true
    };
    let rest = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        match url.split_once('?') {
            None => url.to_string(),
            Some((base, query)) => {
                let kept: Vec<&str> = query.split('&').filter(|p| !take(p, true)).collect();
                if kept.is_empty() {
                    base.to_string()
                } else {
                    format!("{base}?{}", kept.join("&"))
                }
            }
        }
    } else {
        let kept: Vec<&str> = url.split_whitespace().filter(|p| !take(p, false)).collect();
        kept.join(" ")
    };
    (rest, params)
}

/// Whether every host `config` connects to is on this machine: a Unix socket, `localhost`
/// or a loopback address (the `hostaddr` ones when the URL gives them, since those are
/// what is connected to). A name that merely resolves to a loopback address does not count.
pub(super) fn local(config: &postgres::Config) -> bool {
    let addrs = config.get_hostaddrs();
    if !addrs.is_empty() {
        return addrs.iter().all(IpAddr::is_loopback);
    }
    config.get_hosts().iter().all(|host| match host {
        #[cfg(unix)]
        Host::Unix(_) => true,
        Host::Tcp(name) => {
            let name = name.trim_start_matches('[').trim_end_matches(']');
            name.eq_ignore_ascii_case("localhost")
                || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
        }
    })
}

/// The connector of a store reached over TLS.
#[derive(Clone)]
pub(super) struct Tls(pub MakeRustlsConnect);

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls")
    }
}

/// Why a store's TLS settings cannot be used.
#[derive(Debug, PartialEq)]
pub(super) enum Refusal {
    /// `sslmode` is not one libpq knows.
    UnknownMode(String),
    /// A store off this machine with TLS turned off.
    Plain,
    /// The TLS set-up failed (`sslrootcert` unreadable, no trusted roots).
    Setup(String),
}

/// Sets the TLS mode of `config` from `params`; returns the connector to use, `None` for a
/// connection without TLS.
pub(super) fn apply(
    config: &mut postgres::Config,
    params: &TlsParams,
) -> Result<Option<Tls>, Refusal> {
    let wanted = match params.mode.as_deref() {
        None | Some("prefer" | "allow") => None,
        Some("disable") => Some(false),
        Some("require" | "verify-ca" | "verify-full") => Some(true),
        Some(other) => return Err(Refusal::UnknownMode(other.to_string())),
    };
    let tls = match (wanted, local(config)) {
        (Some(false), false) => return Err(Refusal::Plain),
        (Some(true), _) | (None, false) => true,
        (Some(false) | None, true) => false,
    };
    if !tls {
        config.ssl_mode(SslMode::Disable);
        return Ok(None);
    }
    config.ssl_mode(SslMode::Require);
    let client = crate::client::tls::tls_config(params.root_cert.as_deref(), "sslrootcert")
        .map_err(Refusal::Setup)?;
    Ok(Some(Tls(MakeRustlsConnect::new((*client).clone()))))
}

/// Why the TLS handshake of a failed connection failed, in words and with what to do, when
/// that is why it failed.
pub(super) fn handshake_failure(e: &postgres::Error, config: &postgres::Config) -> Option<String> {
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>()
            && io
                .get_ref()
                .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some())
        {
            let host = match config.get_hosts().first() {
                Some(Host::Tcp(name)) => name.clone(),
                _ => "localhost".to_string(),
            };
            let port = config.get_ports().first().copied().unwrap_or(5432);
            return Some(crate::client::tls::handshake_failure(
                &format!("{host}:{port}"),
                io,
                "`sslrootcert=FILE` in the URL (or a PEM bundle in `SSL_CERT_FILE`)",
            ));
        }
        source = cause.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use std::str::FromStr as _;

    use super::*;

    fn mode(url: &str) -> Result<bool, Refusal> {
        let (rest, params) = take_params(url);
        let mut config = postgres::Config::from_str(&rest).expect("parses");
        apply(&mut config, &params).map(|tls| tls.is_some())
    }

    #[test]
    fn the_parameters_tokio_postgres_lacks_are_taken_out_of_both_forms() {
        let (rest, params) = take_params(
            "postgres://u:p@h/db?sslmode=verify-full&connect_timeout=3&sslrootcert=%2Ftmp%2Fca%20x.pem",
        );
        assert_eq!(rest, "postgres://u:p@h/db?connect_timeout=3");
        assert_eq!(params.mode.as_deref(), Some("verify-full"));
        assert_eq!(params.root_cert, Some(PathBuf::from("/tmp/ca x.pem")));
        let (rest, params) = take_params("host=h sslmode=require dbname=db");
        assert_eq!(rest, "host=h dbname=db");
        assert_eq!(params.mode.as_deref(), Some("require"));
        assert_eq!(
            take_params("postgres://h/db?sslmode=disable").0,
            "postgres://h/db"
        );
    }

    #[test]
    fn a_store_off_this_machine_gets_tls_or_is_refused() {
        assert_eq!(mode("postgres://u@db.example/x"), Ok(true));
        assert_eq!(mode("postgres://u@db.example/x?sslmode=prefer"), Ok(true));
        assert_eq!(
            mode("postgres://u@10.0.0.5/x?sslmode=disable"),
            Err(Refusal::Plain)
        );
        // A loopback name with an outside `hostaddr` is connected to the outside address.
        assert_eq!(
            mode("postgres://u@localhost/x?hostaddr=192.0.2.1&sslmode=disable"),
            Err(Refusal::Plain)
        );
        assert_eq!(
            mode("postgres://u@db.example/x?sslmode=sometimes"),
            Err(Refusal::UnknownMode("sometimes".to_string()))
        );
    }

    #[test]
    fn a_store_on_this_machine_uses_tls_when_asked() {
        for url in [
            "postgres://u@localhost/x",
            "postgres://u@127.0.0.1:5433/x?sslmode=prefer",
            "postgres://u@[::1]/x?sslmode=disable",
            // A Unix socket's folder (Windows has none: a path there is a host name).
            #[cfg(unix)]
            "host=/run/postgresql dbname=x",
        ] {
            assert_eq!(mode(url), Ok(false), "{url}");
        }
        assert_eq!(
            mode("postgres://u@127.0.0.1/x?sslmode=verify-full"),
            Ok(true)
        );
    }
}
