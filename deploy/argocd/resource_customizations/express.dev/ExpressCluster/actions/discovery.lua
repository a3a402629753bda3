-- Actions on an Express cluster: the same fields and annotations `kubectl express` writes
-- (DESIGN section 4). Lua 5.1, base/table/string only; every field is guarded.
local actions = {}
local paused = obj.spec ~= nil and obj.spec.paused == true
local state = nil
if obj.status ~= nil and obj.status.rollout ~= nil then
  state = obj.status.rollout.state
end
local halted = state == "Failed" or state == "Aborted" or state == "RollingBack"
actions["pause"] = {["disabled"] = paused}
actions["resume"] = {["disabled"] = not paused}
actions["abort"] = {["disabled"] = state ~= "Progressing"}
actions["abort-rollback"] = {["disabled"] = state ~= "Progressing"}
actions["retry"] = {["disabled"] = not halted}
return actions
