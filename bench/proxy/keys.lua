-- wrk: every request a fresh Idempotency-Key and business object, POST /charges/ID.
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end

local n = 0
local run = tostring(os.time())
function request()
  n = n + 1
  local id = run .. "-" .. tostring(tid) .. "-" .. tostring(n)
  return wrk.format("POST", "/charges/" .. id,
    {["Idempotency-Key"] = '"' .. id .. '"', ["Content-Type"] = "application/json"},
    '{"amount_minor": 100}')
end
