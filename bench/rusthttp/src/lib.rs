//! rusthttp: the Rust contender of bench/'s outbound HTTP benchmark. Its
//! `post` activity POSTs a small body to a URL n times through the Rust
//! SDK's `Context::http`, reading every response whole, and returns how
//! many answered 200: what bench/httpcall's `post` does through the Go SDK.

use serde_json::{json, Value};
use weft::{Activity, Context, Error, Needs, Plugin, Request};

static PLUGIN: Plugin = Plugin {
    activities: &[Activity::json(
        "post",
        "{url, body, n} -> how many of n POSTs of body to url answered 200.",
        post,
    )],
    needs: Needs {
        hosts: &[],
        config: &[],
        secrets: &[],
    },
};

weft::export!(PLUGIN);

fn post(ctx: &Context, input: Value) -> Result<Value, Error> {
    let (url, body, n) = match (&input["url"], &input["body"], input["n"].as_u64()) {
        (Value::String(u), Value::String(b), Some(n)) => (u.as_str(), b.as_bytes(), n),
        _ => return Err(Error::bad_input("want {url, body, n}".to_string())),
    };
    let req = Request {
        method: "POST",
        url,
        headers: &[("Content-Type", "application/json")],
        body,
    };
    let mut ok = 0u64;
    for _ in 0..n {
        if ctx.http(&req)?.status == 200 {
            ok += 1;
        }
    }
    Ok(json!(ok))
}
