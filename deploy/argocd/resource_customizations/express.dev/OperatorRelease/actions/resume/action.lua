-- resume: clears spec.paused.
if obj.spec == nil then
  obj.spec = {}
end
obj.spec.paused = false
return obj
