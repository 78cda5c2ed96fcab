// chttp is the C contender of bench/'s outbound HTTP benchmark: its post
// activity POSTs a body to a URL n times through the bare http_request
// import, reads each response's body whole, and returns how many answered
// 200. It is what bench/httpcall's raw activity does, from a guest with no
// runtime of its own, so that the benchmark tells the host's cost from the
// guest's (abi/README.md is all it is written from).
//
// Its input is not JSON, to keep a parser out of the measurement: the
// decimal n, a newline, the URL, a newline, the body.
//
//	clang --target=wasm32-wasi -mexec-model=reactor -O2 -Wall -I ../../examples/plugins/ckit -o chttp.wasm chttp.c

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft.h"

#define LIT(s) s, sizeof(s) - 1

WEFT_EXPORT("weft_abi_version") int32_t weft_abi_version(void) { return 1; }

// request is the one block weft_alloc hands out: the inputs here are a
// URL and a small body. A larger request gets 0, and the call fails with
// limit (abi/README.md).
static char request[64 << 10];

WEFT_EXPORT("weft_alloc") void *weft_alloc(size_t size) { return size <= sizeof request ? request : NULL; }

static const char manifest[] =
    "{\"activities\":[{\"name\":\"post\",\"description\":\"n, url and body, a line each -> how many of n POSTs of body to url answered 200.\"}]}";

WEFT_EXPORT("weft_manifest") int32_t weft_manifest(void) {
	weft_result(LIT(manifest));
	return WEFT_OK;
}

static int32_t bad_input(void) {
	static const char failure[] = "{\"code\":\"bad_input\",\"message\":\"want n\\nurl\\nbody\"}";
	weft_result(LIT(failure));
	return WEFT_ERROR;
}

// body is where a response's body is read; it grows to the largest seen.
static char *body;
static size_t body_cap;

static const char header[] = "Content-Type: application/json\n";

WEFT_EXPORT("weft_invoke") int32_t weft_invoke(char *ptr, size_t activity_len, size_t input_len) {
	const char *in = ptr + activity_len, *end = in + input_len;
	const char *url = memchr(in, '\n', input_len);
	const char *data = url != NULL ? memchr(url + 1, '\n', end - url - 1) : NULL;
	if (data == NULL) {
		return bad_input();
	}
	url++, data++;
	long n = strtol(in, NULL, 10);
	long ok = 0;
	for (long i = 0; i < n; i++) {
		int32_t status = weft_http_request(LIT("POST"), url, data - 1 - url, LIT(header), data, end - data);
		if (status < 0) {
			continue;
		}
		int32_t len = weft_http_response_body(body, body_cap);
		if (len > (int32_t)body_cap) {
			char *b = realloc(body, len);
			if (b == NULL) {
				continue; // not counted: its body was not read
			}
			body = b, body_cap = len;
			weft_http_response_body(body, body_cap);
		}
		if (status == 200) {
			ok++;
		}
	}
	char out[24];
	int m = snprintf(out, sizeof out, "%ld", ok);
	weft_result(out, m);
	return WEFT_OK;
}
