// Package definition parses and validates workflow definitions and compiles
// their expressions.
//
// Parse reads YAML or JSON (JSON is YAML) into a Definition and checks what
// needs nothing else; Load also checks it against a Catalog of plugins and
// saved workflows, and reports every problem of both at once, each with its path
// (`steps[2].retry.backoff`, `steps[1].then[0].wait.key`) and, when parsed
// from text, its line and column. The decoder walks the YAML node tree
// itself instead of using a strict decoder, so that unknown fields, wrong
// types and unknown step kinds are all reported, with paths, in one pass.
//
// # Expressions
//
// A string of the form `${ expr }` is a github.com/expr-lang/expr expression
// evaluated against `input`, `vars` and, inside a foreach's `do`, the loop
// variable named by `as`; `priority`, `fairness` and `concurrency.key`,
// evaluated when an instance is created, see `input` only (an activity
// step's `concurrency.key` and `rate_limit.key` see all the step's names). A string that is exactly one
// `${ … }` (no text or whitespace around it) keeps the value's type; any
// other string containing `${ … }` is a template and yields a string in
// which each result is written as: a string as it is, null as nothing,
// numbers and booleans as in JSON, maps and lists as JSON. `$${` writes a
// literal `${`. An expression ends at the `}` that balances its `{` outside
// string literals, so map literals and strings containing `}` work. Values
// may nest expressions in maps and lists.
//
// Every expression is compiled once, when the definition is parsed, against
// the names in scope: an unknown name (a typo, or a loop variable used
// outside its loop) is a problem, not a run-time surprise. `if` must be a
// boolean literal or a single expression, checked at compile time when
// expr's type checker knows the type and at evaluation otherwise; `foreach`
// likewise must be a list.
//
// # Decisions
//
//   - Names. Workflow names and step ids follow abi.ValidName: 1 to 64
//     characters from [a-z0-9_-], starting with a letter; no dots, so names
//     are safe in URLs, lock keys and comma-joined lists. Step ids are unique
//     across the whole definition, nested steps included. Variable names
//     (`output`, `set` keys) and loop variables are identifiers
//     ([A-Za-z_][A-Za-z0-9_]*) so that `vars.name` works; loop variables may
//     not be `input`, `vars` or an expr keyword, nor hide an enclosing loop's.
//     Event names are 1 to 128 characters from letters, digits and `._-:/`.
//   - Durations are strings for time.ParseDuration ("500ms", "30s", "72h")
//     optionally led by whole days ("7d", "1d12h"; a day is 24h). A bare
//     number is refused: its unit would be a guess. Zero means "not set"
//     for timeouts. Durations are literals, except a delay's and a wait's
//     timeout, which may be computed (below).
//   - Computed time. `delay` and `wait.timeout` may be a string holding a
//     ${ } expression, compiled when parsed and evaluated when the step
//     starts (Value.EvalDuration): a string result is read as a literal
//     (and may be negative, "-2d"), a number is seconds, rounded to the
//     millisecond: a literal number's unit would be a guess, a computed
//     one's is the one JSON documents and clocks count in. A delay may
//     instead be `{until: T}`, T an RFC 3339 time with a zone offset (a
//     literal, checked when parsed, or an expression), and its long form
//     `{for: D}` is the plain `delay: D`, so that both read alike. A delay
//     already due (zero, negative, or until a time not after now) does not
//     wait; a computed wait timeout of 0 is no timeout, as the literal 0s,
//     and a negative one fails the step: a wait that timed out before it
//     began is more likely a mistake than a wish. What a computed value
//     cannot be is found when the step runs, and fails it with the code
//     "expression". The canonical form keeps literals as they always were,
//     so existing versions keep their hash; an until literal is written as
//     its instant in UTC.
//   - Activity timeouts, as in Temporal: `timeout` is start-to-close per
//     attempt, `schedule_to_close` bounds all attempts and the waits between
//     them, `heartbeat_timeout` bounds the gap between heartbeats. When set,
//     heartbeat_timeout ≤ timeout ≤ schedule_to_close. Unset ones are left to
//     the engine's defaults; with a Catalog, a heartbeat_timeout is checked
//     against the default timeout too (TimeoutDefaults), since one longer
//     than the attempt could never fire.
//   - Retry defaults (applied to every field a definition leaves out, and to
//     activity steps without `retry`): 3 attempts, 1s initial interval,
//     backoff 2, max interval 100 × the initial interval (Temporal's rule),
//     no jitter. max_attempts counts the first attempt; there is no
//     "unlimited". The model holds the effective policy.
//   - `persist` (always|never) is allowed on every step and applies when the
//     step completes; `never` cannot prevent persisting a suspension.
//   - `output` exists on activity, wait and workflow steps only; `set`
//     evaluates all its values against the variables as they were before the
//     step. `then` and `do` need at least one step, `else` may be empty,
//     `parallel` needs at least one branch, each with at least one step.
//   - foreach: `as` is required (no implicit `item`); concurrency defaults
//     to 1, i.e. sequential.
//   - wait: `event` is a literal name, `key` is required and may be an
//     expression (its result is stringified); `timeout` is optional, may be
//     computed, and when it passes the step fails with the code "timeout".
//   - Child workflows must exist in the Catalog (or be the definition
//     itself); a cycle (a → b → a, a → a, or b → c → b reached from a) is a
//     problem spelled out along the cycle. The definition being validated
//     replaces the catalog's copy of itself.
//   - YAML: one document; anchors and aliases work (bounded by MaxNodes once
//     expanded); merge keys (`<<`) are refused; map keys must be strings;
//     NaN and infinities are refused because JSON cannot hold them. YAML
//     syntax errors carry a line only (yaml.v3 does not report columns);
//     JSON syntax errors carry a line and column. A key twice in one map
//     is refused (yaml.v3 allows it in the node tree, encoding/json
//     always); ParseSaved lets the last one win, as earlier saves did.
//   - `retention` (how long a finished instance is kept) is a duration of
//     at most MaxRetention, or 0 for "forever"; a bare 0 is accepted, as
//     it has no unit to guess. Absent, Retention is nil and the host's
//     default applies, so "not set" and "forever" differ. It is in the
//     canonical form only when present, so adding the field did not change
//     the hash of the definitions saved before it existed.
//   - `priority` (1 is served first … 5 last; default 3) and `fairness`
//     (`key`, required, and `weight`, 1 to 1000, default 1) place the
//     instances in the ready queue (internal/queue/fair states the
//     order). They are decided once, when an instance is created
//     (Definition.Order), so their expressions see `input` only: naming
//     `vars` is a problem when parsed, not an empty map at run time. A
//     priority or a weight is an integer literal or a single ${ }
//     expression (a template is a string); a literal out of range is a
//     problem, and a result out of range, with a fraction or not a
//     number is an *OrderError naming the field; an expression that
//     yields null gives the default, so that `${ input.priority }` may
//     be left out of an input. A key is a string literal (an unquoted
//     number is refused: `007` would be 7) or an expression or template
//     whose result is written as a template writes it, null as "" (the
//     shared lane of workflows without fairness), a map or a list
//     refused; at most weft.MaxFairnessKey (256) bytes, checked when
//     parsed for a literal and when evaluated otherwise. Like retention,
//     they are in the canonical form only when present, and not when
//     they spell out the defaults (priority 3; key "" with weight 1).
//   - `concurrency` (`limit`, required, 1 to MaxConcurrencyLimit; `key`,
//     optional; `policy`, queue by default, cancel_newest or
//     cancel_oldest: slots.ParsePolicy) limits the instances of one key
//     that run at once. The limit is a literal, the same for every
//     instance, so that the engine applies one limit to a key whatever
//     the input; the key is decided once, when an instance is created
//     (Definition.ConcurrencyKey), by the rules of the fairness key, an
//     absent key being "", one key for all the workflow's instances. It
//     is in the canonical form only when present, with its policy spelt
//     out and a key of "" left out, as absent.
//   - An activity step's `concurrency` (`limit`, as the workflow's; `key`;
//     `policy`, queue only: the cancel policies cancel whole instances)
//     and `rate_limit` (`limit` 1 to ratelimit.MaxCount, `per` a duration
//     literal from ratelimit.MinPer to ratelimit.MaxPer, `burst` 1 to
//     ratelimit.MaxCount, default 1; `key`) limit the step's attempts:
//     running at once, and starting per period. The numbers are literals,
//     so that every attempt of a step asks for one limit; the keys, shared
//     by value with every step that names them, see the step's scope
//     (`input`, `vars`, loop variables) and are evaluated when the step
//     starts, as its input is (StepConcurrency.EvalKey, StepRateLimit.EvalKey),
//     an absent or empty one being the step's own key. Each is in the
//     canonical form only when present, with its burst spelt out and a
//     key of "" left out, as absent.
//   - `search` declares typed attributes (weft.SearchType) that operators
//     search instances by: names a query can name and does not name
//     already (internal/query's built-in fields and keywords), at most
//     weft.MaxSearchAttributes; each a literal, checked against its type
//     when parsed, or an expression or template over `input` and `vars`,
//     evaluated at every commit (Definition.SearchValues), so that an
//     attribute over vars follows the instance. A value that does not fit
//     its type is a SearchProblem, never an instance's failure: what
//     operators search by must not break what the workflow does; null is
//     absent, quietly. A string is not a number, nor a number a string:
//     the index would order "10" before "9". It is in the canonical form
//     only when present. That a name keeps its type across workflows is
//     the engine's check, against the host's registry.
//   - A problem about the whole document has the path RootPath ("$").
//
// # Versioning
//
// Canonical re-encodes the model as compact JSON with sorted keys and
// defaults filled in, and Hash is its sha256. The same definition written in
// YAML or JSON, with another key order, spacing or comments, or with
// defaults spelled out, hashes the same; any change to what runs changes it.
// Expressions are hashed as written, so reformatting the inside of a
// `${ }` makes a new version.
package definition
