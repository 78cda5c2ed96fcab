//! tally: a Weft plugin in Rust, on the kit in sdk/rust. It counts what is
//! in a text (`count`), finds its most frequent words (`top`, skipping the
//! stop words an operator configured) and counts a document fetched from a
//! granted host (`count_url`).
//!
//! Build, from this directory, with Debian's toolchain (README.md):
//!
//!     /usr/bin/cargo build --release --offline --locked

use serde_json::{json, Value};
use std::collections::HashMap;
use weft::{Activity, Context, Error, Level, Needs, Plugin, Request};

static PLUGIN: Plugin = Plugin {
    activities: &[
        Activity::json(
            "count",
            "{text} -> {bytes, chars, words, lines}; heartbeats every 1000 lines.",
            count,
        ),
        Activity::json(
            "top",
            "{text, n} -> the n most frequent words, without the configured stop words.",
            top,
        ),
        Activity::json(
            "count_url",
            "{url} -> count's statistics of the document at url, with its status and content type.",
            count_url,
        ),
    ],
    needs: Needs {
        hosts: &[],
        config: &["stopwords"],
        secrets: &[],
    },
};

weft::export!(PLUGIN);

/// How many lines `count` reads between heartbeats.
const BEAT_LINES: u64 = 1000;

/// The most words `top` returns.
const MAX_TOP: u64 = 1000;

/// count: `{"text": s}` -> `{"bytes", "chars", "words", "lines"}`.
fn count(ctx: &Context, input: Value) -> Result<Value, Error> {
    let text = text(&input)?;
    stats(ctx, text)
}

/// The statistics of text. A long text is read with heartbeats that carry
/// the lines read so far, and the count stops when the attempt is
/// cancelled.
fn stats(ctx: &Context, text: &str) -> Result<Value, Error> {
    let (mut words, mut lines) = (0u64, 0u64);
    for line in text.split_inclusive('\n') {
        words += words_of(line).count() as u64;
        lines += 1;
        if lines % BEAT_LINES == 0 && ctx.heartbeat(Some(&json!({ "lines": lines }))) {
            return Err(Error::cancelled());
        }
    }
    Ok(json!({
        "bytes": text.len(),
        "chars": text.chars().count(),
        "words": words,
        "lines": lines,
    }))
}

/// top: `{"text": s, "n": k}` -> `{"top": [{"word", "count"}…], "distinct"}`:
/// the k (10 when absent) most frequent words, lower-cased, most frequent
/// first and then in alphabetical order; `distinct` counts the words that
/// are not stop words. The configuration value `stopwords` lists words to
/// skip, separated by commas or spaces.
fn top(ctx: &Context, input: Value) -> Result<Value, Error> {
    let text = text(&input)?;
    let n = match &input["n"] {
        Value::Null => 10,
        v => match v.as_u64() {
            Some(n) if (1..=MAX_TOP).contains(&n) => n,
            _ => {
                return Err(Error::bad_input(format!(
                    "n: want an integer from 1 to {}, got {}",
                    MAX_TOP, v
                )))
            }
        },
    };
    let stop: Vec<String> = match ctx.config("stopwords") {
        Some(list) => list
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect(),
        None => Vec::new(),
    };

    let mut counts: HashMap<String, u64> = HashMap::new();
    let mut skipped = 0;
    for word in words_of(text) {
        let word = word.to_lowercase();
        if stop.contains(&word) {
            skipped += 1;
            continue;
        }
        *counts.entry(word).or_insert(0) += 1;
    }
    if !stop.is_empty() {
        ctx.log(
            Level::Info,
            &format!(
                "skipped {} occurrences of {} stop words",
                skipped,
                stop.len()
            ),
        );
    }
    let distinct = counts.len();
    let mut ranked: Vec<(String, u64)> = counts.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    ranked.truncate(n as usize);
    let top: Vec<Value> = ranked
        .into_iter()
        .map(|(word, count)| json!({ "word": word, "count": count }))
        .collect();
    Ok(json!({ "top": top, "distinct": distinct }))
}

/// count_url: `{"url": s}` -> count's statistics of the document at s (its
/// body as UTF-8, invalid bytes replaced), with `status` and `content_type`.
/// The host must have been granted the URL's host.
fn count_url(ctx: &Context, input: Value) -> Result<Value, Error> {
    let url = match &input["url"] {
        Value::String(s) => s.as_str(),
        v => return Err(Error::bad_input(format!("url: want a string, got {}", v))),
    };
    let resp = ctx.http(&Request::get(url))?;
    ctx.log(
        Level::Info,
        &format!(
            "status {}, {} bytes, attempt {}",
            resp.status,
            resp.body.len(),
            ctx.info().attempt
        ),
    );
    if !(200..300).contains(&resp.status) {
        // A server error or a throttle may pass; any other answer will not.
        let retryable = resp.status >= 500 || resp.status == 429;
        let e = Error {
            code: "http_status".to_string(),
            message: format!("the server answered {}", resp.status),
            retryable,
            details: Some(json!({ "status": resp.status })),
        };
        return Err(e);
    }
    let mut out = stats(ctx, &String::from_utf8_lossy(&resp.body))?;
    out["status"] = json!(resp.status);
    out["content_type"] = json!(resp.header("Content-Type").unwrap_or(""));
    Ok(out)
}

/// The input's `text`, which must be a string.
fn text(input: &Value) -> Result<&str, Error> {
    match &input["text"] {
        Value::String(s) => Ok(s),
        v => Err(Error::bad_input(format!("text: want a string, got {}", v))),
    }
}

/// The words of s: runs of letters, digits and apostrophes, without
/// apostrophes at either end ("don't" is one word, "'quoted'" is quoted).
fn words_of(s: &str) -> impl Iterator<Item = &str> {
    let apostrophe = |c: char| c == '\'' || c == '’';
    s.split(move |c: char| !c.is_alphanumeric() && !apostrophe(c))
        .map(move |w| w.trim_matches(apostrophe))
        .filter(|w| !w.is_empty())
}
