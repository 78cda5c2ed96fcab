// ckit is the kit plugin (examples/plugins/kit) in C: the Weft ABI
// (abi/README.md) implemented by hand, with no SDK, to show that a plugin
// can be written in any language that compiles to a WASI reactor. Its
// activities behave as the kit's of the same name, input for input, except
// that trap is a real WebAssembly trap rather than a Go panic; heartbeat is
// its own.
//
// Build, with clang, its wasm32-wasi target and wasi-libc:
//
//	clang --target=wasm32-wasi -mexec-model=reactor -O2 -Wall -o ckit.wasm *.c
//
// and check that it imports nothing but the host functions of module
// "weft" and the WASI functions of abi/README.md §5:
//
//	wasm-objdump -x -j Import ckit.wasm

#include <stdlib.h>
#include <string.h>
#include <wctype.h>

#include "json.h"
#include "weft.h"

// LIT expands a string literal to the pointer and length arguments most
// functions here take.
#define LIT(s) s, sizeof(s) - 1

// --- Exports (abi/README.md §3) ---

WEFT_EXPORT("weft_abi_version") int32_t weft_abi_version(void) { return 1; }

// request is the block weft_alloc hands out. The guest owns it from the
// weft_invoke that uses it on, so it is reused by the next call whenever it
// is large enough.
static char *request;
static size_t request_cap;

WEFT_EXPORT("weft_alloc") void *weft_alloc(size_t size) {
	if (size == 0) {
		size = 1;
	}
	if (size > request_cap) {
		free(request);
		request = malloc(size);
		request_cap = request != NULL ? size : 0;
	}
	return request; // NULL, which the host sees as 0, when out of memory
}

static const char manifest[] =
    "{\"activities\":["
    "{\"name\":\"echo\",\"description\":\"Returns its input unchanged.\"},"
    "{\"name\":\"upper\",\"description\":\"{\\\"text\\\": s} -> {\\\"text\\\": UPPER(s)}.\"},"
    "{\"name\":\"fail\",\"description\":\"Fails attempts 1..fail_attempts with the given error, then returns {attempt}.\"},"
    "{\"name\":\"info\",\"description\":\"Returns its call info.\"},"
    "{\"name\":\"trap\",\"description\":\"Traps: executes an unreachable instruction.\"},"
    "{\"name\":\"spin\",\"description\":\"Loops forever and never heartbeats.\"},"
    "{\"name\":\"heartbeat\",\"description\":\"Heartbeats {\\\"n\\\": i} for i in 1..n, stopping when cancelled; returns {beats, cancelled}.\"}"
    "]}";

WEFT_EXPORT("weft_manifest") int32_t weft_manifest(void) {
	weft_result(LIT(manifest));
	return WEFT_OK;
}

// An activity reads its input (a JSON document), writes its output or
// failure to out and returns the status.
typedef int32_t activity(const char *input, size_t n, buf *out);

static activity echo, upper, fail, info, trap, spin, heartbeat;

static const struct {
	const char *name;
	activity *run;
} activities[] = {
    {"echo", echo}, {"upper", upper}, {"fail", fail}, {"info", info},
    {"trap", trap}, {"spin", spin},   {"heartbeat", heartbeat},
};

static int32_t failure(buf *out, const char *code, size_t code_len, const char *msg, size_t msg_len, int retryable);

// weft_invoke runs one activity call (§7): the activity's name is at ptr
// and its input right after it, in the block weft_alloc returned.
WEFT_EXPORT("weft_invoke") int32_t weft_invoke(char *ptr, size_t activity_len, size_t input_len) {
	if (ptr == NULL || ptr != request || activity_len > request_cap || input_len > request_cap - activity_len) {
		static const char bad[] = "{\"code\":\"abi\",\"message\":\"weft_invoke called with a block weft_alloc did not return\",\"retryable\":false}";
		weft_result(LIT(bad));
		return WEFT_PANIC;
	}
	buf out = {0};
	int32_t status = -1;
	for (size_t i = 0; i < sizeof activities / sizeof activities[0]; i++) {
		if (strlen(activities[i].name) == activity_len && memcmp(activities[i].name, ptr, activity_len) == 0) {
			status = activities[i].run(ptr + activity_len, input_len, &out);
			break;
		}
	}
	if (status < 0) {
		buf msg = {0};
		buf_puts(&msg, "no activity named ");
		buf_json_string(&msg, ptr, activity_len);
		status = failure(&out, LIT("unknown_activity"), msg.p, msg.len, 0);
		buf_free(&msg);
	}
	if (out.failed) {
		// malloc failed: the instance is near its memory limit, so let the
		// host start afresh with another.
		static const char oom[] = "{\"code\":\"out_of_memory\",\"message\":\"ckit ran out of memory\",\"retryable\":true}";
		weft_result(LIT(oom));
		status = WEFT_PANIC;
	} else {
		weft_result(out.p, out.len); // the host copies it before returning
	}
	buf_free(&out);
	return status;
}

// --- Helpers ---

// failure writes a failure document (§8) to out, replacing what it held,
// and returns WEFT_ERROR. An empty message is left out, as the Go SDK does.
static int32_t failure(buf *out, const char *code, size_t code_len, const char *msg, size_t msg_len, int retryable) {
	out->len = 0;
	buf_puts(out, "{\"code\":");
	buf_json_string(out, code, code_len);
	if (msg_len > 0) {
		buf_puts(out, ",\"message\":");
		buf_json_string(out, msg, msg_len);
	}
	buf_puts(out, retryable ? ",\"retryable\":true}" : ",\"retryable\":false}");
	return WEFT_ERROR;
}

// decode decodes input into fields, writing the Go SDK's bad_input failure
// to out when it does not decode. It returns 0 or WEFT_ERROR. When memory
// runs out it marks out as failed, which weft_invoke reports.
static int32_t decode(const char *input, size_t n, json_field *fields, size_t nfields, buf *out) {
	buf err = {0};
	int32_t status = 0;
	buf_puts(&err, "decoding input: ");
	if (json_decode(input, n, fields, nfields, &err) != 0) {
		status = failure(out, LIT("bad_input"), err.p, err.len, 0);
	}
	out->failed |= err.failed;
	for (size_t i = 0; i < nfields; i++) {
		out->failed |= fields[i].str.failed;
	}
	buf_free(&err);
	return status;
}

static void free_fields(json_field *fields, size_t nfields) {
	for (size_t i = 0; i < nfields; i++) {
		buf_free(&fields[i].str);
	}
}

// call_info returns the call-info document (§9) in a buffer of the right
// size: the info host function says how long the document is when the
// buffer it was given is too small.
static buf call_info(void) {
	buf b = {0};
	size_t want = 256;
	while (buf_reserve(&b, want)) {
		size_t n = (size_t)weft_info(b.p, b.cap);
		if (n <= b.cap) {
			b.len = n;
			break;
		}
		want = n;
	}
	return b;
}

// --- Activities ---

// echo returns its input unchanged.
static int32_t echo(const char *input, size_t n, buf *out) {
	buf_write(out, input, n);
	return WEFT_OK;
}

// upper_rune upper-cases r as Go's unicode.ToUpper does. wasi-libc's
// towupper knows an older Unicode than Go's 15.0, and upper-cases ß to ẞ
// where Go leaves it; the ranges below are where the two differ
// (TestSameAsKit in test/ckit_test.go checks every code point).
static uint32_t upper_rune(uint32_t r) {
	static const struct {
		uint32_t lo, hi;
		int32_t delta;
	} go_only[] = {
	    {0x00DF, 0x00DF, 0},      // ß stays ß
	    {0x24D0, 0x24E9, -26},    // circled ⓐ..ⓩ
	    {0x2C5F, 0x2C5F, -48},    // Glagolitic (Unicode 14)
	    {0xA7C1, 0xA7C1, -1},     // Latin Extended-D (Unicode 14)
	    {0xA7C8, 0xA7C8, -1},     //
	    {0xA7CA, 0xA7CA, -1},     //
	    {0xA7D1, 0xA7D1, -1},     //
	    {0xA7D7, 0xA7D7, -1},     //
	    {0xA7D9, 0xA7D9, -1},     //
	    {0xA7F6, 0xA7F6, -1},     //
	    {0x10597, 0x105A1, -39},  // Vithkuqi (Unicode 14)
	    {0x105A3, 0x105B1, -39},  //
	    {0x105B3, 0x105B9, -39},  //
	    {0x105BB, 0x105BC, -39},  //
	};
	for (size_t i = 0; i < sizeof go_only / sizeof go_only[0]; i++) {
		if (r >= go_only[i].lo && r <= go_only[i].hi) {
			return (uint32_t)((int32_t)r + go_only[i].delta);
		}
	}
	return (uint32_t)towupper((wint_t)r);
}

// upper: {"text": s} -> {"text": UPPER(s)}, upper-casing rune by rune as
// Go's strings.ToUpper does.
static int32_t upper(const char *input, size_t n, buf *out) {
	json_field f[] = {{.name = "text", .kind = JSON_STRING}};
	int32_t status = decode(input, n, f, 1, out);
	if (status == 0) {
		buf up = {0};
		for (size_t i = 0; i < f[0].str.len;) {
			uint32_t r;
			i += utf8_decode(f[0].str.p + i, f[0].str.len - i, &r);
			buf_rune(&up, upper_rune(r));
		}
		buf_puts(out, "{\"text\":");
		buf_json_string(out, up.p, up.len);
		buf_puts(out, "}");
		out->failed |= up.failed;
		buf_free(&up);
	}
	free_fields(f, 1);
	return status;
}

// fail: {"code", "message", "retryable", "fail_attempts"} fails attempts
// 1..fail_attempts (every attempt when fail_attempts is absent) with that
// failure, code "kit_failure" when it has none, then returns {"attempt"}.
static int32_t fail(const char *input, size_t n, buf *out) {
	json_field f[] = {
	    {.name = "code", .kind = JSON_STRING},
	    {.name = "message", .kind = JSON_STRING},
	    {.name = "retryable", .kind = JSON_BOOL},
	    {.name = "fail_attempts", .kind = JSON_OPT_INT},
	};
	const size_t nf = sizeof f / sizeof f[0];
	int32_t status = decode(input, n, f, nf, out);
	if (status != 0) {
		free_fields(f, nf);
		return status;
	}
	// The attempt is in the call info. Like the Go SDK, take 0 when the
	// document does not decode.
	buf doc = call_info();
	json_field attempt[] = {{.name = "attempt", .kind = JSON_INT}};
	buf ignored = {0};
	json_decode(doc.p, doc.len, attempt, 1, &ignored);
	out->failed |= doc.failed;
	buf_free(&ignored);
	buf_free(&doc);

	const buf *code = &f[0].str, *msg = &f[1].str;
	if (!f[3].set || attempt[0].integer <= f[3].integer) {
		if (code->len > 0) {
			status = failure(out, code->p, code->len, msg->p, msg->len, f[2].boolean);
		} else {
			status = failure(out, LIT("kit_failure"), msg->p, msg->len, f[2].boolean);
		}
	} else {
		buf_puts(out, "{\"attempt\":");
		buf_int(out, attempt[0].integer);
		buf_puts(out, "}");
		status = WEFT_OK;
	}
	free_fields(f, nf);
	return status;
}

// info returns the call-info document as the host wrote it. Its input, as
// the kit's, must be null or an object.
static int32_t info(const char *input, size_t n, buf *out) {
	int32_t status = decode(input, n, NULL, 0, out);
	if (status == 0) {
		buf doc = call_info();
		buf_write(out, doc.p, doc.len);
		out->failed |= doc.failed;
		buf_free(&doc);
	}
	return status;
}

// trap executes the unreachable instruction: the host stops the call with
// a trap and discards the instance.
static int32_t trap(const char *input, size_t n, buf *out) { __builtin_trap(); }

// spin loops forever without calling anything; only the host's deadline or
// the end of its cancellation grace period stops it. The counter is
// volatile so that the compiler keeps the loop.
static int32_t spin(const char *input, size_t n, buf *out) {
	volatile uint64_t counter = 0;
	for (;;) {
		counter++;
	}
}

// heartbeat: {"n"} heartbeats with the details {"n": i} for i in 1..n and
// returns {"beats": n, "cancelled": c}, where c tells whether cancellation
// was requested after the last heartbeat. When a heartbeat reports a
// cancellation it stops with the cancelled failure.
static int32_t heartbeat(const char *input, size_t n, buf *out) {
	json_field f[] = {{.name = "n", .kind = JSON_INT}};
	int32_t status = decode(input, n, f, 1, out);
	if (status != 0) {
		return status;
	}
	int64_t beats = 0;
	buf details = {0};
	for (int64_t i = 1; i <= f[0].integer; i++) {
		details.len = 0;
		buf_puts(&details, "{\"n\":");
		buf_int(&details, i);
		buf_puts(&details, "}");
		if (details.failed) {
			break; // weft_invoke reports it; half a document is no JSON
		}
		beats = i;
		if (weft_heartbeat(details.p, details.len)) {
			details.len = 0;
			buf_puts(&details, "cancelled at heartbeat ");
			buf_int(&details, i);
			weft_log(WEFT_LOG_INFO, details.p, details.len);
			status = failure(out, LIT("cancelled"), LIT("activity cancelled"), 0);
			break;
		}
	}
	if (status == 0) {
		buf_puts(out, "{\"beats\":");
		buf_int(out, beats);
		buf_puts(out, weft_cancelled() ? ",\"cancelled\":true}" : ",\"cancelled\":false}");
	}
	out->failed |= details.failed;
	buf_free(&details);
	return status;
}
