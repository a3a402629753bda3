-- Health of an OperatorRelease (DESIGN section 12), from the status the judging operator writes.
-- Lua 5.1, base/table/string only (Argo CD runs gopher-lua); every field is guarded.
local hs = {}

local generation = 0
if obj.metadata ~= nil and obj.metadata.generation ~= nil then
  generation = obj.metadata.generation
end
local status = obj.status
if status == nil or status.observedGeneration == nil or status.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "waiting for the leader of the release's fromRing to observe generation " .. tostring(generation)
  return hs
end

local message = status.message or ""
if status.conditions ~= nil then
  for _, c in ipairs(status.conditions) do
    if c.type == "Valid" and c.status == "False" then
      hs.status = "Degraded"
      hs.message = c.message or message
      return hs
    end
  end
end

local phase = status.phase
if phase == "Succeeded" then
  hs.status = "Healthy"
elseif phase == "RolledBack" or phase == "Inconclusive" then
  hs.status = "Degraded"
elseif phase == "Paused" then
  hs.status = "Suspended"
else
  -- Pending, Progressing, or a phase this script does not know yet.
  hs.status = "Progressing"
end
hs.message = message
return hs
