//! Relations between two snapshots of a server's state: the same, one that
//! keeps everything of the other (what an additive tool may do), and the
//! difference shown in a finding.

use serde_json::Value;

use super::Change;
use super::generate::escape_pointer;

/// The most changes a finding lists: a cleared store of thousands of
/// records is shown by its first ones.
const MAX_CHANGES: usize = 50;

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

/// Whether `after` keeps everything of `before`: an object keeps every
/// member (each kept in turn), an array every element (as a multiset:
/// each element of `before` has one of `after` of its own that keeps it),
/// a scalar stays the same.
///
/// Elements are matched equal ones first, then greedily, so an entity that
/// gained an observation still keeps the entity; greedy matching can miss a
/// pairing that exists among several near-equal elements, which only makes
/// a finding more likely to be shown, never hides one.
pub(crate) fn keeps(before: &Value, after: &Value) -> bool {
    match (before, after) {
        (Value::Object(before), Value::Object(after)) => before
            .iter()
            .all(|(key, value)| after.get(key).is_some_and(|kept| keeps(value, kept))),
        (Value::Array(before), Value::Array(after)) => {
            let mut taken = vec![false; after.len()];
            let mut rest = Vec::new();
            for item in before {
                match (0..after.len()).find(|at| !taken[*at] && same(item, &after[*at])) {
                    Some(at) => taken[at] = true,
                    None => rest.push(item),
                }
            }
            rest.into_iter().all(|item| {
                match (0..after.len()).find(|at| !taken[*at] && keeps(item, &after[*at])) {
                    Some(at) => {
                        taken[at] = true;
                        true
                    }
                    None => false,
                }
            })
        }
        _ => same(before, after),
    }
}

/// What differs from `before` to `after`, by JSON pointer (RFC 6901):
/// members and elements removed (`after` is `None`), added (`before` is
/// `None`) or changed. Array elements are paired equal ones first; the
/// rest pair up by position, and what is left over is removed or added.
/// At most [`MAX_CHANGES`].
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
        (Value::Object(b), Value::Object(a)) => {
            for (key, value) in b {
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
                if !b.contains_key(key) {
                    changes.push(Change {
                        path: format!("{path}/{}", escape_pointer(key)),
                        before: None,
                        after: Some(value.clone()),
                    });
                }
            }
        }
        (Value::Array(b), Value::Array(a)) => {
            let mut taken = vec![false; a.len()];
            let mut left = Vec::new();
            for (index, item) in b.iter().enumerate() {
                match (0..a.len()).find(|at| !taken[*at] && same(item, &a[*at])) {
                    Some(at) => taken[at] = true,
                    None => left.push(index),
                }
            }
            let mut added: Vec<usize> = (0..a.len()).filter(|at| !taken[*at]).collect();
            for index in left {
                let at = format!("{path}/{index}");
                // Paired with the unmatched element at the same place, or
                // else the first one left.
                let partner = added
                    .iter()
                    .position(|other| *other == index)
                    .or(if added.is_empty() { None } else { Some(0) });
                match partner {
                    Some(slot) => {
                        let other = added.remove(slot);
                        diff(&b[index], &a[other], at, changes);
                    }
                    None => changes.push(Change {
                        path: at,
                        before: Some(b[index].clone()),
                        after: None,
                    }),
                }
            }
            for index in added {
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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
        assert!(keeps(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
        assert!(keeps(&json!([1, 2]), &json!([2, 3, 1])));
        assert!(keeps(
            &json!({"entities": [{"name": "x", "observations": ["o1"]}]}),
            &json!({"entities": [{"name": "x", "observations": ["o1", "o2"]}, {"name": "y", "observations": []}]}),
        ));
        // A multiset: two equal elements need two.
        assert!(!keeps(&json!([1, 1]), &json!([1, 2])));
        // Removed, changed, replaced.
        assert!(!keeps(&json!({"a": 1}), &json!({})));
        assert!(!keeps(&json!({"a": 1}), &json!({"a": 2})));
        assert!(!keeps(&json!(["old"]), &json!(["new"])));
        assert!(!keeps(&json!("text"), &json!("text, longer")));
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
