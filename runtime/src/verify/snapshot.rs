//! Relations between two snapshots of a server's state: the same, one that
//! keeps everything of the other (what an additive tool may do), and the
//! difference shown in a finding.
//!
//! Array elements are matched through a hash of each element that equal
//! values share ([`digest`]), so a snapshot of many records that comes back
//! reordered costs one pass, not a comparison of every pair; what is left
//! unmatched is searched within a [`Budget`] of steps, so no snapshot can
//! make a check run unbounded.

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasher, Hash, Hasher};

use serde_json::{Map, Value};

use super::Change;
use super::generate::escape_pointer;

/// The most changes a finding lists: a cleared store of thousands of
/// records is shown by its first ones.
const MAX_CHANGES: usize = 50;

/// The most steps (an element looked at as a candidate, a pair compared)
/// one [`keeps`] check may take: some 0.1 to 1 s of work. Equal elements
/// in any order take one step each; only elements that changed in place
/// (an entity that gained an observation) are searched among candidates.
pub(crate) const MAX_STEPS: u64 = 20_000_000;

/// Steps spent on one check, and how many it may spend.
#[derive(Debug)]
pub(crate) struct Budget {
    pub(crate) steps: u64,
    pub(crate) max: u64,
}

impl Budget {
    pub(crate) fn new(max: u64) -> Budget {
        Budget { steps: 0, max }
    }

    /// Takes one step; `Err` once the budget is spent.
    fn step(&mut self) -> Result<(), Exhausted> {
        self.steps += 1;
        if self.steps > self.max {
            return Err(Exhausted);
        }
        Ok(())
    }
}

/// A check gave up: its [`Budget`] was spent before it could tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Exhausted;

/// Hashes with a seed of this process's own, so that no server can pick
/// elements that all fall in one bucket.
fn hasher() -> foldhash::quality::RandomState {
    foldhash::quality::RandomState::default()
}

/// A hash of `value` that every value [`same`] as it shares: numbers by
/// their `f64` value (`1` and `1.0` alike; integers beyond 2^53 that
/// round alike collide, and [`same`] tells them apart), object members in
/// any order.
fn digest(value: &Value, state: &foldhash::quality::RandomState) -> u64 {
    let mut hasher = state.build_hasher();
    feed(value, state, &mut hasher);
    hasher.finish()
}

fn feed(value: &Value, state: &foldhash::quality::RandomState, hasher: &mut impl Hasher) {
    match value {
        Value::Null => 0u8.hash(hasher),
        Value::Bool(flag) => (1u8, *flag).hash(hasher),
        Value::Number(number) => {
            // -0.0 == 0.0: one spelling of zero.
            let float = number.as_f64().unwrap_or(0.0);
            let float = if float == 0.0 { 0.0 } else { float };
            (2u8, float.to_bits()).hash(hasher);
        }
        Value::String(text) => (3u8, text).hash(hasher),
        Value::Array(items) => {
            (4u8, items.len()).hash(hasher);
            for item in items {
                feed(item, state, hasher);
            }
        }
        Value::Object(members) => {
            // Members in any order: their hashes are summed.
            let sum = members.iter().fold(0u64, |sum, (key, member)| {
                let mut one = state.build_hasher();
                key.hash(&mut one);
                feed(member, state, &mut one);
                sum.wrapping_add(one.finish())
            });
            (5u8, members.len(), sum).hash(hasher);
        }
    }
}

/// Equal as JSON values: numbers by value (`1` and `1.0` are the same), object
/// members in any order.
pub(crate) fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        // Integers compare exactly (beyond 2^53 an f64 would call two of
        // them equal); only a float on either side compares by value.
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            matches!((x.as_f64(), y.as_f64()), (Some(x), Some(y)) if x == y)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(key, value)| y.get(key).is_some_and(|other| same(value, other)))
        }
        _ => a == b,
    }
}

/// The elements of `after` [`same`] as each element of `before`, each
/// used once: for every element of `before`, the index of its match, or
/// `None`. One pass over each side, plus one comparison per match (more
/// only for values whose hashes collide).
fn pair_equal(
    before: &[Value],
    after: &[Value],
    budget: &mut Budget,
) -> Result<Vec<Option<usize>>, Exhausted> {
    let state = hasher();
    let mut buckets: HashMap<u64, Vec<usize>, foldhash::quality::RandomState> =
        HashMap::with_capacity_and_hasher(after.len(), hasher());
    // Indices pushed in reverse so that `pop` hands out the earliest.
    for (at, item) in after.iter().enumerate().rev() {
        buckets.entry(digest(item, &state)).or_default().push(at);
    }
    let mut pairs = Vec::with_capacity(before.len());
    for item in before {
        budget.step()?;
        let found = match buckets.get_mut(&digest(item, &state)) {
            Some(bucket) => {
                let mut found = None;
                for slot in (0..bucket.len()).rev() {
                    budget.step()?;
                    if same(item, &after[bucket[slot]]) {
                        found = Some(bucket.remove(slot));
                        break;
                    }
                }
                found
            }
            None => None,
        };
        pairs.push(found);
    }
    Ok(pairs)
}

/// Whether `after` keeps everything of `before`: an object keeps every
/// member (each kept in turn), an array every element (as a multiset:
/// each element of `before` has one of `after` of its own that keeps it),
/// a scalar stays the same. `Err` when `budget` ran out first.
///
/// Elements are matched equal ones first (by [`digest`]), then greedily
/// among the candidates that could keep them (an object: those that share
/// the scalar member of it fewest others share), so an entity that gained
/// an observation still keeps the entity; greedy matching can miss a
/// pairing that exists among several near-equal elements, which only makes
/// a finding more likely to be shown, never hides one.
pub(crate) fn keeps(before: &Value, after: &Value, budget: &mut Budget) -> Result<bool, Exhausted> {
    budget.step()?;
    match (before, after) {
        (Value::Object(before), Value::Object(after)) => {
            for (key, value) in before {
                match after.get(key) {
                    Some(kept) if keeps(value, kept, budget)? => {}
                    _ => return Ok(false),
                }
            }
            Ok(true)
        }
        (Value::Array(before), Value::Array(after)) => keeps_elements(before, after, budget),
        _ => Ok(same(before, after)),
    }
}

fn keeps_elements(
    before: &[Value],
    after: &[Value],
    budget: &mut Budget,
) -> Result<bool, Exhausted> {
    let pairs = pair_equal(before, after, budget)?;
    let mut taken = vec![false; after.len()];
    let mut rest = Vec::new();
    for (item, pair) in before.iter().zip(pairs) {
        match pair {
            Some(at) => taken[at] = true,
            // A scalar has no parts to keep: only an equal one keeps it,
            // and none was left.
            None if !(item.is_object() || item.is_array()) => return Ok(false),
            None => rest.push(item),
        }
    }
    if rest.is_empty() {
        return Ok(true);
    }
    let state = hasher();
    // The objects left in `after`, by each scalar member (key and value).
    let mut by_member: HashMap<(u64, u64), Vec<usize>, foldhash::quality::RandomState> =
        HashMap::with_hasher(hasher());
    let member_key = |key: &String, value: &Value| (state.hash_one(key), digest(value, &state));
    for (at, item) in after.iter().enumerate() {
        if taken[at] {
            continue;
        }
        if let Value::Object(members) = item {
            for (key, value) in members.iter().filter(|(_, value)| is_scalar(value)) {
                budget.step()?;
                by_member
                    .entry(member_key(key, value))
                    .or_default()
                    .push(at);
            }
        }
    }
    let everything: Vec<usize> = (0..after.len()).collect();
    for item in rest {
        let candidates: &[usize] = match item {
            Value::Object(members) => members
                .iter()
                .filter(|(_, value)| is_scalar(value))
                .map(|(key, value)| {
                    by_member
                        .get(&member_key(key, value))
                        .map_or(&[][..], Vec::as_slice)
                })
                .min_by_key(|candidates| candidates.len())
                .unwrap_or(&everything),
            _ => &everything,
        };
        let mut kept = false;
        for &at in candidates {
            budget.step()?;
            if !taken[at] && keeps(item, &after[at], budget)? {
                taken[at] = true;
                kept = true;
                break;
            }
        }
        if !kept {
            return Ok(false);
        }
    }
    Ok(true)
}

fn is_scalar(value: &Value) -> bool {
    !(value.is_object() || value.is_array())
}

/// What differs from `before` to `after`, by JSON pointer (RFC 6901):
/// members and elements removed (`after` is `None`), added (`before` is
/// `None`) or changed. Array elements are paired equal ones first; the
/// rest pair up by position, and what is left over is removed or added.
/// At most [`MAX_CHANGES`]; the pairing of equal elements is given up
/// past [`MAX_STEPS`] (every element then pairs by position).
pub(crate) fn difference(before: &Value, after: &Value) -> Vec<Change> {
    let mut changes = Vec::new();
    diff(before, after, String::new(), &mut changes);
    changes.truncate(MAX_CHANGES);
    changes
}

fn diff(before: &Value, after: &Value, path: String, changes: &mut Vec<Change>) {
    if changes.len() >= MAX_CHANGES || same(before, after) {
        return;
    }
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => diff_members(b, a, &path, changes),
        (Value::Array(b), Value::Array(a)) => {
            let pairs = pair_equal(b, a, &mut Budget::new(MAX_STEPS))
                .unwrap_or_else(|Exhausted| vec![None; b.len()]);
            let mut added: BTreeSet<usize> = (0..a.len()).collect();
            let mut left = Vec::new();
            for (index, pair) in pairs.into_iter().enumerate() {
                match pair {
                    Some(at) => {
                        added.remove(&at);
                    }
                    None => left.push(index),
                }
            }
            for index in left {
                if changes.len() >= MAX_CHANGES {
                    return;
                }
                let at = format!("{path}/{index}");
                // Paired with the unmatched element at the same place, or
                // else the first one left.
                let partner = if added.remove(&index) {
                    Some(index)
                } else {
                    added.pop_first()
                };
                match partner {
                    Some(other) => diff(&b[index], &a[other], at, changes),
                    None => changes.push(Change {
                        path: at,
                        before: Some(b[index].clone()),
                        after: None,
                    }),
                }
            }
            for index in added.into_iter().take(MAX_CHANGES) {
                changes.push(Change {
                    path: format!("{path}/{index}"),
                    before: None,
                    after: Some(a[index].clone()),
                });
            }
        }
        _ => changes.push(Change {
            path,
            before: Some(before.clone()),
            after: Some(after.clone()),
        }),
    }
}

fn diff_members(
    b: &Map<String, Value>,
    a: &Map<String, Value>,
    path: &str,
    changes: &mut Vec<Change>,
) {
    for (key, value) in b {
        if changes.len() >= MAX_CHANGES {
            return;
        }
        let at = format!("{path}/{}", escape_pointer(key));
        match a.get(key) {
            Some(other) => diff(value, other, at, changes),
            None => changes.push(Change {
                path: at,
                before: Some(value.clone()),
                after: None,
            }),
        }
    }
    for (key, value) in a {
        if changes.len() >= MAX_CHANGES {
            return;
        }
        if !b.contains_key(key) {
            changes.push(Change {
                path: format!("{path}/{}", escape_pointer(key)),
                before: None,
                after: Some(value.clone()),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn kept(before: &Value, after: &Value) -> bool {
        keeps(before, after, &mut Budget::new(MAX_STEPS)).unwrap()
    }

    #[test]
    fn sameness_ignores_number_spelling_and_member_order() {
        assert!(same(
            &json!({"a": 1, "b": [1.0]}),
            &json!({"b": [1], "a": 1.0})
        ));
        assert!(!same(&json!([1, 2]), &json!([2, 1])));
        assert!(!same(
            &json!(9_007_199_254_740_992_u64),
            &json!(9_007_199_254_740_993_u64)
        ));
        assert!(!same(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
    }

    #[test]
    fn keeping_is_members_elements_and_equal_scalars() {
        // Added: a member, an element, an observation inside an entity.
        assert!(kept(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
        assert!(kept(&json!([1, 2]), &json!([2, 3, 1])));
        assert!(kept(&json!([1, 2.0, -0.0]), &json!([0, 2, 1.0])));
        assert!(kept(
            &json!({"entities": [{"name": "x", "observations": ["o1"]}]}),
            &json!({"entities": [{"name": "x", "observations": ["o1", "o2"]}, {"name": "y", "observations": []}]}),
        ));
        assert!(kept(&json!([[1], [2]]), &json!([[2, 3], [1]])));
        // A multiset: two equal elements need two.
        assert!(!kept(&json!([1, 1]), &json!([1, 2])));
        assert!(!kept(
            &json!([{"name": "x", "o": [1]}, {"name": "x", "o": [2]}]),
            &json!([{"name": "x", "o": [1, 2]}])
        ));
        // Removed, changed, replaced.
        assert!(!kept(&json!({"a": 1}), &json!({})));
        assert!(!kept(&json!({"a": 1}), &json!({"a": 2})));
        assert!(!kept(&json!(["old"]), &json!(["new"])));
        assert!(!kept(&json!("text"), &json!("text, longer")));
        assert!(!kept(
            &json!([{"name": "x", "o": [1]}]),
            &json!([{"name": "y", "o": [1]}])
        ));
    }

    /// 80,000 records, each a few members: the size that took 23 s when
    /// every element of one side was compared with every one of the other.
    fn records(n: usize) -> Vec<Value> {
        (0..n)
            .map(|i| json!({"id": i, "name": format!("record-{i}"), "tags": ["t"]}))
            .collect()
    }

    // Counted, not timed: a pass that compared pairs would take some
    // n²/2 = 3.2e9 steps here, past the budget; a pass that matches by
    // hash takes a few per element, whatever the machine's load.
    #[test]
    fn a_large_array_reordered_is_kept_in_steps_linear_in_its_length() {
        let n = 80_000;
        let before = Value::Array(records(n));
        let mut reordered = records(n);
        reordered.reverse();
        reordered.swap(10, 60_000);
        let after = Value::Array(reordered);
        let mut budget = Budget::new(MAX_STEPS);
        assert_eq!(keeps(&before, &after, &mut budget), Ok(true));
        assert!(budget.steps <= 3 * n as u64, "{} steps", budget.steps);
        // Each record gained a tag, in place: matched through its scalar
        // members, still a few steps per element.
        let grown: Vec<Value> = records(n)
            .into_iter()
            .rev()
            .map(|mut record| {
                record["tags"].as_array_mut().unwrap().push(json!("new"));
                record
            })
            .collect();
        let mut budget = Budget::new(MAX_STEPS);
        assert_eq!(keeps(&before, &Value::Array(grown), &mut budget), Ok(true));
        assert!(budget.steps <= 20 * n as u64, "{} steps", budget.steps);
        // One record gone: found, as cheaply.
        let mut fewer = records(n);
        fewer.remove(40_000);
        fewer.reverse();
        let mut budget = Budget::new(MAX_STEPS);
        assert_eq!(keeps(&before, &Value::Array(fewer), &mut budget), Ok(false));
        assert!(budget.steps <= 20 * n as u64, "{} steps", budget.steps);
    }

    #[test]
    fn a_check_past_its_budget_gives_up_instead_of_running_on() {
        // Arrays without scalar members have no index to narrow them: each
        // is searched among all, and the budget ends it.
        let n = 20_000;
        let before: Vec<Value> = (0..n).map(|i| json!([[i]])).collect();
        let after: Vec<Value> = (0..n).map(|i| json!([[i, "more"]])).collect();
        let mut budget = Budget::new(1_000_000);
        assert_eq!(
            keeps(&Value::Array(before), &Value::Array(after), &mut budget),
            Err(Exhausted)
        );
        assert!(budget.steps <= 1_000_001);
    }

    #[test]
    fn the_difference_of_large_arrays_is_cut_short() {
        let before = Value::Array(records(80_000));
        let after = Value::Array(records(80_000).into_iter().skip(1).rev().collect());
        let changes = difference(&before, &after);
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(changes[0].path, "/0");
        let cleared = difference(&before, &json!([]));
        assert_eq!(cleared.len(), MAX_CHANGES);
    }

    #[test]
    fn the_difference_names_each_path() {
        let changes = difference(
            &json!({"notes": ["a", "b"], "count": 2, "gone": true}),
            &json!({"notes": ["b", "c"], "count": 3, "new/key": 1}),
        );
        let shown: Vec<(String, Option<Value>, Option<Value>)> = changes
            .into_iter()
            .map(|change| (change.path, change.before, change.after))
            .collect();
        assert_eq!(
            shown,
            vec![
                ("/count".to_owned(), Some(json!(2)), Some(json!(3))),
                ("/gone".to_owned(), Some(json!(true)), None),
                ("/notes/0".to_owned(), Some(json!("a")), Some(json!("c"))),
                ("/new~1key".to_owned(), None, Some(json!(1))),
            ]
        );
        let cleared = difference(&json!([1, 2, 3]), &json!([]));
        assert_eq!(cleared.len(), 3);
        assert!(cleared.iter().all(|change| change.after.is_none()));
        assert!(difference(&json!({"a": [1]}), &json!({"a": [1.0]})).is_empty());
    }
}
