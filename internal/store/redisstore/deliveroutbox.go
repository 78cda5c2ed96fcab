package redisstore

// deliverOutboxScript is Deliver in a catalog (roleCatalog, deliverTo):
// deliverScript with its messages written into the outbox (outboxMode),
// since the catalog holds no instance, for the router to relay to the
// targets' partitions. The router drops the messages for instances that
// do not exist before the call, so the stimulus's "to" is the first
// message's target. ARGV: as deliverScript's. It returns {"exists",
// fields} (and writes nothing) or {"ok", the outbox entries written, in
// order}.
var deliverOutboxScript = script(`
outboxMode = true
local sid, doc, ex, outcome, now, forget = take(), take(), take(), take(), take(), take()
local msgs = {}
for i = 1, takeN() do msgs[i] = {take(), take(), take()} end
local sk = P .. "s:" .. sid
if sid ~= "" and redis.call("EXISTS", sk) == 1 then return {"exists", redis.call("HGETALL", sk)} end
local eids = {}
for _, m in ipairs(msgs) do eids[#eids + 1] = outboxWrite(m[1], m[2], m[3], now) end
if sid ~= "" then
  local first = ""
  if #msgs > 0 then first = msgs[1][1] end
  if tlt(forget, ex) then forget = ex end
  redis.call("HSET", sk, "doc", doc, "state", "delivered", "ex", ex, "set", now, "to", first, "out", outcome)
  redis.call("ZADD", P .. "sf", 0, forget .. sid)
end
return {"ok", eids}
`)
