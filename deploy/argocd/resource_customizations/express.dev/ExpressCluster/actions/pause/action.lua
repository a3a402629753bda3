-- pause: spec.paused = true (DESIGN section 4: no pod is created, replaced or deleted while paused).
if obj.spec == nil then
  obj.spec = {}
end
obj.spec.paused = true
return obj
