-- Health of one Express node (Backend or Frontend), from the status express-operator writes.
-- Lua 5.1, base/table/string only (Argo CD runs gopher-lua); every field is guarded.
local hs = {}

local generation = 0
if obj.metadata ~= nil and obj.metadata.generation ~= nil then
  generation = obj.metadata.generation
end
local status = obj.status
if status == nil or status.observedGeneration == nil or status.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "waiting for the operator to observe generation " .. tostring(generation)
  return hs
end

local phase = status.phase
local message = status.message or ""
if status.bounce ~= nil then
  local bounce = status.bounce.phase
  if bounce == "Pending" or bounce == "Terminating" or bounce == "Starting" then
    hs.status = "Progressing"
    hs.message = "bounce " .. (status.bounce.requestId or "") .. ": " .. (status.bounce.message or bounce)
    return hs
  end
end

if phase == "Ready" then
  hs.status = "Healthy"
elseif phase == "Down" then
  hs.status = "Healthy"
  if message == "" then
    message = "intentionally down (up: false)"
  end
elseif phase == "Paused" then
  hs.status = "Suspended"
elseif phase == "Failed" or phase == "NotReady" then
  hs.status = "Degraded"
else
  -- Waiting, Provisioning, Upgrading, Bouncing, or a phase this script does not know yet.
  hs.status = "Progressing"
end
hs.message = message
return hs
