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

#endif
