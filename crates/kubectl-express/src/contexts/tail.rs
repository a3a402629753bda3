//! The end every verb across contexts shares: the fleet's exit code from each context's, a line
//! per context not read, the JSON entry of each context, and a table led by a CONTEXT column.

use std::io::Write;

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::text::table;
use express_client::contexts::across::{ContextError, PerContext};
use express_client::exit::{Code, Exit};

/// The fleet's exit code from the exit codes of the contexts read (0, 1 or 3 each) and the
/// number of contexts not read: the worst code read; 4 (*incomplete*) when some context was
/// not read, unless a context read is already at 3; with `require_all`, 4 whenever one was not
/// read.
pub fn exit_code(read: &[u8], unread: usize, require_all: bool) -> u8 {
    let worst = read.iter().copied().max().unwrap_or(0);
    if unread > 0 && (require_all || worst < 3) {
        Code::Incomplete.number()
    } else {
        worst
    }
}

/// One line per context that could not be read: `context dc-c: unreachable (timeout after 10s)`.
pub fn unread_lines<T>(results: &[PerContext<T>]) -> Vec<String> {
    results
        .iter()
        .filter_map(|r| {
            let error = r.outcome.as_ref().err()?;
            Some(format!(
                "context {}: {} ({error})",
                r.context,
                error.status()
            ))
        })
        .collect()
}

/// Appends a line per context not read to a verb's text output.
pub fn push_unread_lines<T>(out: &mut String, results: &[PerContext<T>]) {
    for line in unread_lines(results) {
        out.push_str(&line);
        out.push('\n');
    }
}

/// The JSON entry of each context: `context`, `status`, `error`, `elapsedMs`, then the verb's
/// own object (its fields flattened in), or `unread`'s fields for a context not read.
pub fn entries<T: Serialize>(
    results: &[PerContext<T>],
    unread: impl Fn(&ContextError) -> Map<String, Value>,
) -> Result<Vec<Value>, Exit> {
    results
        .iter()
        .map(|r| {
            let mut entry = Map::new();
            entry.insert("context".into(), json!(r.context));
            entry.insert(
                "status".into(),
                json!(r.outcome.as_ref().map_or_else(|e| e.status(), |_| "ok")),
            );
            entry.insert(
                "error".into(),
                json!(r.outcome.as_ref().err().map(ToString::to_string)),
            );
            entry.insert(
                "elapsedMs".into(),
                json!(u64::try_from(r.elapsed.as_millis()).unwrap_or(u64::MAX)),
            );
            let fields = match &r.outcome {
                Ok(value) => match serde_json::to_value(value) {
                    Ok(Value::Object(fields)) => fields,
                    Ok(other) => Map::from_iter([("value".to_owned(), other)]),
                    Err(e) => return Err(Exit::usage(format!("cannot write JSON: {e}"))),
                },
                Err(error) => unread(error),
            };
            entry.extend(fields);
            Ok(Value::Object(entry))
        })
        .collect()
}

pub fn print_json<T: Serialize + ?Sized>(value: &T) -> Result<(), Exit> {
    // Written as it is serialized: a fleet's answer is never a whole string in memory.
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    serde_json::to_writer_pretty(&mut out, value)
        .map_err(|e| Exit::usage(format!("cannot write JSON: {e}")))?;
    writeln!(out)
        .and_then(|()| out.flush())
        .map_err(|e| Exit::failure(format!("cannot write JSON: {e}")))
}

/// The rows of every context read, each led by its context, in context order (each context's
/// rows in its own order).
pub fn context_rows<T>(
    results: &[PerContext<T>],
    cells: impl Fn(&T) -> Vec<Vec<String>>,
) -> Vec<Vec<String>> {
    results
        .iter()
        .filter_map(|r| Some((r.context.as_str(), r.outcome.as_ref().ok()?)))
        .flat_map(|(context, read)| {
            cells(read).into_iter().map(move |row| {
                let mut led = Vec::with_capacity(row.len() + 1);
                led.push(context.to_owned());
                led.extend(row);
                led
            })
        })
        .collect()
}

/// The text of a verb across contexts: `rows` (from [`context_rows`]) under a CONTEXT column
/// and `header`, or `empty` when no context has a row; then a line per context not read.
pub fn context_table<T>(
    results: &[PerContext<T>],
    header: &[&str],
    rows: &[Vec<String>],
    empty: &str,
) -> String {
    let mut out = if rows.is_empty() {
        empty.to_owned()
    } else {
        let mut columns = vec!["CONTEXT"];
        columns.extend(header);
        table(&columns, rows)
    };
    push_unread_lines(&mut out, results);
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_exit_code_table() {
        // (codes of the contexts read, contexts not read, --require-all, exit)
        let table: &[(&[u8], usize, bool, u8)] = &[
            (&[0, 0, 0], 0, false, 0),
            (&[0, 1, 0], 0, false, 1),
            (&[0, 1, 3], 0, false, 3),
            (&[3, 3], 0, true, 3),
            (&[0, 0], 1, false, 4),
            (&[0, 1], 1, false, 4),
            (&[0, 3], 1, false, 3),
            (&[0, 3], 1, true, 4),
            (&[0, 0], 0, true, 0),
            (&[], 3, false, 4),
            (&[], 3, true, 4),
        ];
        for (read, unread, require_all, want) in table {
            assert_eq!(
                exit_code(read, *unread, *require_all),
                *want,
                "read {read:?}, {unread} unread, --require-all {require_all}"
            );
        }
    }

    #[test]
    fn entries_and_lines_name_every_context() {
        #[derive(Serialize)]
        struct Read {
            clusters: usize,
        }
        let results = vec![
            PerContext {
                context: "dc-a".into(),
                elapsed: Duration::from_millis(12),
                outcome: Ok(Read { clusters: 2 }),
            },
            PerContext {
                context: "dc-b".into(),
                elapsed: Duration::from_secs(10),
                outcome: Err(ContextError::TimedOut(10)),
            },
        ];
        let json = entries(&results, |_| {
            Map::from_iter([("clusters".to_owned(), Value::Null)])
        })
        .unwrap();
        assert_eq!(
            json,
            [
                json!({"context": "dc-a", "status": "ok", "error": null, "elapsedMs": 12,
                       "clusters": 2}),
                json!({"context": "dc-b", "status": "unreachable",
                       "error": "timeout after 10s", "elapsedMs": 10000, "clusters": null}),
            ]
        );
        assert_eq!(
            unread_lines(&results),
            ["context dc-b: unreachable (timeout after 10s)"]
        );
    }
}
