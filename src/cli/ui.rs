//! `mekara ui`: serves the run viewer (`crate::ui`) for this project's run store, and prints
//! its address.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;

use crate::exit::Exit;

#[derive(Debug, Args)]
pub(super) struct UiArgs {
    /// Listen here instead of a free port of 127.0.0.1 (`IP:PORT`, or `localhost:PORT`). On
    /// an address other machines reach, whoever has the printed token reads every run of
    /// this store and answers and cancels runs (without it, only the viewer's stylesheet and
    /// script): it needs `--allow-host`.
    #[arg(long, value_name = "ADDR", value_parser = super::mcp::http_addr, default_value = "127.0.0.1:0")]
    bind: SocketAddr,
    /// Also accept this host name in the `Host` and `Origin` headers (loopback names and
    /// the address always are). Needed to listen on a non-loopback address.
    #[arg(long = "allow-host", value_name = "HOST")]
    allow_hosts: Vec<String>,
    /// Open the viewer in the browser too.
    #[arg(long)]
    open: bool,
    /// How often the store is looked at, to update the open pages.
    #[arg(long, value_name = "DURATION", default_value = "500ms", value_parser = humantime::parse_duration)]
    poll: Duration,
}

/// What a viewer on an address other machines reach exposes to them. Every page and action
/// wants the token (`crate::ui`); the stylesheet and the script do not.
const EXPOSED: &str = "without the printed token, whoever reaches it gets only the viewer's stylesheet and script; with the token, they read every run of this store (outputs included) and answer and cancel runs, and the token travels unencrypted (plain HTTP)";

pub(super) fn run(args: UiArgs) -> anyhow::Result<Exit> {
    if !args.bind.ip().is_loopback() && args.allow_hosts.is_empty() {
        return super::usage(format!(
            "`{}` is not a loopback address: {EXPOSED}. To serve other machines anyway, name the host they will use with `--allow-host HOST`",
            args.bind
        ));
    }
    let (locations, _) = super::locate()?;
    let store = super::run_store(&locations)?;
    let place = store.place();
    let exposed = !args.bind.ip().is_loopback();
    let open = args.open;
    let options = crate::ui::UiOptions {
        addr: args.bind,
        allowed_hosts: args.allow_hosts,
        poll: args.poll,
    };
    super::mcp::serve_until_done(
        true,
        crate::ui::serve(options, locations, store, move |url| {
            println!("{url}");
            eprintln!("mekara ui: the runs of {place}; open the address above (Ctrl-C stops)");
            if exposed {
                eprintln!("mekara ui: listening beyond this machine: {EXPOSED}");
            }
            if open {
                open_browser(url);
            }
        }),
    )
}

/// Starts the system's browser on `url`, or says it could not.
fn open_browser(url: &str) {
    let program = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    if let Err(e) = std::process::Command::new(program)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        eprintln!(
            "mekara ui: cannot start `{program}` to open the browser ({e}); open the address yourself"
        );
    }
}
