-- Health of an Express cluster, from the status express-operator writes.
-- Lua 5.1, base/table/string only (Argo CD runs gopher-lua); every field is guarded.
local hs = {}

local function condition(status, type_)
  if status == nil or status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == type_ then
      return c
    end
  end
  return nil
end

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

local message = status.message or ""
local rollout = status.rollout or {}
local state = rollout.state

local invalid = condition(status, "InvalidSpec")
if invalid ~= nil and invalid.status == "True" then
  hs.status = "Degraded"
  hs.message = "invalid spec: " .. (invalid.message or "")
  return hs
end

if status.phase == "Paused" or state == "Paused" then
  hs.status = "Suspended"
  hs.message = message
  return hs
end

if state == "Failed" or state == "Aborted" or state == "RollingBack" or status.phase == "Failed" then
  hs.status = "Degraded"
  hs.message = message
  return hs
end

local settled = condition(status, "DesiredStateSettled")
if settled ~= nil and settled.status == "False" and settled.reason == "Stalled" then
  hs.status = "Degraded"
  hs.message = settled.message or message
  return hs
end

if state == "Progressing" or status.phase == "Progressing" then
  local order = rollout.order or {}
  local completed = rollout.completed or {}
  local current = rollout.current or {}
  hs.status = "Progressing"
  if #current > 0 and #order > 0 then
    local k = #completed + 1
    if k > #order then
      k = #order
    end
    hs.message = "node " .. tostring(k) .. "/" .. tostring(#order) .. ": " .. table.concat(current, ", ") .. " changing"
  else
    hs.message = message
  end
  return hs
end

if status.phase == "Healthy" then
  hs.status = "Healthy"
  hs.message = message
  return hs
end

if status.phase == "Degraded" then
  hs.status = "Degraded"
  hs.message = message
  return hs
end

hs.status = "Progressing"
hs.message = message
return hs
