// json.h: the little JSON ckit needs: a growable output buffer that writes
// JSON, and a decoder that reads an object into fields the way Go's
// encoding/json reads it into a struct, so that ckit's activities accept
// and refuse exactly the inputs that the Go kit's do.

#ifndef CKIT_JSON_H
#define CKIT_JSON_H

#include <stddef.h>
#include <stdint.h>

// buf is a growable byte buffer. When an allocation fails it keeps what it
// has and sets failed; writing to a failed buf does nothing.
typedef struct {
	char *p;
	size_t len, cap;
	int failed;
} buf;

// buf_reserve makes room for n more bytes and reports whether there is.
int buf_reserve(buf *b, size_t n);
void buf_write(buf *b, const void *p, size_t n);
void buf_puts(buf *b, const char *s);
void buf_int(buf *b, int64_t v);
// buf_json_string writes the UTF-8 string s as a JSON string literal,
// escaped as Go's encoding/json escapes it.
void buf_json_string(buf *b, const char *s, size_t n);
// buf_rune writes the rune r in UTF-8.
void buf_rune(buf *b, uint32_t r);
void buf_free(buf *b);

// utf8_decode decodes the rune at the start of s (n > 0 bytes) into *r and
// returns its length. As in Go's utf8.DecodeRune, an invalid or truncated
// sequence is one byte long and decodes as U+FFFD.
size_t utf8_decode(const char *s, size_t n, uint32_t *r);

typedef enum {
	JSON_STRING,  // a Go string: a JSON string; null leaves it unchanged
	JSON_BOOL,    // a Go bool: true or false; null leaves it unchanged
	JSON_INT,     // a Go int: an integer literal within int64; null leaves it unchanged
	JSON_OPT_INT, // a Go *int: as JSON_INT, and null unsets it
} json_kind;

// json_field is one field of the struct a document is decoded into.
typedef struct {
	// name is the field's JSON name in lower-case ASCII. A member's key
	// matches it as encoding/json matches names: without regard to case.
	const char *name;
	json_kind kind;
	buf str;      // JSON_STRING: the value, UTF-8
	int boolean;  // JSON_BOOL
	int64_t integer; // JSON_INT, JSON_OPT_INT
	int set;      // the member was present (for JSON_OPT_INT: and not null)
} json_field;

// json_decode decodes the document doc into fields as encoding/json does
// into a struct: doc must be valid JSON, and null or an object; a member
// whose key matches a field sets it (the last one wins); other members are
// ignored. It returns 0, or -1 with a message in err. When memory runs out
// it sets err->failed or the failed flag of a field's str.
int json_decode(const char *doc, size_t n, json_field *fields, size_t nfields, buf *err);

#endif
