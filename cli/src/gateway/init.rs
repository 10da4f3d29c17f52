//! `mcp-hints gateway init`: writes the starter config, the repository's
//! examples/gateway.toml embedded byte for byte, so the file a new user
//! gets and the one the tests serve cannot drift apart.

use std::io::Write;
use std::path::Path;

use crate::args::InitArgs;
use crate::text::shell_word;

/// The starter config: examples/gateway.toml as checked in.
pub const STARTER: &str = include_str!("starter.toml");

/// The `notes` upstream's program in [`STARTER`], relative to the config's
/// directory.
const NOTES_PROGRAM: &str = "../target/debug/notes";

/// The audit log's `[log] path` in [`STARTER`], relative to the config's
/// directory.
const LOG_PATH: &str = "../target/gateway-audit.jsonl";

/// Whether `dir` is a clone's root (it holds examples/gateway.toml):
/// there [`STARTER`]'s `../target/`, relative to the clone's examples/
/// directory, would leave the clone, so the file written names `target/`.
fn is_clone_root(dir: &Path) -> bool {
    dir.join("examples").join("gateway.toml").is_file()
}

/// Writes [`STARTER`] to `args.path` (never over an existing file; in a
/// clone's root, a directory holding examples/gateway.toml, with its
/// `../target/` paths made `target/`) and prints what it wrote and the
/// commands to run next; exit status 0.
///
/// # Errors
///
/// For exit status 2: the file exists (`PATH already exists; nothing
/// written: ...`), or it cannot be created or written (the OS error).
pub fn run(args: &InitArgs) -> Result<u8, String> {
    let path = &args.path;
    let shown = path.display();
    // create_new: the check and the creation are one step, so a file made
    // in between is not overwritten either.
    let mut file = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(format!(
                "{shown} already exists; nothing written: give another PATH, or remove it first"
            ));
        }
        Err(error) => return Err(format!("{shown}: cannot create it: {error}")),
    };
    let dir = std::path::absolute(path)
        .ok()
        .and_then(|path| path.parent().map(Path::to_owned))
        .unwrap_or_default();
    let at_root = is_clone_root(&dir);
    let starter = if at_root {
        STARTER.replace("\"../target/", "\"target/").into()
    } else {
        std::borrow::Cow::Borrowed(STARTER)
    };
    file.write_all(starter.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|error| format!("{shown}: cannot write it: {error}"))?;
    let config = shell_word(&path.to_string_lossy());
    let mut out = format!(
        "wrote {shown}: a starter config serving the `notes` example server at \
         http://127.0.0.1:8787/mcp, with deny, require_approval, rate_limit and session rules and a secret filter\n"
    );
    // `../target/debug/notes`, without the `..` in what is shown; in a
    // clone's root, `target/debug/notes`.
    let base = if at_root {
        &dir
    } else {
        dir.parent().unwrap_or(&dir)
    };
    let beside = |relative: &str| base.join(relative.strip_prefix("../").unwrap_or(relative));
    let notes = beside(NOTES_PROGRAM);
    let log_dir = beside(LOG_PATH)
        .parent()
        .map(Path::to_owned)
        .unwrap_or_default();
    if !log_dir.is_dir() {
        out.push_str(&format!(
            "note: its audit log goes into {}, which is not there yet: create it (`mkdir -p \
             {}`) or edit `[log] path`; `check` and `serve` refuse to start without it\n",
            log_dir.display(),
            shell_word(&log_dir.to_string_lossy()),
        ));
    }
    if !notes.exists() {
        out.push_str(&format!(
            "note: its `notes` upstream runs {}, which is not there yet: build it in a clone of \
             mcp-hints with `cargo build -p mcp-hints-examples` (a config in the clone's \
             examples/ directory finds it), or edit `command`\n",
            notes.display()
        ));
    }
    out.push_str(&format!(
        "next:\n  export ALICE_TOKEN=$(openssl rand -hex 16) MCP_GATEWAY_ADMIN_TOKEN=$(openssl \
         rand -hex 16)\n  mcp-hints gateway check --config {config}\n  mcp-hints gateway serve \
         --config {config}\n"
    ));
    crate::print(&out)?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_hints_gateway::config::{UpstreamTransport, parse_with_env};

    #[test]
    fn the_starter_config_is_valid_and_runs_the_notes_program_init_names() {
        let env = |name: &str| {
            ["ALICE_TOKEN", "MCP_GATEWAY_ADMIN_TOKEN"]
                .contains(&name)
                .then(|| format!("{name}-0123456789abcdef").into())
        };
        let config = parse_with_env(STARTER, Path::new("/clone/examples/gateway.toml"), &env)
            .unwrap_or_else(|error| panic!("{error}"));
        assert!(config.warnings().is_empty(), "{:?}", config.warnings());
        let [notes] = config.upstreams.as_slice() else {
            panic!("{:?}", config.upstreams);
        };
        let UpstreamTransport::Command { program, .. } = &notes.transport else {
            panic!("{:?}", notes.transport);
        };
        assert_eq!(program, &format!("/clone/examples/{NOTES_PROGRAM}"));
        assert_eq!(
            config.log.path,
            Path::new(&format!("/clone/examples/{LOG_PATH}"))
        );
    }
}
