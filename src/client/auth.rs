//! What a server that refused the request's credentials (401, 403) is told as: which
//! headers were sent and from which variables, or how to get a token.

use super::config;
use super::error::ClientError;
use super::http;

pub(super) fn auth_error(
    server: &str,
    auth: &http::AuthFailure,
    headers: &[config::Header],
) -> Option<ClientError> {
    let refusal = auth.lock().ok()?.clone()?;
    if refusal.wants_oauth() {
        return Some(ClientError::NeedsOAuth {
            server: server.to_string(),
            status: refusal.status.as_u16(),
            sent: oauth_hint(server, headers),
        });
    }
    let status = refusal.status;
    let sent = if headers.is_empty() {
        format!(
            "no headers were sent; add `headers` (e.g. `\"Authorization\": \"Bearer ${{TOKEN}}\"`) to server `{server}` in `.mcp.json`"
        )
    } else {
        let parts: Vec<String> = headers
            .iter()
            .map(|h| {
                if h.from_vars.is_empty() {
                    format!("`{}` (a literal value, from no variable)", h.name)
                } else {
                    format!("`{}` (from `${{{}}}`)", h.name, h.from_vars.join("}`, `${"))
                }
            })
            .collect();
        format!(
            "sent header {}; check the value of that variable",
            parts.join(", ")
        )
    };
    Some(ClientError::Unauthorized {
        server: server.to_string(),
        status: status.as_u16(),
        sent,
    })
}

/// What to do about a server that wants an OAuth token, given the headers sent.
fn oauth_hint(server: &str, headers: &[config::Header]) -> String {
    let sent_auth = headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("authorization"));
    match sent_auth {
        Some(h) if !h.from_vars.is_empty() => format!(
            "the token sent in header `{}` (from `${{{}}}`) was refused; check that the variable holds a valid, unexpired access token for this server",
            h.name,
            h.from_vars.join("}`, `${")
        ),
        Some(h) => format!(
            "the token sent in header `{}` (a literal value in `.mcp.json`) was refused; put a valid access token there, preferably through a variable (`\"Bearer ${{TOKEN}}\"`)",
            h.name
        ),
        None => {
            let var: String = server
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() {
                        c.to_ascii_uppercase()
                    } else {
                        '_'
                    }
                })
                .collect();
            format!(
                "get an access token for it (from the service's settings or its OAuth flow) and pass it as a header: add `\"headers\": {{\"Authorization\": \"Bearer ${{{var}_TOKEN}}\"}}` to server `{server}` in `.mcp.json`, and set `{var}_TOKEN`"
            )
        }
    }
}
