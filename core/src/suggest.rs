//! "did you mean": the name closest to one that is not known, for every
//! place a name is taken: the `#[tool]` macros' keys, the command's config
//! keys, tables and values, rule predicates, lint rules and tools.

/// How alike (Jaro-Winkler, 0 to 1) a known name must be to the unknown one
/// to be suggested, case, `-` and `_` aside.
pub const ALIKE: f64 = 0.85;

/// The name of `known` closest to `unknown`, when it is close enough to be
/// a likely typo. Case and `-`/`_` are ignored, so `readOnly` and
/// `read-only` both find `read_only`. Of names equally close, the last.
pub fn closest<'a>(unknown: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let wanted = normalize(unknown);
    known
        .into_iter()
        .map(|name| (strsim::jaro_winkler(&wanted, &normalize(name)), name))
        .filter(|(score, _)| *score >= ALIKE)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, name)| name)
}

fn normalize(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::closest;

    const KEYS: [&str; 4] = ["read_only", "idempotent", "non_idempotent", "closed_world"];

    #[test]
    fn finds_camel_case_and_typos() {
        assert_eq!(closest("readOnly", KEYS), Some("read_only"));
        assert_eq!(closest("read-only", KEYS), Some("read_only"));
        assert_eq!(closest("readonly", KEYS), Some("read_only"));
        assert_eq!(closest("idempotant", KEYS), Some("idempotent"));
        assert_eq!(closest("closed_word", KEYS), Some("closed_world"));
        assert_eq!(closest("tol", ["tool", "upstream"]), Some("tool"));
        assert_eq!(closest("dney", ["deny", "allow"]), Some("deny"));
    }

    #[test]
    fn stays_silent_for_unrelated_words() {
        assert_eq!(closest("banana", KEYS), None);
        assert_eq!(closest("allow", ["deny", "approve"]), None);
        assert_eq!(closest("x", Vec::<&str>::new()), None);
    }
}
