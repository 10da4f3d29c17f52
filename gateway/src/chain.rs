//! The audit log's hash chain: the `seq` and `prev` that link each line of
//! the log to the line before it, checkpoints and their Ed25519
//! signatures, the rotated files of one log, and the check `mcp-hints
//! gateway log --verify` runs over them.
//!
//! # The chain
//!
//! Every line the gateway writes starts `{"seq":N,"prev":"HEX",`: `seq` is
//! its place in the chain (the first line is 1, and each line after it
//! one more, across rotated files), `prev` is the SHA-256, as 64 lowercase
//! hex digits, of the exact bytes of the line before it (without its
//! newline), or [`GENESIS`] for the first line. So every line commits to
//! every line before it: an edited, removed, reordered or inserted line
//! breaks the link of the line after it, and [`verify`] names where.
//!
//! A line cut short by a crash (the gateway died mid-`write`) is not part
//! of the chain: it is a prefix of a JSON object, which the writer ends
//! with a newline when it reopens the log and then chains on from the
//! last whole line, and which [`verify`] reports as torn, not as
//! tampering. The line the writer chains on with names the torn line's
//! SHA-256 (`{"seq":N,"prev":"HEX","torn":"HEX",...`), so that a torn line
//! is only ever the log's last line (a crash not yet followed by a
//! start) or one a restart acknowledged: a fragment put anywhere else by
//! hand, or an acknowledged one taken out, is tampering.
//!
//! # Checkpoints
//!
//! A checkpoint is a line of the chain of its own, `{"seq":N,"prev":"HEX",
//! "time":"...","replica":"...","checkpoint":"periodic"|"shutdown",
//! "key":"HEX","signature":"HEX"}`, written every `[log] checkpoint_every`
//! entries and when the gateway stops. With `[log] signing_key` it is
//! signed (Ed25519, RFC 8032) over [`CHECKPOINT_DOMAIN`] followed by the
//! JSON array `[seq, prev, time, replica, checkpoint, key]`; without one
//! it has no `key` or `signature`. Each checkpoint is also copied, once
//! the log holding it is synced, to the file beside the log named
//! [`checkpoint_path`] (`audit.jsonl.checkpoint`), so that a log cut short
//! before its last checkpoint is found as truncated.
//!
//! # Rotation
//!
//! With `[log] max_bytes`, a log that would grow past it is renamed to
//! [`rotated_path`] (`audit.jsonl.000001`, then `.000002`, ...: the
//! oldest has the smallest number, and a name is never reused) and a new
//! file is started at the configured path, whose first line chains to the
//! last line of the file before. [`files`] finds them again.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey};
use ed25519_dalek::{Signer, Verifier};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use mcp_hints_core::escape::shown;

/// The `prev` of the chain's first line: 64 zeros.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What a checkpoint's signature covers first, before the JSON array of
/// its fields: the name of what is signed, so that a signature made for
/// anything else never passes for a checkpoint's.
pub const CHECKPOINT_DOMAIN: &[u8] = b"mcp-hints-gateway audit checkpoint v1\n";

/// The SHA-256 of `line` (without its newline) as 64 lowercase hex digits:
/// the `prev` of the line after it.
pub fn line_hash(line: &[u8]) -> String {
    hex(&Sha256::digest(line))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(2 * bytes.len());
    for byte in bytes {
        text.push(char::from(HEX[usize::from(byte >> 4)]));
        text.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
    text
}

fn unhex<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != 2 * N {
        return None;
    }
    let mut bytes = [0u8; N];
    for (byte, pair) in bytes.iter_mut().zip(text.as_bytes().chunks(2)) {
        let digit = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        *byte = (digit(pair[0])? << 4) | digit(pair[1])?;
    }
    Some(bytes)
}

/// Where the chain stands: the last line's `seq` (0 before the first) and
/// its hash ([`GENESIS`] before the first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) seq: u64,
    pub(crate) hash: String,
    /// Whether the last line is a checkpoint (so stopping again, with
    /// nothing written since, needs none).
    pub(crate) at_checkpoint: bool,
    /// The hash of a line a crash cut short after the head, which the
    /// next link acknowledges (`"torn"`).
    pub(crate) torn: Option<String>,
}

impl Head {
    /// The head of an empty chain.
    pub(crate) fn genesis() -> Head {
        Head {
            seq: 0,
            hash: GENESIS.to_owned(),
            at_checkpoint: false,
            torn: None,
        }
    }

    /// The next line of the chain: `{"seq":N,"prev":"HEX",` and the rest
    /// of `body` (a serialised JSON object, `{` included), then a newline.
    pub(crate) fn link(&self, body: &[u8]) -> Vec<u8> {
        let rest = body.strip_prefix(b"{").unwrap_or(body);
        let mut line = Vec::with_capacity(body.len() + 100);
        line.extend_from_slice(b"{\"seq\":");
        line.extend_from_slice((self.seq + 1).to_string().as_bytes());
        line.extend_from_slice(b",\"prev\":\"");
        line.extend_from_slice(self.hash.as_bytes());
        line.push(b'"');
        if let Some(torn) = &self.torn {
            line.extend_from_slice(b",\"torn\":\"");
            line.extend_from_slice(torn.as_bytes());
            line.push(b'"');
        }
        if rest != b"}" {
            line.push(b',');
        }
        line.extend_from_slice(rest);
        line.push(b'\n');
        line
    }

    /// The head once `line` (with its newline) is written after it.
    pub(crate) fn after(&self, line: &[u8], checkpoint: bool) -> Head {
        Head {
            seq: self.seq + 1,
            hash: line_hash(line.strip_suffix(b"\n").unwrap_or(line)),
            at_checkpoint: checkpoint,
            torn: None,
        }
    }
}

/// Why a checkpoint was written: its `checkpoint` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointKind {
    /// After `[log] checkpoint_every` entries.
    Periodic,
    /// When the gateway stopped.
    Shutdown,
}

/// A checkpoint line, as read back (`seq` and `prev` as every line has
/// them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Its place in the chain.
    pub seq: u64,
    /// The hash of the line before it: the chain's head it attests.
    pub prev: String,
    /// When it was written, RFC 3339 in UTC with milliseconds.
    pub time: String,
    /// The replica that wrote it.
    pub replica: String,
    /// Why it was written.
    pub checkpoint: CheckpointKind,
    /// The signer's Ed25519 public key, 64 hex digits; absent when
    /// unsigned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The Ed25519 signature (RFC 8032), 128 hex digits, over
    /// [`CHECKPOINT_DOMAIN`] and the JSON array `[seq, prev, time,
    /// replica, checkpoint, key]`; absent when unsigned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

impl Checkpoint {
    /// The bytes its signature covers.
    fn message(&self) -> Vec<u8> {
        let fields = (
            self.seq,
            &self.prev,
            &self.time,
            &self.replica,
            self.checkpoint,
            &self.key,
        );
        let mut message = CHECKPOINT_DOMAIN.to_vec();
        // Serialising plain strings and numbers cannot fail.
        message.extend(serde_json::to_vec(&fields).unwrap_or_default());
        message
    }

    /// Whether its signature is valid for `key`: `Err` saying why not.
    fn check_signature(&self, key: &ed25519_dalek::VerifyingKey) -> Result<(), String> {
        let Some(signature) = &self.signature else {
            return Err("it is not signed".to_owned());
        };
        let named = self.key.as_deref().unwrap_or("");
        let given = hex(key.as_bytes());
        if named != given {
            return Err(format!(
                "it names the key {}, not the one given ({given})",
                shown(named)
            ));
        }
        let signature = unhex::<64>(signature)
            .map(|bytes| ed25519_dalek::Signature::from_bytes(&bytes))
            .ok_or("its signature is not 128 hex digits")?;
        key.verify(&self.message(), &signature)
            .map_err(|_| "its signature does not match its fields".to_owned())
    }
}

/// The Ed25519 key that signs checkpoints (`[log] signing_key`). Its
/// `Debug` shows the public key only; two are equal when their public keys
/// are.
#[derive(Clone)]
pub struct SigningKey {
    key: ed25519_dalek::SigningKey,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SigningKey(public {})", self.public_hex())
    }
}

impl PartialEq for SigningKey {
    fn eq(&self, other: &SigningKey) -> bool {
        self.key.verifying_key() == other.key.verifying_key()
    }
}

impl Eq for SigningKey {}

impl SigningKey {
    /// Reads an Ed25519 private key from the PKCS#8 PEM file at `path`
    /// (RFC 8410; what `openssl genpkey -algorithm ed25519 -out key.pem`
    /// writes).
    ///
    /// # Errors
    ///
    /// A sentence (without the path) for a file that cannot be read or is
    /// not an Ed25519 PKCS#8 PEM private key.
    pub fn load(path: &Path) -> Result<SigningKey, String> {
        let text =
            std::fs::read_to_string(path).map_err(|error| format!("cannot read it: {error}"))?;
        ed25519_dalek::SigningKey::from_pkcs8_pem(&text)
            .map(|key| SigningKey { key })
            .map_err(|error| {
                format!(
                    "not an Ed25519 private key in PKCS#8 PEM ({error}): make one with \
                     `openssl genpkey -algorithm ed25519 -out KEY.pem`"
                )
            })
    }

    /// Its public key, 64 hex digits (a checkpoint's `key`).
    pub fn public_hex(&self) -> String {
        hex(self.key.verifying_key().as_bytes())
    }

    /// Signs `checkpoint` (its `key` set to this key's).
    fn sign(&self, checkpoint: &mut Checkpoint) {
        checkpoint.key = Some(self.public_hex());
        let signature = self.key.sign(&checkpoint.message());
        checkpoint.signature = Some(hex(&signature.to_bytes()));
    }
}

/// Reads an Ed25519 public key from the SPKI PEM file at `path` (RFC 8410;
/// what `openssl pkey -in key.pem -pubout -out public.pem` writes).
///
/// # Errors
///
/// A sentence naming the file when it cannot be read or holds no Ed25519
/// public key.
pub fn load_public_key(path: &Path) -> Result<ed25519_dalek::VerifyingKey, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("{}: cannot read it: {error}", path.display()))?;
    ed25519_dalek::VerifyingKey::from_public_key_pem(&text).map_err(|error| {
        format!(
            "{}: not an Ed25519 public key in PEM ({error}): make it from the private key with \
             `openssl pkey -in KEY.pem -pubout -out PUBLIC.pem`",
            path.display()
        )
    })
}

/// The checkpoint line of `kind` after `head`, signed with `key` if
/// given, with its newline.
pub(crate) fn checkpoint_line(
    head: &Head,
    kind: CheckpointKind,
    time: String,
    replica: &str,
    key: Option<&SigningKey>,
) -> Vec<u8> {
    let mut checkpoint = Checkpoint {
        seq: head.seq + 1,
        prev: head.hash.clone(),
        time,
        replica: replica.to_owned(),
        checkpoint: kind,
        key: None,
        signature: None,
    };
    if let Some(key) = key {
        key.sign(&mut checkpoint);
    }
    let mut line = serde_json::to_vec(&checkpoint).unwrap_or_default();
    line.push(b'\n');
    line
}

/// The copy of a log's last checkpoint beside it: `PATH.checkpoint`.
pub fn checkpoint_path(log: &Path) -> PathBuf {
    suffixed(log, ".checkpoint")
}

/// The name a log at `log` is renamed to by its `number`th rotation:
/// `PATH.000001` (six digits at least).
pub fn rotated_path(log: &Path, number: u64) -> PathBuf {
    suffixed(log, &format!(".{number:06}"))
}

fn suffixed(log: &Path, suffix: &str) -> PathBuf {
    let mut name = log.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// The rotated files of the log at `log`, oldest first, each with its
/// number: the files beside it named `NAME.` and six or more digits.
///
/// # Errors
///
/// The system's error when the log's directory cannot be listed.
pub fn rotated(log: &Path) -> std::io::Result<Vec<(u64, PathBuf)>> {
    let directory = match log.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let Some(name) = log.file_name().and_then(|name| name.to_str()) else {
        return Ok(Vec::new());
    };
    let prefix = format!("{name}.");
    let mut found = Vec::new();
    let entries = match std::fs::read_dir(directory) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(found),
        Err(error) => return Err(error),
    };
    for entry in entries {
        let entry = entry?;
        let file_name = entry.file_name();
        let Some(digits) = file_name.to_str().and_then(|n| n.strip_prefix(&prefix)) else {
            continue;
        };
        if digits.len() >= 6
            && digits.bytes().all(|b| b.is_ascii_digit())
            && let Ok(number) = digits.parse::<u64>()
        {
            found.push((number, log.with_file_name(&file_name)));
        }
    }
    found.sort();
    Ok(found)
}

/// The files of the log at `log` in the chain's order: its rotated files
/// (see [`rotated`]), oldest first, then `log` itself.
///
/// # Errors
///
/// As [`rotated`].
pub fn files(log: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = rotated(log)?.into_iter().map(|(_, path)| path).collect();
    files.push(log.to_owned());
    Ok(files)
}

/// What a line of the log is, for the chain.
enum Line {
    /// A JSON object: an entry or a checkpoint.
    Object(serde_json::Map<String, Value>),
    /// A prefix of a JSON object: a line a crash cut short.
    Torn,
    /// Anything else.
    Other(String),
}

fn classify(bytes: &[u8]) -> Line {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(object)) => Line::Object(object),
        Ok(other) => Line::Other(format!("a JSON {}, not an object", json_kind(&other))),
        Err(error) if error.is_eof() && bytes.first() == Some(&b'{') => Line::Torn,
        Err(error) => Line::Other(format!("not JSON: {error}")),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Where the writer resumes the chain of the log at `log` (the current
/// file, else its newest rotated one): after its last line that is a JSON
/// object, reading backwards from the end in blocks, so that a long log
/// costs no more than its last lines. Lines a crash cut short are passed
/// over. A last line without `seq` (a log written before the chain) is
/// chained to as line 0. An empty or missing log starts at [`GENESIS`].
///
/// # Errors
///
/// The system's error when a file cannot be read.
pub(crate) fn resume(log: &Path) -> std::io::Result<Head> {
    let mut candidates = vec![log.to_owned()];
    candidates.extend(rotated(log)?.into_iter().rev().map(|(_, path)| path));
    for path in candidates {
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
            Err(error) => return Err(error),
        };
        if let Some(head) = last_object(file)? {
            return Ok(head);
        }
    }
    Ok(Head::genesis())
}

/// The bytes after the last newline of the file at `path` (a line a crash
/// cut short), read from the end; `None` when it ends with a newline or
/// is empty.
pub(crate) fn torn_tail(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    const BLOCK: u64 = 64 * 1024;
    let mut file = File::open(path)?;
    let mut start = file.metadata()?.len();
    let mut tail: Vec<u8> = Vec::new();
    while start > 0 {
        let read_from = start.saturating_sub(BLOCK);
        let mut block = vec![0u8; usize::try_from(start - read_from).unwrap_or(0)];
        file.seek(SeekFrom::Start(read_from))?;
        file.read_exact(&mut block)?;
        if let Some(at) = block.iter().rposition(|&b| b == b'\n') {
            block.drain(..=at);
            block.extend_from_slice(&tail);
            tail = block;
            break;
        }
        block.extend_from_slice(&tail);
        tail = block;
        start = read_from;
    }
    Ok((!tail.is_empty()).then_some(tail))
}

/// The head after the last whole line of `file` that is a JSON object.
fn last_object(mut file: File) -> std::io::Result<Option<Head>> {
    const BLOCK: u64 = 64 * 1024;
    let length = file.metadata()?.len();
    // Bytes from `start` to the end of the part examined, which ends at
    // the last newline seen (whole lines only).
    let mut buffer: Vec<u8> = Vec::new();
    let mut start = length;
    let mut end_known = false;
    while start > 0 {
        let read_from = start.saturating_sub(BLOCK);
        let mut block = vec![0u8; usize::try_from(start - read_from).unwrap_or(0)];
        file.seek(SeekFrom::Start(read_from))?;
        file.read_exact(&mut block)?;
        block.extend_from_slice(&buffer);
        buffer = block;
        start = read_from;
        if !end_known {
            // What follows the last newline is a line not yet ended.
            match buffer.iter().rposition(|&b| b == b'\n') {
                Some(at) => {
                    buffer.truncate(at + 1);
                    end_known = true;
                }
                None => continue,
            }
        }
        // Whole lines, last first; the first part is whole only at the
        // file's start.
        let mut lines: Vec<&[u8]> = buffer[..buffer.len() - 1].split(|&b| b == b'\n').collect();
        let first_whole = start == 0;
        let mut first = None;
        if !first_whole {
            first = Some(lines.remove(0));
        }
        for line in lines.iter().rev() {
            if let Line::Object(object) = classify(line) {
                let seq = object.get("seq").and_then(Value::as_u64).unwrap_or(0);
                return Ok(Some(Head {
                    seq,
                    hash: line_hash(line),
                    at_checkpoint: object.contains_key("checkpoint"),
                    torn: None,
                }));
            }
        }
        // Keep only the part that may be a line's end, to read on.
        let keep = first.map_or(0, <[u8]>::len);
        buffer.truncate(keep);
        buffer.push(b'\n');
    }
    Ok(None)
}

/// Whether the writer may go on from `head`, the end of the log at `log`:
/// an error saying why not when the copy of its last checkpoint
/// ([`checkpoint_path`]) is not a checkpoint, names an entry past the
/// log's end (the log was cut short), or is the log's last line and
/// differs from it (that line was edited). Going on would bury the break
/// under a new checkpoint and its copy.
pub(crate) fn check_resume(log: &Path, head: &Head) -> Result<(), String> {
    let copy = checkpoint_path(log);
    let copy_shown = shown(&copy.to_string_lossy()).into_owned();
    let advice = format!(
        "run `mcp-hints gateway log --verify --log {}`, then move the log, its rotated files and \
         {copy_shown} aside to start a new chain",
        shown(&log.to_string_lossy())
    );
    match read_copy(log) {
        None => Ok(()),
        Some(Err(why)) => Err(format!(
            "the copy of its last checkpoint, {copy_shown}, is not a checkpoint ({}); {advice}",
            shown(&why)
        )),
        Some(Ok((seq, _))) if seq > head.seq => Err(format!(
            "it ends at entry {}, but its last checkpoint ({copy_shown}) is entry {seq}: it was \
             cut short; {advice}",
            head.seq
        )),
        Some(Ok((seq, line))) if seq == head.seq && line_hash(&line) != head.hash => Err(format!(
            "its last line, entry {seq}, differs from its last checkpoint's copy \
             ({copy_shown}): it was edited; {advice}"
        )),
        Some(Ok(_)) => Ok(()),
    }
}

/// Where a line is: its file and its number there (from 1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct At {
    /// The file.
    pub file: PathBuf,
    /// The line's number in it, from 1.
    pub line: usize,
}

impl std::fmt::Display for At {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", shown(&self.file.to_string_lossy()), self.line)
    }
}

/// What [`verify`] found wrong: the first place the chain does not hold,
/// each variant naming the line(s) by file and number and the entries by
/// `seq`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tampering {
    /// A line that is neither an entry of the chain nor a line cut short
    /// by a crash.
    NotAnEntry {
        /// Where.
        at: At,
        /// What it is instead.
        why: String,
    },
    /// The line at `at` was edited: the line after it records another
    /// hash.
    Edited {
        /// The edited line.
        at: At,
        /// Its `seq`.
        seq: u64,
        /// The line after it.
        next: At,
        /// What the line hashes to now.
        hash: String,
        /// What the line after it records as its hash.
        recorded: String,
    },
    /// Entries `from..=to` are missing before the line at `before`.
    Removed {
        /// The first missing entry.
        from: u64,
        /// The last missing entry.
        to: u64,
        /// The line after the gap.
        before: At,
    },
    /// Entry `seq` at `at` comes before entry `expected`, found later at
    /// `found`.
    Reordered {
        /// The entry out of place.
        seq: u64,
        /// Where it is.
        at: At,
        /// The entry that should come first.
        expected: u64,
        /// Where that one is.
        found: At,
    },
    /// The line at `at` does not belong to the chain: the line after it
    /// chains to the line before it.
    Inserted {
        /// The inserted line.
        at: At,
        /// The `seq` it claims.
        seq: Option<u64>,
        /// Whether its `prev` matches no line before it (a line from
        /// another log).
        foreign: bool,
    },
    /// Entry `seq` at `at` is not the one expected after the line before
    /// it, and no simpler account fits.
    OutOfPlace {
        /// Where.
        at: At,
        /// Its `seq`.
        seq: u64,
        /// The `seq` expected.
        expected: u64,
        /// Its `prev`.
        prev: String,
        /// The hash of the line before it.
        hash: String,
    },
    /// The chain's first line is not entry 1 chained to [`GENESIS`]: the
    /// files or lines before it are gone.
    MissingStart {
        /// The first line.
        at: At,
        /// Its `seq`.
        seq: u64,
    },
    /// A rotated file between two others is gone.
    MissingFile {
        /// The name it had.
        file: PathBuf,
    },
    /// The log itself is gone, and its rotated files are there.
    LogMissing {
        /// The log's path.
        file: PathBuf,
    },
    /// A checkpoint's signature does not hold.
    BadSignature {
        /// The checkpoint.
        at: At,
        /// Its `seq`.
        seq: u64,
        /// Why.
        why: String,
    },
    /// With a public key given: the log has no checkpoint signed by it.
    NoSignedCheckpoint,
    /// The log ends before its last checkpoint (the copy beside it).
    Truncated {
        /// The copy.
        copy: PathBuf,
        /// The entry it attests.
        seq: u64,
        /// The last entry in the log (0: none).
        ends_at: u64,
    },
    /// The log's line at the checkpoint's place differs from the copy.
    CheckpointMismatch {
        /// The copy.
        copy: PathBuf,
        /// The line in the log.
        at: At,
        /// Its `seq`.
        seq: u64,
    },
    /// A line cut short, as by a crash, that no line after it
    /// acknowledges: the writer names the torn line it ended in the line
    /// it chains on with, so a torn line is only ever the log's last
    /// line, or acknowledged; this one was put in by hand (or the line
    /// that acknowledged it was edited).
    UnacknowledgedTorn {
        /// The torn line.
        at: At,
    },
    /// The line at `at` acknowledges a torn line before it (`"torn"`),
    /// and there is none where it was: it was removed.
    TornRemoved {
        /// The line that acknowledges it.
        at: At,
    },
    /// The copy of the last checkpoint is not a checkpoint.
    BadCopy {
        /// The copy.
        copy: PathBuf,
        /// Why.
        why: String,
    },
}

fn short(hash: &str) -> String {
    shown(hash.get(..12).unwrap_or(hash)).into_owned()
}

impl std::fmt::Display for Tampering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = |path: &Path| shown(&path.to_string_lossy()).into_owned();
        match self {
            Tampering::NotAnEntry { at, why } => {
                write!(f, "{at}: not an entry of the chain: {}", shown(why))
            }
            Tampering::Edited {
                at,
                seq,
                next,
                hash,
                recorded,
            } => write!(
                f,
                "{at}: entry {seq} was edited: it hashes to {}…, but the line after it \
                 ({next}) records {}…",
                short(hash),
                short(recorded)
            ),
            Tampering::Removed { from, to, before } => {
                if from == to {
                    write!(f, "{before}: entry {from} was removed before this line")?;
                } else {
                    write!(
                        f,
                        "{before}: entries {from} to {to} were removed before this line"
                    )?;
                }
                if before.line == 1 {
                    // A file's first line: the file before it may be gone.
                    f.write_str(" (or the rotated file before this one is missing)")?;
                }
                Ok(())
            }
            Tampering::Reordered {
                seq,
                at,
                expected,
                found,
            } => write!(
                f,
                "{at}: entries were reordered: entry {seq} is here, before entry {expected} \
                 (at {found})"
            ),
            Tampering::Inserted { at, seq, foreign } => {
                let seq =
                    seq.map_or_else(String::new, |seq| format!(" (claiming to be entry {seq})"));
                let from = if *foreign {
                    ": its `prev` matches no line before it (a line of another log?)"
                } else {
                    ""
                };
                write!(
                    f,
                    "{at}: a line was inserted{seq}; the line after it chains to the line before \
                     it{from}"
                )
            }
            Tampering::OutOfPlace {
                at,
                seq,
                expected,
                prev,
                hash,
            } => write!(
                f,
                "{at}: entry {seq} is out of place: entry {expected} was expected, chained to \
                 {}…, and its `prev` is {}…",
                short(hash),
                short(prev)
            ),
            Tampering::MissingStart { at, seq } => write!(
                f,
                "{at}: the chain starts at entry {seq}, not at entry 1: the lines or rotated files \
                 before it are missing"
            ),
            Tampering::MissingFile { file } => {
                write!(f, "{}: this rotated file is missing", path(file))
            }
            Tampering::LogMissing { file } => write!(
                f,
                "{}: the log is missing, and its rotated files are there: it was removed",
                path(file)
            ),
            Tampering::BadSignature { at, seq, why } => {
                write!(
                    f,
                    "{at}: checkpoint {seq} fails verification: {}",
                    shown(why)
                )
            }
            Tampering::NoSignedCheckpoint => {
                f.write_str("no checkpoint is signed by the key given")
            }
            Tampering::Truncated { copy, seq, ends_at } => write!(
                f,
                "the log was truncated: its last checkpoint ({}) is entry {seq}, but the log ends \
                 at entry {ends_at}",
                path(copy)
            ),
            Tampering::CheckpointMismatch { copy, at, seq } => write!(
                f,
                "{at}: entry {seq} differs from the last checkpoint's copy ({})",
                path(copy)
            ),
            Tampering::BadCopy { copy, why } => {
                write!(f, "{}: not a checkpoint: {}", path(copy), shown(why))
            }
            Tampering::UnacknowledgedTorn { at } => write!(
                f,
                "{at}: a line cut short that no line after it acknowledges: a gateway that \
                 starts again after a crash names the torn line it ended in its next line, so \
                 this was put in the log by hand"
            ),
            Tampering::TornRemoved { at } => write!(
                f,
                "{at}: this line acknowledges a line cut short by a crash before it, and there \
                 is none: that line was removed"
            ),
        }
    }
}

/// What [`verify`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// The files read, in the chain's order.
    pub files: Vec<PathBuf>,
    /// Entries in the chain (checkpoints not counted).
    pub entries: u64,
    /// Checkpoints in the chain.
    pub checkpoints: u64,
    /// Checkpoints whose signature was checked and holds.
    pub signed: u64,
    /// The last line's `seq` (0: none).
    pub head_seq: u64,
    /// The last line's hash ([`GENESIS`] for none).
    pub head: String,
    /// Lines before the chain's first, without `seq` and `prev` (written
    /// before the log was chained): not verified.
    pub unchained: u64,
    /// Lines cut short by a crash: not part of the chain.
    pub torn: Vec<At>,
    /// The last checkpoint's `seq`, if any.
    pub last_checkpoint: Option<u64>,
    /// Entries after the last checkpoint (all of them when there is none).
    pub unsigned_tail: u64,
    /// The `seq` of the copy of the last checkpoint ([`checkpoint_path`])
    /// when the log holds that line as the copy has it; `None` without a
    /// copy.
    pub copy_matched: Option<u64>,
    /// The first thing wrong, if any.
    pub tampering: Option<Tampering>,
    /// The last entry the chain vouches for: `head_seq` when intact, else
    /// the last line before the first one wrong (0: none).
    pub holds_to: u64,
}

/// One line read: where, and its bytes (without the newline).
struct RawLine {
    at: At,
    bytes: Vec<u8>,
}

/// Every line of `files` in order.
struct Lines {
    files: Vec<PathBuf>,
    index: usize,
    reader: Option<(BufReader<File>, usize)>,
}

impl Lines {
    fn new(files: &[PathBuf]) -> Lines {
        Lines {
            files: files.to_vec(),
            index: 0,
            reader: None,
        }
    }

    fn next(&mut self) -> std::io::Result<Option<RawLine>> {
        loop {
            if self.reader.is_none() {
                let Some(path) = self.files.get(self.index) else {
                    return Ok(None);
                };
                let file = File::open(path).map_err(|error| {
                    std::io::Error::new(
                        error.kind(),
                        format!(
                            "audit log {}: cannot read it: {error}",
                            shown(&path.to_string_lossy())
                        ),
                    )
                })?;
                self.reader = Some((BufReader::new(file), 0));
            }
            let Some((reader, number)) = self.reader.as_mut() else {
                continue;
            };
            let mut bytes = Vec::new();
            if reader.read_until(b'\n', &mut bytes)? == 0 {
                self.reader = None;
                self.index += 1;
                continue;
            }
            *number += 1;
            if bytes.last() == Some(&b'\n') {
                bytes.pop();
            }
            return Ok(Some(RawLine {
                at: At {
                    file: self.files[self.index].clone(),
                    line: *number,
                },
                bytes,
            }));
        }
    }
}

/// A line of the chain, as far as [`verify`] needs it.
struct Link {
    at: At,
    seq: u64,
    prev: String,
    hash: String,
    /// The hash of the torn line before it that it acknowledges
    /// (`"torn"`: the writer ended that line when it started again).
    torn: Option<String>,
    /// For a checkpoint line: the checkpoint, or why its fields are not
    /// one's.
    checkpoint: Option<Result<Checkpoint, String>>,
}

/// The next line of the chain from `lines`, or the next line that is not
/// one; lines a crash cut short are passed over, each added to `torn`
/// with its hash.
fn next_link(
    lines: &mut Lines,
    torn: &mut Vec<(At, String)>,
) -> std::io::Result<Option<Result<Link, RawLine>>> {
    while let Some(read) = lines.next()? {
        match classify(&read.bytes) {
            Line::Torn => torn.push((read.at, line_hash(&read.bytes))),
            Line::Object(object) => {
                let seq = object.get("seq").and_then(Value::as_u64);
                let prev = object
                    .get("prev")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let acknowledged = object
                    .get("torn")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let checkpoint = object.contains_key("checkpoint").then(|| {
                    serde_json::from_value::<Checkpoint>(Value::Object(object))
                        .map_err(|error| format!("not a checkpoint: {error}"))
                });
                return Ok(Some(match (seq, prev) {
                    (Some(seq), Some(prev)) => Ok(Link {
                        hash: line_hash(&read.bytes),
                        at: read.at,
                        seq,
                        prev,
                        torn: acknowledged,
                        checkpoint,
                    }),
                    _ => Err(read),
                }));
            }
            Line::Other(_) => return Ok(Some(Err(read))),
        }
    }
    Ok(None)
}

/// Checks the chain of the log at `log` and its rotated files ([`files`])
/// from the first line to the last, the signatures of its checkpoints
/// (against `public_key` if given, else against the key each names), and
/// that the log reaches its last checkpoint's copy ([`checkpoint_path`]).
/// Stops at the first thing wrong ([`Report::tampering`]).
///
/// With `public_key`, every checkpoint must be signed by it and at least
/// one must be there. Lines cut short by a crash are listed in
/// [`Report::torn`], never as tampering; lines without `seq` and `prev`
/// at the very start (a log written before the chain) are counted in
/// [`Report::unchained`].
///
/// # Errors
///
/// A sentence naming the file for a log that cannot be read (the current
/// one missing while no rotated file is there; with them, that is
/// [`Tampering::LogMissing`]).
pub fn verify(
    log: &Path,
    public_key: Option<&ed25519_dalek::VerifyingKey>,
) -> Result<Report, String> {
    let rotated = rotated(log).map_err(|error| {
        format!(
            "audit log {}: cannot list its directory: {error}",
            shown(&log.to_string_lossy())
        )
    })?;
    let mut report = Report {
        head: GENESIS.to_owned(),
        ..Report::default()
    };
    for pair in rotated.windows(2) {
        if pair[1].0 != pair[0].0 + 1 {
            report.files = rotated.iter().map(|(_, path)| path.clone()).collect();
            report.tampering = Some(Tampering::MissingFile {
                file: rotated_path(log, pair[0].0 + 1),
            });
            return Ok(report);
        }
    }
    report.files = rotated.into_iter().map(|(_, path)| path).collect();
    report.files.push(log.to_owned());
    let io = |error: std::io::Error| error.to_string();
    if !log.exists() && report.files.len() > 1 {
        // Its rotated files are there: the log was, and is gone.
        report.tampering = Some(Tampering::LogMissing {
            file: log.to_owned(),
        });
        return Ok(report);
    }
    if !log.exists() {
        return Err(format!(
            "audit log {}: cannot read it: it does not exist",
            shown(&log.to_string_lossy())
        ));
    }
    let copy = read_copy(log);
    // A signed copy whose signature fails against the key it names was
    // edited itself: said so, rather than as a log that does not reach it
    // (whether that key is the right one is the log's checkpoints' to
    // show).
    if let Some(Ok((_, line))) = &copy
        && let Ok(checkpoint) = serde_json::from_slice::<Checkpoint>(line)
        && checkpoint.signature.is_some()
        && let Err(why) = check_checkpoint(&checkpoint, None, &mut Report::default())
    {
        report.tampering = Some(Tampering::BadCopy {
            copy: checkpoint_path(log),
            why: format!("its signature does not hold ({why}): the copy was edited"),
        });
        return Ok(report);
    }
    let mut lines = Lines::new(&report.files);
    // The two lines before the one read: the last's hash, and where.
    let mut last: Option<Link> = None;
    let mut before_last: Option<String> = None;
    let mut expected_prev = GENESIS.to_owned();
    let mut started = false;
    // Every torn line passed, with its hash, and how many of them the
    // lines read so far account for.
    let mut torn: Vec<(At, String)> = Vec::new();
    let mut accounted = 0;
    loop {
        let link = match next_link(&mut lines, &mut torn).map_err(io)? {
            None => {
                // A crash cut the last line short, and nothing started
                // since: one torn line may end the log unacknowledged.
                if torn.len() > accounted + 1 {
                    report.tampering = Some(Tampering::UnacknowledgedTorn {
                        at: torn[accounted].0.clone(),
                    });
                }
                break;
            }
            Some(Ok(link)) => {
                // The torn lines since the last link: none, or the one
                // this link acknowledges.
                let passed = &torn[accounted..];
                accounted = torn.len();
                match (passed, &link.torn) {
                    ([], None) => {}
                    ([(_, hash)], Some(acknowledged)) if hash == acknowledged => {}
                    ([], Some(_)) => {
                        report.tampering = Some(Tampering::TornRemoved { at: link.at });
                        break;
                    }
                    ([(at, _), ..], _) => {
                        report.tampering = Some(Tampering::UnacknowledgedTorn { at: at.clone() });
                        break;
                    }
                }
                link
            }
            Some(Err(read)) => {
                if !started
                    && read.at.file == report.files[0]
                    && let Line::Object(_) = classify(&read.bytes)
                {
                    // Before the chain: the chain's first line links to
                    // the last of these.
                    report.unchained += 1;
                    expected_prev = line_hash(&read.bytes);
                    continue;
                }
                let why = match classify(&read.bytes) {
                    Line::Other(why) => why,
                    _ => "a JSON object without `seq` and `prev`".to_owned(),
                };
                report.tampering = Some(Tampering::NotAnEntry { at: read.at, why });
                break;
            }
        };
        let expected_seq = report.head_seq + 1;
        if !started {
            started = true;
            let first_ok = link.seq == 1 && link.prev == expected_prev;
            if !first_ok {
                report.tampering = Some(if link.seq != 1 {
                    Tampering::MissingStart {
                        at: link.at,
                        seq: link.seq,
                    }
                } else {
                    Tampering::OutOfPlace {
                        at: link.at,
                        seq: link.seq,
                        expected: 1,
                        prev: link.prev,
                        hash: expected_prev,
                    }
                });
                break;
            }
        } else if link.seq != expected_seq || link.prev != expected_prev {
            report.tampering = Some(
                explain(&report.files, &link, last.as_ref(), before_last.as_deref()).map_err(io)?,
            );
            break;
        }
        // The line holds its place: an entry, or a checkpoint to check.
        match link.checkpoint.clone() {
            Some(Err(why)) => {
                report.tampering = Some(Tampering::NotAnEntry { at: link.at, why });
                break;
            }
            Some(Ok(checkpoint)) => {
                report.checkpoints += 1;
                report.last_checkpoint = Some(link.seq);
                report.unsigned_tail = 0;
                if let Err(why) = check_checkpoint(&checkpoint, public_key, &mut report) {
                    report.tampering = Some(Tampering::BadSignature {
                        at: link.at,
                        seq: link.seq,
                        why,
                    });
                    break;
                }
            }
            None => {
                report.entries += 1;
                report.unsigned_tail += 1;
            }
        }
        if let Some((copy_seq, copy_line)) = copy.as_ref().and_then(|copy| copy.as_ref().ok())
            && *copy_seq == link.seq
        {
            if line_hash(copy_line) == link.hash {
                report.copy_matched = Some(link.seq);
            } else {
                report.tampering = Some(Tampering::CheckpointMismatch {
                    copy: checkpoint_path(log),
                    at: link.at,
                    seq: link.seq,
                });
                break;
            }
        }
        report.head_seq = link.seq;
        report.head = link.hash.clone();
        before_last = Some(expected_prev);
        expected_prev = link.hash.clone();
        last = Some(link);
    }
    // A torn line no line acknowledges is the break itself, not one a
    // crash left: it is named as the tampering only.
    let forged = match &report.tampering {
        Some(Tampering::UnacknowledgedTorn { at }) => Some(at.clone()),
        _ => None,
    };
    report.torn = torn
        .into_iter()
        .map(|(at, _)| at)
        .filter(|at| Some(at) != forged.as_ref())
        .collect();
    // A line is vouched for by the line after it: an edited or inserted
    // line was read (and counted) before the break showed.
    report.holds_to = match &report.tampering {
        Some(Tampering::Edited { seq, .. })
        | Some(Tampering::Inserted {
            seq: Some(seq),
            foreign: false,
            ..
        }) => seq.saturating_sub(1).min(report.head_seq),
        _ => report.head_seq,
    };
    if report.tampering.is_some() {
        return Ok(report);
    }
    match copy {
        Some(Err(why)) => {
            report.tampering = Some(Tampering::BadCopy {
                copy: checkpoint_path(log),
                why,
            });
        }
        Some(Ok((seq, _))) if report.copy_matched.is_none() => {
            report.tampering = Some(Tampering::Truncated {
                copy: checkpoint_path(log),
                seq,
                ends_at: report.head_seq,
            });
        }
        _ => {}
    }
    if report.tampering.is_none() && public_key.is_some() && report.signed == 0 {
        report.tampering = Some(Tampering::NoSignedCheckpoint);
    }
    Ok(report)
}

/// The copy of the last checkpoint beside `log`: its `seq` and its line,
/// `None` when there is none, `Err` saying why when it is not one.
pub(crate) fn read_copy(log: &Path) -> Option<Result<(u64, Vec<u8>), String>> {
    let bytes = match std::fs::read(checkpoint_path(log)) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
        Err(error) => return Some(Err(format!("cannot read it: {error}"))),
    };
    let line = bytes.strip_suffix(b"\n").unwrap_or(&bytes).to_vec();
    Some(
        serde_json::from_slice::<Checkpoint>(&line)
            .map(|checkpoint| (checkpoint.seq, line))
            .map_err(|error| error.to_string()),
    )
}

/// Checks `checkpoint`'s signature against `public_key`, else against
/// the key it names (a checkpoint without one is unsigned, and passes
/// only without `public_key`), counting it in `report.signed` when it
/// holds; `Err` saying why it does not.
fn check_checkpoint(
    checkpoint: &Checkpoint,
    public_key: Option<&ed25519_dalek::VerifyingKey>,
    report: &mut Report,
) -> Result<(), String> {
    let key = match (public_key, &checkpoint.key) {
        (Some(key), _) => *key,
        (None, Some(named)) => unhex::<32>(named)
            .and_then(|bytes| ed25519_dalek::VerifyingKey::from_bytes(&bytes).ok())
            .ok_or("its `key` is not an Ed25519 public key")?,
        (None, None) if checkpoint.signature.is_some() => {
            return Err("it is signed but names no `key`".to_owned());
        }
        (None, None) => return Ok(()),
    };
    checkpoint.check_signature(&key)?;
    report.signed += 1;
    Ok(())
}

/// Says what happened at `link`, the first line that does not follow
/// `last` (whose `prev` was `before_last`), reading on where that tells
/// an insertion from an edit or a reordering from a removal.
fn explain(
    files: &[PathBuf],
    link: &Link,
    last: Option<&Link>,
    before_last: Option<&str>,
) -> std::io::Result<Tampering> {
    let Some(last) = last else {
        return Ok(Tampering::MissingStart {
            at: link.at.clone(),
            seq: link.seq,
        });
    };
    let expected = last.seq + 1;
    // The line after `last` chains to the one before `last`: `last` is
    // the one inserted (its own link to the line before it was made to
    // hold).
    if before_last == Some(link.prev.as_str()) {
        return Ok(Tampering::Inserted {
            at: last.at.clone(),
            seq: Some(last.seq),
            foreign: false,
        });
    }
    // What follows `link`: the next line, and the line with the seq
    // expected, if any.
    let mut lines = Lines::new(files);
    let mut past = false;
    let mut next: Option<Link> = None;
    let mut found: Option<Link> = None;
    let mut torn = Vec::new();
    while let Some(candidate) = next_link(&mut lines, &mut torn)? {
        let Ok(candidate) = candidate else {
            continue;
        };
        if !past {
            past = candidate.at == link.at;
            continue;
        }
        let is_expected = candidate.seq == expected;
        if next.is_none() {
            next = Some(Link {
                at: candidate.at.clone(),
                seq: candidate.seq,
                prev: candidate.prev.clone(),
                hash: candidate.hash.clone(),
                torn: None,
                checkpoint: None,
            });
        }
        if is_expected {
            found = Some(candidate);
            break;
        }
    }
    let next_chains_past = |candidate: &Link| candidate.prev == last.hash;
    if link.seq == expected {
        // The line after `link` chains to `last`, and claims `link`'s
        // place: `link` was inserted.
        if let Some(next) = &next
            && next_chains_past(next)
        {
            return Ok(Tampering::Inserted {
                at: link.at.clone(),
                seq: Some(link.seq),
                foreign: true,
            });
        }
        return Ok(Tampering::Edited {
            at: last.at.clone(),
            seq: last.seq,
            next: link.at.clone(),
            hash: last.hash.clone(),
            recorded: link.prev.clone(),
        });
    }
    if let Some(found) = found {
        if link.prev == found.hash || !next_chains_past(&found) {
            return Ok(Tampering::Reordered {
                seq: link.seq,
                at: link.at.clone(),
                expected,
                found: found.at,
            });
        }
        // The entry expected comes right after, chained to `last`: `link`
        // is a line from elsewhere.
        return Ok(Tampering::Inserted {
            at: link.at.clone(),
            seq: Some(link.seq),
            foreign: true,
        });
    }
    if link.seq > expected {
        return Ok(Tampering::Removed {
            from: expected,
            to: link.seq - 1,
            before: link.at.clone(),
        });
    }
    Ok(Tampering::OutOfPlace {
        at: link.at.clone(),
        seq: link.seq,
        expected,
        prev: link.prev.clone(),
        hash: last.hash.clone(),
    })
}

/// Writes `line` (a checkpoint, with its newline) as the copy of the last
/// checkpoint beside `log`: to a temporary file, synced, then renamed over
/// the copy, so that a crash leaves the old copy or the new one, whole.
pub(crate) fn write_copy(log: &Path, line: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let copy = checkpoint_path(log);
    let temporary = suffixed(&copy, ".tmp");
    let mut file = File::create(&temporary)?;
    file.write_all(line)?;
    file.sync_data()?;
    drop(file);
    std::fs::rename(&temporary, &copy)
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, json};

    use super::*;
    use crate::log::{AuditLog, Durability, Entry, LogOptions, Phase, arguments_digest};
    use crate::scratch::Scratch;

    fn entry(n: usize) -> Entry {
        Entry {
            seq: None,
            prev: None,
            time: format!("2026-03-16T09:00:{:02}.000Z", n % 60),
            replica: Some("gw-1".to_owned()),
            id: format!("call-{n}"),
            principal: "alice".to_owned(),
            upstream: "memory".to_owned(),
            tool: "read_graph".to_owned(),
            decision: "allow".parse().unwrap(),
            rule: None,
            hints: json!({"readOnlyHint": {"value": true, "source": "declared"}}),
            arguments_sha256: arguments_digest(&Map::new()),
            arguments: None,
            outcome: None,
            attempts: None,
            degraded: None,
            by: None,
            earlier: None,
            session: None,
            redacted: None,
            withheld: None,
            phase: Phase::Decided,
        }
    }

    fn key(seed: u8) -> SigningKey {
        SigningKey {
            key: ed25519_dalek::SigningKey::from_bytes(&[seed; 32]),
        }
    }

    /// Writes entries `from..to` to the log at `path` with `options`,
    /// then, if `stop`, the shutdown checkpoint.
    async fn write(path: &Path, from: usize, to: usize, options: LogOptions, stop: bool) {
        let log = AuditLog::open_with(path, options).unwrap();
        for n in from..to {
            log.record(&entry(n), Durability::Written).await.unwrap();
        }
        if stop {
            log.checkpoint().unwrap();
        }
        log.flush().await.unwrap();
    }

    fn lines(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn put(path: &Path, lines: &[String]) {
        std::fs::write(
            path,
            lines
                .iter()
                .map(|line| format!("{line}\n"))
                .collect::<String>(),
        )
        .unwrap();
    }

    fn at(path: &Path, line: usize) -> At {
        At {
            file: path.to_owned(),
            line,
        }
    }

    fn tampering(path: &Path) -> Tampering {
        let report = verify(path, None).unwrap();
        match report.tampering {
            Some(tampering) => tampering,
            None => panic!("not found: {report:?}"),
        }
    }

    #[tokio::test]
    async fn every_line_carries_its_place_and_the_hash_of_the_line_before() {
        let scratch = Scratch::new("chain-links");
        let path = scratch.0.join("audit.jsonl");
        write(&path, 0, 5, LogOptions::default(), true).await;
        let lines = lines(&path);
        assert_eq!(lines.len(), 6);
        let mut prev = GENESIS.to_owned();
        for (index, line) in lines.iter().enumerate() {
            assert!(
                line.starts_with(&format!("{{\"seq\":{},\"prev\":\"{prev}\",", index + 1)),
                "{line}"
            );
            prev = line_hash(line.as_bytes());
        }
        // Entries still read as entries, with their place.
        let third: Entry = serde_json::from_str(&lines[2]).unwrap();
        assert_eq!((third.seq, third.id.as_str()), (Some(3), "call-2"));
        // The last line is the shutdown checkpoint, copied beside the log.
        let checkpoint: Checkpoint = serde_json::from_str(&lines[5]).unwrap();
        assert_eq!(checkpoint.checkpoint, CheckpointKind::Shutdown);
        assert_eq!((checkpoint.seq, checkpoint.signature), (6, None));
        assert_eq!(
            std::fs::read_to_string(checkpoint_path(&path)).unwrap(),
            format!("{}\n", lines[5])
        );
        let report = verify(&path, None).unwrap();
        assert_eq!(report.tampering, None);
        assert_eq!(
            (report.entries, report.checkpoints, report.unsigned_tail),
            (5, 1, 0)
        );
        assert_eq!(report.copy_matched, Some(6));
        assert_eq!(report.head, line_hash(lines[5].as_bytes()));
        // `printf '' | sha256sum` is not the genesis: 64 zeros are.
        assert_eq!(GENESIS, "0".repeat(64));
        assert_eq!(
            line_hash(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[tokio::test]
    async fn a_restarted_writer_goes_on_from_the_last_line_and_stops_once() {
        let scratch = Scratch::new("chain-resume");
        let path = scratch.0.join("audit.jsonl");
        write(&path, 0, 3, LogOptions::default(), true).await;
        write(&path, 3, 5, LogOptions::default(), true).await;
        // Stopping again with nothing written adds nothing.
        write(&path, 5, 5, LogOptions::default(), true).await;
        let seqs: Vec<u64> = lines(&path)
            .iter()
            .map(|line| {
                serde_json::from_str::<Value>(line).unwrap()["seq"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        // Three entries and a checkpoint, two more and another.
        assert_eq!(seqs, [1, 2, 3, 4, 5, 6, 7]);
        let report = verify(&path, None).unwrap();
        assert_eq!(report.tampering, None);
        assert_eq!((report.entries, report.checkpoints), (5, 2));
    }

    #[tokio::test]
    async fn an_edited_entry_is_named_by_the_line_after_it() {
        let scratch = Scratch::new("chain-edit");
        let path = scratch.0.join("audit.jsonl");
        write(&path, 0, 6, LogOptions::default(), true).await;
        let mut lines = lines(&path);
        lines[2] = lines[2].replace("\"alice\"", "\"mallory\"");
        put(&path, &lines);
        let Tampering::Edited {
            at: edited,
            seq,
            next,
            hash,
            recorded,
        } = tampering(&path)
        else {
            panic!("{:?}", tampering(&path));
        };
        assert_eq!((edited, seq, next), (at(&path, 3), 3, at(&path, 4)));
        assert_eq!(hash, line_hash(lines[2].as_bytes()));
        assert_ne!(hash, recorded);
        assert!(
            tampering(&path).to_string().starts_with(&format!(
                "{}:3: entry 3 was edited: it hashes to ",
                path.display()
            )),
            "{}",
            tampering(&path)
        );
    }

    #[tokio::test]
    async fn a_removed_entry_is_named_by_its_number() {
        let scratch = Scratch::new("chain-remove");
        let path = scratch.0.join("audit.jsonl");
        write(&path, 0, 6, LogOptions::default(), true).await;
        let mut lines = lines(&path);
        lines.remove(2);
        lines.remove(2);
        put(&path, &lines);
        assert_eq!(
            tampering(&path),
            Tampering::Removed {
                from: 3,
                to: 4,
                before: at(&path, 3)
            }
        );
        assert_eq!(
            tampering(&path).to_string(),
            format!(
                "{}:3: entries 3 to 4 were removed before this line",
                path.display()
            )
        );
    }

    #[tokio::test]
    async fn swapped_entries_are_named_as_reordered() {
        let scratch = Scratch::new("chain-swap");
        let path = scratch.0.join("audit.jsonl");
        write(&path, 0, 6, LogOptions::default(), true).await;
        let mut lines = lines(&path);
        lines.swap(2, 3);
        put(&path, &lines);
        assert_eq!(
            tampering(&path),
            Tampering::Reordered {
                seq: 4,
                at: at(&path, 3),
                expected: 3,
                found: at(&path, 4)
            }
        );
    }

    #[tokio::test]
    async fn a_log_cut_short_before_its_last_checkpoint_is_truncated() {
        let scratch = Scratch::new("chain-truncate");
        let path = scratch.0.join("audit.jsonl");
        write(&path, 0, 6, LogOptions::default(), true).await;
        let mut lines = lines(&path);
        lines.truncate(4);
        put(&path, &lines);
        assert_eq!(
            tampering(&path),
            Tampering::Truncated {
                copy: checkpoint_path(&path),
                seq: 7,
                ends_at: 4
            }
        );
        // Without the copy, the chain itself holds: what is left is an
        // unsigned tail.
        std::fs::remove_file(checkpoint_path(&path)).unwrap();
        let report = verify(&path, None).unwrap();
        assert_eq!((report.tampering, report.unsigned_tail), (None, 4));
    }

    #[tokio::test]
    async fn a_line_of_another_log_spliced_in_is_named_as_inserted() {
        let scratch = Scratch::new("chain-splice");
        let (path, other) = (scratch.0.join("audit.jsonl"), scratch.0.join("other.jsonl"));
        write(&path, 0, 6, LogOptions::default(), true).await;
        write(&other, 100, 106, LogOptions::default(), true).await;
        let (mut lines, foreign) = (lines(&path), lines(&other));
        // The other log's third entry, at the third line: the same seq.
        lines.insert(2, foreign[2].clone());
        put(&path, &lines);
        assert_eq!(
            tampering(&path),
            Tampering::Inserted {
                at: at(&path, 3),
                seq: Some(3),
                foreign: true
            }
        );
        // Another place: its seq is out of turn there.
        let mut lines = self::lines(&other);
        lines.insert(4, self::lines(&path)[2].clone());
        put(&other, &lines);
        assert_eq!(
            tampering(&other),
            Tampering::Inserted {
                at: at(&other, 5),
                seq: Some(3),
                foreign: true
            }
        );
    }

    #[tokio::test]
    async fn a_forged_entry_chained_to_the_line_before_is_named_as_inserted() {
        let scratch = Scratch::new("chain-forge");
        let path = scratch.0.join("audit.jsonl");
        write(&path, 0, 6, LogOptions::default(), true).await;
        let mut lines = lines(&path);
        // A forger who knows the format: seq 4, chained to line 3.
        let mut forged = entry(99);
        forged.principal = "mallory".to_owned();
        let body = serde_json::to_vec(&forged).unwrap();
        let head = Head {
            seq: 3,
            hash: line_hash(lines[2].as_bytes()),
            at_checkpoint: false,
            torn: None,
        };
        let line = String::from_utf8(head.link(&body)).unwrap();
        lines.insert(3, line.trim_end().to_owned());
        put(&path, &lines);
        assert_eq!(
            tampering(&path),
            Tampering::Inserted {
                at: at(&path, 4),
                seq: Some(4),
                foreign: false
            }
        );
        assert_eq!(
            tampering(&path).to_string(),
            format!(
                "{}:4: a line was inserted (claiming to be entry 4); the line after it chains to \
                 the line before it",
                path.display()
            )
        );
    }

    #[tokio::test]
    async fn a_line_torn_by_a_crash_is_not_tampering_and_the_chain_goes_on_after_it() {
        let scratch = Scratch::new("chain-torn");
        let path = scratch.0.join("audit.jsonl");
        write(&path, 0, 4, LogOptions::default(), false).await;
        // A crash mid-write: half of the fifth line, no newline.
        let mut text = std::fs::read_to_string(&path).unwrap();
        let head = Head {
            seq: 4,
            hash: line_hash(text.lines().last().unwrap().as_bytes()),
            at_checkpoint: false,
            torn: None,
        };
        let fifth = head.link(&serde_json::to_vec(&entry(4)).unwrap());
        text.push_str(std::str::from_utf8(&fifth[..fifth.len() / 2]).unwrap());
        std::fs::write(&path, &text).unwrap();
        let report = verify(&path, None).unwrap();
        assert_eq!(report.tampering, None);
        assert_eq!(report.torn, [at(&path, 5)]);
        assert_eq!((report.entries, report.unsigned_tail), (4, 4));
        // The writer ends the torn line and chains on from line 4.
        write(&path, 5, 7, LogOptions::default(), true).await;
        let lines = lines(&path);
        assert_eq!(lines.len(), 8);
        assert!(
            lines[5].starts_with(&format!(
                "{{\"seq\":5,\"prev\":\"{}\",",
                line_hash(lines[3].as_bytes())
            )),
            "{}",
            lines[5]
        );
        // The line it chains on with names the torn line it ended.
        assert!(
            lines[5].contains(&format!("\"torn\":\"{}\"", line_hash(lines[4].as_bytes()))),
            "{}",
            lines[5]
        );
        let report = verify(&path, None).unwrap();
        assert_eq!(report.tampering, None);
        assert_eq!(report.torn, [at(&path, 5)]);
        assert_eq!((report.entries, report.checkpoints), (6, 1));
        // A fragment put in by hand, as a torn line would look, is not
        // acknowledged by the line after it.
        let mut forged = lines.clone();
        forged.insert(2, lines[4].clone());
        put(&path, &forged);
        assert_eq!(
            tampering(&path),
            Tampering::UnacknowledgedTorn { at: at(&path, 3) }
        );
        // Named as the break, not also as a line a crash cut short.
        assert!(!verify(&path, None).unwrap().torn.contains(&at(&path, 3)));
        // The acknowledged torn line taken out.
        let mut removed = lines.clone();
        removed.remove(4);
        put(&path, &removed);
        assert_eq!(
            tampering(&path),
            Tampering::TornRemoved { at: at(&path, 5) }
        );
        assert!(
            tampering(&path)
                .to_string()
                .ends_with("acknowledges a line cut short by a crash before it, and there is none: that line was removed")
        );
        // Text that is no prefix of an entry is not a torn line.
        let mut lines = lines;
        lines.insert(2, "hello".to_owned());
        put(&path, &lines);
        assert!(matches!(
            tampering(&path),
            Tampering::NotAnEntry { at: found, .. } if found == at(&path, 3)
        ));
    }

    #[tokio::test]
    async fn the_writer_finds_the_last_line_across_blocks_past_a_long_torn_one() {
        let scratch = Scratch::new("chain-blocks");
        let path = scratch.0.join("audit.jsonl");
        let log = AuditLog::open(&path).unwrap();
        for n in 0..3 {
            let mut long = entry(n);
            // Each line longer than a block read from the end.
            long.arguments = Some(json!({ "text": "x".repeat(70_000 + n) }));
            log.record(&long, Durability::Synced).await.unwrap();
        }
        drop(log);
        let third = lines(&path)[2].clone();
        // A crash cut a 100 kB line short.
        let head = Head {
            seq: 3,
            hash: line_hash(third.as_bytes()),
            at_checkpoint: false,
            torn: None,
        };
        let mut torn = entry(3);
        torn.arguments = Some(json!({ "text": "y".repeat(200_000) }));
        let torn = head.link(&serde_json::to_vec(&torn).unwrap());
        let mut text = std::fs::read(&path).unwrap();
        text.extend_from_slice(&torn[..100_000]);
        std::fs::write(&path, &text).unwrap();
        assert_eq!(resume(&path).unwrap(), head);
        write(&path, 4, 5, LogOptions::default(), true).await;
        let lines = lines(&path);
        assert!(
            lines[4].starts_with(&format!("{{\"seq\":4,\"prev\":\"{}\",", head.hash)),
            "{}",
            &lines[4][..120]
        );
        let report = verify(&path, None).unwrap();
        assert_eq!(report.tampering, None);
        assert_eq!((report.entries, report.torn.len()), (4, 1));
    }

    #[tokio::test]
    async fn a_chain_across_rotated_files_verifies_and_a_missing_file_is_named() {
        let scratch = Scratch::new("chain-rotate");
        let path = scratch.0.join("audit.jsonl");
        let one = serde_json::to_vec(&entry(0)).unwrap().len() as u64 + 100;
        let options = LogOptions {
            // Three entries a file.
            max_bytes: Some(3 * one + 10),
            ..LogOptions::default()
        };
        write(&path, 0, 5, options.clone(), false).await;
        write(&path, 5, 11, options, true).await;
        let rotated = rotated(&path).unwrap();
        let numbers: Vec<u64> = rotated.iter().map(|(number, _)| *number).collect();
        assert_eq!(numbers, [1, 2, 3]);
        assert_eq!(rotated[0].1, scratch.0.join("audit.jsonl.000001"));
        assert_eq!(files(&path).unwrap().len(), 4);
        // Each file's first line chains to the last line of the one before.
        let (first, second) = (lines(&rotated[0].1), lines(&rotated[1].1));
        assert_eq!(first.len(), 3);
        assert!(
            second[0].contains(&format!("\"prev\":\"{}\"", line_hash(first[2].as_bytes()))),
            "{}",
            second[0]
        );
        assert_eq!(
            lines(&path).len(),
            3,
            "entries 10 and 11, and the checkpoint"
        );
        let report = verify(&path, None).unwrap();
        assert_eq!(report.tampering, None);
        assert_eq!((report.entries, report.checkpoints), (11, 1));
        assert_eq!(report.files.len(), 4);
        // A middle file removed: named.
        let kept = scratch.0.join("kept");
        std::fs::rename(&rotated[1].1, &kept).unwrap();
        assert_eq!(
            tampering(&path),
            Tampering::MissingFile {
                file: rotated[1].1.clone()
            }
        );
        std::fs::rename(&kept, &rotated[1].1).unwrap();
        // The newest rotated file removed: its entries are missing before
        // the current file's first line.
        std::fs::rename(&rotated[2].1, &kept).unwrap();
        assert_eq!(
            tampering(&path),
            Tampering::Removed {
                from: 7,
                to: 9,
                before: at(&path, 1)
            }
        );
        assert!(
            tampering(&path)
                .to_string()
                .ends_with("(or the rotated file before this one is missing)"),
            "{}",
            tampering(&path)
        );
        std::fs::rename(&kept, &rotated[2].1).unwrap();
        // The current log removed, its rotated files left: tampering, not a
        // file that cannot be read.
        std::fs::rename(&path, &kept).unwrap();
        assert_eq!(
            tampering(&path),
            Tampering::LogMissing { file: path.clone() }
        );
        std::fs::rename(&kept, &path).unwrap();
        // The oldest removed: the chain starts late.
        std::fs::remove_file(&rotated[0].1).unwrap();
        assert_eq!(
            tampering(&path),
            Tampering::MissingStart {
                at: at(&rotated[1].1, 1),
                seq: 4
            }
        );
    }

    #[tokio::test]
    async fn checkpoints_signed_with_one_key_fail_with_another_and_when_edited() {
        let scratch = Scratch::new("chain-sign");
        let path = scratch.0.join("audit.jsonl");
        let options = LogOptions {
            checkpoint_every: 3,
            signing_key: Some(key(1)),
            ..LogOptions::default()
        };
        write(&path, 0, 7, options, false).await;
        // Checkpoints after entries 3 and 6: lines 4 and 8; one entry after.
        let a = key(1).key.verifying_key();
        let report = verify(&path, Some(&a)).unwrap();
        assert_eq!(report.tampering, None);
        assert_eq!(
            (report.checkpoints, report.signed, report.unsigned_tail),
            (2, 2, 1)
        );
        assert_eq!(report.last_checkpoint, Some(8));
        // Key B: the first checkpoint fails, naming the key it names.
        let b = key(2).key.verifying_key();
        let Some(Tampering::BadSignature {
            at: found,
            seq,
            why,
        }) = verify(&path, Some(&b)).unwrap().tampering
        else {
            panic!("key B passed");
        };
        assert_eq!((found, seq), (at(&path, 4), 4));
        assert!(why.contains(&key(1).public_hex()), "{why}");
        // The copy edited (its entry moved on, so the log would look cut
        // short): the copy's own signature shows it.
        let copy = checkpoint_path(&path);
        let kept = std::fs::read_to_string(&copy).unwrap();
        std::fs::write(&copy, kept.replacen("\"seq\":8", "\"seq\":9", 1)).unwrap();
        let Some(Tampering::BadCopy { copy: named, why }) =
            verify(&path, Some(&a)).unwrap().tampering
        else {
            panic!("an edited copy passed");
        };
        assert_eq!(named, copy);
        assert!(why.ends_with("the copy was edited"), "{why}");
        std::fs::write(&copy, kept).unwrap();
        // A checkpoint whose fields were edited fails with its own key.
        let mut lines = lines(&path);
        lines[7] = lines[7].replace("\"periodic\"", "\"shutdown\"");
        put(&path, &lines);
        let Some(Tampering::BadSignature { at: found, why, .. }) =
            verify(&path, Some(&a)).unwrap().tampering
        else {
            panic!("an edited checkpoint passed");
        };
        assert_eq!(found, at(&path, 8));
        assert_eq!(why, "its signature does not match its fields");
        // Without a public key, checked against the key it names.
        assert!(matches!(
            verify(&path, None).unwrap().tampering,
            Some(Tampering::BadSignature { .. })
        ));
        // Unsigned checkpoints pass only without a public key.
        let unsigned = scratch.0.join("unsigned.jsonl");
        write(&unsigned, 0, 3, LogOptions::default(), true).await;
        assert_eq!(verify(&unsigned, None).unwrap().tampering, None);
        assert!(matches!(
            verify(&unsigned, Some(&a)).unwrap().tampering,
            Some(Tampering::BadSignature { why, .. }) if why == "it is not signed"
        ));
        let none = scratch.0.join("none.jsonl");
        write(&none, 0, 3, LogOptions::default(), false).await;
        assert_eq!(
            verify(&none, Some(&a)).unwrap().tampering,
            Some(Tampering::NoSignedCheckpoint)
        );
    }

    #[test]
    fn keys_are_read_from_pem_files() {
        use ed25519_dalek::pkcs8::{EncodePrivateKey, EncodePublicKey};
        let scratch = Scratch::new("chain-keys");
        let (private, public) = (scratch.0.join("key.pem"), scratch.0.join("public.pem"));
        let key = key(9);
        let pem = key.key.to_pkcs8_pem(Default::default()).unwrap();
        std::fs::write(&private, pem.as_bytes()).unwrap();
        let public_pem = key
            .key
            .verifying_key()
            .to_public_key_pem(Default::default())
            .unwrap();
        std::fs::write(&public, public_pem).unwrap();
        assert_eq!(SigningKey::load(&private).unwrap(), key);
        assert_eq!(load_public_key(&public).unwrap(), key.key.verifying_key());
        // Each the other's way round: refused, saying how to make one.
        let error = SigningKey::load(&public).unwrap_err();
        assert!(
            error.contains("openssl genpkey -algorithm ed25519"),
            "{error}"
        );
        let error = load_public_key(&private).unwrap_err();
        assert!(
            error.contains("openssl pkey -in KEY.pem -pubout"),
            "{error}"
        );
        assert!(
            SigningKey::load(&scratch.0.join("missing.pem"))
                .unwrap_err()
                .starts_with("cannot read it: ")
        );
        // Debug never shows the private key.
        assert_eq!(
            format!("{key:?}"),
            format!("SigningKey(public {})", key.public_hex())
        );
    }

    #[tokio::test]
    async fn the_writer_will_not_go_on_from_a_log_cut_short_or_edited_at_its_end() {
        let scratch = Scratch::new("chain-refuse");
        let path = scratch.0.join("audit.jsonl");
        write(&path, 0, 4, LogOptions::default(), true).await;
        let whole = lines(&path);
        put(&path, &whole[..3]);
        let error = AuditLog::open(&path).unwrap_err().to_string();
        assert!(
            error.starts_with(&format!(
                "audit log {}: cannot go on with its chain: it ends at entry 3, but its last \
                 checkpoint ({}) is entry 5: it was cut short; run `mcp-hints gateway log \
                 --verify --log {}`",
                path.display(),
                checkpoint_path(&path).display(),
                path.display()
            )),
            "{error}"
        );
        let mut edited = whole.clone();
        edited[4] = edited[4].replace("\"gateway\"", "\"elsewhere\"");
        put(&path, &edited);
        let error = AuditLog::open(&path).unwrap_err().to_string();
        assert!(
            error.contains("its last line, entry 5, differs from its last checkpoint's copy"),
            "{error}"
        );
        std::fs::write(checkpoint_path(&path), "{}\n").unwrap();
        let error = AuditLog::open(&path).unwrap_err().to_string();
        assert!(error.contains("is not a checkpoint ("), "{error}");
        // The log as it was: the writer goes on.
        put(&path, &whole);
        std::fs::write(checkpoint_path(&path), format!("{}\n", whole[4])).unwrap();
        write(&path, 4, 5, LogOptions::default(), true).await;
        assert_eq!(verify(&path, None).unwrap().tampering, None);
    }

    #[tokio::test]
    async fn a_log_written_before_the_chain_is_verified_from_where_the_chain_starts() {
        let scratch = Scratch::new("chain-legacy");
        let path = scratch.0.join("audit.jsonl");
        let old: String = (0..3)
            .map(|n| serde_json::to_string(&entry(n)).unwrap() + "\n")
            .collect();
        std::fs::write(&path, old).unwrap();
        write(&path, 3, 5, LogOptions::default(), true).await;
        let lines = lines(&path);
        assert!(
            lines[3].starts_with(&format!(
                "{{\"seq\":1,\"prev\":\"{}\",",
                line_hash(lines[2].as_bytes())
            )),
            "{}",
            lines[3]
        );
        let report = verify(&path, None).unwrap();
        assert_eq!(report.tampering, None);
        assert_eq!((report.unchained, report.entries), (3, 2));
        // An unchained line after the chain started is tampering.
        let mut lines = lines;
        lines.insert(4, serde_json::to_string(&entry(50)).unwrap());
        put(&path, &lines);
        assert!(matches!(
            tampering(&path),
            Tampering::NotAnEntry { at: found, .. } if found == at(&path, 5)
        ));
    }

    #[test]
    fn the_verdict_escapes_what_it_quotes_from_the_log() {
        let shown = Tampering::NotAnEntry {
            at: At {
                file: PathBuf::from("/tmp/a\u{1b}[2J.jsonl"),
                line: 3,
            },
            why: "not JSON: \u{202e}".to_owned(),
        }
        .to_string();
        assert!(
            !shown.contains('\u{1b}') && !shown.contains('\u{202e}'),
            "{shown}"
        );
    }
}
