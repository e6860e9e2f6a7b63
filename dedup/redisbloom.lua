-- redisbloom.lua: one shard of a RedisBloom (see redisbloom.go), for a batch
-- of keys whose bit positions the caller computed. Redis runs the script
-- atomically, so the batch is answered as if its keys were added one by one,
-- with no other client in between.
--
-- KEYS[1]    the shard's state hash: "layers" = layer count, "n<i>" = items
--            admitted into layer i (absent = 0).
-- KEYS[2..]  the bit chunk keys, layer 0's chunks first, then layer 1's, ...
-- ARGV[1]    mode: "a" test-and-add, "c" contains (read only)
-- ARGV[2]    L, the layer count the caller computed positions for
-- ARGV[3]    n, the number of keys
-- ARGV[4]    bits per chunk key
-- ARGV[5..]  per layer (3 each): k (hashes), capacity (items), size in bits
-- then       the bit positions, layer by layer, key by key, k per key,
--            as offsets within the layer's bit array.
--
-- Reply {status, layers, done, flags}:
--   status 0: all n keys answered. status 1: stale: the shard does not have
--   L layers (another client grew it, or this batch filled the newest layer
--   and the script added one); only the first `done` keys are answered, and
--   the caller must send the rest again with positions for `layers` layers.
--   flags: one byte per answered key, "1" = new (mode a) or present (mode c).

local mode = ARGV[1]
local L = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local cbits = tonumber(ARGV[4])

local st = redis.call('HMGET', KEYS[1], 'layers', 'n' .. (L - 1))
local stored = tonumber(st[1])
if stored == nil then
  if mode == 'c' then
    return {0, 1, n, string.rep('0', n)}
  end
  stored = 1
  redis.call('HSET', KEYS[1], 'layers', 1)
end
if stored ~= L then
  return {1, stored, 0, ''}
end

-- Layer i (1-based here; layer i-1 in Redis key names) parameters.
local k, cap, size, nch, kbase, pbase = {}, {}, {}, {}, {}, {}
local a, kb, pb = 5, 2, 5 + 3 * L
for i = 1, L do
  k[i], cap[i], size[i] = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  nch[i] = math.ceil(size[i] / cbits)
  kbase[i], pbase[i] = kb, pb
  a, kb, pb = a + 3, kb + nch[i], pb + n * k[i]
end

-- BITFIELD arguments per call; Lua's unpack stops near 8000 values.
local LIMIT = 7200

-- probe runs BITFIELD over the bits of the keys qs (indices, in order) in
-- layer i: GET when set is false, else SET to 1 (which answers the old bit).
-- It returns zero, where zero[q] is true when some bit of key q was 0.
-- Within one chunk the operations run in key order, so a key repeated in qs
-- finds the bits its first copy set.
local function probe(i, qs, set)
  local ki, base = k[i], pbase[i]
  local zero = {}
  local per = set and 4 or 3
  if nch[i] == 1 then
    local key = KEYS[kbase[i]]
    local args, m, first = {}, 0, 1
    local function flush(last)
      local r = redis.call('BITFIELD', key, unpack(args, 1, m))
      local j = 1
      for x = first, last do
        local q = qs[x]
        for _ = 1, ki do
          if r[j] == 0 then zero[q] = true end
          j = j + 1
        end
      end
    end
    for x = 1, #qs do
      if m + per * ki > LIMIT then
        flush(x - 1)
        first, m = x, 0
      end
      local b = base + (qs[x] - 1) * ki
      if set then
        for t = b, b + ki - 1 do
          args[m + 1], args[m + 2], args[m + 3], args[m + 4] = 'SET', 'u1', ARGV[t], '1'
          m = m + 4
        end
      else
        for t = b, b + ki - 1 do
          args[m + 1], args[m + 2], args[m + 3] = 'GET', 'u1', ARGV[t]
          m = m + 3
        end
      end
    end
    if m > 0 then flush(#qs) end
    return zero
  end
  -- Several chunks: group the operations by chunk, remembering their keys.
  local args, owners, m = {}, {}, {}
  for c = 0, nch[i] - 1 do args[c], owners[c], m[c] = {}, {}, 0 end
  local function flush(c)
    local r = redis.call('BITFIELD', KEYS[kbase[i] + c], unpack(args[c], 1, m[c]))
    local o = owners[c]
    for j = 1, #r do
      if r[j] == 0 then zero[o[j]] = true end
    end
    owners[c], m[c] = {}, 0
  end
  for x = 1, #qs do
    local q = qs[x]
    local b = base + (q - 1) * ki
    for t = b, b + ki - 1 do
      local pos = tonumber(ARGV[t])
      local c = math.floor(pos / cbits)
      if m[c] + per > LIMIT then flush(c) end
      local ac, mc = args[c], m[c]
      if set then
        ac[mc + 1], ac[mc + 2], ac[mc + 3], ac[mc + 4] = 'SET', 'u1', pos - c * cbits, '1'
      else
        ac[mc + 1], ac[mc + 2], ac[mc + 3] = 'GET', 'u1', pos - c * cbits
      end
      m[c] = mc + per
      local o = owners[c]
      o[#o + 1] = q
    end
  end
  for c = 0, nch[i] - 1 do
    if m[c] > 0 then flush(c) end
  end
  return zero
end

local res = {}
local pending = {}
for q = 1, n do pending[q] = q end

-- Layers only read: all of them for contains, all but the newest for add.
-- Newest first: newer layers hold more keys, so a repeated key is found
-- sooner and drops out of the older layers' probes.
local yes, no = '1', '0'
local last = L
if mode == 'a' then
  last = L - 1
  yes, no = '0', '1' -- present in an old layer means not new
end
for i = last, 1, -1 do
  if #pending == 0 then break end
  local zero = probe(i, pending, false)
  local rest = {}
  for x = 1, #pending do
    local q = pending[x]
    if zero[q] then rest[#rest + 1] = q else res[q] = yes end
  end
  pending = rest
end
if mode == 'c' then
  for x = 1, #pending do res[pending[x]] = '0' end
  return {0, L, n, table.concat(res)}
end

-- Test-and-add into the newest layer, never past its capacity.
local count = tonumber(st[2]) or 0
if count == 0 then
  -- A new layer: allocate its chunks at their exact size now. Growing a
  -- string bit by bit would let Redis over-allocate it by up to 2x.
  for c = 0, nch[L] - 1 do
    local key = KEYS[kbase[L] + c]
    local bytes = math.min(cbits, size[L] - c * cbits) / 8
    if redis.call('STRLEN', key) < bytes then
      redis.call('SETBIT', key, bytes * 8 - 1, 0)
    end
  end
end
local room = cap[L] - count
local added = 0
local x = 1
while x <= #pending and room > 0 do
  local take = {}
  for y = x, math.min(#pending, x + room - 1) do take[#take + 1] = pending[y] end
  local zero = probe(L, take, true)
  for y = 1, #take do
    local q = take[y]
    if zero[q] then
      res[q] = '1'
      room, added = room - 1, added + 1
    else
      res[q] = '0'
    end
  end
  x = x + #take
end
if x <= #pending then
  -- The newest layer is full. Keys it already holds are not new; the first
  -- key it does not hold needs a new layer, whose positions the caller has
  -- yet to compute: add the layer and answer the keys before that one.
  local rest = {}
  for y = x, #pending do rest[#rest + 1] = pending[y] end
  local zero = probe(L, rest, false)
  for y = 1, #rest do
    local q = rest[y]
    if zero[q] then
      if added > 0 then redis.call('HINCRBY', KEYS[1], 'n' .. (L - 1), added) end
      redis.call('HSET', KEYS[1], 'layers', L + 1)
      return {1, L + 1, q - 1, table.concat(res, '', 1, q - 1)}
    end
    res[q] = '0'
  end
end
if added > 0 then redis.call('HINCRBY', KEYS[1], 'n' .. (L - 1), added) end
return {0, L, n, table.concat(res)}
