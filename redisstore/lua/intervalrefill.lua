-- intervalrefill: the token bucket's interval refill, amount tokens back
-- at each whole interval after its point (Time, A: the tokens in use).
--
-- Depends on: prelude, time, arith (idiv, tmod, fill, fmax).
-- Translates: Params.stepIntervalRefill, refillPoint, usedAt, refillsTo
-- and refills (engine/tokenbucket.go), and the interval refill's part of
-- Params.fullAt (engine/strict.go).

local function refills(x)
  if x <= slack then return 0 end
  return ceil((x - slack) / amount)
end

-- tmul returns k * d nanoseconds as a pair, for whole numbers k >= 0 and
-- d > 0, exactly, by doubling: the product may exceed 2^53.
local function tmul(k, d)
  local bit = 1
  while bit * 2 <= k do bit = bit * 2 end
  local s, n = 0, 0
  while bit >= 1 do
    s, n = s + s, n + n
    if n >= 1e9 then n, s = n - 1e9, s + 1 end
    if k >= bit then
      k = k - bit
      s, n = tadd(s, n, d)
    end
    bit = bit / 2
  end
  return s, n
end

-- taddTimes returns s, n plus k times d nanoseconds, exactly, for a whole
-- number k and d > 0: whole refills after a point that holds more than
-- the burst (a cancel leaves the refill it moves back over in use) can
-- take 2^53 ns or more.
local function taddTimes(s, n, k, d)
  local x = k * d
  if x > -EXACT and x < EXACT then return tadd(s, n, x) end
  if k > 0 then return tplus(s, n, tmul(k, d)) end
  return tsub(s, n, tmul(-k, d))
end

-- refillPoint is Go's refillPoint: the point (used, last) as seen at t,
-- advanced by the whole refills since it, or itself if it lies after t.
local function refillPoint(used, ls, ln, ts, tn)
  if tless(ts, tn, ls, ln) then return used, ls, ln end
  if used > 0 and tless(ls, ln, ts, tn) then
    local elapsed = tdiff(ts, tn, ls, ln)
    local k
    if elapsed < EXACT then
      k = idiv(elapsed, interval)
      ls, ln = tadd(ls, ln, k * interval)
    else
      -- k whole refills, from 2^53 ns: the last refill instant is t less
      -- elapsed mod interval, exactly. k is what used - k * amount needs:
      -- start from a bound below it; if that frees all in use, so does k
      -- (as in Go, where the products of k and amount grow with k);
      -- otherwise count up to k exactly. (Only a state holding more than
      -- 2^51 refills, which a cancel adds one at a time, would need k
      -- beyond 2^51, where this stops counting.)
      local es, en = tsub(ts, tn, ls, ln)
      local rs, rn = tadd(ts, tn, -tmod(es, en, interval))
      k = floor(elapsed / interval * (1 - 2^-50))
      if used > k * amount and k < 2^51 then
        local cs, cn = taddTimes(ls, ln, k, interval)
        while tless(cs, cn, rs, rn) do
          k = k + 1
          cs, cn = tadd(cs, cn, interval)
        end
      end
      ls, ln = rs, rn
    end
    used = fmax(used - k * amount, 0)
  end
  if used <= slack then return 0, ts, tn end
  return used, ls, ln
end

-- usedAt is Go's usedAt: the tokens in use at t, the pair ts, tn, of the
-- point (used, last), more by the refills still to come before it. From
-- 2^53 ns ahead those are more refills than the burst holds (Params take
-- less than 2^53 ns to refill it), so the tokens in use exceed the limit
-- however they round: describe clamps them to it, and a full-at, which
-- takes them from the limit, keeps what is in use either way.
local function usedAt(used, ls, ln, ts, tn)
  if not tless(ts, tn, ls, ln) then return used end
  local ahead = tdiff(ls, ln, ts, tn)
  if ahead >= EXACT then return limit end
  return used + (idiv(ahead - 1, interval) + 1) * amount
end

-- intervalRefill is stepIntervalRefill, the token bucket's interval refill.
local function intervalRefill(verb, cost, atS, atN, mdS, mdN)
  if verb == CANCEL then
    -- Given back a nanosecond late: the point moves to a nanosecond after
    -- the refill before it, with the tokens its instant's refill brings
    -- still in use.
    local allowed = false
    if tless(nowS, nowN, atS, atN) and stS == atS and stN == atN then
      allowed = true
      stS, stN = tadd(atS, atN, 1 - interval)
      stA, stB, stUS, stUN = fmax(stA - cost, 0) + amount, 0, 0, 0
    end
    local used, ls, ln = refillPoint(stA, stS, stN, nowS, nowN)
    local resetS, resetN = taddTimes(ls, ln, refills(used), interval)
    return allowed, usedAt(used, ls, ln, nowS, nowN), nil, nil, resetS, resetN
  end
  local used, ls, ln = refillPoint(stA, stS, stN, nowS, nowN)
  -- Go's refillsTo: refills after the point until the cost fits.
  local fitS, fitN = taddTimes(ls, ln, ceil((used + cost - limit - slack) / amount), interval)
  local later = false
  if verb == RESERVE then
    local ms, mn = tmax(fitS, fitN, nowS, nowN)
    if tless(ms, mn, atS, atN) then later, fitS, fitN = true, atS, atN end -- booked no earlier than At
  end
  local allowed, retryS, retryN, waitS, waitN, markS, markN = false, nil, nil, nil, nil, nil, nil
  local recS, recN = nowS, nowN -- when the cost is recorded
  if not tless(nowS, nowN, fitS, fitN) then
    allowed = true
  elseif verb == RESERVE then
    local ms, mn = tsub(fitS, fitN, mdS, mdN)
    if not tless(nowS, nowN, ms, mn) then
      allowed, waitS, waitN, markS, markN, recS, recN = true, fitS, fitN, fitS, fitN, fitS, fitN
    else
      retryS, retryN = ms, mn
    end
  else
    retryS, retryN = fitS, fitN
  end
  if allowed then
    if not tless(recS, recN, ls, ln) then used, ls, ln = refillPoint(used, ls, ln, recS, recN) end
    -- Booked between refills, its point lies before its instant, where a
    -- cancel could not tell it from a later booking: it has no instant to
    -- give back.
    if later then markS, markN = nil, nil end
    used = fill(used, cost)
    -- A point after now is kept, even empty.
    if verb ~= CHECK and (used > 0 or tless(nowS, nowN, ls, ln)) then
      stS, stN, stA, stB, stUS, stUN = ls, ln, used, 0, 0, 0
    end
  end
  local resetS, resetN = taddTimes(ls, ln, refills(used), interval)
  return allowed, usedAt(used, ls, ln, nowS, nowN), retryS, retryN, resetS, resetN, waitS, waitN, markS, markN
end

-- intervalRefillFullAt is the interval refill's fullAt: full at t, the
-- pair ts, tn, never lowering what is in use (a cancel may leave more than
-- the burst). (t is at most 2^62 + 2^60 ns, within what refillPoint and
-- usedAt count exactly.)
local function intervalRefillFullAt(ts, tn)
  local used, ls, ln = refillPoint(stA, stS, stN, ts, tn)
  if not tless(ts, tn, ls, ln) then
    stS, stN, stA, stB, stUS, stUN = ls, ln, fmax(used, limit), 0, 0, 0
  else
    stA = fmax(used, limit - usedAt(0, ls, ln, ts, tn))
  end
end
