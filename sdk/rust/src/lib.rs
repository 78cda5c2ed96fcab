//! Weft activity plugins in Rust: the plugin ABI of `abi/README.md`
//! (version 1) and typed helpers over it.
//!
//! A plugin is a `cdylib` crate built for `wasm32-wasi`. It lists its
//! activities in a [`Plugin`] and hands it to [`export!`], which defines the
//! module's exports (`_initialize`, `weft_abi_version`, `weft_alloc`,
//! `weft_manifest`, `weft_invoke`):
//!
//! ```no_run
//! use serde_json::{json, Value};
//! use weft::{Activity, Context, Error, Needs, Plugin};
//!
//! fn greet(_ctx: &Context, input: Value) -> Result<Value, Error> {
//!     let name = input["name"]
//!         .as_str()
//!         .ok_or_else(|| Error::bad_input("name: want a string"))?;
//!     Ok(json!({ "greeting": format!("hello, {}", name) }))
//! }
//!
//! static PLUGIN: Plugin = Plugin {
//!     activities: &[Activity::json("greet", "Greets someone by name.", greet)],
//!     needs: Needs::NONE,
//! };
//!
//! weft::export!(PLUGIN);
//! ```
//!
//! An activity gets a [`Context`], its handle on the host for the call:
//! logs, heartbeats and cancellation, call info, and what an operator
//! granted the plugin (configuration, secrets, outbound HTTP).
//!
//! A panic traps (wasm32 aborts on panic): the host fails the attempt with
//! the code `trap`, which is retried, and discards the instance; the panic
//! message goes to stderr, which the host writes to the activity's log.

#![warn(missing_docs)]

use serde_json::{Map, Value};
use std::cell::UnsafeCell;
use std::fmt;

mod context;
mod http;
mod sys;

pub use context::{Context, Info, Level};
pub use http::{HttpError, Request, Response};

/// A plugin: the activities it provides and what it asks an operator to
/// grant it. Declare one as a `static` and pass it to [`export!`].
pub struct Plugin {
    /// The activities, listed in this order in the manifest. Names must be
    /// unique; the host refuses the module at upload otherwise.
    pub activities: &'static [Activity],
    /// What the plugin needs granted (§6, §12); [`Needs::NONE`] for nothing.
    pub needs: Needs,
}

/// What a plugin declares in its manifest that it needs (§6). The host
/// shows it to an operator next to what is granted; declaring grants
/// nothing.
pub struct Needs {
    /// Host patterns its HTTP requests reach, such as `api.example.com`,
    /// `*.example.com` or `http://10.0.0.7:8080`.
    pub hosts: &'static [&'static str],
    /// Configuration keys it reads with [`Context::config`].
    pub config: &'static [&'static str],
    /// Secret names it reads with [`Context::secret`].
    pub secrets: &'static [&'static str],
}

impl Needs {
    /// Needs nothing: no hosts, configuration or secrets.
    pub const NONE: Needs = Needs {
        hosts: &[],
        config: &[],
        secrets: &[],
    };
}

/// A handler on JSON values: the input decoded, the output encoded.
pub type JsonFn = fn(&Context, Value) -> Result<Value, Error>;

/// A handler on the raw bytes of the input; the output must be one JSON
/// document (empty is read as `null`).
pub type RawFn = fn(&Context, &[u8]) -> Result<Vec<u8>, Error>;

/// How an activity takes its input and gives its output.
#[derive(Clone, Copy)]
pub enum Handler {
    /// See [`JsonFn`]. Input that is not JSON fails as non-retryable
    /// `bad_input` before the handler runs.
    Json(JsonFn),
    /// See [`RawFn`].
    Raw(RawFn),
}

/// One activity of a [`Plugin`].
pub struct Activity {
    /// 1–64 of `a-z 0-9 _ -`, starting with a letter (§6).
    pub name: &'static str,
    /// Free text shown in the manifest; empty for none.
    pub description: &'static str,
    /// The function that runs a call.
    pub handler: Handler,
}

impl Activity {
    /// An activity whose handler works on [`serde_json::Value`]s.
    pub const fn json(name: &'static str, description: &'static str, f: JsonFn) -> Activity {
        Activity {
            name,
            description,
            handler: Handler::Json(f),
        }
    }

    /// An activity whose handler works on raw bytes.
    pub const fn raw(name: &'static str, description: &'static str, f: RawFn) -> Activity {
        Activity {
            name,
            description,
            handler: Handler::Raw(f),
        }
    }
}

/// An activity failure: the ABI's failure document (§8). `retryable` steers
/// the step's retry policy: only `true` lets it try again.
#[derive(Debug, Clone, PartialEq)]
pub struct Error {
    /// Names the failure; a workflow lists codes as `non_retryable`. Avoid
    /// the codes the host sets itself (`timeout`, `trap`, `limit`, …, §8).
    pub code: String,
    /// For people; empty for none.
    pub message: String,
    /// Whether another attempt may succeed.
    pub retryable: bool,
    /// Any JSON value, or `None`.
    pub details: Option<Value>,
}

impl Error {
    /// A failure after which the engine tries again, as the step's retry
    /// policy allows.
    pub fn retryable(code: impl Into<String>, message: impl Into<String>) -> Error {
        Error {
            code: code.into(),
            message: message.into(),
            retryable: true,
            details: None,
        }
    }

    /// A failure that no further attempt will retry.
    pub fn non_retryable(code: impl Into<String>, message: impl Into<String>) -> Error {
        Error {
            retryable: false,
            ..Error::retryable(code, message)
        }
    }

    /// The non-retryable `bad_input` failure: the input will stay wrong.
    pub fn bad_input(message: impl Into<String>) -> Error {
        Error::non_retryable("bad_input", message)
    }

    /// The `cancelled` failure: return it when [`Context::heartbeat`] or
    /// [`Context::cancelled`] reports that cancellation was requested.
    pub fn cancelled() -> Error {
        Error::non_retryable("cancelled", "activity cancelled")
    }

    /// This failure with `details` attached.
    pub fn with_details(self, details: Value) -> Error {
        Error {
            details: Some(details),
            ..self
        }
    }

    /// The failure document. An empty code becomes `error`, since the host
    /// takes a failure without a code for an ABI violation.
    fn to_json(&self) -> Vec<u8> {
        let mut doc = Map::new();
        let code = if self.code.is_empty() {
            "error"
        } else {
            &self.code
        };
        doc.insert("code".into(), code.into());
        if !self.message.is_empty() {
            doc.insert("message".into(), self.message.clone().into());
        }
        doc.insert("retryable".into(), self.retryable.into());
        if let Some(d) = &self.details {
            doc.insert("details".into(), d.clone());
        }
        to_vec(&Value::Object(doc))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            f.write_str(&self.code)
        } else {
            write!(f, "{}: {}", self.code, self.message)
        }
    }
}

impl std::error::Error for Error {}

/// Encodes a value. A `Value` always encodes (its keys are strings).
fn to_vec(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_else(|_| b"null".to_vec())
}

/// Defines the module's exports for a [`Plugin`] static: call it once, at
/// the crate's top level, as `weft::export!(PLUGIN);`. With `_initialize`
/// among them, the module is a WASI reactor (§2).
#[macro_export]
macro_rules! export {
    ($plugin:path) => {
        #[doc = "Runs the static constructors, once (abi/README.md §2)."]
        #[no_mangle]
        pub extern "C" fn _initialize() {
            $crate::__export::initialize()
        }

        #[doc = "The ABI version (abi/README.md §3)."]
        #[no_mangle]
        pub extern "C" fn weft_abi_version() -> i32 {
            $crate::__export::ABI_VERSION
        }

        #[doc = "A block for the next call's request (abi/README.md §3)."]
        #[no_mangle]
        pub extern "C" fn weft_alloc(size: usize) -> *mut u8 {
            $crate::__export::alloc(size)
        }

        #[doc = "Passes the manifest to `result` (abi/README.md §6)."]
        #[no_mangle]
        pub extern "C" fn weft_manifest() -> i32 {
            $crate::__export::manifest(&$plugin)
        }

        #[doc = "Runs one activity call (abi/README.md §7)."]
        #[no_mangle]
        pub extern "C" fn weft_invoke(ptr: *mut u8, activity_len: usize, input_len: usize) -> i32 {
            $crate::__export::invoke(&$plugin, ptr, activity_len, input_len)
        }
    };
}

/// What [`export!`] expands to calls; not for plugins to use directly.
#[doc(hidden)]
pub mod __export {
    use super::*;

    /// The ABI version this kit implements.
    pub const ABI_VERSION: i32 = 1;

    const STATUS_OK: i32 = 0;
    const STATUS_ERROR: i32 = 1;
    const STATUS_PANIC: i32 = 2;

    /// The block `weft_alloc` hands out (§3). The guest owns it from the
    /// `weft_invoke` that uses it on, so later calls reuse it while it is
    /// large enough.
    struct Block(UnsafeCell<Vec<u8>>);

    // SAFETY: a wasm32-wasi instance has one thread, and the host never
    // overlaps export calls on one instance (§2).
    unsafe impl Sync for Block {}

    static REQUEST: Block = Block(UnsafeCell::new(Vec::new()));

    /// `_initialize`: runs the static constructors, once, right after the
    /// host instantiates the module, as wasi-libc's reactor start-up does.
    /// A cdylib has none of its own, and wasm-ld would then take it for a
    /// WASI command and wrap every export in calls to the constructors and
    /// destructors.
    pub fn initialize() {
        #[cfg(target_arch = "wasm32")]
        {
            extern "C" {
                // Synthesised by wasm-ld.
                fn __wasm_call_ctors();
            }
            // SAFETY: the host calls _initialize once, before any other
            // export (§2).
            unsafe { __wasm_call_ctors() }
        }
    }

    /// `weft_alloc`: `size` writable bytes, or null (0) when memory runs
    /// out, which the host reports as a `limit` failure.
    pub fn alloc(size: usize) -> *mut u8 {
        // SAFETY: no other reference to the block is live between calls.
        let block = unsafe { &mut *REQUEST.0.get() };
        let size = size.max(1);
        if size > block.len() {
            // A new block rather than a grown one: the old bytes are spent,
            // and copying them would cost as much as the call.
            *block = Vec::new();
            if block.try_reserve_exact(size).is_err() {
                return std::ptr::null_mut();
            }
            block.resize(size, 0);
        }
        block.as_mut_ptr()
    }

    /// `weft_manifest`: passes the manifest (§6) to `result`.
    pub fn manifest(plugin: &Plugin) -> i32 {
        set_result(&manifest_json(plugin));
        STATUS_OK
    }

    /// `weft_invoke`: runs one activity call on the block `alloc` returned,
    /// which holds the activity's name and then its input (§3, §7).
    pub fn invoke(plugin: &Plugin, ptr: *mut u8, activity_len: usize, input_len: usize) -> i32 {
        // SAFETY: as in alloc; the host does not call weft_alloc while
        // weft_invoke runs.
        let block = unsafe { &*REQUEST.0.get() };
        let end = match activity_len.checked_add(input_len) {
            Some(end) if std::ptr::eq(ptr, block.as_ptr()) && end <= block.len() => end,
            _ => {
                let e = Error::non_retryable(
                    "abi",
                    "weft_invoke called with a block weft_alloc did not return",
                );
                set_result(&e.to_json());
                return STATUS_PANIC;
            }
        };
        let (name, input) = block[..end].split_at(activity_len);
        let (status, out) = dispatch(plugin, name, input);
        set_result(&out);
        status
    }

    fn set_result(b: &[u8]) {
        // SAFETY: the host copies the bytes before it returns.
        unsafe { sys::result(b.as_ptr(), b.len()) }
    }

    /// Runs the activity named `name` and returns the status and the
    /// result: the output, or a failure document.
    pub(crate) fn dispatch(plugin: &Plugin, name: &[u8], input: &[u8]) -> (i32, Vec<u8>) {
        let activity = plugin.activities.iter().find(|a| a.name.as_bytes() == name);
        let activity = match activity {
            Some(a) => a,
            None => {
                let name = String::from_utf8_lossy(name);
                let e = Error::non_retryable(
                    "unknown_activity",
                    format!("no activity named {:?}", name),
                );
                return (STATUS_ERROR, e.to_json());
            }
        };
        let ctx = Context::new();
        let result = match activity.handler {
            Handler::Raw(f) => f(&ctx, input),
            Handler::Json(f) => decode(input).and_then(|v| f(&ctx, v)).map(|v| to_vec(&v)),
        };
        match result {
            Ok(out) => (STATUS_OK, out),
            Err(e) => (STATUS_ERROR, e.to_json()),
        }
    }

    /// Decodes the input; empty is `null`, as the host reads an empty
    /// document.
    fn decode(input: &[u8]) -> Result<Value, Error> {
        if input.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_slice(input)
            .map_err(|e| Error::bad_input(format!("decoding input: {}", e)))
    }

    pub(crate) fn manifest_json(plugin: &Plugin) -> Vec<u8> {
        let activities = plugin
            .activities
            .iter()
            .map(|a| {
                let mut m = Map::new();
                m.insert("name".into(), a.name.into());
                if !a.description.is_empty() {
                    m.insert("description".into(), a.description.into());
                }
                Value::Object(m)
            })
            .collect();
        let mut doc = Map::new();
        doc.insert("activities".into(), Value::Array(activities));
        let n = &plugin.needs;
        let mut needs = Map::new();
        for (key, list) in [
            ("hosts", n.hosts),
            ("config", n.config),
            ("secrets", n.secrets),
        ] {
            if !list.is_empty() {
                needs.insert(key.into(), list.iter().map(|s| Value::from(*s)).collect());
            }
        }
        if !needs.is_empty() {
            doc.insert("needs".into(), Value::Object(needs));
        }
        to_vec(&Value::Object(doc))
    }
}

#[cfg(test)]
mod tests {
    use super::__export::{dispatch, manifest_json};
    use super::*;
    use serde_json::json;

    fn upper(_: &Context, v: Value) -> Result<Value, Error> {
        match v["text"].as_str() {
            Some(s) => Ok(json!({ "text": s.to_uppercase() })),
            None => Err(Error::bad_input("text: want a string").with_details(json!({ "got": v }))),
        }
    }

    fn echo(_: &Context, b: &[u8]) -> Result<Vec<u8>, Error> {
        Ok(b.to_vec())
    }

    fn flaky(_: &Context, _: Value) -> Result<Value, Error> {
        Err(Error::retryable("", ""))
    }

    static PLUGIN: Plugin = Plugin {
        activities: &[
            Activity::json("upper", "Upper-cases text.", upper),
            Activity::raw("echo", "", echo),
            Activity::json("flaky", "", flaky),
        ],
        needs: Needs {
            hosts: &[],
            config: &["k"],
            secrets: &["s", "t"],
        },
    };

    fn call(name: &str, input: &str) -> (i32, Value) {
        let (status, out) = dispatch(&PLUGIN, name.as_bytes(), input.as_bytes());
        (
            status,
            serde_json::from_slice(&out).expect("the result is JSON"),
        )
    }

    #[test]
    fn manifest() {
        let m: Value = serde_json::from_slice(&manifest_json(&PLUGIN)).unwrap();
        assert_eq!(
            m,
            json!({
                "activities": [
                    { "name": "upper", "description": "Upper-cases text." },
                    { "name": "echo" },
                    { "name": "flaky" }
                ],
                "needs": { "config": ["k"], "secrets": ["s", "t"] }
            })
        );
        let bare = Plugin {
            activities: PLUGIN.activities,
            needs: Needs::NONE,
        };
        let m: Value = serde_json::from_slice(&manifest_json(&bare)).unwrap();
        assert!(m.get("needs").is_none(), "needs without entries: {}", m);
    }

    #[test]
    fn json_activity() {
        assert_eq!(
            call("upper", r#"{"text":"héllo"}"#),
            (0, json!({ "text": "HÉLLO" }))
        );
        assert_eq!(
            call("upper", r#"{"text":5}"#),
            (
                1,
                json!({ "code": "bad_input", "message": "text: want a string", "retryable": false, "details": { "got": { "text": 5 } } })
            )
        );
    }

    #[test]
    fn input_not_json() {
        let (status, e) = call("upper", "{");
        assert_eq!(status, 1);
        assert_eq!(
            (e["code"].as_str(), e["retryable"].as_bool()),
            (Some("bad_input"), Some(false))
        );
        assert!(
            e["message"]
                .as_str()
                .unwrap()
                .starts_with("decoding input: "),
            "{}",
            e
        );
    }

    #[test]
    fn raw_activity_and_empty_input() {
        assert_eq!(
            dispatch(&PLUGIN, b"echo", b"[1, 2]"),
            (0, b"[1, 2]".to_vec())
        );
        // Empty input is null to a JSON handler.
        assert_eq!(
            call("upper", ""),
            (
                1,
                json!({ "code": "bad_input", "message": "text: want a string", "retryable": false, "details": { "got": null } })
            )
        );
    }

    #[test]
    fn empty_code_and_message() {
        assert_eq!(
            call("flaky", "null"),
            (1, json!({ "code": "error", "retryable": true }))
        );
    }

    #[test]
    fn unknown_activity() {
        assert_eq!(
            call("nope", "null"),
            (
                1,
                json!({ "code": "unknown_activity", "message": "no activity named \"nope\"", "retryable": false })
            )
        );
    }

    #[test]
    fn error_display() {
        assert_eq!(
            Error::cancelled().to_string(),
            "cancelled: activity cancelled"
        );
        assert_eq!(Error::retryable("x", "").to_string(), "x");
    }
}
