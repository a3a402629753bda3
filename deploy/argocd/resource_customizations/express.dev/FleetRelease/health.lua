-- Health of a FleetRelease (DESIGN section 14), from the status the driver writes into every
-- DC's copy. Lua 5.1, base/table/string only (Argo CD runs gopher-lua); every field is guarded.
local hs = {}
local status = obj.status
if status == nil or status.phase == nil then
  hs.status = "Progressing"
  hs.message = "not driven yet: kubectl express fleet-release run NAME"
  return hs
end

local phase = status.phase
local message = status.message or ""
if phase == "Succeeded" then
  hs.status = "Healthy"
elseif phase == "Failed" or phase == "Aborted" or phase == "RolledBack" then
  hs.status = "Degraded"
elseif phase == "Paused" or phase == "WaitingApproval" or phase == "Inconclusive" then
  -- Waiting for a person (or for the infrastructure to recover): nothing moves by itself.
  hs.status = "Suspended"
else
  -- Pending, Progressing, Soaking, or a phase this script does not know yet.
  hs.status = "Progressing"
end
hs.message = message
return hs
