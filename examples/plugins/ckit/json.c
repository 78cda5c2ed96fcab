// json.c: see json.h. The rules that matter for ckit to behave exactly as
// the Go kit are Go's, and each is named where it is followed.

#include "json.h"

#include <stdlib.h>
#include <string.h>

// --- Output ---

int buf_reserve(buf *b, size_t n) {
	if (b->failed) {
		return 0;
	}
	if (n <= b->cap - b->len) {
		return 1;
	}
	size_t cap = b->cap ? b->cap : 64;
	while (cap - b->len < n) {
		if (cap > SIZE_MAX / 2) {
			b->failed = 1;
			return 0;
		}
		cap *= 2;
	}
	char *p = realloc(b->p, cap);
	if (p == NULL) {
		b->failed = 1;
		return 0;
	}
	b->p = p;
	b->cap = cap;
	return 1;
}

void buf_write(buf *b, const void *p, size_t n) {
	if (n > 0 && buf_reserve(b, n)) {
		memcpy(b->p + b->len, p, n);
		b->len += n;
	}
}

void buf_puts(buf *b, const char *s) { buf_write(b, s, strlen(s)); }

void buf_int(buf *b, int64_t v) {
	char tmp[24];
	size_t i = sizeof tmp;
	uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;
	do {
		tmp[--i] = (char)('0' + u % 10);
		u /= 10;
	} while (u > 0);
	if (v < 0) {
		tmp[--i] = '-';
	}
	buf_write(b, tmp + i, sizeof tmp - i);
}

void buf_rune(buf *b, uint32_t r) {
	char u[4];
	size_t n;
	if (r < 0x80) {
		u[0] = (char)r;
		n = 1;
	} else if (r < 0x800) {
		u[0] = (char)(0xC0 | r >> 6);
		u[1] = (char)(0x80 | (r & 0x3F));
		n = 2;
	} else if (r < 0x10000) {
		u[0] = (char)(0xE0 | r >> 12);
		u[1] = (char)(0x80 | (r >> 6 & 0x3F));
		u[2] = (char)(0x80 | (r & 0x3F));
		n = 3;
	} else {
		u[0] = (char)(0xF0 | r >> 18);
		u[1] = (char)(0x80 | (r >> 12 & 0x3F));
		u[2] = (char)(0x80 | (r >> 6 & 0x3F));
		u[3] = (char)(0x80 | (r & 0x3F));
		n = 4;
	}
	buf_write(b, u, n);
}

void buf_free(buf *b) {
	free(b->p);
	*b = (buf){0};
}

size_t utf8_decode(const char *str, size_t n, uint32_t *r) {
	const unsigned char *s = (const unsigned char *)str;
	size_t len;
	uint32_t v, min;
	if (s[0] < 0x80) {
		*r = s[0];
		return 1;
	} else if (s[0] >= 0xC2 && s[0] <= 0xDF) {
		len = 2, v = s[0] & 0x1F, min = 0x80;
	} else if (s[0] >= 0xE0 && s[0] <= 0xEF) {
		len = 3, v = s[0] & 0x0F, min = 0x800;
	} else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
		len = 4, v = s[0] & 0x07, min = 0x10000;
	} else {
		goto invalid;
	}
	if (n < len) {
		goto invalid;
	}
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xC0) != 0x80) {
			goto invalid;
		}
		v = v << 6 | (s[i] & 0x3F);
	}
	// Overlong forms, surrogates and values beyond Unicode are invalid.
	if (v < min || (v >= 0xD800 && v <= 0xDFFF) || v > 0x10FFFF) {
		goto invalid;
	}
	*r = v;
	return len;
invalid:
	*r = 0xFFFD;
	return 1;
}

void buf_json_string(buf *b, const char *s, size_t n) {
	static const char hex[] = "0123456789abcdef";
	buf_write(b, "\"", 1);
	size_t start = 0;
	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)s[i];
		char esc[6];
		size_t esc_len = 0, size = 1;
		if (c < 0x80) {
			// Go escapes the control characters, and <, > and & for the
			// sake of HTML.
			switch (c) {
			case '"':
			case '\\':
				esc[0] = '\\', esc[1] = (char)c, esc_len = 2;
				break;
			case '\b':
				esc[0] = '\\', esc[1] = 'b', esc_len = 2;
				break;
			case '\f':
				esc[0] = '\\', esc[1] = 'f', esc_len = 2;
				break;
			case '\n':
				esc[0] = '\\', esc[1] = 'n', esc_len = 2;
				break;
			case '\r':
				esc[0] = '\\', esc[1] = 'r', esc_len = 2;
				break;
			case '\t':
				esc[0] = '\\', esc[1] = 't', esc_len = 2;
				break;
			default:
				if (c < 0x20 || c == '<' || c == '>' || c == '&') {
					memcpy(esc, "\\u00", 4);
					esc[4] = hex[c >> 4], esc[5] = hex[c & 0xF], esc_len = 6;
				}
			}
		} else {
			// And it escapes U+2028 and U+2029, which JavaScript reads as
			// line ends, and replaces invalid UTF-8.
			uint32_t r;
			size = utf8_decode(s + i, n - i, &r);
			if (r == 0xFFFD && size == 1) {
				memcpy(esc, "\\ufffd", 6), esc_len = 6;
			} else if (r == 0x2028 || r == 0x2029) {
				memcpy(esc, "\\u202", 5), esc[5] = hex[r & 0xF], esc_len = 6;
			}
		}
		if (esc_len > 0) {
			buf_write(b, s + start, i - start);
			buf_write(b, esc, esc_len);
			start = i + size;
		}
		i += size;
	}
	buf_write(b, s + start, n - start);
	buf_write(b, "\"", 1);
}

// --- Input ---

// MAX_DEPTH is the deepest nesting encoding/json accepts.
#define MAX_DEPTH 10000

typedef struct {
	const char *s;
	size_t n, i;
} scanner;

static int peek(const scanner *sc) { return sc->i < sc->n ? (unsigned char)sc->s[sc->i] : -1; }

static int is_digit(int c) { return c >= '0' && c <= '9'; }

static void skip_space(scanner *sc) {
	while (sc->i < sc->n) {
		char c = sc->s[sc->i];
		if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
			return;
		}
		sc->i++;
	}
}

static int expect(scanner *sc, const char *word) {
	size_t k = strlen(word);
	if (sc->n - sc->i < k || memcmp(sc->s + sc->i, word, k) != 0) {
		return -1;
	}
	sc->i += k;
	return 0;
}

// scan_number scans a number and sets *integer when it has neither a
// fraction nor an exponent.
static int scan_number(scanner *sc, int *integer) {
	size_t i = sc->i, n = sc->n;
	const char *s = sc->s;
	*integer = 1;
	if (i < n && s[i] == '-') {
		i++;
	}
	if (i < n && s[i] == '0') {
		i++;
	} else if (i < n && s[i] >= '1' && s[i] <= '9') {
		while (i < n && is_digit(s[i])) {
			i++;
		}
	} else {
		return -1;
	}
	if (i < n && s[i] == '.') {
		*integer = 0;
		if (++i >= n || !is_digit(s[i])) {
			return -1;
		}
		while (i < n && is_digit(s[i])) {
			i++;
		}
	}
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		*integer = 0;
		if (++i < n && (s[i] == '+' || s[i] == '-')) {
			i++;
		}
		if (i >= n || !is_digit(s[i])) {
			return -1;
		}
		while (i < n && is_digit(s[i])) {
			i++;
		}
	}
	sc->i = i;
	return 0;
}

// hex4 reads the 4 hex digits at s.
static int hex4(const char *s, size_t n, uint32_t *r) {
	if (n < 4) {
		return -1;
	}
	*r = 0;
	for (int k = 0; k < 4; k++) {
		char c = s[k];
		uint32_t d;
		if (is_digit(c)) {
			d = (uint32_t)(c - '0');
		} else if (c >= 'a' && c <= 'f') {
			d = (uint32_t)(c - 'a' + 10);
		} else if (c >= 'A' && c <= 'F') {
			d = (uint32_t)(c - 'A' + 10);
		} else {
			return -1;
		}
		*r = *r << 4 | d;
	}
	return 0;
}

// scan_string scans the string at sc (at its opening quote) and, when out
// is not NULL, appends its value to out as Go decodes it: a lone surrogate
// escape and each byte of invalid UTF-8 become U+FFFD.
static int scan_string(scanner *sc, buf *out) {
	const char *s = sc->s;
	size_t i = sc->i + 1, n = sc->n;
	while (i < n) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"') {
			sc->i = i + 1;
			return 0;
		}
		if (c < 0x20) {
			return -1;
		}
		if (c == '\\') {
			if (++i >= n) {
				return -1;
			}
			char e = s[i++];
			uint32_t r;
			switch (e) {
			case '"':
			case '\\':
			case '/':
				r = (uint32_t)e;
				break;
			case 'b':
				r = '\b';
				break;
			case 'f':
				r = '\f';
				break;
			case 'n':
				r = '\n';
				break;
			case 'r':
				r = '\r';
				break;
			case 't':
				r = '\t';
				break;
			case 'u':
				if (hex4(s + i, n - i, &r) != 0) {
					return -1;
				}
				i += 4;
				if (r >= 0xD800 && r <= 0xDFFF) {
					uint32_t lo;
					if (r < 0xDC00 && n - i >= 6 && s[i] == '\\' && s[i + 1] == 'u' &&
					    hex4(s + i + 2, n - i - 2, &lo) == 0 && lo >= 0xDC00 && lo <= 0xDFFF) {
						r = 0x10000 + ((r - 0xD800) << 10) + (lo - 0xDC00);
						i += 6;
					} else {
						r = 0xFFFD;
					}
				}
				break;
			default:
				return -1;
			}
			if (out != NULL) {
				buf_rune(out, r);
			}
			continue;
		}
		uint32_t r;
		size_t size = utf8_decode(s + i, n - i, &r);
		if (out != NULL) {
			if (r == 0xFFFD && size == 1) {
				buf_rune(out, r);
			} else {
				buf_write(out, s + i, size);
			}
		}
		i += size;
	}
	return -1;
}

// scan_key scans an object member's key and its colon.
static int scan_key(scanner *sc, buf *key) {
	skip_space(sc);
	if (peek(sc) != '"' || scan_string(sc, key) != 0) {
		return -1;
	}
	skip_space(sc);
	if (peek(sc) != ':') {
		return -1;
	}
	sc->i++;
	return 0;
}

// skip_value scans one JSON value. It keeps the kinds of the open
// containers in a bit stack rather than recursing, so that deep nesting
// cannot overflow the small stack of a wasm program.
static int skip_value(scanner *sc) {
	unsigned char objects[MAX_DEPTH / 8 + 1]; // bit d: container d is an object
	size_t depth = 0;
	for (;;) {
		skip_space(sc);
		int c = peek(sc), integer;
		switch (c) {
		case '{':
		case '[':
			// Go counts every container, empty or not, against the limit.
			if (depth == MAX_DEPTH) {
				return -1;
			}
			sc->i++;
			skip_space(sc);
			if (peek(sc) == (c == '{' ? '}' : ']')) {
				sc->i++;
				break;
			}
			if (c == '{') {
				objects[depth / 8] |= (unsigned char)(1 << depth % 8);
			} else {
				objects[depth / 8] &= (unsigned char)~(1 << depth % 8);
			}
			depth++;
			if (c == '{' && scan_key(sc, NULL) != 0) {
				return -1;
			}
			continue;
		case '"':
			if (scan_string(sc, NULL) != 0) {
				return -1;
			}
			break;
		case 't':
			if (expect(sc, "true") != 0) {
				return -1;
			}
			break;
		case 'f':
			if (expect(sc, "false") != 0) {
				return -1;
			}
			break;
		case 'n':
			if (expect(sc, "null") != 0) {
				return -1;
			}
			break;
		default:
			if (scan_number(sc, &integer) != 0) {
				return -1;
			}
		}
		// A value ended: close the containers it ends.
		for (;;) {
			if (depth == 0) {
				return 0;
			}
			int object = objects[(depth - 1) / 8] >> (depth - 1) % 8 & 1;
			skip_space(sc);
			c = peek(sc);
			if (c == ',') {
				sc->i++;
				if (object && scan_key(sc, NULL) != 0) {
					return -1;
				}
				break;
			}
			if (c != (object ? '}' : ']')) {
				return -1;
			}
			sc->i++;
			depth--;
		}
	}
}

// fold is a rune as encoding/json compares names: ASCII letters in upper
// case, and the two other runes whose case folds to ASCII (KELVIN SIGN,
// LATIN SMALL LETTER LONG S) as the letters they fold to. It returns 0 for
// any other rune, which cannot match an ASCII name.
static uint32_t fold(uint32_t r) {
	if (r >= 'a' && r <= 'z') {
		return r - 'a' + 'A';
	}
	if (r < 0x80) {
		return r;
	}
	if (r == 0x212A) {
		return 'K';
	}
	if (r == 0x17F) {
		return 'S';
	}
	return 0;
}

static int key_matches(const buf *key, const char *name) {
	size_t i = 0;
	for (; i < key->len && *name != '\0'; name++) {
		uint32_t r;
		i += utf8_decode(key->p + i, key->len - i, &r);
		if (fold(r) == 0 || fold(r) != fold((unsigned char)*name)) {
			return 0;
		}
	}
	return i == key->len && *name == '\0';
}

static const char *kind_of(int c) {
	switch (c) {
	case '{':
		return "an object";
	case '[':
		return "an array";
	case '"':
		return "a string";
	case 't':
	case 'f':
		return "a boolean";
	case 'n':
		return "null";
	}
	return "a number";
}

// parse_int parses the integer literal s[0:n] within int64, as Go's
// strconv.ParseInt does.
static int parse_int(const char *s, size_t n, int64_t *v) {
	int neg = n > 0 && s[0] == '-';
	uint64_t u = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	for (size_t i = neg; i < n; i++) {
		uint64_t d = (uint64_t)(s[i] - '0');
		if (u > (limit - d) / 10) {
			return -1;
		}
		u = u * 10 + d;
	}
	*v = neg ? (int64_t)(0 - u) : (int64_t)u;
	return 0;
}

static int decode_field(scanner *sc, json_field *f, buf *err) {
	int c = peek(sc), integer;
	const char *want = "";
	if (c == 'n') {
		// null leaves a field alone, but unsets a pointer.
		sc->i += 4;
		if (f->kind == JSON_OPT_INT) {
			f->set = 0;
		}
		return 0;
	}
	switch (f->kind) {
	case JSON_STRING:
		want = "a string";
		if (c == '"') {
			f->str.len = 0;
			scan_string(sc, &f->str);
			f->set = 1;
			return 0;
		}
		break;
	case JSON_BOOL:
		want = "a boolean";
		if (c == 't' || c == 'f') {
			f->boolean = c == 't';
			sc->i += c == 't' ? 4 : 5;
			f->set = 1;
			return 0;
		}
		break;
	case JSON_INT:
	case JSON_OPT_INT:
		want = "an integer";
		if (c == '-' || is_digit(c)) {
			size_t start = sc->i;
			scan_number(sc, &integer);
			if (integer && parse_int(sc->s + start, sc->i - start, &f->integer) == 0) {
				f->set = 1;
				return 0;
			}
			buf_puts(err, "field \"");
			buf_puts(err, f->name);
			buf_puts(err, "\" is ");
			buf_write(err, sc->s + start, sc->i - start);
			buf_puts(err, ", not an integer within int64");
			return -1;
		}
		break;
	}
	buf_puts(err, "field \"");
	buf_puts(err, f->name);
	buf_puts(err, "\" is ");
	buf_puts(err, kind_of(c));
	buf_puts(err, ", not ");
	buf_puts(err, want);
	return -1;
}

int json_decode(const char *doc, size_t n, json_field *fields, size_t nfields, buf *err) {
	// Go checks the whole document before it decodes any of it, so a
	// syntax error anywhere wins over a type error.
	scanner sc = {doc, n, 0};
	if (skip_value(&sc) != 0 || (skip_space(&sc), sc.i != n)) {
		buf_puts(err, "not a valid JSON document");
		return -1;
	}
	sc.i = 0;
	skip_space(&sc);
	if (peek(&sc) == 'n') {
		return 0;
	}
	if (peek(&sc) != '{') {
		buf_puts(err, "the input is ");
		buf_puts(err, kind_of(peek(&sc)));
		buf_puts(err, ", not an object");
		return -1;
	}
	sc.i++;
	skip_space(&sc);
	if (peek(&sc) == '}') {
		return 0;
	}
	buf key = {0};
	int rc = 0;
	for (;;) {
		// The document is valid: the scans below cannot fail.
		key.len = 0;
		scan_key(&sc, &key);
		skip_space(&sc);
		json_field *f = NULL;
		for (size_t k = 0; k < nfields; k++) {
			if (key_matches(&key, fields[k].name)) {
				f = &fields[k];
			}
		}
		if (f == NULL) {
			skip_value(&sc);
		} else if (decode_field(&sc, f, err) != 0) {
			rc = -1;
			break;
		}
		skip_space(&sc);
		if (sc.s[sc.i++] == '}') {
			break;
		}
	}
	if (key.failed) {
		err->failed = 1;
		rc = -1;
	}
	buf_free(&key);
	return rc;
}
