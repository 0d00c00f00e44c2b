-- slidinglog: a log of the live requests, oldest first, each an instant
-- and a cost.
--
-- Depends on: prelude, time, arith (fill).
-- Translates: Params.stepSlidingLog and record (engine/slidingwindow.go).

-- The sliding log's entries are packed records of three little-endian
-- doubles (seconds, nanoseconds, cost), which read back exactly and without
-- parsing text.
local ENTRY = 24

local function entryAt(log, i)
  return unpack('<ddd', log, (i - 1) * ENTRY + 1)
end

local function costAt(log, i)
  return (unpack('<d', log, (i - 1) * ENTRY + 17))
end

-- slidingLog is stepSlidingLog, with Go's record inline.
local function slidingLog(verb, cost)
  local allowed, retryS, retryN, resetS, resetN = false, nil, nil, nil, nil
  local log = stLog
  local n = #log / ENTRY
  local first = 1
  while first <= n do
    local es, en = entryAt(log, first)
    local exS, exN = tadd(es, en, interval)
    if tless(nowS, nowN, exS, exN) then break end
    first = first + 1
  end
  local sum = 0
  for i = first, n do sum = sum + costAt(log, i) end
  local empty = first > n
  local newS, newN, newC = 0, 0, 0
  if not empty then newS, newN, newC = entryAt(log, n) end
  local x = sum + cost - limit
  if x <= slack then
    allowed = true
    sum = fill(sum, cost)
    if cost > 0 then
      local lastS, lastN = newS, newN
      if empty or tless(newS, newN, nowS, nowN) then newS, newN = nowS, nowN end
      empty = false
      if verb == ALLOW then
        -- record: keep the live entries, and append the request, or merge
        -- it into the newest entry when the log is full. As in Go, only
        -- the log changes.
        local live = n - first + 1
        local keep = sub(log, (first - 1) * ENTRY + 1)
        if live == 0 then
          stLog = pack('<ddd', nowS, nowN, cost)
        else
          local ts, tn = tmax(nowS, nowN, lastS, lastN)
          if live >= maxEntries then
            stLog = sub(keep, 1, -ENTRY - 1) .. pack('<ddd', ts, tn, newC + cost)
          else
            stLog = keep .. pack('<ddd', ts, tn, cost)
          end
        end
      end
    end
  else
    -- Admitted once enough of the oldest entries have left the window.
    for i = first, n do
      x = x - costAt(log, i)
      if x <= slack then
        local es, en = entryAt(log, i)
        retryS, retryN = tadd(es, en, interval)
        break
      end
    end
  end
  if not empty then resetS, resetN = tadd(newS, newN, interval) end
  return allowed, sum, retryS, retryN, resetS, resetN
end
