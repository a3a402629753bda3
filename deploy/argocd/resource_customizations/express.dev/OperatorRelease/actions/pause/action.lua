-- pause: spec.paused; nothing moves, nothing is judged, no bake time passes.
if obj.spec == nil then
  obj.spec = {}
end
obj.spec.paused = true
return obj
