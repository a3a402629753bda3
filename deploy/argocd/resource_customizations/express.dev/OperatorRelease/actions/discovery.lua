-- Actions on an OperatorRelease: the same fields and annotations `kubectl express release`
-- writes (DESIGN section 12). Lua 5.1, base/table/string only; every field is guarded.
local actions = {}
local paused = obj.spec ~= nil and obj.spec.paused == true
local phase = nil
if obj.status ~= nil then
  phase = obj.status.phase
end
local over = phase == "Succeeded" or phase == "RolledBack"
actions["pause"] = {["disabled"] = paused or over}
actions["resume"] = {["disabled"] = not paused or over}
actions["promote"] = {["disabled"] = over}
actions["promote-full"] = {["disabled"] = over}
actions["abort"] = {["disabled"] = over}
return actions
