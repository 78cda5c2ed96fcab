// Package query is the pure core of instance search (docs/operations.md,
// "Search"): the filter language of `GET /v1/instances?q=…` and `weft
// instance ls --query …`, which it parses (Parse), types against the
// built-in fields and a workflow's search attributes (Query.Check),
// evaluates on one instance (Query.Eval), and turns into what a store can
// read from its indexes (Query.Plan). It reads no clock, store or network:
// a time in a query is written in it.
//
//	customer = "acme" AND status = "failed" AND created_at > "2026-11-01"
//	(amount >= 100 AND amount < 1e6) OR tags = "vip"
//	region IN ("eu", "us") AND NOT paid = true
//	id STARTS_WITH "order-" AND workflow != "billing"
//
// # The language
//
// A query is comparisons joined by AND and OR, negated by NOT and grouped
// by parentheses; NOT binds tighter than AND, which binds tighter than OR.
// Keywords (AND, OR, NOT, IN, STARTS_WITH, true, false) are matched
// without regard to case; whitespace between tokens is free.
//
//	query      = or
//	or         = and { OR and }
//	and        = unary { AND unary }
//	unary      = NOT unary | "(" or ")" | comparison
//	comparison = field op value
//	           | field [NOT] IN "(" value { "," value } ")"   (1 to 100 values)
//	           | field STARTS_WITH string
//	op         = "=" | "!=" | "<" | "<=" | ">" | ">="
//	value      = string | number | true | false
//
// A field is a name, [a-z][a-z0-9_]* of at most 64 bytes, never quoted:
// a built-in field or a search attribute. A string is double-quoted, with
// JSON's escapes (\" \\ \/ \b \f \n \r \t \uXXXX, a character above U+FFFF
// as a surrogate pair) and no raw control character; a number is written
// as in JSON (-12, 0.5, 1e6; no leading zero, no leading +, no bare
// point). A time is a string: an RFC 3339 instant ("2026-11-01T09:00:00Z",
// "2026-11-01T10:00:00+01:00") or a date ("2026-11-01", midnight UTC).
//
// The built-in fields, which every instance has: id (string), workflow
// (string), version (number), status (string, one of weft.Statuses()),
// created_at and updated_at (time). A workflow's search attributes may
// not take their names (Schema.Validate).
//
// # Types
//
// What a comparison may do depends on its field's type (Query.Check):
//
//	string     = != < <= > >= (byte-wise order), IN, NOT IN, STARTS_WITH
//	number     = != < <= > >=, IN, NOT IN
//	time       = != < <= > >= (by instant, whatever the offsets), IN, NOT IN
//	bool       = !=
//	keywords   = (the list holds the value), != (does not hold it),
//	           IN (holds one of them), NOT IN (holds none of them)
//	status     = !=, IN, NOT IN, with a status as the value
//
// A value of another type than its field's is an error ("amount is a
// number: "abc" is a string"), as are an ordering of a keyword list or a
// bool, and STARTS_WITH on anything but a string. The status is a string
// whose values are few and known, so a value that is not a status is an
// error, and ordering statuses by their spelling, or by a prefix of it,
// would mean nothing: status allows =, !=, IN and NOT IN only.
//
// # Missing fields
//
// An instance without a search attribute (its workflow does not declare
// it, or the step that sets it has not run) matches no comparison on it,
// except != and NOT IN, which it matches. So `x != v` is always `NOT x =
// v`, and `x NOT IN (…)` always `NOT x IN (…)`: a query and its NOT split
// the instances in two, with none lost. An operator who asks for
// `customer != "acme"` to cancel all but acme's instances gets those
// without a customer too. This is how Temporal answers on Elasticsearch
// (a must_not clause), and unlike SQL, where a NULL matches neither `x =
// v` nor `x != v`; to keep only instances that have the field, add a
// comparison that needs it (`customer STARTS_WITH ""` holds for any
// customer).
//
// # Bounds
//
// A query's text is at most 4096 bytes (MaxBytes), and so is its canonical
// form, so that every query prints into one that parses again; at most 64
// comparisons (MaxComparisons), nested at most 16 deep, counting each
// parenthesis and each NOT around a comparison (MaxDepth); a string value
// is at most 256 bytes once unescaped (MaxStringBytes), an IN list at most
// 100 values (MaxInValues). Each is an error at the token that crosses it.
//
// # Errors
//
// Parse and Check report the first offending token as an *Error (which
// matches ErrQuery), with its byte offset in the text, counted from 0:
//
//	status = "failed" AND custmer = "acme"
//	query: at 22 ("custmer"): unknown field; did you mean "customer"?
//
//	customer == "acme"
//	query: at 9 ("=="): unknown operator: equality is =
//
//	tags > "a"
//	query: at 5 (">"): > is not allowed on tags, a keyword list: use = (holds), != (does not hold), IN (holds one of) or NOT IN (holds none of)
//
// # Plans
//
// Plan gives the stores what they can read from an index: each field
// compared by =, IN, an ordering or STARTS_WITH in the top-level AND, with
// its comparisons merged into a set of values or an interval (a Range).
// A store scans the Range it prefers and filters what it reads with Eval;
// a query with no plan (an OR or a NOT at the top) is a full scan.
package query
