use crate::sys;
use serde_json::Value;

/// The level of a log record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Written only when the node logs at debug.
    Debug = 0,
    /// The usual level.
    Info = 1,
    /// Something to look at.
    Warn = 2,
    /// Something went wrong.
    Error = 3,
}

/// The call's handle on the host, given to an activity for the length of one
/// call. It exists only while `weft_invoke` runs, which is where the ABI lets
/// a guest call the host functions it wraps (§4).
pub struct Context {
    _private: (),
}

/// The call-info document (§9).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Info {
    /// The workflow instance.
    pub instance_id: String,
    /// The workflow's name.
    pub workflow: String,
    /// The step's id in the workflow.
    pub step_id: String,
    /// The plugin's name.
    pub plugin: String,
    /// The activity's name.
    pub activity: String,
    /// The attempt, from 1.
    pub attempt: u64,
    /// The same for every attempt of one step execution, and different
    /// between step executions: use it to make an outside effect happen
    /// once. Opaque: compare, store or pass it on; never parse it.
    pub idempotency_key: String,
    /// When the host stops this attempt, in ms since the Unix epoch; 0 for
    /// never.
    pub deadline_unix_ms: i64,
    /// The W3C trace id of the attempt's span (32 lowercase hex digits),
    /// for the plugin's own logs and telemetry; empty when the host does
    /// not trace the attempt. Outbound requests need it not: the host adds
    /// the trace context to them (§13).
    pub trace_id: String,
    /// The attempt's span id (16 lowercase hex digits); empty when the
    /// host does not trace the attempt.
    pub span_id: String,
}

impl Context {
    pub(crate) fn new() -> Context {
        Context { _private: () }
    }

    /// Appends `message` to the activity's log. The host keeps at most 1000
    /// records or 64 KiB per call and counts what it drops (§4).
    pub fn log(&self, level: Level, message: &str) {
        // SAFETY: the host copies the bytes before it returns.
        unsafe { sys::log(level as i32, message.as_ptr(), message.len()) }
    }

    /// Proof of life: records `details` as the attempt's latest heartbeat
    /// details (`None` keeps the earlier ones) and returns `true` when
    /// cancellation of this attempt was requested; then stop and return
    /// [`Error::cancelled`](crate::Error::cancelled). It does no I/O: call
    /// it as often as you make progress. Details over 64 KiB stop the call
    /// (`limit`).
    pub fn heartbeat(&self, details: Option<&Value>) -> bool {
        let b = details
            .map(|v| serde_json::to_vec(v).unwrap_or_default())
            .unwrap_or_default();
        // SAFETY: as in log. An empty slice keeps the earlier details.
        unsafe { sys::heartbeat(b.as_ptr(), b.len()) == 1 }
    }

    /// Whether cancellation of this attempt was requested.
    pub fn cancelled(&self) -> bool {
        // SAFETY: no arguments.
        unsafe { sys::cancelled() == 1 }
    }

    /// The call info: instance, step, attempt, idempotency key, deadline,
    /// and the attempt's trace context when the host traces it.
    pub fn info(&self) -> Info {
        // SAFETY: sized writes at most cap bytes at buf.
        let doc = sized(|buf, cap| unsafe { sys::info(buf, cap) }).unwrap_or_default();
        let v: Value = serde_json::from_slice(&doc).unwrap_or(Value::Null);
        let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
        Info {
            instance_id: s("instance_id"),
            workflow: s("workflow"),
            step_id: s("step_id"),
            plugin: s("plugin"),
            activity: s("activity"),
            attempt: v["attempt"].as_u64().unwrap_or_default(),
            idempotency_key: s("idempotency_key"),
            deadline_unix_ms: v["deadline_unix_ms"].as_i64().unwrap_or_default(),
            trace_id: s("trace_id"),
            span_id: s("span_id"),
        }
    }

    /// The latest heartbeat details an earlier attempt of this step
    /// execution recorded, to resume where it stopped; `None` on the first
    /// attempt or when no attempt recorded any.
    pub fn last_heartbeat(&self) -> Option<Value> {
        // SAFETY: as in info.
        let b = sized(|buf, cap| unsafe { sys::last_heartbeat(buf, cap) })?;
        serde_json::from_slice(&b).ok()
    }

    /// The configuration value an operator granted the plugin under `key`;
    /// `None` when none is, so that the plugin can fall back to a default.
    /// Bytes that are not UTF-8 become U+FFFD.
    pub fn config(&self, key: &str) -> Option<String> {
        // SAFETY: as in info; the host copies the key.
        let b = sized(|buf, cap| unsafe { sys::config(key.as_ptr(), key.len(), buf, cap) })?;
        Some(String::from_utf8_lossy(&b).into_owned())
    }

    /// The value of the secret an operator granted the plugin under `name`,
    /// as its reference resolved (an environment variable, a file's content
    /// without trailing newlines). A secret that is not granted stops the
    /// call (`not_granted`, not retried); one that does not resolve on this
    /// node stops it with `host`. Never log it or put it in an output,
    /// failure or heartbeat.
    pub fn secret(&self, name: &str) -> Vec<u8> {
        // SAFETY: as in config. Never -1: the host stops the call instead.
        sized(|buf, cap| unsafe { sys::secret(name.as_ptr(), name.len(), buf, cap) })
            .unwrap_or_default()
    }
}

/// Reads a value through one of the ABI's sized functions (§4): `read(buf,
/// cap)` writes the value at `buf` only when it fits in `cap` and returns its
/// length either way, or -1 when there is none. The first call, with an
/// empty buffer, asks for the length; the next reads that many bytes.
pub(crate) fn sized(mut read: impl FnMut(*mut u8, usize) -> i32) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    loop {
        // An empty Vec's pointer is dangling but non-zero and small, which
        // the ABI allows with cap 0.
        let n = read(buf.as_mut_ptr(), buf.len());
        if n < 0 {
            return None;
        }
        let n = n as usize;
        if n <= buf.len() {
            buf.truncate(n);
            return Some(buf);
        }
        buf.resize(n, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::sized;

    #[test]
    fn sized_asks_for_the_length_then_reads() {
        let value = b"hello";
        let mut caps = Vec::new();
        let got = sized(|buf, cap| {
            caps.push(cap);
            if cap >= value.len() {
                // SAFETY: buf holds cap bytes.
                unsafe { std::ptr::copy_nonoverlapping(value.as_ptr(), buf, value.len()) };
            }
            value.len() as i32
        });
        assert_eq!(got.as_deref(), Some(&value[..]));
        assert_eq!(caps, vec![0, 5]);
    }

    #[test]
    fn sized_empty_and_missing() {
        assert_eq!(sized(|_, _| 0), Some(Vec::new()));
        assert_eq!(sized(|_, _| -1), None);
    }
}
