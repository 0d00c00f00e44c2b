-- intervalrefill: the token bucket's interval refill, amount tokens back
-- at each whole interval after its point (Time, A: the tokens in use).
--
-- Depends on: prelude, time, arith (idiv, tmod, fill, fmax, fmin).
-- Translates: Params.stepIntervalRefill, refillPoint, usedAt, refillsTo,
-- refills and refillCount (engine/tokenbucket.go), the interval refill's
-- part of Params.fullAt (engine/strict.go), and Params.settleRefill
-- (engine/settle.go).

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

-- afterRefills returns s, n plus Go's refillCount(k) refills, for k, a
-- whole number of refills (refills' or refillsTo's): k intervals, or, if
-- k * interval exceeds MAX_SPAN (compared as Go compares them, as
-- doubles), Go's maxSpan / interval + 1 of them, which a key read under a
-- slower limit than it was charged under may need. Their nanoseconds,
-- MAX_SPAN less its remainder by the interval (fmod is exact), plus the
-- interval, are added as two whole numbers that doubles hold exactly:
-- the count itself may exceed 2^53, at intervals below 2^7 ns.
local function afterRefills(s, n, k)
  if k * interval > MAX_SPAN then
    s, n = tadd(s, n, MAX_SPAN)
    return tadd(s, n, interval - fmod(MAX_SPAN, interval))
  end
  return taddTimes(s, n, k, interval)
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
      -- a bound below it, if that frees all in use (then so does k, as in
      -- Go, where the products of k and amount grow with k); otherwise k
      -- itself, as Go's float64(k), which a state in debt needs to the
      -- last refill (a charge may record 2^60 ns of refills, more than
      -- 2^53 of them at intervals below 2^7 ns). The refills' span,
      -- elapsed less that remainder, is k * interval exactly, as a pair;
      -- its double (rounded twice at most) over the interval gives q
      -- within 3 * 2^10 / interval + 1 of k, which is below 2^63 /
      -- interval. The span less q * interval (tmul, exact) is then k - q
      -- intervals, below 2^53 ns either way (2^12 + interval at most, or a
      -- single interval for intervals near 2^53 ns), exact as a double:
      -- q plus k - q is k, rounded once, as Go's conversion rounds it.
      local es, en = tsub(ts, tn, ls, ln)
      local rem = tmod(es, en, interval)
      local rs, rn = tadd(ts, tn, -rem)
      k = floor(elapsed / interval * (1 - 2^-50))
      if used > k * amount then
        local ss, sn = tadd(es, en, -rem) -- k * interval
        local q = floor((ss * 1e9 + sn) / interval)
        local ds, dn = tsub(ss, sn, tmul(q, interval))
        k = q + (ds * 1e9 + dn) / interval
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
    local resetS, resetN = afterRefills(ls, ln, refills(used))
    return allowed, usedAt(used, ls, ln, nowS, nowN), nil, nil, resetS, resetN
  end
  local used, ls, ln = refillPoint(stA, stS, stN, nowS, nowN)
  -- Go's refillsTo: refills after the point until the cost fits.
  local fitS, fitN = afterRefills(ls, ln, ceil((used + cost - limit - slack) / amount))
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
  local resetS, resetN = afterRefills(ls, ln, refills(used))
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

-- refillsInMaxSpan returns Go's float64(maxSpan / interval): the whole
-- intervals in MAX_SPAN, by long division, since 2^60 / interval as a
-- double may round up to the next whole number. 2^60 is 2^53 times 2^7:
-- 2^53 = q * interval + r exactly (fmod is exact, and 2^53 - r, a whole
-- number up to 2^53, divides exactly); then each of the 7 doublings of r
-- adds a bit to the quotient's low part, which stays below 2^7. q * 2^7
-- is exact, and adding the low part rounds once, as Go's conversion of
-- the int64 rounds it (for intervals below 2^7 ns, where the quotient
-- exceeds 2^53).
local function refillsInMaxSpan()
  local r = fmod(EXACT, interval)
  local q, low = (EXACT - r) / interval, 0
  for _ = 1, 7 do
    r, low = r * 2, low * 2
    if r >= interval then r, low = r - interval, low + 1 end
  end
  return q * 2^7 + low
end

-- intervalRefillSettle is Go's settleRefill: the tokens in use at the
-- key's point as seen now moved by the cost, up for a charge (verb
-- CHARGE), to what the refills of MAX_SPAN bring at most, down for a
-- refund, to none at the least (a whole new State, as Go writes it). It
-- returns the cost moved. Go's min(cost, x) is fmin(x, cost), the cost
-- second, as in meterSettle: a cost of -0 is moved as -0.
local function intervalRefillSettle(verb, cost)
  local used, ls, ln = refillPoint(stA, stS, stN, nowS, nowN)
  local moved = fmin(used, cost)
  if verb == CHARGE then
    moved = fmin(fmax(refillsInMaxSpan() * amount - used, 0), cost)
    used = used + moved
  else
    used = used - moved
  end
  stS, stN, stA, stB, stUS, stUN = ls, ln, used, 0, 0, 0
  return moved
end
