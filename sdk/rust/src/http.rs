use crate::context::sized;
use crate::{sys, Context, Error};
use std::fmt;

/// An outbound HTTP request (§13).
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// An HTTP method token; empty means `GET`.
    pub method: &'a str,
    /// An absolute `http` or `https` URL in ASCII, without user information.
    pub url: &'a str,
    /// Header names and values. The host sets `Host`, `Content-Length`,
    /// `Transfer-Encoding`, `Connection`, `Keep-Alive`, `Upgrade`, `TE`,
    /// `Trailer` and `Proxy-*` itself, and adds `User-Agent` and
    /// `Idempotency-Key` unless given.
    pub headers: &'a [(&'a str, &'a str)],
    /// The body, sent with a `Content-Length`; empty for none.
    pub body: &'a [u8],
}

impl<'a> Request<'a> {
    /// A `GET` of `url` without headers.
    pub fn get(url: &'a str) -> Request<'a> {
        Request {
            method: "GET",
            url,
            headers: &[],
            body: &[],
        }
    }
}

/// A response, read whole.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// 100–599. Any status is a response, not an error.
    pub status: u16,
    /// One entry per header value, names in canonical form
    /// (`Content-Type`), sorted by name.
    pub headers: Vec<(String, String)>,
    /// The body, as the server sent it (the host does not decompress).
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of the header `name`, compared without regard to
    /// case.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Why [`Context::http`] got no response. The host writes the details to
/// the activity's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpError {
    /// The request's own timeout passed (the host's `plugins.http.timeout`).
    Timeout,
    /// The name did not resolve, or the connection was refused or reset.
    Unreachable,
    /// The TLS handshake failed.
    Tls,
    /// The answer was not HTTP, or it redirected more than 10 times.
    BadResponse,
    /// The request breaks the ABI's rules and was not sent; the text says
    /// why. (Sent, the host would stop the call as an ABI violation.)
    Invalid(String),
}

impl HttpError {
    /// The failure code this error becomes: `http_timeout`,
    /// `http_unreachable`, `http_tls`, `http_bad_response` or `bad_request`.
    pub fn code(&self) -> &'static str {
        match self {
            HttpError::Timeout => "http_timeout",
            HttpError::Unreachable => "http_unreachable",
            HttpError::Tls => "http_tls",
            HttpError::BadResponse => "http_bad_response",
            HttpError::Invalid(_) => "bad_request",
        }
    }
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HttpError::Timeout => f.write_str("no response: the request timed out"),
            HttpError::Unreachable => f.write_str("no response: the host is unreachable"),
            HttpError::Tls => f.write_str("no response: the TLS handshake failed"),
            HttpError::BadResponse => {
                f.write_str("no response: the answer was not HTTP or redirected too often")
            }
            HttpError::Invalid(why) => write!(f, "invalid request: {}", why),
        }
    }
}

impl std::error::Error for HttpError {}

/// A timeout or an unreachable host may pass, so those are retryable; a TLS
/// failure, a bad response or an invalid request will not.
impl From<HttpError> for Error {
    fn from(e: HttpError) -> Error {
        let retryable = matches!(e, HttpError::Timeout | HttpError::Unreachable);
        Error {
            code: e.code().to_string(),
            message: e.to_string(),
            retryable,
            details: None,
        }
    }
}

impl Context {
    /// Sends `req` to a granted host and waits for the whole response
    /// (§13). A host that is not granted stops the call (`not_granted`, not
    /// retried), as do the host's limits (`limit`); the wait counts toward
    /// the attempt's deadline.
    pub fn http(&self, req: &Request) -> Result<Response, HttpError> {
        let headers = check(req)?;
        // SAFETY: every pair is a live slice; the host copies them all
        // before it returns.
        let status = unsafe {
            sys::http_request(
                req.method.as_ptr(),
                req.method.len(),
                req.url.as_ptr(),
                req.url.len(),
                headers.as_ptr(),
                headers.len(),
                req.body.as_ptr(),
                req.body.len(),
            )
        };
        match status {
            100..=599 => {}
            -1 => return Err(HttpError::Timeout),
            -2 => return Err(HttpError::Unreachable),
            -3 => return Err(HttpError::Tls),
            _ => return Err(HttpError::BadResponse),
        }
        // SAFETY: sized writes at most cap bytes at buf.
        let lines =
            sized(|buf, cap| unsafe { sys::http_response_headers(buf, cap) }).unwrap_or_default();
        let body =
            sized(|buf, cap| unsafe { sys::http_response_body(buf, cap) }).unwrap_or_default();
        Ok(Response {
            status: status as u16,
            headers: parse_headers(&lines),
            body,
        })
    }
}

/// Checks what the host would otherwise stop the call for, and returns the
/// header lines, `Name: value\n` each.
fn check(req: &Request) -> Result<Vec<u8>, HttpError> {
    let invalid = |why: String| Err(HttpError::Invalid(why));
    if !req.method.is_empty() && !is_token(req.method) {
        return invalid(format!("method {:?} is not a token", req.method));
    }
    if !req.url.bytes().all(|c| c.is_ascii_graphic()) {
        return invalid("the URL has a character that is not printable ASCII".into());
    }
    let rest = strip_prefix_ignore_case(req.url, "https://")
        .or_else(|| strip_prefix_ignore_case(req.url, "http://"));
    let authority = match rest {
        Some(r) => r.split(['/', '?', '#']).next().unwrap_or(""),
        None => return invalid("the URL is not an absolute http or https URL".into()),
    };
    if authority.is_empty() {
        return invalid("the URL has no host".into());
    }
    if authority.contains('@') {
        return invalid("the URL has user information".into());
    }
    let mut lines = Vec::new();
    for (name, value) in req.headers {
        if !is_token(name) {
            return invalid(format!("header name {:?} is not a token", name));
        }
        let lower = name.to_ascii_lowercase();
        let hosts = [
            "host",
            "content-length",
            "transfer-encoding",
            "connection",
            "keep-alive",
            "upgrade",
            "te",
            "trailer",
        ];
        if hosts.contains(&lower.as_str()) || lower.starts_with("proxy-") {
            return invalid(format!("header {} is the host's to set", name));
        }
        if value.chars().any(|c| c.is_control() && c != '\t') {
            return invalid(format!(
                "header {} has a control character in its value",
                name
            ));
        }
        lines.extend_from_slice(name.as_bytes());
        lines.extend_from_slice(b": ");
        lines.extend_from_slice(value.as_bytes());
        lines.push(b'\n');
    }
    Ok(lines)
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    match s.get(..prefix.len()) {
        Some(p) if p.eq_ignore_ascii_case(prefix) => Some(&s[prefix.len()..]),
        _ => None,
    }
}

/// Whether s is an HTTP token (RFC 9110 §5.6.2).
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c))
}

/// Splits the host's `Name: value\n` lines.
fn parse_headers(b: &[u8]) -> Vec<(String, String)> {
    String::from_utf8_lossy(b)
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.to_string(), v.trim().to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(method: &'a str, url: &'a str, headers: &'a [(&'a str, &'a str)]) -> Request<'a> {
        Request {
            method,
            url,
            headers,
            body: b"",
        }
    }

    #[test]
    fn header_lines() {
        let r = req(
            "POST",
            "https://api.example.com/x?q=1",
            &[("Content-Type", "text/plain"), ("X-A", "a\tb")],
        );
        assert_eq!(
            check(&r).unwrap(),
            b"Content-Type: text/plain\nX-A: a\tb\n".to_vec()
        );
        assert_eq!(
            check(&req("", "HTTP://h:8080", &[])).unwrap(),
            Vec::<u8>::new()
        );
    }

    #[test]
    fn refused_before_the_host_sees_them() {
        for (r, want) in [
            (req("GE T", "https://h/", &[]), "method"),
            (req("GET", "ftp://h/", &[]), "not an absolute http"),
            (req("GET", "/relative", &[]), "not an absolute http"),
            (req("GET", "https:///path", &[]), "no host"),
            (req("GET", "https://user:pw@h/", &[]), "user information"),
            (req("GET", "https://h/é", &[]), "printable ASCII"),
            (req("GET", "https://h/a b", &[]), "printable ASCII"),
            (
                req("GET", "https://h/", &[("Bad Name", "v")]),
                "not a token",
            ),
            (
                req("GET", "https://h/", &[("Content-Length", "1")]),
                "host's to set",
            ),
            (
                req("GET", "https://h/", &[("Proxy-Authorization", "x")]),
                "host's to set",
            ),
            (
                req("GET", "https://h/", &[("X-Inject", "a\r\nHost: evil")]),
                "control character",
            ),
        ] {
            match check(&r) {
                Err(HttpError::Invalid(why)) => {
                    assert!(why.contains(want), "{:?}: {} lacks {:?}", r, why, want)
                }
                other => panic!("{:?}: got {:?}, want Invalid", r, other),
            }
        }
    }

    #[test]
    fn headers_parse() {
        let h = parse_headers(b"Content-Type: text/plain\nX-Empty:\nX-Two: a\nX-Two: b\n");
        let resp = Response {
            status: 200,
            headers: h,
            body: vec![],
        };
        assert_eq!(resp.header("content-type"), Some("text/plain"));
        assert_eq!(resp.header("x-empty"), Some(""));
        assert_eq!(resp.header("X-Two"), Some("a"));
        assert_eq!(resp.headers.len(), 4);
    }

    #[test]
    fn into_failure() {
        let e: Error = HttpError::Unreachable.into();
        assert_eq!((e.code.as_str(), e.retryable), ("http_unreachable", true));
        let e: Error = HttpError::Tls.into();
        assert_eq!((e.code.as_str(), e.retryable), ("http_tls", false));
    }
}
