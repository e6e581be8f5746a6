//! Webhook URLs as logs and errors show them: a Slack hook's path, a token in the query or a
//! password before the host is the secret itself, so only the scheme, host and port are shown.

use crate::secrets::Secrets;

/// `url` for people: `https://hooks.slack.com/***`, its user, path and query hidden.
pub(crate) fn shown(url: &str) -> String {
    let Ok(uri) = url.parse::<http::Uri>() else {
        return "the webhook".to_string();
    };
    let mut out = format!(
        "{}://{}",
        uri.scheme_str().unwrap_or("http"),
        uri.host().unwrap_or_default()
    );
    if let Some(port) = uri.port_u16() {
        out.push_str(&format!(":{port}"));
    }
    if uri.path().trim_matches('/').is_empty() {
        out.push('/');
    } else {
        out.push_str("/***");
    }
    if uri.query().is_some() {
        out.push_str("?***");
    }
    out
}

/// `text` with `url` as [`shown`] gives it, and every value `secrets` and the process took
/// from the environment as `${VAR}`.
pub(super) fn redact_url(text: &str, url: &str, secrets: &Secrets) -> String {
    let text = if url.is_empty() {
        text.to_string()
    } else {
        text.replace(url, &shown(url))
    };
    crate::secrets::redact(&secrets.redact(&text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_shown_without_its_user_path_or_query() {
        for (url, want) in [
            (
                "https://hooks.slack.com/services/T000/B000/XXXXSECRET",
                "https://hooks.slack.com/***",
            ),
            (
                "https://user:hunter2@example.com:8443/hook?token=abc",
                "https://example.com:8443/***?***",
            ),
            ("http://127.0.0.1:9/?key=sekrit", "http://127.0.0.1:9/?***"),
            ("http://example.com", "http://example.com/"),
            ("not a url at all", "the webhook"),
            ("", "the webhook"),
        ] {
            assert_eq!(shown(url), want, "{url}");
        }
    }

    #[test]
    fn text_naming_the_url_or_a_secret_keeps_neither() {
        let mut secrets = Secrets::default();
        secrets.add("HOOK_TOKEN", "tok-12345");
        let url = "https://example.com/hook/tok-12345";
        let text = format!("cannot post to `{url}`: refused (tok-12345)");
        let out = redact_url(&text, url, &secrets);
        assert_eq!(
            out,
            "cannot post to `https://example.com/***`: refused (${HOOK_TOKEN})"
        );
    }
}
