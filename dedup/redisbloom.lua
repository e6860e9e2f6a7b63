-- redisbloom.lua: test-and-add or contains for a batch of keys in one or
-- more shards of a RedisBloom (see redisbloom.go), whose bit positions the
-- caller computed. Redis runs a script atomically, so each shard's keys are
-- answered as if added one by one, with no other client in between.
--
-- ARGV[1]  mode: "a" test-and-add, "c" contains (read only)
-- ARGV[2]  bits per chunk key
-- ARGV[3]  fetch: read a whole layer into the script when its size in bytes
--          is at most fetch times the BITFIELD operations that saves
--          (0: never)
-- ARGV[4]  the number of shard sections that follow
-- Each section (one shard, its keys in batch order):
--   ARGV   L, the layer count the caller computed positions for; n, the
--          number of keys; skip, the number of oldest layers the caller
--          checked itself (frozen layers it holds a complete copy of; less
--          than L), which the script does not probe; per layer (3 each): k
--          (hashes), capacity (items), size in bits; then per layer a
--          MessagePack array of the keys' bit positions, key by key, k per
--          key, as offsets in the layer's array (empty for skipped layers).
--   KEYS   the shard's state hash ("layers" = layer count, "n<i>" = items
--          admitted into layer i, absent = 0), then the bit chunk keys,
--          layer 0's chunks first, then layer 1's, ...
--
-- Reply: per section {status, layers, done, flags}. status 0: all n keys
-- answered. status 1: stale: the shard does not have L layers (another
-- client grew it, or this batch filled the newest layer and the script added
-- one); only the first `done` keys are answered, and the caller must send the
-- rest again with positions for `layers` layers. flags: one byte per answered
-- key, "1" = new (mode a) or present (mode c).
--
-- Cost (Redis 7.0, measured): a bit operation through BITFIELD costs Redis
-- about 500 ns (mostly turning Lua values into command arguments, and
-- formatting offsets); reading a whole layer with GET about 1.8 ns a byte
-- (Redis's Lua hashes every byte of every string it creates), after which
-- testing a bit costs about 50 ns. So a layer is read whole when it is
-- small next to the operations that spares, else probed with BITFIELD, in
-- rounds that drop a key at its first 0 bit.

local mode = ARGV[1]
local cbits = tonumber(ARGV[2])
local fetch = tonumber(ARGV[3])
local sections = tonumber(ARGV[4])

local sbyte, floor, concat = string.byte, math.floor, table.concat
-- Bit x of a string is set when byte (x - x%8)/8 + 1, modulo MOD[x%8 + 1],
-- is at least BIT[x%8 + 1]: Redis numbers bits from the top of each byte.
local BIT = {128, 64, 32, 16, 8, 4, 2, 1}
local MOD = {256, 128, 64, 32, 16, 8, 4, 2}
-- BITFIELD arguments per call; Lua's unpack stops near 8000 values.
local LIMIT = 7200

-- shard answers one section whose first key is KEYS[ka] and first argument
-- ARGV[aa]. It returns the reply's four values and the next section's ka, aa.
local function shard(ka, aa)
  local L, n, skip = tonumber(ARGV[aa]), tonumber(ARGV[aa + 1]), tonumber(ARGV[aa + 2])
  local k, cap, size, nch, kbase = {}, {}, {}, {}, {}
  local a, kb = aa + 3, ka + 1
  for i = 1, L do
    k[i], cap[i], size[i] = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
    nch[i] = math.ceil(size[i] / cbits)
    kbase[i] = kb
    a, kb = a + 3, kb + nch[i]
  end
  local pa = a - 1 -- ARGV[pa + i] holds layer i's positions
  local nextKa, nextAa = kb, a + L

  local state = KEYS[ka]
  local st = redis.call('HMGET', state, 'layers', 'n' .. (L - 1))
  local stored = tonumber(st[1])
  if stored == nil then
    if mode == 'c' then
      return 0, 1, n, string.rep('0', n), nextKa, nextAa
    end
    stored = 1
    redis.call('HSET', state, 'layers', 1)
  end
  if stored ~= L then
    return 1, stored, 0, '', nextKa, nextAa
  end

  local decoded = {}
  -- positions returns layer i's positions: key q's t-th (1-based) bit is
  -- at [(q-1)*k[i] + t].
  local function positions(i)
    local p = decoded[i]
    if not p then
      p = cmsgpack.unpack(ARGV[pa + i])
      decoded[i] = p
    end
    return p
  end

  -- bitfield runs BITFIELD on layer i over bits first..last (1-based) of
  -- each key of qs (indices, in order): GET when set is false, else SET to
  -- 1, which answers the old bit. It returns zero, where zero[q] is true
  -- when some of those bits of key q was 0. Within a chunk the operations
  -- run in key order, so a key repeated in qs finds the bits its first copy
  -- set.
  local function bitfield(i, qs, first, last, set)
    local ki, p = k[i], positions(i)
    local zero = {}
    local per = set and 4 or 3
    local nk = last - first + 1
    if nch[i] == 1 then
      local key = KEYS[kbase[i]]
      local args, m, from = {}, 0, 1
      local function flush(upto)
        local r = redis.call('BITFIELD', key, unpack(args, 1, m))
        local j = 1
        for x = from, upto do
          local q = qs[x]
          for _ = 1, nk do
            if r[j] == 0 then zero[q] = true end
            j = j + 1
          end
        end
      end
      for x = 1, #qs do
        if m + per * nk > LIMIT then
          flush(x - 1)
          from, m = x, 0
        end
        local b = (qs[x] - 1) * ki
        if set then
          for t = b + first, b + last do
            args[m + 1], args[m + 2], args[m + 3], args[m + 4] = 'SET', 'u1', p[t], '1'
            m = m + 4
          end
        else
          for t = b + first, b + last do
            args[m + 1], args[m + 2], args[m + 3] = 'GET', 'u1', p[t]
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
      local b = (q - 1) * ki
      for t = b + first, b + last do
        local pos = p[t]
        local c = floor(pos / cbits)
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

  -- whole returns layer i as one string when it is one chunk and reading it
  -- costs less than the BITFIELD operations it spares, else nil.
  local function whole(i, spared)
    if nch[i] ~= 1 or size[i] / 8 > fetch * spared then return nil end
    return redis.call('GET', KEYS[kbase[i]]) or ''
  end

  -- absent returns the keys of qs that layer i does not hold (absent[q]).
  local function absent(i, qs)
    local ki, out = k[i], {}
    -- Probing a key not in a layer takes about 2.6 BITFIELD operations.
    local s = whole(i, 2.5 * #qs)
    if s then
      local p = positions(i)
      for x = 1, #qs do
        local q = qs[x]
        local b = (q - 1) * ki
        for t = b + 1, b + ki do
          local pos = p[t]
          local r = pos % 8
          local byte = sbyte(s, (pos - r) / 8 + 1)
          if not byte or byte % MOD[r + 1] < BIT[r + 1] then
            out[q] = true
            break
          end
        end
      end
      return out
    end
    -- Rounds of bits 1, 2, 3, then the rest: most absent keys drop out early.
    local live, first = qs, 1
    for _, last in ipairs({1, 2, 3, ki}) do
      if last > ki then last = ki end
      if first <= last then
        local zero = bitfield(i, live, first, last, false)
        local next = {}
        for x = 1, #live do
          local q = live[x]
          if zero[q] then out[q] = true else next[#next + 1] = q end
        end
        live, first = next, last + 1
        if #live == 0 then break end
      end
    end
    return out
  end

  local res = {}
  local pending = {}
  for q = 1, n do pending[q] = q end

  -- Layers only read: all of them for contains, all but the newest for add,
  -- but the skipped. Newest first: newer layers hold more keys, so a
  -- repeated key is found sooner and drops out of the older layers' probes.
  local yes = '1'
  local last = L
  if mode == 'a' then
    last = L - 1
    yes = '0' -- present in an old layer means not new
  end
  for i = last, skip + 1, -1 do
    if #pending == 0 then break end
    local out = absent(i, pending)
    local rest = {}
    for x = 1, #pending do
      local q = pending[x]
      if out[q] then rest[#rest + 1] = q else res[q] = yes end
    end
    pending = rest
  end
  if mode == 'c' then
    for x = 1, #pending do res[pending[x]] = '0' end
    return 0, L, n, concat(res), nextKa, nextAa
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
  local kL = k[L]
  local key = KEYS[kbase[L]]

  -- grow records the keys added, opens layer L+1 and answers the keys
  -- before key q, the first that needs the new layer.
  local function grow(q)
    if added > 0 then redis.call('HINCRBY', state, 'n' .. (L - 1), added) end
    redis.call('HSET', state, 'layers', L + 1)
    return 1, L + 1, q - 1, concat(res, '', 1, q - 1), nextKa, nextAa
  end

  -- Reading the layer spares setting bits already 1: all of a repeated
  -- key's, a fraction (the layer's fill) of a new key's. Count on half.
  local s = whole(L, #pending * kL / 2)
  if s then
    local p = positions(L)
    local set, writes, nw = {}, {}, 0 -- bits set by this batch; BITFIELD args
    local grew
    for x = 1, #pending do
      local q = pending[x]
      local b = (q - 1) * kL
      local new = false
      for t = b + 1, b + kL do
        local pos = p[t]
        local r = pos % 8
        local byte = sbyte(s, (pos - r) / 8 + 1)
        if (not byte or byte % MOD[r + 1] < BIT[r + 1]) and not set[pos] then
          new = true
          break
        end
      end
      if new then
        if room == 0 then
          grew = q
          break
        end
        for t = b + 1, b + kL do
          local pos = p[t]
          local r = pos % 8
          local byte = sbyte(s, (pos - r) / 8 + 1)
          if (not byte or byte % MOD[r + 1] < BIT[r + 1]) and not set[pos] then
            set[pos] = true
            writes[nw + 1], writes[nw + 2], writes[nw + 3], writes[nw + 4] = 'SET', 'u1', pos, '1'
            nw = nw + 4
            if nw + 4 > LIMIT then
              redis.call('BITFIELD', key, unpack(writes, 1, nw))
              nw = 0
            end
          end
        end
        res[q] = '1'
        room, added = room - 1, added + 1
      else
        res[q] = '0'
      end
    end
    if nw > 0 then redis.call('BITFIELD', key, unpack(writes, 1, nw)) end
    if grew then return grow(grew) end
  else
    local x = 1
    while x <= #pending and room > 0 do
      local take = {}
      for y = x, math.min(#pending, x + room - 1) do take[#take + 1] = pending[y] end
      local zero = bitfield(L, take, 1, kL, true)
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
      -- The newest layer is full. Keys it already holds are not new; the
      -- first key it does not hold needs a new layer, whose positions the
      -- caller has yet to compute.
      local rest = {}
      for y = x, #pending do rest[#rest + 1] = pending[y] end
      local zero = bitfield(L, rest, 1, kL, false)
      for y = 1, #rest do
        local q = rest[y]
        if zero[q] then return grow(q) end
        res[q] = '0'
      end
    end
  end
  if added > 0 then redis.call('HINCRBY', state, 'n' .. (L - 1), added) end
  return 0, L, n, concat(res), nextKa, nextAa
end

local reply = {}
local ka, aa = 1, 5
for sec = 1, sections do
  local status, layers, done, flags
  status, layers, done, flags, ka, aa = shard(ka, aa)
  reply[4 * sec - 3], reply[4 * sec - 2], reply[4 * sec - 1], reply[4 * sec] = status, layers, done, flags
end
return reply
