// weft.h: the Weft plugin ABI, version 1 (abi/README.md), for C.
//
// wasm32 has 32-bit pointers and size_t, so every i32 of the ABI is a
// pointer, a size_t or an int32_t here.

#ifndef WEFT_H
#define WEFT_H

#include <stddef.h>
#include <stdint.h>

// WEFT_EXPORT makes a function a module export named name (§3).
#define WEFT_EXPORT(name) __attribute__((export_name(name)))

// WEFT_IMPORT declares a host function of module "weft" (§4).
#define WEFT_IMPORT(name) __attribute__((import_module("weft"), import_name(name)))

// Statuses of weft_manifest and weft_invoke (§8).
enum {
	WEFT_OK = 0,    // the result is the output
	WEFT_ERROR = 1, // the result is a failure; the instance is healthy
	WEFT_PANIC = 2, // the result is a failure; discard the instance
};

// Log levels of weft_log.
enum { WEFT_LOG_DEBUG = 0, WEFT_LOG_INFO = 1, WEFT_LOG_WARN = 2, WEFT_LOG_ERROR = 3 };

// Host functions. The host copies what a pointer points to before it
// returns, so the guest may reuse the bytes at once.

// weft_result sets the output, failure or manifest of the export call.
WEFT_IMPORT("result") void weft_result(const void *ptr, size_t len);
// weft_log appends a message to the activity's log.
WEFT_IMPORT("log") void weft_log(int32_t level, const void *ptr, size_t len);
// weft_heartbeat records JSON details (len 0 keeps the earlier ones) and
// returns 1 when cancellation was requested.
WEFT_IMPORT("heartbeat") int32_t weft_heartbeat(const void *ptr, size_t len);
// weft_cancelled returns 1 when cancellation was requested.
WEFT_IMPORT("cancelled") int32_t weft_cancelled(void);
// weft_info writes the call-info document at buf when it fits in cap and
// returns its length either way.
WEFT_IMPORT("info") int32_t weft_info(void *buf, size_t cap);
// weft_last_heartbeat is weft_info for the details the previous attempt
// last recorded; -1 when there are none.
WEFT_IMPORT("last_heartbeat") int32_t weft_last_heartbeat(void *buf, size_t cap);
// weft_config is weft_info for the configuration value named by key; -1
// when it is not set.
WEFT_IMPORT("config") int32_t weft_config(const void *key, size_t key_len, void *buf, size_t cap);

// The functions below were added to version 1 later (§11). A module imports
// only the functions it calls, and clang imports only those: declaring them
// here makes no plugin need a host that provides them.

// weft_secret is weft_info for the value of the secret named by name
// (§12). A secret not granted to the plugin stops the call (not_granted);
// never log or return the value.
WEFT_IMPORT("secret") int32_t weft_secret(const void *name, size_t name_len, void *buf, size_t cap);

// weft_http_request sends an HTTP request to a granted host and waits for
// the whole response (§13). method is a token (empty means GET), url an
// absolute http(s) URL in ASCII, headers zero or more "Name: value\n"
// lines (never Host, Content-Length, Transfer-Encoding, Connection,
// Keep-Alive, Upgrade, TE, Trailer or Proxy-*), body raw bytes. It returns
// the status (100-599) or a WEFT_HTTP_* error. A host that is not granted
// stops the call (not_granted), as do the request and response limits.
WEFT_IMPORT("http_request") int32_t weft_http_request(const char *method, size_t method_len,
						      const char *url, size_t url_len,
						      const char *headers, size_t headers_len,
						      const void *body, size_t body_len);
// weft_http_response_headers is weft_info for the header lines of the last
// response of the call, "Name: value\n" with canonical names, sorted; -1
// when there is none.
WEFT_IMPORT("http_response_headers") int32_t weft_http_response_headers(char *buf, size_t cap);
// weft_http_response_body is weft_info for the body of the last response
// of the call; -1 when there is none.
WEFT_IMPORT("http_response_body") int32_t weft_http_response_body(void *buf, size_t cap);

// What weft_http_request returns when no response arrived (§13). The host
// logs the details to the activity's log.
enum {
	WEFT_HTTP_TIMEOUT = -1,      // the request's own timeout passed
	WEFT_HTTP_UNREACHABLE = -2,  // no such name, or the connection was refused or reset
	WEFT_HTTP_TLS = -3,          // the TLS handshake failed
	WEFT_HTTP_BAD_RESPONSE = -4, // not HTTP, or more than 10 redirects
};

#endif
