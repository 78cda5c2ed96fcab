package redisstore

import "github.com/redis/go-redis/v9"

// The scripts. Every one gets the store's key prefix (with its hash tag)
// as ARGV[1] and builds its keys from it; KEYS[1] is one key of the store,
// which routes the call on a cluster (every key has the same slot). Times
// are hex strings from the Go side (hexTime): scripts compare them and
// never ask Redis for the time.
//
// A script that refuses returns {reason, ...} before its first write, so
// a refusal writes nothing; errors after the checks can only be Redis
// failing (out of memory), which the package doc discusses.

// prelude is shared by the scripts.
const prelude = `
local P = ARGV[1]
local a = 1
local function take() a = a + 1; return ARGV[a] end
local function takeN() return tonumber(take()) end
-- tlt reports whether hex time x is before y (both 16 hex digits; split
-- so that each half is exact in a double).
local function tlt(x, y)
  local xh, yh = tonumber(string.sub(x, 1, 8), 16), tonumber(string.sub(y, 1, 8), 16)
  if xh ~= yh then return xh < yh end
  return tonumber(string.sub(x, 9, 16), 16) < tonumber(string.sub(y, 9, 16), 16)
end
-- An index membership (sorted-set key, member) as one string.
local function ipair(k, m) return #k .. ":" .. k .. m end
local function unpair(s)
  local i = string.find(s, ":", 1, true)
  local n = tonumber(string.sub(s, 1, i - 1))
  return string.sub(s, i + 1, i + n), string.sub(s, i + n + 1)
end
-- The names of the plugins an instance pins, as kept in its hash's pn
-- field: each name's length, ":" and the name.
local function joinNames(names)
  local t = {}
  for i, n in ipairs(names) do t[i] = #n .. ":" .. n end
  return table.concat(t)
end
local function splitNames(s)
  local out, i = {}, 1
  while s and i <= #s do
    local j = string.find(s, ":", i, true)
    local n = tonumber(string.sub(s, i, j - 1))
    out[#out + 1] = string.sub(s, j + 1, j + n)
    i = j + n + 1
  end
  return out
end
-- indexed returns an instance's index memberships (ipair strings), which
-- follow from its hash's fields: created time, workflow, status, terminal,
-- pinned plugins and delete-after time. A commit or a delete removes
-- exactly these, so nothing else records them. There is no index of all
-- instances nor of a workflow's: those are the unions of the status
-- indexes, which a listing merges (listInstancesScript).
local function indexed(id, ct, wf, st, term, pn, da)
  local m = ct .. id
  local out = {ipair(P .. "ix:s:" .. st, m), ipair(P .. "ix:ws:" .. st .. ":" .. wf, m)}
  if not term then
    for _, n in ipairs(splitNames(pn)) do out[#out + 1] = ipair(P .. "u:" .. n, id) end
  elseif da and da ~= "" then
    out[#out + 1] = ipair(P .. "rx", da .. id)
  end
  return out
end
-- reindexSearch moves an instance's entries in the indexes of search
-- attributes (ix:a:<name>, members value .. created .. id) from those of
-- its sa field osa to those of nsa (searchField's lists of name, value).
local function reindexSearch(id, ct, osa, nsa)
  local o, n = splitNames(osa), splitNames(nsa)
  local keep, had = {}, {}
  for i = 1, #n, 2 do keep[ipair(n[i], n[i + 1])] = true end
  for i = 1, #o, 2 do
    local x = ipair(o[i], o[i + 1])
    if keep[x] then
      had[x] = true
    else
      redis.call("ZREM", P .. "ix:a:" .. o[i], o[i + 1] .. ct .. id)
    end
  end
  for i = 1, #n, 2 do
    if not had[ipair(n[i], n[i + 1])] then redis.call("ZADD", P .. "ix:a:" .. n[i], 0, n[i + 1] .. ct .. id) end
  end
end
-- tapeMember is the member of instance id's tape at field f (tapeField)
-- in its plugin's index P rp:<plugin>: the id's length, ":", the id, f.
local function tapeMember(id, f) return #id .. ":" .. id .. f end
-- tapeScore is a tape's score in its plugin's index: its recording time,
-- as Go writes a time.Time in UTC in JSON ("2030-01-02T03:04:05.123Z",
-- the fraction optional), in Unix milliseconds rounded down, as a
-- decimal string. Nil for a time in another form.
local function tapeScore(ts)
  if type(ts) ~= "string" then return nil end
  local y, mo, d, h, mi, s = string.match(ts, "^(%d%d%d%d)-(%d%d)-(%d%d)T(%d%d):(%d%d):(%d%d)")
  if not y then return nil end
  y, mo, d = tonumber(y), tonumber(mo), tonumber(d)
  local ms = 0
  local frac = string.match(ts, "^%.(%d+)", 20)
  if frac then ms = tonumber(string.sub(frac .. "00", 1, 3)) end
  -- Days since 1970-01-01 of the proleptic Gregorian date (Howard
  -- Hinnant's days_from_civil).
  if mo <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local doy = math.floor((153 * ((mo + 9) % 12) + 2) / 5) + d - 1
  local days = era * 146097 + yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy - 719468
  local sec = ((days * 24 + tonumber(h)) * 60 + tonumber(mi)) * 60 + tonumber(s)
  return string.format("%.0f", sec * 1000 + ms)
end
-- indexTapes adds to their plugins' indexes (add true) or removes from
-- them the entries of instance id's tapes, which follow from their
-- summaries (JSON of weft.TapeRecord) in P r:<id>. A summary that does not
-- decode, or has no plugin, has no entry.
local function indexTapes(id, add)
  local kv = redis.call("HGETALL", P .. "r:" .. id)
  for i = 1, #kv, 2 do
    local ok, rec = pcall(cjson.decode, kv[i + 1])
    if ok and type(rec) == "table" and type(rec.plugin) == "string" and rec.plugin ~= "" then
      local k, m = P .. "rp:" .. rec.plugin, tapeMember(id, kv[i])
      if not add then
        redis.call("ZREM", k, m)
      else
        local score = tapeScore(rec.recorded_at)
        if score then redis.call("ZADD", k, score, m) end
      end
    end
  end
end
-- removeInstance deletes instance id: its keys (its tapes' too), its
-- lease and its entries in every index (its tapes' in their plugins'),
-- which follow from its hash's fields ws, ct, wf, st, term, pn, da and sa
-- (as HMGET returns them, in this order) and its tapes' summaries.
-- DeleteInstance (deleteScript) and the move's drop (moveDropScript)
-- share it, so that both remove the same.
local function removeInstance(id, ws, ct, wf, st, term, pn, da, sa)
  redis.call("ZREM", P .. "lz", id)
  redis.call("HDEL", P .. "l", id)
  if ws and ws ~= "" then redis.call("ZREM", P .. "mw", ws .. id) end
  for _, x in ipairs(indexed(id, ct, wf, st, term == "1", pn, da)) do
    local k, m = unpair(x)
    redis.call("ZREM", k, m)
  end
  if sa then reindexSearch(id, ct, sa, "") end
  for _, m in ipairs(redis.call("SMEMBERS", P .. "b:" .. id)) do redis.call("ZREM", P .. "bk", m) end
  for _, m in ipairs(redis.call("SMEMBERS", P .. "t:" .. id)) do redis.call("ZREM", P .. "due", m) end
  redis.call("DEL", P .. "i:" .. id, P .. "b:" .. id, P .. "t:" .. id, P .. "h:" .. id, P .. "m:" .. id, P .. "e:" .. id)
  indexTapes(id, false)
  -- The tapes, whose bytes may be large: freed off Redis's main thread.
  redis.call("UNLINK", P .. "r:" .. id, P .. "a:" .. id)
end
-- A lease as kept in the l hash: its expiry (16 hex digits), "1" if the
-- instance is terminal else "0", then owner(node, boot).
local function owner(node, boot) return #boot .. ":" .. boot .. node end
-- usec is hex time x in whole microseconds, rounded up (math.ceil) or
-- down (math.floor), as a decimal string: the scores of the lease index.
-- The microseconds are exact within 285 years of 1970 (2^53), and a score
-- is never a number that Lua would print in exponent form.
local function usec(x, round)
  local hi = tonumber(string.sub(x, 1, 8), 16) - 2147483648
  -- nanoseconds = hi * 2^32 + lo, and 2^32 = 4294967 * 1000 + 296
  local c = hi * 296 + tonumber(string.sub(x, 9, 16), 16)
  return string.format("%.0f", hi * 4294967 + round(c / 1000))
end
local function lease(le, term, node, boot) return le .. (term and "1" or "0") .. owner(node, boot) end
-- unlease returns node, boot, expiry and terminal of a lease value, or
-- "", "", "", false for none.
local function unlease(v)
  if not v then return "", "", "", false end
  local i = string.find(v, ":", 18, true)
  local n = tonumber(string.sub(v, 18, i - 1))
  return string.sub(v, i + n + 1), string.sub(v, i + 1, i + n), string.sub(v, 1, 16), string.sub(v, 17, 17) == "1"
end
-- bumpGeneration sets the catalog's generation (cg) to a new one, ordered
-- after every one before it: the counter cgn as 15 digits, "." and r (a
-- random token from Go, newGeneration). A partition compares only the
-- order (genOrder): see role.go.
local function bumpGeneration(r)
  local g = string.format("%015.0f", redis.call("INCR", P .. "cgn")) .. "." .. r
  redis.call("SET", P .. "cg", g)
  return g
end
-- genOrder is a generation's counter: 0 for one without (a store's first
-- generation, which Open sets at random, or one of a build before orders).
local function genOrder(g)
  local i = string.find(g or "", ".", 1, true)
  if not i then return 0 end
  return tonumber(string.sub(g, 1, i - 1)) or 0
end
-- outboxMode, when a script sets it (a store of roleCatalog, which holds
-- no instance), makes writeMessage write the message into the outbox, for
-- the router to relay to the target's partition (outbox.go).
local outboxMode = false
-- outboxWrite records a message for an instance of another store in the
-- outbox: P ob holds entry id -> now .. len(target) ":" target
-- len(mid) ":" mid doc, and P obx the entries by (time, id). It returns
-- the entry's id, unique within the store (the counter obseq).
local function outboxWrite(target, mid, doc, now)
  local eid = string.format("%.0f", redis.call("INCR", P .. "obseq"))
  redis.call("HSET", P .. "ob", eid, now .. #target .. ":" .. target .. #mid .. ":" .. mid .. doc)
  redis.call("ZADD", P .. "obx", 0, now .. eid)
  return eid
end
-- writeMessage puts a message into an existing instance's inbox unless it
-- holds the id; it reports whether it wrote. An inbox that was empty starts
-- waiting at now (the instance's "ws" field and the mw index). In
-- outboxMode it writes the message into the outbox instead, and reports
-- true: the router has checked that the target exists.
local function writeMessage(target, mid, doc, now)
  if outboxMode then
    outboxWrite(target, mid, doc, now)
    return true
  end
  local ik = P .. "i:" .. target
  if redis.call("EXISTS", ik) == 0 then return false end
  local mk = P .. "m:" .. target
  if redis.call("HEXISTS", mk, mid) == 1 then return false end
  local seq = redis.call("INCR", P .. "mseq")
  redis.call("HSET", mk, mid, seq .. "|" .. doc)
  local ws = redis.call("HGET", ik, "ws")
  if not ws or ws == "" then
    redis.call("HSET", ik, "ws", now)
    redis.call("ZADD", P .. "mw", 0, now .. target)
  end
  return true
end
`

func script(body string) *redis.Script { return redis.NewScript(prelude + body) }

// commitScript is Commit (commitTo): every check, then every write. ARGV
// after the prefix: id, rev, fence, now, doc, state, status, terminal,
// workflow, created, lease node, boot, expiry, delivered stimulus,
// outcome, its forget time, replace bookmarks, replace timers, delete
// after ("" for none), updated at, drains, catalog generation ("" for
// none), search attributes (the hash's field sa: searchField; "" for
// none), the store's role (role.String()), which sent messages are for
// another store ("1" or "0" per message, "" for all local), the delivered
// marker's lifetime in milliseconds; then counted lists:
// pins (name, version), history events, bookmark members, timer members,
// consumed ids, sent messages (target, id, doc).
//
// In a partition (role "partition") three things differ, because the
// catalog and the stimuli are in another store (role.go): the catalog
// generation is compared by order, not equality, and raises the
// partition's; the pins are not checked; and a delivered stimulus is not
// consumed here (the router reserved it in the catalog) but leaves a
// marker, sdl:<sid> holding the outcome, that outlives the commit by the
// retention, so that the router can confirm the reservation after a crash.
// In every role, a message flagged as for another store goes into the
// outbox (outboxWrite), and the answer lists those entries' ids:
// {"ok", rev, eid...}.
var commitScript = script(`
local id, grev, fence, now = take(), take(), take(), take()
local doc, state, status, terminal, wf, created = take(), take(), take(), take() == "1", take(), take()
local ln, lb, le = take(), take(), take()
local sid, outcome, forget = take(), take(), take()
local replaceBm, replaceTm = take() == "1", take() == "1"
local deleteAfter, ut, drains, catalog, sa = take(), take(), take() == "1", take(), take()
local part, remote, markerMs = take() == "partition", take(), take()
local pins = {}
for i = 1, takeN() do pins[i] = {take(), take()} end
local hist = {}
for i = 1, takeN() do hist[i] = take() end
local bms = {}
for i = 1, takeN() do bms[i] = take() end
local tms = {}
for i = 1, takeN() do tms[i] = take() end
local consumed = {}
for i = 1, takeN() do consumed[i] = take() end
local sends = {}
for i = 1, takeN() do sends[i] = {take(), take(), take()} end

local ik = P .. "i:" .. id
local old = redis.call("HMGET", ik, "rev", "fence", "ct", "term", "lh", "st", "wf", "pn", "da", "ws", "hb", "sa")
local exists = old[1] ~= false
local oln, olb, ole = "", "", ""
if old[5] == "1" then oln, olb, ole = unlease(redis.call("HGET", P .. "l", id)) end
if grev == "0" then
  if exists then return {"exists", old[1], old[2]} end
else
  if not exists then return {"notfound"} end
  if tonumber(fence) < tonumber(old[2]) then return {"fenced", old[1], old[2]} end
  if grev ~= old[1] then return {"conflict", old[1], old[2]} end
end
-- A create from cached catalog reads: the catalog must be as it was read.
-- A partition's cg is a copy that is only ever raised: a create that read
-- an older catalog than the partition holds is refused (with the
-- partition's generation, for the router), and one that read a newer one
-- raises the partition's to it (raiseCg), the copy it missed.
local raiseCg = false
if catalog ~= "" then
  local cg = redis.call("GET", P .. "cg") or ""
  if part then
    if genOrder(cg) > genOrder(catalog) then return {"catalog", cg} end
    raiseCg = genOrder(catalog) > genOrder(cg)
  elseif cg ~= catalog then
    return {"catalog"}
  end
end
local sk, stim
-- In a partition, sid names the marker of this reservation of the
-- stimulus (reservationMarker): if it is there, the sweep settled the
-- reservation as released (settleMarkerScript), or this very commit ran
-- already: either way it is not this commit's to consume.
if sid ~= "" and part and redis.call("EXISTS", P .. "sdl:" .. sid) == 1 then return {"notqueued"} end
if sid ~= "" and not part then
  sk = P .. "s:" .. sid
  stim = redis.call("HMGET", sk, "state", "ex", "qm")
  if stim[1] ~= "queued" or not tlt(now, stim[2]) then return {"notqueued"} end
end
-- An inbox holds messages exactly while its instance's ws field is set
-- (writeMessage sets it, the commit that consumes the last one clears it).
if drains and exists and old[10] and old[10] ~= "" then
  -- Refused when the inbox holds a message the commit does not consume.
  local mk, have, seen = P .. "m:" .. id, 0, {}
  local n = redis.call("HLEN", mk)
  for _, mid in ipairs(consumed) do
    if n > have and not seen[mid] and redis.call("HEXISTS", mk, mid) == 1 then have = have + 1 end
    seen[mid] = true
  end
  if n > have then return {"inbox", old[1], old[2]} end
end
-- The pins of a create checked against the catalog's generation exist
-- (in a partition they are in the catalog: DeletePlugin fences the
-- partitions instead).
if not terminal and catalog == "" and not part then
  for _, p in ipairs(pins) do
    if redis.call("HEXISTS", P .. "p:" .. p[1], p[2]) == 0 then return {"noplugin", p[1], p[2]} end
  end
end

-- Accepted: write.
local rev = 1
local ct = created
if exists then
  rev = tonumber(old[1]) + 1
  ct = old[3]
  -- The owner's commit never shortens a renewal made after it read.
  if ln ~= "" and ln == oln and lb == olb and ole ~= "" and tlt(le, ole) then le = ole end
end
local revs = string.format("%d", rev)
local names = {}
for i, p in ipairs(pins) do names[i] = p[1] end
local pn = joinNames(names)
local fields = {"doc", doc, "rev", revs, "fence", fence, "ct", ct, "ut", ut,
  "st", status, "wf", wf, "term", terminal and "1" or "0", "lh", ln ~= "" and "1" or "0",
  "pn", pn, "da", deleteAfter}
if state ~= "" then
  fields[#fields + 1] = "state"
  fields[#fields + 1] = state
end
-- Search attributes: nothing to do when they are what the instance
-- indexed (most instances have none and had none).
local osa = old[12] or ""
if sa ~= osa then
  reindexSearch(id, ct, osa, sa)
  if sa ~= "" then
    fields[#fields + 1] = "sa"
    fields[#fields + 1] = sa
  else
    redis.call("HDEL", ik, "sa")
  end
end
redis.call("HSET", ik, unpack(fields))
if ln ~= "" then
  redis.call("HSET", P .. "l", id, lease(le, terminal, ln, lb))
elseif oln ~= "" then
  redis.call("HDEL", P .. "l", id)
end
if state == "" and exists then redis.call("HDEL", ik, "state") end

local new = indexed(id, ct, wf, status, terminal, pn, deleteAfter)
local had = {}
if exists then
  local keep = {}
  for _, x in ipairs(new) do keep[x] = true end
  for _, x in ipairs(indexed(id, ct, old[7], old[6], old[4] == "1", old[8], old[9])) do
    if keep[x] then
      had[x] = true
    else
      local k, m = unpair(x)
      redis.call("ZREM", k, m)
    end
  end
end
for _, x in ipairs(new) do
  if not had[x] then
    local k, m = unpair(x)
    redis.call("ZADD", k, 0, m)
  end
end
-- The lease index follows from the lease and the term.
if not terminal and ln ~= "" then
  redis.call("ZADD", P .. "lz", usec(le, math.ceil), id)
elseif exists and oln ~= "" and old[4] ~= "1" then
  redis.call("ZREM", P .. "lz", id)
end

local hk = P .. "h:" .. id
-- One RPUSH per 500 events rather than one per event (unpack's limit).
for i = 1, #hist, 500 do redis.call("RPUSH", hk, unpack(hist, i, math.min(i + 499, #hist))) end
if replaceBm then
  local bk = P .. "b:" .. id
  for _, m in ipairs(redis.call("SMEMBERS", bk)) do redis.call("ZREM", P .. "bk", m) end
  redis.call("DEL", bk)
  for _, m in ipairs(bms) do
    redis.call("ZADD", P .. "bk", 0, m)
    redis.call("SADD", bk, m)
  end
end
if replaceTm then
  local tk = P .. "t:" .. id
  for _, m in ipairs(redis.call("SMEMBERS", tk)) do redis.call("ZREM", P .. "due", m) end
  redis.call("DEL", tk)
  for _, m in ipairs(tms) do
    redis.call("ZADD", P .. "due", 0, m)
    redis.call("SADD", tk, m)
  end
end
if raiseCg then redis.call("SET", P .. "cg", catalog) end
if sid ~= "" and part then
  redis.call("SET", P .. "sdl:" .. sid, outcome, "PX", markerMs)
elseif sid ~= "" then
  redis.call("ZREM", P .. "sq", stim[3])
  redis.call("ZREM", P .. "sx", stim[2] .. sid)
  if tlt(forget, stim[2]) then forget = stim[2] end
  redis.call("HSET", sk, "state", "delivered", "set", now, "to", id, "out", outcome)
  redis.call("HDEL", sk, "qm")
  redis.call("ZADD", P .. "sf", 0, forget .. sid)
end
local mk = P .. "m:" .. id
for _, mid in ipairs(consumed) do redis.call("HDEL", mk, mid) end
if #consumed > 0 then
  -- The inbox's wait restarts now, or ends with its last message.
  local ws = old[10]
  if ws and ws ~= "" then redis.call("ZREM", P .. "mw", ws .. id) end
  if redis.call("HLEN", mk) > 0 then
    redis.call("HSET", ik, "ws", now)
    redis.call("ZADD", P .. "mw", 0, now .. id)
  else
    redis.call("HDEL", ik, "ws")
  end
end
-- Heartbeats are stored only under a lease: an instance that never had
-- one (lh) nor marked them (hb; older builds did not) has none.
if terminal and (old[11] == "1" or old[5] == "1") then redis.call("DEL", P .. "e:" .. id) end
local res = {"ok", revs}
for i, m in ipairs(sends) do
  if string.sub(remote, i, i) == "1" then
    res[#res + 1] = outboxWrite(m[1], m[2], m[3], now)
  else
    writeMessage(m[1], m[2], m[3], now)
  end
end
return res
`)

// deleteScript is DeleteInstance. ARGV: id, fence.
var deleteScript = script(`
local id, fence = take(), take()
local ik = P .. "i:" .. id
local old = redis.call("HMGET", ik, "rev", "fence", "ws", "ct", "wf", "st", "term", "pn", "da", "sa")
if old[1] == false then return {"notfound"} end
if tonumber(fence) < tonumber(old[2]) then return {"fenced", old[1], old[2]} end
removeInstance(id, unpack(old, 3, 10))
return {"ok"}
`)

// renewScript is RenewLeases: one call per batch. ARGV: node, boot, now,
// expiry; counted ids; counted heartbeats (id, token, doc).
var renewScript = script(`
local node, boot, now, exp = take(), take(), take(), take()
local ids = {}
for i = 1, takeN() do ids[i] = take() end
local beats = {}
for i = 1, takeN() do beats[i] = {take(), take(), take()} end
-- held reports whether lease value v is held by node and boot on a live
-- instance, and unexpired (checked only when some lease in the index may
-- have expired by now: usually none has, and the check then costs nothing).
local tail = "0" .. owner(node, boot)
local mayExpire = #redis.call("ZRANGEBYSCORE", P .. "lz", "-inf", usec(now, math.ceil), "LIMIT", 0, 1) > 0
local function held(v)
  if not v or #v ~= 16 + #tail or string.find(v, tail, 17, true) ~= 17 then return false end
  return not mayExpire or tlt(now, string.sub(v, 1, 16))
end
-- Heartbeats first: they see the leases as they were before this renewal.
for _, b in ipairs(beats) do
  -- A new attempt's first heartbeat marks the instance (hb), so that the
  -- commit that ends it deletes e: only when there is one.
  if held(redis.call("HGET", P .. "l", b[1])) and redis.call("HSET", P .. "e:" .. b[1], b[2], b[3]) == 1 then
    redis.call("HSET", P .. "i:" .. b[1], "hb", "1")
  end
end
-- Every read and write is one command per chunk of ids, not one per id,
-- and the index's members are the ids: a renewal makes no string.
local lost = {}
if #ids > 0 then
  local nv, score = exp .. tail, usec(exp, math.ceil)
  -- Chunks of 2,000: unpack's limit is 7,999 values.
  for i = 1, #ids, 2000 do
    local got = redis.call("HMGET", P .. "l", unpack(ids, i, math.min(i + 1999, #ids)))
    local scores, vals = {}, {}
    for j = 1, #got do
      local id = ids[i + j - 1]
      if held(got[j]) then
        scores[#scores + 1] = score
        scores[#scores + 1] = id
        vals[#vals + 1] = id
        vals[#vals + 1] = nv
      else
        lost[#lost + 1] = i + j - 1
      end
    end
    if #vals > 0 then
      redis.call("ZADD", P .. "lz", unpack(scores))
      redis.call("HSET", P .. "l", unpack(vals))
    end
  end
end
return lost
`)

// getInstanceScript is GetInstance of an instance with a lease. ARGV: id.
// It returns the values of instanceFields, then the lease, the state and
// ws (the inbox's wait).
var getInstanceScript = script(`
local id = take()
local f = redis.call("HMGET", P .. "i:" .. id, "doc", "rev", "fence", "ct", "ut", "lh", "state", "ws")
f[6] = redis.call("HGET", P .. "l", id)
return f
`)

// listInstancesScript reads a page of the union of instance indexes (one,
// or the status indexes (one per status) an instance is in exactly one of), merging
// their pages in byte order (Lua's < on strings follows the server's
// locale). ARGV after the prefix: index count, the index keys (without
// prefix), min, max, count, "1" for the newest first. It returns member,
// then the values of instanceFields and the lease, per instance.
var listInstancesScript = script(`
local keys = {}
for i = 1, takeN() do keys[i] = P .. take() end
local min, max, n, rev = take(), take(), takeN(), take() == "1"
-- mlt reports whether member x sorts before y in byte order, the order
-- of ZRANGEBYLEX.
local function mlt(x, y)
  for i = 1, math.min(#x, #y) do
    local bx, by = string.byte(x, i), string.byte(y, i)
    if bx ~= by then return bx < by end
  end
  return #x < #y
end
local pages, at = {}, {}
for i, k in ipairs(keys) do
  if rev then
    pages[i] = redis.call("ZREVRANGEBYLEX", k, max, min, "LIMIT", 0, n)
  else
    pages[i] = redis.call("ZRANGEBYLEX", k, min, max, "LIMIT", 0, n)
  end
  at[i] = 1
end
local out = {}
for _ = 1, n do
  -- The first head in the listing's order (members differ, so the
  -- newest first is "not before").
  local best, bm
  for i = 1, #keys do
    local m = pages[i][at[i]]
    if m and (not bm or mlt(m, bm) ~= rev) then best, bm = i, m end
  end
  if not best then break end
  at[best] = at[best] + 1
  local id = string.sub(bm, 17)
  local f = redis.call("HMGET", P .. "i:" .. id, "doc", "rev", "fence", "ct", "ut", "lh")
  if table.remove(f) == "1" then f[#f + 1] = redis.call("HGET", P .. "l", id) end
  out[#out + 1] = bm
  out[#out + 1] = f
end
return out
`)

// searchScript reads a filtered listing's part of the index of a search
// attribute (listSearch). ARGV after the prefix: the index key (without
// prefix), the values' width (0: tuple-encoded), "1" for a keywords
// attribute, "1" for the newest first, workflow, status, created from
// and before (times; "" for any), how many entries to read at most, how
// many instances to return at most, the member to start after ("" for
// the start), then the counted intervals of the range (min, max: the
// ZRANGEBYLEX bounds, ascending). It returns how many entries it read,
// the last one ("" for none), "1" when it read to the end of the range,
// then member and the values of instanceFields and the lease per instance
// the filters accept.
var searchScript = script(`
local key, width, kw, rev = P .. take(), takeN(), take() == "1", take() == "1"
local wf, st, ctFrom, ctBefore = take(), take(), take(), take()
local n, want, after = takeN(), takeN(), take()
local segs = {}
for i = 1, takeN() do segs[i] = {take(), take()} end
-- Byte order, the order of ZRANGEBYLEX (Lua's < follows the locale).
local function mlt(x, y)
  for i = 1, math.min(#x, #y) do
    local bx, by = string.byte(x, i), string.byte(y, i)
    if bx ~= by then return bx < by end
  end
  return #x < #y
end
-- Whether member m is above a ZRANGEBYLEX min, and below a max.
local function above(m, b)
  if b == "-" then return true elseif b == "+" then return false end
  local x = string.sub(b, 2)
  if string.sub(b, 1, 1) == "[" then return not mlt(m, x) end
  return mlt(x, m)
end
local function below(m, b)
  if b == "+" then return true elseif b == "-" then return false end
  local x = string.sub(b, 2)
  if string.sub(b, 1, 1) == "[" then return not mlt(x, m) end
  return mlt(m, x)
end
local function inRange(m)
  for _, sg in ipairs(segs) do
    if above(m, sg[1]) and below(m, sg[2]) then return true end
  end
  return false
end
-- The length of the value at the front of member m.
local function vlen(m)
  if width > 0 then return width end
  local i = string.find(m, "\0\1", 1, true)
  return i and i + 1 or #m
end
-- listedBefore reports whether the instance of member m (value, then
-- created and id), whose sa field is sa, holds another keyword that is in
-- the range and comes before m in the walk: it was listed there.
local function listedBefore(m, sa)
  local v = vlen(m)
  local val, tail = string.sub(m, 1, v), string.sub(m, v + 1)
  local name = string.sub(key, #P + 6)
  local e = splitNames(sa)
  for i = 1, #e, 2 do
    if e[i] == name and e[i + 1] ~= val then
      local earlier
      if rev then earlier = mlt(val, e[i + 1]) else earlier = mlt(e[i + 1], val) end
      if earlier and inRange(e[i + 1] .. tail) then return true end
    end
  end
  return false
end
local read, found, last, out = 0, 0, "", {}
-- walk reads one interval from after the cursor; it returns true when the
-- listing must stop (enough read or found).
local function walk(lo, hi)
  if after ~= "" then
    if rev then
      if not above(after, lo) then return false end
      if below(after, hi) then hi = "(" .. after end
    else
      if not below(after, hi) then return false end
      if above(after, lo) then lo = "(" .. after end
    end
  end
  while true do
    local chunk = math.min(n - read, 256)
    local ms
    if rev then
      ms = redis.call("ZREVRANGEBYLEX", key, hi, lo, "LIMIT", 0, chunk)
    else
      ms = redis.call("ZRANGEBYLEX", key, lo, hi, "LIMIT", 0, chunk)
    end
    for _, m in ipairs(ms) do
      read = read + 1
      last = m
      local vl = vlen(m)
      local id, ct = string.sub(m, vl + 17), string.sub(m, vl + 1, vl + 16)
      local ok = (ctFrom == "" or not tlt(ct, ctFrom)) and (ctBefore == "" or tlt(ct, ctBefore))
      -- The fields the filters read first, when there are filters: most
      -- entries of a selective query are rejected without their record.
      local ik = P .. "i:" .. id
      if ok and (wf ~= "" or st ~= "" or kw) then
        local g = redis.call("HMGET", ik, "wf", "st", "sa")
        ok = g[1] and (wf == "" or g[1] == wf) and (st == "" or g[2] == st) and not (kw and g[3] and listedBefore(m, g[3]))
      end
      local f
      if ok then
        f = redis.call("HMGET", ik, "doc", "rev", "fence", "ct", "ut", "lh")
        ok = f[1]
      end
      if ok then
        local v = {f[1], f[2], f[3], f[4], f[5]}
        if f[6] == "1" then v[6] = redis.call("HGET", P .. "l", id) end
        out[#out + 1] = m
        out[#out + 1] = v
        found = found + 1
        if found >= want then return true end
      end
      if read >= n then return true end
    end
    if #ms < chunk then return false end
    if rev then hi = "(" .. last else lo = "(" .. last end
  end
end
local stopped = false
local first, final, step = 1, #segs, 1
if rev then first, final, step = #segs, 1, -1 end
for i = first, final, step do
  if walk(segs[i][1], segs[i][2]) then
    stopped = true
    break
  end
end
local res = {read, last, stopped and "0" or "1"}
for _, x in ipairs(out) do res[#res + 1] = x end
return res
`)

// registerSearchScript is RegisterSearchAttributes: the registry sr maps
// a name to its type, ":" and the workflow that registered it. ARGV:
// workflow, counted (name, type). It refuses the whole call with
// {"conflict", name, registration} at the first name registered with
// another type.
var registerSearchScript = script(`
local wf = take()
local attrs = {}
for i = 1, takeN() do attrs[i] = {take(), take()} end
for _, x in ipairs(attrs) do
  local reg = redis.call("HGET", P .. "sr", x[1])
  if reg then
    local i = string.find(reg, ":", 1, true)
    if string.sub(reg, 1, i - 1) ~= x[2] then return {"conflict", x[1], reg} end
  end
end
for _, x in ipairs(attrs) do redis.call("HSETNX", P .. "sr", x[1], x[2] .. ":" .. wf) end
return {"ok"}
`)

// enqueueScript is EnqueueStimulus. ARGV: id, doc, expiry, queue prefix.
var enqueueScript = script(`
local id, doc, ex, qp = take(), take(), take(), take()
local sk = P .. "s:" .. id
if redis.call("EXISTS", sk) == 1 then return {"exists", redis.call("HGETALL", sk)} end
local seq = redis.call("INCR", P .. "sseq")
local qm = qp .. string.format("%020d", seq) .. id
redis.call("HSET", sk, "doc", doc, "state", "queued", "ex", ex, "qm", qm)
redis.call("ZADD", P .. "sq", 0, qm)
redis.call("ZADD", P .. "sx", 0, ex .. id)
return {"ok"}
`)

// deliverScript is Deliver. ARGV: stimulus id ("" for none), doc, expiry,
// outcome, now, forget time; counted messages (target, id, doc).
var deliverScript = script(`
local sid, doc, ex, outcome, now, forget = take(), take(), take(), take(), take(), take()
local msgs = {}
for i = 1, takeN() do msgs[i] = {take(), take(), take()} end
local sk = P .. "s:" .. sid
if sid ~= "" and redis.call("EXISTS", sk) == 1 then return {"exists", redis.call("HGETALL", sk)} end
local first = ""
for _, m in ipairs(msgs) do
  if writeMessage(m[1], m[2], m[3], now) and first == "" then first = m[1] end
end
if sid ~= "" then
  if tlt(forget, ex) then forget = ex end
  redis.call("HSET", sk, "doc", doc, "state", "delivered", "ex", ex, "set", now, "to", first, "out", outcome)
  redis.call("ZADD", P .. "sf", 0, forget .. sid)
end
return {"ok"}
`)

// pendingScript reads the queue of one (name, key). ARGV: queue prefix,
// its end. It returns the fields of each queued stimulus.
var pendingScript = script(`
local qp, qe = take(), take()
local out = {}
for _, m in ipairs(redis.call("ZRANGEBYLEX", P .. "sq", "[" .. qp, "(" .. qe)) do
  out[#out + 1] = redis.call("HGETALL", P .. "s:" .. string.sub(m, #qp + 21))
end
return out
`)

// expireScript is ExpireStimuli. ARGV: now, the ZRANGEBYLEX bound of
// the times not after now (upTo), limit,
// the forget time of what dies now.
var expireScript = script(`
local now, bound, limit, forget = take(), take(), takeN(), take()
local dead = {}
for _, m in ipairs(redis.call("ZRANGEBYLEX", P .. "sx", "-", bound, "LIMIT", 0, limit)) do
  local sid = string.sub(m, 17)
  local sk = P .. "s:" .. sid
  redis.call("ZREM", P .. "sq", redis.call("HGET", sk, "qm"))
  redis.call("ZREM", P .. "sx", m)
  redis.call("HSET", sk, "state", "dead", "set", now)
  redis.call("HDEL", sk, "qm")
  redis.call("ZADD", P .. "sd", 0, now .. sid)
  redis.call("ZADD", P .. "sf", 0, forget .. sid)
  dead[#dead + 1] = redis.call("HGETALL", sk)
end
for _, m in ipairs(redis.call("ZRANGEBYLEX", P .. "sf", "-", bound, "LIMIT", 0, limit)) do
  local sid = string.sub(m, 17)
  local sk = P .. "s:" .. sid
  local f = redis.call("HMGET", sk, "state", "set")
  if f[1] == "dead" then redis.call("ZREM", P .. "sd", f[2] .. sid) end
  redis.call("DEL", sk)
  redis.call("ZREM", P .. "sf", m)
end
return dead
`)

// stimulusPageScript reads a page of a stimulus index of (time, id)
// members: "sd" (dead letters) or "sx" (queued, by expiry). ARGV: index
// key (without prefix), min, count. It returns member, fields per stimulus.
var stimulusPageScript = script(`
local index, min, n = take(), take(), takeN()
local out = {}
for _, m in ipairs(redis.call("ZRANGEBYLEX", P .. index, min, "+", "LIMIT", 0, n)) do
  out[#out + 1] = m
  out[#out + 1] = redis.call("HGETALL", P .. "s:" .. string.sub(m, 17))
end
return out
`)

// The scripts that change the catalog take a random token as their last
// ARGV and set cg to a new generation made of it with the change
// (bumpGeneration, catalogcache.go); the reads the cache fills answer the
// generation they read in.

// putDefinitionScript is PutDefinition. ARGV: name, hash, doc, generation.
var putDefinitionScript = script(`
local name, hash, doc = take(), take(), take()
local dk = P .. "d:" .. name
local latest = redis.call("HGET", P .. "dl", name)
if latest and redis.call("HGET", dk, "h:" .. latest) == hash then return {latest, "0"} end
local seq = tonumber(redis.call("HGET", P .. "dseq", name) or "0")
local v = string.format("%d", math.max(seq, tonumber(latest or "0")) + 1)
redis.call("HSET", dk, "v:" .. v, doc, "h:" .. v, hash)
redis.call("HSET", P .. "dl", name, v)
redis.call("HSET", P .. "dseq", name, v)
redis.call("ZADD", P .. "dn", 0, name)
bumpGeneration(ARGV[#ARGV])
return {v, "1"}
`)

// getDefinitionScript reads a version (0: the latest). ARGV: name,
// version. It returns {version, doc, generation} or {}.
var getDefinitionScript = script(`
local name, v = take(), take()
if v == "0" then
  v = redis.call("HGET", P .. "dl", name)
  if not v then return {} end
end
local doc = redis.call("HGET", P .. "d:" .. name, "v:" .. v)
if not doc then return {} end
return {v, doc, redis.call("GET", P .. "cg") or ""}
`)

// listDefinitionsScript reads a page of latest definitions. ARGV: min,
// count. It returns name, version, doc per definition.
var listDefinitionsScript = script(`
local min, n = take(), takeN()
local out = {}
for _, name in ipairs(redis.call("ZRANGEBYLEX", P .. "dn", min, "+", "LIMIT", 0, n)) do
  local v = redis.call("HGET", P .. "dl", name)
  out[#out + 1] = name
  out[#out + 1] = v
  out[#out + 1] = redis.call("HGET", P .. "d:" .. name, "v:" .. v)
end
return out
`)

// listDefinitionVersionsScript reads every version kept of a definition.
// ARGV: name. It returns version, doc per version, in no order, or {}.
var listDefinitionVersionsScript = script(`
local name = take()
local out = {}
local all = redis.call("HGETALL", P .. "d:" .. name)
for i = 1, #all, 2 do
  if string.sub(all[i], 1, 2) == "v:" then
    out[#out + 1] = string.sub(all[i], 3)
    out[#out + 1] = all[i + 1]
  end
end
return out
`)

// deleteDefinitionScript is DeleteDefinition; dseq keeps the last
// version so that versions are never reused. ARGV: name, generation.
var deleteDefinitionScript = script(`
local name = take()
if redis.call("HEXISTS", P .. "dl", name) == 0 then return {"notfound"} end
redis.call("DEL", P .. "d:" .. name)
redis.call("HDEL", P .. "dl", name)
redis.call("ZREM", P .. "dn", name)
bumpGeneration(ARGV[#ARGV])
return {"ok"}
`)

// putPluginScript is PutPlugin: p:<name> maps versions to records, and
// o:<name> orders them by when each became current (a store-wide
// counter). ARGV: name, version, record, generation.
var putPluginScript = script(`
local name, version, doc = take(), take(), take()
local ok = P .. "o:" .. name
local cur = redis.call("ZREVRANGE", ok, 0, 0)
if cur[1] == version then return 0 end
redis.call("HSET", P .. "p:" .. name, version, doc)
redis.call("ZADD", ok, redis.call("INCR", P .. "pseq"), version)
redis.call("ZADD", P .. "pn", 0, name)
bumpGeneration(ARGV[#ARGV])
return 1
`)

// getPluginScript returns a plugin's records, current first. ARGV: name.
var getPluginScript = script(`
local name = take()
local out = {}
for _, v in ipairs(redis.call("ZREVRANGE", P .. "o:" .. name, 0, -1)) do
  out[#out + 1] = redis.call("HGET", P .. "p:" .. name, v)
end
return out
`)

// currentPluginScript is CurrentPlugin. ARGV: name. It returns the
// current version's record and the generation, or nothing.
var currentPluginScript = script(`
local name = take()
local v = redis.call("ZREVRANGE", P .. "o:" .. name, 0, 0)[1]
if not v then return {} end
return {redis.call("HGET", P .. "p:" .. name, v), redis.call("GET", P .. "cg") or ""}
`)

// listPluginsScript reads a page of current plugin versions. ARGV: min,
// count. It returns name, record per plugin.
var listPluginsScript = script(`
local min, n = take(), takeN()
local out = {}
for _, name in ipairs(redis.call("ZRANGEBYLEX", P .. "pn", min, "+", "LIMIT", 0, n)) do
  local cur = redis.call("ZREVRANGE", P .. "o:" .. name, 0, 0)
  out[#out + 1] = name
  out[#out + 1] = redis.call("HGET", P .. "p:" .. name, cur[1])
end
return out
`)

// deletePluginScript is DeletePlugin: the pin check and the delete in one
// step. ARGV: name, how many users to name, generation.
var deletePluginScript = script(`
local name, n = take(), takeN()
if redis.call("EXISTS", P .. "p:" .. name) == 0 then return {"notfound"} end
local users = redis.call("ZRANGE", P .. "u:" .. name, 0, n - 1)
if #users > 0 then return {"inuse", users} end
redis.call("DEL", P .. "p:" .. name, P .. "o:" .. name)
redis.call("ZREM", P .. "pn", name)
bumpGeneration(ARGV[#ARGV])
return {"ok"}
`)

// putGrantsScript is PutGrants: g:<name> holds doc, rev and at (hex
// time); gseq keeps each name's highest revision after DeleteGrants, so
// that revisions are never reused. ARGV: name, doc, now, the revision the
// write is for ("" for any). It returns {"ok", the revision stored} or
// {"conflict", the revision stored}.
var putGrantsScript = script(`
local name, doc, now, want = take(), take(), take(), take()
local gk = P .. "g:" .. name
local cur = redis.call("HMGET", gk, "doc", "rev")
if want ~= "" and want ~= (cur[2] or "0") then return {"conflict", cur[2] or "0"} end
if cur[1] == doc then return {"ok", cur[2]} end
local seq = tonumber(redis.call("HGET", P .. "gseq", name) or "0")
local rev = string.format("%d", math.max(seq, tonumber(cur[2] or "0")) + 1)
redis.call("HSET", gk, "doc", doc, "rev", rev, "at", now)
redis.call("HSET", P .. "gseq", name, rev)
redis.call("ZADD", P .. "gn", 0, name)
return {"ok", rev}
`)

// listGrantsScript reads a page of grants. ARGV: min, count. It returns
// name, doc, rev, at per plugin name.
var listGrantsScript = script(`
local min, n = take(), takeN()
local out = {}
for _, name in ipairs(redis.call("ZRANGEBYLEX", P .. "gn", min, "+", "LIMIT", 0, n)) do
  local g = redis.call("HMGET", P .. "g:" .. name, "doc", "rev", "at")
  out[#out + 1] = name
  out[#out + 1] = g[1]
  out[#out + 1] = g[2]
  out[#out + 1] = g[3]
end
return out
`)

// deleteGrantsScript is DeleteGrants; gseq keeps the last revision.
// ARGV: name.
var deleteGrantsScript = script(`
local name = take()
if redis.call("EXISTS", P .. "g:" .. name) == 0 then return {"notfound"} end
redis.call("DEL", P .. "g:" .. name)
redis.call("ZREM", P .. "gn", name)
return {"ok"}
`)

// migrateScript moves a page of instances (ix:all) from schema 1 to 2: the
// leases from their hashes (fields ln, lb, le) to the l hash and the lz
// index, and the pinned plugins and delete-after time from the set x:<id>
// to the hash's pn and da fields. After the last page it deletes schema
// 1's lx index.
// ARGV: exclusive start ("-" for the first page), count. It returns the
// page's last member, or "" when there are no more.
var migrateScript = script(`
local min, n = take(), takeN()
local ms = redis.call("ZRANGEBYLEX", P .. "ix:all", min, "+", "LIMIT", 0, n)
for _, m in ipairs(ms) do
  local id = string.sub(m, 17)
  local ik = P .. "i:" .. id
  local f = redis.call("HMGET", ik, "ln", "lb", "le", "term")
  if f[1] and f[1] ~= "" then
    local le = f[3]
    if not le or #le ~= 16 then le = "0000000000000000" end
    redis.call("HSET", P .. "l", id, lease(le, f[4] == "1", f[1], f[2] or ""))
    redis.call("HSET", ik, "lh", "1")
    if f[4] ~= "1" then redis.call("ZADD", P .. "lz", usec(le, math.ceil), id) end
  end
  redis.call("HDEL", ik, "ln", "lb", "le")
  -- The plugins and delete-after time the set x:<id> recorded as index
  -- memberships become fields.
  local xk = P .. "x:" .. id
  local names, da = {}, ""
  for _, x in ipairs(redis.call("SMEMBERS", xk)) do
    local k, mem = unpair(x)
    if string.sub(k, 1, #P + 2) == P .. "u:" then
      names[#names + 1] = string.sub(k, #P + 3)
    elseif k == P .. "rx" then
      da = string.sub(mem, 1, 16)
    end
  end
  if redis.call("EXISTS", xk) == 1 then
    table.sort(names)
    redis.call("HSET", ik, "pn", joinNames(names), "da", da)
    redis.call("DEL", xk)
  end
end
if #ms < n then
  redis.call("DEL", P .. "lx")
  return ""
end
return ms[#ms]
`)

// unionsScript moves a page of instances of a schema-2 store to schema 3:
// it deletes the by-workflow index of each one's workflow (schema 3 merges
// the status indexes instead), and after the last page the index of all
// instances it pages through.
// ARGV: exclusive start ("-" for the first page), count. It returns the
// page's last member, or "" when there are no more.
var unionsScript = script(`
local min, n = take(), takeN()
local ms = redis.call("ZRANGEBYLEX", P .. "ix:all", min, "+", "LIMIT", 0, n)
local seen = {}
for _, m in ipairs(ms) do
  local wf = redis.call("HGET", P .. "i:" .. string.sub(m, 17), "wf")
  if wf and not seen[wf] then
    seen[wf] = true
    redis.call("UNLINK", P .. "ix:w:" .. wf)
  end
end
if #ms < n then
  redis.call("UNLINK", P .. "ix:all")
  return ""
end
return ms[#ms]
`)

// markSchemaScript sets the schema key to ARGV[3] if it holds ARGV[2].
var markSchemaScript = script(`
local from, to = take(), take()
if redis.call("GET", P .. "schema") == from then redis.call("SET", P .. "schema", to) end
return "ok"
`)

// expiredLeasesScript is ExpiredLeases. ARGV: now, count. The index's
// scores are expiries rounded up to the microsecond: an instance whose
// score is now's, rounded up, is expired only if its exact expiry is not
// after now.
var expiredLeasesScript = script(`
local now, n = take(), takeN()
local top = usec(now, math.ceil)
local ms = redis.call("ZRANGEBYSCORE", P .. "lz", "-inf", top, "WITHSCORES", "LIMIT", 0, n)
local out = {}
for i = 1, #ms, 2 do
  local id = ms[i]
  if tonumber(ms[i + 1]) < tonumber(top) then
    out[#out + 1] = id
  else
    local _, _, le = unlease(redis.call("HGET", P .. "l", id))
    if le ~= "" and not tlt(now, le) then out[#out + 1] = id end
  end
end
return out
`)
