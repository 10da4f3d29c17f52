//! "did you mean" for misspelt keys.

/// How alike (Jaro-Winkler, 0 to 1) a candidate must be to the unknown key
/// to be suggested, case, `-` and `_` aside. The `mcp-hints` command
/// suggests with the same rule (its `suggest` module): a proc-macro crate
/// can share no function with it.
const ALIKE: f64 = 0.85;

/// The closest candidate to `unknown`, when it is close enough to be a
/// likely typo. Case and `-`/`_` are ignored, so `readOnly` and `read-only`
/// both find `read_only`.
pub fn closest<'a>(unknown: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let wanted = normalize(unknown);
    candidates
        .iter()
        .map(|candidate| {
            let score = strsim::jaro_winkler(&wanted, &normalize(candidate));
            (score, *candidate)
        })
        .filter(|(score, _)| *score >= ALIKE)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, candidate)| candidate)
}

fn normalize(key: &str) -> String {
    key.chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::closest;

    const KEYS: &[&str] = &["read_only", "idempotent", "non_idempotent", "closed_world"];

    #[test]
    fn finds_camel_case_and_typos() {
        assert_eq!(closest("readOnly", KEYS), Some("read_only"));
        assert_eq!(closest("readonly", KEYS), Some("read_only"));
        assert_eq!(closest("idempotant", KEYS), Some("idempotent"));
        assert_eq!(closest("closed_word", KEYS), Some("closed_world"));
    }

    #[test]
    fn stays_silent_for_unrelated_words() {
        assert_eq!(closest("banana", KEYS), None);
    }
}
