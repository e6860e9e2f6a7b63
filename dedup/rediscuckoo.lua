-- rediscuckoo.lua: one shard of a RedisCuckoo (see rediscuckoo.go), for a
-- batch of keys. Redis runs the script atomically, so the batch is answered
-- as if its keys were processed one by one with no other client in between.
--
-- KEYS[1]       the shard's state hash: "layers" = layer count, "n<i>" =
--               fingerprints stored in layer i (from 0), "deletes".
-- KEYS[2..M+1]  the slot strings of layers 0..M-1 (a layer's string exists
--               once the layer does): slot s of a layer with f-bit
--               fingerprints is BITFIELD u<f> at bit offset s*f; bucket i
--               holds slots i*b .. i*b+b-1; 0 is an empty slot.
-- ARGV[1]       mode: "a" test-and-add, "A" add (duplicates allowed),
--               "c" contains, "d" delete one copy, "f" forget (all copies
--               of a present key)
-- ARGV[2]       b, slots per bucket
-- ARGV[3]       maximum evictions per insertion
-- ARGV[4]       seed of the eviction choices, in [1, 2^31-2]
-- ARGV[5]       M, the number of layers the shard may have
-- ARGV[6]       n, the number of keys
-- ARGV[7..]     per layer 0..M-1: buckets (a power of two <= 2^32), f (bits)
-- then          per key: x1 = low 32 bits of H1, x2 = H2 >> 11 (53 bits)
--
-- A key's fingerprint in a layer is 1 + (x2 mod (2^f - 1)), its first bucket
-- x1 mod buckets and its other bucket i xor (fmix32(fp) mod buckets), the
-- same arithmetic as cuckootable.go, done exactly in Lua's doubles.
--
-- Reply: one byte per key: "1" new / present / deleted, "0" not, "F" not
-- stored: the newest layer is full and the shard has M layers, "T" not
-- stored: both buckets hold nothing but the key's fingerprint (mode A).

local mode = ARGV[1]
local b = tonumber(ARGV[2])
local maxKicks = tonumber(ARGV[3])
local seed = tonumber(ARGV[4])
local M = tonumber(ARGV[5])
local n = tonumber(ARGV[6])
local nb, fb, pow = {}, {}, {}
local a = 7
for l = 1, M do
  nb[l], fb[l] = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  pow[l] = 2 ^ fb[l]
  a = a + 2
end
local X1, X2 = {}, {}
for q = 1, n do
  X1[q], X2[q] = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  a = a + 2
end

local TWO32 = 4294967296
local function mul32(x, c)
  local xlo, clo = x % 65536, c % 65536
  local xhi, chi = (x - xlo) / 65536, (c - clo) / 65536
  return ((xhi * clo + xlo * chi) % 65536 * 65536 + xlo * clo) % TWO32
end
local function fmix32(h)
  h = bit.bxor(h, bit.rshift(h, 16)) % TWO32
  h = mul32(h, 0x85ebca6b)
  h = bit.bxor(h, bit.rshift(h, 13)) % TWO32
  h = mul32(h, 0xc2b2ae35)
  return bit.bxor(h, bit.rshift(h, 16)) % TWO32
end
local function alt(l, i, fp)
  return bit.bxor(i, fmix32(fp) % nb[l]) % TWO32
end
local function rnd(k)
  seed = (seed * 48271) % 2147483647
  return seed % k
end

-- keyinfo returns key q's fingerprint and buckets in layer l, computed once.
local FP, I1, I2 = {}, {}, {}
for l = 1, M do FP[l], I1[l], I2[l] = {}, {}, {} end
local function keyinfo(l, q)
  local fp = FP[l][q]
  if fp == nil then
    fp = math.fmod(X2[q], pow[l] - 1) + 1
    local i1 = X1[q] % nb[l]
    FP[l][q], I1[l][q], I2[l][q] = fp, i1, alt(l, i1, fp)
  end
  return fp, I1[l][q], I2[l][q]
end

local v = redis.call('HGET', KEYS[1], 'layers')
local L = v and tonumber(v) or 0

-- Buckets are read through a cache (one BITFIELD for many buckets when
-- prefetched, else one per bucket); changed slots are written back at the
-- end. A bucket is read in groups of g slots, one BITFIELD GET u<g*f> each,
-- with g*f <= 53 so that the value is exact in a double; the group's first
-- slot holds its high bits.
local cache, dirty, g = {}, {}, {}
for l = 1, M do
  cache[l], dirty[l] = {}, {}
  g[l] = math.max(1, math.min(b, math.floor(53 / fb[l])))
end

-- Lua's unpack stops near 8000 values: keep BITFIELD calls well below.
local LIMIT = 7200

-- fetch reads the buckets listed in want (bucket -> true) of layer l.
local function fetch(l, want)
  local f, gl = fb[l], g[l]
  local per = math.ceil(b / gl)
  local args, order, m = {}, {}, 0
  local function flush()
    if m == 0 then return end
    local r = redis.call('BITFIELD', KEYS[l + 1], unpack(args, 1, m))
    local x = 1
    for o = 1, #order do
      local s = {}
      for j0 = 0, b - 1, gl do
        local k = math.min(gl, b - j0)
        local val = r[x]
        x = x + 1
        for j = j0 + k, j0 + 1, -1 do
          local slot = val % pow[l]
          s[j] = slot
          val = (val - slot) / pow[l]
        end
      end
      cache[l][order[o]] = s
    end
    args, order, m = {}, {}, 0
  end
  for i in pairs(want) do
    if cache[l][i] == nil then
      if m + 3 * per > LIMIT then flush() end
      order[#order + 1] = i
      for j0 = 0, b - 1, gl do
        local k = math.min(gl, b - j0)
        args[m + 1], args[m + 2], args[m + 3] = 'GET', 'u' .. (k * f), (i * b + j0) * f
        m = m + 3
      end
    end
  end
  flush()
end

-- fresh[l] is true for a layer this script created: its slots are all 0.
local fresh = {}

local function bucket(l, i)
  local s = cache[l][i]
  if s == nil then
    if fresh[l] then
      s = {}
      for j = 1, b do s[j] = 0 end
      cache[l][i] = s
    else
      fetch(l, {[i] = true})
      s = cache[l][i]
    end
  end
  return s
end

local function setslot(l, i, j, fp)
  cache[l][i][j] = fp
  dirty[l][i * b + j - 1] = true
end

-- prefetch reads both buckets of every key in layers 1..L.
local function prefetch()
  for l = 1, L do
    local want = {}
    for q = 1, n do
      local _, i1, i2 = keyinfo(l, q)
      want[i1] = true
      want[i2] = true
    end
    fetch(l, want)
  end
end

local function has(l, i, fp)
  local s = bucket(l, i)
  for j = 1, b do
    if s[j] == fp then return true end
  end
  return false
end

local function put(l, i, fp)
  local s = bucket(l, i)
  for j = 1, b do
    if s[j] == 0 then
      setslot(l, i, j, fp)
      return true
    end
  end
  return false
end

local function remove(l, i, fp)
  local s = bucket(l, i)
  for j = 1, b do
    if s[j] == fp then
      setslot(l, i, j, 0)
      return true
    end
  end
  return false
end

local function contains(l, q)
  local fp, i1, i2 = keyinfo(l, q)
  return has(l, i1, fp) or has(l, i2, fp)
end

local function containsAny(q)
  for l = L, 1, -1 do
    if contains(l, q) then return true end
  end
  return false
end

local function saturated(l, q)
  local fp, i1, i2 = keyinfo(l, q)
  for _, i in ipairs({i1, i2}) do
    local s = bucket(l, i)
    for j = 1, b do
      if s[j] ~= fp then return false end
    end
  end
  return true
end

-- insert stores key q's fingerprint in layer l, evicting at most maxKicks
-- residents; on failure every eviction is undone.
local function insert(l, q)
  local fp, i1, i2 = keyinfo(l, q)
  if put(l, i1, fp) or put(l, i2, fp) then return true end
  local i = i1
  if rnd(2) == 1 then i = i2 end
  local path = {}
  for _ = 1, maxKicks do
    local j = rnd(b) + 1
    local old = bucket(l, i)[j]
    setslot(l, i, j, fp)
    path[#path + 1] = {i, j, old}
    fp = old
    i = alt(l, i, fp)
    if put(l, i, fp) then return true end
  end
  for x = #path, 1, -1 do
    local p = path[x]
    cache[l][p[1]][p[2]] = p[3]
  end
  return false
end

local added, removed = {}, {}
for l = 1, M do added[l], removed[l] = 0, 0 end
local deletes = 0

-- grow adds layer L+1, allocating its string, all zeros, at full size now
-- (growing a string bit by bit would let Redis over-allocate it by up to 2x).
local function grow()
  if L >= M then return false end
  L = L + 1
  redis.call('DEL', KEYS[L + 1])
  redis.call('SETBIT', KEYS[L + 1], nb[L] * b * fb[L] - 1, 0)
  redis.call('HSET', KEYS[1], 'layers', L)
  fresh[L] = true
  return true
end

-- store puts key q in the newest layer, growing the shard when it is full.
local function store(q)
  if insert(L, q) then
    added[L] = added[L] + 1
    return '1'
  end
  if mode == 'A' and saturated(L, q) then return 'T' end
  if not grow() then return 'F' end
  if insert(L, q) then
    added[L] = added[L] + 1
    return '1'
  end
  return 'F'
end

local res = {}
if L == 0 then
  if mode == 'c' or mode == 'd' or mode == 'f' then
    return string.rep('0', n)
  end
  grow()
end
prefetch()

for q = 1, n do
  if mode == 'c' then
    res[q] = containsAny(q) and '1' or '0'
  elseif mode == 'a' then
    if containsAny(q) then res[q] = '0' else res[q] = store(q) end
  elseif mode == 'A' then
    res[q] = store(q)
  elseif mode == 'd' then
    res[q] = '0'
    for l = L, 1, -1 do
      local fp, i1, i2 = keyinfo(l, q)
      if remove(l, i1, fp) or remove(l, i2, fp) then
        removed[l] = removed[l] + 1
        deletes = deletes + 1
        res[q] = '1'
        break
      end
    end
  elseif mode == 'f' then
    res[q] = '0'
    if containsAny(q) then
      res[q] = '1'
      for l = 1, L do
        local fp, i1, i2 = keyinfo(l, q)
        while remove(l, i1, fp) or remove(l, i2, fp) do
          removed[l] = removed[l] + 1
          deletes = deletes + 1
        end
      end
    end
  else
    return redis.error_reply('ERR rediscuckoo: unknown mode ' .. tostring(mode))
  end
end

-- Write back the changed slots and the counts.
for l = 1, L do
  local t, f = 'u' .. fb[l], fb[l]
  local args, m = {}, 0
  for slot in pairs(dirty[l]) do
    if m + 4 > LIMIT then
      redis.call('BITFIELD', KEYS[l + 1], unpack(args, 1, m))
      args, m = {}, 0
    end
    local j = slot % b
    args[m + 1], args[m + 2], args[m + 3], args[m + 4] = 'SET', t, slot * f, cache[l][(slot - j) / b][j + 1]
    m = m + 4
  end
  if m > 0 then redis.call('BITFIELD', KEYS[l + 1], unpack(args, 1, m)) end
  if added[l] ~= removed[l] then
    redis.call('HINCRBY', KEYS[1], 'n' .. (l - 1), added[l] - removed[l])
  end
end
if deletes > 0 then redis.call('HINCRBY', KEYS[1], 'deletes', deletes) end
return table.concat(res)
