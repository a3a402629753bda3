-- Actions on an Express node: bounce (DESIGN section 6), the annotation `kubectl express
-- bounce` writes. Offered only for a node that is up. Lua 5.1, base/table/string only.
local actions = {}
local down = obj.spec ~= nil and obj.spec.up == false
actions["bounce"] = {["disabled"] = down}
return actions
