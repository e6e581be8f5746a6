//! The password file of libpq (`~/.pgpass`, or the file `PGPASSFILE` names): the password of
//! a URL that has none. Each line is `HOST:PORT:DATABASE:USER:PASSWORD` (`*` matches
//! anything, `\:` and `\\` are a `:` and a `\`), and the first line that matches is used.
//!
//! It lets a project's `.mekara/config.toml` name its store without a password: the
//! password is the person's, and goes only to the server the person wrote it for, where a
//! `${VAR}` would go wherever the repository pointed it. As libpq does, a file that others
//! may read is ignored (with a warning), and a socket connection matches `localhost`.

use std::path::PathBuf;

use postgres::config::Host;

/// The password the person's password file holds for the first host of `config`, when
/// `config` has none and names a user.
pub(super) fn password(config: &postgres::Config, home: Option<PathBuf>) -> Option<String> {
    if config.get_password().is_some() {
        return None;
    }
    let user = config.get_user()?;
    let file = std::env::var_os("PGPASSFILE")
        .filter(|f| !f.is_empty())
        .map(PathBuf::from)
        .or_else(|| home.map(|h| h.join(".pgpass")))?;
    let meta = std::fs::metadata(&file).ok()?;
    if readable_by_others(&meta) {
        tracing::warn!(
            "the password file `{}` may be read by others, so it is not used; `chmod 600` it",
            file.display()
        );
        return None;
    }
    let text = std::fs::read_to_string(&file).ok()?;
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(name)) => name.clone(),
        _ => "localhost".to_string(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let database = config.get_dbname().unwrap_or(user);
    let wanted = [host.as_str(), &port, database, user];
    text.lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .map(fields)
        .find(|fields| {
            fields.len() == 5
                && wanted
                    .iter()
                    .zip(fields)
                    .all(|(want, field)| field == "*" || field == want)
        })
        .map(|mut fields| fields.swap_remove(4))
}

/// Whether the file's mode lets others than its owner read it (libpq refuses such a file).
#[cfg(unix)]
fn readable_by_others(meta: &std::fs::Metadata) -> bool {
    std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o077 != 0
}

/// Windows has no mode bits; libpq reads the file there without a check, and so does mekara
/// (a user's profile folder is theirs alone by default).
#[cfg(windows)]
fn readable_by_others(_meta: &std::fs::Metadata) -> bool {
    false
}

/// The fields of one line: split at each `:` that is not escaped, `\x` read as `x`.
fn fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let (Some(next), Some(field)) = (chars.next(), fields.last_mut()) {
                    field.push(next);
                }
            }
            ':' => fields.push(String::new()),
            c => {
                if let Some(field) = fields.last_mut() {
                    field.push(c);
                }
            }
        }
    }
    fields
}

#[cfg(all(test, unix))]
mod tests {
    use std::str::FromStr as _;

    use super::*;

    #[test]
    fn the_first_matching_line_gives_the_password_of_a_url_without_one() {
        let home = tempfile::tempdir().expect("tempdir");
        let file = home.path().join(".pgpass");
        std::fs::write(
            &file,
            "# comment\nother:5432:*:u:nope\ndb.internal:*:runs:u:pa\\:ss\\\\\n*:*:*:*:any\n",
        )
        .expect("write");
        std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .expect("chmod");
        let found = |url: &str| {
            let config = postgres::Config::from_str(url).expect("url");
            password(&config, Some(home.path().to_path_buf()))
        };
        assert_eq!(
            found("postgres://u@db.internal:6543/runs").as_deref(),
            Some("pa:ss\\")
        );
        assert_eq!(
            found("postgres://u@db.internal/other").as_deref(),
            Some("any")
        );
        assert_eq!(found("postgres://u:given@db.internal/runs"), None);
        std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .expect("chmod");
        assert_eq!(
            found("postgres://u@db.internal/runs"),
            None,
            "others may read it"
        );
    }
}
